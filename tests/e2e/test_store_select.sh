#!/usr/bin/env bash
# Proves --db (issue 16, step 5; docs/architecture.md "The storage
# interface"): a coordinator keeps its state in the SQLite file --db names
# (sqlite:PATH, outside its data directory) and finds it there after a
# restart; a bad postgresql:// is refused with libpq's reason; a data
# directory that belongs to one pool refuses another pool's
# store, and the store is left as it was.
. "$(dirname "$0")/lib.sh"

stop_coord() {
	kill "$COORD_PID" 2>/dev/null
	wait_exit "$COORD_PID" || fail "the coordinator did not stop"
}

DB="$T/elsewhere/pool.db"
mkdir -p "$T/elsewhere"

# --- postgresql://: the PostgreSQL store's (store_pg.c; its own tests
# run a server: test_pg_*); a connection string libpq cannot read is
# refused at once, saying why, exit non-zero
# (bounded: a coordinator that took it would serve for ever)
out=$(timeout 20 "$GP" coordinator --listen "127.0.0.1:$(free_port)" \
    --data "$T/pg-data" --db "postgresql://gp@127.0.0.1/pool?no_such_option=1" 2>&1)
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a bad postgresql:// store was accepted (exit $rc)"
assert_contains "$out" "no_such_option" "the postgresql:// refusal"

# --- sqlite:PATH: the state is there, not in the data dir
start_coordinator --db "sqlite:$DB"
[ -s "$DB" ] || fail "no store at $DB"
[ ! -e "$COORD_DATA/state.db" ] || fail "state.db made in the data dir anyway"
[ -s "$COORD_DATA/pool_id" ] || fail "no pool_id in the data dir"
mk_token user alice
ALICE=$TOKEN
stop_coord
start_coordinator --db "sqlite:$DB"
api_expect 200 "$ALICE" GET /v1/whoami

# --- another pool's store: refused, and untouched
stop_coord
OTHER_DATA="$T/other"
mkdir -p "$OTHER_DATA"
spawn "$T/other.log" "$GP" coordinator --listen "127.0.0.1:$(free_port)" \
    --data "$OTHER_DATA"
other=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until [ -s "$OTHER_DATA/admin.token" ]; do
	alive "$other" || fail "the other pool's coordinator exited"
	[ $SECONDS -ge $deadline ] && fail "the other pool never started"
	sleep 0.1
done
kill "$other"
wait_exit "$other" || fail "the other pool's coordinator did not stop"
before=$(sha256sum <"$OTHER_DATA/state.db")
out=$(timeout 20 "$GP" coordinator --listen "127.0.0.1:$(free_port)" \
    --data "$COORD_DATA" --db "$OTHER_DATA/state.db" 2>&1)
rc=$?
[ "$rc" != 0 ] || fail "another pool's store was accepted"
assert_contains "$out" "another pool" "the refusal names the reason"
assert_eq "$before" "$(sha256sum <"$OTHER_DATA/state.db")" \
    "the other pool's store after the refusal"
echo "ok"
