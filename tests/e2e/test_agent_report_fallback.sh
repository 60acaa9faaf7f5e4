# Proves that the agent works with a coordinator older than the batched
# reports (POST /v1/agent/reports answers 404): the agent talks to the
# coordinator through a proxy that refuses that route; eight jobs end
# while the coordinator is stopped (SIGSTOP), the agent's batch is refused
# whole (by each of its report senders that had one on the way: at most
# 4), it sends the reports one at a time, never batching again; every
# job ends succeeded exactly as reported.
. "$(dirname "$0")/lib.sh"

start_coordinator --lease-ms 60000
PROXY_PORT=$(free_port)
spawn "$T/proxy.log" "$PY" "$(dirname "$0")/old_coordinator.py" \
    --listen "$PROXY_PORT" --upstream "127.0.0.1:$COORD_PORT" \
    --missing /v1/agent/reports
deadline=$((SECONDS + WAIT_S))
until curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/v1/whoami"; do
	[ $SECONDS -ge $deadline ] && fail "the proxy does not answer: $(tail -n 5 "$T/proxy.log")"
	sleep 0.1
done
start_agent alpha 8 --cpus 8 --coordinator "http://127.0.0.1:$PROXY_PORT"
wait_node_up alpha
end_jobs_while_coordinator_stopped alpha 8
grep -q 'coordinator refused a batch of reports status=404' "$T/agent-alpha.log" ||
    fail "the agent did not try a batch (or did not say it was refused): $(grep -c 'POST /v1/agent/reports' "$T/proxy.log") batches through the proxy"
# each of the agent's 4 report senders may have had a batch on the way
# before the first refusal was heard; none tries one after
tried=$(grep -c 'POST /v1/agent/reports 404' "$T/proxy.log")
[ "$tried" -ge 1 ] && [ "$tried" -le 4 ] || fail "$tried batches tried (1 to 4, one a sender, expected)"
# every finished report went one at a time, through the proxy
for j in "${ENDED_JOBS[@]}"; do
	grep -q "^POST /v1/agent/jobs/$j/1/finished 200" "$T/proxy.log" ||
	    fail "job $j's finished report did not go alone: $(grep "/jobs/$j/" "$T/proxy.log")"
done
log "ok: a coordinator without batched reports gets them one at a time"
