#!/usr/bin/env bash
# bench/pg_store.sh: the coordinator's two stores side by side in one run
# (issue 19): SQLite (DATA/state.db, the default) against PostgreSQL 15
# (a server of the run's own, started by tests/e2e/pg_lib.sh as nobody in
# a scratch directory, fsync on, on loopback TCP). For each store, in the
# order of STORES (default "sqlite postgresql sqlite postgresql": A B A
# B), a fresh coordinator (and for PostgreSQL a fresh database):
# bench_dispatch (DISPATCH_AGENTS agents, default 100, at DISPATCH_RATE
# jobs/s for DISPATCH_SECONDS s: dispatch latency), then bench_submit
# (16 clients for SUBMIT_SECONDS s, durable submissions per second through
# the API: each one is answered only after its batch committed). Prints
# "STORE metric value unit" lines, the load average before and after each
# run, and the machine. SCALE=1 then runs bench/bench_scale.sh (10,000
# simulated agents) on SQLite, then on PostgreSQL, SCALE_ARGS passed to it.
#
# Usage: BUILD=build bench/pg_store.sh
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export GPUPOOL_BIN="$PWD/$BUILD/gpupool"
export E2E_WAIT_S=${E2E_WAIT_S:-60}
# The tests' harness: a private directory, the daemons' cleanup, PostgreSQL.
. tests/e2e/lib.sh
. tests/e2e/pg_lib.sh

echo "machine_cpus $(nproc) cpus"
echo "machine_cpu_model $(awk -F': ' '/^model name/ {print $2; exit}' \
	/proc/cpuinfo | tr ' ' '_') name"
echo "machine_kernel $(uname -r) version"
echo "postgresql_version $("$PG_BIN/postgres" --version | awk '{print $3}') version"

pg_start
run=0
status=0
for store in ${STORES:-sqlite postgresql sqlite postgresql}; do
	run=$((run + 1))
	COORD_DATA="$T/coord-$run"
	COORD_LOG="$T/coord-$run.log"
	COORD_PORT=$(free_port)
	mkdir -p "$COORD_DATA"
	db=()
	if [ "$store" = postgresql ]; then
		pg_createdb "bench$run"
		db=(--db "$(pg_url "bench$run")")
	fi
	echo "$store run $run loadavg_before $(cut -d' ' -f1 /proc/loadavg) load"
	spawn "$COORD_LOG" "$GP" coordinator --listen "127.0.0.1:$COORD_PORT" \
	    --data "$COORD_DATA" "${db[@]+"${db[@]}"}" -q
	COORD_PID=$SPAWNED_PID
	wait_ready
	timeout 120 "$BUILD/bench/bench_dispatch" --url "$(coord_url)" \
	    --token "$ADMIN_TOKEN" --agents "${DISPATCH_AGENTS:-100}" \
	    --rate "${DISPATCH_RATE:-100}" --seconds "${DISPATCH_SECONDS:-10}" \
	    --drain-s 15 --coord-pid "$COORD_PID" 2>/dev/null |
	    sed "s/^/$store /" || status=1
	timeout 90 "$BUILD/bench/bench_submit" --url "$(coord_url)" \
	    --token "$ADMIN_TOKEN" --clients 16 \
	    --seconds "${SUBMIT_SECONDS:-10}" --gpus 0 2>/dev/null |
	    sed "s/^/$store /" || status=1
	echo "$store coord_rss_after $(awk '/^VmRSS:/ {print $2}' "/proc/$COORD_PID/status") KiB"
	alive "$COORD_PID" || { echo "bench: the coordinator died" >&2; status=1; }
	kill -TERM "$COORD_PID"
	wait_exit "$COORD_PID" 30
	echo "$store run $run loadavg_after $(cut -d' ' -f1 /proc/loadavg) load"
done

if [ "${SCALE:-0}" = 1 ]; then
	# shellcheck disable=SC2086
	BUILD=$BUILD bench/bench_scale.sh ${SCALE_ARGS:-} 2>&1 |
	    sed 's/^/sqlite scale /' || status=1
	pg_createdb scale
	# shellcheck disable=SC2086
	COORD_ARGS="--db $(pg_url scale)" BUILD=$BUILD bench/bench_scale.sh \
	    ${SCALE_ARGS:-} 2>&1 | sed 's/^/postgresql scale /' || status=1
fi
exit $status
