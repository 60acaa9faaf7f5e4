#!/usr/bin/env bash
# scripts/test.sh: the one command that runs every test: installs what is
# missing, builds with warnings as errors, runs the suite (unit tests, fuzz
# corpora, end-to-end tests on 127.0.0.1), then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer, then a short libFuzzer run
# of each harness (FUZZ_SECONDS each, default 10; the corpora are replayed in
# both suites anyway). SKIP_ASAN=1 and SKIP_FUZZ=1 shorten it while
# developing, and a PATTERN runs only the tests whose name has it (as
# tests/run.sh's); E2E_JOBS (default 3) end-to-end tests run at once, and
# FUZZ_JOBS (default: the number of cores) libFuzzer runs.
# Usage: scripts/test.sh [PATTERN]
#
# Whatever happens, it ends with a summary (at most SUMMARY_LINES, default
# 60, so that a CI log's tail shows it): each failed test of each pass
# (normal, ASan, fuzz) with the few lines of its log that say why, then a
# verdict line per pass; or one line when all passed.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/failure_lines.sh
pattern=${1:-}
jobs=$(nproc 2>/dev/null || echo 2)
status=0

# The summary. Each pass (normal, asan, fuzz) writes in summary_dir:
# PASS.fails (tests/run.sh's GPUPOOL_TEST_SUMMARY: its FAIL lines, each
# with its telling lines, then "counts: ..."); verdicts gets one line per
# pass, and stage says what was under way, for a run that set -e ended.
summary_dir=$(mktemp -d)
stage="installing dependencies"
verdicts=()

# run_pass NAME: make test for pass NAME (make's other arguments after
# it), its failures in summary_dir; status 1 when it failed.
run_pass() {
	local name=$1 rc=0 counts
	shift
	GPUPOOL_TEST_SUMMARY="$summary_dir/$name.fails" \
	    make test TEST_PATTERN="$pattern" "$@" || rc=$?
	counts=$(sed -n 's/^counts: //p' "$summary_dir/$name.fails" \
	    2>/dev/null || true)
	if [ $rc = 0 ]; then
		verdicts+=("$name: ${counts:-passed}")
		return 0
	fi
	if grep -q '^FAIL' "$summary_dir/$name.fails" 2>/dev/null; then
		verdicts+=("$name: FAILED $(failed_names "$name"): $counts")
	else
		verdicts+=("$name: FAILED: make test exited $rc and no test\
 reported FAIL (its output above says why)")
	fi
	return 1
}

# failed_names PASS: the names of PASS's failed tests, at most 8, on one line.
failed_names() {
	awk '/^FAIL/ { sub(/:$/, "", $2); n++
		if (n <= 8) printf "%s%s", (n > 1 ? " " : ""), $2 }
	    END { if (n > 8) printf " and %d more", n - 8 }' \
	    "$summary_dir/$1.fails"
}

# summary: the run's last lines. Exit trap: a run that set -e ended (a
# build that failed) has one too, saying where it stopped.
summary() {
	local rc=$? max=${SUMMARY_LINES:-60} room n v
	trap - EXIT
	set +e
	for v in normal asan fuzz; do
		grep -qs '^FAIL' "$summary_dir/$v.fails" || continue
		echo "-- $v"
		grep -v '^counts: ' "$summary_dir/$v.fails"
	done >"$summary_dir/details"
	if [ $rc = 0 ]; then
		printf '== all passed: %s' "${verdicts[0]}"
		printf '; %s' "${verdicts[@]:1}"
		echo
		rm -rf "$summary_dir"
		exit 0
	fi
	[ "$stage" = done ] || verdicts+=("stopped while $stage (status $rc)")
	echo
	echo "== summary: FAILED"
	# The verdicts come last, the failures' lines before them, cut to
	# what fits in max lines.
	room=$((max - 2 - ${#verdicts[@]}))
	n=$(wc -l <"$summary_dir/details")
	if [ "$n" -gt "$room" ]; then
		head -n $((room - 1)) "$summary_dir/details"
		echo "... $((n - room + 1)) more lines: the FAIL lines above"
	else
		cat "$summary_dir/details"
	fi
	for v in "${verdicts[@]}"; do
		echo "$v"
	done
	rm -rf "$summary_dir"
	exit $rc
}
trap summary EXIT

scripts/install-deps.sh

stage="building"
echo "== build (warnings are errors)"
make -j"$jobs" WERROR=1
stage="running the tests"
echo "== tests"
run_pass normal || status=1

if [ "${SKIP_ASAN:-0}" != 1 ]; then
	stage="building under ASan+UBSan"
	echo "== build and tests under ASan+UBSan"
	make -j"$jobs" WERROR=1 SANITIZE=1
	stage="running the tests under ASan+UBSan"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	run_pass asan SANITIZE=1 || status=1
else
	verdicts+=("asan: skipped (SKIP_ASAN=1)")
fi

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
	stage="building the fuzz harnesses"
	echo "== short libFuzzer runs"
	make -j"$jobs" fuzz
	stage="running the fuzz harnesses"
	mkdir "$summary_dir/fuzz.d"
	# What a harness finds (crash-*, leak-*, timeout-*: the input) is
	# kept here, named in its summary lines ("Test unit written to").
	mkdir -p build-fuzz/artifacts
	# fuzz_one HARNESS: FUZZ_SECONDS of it on a copy of its corpus; prints
	# its verdict (and a failure's log) in one write, a failure's
	# telling lines to summary_dir/fuzz.d; status 1 on FAIL.
	fuzz_one() {
		local f=$1 name=${1##*/fuzz_} work out rc=0
		work=$(mktemp -d)
		if ! cp -r "tests/fuzz/corpus/$name/." "$work/"; then
			out="FAIL fuzz/$name: no corpus tests/fuzz/corpus/$name"
			printf '%s\n' "$out" | tee "$summary_dir/fuzz.d/$name"
			rm -rf "$work"
			return 1
		fi
		if "$f" -max_total_time="${FUZZ_SECONDS:-10}" -print_final_stats=0 \
			-artifact_prefix="build-fuzz/artifacts/$name-" \
			"$work" >"$work.log" 2>&1; then
			out="ok   fuzz/$name"
		else
			out="FAIL fuzz/$name"$'\n'"$(tail -n 30 "$work.log")"
			{
				echo "FAIL fuzz/$name"
				failure_lines "$work.log" | sed 's/^/     | /'
			} >"$summary_dir/fuzz.d/$name"
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
	harnesses=0
	for f in build-fuzz/fuzz_*; do
		[[ fuzz/${f##*/fuzz_} == *$pattern* ]] || continue
		while [ "$running" -ge "$fuzz_jobs" ]; do
			wait -n || status=1
			running=$((running - 1))
		done
		fuzz_one "$f" &
		running=$((running + 1))
		harnesses=$((harnesses + 1))
	done
	while [ "$running" -gt 0 ]; do
		wait -n || status=1
		running=$((running - 1))
	done
	cat "$summary_dir"/fuzz.d/* >"$summary_dir/fuzz.fails" 2>/dev/null ||
	    true
	fuzz_failed=$(grep -c '^FAIL' "$summary_dir/fuzz.fails" || true)
	if [ "$fuzz_failed" -gt 0 ]; then
		verdicts+=("fuzz: FAILED $(failed_names fuzz):\
 $((harnesses - fuzz_failed)) passed, $fuzz_failed failed")
	else
		verdicts+=("fuzz: $harnesses passed")
	fi
else
	verdicts+=("fuzz: skipped (SKIP_FUZZ=1)")
fi
stage=done
exit $status
