#!/usr/bin/env bash
# bench/interactive_ab.sh: two builds side by side on bench/interactive.sh's
# third part (200 sessions: memory, dispatch), in interleaved rounds (old,
# new, then new, old, ...) so that the machine's load falls on both alike.
# Prints each run's figures, one line a run, and keeps the whole output.
# Usage: bench/interactive_ab.sh OLD_GPUPOOL NEW_GPUPOOL [ROUNDS (5)] [OUT_DIR]
# (each a gpupool binary; its build directory's other files go with it).
set -u
cd "$(dirname "$0")/.."
old=$1 new=$2 rounds=${3:-5} out=${4:-$(mktemp -d /var/tmp/interactive-ab.XXXXXX)}
mkdir -p "$out"
echo "# runs in $out; load at start $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # WHICH BIN ROUND
	local log="$out/$1-$3.log"
	GPUPOOL_BIN=$2 SECTIONS=3 bench/interactive.sh >"$log" 2>&1
	printf '%s round %s rc %s: %s\n' "$1" "$3" "$?" "$(grep -E \
	    '^(harness_one|idle_5s|sessions_rss|agent_rss|dispatch_ms|load)' \
	    "$log" | tr '\n' ';')"
}
for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		run old "$old" "$r"
		run new "$new" "$r"
	else
		run new "$new" "$r"
		run old "$old" "$r"
	fi
done
