#!/usr/bin/env bash
# test_image_store.sh: the coordinator's image store through the real CLI.
# An OCI layout archive and a `docker save` archive of busybox images
# built here are imported; a second import sends no blob again; names
# belong to their importer (another user can neither re-point nor remove
# them, an admin can); providers cannot import; a blob whose bytes do not
# match its digest and a manifest whose layers are missing or lie about
# their size are refused with nothing stored; every kind of bad archive is
# refused by `image import` with a clear error and no image named; a job
# is pinned to the manifest digest at submit, so a re-import under the same
# name and an `image rm` change nothing for it; the GC keeps the blobs of
# a pinned image and removes them once nothing names or pins it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

export GPUPOOL_TEST_IMAGE_GC_MS=2000
start_coordinator
images_build
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
mk_token provider prov-x
PROV=$TOKEN
blob_file() { echo "$COORD_DATA/images/blobs/${1:7:2}/${1:7}"; }

# ---- import, both formats; a second import sends nothing
as_user "$ALICE" cli image import "$IMG/oci.tar"
[ "$CLI_RC" = 0 ] || fail "import oci.tar: $CLI_ERR"
assert_contains "$CLI_OUT" "imported busybox:oci@$OCI_DIGEST: 2 layers, 4 blobs sent" "oci import summary"
as_user "$ALICE" cli image import "$IMG/oci.tar"
[ "$CLI_RC" = 0 ] || fail "second import: $CLI_ERR"
assert_contains "$CLI_OUT" "0 blobs sent (0B), 2 already stored" "a second import sends nothing"
as_user "$ALICE" cli image import "$IMG/docker.tar"
[ "$CLI_RC" = 0 ] || fail "import docker.tar: $CLI_ERR"
assert_contains "$CLI_OUT" "imported busybox:docker@sha256:" "docker import summary"
DOCKER_DIGEST=$(printf '%s' "$CLI_OUT" | grep -o 'sha256:[0-9a-f]\{64\}')
as_user "$ALICE" cli image ls --json
[ "$(printf '%s' "$CLI_OUT" | json '[(i["name"], i["user"], i["layers"]) for i in d["images"]]')" = \
    '[["busybox:docker", "alice", 1], ["busybox:oci", "alice", 2]]' ] ||
    fail "image ls: $CLI_OUT"
as_user "$BOB" cli image ls
assert_contains "$CLI_OUT" "busybox:oci" "bob sees the pool's images"
# The docker-save image's config and layer are plain OCI now.
api "$ALICE" GET "/v1/images?ref=busybox:docker"
[ "$(printf '%s' "$API_BODY" | json 'd["images"][0]["digest"]')" = "$DOCKER_DIGEST" ] ||
    fail "lookup by name: $API_BODY"
[ -f "$(blob_file "$DOCKER_DIGEST")" ] || fail "the docker image's manifest is not stored"

# ---- ownership and roles
image_layer other --marker other
image_oci other busybox:oci "$IMG/other.tgz"
OTHER_DIGEST=$DIGEST
as_user "$BOB" cli image import "$IMG/other.tar"
[ "$CLI_RC" = 1 ] || fail "bob re-pointed alice's name (rc $CLI_RC)"
assert_contains "$CLI_ERR" "belongs to alice" "bob's import under alice's name"
as_user "$BOB" cli image rm busybox:docker
[ "$CLI_RC" = 1 ] || fail "bob removed alice's image"
assert_contains "$CLI_ERR" "belongs to alice" "bob's rm"
api_expect 403 "$PROV" POST /v1/images/blobs/missing '{"digests":[]}'
api_expect 403 "$PROV" PUT "/v1/images/blobs/$OCI_DIGEST" x
api_expect 403 "$ALICE" POST /v1/images/signatures \
    "{\"digest\":\"$OCI_DIGEST\",\"key\":\"ed25519:x\",\"signature\":\"x\"}"
api_expect 401 - GET /v1/images

# ---- the blob API: bytes must match the digest; manifests must not lie
printf 'not what the digest says' >"$T/junk"
WRONG=sha256:$(printf 'something else' | sha256sum | cut -c1-64)
api_expect 400 "$ALICE" PUT "/v1/images/blobs/$WRONG" @"$T/junk"
assert_contains "$API_BODY" "nothing stored" "wrong blob"
[ ! -e "$(blob_file "$WRONG")" ] || fail "a blob with the wrong bytes was stored"
[ -z "$(ls "$COORD_DATA/images/tmp")" ] || fail "a refused upload left a temporary file"
api_expect 400 "$ALICE" POST /v1/images "{\"name\":\"x:1\",\"digest\":\"$WRONG\"}"
assert_contains "$API_BODY" "not stored" "commit of an unknown manifest"
# A manifest whose layer is not stored, then one whose layer size lies.
python_manifest() { # LAYER_DIGEST LAYER_SIZE
	"$PY" - "$1" "$2" "$(printf '%s' "$OCI_DIGEST")" "$COORD_DATA" <<'EOF'
import json, sys
layer, size, man, data = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
m = json.load(open("%s/images/blobs/%s/%s" % (data, man[7:9], man[7:])))
m["layers"] = [dict(m["layers"][0], digest=layer, size=size)]
sys.stdout.write(json.dumps(m))
EOF
}
L0=$(printf '%s' "$(cat "$(blob_file "$OCI_DIGEST")")" | json 'd["layers"][0]["digest"]')
L0SIZE=$(stat -c %s "$(blob_file "$L0")")
for case in "$WRONG $L0SIZE not stored" "$L0 $((L0SIZE + 1)) holds"; do
	set -- $case
	python_manifest "$1" "$2" >"$T/m.json"
	M=$("$PY" "$IMG_PY" digest "$T/m.json")
	api_expect 201 "$ALICE" PUT "/v1/images/blobs/$M" @"$T/m.json"
	api_expect 400 "$ALICE" POST /v1/images "{\"name\":\"liar:1\",\"digest\":\"$M\"}"
	assert_contains "$API_BODY" "$3" "manifest with layer $1 of $2 bytes"
done
api "$ALICE" GET "/v1/images?ref=liar:1"
[ "$API_STATUS" = 404 ] || fail "a refused manifest got a name: $API_STATUS $API_BODY"

# ---- bad archives: each refused with a clear error, no image named
bad_import() { # ARCHIVE EXPECTED
	as_user "$ALICE" cli image import "$1" --name "bad:$(basename "$1" .tar)"
	[ "$CLI_RC" != 0 ] || fail "import of $(basename "$1") succeeded"
	assert_contains "$CLI_ERR" "$2" "import of $(basename "$1")"
	api "$ALICE" GET "/v1/images?ref=bad:$(basename "$1" .tar)"
	[ "$API_STATUS" = 404 ] || fail "$(basename "$1") left an image behind"
}
for kind in dotdot-entry absolute-entry symlink-entry device-entry lying-size \
    many-layers; do
	image_oci "$kind" "bad:$kind" "$IMG/l1.tgz" --evil "$kind"
done
# (A layer the store lacks: a stored one would not even be sent.)
image_layer fresh --marker fresh
image_oci lying-digest bad:lying-digest "$IMG/fresh.tgz" --evil lying-digest
bad_import "$IMG/dotdot-entry.tar" "'..' in path"
bad_import "$IMG/absolute-entry.tar" "absolute path"
bad_import "$IMG/symlink-entry.tar" "escapes the archive"
bad_import "$IMG/device-entry.tar" "device nodes are not allowed"
bad_import "$IMG/lying-size.tar" "the archive's blob has"
bad_import "$IMG/lying-digest.tar" "hashes to"
bad_import "$IMG/many-layers.tar" "at most 128"
head -c 100000 /dev/urandom >"$IMG/noise.tar"
bad_import "$IMG/noise.tar" "not a tar archive"
printf 'just text\n' | gzip >"$IMG/text.tar"
bad_import "$IMG/text.tar" "not a tar archive"
(cd "$IMG" && tar cf empty.tar --files-from /dev/null)
bad_import "$IMG/empty.tar" "neither an OCI image layout"

# ---- a job is pinned to the digest at submit
cat >"$T/any.policy" <<EOF
images = any
EOF
start_agent pinner 1 --policy "$T/any.policy"
wait_node_up pinner
GPUPOOL_AGENT_SOCKET="$T/agents/pinner/agent.sock" cli provider pause
[ "$CLI_RC" = 0 ] || fail "provider pause: $CLI_ERR"
GPUPOOL_TOKEN=$ALICE submit --image busybox:oci -- /bin/true
PINNED=$JOB
[ "$(job_get "$PINNED" 'd["image"]')" = "busybox:oci@$OCI_DIGEST" ] ||
    fail "job not pinned: $(job_get "$PINNED" d)"
GPUPOOL_TOKEN=$ALICE submit --image "$OCI_DIGEST"
[ "$(job_get "$JOB" 'd["image"]')" = "$OCI_DIGEST" ] || fail "pin by digest"
[ "$(job_get "$JOB" 'd["name"]')" = image ] || fail "default name of a digest job"
NAMED=$JOB
as_user "$ALICE" cli submit --image nosuch:1 -- /bin/true
[ "$CLI_RC" = 1 ] || fail "submit of an unknown image"
assert_contains "$CLI_ERR" "no image named nosuch:1" "unknown image"
# Re-import under the name (admin may re-point anything), then remove it.
cli image import "$IMG/other.tar"
[ "$CLI_RC" = 0 ] || fail "admin re-point: $CLI_ERR"
assert_contains "$CLI_OUT" "the name pointed at $OCI_DIGEST" "re-point note"
[ "$(job_get "$PINNED" 'd["image"]')" = "busybox:oci@$OCI_DIGEST" ] ||
    fail "re-import moved the queued job"
# (A name stays its importer's when an admin re-points it.)
as_user "$BOB" cli image rm busybox:oci
[ "$CLI_RC" = 1 ] || fail "bob removed alice's re-pointed name"
as_user "$ALICE" cli image rm busybox:oci
[ "$CLI_RC" = 0 ] || fail "alice rm of her re-pointed name: $CLI_ERR"
cli image import "$IMG/other.tar"
[ "$CLI_RC" = 0 ] || fail "admin import: $CLI_ERR"
cli image rm busybox:docker
[ "$CLI_RC" = 0 ] || fail "admin rm of alice's image: $CLI_ERR"
[ "$CLI_RC" = 0 ] || fail "alice rm her own image: $CLI_ERR"
assert_contains "$CLI_OUT" "removed busybox:docker" "rm output"
# GC: the unnamed docker image goes; the pinned one stays while jobs wait.
deadline=$((SECONDS + WAIT_S))
while [ -e "$(blob_file "$DOCKER_DIGEST")" ]; do
	[ $SECONDS -ge $deadline ] && fail "GC left the docker image's blobs"
	sleep 0.2
done
sleep 1
[ -e "$(blob_file "$OCI_DIGEST")" ] && [ -e "$(blob_file "$L0")" ] ||
    fail "GC removed the blobs of an image queued jobs are pinned to"
api_expect 200 "$ALICE" GET "/v1/images?ref=$OCI_DIGEST"
[ "$(job_state "$PINNED")" = queued ] || fail "pinned job not queued"
# Once nothing pins it: gone.
cli cancel "$PINNED"
cli cancel "$NAMED"
deadline=$((SECONDS + WAIT_S))
while [ -e "$(blob_file "$OCI_DIGEST")" ] || [ -e "$(blob_file "$L0")" ]; do
	[ $SECONDS -ge $deadline ] && fail "GC kept an image nothing names or pins"
	sleep 0.2
done
[ -e "$(blob_file "$OTHER_DIGEST")" ] || fail "GC removed a named image"
api "$ALICE" GET "/v1/images?ref=$OCI_DIGEST"
[ "$API_STATUS" = 404 ] || fail "dropped image still listed: $API_BODY"
log "image store: imports, ownership, refusals, pinning and GC ok"
