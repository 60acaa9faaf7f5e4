#!/usr/bin/env bash
# bench/failover.sh: failover time of several coordinators over one
# PostgreSQL (issue 19): runs tests/e2e/test_failover_pg.sh with
# FAILOVERS (default 20) kills of the leader under load (two coordinators,
# two agents of 4 fake GPUs, four CLI submitters) and prints, over the
# failovers, p50 and p99 (nearest rank) of
#   failover_elected_ms: kill -9 of the leader -> the standby raised the
#                        epoch (gp_leader, polled every 50 ms by the script)
#   failover_started_ms: kill -9 of the leader -> the first job an agent
#                        started after that (the agents' "job started"
#                        log lines)
# and the test's own checks (every printed id once, exit codes, logs, one
# attempt each) still apply: a failed check fails the bench.
# Usage: BUILD=build bench/failover.sh   (CI runs the test with 3.)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FAILOVERS=${FAILOVERS:-20}
out=$(mktemp /tmp/gpupool-failover.XXXXXX)
trap 'rm -f "$out"' EXIT
echo "machine_cpus $(nproc) cpus"
echo "machine_load $(cut -d' ' -f1-3 /proc/loadavg) loadavg"
FAILOVERS=$FAILOVERS FAILOVER_TIMES=$out E2E_WAIT_S=${E2E_WAIT_S:-60} \
    BUILD=$BUILD tests/run.sh test_failover_pg || exit 1
python3 - "$out" <<'PY'
import math, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
rows = [tuple(map(int, l.split())) for l in lines if not l.startswith("#")]
jobs = [l.split()[2] for l in lines if l.startswith("# jobs")]
def pct(v, p):
    v = sorted(v)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]
for i, name in enumerate(("failover_elected_ms", "failover_started_ms")):
    v = [r[i] for r in rows]
    print("%s_p50 %d ms" % (name, pct(v, 50)))
    print("%s_p99 %d ms" % (name, pct(v, 99)))
    print("%s_max %d ms" % (name, max(v)))
print("failovers %d" % len(rows))
if jobs:
    print("jobs_checked %s" % jobs[0])
PY
