# Proves a clean coordinator shutdown: SIGTERM while an agent's long poll, a
# `gpupool logs -f` and a `gpupool wait` are all held open makes the
# coordinator exit with status 0 (no abort), the waiting CLI commands fail
# with a message instead of hanging, and after a restart the agent carries
# on: the running job finishes with its exit code and full log; the restarted
# coordinator, too, stops cleanly on SIGTERM. Then several rounds of SIGTERM
# while submissions stream in and the agent's polls come and go: a request
# that races the shutdown (a long poll arriving after the last sweep, a
# change queued after the state thread's last batch) is answered, never left
# suspended (libmicrohttpd aborts the process if one is), and an answered
# request whose connection closes before it is resumed is freed (under
# AddressSanitizer a leak makes the exit status non-zero).
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

new_marker
m=$MARK
submit -- sh -c 'echo first; bash -c "exec -a $0 sleep 6"; echo second; exit 9' "$m"
j=$JOB
wait_state "$j" running
wait_count argv0 "$m" 1

"$GP" logs -f "$j" >"$T/follow.out" 2>"$T/follow.err" </dev/null &
follower=$!
"$GP" wait "$j" >"$T/wait.out" 2>"$T/wait.err" </dev/null &
waiter=$!
STARTED_PIDS+=("$follower" "$waiter")
# both are connected once the log's first line has arrived
deadline=$((SECONDS + WAIT_S))
until grep -q first "$T/follow.out"; do
	[ $SECONDS -ge $deadline ] && fail "logs -f showed nothing"
	sleep 0.1
done

kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "coordinator still running ${WAIT_S}s after SIGTERM"
wait "$COORD_PID"
st=$?
[ "$st" = 0 ] || soft_fail "coordinator exited with status $st on SIGTERM (128+6 = abort); its log: $(tail -n 3 "$COORD_LOG")"

start_coordinator
wait_final "$j"
assert_eq "failed 9 1" "$(job_get "$j" '"%s %s %s" % (d["state"], d["exit_code"], d["attempts"])')" "job after the restart"
job_log "$j"
assert_eq "$(printf 'first\nsecond')" "$LOG" "log after the restart"

# the clients either rode out the restart or ended with a message; either
# way they are not left hanging
wait_exit "$follower" || fail "logs -f hangs after the coordinator restart"
wait_exit "$waiter" || fail "wait hangs after the coordinator restart"
wait "$waiter"
wst=$?
if [ "$wst" != 9 ]; then
	[ -s "$T/wait.err" ] || fail "gpupool wait exited $wst with no message"
fi

# and once more, after the agent has reconnected to the new coordinator (a
# second poll, a re-registration) and another job ran
submit -- true
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "a job after the restart"
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "restarted coordinator still running ${WAIT_S}s after SIGTERM"
wait "$COORD_PID"
st=$?
[ "$st" = 0 ] || soft_fail "restarted coordinator exited with status $st on SIGTERM (128+6 = abort); its log: $(tail -n 3 "$COORD_LOG")"

for round in 1 2 3 4 5 6; do
	start_coordinator
	wait_node_up alpha
	# a CLI stream, and eight API clients submitting as fast as they can,
	# so that answered requests are still waiting to be resumed when the
	# daemon stops
	(
		while :; do
			"$GP" submit -- true >/dev/null 2>&1
			"$GP" ps >/dev/null 2>&1
		done
	) &
	streams=($!)
	"$GPUPOOL_BUILD/bench/bench_submit" --clients 8 --seconds 60 >/dev/null 2>&1 &
	streams+=($!)
	STARTED_PIDS+=("${streams[@]}")
	sleep 0.$((3 + round))
	kill -TERM "$COORD_PID"
	wait_exit "$COORD_PID" || fail "round $round: coordinator still running ${WAIT_S}s after SIGTERM"
	wait "$COORD_PID"
	st=$?
	kill "${streams[@]}" 2>/dev/null
	wait "${streams[@]}" 2>/dev/null
	[ "$st" = 0 ] || fail "round $round: coordinator exited with status $st on SIGTERM under load (128+6 = abort); its log: $(tail -n 3 "$COORD_LOG")"
done
echo ok
