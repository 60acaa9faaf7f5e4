#!/usr/bin/env bash
# A gang whose job names an image (--image), on two agents: every part's
# agent fetches the image from the coordinator (GET /v1/agent/jobs/ID/
# ATTEMPT/image...) and runs its part in it. Each part's node may read
# the job's pinned image, not only the rank-0 part's (the rule of the
# checkpoint calls), while a node running no part of the job is refused.
# Two test namespaces play two provider machines on a LAN of their own
# (gang_lib.sh); nothing of this test reaches the machine's network.
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/gang_lib.sh"
gang_machines test_gang_image "$here/$(basename "$0")"

. "$here/lib.sh"
. "$here/image_lib.sh"

requirement_present oci-runtime ||
    skip oci-runtime "container jobs need root and crun or runc"
[ -x /bin/busybox ] || skip busybox "the test image is made from /bin/busybox"
start_coordinator
gang_coordinator_relay
printf 'images = any\n' >"$T/any.policy"
start_agent a1 1 --advertise-addr 192.168.77.2 --policy "$T/any.policy"
gang_start_a2 --policy "$T/any.policy"
wait_node_up a1
wait_node_up a2
for a in a1 a2; do
	grep -q "container jobs disabled" "$T/agent-$a.log" &&
	    skip oci-runtime "agent $a runs no container jobs: $(grep -m1 'container jobs disabled' "$T/agent-$a.log")"
done
image_layer l --marker gang
image_oci box box:1 "$IMG/l.tgz"
cli image import "$IMG/box.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"

# One string: the test image's Entrypoint is /bin/sh -c (images.py).
# shellcheck disable=SC2016 # expanded by the part's shell
submit --image box:1 --nodes 2 --gpus-per-node 1 --time 2m -- \
    'echo "part $RANK of $WORLD_SIZE in the image: $(cat /gpupool-marker)"'
gjob=$JOB
wait_final "$gjob"
for p in 0 1; do
	cli logs --part "$p" "$gjob"
	log "part $p: $CLI_OUT"
	assert_contains "$CLI_OUT" "part $p of 2 in the image: gang" "part $p's output"
done
assert_eq succeeded "$FINAL_STATE" "the gang with an image (a1: $(grep -m1 -i 'image.*\(refused\|403\|failed\)' "$T/agent-a1.log"); a2: $(grep -m1 -i 'image.*\(refused\|403\|failed\)' "$T/agent-a2.log"))"
for a in a1 a2; do
	grep -q "image ready" "$T/agent-$a.log" ||
	    fail "agent $a did not log 'image ready'"
done

# A node that runs no part of a running job may not read its image.
submit --image box:1 --nodes 2 --gpus-per-node 1 --time 2m -- 'sleep 60'
gjob=$JOB
wait_state "$gjob" running
mk_token provider prov-x
code=$(curl -s -o "$T/x.body" -w '%{http_code}' \
    -H "Authorization: Bearer $TOKEN" \
    "$(coord_url)/v1/agent/jobs/$gjob/1/image")
assert_eq 403 "$code" "another provider's read of the job's image ($(cat "$T/x.body"))"
cli cancel "$gjob"
wait_final "$gjob"
echo ok
