# tests/e2e/pg_lib.sh: a real PostgreSQL 15 (Debian's postgresql-15) for
# the end-to-end tests, sourced after lib.sh. The server runs as an
# unprivileged user (`nobody` when the test runs as root, else the test's
# own user), from a cluster of its own in $T/pg (a copy of the run's
# template, made once by initdb: pg_template), listening on a Unix
# socket in $T/pg/sock and on 127.0.0.1 at a free port; the test's cleanup
# stops it (a fast shutdown, then the process group is killed as every
# other daemon of the test), and its log is $T/pg.log (shown by `fail`).
# Every wait is bounded by E2E_WAIT_S. Authentication is `trust` for the
# local socket and 127.0.0.1 only: the cluster is private to the test.
#
# The functions (stable: other tests build on them):
#
#   pg_require          skips the test (word `postgresql`) unless this
#                       machine can run the server (pg_start calls it)
#   pg_start            makes the cluster on first use and starts the
#                       server; waits until it accepts connections. Sets
#                       PG_PID, PG_PORT, PG_DIR, PG_SOCK. Makes the role
#                       `gpupool` (superuser, no password) and the database
#                       `gpupool` on first use
#   pg_url [DB]         prints the TCP connection string of database DB
#                       (default gpupool): postgresql://gpupool@127.0.0.1:PORT/DB
#   pg_url_socket [DB]  the same through the Unix socket
#   pg_createdb DB      makes another database (e.g. a second pool's)
#   pg_psql SQL [DB]    runs SQL with psql as `gpupool` (-X -A -t -q,
#                       ON_ERROR_STOP); prints the rows; PG_RC is its status
#   pg_stop             fast shutdown (SIGINT), bounded wait; SIGKILL of its
#                       process group when it does not end
#   pg_kill9            SIGKILL of the server and every backend (a crash)
#   pg_restart          pg_stop then pg_start (same port and cluster)
#   pg_read_only on|off the cluster refuses (on) or accepts (off) writes:
#                       default_transaction_read_only, reloaded, existing
#                       sessions ended so that they take it
#   pg_running          status 0 when the server accepts connections
#   pg_template         prints the run's cluster template (made on first
#                       use; status 1 outside tests/run.sh)
#
# Coordinators over the test's server, each with a data directory of its
# own (the failover tests; pg_coords first):
#
#   pg_coords NAME...   a free port each (PG_COORD_PORT[NAME], all
#                       different) and a data directory (PG_COORD_DATA
#                       [NAME], default $T/coord-NAME: a test may set
#                       another before starting it)
#   pg_coord_url NAME   prints http://127.0.0.1:PORT
#   pg_coord_start NAME [VAR=VALUE...] [ARG...]
#                       starts coordinator NAME (log $T/coord-NAME.log) on
#                       the pool's database, VAR=VALUE in its environment,
#                       leader lease 3 s, node lease 4 s, heartbeats every
#                       300 ms, -v, and ARGs; sets PG_COORD_PID[NAME]
#   pg_coord_use NAME   the test's coordinator (lib.sh's COORD_DATA,
#                       COORD_PID, COORD_PORT: wait_ready, api ...) is NAME
#   pg_epoch            prints the leader epoch (gp_leader)
#   pg_failover FROM TO kill -9 of FROM; waits until the epoch rises and TO
#                       serves (pg_coord_use TO)
#
# Knobs: GP_PG_BIN (default /usr/lib/postgresql/15/bin), PG_RUN_AS (the
# user the server runs as when the test is root; default nobody).

PG_LIB_LOADED=1
PG_BIN=${GP_PG_BIN:-/usr/lib/postgresql/15/bin}
PG_RUN_AS=${PG_RUN_AS:-nobody}
PG_DIR="$T/pg"
PG_SOCK="$PG_DIR/sock"
PG_LOG="$T/pg.log"
PG_PID=
PG_PORT=
PG_RC=0

# pg_as CMD...: runs CMD as the server's user (root: PG_RUN_AS through
# setpriv, with a clean environment; else as we are).
pg_as() {
	if [ "$(id -u)" = 0 ]; then
		local uid gid
		uid=$(id -u "$PG_RUN_AS") && gid=$(id -g "$PG_RUN_AS") || return 1
		env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$PG_DIR" \
		    setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
	else
		"$@"
	fi
}

pg_require() {
	requirement_present postgresql ||
	    skip postgresql "no PostgreSQL 15 server in $PG_BIN (Debian's postgresql-15) or no setpriv"
}

# pg_running: the server accepts connections (pg_isready, 2 s bound).
pg_running() {
	[ -n "$PG_PORT" ] || return 1
	"$PG_BIN/pg_isready" -q -t 2 -h "$PG_SOCK" -p "$PG_PORT" -U gpupool \
	    -d postgres >/dev/null 2>&1
}

pg_url() {
	echo "postgresql://gpupool@127.0.0.1:$PG_PORT/${1:-gpupool}"
}

pg_url_socket() {
	echo "postgresql:///${1:-gpupool}?host=$PG_SOCK&port=$PG_PORT&user=gpupool"
}

pg_psql() { # SQL [DB]
	local out
	out=$("$PG_BIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -h "$PG_SOCK" \
	    -p "$PG_PORT" -U gpupool -d "${2:-gpupool}" -c "$1" 2>>"$PG_LOG")
	PG_RC=$?
	[ -n "$out" ] && printf '%s\n' "$out"
	return $PG_RC
}

pg_createdb() { # DB
	pg_psql "CREATE DATABASE \"$1\"" postgres >/dev/null ||
	    fail "pg_createdb $1 failed (see pg.log)"
}

# pg_initdb DIR: a new cluster in DIR (initdb without fsync: a test's
# scratch) with the settings every test's server shares; DIR must be an
# empty directory the server's user owns. The socket directory is the
# test's own: pg_init adds it.
pg_initdb() {
	pg_as "$PG_BIN/initdb" -D "$1" -U gpupool --auth=trust \
	    -E UTF8 --locale=C.UTF-8 --no-sync >>"$PG_LOG" 2>&1 || return 1
	# Small, private, durable: fsync stays on (the default), so that the
	# commits the coordinator waits for are real ones.
	cat >>"$1/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_permissions = 0777
max_connections = 60
shared_buffers = 32MB
dynamic_shared_memory_type = mmap
logging_collector = off
log_min_messages = warning
log_line_prefix = '%m [%p] '
EOF
}

# pg_template: prints the directory of this run's cluster template, made
# on first use: a fresh cluster (pg_initdb) that is never started, which
# each test copies (cp -a of a stopped cluster is a valid cluster of its
# own) instead of running initdb, the slowest part of a test's start on a
# loaded machine. It lives in the run's scratch directory
# (GP_TEST_RUN_DIR, tests/run.sh: removed when the run ends), keyed by
# the server's version and the user it runs as, and is made under a lock
# and renamed into place once complete, so that tests starting side by
# side make it once and never copy half of one. Status 1 (nothing
# printed) when there is no run directory, or it cannot be made in time:
# the caller runs initdb itself.
pg_template() {
	local run=${GP_TEST_RUN_DIR:-} version owner tmpl tmp fd rc=0
	[ -n "$run" ] && [ -d "$run" ] || return 1
	version=$("$PG_BIN/postgres" --version 2>/dev/null) || return 1
	version=${version##* }
	owner=$(id -un)
	[ "$(id -u)" = 0 ] && owner=$PG_RUN_AS
	tmpl="$run/pg-template-$version-$owner"
	if [ ! -s "$tmpl/PG_VERSION" ]; then
		exec {fd}>>"$run/pg-template.lock" || return 1
		if ! flock -w $((WAIT_S * 2)) "$fd"; then
			log "pg_template: the lock is busy; initdb of this test's own"
			exec {fd}>&-
			return 1
		fi
		if [ ! -s "$tmpl/PG_VERSION" ]; then
			tmp="$tmpl.tmp.$$"
			rm -rf "$tmp"
			if mkdir -p "$tmp" && chmod 700 "$tmp" &&
			    { [ "$(id -u)" != 0 ] || chown "$PG_RUN_AS:" "$tmp"; } &&
			    pg_initdb "$tmp" && mv "$tmp" "$tmpl"; then
				log "pg_template: made $tmpl"
			else
				rm -rf "$tmp"
				rc=1
			fi
		fi
		exec {fd}>&-
		[ $rc = 0 ] || return 1
	fi
	echo "$tmpl"
}

# pg_init: the test's cluster, once: a copy of the run's template
# (pg_template), else a cluster of its own (initdb).
pg_init() {
	local tmpl
	[ -s "$PG_DIR/data/PG_VERSION" ] && return 0
	mkdir -p "$PG_DIR/data" "$PG_SOCK" || fail "pg_init: cannot make $PG_DIR"
	if [ "$(id -u)" = 0 ]; then
		chown -R "$PG_RUN_AS:" "$PG_DIR" || fail "pg_init: chown $PG_DIR"
	fi
	chmod 700 "$PG_DIR/data"
	if tmpl=$(pg_template); then
		cp -a "$tmpl/." "$PG_DIR/data/" ||
		    fail "pg_init: cannot copy the cluster template $tmpl"
		log "PostgreSQL cluster copied from $tmpl"
	else
		pg_initdb "$PG_DIR/data" || fail "initdb failed (see pg.log)"
	fi
	echo "unix_socket_directories = '$PG_SOCK'" \
	    >>"$PG_DIR/data/postgresql.conf" || fail "pg_init: postgresql.conf"
}

# pg_start: see the top. On first start, the role's database.
pg_start() {
	pg_require
	pg_init
	local try deadline
	for try in 1 2 3; do
		[ -n "$PG_PORT" ] || PG_PORT=$(free_port)
		if [ "$(id -u)" = 0 ]; then
			spawn "$PG_LOG" env -i PATH=/usr/bin:/bin LANG=C.UTF-8 \
			    setpriv --reuid="$(id -u "$PG_RUN_AS")" \
			    --regid="$(id -g "$PG_RUN_AS")" --clear-groups -- \
			    "$PG_BIN/postgres" -D "$PG_DIR/data" -p "$PG_PORT"
		else
			spawn "$PG_LOG" "$PG_BIN/postgres" -D "$PG_DIR/data" \
			    -p "$PG_PORT"
		fi
		PG_PID=$SPAWNED_PID
		deadline=$((SECONDS + WAIT_S))
		until pg_running; do
			alive "$PG_PID" && [ $SECONDS -lt $deadline ] || break
			sleep 0.1
		done
		pg_running && break
		# The port was taken meanwhile, or the server failed: another
		# port, at most three tries.
		kill -KILL -- "-$PG_PID" 2>/dev/null
		wait_exit "$PG_PID" 10
		[ $SECONDS -ge $deadline ] && fail "PostgreSQL not ready after ${WAIT_S}s (see pg.log)"
		grep -q 'could not bind' "$PG_LOG" 2>/dev/null && PG_PORT=
	done
	pg_running || fail "PostgreSQL did not start (see pg.log)"
	if [ -z "$(pg_psql "SELECT 1 FROM pg_database WHERE datname = 'gpupool'" postgres)" ]; then
		pg_createdb gpupool
	fi
}

pg_stop() {
	[ -n "$PG_PID" ] || return 0
	kill -INT "$PG_PID" 2>/dev/null
	if ! wait_exit "$PG_PID" "$WAIT_S"; then
		kill -KILL -- "-$PG_PID" 2>/dev/null
		wait_exit "$PG_PID" 10 || fail "PostgreSQL $PG_PID survived SIGKILL"
	fi
	PG_PID=
}

pg_kill9() {
	[ -n "$PG_PID" ] || return 0
	kill -KILL -- "-$PG_PID" 2>/dev/null
	kill -KILL "$PG_PID" 2>/dev/null
	wait_exit "$PG_PID" 10 || fail "PostgreSQL $PG_PID survived SIGKILL"
	# Its backends are in its process group; wait until they are gone,
	# or the next start finds its shared memory still attached.
	local deadline=$((SECONDS + WAIT_S))
	while pgrep -g "$PG_PID" >/dev/null 2>&1; do
		[ $SECONDS -ge $deadline ] && fail "PostgreSQL backends survived SIGKILL"
		sleep 0.1
	done
	PG_PID=
}

pg_restart() {
	pg_stop
	pg_start
}

pg_read_only() { # on|off
	local v=off pids deadline
	[ "$1" = on ] && v=on
	pg_psql "ALTER SYSTEM SET default_transaction_read_only = $v" postgres >/dev/null &&
	    pg_psql "SELECT pg_reload_conf()" postgres >/dev/null ||
	    fail "pg_read_only $1 failed (see pg.log)"
	# pg_reload_conf() only signals the postmaster. Until it has read the
	# file, a new session (the coordinator reconnecting) still gets the old
	# value: once read-only, a submission committed 201 under "on" (CI).
	# A new session showing the value means every later one has it.
	deadline=$((SECONDS + WAIT_S))
	until [ "$(pg_psql "SHOW default_transaction_read_only" postgres)" = "$v" ]; do
		[ $SECONDS -ge $deadline ] && fail "pg_read_only $1: the server did not take the setting"
		sleep 0.05
	done
	# End the sessions opened before, and wait until they are gone:
	# pg_terminate_backend only signals them.
	pids=$(pg_psql "SELECT string_agg(pid::text, ',') FROM pg_stat_activity
	    WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'" postgres) ||
	    fail "pg_read_only $1: pg_stat_activity failed (see pg.log)"
	[ -n "$pids" ] || return 0
	pg_psql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	    WHERE pid IN ($pids)" postgres >/dev/null ||
	    fail "pg_read_only $1: pg_terminate_backend failed (see pg.log)"
	until [ "$(pg_psql "SELECT count(*) FROM pg_stat_activity WHERE pid IN ($pids)" postgres)" = 0 ]; do
		[ $SECONDS -ge $deadline ] && fail "pg_read_only $1: sessions $pids did not end"
		sleep 0.05
	done
}

# ---------------------------------------------- coordinators over it

declare -gA PG_COORD_PORT=() PG_COORD_DATA=() PG_COORD_PID=()

pg_coords() { # NAME...
	local name other taken
	for name in "$@"; do
		while :; do
			PG_COORD_PORT[$name]=$(free_port)
			taken=0
			for other in "${!PG_COORD_PORT[@]}"; do
				[ "$other" != "$name" ] &&
				    [ "${PG_COORD_PORT[$other]}" = "${PG_COORD_PORT[$name]}" ] &&
				    taken=1
			done
			[ $taken = 0 ] && break
		done
		PG_COORD_DATA[$name]=${PG_COORD_DATA[$name]:-$T/coord-$name}
	done
}

pg_coord_url() { # NAME
	echo "http://127.0.0.1:${PG_COORD_PORT[$1]:?pg_coords $1 first}"
}

pg_coord_start() { # NAME [VAR=VALUE...] [ARG...]
	local name=$1 envs=()
	shift
	while [ $# -gt 0 ] && [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
		envs+=("$1")
		shift
	done
	spawn "$T/coord-$name.log" env "${envs[@]+"${envs[@]}"}" "$GP" \
	    coordinator --listen "127.0.0.1:${PG_COORD_PORT[$name]}" \
	    --data "${PG_COORD_DATA[$name]}" --db "$(pg_url)" \
	    --advertise-url "$(pg_coord_url "$name")" --leader-lease-ms 3000 \
	    --lease-ms 4000 --heartbeat-ms 300 -v "$@"
	PG_COORD_PID[$name]=$SPAWNED_PID
}

pg_coord_use() { # NAME
	COORD_DATA=${PG_COORD_DATA[$1]} COORD_PID=${PG_COORD_PID[$1]}
	COORD_PORT=${PG_COORD_PORT[$1]}
}

pg_epoch() {
	pg_psql "SELECT epoch FROM gp_leader WHERE id = 1"
}

pg_failover() { # FROM TO
	local from=$1 to=$2 epoch deadline
	epoch=$(pg_epoch)
	is_uint "$epoch" || fail "pg_failover: no leader epoch ('$epoch')"
	kill -KILL "${PG_COORD_PID[$from]}"
	wait_exit "${PG_COORD_PID[$from]}" || fail "$from survived SIGKILL"
	deadline=$((SECONDS + WAIT_S))
	until [ "$(pg_epoch)" -gt "$epoch" ] 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && fail "no new leader within ${WAIT_S}s of $from's kill -9"
		sleep 0.05
	done
	pg_coord_use "$to"
	deadline=$((SECONDS + WAIT_S))
	until api "$ADMIN_TOKEN" GET /v1/whoami && [ "$API_STATUS" = 200 ]; do
		[ $SECONDS -ge $deadline ] && fail "$to does not serve after taking the lead (HTTP $API_STATUS)"
		sleep 0.1
	done
}

# The test's cleanup: first every other process the test started is asked
# to end (SIGTERM, as lib.sh's cleanup does; at most 5 s), while the
# server still answers: a coordinator whose database is gone retries it
# instead of ending, and would only end at cleanup's SIGKILL 5 s later
# (and, killed, never say what its sanitizer found). Then the server
# stops (a fast shutdown: its backends end and nothing is left in shared
# memory), then lib.sh's cleanup runs.
pg_on_exit() {
	local rc=$? pid i left others=()
	trap - EXIT
	for pid in "${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}"; do
		[ "$pid" != "$PG_PID" ] && ours "$pid" && others+=("$pid")
	done
	for pid in "${others[@]+"${others[@]}"}"; do
		kill -TERM -- "-$pid" 2>/dev/null
		kill -TERM "$pid" 2>/dev/null
	done
	for ((i = 0; i < 50 && ${#others[@]} > 0; i++)); do
		left=0
		for pid in "${others[@]}"; do
			ours "$pid" && left=1
		done
		[ $left = 0 ] && break
		sleep 0.1
	done
	if [ -n "$PG_PID" ] && alive "$PG_PID"; then
		kill -INT "$PG_PID" 2>/dev/null
		wait_exit "$PG_PID" 15 || kill -KILL -- "-$PG_PID" 2>/dev/null
	fi
	(exit "$rc")
	cleanup
}
trap pg_on_exit EXIT
