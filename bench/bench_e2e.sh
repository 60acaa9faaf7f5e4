#!/usr/bin/env bash
# bench/bench_e2e.sh: end to end on one machine: a coordinator and one real
# agent with 8 fake GPUs; submits N sandboxed `true` jobs of 1 GPU each
# (bench_submit, 16 clients) and waits until all have finished. Prints
# "metric value unit" lines: jobs/s from the first submission to the last
# finish. Usage: BUILD=build bench/bench_e2e.sh [N] (default 2000).
# Also: bench/bench_e2e.sh --memory [AGENTS] [JOBS]: 1,000 simulated
# agents and 100,000 jobs through bench_dispatch, then the coordinator's
# RSS.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
PORT=${PORT:-$((20000 + $$ % 20000))}
URL="http://127.0.0.1:$PORT"
DATA=$(mktemp -d /tmp/gpupool-bench-e2e.XXXXXX)
# The agent refuses a work directory under /tmp (jobs get a private one),
# and the checkout may be there: /var/tmp, whatever the checkout's place.
WORK=$(mktemp -d /var/tmp/gpupool-bench-e2e-work.XXXXXX)
PIDS=()

. bench/lib.sh
cleanup() {
	stop_pids "${PIDS[@]}"
	rm -rf "$DATA" "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
COORD_URL=$URL
start_coordinator "$DATA/coord" "$DATA/coord.log"

if [ "${1:-}" = "--memory" ]; then
	AGENTS=${2:-1000}
	JOBS=${3:-100000}
	echo "coord_rss_idle $(rss "$COORD_PID") KiB"
	timeout 600 "$BUILD/bench/bench_dispatch" --url "$URL" \
		--token "$ADMIN" --agents "$AGENTS" --jobs "$JOBS" \
		--drain-s 120 --coord-pid "$COORD_PID"
	status=$?
	echo "coord_rss_final $(rss "$COORD_PID") KiB"
	exit $status
fi

N=${1:-2000}
PROVIDER=$(api POST /v1/tokens '{"role":"provider","name":"bench-e2e"}' |
	sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
if [ -z "$PROVIDER" ]; then
	echo "bench_e2e: cannot create a provider token" >&2
	exit 1
fi
# 64 CPUs offered whatever the machine has: the jobs are `true`.
"$BIN" agent --coordinator "$URL" --token "$PROVIDER" --name bench-e2e \
	--fake-gpus 8 --cpus 64 --work "$WORK" \
	>"$DATA/agent.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do
	api GET /v1/nodes 2>/dev/null | grep -q '"state": *"up"' && break
	sleep 0.1
done
if ! api GET /v1/nodes 2>/dev/null | grep -q '"state": *"up"'; then
	echo "bench_e2e: the agent did not come up" >&2
	tail -n 20 "$DATA/agent.log" >&2
	exit 1
fi

# CPU time (clock ticks, user and system) of the agent, the jobs it
# reaped and its spawn helper, and of the coordinator: "USER SYS".
cpu_of() { # PID [with_children]
	awk -v c="${2:-0}" '{ sub(/^.*\) /, ""); u = $12; s = $13;
		if (c) { u += $14; s += $15 } print u, s }' \
		"/proc/$1/stat" 2>/dev/null || echo "0 0"
}
AGENT_PID=${PIDS[-1]}
HELPER_PID=$(pgrep -P "$AGENT_PID" -x gpupool-spawn | head -n 1)
agent_cpu() {
	local a h
	a=$(cpu_of "$AGENT_PID" 1)
	h=$(cpu_of "${HELPER_PID:-0}")
	echo "$a $h" | awk '{print $1 + $3, $2 + $4}'
}
cpu0=$(agent_cpu)
coord0=$(cpu_of "$COORD_PID")
start=$(date +%s.%N)
"$BUILD/bench/bench_submit" --url "$URL" --token "$ADMIN" --clients 16 \
	--jobs "$N" --gpus 1 || exit 1
# Wait until nothing is queued or running any more (at most 5 minutes).
deadline=$((SECONDS + 300))
while [ $SECONDS -lt $deadline ]; do
	active=$(api GET /v1/jobs | grep -o '"state": *"[a-z]*"' | wc -l)
	[ "$active" -eq 0 ] && break
	if [ $((SECONDS % 10)) -eq 0 ] && [ "$active" != "${last:-}" ]; then
		echo "bench_e2e: $active jobs queued or running" >&2
		last=$active
	fi
	sleep 0.2
done
end=$(date +%s.%N)
cpu1=$(agent_cpu)
coord1=$(cpu_of "$COORD_PID")
done_jobs=$(api GET '/v1/jobs?all=1' |
	grep -o '"state": *"succeeded"' | wc -l)
if [ "$done_jobs" -ne "$N" ]; then
	# Why the others did not succeed (their distinct messages).
	api GET '/v1/jobs?all=1' | grep -o '"message": *"[^"]*"' |
		sort | uniq -c | sort -rn | head -n 5 >&2
fi
echo "e2e_jobs $N jobs"
echo "e2e_succeeded $done_jobs jobs"
echo "e2e_elapsed $(echo "$end - $start" | bc -l | xargs printf '%.3f') s"
echo "e2e_rate $(echo "$done_jobs / ($end - $start)" | bc -l |
	xargs printf '%.1f') jobs/s"
echo "coord_rss $(rss "$COORD_PID") KiB"
# Per job, in ms: the agent with its jobs and helper, the coordinator.
hz=$(getconf CLK_TCK)
echo "$cpu0 $cpu1 $coord0 $coord1" | awk -v n="$N" -v hz="$hz" '{
	f = 1000 / hz / n
	printf "agent_cpu_user_per_job %.3f ms\n", ($3 - $1) * f
	printf "agent_cpu_sys_per_job %.3f ms\n", ($4 - $2) * f
	printf "coord_cpu_user_per_job %.3f ms\n", ($7 - $5) * f
	printf "coord_cpu_sys_per_job %.3f ms\n", ($8 - $6) * f }'
echo "agent_spawn_helper_pid ${HELPER_PID:-none}"
echo "agent_rss $(rss "$AGENT_PID") KiB"
[ -n "$HELPER_PID" ] && echo "agent_spawn_helper_rss $(rss "$HELPER_PID") KiB"
[ "$done_jobs" -eq "$N" ]
