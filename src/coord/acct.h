/*
 * acct.h: the accounting's pure logic (docs/accounting.md): the price
 * table, the meter that turns an attempt's run time into postings, the
 * shape of a posting (two entries that sum to zero), decayed usage for
 * fair share, budget periods, and the decoders of the accounting request
 * bodies. No I/O, no clock, no globals: unit-tested in
 * tests/unit/test_acct.c, the decoders fuzzed in
 * tests/fuzz/fuzz_acct_body.c. Amounts are integers of micro-credits
 * (credits.h); only decayed usage, which is an estimate for fair share,
 * is floating point.
 */
#ifndef GP_ACCT_H
#define GP_ACCT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "credits.h"
#include "jobspec.h"
#include "token.h"

/* A whole GPU, in thousandths: a job on half a GPU has a share of 500. */
#define ACCT_SHARE_WHOLE 1000
#define ACCT_PRICES_MAX	 256
#define ACCT_WEIGHT_MAX	 1000000
/* The price class that applies to GPUs no other class matches. */
#define ACCT_DEFAULT_CLASS "default"
/* The group of tokens and users that were given none. */
#define ACCT_DEFAULT_GROUP "default"

/* ---- prices ---- */

struct acct_price {
	char cls[GP_NAME_MAX + 1]; /* matched in the GPU model */
	int64_t micro;		   /* micro-credits per GPU-hour */
};

/*
 * The price of a GPU of model, in micro-credits per GPU-hour: the longest
 * class that is a case-insensitive substring of the model (on a tie, the
 * first in the table), else the "default" class, else 0 (free).
 */
int64_t acct_price_of(const struct acct_price *table, size_t n,
    const char *model);

/*
 * Parses a price file: one "CLASS CREDITS" per line (credits per
 * GPU-hour, "2.5"), blank lines and "#" comments ignored, a class at most
 * once. OUT: out[0..*n) (at most max rows), err ("line 3: ..."). Returns
 * 0 or GP_EINVAL.
 */
int acct_prices_parse(const char *text, size_t len, struct acct_price *out,
    size_t max, size_t *n, char *err, size_t errlen);

/* ---- the meter: what an attempt has been charged ---- */

struct acct_meter {
	int64_t from_ms;   /* billing started (the start), 0: not yet */
	int64_t rate;	   /* sum over its GPUs of price * share */
	int64_t share;	   /* sum of its GPU shares (1000 a whole GPU) */
	int64_t billed_ms; /* time billed so far, from from_ms */
	int64_t amount;	   /* micro-credits posted so far */
	int64_t gpu_ms;	   /* share-weighted GPU-milliseconds posted */
	int seq;	   /* postings made so far */
};

/* What one posting covers: the period since the previous one. */
struct acct_delta {
	int seq;
	int64_t from_ms, to_ms; /* wall clock */
	int64_t amount;		/* micro-credits */
	int64_t gpu_ms;
};

/*
 * The cost of rate (price * share, as in the meter) for ms, rounded down:
 * rate * ms / (1000 * 3600000). Saturates at INT64_MAX.
 */
int64_t acct_cost(int64_t rate, int64_t ms);
/* Share-weighted GPU-milliseconds of share for ms, rounded down. */
int64_t acct_gpu_ms(int64_t share, int64_t ms);

/*
 * Starts billing at from_ms at rate for share. The meter is zeroed first.
 */
void acct_meter_start(struct acct_meter *m, int64_t from_ms, int64_t rate,
    int64_t share);

/*
 * Brings the meter to now_ms. Amounts are computed from the start each
 * time (cost of the whole time billed, less what was posted), so however
 * the time is cut into postings their sum is the cost of the whole: no
 * rounding drift, nothing counted twice. Returns 1 and fills *d (and
 * advances the meter) when there is something to post, 0 (meter
 * unchanged) when billing has not started, the clock went back, or
 * nothing accrued since the last posting.
 */
int acct_meter_advance(struct acct_meter *m, int64_t now_ms,
    struct acct_delta *d);

/* ---- postings ---- */

/*
 * One posting: the user pays, the provider is paid. Its two entries are
 * -amount on the user's account (tagged with the job's group) and +amount
 * on the provider's (tagged with the node's group): every posting sums to
 * zero, so the whole ledger does.
 */
struct acct_posting {
	int64_t job_id;
	int attempt;
	int part; /* a gang's part (each billed on its own); 0 */
	int seq;
	int final; /* the attempt's last posting */
	int64_t at_ms, from_ms, to_ms;
	int64_t node_id;
	int64_t amount; /* micro-credits */
	int64_t gpu_ms;
	char user[GP_NAME_MAX + 1];
	int64_t user_group;
	char provider[GP_NAME_MAX + 1];
	int64_t provider_group;
};

/* Fills p from the attempt's identity and a delta. */
void acct_posting_fill(struct acct_posting *p, int64_t job_id, int attempt,
    const struct acct_delta *d, int final, int64_t at_ms, int64_t node_id,
    const char *user, int64_t user_group, const char *provider,
    int64_t provider_group);

/* ---- decayed usage (fair share) ---- */

struct acct_decay {
	double gpu_s;	 /* share-weighted GPU-seconds */
	double credits;	 /* micro-credits */
	int64_t as_of_ms; /* when the values above held */
};

/*
 * Adds usage at now_ms: the old values decay by 2^(-(now - as_of) /
 * half_life) first (no decay when half_life_ms is 0 or now is earlier).
 */
void acct_decay_add(struct acct_decay *d, int64_t now_ms,
    int64_t half_life_ms, double gpu_s, double credits);
/* The values of d decayed to now_ms. OUT: *out. */
void acct_decay_at(const struct acct_decay *d, int64_t now_ms,
    int64_t half_life_ms, struct acct_decay *out);

/* ---- budgets ---- */

enum acct_period {
	ACCT_PERIOD_TOTAL, /* never resets */
	ACCT_PERIOD_DAY,
	ACCT_PERIOD_WEEK, /* from Monday */
	ACCT_PERIOD_MONTH,
};

int acct_period_parse(const char *text, enum acct_period *out);
const char *acct_period_name(enum acct_period p);
/* Start of the period holding now_ms (UTC); 0 for TOTAL. */
int64_t acct_period_start(enum acct_period p, int64_t now_ms);
/* Start of the next period (UTC); INT64_MAX for TOTAL. */
int64_t acct_period_next(enum acct_period p, int64_t now_ms);

/*
 * The most a job may cost: gpus whole GPUs at max_price (micro-credits
 * per GPU-hour) for seconds.
 */
int64_t acct_estimate(int gpus, int64_t max_price, int64_t seconds);

/* ---- request bodies (untrusted: fuzzed) ---- */

enum acct_body {
	ACCT_BODY_GROUP_CREATE, /* {"name", "weight"?} */
	ACCT_BODY_GROUP_SET,	/* {"weight"} */
	ACCT_BODY_MEMBERS,	/* {"op": add|remove|move, "user"|"provider"} */
	ACCT_BODY_PRICE,	/* {"class", "price_micro"} | {"class", "remove"} */
	ACCT_BODY_BUDGET,	/* {"user"|"group", "amount_micro", "period"?}
				   | {"user"|"group", "remove": true} */
	ACCT_BODY_TOKEN,	/* {"role", "name", "group"?} */
	ACCT_BODY_COUNT,
};

enum acct_member_op { ACCT_MEMBER_ADD, ACCT_MEMBER_REMOVE, ACCT_MEMBER_MOVE };

struct acct_request {
	enum acct_body kind;
	char name[GP_NAME_MAX + 1];  /* group, price class or token name */
	char user[GP_NAME_MAX + 1];  /* "" when not given */
	char group[GP_NAME_MAX + 1]; /* "" when not given */
	char provider[GP_NAME_MAX + 1];
	int64_t weight; /* 0 when not given */
	int64_t amount; /* price or budget, micro-credits */
	enum acct_period period;
	enum acct_member_op member_op;
	enum gp_role role;
	int remove;
};

/*
 * Decodes and checks a request body of the given kind. OUT: *out (only
 * meaningful on success), err naming the field at fault. Returns 0 or
 * GP_EINVAL.
 */
int acct_decode(enum acct_body kind, json_t *body, struct acct_request *out,
    char *err, size_t errlen);

#endif
