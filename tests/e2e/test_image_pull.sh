#!/usr/bin/env bash
# test_image_pull.sh: `gpupool image pull` against a real registry:
# Debian's docker-registry, started here on 127.0.0.1 with TLS and token
# authentication (a token service run by images.py issues RS256 tokens,
# signed by a key whose certificate the registry trusts; both made here
# with openssl). The test image is pushed with the distribution API. A tag
# is resolved and pinned to its manifest digest (printed); a
# multi-platform index gives its linux/amd64 image; a pull by digest works;
# a second pull sends nothing to the coordinator; wrong credentials, a
# blob changed in the registry's storage, and a lying registry (endless
# blob, short blob, wrong bytes, manifest that does not hash to its
# digest, oversized manifest) are each refused with a clear error and
# name no image.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

command -v docker-registry >/dev/null || fail "no docker-registry (scripts/install-deps.sh installs it)"
start_coordinator
mk_token user alice
ALICE=$TOKEN
export GPUPOOL_TOKEN=$ALICE

# ---- certificates: TLS for 127.0.0.1, and the token signer
PKI="$T/pki"
mkdir -p "$PKI"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$PKI/tls.key" \
    -out "$PKI/tls.crt" 2>"$PKI/openssl.log" || fail "openssl: $(cat "$PKI/openssl.log")"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=token-signer \
    -keyout "$PKI/signer.key" -out "$PKI/signer.crt" 2>>"$PKI/openssl.log" ||
    fail "openssl: $(cat "$PKI/openssl.log")"

# ---- the token service and the registry
TPORT=$(free_port)
spawn "$T/token.log" "$PY" "$IMG_PY" token-server "$TPORT" "$PKI/tls.crt" \
    "$PKI/tls.key" "$PKI/signer.crt" "$PKI/signer.key" tester s3cret
RPORT=$(free_port)
cat >"$T/registry.yml" <<EOF
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $T/registry-data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$RPORT
  tls:
    certificate: $PKI/tls.crt
    key: $PKI/tls.key
auth:
  token:
    realm: https://127.0.0.1:$TPORT/token
    service: gpupool-test-registry
    issuer: gpupool-test-issuer
    rootcertbundle: $PKI/signer.crt
EOF
spawn "$T/registry.log" docker-registry serve "$T/registry.yml"
deadline=$((SECONDS + WAIT_S))
until curl -s --cacert "$PKI/tls.crt" -o /dev/null "https://127.0.0.1:$RPORT/v2/" &&
    grep -q "token server listening" "$T/token.log"; do
	[ $SECONDS -ge $deadline ] && fail "registry or token service not up"
	sleep 0.2
done
# Unauthenticated: the registry asks for a Bearer token.
code=$(curl -s --cacert "$PKI/tls.crt" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$RPORT/v2/")
[ "$code" = 401 ] || fail "the registry does not ask for a token (HTTP $code)"

# ---- push the test image, plain and as an index
image_layer l1 --marker pulled-one
image_layer l2 --marker pulled-two
image_oci img test/busybox:latest "$IMG/l1.tgz" "$IMG/l2.tgz"
push() { # TAG [--index]
	"$PY" "$IMG_PY" push "https://127.0.0.1:$RPORT" "$PKI/tls.crt" test/busybox \
	    "$1" "$IMG/img.tar" "https://127.0.0.1:$TPORT/token" tester s3cret \
	    ${2:-} 2>"$T/push.err" || fail "push $1: $(tail -5 "$T/push.err")"
}
PUSHED=$(push latest)
[ "$PUSHED" = "$DIGEST" ] || fail "pushed $PUSHED, built $DIGEST"
PUSHED_AMD64=$(push multi --index)
REG="127.0.0.1:$RPORT/test/busybox"
export GPUPOOL_REGISTRY_PASSWORD=s3cret

# ---- pull by tag: pinned to the digest
cli image pull "$REG:latest" --registry-ca "$PKI/tls.crt" --username tester
[ "$CLI_RC" = 0 ] || fail "pull: $CLI_ERR"
assert_contains "$CLI_OUT" "pulled $REG:latest@$DIGEST: 2 layers, 4 blobs sent" "pull summary"
api "$ALICE" GET "/v1/images?ref=$REG:latest"
[ "$(printf '%s' "$API_BODY" | json 'd["images"][0]["digest"]')" = "$DIGEST" ] ||
    fail "the store's digest: $API_BODY"
# Again: nothing sent.
cli image pull "$REG:latest" --registry-ca "$PKI/tls.crt" --username tester
[ "$CLI_RC" = 0 ] || fail "second pull: $CLI_ERR"
assert_contains "$CLI_OUT" "0 blobs sent (0B), 2 already stored" "second pull"
# An index: its linux/amd64 image.
cli image pull "$REG:multi" --registry-ca "$PKI/tls.crt" --username tester
[ "$CLI_RC" = 0 ] || fail "pull of an index: $CLI_ERR"
assert_contains "$CLI_OUT" "pulled $REG:multi@$PUSHED_AMD64:" "index pull picks amd64"
# By digest, under a name of our own.
cli image pull "$REG@$DIGEST" --registry-ca "$PKI/tls.crt" --username tester --name mine:pinned
[ "$CLI_RC" = 0 ] || fail "pull by digest: $CLI_ERR"
assert_contains "$CLI_OUT" "pulled mine:pinned@$DIGEST" "pull by digest"
cli image pull "$REG@$DIGEST" --registry-ca "$PKI/tls.crt" --username tester
assert_contains "$CLI_OUT" "pulled $REG:sha256-${DIGEST:7:12}@$DIGEST" "default name of a digest pull"

# ---- refusals: nothing named after any of them
refused() { # WHAT EXPECTED NAME PULL-ARGS...
	local what=$1 want=$2 name=$3
	shift 3
	cli image pull "$@" --name "$name"
	[ "$CLI_RC" = 1 ] || fail "$what: pull exited $CLI_RC: $CLI_OUT $CLI_ERR"
	assert_contains "$CLI_ERR" "$want" "$what"
	api "$ALICE" GET "/v1/images?ref=$name"
	[ "$API_STATUS" = 404 ] || fail "$what named an image"
}
GPUPOOL_REGISTRY_PASSWORD=wrong refused "wrong password" "refused the credentials" \
    bad:pw "$REG:latest" --registry-ca "$PKI/tls.crt" --username tester
unset GPUPOOL_REGISTRY_PASSWORD
refused "no credentials" "give --username" bad:anon "$REG:latest" \
    --registry-ca "$PKI/tls.crt"
export GPUPOOL_REGISTRY_PASSWORD=s3cret
refused "unknown tag" "MANIFEST_UNKNOWN" bad:tag "$REG:nosuch" \
    --registry-ca "$PKI/tls.crt" --username tester
refused "unknown CA" "SSL" bad:ca "$REG:latest" --username tester
# A blob changed in the registry's own storage (a fresh image, so the
# coordinator does not have it already).
image_layer l3 --marker changed-in-storage
image_oci img3 test/busybox:three "$IMG/l3.tgz"
"$PY" "$IMG_PY" push "https://127.0.0.1:$RPORT" "$PKI/tls.crt" test/busybox \
    three "$IMG/img3.tar" "https://127.0.0.1:$TPORT/token" tester s3cret \
    >/dev/null 2>"$T/push.err" || fail "push three: $(tail -5 "$T/push.err")"
L3=$(tar -xOf "$IMG/img3.tar" "blobs/sha256/${DIGEST:7}" | json 'd["layers"][0]["digest"]')
DATA="$T/registry-data/docker/registry/v2/blobs/sha256/${L3:7:2}/${L3:7}/data"
[ -f "$DATA" ] || fail "no $DATA"
"$PY" - "$DATA" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0xff
open(p, "wb").write(b)
EOF
refused "tampered registry blob" "the registry sent content that hashes to" bad:tampered "$REG:three" \
    --registry-ca "$PKI/tls.crt" --username tester

# ---- a lying registry (no authentication)
unset GPUPOOL_REGISTRY_PASSWORD
lying() { # MODE EXPECTED
	local port
	port=$(free_port)
	spawn "$T/fake-$1.log" "$PY" "$IMG_PY" fake-registry "$port" "$1" "$IMG/img3.tar"
	local pid=$SPAWNED_PID deadline=$((SECONDS + WAIT_S))
	until grep -q "fake registry listening" "$T/fake-$1.log"; do
		[ $SECONDS -ge $deadline ] && fail "fake registry $1 not up"
		sleep 0.1
	done
	refused "lying registry ($1)" "$2" "bad:$1" "127.0.0.1:$port/test/busybox:three" \
	    --plain-http
	kill "$pid"
}
lying endless-blob "more than the"
lying short-blob "the manifest declares"
lying wrong-blob "the registry sent content that hashes to"
lying big-manifest "larger than"
# A pull by digest of a manifest that does not hash to it.
port=$(free_port)
spawn "$T/fake-digest.log" "$PY" "$IMG_PY" fake-registry "$port" manifest-digest "$IMG/img3.tar"
deadline=$((SECONDS + WAIT_S))
until grep -q "fake registry listening" "$T/fake-digest.log"; do
	[ $SECONDS -ge $deadline ] && fail "fake registry not up"
	sleep 0.1
done
refused "manifest digest" "lies about its content" bad:digest \
    "127.0.0.1:$port/test/busybox@$DIGEST" --plain-http
log "registry pull: tags pinned, index, digest, refusals ok"
