/*
 * data.c: data sets, job outputs and storage quotas (docs/data.md; the
 * HTTP calls in docs/api.md, "Data sets", "Job outputs" and "Quotas").
 *
 * Both are trees stored as manifests over the blob store's chunk store
 * (blob.h, blob_chunks): the same per-user chunk directories as
 * checkpoints (a chunk that a user's checkpoints, data sets and outputs
 * share is stored once), the same streamed chunk PUT, one GC, which asks
 * these files (a blob_user: collect_refs, gc_expire) what they keep. The
 * tables are behind the storage interface (store_meta.h: DATA/
 * checkpoints.db, where pools made before the blob store keep them, or
 * the pool's PostgreSQL), through a connection and a lock of data.c's own
 * (data_db, data_lock; data_int.h), each named gp_data_*:
 *   objects        a data set version (kind 'data': user, name, version)
 *                  or a job's output (kind 'output': job_id, attempt),
 *                  with its manifest
 *   object_chunks  the chunks each object references, with their sizes:
 *                  what the quota counts and the GC keeps
 *   uploads, upload_chunks   uploads in progress
 *   next           the next version number of each data set (never reused)
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
 * name (blob.c). (3) POST /v1/uploads/ID/commit: every chunk must be
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
 * Locking: blob_lock (blob_chunks) where chunks are checked and then
 * recorded (a commit) or made young again (an upload's begin), then
 * data_lock for the tables, then state.lock for reading, briefly (jobs:
 * owners, attempts, pins).
 *
 * Files: data.c (the tables, access, quotas, objects, submit pins, the
 * GC, routing), data_upload.c (uploads: begin, chunk PUTs, commit),
 * data_sets.c (data sets, quotas, outputs, the agents' reads).
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
#include "state.h"
#include "store_meta.h"

int64_t data_quota_default;   /* bytes; 0: no limit */
int64_t data_max = 1LL << 40; /* bytes in one version/output */
int64_t data_output_retain_ms = 30 * 86400 * 1000LL;

/* data.c's own connection to its tables (see the top) and its lock. */
struct gp_meta *data_db;
pthread_mutex_t data_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- replies ---- */

/* ---- database (data_lock held) ---- */

/* A JSON string's value, "" for anything else. */
const char *
data_str(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

/*
 * One integer from a query with text (s) and int64_t (i) parameters; def
 * when no row or NULL.
 */
int64_t
data_query_int(int64_t def, const char *sql, const char *fmt, ...)
{
	struct gp_meta_rows *st;
	char meta_fmt[16];
	int64_t v = def;
	va_list ap;
	size_t i;
	int rc;

	for (i = 0; fmt[i] != '\0' && i + 1 < sizeof(meta_fmt); i++)
		meta_fmt[i] = fmt[i] == 's' ? 's' : 'I';
	meta_fmt[i] = '\0';
	va_start(ap, fmt);
	rc = gp_meta_vquery(data_db, &st, sql, meta_fmt, ap);
	va_end(ap);
	if (rc != 0)
		return def;
	if (gp_meta_next(st) == 1 && !gp_meta_null(st, 0))
		v = gp_meta_int(st, 0);
	gp_meta_done(st);
	return v;
}

/* ---- access ---- */

int
data_shared_with(const char *owner, const char *name, const char *who)
{
	return data_query_int(0,
	           "SELECT 1 FROM gp_data_shares WHERE \"user\" = ?1 AND "
	           "name = ?2 AND grantee = ?3",
	           "sss", owner, name, who) == 1;
}

/* A user's call (data sets, quotas, outputs): users and admins only. */
int
data_user_role(const struct token_entry *who)
{
	return who->role == GP_ROLE_USER || who->role == GP_ROLE_ADMIN;
}

/* Who may read a data set (list, manifests, chunks). */
int
data_may_read(const struct token_entry *who, const char *owner,
    const char *name)
{
	if (who->role == GP_ROLE_ADMIN)
		return 1;
	if (who->role != GP_ROLE_USER)
		return 0;
	return strcmp(who->name, owner) == 0 ||
	    data_shared_with(owner, name, who->name);
}

/* Whose jobs may mount a data set: its owner and those it is shared with. */
int
data_may_mount(const char *job_user, const char *owner, const char *name)
{
	return strcmp(job_user, owner) == 0 ||
	    data_shared_with(owner, name, job_user);
}

/* Who may change a data set (remove, share): its owner and admins. */
int
data_may_change(const struct token_entry *who, const char *owner)
{
	return who->role == GP_ROLE_ADMIN ||
	    (who->role == GP_ROLE_USER && strcmp(who->name, owner) == 0);
}

/* ---- sizes and quotas (data_lock held) ---- */

/* Bytes of the distinct chunks of user's objects, but object skip. */
int64_t
data_usage(const char *user, const char *kind, int64_t skip)
{
	return data_query_int(0,
	    "SELECT COALESCE(SUM(size), 0) FROM (SELECT oc.chunk, "
	    "MAX(oc.size) AS size FROM gp_data_object_chunks oc JOIN gp_data_objects o ON "
	    "o.id = oc.object WHERE o.user = ?1 AND o.id != ?2 AND "
	    "(?3 = '' OR o.kind = ?3) GROUP BY oc.chunk) AS chunks",
	    "sis", user, skip, kind != NULL ? kind : "");
}

/* What upload adds to user's usage: its chunks no object of theirs has. */
int64_t
data_upload_adds(int64_t upload, const char *user, int64_t skip)
{
	return data_query_int(0,
	    "SELECT COALESCE(SUM(uc.size), 0) FROM gp_data_upload_chunks uc WHERE "
	    "uc.upload = ?1 AND NOT EXISTS (SELECT 1 FROM gp_data_object_chunks oc "
	    "JOIN gp_data_objects o ON o.id = oc.object WHERE oc.chunk = uc.chunk "
	    "AND o.user = ?2 AND o.id != ?3)",
	    "isi", upload, user, skip);
}

/* The user's limit in bytes, 0 for none. OUT: *source. */
int64_t
data_quota_of(const char *user, const char **source)
{
	struct gp_meta_rows *st;
	int64_t limit = data_quota_default;

	*source = data_quota_default > 0 ? "default" : "none";
	if (gp_meta_query(data_db, &st, "SELECT bytes FROM gp_data_quotas "
	    "WHERE \"user\" = ?", "s", user) != 0)
		return limit;
	if (gp_meta_next(st) == 1) {
		*source = "user";
		limit = gp_meta_null(st, 0) ? 0 : gp_meta_int(st, 0);
	}
	gp_meta_done(st);
	return limit;
}

/* The 413 answer of a refused upload, with the figures. */
enum MHD_Result
data_reply_quota(struct MHD_Connection *conn, const char *user, int64_t used,
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
int
data_split_url(const char *url, char parts[][PART_LEN])
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

int
data_num(const char *text, int64_t *v)
{
	return text[0] >= '1' && text[0] <= '9' &&
	    gp_parse_int(text, 1, INT64_MAX / 2, v) == 0;
}

/* ---- objects (data_lock held) ---- */

/* The id of a data set version (0: the latest). OUT: *version. 0: none. */
int64_t
data_object(const char *owner, const char *name, int64_t *version)
{
	struct gp_meta_rows *st;
	int64_t id = 0;
	int rc;

	rc = *version > 0
	    ? gp_meta_query(data_db, &st, "SELECT id, version FROM "
		  "gp_data_objects WHERE kind = 'data' AND \"user\" = ?1 AND "
		  "name = ?2 AND version = ?3", "ssI", owner, name, *version)
	    : gp_meta_query(data_db, &st, "SELECT id, version FROM "
		  "gp_data_objects WHERE kind = 'data' AND \"user\" = ?1 AND "
		  "name = ?2 ORDER BY version DESC LIMIT 1", "ss", owner, name);
	if (rc != 0)
		return 0;
	if (gp_meta_next(st) == 1) {
		id = gp_meta_int(st, 0);
		*version = gp_meta_int(st, 1);
	}
	gp_meta_done(st);
	return id;
}

/* The manifest of object id with its metadata; NULL when gone. */
json_t *
data_object_manifest(int64_t id)
{
	struct gp_meta_rows *st;
	json_t *m = NULL;
	char tm[40];

	if (gp_meta_query(data_db, &st, "SELECT manifest, kind, \"user\", "
	    "name, version, job_id, attempt, bytes, created_ms FROM "
	    "gp_data_objects WHERE id = ?", "I", id) != 0)
		return NULL;
	if (gp_meta_next(st) == 1 &&
	    (m = json_loads(gp_meta_text(st, 0), 0, NULL)) != NULL) {
		gp_format_time(gp_meta_int(st, 8), tm, sizeof(tm));
		if (strcmp(gp_meta_text(st, 1), "data") == 0) {
			json_object_set_new(m, "owner",
			    json_string(gp_meta_text(st, 2)));
			json_object_set_new(m, "name",
			    json_string(gp_meta_text(st, 3)));
			json_object_set_new(m, "version",
			    json_integer(gp_meta_int(st, 4)));
		} else {
			json_object_set_new(m, "job_id",
			    json_integer(gp_meta_int(st, 5)));
			json_object_set_new(m, "attempt",
			    json_integer(gp_meta_int(st, 6)));
		}
		json_object_set_new(m, "bytes",
		    json_integer(gp_meta_int(st, 7)));
		json_object_set_new(m, "created_at", json_string(tm));
	}
	gp_meta_done(st);
	return m;
}

int
data_object_has_chunk(int64_t id, const char *chunk)
{
	return data_query_int(0,
	           "SELECT 1 FROM gp_data_object_chunks WHERE object = ?1 "
	           "AND chunk = ?2",
	           "is", id, chunk) == 1;
}

/* Deletes object id and its chunk list. */
int
data_object_delete(int64_t id)
{
	if (gp_meta_run(data_db, "DELETE FROM gp_data_object_chunks WHERE "
	    "object = ?", "I", id) != 0 ||
	    gp_meta_run(data_db, "DELETE FROM gp_data_objects WHERE id = ?",
	    "I", id) != 0)
		return GP_EIO;
	return 0;
}

void
data_upload_delete(int64_t id)
{
	(void)gp_meta_run(data_db, "DELETE FROM gp_data_upload_chunks WHERE "
	    "upload = ?", "I", id);
	(void)gp_meta_run(data_db, "DELETE FROM gp_data_uploads WHERE id = ?",
	    "I", id);
}

int
data_upload_load(int64_t id, struct data_upload *u)
{
	struct gp_meta_rows *st;
	int found = 0;

	if (gp_meta_query(data_db, &st, "SELECT \"user\", kind, name, job_id, "
	    "attempt, creator, bytes, files FROM gp_data_uploads WHERE id = ?",
	    "I", id) != 0)
		return 0;
	if (gp_meta_next(st) == 1) {
		memset(u, 0, sizeof(*u));
		u->id = id;
		gp_strlcpy(u->user, gp_meta_text(st, 0), sizeof(u->user));
		gp_strlcpy(u->kind, gp_meta_text(st, 1), sizeof(u->kind));
		gp_strlcpy(u->name, gp_meta_text(st, 2), sizeof(u->name));
		u->job_id = gp_meta_int(st, 3);
		u->attempt = gp_meta_int(st, 4);
		u->creator = gp_meta_int(st, 5);
		u->bytes = gp_meta_int(st, 6);
		u->files = gp_meta_int(st, 7);
		found = 1;
	}
	gp_meta_done(st);
	return found;
}

/*
 * May who continue upload u (PUT, commit)? A data set upload: the user
 * who began it. An output: the agent token that began it, while the
 * attempt is still the job's current one (data_lock held; takes
 * state.lock briefly). Returns 0 or the HTTP status with err.
 */
int
data_upload_access(const struct token_entry *who, const struct data_upload *u,
    char *err, size_t errlen)
{
	char user[GP_NAME_MAX + 1];
	int kill;

	if (strcmp(u->kind, "data") == 0) {
		if (!data_user_role(who) || strcmp(who->name, u->user) != 0) {
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

/* ---- routing ---- */

enum MHD_Result
data_handle(struct MHD_Connection *conn, struct request *req, const char *url,
    const char *method)
{
	char p[PARTS_MAX][PART_LEN];
	int n = data_split_url(url, p);
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
		if (!data_num(p[3], &id) || !data_num(p[4], &attempt) ||
		    attempt > 1000000)
			return reply_error(conn, 404, "bad job id or attempt");
		if (n == 6 && post && strcmp(p[5], "output") == 0)
			return data_handle_upload_output(conn, req, id,
			    attempt);
		if (get && strcmp(p[5], "data") == 0 && n >= 7 &&
		    data_num(p[6], &k) && k <= GP_DATA_MOUNTS_MAX &&
		    (n == 7 ||
		        (n == 9 && strcmp(p[7], "chunks") == 0 &&
		            gp_ckpt_name_valid(p[8]))))
			return data_handle_agent_data(conn, req, id, attempt, k,
			    n == 9 ? p[8] : NULL);
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	}
	/* An upload's commit: its owner or the agent that began it. */
	if (strcmp(p[1], "uploads") == 0 && n == 4 && post &&
	    data_num(p[2], &id) && strcmp(p[3], "commit") == 0)
		return data_handle_commit(conn, req, id);
	if (!data_user_role(req->auth))
		return reply_error(conn, 403,
		    "data sets, outputs and quotas "
		    "need a user token");
	if (strcmp(p[1], "jobs") == 0) {
		if (!data_num(p[2], &id))
			return reply_error(conn, 404, "no job '%s'", p[2]);
		if (n == 6 && strcmp(p[4], "chunks") == 0 &&
		    gp_ckpt_name_valid(p[5]) && get)
			chunk = p[5];
		else if (n != 4)
			return reply_error(conn, 404,
			    "no such endpoint: "
			    "%.100s",
			    url);
		return data_handle_output(conn, req, id, chunk, method);
	}
	if (strcmp(p[1], "quotas") == 0) {
		if (n != 3 || !gp_name_valid(p[2]))
			return reply_error(conn, 404,
			    "no such endpoint: "
			    "%.100s",
			    url);
		return data_handle_quota(conn, req, p[2], method);
	}
	if (strcmp(p[1], "uploads") == 0) {
		if (n == 2 && post)
			return data_handle_upload_data(conn, req);
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	}
	/* /v1/data... */
	if (n == 2 && get)
		return data_handle_list(conn, req);
	if (n < 4 || !gp_name_valid(p[2]) || !gp_data_name_valid(p[3]))
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	if (n == 4 && get)
		return data_handle_versions(conn, req, p[2], p[3]);
	if (n == 4 && del)
		return data_handle_remove(conn, req, p[2], p[3], NULL);
	if (n == 5 && post &&
	    (strcmp(p[4], "share") == 0 || strcmp(p[4], "unshare") == 0))
		return data_handle_share(conn, req, p[2], p[3],
		    strcmp(p[4], "share") == 0);
	if (n == 5 && del)
		return data_handle_remove(conn, req, p[2], p[3], p[4]);
	if (n == 5 && get)
		return data_handle_read(conn, req, p[2], p[3], p[4], NULL);
	if (n == 7 && get && strcmp(p[5], "chunks") == 0 &&
	    gp_ckpt_name_valid(p[6]))
		return data_handle_read(conn, req, p[2], p[3], p[4], p[6]);
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
		if (data_may_mount(who->name, owner, name))
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
	struct gp_meta_rows *st;
	int rc;

	gp_meta_scan_begin(&data_lock, &data_db);
	if (data_db == NULL || gp_meta_query(data_db, &st,
	    "SELECT DISTINCT oc.chunk FROM gp_data_object_chunks oc JOIN "
	    "gp_data_objects o ON o.id = oc.object WHERE o.\"user\" = ?1 "
	    "UNION SELECT DISTINCT uc.chunk FROM gp_data_upload_chunks uc "
	    "JOIN gp_data_uploads u ON u.id = uc.upload WHERE "
	    "u.\"user\" = ?1", "s", user) != 0) {
		gp_meta_scan_end(&data_lock, &data_db);
		return GP_EIO;
	}
	while ((rc = gp_meta_next(st)) == 1)
		json_object_set(refs, gp_meta_text(st, 0), json_true());
	gp_meta_done(st);
	gp_meta_scan_end(&data_lock, &data_db);
	return rc == 0 ? 0 : GP_EIO;
}

/* Drops expired uploads and outputs (the chunk store's GC, each pass). */
static void
gc_expire(void)
{
	struct gp_meta_rows *st;
	int64_t now = gp_now_ms(), id, job_id, *ids = NULL, fin;
	char owner[GP_NAME_MAX + 1];
	size_t n = 0, cap = 0, i;
	enum job_state js;
	int expired, rc;

	pthread_mutex_lock(&data_lock);
	/*
	 * Uploads abandoned long ago, one at a time, in id order (one whose
	 * delete failed is not asked about again in this pass).
	 */
	id = 0;
	while (gp_meta_query(data_db, &st, "SELECT id, \"user\" FROM "
	    "gp_data_uploads WHERE created_ms < ? AND id > ? ORDER BY id "
	    "LIMIT 1", "II", now - UPLOAD_TTL_MS, id) == 0) {
		if (gp_meta_next(st) != 1) {
			gp_meta_done(st);
			break;
		}
		id = gp_meta_int(st, 0);
		blob_gc_mark(blob_chunks, gp_meta_text(st, 1));
		gp_meta_done(st);
		data_upload_delete(id);
		gp_info("upload expired id=%lld", (long long)id);
	}
	/* Outputs of jobs finished more than data_output_retain_ms ago. */
	if (gp_meta_query(data_db, &st, "SELECT id, job_id FROM "
	    "gp_data_objects WHERE kind = 'output'", "") != 0)
		st = NULL;
	while (st != NULL && gp_meta_next(st) == 1) {
		id = gp_meta_int(st, 0);
		job_id = gp_meta_int(st, 1);
		/* A job that left memory is asked of the store. */
		rc = state_job_brief(job_id, owner, &js, &fin);
		expired = rc == GP_ENOENT ||
		    (rc == 0 && js >= JOB_SUCCEEDED &&
		        fin + data_output_retain_ms < now);
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
	gp_meta_done(st);
	for (i = 0; i < n; i++) {
		if (gp_meta_query(data_db, &st, "SELECT \"user\", job_id FROM "
		    "gp_data_objects WHERE id = ?", "I", ids[i]) == 0) {
			if (gp_meta_next(st) == 1) {
				blob_gc_mark(blob_chunks, gp_meta_text(st, 0));
				gp_info("job output expired job=%lld",
				    (long long)gp_meta_int(st, 1));
			}
			gp_meta_done(st);
		}
		data_object_delete(ids[i]);
	}
	pthread_mutex_unlock(&data_lock);
	free(ids);
}

/*
 * A GC pass removes nothing unless this coordinator still leads
 * (store_meta.h, gp_meta_scan_fence).
 */
static int
gc_fence(void)
{
	return gp_meta_scan_fence(&data_lock, &data_db);
}

static const struct blob_user data_blob_user = {"data", gc_expire,
    collect_refs, gc_fence};

int
data_init(const struct coord_config *cfg)
{
	struct gp_meta_rows *st;

	data_quota_default = cfg->quota_default;
	if (cfg->data_max > 0)
		data_max = cfg->data_max;
	if (cfg->output_retain_ms > 0)
		data_output_retain_ms = cfg->output_retain_ms;
	/* A connection of data.c's own (store_meta.h). */
	if (gp_meta_open(GP_META_DATA, cfg->data_dir, &data_db) != 0)
		return GP_EIO;
	pthread_mutex_lock(&data_lock);
	/* After a restart, or a failover, every user with objects gets one
	 * GC pass. */
	if (gp_meta_query(data_db, &st, "SELECT DISTINCT \"user\" FROM "
	    "gp_data_objects UNION SELECT DISTINCT \"user\" FROM "
	    "gp_data_uploads", "") == 0) {
		while (gp_meta_next(st) == 1)
			blob_gc_mark(blob_chunks, gp_meta_text(st, 0));
		gp_meta_done(st);
	}
	pthread_mutex_unlock(&data_lock);
	if (blob_add_user(blob_chunks, &data_blob_user) != 0)
		return GP_EINVAL;
	gp_info("data store data_quota_default=%lld data_max=%lld "
	        "output_retain_s=%lld",
	    (long long)data_quota_default, (long long)data_max,
	    (long long)(data_output_retain_ms / 1000));
	return 0;
}

/* After blob_stop: the GC no longer asks. */
void
data_stop(void)
{
	pthread_mutex_lock(&data_lock);
	gp_meta_close(data_db);
	data_db = NULL;
	pthread_mutex_unlock(&data_lock);
}

/* A chunk PUT of an upload: the chunk store's stream, begun here. */
static const struct api_stream upload_stream = {data_upload_begin,
    ckpt_chunk_put_data, ckpt_chunk_put_end, blob_upload_release};

/* Data sets, uploads, quotas, job outputs, and the agents' side. */
const struct api_route data_routes[] = {
    {"/v1/uploads/*/chunks/*", API_PUT, 0, NULL, 0, API_HELD, NULL,
        &upload_stream},
    {"/v1/uploads", API_ANY, 0, NULL, UPLOAD_BODY_MAX, API_HELD, data_handle,
        NULL},
    {"/v1/data/**", API_ANY, 0, NULL, 0, API_HELD, data_handle, NULL},
    {"/v1/uploads/**", API_ANY, 0, NULL, 0, API_HELD, data_handle, NULL},
    {"/v1/quotas/**", API_ANY, 0, NULL, 0, API_HELD, data_handle, NULL},
    {"/v1/jobs/*/output/**", API_ANY, 0, NULL, 0, API_HELD, data_handle, NULL},
    {"/v1/agent/jobs/*/*/output", API_ANY, 0, NULL, UPLOAD_BODY_MAX, API_HELD,
        data_handle, NULL},
    {"/v1/agent/jobs/*/*/output/**", API_ANY, 0, NULL, 0, API_HELD,
        data_handle, NULL},
    {"/v1/agent/jobs/*/*/data/**", API_ANY, 0, NULL, 0, API_HELD, data_handle,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
