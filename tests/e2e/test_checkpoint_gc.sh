#!/usr/bin/env bash
# test_checkpoint_gc.sh: the checkpoint store's garbage collection. With
# --checkpoint-keep 1 the chunks only an old version referenced are
# removed from disk and those of the kept version stay; once the job has
# finished and --checkpoint-retain has passed, its versions and chunks go.
# GPUPOOL_TEST_CKPT_GC_MS shortens the GC period and the one-hour grace of
# fresh chunks, which the test would otherwise have to wait for.
. "$(dirname "$0")/lib.sh"

CK="$GPUPOOL_BUILD/bench/bench_ckpt"
[ -x "$CK" ] || fail "no $CK (make builds it)"

export GPUPOOL_TEST_CKPT_GC_MS=2000
start_coordinator --checkpoint-keep 1 --checkpoint-retain 1s
mk_token user alice
ALICE=$TOKEN
mk_token provider prov-gc
(umask 077 && printf '%s\n' "$TOKEN" >"$T/prov.token")
URL=$(coord_url)
spawn "$T/node.log" "$CK" node --url "$URL" --token-file "$T/prov.token" \
    --name gc1 --out "$T/assign.txt"
wait_node_up gc1
GPUPOOL_TOKEN=$ALICE submit --gpus 1 -- sleep 3600
deadline=$((SECONDS + WAIT_S))
until grep -qx "$JOB 1" "$T/assign.txt" 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "job $JOB never assigned"
	sleep 0.1
done

upload() {
	"$CK" upload --url "$URL" --token-file "$T/prov.token" --job "$JOB" \
	    --attempt 1 --dir "$T/src" >"$T/ck.out" 2>"$T/ck.err" ||
	    fail "upload: $(cat "$T/ck.err")"
	log "upload: $(cat "$T/ck.out")"
}
chunk_of() { # VERSION PATH: the first chunk name of PATH in VERSION
	api "$ALICE" GET "/v1/jobs/$JOB/checkpoints/$1"
	[ "$API_STATUS" = 200 ] || fail "manifest $1: HTTP $API_STATUS $API_BODY"
	printf '%s' "$API_BODY" | E2E_P=$2 json '[f for f in d["files"] if f["path"] == __import__("os").environ["E2E_P"]][0]["chunks"][0]'
}
chunk_file() { echo "$COORD_DATA/checkpoints/alice/chunks/${1:0:2}/$1"; }
wait_gone() { # FILE WHAT
	local deadline=$((SECONDS + WAIT_S))
	while [ -e "$1" ]; do
		[ $SECONDS -ge $deadline ] && fail "$2: $1 still there after ${WAIT_S}s"
		sleep 0.2
	done
}

mkdir "$T/src"
head -c 100000 /dev/urandom >"$T/src/a.bin"
printf 'v1\n' >"$T/src/COMPLETE"
upload
OLD=$(chunk_of 1 a.bin)
[ -f "$(chunk_file "$OLD")" ] || fail "chunk $OLD not where expected"

head -c 100000 /dev/urandom >"$T/src/a.bin"
sleep 0.05
printf 'v2\n' >"$T/src/COMPLETE"
upload
NEW=$(chunk_of 2 a.bin)
api "$ALICE" GET "/v1/jobs/$JOB/checkpoints"
assert_eq "[2]" "$(printf '%s' "$API_BODY" | json '[v["version"] for v in d["checkpoints"]]')" "versions kept"

wait_gone "$(chunk_file "$OLD")" "the chunk only version 1 referenced"
[ -f "$(chunk_file "$NEW")" ] || fail "GC removed a chunk of the kept version"

# The job ends: after --checkpoint-retain its versions and chunks go.
cli cancel "$JOB"
assert_eq 0 "$CLI_RC" "cancel: $CLI_ERR"
wait_final "$JOB"
deadline=$((SECONDS + WAIT_S))
while :; do
	api "$ALICE" GET "/v1/jobs/$JOB/checkpoints"
	[ "$(printf '%s' "$API_BODY" | json 'len(d["checkpoints"])')" = 0 ] && break
	[ $SECONDS -ge $deadline ] && fail "versions of finished job $JOB still listed: $API_BODY"
	sleep 0.2
done
wait_gone "$(chunk_file "$NEW")" "a chunk of the expired job"
assert_contains "$(cat "$COORD_LOG")" "checkpoints expired job=$JOB" "coordinator log"
log "ok"
