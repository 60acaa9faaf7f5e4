#!/usr/bin/env bash
# test_pg_lib: the PostgreSQL harness itself (tests/e2e/pg_lib.sh): the
# server starts as an unprivileged user, is reached by TCP and by its
# socket, refuses writes when made read-only and takes them again, keeps
# committed rows across a crash (SIGKILL) and a restart.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start
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
