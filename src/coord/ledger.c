/*
 * ledger.c: the coordinator's books (see ledger.h and docs/accounting.md):
 * the accounting tables (written through the storage interface,
 * store.h: no SQL here), their in-memory copies, postings
 * (two entries each, summing to zero), budgets' spending per period and
 * decayed usage maintained as postings are made, and the answers of
 * `gpupool usage` and `gpupool ledger` built from the store's rows.
 */
#include "ledger.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "log.h"
#include "store.h"
#include "util.h"

struct ledger ledger;

static const char *
kind_name(enum ledger_kind k)
{
	return k == LEDGER_USER ? "user" : "group";
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
	return l->store->ops->ledger_put_group(l->store, g->id, g->name,
	    g->weight, g->created_ms);
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
	if (l->store->ops->ledger_put_member(l->store, m->user, m->group_id,
		m->pos) != 0)
		return GP_EIO;
	l->nmembers++;
	return 0;
}

int
ledger_member_remove(struct ledger *l, const char *user, int64_t group_id)
{
	size_t i;

	for (i = 0; i < l->nmembers; i++) {
		if (strcmp(l->members[i].user, user) != 0 ||
		    l->members[i].group_id != group_id)
			continue;
		if (l->store->ops->ledger_delete_member(l->store, user,
			group_id) != 0)
			return GP_EIO;
		l->members[i] = l->members[--l->nmembers];
		return 0;
	}
	return GP_ENOENT;
}

int
ledger_member_move(struct ledger *l, const char *user, int64_t group_id)
{
	size_t i;

	if (ledger_group_by_id(l, group_id) == NULL)
		return GP_ENOENT;
	if (l->store->ops->ledger_delete_member(l->store, user, 0) != 0)
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
	size_t i;

	for (i = 0; i < l->nprices; i++)
		if (strcasecmp(l->prices[i].cls, cls) == 0)
			break;
	if (i == l->nprices && l->nprices == ACCT_PRICES_MAX)
		return GP_ETOOBIG;
	/* The class keeps the spelling it was first given. */
	if (i < l->nprices) {
		if (l->store->ops->ledger_delete_price(l->store,
			l->prices[i].cls) != 0)
			return GP_EIO;
	}
	if (l->store->ops->ledger_put_price(l->store, cls, micro) != 0)
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
	size_t i;

	for (i = 0; i < l->nprices; i++) {
		if (strcasecmp(l->prices[i].cls, cls) != 0)
			continue;
		if (l->store->ops->ledger_delete_price(l->store,
			l->prices[i].cls) != 0)
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
	if (l->store->ops->ledger_delete_price(l->store, NULL) != 0)
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
	return l->store->ops->ledger_spent(l->store, kind_name(b->kind),
	    b->name, b->group_id, b->period_start, &b->spent);
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
	if (l->store->ops->ledger_put_budget(l->store, kind_name(kind), name,
		amount, acct_period_name(period)) != 0)
		return GP_EIO;
	return budget_insert(l, kind, name, group_id, amount, period, now_ms);
}

int
ledger_budget_remove(struct ledger *l, enum ledger_kind kind,
    const char *name)
{
	struct ledger_budget *b = ledger_budget_find(l, kind, name);

	if (b == NULL)
		return GP_ENOENT;
	if (l->store->ops->ledger_delete_budget(l->store, kind_name(kind),
		name) != 0)
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
	return l->store->ops->ledger_put_decay(l->store, kind, name, d);
}

/* ---- running totals (for /metrics) ---- */

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

int
ledger_post(struct ledger *l, const struct acct_posting *p)
{
	struct ledger_group *g;
	struct ledger_user *u;
	int rc;
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
	if ((rc = l->store->ops->ledger_post(l->store, p)) != 0) {
		gp_error("posting refused job=%lld attempt=%d seq=%d "
			 "error=\"%s\"",
		    (long long)p->job_id, p->attempt, p->seq,
		    gp_store_error(l->store));
		return rc == GP_ECONFLICT ? GP_EIO : rc;
	}
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
	struct store_attempt_sum sum;

	if (l->store->ops->ledger_attempt(l->store, job_id, attempt, part,
		&sum) != 0)
		return GP_EIO;
	/* seq counts from 0 without gaps: the next is max + 1 (a gang's
	 * parts share the numbers: no such check). */
	if (part < 0 && sum.count != sum.max_seq + 1)
		gp_warn("ledger postings of an attempt have gaps "
			"job=%lld attempt=%d count=%lld max_seq=%lld",
		    (long long)job_id, attempt, (long long)sum.count,
		    (long long)sum.max_seq);
	m->seq = (int)(sum.max_seq + 1);
	m->amount = sum.amount;
	m->gpu_ms = sum.gpu_ms;
	m->billed_ms = sum.count > 0 && sum.max_to_ms > m->from_ms
	    ? sum.max_to_ms - m->from_ms
	    : 0;
	return 0;
}

int
ledger_next_seq(struct ledger *l, int64_t job_id, int attempt)
{
	struct store_attempt_sum sum;

	if (l->store->ops->ledger_attempt(l->store, job_id, attempt, -1,
		&sum) != 0)
		return 0;
	return (int)(sum.max_seq + 1);
}

/* ---- opening ---- */

/* struct store_ledger_loader's callbacks: the rows into memory. */
struct load_ctx {
	struct ledger *l;
	int64_t now_ms;
};

static int
load_group(void *arg, int64_t id, const char *name, int64_t weight,
    int64_t created_ms)
{
	struct load_ctx *c = arg;
	struct ledger_group g;

	memset(&g, 0, sizeof(g));
	g.id = id;
	gp_strlcpy(g.name, name, sizeof(g.name));
	g.weight = weight;
	g.created_ms = created_ms;
	return group_append(c->l, &g);
}

static int
load_member(void *arg, const char *user, int64_t group_id, int64_t pos)
{
	struct ledger *l = ((struct load_ctx *)arg)->l;
	struct ledger_member *m;

	if (reserve((void **)&l->members, &l->capmembers, l->nmembers,
		sizeof(*l->members)) != 0)
		return GP_ENOMEM;
	m = &l->members[l->nmembers++];
	memset(m, 0, sizeof(*m));
	gp_strlcpy(m->user, user, sizeof(m->user));
	m->group_id = group_id;
	m->pos = pos;
	if (m->pos >= l->next_member_pos)
		l->next_member_pos = m->pos + 1;
	return 0;
}

static int
load_price(void *arg, const char *cls, int64_t micro)
{
	struct ledger *l = ((struct load_ctx *)arg)->l;

	if (l->nprices == ACCT_PRICES_MAX)
		return 0;
	gp_strlcpy(l->prices[l->nprices].cls, cls, sizeof(l->prices[0].cls));
	l->prices[l->nprices].micro = micro;
	l->nprices++;
	return 0;
}

static int
load_budget(void *arg, const char *kind_text, const char *name,
    int64_t amount, const char *period_text)
{
	struct load_ctx *c = arg;
	enum ledger_kind kind = strcmp(kind_text, "user") == 0 ? LEDGER_USER
							       : LEDGER_GROUP;
	const struct ledger_group *g = NULL;
	enum acct_period period = ACCT_PERIOD_MONTH;

	acct_period_parse(period_text, &period);
	if (kind == LEDGER_GROUP &&
	    (g = ledger_group_by_name(c->l, name)) == NULL)
		return 0;
	return budget_insert(c->l, kind, name, g != NULL ? g->id : 0, amount,
	    period, c->now_ms);
}

static int
load_decay(void *arg, const char *kind, const char *name,
    const struct acct_decay *d)
{
	struct ledger *l = ((struct load_ctx *)arg)->l;

	if (strcmp(kind, "user") == 0) {
		struct ledger_user *u = user_get(l, name);
		if (u != NULL)
			u->usage = *d;
	} else {
		struct ledger_group *g =
		    (struct ledger_group *)ledger_group_by_name(l, name);
		if (g != NULL)
			g->usage = *d;
	}
	return 0;
}

static int
load_total(void *arg, const char *account, const char *name,
    int64_t group_id, int64_t amount, int64_t gpu_ms, int64_t postings)
{
	struct ledger *l = ((struct load_ctx *)arg)->l;
	int user = strcmp(account, "user") == 0;

	return totals_add(l, user, name, group_id, amount, gpu_ms,
	    user ? postings : 0);
}

int
ledger_open(struct ledger *l, struct gp_store *store, int64_t half_life_ms,
    int64_t now_ms)
{
	struct load_ctx ctx = {l, now_ms};
	const struct store_ledger_loader loader = {
		.arg = &ctx,
		.group = load_group,
		.member = load_member,
		.price = load_price,
		.budget = load_budget,
		.decay = load_decay,
		.total = load_total,
	};

	memset(l, 0, sizeof(*l));
	l->store = store;
	l->half_life_ms = half_life_ms;
	if (store->ops->ledger_load(store, &loader) != 0) {
		gp_error("cannot load the ledger error=\"%s\"",
		    gp_store_error(store));
		return GP_EIO;
	}
	if (ledger_group_by_name(l, ACCT_DEFAULT_GROUP) == NULL) {
		int64_t id;
		/* A new database: the default group and price. */
		if (store->ops->begin(store) != 0)
			return GP_EIO;
		if (ledger_group_create(l, ACCT_DEFAULT_GROUP, 1, now_ms,
			&id) != 0 ||
		    (l->nprices == 0 &&
			ledger_price_set(l, ACCT_DEFAULT_CLASS, GP_MICRO) != 0)) {
			store->ops->rollback(store);
			return GP_EIO;
		}
		if (store->ops->commit(store) != 0)
			return GP_EIO;
	}
	return 0;
}

void
ledger_close(struct ledger *l)
{
	free(l->groups);
	free(l->members);
	free(l->budgets);
	free(l->users);
	free(l->debited.v);
	free(l->credited.v);
	memset(l, 0, sizeof(*l));
}

/* ---- the answers of usage and ledger queries ---- */

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

/* What the usage answer is built from, row by row. */
struct usage_ctx {
	json_t *users, *providers, *groups;
	int64_t debits, credits, postings;
};

static int
usage_row(void *arg, const struct store_usage_row *r)
{
	struct usage_ctx *c = arg;

	if (strcmp(r->account, "user") == 0) {
		c->debits += r->amount;
		c->postings += r->postings;
		json_array_append_new(c->users,
		    json_pack("{s:s,s:s,s:I,s:I}", "user", r->name, "group",
			r->group, "gpu_ms", (json_int_t)r->gpu_ms,
			"spent_micro", (json_int_t)-r->amount));
		group_add(c->groups, r->group, "used_gpu_ms", "spent_micro",
		    r->gpu_ms, -r->amount);
	} else {
		c->credits += r->amount;
		json_array_append_new(c->providers,
		    json_pack("{s:s,s:s,s:I,s:I}", "provider", r->name,
			"group", r->group, "gpu_ms", (json_int_t)r->gpu_ms,
			"earned_micro", (json_int_t)r->amount));
		group_add(c->groups, r->group, "lent_gpu_ms", "earned_micro",
		    r->gpu_ms, r->amount);
	}
	return 0;
}

json_t *
ledger_usage_json(struct ledger *l, const struct ledger_filter *f, char *err,
    size_t errlen)
{
	struct usage_ctx c = {json_array(), json_array(), json_object(), 0, 0,
	    0};
	json_t *garr = json_array(), *v;
	const char *key;

	if (l->store->ops->ledger_usage(l->store, f, usage_row, &c, err,
		errlen) != 0)
		goto fail;
	json_object_foreach(c.groups, key, v)
	    json_array_append(garr, v);
	json_decref(c.groups);
	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:{s:I,s:I,s:I,s:I}}",
	    "since", time_or_null(f->since_ms), "until",
	    time_or_null(f->until_ms), "users", c.users, "groups", garr,
	    "providers", c.providers, "filter",
	    json_pack("{s:s?,s:s?,s:s?}", "user",
		f->user[0] ? f->user : NULL, "group",
		f->group[0] ? f->group : NULL,
		"provider", f->provider[0] ? f->provider : NULL),
	    "totals", "postings", (json_int_t)c.postings, "debits_micro",
	    (json_int_t)c.debits, "credits_micro", (json_int_t)c.credits,
	    "balance_micro", (json_int_t)(c.debits + c.credits));
fail:
	json_decref(c.users);
	json_decref(c.providers);
	json_decref(c.groups);
	json_decref(garr);
	return NULL;
}

static int
posting_row(void *arg, const struct store_posting_row *r)
{
	json_t *newest_first = arg, *p;

	p = json_pack("{s:I,s:I,s:i,s:i,s:s,s:o,s:o,s:o,s:s,s:I,s:I,"
		      "s:[{s:s,s:s,s:s,s:I},{s:s,s:s,s:s,s:I}]}",
	    "id", (json_int_t)r->id, "job_id", (json_int_t)r->job_id,
	    "attempt", r->attempt, "seq", r->seq, "kind",
	    r->final ? "final" : "accrual", "at", time_or_null(r->at_ms),
	    "from", time_or_null(r->from_ms), "to", time_or_null(r->to_ms),
	    "node", r->node, "amount_micro", (json_int_t)r->amount, "gpu_ms",
	    (json_int_t)r->gpu_ms, "entries", "account", "user", "name",
	    r->user, "group", r->user_group, "amount_micro",
	    (json_int_t)-r->amount, "account", "provider", "name", r->provider,
	    "group", r->provider_group, "amount_micro", (json_int_t)r->amount);
	if (p == NULL)
		return GP_ENOMEM;
	json_object_set_new(p, "part", json_integer(r->part));
	json_array_append_new(newest_first, p);
	return 0;
}

json_t *
ledger_postings_json(struct ledger *l, const struct ledger_filter *f,
    char *err, size_t errlen)
{
	json_t *arr = json_array(), *newest_first = json_array();
	size_t k;

	if (l->store->ops->ledger_postings(l->store, f, posting_row,
		newest_first, err, errlen) != 0) {
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
