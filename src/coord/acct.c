/*
 * acct.c: the accounting's pure logic (see acct.h): prices, the
 * per-attempt meter, postings, decayed usage, budget periods and the
 * request decoders. Everything here is arithmetic on its arguments.
 */
#include "acct.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gp.h"
#include "util.h"

__extension__ typedef __int128 wide;

#define MS_PER_HOUR 3600000LL

/* ---- prices ---- */

int64_t
acct_price_of(const struct acct_price *table, size_t n, const char *model)
{
	const struct acct_price *best = NULL, *fallback = NULL;
	size_t i, len, best_len = 0;

	for (i = 0; i < n; i++) {
		if (strcmp(table[i].cls, ACCT_DEFAULT_CLASS) == 0) {
			if (fallback == NULL)
				fallback = &table[i];
			continue;
		}
		len = strlen(table[i].cls);
		if (model != NULL && len > best_len &&
		    strcasestr(model, table[i].cls) != NULL) {
			best = &table[i];
			best_len = len;
		}
	}
	if (best != NULL)
		return best->micro;
	return fallback != NULL ? fallback->micro : 0;
}

int
acct_prices_parse(const char *text, size_t len, struct acct_price *out,
    size_t max, size_t *n, char *err, size_t errlen)
{
	size_t pos = 0, count = 0, i;
	int line = 0;

	while (pos < len) {
		char buf[256], *words[3], *save = NULL, *w;
		size_t end = pos, k = 0, linelen;
		int64_t micro;

		line++;
		while (end < len && text[end] != '\n')
			end++;
		if (end - pos >= sizeof(buf))
			return gp_fail(err, errlen, GP_EINVAL,
			    "line %d: longer than %zu "
			    "bytes",
			    line, sizeof(buf) - 1);
		linelen = end - pos;
		memcpy(buf, text + pos, linelen);
		buf[linelen] = '\0';
		pos = end + 1;
		if (strlen(buf) != linelen)
			return gp_fail(err, errlen, GP_EINVAL,
			    "line %d: contains NUL", line);
		if ((w = strchr(buf, '#')) != NULL)
			*w = '\0';
		for (w = strtok_r(buf, " \t\r", &save); w != NULL && k < 3;
		     w = strtok_r(NULL, " \t\r", &save))
			words[k++] = w;
		if (k == 0)
			continue;
		if (k != 2)
			return gp_fail(err, errlen, GP_EINVAL,
			    "line %d: expected CLASS CREDITS_PER_GPU_HOUR",
			    line);
		if (!gp_name_valid(words[0]))
			return gp_fail(err, errlen, GP_EINVAL,
			    "line %d: a class is 1 to %d of A-Z a-z 0-9 . _ -",
			    line, GP_NAME_MAX);
		if (gp_credits_parse(words[1], GP_PRICE_MICRO_MAX, &micro) != 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "line %d: '%.32s' is not a price (credits per "
			    "GPU-hour, like 2.5)",
			    line, words[1]);
		for (i = 0; i < count; i++)
			if (strcasecmp(out[i].cls, words[0]) == 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "line %d: class '%s' given twice", line,
				    words[0]);
		if (count == max)
			return gp_fail(err, errlen, GP_EINVAL,
			    "line %d: more than %zu classes", line, max);
		gp_strlcpy(out[count].cls, words[0], sizeof(out[count].cls));
		out[count].micro = micro;
		count++;
	}
	*n = count;
	return 0;
}

/* ---- the meter ---- */

static int64_t
saturate(wide v)
{
	if (v > (wide)INT64_MAX)
		return INT64_MAX;
	if (v < 0)
		return 0;
	return (int64_t)v;
}

int64_t
acct_cost(int64_t rate, int64_t ms)
{
	if (rate <= 0 || ms <= 0)
		return 0;
	return saturate((wide)rate * ms / ((wide)ACCT_SHARE_WHOLE *
	    MS_PER_HOUR));
}

int64_t
acct_gpu_ms(int64_t share, int64_t ms)
{
	if (share <= 0 || ms <= 0)
		return 0;
	return saturate((wide)share * ms / ACCT_SHARE_WHOLE);
}

void
acct_meter_start(struct acct_meter *m, int64_t from_ms, int64_t rate,
    int64_t share)
{
	memset(m, 0, sizeof(*m));
	m->from_ms = from_ms;
	m->rate = rate > 0 ? rate : 0;
	m->share = share > 0 ? share : 0;
}

int
acct_meter_advance(struct acct_meter *m, int64_t now_ms, struct acct_delta *d)
{
	int64_t elapsed, amount, gpu_ms;

	if (m->from_ms <= 0 || now_ms <= m->from_ms)
		return 0;
	elapsed = now_ms - m->from_ms;
	if (elapsed <= m->billed_ms)
		return 0;
	amount = acct_cost(m->rate, elapsed);
	gpu_ms = acct_gpu_ms(m->share, elapsed);
	if (amount <= m->amount && gpu_ms <= m->gpu_ms)
		return 0;
	d->seq = m->seq;
	d->from_ms = m->from_ms + m->billed_ms;
	d->to_ms = now_ms;
	d->amount = amount - m->amount;
	d->gpu_ms = gpu_ms - m->gpu_ms;
	m->billed_ms = elapsed;
	m->amount = amount;
	m->gpu_ms = gpu_ms;
	m->seq++;
	return 1;
}

void
acct_posting_fill(struct acct_posting *p, int64_t job_id, int attempt,
    const struct acct_delta *d, int final, int64_t at_ms, int64_t node_id,
    const char *user, int64_t user_group, const char *provider,
    int64_t provider_group)
{
	memset(p, 0, sizeof(*p));
	p->job_id = job_id;
	p->attempt = attempt;
	p->seq = d->seq;
	p->final = final;
	p->at_ms = at_ms;
	p->from_ms = d->from_ms;
	p->to_ms = d->to_ms;
	p->node_id = node_id;
	p->amount = d->amount;
	p->gpu_ms = d->gpu_ms;
	gp_strlcpy(p->user, user, sizeof(p->user));
	p->user_group = user_group;
	gp_strlcpy(p->provider, provider, sizeof(p->provider));
	p->provider_group = provider_group;
}

/* ---- decayed usage ---- */

void
acct_decay_at(const struct acct_decay *d, int64_t now_ms,
    int64_t half_life_ms, struct acct_decay *out)
{
	double f = 1.0;

	*out = *d;
	if (half_life_ms > 0 && now_ms > d->as_of_ms) {
		f = exp2(-(double)(now_ms - d->as_of_ms) /
		    (double)half_life_ms);
		out->as_of_ms = now_ms;
	}
	out->gpu_s *= f;
	out->credits *= f;
}

void
acct_decay_add(struct acct_decay *d, int64_t now_ms, int64_t half_life_ms,
    double gpu_s, double credits)
{
	struct acct_decay now;

	acct_decay_at(d, now_ms, half_life_ms, &now);
	if (now.as_of_ms < now_ms)
		now.as_of_ms = now_ms;
	now.gpu_s += gpu_s;
	now.credits += credits;
	*d = now;
}

/* ---- budget periods ---- */

static const char *const period_names[] = {"total", "day", "week",
    "month"};

int
acct_period_parse(const char *text, enum acct_period *out)
{
	size_t i;

	for (i = 0; text != NULL && i < GP_ARRAY_LEN(period_names); i++)
		if (strcmp(text, period_names[i]) == 0) {
			*out = (enum acct_period)i;
			return 0;
		}
	return GP_EINVAL;
}

const char *
acct_period_name(enum acct_period p)
{
	return (unsigned)p < GP_ARRAY_LEN(period_names) ? period_names[p]
							: "?";
}

int64_t
acct_period_start(enum acct_period p, int64_t now_ms)
{
	time_t sec = (time_t)(now_ms / 1000);
	struct tm tm;

	if (p == ACCT_PERIOD_TOTAL || now_ms < 0)
		return 0;
	gmtime_r(&sec, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	if (p == ACCT_PERIOD_WEEK)
		tm.tm_mday -= (tm.tm_wday + 6) % 7;
	else if (p == ACCT_PERIOD_MONTH)
		tm.tm_mday = 1;
	return (int64_t)timegm(&tm) * 1000;
}

int64_t
acct_period_next(enum acct_period p, int64_t now_ms)
{
	time_t sec;
	struct tm tm;

	if (p == ACCT_PERIOD_TOTAL)
		return INT64_MAX;
	sec = (time_t)(acct_period_start(p, now_ms) / 1000);
	gmtime_r(&sec, &tm);
	if (p == ACCT_PERIOD_DAY)
		tm.tm_mday += 1;
	else if (p == ACCT_PERIOD_WEEK)
		tm.tm_mday += 7;
	else
		tm.tm_mon += 1;
	return (int64_t)timegm(&tm) * 1000;
}

int64_t
acct_estimate(int gpus, int64_t max_price, int64_t seconds)
{
	if (gpus <= 0 || max_price <= 0 || seconds <= 0)
		return 0;
	if (seconds > INT64_MAX / 1000)
		seconds = INT64_MAX / 1000;
	return acct_cost((int64_t)gpus * ACCT_SHARE_WHOLE * max_price,
	    seconds * 1000);
}

/* ---- request bodies ---- */

static int
only_fields(json_t *body, const char *const *allowed, char *err,
    size_t errlen)
{
	const char *key;
	json_t *v;
	size_t i;

	json_object_foreach(body, key, v)
	{
		int ok = 0;
		(void)v;
		for (i = 0; allowed[i] != NULL; i++)
			if (strcmp(key, allowed[i]) == 0)
				ok = 1;
		if (!ok)
			return gp_fail(err, errlen, GP_EINVAL,
			    "unknown field '%.64s'", key);
	}
	return 0;
}

/* A name field: absent (out = "") unless required, else 1..64 of the set. */
static int
get_name(json_t *body, const char *field, int required, char *out,
    size_t outlen, char *err, size_t errlen)
{
	json_t *v = json_object_get(body, field);

	out[0] = '\0';
	if (v == NULL && !required)
		return 0;
	if (!json_is_string(v) ||
	    strlen(json_string_value(v)) != json_string_length(v) ||
	    !gp_name_valid(json_string_value(v)))
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s: 1 to %d of A-Z a-z 0-9 . _ -", field, GP_NAME_MAX);
	gp_strlcpy(out, json_string_value(v), outlen);
	return 0;
}

static int
get_int(json_t *body, const char *field, int64_t min, int64_t max,
    int64_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(body, field);

	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s: an integer from %lld to %lld", field, (long long)min,
		    (long long)max);
	*out = json_integer_value(v);
	return 0;
}

/* {"remove": true} present? -1 when present but not true. */
static int
get_remove(json_t *body)
{
	json_t *v = json_object_get(body, "remove");

	if (v == NULL)
		return 0;
	return json_is_true(v) ? 1 : -1;
}

static int
decode_members(json_t *body, struct acct_request *out, char *err,
    size_t errlen)
{
	static const char *const fields[] = {"op", "user", "provider", NULL};
	const char *op;

	if (only_fields(body, fields, err, errlen) != 0)
		return GP_EINVAL;
	op = json_string_value(json_object_get(body, "op"));
	if (op != NULL && strcmp(op, "add") == 0)
		out->member_op = ACCT_MEMBER_ADD;
	else if (op != NULL && strcmp(op, "remove") == 0)
		out->member_op = ACCT_MEMBER_REMOVE;
	else if (op != NULL && strcmp(op, "move") == 0)
		out->member_op = ACCT_MEMBER_MOVE;
	else
		return gp_fail(err, errlen, GP_EINVAL,
		    "op: add, remove or move");
	if (get_name(body, "user", 0, out->user, sizeof(out->user), err,
		errlen) != 0 ||
	    get_name(body, "provider", 0, out->provider,
		sizeof(out->provider), err, errlen) != 0)
		return GP_EINVAL;
	if ((out->user[0] != '\0') == (out->provider[0] != '\0'))
		return gp_fail(err, errlen, GP_EINVAL,
		    "give one of user or provider");
	if (out->provider[0] != '\0' && out->member_op != ACCT_MEMBER_MOVE)
		return gp_fail(err, errlen, GP_EINVAL,
		    "provider: a provider is in one group: use op move");
	return 0;
}

static int
decode_price(json_t *body, struct acct_request *out, char *err,
    size_t errlen)
{
	static const char *const fields[] = {"class", "price_micro", "remove",
	    NULL};

	if (only_fields(body, fields, err, errlen) != 0 ||
	    get_name(body, "class", 1, out->name, sizeof(out->name), err,
		errlen) != 0)
		return GP_EINVAL;
	out->remove = get_remove(body);
	if (out->remove < 0)
		return gp_fail(err, errlen, GP_EINVAL,
		    "remove: true or absent");
	if (out->remove) {
		if (json_object_get(body, "price_micro") != NULL)
			return gp_fail(err, errlen, GP_EINVAL,
			    "price_micro: not with remove");
		return 0;
	}
	return get_int(body, "price_micro", 0, GP_PRICE_MICRO_MAX,
	    &out->amount, err, errlen);
}

static int
decode_budget(json_t *body, struct acct_request *out, char *err,
    size_t errlen)
{
	static const char *const fields[] = {"user", "group", "amount_micro",
	    "period", "remove", NULL};
	json_t *period;

	if (only_fields(body, fields, err, errlen) != 0 ||
	    get_name(body, "user", 0, out->user, sizeof(out->user), err,
		errlen) != 0 ||
	    get_name(body, "group", 0, out->group, sizeof(out->group), err,
		errlen) != 0)
		return GP_EINVAL;
	if ((out->user[0] != '\0') == (out->group[0] != '\0'))
		return gp_fail(err, errlen, GP_EINVAL,
		    "give one of user or group");
	out->remove = get_remove(body);
	if (out->remove < 0)
		return gp_fail(err, errlen, GP_EINVAL,
		    "remove: true or absent");
	period = json_object_get(body, "period");
	if (out->remove) {
		if (json_object_get(body, "amount_micro") != NULL ||
		    period != NULL)
			return gp_fail(err, errlen, GP_EINVAL,
			    "amount_micro and period: not with remove");
		return 0;
	}
	out->period = ACCT_PERIOD_MONTH;
	if (period != NULL &&
	    acct_period_parse(json_string_value(period), &out->period) != 0)
		return gp_fail(err, errlen, GP_EINVAL,
		    "period: total, day, week or month");
	return get_int(body, "amount_micro", 0, GP_AMOUNT_MICRO_MAX,
	    &out->amount, err, errlen);
}

int
acct_decode(enum acct_body kind, json_t *body, struct acct_request *out,
    char *err, size_t errlen)
{
	static const char *const group_fields[] = {"name", "weight", NULL};
	static const char *const set_fields[] = {"weight", NULL};
	static const char *const token_fields[] = {"role", "name", "group",
	    NULL};

	memset(out, 0, sizeof(*out));
	out->kind = kind;
	if (!json_is_object(body))
		return gp_fail(err, errlen, GP_EINVAL,
		    "body must be a JSON object");
	switch (kind) {
	case ACCT_BODY_GROUP_CREATE:
		if (only_fields(body, group_fields, err, errlen) != 0 ||
		    get_name(body, "name", 1, out->name, sizeof(out->name),
			err, errlen) != 0)
			return GP_EINVAL;
		out->weight = 1;
		if (json_object_get(body, "weight") != NULL)
			return get_int(body, "weight", 1, ACCT_WEIGHT_MAX,
			    &out->weight, err, errlen);
		return 0;
	case ACCT_BODY_GROUP_SET:
		if (only_fields(body, set_fields, err, errlen) != 0)
			return GP_EINVAL;
		return get_int(body, "weight", 1, ACCT_WEIGHT_MAX,
		    &out->weight, err, errlen);
	case ACCT_BODY_MEMBERS:
		return decode_members(body, out, err, errlen);
	case ACCT_BODY_PRICE:
		return decode_price(body, out, err, errlen);
	case ACCT_BODY_BUDGET:
		return decode_budget(body, out, err, errlen);
	case ACCT_BODY_TOKEN:
		if (only_fields(body, token_fields, err, errlen) != 0)
			return GP_EINVAL;
		if (gp_role_parse(json_string_value(json_object_get(body,
				      "role")),
			&out->role) != 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "role: must be user, provider, admin or metrics");
		if (get_name(body, "name", 1, out->name, sizeof(out->name),
			err, errlen) != 0 ||
		    get_name(body, "group", 0, out->group, sizeof(out->group),
			err, errlen) != 0)
			return GP_EINVAL;
		return 0;
	case ACCT_BODY_COUNT:
		break;
	}
	return gp_fail(err, errlen, GP_EINVAL, "unknown request kind");
}
