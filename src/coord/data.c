/*
 * data.c: data sets, job outputs and storage quotas (docs/data.md; the
 * HTTP calls in docs/api.md, "Data sets", "Job outputs" and "Quotas").
 *
 * Both are trees stored as manifests over ckpt.c's chunk store: the same
 * per-user chunk directories (a chunk that a user's checkpoints, data
 * sets and outputs share is stored once), the same database connection
 * and ckpt_lock, the same streamed chunk PUT and GC. The tables, beside
 * the checkpoint versions in checkpoints.db:
 *
 *   objects        a data set version (kind 'data': user, name, version)
 *                  or a job's output (kind 'output': job_id, attempt),
 *                  with its manifest
 *   object_chunks  the chunks each object references, with their sizes:
 *                  what the quota counts and the GC keeps
 *   uploads, upload_chunks   uploads in progress
 *   data_next      the next version number of each data set (never reused)
 *   shares         who may read a user's data set besides its owner
 *   quotas         per-user limits set by an admin
 *
 * An upload is three steps. (1) POST /v1/uploads (a user: a data set) or
 * POST /v1/agent/jobs/ID/ATTEMPT/output (the agent: the job's output)
 * with the manifest: the coordinator checks it and the quota (nothing is
 * stored when the quota would be exceeded), records the upload and
 * answers the chunks it lacks. The same manifest begun again (a rerun
 * after a broken connection) finds the same upload, so only what is still
 * missing is sent. (2) PUT /v1/uploads/ID/chunks/HEX: only chunks the
 * manifest lists, at most the size it gives them, verified against their
 * name (ckpt.c). (3) POST /v1/uploads/ID/commit: every chunk must be
 * stored with its size; the quota is checked again and the version (or
 * the output) is made, in one transaction. An upload's chunks are GC
 * references until it is committed or expires (UPLOAD_TTL_MS).
 *
 * Quota: the bytes of the distinct chunks that a user's data set versions
 * and outputs reference. Checkpoints do not count: they are bounded per
 * job (--checkpoint-keep, --checkpoint-max) and expire with the job, and a
 * refused checkpoint would cost the job its progress on the next reclaim.
 *
 * Access. A data set is read by its owner, the users it is shared with
 * and admins; only the owner (or an admin) removes or shares it. A job
 * mounts a data set its owner owns or has been shared (an admin's read
 * right does not extend to jobs); the agent running the job's current
 * attempt reads it for that job only, and only chunks of the pinned
 * version. Outputs are read by the job's owner and admins. Whatever the
 * caller may not read is answered 404, as if it did not exist, so names
 * and chunk hashes cannot be probed.
 *
 * Locking: ckpt_lock for the tables and the chunk files (as ckpt.c), then
 * state.lock for reading, briefly (jobs: owners, attempts, pins).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "blob.h"
#include "ckpt_store.h"
#include "datasets.h"
#include "joblog.h"
#include "route.h"
#include "state.h"
#include "gp.h"
#include "log.h"

#define UPLOAD_BODY_MAX (32u << 20)
#define UPLOAD_TTL_MS   (24 * 3600 * 1000LL)
#define PARTS_MAX       10
#define PART_LEN        100

static int64_t quota_default;        /* bytes; 0: no limit */
static int64_t data_max = 1LL << 40; /* bytes in one version/output */
static int64_t output_retain_ms = 30 * 86400 * 1000LL;

/* data.c's own connection to checkpoints.db (see the top) and its lock. */
static sqlite3 *db;
static pthread_mutex_t data_lock = PTHREAD_MUTEX_INITIALIZER;

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS objects("
    " id INTEGER PRIMARY KEY, user TEXT NOT NULL, kind TEXT NOT NULL,"
    " name TEXT, version INTEGER, job_id INTEGER, attempt INTEGER,"
    " manifest TEXT NOT NULL, bytes INTEGER NOT NULL,"
    " files INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
    "CREATE UNIQUE INDEX IF NOT EXISTS objects_data"
    " ON objects(user, name, version) WHERE kind = 'data';"
    "CREATE UNIQUE INDEX IF NOT EXISTS objects_output"
    " ON objects(job_id) WHERE kind = 'output';"
    "CREATE TABLE IF NOT EXISTS object_chunks("
    " object INTEGER NOT NULL, chunk TEXT NOT NULL, size INTEGER NOT NULL,"
    " PRIMARY KEY(object, chunk)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS object_chunks_chunk"
    " ON object_chunks(chunk);"
    "CREATE TABLE IF NOT EXISTS uploads("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " name TEXT, job_id INTEGER, attempt INTEGER,"
    " creator INTEGER NOT NULL, digest TEXT NOT NULL,"
    " manifest TEXT NOT NULL, bytes INTEGER NOT NULL,"
    " files INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS uploads_digest ON uploads(user, digest);"
    "CREATE TABLE IF NOT EXISTS upload_chunks("
    " upload INTEGER NOT NULL, chunk TEXT NOT NULL, size INTEGER NOT NULL,"
    " PRIMARY KEY(upload, chunk)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS data_next("
    " user TEXT NOT NULL, name TEXT NOT NULL, next INTEGER NOT NULL,"
    " PRIMARY KEY(user, name));"
    "CREATE TABLE IF NOT EXISTS shares("
    " user TEXT NOT NULL, name TEXT NOT NULL, grantee TEXT NOT NULL,"
    " PRIMARY KEY(user, name, grantee));"
    "CREATE TABLE IF NOT EXISTS quotas("
    " user TEXT PRIMARY KEY, bytes INTEGER);";

/* An upload in progress, as stored. */
struct upload {
	int64_t id;
	char user[GP_NAME_MAX + 1];
	char kind[8];
	char name[GP_NAME_MAX + 1];
	int64_t job_id, attempt, creator, bytes, files;
};

/* ---- replies ---- */

/* ---- database (data_lock held) ---- */

/* Sends a stored chunk of user's (404 when absent). */
static enum MHD_Result
reply_chunk(struct MHD_Connection *conn, const char *user, const char *name)
{
	char missing[100];

	snprintf(missing, sizeof(missing), "no chunk %.64s", name);
	return blob_reply(conn, blob_chunks, user, name, missing);
}

static sqlite3_stmt *
prep(const char *sql)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		gp_error("data database prepare error=\"%s\"",
		    sqlite3_errmsg(db));
		return NULL;
	}
	return st;
}

static int
exec_sql(const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		gp_error("data database error=\"%s\"", msg != NULL ? msg : "?");
		sqlite3_free(msg);
		return GP_EIO;
	}
	return 0;
}

/* A JSON string's value, "" for anything else. */
static const char *
str(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

static const char *
col_text(sqlite3_stmt *st, int col)
{
	const char *t = (const char *)sqlite3_column_text(st, col);

	return t != NULL ? t : "";
}

/* One integer from a query with text/int parameters; def when no row. */
static int64_t
query_int(int64_t def, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *st = prep(sql);
	int64_t v = def;
	va_list ap;
	int i;

	if (st == NULL)
		return def;
	va_start(ap, fmt);
	for (i = 0; fmt[i] != '\0'; i++) {
		if (fmt[i] == 's')
			sqlite3_bind_text(st, i + 1, va_arg(ap, const char *),
			    -1, SQLITE_TRANSIENT);
		else
			sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
	}
	va_end(ap);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* ---- access ---- */

static int
shared_with(const char *owner, const char *name, const char *who)
{
	return query_int(0,
	           "SELECT 1 FROM shares WHERE user = ?1 AND "
	           "name = ?2 AND grantee = ?3",
	           "sss", owner, name, who) == 1;
}

/* A user's call (data sets, quotas, outputs): users and admins only. */
static int
user_role(const struct token_entry *who)
{
	return who->role == GP_ROLE_USER || who->role == GP_ROLE_ADMIN;
}

/* Who may read a data set (list, manifests, chunks). */
static int
may_read(const struct token_entry *who, const char *owner, const char *name)
{
	if (who->role == GP_ROLE_ADMIN)
		return 1;
	if (who->role != GP_ROLE_USER)
		return 0;
	return strcmp(who->name, owner) == 0 ||
	    shared_with(owner, name, who->name);
}

/* Whose jobs may mount a data set: its owner and those it is shared with. */
static int
may_mount(const char *job_user, const char *owner, const char *name)
{
	return strcmp(job_user, owner) == 0 ||
	    shared_with(owner, name, job_user);
}

/* Who may change a data set (remove, share): its owner and admins. */
static int
may_change(const struct token_entry *who, const char *owner)
{
	return who->role == GP_ROLE_ADMIN ||
	    (who->role == GP_ROLE_USER && strcmp(who->name, owner) == 0);
}

/* ---- sizes and quotas (data_lock held) ---- */

/* Bytes of the distinct chunks of user's objects, but object skip. */
static int64_t
usage(const char *user, const char *kind, int64_t skip)
{
	return query_int(0,
	    "SELECT COALESCE(SUM(size), 0) FROM (SELECT oc.chunk, "
	    "MAX(oc.size) AS size FROM object_chunks oc JOIN objects o ON "
	    "o.id = oc.object WHERE o.user = ?1 AND o.id != ?2 AND "
	    "(?3 = '' OR o.kind = ?3) GROUP BY oc.chunk)",
	    "sis", user, skip, kind != NULL ? kind : "");
}

/* What upload adds to user's usage: its chunks no object of theirs has. */
static int64_t
upload_adds(int64_t upload, const char *user, int64_t skip)
{
	return query_int(0,
	    "SELECT COALESCE(SUM(uc.size), 0) FROM upload_chunks uc WHERE "
	    "uc.upload = ?1 AND NOT EXISTS (SELECT 1 FROM object_chunks oc "
	    "JOIN objects o ON o.id = oc.object WHERE oc.chunk = uc.chunk "
	    "AND o.user = ?2 AND o.id != ?3)",
	    "isi", upload, user, skip);
}

/* The user's limit in bytes, 0 for none. OUT: *source. */
static int64_t
quota_of(const char *user, const char **source)
{
	sqlite3_stmt *st = prep("SELECT bytes FROM quotas WHERE user = ?");
	int64_t limit = quota_default;

	*source = quota_default > 0 ? "default" : "none";
	if (st == NULL)
		return limit;
	sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		*source = "user";
		limit = sqlite3_column_type(st, 0) == SQLITE_NULL
		    ? 0
		    : sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return limit;
}

/* The 413 answer of a refused upload, with the figures. */
static enum MHD_Result
reply_quota(struct MHD_Connection *conn, const char *user, int64_t used,
    int64_t limit, int64_t needed)
{
	char u[32], l[32], n[32], msg[400];

	gp_format_bytes(used, u, sizeof(u));
	gp_format_bytes(limit, l, sizeof(l));
	gp_format_bytes(needed, n, sizeof(n));
	snprintf(msg, sizeof(msg),
	    "storage quota of user %s exceeded: %s "
	    "used of %s, and this needs %s more (data sets and job outputs "
	    "count; `gpupool quota show`)",
	    user, u, l, n);
	gp_info("upload refused: quota user=%s used=%lld limit=%lld "
	        "needed=%lld",
	    user, (long long)used, (long long)limit, (long long)needed);
	return reply_json(conn, 413,
	    json_pack("{s:s,s:{s:s,s:I,s:I,s:I}}", "error", msg, "quota",
	        "user", user, "used", (json_int_t)used, "limit",
	        (json_int_t)limit, "needed", (json_int_t)needed));
}

/* ---- URLs ---- */

/* Splits url into at most PARTS_MAX parts; returns the count or GP_EINVAL. */
static int
split(const char *url, char parts[][PART_LEN])
{
	const char *p = url, *slash;
	size_t len;
	int n = 0;

	if (*p++ != '/')
		return GP_EINVAL;
	while (*p != '\0') {
		slash = strchr(p, '/');
		len = slash != NULL ? (size_t)(slash - p) : strlen(p);
		if (n == PARTS_MAX || len == 0 || len >= PART_LEN)
			return GP_EINVAL;
		memcpy(parts[n], p, len);
		parts[n][len] = '\0';
		n++;
		p += len;
		if (*p == '/' && *++p == '\0')
			return GP_EINVAL;
	}
	return n;
}

static int
num(const char *text, int64_t *v)
{
	return text[0] >= '1' && text[0] <= '9' &&
	    gp_parse_int(text, 1, INT64_MAX / 2, v) == 0;
}

/* ---- objects (data_lock held) ---- */

/* The id of a data set version (0: the latest). OUT: *version. 0: none. */
static int64_t
data_object(const char *owner, const char *name, int64_t *version)
{
	sqlite3_stmt *st;
	int64_t id = 0;

	st = prep(*version > 0
	        ? "SELECT id, version FROM objects WHERE kind = 'data' AND "
	          "user = ?1 AND name = ?2 AND version = ?3"
	        : "SELECT id, version FROM objects WHERE kind = 'data' AND "
	          "user = ?1 AND name = ?2 ORDER BY version DESC LIMIT 1");
	if (st == NULL)
		return 0;
	sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	if (*version > 0)
		sqlite3_bind_int64(st, 3, *version);
	if (sqlite3_step(st) == SQLITE_ROW) {
		id = sqlite3_column_int64(st, 0);
		*version = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	return id;
}

/* The manifest of object id with its metadata; NULL when gone. */
static json_t *
object_manifest(int64_t id)
{
	sqlite3_stmt *st;
	json_t *m = NULL;
	char tm[40];

	st = prep("SELECT manifest, kind, user, name, version, job_id, "
	          "attempt, bytes, created_ms FROM objects WHERE id = ?");
	if (st == NULL)
		return NULL;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    (m = json_loads(col_text(st, 0), 0, NULL)) != NULL) {
		gp_format_time(sqlite3_column_int64(st, 8), tm, sizeof(tm));
		if (strcmp(col_text(st, 1), "data") == 0) {
			json_object_set_new(m, "owner",
			    json_string(col_text(st, 2)));
			json_object_set_new(m, "name",
			    json_string(col_text(st, 3)));
			json_object_set_new(m, "version",
			    json_integer(sqlite3_column_int64(st, 4)));
		} else {
			json_object_set_new(m, "job_id",
			    json_integer(sqlite3_column_int64(st, 5)));
			json_object_set_new(m, "attempt",
			    json_integer(sqlite3_column_int64(st, 6)));
		}
		json_object_set_new(m, "bytes",
		    json_integer(sqlite3_column_int64(st, 7)));
		json_object_set_new(m, "created_at", json_string(tm));
	}
	sqlite3_finalize(st);
	return m;
}

static int
object_has_chunk(int64_t id, const char *chunk)
{
	return query_int(0,
	           "SELECT 1 FROM object_chunks WHERE object = ?1 "
	           "AND chunk = ?2",
	           "is", id, chunk) == 1;
}

/* Deletes object id and its chunk list. */
static int
object_delete(int64_t id)
{
	sqlite3_stmt *st;
	int ok = 1;

	st = prep("DELETE FROM object_chunks WHERE object = ?");
	if (st != NULL) {
		sqlite3_bind_int64(st, 1, id);
		ok = sqlite3_step(st) == SQLITE_DONE;
		sqlite3_finalize(st);
	}
	st = prep("DELETE FROM objects WHERE id = ?");
	if (st != NULL) {
		sqlite3_bind_int64(st, 1, id);
		ok = ok && sqlite3_step(st) == SQLITE_DONE;
		sqlite3_finalize(st);
	}
	return st != NULL && ok ? 0 : GP_EIO;
}

static void
upload_delete(int64_t id)
{
	sqlite3_stmt *st;

	if ((st = prep("DELETE FROM upload_chunks WHERE upload = ?")) != NULL) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_step(st);
		sqlite3_finalize(st);
	}
	if ((st = prep("DELETE FROM uploads WHERE id = ?")) != NULL) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_step(st);
		sqlite3_finalize(st);
	}
}

static int
upload_load(int64_t id, struct upload *u)
{
	sqlite3_stmt *st;
	int found = 0;

	st = prep("SELECT user, kind, name, job_id, attempt, creator, bytes, "
	          "files FROM uploads WHERE id = ?");
	if (st == NULL)
		return 0;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		memset(u, 0, sizeof(*u));
		u->id = id;
		gp_strlcpy(u->user, col_text(st, 0), sizeof(u->user));
		gp_strlcpy(u->kind, col_text(st, 1), sizeof(u->kind));
		gp_strlcpy(u->name, col_text(st, 2), sizeof(u->name));
		u->job_id = sqlite3_column_int64(st, 3);
		u->attempt = sqlite3_column_int64(st, 4);
		u->creator = sqlite3_column_int64(st, 5);
		u->bytes = sqlite3_column_int64(st, 6);
		u->files = sqlite3_column_int64(st, 7);
		found = 1;
	}
	sqlite3_finalize(st);
	return found;
}

/*
 * May who continue upload u (PUT, commit)? A data set upload: the user
 * who began it. An output: the agent token that began it, while the
 * attempt is still the job's current one (data_lock held; takes
 * state.lock briefly). Returns 0 or the HTTP status with err.
 */
static int
upload_access(const struct token_entry *who, const struct upload *u, char *err,
    size_t errlen)
{
	char user[GP_NAME_MAX + 1];
	int kill;

	if (strcmp(u->kind, "data") == 0) {
		if (!user_role(who) || strcmp(who->name, u->user) != 0) {
			snprintf(err, errlen, "no upload %lld",
			    (long long)u->id);
			return 404;
		}
		return 0;
	}
	if (who->id != u->creator) {
		snprintf(err, errlen, "no upload %lld", (long long)u->id);
		return 404;
	}
	return ckpt_agent_job(who, u->job_id, u->attempt, 1, user, err, errlen,
	    &kill);
}

/* ---- uploads ---- */

/*
 * Begins (or finds again) an upload of manifest m (checked) as user.
 * kind "data" with name, or "output" with job and attempt. Answers 201
 * {"upload", "missing", "bytes", "files"} or the refusal.
 */
static enum MHD_Result
upload_begin(struct MHD_Connection *conn, const struct token_entry *who,
    const char *user, const char *kind, const char *name, int64_t job,
    int64_t attempt, json_t *m, const struct gp_ckpt_totals *tot)
{
	unsigned char hash[32];
	char digest[65], *text;
	sqlite3_stmt *st = NULL, *ins = NULL;
	json_t *f, *c, *missing = NULL;
	const char *cname;
	int64_t id = 0, skip = 0, limit, used, adds, size, want;
	const char *source;
	enum MHD_Result rc;
	size_t i, k;
	int status = 500;

	if ((text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return reply_error(conn, 503, "out of memory");
	crypto_generichash(hash, sizeof(hash), (unsigned char *)text,
	    strlen(text), NULL, 0);
	sodium_bin2hex(digest, sizeof(digest), hash, sizeof(hash));
	blob_lock(blob_chunks);
	pthread_mutex_lock(&data_lock);
	if (strcmp(kind, "output") == 0)
		skip = query_int(0,
		    "SELECT id FROM objects WHERE kind = "
		    "'output' AND job_id = ?",
		    "i", job);
	/* The same upload begun again: carry on with it. */
	id = query_int(0,
	    "SELECT id FROM uploads WHERE user = ?1 AND "
	    "digest = ?2 AND kind = ?3 AND COALESCE(name, '') = "
	    "?4 AND COALESCE(job_id, 0) = ?5 AND "
	    "COALESCE(attempt, 0) = ?6",
	    "ssssii", user, digest, kind, name != NULL ? name : "", job,
	    attempt);
	if (id > 0) {
		st = prep("UPDATE uploads SET created_ms = ?1, creator = ?2 "
		          "WHERE id = ?3");
		if (st != NULL) {
			sqlite3_bind_int64(st, 1, gp_now_ms());
			sqlite3_bind_int64(st, 2, who->id);
			sqlite3_bind_int64(st, 3, id);
			sqlite3_step(st);
			sqlite3_finalize(st);
			st = NULL;
		}
	} else {
		if (exec_sql("BEGIN IMMEDIATE") != 0)
			goto unlock;
		st = prep("INSERT INTO uploads(user, kind, name, job_id, "
		          "attempt, creator, digest, manifest, bytes, files, "
		          "created_ms) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
		ins = prep("INSERT OR IGNORE INTO upload_chunks VALUES(?,?,?)");
		if (st == NULL || ins == NULL)
			goto rollback;
		sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
		if (name != NULL)
			sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
		if (job > 0) {
			sqlite3_bind_int64(st, 4, job);
			sqlite3_bind_int64(st, 5, attempt);
		}
		sqlite3_bind_int64(st, 6, who->id);
		sqlite3_bind_text(st, 7, digest, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 8, text, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 9, tot->bytes);
		sqlite3_bind_int64(st, 10, tot->files);
		sqlite3_bind_int64(st, 11, gp_now_ms());
		if (sqlite3_step(st) != SQLITE_DONE)
			goto rollback;
		id = sqlite3_last_insert_rowid(db);
		json_array_foreach(json_object_get(m, "files"), i, f)
		{
			size = json_integer_value(json_object_get(f, "size"));
			json_array_foreach(json_object_get(f, "chunks"), k, c)
			{
				want = size - (int64_t)k * GP_CKPT_CHUNK_SIZE;
				sqlite3_reset(ins);
				sqlite3_bind_int64(ins, 1, id);
				sqlite3_bind_text(ins, 2, json_string_value(c),
				    -1, SQLITE_STATIC);
				sqlite3_bind_int64(ins, 3,
				    want > GP_CKPT_CHUNK_SIZE
				        ? GP_CKPT_CHUNK_SIZE
				        : want);
				if (sqlite3_step(ins) != SQLITE_DONE)
					goto rollback;
			}
		}
		sqlite3_finalize(st);
		sqlite3_finalize(ins);
		st = ins = NULL;
		/* The quota, before a single byte is sent. */
		limit = quota_of(user, &source);
		if (limit > 0) {
			used = usage(user, NULL, skip);
			adds = upload_adds(id, user, skip);
			if (adds > 0 && used + adds > limit) {
				exec_sql("ROLLBACK");
				pthread_mutex_unlock(&data_lock);
				blob_unlock(blob_chunks);
				free(text);
				return reply_quota(conn, user, used, limit,
				    adds);
			}
		}
		if (exec_sql("COMMIT") != 0)
			goto rollback;
	}
	/* What the store lacks (present ones are young again, see GC). */
	missing = json_array();
	st = prep("SELECT chunk FROM upload_chunks WHERE upload = ?");
	if (st == NULL || missing == NULL)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		cname = col_text(st, 0);
		if (blob_touch(blob_chunks, user, cname, 1) != 0)
			json_array_append_new(missing, json_string(cname));
	}
	sqlite3_finalize(st);
	st = NULL;
	status = 0;
	goto unlock;
rollback:
	sqlite3_finalize(st);
	sqlite3_finalize(ins);
	st = ins = NULL;
	exec_sql("ROLLBACK");
unlock:
	pthread_mutex_unlock(&data_lock);
	blob_unlock(blob_chunks);
	free(text);
	if (status != 0) {
		json_decref(missing);
		return reply_error(conn, status, "cannot record the upload");
	}
	gp_info("upload begun id=%lld user=%s kind=%s name=%s job=%lld "
	        "files=%lld bytes=%lld missing=%zu",
	    (long long)id, user, kind, name != NULL ? name : "-",
	    (long long)job, (long long)tot->files, (long long)tot->bytes,
	    json_array_size(missing));
	rc = reply_json(conn, 201,
	    json_pack("{s:I,s:o,s:I,s:I}", "upload", (json_int_t)id, "missing",
	        missing, "bytes", (json_int_t)tot->bytes, "files",
	        (json_int_t)tot->files));
	return rc;
}

/* POST /v1/uploads: a data set version. */
static enum MHD_Result
handle_upload_data(struct MHD_Connection *conn, struct request *req)
{
	struct gp_ckpt_totals tot;
	char name[GP_CKPT_DATA_NAME_LEN], err[256];
	enum MHD_Result rc;
	json_t *m;
	int ret;

	if (!user_role(req->auth))
		return reply_error(conn, 403, "data sets need a user token");
	ret = gp_upload_request_decode(req->body.data ? req->body.data : "",
	    req->body.len, 1, data_max, name, &m, &tot, err, sizeof(err));
	if (ret != 0)
		return reply_error(conn, ret == GP_ETOOBIG ? 413 : 400, "%s",
		    err);
	rc = upload_begin(conn, req->auth, req->auth->name, "data", name, 0, 0,
	    m, &tot);
	json_decref(m);
	return rc;
}

/* POST /v1/agent/jobs/ID/ATTEMPT/output: the job's output. */
static enum MHD_Result
handle_upload_output(struct MHD_Connection *conn, struct request *req,
    int64_t id, int64_t attempt)
{
	struct gp_ckpt_totals tot;
	char user[GP_NAME_MAX + 1], name[GP_CKPT_DATA_NAME_LEN], err[256];
	enum MHD_Result rc;
	json_t *m;
	int ret, status, kill;

	status = ckpt_agent_job(req->auth, id, attempt, 1, user, err,
	    sizeof(err), &kill);
	if (status == 409 && kill)
		return reply_json(conn, 409,
		    json_pack("{s:s,s:b}", "error", err, "kill", 1));
	if (status != 0)
		return reply_error(conn, status, "%s", err);
	ret = gp_upload_request_decode(req->body.data ? req->body.data : "",
	    req->body.len, 0, data_max, name, &m, &tot, err, sizeof(err));
	if (ret != 0)
		return reply_error(conn, ret == GP_ETOOBIG ? 413 : 400, "%s",
		    err);
	rc = upload_begin(conn, req->auth, user, "output", NULL, id, attempt, m,
	    &tot);
	json_decref(m);
	return rc;
}

void
data_upload_begin(struct request *req, const char *url)
{
	char p[PARTS_MAX][PART_LEN], err[256];
	struct blob_upload *cu;
	struct upload u;
	int64_t id, size = -1;
	int status = 0, found;

	if ((cu = ckpt_chunk_put_new(req)) == NULL || req->auth == NULL)
		return;
	if (split(url, p) != 5 || !num(p[2], &id) ||
	    !gp_ckpt_name_valid(p[4])) {
		blob_upload_refuse(cu, 404,
		    "chunks are named by 64 lowercase hex digits");
		return;
	}
	pthread_mutex_lock(&data_lock);
	found = upload_load(id, &u);
	if (found)
		status = upload_access(req->auth, &u, err, sizeof(err));
	if (found && status == 0)
		size = query_int(-1,
		    "SELECT size FROM upload_chunks WHERE "
		    "upload = ?1 AND chunk = ?2",
		    "is", id, p[4]);
	pthread_mutex_unlock(&data_lock);
	if (!found) {
		snprintf(err, sizeof(err), "no upload %lld", (long long)id);
		status = 404;
	} else if (status == 0 && size < 0) {
		snprintf(err, sizeof(err),
		    "chunk %.16s... is not in upload "
		    "%lld's manifest",
		    p[4], (long long)id);
		status = 400;
	}
	if (status != 0) {
		blob_upload_refuse(cu, status, err);
		return;
	}
	blob_upload_open(cu, blob_chunks, u.user, p[4], size,
	    size == GP_CKPT_CHUNK_SIZE ? "a chunk is at most 4 MiB"
	                               : "the chunk is larger than the "
	                                 "manifest says");
}

/* POST /v1/uploads/ID/commit. */
static enum MHD_Result
handle_commit(struct MHD_Connection *conn, struct request *req, int64_t id)
{
	char err[400], b[32];
	sqlite3_stmt *st = NULL;
	struct upload u;
	struct stat sb;
	int64_t version = 0, object, limit, after, before, old = 0;
	const char *source;
	int status = 500;

	/* No chunk goes between the check and the insert (blob.h). */
	blob_lock(blob_chunks);
	pthread_mutex_lock(&data_lock);
	if (!upload_load(id, &u)) {
		pthread_mutex_unlock(&data_lock);
		blob_unlock(blob_chunks);
		return reply_error(conn, 404, "no upload %lld", (long long)id);
	}
	if ((status = upload_access(req->auth, &u, err, sizeof(err))) != 0)
		goto unlock;
	/* Every chunk stored, with the size the manifest gives it. */
	status = 500;
	snprintf(err, sizeof(err), "cannot read the upload");
	if ((st = prep("SELECT chunk, size FROM upload_chunks WHERE "
	               "upload = ?")) == NULL)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (blob_stat(blob_chunks, u.user, col_text(st, 0), &sb) != 0 ||
		    sb.st_size != sqlite3_column_int64(st, 1)) {
			snprintf(err, sizeof(err),
			    "chunk %s is not stored: "
			    "upload it first",
			    col_text(st, 0));
			status = 400;
			goto unlock;
		}
	}
	sqlite3_finalize(st);
	st = NULL;
	/*
	 * The chunks' directory entries durable before the object that
	 * names them is (blob.h, blob_sync_owner).
	 */
	snprintf(err, sizeof(err), "cannot make the chunks durable");
	if (blob_sync_owner(blob_chunks, u.user) != 0)
		goto unlock;
	snprintf(err, sizeof(err), "cannot record the %s",
	    strcmp(u.kind, "data") == 0 ? "version" : "output");
	if (exec_sql("BEGIN IMMEDIATE") != 0)
		goto unlock;
	if (strcmp(u.kind, "data") == 0) {
		version = query_int(1,
		    "SELECT MAX(COALESCE((SELECT next FROM "
		    "data_next WHERE user = ?1 AND name = "
		    "?2), 1), COALESCE((SELECT MAX(version) "
		    "+ 1 FROM objects WHERE kind = 'data' AND "
		    "user = ?1 AND name = ?2), 1))",
		    "ss", u.user, u.name);
		st = prep("INSERT OR REPLACE INTO data_next VALUES(?, ?, ?)");
		if (st == NULL)
			goto rollback;
		sqlite3_bind_text(st, 1, u.user, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, u.name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, version + 1);
		if (sqlite3_step(st) != SQLITE_DONE)
			goto rollback;
		sqlite3_finalize(st);
		st = NULL;
	} else {
		/* A job has one output: the last one stored. */
		old = query_int(0,
		    "SELECT id FROM objects WHERE kind = "
		    "'output' AND job_id = ?",
		    "i", u.job_id);
		if (old > 0 && object_delete(old) != 0)
			goto rollback;
	}
	st = prep("INSERT INTO objects(user, kind, name, version, job_id, "
	          "attempt, manifest, bytes, files, created_ms) SELECT user, "
	          "kind, name, ?2, job_id, attempt, manifest, bytes, files, ?3 "
	          "FROM uploads WHERE id = ?1");
	if (st == NULL)
		goto rollback;
	sqlite3_bind_int64(st, 1, id);
	if (version > 0)
		sqlite3_bind_int64(st, 2, version);
	sqlite3_bind_int64(st, 3, gp_now_ms());
	if (sqlite3_step(st) != SQLITE_DONE)
		goto rollback;
	sqlite3_finalize(st);
	object = sqlite3_last_insert_rowid(db);
	st = prep("INSERT INTO object_chunks SELECT ?1, chunk, size FROM "
	          "upload_chunks WHERE upload = ?2");
	if (st == NULL)
		goto rollback;
	sqlite3_bind_int64(st, 1, object);
	sqlite3_bind_int64(st, 2, id);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto rollback;
	sqlite3_finalize(st);
	st = NULL;
	upload_delete(id);
	limit = quota_of(u.user, &source);
	if (limit > 0 && (after = usage(u.user, NULL, 0)) > limit &&
	    after > (before = usage(u.user, NULL, object))) {
		/* The quota changed meanwhile, or another upload won. */
		exec_sql("ROLLBACK");
		upload_delete(id);
		pthread_mutex_unlock(&data_lock);
		blob_unlock(blob_chunks);
		blob_gc_mark(blob_chunks, u.user);
		return reply_quota(conn, u.user, before, limit, after - before);
	}
	if (exec_sql("COMMIT") != 0)
		goto rollback;
	status = 0;
	goto unlock;
rollback:
	sqlite3_finalize(st);
	st = NULL;
	exec_sql("ROLLBACK");
unlock:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&data_lock);
	blob_unlock(blob_chunks);
	if (status != 0) {
		gp_warn("upload commit refused id=%lld status=%d error=\"%s\"",
		    (long long)id, status, err);
		return reply_error(conn, status, "%s", err);
	}
	if (old > 0)
		blob_gc_mark(blob_chunks, u.user);
	gp_format_bytes(u.bytes, b, sizeof(b));
	if (version > 0) {
		gp_info("data set version stored user=%s name=%s version=%lld "
		        "files=%lld bytes=%lld",
		    u.user, u.name, (long long)version, (long long)u.files,
		    (long long)u.bytes);
		return reply_json(conn, 200,
		    json_pack("{s:s,s:s,s:I,s:I,s:I}", "owner", u.user, "name",
		        u.name, "version", (json_int_t)version, "bytes",
		        (json_int_t)u.bytes, "files", (json_int_t)u.files));
	}
	gp_info("job output stored job=%lld attempt=%lld files=%lld "
	        "bytes=%lld",
	    (long long)u.job_id, (long long)u.attempt, (long long)u.files,
	    (long long)u.bytes);
	return reply_json(conn, 200,
	    json_pack("{s:I,s:I,s:I,s:I}", "job_id", (json_int_t)u.job_id,
	        "attempt", (json_int_t)u.attempt, "bytes", (json_int_t)u.bytes,
	        "files", (json_int_t)u.files));
}

/* ---- data sets ---- */

static json_t *
shares_of(const char *owner, const char *name)
{
	json_t *list = json_array();
	sqlite3_stmt *st;

	st = prep("SELECT grantee FROM shares WHERE user = ? AND name = ? "
	          "ORDER BY grantee");
	if (st == NULL)
		return list;
	sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(list, json_string(col_text(st, 0)));
	sqlite3_finalize(st);
	return list;
}

/* GET /v1/data[?all=1]: the caller's data sets and those shared. */
static enum MHD_Result
handle_list(struct MHD_Connection *conn, struct request *req)
{
	const char *all =
	    MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "all");
	int every = all != NULL && strcmp(all, "0") != 0 &&
	    req->auth->role == GP_ROLE_ADMIN;
	json_t *list = json_array(), *o;
	sqlite3_stmt *st;
	char tm[40];

	pthread_mutex_lock(&data_lock);
	st = prep("SELECT o.user, o.name, o.version, o.bytes, o.files, "
	          "o.created_ms, (SELECT COUNT(*) FROM objects v WHERE "
	          "v.kind = 'data' AND v.user = o.user AND v.name = o.name) "
	          "FROM objects o WHERE o.kind = 'data' AND o.version = "
	          "(SELECT MAX(version) FROM objects v WHERE v.kind = 'data' "
	          "AND v.user = o.user AND v.name = o.name) AND (?1 OR "
	          "o.user = ?2 OR EXISTS (SELECT 1 FROM shares s WHERE "
	          "s.user = o.user AND s.name = o.name AND s.grantee = ?2)) "
	          "ORDER BY o.user, o.name");
	if (st != NULL) {
		sqlite3_bind_int(st, 1, every);
		sqlite3_bind_text(st, 2, req->auth->name, -1, SQLITE_STATIC);
		while (sqlite3_step(st) == SQLITE_ROW) {
			gp_format_time(sqlite3_column_int64(st, 5), tm,
			    sizeof(tm));
			o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:s,s:I}", "owner",
			    col_text(st, 0), "name", col_text(st, 1), "version",
			    (json_int_t)sqlite3_column_int64(st, 2), "bytes",
			    (json_int_t)sqlite3_column_int64(st, 3), "files",
			    (json_int_t)sqlite3_column_int64(st, 4),
			    "created_at", tm, "versions",
			    (json_int_t)sqlite3_column_int64(st, 6));
			if (o != NULL && may_change(req->auth, col_text(st, 0)))
				json_object_set_new(o, "shared_with",
				    shares_of(col_text(st, 0),
				        col_text(st, 1)));
			json_array_append_new(list, o);
		}
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&data_lock);
	return reply_json(conn, 200, json_pack("{s:o}", "data_sets", list));
}

/* GET /v1/data/OWNER/NAME: its versions. */
static enum MHD_Result
handle_versions(struct MHD_Connection *conn, struct request *req,
    const char *owner, const char *name)
{
	json_t *list = json_array(), *o = NULL;
	sqlite3_stmt *st;
	char tm[40];

	pthread_mutex_lock(&data_lock);
	if (may_read(req->auth, owner, name) &&
	    (st = prep("SELECT version, bytes, files, created_ms FROM objects "
	               "WHERE kind = 'data' AND user = ? AND name = ? ORDER BY "
	               "version")) != NULL) {
		sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		while (sqlite3_step(st) == SQLITE_ROW) {
			gp_format_time(sqlite3_column_int64(st, 3), tm,
			    sizeof(tm));
			json_array_append_new(list,
			    json_pack("{s:I,s:I,s:I,s:s}", "version",
			        (json_int_t)sqlite3_column_int64(st, 0),
			        "bytes",
			        (json_int_t)sqlite3_column_int64(st, 1),
			        "files",
			        (json_int_t)sqlite3_column_int64(st, 2),
			        "created_at", tm));
		}
		sqlite3_finalize(st);
	}
	if (json_array_size(list) > 0) {
		o = json_pack("{s:s,s:s,s:O}", "owner", owner, "name", name,
		    "versions", list);
		if (o != NULL && may_change(req->auth, owner))
			json_object_set_new(o, "shared_with",
			    shares_of(owner, name));
	}
	pthread_mutex_unlock(&data_lock);
	json_decref(list);
	if (o == NULL)
		return reply_error(conn, 404, "no data set %s/%s", owner, name);
	return reply_json(conn, 200, o);
}

/* GET /v1/data/OWNER/NAME/VERSION[/chunks/HEX]. */
static enum MHD_Result
handle_read(struct MHD_Connection *conn, struct request *req, const char *owner,
    const char *name, const char *vtext, const char *chunk)
{
	int64_t version = 0, id = 0;
	json_t *m = NULL;
	int ok;

	if (strcmp(vtext, "latest") != 0 && !num(vtext, &version))
		return reply_error(conn, 404,
		    "no version '%.32s' of data set "
		    "%s/%s",
		    vtext, owner, name);
	pthread_mutex_lock(&data_lock);
	if (may_read(req->auth, owner, name))
		id = data_object(owner, name, &version);
	ok = id > 0 && (chunk == NULL || object_has_chunk(id, chunk));
	if (ok && chunk == NULL)
		m = object_manifest(id);
	pthread_mutex_unlock(&data_lock);
	if (!ok)
		return chunk != NULL && id > 0
		    ? reply_error(conn, 404, "no chunk %.64s", chunk)
		    : reply_error(conn, 404, "no data set %s/%s%s%s", owner,
		          name, strcmp(vtext, "latest") ? "@" : "",
		          strcmp(vtext, "latest") ? vtext : "");
	if (chunk != NULL)
		return reply_chunk(conn, owner, chunk);
	if (m == NULL)
		return reply_error(conn, 500, "cannot read the manifest");
	return reply_json(conn, 200, m);
}

/*
 * The unfinished jobs that pin owner/name (version: that one; 0: any),
 * as "12, 14" in out; 0 when none (data_lock held; takes state.lock).
 */
static int
jobs_using(const char *owner, const char *name, int64_t version, char *out,
    size_t len)
{
	struct job *job;
	json_t *d;
	size_t i, used = 0;
	int64_t c = 0;
	int n = 0;

	out[0] = '\0';
	pthread_rwlock_rdlock(&state.lock);
	while ((job = state_job_next(&c)) != NULL) {
		if (job_finished(job))
			continue;
		json_array_foreach(job->spec.data, i, d)
		{
			if (strcmp(str(json_object_get(d, "owner")), owner) !=
			        0 ||
			    strcmp(str(json_object_get(d, "name")), name) !=
			        0 ||
			    (version > 0 &&
			        json_integer_value(
			            json_object_get(d, "version")) != version))
				continue;
			if (used + 24 < len)
				used += (size_t)snprintf(out + used, len - used,
				    "%s%lld", n ? ", " : "", (long long)job->id);
			n++;
			break;
		}
	}
	pthread_rwlock_unlock(&state.lock);
	return n;
}

/* DELETE /v1/data/OWNER/NAME[/VERSION]. */
static enum MHD_Result
handle_remove(struct MHD_Connection *conn, struct request *req,
    const char *owner, const char *name, const char *vtext)
{
	char jobs[256];
	sqlite3_stmt *st;
	int64_t version = 0, id, removed = 0;
	int readable, status = 0;

	if (vtext != NULL && !num(vtext, &version))
		return reply_error(conn, 404,
		    "no version '%.32s' of data set "
		    "%s/%s",
		    vtext, owner, name);
	pthread_mutex_lock(&data_lock);
	readable = may_read(req->auth, owner, name);
	if (!readable || data_object(owner, name, &(int64_t){version}) == 0) {
		status = 404;
	} else if (!may_change(req->auth, owner)) {
		status = 403;
	} else if (jobs_using(owner, name, version, jobs, sizeof(jobs)) > 0) {
		status = 409;
	} else if (exec_sql("BEGIN IMMEDIATE") == 0) {
		st = prep("SELECT id FROM objects WHERE kind = 'data' AND "
		          "user = ?1 AND name = ?2 AND (?3 = 0 OR version = "
		          "?3)");
		while (st != NULL) {
			sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 3, version);
			if (sqlite3_step(st) != SQLITE_ROW)
				break;
			id = sqlite3_column_int64(st, 0);
			sqlite3_reset(st);
			if (object_delete(id) != 0)
				break;
			removed++;
		}
		sqlite3_finalize(st);
		/* The last version gone: so are its shares. */
		if (data_object(owner, name, &(int64_t){0}) == 0 &&
		    (st = prep("DELETE FROM shares WHERE user = ? AND "
		               "name = ?")) != NULL) {
			sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
			sqlite3_step(st);
			sqlite3_finalize(st);
		}
		if (exec_sql("COMMIT") != 0) {
			exec_sql("ROLLBACK");
			status = 500;
		}
	} else {
		status = 500;
	}
	pthread_mutex_unlock(&data_lock);
	switch (status) {
	case 404:
		return reply_error(conn, 404, "no data set %s/%s%s%s", owner,
		    name, vtext ? "@" : "", vtext ? vtext : "");
	case 403:
		return reply_error(conn, 403,
		    "only the owner of %s/%s (or an "
		    "admin) may remove it",
		    owner, name);
	case 409:
		return reply_error(conn, 409,
		    "data set %s/%s%s%s is used by "
		    "queued or running jobs (%s): cancel them or wait",
		    owner, name, vtext ? "@" : "", vtext ? vtext : "", jobs);
	case 500:
		return reply_error(conn, 500, "cannot remove the data set");
	}
	blob_gc_mark(blob_chunks, owner);
	gp_info("data set removed user=%s name=%s version=%lld versions=%lld "
	        "by=%s",
	    owner, name, (long long)version, (long long)removed,
	    req->auth->name);
	return reply_json(conn, 200,
	    json_pack("{s:s,s:s,s:I}", "owner", owner, "name", name, "removed",
	        (json_int_t)removed));
}

/* POST /v1/data/OWNER/NAME/share|unshare {"user": U}. */
static enum MHD_Result
handle_share(struct MHD_Connection *conn, struct request *req,
    const char *owner, const char *name, int share)
{
	char grantee[GP_CKPT_DATA_NAME_LEN], err[200];
	json_t *shares = NULL;
	sqlite3_stmt *st;
	int status = 0;

	if (gp_share_request_decode(req->body.data ? req->body.data : "",
	        req->body.len, grantee, err, sizeof(err)) != 0)
		return reply_error(conn, 400, "%s", err);
	pthread_mutex_lock(&data_lock);
	if (!may_read(req->auth, owner, name) ||
	    data_object(owner, name, &(int64_t){0}) == 0)
		status = 404;
	else if (!may_change(req->auth, owner))
		status = 403;
	else if (strcmp(grantee, owner) == 0)
		status = 400;
	else if ((st = prep(share ? "INSERT OR IGNORE INTO shares "
	                            "VALUES(?, ?, ?)"
	                          : "DELETE FROM shares WHERE user = ? AND "
	                            "name = ? AND grantee = ?")) != NULL) {
		sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, grantee, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			status = 500;
		sqlite3_finalize(st);
		shares = shares_of(owner, name);
	} else {
		status = 500;
	}
	pthread_mutex_unlock(&data_lock);
	if (status == 0)
		gp_info("data set %s user=%s name=%s grantee=%s by=%s",
		    share ? "shared" : "unshared", owner, name, grantee,
		    req->auth->name);
	switch (status) {
	case 0:
		return reply_json(conn, 200,
		    json_pack("{s:s,s:s,s:o}", "owner", owner, "name", name,
		        "shared_with", shares));
	case 404:
		return reply_error(conn, 404, "no data set %s/%s", owner, name);
	case 403:
		return reply_error(conn, 403,
		    "only the owner of %s/%s (or an "
		    "admin) may share it",
		    owner, name);
	case 400:
		return reply_error(conn, 400, "%s owns %s/%s already", owner,
		    owner, name);
	}
	json_decref(shares);
	return reply_error(conn, 500, "cannot change the shares");
}

/* ---- quotas ---- */

static enum MHD_Result
handle_quota(struct MHD_Connection *conn, struct request *req, const char *user,
    const char *method)
{
	char err[200];
	const char *source;
	sqlite3_stmt *st;
	int64_t limit, bytes = 0;
	int ok = 1, post = strcmp(method, "POST") == 0;
	json_t *o;

	if (strcmp(method, "GET") != 0) {
		if (req->auth->role != GP_ROLE_ADMIN)
			return reply_error(conn, 403,
			    "only an admin may set "
			    "quotas");
		if (!post && strcmp(method, "DELETE") != 0)
			return reply_error(conn, 405,
			    "method %.16s not "
			    "allowed",
			    method);
		if (post &&
		    gp_quota_request_decode(req->body.data ? req->body.data
		                                           : "",
		        req->body.len, &bytes, err, sizeof(err)) != 0)
			return reply_error(conn, 400, "%s", err);
		pthread_mutex_lock(&data_lock);
		st = prep(post ? "INSERT OR REPLACE INTO quotas VALUES(?, ?)"
		               : "DELETE FROM quotas WHERE user = ?");
		if (st != NULL) {
			sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
			if (post && bytes > 0)
				sqlite3_bind_int64(st, 2, bytes);
			else if (post)
				sqlite3_bind_null(st, 2);
			ok = sqlite3_step(st) == SQLITE_DONE;
			sqlite3_finalize(st);
		}
		pthread_mutex_unlock(&data_lock);
		if (st == NULL || !ok)
			return reply_error(conn, 500, "cannot set the quota");
		gp_info("quota set user=%s bytes=%s%lld by=%s", user,
		    post ? "" : "default:", (long long)bytes, req->auth->name);
	} else if (req->auth->role != GP_ROLE_ADMIN &&
	    (req->auth->role != GP_ROLE_USER ||
	        strcmp(req->auth->name, user) != 0)) {
		return reply_error(conn, 403,
		    "you may see your own quota "
		    "only");
	}
	pthread_mutex_lock(&data_lock);
	limit = quota_of(user, &source);
	o = json_pack("{s:s,s:o,s:s,s:I,s:I,s:I,s:I,s:I}", "user", user,
	    "limit", limit > 0 ? json_integer(limit) : json_null(), "source",
	    source, "used", (json_int_t)usage(user, NULL, 0), "data_bytes",
	    (json_int_t)usage(user, "data", 0), "output_bytes",
	    (json_int_t)usage(user, "output", 0), "data_versions",
	    (json_int_t)query_int(0,
	        "SELECT COUNT(*) FROM objects WHERE "
	        "user = ? AND kind = 'data'",
	        "s", user),
	    "outputs",
	    (json_int_t)query_int(0,
	        "SELECT COUNT(*) FROM objects WHERE "
	        "user = ? AND kind = 'output'",
	        "s", user));
	pthread_mutex_unlock(&data_lock);
	return reply_json(conn, 200, o);
}

/* ---- job outputs ---- */

/* The job's owner, when who may read its output; 0 otherwise. */
static int
output_reader(const struct token_entry *who, int64_t id, char *user)
{
	enum job_state st;
	int64_t fin;

	/* In memory or (it left: min-job-age) from state.db. */
	if (state_job_brief(id, user, &st, &fin) != 0)
		return 0;
	return who->role == GP_ROLE_ADMIN ||
	    (who->role == GP_ROLE_USER && strcmp(user, who->name) == 0);
}

/* GET|DELETE /v1/jobs/ID/output[/chunks/HEX]. */
static enum MHD_Result
handle_output(struct MHD_Connection *conn, struct request *req, int64_t job,
    const char *chunk, const char *method)
{
	char user[GP_NAME_MAX + 1];
	int64_t id;
	json_t *m = NULL;
	int ok, del = strcmp(method, "DELETE") == 0;

	if (!output_reader(req->auth, job, user))
		return reply_error(conn, 404, "no job %lld", (long long)job);
	if (!del && strcmp(method, "GET") != 0)
		return reply_error(conn, 405, "method %.16s not allowed",
		    method);
	pthread_mutex_lock(&data_lock);
	id = query_int(0,
	    "SELECT id FROM objects WHERE kind = 'output' AND "
	    "job_id = ?",
	    "i", job);
	ok = id > 0 && (chunk == NULL || object_has_chunk(id, chunk));
	if (ok && del)
		ok = object_delete(id) == 0;
	else if (ok && chunk == NULL)
		m = object_manifest(id);
	pthread_mutex_unlock(&data_lock);
	if (!ok)
		return chunk != NULL && id > 0
		    ? reply_error(conn, 404, "no chunk %.64s", chunk)
		    : reply_error(conn, 404, "job %lld has no stored output",
		          (long long)job);
	if (del) {
		blob_gc_mark(blob_chunks, user);
		gp_info("job output removed job=%lld by=%s", (long long)job,
		    req->auth->name);
		return reply_json(conn, 200,
		    json_pack("{s:I,s:b}", "job_id", (json_int_t)job, "removed",
		        1));
	}
	if (chunk != NULL)
		return reply_chunk(conn, user, chunk);
	if (m == NULL)
		return reply_error(conn, 500, "cannot read the manifest");
	return reply_json(conn, 200, m);
}

/* ---- the agent's reads: a job's data sets ---- */

/* GET /v1/agent/jobs/ID/ATTEMPT/data/K[/chunks/HEX]. */
static enum MHD_Result
handle_agent_data(struct MHD_Connection *conn, struct request *req, int64_t job,
    int64_t attempt, int64_t k, const char *chunk)
{
	char user[GP_NAME_MAX + 1], owner[GP_NAME_MAX + 1];
	char name[GP_NAME_MAX + 1], err[256];
	int64_t version = 0, id = 0;
	struct job *j;
	json_t *d, *m = NULL;
	int status, kill, ok;

	status = ckpt_agent_job(req->auth, job, attempt, 0, user, err,
	    sizeof(err), &kill);
	if (status == 409 && kill)
		return reply_json(conn, 409,
		    json_pack("{s:s,s:b}", "error", err, "kill", 1));
	if (status != 0)
		return reply_error(conn, status, "%s", err);
	owner[0] = name[0] = '\0';
	pthread_rwlock_rdlock(&state.lock);
	j = state_job(job);
	d = j != NULL && k >= 1 ? json_array_get(j->spec.data, (size_t)k - 1)
	                        : NULL;
	if (d != NULL) {
		gp_strlcpy(owner, str(json_object_get(d, "owner")),
		    sizeof(owner));
		gp_strlcpy(name, str(json_object_get(d, "name")), sizeof(name));
		version = json_integer_value(json_object_get(d, "version"));
	}
	pthread_rwlock_unlock(&state.lock);
	if (owner[0] == '\0' || name[0] == '\0' || version <= 0)
		return reply_error(conn, 404, "job %lld has no data set %lld",
		    (long long)job, (long long)k);
	pthread_mutex_lock(&data_lock);
	if (may_mount(user, owner, name))
		id = data_object(owner, name, &version);
	ok = id > 0 && (chunk == NULL || object_has_chunk(id, chunk));
	if (ok && chunk == NULL)
		m = object_manifest(id);
	pthread_mutex_unlock(&data_lock);
	if (!ok) {
		if (id > 0)
			return reply_error(conn, 404, "no chunk %.64s", chunk);
		gp_info("data set refused to the agent job=%lld set=%s/%s@%lld "
		        "job_user=%s",
		    (long long)job, owner, name, (long long)version, user);
		return reply_error(conn, 404,
		    "no data set %s/%s@%lld (removed, "
		    "or no longer shared with %s)",
		    owner, name, (long long)version, user);
	}
	if (chunk != NULL)
		return reply_chunk(conn, owner, chunk);
	if (m == NULL)
		return reply_error(conn, 500, "cannot read the manifest");
	return reply_json(conn, 200, m);
}

/* ---- routing ---- */

enum MHD_Result
data_handle(struct MHD_Connection *conn, struct request *req, const char *url,
    const char *method)
{
	char p[PARTS_MAX][PART_LEN];
	int n = split(url, p);
	int get = strcmp(method, "GET") == 0,
	    post = strcmp(method, "POST") == 0;
	int del = strcmp(method, "DELETE") == 0;
	int64_t id, attempt, k;
	const char *chunk = NULL;

	if (n < 2)
		return reply_error(conn, 404, "no such endpoint: %.100s", url);
	if (strcmp(p[1], "agent") == 0) {
		if (req->auth->role != GP_ROLE_PROVIDER &&
		    req->auth->role != GP_ROLE_ADMIN)
			return reply_error(conn, 403,
			    "agent calls need a provider token");
		if (!num(p[3], &id) || !num(p[4], &attempt) ||
		    attempt > 1000000)
			return reply_error(conn, 404, "bad job id or attempt");
		if (n == 6 && post && strcmp(p[5], "output") == 0)
			return handle_upload_output(conn, req, id, attempt);
		if (get && strcmp(p[5], "data") == 0 && n >= 7 &&
		    num(p[6], &k) && k <= GP_DATA_MOUNTS_MAX &&
		    (n == 7 ||
		        (n == 9 && strcmp(p[7], "chunks") == 0 &&
		            gp_ckpt_name_valid(p[8]))))
			return handle_agent_data(conn, req, id, attempt, k,
			    n == 9 ? p[8] : NULL);
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	}
	/* An upload's commit: its owner or the agent that began it. */
	if (strcmp(p[1], "uploads") == 0 && n == 4 && post && num(p[2], &id) &&
	    strcmp(p[3], "commit") == 0)
		return handle_commit(conn, req, id);
	if (!user_role(req->auth))
		return reply_error(conn, 403,
		    "data sets, outputs and quotas "
		    "need a user token");
	if (strcmp(p[1], "jobs") == 0) {
		if (!num(p[2], &id))
			return reply_error(conn, 404, "no job '%s'", p[2]);
		if (n == 6 && strcmp(p[4], "chunks") == 0 &&
		    gp_ckpt_name_valid(p[5]) && get)
			chunk = p[5];
		else if (n != 4)
			return reply_error(conn, 404,
			    "no such endpoint: "
			    "%.100s",
			    url);
		return handle_output(conn, req, id, chunk, method);
	}
	if (strcmp(p[1], "quotas") == 0) {
		if (n != 3 || !gp_name_valid(p[2]))
			return reply_error(conn, 404,
			    "no such endpoint: "
			    "%.100s",
			    url);
		return handle_quota(conn, req, p[2], method);
	}
	if (strcmp(p[1], "uploads") == 0) {
		if (n == 2 && post)
			return handle_upload_data(conn, req);
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	}
	/* /v1/data... */
	if (n == 2 && get)
		return handle_list(conn, req);
	if (n < 4 || !gp_name_valid(p[2]) || !gp_data_name_valid(p[3]))
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	if (n == 4 && get)
		return handle_versions(conn, req, p[2], p[3]);
	if (n == 4 && del)
		return handle_remove(conn, req, p[2], p[3], NULL);
	if (n == 5 && post &&
	    (strcmp(p[4], "share") == 0 || strcmp(p[4], "unshare") == 0))
		return handle_share(conn, req, p[2], p[3],
		    strcmp(p[4], "share") == 0);
	if (n == 5 && del)
		return handle_remove(conn, req, p[2], p[3], p[4]);
	if (n == 5 && get)
		return handle_read(conn, req, p[2], p[3], p[4], NULL);
	if (n == 7 && get && strcmp(p[5], "chunks") == 0 &&
	    gp_ckpt_name_valid(p[6]))
		return handle_read(conn, req, p[2], p[3], p[4], p[6]);
	return reply_error(conn, 404, "no such endpoint: %s %.100s", method,
	    url);
}

/* ---- submit: pinning the data sets of a job ---- */

int
data_pin(const struct token_entry *who, struct gp_jobspec *spec, char *err,
    size_t errlen)
{
	const char *owner, *name;
	int64_t version, id;
	json_t *d;
	size_t i;
	int status = 0;

	if (json_array_size(spec->data) == 0)
		return 0;
	pthread_mutex_lock(&data_lock);
	json_array_foreach(spec->data, i, d)
	{
		owner = json_string_value(json_object_get(d, "owner"));
		if (owner == NULL)
			owner = who->name;
		name = json_string_value(json_object_get(d, "name"));
		version = json_integer_value(json_object_get(d, "version"));
		id = 0;
		if (may_mount(who->name, owner, name))
			id = data_object(owner, name, &version);
		if (id == 0) {
			if (json_object_get(d, "version") != NULL)
				snprintf(err, errlen,
				    "data[%zu]: no data set "
				    "%s/%s@%lld",
				    i, owner, name, (long long)version);
			else
				snprintf(err, errlen,
				    "data[%zu]: no data set "
				    "%s/%s",
				    i, owner, name);
			status = 404;
			break;
		}
		json_object_set_new(d, "owner", json_string(owner));
		json_object_set_new(d, "version",
		    json_integer((json_int_t)version));
	}
	pthread_mutex_unlock(&data_lock);
	return status;
}

/* ---- GC ---- */

/*
 * The chunk store's GC (a blob_user): adds the chunks user's data sets,
 * outputs and uploads in progress reference. blob_lock held.
 */
static int
collect_refs(const char *user, json_t *refs)
{
	sqlite3_stmt *st;
	int rc;

	pthread_mutex_lock(&data_lock);
	st = db == NULL ? NULL : prep("SELECT DISTINCT oc.chunk FROM object_chunks oc JOIN "
	          "objects o ON o.id = oc.object WHERE o.user = ?1 UNION "
	          "SELECT DISTINCT uc.chunk FROM upload_chunks uc JOIN uploads "
	          "u ON u.id = uc.upload WHERE u.user = ?1");
	if (st == NULL) {
		pthread_mutex_unlock(&data_lock);
		return GP_EIO;
	}
	sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		json_object_set(refs, col_text(st, 0), json_true());
	sqlite3_finalize(st);
	pthread_mutex_unlock(&data_lock);
	return rc == SQLITE_DONE ? 0 : GP_EIO;
}

/* Drops expired uploads and outputs (the chunk store's GC, each pass). */
static void
gc_expire(void)
{
	sqlite3_stmt *st;
	int64_t now = gp_now_ms(), id, job_id, *ids = NULL, fin;
	char owner[GP_NAME_MAX + 1];
	size_t n = 0, cap = 0, i;
	enum job_state js;
	int expired, rc;

	pthread_mutex_lock(&data_lock);
	/* Uploads abandoned long ago. */
	st = prep("SELECT id, user FROM uploads WHERE created_ms < ?");
	while (st != NULL) {
		sqlite3_bind_int64(st, 1, now - UPLOAD_TTL_MS);
		if (sqlite3_step(st) != SQLITE_ROW)
			break;
		id = sqlite3_column_int64(st, 0);
		blob_gc_mark(blob_chunks, col_text(st, 1));
		sqlite3_reset(st);
		upload_delete(id);
		gp_info("upload expired id=%lld", (long long)id);
	}
	sqlite3_finalize(st);
	/* Outputs of jobs finished more than output_retain_ms ago. */
	st = prep("SELECT id, job_id FROM objects WHERE kind = 'output'");
	while (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		id = sqlite3_column_int64(st, 0);
		job_id = sqlite3_column_int64(st, 1);
		/* A job that left memory is asked of state.db. */
		rc = state_job_brief(job_id, owner, &js, &fin);
		expired = rc == GP_ENOENT ||
		    (rc == 0 && js >= JOB_SUCCEEDED &&
		        fin + output_retain_ms < now);
		if (!expired)
			continue;
		if (n == cap) {
			int64_t *p =
			    realloc(ids, (cap ? cap * 2 : 16) * sizeof(*ids));
			if (p == NULL)
				break;
			ids = p;
			cap = cap ? cap * 2 : 16;
		}
		ids[n++] = id;
	}
	sqlite3_finalize(st);
	for (i = 0; i < n; i++) {
		st = prep("SELECT user, job_id FROM objects WHERE id = ?");
		if (st != NULL) {
			sqlite3_bind_int64(st, 1, ids[i]);
			if (sqlite3_step(st) == SQLITE_ROW) {
				blob_gc_mark(blob_chunks, col_text(st, 0));
				gp_info("job output expired job=%lld",
				    (long long)sqlite3_column_int64(st, 1));
			}
			sqlite3_finalize(st);
		}
		object_delete(ids[i]);
	}
	pthread_mutex_unlock(&data_lock);
	free(ids);
}

static const struct blob_user data_blob_user = {"data", gc_expire,
    collect_refs};

int
data_init(const struct coord_config *cfg)
{
	char path[1200];
	sqlite3_stmt *st;

	quota_default = cfg->quota_default;
	if (cfg->data_max > 0)
		data_max = cfg->data_max;
	if (cfg->output_retain_ms > 0)
		output_retain_ms = cfg->output_retain_ms;
	/*
	 * The tables stay where pools made before the blob store keep them,
	 * in checkpoints.db, through a connection of data.c's own; the busy
	 * timeout waits out ckpt.c's writes to the same file.
	 */
	snprintf(path, sizeof(path), "%s/checkpoints.db", cfg->data_dir);
	if (sqlite3_open_v2(path, &db,
	        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	            SQLITE_OPEN_FULLMUTEX,
	        NULL) != SQLITE_OK) {
		gp_error("cannot open database path=%s", path);
		return GP_EIO;
	}
	sqlite3_busy_timeout(db, 10000);
	pthread_mutex_lock(&data_lock);
	if (exec_sql("PRAGMA journal_mode=WAL;") != 0 ||
	    exec_sql("PRAGMA synchronous=FULL;") != 0 ||
	    exec_sql(schema) != 0) {
		pthread_mutex_unlock(&data_lock);
		return GP_EIO;
	}
	/* After a restart every user with objects gets one GC pass. */
	if ((st = prep("SELECT DISTINCT user FROM objects UNION SELECT "
	               "DISTINCT user FROM uploads")) != NULL) {
		while (sqlite3_step(st) == SQLITE_ROW)
			blob_gc_mark(blob_chunks, col_text(st, 0));
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&data_lock);
	if (blob_add_user(blob_chunks, &data_blob_user) != 0)
		return GP_EINVAL;
	gp_info("data store quota_default=%lld data_max=%lld "
	        "output_retain_s=%lld",
	    (long long)quota_default, (long long)data_max,
	    (long long)(output_retain_ms / 1000));
	return 0;
}

/* After blob_stop: the GC no longer asks. */
void
data_stop(void)
{
	pthread_mutex_lock(&data_lock);
	if (db != NULL)
		sqlite3_close(db);
	db = NULL;
	pthread_mutex_unlock(&data_lock);
}

/* A chunk PUT of an upload: the chunk store's stream, begun here. */
static const struct api_stream upload_stream = {data_upload_begin,
    ckpt_chunk_put_data, ckpt_chunk_put_end, blob_upload_release};

/* Data sets, uploads, quotas, job outputs, and the agents' side. */
const struct api_route data_routes[] = {
    {"/v1/uploads/*/chunks/*", API_PUT, 0, NULL, 0, 0, NULL, &upload_stream},
    {"/v1/uploads", API_ANY, 0, NULL, UPLOAD_BODY_MAX, 0, data_handle, NULL},
    {"/v1/data/**", API_ANY, 0, NULL, 0, 0, data_handle, NULL},
    {"/v1/uploads/**", API_ANY, 0, NULL, 0, 0, data_handle, NULL},
    {"/v1/quotas/**", API_ANY, 0, NULL, 0, 0, data_handle, NULL},
    {"/v1/jobs/*/output/**", API_ANY, 0, NULL, 0, 0, data_handle, NULL},
    {"/v1/agent/jobs/*/*/output", API_ANY, 0, NULL, UPLOAD_BODY_MAX, 0,
        data_handle, NULL},
    {"/v1/agent/jobs/*/*/output/**", API_ANY, 0, NULL, 0, 0, data_handle,
        NULL},
    {"/v1/agent/jobs/*/*/data/**", API_ANY, 0, NULL, 0, 0, data_handle,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
