/*
 * store_pg_int.h: what the PostgreSQL store's two files share
 * (store_pg.c: statements, the transaction with its fence and replay,
 * opening, the model, submit keys; store_pg_ledger.c: the ledger's
 * tables and queries). Nothing outside them includes it.
 */
#ifndef GP_COORD_STORE_PG_INT_H
#define GP_COORD_STORE_PG_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "pg.h"
#include "store.h"

/* At most this many parameters to one statement. */
#define MAX_PARAMS 24
/* Distinct statements prepared on one connection. */
#define MAX_PREPARED 64

/* One statement of the open transaction, kept for a replay. */
struct logged {
	const char *sql; /* a string literal (never freed) */
	int n;
	char *vals[MAX_PARAMS];
};

/* A statement prepared on a connection (its name: "gpN", N its index). */
struct prepared {
	const char *sql;
	unsigned gen; /* the connection's generation it was prepared in */
};

struct pg_store {
	struct gp_store base; /* first: store.c casts */
	struct pg_conn *w;    /* the state thread's */
	unsigned wgen;	      /* bumped on every new connection of w */
	struct prepared wprep[MAX_PREPARED];
	int nwprep;
	struct pg_conn *r; /* any thread's reads, behind rlock */
	unsigned rgen;
	struct prepared rprep[MAX_PREPARED];
	int nrprep;
	pthread_mutex_t rlock;

	int64_t epoch;	   /* the epoch this transaction is fenced with */
	int elected;	   /* leader.c leads: its epoch, read per transaction */
	int in_tx;	   /* between begin and commit/rollback */
	int sent;	   /* BEGIN and the fence sent on w */
	/*
	 * A statement of the open transaction failed for good because the
	 * store is lost to this process (GP_ESTOPPED, GP_EFENCED,
	 * GP_ETIMEDOUT): the commit fails with it, so that the batch
	 * is answered as not committed, even one that wrote nothing (a
	 * submission whose key could not be read).
	 */
	int doomed;
	size_t nsent;	   /* log[0, nsent) ran on the server */
	int64_t batch_seq; /* the last batch committed (gp_batch) */
	struct logged *log;
	size_t nlog, caplog;
	int64_t failing_since; /* mono ms of the first failure, 0 none */
	int tries;
};

static inline struct pg_store *
pg_store_of(struct gp_store *s)
{
	return (struct pg_store *)s;
}

/* A statement's parameters as text (numbers formatted into num). */
struct params {
	int n;
	const char *v[MAX_PARAMS];
	char num[MAX_PARAMS][32];
};

/* store_pg.c */
int pg_store_run(struct gp_store *gs, int64_t *changed, const char *sql,
    const char *fmt, ...);
int pg_store_query(struct pg_store *s, PGresult **out, const char *sql,
    const char *fmt, ...);
int64_t col_int(const PGresult *r, int row, int col);

/* store_pg_meta.c: the blob users' records (store_meta.h) */
int pg_meta_open(struct gp_store *gs, enum gp_meta_area area,
    const char *data_dir, struct gp_meta **out);
/* Pure: sql's `?` and `?N` as $N, quoted text kept; malloc'd or NULL. */
char *pg_meta_translate(const char *sql);

/* store_pg_ledger.c */
int pg_ledger_put_group(struct gp_store *s, int64_t id, const char *name,
    int64_t weight, int64_t created_ms);
int pg_ledger_put_member(struct gp_store *s, const char *user,
    int64_t group_id, int64_t pos);
int pg_ledger_delete_member(struct gp_store *s, const char *user,
    int64_t group_id);
int pg_ledger_put_price(struct gp_store *s, const char *cls, int64_t micro);
int pg_ledger_delete_price(struct gp_store *s, const char *cls);
int pg_ledger_put_budget(struct gp_store *s, const char *kind, const char *name,
    int64_t amount, const char *period);
int pg_ledger_delete_budget(struct gp_store *s, const char *kind,
    const char *name);
int pg_ledger_put_decay(struct gp_store *s, const char *kind, const char *name,
    const struct acct_decay *d);
int pg_ledger_post(struct gp_store *s, const struct acct_posting *p);
int pg_ledger_load(struct gp_store *gs, const struct store_ledger_loader *l);
int pg_ledger_spent(struct gp_store *gs, const char *kind, const char *name,
    int64_t group_id, int64_t since_ms, int64_t *spent);
int pg_ledger_attempt(struct gp_store *gs, int64_t job_id, int attempt,
    int part, struct store_attempt_sum *out);
int pg_ledger_usage(struct gp_store *gs, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_usage_row *r), void *arg,
    char *err, size_t errlen);
int pg_ledger_postings(struct gp_store *gs, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_posting_row *r), void *arg,
    char *err, size_t errlen);

#endif
