# Proves that the real agent batches its reports (POST /v1/agent/reports)
# when several are due at once: eight jobs end while the coordinator is
# stopped (SIGSTOP); once it runs again the agent's reports go out, some
# of them in one batch, and every job ends succeeded exactly as reported.
. "$(dirname "$0")/lib.sh"

# A long lease: the coordinator's pause must not expire the node.
start_coordinator --lease-ms 60000
start_agent alpha 8 --cpus 8
wait_node_up alpha
jobs=()
for i in 1 2 3 4 5 6 7 8; do
	submit --gpus 1 -- sh -c "sleep 2; exit 0"
	jobs+=("$JOB")
done
for j in "${jobs[@]}"; do wait_state "$j" running; done
kill -STOP "$COORD_PID"
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c 'job finished job=' "$T/agent-alpha.log")" -ge 8 ]; do
	if [ $SECONDS -ge $deadline ]; then
		kill -CONT "$COORD_PID"
		fail "the jobs did not end: $(tail -n 5 "$T/agent-alpha.log")"
	fi
	sleep 0.2
done
kill -CONT "$COORD_PID"
for j in "${jobs[@]}"; do
	wait_final "$j"
	assert_eq succeeded "$FINAL_STATE" "job $j"
done
grep -q 'reports sent in one batch reports=[2-8] delivered=[2-8]' "$T/agent-alpha.log" ||
    fail "no batch of reports: $(grep -c 'report' "$T/agent-alpha.log") report lines"
log "ok: reports due together go in one batch"
