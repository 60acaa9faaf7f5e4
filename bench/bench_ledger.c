/*
 * bench_ledger.c: what the books cost (docs/accounting.md). Posts N
 * postings (two entries each, budgets and decayed usage kept up) in
 * batches as the state thread's accrual does, one transaction a batch
 * with the coordinator's settings (WAL, synchronous=FULL), then times the
 * reads: `usage` over the whole ledger and for one user, a page of
 * `ledger`, and the decayed-usage lookups the scheduler will make per
 * pass. Prints "metric value unit" lines. Usage: bench_ledger [--postings
 * N] [--batch B] [--users U] (defaults 200000, 1000, 200).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord/coordd.h"
#include "coord/ledger.h"
#include "gp.h"
#include "log.h"
#include "util.h"

static double
ms_since(int64_t start_us)
{
	return (double)(gp_mono_us() - start_us) / 1000.0;
}

int
main(int argc, char **argv)
{
	long postings = 200000, batch = 1000, nusers = 200, i;
	char dir[] = "/tmp/gp-bench-ledger.XXXXXX", path[128], cmd[160];
	char err[256], user[32], (*names)[32];
	struct gp_store *store = NULL;
	struct ledger_filter f;
	struct acct_decay d;
	int64_t now = 1700000000000LL, t0, groups[8];
	double sink = 0, elapsed;
	json_t *j;
	int g;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--postings") == 0)
			postings = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--batch") == 0)
			batch = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--users") == 0)
			nusers = atol(argv[i + 1]);
		else {
			fprintf(stderr, "usage: bench_ledger [--postings N] "
					"[--batch B] [--users U]\n");
			return 2;
		}
	}
	if (postings < 1 || batch < 1 || nusers < 1) {
		fprintf(stderr, "bench_ledger: counts must be positive\n");
		return 2;
	}
	gp_log_init("bench", GP_LOG_WARN);
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/state.db", dir);
	if (gp_store_sqlite_ops.open(path, &store, err, sizeof(err)) != 0 ||
	    ledger_open(&ledger, store, 7 * 86400000LL, now) != 0)
		return 1;
	store->ops->begin(store);
	for (g = 0; g < 8; g++) {
		char name[16];
		snprintf(name, sizeof(name), "lab-%d", g);
		ledger_group_create(&ledger, name, 1, now, &groups[g]);
	}
	ledger_budget_set(&ledger, LEDGER_USER, "user-1", 0, GP_MICRO * 1000,
	    ACCT_PERIOD_MONTH, now);
	ledger_budget_set(&ledger, LEDGER_GROUP, "lab-1", groups[1],
	    GP_MICRO * 1000, ACCT_PERIOD_MONTH, now);
	store->ops->commit(store);

	t0 = gp_mono_us();
	for (i = 0; i < postings; i++) {
		struct acct_delta dl = {(int)(i / 1000), now, now + 30000,
		    30000, 30000};
		struct acct_posting p;
		long u = i % nusers;
		if (i % batch == 0 && store->ops->begin(store) != 0)
			return 1;
		snprintf(user, sizeof(user), "user-%ld", u);
		acct_posting_fill(&p, 1 + i % 1000, 1, &dl, 0, now, 1 + u % 16,
		    user, groups[u % 8], "prov", groups[(u + 1) % 8]);
		if (ledger_post(&ledger, &p) != 0)
			return 1;
		if ((i + 1) % batch == 0 || i + 1 == postings) {
			if (store->ops->commit(store) != 0)
				return 1;
			now += 30000;
		}
	}
	elapsed = ms_since(t0);
	printf("ledger_postings %ld count\n", postings);
	printf("ledger_post_rate %.0f postings/s\n",
	    (double)postings / (elapsed / 1000.0));
	printf("ledger_commit_mean %.3f ms\n",
	    elapsed / (double)((postings + batch - 1) / batch));

	memset(&f, 0, sizeof(f));
	t0 = gp_mono_us();
	j = ledger_usage_json(&ledger, &f, err, sizeof(err));
	printf("usage_all_ms %.1f ms\n", ms_since(t0));
	if (j == NULL ||
	    json_integer_value(json_object_get(json_object_get(j, "totals"),
		"balance_micro")) != 0) {
		fprintf(stderr, "bench_ledger: usage failed or unbalanced\n");
		return 1;
	}
	json_decref(j);
	gp_strlcpy(f.user, "user-1", sizeof(f.user));
	t0 = gp_mono_us();
	j = ledger_usage_json(&ledger, &f, err, sizeof(err));
	printf("usage_one_user_ms %.1f ms\n", ms_since(t0));
	json_decref(j);
	memset(&f, 0, sizeof(f));
	f.limit = 100;
	t0 = gp_mono_us();
	j = ledger_postings_json(&ledger, &f, err, sizeof(err));
	printf("ledger_page_ms %.1f ms\n", ms_since(t0));
	json_decref(j);

	names = calloc((size_t)nusers, sizeof(*names));
	if (names == NULL)
		return 1;
	for (i = 0; i < nusers; i++)
		snprintf(names[i], sizeof(names[i]), "user-%ld", i);
	t0 = gp_mono_us();
	for (i = 0; i < 1000000; i++) {
		ledger_user_usage(&ledger, names[i % nusers], now + i, &d);
		sink += d.gpu_s;
		ledger_group_usage(&ledger, groups[i % 8], now + i, &d);
		sink += d.credits;
	}
	printf("decayed_usage_lookup %.0f ns\n", ms_since(t0) * 1e6 / 2e6);
	free(names);
	if (sink < 0)
		printf("(%f)\n", sink);
	ledger_close(&ledger);
	gp_store_close(store);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}
