# Proves `gpupool submit --wait`: it prints the job id first, then returns
# only once the job has finished (the coordinator already reports a final
# state when the command exits), and exits as `gpupool wait` does: the
# job's exit code, 128+N for a signal, 1 with a note for a cancelled job; a
# refused submission fails at once and prints no id.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

# --- the job's exit code, and a final state when submit returns
cli submit --wait --name sw -- sh -c 'echo out; sleep 1; exit 7'
assert_eq 7 "$CLI_RC" "submit --wait exit code (= the job's; $CLI_ERR)"
j=$(printf '%s' "$CLI_OUT" | head -n 1)
is_uint "$j" || fail "submit --wait printed '$CLI_OUT', not the id first"
assert_eq 1 "$(printf '%s\n' "$CLI_OUT" | wc -l)" "submit --wait prints one line"
assert_eq failed "$(job_state "$j")" "state when submit --wait returned"
assert_eq 7 "$(job_get "$j" 'd["exit_code"]')" "exit_code when submit --wait returned"

# --- success, with the short flag
cli submit -w -- true
assert_eq 0 "$CLI_RC" "submit -w of a job that exits 0 ($CLI_ERR)"
assert_eq succeeded "$(job_state "$CLI_OUT")" "state of a job that exits 0"

# --- killed by a signal: 128+N, with a note
cli submit --wait -- sh -c 'kill -9 $$'
assert_eq 137 "$CLI_RC" "submit --wait of a job killed by SIGKILL"
assert_contains "$CLI_ERR" "signal 9" "note for a killed job"

# --- cancelled while waited for: 1, with a note
"$GP" submit --wait -- sleep 300 >"$T/bg.out" 2>"$T/bg.err" </dev/null &
bg=$!
for _ in $(seq $((WAIT_S * 10))); do
	[ -s "$T/bg.out" ] && break
	sleep 0.1
done
jb=$(head -n 1 "$T/bg.out")
is_uint "$jb" || fail "the background submit --wait printed no id"
wait_state "$jb" running
cli cancel "$jb"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait "$bg"
assert_eq 1 "$?" "submit --wait of a cancelled job"
assert_contains "$(cat "$T/bg.err")" "cancelled" "note for a cancelled job"
assert_eq cancelled "$(job_state "$jb")" "state of the cancelled job"

# --- refused at submission: fails at once, no id, nothing to wait for
cli submit --wait --gpus 2 -- true
[ "$CLI_RC" != 0 ] || fail "submit --wait of a job no node can run exited 0"
assert_eq "" "$CLI_OUT" "no id printed for a refused job"
assert_contains "$CLI_ERR" "can ever run" "why it was refused"

log "submit --wait ok"
