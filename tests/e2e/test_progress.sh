# Proves the progress line of long transfers (issue 7) on `gpupool
# checkpoint get` and `gpupool image import`: on a terminal (a pty from script(1)) it draws
# "restoring ... NN% [###...] done/total rate" in place with carriage
# returns, reaches 100% and erases itself before the summary; when stderr
# is not a terminal (scripts, logs) nothing but the summary is written;
# GPUPOOL_NO_PROGRESS turns it off on a terminal too. The restored files
# are whole either way; the imported images are named either way.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

CK="$GPUPOOL_BUILD/bench/bench_ckpt"
[ -x "$CK" ] || fail "no $CK (make builds it)"
command -v script >/dev/null || fail "script(1) (bsdutils) is missing"

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token provider prov-p
(umask 077 && printf '%s\n' "$TOKEN" >"$T/prov.token")
spawn "$T/node.log" "$CK" node --url "$(coord_url)" --token-file "$T/prov.token" \
    --name p1 --out "$T/assign.txt"
wait_node_up p1
GPUPOOL_TOKEN=$ALICE submit --gpus 1 -- sleep 3600
deadline=$((SECONDS + WAIT_S))
until grep -qx "$JOB 1" "$T/assign.txt" 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "job $JOB never assigned to the test node"
	sleep 0.1
done
# A 96 MiB checkpoint: 24 chunks, enough for several redraws.
mkdir -p "$T/src"
head -c $((96 << 20)) /dev/urandom >"$T/src/model.bin"
printf 'step=1\n' >"$T/src/COMPLETE"
"$CK" upload --url "$(coord_url)" --token-file "$T/prov.token" --job "$JOB" \
    --attempt 1 --dir "$T/src" >"$T/up.out" 2>&1 || fail "upload: $(cat "$T/up.out")"

# --- not a terminal: the summary only
mkdir "$T/plain"
GPUPOOL_TOKEN=$ALICE cli checkpoint get "$JOB" "$T/plain"
assert_eq 0 "$CLI_RC" "checkpoint get (no tty): $CLI_ERR"
assert_eq "restored version 1 of job $JOB: 2 files, 96.0M (step=1)" "$CLI_ERR" "stderr without a tty"
cmp -s "$T/src/model.bin" "$T/plain/model.bin" || fail "restored file differs (no tty)"

# --- a terminal: the line is drawn, reaches 100 %, and is erased
mkdir "$T/tty"
GPUPOOL_TOKEN=$ALICE script -qfec "$GP checkpoint get $JOB $T/tty" /dev/null \
    >"$T/tty.out" 2>&1 </dev/null
assert_eq 0 "$?" "checkpoint get on a tty"
cmp -s "$T/src/model.bin" "$T/tty/model.bin" || fail "restored file differs (tty)"
raw=$(cat -v "$T/tty.out")
log "tty output: $raw"
assert_contains "$raw" "restoring" "progress label"
assert_contains "$raw" "100% [##############" "progress at 100%"
assert_contains "$raw" "96M/96M" "progress bytes"
assert_contains "$raw" "^M" "progress redrawn in place (carriage return)"
assert_contains "$raw" "^M^[[K" "progress line erased"
assert_contains "$raw" "restored version 1 of job $JOB" "summary after the progress"
# the summary comes after the last progress line
last=$(tr '\r' '\n' <"$T/tty.out" | grep -v '^\s*$' | tail -n 1)
assert_contains "$last" "restored version 1" "the last line is the summary"

# --- GPUPOOL_NO_PROGRESS: off even on a terminal
mkdir "$T/off"
GPUPOOL_NO_PROGRESS=1 GPUPOOL_TOKEN=$ALICE script -qfec \
    "$GP checkpoint get $JOB $T/off" /dev/null >"$T/off.out" 2>&1 </dev/null
assert_eq 0 "$?" "checkpoint get with GPUPOOL_NO_PROGRESS"
assert_not_contains "$(cat -v "$T/off.out")" "restoring" "GPUPOOL_NO_PROGRESS"

# --- image import: the same line over the layers it sends (each image
# has its own random 8 MiB layer, so each import sends it)
for x in tty plain off; do
	image_layer "$x" --marker "$x" --random-mib 8
	image_oci "$x" "big:$x" "$IMG/$x.tgz"
done
GPUPOOL_TOKEN=$ALICE script -qfec "$GP image import $IMG/tty.tar" /dev/null \
    >"$T/img-tty.out" 2>&1 </dev/null
assert_eq 0 "$?" "image import on a tty"
raw=$(cat -v "$T/img-tty.out")
log "tty output: $raw"
assert_contains "$raw" "importing 100% [######" "import progress at 100%"
assert_contains "$raw" "^M^[[K" "import progress line erased"
last=$(tr '\r' '\n' <"$T/img-tty.out" | grep -v '^\s*$' | tail -n 1)
assert_contains "$last" "imported big:tty@" "the last line is the import's summary"
GPUPOOL_TOKEN=$ALICE cli image import "$IMG/plain.tar"
assert_eq 0 "$CLI_RC" "image import (no tty): $CLI_ERR"
assert_contains "$CLI_OUT" "imported big:plain@" "import summary (no tty)"
assert_eq "" "$CLI_ERR" "image import writes nothing to stderr without a tty"
GPUPOOL_NO_PROGRESS=1 GPUPOOL_TOKEN=$ALICE script -qfec \
    "$GP image import $IMG/off.tar" /dev/null >"$T/img-off.out" 2>&1 </dev/null
assert_eq 0 "$?" "image import with GPUPOOL_NO_PROGRESS"
assert_not_contains "$(cat -v "$T/img-off.out")" "importing" "GPUPOOL_NO_PROGRESS (import)"
assert_contains "$(cat "$T/img-off.out")" "imported big:off@" "import summary (progress off)"
GPUPOOL_TOKEN=$ALICE cli image ls
for x in tty plain off; do
	assert_contains "$CLI_OUT" "big:$x" "image big:$x is named"
done
echo "ok"
