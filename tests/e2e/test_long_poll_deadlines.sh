# Proves that held long polls end at their own deadlines whatever order
# they arrived in (notify.c keeps the waiters in deadline order): with a
# 60 s `wait` already held, a later 1 s `wait` on the same running job is
# answered (state running) while the 60 s one is still held; a later 2 s
# log follow is answered too; then the job ends and the 60 s `wait` is
# answered at once with the final state.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

submit -- sleep 300
j=$JOB
wait_state "$j" running

held() { # NAME WAIT_MS PATH: a GET in the background, body to $T/NAME
	curl -sS --max-time 90 -H "Authorization: Bearer $ADMIN_TOKEN" \
	    -o "$T/$1" -w '%{http_code}' "$(coord_url)$3" \
	    >"$T/$1.status" 2>"$T/$1.err" &
}
done_() { [ -s "$T/$1.status" ]; }

held long 60000 "/v1/jobs/$j/wait?wait_ms=60000"
long_pid=$!
# The long one must be held (suspended) before the short ones arrive.
sleep 0.5
done_ long && fail "the 60 s wait was answered at once: $(cat "$T/long")"
held short 1000 "/v1/jobs/$j/wait?wait_ms=1000"
held logs 2000 "/v1/jobs/$j/log?offset=0&wait_ms=2000"

for _ in $(seq $((WAIT_S * 10))); do
	done_ short && done_ logs && break
	sleep 0.1
done
done_ short || fail "the 1 s wait was not answered within ${WAIT_S}s"
done_ logs || fail "the 2 s log follow was not answered within ${WAIT_S}s"
assert_eq 200 "$(cat "$T/short.status")" "1 s wait status"
assert_eq running "$(json 'd["state"]' <"$T/short")" "1 s wait: job state"
assert_eq 200 "$(cat "$T/logs.status")" "2 s log follow status"
done_ long && fail "the 60 s wait ended early: $(cat "$T/long")"

cli cancel "$j"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait "$long_pid"
assert_eq 200 "$(cat "$T/long.status")" "60 s wait status"
assert_eq cancelled "$(json 'd["state"]' <"$T/long")" "60 s wait: final state"

log "long-poll deadlines ok"
