/*
 * ledger.c: the coordinator's books (see ledger.h and docs/accounting.md):
 * the accounting tables in state.db, their in-memory copies, postings
 * (two entries each, summing to zero), budgets' spending per period and
 * decayed usage maintained as postings are made, and the read-side
 * queries behind `gpupool usage` and `gpupool ledger`.
 */
#include "ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "log.h"
#include "util.h"

struct ledger ledger;

static const char schema[] =
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
 * The running totals per account and group (the sums of its entries),
 * made and filled from the entries in one transaction when missing (a
 * database from before them); from then on kept by every posting.
 */
static const char totals_schema[] =
    "BEGIN IMMEDIATE;"
    "CREATE TABLE account_totals(account TEXT NOT NULL, name TEXT NOT NULL,"
    " group_id INTEGER NOT NULL, amount INTEGER NOT NULL,"
    " gpu_ms INTEGER NOT NULL, postings INTEGER NOT NULL,"
    " PRIMARY KEY(account, name, group_id));"
    "INSERT INTO account_totals SELECT account, name, group_id, SUM(amount),"
    " SUM(gpu_ms), COUNT(*) FROM entries GROUP BY account, name, group_id;"
    "COMMIT;";

static const char *const stmt_sql[LS_COUNT] = {
    [LS_INS_POSTING] = "INSERT INTO postings(job_id, attempt, seq, final,"
		       " at_ms, from_ms, to_ms, node_id, amount, gpu_ms, part)"
		       " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [LS_INS_ENTRY] = "INSERT INTO entries VALUES(?,?,?,?,?,?,?)",
    [LS_PUT_DECAY] = "INSERT OR REPLACE INTO usage_decay VALUES(?,?,?,?,?)",
    [LS_PUT_GROUP] = "INSERT OR REPLACE INTO groups VALUES(?,?,?,?)",
    [LS_PUT_MEMBER] = "INSERT OR REPLACE INTO members VALUES(?,?,?)",
    [LS_DEL_MEMBER] = "DELETE FROM members WHERE user = ? AND group_id = ?",
    [LS_DEL_MEMBERS] = "DELETE FROM members WHERE user = ?",
    [LS_PUT_PRICE] = "INSERT OR REPLACE INTO prices VALUES(?,?)",
    [LS_DEL_PRICE] = "DELETE FROM prices WHERE class = ?",
    [LS_DEL_PRICES] = "DELETE FROM prices",
    [LS_PUT_BUDGET] = "INSERT OR REPLACE INTO budgets VALUES(?,?,?,?)",
    [LS_DEL_BUDGET] = "DELETE FROM budgets WHERE kind = ? AND name = ?",
    [LS_SPENT_USER] = "SELECT COALESCE(SUM(amount), 0) FROM entries WHERE"
		      " account = 'user' AND name = ? AND at_ms >= ?",
    [LS_SPENT_GROUP] = "SELECT COALESCE(SUM(amount), 0) FROM entries WHERE"
		       " account = 'user' AND group_id = ? AND at_ms >= ?",
    [LS_RESTORE] = "SELECT COUNT(*), COALESCE(MAX(seq), -1),"
		   " COALESCE(SUM(amount), 0), COALESCE(SUM(gpu_ms), 0),"
		   " COALESCE(MAX(to_ms), 0) FROM postings"
		   " WHERE job_id = ?1 AND attempt = ?2"
		   " AND (?3 < 0 OR part = ?3)",
    [LS_NEXT_SEQ] = "SELECT COALESCE(MAX(seq), -1) + 1 FROM postings"
		    " WHERE job_id = ? AND attempt = ?",
    [LS_PUT_TOTAL] = "INSERT INTO account_totals VALUES(?,?,?,?,?,1)"
		     " ON CONFLICT(account, name, group_id) DO UPDATE SET"
		     " amount = amount + excluded.amount,"
		     " gpu_ms = gpu_ms + excluded.gpu_ms,"
		     " postings = postings + 1",
};

static const char *
kind_name(enum ledger_kind k)
{
	return k == LEDGER_USER ? "user" : "group";
}

static int
exec_sql(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		gp_error("sqlite failed sql=\"%.40s\" error=\"%s\"", sql,
		    err != NULL ? err : "?");
		sqlite3_free(err);
		return GP_EIO;
	}
	return 0;
}

/* Steps a write statement and resets it. */
static int
step_done(struct ledger *l, sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_DONE) {
		gp_error("ledger write failed error=\"%s\"",
		    sqlite3_errmsg(l->db));
		return GP_EIO;
	}
	return 0;
}

static const char *
col_text(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	return t != NULL ? (const char *)t : "";
}

/* Grows *arr to hold one more of size elem. */
static int
reserve(void **arr, size_t *cap, size_t n, size_t elem)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	p = realloc(*arr, ncap * elem);
	if (p == NULL)
		return GP_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* ---- groups ---- */

const struct ledger_group *
ledger_group_by_id(const struct ledger *l, int64_t id)
{
	size_t lo = 0, hi = l->ngroups;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (l->groups[mid].id == id)
			return &l->groups[mid];
		if (l->groups[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct ledger_group *
ledger_group_by_name(const struct ledger *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->ngroups; i++)
		if (strcmp(l->groups[i].name, name) == 0)
			return &l->groups[i];
	return NULL;
}

const char *
ledger_group_name(const struct ledger *l, int64_t id)
{
	const struct ledger_group *g = ledger_group_by_id(l, id);

	return g != NULL ? g->name : "?";
}

static int
put_group(struct ledger *l, const struct ledger_group *g)
{
	sqlite3_stmt *s = l->stmt[LS_PUT_GROUP];

	sqlite3_bind_int64(s, 1, g->id);
	sqlite3_bind_text(s, 2, g->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, g->weight);
	sqlite3_bind_int64(s, 4, g->created_ms);
	return step_done(l, s);
}

/* Appends a loaded or new group (ids only grow). */
static int
group_append(struct ledger *l, const struct ledger_group *g)
{
	size_t i;

	if (reserve((void **)&l->groups, &l->capgroups, l->ngroups,
		sizeof(*l->groups)) != 0)
		return GP_ENOMEM;
	/* Keep id order even if rows come back in another. */
	i = l->ngroups;
	while (i > 0 && l->groups[i - 1].id > g->id) {
		l->groups[i] = l->groups[i - 1];
		i--;
	}
	l->groups[i] = *g;
	l->ngroups++;
	return 0;
}

int
ledger_group_create(struct ledger *l, const char *name, int64_t weight,
    int64_t now_ms, int64_t *id)
{
	struct ledger_group g;

	if (ledger_group_by_name(l, name) != NULL)
		return GP_ECONFLICT;
	memset(&g, 0, sizeof(g));
	g.id = l->ngroups > 0 ? l->groups[l->ngroups - 1].id + 1 : 1;
	gp_strlcpy(g.name, name, sizeof(g.name));
	g.weight = weight;
	g.created_ms = now_ms;
	if (put_group(l, &g) != 0)
		return GP_EIO;
	if (group_append(l, &g) != 0)
		return GP_ENOMEM;
	*id = g.id;
	return 0;
}

int
ledger_group_set_weight(struct ledger *l, int64_t id, int64_t weight)
{
	struct ledger_group *g =
	    (struct ledger_group *)ledger_group_by_id(l, id);

	if (g == NULL)
		return GP_ENOENT;
	g->weight = weight;
	return put_group(l, g);
}

/* ---- members ---- */

int
ledger_is_member(const struct ledger *l, const char *user, int64_t group_id)
{
	size_t i;
	int any = 0;

	for (i = 0; i < l->nmembers; i++) {
		if (strcmp(l->members[i].user, user) != 0)
			continue;
		if (l->members[i].group_id == group_id)
			return 1;
		any = 1;
	}
	/* Nobody's explicit member: in "default". */
	if (!any) {
		const struct ledger_group *d =
		    ledger_group_by_name(l, ACCT_DEFAULT_GROUP);
		return d != NULL && d->id == group_id;
	}
	return 0;
}

size_t
ledger_user_groups(const struct ledger *l, const char *user, int64_t *out,
    size_t max)
{
	int64_t last_pos = -1;
	size_t i, n = 0;

	/* In joining order: each round takes the next position. */
	while (n < max) {
		const struct ledger_member *next = NULL;
		for (i = 0; i < l->nmembers; i++) {
			const struct ledger_member *m = &l->members[i];
			if (strcmp(m->user, user) == 0 && m->pos > last_pos &&
			    (next == NULL || m->pos < next->pos))
				next = m;
		}
		if (next == NULL)
			break;
		out[n++] = next->group_id;
		last_pos = next->pos;
	}
	if (n == 0 && max > 0) {
		const struct ledger_group *d =
		    ledger_group_by_name(l, ACCT_DEFAULT_GROUP);
		if (d != NULL)
			out[n++] = d->id;
	}
	return n;
}

size_t
ledger_group_members(const struct ledger *l, int64_t group_id)
{
	size_t i, n = 0;

	for (i = 0; i < l->nmembers; i++)
		n += l->members[i].group_id == group_id;
	return n;
}

int
ledger_member_add(struct ledger *l, const char *user, int64_t group_id)
{
	struct ledger_member *m;
	sqlite3_stmt *s = l->stmt[LS_PUT_MEMBER];
	size_t i;

	if (ledger_group_by_id(l, group_id) == NULL)
		return GP_ENOENT;
	for (i = 0; i < l->nmembers; i++)
		if (strcmp(l->members[i].user, user) == 0 &&
		    l->members[i].group_id == group_id)
			return 0;
	if (reserve((void **)&l->members, &l->capmembers, l->nmembers,
		sizeof(*l->members)) != 0)
		return GP_ENOMEM;
	m = &l->members[l->nmembers];
	memset(m, 0, sizeof(*m));
	gp_strlcpy(m->user, user, sizeof(m->user));
	m->group_id = group_id;
	m->pos = l->next_member_pos++;
	sqlite3_bind_text(s, 1, m->user, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, m->group_id);
	sqlite3_bind_int64(s, 3, m->pos);
	if (step_done(l, s) != 0)
		return GP_EIO;
	l->nmembers++;
	return 0;
}

int
ledger_member_remove(struct ledger *l, const char *user, int64_t group_id)
{
	sqlite3_stmt *s = l->stmt[LS_DEL_MEMBER];
	size_t i;

	for (i = 0; i < l->nmembers; i++) {
		if (strcmp(l->members[i].user, user) != 0 ||
		    l->members[i].group_id != group_id)
			continue;
		sqlite3_bind_text(s, 1, user, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(s, 2, group_id);
		if (step_done(l, s) != 0)
			return GP_EIO;
		l->members[i] = l->members[--l->nmembers];
		return 0;
	}
	return GP_ENOENT;
}

int
ledger_member_move(struct ledger *l, const char *user, int64_t group_id)
{
	sqlite3_stmt *s = l->stmt[LS_DEL_MEMBERS];
	size_t i;

	if (ledger_group_by_id(l, group_id) == NULL)
		return GP_ENOENT;
	sqlite3_bind_text(s, 1, user, -1, SQLITE_TRANSIENT);
	if (step_done(l, s) != 0)
		return GP_EIO;
	for (i = 0; i < l->nmembers;) {
		if (strcmp(l->members[i].user, user) == 0)
			l->members[i] = l->members[--l->nmembers];
		else
			i++;
	}
	return ledger_member_add(l, user, group_id);
}

/* ---- prices ---- */

int64_t
ledger_price_of(const struct ledger *l, const char *model)
{
	return acct_price_of(l->prices, l->nprices, model);
}

int
ledger_price_set(struct ledger *l, const char *cls, int64_t micro)
{
	sqlite3_stmt *s = l->stmt[LS_PUT_PRICE];
	size_t i;

	for (i = 0; i < l->nprices; i++)
		if (strcasecmp(l->prices[i].cls, cls) == 0)
			break;
	if (i == l->nprices && l->nprices == ACCT_PRICES_MAX)
		return GP_ETOOBIG;
	/* The class keeps the spelling it was first given. */
	if (i < l->nprices) {
		sqlite3_stmt *d = l->stmt[LS_DEL_PRICE];
		sqlite3_bind_text(d, 1, l->prices[i].cls, -1, SQLITE_STATIC);
		if (step_done(l, d) != 0)
			return GP_EIO;
	}
	sqlite3_bind_text(s, 1, cls, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, micro);
	if (step_done(l, s) != 0)
		return GP_EIO;
	gp_strlcpy(l->prices[i].cls, cls, sizeof(l->prices[i].cls));
	l->prices[i].micro = micro;
	if (i == l->nprices)
		l->nprices++;
	l->prices_gen++;
	return 0;
}

int
ledger_price_remove(struct ledger *l, const char *cls)
{
	sqlite3_stmt *s = l->stmt[LS_DEL_PRICE];
	size_t i;

	for (i = 0; i < l->nprices; i++) {
		if (strcasecmp(l->prices[i].cls, cls) != 0)
			continue;
		sqlite3_bind_text(s, 1, l->prices[i].cls, -1, SQLITE_STATIC);
		if (step_done(l, s) != 0)
			return GP_EIO;
		memmove(&l->prices[i], &l->prices[i + 1],
		    (l->nprices - i - 1) * sizeof(l->prices[0]));
		l->nprices--;
		l->prices_gen++;
		return 0;
	}
	return GP_ENOENT;
}

int
ledger_prices_replace(struct ledger *l, const struct acct_price *table,
    size_t n)
{
	size_t i;

	if (n > ACCT_PRICES_MAX)
		return GP_ETOOBIG;
	if (step_done(l, l->stmt[LS_DEL_PRICES]) != 0)
		return GP_EIO;
	l->nprices = 0;
	l->prices_gen++;
	for (i = 0; i < n; i++)
		if (ledger_price_set(l, table[i].cls, table[i].micro) != 0)
			return GP_EIO;
	return 0;
}

/* ---- budgets ---- */

struct ledger_budget *
ledger_budget_find(struct ledger *l, enum ledger_kind kind, const char *name)
{
	size_t i;

	for (i = 0; i < l->nbudgets; i++)
		if (l->budgets[i].kind == kind &&
		    strcmp(l->budgets[i].name, name) == 0)
			return &l->budgets[i];
	return NULL;
}

/* What b's owner spent (debits, positive) since its period began. */
static int
budget_spent(struct ledger *l, struct ledger_budget *b)
{
	sqlite3_stmt *s = l->stmt[b->kind == LEDGER_USER ? LS_SPENT_USER
							  : LS_SPENT_GROUP];
	int rc;

	if (b->kind == LEDGER_USER)
		sqlite3_bind_text(s, 1, b->name, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(s, 1, b->group_id);
	sqlite3_bind_int64(s, 2, b->period_start);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		b->spent = -sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_ROW) {
		gp_error("ledger query failed error=\"%s\"",
		    sqlite3_errmsg(l->db));
		return GP_EIO;
	}
	return 0;
}

/* Adds a budget in memory (no write). */
static int
budget_insert(struct ledger *l, enum ledger_kind kind, const char *name,
    int64_t group_id, int64_t amount, enum acct_period period,
    int64_t now_ms)
{
	struct ledger_budget *b = ledger_budget_find(l, kind, name);

	if (b == NULL) {
		if (reserve((void **)&l->budgets, &l->capbudgets, l->nbudgets,
			sizeof(*l->budgets)) != 0)
			return GP_ENOMEM;
		b = &l->budgets[l->nbudgets++];
		memset(b, 0, sizeof(*b));
		b->kind = kind;
		gp_strlcpy(b->name, name, sizeof(b->name));
	}
	b->group_id = group_id;
	b->amount = amount;
	b->period = period;
	b->period_start = acct_period_start(period, now_ms);
	return budget_spent(l, b);
}

int
ledger_budget_set(struct ledger *l, enum ledger_kind kind, const char *name,
    int64_t group_id, int64_t amount, enum acct_period period,
    int64_t now_ms)
{
	sqlite3_stmt *s = l->stmt[LS_PUT_BUDGET];

	sqlite3_bind_text(s, 1, kind_name(kind), -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 3, amount);
	sqlite3_bind_text(s, 4, acct_period_name(period), -1, SQLITE_STATIC);
	if (step_done(l, s) != 0)
		return GP_EIO;
	return budget_insert(l, kind, name, group_id, amount, period, now_ms);
}

int
ledger_budget_remove(struct ledger *l, enum ledger_kind kind,
    const char *name)
{
	struct ledger_budget *b = ledger_budget_find(l, kind, name);
	sqlite3_stmt *s = l->stmt[LS_DEL_BUDGET];

	if (b == NULL)
		return GP_ENOENT;
	sqlite3_bind_text(s, 1, kind_name(kind), -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_TRANSIENT);
	if (step_done(l, s) != 0)
		return GP_EIO;
	*b = l->budgets[--l->nbudgets];
	return 0;
}

int
ledger_tick(struct ledger *l, int64_t now_ms)
{
	size_t i;
	int rolled = 0;

	for (i = 0; i < l->nbudgets; i++) {
		struct ledger_budget *b = &l->budgets[i];
		int64_t start = acct_period_start(b->period, now_ms);
		if (start == b->period_start)
			continue;
		b->period_start = start;
		/* From the ledger: postings made just at the boundary count. */
		if (budget_spent(l, b) != 0)
			b->spent = 0;
		rolled = 1;
		gp_info("budget period started kind=%s name=%s period=%s",
		    kind_name(b->kind), b->name, acct_period_name(b->period));
	}
	return rolled;
}

/* ---- decayed usage ---- */

static struct ledger_user *
user_find(const struct ledger *l, const char *name, size_t *pos)
{
	size_t lo = 0, hi = l->nusers;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(l->users[mid].name, name);
		if (c == 0)
			return &l->users[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos != NULL)
		*pos = lo;
	return NULL;
}

static struct ledger_user *
user_get(struct ledger *l, const char *name)
{
	struct ledger_user *u;
	size_t pos = 0;

	if ((u = user_find(l, name, &pos)) != NULL)
		return u;
	if (reserve((void **)&l->users, &l->capusers, l->nusers,
		sizeof(*l->users)) != 0)
		return NULL;
	memmove(&l->users[pos + 1], &l->users[pos],
	    (l->nusers - pos) * sizeof(*l->users));
	l->nusers++;
	u = &l->users[pos];
	memset(u, 0, sizeof(*u));
	gp_strlcpy(u->name, name, sizeof(u->name));
	return u;
}

void
ledger_user_usage(const struct ledger *l, const char *user, int64_t now_ms,
    struct acct_decay *out)
{
	const struct ledger_user *u = user_find(l, user, NULL);

	memset(out, 0, sizeof(*out));
	if (u != NULL)
		acct_decay_at(&u->usage, now_ms, l->half_life_ms, out);
}

void
ledger_group_usage(const struct ledger *l, int64_t group_id, int64_t now_ms,
    struct acct_decay *out)
{
	const struct ledger_group *g = ledger_group_by_id(l, group_id);

	memset(out, 0, sizeof(*out));
	if (g != NULL)
		acct_decay_at(&g->usage, now_ms, l->half_life_ms, out);
}

static int
put_decay(struct ledger *l, const char *kind, const char *name,
    const struct acct_decay *d)
{
	sqlite3_stmt *s = l->stmt[LS_PUT_DECAY];

	sqlite3_bind_text(s, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 3, d->gpu_s);
	sqlite3_bind_double(s, 4, d->credits);
	sqlite3_bind_int64(s, 5, d->as_of_ms);
	return step_done(l, s);
}

/* ---- running totals (for /metrics) ---- */

/* Adds an entry to its account's row of account_totals. */
static int
put_total(struct ledger *l, const char *account, const char *name,
    int64_t group_id, int64_t amount, int64_t gpu_ms)
{
	sqlite3_stmt *s = l->stmt[LS_PUT_TOTAL];

	sqlite3_bind_text(s, 1, account, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, group_id);
	sqlite3_bind_int64(s, 4, amount);
	sqlite3_bind_int64(s, 5, gpu_ms);
	return step_done(l, s);
}

/* The total of (name, group_id), or where it would go (*pos). */
static struct ledger_total *
total_find(const struct ledger_totals *t, const char *name, int64_t group_id,
    size_t *pos)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(t->v[mid].name, name);
		if (c == 0)
			c = t->v[mid].group_id < group_id ? -1
			    : t->v[mid].group_id > group_id;
		if (c == 0)
			return &t->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*pos = lo;
	return NULL;
}

/*
 * Adds to the total of (name, group_id), making it if new. Returns 0 or
 * GP_ENOMEM (nothing changed).
 */
static int
total_add(struct ledger_totals *t, const char *name, int64_t group_id,
    int64_t amount, int64_t gpu_ms, int64_t postings)
{
	struct ledger_total *e;
	size_t pos = 0;

	if ((e = total_find(t, name, group_id, &pos)) == NULL) {
		if (reserve((void **)&t->v, &t->cap, t->n, sizeof(*t->v)) != 0)
			return GP_ENOMEM;
		memmove(&t->v[pos + 1], &t->v[pos],
		    (t->n - pos) * sizeof(*t->v));
		t->n++;
		e = &t->v[pos];
		memset(e, 0, sizeof(*e));
		gp_strlcpy(e->name, name, sizeof(e->name));
		e->group_id = group_id;
	}
	e->amount += amount;
	e->gpu_ms += gpu_ms;
	e->postings += postings;
	return 0;
}

/*
 * Counts entries of an account in memory (one posting's, or at start-up
 * a row of account_totals): a user's debits (amount < 0) or a provider's
 * credits, in its totals and its group's.
 */
static int
totals_add(struct ledger *l, int user, const char *name, int64_t group_id,
    int64_t amount, int64_t gpu_ms, int64_t postings)
{
	struct ledger_group *g =
	    (struct ledger_group *)ledger_group_by_id(l, group_id);

	if (total_add(user ? &l->debited : &l->credited, name, group_id,
		user ? -amount : amount, gpu_ms, postings) != 0)
		return GP_ENOMEM;
	if (user)
		l->postings += postings;
	if (g != NULL && user) {
		g->spent += -amount;
		g->used_gpu_ms += gpu_ms;
	} else if (g != NULL) {
		g->earned += amount;
		g->lent_gpu_ms += gpu_ms;
	}
	return 0;
}

/* ---- postings ---- */

static int
insert_entry(struct ledger *l, int64_t posting, const char *account,
    const char *name, int64_t group_id, int64_t amount, int64_t gpu_ms,
    int64_t at_ms)
{
	sqlite3_stmt *s = l->stmt[LS_INS_ENTRY];

	sqlite3_bind_int64(s, 1, posting);
	sqlite3_bind_text(s, 2, account, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, group_id);
	sqlite3_bind_int64(s, 5, amount);
	sqlite3_bind_int64(s, 6, gpu_ms);
	sqlite3_bind_int64(s, 7, at_ms);
	return step_done(l, s);
}

int
ledger_post(struct ledger *l, const struct acct_posting *p)
{
	sqlite3_stmt *s = l->stmt[LS_INS_POSTING];
	struct ledger_group *g;
	struct ledger_user *u;
	int64_t id;
	double gpu_s = (double)p->gpu_ms / 1000.0;
	size_t i, pos;

	/* Room for new totals first: past the insert, nothing may fail. */
	if ((total_find(&l->debited, p->user, p->user_group, &pos) == NULL &&
		reserve((void **)&l->debited.v, &l->debited.cap, l->debited.n,
		    sizeof(*l->debited.v)) != 0) ||
	    (total_find(&l->credited, p->provider, p->provider_group, &pos) ==
		    NULL &&
		reserve((void **)&l->credited.v, &l->credited.cap,
		    l->credited.n, sizeof(*l->credited.v)) != 0))
		return GP_ENOMEM;
	sqlite3_bind_int64(s, 1, p->job_id);
	sqlite3_bind_int(s, 2, p->attempt);
	sqlite3_bind_int(s, 3, p->seq);
	sqlite3_bind_int(s, 4, p->final);
	sqlite3_bind_int64(s, 5, p->at_ms);
	sqlite3_bind_int64(s, 6, p->from_ms);
	sqlite3_bind_int64(s, 7, p->to_ms);
	sqlite3_bind_int64(s, 8, p->node_id);
	sqlite3_bind_int64(s, 9, p->amount);
	sqlite3_bind_int64(s, 10, p->gpu_ms);
	sqlite3_bind_int(s, 11, p->part);
	if (step_done(l, s) != 0) {
		gp_error("posting refused job=%lld attempt=%d seq=%d",
		    (long long)p->job_id, p->attempt, p->seq);
		return GP_EIO;
	}
	id = sqlite3_last_insert_rowid(l->db);
	if (insert_entry(l, id, "user", p->user, p->user_group, -p->amount,
		p->gpu_ms, p->at_ms) != 0 ||
	    insert_entry(l, id, "provider", p->provider, p->provider_group,
		p->amount, p->gpu_ms, p->at_ms) != 0 ||
	    put_total(l, "user", p->user, p->user_group, -p->amount,
		p->gpu_ms) != 0 ||
	    put_total(l, "provider", p->provider, p->provider_group, p->amount,
		p->gpu_ms) != 0)
		return GP_EIO;
	(void)totals_add(l, 1, p->user, p->user_group, -p->amount, p->gpu_ms,
	    1);
	(void)totals_add(l, 0, p->provider, p->provider_group, p->amount,
	    p->gpu_ms, 0);
	for (i = 0; i < l->nbudgets; i++) {
		struct ledger_budget *b = &l->budgets[i];
		if (p->at_ms < b->period_start)
			continue;
		if ((b->kind == LEDGER_USER && strcmp(b->name, p->user) == 0) ||
		    (b->kind == LEDGER_GROUP && b->group_id == p->user_group))
			b->spent += p->amount;
	}
	u = user_get(l, p->user);
	if (u != NULL) {
		acct_decay_add(&u->usage, p->at_ms, l->half_life_ms, gpu_s,
		    (double)p->amount);
		if (put_decay(l, "user", u->name, &u->usage) != 0)
			return GP_EIO;
	}
	g = (struct ledger_group *)ledger_group_by_id(l, p->user_group);
	if (g != NULL) {
		acct_decay_add(&g->usage, p->at_ms, l->half_life_ms, gpu_s,
		    (double)p->amount);
		if (put_decay(l, "group", g->name, &g->usage) != 0)
			return GP_EIO;
	}
	gp_debug("posted job=%lld attempt=%d seq=%d final=%d amount=%lld "
		 "gpu_ms=%lld user=%s provider=%s",
	    (long long)p->job_id, p->attempt, p->seq, p->final,
	    (long long)p->amount, (long long)p->gpu_ms, p->user, p->provider);
	return 0;
}

int
ledger_restore_meter(struct ledger *l, int64_t job_id, int attempt,
    int part, struct acct_meter *m)
{
	sqlite3_stmt *s = l->stmt[LS_RESTORE];
	int rc;

	sqlite3_bind_int64(s, 1, job_id);
	sqlite3_bind_int(s, 2, attempt);
	sqlite3_bind_int(s, 3, part);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		int64_t count = sqlite3_column_int64(s, 0);
		int64_t max_seq = sqlite3_column_int64(s, 1);
		int64_t to = sqlite3_column_int64(s, 4);
		/* seq counts from 0 without gaps: the next is max + 1 (a
		 * gang's parts share the numbers: no such check). */
		if (part < 0 && count != max_seq + 1)
			gp_warn("ledger postings of an attempt have gaps "
				"job=%lld attempt=%d count=%lld max_seq=%lld",
			    (long long)job_id, attempt, (long long)count,
			    (long long)max_seq);
		m->seq = (int)(max_seq + 1);
		m->amount = sqlite3_column_int64(s, 2);
		m->gpu_ms = sqlite3_column_int64(s, 3);
		m->billed_ms = count > 0 && to > m->from_ms ? to - m->from_ms
							    : 0;
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc == SQLITE_ROW ? 0 : GP_EIO;
}

int
ledger_next_seq(struct ledger *l, int64_t job_id, int attempt)
{
	sqlite3_stmt *s = l->stmt[LS_NEXT_SEQ];
	int next = 0;

	sqlite3_bind_int64(s, 1, job_id);
	sqlite3_bind_int(s, 2, attempt);
	if (sqlite3_step(s) == SQLITE_ROW)
		next = sqlite3_column_int(s, 0);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return next;
}

/*
 * Columns added since the first schema, each detected by its presence:
 * postings.part (a gang's parts are billed one by one; 0 for the rest).
 */
static int
migrate(sqlite3 *db)
{
	sqlite3_stmt *s;
	int have = 0;

	if (sqlite3_prepare_v2(db,
		"SELECT COUNT(*) FROM pragma_table_info('postings')"
		" WHERE name = 'part'",
		-1, &s, NULL) != SQLITE_OK)
		return GP_EIO;
	if (sqlite3_step(s) == SQLITE_ROW)
		have = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	if (!have && exec_sql(db, "ALTER TABLE postings ADD COLUMN part"
				  " INTEGER NOT NULL DEFAULT 0;") != 0)
		return GP_EIO;
	return 0;
}

/* ---- opening ---- */

static int
load(struct ledger *l, int64_t now_ms)
{
	sqlite3_stmt *s;
	int rc = 0;

	if (sqlite3_prepare_v2(l->db,
		"SELECT id, name, weight, created_ms FROM groups ORDER BY id",
		-1, &s, NULL) != SQLITE_OK)
		return GP_EIO;
	while (sqlite3_step(s) == SQLITE_ROW) {
		struct ledger_group g;
		memset(&g, 0, sizeof(g));
		g.id = sqlite3_column_int64(s, 0);
		gp_strlcpy(g.name, col_text(s, 1), sizeof(g.name));
		g.weight = sqlite3_column_int64(s, 2);
		g.created_ms = sqlite3_column_int64(s, 3);
		if (group_append(l, &g) != 0)
			rc = GP_ENOMEM;
	}
	sqlite3_finalize(s);
	if (sqlite3_prepare_v2(l->db,
		"SELECT user, group_id, pos FROM members ORDER BY pos", -1, &s,
		NULL) != SQLITE_OK)
		return GP_EIO;
	while (rc == 0 && sqlite3_step(s) == SQLITE_ROW) {
		struct ledger_member *m;
		if (reserve((void **)&l->members, &l->capmembers, l->nmembers,
			sizeof(*l->members)) != 0) {
			rc = GP_ENOMEM;
			break;
		}
		m = &l->members[l->nmembers++];
		memset(m, 0, sizeof(*m));
		gp_strlcpy(m->user, col_text(s, 0), sizeof(m->user));
		m->group_id = sqlite3_column_int64(s, 1);
		m->pos = sqlite3_column_int64(s, 2);
		if (m->pos >= l->next_member_pos)
			l->next_member_pos = m->pos + 1;
	}
	sqlite3_finalize(s);
	if (sqlite3_prepare_v2(l->db, "SELECT class, micro FROM prices", -1,
		&s, NULL) != SQLITE_OK)
		return GP_EIO;
	while (rc == 0 && sqlite3_step(s) == SQLITE_ROW &&
	    l->nprices < ACCT_PRICES_MAX) {
		gp_strlcpy(l->prices[l->nprices].cls, col_text(s, 0),
		    sizeof(l->prices[0].cls));
		l->prices[l->nprices].micro = sqlite3_column_int64(s, 1);
		l->nprices++;
	}
	sqlite3_finalize(s);
	if (sqlite3_prepare_v2(l->db,
		"SELECT kind, name, amount, period FROM budgets", -1, &s,
		NULL) != SQLITE_OK)
		return GP_EIO;
	while (rc == 0 && sqlite3_step(s) == SQLITE_ROW) {
		enum ledger_kind kind = strcmp(col_text(s, 0), "user") == 0
		    ? LEDGER_USER
		    : LEDGER_GROUP;
		const struct ledger_group *g = NULL;
		enum acct_period period = ACCT_PERIOD_MONTH;
		acct_period_parse(col_text(s, 3), &period);
		if (kind == LEDGER_GROUP &&
		    (g = ledger_group_by_name(l, col_text(s, 1))) == NULL)
			continue;
		rc = budget_insert(l, kind, col_text(s, 1),
		    g != NULL ? g->id : 0, sqlite3_column_int64(s, 2), period,
		    now_ms);
	}
	sqlite3_finalize(s);
	if (sqlite3_prepare_v2(l->db,
		"SELECT kind, name, gpu_s, credits, as_of_ms FROM usage_decay",
		-1, &s, NULL) != SQLITE_OK)
		return GP_EIO;
	while (rc == 0 && sqlite3_step(s) == SQLITE_ROW) {
		struct acct_decay d;
		d.gpu_s = sqlite3_column_double(s, 2);
		d.credits = sqlite3_column_double(s, 3);
		d.as_of_ms = sqlite3_column_int64(s, 4);
		if (strcmp(col_text(s, 0), "user") == 0) {
			struct ledger_user *u = user_get(l, col_text(s, 1));
			if (u != NULL)
				u->usage = d;
		} else {
			struct ledger_group *g = (struct ledger_group *)
			    ledger_group_by_name(l, col_text(s, 1));
			if (g != NULL)
				g->usage = d;
		}
	}
	sqlite3_finalize(s);
	/* The running totals: a row per account, never the whole ledger. */
	if (sqlite3_prepare_v2(l->db,
		"SELECT account, name, group_id, amount, gpu_ms, postings"
		" FROM account_totals",
		-1, &s, NULL) != SQLITE_OK)
		return GP_EIO;
	while (rc == 0 && sqlite3_step(s) == SQLITE_ROW) {
		int user = strcmp(col_text(s, 0), "user") == 0;
		rc = totals_add(l, user, col_text(s, 1),
		    sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3),
		    sqlite3_column_int64(s, 4),
		    user ? sqlite3_column_int64(s, 5) : 0);
	}
	sqlite3_finalize(s);
	return rc;
}

static int
table_exists(sqlite3 *db, const char *name)
{
	sqlite3_stmt *s;
	int found = 0;

	if (sqlite3_prepare_v2(db,
		"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
		-1, &s, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
	found = sqlite3_step(s) == SQLITE_ROW;
	sqlite3_finalize(s);
	return found;
}

int
ledger_open(struct ledger *l, sqlite3 *db, const char *path,
    int64_t half_life_ms, int64_t now_ms)
{
	int i;

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->read_lock, NULL);
	l->db = db;
	l->half_life_ms = half_life_ms;
	if (exec_sql(db, schema) != 0 || migrate(db) != 0)
		return GP_EIO;
	if (!table_exists(db, "account_totals") &&
	    exec_sql(db, totals_schema) != 0) {
		if (!sqlite3_get_autocommit(db))
			exec_sql(db, "ROLLBACK;");
		return GP_EIO;
	}
	for (i = 0; i < LS_COUNT; i++)
		if (sqlite3_prepare_v2(db, stmt_sql[i], -1, &l->stmt[i],
			NULL) != SQLITE_OK) {
			gp_error("ledger prepare failed error=\"%s\"",
			    sqlite3_errmsg(db));
			return GP_EIO;
		}
	if (load(l, now_ms) != 0)
		return GP_EIO;
	if (ledger_group_by_name(l, ACCT_DEFAULT_GROUP) == NULL) {
		int64_t id;
		/* A new database: the default group and price. */
		if (exec_sql(db, "BEGIN IMMEDIATE;") != 0)
			return GP_EIO;
		if (ledger_group_create(l, ACCT_DEFAULT_GROUP, 1, now_ms,
			&id) != 0 ||
		    (l->nprices == 0 &&
			ledger_price_set(l, ACCT_DEFAULT_CLASS, GP_MICRO) != 0)) {
			exec_sql(db, "ROLLBACK;");
			return GP_EIO;
		}
		if (exec_sql(db, "COMMIT;") != 0)
			return GP_EIO;
	}
	if (path != NULL) {
		if (sqlite3_open_v2(path, &l->reader,
			SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
			NULL) != SQLITE_OK) {
			gp_error("cannot open the ledger for reading path=%s",
			    path);
			return GP_EIO;
		}
		sqlite3_busy_timeout(l->reader, 5000);
	}
	return 0;
}

void
ledger_close(struct ledger *l)
{
	int i;

	for (i = 0; i < LS_COUNT; i++)
		sqlite3_finalize(l->stmt[i]);
	if (l->reader != NULL)
		sqlite3_close(l->reader);
	free(l->groups);
	free(l->members);
	free(l->budgets);
	free(l->users);
	free(l->debited.v);
	free(l->credited.v);
	pthread_mutex_destroy(&l->read_lock);
	memset(l, 0, sizeof(*l));
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
		gp_buf_printf(q, " NOT INDEXED LEFT JOIN groups g ON"
				 " g.id = e.group_id");
		return;
	}
	gp_buf_printf(q, " LEFT JOIN groups g ON g.id = e.group_id"
			 " WHERE e.at_ms >= :since AND e.at_ms < :until");
	if (f->user[0] != '\0')
		gp_buf_printf(q, " AND e.posting IN (SELECT posting FROM entries"
				 " WHERE account = 'user' AND name = :user"
				 " AND at_ms >= :since AND at_ms < :until)");
	if (f->provider[0] != '\0')
		gp_buf_printf(q, " AND e.posting IN (SELECT posting FROM entries"
				 " WHERE account = 'provider' AND name ="
				 " :provider AND at_ms >= :since AND at_ms <"
				 " :until)");
	if (f->group_id != 0)
		gp_buf_printf(q, " AND e.posting IN (SELECT posting FROM entries"
				 " WHERE group_id = :group AND at_ms >= :since"
				 " AND at_ms < :until)");
	if (f->job_id != 0)
		gp_buf_printf(q, " AND e.posting IN (SELECT id FROM postings"
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
		gp_buf_printf(q, " AND (u.group_id = :group OR"
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

/* Prepares q on the reader (read_lock held). NULL with err on failure. */
static sqlite3_stmt *
prepare_read(struct ledger *l, struct gp_buf *q, char *err, size_t errlen)
{
	sqlite3_stmt *s = NULL;

	if (q->data == NULL ||
	    sqlite3_prepare_v2(l->reader, q->data, -1, &s, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(l->reader));
		return NULL;
	}
	return s;
}

static json_t *
time_or_null(int64_t ms)
{
	char buf[40];

	if (ms <= 0 || ms == INT64_MAX)
		return json_null();
	gp_format_time(ms, buf, sizeof(buf));
	return json_string(buf);
}

/* Adds a group's side to its row in groups (an object by name). */
static void
group_add(json_t *groups, const char *name, const char *what_gpu,
    const char *what_amount, int64_t gpu_ms, int64_t amount)
{
	json_t *g = json_object_get(groups, name);

	if (g == NULL) {
		g = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I}", "group", name,
		    "used_gpu_ms", (json_int_t)0, "spent_micro", (json_int_t)0,
		    "lent_gpu_ms", (json_int_t)0, "earned_micro",
		    (json_int_t)0, "net_micro", (json_int_t)0);
		json_object_set_new(groups, name, g);
	}
	json_object_set_new(g, what_gpu,
	    json_integer(json_integer_value(json_object_get(g, what_gpu)) +
		gpu_ms));
	json_object_set_new(g, what_amount,
	    json_integer(json_integer_value(json_object_get(g, what_amount)) +
		amount));
	json_object_set_new(g, "net_micro",
	    json_integer(
		json_integer_value(json_object_get(g, "earned_micro")) -
		json_integer_value(json_object_get(g, "spent_micro"))));
}

json_t *
ledger_usage_json(struct ledger *l, const struct ledger_filter *f, char *err,
    size_t errlen)
{
	struct gp_buf q = {0};
	json_t *users = json_array(), *providers = json_array();
	json_t *groups = json_object(), *garr = json_array(), *v;
	int64_t debits = 0, credits = 0, postings = 0;
	sqlite3_stmt *s = NULL;
	const char *key;
	int rc;

	if (l->reader == NULL) {
		snprintf(err, errlen, "no read connection");
		goto fail;
	}
	gp_buf_printf(&q, "SELECT e.account, e.name, COALESCE(g.name, '?'),"
			  " SUM(e.amount), SUM(e.gpu_ms), COUNT(*)"
			  " FROM entries e");
	usage_where(f, &q);
	gp_buf_printf(&q, " GROUP BY e.account, e.name, e.group_id"
			  " ORDER BY e.account, e.name, g.name");
	pthread_mutex_lock(&l->read_lock);
	s = prepare_read(l, &q, err, errlen);
	gp_buf_free(&q);
	if (s == NULL) {
		pthread_mutex_unlock(&l->read_lock);
		goto fail;
	}
	bind_filter(s, f);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *account = col_text(s, 0), *name = col_text(s, 1),
			   *group = col_text(s, 2);
		int64_t amount = sqlite3_column_int64(s, 3);
		int64_t gpu_ms = sqlite3_column_int64(s, 4);
		if (strcmp(account, "user") == 0) {
			debits += amount;
			postings += sqlite3_column_int64(s, 5);
			json_array_append_new(users,
			    json_pack("{s:s,s:s,s:I,s:I}", "user", name,
				"group", group, "gpu_ms", (json_int_t)gpu_ms,
				"spent_micro", (json_int_t)-amount));
			group_add(groups, group, "used_gpu_ms", "spent_micro",
			    gpu_ms, -amount);
		} else {
			credits += amount;
			json_array_append_new(providers,
			    json_pack("{s:s,s:s,s:I,s:I}", "provider", name,
				"group", group, "gpu_ms", (json_int_t)gpu_ms,
				"earned_micro", (json_int_t)amount));
			group_add(groups, group, "lent_gpu_ms", "earned_micro",
			    gpu_ms, amount);
		}
	}
	sqlite3_finalize(s);
	pthread_mutex_unlock(&l->read_lock);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "query failed");
		goto fail;
	}
	json_object_foreach(groups, key, v)
	    json_array_append(garr, v);
	json_decref(groups);
	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:{s:I,s:I,s:I,s:I}}",
	    "since", time_or_null(f->since_ms), "until",
	    time_or_null(f->until_ms), "users", users, "groups", garr,
	    "providers", providers, "filter",
	    json_pack("{s:s?,s:s?,s:s?}", "user",
		f->user[0] ? f->user : NULL, "group",
		f->group[0] ? f->group : NULL,
		"provider", f->provider[0] ? f->provider : NULL),
	    "totals", "postings", (json_int_t)postings, "debits_micro",
	    (json_int_t)debits, "credits_micro", (json_int_t)credits,
	    "balance_micro", (json_int_t)(debits + credits));
fail:
	json_decref(users);
	json_decref(providers);
	json_decref(groups);
	json_decref(garr);
	return NULL;
}

json_t *
ledger_postings_json(struct ledger *l, const struct ledger_filter *f,
    char *err, size_t errlen)
{
	json_t *arr = json_array(), *newest_first = json_array();
	struct gp_buf q = {0};
	sqlite3_stmt *s = NULL;
	size_t k;
	int rc;

	if (l->reader == NULL) {
		snprintf(err, errlen, "no read connection");
		json_decref(arr);
		return NULL;
	}
	gp_buf_printf(&q, "SELECT p.id, p.job_id, p.attempt, p.seq, p.final,"
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
	pthread_mutex_lock(&l->read_lock);
	s = prepare_read(l, &q, err, errlen);
	gp_buf_free(&q);
	if (s == NULL) {
		pthread_mutex_unlock(&l->read_lock);
		json_decref(arr);
		json_decref(newest_first);
		return NULL;
	}
	bind_filter(s, f);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t amount = sqlite3_column_int64(s, 9);
		int64_t gpu_ms = sqlite3_column_int64(s, 10);
		json_array_append_new(newest_first,
		    json_pack("{s:I,s:I,s:i,s:i,s:s,s:o,s:o,s:o,s:s,s:I,s:I,"
			      "s:[{s:s,s:s,s:s,s:I},{s:s,s:s,s:s,s:I}]}",
			"id", (json_int_t)sqlite3_column_int64(s, 0),
			"job_id", (json_int_t)sqlite3_column_int64(s, 1),
			"attempt", sqlite3_column_int(s, 2), "seq",
			sqlite3_column_int(s, 3), "kind",
			sqlite3_column_int(s, 4) ? "final" : "accrual", "at",
			time_or_null(sqlite3_column_int64(s, 5)), "from",
			time_or_null(sqlite3_column_int64(s, 6)), "to",
			time_or_null(sqlite3_column_int64(s, 7)), "node",
			col_text(s, 8), "amount_micro", (json_int_t)amount,
			"gpu_ms", (json_int_t)gpu_ms, "entries", "account",
			"user", "name", col_text(s, 11), "group",
			col_text(s, 12), "amount_micro", (json_int_t)-amount,
			"account", "provider", "name", col_text(s, 13),
			"group", col_text(s, 14), "amount_micro",
			(json_int_t)amount));
		json_object_set_new(json_array_get(newest_first,
					json_array_size(newest_first) - 1),
		    "part", json_integer(sqlite3_column_int(s, 15)));
	}
	sqlite3_finalize(s);
	pthread_mutex_unlock(&l->read_lock);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "query failed");
		json_decref(arr);
		json_decref(newest_first);
		return NULL;
	}
	/* Oldest first. */
	for (k = json_array_size(newest_first); k > 0; k--)
		json_array_append(arr, json_array_get(newest_first, k - 1));
	json_decref(newest_first);
	return json_pack("{s:o}", "postings", arr);
}
