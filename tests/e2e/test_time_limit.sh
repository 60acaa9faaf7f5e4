# Proves time limits: a job submitted with --time 2s that would sleep 60 s
# ends in state timeout (reason timeout), its processes are gone, and `wait`
# exits non-zero for it. A job that ends within its limit is not affected.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

new_marker
m=$MARK
submit --time 2s -- sh -c 'echo before-sleep; bash -c "exec -a $0 sleep 60"; echo AFTER-SLEEP' "$m"
j=$JOB
assert_eq 2 "$(job_get "$j" 'd["request"]["time_limit_s"]')" "time_limit_s of --time 2s"
wait_state "$j" running
wait_state "$j" timeout 40
assert_eq timeout "$(job_get "$j" 'd["reason"]')" "reason"
wait_count cmdline "$m" 0 10
cli wait "$j"
[ "$CLI_RC" != 0 ] || fail "wait on a timed-out job exited 0"
job_log "$j"
assert_contains "$LOG" before-sleep "log of the timed-out job"
assert_not_contains "$LOG" AFTER-SLEEP "log of the timed-out job"

# durations the CLI understands
submit --time 90m -- true
assert_eq 5400 "$(job_get "$JOB" 'd["request"]["time_limit_s"]')" "time_limit_s of --time 90m"
submit --time 1h -- true
assert_eq 3600 "$(job_get "$JOB" 'd["request"]["time_limit_s"]')" "time_limit_s of --time 1h"

submit --time 30s -- sh -c 'sleep 0.5; exit 0'
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "job within its limit"
assert_eq succeeded "$(job_state "$JOB")" "job within its limit"
echo ok
