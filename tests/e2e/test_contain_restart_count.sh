#!/usr/bin/env bash
# test_contain_restart_count.sh: an attempt that was assigned but never
# reached its agent is not a restart (issue 15, finding 8). The agent is
# killed (kill -9); a job submitted before its lease runs out is assigned
# to it (attempt 1, never delivered); the lease expires and the job goes
# back to the queue; the agent comes back and runs it as attempt 2. The
# job must see GPUPOOL_RESTART_COUNT=0 (no attempt of it ever started) and
# try no checkpoint restore.
. "$(dirname "$0")/lib.sh"

# A lease long enough that the job is assigned before it runs out, however
# slow the machine.
start_coordinator --lease-ms 10000
mk_token user alice
ALICE=$TOKEN
start_agent a1 1
wait_node_up a1
kill9_agent a1
GPUPOOL_TOKEN=$ALICE submit --gpus 1 -- sh -c 'echo "restarts=$GPUPOOL_RESTART_COUNT attempt=$GPUPOOL_ATTEMPT"'
j=$JOB
# Assigned to the dead agent while its lease holds: attempt 1, undelivered.
wait_state "$j" running
[ "$(node_state a1)" = up ] ||
	fail "the lease (10 s) ran out before the job was assigned"
assert_eq 1 "$(job_get "$j" 'd["attempts"]')" "attempts while the agent is dead"
wait_node_state a1 down
wait_state "$j" queued
start_agent a1 1
wait_node_up a1
wait_final "$j"
assert_eq succeeded "$FINAL_STATE" "the job after the agent came back"
job_log "$j"
assert_contains "$LOG" "attempt=2" "the job ran as attempt 2"
assert_contains "$LOG" "restarts=0" "an attempt that never started is no restart"
echo "ok: an undelivered attempt is not counted as a restart"
