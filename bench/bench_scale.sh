#!/usr/bin/env bash
# bench/bench_scale.sh: the coordinator with 10,000 simulated agents
# (issue 6). Starts a coordinator on loopback with a fresh data directory
# and the open-file limits raised as far as this user may, then runs
# bench_agents against it: registration of every node, a steady stream of
# submissions (dispatch latency, heartbeat round trips, the coordinator's
# CPU and memory), then a backlog of jobs placed at once. Prints "metric
# value unit" lines, the load average before and after, and the machine.
#
# Usage: BUILD=build bench/bench_scale.sh [bench_agents options]
# Defaults: --agents 10000 --gpus-per-node 8 --rate 100 --seconds 30
#           --backlog 100000 --hold-ms 1000 (each job "runs" 1 s: the
#           backlog beyond the pool's GPUs is placed as jobs end), and
#           bench_agents' own: 4 worker threads, reports batched. COORD_ARGS adds coordinator options
#           (e.g. COORD_ARGS="--conn-memory 16K"; finished jobs leaving
#           memory: COORD_ARGS="--min-job-age 10" against "--min-job-age
#           0" with --seconds 120 --backlog 0, steady_coord_rss_start and
#           steady_coord_rss the RSS at the steady phase's start and end,
#           coord_jobs_in_memory and coord_jobs_purged at the end). PERF=1 records the
# coordinator with `perf record -g` during the run (perf.data in
# $PERF_OUT, default ./perf-coord.data). COORD_LOG=FILE keeps the
# coordinator's log (warnings, e.g. slow state batches) there.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
PORT=${PORT:-$((20000 + $$ % 20000))}
URL="http://127.0.0.1:$PORT"
DATA=$(mktemp -d /tmp/gpupool-scale.XXXXXX)
COORD_PID=
PERF_PID=

cleanup() {
	[ -n "$PERF_PID" ] && kill -INT "$PERF_PID" 2>/dev/null &&
		wait "$PERF_PID" 2>/dev/null
	if [ -n "$COORD_PID" ]; then
		kill "$COORD_PID" 2>/dev/null
		wait "$COORD_PID" 2>/dev/null
	fi
	[ -n "${COORD_LOG:-}" ] && cp "$DATA/coord.log" "$COORD_LOG"
	rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ARGS=("$@")
has() { local a; for a in "${ARGS[@]}"; do [ "$a" = "$1" ] && return 0; done
	return 1; }
has --agents || ARGS+=(--agents 10000)
has --rate || ARGS+=(--rate 100)
has --seconds || ARGS+=(--seconds 30)
has --backlog || ARGS+=(--backlog 100000)
has --hold-ms || ARGS+=(--hold-ms 1000)

# Open files: two connections per agent on each side. Root may raise the
# hard limit up to fs.nr_open; others get their hard limit.
ulimit -Hn "$(cat /proc/sys/fs/nr_open)" 2>/dev/null
ulimit -n "$(ulimit -Hn)"
echo "machine_cpus $(nproc) cpus"
echo "machine_cpu_model $(awk -F': ' '/^model name/ {print $2; exit}' \
	/proc/cpuinfo | tr ' ' '_') name"
echo "machine_kernel $(uname -r) version"
echo "nofile_limit $(ulimit -n) fds"
echo "load_start $(cut -d' ' -f1 /proc/loadavg) loadavg"

# shellcheck disable=SC2086
"$BIN" coordinator --listen "127.0.0.1:$PORT" --data "$DATA/coord" -q \
	${COORD_ARGS:-} >"$DATA/coord.log" 2>&1 &
COORD_PID=$!
for _ in $(seq 100); do
	[ -s "$DATA/coord/admin.token" ] && break
	sleep 0.1
done
if [ ! -s "$DATA/coord/admin.token" ]; then
	echo "bench_scale: the coordinator did not start:" >&2
	tail -n 20 "$DATA/coord.log" >&2
	exit 1
fi
echo "coord_rss_idle $(awk '/^VmRSS:/ {print $2}' /proc/$COORD_PID/status) KiB"
if [ "${PERF:-0}" = 1 ]; then
	perf record -q -g -p "$COORD_PID" -o "${PERF_OUT:-perf-coord.data}" \
		>/dev/null 2>&1 &
	PERF_PID=$!
fi
status=0
"$BUILD/bench/bench_agents" --url "$URL" --token \
	"$(cat "$DATA/coord/admin.token")" --coord-pid "$COORD_PID" \
	"${ARGS[@]}" || status=1
echo "load_end $(cut -d' ' -f1 /proc/loadavg) loadavg"
if ! kill -0 "$COORD_PID" 2>/dev/null; then
	echo "bench_scale: the coordinator died:" >&2
	tail -n 20 "$DATA/coord.log" >&2
	status=1
fi
grep -c 'lease expired' "$DATA/coord.log" | sed 's/^/coord_leases_expired /; s/$/ count/'
# The coordinator's own view of dispatch (placement to the poll's answer),
# from its histogram: the bucket bound under which 50 and 99 % fall.
curl -s -H "Authorization: Bearer $(cat "$DATA/coord/admin.token")" \
	"$URL/metrics" 2>/dev/null | awk '
	/^gpupool_job_dispatch_latency_seconds_bucket/ {
		match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
		n++; bound[n] = le; cum[n] = $NF }
	/^gpupool_job_dispatch_latency_seconds_count/ { total = $NF }
	/^gpupool_jobs_in_memory / { printf "coord_jobs_in_memory %d jobs\n", $NF }
	/^gpupool_jobs_purged_total / { printf "coord_jobs_purged %d jobs\n", $NF }
	END { if (total > 0) for (q = 50; q <= 99; q += 49) {
		for (i = 1; i <= n; i++) if (cum[i] >= total * q / 100) break
		printf "coord_dispatch_latency_p%d_le %s s\n", q, bound[i] }
		printf "coord_dispatch_count %d jobs\n", total }'
exit $status
