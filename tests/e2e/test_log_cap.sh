# Proves the log cap: with --log-cap 65536, a job writing 1 MiB keeps about
# 64 KiB of log followed by one line "[gpupool: log truncated at N bytes]",
# through both the API and `gpupool logs`; the job itself still succeeds.
. "$(dirname "$0")/lib.sh"

start_coordinator --log-cap 65536
start_agent alpha 1
wait_node_up alpha

submit -- sh -c 'yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ | head -c 1048576'
j=$JOB
cli wait "$j"
assert_eq 0 "$CLI_RC" "the chatty job's exit"
assert_eq succeeded "$(job_state "$j")" "the chatty job"

cli logs "$j"
assert_eq 0 "$CLI_RC" "gpupool logs ($CLI_ERR)"
"$GP" logs "$j" >"$T/log.bin" 2>/dev/null
size=$(stat -c %s "$T/log.bin")
last=$(tail -n 1 "$T/log.bin")
[[ $last =~ ^\[gpupool:\ log\ truncated\ at\ ([0-9]+)\ bytes\]$ ]] ||
    fail "last line of the log is '$(printf '%s' "$last" | head -c 200)', not the truncation notice"
n=${BASH_REMATCH[1]}
# What precedes the notice must be a prefix of the job's own output, unaltered
# (plus, when the cut fell inside a line, the newline that puts the notice on
# a line of its own); about the cap in size: not more, and not much less (a
# whole chunk may be dropped).
head -c $((size - ${#last} - 1)) "$T/log.bin" >"$T/head.bin"
yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ | head -c 1048576 >"$T/want.bin"
kept=$("$PY" - "$T/head.bin" "$T/want.bin" <<'EOF2'
import sys
got = open(sys.argv[1], "rb").read()
want = open(sys.argv[2], "rb").read()
if want.startswith(got):
    print(len(got))
elif got.endswith(b"\n") and want.startswith(got[:-1]):
    print(len(got) - 1)
else:
    print("MISMATCH")
EOF2
)
[ "$kept" != MISMATCH ] || fail "the log before the notice is not the job's output"
[ "$kept" -le 65536 ] && [ "$kept" -ge 32768 ] ||
    fail "log keeps $kept bytes of output (file $size bytes), not about the 65536-byte cap"
[ "$n" = 65536 ] || [ "$n" = "$kept" ] || fail "notice says $n bytes; kept $kept, cap 65536"
assert_eq 1 "$(grep -c 'gpupool: log truncated' "$T/log.bin")" "truncation notices"

# the API agrees, and says the log is complete
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$j/log?offset=0"
cmp -s "$T/api.body" "$T/log.bin" || fail "API log differs from gpupool logs"
grep -qi '^X-Gpupool-Done: *1' "$API_HEADERS" || fail "finished job's log lacks X-Gpupool-Done: 1"
off=$(sed -n 's/^X-Gpupool-Offset: *\([0-9]*\).*/\1/Ip' "$API_HEADERS")
assert_eq "$size" "$off" "X-Gpupool-Offset after the whole log"
# reading from an offset gives the rest
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$j/log?offset=$((size - ${#last} - 1))"
assert_eq "$last" "$API_BODY" "log read from the notice's offset"

# a small job under the cap is untouched
submit -- sh -c 'echo small'
cli wait "$JOB"
cli logs "$JOB"
assert_eq small "$CLI_OUT" "a log under the cap"
echo ok
