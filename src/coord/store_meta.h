/*
 * store_meta.h: the blob users' records behind the storage interface
 * (issue 19): the tables of checkpoints (ckpt.c), data sets, uploads and
 * job outputs (data*.c) and images (image.c), which say what the blob
 * store's files mean and what its GC keeps. A store opens one connection
 * per user (gp_store_ops.meta_open); each user keeps its own lock and
 * runs its SQL through the calls below, never through a database's own
 * API, so that the same code runs on both stores:
 *
 *   SQLite (store_sqlite_meta.c): the files the pool always had,
 *     DATA/checkpoints.db (checkpoints, and data on a connection of its
 *     own) and DATA/images.db, their tables renamed gp_* on open (an older
 *     data directory is migrated in place). They stay apart from
 *     state.db because SQLite has one writer per file: a checkpoint's
 *     commit (an fsync) or a GC scan must never hold the state thread's
 *     group commit back.
 *   PostgreSQL (store_pg_meta.c): the same tables in the pool's database
 *     (pg.c's schema 2), so that a new leader sees what the old one
 *     recorded; every write transaction is fenced with the leader's epoch
 *     as the state's are (a fenced coordinator steps down).
 *
 * THE SQL. One text for both: `?` or `?N` parameters (PostgreSQL's $N are
 * made from them), "user" quoted (a reserved word in PostgreSQL), upserts
 * as INSERT ... ON CONFLICT (...) DO UPDATE/NOTHING, new ids with
 * RETURNING, no SQLite-only function. Integers are 64-bit on both sides.
 *
 * Binds (gp_meta_run, gp_meta_query, gp_meta_query_int), one letter per
 * parameter, in order, as sqlite_util.h's:
 *   i  int          I  int64_t        d  double
 *   t, s  const char * (NULL binds NULL)
 *   n  (no argument) NULL
 *
 * Threading: a struct gp_meta is used by one thread at a time (its
 * user's lock). Errors: 0 or a negative GP_E* code, the reason in
 * m->error and logged once. Transactions: gp_meta_transact (a body run
 * again after a fault a retry cures), or gp_meta_begin ... commit or
 * rollback; a write outside one is its own transaction (fenced too). A
 * statement that fails inside a transaction fails it: the later ones
 * are not run and the commit rolls back (both return that failure).
 *
 * Faults (PostgreSQL; SQLite has none of these): a lost connection, a
 * database that refuses writes for a while (read-only) or a
 * serialization failure is retried with back-off on a new connection,
 * as the state thread's batches are, for as long as this coordinator's
 * epoch is unchanged and at most 120 s: a statement outside a
 * transaction by the implementation itself, a transaction by
 * gp_meta_transact running its body again from the start. A COMMIT
 * whose answer was lost is asked about (txid_status), never run twice.
 * Nothing is answered before its commit: the caller sees 0 only then.
 * Given up: GP_EFENCED when this coordinator no longer leads (m->error
 * says so; it is stepping down), GP_ETIMEDOUT when the database stayed
 * away for the whole time.
 */
#ifndef GP_COORD_STORE_META_H
#define GP_COORD_STORE_META_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Whose tables a connection is for. */
enum gp_meta_area {
	GP_META_CHECKPOINTS, /* gp_ckpt_versions, gp_ckpt_next_version */
	GP_META_DATA,	     /* gp_data_* */
	GP_META_IMAGES,	     /* gp_image_* */
};

struct gp_meta;
struct gp_meta_rows;

/* What an implementation provides (the wrappers below call it). */
struct gp_meta_ops {
	void (*close)(struct gp_meta *m);
	int (*begin)(struct gp_meta *m);
	int (*commit)(struct gp_meta *m);
	int (*rollback)(struct gp_meta *m);
	/* Runs sql to its end; OUT: *changes, the rows it changed. */
	int (*run)(struct gp_meta *m, const char *sql, const char *fmt,
	    va_list ap, int64_t *changes);
	/* Runs sql; OUT: *out, its rows (done frees them). */
	int (*query)(struct gp_meta *m, const char *sql, const char *fmt,
	    va_list ap, struct gp_meta_rows **out);
	/* 1 a row, 0 the end, or a GP_E* code. */
	int (*next)(struct gp_meta_rows *r);
	int (*is_null)(struct gp_meta_rows *r, int col);
	int64_t (*integer)(struct gp_meta_rows *r, int col);
	double (*real)(struct gp_meta_rows *r, int col);
	const char *(*text)(struct gp_meta_rows *r, int col); /* never NULL */
	void (*done)(struct gp_meta_rows *r);
	/* 0 while this coordinator may write (see gp_meta_fence). */
	int (*fence)(struct gp_meta *m);
	/*
	 * After a transaction that failed with rc (rolled back): 0 when a
	 * retry may cure it, after its back-off and with the connection
	 * made again (gp_meta_transact runs the body again); else the code
	 * to give up with, the reason in m->error. NULL: never retried.
	 */
	int (*retry)(struct gp_meta *m, int rc);
};

/* The part every implementation's connection has (its first member). */
struct gp_meta {
	const struct gp_meta_ops *ops;
	char what[32];	  /* "checkpoints", "data", "images": for logs */
	char error[256];  /* the last failure's reason */
	int64_t changes;  /* rows changed by the last gp_meta_run */
	int in_tx;	  /* between gp_meta_begin and commit/rollback */
	int failed;	  /* in one: the first statement's failure, 0 none */
	/*
	 * 1: a statement outside a transaction and gp_meta_fence are
	 * tried once, never waited for (the GC's scans, under their
	 * store's lock: a pass is skipped rather than hold every upload
	 * while the database is away). Set and cleared by the user under
	 * its own lock.
	 */
	int impatient;
};

/* A query's rows: the connection they came from (first member). */
struct gp_meta_rows {
	struct gp_meta *m;
};

/*
 * Opens the connection for area's tables on the coordinator's store
 * (state.store; data_dir: where SQLite keeps its files). OUT: *out, closed
 * by gp_meta_close. 0 or a GP_E* code (logged).
 */
int gp_meta_open(enum gp_meta_area area, const char *data_dir,
    struct gp_meta **out);
void gp_meta_close(struct gp_meta *m); /* NULL is fine */

/*
 * One transaction: begins, runs body(m, arg), commits when it returns 0
 * and rolls back otherwise. body returns 0 (commit), a positive value of
 * its own (rolled back and returned as is: a refusal it decided), or a
 * GP_E* code. When a statement of it failed, or the commit did, with a
 * fault that a retry may cure (ops->retry), the body runs again from the
 * start: it must be safe to run more than once (whatever it keeps in
 * arg is set again by each run; nothing outside the transaction is done
 * before it returns). 0 once committed, body's positive value, or a
 * GP_E* code (GP_EFENCED, GP_ETIMEDOUT: see "Faults" above).
 */
int gp_meta_transact(struct gp_meta *m,
    int (*body)(struct gp_meta *m, void *arg), void *arg);
int gp_meta_begin(struct gp_meta *m);
int gp_meta_commit(struct gp_meta *m);
int gp_meta_rollback(struct gp_meta *m); /* outside one: 0 */
/* Runs a statement that gives no rows. 0 or a GP_E* code. */
int gp_meta_run(struct gp_meta *m, const char *sql, const char *fmt, ...);
/* The rows the last gp_meta_run changed. */
int64_t gp_meta_changes(const struct gp_meta *m);
/*
 * Runs a query. OUT: *out on success only: read it with gp_meta_next
 * and the column calls, then gp_meta_done. 0 or a GP_E* code.
 */
int gp_meta_query(struct gp_meta *m, struct gp_meta_rows **out,
    const char *sql, const char *fmt, ...);
/* gp_meta_query with its parameters as a va_list. */
int gp_meta_vquery(struct gp_meta *m, struct gp_meta_rows **out,
    const char *sql, const char *fmt, va_list ap);
/* 1 a row, 0 the end, or a GP_E* code. */
int gp_meta_next(struct gp_meta_rows *r);
int gp_meta_null(struct gp_meta_rows *r, int col);
int64_t gp_meta_int(struct gp_meta_rows *r, int col);
double gp_meta_real(struct gp_meta_rows *r, int col);
/* A text column, "" for NULL; valid until the next gp_meta_next. */
const char *gp_meta_text(struct gp_meta_rows *r, int col);
void gp_meta_done(struct gp_meta_rows *r); /* NULL is fine */
/*
 * The first column of the first row as an integer: 1 (OUT *out), 0 no
 * row (*out untouched), or a GP_E* code.
 */
int gp_meta_query_int(struct gp_meta *m, const char *sql, int64_t *out,
    const char *fmt, ...);
/* The last failure's reason (never NULL). */
const char *gp_meta_error(const struct gp_meta *m);
/*
 * The HTTP status for a request whose records failed with rc: 503 when
 * the client may try again (elsewhere: GP_EFENCED; later: the database
 * away, GP_ETIMEDOUT, GP_ECONN, GP_EPERM), else 500. Pure.
 */
int gp_meta_http_status(int rc);
/*
 * 0 when this coordinator still leads the pool: PostgreSQL runs an empty
 * fenced transaction (a coordinator that another one fenced off steps
 * down there and then, as on any fenced write); SQLite has one
 * coordinator, always 0. The blob users call it after collecting their
 * references, so that a GC pass removes nothing on a coordinator that no
 * longer leads (a paused leader that comes back).
 */
int gp_meta_fence(struct gp_meta *m);

/*
 * The blob GC's scans and fence, the same for every blob user (ckpt.c,
 * data.c, image.c; blob_lock held): _begin takes the user's own lock
 * and makes its connection impatient (each statement tried once, never
 * waited for, so that a pass is skipped rather than hold every upload of
 * the store while the database is away); _end undoes both. *m is read
 * under lock: NULL once the user has stopped (its calls then fail
 * GP_EIO). _fence is gp_meta_fence between the two (GP_EIO when *m is
 * NULL): a blob_user's fence.
 */
void gp_meta_scan_begin(pthread_mutex_t *lock, struct gp_meta *const *m);
void gp_meta_scan_end(pthread_mutex_t *lock, struct gp_meta *const *m);
int gp_meta_scan_fence(pthread_mutex_t *lock, struct gp_meta *const *m);

/*
 * For implementations and `coordinator migrate`: where SQLite keeps an
 * area's tables (DATA/checkpoints.db or DATA/images.db), into out.
 */
void gp_meta_sqlite_path(enum gp_meta_area area, const char *data_dir,
    char *out, size_t len);
/* The SQLite implementation (store_sqlite_meta.c): opens path. */
int gp_meta_sqlite_open(enum gp_meta_area area, const char *path,
    struct gp_meta **out);

#endif
