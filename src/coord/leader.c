/*
 * leader.c: leadership among coordinators sharing one PostgreSQL database
 * (leader.h). One thread, one libpq connection of its own:
 *
 * - standby: every poll_ms, SELECT pg_try_advisory_lock(KEY) and the
 *   leader's URL from gp_leader. When the lock is won, in the same
 *   session: UPDATE gp_leader SET epoch = epoch + 1, addr = <ours>,
 *   since = now() RETURNING epoch; that epoch is leader_epoch() and
 *   leader_wait() returns. A deposed leader stopped with a write
 *   transaction open (its fence's lock on that row) cannot hold the
 *   raise up: the server aborts that transaction after the lease, and
 *   else raise_epoch ends its session.
 * - leader: every lease_ms / 4, SELECT epoch FROM gp_leader on the lock's
 *   connection, each with a deadline of half the lease. The session has
 *   idle_session_timeout = lease_ms: a leader that stops asking (paused,
 *   SIGSTOPped, its machine frozen) is cut off by the server itself,
 *   which drops the lock, and a standby takes it and raises the epoch.
 *   A leader whose ping reads another epoch steps down at once:
 *   leader_epoch() goes to 0 first (no write transaction can pass the
 *   store's check from then on; the epoch in the database fences the
 *   commits that were already on their way), then on_lost runs. So does
 *   one whose ping fails (connection lost, deadline passed) while other
 *   coordinators are connected (a standby takes over); a lone one tries
 *   to regain the lock instead (regain()): with its epoch unchanged it
 *   leads on (a database restart does not restart a lone coordinator),
 *   else it steps down.
 * - every coordinator also holds an advisory lock keyed on its advertised
 *   URL (url_lock_sql) for as long as its session lives: a second live
 *   one advertising the same URL exits (LEADER_EXIT_CONFIG). It writes
 *   that URL into gp_coordinators with its session's pid; the leader's
 *   ping reads back the URLs whose session still holds a URL lock
 *   (LIVE_SQL): the pool's coordinators, which the API lists
 *   (leader_coordinators, GET /v1/coordinators) so that the dashboard
 *   moves only to a coordinator the pool vouches for.
 *
 * Stepping down ends the process (LEADER_EXIT_STEPPED_DOWN) rather than
 * turning it back into a standby in-process: its model, suspended
 * connections, long polls and the state thread's queue were all built
 * from a leadership it no longer has, and unwinding every one of them is
 * code that would run only on failover; a fresh start (what the
 * supervisor does: systemd's Restart=) is the path every kill -9 already
 * tests, and it comes back a standby that loads nothing until it wins.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gp.h"
#include "leader.h"
#include "log.h"
#include "pg.h"
#include "util.h"


static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	pthread_t thread;
	int started;
	int stopping;	    /* under mu */
	int leading;	    /* under mu */
	char *conninfo;
	char *advertise;
	char *data_dir;	    /* NULL: no pool to check */
	int64_t lease_ms, poll_ms;
	void (*on_lost)(const char *why);
	char url[512];	    /* under mu: the leader's URL */
	PGconn *conn;	    /* the leader thread's alone */
	int connect_failures; /* in a row */
	int registered;	    /* this URL is in gp_coordinators */
	int read_only;	    /* the database refused a write (logged once) */
	int64_t standbys;   /* the leader's last ping: other coordinators */
	char *coordinators; /* under mu: LIVE_SQL's JSON array; NULL: none */
} L = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static _Atomic int64_t epoch_now;   /* 0 unless leading */
static atomic_int active;	    /* leader_start was called */
static atomic_int serving;	    /* the leader serves the API */
static atomic_int lost;		    /* leader_lost ran: never leads again */

int64_t
leader_epoch(void)
{
	return atomic_load(&epoch_now);
}

int
leader_standby(void)
{
	return atomic_load(&active) && !atomic_load(&serving);
}

void
leader_set_serving(void)
{
	atomic_store(&serving, 1);
}

void
leader_url(char *out, size_t len)
{
	pthread_mutex_lock(&L.mu);
	gp_strlcpy(out, L.url, len);
	pthread_mutex_unlock(&L.mu);
}

static void
set_url(const char *url)
{
	pthread_mutex_lock(&L.mu);
	gp_strlcpy(L.url, url, sizeof(L.url));
	pthread_mutex_unlock(&L.mu);
}

static int
stopping(void)
{
	int s;

	pthread_mutex_lock(&L.mu);
	s = L.stopping;
	pthread_mutex_unlock(&L.mu);
	return s;
}

/* Sleeps ms, or less when leader_stop is called. */
static void
nap(int64_t ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&L.mu);
	while (!L.stopping &&
	    pthread_cond_timedwait(&L.cond, &L.mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&L.mu);
}

/* libpq's text, on one line (log lines are one line each). */
static const char *
one_line(const char *text, char *buf, size_t len)
{
	size_t i;

	gp_strlcpy(buf, text, len);
	for (i = 0; buf[i] != '\0'; i++)
		if (buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')
			buf[i] = buf[i + 1] == '\0' ? '\0' : ' ';
	return buf;
}

/* The server's NOTICEs ("already exists, skipping") are no news. */
static void
quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

static void
drop_connection(void)
{
	if (L.conn != NULL)
		PQfinish(L.conn);
	L.conn = NULL;
}

/*
 * One statement on the lock's connection, answered within deadline_ms
 * (a server that went away without a word, a network cut, cannot hold
 * the thread). OUT: *res (PQclear) on success. 0, GP_ETIMEDOUT, GP_EIO
 * (the connection is then dropped: the session, and the lock with it, are
 * gone or about to be: a session whose client went away while it waited
 * ends within client_connection_check_interval, connect_db), or
 * GP_ECONFLICT when lock_timeout ended a lock wait (the connection kept).
 */
static int
query(const char *sql, int nparams, const char *const *params,
    int64_t deadline_ms, PGresult **res)
{
	int64_t end = gp_mono_ms() + deadline_ms;
	PGresult *r, *last = NULL;
	const char *st;
	char text[256];
	int ok;

	*res = NULL;
	if (L.conn == NULL || PQstatus(L.conn) != CONNECTION_OK)
		goto broken;
	if (!PQsendQueryParams(L.conn, sql, nparams, NULL, params, NULL, NULL,
	    0))
		goto broken;
	for (;;) {
		if (!PQconsumeInput(L.conn))
			goto broken;
		while (!PQisBusy(L.conn)) {
			r = PQgetResult(L.conn);
			if (r == NULL)
				goto done;
			PQclear(last);
			last = r;
		}
		struct pollfd pfd = {PQsocket(L.conn), POLLIN, 0};
		int64_t left = end - gp_mono_ms();

		if (left <= 0) {
			PQclear(last);
			drop_connection();
			return GP_ETIMEDOUT;
		}
		if (poll(&pfd, 1, (int)(left > 200 ? 200 : left)) < 0 &&
		    errno != EINTR)
			goto broken;
	}
done:
	ok = last != NULL && (PQresultStatus(last) == PGRES_TUPLES_OK ||
	    PQresultStatus(last) == PGRES_COMMAND_OK);
	if (!ok && last != NULL && (st = PQresultErrorField(last,
	    PG_DIAG_SQLSTATE)) != NULL && strcmp(st, "55P03") == 0 &&
	    PQstatus(L.conn) == CONNECTION_OK) {
		PQclear(last);
		return GP_ECONFLICT; /* lock_timeout: the caller's to handle */
	}
	if (!ok && last != NULL && (st = PQresultErrorField(last,
	    PG_DIAG_SQLSTATE)) != NULL && strcmp(st, "25006") == 0 &&
	    PQstatus(L.conn) == CONNECTION_OK) {
		/* read_only_sql_transaction: the caller's (read_only()) */
		PQclear(last);
		if (PQtransactionStatus(L.conn) != PQTRANS_IDLE)
			PQclear(PQexec(L.conn, "ROLLBACK"));
		return GP_EPERM;
	}
	if (!ok) {
		gp_warn("leader: query failed sql=\"%.40s\" error=\"%s\"", sql,
		    one_line(last != NULL ? PQresultErrorMessage(last) :
				   PQerrorMessage(L.conn), text, sizeof(text)));
		PQclear(last);
		if (PQstatus(L.conn) != CONNECTION_OK)
			drop_connection();
		return GP_EIO;
	}
	*res = last;
	return 0;
broken:
	PQclear(last);
	gp_warn("leader: database connection lost error=\"%s\"",
	    one_line(L.conn != NULL ? PQerrorMessage(L.conn) : "not connected",
		text, sizeof(text)));
	drop_connection();
	return GP_EIO;
}

/* A statement whose answer is not needed. 0 or as query(). */
static int
exec(const char *sql, int64_t deadline_ms)
{
	PGresult *res;
	int rc = query(sql, 0, NULL, deadline_ms, &res);

	PQclear(res);
	return rc;
}

/*
 * The advertised URL's own advisory lock (the two-key space, apart from
 * the one-key locks of the election and the migrations), keyed on 64
 * bits of its MD5: held by every coordinator, leader or standby, for as
 * long as its session lives, so that a second live coordinator
 * advertising the same URL cannot run (clients sent to "the leader"
 * would reach either).
 */
static const char url_lock_sql[] =
    "SELECT pg_try_advisory_lock(('x' || substr(h, 1, 8))::bit(32)::int,"
    " ('x' || substr(h, 9, 8))::bit(32)::int)"
    " FROM (SELECT md5(lower(rtrim($1, '/'))) AS h) AS u";

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS gp_leader ("
    " id int PRIMARY KEY CHECK (id = 1),"
    " epoch bigint NOT NULL,"
    " addr text NOT NULL,"
    " since timestamptz)";

/*
 * The pool's coordinators: each one's advertised URL and the pid of the
 * session that holds its URL lock. A row counts while that session holds
 * a URL lock (a session of the leader thread's: nothing else takes
 * two-key advisory locks); one whose session ended is dead, removed by
 * the next coordinator that registers (register_sql).
 */
static const char create_coordinators_sql[] =
    "CREATE TABLE IF NOT EXISTS gp_coordinators ("
    " url text PRIMARY KEY,"
    " pid int NOT NULL,"
    " since timestamptz NOT NULL)";

/* The session pid's URL lock, granted, in this database. */
#define URL_LOCK_HELD(pid)                                                  \
	"EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory'"    \
	" AND l.objsubid = 2 AND l.granted AND l.pid = " pid                 \
	" AND l.database = (SELECT oid FROM pg_database"                     \
	" WHERE datname = current_database()))"

/*
 * After the URL lock was claimed: the dead rows and any other row of
 * this session's pid (a pid is reused) go, then this URL is ours.
 */
static const char unregister_dead_sql[] =
    "DELETE FROM gp_coordinators c WHERE c.url <> $1 AND"
    " (c.pid = pg_backend_pid() OR NOT " URL_LOCK_HELD("c.pid") ")";
static const char register_sql[] =
    "INSERT INTO gp_coordinators (url, pid, since)"
    " VALUES ($1, pg_backend_pid(), now()) ON CONFLICT (url)"
    " DO UPDATE SET pid = excluded.pid, since = excluded.since";

/* The live coordinators' URLs, a JSON array (the leader's ping). */
#define LIVE_SQL                                                            \
	"(SELECT coalesce(json_agg(c.url ORDER BY c.url), '[]')"             \
	" FROM gp_coordinators c WHERE " URL_LOCK_HELD("c.pid") ")"

/*
 * The data directory's pool (DATA/pool_id, written by the store when it
 * first opened there) against the database's (gp_pool, pg.c): a
 * coordinator pointed at another pool's database would stand by for
 * ever, or lead it, so it exits (LEADER_EXIT_CONFIG), as the store's own
 * check (gp_store_check_pool) made it when it took the lead at start.
 * 0 when they agree or either has none yet; GP_EIO when the database
 * could not be asked (the connection is dropped).
 */
static int
check_pool(void)
{
	char path[1200], have[80], text[96];
	const char *theirs;
	PGresult *res;
	ssize_t n;
	int fd, rc = 0;

	if (L.data_dir == NULL)
		return 0;
	snprintf(path, sizeof(path), "%s/pool_id", L.data_dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0; /* a fresh directory: the store writes it */
	n = read(fd, have, sizeof(have) - 1);
	close(fd);
	have[n > 0 ? n : 0] = '\0';
	have[strcspn(have, "\n")] = '\0';
	if (have[0] == '\0')
		return 0;
	if (query("SELECT to_regclass('gp_pool') IS NOT NULL", 0, NULL,
	    L.lease_ms, &res) != 0) {
		drop_connection();
		return GP_EIO;
	}
	rc = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!rc)
		return 0; /* a fresh database: the store makes gp_pool */
	if (query("SELECT pool_id FROM gp_pool WHERE id = 1", 0, NULL,
	    L.lease_ms, &res) != 0) {
		drop_connection();
		return GP_EIO;
	}
	theirs = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "";
	if (theirs[0] != '\0' && strcmp(theirs, have) != 0) {
		gp_error("refusing to run: the database belongs to another "
			 "pool (%s) than this data directory (%s: pool %s); "
			 "exiting with status %d",
		    one_line(theirs, text, sizeof(text)), L.data_dir, have,
		    LEADER_EXIT_CONFIG);
		_exit(LEADER_EXIT_CONFIG);
	}
	PQclear(res);
	return 0;
}

/*
 * The database refused a write (read-only: default_transaction_read_only,
 * or a standby server the connection string reached): logged once, until
 * a write goes through (writable()). what: the write refused.
 */
static void
read_only(const char *what)
{
	if (L.read_only)
		return;
	L.read_only = 1;
	gp_warn("leader: the database is read-only (refused %s): until it "
		"accepts writes no coordinator can take the lead, a leader's "
		"writes wait (or, stopping, are answered not committed) and "
		"this one is not listed in gp_coordinators",
	    what);
}

static void
writable(void)
{
	if (!L.read_only)
		return;
	L.read_only = 0;
	gp_info("leader: the database accepts writes again");
}

/*
 * gp_leader (with its row) and gp_coordinators exist: 1, else 0 (the
 * tables are to be made); < 0 when the database could not be asked.
 * Read only: a read-only server answers it.
 */
static int
tables_ready(int64_t deadline_ms)
{
	PGresult *res;
	int ready;

	if (query("SELECT to_regclass('gp_leader') IS NOT NULL AND "
		  "to_regclass('gp_coordinators') IS NOT NULL", 0, NULL,
	    deadline_ms, &res) != 0)
		return -1;
	ready = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!ready)
		return 0;
	if (query("SELECT count(*) FROM gp_leader WHERE id = 1", 0, NULL,
	    deadline_ms, &res) != 0)
		return -1;
	ready = strcmp(PQgetvalue(res, 0, 0), "1") == 0;
	PQclear(res);
	return ready;
}

/*
 * This coordinator's URL into gp_coordinators (unregister_dead_sql, then
 * register_sql), its URL lock held. 0; GP_EPERM when the database is
 * read-only (the connection kept: tried again later, L.registered stays
 * 0); GP_EIO (the connection dropped).
 */
static int
register_url(int64_t deadline_ms)
{
	const char *params[1] = {L.advertise};
	PGresult *res;
	int i, rc;

	for (i = 0; i < 2; i++) {
		rc = query(i == 0 ? unregister_dead_sql : register_sql, 1,
		    params, deadline_ms, &res);
		if (rc == GP_EPERM) {
			read_only("registering in gp_coordinators");
			return GP_EPERM;
		}
		if (rc != 0) {
			drop_connection();
			return GP_EIO;
		}
		PQclear(res);
	}
	L.registered = 1;
	writable();
	return 0;
}

/*
 * Connects, sets the session's lease (idle_session_timeout, and
 * idle_in_transaction_session_timeout as pg.c's sessions have it; and
 * client_connection_check_interval: a session this thread dropped in
 * the middle of a lock wait must not live on holding its locks, the
 * URL's among them) and makes sure gp_leader has its
 * one row. The table is made under the migrations' transaction-level
 * advisory lock (pg.c: it makes gp_leader too), so that two coordinators
 * starting together do not both try to create it (gp_coordinators
 * too). Then claims the advertised URL (url_lock_sql) and registers it
 * in gp_coordinators. 0, GP_EIO, or GP_ECONFLICT when another session
 * holds the URL (the connection is then dropped).
 */
static int
connect_db(void)
{
	/* Ours first: the operator's connection string overrides them. */
	const char *keys[] = {"connect_timeout", "keepalives",
	    "keepalives_idle", "keepalives_interval", "keepalives_count",
	    "application_name", "dbname", NULL};
	const char *values[] = {"5", "1", "5", "2", "3", "gpupool-leader",
	    L.conninfo, NULL};
	const char *params[1] = {L.advertise};
	char sql[128], idle_tx[128], check[128], lock[96], text[256];
	int64_t t = L.lease_ms;
	PGresult *res;
	int claimed, ready, rc = 0;

	L.conn = PQconnectdbParams(keys, values, 1);
	if (L.conn == NULL || PQstatus(L.conn) != CONNECTION_OK) {
		/* Once per outage at warn; every retry at debug. */
		gp_log(L.connect_failures++ == 0 ? GP_LOG_WARN : GP_LOG_DEBUG,
		    "leader: cannot connect to the database, retrying "
		    "error=\"%s\"", one_line(L.conn != NULL ?
		    PQerrorMessage(L.conn) : "out of memory", text,
		    sizeof(text)));
		drop_connection();
		return GP_EIO;
	}
	if (L.connect_failures > 0)
		gp_info("leader: database reachable again after %d failed "
		    "connection attempts", L.connect_failures);
	L.connect_failures = 0;
	PQsetNoticeProcessor(L.conn, quiet, NULL);
	snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%lld)",
	    (long long)PG_MIGRATE_LOCK);
	snprintf(sql, sizeof(sql), "SET idle_session_timeout = %lld",
	    (long long)t);
	snprintf(idle_tx, sizeof(idle_tx),
	    "SET idle_in_transaction_session_timeout = %lld", (long long)t);
	snprintf(check, sizeof(check),
	    "SET client_connection_check_interval = %lld",
	    (long long)(t / 2 > 1000 ? 1000 : t / 2));
	if (exec(sql, t) != 0 || exec(idle_tx, t) != 0 || exec(check, t) != 0 ||
	    (ready = tables_ready(t)) < 0) {
		drop_connection();
		return GP_EIO;
	}
	/*
	 * DDL only when something is missing: a read-only server (which
	 * refuses CREATE TABLE, even IF NOT EXISTS) is joined as it is, and
	 * this coordinator stands by until it accepts writes.
	 */
	if (!ready && (exec("BEGIN", t) != 0 || exec(lock, t) != 0 ||
	    (rc = exec(create_sql, t)) != 0 ||
	    (rc = exec(create_coordinators_sql, t)) != 0 ||
	    (rc = exec("INSERT INTO gp_leader (id, epoch, addr) VALUES "
		 "(1, 0, '') ON CONFLICT (id) DO NOTHING", t)) != 0 ||
	    (rc = exec("COMMIT", t)) != 0)) {
		if (rc == GP_EPERM)
			read_only("creating the election's tables");
		drop_connection();
		return GP_EIO;
	}
	if (query(url_lock_sql, 1, params, t, &res) != 0) {
		drop_connection();
		return GP_EIO;
	}
	claimed = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!claimed) {
		drop_connection();
		return GP_ECONFLICT;
	}
	L.registered = 0;
	if (register_url(t) == GP_EIO)
		return GP_EIO;
	return check_pool();
}

/*
 * connect_db, and what to do when the URL is taken: another session may
 * hold it only for a while (a coordinator killed just now, whose session
 * the server has not ended yet; one frozen, cut off after its lease by
 * idle_session_timeout), so the claim is retried for twice the lease
 * from the first refusal (*taken_since, 0 before it); past that another
 * live coordinator advertises this URL and this one exits with
 * LEADER_EXIT_CONFIG (a mistake of configuration: starting it again
 * cannot help). 0 connected, else GP_EIO (retry later).
 */
static int
connect_claimed(int64_t *taken_since)
{
	int64_t now;
	int rc = connect_db();

	if (rc != GP_ECONFLICT) {
		if (rc == 0)
			*taken_since = 0;
		return rc;
	}
	now = gp_mono_ms();
	if (*taken_since == 0) {
		*taken_since = now;
		gp_warn("leader: another database session holds this "
			"coordinator's url=%s; waiting up to %lld ms for it to "
			"end",
		    L.advertise, (long long)(2 * L.lease_ms));
	} else if (now - *taken_since > 2 * L.lease_ms) {
		gp_error("refusing to run: another live coordinator on this "
			 "database advertises the same url=%s (each "
			 "coordinator needs its own --advertise-url, the URL "
			 "clients reach it by; docs/operations.md, \"Several "
			 "coordinators\"); exiting with status %d",
		    L.advertise, LEADER_EXIT_CONFIG);
		_exit(LEADER_EXIT_CONFIG);
	}
	return GP_EIO;
}

/*
 * The sessions other than this one that hold a lock on gp_leader's row
 * (gp_fence's FOR SHARE, in an open write transaction) while this one
 * holds the leader's lock: they can only be a deposed leader's (a
 * standby writes nothing), paused with a transaction open. Ended, so
 * that the epoch can be raised.
 */
static const char end_deposed_sql[] =
    "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l"
    " WHERE l.locktype = 'relation' AND l.granted"
    " AND l.relation = 'gp_leader'::regclass"
    " AND l.mode IN ('RowShareLock', 'RowExclusiveLock')"
    " AND l.pid <> pg_backend_pid()"
    " AND l.database = (SELECT oid FROM pg_database"
    " WHERE datname = current_database())";

/*
 * With the leader's lock won: raises the epoch. The UPDATE waits for
 * any transaction holding gp_leader's row; a leader paused (SIGSTOP, a
 * frozen VM) with one open would hold it for as long as it stays paused,
 * had the server not ended that transaction after the lease
 * (idle_in_transaction_session_timeout, pg.c and connect_db). Should
 * that not have happened (a session without it: an older coordinator's,
 * one whose settings an operator overrode), the wait is bounded
 * (lock_timeout, half the lease), the holders are ended (end_deposed_sql)
 * and it is tried again, three times in all. OUT: *res, RETURNING epoch.
 * 0 or query()'s codes.
 */
static int
raise_epoch(PGresult **res)
{
	const char *params[1] = {L.advertise};
	char sql[64], text[32];
	PGresult *ended;
	int rc, tries;

	snprintf(sql, sizeof(sql), "SET lock_timeout = %lld",
	    (long long)(L.lease_ms / 2));
	if ((rc = exec(sql, L.lease_ms)) != 0)
		return rc;
	for (tries = 1;; tries++) {
		rc = query("UPDATE gp_leader SET epoch = epoch + 1, addr = $1, "
			   "since = now() WHERE id = 1 RETURNING epoch",
		    1, params, L.lease_ms, res);
		if (rc != GP_ECONFLICT || tries == 3)
			break;
		if ((rc = query(end_deposed_sql, 0, NULL, L.lease_ms,
		    &ended)) != 0)
			return rc;
		gp_warn("leader: the epoch raise waited %lld ms on gp_leader's "
			"row; ended sessions=%s holding it (a deposed "
			"leader's open transaction), trying again",
		    (long long)(L.lease_ms / 2),
		    one_line(PQgetvalue(ended, 0, 0), text, sizeof(text)));
		PQclear(ended);
	}
	if (rc == 0 && (rc = exec("SET lock_timeout = 0", L.lease_ms)) != 0) {
		PQclear(*res);
		*res = NULL;
	}
	return rc;
}

/*
 * A standby's turn: tries the lock, reads the leader's URL. Returns 1
 * when the lock was won (then *epoch is the raised one), 0 when another
 * leads, GP_EIO when the database could not be asked.
 */
static int
try_lock(int64_t *epoch)
{
	char sql[160];
	PGresult *res;
	int won, rc;

	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld), "
	    "(SELECT addr FROM gp_leader WHERE id = 1)",
	    (long long)LEADER_LOCK_KEY);
	if (query(sql, 0, NULL, L.lease_ms, &res) != 0)
		return GP_EIO;
	won = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	if (!won)
		set_url(PQgetvalue(res, 0, 1));
	PQclear(res);
	if (!won)
		return 0;
	if ((rc = raise_epoch(&res)) == GP_EPERM) {
		/*
		 * A read-only database: nobody can lead it. The lock goes
		 * back (a coordinator holding it could not raise the epoch
		 * either), the connection stays, and the lock is tried
		 * again at the next turn.
		 */
		read_only("raising the epoch");
		snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)",
		    (long long)LEADER_LOCK_KEY);
		if (exec(sql, L.lease_ms) != 0 ||
		    exec("SET lock_timeout = 0", L.lease_ms) != 0) {
			drop_connection();
			return GP_EIO;
		}
		return 0;
	}
	if (rc != 0) {
		drop_connection(); /* and the lock with it */
		return GP_EIO;
	}
	writable();
	*epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 1;
}

/*
 * The leader's ping: the epoch, how many other coordinators are
 * connected (the sessions holding a URL lock, url_lock_sql: the only
 * two-key advisory locks there are) into L.standbys, and the live
 * coordinators' URLs (LIVE_SQL) into L.coordinators. 0 while it still
 * leads; GP_EIO when the lock's connection was lost (or did not answer
 * in time: it is dropped); else GP_EFENCED (the epoch moved on), why not
 * into why.
 */
static int
still_leading(int64_t mine, char *why, size_t len, char *leader,
    size_t leader_len)
{
	PGresult *res;
	int64_t now;
	char *urls;

	if (query("SELECT epoch, (SELECT count(*) FROM pg_locks WHERE "
		  "locktype = 'advisory' AND objsubid = 2 AND granted AND "
		  "pid <> pg_backend_pid() AND database = (SELECT oid FROM "
		  "pg_database WHERE datname = current_database())), "
		  LIVE_SQL ", addr FROM gp_leader WHERE id = 1", 0, NULL,
	    L.lease_ms / 2, &res) != 0) {
		snprintf(why, len, "the lock's database connection was lost");
		return GP_EIO;
	}
	now = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	L.standbys = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	if ((urls = strdup(PQgetvalue(res, 0, 2))) != NULL) {
		pthread_mutex_lock(&L.mu);
		free(L.coordinators);
		L.coordinators = urls;
		pthread_mutex_unlock(&L.mu);
	}
	if (now != mine)
		gp_strlcpy(leader, PQgetvalue(res, 0, 3), leader_len);
	PQclear(res);
	if (now != mine) {
		snprintf(why, len, "the epoch moved on to %lld",
		    (long long)now);
		return GP_EFENCED;
	}
	return 0;
}

/*
 * A lone leader (no other coordinator at its last ping) lost its lock's
 * connection (the database restarted, a network blip, a ping past its
 * deadline): reconnects with back-off, for as long as it takes, and
 * tries the lock again. Won with the epoch still ours: nobody led in
 * between (whoever wins the lock raises the epoch first), so the state
 * in memory is still the pool's and this one leads on, as a coordinator
 * with no standby did before it took part in elections. Meanwhile the
 * store's writes stay safe without the lock: each checks the epoch in
 * the database, which a new leader raises before it loads anything (and
 * the store's own retries end the process after PG_STORE_RETRY_MS). Not
 * won while the epoch is ours: our own old session may still hold the
 * lock (it ends at the latest after the lease), so it is tried again for
 * twice the lease; past that, or once the epoch moved on: -1, why into
 * why. 1 when leader_stop was called. (A leader with standbys steps
 * down at once instead: one of them takes over within the lease, and
 * clients go there.)
 */
static int
regain(int64_t mine, char *why, size_t len, char *leader, size_t leader_len)
{
	int64_t backoff = 100, taken_since = 0, lost_at = gp_mono_ms(), now;
	PGresult *res;
	char sql[160];
	int won;

	gp_warn("leader: the lock's database connection was lost; regaining "
		"the lock epoch=%lld",
	    (long long)mine);
	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld), "
	    "(SELECT epoch FROM gp_leader WHERE id = 1), "
	    "(SELECT addr FROM gp_leader WHERE id = 1)",
	    (long long)LEADER_LOCK_KEY);
	while (!stopping() && !atomic_load(&lost)) {
		if ((L.conn == NULL && connect_claimed(&taken_since) != 0) ||
		    query(sql, 0, NULL, L.lease_ms, &res) != 0) {
			nap(backoff);
			backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
			continue;
		}
		won = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		now = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		if (now != mine)
			gp_strlcpy(leader, PQgetvalue(res, 0, 2), leader_len);
		PQclear(res);
		if (now != mine) {
			snprintf(why, len, "the epoch moved on to %lld while "
			    "the lock's connection was lost", (long long)now);
			return -1;
		}
		if (won) {
			gp_info("leader: lock regained, leading on epoch=%lld "
				"after %lld ms",
			    (long long)mine, (long long)(gp_mono_ms() - lost_at));
			return 0;
		}
		if (gp_mono_ms() - lost_at > 2 * L.lease_ms) {
			snprintf(why, len, "the lock's connection was lost and "
			    "another session holds the lock");
			return -1;
		}
		nap(L.poll_ms);
	}
	return 1;
}

/*
 * The lock's connection was lost with standbys connected: one short
 * look (a connection of its own, 2 s to connect, 1 s to answer) at who
 * leads now, so that the requests this one holds can name the new
 * leader. Into out ("" when unknown: the database unreachable, or no
 * other coordinator has raised the epoch yet).
 */
static void
learn_leader(int64_t mine, char *out, size_t len)
{
	const char *keys[] = {"connect_timeout", "application_name", "options",
	    "dbname", NULL};
	const char *values[] = {"2", "gpupool-leader",
	    "-c statement_timeout=1000", L.conninfo, NULL};
	PGconn *conn = PQconnectdbParams(keys, values, 1);
	PGresult *res = NULL;

	out[0] = '\0';
	if (conn != NULL && PQstatus(conn) == CONNECTION_OK &&
	    (res = PQexec(conn, "SELECT epoch, addr FROM gp_leader "
	    "WHERE id = 1")) != NULL && PQresultStatus(res) ==
	    PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    strtoll(PQgetvalue(res, 0, 0), NULL, 10) != mine)
		gp_strlcpy(out, PQgetvalue(res, 0, 1), len);
	PQclear(res);
	PQfinish(conn);
}

void
leader_lost(const char *why, const char *leader)
{
	if (!atomic_load(&active))
		return;
	/* (a second caller may know the new leader when the first did not) */
	if (leader != NULL && leader[0] != '\0')
		set_url(leader);
	if (atomic_exchange(&lost, 1))
		return;
	atomic_store(&epoch_now, 0);
	atomic_store(&serving, 0);
	if (leader == NULL || leader[0] == '\0')
		set_url("");
	gp_warn("leader: lost the lead (%s) leader=%s", why,
	    leader != NULL && leader[0] != '\0' ? leader : "unknown");
	L.on_lost(why);
}

static void
default_on_lost(const char *why)
{
	gp_warn("stepping down: no longer the leader (%s); exiting for the "
		"supervisor to restart this coordinator as a standby",
	    why);
	_exit(LEADER_EXIT_STEPPED_DOWN);
}

static void *
leader_thread(void *arg)
{
	int64_t backoff = 100, mine = 0, taken_since = 0;
	char why[128], leader[sizeof(L.url)] = "";
	int rc;

	(void)arg;
	while (!stopping()) {
		if (L.conn == NULL && connect_claimed(&taken_since) != 0) {
			set_url("");
			nap(backoff);
			backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
			continue;
		}
		backoff = 100;
		if (!L.registered && register_url(L.lease_ms) == GP_EIO)
			continue;
		rc = try_lock(&mine);
		if (rc == 1)
			break;
		nap(rc == 0 ? L.poll_ms : backoff);
	}
	if (stopping())
		return NULL;
	atomic_store(&epoch_now, mine);
	set_url(L.advertise);
	gp_info("leading epoch=%lld url=%s", (long long)mine, L.advertise);
	pthread_mutex_lock(&L.mu);
	L.leading = 1;
	pthread_cond_broadcast(&L.cond);
	pthread_mutex_unlock(&L.mu);
	for (;;) {
		nap(L.lease_ms / 4);
		/* (lost: a write found the epoch moved on, leader_lost) */
		if (stopping() || atomic_load(&lost))
			return NULL;
		if (!L.registered && L.conn != NULL)
			register_url(L.lease_ms); /* (read-only before) */
		rc = still_leading(mine, why, sizeof(why), leader,
		    sizeof(leader));
		if (rc == GP_EIO && L.standbys == 0)
			rc = regain(mine, why, sizeof(why), leader,
			    sizeof(leader));
		if (rc == 1 || stopping() || atomic_load(&lost))
			return NULL;
		if (rc != 0)
			break;
	}
	atomic_store(&epoch_now, 0); /* nothing commits from here on */
	drop_connection();
	if (rc == GP_EIO && leader[0] == '\0')
		learn_leader(mine, leader, sizeof(leader));
	leader_lost(why, leader);
	return NULL;
}

int
leader_start(const struct leader_config *cfg)
{
	PQconninfoOption *opts;
	char *why = NULL, where[256], text[256];

	if (cfg->conninfo == NULL || cfg->advertise_url == NULL ||
	    cfg->advertise_url[0] == '\0' || cfg->lease_ms < 100 ||
	    cfg->poll_ms < 10 || strlen(cfg->advertise_url) >= sizeof(L.url))
		return GP_EINVAL;
	/* A connection string libpq cannot read: no retry cures that. */
	if ((opts = PQconninfoParse(cfg->conninfo, &why)) == NULL) {
		pg_url_redact(cfg->conninfo, where, sizeof(where));
		gp_error("leader: bad connection string db=%s error=\"%s\"",
		    where, one_line(why != NULL ? why : "out of memory", text,
		    sizeof(text)));
		PQfreemem(why);
		return GP_EINVAL;
	}
	PQconninfoFree(opts);
	L.conninfo = strdup(cfg->conninfo);
	L.advertise = strdup(cfg->advertise_url);
	L.data_dir = cfg->data_dir != NULL ? strdup(cfg->data_dir) : NULL;
	if (L.conninfo == NULL || L.advertise == NULL ||
	    (cfg->data_dir != NULL && L.data_dir == NULL))
		goto nomem;
	L.lease_ms = cfg->lease_ms;
	L.poll_ms = cfg->poll_ms;
	L.on_lost = cfg->on_lost != NULL ? cfg->on_lost : default_on_lost;
	L.stopping = 0;
	L.leading = 0;
	atomic_store(&serving, 0);
	atomic_store(&active, 1);
	if (pthread_create(&L.thread, NULL, leader_thread, NULL) != 0)
		goto nomem;
	L.started = 1;
	return 0;
nomem:
	free(L.conninfo);
	free(L.advertise);
	free(L.data_dir);
	L.conninfo = L.advertise = L.data_dir = NULL;
	atomic_store(&active, 0);
	return GP_ENOMEM;
}

char *
leader_coordinators(void)
{
	json_t *urls;
	char *text;

	if (!atomic_load(&active))
		return NULL;
	pthread_mutex_lock(&L.mu);
	if (L.coordinators != NULL)
		text = strdup(L.coordinators);
	else if (L.leading && L.advertise != NULL) {
		/* Not pinged yet: itself, the one it knows. */
		urls = json_pack("[s]", L.advertise);
		text = urls != NULL ? json_dumps(urls, JSON_COMPACT) : NULL;
		json_decref(urls);
	} else
		text = strdup("[]");
	pthread_mutex_unlock(&L.mu);
	return text;
}

int
leader_wait(void)
{
	int rc;

	pthread_mutex_lock(&L.mu);
	while (!L.leading && !L.stopping)
		pthread_cond_wait(&L.cond, &L.mu);
	rc = L.leading ? 0 : GP_ECONFLICT;
	pthread_mutex_unlock(&L.mu);
	return rc;
}

void
leader_stop(void)
{
	if (!L.started)
		return;
	pthread_mutex_lock(&L.mu);
	L.stopping = 1;
	pthread_cond_broadcast(&L.cond);
	pthread_mutex_unlock(&L.mu);
	pthread_join(L.thread, NULL);
	L.started = 0;
	atomic_store(&epoch_now, 0);
	drop_connection();
	free(L.conninfo);
	free(L.advertise);
	free(L.data_dir);
	L.conninfo = L.advertise = L.data_dir = NULL;
	pthread_mutex_lock(&L.mu);
	free(L.coordinators);
	L.coordinators = NULL;
	pthread_mutex_unlock(&L.mu);
}
