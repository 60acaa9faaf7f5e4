/*
 * store_sqlite_meta.c: the blob users' records in SQLite (store_meta.h):
 * DATA/checkpoints.db (checkpoints; data sets, uploads and outputs on a
 * connection of their own) and DATA/images.db, in WAL mode with
 * synchronous=FULL (gp_sqlite_open's). Their tables are named as in
 * PostgreSQL (gp_*); a data directory made before they were is migrated
 * on open: each old table renamed, its indexes made again under the new
 * names, in one transaction (migrate_area).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "log.h"
#include "sqlite_util.h"
#include "store_meta.h"

/* An old table and its name now. */
struct rename {
	const char *old, *now;
};

/* One area: its file, its tables' old names, its schema. */
struct area {
	const char *what;
	const char *file;
	const struct rename *renames;
	/* The indexes of the old names, dropped (made again by schema). */
	const char *drop_old;
	const char *schema;
};

static const struct rename ckpt_renames[] = {
    {"versions", "gp_ckpt_versions"},
    {"next_version", "gp_ckpt_next_version"},
    {NULL, NULL},
};

static const struct rename data_renames[] = {
    {"objects", "gp_data_objects"},
    {"object_chunks", "gp_data_object_chunks"},
    {"uploads", "gp_data_uploads"},
    {"upload_chunks", "gp_data_upload_chunks"},
    {"data_next", "gp_data_next"},
    {"shares", "gp_data_shares"},
    {"quotas", "gp_data_quotas"},
    {NULL, NULL},
};

static const struct rename image_renames[] = {
    {"manifests", "gp_image_manifests"},
    {"manifest_blobs", "gp_image_manifest_blobs"},
    {"names", "gp_image_names"},
    {"signatures", "gp_image_signatures"},
    {NULL, NULL},
};

static const struct area areas[] = {
    [GP_META_CHECKPOINTS] = {"checkpoints", "checkpoints.db", ckpt_renames,
	"DROP INDEX IF EXISTS versions_user;",
	"CREATE TABLE IF NOT EXISTS gp_ckpt_versions("
	" job_id INTEGER NOT NULL, version INTEGER NOT NULL,"
	" attempt INTEGER NOT NULL, user TEXT NOT NULL,"
	" manifest TEXT NOT NULL, bytes INTEGER NOT NULL,"
	" files INTEGER NOT NULL, label TEXT NOT NULL,"
	" created_ms INTEGER NOT NULL, PRIMARY KEY(job_id, version));"
	"CREATE INDEX IF NOT EXISTS gp_ckpt_versions_user"
	" ON gp_ckpt_versions(user);"
	/* Version numbers are never reused, even after retention. */
	"CREATE TABLE IF NOT EXISTS gp_ckpt_next_version("
	" job_id INTEGER PRIMARY KEY, next INTEGER NOT NULL);"},
    [GP_META_DATA] = {"data", "checkpoints.db", data_renames,
	"DROP INDEX IF EXISTS objects_data;"
	"DROP INDEX IF EXISTS objects_output;"
	"DROP INDEX IF EXISTS object_chunks_chunk;"
	"DROP INDEX IF EXISTS uploads_digest;",
	"CREATE TABLE IF NOT EXISTS gp_data_objects("
	" id INTEGER PRIMARY KEY, user TEXT NOT NULL, kind TEXT NOT NULL,"
	" name TEXT, version INTEGER, job_id INTEGER, attempt INTEGER,"
	" manifest TEXT NOT NULL, bytes INTEGER NOT NULL,"
	" files INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX IF NOT EXISTS gp_data_objects_data"
	" ON gp_data_objects(user, name, version) WHERE kind = 'data';"
	"CREATE UNIQUE INDEX IF NOT EXISTS gp_data_objects_output"
	" ON gp_data_objects(job_id) WHERE kind = 'output';"
	"CREATE TABLE IF NOT EXISTS gp_data_object_chunks("
	" object INTEGER NOT NULL, chunk TEXT NOT NULL,"
	" size INTEGER NOT NULL, PRIMARY KEY(object, chunk)) WITHOUT ROWID;"
	"CREATE INDEX IF NOT EXISTS gp_data_object_chunks_chunk"
	" ON gp_data_object_chunks(chunk);"
	"CREATE TABLE IF NOT EXISTS gp_data_uploads("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL,"
	" kind TEXT NOT NULL,"
	" name TEXT, job_id INTEGER, attempt INTEGER,"
	" creator INTEGER NOT NULL, digest TEXT NOT NULL,"
	" manifest TEXT NOT NULL, bytes INTEGER NOT NULL,"
	" files INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS gp_data_uploads_digest"
	" ON gp_data_uploads(user, digest);"
	"CREATE TABLE IF NOT EXISTS gp_data_upload_chunks("
	" upload INTEGER NOT NULL, chunk TEXT NOT NULL, size INTEGER NOT NULL,"
	" PRIMARY KEY(upload, chunk)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS gp_data_next("
	" user TEXT NOT NULL, name TEXT NOT NULL, next INTEGER NOT NULL,"
	" PRIMARY KEY(user, name));"
	"CREATE TABLE IF NOT EXISTS gp_data_shares("
	" user TEXT NOT NULL, name TEXT NOT NULL, grantee TEXT NOT NULL,"
	" PRIMARY KEY(user, name, grantee));"
	"CREATE TABLE IF NOT EXISTS gp_data_quotas("
	" user TEXT PRIMARY KEY, bytes INTEGER);"},
    [GP_META_IMAGES] = {"images", "images.db", image_renames,
	"DROP INDEX IF EXISTS manifest_blobs_blob;"
	"DROP INDEX IF EXISTS names_digest;",
	"CREATE TABLE IF NOT EXISTS gp_image_manifests("
	" digest TEXT PRIMARY KEY, config TEXT NOT NULL,"
	" bytes INTEGER NOT NULL, layers INTEGER NOT NULL,"
	" importer TEXT NOT NULL, created_ms INTEGER NOT NULL);"
	/* Every blob a manifest needs, the manifest itself included. */
	"CREATE TABLE IF NOT EXISTS gp_image_manifest_blobs("
	" manifest TEXT NOT NULL, blob TEXT NOT NULL,"
	" PRIMARY KEY(manifest, blob));"
	"CREATE INDEX IF NOT EXISTS gp_image_manifest_blobs_blob"
	" ON gp_image_manifest_blobs(blob);"
	"CREATE TABLE IF NOT EXISTS gp_image_names("
	" name TEXT PRIMARY KEY, digest TEXT NOT NULL, user TEXT NOT NULL,"
	" created_ms INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS gp_image_names_digest"
	" ON gp_image_names(digest);"
	"CREATE TABLE IF NOT EXISTS gp_image_signatures("
	" digest TEXT NOT NULL, key TEXT NOT NULL, signature TEXT NOT NULL,"
	" signer TEXT NOT NULL, created_ms INTEGER NOT NULL,"
	" PRIMARY KEY(digest, key));"},
};

struct sqlite_meta {
	struct gp_meta base; /* first: the wrappers cast */
	struct gp_sqlite db;
};

struct sqlite_rows {
	struct gp_meta_rows base;
	sqlite3_stmt *st;
};

static struct gp_sqlite *
db_of(struct gp_meta *m)
{
	return &((struct sqlite_meta *)m)->db;
}

static sqlite3_stmt *
st_of(struct gp_meta_rows *r)
{
	return ((struct sqlite_rows *)r)->st;
}

static void rows_done(struct gp_meta_rows *r);

static int
fail(struct gp_meta *m, int rc)
{
	snprintf(m->error, sizeof(m->error), "%s",
	    gp_sqlite_errmsg(db_of(m))[0] != '\0' ? gp_sqlite_errmsg(db_of(m))
						  : gp_strerror(rc));
	return rc;
}

static void
meta_close(struct gp_meta *m)
{
	gp_sqlite_close(db_of(m));
	free(m);
}

static int
meta_begin(struct gp_meta *m)
{
	int rc = gp_sqlite_begin(db_of(m));

	return rc != 0 ? fail(m, rc) : 0;
}

static int
meta_commit(struct gp_meta *m)
{
	int rc = gp_sqlite_commit(db_of(m));

	return rc != 0 ? fail(m, rc) : 0;
}

static int
meta_rollback(struct gp_meta *m)
{
	if (!gp_sqlite_in_transaction(db_of(m)))
		return 0;
	return gp_sqlite_rollback(db_of(m));
}

static int
meta_run(struct gp_meta *m, const char *sql, const char *fmt, va_list ap,
    int64_t *changes)
{
	struct gp_sqlite *db = db_of(m);
	sqlite3_stmt *st = gp_sqlite_stmt(db, sql);
	int rc;

	if (st == NULL)
		return fail(m, GP_EIO);
	if ((rc = gp_sqlite_vbind(db, st, fmt, ap)) != 0) {
		gp_sqlite_done(st);
		return fail(m, rc);
	}
	if ((rc = gp_sqlite_step_done(db, st)) != 0)
		return fail(m, rc);
	*changes = sqlite3_changes(db->db);
	return 0;
}

/*
 * A query's statement comes from the connection's cache; a query whose
 * SQL is open already (a nested read of one text) gets one of its own,
 * which rows_done finalizes.
 */
static int
meta_query(struct gp_meta *m, const char *sql, const char *fmt, va_list ap,
    struct gp_meta_rows **out)
{
	struct gp_sqlite *db = db_of(m);
	struct sqlite_rows *r = calloc(1, sizeof(*r));
	int rc;

	if (r == NULL)
		return GP_ENOMEM;
	r->base.m = m;
	r->st = gp_sqlite_stmt(db, sql);
	if (r->st != NULL && sqlite3_stmt_busy(r->st))
		r->st = gp_sqlite_prepare(db, sql);
	if (r->st == NULL) {
		free(r);
		return fail(m, GP_EIO);
	}
	if ((rc = gp_sqlite_vbind(db, r->st, fmt, ap)) != 0) {
		rows_done(&r->base);
		return fail(m, rc);
	}
	*out = &r->base;
	return 0;
}

static int
rows_next(struct gp_meta_rows *r)
{
	int rc = gp_sqlite_step(db_of(r->m), st_of(r));

	return rc < 0 ? fail(r->m, rc) : rc;
}

static int
rows_is_null(struct gp_meta_rows *r, int col)
{
	return sqlite3_column_type(st_of(r), col) == SQLITE_NULL;
}

static int64_t
rows_integer(struct gp_meta_rows *r, int col)
{
	return sqlite3_column_int64(st_of(r), col);
}

static double
rows_real(struct gp_meta_rows *r, int col)
{
	return sqlite3_column_double(st_of(r), col);
}

static const char *
rows_text(struct gp_meta_rows *r, int col)
{
	return gp_sqlite_text(st_of(r), col);
}

/*
 * A cached statement is reset; one prepared for a nested read is not in
 * the cache (gp_sqlite_stmt would not have handed out a busy one), so a
 * statement the cache does not hold is finalized.
 */
static void
rows_done(struct gp_meta_rows *r)
{
	struct gp_sqlite *db = db_of(r->m);
	sqlite3_stmt *st = st_of(r);
	int i, cached = 0;

	for (i = 0; i < db->ncache; i++)
		if (db->cache[i].stmt == st)
			cached = 1;
	if (cached)
		gp_sqlite_done(st);
	else
		sqlite3_finalize(st);
	free(r);
}

/* One coordinator on SQLite: it always leads. */
static int
meta_fence(struct gp_meta *m)
{
	(void)m;
	return 0;
}

static const struct gp_meta_ops sqlite_meta_ops = {
    .close = meta_close,
    .begin = meta_begin,
    .commit = meta_commit,
    .rollback = meta_rollback,
    .run = meta_run,
    .query = meta_query,
    .next = rows_next,
    .is_null = rows_is_null,
    .integer = rows_integer,
    .real = rows_real,
    .text = rows_text,
    .done = rows_done,
    .fence = meta_fence,
};

void
gp_meta_sqlite_path(enum gp_meta_area area, const char *data_dir, char *out,
    size_t len)
{
	snprintf(out, len, "%s/%s", data_dir, areas[area].file);
}

/*
 * Renames the tables of a data directory made before they were named as
 * in PostgreSQL, and drops their old indexes (the schema makes them again
 * under the new names), all in one transaction.
 */
static int
migrate_area(struct gp_sqlite *db, const struct area *a)
{
	const struct rename *rn;
	char sql[160];
	int rc, renamed = 0;

	if ((rc = gp_sqlite_begin(db)) != 0)
		return rc;
	for (rn = a->renames; rn->old != NULL; rn++) {
		if (!gp_sqlite_has(db, rn->old, NULL) ||
		    gp_sqlite_has(db, rn->now, NULL))
			continue;
		snprintf(sql, sizeof(sql), "ALTER TABLE %s RENAME TO %s",
		    rn->old, rn->now);
		if ((rc = gp_sqlite_exec(db, sql)) != 0)
			goto fail;
		renamed++;
	}
	if ((rc = gp_sqlite_exec(db, a->drop_old)) != 0 ||
	    (rc = gp_sqlite_exec(db, a->schema)) != 0 ||
	    (rc = gp_sqlite_commit(db)) != 0)
		goto fail;
	if (renamed > 0)
		gp_info("sqlite %s: migrated tables=%d to the gp_* names",
		    a->what, renamed);
	return 0;
fail:
	gp_sqlite_rollback(db);
	return rc;
}

int
gp_meta_sqlite_open(enum gp_meta_area area, const char *path,
    struct gp_meta **out)
{
	const struct area *a = &areas[area];
	struct sqlite_meta *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return GP_ENOMEM;
	m->base.ops = &sqlite_meta_ops;
	snprintf(m->base.what, sizeof(m->base.what), "%s", a->what);
	/*
	 * WAL, synchronous=FULL (a record is on disk before its commit is
	 * answered) and a busy timeout (checkpoints and data share one
	 * file through two connections): gp_sqlite_open's.
	 */
	if (gp_sqlite_open(&m->db, path, GP_SQLITE_SERIALIZED, a->what) != 0 ||
	    migrate_area(&m->db, a) != 0) {
		gp_error("sqlite %s: cannot open path=%s error=\"%s\"", a->what,
		    path, gp_sqlite_errmsg(&m->db));
		gp_sqlite_close(&m->db);
		free(m);
		return GP_EIO;
	}
	*out = &m->base;
	return 0;
}
