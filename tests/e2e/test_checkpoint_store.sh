#!/usr/bin/env bash
# test_checkpoint_store.sh: the checkpoint store end to end. A minimal agent
# (bench/bench_ckpt: a node with a fake GPU, and the agent's checkpoint
# client) uploads and downloads a directory for a job of user alice:
# byte-identical round trip, an unchanged directory is not sent again, a
# version with one changed chunk sends only it, a corrupt chunk PUT and a
# commit of a missing chunk are refused (the latest version stays), bob can
# neither list nor read, a stale attempt gets 409, retention keeps N
# versions, and the CLI lists and restores versions.
. "$(dirname "$0")/lib.sh"

CK="$GPUPOOL_BUILD/bench/bench_ckpt"
[ -x "$CK" ] || fail "no $CK (make builds it)"
command -v b2sum >/dev/null || fail "b2sum (coreutils) is needed"

start_coordinator --checkpoint-keep 2
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
mk_token provider prov-ck
(umask 077 && printf '%s\n' "$TOKEN" >"$T/prov.token")
PROV=$TOKEN
URL=$(coord_url)

start_node() { # NAME
	spawn "$T/node-$1.log" "$CK" node --url "$URL" --token-file "$T/prov.token" \
	    --name "$1" --out "$T/assign.txt"
	NODE_PID=$SPAWNED_PID
}
wait_assigned() { # JOB ATTEMPT
	local deadline=$((SECONDS + WAIT_S))
	until grep -qx "$1 $2" "$T/assign.txt" 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && fail "job $1 attempt $2 never assigned to the test node"
		sleep 0.1
	done
}
# ck OP ATTEMPT DIR [args]: one client call; sets CK_RC and CK_OUT.
ck() {
	local op=$1 attempt=$2 dir=$3
	shift 3
	"$CK" "$op" --url "$URL" --token-file "$T/prov.token" --job "$JOB" \
	    --attempt "$attempt" --dir "$dir" "$@" >"$T/ck.out" 2>"$T/ck.err"
	CK_RC=$?
	CK_OUT=$(cat "$T/ck.out")
	log "ck $op attempt=$attempt rc=$CK_RC $CK_OUT $(cat "$T/ck.err")"
}
field() { printf '%s' "$CK_OUT" | json "d[\"$1\"]"; }

start_node ck1
wait_node_up ck1
GPUPOOL_TOKEN=$ALICE submit --gpus 1 -- sleep 3600
wait_assigned "$JOB" 1

# A checkpoint: a 40 MiB file (10 chunks), a subdirectory, an empty file,
# a symlink (skipped, never followed) and the marker.
SRC="$T/src"
mkdir -p "$SRC/sub/deeper"
head -c $((40 << 20)) /dev/urandom >"$SRC/model.bin"
head -c $((3 << 20 | 12345)) /dev/urandom >"$SRC/sub/optim.bin"
: >"$SRC/sub/deeper/empty"
printf 'hello\n' >"$SRC/notes.txt"
chmod 755 "$SRC/notes.txt"
ln -s /etc/passwd "$SRC/link"
printf 'step=40\nmore\n' >"$SRC/COMPLETE"

ck upload 1 "$SRC" --mark "$T/mark"
assert_eq 0 "$CK_RC" "first upload"
assert_eq 1 "$(field version)" "first version"
assert_eq step=40 "$(field label)" "label is the marker's first line"
assert_eq 5 "$(field files)" "files uploaded (the symlink skipped)"
assert_eq 13 "$(field chunks_sent)" "chunks sent the first time"

ck upload 1 "$SRC" --mark "$T/mark"
assert_eq 0 "$CK_RC" "second upload"
assert_eq 0 "$(field version)" "an unchanged directory is not sent"
assert_eq unchanged "$(field skipped)" "skip reason"

# A file newer than the marker: the job is writing; nothing is sent.
sleep 0.05
touch "$SRC/notes.txt"
ck upload 1 "$SRC"
assert_eq 0 "$CK_RC" "upload while writing"
assert_eq 0 "$(field version)" "an inconsistent directory is not sent"
assert_eq "changed while reading" "$(field skipped)" "skip reason"

# Download: byte-identical, modes kept, the link not recreated.
mkdir "$T/dst1"
ck download 1 "$T/dst1"
assert_eq 0 "$CK_RC" "download"
assert_eq 1 "$(field version)" "downloaded version"
for f in model.bin sub/optim.bin sub/deeper/empty notes.txt COMPLETE; do
	cmp -s "$SRC/$f" "$T/dst1/$f" || fail "download: $f differs"
done
[ -e "$T/dst1/link" ] || [ -L "$T/dst1/link" ] && fail "download recreated the symlink"
[ -x "$T/dst1/notes.txt" ] || fail "download lost the execute bit"
ck download 1 "$T/dst1"
[ "$CK_RC" != 0 ] || fail "download into a non-empty directory succeeded"

# Version 2: one chunk of model.bin changed (10%), and the marker.
dd if=/dev/urandom of="$SRC/model.bin" bs=1M count=4 seek=8 conv=notrunc status=none
sleep 0.05
printf 'step=41\n' >"$SRC/COMPLETE.tmp"
mv "$SRC/COMPLETE.tmp" "$SRC/COMPLETE"
ck upload 1 "$SRC" --mark "$T/mark"
assert_eq 2 "$(field version)" "second version"
assert_eq 2 "$(field chunks_sent)" "only the changed chunk and the marker are sent"
assert_eq $(((4 << 20) + 8)) "$(field bytes_sent)" "bytes sent for version 2"

# A corrupt chunk PUT is refused and not stored.
printf 'hello' >"$T/hello"
NAME=$(b2sum -l 256 "$T/hello" | cut -d' ' -f1)
printf 'HELLO' >"$T/bad"
api "$PROV" PUT "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME" @"$T/bad"
assert_eq 400 "$API_STATUS" "corrupt chunk PUT: $API_BODY"
assert_error_body "corrupt chunk PUT"
api "$PROV" GET "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME"
assert_eq 404 "$API_STATUS" "the corrupt chunk is not stored"
api "$PROV" PUT "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME" @"$T/hello"
assert_eq 201 "$API_STATUS" "a correct chunk PUT: $API_BODY"
api "$PROV" PUT "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME" @"$T/hello"
assert_eq 200 "$API_STATUS" "a chunk PUT again"
api "$PROV" GET "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME"
assert_eq hello "$API_BODY" "chunk read back"
api "$PROV" PUT "/v1/agent/jobs/$JOB/1/checkpoint/chunks/NOTHEX" @"$T/hello"
assert_eq 404 "$API_STATUS" "a chunk PUT with a bad name"
api - PUT "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME" @"$T/hello"
assert_eq 401 "$API_STATUS" "a chunk PUT without a token"
api "$BOB" PUT "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME" @"$T/hello"
assert_eq 403 "$API_STATUS" "a chunk PUT with a user token"

# A commit of a missing chunk is refused; version 2 stays the latest.
MISSING=$(printf 'nobody uploaded this' | b2sum -l 256 | cut -d' ' -f1)
api "$PROV" POST "/v1/agent/jobs/$JOB/1/checkpoint/missing" "{\"chunks\":[\"$MISSING\",\"$NAME\"]}"
assert_eq 200 "$API_STATUS" "missing: $API_BODY"
assert_eq "[\"$MISSING\"]" "$(printf '%s' "$API_BODY" | json 'd["missing"]')" "missing chunks"
api "$PROV" POST "/v1/agent/jobs/$JOB/1/checkpoint/commit" \
    "{\"files\":[{\"path\":\"x\",\"size\":20,\"mode\":420,\"chunks\":[\"$MISSING\"]}],\"label\":\"bad\"}"
assert_eq 400 "$API_STATUS" "commit of a missing chunk: $API_BODY"
assert_contains "$API_BODY" "not stored" "commit error"
api "$PROV" POST "/v1/agent/jobs/$JOB/1/checkpoint/commit" \
    "{\"files\":[{\"path\":\"x\",\"size\":9,\"mode\":420,\"chunks\":[\"$NAME\"]}]}"
assert_eq 400 "$API_STATUS" "commit with a wrong size: $API_BODY"
api "$PROV" POST "/v1/agent/jobs/$JOB/1/checkpoint/commit" \
    "{\"files\":[{\"path\":\"../x\",\"size\":5,\"mode\":420,\"chunks\":[\"$NAME\"]}]}"
assert_eq 400 "$API_STATUS" "commit with '..': $API_BODY"
api "$PROV" GET "/v1/agent/jobs/$JOB/1/checkpoint"
assert_eq 200 "$API_STATUS" "latest manifest"
assert_eq 2 "$(printf '%s' "$API_BODY" | json 'd["version"]')" "latest version after refused commits"
assert_eq step=41 "$(printf '%s' "$API_BODY" | json 'd["label"]')" "latest label"

# Users: alice lists and reads; bob cannot; the admin can.
api "$ALICE" GET "/v1/jobs/$JOB/checkpoints"
assert_eq 200 "$API_STATUS" "alice lists"
assert_eq "[1, 2]" "$(printf '%s' "$API_BODY" | json '[v["version"] for v in d["checkpoints"]]')" "versions"
api "$ALICE" GET "/v1/jobs/$JOB/checkpoints/1"
assert_eq 200 "$API_STATUS" "alice reads version 1"
CHUNK=$(printf '%s' "$API_BODY" | json '[f for f in d["files"] if f["path"] == "notes.txt"][0]["chunks"][0]')
api "$ALICE" GET "/v1/jobs/$JOB/checkpoints/chunks/$CHUNK"
assert_eq 200 "$API_STATUS" "alice reads a chunk"
assert_eq hello "$API_BODY" "chunk bytes"
api "$BOB" GET "/v1/jobs/$JOB/checkpoints"
assert_eq 404 "$API_STATUS" "bob lists alice's checkpoints"
api "$BOB" GET "/v1/jobs/$JOB/checkpoints/1"
assert_eq 404 "$API_STATUS" "bob reads alice's manifest"
api "$BOB" GET "/v1/jobs/$JOB/checkpoints/chunks/$CHUNK"
assert_eq 404 "$API_STATUS" "bob reads alice's chunk"
api "$ADMIN_TOKEN" GET "/v1/jobs/$JOB/checkpoints"
assert_eq 200 "$API_STATUS" "the admin lists"

# Retention: keep 2.
printf 'step=42\n' >"$SRC/COMPLETE"
ck upload 1 "$SRC" --mark "$T/mark"
assert_eq 3 "$(field version)" "third version"
api "$ALICE" GET "/v1/jobs/$JOB/checkpoints"
assert_eq "[2, 3]" "$(printf '%s' "$API_BODY" | json '[v["version"] for v in d["checkpoints"]]')" "versions kept"

# The CLI.
GPUPOOL_TOKEN=$ALICE cli checkpoints "$JOB"
assert_eq 0 "$CLI_RC" "gpupool checkpoints: $CLI_ERR"
assert_contains "$CLI_OUT" "step=42" "gpupool checkpoints"
GPUPOOL_TOKEN=$ALICE cli checkpoints "$JOB" --json
assert_eq "[2, 3]" "$(printf '%s' "$CLI_OUT" | json '[v["version"] for v in d["checkpoints"]]')" "checkpoints --json"
mkdir "$T/dst2"
GPUPOOL_TOKEN=$ALICE cli checkpoint get "$JOB" "$T/dst2" --version 2
assert_eq 0 "$CLI_RC" "checkpoint get: $CLI_ERR"
cmp -s "$SRC/model.bin" "$T/dst2/model.bin" || fail "checkpoint get: model.bin differs"
assert_eq step=41 "$(head -n1 "$T/dst2/COMPLETE")" "checkpoint get --version 2"
GPUPOOL_TOKEN=$BOB cli checkpoint get "$JOB" "$T/dst3"
[ "$CLI_RC" != 0 ] || fail "bob's checkpoint get succeeded"

# The node goes away: the job moves on (attempt 2); attempt 1 is stale.
kill -KILL "$NODE_PID"
wait_exit "$NODE_PID" || fail "node driver survived SIGKILL"
wait_state "$JOB" queued
start_node ck1
wait_assigned "$JOB" 2
ck upload 1 "$SRC"
assert_eq 3 "$CK_RC" "upload of a stale attempt (exit 3 is a 409)"
api "$PROV" POST "/v1/agent/jobs/$JOB/1/checkpoint/missing" '{"chunks":[]}'
assert_eq 409 "$API_STATUS" "stale attempt"
assert_eq true "$(printf '%s' "$API_BODY" | json 'd["kill"]')" "stale attempt: kill"
api "$PROV" PUT "/v1/agent/jobs/$JOB/1/checkpoint/chunks/$NAME" @"$T/hello"
assert_eq 409 "$API_STATUS" "stale chunk PUT"
# The new attempt restores the latest version.
mkdir "$T/dst4"
ck download 2 "$T/dst4"
assert_eq 3 "$(field version)" "the moved job restores the latest version"
cmp -s "$SRC/model.bin" "$T/dst4/model.bin" || fail "restore: model.bin differs"

# The coordinator's buffered writes (a file system without O_DIRECT; the
# test hook GPUPOOL_TEST_BUFFERED_IO): a version with a changed odd-sized
# file goes up and comes back byte-identical.
kill9_coordinator
GPUPOOL_TEST_BUFFERED_IO=1 start_coordinator
assert_contains "$(cat "$COORD_LOG")" "test mode: buffered writes" "coordinator log"
dd if=/dev/urandom of="$SRC/sub/optim.bin" bs=12345 count=1 seek=100 conv=notrunc status=none
sleep 0.05
printf 'step=43\n' >"$SRC/COMPLETE.tmp"
mv "$SRC/COMPLETE.tmp" "$SRC/COMPLETE"
ck upload 2 "$SRC"
assert_eq 4 "$(field version)" "a version stored with buffered writes"
assert_eq 2 "$(field chunks_sent)" "the changed chunk and the marker"
mkdir "$T/dst5"
ck download 2 "$T/dst5"
assert_eq 4 "$(field version)" "restored from chunks written buffered"
for f in model.bin sub/optim.bin sub/deeper/empty notes.txt COMPLETE; do
	cmp -s "$SRC/$f" "$T/dst5/$f" || fail "buffered round trip: $f differs"
done
log "ok"
