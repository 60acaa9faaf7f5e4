# Fractions of a GPU end to end (issue 5): two half-GPU jobs share the one
# GPU of a node, run at the same time, and each is told its share
# (GPUPOOL_GPU_SHARE, GPUPOOL_GPU_MEM_MIB, the same CUDA_VISIBLE_DEVICES); a
# third half waits with its reason while both hold the GPU, and a whole-GPU
# job is not given a shared GPU. --compute-capability and --min-gpu-mem
# pick GPUs by what the agent reports; a job no GPU could ever satisfy is
# refused with why. `nodes` and the node JSON list the shares.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent f 1:A100:40960:8.0
wait_node_up f
api_expect 200 "$ADMIN_TOKEN" GET /v1/nodes
assert_eq 8.0 "$(printf '%s' "$API_BODY" | json 'd["nodes"][0]["gpus"][0]["compute_capability"]')" "the GPU's reported capability"

new_marker
m=$MARK
script='echo "share=$GPUPOOL_GPU_SHARE mem=$GPUPOOL_GPU_MEM_MIB cvd=$CUDA_VISIBLE_DEVICES"; exec -a "$0" sleep 300'
submit --gpu-share 0.5 --name half1 -- bash -c "$script" "$m"
h1=$JOB
submit --gpu-share 0.5 --gpu-mem 8G --name half2 -- bash -c "$script" "$m"
h2=$JOB
wait_state "$h1" running
wait_state "$h2" running
wait_count argv0 "$m" 2
for j in "$h1" "$h2"; do
	assert_eq "f 0 0.5" "$(job_get "$j" '"%s %s %s" % (d["node"], d["gpus"][0], d["parts"][0]["gpu_share"])')" "job $j's place"
done
deadline=$((SECONDS + WAIT_S))
while :; do
	job_log "$h1"
	l1=$LOG
	job_log "$h2"
	[ -n "$l1" ] && [ -n "$LOG" ] && break
	[ $SECONDS -ge $deadline ] && fail "no output from the halves: '$l1' '$LOG'"
	sleep 0.1
done
assert_eq "share=0.500 mem=20480 cvd=0" "$l1" "half1's environment (its share of 40 GiB)"
assert_eq "share=0.500 mem=8192 cvd=0" "$LOG" "half2's environment (the memory it asked)"
# each half pays half a GPU's price (the default price: 1 credit an hour)
assert_eq 500000 "$(job_get "$h1" 'd["history"][0]["rate_micro"]')" "half1's rate (micro-credits an hour)"
api_expect 200 "$ADMIN_TOKEN" GET /v1/nodes
assert_eq "$h1:0.5 $h2:0.5" "$(printf '%s' "$API_BODY" | json '" ".join("%d:%s" % (s["job"], s["share"]) for s in sorted(d["nodes"][0]["gpus"][0]["shares"], key=lambda s: s["job"]))')" "the GPU's shares"

# a third half waits, with a reason; so does a whole GPU
submit --gpu-share 0.5 --name half3 -- true
h3=$JOB
submit --gpus 1 --name whole -- true
w=$JOB
deadline=$((SECONDS + WAIT_S))
while :; do
	r3=$(job_get "$h3" '(d["wait"] or {}).get("reason")')
	rw=$(job_get "$w" '(d["wait"] or {}).get("reason")')
	[ "$r3" = resources ] && [ "$rw" = resources ] && break
	[ $SECONDS -ge $deadline ] && fail "half3 waits for '$r3', whole for '$rw': $(job_get "$h3" d)"
	sleep 0.1
done
assert_eq queued "$(job_state "$h3")" "the third half"
cli queue
assert_contains "$CLI_OUT" "half3" "queue lists the third half"
[[ $CLI_OUT =~ $h3\ +half3\ +admin\ +default\ +0\.5\ +resources ]] || fail "queue's row of half3: $CLI_OUT"

# constraints: capability and total memory, as the agent reports them
cli submit --compute-capability 9.0 -- true
assert_eq 1 "$CLI_RC" "capability 9.0 on an 8.0 pool"
assert_contains "$CLI_ERR" "no node in the pool can ever run this job" "capability refusal"
cli submit --min-gpu-mem 80G -- true
assert_eq 1 "$CLI_RC" "80G GPUs in a 40G pool"
cli submit --gpu-share 0.5 --gpu-mem 48G -- true
assert_eq 1 "$CLI_RC" "a half asking for more memory than the GPU has"

# one half ends: the third half takes its place (not the whole job)
cli cancel "$h1"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait_state "$h3" succeeded
assert_eq queued "$(job_state "$w")" "the whole job while half2 runs"
cli cancel "$h2"
wait_state "$w" succeeded
submit --compute-capability 8.0 --min-gpu-mem 40G -- true
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "a job whose constraints the GPU meets"
echo ok
