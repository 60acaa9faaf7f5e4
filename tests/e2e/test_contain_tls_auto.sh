#!/usr/bin/env bash
# test_contain_tls_auto.sh: secure by default across machines (issue 15,
# finding 7). A coordinator that listens beyond loopback (on the host's
# end of a network namespace this test makes) without a certificate makes
# its own CA and certificate at its first start, and the tokens it makes
# carry the CA's hash (TOKEN@sha256:HEX): the CLI and an agent in the
# namespace verify it with nothing copied (no --ca), a token with another
# hash is refused the connection, a restart keeps the CA (the tokens
# still work), and the server's certificate verifies against DATA/tls's
# CA for clients that are given it. Plain HTTP there only with
# --insecure, and the log and the dashboard (whoami's "insecure") say so.
. "$(dirname "$0")/lib.sh"

netns_available || { echo "SKIP $(basename "$0" .sh): needs netns: $NETNS_WHY"; exit 77; }
command -v openssl >/dev/null || { echo "SKIP $(basename "$0" .sh): needs openssl: the coordinator makes its CA with it"; exit 77; }
netns_create p
COORD_PORT=$(free_port)
URL="https://$NETNS_HOST_IP:$COORD_PORT"

start_far_coordinator() { # [extra flags]
	spawn "$COORD_LOG" "$GP" coordinator --listen "$NETNS_HOST_IP:$COORD_PORT" \
	    --data "$COORD_DATA" --lease-ms 2000 --heartbeat-ms 300 -v "$@"
	COORD_PID=$SPAWNED_PID
	local deadline=$((SECONDS + WAIT_S))
	while [ ! -s "$COORD_DATA/admin.token" ]; do
		alive "$COORD_PID" || fail "the coordinator exited: $(tail -n 5 "$COORD_LOG")"
		[ $SECONDS -ge $deadline ] && fail "no admin.token after ${WAIT_S}s"
		sleep 0.1
	done
	ADMIN=$(tr -d ' \r\n' <"$COORD_DATA/admin.token")
	until GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN "$GP" whoami >/dev/null 2>"$T/whoami.err"; do
		alive "$COORD_PID" || fail "the coordinator exited: $(tail -n 5 "$COORD_LOG")"
		[ $SECONDS -ge $deadline ] && fail "whoami over $URL: $(cat "$T/whoami.err")"
		sleep 0.2
	done
}

start_far_coordinator
assert_contains "$(cat "$COORD_LOG")" "made the coordinator's own CA" "the coordinator's log"
[[ $ADMIN == gpt_*@sha256:* ]] || fail "the admin token carries no CA hash: $ADMIN"
pin=${ADMIN#*@sha256:}
want=$(openssl x509 -in "$COORD_DATA/tls/ca.crt" -pubkey -noout |
	openssl pkey -pubin -outform der | openssl dgst -sha256 -hex | sed 's/.*= //')
assert_eq "$want" "$pin" "the token's hash is the CA's public key's"
assert_eq 0 "$(( 8#$(stat -c %a "$COORD_DATA/tls/ca.key") & 8#077 ))" "ca.key's mode"

# A client given the CA file verifies the certificate (host included).
st=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 20 \
	--cacert "$COORD_DATA/tls/ca.crt" -H "Authorization: Bearer ${ADMIN%@*}" "$URL/v1/whoami")
assert_eq 200 "$st" "curl --cacert DATA/tls/ca.crt"
# The dashboard over TLS: HSTS (curl -I).
head=$(curl -sS -I --max-time 20 --cacert "$COORD_DATA/tls/ca.crt" "$URL/" | tr -d '\r')
assert_contains "$head" "Strict-Transport-Security: max-age=31536000" "the dashboard's HSTS over TLS"
# The CLI, with the token alone; then with a token of another hash.
out=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN "$GP" whoami 2>&1) || fail "whoami: $out"
bad="${ADMIN%@*}@sha256:$(printf '%064d' 0)"
if out=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$bad "$GP" whoami 2>&1); then
	fail "whoami with another CA hash answered: $out"
fi
log "another hash: $out"

# A provider token made now carries the hash too; an agent in the
# namespace joins with it and no --ca.
out=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN "$GP" token create --role provider --name prov-a 2>&1) ||
	fail "token create: $out"
PROV=$(printf '%s\n' "$out" | grep -o 'gpt_[A-Za-z0-9_-]*@sha256:[0-9a-f]*' | head -1)
[ -n "$PROV" ] || fail "token create printed no token with a hash: $out"
(umask 077 && printf '%s\n' "$PROV" >"$T/a.token")
netns_spawn p "$T/agent-a.log" "$GP" agent --coordinator "$URL" \
	--token-file "$T/a.token" --name a --work "$T/agents/a" --fake-gpus 1 \
	--run-as nobody -v
AGENT_PID[a]=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q "registered node=a" "$T/agent-a.log"; do
	alive "${AGENT_PID[a]}" || fail "the agent exited: $(tail -n 5 "$T/agent-a.log")"
	[ $SECONDS -ge $deadline ] && fail "the agent did not register: $(tail -n 5 "$T/agent-a.log")"
	sleep 0.2
done

# A job through it all: submitted, assigned, run and reported over HTTPS.
out=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN "$GP" submit --gpus 1 -- echo over-tls 2>&1) ||
	fail "submit over $URL: $out"
job=$out
out=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN timeout "$WAIT_S" "$GP" wait "$job" 2>&1) ||
	fail "job $job over $URL did not succeed: $out $(tail -n 5 "$T/agent-a.log")"
out=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN "$GP" logs "$job" 2>&1)
assert_contains "$out" over-tls "the job's log over $URL"

# A restart keeps the CA: the same tokens work.
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "the coordinator did not stop"
start_far_coordinator
out=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$PROV "$GP" nodes 2>&1) || fail "the provider token after a restart: $out"

# Plain HTTP beyond loopback: only with --insecure, and said.
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "the coordinator did not stop"
mv "$COORD_DATA" "$T/coord-tls"
: >"$COORD_LOG"
URL="http://$NETNS_HOST_IP:$COORD_PORT"
start_far_coordinator --insecure
assert_contains "$(cat "$COORD_LOG")" "INSECURE: serving plain HTTP beyond loopback" "the log of --insecure"
[ ! -e "$COORD_DATA/tls" ] || fail "--insecure made a CA"
[[ $ADMIN != *@sha256:* ]] || fail "--insecure's token carries a hash"
# What the dashboard reads to show its warning.
got=$(curl -sS --max-time 20 -H "Authorization: Bearer $ADMIN" "$URL/v1/whoami" |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin).get("insecure"))')
assert_eq True "$got" "whoami's insecure under --insecure"
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "the coordinator did not stop"

# `gpupool up` beyond loopback: its CLI config and its agent use the
# tokens with the hash, over HTTPS.
port=$(free_port)
unset GPUPOOL_URL GPUPOOL_TOKEN
cli up --detach --data "$T/pool" --listen "$NETNS_HOST_IP:$port"
assert_eq 0 "$CLI_RC" "gpupool up --listen $NETNS_HOST_IP:$port ($CLI_ERR $CLI_OUT)"
deadline=$((SECONDS + WAIT_S))
until cli nodes --json && [ "$(printf '%s' "$CLI_OUT" | json '" ".join(x["state"] for x in (d["nodes"] if isinstance(d, dict) else d))')" = up ]; do
	[ $SECONDS -ge $deadline ] && fail "up's node never came up over HTTPS ($CLI_RC: $CLI_OUT $CLI_ERR)"
	sleep 0.2
done
assert_contains "$(cat "$T/home/.config/gpupool/config")" "https://$NETNS_HOST_IP:$port" "up's config"
cli down --data "$T/pool"
assert_eq 0 "$CLI_RC" "gpupool down ($CLI_ERR)"
echo "ok: its own CA, the hash in its tokens, verified with nothing copied; plain HTTP only with --insecure; up over HTTPS"
