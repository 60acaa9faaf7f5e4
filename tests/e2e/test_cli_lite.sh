# Proves the `gpupool` executable's split (src/main.c, src/lite/): it links
# none of libcurl, libmicrohttpd, SQLite, libarchive, libyaml, libcsv, and
# loads no shared library but libc's (jansson, libsodium, http-parser
# and libm are in it); its
# own commands (submit, wait, ps, show, logs, cancel, token ...) talk to
# the real coordinator over http_lite.c even with no libgpupool.so beside
# it (a copy of the executable alone), with the coordinator's messages for
# a 401 and a clear one for a refused connection; every other command, the
# coordinator and the agent come from libgpupool.so, and without the
# library they fail with a message naming where it was looked for.
. "$(dirname "$0")/lib.sh"

deps=$(ldd "$GP")
for lib in libcurl libmicrohttpd libsqlite3 libarchive libyaml libcsv; do
	assert_not_contains "$deps" "$lib" "the executable links $lib"
done
# jansson, libsodium, http-parser and libm are linked in statically (a
# shared library less to map and relocate at each start); libc is shared.
needed=$(readelf -d "$GP" | grep NEEDED)
for lib in libjansson libsodium libhttp_parser libm.so; do
	assert_not_contains "$needed" "$lib" "the executable loads $lib"
done
assert_contains "$needed" "libc.so" "the executable loads libc"

start_coordinator
start_agent alpha 1
wait_node_up alpha

# The executable alone, without libgpupool.so.
mkdir -p "$T/alone"
cp "$GP" "$T/alone/gpupool"
ALONE="$T/alone/gpupool"

# --- its own commands, over http_lite.c
out=$("$ALONE" submit --gpus 0 --wait -- sh -c 'echo lite-out; exit 3')
rc=$?
assert_eq 3 "$rc" "submit --wait by the executable alone"
is_uint "$out" || fail "submit printed '$out', not a job id"
j=$out
out=$("$ALONE" logs "$j") || fail "logs by the executable alone"
assert_eq lite-out "$out" "the job's log through http_lite.c"
out=$("$ALONE" ps --all) || fail "ps --all by the executable alone"
assert_contains "$out" "$j" "ps lists the job"
out=$("$ALONE" show "$j") || fail "show by the executable alone"
assert_contains "$out" "failed" "show's state"
"$ALONE" submit --gpus 0 -- sleep 300 >"$T/id" || fail "submit"
j2=$(cat "$T/id")
wait_state "$j2" running
"$ALONE" cancel "$j2" || fail "cancel by the executable alone"
"$ALONE" wait "$j2" 2>"$T/wait.err"
assert_eq 1 "$?" "wait of a cancelled job"
assert_contains "$(cat "$T/wait.err")" "cancelled" "wait's note"
out=$("$ALONE" submit --array 0-2 --gpus 0 -- true) || fail "submit --array alone"
[[ $out =~ ^[0-9]+-[0-9]+$ ]] || fail "submit --array printed '$out'"
"$ALONE" token ls >/dev/null || fail "token ls by the executable alone"

# --- a token the coordinator does not know: its message, and what to check
GPUPOOL_TOKEN=gpt_bogus "$ALONE" ps >"$T/out" 2>"$T/err"
assert_eq 1 "$?" "ps with an unknown token"
assert_contains "$(cat "$T/err")" "the coordinator does not know this token" "401 explained"
api - GET /v1/jobs
msg=$(printf '%s' "$API_BODY" | json 'd["error"]')
assert_contains "$(cat "$T/err")" "$msg" "the coordinator's own message"

# --- nobody listening: refused, said clearly
port=$(free_port)
GPUPOOL_URL=http://127.0.0.1:$port "$ALONE" ps >"$T/out" 2>"$T/err"
assert_eq 1 "$?" "ps with nobody listening"
assert_contains "$(cat "$T/err")" "cannot reach the coordinator at http://127.0.0.1:$port: Connection refused" "refused"

# --- the rest is the library's: with it, through the real executable ...
cli image ls
assert_eq 0 "$CLI_RC" "image ls through libgpupool.so ($CLI_ERR)"
cli help
assert_eq 0 "$CLI_RC" "help"
# ... and without it, a clear error (not a crash)
"$ALONE" image ls >"$T/out" 2>"$T/err"
assert_eq 1 "$?" "image ls without libgpupool.so"
assert_contains "$(cat "$T/err")" "libgpupool.so is neither in $T/alone" "where it looked"
"$ALONE" coordinator --help >"$T/out" 2>"$T/err"
assert_eq 1 "$?" "coordinator without libgpupool.so"
assert_contains "$(cat "$T/err")" "libgpupool.so" "the coordinator needs the library"
# an https:// coordinator goes to libcurl (the library) too
GPUPOOL_URL=https://127.0.0.1:$port "$ALONE" ps >"$T/out" 2>"$T/err"
assert_contains "$(cat "$T/err")" "libgpupool.so" "https:// needs the library"

# --- the coordinator runs as `gpupool` (the name tests and scripts look for)
assert_eq gpupool "$(cat /proc/"$COORD_PID"/comm)" "the coordinator's process name"

log "cli lite ok"
