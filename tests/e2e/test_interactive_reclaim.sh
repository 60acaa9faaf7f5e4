# The owner's reclaim of an interactive job reaches its terminals (issue 17
# B): a quiet stream attached to the job (gpupool exec) hears "the owner
# takes this machine back ... ends in N s" from the agent's reclaim hook
# during the grace, while its command still runs; then the job ends
# (failed, reclaimed, one attempt) and the stream with it (the CLI exits
# non-zero).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"
require netns

start_coordinator
policy_file a "checkpoint-grace = 6s"
start_provider a 1
wait_node_up a
submit --interactive --gpus 1 --name shell -- sh -c "$(gated_job_cmd)"
job=$JOB
wait_state "$job" running
# A quiet stream: cat, whose input the test holds open (fd 7).
mkfifo "$T/exec.in"
setsid "$GP" exec "$job" -- cat <"$T/exec.in" >"$T/exec.out" 2>&1 &
EXEC_PID=$!
STARTED_PIDS+=("$EXEC_PID")
exec 7>"$T/exec.in"
deadline=$((SECONDS + WAIT_S))
until grep -q "stream started id=[0-9]* job=$job " "$T/agent-a.log"; do
	alive "$EXEC_PID" || fail "gpupool exec exited: $(cat "$T/exec.out")"
	[ $SECONDS -ge $deadline ] && fail "no stream into job $job"
	sleep 0.1
done
# (reclaim answers once the GPU is free: after the grace)
GPUPOOL_AGENT_SOCKET="$T/a.sock" spawn "$T/reclaim.log" "$GP" provider reclaim
RECLAIM_PID=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q "the owner takes this machine back (reclaimed): job $job ends in 6 s" "$T/exec.out"; do
	[ $SECONDS -ge $deadline ] && fail "the terminal was not warned: $(cat "$T/exec.out")"
	sleep 0.1
done
# The notice came during the grace, to a stream that sat quiet: its
# command still runs and answers (an agent that sent the notice only
# when its stream woke for something else sent it as the job died).
(echo still-here >&7) 2>/dev/null
deadline=$((SECONDS + WAIT_S))
until grep -q still-here "$T/exec.out"; do
	[ $SECONDS -ge $deadline ] && fail "the stream did not answer after the notice: $(cat "$T/exec.out")"
	sleep 0.1
done
wait_exit "$RECLAIM_PID" || fail "provider reclaim did not answer"
wait "$RECLAIM_PID"
assert_eq 0 "$?" "provider a reclaim: $(cat "$T/reclaim.log")"
wait_final "$job"
assert_eq failed "$FINAL_STATE" "the reclaimed interactive job"
assert_eq reclaimed "$(job_get "$job" 'd["reason"]')" "why it ended"
assert_eq 1 "$(job_get "$job" 'd["attempts"]')" "not moved"
wait_exit "$EXEC_PID" || fail "gpupool exec outlived the job"
wait "$EXEC_PID" 2>/dev/null
exec 7>&-
echo ok
