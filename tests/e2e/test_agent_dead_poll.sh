# An agent killed with its long poll suspended at the coordinator leaves
# that poll behind (a suspended connection is not watched for a hang-up).
# When the node's next agent process registers, what was placed on the node
# and never started is delivered again; the dead poll must not carry it
# away (it used to: the part sat "on its way" until the lost grace and came
# back as a new attempt). The agent is simulated with curl so that the test
# decides what is sent and when.
. "$(dirname "$0")/lib.sh"

polls_waiting() {
	api_expect 200 "$ADMIN_TOKEN" GET /metrics
	printf '%s\n' "$API_BODY" |
	    sed -n 's/^gpupool_agent_polls_waiting \([0-9.e+]*\)$/\1/p'
}
wait_polls_waiting() { # N
	local deadline=$((SECONDS + WAIT_S))
	until [ "$(polls_waiting)" = "$1" ]; do
		[ $SECONDS -ge $deadline ] &&
		    fail "polls waiting: $(polls_waiting), expected $1"
		sleep 0.1
	done
}

# A long lease: the curl agent does not heartbeat.
start_coordinator --lease-ms 600000
mk_token provider prov-a
prov=$TOKEN
reg='{"protocol":1,"name":"curlnode","cpus":4,"mem_mib":4000,"gpus":[{"index":0,"uuid":"GPU-dead-0","model":"Fake","mem_mib":1000}],"running":[]}'
api_expect 200 "$prov" POST /v1/agent/register "$reg"
nid=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
is_uint "$nid" || fail "register answer lacks node_id: $API_BODY"

submit --gpus 1 -- true
job=$JOB
deadline=$((SECONDS + WAIT_S))
got=
while [ -z "$got" ]; do
	[ $SECONDS -ge $deadline ] && fail "no assignment: $API_BODY"
	api_expect 200 "$prov" GET "/v1/agent/poll?node_id=$nid&wait_ms=1000"
	got=$(printf '%s' "$API_BODY" | json '" ".join("%d:%d" % (x["job_id"], x["attempt"]) for x in d["assignments"])')
done
assert_eq "$job:1" "$got" "the first assignment"

# The agent polls again (and never reports the start), then dies: its
# poll stays suspended at the coordinator.
wait_polls_waiting 0
spawn "$T/deadpoll.out" curl -sS --max-time 60 \
    -H "Authorization: Bearer $prov" \
    "$(coord_url)/v1/agent/poll?node_id=$nid&wait_ms=30000"
dead=$SPAWNED_PID
wait_polls_waiting 1
kill -9 "$dead"
wait_exit "$dead"
assert_eq 1 "$(polls_waiting)" "the dead agent's poll, still held"

# The node's next agent process registers, running nothing.
api_expect 200 "$prov" POST /v1/agent/register "$reg"
assert_eq "$nid" "$(printf '%s' "$API_BODY" | json 'd["node_id"]')" "the same node"
wait_polls_waiting 0
# Its first poll gets the unstarted part again, the same attempt.
api_expect 200 "$prov" GET "/v1/agent/poll?node_id=$nid&wait_ms=5000"
got=$(printf '%s' "$API_BODY" | json '" ".join("%d:%d" % (x["job_id"], x["attempt"]) for x in d["assignments"])')
assert_eq "$job:1" "$got" "the assignment after the re-registration"
assert_eq 1 "$(job_get "$job" 'd["attempts"]')" "attempts of the job"

# A superseded poll of a live agent answers at once, empty, and leaves
# the outbox to the newer poll.
spawn "$T/oldpoll.out" curl -sS --max-time 60 \
    -H "Authorization: Bearer $prov" \
    "$(coord_url)/v1/agent/poll?node_id=$nid&wait_ms=30000"
old=$SPAWNED_PID
wait_polls_waiting 1
spawn "$T/newpoll.out" curl -sS --max-time 60 \
    -H "Authorization: Bearer $prov" \
    "$(coord_url)/v1/agent/poll?node_id=$nid&wait_ms=30000"
new=$SPAWNED_PID
wait_exit "$old"
assert_contains "$(cat "$T/oldpoll.out")" '"assignments":[]' "the superseded poll's answer"
wait_polls_waiting 1
api_expect 200 "$ADMIN_TOKEN" POST "/v1/jobs/$job/cancel"
wait_exit "$new"
assert_contains "$(cat "$T/newpoll.out")" "\"job_id\":$job" "the newer poll gets the cancel"
echo ok
