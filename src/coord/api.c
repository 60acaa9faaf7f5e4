/*
 * api.c: the HTTP API (docs/api.md) on libmicrohttpd: body collection,
 * authentication, the walk of the route table (route.h, api_tables[]),
 * the helpers the handler files share (api_int.h), and the users', tokens'
 * and /metrics handlers (the jobs' are in api_jobs.c, the agents' in
 * api_agent.c). Reads are answered under the state read lock; changes are
 * queued to the state thread (state_loop.c) and the connection is
 * suspended until it has committed them.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "api_int.h"
#include "coord_metrics.h"
#include "held.h"
#include "joblog.h"
#include "notify.h"
#include "state.h"
#include "gp.h"
#include "leader.h"
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

json_t *
api_body_object(const struct request *req)
{
	json_t *v = json_loadb(req->body.data ? req->body.data : "",
	    req->body.len, JSON_REJECT_DUPLICATES, NULL);

	if (v != NULL && !json_is_object(v)) {
		json_decref(v);
		return NULL;
	}
	return v;
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
 * 405 with the methods the path takes in Allow (RFC 9110 15.5.6); none
 * when allow is 0 (no route has the path).
 */
static enum MHD_Result
reply_not_allowed(struct MHD_Connection *conn, const char *method,
    unsigned allow)
{
	struct MHD_Response *resp;
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
	if (allow != 0)
		MHD_add_response_header(resp, "Allow", allowed);
	return reply_queue(conn, 405, resp);
}

/*
 * The answer for a URL no route answers: what the hand-written chain gave
 * before the table, kept byte for byte (and Allow on a 405).
 */
enum MHD_Result
api_no_route(struct MHD_Connection *conn, const char *url,
    const char *method, unsigned allow)
{
	char p[8][32];
	int n = api_split_path(url, p, 8);

	if (n < 2 || strcmp(p[0], "v1") != 0)
		return reply_error(conn, 404, "no such endpoint: %.100s", url);
	if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
		return reply_not_allowed(conn, method, allow);
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

/*
 * GET /v1/coordinators: the pool's coordinators, by the URLs clients
 * reach them at, and which one leads: where a client that lost its
 * coordinator may go, the pool vouching for each (the dashboard moves
 * only to these: web/app.js). With leader election, the live ones the
 * database lists (leader_coordinators); one coordinator (SQLite): itself,
 * by its --listen address (none when that is 0.0.0.0).
 */
static enum MHD_Result
route_coordinators(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	char *text = leader_coordinators(), leader[512];
	json_t *urls, *list, *each;
	size_t i;

	(void)req;
	(void)url;
	(void)method;
	if (text != NULL) {
		urls = json_loads(text, 0, NULL);
		free(text);
		leader_url(leader, sizeof(leader));
	} else {
		urls = json_array();
		snprintf(leader, sizeof(leader), "%s://%s:%d",
		    state.cfg.tls_cert[0] != '\0' ? "https" : "http",
		    state.cfg.listen_addr, state.cfg.port);
		if (strcmp(state.cfg.listen_addr, "0.0.0.0") != 0)
			json_array_append_new(urls, json_string(leader));
	}
	if (!json_is_array(urls) || (list = json_array()) == NULL) {
		json_decref(urls);
		return reply_error(conn, 500, "cannot list the coordinators");
	}
	json_array_foreach(urls, i, each)
		if (json_is_string(each))
			json_array_append_new(list, json_pack("{s:O,s:b}",
			    "url", each, "leader",
			    strcmp(json_string_value(each), leader) == 0));
	json_decref(urls);
	return reply_json(conn, 200, json_pack("{s:o}", "coordinators",
	    list));
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
		return api_no_route(conn, url, method, 0);
	if (!api_path_id(p[2], &id))
		return reply_error(conn, 404, "no token '%s'", p[2]);
	return handle_token_revoke(conn, req, id);
}

#define ADMIN_ONLY API_ROLE(GP_ROLE_ADMIN)
#define METRICS_READERS (API_ROLE(GP_ROLE_ADMIN) | API_ROLE(GP_ROLE_METRICS))


const struct api_route metrics_routes[] = {
    {"/metrics", API_GET, METRICS_READERS,
        "/metrics needs an admin or metrics token", 0, API_STRICT_METHODS,
        handle_metrics, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};

const struct api_route user_routes[] = {
    {"/v1/whoami", API_GET, 0, NULL, 0, 0, route_whoami, NULL},
    {"/v1/coordinators", API_GET, 0, NULL, 0, API_STRICT_METHODS,
        route_coordinators, NULL},
    {"/v1/tokens", API_POST, ADMIN_ONLY, "only an admin may create tokens",
        0, 0, route_tokens, NULL},
    {"/v1/tokens", API_GET, ADMIN_ONLY, "only an admin may list tokens", 0,
        0, route_tokens, NULL},
    {"/v1/tokens/{id}/revoke", API_POST, ADMIN_ONLY,
        "only an admin may revoke tokens", 0, 0, route_token_revoke, NULL},
    /* Not an id: "no token 'x'" to anyone, as before the table. */
    {"/v1/tokens/*/revoke", API_POST, 0, NULL, 0, 0, route_token_revoke,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};

/* In the order the chain asked them before the table: the first wins. */
const struct api_route *const api_tables[] = {web_routes, metrics_routes,
    image_routes, ckpt_routes, data_routes, acct_routes, user_routes,
    relay_routes, proxy_routes, terminal_routes, jobs_routes, agent_routes,
    NULL};

/*
 * A 503 with body (taken), Retry-After: 1, and when standby is set a
 * standby's headers: X-Gpupool-Role: standby and, when leader is not
 * "", X-Gpupool-Leader. What reply_not_leader and reply_refused send.
 */
static enum MHD_Result
reply_unavailable(struct MHD_Connection *conn, json_t *body, int standby,
    const char *leader)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	char *text;

	text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (text == NULL)
		return MHD_NO;
	if (reply_raw(conn, 503, text, strlen(text), "application/json",
	    &resp) != MHD_YES)
		return MHD_NO;
	if (standby)
		MHD_add_response_header(resp, "X-Gpupool-Role", "standby");
	if (standby && leader[0] != '\0')
		MHD_add_response_header(resp, "X-Gpupool-Leader", leader);
	MHD_add_response_header(resp, "Retry-After", "1");
	rc = MHD_queue_response(conn, 503, resp);
	MHD_destroy_response(resp);
	return rc;
}

/*
 * A standby's answer to every API request (several coordinators, one
 * leader: leader.c): 503, the leader's URL in X-Gpupool-Leader and in the
 * body's "leader" (null while none is known), Retry-After: 1. A leader
 * still loading its state names itself. docs/api.md.
 */
static enum MHD_Result
reply_not_leader(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	char leader[512];
	json_t *body;

	(void)req;
	(void)url;
	(void)method;
	leader_url(leader, sizeof(leader));
	if (leader[0] == '\0')
		body = json_pack("{s:s, s:n}", "error",
		    "not the leader: this coordinator is a standby and no "
		    "leader is known yet; retry", "leader");
	else if (leader_epoch() != 0)
		body = json_pack("{s:s, s:s}", "error",
		    "not ready: this coordinator leads and is loading the "
		    "pool's state; retry", "leader", leader);
	else
		body = json_pack("{s:s, s:s}", "error",
		    "not the leader: this coordinator is a standby",
		    "leader", leader);
	return reply_unavailable(conn, body, 1, leader);
}

/* A stream's begin, run held (held.c): after authentication, as inline. */
static enum MHD_Result
stream_begin(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	(void)method;
	authenticate(conn, req);
	req->route->stream->begin(req, url);
	return MHD_YES;
}

/*
 * A request the coordinator answers without committing anything
 * (state_refusal: it stops after a failed commit, or it lost the lead):
 * 503 and Retry-After: 1; "not the leader" as a standby's answer is
 * (X-Gpupool-Role: standby, X-Gpupool-Leader and the body's "leader"
 * when the new leader is known), so that clients follow it. result: the
 * op's answer (refuse_op's), or NULL for one made here.
 */
static enum MHD_Result
reply_refused(struct MHD_Connection *conn, enum state_refusal kind,
    json_t *result)
{
	char leader[512], msg[400];
	json_t *body;

	leader[0] = '\0';
	if (kind == STATE_REFUSE_NOT_LEADER)
		leader_url(leader, sizeof(leader));
	if (result != NULL && json_is_string(json_object_get(result, "error")))
		gp_strlcpy(msg, json_string_value(json_object_get(result,
		    "error")), sizeof(msg));
	else
		state_refusal_message(msg, sizeof(msg));
	if (kind != STATE_REFUSE_NOT_LEADER)
		body = json_pack("{s:s}", "error", msg);
	else if (leader[0] == '\0')
		body = json_pack("{s:s, s:n}", "error", msg, "leader");
	else
		body = json_pack("{s:s, s:s}", "error", msg, "leader", leader);
	return reply_unavailable(conn, body, kind == STATE_REFUSE_NOT_LEADER,
	    leader);
}

static atomic_int in_flight; /* api_requests_in_flight */

int
api_requests_in_flight(void)
{
	return atomic_load(&in_flight);
}

/* The route every request of a standby takes but the dashboard's files. */
static const struct api_route not_leader_route = {"/**", API_ANY, 0, NULL,
    0, API_PUBLIC, reply_not_leader, NULL};

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
		atomic_fetch_add(&in_flight, 1);
		found = api_route_find(api_tables, url, method, &route, &allow);
		req->route = found == 200 ? route : NULL;
		if (leader_standby() && (req->route == NULL ||
		    (req->route->flags & API_PUBLIC) == 0))
			req->route = &not_leader_route;
		req->body_limit = api_route_body_limit(req->route);
		*con_cls = req;
		/* An upload: checked now, its body streamed to its owner. */
		if (req->route != NULL && req->route->stream != NULL &&
		    ((req->route->flags & API_HELD) == 0 ||
		    !held_offload(conn, req, url, method, stream_begin, 1)))
			stream_begin(conn, req, url, method);
		return MHD_YES;
	}
	if (req->held == HELD_BEGUN) {
		/*
		 * Its begin ran held: libmicrohttpd calls once more as it
		 * did first (0.9.75 does, after a resume), then with the body.
		 */
		req->held = HELD_NONE;
		if (*upload_data_size == 0)
			return MHD_YES;
	}
	if (req->held == HELD_DONE)
		return held_answer(conn, req);
	if (req->route != NULL && req->route->stream != NULL) {
		if (*upload_data_size > 0) {
			req->route->stream->data(req, upload_data,
			    *upload_data_size);
			*upload_data_size = 0;
			return MHD_YES;
		}
		return req->route->stream->end(conn, req);
	}
	if (*upload_data_size > 0 && req->route == &not_leader_route) {
		/* A standby reads no body: whatever its size, 503. */
		*upload_data_size = 0;
		return MHD_YES;
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
		if (op->refused != STATE_REFUSE_NONE)
			rc = reply_refused(conn, op->refused, op->result);
		else
			rc = reply_json(conn, op->status ? op->status : 500,
			    json_incref(op->result));
		op_free(op);
		return rc;
	}
	/*
	 * Nothing is committed any more (a failed commit, the lead lost):
	 * a long poll resumed, a request on a kept-alive connection, is
	 * answered so rather than from a memory ahead of the store.
	 */
	if (state_refusal() != STATE_REFUSE_NONE &&
	    (req->route == NULL || (req->route->flags & API_PUBLIC) == 0))
		return reply_refused(conn, state_refusal(), NULL);
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
		return api_no_route(conn, url, method, allow);
	}
	if (!api_route_permits(route, req->auth->role))
		return reply_error(conn, 403, "%s", route->refusal);
	/* A route that may wait on the database: not on this worker. */
	if ((route->flags & API_HELD) != 0 &&
	    held_offload(conn, req, url, method, route->handle, 0))
		return MHD_YES;
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
	/*
	 * Only a request that waited can have a waiter to forget; the
	 * others take no lock here. libmicrohttpd ends an upgraded
	 * connection (a stream's leg, relay.c) while holding a lock of
	 * its own, and a thread that holds notify_lock may be waiting for
	 * that lock to resume a poll (notify.c's fire, from stream_create
	 * or the state thread's publish): taking notify_lock here hung
	 * the whole coordinator when many streams ended while others
	 * opened. (Waits on the same connection's thread: no race.)
	 */
	if (req->waited) {
		pthread_rwlock_rdlock(&state.lock);
		notify_forget(req);
		pthread_rwlock_unlock(&state.lock);
	}
	if (req->op != NULL)
		op_abandon(req->op);
	if (req->held_resp != NULL)
		MHD_destroy_response(req->held_resp);
	if (req->route != NULL && req->route->stream != NULL)
		req->route->stream->release(req->stream);
	gp_buf_free(&req->body);
	free(req);
	*con_cls = NULL;
	atomic_fetch_sub(&in_flight, 1);
}
