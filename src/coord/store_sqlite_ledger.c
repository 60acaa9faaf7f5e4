/*
 * store_sqlite_ledger.c: the ledger's tables in the SQLite store (the
 * ledger_* members of struct gp_store_ops): groups, members, prices,
 * budgets, postings and their entries, decayed usage, the accounts'
 * running totals; and the read-side queries behind `gpupool usage` and
 * `gpupool ledger`, on the read-only connection. ledger.c keeps the
 * memory side and calls these through the table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "log.h"
#include "store_sqlite.h"
#include "util.h"

const char sqlite_ledger_schema[] =
    "CREATE TABLE IF NOT EXISTS groups(id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL UNIQUE, weight INTEGER NOT NULL,"
    " created_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS members(user TEXT NOT NULL,"
    " group_id INTEGER NOT NULL, pos INTEGER NOT NULL,"
    " PRIMARY KEY(user, group_id));"
    "CREATE TABLE IF NOT EXISTS prices(class TEXT PRIMARY KEY COLLATE"
    " NOCASE, micro INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS budgets(kind TEXT NOT NULL,"
    " name TEXT NOT NULL, amount INTEGER NOT NULL, period TEXT NOT NULL,"
    " PRIMARY KEY(kind, name));"
    /* One row per posting: an attempt's charge for a period. */
    "CREATE TABLE IF NOT EXISTS postings(id INTEGER PRIMARY KEY,"
    " job_id INTEGER NOT NULL, attempt INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, final INTEGER NOT NULL, at_ms INTEGER NOT NULL,"
    " from_ms INTEGER NOT NULL, to_ms INTEGER NOT NULL,"
    " node_id INTEGER NOT NULL, amount INTEGER NOT NULL,"
    " gpu_ms INTEGER NOT NULL, UNIQUE(job_id, attempt, seq));"
    /* Its entries: the user's debit and the provider's credit. */
    "CREATE TABLE IF NOT EXISTS entries(posting INTEGER NOT NULL,"
    " account TEXT NOT NULL, name TEXT NOT NULL,"
    " group_id INTEGER NOT NULL, amount INTEGER NOT NULL,"
    " gpu_ms INTEGER NOT NULL, at_ms INTEGER NOT NULL,"
    " PRIMARY KEY(posting, account));"
    "CREATE INDEX IF NOT EXISTS postings_at ON postings(at_ms);"
    "CREATE INDEX IF NOT EXISTS entries_account ON entries(account, name,"
    " at_ms);"
    "CREATE INDEX IF NOT EXISTS entries_group ON entries(group_id, at_ms);"
    "CREATE INDEX IF NOT EXISTS entries_at ON entries(at_ms);"
    "CREATE TABLE IF NOT EXISTS usage_decay(kind TEXT NOT NULL,"
    " name TEXT NOT NULL, gpu_s REAL NOT NULL, credits REAL NOT NULL,"
    " as_of_ms INTEGER NOT NULL, PRIMARY KEY(kind, name));";

/*
 * Added since the ledger's first schema, each detected by its presence:
 * postings.part (a gang's parts are billed one by one; 0 for the rest);
 * account_totals, the running totals per account and group (the sums of
 * its entries), filled from the entries when made (a database from
 * before them; inside the open's transaction).
 */
int
sqlite_ledger_migrate(struct sqlite_store *s)
{
	if (!gp_sqlite_has(&s->w, "postings", "part") &&
	    gp_sqlite_exec(&s->w,
	        "ALTER TABLE postings ADD COLUMN part"
	        " INTEGER NOT NULL DEFAULT 0;") != 0)
		return GP_EIO;
	if (!gp_sqlite_has(&s->w, "account_totals", NULL) &&
	    gp_sqlite_exec(&s->w,
	        "CREATE TABLE account_totals(account TEXT NOT NULL,"
	        " name TEXT NOT NULL, group_id INTEGER NOT NULL,"
	        " amount INTEGER NOT NULL, gpu_ms INTEGER NOT NULL,"
	        " postings INTEGER NOT NULL,"
	        " PRIMARY KEY(account, name, group_id));"
	        "INSERT INTO account_totals SELECT account, name, group_id,"
	        " SUM(amount), SUM(gpu_ms), COUNT(*) FROM entries"
	        " GROUP BY account, name, group_id;") != 0)
		return GP_EIO;
	return 0;
}

/* ---- writes ---- */

int
sqlite_ledger_put_group(struct gp_store *s, int64_t id, const char *name,
    int64_t weight, int64_t created_ms)
{
	return sqlite_store_run(s,
	    "INSERT OR REPLACE INTO groups VALUES(?,?,?,?)", "IsII", id, name,
	    weight, created_ms);
}

int
sqlite_ledger_put_member(struct gp_store *s, const char *user, int64_t group_id,
    int64_t pos)
{
	return sqlite_store_run(s,
	    "INSERT OR REPLACE INTO members VALUES(?,?,?)", "sII", user,
	    group_id, pos);
}

int
sqlite_ledger_delete_member(struct gp_store *s, const char *user,
    int64_t group_id)
{
	if (group_id == 0)
		return sqlite_store_run(s, "DELETE FROM members WHERE user = ?",
		    "s", user);
	return sqlite_store_run(s,
	    "DELETE FROM members WHERE user = ? AND group_id = ?", "sI", user,
	    group_id);
}

int
sqlite_ledger_put_price(struct gp_store *s, const char *cls, int64_t micro)
{
	return sqlite_store_run(s, "INSERT OR REPLACE INTO prices VALUES(?,?)",
	    "sI", cls, micro);
}

int
sqlite_ledger_delete_price(struct gp_store *s, const char *cls)
{
	if (cls == NULL)
		return sqlite_store_run(s, "DELETE FROM prices", NULL);
	return sqlite_store_run(s, "DELETE FROM prices WHERE class = ?", "s",
	    cls);
}

int
sqlite_ledger_put_budget(struct gp_store *s, const char *kind, const char *name,
    int64_t amount, const char *period)
{
	return sqlite_store_run(s,
	    "INSERT OR REPLACE INTO budgets VALUES(?,?,?,?)", "ssIs", kind,
	    name, amount, period);
}

int
sqlite_ledger_delete_budget(struct gp_store *s, const char *kind,
    const char *name)
{
	return sqlite_store_run(s,
	    "DELETE FROM budgets WHERE kind = ? AND name = ?", "ss", kind,
	    name);
}

int
sqlite_ledger_put_decay(struct gp_store *s, const char *kind, const char *name,
    const struct acct_decay *d)
{
	return sqlite_store_run(s,
	    "INSERT OR REPLACE INTO usage_decay VALUES(?,?,?,?,?)", "ssddI",
	    kind, name, d->gpu_s, d->credits, d->as_of_ms);
}

/* Adds an entry to its account's row of account_totals. */
static int
put_total(struct gp_store *s, const char *account, const char *name,
    int64_t group_id, int64_t amount, int64_t gpu_ms)
{
	return sqlite_store_run(s,
	    "INSERT INTO account_totals VALUES(?,?,?,?,?,1)"
	    " ON CONFLICT(account, name, group_id) DO UPDATE SET"
	    " amount = amount + excluded.amount,"
	    " gpu_ms = gpu_ms + excluded.gpu_ms,"
	    " postings = postings + 1",
	    "ssIII", account, name, group_id, amount, gpu_ms);
}

static int
insert_entry(struct gp_store *s, int64_t posting, const char *account,
    const char *name, int64_t group_id, int64_t amount, int64_t gpu_ms,
    int64_t at_ms)
{
	return sqlite_store_run(s, "INSERT INTO entries VALUES(?,?,?,?,?,?,?)",
	    "IssIIII", posting, account, name, group_id, amount, gpu_ms, at_ms);
}

int
sqlite_ledger_post(struct gp_store *gs, const struct acct_posting *p)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	int64_t id;
	int rc;

	rc = sqlite_store_run(gs,
	    "INSERT INTO postings(job_id, attempt, seq, final, at_ms,"
	    " from_ms, to_ms, node_id, amount, gpu_ms, part)"
	    " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
	    "IiiiIIIIIIi", p->job_id, p->attempt, p->seq, p->final, p->at_ms,
	    p->from_ms, p->to_ms, p->node_id, p->amount, p->gpu_ms, p->part);
	if (rc != 0)
		return rc;
	id = sqlite3_last_insert_rowid(s->w.db);
	if ((rc = insert_entry(gs, id, "user", p->user, p->user_group,
	         -p->amount, p->gpu_ms, p->at_ms)) != 0 ||
	    (rc = insert_entry(gs, id, "provider", p->provider,
	         p->provider_group, p->amount, p->gpu_ms, p->at_ms)) != 0 ||
	    (rc = put_total(gs, "user", p->user, p->user_group, -p->amount,
	         p->gpu_ms)) != 0 ||
	    (rc = put_total(gs, "provider", p->provider, p->provider_group,
	         p->amount, p->gpu_ms)) != 0)
		return rc;
	return 0;
}

/* ---- the state thread's reads ---- */

/* Each row of one table, handed to its loader callback. */
static int
row_group(sqlite3_stmt *st, const struct store_ledger_loader *l)
{
	return l->group(l->arg, sqlite3_column_int64(st, 0),
	    gp_sqlite_text(st, 1), sqlite3_column_int64(st, 2),
	    sqlite3_column_int64(st, 3));
}

static int
row_member(sqlite3_stmt *st, const struct store_ledger_loader *l)
{
	return l->member(l->arg, gp_sqlite_text(st, 0),
	    sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
}

static int
row_price(sqlite3_stmt *st, const struct store_ledger_loader *l)
{
	return l->price(l->arg, gp_sqlite_text(st, 0),
	    sqlite3_column_int64(st, 1));
}

static int
row_budget(sqlite3_stmt *st, const struct store_ledger_loader *l)
{
	return l->budget(l->arg, gp_sqlite_text(st, 0), gp_sqlite_text(st, 1),
	    sqlite3_column_int64(st, 2), gp_sqlite_text(st, 3));
}

static int
row_decay(sqlite3_stmt *st, const struct store_ledger_loader *l)
{
	struct acct_decay d;

	d.gpu_s = sqlite3_column_double(st, 2);
	d.credits = sqlite3_column_double(st, 3);
	d.as_of_ms = sqlite3_column_int64(st, 4);
	return l->decay(l->arg, gp_sqlite_text(st, 0), gp_sqlite_text(st, 1),
	    &d);
}

static int
row_total(sqlite3_stmt *st, const struct store_ledger_loader *l)
{
	return l->total(l->arg, gp_sqlite_text(st, 0), gp_sqlite_text(st, 1),
	    sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
	    sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5));
}

static const struct {
	const char *sql;
	int (*row)(sqlite3_stmt *st, const struct store_ledger_loader *l);
} ledger_tables[] = {
    {"SELECT id, name, weight, created_ms FROM groups ORDER BY id", row_group},
    {"SELECT user, group_id, pos FROM members ORDER BY pos", row_member},
    {"SELECT class, micro FROM prices", row_price},
    {"SELECT kind, name, amount, period FROM budgets", row_budget},
    {"SELECT kind, name, gpu_s, credits, as_of_ms FROM usage_decay", row_decay},
    /* The running totals: a row per account, never the whole ledger. */
    {"SELECT account, name, group_id, amount, gpu_ms, postings"
     " FROM account_totals",
        row_total},
};

int
sqlite_ledger_load(struct gp_store *gs, const struct store_ledger_loader *l)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	sqlite3_stmt *st;
	size_t i;
	int rc = 0;

	for (i = 0;
	     rc == 0 && i < sizeof(ledger_tables) / sizeof(ledger_tables[0]);
	     i++) {
		if ((st = gp_sqlite_prepare(&s->w, ledger_tables[i].sql)) ==
		    NULL)
			return sqlite_store_fail(s, &s->w, GP_EIO);
		while ((rc = gp_sqlite_step(&s->w, st)) == 1)
			if ((rc = ledger_tables[i].row(st, l)) != 0)
				break;
		sqlite3_finalize(st);
	}
	if (rc != 0)
		return gp_store_fail(gs, rc, "%s",
		    gp_sqlite_errmsg(&s->w)[0] ? gp_sqlite_errmsg(&s->w)
		                               : gp_strerror(rc));
	return 0;
}

int
sqlite_ledger_spent(struct gp_store *gs, const char *kind, const char *name,
    int64_t group_id, int64_t since_ms, int64_t *spent)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	int64_t sum = 0;
	int rc;

	if (strcmp(kind, "user") == 0)
		rc = gp_sqlite_query_int(&s->w,
		    "SELECT COALESCE(SUM(amount), 0) FROM entries WHERE"
		    " account = 'user' AND name = ? AND at_ms >= ?",
		    &sum, "sI", name, since_ms);
	else
		rc = gp_sqlite_query_int(&s->w,
		    "SELECT COALESCE(SUM(amount), 0) FROM entries WHERE"
		    " account = 'user' AND group_id = ? AND at_ms >= ?",
		    &sum, "II", group_id, since_ms);
	if (rc < 0)
		return sqlite_store_fail(s, &s->w, rc);
	*spent = -sum;
	return 0;
}

int
sqlite_ledger_attempt(struct gp_store *gs, int64_t job_id, int attempt,
    int part, struct store_attempt_sum *out)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	sqlite3_stmt *st = gp_sqlite_stmt(&s->w,
	    "SELECT COUNT(*), COALESCE(MAX(seq), -1),"
	    " COALESCE(SUM(amount), 0), COALESCE(SUM(gpu_ms), 0),"
	    " COALESCE(MAX(to_ms), 0) FROM postings"
	    " WHERE job_id = ?1 AND attempt = ?2 AND (?3 < 0 OR part = ?3)");
	int rc;

	if (st == NULL)
		return sqlite_store_fail(s, &s->w, GP_EIO);
	if ((rc = gp_sqlite_bind(&s->w, st, "Iii", job_id, attempt, part)) ==
	        0 &&
	    (rc = gp_sqlite_step(&s->w, st)) == 1) {
		out->count = sqlite3_column_int64(st, 0);
		out->max_seq = sqlite3_column_int64(st, 1);
		out->amount = sqlite3_column_int64(st, 2);
		out->gpu_ms = sqlite3_column_int64(st, 3);
		out->max_to_ms = sqlite3_column_int64(st, 4);
	}
	gp_sqlite_done(st);
	if (rc != 1)
		return sqlite_store_fail(s, &s->w, rc < 0 ? rc : GP_EIO);
	return 0;
}

/* ---- queries ---- */

/*
 * The conditions of a filter, on an entries row `e` (usage) or a postings
 * row `p` with its entries `u` (user) and `v` (provider) (the ledger),
 * written only for the filters given so that the indexes serve them.
 * Parameters are named; bind_filter binds those the statement has.
 */
static void
usage_where(const struct ledger_filter *f, struct gp_buf *q)
{
	/*
	 * Everything: one scan of the table (an index would cost a lookup
	 * per row). A time range: its index.
	 */
	if (f->since_ms <= 0 && f->until_ms <= 0 && f->user[0] == '\0' &&
	    f->provider[0] == '\0' && f->group_id == 0 && f->job_id == 0) {
		gp_buf_printf(q,
		    " NOT INDEXED LEFT JOIN groups g ON"
		    " g.id = e.group_id");
		return;
	}
	gp_buf_printf(q,
	    " LEFT JOIN groups g ON g.id = e.group_id"
	    " WHERE e.at_ms >= :since AND e.at_ms < :until");
	if (f->user[0] != '\0')
		gp_buf_printf(q,
		    " AND e.posting IN (SELECT posting FROM entries"
		    " WHERE account = 'user' AND name = :user"
		    " AND at_ms >= :since AND at_ms < :until)");
	if (f->provider[0] != '\0')
		gp_buf_printf(q,
		    " AND e.posting IN (SELECT posting FROM entries"
		    " WHERE account = 'provider' AND name ="
		    " :provider AND at_ms >= :since AND at_ms <"
		    " :until)");
	if (f->group_id != 0)
		gp_buf_printf(q,
		    " AND e.posting IN (SELECT posting FROM entries"
		    " WHERE group_id = :group AND at_ms >= :since"
		    " AND at_ms < :until)");
	if (f->job_id != 0)
		gp_buf_printf(q,
		    " AND e.posting IN (SELECT id FROM postings"
		    " WHERE job_id = :job)");
}

static void
postings_where(const struct ledger_filter *f, struct gp_buf *q)
{
	/* No range: the newest by id, without the time index. */
	gp_buf_printf(q, " WHERE 1");
	if (f->since_ms > 0 || f->until_ms > 0)
		gp_buf_printf(q, " AND p.at_ms >= :since AND p.at_ms < :until");
	if (f->user[0] != '\0')
		gp_buf_printf(q, " AND u.name = :user");
	if (f->provider[0] != '\0')
		gp_buf_printf(q, " AND v.name = :provider");
	if (f->group_id != 0)
		gp_buf_printf(q,
		    " AND (u.group_id = :group OR"
		    " v.group_id = :group)");
	if (f->job_id != 0)
		gp_buf_printf(q, " AND p.job_id = :job");
}

static void
bind_named_int(sqlite3_stmt *s, const char *name, int64_t v)
{
	int i = sqlite3_bind_parameter_index(s, name);

	if (i > 0)
		sqlite3_bind_int64(s, i, v);
}

static void
bind_named_text(sqlite3_stmt *s, const char *name, const char *v)
{
	int i = sqlite3_bind_parameter_index(s, name);

	if (i > 0)
		sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

static void
bind_filter(sqlite3_stmt *s, const struct ledger_filter *f)
{
	bind_named_int(s, ":since", f->since_ms);
	bind_named_int(s, ":until", f->until_ms > 0 ? f->until_ms : INT64_MAX);
	bind_named_text(s, ":user", f->user);
	bind_named_int(s, ":group", f->group_id);
	bind_named_text(s, ":provider", f->provider);
	bind_named_int(s, ":job", f->job_id);
	bind_named_int(s, ":limit", f->limit > 0 ? f->limit : 100);
}

/* Prepares q on the reader (rlock held). NULL with err on failure. */
static sqlite3_stmt *
prepare_read(struct sqlite_store *s, struct gp_buf *q, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (q->data == NULL || (st = gp_sqlite_prepare(&s->r, q->data)) == NULL)
		snprintf(err, errlen, "%s",
		    q->data == NULL ? "out of memory"
		                    : gp_sqlite_errmsg(&s->r));
	return st;
}

int
sqlite_ledger_usage(struct gp_store *gs, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_usage_row *r), void *arg,
    char *err, size_t errlen)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	struct store_usage_row r;
	struct gp_buf q = {0};
	sqlite3_stmt *st;
	int rc;

	gp_buf_printf(&q,
	    "SELECT e.account, e.name, COALESCE(g.name, '?'),"
	    " SUM(e.amount), SUM(e.gpu_ms), COUNT(*)"
	    " FROM entries e");
	usage_where(f, &q);
	gp_buf_printf(&q,
	    " GROUP BY e.account, e.name, e.group_id"
	    " ORDER BY e.account, e.name, g.name");
	pthread_mutex_lock(&s->rlock);
	st = prepare_read(s, &q, err, errlen);
	gp_buf_free(&q);
	if (st == NULL) {
		pthread_mutex_unlock(&s->rlock);
		return GP_EIO;
	}
	bind_filter(st, f);
	while ((rc = gp_sqlite_step(&s->r, st)) == 1) {
		r.account = gp_sqlite_text(st, 0);
		r.name = gp_sqlite_text(st, 1);
		r.group = gp_sqlite_text(st, 2);
		r.amount = sqlite3_column_int64(st, 3);
		r.gpu_ms = sqlite3_column_int64(st, 4);
		r.postings = sqlite3_column_int64(st, 5);
		if ((rc = row(arg, &r)) != 0)
			break;
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->rlock);
	if (rc != 0) {
		snprintf(err, errlen, "query failed");
		return rc < 0 ? rc : GP_EIO;
	}
	return 0;
}

int
sqlite_ledger_postings(struct gp_store *gs, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_posting_row *r), void *arg,
    char *err, size_t errlen)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	struct store_posting_row r;
	struct gp_buf q = {0};
	sqlite3_stmt *st;
	int rc;

	gp_buf_printf(&q,
	    "SELECT p.id, p.job_id, p.attempt, p.seq, p.final,"
	    " p.at_ms, p.from_ms, p.to_ms, COALESCE(n.name, '?'),"
	    " p.amount, p.gpu_ms, u.name, COALESCE(gu.name, '?'),"
	    " v.name, COALESCE(gv.name, '?'), p.part"
	    " FROM postings p"
	    /* CROSS: newest postings first, by id, then */
	    /* their entries; LIMIT stops the scan early */
	    " CROSS JOIN entries u ON u.posting = p.id AND"
	    " u.account = 'user'"
	    " CROSS JOIN entries v ON v.posting = p.id AND"
	    " v.account = 'provider'"
	    " LEFT JOIN groups gu ON gu.id = u.group_id"
	    " LEFT JOIN groups gv ON gv.id = v.group_id"
	    " LEFT JOIN nodes n ON n.id = p.node_id");
	postings_where(f, &q);
	gp_buf_printf(&q, " ORDER BY p.id DESC LIMIT :limit");
	pthread_mutex_lock(&s->rlock);
	st = prepare_read(s, &q, err, errlen);
	gp_buf_free(&q);
	if (st == NULL) {
		pthread_mutex_unlock(&s->rlock);
		return GP_EIO;
	}
	bind_filter(st, f);
	while ((rc = gp_sqlite_step(&s->r, st)) == 1) {
		r.id = sqlite3_column_int64(st, 0);
		r.job_id = sqlite3_column_int64(st, 1);
		r.attempt = sqlite3_column_int(st, 2);
		r.seq = sqlite3_column_int(st, 3);
		r.final = sqlite3_column_int(st, 4);
		r.at_ms = sqlite3_column_int64(st, 5);
		r.from_ms = sqlite3_column_int64(st, 6);
		r.to_ms = sqlite3_column_int64(st, 7);
		r.node = gp_sqlite_text(st, 8);
		r.amount = sqlite3_column_int64(st, 9);
		r.gpu_ms = sqlite3_column_int64(st, 10);
		r.user = gp_sqlite_text(st, 11);
		r.user_group = gp_sqlite_text(st, 12);
		r.provider = gp_sqlite_text(st, 13);
		r.provider_group = gp_sqlite_text(st, 14);
		r.part = sqlite3_column_int(st, 15);
		if ((rc = row(arg, &r)) != 0)
			break;
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->rlock);
	if (rc != 0) {
		snprintf(err, errlen, "query failed");
		return rc < 0 ? rc : GP_EIO;
	}
	return 0;
}
