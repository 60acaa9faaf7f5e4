#!/usr/bin/env bash
# test_image_trust.sh: attestation, both layers. Keys are made with `key
# create` and images signed with `image sign`. The coordinator knows what
# each owner accepts (from the offer) and refuses at submit (422) an image
# no provider would take, saying why per node; a queued job whose only
# accepting provider changes its policy shows why it waits. The agent
# decides for itself: a signature that does not verify, a signature
# removed from the coordinator's database, a layer changed on the
# coordinator's disk, and layers that unpack to something unsafe ("..",
# a device node, a symlink that escapes, a decompression bomb) each fail
# the job (image_refused) with a message naming the check, and leave
# nothing in the agent's cache. A second job of an image fetches nothing.
# Plain jobs go only to owners who take them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

start_coordinator
mk_token user alice
ALICE=$TOKEN
blob_file() { echo "$COORD_DATA/images/blobs/${1:7:2}/${1:7}"; }
import() { # ARCHIVE: as alice; sets DIGEST
	as_user "$ALICE" cli image import "$1"
	[ "$CLI_RC" = 0 ] || fail "import $(basename "$1"): $CLI_ERR"
	DIGEST=$(printf '%s' "$CLI_OUT" | grep -o 'sha256:[0-9a-f]\{64\}' | head -1)
}
# sql TEXT: runs TEXT on the image records, wherever the store keeps them.
sql() {
	if [ "${GP_TEST_DB:-sqlite}" = postgresql ]; then
		"${GP_PG_BIN:-/usr/lib/postgresql/15/bin}/psql" -X -q \
		    -v ON_ERROR_STOP=1 -d "${COORD_DB_ARGS[1]}" -c "$1" \
		    >/dev/null || fail "psql: $1"
	else
		sqlite3 "$COORD_DATA/images.db" "$1" || fail "sqlite3: $1"
	fi
}

image_layer l1 --marker signed-one
image_layer l2 --marker signed-two --whiteout etc/passwd
image_oci signed busybox:signed "$IMG/l1.tgz" "$IMG/l2.tgz"
import "$IMG/signed.tar"
SIGNED=$DIGEST
image_layer lu --marker unsigned
image_oci unsigned busybox:unsigned "$IMG/lu.tgz"
import "$IMG/unsigned.tar"
UNSIGNED=$DIGEST

# ---- keys
cd "$T" || fail "cd $T"
cli key create k1
[ "$CLI_RC" = 0 ] || fail "key create: $CLI_ERR"
K1=$CLI_OUT
[[ $K1 =~ ^ed25519:[A-Za-z0-9+/]{43}=$ ]] || fail "public key: '$K1'"
[ "$(stat -c %a "$T/k1.key")" = 600 ] || fail "key file mode $(stat -c %a "$T/k1.key")"
assert_contains "$CLI_ERR" "trust-key = $K1 k1" "key create's hint"
cp "$T/k1.key" "$T/k1.copy"
cli key create k1
[ "$CLI_RC" = 1 ] || fail "key create overwrote a key"
cmp -s "$T/k1.key" "$T/k1.copy" || fail "the key file changed"
cli key create k2
K2=$CLI_OUT

# ---- signing: admins only, with a private key file
as_user "$ALICE" cli image sign busybox:signed --key "$T/k1.key"
[ "$CLI_RC" = 1 ] || fail "a user signed"
assert_contains "$CLI_ERR" "only admins sign images" "user sign"
chmod 644 "$T/k2.key"
cli image sign busybox:unsigned --key "$T/k2.key"
[ "$CLI_RC" = 1 ] || fail "signed with a world-readable key"
assert_contains "$CLI_ERR" "readable by others" "open key file"
chmod 600 "$T/k2.key"
cli image sign busybox:signed --key "$T/k1.key"
[ "$CLI_RC" = 0 ] || fail "sign: $CLI_ERR"
assert_contains "$CLI_OUT" "signed busybox:signed ($SIGNED) with key k1" "sign output"
as_user "$ALICE" cli image ls --json
[ "$(printf '%s' "$CLI_OUT" | E2E_D=$SIGNED json '[s["key"] for i in d["images"] if i["digest"] == __import__("os").environ["E2E_D"] for s in i["signatures"]]')" = "[\"$K1\"]" ] ||
    fail "signature not listed: $CLI_OUT"

# ---- owners: "trusty" trusts k1; "closed" takes neither images nor plain jobs
printf 'trust-key = %s k1\n' "$K1" >"$T/trusty.policy"
printf 'images = none\nplain-jobs = refuse\n' >"$T/closed.policy"
start_agent trusty 1 --policy "$T/trusty.policy"
start_agent closed 1 --policy "$T/closed.policy"
wait_node_up trusty
wait_node_up closed

# The coordinator's layer: refused at submit, with each node's reason.
as_user "$ALICE" cli submit --image busybox:unsigned
[ "$CLI_RC" = 1 ] || fail "an unsigned image was accepted"
assert_contains "$CLI_ERR" "node trusty takes only signed images, and this one is unsigned" "422 unsigned"
assert_contains "$CLI_ERR" "node closed takes no images" "422 closed"
cli image sign busybox:unsigned --key "$T/k2.key"
[ "$CLI_RC" = 0 ] || fail "sign with k2: $CLI_ERR"
as_user "$ALICE" cli submit --image busybox:unsigned
[ "$CLI_RC" = 1 ] || fail "an image signed by an untrusted key was accepted"
assert_contains "$CLI_ERR" "node trusty trusts none of the 1 key that signed the image" "422 untrusted"

# A signed image runs on the owner who trusts its key; no command needed.
GPUPOOL_TOKEN=$ALICE submit --image busybox:signed
FIRST=$JOB
# (The upper layer's marker wins: layers are stacked bottom first.)
expect_image_ran "$FIRST" trusty "hello-from-image
signed-two"
[ "$(job_get "$FIRST" 'd["node"]')" = trusty ] || fail "placed on $(job_get "$FIRST" 'd["node"]')"
grep "image ready job=$FIRST " "$T/agent-trusty.log" | grep -q "cached=0 fetched=2 " ||
    fail "first run did not fetch both layers: $(grep "image ready job=$FIRST " "$T/agent-trusty.log")"
grep "image ready job=$FIRST " "$T/agent-trusty.log" | grep -q "trust=\"signed by trusted key k1 $K1\"" ||
    fail "the agent did not say which key it trusted"
# The layers on the provider's disk, whiteout included.
L1=$(json 'd["layers"][0]["digest"]' <"$(blob_file "$SIGNED")")
L2=$(json 'd["layers"][1]["digest"]' <"$(blob_file "$SIGNED")")
CACHE="$T/agents/trusty/images"
[ "$(cat "$CACHE/layers/${L1:7}/gpupool-marker")" = signed-one ] || fail "layer 1 not unpacked"
[ -x "$CACHE/layers/${L1:7}/bin/busybox" ] || fail "no busybox in layer 1"
[ "$(stat -c '%F %t:%T' "$CACHE/layers/${L2:7}/etc/passwd")" = "character special file 0:0" ] ||
    fail "the whiteout is not an overlayfs whiteout: $(stat -c '%F %t:%T' "$CACHE/layers/${L2:7}/etc/passwd")"
# A second run: nothing transferred.
GPUPOOL_TOKEN=$ALICE submit --image busybox:signed -- \
    'test ! -e /etc/passwd && echo whiteout-hides-passwd'
expect_image_ran "$JOB" trusty whiteout-hides-passwd
grep "image ready job=$JOB " "$T/agent-trusty.log" | grep -q "cached=2 fetched=0 fetched_bytes=0 " ||
    fail "second run transferred something: $(grep "image ready job=$JOB " "$T/agent-trusty.log")"

# Plain jobs only where they are taken.
for i in 1 2 3; do
	GPUPOOL_TOKEN=$ALICE submit -- /bin/true
	wait_final "$JOB"
	[ "$(job_get "$JOB" 'd["node"]')" = trusty ] || fail "a plain job ran on closed"
	# ... and was never placed there (the agent would refuse it, and the
	# job would end on trusty all the same, a second attempt later)
	[ "$(job_get "$JOB" 'd["attempts"]')" = 1 ] ||
	    fail "a plain job was placed on closed first: $(job_get "$JOB" 'd["history"]')"
done
# ... and while the node that takes them is full, a plain job waits rather
# than go to the one with room that refuses it (the pass asks the owners
# only when some node refuses something: a wrong count of such nodes
# would place it on closed, and its attempts would show it).
new_marker
GPUPOOL_TOKEN=$ALICE submit -- bash -c "exec -a $MARK sleep 300"
SLEEPER=$JOB
wait_state "$SLEEPER" running
GPUPOOL_TOKEN=$ALICE submit -- /bin/true
PLAIN=$JOB
deadline=$((SECONDS + WAIT_S))
until [ "$(job_get "$PLAIN" '"%s %s" % (d["state"], (d.get("wait") or {}).get("reason"))')" = "queued resources" ]; do
	[ $SECONDS -ge $deadline ] && fail "the plain job does not wait for resources: $(job_get "$PLAIN" '"%s on %s after %s attempts, wait %s" % (d["state"], d["node"], d["attempts"], d["wait"])')"
	sleep 0.1
done
as_user "$ALICE" cli cancel "$SLEEPER"
wait_final "$SLEEPER"
wait_final "$PLAIN"
[ "$(job_get "$PLAIN" '"%s %s %s" % (d["state"], d["node"], d["attempts"])')" = "succeeded trusty 1" ] ||
    fail "the plain job that waited: $(job_get "$PLAIN" '"%s on %s after %s attempts" % (d["state"], d["node"], d["attempts"])')"

# ---- the agent's layer: it checks for itself
# occupy / free: the only accepting GPU is held by a sleeper, so an image
# job waits in the queue while the coordinator's database is changed.
occupy() {
	new_marker
	GPUPOOL_TOKEN=$ALICE submit -- bash -c "exec -a $MARK sleep 300"
	SLEEPER=$JOB
	wait_state "$SLEEPER" running
}
free_gpu() {
	as_user "$ALICE" cli cancel "$SLEEPER"
	wait_final "$SLEEPER"
}
refused_with() { # JOB TEXT
	wait_final "$1"
	[ "$FINAL_STATE" = failed ] || fail "job $1 ended $FINAL_STATE, not failed"
	[ "$(job_get "$1" 'd["reason"]')" = image_refused ] ||
	    fail "job $1: reason $(job_get "$1" 'd["reason"]')"
	assert_contains "$(job_get "$1" 'd["message"]')" "$2" "job $1's message"
	[ -z "$(ls -A "$CACHE/tmp")" ] || fail "the agent left $(ls "$CACHE/tmp") in its cache's tmp"
}

# A signature that does not verify (another image's, by the same key).
image_layer ld --marker donor
image_oci donor busybox:donor "$IMG/ld.tgz"
import "$IMG/donor.tar"
DONOR=$DIGEST
cli image sign busybox:donor --key "$T/k1.key"
sql "UPDATE gp_image_signatures SET signature = (SELECT signature FROM gp_image_signatures WHERE digest = '$DONOR') WHERE digest = '$SIGNED'"
GPUPOOL_TOKEN=$ALICE submit --image busybox:signed
refused_with "$JOB" "wrongly signed: the signature by trusted key k1 $K1 does not verify"
as_user "$ALICE" cli wait "$JOB"
[ "$CLI_RC" = 1 ] || fail "wait exit $CLI_RC"
assert_contains "$CLI_ERR" "the provider refused its image" "wait's note"
# A signature gone from the database after the job was queued.
cli image sign busybox:signed --key "$T/k1.key"
occupy
GPUPOOL_TOKEN=$ALICE submit --image busybox:signed
GONE=$JOB
sql "DELETE FROM gp_image_signatures WHERE digest = '$SIGNED'"
free_gpu
refused_with "$GONE" "unsigned: the image carries no signature"
cli image sign busybox:signed --key "$T/k1.key"

# A layer changed on the coordinator's disk (same size, other bytes).
image_layer lt --marker tampered
image_oci tamper busybox:tamper "$IMG/lt.tgz"
import "$IMG/tamper.tar"
cli image sign busybox:tamper --key "$T/k1.key"
LT=$(json 'd["layers"][0]["digest"]' <"$(blob_file "$DIGEST")")
"$PY" - "$(blob_file "$LT")" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0xff
open(p, "wb").write(b)
EOF
GPUPOOL_TOKEN=$ALICE submit --image busybox:tamper
refused_with "$JOB" "tampered image: layer 0 $LT failed its digest check"
[ ! -e "$CACHE/layers/${LT:7}" ] || fail "the tampered layer entered the cache"

# Layers that unpack to something unsafe, signed and trusted all the same.
evil() { # KIND EXPECTED
	image_layer "evil-$1" --evil "$1"
	image_oci "evil-$1" "busybox:evil-$1" "$IMG/evil-$1.tgz"
	import "$IMG/evil-$1.tar"
	cli image sign "busybox:evil-$1" --key "$T/k1.key"
	EL=$(json 'd["layers"][0]["digest"]' <"$(blob_file "$DIGEST")")
	GPUPOOL_TOKEN=$ALICE submit --image "busybox:evil-$1"
	refused_with "$JOB" "layer 0 $EL refused: "
	assert_contains "$(job_get "$JOB" 'd["message"]')" "$2" "job $JOB ($1)"
	[ ! -e "$CACHE/layers/${EL:7}" ] || fail "the $1 layer entered the cache"
}
evil dotdot "'..' in path"
evil absolute "absolute path"
evil device "device nodes are not allowed"
evil symlink-escape "escapes the layer"
evil bomb "decompression bomb"
[ -z "$(find "$T" -name escaped)" ] || fail "an evil layer wrote outside: $(find "$T" -name escaped)"

# ---- why a queued job waits: its only trusting owner stops trusting k1
occupy
GPUPOOL_TOKEN=$ALICE submit --image busybox:signed
WAITING=$JOB
printf 'images = signed\n' >"$T/trusty.policy"
kill -HUP "${AGENT_PID[trusty]}"
deadline=$((SECONDS + WAIT_S))
until [[ $(job_get "$WAITING" 'd.get("wait_reason") or ""') == *"node trusty trusts none of the 1 key that signed the image"* ]]; do
	[ $SECONDS -ge $deadline ] && fail "no wait reason: $(job_get "$WAITING" d)"
	sleep 0.2
done
cli show "$WAITING"
# (each node's reason, in no set order)
assert_contains "$CLI_OUT" "waiting: no node would accept it: node " "show's waiting line"
assert_contains "$CLI_OUT" "node trusty trusts none of the 1 key that signed the image" \
    "show's waiting line: trusty's reason"
free_gpu
sleep 1
[ "$(job_state "$WAITING")" = queued ] || fail "the job ran where it is no longer trusted"
as_user "$ALICE" cli cancel "$WAITING"
log "attestation: coordinator and agent checks ok"
