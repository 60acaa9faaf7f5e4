# Proves node-loss recovery: when the agent running a job is killed with -9,
# the coordinator marks the node down once its lease expires, puts the job
# back in the queue as a new attempt and runs it on the other node (attempts
# 2, node beta, history names the lost attempt); the restarted agent does not
# run the old attempt again; and at no time are two copies of the job alive
# on the machine (counted by a marker in the job's process name).
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

new_marker
m=$MARK
# each attempt: print, sleep 6 s under the marker, print, exit 0
submit --gpus 1 -- sh -c 'echo "attempt-start"; bash -c "exec -a $0 sleep 6"; echo "attempt-end"' "$m"
j=$JOB
wait_state "$j" running
assert_eq alpha "$(job_get "$j" 'd["node"]')" "first node"
wait_count argv0 "$m" 1
start_agent beta 1
wait_node_up beta

# watch: never more than one live copy, from now to the end of the test
check_single() {
	local n
	n=$(count_argv0 "$m")
	[ "$n" -le 1 ] || fail "$n live copies of job $j ($1)"
}

kill9_agent alpha
check_single "right after kill -9 of alpha"
deadline=$((SECONDS + WAIT_S))
while :; do
	check_single "waiting for the job to move"
	s=$(job_get "$j" '"%s %s %s" % (d["state"], d["attempts"], d["node"])')
	[ "$s" = "running 2 beta" ] && break
	case $s in succeeded* | failed* | cancelled* | timeout*)
		fail "job ended ($s) instead of moving to beta" ;; esac
	[ $SECONDS -ge $deadline ] && fail "job not running on beta as attempt 2 after ${WAIT_S}s ($s; alpha $(node_state alpha))"
	sleep 0.1
done
assert_eq down "$(node_state alpha)" "alpha once its job moved"

# restart alpha while attempt 2 runs on beta: it must not resume attempt 1
start_agent alpha 1
wait_node_up alpha
deadline=$((SECONDS + WAIT_S))
while :; do
	check_single "after alpha's restart"
	s=$(job_state "$j")
	[ "$s" = succeeded ] && break
	[ "$s" = running ] || fail "job went $s after alpha's restart"
	[ $SECONDS -ge $deadline ] && fail "attempt 2 not done after ${WAIT_S}s"
	sleep 0.1
done
assert_eq "succeeded 2 beta 0" "$(job_get "$j" '"%s %s %s %s" % (d["state"], d["attempts"], d["node"], d["exit_code"])')" "final job"
assert_eq "alpha node_lost" "$(job_get "$j" '"%s %s" % (d["history"][0]["node"], d["history"][0]["reason"])')" "history of attempt 1"
assert_eq 2 "$(job_get "$j" 'len(d["history"])')" "history entries"
job_log "$j"
assert_contains "$LOG" attempt-end "log of the finished job"

# a few heartbeats later, nothing of the job runs anywhere and it stays done
for i in $(seq 1 20); do
	assert_eq 0 "$(count_argv0 "$m")" "copies of job $j after it succeeded"
	sleep 0.1
done
assert_eq "succeeded 2 beta" "$(job_get "$j" '"%s %s %s" % (d["state"], d["attempts"], d["node"])')" "job after alpha settled"
# and alpha takes new work
submit --gpus 1 -- true
j2=$JOB
submit --gpus 1 -- true
cli wait "$j2"
assert_eq 0 "$CLI_RC" "a job after the restart"
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "a job after the restart"
echo ok
