/*
 * store_pg_ledger.c: the ledger's tables in the PostgreSQL store (the
 * ledger_* members of struct gp_store_ops): groups, members, prices,
 * budgets, postings and their entries, decayed usage, the accounts'
 * running totals (written in the state thread's transaction, through
 * store_pg.c's pg_store_run); and the read-side queries behind `gpupool
 * usage` and `gpupool ledger`, on the reading connection. ledger.c keeps
 * the memory side and calls these through the table.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "gp.h"
#include "pg.h"
#include "store.h"
#include "store_pg_int.h"
#include "util.h"

/* ---- the ledger's writes ---- */

int
pg_ledger_put_group(struct gp_store *s, int64_t id, const char *name,
    int64_t weight, int64_t created_ms)
{
	return pg_store_run(s, NULL,
	    "INSERT INTO gp_groups VALUES($1,$2,$3,$4) ON CONFLICT (id) DO"
	    " UPDATE SET name = excluded.name, weight = excluded.weight,"
	    " created_ms = excluded.created_ms",
	    "IsII", id, name, weight, created_ms);
}

int
pg_ledger_put_member(struct gp_store *s, const char *user, int64_t group_id,
    int64_t pos)
{
	return pg_store_run(s, NULL,
	    "INSERT INTO gp_members VALUES($1,$2,$3) ON CONFLICT (\"user\","
	    " group_id) DO UPDATE SET pos = excluded.pos",
	    "sII", user, group_id, pos);
}

int
pg_ledger_delete_member(struct gp_store *s, const char *user, int64_t group_id)
{
	if (group_id == 0)
		return pg_store_run(s, NULL,
		    "DELETE FROM gp_members WHERE \"user\" = $1", "s", user);
	return pg_store_run(s, NULL,
	    "DELETE FROM gp_members WHERE \"user\" = $1 AND group_id = $2",
	    "sI", user, group_id);
}

int
pg_ledger_put_price(struct gp_store *s, const char *cls, int64_t micro)
{
	return pg_store_run(s, NULL,
	    "INSERT INTO gp_prices VALUES($1,$2) ON CONFLICT (lower(class))"
	    " DO UPDATE SET class = excluded.class, micro = excluded.micro",
	    "sI", cls, micro);
}

int
pg_ledger_delete_price(struct gp_store *s, const char *cls)
{
	if (cls == NULL)
		return pg_store_run(s, NULL, "DELETE FROM gp_prices", NULL);
	return pg_store_run(s, NULL,
	    "DELETE FROM gp_prices WHERE lower(class) = lower($1)", "s", cls);
}

int
pg_ledger_put_budget(struct gp_store *s, const char *kind, const char *name,
    int64_t amount, const char *period)
{
	return pg_store_run(s, NULL,
	    "INSERT INTO gp_budgets VALUES($1,$2,$3,$4) ON CONFLICT (kind,"
	    " name) DO UPDATE SET amount = excluded.amount,"
	    " period = excluded.period",
	    "ssIs", kind, name, amount, period);
}

int
pg_ledger_delete_budget(struct gp_store *s, const char *kind, const char *name)
{
	return pg_store_run(s, NULL,
	    "DELETE FROM gp_budgets WHERE kind = $1 AND name = $2", "ss", kind,
	    name);
}

int
pg_ledger_put_decay(struct gp_store *s, const char *kind, const char *name,
    const struct acct_decay *d)
{
	return pg_store_run(s, NULL,
	    "INSERT INTO gp_usage_decay VALUES($1,$2,$3,$4,$5) ON CONFLICT"
	    " (kind, name) DO UPDATE SET gpu_s = excluded.gpu_s,"
	    " credits = excluded.credits, as_of_ms = excluded.as_of_ms",
	    "ssddI", kind, name, d->gpu_s, d->credits, d->as_of_ms);
}

/*
 * The posting, its two entries and both running totals in one statement,
 * so that a replay makes them again together (a posting's id comes from
 * a sequence, which a rolled-back transaction does not give back); a
 * posting that exists changes nothing, and no unique violation aborts
 * the transaction. Sent with the batch, not at once: every finished
 * attempt posts, and a round trip each under the state's write lock cost
 * the dispatch dearly. So a second posting of one (job, attempt, seq) is
 * not answered GP_ECONFLICT as the contract says, but left out of the
 * books silently (never posted twice either way; ledger.c never asks for
 * one: it numbers an attempt's postings itself).
 */
int
pg_ledger_post(struct gp_store *s, const struct acct_posting *p)
{
	return pg_store_run(s, NULL,
	    "WITH p AS (INSERT INTO gp_postings(job_id, attempt, seq, final,"
	    " at_ms, from_ms, to_ms, node_id, amount, gpu_ms, part)"
	    " VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)"
	    " ON CONFLICT (job_id, attempt, seq) DO NOTHING RETURNING id),"
	    " e AS (INSERT INTO gp_entries"
	    " SELECT id, 'user', $12::text, $13::bigint, -$9::bigint,"
	    " $10::bigint, $5::bigint FROM p UNION ALL"
	    " SELECT id, 'provider', $14::text, $15::bigint, $9::bigint,"
	    " $10::bigint, $5::bigint FROM p),"
	    " t AS (INSERT INTO gp_account_totals"
	    " SELECT 'user', $12::text, $13::bigint, -$9::bigint, $10::bigint, 1"
	    " FROM p UNION ALL"
	    " SELECT 'provider', $14::text, $15::bigint, $9::bigint,"
	    " $10::bigint, 1 FROM p"
	    " ON CONFLICT (account, name, group_id) DO UPDATE SET"
	    " amount = gp_account_totals.amount + excluded.amount,"
	    " gpu_ms = gp_account_totals.gpu_ms + excluded.gpu_ms,"
	    " postings = gp_account_totals.postings + 1)"
	    " SELECT id FROM p",
	    "IiiiIIIIIIisIsI", p->job_id, p->attempt, p->seq, p->final,
	    p->at_ms, p->from_ms, p->to_ms, p->node_id, p->amount, p->gpu_ms,
	    p->part, p->user, p->user_group, p->provider, p->provider_group);
}

/* ---- the ledger's reads (the state thread's) ---- */

int
pg_ledger_load(struct gp_store *gs, const struct store_ledger_loader *l)
{
	struct pg_store *s = pg_store_of(gs);
	struct acct_decay d;
	PGresult *r;
	int i, rc;

#define EACH(sql)                                                     \
	if ((rc = pg_store_query(s, &r, sql, NULL)) != 0)             \
		return rc;                                            \
	for (i = 0; rc == 0 && i < PQntuples(r); i++)
#define END                                                           \
	PQclear(r);                                                   \
	if (rc != 0)                                                  \
		return gp_store_fail(gs, rc, "%s", gp_strerror(rc));

	EACH("SELECT id, name, weight, created_ms FROM gp_groups ORDER BY id")
	rc = l->group(l->arg, col_int(r, i, 0), PQgetvalue(r, i, 1),
	    col_int(r, i, 2), col_int(r, i, 3));
	END
	EACH("SELECT \"user\", group_id, pos FROM gp_members ORDER BY pos")
	rc = l->member(l->arg, PQgetvalue(r, i, 0), col_int(r, i, 1),
	    col_int(r, i, 2));
	END
	EACH("SELECT class, micro FROM gp_prices")
	rc = l->price(l->arg, PQgetvalue(r, i, 0), col_int(r, i, 1));
	END
	EACH("SELECT kind, name, amount, period FROM gp_budgets")
	rc = l->budget(l->arg, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
	    col_int(r, i, 2), PQgetvalue(r, i, 3));
	END
	EACH("SELECT kind, name, gpu_s, credits, as_of_ms FROM gp_usage_decay")
	{
		d.gpu_s = strtod(PQgetvalue(r, i, 2), NULL);
		d.credits = strtod(PQgetvalue(r, i, 3), NULL);
		d.as_of_ms = col_int(r, i, 4);
		rc = l->decay(l->arg, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		    &d);
	}
	END
	EACH("SELECT account, name, group_id, amount, gpu_ms, postings"
	     " FROM gp_account_totals")
	rc = l->total(l->arg, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
	    col_int(r, i, 2), col_int(r, i, 3), col_int(r, i, 4),
	    col_int(r, i, 5));
	END
#undef EACH
#undef END
	return 0;
}

int
pg_ledger_spent(struct gp_store *gs, const char *kind, const char *name,
    int64_t group_id, int64_t since_ms, int64_t *spent)
{
	struct pg_store *s = pg_store_of(gs);
	PGresult *r;
	int rc;

	if (strcmp(kind, "user") == 0)
		rc = pg_store_query(s, &r,
		    "SELECT coalesce(sum(amount), 0) FROM gp_entries WHERE"
		    " account = 'user' AND name = $1 AND at_ms >= $2",
		    "sI", name, since_ms);
	else
		rc = pg_store_query(s, &r,
		    "SELECT coalesce(sum(amount), 0) FROM gp_entries WHERE"
		    " account = 'user' AND group_id = $1 AND at_ms >= $2",
		    "II", group_id, since_ms);
	if (rc != 0)
		return rc;
	*spent = -col_int(r, 0, 0);
	PQclear(r);
	return 0;
}

int
pg_ledger_attempt(struct gp_store *gs, int64_t job_id, int attempt, int part,
    struct store_attempt_sum *out)
{
	struct pg_store *s = pg_store_of(gs);
	PGresult *r;
	int rc;

	rc = pg_store_query(s, &r,
	    "SELECT count(*), coalesce(max(seq), -1),"
	    " coalesce(sum(amount), 0), coalesce(sum(gpu_ms), 0),"
	    " coalesce(max(to_ms), 0) FROM gp_postings"
	    " WHERE job_id = $1 AND attempt = $2 AND ($3 < 0 OR part = $3)",
	    "Iii", job_id, attempt, part);
	if (rc != 0)
		return rc;
	out->count = col_int(r, 0, 0);
	out->max_seq = col_int(r, 0, 1);
	out->amount = col_int(r, 0, 2);
	out->gpu_ms = col_int(r, 0, 3);
	out->max_to_ms = col_int(r, 0, 4);
	PQclear(r);
	return 0;
}

/* ---- the ledger's queries (any thread) ---- */

/*
 * The filter's parameters, always all seven and in this order ($1 since,
 * $2 until, $3 user, $4 group, $5 provider, $6 job, $7 limit), so that
 * a query names only those its conditions use.
 */
static void
filter_params(const struct ledger_filter *f, struct params *p)
{
	snprintf(p->num[0], 32, "%lld", (long long)f->since_ms);
	snprintf(p->num[1], 32, "%lld",
	    (long long)(f->until_ms > 0 ? f->until_ms : INT64_MAX));
	snprintf(p->num[3], 32, "%lld", (long long)f->group_id);
	snprintf(p->num[5], 32, "%lld", (long long)f->job_id);
	snprintf(p->num[6], 32, "%d", f->limit > 0 ? f->limit : 100);
	p->v[0] = p->num[0];
	p->v[1] = p->num[1];
	p->v[2] = f->user;
	p->v[3] = p->num[3];
	p->v[4] = f->provider;
	p->v[5] = p->num[5];
	p->v[6] = p->num[6];
	p->n = 7;
}

/*
 * The usage query: the same conditions as store_sqlite_ledger.c's, each
 * written only when its filter is given; the unused parameters are typed
 * by the casts in the always-true tail.
 */
static void
usage_sql(const struct ledger_filter *f, struct gp_buf *q)
{
	gp_buf_printf(q, "SELECT e.account, e.name, coalesce(g.name, '?'),"
			 " sum(e.amount), sum(e.gpu_ms), count(*)"
			 " FROM gp_entries e LEFT JOIN gp_groups g"
			 " ON g.id = e.group_id WHERE e.at_ms >= $1::bigint"
			 " AND e.at_ms < $2::bigint");
	if (f->user[0] != '\0')
		gp_buf_printf(q, " AND e.posting IN (SELECT posting FROM"
				 " gp_entries WHERE account = 'user' AND name ="
				 " $3::text AND at_ms >= $1 AND at_ms < $2)");
	if (f->provider[0] != '\0')
		gp_buf_printf(q, " AND e.posting IN (SELECT posting FROM"
				 " gp_entries WHERE account = 'provider' AND"
				 " name = $5::text AND at_ms >= $1 AND at_ms <"
				 " $2)");
	if (f->group_id != 0)
		gp_buf_printf(q, " AND e.posting IN (SELECT posting FROM"
				 " gp_entries WHERE group_id = $4::bigint AND"
				 " at_ms >= $1 AND at_ms < $2)");
	if (f->job_id != 0)
		gp_buf_printf(q, " AND e.posting IN (SELECT id FROM gp_postings"
				 " WHERE job_id = $6::bigint)");
	gp_buf_printf(q, " AND ($3::text IS NOT NULL OR $4::bigint IS NOT NULL"
			 " OR $5::text IS NOT NULL OR $6::bigint IS NOT NULL"
			 " OR $7::int IS NOT NULL)"
			 " GROUP BY e.account, e.name, e.group_id, g.name"
			 " ORDER BY e.account, e.name, g.name");
}

static void
postings_sql(const struct ledger_filter *f, struct gp_buf *q)
{
	gp_buf_printf(q, "SELECT p.id, p.job_id, p.attempt, p.seq, p.final,"
			 " p.at_ms, p.from_ms, p.to_ms, coalesce(n.name, '?'),"
			 " p.amount, p.gpu_ms, u.name, coalesce(gu.name, '?'),"
			 " v.name, coalesce(gv.name, '?'), p.part"
			 " FROM gp_postings p"
			 " JOIN gp_entries u ON u.posting = p.id AND"
			 " u.account = 'user'"
			 " JOIN gp_entries v ON v.posting = p.id AND"
			 " v.account = 'provider'"
			 " LEFT JOIN gp_groups gu ON gu.id = u.group_id"
			 " LEFT JOIN gp_groups gv ON gv.id = v.group_id"
			 " LEFT JOIN gp_nodes n ON n.id = p.node_id"
			 " WHERE ($1::bigint IS NOT NULL AND $2::bigint IS NOT"
			 " NULL AND $3::text IS NOT NULL AND $4::bigint IS NOT"
			 " NULL AND $5::text IS NOT NULL AND $6::bigint IS NOT"
			 " NULL)");
	if (f->since_ms > 0 || f->until_ms > 0)
		gp_buf_printf(q, " AND p.at_ms >= $1 AND p.at_ms < $2");
	if (f->user[0] != '\0')
		gp_buf_printf(q, " AND u.name = $3");
	if (f->provider[0] != '\0')
		gp_buf_printf(q, " AND v.name = $5");
	if (f->group_id != 0)
		gp_buf_printf(q, " AND (u.group_id = $4 OR v.group_id = $4)");
	if (f->job_id != 0)
		gp_buf_printf(q, " AND p.job_id = $6");
	gp_buf_printf(q, " ORDER BY p.id DESC LIMIT $7::int");
}

/* Runs a query built for f on the reading connection (unprepared). */
static int
read_query(struct pg_store *s, const struct gp_buf *q,
    const struct ledger_filter *f, PGresult **out, char *err, size_t errlen)
{
	struct params p;
	int rc, again;

	*out = NULL;
	if (q->data == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	filter_params(f, &p);
	for (again = 0;; again++) {
		PGresult *r = PQexecParams(s->r->conn, q->data, p.n, NULL,
		    p.v, NULL, NULL, 0);

		if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK) {
			*out = r;
			return 0;
		}
		rc = pg_result_error(s->r, r, "ledger query");
		PQclear(r);
		if (rc != GP_ECONN || again || pg_reconnect(s->r, 2000) != 0) {
			snprintf(err, errlen, "%s", s->r->error);
			return GP_EIO;
		}
		s->rgen++;
	}
}

int
pg_ledger_usage(struct gp_store *gs, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_usage_row *r), void *arg,
    char *err, size_t errlen)
{
	struct pg_store *s = pg_store_of(gs);
	struct store_usage_row u;
	struct gp_buf q = {0};
	PGresult *r;
	int i, rc;

	usage_sql(f, &q);
	pthread_mutex_lock(&s->rlock);
	rc = read_query(s, &q, f, &r, err, errlen);
	gp_buf_free(&q);
	for (i = 0; rc == 0 && i < PQntuples(r); i++) {
		u.account = PQgetvalue(r, i, 0);
		u.name = PQgetvalue(r, i, 1);
		u.group = PQgetvalue(r, i, 2);
		u.amount = col_int(r, i, 3);
		u.gpu_ms = col_int(r, i, 4);
		u.postings = col_int(r, i, 5);
		if ((rc = row(arg, &u)) != 0) {
			snprintf(err, errlen, "query failed");
			rc = rc < 0 ? rc : GP_EIO;
		}
	}
	PQclear(r);
	pthread_mutex_unlock(&s->rlock);
	return rc;
}

int
pg_ledger_postings(struct gp_store *gs, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_posting_row *r), void *arg,
    char *err, size_t errlen)
{
	struct pg_store *s = pg_store_of(gs);
	struct store_posting_row p;
	struct gp_buf q = {0};
	PGresult *r;
	int i, rc;

	postings_sql(f, &q);
	pthread_mutex_lock(&s->rlock);
	rc = read_query(s, &q, f, &r, err, errlen);
	gp_buf_free(&q);
	for (i = 0; rc == 0 && i < PQntuples(r); i++) {
		p.id = col_int(r, i, 0);
		p.job_id = col_int(r, i, 1);
		p.attempt = (int)col_int(r, i, 2);
		p.seq = (int)col_int(r, i, 3);
		p.final = (int)col_int(r, i, 4);
		p.at_ms = col_int(r, i, 5);
		p.from_ms = col_int(r, i, 6);
		p.to_ms = col_int(r, i, 7);
		p.node = PQgetvalue(r, i, 8);
		p.amount = col_int(r, i, 9);
		p.gpu_ms = col_int(r, i, 10);
		p.user = PQgetvalue(r, i, 11);
		p.user_group = PQgetvalue(r, i, 12);
		p.provider = PQgetvalue(r, i, 13);
		p.provider_group = PQgetvalue(r, i, 14);
		p.part = (int)col_int(r, i, 15);
		if ((rc = row(arg, &p)) != 0) {
			snprintf(err, errlen, "query failed");
			rc = rc < 0 ? rc : GP_EIO;
		}
	}
	PQclear(r);
	pthread_mutex_unlock(&s->rlock);
	return rc;
}
