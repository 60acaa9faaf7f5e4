#!/usr/bin/env bash
# Version skew: an agent that enforces GPU sharing with a coordinator
# older than the heartbeat's "gpushare" report (which it refuses, 400).
# The agent sends it once, hears the refusal, and sends heartbeats
# without it from then on; its fractional jobs keep running and end as
# they should. Through a proxy that plays the older coordinator.
. "$(dirname "$0")/gpushare_lib.sh"

start_coordinator
PROXY_PORT=$(free_port)
spawn "$T/proxy.log" "$PY" "$(dirname "$0")/old_coordinator.py" \
    --listen "$PROXY_PORT" --upstream "127.0.0.1:$COORD_PORT" \
    --refuse-field /v1/agent/heartbeat:gpushare
deadline=$((SECONDS + WAIT_S))
until curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/v1/whoami"; do
	[ $SECONDS -ge $deadline ] && fail "the proxy does not answer: $(tail -n 5 "$T/proxy.log")"
	sleep 0.1
done
start_agent g 1:FakeGPU:1024 --coordinator "http://127.0.0.1:$PROXY_PORT" \
    --policy "$GPUSHARE_POLICY"
wait_node_up g
submit --gpu-share 0.5 --gpu-mem 256 --env "LD_LIBRARY_PATH=$FAKE" -- \
    "$FAKE/cudaprog" procaddr alloc:1000 waitfile:"$T/release"
job=$JOB
wait_state "$job" running
deadline=$((SECONDS + WAIT_S))
until grep -q "coordinator refused the GPU sharing report" "$T/agent-g.log"; do
	[ $SECONDS -ge $deadline ] && fail "the agent never sent (or never heard the refusal of) its gpushare report"
	sleep 0.2
done
# Heartbeats go on, accepted, after the one refusal.
refused=$(grep -c "POST /v1/agent/heartbeat 400" "$T/proxy.log")
ok_before=$(grep -c "POST /v1/agent/heartbeat 200" "$T/proxy.log")
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "POST /v1/agent/heartbeat 200" "$T/proxy.log")" -ge $((ok_before + 3)) ]; do
	[ $SECONDS -ge $deadline ] && fail "no accepted heartbeats after the refusal"
	sleep 0.2
done
assert_eq "$refused" "$(grep -c "POST /v1/agent/heartbeat 400" "$T/proxy.log")" \
    "heartbeats refused (only the first with gpushare)"
assert_eq 1 "$refused" "heartbeats refused"
assert_eq running "$(job_state "$job")" "the fractional job"
touch "$T/release"
wait_final "$job"
assert_eq succeeded "$FINAL_STATE" "the fractional job"
echo ok
