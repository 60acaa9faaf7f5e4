#!/usr/bin/env bash
# bench/pg_stop.sh: how long a coordinator on PostgreSQL takes to stop
# (SIGTERM) while its writes fail (issue 19): runs
# tests/e2e/test_pg_stop_held.sh with ROUNDS (default 10) rounds of its
# two faults (the database made read-only; the database stopped), each
# with a submission held, and prints per fault p50 and max (nearest
# rank) of the time from SIGTERM to the coordinator's exit, as the test
# measures it (date before kill, then its polled wait: 0.1 s steps). The
# test's own checks (the held submission answered 503 "not committed",
# nothing of it in the database afterwards) still apply: a failed check
# fails the bench. Before issue 19's stop path these stops took the
# write retry window, 120 s.
# Usage: BUILD=build bench/pg_stop.sh
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-10}
out=$(mktemp /tmp/gpupool-pg-stop.XXXXXX)
trap 'rm -f "$out"' EXIT
echo "machine_cpus $(nproc) cpus"
echo "machine_load $(cut -d' ' -f1-3 /proc/loadavg) loadavg"
STOP_ROUNDS=$ROUNDS STOP_TIMES=$out BUILD=$BUILD \
    tests/run.sh test_pg_stop_held || exit 1
python3 - "$out" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def pct(v, p):
    v = sorted(v)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]
for fault in sorted({r[0] for r in rows}):
    v = [int(r[1]) for r in rows if r[0] == fault]
    print("stop_%s_p50 %d ms" % (fault, pct(v, 50)))
    print("stop_%s_max %d ms" % (fault, max(v)))
    print("stop_%s_runs %d" % (fault, len(v)))
PY
