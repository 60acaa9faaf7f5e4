#!/usr/bin/env bash
# test_web_leader_pg: the dashboard follows the leader (web/app.js) in a
# real browser (tests/web/leader.test.mjs: playwright-core driving
# Debian's Chromium): two coordinators over one PostgreSQL (the pool's
# state in it, one data directory), one agent given both. Opened at the
# standby, the page goes to the leader; the leader is killed (-9): the
# page goes to the other coordinator, which now leads, and a job submitted
# from it runs there; a tab opened by a link with a crafted ?peers= (a
# listener the browser test runs) goes there too, never to the listener.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || fail "node is missing (Node.js 20 or newer)"
[ -x /usr/bin/chromium ] || fail "chromium is missing (scripts/install-deps.sh)"
# playwright-core from the lockfile, once (npm ci; tests/web/node_modules).
if [ ! -f "$ROOT/tests/web/node_modules/playwright-core/package.json" ] ||
    [ "$ROOT/tests/web/package-lock.json" -nt "$ROOT/tests/web/node_modules/.package-lock.json" ]; then
	(cd "$ROOT/tests/web" && npm ci --no-audit --no-fund >"$T/npm.log" 2>&1) ||
	    fail "npm ci in tests/web failed: $(tail -5 "$T/npm.log")"
fi
pg_start

DATA="$T/coord"
declare -A PORT=() PID=()
PORT[a]=$(free_port)
PORT[b]=$(free_port)
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }
# (no --advertise-url: each advertises http://127.0.0.1:PORT, from --listen)
start_coord() {
	mkdir -p "$DATA"
	spawn "$T/coord-$1.log" "$GP" coordinator \
	    --listen "127.0.0.1:${PORT[$1]}" --data "$DATA" \
	    --lease-ms 4000 --heartbeat-ms 300 --db "$(pg_url)" \
	    --leader-lease-ms 2000 -v
	PID[$1]=$SPAWNED_PID
}

start_coord a
COORD_DATA=$DATA COORD_PID=${PID[a]} COORD_PORT=${PORT[a]}
wait_ready
start_coord b
deadline=$((SECONDS + WAIT_S))
COORD_PORT=${PORT[b]}
until api - GET /v1/whoami && [ "$API_STATUS" = 503 ] &&
    grep -qi "^X-Gpupool-Leader: $(url_of a)" "$API_HEADERS"; do
	alive "${PID[b]}" || fail "the standby b exited"
	[ $SECONDS -ge $deadline ] && fail "b does not stand by naming a (HTTP $API_STATUS)"
	sleep 0.1
done
COORD_PORT=${PORT[a]}
mk_token provider prov-n1
(umask 077 && printf '%s\n' "$TOKEN" >"$T/n1.token")
spawn "$T/agent-n1.log" "$GP" agent --coordinator "$(url_of a)" \
    --coordinator "$(url_of b)" --token-file "$T/n1.token" --name n1 \
    --work "$T/agents/n1" --fake-gpus 1 --run-as nobody -v
AGENT_PID[n1]=$SPAWNED_PID
wait_node_up n1

GP_A=$(url_of a) GP_B=$(url_of b) GP_ADMIN=$ADMIN_TOKEN \
    GP_KILL_PID=${PID[a]} SHOTS="$T/shots" \
    node "$ROOT/tests/web/leader.test.mjs" >"$T/browser.log" 2>&1
rc=$?
cat "$T/browser.log" >&2
[ $rc = 0 ] || fail "the browser test failed (see above)"
grep -q '^all checks passed$' "$T/browser.log" || fail "the browser test did not finish"
echo "ok"
