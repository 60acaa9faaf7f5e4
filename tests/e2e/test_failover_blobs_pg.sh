#!/usr/bin/env bash
# test_failover_blobs_pg: blobs across a failover (issue 19). Two
# coordinators over one PostgreSQL, each with a data directory of its own,
# sharing only one blob directory (--blob-dir: what NFS would be). Under
# the leader a, alice imports an image, puts a data set, and a job
# checkpoints (several versions). Garbage sits in the blob directory:
# the standby b, whose GC would take it within seconds (test hooks), never
# touches it. The leader is killed (-9); b leads and, with nothing but the
# database and the shared directory, lists the same checkpoint versions,
# image and data set; its GC removes the garbage and keeps every blob
# those reference. Then, on b: the job is made to leave its node (its
# agent killed) and resumes on the other node from its latest checkpoint
# (restored version and step as b lists them), finishing with every step;
# `checkpoint get` restores the latest version (every chunk checked); a new
# job mounts the data set and sees every file intact; a new job runs the
# image (every blob fetched from b and verified by its agent).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
. "$(dirname "$0")/migrate_lib.sh"
. "$(dirname "$0")/image_lib.sh"
[ -d /mnt ] || fail "this test mounts a data set at /mnt, which is missing"
pg_start

BLOBS="$T/blobs"
pg_coords a b
# start_coord NAME [VAR=VALUE...]: the shared blob directory, every
# checkpoint version kept.
start_coord() {
	pg_coord_start "$@" --blob-dir "$BLOBS" --checkpoint-keep 1000
}
versions() { # JOB: [(version, label)] as the serving coordinator lists them
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$1/checkpoints"
	printf '%s' "$API_BODY" | json '[(v["version"], v["label"]) for v in d["checkpoints"]]'
}
images_now() {
	api_expect 200 "$ALICE" GET /v1/images
	printf '%s' "$API_BODY" | json '[(i["name"], i["digest"], i["layers"]) for i in d["images"]]'
}
data_now() {
	api_expect 200 "$ALICE" GET /v1/data
	printf '%s' "$API_BODY" | json '[(s["owner"], s["name"], s["version"], s["bytes"]) for s in d["data_sets"]]'
}

log "a leads, b stands by (its GC, were it running, would collect within 3 s)"
start_coord a
pg_coord_use a
wait_ready
start_coord b GPUPOOL_TEST_CKPT_GC_MS=3000 GPUPOOL_TEST_IMAGE_GC_MS=3000
export GPUPOOL_URL="$(pg_coord_url a),$(pg_coord_url b)" GPUPOOL_TOKEN=$ADMIN_TOKEN
mk_token user alice
ALICE=$TOKEN
start_provider n1 1 --coordinator "$(pg_coord_url a)" --coordinator "$(pg_coord_url b)"
wait_node_up n1

log "under a: an image, a data set, a checkpointing job"
images_build
as_user "$ALICE" cli image import "$IMG/oci.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"
DS="$T/ds"
mkdir -p "$DS/sub"
head -c $((6 << 20 | 4321)) /dev/urandom >"$DS/big.bin"
printf 'hello across a failover\n' >"$DS/sub/small.txt"
chmod 644 "$DS/big.bin" "$DS/sub/small.txt"
as_user "$ALICE" cli data put ds "$DS" --json
assert_eq 0 "$CLI_RC" "data put: $CLI_ERR"
WANT=$(cd "$DS" && find . -type f | LC_ALL=C sort | xargs sha256sum)
# Its second attempt (on n2, resumed) at a tenth of the pace: what is
# checked of it is where it resumed and that it ends with every step.
GPUPOOL_TOKEN=$ALICE submit_steps 400 5 0.1 STEPS_RESUMED_STEP_S=0.01
j=$JOB
wait_state "$j" running
wait_ckpt "$j" 2
[ -d "$BLOBS/checkpoints/alice/chunks" ] || fail "no chunks in the shared blob directory"
[ -d "$T/coord-a/checkpoints" ] && fail "chunks went to a's data directory, not --blob-dir"

# Garbage nothing references, ten minutes old: older than b's grace (3 s),
# younger than a's (an hour).
G_CHUNK=$(printf 'garbage chunk' | sha256sum | cut -c1-64)
G_IMAGE=$(printf 'garbage image blob' | sha256sum | cut -c1-64)
mkdir -p "$BLOBS/checkpoints/alice/chunks/${G_CHUNK:0:2}" "$BLOBS/images/blobs/${G_IMAGE:0:2}"
printf 'garbage chunk' >"$BLOBS/checkpoints/alice/chunks/${G_CHUNK:0:2}/$G_CHUNK"
printf 'garbage image blob' >"$BLOBS/images/blobs/${G_IMAGE:0:2}/$G_IMAGE"
touch -d '-10 min' "$BLOBS/checkpoints/alice/chunks/${G_CHUNK:0:2}/$G_CHUNK" \
    "$BLOBS/images/blobs/${G_IMAGE:0:2}/$G_IMAGE"

# What a shows; b must show the same (and more versions, as the job goes on).
v_before=$(versions "$j")
i_before=$(images_now)
d_before=$(data_now)
[ "$i_before" != "[]" ] || fail "a lists no image"
[ "$d_before" != "[]" ] || fail "a lists no data set"
# The standby has run all along (its GC period is 3 s): it removed nothing.
grep -q "loading the state to lead" "$T/coord-b.log" && fail "b led before a was killed"
[ -f "$BLOBS/checkpoints/alice/chunks/${G_CHUNK:0:2}/$G_CHUNK" ] || fail "garbage chunk removed while b stood by and a's grace is an hour"
[ -f "$BLOBS/images/blobs/${G_IMAGE:0:2}/$G_IMAGE" ] || fail "garbage image blob removed while b stood by"

log "kill -9 a; b leads"
pg_failover a b

log "b lists what a recorded"
v_after=$(versions "$j")
"$PY" - "$v_before" "$v_after" <<'EOF' || fail "b's checkpoint versions of job $j: $v_after, a had $v_before"
import ast, sys
before, after = ast.literal_eval(sys.argv[1]), ast.literal_eval(sys.argv[2])
sys.exit(0 if before and set(map(tuple, before)) <= set(map(tuple, after)) else 1)
EOF
assert_eq "$i_before" "$(images_now)" "images b lists"
assert_eq "$d_before" "$(data_now)" "data sets b lists"

log "b's GC removes the garbage, keeps what is referenced"
deadline=$((SECONDS + WAIT_S))
while [ -f "$BLOBS/checkpoints/alice/chunks/${G_CHUNK:0:2}/$G_CHUNK" ] ||
    [ -f "$BLOBS/images/blobs/${G_IMAGE:0:2}/$G_IMAGE" ]; do
	[ $SECONDS -ge $deadline ] && fail "b's GC did not remove the garbage within ${WAIT_S}s"
	sleep 0.2
done
assert_contains "$(cat "$T/coord-b.log")" "checkpoint gc owner=alice" "b's chunk GC"

log "the job leaves its node and resumes from its latest checkpoint on b"
# (any image: the new jobs below run alice's unsigned one)
policy_file n2 "$(printf 'checkpoint-grace = 5s\nimages = any')"
start_provider n2 1 --coordinator "$(pg_coord_url b)" --coordinator "$(pg_coord_url a)"
wait_node_up n2
wait_ckpt "$j" $(($(ckpt_version "$j") + 1))
depart "$j"
kill9_agent n1
wait_moved "$j" n2 2
wait_final "$j" $((WAIT_S * 3))
assert_eq succeeded "$FINAL_STATE" "job $j: $(job_get "$j" d)"
restored=$(job_get "$j" '[h.get("restored_version", 0) for h in d["history"] if h["attempt"] == 2][0]')
[ "$restored" -ge 2 ] 2>/dev/null || fail "attempt 2 restored version '$restored'"
label=$(versions "$j" | "$PY" -c "import ast, sys; print(dict(ast.literal_eval(sys.stdin.read()))[$restored])")
job_log "$j"
assert_contains "$LOG" "resumed at step ${label#step=} " "job $j resumed at its version $restored ($label)"
assert_contains "$LOG" "done steps=400" "job $j's end"

log "on b, after its GC: the checkpoint restores, the data set mounts, the image runs"
mkdir "$T/restored"
as_user "$ALICE" cli checkpoint get "$j" "$T/restored"
assert_eq 0 "$CLI_RC" "checkpoint get: $CLI_ERR"
[ -s "$T/restored/COMPLETE" ] || fail "the restored checkpoint has no COMPLETE: $(ls -la "$T/restored")"
GPUPOOL_TOKEN=$ALICE submit --gpus 1 --data ds:/mnt -- sh -c \
    'cd /mnt && find . -type f | LC_ALL=C sort | xargs sha256sum'
wait_final "$JOB"
job_log "$JOB"
assert_eq succeeded "$FINAL_STATE" "the data set's job: $LOG $(job_get "$JOB" 'd.get("message")')"
assert_contains "$LOG" "$WANT" "the data set's files as the job read them"
GPUPOOL_TOKEN=$ALICE submit --gpus 1 --image busybox:oci
expect_image_ran "$JOB" n2
# Its agent fetched every blob from b and verified each against its digest.
assert_contains "$(grep "image ready job=$JOB " "$T/agent-n2.log")" "digest=$OCI_DIGEST" "the image the job ran"
echo ok
