#!/usr/bin/env bash
# bench/start_ab.sh: end-to-end `true` throughput (bench_e2e.sh: one agent
# of 8 fake GPUs, 16 submitters) of three agents side by side, alternating
# within each round so that the machine's load falls on all alike:
#   old:      BASE, a build tree of the code before job networks (65c579a)
#   per-job:  this tree, each job binding its minimal root path by path
#             (GPUPOOL_AGENT_ROOT_TEMPLATE=off, the code before the template)
#   template: this tree as it is (the root template, sandbox.h)
# Each run in a network namespace of its own (the agent's veth pairs and
# nftables table never touch the host's). Prints each run, then the
# medians. Usage: BASE=/path/to/old/tree bench/start_ab.sh [JOBS] [ROUNDS]
set -u
cd "$(dirname "$0")/.."
jobs=${1:-1000}
rounds=${2:-5}
: "${BASE:?BASE must be a build tree of the code before job networks}"
declare -A rates
run() { # NAME TREE [ENV...]
	local name=$1 tree=$2 out
	shift 2
	out=$(cd "$tree" && env "$@" unshare -n sh -c \
	    "ip link set lo up && BUILD=build bench/bench_e2e.sh $jobs" 2>&1 |
	    grep -E '^(e2e_rate|e2e_succeeded|agent_cpu_(user|sys)_per_job) ' |
	    awk '{printf "%s=%s ", $1, $2}')
	echo "round $r $name load=$(cut -d' ' -f1 /proc/loadavg) $out"
	rates[$name]+="$(printf '%s\n' "$out" | sed -n 's/.*e2e_rate=\([0-9.]*\).*/\1/p') "
}
for r in $(seq 1 "$rounds"); do
	run old "$BASE"
	run per-job "$PWD" GPUPOOL_AGENT_ROOT_TEMPLATE=off
	run template "$PWD"
done
for name in old per-job template; do
	printf '%s\n' ${rates[$name]} | sort -n |
	    awk -v n="$name" '{v[NR] = $1} END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "median %s %.1f jobs/s (%d runs)\n", n, m, NR }'
done
