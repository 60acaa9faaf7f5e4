# The owner's reclaim of an interactive job reaches its terminals (issue 17
# B): a stream attached to the job (gpupool exec) hears "the owner takes
# this machine back ... ends in N s" from the agent's reclaim hook during
# the grace; then the job ends (failed, reclaimed, one attempt) and the
# stream with it (the CLI exits non-zero).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"
require netns

start_coordinator
policy_file a "checkpoint-grace = 4s"
start_provider a 1
wait_node_up a
submit --interactive --gpus 1 --name shell -- sh -c "$(gated_job_cmd)"
job=$JOB
wait_state "$job" running
spawn "$T/exec.out" "$GP" exec "$job" -- sleep 60
EXEC_PID=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q "stream started id=[0-9]* job=$job " "$T/agent-a.log"; do
	alive "$EXEC_PID" || fail "gpupool exec exited: $(cat "$T/exec.out")"
	[ $SECONDS -ge $deadline ] && fail "no stream into job $job"
	sleep 0.1
done
# (reclaim answers once the GPU is free: after the grace)
provider a reclaim
assert_eq 0 "$CLI_RC" "provider a reclaim: $CLI_ERR"
deadline=$((SECONDS + WAIT_S))
until grep -q "the owner takes this machine back (reclaimed): job $job ends in 4 s" "$T/exec.out"; do
	[ $SECONDS -ge $deadline ] && fail "the terminal was not warned: $(cat "$T/exec.out")"
	sleep 0.1
done
wait_final "$job"
assert_eq failed "$FINAL_STATE" "the reclaimed interactive job"
assert_eq reclaimed "$(job_get "$job" 'd["reason"]')" "why it ended"
assert_eq 1 "$(job_get "$job" 'd["attempts"]')" "not moved"
wait_exit "$EXEC_PID" || fail "gpupool exec outlived the job"
wait "$EXEC_PID" 2>/dev/null
echo ok
