#!/usr/bin/env bash
# test_pg_migrate: `gpupool coordinator migrate --from DATA_DIR --to URL`
# moves a SQLite pool into PostgreSQL, checked row for row, and the
# coordinator started on it serves the same pool (issue 19): the same
# jobs with their states, exit codes and logs, the same tokens, every
# table's rows, ids going on after the old ones; and the blob users'
# records (issue 19: checkpoints.db's and images.db's tables): the
# checkpoint versions of a job, a data set with a share and a quota, an
# image, all listed by the coordinator on PostgreSQL, a data set's next
# version numbered after the migrated one.
# Then what must be refused: migrating into a database that has rows; a
# coordinator whose data directory belongs to another pool (pool id); a
# database whose schema is newer than this coordinator's. A second
# coordinator on the same store stands by (it does not take the lead);
# a coordinator that no longer leads (the epoch raised, as a new leader
# does): its next write is fenced, it answers "not the leader" (never
# 201) and exits 75.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
. "$(dirname "$0")/migrate_lib.sh"
. "$(dirname "$0")/image_lib.sh"
pg_start

log "a SQLite pool with finished, failed and queued jobs"
start_coordinator
start_agent a 1
wait_node_up a
mk_token user alice
ALICE=$TOKEN
submit --name ok -- sh -c 'echo "hello from the old store"'
OK_JOB=$JOB
submit --name bad -- sh -c 'echo "tab	and \\ backslash"; exit 7'
BAD_JOB=$JOB
wait_final "$OK_JOB"
wait_final "$BAD_JOB"
api "$ADMIN_TOKEN" POST /v1/groups '{"name":"physics","weight":2}'
log "group physics: HTTP $API_STATUS"

log "the blob users' records: checkpoints, a data set, an image"
submit_steps 40 5 0.1
STEPS_JOB=$JOB
wait_ckpt "$STEPS_JOB" 2
wait_final "$STEPS_JOB"
assert_eq succeeded "$FINAL_STATE" "the checkpointing job"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$STEPS_JOB/checkpoints"
ckpts_before=$(printf '%s' "$API_BODY" | json '[(v["version"], v["label"]) for v in d["checkpoints"]]')
[ "$ckpts_before" != "[]" ] || fail "the checkpointing job committed no version"
mkdir -p "$T/ds"
printf 'migrated data\n' >"$T/ds/a.txt"
GPUPOOL_TOKEN=$ALICE cli data put ds "$T/ds" --json
assert_eq 0 "$CLI_RC" "data put: $CLI_ERR"
mk_token user bob
GPUPOOL_TOKEN=$ALICE cli data share ds bob
assert_eq 0 "$CLI_RC" "data share: $CLI_ERR"
api_expect 200 "$ADMIN_TOKEN" POST /v1/quotas/alice '{"bytes":1000000000}'
images_build
as_user "$ALICE" cli image import "$IMG/oci.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"
api_expect 200 "$ALICE" GET /v1/images
images_before=$(printf '%s' "$API_BODY" | json '[(i["name"], i["digest"]) for i in d["images"]]')
api_expect 200 "$ALICE" GET /v1/data
data_before=$(printf '%s' "$API_BODY" | json '[(s["owner"], s["name"], s["version"], s.get("shared_with")) for s in d["data_sets"]]')
before_ok=$(job_get "$OK_JOB" 'd["state"], d.get("exit_code")')
before_bad=$(job_get "$BAD_JOB" 'd["state"], d.get("exit_code")')
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "the coordinator did not stop"
kill -TERM "${AGENT_PID[a]}"
wait_exit "${AGENT_PID[a]}" || fail "the agent did not stop"

log "migrate"
"$GP" coordinator migrate --from "$COORD_DATA" --to "$(pg_url)" \
    >"$T/migrate.out" 2>"$T/migrate.err" ||
    fail "migrate failed: $(cat "$T/migrate.err")"
cat "$T/migrate.out" >&2
assert_contains "$(cat "$T/migrate.out")" "checked row for row" "migrate's report"
jobs_copied=$(awk '$1 == "jobs" {print $2}' "$T/migrate.out")
sqlite_count() { # TABLE
	"$PY" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM " + sys.argv[2]).fetchone()[0])' \
	    "$COORD_DATA/state.db" "$1"
}
assert_eq "$(sqlite_count jobs)" "$jobs_copied" "jobs copied"
for t in tokens nodes groups members postings entries account_totals; do
	assert_eq "$(sqlite_count "$t")" "$(pg_psql "SELECT count(*) FROM gp_$t")" "rows of $t in PostgreSQL"
done
assert_eq "$(pg_psql 'SELECT count(*) FROM gp_jobs')" "$jobs_copied" "jobs in PostgreSQL"
assert_eq "$(pg_psql 'SELECT count(*) FROM gp_tokens')" \
    "$(awk '$1 == "tokens" {print $2}' "$T/migrate.out")" "tokens in PostgreSQL"
meta_count() { # FILE TABLE
	"$PY" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM " + sys.argv[2]).fetchone()[0])' \
	    "$COORD_DATA/$1" "$2"
}
for t in ckpt_versions ckpt_next_version data_objects data_object_chunks \
    data_next data_shares data_quotas; do
	n=$(meta_count checkpoints.db "gp_$t")
	[ "$n" -gt 0 ] || fail "no rows in checkpoints.db's gp_$t to migrate"
	assert_eq "$n" "$(pg_psql "SELECT count(*) FROM gp_$t")" "rows of gp_$t in PostgreSQL"
	assert_contains "$(cat "$T/migrate.out")" "gp_$t" "migrate's report"
done
for t in image_manifests image_manifest_blobs image_names; do
	n=$(meta_count images.db "gp_$t")
	[ "$n" -gt 0 ] || fail "no rows in images.db's gp_$t to migrate"
	assert_eq "$n" "$(pg_psql "SELECT count(*) FROM gp_$t")" "rows of gp_$t in PostgreSQL"
done
assert_eq "$(tr -d '\n' <"$COORD_DATA/pool_id")" \
    "$(pg_psql 'SELECT pool_id FROM gp_pool')" "the pool id carried over"

log "a second migrate into the same database is refused"
"$GP" coordinator migrate --from "$COORD_DATA" --to "$(pg_url)" \
    >"$T/migrate2.out" 2>"$T/migrate2.err" && fail "a migrate into a database with rows succeeded"
assert_contains "$(cat "$T/migrate2.err")" "has rows already" "the refusal"

log "the coordinator on PostgreSQL serves the same pool"
GP_TEST_DB=postgresql start_coordinator
assert_eq "$before_ok" "$(job_get "$OK_JOB" 'd["state"], d.get("exit_code")')" "job $OK_JOB after the migration"
assert_eq "$before_bad" "$(job_get "$BAD_JOB" 'd["state"], d.get("exit_code")')" "job $BAD_JOB after the migration"
job_log "$OK_JOB"
assert_contains "$LOG" "hello from the old store" "job $OK_JOB's log"
api_expect 200 "$ALICE" GET /v1/whoami
log "the blob users' records on PostgreSQL"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$STEPS_JOB/checkpoints"
assert_eq "$ckpts_before" "$(printf '%s' "$API_BODY" | json '[(v["version"], v["label"]) for v in d["checkpoints"]]')" "checkpoint versions after the migration"
api_expect 200 "$ALICE" GET /v1/images
assert_eq "$images_before" "$(printf '%s' "$API_BODY" | json '[(i["name"], i["digest"]) for i in d["images"]]')" "images after the migration"
api_expect 200 "$ALICE" GET /v1/data
assert_eq "$data_before" "$(printf '%s' "$API_BODY" | json '[(s["owner"], s["name"], s["version"], s.get("shared_with")) for s in d["data_sets"]]')" "data sets after the migration"
printf 'version two\n' >"$T/ds/b.txt"
GPUPOOL_TOKEN=$ALICE cli data put ds "$T/ds" --json
assert_eq 0 "$CLI_RC" "data put after the migration: $CLI_ERR"
assert_eq 2 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "the data set's next version"
start_agent a 1
wait_node_up a
submit -- true
[ "$JOB" -gt "$BAD_JOB" ] || fail "a new job took id $JOB, not after the migrated ones"
wait_final "$JOB"
assert_eq 1 "$(pg_psql "SELECT count(*) FROM gp_jobs WHERE id = $JOB")" "the new job's row"

log "a coordinator of another pool is refused"
OTHER="$T/other"
mkdir -p "$OTHER"
printf '0123456789abcdef0123456789abcdef\n' >"$OTHER/pool_id"
chmod 600 "$OTHER/pool_id"
timeout 60 "$GP" coordinator --listen "127.0.0.1:$(free_port)" --data "$OTHER" \
    --db "$(pg_url)" >"$T/other.log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "a coordinator of another pool started (exit $rc)"
assert_contains "$(cat "$T/other.log")" "another pool" "the refusal's reason"
[ -s "$OTHER/admin.token" ] && fail "the refused coordinator made an admin token"

log "a database of a newer schema is refused"
pg_createdb newer
pg_psql "CREATE TABLE gp_schema_version(version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now(), gpupool text NOT NULL);
    INSERT INTO gp_schema_version VALUES (999, now(), '99.0')" newer >/dev/null
mkdir -p "$T/newer"
timeout 60 "$GP" coordinator --listen "127.0.0.1:$(free_port)" --data "$T/newer" \
    --db "$(pg_url newer)" >"$T/newer.log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "a coordinator started on a newer schema (exit $rc)"
assert_contains "$(cat "$T/newer.log")" "newer than this coordinator" "the refusal's reason"

log "a second coordinator on the same store stands by"
# (every coordinator on PostgreSQL takes part in the election: it no
# longer takes the lead at start, fencing the first off)
epoch=$(pg_psql "SELECT epoch FROM gp_leader")
SECOND="$T/second"
mkdir -p "$SECOND"
cp "$COORD_DATA/pool_id" "$SECOND/pool_id"
SECOND_PORT=$(free_port)
spawn "$T/second.log" "$GP" coordinator --listen "127.0.0.1:$SECOND_PORT" \
    --data "$SECOND" --db "$(pg_url)" -v
SECOND_PID=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until curl -s -o /dev/null -D "$T/second.headers" \
    "http://127.0.0.1:$SECOND_PORT/v1/whoami" &&
    grep -qi "^X-Gpupool-Leader: $(coord_url)" "$T/second.headers"; do
	alive "$SECOND_PID" || fail "the second coordinator exited: $(tail -3 "$T/second.log")"
	[ $SECONDS -ge $deadline ] && fail "the second coordinator does not stand by naming the first"
	sleep 0.1
done
assert_eq "$epoch" "$(pg_psql "SELECT epoch FROM gp_leader")" "the epoch with a standby"
api_expect 201 "$ADMIN_TOKEN" POST /v1/jobs '{"command":["true"],"gpus":1}'

log "fencing: a leader whose epoch was raised (as a new leader does) commits nothing"
pg_psql "UPDATE gp_leader SET epoch = epoch + 1" >/dev/null
jobs_before=$(pg_psql "SELECT count(*) FROM gp_jobs")
api "$ADMIN_TOKEN" POST /v1/jobs '{"command":["true"],"gpus":1}'
[ "$API_STATUS" = 201 ] && fail "the fenced coordinator answered a submission 201: $API_BODY"
wait_exit "$COORD_PID" || fail "the fenced coordinator is still running"
wait "$COORD_PID"
assert_eq 75 "$?" "the fenced coordinator's exit status"
# (its write fenced by the store, or its ping finding the epoch moved on
# first: either way it steps down)
grep -q "fenced\|the epoch moved on" "$COORD_LOG" ||
    fail "the fenced coordinator did not say why: $(tail -3 "$COORD_LOG")"
assert_eq "$jobs_before" "$(pg_psql "SELECT count(*) FROM gp_jobs")" "jobs after the fenced write"

log "a pool on PostgreSQL whose records stayed in its SQLite files"
# A database migrated with every table, then its blob users' records
# dropped: what a pool that moved before issue 19 looks like.
kill -TERM "$SPAWNED_PID" 2>/dev/null
wait_exit "$SPAWNED_PID" || fail "the second coordinator did not stop"
pg_createdb early
"$GP" coordinator migrate --from "$COORD_DATA" --to "$(pg_url early)" \
    >"$T/early.out" 2>&1 || fail "migrate into early: $(cat "$T/early.out")"
pg_psql "TRUNCATE gp_ckpt_versions, gp_ckpt_next_version, gp_data_objects,
    gp_data_object_chunks, gp_data_uploads, gp_data_upload_chunks,
    gp_data_next, gp_data_shares, gp_data_quotas, gp_image_manifests,
    gp_image_manifest_blobs, gp_image_names, gp_image_signatures" early >/dev/null
timeout 60 "$GP" coordinator --listen "127.0.0.1:$(free_port)" --data "$COORD_DATA" \
    --db "$(pg_url early)" >"$T/early.log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "a coordinator started with its records stranded in SQLite (exit $rc)"
assert_contains "$(cat "$T/early.log")" "migrate --records-only" "the refusal's advice"
"$GP" coordinator migrate --records-only --from "$COORD_DATA" \
    --to "$(pg_url early)" >"$T/records.out" 2>"$T/records.err" ||
    fail "migrate --records-only: $(cat "$T/records.err")"
assert_not_contains "$(cat "$T/records.out")" "jobs " "--records-only copies no state table"
assert_eq "$(meta_count checkpoints.db gp_ckpt_versions)" \
    "$(pg_psql "SELECT count(*) FROM gp_ckpt_versions" early)" "checkpoint versions moved by --records-only"
assert_eq "$(meta_count images.db gp_image_names)" \
    "$(pg_psql "SELECT count(*) FROM gp_image_names" early)" "image names moved by --records-only"
"$GP" coordinator migrate --records-only --from "$COORD_DATA" \
    --to "$(pg_url early)" >/dev/null 2>"$T/records2.err" &&
    fail "a second --records-only into a database with records succeeded"
assert_contains "$(cat "$T/records2.err")" "has rows already" "the second --records-only's refusal"
echo ok
