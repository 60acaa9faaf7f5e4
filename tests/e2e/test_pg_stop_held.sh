#!/usr/bin/env bash
# test_pg_stop_held: a coordinator on PostgreSQL told to stop (SIGTERM)
# while its writes fail (issue 19). For each fault, the database made
# read-only, then stopped:
#   - a submission sent meanwhile is held (not answered: its batch cannot
#     commit), the coordinator logs the failed write (no agent runs: the
#     only write is that batch's);
#   - SIGTERM: the coordinator exits promptly instead of waiting out the
#     write retry window (120 s): the bound checked here (60 s) only
#     catches that hang, the time it took is printed;
#   - the held submission is answered 503 "not committed" with
#     Retry-After, never 201/200;
#   - the database healed and the coordinator started again: the job
#     acknowledged before the fault is there, and the held submission's
#     idempotency key is unknown (sent again, it makes a new job, 201):
#     nothing of it was committed.
# STOP_ROUNDS=N repeats both N times, STOP_TIMES=FILE appends each stop's
# time (bench/pg_stop.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
GP_TEST_DB=postgresql

pg_start
start_coordinator
start_agent a 1
wait_node_up a
api_expect 201 "$ADMIN_TOKEN" POST /v1/jobs '{"command":["true"],"gpus":0,"idempotency_key":"acked-before-fault"}'
ACKED=$(printf '%s' "$API_BODY" | json 'd["id"]')
is_uint "$ACKED" || fail "no id in $API_BODY"
wait_final "$ACKED"
# No agent from here on: the node stays known (a submission is
# accepted), and the only write the coordinator tries is the held
# submission's, so that the failed write logged is its batch's (an
# agent's report failing first let the submission reach the
# coordinator only after SIGTERM, its connection reset unanswered).
kill9_agent a

# held_stop FAULT HEAL: FAULT, a held submission (key held-FAULT),
# SIGTERM, then the checks above; HEAL, and the coordinator again.
held_stop() {
	local fault=$1 heal=$2 key="held-submission-${1// /-}-round${round:-1}" before post t0 t1 rc status
	before=$(grep -c "postgresql write failed" "$COORD_LOG")
	$fault
	curl -sS -o "$T/$key.body" -D "$T/$key.headers" -w '%{http_code}' \
	    --max-time 200 -X POST -H "Authorization: Bearer $ADMIN_TOKEN" \
	    -H 'Content-Type: application/json' \
	    --data-binary "{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$key\"}" \
	    "$(coord_url)/v1/jobs" >"$T/$key.status" 2>"$T/$key.err" &
	post=$!
	deadline=$((SECONDS + WAIT_S))
	until [ "$(grep -c "postgresql write failed" "$COORD_LOG")" -gt "$before" ]; do
		[ $SECONDS -ge $deadline ] && fail "$fault: no failed write logged"
		alive "$post" || fail "$fault: the submission was answered ($(cat "$T/$key.status")) before its commit"
		sleep 0.1
	done
	alive "$post" || fail "$fault: the submission was answered ($(cat "$T/$key.status")) before its commit"
	t0=$(date +%s.%N)
	kill -TERM "$COORD_PID"
	# The retry window is 120 s: 60 s catches a coordinator waiting it
	# out, with room for a loaded machine.
	wait_exit "$COORD_PID" 60 ||
	    fail "$fault: the coordinator did not exit within 60 s of SIGTERM (it waits out the write retry window)"
	t1=$(date +%s.%N)
	wait "$COORD_PID"
	rc=$?
	log "$fault: stopped $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s after SIGTERM, status $rc"
	# bench/pg_stop.sh: each stop's time, in ms.
	[ -n "${STOP_TIMES:-}" ] &&
	    awk "BEGIN { printf \"%s %d\\n\", \"${1%% *}\", ($t1 - $t0) * 1000 }" >>"$STOP_TIMES"
	[ "$rc" = 0 ] && fail "$fault: exit status 0 with a batch not committed"
	wait_exit "$post" 10 || fail "$fault: the held submission is still unanswered after the exit"
	wait "$post"
	status=$(cat "$T/$key.status")
	log "$fault: the held submission: HTTP $status $(head -c 300 "$T/$key.body")"
	case $status in 200 | 201) fail "$fault: a submission that was not committed was answered $status" ;; esac
	assert_eq 503 "$status" "$fault: the held submission's answer ($(cat "$T/$key.err"))"
	assert_contains "$(cat "$T/$key.body")" "not committed" "$fault: the answer's error"
	grep -qi '^retry-after:' "$T/$key.headers" || fail "$fault: no Retry-After in the answer"
	$heal
	start_coordinator
	case $(job_state "$ACKED") in http-*) fail "$fault: the acknowledged job $ACKED is gone ($(job_state "$ACKED"))" ;; esac
	api_expect 201 "$ADMIN_TOKEN" POST /v1/jobs "{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$key\"}"
	assert_not_contains "$API_BODY" repeated "$fault: the held submission's key after the restart"
}

# STOP_ROUNDS (bench/pg_stop.sh; default 1): rounds of both faults.
for ((round = 1; round <= ${STOP_ROUNDS:-1}; round++)); do
	log "round $round: read-only"
	held_stop "pg_read_only on" "pg_read_only off"
	log "round $round: stopped"
	held_stop pg_stop pg_start
done
log ok
