#!/usr/bin/env bash
# test_pg_lib: the PostgreSQL harness itself (tests/e2e/pg_lib.sh): the
# server starts as an unprivileged user, is reached by TCP and by its
# socket, refuses writes when made read-only and takes them again, keeps
# committed rows across a crash (SIGKILL) and a restart.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start
# Its own cluster: under tests/run.sh a copy of the run's template (the
# same system identifier: initdb makes a new one each time), which is
# never started itself.
assert_eq "$PG_DIR/data" "$(pg_psql 'SHOW data_directory')" "the server's data directory"
if [ -n "${GP_TEST_RUN_DIR:-}" ]; then
	tmpl=$(pg_template) || fail "no cluster template in $GP_TEST_RUN_DIR"
	[ -e "$tmpl/postmaster.pid" ] && fail "the cluster template $tmpl was started"
	sysid() { "$PG_BIN/pg_controldata" "$1" | sed -n 's/^Database system identifier: *//p'; }
	id=$(sysid "$tmpl")
	[ -n "$id" ] || fail "no system identifier in the template $tmpl"
	assert_eq "$id" "$(sysid "$PG_DIR/data")" "the cluster's system identifier (a copy of the template)"
fi
if [ "$(id -u)" = 0 ]; then
	assert_eq "$PG_RUN_AS" "$(ps -o user= -p "$PG_PID" | tr -d ' ')" "the server's user"
fi
pg_psql "CREATE TABLE t (x int)" || fail "CREATE TABLE"
pg_psql "INSERT INTO t VALUES (1)" || fail "INSERT"
pg_read_only on
pg_psql "INSERT INTO t VALUES (2)" 2>/dev/null && fail "an INSERT committed on a read-only server"
pg_read_only off
pg_psql "INSERT INTO t VALUES (3)" || fail "INSERT after read-only off"
pg_kill9
pg_start
assert_eq 2 "$(pg_psql 'SELECT count(*) FROM t')" "rows after a crash"
pg_restart
assert_eq 42 "$(psql -X -Atc 'SELECT 42' "$(pg_url)")" "TCP connection string"
assert_eq 43 "$(psql -X -Atc 'SELECT 43' "$(pg_url_socket)")" "socket connection string"
pg_createdb other
assert_eq 1 "$(pg_psql 'SELECT 1' other)" "a second database"
