# Proves GPU accounting and admission: on a node with 2 GPUs, three 1-GPU
# jobs never run more than two at a time (the third waits queued, then runs
# once a GPU frees), and jobs that no registered node could ever run (too
# many GPUs, unknown model, too much GPU memory) are refused at submit with a
# non-zero exit and a message, while jobs that fit by model and memory are
# accepted. `ps` lists the jobs.
. "$(dirname "$0")/lib.sh"

start_coordinator
# --cpus 8: GPUs, not CPUs, must be what limits the node here
start_agent alpha "2:NVIDIA A100-SXM4-40GB:40960" --cpus 8
wait_node_up alpha

api_expect 200 "$ADMIN_TOKEN" GET /v1/nodes
assert_eq 2 "$(printf '%s' "$API_BODY" | json '[len(n["gpus"]) for n in d["nodes"] if n["name"] == "alpha"][0]')" "alpha's GPU count"
assert_eq "NVIDIA A100-SXM4-40GB" "$(printf '%s' "$API_BODY" | json '[n["gpus"][0]["model"] for n in d["nodes"] if n["name"] == "alpha"][0]')" "alpha's GPU model"
assert_eq 40960 "$(printf '%s' "$API_BODY" | json '[n["gpus"][0]["mem_mib"] for n in d["nodes"] if n["name"] == "alpha"][0]')" "alpha's GPU memory"

jobs=()
for i in 1 2 3; do
	submit --gpus 1 --name "q$i" -- sleep 3
	jobs+=("$JOB")
done

# snapshot: the states of our three jobs from one GET /v1/jobs?all=1
snapshot() {
	api "$ADMIN_TOKEN" GET '/v1/jobs?all=1'
	[ "$API_STATUS" = 200 ] || fail "GET /v1/jobs?all=1: HTTP $API_STATUS"
	SNAP=$(printf '%s' "$API_BODY" | E2E_IDS="${jobs[*]}" json '
" ".join(next((x["state"] for x in d["jobs"] if x["id"] == int(i)), "missing")
         for i in __import__("os").environ["E2E_IDS"].split())')
}
count() { # STATE: how many of SNAP's states are STATE
	local n=0 s
	for s in $SNAP; do [ "$s" = "$1" ] && n=$((n + 1)); done
	echo $n
}

# `ps` (no --all) lists all three while they are queued or running
cli ps --json
[ "$CLI_RC" = 0 ] || fail "ps --json exited $CLI_RC: $CLI_ERR"
ids=$(printf '%s' "$CLI_OUT" | json '" ".join(str(x["id"]) for x in (d["jobs"] if isinstance(d, dict) else d))')
for id in "${jobs[@]}"; do
	[[ " $ids " == *" $id "* ]] || fail "ps does not list job $id ($ids)"
done
cli ps
[ "$CLI_RC" = 0 ] || fail "ps exited $CLI_RC: $CLI_ERR"
for id in "${jobs[@]}"; do
	assert_contains "$CLI_OUT" "$id" "plain ps"
done

saw_two=0
deadline=$((SECONDS + WAIT_S))
while :; do
	snapshot
	r=$(count running)
	[ "$r" -le 2 ] || fail "$r one-GPU jobs running at once on a 2-GPU node ($SNAP)"
	if [ "$r" = 2 ] && [ "$(count succeeded)" = 0 ]; then
		saw_two=1
		assert_eq 1 "$(count queued)" "jobs queued while two run ($SNAP)"
	fi
	[ "$(count succeeded)" = 3 ] && break
	case $SNAP in *failed* | *cancelled* | *timeout* | *missing*)
		fail "unexpected job states: $SNAP" ;;
	esac
	[ $SECONDS -ge $deadline ] && fail "jobs not all done after ${WAIT_S}s: $SNAP"
	sleep 0.1
done
[ $saw_two = 1 ] || fail "never saw two jobs running at once"

# From the recorded times: at no instant did more than two run.
for id in "${jobs[@]}"; do
	job_get "$id" '"%s %s" % (d["started_at"], d["finished_at"])'
done >"$T/intervals"
"$PY" - "$T/intervals" <<'EOF' || fail "more than two jobs overlapped in time: $(cat "$T/intervals")"
import sys
iv = [l.split() for l in open(sys.argv[1]) if l.strip()]
for s, _ in iv:
    if sum(1 for a, b in iv if a <= s < b) > 2:
        sys.exit(1)
EOF

# --- admission: refused at submit when no node could ever run the job
refuse() { # WHAT GREP-PATTERN ARGS...
	local what=$1 pat=$2
	shift 2
	cli submit "$@" -- true
	[ "$CLI_RC" != 0 ] || fail "$what: submit exited 0 (printed '$CLI_OUT')"
	[ -n "$CLI_ERR" ] || fail "$what: no message on stderr"
	printf '%s' "$CLI_ERR" | grep -qiE "$pat" || fail "$what: unclear message: $CLI_ERR"
}
refuse "--gpus 3 on 2-GPU nodes" 'gpu|fit|node' --gpus 3
refuse "--gpu-model not on any node" 'model|gpu|fit|node' --gpu-model H100
refuse "--min-gpu-mem over every GPU" 'mem|gpu|fit|node' --min-gpu-mem 50000
refuse "--gpu-mem (a fraction) over every GPU" 'mem|gpu|fit|node' --gpu-mem 50000

# the API answers 422 with the largest offer named
api_expect 422 "$ADMIN_TOKEN" POST /v1/jobs '{"command":["true"],"gpus":3}'
assert_error_body "422 for gpus 3"

# and what does fit is accepted: model substring, case-insensitive, memory
submit --gpus 2 --gpu-model a100 --min-gpu-mem 40960 -- true
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "job asking exactly what the node has"
assert_eq succeeded "$(job_state "$JOB")" "job asking exactly what the node has"

cli ps --all --json
ids=$(printf '%s' "$CLI_OUT" | json '" ".join(str(x["id"]) for x in (d["jobs"] if isinstance(d, dict) else d))')
for id in "${jobs[@]}" "$JOB"; do
	[[ " $ids " == *" $id "* ]] || fail "ps --all does not list job $id ($ids)"
done
echo ok
