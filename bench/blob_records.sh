#!/usr/bin/env bash
# bench/blob_records.sh: the blob users' records (issue 19) side by side in
# one run: checkpoint upload (bench_ckpt bench: CKPT_MIB MiB up, 4 streams,
# each chunk PUT and the commit through the records' store) and the
# listings (GET /v1/data?all=1 over DATA_SETS data sets, GET /v1/images
# over IMAGES names, each asked LIST_CALLS times: median and p90), for each
# configuration of CONFIGS, in that order:
#   old         OLD_BUILD's coordinator (an absolute build dir: e.g. main's)
#               on SQLite, its own checkpoints.db and images.db
#   sqlite      this build on SQLite (the same files, tables gp_*)
#   postgresql  this build on PostgreSQL (a server of the run's own,
#               tests/e2e/pg_lib.sh), the records in the pool's database
# Every coordinator gets a fresh data directory under /var/tmp (a disk).
# Prints "CONFIG_RUN_metric value unit" lines and the load before each run.
# Usage: BUILD=build OLD_BUILD=/work/main/build bench/blob_records.sh
# Knobs: CONFIGS (default "old sqlite postgresql old sqlite postgresql"),
# CKPT_MIB (256), DATA_SETS (200), IMAGES (200), LIST_CALLS (30).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
OLD_BUILD=${OLD_BUILD:-}
export GPUPOOL_BIN="$BUILD/gpupool"
export E2E_WAIT_S=${E2E_WAIT_S:-60}
export E2E_TMPDIR=${E2E_TMPDIR:-/var/tmp}
. tests/e2e/lib.sh
. tests/e2e/pg_lib.sh

echo "machine_cpus $(nproc) cpus"
echo "machine_cpu_model $(awk -F': ' '/^model name/ {print $2; exit}' \
	/proc/cpuinfo | tr ' ' '_') name"
echo "postgresql_version $("$PG_BIN/postgres" --version | awk '{print $3}') version"

CONFIGS=${CONFIGS:-old sqlite postgresql old sqlite postgresql}
case " $CONFIGS " in *" old "*)
	[ -x "$OLD_BUILD/gpupool" ] || { echo "blob_records: OLD_BUILD=$OLD_BUILD has no gpupool" >&2; exit 1; } ;;
esac
case " $CONFIGS " in *" postgresql "*) pg_start ;; esac

# The image every name points at (busybox-static's, tests/e2e/images.py).
mkdir -p "$T/img"
"$PY" tests/e2e/images.py layer "$T/img/l1.tgz" --marker one >/dev/null || exit 1
"$PY" tests/e2e/images.py oci "$T/img/oci.tar" --name bench:one "$T/img/l1.tgz" >"$T/img/digest" || exit 1
mkdir -p "$T/ds"
printf 'a small data set\n' >"$T/ds/a.txt"

# lat NAME PATH: LIST_CALLS GETs of PATH; prints NAME_median and NAME_p90.
lat() {
	"$PY" - "$1" "127.0.0.1" "$COORD_PORT" "$2" "$ADMIN_TOKEN" "${LIST_CALLS:-30}" <<'EOF'
import http.client, sys, time
name, host, port, path, tok, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
c = http.client.HTTPConnection(host, port, timeout=60)
ms, size = [], 0
for _ in range(n):
    t = time.perf_counter()
    c.request("GET", path, headers={"Authorization": "Bearer " + tok})
    r = c.getresponse()
    body = r.read()
    ms.append((time.perf_counter() - t) * 1000)
    if r.status != 200:
        sys.exit("%s: HTTP %d %s" % (path, r.status, body[:200]))
    size = len(body)
ms.sort()
print("%s_median %.2f ms" % (name, ms[len(ms) // 2]))
print("%s_p90 %.2f ms" % (name, ms[int(len(ms) * 0.9) - 1]))
print("%s_bytes %d bytes" % (name, size))
EOF
}

run=0
for config in $CONFIGS; do
	run=$((run + 1))
	p="${config}_$run"
	bin="$BUILD"
	[ "$config" = old ] && bin="$OLD_BUILD"
	COORD_DATA="$T/coord-$run"
	COORD_LOG="$T/coord-$run.log"
	COORD_PORT=$(free_port)
	mkdir -p "$COORD_DATA"
	db=()
	if [ "$config" = postgresql ]; then
		pg_createdb "bench$run"
		db=(--db "$(pg_url "bench$run")")
	fi
	echo "${p}_load_before $(cut -d' ' -f1 /proc/loadavg) load"
	spawn "$COORD_LOG" "$bin/gpupool" coordinator --listen "127.0.0.1:$COORD_PORT" \
	    --data "$COORD_DATA" --conn-memory 256K "${db[@]+"${db[@]}"}" -q
	COORD_PID=$SPAWNED_PID
	wait_ready
	export GPUPOOL_URL="http://127.0.0.1:$COORD_PORT" GPUPOOL_TOKEN=$ADMIN_TOKEN
	timeout 300 "$bin/bench/bench_ckpt" bench --url "$GPUPOOL_URL" \
	    --admin-token-file "$COORD_DATA/admin.token" --work "$T/work-$run" \
	    --size-mib "${CKPT_MIB:-256}" --parallel 4 --coord-pid "$COORD_PID" \
	    2>"$T/bench-$run.err" | grep -E '^ckpt_(upload|download)_full ' | sed "s/^/${p}_/"
	rm -rf "$T/work-$run"
	# The records to list.
	t0=$(date +%s%N)
	for i in $(seq "${DATA_SETS:-200}"); do
		"$bin/gpupool" data put "ds$i" "$T/ds" >/dev/null 2>>"$T/put.err" || { echo "data put failed" >&2; break; }
	done
	echo "${p}_data_put_each $(( ($(date +%s%N) - t0) / 1000 / ${DATA_SETS:-200} )) us"
	"$bin/gpupool" image import "$T/img/oci.tar" >/dev/null 2>>"$T/put.err" || echo "image import failed" >&2
	digest=$(cat "$T/img/digest")
	"$PY" - "$COORD_PORT" "$ADMIN_TOKEN" "$digest" "${IMAGES:-200}" <<'EOF'
import http.client, json, sys
port, tok, digest, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for i in range(1, n):
    c.request("POST", "/v1/images", body=json.dumps({"name": "bench/img-%d" % i, "digest": digest}),
              headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status not in (200, 201):
        sys.exit("POST /v1/images: HTTP %d" % r.status)
EOF
	lat "${p}_data_list" "/v1/data?all=1"
	lat "${p}_image_list" "/v1/images"
	kill "$COORD_PID" 2>/dev/null
	wait_exit "$COORD_PID"
done
