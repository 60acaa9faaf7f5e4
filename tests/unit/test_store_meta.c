/*
 * test_store_meta.c: the blob users' records (store_meta.h): the SQL text
 * both stores share, as PostgreSQL gets it (`?` and `?N` made $N, quoted
 * text kept), and the SQLite implementation through the calls ckpt.c,
 * data*.c and image.c use: an older file's tables renamed to the gp_*
 * names with their rows, binds, RETURNING, upserts, NULLs, transactions;
 * gp_meta_transact (a failed statement fails its transaction, a fault a
 * retry cures runs the body again, a given-up retry returns its code).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "coord/store_meta.h"
#include "coord/store_pg_int.h"
#include "gp.h"
#include "unit.h"

static void
translates(const char *sql, const char *want)
{
	char *out = pg_meta_translate(sql);

	CHECK(out != NULL);
	if (out != NULL)
		CHECK_STR(out, want);
	free(out);
}

TEST(translate)
{
	translates("SELECT 1", "SELECT 1");
	translates("SELECT a FROM t WHERE b = ? AND c = ?",
	    "SELECT a FROM t WHERE b = $1 AND c = $2");
	translates("WHERE job_id = ?1 AND version <= ?2 OR x = ?1",
	    "WHERE job_id = $1 AND version <= $2 OR x = $1");
	translates("WHERE kind = 'a?b' AND name = ?",
	    "WHERE kind = 'a?b' AND name = $1");
	translates("VALUES(?,?,?,?,?,?,?,?,?,?,?)",
	    "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)");
	translates("(?2 = '' OR n.name = ?2)", "($2 = '' OR n.name = $2)");
}

TEST(sqlite_upgrade_and_calls)
{
	char dir[] = "/tmp/gp-test-store-meta.XXXXXX", path[128];
	struct gp_meta *m = NULL;
	struct gp_meta_rows *r;
	sqlite3 *old;
	int64_t id = 0, n = 0;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/images.db", dir);
	/* A file as the coordinator before issue 19 left it. */
	CHECK(sqlite3_open(path, &old) == SQLITE_OK);
	CHECK(sqlite3_exec(old,
	    "CREATE TABLE names(name TEXT PRIMARY KEY, digest TEXT NOT NULL,"
	    " user TEXT NOT NULL, created_ms INTEGER NOT NULL);"
	    "CREATE INDEX names_digest ON names(digest);"
	    "INSERT INTO names VALUES('lab/img', 'sha256:aa', 'alice', 5);",
	    NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(old);
	CHECK_EQ(gp_meta_sqlite_open(GP_META_IMAGES, path, &m), 0);
	if (m == NULL)
		return;
	/* The old row under the new name, the old index gone. */
	CHECK_EQ(gp_meta_query_int(m, "SELECT created_ms FROM gp_image_names "
	    "WHERE name = ? AND \"user\" = ?", &n, "ss", "lab/img", "alice"), 1);
	CHECK_EQ(n, 5);
	CHECK_EQ(gp_meta_query_int(m, "SELECT count(*) FROM sqlite_master "
	    "WHERE name IN ('names', 'names_digest')", &n, ""), 1);
	CHECK_EQ(n, 0);
	/* An upsert, then a read of the row it replaced. */
	CHECK_EQ(gp_meta_begin(m), 0);
	CHECK_EQ(gp_meta_run(m, "INSERT INTO gp_image_names(name, digest, "
	    "\"user\", created_ms) VALUES(?, ?, ?, ?) ON CONFLICT(name) DO "
	    "UPDATE SET digest = excluded.digest", "sssI", "lab/img",
	    "sha256:bb", "alice", (int64_t)6), 0);
	CHECK_EQ(gp_meta_changes(m), 1);
	CHECK_EQ(gp_meta_commit(m), 0);
	CHECK_EQ(gp_meta_query(m, &r, "SELECT digest, created_ms FROM "
	    "gp_image_names WHERE name = ?1", "s", "lab/img"), 0);
	CHECK_EQ(gp_meta_next(r), 1);
	CHECK_STR(gp_meta_text(r, 0), "sha256:bb");
	CHECK_EQ(gp_meta_int(r, 1), 5);
	CHECK_EQ(gp_meta_next(r), 0);
	gp_meta_done(r);
	/* A rolled-back write leaves nothing. */
	CHECK_EQ(gp_meta_begin(m), 0);
	CHECK_EQ(gp_meta_run(m, "DELETE FROM gp_image_names", ""), 0);
	CHECK_EQ(gp_meta_rollback(m), 0);
	CHECK_EQ(gp_meta_query_int(m, "SELECT count(*) FROM gp_image_names",
	    &n, ""), 1);
	CHECK_EQ(n, 1);
	CHECK_EQ(gp_meta_fence(m), 0);
	gp_meta_close(m);

	/* The data area: RETURNING ids, NULLs bound and read back. */
	snprintf(path, sizeof(path), "%s/checkpoints.db", dir);
	CHECK_EQ(gp_meta_sqlite_open(GP_META_DATA, path, &m), 0);
	if (m == NULL)
		return;
	CHECK_EQ(gp_meta_query_int(m, "INSERT INTO gp_data_uploads(\"user\", "
	    "kind, name, job_id, attempt, creator, digest, manifest, bytes, "
	    "files, created_ms) VALUES(?, ?, ?, NULLIF(CAST(? AS BIGINT), 0), "
	    "NULLIF(CAST(? AS BIGINT), 0), ?, ?, ?, ?, ?, ?) RETURNING id", &id,
	    "sstIIIssIII", "alice", "data", (const char *)NULL, (int64_t)0,
	    (int64_t)0, (int64_t)7, "d", "{}", (int64_t)1, (int64_t)1,
	    (int64_t)9), 1);
	CHECK(id > 0);
	CHECK_EQ(gp_meta_query(m, &r, "SELECT name, job_id FROM "
	    "gp_data_uploads WHERE id = ?", "I", id), 0);
	CHECK_EQ(gp_meta_next(r), 1);
	CHECK(gp_meta_null(r, 0));
	CHECK_STR(gp_meta_text(r, 0), "");
	CHECK(gp_meta_null(r, 1));
	gp_meta_done(r);
	gp_meta_close(m);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	CHECK_EQ(system(path), 0);
}

/* ---- gp_meta_transact over SQLite, with a commit made to fail ---- */

static int body_runs;

/* Names lab/NAME (arg) and returns 0. */
static int
body_name(struct gp_meta *m, void *arg)
{
	body_runs++;
	return gp_meta_run(m, "INSERT INTO gp_image_names(name, digest, "
	    "\"user\", created_ms) VALUES(?, 'sha256:cc', 'bob', 1) ON "
	    "CONFLICT(name) DO NOTHING", "s", (const char *)arg) != 0 ? GP_EIO
								 : 0;
}

/* A statement fails, the next is not run, and the body claims success. */
static int
body_broken(struct gp_meta *m, void *arg)
{
	(void)arg;
	body_runs++;
	(void)gp_meta_run(m, "INSERT INTO no_such_table VALUES(1)", "");
	(void)gp_meta_run(m, "DELETE FROM gp_image_names", "");
	return 0;
}

/* Writes, then refuses (a positive value of its own). */
static int
body_refuses(struct gp_meta *m, void *arg)
{
	body_runs++;
	(void)body_name(m, arg);
	return 7;
}

static const struct gp_meta_ops *real_ops;
static int commit_failures, retries, retry_gives;

/* The first commit_failures commits are lost with their connection. */
static int
flaky_commit(struct gp_meta *m)
{
	if (commit_failures > 0) {
		commit_failures--;
		real_ops->rollback(m);
		return GP_ECONN;
	}
	return real_ops->commit(m);
}

static int
counting_retry(struct gp_meta *m, int rc)
{
	(void)m;
	retries++;
	return rc == GP_ECONN ? retry_gives : rc;
}

static int64_t
count_names(struct gp_meta *m, const char *name)
{
	int64_t n = -1;

	CHECK_EQ(gp_meta_query_int(m, "SELECT count(*) FROM gp_image_names "
	    "WHERE name = ?", &n, "s", name), 1);
	return n;
}

TEST(transact)
{
	char dir[] = "/tmp/gp-test-store-meta.XXXXXX", path[128];
	struct gp_meta_ops ops;
	struct gp_meta *m = NULL;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/images.db", dir);
	CHECK_EQ(gp_meta_sqlite_open(GP_META_IMAGES, path, &m), 0);
	if (m == NULL)
		return;
	/* Committed once. */
	body_runs = 0;
	CHECK_EQ(gp_meta_transact(m, body_name, "lab/a"), 0);
	CHECK_EQ(body_runs, 1);
	CHECK_EQ(count_names(m, "lab/a"), 1);
	/* A failed statement fails the transaction: nothing after it runs. */
	body_runs = 0;
	CHECK(gp_meta_transact(m, body_broken, NULL) < 0);
	CHECK_EQ(body_runs, 1);
	CHECK_EQ(count_names(m, "lab/a"), 1);
	/* The body's own refusal: rolled back, returned as is. */
	CHECK_EQ(gp_meta_transact(m, body_refuses, "lab/b"), 7);
	CHECK_EQ(count_names(m, "lab/b"), 0);
	/* The same by hand: a commit after a failed statement rolls back. */
	CHECK_EQ(gp_meta_begin(m), 0);
	CHECK_EQ(gp_meta_run(m, "INSERT INTO gp_image_names(name, digest, "
	    "\"user\", created_ms) VALUES('lab/c', 'd', 'u', 1)", ""), 0);
	CHECK(gp_meta_run(m, "INSERT INTO no_such_table VALUES(1)", "") < 0);
	CHECK(gp_meta_query_int(m, "SELECT 1", &(int64_t){0}, "") < 0);
	CHECK(gp_meta_commit(m) < 0);
	CHECK_EQ(count_names(m, "lab/c"), 0);

	/* A commit lost with its connection: the body runs again. */
	real_ops = m->ops;
	ops = *m->ops;
	ops.commit = flaky_commit;
	ops.retry = counting_retry;
	m->ops = &ops;
	body_runs = retries = 0;
	commit_failures = 2;
	retry_gives = 0;
	CHECK_EQ(gp_meta_transact(m, body_name, "lab/d"), 0);
	CHECK_EQ(body_runs, 3);
	CHECK_EQ(retries, 2);
	CHECK_EQ(count_names(m, "lab/d"), 1);
	/* Given up (the epoch changed, the time ran out): its code. */
	body_runs = retries = 0;
	commit_failures = 5;
	retry_gives = GP_EFENCED;
	CHECK_EQ(gp_meta_transact(m, body_name, "lab/e"), GP_EFENCED);
	CHECK_EQ(body_runs, 1);
	CHECK_EQ(count_names(m, "lab/e"), 0);
	/* A failure no retry cures is not retried. */
	body_runs = retries = 0;
	commit_failures = 0;
	CHECK(gp_meta_transact(m, body_broken, NULL) < 0);
	CHECK_EQ(body_runs, 1);
	CHECK_EQ(retries, 1);
	m->ops = real_ops;
	gp_meta_close(m);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	CHECK_EQ(system(path), 0);
}

TEST(http_status)
{
	CHECK_EQ(gp_meta_http_status(GP_EFENCED), 503);
	CHECK_EQ(gp_meta_http_status(GP_ETIMEDOUT), 503);
	CHECK_EQ(gp_meta_http_status(GP_ECONN), 503);
	CHECK_EQ(gp_meta_http_status(GP_EPERM), 503);
	CHECK_EQ(gp_meta_http_status(GP_EIO), 500);
	CHECK_EQ(gp_meta_http_status(GP_ENOMEM), 500);
}

int
main(void)
{
	RUN(translate);
	RUN(sqlite_upgrade_and_calls);
	RUN(transact);
	RUN(http_status);
	return unit_report();
}
