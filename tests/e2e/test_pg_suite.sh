#!/usr/bin/env bash
# test_pg_suite: end-to-end tests that touch the pool's state, run again
# with the coordinator on PostgreSQL (issue 19): one server (pg_lib.sh),
# a fresh database for each test (GP_TEST_DB=postgresql, GP_TEST_PG_URL:
# lib.sh's start_coordinator passes it as --db). The list is chosen to
# cover the store's every kind of write and read while keeping CI short:
# submissions and their logs, job arrays (their rows and tasks without),
# cancels, a coordinator kill -9 and restart (the load), tokens made and
# revoked (the id floor), the ledger's postings and usage, budgets; and
# the blob users' records in the pool's database (checkpoint versions,
# data sets with shares and quotas, images: store_meta.h).
# PG_SUITE="test_a test_b" runs others.
# Each test's own SKIP passes through as a SKIP of this one; a FAIL is
# this test's FAIL, with the test's output.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

PG_SUITE=${PG_SUITE:-test_submit_run_logs test_submit_array test_cancel
test_coordinator_kill9 test_tokens test_acct_ledger test_acct_budget
test_checkpoint_store test_data_sets test_image_store}

pg_start
# PG_SUITE_JOBS (default 2) of them at once: each is its own bash with its
# own temp dir, ports, coordinator and agents (lib.sh), and its own
# database on the one server; they share nothing else.
PG_SUITE_JOBS=${PG_SUITE_JOBS:-2}
run_on_pg() { # N TEST: TEST on database suiteN; its status in $T/TEST.rc
	local start=$SECONDS rc
	GP_TEST_DB=postgresql GP_TEST_PG_URL=$(pg_url "suite$1") \
	    bash "$(dirname "$0")/$2.sh" >"$T/$2.out" 2>&1
	rc=$?
	echo "$rc $((SECONDS - start))" >"$T/$2.rc"
}
declare -A running=()
reap_one() { # waits for one of the runs (not the server, a child too)
	local pid
	wait -n -p pid "${!running[@]}"
	unset "running[$pid]"
}
n=0
for t in $PG_SUITE; do
	n=$((n + 1))
	pg_createdb "suite$n"
	while [ ${#running[@]} -ge "$PG_SUITE_JOBS" ]; do reap_one; done
	run_on_pg "$n" "$t" &
	running[$!]=$t
done
while [ ${#running[@]} -gt 0 ]; do reap_one; done
n=0
skipped=()
for t in $PG_SUITE; do
	n=$((n + 1))
	read -r rc secs <"$T/$t.rc" || fail "$t left no status"
	case $rc in
	0) log "ok   $t on PostgreSQL (${secs}s)" ;;
	"$E2E_EXIT_SKIP")
		log "SKIP $t: $(grep -m1 '^SKIP' "$T/$t.out")"
		skipped+=("$(grep -m1 '^SKIP' "$T/$t.out")") ;;
	*)
		tail -n 40 "$T/$t.out" >&2
		fail "$t failed on PostgreSQL (exit $rc)" ;;
	esac
	# What the test wrote went to its own database: a sign it used it.
	[ $rc = 0 ] && [ "$(pg_psql "SELECT count(*) FROM gp_tokens" "suite$n")" -gt 0 ] ||
	    [ $rc != 0 ] || fail "$t left no rows in its database: it did not run on PostgreSQL"
done
# A test that skipped here names its requirement: pass it on.
if [ ${#skipped[@]} -gt 0 ]; then
	printf '%s\n' "${skipped[@]}" | sed "s/^SKIP [^:]*:/SKIP $TEST_NAME:/"
	exit "$E2E_EXIT_SKIP"
fi
