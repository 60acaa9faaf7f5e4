#!/usr/bin/env bash
# test_image_cache.sh: the agent's layer cache under a small cap
# (--image-cache-max 3M: one busybox layer, about 2 MB unpacked, fits; two
# do not). Image A is fetched; B's fetch evicts A's layer (the least
# recently used, no job holds it); A again is fetched again. The agent's
# status reports the cache (bytes under the cap, hits, misses, evictions).
# A layer a running job uses is never evicted: while a container of A
# runs, B's fetch leaves the cache over its cap, and A's layer stays.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

start_coordinator
printf 'images = any\n' >"$T/any.policy"
start_agent tiny 1 --policy "$T/any.policy" --image-cache-max 3M
# An agent that runs no containers says so in its offer: images = none.
start_agent plain 1 --policy "$T/any.policy" --runtime none
wait_node_up tiny
wait_node_up plain
api_expect 200 "$ADMIN_TOKEN" GET /v1/nodes
[ "$(printf '%s' "$API_BODY" | json 'sorted([n["name"], n["images"], n["plain_jobs"]] for n in d["nodes"])')" = \
    '[["plain", "none", true], ["tiny", "any", true]]' ] ||
    fail "the nodes' acceptance: $API_BODY"
image_layer la --marker a
image_oci a cache:a "$IMG/la.tgz"
A=$DIGEST
image_layer lb --marker b
image_oci b cache:b "$IMG/lb.tgz"
for x in a b; do
	cli image import "$IMG/$x.tar"
	[ "$CLI_RC" = 0 ] || fail "import $x: $CLI_ERR"
done
LA=$(tar -xOf "$IMG/a.tar" "blobs/sha256/${A:7}" | json 'd["layers"][0]["digest"]')
CACHE="$T/agents/tiny/images/layers"

run() { # IMAGE: sets JOB; the agent made its image ready
	submit --image "$1"
	expect_image_ran "$JOB" tiny hello-from-image
	READY=$(grep "image ready job=$JOB " "$T/agent-tiny.log")
	[ "$(job_get "$JOB" 'd["node"]')" = tiny ] ||
	    fail "an image job went to the agent without containers"
}
run cache:a
assert_contains "$READY" "cached=0 fetched=1 " "first run of a"
[ -d "$CACHE/${LA:7}" ] || fail "a's layer not in the cache"
run cache:a
assert_contains "$READY" "cached=1 fetched=0 fetched_bytes=0 " "second run of a"
run cache:b
assert_contains "$READY" "cached=0 fetched=1 " "b"
agent_log_wait tiny "image cache evicted layer=sha256:${LA:7:12}"
[ ! -e "$CACHE/${LA:7}" ] && [ ! -e "$CACHE/${LA:7}.json" ] ||
    fail "the evicted layer is still on disk"
run cache:a
assert_contains "$READY" "cached=0 fetched=1 " "a after its eviction"
GPUPOOL_AGENT_SOCKET="$T/agents/tiny/agent.sock" cli provider status --json
[ "$CLI_RC" = 0 ] || fail "provider status: $CLI_ERR"
printf '%s' "$CLI_OUT" | json 'd["image_cache"]' >"$T/cache.json"
"$PY" - "$T/cache.json" <<'PYEOF' || fail "image_cache in status: $(cat "$T/cache.json")"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["max_bytes"] == 3 << 20, c
assert 0 < c["bytes"] <= c["max_bytes"], c
assert c["layers"] == 1 and c["in_use"] == 0, c
assert c["hits"] == 1 and c["misses"] == 3 and c["evictions"] >= 2, c
PYEOF
# A running job's layer is never evicted (CPU-only jobs: both run at once;
# image jobs go to tiny only).
LB=$(tar -xOf "$IMG/b.tar" "blobs/sha256/${DIGEST:7}" | json 'd["layers"][0]["digest"]')
submit --gpus 0 --image cache:a -- "sleep 300"
HOLDER=$JOB
wait_state "$HOLDER" running
agent_log_wait tiny "image ready job=$HOLDER "
submit --gpus 0 --image cache:b
expect_image_ran "$JOB" tiny hello-from-image
agent_log_wait tiny "image cache over its cap while jobs use it"
[ -d "$CACHE/${LA:7}" ] || fail "the layer of a running job was evicted"
[ "$(job_state "$HOLDER")" = running ] || fail "the holding job stopped"
cli cancel "$HOLDER"
wait_final "$HOLDER"
agent_log_wait tiny "image cache evicted layer=sha256:${LB:7:12}"
[ -d "$CACHE/${LA:7}" ] || fail "the most recently used layer was evicted"
log "image cache: hit, eviction under the cap, refetch, in use kept ok"
