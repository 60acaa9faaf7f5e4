#!/usr/bin/env bash
# test_leader_read_only_pg: coordinators over a PostgreSQL that turns
# read-only (default_transaction_read_only; issue 19). The election's
# tables and the schema are read first and made only when missing, so a
# read-only server is joined as it is:
#   - a lone leader whose sessions the server ended as it turned
#     read-only regains its lock while the server is still read-only
#     (before, its reconnection ran CREATE TABLE IF NOT EXISTS, refused,
#     and it could not take the lock again until the server took writes),
#     and logs the read-only state once, clearly;
#   - a coordinator started against the read-only server stands by and
#     names the leader (before: it could not connect, and named none);
#   - the leader killed while the server is read-only, nobody can lead
#     (the epoch cannot be raised); once the server takes writes, the
#     standby leads, with the job acknowledged before.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start
pg_coords a b
pg_coord_start a
pg_coord_use a
wait_ready
start_agent n1 1 --coordinator "$(pg_coord_url a)" --coordinator "$(pg_coord_url b)"
wait_node_up n1
submit --gpus 0 -- true
ACKED=$JOB
wait_final "$ACKED"
LOG_A="$T/coord-a.log"

log "the server turns read-only: a regains its lock meanwhile"
regained=$(grep -c "leader: lock regained" "$LOG_A")
pg_read_only on
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "leader: lock regained" "$LOG_A")" -gt "$regained" ]; do
	alive "${PG_COORD_PID[a]}" || fail "a exited while the server was read-only"
	[ $SECONDS -ge $deadline ] &&
	    fail "a did not regain its lock within ${WAIT_S}s while the server was read-only: $(grep -E 'leader:' "$LOG_A" | tail -3)"
	sleep 0.1
done
[ "$(pg_psql "SHOW default_transaction_read_only" postgres)" = on ] ||
    fail "the server is not read-only any more"
grep -q "leader: the database is read-only" "$LOG_A" ||
    fail "a did not log the read-only database: $(grep -E 'leader:' "$LOG_A" | tail -3)"
log "$(grep -m1 "leader: the database is read-only" "$LOG_A" | cut -c1-200)"

log "b starts against the read-only server: it stands by, naming a"
pg_coord_start b
deadline=$((SECONDS + WAIT_S))
until COORD_PORT=${PG_COORD_PORT[b]} && api - GET /v1/whoami && [ "$API_STATUS" = 503 ] &&
    [ "$(printf '%s' "$API_BODY" | json 'd.get("leader") or ""')" = "$(pg_coord_url a)" ]; do
	alive "${PG_COORD_PID[b]}" || fail "b exited against the read-only server"
	[ $SECONDS -ge $deadline ] &&
	    fail "b does not stand by naming a (HTTP $API_STATUS $API_BODY): $(grep -E 'leader:' "$T/coord-b.log" | tail -3)"
	sleep 0.1
done

log "a killed while read-only; writes back on: b leads"
epoch=$(pg_epoch)
kill -KILL "${PG_COORD_PID[a]}"
wait_exit "${PG_COORD_PID[a]}" || fail "a survived SIGKILL"
pg_read_only off
deadline=$((SECONDS + WAIT_S))
until [ "$(pg_epoch)" -gt "$epoch" ] 2>/dev/null; do
	alive "${PG_COORD_PID[b]}" || fail "b exited"
	[ $SECONDS -ge $deadline ] && fail "b did not lead within ${WAIT_S}s of the server taking writes: $(grep -E 'leader:' "$T/coord-b.log" | tail -3)"
	sleep 0.1
done
pg_coord_use b
deadline=$((SECONDS + WAIT_S))
until api "$ADMIN_TOKEN" GET /v1/whoami && [ "$API_STATUS" = 200 ]; do
	[ $SECONDS -ge $deadline ] && fail "b does not serve after taking the lead (HTTP $API_STATUS)"
	sleep 0.1
done
assert_eq succeeded "$(job_state "$ACKED")" "the job a acknowledged, on b"
export GPUPOOL_URL
GPUPOOL_URL=$(pg_coord_url b)
submit --gpus 0 -- true
wait_final "$JOB"
assert_eq succeeded "$(job_state "$JOB")" "a job submitted to b"
log ok
