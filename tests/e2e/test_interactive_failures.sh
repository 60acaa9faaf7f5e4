# Interactive sessions when things go wrong: a per-job cap refuses the
# stream too many (429); an idle session is warned and its job ended at
# the pool's idle cap (the user asked for more); the coordinator
# restarted mid-session (the CLI says so, exits 255; the job runs on and
# takes a new session); the agent stopped (SIGTERM) mid-session (its
# streams end first, the CLI exits non-zero); the agent killed
# mid-session (the CLI says the agent went away, exits 255).
. "$(dirname "$0")/lib.sh"
require netns

start_coordinator --stream-idle-max 4s --streams-per-job 2
start_agent alpha 2
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN
export GPUPOOL_TOKEN=$ALICE

# wait_sessions JOB N: until show counts N open sessions.
wait_sessions() {
	local deadline=$((SECONDS + WAIT_S))
	until [ "$(job_get "$1" 'd.get("sessions", 0)')" = "$2" ]; do
		[ $SECONDS -ge $deadline ] && fail "job $1: not $2 sessions ($(job_get "$1" 'd.get("sessions", 0)'))"
		sleep 0.1
	done
}

submit --gpus 1 -- sh -c "$(gated_job_cmd)"
j=$JOB
wait_state "$j" running

# the cap: two sessions open, the third refused
"$GP" exec "$j" -- sleep 60 >/dev/null 2>&1 &
e1=$!
"$GP" exec "$j" -- sleep 60 >/dev/null 2>&1 &
e2=$!
STARTED_PIDS+=("$e1" "$e2")
wait_sessions "$j" 2
cli exec "$j" -- true
[ "$CLI_RC" != 0 ] || fail "a third stream into the job past --streams-per-job 2"
assert_contains "$CLI_ERR" "too many streams" "the cap's refusal"
kill "$e1" "$e2"
wait_sessions "$j" 0

# idle: asked for 1h, capped at 4s by the pool: warned, then ended
# Its stdin: a FIFO this shell holds open read-write, so it never sends
# a byte nor an EOF (a `sleep 120 |` pipe did the same, but `wait` on the
# pipeline waited out the sleep: 115 s of the test).
mkfifo "$T/idle.in"
exec {idle_in}<>"$T/idle.in"
"$GP" shell --gpus 1 --idle 1h <&"$idle_in" >"$T/idle.out" 2>"$T/idle.err" &
idle_cli=$!
STARTED_PIDS+=("$idle_cli")
deadline=$((SECONDS + WAIT_S))
while alive "$idle_cli"; do
	[ $SECONDS -ge $deadline ] && fail "the idle session did not end: $(cat "$T/idle.err")"
	sleep 0.2
done
wait "$idle_cli"
assert_eq 255 "$?" "the idle session's CLI"
exec {idle_in}>&-
assert_contains "$(cat "$T/idle.err")" "no input for" "the idle warning"
assert_contains "$(cat "$T/idle.err")" "idle for" "the idle end"
idle_job=$(sed -nE 's/.*job ([0-9]+) submitted.*/\1/p' "$T/idle.err" | head -n 1)
wait_final "$idle_job"
assert_eq cancelled "$FINAL_STATE" "the idle job"
api_expect 200 "$ADMIN_TOKEN" GET /metrics
assert_contains "$API_BODY" "gpupool_stream_idle_ends_total 1" "idle ends counted"

# the coordinator restarted mid-session
"$GP" exec "$j" -- sleep 60 >"$T/r.out" 2>"$T/r.err" &
ex=$!
STARTED_PIDS+=("$ex")
wait_sessions "$j" 1
kill9_coordinator
wait_exit "$ex" || fail "exec outlived its coordinator"
wait "$ex"
assert_eq 255 "$?" "exec whose coordinator went away"
assert_contains "$(cat "$T/r.err")" "lost" "what the CLI says"
start_coordinator
export GPUPOOL_TOKEN=$ALICE
wait_node_up alpha
wait_state "$j" running
cli exec "$j" -- sh -c 'echo again'
assert_eq 0 "$CLI_RC" "a new session after the restart ($CLI_ERR)"
assert_eq again "$CLI_OUT" "its output"

# the agent stopped (SIGTERM) mid-session: the session hears it first
# (a notice, as for an owner's reclaim); the agent ends its streams and waits for
# their threads before it frees what they use (the executor) and exits;
# the CLIs end non-zero, and the sanitizer build's exit finds no thread of
# the agent's still ending (OpenSSL's per-thread state, checked at the end
# of every test). The job is requeued and runs again on the agent restarted.
"$GP" exec "$j" -- sleep 60 >"$T/s.out" 2>"$T/s.err" &
ex=$!
STARTED_PIDS+=("$ex")
wait_sessions "$j" 1
kill -TERM "${AGENT_PID[alpha]}"
wait_exit "${AGENT_PID[alpha]}" || fail "agent alpha did not stop on SIGTERM"
wait_exit "$ex" || fail "exec outlived its stopped agent"
wait "$ex"
rc=$?
[ "$rc" != 0 ] || fail "exec into a job whose agent stopped exited 0"
echo "exec, its agent stopped: rc=$rc: $(tail -n 2 "$T/s.err")"
assert_contains "$(cat "$T/s.err")" "agent on the job's machine is stopping" \
    "what the CLI says when the agent stops"
assert_not_contains "$(cat "$T/agent-alpha.log")" "still ending" \
    "the stopped agent's streams"
assert_contains "$(cat "$T/agent-alpha.log")" "agent stopping" "the agent's stop"
start_agent alpha 2
wait_node_up alpha
wait_state "$j" running

# the agent killed mid-session
"$GP" exec "$j" -- sleep 60 >"$T/a.out" 2>"$T/a.err" &
ex=$!
STARTED_PIDS+=("$ex")
wait_sessions "$j" 1
kill9_agent alpha
wait_exit "$ex" || fail "exec outlived its agent"
wait "$ex"
assert_eq 255 "$?" "exec whose agent was killed"
assert_contains "$(cat "$T/a.err")" "agent" "the CLI says the agent went away"
echo "ok $TEST_NAME"
