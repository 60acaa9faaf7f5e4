# Proves the web dashboard (issue 7) in a real browser: Debian's Chromium
# driven by Playwright (tests/web/dashboard.test.mjs, playwright-core from
# tests/web/package-lock.json) signs in with a token, sees the pool with
# who uses each GPU, submits a job from the page (the API) and follows its
# log live to its end on the job page (timeline, GPU use), is refused
# another user's job, shows the queue with why each job waits (the job's
# state today; the scheduler's reason, why and expected start when the
# answer carries "wait", injected into the real answer), a
# provider's page with what it lent and earned from the ledger (an admin
# sees any, a provider only its own, a user only what they paid), and
# works on a phone's width; the page loads nothing
# from elsewhere, keeps its token in sessionStorage only, shows markup from
# a job as text, and is served with a strict Content-Security-Policy.
# Screenshots: $T/shots, and also WEB_SHOTS_DIR when set (the ones in
# docs/images come from `WEB_SHOTS_DIR=$PWD/docs/images tests/run.sh web`).
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || fail "node is missing (Node.js 20 or newer)"
[ -x /usr/bin/chromium ] || fail "chromium is missing (scripts/install-deps.sh)"
# playwright-core from the lockfile, once (npm ci; tests/web/node_modules).
if [ ! -f "$ROOT/tests/web/node_modules/playwright-core/package.json" ] ||
    [ "$ROOT/tests/web/package-lock.json" -nt "$ROOT/tests/web/node_modules/.package-lock.json" ]; then
	(cd "$ROOT/tests/web" && npm ci --no-audit --no-fund >"$T/npm.log" 2>&1) ||
	    fail "npm ci in tests/web failed: $(tail -5 "$T/npm.log")"
fi

# accruals every second: the providers' pages have postings while jobs run
start_coordinator --accrual-interval 1s
start_agent alpha 2:A100:40960
start_agent beta 1:T4:16384
wait_node_up alpha
wait_node_up beta
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
# Two long jobs keep two of the three GPUs busy.
submit --gpus 1 --name warmup -- sleep 600
wait_state "$JOB" running
GPUPOOL_TOKEN=$BOB submit --gpus 1 --name bobs -- sleep 600
BOB_JOB=$JOB
wait_state "$BOB_JOB" running
BOB_NODE=$(job_get "$BOB_JOB" 'd["node"]')

# In a network namespace of its own: the host's interfaces, which other
# tests change, do not abort its navigations (browser_netns).
browser_netns "$COORD_PORT"
GP_URL=$(coord_url) GP_ALICE=$ALICE GP_BOB=$BOB GP_BOB_JOB=$BOB_JOB \
    GP_ADMIN=$ADMIN_TOKEN SHOTS="$T/shots" GP_BOB_NODE=$BOB_NODE \
    GP_PROVIDER=$(tr -d '\n' <"$T/$BOB_NODE.token") GP_PROVIDER_NAME=prov-$BOB_NODE \
    ${BROWSER_NS[@]+"${BROWSER_NS[@]}"} node "$ROOT/tests/web/dashboard.test.mjs" >"$T/browser.log" 2>&1
rc=$?
cat "$T/browser.log" >&2
[ $rc = 0 ] || fail "the browser test failed (see above)"
grep -q '^all checks passed$' "$T/browser.log" || fail "the browser test did not finish"
for s in pool job-running job node queue provider phone-pool phone-job; do
	[ -s "$T/shots/dashboard-$s.png" ] || fail "no screenshot dashboard-$s.png"
done
if [ -n "${WEB_SHOTS_DIR:-}" ]; then
	mkdir -p "$WEB_SHOTS_DIR" && cp "$T"/shots/*.png "$WEB_SHOTS_DIR/"
fi
echo "ok"
