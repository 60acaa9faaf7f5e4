# Provider first through a checkpoint (issue 5): lab-b's job borrows the one
# GPU lab-a lends; when lab-a's own job comes, the coordinator asks the
# borrowed job's agent to save and stop (checkpoint signal, grace, final
# upload), requeues it with reason "preempted", and only then starts lab-a's
# job on that GPU (never two jobs on it). The borrowed job waits with a
# reason while no other GPU is free, then resumes on lab-b's own node at
# exactly the step it saved (no work lost).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"
. "$(dirname "$0")/acct_lib.sh"

start_coordinator --checkpoint-keep 1000
cli group create lab-a
assert_eq 0 "$CLI_RC" "group create lab-a ($CLI_ERR)"
cli group create lab-b
assert_eq 0 "$CLI_RC" "group create lab-b ($CLI_ERR)"
acct_provider a prov-a lab-a
acct_provider b prov-b lab-b
acct_token user alice lab-a
alice=$TOKEN
acct_token user bob lab-b
bob=$TOKEN

start_provider a 1
wait_node_up a
GPUPOOL_TOKEN=$bob submit_steps 150 5 0.1
j=$JOB
wait_state "$j" running
assert_eq a "$(job_get "$j" 'd["node"]')" "bob's job borrows lab-a's GPU"
wait_ckpt "$j" 2

# lab-a's own job: bob's is asked to save and stop, alice's waits for it
depart "$j"
new_marker
ma=$MARK
GPUPOOL_TOKEN=$alice submit --gpus 1 --name own -- bash -c 'exec -a "$0" sleep 300' "$ma"
ja=$JOB
wait_state "$ja" running
assert_eq a "$(job_get "$ja" 'd["node"]')" "lab-a's job on lab-a's GPU"
assert_eq preempted "$(history_reason "$j" 1)" "why bob's first attempt ended"
assert_eq "$ja" "$(job_get "$j" '[h.get("preempted_for") for h in d["history"] if h["attempt"] == 1][0]')" "the job it was preempted for"
# only once the victim had stopped did lab-a's job start
after=$(job_get "$ja" '"%s" % d["started_at"]')
ended=$(job_get "$j" '[h["finished_at"] for h in d["history"] if h["attempt"] == 1][0]')
[[ "$ended" < "$after" || "$ended" == "$after" ]] ||
    fail "lab-a's job started at $after, before bob's attempt ended at $ended"
wait_count argv0 "$ma" 1
api_expect 200 "$ADMIN_TOKEN" GET /metrics
grep -q '^gpupool_job_requeues_total{reason="preempted"} 1$' <<<"$API_BODY" ||
    fail "/metrics counts the preemption: $(printf '%s\n' "$API_BODY" | grep requeues)"

# bob's job waits, with a reason, in the queue and in ps/show
assert_eq queued "$(job_state "$j")" "bob's job while no GPU is free"
deadline=$((SECONDS + WAIT_S))
while :; do
	r=$(job_get "$j" '(d["wait"] or {}).get("reason")')
	[ "$r" = resources ] && break
	[ $SECONDS -ge $deadline ] && fail "bob's job: wait reason '$r', not resources: $(job_get "$j" d)"
	sleep 0.1
done
GPUPOOL_TOKEN=$bob cli queue
assert_eq 0 "$CLI_RC" "queue ($CLI_ERR)"
[[ $CLI_OUT =~ (^|$'\n')\ *1\ +$j\ +steps\ +bob\ +lab-b\ +1\ +resources ]] ||
    fail "queue: bob's job first, waiting for resources: $CLI_OUT"
GPUPOOL_TOKEN=$bob cli show "$j"
assert_contains "$CLI_OUT" "wait: resources" "show's wait line"
assert_contains "$CLI_OUT" "reason=preempted" "show's history"

# lab-b's own node comes: bob's job resumes there where it saved
start_provider b 1
wait_node_up b
wait_moved "$j" b 2
finish_and_check "$j" 150 1
assert_eq running "$(job_state "$ja")" "lab-a's job is untouched"
cli cancel "$ja"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait_state "$ja" cancelled
echo ok
