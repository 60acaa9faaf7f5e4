/*
 * leader.c: leadership among coordinators sharing one PostgreSQL database
 * (leader.h). One thread, one libpq connection of its own:
 *
 * - standby: every poll_ms, SELECT pg_try_advisory_lock(KEY) and the
 *   leader's URL from gp_leader. When the lock is won, in the same
 *   session: UPDATE gp_leader SET epoch = epoch + 1, addr = <ours>,
 *   since = now() RETURNING epoch; that epoch is leader_epoch() and
 *   leader_wait() returns.
 * - leader: every lease_ms / 4, SELECT epoch FROM gp_leader on the lock's
 *   connection, each with a deadline of half the lease. The session has
 *   idle_session_timeout = lease_ms: a leader that stops asking (paused,
 *   SIGSTOPped, its machine frozen) is cut off by the server itself,
 *   which drops the lock, and a standby takes it and raises the epoch.
 *   A leader whose ping fails (connection lost, deadline passed) or reads
 *   another epoch steps down at once: leader_epoch() goes to 0 first (no
 *   write transaction can pass the store's check from then on; the epoch
 *   in the database fences the commits that were already on their way),
 *   then on_lost runs.
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
	int64_t lease_ms, poll_ms;
	void (*on_lost)(const char *why);
	char url[512];	    /* under mu: the leader's URL */
	PGconn *conn;	    /* the leader thread's alone */
	int connect_failures; /* in a row */
} L = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static _Atomic int64_t epoch_now;   /* 0 unless leading */
static atomic_int active;	    /* leader_start was called */
static atomic_int serving;	    /* the leader serves the API */

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
 * the thread). OUT: *res (PQclear) on success. 0, GP_ETIMEDOUT, or
 * GP_EIO (the connection is then dropped: the session, and the lock with
 * it, are gone or about to be).
 */
static int
query(const char *sql, int nparams, const char *const *params,
    int64_t deadline_ms, PGresult **res)
{
	int64_t end = gp_mono_ms() + deadline_ms;
	PGresult *r, *last = NULL;
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

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS gp_leader ("
    " id int PRIMARY KEY CHECK (id = 1),"
    " epoch bigint NOT NULL,"
    " addr text NOT NULL,"
    " since timestamptz)";

/*
 * Connects, sets the session's lease and makes sure gp_leader has its
 * one row. The table is made under the migrations' transaction-level
 * advisory lock (pg.c: it makes gp_leader too), so that two coordinators
 * starting together do not both try to create it. 0 or GP_EIO.
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
	char sql[128], lock[96], text[256];
	int64_t t = L.lease_ms;

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
	if (exec(sql, t) != 0 ||
	    exec("BEGIN", t) != 0 ||
	    exec(lock, t) != 0 ||
	    exec(create_sql, t) != 0 ||
	    exec("INSERT INTO gp_leader (id, epoch, addr) VALUES (1, 0, '') "
		 "ON CONFLICT (id) DO NOTHING", t) != 0 ||
	    exec("COMMIT", t) != 0) {
		drop_connection();
		return GP_EIO;
	}
	return 0;
}

/*
 * A standby's turn: tries the lock, reads the leader's URL. Returns 1
 * when the lock was won (then *epoch is the raised one), 0 when another
 * leads, GP_EIO when the database could not be asked.
 */
static int
try_lock(int64_t *epoch)
{
	const char *params[1] = {L.advertise};
	char sql[160];
	PGresult *res;
	int won;

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
	if (query("UPDATE gp_leader SET epoch = epoch + 1, addr = $1, "
		  "since = now() WHERE id = 1 RETURNING epoch",
	    1, params, L.lease_ms, &res) != 0)
		return GP_EIO; /* the lock goes with the connection */
	*epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 1;
}

/* The leader's ping. 0 while it still leads, else why not into why. */
static int
still_leading(int64_t mine, char *why, size_t len)
{
	PGresult *res;
	int64_t now;

	if (query("SELECT epoch FROM gp_leader WHERE id = 1", 0, NULL,
	    L.lease_ms / 2, &res) != 0) {
		snprintf(why, len, "the lock's database connection was lost");
		return -1;
	}
	now = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (now != mine) {
		snprintf(why, len, "the epoch moved on to %lld",
		    (long long)now);
		return -1;
	}
	return 0;
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
	int64_t backoff = 100, mine = 0;
	char why[128];
	int rc;

	(void)arg;
	while (!stopping()) {
		if (L.conn == NULL && connect_db() != 0) {
			set_url("");
			nap(backoff);
			backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
			continue;
		}
		backoff = 100;
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
		if (stopping())
			return NULL;
		if (still_leading(mine, why, sizeof(why)) != 0)
			break;
	}
	atomic_store(&epoch_now, 0);
	atomic_store(&serving, 0);
	drop_connection();
	set_url("");
	L.on_lost(why);
	return NULL;
}

int
leader_start(const struct leader_config *cfg)
{
	if (cfg->conninfo == NULL || cfg->advertise_url == NULL ||
	    cfg->advertise_url[0] == '\0' || cfg->lease_ms < 100 ||
	    cfg->poll_ms < 10 || strlen(cfg->advertise_url) >= sizeof(L.url))
		return GP_EINVAL;
	L.conninfo = strdup(cfg->conninfo);
	L.advertise = strdup(cfg->advertise_url);
	if (L.conninfo == NULL || L.advertise == NULL)
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
	L.conninfo = L.advertise = NULL;
	atomic_store(&active, 0);
	return GP_ENOMEM;
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
	L.conninfo = L.advertise = NULL;
}
