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
n=0
skipped=()
for t in $PG_SUITE; do
	n=$((n + 1))
	pg_createdb "suite$n"
	start=$SECONDS
	GP_TEST_DB=postgresql GP_TEST_PG_URL=$(pg_url "suite$n") \
	    bash "$(dirname "$0")/$t.sh" >"$T/$t.out" 2>&1
	rc=$?
	case $rc in
	0) log "ok   $t on PostgreSQL ($((SECONDS - start))s)" ;;
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
