#!/usr/bin/env bash
# bench/sync_breakdown.sh: where the time of one synchronous job goes
# (issue 6, workload 2 of bench/slurm_vs_gpupool.sh, gpupool alone).
# Starts a coordinator and one agent (8 fake GPUs, real sandboxed jobs) on
# 127.0.0.1 with debug logs, runs `gpupool submit --wait --gpus 1 true` S
# times in a row, GAP seconds apart, and prints "metric value unit" lines:
# the end-to-end p50 and p99 as the CLI's caller sees it, and the p50 of
# each step, from the daemons' log stamps (milliseconds):
#
#   assign_to_agent     the coordinator assigns -> the agent has it
#   agent_to_spawn      -> the job's init exists (cloned, or a warm one
#                          handed the job)
#   spawn_to_exec       -> the command exec'd (init's record; `started`)
#   exec_to_exit        -> init reaped (the agent's `finished`)
#   exit_to_acked       -> the coordinator answered the `finished` report
#                          (after its commit; the `started` report, sent
#                          first, is answered before it)
#   assign_to_acked     the sum, the agent's round trip
#   applied_to_acked    of exit_to_acked: from the coordinator's log line
#                       of the job's end (its state thread applied the
#                       report) to the answer (the commit, with fsync)
#
# The rest of the end-to-end figure is the CLI's own start, the
# submission's commit, and the waiting CLI's wake-up and exit. Every daemon it started is stopped at exit. Needs
# root (the agent as root runs jobs as nobody).
#
# Usage: BUILD=build bench/sync_breakdown.sh [--sync S] [--gap SECONDS]
# Defaults: --sync 100 --gap 0.2.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
SYNC=100 GAP=0.2
while [ $# -gt 0 ]; do
	case "$1" in
	--sync) SYNC=$2 ;;
	--gap) GAP=$2 ;;
	*) echo "usage: $0 [--sync S] [--gap SECONDS]" >&2; exit 2 ;;
	esac
	shift 2 || { echo "$0: $1 needs a value" >&2; exit 2; }
done

. bench/lib.sh
die() { echo "sync_breakdown: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (the agent's sandboxes)"
[ -x "$BIN" ] || die "$BIN is missing: run make"
# Not under /tmp: jobs get a private /tmp, the agent refuses it.
SCRATCH=$(mktemp -d /var/tmp/gpupool-sync-XXXXXX) || die "mktemp"
# The jobs' user (nobody) must reach its work directory below it.
chmod 0755 "$SCRATCH"
PIDS=()
cleanup() {
	stop_pids "${PIDS[@]}"
	rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$((20000 + $$ % 20000))
URL="http://127.0.0.1:$PORT"
COORD_URL=$URL
start_coordinator "$SCRATCH/coord" "$SCRATCH/coord.log" -v
PROVIDER=$(token provider sync-bench)
USER_TOKEN=$(token user sync-bench)
[ -n "$PROVIDER" ] && [ -n "$USER_TOKEN" ] || die "cannot create tokens"
mkdir -p "$SCRATCH/work"
"$BIN" agent --coordinator "$URL" --token "$PROVIDER" --name sync-bench \
	--fake-gpus 8 --cpus 64 --work "$SCRATCH/work" -v \
	>"$SCRATCH/agent.log" 2>&1 &
PIDS+=("$!")
export GPUPOOL_URL="$URL" GPUPOOL_TOKEN="$USER_TOKEN"
for _ in $(seq 100); do
	"$BIN" nodes 2>/dev/null | grep -q ' up ' && break
	sleep 0.1
done
"$BIN" nodes 2>/dev/null | grep -q ' up ' || {
	tail -n 20 "$SCRATCH/agent.log" >&2
	die "the agent did not come up"
}
"$BIN" submit --wait --gpus 1 true >/dev/null || die "a first job failed"
# Jobs before this one are warm-up, not measured.
FIRST=$(("$("$BIN" submit --gpus 1 true)" + 1)) 2>/dev/null ||
	die "cannot submit"
sleep 0.5

echo "load_before $(cut -d' ' -f1 /proc/loadavg) loadavg"
for _ in $(seq "$SYNC"); do
	t0=$EPOCHREALTIME
	"$BIN" submit --wait --gpus 1 true >/dev/null || die "a job failed"
	t1=$EPOCHREALTIME
	echo "$t0 $t1"
	sleep "$GAP"
done | awk '{ printf "%.3f\n", ($2 - $1) * 1000 }' >"$SCRATCH/e2e"
echo "load_after $(cut -d' ' -f1 /proc/loadavg) loadavg"

pct() { # P: nearest-rank percentile of the numbers on stdin
	sort -g | awk -v p="$1" '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		k = int(p / 100 * NR + 0.999999); if (k < 1) k = 1; print v[k] }'
}
echo "sync_e2e_p50 $(pct 50 <"$SCRATCH/e2e") ms"
echo "sync_e2e_p99 $(pct 99 <"$SCRATCH/e2e") ms"

# One line per job: the stamps (ms of the day) of each event, "-" if none.
# Log lines start "YYYY-MM-DDTHH:MM:SS.mmmZ".
cat "$SCRATCH/coord.log" "$SCRATCH/agent.log" | awk -v first="$FIRST" '
function ms(s,  h, m) {
	h = substr(s, 12, 2) * 3600; m = substr(s, 15, 2) * 60
	return (h + m + substr(s, 18, 6)) * 1000
}
function job() {
	if (match($0, / job=[0-9]+/) == 0) return -1
	return substr($0, RSTART + 5, RLENGTH - 5) + 0
}
{ j = job(); if (j < first) next }
/coordinator debug: job assigned / { if (!(j in a)) a[j] = ms($1) }
/coordinator info: job finished / { if (!(j in p)) p[j] = ms($1) }
/agent debug: finished report delivered / { if (!(j in c)) c[j] = ms($1) }
/agent info: assignment / { if (!(j in g)) g[j] = ms($1) }
/agent debug: job spawned / { if (!(j in s)) s[j] = ms($1) }
/agent debug: job started / { if (!(j in x)) x[j] = ms($1) }
/agent info: job finished / { if (!(j in f)) f[j] = ms($1) }
END { for (j in a) if ((j in g) && (j in s) && (j in x) && (j in f) &&
	(j in p) && (j in c)) printf "%d %d %d %d %d %d %d\n", g[j] - a[j],
	s[j] - g[j], x[j] - s[j], f[j] - x[j], c[j] - f[j], c[j] - a[j],
	c[j] - p[j] }' \
	>"$SCRATCH/steps"
[ -s "$SCRATCH/steps" ] || die "no job's steps in the logs"
col=1
for name in assign_to_agent agent_to_spawn spawn_to_exec exec_to_exit \
	exit_to_acked assign_to_acked applied_to_acked; do
	echo "${name}_p50 $(cut -d' ' -f$col "$SCRATCH/steps" | pct 50) ms"
	col=$((col + 1))
done
echo "assign_to_acked_p99 $(cut -d' ' -f6 "$SCRATCH/steps" | pct 99) ms"
echo "jobs_measured $(grep -c . "$SCRATCH/steps") jobs"
