#!/usr/bin/env bash
# tests/run.sh: runs every test: unit binaries, fuzz corpora replays and the
# end-to-end scripts. Prints one line per test and ends with
# "N passed, N failed". Usage: BUILD=build tests/run.sh [PATTERN]
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pattern=${1:-}
export GPUPOOL_BIN="$PWD/$BUILD/gpupool"
export GPUPOOL_BUILD="$PWD/$BUILD"
passed=0
failed=0
failures=()
logdir=$(mktemp -d /tmp/gpupool-tests.XXXXXX)

run_one() { # name command...
	local name=$1
	shift
	if [ -n "$pattern" ] && [[ $name != *$pattern* ]]; then
		return
	fi
	local start=$SECONDS log="$logdir/${name//\//_}.log"
	if "$@" >"$log" 2>&1; then
		passed=$((passed + 1))
		echo "ok   $name ($((SECONDS - start))s)"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "FAIL $name ($((SECONDS - start))s)"
		tail -n 40 "$log" | sed 's/^/     | /'
	fi
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one "unit/$(basename "$t")" "$t"
done
for r in "$BUILD"/fuzz/replay_*; do
	[ -x "$r" ] || continue
	name=${r##*/replay_}
	run_one "fuzz-replay/$name" "$r" "tests/fuzz/corpus/$name"
done
for e in tests/e2e/test_*.sh; do
	[ -f "$e" ] || continue
	run_one "e2e/$(basename "$e" .sh)" bash "$e"
done

echo
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed: ${failures[*]} (logs in $logdir)"
else
	rm -rf "$logdir"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
