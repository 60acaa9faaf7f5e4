#!/usr/bin/env bash
# test_gc_fence_pg: a leader paused in the middle of a GC pass removes no
# blob that the pool references (issue 19). Two coordinators over one
# PostgreSQL sharing one blob directory (each its own data directory). a
# leads, with a GC every 2 s (grace 2 s) that waits 2 s between its
# reference scan and its fence (GPUPOOL_TEST_GC_PAUSE_MS, a test-only
# knob); b stands by (no knob: grace an hour). alice puts a data set and
# removes it, so that a's next pass scans her chunks; once a logs that
# its scan is done, it is stopped (SIGSTOP). b takes over, and alice puts
# a new data set on b: chunks a's stale scan never saw. Their files are
# then made ten minutes old: the sweep reads each file's mtime again and
# leaves anything younger than the grace, so a chunk uploaded during the
# pause is safe anyway; what the fence guards is a blob stored before the
# pass (older than the grace) that a record comes to reference meanwhile,
# which these now stand for. SIGCONT a: its pass ends with the fence,
# which the new epoch refuses: a removes nothing (every chunk of the new
# data set is still there) and steps down (exit 75).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

BLOBS="$T/blobs"
PAUSE_MS=2000
declare -A PORT=() PID=()
PORT[a]=$(free_port)
PORT[b]=$(free_port)
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }
start_coord() { # NAME [VAR=VALUE...]
	local name=$1
	shift
	spawn "$T/coord-$name.log" env "$@" "$GP" coordinator \
	    --listen "127.0.0.1:${PORT[$name]}" --data "$T/coord-$name" \
	    --blob-dir "$BLOBS" --db "$(pg_url)" \
	    --advertise-url "$(url_of "$name")" --leader-lease-ms 1500 \
	    --lease-ms 4000 --heartbeat-ms 300 -v
	PID[$name]=$SPAWNED_PID
}
epoch_now() { pg_psql "SELECT epoch FROM gp_leader WHERE id = 1"; }
dataset() { # DIR SEED: two files, one of several chunks
	mkdir -p "$1"
	head -c $((5 << 20 | $2)) /dev/urandom >"$1/big.bin"
	printf 'seed %s\n' "$2" >"$1/small.txt"
	chmod 644 "$1"/*
}
chunks_of() { # NAME: the chunks of alice's data set NAME, as recorded
	pg_psql "SELECT DISTINCT oc.chunk FROM gp_data_object_chunks oc JOIN
	    gp_data_objects o ON o.id = oc.object WHERE o.\"user\" = 'alice'
	    AND o.name = '$1'"
}
chunk_path() { echo "$BLOBS/checkpoints/alice/chunks/${1:0:2}/$1"; }

start_coord a GPUPOOL_TEST_CKPT_GC_MS=2000 GPUPOOL_TEST_GC_PAUSE_MS=$PAUSE_MS
COORD_DATA="$T/coord-a" COORD_PID=${PID[a]} COORD_PORT=${PORT[a]}
wait_ready
start_coord b
mk_token user alice
ALICE=$TOKEN

log "under a: a data set put and removed, so that a's GC scans alice"
dataset "$T/ds0" 11
GPUPOOL_TOKEN=$ALICE cli data put ds0 "$T/ds0"
assert_eq 0 "$CLI_RC" "data put ds0: $CLI_ERR"
scans=$(grep -c "checkpoint gc references scanned owner=alice" "$T/coord-a.log")
GPUPOOL_TOKEN=$ALICE cli data rm ds0
assert_eq 0 "$CLI_RC" "data rm ds0: $CLI_ERR"
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "checkpoint gc references scanned owner=alice" "$T/coord-a.log")" -gt "$scans" ]; do
	[ $SECONDS -ge $deadline ] && fail "a's GC did not scan alice within ${WAIT_S}s"
	sleep 0.05
done
kill -STOP "${PID[a]}"
stopped_ms=$(date +%s%3N)
epoch=$(epoch_now)

log "a stopped in its pass; b takes over; alice puts a new data set on b"
deadline=$((SECONDS + WAIT_S))
until [ "$(epoch_now)" -gt "$epoch" ] 2>/dev/null; do
	if [ $SECONDS -ge $deadline ]; then
		# What holds the takeover up: the sessions and their locks.
		pg_psql "SELECT pid, application_name, state, backend_xid,
		    wait_event_type || ':' || coalesce(wait_event, ''),
		    left(regexp_replace(query, '\s+', ' ', 'g'), 90)
		    FROM pg_stat_activity WHERE datname = 'gpupool'" >&2
		pg_psql "SELECT l.pid, l.locktype, l.mode, l.granted, c.relname
		    FROM pg_locks l LEFT JOIN pg_class c ON c.oid = l.relation
		    WHERE NOT l.granted OR c.relname LIKE 'gp_%'" >&2
		fail "b did not take over from the stopped a within ${WAIT_S}s"
	fi
	sleep 0.1
done
COORD_PID=${PID[b]} COORD_PORT=${PORT[b]}
export GPUPOOL_URL="$(url_of b)"
deadline=$((SECONDS + WAIT_S))
until api "$ADMIN_TOKEN" GET /v1/whoami && [ "$API_STATUS" = 200 ]; do
	[ $SECONDS -ge $deadline ] && fail "b does not serve after taking the lead (HTTP $API_STATUS)"
	sleep 0.1
done
dataset "$T/ds1" 22
GPUPOOL_TOKEN=$ALICE cli data put ds1 "$T/ds1"
assert_eq 0 "$CLI_RC" "data put ds1 on b: $CLI_ERR"
new=$(chunks_of ds1)
[ "$(printf '%s\n' "$new" | grep -c .)" -ge 2 ] || fail "ds1 has no chunks recorded: '$new'"
for c in $new; do
	[ -f "$(chunk_path "$c")" ] || fail "chunk $c of ds1 is not stored"
	touch -d '-10 min' "$(chunk_path "$c")"
done

log "SIGCONT a: its stale pass removes nothing and a steps down"
# Its pause over (it began before a was stopped): resumed, the pass goes
# straight on to its fence, racing a's leader thread, which steps down
# as soon as it notices its lost session; a pause still running would
# leave the GC nothing to prove.
while [ "$(date +%s%3N)" -lt $((stopped_ms + PAUSE_MS)) ]; do sleep 0.1; done
kill -CONT "${PID[a]}"
wait_exit "${PID[a]}" || fail "a resumed and did not step down"
wait "${PID[a]}"
assert_eq 75 "$?" "a's exit status"
for c in $new; do
	[ -f "$(chunk_path "$c")" ] || fail "chunk $c of ds1, recorded on b, was removed by the paused a: $(grep -E 'gc|fenced|stepping' "$T/coord-a.log" | tail -n 8)"
done
grep -q "checkpoint gc owner=alice blobs_removed" "$T/coord-a.log" &&
    fail "a removed blobs after it was resumed: $(grep 'blobs_removed' "$T/coord-a.log")"
if grep -q "gc skipped owner=alice user=.*not fenced" "$T/coord-a.log"; then
	log "a's fence refused its pass"
else
	log "a stepped down before its pass reached the fence"
fi
# ds1 is still whole on b.
api_expect 200 "$ALICE" GET /v1/data
assert_contains "$API_BODY" '"name":"ds1"' "ds1 listed on b"
alive "${PID[b]}" || fail "b exited"
echo ok
