#!/usr/bin/env bash
# bench/bench_data.sh: data sets and job outputs end to end on one machine:
# a coordinator and one real agent (as root: jobs run as nobody). Measures
# `gpupool data put` of DATA_MIB MiB in 64 files (default 1024), the first
# job that mounts it (the agent fetches every chunk), a second job on the
# same provider (cached: no transfer), a new version with 10% of its bytes
# changed (upload and mount: only the changed chunks move), and a job that
# writes OUTPUT_MIB MiB (default 256) to $GPUPOOL_OUTPUT_DIR (collection
# at its end) and `gpupool fetch` of it. Prints "metric value unit" lines
# and the load average. Usage: BUILD=build bench/bench_data.sh
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
PORT=${PORT:-$((20000 + $$ % 20000))}
URL="http://127.0.0.1:$PORT"
MIB=${DATA_MIB:-1024}
OUT_MIB=${OUTPUT_MIB:-256}
PIDS=()

[ "$(id -u)" = 0 ] || { echo "bench_data: run as root" >&2; exit 1; }
[ -d /mnt ] || { echo "bench_data: mounts at /mnt, which is missing" >&2; exit 1; }
. bench/lib.sh
# Not under /tmp (the agent refuses it), wherever the checkout is;
# nobody must reach the work dir (mktemp makes it 0700).
DATA=$(agent_work_dir gpupool-bench-data) || exit 1
cleanup() {
	stop_pids "${PIDS[@]}"
	rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DATA/src" "$DATA/home"
chmod 755 "$DATA"
export HOME="$DATA/home" XDG_CONFIG_HOME="$DATA/home"
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
metric() { printf '%s %s %s\n' "$1" "$2" "$3"; }
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

COORD_URL=$URL
start_coordinator "$DATA/coord" "$DATA/coord.log"
USER_TOKEN=$(api POST /v1/tokens '{"role":"user","name":"bench"}' | field token)
PROVIDER=$(api POST /v1/tokens '{"role":"provider","name":"bench-data"}' | field token)
"$BIN" agent --coordinator "$URL" --token "$PROVIDER" --name bench-data \
	--fake-gpus 1 --work "$DATA/work" --run-as nobody \
	>"$DATA/agent.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do
	api GET /v1/nodes 2>/dev/null | grep -q '"state": *"up"' && break
	sleep 0.1
done
export GPUPOOL_URL=$URL GPUPOOL_TOKEN=$USER_TOKEN

# The data set: 64 files of MIB/64 MiB each, random.
per=$((MIB / 64))
for i in $(seq -w 1 64); do
	head -c $((per << 20)) /dev/urandom >"$DATA/src/part-$i.bin"
done
sync
metric load_avg_1m "$(cut -d' ' -f1 /proc/loadavg)" load
t0=$(now)
"$BIN" data put bench "$DATA/src" --json >"$DATA/put1.json" || exit 1
t1=$(now)
metric data_put_mib "$MIB" MiB
metric data_put_s "$(secs "$t0" "$t1" | xargs printf '%.2f')" s
metric data_put_rate "$(echo "$MIB / $(secs "$t0" "$t1")" | bc -l | xargs printf '%.0f')" MiB/s

# run_job N: a job that mounts the data set and reads one file; prints
# the agent's "data set ready" figures for it.
run_job() {
	local id line
	id=$("$BIN" submit --gpus 1 --data bench:/mnt -- sh -c 'head -c 1 /mnt/part-01.bin >/dev/null') || exit 1
	"$BIN" wait "$id" >/dev/null 2>&1 || { echo "bench_data: job $id failed" >&2; exit 1; }
	line=$(grep "data set ready job=$id " "$DATA/agent.log")
	READY_MS=$(printf '%s' "$line" | sed -n 's/.* ms=\([0-9]*\).*/\1/p')
	FETCHED=$(printf '%s' "$line" | sed -n 's/.* fetched=\([0-9]*\).*/\1/p')
}
run_job
metric mount_first_ms "$READY_MS" ms
metric mount_first_fetched "$((FETCHED >> 20))" MiB
metric mount_first_rate "$(echo "$MIB * 1000 / ($READY_MS + 1)" | bc -l | xargs printf '%.0f')" MiB/s
run_job
metric mount_cached_ms "$READY_MS" ms
metric mount_cached_fetched "$FETCHED" bytes

# 10% of the bytes change: every tenth file rewritten.
for i in $(seq -w 1 64); do
	[ $((10#$i % 10)) = 0 ] && head -c $((per << 20)) /dev/urandom >"$DATA/src/part-$i.bin"
done
t0=$(now)
"$BIN" data put bench "$DATA/src" --json >"$DATA/put2.json" || exit 1
t1=$(now)
metric delta_put_s "$(secs "$t0" "$t1" | xargs printf '%.2f')" s
metric delta_put_sent "$(( $(field bytes_sent <"$DATA/put2.json") >> 20))" MiB
run_job
metric mount_delta_ms "$READY_MS" ms
metric mount_delta_fetched "$((FETCHED >> 20))" MiB

# Output: the job writes OUT_MIB MiB; collected when it ends, then fetched.
id=$("$BIN" submit --gpus 1 -- sh -c "head -c $((OUT_MIB << 20)) /dev/urandom >\$GPUPOOL_OUTPUT_DIR/out.bin") || exit 1
"$BIN" wait "$id" >/dev/null 2>&1 || { echo "bench_data: output job failed" >&2; exit 1; }
OUT_MS=$(grep "job output stored job=$id " "$DATA/agent.log" | sed -n 's/.* ms=\([0-9]*\).*/\1/p')
metric output_collect_ms "${OUT_MS:-0}" ms
t0=$(now)
"$BIN" fetch "$id" "$DATA/fetched" 2>/dev/null || exit 1
t1=$(now)
metric output_fetch_s "$(secs "$t0" "$t1" | xargs printf '%.2f')" s
metric output_fetch_rate "$(echo "$OUT_MIB / $(secs "$t0" "$t1")" | bc -l | xargs printf '%.0f')" MiB/s
metric load_avg_1m_end "$(cut -d' ' -f1 /proc/loadavg)" load
