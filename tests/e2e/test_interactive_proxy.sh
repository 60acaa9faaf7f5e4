# The job port proxy (issue 17 B, docs/interactive.md) with curl: a job
# declares a port (submit --expose) and serves HTTP on its own loopback;
# only its owner gets a sign-in link (not another user, not an admin; only
# for a declared port); the link's one-time code, posted by the proxy's
# sign-in page, sets a host-only HttpOnly cookie for that job's port's
# origin alone; with it the job's page comes through the relay; without
# it, with it on another job's port, or with a used code: refused. The
# code never reaches the coordinator's log.
. "$(dirname "$0")/lib.sh"
require netns

PPORT=$(free_port)
start_coordinator --proxy-listen "127.0.0.1:$PPORT"
start_agent alpha 1
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN

# A job serving a page on its own loopback, port 8000.
page='<!doctype html><title>job page</title><p>hello from the job</p>'
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --expose 8000 --name web -- sh -c \
    "mkdir -p site && printf '%s' '$page' >site/index.html && exec python3 -m http.server 8000 --bind 127.0.0.1 --directory site"
job=$JOB
wait_state "$job" running
host="j$job-p8000.localhost"
origin="http://$host:$PPORT"

grant() { # TOKEN PORT
	api "$1" POST "/v1/jobs/$job/proxy" "{\"port\":$2}"
}
grant "$BOB" 8000
assert_eq 404 "$API_STATUS" "another user's grant"
grant "$ADMIN_TOKEN" 8000
assert_eq 404 "$API_STATUS" "an admin's grant (admins cancel, never enter)"
grant "$ALICE" 8001
assert_eq 400 "$API_STATUS" "a port the job does not declare"
grant "$ALICE" 8000
assert_eq 201 "$API_STATUS" "the owner's grant: $API_BODY"
url=$(printf '%s' "$API_BODY" | json 'd["url"]')
case $url in "$origin/_gpupool/login#"*) ;; *) fail "the link: $url" ;; esac
code=${url#*#}
[ ${#code} = 48 ] || fail "the code: $code"

pcurl() { # curl through the proxy, the host resolved to 127.0.0.1
	curl -s --max-time 10 --resolve "$host:$PPORT:127.0.0.1" \
	    --resolve "j$job-p8001.localhost:$PPORT:127.0.0.1" "$@"
}
# Without a cookie: refused.
out=$(pcurl -o /dev/null -w '%{http_code}' "$origin/")
assert_eq 403 "$out" "no cookie"
# The sign-in page and its script come from the proxy itself.
out=$(pcurl "$origin/_gpupool/login")
assert_contains "$out" '/_gpupool/login.js' "the sign-in page"
# Signing in (what its script does): the cookie, host-only and HttpOnly.
pcurl -D "$T/login.head" -c "$T/jar" -o /dev/null --data-binary "$code" \
    "$origin/_gpupool/login"
assert_contains "$(cat "$T/login.head")" "HTTP/1.1 200" "sign-in"
cookie=$(grep -i '^set-cookie:' "$T/login.head" | tr -d '\r')
assert_contains "$cookie" "gpupool_proxy=" "the cookie"
assert_contains "$cookie" "HttpOnly" "the cookie"
assert_not_contains "$cookie" "Domain" "the cookie is host-only"
# The same code again: refused.
out=$(pcurl -o /dev/null -w '%{http_code}' --data-binary "$code" "$origin/_gpupool/login")
assert_eq 403 "$out" "a used code"

# The job's page, through the relay (the server may still be starting).
deadline=$((SECONDS + WAIT_S))
until pcurl -b "$T/jar" "$origin/" >"$T/page" 2>/dev/null && grep -q "hello from the job" "$T/page"; do
	[ $SECONDS -ge $deadline ] && fail "the job's page never came: $(cat "$T/page")"
	sleep 0.2
done
# Many requests on one connection (keep-alive) and several at once.
out=$(pcurl -b "$T/jar" "$origin/" "$origin/index.html" "$origin/" | grep -o "hello from the job" | wc -l)
assert_eq 3 "$out" "three pages in one curl"
pids=()
for i in 1 2 3 4 5 6; do pcurl -b "$T/jar" -o "$T/par$i" "$origin/" & pids+=($!); done
wait "${pids[@]}"
for i in 1 2 3 4 5 6; do assert_contains "$(cat "$T/par$i")" "hello from the job" "parallel page $i"; done
# The cookie on another port's origin (or another job's): refused.
sid=$(grep gpupool_proxy "$T/jar" | awk '{print $NF}')
out=$(pcurl -o /dev/null -w '%{http_code}' -H "Cookie: gpupool_proxy=$sid" "http://j$job-p8001.localhost:$PPORT/")
assert_eq 403 "$out" "the cookie on another origin"
# ...and a cookie shown where its browser would never send it is revoked.
out=$(pcurl -o /dev/null -w '%{http_code}' -b "$T/jar" "$origin/")
assert_eq 403 "$out" "the cookie after it was shown elsewhere"
# The dashboard's address on the proxy port: not a job's.
out=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PPORT/")
assert_eq 404 "$out" "the proxy without a job's host"
# The code and the cookie never reach the coordinator's log.
grep -q "$code" "$COORD_LOG" && fail "the sign-in code is in the coordinator's log"
grep -q "$sid" "$COORD_LOG" && fail "the session cookie is in the coordinator's log"

# The job ends: its port is gone, a new session opens nothing.
grant "$ALICE" 8000
assert_eq 201 "$API_STATUS" "a second grant: $API_BODY"
code=$(printf '%s' "$API_BODY" | json 'd["url"]')
code=${code#*#}
rm -f "$T/jar"
pcurl -c "$T/jar" -o /dev/null --data-binary "$code" "$origin/_gpupool/login"
out=$(pcurl -b "$T/jar" "$origin/")
assert_contains "$out" "hello from the job" "the page with a new session"
GPUPOOL_TOKEN=$ALICE cli cancel "$job"
wait_final "$job"
out=$(pcurl -o /dev/null -w '%{http_code}' -b "$T/jar" "$origin/")
assert_eq 409 "$out" "the proxy after the job ended"
echo ok
