/*
 * store_pg.c: the PostgreSQL store (store.h), the second implementation of
 * struct gp_store_ops, over libpq (connections, schema and pool id:
 * pg.c). `--db postgresql://...` picks it. This file: statements, the
 * transaction with its fence and replay, opening, the model, submit
 * keys; store_pg_ledger.c: the ledger's tables and queries; both share
 * store_pg_int.h.
 *
 * Group commit as the SQLite store: one transaction per batch of the
 * state thread, and the state thread answers nobody before commit
 * returns 0. The transaction is begun lazily, by its first statement (a
 * batch that wrote nothing costs no round trip), with the fence:
 * gp_fence(epoch), i.e. SELECT epoch FROM gp_leader WHERE id = 1 FOR
 * SHARE, which fails (GP_EFENCED) when another coordinator leads now, so
 * that a coordinator that was paused or cut off can never commit.
 *
 * Faults. Every statement of the open transaction is kept (its SQL and
 * its parameters as text) until the commit, so that a transaction lost
 * with its connection (the server restarted, the network cut, the
 * database made read-only for a while) is begun again on a new connection
 * and replayed, with back-off (pg.c: 100 ms doubled, at most 5 s), for at
 * most PG_STORE_RETRY_MS; only then does the operation fail
 * (GP_ETIMEDOUT: the state thread stops, nothing it did was answered).
 * The statements are idempotent in effect (upserts; a posting that exists
 * is not posted again), and each commit writes the batch's number into
 * gp_batch, so that a COMMIT whose answer was lost is asked about, not
 * done twice.
 *
 * Reads from any thread (read_job, read_job_brief, ledger_usage,
 * ledger_postings) go through a second connection behind a mutex, which
 * sees committed rows only; one reconnect is tried when it was lost.
 *
 * The epoch: every coordinator on PostgreSQL takes part in the leader
 * election (leader.c, main.c) and opens its store only once it leads;
 * every transaction is fenced with leader_epoch() as it is then (0 after
 * stepping down: GP_EFENCED without a round trip). A store opened where
 * nothing leads is refused.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "gp.h"
#include "jobspec.h"
#include "leader.h"
#include "log.h"
#include "pg.h"
#include "store_pg_int.h"
#include "store.h"
#include "util.h"

/* How long a write is retried while the database is away. */
#define PG_STORE_RETRY_MS (120 * 1000)
/* How long open waits for a database that is down at start. */
#define PG_STORE_OPEN_WAIT_MS (60 * 1000)
/* ---- parameters ---- */

/*
 * Formats parameters: I int64, i int, s string (NULL: ""), d double
 * (shortest text that reads back the same).
 */
static void
params_vfill(struct params *p, const char *fmt, va_list ap)
{
	p->n = 0;
	for (; fmt != NULL && *fmt != '\0' && p->n < MAX_PARAMS; fmt++) {
		char *b = p->num[p->n];
		const char *str;

		switch (*fmt) {
		case 'I':
			snprintf(b, 32, "%lld", (long long)va_arg(ap, int64_t));
			p->v[p->n] = b;
			break;
		case 'i':
			snprintf(b, 32, "%d", va_arg(ap, int));
			p->v[p->n] = b;
			break;
		case 'd':
			snprintf(b, 32, "%.17g", va_arg(ap, double));
			p->v[p->n] = b;
			break;
		default: /* 's' */
			str = va_arg(ap, const char *);
			p->v[p->n] = str != NULL ? str : "";
			break;
		}
		p->n++;
	}
}

/* ---- statements on a connection ---- */

/*
 * Runs sql with parameters on c, prepared once per connection (named by
 * its slot in prep). *out: the result (PGRES_COMMAND_OK or TUPLES_OK), or
 * NULL with the classified error returned.
 */
static int
run_on(struct pg_conn *c, struct prepared *prep, int *nprep, unsigned gen,
    const char *sql, int n, const char *const *vals, PGresult **out)
{
	char name[16];
	PGresult *r;
	int i, rc;

	*out = NULL;
	for (i = 0; i < *nprep && prep[i].sql != sql; i++)
		;
	if (i == *nprep && *nprep == MAX_PREPARED) {
		r = PQexecParams(c->conn, sql, n, NULL, vals, NULL, NULL, 0);
		goto result;
	}
	snprintf(name, sizeof(name), "gp%d", i);
	if (i == *nprep || prep[i].gen != gen) {
		r = PQprepare(c->conn, name, sql, 0, NULL);
		if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK) {
			rc = pg_result_error(c, r, "prepare");
			PQclear(r);
			return rc;
		}
		PQclear(r);
		prep[i].sql = sql;
		prep[i].gen = gen;
		if (i == *nprep)
			(*nprep)++;
	}
	r = PQexecPrepared(c->conn, name, n, vals, NULL, NULL, 0);
result:
	if (r == NULL || (PQresultStatus(r) != PGRES_COMMAND_OK &&
			     PQresultStatus(r) != PGRES_TUPLES_OK)) {
		rc = pg_result_error(c, r, "statement");
		PQclear(r);
		return rc;
	}
	*out = r;
	return 0;
}

static int
run_w(struct pg_store *s, const char *sql, int n, const char *const *vals,
    PGresult **out)
{
	return run_on(s->w, s->wprep, &s->nwprep, s->wgen, sql, n, vals, out);
}

/* ---- the transaction, its fence and its replay ---- */

static void
log_clear(struct pg_store *s)
{
	size_t i;
	int k;

	for (i = 0; i < s->nlog; i++)
		for (k = 0; k < s->log[i].n; k++)
			free(s->log[i].vals[k]);
	s->nlog = 0;
}

static int
log_add(struct pg_store *s, const char *sql, const struct params *p)
{
	struct logged *l;
	int k;

	if (s->nlog == s->caplog) {
		size_t cap = s->caplog ? s->caplog * 2 : 64;
		struct logged *nl = realloc(s->log, cap * sizeof(*nl));

		if (nl == NULL)
			return GP_ENOMEM;
		s->log = nl;
		s->caplog = cap;
	}
	l = &s->log[s->nlog];
	l->sql = sql;
	l->n = p->n;
	for (k = 0; k < p->n; k++) {
		if ((l->vals[k] = strdup(p->v[k])) == NULL) {
			while (k-- > 0)
				free(l->vals[k]);
			return GP_ENOMEM;
		}
	}
	s->nlog++;
	return 0;
}

/* The process is stopping: the transaction held in retry gives up. */
static int
give_up_stopping(struct pg_store *s)
{
	gp_warn("postgresql write given up db=%s: the coordinator is "
		"stopping; the batch was not committed and its requests are "
		"answered so error=\"%s\"",
	    s->w->where, s->w->error);
	return gp_store_fail(&s->base, GP_ESTOPPED, "its retry given up "
	    "while PostgreSQL at %s fails: %s", s->w->where, s->w->error);
}

/*
 * After a failure that a retry may cure (rc: GP_ECONN, GP_EPERM,
 * GP_ECONFLICT): waits its back-off, makes the connection again when it
 * was lost (or rolls the aborted transaction back), and marks the
 * transaction to be begun and replayed. GP_ETIMEDOUT once the database
 * has failed for PG_STORE_RETRY_MS; GP_ESTOPPED at once, or as soon as
 * its back-off is cut short, once the process is stopping
 * (pg_stop_retrying): a write that failed is then not retried.
 */
static int
recover(struct pg_store *s, int rc)
{
	int64_t now = gp_mono_ms();

	if (pg_retrying_stopped())
		return give_up_stopping(s);

	if (s->failing_since == 0) {
		s->failing_since = now;
		s->tries = 0;
		gp_warn("postgresql write failed db=%s kind=%s: retrying for "
			"up to %d s; nothing of this batch is answered until "
			"it commits",
		    s->w->where,
		    rc == GP_ECONN   ? "connection-lost"
		    : rc == GP_EPERM ? "read-only"
				     : "conflict",
		    PG_STORE_RETRY_MS / 1000);
	}
	if (now - s->failing_since >= PG_STORE_RETRY_MS)
		return gp_store_fail(&s->base, GP_ETIMEDOUT,
		    "PostgreSQL at %s failed for %d s: %s", s->w->where,
		    PG_STORE_RETRY_MS / 1000, s->w->error);
	if (pg_retry_nap(pg_backoff_ms(s->tries++)))
		return give_up_stopping(s);
	if (PQpipelineStatus(s->w->conn) != PQ_PIPELINE_OFF)
		PQexitPipelineMode(s->w->conn);
	if (PQstatus(s->w->conn) != CONNECTION_OK) {
		pg_reconnect(s->w, 0);
	} else {
		if (PQtransactionStatus(s->w->conn) != PQTRANS_IDLE)
			PQclear(PQexec(s->w->conn, "ROLLBACK"));
		/* A pipeline cut short may have left some unprepared. */
		PQclear(PQexec(s->w->conn, "DEALLOCATE ALL"));
	}
	s->wgen++;
	s->sent = 0;
	s->nsent = 0;
	return 0;
}

static int
retryable(int rc)
{
	return rc == GP_ECONN || rc == GP_EPERM || rc == GP_ECONFLICT;
}

/* The statement failed for good: the transaction is over. */
static int
tx_failed(struct pg_store *s, int rc)
{
	char leader[512] = "";

	if (rc == GP_EFENCED)
		gp_store_fail(&s->base, rc, "fenced: another coordinator leads "
		    "the pool now (this one wrote with epoch %lld): %s",
		    (long long)s->epoch, s->w->error);
	else if (rc != GP_ETIMEDOUT && rc != GP_ESTOPPED)
		gp_store_fail(&s->base, rc, "%s", s->w->error);
	if (PQpipelineStatus(s->w->conn) != PQ_PIPELINE_OFF)
		PQexitPipelineMode(s->w->conn);
	if (PQstatus(s->w->conn) == CONNECTION_OK &&
	    PQtransactionStatus(s->w->conn) != PQTRANS_IDLE)
		PQclear(PQexec(s->w->conn, "ROLLBACK"));
	s->sent = 0;
	s->nsent = 0;
	if (s->in_tx && (rc == GP_EFENCED || rc == GP_ESTOPPED ||
	    rc == GP_ETIMEDOUT))
		s->doomed = rc;
	if (rc == GP_EFENCED) {
		/*
		 * Another coordinator leads: this one must never commit
		 * again (leader_epoch() is 0 from now on: every later
		 * transaction fails here without a round trip), and its
		 * memory is ahead of the store. Step down as leader.c
		 * does: the state thread answers this batch's requests
		 * "not the leader", naming the new one when the database
		 * says who (its fence just read gp_leader), and the
		 * process exits (main.c; the service manager may restart
		 * it as a standby).
		 */
		gp_error("postgresql fenced db=%s epoch=%lld: stepping down "
			 "error=\"%s\"",
		    s->w->where, (long long)s->epoch, s->w->error);
		if (s->epoch > 0)
			pg_leader_addr(s->w, leader, sizeof(leader));
		leader_lost("a write was fenced: another coordinator "
		    "raised the epoch", leader);
	}
	return rc;
}

/*
 * A pipeline (libpq's pipeline mode): statements sent without waiting for
 * their answers, read back in order; at most PIPE_AHEAD unread, so that
 * neither side's socket buffer fills (the server waiting for us to read
 * while we wait for it to read).
 */
#define PIPE_AHEAD 256

struct pipe {
	struct pg_store *s;
	int ahead; /* sent, answer unread */
	int rc;	   /* the first failure */
};

/* Reads answers until at most upto are unread. */
static void
pipe_drain(struct pipe *p, int upto)
{
	PGconn *conn = p->s->w->conn;
	PGresult *r;
	int st;

	while (p->ahead > upto) {
		r = PQgetResult(conn);
		if (r == NULL) {
			if (p->rc == 0)
				p->rc = pg_result_error(p->s->w, NULL,
				    "pipeline");
			if (PQstatus(conn) != CONNECTION_OK) {
				p->ahead = 0;
				return;
			}
			continue;
		}
		st = PQresultStatus(r);
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK &&
		    st != PGRES_PIPELINE_ABORTED && p->rc == 0)
			p->rc = pg_result_error(p->s->w, r, "statement");
		PQclear(r);
		/* Each statement's answers end with a NULL. */
		while ((r = PQgetResult(conn)) != NULL)
			PQclear(r);
		p->ahead--;
	}
}

/* Queues one statement, prepared on this connection once. */
static void
pipe_send(struct pipe *p, const char *sql, int n, const char *const *vals)
{
	struct pg_store *s = p->s;
	PGconn *conn = s->w->conn;
	char name[16];
	int i, ok;

	if (p->rc != 0)
		return;
	for (i = 0; i < s->nwprep && s->wprep[i].sql != sql; i++)
		;
	if (i == s->nwprep && s->nwprep == MAX_PREPARED) {
		ok = PQsendQueryParams(conn, sql, n, NULL, vals, NULL, NULL, 0);
	} else {
		snprintf(name, sizeof(name), "gp%d", i);
		ok = 1;
		if (i == s->nwprep || s->wprep[i].gen != s->wgen) {
			ok = PQsendPrepare(conn, name, sql, 0, NULL);
			if (ok) {
				p->ahead++;
				s->wprep[i].sql = sql;
				s->wprep[i].gen = s->wgen;
				if (i == s->nwprep)
					s->nwprep++;
			}
		}
		ok = ok && PQsendQueryPrepared(conn, name, n, vals, NULL, NULL,
			       0);
	}
	if (!ok) {
		p->rc = pg_result_error(s->w, NULL, "pipeline send");
		return;
	}
	p->ahead++;
	if (p->ahead >= PIPE_AHEAD) {
		if (PQsendFlushRequest(conn) != 1 || PQflush(conn) != 0) {
			p->rc = pg_result_error(s->w, NULL, "pipeline flush");
			return;
		}
		pipe_drain(p, 0);
	}
}

/*
 * Sends what the server has not run yet, in one round trip: BEGIN and
 * the fence when the transaction is not begun on this connection (after
 * a failure: a replay of every statement kept), then the statements kept
 * since; commit: then the batch's number and COMMIT.
 */
static int
sync_pending(struct pg_store *s, int commit, int64_t seq)
{
	static const char fence_sql[] = "SELECT gp_fence($1::bigint)";
	static const char seq_sql[] =
	    "UPDATE gp_batch SET seq = $1::bigint WHERE id = 1";
	struct pipe p = {s, 0, 0};
	char epoch[32], seqtext[32];
	const char *v[1];
	PGconn *conn = s->w->conn;
	PGresult *r;
	size_t i, from = s->sent ? s->nsent : 0;

	if (s->sent && from == s->nlog && !commit)
		return 0;
	if (!s->sent) {
		if (s->elected)
			s->epoch = leader_epoch();
		if (s->epoch <= 0) {
			snprintf(s->w->error, sizeof(s->w->error),
			    "this coordinator does not lead (any more)");
			return GP_EFENCED;
		}
	}
	if (PQenterPipelineMode(conn) != 1)
		return pg_result_error(s->w, NULL, "pipeline");
	if (!s->sent) {
		pipe_send(&p, "BEGIN", 0, NULL);
		snprintf(epoch, sizeof(epoch), "%lld", (long long)s->epoch);
		v[0] = epoch;
		pipe_send(&p, fence_sql, 1, v);
	}
	for (i = from; i < s->nlog; i++)
		pipe_send(&p, s->log[i].sql, s->log[i].n,
		    (const char *const *)s->log[i].vals);
	if (commit) {
		snprintf(seqtext, sizeof(seqtext), "%lld", (long long)seq);
		v[0] = seqtext;
		pipe_send(&p, seq_sql, 1, v);
		pipe_send(&p, "COMMIT", 0, NULL);
	}
	if (PQpipelineSync(conn) != 1 && p.rc == 0)
		p.rc = pg_result_error(s->w, NULL, "pipeline sync");
	pipe_drain(&p, 0);
	if (PQstatus(conn) == CONNECTION_OK) {
		/* The sync's own answer. */
		while ((r = PQgetResult(conn)) != NULL) {
			int st = PQresultStatus(r);

			PQclear(r);
			if (st == PGRES_PIPELINE_SYNC)
				break;
		}
		PQexitPipelineMode(conn);
	}
	if (p.rc == 0 && PQstatus(conn) != CONNECTION_OK)
		p.rc = pg_result_error(s->w, NULL, "pipeline");
	if (p.rc != 0)
		return p.rc;
	if (!s->sent && s->nlog > 0 && s->failing_since != 0)
		gp_info("postgresql transaction replayed db=%s statements=%zu",
		    s->w->where, s->nlog);
	s->sent = 1;
	s->nsent = s->nlog;
	return 0;
}

/*
 * Runs one statement at once inside the transaction (after what is
 * pending), retrying what a retry can cure. keep: a write, kept for a
 * replay. *out: its result (the caller clears it).
 */
static int
tx_run(struct pg_store *s, int keep, const char *sql, const struct params *p,
    PGresult **out)
{
	PGresult *r = NULL;
	int rc;

	*out = NULL;
	if (!s->in_tx)
		return gp_store_fail(&s->base, GP_EINVAL,
		    "a write outside a transaction");
	for (;;) {
		rc = sync_pending(s, 0, 0);
		if (rc == 0)
			rc = run_w(s, sql, p->n, p->v, &r);
		if (rc == 0)
			break;
		if (!retryable(rc) || (rc = recover(s, rc)) != 0)
			return tx_failed(s, rc);
	}
	if (keep) {
		if ((rc = log_add(s, sql, p)) != 0) {
			PQclear(r);
			return tx_failed(s, gp_store_fail(&s->base, rc,
					      "out of memory"));
		}
		s->nsent = s->nlog;
	}
	*out = r;
	return 0;
}

/*
 * A write: sql with fmt's parameters. changed NULL: kept, and sent with
 * the rest of the transaction at the next read or at the commit (one
 * round trip for the batch, outside the state's write lock). changed
 * non-NULL: run at once, *changed the rows it changed (or returned).
 */
int
pg_store_run(struct gp_store *gs, int64_t *changed, const char *sql,
    const char *fmt, ...)
{
	struct pg_store *s = pg_store_of(gs);
	struct params p;
	PGresult *r;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	params_vfill(&p, fmt, ap);
	va_end(ap);
	if (changed == NULL) {
		if (!s->in_tx)
			return gp_store_fail(gs, GP_EINVAL,
			    "a write outside a transaction");
		if ((rc = log_add(s, sql, &p)) != 0)
			return gp_store_fail(gs, rc, "out of memory");
		return 0;
	}
	if ((rc = tx_run(s, 1, sql, &p, &r)) != 0)
		return rc;
	*changed = strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return 0;
}

/*
 * A read by the state thread: in its transaction when one is open (it
 * sees the batch's own writes), else on its own, retried the same way.
 */
int
pg_store_query(struct pg_store *s, PGresult **out, const char *sql,
    const char *fmt, ...)
{
	struct params p;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	params_vfill(&p, fmt, ap);
	va_end(ap);
	if (s->in_tx)
		return tx_run(s, 0, sql, &p, out);
	for (;;) {
		rc = run_w(s, sql, p.n, p.v, out);
		if (rc == 0) {
			s->failing_since = 0;
			return 0;
		}
		if (!retryable(rc) || (rc = recover(s, rc)) != 0) {
			if (rc != GP_ETIMEDOUT)
				gp_store_fail(&s->base, rc, "%s", s->w->error);
			return rc;
		}
	}
}

int64_t
col_int(const PGresult *r, int row, int col)
{
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* ---- life ---- */

static void store_close(struct gp_store *gs);

static int
store_open(const char *url, struct gp_store **out, char *err, size_t errlen)
{
	struct pg_store *s = calloc(1, sizeof(*s));
	char pool[PG_POOL_ID_LEN];
	PGresult *r;
	int rc;

	*out = NULL;
	if (s == NULL)
		return GP_ENOMEM;
	s->base.ops = &gp_store_pg_ops;
	pg_url_redact(url, s->base.target, sizeof(s->base.target));
	pthread_mutex_init(&s->rlock, NULL);
	if ((rc = pg_connect(url, PG_STORE_OPEN_WAIT_MS, &s->w)) != 0) {
		snprintf(err, errlen, "%s", s->w != NULL ? s->w->error
							 : "out of memory");
		goto fail;
	}
	if ((rc = pg_schema_open(s->w, NULL, pool)) != 0) {
		snprintf(err, errlen, "%s", s->w->error);
		goto fail;
	}
	memcpy(s->base.pool_id, pool, sizeof(s->base.pool_id));
	s->base.schema_version = PG_SCHEMA_VERSION;
	/* main.c opens it only once it leads (NEVER unelected there). */
	s->elected = leader_epoch() > 0;
	if (!s->elected) {
		snprintf(err, errlen, "this coordinator does not lead (any "
		    "more): the store is not opened");
		rc = GP_EFENCED;
		goto fail;
	}
	r = PQexec(s->w->conn, "SELECT seq FROM gp_batch WHERE id = 1");
	if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK ||
	    PQntuples(r) != 1) {
		rc = pg_result_error(s->w, r, "batch number");
		snprintf(err, errlen, "%s", s->w->error);
		PQclear(r);
		goto fail;
	}
	s->batch_seq = col_int(r, 0, 0);
	PQclear(r);
	if ((rc = pg_connect(url, PG_STORE_OPEN_WAIT_MS, &s->r)) != 0) {
		snprintf(err, errlen, "a reading connection: %s",
		    s->r != NULL ? s->r->error : "out of memory");
		goto fail;
	}
	gp_info("postgresql store open db=%s pool=%s schema=%d epoch=%lld "
		"elected=%d",
	    s->w->where, s->base.pool_id, PG_SCHEMA_VERSION,
	    (long long)(s->elected ? leader_epoch() : s->epoch), s->elected);
	*out = &s->base;
	return 0;
fail:
	store_close(&s->base);
	return rc;
}

static void
store_close(struct gp_store *gs)
{
	struct pg_store *s = pg_store_of(gs);

	if (s == NULL)
		return;
	log_clear(s);
	free(s->log);
	pg_close(s->w);
	pthread_mutex_lock(&s->rlock);
	pg_close(s->r);
	pthread_mutex_unlock(&s->rlock);
	pthread_mutex_destroy(&s->rlock);
	free(s);
}

static int
store_begin(struct gp_store *gs)
{
	struct pg_store *s = pg_store_of(gs);

	if (s->in_tx)
		return gp_store_fail(gs, GP_EINVAL, "transactions do not nest");
	s->in_tx = 1;
	s->sent = 0;
	s->nsent = 0;
	s->doomed = 0;
	log_clear(s);
	return 0;
}

/* After a COMMIT whose answer was lost: did it happen? 1, 0 or < 0. */
static int
committed(struct pg_store *s, int64_t seq)
{
	PGresult *r;
	int rc;

	for (;;) {
		if ((rc = recover(s, GP_ECONN)) != 0)
			return rc;
		r = PQexec(s->w->conn, "SELECT seq FROM gp_batch WHERE id = 1");
		if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK &&
		    PQntuples(r) == 1) {
			rc = col_int(r, 0, 0) == seq;
			PQclear(r);
			return rc;
		}
		rc = pg_result_error(s->w, r, "batch number");
		PQclear(r);
		if (!retryable(rc))
			return rc;
	}
}

static int
store_commit(struct gp_store *gs)
{
	struct pg_store *s = pg_store_of(gs);
	int64_t seq = s->batch_seq + 1;
	int rc;

	if (!s->in_tx)
		return gp_store_fail(gs, GP_EINVAL, "commit outside a transaction");
	gs->commit_unknown = 0;
	if (s->doomed != 0) { /* (the store's error says why) */
		rc = s->doomed;
		goto out;
	}
	if (!s->sent && s->nlog == 0) { /* nothing was written */
		s->in_tx = 0;
		return 0;
	}
	for (;;) {
		rc = sync_pending(s, 1, seq);
		if (rc == 0)
			break;
		if (rc == GP_ECONN) {
			/* The answer was lost: the commit may have happened. */
			rc = committed(s, seq);
			if (rc == 1)
				break;
			if (rc < 0) {
				/* (not asked: stopping, or the time ran out) */
				gs->commit_unknown = 1;
				tx_failed(s, rc);
				goto out;
			}
			continue;
		}
		if (!retryable(rc) || (rc = recover(s, rc)) != 0) {
			tx_failed(s, rc);
			goto out;
		}
	}
	if (s->failing_since != 0)
		gp_info("postgresql write recovered db=%s after_ms=%lld",
		    s->w->where, (long long)(gp_mono_ms() - s->failing_since));
	s->failing_since = 0;
	s->batch_seq = seq;
	rc = 0;
out:
	s->in_tx = 0;
	s->sent = 0;
	s->nsent = 0;
	log_clear(s);
	return rc;
}

static int
store_rollback(struct gp_store *gs)
{
	struct pg_store *s = pg_store_of(gs);

	if (!s->in_tx)
		return 0;
	if (s->sent && PQstatus(s->w->conn) == CONNECTION_OK)
		PQclear(PQexec(s->w->conn, "ROLLBACK"));
	s->in_tx = 0;
	s->sent = 0;
	s->nsent = 0;
	log_clear(s);
	return 0;
}

/* ---- the model ---- */

static int
put_job(struct gp_store *s, const struct job *job)
{
	struct store_job_text t;
	int rc;

	if (store_job_encode(job, &t) != 0)
		return gp_store_fail(s, GP_ENOMEM, "out of memory");
	rc = pg_store_run(s, NULL,
	    "INSERT INTO gp_jobs VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,"
	    "$12,$13,$14,$15,$16,$17,$18,$19) ON CONFLICT (id) DO UPDATE SET"
	    " \"user\" = excluded.\"user\", spec = excluded.spec,"
	    " state = excluded.state,"
	    " cancel_requested = excluded.cancel_requested,"
	    " attempts = excluded.attempts, node_id = excluded.node_id,"
	    " gpus = excluded.gpus, submitted_ms = excluded.submitted_ms,"
	    " started_ms = excluded.started_ms,"
	    " finished_ms = excluded.finished_ms, has_exit = excluded.has_exit,"
	    " exit_code = excluded.exit_code, signal = excluded.signal,"
	    " reason = excluded.reason, message = excluded.message,"
	    " history = excluded.history, log_base = excluded.log_base,"
	    " log_truncated = excluded.log_truncated",
	    "IssiiiIsIIIiiisssIi", job->id, job->user, t.spec, (int)job->state,
	    job->cancel_requested, job->attempts, job->node_id, t.gpus,
	    job->submitted_ms, job->started_ms, job->finished_ms,
	    job->has_exit, job->exit_code, job->signal, job->reason,
	    job->message ? job->message : "", t.history, job->log_base,
	    job->log_truncated);
	store_job_text_free(&t);
	return rc;
}

static int
put_array(struct gp_store *s, int64_t first, const char *user,
    const struct gp_jobspec *spec, const int *tasks, int ntasks,
    int64_t submitted_ms)
{
	json_t *js = gp_jobspec_encode(spec);
	char *spec_text = js != NULL ? json_dumps(js, JSON_COMPACT) : NULL;
	char *list = store_array_tasks_encode(tasks, ntasks);
	int rc;

	json_decref(js);
	if (spec_text == NULL || list == NULL)
		rc = gp_store_fail(s, GP_ENOMEM, "out of memory");
	else
		rc = pg_store_run(s, NULL,
		    "INSERT INTO gp_arrays VALUES($1,$2,$3,$4,$5)"
		    " ON CONFLICT (id) DO UPDATE SET \"user\" = excluded.\"user\","
		    " spec = excluded.spec, tasks = excluded.tasks,"
		    " submitted_ms = excluded.submitted_ms",
		    "IsssI", first, user, spec_text, list, submitted_ms);
	free(spec_text);
	free(list);
	return rc;
}

static int
put_node(struct gp_store *s, const struct node *node)
{
	char *gpus = store_node_gpus_encode(node);
	int rc;

	if (gpus == NULL)
		return gp_store_fail(s, GP_ENOMEM, "out of memory");
	rc = pg_store_run(s, NULL,
	    "INSERT INTO gp_nodes VALUES($1,$2,$3,$4,$5,$6,$7)"
	    " ON CONFLICT (id) DO UPDATE SET name = excluded.name,"
	    " owner_token = excluded.owner_token,"
	    " owner_name = excluded.owner_name, cpus = excluded.cpus,"
	    " mem_mib = excluded.mem_mib, gpus = excluded.gpus",
	    "IsIsiIs", node->id, node->name, node->owner_token,
	    node->owner_name, node->cpus, node->mem_mib, gpus);
	free(gpus);
	return rc;
}

static int
put_token(struct gp_store *s, const struct token_entry *t, int64_t created_ms)
{
	int64_t changed = 0;
	int rc;

	/* No unique violation: it would abort the whole transaction. */
	rc = pg_store_run(s, &changed,
	    "INSERT INTO gp_tokens(id, name, role, hash, created_ms, group_id)"
	    " VALUES($1,$2,$3,$4,$5,$6) ON CONFLICT DO NOTHING",
	    "IsssII", t->id, t->name, gp_role_name(t->role), t->hash,
	    created_ms, t->group_id > 0 ? t->group_id : (int64_t)1);
	if (rc == 0 && changed == 0)
		return gp_store_fail(s, GP_ECONFLICT, "token id %lld or its "
		    "hash exists", (long long)t->id);
	return rc;
}

static int
set_token_group(struct gp_store *s, int64_t token_id, int64_t group_id)
{
	return pg_store_run(s, NULL,
	    "UPDATE gp_tokens SET group_id = $1 WHERE id = $2", "II",
	    group_id, token_id);
}

/* A revoked token's id stays used (see store_sqlite.c). */
static int
delete_token(struct gp_store *s, int64_t id)
{
	int rc = pg_store_run(s, NULL, "DELETE FROM gp_tokens WHERE id = $1",
	    "I", id);

	if (rc != 0)
		return rc;
	return pg_store_run(s, NULL,
	    "INSERT INTO gp_meta VALUES('token_id_floor', $1)"
	    " ON CONFLICT (key) DO UPDATE SET value ="
	    " greatest(gp_meta.value::bigint, excluded.value::bigint)::text",
	    "I", id + 1);
}

static int
token_id_floor(struct gp_store *gs, int64_t *next)
{
	struct pg_store *s = pg_store_of(gs);
	PGresult *r;
	int rc;

	*next = 0;
	rc = pg_store_query(s, &r, "SELECT value::bigint FROM gp_meta"
				   " WHERE key = 'token_id_floor'",
	    NULL);
	if (rc != 0)
		return rc;
	if (PQntuples(r) > 0)
		*next = col_int(r, 0, 0);
	PQclear(r);
	return 0;
}

static int
load_tokens(struct pg_store *s, const struct store_loader *l)
{
	struct token_entry *t;
	PGresult *r;
	int i, rc;

	rc = pg_store_query(s, &r, "SELECT id, name, role, hash, group_id,"
				   " created_ms FROM gp_tokens ORDER BY id",
	    NULL);
	if (rc != 0)
		return rc;
	for (i = 0; i < PQntuples(r); i++) {
		if ((t = calloc(1, sizeof(*t))) == NULL) {
			rc = GP_ENOMEM;
			break;
		}
		t->id = col_int(r, i, 0);
		gp_strlcpy(t->name, PQgetvalue(r, i, 1), sizeof(t->name));
		if (gp_role_parse(PQgetvalue(r, i, 2), &t->role) != 0)
			t->role = GP_ROLE_USER;
		gp_strlcpy(t->hash, PQgetvalue(r, i, 3), sizeof(t->hash));
		t->group_id = col_int(r, i, 4);
		t->created_ms = col_int(r, i, 5);
		l->token(l->arg, t);
	}
	PQclear(r);
	return rc;
}

static int
load_nodes(struct pg_store *s, const struct store_loader *l)
{
	struct node *n;
	PGresult *r;
	int i, rc;

	rc = pg_store_query(s, &r, "SELECT id, name, owner_token, owner_name,"
				   " cpus, mem_mib, gpus FROM gp_nodes ORDER BY id",
	    NULL);
	if (rc != 0)
		return rc;
	for (i = 0; i < PQntuples(r); i++) {
		if ((n = calloc(1, sizeof(*n))) == NULL) {
			rc = GP_ENOMEM;
			break;
		}
		n->id = col_int(r, i, 0);
		gp_strlcpy(n->name, PQgetvalue(r, i, 1), sizeof(n->name));
		n->owner_token = col_int(r, i, 2);
		gp_strlcpy(n->owner_name, PQgetvalue(r, i, 3),
		    sizeof(n->owner_name));
		n->cpus = (int)col_int(r, i, 4);
		n->mem_mib = col_int(r, i, 5);
		if (store_node_gpus_decode(PQgetvalue(r, i, 6), n) != 0) {
			free(n);
			rc = GP_ENOMEM;
			break;
		}
		l->node(l->arg, n);
	}
	PQclear(r);
	return rc;
}

/* The job columns, in the order job_from_row reads them. */
#define JOB_COLUMNS                                                       \
	"id, \"user\", spec, state, cancel_requested, attempts, node_id,"  \
	" gpus, submitted_ms, started_ms, finished_ms, has_exit,"          \
	" exit_code, signal, reason, message, history, log_base,"          \
	" log_truncated"

static struct job *
job_from_row(const PGresult *r, int i)
{
	struct store_job_row row;

	row.id = col_int(r, i, 0);
	row.user = PQgetvalue(r, i, 1);
	row.spec = PQgetvalue(r, i, 2);
	row.state = (int)col_int(r, i, 3);
	row.cancel_requested = (int)col_int(r, i, 4);
	row.attempts = (int)col_int(r, i, 5);
	row.node_id = col_int(r, i, 6);
	row.gpus = PQgetvalue(r, i, 7);
	row.submitted_ms = col_int(r, i, 8);
	row.started_ms = col_int(r, i, 9);
	row.finished_ms = col_int(r, i, 10);
	row.has_exit = (int)col_int(r, i, 11);
	row.exit_code = (int)col_int(r, i, 12);
	row.signal = (int)col_int(r, i, 13);
	row.reason = PQgetvalue(r, i, 14);
	row.message = PQgetvalue(r, i, 15);
	row.history = PQgetvalue(r, i, 16);
	row.log_base = col_int(r, i, 17);
	row.log_truncated = (int)col_int(r, i, 18);
	return store_job_decode(&row);
}

static int
load_jobs(struct pg_store *s, const struct store_loader *l,
    int64_t finished_before, int64_t *skipped, int64_t *max_id)
{
	struct store_arrays *arrays = store_arrays_new();
	PGresult *r = NULL;
	struct job *j;
	int64_t id;
	int i, rc, st;

	*max_id = 0;
	if (arrays == NULL)
		return GP_ENOMEM;
	rc = pg_store_query(s, &r, "SELECT id, \"user\", spec, tasks,"
				   " submitted_ms FROM gp_arrays ORDER BY id",
	    NULL);
	if (rc != 0)
		goto out;
	for (i = 0; i < PQntuples(r) && rc == 0; i++)
		rc = store_arrays_add(arrays, col_int(r, i, 0),
		    PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
		    PQgetvalue(r, i, 3), col_int(r, i, 4));
	PQclear(r);
	r = NULL;
	if (rc != 0)
		goto out;
	*max_id = store_arrays_max_id(arrays);
	rc = pg_store_query(s, &r,
	    "SELECT " JOB_COLUMNS " FROM gp_jobs ORDER BY id", NULL);
	if (rc != 0)
		goto out;
	for (i = 0; i < PQntuples(r); i++) {
		id = col_int(r, i, 0);
		if (id > *max_id)
			*max_id = id;
		if ((rc = store_arrays_before(arrays, id, l)) != 0)
			break;
		st = (int)col_int(r, i, 3);
		if (store_job_row_skipped(st, col_int(r, i, 10),
			finished_before)) {
			skipped[st]++;
			continue;
		}
		if ((j = job_from_row(r, i)) == NULL) {
			rc = GP_ENOMEM;
			break;
		}
		l->job(l->arg, j);
	}
	if (rc == 0)
		rc = store_arrays_before(arrays, INT64_MAX, l);
out:
	PQclear(r);
	store_arrays_free(arrays);
	return rc;
}

static int
load(struct gp_store *gs, const struct store_loader *l,
    int64_t finished_before, int64_t *skipped, int64_t *max_job_id)
{
	struct pg_store *s = pg_store_of(gs);
	int rc;

	*max_job_id = 0;
	if ((rc = load_tokens(s, l)) != 0 || (rc = load_nodes(s, l)) != 0 ||
	    (rc = load_jobs(s, l, finished_before, skipped, max_job_id)) != 0)
		return rc == GP_ENOMEM ? gp_store_fail(gs, rc, "out of memory")
				       : rc;
	return 0;
}

/*
 * A read of any thread, on the reading connection (rlock held): one
 * reconnect when the connection was lost. *out: the result, or NULL.
 */
static int
read_run(struct pg_store *s, const char *sql, const struct params *p,
    PGresult **out)
{
	int rc, again;

	for (again = 0;; again++) {
		rc = run_on(s->r, s->rprep, &s->nrprep, s->rgen, sql, p->n,
		    p->v, out);
		if (rc != GP_ECONN || again)
			return rc;
		if (pg_reconnect(s->r, 2000) != 0)
			return rc;
		s->rgen++;
	}
}

static int
read_job(struct gp_store *gs, int64_t id, struct job **out)
{
	static const char sql[] =
	    "SELECT " JOB_COLUMNS " FROM gp_jobs WHERE id = $1";
	struct pg_store *s = pg_store_of(gs);
	struct params p;
	PGresult *r;
	int rc;

	*out = NULL;
	p.n = 1;
	snprintf(p.num[0], sizeof(p.num[0]), "%lld", (long long)id);
	p.v[0] = p.num[0];
	pthread_mutex_lock(&s->rlock);
	rc = read_run(s, sql, &p, &r);
	if (rc == 0) {
		if (PQntuples(r) == 0)
			rc = GP_ENOENT;
		else if ((*out = job_from_row(r, 0)) == NULL)
			rc = GP_ENOMEM;
		PQclear(r);
	} else {
		rc = GP_EIO;
	}
	pthread_mutex_unlock(&s->rlock);
	return rc;
}

static int
read_job_brief(struct gp_store *gs, int64_t id, char *user, int *st,
    int64_t *finished_ms)
{
	static const char sql[] = "SELECT \"user\", state, finished_ms"
				  " FROM gp_jobs WHERE id = $1";
	struct pg_store *s = pg_store_of(gs);
	struct params p;
	PGresult *r;
	int rc;

	p.n = 1;
	snprintf(p.num[0], sizeof(p.num[0]), "%lld", (long long)id);
	p.v[0] = p.num[0];
	pthread_mutex_lock(&s->rlock);
	rc = read_run(s, sql, &p, &r);
	if (rc == 0) {
		if (PQntuples(r) == 0) {
			rc = GP_ENOENT;
		} else {
			gp_strlcpy(user, PQgetvalue(r, 0, 0), GP_NAME_MAX + 1);
			*st = (int)col_int(r, 0, 1);
			*finished_ms = col_int(r, 0, 2);
		}
		PQclear(r);
	} else {
		rc = GP_EIO;
	}
	pthread_mutex_unlock(&s->rlock);
	return rc;
}

/* ---- submit keys ---- */

static int
submit_key_find(struct gp_store *gs, const char *user, const char *key,
    int64_t since_ms, int64_t *job_id, int64_t *count)
{
	struct pg_store *s = pg_store_of(gs);
	PGresult *r;
	int rc;

	rc = pg_store_query(s, &r, "SELECT job_id, count FROM gp_submit_keys"
				   " WHERE \"user\" = $1 AND key = $2"
				   " AND created_ms >= $3",
	    "ssI", user, key, since_ms);
	if (rc != 0)
		return rc;
	rc = PQntuples(r) > 0;
	if (rc) {
		*job_id = col_int(r, 0, 0);
		*count = col_int(r, 0, 1);
	}
	PQclear(r);
	return rc;
}

static int
submit_key_put(struct gp_store *s, const char *user, const char *key,
    int64_t job_id, int64_t count, int64_t now_ms, int64_t prune_before_ms)
{
	int rc;

	if (prune_before_ms > 0 &&
	    (rc = pg_store_run(s, NULL, "DELETE FROM gp_submit_keys"
					" WHERE created_ms < $1",
		 "I", prune_before_ms)) != 0)
		return rc;
	return pg_store_run(s, NULL,
	    "INSERT INTO gp_submit_keys(\"user\", key, job_id, created_ms,"
	    " count) VALUES($1,$2,$3,$4,$5) ON CONFLICT (\"user\", key) DO"
	    " UPDATE SET job_id = excluded.job_id,"
	    " created_ms = excluded.created_ms, count = excluded.count",
	    "ssIII", user, key, job_id, now_ms, count);
}

const struct gp_store_ops gp_store_pg_ops = {
	.name = "postgresql",
	.open = store_open,
	.close = store_close,
	.begin = store_begin,
	.commit = store_commit,
	.rollback = store_rollback,
	.put_job = put_job,
	.put_array = put_array,
	.put_node = put_node,
	.put_token = put_token,
	.set_token_group = set_token_group,
	.delete_token = delete_token,
	.token_id_floor = token_id_floor,
	.load = load,
	.read_job = read_job,
	.read_job_brief = read_job_brief,
	.submit_key_find = submit_key_find,
	.submit_key_put = submit_key_put,
	.ledger_put_group = pg_ledger_put_group,
	.ledger_put_member = pg_ledger_put_member,
	.ledger_delete_member = pg_ledger_delete_member,
	.ledger_put_price = pg_ledger_put_price,
	.ledger_delete_price = pg_ledger_delete_price,
	.ledger_put_budget = pg_ledger_put_budget,
	.ledger_delete_budget = pg_ledger_delete_budget,
	.ledger_put_decay = pg_ledger_put_decay,
	.ledger_post = pg_ledger_post,
	.ledger_load = pg_ledger_load,
	.ledger_spent = pg_ledger_spent,
	.ledger_attempt = pg_ledger_attempt,
	.ledger_usage = pg_ledger_usage,
	.ledger_postings = pg_ledger_postings,
	.meta_open = pg_meta_open,
};
