#!/usr/bin/env bash
# scripts/test.sh: the one command that runs every test: installs what is
# missing, builds with warnings as errors, runs the suite (unit tests, fuzz
# corpora, end-to-end tests on 127.0.0.1), then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer, then a short libFuzzer run
# of each harness (FUZZ_SECONDS each, default 10; the corpora are replayed in
# both suites anyway). SKIP_ASAN=1 and SKIP_FUZZ=1 shorten it while
# developing; E2E_JOBS (default 3) end-to-end tests run at once.
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
	for f in build-fuzz/fuzz_*; do
		name=${f##*/fuzz_}
		work=$(mktemp -d)
		cp -r "tests/fuzz/corpus/$name/." "$work/"
		if "$f" -max_total_time="${FUZZ_SECONDS:-10}" -print_final_stats=0 \
			"$work" >"$work.log" 2>&1; then
			echo "ok   fuzz/$name"
		else
			echo "FAIL fuzz/$name"; tail -n 30 "$work.log"; status=1
		fi
		rm -rf "$work" "$work.log"
	done
fi
exit $status
