#!/usr/bin/env bash
# test_fencing_logs_pg: a deposed leader's late log write lands where
# nobody reads (issue 19, "Fencing"; docs/operations.md). Two coordinators
# over one PostgreSQL sharing the blob directory, where job logs live. a
# leads; its first log write (the job's first chunk) is held with the
# file open (GPUPOOL_TEST_LOG_HOLD, a test-only knob), and a is stopped
# (SIGSTOP) there; the agent that sent the chunk is killed before it can
# send it elsewhere. b takes over, requeues the job (its node lost; a
# note at offset 0 of the log) and runs it again on another agent, to
# the end. Then a resumes and writes its chunk at offset 0: `logs` on b
# must still show exactly what b acknowledged, and the chunk must be in
# a's epoch's file; a, started again, leads after b's kill -9: that file
# is gone (the takeover's clean-up) and the log is still b's. Before
# per-epoch log files a's chunk overwrote the start of b's note.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

BLOBS="$T/blobs"
HOLD="$T/hold-log"
touch "$HOLD"
pg_coords a b
pg_coord_start a GPUPOOL_TEST_LOG_HOLD="$HOLD" --blob-dir "$BLOBS" \
    --leader-lease-ms 1500
pg_coord_use a
wait_ready
pg_coord_start b --blob-dir "$BLOBS" --leader-lease-ms 1500
export GPUPOOL_URL="$(pg_coord_url a),$(pg_coord_url b)" GPUPOOL_TOKEN=$ADMIN_TOKEN
coords=(--coordinator "$(pg_coord_url a)" --coordinator "$(pg_coord_url b)")
start_agent n1 1 "${coords[@]}"
wait_node_up n1
epoch=$(pg_epoch)

log "a holds its first log write; SIGSTOP a there, kill -9 the agent"
# The first attempt says one line, then waits; the second says another.
submit --gpus 0 -- sh -c 'case "${PWD##*-}" in
1) echo "late chunk of attempt 1"; '"$(gated_job_cmd)"' ;;
*) echo "attempt 2 ran to the end" ;;
esac'
j=$JOB
deadline=$((SECONDS + WAIT_S))
until grep -q "log write held: holding" "$T/coord-a.log"; do
	[ $SECONDS -ge $deadline ] && fail "a did not hold a log write within ${WAIT_S}s"
	sleep 0.05
done
kill -STOP "${PG_COORD_PID[a]}"
kill9_agent n1
release_job n1 "$j" # its first attempt's process ends

log "b takes over, requeues job $j and runs it on n2"
deadline=$((SECONDS + WAIT_S))
until [ "$(pg_epoch)" -gt "$epoch" ] 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "b did not take over from the stopped a within ${WAIT_S}s"
	alive "${PG_COORD_PID[b]}" || fail "b exited: $(tail -n 3 "$T/coord-b.log")"
	sleep 0.1
done
pg_coord_use b
export GPUPOOL_URL="$(pg_coord_url b)"
deadline=$((SECONDS + WAIT_S))
until api "$ADMIN_TOKEN" GET /v1/whoami && [ "$API_STATUS" = 200 ]; do
	[ $SECONDS -ge $deadline ] && fail "b does not serve after taking the lead (HTTP $API_STATUS)"
	sleep 0.1
done
start_agent n2 1 --coordinator "$(pg_coord_url b)"
wait_final "$j" 90
assert_eq succeeded "$FINAL_STATE" "job $j on b"
job_log "$j"
want=$LOG
assert_contains "$want" "job requeued]" "job $j's log on b"
assert_contains "$want" "attempt 2 ran to the end" "job $j's log on b"
assert_not_contains "$want" "late chunk" "job $j's log on b"

log "a resumes, writes its held chunk and steps down"
rm -f "$HOLD"
kill -CONT "${PG_COORD_PID[a]}"
wait_exit "${PG_COORD_PID[a]}" || fail "a resumed and did not step down"
grep -q "log write held: writing" "$T/coord-a.log" ||
	fail "a did not write its held chunk: $(tail -n 3 "$T/coord-a.log")"
alive "${PG_COORD_PID[b]}" || fail "b exited: $(tail -n 3 "$T/coord-b.log")"

log "logs on b: exactly what b acknowledged"
job_log "$j"
assert_eq "$want" "$LOG" "job $j's log on b after a's late write"
cli logs "$j"
assert_eq 0 "$CLI_RC" "logs $j on b: $CLI_ERR"
assert_eq "$want" "$CLI_OUT" "gpupool logs $j on b after a's late write"
late=$(grep -l "late chunk" "$BLOBS"/logs/"$j".*log) ||
	fail "a's late chunk is in none of job $j's log files: $(ls "$BLOBS/logs")"
assert_eq "$BLOBS/logs/$j.e$epoch.log" "$late" "the file a's late chunk is in"

log "a again, as a standby; kill -9 b: a leads, removes its old file"
epoch=$(pg_epoch)
pg_coord_start a --blob-dir "$BLOBS" --leader-lease-ms 1500
pg_failover b a
export GPUPOOL_URL="$(pg_coord_url a)"
[ -e "$late" ] && fail "the new leader kept the deposed leader's file $late"
job_log "$j"
assert_eq "$want" "$LOG" "job $j's log on a, leading again"
echo ok
