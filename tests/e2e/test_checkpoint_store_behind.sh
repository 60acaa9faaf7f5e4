#!/usr/bin/env bash
# test_checkpoint_store_behind.sh: chunks are flushed and named behind
# their PUT's answer (src/coord/ckpt.c). With every store held back 400 ms
# (test hook GPUPOOL_TEST_CKPT_STORE_DELAY_MS), an upload's commit comes
# while its chunks are still queued: it must wait for them and succeed,
# and the version must come back byte-identical; a data set's version
# (data.c's commit) likewise.
. "$(dirname "$0")/lib.sh"

CK="$GPUPOOL_BUILD/bench/bench_ckpt"
[ -x "$CK" ] || fail "no $CK (make builds it)"

GPUPOOL_TEST_CKPT_STORE_DELAY_MS=400 start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token provider prov-sb
(umask 077 && printf '%s\n' "$TOKEN" >"$T/prov.token")
URL=$(coord_url)

spawn "$T/node.log" "$CK" node --url "$URL" --token-file "$T/prov.token" \
    --name sb1 --out "$T/assign.txt"
wait_node_up sb1
GPUPOOL_TOKEN=$ALICE submit --gpus 1 -- sleep 3600
deadline=$((SECONDS + WAIT_S))
until grep -qx "$JOB 1" "$T/assign.txt" 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "job $JOB never assigned to the test node"
	sleep 0.1
done

SRC="$T/src"
mkdir -p "$SRC"
head -c $((10 << 20 | 777)) /dev/urandom >"$SRC/model.bin"
printf 'step=1\n' >"$SRC/COMPLETE"
"$CK" upload --url "$URL" --token-file "$T/prov.token" --job "$JOB" \
    --attempt 1 --dir "$SRC" >"$T/up.out" 2>"$T/up.err" ||
	fail "upload failed: $(cat "$T/up.out" "$T/up.err")"
assert_eq 1 "$(json 'd["version"]' <"$T/up.out")" "the version committed"
grep -q "store_delay_ms=400" "$COORD_LOG" ||
	fail "the coordinator is not in the store-delay test mode"
mkdir "$T/dst"
"$CK" download --url "$URL" --token-file "$T/prov.token" --job "$JOB" \
    --attempt 1 --dir "$T/dst" >"$T/down.out" 2>"$T/down.err" ||
	fail "download failed: $(cat "$T/down.out" "$T/down.err")"
cmp -s "$SRC/model.bin" "$T/dst/model.bin" || fail "model.bin differs"

# A data set: data.c's commit waits the same way.
head -c $((6 << 20 | 5)) /dev/urandom >"$T/ds.bin"
mkdir "$T/ds" && mv "$T/ds.bin" "$T/ds/"
export GPUPOOL_TOKEN=$ALICE
cli data put behind "$T/ds" --json
assert_eq 0 "$CLI_RC" "data put: $CLI_ERR"
assert_eq 1 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "data version"
log "ok"
