# A network partition: the provider running the job sits in a network
# namespace the test creates (veth to the host, 10.213.X.0/30) and its link
# is cut. The agent, unable to renew its lease, kills its job itself before
# the coordinator gives it to another node (fencing); the coordinator
# requeues it once the lease expires, and it resumes on the other provider
# from its last uploaded checkpoint (redoing at most the steps since: the
# steps it made while cut off count too). Healed, the agent comes back and runs
# nothing old. The job never has two live attempts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

netns_available || skip netns "$NETNS_WHY"
start_coordinator
netns_create p
netns_forward p
policy_file a "checkpoint-grace = 5s"
netns_start_agent p a 1 --policy "$T/a.policy" --control "$T/a.sock"
wait_node_up a
# Held before its last step while `hold` is in attempt 1's directory
# (steps.sh's STEPS_HOLD): however slow the machine (or its checkpoints,
# skipped while the job rewrites them), attempt 1 cannot end by itself
# before the cut; attempt 2, on b, has no hold and ends.
submit_steps 150 5 0.1 STEPS_HOLD=hold
j=$JOB
wait_state "$j" running
touch "$T/agents/a/jobs/$j-1/hold" || fail "cannot hold attempt 1"
assert_eq a "$(job_get "$j" 'd["node"]')" "first node"
start_provider b 1
wait_node_up b
wait_ckpt "$j" 3

depart "$j"
netns_cut p
wait_moved "$j" b 2
assert_eq node_lost "$(history_reason "$j" 1)" "why attempt 1 ended"
assert_contains "$(cat "$T/agent-a.log")" "killing this node's jobs" "agent a fenced itself"
netns_heal p
wait_node_up a
finish_and_check "$j" 150
echo ok
