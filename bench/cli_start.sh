#!/usr/bin/env bash
# bench/cli_start.sh: what one `gpupool` CLI process costs (issue 6): the
# executable doing nothing (--version), and real commands against a
# coordinator it starts on loopback with a fresh data directory: `ps`,
# `whoami` and `submit` of a job (refused at once with 422 when no agent
# is there: a full request and answer, nothing queued), measured with
# `perf stat -r N` (task-clock and elapsed; a shell loop when perf is
# missing). Prints "metric value unit" lines and the load beside each.
# OLD=PATH also measures another gpupool executable the same way (e.g.
# one built before the split, for a before/after), against the same
# coordinator.
# Usage: BUILD=build bench/cli_start.sh [N]   (N runs each, default 200)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
N=${1:-200}
PORT=${PORT:-$((20000 + $$ % 20000))}
DATA=$(mktemp -d /tmp/gpupool-clistart.XXXXXX)
COORD_PID=
cleanup() {
	[ -n "$COORD_PID" ] && kill "$COORD_PID" 2>/dev/null &&
		wait "$COORD_PID" 2>/dev/null
	rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ -x "$BIN" ] || { echo "cli_start: $BIN is missing: run make" >&2; exit 1; }
load() { cut -d' ' -f1 /proc/loadavg; }

"$BIN" coordinator --listen "127.0.0.1:$PORT" --data "$DATA" \
	>"$DATA/coord.log" 2>&1 &
COORD_PID=$!
for _ in $(seq 100); do
	[ -s "$DATA/admin.token" ] && break
	sleep 0.1
done
[ -s "$DATA/admin.token" ] || { echo "cli_start: no coordinator" >&2; exit 1; }
export GPUPOOL_URL="http://127.0.0.1:$PORT" GPUPOOL_CONFIG="$DATA/none"
GPUPOOL_TOKEN=$(tr -d ' \r\n' <"$DATA/admin.token")
export GPUPOOL_TOKEN
for _ in $(seq 100); do
	"$BIN" whoami >/dev/null 2>&1 && break
	sleep 0.1
done

# measure NAME CMD...: task-clock and elapsed per run, in ms.
measure() {
	local name=$1 t0 t1 out
	shift
	if command -v perf >/dev/null; then
		out=$(perf stat -x, -e task-clock -r "$N" "$@" 2>&1 >/dev/null \
		    </dev/null) || true
		# -x, lines: value,unit,event,...; elapsed is not in -x output
		echo "${name}_task_clock $(awk -F, '/task-clock/ {printf "%.3f", $1; exit}' <<<"$out") ms (load $(load))"
	fi
	t0=$(date +%s.%N)
	for _ in $(seq "$N"); do "$@" >/dev/null 2>&1 </dev/null; done
	t1=$(date +%s.%N)
	echo "${name}_elapsed $(echo "1000 * ($t1 - $t0) / $N" | bc -l |
		xargs printf '%.3f') ms (load $(load))"
}

run_all() { # PREFIX BIN
	measure "$1_version" "$2" --version
	measure "$1_ps" "$2" ps
	measure "$1_whoami" "$2" whoami
	measure "$1_submit_refused" "$2" submit --gpus 1 -- true
	echo "$1_libraries $(ldd "$2" | grep -c '=>') libraries"
}

echo "load_start $(load) loadavg"
run_all cli "$BIN"
[ -n "${OLD:-}" ] && run_all old "$OLD"
echo "load_end $(load) loadavg"
