# A job's environment is its owner's alone (issue 17: "only the job's
# owner may see a job's secrets; admins can cancel but not attach").
# `gpupool jupyter` puts Jupyter's own token in JUPYTER_TOKEN: its owner's
# local URL works with it (the agent got it, Jupyter checks it), but an
# admin's `show`, `show --json`, `ps --all --json`, the API's job, list,
# wait and cancel answers, and a provider's `show`, carry the keys with no
# values; the token is in no log (coordinator, agent, the job's own
# output, where Jupyter logs the URIs of redirects and failed requests).
# The same holds for any `submit --env`.
. "$(dirname "$0")/lib.sh"
require netns
/usr/bin/python3 -c 'import notebook' 2>/dev/null ||
	fail "Debian's python3-notebook is missing (scripts/install-deps.sh)"

start_coordinator
start_agent alpha 1
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN
PROVIDER=$(tr -d ' \r\n' <"$T/alpha.token")

# gpupool jupyter: its token of its own, its local URL.
GPUPOOL_TOKEN=$ALICE spawn "$T/jupyter.out" "$GP" jupyter --gpus 0 --time 30m
JUP_PID=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q '^Jupyter in job' "$T/jupyter.out"; do
	alive "$JUP_PID" || fail "gpupool jupyter exited: $(cat "$T/jupyter.out")"
	[ $SECONDS -ge $deadline ] && fail "gpupool jupyter printed no URL: $(cat "$T/jupyter.out")"
	sleep 0.2
done
line=$(grep '^Jupyter in job' "$T/jupyter.out")
job=$(printf '%s' "$line" | sed -nE 's/^Jupyter in job ([0-9]+):.*/\1/p')
local_url=$(printf '%s' "$line" | sed -nE 's/.* (http:[^ ]+)$/\1/p')
tok=${local_url##*token=}
base=${local_url%%/?token=*}
is_uint "$job" || fail "no job id in: $line"
[ ${#tok} = 48 ] || fail "no token of its own in: $line"

# The owner's Jupyter answers with its token, and only with it.
deadline=$((SECONDS + 90))
until curl -s --max-time 5 "$base/api/status?token=$tok" | grep -q '"started"'; do
	alive "$JUP_PID" || fail "gpupool jupyter exited: $(cat "$T/jupyter.out")"
	[ $SECONDS -ge $deadline ] && fail "Jupyter never answered at $base"
	sleep 0.5
done
out=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$base/api/status?token=not-the-token")
assert_eq 403 "$out" "Jupyter with another token"
# The printed URL, as a browser loads it: a redirect, which Jupyter logs
# with its URI (gpupool jupyter's config hides the token there), and a
# failed request with the token, logged too.
out=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$local_url")
assert_eq 302 "$out" "the printed URL"
out=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$base/no-such-page?token=$tok")
assert_eq 404 "$out" "a page Jupyter does not have"

# A plain job with a secret of its user's.
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --env API_KEY=s3cret-of-alice -- sleep 600
plain=$JOB

# The owner sees the values.
out=$(GPUPOOL_TOKEN=$ALICE "$GP" show --json "$job")
assert_eq "$tok" "$(printf '%s' "$out" | json 'd["env"]["JUPYTER_TOKEN"]')" "the owner's show --json"
out=$(GPUPOOL_TOKEN=$ALICE "$GP" show "$plain")
assert_contains "$out" "API_KEY=s3cret-of-alice" "the owner's show"

# An admin sees the keys, never the values.
secrets=("$tok" s3cret-of-alice)
no_secret() { # TEXT WHAT
	local s
	for s in "${secrets[@]}"; do
		assert_not_contains "$1" "$s" "$2"
	done
}
out=$(GPUPOOL_TOKEN=$ADMIN_TOKEN "$GP" show --json "$job")
no_secret "$out" "an admin's show --json"
assert_eq "None 8888" "$(printf '%s' "$out" | json 'str(d["env"]["JUPYTER_TOKEN"]) + " " + str(d["expose"][0])')" \
    "an admin's show --json: the key, no value"
out=$(GPUPOOL_TOKEN=$ADMIN_TOKEN "$GP" show "$job")
assert_contains "$out" "JUPYTER_TOKEN=(hidden)" "an admin's show"
no_secret "$out" "an admin's show"
out=$(GPUPOOL_TOKEN=$ADMIN_TOKEN "$GP" show "$plain")
assert_contains "$out" "API_KEY=(hidden)" "an admin's show of a plain job"
no_secret "$out" "an admin's show of a plain job"
out=$(GPUPOOL_TOKEN=$ADMIN_TOKEN "$GP" ps --all --json)
assert_contains "$out" "JUPYTER_TOKEN" "an admin's ps --all --json"
no_secret "$out" "an admin's ps --all --json"
for path in "/v1/jobs/$job" "/v1/jobs/$plain" "/v1/jobs" "/v1/jobs?all=1" \
    "/v1/jobs?all=1&limit=5" "/v1/jobs/$job/wait?wait_ms=0"; do
	api "$ADMIN_TOKEN" GET "$path"
	assert_eq 200 "$API_STATUS" "an admin's GET $path"
	no_secret "$API_BODY" "an admin's GET $path"
done
# The provider of the node that runs them: its agent got the values (the
# job runs with them), its user-side view has none.
out=$(GPUPOOL_TOKEN=$PROVIDER "$GP" show --json "$plain")
assert_contains "$out" "API_KEY" "the provider's show --json"
no_secret "$out" "the provider's show --json"
# The job did get its secret.
out=$(GPUPOOL_TOKEN=$ALICE "$GP" exec "$plain" -- sh -c 'printf %s "$API_KEY"')
assert_eq s3cret-of-alice "$out" "the job's environment"

# An admin cancels (and its answer shows no secret).
api "$ADMIN_TOKEN" POST "/v1/jobs/$plain/cancel"
assert_eq 200 "$API_STATUS" "an admin's cancel: $API_BODY"
no_secret "$API_BODY" "an admin's cancel answer"
api "$ADMIN_TOKEN" POST "/v1/jobs/$job/cancel"
assert_eq 200 "$API_STATUS" "an admin's cancel: $API_BODY"
no_secret "$API_BODY" "an admin's cancel answer"
wait_final "$job"
wait_final "$plain"
kill -INT "$JUP_PID"
wait_exit "$JUP_PID" || fail "gpupool jupyter did not exit on SIGINT"

# No log has the token: the coordinator's, the agent's, the job's output.
job_log "$job"
assert_contains "$LOG" "token=[hidden]" "Jupyter's output (its log of the printed URL)"
no_secret "$LOG" "the job's log"
no_secret "$(cat "$COORD_LOG")" "the coordinator's log"
no_secret "$(cat "$T"/agent-alpha*.log)" "the agent's log"
echo ok
