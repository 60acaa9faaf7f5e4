# The job port proxy and `gpupool jupyter` in a real browser (issue 17 B):
# Debian's Chromium driven by Playwright (tests/web/interactive.test.mjs,
# playwright-core from tests/web/package-lock.json). `gpupool jupyter`
# starts Debian's Jupyter (python3-notebook) in an interactive job, with
# its own token, and forwards it here (its local URL answers); from the
# dashboard's job page, "Open port 8888" loads Jupyter through the
# coordinator's proxy at the job port's own origin, and a kernel runs code
# over the proxied WebSocket; a page another job serves tries to read the
# dashboard's token and to call the API as the user, and fails.
. "$(dirname "$0")/lib.sh"
require netns

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || fail "node is missing (Node.js 20 or newer)"
[ -x /usr/bin/chromium ] || fail "chromium is missing (scripts/install-deps.sh)"
/usr/bin/python3 -c 'import notebook' 2>/dev/null ||
	fail "Debian's python3-notebook is missing (scripts/install-deps.sh)"
if [ ! -f "$ROOT/tests/web/node_modules/playwright-core/package.json" ] ||
    [ "$ROOT/tests/web/package-lock.json" -nt "$ROOT/tests/web/node_modules/.package-lock.json" ]; then
	(cd "$ROOT/tests/web" && npm ci --no-audit --no-fund >"$T/npm.log" 2>&1) ||
	    fail "npm ci in tests/web failed: $(tail -5 "$T/npm.log")"
fi

PPORT=$(free_port)
start_coordinator --proxy-listen "127.0.0.1:$PPORT"
start_agent alpha 1
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN

# gpupool jupyter: the job, its token, the local URL.
GPUPOOL_TOKEN=$ALICE spawn "$T/jupyter.out" "$GP" jupyter --gpus 0 --time 30m
JUP_PID=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q '^Jupyter in job' "$T/jupyter.out"; do
	alive "$JUP_PID" || fail "gpupool jupyter exited: $(cat "$T/jupyter.out")"
	[ $SECONDS -ge $deadline ] && fail "gpupool jupyter printed no URL: $(cat "$T/jupyter.out")"
	sleep 0.2
done
line=$(grep '^Jupyter in job' "$T/jupyter.out")
jupyter_job=$(printf '%s' "$line" | sed -nE 's/^Jupyter in job ([0-9]+):.*/\1/p')
local_url=$(printf '%s' "$line" | sed -nE 's/.* (http:[^ ]+)$/\1/p')
jup_token=${local_url##*token=}
is_uint "$jupyter_job" || fail "no job id in: $line"
[ ${#jup_token} = 48 ] || fail "no token of its own in: $line"
assert_eq "[true, [8888]]" "$(job_get "$jupyter_job" 'd.get("interactive"), d.get("expose")')" "the jupyter job"
# The local URL answers (port-forward through the relay), once it started.
deadline=$((SECONDS + 90))
until curl -s --max-time 5 "${local_url%%/?token=*}/api/status?token=$jup_token" | grep -q '"started"'; do
	[ $SECONDS -ge $deadline ] && fail "Jupyter never answered at $local_url: $(job_log "$jupyter_job"; printf '%s' "$LOG" | tail -5)"
	sleep 0.5
done

# A job serving a page that tries to act as the dashboard's user.
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --expose 8000 --name site \
    --env "EVIL_HTML=$(cat "$ROOT/tests/web/site/evil.html")" -- sh -c \
    'mkdir -p site && printf "%s" "$EVIL_HTML" >site/evil.html && exec /usr/bin/python3 -m http.server 8000 --bind 127.0.0.1 --directory site'
evil_job=$JOB
wait_state "$evil_job" running

# In a network namespace of its own: the host's interfaces, which other
# tests change, do not abort its navigations (browser_netns).
browser_netns "$COORD_PORT" "$PPORT"
GP_URL=$(coord_url) GP_ALICE=$ALICE GP_JUPYTER=$jupyter_job GP_JUP_TOKEN=$jup_token \
    GP_EVIL=$evil_job SHOTS="$T/shots" \
    ${BROWSER_NS[@]+"${BROWSER_NS[@]}"} node "$ROOT/tests/web/interactive.test.mjs" >"$T/browser.log" 2>&1
rc=$?
cat "$T/browser.log" >&2
[ $rc = 0 ] || fail "the browser test failed (see above)"
grep -q '^all checks passed$' "$T/browser.log" || fail "the browser test did not finish"
[ -e /tmp/pwned ] && fail "the job's page made a job as the user"

# Ctrl-C ends gpupool jupyter, and its job.
kill -INT "$JUP_PID"
wait_exit "$JUP_PID" || fail "gpupool jupyter did not exit on SIGINT"
wait_final "$jupyter_job"
assert_eq cancelled "$FINAL_STATE" "the jupyter job after Ctrl-C"
echo ok
