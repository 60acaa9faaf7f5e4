# The idle clock across a coordinator restart (issue 17, docs/interactive.md
# "Idle end"): a session with an idle limit types for a while, then goes
# quiet; the coordinator is killed (SIGKILL) and started again. With no
# new session the job must still be ended by its idle limit, counted
# from the session's last traffic before the restart: not earlier than
# the limit after the last keystroke (an active session is never ended
# early), and before the limit after the restart (the clock was kept, not
# started afresh). The old coordinator forgot the clock: the job ran on.
# A second job, typed into the same way, gets a new session after the
# restart (`shell JOB`, no --idle): its traffic keeps the kept clock
# from ending that job.
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
submit --gpus 0 -- sh -c "$(gated_job_cmd)"
k=$JOB
wait_state "$j" running
wait_state "$k" running

# open_shell NAME FD JOB [--idle LIMIT]: a shell into JOB, its input a FIFO
# held open on FD, its output in $T/NAME.out; sets SHELL_PID.
open_shell() {
	local name=$1 fd=$2 job=$3
	shift 3
	mkfifo "$T/$name.in"
	"$GP" shell "$@" "$job" <"$T/$name.in" >"$T/$name.out" 2>"$T/$name.err" &
	SHELL_PID=$!
	STARTED_PIDS+=("$SHELL_PID")
	eval "exec $fd>\"\$T/\$name.in\""
}
# type_line NAME FD PID LINE: sends a command, waits (bounded) for its output.
# (A write to a shell that ended fails: EPIPE, not the test's death.)
trap '' PIPE
type_line() {
	echo "echo $4" >&"$2" 2>/dev/null ||
	    fail "shell $1 ended before '$4': $(cat "$T/$1.err")"
	local deadline=$((SECONDS + WAIT_S))
	until grep -q "$4" "$T/$1.out"; do
		alive "$3" || fail "shell $1 ended: $(cat "$T/$1.err")"
		[ $SECONDS -ge $deadline ] && fail "no '$4' from shell $1: $(cat "$T/$1.err")"
		sleep 0.1
	done
}
open_shell sj 7 "$j" --idle "${LIMIT_S}s"
sj=$SHELL_PID
open_shell sk 8 "$k" --idle "${LIMIT_S}s"
sk=$SHELL_PID
type_line sj 7 "$sj" tick-0
type_line sk 8 "$sk" kick-0
typing_from=$(now_ms)
# Active: a keystroke every 0.3 s for 3 s (the stored clock is written
# at a coarse grain meanwhile, never per keystroke).
for i in $(seq 1 10); do
	sleep 0.3
	last_ms=$(now_ms)
	type_line sj 7 "$sj" "tick-$i"
	type_line sk 8 "$sk" "kick-$i"
done
# The store's copy of the clock: written when it was made and then at
# most once a grain (limit/8) of typing, never per keystroke.
typed_ms=$(($(now_ms) - typing_from))
saves=$(grep -c "idle clock saved job=$j " "$COORD_LOG")
log "job $j: $saves writes of its idle clock for 11 keystrokes in $typed_ms ms"
[ "$saves" -ge 1 ] || fail "the idle clock was never written to the store"
[ "$saves" -le $((2 + typed_ms / (LIMIT_S * 1000 / 8))) ] ||
    fail "$saves writes of the idle clock in $typed_ms ms: more than one a grain"
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

# Job k: a new session without --idle, typing: its traffic keeps k's kept
# clock from ending it. Job j: no new session: the kept clock ends it.
open_shell sk2 9 "$k"
sk2=$SHELL_PID
n=0
deadline=$((SECONDS + WAIT_S + LIMIT_S * 2))
while :; do
	n=$((n + 1))
	type_line sk2 9 "$sk2" "again-$n"
	case $(job_state "$j") in
	succeeded | failed | cancelled | timeout) break ;;
	esac
	[ $SECONDS -ge $deadline ] && fail "job $j not ended by its kept idle clock"
	sleep 0.3
done
wait_final "$j"
assert_eq cancelled "$FINAL_STATE" "the idle job after the restart"
fin_ms=$(iso_ms "$(job_get "$j" 'd["finished_at"]')")
log "ended $((fin_ms - last_ms)) ms after the last keystroke, $((fin_ms - kill_ms)) ms after the kill (limit ${LIMIT_S}s)"
[ "$fin_ms" -ge $((last_ms + LIMIT_S * 1000)) ] ||
    fail "ended $((fin_ms - last_ms)) ms after the last keystroke: before the ${LIMIT_S}s limit"
[ "$fin_ms" -lt $((kill_ms + LIMIT_S * 1000)) ] ||
    fail "ended $((fin_ms - kill_ms)) ms after the restart: the clock started afresh"
grep -q "idle end job=$j " "$COORD_LOG" || fail "no idle end logged"
# k's kept clock (the same as j's) is past; its new session kept it.
while [ "$(now_ms)" -lt $((fin_ms + 2000)) ]; do
	n=$((n + 1))
	type_line sk2 9 "$sk2" "again-$n"
	sleep 0.3
done
assert_eq running "$(job_state "$k")" "job $k, typed into after the restart"
exec 7>&- 8>&- 9>&-
cli cancel "$k"
wait_final "$k"
echo "ok $TEST_NAME"
