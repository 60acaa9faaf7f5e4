#!/usr/bin/env bash
# bench/sched_speed.sh: the scheduler's speed (issue 5): best-fit
# decisions per CPU-second of the engine's passes and the whole replay of
# the default Alibaba trace under the default policy (the FGD protocol),
# over a few seeds; the replay with a queue; and the coordinator's plan on
# a large pool (the unit test's many_nodes case). Prints "metric value
# unit" lines. Usage: BUILD=build bench/sched_speed.sh
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
TRACES=${TRACES:-$PWD/../shared/data/traces}
[ -d "$TRACES" ] || TRACES=/work/shared/data/traces
N="$TRACES/openb_node_list_gpu_node.csv"
J="$TRACES/openb_pod_list_default.csv"

echo "machine_cpus $(nproc) cpus"
echo "machine_load $(cut -d' ' -f1 /proc/loadavg) load1"
for p in bestfit frag fgd; do
	for s in 42 43 44; do
		"$BIN" sim --nodes "$N" --jobs "$J" --policy "$p" \
		    --protocol fgd --seed "$s" --json
	done | python3 -c '
import json, sys
rows = [json.loads(x) for x in sys.stdin.read().replace("}\n{", "}\x00{").split("\x00")]
p = rows[0]["policy"]
print("sched_%s_decisions_per_cpu_s %.0f decisions/s" % (p, sum(r["decisions_per_s"] for r in rows) / len(rows)))
print("sim_fgd_default_%s_wall_s %.2f s" % (p, max(r["seconds"] for r in rows)))'
done
start=$(date +%s.%N)
"$BIN" sim --nodes "$N" --jobs "$J" --speed 10000 --json >/dev/null
echo "sim_replay_default_speed10000_wall_s $(echo "$(date +%s.%N) - $start" | bc) s"
"$BUILD/tests/test_sched" | awk '/plan 10000 nodes/ {
	print "plan_10000_nodes_20000_queued_ms", $6, "ms";
	print "plan_busy_pool_ms", $10, "ms" }'
