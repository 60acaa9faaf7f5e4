# `gpupool port-forward` and `gpupool jupyter` notice their job's end
# elsewhere (as kubectl port-forward exits when its pod goes away): an
# admin's cancel, the job's own exit, the idle limit, the owner's cancel
# from another terminal. Each says why, stops forwarding and exits
# non-zero.
. "$(dirname "$0")/lib.sh"
require netns python3

start_coordinator --stream-idle-max 3s
start_agent alpha 2
wait_node_up alpha
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

# forward_up LOG PID: until port-forward LOG says Forwarding.
forward_up() {
	local deadline=$((SECONDS + WAIT_S))
	until grep -q Forwarding "$1"; do
		alive "$2" || fail "port-forward exited: $(cat "$1")"
		[ $SECONDS -ge $deadline ] && fail "port-forward never listened: $(cat "$1")"
		sleep 0.1
	done
}

# forward_ends PID LOG WHAT: PID exits non-zero within WAIT_S, LOG saying
# WHAT and that forwarding stopped.
forward_ends() {
	local deadline=$((SECONDS + WAIT_S)) rc
	log "waiting for the forward to end: $3"
	while alive "$1"; do
		[ $SECONDS -ge $deadline ] && fail "$3: the forward still runs after its job ended: $(cat "$2")"
		sleep 0.1
	done
	wait "$1"
	rc=$?
	log "the forward ended ($rc)"
	[ "$rc" != 0 ] || fail "$3: the forward exited 0: $(cat "$2")"
	assert_contains "$(cat "$2")" "$3" "$3: why"
	assert_contains "$(cat "$2")" "forwarding stopped" "$3: said it stopped"
}

# 1. an admin cancels the job
submit --gpus 1 -- sh -c "$(gated_job_cmd)"
j=$JOB
wait_state "$j" running
"$GP" port-forward "$j" "$(free_port):9000" >"$T/f1.log" 2>&1 </dev/null &
f1=$!
STARTED_PIDS+=("$f1")
forward_up "$T/f1.log" "$f1"
api_expect 200 "$ADMIN_TOKEN" POST "/v1/jobs/$j/cancel" ""
forward_ends "$f1" "$T/f1.log" "job $j was cancelled by admin"
assert_contains "$(cat "$T/f1.log")" "(an admin)" "an admin's cancel"

# 2. the job exits by itself (code 3)
submit --gpus 1 -- sh -c "$(gated_job_cmd); exit 3"
j=$JOB
wait_state "$j" running
"$GP" port-forward "$j" "$(free_port):9000" >"$T/f2.log" 2>&1 </dev/null &
f2=$!
STARTED_PIDS+=("$f2")
forward_up "$T/f2.log" "$f2"
release_job alpha "$j"
forward_ends "$f2" "$T/f2.log" "exit code 3"

# 3. the idle limit: a shell on the job, silent past the pool's 3 s cap
submit --gpus 1 -- sh -c "$(gated_job_cmd)"
j=$JOB
wait_state "$j" running
"$GP" port-forward "$j" "$(free_port):9000" >"$T/f3.log" 2>&1 </dev/null &
f3=$!
STARTED_PIDS+=("$f3")
forward_up "$T/f3.log" "$f3"
# (its input a FIFO held open and silent: no process left behind)
mkfifo "$T/idle.in"
"$GP" shell "$j" --idle 1h <"$T/idle.in" >/dev/null 2>&1 &
STARTED_PIDS+=("$!")
exec 9>"$T/idle.in"
forward_ends "$f3" "$T/f3.log" "job $j was ended by its idle limit"
exec 9>&-

# 4. gpupool jupyter, its job cancelled by its owner from elsewhere
/usr/bin/python3 -c 'import notebook' 2>/dev/null ||
	fail "Debian's python3-notebook is missing (scripts/install-deps.sh)"
"$GP" jupyter --gpus 1 >"$T/jup.out" 2>"$T/jup.err" </dev/null &
jp=$!
STARTED_PIDS+=("$jp")
deadline=$((SECONDS + WAIT_S))
until grep -q "Jupyter in job" "$T/jup.out"; do
	alive "$jp" || fail "jupyter exited: $(cat "$T/jup.err")"
	[ $SECONDS -ge $deadline ] && fail "jupyter never ran: $(cat "$T/jup.err")"
	sleep 0.1
done
j=$(sed -nE 's/.*job ([0-9]+) submitted.*/\1/p' "$T/jup.err" | head -n 1)
forward_up "$T/jup.out" "$jp"
cli cancel "$j"
[ "$CLI_RC" = 0 ] || fail "cancel $j: $CLI_ERR"
forward_ends "$jp" "$T/jup.err" "job $j was cancelled by alice"
wait_final "$j"
assert_eq cancelled "$FINAL_STATE" "the jupyter job"

echo "ok $TEST_NAME"
