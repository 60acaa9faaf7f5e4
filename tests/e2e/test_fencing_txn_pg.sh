#!/usr/bin/env bash
# test_fencing_txn_pg: a leader stopped (SIGSTOP) with a write transaction
# open does not block the failover (issue 19, "Fencing"). Two coordinators
# over one PostgreSQL, each its own data directory. a leads, and its blob
# GC's fence (BEGIN; gp_fence(epoch): a FOR SHARE lock on gp_leader's row)
# holds its transaction open (GPUPOOL_TEST_FENCE_HOLD_MS, a test-only
# knob; a data set put and removed gives the GC a pass to make); once a
# logs that, it is stopped. The server cuts a's lock session
# after the lease, and b wins the lock; its epoch raise (an UPDATE of that
# row) must not wait for a for as long as a stays stopped: the server
# aborts a's open transaction after the lease
# (idle_in_transaction_session_timeout), and else b ends it. b takes over
# and accepts work, and does not exit (the session b dropped in the middle
# of its wait once outlived it, holding b's URL lock: b exited 78). SIGCONT
# a: it steps down (exit 75).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

pg_coords a b
pg_coord_start a GPUPOOL_TEST_CKPT_GC_MS=2000 GPUPOOL_TEST_FENCE_HOLD_MS=20000 \
    --leader-lease-ms 1500
pg_coord_use a
wait_ready
pg_coord_start b --leader-lease-ms 1500
epoch=$(pg_epoch)

log "a's GC fence holds its transaction open; SIGSTOP a there"
# A data set put and removed: alice's blobs are then a GC pass's work, and
# every pass ends with the fence.
mk_token user alice
mkdir -p "$T/ds0"
echo seed >"$T/ds0/small.txt"
chmod 644 "$T/ds0/small.txt"
GPUPOOL_TOKEN=$TOKEN cli data put ds0 "$T/ds0"
assert_eq 0 "$CLI_RC" "data put ds0: $CLI_ERR"
GPUPOOL_TOKEN=$TOKEN cli data rm ds0
assert_eq 0 "$CLI_RC" "data rm ds0: $CLI_ERR"
deadline=$((SECONDS + WAIT_S))
until grep -q "fence transaction open: holding" "$T/coord-a.log"; do
	[ $SECONDS -ge $deadline ] && fail "a's GC did not reach its fence within ${WAIT_S}s"
	sleep 0.05
done
kill -STOP "${PG_COORD_PID[a]}"
open=$(pg_psql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a
    ON a.pid = l.pid WHERE l.relation = 'gp_leader'::regclass AND l.granted
    AND l.mode = 'RowShareLock' AND a.state = 'idle in transaction'")
log "stopped a's sessions idle in a transaction locking gp_leader: $open"

log "b takes over from the stopped a"
deadline=$((SECONDS + WAIT_S))
until [ "$(pg_epoch)" -gt "$epoch" ] 2>/dev/null; do
	if [ $SECONDS -ge $deadline ]; then
		pg_psql "SELECT pid, application_name, state,
		    wait_event_type || ':' || coalesce(wait_event, ''),
		    left(regexp_replace(query, '\s+', ' ', 'g'), 80)
		    FROM pg_stat_activity WHERE datname = 'gpupool'" >&2
		fail "b did not take over from the stopped a within ${WAIT_S}s"
	fi
	alive "${PG_COORD_PID[b]}" || fail "b exited: $(tail -n 3 "$T/coord-b.log")"
	sleep 0.1
done
assert_eq "$(pg_coord_url b)" "$(pg_psql "SELECT addr FROM gp_leader WHERE id = 1")" "gp_leader's addr"
if grep -q "the epoch raise waited" "$T/coord-b.log"; then
	log "b ended a's session itself (lock_timeout)"
else
	log "the server ended a's open transaction (idle_in_transaction_session_timeout)"
fi
pg_coord_use b
export GPUPOOL_URL="$(pg_coord_url b)"
deadline=$((SECONDS + WAIT_S))
until api "$ADMIN_TOKEN" GET /v1/whoami && [ "$API_STATUS" = 200 ]; do
	[ $SECONDS -ge $deadline ] && fail "b does not serve after taking the lead (HTTP $API_STATUS)"
	alive "${PG_COORD_PID[b]}" || fail "b exited: $(tail -n 3 "$T/coord-b.log")"
	sleep 0.1
done
mk_token user bob
assert_eq 1 "$(pg_psql "SELECT count(*) FROM gp_tokens WHERE name = 'bob'")" "the token b made, in the database"

log "SIGCONT a: it steps down"
kill -CONT "${PG_COORD_PID[a]}"
wait_exit "${PG_COORD_PID[a]}" || fail "a resumed and did not step down"
wait "${PG_COORD_PID[a]}"
assert_eq 75 "$?" "a's exit status"
alive "${PG_COORD_PID[b]}" || fail "b exited: $(tail -n 3 "$T/coord-b.log")"
grep -q "refusing to run" "$T/coord-b.log" && fail "b refused to run: $(grep 'refusing' "$T/coord-b.log")"
api_expect 200 "$ADMIN_TOKEN" GET /v1/whoami
echo ok
