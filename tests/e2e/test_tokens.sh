# Proves token listing and revocation (issue 7, docs/operations.md):
# `token ls` shows ids, roles and names but never a secret; a revoked
# token stops working at once and stays revoked across a restart, and its
# id is never given again; the last admin token cannot be revoked; only
# admins list or revoke; a provider's token is rotated without losing its
# node (a new token of the same name takes the node over, the old one is
# revoked, jobs still run there).
. "$(dirname "$0")/lib.sh"

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN

# --- ls: ids, roles, names, never a token or a hash
cli token ls
[ "$CLI_RC" = 0 ] || fail "token ls exited $CLI_RC: $CLI_ERR"
assert_contains "$CLI_OUT" "ROLE" "token ls header"
assert_contains "$CLI_OUT" "alice" "token ls lists alice"
assert_not_contains "$CLI_OUT" "gpt_" "token ls shows a token"
cli token ls --json
alice_id=$(printf '%s' "$CLI_OUT" | json '[t["id"] for t in d["tokens"] if t["name"] == "alice"][0]')
is_uint "$alice_id" || fail "token ls --json: no id for alice: $CLI_OUT"
keys=$(printf '%s' "$CLI_OUT" | json 'sorted(set(k for t in d["tokens"] for k in t))')
assert_eq '["created_at", "id", "name", "role"]' "$keys" "token ls --json fields"
api_expect 200 "$ADMIN_TOKEN" GET /v1/tokens
assert_not_contains "$API_BODY" "$ALICE" "GET /v1/tokens"
grep -q "$(printf '%s' "$ALICE" | cut -c5-20)" <<<"$API_BODY" &&
    fail "GET /v1/tokens leaks part of a token"

# --- only admins
api_expect 403 "$ALICE" GET /v1/tokens
api_expect 403 "$ALICE" POST "/v1/tokens/$alice_id/revoke"
GPUPOOL_TOKEN=$BOB cli token ls
[ "$CLI_RC" = 1 ] || fail "token ls as a user exited $CLI_RC"

# --- revoke: at once, and for good
api_expect 200 "$ALICE" GET /v1/jobs
api_expect 200 "$ALICE" GET /v1/whoami
cli token revoke "$alice_id"
[ "$CLI_RC" = 0 ] || fail "token revoke exited $CLI_RC: $CLI_ERR"
assert_contains "$CLI_OUT" "revoked token $alice_id (user alice)" "revoke output"
api_expect 401 "$ALICE" GET /v1/whoami
api_expect 401 "$ALICE" GET /v1/jobs
api_expect 200 "$BOB" GET /v1/whoami
cli token ls
assert_not_contains "$CLI_OUT" "alice" "token ls after the revocation"
cli token revoke "$alice_id"
[ "$CLI_RC" = 1 ] || fail "revoking a revoked token exited $CLI_RC"
assert_contains "$CLI_ERR" "no token $alice_id" "revoking twice"
cli token revoke nine
[ "$CLI_RC" = 2 ] || fail "token revoke nine exited $CLI_RC"
api_expect 404 "$ADMIN_TOKEN" POST /v1/tokens/999999/revoke

# --- the last admin token stays
admin_id=$(json '[t["id"] for t in d["tokens"] if t["role"] == "admin"][0]' < <(
    curl -sS -H "Authorization: Bearer $ADMIN_TOKEN" "$(coord_url)/v1/tokens"))
api_expect 409 "$ADMIN_TOKEN" POST "/v1/tokens/$admin_id/revoke"
assert_contains "$API_BODY" "last admin token" "revoking the last admin"
mk_token admin ops
OPS=$TOKEN
api_expect 200 "$OPS" POST "/v1/tokens/$admin_id/revoke"
api_expect 401 "$ADMIN_TOKEN" GET /v1/whoami
ADMIN_TOKEN=$OPS
GPUPOOL_TOKEN=$OPS

# --- revocations survive a restart, and ids are never reused
mk_token user carol
carol_id=$(printf '%s' "$API_BODY" | json 'd["id"]')
api_expect 200 "$OPS" POST "/v1/tokens/$carol_id/revoke"
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "coordinator did not stop"
# (on the store start_coordinator chose: GP_TEST_DB)
spawn "$COORD_LOG" "$GP" coordinator --listen "127.0.0.1:$COORD_PORT" \
    --data "$COORD_DATA" "${COORD_DB_ARGS[@]+"${COORD_DB_ARGS[@]}"}" \
    --lease-ms 2000 --heartbeat-ms 300 -v
COORD_PID=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until api "$OPS" GET /v1/whoami && [ "$API_STATUS" = 200 ]; do
	alive "$COORD_PID" || fail "coordinator exited after the restart"
	[ $SECONDS -ge $deadline ] && fail "coordinator not back after ${WAIT_S}s"
	sleep 0.1
done
api_expect 401 "$ALICE" GET /v1/whoami
api_expect 401 "$TOKEN" GET /v1/whoami
api_expect 201 "$OPS" POST /v1/tokens '{"role":"user","name":"dave"}'
dave_id=$(printf '%s' "$API_BODY" | json 'd["id"]')
[ "$dave_id" -gt "$carol_id" ] || fail "token id $dave_id reused (carol had $carol_id)"

# --- rotating a provider's token keeps its node
start_agent r1 1
wait_node_up r1
old_prov=$(tr -d '\n' <"$T/r1.token")
old_id=$(json "[t['id'] for t in d['tokens'] if t['name'] == 'prov-r1'][0]" < <(
    curl -sS -H "Authorization: Bearer $OPS" "$(coord_url)/v1/tokens"))
mk_token provider prov-r1
(umask 077 && printf '%s\n' "$TOKEN" >"$T/r1.token")
kill -TERM "${AGENT_PID[r1]}"
wait_exit "${AGENT_PID[r1]}" || fail "agent r1 did not stop"
start_agent r1 1
# The node is still up from the first registration: wait for the new
# agent's own (its second 'registered' line), so that the node is the new
# token's before the old one is revoked.
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c 'registered node=r1' "$T/agent-r1.log")" -ge 2 ]; do
	[ $SECONDS -ge $deadline ] && fail "agent r1 did not register again: $(tail -n 5 "$T/agent-r1.log")"
	sleep 0.1
done
wait_node_up r1
api_expect 200 "$OPS" POST "/v1/tokens/$old_id/revoke"
api_expect 401 "$old_prov" GET /v1/whoami
node_id=$(api "$OPS" GET /v1/nodes; printf '%s' "$API_BODY" | json '[n["id"] for n in d["nodes"] if n["name"] == "r1"][0]')
api_expect 200 "$TOKEN" POST /v1/agent/heartbeat "{\"node_id\": $node_id}"
submit --gpus 1 -- true
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "a job on the node after the rotation"
assert_eq r1 "$(job_get "$JOB" 'd["node"]')" "the job's node"
echo "ok"
