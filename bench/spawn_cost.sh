#!/usr/bin/env bash
# bench/spawn_cost.sh: what a job's start costs as the agent grows. Runs
# bench/bench_e2e.sh N (default 1000) with the agent's jobs cloned from the
# agent itself (GPUPOOL_AGENT_SPAWN=direct, the old way) and from its spawn
# helper (the default), each with the agent as it is and made big
# (GPUPOOL_AGENT_BLOAT="THREADS,MIB": idle threads and a touched heap),
# alternating (A B A B, ROUNDS times) so that a load that drifts hits both.
# Prints one line per run: mode, bloat, jobs/s, and the agent's CPU per
# job (user and system, ms; the agent, its helper and the jobs it reaped).
# Usage: BUILD=build bench/spawn_cost.sh [N] [ROUNDS] [BLOAT]
set -u
cd "$(dirname "$0")/.."
N=${1:-1000}
ROUNDS=${2:-2}
BLOAT=${3:-32,512}
echo "# kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-7s %-8s %8s %9s %9s %9s %9s\n' mode bloat jobs/s \
	user_ms sys_ms coord_u coord_s
for round in $(seq "$ROUNDS"); do
	for bloat in 0,0 "$BLOAT"; do
		for mode in direct helper; do
			out=$(GPUPOOL_AGENT_SPAWN=$mode GPUPOOL_AGENT_BLOAT=$bloat \
				bench/bench_e2e.sh "$N" 2>/dev/null)
			v() { echo "$out" | awk -v k="$1" '$1 == k {print $2}'; }
			printf '%-7s %-8s %8s %9s %9s %9s %9s\n' "$mode" "$bloat" \
				"$(v e2e_rate)" "$(v agent_cpu_user_per_job)" \
				"$(v agent_cpu_sys_per_job)" \
				"$(v coord_cpu_user_per_job)" \
				"$(v coord_cpu_sys_per_job)"
		done
	done
done
echo "# round $ROUNDS done, load $(cut -d' ' -f1-3 /proc/loadavg)"
