# Proves that a queue deeper than one scheduling pass looks at (1,000 jobs
# a user) is placed whole even when nothing else happens: after a pass
# that placed jobs and left some unseen, the next pass runs at once. The
# nodes are simulated with curl and never report, as agents holding their
# reports do; before the fix the coordinator then spun on empty state
# batches and the jobs past the first 1,000 waited for another event.
. "$(dirname "$0")/lib.sh"

# A long lease: the curl nodes do not heartbeat.
start_coordinator --lease-ms 600000
mk_token provider prov-deep
prov=$TOKEN
gpus=$("$PY" -c 'import json; print(json.dumps([{"index": i, "uuid": "GPU-deep-%d" % i, "model": "Fake", "mem_mib": 1000} for i in range(64)]))')
for k in $(seq 18); do # 1,152 GPUs
	api_expect 200 "$prov" POST /v1/agent/register \
	    "{\"protocol\":1,\"name\":\"deep$k\",\"cpus\":128,\"mem_mib\":100000,\"gpus\":$gpus,\"running\":[]}"
done
# One job first: the coordinator's first pass is a deep one (10,000 a
# user); the array's comes within the next 10 s, a shallow one.
submit --gpus 1 --cpus 1 --name first -- true
deadline=$((SECONDS + WAIT_S))
until grep -q "job assigned job=$JOB " "$COORD_LOG"; do
	[ $SECONDS -ge $deadline ] && fail "job $JOB not placed"
	sleep 0.1
done
cli submit --array 0-1099 --gpus 1 --cpus 1 --name deep -- true
assert_eq 0 "$CLI_RC" "submit --array ($CLI_ERR)"
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c 'job assigned .* node=deep' "$COORD_LOG")" -ge 1101 ]; do
	[ $SECONDS -ge $deadline ] &&
	    fail "$(grep -c 'job assigned .* node=deep' "$COORD_LOG") of 1101 jobs placed"
	sleep 0.2
done
api_expect 200 "$ADMIN_TOKEN" GET /v1/queue
assert_eq 0 "$(printf '%s' "$API_BODY" | json 'len(d["jobs"])')" "jobs left in the queue"
log "ok: the queue past one pass's depth is placed without another event"
