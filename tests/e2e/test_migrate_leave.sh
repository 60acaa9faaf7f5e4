# `provider leave` drains the node: the job checkpoints on the signal and
# moves, the node is unregistered ("left", no new jobs) and the agent exits
# cleanly; a later start of the agent brings the node back. Stopping an agent
# with SIGTERM is a departure too: its job checkpoints and moves back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator
start_provider a 1
wait_node_up a
submit_steps 150 5 0.1
j=$JOB
wait_state "$j" running
start_provider b 1
wait_node_up b
wait_ckpt "$j" 2
depart "$j"
provider a leave
assert_eq 0 "$CLI_RC" "provider a leave: $CLI_ERR"
wait_moved "$j" b 2
assert_eq provider_left "$(history_reason "$j" 1)" "why attempt 1 ended"
wait_exit "${AGENT_PID[a]}" || fail "agent a still runs after leave"
wait "${AGENT_PID[a]}"
assert_eq 0 "$?" "agent a's exit status after leave"
assert_eq left "$(node_state a)" "node a after leave"

start_provider a 1
wait_node_up a
v=$(ckpt_version "$j")
wait_ckpt "$j" $((v + 1))
depart "$j"
kill -TERM "${AGENT_PID[b]}"
wait_moved "$j" a 3
assert_eq agent_stopped "$(history_reason "$j" 2)" "why attempt 2 ended"
wait_exit "${AGENT_PID[b]}" || fail "agent b still runs after SIGTERM"
finish_and_check "$j" 150 1 2
echo ok
