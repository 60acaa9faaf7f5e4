/*
 * store_pg_meta.c: the blob users' records in PostgreSQL (store_meta.h):
 * the gp_ckpt_*, gp_data_* and gp_image_* tables of the pool's database
 * (pg.c's schema 2), one connection per user, so that a coordinator that
 * takes the lead sees every checkpoint, data set and image the one
 * before it recorded.
 *
 * Fencing: every write transaction begins with BEGIN and gp_fence(epoch)
 * in one round trip (the epoch leader.c won, or the one a lone
 * coordinator took when its store opened); a write outside an explicit
 * transaction is wrapped in one of its own. GP_EFENCED means another
 * coordinator leads: this one steps down at once, as store_pg.c does, so
 * that a paused leader that comes back records nothing.
 *
 * Faults (store_meta.h, "Faults"), as store_pg.c's batches: a lost
 * connection, a read-only database or a serialization failure is
 * retried with back-off (pg.c: 100 ms doubled, at most 5 s) on a new
 * connection, for at most META_RETRY_MS and only while this
 * coordinator's epoch is unchanged (a lone leader regaining its lock
 * after a restart of the database keeps it; one that stepped down has
 * 0): a statement outside a transaction here (statement()), a
 * transaction by gp_meta_transact through meta_retry (its body run
 * again). BEGIN also reads txid_current(), so that a COMMIT whose
 * answer was lost is asked about on the new connection (txid_status):
 * committed is success, anything else is run again. Given up:
 * GP_EFENCED without stepping down here (leader.c's thread does) when
 * the epoch changed, GP_ETIMEDOUT when the time ran out; both with the
 * reason in m->base.error for the caller's answer.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gp.h"
#include "leader.h"
#include "log.h"
#include "store_meta.h"
#include "store_pg_int.h"
#include "util.h"

#define META_PARAMS_MAX	   24
#define META_CONNECT_WAIT_MS 30000
/* How long a statement or transaction is retried (store_pg.c's too). */
#define META_RETRY_MS (120 * 1000)

struct pg_meta {
	struct gp_meta base; /* first: the wrappers cast */
	struct pg_conn *c;
	int elected;	    /* leader.c leads: its epoch, read per begin */
	int64_t lone_epoch; /* else the epoch the store took at open */
	int in_tx;	    /* between begin and commit/rollback */
	int sent;	    /* BEGIN and the fence sent */
	/*
	 * The transaction begun on this connection (txid_current()), kept
	 * until it is known to have ended: "" when none.
	 */
	char xid[24];
	/* While failing: since when, tries so far, the epoch it began with. */
	int64_t failing_since;
	int tries;
	int64_t failing_epoch;
};

struct pg_rows {
	struct gp_meta_rows base;
	PGresult *r;
	int row; /* the current row; -1 before the first next */
};

static struct pg_meta *
meta_of(struct gp_meta *m)
{
	return (struct pg_meta *)m;
}

static PGresult *
res_of(struct gp_meta_rows *r)
{
	return ((struct pg_rows *)r)->r;
}

/* rc with c's reason in m->error; GP_EFENCED steps down. */
static int
fail(struct pg_meta *m, int rc)
{
	gp_strlcpy(m->base.error,
	    m->c->error[0] != '\0' ? m->c->error : gp_strerror(rc),
	    sizeof(m->base.error));
	if (rc == GP_EFENCED) {
		char leader[512];

		gp_error("postgresql %s fenced db=%s: stepping down "
			 "error=\"%s\"",
		    m->base.what, m->c->where, m->base.error);
		if (!m->elected)
			_exit(LEADER_EXIT_STEPPED_DOWN);
		/*
		 * Elected: leader_lost starts the process's stop, which
		 * answers what it holds (this request too: the error below)
		 * before it exits LEADER_EXIT_STEPPED_DOWN.
		 */
		pg_leader_addr(m->c, leader, sizeof(leader));
		leader_lost("a write of the blob records was fenced: another "
		    "coordinator raised the epoch", leader);
		snprintf(m->base.error, sizeof(m->base.error),
		    "not the leader: this coordinator no longer leads the "
		    "pool; nothing was committed; try the leader");
	}
	return rc;
}

/*
 * The connection usable: made again (one try) when it was lost. The
 * waiting between tries is meta_retry's.
 */
static int
ready(struct pg_meta *m)
{
	if (PQstatus(m->c->conn) == CONNECTION_OK)
		return 0;
	if (pg_reconnect(m->c, 0) != 0)
		return fail(m, GP_ECONN);
	return 0;
}

static int64_t
epoch_of(const struct pg_meta *m)
{
	return m->elected ? leader_epoch() : m->lone_epoch;
}

static void
sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * On a new connection, after the one that began m->xid was lost: ends
 * that transaction's session if the server has not noticed the loss yet
 * (a network cut: it would hold its locks, and its COMMIT's fate, until
 * the server's keepalives gave up). Only the backend whose transaction
 * is that xid is ended; errors are ignored (the next try asks again).
 */
static void
end_lost_transaction(struct pg_meta *m)
{
	const char *v[1] = {m->xid};

	if (m->xid[0] == '\0' || PQstatus(m->c->conn) != CONNECTION_OK)
		return;
	PQclear(PQexecParams(m->c->conn, "SELECT pg_terminate_backend(pid) "
	    "FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
	    "backend_xid = (($1::bigint) % 4294967296)::text::xid", 1, NULL,
	    v, NULL, NULL, 0));
}

/*
 * After a failure rc (the transaction, if any, is over): 0 when a retry
 * may cure it, once its back-off has passed and the connection is made
 * again (or its aborted transaction rolled back); else the code to give
 * up with, the reason in m->base.error. Gives up on a failure no retry
 * cures (rc itself), when the epoch changed since the first failure
 * (GP_EFENCED: this coordinator no longer leads), or after
 * META_RETRY_MS (GP_ETIMEDOUT).
 */
static int
meta_retry(struct gp_meta *gm, int rc)
{
	struct pg_meta *m = (struct pg_meta *)gm;
	int64_t now = gp_mono_ms(), epoch = epoch_of(m);

	if (rc != GP_ECONN && rc != GP_EPERM && rc != GP_ECONFLICT)
		return rc;
	if (pg_retrying_stopped())
		goto stopped;
	if (m->failing_since == 0) {
		m->failing_since = now;
		m->tries = 0;
		m->failing_epoch = epoch;
		gp_warn("postgresql %s failed db=%s kind=%s: retrying "
			"for up to %d s; nothing is answered until it commits "
			"error=\"%s\"",
		    gm->what, m->c->where,
		    rc == GP_ECONN   ? "connection-lost"
		    : rc == GP_EPERM ? "read-only"
				     : "conflict",
		    META_RETRY_MS / 1000, gm->error);
	}
	if (epoch <= 0 || epoch != m->failing_epoch) {
		snprintf(gm->error, sizeof(gm->error),
		    "this coordinator no longer leads the pool (leadership "
		    "was lost while PostgreSQL failed); try the leader");
		gp_warn("postgresql %s retry given up db=%s: no longer the "
			"leader",
		    gm->what, m->c->where);
		m->failing_since = 0;
		return GP_EFENCED;
	}
	if (now - m->failing_since >= META_RETRY_MS) {
		snprintf(gm->error, sizeof(gm->error),
		    "PostgreSQL at %.80s failed for %d s: %.120s", m->c->where,
		    META_RETRY_MS / 1000, m->c->error);
		gp_error("postgresql %s retry given up db=%s after %d s",
		    gm->what, m->c->where, META_RETRY_MS / 1000);
		m->failing_since = 0;
		return GP_ETIMEDOUT;
	}
	if (pg_retry_nap(pg_backoff_ms(m->tries++)))
		goto stopped;
	if (PQstatus(m->c->conn) != CONNECTION_OK) {
		/* (else the next try fails, and comes back here) */
		if (pg_reconnect(m->c, 0) == 0)
			end_lost_transaction(m);
	} else if (PQtransactionStatus(m->c->conn) != PQTRANS_IDLE) {
		PQclear(PQexec(m->c->conn, "ROLLBACK"));
	}
	return 0;
stopped:
	/* The process is stopping (pg_stop_retrying): no more retries. */
	snprintf(gm->error, sizeof(gm->error), "not committed: the "
	    "coordinator is stopping while PostgreSQL fails; retry");
	gp_warn("postgresql %s retry given up db=%s: the coordinator is "
		"stopping; nothing of it was committed",
	    gm->what, m->c->where);
	m->failing_since = 0;
	return GP_ESTOPPED;
}

/* A statement or commit went through: the failing is over. */
static void
recovered(struct pg_meta *m)
{
	if (m->failing_since == 0)
		return;
	gp_info("postgresql %s recovered db=%s after_ms=%lld",
	    m->base.what, m->c->where,
	    (long long)(gp_mono_ms() - m->failing_since));
	m->failing_since = 0;
}

/*
 * sql with its `?` and `?N` parameters as $N (quoted text left alone).
 * malloc'd, or NULL.
 */
char *
pg_meta_translate(const char *sql)
{
	size_t n = strlen(sql), o = 0;
	char *out = malloc(n * 3 + 1);
	int k = 0, quoted = 0;

	if (out == NULL)
		return NULL;
	for (; *sql != '\0'; sql++) {
		if (*sql == '\'')
			quoted = !quoted;
		if (quoted || *sql != '?') {
			out[o++] = *sql;
			continue;
		}
		out[o++] = '$';
		if (isdigit((unsigned char)sql[1]))
			continue; /* ?N: the digits follow */
		o += (size_t)sprintf(out + o, "%d", ++k);
	}
	out[o] = '\0';
	return out;
}

/* The parameters as text. */
struct params_text {
	int n;
	const char *v[META_PARAMS_MAX];
	char num[META_PARAMS_MAX][32];
};

static int
params_bind(struct params_text *p, const char *fmt, va_list ap)
{
	const char *f;

	p->n = 0;
	for (f = fmt != NULL ? fmt : ""; *f != '\0'; f++) {
		if (p->n == META_PARAMS_MAX)
			return GP_EINVAL;
		switch (*f) {
		case 'i':
			snprintf(p->num[p->n], 32, "%d", va_arg(ap, int));
			p->v[p->n] = p->num[p->n];
			break;
		case 'I':
			snprintf(p->num[p->n], 32, "%lld",
			    (long long)va_arg(ap, int64_t));
			p->v[p->n] = p->num[p->n];
			break;
		case 'd':
			snprintf(p->num[p->n], 32, "%.17g",
			    va_arg(ap, double));
			p->v[p->n] = p->num[p->n];
			break;
		case 't':
		case 's':
			p->v[p->n] = va_arg(ap, const char *);
			break;
		case 'n':
			p->v[p->n] = NULL;
			break;
		default:
			return GP_EINVAL;
		}
		p->n++;
	}
	return 0;
}

/* BEGIN and the fence, in one round trip. */
static int
send_begin(struct pg_meta *m)
{
	int64_t epoch = epoch_of(m);
	char sql[128];
	PGresult *r;
	int rc;

	if (epoch <= 0) {
		snprintf(m->c->error, sizeof(m->c->error),
		    "this coordinator does not lead (any more)");
		return fail(m, GP_EFENCED);
	}
	if ((rc = ready(m)) != 0)
		return rc;
	snprintf(sql, sizeof(sql), "BEGIN; SELECT gp_fence(%lld::bigint), "
	    "txid_current()", (long long)epoch);
	r = PQexec(m->c->conn, sql);
	if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK ||
	    PQntuples(r) != 1) {
		rc = pg_result_error(m->c, r, "begin");
		PQclear(r);
		if (PQstatus(m->c->conn) == CONNECTION_OK)
			PQclear(PQexec(m->c->conn, "ROLLBACK"));
		return fail(m, rc);
	}
	gp_strlcpy(m->xid, PQgetvalue(r, 0, 1), sizeof(m->xid));
	PQclear(r);
	m->sent = 1;
	return 0;
}

/*
 * COMMIT of the transaction begun by send_begin. When its answer was
 * lost, asks on a new connection whether it committed (txid_status):
 * 0 when it did, GP_ECONN when it did not (run it again), or the code
 * meta_retry gives up with.
 */
static int
send_commit(struct pg_meta *m)
{
	const char *v[1] = {m->xid};
	const char *status;
	PGresult *r;
	int rc;

	m->sent = 0;
	if ((rc = pg_exec(m->c, "COMMIT", "commit")) != GP_ECONN) {
		m->xid[0] = '\0'; /* committed, or rolled back by the server */
		return rc != 0 ? fail(m, rc) : 0;
	}
	gp_warn("postgresql %s commit unanswered db=%s xid=%s: asking "
		"whether it committed",
	    m->base.what, m->c->where, m->xid);
	for (;;) {
		if ((rc = meta_retry(&m->base, GP_ECONN)) != 0) {
			if (rc == GP_ESTOPPED || rc == GP_ETIMEDOUT)
				snprintf(m->base.error, sizeof(m->base.error),
				    "not confirmed: the database's answer to "
				    "the commit was lost and could not be "
				    "asked about: whether it was committed is "
				    "unknown; retry");
			return rc;
		}
		r = PQexecParams(m->c->conn, "SELECT txid_status($1::bigint)",
		    1, NULL, v, NULL, NULL, 0);
		if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK ||
		    PQntuples(r) != 1) {
			rc = pg_result_error(m->c, r, "txid_status");
			PQclear(r);
			if (rc == GP_EFENCED)
				return fail(m, rc);
			continue;
		}
		status = PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0);
		rc = strcmp(status, "committed") == 0	  ? 0
		    : strcmp(status, "in progress") == 0 ? 1
							 : GP_ECONN;
		PQclear(r);
		if (rc == 1) {
			/* Its session lives on: ended, then asked again. */
			end_lost_transaction(m);
			continue;
		}
		gp_info("postgresql %s commit xid=%s was %s", m->base.what,
		    m->xid, rc == 0 ? "committed" : "not committed");
		m->xid[0] = '\0';
		if (rc != 0)
			snprintf(m->base.error, sizeof(m->base.error),
			    "the connection was lost before COMMIT took");
		return rc;
	}
}

/* Runs one statement (the transaction begun or not, as the caller saw). */
static int
exec_one(struct pg_meta *m, const char *sql, const char *fmt, va_list ap,
    PGresult **out)
{
	struct params_text p;
	char *text;
	PGresult *r;
	int rc, st;

	if ((rc = params_bind(&p, fmt, ap)) != 0)
		return rc;
	if ((text = pg_meta_translate(sql)) == NULL)
		return GP_ENOMEM;
	r = PQexecParams(m->c->conn, text, p.n, NULL, p.v, NULL, NULL, 0);
	free(text);
	st = r != NULL ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		rc = pg_result_error(m->c, r, m->base.what);
		PQclear(r);
		return fail(m, rc);
	}
	*out = r;
	return 0;
}

/* Does sql only read (a SELECT)? */
static int
reads_only(const char *sql)
{
	while (isspace((unsigned char)*sql))
		sql++;
	return strncasecmp(sql, "SELECT", 6) == 0;
}

/*
 * One statement outside a transaction, once: alone when it only reads,
 * else in a fenced transaction of its own.
 */
static int
lone_once(struct pg_meta *m, const char *sql, const char *fmt, va_list ap,
    PGresult **out)
{
	int rc;

	if (reads_only(sql)) {
		if ((rc = ready(m)) != 0)
			return rc;
		return exec_one(m, sql, fmt, ap, out);
	}
	if ((rc = send_begin(m)) != 0)
		return rc;
	if ((rc = exec_one(m, sql, fmt, ap, out)) != 0) {
		m->sent = 0;
		if (PQstatus(m->c->conn) == CONNECTION_OK)
			PQclear(PQexec(m->c->conn, "ROLLBACK"));
		return rc;
	}
	if ((rc = send_commit(m)) != 0) {
		PQclear(*out);
		*out = NULL;
	}
	return rc;
}

/*
 * One statement: in the caller's transaction (begun on the server with
 * the first; a failure there is the transaction's, gp_meta_transact
 * retries it), else alone, retried while meta_retry says a retry may
 * cure its failure.
 */
static int
statement(struct pg_meta *m, const char *sql, const char *fmt, va_list ap,
    PGresult **out)
{
	va_list again;
	int rc;

	if (m->in_tx) {
		if (!m->sent && (rc = send_begin(m)) != 0)
			return rc;
		return exec_one(m, sql, fmt, ap, out);
	}
	for (;;) {
		va_copy(again, ap);
		rc = lone_once(m, sql, fmt, again, out);
		va_end(again);
		if (rc == 0) {
			recovered(m);
			return 0;
		}
		if (m->base.impatient)
			return rc;
		if ((rc = meta_retry(&m->base, rc)) != 0)
			return rc;
	}
}

static void
meta_close(struct gp_meta *gm)
{
	struct pg_meta *m = meta_of(gm);

	pg_close(m->c);
	free(m);
}

static int
meta_begin(struct gp_meta *gm)
{
	struct pg_meta *m = meta_of(gm);

	if (m->in_tx) {
		snprintf(gm->error, sizeof(gm->error),
		    "transactions do not nest");
		return GP_EINVAL;
	}
	m->in_tx = 1;
	m->sent = 0;
	return 0;
}

static int
meta_commit(struct gp_meta *gm)
{
	struct pg_meta *m = meta_of(gm);
	int rc = 0, sent = m->sent;

	m->in_tx = 0;
	if (sent && (rc = send_commit(m)) != 0)
		return rc;
	recovered(m);
	return 0;
}

static int
meta_rollback(struct gp_meta *gm)
{
	struct pg_meta *m = meta_of(gm);
	int sent = m->sent;

	m->in_tx = 0;
	m->sent = 0;
	if (sent && PQstatus(m->c->conn) == CONNECTION_OK) {
		PQclear(PQexec(m->c->conn, "ROLLBACK"));
		m->xid[0] = '\0';
	}
	return 0;
}

static int
meta_run(struct gp_meta *gm, const char *sql, const char *fmt, va_list ap,
    int64_t *changes)
{
	struct pg_meta *m = meta_of(gm);
	PGresult *r = NULL;
	int rc;

	if ((rc = statement(m, sql, fmt, ap, &r)) != 0)
		return rc;
	*changes = strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return 0;
}

static int
meta_query(struct gp_meta *gm, const char *sql, const char *fmt, va_list ap,
    struct gp_meta_rows **out)
{
	struct pg_meta *m = meta_of(gm);
	struct pg_rows *rows = calloc(1, sizeof(*rows));
	int rc;

	if (rows == NULL)
		return GP_ENOMEM;
	if ((rc = statement(m, sql, fmt, ap, &rows->r)) != 0) {
		free(rows);
		return rc;
	}
	rows->base.m = gm;
	rows->row = -1;
	*out = &rows->base;
	return 0;
}

static int
rows_next(struct gp_meta_rows *gr)
{
	struct pg_rows *r = (struct pg_rows *)gr;

	if (r->row + 1 >= PQntuples(r->r))
		return 0;
	r->row++;
	return 1;
}

static int
rows_is_null(struct gp_meta_rows *gr, int col)
{
	return PQgetisnull(res_of(gr), ((struct pg_rows *)gr)->row, col);
}

static int64_t
rows_integer(struct gp_meta_rows *gr, int col)
{
	return strtoll(PQgetvalue(res_of(gr), ((struct pg_rows *)gr)->row,
			   col),
	    NULL, 10);
}

static double
rows_real(struct gp_meta_rows *gr, int col)
{
	return strtod(PQgetvalue(res_of(gr), ((struct pg_rows *)gr)->row, col),
	    NULL);
}

static const char *
rows_text(struct gp_meta_rows *gr, int col)
{
	/* libpq gives "" for NULL. */
	return PQgetvalue(res_of(gr), ((struct pg_rows *)gr)->row, col);
}

static void
rows_done(struct gp_meta_rows *gr)
{
	PQclear(res_of(gr));
	free(gr);
}

/*
 * Tests only: GPUPOOL_TEST_FENCE_HOLD_MS, how long a fence (meta_fence)
 * holds its transaction open, gp_leader's row locked, before its COMMIT,
 * so that test_fencing_txn_pg.sh can stop the leader with a write
 * transaction open. 0 (unset): none.
 */
static int64_t
fence_hold_ms(void)
{
	const char *v = getenv("GPUPOOL_TEST_FENCE_HOLD_MS");
	char *end;
	long long ms;

	if (v == NULL || *v == '\0')
		return 0;
	ms = strtoll(v, &end, 10);
	return *end == '\0' && ms > 0 && ms <= 600000 ? (int64_t)ms : 0;
}

/* An empty fenced transaction (fail steps down when fenced off). */
static int
meta_fence(struct gp_meta *gm)
{
	struct pg_meta *m = meta_of(gm);
	int64_t hold = fence_hold_ms();
	int rc;

	if (m->in_tx)
		return GP_EINVAL;
	for (;;) {
		if ((rc = send_begin(m)) == 0 && hold > 0) {
			gp_info("postgresql %s fence transaction open: holding "
				"ms=%lld (GPUPOOL_TEST_FENCE_HOLD_MS, tests only)",
			    gm->what, (long long)hold);
			sleep_ms(hold);
		}
		if (rc == 0 && (rc = send_commit(m)) == 0) {
			recovered(m);
			return 0;
		}
		m->sent = 0;
		if (gm->impatient || (rc = meta_retry(gm, rc)) != 0)
			return rc;
	}
}

static const struct gp_meta_ops pg_meta_ops = {
    .close = meta_close,
    .begin = meta_begin,
    .commit = meta_commit,
    .rollback = meta_rollback,
    .run = meta_run,
    .query = meta_query,
    .next = rows_next,
    .is_null = rows_is_null,
    .integer = rows_integer,
    .real = rows_real,
    .text = rows_text,
    .done = rows_done,
    .fence = meta_fence,
    .retry = meta_retry,
};

static const char *const area_names[] = {
    [GP_META_CHECKPOINTS] = "checkpoints",
    [GP_META_DATA] = "data",
    [GP_META_IMAGES] = "images",
};

int
pg_meta_open(struct gp_store *gs, enum gp_meta_area area,
    const char *data_dir, struct gp_meta **out)
{
	struct pg_store *s = pg_store_of(gs);
	struct pg_meta *m = calloc(1, sizeof(*m));
	int rc;

	(void)data_dir;
	if (m == NULL)
		return GP_ENOMEM;
	m->base.ops = &pg_meta_ops;
	snprintf(m->base.what, sizeof(m->base.what), "%s", area_names[area]);
	m->elected = s->elected;
	m->lone_epoch = s->epoch;
	if ((rc = pg_connect(s->w->url, META_CONNECT_WAIT_MS, &m->c)) != 0) {
		gp_error("postgresql %s: cannot connect error=\"%s\"",
		    m->base.what, m->c != NULL ? m->c->error : "out of memory");
		pg_close(m->c);
		free(m);
		return rc;
	}
	*out = &m->base;
	return 0;
}
