# Proves the batch of agent reports (POST /v1/agent/reports): one request
# starts and finishes several jobs, each report answered on its own (a
# stale one gets 409 and "kill" while the others apply); a batch with one
# bad report is refused whole (400, nothing applied); another provider's
# batch for the node is refused (403); an oversized batch is refused.
# The agent is simulated with curl so that the test decides what is sent.
. "$(dirname "$0")/lib.sh"

# A long lease: the curl agent does not heartbeat.
start_coordinator --lease-ms 600000
mk_token provider prov-a
prov=$TOKEN
mk_token provider prov-b
other=$TOKEN
reg='{"protocol":1,"name":"curlnode","cpus":4,"mem_mib":4000,"gpus":[{"index":0,"uuid":"GPU-rep-0","model":"Fake","mem_mib":1000},{"index":1,"uuid":"GPU-rep-1","model":"Fake","mem_mib":1000}],"running":[]}'
api_expect 200 "$prov" POST /v1/agent/register "$reg"
nid=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
is_uint "$nid" || fail "register answer lacks node_id: $API_BODY"

submit --gpus 1 -- true
a=$JOB
submit --gpus 1 -- true
b=$JOB
submit --gpus 1 -- true
c=$JOB
# The node takes two of the three.
got=()
deadline=$((SECONDS + WAIT_S))
while [ ${#got[@]} -lt 2 ]; do
	[ $SECONDS -ge $deadline ] && fail "only ${#got[@]} assignments: $API_BODY"
	api_expect 200 "$prov" GET "/v1/agent/poll?node_id=$nid&wait_ms=1000"
	for j in $(printf '%s' "$API_BODY" | json '" ".join("%d:%d" % (x["job_id"], x["attempt"]) for x in d["assignments"])'); do
		got+=("$j")
	done
done
j1=${got[0]%:*} t1=${got[0]#*:} j2=${got[1]%:*} t2=${got[1]#*:}
[ "$j1" != "$j2" ] || fail "the same job twice: ${got[*]}"
for j in "$j1" "$j2"; do
	[ "$j" = "$a" ] || [ "$j" = "$b" ] || [ "$j" = "$c" ] ||
	    fail "assignment of unknown job $j"
done

ok_started="{\"job_id\":$j1,\"attempt\":$t1,\"event\":\"started\",\"pid\":10}"
ok_finished="{\"job_id\":$j1,\"attempt\":$t1,\"event\":\"finished\",\"exit_code\":0,\"signal\":0,\"reason\":\"exited\",\"message\":\"\"}"

# One bad report in the batch: all refused, nothing applied.
api_expect 400 "$prov" POST /v1/agent/reports "{\"node_id\":$nid,\"reports\":[$ok_started,$ok_finished,{\"job_id\":$j2,\"attempt\":$t2,\"event\":\"finished\",\"reason\":\"nope\"}]}"
assert_error_body "batch with a bad reason"
assert_contains "$API_BODY" "reports[2]" "the error names the bad report"
assert_eq running "$(job_state "$j1")" "job $j1 after a refused batch"
# Not an object, an unknown event, an empty list, too many.
api_expect 400 "$prov" POST /v1/agent/reports "{\"node_id\":$nid,\"reports\":[1]}"
api_expect 400 "$prov" POST /v1/agent/reports "{\"node_id\":$nid,\"reports\":[{\"job_id\":$j1,\"attempt\":$t1,\"event\":\"paused\"}]}"
api_expect 400 "$prov" POST /v1/agent/reports "{\"node_id\":$nid,\"reports\":[]}"
big=$("$PY" -c 'import sys; print("{\"node_id\":%s,\"reports\":[%s]}" % (sys.argv[1], ",".join(["{\"job_id\":1,\"attempt\":1,\"event\":\"started\"}"] * 1025)))' "$nid")
api_expect 400 "$prov" POST /v1/agent/reports "$big"
assert_contains "$API_BODY" "1 to 1024" "the limit is said"

# Another provider may not report for this node.
api_expect 403 "$other" POST /v1/agent/reports "{\"node_id\":$nid,\"reports\":[$ok_started,$ok_finished]}"
assert_error_body "another provider's batch"
assert_eq running "$(job_state "$j1")" "job $j1 after another provider's batch"

# The real thing: two jobs started and finished in one request, plus a
# report for an attempt that is not the job's (stale: 409, kill).
batch="{\"node_id\":$nid,\"reports\":[$ok_started,$ok_finished,"
batch+="{\"job_id\":$j2,\"attempt\":$t2,\"event\":\"started\",\"pid\":11},"
batch+="{\"job_id\":$j2,\"attempt\":$t2,\"event\":\"finished\",\"exit_code\":3,\"signal\":0,\"reason\":\"exited\",\"message\":\"three\"},"
batch+="{\"job_id\":$j1,\"attempt\":$((t1 + 7)),\"event\":\"started\",\"pid\":12}]}"
api_expect 200 "$prov" POST /v1/agent/reports "$batch"
assert_eq "[200, 200, 200, 200, 409]" "$(printf '%s' "$API_BODY" | json '[r["status"] for r in d["results"]]')" "per-report statuses"
assert_eq true "$(printf '%s' "$API_BODY" | json 'd["results"][4]["kill"]')" "the stale report is told to kill"
assert_eq succeeded "$(job_state "$j1")" "job $j1"
assert_eq failed "$(job_state "$j2")" "job $j2"
assert_eq 3 "$(job_get "$j2" 'd["exit_code"]')" "job $j2's exit code"
# Reported again: both attempts are over now.
api_expect 200 "$prov" POST /v1/agent/reports "{\"node_id\":$nid,\"reports\":[$ok_finished]}"
assert_eq "[409]" "$(printf '%s' "$API_BODY" | json '[r["status"] for r in d["results"]]')" "a finished attempt reported again"
# The GPUs freed by the batch take the third job.
for j in "$a" "$b" "$c"; do
	[ "$j" != "$j1" ] && [ "$j" != "$j2" ] && third=$j
done
wait_state "$third" running
log "ok: batched reports apply each in order, refuse bad batches whole"
