#!/usr/bin/env bash
# scripts/test.sh: the one command that runs every test: installs what is
# missing, builds with warnings as errors, runs the suite (unit tests, fuzz
# corpora, end-to-end tests on 127.0.0.1), then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer, then a short libFuzzer run
# of each harness (FUZZ_SECONDS each, default 10; the corpora are replayed in
# both suites anyway). SKIP_ASAN=1 and SKIP_FUZZ=1 shorten it while
# developing; E2E_JOBS (default 3) end-to-end tests run at once, and
# FUZZ_JOBS (default: the number of cores) libFuzzer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
status=0

echo "== build (warnings are errors)"
make -j"$jobs" WERROR=1
echo "== tests"
make test || status=1

if [ "${SKIP_ASAN:-0}" != 1 ]; then
	echo "== build and tests under ASan+UBSan"
	make -j"$jobs" WERROR=1 SANITIZE=1
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	make test SANITIZE=1 || status=1
fi

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
	echo "== short libFuzzer runs"
	make -j"$jobs" fuzz
	# fuzz_one HARNESS: FUZZ_SECONDS of it on a copy of its corpus; prints
	# its verdict (and a failure's log) in one write; status 1 on FAIL.
	fuzz_one() {
		local f=$1 name=${1##*/fuzz_} work out rc=0
		work=$(mktemp -d)
		if ! cp -r "tests/fuzz/corpus/$name/." "$work/"; then
			printf 'FAIL fuzz/%s: no corpus tests/fuzz/corpus/%s\n' "$name" "$name"
			rm -rf "$work"
			return 1
		fi
		if "$f" -max_total_time="${FUZZ_SECONDS:-10}" -print_final_stats=0 \
			"$work" >"$work.log" 2>&1; then
			out="ok   fuzz/$name"
		else
			out="FAIL fuzz/$name"$'\n'"$(tail -n 30 "$work.log")"
			rc=1
		fi
		rm -rf "$work" "$work.log"
		printf '%s\n' "$out"
		return $rc
	}
	# FUZZ_JOBS harnesses at once (default: one a core). Each is one
	# single-threaded process for FUZZ_SECONDS of wall time with its own
	# copy of its corpus, so running them side by side changes nothing of
	# a run but the wall time: harnesses / cores x FUZZ_SECONDS, not
	# harnesses x FUZZ_SECONDS (22 x 10 s).
	fuzz_jobs=${FUZZ_JOBS:-$jobs}
	running=0
	for f in build-fuzz/fuzz_*; do
		while [ "$running" -ge "$fuzz_jobs" ]; do
			wait -n || status=1
			running=$((running - 1))
		done
		fuzz_one "$f" &
		running=$((running + 1))
	done
	while [ "$running" -gt 0 ]; do
		wait -n || status=1
		running=$((running - 1))
	done
fi
exit $status
