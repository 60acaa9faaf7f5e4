# The agent reclaims by itself: when a process that is not the pool's
# appears on a lent GPU (owner presence; with fake GPUs the test hook
# --fake-gpu-procs lists it), and when the owner's availability window
# closes (a policy change applied without a restart). Both are graceful: the
# job saves on the signal and resumes elsewhere with nothing lost. An invalid
# policy file is rejected with its line and the old policy stays in force.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator
: >"$T/a.procs"
start_provider a 1 --fake-gpu-procs "$T/a.procs"
wait_node_up a
submit_steps 150 5 0.1
j=$JOB
wait_state "$j" running
start_provider b 1
wait_node_up b
wait_ckpt "$j" 2

# the owner starts something on a's GPU 0
depart "$j"
sleep 600 &
owner=$!
echo "0 $owner" >"$T/a.procs"
wait_moved "$j" b 2
assert_eq owner_present "$(history_reason "$j" 1)" "why attempt 1 ended"
provider a status --json
assert_eq owner_present "$(printf '%s' "$CLI_OUT" | json 'd["gpus"][0]["state"]')" "a's GPU with the owner on it"
kill "$owner"
wait "$owner" 2>/dev/null
# once the owner's process is gone the GPU is lent again
deadline=$((SECONDS + WAIT_S))
while :; do
	provider a status --json
	s=$(printf '%s' "$CLI_OUT" | json 'd["gpus"][0]["state"]')
	[ "$s" = idle ] && break
	[ $SECONDS -ge $deadline ] && fail "a's GPU not lent again after the owner left (state $s)"
	sleep 0.2
done

# b's window closes: a policy change, picked up without a restart
v=$(ckpt_version "$j")
wait_ckpt "$j" $((v + 1))
h=$(date +%H)
h=$((10#$h))
depart "$j"
policy_file b "checkpoint-grace = 5s
window = daily $(printf '%02d' $(((h + 2) % 24))):00-$(printf '%02d' $(((h + 3) % 24))):00"
wait_moved "$j" a 3
assert_eq window_closed "$(history_reason "$j" 2)" "why attempt 2 ended"
provider b status --json
assert_eq false "$(printf '%s' "$CLI_OUT" | json 'd["window_open"]')" "b's window"

# an invalid policy on a: rejected with its line, the old one stays
printf 'checkpoint-grace = 5s\nmemory = 12Q\n' >"$T/bad.policy"
provider a policy check "$T/bad.policy"
assert_eq 1 "$CLI_RC" "policy check of a bad file"
assert_contains "$CLI_OUT$CLI_ERR" "bad.policy:2:" "policy check names the line"
cp "$T/bad.policy" "$T/a.policy"
deadline=$((SECONDS + WAIT_S))
while :; do
	provider a policy show --json
	e=$(printf '%s' "$CLI_OUT" | json 'd["error"]')
	case $e in *a.policy:2:*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "the agent did not report the bad policy: $CLI_OUT $CLI_ERR"
	sleep 0.2
done
assert_eq running "$(job_state "$j")" "the job under the old policy"
assert_eq a "$(job_get "$j" 'd["node"]')" "the job's node under the old policy"
finish_and_check "$j" 150 1 2
echo ok
