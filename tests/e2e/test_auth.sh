# Proves authentication and the role rules: no or a bad token gets 401 (and
# the CLI exits non-zero with a message); a user sees, follows and cancels
# only its own jobs; a user may neither create tokens nor register nodes; a
# provider may not submit; a provider may not take over a node another
# provider registered; the admin sees everything; `token create` prints only
# the token.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

# --- token create (CLI, as admin) prints only the token
cli token create --role user --name alice
assert_eq 0 "$CLI_RC" "token create ($CLI_ERR)"
alice=$CLI_OUT
[[ $alice =~ ^[^[:space:]]+$ ]] || fail "token create printed more than a token: '$CLI_OUT'"
api_expect 200 "$alice" GET /v1/whoami
assert_eq alice "$(printf '%s' "$API_BODY" | json 'd["name"]')" "whoami name"
assert_eq user "$(printf '%s' "$API_BODY" | json 'd["role"]')" "whoami role"
# The pool's coordinators (the dashboard moves only to these): one here
# (SQLite), itself, leading; to any token, never without one.
api_expect 200 "$alice" GET /v1/coordinators
assert_eq "[[\"$(coord_url)\", true]]" \
    "$(printf '%s' "$API_BODY" | json '[[c["url"], c["leader"]] for c in d["coordinators"]]')" \
    "GET /v1/coordinators, one coordinator"
api_expect 401 - GET /v1/coordinators
# The scheme is case-insensitive (RFC 9110 11.1): "bearer", "BEARER".
scheme_status() { # AUTHORIZATION: the HTTP status of whoami with it
	curl -sS -o /dev/null -w '%{http_code}' --max-time 40 \
	    "${CURL_TLS[@]+"${CURL_TLS[@]}"}" -H "Authorization: $1" \
	    "$(coord_url)/v1/whoami"
}
for scheme in bearer BEARER bEaReR; do
	assert_eq 200 "$(scheme_status "$scheme $alice")" "Authorization: $scheme ..."
done
assert_eq 401 "$(scheme_status "Basic $alice")" "Authorization: Basic with a token"
GPUPOOL_TOKEN=$alice cli whoami
assert_eq 0 "$CLI_RC" "whoami as alice ($CLI_ERR)"
assert_contains "$CLI_OUT" alice "CLI whoami"
mk_token user bob
bob=$TOKEN
mk_token provider prov2
prov2=$TOKEN
prov1=$(tr -d '[:space:]' <"$T/alpha.token")

# --- no token, bad token
api_expect 401 - GET /v1/whoami
assert_error_body "no token"
api_expect 401 - GET /v1/jobs
api_expect 401 "gpt_not-a-real-token" GET /v1/whoami
assert_error_body "bad token"
api_expect 401 "gpt_not-a-real-token" POST /v1/jobs '{"command":["true"]}'
grep -qi '^X-Gpupool-Protocol: *1' "$API_HEADERS" || fail "401 answer lacks X-Gpupool-Protocol: 1"

(unset GPUPOOL_TOKEN; cli ps; echo "$CLI_RC" >"$T/rc"; printf '%s' "$CLI_ERR" >"$T/err")
[ "$(cat "$T/rc")" != 0 ] || fail "ps without a token exited 0"
[ -s "$T/err" ] || fail "ps without a token printed no error"
GPUPOOL_TOKEN=gpt_not-a-real-token cli ps
[ "$CLI_RC" != 0 ] || fail "ps with a bad token exited 0"
printf '%s' "$CLI_ERR" | grep -qiE 'auth|token|401|denied|unauthori' ||
    fail "ps with a bad token: unclear message: $CLI_ERR"

# --- each user owns its jobs
GPUPOOL_TOKEN=$bob submit -- sleep 300
bjob=$JOB
GPUPOOL_TOKEN=$alice submit --gpus 0 -- true
ajob=$JOB
assert_eq bob "$(job_get "$bjob" 'd["user"]')" "owner of bob's job"
assert_eq alice "$(job_get "$ajob" 'd["user"]')" "owner of alice's job"

for path in "/v1/jobs/$bjob" "/v1/jobs/$bjob/log?offset=0" "/v1/jobs/$bjob/wait?wait_ms=10"; do
	api "$alice" GET "$path"
	case $API_STATUS in 403 | 404) ;; *) fail "alice GET $path: HTTP $API_STATUS $API_BODY" ;; esac
	assert_error_body "alice GET $path"
done
api "$alice" POST "/v1/jobs/$bjob/cancel"
case $API_STATUS in 403 | 404) ;; *) fail "alice cancelling bob's job: HTTP $API_STATUS" ;; esac
for cmd in show logs cancel; do
	GPUPOOL_TOKEN=$alice cli "$cmd" "$bjob"
	[ "$CLI_RC" != 0 ] || fail "alice: gpupool $cmd of bob's job exited 0"
	assert_not_contains "$CLI_OUT" "sleep" "alice: gpupool $cmd of bob's job"
done
assert_eq false "$(job_get "$bjob" 'd["cancel_requested"] or d["state"] == "cancelled"')" "bob's job after alice's cancel"

GPUPOOL_TOKEN=$alice cli ps --all --json
assert_eq 0 "$CLI_RC" "alice ps --all ($CLI_ERR)"
ids=" $(printf '%s' "$CLI_OUT" | json '" ".join(str(x["id"]) for x in (d["jobs"] if isinstance(d, dict) else d))') "
[[ $ids == *" $ajob "* ]] || fail "alice's ps --all lacks her job $ajob ($ids)"
[[ $ids != *" $bjob "* ]] || fail "alice's ps --all lists bob's job $bjob"
api_expect 200 "$alice" GET '/v1/jobs?all=1'
[[ " $(printf '%s' "$API_BODY" | json '" ".join(str(x["id"]) for x in d["jobs"])') " != *" $bjob "* ]] ||
    fail "GET /v1/jobs?all=1 as alice lists bob's job"

# a second token with the same user name owns the same jobs
mk_token user bob
GPUPOOL_TOKEN=$TOKEN cli show "$bjob" --json
assert_eq 0 "$CLI_RC" "bob's second token showing bob's job ($CLI_ERR)"

# --- admin sees all
cli ps --all --json
ids=" $(printf '%s' "$CLI_OUT" | json '" ".join(str(x["id"]) for x in (d["jobs"] if isinstance(d, dict) else d))') "
[[ $ids == *" $ajob "* && $ids == *" $bjob "* ]] || fail "admin ps --all: $ids"
cli show "$bjob" --json
assert_eq 0 "$CLI_RC" "admin show of bob's job"

# --- a user may not create tokens or register nodes
api_expect 403 "$alice" POST /v1/tokens '{"role":"admin","name":"evil"}'
assert_error_body "user creating a token"
GPUPOOL_TOKEN=$alice cli token create --role admin --name evil
[ "$CLI_RC" != 0 ] || fail "token create as a user exited 0: $CLI_OUT"
reg='{"protocol":1,"name":"NAME","cpus":1,"mem_mib":1000,"gpus":[{"index":0,"uuid":"GPU-e2e-0","model":"Fake","mem_mib":1000}],"running":[]}'
api_expect 403 "$alice" POST /v1/agent/register "${reg/NAME/usernode}"
assert_error_body "user registering a node"

# --- a provider may not submit
api_expect 403 "$prov1" POST /v1/jobs '{"command":["true"]}'
assert_error_body "provider submitting"
GPUPOOL_TOKEN=$prov1 cli submit -- true
[ "$CLI_RC" != 0 ] || fail "submit as a provider exited 0: $CLI_OUT"

# --- another provider may not take over alpha, but may register its own node
api_expect 403 "$prov2" POST /v1/agent/register "${reg/NAME/alpha}"
assert_error_body "prov2 registering alpha"
api_expect 200 "$prov2" POST /v1/agent/register "${reg/NAME/gamma}"
nid=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
is_uint "$nid" || fail "register answer lacks node_id: $API_BODY"
# and it cannot heartbeat for alpha's node id
api "$prov2" GET /v1/nodes
alpha_id=$(printf '%s' "$API_BODY" | json '[n["id"] for n in d["nodes"] if n["name"] == "alpha"][0]')
api "$prov2" POST /v1/agent/heartbeat "{\"node_id\":$alpha_id,\"running\":[],\"gpus\":[]}"
case $API_STATUS in 403 | 404) ;; *) fail "prov2 heartbeat for alpha: HTTP $API_STATUS" ;; esac
# alpha is still alpha's: its agent keeps working
assert_eq up "$(node_state alpha)" "alpha after prov2's attempts"
api "$ADMIN_TOKEN" GET /v1/nodes
assert_eq prov-alpha "$(printf '%s' "$API_BODY" | json '[n["owner"] for n in d["nodes"] if n["name"] == "alpha"][0]')" "alpha's owner"
# a provider sees the jobs placed on its nodes, not others
wait_state "$bjob" running
api_expect 200 "$prov1" GET '/v1/jobs?all=1'
[[ " $(printf '%s' "$API_BODY" | json '" ".join(str(x["id"]) for x in d["jobs"])') " == *" $bjob "* ]] ||
    fail "prov-alpha does not see bob's job on alpha"
api_expect 200 "$prov2" GET '/v1/jobs?all=1'
[[ " $(printf '%s' "$API_BODY" | json '" ".join(str(x["id"]) for x in d["jobs"])') " != *" $bjob "* ]] ||
    fail "prov2 sees bob's job on alpha"

# the owner may cancel
GPUPOOL_TOKEN=$bob cli cancel "$bjob"
assert_eq 0 "$CLI_RC" "bob cancelling his job ($CLI_ERR)"
wait_state "$bjob" cancelled
echo ok
