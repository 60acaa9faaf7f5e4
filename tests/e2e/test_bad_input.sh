# Proves the coordinator refuses bad requests cleanly: malformed JSON, unknown
# fields, out-of-range or wrong-typed values, bad names, oversized bodies,
# unknown or malformed job ids each get a 4xx with a {"error": ...} body, and
# the coordinator keeps serving. The CLI turns bad arguments into a non-zero
# exit and one clear line on stderr.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha
mk_token user alice
U=$TOKEN

bad() { # STATUS-PATTERN WHAT BODY
	api "$U" POST /v1/jobs "$3"
	[[ $API_STATUS =~ ^($1)$ ]] || fail "$2: expected HTTP $1, got $API_STATUS: $API_BODY"
	assert_error_body "$2"
}
bad 400 "malformed JSON" '{"command": ["true"'
bad 400 "not an object" '["true"]'
bad 400 "empty body" ''
bad 400 "unknown field" '{"command":["true"],"gpuz":1}'
bad 400 "missing command" '{"gpus":1}'
bad 400 "empty command" '{"command":[]}'
bad 400 "command not strings" '{"command":[1,2]}'
bad 400 "empty command word" '{"command":[""]}'
bad 400 "negative gpus" '{"command":["true"],"gpus":-1}'
bad 400 "huge gpus" '{"command":["true"],"gpus":100000}'
bad 400 "gpus beyond 64" '{"command":["true"],"gpus":65}'
bad 400 "gpus beyond int64" '{"command":["true"],"gpus":99999999999999999999999}'
bad 400 "fractional gpus" '{"command":["true"],"gpus":1.5}'
bad 400 "gpus as string" '{"command":["true"],"gpus":"2"}'
bad 400 "cpus 0" '{"command":["true"],"cpus":0}'
bad 400 "negative time" '{"command":["true"],"time_limit_s":-5}'
bad 400 "name with spaces" '{"command":["true"],"name":"my job"}'
bad 400 "name too long" "{\"command\":[\"true\"],\"name\":\"$(printf 'n%.0s' $(seq 65))\"}"
bad 400 "reserved env" '{"command":["true"],"env":{"CUDA_VISIBLE_DEVICES":"0"}}'
bad 400 "reserved GPUPOOL_ env" '{"command":["true"],"env":{"GPUPOOL_X":"0"}}'
bad 400 "bad env key" '{"command":["true"],"env":{"1A":"x"}}'
bad 400 "env value not a string" '{"command":["true"],"env":{"A":1}}'
bad 400 "gpu_model too long" "{\"command\":[\"true\"],\"gpu_model\":\"$(printf 'm%.0s' $(seq 65))\"}"
bad 400 "NUL in a command word" '{"command":["tr\u0000ue"]}'

# a 70 KiB body: 413
"$PY" -c 'import json; print(json.dumps({"command": ["echo", "x" * 4000] , "env": {"K%d" % i: "v" * 550 for i in range(128)}}))' >"$T/big.json"
[ "$(stat -c %s "$T/big.json")" -gt 65536 ] || fail "test bug: big.json too small"
bad 413 "body over 64 KiB" "@$T/big.json"

# tokens endpoint validates too
api "$ADMIN_TOKEN" POST /v1/tokens '{"role":"root","name":"x"}'
[ "$API_STATUS" = 400 ] || fail "token with role root: HTTP $API_STATUS"
assert_error_body "token with role root"
api "$ADMIN_TOKEN" POST /v1/tokens '{"role":"user"}'
[ "$API_STATUS" = 400 ] || fail "token without a name: HTTP $API_STATUS"

# job ids
api_expect 404 "$U" GET /v1/jobs/999999
assert_error_body "unknown job id"
api_expect 404 "$ADMIN_TOKEN" GET /v1/jobs/999999
api_expect 404 "$ADMIN_TOKEN" POST /v1/jobs/999999/cancel
api_expect 404 "$ADMIN_TOKEN" GET '/v1/jobs/999999/log?offset=0'
for id in abc 0 -1 1x 99999999999999999999999; do
	api "$ADMIN_TOKEN" GET "/v1/jobs/$id"
	[[ $API_STATUS =~ ^(400|404)$ ]] || fail "GET /v1/jobs/$id: HTTP $API_STATUS"
	assert_error_body "GET /v1/jobs/$id"
done
api "$ADMIN_TOKEN" GET /v1/no-such-endpoint
[[ $API_STATUS =~ ^(400|404|405)$ ]] || fail "unknown endpoint: HTTP $API_STATUS"
api "$ADMIN_TOKEN" DELETE /v1/jobs
[[ $API_STATUS =~ ^(400|404|405)$ ]] || fail "DELETE /v1/jobs: HTTP $API_STATUS"
# a 405 names the methods the path takes (RFC 9110; the route table)
if [ "$API_STATUS" = 405 ]; then
	grep -qi '^Allow: GET, POST' "$API_HEADERS" ||
	    fail "DELETE /v1/jobs: 405 without 'Allow: GET, POST'"
fi
# log offset that is not a number
submit -- echo hi
cli wait "$JOB"
api "$ADMIN_TOKEN" GET "/v1/jobs/$JOB/log?offset=banana"
[ "$API_STATUS" = 400 ] || fail "log?offset=banana: HTTP $API_STATUS"
api "$ADMIN_TOKEN" GET "/v1/jobs/$JOB/log?offset=-1"
[ "$API_STATUS" = 400 ] || fail "log?offset=-1: HTTP $API_STATUS"

# agent protocol: wrong protocol version refused
api "$(tr -d '[:space:]' <"$T/alpha.token")" POST /v1/agent/register \
    '{"protocol":2,"name":"alpha","cpus":1,"mem_mib":1,"gpus":[],"running":[]}'
[ "$API_STATUS" = 400 ] || fail "register with protocol 2: HTTP $API_STATUS"

# a raw garbage request does not take the coordinator down
printf 'GARBAGE \x01\x02\r\n\r\n' | timeout 5 "$PY" -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(sys.stdin.buffer.read())
try: s.recv(1000)
except Exception: pass' "$COORD_PORT"

# still serving, and a good submit still works
api_expect 200 "$ADMIN_TOKEN" GET /v1/whoami
alive "$COORD_PID" || fail "coordinator died"
submit -- true
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "a good job after the bad requests"

# --- the CLI: non-zero and one clear line
cli_bad() { # WHAT GREP-PATTERN ARGS...
	local what=$1 pat=$2
	shift 2
	cli "$@"
	[ "$CLI_RC" != 0 ] || fail "$what: exited 0 (printed '$CLI_OUT')"
	[ -z "$CLI_OUT" ] || fail "$what: printed on stdout: $CLI_OUT"
	# one line saying what is wrong; a usage error may add the command's
	# one-line synopsis ("usage: gpupool ...") after it, nothing else
	local first rest
	first=$(printf '%s\n' "$CLI_ERR" | head -n 1)
	rest=$(printf '%s\n' "$CLI_ERR" | tail -n +2)
	printf '%s' "$first" | grep -qiE "$pat" || fail "$what: unclear message: $CLI_ERR"
	[ -z "$rest" ] || [[ $rest =~ ^usage:\ gpupool\ [^$'\n']*$ ]] ||
	    fail "$what: more than one line of error: $CLI_ERR"
}
cli_bad "submit --gpus -1" 'gpus' submit --gpus -1 -- true
cli_bad "submit --time banana" 'time|banana|duration' submit --time banana -- true
cli_bad "submit --cpus 0" 'cpus' submit --cpus 0 -- true
cli_bad "submit --env NOEQUALS" 'env|NOEQUALS' submit --env NOEQUALS -- true
cli_bad "show abc" 'abc|job|id' show abc
cli_bad "show 999999" '999999|not found|no such|unknown' show 999999
cli_bad "logs 999999" '999999|not found|no such|unknown' logs 999999
# (usage text may take several lines here)
cli submit --gpus 1
[ "$CLI_RC" != 0 ] || fail "submit with no command exited 0 ($CLI_OUT)"
[ -n "$CLI_ERR" ] || fail "submit with no command: no message"
cli frobnicate
[ "$CLI_RC" != 0 ] || fail "unknown command exited 0"
[ -n "$CLI_ERR" ] || fail "unknown command: no message"
api_expect 200 "$ADMIN_TOKEN" GET /v1/whoami

# odd ids last: a NUL in the path must not turn into another endpoint
for id in '%00' '1%00' '%2e%2e'; do
	api "$ADMIN_TOKEN" GET "/v1/jobs/$id"
	[[ $API_STATUS =~ ^(400|404)$ ]] || fail "GET /v1/jobs/$id: HTTP $API_STATUS: $(printf '%s' "$API_BODY" | head -c 300)"
	assert_error_body "GET /v1/jobs/$id"
done
echo ok
