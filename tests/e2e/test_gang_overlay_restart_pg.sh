#!/usr/bin/env bash
# Issue 14: test_gang_overlay_restart.sh with the pool's state in
# PostgreSQL (GP_TEST_DB=postgresql: a PostgreSQL 15 of the test's own,
# tests/e2e/pg_lib.sh, started in the test's "internet" namespace beside
# the coordinators) and a failover (GPOVR_FAILOVER=1): the agents know two
# coordinators; the leader is killed (-9) while the gang runs, the
# standby takes over, loads the gang's overlay from gp_jobs and must
# answer it the same. Needs what that test needs, and postgresql (SKIP
# without).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../requirements.sh"
if ! requirement_present postgresql; then
	echo "SKIP test_gang_overlay_restart_pg: needs postgresql: not on this machine"
	exit 77
fi
GP_TEST_DB=postgresql GPOVR_FAILOVER=1 exec bash "$here/test_gang_overlay_restart.sh"
