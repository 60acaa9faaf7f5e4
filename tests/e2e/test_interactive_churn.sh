# Many streams ending while others open and jobs are dispatched: the
# coordinator keeps answering (issue 17's "200 sessions, no effect on
# dispatch"). libmicrohttpd ends an upgraded connection (a stream's leg)
# holding a lock of its own and tells the coordinator the request ended;
# the coordinator took notify_lock there, while stream_create and the
# state thread held notify_lock to resume a poll, which waits for that
# same lock: the whole coordinator hung (its state thread too).
. "$(dirname "$0")/lib.sh"
require netns

ROUNDS=${CHURN_ROUNDS:-6}
PARALLEL=${CHURN_PARALLEL:-40}
start_coordinator --streams-per-job 512 --streams-per-user 1024
start_agent alpha 2
wait_node_up alpha
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

submit --gpus 1 -- sh -c "$(gated_job_cmd)"
j=$JOB
wait_state "$j" running

for r in $(seq "$ROUNDS"); do
	pids=()
	# Short streams, all at once: each opens (waking the agent's poll)
	# and ends (its legs handed back to libmicrohttpd) beside the others.
	for i in $(seq "$PARALLEL"); do
		timeout 60 "$GP" exec "$j" -- true </dev/null >/dev/null 2>"$T/exec-$r-$i.err" &
		pids+=("$!")
	done
	# ... and a job dispatched meanwhile (the state thread's wake-ups).
	submit --gpus 1 -- true
	d=$JOB
	bad=0
	for p in "${pids[@]}"; do
		wait "$p" || bad=$((bad + 1))
	done
	[ "$bad" = 0 ] || fail "round $r: $bad of $PARALLEL exec streams failed (124: hung): $(cat "$T"/exec-"$r"-*.err | sort | uniq -c | head -5)"
	api "$ADMIN_TOKEN" GET "/v1/jobs/$j"
	[ "$API_STATUS" = 200 ] || fail "round $r: the coordinator stopped answering (HTTP $API_STATUS)"
	wait_final "$d"
	assert_eq succeeded "$FINAL_STATE" "round $r: the job dispatched among the streams"
done
release_job alpha "$j"
wait_final "$j"
echo "ok $TEST_NAME"
