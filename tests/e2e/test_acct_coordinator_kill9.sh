# Proves that the ledger's postings survive a coordinator kill -9 without
# being counted twice or lost: jobs accrue every second; the coordinator
# is killed (some postings of theirs are on disk, maybe one was being
# written) and restarted on the same data dir. One job runs on through the
# restart, another finishes while the coordinator is down (its agent keeps
# the report). Afterwards each job's postings count up without gaps, their
# periods tile its run from its start to its end (the time the
# coordinator was down included: the GPUs were held), and they add up to
# exactly price x time; the books balance. Then a second kill -9 while
# nothing runs changes nothing. The jobs are gated (lib.sh's
# gated_job_cmd): the short one ends when the test lets it, while the
# coordinator is down, the long one once it accrued again after the
# restart; each is billed at least from when it had a posting to when
# the test let it end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/acct_lib.sh"

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
# billed_until JOB: the end of the job's last posting, in ms since the epoch
billed_until() {
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?job=$1&limit=10000"
	printf '%s' "$API_BODY" | json 'max(__import__("calendar").timegm(__import__("time").strptime(p["to"][:19], "%Y-%m-%dT%H:%M:%S")) * 1000 + int(p["to"][20:23]) for p in d["postings"])'
}

start_coordinator --accrual-interval 1s
cli price set T4 3.6
assert_eq 0 "$CLI_RC" "price set ($CLI_ERR)"
cli group create lab-a
acct_provider a prov-a default
acct_token user alice lab-a
alice=$TOKEN
start_agent a 2:T4:16384
wait_node_up a

new_marker
m1=$MARK
GPUPOOL_TOKEN=$alice submit -- bash -c 'exec -a "$0" sh -c "$1"' "$m1" "$(gated_job_cmd)"
long=$JOB
new_marker
m2=$MARK
GPUPOOL_TOKEN=$alice submit -- bash -c 'exec -a "$0" sh -c "$1"' "$m2" "$(gated_job_cmd)"
short=$JOB
wait_state "$long" running
wait_state "$short" running
wait_count argv0 "$m1" 1
wait_count argv0 "$m2" 1
# some accruals of both on disk before the kill
deadline=$((SECONDS + WAIT_S))
while :; do
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?user=alice"
	n=$(printf '%s' "$API_BODY" | json 'min([sum(1 for p in d["postings"] if p["job_id"] == j) for j in ('"$long, $short"')])')
	[ "$n" -ge 1 ] && break
	[ $SECONDS -ge $deadline ] && fail "no accruals before the kill: $API_BODY"
	sleep 0.2
done
# both billed from before now (they have postings)
seen_ms=$(now_ms)
kill9_coordinator
log "coordinator killed"
# the short job ends while the coordinator is down
short_released=$(now_ms)
short_min=$((short_released - seen_ms))
release_job a "$short"
wait_count argv0 "$m2" 0
start_coordinator --accrual-interval 1s
wait_final "$short"
assert_eq succeeded "$FINAL_STATE" "the job that ended while the coordinator was down"
assert_eq running "$(job_state "$long")" "the long job after the restart"
# the long job accrues again after the restart before it ends
api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?job=$long&limit=10000"
n0=$(printf '%s' "$API_BODY" | json 'len(d["postings"])')
deadline=$((SECONDS + WAIT_S))
while :; do
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?job=$long&limit=10000"
	[ "$(printf '%s' "$API_BODY" | json 'len(d["postings"])')" -gt "$n0" ] && break
	[ $SECONDS -ge $deadline ] && fail "the long job accrued nothing after the restart: $API_BODY"
	sleep 0.2
done
long_released=$(now_ms)
long_min=$((long_released - seen_ms))
release_job a "$long"
wait_final "$long"
assert_eq succeeded "$FINAL_STATE" "the long job"
assert_eq 1 "$(job_get "$long" 'd["attempts"]')" "the long job's attempts"

EXPECT="alice lab-a prov-a default" ledger_check "$long" $((3600000 * 1000))
long_cost=$COST
# from the start to the end: at least from its first posting to its release
[ "$BILLED_MS" -ge "$long_min" ] || fail "the long job billed $BILLED_MS ms for a run of more than $long_min ms"
until_ms=$(billed_until "$long")
[ "$until_ms" -ge "$long_released" ] || fail "the long job billed until $until_ms, released at $long_released"
log "long job: billed $BILLED_MS ms (at least $long_min), until $until_ms (released at $long_released)"
assert_eq "$BILLED_MS" "$COST" "the long job's cost (1 micro-credit a ms)"
assert_eq "$long_cost" "$(job_get "$long" 'd["cost_micro"]')" "the long job's cost in its JSON"
EXPECT="alice lab-a prov-a default" ledger_check "$short" $((3600000 * 1000))
short_cost=$COST
[ "$BILLED_MS" -ge "$short_min" ] || fail "the short job billed $BILLED_MS ms for a run of more than $short_min ms (it ended while the coordinator was down)"
until_ms=$(billed_until "$short")
[ "$until_ms" -ge "$short_released" ] || fail "the short job billed until $until_ms, released (the coordinator down) at $short_released"
log "short job: billed $BILLED_MS ms (at least $short_min), until $until_ms (released at $short_released)"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?job=$short"
assert_eq final "$(printf '%s' "$API_BODY" | json 'd["postings"][-1]["kind"]')" "the short job's last posting"

api_expect 200 "$ADMIN_TOKEN" GET /v1/usage
assert_eq "0 $((long_cost + short_cost))" "$(printf '%s' "$API_BODY" | json '"%d %d" % (d["totals"]["balance_micro"], d["totals"]["credits_micro"])')" "balance and credits"
# alice's group's decayed usage came through the restart
cli group ls --json
used=$(printf '%s' "$CLI_OUT" | json '[g["decayed_usage"]["credits_micro"] for g in d["groups"] if g["name"] == "lab-a"][0]')
[ "$used" -ge $(((long_cost + short_cost) * 9 / 10)) ] || fail "lab-a's decayed usage $used, spent $((long_cost + short_cost))"

# a second kill -9 with nothing running changes nothing
before=$(printf '%s' "$API_BODY" | json 'd["totals"]')
kill9_coordinator
start_coordinator --accrual-interval 1s
sleep 2
api_expect 200 "$ADMIN_TOKEN" GET /v1/usage
assert_eq "$before" "$(printf '%s' "$API_BODY" | json 'd["totals"]')" "the books after a second kill -9"
echo ok
