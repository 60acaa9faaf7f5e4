# Proves that the real agent batches its reports (POST /v1/agent/reports)
# when several are due at once: eight jobs end while the coordinator is
# stopped (SIGSTOP); once it runs again the agent's reports go out, some
# of them in one batch, and every job ends succeeded exactly as reported.
. "$(dirname "$0")/lib.sh"

# A long lease: the coordinator's pause must not expire the node.
start_coordinator --lease-ms 60000
start_agent alpha 8 --cpus 8
wait_node_up alpha
end_jobs_while_coordinator_stopped alpha 8
grep -q 'reports sent in one batch reports=[2-8] delivered=[2-8]' "$T/agent-alpha.log" ||
    fail "no batch of reports: $(grep -c 'report' "$T/agent-alpha.log") report lines"
log "ok: reports due together go in one batch"
