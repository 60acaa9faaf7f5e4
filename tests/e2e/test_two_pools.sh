# Proves that two independent pools on one machine do not interfere: each
# has its own coordinator (so both number their jobs from 1) and its own
# agent; a job of pool two ending (same job id and attempt as a running job
# of pool one) must not kill or disturb pool one's job, and each pool keeps
# its own logs. (Several agents, or a test suite next to a real pool, on one
# host is an ordinary setup.)
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent one-a 1
wait_node_up one-a
save_pool one

COORD_PORT=
COORD_DATA=$T/coord2
COORD_LOG=$T/coord2.log
start_coordinator
start_agent two-a 1
wait_node_up two-a
save_pool two

use_pool one
new_marker
m1=$MARK
submit -- sh -c 'echo pool-one; bash -c "exec -a $0 sleep 300"' "$m1"
j1=$JOB
assert_eq 1 "$j1" "pool one's first job id"
wait_state "$j1" running
wait_count argv0 "$m1" 1

use_pool two
submit -- sh -c 'echo pool-two'
j2=$JOB
assert_eq 1 "$j2" "pool two's first job id"
wait_state "$j2" succeeded
job_log "$j2"
assert_eq pool-two "$LOG" "pool two's log"
# more short jobs in pool two: they end while pool one's job runs
for i in 2 3 4; do
	submit -- true
	wait_state "$JOB" succeeded
done

use_pool one
assert_eq running "$(job_state "$j1")" "pool one's job after pool two's jobs ended"
assert_eq 1 "$(count_argv0 "$m1")" "pool one's job processes after pool two's jobs ended"
# Output is shipped asynchronously: give it a bounded while to arrive.
deadline=$((SECONDS + 30))
job_log "$j1"
while [ "$LOG" != pool-one ] && [ $SECONDS -lt $deadline ]; do
	sleep 0.2
	job_log "$j1"
done
assert_eq pool-one "$LOG" "pool one's log"
cli cancel "$j1"
wait_state "$j1" cancelled
wait_count cmdline "$m1" 0 10
echo ok
