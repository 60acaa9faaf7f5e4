#!/usr/bin/env bash
# test_data_corrupt.sh: the streamed downloads verify what they write. A
# chunk of a data set and a chunk of a job's output are damaged on the
# coordinator's disk (same size, other bytes; then cut short): a job that
# mounts the data set does not start (the agent's data cache refuses the
# chunk, the message says it is corrupt, the cache keeps nothing of it);
# `gpupool fetch` of the output fails and leaves nothing in DEST. The chunks
# made whole again, both work.
. "$(dirname "$0")/lib.sh"

start_coordinator
mk_token user alice
ALICE=$TOKEN
start_agent a1 1
wait_node_up a1
export GPUPOOL_TOKEN=$ALICE
CHUNKS="$COORD_DATA/checkpoints/alice/chunks"

# damage FILE MODE: same-size other bytes (flip) or half its size (cut); keeps a
# copy in FILE.good
damage() {
	cp "$1" "$1.good"
	case $2 in
	flip) head -c "$(stat -c %s "$1")" /dev/zero >"$1" ;;
	cut) head -c $(($(stat -c %s "$1") / 2)) "$1.good" >"$1" ;;
	esac
}
chunk_of() { # NAME: the stored file of a chunk
	printf '%s/%s/%s' "$CHUNKS" "${1:0:2}" "$1"
}

DS="$T/ds"
mkdir -p "$DS"
head -c $((4 << 20 | 99)) /dev/urandom >"$DS/a.bin"
cli data put ds "$DS" --json
assert_eq 0 "$CLI_RC" "data put: $CLI_ERR"
api_expect 200 "$ALICE" GET /v1/data/alice/ds/1
C=$(printf '%s' "$API_BODY" | json 'd["files"][0]["chunks"][0]')
F=$(chunk_of "$C")
[ -f "$F" ] || fail "no chunk file $F"

for mode in flip cut; do
	damage "$F" "$mode"
	submit --gpus 1 --data ds:/mnt -- true
	wait_final "$JOB"
	msg=$(job_get "$JOB" 'd["message"] or ""')
	assert_eq failed "$FINAL_STATE" "a job over a $mode chunk: $msg"
	assert_contains "$msg" "is corrupt" "the job's message ($mode)"
	[ -z "$(ls -A "$T/agents/a1/data/sets" 2>/dev/null)" ] ||
	    fail "the data cache kept something: $(ls -A "$T/agents/a1/data/sets")"
	mv "$F.good" "$F"
done
submit --gpus 1 --data ds:/mnt -- sh -c 'cmp -s /mnt/a.bin /mnt/a.bin && head -c 4 /mnt/a.bin >"$GPUPOOL_OUTPUT_DIR/o" && cp /mnt/a.bin "$GPUPOOL_OUTPUT_DIR/big"'
wait_final "$JOB"
assert_eq succeeded "$FINAL_STATE" "the job once the chunk is whole: $(job_get "$JOB" 'd["message"]')"
J=$JOB

# The output: its big file's first chunk is the data set's (deduplicated),
# so damage the output's own small chunk and that one in turn.
api_expect 200 "$ALICE" GET "/v1/jobs/$J/output"
for c in $(printf '%s' "$API_BODY" | json '" ".join(f["chunks"][0] for f in sorted(d["files"], key=lambda f: f["path"]))'); do
	F=$(chunk_of "$c")
	for mode in flip cut; do
		damage "$F" "$mode"
		rm -rf "$T/out"
		cli fetch "$J" "$T/out"
		[ "$CLI_RC" != 0 ] || fail "fetch over a $mode chunk succeeded"
		assert_contains "$CLI_ERR" "corrupt" "fetch's error ($mode)"
		[ -z "$(ls -A "$T/out" 2>/dev/null)" ] ||
		    fail "fetch left files behind: $(ls -A "$T/out")"
		mv "$F.good" "$F"
	done
done
rm -rf "$T/out"
cli fetch "$J" "$T/out"
assert_eq 0 "$CLI_RC" "fetch once whole: $CLI_ERR"
cmp -s "$T/out/big" "$DS/a.bin" || fail "the fetched output differs"
log "corrupt chunks refused by the data cache and by fetch"
