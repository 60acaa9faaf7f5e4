# The coordinator is killed with -9 while a checkpointing job runs and comes
# back: the job keeps running (one attempt), its uploads resume, nothing is
# lost or duplicated (its one attempt ran each of its 100 steps once), and it
# finishes with the right result.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator
start_provider a 1
wait_node_up a
submit_steps 100 5 0.1
j=$JOB
wait_state "$j" running
wait_ckpt "$j" 2
kill9_coordinator
sleep 2
check_single "while the coordinator is down"
[ "$(live_copies)" = 1 ] || fail "the job stopped while the coordinator was down"
start_coordinator
v=$(ckpt_version "$j")
wait_ckpt "$j" $((v + 1))
finish_and_check "$j" 100
assert_eq 1 "$(job_get "$j" 'd["attempts"]')" "attempts after a coordinator restart"
# no work lost: the one attempt counted every step once
assert_contains "$LOG" "ran 100 steps in this attempt" "log of job $j"
echo ok
