/*
 * api_jobs.c: the users' side of the HTTP API (docs/api.md): submit (one
 * job or an array), list, show, cancel, checkpoint now, a job's log and
 * waiting for its end, the queue and the nodes; their routes
 * (jobs_routes). Moved out of api.c unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "datasets.h"
#include "image_store.h"
#include "joblog.h"
#include "notify.h"
#include "state.h"
#include "gp.h"
#include "route.h"

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
 * per task index, made together (apply_submit_array), all or none. The
 * spec's idempotency_key, when given, is the array's: a repeat is
 * answered with the first one's ids.
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
			job_list_add(l, job_to_json(j, 0, who), limit > 0);
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
			job_list_add(l, job_to_json(j, 0, who), 0);
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
	o = job_to_json(job, 1, req->auth);
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

static enum MHD_Result
handle_log(struct MHD_Connection *conn, struct request *req, int64_t id)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	struct job *job;
	int64_t offset, left, bad, size, part, epoch;
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
	pthread_mutex_lock(&joblog_lock); /* a first write sets it */
	epoch = job->log_epoch;
	pthread_mutex_unlock(&joblog_lock);
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
	    joblog_read(id, epoch, (int)part, offset,
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
	o = job_to_json(job, 0, req->auth);
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

/* ---- routes ---- */

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
		return api_no_route(conn, url, method, 0);
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
	return api_no_route(conn, url, method, 0);
}

#define SUBMITTERS (API_ROLE(GP_ROLE_ADMIN) | API_ROLE(GP_ROLE_USER))

const struct api_route jobs_routes[] = {
    {"/v1/nodes", API_GET, 0, NULL, 0, 0, route_nodes, NULL},
    {"/v1/queue", API_GET, 0, NULL, 0, 0, route_queue, NULL},
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
