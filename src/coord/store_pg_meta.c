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
 * A lost connection: the statement fails (GP_ECONN: the caller answers
 * 5xx and the client tries again); the next statement or transaction
 * connects again first (pg_reconnect, with back-off, for at most
 * META_RECONNECT_MS). A read outside a transaction is tried once more
 * on the new connection.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gp.h"
#include "leader.h"
#include "log.h"
#include "store_meta.h"
#include "store_pg_int.h"

#define META_PARAMS_MAX	   24
#define META_RECONNECT_MS 10000
#define META_CONNECT_WAIT_MS 30000

struct pg_meta {
	struct gp_meta base; /* first: the wrappers cast */
	struct pg_conn *c;
	int elected;	    /* leader.c leads: its epoch, read per begin */
	int64_t lone_epoch; /* else the epoch the store took at open */
	int in_tx;	    /* between begin and commit/rollback */
	int sent;	    /* BEGIN and the fence sent */
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
		gp_error("postgresql %s fenced db=%s: stepping down "
			 "error=\"%s\"",
		    m->base.what, m->c->where, m->base.error);
		_exit(LEADER_EXIT_STEPPED_DOWN);
	}
	return rc;
}

/* The connection usable, made again when it was lost. */
static int
ready(struct pg_meta *m)
{
	if (PQstatus(m->c->conn) == CONNECTION_OK)
		return 0;
	if (pg_reconnect(m->c, META_RECONNECT_MS) != 0)
		return fail(m, GP_ECONN);
	return 0;
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
	int64_t epoch = m->elected ? leader_epoch() : m->lone_epoch;
	char sql[96];
	int rc;

	if (epoch <= 0) {
		snprintf(m->c->error, sizeof(m->c->error),
		    "this coordinator does not lead (any more)");
		return fail(m, GP_EFENCED);
	}
	if ((rc = ready(m)) != 0)
		return rc;
	snprintf(sql, sizeof(sql), "BEGIN; SELECT gp_fence(%lld::bigint)",
	    (long long)epoch);
	if ((rc = pg_exec(m->c, sql, "begin")) != 0) {
		if (PQstatus(m->c->conn) == CONNECTION_OK)
			PQclear(PQexec(m->c->conn, "ROLLBACK"));
		return fail(m, rc);
	}
	m->sent = 1;
	return 0;
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
 * One statement: in the caller's transaction (begun on the server with
 * the first), alone when it only reads, else in a fenced transaction of
 * its own.
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
	if (reads_only(sql)) {
		if ((rc = ready(m)) != 0)
			return rc;
		va_copy(again, ap);
		rc = exec_one(m, sql, fmt, ap, out);
		if (rc == GP_ECONN && ready(m) == 0)
			rc = exec_one(m, sql, fmt, again, out);
		va_end(again);
		return rc;
	}
	if ((rc = send_begin(m)) != 0)
		return rc;
	m->sent = 0;
	if ((rc = exec_one(m, sql, fmt, ap, out)) != 0) {
		if (PQstatus(m->c->conn) == CONNECTION_OK)
			PQclear(PQexec(m->c->conn, "ROLLBACK"));
		return rc;
	}
	if ((rc = pg_exec(m->c, "COMMIT", "commit")) != 0) {
		PQclear(*out);
		*out = NULL;
		return fail(m, rc);
	}
	return 0;
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
	m->sent = 0;
	if (sent && (rc = pg_exec(m->c, "COMMIT", "commit")) != 0)
		return fail(m, rc);
	return 0;
}

static int
meta_rollback(struct gp_meta *gm)
{
	struct pg_meta *m = meta_of(gm);
	int sent = m->sent;

	m->in_tx = 0;
	m->sent = 0;
	if (sent && PQstatus(m->c->conn) == CONNECTION_OK)
		PQclear(PQexec(m->c->conn, "ROLLBACK"));
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

/* An empty fenced transaction (fail steps down when fenced off). */
static int
meta_fence(struct gp_meta *gm)
{
	struct pg_meta *m = meta_of(gm);
	int rc;

	if (m->in_tx)
		return GP_EINVAL;
	if ((rc = send_begin(m)) != 0)
		return rc;
	m->sent = 0;
	if ((rc = pg_exec(m->c, "COMMIT", "commit")) != 0)
		return fail(m, rc);
	return 0;
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
