# The job port proxy over TLS (issue 17: "TLS when the coordinator has
# it, on both legs"). A coordinator with TLS serves the proxy in HTTPS
# too, with a certificate for the job hosts' wildcard: its sign-in link
# is https://, its cookie Secure (and HttpOnly, host-only); curl, given
# only the pool's CA, signs in and gets the job's page and 8 MiB compared
# by SHA-256; a WebSocket client (Debian's python3-tornado, wss://) echoes
# 20 messages and 1 MiB through it; Chromium (Playwright, the CA in its
# NSS database) signs in from the link, gets the page, a Secure cookie and
# a wss:// echo (tests/web/proxy_tls.test.mjs); a client that does not trust the CA
# gets nothing; plain HTTP to the proxy is redirected to https:// and
# never proxied, cookie or not, and a sign-in there sets no cookie;
# `show` and `gpupool jupyter` print the https:// origins. A
# coordinator whose certificate does not name the job hosts refuses to
# start (with why); one that made its own CA (listening beyond loopback)
# signs the proxy's certificate with it.
. "$(dirname "$0")/lib.sh"
require netns openssl

/usr/bin/python3 -c 'import tornado.websocket' 2>/dev/null ||
	fail "Debian's python3-tornado is missing (python3-notebook brings it)"
/usr/bin/python3 -c 'import notebook' 2>/dev/null ||
	fail "Debian's python3-notebook is missing (scripts/install-deps.sh)"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || fail "node is missing (Node.js 20 or newer)"
[ -x /usr/bin/chromium ] || fail "chromium is missing (scripts/install-deps.sh)"
command -v certutil >/dev/null || fail "certutil is missing (libnss3-tools: scripts/install-deps.sh)"
if [ ! -f "$ROOT/tests/web/node_modules/playwright-core/package.json" ] ||
    [ "$ROOT/tests/web/package-lock.json" -nt "$ROOT/tests/web/node_modules/.package-lock.json" ]; then
	(cd "$ROOT/tests/web" && npm ci --no-audit --no-fund >"$T/npm.log" 2>&1) ||
	    fail "npm ci in tests/web failed: $(tail -5 "$T/npm.log")"
fi
DOMAIN=jobs.localhost
pki="$T/pki"
mkdir -p "$pki"
(
	cd "$pki" &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	    -subj '/CN=gpupool e2e CA' -keyout ca.key -out ca.crt &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	    -subj '/CN=127.0.0.1' -keyout server.key -out server.csr &&
	printf 'subjectAltName=IP:127.0.0.1,DNS:*.%s\n' "$DOMAIN" >san.ext &&
	openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
	    -days 2 -extfile san.ext -out server.crt &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	    -subj '/CN=127.0.0.1' -keyout api.key -out api.csr &&
	printf 'subjectAltName=IP:127.0.0.1\n' >api.ext &&
	openssl x509 -req -in api.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
	    -days 2 -extfile api.ext -out api.crt &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	    -subj '/CN=unrelated CA' -keyout other.key -out other.crt
) >"$T/openssl.out" 2>&1 || { cat "$T/openssl.out"; fail "openssl could not make the test PKI"; }
CA_CERT=$pki/ca.crt
COORD_SCHEME=https
CURL_TLS=(--cacert "$CA_CERT")
export GPUPOOL_CA=$CA_CERT

# A certificate that does not name *.DOMAIN: the coordinator says so and
# stops (it never serves the proxy in clear instead).
refused() { # WHAT NEEDLE ARGS...
	local what=$1 needle=$2
	shift 2
	timeout 60 "$GP" coordinator --listen 127.0.0.1:"$(free_port)" --data "$T/refused" \
	    --proxy-listen 127.0.0.1:"$(free_port)" "$@" >"$T/refused.log" 2>&1 &&
	    fail "$what: the coordinator started"
	assert_contains "$(cat "$T/refused.log")" "$needle" "$what"
}
refused "the API's certificate for another name" "does not name the job hosts *.$DOMAIN" \
    --proxy-domain "$DOMAIN" --tls-cert "$pki/api.crt" --tls-key "$pki/api.key"
refused "a one-label domain" "two labels or more" \
    --proxy-domain localhost --tls-cert "$pki/server.crt" --tls-key "$pki/server.key"

# The pool: the API's certificate for 127.0.0.1, the proxy's for
# *.DOMAIN (--proxy-tls-cert).
PPORT=$(free_port)
COORD_TLS_ARGS=(--tls-cert "$pki/api.crt" --tls-key "$pki/api.key")
start_coordinator --proxy-listen "127.0.0.1:$PPORT" --proxy-domain "$DOMAIN" \
    --proxy-tls-cert "$pki/server.crt" --proxy-tls-key "$pki/server.key"
assert_contains "$(cat "$COORD_LOG")" "job port proxy listening addr=127.0.0.1:$PPORT domain=$DOMAIN tls=yes" \
    "the coordinator's log"
start_agent alpha 1
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN

# A job serving a page, 8 MiB and a WebSocket echo on its loopback.
read -r -d '' SERVER <<'EOF'
import hashlib, tornado.ioloop, tornado.web, tornado.websocket
BIG = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(1 << 18))
class Page(tornado.web.RequestHandler):
    def get(self):
        self.write("hello over the proxy")
class Big(tornado.web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "application/octet-stream")
        self.write(BIG)
class Echo(tornado.websocket.WebSocketHandler):
    def on_message(self, m):
        self.write_message(m, binary=isinstance(m, bytes))
tornado.web.Application([("/", Page), ("/big", Big), ("/ws", Echo)]).listen(8000, address="127.0.0.1")
open("ready", "w").close()
tornado.ioloop.IOLoop.current().start()
EOF
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --expose 8000 --name web --env "SERVER=$SERVER" -- \
    /usr/bin/python3 -c 'import os; exec(os.environ["SERVER"])'
job=$JOB
wait_state "$job" running
host="j$job-p8000.$DOMAIN"
origin="https://$host:$PPORT"
dir="$T/agents/alpha/jobs/$job-1"
deadline=$((SECONDS + WAIT_S))
until [ -e "$dir/ready" ]; do
	[ $SECONDS -ge $deadline ] && fail "the job's server never started: $(job_log "$job"; printf '%s' "$LOG" | tail -5)"
	sleep 0.1
done

pcurl() { # curl to the proxy, trusting the pool's CA only
	curl -sS --max-time 30 --cacert "$CA_CERT" --resolve "$host:$PPORT:127.0.0.1" "$@"
}
grant() {
	api "$ALICE" POST "/v1/jobs/$job/proxy" '{"port":8000}'
	assert_eq 201 "$API_STATUS" "the owner's grant: $API_BODY"
	url=$(printf '%s' "$API_BODY" | json 'd["url"]')
	code=${url#*#}
}
grant
case $url in "$origin/_gpupool/login#"*) ;; *) fail "the link is not the job port's https origin: $url" ;; esac

# Signing in over TLS: a Secure, HttpOnly, host-only cookie.
pcurl -D "$T/login.head" -c "$T/jar" -o /dev/null --data-binary "$code" "$origin/_gpupool/login" ||
	fail "sign-in over TLS (curl $?)"
cookie=$(grep -i '^set-cookie:' "$T/login.head" | tr -d '\r')
assert_contains "$cookie" "gpupool_proxy=" "the cookie"
assert_contains "$cookie" "Secure" "the cookie over TLS"
assert_contains "$cookie" "HttpOnly" "the cookie"
assert_not_contains "$cookie" "Domain" "the cookie is host-only"
# HSTS on the proxy's own answers over TLS (the sign-in page, curl -I).
assert_contains "$(tr -d '\r' <"$T/login.head")" "Strict-Transport-Security: max-age=31536000" "HSTS on the sign-in over TLS"
pcurl -I "$origin/_gpupool/login" >"$T/login-get.head" || fail "curl -I the sign-in page (curl $?)"
assert_contains "$(tr -d '\r' <"$T/login-get.head")" "Strict-Transport-Security: max-age=" "HSTS on curl -I"
sid=$(grep gpupool_proxy "$T/jar" | awk '{print $NF}')
[ ${#sid} = 48 ] || fail "no session in the jar: $(cat "$T/jar")"

out=$(pcurl -b "$T/jar" "$origin/") || fail "the job's page over TLS (curl $?)"
assert_eq "hello over the proxy" "$out" "the job's page over TLS"
pcurl -b "$T/jar" -o "$T/big" "$origin/big" || fail "8 MiB over TLS (curl $?)"
want=$(/usr/bin/python3 -c 'import hashlib
h = hashlib.sha256()
for i in range(1 << 18): h.update(hashlib.sha256(str(i).encode()).digest())
print(h.hexdigest())')
assert_eq "$want" "$(sha256sum <"$T/big" | cut -d' ' -f1)" "8 MiB through the TLS proxy"

# A client that does not trust the pool's CA: no page.
if curl -sS --max-time 30 --cacert "$pki/other.crt" --resolve "$host:$PPORT:127.0.0.1" \
    -b "$T/jar" -o /dev/null "$origin/" 2>"$T/other.err"; then
	fail "a client with another CA got the page"
fi

# Plain HTTP on the proxy's port: a redirect, never the page; a sign-in
# there sets no cookie.
curl -sS --max-time 30 --resolve "$host:$PPORT:127.0.0.1" -D "$T/plain.head" -o "$T/plain.body" \
    -H "Cookie: gpupool_proxy=$sid" "http://$host:$PPORT/" || fail "plain HTTP: no answer"
assert_contains "$(head -1 "$T/plain.head")" "301" "plain HTTP to the proxy"
assert_contains "$(tr -d '\r' <"$T/plain.head")" "Location: https://$host:$PPORT/" "plain HTTP's redirect"
assert_not_contains "$(cat "$T/plain.body")" "hello over the proxy" "plain HTTP's answer"
assert_not_contains "$(cat "$T/plain.head")" "Strict-Transport-Security" "HSTS over plain HTTP"
grant
curl -sS --max-time 30 --resolve "$host:$PPORT:127.0.0.1" -D "$T/plain.head" -o /dev/null \
    --data-binary "$code" "http://$host:$PPORT/_gpupool/login" || fail "plain sign-in: no answer"
assert_not_contains "$(cat "$T/plain.head")" "gpupool_proxy" "a sign-in over plain HTTP"

# A WebSocket through the TLS proxy (wss://, the pool's CA only).
cat >"$T/ws.py" <<'EOF'
import asyncio, os, ssl, sys
from tornado import httpclient, netutil, websocket
host, port, ca, sid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
netutil.Resolver.configure("tornado.netutil.OverrideResolver",
    resolver=netutil.DefaultExecutorResolver(), mapping={(host, port): ("127.0.0.1", port)})
async def main():
    ctx = ssl.create_default_context(cafile=ca)
    req = httpclient.HTTPRequest(f"wss://{host}:{port}/ws", ssl_options=ctx,
        headers={"Cookie": "gpupool_proxy=" + sid}, connect_timeout=30, request_timeout=30)
    ws = await websocket.websocket_connect(req)
    for i in range(20):
        await ws.write_message(f"hello-{i}")
        got = await asyncio.wait_for(ws.read_message(), 30)
        assert got == f"hello-{i}", got
    big = os.urandom(1 << 20)
    await ws.write_message(big, binary=True)
    got = await asyncio.wait_for(ws.read_message(), 30)
    assert got == big, "the 1 MiB message came back different"
    ws.close()
    print("websocket ok")
asyncio.run(main())
EOF
out=$(timeout 120 /usr/bin/python3 "$T/ws.py" "$host" "$PPORT" "$CA_CERT" "$sid" 2>&1)
assert_eq "websocket ok" "$(printf '%s' "$out" | tail -1)" "a WebSocket through the TLS proxy: $out"
# ...and with a CA it does not trust: no WebSocket.
out=$(timeout 120 /usr/bin/python3 "$T/ws.py" "$host" "$PPORT" "$pki/other.crt" "$sid" 2>&1) &&
	fail "a WebSocket with another CA: $out"
assert_contains "$out" "CERTIFICATE_VERIFY_FAILED" "a WebSocket with another CA"
grep -q "$sid" "$COORD_LOG" && fail "the session cookie is in the coordinator's log"

# Chromium (Playwright) through the TLS proxy: the pool's CA trusted in
# $HOME's NSS database, as a user would add it; the sign-in link, the
# page, a Secure cookie and a wss:// WebSocket.
certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password 2>/dev/null ||
	{ mkdir -p "$HOME/.pki/nssdb" && certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password; } ||
	fail "certutil cannot make an NSS database"
certutil -d "sql:$HOME/.pki/nssdb" -A -t "C,," -n gpupool-e2e-ca -i "$CA_CERT" ||
	fail "certutil cannot add the pool's CA"
grant
# In a network namespace of its own: the host's interfaces, which other
# tests change, do not abort its navigations (browser_netns).
browser_netns "$PPORT"
GP_LINK=$url GP_PAGE="hello over the proxy" \
    ${BROWSER_NS[@]+"${BROWSER_NS[@]}"} node "$ROOT/tests/web/proxy_tls.test.mjs" >"$T/browser.log" 2>&1
rc=$?
cat "$T/browser.log" >&2
[ $rc = 0 ] || fail "the browser over the TLS proxy failed (see above)"
grep -q '^all checks passed$' "$T/browser.log" || fail "the browser test did not finish"

# The links shown: `show` and `gpupool jupyter` name the https origins.
out=$(GPUPOOL_TOKEN=$ALICE "$GP" show "$job")
assert_contains "$out" "proxy: https://$host:$PPORT/" "show"
GPUPOOL_TOKEN=$ALICE spawn "$T/jupyter.out" "$GP" jupyter --gpus 0 --time 30m
jup_pid=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q '^In a browser elsewhere' "$T/jupyter.out"; do
	alive "$jup_pid" || fail "gpupool jupyter exited: $(cat "$T/jupyter.out")"
	[ $SECONDS -ge $deadline ] && fail "gpupool jupyter printed no proxy link: $(cat "$T/jupyter.out")"
	sleep 0.2
done
jjob=$(sed -nE 's/^Jupyter in job ([0-9]+):.*/\1/p' "$T/jupyter.out")
assert_contains "$(cat "$T/jupyter.out")" "In a browser elsewhere: https://j$jjob-p8888.$DOMAIN:$PPORT/ " \
    "gpupool jupyter's proxy link"
kill -INT "$jup_pid"
wait_exit "$jup_pid" || fail "gpupool jupyter did not exit on SIGINT"
grep -q "$code" "$COORD_LOG" && fail "a sign-in code is in the coordinator's log"

# A coordinator with its own CA (beyond loopback) signs the proxy's
# certificate: a client given DATA/tls/ca.crt verifies the job hosts.
save_pool first
netns_create far
far_data="$T/far"
far_port=$(free_port)
far_pport=$(free_port)
spawn "$T/far.log" "$GP" coordinator --listen "$NETNS_HOST_IP:$far_port" --data "$far_data" \
    --proxy-listen "127.0.0.1:$far_pport" --proxy-domain "$DOMAIN" -v
deadline=$((SECONDS + WAIT_S))
until grep -q "job port proxy listening" "$T/far.log"; do
	alive "$SPAWNED_PID" || fail "the coordinator with its own CA exited: $(tail -n 5 "$T/far.log")"
	[ $SECONDS -ge $deadline ] && fail "its proxy never listened: $(tail -n 5 "$T/far.log")"
	sleep 0.1
done
assert_contains "$(cat "$T/far.log")" "made the job port proxy's certificate name=*.$DOMAIN" "its log"
out=$(curl -sS --max-time 30 --cacert "$far_data/tls/ca.crt" --resolve "j1-p1.$DOMAIN:$far_pport:127.0.0.1" \
    -o /dev/null -w '%{http_code}' "https://j1-p1.$DOMAIN:$far_pport/") ||
	fail "the proxy's certificate does not verify with the coordinator's own CA"
assert_eq 403 "$out" "a job host over TLS, no cookie"
echo ok
