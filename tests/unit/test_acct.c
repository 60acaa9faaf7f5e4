/*
 * test_acct.c: the accounting's pure logic (src/coord/acct.c and
 * src/common/credits.c): exact credit amounts, the price table and its
 * file, the meter (however an attempt's time is cut into postings, they
 * add up to the cost of the whole: a property test over random cuts,
 * rates and shares), decayed usage maintained incrementally against a
 * brute-force sum, budget periods, estimates, and the request decoders.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/acct.h"
#include "credits.h"
#include "gp.h"
#include "unit.h"
#include "util.h"

#define HOUR_MS 3600000LL

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t
rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int64_t
rnd_range(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

TEST(credits_parse)
{
	int64_t m = -1;

	CHECK_EQ(gp_credits_parse("0", GP_PRICE_MICRO_MAX, &m), 0);
	CHECK_EQ(m, 0);
	CHECK_EQ(gp_credits_parse("2.5", GP_PRICE_MICRO_MAX, &m), 0);
	CHECK_EQ(m, 2500000);
	CHECK_EQ(gp_credits_parse("0.000001", GP_PRICE_MICRO_MAX, &m), 0);
	CHECK_EQ(m, 1);
	CHECK_EQ(gp_credits_parse(".5", GP_PRICE_MICRO_MAX, &m), 0);
	CHECK_EQ(m, 500000);
	CHECK_EQ(gp_credits_parse("12", GP_PRICE_MICRO_MAX, &m), 0);
	CHECK_EQ(m, 12000000);
	m = 42;
	CHECK_EQ(gp_credits_parse("1.0000001", GP_PRICE_MICRO_MAX, &m),
	    GP_EINVAL);
	CHECK_EQ(gp_credits_parse("", GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(gp_credits_parse(".", GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(gp_credits_parse("1.", GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(gp_credits_parse("-1", GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(gp_credits_parse("1e3", GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(gp_credits_parse(" 1", GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(gp_credits_parse("1 ", GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(gp_credits_parse(NULL, GP_PRICE_MICRO_MAX, &m), GP_EINVAL);
	CHECK_EQ(m, 42); /* written only on success */
	/* bounds */
	CHECK_EQ(gp_credits_parse("1000000", GP_PRICE_MICRO_MAX, &m), 0);
	CHECK_EQ(m, GP_PRICE_MICRO_MAX);
	CHECK_EQ(gp_credits_parse("1000000.000001", GP_PRICE_MICRO_MAX, &m),
	    GP_EINVAL);
	CHECK_EQ(gp_credits_parse("99999999999999999999999", INT64_MAX, &m),
	    GP_EINVAL);
	CHECK_EQ(gp_credits_parse("9223372036854.775807", INT64_MAX, &m), 0);
	CHECK_EQ(m, INT64_MAX);
	CHECK_EQ(gp_credits_parse("9223372036854.775808", INT64_MAX, &m),
	    GP_EINVAL);
}

TEST(credits_format)
{
	char buf[40];
	int i;

	gp_credits_format(2500000, buf, sizeof(buf));
	CHECK_STR(buf, "2.5");
	gp_credits_format(12000000, buf, sizeof(buf));
	CHECK_STR(buf, "12");
	gp_credits_format(0, buf, sizeof(buf));
	CHECK_STR(buf, "0");
	gp_credits_format(-1, buf, sizeof(buf));
	CHECK_STR(buf, "-0.000001");
	gp_credits_format(-3002, buf, sizeof(buf));
	CHECK_STR(buf, "-0.003002");
	gp_credits_format(INT64_MIN, buf, sizeof(buf));
	CHECK_STR(buf, "-9223372036854.775808");
	/* round trip */
	for (i = 0; i < 10000; i++) {
		int64_t v = rnd_range(0, GP_AMOUNT_MICRO_MAX), back = -1;
		gp_credits_format(v, buf, sizeof(buf));
		CHECK_EQ(gp_credits_parse(buf, GP_AMOUNT_MICRO_MAX, &back), 0);
		CHECK_EQ(back, v);
	}
}

TEST(price_lookup)
{
	const struct acct_price table[] = {
	    {"default", 1000000},
	    {"A100", 4000000},
	    {"A100-SXM4-80GB", 6000000},
	    {"T4", 500000},
	    {"a10", 2000000},
	};
	const struct acct_price no_default[] = {{"T4", 500000}};

	CHECK_EQ(acct_price_of(table, 5, "NVIDIA A100-SXM4-40GB"), 4000000);
	CHECK_EQ(acct_price_of(table, 5, "NVIDIA A100-SXM4-80GB"), 6000000);
	CHECK_EQ(acct_price_of(table, 5, "nvidia a100-sxm4-80gb"), 6000000);
	CHECK_EQ(acct_price_of(table, 5, "Tesla T4"), 500000);
	CHECK_EQ(acct_price_of(table, 5, "NVIDIA A10"), 2000000);
	CHECK_EQ(acct_price_of(table, 5, "NVIDIA H100 80GB HBM3"), 1000000);
	CHECK_EQ(acct_price_of(table, 5, NULL), 1000000);
	CHECK_EQ(acct_price_of(no_default, 1, "NVIDIA H100"), 0);
	CHECK_EQ(acct_price_of(no_default, 0, "Tesla T4"), 0);
}

TEST(prices_file)
{
	struct acct_price t[4];
	char err[256];
	const char *ok = "# prices\n\nA100 4   # the big ones\n"
			 "  T4\t0.5\ndefault 1\r\n";
	const char *nul = "A100 4\nT4\0 1\n";
	size_t n = 99;

	CHECK_EQ(acct_prices_parse(ok, strlen(ok), t, 4, &n, err, sizeof(err)),
	    0);
	CHECK_EQ(n, 3);
	CHECK_STR(t[0].cls, "A100");
	CHECK_EQ(t[0].micro, 4000000);
	CHECK_STR(t[1].cls, "T4");
	CHECK_EQ(t[1].micro, 500000);
	CHECK_STR(t[2].cls, "default");
	CHECK_EQ(acct_prices_parse("", 0, t, 4, &n, err, sizeof(err)), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(acct_prices_parse("A100\n", 5, t, 4, &n, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "line 1") != NULL);
	CHECK_EQ(acct_prices_parse("x 1\nA100 4 5\n", 12, t, 4, &n, err,
		     sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "line 2") != NULL);
	CHECK_EQ(acct_prices_parse("A100 four\n", 10, t, 4, &n, err,
		     sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(acct_prices_parse("A/100 4\n", 8, t, 4, &n, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(acct_prices_parse("T4 1\nt4 2\n", 10, t, 4, &n, err,
		     sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "twice") != NULL);
	CHECK_EQ(acct_prices_parse("a 1\nb 1\nc 1\nd 1\ne 1\n", 20, t, 4, &n,
		     err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(acct_prices_parse(nul, 13, t, 4, &n, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "NUL") != NULL);
}

TEST(cost_arithmetic)
{
	/* 3.6 credits per GPU-hour on one whole GPU: 1 micro-credit a ms. */
	int64_t rate = 3600000LL * ACCT_SHARE_WHOLE;

	CHECK_EQ(acct_cost(rate, 1000), 1000);
	CHECK_EQ(acct_cost(rate, 0), 0);
	CHECK_EQ(acct_cost(rate, -5), 0);
	CHECK_EQ(acct_cost(0, 1000), 0);
	/* half a GPU at 2 credits an hour for an hour: 1 credit */
	CHECK_EQ(acct_cost(2000000LL * 500, HOUR_MS), 1000000);
	/* rounded down */
	CHECK_EQ(acct_cost(1000000LL * ACCT_SHARE_WHOLE, 3), 0);
	CHECK_EQ(acct_cost(1000000LL * ACCT_SHARE_WHOLE, 4), 1);
	CHECK_EQ(acct_cost(1000000LL * ACCT_SHARE_WHOLE, 3600), 1000);
	/* no overflow: 64 GPUs at the highest price for a year */
	CHECK_EQ(acct_cost(GP_PRICE_MICRO_MAX * 64 * ACCT_SHARE_WHOLE,
		     365LL * 24 * HOUR_MS),
	    GP_PRICE_MICRO_MAX * 64 * 365 * 24);
	CHECK_EQ(acct_cost(INT64_MAX, INT64_MAX), INT64_MAX);
	CHECK_EQ(acct_gpu_ms(1500, 1000), 1500);
	CHECK_EQ(acct_gpu_ms(333, 1000), 333);
	/* the most a job may cost */
	CHECK_EQ(acct_estimate(2, 4000000, 1800), 4000000);
	CHECK_EQ(acct_estimate(0, 4000000, 1800), 0);
	CHECK_EQ(acct_estimate(1, 0, 1800), 0);
}

TEST(meter_basics)
{
	struct acct_meter m;
	struct acct_delta d;

	memset(&m, 0, sizeof(m));
	CHECK_EQ(acct_meter_advance(&m, 5000, &d), 0); /* not started */
	acct_meter_start(&m, 1000, 3600000LL * ACCT_SHARE_WHOLE,
	    ACCT_SHARE_WHOLE);
	CHECK_EQ(acct_meter_advance(&m, 1000, &d), 0);
	CHECK_EQ(acct_meter_advance(&m, 500, &d), 0); /* clock went back */
	CHECK_EQ(acct_meter_advance(&m, 3500, &d), 1);
	CHECK_EQ(d.seq, 0);
	CHECK_EQ(d.from_ms, 1000);
	CHECK_EQ(d.to_ms, 3500);
	CHECK_EQ(d.amount, 2500);
	CHECK_EQ(d.gpu_ms, 2500);
	CHECK_EQ(acct_meter_advance(&m, 3000, &d), 0); /* back again */
	CHECK_EQ(m.seq, 1);
	CHECK_EQ(acct_meter_advance(&m, 4000, &d), 1);
	CHECK_EQ(d.seq, 1);
	CHECK_EQ(d.from_ms, 3500);
	CHECK_EQ(d.amount, 500);
	/* a free GPU still counts GPU time */
	acct_meter_start(&m, 1000, 0, 500);
	CHECK_EQ(acct_meter_advance(&m, 3000, &d), 1);
	CHECK_EQ(d.amount, 0);
	CHECK_EQ(d.gpu_ms, 1000);
	/* a job without GPUs never posts */
	acct_meter_start(&m, 1000, 0, 0);
	CHECK_EQ(acct_meter_advance(&m, 1000000, &d), 0);
}

/*
 * Property: cut an attempt's run into random postings (including tiny
 * ones that round to nothing, and clock hiccups); the postings tile the
 * time, their seqs count up from 0, and their amounts and GPU time add
 * up exactly to the cost of the whole run.
 */
TEST(meter_property_random_cuts)
{
	int run;

	for (run = 0; run < 2000; run++) {
		struct acct_meter m;
		struct acct_delta d;
		int64_t price = rnd_range(0, 20) == 0
		    ? 0
		    : rnd_range(1, rnd() % 2 ? 10000000 : GP_PRICE_MICRO_MAX);
		int64_t share = rnd_range(0, 3) == 0
		    ? rnd_range(1, ACCT_SHARE_WHOLE)
		    : ACCT_SHARE_WHOLE * rnd_range(1, 8);
		int64_t from = rnd_range(1, 4000000000000LL), t = from;
		int64_t sum = 0, gpu = 0, last_to = from;
		int steps = (int)rnd_range(1, 60), i, seq = 0, ok = 1;

		acct_meter_start(&m, from, price * share, share);
		for (i = 0; i < steps; i++) {
			int64_t step = rnd() % 4 == 0 ? rnd_range(0, 3)
						      : rnd_range(1, HOUR_MS);
			t += rnd() % 17 == 0 ? -step : step; /* hiccups */
			if (!acct_meter_advance(&m, t, &d))
				continue;
			ok &= d.seq == seq++ && d.from_ms == last_to &&
			    d.to_ms == t && d.amount >= 0 && d.gpu_ms >= 0;
			last_to = d.to_ms;
			sum += d.amount;
			gpu += d.gpu_ms;
		}
		CHECK(ok);
		CHECK_EQ(sum, acct_cost(price * share, last_to - from));
		CHECK_EQ(gpu, acct_gpu_ms(share, last_to - from));
		CHECK_EQ(m.amount, sum);
		CHECK_EQ(m.seq, seq);
		if (!ok || sum != acct_cost(price * share, last_to - from)) {
			fprintf(stderr, "run %d price %lld share %lld\n", run,
			    (long long)price, (long long)share);
			break;
		}
	}
}

TEST(posting_fill)
{
	struct acct_delta d = {3, 1000, 2000, 55, 1000};
	struct acct_posting p;

	acct_posting_fill(&p, 7, 2, &d, 1, 2001, 4, "alice", 2, "prov-b", 3);
	CHECK_EQ(p.job_id, 7);
	CHECK_EQ(p.attempt, 2);
	CHECK_EQ(p.seq, 3);
	CHECK_EQ(p.final, 1);
	CHECK_EQ(p.at_ms, 2001);
	CHECK_EQ(p.from_ms, 1000);
	CHECK_EQ(p.to_ms, 2000);
	CHECK_EQ(p.amount, 55);
	CHECK_STR(p.user, "alice");
	CHECK_EQ(p.user_group, 2);
	CHECK_STR(p.provider, "prov-b");
	CHECK_EQ(p.provider_group, 3);
}

TEST(decay_half_life)
{
	struct acct_decay d, at;

	memset(&d, 0, sizeof(d));
	acct_decay_add(&d, 1000, HOUR_MS, 100.0, 1000.0);
	acct_decay_at(&d, 1000 + HOUR_MS, HOUR_MS, &at);
	CHECK(fabs(at.gpu_s - 50.0) < 1e-9);
	CHECK(fabs(at.credits - 500.0) < 1e-9);
	acct_decay_at(&d, 1000 + 3 * HOUR_MS, HOUR_MS, &at);
	CHECK(fabs(at.gpu_s - 12.5) < 1e-9);
	/* no decay without a half-life, nor backwards */
	acct_decay_at(&d, 1000 + 3 * HOUR_MS, 0, &at);
	CHECK(fabs(at.gpu_s - 100.0) < 1e-12);
	acct_decay_at(&d, 0, HOUR_MS, &at);
	CHECK(fabs(at.gpu_s - 100.0) < 1e-12);
	/* adding later decays the old value first */
	acct_decay_add(&d, 1000 + HOUR_MS, HOUR_MS, 10.0, 0.0);
	CHECK(fabs(d.gpu_s - 60.0) < 1e-9);
	CHECK_EQ(d.as_of_ms, 1000 + HOUR_MS);
}

/* Property: incremental decay equals the brute-force sum of decayed adds. */
TEST(decay_property_incremental)
{
	int run;

	for (run = 0; run < 200; run++) {
		int64_t hl = rnd_range(1, 30) * 86400000LL / 4;
		int64_t t = rnd_range(0, 4000000000000LL), ts[300];
		double add[300], brute = 0;
		struct acct_decay d, at;
		int n = (int)rnd_range(1, 300), i;

		memset(&d, 0, sizeof(d));
		for (i = 0; i < n; i++) {
			t += rnd_range(0, hl);
			ts[i] = t;
			add[i] = (double)rnd_range(0, 1000000) / 1000.0;
			acct_decay_add(&d, t, hl, add[i], add[i] * 2);
		}
		t += rnd_range(0, 3 * hl);
		for (i = 0; i < n; i++)
			brute += add[i] * exp2(-(double)(t - ts[i]) / (double)hl);
		acct_decay_at(&d, t, hl, &at);
		CHECK(fabs(at.gpu_s - brute) <= 1e-9 * (brute + 1.0));
		CHECK(fabs(at.credits - 2 * brute) <= 2e-9 * (brute + 1.0));
	}
}

TEST(periods)
{
	int64_t now, want;
	enum acct_period p;

	/* Wednesday 2026-11-25 13:14:15.678 UTC */
	CHECK_EQ(gp_parse_time("2026-11-25T13:14:15.678Z", &now), 0);
	CHECK_EQ(gp_parse_time("2026-11-25T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_start(ACCT_PERIOD_DAY, now), want);
	CHECK_EQ(gp_parse_time("2026-11-26T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_next(ACCT_PERIOD_DAY, now), want);
	CHECK_EQ(gp_parse_time("2026-11-23T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_start(ACCT_PERIOD_WEEK, now), want);
	CHECK_EQ(gp_parse_time("2026-11-30T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_next(ACCT_PERIOD_WEEK, now), want);
	CHECK_EQ(gp_parse_time("2026-11-01T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_start(ACCT_PERIOD_MONTH, now), want);
	CHECK_EQ(gp_parse_time("2026-12-01T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_next(ACCT_PERIOD_MONTH, now), want);
	CHECK_EQ(acct_period_start(ACCT_PERIOD_TOTAL, now), 0);
	CHECK_EQ(acct_period_next(ACCT_PERIOD_TOTAL, now), INT64_MAX);
	/* a Sunday belongs to the week that began the Monday before */
	CHECK_EQ(gp_parse_time("2026-11-29T23:59:59.999Z", &now), 0);
	CHECK_EQ(gp_parse_time("2026-11-23T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_start(ACCT_PERIOD_WEEK, now), want);
	/* December rolls into the next year */
	CHECK_EQ(gp_parse_time("2026-12-31T10:00:00.000Z", &now), 0);
	CHECK_EQ(gp_parse_time("2027-01-01T00:00:00.000Z", &want), 0);
	CHECK_EQ(acct_period_next(ACCT_PERIOD_MONTH, now), want);
	CHECK_EQ(acct_period_parse("week", &p), 0);
	CHECK_EQ(p, ACCT_PERIOD_WEEK);
	CHECK_EQ(acct_period_parse("year", &p), GP_EINVAL);
	CHECK_EQ(acct_period_parse(NULL, &p), GP_EINVAL);
	CHECK_STR(acct_period_name(ACCT_PERIOD_MONTH), "month");
}

static int
decode(enum acct_body kind, const char *text, struct acct_request *r)
{
	char err[256];
	json_t *body = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	int rc;

	rc = acct_decode(kind, body, r, err, sizeof(err));
	json_decref(body);
	return rc;
}

TEST(decoders)
{
	struct acct_request r;

	CHECK_EQ(decode(ACCT_BODY_GROUP_CREATE, "{\"name\":\"lab-a\"}", &r), 0);
	CHECK_STR(r.name, "lab-a");
	CHECK_EQ(r.weight, 1);
	CHECK_EQ(decode(ACCT_BODY_GROUP_CREATE,
		     "{\"name\":\"lab-a\",\"weight\":5}", &r),
	    0);
	CHECK_EQ(r.weight, 5);
	CHECK_EQ(decode(ACCT_BODY_GROUP_CREATE,
		     "{\"name\":\"lab a\"}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_GROUP_CREATE,
		     "{\"name\":\"x\",\"weight\":0}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_GROUP_CREATE,
		     "{\"name\":\"x\",\"colour\":1}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_GROUP_SET, "{\"weight\":3}", &r), 0);
	CHECK_EQ(decode(ACCT_BODY_GROUP_SET, "{}", &r), GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_MEMBERS,
		     "{\"op\":\"add\",\"user\":\"alice\"}", &r),
	    0);
	CHECK_EQ(r.member_op, ACCT_MEMBER_ADD);
	CHECK_STR(r.user, "alice");
	CHECK_EQ(decode(ACCT_BODY_MEMBERS,
		     "{\"op\":\"move\",\"provider\":\"prov-a\"}", &r),
	    0);
	CHECK_STR(r.provider, "prov-a");
	CHECK_EQ(decode(ACCT_BODY_MEMBERS,
		     "{\"op\":\"add\",\"provider\":\"prov-a\"}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_MEMBERS,
		     "{\"op\":\"add\",\"user\":\"a\",\"provider\":\"b\"}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_MEMBERS, "{\"op\":\"join\",\"user\":\"a\"}",
		     &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_PRICE,
		     "{\"class\":\"A100\",\"price_micro\":4000000}", &r),
	    0);
	CHECK_EQ(r.amount, 4000000);
	CHECK_EQ(decode(ACCT_BODY_PRICE,
		     "{\"class\":\"A100\",\"remove\":true}", &r),
	    0);
	CHECK_EQ(r.remove, 1);
	CHECK_EQ(decode(ACCT_BODY_PRICE,
		     "{\"class\":\"A100\",\"remove\":false}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_PRICE,
		     "{\"class\":\"A100\",\"price_micro\":1.5}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_PRICE,
		     "{\"class\":\"A100\",\"price_micro\":-1}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_PRICE,
		     "{\"class\":\"A100\",\"price_micro\":1000000000001}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_PRICE,
		     "{\"class\":\"A100\",\"price_micro\":1,\"remove\":true}",
		     &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_BUDGET,
		     "{\"user\":\"alice\",\"amount_micro\":10}", &r),
	    0);
	CHECK_EQ(r.period, ACCT_PERIOD_MONTH);
	CHECK_EQ(decode(ACCT_BODY_BUDGET,
		     "{\"group\":\"lab-a\",\"amount_micro\":10,"
		     "\"period\":\"day\"}",
		     &r),
	    0);
	CHECK_EQ(r.period, ACCT_PERIOD_DAY);
	CHECK_STR(r.group, "lab-a");
	CHECK_EQ(decode(ACCT_BODY_BUDGET,
		     "{\"group\":\"lab-a\",\"amount_micro\":10,"
		     "\"period\":\"year\"}",
		     &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_BUDGET,
		     "{\"user\":\"a\",\"group\":\"b\",\"amount_micro\":1}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_BUDGET, "{\"amount_micro\":1}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_BUDGET, "{\"user\":\"a\",\"remove\":true}",
		     &r),
	    0);
	CHECK_EQ(decode(ACCT_BODY_BUDGET,
		     "{\"user\":\"a\",\"remove\":true,\"period\":\"day\"}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_TOKEN,
		     "{\"role\":\"user\",\"name\":\"alice\",\"group\":\"lab-a\"}",
		     &r),
	    0);
	CHECK_EQ(r.role, GP_ROLE_USER);
	CHECK_STR(r.group, "lab-a");
	CHECK_EQ(decode(ACCT_BODY_TOKEN, "{\"role\":\"user\",\"name\":\"a\"}",
		     &r),
	    0);
	CHECK_STR(r.group, "");
	CHECK_EQ(decode(ACCT_BODY_TOKEN,
		     "{\"role\":\"root\",\"name\":\"a\"}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_TOKEN,
		     "{\"role\":\"user\",\"name\":\"a\",\"group\":\"\"}", &r),
	    GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_TOKEN, "[]", &r), GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_TOKEN, "null", &r), GP_EINVAL);
	CHECK_EQ(decode(ACCT_BODY_COUNT, "{}", &r), GP_EINVAL);
}

int
main(void)
{
	RUN(credits_parse);
	RUN(credits_format);
	RUN(price_lookup);
	RUN(prices_file);
	RUN(cost_arithmetic);
	RUN(meter_basics);
	RUN(meter_property_random_cuts);
	RUN(posting_fill);
	RUN(decay_half_life);
	RUN(decay_property_incremental);
	RUN(periods);
	RUN(decoders);
	return unit_report();
}
