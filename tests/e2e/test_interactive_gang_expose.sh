# A gang's ports on the proxy, per part (issue 17, docs/interactive.md):
# a gang of two parts on two agents declares port 7901 on part 0
# (`--expose 7901`) and on part 1 (`--expose 1:7901`); each part serves
# its own rank there. The view and `show` list both; the proxy's origin
# for part 1 is "j<JOB>-part1-p7901.DOMAIN" and brings part 1's page,
# part 0's keeps its old name and brings part 0's; a cookie of one part's
# origin opens nothing on the other's; a grant for a port a part does
# not declare, a part the gang does not have, and a part on a job that
# is not a gang are refused. In Chromium (Playwright, as
# test_interactive_web): the dashboard's job page shows an Open button
# per part's port, and each opens its own part's page.
. "$(dirname "$0")/lib.sh"
require netns python3

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || fail "node is missing (Node.js 20 or newer)"
[ -x /usr/bin/chromium ] || fail "chromium is missing (scripts/install-deps.sh)"
if [ ! -f "$ROOT/tests/web/node_modules/playwright-core/package.json" ] ||
    [ "$ROOT/tests/web/package-lock.json" -nt "$ROOT/tests/web/node_modules/.package-lock.json" ]; then
	(cd "$ROOT/tests/web" && npm ci --no-audit --no-fund >"$T/npm.log" 2>&1) ||
	    fail "npm ci in tests/web failed: $(tail -5 "$T/npm.log")"
fi

PPORT=$(free_port)
start_coordinator --proxy-listen "127.0.0.1:$PPORT"
start_agent alpha 1
start_agent beta 1
wait_node_up alpha
wait_node_up beta
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

# shellcheck disable=SC2016 # the job's shell expands $RANK
submit --nodes 2 --gpus 1 --expose 7901 --expose 1:7901 -- sh -c \
    'mkdir -p site && echo "page-of-rank-$RANK" >site/index.html && exec python3 -m http.server 7901 --bind 127.0.0.1 --directory site'
j=$JOB
wait_state "$j" running

assert_eq '[7901, "1:7901"]' "$(job_get "$j" 'd["expose"]')" "the view's ports"
urls=$(job_get "$j" 'd["proxy_urls"]')
assert_contains "$urls" "http://j$j-p7901.localhost:$PPORT/" "part 0's origin"
assert_contains "$urls" "http://j$j-part1-p7901.localhost:$PPORT/" "part 1's origin"
cli show "$j"
assert_contains "$CLI_OUT" "7901,1:7901" "show lists both ports"

grant() { # BODY
	api "$TOKEN" POST "/v1/jobs/$j/proxy" "$1"
}
# signin HOST BODY: a cookie jar for HOST, through a grant for BODY.
signin() {
	grant "$2"
	assert_eq 201 "$API_STATUS" "the grant $2: $API_BODY"
	local url code
	url=$(printf '%s' "$API_BODY" | json 'd["url"]')
	case $url in "http://$1:$PPORT/_gpupool/login#"*) ;; *) fail "the link for $2: $url" ;; esac
	code=${url#*#}
	curl -s --max-time 10 --resolve "$1:$PPORT:127.0.0.1" -c "$T/jar-$1" \
	    -o /dev/null --data-binary "$code" "http://$1:$PPORT/_gpupool/login"
}
# page HOST WANT: the page through the proxy (the server may be starting).
page() {
	local deadline=$((SECONDS + WAIT_S))
	until curl -s --max-time 10 --resolve "$1:$PPORT:127.0.0.1" -b "$T/jar-$1" \
	    "http://$1:$PPORT/" >"$T/page" 2>/dev/null && grep -q "$2" "$T/page"; do
		[ $SECONDS -ge $deadline ] && fail "$1 never served $2: $(cat "$T/page")"
		sleep 0.2
	done
}
h0="j$j-p7901.localhost"
h1="j$j-part1-p7901.localhost"
signin "$h1" '{"port":7901,"part":1}'
page "$h1" page-of-rank-1
signin "$h0" '{"port":7901}'
page "$h0" page-of-rank-0
grep -q "proxy sign-in job=$j part=1 port=7901" "$COORD_LOG" ||
    fail "no sign-in for part 1 in the log"

# One part's cookie on the other part's origin: refused.
sid1=$(grep gpupool_proxy "$T/jar-$h1" | awk '{print $NF}')
out=$(curl -s --max-time 10 --resolve "$h0:$PPORT:127.0.0.1" -o /dev/null \
    -w '%{http_code}' -H "Cookie: gpupool_proxy=$sid1" "http://$h0:$PPORT/")
assert_eq 403 "$out" "part 1's cookie on part 0's origin"

# The dashboard's buttons, in a browser.
# In a network namespace of its own: the host's interfaces, which other
# tests change, do not abort its navigations (browser_netns).
browser_netns "$COORD_PORT" "$PPORT"
GP_URL=$(coord_url) GP_TOKEN=$TOKEN GP_JOB=$j \
    ${BROWSER_NS[@]+"${BROWSER_NS[@]}"} node "$ROOT/tests/web/gang_expose.test.mjs" >"$T/browser.log" 2>&1
rc=$?
cat "$T/browser.log" >&2
[ $rc = 0 ] || fail "the browser test failed (see above)"
grep -q '^all checks passed$' "$T/browser.log" || fail "the browser test did not finish"

# What is not declared, or not there.
grant '{"port":7902,"part":1}'
assert_eq 400 "$API_STATUS" "a port part 1 does not declare"
assert_contains "$API_BODY" "on part 1" "the refusal names the part"
grant '{"port":7901,"part":2}'
assert_eq 400 "$API_STATUS" "part 2 of a gang of 2"
grant '{"port":7901,"part":-1}'
assert_eq 400 "$API_STATUS" "part -1"
cli submit --nodes 2 --gpus 1 --expose 2:80 -- true
[ "$CLI_RC" != 0 ] || fail "--expose 2:80 on a gang of 2 was taken"
assert_contains "$CLI_ERR" "names part 2" "--expose 2:80's refusal"
cli submit --gpus 0 --expose 1:80 -- true
[ "$CLI_RC" != 0 ] || fail "--expose 1:80 on a job that is not a gang was taken"
cli submit --gpus 0 --expose 1:7901:2 -- true
assert_eq 2 "$CLI_RC" "a bad --expose ($CLI_ERR)"

cli cancel "$j"
wait_final "$j"
echo "ok $TEST_NAME"
