/*
 * store_sqlite.h: what the SQLite store's two files share
 * (store_sqlite.c: the model, submit keys, opening; store_sqlite_ledger.c:
 * the ledger's tables). Nothing outside them includes it.
 */
#ifndef GP_COORD_STORE_SQLITE_H
#define GP_COORD_STORE_SQLITE_H

#include <pthread.h>

#include "sqlite_util.h"
#include "store.h"

struct sqlite_store {
	struct gp_store base; /* first: a struct gp_store * is one of us */
	struct gp_sqlite w;   /* the state thread's connection */
	struct gp_sqlite r;   /* read-only, any thread, under rlock */
	pthread_mutex_t rlock;
};

static inline struct sqlite_store *
sqlite_store_of(struct gp_store *s)
{
	return (struct sqlite_store *)s;
}

/* A failure of connection db: its text into s->error; returns code. */
int sqlite_store_fail(struct sqlite_store *s, struct gp_sqlite *db, int code);

/*
 * Prepares sql (cached) on the state thread's connection, binds fmt
 * (sqlite_util.h), steps to the end. 0 or a GP_E* code (in s->error).
 */
int sqlite_store_run(struct gp_store *s, const char *sql, const char *fmt, ...);

/* store_sqlite_ledger.c */
extern const char sqlite_ledger_schema[];
/* Columns and tables added since the ledger's first schema. */
int sqlite_ledger_migrate(struct sqlite_store *s);
int sqlite_ledger_put_group(struct gp_store *s, int64_t id, const char *name,
    int64_t weight, int64_t created_ms);
int sqlite_ledger_put_member(struct gp_store *s, const char *user,
    int64_t group_id, int64_t pos);
int sqlite_ledger_delete_member(struct gp_store *s, const char *user,
    int64_t group_id);
int sqlite_ledger_put_price(struct gp_store *s, const char *cls, int64_t micro);
int sqlite_ledger_delete_price(struct gp_store *s, const char *cls);
int sqlite_ledger_put_budget(struct gp_store *s, const char *kind,
    const char *name, int64_t amount, const char *period);
int sqlite_ledger_delete_budget(struct gp_store *s, const char *kind,
    const char *name);
int sqlite_ledger_put_decay(struct gp_store *s, const char *kind,
    const char *name, const struct acct_decay *usage);
int sqlite_ledger_post(struct gp_store *s, const struct acct_posting *p);
int sqlite_ledger_load(struct gp_store *s,
    const struct store_ledger_loader *loader);
int sqlite_ledger_spent(struct gp_store *s, const char *kind, const char *name,
    int64_t group_id, int64_t since_ms, int64_t *spent);
int sqlite_ledger_attempt(struct gp_store *s, int64_t job_id, int attempt,
    int part, struct store_attempt_sum *out);
int sqlite_ledger_usage(struct gp_store *s, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_usage_row *r), void *arg,
    char *err, size_t errlen);
int sqlite_ledger_postings(struct gp_store *s, const struct ledger_filter *f,
    int (*row)(void *arg, const struct store_posting_row *r), void *arg,
    char *err, size_t errlen);

#endif
