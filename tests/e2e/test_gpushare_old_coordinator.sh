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
one_refused_heartbeat "$T/proxy.log" "$T/agent-g.log" \
    "coordinator refused the GPU sharing report" "gpushare report"
assert_eq running "$(job_state "$job")" "the fractional job"
touch "$T/release"
wait_final "$job"
assert_eq succeeded "$FINAL_STATE" "the fractional job"
echo ok
