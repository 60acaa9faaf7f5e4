#!/usr/bin/env bash
# tests/run.sh: runs every test: unit binaries, fuzz corpora replays and the
# end-to-end scripts. Prints one line per test (ok, FAIL or SKIP) and ends
# with "N passed, N failed" (and ", N skipped" when some were).
# Usage: BUILD=build tests/run.sh [PATTERN]
#
# GPUPOOL_TEST_SUMMARY=FILE (scripts/test.sh sets it): each FAIL line is
# also appended to FILE with the few lines of its log that say why
# (tests/failure_lines.sh), and the counts line ends it, so that a long run
# can repeat its failures at its very end.
#
# Skips: a test that cannot run here exits 77 after printing one line
# "SKIP <test>: needs <word>: <why>" per thing it left out (tests/unit/unit.h,
# `skip` in tests/e2e/lib.sh), <word> one of tests/requirements.sh. It is
# shown as SKIP with its reasons, never ok. It is a FAIL instead when it
# names no requirement or an unknown one, when its requirement is in
# GPUPOOL_TEST_EXPECT (what this machine promises, e.g. "root oci-runtime"),
# or, under CI=true, when this machine has the requirement after all: a skip
# must not hide coverage a CI machine should give.
set -u
cd "$(dirname "$0")/.."
. tests/requirements.sh
. tests/failure_lines.sh
BUILD=${BUILD:-build}
pattern=${1:-}
export GPUPOOL_BIN="$PWD/$BUILD/gpupool"
export GPUPOOL_BUILD="$PWD/$BUILD"
passed=0
failed=0
skipped=0
failures=()
SKIP_STATUS=77
logdir=$(mktemp -d /tmp/gpupool-tests.XXXXXX)
# The run's scratch, shared by its tests and removed when it ends: what
# is made once per run instead of once per test (tests/e2e/pg_lib.sh's
# PostgreSQL cluster template). Beside the tests' own dirs (E2E_TMPDIR),
# traversable: the servers run as an unprivileged user.
GP_TEST_RUN_DIR=$(mktemp -d "${E2E_TMPDIR:-/var/tmp}/gpupool-run.XXXXXX") &&
    chmod 755 "$GP_TEST_RUN_DIR" || exit 1
export GP_TEST_RUN_DIR
trap 'rm -rf "$GP_TEST_RUN_DIR"' EXIT

# judge_skip LOG: 0 when every SKIP line in LOG is a skip allowed here
# (prints their reasons in SKIP_WHY), else 1 (prints why in SKIP_WHY).
judge_skip() {
	local line need why ci=0 n=0
	[ "${CI:-}" = true ] && ci=1
	SKIP_WHY=
	while IFS= read -r line; do
		n=$((n + 1))
		if [[ $line != *": needs "* ]]; then
			SKIP_WHY="a skip that names no requirement: $line"
			return 1
		fi
		need=${line#*: needs }
		need=${need%%:*}
		why=${line#*: needs "$need"}
		why=${why#: }
		requirement_present "$need"
		case $? in
		2)
			SKIP_WHY="unknown requirement '$need' (tests/requirements.sh)"
			return 1 ;;
		0)
			if [ $ci = 1 ]; then
				SKIP_WHY="skipped for want of '$need', which this machine has (CI=true)"
				return 1
			fi ;;
		esac
		if [[ " ${GPUPOOL_TEST_EXPECT:-} " == *" $need "* ]]; then
			SKIP_WHY="skipped for want of '$need', which GPUPOOL_TEST_EXPECT promises"
			return 1
		fi
		SKIP_WHY+="${SKIP_WHY:+; }needs $need: $why"
	done < <(grep -E '^SKIP [^ ]+: ' "$1")
	if [ $n = 0 ]; then
		SKIP_WHY="exited $SKIP_STATUS (skip) without a SKIP line saying what it needs"
		return 1
	fi
	return 0
}

# summarise LINE LOG: LINE and LOG's telling lines to GPUPOOL_TEST_SUMMARY.
summarise() {
	[ -n "${GPUPOOL_TEST_SUMMARY:-}" ] || return 0
	{
		printf '%s\n' "$1"
		failure_lines "$2" | sed 's/^/     | /'
	} >>"$GPUPOOL_TEST_SUMMARY"
}

# report NAME RC LOG SECONDS: one line for a finished test, and the counts.
report() {
	local name=$1 rc=$2 log=$3 secs=$4 line
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok   $name (${secs}s)"
	elif [ "$rc" -eq "$SKIP_STATUS" ] && judge_skip "$log"; then
		skipped=$((skipped + 1))
		echo "SKIP $name (${secs}s): $SKIP_WHY"
	else
		failed=$((failed + 1))
		failures+=("$name")
		if [ "$rc" -eq "$SKIP_STATUS" ]; then
			line="FAIL $name (${secs}s): $SKIP_WHY"
		else
			line="FAIL $name (${secs}s, status $rc)"
		fi
		echo "$line"
		tail -n 40 "$log" | sed 's/^/     | /'
		summarise "$line" "$log"
	fi
}

run_one() { # name command...
	local name=$1
	shift
	if [ -n "$pattern" ] && [[ $name != *$pattern* ]]; then
		return
	fi
	local start=$SECONDS log="$logdir/${name//\//_}.log" rc=0
	"$@" >"$log" 2>&1 || rc=$?
	report "$name" "$rc" "$log" $((SECONDS - start))
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
	report "$name" "$rc" "$log" $((SECONDS - e2e_start[$name]))
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
counts="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && counts+=", $skipped skipped"
echo "$counts"
if [ -n "${GPUPOOL_TEST_SUMMARY:-}" ]; then
	echo "counts: $counts" >>"$GPUPOOL_TEST_SUMMARY"
fi
[ "$failed" -eq 0 ]
