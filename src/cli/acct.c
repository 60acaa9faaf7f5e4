/*
 * acct.c: the accounting commands (docs/accounting.md): `group`,
 * `price`, `budget` (admin changes, and listings), `usage` and `ledger`,
 * and the pure helpers behind them (times like "7d", GPU time, tables).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "credits.h"
#include "gp.h"
#include "util.h"

/* ---- pure helpers ---- */

int
gp_cli_parse_since(const char *text, int64_t now_ms, int64_t *ms)
{
	int y, mo, d, h = 0, mi = 0, s = 0, frac = 0, n = 0;
	char buf[40];
	int64_t secs;

	if (text == NULL || text[0] == '\0')
		return GP_EINVAL;
	if (strlen(text) == 10 &&
	    sscanf(text, "%4d-%2d-%2d%n", &y, &mo, &d, &n) == 3 && n == 10) {
		snprintf(buf, sizeof(buf), "%04d-%02d-%02dT00:00:00.000Z", y,
		    mo, d);
		return gp_parse_time(buf, ms);
	}
	if (strchr(text, 'T') != NULL) {
		if (gp_parse_time(text, ms) == 0)
			return 0;
		if (sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h,
			&mi, &s, &n) == 6 &&
		    text[n] == '\0') {
			snprintf(buf, sizeof(buf),
			    "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", y, mo, d, h,
			    mi, s, frac);
			return gp_parse_time(buf, ms);
		}
		return GP_EINVAL;
	}
	if (gp_parse_duration(text, &secs) != 0 || secs > now_ms / 1000)
		return GP_EINVAL;
	*ms = now_ms - secs * 1000;
	return 0;
}

void
gp_cli_format_gpu_time(int64_t gpu_ms, char *out, size_t len)
{
	int64_t s = gpu_ms > 0 ? gpu_ms / 1000 : 0;

	snprintf(out, len, "%lld:%02lld:%02lld", (long long)(s / 3600),
	    (long long)(s / 60 % 60), (long long)(s % 60));
}

static int64_t
int_field(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

static const char *
str_field(json_t *o, const char *key)
{
	const char *s = gp_cli_json_str(o, key);

	return s != NULL ? s : "-";
}

/* Renders t into out and frees it. */
static int
finish_table(struct gp_table *t, int rc, struct gp_buf *out)
{
	if (rc == 0)
		rc = gp_table_render(t, out);
	gp_table_fini(t);
	return rc;
}

/*
 * usage's table of users or of providers, then a blank line: header's
 * NAME, GROUP, GPU-TIME and CREDITS of each entry of list (its name at
 * name_key, its credits at credits_key).
 */
static int
render_party_table(json_t *list, const char *const *header,
    const char *name_key, const char *credits_key, struct gp_buf *out)
{
	char c1[40], c2[40];
	struct gp_table t;
	const char *row[4];
	json_t *v;
	size_t i;
	int rc;

	if ((rc = gp_table_init(&t, 4, header)) != 0)
		return rc;
	t.right[2] = t.right[3] = 1;
	json_array_foreach(list, i, v)
	{
		gp_cli_format_gpu_time(int_field(v, "gpu_ms"), c1, sizeof(c1));
		gp_credits_format(int_field(v, credits_key), c2, sizeof(c2));
		row[0] = str_field(v, name_key);
		row[1] = str_field(v, "group");
		row[2] = c1;
		row[3] = c2;
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if ((rc = finish_table(&t, rc, out)) != 0)
		return rc;
	gp_buf_printf(out, "\n");
	return 0;
}

int
gp_cli_render_usage(json_t *reply, struct gp_buf *out)
{
	static const char *const uh[] = {"USER", "GROUP", "GPU-TIME",
	    "CREDITS"};
	static const char *const ph[] = {"PROVIDER", "GROUP", "GPU-TIME",
	    "CREDITS"};
	static const char *const gh[] = {"GROUP", "USED", "SPENT", "LENT",
	    "EARNED", "NET"};
	json_t *users = json_object_get(reply, "users");
	json_t *providers = json_object_get(reply, "providers");
	json_t *groups = json_object_get(reply, "groups");
	json_t *totals = json_object_get(reply, "totals"), *v;
	char c1[40], c2[40], c3[40], c4[40], c5[40], c6[40];
	struct gp_table t;
	const char *row[6];
	size_t i;
	int rc;

	if (!json_is_array(users) || !json_is_array(providers) ||
	    !json_is_array(groups) || !json_is_object(totals))
		return GP_EPROTO;
	if (int_field(totals, "postings") == 0) {
		gp_buf_printf(out, "no usage\n");
		return 0;
	}
	if ((rc = render_party_table(users, uh, "user", "spent_micro",
	    out)) != 0 ||
	    (rc = render_party_table(providers, ph, "provider",
	    "earned_micro", out)) != 0)
		return rc;
	if ((rc = gp_table_init(&t, 6, gh)) != 0)
		return rc;
	for (i = 1; i < 6; i++)
		t.right[i] = 1;
	json_array_foreach(groups, i, v)
	{
		gp_cli_format_gpu_time(int_field(v, "used_gpu_ms"), c1,
		    sizeof(c1));
		gp_credits_format(int_field(v, "spent_micro"), c2, sizeof(c2));
		gp_cli_format_gpu_time(int_field(v, "lent_gpu_ms"), c3,
		    sizeof(c3));
		gp_credits_format(int_field(v, "earned_micro"), c4,
		    sizeof(c4));
		gp_credits_format(int_field(v, "net_micro"), c5, sizeof(c5));
		row[0] = str_field(v, "group");
		row[1] = c1;
		row[2] = c2;
		row[3] = c3;
		row[4] = c4;
		row[5] = c5;
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if ((rc = finish_table(&t, rc, out)) != 0)
		return rc;
	gp_credits_format(int_field(totals, "debits_micro"), c1, sizeof(c1));
	gp_credits_format(int_field(totals, "credits_micro"), c2, sizeof(c2));
	gp_credits_format(int_field(totals, "balance_micro"), c6, sizeof(c6));
	gp_buf_printf(out,
	    "\n%lld postings: debits %s, credits %s, balance %s\n",
	    (long long)int_field(totals, "postings"), c1, c2, c6);
	return 0;
}

int
gp_cli_render_ledger(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"POSTING", "JOB", "ATTEMPT",
	    "SEQ", "KIND", "AT", "ACCOUNT", "GROUP", "GPU-TIME", "CREDITS"};
	json_t *postings = json_object_get(reply, "postings"), *p, *e;
	char id[24], job[24], att[24], seq[24], acc[140], gt[40], amt[40];
	struct gp_table t;
	const char *row[10];
	size_t i, k;
	int rc;

	if (!json_is_array(postings))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 10, header)) != 0)
		return rc;
	t.right[0] = t.right[1] = t.right[2] = t.right[3] = 1;
	t.right[8] = t.right[9] = 1;
	json_array_foreach(postings, i, p)
	{
		snprintf(id, sizeof(id), "%lld", (long long)int_field(p, "id"));
		snprintf(job, sizeof(job), "%lld",
		    (long long)int_field(p, "job_id"));
		snprintf(att, sizeof(att), "%lld",
		    (long long)int_field(p, "attempt"));
		snprintf(seq, sizeof(seq), "%lld",
		    (long long)int_field(p, "seq"));
		gp_cli_format_gpu_time(int_field(p, "gpu_ms"), gt, sizeof(gt));
		json_array_foreach(json_object_get(p, "entries"), k, e)
		{
			snprintf(acc, sizeof(acc), "%s:%s",
			    str_field(e, "account"), str_field(e, "name"));
			gp_credits_format(int_field(e, "amount_micro"), amt,
			    sizeof(amt));
			row[0] = id;
			row[1] = job;
			row[2] = att;
			row[3] = seq;
			row[4] = str_field(p, "kind");
			row[5] = str_field(p, "at");
			row[6] = acc;
			row[7] = str_field(e, "group");
			row[8] = gt;
			row[9] = amt;
			if ((rc = gp_table_add(&t, row)) != 0)
				break;
		}
		if (rc != 0)
			break;
	}
	return finish_table(&t, rc, out);
}

/* Joins an array of strings with commas ("-" when empty). */
static void
join(json_t *arr, char *out, size_t len)
{
	json_t *v;
	size_t i, n = 0;

	out[0] = '\0';
	json_array_foreach(arr, i, v)
	{
		if (json_string_value(v) == NULL || n + 2 >= len)
			continue;
		n += (size_t)snprintf(out + n, len - n, "%s%s", i ? "," : "",
		    json_string_value(v));
		if (n >= len)
			n = len - 1;
	}
	if (out[0] == '\0')
		snprintf(out, len, "-");
}

int
gp_cli_render_groups(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"GROUP", "WEIGHT", "MEMBERS",
	    "PROVIDERS", "NODES", "DECAYED-GPU-TIME"};
	json_t *groups = json_object_get(reply, "groups"), *g;
	char weight[24], members[512], providers[512], nodes[512], gt[40];
	struct gp_table t;
	const char *row[6];
	size_t i;
	int rc;

	if (!json_is_array(groups))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 6, header)) != 0)
		return rc;
	t.right[1] = t.right[5] = 1;
	json_array_foreach(groups, i, g)
	{
		double s = json_real_value(json_object_get(
		    json_object_get(g, "decayed_usage"), "gpu_s"));
		snprintf(weight, sizeof(weight), "%lld",
		    (long long)int_field(g, "weight"));
		join(json_object_get(g, "members"), members, sizeof(members));
		join(json_object_get(g, "providers"), providers,
		    sizeof(providers));
		join(json_object_get(g, "nodes"), nodes, sizeof(nodes));
		gp_cli_format_gpu_time((int64_t)(s * 1000.0), gt, sizeof(gt));
		row[0] = str_field(g, "name");
		row[1] = weight;
		row[2] = members;
		row[3] = providers;
		row[4] = nodes;
		row[5] = gt;
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	return finish_table(&t, rc, out);
}

int
gp_cli_render_prices(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"CLASS", "CREDITS/GPU-HOUR"};
	json_t *prices = json_object_get(reply, "prices"), *p;
	struct gp_table t;
	const char *row[2];
	char price[40];
	size_t i;
	int rc;

	if (!json_is_array(prices))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 2, header)) != 0)
		return rc;
	t.right[1] = 1;
	json_array_foreach(prices, i, p)
	{
		gp_credits_format(int_field(p, "price_micro"), price,
		    sizeof(price));
		row[0] = str_field(p, "class");
		row[1] = price;
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	return finish_table(&t, rc, out);
}

int
gp_cli_render_budgets(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"KIND", "NAME", "BUDGET", "SPENT",
	    "LEFT", "PERIOD", "RESETS"};
	json_t *budgets = json_object_get(reply, "budgets"), *b;
	char amount[40], spent[40], left[40];
	struct gp_table t;
	const char *row[7];
	size_t i;
	int rc;

	if (!json_is_array(budgets))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 7, header)) != 0)
		return rc;
	t.right[2] = t.right[3] = t.right[4] = 1;
	json_array_foreach(budgets, i, b)
	{
		gp_credits_format(int_field(b, "amount_micro"), amount,
		    sizeof(amount));
		gp_credits_format(int_field(b, "spent_micro"), spent,
		    sizeof(spent));
		gp_credits_format(int_field(b, "left_micro"), left,
		    sizeof(left));
		row[0] = str_field(b, "kind");
		row[1] = str_field(b, "name");
		row[2] = amount;
		row[3] = spent;
		row[4] = left;
		row[5] = str_field(b, "period");
		row[6] = gp_cli_json_str(b, "period_end");
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	return finish_table(&t, rc, out);
}

/* ---- calls ---- */

/*
 * One call; prints the reply with render (or as JSON with --json, or
 * nothing when render is NULL). Frees body.
 */
static int
call(const struct gp_cli_args *args, int admin, const char *method,
    const char *path, json_t *body,
    int (*render)(json_t *, struct gp_buf *))
{
	struct gp_cli_conn conn;
	struct gp_buf out = {0};
	json_t *reply;
	int rc;

	rc = gp_cli_connect_token_file(&conn,
	    gp_cli_value(args, "token-file"), admin);
	if (rc != 0) {
		json_decref(body);
		return rc;
	}
	rc = gp_cli_call(&conn, method, path, body, 0, &reply, NULL);
	json_decref(body);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	if (gp_cli_flag(args, "json")) {
		gp_cli_print_json(reply);
	} else if (render != NULL) {
		rc = render(reply, &out);
		if (rc != 0) {
			gp_cli_error("unexpected answer from the coordinator: "
				     "%s",
			    gp_strerror(rc));
			rc = GP_CLI_EXIT_FAIL;
		} else if (out.len > 0) {
			fwrite(out.data, 1, out.len, stdout);
		}
	}
	gp_buf_free(&out);
	json_decref(reply);
	return rc;
}

static int
check_name(const struct gp_cli_args *args, const char *what,
    const char *name)
{
	if (name != NULL && !gp_name_valid(name))
		return gp_cli_usage_error(args,
		    "%s: '%s' is not 1 to %d of A-Z a-z 0-9 . _ -", what, name,
		    GP_NAME_MAX);
	return 0;
}

/* ---- group ---- */

static int
parse_weight(const struct gp_cli_args *args, int64_t *weight)
{
	const char *v = gp_cli_value(args, "weight");

	if (v != NULL && gp_parse_int(v, 1, 1000000, weight) != 0)
		return gp_cli_usage_error(args,
		    "--weight: a whole number from 1 to 1000000");
	return 0;
}

int
gp_cli_cmd_group_create(const struct gp_cli_args *args)
{
	int64_t weight = 1;
	int rc;

	if ((rc = check_name(args, "group", args->operands[0])) != 0 ||
	    (rc = parse_weight(args, &weight)) != 0)
		return rc;
	rc = call(args, 1, "POST", "/v1/groups",
	    json_pack("{s:s,s:I}", "name", args->operands[0], "weight",
		(json_int_t)weight),
	    NULL);
	if (rc == 0)
		printf("created group %s\n", args->operands[0]);
	return rc;
}

int
gp_cli_cmd_group_ls(const struct gp_cli_args *args)
{
	return call(args, 0, "GET", "/v1/groups", NULL, gp_cli_render_groups);
}

int
gp_cli_cmd_group_set(const struct gp_cli_args *args)
{
	char path[128];
	int64_t weight = 0;
	int rc;

	if ((rc = check_name(args, "group", args->operands[0])) != 0 ||
	    (rc = parse_weight(args, &weight)) != 0)
		return rc;
	if (weight == 0)
		return gp_cli_usage_error(args, "group set: --weight is "
						"required");
	snprintf(path, sizeof(path), "/v1/groups/%s", args->operands[0]);
	rc = call(args, 1, "POST", path,
	    json_pack("{s:I}", "weight", (json_int_t)weight), NULL);
	if (rc == 0)
		printf("group %s: weight %lld\n", args->operands[0],
		    (long long)weight);
	return rc;
}

/* add, remove: each USER operand in turn. */
static int
members(const struct gp_cli_args *args, const char *op)
{
	char path[128];
	int i, rc;

	for (i = 0; i < args->noperands; i++)
		if ((rc = check_name(args, i ? "user" : "group",
			 args->operands[i])) != 0)
			return rc;
	snprintf(path, sizeof(path), "/v1/groups/%s/members",
	    args->operands[0]);
	for (i = 1; i < args->noperands; i++) {
		rc = call(args, 1, "POST", path,
		    json_pack("{s:s,s:s}", "op", op, "user",
			args->operands[i]),
		    NULL);
		if (rc != 0)
			return rc;
		printf("%s %s %s\n", op[0] == 'a' ? "added" : "removed",
		    args->operands[i], args->operands[0]);
	}
	return 0;
}

int
gp_cli_cmd_group_add(const struct gp_cli_args *args)
{
	return members(args, "add");
}

int
gp_cli_cmd_group_remove(const struct gp_cli_args *args)
{
	return members(args, "remove");
}

int
gp_cli_cmd_group_move(const struct gp_cli_args *args)
{
	const char *user = gp_cli_value(args, "user");
	const char *provider = gp_cli_value(args, "provider");
	char path[128];
	int rc;

	if ((user == NULL) == (provider == NULL))
		return gp_cli_usage_error(args,
		    "group move: give one of --user or --provider");
	if ((rc = check_name(args, "group", args->operands[0])) != 0 ||
	    (rc = check_name(args, "--user", user)) != 0 ||
	    (rc = check_name(args, "--provider", provider)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/v1/groups/%s/members",
	    args->operands[0]);
	rc = call(args, 1, "POST", path,
	    json_pack("{s:s,s:s}", "op", "move", user ? "user" : "provider",
		user ? user : provider),
	    NULL);
	if (rc == 0)
		printf("moved %s %s to %s\n", user ? "user" : "provider",
		    user ? user : provider, args->operands[0]);
	return rc;
}

/* ---- price ---- */

int
gp_cli_cmd_price_set(const struct gp_cli_args *args)
{
	int64_t micro;
	int rc;

	if ((rc = check_name(args, "class", args->operands[0])) != 0)
		return rc;
	if (gp_credits_parse(args->operands[1], GP_PRICE_MICRO_MAX, &micro) !=
	    0)
		return gp_cli_usage_error(args,
		    "price set: '%s' is not a price in credits per GPU-hour "
		    "(like 2.5, at most 6 decimals)",
		    args->operands[1]);
	rc = call(args, 1, "POST", "/v1/prices",
	    json_pack("{s:s,s:I}", "class", args->operands[0], "price_micro",
		(json_int_t)micro),
	    gp_cli_render_prices);
	return rc;
}

int
gp_cli_cmd_price_rm(const struct gp_cli_args *args)
{
	int rc;

	if ((rc = check_name(args, "class", args->operands[0])) != 0)
		return rc;
	return call(args, 1, "POST", "/v1/prices",
	    json_pack("{s:s,s:b}", "class", args->operands[0], "remove", 1),
	    gp_cli_render_prices);
}

int
gp_cli_cmd_price_ls(const struct gp_cli_args *args)
{
	return call(args, 0, "GET", "/v1/prices", NULL, gp_cli_render_prices);
}

/* ---- budget ---- */

/* The body's "user" or "group" from --user/--group (exactly one). */
static json_t *
budget_owner(const struct gp_cli_args *args)
{
	const char *user = gp_cli_value(args, "user");
	const char *group = gp_cli_value(args, "group");

	if ((user == NULL) == (group == NULL)) {
		gp_cli_usage_error(args, "%s: give one of --user or --group",
		    args->cmd->name);
		return NULL;
	}
	if (check_name(args, user ? "--user" : "--group", user ? user : group))
		return NULL;
	return json_pack("{s:s}", user ? "user" : "group",
	    user ? user : group);
}

int
gp_cli_cmd_budget_set(const struct gp_cli_args *args)
{
	const char *period = gp_cli_value(args, "period");
	int64_t micro;
	json_t *body;
	int rc;

	if (gp_credits_parse(args->operands[0], GP_AMOUNT_MICRO_MAX, &micro) !=
	    0)
		return gp_cli_usage_error(args,
		    "budget set: '%s' is not an amount of credits (like 100 "
		    "or 12.5)",
		    args->operands[0]);
	if (period != NULL && strcmp(period, "total") != 0 &&
	    strcmp(period, "day") != 0 && strcmp(period, "week") != 0 &&
	    strcmp(period, "month") != 0)
		return gp_cli_usage_error(args,
		    "--period: total, day, week or month");
	if ((body = budget_owner(args)) == NULL)
		return GP_CLI_EXIT_USAGE;
	json_object_set_new(body, "amount_micro", json_integer(micro));
	if (period != NULL)
		json_object_set_new(body, "period", json_string(period));
	rc = call(args, 1, "POST", "/v1/budgets", body, NULL);
	if (rc == 0)
		printf("budget of %s %s: %s credits per %s\n",
		    gp_cli_value(args, "user") ? "user" : "group",
		    gp_cli_value(args, "user") ? gp_cli_value(args, "user")
					       : gp_cli_value(args, "group"),
		    args->operands[0], period != NULL ? period : "month");
	return rc;
}

int
gp_cli_cmd_budget_rm(const struct gp_cli_args *args)
{
	json_t *body = budget_owner(args);

	if (body == NULL)
		return GP_CLI_EXIT_USAGE;
	json_object_set_new(body, "remove", json_true());
	return call(args, 1, "POST", "/v1/budgets", body, NULL);
}

int
gp_cli_cmd_budget_ls(const struct gp_cli_args *args)
{
	return call(args, 0, "GET", "/v1/budgets", NULL,
	    gp_cli_render_budgets);
}

/* ---- usage, ledger ---- */

/* Appends "&key=value" (or "?" first) to a query in buf. */
static void
add_arg(struct gp_buf *buf, const char *key, const char *value)
{
	gp_buf_printf(buf, "%s%s=%s", strchr(buf->data, '?') ? "&" : "?", key,
	    value);
}

/* The query of usage and ledger from their options; 0 or a usage error. */
static int
report_path(const struct gp_cli_args *args, const char *base,
    struct gp_buf *path)
{
	static const char *const names[] = {"user", "group", "provider",
	    NULL};
	static const char *const times[] = {"since", "until", NULL};
	char text[40];
	const char *v;
	int64_t ms, n;
	int i, rc;

	gp_buf_printf(path, "%s", base);
	for (i = 0; names[i] != NULL; i++) {
		v = gp_cli_value(args, names[i]);
		if (v == NULL)
			continue;
		if ((rc = check_name(args, names[i], v)) != 0)
			return rc;
		add_arg(path, names[i], v);
	}
	for (i = 0; times[i] != NULL; i++) {
		v = gp_cli_value(args, times[i]);
		if (v == NULL)
			continue;
		if (gp_cli_parse_since(v, gp_now_ms(), &ms) != 0)
			return gp_cli_usage_error(args,
			    "--%s: '%s' is not a time (try 7d, 12h, "
			    "2026-01-31 or 2026-01-31T12:00:00Z)",
			    times[i], v);
		gp_format_time(ms, text, sizeof(text));
		add_arg(path, times[i], text);
	}
	if ((v = gp_cli_value(args, "job")) != NULL) {
		if (gp_cli_parse_job_id(v, &n) != 0)
			return gp_cli_usage_error(args, "--job: a job id");
		add_arg(path, "job", v);
	}
	if ((v = gp_cli_value(args, "limit")) != NULL) {
		if (gp_parse_int(v, 1, 10000, &n) != 0)
			return gp_cli_usage_error(args,
			    "--limit: a whole number from 1 to 10000");
		add_arg(path, "limit", v);
	}
	return 0;
}

static int
report(const struct gp_cli_args *args, const char *base,
    int (*render)(json_t *, struct gp_buf *))
{
	struct gp_buf path = {0};
	int rc;

	if ((rc = report_path(args, base, &path)) == 0)
		rc = call(args, 0, "GET", path.data, NULL, render);
	gp_buf_free(&path);
	return rc;
}

int
gp_cli_cmd_usage(const struct gp_cli_args *args)
{
	return report(args, "/v1/usage", gp_cli_render_usage);
}

int
gp_cli_cmd_ledger(const struct gp_cli_args *args)
{
	return report(args, "/v1/ledger", gp_cli_render_ledger);
}
