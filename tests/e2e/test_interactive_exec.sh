# Interactive streams, the basics (docs/interactive.md): `gpupool exec`
# into a running job of one's own runs in the job (its network namespace,
# its user, its environment), passes stdin, stdout, stderr and the exit
# code; another user, and an admin, are refused; the stream's metrics
# count; ps/show list the session while it is open.
. "$(dirname "$0")/lib.sh"
require netns

start_coordinator
start_agent alpha 1
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN

GPUPOOL_TOKEN=$ALICE submit --gpus 1 -e MARK=job-env -- sh -c "$(gated_job_cmd)"
j=$JOB
wait_state "$j" running

# stdout, stderr, exit code, environment, user, working directory
GPUPOOL_TOKEN=$ALICE cli exec "$j" -- sh -c 'echo out:$MARK; id -un; echo err >&2; ls go 2>/dev/null || echo no-go-yet; exit 7'
assert_eq 7 "$CLI_RC" "exec's exit code ($CLI_ERR)"
assert_contains "$CLI_OUT" "out:job-env" "the job's environment"
assert_contains "$CLI_OUT" "nobody" "the job's user"
assert_contains "$CLI_OUT" "no-go-yet" "the job's working directory"
assert_eq err "$CLI_ERR" "stderr apart"

# stdin passes through, and its end
out=$(printf 'line1\nline2\n' | GPUPOOL_TOKEN=$ALICE "$GP" exec "$j" -- sh -c 'wc -l')
assert_eq 2 "$(echo $out)" "stdin lines counted in the job"

# the job's own network namespace: its loopback, not the host's
host_port=$(free_port)
$PY -m http.server --bind 127.0.0.1 "$host_port" >/dev/null 2>&1 &
HTTPD=$!
STARTED_PIDS+=("$HTTPD")
GPUPOOL_TOKEN=$ALICE cli exec "$j" -- bash -c "exec 3<>/dev/tcp/127.0.0.1/$host_port && echo reached || echo isolated"
assert_contains "$CLI_OUT" "isolated" "the host's loopback is not the job's"

# a signal reaches the command: exit 128+15
GPUPOOL_TOKEN=$ALICE "$GP" exec "$j" -- sh -c 'echo started; exec sleep 60' >"$T/sig.out" 2>&1 &
EXPID=$!
deadline=$((SECONDS + WAIT_S))
until grep -q started "$T/sig.out"; do
	[ $SECONDS -ge $deadline ] && fail "exec never started: $(cat "$T/sig.out")"
	sleep 0.1
done
# while it runs: show counts the session, /metrics the stream
assert_eq 1 "$(job_get "$j" 'd.get("sessions", 0)')" "sessions in show"
api_expect 200 "$ADMIN_TOKEN" GET /metrics
assert_contains "$API_BODY" "gpupool_streams_active 1" "streams active metric"
kill -TERM "$EXPID"
wait "$EXPID"
assert_eq 143 "$?" "exec killed by SIGTERM in the job: 128+15"

# bob, and the admin, may not open streams into alice's job
GPUPOOL_TOKEN=$BOB cli exec "$j" -- true
[ "$CLI_RC" != 0 ] || fail "bob opened a stream into alice's job"
assert_contains "$CLI_ERR" "only its owner" "bob's refusal"
GPUPOOL_TOKEN=$ADMIN_TOKEN cli exec "$j" -- true
[ "$CLI_RC" != 0 ] || fail "an admin opened a stream into alice's job"
# no token, no stream (the CLI sends it in a header, never in the URL)
st=$(curl -s -o /dev/null -w '%{http_code}' -H "Upgrade: gpupool-stream/1" \
    "$(coord_url)/v1/jobs/$j/stream?kind=exec")
assert_eq 401 "$st" "a stream without a token"

api_expect 200 "$ADMIN_TOKEN" GET /metrics
assert_contains "$API_BODY" "gpupool_streams_opened_total" "opened metric"
opened=$(printf '%s\n' "$API_BODY" | awk '$1 == "gpupool_streams_opened_total" {print $2}')
[ "${opened:-0}" -ge 4 ] || fail "streams opened: $opened"

release_job alpha "$j"
wait_final "$j"
# a finished job: refused
GPUPOOL_TOKEN=$ALICE cli exec "$j" -- true
[ "$CLI_RC" != 0 ] || fail "exec into a finished job"
assert_contains "$CLI_ERR" "not running" "finished job"
echo "ok $TEST_NAME"
