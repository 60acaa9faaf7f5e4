/*
 * api.c: the HTTP API (docs/api.md) on libmicrohttpd: body collection,
 * authentication, routing, and the handlers. Reads are answered here
 * under the state read lock; changes are queued to the state thread
 * (state.c) and the connection is suspended until it has committed them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "api_int.h"
#include "coord_metrics.h"
#include "datasets.h"
#include "image_store.h"
#include "joblog.h"
#include "notify.h"
#include "state.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "prom.h"
#include "route.h"

/*
 * Answers 200 with a constant JSON text. The idle answers that agents
 * get most often (heartbeats that kill nothing, polls whose time ran out)
 * cost as much to encode with jansson as the rest of their handling; with
 * 10,000 agents that is over 10,000 answers a second.
 */
enum MHD_Result
api_reply_const(struct MHD_Connection *conn, const char *json)
{
	char *text = strdup(json);

	if (text == NULL)
		return MHD_NO;
	return reply_raw(conn, 200, text, strlen(text), "application/json",
	    NULL);
}

const char *
api_query(struct MHD_Connection *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

/* A strict integer query argument; def when absent. -1 on bad input. */
int
api_query_int(struct MHD_Connection *conn, const char *key, int64_t def,
    int64_t min, int64_t max, int64_t *out)
{
	const char *v = api_query(conn, key);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	return gp_parse_int(v, min, max, out) == 0 ? 0 : -1;
}

/* Parses a JSON object body; answers 400 itself on failure. */
json_t *
api_parse_body(struct MHD_Connection *conn, struct request *req,
    enum MHD_Result *rc)
{
	json_error_t jerr;
	json_t *body;

	body = json_loadb(req->body.data ? req->body.data : "", req->body.len,
	    JSON_REJECT_DUPLICATES, &jerr);
	if (body == NULL || !json_is_object(body)) {
		json_decref(body);
		*rc = body == NULL
		    ? reply_error(conn, 400, "invalid JSON: %s", jerr.text)
		    : reply_error(conn, 400, "body must be a JSON object");
		return NULL;
	}
	return body;
}

/* 1 when every key of obj is in the NULL-terminated list. */
int
api_only_fields(json_t *obj, const char *const *allowed, const char **bad)
{
	const char *key;
	json_t *v;
	int i, ok;

	json_object_foreach(obj, key, v)
	{
		(void)v;
		ok = 0;
		for (i = 0; allowed[i] != NULL; i++)
			if (strcmp(key, allowed[i]) == 0)
				ok = 1;
		if (!ok) {
			*bad = key;
			return 0;
		}
	}
	return 1;
}

enum MHD_Result
api_queue_op(struct MHD_Connection *conn, struct request *req,
    struct op *op)
{
	op->conn = conn;
	op->req = req;
	req->op = op;
	req->suspended = 1;
	MHD_suspend_connection(conn);
	state_submit_op(op);
	return MHD_YES;
}

/* ---- handlers: users ---- */

static enum MHD_Result
handle_whoami(struct MHD_Connection *conn, struct request *req)
{
	int64_t ids[64];
	json_t *groups = json_array(), *o;
	size_t i, n;

	o = json_pack("{s:I,s:s,s:s}", "id", (json_int_t)req->auth->id,
	    "name", req->auth->name, "role", gp_role_name(req->auth->role));
	/* Accounting: the token's group; a user's groups, default first. */
	pthread_rwlock_rdlock(&state.lock);
	n = req->auth->role == GP_ROLE_PROVIDER
	    ? (ids[0] = req->auth->group_id, 1)
	    : ledger_user_groups(&ledger, req->auth->name, ids, 64);
	for (i = 0; i < n; i++)
		json_array_append_new(groups,
		    json_string(ledger_group_name(&ledger, ids[i])));
	json_object_set_new(o, "group",
	    json_string(ledger_group_name(&ledger, req->auth->group_id)));
	pthread_rwlock_unlock(&state.lock);
	json_object_set_new(o, "groups", groups);
	/* Plain HTTP beyond loopback (--insecure): the dashboard warns. */
	if (state.cfg.insecure)
		json_object_set_new(o, "insecure", json_true());
	return reply_json(conn, 200, o);
}

static enum MHD_Result
handle_token_create(struct MHD_Connection *conn, struct request *req)
{
	struct acct_request r;
	enum MHD_Result rc;
	char err[256];
	json_t *body;
	struct op *op;

	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	/* role, name and an optional group (fuzzed: fuzz_acct_body.c) */
	if (acct_decode(ACCT_BODY_TOKEN, body, &r, err, sizeof(err)) != 0) {
		json_decref(body);
		return reply_error(conn, 400, "%s", err);
	}
	op = op_new(OP_TOKEN_CREATE, &req->auth_copy);
	if (op == NULL) {
		json_decref(body);
		return reply_error(conn, 503, "out of memory");
	}
	op->body = body;
	op->acct = r;
	return api_queue_op(conn, req, op);
}

/* GET /v1/tokens (admin): every token, never a hash. */
static enum MHD_Result
handle_token_list(struct MHD_Connection *conn)
{
	json_t *o;

	pthread_rwlock_rdlock(&state.lock);
	o = state_tokens_json();
	pthread_rwlock_unlock(&state.lock);
	if (o == NULL)
		return reply_error(conn, 503, "out of memory");
	return reply_json(conn, 200, o);
}

/* POST /v1/tokens/{id}/revoke (admin). */
static enum MHD_Result
handle_token_revoke(struct MHD_Connection *conn, struct request *req,
    int64_t id)
{
	struct op *op;

	if ((op = op_new(OP_TOKEN_REVOKE, &req->auth_copy)) == NULL)
		return reply_error(conn, 503, "out of memory");
	op->job_id = id; /* the token's id */
	return api_queue_op(conn, req, op);
}

/*
 * What a submission and a job array share: decodes the spec (text, len)
 * into op->spec, then pins its data sets and image. Returns 0, or the
 * HTTP status of the error in err.
 */
static int
submit_prepare(struct request *req, const char *text, size_t len,
    struct op *op, char *err, size_t errlen)
{
	int status;

	gp_jobspec_fini(&op->spec);
	if (gp_jobspec_decode(text, len, &op->spec, err, errlen) != 0)
		return 400;
	if (op->spec.array_job_id != 0 || op->spec.array_limit != 0) {
		snprintf(err, errlen,
		    "array_job_id, array_task_id, array_limit: "
		    "set by the coordinator (submit to "
		    "/v1/jobs/array)");
		return 400;
	}
	/* Data sets: readable by the job's owner, pinned to a version. */
	if ((status = data_pin(req->auth, &op->spec, err, errlen)) != 0)
		return status;
	if (op->spec.image[0] != '\0') {
		/* Pinned now: a later import under the name changes nothing. */
		char pinned[GP_IMAGE_REF_MAX + 1], why[256];
		int ret = image_resolve(op->spec.image, pinned, sizeof(pinned),
		    &op->body, why, sizeof(why));
		if (ret != 0) {
			snprintf(err, errlen, "image: %s", why);
			return ret == GP_EIO ? 500 : 400;
		}
		if (gp_jobspec_set_image(&op->spec, pinned) != 0) {
			snprintf(err, errlen, "out of memory");
			return 503;
		}
	}
	return 0;
}

static enum MHD_Result
handle_submit(struct MHD_Connection *conn, struct request *req)
{
	char err[300];
	struct op *op;
	int status;

	op = op_new(OP_SUBMIT, &req->auth_copy);
	if (op == NULL)
		return reply_error(conn, 503, "out of memory");
	status = submit_prepare(req, req->body.data ? req->body.data : "",
	    req->body.len, op, err, sizeof(err));
	if (status != 0) {
		op_free(op);
		return reply_error(conn, status, "%s", err);
	}
	return api_queue_op(conn, req, op);
}

/*
 * POST /v1/jobs/array: {"job": JOBSPEC, "array": "0-999:2,1500"}, one job
 * per task index, made together (apply_submit_array), all or none.
 */
static enum MHD_Result
handle_submit_array(struct MHD_Connection *conn, struct request *req)
{
	static const char *const fields[] = {"job", "array", NULL};
	const char *bad = NULL;
	enum MHD_Result rc;
	json_t *body, *job, *array;
	char err[300], *text;
	struct op *op;
	int status, limit = 0;

	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	job = json_object_get(body, "job");
	array = json_object_get(body, "array");
	if (!api_only_fields(body, fields, &bad)) {
		rc = reply_error(conn, 400, "unknown field '%.64s'", bad);
		goto out;
	}
	if (!json_is_object(job) || !json_is_string(array)) {
		rc = reply_error(conn, 400, "the body must be {\"job\": a job "
		    "spec, \"array\": task indices such as \"0-999\"}");
		goto out;
	}
	if ((op = op_new(OP_SUBMIT_ARRAY, &req->auth_copy)) == NULL) {
		rc = reply_error(conn, 503, "out of memory");
		goto out;
	}
	status = gp_array_parse(json_string_value(array), &op->tasks,
	    &op->ntasks, &limit, err, sizeof(err));
	if (status != 0) {
		op_free(op);
		rc = reply_error(conn, status == GP_ENOMEM ? 503 : 400, "%s",
		    status == GP_ENOMEM ? "out of memory" : err);
		goto out;
	}
	if ((text = json_dumps(job, JSON_COMPACT)) == NULL) {
		op_free(op);
		rc = reply_error(conn, 503, "out of memory");
		goto out;
	}
	status = submit_prepare(req, text, strlen(text), op, err, sizeof(err));
	free(text);
	op->spec.array_limit = limit; /* the tasks' (apply_submit_array) */
	/* Not kept for arrays yet: refused rather than silently ignored. */
	if (status == 0 && op->spec.idempotency_key[0] != '\0') {
		snprintf(err, sizeof(err), "idempotency_key: not for job "
		    "arrays yet");
		status = 400;
	}
	/* Each task's environment gets the two GPUPOOL_ARRAY_* variables. */
	if (status == 0 && json_object_size(op->spec.env) > GP_ENV_MAX - 2) {
		snprintf(err, sizeof(err), "env: an array task may set at most "
		    "%d variables", GP_ENV_MAX - 2);
		status = 400;
	}
	if (status != 0) {
		op_free(op);
		rc = reply_error(conn, status, "%s", err);
		goto out;
	}
	rc = api_queue_op(conn, req, op);
out:
	json_decref(body);
	return rc;
}

static int
cmp_id(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

#define LIST_SLICE 256

/*
 * A job (or node) list as text, built one at a time: each job's JSON is dumped
 * and freed at once (as jansson values a list of 100,000 queued jobs took
 * ~5 KB a job), and the read lock is let go every LIST_SLICE jobs, so a
 * long list never holds the state thread back.
 */
struct job_list {
	struct gp_buf buf; /* the jobs' JSON, comma separated */
	char **rev;	   /* limit: the newest first, joined in reverse */
	size_t nrev;
	int n, failed;
};

/* Adds o (taken) to the list, or to its reversed part. */
static void
job_list_add(struct job_list *l, json_t *o, int reversed)
{
	char *t = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (t == NULL) {
		l->failed = 1;
		return;
	}
	if (reversed) {
		l->rev[l->nrev++] = t;
		return;
	}
	if ((l->n++ > 0 && gp_buf_append(&l->buf, ",", 1) != 0) ||
	    gp_buf_append(&l->buf, t, strlen(t)) != 0)
		l->failed = 1;
	free(t);
}

/* Lets the read lock go and takes it again after every LIST_SLICE. */
static void
list_breathe(int64_t k)
{
	if (k % LIST_SLICE == 0) {
		pthread_rwlock_unlock(&state.lock);
		pthread_rwlock_rdlock(&state.lock);
	}
}

/*
 * ?all=1: every job who may see, in id order; limit > 0: only the newest
 * limit of them. Jobs that left memory (min-job-age) are read back, one
 * row each.
 */
static void
list_all_jobs(const struct token_entry *who, int64_t limit,
    struct job_list *l)
{
	int64_t id, top, k = 0, step = limit > 0 ? -1 : 1;
	size_t i;

	pthread_rwlock_rdlock(&state.lock);
	top = state.next_job_id - 1;
	if (limit > 0 && (l->rev = calloc((size_t)(limit < top ? limit : top) + 1,
			      sizeof(*l->rev))) == NULL) {
		pthread_rwlock_unlock(&state.lock);
		l->failed = 1;
		return;
	}
	for (id = limit > 0 ? top : 1; id >= 1 && id <= top && !l->failed;
	     id += step) {
		int stored;
		struct job *j;
		if (limit > 0 && (int64_t)l->nrev >= limit)
			break;
		j = state_job_any(id, &stored);
		if (j != NULL && job_visible_to(j, who))
			job_list_add(l, job_to_json(j, 0), limit > 0);
		if (stored)
			state_job_stored_free(j);
		list_breathe(++k);
	}
	pthread_rwlock_unlock(&state.lock);
	for (i = l->nrev; i > 0; i--) {
		const char *t = l->rev[i - 1];
		if (!l->failed &&
		    ((l->n++ > 0 && gp_buf_append(&l->buf, ",", 1) != 0) ||
			gp_buf_append(&l->buf, t, strlen(t)) != 0))
			l->failed = 1;
		free(l->rev[i - 1]);
	}
	free(l->rev);
}

/* The queued and running jobs who may see, in id order. */
static void
list_active_jobs(const struct token_entry *who, struct job_list *l)
{
	size_t n, k = 0, i;
	int64_t c, *ids;
	const struct node *nd;
	const struct job *qj;
	int q;

	pthread_rwlock_rdlock(&state.lock);
	n = (size_t)state_queue_places();
	c = 0;
	while ((nd = state_node_next(&c)) != NULL)
		n += (size_t)nd->njobs;
	if ((ids = malloc((n + 1) * sizeof(*ids))) == NULL) {
		pthread_rwlock_unlock(&state.lock);
		l->failed = 1;
		return;
	}
	c = 0;
	while ((nd = state_node_next(&c)) != NULL)
		for (q = 0; q < nd->njobs; q++)
			ids[k++] = nd->jobs[q];
	c = 0;
	while ((qj = state_queued_next(&c)) != NULL)
		ids[k++] = qj->id;
	/* In id order, as the API promises; a gang once. */
	qsort(ids, k, sizeof(*ids), cmp_id);
	for (i = 0; i < k && !l->failed; i++) {
		struct job *j;
		if (i > 0 && ids[i] == ids[i - 1])
			continue;
		/* (Between slices a job may have ended: it is listed as it is
		 * now, or not at all if it left memory.) */
		j = state_job(ids[i]);
		if (j != NULL && job_visible_to(j, who))
			job_list_add(l, job_to_json(j, 0), 0);
		list_breathe((int64_t)i + 1);
	}
	pthread_rwlock_unlock(&state.lock);
	free(ids);
}

static enum MHD_Result
handle_list_jobs(struct MHD_Connection *conn, struct request *req)
{
	const char *all = api_query(conn, "all");
	int want_all = all != NULL && strcmp(all, "0") != 0;
	struct job_list l;
	int64_t limit;

	if (api_query_int(conn, "limit", 0, 0, INT64_MAX / 2, &limit) != 0)
		return reply_error(conn, 400, "limit: a non-negative integer");
	memset(&l, 0, sizeof(l));
	if (gp_buf_append(&l.buf, "{\"jobs\":[", 9) != 0)
		l.failed = 1;
	else if (want_all)
		list_all_jobs(&req->auth_copy, limit, &l);
	else
		list_active_jobs(&req->auth_copy, &l);
	if (l.failed || gp_buf_append(&l.buf, "]}", 2) != 0) {
		gp_buf_free(&l.buf);
		return reply_error(conn, 503, "out of memory");
	}
	return reply_raw(conn, 200, l.buf.data, l.buf.len, "application/json",
	    NULL);
}

/*
 * The job the caller names and may see, or NULL (answer sent). A job
 * that left memory is read back from state.db: *stored is set, and the
 * caller frees it (state_job_stored_free). Call with state.lock held.
 */
static struct job *
visible_job(struct MHD_Connection *conn, struct request *req, int64_t id,
    enum MHD_Result *rc, int *stored)
{
	struct job *job = state_job_any(id, stored);

	if (job == NULL || !job_visible_to(job, req->auth)) {
		if (*stored)
			state_job_stored_free(job);
		*stored = 0;
		*rc = reply_error(conn, 404, "no job %lld", (long long)id);
		return NULL;
	}
	return job;
}

static enum MHD_Result
handle_show_job(struct MHD_Connection *conn, struct request *req, int64_t id)
{
	enum MHD_Result rc;
	struct job *job;
	json_t *o;
	int stored;

	pthread_rwlock_rdlock(&state.lock);
	job = visible_job(conn, req, id, &rc, &stored);
	if (job == NULL) {
		pthread_rwlock_unlock(&state.lock);
		return rc;
	}
	o = job_to_json(job, 1);
	pthread_rwlock_unlock(&state.lock);
	if (stored)
		state_job_stored_free(job);
	return reply_json(conn, 200, o);
}

static enum MHD_Result
handle_cancel(struct MHD_Connection *conn, struct request *req, int64_t id)
{
	struct op *op = op_new(OP_CANCEL, &req->auth_copy);

	if (op == NULL)
		return reply_error(conn, 503, "out of memory");
	op->job_id = id;
	return api_queue_op(conn, req, op);
}

/* POST /v1/jobs/{id}/checkpoint: ask the job's agent to upload now. */
static enum MHD_Result
handle_checkpoint_now(struct MHD_Connection *conn, struct request *req,
    int64_t id)
{
	struct job *job;
	struct node *node;
	int attempt;

	pthread_rwlock_rdlock(&state.lock);
	job = state_job(id);
	if (job == NULL || !job_visible_to(job, req->auth)) {
		pthread_rwlock_unlock(&state.lock);
		return reply_error(conn, 404, "no job %lld", (long long)id);
	}
	node = state_node(job->node_id);
	if (job->state != JOB_RUNNING || node == NULL) {
		pthread_rwlock_unlock(&state.lock);
		return reply_error(conn, 409, "job %lld is %s, not running",
		    (long long)id, job_state_name(job->state));
	}
	attempt = job->attempts;
	pthread_mutex_lock(&notify_lock);
	json_array_append_new(node->outbox_checkpoint,
	    json_pack("{s:I,s:i}", "job_id", (json_int_t)id, "attempt",
		attempt));
	notify_wake_node(node);
	pthread_mutex_unlock(&notify_lock);
	pthread_rwlock_unlock(&state.lock);
	return reply_json(conn, 202, json_pack("{s:I,s:i,s:s}", "job_id",
	    (json_int_t)id, "attempt", attempt, "status", "requested"));
}

/* POST /v1/agent/leave {"node_id": N}: the owner takes the node out. */
/* Sets the long-poll deadline once; returns the ms left (0: answer now). */
int64_t
api_wait_left(struct MHD_Connection *conn, struct request *req,
    int64_t *bad)
{
	int64_t wait_ms, now = gp_mono_ms();

	*bad = 0;
	if (req->deadline_mono == 0) {
		if (api_query_int(conn, "wait_ms", 0, 0, API_WAIT_MS_MAX,
		    &wait_ms) != 0) {
			*bad = 1;
			return 0;
		}
		req->deadline_mono = now + wait_ms;
	}
	if (coord_stopping)
		return 0;
	return req->deadline_mono > now ? req->deadline_mono - now : 0;
}

static enum MHD_Result
handle_log(struct MHD_Connection *conn, struct request *req, int64_t id)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	struct job *job;
	int64_t offset, left, bad, size, part;
	char hdr[32], *data = NULL;
	const char *st;
	size_t len = 0;
	int done, stored;

	if (api_query_int(conn, "offset", 0, 0, INT64_MAX / 2, &offset) != 0)
		return reply_error(conn, 400,
		    "offset: a non-negative integer");
	if (api_query_int(conn, "part", 0, 0, GP_NODES_MAX - 1, &part) != 0)
		return reply_error(conn, 400, "part: 0 to %d",
		    GP_NODES_MAX - 1);
	left = api_wait_left(conn, req, &bad);
	if (bad)
		return reply_error(conn, 400, "wait_ms: 0 to %d",
		    API_WAIT_MS_MAX);
	pthread_rwlock_rdlock(&state.lock);
	job = visible_job(conn, req, id, &rc, &stored);
	if (job == NULL) {
		pthread_rwlock_unlock(&state.lock);
		return rc;
	}
	if (part >= job->nparts) {
		int nparts = job->nparts;
		pthread_rwlock_unlock(&state.lock);
		if (stored)
			state_job_stored_free(job);
		return reply_error(conn, 404, "job %lld has %d part%s",
		    (long long)id, nparts, nparts == 1 ? "" : "s");
	}
	pthread_mutex_lock(&notify_lock);
	size = part == 0 ? job->log_size : job->parts[part].log_size;
	if (size <= offset && !job_finished(job) && !stored && left > 0) {
		notify_wait(conn, req, WAIT_LOG, id, left);
		if (req->suspended) {
			pthread_mutex_unlock(&notify_lock);
			pthread_rwlock_unlock(&state.lock);
			return MHD_YES;
		}
	}
	pthread_mutex_unlock(&notify_lock);
	st = job_state_name(job->state);
	done = job_finished(job);
	pthread_rwlock_unlock(&state.lock);
	if (stored)
		state_job_stored_free(job);
	if (offset < size &&
	    joblog_read(id, (int)part, offset,
		(size_t)(size - offset) < (1u << 20)
		    ? (size_t)(size - offset)
		    : (1u << 20),
		&data, &len) != 0)
		return reply_error(conn, 500, "cannot read the log");
	if (data == NULL && (data = malloc(1)) == NULL)
		return MHD_NO;
	if (reply_raw(conn, 200, data, len, "application/octet-stream",
		&resp) != MHD_YES)
		return MHD_NO;
	snprintf(hdr, sizeof(hdr), "%lld", (long long)(offset + (int64_t)len));
	MHD_add_response_header(resp, "X-Gpupool-Offset", hdr);
	MHD_add_response_header(resp, "X-Gpupool-State", st);
	if (done && offset + (int64_t)len >= size)
		MHD_add_response_header(resp, "X-Gpupool-Done", "1");
	rc = MHD_queue_response(conn, 200, resp);
	MHD_destroy_response(resp);
	return rc;
}

static enum MHD_Result
handle_wait(struct MHD_Connection *conn, struct request *req, int64_t id)
{
	enum MHD_Result rc;
	struct job *job;
	int64_t left, bad;
	json_t *o;
	int stored;

	left = api_wait_left(conn, req, &bad);
	if (bad)
		return reply_error(conn, 400, "wait_ms: 0 to %d",
		    API_WAIT_MS_MAX);
	pthread_rwlock_rdlock(&state.lock);
	job = visible_job(conn, req, id, &rc, &stored);
	if (job == NULL) {
		pthread_rwlock_unlock(&state.lock);
		return rc;
	}
	pthread_mutex_lock(&notify_lock);
	if (!job_finished(job) && !stored && left > 0) {
		notify_wait(conn, req, WAIT_JOB, id, left);
		if (req->suspended) {
			pthread_mutex_unlock(&notify_lock);
			pthread_rwlock_unlock(&state.lock);
			return MHD_YES;
		}
	}
	pthread_mutex_unlock(&notify_lock);
	o = job_to_json(job, 0);
	pthread_rwlock_unlock(&state.lock);
	if (stored)
		state_job_stored_free(job);
	return reply_json(conn, 200, o);
}

/* GET /v1/queue: the queued jobs the caller may see, in order. */
static enum MHD_Result
handle_queue(struct MHD_Connection *conn, struct request *req)
{
	struct gp_buf out = {0};
	int rc;

	pthread_rwlock_rdlock(&state.lock);
	rc = live_queue_text(req->auth, &out);
	pthread_rwlock_unlock(&state.lock);
	if (rc != 0) {
		gp_buf_free(&out);
		return reply_error(conn, 503, "out of memory");
	}
	return reply_raw(conn, 200, out.data, out.len, "application/json",
	    NULL);
}

static enum MHD_Result
handle_nodes(struct MHD_Connection *conn)
{
	struct job_list l;
	const struct node *nd;
	int64_t id = 0, listed = 0;

	/* As the job list: text one node at a time (10,000 nodes). */
	memset(&l, 0, sizeof(l));
	if (gp_buf_append(&l.buf, "{\"nodes\":[", 10) != 0)
		l.failed = 1;
	pthread_rwlock_rdlock(&state.lock);
	while (!l.failed && (nd = state_node_next(&id)) != NULL) {
		job_list_add(&l, node_to_json(nd), 0);
		list_breathe(++listed);
	}
	pthread_rwlock_unlock(&state.lock);
	if (l.failed || gp_buf_append(&l.buf, "]}", 2) != 0) {
		gp_buf_free(&l.buf);
		return reply_error(conn, 503, "out of memory");
	}
	return reply_raw(conn, 200, l.buf.data, l.buf.len, "application/json",
	    NULL);
}

/* GET /metrics: Prometheus text format, for admin and metrics tokens. */
static enum MHD_Result
handle_metrics(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	struct gp_buf out = {0};

	(void)req;
	(void)url;
	(void)method;
	if (metrics_render(&out) != 0) {
		gp_buf_free(&out);
		return reply_error(conn, 503, "out of memory");
	}
	if (out.data == NULL)
		return reply_error(conn, 503, "out of memory");
	return reply_raw(conn, 200, out.data, out.len, GP_PROM_CONTENT_TYPE,
	    NULL);
}

/* ---- routing ---- */

static int
authenticate(struct MHD_Connection *conn, struct request *req)
{
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    "Authorization");
	char hash[GP_TOKEN_HASH_HEX], bearer[GP_TOKEN_LEN + 1];
	char pin[GP_TOKEN_PIN_HEX + 1];
	const struct token_entry *t;

	/* The scheme is case-insensitive (RFC 9110 11.1). */
	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
		return 0;
	h += 7;
	/* A token sent with its CA hash (tls_auto.c): the bearer is before. */
	if (strstr(h, GP_TOKEN_PIN_SEP) != NULL) {
		if (gp_token_split_pin(h, bearer, sizeof(bearer), pin,
		    sizeof(pin)) != 0)
			return 0;
		h = bearer;
	}
	if (!gp_token_well_formed(h))
		return 0;
	gp_token_hash(h, hash);
	pthread_rwlock_rdlock(&state.lock);
	t = state_token_lookup(hash);
	if (t != NULL)
		req->auth_copy = *t;
	pthread_rwlock_unlock(&state.lock);
	if (t == NULL)
		return 0;
	req->auth = &req->auth_copy;
	return 1;
}

/*
 * Splits "/v1/a/b" into at most max parts; returns the count or GP_EINVAL
 * (too many parts, an empty or overlong one).
 */
int
api_split_path(const char *url, char parts[][32], int max)
{
	int n = 0;
	size_t len;
	const char *p = url, *slash;

	while (*p == '/')
		p++;
	while (*p != '\0') {
		slash = strchr(p, '/');
		len = slash != NULL ? (size_t)(slash - p) : strlen(p);
		if (n == max || len == 0 || len >= 32)
			return GP_EINVAL;
		memcpy(parts[n], p, len);
		parts[n][len] = '\0';
		n++;
		p += len;
		if (*p == '/') {
			p++;
			if (*p == '\0')
				return GP_EINVAL; /* "/v1/jobs/": empty last part */
		}
	}
	return n;
}

int
api_path_id(const char *text, int64_t *id)
{
	return gp_parse_int(text, 1, INT64_MAX / 2, id) == 0;
}

/*
 * The answer for a URL no route has: what the hand-written chain gave
 * before the table, kept byte for byte.
 */
enum MHD_Result
api_no_route(struct MHD_Connection *conn, const char *url,
    const char *method)
{
	char p[8][32];
	int n = api_split_path(url, p, 8);

	if (n < 2 || strcmp(p[0], "v1") != 0)
		return reply_error(conn, 404, "no such endpoint: %.100s", url);
	if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
		return reply_error(conn, 405, "method %.16s not allowed",
		    method);
	return reply_error(conn, 404, "no such endpoint: %s %.100s", method,
	    url);
}

/*
 * The core routes' adapters: the ids in the path (p[]), checked as the
 * chain checked them, then the handler.
 */
static enum MHD_Result
route_whoami(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)url;
	(void)method;
	return handle_whoami(conn, req);
}

static enum MHD_Result
route_tokens(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)url;
	return strcmp(method, "POST") == 0 ? handle_token_create(conn, req)
					   : handle_token_list(conn);
}

static enum MHD_Result
route_token_revoke(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	API_PATH_PARTS(url, p, n);
	int64_t id;

	if (n != 4)
		return api_no_route(conn, url, method);
	if (!api_path_id(p[2], &id))
		return reply_error(conn, 404, "no token '%s'", p[2]);
	return handle_token_revoke(conn, req, id);
}

static enum MHD_Result
route_nodes(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)req;
	(void)url;
	(void)method;
	return handle_nodes(conn);
}

static enum MHD_Result
route_queue(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)url;
	(void)method;
	return handle_queue(conn, req);
}

static enum MHD_Result
route_jobs(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)url;
	return strcmp(method, "POST") == 0 ? handle_submit(conn, req)
					   : handle_list_jobs(conn, req);
}

static enum MHD_Result
route_submit_array(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)url;
	(void)method;
	return handle_submit_array(conn, req);
}

/* /v1/jobs/{id}[/what]: the job's id checked first, as before. */
static enum MHD_Result
route_job(struct MHD_Connection *conn, struct request *req, const char *url,
    const char *method)
{
	API_PATH_PARTS(url, p, n);
	int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	int64_t id;

	if (n < 3)
		return api_no_route(conn, url, method);
	if (!api_path_id(p[2], &id))
		return reply_error(conn, 404, "no job '%s'", p[2]);
	if (n == 3 && get)
		return handle_show_job(conn, req, id);
	if (n == 4 && strcmp(p[3], "cancel") == 0 && post)
		return handle_cancel(conn, req, id);
	if (n == 4 && strcmp(p[3], "log") == 0 && get)
		return handle_log(conn, req, id);
	if (n == 4 && strcmp(p[3], "wait") == 0 && get)
		return handle_wait(conn, req, id);
	if (n == 4 && strcmp(p[3], "checkpoint") == 0 && post)
		return handle_checkpoint_now(conn, req, id);
	return api_no_route(conn, url, method);
}

#define ADMIN_ONLY API_ROLE(GP_ROLE_ADMIN)
#define SUBMITTERS (API_ROLE(GP_ROLE_ADMIN) | API_ROLE(GP_ROLE_USER))
#define METRICS_READERS (API_ROLE(GP_ROLE_ADMIN) | API_ROLE(GP_ROLE_METRICS))


const struct api_route metrics_routes[] = {
    {"/metrics", API_GET, METRICS_READERS,
        "/metrics needs an admin or metrics token", 0, 0, handle_metrics,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};

const struct api_route user_routes[] = {
    {"/v1/whoami", API_GET, 0, NULL, 0, 0, route_whoami, NULL},
    {"/v1/tokens", API_POST, ADMIN_ONLY, "only an admin may create tokens",
        0, 0, route_tokens, NULL},
    {"/v1/tokens", API_GET, ADMIN_ONLY, "only an admin may list tokens", 0,
        0, route_tokens, NULL},
    {"/v1/tokens/*/revoke", API_POST, ADMIN_ONLY,
        "only an admin may revoke tokens", 0, 0, route_token_revoke, NULL},
    {"/v1/nodes", API_GET, 0, NULL, 0, 0, route_nodes, NULL},
    {"/v1/queue", API_GET, 0, NULL, 0, 0, route_queue, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};

const struct api_route jobs_routes[] = {
    {"/v1/jobs", API_POST, SUBMITTERS, "a provider token cannot submit jobs",
        0, 0, route_jobs, NULL},
    {"/v1/jobs", API_GET, 0, NULL, 0, 0, route_jobs, NULL},
    {"/v1/jobs/array", API_POST, SUBMITTERS,
        "a provider token cannot submit jobs", 0, 0, route_submit_array,
        NULL},
    {"/v1/jobs/*", API_GET, 0, NULL, 0, 0, route_job, NULL},
    {"/v1/jobs/*/cancel", API_POST, 0, NULL, 0, 0, route_job, NULL},
    {"/v1/jobs/*/log", API_GET, 0, NULL, 0, 0, route_job, NULL},
    {"/v1/jobs/*/wait", API_GET, 0, NULL, 0, 0, route_job, NULL},
    {"/v1/jobs/*/checkpoint", API_POST, 0, NULL, 0, 0, route_job, NULL},
    /* The rest: "no job 'x'" for a bad id, else no such endpoint. */
    {"/v1/jobs/*/**", API_GET | API_POST, 0, NULL, 0, 0, route_job, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};

/* In the order the chain asked them before the table: the first wins. */
const struct api_route *const api_tables[] = {web_routes, metrics_routes,
    image_routes, ckpt_routes, data_routes, acct_routes, user_routes,
    jobs_routes, agent_routes, NULL};

/* 405 with the methods the path takes in Allow (RFC 9110 15.5.6). */
static enum MHD_Result
reply_not_allowed(struct MHD_Connection *conn, const char *method,
    unsigned allow)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	char allowed[64], *text;
	json_t *o;

	o = json_object();
	json_object_set_new(o, "error", json_sprintf("method %.16s not allowed",
	    method));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text == NULL)
		return MHD_NO;
	if (reply_raw(conn, 405, text, strlen(text), "application/json",
	    &resp) != MHD_YES)
		return MHD_NO;
	api_allow_text(allow, allowed, sizeof(allowed));
	MHD_add_response_header(resp, "Allow", allowed);
	rc = MHD_queue_response(conn, 405, resp);
	MHD_destroy_response(resp);
	return rc;
}

enum MHD_Result
api_handle(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	struct request *req = *con_cls;
	const struct api_route *route = NULL;
	unsigned allow = 0;
	struct op *op;
	enum MHD_Result rc;
	int found;

	(void)cls;
	(void)version;
	if (req == NULL) {
		req = calloc(1, sizeof(*req));
		if (req == NULL)
			return MHD_NO;
		found = api_route_find(api_tables, url, method, &route, &allow);
		req->route = found == 200 ? route : NULL;
		req->body_limit = api_route_body_limit(req->route);
		*con_cls = req;
		/* An upload: checked now, its body streamed to its owner. */
		if (req->route != NULL && req->route->stream != NULL) {
			authenticate(conn, req);
			req->route->stream->begin(req, url);
		}
		return MHD_YES;
	}
	if (req->route != NULL && req->route->stream != NULL) {
		if (*upload_data_size > 0) {
			req->route->stream->data(req, upload_data,
			    *upload_data_size);
			*upload_data_size = 0;
			return MHD_YES;
		}
		return req->route->stream->end(conn, req);
	}
	if (*upload_data_size > 0) {
		if (!req->too_big &&
		    req->body.len + *upload_data_size > req->body_limit)
			req->too_big = 1;
		if (!req->too_big &&
		    gp_buf_append(&req->body, upload_data, *upload_data_size) !=
			0)
			req->too_big = 1;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (req->too_big)
		return reply_error(conn, 413, "body larger than %zu bytes",
		    req->body_limit);
	if (req->op != NULL) {
		/* Resumed: the state thread has answered. */
		op = req->op;
		req->op = NULL;
		rc = reply_json(conn, op->status ? op->status : 500,
		    json_incref(op->result));
		op_free(op);
		return rc;
	}
	route = req->route;
	/* The dashboard's files are code, not data: no token needed. */
	if (route != NULL && (route->flags & API_PUBLIC) != 0)
		return route->handle(conn, req, url, method);
	if (req->auth == NULL && !authenticate(conn, req)) {
		gp_debug("unauthenticated request url=%.100s", url);
		metrics_unauthorized();
		return reply_error(conn, 401,
		    "missing or unknown token (Authorization: Bearer ...)");
	}
	/* A metrics token reads /metrics and says who it is, nothing more. */
	if (req->auth->role == GP_ROLE_METRICS &&
	    strcmp(url, "/metrics") != 0 && strcmp(url, "/v1/whoami") != 0)
		return reply_error(conn, 403,
		    "a metrics token may only read /metrics");
	if (route == NULL) {
		if (api_route_find(api_tables, url, method, &route, &allow) ==
		    405)
			return reply_not_allowed(conn, method, allow);
		return api_no_route(conn, url, method);
	}
	if (!api_route_permits(route, req->auth->role))
		return reply_error(conn, 403, "%s", route->refusal);
	return route->handle(conn, req, url, method);
}

void
api_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct request *req = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (req == NULL)
		return;
	pthread_rwlock_rdlock(&state.lock);
	notify_forget(req);
	pthread_rwlock_unlock(&state.lock);
	if (req->op != NULL)
		op_abandon(req->op);
	if (req->route != NULL && req->route->stream != NULL)
		req->route->stream->release(req->stream);
	gp_buf_free(&req->body);
	free(req);
	*con_cls = NULL;
}
