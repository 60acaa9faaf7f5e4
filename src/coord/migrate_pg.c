/*
 * migrate_pg.c: `gpupool coordinator migrate --from DATA_DIR --to
 * postgresql://...`: moves a pool's state from SQLite (DATA_DIR/state.db)
 * into an empty PostgreSQL database, and checks it row for row.
 *
 * The SQLite store is opened through the store interface first, so that
 * an older state.db is brought up to the current columns; its tables are
 * then read with a read-only connection and written with COPY, all in one
 * PostgreSQL transaction, which also carries the pool id over (the data
 * directory's pool_id stays true). Before the commit, every table is read
 * back from PostgreSQL and compared with SQLite's: the BLAKE2b hashes of
 * the rows (each value in one canonical text), sorted, must be equal on
 * both sides, and the counts too. Anything else rolls the whole
 * migration back: the database is left empty, state.db untouched.
 *
 * The blob users' records (store_meta.h: checkpoints and data sets in
 * DATA_DIR/checkpoints.db, images in DATA_DIR/images.db, their tables
 * brought up to the gp_* names first) go in the same transaction and are
 * checked the same way. The coordinator must be stopped while it runs
 * (the files are read as they are); afterwards it is started with --data
 * DATA_DIR --db URL. Logs and the blob files themselves stay in DATA_DIR
 * (or the --blob-dir every coordinator mounts).
 */
#include <getopt.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "coord.h"
#include "gp.h"
#include "log.h"
#include "pg.h"
#include "store.h"
#include "store_meta.h"
#include "util.h"

#define HASH_LEN 16

/*
 * A table of state.db, gp_<name> in PostgreSQL, with the same columns; or
 * of a blob user's file (area set), named alike on both sides (gp_*).
 */
struct table {
	const char *name;
	const char *columns;
	/* The columns that hold doubles (compared as numbers), or "". */
	const char *reals;
	/* Rows left out (meta's identity, written by the store itself). */
	const char *where;
	int area; /* 0: state.db; else 1 + enum gp_meta_area */
};

#define AREA(a) (1 + (a))

static const struct table tables[] = {
    {"meta", "key, value", "",
	"key NOT IN ('schema_version', 'pool_id')", 0},
    {"tokens", "id, name, role, hash, created_ms, group_id", "", NULL, 0},
    {"nodes", "id, name, owner_token, owner_name, cpus, mem_mib, gpus", "",
	NULL, 0},
    {"jobs",
	"id, \"user\", spec, state, cancel_requested, attempts, node_id,"
	" gpus, submitted_ms, started_ms, finished_ms, has_exit, exit_code,"
	" signal, reason, message, history, log_base, log_truncated",
	"", NULL, 0},
    {"arrays", "id, \"user\", spec, tasks, submitted_ms", "", NULL, 0},
    {"submit_keys", "\"user\", key, job_id, created_ms, count", "", NULL, 0},
    {"groups", "id, name, weight, created_ms", "", NULL, 0},
    {"members", "\"user\", group_id, pos", "", NULL, 0},
    {"prices", "class, micro", "", NULL, 0},
    {"budgets", "kind, name, amount, period", "", NULL, 0},
    {"postings",
	"id, job_id, attempt, seq, final, at_ms, from_ms, to_ms, node_id,"
	" amount, gpu_ms, part",
	"", NULL, 0},
    {"entries", "posting, account, name, group_id, amount, gpu_ms, at_ms", "",
	NULL, 0},
    {"usage_decay", "kind, name, gpu_s, credits, as_of_ms", "2,3", NULL, 0},
    {"account_totals", "account, name, group_id, amount, gpu_ms, postings",
	"", NULL, 0},
    /* The blob users' records (store_meta.h). */
    {"gp_ckpt_versions",
	"job_id, version, attempt, \"user\", manifest, bytes, files, label,"
	" created_ms",
	"", NULL, AREA(GP_META_CHECKPOINTS)},
    {"gp_ckpt_next_version", "job_id, next", "", NULL,
	AREA(GP_META_CHECKPOINTS)},
    {"gp_data_objects",
	"id, \"user\", kind, name, version, job_id, attempt, manifest, bytes,"
	" files, created_ms",
	"", NULL, AREA(GP_META_DATA)},
    {"gp_data_object_chunks", "object, chunk, size", "", NULL,
	AREA(GP_META_DATA)},
    {"gp_data_uploads",
	"id, \"user\", kind, name, job_id, attempt, creator, digest, manifest,"
	" bytes, files, created_ms",
	"", NULL, AREA(GP_META_DATA)},
    {"gp_data_upload_chunks", "upload, chunk, size", "", NULL,
	AREA(GP_META_DATA)},
    {"gp_data_next", "\"user\", name, next", "", NULL, AREA(GP_META_DATA)},
    {"gp_data_shares", "\"user\", name, grantee", "", NULL,
	AREA(GP_META_DATA)},
    {"gp_data_quotas", "\"user\", bytes", "", NULL, AREA(GP_META_DATA)},
    {"gp_image_manifests", "digest, config, bytes, layers, importer,"
	" created_ms", "", NULL, AREA(GP_META_IMAGES)},
    {"gp_image_manifest_blobs", "manifest, blob", "", NULL,
	AREA(GP_META_IMAGES)},
    {"gp_image_names", "name, digest, \"user\", created_ms", "", NULL,
	AREA(GP_META_IMAGES)},
    {"gp_image_signatures", "digest, key, signature, signer, created_ms", "",
	NULL, AREA(GP_META_IMAGES)},
};

/* t's name in PostgreSQL: gp_<name> for state.db's, the same for others. */
static const char *
pg_table(const struct table *t, char *buf, size_t len)
{
	if (t->area != 0)
		return t->name;
	snprintf(buf, len, "gp_%s", t->name);
	return buf;
}

/* Is column i (from 0) one of t's doubles? */
static int
is_real(const struct table *t, int i)
{
	char want[16];
	const char *p = t->reals;
	size_t n;

	snprintf(want, sizeof(want), "%d", i);
	n = strlen(want);
	while (*p != '\0') {
		if (strncmp(p, want, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return 1;
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	return 0;
}

/* The hashes of a table's rows on one side. */
struct hashes {
	unsigned char *h;
	size_t n, cap;
};

/* Row hashing: each value tagged (NULL or not) and length-prefixed. */
static void
hash_value(crypto_generichash_state *st, const char *v, size_t len, int null)
{
	unsigned char tag[9];
	size_t k;

	tag[0] = null ? 0 : 1;
	for (k = 0; k < 8; k++)
		tag[k + 1] = (unsigned char)(len >> (8 * k));
	crypto_generichash_update(st, tag, sizeof(tag));
	if (!null)
		crypto_generichash_update(st, (const unsigned char *)v, len);
}

static int
hashes_add(struct hashes *hs, crypto_generichash_state *st)
{
	if (hs->n == hs->cap) {
		size_t cap = hs->cap ? hs->cap * 2 : 1024;
		unsigned char *nh = realloc(hs->h, cap * HASH_LEN);

		if (nh == NULL)
			return GP_ENOMEM;
		hs->h = nh;
		hs->cap = cap;
	}
	crypto_generichash_final(st, hs->h + hs->n * HASH_LEN, HASH_LEN);
	hs->n++;
	return 0;
}

static int
cmp_hash(const void *a, const void *b)
{
	return memcmp(a, b, HASH_LEN);
}

/* A double in one text, whichever side printed it. */
static void
canonical_real(double d, char *out, size_t n)
{
	snprintf(out, n, "%.17g", d);
}

/* COPY's text format: backslash, tab, newline and CR escaped. */
static int
copy_escaped(struct gp_buf *b, const char *v, size_t len)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < len && rc == 0; i++) {
		switch (v[i]) {
		case '\\':
			rc = gp_buf_append(b, "\\\\", 2);
			break;
		case '\t':
			rc = gp_buf_append(b, "\\t", 2);
			break;
		case '\n':
			rc = gp_buf_append(b, "\\n", 2);
			break;
		case '\r':
			rc = gp_buf_append(b, "\\r", 2);
			break;
		default:
			rc = gp_buf_append(b, &v[i], 1);
		}
	}
	return rc;
}

/*
 * Copies table t from db into PostgreSQL (COPY, inside c's transaction)
 * and hashes its rows into hs. OUT: *rows.
 */
static int
copy_table(sqlite3 *db, struct pg_conn *c, const struct table *t,
    struct hashes *hs, int64_t *rows)
{
	char sql[1024], num[64], pgname[64];
	struct gp_buf line = {0};
	crypto_generichash_state st;
	sqlite3_stmt *s = NULL;
	PGresult *r;
	int i, n, rc = 0, step;

	*rows = 0;
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s%s%s", t->columns,
	    t->name, t->where != NULL ? " WHERE " : "",
	    t->where != NULL ? t->where : "");
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		fprintf(stderr, "gpupool: migrate: %s: %s: %s\n",
		    sqlite3_db_filename(db, "main"), t->name,
		    sqlite3_errmsg(db));
		return GP_EIO;
	}
	snprintf(sql, sizeof(sql), "COPY %s (%s) FROM STDIN",
	    pg_table(t, pgname, sizeof(pgname)), t->columns);
	r = PQexec(c->conn, sql);
	if (r == NULL || PQresultStatus(r) != PGRES_COPY_IN) {
		rc = pg_result_error(c, r, "copy");
		PQclear(r);
		sqlite3_finalize(s);
		return rc;
	}
	PQclear(r);
	n = sqlite3_column_count(s);
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		line.len = 0;
		crypto_generichash_init(&st, NULL, 0, HASH_LEN);
		for (i = 0; i < n && rc == 0; i++) {
			const char *v;
			size_t len;

			if (i > 0)
				rc = gp_buf_append(&line, "\t", 1);
			if (sqlite3_column_type(s, i) == SQLITE_NULL) {
				hash_value(&st, NULL, 0, 1);
				rc = rc ? rc : gp_buf_append(&line, "\\N", 2);
				continue;
			}
			if (is_real(t, i)) {
				canonical_real(sqlite3_column_double(s, i), num,
				    sizeof(num));
				v = num;
				len = strlen(num);
			} else {
				v = (const char *)sqlite3_column_text(s, i);
				len = (size_t)sqlite3_column_bytes(s, i);
			}
			hash_value(&st, v, len, 0);
			rc = rc ? rc : copy_escaped(&line, v, len);
		}
		if (rc == 0)
			rc = gp_buf_append(&line, "\n", 1);
		if (rc == 0)
			rc = hashes_add(hs, &st);
		if (rc != 0)
			break;
		if (PQputCopyData(c->conn, line.data, (int)line.len) != 1) {
			rc = GP_ECONN;
			break;
		}
		(*rows)++;
	}
	gp_buf_free(&line);
	if (rc == 0 && step != SQLITE_DONE) {
		fprintf(stderr, "gpupool: migrate: state.db: %s: %s\n", t->name,
		    sqlite3_errmsg(db));
		rc = GP_EIO;
	}
	sqlite3_finalize(s);
	if (PQputCopyEnd(c->conn, rc == 0 ? NULL : "migration failed") != 1)
		rc = rc ? rc : GP_ECONN;
	r = PQgetResult(c->conn);
	if (rc == 0 && (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK))
		rc = pg_result_error(c, r, "copy");
	PQclear(r);
	while ((r = PQgetResult(c->conn)) != NULL)
		PQclear(r);
	return rc;
}

/* Reads table t back from PostgreSQL and hashes its rows as copy_table. */
static int
hash_pg_table(struct pg_conn *c, const struct table *t, struct hashes *hs)
{
	char sql[1024], num[64], pgname[64];
	crypto_generichash_state st;
	PGresult *r;
	int i, k, n, rc = 0;

	snprintf(sql, sizeof(sql), "SELECT %s FROM %s%s%s", t->columns,
	    pg_table(t, pgname, sizeof(pgname)), t->where != NULL ? " WHERE " : "",
	    t->where != NULL ? t->where : "");
	r = PQexec(c->conn, sql);
	if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = pg_result_error(c, r, "read back");
		PQclear(r);
		return rc;
	}
	n = PQnfields(r);
	for (k = 0; k < PQntuples(r) && rc == 0; k++) {
		crypto_generichash_init(&st, NULL, 0, HASH_LEN);
		for (i = 0; i < n; i++) {
			const char *v = PQgetvalue(r, k, i);

			if (PQgetisnull(r, k, i)) {
				hash_value(&st, NULL, 0, 1);
				continue;
			}
			if (is_real(t, i)) {
				canonical_real(strtod(v, NULL), num, sizeof(num));
				v = num;
			}
			hash_value(&st, v, strlen(v), 0);
		}
		rc = hashes_add(hs, &st);
	}
	PQclear(r);
	return rc;
}

/*
 * The database must hold no pool's rows yet (records_only: none of the
 * blob users'). 0, GP_ECONFLICT or other.
 */
static int
check_empty(struct pg_conn *c, int records_only)
{
	char sql[256], pgname[64];
	const char *pn;
	PGresult *r;
	size_t i;
	int rc = 0;

	for (i = 0; i < GP_ARRAY_LEN(tables) && rc == 0; i++) {
		if (records_only && tables[i].area == 0)
			continue;
		pn = pg_table(&tables[i], pgname, sizeof(pgname));
		snprintf(sql, sizeof(sql), "SELECT 1 FROM %s%s%s LIMIT 1", pn,
		    tables[i].where != NULL ? " WHERE " : "",
		    tables[i].where != NULL ? tables[i].where : "");
		r = PQexec(c->conn, sql);
		if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK)
			rc = pg_result_error(c, r, "check empty");
		else if (PQntuples(r) > 0) {
			fprintf(stderr, "gpupool: migrate: %s: table %s "
			    "has rows already: migrate into an empty "
			    "database\n", c->where, pn);
			rc = GP_ECONFLICT;
		}
		PQclear(r);
	}
	return rc;
}

/*
 * records_only: the blob users' tables alone (a pool already on
 * PostgreSQL from before they moved there: `migrate --records-only`);
 * the database must have none of their rows, and the data directory's
 * pool_id must be the database's.
 */
static int
migrate(const char *data_dir, const char *url, int records_only)
{
	struct hashes mine = {0}, theirs = {0};
	char path[1200], pool[PG_POOL_ID_LEN], err[512];
	struct gp_store *store = NULL;
	struct gp_meta *meta;
	struct pg_conn *c = NULL;
	sqlite3 *db = NULL, *areas[3] = {NULL, NULL, NULL}, *from;
	int64_t rows, total = 0;
	size_t i;
	int a, rc;

	/* The current columns, and the pool id of the SQLite store. */
	snprintf(path, sizeof(path), "%s/state.db", data_dir);
	if (records_only) {
		char *id = NULL;

		snprintf(path, sizeof(path), "%s/pool_id", data_dir);
		if (gp_read_file(path, 64, &id, NULL) != 0) {
			fprintf(stderr, "gpupool: migrate: no %s\n", path);
			return GP_ENOENT;
		}
		id[strcspn(id, " \r\n")] = '\0';
		gp_strlcpy(pool, id, sizeof(pool));
		free(id);
		goto records;
	}
	if (access(path, R_OK) != 0) {
		fprintf(stderr, "gpupool: migrate: no %s\n", path);
		return GP_ENOENT;
	}
	if ((rc = gp_store_open(NULL, data_dir, &store, err, sizeof(err))) !=
	    0) {
		fprintf(stderr, "gpupool: migrate: %s\n", err);
		return rc;
	}
	if ((rc = gp_store_check_pool(store, data_dir, err, sizeof(err))) !=
	    0) {
		fprintf(stderr, "gpupool: migrate: %s\n", err);
		gp_store_close(store);
		return rc;
	}
	memcpy(pool, store->pool_id, sizeof(pool));
	gp_store_close(store);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		fprintf(stderr, "gpupool: migrate: cannot open %s: %s\n", path,
		    db != NULL ? sqlite3_errmsg(db) : "out of memory");
		rc = GP_EIO;
		goto out;
	}
	/* One read transaction: every table as of one moment. */
	sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
records:
	/*
	 * The blob users' files, their tables brought up to the gp_* names
	 * (an empty one made where a pool never had it), then read the same
	 * way.
	 */
	for (a = 0; a < 3; a++) {
		gp_meta_sqlite_path((enum gp_meta_area)a, data_dir, path,
		    sizeof(path));
		if ((rc = gp_meta_sqlite_open((enum gp_meta_area)a, path,
			 &meta)) != 0) {
			fprintf(stderr, "gpupool: migrate: cannot open %s\n",
			    path);
			goto out;
		}
		gp_meta_close(meta);
		if (sqlite3_open_v2(path, &areas[a], SQLITE_OPEN_READONLY,
			NULL) != SQLITE_OK) {
			fprintf(stderr, "gpupool: migrate: cannot open %s: %s\n",
			    path, areas[a] != NULL ? sqlite3_errmsg(areas[a])
						   : "out of memory");
			rc = GP_EIO;
			goto out;
		}
		sqlite3_exec(areas[a], "BEGIN", NULL, NULL, NULL);
	}
	snprintf(path, sizeof(path), "%s/state.db", data_dir);
	if ((rc = pg_connect(url, 10000, &c)) != 0) {
		fprintf(stderr, "gpupool: migrate: %s\n",
		    c != NULL ? c->error : "cannot connect to PostgreSQL");
		goto out;
	}
	{
		char have[PG_POOL_ID_LEN];

		if ((rc = pg_schema_open(c, pool, have)) != 0) {
			fprintf(stderr, "gpupool: migrate: %s\n", c->error);
			goto out;
		}
		if (records_only && strcmp(have, pool) != 0) {
			fprintf(stderr, "gpupool: migrate: %s is the database of "
			    "pool %s, %s belongs to pool %s\n", c->where, have,
			    data_dir, pool);
			rc = GP_ECONFLICT;
			goto out;
		}
	}
	if ((rc = pg_exec(c, "BEGIN", "begin")) != 0 ||
	    (rc = check_empty(c, records_only)) != 0)
		goto fail;
	for (i = 0; i < GP_ARRAY_LEN(tables); i++) {
		if (records_only && tables[i].area == 0)
			continue;
		mine.n = theirs.n = 0;
		from = tables[i].area == 0 ? db : areas[tables[i].area - 1];
		if ((rc = copy_table(from, c, &tables[i], &mine, &rows)) != 0 ||
		    (rc = hash_pg_table(c, &tables[i], &theirs)) != 0)
			goto fail;
		if (mine.n > 1)
			qsort(mine.h, mine.n, HASH_LEN, cmp_hash);
		if (theirs.n > 1)
			qsort(theirs.h, theirs.n, HASH_LEN, cmp_hash);
		if (mine.n != theirs.n ||
		    (mine.n > 0 && memcmp(mine.h, theirs.h,
				       mine.n * HASH_LEN) != 0)) {
			fprintf(stderr, "gpupool: migrate: table %s differs "
			    "after the copy (SQLite %zu rows, PostgreSQL "
			    "%zu): nothing migrated\n",
			    tables[i].name, mine.n, theirs.n);
			rc = GP_EIO;
			goto fail;
		}
		printf("%-23s %10lld rows copied, checked row for row\n",
		    tables[i].name, (long long)rows);
		total += rows;
	}
	/* New postings, objects, uploads numbered after the copied ones. */
	if ((!records_only &&
		(rc = pg_exec(c, "SELECT setval(pg_get_serial_sequence("
				 "'gp_postings', 'id'), coalesce(max(id), 0) + 1,"
				 " false) FROM gp_postings",
		     "postings sequence")) != 0) ||
	    (rc = pg_exec(c, "SELECT setval(pg_get_serial_sequence("
			     "'gp_data_objects', 'id'), coalesce(max(id), 0) + 1,"
			     " false) FROM gp_data_objects",
		 "data objects sequence")) != 0 ||
	    (rc = pg_exec(c, "SELECT setval(pg_get_serial_sequence("
			     "'gp_data_uploads', 'id'), coalesce(max(id), 0) + 1,"
			     " false) FROM gp_data_uploads",
		 "uploads sequence")) != 0 ||
	    (rc = pg_exec(c, "COMMIT", "commit")) != 0)
		goto fail;
	printf("migrated pool %s: %lld rows from %s to %s\n"
	       "start the coordinator with --data %s --db URL\n",
	    pool, (long long)total, path, c->where, data_dir);
	rc = 0;
	goto out;
fail:
	if (PQstatus(c->conn) == CONNECTION_OK)
		PQclear(PQexec(c->conn, "ROLLBACK"));
	if (c->error[0] != '\0' && rc != GP_ECONFLICT)
		fprintf(stderr, "gpupool: migrate: %s\n", c->error);
	fprintf(stderr, "gpupool: migrate: failed (%s); the database was "
	    "left as it was\n", gp_strerror(rc));
out:
	free(mine.h);
	free(theirs.h);
	if (db != NULL)
		sqlite3_close(db);
	for (a = 0; a < 3; a++)
		if (areas[a] != NULL)
			sqlite3_close(areas[a]);
	pg_close(c);
	return rc;
}

static void
migrate_usage(FILE *out)
{
	fprintf(out,
	    "usage: gpupool coordinator migrate [--records-only] --from "
	    "DATA_DIR --to postgresql://...\n"
	    "  Moves a pool's state from DATA_DIR/state.db (SQLite), and its\n"
	    "  checkpoints', data sets' and images' records (checkpoints.db,\n"
	    "  images.db), into an empty PostgreSQL database, checked row for\n"
	    "  row, in one transaction. Stop the coordinator first; then start\n"
	    "  it with\n"
	    "  --data DATA_DIR --db postgresql://...\n"
	    "  --records-only: only the checkpoints', data sets' and images'\n"
	    "  records, into a pool already on PostgreSQL that has none (a\n"
	    "  pool that moved before they did: the coordinator says so)\n");
}

int
gp_coord_migrate_main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"from", required_argument, NULL, 'f'},
	    {"to", required_argument, NULL, 't'},
	    {"records-only", no_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *from = NULL, *to = NULL;
	int ch, records_only = 0;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (ch) {
		case 'f':
			from = optarg;
			break;
		case 't':
			to = optarg;
			break;
		case 'r':
			records_only = 1;
			break;
		case 'h':
			migrate_usage(stdout);
			return 0;
		default:
			migrate_usage(stderr);
			return 2;
		}
	}
	if (from == NULL || to == NULL || optind != argc) {
		migrate_usage(stderr);
		return 2;
	}
	if (strncmp(to, "postgresql://", 13) != 0 &&
	    strncmp(to, "postgres://", 11) != 0) {
		fprintf(stderr, "gpupool: migrate: --to must be a "
				"postgresql:// URL\n");
		return 2;
	}
	if (sodium_init() < 0)
		return 1;
	return migrate(from, to, records_only) == 0 ? 0 : 1;
}

/*
 * At start, on PostgreSQL: the blob users' records still in DATA's SQLite
 * files while the database has none (a pool moved to PostgreSQL before
 * they moved there, issue 19). Starting then would hide every checkpoint,
 * data set and image, and the GC would take their blobs: GP_ECONFLICT
 * with err saying what to run. 0 when the records are where they belong.
 */
int
gp_coord_records_stranded(struct gp_store *store, const char *data_dir,
    char *err, size_t errlen)
{
	static const char *const count_sql[] = {
	    "SELECT count(*) FROM gp_ckpt_versions",
	    "SELECT count(*) FROM gp_data_objects",
	    "SELECT count(*) FROM gp_image_manifests",
	};
	char path[1200];
	struct gp_meta *m;
	int64_t n = 0, total = 0;
	int a, rc;

	if (store == NULL || store->ops != &gp_store_pg_ops)
		return 0;
	if ((rc = store->ops->meta_open(store, GP_META_CHECKPOINTS, data_dir,
		 &m)) != 0)
		return rc;
	for (a = 0; a < 3 && total == 0; a++)
		if (gp_meta_query_int(m, count_sql[a], &n, "") == 1)
			total += n;
	gp_meta_close(m);
	if (total > 0)
		return 0;
	for (a = 0; a < 3; a++) {
		gp_meta_sqlite_path((enum gp_meta_area)a, data_dir, path,
		    sizeof(path));
		if (access(path, F_OK) != 0)
			continue;
		if (gp_meta_sqlite_open((enum gp_meta_area)a, path, &m) != 0)
			continue;
		n = 0;
		if (gp_meta_query_int(m, count_sql[a], &n, "") == 1 && n > 0) {
			gp_meta_close(m);
			snprintf(err, errlen, "%s holds %lld records of %s that "
			    "the database has not: stop every coordinator and "
			    "run `gpupool coordinator migrate --records-only "
			    "--from %s --to URL` first (docs/operations.md, "
			    "\"Upgrades\")", path, (long long)n,
			    a == GP_META_IMAGES ? "images"
			    : a == GP_META_DATA ? "data sets" : "checkpoints",
			    data_dir);
			return GP_ECONFLICT;
		}
		gp_meta_close(m);
	}
	return 0;
}
