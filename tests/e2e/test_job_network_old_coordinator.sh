#!/usr/bin/env bash
# Version skew (issue 14, accounting): an agent that counts its jobs'
# network bytes with a coordinator that says it takes them but refuses
# them (400), as one older than them would if it ever said so. Through a
# proxy that plays it: the agent sends the heartbeat's "network" once,
# hears the refusal and sends heartbeats without it from then on; the
# finished report with net_sent_bytes is refused and goes again without
# them; the job ends as it should.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip root "job networks need it"
command -v nft >/dev/null 2>&1 || skip nft "job networks need it"
start_coordinator
PROXY_PORT=$(free_port)
spawn "$T/proxy.log" "$PY" "$(dirname "$0")/old_coordinator.py" \
    --listen "$PROXY_PORT" --upstream "127.0.0.1:$COORD_PORT" \
    --refuse-field /v1/agent/heartbeat:network \
    --refuse-field '/v1/agent/jobs/*:net_sent_bytes' \
    --refuse-field /v1/agent/reports:net_sent_bytes
deadline=$((SECONDS + WAIT_S))
until curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/v1/whoami"; do
	[ $SECONDS -ge $deadline ] && fail "the proxy does not answer: $(tail -n 5 "$T/proxy.log")"
	sleep 0.1
done
start_agent n 1:T4:16384 --coordinator "http://127.0.0.1:$PROXY_PORT"
wait_node_up n
grep -q "job networks ready" "$T/agent-n.log" ||
    skip "job networks" "$(grep -m1 "job network" "$T/agent-n.log")"
submit --gpus 1 --time 2m -- sh -c "$(gated_job_cmd)"
job=$JOB
wait_state "$job" running
deadline=$((SECONDS + WAIT_S))
until grep -q "coordinator refused the job network report" "$T/agent-n.log"; do
	[ $SECONDS -ge $deadline ] && fail "the agent never sent (or never heard the refusal of) its network report"
	sleep 0.2
done
refused=$(grep -c "POST /v1/agent/heartbeat 400" "$T/proxy.log")
ok_before=$(grep -c "POST /v1/agent/heartbeat 200" "$T/proxy.log")
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "POST /v1/agent/heartbeat 200" "$T/proxy.log")" -ge $((ok_before + 3)) ]; do
	[ $SECONDS -ge $deadline ] && fail "no accepted heartbeats after the refusal"
	sleep 0.2
done
assert_eq "$refused" "$(grep -c "POST /v1/agent/heartbeat 400" "$T/proxy.log")" \
    "heartbeats refused (only the first with network)"
assert_eq 1 "$refused" "heartbeats refused"
release_job n "$job"
wait_final "$job"
assert_eq succeeded "$FINAL_STATE" "the job, its finished report refused once"
grep -q "coordinator refused a finished report with network bytes" "$T/agent-n.log" ||
    fail "the finished report was not refused with its network bytes: $(grep "/v1/agent/" "$T/proxy.log" | tail -n 5)"
echo ok
