# The agent running a checkpointing job is killed with -9: its lease expires,
# the job resumes on the other provider from the last version it uploaded
# (redoing at most the steps since), and never runs twice (the dead agent's sandbox dies with it).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator
start_provider a 1
wait_node_up a
submit_steps 120 5 0.1
j=$JOB
wait_state "$j" running
start_provider b 1
wait_node_up b
wait_ckpt "$j" 3
depart "$j"
kill9_agent a
check_single "right after kill -9"
wait_moved "$j" b 2
assert_eq node_lost "$(history_reason "$j" 1)" "why attempt 1 ended"
# the restarted agent is told nothing of attempt 1 and runs nothing old
start_provider a 1
wait_node_up a
finish_and_check "$j" 120
echo ok
