/*
 * test_store_meta.c: the blob users' records (store_meta.h): the SQL text
 * both stores share, as PostgreSQL gets it (`?` and `?N` made $N, quoted
 * text kept), and the SQLite implementation through the calls ckpt.c,
 * data*.c and image.c use: an older file's tables renamed to the gp_*
 * names with their rows, binds, RETURNING, upserts, NULLs, transactions.
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

int
main(void)
{
	RUN(translate);
	RUN(sqlite_upgrade_and_calls);
	return unit_report();
}
