/*
 * test_cli_acct.c: the accounting side of the CLI (src/cli/acct.c and
 * submit's --group/--max-price): times like "7d", GPU time, and the
 * tables of usage, the ledger, budgets, prices and groups.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "gp.h"
#include "unit.h"
#include "util.h"

static char *
render(int (*fn)(json_t *, struct gp_buf *), const char *text, int *rc)
{
	json_t *reply = json_loads(text, 0, NULL);
	struct gp_buf out = {0};

	*rc = fn(reply, &out);
	json_decref(reply);
	gp_buf_append(&out, "", 1);
	return out.data;
}

TEST(commands_exist)
{
	const char *names[] = {"group create", "group ls", "group set",
	    "group add", "group remove", "group move", "price set", "price rm",
	    "price ls", "budget set", "budget rm", "budget ls", "usage",
	    "ledger"};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(names); i++)
		CHECK(gp_cli_command_find(names[i]) != NULL);
}

TEST(since)
{
	int64_t now, ms = -1, want;

	CHECK_EQ(gp_parse_time("2026-11-25T13:14:15.678Z", &now), 0);
	CHECK_EQ(gp_cli_parse_since("7d", now, &ms), 0);
	CHECK_EQ(ms, now - 7 * 86400000LL);
	CHECK_EQ(gp_cli_parse_since("1h30m", now, &ms), 0);
	CHECK_EQ(ms, now - 5400000LL);
	CHECK_EQ(gp_cli_parse_since("2026-01-31", now, &ms), 0);
	CHECK_EQ(gp_parse_time("2026-01-31T00:00:00.000Z", &want), 0);
	CHECK_EQ(ms, want);
	CHECK_EQ(gp_cli_parse_since("2026-01-31T12:00:00Z", now, &ms), 0);
	CHECK_EQ(gp_parse_time("2026-01-31T12:00:00.000Z", &want), 0);
	CHECK_EQ(ms, want);
	CHECK_EQ(gp_cli_parse_since("2026-01-31T12:00:00.250Z", now, &ms), 0);
	CHECK_EQ(ms, want + 250);
	ms = 42;
	CHECK_EQ(gp_cli_parse_since("yesterday", now, &ms), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_since("", now, &ms), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_since("2026-01-31T12:00", now, &ms), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_since("100000000d", now, &ms), GP_EINVAL);
	CHECK_EQ(ms, 42);
}

TEST(gpu_time)
{
	char buf[40];

	gp_cli_format_gpu_time(0, buf, sizeof(buf));
	CHECK_STR(buf, "0:00:00");
	gp_cli_format_gpu_time(3723999, buf, sizeof(buf));
	CHECK_STR(buf, "1:02:03");
	gp_cli_format_gpu_time(100LL * 3600000, buf, sizeof(buf));
	CHECK_STR(buf, "100:00:00");
	gp_cli_format_gpu_time(-5, buf, sizeof(buf));
	CHECK_STR(buf, "0:00:00");
}

TEST(usage_table)
{
	const char *reply =
	    "{\"users\": [{\"user\": \"alice\", \"group\": \"lab-a\","
	    "  \"gpu_ms\": 3723000, \"spent_micro\": 2500000}],"
	    " \"providers\": [{\"provider\": \"prov-b\", \"group\": \"lab-b\","
	    "  \"gpu_ms\": 3723000, \"earned_micro\": 2500000}],"
	    " \"groups\": [{\"group\": \"lab-a\", \"used_gpu_ms\": 3723000,"
	    "  \"spent_micro\": 2500000, \"lent_gpu_ms\": 0, \"earned_micro\": 0,"
	    "  \"net_micro\": -2500000}],"
	    " \"totals\": {\"postings\": 3, \"debits_micro\": -2500000,"
	    "  \"credits_micro\": 2500000, \"balance_micro\": 0}}";
	char *out;
	int rc;

	out = render(gp_cli_render_usage, reply, &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out,
	    "USER   GROUP  GPU-TIME  CREDITS\n"
	    "alice  lab-a   1:02:03      2.5\n"
	    "\n"
	    "PROVIDER  GROUP  GPU-TIME  CREDITS\n"
	    "prov-b    lab-b   1:02:03      2.5\n"
	    "\n"
	    "GROUP     USED  SPENT     LENT  EARNED   NET\n"
	    "lab-a  1:02:03    2.5  0:00:00       0  -2.5\n"
	    "\n"
	    "3 postings: debits -2.5, credits 2.5, balance 0\n");
	free(out);
	out = render(gp_cli_render_usage,
	    "{\"users\": [], \"providers\": [], \"groups\": [],"
	    " \"totals\": {\"postings\": 0}}",
	    &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out, "no usage\n");
	free(out);
	out = render(gp_cli_render_usage, "{\"users\": 3}", &rc);
	CHECK_EQ(rc, GP_EPROTO);
	free(out);
}

TEST(ledger_table)
{
	const char *reply =
	    "{\"postings\": [{\"id\": 4, \"job_id\": 1, \"attempt\": 2,"
	    " \"seq\": 3, \"kind\": \"final\", \"at\": \"2026-11-23T17:50:02.122Z\","
	    " \"amount_micro\": 370, \"gpu_ms\": 3700, \"entries\": ["
	    " {\"account\": \"user\", \"name\": \"alice\", \"group\": \"lab-a\","
	    "  \"amount_micro\": -370},"
	    " {\"account\": \"provider\", \"name\": \"prov-b\","
	    "  \"group\": \"lab-b\", \"amount_micro\": 370}]}]}";
	char *out;
	int rc;

	out = render(gp_cli_render_ledger, reply, &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out,
	    "POSTING  JOB  ATTEMPT  SEQ  KIND   AT                        "
	    "ACCOUNT          GROUP  GPU-TIME   CREDITS\n"
	    "      4    1        2    3  final  2026-11-23T17:50:02.122Z  "
	    "user:alice       lab-a   0:00:03  -0.00037\n"
	    "      4    1        2    3  final  2026-11-23T17:50:02.122Z  "
	    "provider:prov-b  lab-b   0:00:03   0.00037\n");
	free(out);
}

TEST(budgets_prices_groups_tables)
{
	char *out;
	int rc;

	out = render(gp_cli_render_budgets,
	    "{\"budgets\": [{\"kind\": \"user\", \"name\": \"alice\","
	    " \"amount_micro\": 10000000, \"spent_micro\": 2500000,"
	    " \"left_micro\": 7500000, \"period\": \"month\","
	    " \"period_end\": \"2026-12-01T00:00:00.000Z\"}]}",
	    &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out,
	    "KIND  NAME   BUDGET  SPENT  LEFT  PERIOD  RESETS\n"
	    "user  alice      10    2.5   7.5  month   "
	    "2026-12-01T00:00:00.000Z\n");
	free(out);
	out = render(gp_cli_render_prices,
	    "{\"prices\": [{\"class\": \"A100\", \"price_micro\": 2500000},"
	    " {\"class\": \"default\", \"price_micro\": 1000000}]}",
	    &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out,
	    "CLASS    CREDITS/GPU-HOUR\n"
	    "A100                  2.5\n"
	    "default                 1\n");
	free(out);
	out = render(gp_cli_render_groups,
	    "{\"groups\": [{\"name\": \"lab-a\", \"weight\": 2,"
	    " \"members\": [\"alice\", \"bob\"], \"providers\": [],"
	    " \"nodes\": [\"a1\"], \"decayed_usage\": {\"gpu_s\": 7200.5}}]}",
	    &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out,
	    "GROUP  WEIGHT  MEMBERS    PROVIDERS  NODES  DECAYED-GPU-TIME\n"
	    "lab-a       2  alice,bob  -          a1              2:00:00\n");
	free(out);
}

static int
build(char **words, struct gp_jobspec *spec, char *err, size_t len)
{
	struct gp_cli_args args;
	int argc = 0;

	while (words[argc] != NULL)
		argc++;
	if (gp_cli_parse(gp_cli_command_find("submit"), argc, words, &args,
		err, len) != 0) {
		gp_jobspec_init(spec);
		return GP_EINVAL;
	}
	return gp_cli_build_jobspec(&args, spec, err, len);
}

TEST(submit_group_and_max_price)
{
	char *ok[] = {"submit", "--group", "lab-a", "--max-price", "2.5",
	    "true", NULL};
	char *zero[] = {"submit", "--max-price", "0", "true", NULL};
	char *bad[] = {"submit", "--max-price", "two", "true", NULL};
	char *group[] = {"submit", "--group", "lab a", "true", NULL};
	struct gp_jobspec spec;
	char err[256];
	json_t *enc;

	CHECK_EQ(build(ok, &spec, err, sizeof(err)), 0);
	CHECK_STR(spec.group, "lab-a");
	CHECK_EQ(spec.max_price_micro, 2500000);
	enc = gp_jobspec_encode(&spec);
	CHECK_STR(json_string_value(json_object_get(enc, "group")), "lab-a");
	CHECK_EQ(json_integer_value(json_object_get(enc, "max_price_micro")),
	    2500000);
	json_decref(enc);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(zero, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "--max-price") != NULL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(bad, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(group, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "group") != NULL);
	gp_jobspec_fini(&spec);
}

int
main(void)
{
	RUN(commands_exist);
	RUN(since);
	RUN(gpu_time);
	RUN(usage_table);
	RUN(ledger_table);
	RUN(budgets_prices_groups_tables);
	RUN(submit_group_and_max_price);
	return unit_report();
}
