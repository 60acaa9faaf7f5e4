/*
 * test_policy.c: the owner's policy file (src/agent/policy.c): every key,
 * every error with its line, windows crossing midnight and the end of the
 * week, the time until the next change, defaults and the JSON form.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/policy.h"
#include "gp.h"
#include "unit.h"

static int
parse(const char *text, struct gp_policy *p, int *line, char *err)
{
	return gp_policy_parse(text, strlen(text), p, line, err, 256);
}

/* A struct tm for a weekday (0 Sunday .. 6 Saturday) and a clock time. */
static struct tm
at(int wday, int hour, int min, int sec)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	tm.tm_wday = wday;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	return tm;
}

enum { SUN, MON, TUE, WED, THU, FRI, SAT };

TEST(defaults)
{
	struct gp_policy p;
	struct tm tm = at(WED, 12, 0, 0);
	int64_t next = 0;
	char err[256];
	int line = -1, i;

	gp_policy_default(&p);
	CHECK_EQ(p.all_gpus, 1);
	CHECK_EQ(p.grace_s, 30);
	CHECK_EQ(p.presence, GP_PRESENCE_RECLAIM);
	CHECK_EQ(p.nwindows, 0);
	CHECK_EQ(p.cpus, 0);
	CHECK_EQ(p.mem_mib, 0);
	CHECK_EQ(p.max_job_s, 0);
	for (i = 0; i < 64; i++)
		CHECK(gp_policy_lends_gpu(&p, i));
	CHECK(!gp_policy_lends_gpu(&p, 64));
	CHECK(!gp_policy_lends_gpu(&p, -1));
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, -1);
	/* An empty file, and comments only, are the defaults. */
	memset(&p, 0x5a, sizeof(p));
	CHECK_EQ(parse("", &p, &line, err), 0);
	CHECK_EQ(line, 0);
	CHECK_EQ(p.all_gpus, 1);
	CHECK_EQ(p.grace_s, 30);
	CHECK_EQ(parse("# nothing\n\n   \t\n# more\n", &p, &line, err), 0);
	CHECK_EQ(p.nwindows, 0);
}

TEST(every_key)
{
	const char *text =
	    "\xef\xbb\xbf# lend two GPUs at night\n"
	    "gpus = 0, 1,3\n"
	    "cpus = 8\r\n"
	    "memory = 32G   # comment after a value\n"
	    "\tmax-job-time=12h\n"
	    "checkpoint-grace = 2m\n"
	    "window = Mon-Fri 19:00-08:00\n"
	    "window = weekends 00:00-24:00\n"
	    "owner-presence = ignore\n";
	struct gp_policy p;
	char err[256];
	int line;

	CHECK_EQ(parse(text, &p, &line, err), 0);
	CHECK_EQ(p.all_gpus, 0);
	CHECK_EQ(p.gpus, 0xb);
	CHECK(gp_policy_lends_gpu(&p, 0));
	CHECK(gp_policy_lends_gpu(&p, 3));
	CHECK(!gp_policy_lends_gpu(&p, 2));
	CHECK_EQ(p.cpus, 8);
	CHECK_EQ(p.mem_mib, 32768);
	CHECK_EQ(p.max_job_s, 12 * 3600);
	CHECK_EQ(p.grace_s, 120);
	CHECK_EQ(p.nwindows, 2);
	CHECK_EQ(p.windows[0].days, 0x1f);
	CHECK_EQ(p.windows[0].start_min, 19 * 60);
	CHECK_EQ(p.windows[0].end_min, 8 * 60);
	CHECK_EQ(p.windows[1].days, 0x60);
	CHECK_EQ(p.windows[1].start_min, 0);
	CHECK_EQ(p.windows[1].end_min, 1440);
	CHECK_EQ(p.presence, GP_PRESENCE_IGNORE);
}

TEST(values)
{
	struct gp_policy p;
	char err[256];
	int line;

	CHECK_EQ(parse("gpus = all", &p, &line, err), 0);
	CHECK_EQ(p.all_gpus, 1);
	CHECK_EQ(parse("gpus = 63", &p, &line, err), 0);
	CHECK_EQ(p.gpus, UINT64_C(1) << 63);
	CHECK_EQ(parse("memory = 512", &p, &line, err), 0);
	CHECK_EQ(p.mem_mib, 512);
	CHECK_EQ(parse("memory = 1T", &p, &line, err), 0);
	CHECK_EQ(p.mem_mib, 1048576);
	CHECK_EQ(parse("memory = 16GiB", &p, &line, err), 0);
	CHECK_EQ(p.mem_mib, 16384);
	CHECK_EQ(parse("memory = 2048K", &p, &line, err), 0);
	CHECK_EQ(p.mem_mib, 2);
	CHECK_EQ(parse("checkpoint-grace = 0", &p, &line, err), 0);
	CHECK_EQ(p.grace_s, 0);
	CHECK_EQ(parse("checkpoint-grace = 1h", &p, &line, err), 0);
	CHECK_EQ(p.grace_s, 3600);
	CHECK_EQ(parse("max-job-time = 1d12h", &p, &line, err), 0);
	CHECK_EQ(p.max_job_s, 36 * 3600);
	CHECK_EQ(parse("owner-presence = reclaim", &p, &line, err), 0);
	CHECK_EQ(p.presence, GP_PRESENCE_RECLAIM);
	CHECK_EQ(parse("owner-presence = throttle:10%", &p, &line, err), 0);
	CHECK_EQ(p.presence, GP_PRESENCE_THROTTLE);
	CHECK_EQ(p.throttle_milli, 100);
	CHECK_EQ(parse("owner-presence = throttle:0.5%", &p, &line, err), 0);
	CHECK_EQ(p.throttle_milli, 5);
	CHECK_EQ(parse("owner-presence = throttle:100%", &p, &line, err), 0);
	CHECK_EQ(p.throttle_milli, 1000);
	CHECK_EQ(parse("gpu-share = strict", &p, &line, err), 0);
	CHECK_EQ(p.gpu_share, GP_SHARE_STRICT);
	CHECK_EQ(parse("gpu-share = elastic", &p, &line, err), 0);
	CHECK_EQ(p.gpu_share, GP_SHARE_ELASTIC);
	CHECK_EQ(parse("window = daily 09:00-17:00", &p, &line, err), 0);
	CHECK_EQ(p.windows[0].days, 0x7f);
	CHECK_EQ(parse("window = 22:00-06:00", &p, &line, err), 0);
	CHECK_EQ(p.windows[0].days, 0x7f);
	CHECK_EQ(parse("window = Sat,Sun 10:00-12:00", &p, &line, err), 0);
	CHECK_EQ(p.windows[0].days, 0x60);
	CHECK_EQ(parse("window = weekdays 10:00-12:00", &p, &line, err), 0);
	CHECK_EQ(p.windows[0].days, 0x1f);
	CHECK_EQ(parse("window = Fri-Mon 10:00-12:00", &p, &line, err), 0);
	CHECK_EQ(p.windows[0].days, 0x71);
	CHECK_EQ(parse("window = mon,Wednesday 10:00-12:00", &p, &line, err),
	    0);
	CHECK_EQ(p.windows[0].days, 0x5);
	/* An end of 00:00 is midnight at the end of the day. */
	CHECK_EQ(parse("window = Mon 18:00-00:00", &p, &line, err), 0);
	CHECK_EQ(p.windows[0].end_min, 1440);
}

/* Parses text, expecting an error on line `want_line` containing want. */
static void
expect_error(const char *text, int want_line, const char *want)
{
	struct gp_policy p, before;
	char err[256] = "";
	int line = -1;

	memset(&p, 0x5a, sizeof(p));
	before = p;
	CHECK_EQ(gp_policy_parse(text, strlen(text), &p, &line, err,
	    sizeof(err)), GP_EINVAL);
	if (line != want_line || strstr(err, want) == NULL)
		fprintf(stderr, "text \"%s\": line %d \"%s\", want line %d "
		    "\"%s\"\n", text, line, err, want_line, want);
	CHECK_EQ(line, want_line);
	CHECK(strstr(err, want) != NULL);
	/* Written only on success. */
	CHECK(memcmp(&p, &before, sizeof(p)) == 0);
}

TEST(errors_name_the_line)
{
	char *big, *many;
	size_t i, n;

	expect_error("cpus = 2\n\n\nmemory = 12Q\n", 4,
	    "line 4: memory: '12Q' is not a size");
	expect_error("colour = blue\n", 1, "line 1: unknown key 'colour'");
	expect_error("cpus = 2\n# x\ncpus = 3\n", 3,
	    "line 3: cpus: given twice (first on line 1)");
	expect_error("gpus = all\ngpus = 1\n", 2, "gpus: given twice");
	expect_error("memory = 1G\nmemory = 2G\n", 2, "memory: given twice");
	expect_error("max-job-time = 1h\nmax-job-time = 2h\n", 2,
	    "max-job-time: given twice");
	expect_error("checkpoint-grace=1s\ncheckpoint-grace=1s\n", 2,
	    "checkpoint-grace: given twice");
	expect_error("owner-presence = ignore\nowner-presence = ignore\n", 2,
	    "owner-presence: given twice");
	expect_error("just words\n", 1, "line 1: expected key = value");
	expect_error("cpus =\n", 1, "cpus: missing value");
	expect_error("cpus = many\n", 1, "cpus: 'many' is not a CPU count");
	expect_error("cpus = -1\n", 1, "cpus:");
	expect_error("gpus = 64\n", 1, "gpus: '64' is not a GPU index");
	expect_error("gpus = 0,,1\n", 1, "gpus: empty item");
	expect_error("gpus = 0,\n", 1, "gpus: empty item");
	expect_error("gpus = x\n", 1, "gpus: 'x'");
	expect_error("memory = 100K\n", 1, "memory: '100K' is not a size");
	expect_error("memory = 999999T\n", 1, "memory:");
	expect_error("max-job-time = soon\n", 1,
	    "max-job-time: 'soon' is not a duration");
	expect_error("max-job-time = 400d\n", 1, "max-job-time:");
	expect_error("checkpoint-grace = 2h\n", 1,
	    "checkpoint-grace: '2h' is over the maximum of 1h");
	expect_error("checkpoint-grace = -1\n", 1, "checkpoint-grace:");
	expect_error("owner-presence = maybe\n", 1,
	    "owner-presence: 'maybe' is not reclaim, ignore or throttle:N%");
	expect_error("cpus = 2\nowner-presence = throttle:0%\n", 2,
	    "owner-presence: throttle:'0%' is not a share");
	expect_error("owner-presence = throttle:101%\n", 1,
	    "owner-presence: throttle:'101%'");
	expect_error("owner-presence = throttle:10\n", 1,
	    "owner-presence: throttle:'10'");
	expect_error("owner-presence = throttle:\n", 1,
	    "owner-presence: throttle:''");
	expect_error("owner-presence = throttle:1.25%\n", 1,
	    "owner-presence: throttle:'1.25%'");
	expect_error("\n\ngpu-share = maybe\n", 3,
	    "gpu-share: 'maybe' is not elastic or strict");
	expect_error("gpu-share = strict\ngpu-share = strict\n", 2,
	    "gpu-share: given twice");
	expect_error("\n\nwindow = Funday 10:00-12:00\n", 3,
	    "window: 'Funday' is not a list of days");
	expect_error("window = Mon 25:00-26:00\n", 1,
	    "window: '25:00-26:00' is not a time range");
	expect_error("window = Mon 24:00-08:00\n", 1, "window:");
	expect_error("window = Mon 10:60-11:00\n", 1, "window:");
	expect_error("window = Mon 10:00\n", 1, "window:");
	expect_error("window = Mon 9:00-10:00\n", 1, "window:");
	expect_error("window = Mon, 10:00-11:00\n", 1, "window:");
	expect_error("window = Mon-Funday 10:00-11:00\n", 1, "window:");
	/* Too many windows. */
	n = 65 * 32 + 1;
	many = malloc(n);
	many[0] = '\0';
	for (i = 0; i < 65; i++)
		strcat(many, "window = Mon 10:00-11:00\n");
	expect_error(many, 65, "line 65: window: too many windows");
	free(many);
	/* Over 64 KiB. */
	n = GP_POLICY_FILE_MAX + 2;
	big = malloc(n);
	memset(big, '#', n - 1);
	big[n - 1] = '\0';
	expect_error(big, 0, "larger than 64 KiB");
	free(big);
}

TEST(nul_byte_counts_lines)
{
	struct gp_policy p;
	char err[256];
	int line;

	CHECK_EQ(gp_policy_parse("a\nb\n\0", 5, &p, &line, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(line, 3);
	CHECK(strstr(err, "NUL") != NULL);
}

TEST(load)
{
	char path[] = "/var/tmp/gpupool-test-policy.XXXXXX", err[256];
	struct gp_policy p;
	int fd, line;

	fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "gpus = 1\nwindow = Mon 10:00-11:00\n", 34) == 34);
	close(fd);
	CHECK_EQ(gp_policy_load(path, &p, &line, err, sizeof(err)), 0);
	CHECK_EQ(p.gpus, 2);
	CHECK_EQ(p.nwindows, 1);
	unlink(path);
	CHECK_EQ(gp_policy_load(path, &p, &line, err, sizeof(err)), GP_EIO);
	CHECK_EQ(line, 0);
	CHECK(strstr(err, "no such file") != NULL);
}

TEST(windows_in_local_time)
{
	struct gp_policy p;
	struct tm tm;
	int64_t next;
	char err[256];
	int line;

	CHECK_EQ(parse("window = Mon-Fri 19:00-08:00\n", &p, &line, err), 0);
	/* Monday evening: open until Tuesday 08:00 (13 h). */
	tm = at(MON, 19, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, 13 * 3600);
	/* Monday 18:59:30: closed, opens in 30 s. */
	tm = at(MON, 18, 59, 30);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 0);
	CHECK_EQ(next, 30);
	/* Tuesday 07:59 is still Monday's window. */
	tm = at(TUE, 7, 59, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, NULL), 1);
	tm = at(TUE, 8, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 0);
	CHECK_EQ(next, 11 * 3600);
	/* Monday 03:00: Sunday opens no window, so closed. */
	tm = at(MON, 3, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, NULL), 0);
	/* Saturday 03:00: Friday's window runs into Saturday. */
	tm = at(SAT, 3, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, 5 * 3600);
	/* Saturday 09:00: closed until Monday 19:00. */
	tm = at(SAT, 9, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 0);
	CHECK_EQ(next, (15 + 24 + 19) * 3600);
}

TEST(window_crosses_the_week_end)
{
	struct gp_policy p;
	struct tm tm;
	int64_t next;
	char err[256];
	int line;

	CHECK_EQ(parse("window = Sun 22:00-06:00\n", &p, &line, err), 0);
	tm = at(MON, 3, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, 3 * 3600);
	tm = at(SUN, 23, 59, 59);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, 6 * 3600 + 1);
	tm = at(SUN, 21, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 0);
	CHECK_EQ(next, 3600);
	tm = at(MON, 6, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 0);
	CHECK_EQ(next, (6 * 24 + 16) * 3600);
}

TEST(windows_combine)
{
	struct gp_policy p;
	struct tm tm;
	int64_t next;
	char err[256];
	int line;

	/* Adjacent windows: one open stretch from Sat 00:00 to Mon 00:00. */
	CHECK_EQ(parse("window = Sat 00:00-24:00\nwindow = Sun 00:00-00:00\n",
	    &p, &line, err), 0);
	tm = at(SAT, 12, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, 36 * 3600);
	/* Always open: no change ever. */
	CHECK_EQ(parse("window = daily 00:00-24:00\n", &p, &line, err), 0);
	tm = at(WED, 1, 2, 3);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, -1);
	/* Start == end: 24 hours from the start. */
	CHECK_EQ(parse("window = Wed 12:00-12:00\n", &p, &line, err), 0);
	tm = at(THU, 11, 59, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, &next), 1);
	CHECK_EQ(next, 60);
	tm = at(THU, 12, 0, 0);
	CHECK_EQ(gp_policy_window_open(&p, &tm, NULL), 0);
}

TEST(to_json)
{
	struct gp_policy p;
	json_t *j;
	char err[256], *text;
	int line;

	gp_policy_default(&p);
	j = gp_policy_to_json(&p);
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_STR(text, "{\"checkpoint_grace_s\":30,\"cpus\":null,\"expose\":[],"
	    "\"gpu_share\":\"elastic\",\"gpus\":\"all\",\"images\":\"signed\","
	    "\"interactive\":\"allow\",\"interactive_gpus\":0,"
	    "\"max_job_time_s\":null,"
	    "\"memory_mib\":null,\"net_rate_bps\":null,\"network\":\"internet\",\"owner_presence\":\"reclaim\","
	    "\"plain_jobs\":\"allow\",\"scratch_max_mib\":null,"
	    "\"trusted_keys\":[],\"windows\":[]}");
	free(text);
	json_decref(j);
	CHECK_EQ(parse("gpus = 3,1\ncpus = 4\nmemory = 8G\nmax-job-time = 2h\n"
	    "checkpoint-grace = 0\nowner-presence = ignore\n"
	    "window = Mon-Fri 19:00-08:00\nwindow = Sat,Sun 00:00-24:00\n"
	    "window = Mon,Wed-Fri,Sun 09:30-10:00\n"
	    "window = 01:00-02:00\nwindow = Fri-Mon 10:00-11:00\n",
	    &p, &line, err), 0);
	j = gp_policy_to_json(&p);
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_STR(text, "{\"checkpoint_grace_s\":0,\"cpus\":4,\"expose\":[],"
	    "\"gpu_share\":\"elastic\",\"gpus\":[1,3],\"images\":\"signed\","
	    "\"interactive\":\"allow\",\"interactive_gpus\":0,"
	    "\"max_job_time_s\":7200,"
	    "\"memory_mib\":8192,\"net_rate_bps\":null,\"network\":\"internet\",\"owner_presence\":\"ignore\","
	    "\"plain_jobs\":\"allow\",\"scratch_max_mib\":null,"
	    "\"trusted_keys\":[],\"windows\":[\"Mon-Fri "
	    "19:00-08:00\",\"Sat,Sun 00:00-24:00\",\"Mon,Wed-Fri,Sun "
	    "09:30-10:00\",\"daily 01:00-02:00\",\"Mon,Fri-Sun "
	    "10:00-11:00\"]}");
	free(text);
	json_decref(j);
}

TEST(format_parses_back)
{
	struct gp_policy p, q;
	char err[256], text[128], line_text[160];
	unsigned days;
	int line;

	for (days = 1; days < 128; days++) {
		gp_policy_default(&p);
		p.nwindows = 1;
		p.windows[0].days = days;
		p.windows[0].start_min = 61;
		p.windows[0].end_min = 1440;
		gp_policy_window_format(&p.windows[0], text, sizeof(text));
		snprintf(line_text, sizeof(line_text), "window = %s\n", text);
		CHECK_EQ(parse(line_text, &q, &line, err), 0);
		CHECK_EQ(q.windows[0].days, days);
		CHECK_EQ(q.windows[0].start_min, 61);
		CHECK_EQ(q.windows[0].end_min, 1440);
	}
}

TEST(describe)
{
	struct gp_policy p;
	char err[256], text[256];
	int line;

	gp_policy_default(&p);
	gp_policy_describe(&p, text, sizeof(text));
	CHECK_STR(text, "gpus all, always, checkpoint-grace 30s, "
	    "owner-presence reclaim");
	CHECK_EQ(parse("gpus = 0,2\nwindow = daily 01:00-02:00\ncpus = 2\n"
	    "memory = 1G\nmax-job-time = 90m\n", &p, &line, err), 0);
	gp_policy_describe(&p, text, sizeof(text));
	CHECK_STR(text, "gpus 0,2, 1 window, cpus 2, memory 1024M, "
	    "max-job-time 1h30m, checkpoint-grace 30s, owner-presence "
	    "reclaim");
	CHECK_EQ(parse("owner-presence = throttle:12.5%\ngpu-share = strict\n",
	    &p, &line, err), 0);
	gp_policy_describe(&p, text, sizeof(text));
	CHECK_STR(text, "gpus all, always, checkpoint-grace 30s, "
	    "owner-presence throttle:12.5%, gpu-share strict");
}

#define KEY_A "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
#define KEY_B "ed25519:Kof6ZvJz8gJtBkURhE6b4XmqKRfq/c4K27iL/RX0XP4="

TEST(network_keys)
{
	struct gp_policy p;
	char err[256], text[400];
	int line;

	gp_policy_default(&p);
	CHECK_EQ(p.network, GP_NET_INTERNET);
	CHECK_EQ(p.net_rate_bps, 0);
	CHECK_EQ(parse("network = none\n", &p, &line, err), 0);
	CHECK_EQ(p.network, GP_NET_NONE);
	CHECK_EQ(parse("network = lan\nnet-rate = 200M\n", &p, &line, err),
	    0);
	CHECK_EQ(p.network, GP_NET_LAN);
	CHECK_EQ(p.net_rate_bps, 200000000);
	gp_policy_describe(&p, text, sizeof(text));
	CHECK(strstr(text, ", network lan, net-rate 200000000bit/s") != NULL);
	CHECK_EQ(parse("network = internet\nnet-rate = 1G\n", &p, &line, err),
	    0);
	CHECK_EQ(p.network, GP_NET_INTERNET);
	CHECK_EQ(p.net_rate_bps, 1000000000);
	CHECK_EQ(parse("net-rate = 500kbit\n", &p, &line, err), 0);
	CHECK_EQ(p.net_rate_bps, 500000);
	CHECK_EQ(parse("net-rate = off\n", &p, &line, err), 0);
	CHECK_EQ(p.net_rate_bps, 0);
	expect_error("cpus = 1\nnetwork = wan\n", 2,
	    "line 2: network: 'wan' is not none, internet or lan");
	expect_error("network = lan\nnetwork = none\n", 2,
	    "network: given twice (first on line 1)");
	expect_error("network = LAN\n", 1, "network: 'LAN'");
	expect_error("\n\nnet-rate = fast\n", 3,
	    "line 3: net-rate: 'fast' is not a rate");
	expect_error("net-rate = 200MB\n", 1, "net-rate: '200MB'");
	expect_error("net-rate = -5M\n", 1, "net-rate:");
	expect_error("net-rate = 1k\n", 1, "net-rate: '1k'");
	expect_error("net-rate = 99999999999999999999\n", 1, "net-rate:");
	expect_error("net-rate = 200M\nnet-rate = 1G\n", 2,
	    "net-rate: given twice");
}

TEST(interactive_keys)
{
	struct gp_policy p;
	char err[256], text[400];
	int line;
	json_t *o;

	gp_policy_default(&p);
	CHECK_EQ(p.refuse_interactive, 0);
	CHECK_EQ(p.interactive_gpus, 0);
	CHECK_EQ(parse("interactive = refuse\n", &p, &line, err), 0);
	CHECK_EQ(p.refuse_interactive, 1);
	CHECK_EQ(parse("gpus = all\ninteractive-gpus = 2\n", &p, &line,
	    err), 0);
	CHECK_EQ(p.refuse_interactive, 0);
	CHECK_EQ(p.interactive_gpus, 2);
	gp_policy_describe(&p, text, sizeof(text));
	CHECK(strstr(text, ", interactive-gpus 2") != NULL);
	o = gp_policy_to_json(&p);
	CHECK_EQ(json_integer_value(json_object_get(o, "interactive_gpus")), 2);
	CHECK_STR(json_string_value(json_object_get(o, "interactive")),
	    "allow");
	json_decref(o);
	expect_error("interactive = maybe\n", 1,
	    "interactive: 'maybe' is not allow or refuse");
	expect_error("interactive-gpus = 65\n", 1, "interactive-gpus: '65'");
	expect_error("interactive-gpus = -1\n", 1, "interactive-gpus:");
	expect_error("interactive-gpus = 1\ninteractive-gpus = 2\n", 2,
	    "interactive-gpus: given twice");
}

TEST(images_and_keys)
{
	struct gp_policy p;
	char err[256], text[400];
	int line;

	gp_policy_default(&p);
	CHECK_EQ(p.images, GP_IMAGES_SIGNED);
	CHECK_EQ(p.refuse_plain, 0);
	CHECK_EQ(p.nkeys, 0);
	CHECK_EQ(parse("images = any\nplain-jobs = refuse\n"
	    "trust-key = " KEY_A " lab-a\ntrust-key = " KEY_B "\n", &p,
	    &line, err), 0);
	CHECK_EQ(p.images, GP_IMAGES_ANY);
	CHECK_EQ(p.refuse_plain, 1);
	CHECK_EQ(p.nkeys, 2);
	CHECK_STR(p.keys[0].key, KEY_A);
	CHECK_STR(p.keys[0].name, "lab-a");
	CHECK_STR(p.keys[1].name, "");
	gp_policy_describe(&p, text, sizeof(text));
	CHECK(strstr(text, "images any (2 trusted keys), plain-jobs refuse") !=
	    NULL);
	CHECK_EQ(parse("images = none\n", &p, &line, err), 0);
	CHECK_EQ(p.images, GP_IMAGES_NONE);
	expect_error("images = some\n", 1, "images: 'some' is not signed, any "
	    "or none");
	expect_error("images = any\nimages = none\n", 2, "images: given "
	    "twice");
	expect_error("plain-jobs = maybe\n", 1, "plain-jobs: 'maybe'");
	expect_error("trust-key = ed25519:short\n", 1, "trust-key: "
	    "'ed25519:short' is not a public key");
	expect_error("trust-key = " KEY_A "\ntrust-key = " KEY_A " x\n", 2,
	    "listed twice");
	expect_error("trust-key = " KEY_A " bad/name\n", 1, "label");
}

TEST(expose)
{
	struct gp_policy p;
	char err[256], many[32 * 17 + 1];
	int line, i;
	json_t *j;

	gp_policy_default(&p);
	CHECK_EQ(p.nexpose, 0);
	CHECK_EQ(parse("expose = /opt/conda ro\nexpose = /srv/scratch rw\n"
	    "expose=/usr/local\n", &p, &line, err), 0);
	CHECK_EQ(p.nexpose, 3);
	CHECK_STR(p.expose[0].path, "/opt/conda");
	CHECK_EQ(p.expose[0].read_only, 1);
	CHECK_STR(p.expose[1].path, "/srv/scratch");
	CHECK_EQ(p.expose[1].read_only, 0);
	CHECK_EQ(p.expose[2].read_only, 1);	/* ro unless said */
	j = gp_policy_to_json(&p);
	CHECK_EQ(json_array_size(json_object_get(j, "expose")), 3);
	CHECK_STR(json_string_value(json_object_get(json_array_get(
	    json_object_get(j, "expose"), 1), "path")), "/srv/scratch");
	json_decref(j);
	expect_error("cpus = 1\nexpose = opt/conda ro\n", 2,
	    "line 2: expose: 'opt/conda' is not an absolute path");
	expect_error("expose = /opt/conda maybe\n", 1,
	    "expose: 'maybe' is not ro or rw");
	expect_error("expose = /\n", 1, "expose: not the whole root");
	expect_error("expose = /opt/../etc ro\n", 1, "is not a normal path");
	expect_error("expose = /opt//x\n", 1, "is not a normal path");
	expect_error("expose = /opt/\n", 1, "is not a normal path");
	expect_error("expose = /opt/./x\n", 1, "is not a normal path");
	expect_error("expose = /proc/1\n", 1, "expose: /proc/1 is the job's "
	    "own");
	expect_error("expose = /dev\n", 1, "the job's own");
	expect_error("expose = /tmp/x rw\n", 1, "the job's own");
	expect_error("expose = /opt\nexpose = /opt rw\n", 2,
	    "line 2: expose: /opt is listed twice");
	expect_error("expose = /a\tb\n", 1, "expose: 'b' is not ro or rw");
	CHECK_EQ(parse("scratch-max = 20G\n", &p, &line, err), 0);
	CHECK_EQ(p.scratch_max_mib, 20480);
	expect_error("scratch-max = lots\n", 1, "scratch-max: 'lots' is not a "
	    "size");
	expect_error("scratch-max = 0\n", 1, "scratch-max: '0'");
	expect_error("scratch-max = 1G\nscratch-max = 2G\n", 2,
	    "scratch-max: given twice");
	many[0] = '\0';
	for (i = 0; i < 17; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
		    "expose = /opt/d%02d\n", i);
	expect_error(many, 17, "line 17: expose: too many paths");
}

int
main(void)
{
	RUN(defaults);
	RUN(expose);
	RUN(every_key);
	RUN(values);
	RUN(errors_name_the_line);
	RUN(nul_byte_counts_lines);
	RUN(load);
	RUN(windows_in_local_time);
	RUN(window_crosses_the_week_end);
	RUN(windows_combine);
	RUN(to_json);
	RUN(format_parses_back);
	RUN(describe);
	RUN(images_and_keys);
	RUN(network_keys);
	RUN(interactive_keys);
	return unit_report();
}
