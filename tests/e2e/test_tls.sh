# Proves HTTPS: with a certificate from a private CA (IP SAN 127.0.0.1) the
# coordinator serves only TLS; the CLI trusts it through GPUPOOL_CA and fails
# with a certificate error without it; an agent given --ca registers and runs
# a job; an agent without the CA cannot register.
. "$(dirname "$0")/lib.sh"

pki=$T/pki
mkdir -p "$pki"
(
	cd "$pki" || exit 1
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=gpupool e2e CA' \
	    -keyout ca.key -out ca.crt \
	    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
	openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' -keyout server.key -out server.csr &&
	printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >ext.cnf &&
	openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
	    -days 2 -extfile ext.cnf -out server.crt &&
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=unrelated CA' \
	    -keyout other.key -out other.crt
) >"$T/openssl.out" 2>&1 || { cat "$T/openssl.out"; fail "openssl could not make the test PKI"; }
chmod 600 "$pki/server.key"
CA_CERT=$pki/ca.crt

COORD_SCHEME=https
COORD_TLS_ARGS=(--tls-cert "$pki/server.crt" --tls-key "$pki/server.key")
CURL_TLS=(--cacert "$CA_CERT")
start_coordinator

# plain HTTP is not served on the TLS port
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
    -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:$COORD_PORT/v1/whoami")
[ "$st" != 200 ] || fail "plain HTTP answered 200 on the TLS port"

# CLI with the CA
export GPUPOOL_CA=$CA_CERT
cli whoami
assert_eq 0 "$CLI_RC" "whoami over https with GPUPOOL_CA ($CLI_ERR)"
# CLI without the CA: a certificate error
(
	unset GPUPOOL_CA
	cli whoami
	echo "$CLI_RC" >"$T/noca.rc"
	printf '%s' "$CLI_ERR" >"$T/noca.err"
)
[ "$(cat "$T/noca.rc")" != 0 ] || fail "whoami without the CA exited 0"
grep -qiE 'certificate|verify|tls|ssl|trust' "$T/noca.err" ||
    fail "whoami without the CA: no certificate error: $(cat "$T/noca.err")"
# CLI trusting another CA
GPUPOOL_CA=$pki/other.crt cli whoami
[ "$CLI_RC" != 0 ] || fail "whoami trusting an unrelated CA exited 0"
grep -qiE 'certificate|verify|tls|ssl|trust' <<<"$CLI_ERR" ||
    fail "whoami trusting an unrelated CA: no certificate error: $CLI_ERR"

# agent with --ca
start_agent alpha 1
wait_node_up alpha
submit -- sh -c 'echo over-tls; exit 5'
cli wait "$JOB"
assert_eq 5 "$CLI_RC" "wait over https"
cli logs "$JOB"
assert_eq over-tls "$CLI_OUT" "logs over https"
cli logs -f "$JOB"
assert_eq over-tls "$CLI_OUT" "logs -f over https"

# agent without the CA never registers
mk_token provider prov-beta
(umask 077 && printf '%s\n' "$TOKEN" >"$T/beta.token")
spawn "$T/agent-beta.log" "$GP" agent --coordinator "$(coord_url)" \
    --token-file "$T/beta.token" --name beta --work "$T/agents/beta" \
    --fake-gpus 1 --run-as nobody -v
beta=$SPAWNED_PID
for i in $(seq 1 30); do
	assert_eq missing "$(node_state beta)" "node of an agent that does not trust the server"
	alive "$beta" || break
	sleep 0.1
done
echo ok
