# Proves that leases running out on many nodes at once requeue every job:
# six nodes of 64 GPUs (simulated with curl: they register and go
# silent) hold 384 jobs, more than the coordinator requeues in one state
# batch (256 a slice, whole nodes at a time), so the expiry goes on in a
# second slice where the first stopped. Every job is placed again on a
# real agent that joins afterwards and ends succeeded.
. "$(dirname "$0")/lib.sh"

# A lease long enough for the six registrations and the submission.
start_coordinator --lease-ms 4000
mk_token provider prov-silent
silent=$TOKEN
gpus=$("$PY" -c 'import json; print(json.dumps([{"index": i, "uuid": "GPU-silent-%d" % i, "model": "Fake", "mem_mib": 1000} for i in range(64)]))')
for k in 1 2 3 4 5 6; do
	api_expect 200 "$silent" POST /v1/agent/register \
	    "{\"protocol\":1,\"name\":\"silent$k\",\"cpus\":128,\"mem_mib\":100000,\"gpus\":$gpus,\"running\":[]}"
done
cli submit --array 0-383 --gpus 1 --cpus 1 --name slice -- true
assert_eq 0 "$CLI_RC" "submit --array ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "submit --array printed '$CLI_OUT'"
first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
assert_eq 383 "$((last - first))" "the array's job ids"
# All 384 were placed on the silent nodes (the coordinator logs each).
n=$(grep -c 'job assigned .* node=silent' "$COORD_LOG")
assert_eq 384 "$n" "assignments to the silent nodes"
# All six go silent at once: each beats once more (nothing running yet:
# the jobs are on their way), then the coordinator is stopped past the
# lease, so that its first look afterwards finds every lease run out.
for k in 1 2 3 4 5 6; do
	api_expect 200 "$silent" GET /v1/nodes
	id=$(printf '%s' "$API_BODY" | json "[n['id'] for n in d['nodes'] if n['name'] == 'silent$k'][0]")
	api_expect 200 "$silent" POST /v1/agent/heartbeat "{\"node_id\":$id,\"running\":[]}"
done
kill -STOP "$COORD_PID"
sleep 5
kill -CONT "$COORD_PID"
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c 'node lease expired node=silent' "$COORD_LOG")" = 6 ]; do
	[ $SECONDS -ge $deadline ] && fail "not every silent node expired: $(grep 'lease expired' "$COORD_LOG")"
	sleep 0.2
done
# The first batch stopped at 256 jobs (four whole nodes) and said so.
grep -q 'lease expiry goes on in the next batch requeued=256' "$COORD_LOG" ||
    fail "no second batch of lease expiry: $(grep 'lease exp' "$COORD_LOG")"
start_agent alpha 64
wait_node_up alpha
# Every job, whichever slice requeued it, runs again and succeeds.
count_ended() { # sets ENDED (jobs of the array over) and OK (succeeded)
	api_expect 200 "$ADMIN_TOKEN" GET '/v1/jobs?all=1'
	read -r ENDED OK < <(printf '%s' "$API_BODY" | json '"%d %d" % (sum(1 for j in d["jobs"] if j["name"] == "slice" and j["state"] in ("succeeded", "failed", "cancelled", "timeout")), sum(1 for j in d["jobs"] if j["name"] == "slice" and j["state"] == "succeeded"))')
}
deadline=$((SECONDS + 4 * WAIT_S))
count_ended
while [ "$ENDED" != 384 ]; do
	[ $SECONDS -ge $deadline ] && fail "only $ENDED of 384 jobs ended"
	sleep 0.5
	count_ended
done
assert_eq 384 "$OK" "jobs succeeded"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$last"
assert_eq alpha "$(printf '%s' "$API_BODY" | json 'd["node"]')" "the last job's node"
log "ok: 384 jobs of six expired nodes requeued in slices and run elsewhere"
