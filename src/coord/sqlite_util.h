/*
 * sqlite_util.h: the one SQLite helper of the coordinator (sqlite_util.c).
 * Every database the coordinator keeps in SQLite (state.db behind the
 * storage interface, the checkpoint, data and image databases) opens,
 * prepares, binds, steps and reports errors through it:
 *
 *   - gp_sqlite_open: the file made 0600 before SQLite sees it (its -wal
 *     and -shm files take the same mode), WAL, synchronous=FULL (a commit
 *     is on disk before it is answered), a busy timeout; other pragmas
 *     the caller adds with gp_sqlite_exec;
 *   - a cache of prepared statements keyed by their SQL text (a caller
 *     passes the same string literal every time: the look-up compares the
 *     pointer first);
 *   - gp_sqlite_run: prepare (cached), bind from a format string, step to
 *     the end, reset;
 *   - errors: 0 or a negative GP_E* code (GP_ECONFLICT for a constraint,
 *     GP_ETIMEDOUT for busy, GP_EIO for the rest), the text of the last
 *     one in gp_sqlite_errmsg and in one log line.
 *
 * Threading: a struct gp_sqlite is used by one thread at a time (the
 * caller's lock, or its only thread); with GP_SQLITE_SERIALIZED SQLite
 * itself serializes calls, but the statement cache still wants one user
 * at a time.
 *
 * Binds (gp_sqlite_bind, gp_sqlite_run, gp_sqlite_query_int), one letter
 * per parameter, in order:
 *   i  int          I  int64_t        d  double
 *   t  const char * (copied: SQLITE_TRANSIENT; NULL binds NULL)
 *   s  const char * (not copied: must outlive the step)
 *   n  (no argument) NULL
 */
#ifndef GP_COORD_SQLITE_UTIL_H
#define GP_COORD_SQLITE_UTIL_H

#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum {
	GP_SQLITE_READONLY = 1 << 0,   /* open read-only, no pragmas */
	GP_SQLITE_SERIALIZED = 1 << 1, /* SQLITE_OPEN_FULLMUTEX */
	GP_SQLITE_NO_CREATE = 1 << 2,  /* the file must exist */
};

#define GP_SQLITE_CACHE_MAX 48

struct gp_sqlite {
	sqlite3 *db;
	char what[32]; /* for logs: "state", "checkpoints", ... */
	char error[256];
	struct {
		const char *sql; /* the caller's string: compared first */
		sqlite3_stmt *stmt;
	} cache[GP_SQLITE_CACHE_MAX];
	int ncache;
};

/*
 * Opens path (flags: GP_SQLITE_*), what names it in logs. Read-write
 * opens make the file 0600 if new, set WAL and synchronous=FULL,
 * nothing else (the caller adds its own pragmas); every open sets a 5 s
 * busy timeout. 0 or GP_EIO (the
 * reason logged and in gp_sqlite_errmsg); on failure db is closed.
 */
int gp_sqlite_open(struct gp_sqlite *db, const char *path, unsigned flags,
    const char *what);
/* Finalizes the cached statements, closes. Safe on a closed one. */
void gp_sqlite_close(struct gp_sqlite *db);

/* Runs one or more statements without binds (schema, pragmas). */
int gp_sqlite_exec(struct gp_sqlite *db, const char *sql);

/*
 * The cached statement for sql, ready for binds (reset, bindings
 * cleared). NULL on a prepare error (logged). The cache owns it: never
 * finalize it; reset it when done (gp_sqlite_done, or gp_sqlite_step_done
 * and gp_sqlite_run do).
 */
sqlite3_stmt *gp_sqlite_stmt(struct gp_sqlite *db, const char *sql);
/* A statement outside the cache (dynamic SQL): the caller finalizes it. */
sqlite3_stmt *gp_sqlite_prepare(struct gp_sqlite *db, const char *sql);

/* Binds from fmt (see above), from parameter 1. 0 or GP_EINVAL. */
int gp_sqlite_bind(struct gp_sqlite *db, sqlite3_stmt *s, const char *fmt, ...);
int gp_sqlite_vbind(struct gp_sqlite *db, sqlite3_stmt *s, const char *fmt,
    va_list ap);

/*
 * Steps a statement that gives no rows to its end, then resets it and
 * clears its bindings. 0 or a GP_E* code.
 */
int gp_sqlite_step_done(struct gp_sqlite *db, sqlite3_stmt *s);
/*
 * Steps once: 1 a row (read its columns, then step again or
 * gp_sqlite_done), 0 the end, or a GP_E* code (logged).
 */
int gp_sqlite_step(struct gp_sqlite *db, sqlite3_stmt *s);
/* Resets a statement and clears its bindings. */
void gp_sqlite_done(sqlite3_stmt *s);

/* Prepares (cached), binds, steps to the end. 0 or a GP_E* code. */
int gp_sqlite_run(struct gp_sqlite *db, const char *sql, const char *fmt, ...);
/*
 * The first column of the first row as an integer: 1 (OUT *out), 0 no
 * row (*out untouched), or a GP_E* code.
 */
int gp_sqlite_query_int(struct gp_sqlite *db, const char *sql, int64_t *out,
    const char *fmt, ...);

/* BEGIN IMMEDIATE, COMMIT, ROLLBACK (cached statements). */
int gp_sqlite_begin(struct gp_sqlite *db);
int gp_sqlite_commit(struct gp_sqlite *db);
int gp_sqlite_rollback(struct gp_sqlite *db);
/* 1 inside a transaction. */
int gp_sqlite_in_transaction(struct gp_sqlite *db);

/* 1 when table has column (or table exists, column NULL), else 0. */
int gp_sqlite_has(struct gp_sqlite *db, const char *table, const char *column);

/* A text column, "" for NULL. */
const char *gp_sqlite_text(sqlite3_stmt *s, int col);
/* The last error's text (never NULL). */
const char *gp_sqlite_errmsg(const struct gp_sqlite *db);
/* A SQLite result code as a GP_E* code (SQLITE_OK: 0). */
int gp_sqlite_code(int rc);

#endif
