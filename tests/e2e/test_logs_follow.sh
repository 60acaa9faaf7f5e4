# Proves `gpupool logs -f`: started right after submit, it streams every line
# of a job that prints over a few seconds, in order and exactly once, and
# exits by itself (status 0) when the job ends.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

submit -- sh -c 'i=0; while [ $i -lt 15 ]; do echo "line-$i"; i=$((i + 1)); sleep 0.2; done'
j=$JOB

"$GP" logs -f "$j" >"$T/follow.out" 2>"$T/follow.err" </dev/null &
follow=$!
STARTED_PIDS+=("$follow")

wait_exit "$follow" 60 || fail "logs -f still running 60s after the job started (state $(job_state "$j"))"
wait "$follow"
rc=$?
assert_eq 0 "$rc" "logs -f exit status ($(cat "$T/follow.err"))"
assert_eq succeeded "$(job_state "$j")" "job state once logs -f returned"

expected=$(for i in $(seq 0 14); do echo "line-$i"; done)
assert_eq "$expected" "$(cat "$T/follow.out")" "logs -f output"

# a second follower on the finished job prints everything and returns
cli logs -f "$j"
assert_eq 0 "$CLI_RC" "logs -f on a finished job"
assert_eq "$expected" "$CLI_OUT" "logs -f output on a finished job"
echo ok
