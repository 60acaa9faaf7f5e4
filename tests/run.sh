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
# End-to-end tests run E2E_JOBS at a time (default 3): each has its own
# temp dir, ports and namespaces (tests/e2e/lib.sh), and most of their time
# is spent waiting on daemons, so a few at once shorten the suite on a
# small machine. E2E_JOBS=1 runs them one by one.
e2e_jobs=${E2E_JOBS:-3}
declare -A e2e_start=()
e2e_reap() { # waits for one finished e2e test and reports it
	local pid name rc log
	wait -n -p pid
	rc=$?
	name=${e2e_name[$pid]}
	log="$logdir/${name//\//_}.log"
	unset "e2e_name[$pid]"
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok   $name ($((SECONDS - e2e_start[$name]))s)"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "FAIL $name ($((SECONDS - e2e_start[$name]))s)"
		tail -n 40 "$log" | sed 's/^/     | /'
	fi
}
declare -A e2e_name=()
for e in tests/e2e/test_*.sh; do
	[ -f "$e" ] || continue
	name="e2e/$(basename "$e" .sh)"
	if [ -n "$pattern" ] && [[ $name != *$pattern* ]]; then
		continue
	fi
	while [ ${#e2e_name[@]} -ge "$e2e_jobs" ]; do e2e_reap; done
	e2e_start[$name]=$SECONDS
	bash "$e" >"$logdir/${name//\//_}.log" 2>&1 </dev/null &
	e2e_name[$!]=$name
done
while [ ${#e2e_name[@]} -gt 0 ]; do e2e_reap; done

echo
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed: ${failures[*]} (logs in $logdir)"
else
	rm -rf "$logdir"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
