/*
 * test_common.c: the common library (src/common): durations, sizes,
 * integers, times, the byte buffer, tokens and the job spec codec.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>

#include "gp.h"
#include "jobspec.h"
#include "token.h"
#include "unit.h"
#include "util.h"

static int64_t
duration(const char *text)
{
	int64_t s = -12345;

	if (gp_parse_duration(text, &s) != 0)
		return -1;
	return s;
}

TEST(signal_names)
{
	CHECK_EQ(gp_signal_parse("USR1"), SIGUSR1);
	CHECK_EQ(gp_signal_parse("SIGusr2"), SIGUSR2);
	CHECK_EQ(gp_signal_parse("15"), SIGTERM);
	CHECK_EQ(gp_signal_parse("KILL"), -1);
	CHECK_EQ(gp_signal_parse("9"), -1);
	CHECK_EQ(gp_signal_parse(""), -1);
	CHECK_EQ(gp_signal_parse("USR1x"), -1);
	CHECK(strcmp(gp_signal_name(SIGUSR1), "USR1") == 0);
	CHECK(strcmp(gp_signal_name(SIGKILL), "?") == 0);
}

TEST(parse_duration)
{
	int64_t s = 777;

	CHECK_EQ(duration("90"), 90);
	CHECK_EQ(duration("0"), 0);
	CHECK_EQ(duration("90s"), 90);
	CHECK_EQ(duration("15m"), 900);
	CHECK_EQ(duration("2h"), 7200);
	CHECK_EQ(duration("1h30m"), 5400);
	CHECK_EQ(duration("1d12h"), 129600);
	CHECK_EQ(duration("1h30m15s"), 5415);
	CHECK_EQ(duration("2:30:00"), 9000);
	CHECK_EQ(duration("05:30"), 330);
	CHECK_EQ(duration("1-12:00:00"), 129600);
	CHECK_EQ(duration("0-00:00:01"), 1);
	/* Bad inputs are refused and leave the output alone. */
	CHECK_EQ(gp_parse_duration("", &s), GP_EINVAL);
	CHECK_EQ(gp_parse_duration(NULL, &s), GP_EINVAL);
	CHECK_EQ(s, 777);
	CHECK_EQ(duration("1x"), -1);
	CHECK_EQ(duration("h"), -1);
	CHECK_EQ(duration("-5"), -1);
	CHECK_EQ(duration("1h30"), -1);
	CHECK_EQ(duration("99999999999999999999"), -1);
	CHECK_EQ(duration("99999999999999999h"), -1);
	CHECK_EQ(duration(" 5"), -1);
	CHECK_EQ(duration("5 "), -1);
	CHECK_EQ(duration("1.5h"), -1);
	CHECK_EQ(duration("12"), 12);
	CHECK_EQ(duration("1:2:3:4"), -1);
	CHECK_EQ(duration("1:"), -1);
	CHECK_EQ(duration(":30"), -1);
	CHECK_EQ(duration("1-"), -1);
	CHECK_EQ(duration("-1:00"), -1);
	CHECK_EQ(duration("1-2-03:00:00"), -1);
	CHECK_EQ(duration("5:"), -1);
	/* Huge clock parts must not overflow (UBSan watches). */
	CHECK_EQ(duration("999999999999999999:00:00"), -1);
	CHECK_EQ(duration("0:999999999999999999:00"), -1);
	CHECK_EQ(duration("100001-00:00:00"), -1);
	CHECK_EQ(duration("100000-1000000000000:00:00"),
	    100000LL * 86400 + 1000000000000LL * 3600);
}

TEST(format_duration)
{
	char buf[32];

	gp_format_duration(0, buf, sizeof(buf));
	CHECK_STR(buf, "0s");
	gp_format_duration(59, buf, sizeof(buf));
	CHECK_STR(buf, "59s");
	gp_format_duration(90, buf, sizeof(buf));
	CHECK_STR(buf, "1m30s");
	gp_format_duration(5400, buf, sizeof(buf));
	CHECK_STR(buf, "1h30m");
	gp_format_duration(129600, buf, sizeof(buf));
	CHECK_STR(buf, "1d12h");
}

static int64_t
mib(const char *text)
{
	int64_t v = -12345;

	if (gp_parse_mib(text, &v) != 0)
		return -1;
	return v;
}

TEST(parse_mib)
{
	CHECK_EQ(mib("512"), 512);
	CHECK_EQ(mib("0"), 0);
	CHECK_EQ(mib("512M"), 512);
	CHECK_EQ(mib("512m"), 512);
	CHECK_EQ(mib("16G"), 16384);
	CHECK_EQ(mib("16g"), 16384);
	CHECK_EQ(mib("1T"), 1048576);
	CHECK_EQ(mib("512MiB"), 512);
	CHECK_EQ(mib("16GiB"), 16384);
	CHECK_EQ(mib("16GB"), 16384);
	CHECK_EQ(mib(""), -1);
	CHECK_EQ(mib(NULL), -1);
	CHECK_EQ(mib("G"), -1);
	CHECK_EQ(mib("-1"), -1);
	CHECK_EQ(mib("16X"), -1);
	CHECK_EQ(mib("16K"), -1);
	CHECK_EQ(mib("16Gi"), -1);
	CHECK_EQ(mib("16GiBs"), -1);
	CHECK_EQ(mib("16 G"), -1);
	CHECK_EQ(mib("1.5G"), -1);
	CHECK_EQ(mib("99999999999999999999"), -1);
	CHECK_EQ(mib("99999999999999T"), -1);
}

static int64_t
integer(const char *text, int64_t min, int64_t max)
{
	int64_t v = -12345;

	if (gp_parse_int(text, min, max, &v) != 0)
		return -12345;
	return v;
}

TEST(parse_int)
{
	CHECK_EQ(integer("0", 0, 10), 0);
	CHECK_EQ(integer("10", 0, 10), 10);
	CHECK_EQ(integer("11", 0, 10), -12345);
	CHECK_EQ(integer("-3", -5, 5), -3);
	CHECK_EQ(integer("-6", -5, 5), -12345);
	CHECK_EQ(integer("", 0, 10), -12345);
	CHECK_EQ(integer(NULL, 0, 10), -12345);
	CHECK_EQ(integer("-", -5, 5), -12345);
	CHECK_EQ(integer("+1", 0, 10), -12345);
	CHECK_EQ(integer(" 1", 0, 10), -12345);
	CHECK_EQ(integer("1 ", 0, 10), -12345);
	CHECK_EQ(integer("0x10", 0, 100), -12345);
	CHECK_EQ(integer("007", 0, 10), 7);
	CHECK_EQ(integer("99999999999999999999", 0, INT64_MAX), -12345);
	CHECK_EQ(integer("1000000000000", 0, INT64_MAX), 1000000000000LL);
}

TEST(time_round_trip)
{
	static const int64_t samples[] = {0, 1, 999, 1000, 1764104700123LL,
	    1798761599999LL, 4102444800000LL};
	char buf[32];
	int64_t ms;
	size_t i;

	gp_format_time(1764104700123LL, buf, sizeof(buf));
	CHECK_STR(buf, "2025-11-25T21:05:00.123Z");
	for (i = 0; i < GP_ARRAY_LEN(samples); i++) {
		ms = -1;
		gp_format_time(samples[i], buf, sizeof(buf));
		CHECK_EQ(gp_parse_time(buf, &ms), 0);
		CHECK_EQ(ms, samples[i]);
	}
	ms = gp_now_ms();
	gp_format_time(ms, buf, sizeof(buf));
	CHECK_EQ(strlen(buf), 24);
	CHECK_EQ(gp_parse_time("2026-11-22T21:05:00Z", &ms), GP_EINVAL);
	CHECK_EQ(gp_parse_time("2026-11-22T21:05:00.123", &ms), GP_EINVAL);
	CHECK_EQ(gp_parse_time("2026-11-22T21:05:00.123Zx", &ms), GP_EINVAL);
	CHECK_EQ(gp_parse_time("yesterday", &ms), GP_EINVAL);
	CHECK_EQ(gp_parse_time("", &ms), GP_EINVAL);
	CHECK(gp_mono_ms() > 0);
	CHECK(gp_mono_us() >= gp_mono_ms());
}

/*
 * A monotonic condition variable's timed wait lasts its time: were the
 * deadline computed on one clock and the wait timed on another (the
 * coordinator's old CLOCK_REALTIME waits), it would end at once or after
 * decades. The check is a lower bound only, never a speed assumption.
 */
TEST(cond_wait_monotonic)
{
	pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond;
	int64_t start, elapsed;

	CHECK_EQ(gp_cond_init_monotonic(&cond), 0);
	pthread_mutex_lock(&mutex);
	start = gp_mono_ms();
	/* Spurious wake-ups answer 0: wait again until the time passed. */
	while (gp_cond_wait_ms(&cond, &mutex, 50 - (gp_mono_ms() - start)) ==
	    0 && gp_mono_ms() - start < 50)
		;
	elapsed = gp_mono_ms() - start;
	pthread_mutex_unlock(&mutex);
	CHECK(elapsed >= 50);
	CHECK(elapsed < 3600 * 1000);
	pthread_cond_destroy(&cond);
}

TEST(buf)
{
	struct gp_buf b = {0};
	int i;

	CHECK_EQ(gp_buf_append(&b, "", 0), 0);
	CHECK(b.data != NULL);
	CHECK_EQ(b.len, 0);
	CHECK_STR(b.data, "");
	CHECK_EQ(gp_buf_append(&b, "abc", 3), 0);
	CHECK_EQ(gp_buf_printf(&b, "-%d-%s", 42, "x"), 0);
	CHECK_STR(b.data, "abc-42-x");
	CHECK_EQ(b.len, 8);
	/* Past the 512-byte fast path of gp_buf_printf, and growth. */
	for (i = 0; i < 100; i++)
		CHECK_EQ(gp_buf_printf(&b, "%0600d", i), 0);
	CHECK_EQ(b.len, 8 + 100 * 600);
	CHECK_EQ(strlen(b.data), b.len);
	CHECK(b.cap > b.len);
	CHECK_EQ(b.data[b.len - 1], '9');
	gp_buf_free(&b);
	CHECK(b.data == NULL);
	CHECK_EQ(b.len, 0);
	CHECK_EQ(b.cap, 0);
	gp_buf_free(&b);
}

TEST(strlcpy)
{
	char small[4];

	CHECK_EQ(gp_strlcpy(small, "abcdef", sizeof(small)), 6);
	CHECK_STR(small, "abc");
	CHECK_EQ(gp_strlcpy(small, "ab", sizeof(small)), 2);
	CHECK_STR(small, "ab");
	CHECK_EQ(gp_strlcpy(small, "zz", 0), 2);
	CHECK_STR(small, "ab");
}

TEST(token_pins)
{
	char bearer[64], pin[GP_TOKEN_PIN_HEX + 1], text[160];
	const char *hex = "9F86D081884C7D659A2FEAA0C55AD015"
	    "A3BF4F1B2B0B822CD15D6C15B0F00A08";

	CHECK_EQ(gp_token_split_pin("gpt_abc", bearer, sizeof(bearer), pin,
	    sizeof(pin)), 0);
	CHECK_STR(bearer, "gpt_abc");
	CHECK_STR(pin, "");
	snprintf(text, sizeof(text), "gpt_abc@sha256:%s", hex);
	CHECK_EQ(gp_token_split_pin(text, bearer, sizeof(bearer), pin,
	    sizeof(pin)), 0);
	CHECK_STR(bearer, "gpt_abc");
	CHECK_STR(pin, "9f86d081884c7d659a2feaa0c55ad015"
	    "a3bf4f1b2b0b822cd15d6c15b0f00a08");
	CHECK_EQ(gp_token_split_pin("gpt_abc@sha256:12", bearer,
	    sizeof(bearer), pin, sizeof(pin)), GP_EINVAL);
	snprintf(text, sizeof(text), "gpt_abc@sha256:%.63sz", hex);
	CHECK_EQ(gp_token_split_pin(text, bearer, sizeof(bearer), pin,
	    sizeof(pin)), GP_EINVAL);
	CHECK_EQ(gp_token_split_pin("gpt_abc", bearer, 4, pin, sizeof(pin)),
	    GP_EINVAL);
}

TEST(tokens)
{
	char a[GP_TOKEN_LEN + 1], b[GP_TOKEN_LEN + 1];
	char ha[GP_TOKEN_HASH_HEX], ha2[GP_TOKEN_HASH_HEX], hb[GP_TOKEN_HASH_HEX];
	char prefix[32];
	enum gp_role role;
	size_t i;

	CHECK_EQ(gp_token_init(), 0);
	gp_token_generate(a);
	gp_token_generate(b);
	CHECK_EQ(strlen(a), GP_TOKEN_LEN);
	CHECK(strncmp(a, "gpt_", 4) == 0);
	CHECK(strcmp(a, b) != 0);
	CHECK(gp_token_well_formed(a));
	CHECK(gp_token_well_formed(b));
	CHECK(!gp_token_well_formed(NULL));
	CHECK(!gp_token_well_formed(""));
	CHECK(!gp_token_well_formed("gpt_"));
	b[GP_TOKEN_LEN - 1] = '\0';
	CHECK(!gp_token_well_formed(b)); /* short */
	b[GP_TOKEN_LEN - 1] = '+';
	CHECK(!gp_token_well_formed(b)); /* not URL-safe base64 */
	memcpy(b, "gpx_", 4);
	b[GP_TOKEN_LEN - 1] = 'A';
	CHECK(!gp_token_well_formed(b)); /* wrong prefix */

	gp_token_hash(a, ha);
	gp_token_hash(a, ha2);
	gp_token_hash(b, hb);
	CHECK_EQ(strlen(ha), 64);
	for (i = 0; i < 64; i++)
		CHECK((ha[i] >= '0' && ha[i] <= '9') ||
		    (ha[i] >= 'a' && ha[i] <= 'f'));
	CHECK_STR(ha, ha2);
	CHECK(strcmp(ha, hb) != 0);
	/* BLAKE2b-256 of "": fixed, so stored hashes stay valid. */
	gp_token_hash("", ha);
	CHECK_STR(ha, "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cd"
		      "f12fe3a8");

	gp_token_prefix(a, prefix, sizeof(prefix));
	CHECK_EQ(strlen(prefix), 11);
	CHECK(strncmp(prefix, a, 8) == 0);
	CHECK(strstr(prefix, a + 8) == NULL);

	CHECK_EQ(gp_role_parse("admin", &role), 0);
	CHECK_EQ(role, GP_ROLE_ADMIN);
	CHECK_EQ(gp_role_parse("user", &role), 0);
	CHECK_EQ(role, GP_ROLE_USER);
	CHECK_EQ(gp_role_parse("provider", &role), 0);
	CHECK_EQ(role, GP_ROLE_PROVIDER);
	CHECK_EQ(gp_role_parse("root", &role), GP_EINVAL);
	CHECK_EQ(gp_role_parse(NULL, &role), GP_EINVAL);
	CHECK_STR(gp_role_name(GP_ROLE_PROVIDER), "provider");
}

/* Decodes text; returns the result, and the error text in err. */
static int
decode(const char *text, struct gp_jobspec *spec, char *err, size_t len)
{
	err[0] = '\0';
	return gp_jobspec_decode(text, strlen(text), spec, err, len);
}

/* 1 when the body is refused with an error that mentions what. */
static int
refused(const char *text, const char *what)
{
	struct gp_jobspec spec;
	char err[256];
	int rc;

	rc = decode(text, &spec, err, sizeof(err));
	gp_jobspec_fini(&spec);
	if (rc != GP_EINVAL) {
		fprintf(stderr, "accepted: %s\n", text);
		return 0;
	}
	if (strstr(err, what) == NULL) {
		fprintf(stderr, "error for %s: \"%s\" lacks \"%s\"\n", text, err,
		    what);
		return 0;
	}
	return 1;
}

/* "interactive" and "expose": decoded, checked, encoded back. */
TEST(jobspec_interactive_expose)
{
	struct gp_jobspec spec, back;
	char err[256];
	char *text;
	json_t *enc;

	CHECK_EQ(decode("{\"command\":[\"sleep\",\"9\"],\"interactive\":"
			"true,\"expose\":[8888,6006]}", &spec, err,
		     sizeof(err)), 0);
	CHECK_EQ(spec.interactive, 1);
	CHECK_EQ(spec.n_expose, 2);
	CHECK_EQ(spec.expose[0], 8888);
	CHECK_EQ(spec.expose[1], 6006);
	CHECK(gp_jobspec_exposes(&spec, 6006));
	CHECK(!gp_jobspec_exposes(&spec, 22));
	enc = gp_jobspec_encode(&spec);
	CHECK(json_is_true(json_object_get(enc, "interactive")));
	CHECK_EQ(json_array_size(json_object_get(enc, "expose")), 2);
	text = json_dumps(enc, 0);
	json_decref(enc);
	CHECK_EQ(decode(text, &back, err, sizeof(err)), 0);
	free(text);
	CHECK_EQ(back.interactive, 1);
	CHECK_EQ(back.n_expose, 2);
	CHECK_EQ(back.expose[1], 6006);
	gp_jobspec_fini(&back);
	gp_jobspec_fini(&spec);

	/* Batch jobs say nothing of either: older readers never see them. */
	CHECK_EQ(decode("{\"command\":[\"true\"],\"interactive\":false,"
			"\"expose\":[]}", &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.interactive, 0);
	enc = gp_jobspec_encode(&spec);
	CHECK(json_object_get(enc, "interactive") == NULL);
	CHECK(json_object_get(enc, "expose") == NULL);
	json_decref(enc);
	gp_jobspec_fini(&spec);

	CHECK(refused("{\"command\":[\"x\"],\"interactive\":1}",
	    "interactive"));
	CHECK(refused("{\"command\":[\"x\"],\"expose\":8888}", "expose"));
	CHECK(refused("{\"command\":[\"x\"],\"expose\":[0]}", "expose[0]"));
	CHECK(refused("{\"command\":[\"x\"],\"expose\":[1,65536]}",
	    "expose[1]"));
	CHECK(refused("{\"command\":[\"x\"],\"expose\":[\"80\"]}",
	    "expose[0]"));
	CHECK(refused("{\"command\":[\"x\"],\"expose\":[80,80]}",
	    "twice"));
	CHECK(refused("{\"command\":[\"x\"],\"expose\":[1,2,3,4,5,6,7,8,"
		      "9]}", "at most 8"));
}

TEST(jobspec_good)
{
	struct gp_jobspec spec;
	char err[256];

	CHECK_EQ(decode("{\"command\":[\"true\"]}", &spec, err, sizeof(err)),
	    0);
	CHECK_STR(spec.name, "true");
	CHECK_EQ(spec.gpus, 1);
	CHECK_EQ(spec.cpus, 1);
	CHECK_EQ(spec.mem_mib, 0);
	CHECK_EQ(spec.gpu_mem_mib, 0);
	CHECK_STR(spec.gpu_model, "");
	CHECK_EQ(spec.time_limit_s, 0);
	CHECK_EQ(json_object_size(spec.env), 0);
	gp_jobspec_fini(&spec);

	CHECK_EQ(decode("{\"command\":[\"/usr/bin/python3\",\"train.py\"],"
			"\"name\":\"train-1.a_b\",\"env\":{\"EPOCHS\":\"3\","
			"\"_x1\":\"\"},\"gpus\":2,\"min_gpu_mem_mib\":40000,"
			"\"gpu_model\":\"A100\",\"cpus\":8,\"mem_mib\":64000,"
			"\"time_limit_s\":3600}",
		     &spec, err, sizeof(err)),
	    0);
	CHECK_STR(spec.name, "train-1.a_b");
	CHECK_EQ(json_array_size(spec.command), 2);
	CHECK_STR(json_string_value(json_object_get(spec.env, "EPOCHS")), "3");
	CHECK_EQ(spec.gpus, 2);
	CHECK_EQ(spec.min_gpu_mem_mib, 40000);
	CHECK_EQ(spec.gpu_mem_mib, 0);
	CHECK(!gp_jobspec_is_fraction(&spec));
	CHECK_STR(spec.gpu_model, "A100");
	CHECK_EQ(spec.cpus, 8);
	CHECK_EQ(spec.mem_mib, 64000);
	CHECK_EQ(spec.time_limit_s, 3600);
	gp_jobspec_fini(&spec);

	/* The default name: the basename, cleaned; "job" when nothing. */
	CHECK_EQ(decode("{\"command\":[\"/opt/my tool+v2\",\"x\"]}", &spec,
		     err, sizeof(err)),
	    0);
	CHECK_STR(spec.name, "mytoolv2");
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"/usr/bin/\"]}", &spec, err,
		     sizeof(err)),
	    0);
	CHECK_STR(spec.name, "job");
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"++\"]}", &spec, err, sizeof(err)), 0);
	CHECK_STR(spec.name, "job");
	gp_jobspec_fini(&spec);

	/* Limits at their bounds, null model, 0 GPUs, empty later args. */
	CHECK_EQ(decode("{\"command\":[\"sleep\",\"\"],\"gpus\":0,"
			"\"gpu_model\":null,\"cpus\":1024,"
			"\"mem_mib\":16777216,\"time_limit_s\":31536000}",
		     &spec, err, sizeof(err)),
	    0);
	CHECK_EQ(spec.gpus, 0);
	CHECK_EQ(spec.cpus, 1024);
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"x\"],\"gpus\":64,\"gpu_model\":\"\"}",
		     &spec, err, sizeof(err)),
	    0);
	CHECK_EQ(spec.gpus, 64);
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"x\"],\"gpus\":0,\"gpu_model\":\"\"}",
		     &spec, err, sizeof(err)),
	    0);
	gp_jobspec_fini(&spec);
}

TEST(jobspec_bad)
{
	char big[GP_SUBMIT_BODY_MAX + 64];
	char longarg[GP_ARG_MAX + 64];
	char body[GP_ARG_MAX + 128];
	int n;

	CHECK(refused("", "invalid JSON"));
	CHECK(refused("{", "invalid JSON"));
	CHECK(refused("[]", "object"));
	CHECK(refused("42", "expected"));
	CHECK(refused("null", "expected"));
	CHECK(refused("{}", "command: missing"));
	CHECK(refused("{\"name\":\"x\"}", "command"));
	CHECK(refused("{\"command\":[]}", "command"));
	CHECK(refused("{\"command\":\"true\"}", "command"));
	CHECK(refused("{\"command\":null}", "command"));
	CHECK(refused("{\"command\":[\"\"]}", "command[0]: empty"));
	CHECK(refused("{\"command\":[\"a\",1]}", "command[1]"));
	CHECK(refused("{\"command\":[\"a\\u0000b\"]}", "NUL"));
	CHECK(refused("{\"command\":[\"x\"],\"bogus\":1}",
	    "unknown field 'bogus'"));
	CHECK(refused("{\"command\":[\"x\"],\"Gpus\":1}", "unknown field"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":1,\"gpus\":2}",
	    "duplicate"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":\"1\"}", "gpus"));
	/* Idempotency keys: 16 to 64 of A-Z a-z 0-9 _ -. */
	CHECK(refused("{\"command\":[\"x\"],\"idempotency_key\":\"short\"}",
	    "idempotency_key: 16 to 64"));
	CHECK(refused("{\"command\":[\"x\"],\"idempotency_key\":"
	    "\"abcdefghijklmnop qrs\"}", "idempotency_key"));
	CHECK(refused("{\"command\":[\"x\"],\"idempotency_key\":"
	    "\"abcdefghijklmnop\\u0000\"}", "\\u0000 is not allowed"));
	CHECK(refused("{\"command\":[\"x\"],\"idempotency_key\":7}",
	    "idempotency_key"));
	CHECK(refused("{\"command\":[\"x\"],\"idempotency_key\":\""
	    "0123456789012345678901234567890123456789012345678901234567890"
	    "12345\"}", "idempotency_key"));
	CHECK(refused("{\"command\":[\"x\"],\"network\":\"wan\"}",
	    "network: must be none, internet or lan"));
	CHECK(refused("{\"command\":[\"x\"],\"network\":2}", "network:"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":1.0}", "gpus"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":true}", "gpus"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":-1}", "gpus"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":65}", "gpus"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":99999999999999999999}",
	    "invalid JSON"));
	CHECK(refused("{\"command\":[\"x\"],\"cpus\":0}", "cpus"));
	CHECK(refused("{\"command\":[\"x\"],\"cpus\":1025}", "cpus"));
	CHECK(refused("{\"command\":[\"x\"],\"mem_mib\":-1}", "mem_mib"));
	CHECK(refused("{\"command\":[\"x\"],\"mem_mib\":16777217}",
	    "mem_mib"));
	CHECK(refused("{\"command\":[\"x\"],\"gpu_mem_mib\":16777217}",
	    "gpu_mem_mib"));
	CHECK(refused("{\"command\":[\"x\"],\"time_limit_s\":31536001}",
	    "time_limit_s"));
	CHECK(refused("{\"command\":[\"x\"],\"time_limit_s\":-5}",
	    "time_limit_s"));
	CHECK(refused("{\"command\":[\"x\"],\"name\":\"\"}", "name"));
	CHECK(refused("{\"command\":[\"x\"],\"name\":\"a b\"}", "name"));
	CHECK(refused("{\"command\":[\"x\"],\"name\":\"a/b\"}", "name"));
	CHECK(refused("{\"command\":[\"x\"],\"name\":7}", "name"));
	CHECK(refused("{\"command\":[\"x\"],\"name\":\"a\\u0000b\"}",
	    "not allowed"));
	CHECK(refused("{\"command\":[\"x\"],\"name\":\"aaaaaaaaaaaaaaaaaaaaaa"
		      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
	    "name"));
	CHECK(refused("{\"command\":[\"x\"],\"gpu_model\":7}", "gpu_model"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":[]}", "env"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":{\"A\":1}}", "env.A"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":{\"1A\":\"v\"}}",
	    "invalid variable name"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":{\"A-B\":\"v\"}}",
	    "invalid variable name"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":{\"\":\"v\"}}",
	    "invalid variable name"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":"
		      "{\"CUDA_VISIBLE_DEVICES\":\"0\"}}",
	    "reserved"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":{\"GPUPOOL_X\":\"1\"}}",
	    "reserved"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":{\"A\":\"1\",\"A\":\"2\"}}",
	    "duplicate"));
	CHECK(refused("{\"command\":[\"x\"],\"env\":{\"A\":\"a\\u0000\"}}",
	    "NUL"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":0,\"gpu_model\":\"A100\"}",
	    "need gpus"));
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":0,\"min_gpu_mem_mib\":1}",
	    "need gpus"));
	/* Fractions: one GPU, a share in (0, 1); gangs; capability. */
	CHECK(refused("{\"command\":[\"x\"],\"gpus\":2,\"gpu_mem_mib\":1}",
	    "gpus must be 1"));
	CHECK(refused("{\"command\":[\"x\"],\"gpu_share\":1.0}",
	    "gpu_share"));
	CHECK(refused("{\"command\":[\"x\"],\"gpu_share\":0}", "gpu_share"));
	CHECK(refused("{\"command\":[\"x\"],\"gpu_share\":\"0.5\"}",
	    "gpu_share"));
	CHECK(refused("{\"command\":[\"x\"],\"nodes\":0}", "nodes"));
	CHECK(refused("{\"command\":[\"x\"],\"nodes\":65}", "nodes"));
	CHECK(refused("{\"command\":[\"x\"],\"compute_capability\":\"8.10\"}",
	    "compute_capability"));
	CHECK(refused("{\"command\":[\"x\"],\"compute_capability\":8}",
	    "compute_capability"));

	/* Too many arguments, too long an argument, too large a body. */
	n = snprintf(big, sizeof(big), "{\"command\":[");
	for (int i = 0; i < GP_ARGC_MAX + 1; i++)
		n += snprintf(big + n, sizeof(big) - (size_t)n, "%s\"a\"",
		    i ? "," : "");
	snprintf(big + n, sizeof(big) - (size_t)n, "]}");
	CHECK(refused(big, "more than 256"));
	memset(longarg, 'a', GP_ARG_MAX + 1);
	longarg[GP_ARG_MAX + 1] = '\0';
	snprintf(body, sizeof(body), "{\"command\":[\"x\",\"%s\"]}", longarg);
	CHECK(refused(body, "longer than"));
	longarg[GP_ARG_MAX] = '\0';
	snprintf(body, sizeof(body), "{\"command\":[\"x\",\"%s\"]}", longarg);
	{
		struct gp_jobspec spec;
		char err[256];
		CHECK_EQ(decode(body, &spec, err, sizeof(err)), 0);
		gp_jobspec_fini(&spec);
	}
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "{\"command\":[\"x\"]}", 17);
	CHECK(refused(big, "larger than"));
}

TEST(jobspec_round_trip)
{
	static const char *bodies[] = {
		"{\"command\":[\"true\"]}",
		"{\"command\":[\"a\",\"\",\"c d\"],\"env\":{\"K\":\"v\"},"
		"\"gpus\":3,\"gpu_model\":\"h100\",\"min_gpu_mem_mib\":7,"
		"\"nodes\":4,\"compute_capability\":\"9.0\","
		"\"cpus\":4,\"mem_mib\":9,\"time_limit_s\":60,\"name\":\"n\"}",
		"{\"command\":[\"\\u00e9t\\u00e9\"],\"gpus\":0}",
		"{\"command\":[\"x\"],\"gpu_share\":0.25,\"gpu_mem_mib\":4096}",
		"{\"command\":[\"x\"],\"idempotency_key\":"
		"\"0f3c_9a-7b2e4d1c8a6f\",\"disk_mib\":20480}",
		"{\"command\":[\"x\"],\"network\":\"none\"}",
		"{\"command\":[\"x\"],\"network\":\"lan\"}",
	};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(bodies); i++) {
		struct gp_jobspec a, b;
		char err[256], *text;
		json_t *enc;

		CHECK_EQ(decode(bodies[i], &a, err, sizeof(err)), 0);
		enc = gp_jobspec_encode(&a);
		CHECK(enc != NULL);
		text = json_dumps(enc, JSON_COMPACT);
		CHECK(text != NULL);
		CHECK_EQ(decode(text != NULL ? text : "", &b, err, sizeof(err)),
		    0);
		CHECK_STR(a.name, b.name);
		CHECK(json_equal(a.command, b.command));
		CHECK(json_equal(a.env, b.env));
		CHECK_EQ(a.gpus, b.gpus);
		CHECK_EQ(a.gpu_mem_mib, b.gpu_mem_mib);
		CHECK_EQ(a.gpu_milli, b.gpu_milli);
		CHECK_EQ(a.min_gpu_mem_mib, b.min_gpu_mem_mib);
		CHECK_EQ(a.min_capability, b.min_capability);
		CHECK_EQ(a.nodes, b.nodes);
		CHECK_STR(a.gpu_model, b.gpu_model);
		CHECK_STR(a.idempotency_key, b.idempotency_key);
		CHECK_EQ(a.disk_mib, b.disk_mib);
		CHECK_EQ(a.network, b.network);
		CHECK_EQ(a.cpus, b.cpus);
		CHECK_EQ(a.mem_mib, b.mem_mib);
		CHECK_EQ(a.time_limit_s, b.time_limit_s);
		free(text);
		json_decref(enc);
		gp_jobspec_fini(&a);
		gp_jobspec_fini(&b);
	}
}

TEST(share_and_capability_parse)
{
	int v = 0;

	CHECK_EQ(gp_share_parse("0.5", &v), 0);
	CHECK_EQ(v, 500);
	CHECK_EQ(gp_share_parse(".25", &v), 0);
	CHECK_EQ(v, 250);
	CHECK_EQ(gp_share_parse("0.001", &v), 0);
	CHECK_EQ(v, 1);
	CHECK_EQ(gp_share_parse("1", &v), GP_EINVAL);
	CHECK_EQ(gp_share_parse("0", &v), GP_EINVAL);
	CHECK_EQ(gp_share_parse("0.0001", &v), GP_EINVAL);
	CHECK_EQ(gp_share_parse("-0.5", &v), GP_EINVAL);
	CHECK_EQ(gp_share_parse("5e-1", &v), GP_EINVAL);
	CHECK_EQ(gp_share_parse("nan", &v), GP_EINVAL);
	CHECK_EQ(gp_share_parse("", &v), GP_EINVAL);
	CHECK_EQ(gp_capability_parse("8.6", &v), 0);
	CHECK_EQ(v, 86);
	CHECK_EQ(gp_capability_parse("9", &v), 0);
	CHECK_EQ(v, 90);
	CHECK_EQ(gp_capability_parse("10.0", &v), 0);
	CHECK_EQ(v, 100);
	CHECK_EQ(gp_capability_parse("8.", &v), GP_EINVAL);
	CHECK_EQ(gp_capability_parse(".6", &v), GP_EINVAL);
	CHECK_EQ(gp_capability_parse("8.66", &v), GP_EINVAL);
	CHECK_EQ(gp_capability_parse("+8.6", &v), GP_EINVAL);
	CHECK_EQ(gp_capability_parse("0.5", &v), GP_EINVAL);
}

TEST(name_valid)
{
	CHECK(gp_name_valid("a"));
	CHECK(gp_name_valid("A-z_0.9"));
	CHECK(!gp_name_valid(""));
	CHECK(!gp_name_valid("a b"));
	CHECK(!gp_name_valid("é"));
	CHECK(gp_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			    "aaaaaaaaaa"));
	CHECK(!gp_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			     "aaaaaaaaaaaa"));
}

TEST(strerror)
{
	CHECK_STR(gp_strerror(GP_OK), "success");
	CHECK_STR(gp_strerror(GP_EINVAL), "invalid argument");
	CHECK_STR(gp_strerror(GP_EAUTH), "authentication failed");
	CHECK_STR(gp_strerror(-999), "unknown error");
}

int
main(void)
{
	RUN(signal_names);
	RUN(parse_duration);
	RUN(format_duration);
	RUN(parse_mib);
	RUN(parse_int);
	RUN(time_round_trip);
	RUN(buf);
	RUN(strlcpy);
	RUN(tokens);
	RUN(token_pins);
	RUN(jobspec_good);
	RUN(jobspec_interactive_expose);
	RUN(jobspec_bad);
	RUN(jobspec_round_trip);
	RUN(share_and_capability_parse);
	RUN(name_valid);
	RUN(strerror);
	RUN(cond_wait_monotonic);
	return unit_report();
}
