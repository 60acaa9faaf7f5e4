#!/usr/bin/env bash
# test_backup_pg: the backup procedure of docs/operations.md for a pool on
# PostgreSQL ("PostgreSQL", "Backups"): while the coordinator runs,
# `pg_dump --format=custom` of its database and a copy of the job logs,
# pool_id and admin.token; restored with pg_restore into an empty
# database, a coordinator starts from it and holds the jobs (state, log)
# and tokens as they were at the backup, and nothing that came after.
# (test_backup is the SQLite data directory's procedure.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start
GP_TEST_DB=postgresql

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
start_agent b1 1
wait_node_up b1
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --name before -- sh -c 'echo "made before the backup"'
J1=$JOB
cli wait "$J1"
assert_eq 0 "$CLI_RC" "job $J1"

# ---- the backup, while it runs
B="$T/backup"
mkdir -p "$B"
"$PG_BIN/pg_dump" --format=custom --file="$T/pool.dump" "$(pg_url)" ||
    fail "pg_dump of the pool's database"
cp -a "$COORD_DATA/logs" "$COORD_DATA/pool_id" "$COORD_DATA/admin.token" "$B/" ||
    fail "copying the logs, pool_id and admin.token"

# ---- after the backup: changes the backup must not have
bob_id=$(api "$ADMIN_TOKEN" GET /v1/tokens; printf '%s' "$API_BODY" | json '[t["id"] for t in d["tokens"] if t["name"] == "bob"][0]')
api_expect 200 "$ADMIN_TOKEN" POST "/v1/tokens/$bob_id/revoke"
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --name after -- true
J_AFTER=$JOB
kill9_coordinator

# ---- restore: an empty database, a coordinator on it and the copies
pg_createdb restored
"$PG_BIN/pg_restore" --dbname="$(pg_url restored)" --no-owner --role=gpupool \
    "$T/pool.dump" || fail "pg_restore"
chmod 700 "$B"
COORD_DATA=$B
COORD_LOG="$T/restored.log"
COORD_PORT=$(free_port)
GP_TEST_PG_URL=$(pg_url restored) start_coordinator
api_expect 200 "$ALICE" GET "/v1/jobs/$J1"
assert_eq succeeded "$(printf '%s' "$API_BODY" | json 'd["state"]')" "job $J1 after the restore"
api_expect 200 "$ALICE" GET "/v1/jobs/$J1/log?offset=0"
assert_contains "$API_BODY" "made before the backup" "job $J1's log after the restore"
api_expect 200 "$BOB" GET /v1/whoami   # revoked after the backup
api "$ALICE" GET "/v1/jobs/$J_AFTER"
if [ "$API_STATUS" = 200 ] && [ "$(printf '%s' "$API_BODY" | json 'd["name"]')" = after ]; then
	fail "the job submitted after the backup is in it"
fi
echo "ok"
