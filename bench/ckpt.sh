#!/usr/bin/env bash
# bench/ckpt.sh: the checkpoint transfer benchmark alone (issue 3), repeated.
# Each run starts a coordinator on loopback with a fresh data directory and
# runs `bench_ckpt bench` against it (1 GiB up, down, then a 10 % delta;
# see bench/bench_ckpt.c), with the coordinator's CPU per phase. Prints
# every run's "metric value unit" lines prefixed by run_N_, the load average
# before each run, then the median of each metric over the runs.
#
# Usage: BUILD=build bench/ckpt.sh (BUILD may be absolute: an old build to
# compare with)   Knobs: CKPT_RUNS (default 3), CKPT_MIB
# (default 1024), CKPT_PARALLEL (default 4), CKPT_DIR (where data and
# checkpoints go, default a new directory in /var/tmp: a disk, like a
# coordinator's data directory; not /tmp, which may be a tmpfs).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac # absolute: another tree's build
BIN="$BUILD/gpupool"
RUNS=${CKPT_RUNS:-3}
WORK=$(mktemp -d "${CKPT_DIR:-/var/tmp}/gpupool-ckpt-bench.XXXXXX")
COORD_PID=
ALL="$WORK/all.txt"

cleanup() {
	if [ -n "$COORD_PID" ]; then
		kill "$COORD_PID" 2>/dev/null
		wait "$COORD_PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "machine_cpus $(nproc) cpus"
echo "machine_kernel $(uname -r) version"
: >"$ALL"
status=0
for run in $(seq "$RUNS"); do
	data="$WORK/data-$run"
	# a port nobody listens on (other benches and tests run beside)
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) ||
		port=$((20000 + ($$ + run) % 20000))
	# --conn-memory 256K: the setting issue 3 measured with, as bench/run.sh
	# (the coordinator's default, 12K, fits 10,000 agents)
	"$BIN" coordinator --listen "127.0.0.1:$port" --data "$data" \
		--conn-memory "${CKPT_CONN_MEMORY:-256K}" -q \
		>"$WORK/coord-$run.log" 2>&1 &
	COORD_PID=$!
	for _ in $(seq 300); do
		[ -s "$data/admin.token" ] && break
		sleep 0.1
	done
	if [ ! -s "$data/admin.token" ]; then
		echo "bench: the coordinator did not start:" >&2
		tail -n 20 "$WORK/coord-$run.log" >&2
		exit 1
	fi
	echo "run_${run}_load_before $(cut -d' ' -f1 /proc/loadavg) load"
	timeout 300 "$BUILD/bench/bench_ckpt" bench \
		--url "http://127.0.0.1:$port" \
		--admin-token-file "$data/admin.token" \
		--work "$WORK/work-$run" --size-mib "${CKPT_MIB:-1024}" \
		--parallel "${CKPT_PARALLEL:-4}" --coord-pid "$COORD_PID" \
		2>"$WORK/bench-$run.err" >"$WORK/bench-$run.txt" || {
		status=1
		tail -n 5 "$WORK/bench-$run.err" >&2
	}
	echo "run_${run}_load_after $(cut -d' ' -f1 /proc/loadavg) load"
	sed "s/^/run_${run}_/" "$WORK/bench-$run.txt"
	cat "$WORK/bench-$run.txt" >>"$ALL"
	kill "$COORD_PID" 2>/dev/null
	wait "$COORD_PID" 2>/dev/null
	COORD_PID=
	rm -rf "$data" "$WORK/work-$run"
done
# Medians (the lower middle value for an even count).
awk '{ v[$1] = v[$1] " " $2; u[$1] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
END {
	for (i = 1; i <= n; i++) {
		k = order[i]
		m = split(substr(v[k], 2), a, " ")
		for (x = 1; x <= m; x++)
			for (y = x + 1; y <= m; y++)
				if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
		print k "_median " a[int((m + 1) / 2)] " " u[k]
	}
}' "$ALL"
exit $status
