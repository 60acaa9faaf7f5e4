/*
 * api_agent.c: the agents' side of the HTTP API (docs/api.md): register,
 * heartbeat, poll, leave, started/finished reports (one or a batch), a
 * job's log; their routes (agent_routes), each a provider's or an
 * admin's. Moved out of api.c unchanged.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_int.h"
#include "coord_metrics.h"
#include "joblog.h"
#include "notify.h"
#include "relay.h"
#include "state.h"
#include "gp.h"
#include "log.h"
#include "route.h"

#define AGENT_LOG_BODY_MAX (1 << 20)
#define AGENT_REPORTS_BODY_MAX (1 << 20) /* API_REPORTS_MAX reports */
/* Bytes one job's network may report: 2^60, far past any real count. */
#define GP_NET_BYTES_MAX (1LL << 60)

/* The caller's node, or NULL (answer sent). Call with the read lock. */
static struct node *
own_node_any(struct MHD_Connection *conn, struct request *req, int64_t id,
    int need_up, enum MHD_Result *rc)
{
	struct node *node = state_node(id);

	if (node == NULL) {
		*rc = reply_error(conn, 404, "unknown node %lld; register",
		    (long long)id);
		return NULL;
	}
	if (node->owner_token != req->auth->id &&
	    req->auth->role != GP_ROLE_ADMIN) {
		*rc = reply_error(conn, 403, "node %lld is not yours",
		    (long long)id);
		return NULL;
	}
	if (need_up && !node->up) {
		*rc = reply_error(conn, 404,
		    "node %lld is not registered (lease expired or coordinator "
		    "restarted); register again",
		    (long long)id);
		return NULL;
	}
	return node;
}

/* Heartbeats and polls: the node must be registered and alive. */
static struct node *
own_node(struct MHD_Connection *conn, struct request *req, int64_t id,
    enum MHD_Result *rc)
{
	return own_node_any(conn, req, id, 1, rc);
}

/* The caller's IP address, as text ("" when unknown). */
static void
peer_address(struct MHD_Connection *conn, char *out, size_t len)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
	    MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

	out[0] = '\0';
	if (sa == NULL)
		return;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET,
		    &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
		    out, (socklen_t)len);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
		    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
		    out, (socklen_t)len);
}

static enum MHD_Result
handle_register(struct MHD_Connection *conn, struct request *req)
{
	enum MHD_Result rc;
	struct op *op;
	json_t *body;

	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	op = op_new(OP_REGISTER, &req->auth_copy);
	if (op == NULL) {
		json_decref(body);
		return reply_error(conn, 503, "out of memory");
	}
	op->body = body;
	peer_address(conn, op->peer, sizeof(op->peer));
	return api_queue_op(conn, req, op);
}

static int
valid_attempt_list(json_t *list)
{
	json_t *r;
	size_t i;

	if (!json_is_array(list) || json_array_size(list) > 4096)
		return 0;
	json_array_foreach(list, i, r)
	{
		if (!json_is_integer(json_object_get(r, "job_id")) ||
		    !json_is_integer(json_object_get(r, "attempt")))
			return 0;
	}
	return 1;
}

static const char *const reasons[] = {"exited", "killed", "cancelled",
    "timeout", "start_failed", "reclaimed", "owner_present",
    "window_closed", "provider_left", "agent_stopped", "refused",
    "restore_failed", "image_refused", "image_unavailable", "preempted",
    "gang_stopped", NULL};

/* Absent, or a count of bytes a job's network carried. */
static int
byte_count(const json_t *v)
{
	return v == NULL || (json_is_integer(v) &&
	    json_integer_value(v) >= 0 &&
	    json_integer_value(v) <= GP_NET_BYTES_MAX);
}

/*
 * What every agent body starts with: a JSON object of only these fields
 * with an integer node_id. 0, or GP_EINVAL with err saying what is wrong.
 */
static int
check_node_body(json_t *body, const char *const *fields, char *err,
    size_t errlen)
{
	const char *bad;

	if (!json_is_object(body)) {
		snprintf(err, errlen, "body must be a JSON object");
		return GP_EINVAL;
	}
	if (!api_only_fields(body, fields, &bad)) {
		snprintf(err, errlen, "unknown field '%.64s'", bad);
		return GP_EINVAL;
	}
	if (!json_is_integer(json_object_get(body, "node_id"))) {
		snprintf(err, errlen, "node_id: missing or not an integer");
		return GP_EINVAL;
	}
	return 0;
}

int
api_check_agent_body(const char *kind, json_t *body, char *err,
    size_t errlen)
{
	static const char *const heartbeat_fields[] = {"node_id", "running",
	    "gpus", "offer", "gpushare", "network", NULL};
	static const char *const started_fields[] = {"node_id", "pid",
	    "restored_version", NULL};
	static const char *const finished_fields[] = {"node_id", "exit_code",
	    "signal", "reason", "message", "offer", "net_sent_bytes",
	    "net_received_bytes", NULL};
	const char *const *fields;
	const char *reason;
	json_t *v;
	int i, ok;

	if (strcmp(kind, "heartbeat") == 0)
		fields = heartbeat_fields;
	else if (strcmp(kind, "started") == 0)
		fields = started_fields;
	else if (strcmp(kind, "finished") == 0)
		fields = finished_fields;
	else
		return GP_EINVAL;
	if (check_node_body(body, fields, err, errlen) != 0)
		return GP_EINVAL;
	if (fields == heartbeat_fields) {
		v = json_object_get(body, "running");
		if ((v != NULL && !valid_attempt_list(v)) ||
		    (json_object_get(body, "gpus") != NULL &&
			!json_is_array(json_object_get(body, "gpus")))) {
			snprintf(err, errlen, "running: [{job_id, attempt}] "
					      "(at most 4096), gpus: [...]");
			return GP_EINVAL;
		}
		v = json_object_get(body, "network");
		if (v != NULL && (!json_is_array(v) ||
		    json_array_size(v) > 4096)) {
			snprintf(err, errlen, "network: [{job_id, attempt, "
					      "sent_bytes, received_bytes}] "
					      "(at most 4096)");
			return GP_EINVAL;
		}
		return 0;
	}
	v = json_object_get(body, "offer");
	if (v != NULL && !json_is_object(v)) {
		snprintf(err, errlen, "offer: must be an object");
		return GP_EINVAL;
	}
	if (fields == started_fields) {
		v = json_object_get(body, "pid");
		if (v != NULL && !json_is_integer(v)) {
			snprintf(err, errlen, "pid: an integer");
			return GP_EINVAL;
		}
		v = json_object_get(body, "restored_version");
		if (v != NULL && (!json_is_integer(v) ||
		    json_integer_value(v) < 0)) {
			snprintf(err, errlen,
			    "restored_version: a non-negative integer");
			return GP_EINVAL;
		}
		return 0;
	}
	reason = json_string_value(json_object_get(body, "reason"));
	ok = json_object_get(body, "reason") == NULL;
	for (i = 0; reason != NULL && reasons[i] != NULL; i++)
		if (strcmp(reason, reasons[i]) == 0)
			ok = 1;
	if (!ok) {
		snprintf(err, errlen, "reason: exited, killed, cancelled, "
				      "timeout, start_failed, image_refused "
				      "or a reclaim "
				      "reason (reclaimed, owner_present, "
				      "window_closed, provider_left, "
				      "agent_stopped, refused, "
				      "restore_failed, image_unavailable, "
				      "preempted, gang_stopped)");
		return GP_EINVAL;
	}
	if ((json_object_get(body, "message") != NULL &&
		!json_is_string(json_object_get(body, "message"))) ||
	    (json_object_get(body, "exit_code") != NULL &&
		!json_is_integer(json_object_get(body, "exit_code"))) ||
	    (json_object_get(body, "signal") != NULL &&
		!json_is_integer(json_object_get(body, "signal")))) {
		snprintf(err, errlen,
		    "exit_code and signal are integers, message a string");
		return GP_EINVAL;
	}
	if (!byte_count(json_object_get(body, "net_sent_bytes")) ||
	    !byte_count(json_object_get(body, "net_received_bytes"))) {
		snprintf(err, errlen, "net_sent_bytes and net_received_bytes: "
				      "non-negative integers");
		return GP_EINVAL;
	}
	return 0;
}

int
api_check_reports(json_t *body, char *err, size_t errlen)
{
	static const char *const fields[] = {"node_id", "reports", NULL};
	json_t *list, *r, *v, *one;
	const char *event, *key;
	char why[256];
	size_t i;
	int rc;

	if (check_node_body(body, fields, err, errlen) != 0)
		return GP_EINVAL;
	list = json_object_get(body, "reports");
	if (!json_is_array(list) || json_array_size(list) < 1 ||
	    json_array_size(list) > API_REPORTS_MAX) {
		snprintf(err, errlen, "reports: an array of 1 to %d reports",
		    API_REPORTS_MAX);
		return GP_EINVAL;
	}
	json_array_foreach(list, i, r)
	{
		v = json_object_get(r, "event");
		event = json_string_value(v);
		if (!json_is_object(r) || event == NULL ||
		    (strcmp(event, "started") != 0 &&
			strcmp(event, "finished") != 0)) {
			snprintf(err, errlen, "reports[%zu]: an object with "
					      "event \"started\" or "
					      "\"finished\"",
			    i);
			return GP_EINVAL;
		}
		v = json_object_get(r, "job_id");
		if (!json_is_integer(v) || json_integer_value(v) < 1) {
			snprintf(err, errlen, "reports[%zu]: job_id: a job id",
			    i);
			return GP_EINVAL;
		}
		v = json_object_get(r, "attempt");
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 1000000) {
			snprintf(err, errlen,
			    "reports[%zu]: attempt: 1 to 1000000", i);
			return GP_EINVAL;
		}
		if (json_object_get(r, "node_id") != NULL) {
			snprintf(err, errlen, "reports[%zu]: node_id belongs "
					      "to the batch, not a report",
			    i);
			return GP_EINVAL;
		}
		/* The rest is what the single report's body carries. */
		if ((one = json_object()) == NULL) {
			snprintf(err, errlen, "out of memory");
			return GP_ENOMEM;
		}
		json_object_foreach(r, key, v)
		{
			if (strcmp(key, "job_id") != 0 &&
			    strcmp(key, "attempt") != 0 &&
			    strcmp(key, "event") != 0)
				json_object_set(one, key, v);
		}
		json_object_set(one, "node_id",
		    json_object_get(body, "node_id"));
		rc = api_check_agent_body(event, one, why, sizeof(why));
		json_decref(one);
		if (rc != 0) {
			snprintf(err, errlen, "reports[%zu]: %s", i, why);
			return GP_EINVAL;
		}
	}
	return 0;
}

/* An optional sensor reading of a heartbeat's GPU entry; -1: none. */
static int
sensor(json_t *gpu, const char *key, int64_t min, int64_t max)
{
	json_t *v = json_object_get(gpu, key);

	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return -1;
	return (int)json_integer_value(v);
}

/*
 * What libgpupool-cuda.so measured in each fractional job on node (the
 * heartbeat's "gpushare"), kept on the job's part there. Under the read
 * lock: the part's fields are atomic. Entries for attempts that are not
 * the job's current one are ignored.
 */
static void
heartbeat_gpushare(const struct node *node, json_t *list)
{
	json_t *e;
	size_t i;
	int k;

	if (!json_is_array(list))
		return;
	json_array_foreach(list, i, e)
	{
		struct job *job;
		int64_t used, eff, util;

		if (i >= 4096)
			break;
		job = state_job(json_integer_value(json_object_get(e,
		    "job_id")));
		used = json_integer_value(json_object_get(e, "mem_used_mib"));
		eff = json_integer_value(json_object_get(e, "effective_milli"));
		util = json_integer_value(json_object_get(e, "util"));
		if (job == NULL || job->state != JOB_RUNNING ||
		    job->attempts != json_integer_value(json_object_get(e,
		    "attempt")) || used < 0 || used > GP_MIB_MAX ||
		    eff < 1 || eff > 1000 || util < 0 || util > 100)
			continue;
		for (k = 0; k < job->nparts; k++)
			if (job->parts[k].node_id == node->id) {
				atomic_store(&job->parts[k].gpu_mem_used_mib,
				    used);
				atomic_store(&job->parts[k].gpu_util,
				    (int32_t)util);
				atomic_store(&job->parts[k].gpu_effective_milli,
				    (int32_t)eff);
			}
	}
}

/*
 * The bytes each job on node sent and received over its network so far
 * (the heartbeat's "network"), kept on the job's part there. Under the
 * read lock: the part's fields are atomic. Entries for attempts that are
 * not the job's current one, or that do not add up, are ignored.
 */
static void
heartbeat_network(const struct node *node, json_t *list)
{
	json_t *e, *sent, *received;
	size_t i;
	int k;

	json_array_foreach(list, i, e)
	{
		struct job *job;

		job = state_job(json_integer_value(json_object_get(e,
		    "job_id")));
		sent = json_object_get(e, "sent_bytes");
		received = json_object_get(e, "received_bytes");
		if (job == NULL || job->state != JOB_RUNNING ||
		    job->attempts != json_integer_value(json_object_get(e,
		    "attempt")) || sent == NULL || received == NULL ||
		    !byte_count(sent) || !byte_count(received))
			continue;
		for (k = 0; k < job->nparts; k++)
			if (job->parts[k].node_id == node->id &&
			    !job->parts[k].ended) {
				atomic_store(&job->parts[k].net_sent,
				    json_integer_value(sent));
				atomic_store(&job->parts[k].net_received,
				    json_integer_value(received));
			}
	}
}

static enum MHD_Result
handle_heartbeat(struct MHD_Connection *conn, struct request *req)
{
	enum MHD_Result rc;
	struct node *node;
	json_t *body, *running, *gpus, *g, *kill, *offer;
	struct op *op;
	char err[256];
	size_t i;
	int64_t hb_ms, lease_ms;

	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	if (api_check_agent_body("heartbeat", body, err, sizeof(err)) != 0) {
		json_decref(body);
		return reply_error(conn, 400, "%s", err);
	}
	running = json_object_get(body, "running");
	gpus = json_object_get(body, "gpus");
	pthread_rwlock_rdlock(&state.lock);
	node = own_node(conn, req,
	    json_integer_value(json_object_get(body, "node_id")), &rc);
	if (node == NULL) {
		pthread_rwlock_unlock(&state.lock);
		json_decref(body);
		return rc;
	}
	atomic_store(&node->last_seen_mono, gp_mono_ms());
	node->last_seen_ms = gp_now_ms();
	state_heartbeat_ms(&hb_ms, &lease_ms);
	atomic_store(&node->lease_told_ms, lease_ms);
	json_array_foreach(gpus, i, g)
	{
		json_t *idx = json_object_get(g, "index");
		int64_t k = json_integer_value(idx);
		if (!json_is_integer(idx) || k < 0 || k >= node->ngpus)
			continue;
		node->gpus[k].util =
		    (int)json_integer_value(json_object_get(g, "util"));
		node->gpus[k].mem_used_mib =
		    json_integer_value(json_object_get(g, "mem_used_mib"));
		node->gpus[k].temp_c = sensor(g, "temp_c", 0, 250);
		node->gpus[k].power_mw = sensor(g, "power_mw", 0, 100000000);
	}
	heartbeat_gpushare(node, json_object_get(body, "gpushare"));
	heartbeat_network(node, json_object_get(body, "network"));
	kill = json_array();
	state_reconcile(node, running, kill, 1);
	offer = json_object_get(body, "offer");
	if (offer != NULL) {
		struct offer o;
		if (offer_decode(offer, node->ngpus, &o, err, sizeof(err)) !=
		    0) {
			pthread_rwlock_unlock(&state.lock);
			json_decref(body);
			json_decref(kill);
			return reply_error(conn, 400, "%s", err);
		}
		if (o.seq > node->offer_seq &&
		    (op = op_new(OP_OFFER, &req->auth_copy)) != NULL) {
			op->node_id = node->id;
			op->body = json_incref(offer);
			state_submit_op(op);
		}
	}
	pthread_rwlock_unlock(&state.lock);
	json_decref(body);
	/*
	 * Nearly every heartbeat kills nothing. The period and lease tell
	 * the agent to beat less often as the pool grows.
	 */
	if (json_array_size(kill) == 0) {
		char text[96];
		json_decref(kill);
		snprintf(text, sizeof(text),
		    "{\"kill\":[],\"heartbeat_ms\":%lld,\"lease_ms\":%lld,"
		    "\"job_network\":true}",
		    (long long)hb_ms, (long long)lease_ms);
		return api_reply_const(conn, text);
	}
	return reply_json(conn, 200, json_pack("{s:o,s:I,s:I,s:b}", "kill",
	    kill, "heartbeat_ms", (json_int_t)hb_ms, "lease_ms",
	    (json_int_t)lease_ms, "job_network", 1));
}

static enum MHD_Result
handle_poll(struct MHD_Connection *conn, struct request *req)
{
	enum MHD_Result rc;
	struct node *node;
	int64_t node_id, left, bad, now;
	json_t *assign, *cancel, *ckpt, *stop, *streams, *a;
	size_t i;

	if (api_query_int(conn, "node_id", -1, 1, INT64_MAX, &node_id) != 0 ||
	    node_id < 0)
		return reply_error(conn, 400, "node_id: a node id");
	left = api_wait_left(conn, req, &bad);
	if (bad)
		return reply_error(conn, 400, "wait_ms: 0 to %d",
		    API_WAIT_MS_MAX);
	pthread_rwlock_rdlock(&state.lock);
	node = own_node(conn, req, node_id, &rc);
	if (node == NULL) {
		pthread_rwlock_unlock(&state.lock);
		return rc;
	}
	/*
	 * A newer poll, or a new registration of the node, took over: this
	 * one's agent may be gone (killed with the poll suspended here), so
	 * it leaves the outbox to the newer one.
	 */
	if (req->superseded) {
		pthread_rwlock_unlock(&state.lock);
		return api_reply_const(conn,
		    "{\"assignments\":[],\"cancels\":[],\"checkpoints\":[],"
		    "\"stops\":[]}");
	}
	pthread_mutex_lock(&notify_lock);
	if (json_array_size(node->outbox_assign) == 0 &&
	    json_array_size(node->outbox_cancel) == 0 &&
	    json_array_size(node->outbox_checkpoint) == 0 &&
	    json_array_size(node->outbox_stop) == 0 &&
	    !relay_node_has_streams(node_id) && left > 0) {
		notify_wait(conn, req, WAIT_POLL, node_id, left);
		if (req->suspended) {
			pthread_mutex_unlock(&notify_lock);
			pthread_rwlock_unlock(&state.lock);
			return MHD_YES;
		}
	}
	assign = node->outbox_assign;
	cancel = node->outbox_cancel;
	ckpt = node->outbox_checkpoint;
	stop = node->outbox_stop;
	node->outbox_assign = json_array();
	node->outbox_cancel = json_array();
	node->outbox_checkpoint = json_array();
	node->outbox_stop = json_array();
	/* Streams to dial (relay.c); an older agent ignores the field. */
	streams = relay_node_take_streams(node_id);
	now = gp_mono_ms();
	json_array_foreach(assign, i, a)
	{
		struct job *j = state_job(
		    json_integer_value(json_object_get(a, "job_id")));
		int part = j != NULL ? job_part_on(j, node->id) : -1;
		if (part >= 0) {
			j->parts[part].delivered_mono = now;
			metrics_job_delivered(j, now);
		}
	}
	pthread_mutex_unlock(&notify_lock);
	pthread_rwlock_unlock(&state.lock);
	/* An idle poll's answer (its time ran out) from a constant. */
	if (json_array_size(assign) == 0 && json_array_size(cancel) == 0 &&
	    json_array_size(ckpt) == 0 && json_array_size(stop) == 0 &&
	    json_array_size(streams) == 0) {
		json_decref(streams);
		json_decref(assign);
		json_decref(cancel);
		json_decref(ckpt);
		json_decref(stop);
		return api_reply_const(conn,
		    "{\"assignments\":[],\"cancels\":[],\"checkpoints\":[],"
		    "\"stops\":[]}");
	}
	return reply_json(conn, 200,
	    json_pack("{s:o,s:o,s:o,s:o,s:o}", "assignments", assign,
		"cancels", cancel, "checkpoints", ckpt, "stops", stop,
		"streams", streams != NULL ? streams : json_array()));
}

static enum MHD_Result
handle_report(struct MHD_Connection *conn, struct request *req,
    int64_t job_id, int64_t attempt, const char *what)
{
	int finished = strcmp(what, "finished") == 0;
	enum MHD_Result rc;
	char err[256];
	json_t *body;
	struct op *op;

	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	if (api_check_agent_body(what, body, err, sizeof(err)) != 0) {
		json_decref(body);
		return reply_error(conn, 400, "%s", err);
	}
	op = op_new(finished ? OP_FINISHED : OP_STARTED, &req->auth_copy);
	if (op == NULL) {
		json_decref(body);
		return reply_error(conn, 503, "out of memory");
	}
	op->job_id = job_id;
	op->attempt = (int)attempt;
	op->node_id = json_integer_value(json_object_get(body, "node_id"));
	op->body = body;
	return api_queue_op(conn, req, op);
}

/*
 * POST /v1/agent/reports: many started/finished reports in one request,
 * all checked before any applies; the state thread applies them in order
 * and answers each.
 */
static enum MHD_Result
handle_reports(struct MHD_Connection *conn, struct request *req)
{
	enum MHD_Result rc;
	char err[320];
	json_t *body;
	struct op *op;

	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	if (api_check_reports(body, err, sizeof(err)) != 0) {
		json_decref(body);
		return reply_error(conn, 400, "%s", err);
	}
	if ((op = op_new(OP_REPORTS, &req->auth_copy)) == NULL) {
		json_decref(body);
		return reply_error(conn, 503, "out of memory");
	}
	op->node_id = json_integer_value(json_object_get(body, "node_id"));
	op->body = body;
	return api_queue_op(conn, req, op);
}

static enum MHD_Result
handle_agent_log(struct MHD_Connection *conn, struct request *req,
    int64_t job_id, int64_t attempt)
{
	enum MHD_Result rc;
	struct node *node;
	struct job *job;
	int64_t node_id, offset, held = 0;
	int err, part;

	if (api_query_int(conn, "node_id", -1, 1, INT64_MAX, &node_id) != 0 ||
	    node_id < 0)
		return reply_error(conn, 400, "node_id: a node id");
	if (api_query_int(conn, "offset", 0, 0, INT64_MAX / 2, &offset) != 0)
		return reply_error(conn, 400, "offset: a non-negative integer");
	/*
	 * Output of the current attempt is welcome even before the node has
	 * registered again (a coordinator restart): the attempt is the fence.
	 */
	pthread_rwlock_rdlock(&state.lock);
	node = own_node_any(conn, req, node_id, 0, &rc);
	if (node == NULL) {
		pthread_rwlock_unlock(&state.lock);
		return rc;
	}
	job = state_job(job_id);
	part = job != NULL ? job_part_on(job, node->id) : -1;
	if (job == NULL || job->state != JOB_RUNNING || part < 0 ||
	    job->parts[part].ended || job->attempts != attempt) {
		pthread_rwlock_unlock(&state.lock);
		return reply_json(conn, 409,
		    json_pack("{s:s,s:b}", "error", "stale attempt: kill it",
			"kill", 1));
	}
	err = joblog_append(job, part, offset,
	    req->body.data ? req->body.data : "", req->body.len,
	    state.cfg.log_cap, &held);
	pthread_mutex_lock(&notify_lock);
	notify_wake_job(job);
	pthread_mutex_unlock(&notify_lock);
	pthread_rwlock_unlock(&state.lock);
	if (err != 0)
		return reply_error(conn, 500, "cannot write the log");
	return reply_json(conn, 200,
	    json_pack("{s:I}", "offset", (json_int_t)held));
}

/* POST /v1/agent/leave {"node_id": N}: the owner takes the node out. */
static enum MHD_Result
handle_leave(struct MHD_Connection *conn, struct request *req)
{
	enum MHD_Result rc;
	json_t *body, *id;
	struct op *op;

	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	id = json_object_get(body, "node_id");
	if (!json_is_object(body) || json_object_size(body) != 1 ||
	    !json_is_integer(id) || json_integer_value(id) < 1) {
		json_decref(body);
		return reply_error(conn, 400, "body: {\"node_id\": N}");
	}
	if ((op = op_new(OP_LEAVE, &req->auth_copy)) == NULL) {
		json_decref(body);
		return reply_error(conn, 503, "out of memory");
	}
	op->node_id = json_integer_value(id);
	json_decref(body);
	return api_queue_op(conn, req, op);
}

/* ---- routes ---- */

static enum MHD_Result
route_agent(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	API_PATH_PARTS(url, p, n);

	if (n == 3 && strcmp(p[2], "register") == 0)
		return handle_register(conn, req);
	if (n == 3 && strcmp(p[2], "heartbeat") == 0)
		return handle_heartbeat(conn, req);
	if (n == 3 && strcmp(p[2], "poll") == 0)
		return handle_poll(conn, req);
	if (n == 3 && strcmp(p[2], "leave") == 0)
		return handle_leave(conn, req);
	if (n == 3 && strcmp(p[2], "reports") == 0)
		return handle_reports(conn, req);
	return api_no_route(conn, url, method, 0);
}

/* POST /v1/agent/jobs/{id}/{attempt}/(log|started|finished). */
static enum MHD_Result
route_agent_job(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	API_PATH_PARTS(url, p, n);
	int64_t id, attempt;

	if (n != 6)
		return api_no_route(conn, url, method, 0);
	if (!api_path_id(p[3], &id) || !api_path_id(p[4], &attempt) ||
	    attempt > 1000000)
		return reply_error(conn, 404, "bad job id or attempt");
	if (strcmp(p[5], "log") == 0)
		return handle_agent_log(conn, req, id, attempt);
	if (strcmp(p[5], "started") == 0 || strcmp(p[5], "finished") == 0)
		return handle_report(conn, req, id, attempt, p[5]);
	return api_no_route(conn, url, method, 0);
}

static enum MHD_Result
route_none(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)req;
	return api_no_route(conn, url, method, 0);
}

#define AGENT_ONLY "agent calls need a provider token"

const struct api_route agent_routes[] = {
    {"/v1/agent/register", API_POST, API_PROVIDERS, AGENT_ONLY, 0, 0,
        route_agent, NULL},
    {"/v1/agent/heartbeat", API_POST, API_PROVIDERS, AGENT_ONLY, 0, 0,
        route_agent, NULL},
    {"/v1/agent/poll", API_GET, API_PROVIDERS, AGENT_ONLY, 0, 0, route_agent,
        NULL},
    {"/v1/agent/leave", API_POST, API_PROVIDERS, AGENT_ONLY, 0, 0,
        route_agent, NULL},
    {"/v1/agent/reports", API_POST, API_PROVIDERS, AGENT_ONLY,
        AGENT_REPORTS_BODY_MAX, 0, route_agent, NULL},
    {"/v1/agent/jobs/*/*/log", API_POST, API_PROVIDERS, AGENT_ONLY,
        AGENT_LOG_BODY_MAX, 0, route_agent_job, NULL},
    {"/v1/agent/jobs/*/*/*", API_POST, API_PROVIDERS, AGENT_ONLY, 0, 0,
        route_agent_job, NULL},
    /* The rest: refused to all but providers, then no such endpoint. */
    {"/v1/agent/*/**", API_GET | API_POST, API_PROVIDERS, AGENT_ONLY, 0, 0,
        route_none, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
