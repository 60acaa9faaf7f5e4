#!/usr/bin/env bash
# bench/net_e2e.sh: end-to-end `true` throughput (bench_e2e.sh) with and
# without job networks, alternating runs, each in a network namespace of
# its own (so the agent's veth pairs and nftables table never touch the
# host's). BASE: a build tree of the code before issue 14.
# Usage: BASE=/path/to/old/tree bench/net_e2e.sh [JOBS] [ROUNDS]
set -u
cd "$(dirname "$0")/.."
jobs=${1:-1000}
rounds=${2:-2}
: "${BASE:?BASE must be a build tree of the code before issue 14}"
for r in $(seq 1 "$rounds"); do
	for tree in "$BASE" "$PWD"; do
		name=new
		[ "$tree" = "$BASE" ] && name=old
		out=$(cd "$tree" && unshare -n sh -c \
		    "ip link set lo up && BUILD=build bench/bench_e2e.sh $jobs" 2>&1 |
		    grep -E '^e2e_(rate|succeeded)' | tr '\n' ' ')
		echo "round $r $name: $out"
	done
done
