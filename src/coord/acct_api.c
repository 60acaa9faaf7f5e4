/*
 * acct_api.c: the accounting endpoints (docs/api.md, docs/accounting.md):
 * groups and their members, prices, budgets, usage and the ledger.
 * Reads are answered here, under the state read lock (groups, prices,
 * budgets) or from the ledger's read connection (usage, the ledger).
 * Changes are decoded here (acct_decode) and applied by the state thread
 * (acct_apply), like every change, in its batch and its transaction.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acct_api.h"
#include "joblog.h"
#include "route.h"
#include "state.h"
#include "store.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"

#define LEDGER_LIMIT_MAX 10000

static void
set_error(struct op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_error(struct op *op, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	op->status = status;
	json_decref(op->result);
	op->result = json_pack("{s:s}", "error", msg);
}

static const char *
query(struct MHD_Connection *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

/* ---- JSON views (state.lock held) ---- */

static json_t *
time_json(int64_t ms)
{
	char buf[40];

	if (ms <= 0 || ms == INT64_MAX)
		return json_null();
	gp_format_time(ms, buf, sizeof(buf));
	return json_string(buf);
}

static json_t *
group_json(const struct ledger_group *g, int64_t now)
{
	json_t *members = json_array(), *nodes = json_array();
	json_t *providers = json_array();
	struct acct_decay d;
	size_t i;
	int64_t id;

	for (i = 0; i < ledger.nmembers; i++)
		if (ledger.members[i].group_id == g->id)
			json_array_append_new(members,
			    json_string(ledger.members[i].user));
	const struct node *nd;
	const struct token_entry *t;

	id = 0;
	while ((nd = state_node_next(&id)) != NULL)
		if (nd->group_id == g->id)
			json_array_append_new(nodes, json_string(nd->name));
	id = 0;
	while ((t = state_token_next(&id)) != NULL) {
		json_t *v;
		size_t k;
		int seen = 0;
		if (t->role != GP_ROLE_PROVIDER ||
		    t->group_id != g->id)
			continue;
		json_array_foreach(providers, k, v)
		    seen |= strcmp(json_string_value(v), t->name) == 0;
		if (!seen)
			json_array_append_new(providers, json_string(t->name));
	}
	ledger_group_usage(&ledger, g->id, now, &d);
	return json_pack("{s:I,s:s,s:I,s:o,s:o,s:o,s:o,s:{s:f,s:I}}", "id",
	    (json_int_t)g->id, "name", g->name, "weight", (json_int_t)g->weight,
	    "created_at", time_json(g->created_ms), "members", members,
	    "providers", providers, "nodes", nodes, "decayed_usage", "gpu_s",
	    d.gpu_s, "credits_micro", (json_int_t)d.credits);
}

static json_t *
budget_json(const struct ledger_budget *b, int64_t now)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:I,s:I,s:o,s:o}", "kind",
	    b->kind == LEDGER_USER ? "user" : "group", "name", b->name,
	    "amount_micro", (json_int_t)b->amount, "period",
	    acct_period_name(b->period), "spent_micro", (json_int_t)b->spent,
	    "left_micro", (json_int_t)(b->amount - b->spent), "period_start",
	    time_json(b->period_start), "period_end",
	    time_json(acct_period_next(b->period, now)));
}

static json_t *
prices_json(void)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < ledger.nprices; i++)
		json_array_append_new(arr,
		    json_pack("{s:s,s:I}", "class", ledger.prices[i].cls,
			"price_micro", (json_int_t)ledger.prices[i].micro));
	return json_pack("{s:o}", "prices", arr);
}

/* ---- changes: applied by the state thread ---- */

/* A user-role token named name exists. */
static int
user_known(const char *name)
{
	const struct token_entry *t;
	int64_t c = 0;

	while ((t = state_token_next(&c)) != NULL)
		if (t->role == GP_ROLE_USER && strcmp(t->name, name) == 0)
			return 1;
	return 0;
}

/* Moves every provider token named name, and its nodes, to g. */
static int
provider_move(const char *name, const struct ledger_group *g)
{
	struct token_entry *t;
	struct node *nd;
	int64_t c = 0, id;
	int found = 0;

	while ((t = state_token_next(&c)) != NULL) {
		if (t->role != GP_ROLE_PROVIDER || strcmp(t->name, name) != 0)
			continue;
		found = 1;
		t->group_id = g->id;
		if (state.store->ops->set_token_group(state.store, t->id,
			g->id) != 0)
			gp_fatalx("cannot store a token's group");
		id = 0;
		while ((nd = state_node_next(&id)) != NULL)
			if (nd->owner_token == t->id)
				nd->group_id = g->id;
	}
	return found ? 0 : GP_ENOENT;
}

static void
apply_members(struct op *op, const struct ledger_group *g)
{
	const struct acct_request *r = &op->acct;
	int rc;

	if (r->provider[0] != '\0') {
		if (provider_move(r->provider, g) != 0) {
			set_error(op, 404, "no provider token named '%s'",
			    r->provider);
			return;
		}
		gp_info("provider moved provider=%s group=%s", r->provider,
		    g->name);
		op->status = 200;
		op->result = group_json(g, gp_now_ms());
		return;
	}
	if (!user_known(r->user)) {
		set_error(op, 404, "no user token named '%s'", r->user);
		return;
	}
	switch (r->member_op) {
	case ACCT_MEMBER_ADD:
		rc = ledger_member_add(&ledger, r->user, g->id);
		break;
	case ACCT_MEMBER_REMOVE:
		rc = ledger_member_remove(&ledger, r->user, g->id);
		if (rc == GP_ENOENT) {
			set_error(op, 404, "%s is not a member of '%s'",
			    r->user, g->name);
			return;
		}
		break;
	default:
		rc = ledger_member_move(&ledger, r->user, g->id);
		break;
	}
	if (rc != 0)
		gp_fatalx("cannot store group members");
	gp_info("group members changed group=%s user=%s op=%s", g->name,
	    r->user,
	    r->member_op == ACCT_MEMBER_ADD      ? "add"
	    : r->member_op == ACCT_MEMBER_REMOVE ? "remove"
						 : "move");
	op->status = 200;
	op->result = group_json(g, gp_now_ms());
}

static void
apply_price(struct op *op)
{
	const struct acct_request *r = &op->acct;
	int rc;

	if (r->remove) {
		rc = ledger_price_remove(&ledger, r->name);
		if (rc == GP_ENOENT) {
			set_error(op, 404, "no price for class '%s'", r->name);
			return;
		}
	} else {
		rc = ledger_price_set(&ledger, r->name, r->amount);
		if (rc == GP_ETOOBIG) {
			set_error(op, 409, "at most %d price classes",
			    ACCT_PRICES_MAX);
			return;
		}
	}
	if (rc != 0)
		gp_fatalx("cannot store prices");
	state.sched_dirty = 1;
	gp_info("price %s class=%s micro=%lld", r->remove ? "removed" : "set",
	    r->name, (long long)r->amount);
	op->status = 200;
	op->result = prices_json();
}

static void
apply_budget(struct op *op)
{
	const struct acct_request *r = &op->acct;
	enum ledger_kind kind = r->user[0] ? LEDGER_USER : LEDGER_GROUP;
	const char *name = r->user[0] ? r->user : r->group;
	const struct ledger_group *g = NULL;
	int64_t now = gp_now_ms();
	int rc;

	if (kind == LEDGER_GROUP &&
	    (g = ledger_group_by_name(&ledger, r->group)) == NULL) {
		set_error(op, 404, "no group '%s'", r->group);
		return;
	}
	if (r->remove) {
		rc = ledger_budget_remove(&ledger, kind, name);
		if (rc == GP_ENOENT) {
			set_error(op, 404, "no budget for %s '%s'",
			    kind == LEDGER_USER ? "user" : "group", name);
			return;
		}
		if (rc != 0)
			gp_fatalx("cannot store budgets");
		op->status = 200;
		op->result = json_pack("{s:s,s:s,s:b}", "kind",
		    kind == LEDGER_USER ? "user" : "group", "name", name,
		    "removed", 1);
	} else {
		if (ledger_budget_set(&ledger, kind, name,
			g != NULL ? g->id : 0, r->amount, r->period, now) != 0)
			gp_fatalx("cannot store budgets");
		op->status = 200;
		op->result = budget_json(ledger_budget_find(&ledger, kind,
					     name),
		    now);
	}
	state.sched_dirty = 1;
	gp_info("budget %s kind=%s name=%s amount_micro=%lld period=%s",
	    r->remove ? "removed" : "set",
	    kind == LEDGER_USER ? "user" : "group", name,
	    (long long)r->amount, acct_period_name(r->period));
}

void
acct_apply(struct op *op)
{
	const struct acct_request *r = &op->acct;
	const struct ledger_group *g;
	int64_t id;

	switch (r->kind) {
	case ACCT_BODY_GROUP_CREATE:
		switch (ledger_group_create(&ledger, r->name, r->weight,
		    gp_now_ms(), &id)) {
		case 0:
			break;
		case GP_ECONFLICT:
			set_error(op, 409, "group '%s' exists", r->name);
			return;
		default:
			gp_fatalx("cannot store a group");
		}
		gp_info("group created group=%s id=%lld weight=%lld", r->name,
		    (long long)id, (long long)r->weight);
		op->status = 201;
		op->result = group_json(ledger_group_by_id(&ledger, id),
		    gp_now_ms());
		return;
	case ACCT_BODY_GROUP_SET:
	case ACCT_BODY_MEMBERS:
		if ((g = ledger_group_by_name(&ledger, r->name)) == NULL) {
			set_error(op, 404, "no group '%s'", r->name);
			return;
		}
		if (r->kind == ACCT_BODY_MEMBERS) {
			apply_members(op, g);
			return;
		}
		if (ledger_group_set_weight(&ledger, g->id, r->weight) != 0)
			gp_fatalx("cannot store a group");
		op->status = 200;
		op->result = group_json(g, gp_now_ms());
		return;
	case ACCT_BODY_PRICE:
		apply_price(op);
		return;
	case ACCT_BODY_BUDGET:
		apply_budget(op);
		return;
	case ACCT_BODY_TOKEN:
	case ACCT_BODY_COUNT:
		break;
	}
	set_error(op, 500, "not an accounting change");
}

/* ---- handlers ---- */

/* Decodes the body as kind, queues it to the state thread (admin only). */
static enum MHD_Result
queue_change(struct MHD_Connection *conn, struct request *req,
    enum acct_body kind, const char *path_name)
{
	struct acct_request r;
	json_error_t jerr;
	char err[256];
	json_t *body;
	struct op *op;

	if (req->auth->role != GP_ROLE_ADMIN)
		return reply_error(conn, 403, "only an admin may change this");
	body = json_loadb(req->body.data ? req->body.data : "", req->body.len,
	    JSON_REJECT_DUPLICATES, &jerr);
	if (body == NULL)
		return reply_error(conn, 400, "invalid JSON: %s", jerr.text);
	if (acct_decode(kind, body, &r, err, sizeof(err)) != 0) {
		json_decref(body);
		return reply_error(conn, 400, "%s", err);
	}
	json_decref(body);
	if (path_name != NULL)
		gp_strlcpy(r.name, path_name, sizeof(r.name));
	if ((op = op_new(OP_ACCT, &req->auth_copy)) == NULL)
		return reply_error(conn, 503, "out of memory");
	op->acct = r;
	op->conn = conn;
	op->req = req;
	req->op = op;
	req->suspended = 1;
	MHD_suspend_connection(conn);
	state_submit_op(op);
	return MHD_YES;
}

/* The groups the caller may see budgets of: a user's, a provider's. */
static int
may_see_budget(const struct token_entry *who, const struct ledger_budget *b)
{
	if (who->role == GP_ROLE_ADMIN)
		return 1;
	if (b->kind == LEDGER_USER)
		return who->role == GP_ROLE_USER &&
		    strcmp(b->name, who->name) == 0;
	if (who->role == GP_ROLE_PROVIDER)
		return b->group_id == who->group_id;
	return ledger_is_member(&ledger, who->name, b->group_id);
}

static enum MHD_Result
handle_lists(struct MHD_Connection *conn, struct request *req,
    const char *what)
{
	int64_t now = gp_now_ms();
	json_t *arr, *o;
	size_t i;

	pthread_rwlock_rdlock(&state.lock);
	if (strcmp(what, "groups") == 0) {
		arr = json_array();
		for (i = 0; i < ledger.ngroups; i++)
			json_array_append_new(arr,
			    group_json(&ledger.groups[i], now));
		o = json_pack("{s:o}", "groups", arr);
	} else if (strcmp(what, "prices") == 0) {
		o = prices_json();
	} else {
		arr = json_array();
		for (i = 0; i < ledger.nbudgets; i++)
			if (may_see_budget(req->auth, &ledger.budgets[i]))
				json_array_append_new(arr,
				    budget_json(&ledger.budgets[i], now));
		o = json_pack("{s:o}", "budgets", arr);
	}
	pthread_rwlock_unlock(&state.lock);
	return reply_json(conn, 200, o);
}

/* A name query argument: absent is "", else it must be a valid name. */
static int
query_name(struct MHD_Connection *conn, const char *key, char *out,
    size_t len)
{
	const char *v = query(conn, key);

	out[0] = '\0';
	if (v == NULL || v[0] == '\0')
		return 0;
	if (!gp_name_valid(v))
		return GP_EINVAL;
	gp_strlcpy(out, v, len);
	return 0;
}

/*
 * The filter of a usage or ledger query, narrowed to what the caller may
 * see: admins anything; a user their own postings, or a group's they are a
 * member of; a provider the postings paying them. Answers itself (and
 * returns 0) on a bad or forbidden query.
 */
static int
read_filter(struct MHD_Connection *conn, struct request *req,
    struct ledger_filter *f, enum MHD_Result *rc)
{
	const struct token_entry *who = req->auth;
	char group[GP_NAME_MAX + 1];
	const char *v;
	int64_t n;

	memset(f, 0, sizeof(*f));
	if (query_name(conn, "user", f->user, sizeof(f->user)) != 0 ||
	    query_name(conn, "group", group, sizeof(group)) != 0 ||
	    query_name(conn, "provider", f->provider, sizeof(f->provider)) !=
		0) {
		*rc = reply_error(conn, 400,
		    "user, group, provider: 1 to %d of A-Z a-z 0-9 . _ -",
		    GP_NAME_MAX);
		return 0;
	}
	if ((v = query(conn, "since")) != NULL &&
	    gp_parse_time(v, &f->since_ms) != 0) {
		*rc = reply_error(conn, 400,
		    "since: a time like 2026-01-31T00:00:00.000Z");
		return 0;
	}
	if ((v = query(conn, "until")) != NULL &&
	    gp_parse_time(v, &f->until_ms) != 0) {
		*rc = reply_error(conn, 400,
		    "until: a time like 2026-01-31T00:00:00.000Z");
		return 0;
	}
	if ((v = query(conn, "job")) != NULL &&
	    gp_parse_int(v, 1, INT64_MAX / 2, &f->job_id) != 0) {
		*rc = reply_error(conn, 400, "job: a job id");
		return 0;
	}
	f->limit = 100;
	if ((v = query(conn, "limit")) != NULL) {
		if (gp_parse_int(v, 1, LEDGER_LIMIT_MAX, &n) != 0) {
			*rc = reply_error(conn, 400, "limit: 1 to %d",
			    LEDGER_LIMIT_MAX);
			return 0;
		}
		f->limit = (int)n;
	}
	pthread_rwlock_rdlock(&state.lock);
	if (group[0] != '\0') {
		const struct ledger_group *g =
		    ledger_group_by_name(&ledger, group);
		if (g == NULL) {
			pthread_rwlock_unlock(&state.lock);
			*rc = reply_error(conn, 404, "no group '%s'", group);
			return 0;
		}
		f->group_id = g->id;
		gp_strlcpy(f->group, g->name, sizeof(f->group));
	}
	switch (who->role) {
	case GP_ROLE_ADMIN:
		break;
	case GP_ROLE_USER:
		/* A group's whole usage for its members; else their own. */
		if (f->group_id != 0 &&
		    ledger_is_member(&ledger, who->name, f->group_id)) {
			if (f->user[0] == '\0')
				break;
		}
		if (f->user[0] != '\0' && strcmp(f->user, who->name) != 0) {
			pthread_rwlock_unlock(&state.lock);
			*rc = reply_error(conn, 403,
			    "a user sees only their own usage and their "
			    "groups'");
			return 0;
		}
		if (f->group_id != 0 &&
		    !ledger_is_member(&ledger, who->name, f->group_id)) {
			pthread_rwlock_unlock(&state.lock);
			*rc = reply_error(conn, 403,
			    "%s is not a member of group '%s'", who->name,
			    group);
			return 0;
		}
		gp_strlcpy(f->user, who->name, sizeof(f->user));
		break;
	case GP_ROLE_PROVIDER:
		if (f->provider[0] != '\0' &&
		    strcmp(f->provider, who->name) != 0) {
			pthread_rwlock_unlock(&state.lock);
			*rc = reply_error(conn, 403,
			    "a provider sees only what it was paid");
			return 0;
		}
		gp_strlcpy(f->provider, who->name, sizeof(f->provider));
		break;
	case GP_ROLE_METRICS:
		/* Refused before any route (api.c); never reached. */
		pthread_rwlock_unlock(&state.lock);
		*rc = reply_error(conn, 403,
		    "a metrics token may only read /metrics");
		return 0;
	}
	pthread_rwlock_unlock(&state.lock);
	return 1;
}

static enum MHD_Result
handle_report(struct MHD_Connection *conn, struct request *req,
    int postings)
{
	struct ledger_filter f;
	enum MHD_Result rc;
	char err[256];
	json_t *o;

	if (!read_filter(conn, req, &f, &rc))
		return rc;
	o = postings ? ledger_postings_json(&ledger, &f, err, sizeof(err))
		     : ledger_usage_json(&ledger, &f, err, sizeof(err));
	if (o == NULL) {
		gp_error("ledger query failed error=\"%s\"", err);
		return reply_error(conn, 500, "cannot read the ledger");
	}
	return reply_json(conn, 200, o);
}

enum MHD_Result
acct_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	char name[GP_NAME_MAX + 1];
	const char *rest;
	size_t n;

	if (!get && !post)
		return reply_error(conn, 405, "method %.16s not allowed",
		    method);
	if (strcmp(url, "/v1/groups") == 0)
		return get ? handle_lists(conn, req, "groups")
			   : queue_change(conn, req, ACCT_BODY_GROUP_CREATE,
				 NULL);
	if (strcmp(url, "/v1/prices") == 0)
		return get ? handle_lists(conn, req, "prices")
			   : queue_change(conn, req, ACCT_BODY_PRICE, NULL);
	if (strcmp(url, "/v1/budgets") == 0)
		return get ? handle_lists(conn, req, "budgets")
			   : queue_change(conn, req, ACCT_BODY_BUDGET, NULL);
	if (strcmp(url, "/v1/usage") == 0 && get)
		return handle_report(conn, req, 0);
	if (strcmp(url, "/v1/ledger") == 0 && get)
		return handle_report(conn, req, 1);
	/* /v1/groups/{name} and /v1/groups/{name}/members */
	if (strncmp(url, "/v1/groups/", 11) == 0 && post) {
		rest = url + 11;
		n = strcspn(rest, "/");
		if (n == 0 || n > GP_NAME_MAX)
			return reply_error(conn, 404, "no such group");
		memcpy(name, rest, n);
		name[n] = '\0';
		if (!gp_name_valid(name))
			return reply_error(conn, 404, "no such group");
		if (rest[n] == '\0')
			return queue_change(conn, req, ACCT_BODY_GROUP_SET,
			    name);
		if (strcmp(rest + n, "/members") == 0)
			return queue_change(conn, req, ACCT_BODY_MEMBERS,
			    name);
	}
	return reply_error(conn, 404, "no such endpoint: %s %.100s", method,
	    url);
}

/* Groups, prices, budgets, usage and the ledger. */
const struct api_route acct_routes[] = {
    {"/v1/groups/**", API_ANY, 0, NULL, 0, 0, acct_handle, NULL},
    {"/v1/prices/**", API_ANY, 0, NULL, 0, 0, acct_handle, NULL},
    {"/v1/budgets/**", API_ANY, 0, NULL, 0, 0, acct_handle, NULL},
    {"/v1/usage/**", API_ANY, 0, NULL, 0, 0, acct_handle, NULL},
    {"/v1/ledger/**", API_ANY, 0, NULL, 0, 0, acct_handle, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
