/*
 * pg.h: the coordinator's PostgreSQL connections (libpq), pg.c: connecting
 * with back-off, telling a lost connection from a refused statement, the
 * schema's versions and their migrations, and the pool id that keeps a
 * coordinator off another pool's database. store_pg.c (the state's
 * operations over it) and `coordinator migrate` build on it.
 *
 * Tables are all named gp_*, so that the pool can share a database with
 * others. gp_leader is the leader election's (leader.c): its fencing epoch
 * is checked by every write transaction of store_pg.c.
 */
#ifndef GP_COORD_PG_H
#define GP_COORD_PG_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

/* The schema this coordinator writes; it migrates older ones up to it. */
#define PG_SCHEMA_VERSION 2

/*
 * The advisory lock (transaction-scoped) that migrations take, so that
 * two coordinators starting together migrate once. The leader election
 * uses other keys.
 */
#define PG_MIGRATE_LOCK 0x67705f6d6967LL /* "gp_mig" */

/* A pool id: 32 hex digits and the NUL. */
#define PG_POOL_ID_LEN 33

/* One connection and what it takes to make it again. */
struct pg_conn {
	PGconn *conn;
	char *url;	       /* as given: may hold a password, never logged */
	char where[160];       /* user@host:port/db, for the logs */
	int failures;	       /* connection attempts failed in a row */
	char error[512];       /* the last failure, one line, no secret */
};

/*
 * Connects to url (a libpq connection string or postgresql:// URI),
 * retrying with back-off (pg_backoff_ms) for at most wait_ms (0: one
 * try); each try gives up after connect_timeout (5 s unless the URL says).
 * OUT: *out, freed by pg_close. 0, GP_ECONN (logged, with libpq's reason),
 * GP_ENOMEM, or GP_EINVAL for a string libpq cannot read (at once, no
 * retry). On GP_ECONN and GP_EINVAL *out is set too, for its error
 * (c->error): the caller closes it either way.
 */
int pg_connect(const char *url, int64_t wait_ms, struct pg_conn **out);
void pg_close(struct pg_conn *c);
/*
 * The leader lease (leader.c), set once at start before any connection:
 * every session pg_connect makes from then on has
 * idle_in_transaction_session_timeout = ms, so that a coordinator paused
 * (SIGSTOP, a frozen VM) with a transaction open has it aborted by the
 * server, and its locks released (gp_fence's row lock on gp_leader,
 * which the standby's epoch raise waits on), no later than the server
 * cuts its lock session; and client_connection_check_interval, so that a
 * session whose client went away during a long statement or lock wait
 * ends. Normal work never idles in a transaction for that long (state
 * batches and the blob users' transactions run their statements back to
 * back); a session cut this way is a lost connection, retried as any.
 * 0 (the default, `coordinator migrate`): neither is set.
 */
void pg_set_session_lease(int64_t ms);
/*
 * The process is stopping (SIGTERM, or the lead lost): from now on a
 * write that fails is not retried, the transaction held in retry gives
 * up at once (GP_ESTOPPED) so that its requests are answered "not
 * committed" instead of waiting out the retry window (store_pg.c,
 * store_pg_meta.c). Writes that succeed still commit. Any thread.
 */
void pg_stop_retrying(void);
/* 1 once pg_stop_retrying was called. */
int pg_retrying_stopped(void);
/*
 * Sleeps ms (a retry's back-off), waking at most 50 ms after
 * pg_stop_retrying. 1 when it woke for that, else 0.
 */
int pg_retry_nap(int64_t ms);
/*
 * Makes the connection again when it was lost (PQstatus bad), retrying as
 * pg_connect does for at most wait_ms. 0 or GP_ECONN.
 */
int pg_reconnect(struct pg_conn *c, int64_t wait_ms);

/*
 * What a failed result means (also in c->error), logged once with what (no parameters, no
 * secrets): GP_ECONN when the connection or the server went away (try
 * again after pg_reconnect), GP_EPERM when the database refuses writes
 * (read-only: a standby, or default_transaction_read_only; try again
 * later), GP_ECONFLICT for a serialization failure or a deadlock (try
 * again), GP_EFENCED when gp_fence found another coordinator's epoch
 * (never try again: step down), GP_EIO for anything else. r may be NULL (PQexec's out of
 * memory, or the connection lost before a result).
 */
int pg_result_error(struct pg_conn *c, const PGresult *r, const char *what);
/* The same classification from a SQLSTATE alone (pure; sqlstate may be NULL). */
int pg_sqlstate_error(const char *sqlstate);

/*
 * After a fence refused c's write (GP_EFENCED): the URL of the
 * coordinator that leads now (gp_leader.addr) into out, "" when it
 * cannot be read (one statement on c, when c is connected).
 */
void pg_leader_addr(struct pg_conn *c, char *out, size_t len);

/*
 * Runs sql (one or more statements, no parameters, no rows wanted).
 * 0 or pg_result_error's codes.
 */
int pg_exec(struct pg_conn *c, const char *sql, const char *what);

/*
 * Creates the schema in an empty database or migrates an older one up to
 * PG_SCHEMA_VERSION (one transaction under PG_MIGRATE_LOCK), then checks
 * the pool: pool_id (IN, may be NULL or "") is the pool this coordinator
 * belongs to (its DATA/pool.id); a fresh database takes it (or a new
 * random one when NULL), a database of another pool is refused
 * (GP_ECONFLICT, logged with both ids). OUT: pool_out (PG_POOL_ID_LEN),
 * the database's pool id. A database whose schema is newer than this
 * coordinator's is refused (GP_EPROTO: upgrade gpupool). Other errors:
 * pg_result_error's. c->error says why, on one line.
 */
int pg_schema_open(struct pg_conn *c, const char *pool_id, char *pool_out);
/* OUT: *version, the database's schema version (0: none yet). */
int pg_schema_version(struct pg_conn *c, int *version);

/*
 * Pure helpers (tests/unit/test_pg.c). pg_backoff_ms: the wait before try
 * n + 1 after n failures: 100 ms doubled each time, at most 5 s.
 * pg_url_redact: url with any password replaced by "***" (in a URI's
 * user:password@ and in password= parameters), for the logs; out is
 * always terminated. pg_pool_id_valid: 32 lowercase hex digits.
 */
int64_t pg_backoff_ms(int failures);
void pg_url_redact(const char *url, char *out, size_t n);
int pg_pool_id_valid(const char *id);

#endif
