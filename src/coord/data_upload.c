/*
 * data_upload.c: uploads of data set versions and job outputs (data.c
 * has the whole story): begin with the manifest and the quota, the chunk
 * PUTs into the blob store's chunk store, the commit.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
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
#include "store_meta.h"
#include "state.h"

/* ---- uploads ---- */

/* A body's refusal (gp_meta_transact): the user's quota would be passed. */
#define OVER_QUOTA 1

/* An upload to record (record_upload's IN), OUT its id and the quota. */
struct upload_record {
	const char *user, *kind, *name;
	int64_t job, attempt, creator;
	const char *digest, *manifest;
	const struct gp_ckpt_totals *tot;
	json_t *m;
	int64_t skip;
	int64_t id, limit, used, adds; /* OUT */
};

/*
 * The upload and its chunks, one transaction; OVER_QUOTA when its new
 * chunks would pass the user's quota (checked before a byte is sent).
 */
static int
record_upload(struct gp_meta *meta, void *arg)
{
	struct upload_record *r = arg;
	const char *source;
	json_t *f, *c;
	int64_t size, want;
	size_t i, k;

	/* No name, job or attempt: NULL (NULLIF). */
	if (gp_meta_query_int(meta, "INSERT INTO gp_data_uploads("
	    "\"user\", kind, name, job_id, attempt, creator, digest, "
	    "manifest, bytes, files, created_ms) VALUES(?, ?, ?, "
	    "NULLIF(CAST(? AS BIGINT), 0), NULLIF(CAST(? AS BIGINT), 0), "
	    "?, ?, ?, ?, ?, ?) RETURNING id", &r->id, "sstIIIssIII", r->user,
	    r->kind, r->name, r->job, r->job > 0 ? r->attempt : 0, r->creator,
	    r->digest, r->manifest, r->tot->bytes, r->tot->files,
	    gp_now_ms()) != 1)
		return GP_EIO;
	json_array_foreach(json_object_get(r->m, "files"), i, f)
	{
		size = json_integer_value(json_object_get(f, "size"));
		json_array_foreach(json_object_get(f, "chunks"), k, c)
		{
			want = size - (int64_t)k * GP_CKPT_CHUNK_SIZE;
			if (gp_meta_run(meta, "INSERT INTO "
			    "gp_data_upload_chunks(upload, chunk, size) "
			    "VALUES(?, ?, ?) ON CONFLICT DO NOTHING",
			    "IsI", r->id, json_string_value(c),
			    want > GP_CKPT_CHUNK_SIZE ? GP_CKPT_CHUNK_SIZE
						      : want) != 0)
				return GP_EIO;
		}
	}
	/* The quota, before a single byte is sent. */
	r->limit = data_quota_of(r->user, &source);
	if (r->limit > 0) {
		r->used = data_usage(r->user, NULL, r->skip);
		r->adds = data_upload_adds(r->id, r->user, r->skip);
		if (r->adds > 0 && r->used + r->adds > r->limit)
			return OVER_QUOTA;
	}
	return 0;
}

/* A commit to record (record_object's IN), OUT what it made. */
struct object_record {
	int64_t id;
	const struct data_upload *u;
	int64_t version, object, old, limit, before, after; /* OUT */
};

/*
 * The upload made an object (a data set's new version, or the job's
 * output in place of the one before), the upload gone: one transaction;
 * OVER_QUOTA when it would pass the user's quota after all.
 */
static int
record_object(struct gp_meta *meta, void *arg)
{
	struct object_record *r = arg;
	const struct data_upload *u = r->u;
	const char *source;

	r->version = 0;
	r->old = 0;
	if (strcmp(u->kind, "data") == 0) {
		r->version = data_query_int(1,
		    "SELECT MAX(v) FROM (SELECT COALESCE((SELECT next FROM "
		    "gp_data_next WHERE \"user\" = ?1 AND name = ?2), 1) AS v "
		    "UNION ALL SELECT COALESCE((SELECT MAX(version) + 1 FROM "
		    "gp_data_objects WHERE kind = 'data' AND \"user\" = ?1 AND "
		    "name = ?2), 1)) AS candidates",
		    "ss", u->user, u->name);
		if (gp_meta_run(meta, "INSERT INTO gp_data_next(\"user\", "
		    "name, next) VALUES(?, ?, ?) ON CONFLICT(\"user\", name) "
		    "DO UPDATE SET next = excluded.next", "ssI", u->user,
		    u->name, r->version + 1) != 0)
			return GP_EIO;
	} else {
		/* A job has one output: the last one stored. */
		r->old = data_query_int(0,
		    "SELECT id FROM gp_data_objects WHERE kind = "
		    "'output' AND job_id = ?",
		    "i", u->job_id);
		if (r->old > 0 && data_object_delete(r->old) != 0)
			return GP_EIO;
	}
	/* An output has no version: NULL (NULLIF). */
	if (gp_meta_query_int(meta, "INSERT INTO gp_data_objects(\"user\", "
	    "kind, name, version, job_id, attempt, manifest, bytes, files, "
	    "created_ms) SELECT \"user\", kind, name, "
	    "NULLIF(CAST(?2 AS BIGINT), 0), job_id, attempt, manifest, bytes, "
	    "files, CAST(?3 AS BIGINT) FROM gp_data_uploads WHERE id = ?1 "
	    "RETURNING id", &r->object, "III", r->id, r->version,
	    gp_now_ms()) != 1 ||
	    gp_meta_run(meta, "INSERT INTO gp_data_object_chunks(object, "
	    "chunk, size) SELECT CAST(?1 AS BIGINT), chunk, size FROM "
	    "gp_data_upload_chunks WHERE upload = ?2", "II", r->object,
	    r->id) != 0)
		return GP_EIO;
	data_upload_delete(r->id);
	r->limit = data_quota_of(u->user, &source);
	if (r->limit > 0 &&
	    (r->after = data_usage(u->user, NULL, 0)) > r->limit &&
	    r->after > (r->before = data_usage(u->user, NULL, r->object)))
		return OVER_QUOTA; /* the quota changed, or another won */
	return 0;
}

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
	struct gp_meta_rows *st = NULL;
	json_t *missing = NULL;
	const char *cname;
	struct upload_record rec;
	int64_t id = 0, skip = 0;
	enum MHD_Result rc;
	int status = 500, ret;

	if ((text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return reply_error(conn, 503, "out of memory");
	crypto_generichash(hash, sizeof(hash), (unsigned char *)text,
	    strlen(text), NULL, 0);
	sodium_bin2hex(digest, sizeof(digest), hash, sizeof(hash));
	blob_lock(blob_chunks);
	pthread_mutex_lock(&data_lock);
	if (strcmp(kind, "output") == 0)
		skip = data_query_int(0,
		    "SELECT id FROM gp_data_objects WHERE kind = "
		    "'output' AND job_id = ?",
		    "i", job);
	/* The same upload begun again: carry on with it. */
	id = data_query_int(0,
	    "SELECT id FROM gp_data_uploads WHERE \"user\" = ?1 AND "
	    "digest = ?2 AND kind = ?3 AND COALESCE(name, '') = "
	    "?4 AND COALESCE(job_id, 0) = ?5 AND "
	    "COALESCE(attempt, 0) = ?6",
	    "ssssii", user, digest, kind, name != NULL ? name : "", job,
	    attempt);
	if (id > 0) {
		(void)gp_meta_run(data_db, "UPDATE gp_data_uploads SET "
		    "created_ms = ?1, creator = ?2 WHERE id = ?3", "III",
		    gp_now_ms(), who->id, id);
	} else {
		rec = (struct upload_record){user, kind, name, job, attempt,
		    who->id, digest, text, tot, m, skip, 0, 0, 0, 0};
		ret = gp_meta_transact(data_db, record_upload, &rec);
		if (ret == OVER_QUOTA) {
			pthread_mutex_unlock(&data_lock);
			blob_unlock(blob_chunks);
			free(text);
			return data_reply_quota(conn, user, rec.used, rec.limit,
			    rec.adds);
		}
		if (ret != 0) {
			status = gp_meta_http_status(ret);
			gp_warn("upload begin refused user=%s status=%d "
				"error=\"%s\"",
			    user, status, gp_meta_error(data_db));
			goto unlock;
		}
		id = rec.id;
	}
	/* What the store lacks (present ones are young again, see GC). */
	missing = json_array();
	if (missing == NULL || gp_meta_query(data_db, &st, "SELECT chunk FROM "
	    "gp_data_upload_chunks WHERE upload = ?", "I", id) != 0)
		goto unlock;
	while (gp_meta_next(st) == 1) {
		cname = gp_meta_text(st, 0);
		if (blob_touch(blob_chunks, user, cname, 1) != 0)
			json_array_append_new(missing, json_string(cname));
	}
	gp_meta_done(st);
	st = NULL;
	status = 0;
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
		    "SELECT size FROM gp_data_upload_chunks WHERE "
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
	struct gp_meta_rows *st = NULL;
	struct data_upload u;
	struct stat sb;
	struct object_record rec;
	int64_t version = 0, old = 0;
	int status = 500, ret;

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
	if (gp_meta_query(data_db, &st, "SELECT chunk, size FROM "
	    "gp_data_upload_chunks WHERE upload = ?", "I", id) != 0) {
		st = NULL;
		goto unlock;
	}
	while (gp_meta_next(st) == 1) {
		if (blob_stat(blob_chunks, u.user, gp_meta_text(st, 0), &sb) !=
			0 ||
		    sb.st_size != gp_meta_int(st, 1)) {
			snprintf(err, sizeof(err),
			    "chunk %s is not stored: "
			    "upload it first",
			    gp_meta_text(st, 0));
			status = 400;
			goto unlock;
		}
	}
	gp_meta_done(st);
	st = NULL;
	/*
	 * The chunks' directory entries durable before the object that
	 * names them is (blob.h, blob_sync_owner).
	 */
	snprintf(err, sizeof(err), "cannot make the chunks durable");
	if (blob_sync_owner(blob_chunks, u.user) != 0)
		goto unlock;
	rec = (struct object_record){id, &u, 0, 0, 0, 0, 0, 0};
	ret = gp_meta_transact(data_db, record_object, &rec);
	if (ret == OVER_QUOTA) {
		data_upload_delete(id);
		pthread_mutex_unlock(&data_lock);
		blob_unlock(blob_chunks);
		blob_gc_mark(blob_chunks, u.user);
		return data_reply_quota(conn, u.user, rec.before, rec.limit,
		    rec.after - rec.before);
	}
	if (ret != 0) {
		status = gp_meta_http_status(ret);
		snprintf(err, sizeof(err), "cannot record the %s: %s",
		    strcmp(u.kind, "data") == 0 ? "version" : "output",
		    gp_meta_error(data_db));
		goto unlock;
	}
	version = rec.version;
	old = rec.old;
	status = 0;
unlock:
	gp_meta_done(st);
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
