/*
 * test_cli_top.c: the pure parts of `gpupool top`, the progress line and
 * `token ls`: the frame for canned answers (summary counts, a row per GPU
 * with its job and user, running and queued jobs with the reason each
 * waits (from the scheduler's "wait" object when the answer has one, else
 * from a budget hold or the state), lines cut at the width,
 * lists cut to the height), the progress text (percent, bar, sizes, rate,
 * ETA, unknown totals), and the tokens table.
 */
#include <jansson.h>
#include <string.h>

#include "cli/cmd.h"
#include "gp.h"
#include "unit.h"
#include "util.h"

static const char nodes_json[] =
    "{\"nodes\": ["
    " {\"name\": \"lab-a\", \"state\": \"up\", \"gpus\": ["
    "  {\"index\": 0, \"model\": \"A100\", \"mem_mib\": 40960, \"job\": 7,"
    "   \"user\": \"alice\", \"util\": 80, \"mem_used_mib\": 20480,"
    "   \"lent\": true, \"temp_c\": 66, \"power_mw\": 245400},"
    "  {\"index\": 1, \"model\": \"A100\", \"mem_mib\": 40960, \"job\": null,"
    "   \"util\": 0, \"mem_used_mib\": 0, \"lent\": false, \"temp_c\": null,"
    "   \"power_mw\": null}]},"
    " {\"name\": \"lab-b\", \"state\": \"down\", \"gpus\": ["
    "  {\"index\": 0, \"model\": \"T4\", \"mem_mib\": 16384, \"job\": null,"
    "   \"util\": 0, \"mem_used_mib\": 0, \"lent\": true}]},"
    " {\"name\": \"cpu-box\", \"state\": \"paused\", \"gpus\": []}"
    "]}";

static const char jobs_json[] =
    "{\"jobs\": ["
    " {\"id\": 7, \"user\": \"alice\", \"name\": \"train\", \"state\":"
    "  \"running\", \"node\": \"lab-a\", \"request\": {\"gpus\": 1},"
    "  \"submitted_at\": \"2026-11-22T10:00:00.000Z\","
    "  \"started_at\": \"2026-11-22T10:00:05.000Z\"},"
    " {\"id\": 8, \"user\": \"bob\", \"name\": \"eval\", \"state\":"
    "  \"queued\", \"node\": null, \"request\": {\"gpus\": 2},"
    "  \"submitted_at\": \"2026-11-22T10:01:00.000Z\", \"started_at\": null,"
    "  \"hold_reason\": \"budget: user bob has 0 of 1 credits left\"},"
    " {\"id\": 9, \"user\": \"bob\", \"name\": \"eval2\", \"state\":"
    "  \"queued\", \"node\": null, \"request\": {\"gpus\": 2},"
    "  \"submitted_at\": \"2026-11-22T10:02:00.000Z\", \"started_at\": null}"
    "]}";

/* The same queue as the scheduler explains it (GET /v1/jobs with "wait"). */
static const char jobs_wait_json[] =
    "{\"jobs\": ["
    " {\"id\": 8, \"user\": \"bob\", \"name\": \"eval\", \"state\":"
    "  \"queued\", \"request\": {\"gpus\": 2},"
    "  \"submitted_at\": \"2026-11-22T10:01:00.000Z\","
    "  \"wait\": {\"reason\": \"priority\", \"why\": \"behind job 9\","
    "   \"position\": 2, \"expected_start\": null}},"
    " {\"id\": 9, \"user\": \"bob\", \"name\": \"eval2\", \"state\":"
    "  \"queued\", \"request\": {\"gpus\": 2},"
    "  \"submitted_at\": \"2026-11-22T10:02:00.000Z\","
    "  \"wait\": {\"reason\": \"resources\", \"why\": \"no node has 2 free"
    " GPUs\", \"position\": 1,"
    "   \"expected_start\": \"2026-11-22T11:00:00.000Z\"}},"
    " {\"id\": 10, \"user\": \"carol\", \"name\": \"x\", \"state\":"
    "  \"queued\", \"request\": {\"gpus\": 1}, \"wait\": null,"
    "  \"submitted_at\": \"2026-11-22T10:03:00.000Z\"}"
    "]}";

static int64_t
at(const char *text)
{
	int64_t ms = 0;

	gp_parse_time(text, &ms);
	return ms;
}

static char *
render(int width, int height)
{
	json_t *n = json_loads(nodes_json, 0, NULL);
	json_t *j = json_loads(jobs_json, 0, NULL);
	struct gp_buf out = {0};
	int rc;

	rc = gp_cli_render_top(n, j, "http://pool:7070",
	    at("2026-11-22T10:05:05.000Z"), width, height, &out);
	json_decref(n);
	json_decref(j);
	if (rc != 0) {
		gp_buf_free(&out);
		return NULL;
	}
	gp_buf_append(&out, "", 1);
	return out.data;
}

static int
max_line(const char *text)
{
	int max = 0, n = 0;

	for (; *text != '\0'; text++) {
		if (*text == '\n') {
			max = n > max ? n : max;
			n = 0;
		} else
			n++;
	}
	return max;
}

static int
count_lines(const char *text)
{
	int n = 0;

	for (; *text != '\0'; text++)
		n += *text == '\n';
	return n;
}

TEST(top_frame)
{
	char *f = render(200, 0);

	CHECK(f != NULL);
	if (f == NULL)
		return;
	CHECK(strstr(f, "gpupool top  http://pool:7070") == f);
	CHECK(strstr(f, "nodes 1 up, 1 paused, 1 down") != NULL);
	CHECK(strstr(f, "GPUs 1 busy, 0 idle, 1 unlent, 1 down") != NULL);
	CHECK(strstr(f, "jobs 1 running, 2 queued") != NULL);
	/* The busy GPU: its use, memory, sensors, job and user. */
	CHECK(strstr(f, "[########  ]  80%") != NULL);
	CHECK(strstr(f, "20G/40G") != NULL);
	CHECK(strstr(f, "66C") != NULL);
	CHECK(strstr(f, "245W") != NULL);
	CHECK(strstr(f, "      7  alice\n") != NULL);
	CHECK(strstr(f, " unlent  -\n") != NULL);
	/* A down node's readings are not shown. */
	CHECK(strstr(f, "lab-b          down     0  T4             -") != NULL);
	CHECK(strstr(f, "cpu-box        paused   -") != NULL);
	CHECK(strstr(f, "RUNNING (1)") != NULL);
	CHECK(strstr(f,
	          "       7  alice        train            lab-a"
	          "             1  5:00") != NULL);
	CHECK(strstr(f, "QUEUE (2)") != NULL);
	CHECK(strstr(f, "       8  bob          eval") != NULL);
	CHECK(strstr(f, "2  4:05") != NULL); /* job 8 waits since 10:01 */
	/* Without "wait" (before the scheduler explains): hold or state. */
	CHECK(strstr(f, "REASON") != NULL && strstr(f, "WHY") != NULL);
	CHECK(strstr(f, "eval             held") != NULL);
	CHECK(strstr(f, "budget: user bob has 0 of 1 credits left\n") != NULL);
	CHECK(strstr(f, "eval2            queued") != NULL);
	free(f);
}

TEST(top_wait_reasons)
{
	json_t *n = json_loads(nodes_json, 0, NULL);
	json_t *j = json_loads(jobs_wait_json, 0, NULL);
	struct gp_buf out = {0};
	const char *a, *b, *c;

	CHECK_EQ(gp_cli_render_top(n, j, "u", at("2026-11-22T10:05:05.000Z"),
	             200, 0, &out),
	    0);
	gp_buf_append(&out, "", 1);
	/* The scheduler's order (position), its reasons and explanations. */
	a = strstr(out.data,
	    "       9  bob          eval2            resources");
	b = strstr(out.data,
	    "       8  bob          eval             priority");
	c = strstr(out.data, "      10  carol        x                queued");
	CHECK(a != NULL && b != NULL && c != NULL);
	CHECK(a < b && b < c);
	CHECK(strstr(out.data, "no node has 2 free GPUs; starts ~") != NULL);
	CHECK(strstr(out.data, "behind job 9\n") != NULL);
	json_decref(n);
	json_decref(j);
	gp_buf_free(&out);
}

TEST(top_width_and_height)
{
	char *f = render(50, 0);

	CHECK(f != NULL);
	if (f != NULL)
		CHECK(max_line(f) <= 50);
	free(f);
	f = render(120, 16);
	CHECK(f != NULL);
	if (f == NULL)
		return;
	CHECK(count_lines(f) <= 18);
	CHECK(strstr(f, "more") != NULL);
	free(f);
}

TEST(top_bad_answer)
{
	json_t *n = json_loads("{\"nodes\": 3}", 0, NULL);
	json_t *j = json_loads("{\"jobs\": []}", 0, NULL);
	struct gp_buf out = {0};

	CHECK_EQ(gp_cli_render_top(n, j, "u", 0, 80, 0, &out), GP_EPROTO);
	json_decref(n);
	json_decref(j);
	gp_buf_free(&out);
}

TEST(progress_text)
{
	char line[256];

	gp_progress_format(line, sizeof(line), "restoring", 512LL << 20,
	    1LL << 30, 4000, 100);
	CHECK_STR(line,
	    "restoring  50% [###############...............] "
	    "512M/1.0G 128M/s ETA 4s");
	gp_progress_format(line, sizeof(line), "restoring", 1LL << 30,
	    1LL << 30, 8000, 100);
	CHECK_STR(line,
	    "restoring 100% [##############################] "
	    "1.0G/1.0G 128M/s");
	/* Narrow: no bar. */
	gp_progress_format(line, sizeof(line), "restoring", 100, 400, 100, 40);
	CHECK_STR(line, "restoring 100B/400B - 25%");
	/* Unknown total. */
	gp_progress_format(line, sizeof(line), "uploading", 3 << 20, 0, 1000,
	    100);
	CHECK_STR(line, "uploading 3.0M 3.0M/s");
}

TEST(tokens_table)
{
	json_t *r = json_loads("{\"tokens\": [{\"id\": 1, \"name\": \"admin\","
	                       " \"role\": \"admin\", \"created_at\": "
	                       "\"2026-11-22T10:00:00.000Z\"}, {\"id\": 12, "
	                       "\"name\": \"prom\", \"role\": \"metrics\", "
	                       "\"created_at\": null}]}",
	    0, NULL);
	struct gp_buf out = {0};

	CHECK_EQ(gp_cli_render_tokens(r, &out), 0);
	gp_buf_append(&out, "", 1);
	CHECK_STR(out.data,
	    "ID  ROLE     NAME   CREATED\n"
	    " 1  admin    admin  2026-11-22T10:00:00.000Z\n"
	    "12  metrics  prom   -\n");
	gp_buf_free(&out);
	json_decref(r);
}

int
main(void)
{
	RUN(top_frame);
	RUN(top_width_and_height);
	RUN(top_bad_answer);
	RUN(top_wait_reasons);
	RUN(progress_text);
	RUN(tokens_table);
	return unit_report();
}
