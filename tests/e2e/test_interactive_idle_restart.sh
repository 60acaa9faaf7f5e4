# The idle clock across a coordinator restart (issue 17, docs/interactive.md
# "Idle end"): a session with an idle limit types for a while, then goes
# quiet; the coordinator is killed (SIGKILL) and started again. With no
# new session the job must still be ended by its idle limit, counted
# from the session's last traffic before the restart: not earlier than
# the limit after the last keystroke (an active session is never ended
# early), and before the limit after the restart (the clock was kept, not
# started afresh). The old coordinator forgot the clock: the job ran on.
. "$(dirname "$0")/lib.sh"
require netns

LIMIT_S=20
start_coordinator
start_agent alpha 1
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN
export GPUPOOL_TOKEN=$ALICE

now_ms() { date +%s%3N; }
# iso_ms TIME: milliseconds since the epoch of the API's "...T...Z" time.
iso_ms() {
	"$PY" -c 'import sys, datetime
t = datetime.datetime.strptime(sys.argv[1], "%Y-%m-%dT%H:%M:%S.%fZ")
print(int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000))' "$1"
}

submit --gpus 1 -- sh -c "$(gated_job_cmd)"
j=$JOB
wait_state "$j" running

# A shell into the job with an idle limit, its input a FIFO we hold open.
mkfifo "$T/in"
"$GP" shell --idle "${LIMIT_S}s" "$j" <"$T/in" >"$T/sh.out" 2>"$T/sh.err" &
sh_cli=$!
STARTED_PIDS+=("$sh_cli")
exec 7>"$T/in"
# type LINE: sends a command and waits (bounded) for its output.
type_line() {
	echo "echo $1" >&7
	local deadline=$((SECONDS + WAIT_S))
	until grep -q "$1" "$T/sh.out"; do
		alive "$sh_cli" || fail "the shell ended: $(cat "$T/sh.err")"
		[ $SECONDS -ge $deadline ] && fail "no '$1' from the shell: $(cat "$T/sh.err")"
		sleep 0.1
	done
}
type_line tick-0
# Active: a keystroke every 0.3 s for 3 s (the stored clock is written
# at a coarse grain meanwhile, never per keystroke).
for i in $(seq 1 10); do
	sleep 0.3
	last_ms=$(now_ms)
	type_line "tick-$i"
done
# Then quiet, half the limit, and the coordinator dies.
while [ $(($(now_ms) - last_ms)) -lt $((LIMIT_S * 1000 / 2)) ]; do
	sleep 0.2
done
kill_ms=$(now_ms)
kill9_coordinator
start_coordinator
export GPUPOOL_TOKEN=$ALICE
wait_node_up alpha
grep -q "idle clock kept job=$j " "$COORD_LOG" ||
    fail "the restarted coordinator did not take the idle clock back"

# No new session: the kept clock ends the job.
wait_final "$j" $((WAIT_S + LIMIT_S * 2))
assert_eq cancelled "$FINAL_STATE" "the idle job after the restart"
fin_ms=$(iso_ms "$(job_get "$j" 'd["finished_at"]')")
log "ended $((fin_ms - last_ms)) ms after the last keystroke, $((fin_ms - kill_ms)) ms after the kill (limit ${LIMIT_S}s)"
[ "$fin_ms" -ge $((last_ms + LIMIT_S * 1000)) ] ||
    fail "ended $((fin_ms - last_ms)) ms after the last keystroke: before the ${LIMIT_S}s limit"
[ "$fin_ms" -lt $((kill_ms + LIMIT_S * 1000)) ] ||
    fail "ended $((fin_ms - kill_ms)) ms after the restart: the clock started afresh"
grep -q "idle end job=$j " "$COORD_LOG" || fail "no idle end logged"
exec 7>&-
echo "ok $TEST_NAME"
