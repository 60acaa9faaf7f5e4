#!/usr/bin/env bash
# bench/bench_image.sh: the image path's figures on this machine, printed
# as "metric value unit" lines: `image import` of an image with one
# LAYER_MIB MiB layer (random, uncompressed tar; default 256) into a fresh
# coordinator, the same import again (nothing to send), and the agent's
# preparation of that image for a job: cold (fetch from the coordinator,
# verify the digest, unpack) and warm (a cache hit). Everything runs on
# 127.0.0.1 in a fresh directory under /var/tmp. Usage (as root, from the
# source tree, after `make`): BUILD=build bench/bench_image.sh
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
PY=python3
MIB=${LAYER_MIB:-256}
D=$(mktemp -d /var/tmp/gpupool-bench-image.XXXXXX)
chmod 755 "$D"
PIDS=()
cleanup() {
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ms() { date +%s%3N; }
die() { echo "bench_image: $*" >&2; exit 1; }

echo "load_before $(cut -d' ' -f1 /proc/loadavg) loadavg"
"$PY" tests/e2e/images.py layer "$D/l.tar" --plain --random-mib "$MIB" &&
    "$PY" tests/e2e/images.py oci "$D/img.tar" --name bench:1 "$D/l.tar" \
    >/dev/null || die "cannot build the image"
PORT=$(( 30000 + $$ % 20000 ))
export GPUPOOL_URL="http://127.0.0.1:$PORT"
"$BIN" coordinator --listen "127.0.0.1:$PORT" --data "$D/coord" \
    >"$D/coord.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$D/coord/admin.token" ] && break; sleep 0.1; done
export GPUPOOL_TOKEN=$(cat "$D/coord/admin.token")
"$BIN" token create --role provider --name bench >"$D/prov.token" ||
    die "token create"
printf 'images = any\n' >"$D/policy"
"$BIN" agent --coordinator "$GPUPOOL_URL" --token-file "$D/prov.token" \
    --name bench --work "$D/agent" --fake-gpus 1 --policy "$D/policy" \
    >"$D/agent.log" 2>&1 &
PIDS+=($!)

t0=$(ms)
"$BIN" image import "$D/img.tar" >"$D/import.out" || die "import failed"
t1=$(ms)
"$BIN" image import "$D/img.tar" >/dev/null || die "second import failed"
t2=$(ms)
echo "image_import_ms $((t1 - t0)) ms"
echo "image_import_mib_per_s $(awk -v m="$MIB" -v t=$((t1 - t0)) 'BEGIN {printf "%.1f", m * 1000 / (t > 0 ? t : 1)}') MiB/s"
echo "image_reimport_ms $((t2 - t1)) ms"

prepare() { # -> the agent's "ms=" for a new job
	local id n
	id=$("$BIN" submit --image bench:1 -- /bin/true) || die "submit"
	for n in $(seq 600); do
		grep -q "image ready job=$id " "$D/agent.log" && break
		grep -q "image refused job=$id " "$D/agent.log" &&
		    die "refused: $(grep "image refused job=$id " "$D/agent.log")"
		sleep 0.1
	done
	grep "image ready job=$id " "$D/agent.log" | sed -n 's/.* ms=\([0-9]*\) .*/\1/p'
}
cold=$(prepare)
[ -n "$cold" ] || die "no image ready line"
warm=$(prepare)
echo "image_prepare_cold_ms $cold ms"
echo "image_prepare_cold_mib_per_s $(awk -v m="$MIB" -v t="$cold" 'BEGIN {printf "%.1f", m * 1000 / (t > 0 ? t : 1)}') MiB/s"
echo "image_prepare_warm_ms $warm ms"
echo "load_after $(cut -d' ' -f1 /proc/loadavg) loadavg"
