/*
 * data_sets.c: the reads and changes of stored data (data.c has the
 * whole story): data sets (list, versions, read, remove, share), quotas,
 * job outputs, and the agents' reads of a job's data sets.
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

/* ---- data sets ---- */

static json_t *
shares_of(const char *owner, const char *name)
{
	json_t *list = json_array();
	struct gp_meta_rows *st;

	if (gp_meta_query(data_db, &st, "SELECT grantee FROM gp_data_shares "
	    "WHERE \"user\" = ? AND name = ? ORDER BY grantee", "ss", owner,
	    name) != 0)
		return list;
	while (gp_meta_next(st) == 1)
		json_array_append_new(list, json_string(gp_meta_text(st, 0)));
	gp_meta_done(st);
	return list;
}

/*
 * Every data set's grantees, {"OWNER/NAME": [grantee...]}, in one query:
 * a listing asks once, not once per data set (a round trip each on
 * PostgreSQL). data_lock held.
 */
static json_t *
all_shares(void)
{
	json_t *map = json_object(), *list;
	struct gp_meta_rows *st;
	char key[2 * GP_NAME_MAX + 2];

	if (map == NULL || gp_meta_query(data_db, &st, "SELECT \"user\", "
	    "name, grantee FROM gp_data_shares ORDER BY \"user\", name, "
	    "grantee", "") != 0)
		return map;
	while (gp_meta_next(st) == 1) {
		snprintf(key, sizeof(key), "%s/%s", gp_meta_text(st, 0),
		    gp_meta_text(st, 1));
		if ((list = json_object_get(map, key)) == NULL) {
			list = json_array();
			json_object_set_new(map, key, list);
		}
		json_array_append_new(list, json_string(gp_meta_text(st, 2)));
	}
	gp_meta_done(st);
	return map;
}

/* GET /v1/data[?all=1]: the caller's data sets and those shared. */
enum MHD_Result
data_handle_list(struct MHD_Connection *conn, struct request *req)
{
	const char *all =
	    MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "all");
	int every = all != NULL && strcmp(all, "0") != 0 &&
	    req->auth->role == GP_ROLE_ADMIN;
	json_t *list = json_array(), *o, *shares, *granted;
	struct gp_meta_rows *st;
	char tm[40], key[2 * GP_NAME_MAX + 2];

	pthread_mutex_lock(&data_lock);
	shares = all_shares();
	if (gp_meta_query(data_db, &st,
	    "SELECT o.\"user\", o.name, o.version, o.bytes, o.files, "
	    "o.created_ms, (SELECT COUNT(*) FROM gp_data_objects v WHERE "
	    "v.kind = 'data' AND v.\"user\" = o.\"user\" AND "
	    "v.name = o.name) FROM gp_data_objects o WHERE o.kind = 'data' "
	    "AND o.version = (SELECT MAX(version) FROM gp_data_objects v "
	    "WHERE v.kind = 'data' AND v.\"user\" = o.\"user\" AND "
	    "v.name = o.name) AND (?1 = 1 OR o.\"user\" = ?2 OR EXISTS "
	    "(SELECT 1 FROM gp_data_shares s WHERE s.\"user\" = o.\"user\" "
	    "AND s.name = o.name AND s.grantee = ?2)) "
	    "ORDER BY o.\"user\", o.name", "is", every,
	    req->auth->name) == 0) {
		while (gp_meta_next(st) == 1) {
			gp_format_time(gp_meta_int(st, 5), tm, sizeof(tm));
			o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:s,s:I}", "owner",
			    gp_meta_text(st, 0), "name", gp_meta_text(st, 1),
			    "version", (json_int_t)gp_meta_int(st, 2),
			    "bytes", (json_int_t)gp_meta_int(st, 3), "files",
			    (json_int_t)gp_meta_int(st, 4), "created_at", tm,
			    "versions", (json_int_t)gp_meta_int(st, 6));
			if (o != NULL &&
			    data_may_change(req->auth, gp_meta_text(st, 0))) {
				snprintf(key, sizeof(key), "%s/%s",
				    gp_meta_text(st, 0), gp_meta_text(st, 1));
				granted = json_object_get(shares, key);
				json_object_set_new(o, "shared_with",
				    granted != NULL ? json_deep_copy(granted)
						    : json_array());
			}
			json_array_append_new(list, o);
		}
		gp_meta_done(st);
	}
	json_decref(shares);
	pthread_mutex_unlock(&data_lock);
	return reply_json(conn, 200, json_pack("{s:o}", "data_sets", list));
}

/* GET /v1/data/OWNER/NAME: its versions. */
enum MHD_Result
data_handle_versions(struct MHD_Connection *conn, struct request *req,
    const char *owner, const char *name)
{
	json_t *list = json_array(), *o = NULL;
	struct gp_meta_rows *st;
	char tm[40];

	pthread_mutex_lock(&data_lock);
	if (data_may_read(req->auth, owner, name) &&
	    gp_meta_query(data_db, &st, "SELECT version, bytes, files, "
	    "created_ms FROM gp_data_objects WHERE kind = 'data' AND "
	    "\"user\" = ? AND name = ? ORDER BY version", "ss", owner,
	    name) == 0) {
		while (gp_meta_next(st) == 1) {
			gp_format_time(gp_meta_int(st, 3), tm, sizeof(tm));
			json_array_append_new(list,
			    json_pack("{s:I,s:I,s:I,s:s}", "version",
				(json_int_t)gp_meta_int(st, 0), "bytes",
				(json_int_t)gp_meta_int(st, 1), "files",
				(json_int_t)gp_meta_int(st, 2), "created_at",
				tm));
		}
		gp_meta_done(st);
	}
	if (json_array_size(list) > 0) {
		o = json_pack("{s:s,s:s,s:O}", "owner", owner, "name", name,
		    "versions", list);
		if (o != NULL && data_may_change(req->auth, owner))
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
enum MHD_Result
data_handle_read(struct MHD_Connection *conn, struct request *req,
    const char *owner, const char *name, const char *vtext, const char *chunk)
{
	int64_t version = 0, id = 0;
	json_t *m = NULL;
	int ok;

	if (strcmp(vtext, "latest") != 0 && !data_num(vtext, &version))
		return reply_error(conn, 404,
		    "no version '%.32s' of data set "
		    "%s/%s",
		    vtext, owner, name);
	pthread_mutex_lock(&data_lock);
	if (data_may_read(req->auth, owner, name))
		id = data_object(owner, name, &version);
	ok = id > 0 && (chunk == NULL || data_object_has_chunk(id, chunk));
	if (ok && chunk == NULL)
		m = data_object_manifest(id);
	pthread_mutex_unlock(&data_lock);
	if (!ok)
		return chunk != NULL && id > 0
		    ? reply_error(conn, 404, "no chunk %.64s", chunk)
		    : reply_error(conn, 404, "no data set %s/%s%s%s", owner,
		          name, strcmp(vtext, "latest") ? "@" : "",
		          strcmp(vtext, "latest") ? vtext : "");
	if (chunk != NULL)
		return blob_reply(conn, blob_chunks, owner, chunk);
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
			if (strcmp(data_str(json_object_get(d, "owner")),
			        owner) != 0 ||
			    strcmp(data_str(json_object_get(d, "name")),
			        name) != 0 ||
			    (version > 0 &&
			        json_integer_value(
			            json_object_get(d, "version")) != version))
				continue;
			if (used + 24 < len)
				used += (size_t)snprintf(out + used, len - used,
				    "%s%lld", n ? ", " : "",
				    (long long)job->id);
			n++;
			break;
		}
	}
	pthread_rwlock_unlock(&state.lock);
	return n;
}

/* Versions to remove (remove_versions' IN), OUT how many went. */
struct removal {
	const char *owner, *name;
	int64_t version; /* 0: all */
	int64_t removed; /* OUT */
};

/* The versions, and the shares with the last: one transaction. */
static int
remove_versions(struct gp_meta *meta, void *arg)
{
	struct removal *r = arg;
	struct gp_meta_rows *st;
	int64_t id;

	r->removed = 0;
	/* One version at a time: each deleted before the next read. */
	for (;;) {
		if (gp_meta_query(meta, &st, "SELECT id FROM "
		    "gp_data_objects WHERE kind = 'data' AND \"user\" = ?1 "
		    "AND name = ?2 AND (?3 = 0 OR version = ?3) LIMIT 1", "ssI",
		    r->owner, r->name, r->version) != 0)
			return GP_EIO;
		id = gp_meta_next(st) == 1 ? gp_meta_int(st, 0) : 0;
		gp_meta_done(st);
		if (id == 0)
			break;
		if (data_object_delete(id) != 0)
			return GP_EIO;
		r->removed++;
	}
	/* The last version gone: so are its shares. */
	if (data_object(r->owner, r->name, &(int64_t){0}) == 0 &&
	    gp_meta_run(meta, "DELETE FROM gp_data_shares WHERE \"user\" = ? "
	    "AND name = ?", "ss", r->owner, r->name) != 0)
		return GP_EIO;
	return 0;
}

/* DELETE /v1/data/OWNER/NAME[/VERSION]. */
enum MHD_Result
data_handle_remove(struct MHD_Connection *conn, struct request *req,
    const char *owner, const char *name, const char *vtext)
{
	struct removal rec;
	char jobs[256];
	int64_t version = 0, removed = 0;
	int readable, status = 0, rc;

	if (vtext != NULL && !data_num(vtext, &version))
		return reply_error(conn, 404,
		    "no version '%.32s' of data set "
		    "%s/%s",
		    vtext, owner, name);
	pthread_mutex_lock(&data_lock);
	readable = data_may_read(req->auth, owner, name);
	if (!readable || data_object(owner, name, &(int64_t){version}) == 0) {
		status = 404;
	} else if (!data_may_change(req->auth, owner)) {
		status = 403;
	} else if (jobs_using(owner, name, version, jobs, sizeof(jobs)) > 0) {
		status = 409;
	} else {
		rec = (struct removal){owner, name, version, 0};
		if ((rc = gp_meta_transact(data_db, remove_versions, &rec)) !=
		    0)
			status = gp_meta_http_status(rc);
		removed = rec.removed;
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
	case 503:
		return reply_error(conn, status, "cannot remove the data set: "
		    "%s", gp_meta_error(data_db));
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
enum MHD_Result
data_handle_share(struct MHD_Connection *conn, struct request *req,
    const char *owner, const char *name, int share)
{
	char grantee[GP_CKPT_DATA_NAME_LEN], err[200];
	json_t *shares = NULL;
	int status = 0;

	if (gp_share_request_decode(req->body.data ? req->body.data : "",
	        req->body.len, grantee, err, sizeof(err)) != 0)
		return reply_error(conn, 400, "%s", err);
	pthread_mutex_lock(&data_lock);
	if (!data_may_read(req->auth, owner, name) ||
	    data_object(owner, name, &(int64_t){0}) == 0)
		status = 404;
	else if (!data_may_change(req->auth, owner))
		status = 403;
	else if (strcmp(grantee, owner) == 0)
		status = 400;
	else {
		if (gp_meta_run(data_db, share
			? "INSERT INTO gp_data_shares(\"user\", name, grantee) "
			  "VALUES(?, ?, ?) ON CONFLICT DO NOTHING"
			: "DELETE FROM gp_data_shares WHERE \"user\" = ? AND "
			  "name = ? AND grantee = ?", "sss", owner, name,
			grantee) != 0)
			status = 500;
		shares = shares_of(owner, name);
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

enum MHD_Result
data_handle_quota(struct MHD_Connection *conn, struct request *req,
    const char *user, const char *method)
{
	char err[200];
	const char *source;
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
		if (post && bytes > 0)
			ok = gp_meta_run(data_db, "INSERT INTO gp_data_quotas("
			    "\"user\", bytes) VALUES(?, ?) ON CONFLICT(\"user\") "
			    "DO UPDATE SET bytes = excluded.bytes", "sI", user,
			    bytes) == 0;
		else if (post)
			ok = gp_meta_run(data_db, "INSERT INTO gp_data_quotas("
			    "\"user\", bytes) VALUES(?, NULL) ON CONFLICT("
			    "\"user\") DO UPDATE SET bytes = NULL", "s",
			    user) == 0;
		else
			ok = gp_meta_run(data_db, "DELETE FROM gp_data_quotas "
			    "WHERE \"user\" = ?", "s", user) == 0;
		pthread_mutex_unlock(&data_lock);
		if (!ok)
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
	limit = data_quota_of(user, &source);
	o = json_pack("{s:s,s:o,s:s,s:I,s:I,s:I,s:I,s:I}", "user", user,
	    "limit", limit > 0 ? json_integer(limit) : json_null(), "source",
	    source, "used", (json_int_t)data_usage(user, NULL, 0), "data_bytes",
	    (json_int_t)data_usage(user, "data", 0), "output_bytes",
	    (json_int_t)data_usage(user, "output", 0), "data_versions",
	    (json_int_t)data_query_int(0,
	        "SELECT COUNT(*) FROM gp_data_objects WHERE "
	        "\"user\" = ? AND kind = 'data'",
	        "s", user),
	    "outputs",
	    (json_int_t)data_query_int(0,
	        "SELECT COUNT(*) FROM gp_data_objects WHERE "
	        "\"user\" = ? AND kind = 'output'",
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
enum MHD_Result
data_handle_output(struct MHD_Connection *conn, struct request *req,
    int64_t job, const char *chunk, const char *method)
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
	id = data_query_int(0,
	    "SELECT id FROM gp_data_objects WHERE kind = 'output' AND "
	    "job_id = ?",
	    "i", job);
	ok = id > 0 && (chunk == NULL || data_object_has_chunk(id, chunk));
	if (ok && del)
		ok = data_object_delete(id) == 0;
	else if (ok && chunk == NULL)
		m = data_object_manifest(id);
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
		return blob_reply(conn, blob_chunks, user, chunk);
	if (m == NULL)
		return reply_error(conn, 500, "cannot read the manifest");
	return reply_json(conn, 200, m);
}

/* ---- the agent's reads: a job's data sets ---- */

/* GET /v1/agent/jobs/ID/ATTEMPT/data/K[/chunks/HEX]. */
enum MHD_Result
data_handle_agent_data(struct MHD_Connection *conn, struct request *req,
    int64_t job, int64_t attempt, int64_t k, const char *chunk)
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
		gp_strlcpy(owner, data_str(json_object_get(d, "owner")),
		    sizeof(owner));
		gp_strlcpy(name, data_str(json_object_get(d, "name")),
		    sizeof(name));
		version = json_integer_value(json_object_get(d, "version"));
	}
	pthread_rwlock_unlock(&state.lock);
	if (owner[0] == '\0' || name[0] == '\0' || version <= 0)
		return reply_error(conn, 404, "job %lld has no data set %lld",
		    (long long)job, (long long)k);
	pthread_mutex_lock(&data_lock);
	if (data_may_mount(user, owner, name))
		id = data_object(owner, name, &version);
	ok = id > 0 && (chunk == NULL || data_object_has_chunk(id, chunk));
	if (ok && chunk == NULL)
		m = data_object_manifest(id);
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
		return blob_reply(conn, blob_chunks, owner, chunk);
	if (m == NULL)
		return reply_error(conn, 500, "cannot read the manifest");
	return reply_json(conn, 200, m);
}
