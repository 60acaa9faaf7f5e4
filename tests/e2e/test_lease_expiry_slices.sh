# Proves that leases running out on many nodes at once requeue every job:
# six nodes of 64 GPUs (simulated with curl: they register and go
# silent) hold 384 jobs, more than the coordinator requeues in one state
# batch (256 a slice, whole nodes at a time), so the expiry goes on in a
# second slice where the first stopped. Every job is placed again on a
# real agent that joins afterwards and ends succeeded.
. "$(dirname "$0")/lib.sh"

# The silent nodes are kept alive by a heartbeat loop (keepalive) for as
# long as the setup takes, however slow the machine: their leases run out
# only while the coordinator is stopped below, never during the setup.
LEASE_MS=6000
start_coordinator --lease-ms $LEASE_MS
mk_token provider prov-silent
silent=$TOKEN
gpus=$("$PY" -c 'import json; print(json.dumps([{"index": i, "uuid": "GPU-silent-%d" % i, "model": "Fake", "mem_mib": 1000} for i in range(64)]))')
ids=()
for k in 1 2 3 4 5 6; do
	api_expect 200 "$silent" POST /v1/agent/register \
	    "{\"protocol\":1,\"name\":\"silent$k\",\"cpus\":128,\"mem_mib\":100000,\"gpus\":$gpus,\"running\":[]}"
done
api_expect 200 "$silent" GET /v1/nodes
for k in 1 2 3 4 5 6; do
	ids+=("$(printf '%s' "$API_BODY" | json "[n['id'] for n in d['nodes'] if n['name'] == 'silent$k'][0]")")
done
# heartbeat ID...: one heartbeat of each silent node (nothing running yet:
# the jobs are on their way, never fetched, so not lost either).
heartbeat() {
	local id
	for id in "$@"; do
		api_expect 200 "$silent" POST /v1/agent/heartbeat "{\"node_id\":$id,\"running\":[]}"
	done
}
# keepalive: every 0.5 s at most 600 times (bounded), in the background.
export E2E_SILENT=$silent E2E_URL=$(coord_url) E2E_IDS="${ids[*]}"
spawn "$T/keepalive.log" bash -c '
	for ((i = 0; i < 600; i++)); do
		for id in $E2E_IDS; do
			curl -sS -o /dev/null --max-time 5 -H "Authorization: Bearer $E2E_SILENT" \
			    -H "Content-Type: application/json" \
			    --data-binary "{\"node_id\":$id,\"running\":[]}" "$E2E_URL/v1/agent/heartbeat"
		done
		sleep 0.5
	done'
keepalive=$SPAWNED_PID
cli submit --array 0-383 --gpus 1 --cpus 1 --name slice -- true
assert_eq 0 "$CLI_RC" "submit --array ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "submit --array printed '$CLI_OUT'"
first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
assert_eq 383 "$((last - first))" "the array's job ids"
# All 384 were placed on the silent nodes (the coordinator logs each).
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c 'job assigned .* node=silent' "$COORD_LOG")" -ge 384 ]; do
	[ $SECONDS -ge $deadline ] && break
	sleep 0.1
done
n=$(grep -c 'job assigned .* node=silent' "$COORD_LOG")
assert_eq 384 "$n" "assignments to the silent nodes"
grep -q 'node lease expired node=silent' "$COORD_LOG" &&
    fail "a silent node expired during the setup: $(grep 'lease expired' "$COORD_LOG")"
# All six go silent at once: the keepalive stops, each beats once more,
# then the coordinator is stopped past the lease, so that its first look
# afterwards finds every lease run out. (The sleep is a lower bound the
# stopped coordinator cannot shorten, not a guess at a speed.)
kill -TERM -- "-$keepalive" 2>/dev/null
wait_exit "$keepalive" || fail "the keepalive loop did not stop"
heartbeat "${ids[@]}"
kill -STOP "$COORD_PID"
sleep $((LEASE_MS / 1000 + 1))
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
