/*
 * submit_key.c: the idempotency keys of submissions (docs/api.md). The
 * job a user's key made is kept in state.db's submit_keys table, written
 * by the state thread in the transaction that writes the job itself, so
 * that a repeat of a submission whose answer was lost (the coordinator
 * killed, a connection cut) gets the same job id, after a kill -9 too,
 * and makes no second job. A job array's key is kept with its first id
 * and its count of tasks. A key is remembered for a day. State thread
 * only (its connection, inside its transaction).
 */
#include <sqlite3.h>
#include <stdint.h>

#include "coordd.h"
#include "gp.h"
#include "log.h"

#define KEEP_MS (24LL * 3600 * 1000)
#define PRUNE_EVERY 1024	/* puts between two prunes */

static sqlite3_stmt *find_stmt, *put_stmt, *prune_stmt;
static unsigned nputs;

/* A table of the first version (no count: single jobs only) gets one. */
static int
add_count(sqlite3 *db)
{
	sqlite3_stmt *probe;

	if (sqlite3_prepare_v2(db, "SELECT count FROM submit_keys LIMIT 0",
	    -1, &probe, NULL) == SQLITE_OK) {
		sqlite3_finalize(probe);
		return 0;
	}
	return sqlite3_exec(db, "ALTER TABLE submit_keys ADD COLUMN count "
	    "INTEGER NOT NULL DEFAULT 0", NULL, NULL, NULL) == SQLITE_OK ?
	    0 : -1;
}

static int
ready(void)
{
	sqlite3 *db = store_db();

	if (put_stmt != NULL)
		return 0;
	if (sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS submit_keys("
	    "user TEXT NOT NULL, key TEXT NOT NULL, job_id INTEGER NOT NULL,"
	    " created_ms INTEGER NOT NULL, count INTEGER NOT NULL DEFAULT 0,"
	    " PRIMARY KEY(user, key)) WITHOUT ROWID;", NULL, NULL,
	    NULL) != SQLITE_OK ||
	    add_count(db) != 0 ||
	    sqlite3_prepare_v2(db, "SELECT job_id, count FROM submit_keys "
	    "WHERE user = ? AND key = ? AND created_ms >= ?", -1, &find_stmt,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO submit_keys(user,"
	    " key, job_id, created_ms, count) VALUES(?,?,?,?,?)", -1,
	    &put_stmt, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "DELETE FROM submit_keys WHERE "
	    "created_ms < ?", -1, &prune_stmt, NULL) != SQLITE_OK) {
		gp_error("submission keys: sqlite error=\"%s\"",
		    sqlite3_errmsg(db));
		sqlite3_finalize(find_stmt);
		sqlite3_finalize(put_stmt);
		sqlite3_finalize(prune_stmt);
		find_stmt = put_stmt = prune_stmt = NULL;
		return GP_EIO;
	}
	return 0;
}

int
submit_key_find(const char *user, const char *key, int64_t now_ms,
    int64_t *job_id, int64_t *count)
{
	int rc, found = 0;

	if (ready() != 0)
		return GP_EIO;
	sqlite3_bind_text(find_stmt, 1, user, -1, SQLITE_STATIC);
	sqlite3_bind_text(find_stmt, 2, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(find_stmt, 3, now_ms - KEEP_MS);
	rc = sqlite3_step(find_stmt);
	if (rc == SQLITE_ROW) {
		*job_id = sqlite3_column_int64(find_stmt, 0);
		*count = sqlite3_column_int64(find_stmt, 1);
		found = 1;
	}
	sqlite3_reset(find_stmt);
	sqlite3_clear_bindings(find_stmt);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? found : GP_EIO;
}

int
submit_key_put(const char *user, const char *key, int64_t job_id,
    int64_t count, int64_t now_ms)
{
	int rc;

	if (ready() != 0)
		return GP_EIO;
	if (++nputs % PRUNE_EVERY == 0) {
		sqlite3_bind_int64(prune_stmt, 1, now_ms - KEEP_MS);
		(void)sqlite3_step(prune_stmt);
		sqlite3_reset(prune_stmt);
	}
	sqlite3_bind_text(put_stmt, 1, user, -1, SQLITE_STATIC);
	sqlite3_bind_text(put_stmt, 2, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(put_stmt, 3, job_id);
	sqlite3_bind_int64(put_stmt, 4, now_ms);
	sqlite3_bind_int64(put_stmt, 5, count);
	rc = sqlite3_step(put_stmt);
	sqlite3_reset(put_stmt);
	sqlite3_clear_bindings(put_stmt);
	return rc == SQLITE_DONE ? 0 : GP_EIO;
}

void
submit_key_close(void)
{
	sqlite3_finalize(find_stmt);
	sqlite3_finalize(put_stmt);
	sqlite3_finalize(prune_stmt);
	find_stmt = put_stmt = prune_stmt = NULL;
}
