/*
 * ckpt.c: the coordinator's checkpoint store (docs/api.md, "Checkpoints").
 *
 * A checkpoint version is a manifest (files, each a list of chunks) over
 * the blob store's chunk store (blob.h: DATA/checkpoints/<user>/chunks/,
 * BLAKE2b-256, per user, so deduplication never crosses users and nobody
 * can probe for another user's data). This file keeps the versions:
 *   gp_ckpt_versions, gp_ckpt_next_version   behind the storage
 *                    interface (store_meta.h: DATA/checkpoints.db or the
 *                    pool's PostgreSQL), its own connection, guarded by
 *                    ckpt_lock
 * and answers the checkpoint routes; the chunk PUT it answers is the
 * chunk store's streamed upload (blob_upload_*), shared with data uploads.
 *
 * Durability: a commit is answered only when every chunk of the version
 * is durable: it checks every chunk is stored with its size (blob_stat,
 * which waits for a chunk still being stored behind its PUT's answer),
 * makes the user's chunk directories durable (blob_sync_owner), then
 * records the version (synchronous=FULL).
 *
 * Garbage: the chunk store's GC asks this file (a blob_user) for the
 * chunks a user's kept versions reference (collect_refs) and, each pass,
 * drops the versions of jobs finished more than --checkpoint-retain ago
 * (gc_finished_jobs). A commit checks and records under blob_lock, which
 * the GC holds from collecting to removing, so no chunk goes between a
 * commit's check and its insert.
 *
 * Locking: blob_lock (blob_chunks), then ckpt_lock (the database), then
 * state.lock for reading, briefly, to authorise a caller; never the other
 * way round.
 */
#include "ckpt.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api_int.h"
#include "blob.h"
#include "ckpt_store.h"
#include "gp.h"
#include "joblog.h"
#include "log.h"
#include "route.h"
#include "state.h"
#include "store_meta.h"

#define CKPT_JSON_BODY_MAX (32u << 20)
#define MISSING_MAX	   200000
#define AGENT_PREFIX	   "/v1/agent/jobs/"
#define USER_PREFIX	   "/v1/jobs/"

static struct gp_meta *db; /* guarded by its lock */
static pthread_mutex_t ckpt_lock = PTHREAD_MUTEX_INITIALIZER;
static int keep = 3;
static int64_t max_bytes = 64LL << 30;
static int64_t retain_ms = 7 * 86400 * 1000LL;

static int parse_url(const char *url, int *agent, int64_t *id,
    int64_t *attempt, const char **rest);

/*
 * ---- database ----
 *
 * gp_ckpt_versions (job_id, version, attempt, user, manifest, bytes,
 * files, label, created_ms) and gp_ckpt_next_version (job_id, next:
 * version numbers are never reused, even after retention), behind the
 * storage interface (store_meta.h): DATA/checkpoints.db, or the pool's
 * PostgreSQL database.
 */

/*
 * The chunk store's GC (a blob_user): adds the chunks of every kept
 * version of user to refs. blob_lock held.
 */
static int
collect_refs(const char *user, json_t *refs)
{
	struct gp_meta_rows *st;
	json_t *m, *f, *c;
	size_t i, k;
	int rc;

	gp_meta_scan_begin(&ckpt_lock, &db);
	if (db == NULL || gp_meta_query(db, &st, "SELECT manifest FROM "
	    "gp_ckpt_versions WHERE \"user\" = ?", "s", user) != 0) {
		gp_meta_scan_end(&ckpt_lock, &db);
		return GP_EIO;
	}
	while ((rc = gp_meta_next(st)) == 1) {
		m = json_loads(gp_meta_text(st, 0), 0, NULL);
		if (m == NULL) {
			/* Cannot say what it references: remove nothing. */
			rc = GP_EIO;
			break;
		}
		json_array_foreach(json_object_get(m, "files"), i, f)
		{
			json_array_foreach(json_object_get(f, "chunks"), k, c)
				json_object_set(refs, json_string_value(c),
				    json_true());
		}
		json_decref(m);
	}
	gp_meta_done(st);
	gp_meta_scan_end(&ckpt_lock, &db);
	return rc == 0 ? 0 : GP_EIO;
}

/* Removes every version of jobs that finished more than retain_ms ago. */
static void
gc_finished_jobs(void)
{
	struct gp_meta_rows *st = NULL, *del;
	int64_t now = gp_now_ms(), *ids = NULL, id, fin;
	char owner[GP_NAME_MAX + 1];
	size_t n = 0, cap = 0, i;
	enum job_state js;
	int expired, rc;

	pthread_mutex_lock(&ckpt_lock);
	if (gp_meta_query(db, &st, "SELECT DISTINCT job_id FROM "
	    "gp_ckpt_versions", "") != 0)
		st = NULL;
	while (st != NULL && gp_meta_next(st) == 1) {
		id = gp_meta_int(st, 0);
		/* A job that left memory is asked of state.db. */
		rc = state_job_brief(id, owner, &js, &fin);
		expired = rc == GP_ENOENT ||
		    (rc == 0 && js >= JOB_SUCCEEDED && fin + retain_ms < now);
		if (!expired)
			continue;
		if (n == cap) {
			int64_t *p = realloc(ids, (cap ? cap * 2 : 16) *
				sizeof(*ids));
			if (p == NULL)
				break;
			ids = p;
			cap = cap ? cap * 2 : 16;
		}
		ids[n++] = id;
	}
	gp_meta_done(st);
	for (i = 0; i < n; i++) {
		if (gp_meta_query(db, &del, "DELETE FROM gp_ckpt_versions "
		    "WHERE job_id = ? RETURNING \"user\"", "I", ids[i]) != 0)
			break;
		while (gp_meta_next(del) == 1)
			blob_gc_mark(blob_chunks, gp_meta_text(del, 0));
		gp_meta_done(del);
		gp_info("checkpoints expired job=%lld", (long long)ids[i]);
	}
	pthread_mutex_unlock(&ckpt_lock);
	free(ids);
}

/*
 * A GC pass removes nothing unless this coordinator still leads
 * (store_meta.h, gp_meta_scan_fence).
 */
static int
gc_fence(void)
{
	return gp_meta_scan_fence(&ckpt_lock, &db);
}

static const struct blob_user ckpt_blob_user = {"checkpoints",
    gc_finished_jobs, collect_refs, gc_fence};

int
ckpt_init(const struct coord_config *cfg)
{
	struct gp_meta_rows *st;

	keep = cfg->ckpt_keep > 0 ? cfg->ckpt_keep : 3;
	max_bytes = cfg->ckpt_max > 0 ? cfg->ckpt_max : 64LL << 30;
	retain_ms = cfg->ckpt_retain_ms > 0 ? cfg->ckpt_retain_ms
					    : 7 * 86400 * 1000LL;
	/* A version is durable before its commit is answered (store_meta.h). */
	if (gp_meta_open(GP_META_CHECKPOINTS, cfg->data_dir, &db) != 0)
		return GP_EIO;
	/*
	 * After a restart, or a failover, every user with versions gets one
	 * GC pass.
	 */
	if (gp_meta_query(db, &st, "SELECT DISTINCT \"user\" FROM "
	    "gp_ckpt_versions", "") != 0)
		return GP_EIO;
	while (gp_meta_next(st) == 1)
		blob_gc_mark(blob_chunks, gp_meta_text(st, 0));
	gp_meta_done(st);
	if (blob_add_user(blob_chunks, &ckpt_blob_user) != 0)
		return GP_EINVAL;
	gp_info("checkpoint store keep=%d max_bytes=%lld retain_s=%lld", keep,
	    (long long)max_bytes, (long long)(retain_ms / 1000));
	return 0;
}

/* After blob_stop: the GC no longer asks. */
void
ckpt_stop(void)
{
	pthread_mutex_lock(&ckpt_lock);
	gp_meta_close(db);
	db = NULL;
	pthread_mutex_unlock(&ckpt_lock);
}

/* ---- who may do what ---- */

/*
 * An agent's checkpoint (or data) call for (id, attempt): the caller's
 * token must own the node running that attempt (a gang: to write, its
 * rank-0 part's node; to read, any part's), and it must be the job's
 * current, running attempt (the rule of reporting_job() in state.c).
 * OUT: user (the job's owner). Returns 0 or the HTTP status, with err
 * (and *kill for a stale attempt).
 */
int
ckpt_agent_job(const struct token_entry *who, int64_t id, int64_t attempt,
    int write, char *user, char *err, size_t errlen, int *kill)
{
	struct node *node;
	struct job *job;
	int status = 0, k, mine = 0;

	*kill = 0;
	if (who->role != GP_ROLE_PROVIDER && who->role != GP_ROLE_ADMIN) {
		snprintf(err, errlen, "agent calls need a provider token");
		return 403;
	}
	pthread_rwlock_rdlock(&state.lock);
	job = state_job(id);
	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != attempt) {
		snprintf(err, errlen, "stale attempt %lld of job %lld: kill it",
		    (long long)attempt, (long long)id);
		*kill = 1;
		status = 409;
	} else {
		/*
		 * A gang's checkpoint is its rank-0 part's: that node writes
		 * it, every part's node may read it (to resume).
		 */
		for (k = 0; k < (write ? 1 : job->nparts); k++) {
			node = state_node(job->parts[k].node_id);
			mine |= node != NULL && !job->parts[k].ended &&
			    node->owner_token == who->id;
		}
		if (!mine && who->role != GP_ROLE_ADMIN) {
			snprintf(err, errlen, write && job->nparts > 1
			    ? "job %lld's checkpoint is written by its "
			      "rank-0 part"
			    : "job %lld does not run on your node",
			    (long long)id);
			status = 403;
		} else {
			gp_strlcpy(user, job->user, GP_NAME_MAX + 1);
		}
	}
	pthread_rwlock_unlock(&state.lock);
	return status;
}

/* A user's call: the job must be visible to them (else 404). */
static int
user_job(const struct token_entry *who, int64_t id, char *user)
{
	struct job *job;
	int ok, stored;

	pthread_rwlock_rdlock(&state.lock);
	job = state_job_any(id, &stored); /* it may have left memory */
	ok = job != NULL && job_visible_to(job, who);
	if (ok)
		gp_strlcpy(user, job->user, GP_NAME_MAX + 1);
	pthread_rwlock_unlock(&state.lock);
	if (stored)
		state_job_stored_free(job);
	return ok;
}

/* ---- URLs ---- */

/*
 * Parses "/v1/agent/jobs/ID/ATTEMPT/checkpoint[/REST]" (agent) or
 * "/v1/jobs/ID/checkpoints[/REST]" (user). OUT: *id, *attempt (0 for
 * users), *rest ("" when none). Returns 1 when url is such a route.
 */
static int
parse_url(const char *url, int *agent, int64_t *id, int64_t *attempt,
    const char **rest)
{
	char num[24];
	const char *p, *slash;
	size_t len;
	int i;

	if (strncmp(url, AGENT_PREFIX, strlen(AGENT_PREFIX)) == 0) {
		*agent = 1;
		p = url + strlen(AGENT_PREFIX);
	} else if (strncmp(url, USER_PREFIX, strlen(USER_PREFIX)) == 0) {
		*agent = 0;
		p = url + strlen(USER_PREFIX);
	} else {
		return 0;
	}
	*attempt = 0;
	for (i = 0; i < (*agent ? 2 : 1); i++) {
		slash = strchr(p, '/');
		if (slash == NULL || (len = (size_t)(slash - p)) == 0 ||
		    len >= sizeof(num))
			return 0;
		memcpy(num, p, len);
		num[len] = '\0';
		if (gp_parse_int(num, 1, INT64_MAX / 2, i == 0 ? id : attempt)
		    != 0)
			return 0;
		p = slash + 1;
	}
	if (*agent && *attempt > 1000000)
		return 0;
	len = strlen(*agent ? "checkpoint" : "checkpoints");
	if (strncmp(p, *agent ? "checkpoint" : "checkpoints", len) != 0 ||
	    (p[len] != '\0' && p[len] != '/'))
		return 0;
	p += len;
	*rest = *p == '/' ? p + 1 : p;
	if (*p == '/' && **rest == '\0')
		return 0;
	return 1;
}

/* ---- the streamed chunk PUT ---- */
/*
 * A chunk PUT: _begin (after authentication, before any body byte)
 * checks the caller and opens a blob upload in the chunk store as the
 * request's stream; the rest is the chunk store's (blob_upload_*), and
 * ckpt_chunk_put_end answers it (data uploads' chunk PUTs too).
 */
void
ckpt_upload_begin(struct request *req, const char *url)
{
	struct blob_upload *u;
	char user[GP_NAME_MAX + 1], err[200];
	const char *rest;
	int64_t id, attempt;
	int agent, status, kill;

	if ((u = ckpt_chunk_put_new(req)) == NULL || req->auth == NULL)
		return;
	if (!parse_url(url, &agent, &id, &attempt, &rest) ||
	    !gp_ckpt_name_valid(rest + 7)) {
		blob_upload_refuse(u, 404,
		    "chunks are named by 64 lowercase hex digits");
		return;
	}
	status = ckpt_agent_job(req->auth, id, attempt, 1, user, err,
	    sizeof(err), &kill);
	if (status == 409 && kill) {
		blob_upload_refuse_kill(u, err);
		return;
	}
	if (status != 0) {
		blob_upload_refuse(u, status, err);
		return;
	}
	blob_upload_open(u, blob_chunks, user, rest + 7, GP_CKPT_CHUNK_SIZE,
	    "a chunk is at most 4 MiB");
}

struct blob_upload *
ckpt_chunk_put_new(struct request *req)
{
	struct blob_upload *u;

	if ((u = blob_upload_new()) == NULL)
		return NULL; /* _end answers 503 when req->stream is NULL */
	req->stream = u;
	if (req->auth == NULL)
		blob_upload_refuse(u, 401,
		    "missing or unknown token (Authorization: Bearer ...)");
	return u;
}

void
ckpt_chunk_put_data(struct request *req, const char *data, size_t len)
{
	blob_upload_data(req->stream, data, len);
}

enum MHD_Result
ckpt_chunk_put_end(struct MHD_Connection *conn, struct request *req)
{
	struct blob_upload *u = req->stream;
	char got[BLOB_HEX_LEN + 1];
	const char *msg;
	int status;

	if (u == NULL)
		return reply_error(conn, 503, "out of memory");
	switch (blob_upload_end(u, got)) {
	case BLOB_STORED:
		return reply_json(conn, 201, json_pack("{s:b}", "stored", 1));
	case BLOB_EXISTED:
		return reply_json(conn, 200, json_pack("{s:b}", "stored", 0));
	case BLOB_MISMATCH:
		return reply_error(conn, 400,
		    "chunk content does not match its name (BLAKE2b-256)");
	case BLOB_WRITE_FAILED:
		return reply_error(conn, 500, "cannot write the chunk");
	case BLOB_STORE_FAILED:
		return reply_error(conn, 500, "cannot store the chunk");
	case BLOB_REFUSED:
		break;
	}
	status = blob_upload_refused(u, &msg);
	if (status == 409 && blob_upload_kill(u))
		return reply_json(conn, 409, json_pack("{s:s,s:b}", "error",
		    msg, "kill", 1));
	return reply_error(conn, status, "%s", msg);
}

/* Sends a stored chunk of user's (404 when absent). */
enum MHD_Result
ckpt_reply_chunk(struct MHD_Connection *conn, const char *user,
    const char *name)
{
	return blob_reply(conn, blob_chunks, user, name);
}

/* ---- handlers ---- */

static enum MHD_Result
handle_missing(struct MHD_Connection *conn, struct request *req,
    const char *user)
{
	json_t *body = api_body_object(req), *list, *missing, *c;
	size_t i;

	list = json_object_get(body, "chunks");
	if (!json_is_array(list) || json_array_size(list) > MISSING_MAX) {
		json_decref(body);
		return reply_error(conn, 400,
		    "body: {\"chunks\": [names]} with at most %d names",
		    MISSING_MAX);
	}
	json_array_foreach(list, i, c)
	{
		if (!gp_ckpt_name_valid(json_string_value(c))) {
			json_decref(body);
			return reply_error(conn, 400, "chunks[%zu]: 64 "
			    "lowercase hex digits", i);
		}
	}
	missing = blob_missing(blob_chunks, user, list, 0);
	json_decref(body);
	return reply_json(conn, 200, json_pack("{s:o}", "missing", missing));
}

/* A version to record (record_version's IN), and OUT its number. */
struct commit_record {
	int64_t id, attempt;
	const char *user, *manifest, *label;
	int64_t keep;
	const struct gp_ckpt_totals *tot;
	int64_t version; /* OUT */
};

/* The version's rows, one transaction (gp_meta_transact's body). */
static int
record_version(struct gp_meta *m, void *arg)
{
	struct commit_record *r = arg;
	int64_t version = 0;

	if (gp_meta_query_int(m, "SELECT COALESCE((SELECT next FROM "
	    "gp_ckpt_next_version WHERE job_id = ?1), (SELECT MAX(version) + 1 "
	    "FROM gp_ckpt_versions WHERE job_id = ?1), 1)", &version, "I",
	    r->id) != 1 ||
	    gp_meta_run(m, "INSERT INTO gp_ckpt_versions(job_id, version, "
	    "attempt, \"user\", manifest, bytes, files, label, created_ms) "
	    "VALUES(?,?,?,?,?,?,?,?,?)", "IIIssIIsI", r->id, version,
	    r->attempt, r->user, r->manifest, r->tot->bytes, r->tot->files,
	    r->label, gp_now_ms()) != 0 ||
	    gp_meta_run(m, "INSERT INTO gp_ckpt_next_version(job_id, next) "
	    "VALUES(?, ?) ON CONFLICT(job_id) DO UPDATE SET "
	    "next = excluded.next", "II", r->id, version + 1) != 0 ||
	    /* Retention: the last `keep` versions of the job. */
	    gp_meta_run(m, "DELETE FROM gp_ckpt_versions WHERE job_id = ?1 "
	    "AND version <= ?2", "II", r->id, version - r->keep) != 0)
		return GP_EIO;
	r->version = version;
	return 0;
}

static enum MHD_Result
handle_commit(struct MHD_Connection *conn, struct request *req,
    int64_t id, int64_t attempt, const char *user)
{
	struct commit_record rec;
	struct gp_ckpt_totals tot;
	json_t *body = api_body_object(req), *f, *c, *stored;
	const char *label, *name;
	char err[256], *text = NULL;
	int64_t version = 0, size, want;
	struct stat sb;
	size_t i, k;
	int ret, status = 0;

	if (body == NULL)
		return reply_error(conn, 400, "body: a JSON manifest object");
	ret = gp_ckpt_manifest_check(body, max_bytes, 0, &tot, err,
	    sizeof(err));
	if (ret != 0) {
		json_decref(body);
		return reply_error(conn, ret == GP_ETOOBIG ? 413 : 400, "%s",
		    err);
	}
	label = json_string_value(json_object_get(body, "label"));
	if (label == NULL)
		label = "";
	stored = json_pack("{s:O,s:s}", "files", json_object_get(body,
	    "files"), "label", label);
	text = stored != NULL ? json_dumps(stored, JSON_COMPACT) : NULL;
	json_decref(stored);
	if (text == NULL) {
		json_decref(body);
		return reply_error(conn, 503, "out of memory");
	}
	/* No chunk goes between the check and the insert (blob.h). */
	blob_lock(blob_chunks);
	pthread_mutex_lock(&ckpt_lock);
	/* Every chunk stored, each of the size its place says. */
	json_array_foreach(json_object_get(body, "files"), i, f)
	{
		size = json_integer_value(json_object_get(f, "size"));
		json_array_foreach(json_object_get(f, "chunks"), k, c)
		{
			name = json_string_value(c);
			want = size - (int64_t)k * GP_CKPT_CHUNK_SIZE;
			if (want > GP_CKPT_CHUNK_SIZE)
				want = GP_CKPT_CHUNK_SIZE;
			if (blob_stat(blob_chunks, user, name, &sb) != 0) {
				snprintf(err, sizeof(err),
				    "chunk %s of %.200s is not stored: upload "
				    "it first", name,
				    json_string_value(json_object_get(f,
					"path")));
				status = 400;
				goto unlock;
			}
			if (sb.st_size != want) {
				snprintf(err, sizeof(err),
				    "chunk %s of %.200s holds %lld bytes, not "
				    "%lld", name,
				    json_string_value(json_object_get(f,
					"path")),
				    (long long)sb.st_size, (long long)want);
				status = 400;
				goto unlock;
			}
		}
	}
	status = 500;
	snprintf(err, sizeof(err), "cannot make the chunks durable");
	if (blob_sync_owner(blob_chunks, user) != 0)
		goto unlock;
	rec = (struct commit_record){id, attempt, user, text, label, keep,
	    &tot, 0};
	if ((ret = gp_meta_transact(db, record_version, &rec)) != 0) {
		status = gp_meta_http_status(ret);
		snprintf(err, sizeof(err), "cannot record the version: %s",
		    gp_meta_error(db));
		goto unlock;
	}
	version = rec.version;
	status = 0;
unlock:
	pthread_mutex_unlock(&ckpt_lock);
	blob_unlock(blob_chunks);
	free(text);
	if (status != 0) {
		json_decref(body);
		gp_warn("checkpoint commit refused job=%lld attempt=%lld "
			"status=%d error=\"%s\"",
		    (long long)id, (long long)attempt, status, err);
		return reply_error(conn, status, "%s", err);
	}
	blob_gc_mark(blob_chunks, user);
	state_note_checkpoint(id, (int)attempt, version, tot.bytes, label);
	gp_info("checkpoint committed job=%lld attempt=%lld version=%lld "
		"files=%lld bytes=%lld",
	    (long long)id, (long long)attempt, (long long)version,
	    (long long)tot.files, (long long)tot.bytes);
	json_decref(body);
	return reply_json(conn, 200,
	    json_pack("{s:I}", "version", (json_int_t)version));
}

/* The manifest of a version (0: the latest), with its metadata. */
static enum MHD_Result
handle_manifest(struct MHD_Connection *conn, int64_t id, int64_t version)
{
	struct gp_meta_rows *st;
	json_t *m = NULL;
	char tm[40];
	int rc;

	pthread_mutex_lock(&ckpt_lock);
	rc = version > 0
	    ? gp_meta_query(db, &st, "SELECT manifest, version, attempt, "
		  "created_ms, bytes FROM gp_ckpt_versions WHERE job_id = ?1 "
		  "AND version = ?2", "II", id, version)
	    : gp_meta_query(db, &st, "SELECT manifest, version, attempt, "
		  "created_ms, bytes FROM gp_ckpt_versions WHERE job_id = ?1 "
		  "ORDER BY version DESC LIMIT 1", "I", id);
	if (rc == 0) {
		if (gp_meta_next(st) == 1) {
			m = json_loads(gp_meta_text(st, 0), 0, NULL);
			gp_format_time(gp_meta_int(st, 3), tm, sizeof(tm));
			json_object_set_new(m, "version",
			    json_integer(gp_meta_int(st, 1)));
			json_object_set_new(m, "attempt",
			    json_integer(gp_meta_int(st, 2)));
			json_object_set_new(m, "created_at", json_string(tm));
			json_object_set_new(m, "bytes",
			    json_integer(gp_meta_int(st, 4)));
		}
		gp_meta_done(st);
	}
	pthread_mutex_unlock(&ckpt_lock);
	if (m == NULL)
		return reply_error(conn, 404, "no checkpoint");
	return reply_json(conn, 200, m);
}

static enum MHD_Result
handle_list(struct MHD_Connection *conn, int64_t id)
{
	json_t *list = json_array();
	struct gp_meta_rows *st;
	char tm[40];

	pthread_mutex_lock(&ckpt_lock);
	if (gp_meta_query(db, &st, "SELECT version, attempt, bytes, files, "
	    "label, created_ms FROM gp_ckpt_versions WHERE job_id = ? "
	    "ORDER BY version", "I", id) == 0) {
		while (gp_meta_next(st) == 1) {
			gp_format_time(gp_meta_int(st, 5), tm, sizeof(tm));
			json_array_append_new(list,
			    json_pack("{s:I,s:I,s:I,s:I,s:s,s:s}", "version",
				(json_int_t)gp_meta_int(st, 0), "attempt",
				(json_int_t)gp_meta_int(st, 1), "bytes",
				(json_int_t)gp_meta_int(st, 2), "files",
				(json_int_t)gp_meta_int(st, 3), "label",
				gp_meta_text(st, 4), "created_at", tm));
		}
		gp_meta_done(st);
	}
	pthread_mutex_unlock(&ckpt_lock);
	return reply_json(conn, 200, json_pack("{s:I,s:o}", "job_id",
	    (json_int_t)id, "checkpoints", list));
}

enum MHD_Result
ckpt_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	char user[GP_NAME_MAX + 1], err[200];
	int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	int64_t id, attempt, version;
	const char *rest;
	int agent, status, kill;

	if (!parse_url(url, &agent, &id, &attempt, &rest))
		return reply_error(conn, 404, "no such endpoint: %.100s", url);
	if (agent) {
		status = ckpt_agent_job(req->auth, id, attempt, !get, user, err,
		    sizeof(err), &kill);
		if (status == 409 && kill)
			return reply_json(conn, 409, json_pack("{s:s,s:b}",
			    "error", err, "kill", 1));
		if (status != 0)
			return reply_error(conn, status, "%s", err);
		if (get && rest[0] == '\0')
			return handle_manifest(conn, id, 0);
		if (get && strncmp(rest, "chunks/", 7) == 0 &&
		    gp_ckpt_name_valid(rest + 7))
			return ckpt_reply_chunk(conn, user, rest + 7);
		if (post && strcmp(rest, "missing") == 0)
			return handle_missing(conn, req, user);
		if (post && strcmp(rest, "commit") == 0)
			return handle_commit(conn, req, id, attempt, user);
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	}
	if (!user_job(req->auth, id, user))
		return reply_error(conn, 404, "no job %lld", (long long)id);
	if (!get)
		return reply_error(conn, 405, "method %.16s not allowed",
		    method);
	if (rest[0] == '\0')
		return handle_list(conn, id);
	if (strncmp(rest, "chunks/", 7) == 0 && gp_ckpt_name_valid(rest + 7))
		return ckpt_reply_chunk(conn, user, rest + 7);
	if (strcmp(rest, "latest") == 0)
		return handle_manifest(conn, id, 0);
	if (gp_parse_int(rest, 1, INT64_MAX / 2, &version) == 0)
		return handle_manifest(conn, id, version);
	return reply_error(conn, 404, "no such endpoint: %s %.100s", method,
	    url);
}

static const struct api_stream chunk_stream = {ckpt_upload_begin,
    ckpt_chunk_put_data, ckpt_chunk_put_end, blob_upload_release};

/* Checkpoints: the agent's (its attempt's) and the user's (read only). */
const struct api_route ckpt_routes[] = {
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/chunks/*/**", API_PUT, 0,
        NULL, 0, API_HELD, NULL, &chunk_stream},
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/missing", API_ANY, 0, NULL,
        CKPT_JSON_BODY_MAX, API_HELD, ckpt_handle, NULL},
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/commit", API_ANY, 0, NULL,
        CKPT_JSON_BODY_MAX, API_HELD, ckpt_handle, NULL},
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/**", API_ANY, 0, NULL, 0,
        API_HELD, ckpt_handle, NULL},
    {"/v1/jobs/{id}/checkpoints/**", API_ANY, 0, NULL, 0, API_HELD, ckpt_handle,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
