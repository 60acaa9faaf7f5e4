#!/usr/bin/env bash
# test_blob_records_upgrade: a data directory from before issue 19 keeps
# working. Its checkpoints.db and images.db name their tables as the old
# coordinator did (versions, next_version, objects, object_chunks, uploads,
# upload_chunks, data_next, shares, quotas; manifests, manifest_blobs,
# names, signatures, with their old indexes): made here by a pool of this
# build whose files are then put back to the old names and indexes (the
# columns never changed). The coordinator started on it renames them to
# the gp_* names (once, logged), and serves the same checkpoint versions,
# data set (with its share and quota) and image; the checkpoint restores,
# the data set mounts, a new version is numbered after the old ones.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"
. "$(dirname "$0")/image_lib.sh"
# The SQLite files themselves, whatever the suite's store (PostgreSQL's
# upgrade is `coordinator migrate`: test_pg_migrate).
GP_TEST_DB=sqlite
command -v sqlite3 >/dev/null || fail "sqlite3 is missing (scripts/install-deps.sh)"
[ -d /mnt ] || fail "this test mounts a data set at /mnt, which is missing"

log "a pool with checkpoints, a shared data set with a quota, an image"
start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token user bob
start_provider a 1
wait_node_up a
DS="$T/ds"
mkdir -p "$DS/sub"
head -c $((5 << 20 | 99)) /dev/urandom >"$DS/big.bin"
printf 'kept across the upgrade\n' >"$DS/sub/small.txt"
chmod 644 "$DS/big.bin" "$DS/sub/small.txt"
as_user "$ALICE" cli data put ds "$DS"
assert_eq 0 "$CLI_RC" "data put: $CLI_ERR"
WANT=$(cd "$DS" && find . -type f | LC_ALL=C sort | xargs sha256sum)
as_user "$ALICE" cli data share ds bob
assert_eq 0 "$CLI_RC" "data share: $CLI_ERR"
api_expect 200 "$ADMIN_TOKEN" POST /v1/quotas/alice '{"bytes":1000000000}'
images_build
as_user "$ALICE" cli image import "$IMG/oci.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"
GPUPOOL_TOKEN=$ALICE submit_steps 40 5 0.1
j=$JOB
wait_ckpt "$j" 2
wait_final "$j"
assert_eq succeeded "$FINAL_STATE" "the checkpointing job"

listing() {
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$j/checkpoints"
	printf '%s\n' "$API_BODY" | json '[(v["version"], v["label"], v["bytes"]) for v in d["checkpoints"]]'
	api_expect 200 "$ALICE" GET /v1/data
	printf '%s\n' "$API_BODY" | json '[(s["owner"], s["name"], s["version"], s["bytes"], s.get("shared_with")) for s in d["data_sets"]]'
	api_expect 200 "$ALICE" GET /v1/quotas/alice
	printf '%s\n' "$API_BODY" | json '(d["limit"], d["used"], d["data_versions"])'
	api_expect 200 "$ALICE" GET /v1/images
	printf '%s\n' "$API_BODY" | json '[(i["name"], i["digest"], i["layers"], i["bytes"]) for i in d["images"]]'
}
before=$(listing)
log "before: $before"
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "the coordinator did not stop"

log "the files put back as the old coordinator named them"
sqlite3 "$COORD_DATA/checkpoints.db" "
BEGIN;
ALTER TABLE gp_ckpt_versions RENAME TO versions;
ALTER TABLE gp_ckpt_next_version RENAME TO next_version;
DROP INDEX gp_ckpt_versions_user;
CREATE INDEX versions_user ON versions(user);
ALTER TABLE gp_data_objects RENAME TO objects;
ALTER TABLE gp_data_object_chunks RENAME TO object_chunks;
ALTER TABLE gp_data_uploads RENAME TO uploads;
ALTER TABLE gp_data_upload_chunks RENAME TO upload_chunks;
ALTER TABLE gp_data_next RENAME TO data_next;
ALTER TABLE gp_data_shares RENAME TO shares;
ALTER TABLE gp_data_quotas RENAME TO quotas;
DROP INDEX gp_data_objects_data;
DROP INDEX gp_data_objects_output;
DROP INDEX gp_data_object_chunks_chunk;
DROP INDEX gp_data_uploads_digest;
CREATE UNIQUE INDEX objects_data ON objects(user, name, version) WHERE kind = 'data';
CREATE UNIQUE INDEX objects_output ON objects(job_id) WHERE kind = 'output';
CREATE INDEX object_chunks_chunk ON object_chunks(chunk);
CREATE INDEX uploads_digest ON uploads(user, digest);
COMMIT;" || fail "cannot put checkpoints.db back to the old names"
sqlite3 "$COORD_DATA/images.db" "
BEGIN;
ALTER TABLE gp_image_manifests RENAME TO manifests;
ALTER TABLE gp_image_manifest_blobs RENAME TO manifest_blobs;
ALTER TABLE gp_image_names RENAME TO names;
ALTER TABLE gp_image_signatures RENAME TO signatures;
DROP INDEX gp_image_manifest_blobs_blob;
DROP INDEX gp_image_names_digest;
CREATE INDEX manifest_blobs_blob ON manifest_blobs(blob);
CREATE INDEX names_digest ON names(digest);
COMMIT;" || fail "cannot put images.db back to the old names"
objects() { # FILE: its tables and indexes, sorted
	sqlite3 "$COORD_DATA/$1" "SELECT type || ' ' || name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY 1" | tr '\n' ' '
}
old_ck=$(objects checkpoints.db)
assert_contains "$old_ck" "table versions " "the old checkpoints.db"
assert_not_contains "$old_ck" "gp_" "the old checkpoints.db"
assert_not_contains "$(objects images.db)" "gp_" "the old images.db"

log "the coordinator of this build on the old files"
start_coordinator
after=$(listing)
assert_eq "$before" "$after" "what the coordinator serves after the upgrade"
for f in checkpoints.db images.db; do
	o=$(objects "$f")
	for old in "table versions " "table objects " "table manifests " \
	    "index versions_user" "index objects_data" "index names_digest"; do
		assert_not_contains "$o" "$old" "$f after the upgrade"
	done
done
assert_contains "$(objects checkpoints.db)" "index gp_data_objects_data" "checkpoints.db's indexes"
assert_contains "$(cat "$COORD_LOG")" "sqlite checkpoints: migrated tables=2" "the upgrade's log"
assert_contains "$(cat "$COORD_LOG")" "sqlite data: migrated tables=7" "the upgrade's log"
assert_contains "$(cat "$COORD_LOG")" "sqlite images: migrated tables=4" "the upgrade's log"

log "the records still work: restore, mount, a new version"
mkdir "$T/restored"
as_user "$ALICE" cli checkpoint get "$j" "$T/restored"
assert_eq 0 "$CLI_RC" "checkpoint get: $CLI_ERR"
assert_eq "$(job_get "$j" '[h["checkpoint"]["label"] for h in d["history"] if h.get("checkpoint")][-1]')" \
    "$(head -n 1 "$T/restored/COMPLETE")" "the restored checkpoint's label"
GPUPOOL_TOKEN=$ALICE submit --gpus 1 --data ds:/mnt -- sh -c \
    'cd /mnt && find . -type f | LC_ALL=C sort | xargs sha256sum'
wait_final "$JOB"
job_log "$JOB"
assert_eq succeeded "$FINAL_STATE" "the data set's job: $LOG $(job_get "$JOB" 'd.get("message")')"
assert_contains "$LOG" "$WANT" "the data set's files as the job read them"
printf 'two\n' >"$DS/two.txt"
as_user "$ALICE" cli data put ds "$DS" --json
assert_eq 0 "$CLI_RC" "data put after the upgrade: $CLI_ERR"
assert_eq 2 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "the next version"

log "a second start migrates nothing"
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "the coordinator did not stop"
: >"$COORD_LOG"
start_coordinator
assert_not_contains "$(cat "$COORD_LOG")" "migrated tables" "the second start's log"
echo ok
