# Open but quiet sessions cost nothing (issue 17's "200 sessions, no
# effect on dispatch"; docs/interactive.md): the agent's thread of an idle
# stream sleeps without a clock (it wakes for bytes, its command's exit,
# a notice), and the coordinator counts a job's sessions per job (two
# jobs' counts apart, back to none when they end).
. "$(dirname "$0")/lib.sh"
require netns

N=6
start_coordinator
start_agent alpha 2
wait_node_up alpha
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

submit --gpus 1 -- sh -c "$(gated_job_cmd)"
j1=$JOB
submit --gpus 1 -- sh -c "$(gated_job_cmd)"
j2=$JOB
wait_state "$j1" running
wait_state "$j2" running

# N quiet sessions into j1, one into j2: a command that runs and says
# nothing, stdin closed (the client's EOF comes first).
pids=()
for i in $(seq "$N"); do
	"$GP" exec "$j1" -- sleep 120 </dev/null >/dev/null 2>&1 &
	pids+=("$!")
done
"$GP" exec "$j2" -- sleep 120 </dev/null >/dev/null 2>&1 &
pids+=("$!")
STARTED_PIDS+=("${pids[@]}")
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c 'stream started' "$T/agent-alpha.log")" -ge $((N + 1)) ]; do
	[ $SECONDS -ge $deadline ] && fail "only $(grep -c 'stream started' "$T/agent-alpha.log") of $((N + 1)) streams started"
	sleep 0.1
done
assert_eq "$N" "$(job_get "$j1" 'd.get("sessions", 0)')" "j1's sessions"
assert_eq 1 "$(job_get "$j2" 'd.get("sessions", 0)')" "j2's sessions"

# The stream threads' context switches over a quiet window: each thread
# blocks in poll(2) with no timeout, so none of them wakes at all. (An
# agent whose streams poll on a clock, once a second, switches at least
# N+1 times in it; a few stray wake-ups are allowed for, not one each.)
stream_switches() {
	local f n=0 t
	for f in /proc/"${AGENT_PID[alpha]}"/task/*; do
		[ "$(cat "$f/comm" 2>/dev/null)" = gp-stream ] || continue
		t=$(awk '/^voluntary_ctxt_switches|^nonvoluntary_ctxt_switches/ {s += $2} END {print s + 0}' "$f/status" 2>/dev/null)
		n=$((n + ${t:-0}))
	done
	echo "$n"
}
threads=0
for f in /proc/"${AGENT_PID[alpha]}"/task/*; do
	[ "$(cat "$f/comm" 2>/dev/null)" = gp-stream ] && threads=$((threads + 1))
done
assert_eq $((N + 1)) "$threads" "one named thread a stream (gp-stream)"
s0=$(stream_switches)
# The window is what is tested (nothing may happen in it), not a wait.
sleep 2.5
s1=$(stream_switches)
[ $((s1 - s0)) -lt $(((N + 1) / 2)) ] ||
    fail "$((N + 1)) quiet streams woke $((s1 - s0)) times in 2.5 s (a clock in the agent's pump?)"

# A session still works beside them: output and exit code.
cli exec "$j1" -- sh -c 'echo here; exit 3'
assert_eq 3 "$CLI_RC" "exec's exit code beside quiet sessions ($CLI_ERR)"
assert_eq here "$CLI_OUT" "exec's output beside quiet sessions"

# The clients leave: the counts go back to none (the field goes).
kill "${pids[@]}"
deadline=$((SECONDS + WAIT_S))
until [ "$(job_get "$j1" 'd.get("sessions", 0)')" = 0 ] &&
    [ "$(job_get "$j2" 'd.get("sessions", 0)')" = 0 ]; do
	[ $SECONDS -ge $deadline ] && fail "sessions left: j1 $(job_get "$j1" 'd.get("sessions", 0)'), j2 $(job_get "$j2" 'd.get("sessions", 0)')"
	sleep 0.1
done
# ... and the agent's threads end with their streams.
deadline=$((SECONDS + WAIT_S))
while grep -qx gp-stream /proc/"${AGENT_PID[alpha]}"/task/*/comm 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "stream threads left after their clients"
	sleep 0.1
done
release_job alpha "$j1"
release_job alpha "$j2"
wait_final "$j1"
wait_final "$j2"
echo "ok $TEST_NAME"
