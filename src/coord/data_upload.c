/*
 * data_upload.c: uploads of data set versions and job outputs (data.c
 * has the whole story): begin with the manifest and the quota, the chunk
 * PUTs into the blob store's chunk store, the commit.
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

#include "blob.h"
#include "ckpt.h"
#include "ckpt_store.h"
#include "data_int.h"
#include "datasets.h"
#include "gp.h"
#include "joblog.h"
#include "log.h"
#include "route.h"
#include "sqlite_util.h"
#include "state.h"

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
		skip = data_query_int(0,
		    "SELECT id FROM objects WHERE kind = "
		    "'output' AND job_id = ?",
		    "i", job);
	/* The same upload begun again: carry on with it. */
	id = data_query_int(0,
	    "SELECT id FROM uploads WHERE user = ?1 AND "
	    "digest = ?2 AND kind = ?3 AND COALESCE(name, '') = "
	    "?4 AND COALESCE(job_id, 0) = ?5 AND "
	    "COALESCE(attempt, 0) = ?6",
	    "ssssii", user, digest, kind, name != NULL ? name : "", job,
	    attempt);
	if (id > 0) {
		st = gp_sqlite_prepare(&data_db,
		    "UPDATE uploads SET created_ms = ?1, creator = ?2 "
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
		if (gp_sqlite_exec(&data_db, "BEGIN IMMEDIATE") != 0)
			goto unlock;
		st = gp_sqlite_prepare(&data_db,
		    "INSERT INTO uploads(user, kind, name, job_id, "
		    "attempt, creator, digest, manifest, bytes, files, "
		    "created_ms) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
		ins = gp_sqlite_prepare(&data_db,
		    "INSERT OR IGNORE INTO upload_chunks VALUES(?,?,?)");
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
		id = sqlite3_last_insert_rowid(data_db.db);
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
		limit = data_quota_of(user, &source);
		if (limit > 0) {
			used = data_usage(user, NULL, skip);
			adds = data_upload_adds(id, user, skip);
			if (adds > 0 && used + adds > limit) {
				gp_sqlite_exec(&data_db, "ROLLBACK");
				pthread_mutex_unlock(&data_lock);
				blob_unlock(blob_chunks);
				free(text);
				return data_reply_quota(conn, user, used, limit,
				    adds);
			}
		}
		if (gp_sqlite_exec(&data_db, "COMMIT") != 0)
			goto rollback;
	}
	/* What the store lacks (present ones are young again, see GC). */
	missing = json_array();
	st = gp_sqlite_prepare(&data_db,
	    "SELECT chunk FROM upload_chunks WHERE upload = ?");
	if (st == NULL || missing == NULL)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		cname = gp_sqlite_text(st, 0);
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
	gp_sqlite_exec(&data_db, "ROLLBACK");
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
enum MHD_Result
data_handle_upload_data(struct MHD_Connection *conn, struct request *req)
{
	struct gp_ckpt_totals tot;
	char name[GP_CKPT_DATA_NAME_LEN], err[256];
	enum MHD_Result rc;
	json_t *m;
	int ret;

	if (!data_user_role(req->auth))
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
enum MHD_Result
data_handle_upload_output(struct MHD_Connection *conn, struct request *req,
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
	struct data_upload u;
	int64_t id, size = -1;
	int status = 0, found;

	if ((cu = ckpt_chunk_put_new(req)) == NULL || req->auth == NULL)
		return;
	if (data_split_url(url, p) != 5 || !data_num(p[2], &id) ||
	    !gp_ckpt_name_valid(p[4])) {
		blob_upload_refuse(cu, 404,
		    "chunks are named by 64 lowercase hex digits");
		return;
	}
	pthread_mutex_lock(&data_lock);
	found = data_upload_load(id, &u);
	if (found)
		status = data_upload_access(req->auth, &u, err, sizeof(err));
	if (found && status == 0)
		size = data_query_int(-1,
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
enum MHD_Result
data_handle_commit(struct MHD_Connection *conn, struct request *req, int64_t id)
{
	char err[400], b[32];
	sqlite3_stmt *st = NULL;
	struct data_upload u;
	struct stat sb;
	int64_t version = 0, object, limit, after, before, old = 0;
	const char *source;
	int status = 500;

	/* No chunk goes between the check and the insert (blob.h). */
	blob_lock(blob_chunks);
	pthread_mutex_lock(&data_lock);
	if (!data_upload_load(id, &u)) {
		pthread_mutex_unlock(&data_lock);
		blob_unlock(blob_chunks);
		return reply_error(conn, 404, "no upload %lld", (long long)id);
	}
	if ((status = data_upload_access(req->auth, &u, err, sizeof(err))) != 0)
		goto unlock;
	/* Every chunk stored, with the size the manifest gives it. */
	status = 500;
	snprintf(err, sizeof(err), "cannot read the upload");
	if ((st = gp_sqlite_prepare(&data_db,
	         "SELECT chunk, size FROM upload_chunks WHERE "
	         "upload = ?")) == NULL)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (blob_stat(blob_chunks, u.user, gp_sqlite_text(st, 0),
		        &sb) != 0 ||
		    sb.st_size != sqlite3_column_int64(st, 1)) {
			snprintf(err, sizeof(err),
			    "chunk %s is not stored: "
			    "upload it first",
			    gp_sqlite_text(st, 0));
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
	if (gp_sqlite_exec(&data_db, "BEGIN IMMEDIATE") != 0)
		goto unlock;
	if (strcmp(u.kind, "data") == 0) {
		version = data_query_int(1,
		    "SELECT MAX(COALESCE((SELECT next FROM "
		    "data_next WHERE user = ?1 AND name = "
		    "?2), 1), COALESCE((SELECT MAX(version) "
		    "+ 1 FROM objects WHERE kind = 'data' AND "
		    "user = ?1 AND name = ?2), 1))",
		    "ss", u.user, u.name);
		st = gp_sqlite_prepare(&data_db,
		    "INSERT OR REPLACE INTO data_next VALUES(?, ?, ?)");
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
		old = data_query_int(0,
		    "SELECT id FROM objects WHERE kind = "
		    "'output' AND job_id = ?",
		    "i", u.job_id);
		if (old > 0 && data_object_delete(old) != 0)
			goto rollback;
	}
	st = gp_sqlite_prepare(&data_db,
	    "INSERT INTO objects(user, kind, name, version, job_id, "
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
	object = sqlite3_last_insert_rowid(data_db.db);
	st = gp_sqlite_prepare(&data_db,
	    "INSERT INTO object_chunks SELECT ?1, chunk, size FROM "
	    "upload_chunks WHERE upload = ?2");
	if (st == NULL)
		goto rollback;
	sqlite3_bind_int64(st, 1, object);
	sqlite3_bind_int64(st, 2, id);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto rollback;
	sqlite3_finalize(st);
	st = NULL;
	data_upload_delete(id);
	limit = data_quota_of(u.user, &source);
	if (limit > 0 && (after = data_usage(u.user, NULL, 0)) > limit &&
	    after > (before = data_usage(u.user, NULL, object))) {
		/* The quota changed meanwhile, or another upload won. */
		gp_sqlite_exec(&data_db, "ROLLBACK");
		data_upload_delete(id);
		pthread_mutex_unlock(&data_lock);
		blob_unlock(blob_chunks);
		blob_gc_mark(blob_chunks, u.user);
		return data_reply_quota(conn, u.user, before, limit,
		    after - before);
	}
	if (gp_sqlite_exec(&data_db, "COMMIT") != 0)
		goto rollback;
	status = 0;
	goto unlock;
rollback:
	sqlite3_finalize(st);
	st = NULL;
	gp_sqlite_exec(&data_db, "ROLLBACK");
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
