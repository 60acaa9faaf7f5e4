/*
 * test_ledger.c: the books in SQLite (src/coord/ledger.c) under a
 * property test. Random sequences of attempts starting, accruing, ending
 * and migrating to other nodes (other providers, other groups) are
 * posted in batches, one transaction each, as the state thread does;
 * some batches "crash" (the transaction is rolled back and the
 * coordinator restarts from the database: the ledger closed and opened
 * again, running attempts' meters restored from the ledger, exactly as
 * state.c's load_job does). After every run:
 *
 *   - every posting has two entries and they sum to zero; so does the
 *     whole ledger, and `usage` reports a zero balance;
 *   - each attempt's postings count up from seq 0 without gaps, their
 *     periods tile its run from its start (nothing counted twice, nothing
 *     lost across crashes), and they add up exactly to the cost of the
 *     time billed at the attempt's rate; at most one is final, the last;
 *   - every entry is on the right account: the job's user and group, the
 *     node's provider and group;
 *   - budgets' spending, decayed usage and the running totals of
 *     /metrics (per user, provider and group; kept incrementally, in the
 *     table account_totals across restarts, and made from the entries
 *     when a database from before that table is opened) equal what a
 *     scan of the ledger gives.
 *
 * Also: members, prices and budgets survive restarts, a posting is never
 * written twice, and a database from before groups is migrated.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord/coordd.h"
#include "coord/ledger.h"
#include "coord/store_sqlite.h"
#include "gp.h"
#include "log.h"
#include "unit.h"
#include "util.h"

#define NJOBS  12
#define NNODES 5
#define NUSERS 4
#define HALF_LIFE_MS (6 * 3600000LL)

static uint64_t rng_state;

static uint64_t
rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int64_t
rnd_range(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

struct sim_node {
	const char *provider;
	int group; /* index in groups[] */
	int64_t price;
};

struct sim_attempt {
	int job, attempt, node;
	int open;
	struct acct_meter meter;
};

static char dir[256], path[300], cmd[300];
static int64_t groups[4]; /* ids: lab-a, lab-b, lab-c, default */
static const char *const users[NUSERS] = {"alice", "bob", "carol", "dan"};
static const int user_group[NUSERS] = {0, 1, 1, 2};
static const struct sim_node nodes[NNODES] = {
    {"prov-a", 0, 4000000}, {"prov-a", 0, 4000000}, {"prov-b", 1, 500000},
    {"prov-c", 2, 0}, {"prov-d", 1, 1234567},
};
static int job_user[NJOBS];
static struct sim_attempt *att;
static size_t natt, capatt;

/* The SQLite store under test, and its connection (for the checks). */
static struct gp_store *store;
#define store_db() (sqlite_store_of(store)->w.db)

static int
sql(const char *text)
{
	char *err = NULL;
	int rc = sqlite3_exec(store_db(), text, NULL, NULL, &err);

	if (rc != SQLITE_OK) {
		fprintf(stderr, "sql failed: %s: %s\n", text, err ? err : "?");
		sqlite3_free(err);
		return GP_EIO;
	}
	return 0;
}

static int64_t
sql_int(const char *text)
{
	sqlite3_stmt *s;
	int64_t v = INT64_MIN;

	if (sqlite3_prepare_v2(store_db(), text, -1, &s, NULL) != SQLITE_OK)
		return INT64_MIN;
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* Opens (or reopens after a "crash") the database and the books. */
static int
open_books(int64_t now)
{
	char err[512];

	if (gp_store_sqlite_ops.open(path, &store, err, sizeof(err)) != 0) {
		fprintf(stderr, "open: %s\n", err);
		return GP_EIO;
	}
	sql("PRAGMA synchronous=OFF;");
	if (ledger_open(&ledger, store, HALF_LIFE_MS, now) != 0)
		return GP_EIO;
	return sql("CREATE TABLE IF NOT EXISTS sim_attempts(job INTEGER,"
		   " attempt INTEGER, node INTEGER, from_ms INTEGER,"
		   " rate INTEGER, share INTEGER, open INTEGER, end_ms INTEGER,"
		   " PRIMARY KEY(job, attempt));"
		   "CREATE TABLE IF NOT EXISTS sim_who(job INTEGER PRIMARY KEY,"
		   " user TEXT, group_id INTEGER);"
		   "CREATE TABLE IF NOT EXISTS sim_nodes(id INTEGER PRIMARY KEY,"
		   " provider TEXT, group_id INTEGER);");
}

static void
close_books(void)
{
	ledger_close(&ledger);
	gp_store_close(store);
	store = NULL;
}

/* What the coordinator knows after a restart: the database. */
static void
reload_attempts(void)
{
	sqlite3_stmt *s;

	natt = 0;
	if (sqlite3_prepare_v2(store_db(),
		"SELECT job, attempt, node, from_ms, rate, share, open FROM"
		" sim_attempts ORDER BY job, attempt",
		-1, &s, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(s) == SQLITE_ROW) {
		struct sim_attempt *a;
		if (natt == capatt) {
			capatt = capatt ? capatt * 2 : 64;
			att = realloc(att, capatt * sizeof(*att));
		}
		a = &att[natt++];
		memset(a, 0, sizeof(*a));
		a->job = sqlite3_column_int(s, 0);
		a->attempt = sqlite3_column_int(s, 1);
		a->node = sqlite3_column_int(s, 2);
		a->open = sqlite3_column_int(s, 6);
		acct_meter_start(&a->meter, sqlite3_column_int64(s, 3),
		    sqlite3_column_int64(s, 4), sqlite3_column_int64(s, 5));
		if (a->open)
			CHECK_EQ(ledger_restore_meter(&ledger, a->job,
				     a->attempt, -1, &a->meter),
			    0);
	}
	sqlite3_finalize(s);
}

static struct sim_attempt *
open_attempt(int job)
{
	size_t i;

	for (i = 0; i < natt; i++)
		if (att[i].job == job && att[i].open)
			return &att[i];
	return NULL;
}

static int
last_attempt(int job)
{
	size_t i;
	int n = 0;

	for (i = 0; i < natt; i++)
		if (att[i].job == job && att[i].attempt > n)
			n = att[i].attempt;
	return n;
}

static void
post(struct sim_attempt *a, int64_t now, int final)
{
	struct acct_posting p;
	struct acct_delta d;
	int u = job_user[a->job];

	if (!acct_meter_advance(&a->meter, now, &d))
		return;
	acct_posting_fill(&p, a->job, a->attempt, &d, final, now, a->node + 1,
	    users[u], groups[user_group[u]], nodes[a->node].provider,
	    groups[nodes[a->node].group]);
	CHECK_EQ(ledger_post(&ledger, &p), 0);
}

static void
start(int job, int node, int64_t now)
{
	struct sim_attempt *a;
	char q[256];
	int64_t share = rnd() % 3 == 0 ? rnd_range(1, ACCT_SHARE_WHOLE)
				       : ACCT_SHARE_WHOLE * rnd_range(1, 4);

	if (natt == capatt) {
		capatt = capatt ? capatt * 2 : 64;
		att = realloc(att, capatt * sizeof(*att));
	}
	a = &att[natt++];
	memset(a, 0, sizeof(*a));
	a->job = job;
	a->attempt = last_attempt(job) + 1;
	a->node = node;
	a->open = 1;
	acct_meter_start(&a->meter, now, nodes[node].price * share, share);
	snprintf(q, sizeof(q),
	    "INSERT INTO sim_attempts VALUES(%d, %d, %d, %lld, %lld, %lld, 1,"
	    " 0)",
	    job, a->attempt, node, (long long)now,
	    (long long)a->meter.rate, (long long)share);
	sql(q);
}

static void
end(struct sim_attempt *a, int64_t now)
{
	char q[160];

	post(a, now, 1);
	a->open = 0;
	snprintf(q, sizeof(q),
	    "UPDATE sim_attempts SET open = 0, end_ms = %lld WHERE job = %d"
	    " AND attempt = %d",
	    (long long)now, a->job, a->attempt);
	sql(q);
}

/* One step of the world at time now. */
static void
step(int64_t now)
{
	int job = (int)rnd_range(0, NJOBS - 1), node;
	struct sim_attempt *a = open_attempt(job);
	size_t i;

	switch (rnd() % 5) {
	case 0: /* the periodic accrual */
		for (i = 0; i < natt; i++)
			if (att[i].open)
				post(&att[i], now, 0);
		break;
	case 1: /* an attempt starts */
		if (a == NULL && last_attempt(job) < 40)
			start(job, (int)rnd_range(0, NNODES - 1), now);
		break;
	case 2: /* an attempt ends (finished, cancelled, node lost) */
		if (a != NULL)
			end(a, now);
		break;
	case 3: /* migration: ends here, starts on another node */
		if (a != NULL) {
			node = a->node;
			end(a, now);
			start(job, (node + (int)rnd_range(1, NNODES - 1)) %
				NNODES,
			    now);
		}
		break;
	default: /* time passes */
		break;
	}
}

/* The checks listed at the top, on the committed database. */
/*
 * The running totals (/metrics) equal a scan of the entries: every
 * (account, name, group) and every group, nothing more, nothing less.
 */
static void
verify_totals(void)
{
	const struct ledger_totals *t;
	size_t i, n = 0;
	char q[400];
	int pass;

	CHECK_EQ(ledger.postings, sql_int("SELECT COUNT(*) FROM postings"));
	for (pass = 0; pass < 2; pass++) {
		t = pass == 0 ? &ledger.debited : &ledger.credited;
		for (i = 0; i < t->n; i++) {
			const struct ledger_total *e = &t->v[i];
			snprintf(q, sizeof(q),
			    "SELECT COALESCE(SUM(amount), 0) FROM entries"
			    " WHERE account = '%s' AND name = '%s' AND"
			    " group_id = %lld",
			    pass == 0 ? "user" : "provider", e->name,
			    (long long)e->group_id);
			CHECK_EQ(e->amount, (pass == 0 ? -1 : 1) * sql_int(q));
			snprintf(q, sizeof(q),
			    "SELECT COALESCE(SUM(gpu_ms), 0) FROM entries"
			    " WHERE account = '%s' AND name = '%s' AND"
			    " group_id = %lld",
			    pass == 0 ? "user" : "provider", e->name,
			    (long long)e->group_id);
			CHECK_EQ(e->gpu_ms, sql_int(q));
			if (i > 0) /* sorted, no duplicates */
				CHECK(strcmp(t->v[i - 1].name, e->name) < 0 ||
				    (strcmp(t->v[i - 1].name, e->name) == 0 &&
					t->v[i - 1].group_id < e->group_id));
		}
		n += t->n;
	}
	CHECK_EQ((int64_t)n,
	    sql_int("SELECT COUNT(*) FROM (SELECT DISTINCT account, name,"
		    " group_id FROM entries)"));
	for (i = 0; i < ledger.ngroups; i++) {
		const struct ledger_group *g = &ledger.groups[i];
		snprintf(q, sizeof(q),
		    "SELECT COALESCE(SUM(-amount), 0) FROM entries WHERE"
		    " account = 'user' AND group_id = %lld",
		    (long long)g->id);
		CHECK_EQ(g->spent, sql_int(q));
		snprintf(q, sizeof(q),
		    "SELECT COALESCE(SUM(gpu_ms), 0) FROM entries WHERE"
		    " account = 'user' AND group_id = %lld",
		    (long long)g->id);
		CHECK_EQ(g->used_gpu_ms, sql_int(q));
		snprintf(q, sizeof(q),
		    "SELECT COALESCE(SUM(amount), 0) FROM entries WHERE"
		    " account = 'provider' AND group_id = %lld",
		    (long long)g->id);
		CHECK_EQ(g->earned, sql_int(q));
		snprintf(q, sizeof(q),
		    "SELECT COALESCE(SUM(gpu_ms), 0) FROM entries WHERE"
		    " account = 'provider' AND group_id = %lld",
		    (long long)g->id);
		CHECK_EQ(g->lent_gpu_ms, sql_int(q));
	}
}

static void
verify(int64_t now)
{
	struct ledger_filter f;
	sqlite3_stmt *s;
	char err[256];
	json_t *usage;
	int u, g;

	CHECK_EQ(sql_int("SELECT COUNT(*) FROM (SELECT posting FROM entries"
			 " GROUP BY posting HAVING SUM(amount) != 0"
			 " OR COUNT(*) != 2)"),
	    0);
	CHECK_EQ(sql_int("SELECT COUNT(*) FROM postings p WHERE NOT EXISTS"
			 " (SELECT 1 FROM entries e WHERE e.posting = p.id)"),
	    0);
	CHECK_EQ(sql_int("SELECT COALESCE(SUM(amount), 0) FROM entries"), 0);
	/* entries on the right accounts */
	CHECK_EQ(sql_int("SELECT COUNT(*) FROM postings p"
			 " JOIN entries e ON e.posting = p.id"
			 " JOIN sim_who w ON w.job = p.job_id"
			 " JOIN sim_nodes n ON n.id = p.node_id"
			 " WHERE (e.account = 'user' AND (e.name != w.user OR"
			 " e.group_id != w.group_id OR e.amount != -p.amount))"
			 " OR (e.account = 'provider' AND (e.name != n.provider"
			 " OR e.group_id != n.group_id OR e.amount != p.amount))"
			 " OR e.account NOT IN ('user', 'provider')"),
	    0);
	/* postings only of attempts that exist (committed together) */
	CHECK_EQ(sql_int("SELECT COUNT(*) FROM postings p WHERE NOT EXISTS"
			 " (SELECT 1 FROM sim_attempts a WHERE a.job = p.job_id"
			 " AND a.attempt = p.attempt)"),
	    0);
	/* per attempt: seq, tiling, exact sums, final last */
	if (sqlite3_prepare_v2(store_db(),
		"SELECT a.job, a.attempt, a.from_ms, a.rate, a.share, a.open,"
		" a.end_ms, p.seq, p.from_ms, p.to_ms, p.amount, p.gpu_ms,"
		" p.final FROM sim_attempts a LEFT JOIN postings p ON"
		" p.job_id = a.job AND p.attempt = a.attempt"
		" ORDER BY a.job, a.attempt, p.seq",
		-1, &s, NULL) != SQLITE_OK) {
		CHECK(0);
		return;
	}
	{
		int64_t job = -1, attempt = -1, from = 0, rate = 0, share = 0;
		int64_t to = 0, sum = 0, gpu = 0, end_ms = 0;
		int seq = 0, finals = 0, open = 0, after_final = 0, rc;
		do {
			rc = sqlite3_step(s);
			if (rc != SQLITE_ROW ||
			    sqlite3_column_int64(s, 0) != job ||
			    sqlite3_column_int64(s, 1) != attempt) {
				/* close the previous attempt */
				if (job >= 0) {
					CHECK_EQ(sum, acct_cost(rate, to - from));
					CHECK_EQ(gpu, acct_gpu_ms(share, to - from));
					CHECK(finals <= 1);
					CHECK(!after_final);
					CHECK(!(open && finals));
					if (!open && finals)
						CHECK_EQ(to, end_ms);
				}
				if (rc != SQLITE_ROW)
					break;
				job = sqlite3_column_int64(s, 0);
				attempt = sqlite3_column_int64(s, 1);
				from = to = sqlite3_column_int64(s, 2);
				rate = sqlite3_column_int64(s, 3);
				share = sqlite3_column_int64(s, 4);
				open = sqlite3_column_int(s, 5);
				end_ms = sqlite3_column_int64(s, 6);
				seq = 0;
				sum = gpu = 0;
				finals = after_final = 0;
			}
			if (sqlite3_column_type(s, 7) == SQLITE_NULL)
				continue; /* no postings */
			CHECK_EQ(sqlite3_column_int(s, 7), seq);
			CHECK_EQ(sqlite3_column_int64(s, 8), to);
			seq++;
			after_final |= finals > 0;
			to = sqlite3_column_int64(s, 9);
			sum += sqlite3_column_int64(s, 10);
			gpu += sqlite3_column_int64(s, 11);
			finals += sqlite3_column_int(s, 12);
		} while (1);
	}
	sqlite3_finalize(s);
	/* usage from the read connection: a zero balance */
	memset(&f, 0, sizeof(f));
	usage = ledger_usage_json(&ledger, &f, err, sizeof(err));
	CHECK(usage != NULL);
	if (usage != NULL) {
		json_t *t = json_object_get(usage, "totals");
		CHECK_EQ(json_integer_value(json_object_get(t,
			     "balance_micro")),
		    0);
		CHECK_EQ(json_integer_value(json_object_get(t,
			     "credits_micro")),
		    sql_int("SELECT COALESCE(SUM(amount), 0) FROM postings"));
		CHECK_EQ(json_integer_value(json_object_get(t, "postings")),
		    sql_int("SELECT COUNT(*) FROM postings"));
		json_decref(usage);
	}
	/* budgets: spent as the ledger says (period "total") */
	{
		struct ledger_budget *b =
		    ledger_budget_find(&ledger, LEDGER_USER, "bob");
		CHECK(b != NULL);
		if (b != NULL)
			CHECK_EQ(b->spent,
			    -sql_int("SELECT COALESCE(SUM(amount), 0) FROM"
				     " entries WHERE account = 'user' AND name"
				     " = 'bob'"));
		b = ledger_budget_find(&ledger, LEDGER_GROUP, "lab-b");
		CHECK(b != NULL);
		if (b != NULL) {
			char q[200];
			snprintf(q, sizeof(q),
			    "SELECT COALESCE(SUM(amount), 0) FROM entries WHERE"
			    " account = 'user' AND group_id = %lld",
			    (long long)groups[1]);
			CHECK_EQ(b->spent, -sql_int(q));
		}
	}
	verify_totals();
	/* decayed usage: incremental (and restored) = a scan of the ledger */
	for (u = 0; u < NUSERS + 3; u++) {
		struct acct_decay d;
		double want_s = 0, want_c = 0;
		char q[256];
		if (u < NUSERS) {
			ledger_user_usage(&ledger, users[u], now, &d);
			snprintf(q, sizeof(q),
			    "SELECT at_ms, gpu_ms, -amount FROM entries WHERE"
			    " account = 'user' AND name = '%s'",
			    users[u]);
		} else {
			g = u - NUSERS;
			ledger_group_usage(&ledger, groups[g], now, &d);
			snprintf(q, sizeof(q),
			    "SELECT at_ms, gpu_ms, -amount FROM entries WHERE"
			    " account = 'user' AND group_id = %lld",
			    (long long)groups[g]);
		}
		if (sqlite3_prepare_v2(store_db(), q, -1, &s, NULL) !=
		    SQLITE_OK) {
			CHECK(0);
			continue;
		}
		while (sqlite3_step(s) == SQLITE_ROW) {
			double f2 = exp2(
			    -(double)(now - sqlite3_column_int64(s, 0)) /
			    (double)HALF_LIFE_MS);
			want_s += (double)sqlite3_column_int64(s, 1) / 1000.0 *
			    f2;
			want_c += (double)sqlite3_column_int64(s, 2) * f2;
		}
		sqlite3_finalize(s);
		CHECK(fabs(d.gpu_s - want_s) <= 1e-6 * (want_s + 1));
		CHECK(fabs(d.credits - want_c) <= 1e-6 * (want_c + 1));
	}
}

static int
one_run(uint64_t seed)
{
	int64_t now = 1700000000000LL + (int64_t)(seed % 1000) * 86400000LL;
	int batch, i, crashes = 0, before = unit_failed_checks;
	char q[200];

	rng_state = seed * 2654435761ULL + 1;
	snprintf(dir, sizeof(dir), "/tmp/gp-test-ledger.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/state.db", dir);
	natt = 0;
	CHECK_EQ(open_books(now), 0);
	/* the world: groups, who is who, budgets */
	CHECK_EQ(store->ops->begin(store), 0);
	CHECK_EQ(ledger_group_create(&ledger, "lab-a", 1, now, &groups[0]), 0);
	CHECK_EQ(ledger_group_create(&ledger, "lab-b", 2, now, &groups[1]), 0);
	CHECK_EQ(ledger_group_create(&ledger, "lab-c", 1, now, &groups[2]), 0);
	groups[3] = ledger_group_by_name(&ledger, "default")->id;
	for (i = 0; i < NJOBS; i++) {
		job_user[i] = (int)rnd_range(0, NUSERS - 1);
		snprintf(q, sizeof(q),
		    "INSERT INTO sim_who VALUES(%d, '%s', %lld)", i,
		    users[job_user[i]],
		    (long long)groups[user_group[job_user[i]]]);
		sql(q);
	}
	for (i = 0; i < NNODES; i++) {
		snprintf(q, sizeof(q),
		    "INSERT INTO sim_nodes VALUES(%d, '%s', %lld)", i + 1,
		    nodes[i].provider, (long long)groups[nodes[i].group]);
		sql(q);
	}
	CHECK_EQ(ledger_budget_set(&ledger, LEDGER_USER, "bob", 0, 1000000,
		     ACCT_PERIOD_TOTAL, now),
	    0);
	CHECK_EQ(ledger_budget_set(&ledger, LEDGER_GROUP, "lab-b", groups[1],
		     5000000, ACCT_PERIOD_TOTAL, now),
	    0);
	CHECK_EQ(store->ops->commit(store), 0);
	for (batch = 0; batch < 120; batch++) {
		int n = (int)rnd_range(1, 8);
		CHECK_EQ(store->ops->begin(store), 0);
		for (i = 0; i < n; i++) {
			now += rnd_range(0, 90000);
			step(now);
		}
		if (rnd() % 8 == 0) {
			/* kill -9 before the commit: the batch is lost */
			sql("ROLLBACK;");
			close_books();
			CHECK_EQ(open_books(now), 0);
			reload_attempts();
			crashes++;
		} else {
			CHECK_EQ(store->ops->commit(store), 0);
			if (rnd() % 16 == 0) { /* a clean restart */
				/* now and then from before account_totals */
				if (rnd() % 2 == 0)
					sql("DROP TABLE account_totals;"
					    "DELETE FROM meta WHERE key ="
					    " 'schema_hash';");
				close_books();
				CHECK_EQ(open_books(now), 0);
				reload_attempts();
			}
		}
	}
	/* whatever ran on, ends; then the books are read back once more */
	CHECK_EQ(store->ops->begin(store), 0);
	now += 1000;
	for (i = 0; i < (int)natt; i++)
		if (att[i].open)
			end(&att[i], now);
	CHECK_EQ(store->ops->commit(store), 0);
	/* as kept up incrementally, then as read back at a start */
	verify(now);
	close_books();
	CHECK_EQ(open_books(now), 0);
	verify(now + rnd_range(0, 10 * HALF_LIFE_MS));
	if (sql_int("SELECT COUNT(*) FROM postings") < 5)
		fprintf(stderr, "seed %llu: few postings\n",
		    (unsigned long long)seed);
	close_books();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	if (unit_failed_checks != before)
		fprintf(stderr, "failed with seed %llu (%d crashes)\n",
		    (unsigned long long)seed, crashes);
	return crashes;
}

TEST(property_random_histories)
{
	uint64_t seed;
	int crashes = 0;

	for (seed = 1; seed <= 40; seed++) {
		int before = unit_failed_checks;
		crashes += one_run(seed);
		if (unit_failed_checks != before)
			break;
	}
	CHECK(crashes > 0); /* the property was tested across restarts */
}

/* Members, prices and budgets survive a restart; posting twice fails. */
TEST(books_persist)
{
	int64_t now = 1700000000000LL, id, ids[4];
	struct acct_posting p;
	struct acct_delta d = {0, now, now + 1000, 5, 1000};

	snprintf(dir, sizeof(dir), "/tmp/gp-test-ledger.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	CHECK_EQ(open_books(now), 0);
	CHECK(ledger_group_by_name(&ledger, "default") != NULL);
	CHECK_EQ(ledger.nprices, 1);
	CHECK_EQ(ledger_price_of(&ledger, "anything"), 1000000);
	CHECK_EQ(store->ops->begin(store), 0);
	CHECK_EQ(ledger_group_create(&ledger, "lab-a", 3, now, &id), 0);
	CHECK_EQ(ledger_group_create(&ledger, "lab-a", 3, now, &id),
	    GP_ECONFLICT);
	CHECK_EQ(ledger_user_groups(&ledger, "alice", ids, 4), 1);
	CHECK_EQ(ids[0], ledger_group_by_name(&ledger, "default")->id);
	CHECK_EQ(ledger_member_add(&ledger, "alice", id), 0);
	CHECK_EQ(ledger_member_add(&ledger, "alice", 1), 0);
	CHECK_EQ(ledger_member_add(&ledger, "alice", 99), GP_ENOENT);
	CHECK_EQ(ledger_price_set(&ledger, "A100", 4000000), 0);
	CHECK_EQ(ledger_price_set(&ledger, "a100", 5000000), 0); /* same */
	CHECK_EQ(ledger.nprices, 2);
	CHECK_EQ(ledger_budget_set(&ledger, LEDGER_USER, "alice", 0, 7,
		     ACCT_PERIOD_MONTH, now),
	    0);
	acct_posting_fill(&p, 1, 1, &d, 0, now + 1000, 1, "alice", id,
	    "prov", 1);
	CHECK_EQ(ledger_post(&ledger, &p), 0);
	CHECK_EQ(ledger_post(&ledger, &p), GP_EIO); /* never twice */
	CHECK_EQ(store->ops->commit(store), 0);
	close_books();
	CHECK_EQ(open_books(now + 2000), 0);
	CHECK(ledger_group_by_name(&ledger, "lab-a") != NULL);
	CHECK_EQ(ledger_group_by_name(&ledger, "lab-a")->weight, 3);
	CHECK_EQ(ledger_user_groups(&ledger, "alice", ids, 4), 2);
	CHECK_EQ(ids[0], id); /* joined first: the default */
	CHECK_EQ(ledger_price_of(&ledger, "NVIDIA A100"), 5000000);
	CHECK(ledger_budget_find(&ledger, LEDGER_USER, "alice") != NULL);
	CHECK_EQ(ledger_budget_find(&ledger, LEDGER_USER, "alice")->spent, 5);
	CHECK_EQ(store->ops->begin(store), 0);
	CHECK_EQ(ledger_member_move(&ledger, "alice", 1), 0);
	CHECK_EQ(ledger_user_groups(&ledger, "alice", ids, 4), 1);
	CHECK_EQ(ids[0], 1);
	CHECK_EQ(ledger_member_remove(&ledger, "alice", 1), 0);
	CHECK_EQ(ledger_member_remove(&ledger, "alice", 1), GP_ENOENT);
	CHECK(ledger_is_member(&ledger, "alice", 1)); /* default again */
	CHECK_EQ(ledger_price_remove(&ledger, "A100"), 0);
	CHECK_EQ(ledger_price_remove(&ledger, "A100"), GP_ENOENT);
	CHECK_EQ(ledger_budget_remove(&ledger, LEDGER_USER, "alice"), 0);
	CHECK_EQ(store->ops->commit(store), 0);
	close_books();
	CHECK_EQ(open_books(now + 3000), 0);
	CHECK_EQ(ledger_price_of(&ledger, "NVIDIA A100"), 1000000);
	CHECK(ledger_budget_find(&ledger, LEDGER_USER, "alice") == NULL);
	CHECK_EQ(ledger.nmembers, 0);
	close_books();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

static struct token_entry *loaded_token;

static void
on_token(void *arg, struct token_entry *t)
{
	(void)arg;
	free(loaded_token);
	loaded_token = t;
}

static void
on_node(void *arg, struct node *n)
{
	(void)arg;
	free(n->gpus);
	free(n);
}

static void
on_job(void *arg, struct job *j)
{
	(void)arg;
	(void)j;
}

static const struct store_loader loader = {NULL, on_token, on_node, on_job};

/* A database of before groups: its tokens get a group column, "default". */
TEST(migrates_old_tokens)
{
	int64_t skipped[JOB_TIMEOUT + 1] = {0}, max_id;
	sqlite3 *db;

	snprintf(dir, sizeof(dir), "/tmp/gp-test-ledger.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
	CHECK_EQ(sqlite3_exec(db,
		     "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
		     "INSERT INTO meta VALUES('schema_version', '1');"
		     "CREATE TABLE tokens(id INTEGER PRIMARY KEY,"
		     " name TEXT NOT NULL, role TEXT NOT NULL,"
		     " hash TEXT NOT NULL UNIQUE, created_ms INTEGER NOT NULL);"
		     "INSERT INTO tokens VALUES(1, 'alice', 'user', 'abc', 5);",
		     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	CHECK_EQ(open_books(1700000000000LL), 0);
	CHECK_EQ(store->ops->load(store, &loader, 0, skipped, &max_id),
	    0);
	CHECK(loaded_token != NULL);
	if (loaded_token != NULL) {
		CHECK_STR(loaded_token->name, "alice");
		CHECK_EQ(loaded_token->group_id, 1);
	}
	CHECK_EQ(ledger_group_by_name(&ledger, "default")->id, 1);
	CHECK(ledger_is_member(&ledger, "alice", 1));
	close_books();
	/* and opening it again changes nothing */
	CHECK_EQ(open_books(1700000000000LL), 0);
	CHECK_EQ(store->ops->load(store, &loader, 0, skipped, &max_id),
	    0);
	CHECK(loaded_token != NULL && loaded_token->group_id == 1);
	close_books();
	free(loaded_token);
	loaded_token = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

int
main(void)
{
	gp_log_init("test", GP_LOG_ERROR);
	RUN(books_persist);
	RUN(migrates_old_tokens);
	RUN(property_random_histories);
	free(att);
	return unit_report();
}
