/*
 * store.h: the storage interface of the coordinator's durable state (the
 * model's rows, the ledger, submit keys): one operations table, struct
 * gp_store_ops, as the agent's executors (executor.h) and GPU backends
 * (gpu.h) have. SQLite (store_sqlite.c, store_sqlite_ledger.c) is its
 * first implementation; a PostgreSQL one plugs in the same way (see
 * "Writing a store" below and docs/architecture.md).
 *
 * The blob users' records (checkpoints, data sets, images) are behind it
 * too, through connections of their own (meta_open, store_meta.h).
 *
 * Choosing one (gp_store_open): `--db` takes
 *   PATH or sqlite:PATH       a SQLite file;
 *   postgresql://... postgres://...   PostgreSQL (store_pg.c);
 *   nothing                   DATA_DIR/state.db (the default).
 *
 * THE CONTRACT
 *
 * Threading. The state thread owns the handle: open, close, the
 * transactions, every put and delete, load, ledger_load, ledger_spent
 * and ledger_attempt are called from it only (or, at start-up and in
 * tests, from the one thread that opened the store, before the state
 * thread runs). Three families may be called from any thread, at any
 * time between open and close, concurrently with the state thread and
 * with each other: read_job, read_job_brief, ledger_usage and
 * ledger_postings; the implementation serializes them itself (SQLite: a
 * read-only connection of its own behind a mutex; PostgreSQL: a
 * connection of its own) and they see only committed rows.
 *
 * Transactions. Every write happens between begin and commit (or
 * rollback); a write outside one is a bug (an implementation may refuse
 * it with GP_EINVAL). One batch of the state thread is one transaction
 * (group commit: every change of the batch is durable, fsynced, when
 * commit returns 0, and none is when it fails). Transactions do not
 * nest. After a failed write inside a transaction the caller rolls back
 * (the state thread then stops: its memory is ahead of the store).
 * rollback outside a transaction is a no-op returning 0.
 *
 * Errors. Every operation returns 0 (or what its comment says) or a
 * negative GP_E* code: GP_EIO (the database failed), GP_ENOMEM,
 * GP_ENOENT (no such row, where the comment says), GP_ECONFLICT (a
 * uniqueness constraint: e.g. a second posting of one attempt and seq),
 * GP_ETIMEDOUT (the database was busy or unreachable for too long),
 * GP_EINVAL (a misuse). The reason is in gp_store_error(s) (the last
 * failure of the state thread's operations; the any-thread families put
 * theirs in their err argument or log it) and logged once, by the
 * implementation, as one line.
 *
 * Ownership. Arguments are borrowed for the call: an implementation
 * copies what it keeps. What load hands to its callbacks is the
 * callee's (malloc'd job, node, token: the state frees them as its
 * own). read_job's *out is the caller's (state_job_stored_free).
 *
 * Identity. Every store carries a schema version (GP_STORE_SCHEMA,
 * checked at open: a store newer than this build is refused with
 * GP_EPROTO) and a pool id: 32 random hex digits written when the store
 * is created and never changed. The coordinator keeps the pool id of
 * its store in DATA_DIR/pool_id too and refuses to start when the two
 * differ (gp_store_check_pool): a coordinator pointed at another pool's
 * database stops instead of handing out that pool's jobs.
 *
 * WRITING A STORE. One file (store_NAME.c) defines a const struct
 * gp_store_ops with every member set, and a struct whose first member
 * is struct gp_store; gp_store_open (store.c) picks it by the target's
 * scheme. The job's and node's columns are encoded by the shared codec
 * below (store_job_encode / store_job_decode, store_node_gpus_*), so
 * that every store keeps the same text; tests/unit/test_store.c runs
 * its checks through the table.
 */
#ifndef GP_COORD_STORE_H
#define GP_COORD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "acct.h"
#include "ledger.h"
#include "state.h"
#include "store_meta.h"

/* The schema this build writes and reads (meta.schema_version). */
#define GP_STORE_SCHEMA      2
#define GP_STORE_POOL_ID_LEN 32

struct gp_store_ops;

/* The part of a store every implementation has (its first member). */
struct gp_store {
	const struct gp_store_ops *ops;
	char target[256]; /* as given, without a password */
	char pool_id[GP_STORE_POOL_ID_LEN + 1];
	int schema_version; /* the store's, after open */
	char error[256];    /* the last failure's reason */
	/*
	 * After a failed commit: 1 when its COMMIT was sent and its answer
	 * lost, so that whether it committed is unknown (the batch's
	 * requests are told so, not "not committed").
	 */
	int commit_unknown;
};

/* What load hands over, one callback per row; arg is the loader's. */
struct store_loader {
	void *arg;
	void (*token)(void *arg, struct token_entry *token);
	void (*node)(void *arg, struct node *node);
	void (*job)(void *arg, struct job *job);
};

/*
 * What ledger_load hands over (the ledger's tables, in this order:
 * groups by id, members by pos, prices, budgets, decayed usage, the
 * accounts' running totals). A callback returns 0 or a GP_E* code,
 * which stops the load and is returned by it.
 */
struct store_ledger_loader {
	void *arg;
	int (*group)(void *arg, int64_t id, const char *name, int64_t weight,
	    int64_t created_ms);
	int (*member)(void *arg, const char *user, int64_t group_id,
	    int64_t pos);
	int (*price)(void *arg, const char *cls, int64_t micro);
	/* kind "user" or "group"; period as acct_period_name */
	int (*budget)(void *arg, const char *kind, const char *name,
	    int64_t amount, const char *period);
	int (*decay)(void *arg, const char *kind, const char *name,
	    const struct acct_decay *usage);
	/* account "user" or "provider" */
	int (*total)(void *arg, const char *account, const char *name,
	    int64_t group_id, int64_t amount, int64_t gpu_ms, int64_t postings);
};

/* The postings of one attempt (and part) summed (ledger_attempt). */
struct store_attempt_sum {
	int64_t count;   /* postings */
	int64_t max_seq; /* -1: none */
	int64_t amount;  /* micro-credits */
	int64_t gpu_ms;
	int64_t max_to_ms; /* 0: none */
};

/* One row of usage: an account's entries summed (ledger_usage). */
struct store_usage_row {
	const char *account; /* "user" or "provider" */
	const char *name;
	const char *group; /* its group's name, "?" unknown */
	int64_t amount, gpu_ms, postings;
};

/* One posting with its two entries (ledger_postings). */
struct store_posting_row {
	int64_t id, job_id;
	int attempt, seq, final, part;
	int64_t at_ms, from_ms, to_ms;
	const char *node; /* its name, "?" unknown */
	int64_t amount, gpu_ms;
	const char *user, *user_group, *provider, *provider_group;
};

struct gp_store_ops {
	const char *name; /* "sqlite", "postgresql" */

	/* ---- life ---- */

	/*
	 * Opens (creating when missing: schema, pool id) the store at
	 * target (the implementation's part of --db: a path, a URL).
	 * OUT: *out on success only. On failure err says why.
	 */
	int (*open)(const char *target, struct gp_store **out, char *err,
	    size_t errlen);
	/* Closes and frees; NULL is fine. No call may be in flight. */
	void (*close)(struct gp_store *s);

	/* ---- transactions (see the contract) ---- */
	int (*begin)(struct gp_store *s);
	int (*commit)(struct gp_store *s);
	int (*rollback)(struct gp_store *s);

	/* ---- the model ---- */

	/* Inserts or replaces the job's row (its id is the key). */
	int (*put_job)(struct gp_store *s, const struct job *job);
	/*
	 * A job array as submitted, one row (its tasks' ids are first,
	 * first + 1 ...; tasks: their indices; spec: the array's, with
	 * array_job_id set): its tasks have no rows of their own until they
	 * change (put_job). load hands on the tasks without rows as queued
	 * jobs.
	 */
	int (*put_array)(struct gp_store *s, int64_t first, const char *user,
	    const struct gp_jobspec *spec, const int *tasks, int ntasks,
	    int64_t submitted_ms);
	/* Inserts or replaces the node's row. */
	int (*put_node)(struct gp_store *s, const struct node *node);
	/* Inserts a token (its id is new: GP_ECONFLICT when not). */
	int (*put_token)(struct gp_store *s, const struct token_entry *token,
	    int64_t created_ms);
	/* A token's group (gpupool group move --provider). */
	int (*set_token_group)(struct gp_store *s, int64_t token_id,
	    int64_t group_id);
	/* Deletes token id; ids up to it are never given again. */
	int (*delete_token)(struct gp_store *s, int64_t id);
	/* OUT: *next: the lowest id a new token may take (0: none set). */
	int (*token_id_floor)(struct gp_store *s, int64_t *next);
	/*
	 * Hands every row to the loader (tokens, nodes by id, jobs by id
	 * with the array tasks that have no rows), except the jobs that
	 * finished before finished_before (ms since the epoch; 0: none):
	 * those stay in the store, counted in skipped[state]. OUT:
	 * *max_job_id, the highest job id the store holds (skipped or not:
	 * ids are never given twice).
	 */
	int (*load)(struct gp_store *s, const struct store_loader *loader,
	    int64_t finished_before, int64_t *skipped, int64_t *max_job_id);
	/*
	 * Any thread. Reads job id's committed row back (a job that left
	 * memory): *out a malloc'd job (state_job_stored_free). 0,
	 * GP_ENOENT, GP_ENOMEM or GP_EIO.
	 */
	int (*read_job)(struct gp_store *s, int64_t id, struct job **out);
	/* Any thread. Only user (GP_NAME_MAX + 1), state and finished_ms. */
	int (*read_job_brief)(struct gp_store *s, int64_t id, char *user,
	    int *state, int64_t *finished_ms);

	/* ---- submit keys (idempotent submits, docs/api.md) ---- */

	/*
	 * 1 with *job_id and *count when user's key made a job since
	 * since_ms (count 0: one job; n: an array of n tasks, job_id its
	 * first); 0 when not; or a GP_E* code.
	 */
	int (*submit_key_find)(struct gp_store *s, const char *user,
	    const char *key, int64_t since_ms, int64_t *job_id, int64_t *count);
	/*
	 * Records user's key (replacing an older one) and deletes the keys
	 * made before prune_before_ms (0: none).
	 */
	int (*submit_key_put)(struct gp_store *s, const char *user,
	    const char *key, int64_t job_id, int64_t count, int64_t now_ms,
	    int64_t prune_before_ms);

	/* ---- the ledger's writes (ledger.c keeps the memory side) ---- */

	int (*ledger_put_group)(struct gp_store *s, int64_t id,
	    const char *name, int64_t weight, int64_t created_ms);
	int (*ledger_put_member)(struct gp_store *s, const char *user,
	    int64_t group_id, int64_t pos);
	/* group_id 0: every membership of the user. */
	int (*ledger_delete_member)(struct gp_store *s, const char *user,
	    int64_t group_id);
	int (*ledger_put_price)(struct gp_store *s, const char *cls,
	    int64_t micro);
	/* cls NULL: every price. Classes compare without case. */
	int (*ledger_delete_price)(struct gp_store *s, const char *cls);
	/* kind "user" or "group"; period as acct_period_name. */
	int (*ledger_put_budget)(struct gp_store *s, const char *kind,
	    const char *name, int64_t amount, const char *period);
	int (*ledger_delete_budget)(struct gp_store *s, const char *kind,
	    const char *name);
	/* kind "user" or "group". */
	int (*ledger_put_decay)(struct gp_store *s, const char *kind,
	    const char *name, const struct acct_decay *usage);
	/*
	 * The posting, its two entries (the user's debit -amount, the
	 * provider's credit) and both accounts' running totals, all or
	 * nothing within the transaction. GP_ECONFLICT when (job_id,
	 * attempt, seq) was posted already: never twice.
	 */
	int (*ledger_post)(struct gp_store *s, const struct acct_posting *p);

	/* ---- the ledger's reads ---- */

	int (*ledger_load)(struct gp_store *s,
	    const struct store_ledger_loader *loader);
	/*
	 * What a user (kind "user": name) or a group (kind "group":
	 * group_id) was debited since since_ms, as a positive amount.
	 */
	int (*ledger_spent)(struct gp_store *s, const char *kind,
	    const char *name, int64_t group_id, int64_t since_ms,
	    int64_t *spent);
	/* The postings of (job_id, attempt), of one part (-1: every part). */
	int (*ledger_attempt)(struct gp_store *s, int64_t job_id, int attempt,
	    int part, struct store_attempt_sum *out);
	/*
	 * Any thread. Usage (GET /v1/usage): the entries matching f summed
	 * per account, name and group, ordered by account, name, group; and
	 * the postings (GET /v1/ledger): the newest f->limit (0: 100)
	 * matching f, newest first. row returns 0 to go on. On failure err
	 * says why.
	 */
	int (*ledger_usage)(struct gp_store *s, const struct ledger_filter *f,
	    int (*row)(void *arg, const struct store_usage_row *r), void *arg,
	    char *err, size_t errlen);
	int (*ledger_postings)(struct gp_store *s,
	    const struct ledger_filter *f,
	    int (*row)(void *arg, const struct store_posting_row *r), void *arg,
	    char *err, size_t errlen);

	/* ---- the blob users' records (store_meta.h) ---- */

	/*
	 * Any thread, between open and close. A new connection to area's
	 * tables (checkpoints, data sets and outputs, images), kept by its
	 * user with its own lock (store_meta.h): SQLite opens the area's
	 * file in data_dir, PostgreSQL a connection to the pool's database
	 * whose writes are fenced as the state thread's. OUT: *out on
	 * success only. 0 or a GP_E* code (logged).
	 */
	int (*meta_open)(struct gp_store *s, enum gp_meta_area area,
	    const char *data_dir, struct gp_meta **out);
};

/* store.c: choosing, identity, the shared codec */

/*
 * Opens the store --db names (NULL or "": data_dir/state.db). OUT: *out.
 * postgresql:// without PostgreSQL built in: GP_EINVAL with err saying
 * so. Other failures: the implementation's code and err.
 */
int gp_store_open(const char *db, const char *data_dir, struct gp_store **out,
    char *err, size_t errlen);
/* Closes s (NULL is fine). */
void gp_store_close(struct gp_store *s);
/*
 * Compares s's pool id with data_dir/pool_id, writing the file when it
 * is missing. 0, or GP_ECONFLICT (another pool's store: err says which
 * two) or GP_EIO.
 */
int gp_store_check_pool(struct gp_store *s, const char *data_dir, char *err,
    size_t errlen);
/* The last failure's reason (never NULL). */
const char *gp_store_error(const struct gp_store *s);
/* For implementations: sets s->error (printf-style); returns code. */
int gp_store_fail(struct gp_store *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* For implementations: 32 random hex digits (a new pool id). */
void gp_store_new_pool_id(char out[GP_STORE_POOL_ID_LEN + 1]);

/*
 * The job's text columns, the same in every store: spec (the jobspec's
 * JSON), gpus (a JSON array of indices), history (the attempts' records,
 * the current one with its parts and meters). malloc'd; free with
 * store_job_text_free. 0 or GP_ENOMEM.
 */
struct store_job_text {
	char *spec, *gpus, *history;
};
int store_job_encode(const struct job *job, struct store_job_text *out);
void store_job_text_free(struct store_job_text *t);

/* A job's row as a store reads it back (text borrowed for the call). */
struct store_job_row {
	int64_t id;
	const char *user, *spec;
	int state, cancel_requested, attempts;
	int64_t node_id;
	const char *gpus;
	int64_t submitted_ms, started_ms, finished_ms;
	int has_exit, exit_code, signal;
	const char *reason, *message, *history;
	int64_t log_base;
	int log_truncated;
};
/* A malloc'd job (state_job_stored_free), or NULL (out of memory). */
struct job *store_job_decode(const struct store_job_row *row);
/* A job row left in the store at load (finished before the cut). */
int store_job_row_skipped(int state, int64_t finished_ms,
    int64_t finished_before);

/* A node's GPUs as JSON text (malloc'd) and back into node (0/GP_E*). */
char *store_node_gpus_encode(const struct node *node);
int store_node_gpus_decode(const char *text, struct node *node);
/* An array's task indices as JSON text (malloc'd). */
char *store_array_tasks_encode(const int *tasks, int ntasks);
/*
 * The array rows of a load, merged into the jobs' id order: a task
 * without a row of its own is handed on as it was made (queued, the
 * array's spec with its index), so that the queue comes back in order.
 * A store adds every array row (ascending ids) first, then calls
 * store_arrays_before(id) before handing on the job row id, and
 * store_arrays_before(INT64_MAX) at the end. 0 or GP_ENOMEM.
 */
struct store_arrays;
struct store_arrays *store_arrays_new(void);
int store_arrays_add(struct store_arrays *a, int64_t first, const char *user,
    const char *spec, const char *tasks, int64_t submitted_ms);
/* The highest task id of the arrays added (0: none). */
int64_t store_arrays_max_id(const struct store_arrays *a);
int store_arrays_before(struct store_arrays *a, int64_t id,
    const struct store_loader *loader);
void store_arrays_free(struct store_arrays *a);

/* The SQLite store (store_sqlite.c). */
extern const struct gp_store_ops gp_store_sqlite_ops;
/* The PostgreSQL store (store_pg.c). */
extern const struct gp_store_ops gp_store_pg_ops;

#endif
