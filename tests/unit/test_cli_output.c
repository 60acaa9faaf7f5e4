/*
 * test_cli_output.c: what the CLI prints: aligned tables, elapsed times,
 * sizes, and the ps and nodes tables built from coordinator replies.
 */
#include <stdlib.h>

#include "cli/cmd.h"
#include "gp.h"
#include "unit.h"

static const char *
elapsed(int64_t ms)
{
	static char out[32];

	gp_cli_format_elapsed(ms, out, sizeof(out));
	return out;
}

static const char *
mib(int64_t v)
{
	static char out[32];

	gp_cli_format_mib(v, out, sizeof(out));
	return out;
}

TEST(elapsed_format)
{
	CHECK_STR(elapsed(0), "0s");
	CHECK_STR(elapsed(999), "0s");
	CHECK_STR(elapsed(59000), "59s");
	CHECK_STR(elapsed(60000), "1:00");
	CHECK_STR(elapsed(303000), "5:03");
	CHECK_STR(elapsed(3723000), "1:02:03");
	CHECK_STR(elapsed((2 * 86400 + 3 * 3600 + 4 * 60 + 5) * 1000LL),
	    "2-03:04:05");
	CHECK_STR(elapsed(-5), "0s");
}

TEST(mib_format)
{
	CHECK_STR(mib(512), "512M");
	CHECK_STR(mib(1024), "1G");
	CHECK_STR(mib(40960), "40G");
	CHECK_STR(mib(1536), "1.5G");
	CHECK_STR(mib(1024 * 1024), "1T");
}

TEST(table_alignment)
{
	static const char *const header[] = {"ID", "NAME", "STATE"};
	const char *r1[] = {"7", "train", "running"};
	const char *r2[] = {"1234", NULL, "queued"};
	struct gp_buf out = {0};
	struct gp_table t;

	CHECK_EQ(gp_table_init(&t, 3, header), 0);
	t.right[0] = 1;
	CHECK_EQ(gp_table_add(&t, r1), 0);
	CHECK_EQ(gp_table_add(&t, r2), 0);
	CHECK_EQ(gp_table_render(&t, &out), 0);
	CHECK_EQ(gp_buf_append(&out, "", 1), 0);
	CHECK_STR(out.data,
	    "  ID  NAME   STATE\n"
	    "   7  train  running\n"
	    "1234  -      queued\n");
	gp_table_fini(&t);
	gp_buf_free(&out);
}

TEST(ps_table)
{
	const char *reply_text =
	    "{\"jobs\": ["
	    "{\"id\": 42, \"name\": \"train\", \"user\": \"alice\","
	    " \"group\": \"lab-a\","
	    " \"state\": \"running\", \"node\": \"lab-a\","
	    " \"started_at\": \"2026-11-22T21:00:00.000Z\","
	    " \"finished_at\": null, \"cancel_requested\": false,"
	    " \"request\": {\"gpus\": 2}},"
	    "{\"id\": 43, \"name\": \"eval\", \"user\": \"bob\","
	    " \"group\": \"lab-b\","
	    " \"state\": \"queued\", \"node\": null, \"started_at\": null,"
	    " \"hold_reason\": \"budget: ...\", \"request\": {\"gpus\": 1},"
	    " \"wait\": {\"reason\": \"held\", \"why\": \"budget\","
	    " \"position\": 1, \"expected_start\": null}},"
	    "{\"id\": 5, \"name\": \"x\", \"user\": \"bob\","
	    " \"interactive\": true,"
	    " \"state\": \"running\", \"node\": \"b\","
	    " \"started_at\": \"2026-11-22T20:00:00.000Z\","
	    " \"cancel_requested\": true, \"request\": {\"gpus\": 0}},"
	    "{\"id\": 44, \"name\": \"cpu\", \"user\": \"bob\","
	    " \"group\": \"lab-b\","
	    " \"state\": \"queued\", \"node\": null, \"started_at\": null,"
	    " \"request\": {\"gpus\": 0},"
	    " \"wait\": {\"reason\": \"resources\", \"why\": \"no node has 4"
	    " CPUs free now (at most 0 CPUs free on a node that could hold"
	    " it)\", \"position\": 2, \"expected_start\": null}}]}";
	json_t *reply = json_loads(reply_text, 0, NULL);
	struct gp_buf out = {0};
	int64_t now;

	CHECK(reply != NULL);
	CHECK_EQ(gp_parse_time("2026-11-22T21:05:03.000Z", &now), 0);
	CHECK_EQ(gp_cli_render_jobs(reply, now, &out), 0);
	CHECK_EQ(gp_buf_append(&out, "", 1), 0);
	CHECK_STR(out.data,
	    "ID  NAME   USER   GROUP  STATE           NODE   GPUS  ELAPSED  "
	    "WAIT\n"
	    "42  train  alice  lab-a  running         lab-a     2     5:03  "
	    "-\n"
	    "43  eval   bob    lab-b  held            -         1        -  "
	    "held\n"
	    " 5  x      bob    -      cancelling (i)  b         0  1:05:03  "
	    "-\n"
	    "44  cpu    bob    lab-b  queued          -         0        -  "
	    "resources: 4 CPUs\n");
	gp_buf_free(&out);
	json_decref(reply);
	reply = json_loads("{\"nodes\": []}", 0, NULL);
	CHECK_EQ(gp_cli_render_jobs(reply, now, &out), GP_EPROTO);
	gp_buf_free(&out);
	json_decref(reply);
}

TEST(queue_table)
{
	const char *reply_text =
	    "{\"queued\": 3, \"head\": 7, \"jobs\": ["
	    "{\"id\": 7, \"position\": 1, \"name\": \"big\", \"user\": \"alice\","
	    " \"group\": \"lab-a\", \"gpus\": 2, \"nodes\": 1,"
	    " \"gpu_share\": null, \"reason\": \"resources\","
	    " \"why\": \"no fitting GPU free now\","
	    " \"expected_start\": \"2026-11-22T22:00:00.000Z\"},"
	    "{\"id\": 9, \"position\": 2, \"name\": \"half\", \"user\": \"bob\","
	    " \"group\": \"lab-b\", \"gpus\": 1, \"nodes\": 1,"
	    " \"gpu_share\": 0.5, \"reason\": \"share\","
	    " \"why\": \"lab-a went first\", \"expected_start\": null},"
	    "{\"id\": 10, \"position\": 3, \"name\": \"gang\", \"user\": \"bob\","
	    " \"group\": \"lab-b\", \"gpus\": 2, \"nodes\": 3,"
	    " \"gpu_share\": null, \"reason\": \"gang\","
	    " \"why\": \"2 nodes free of 3\", \"expected_start\": null}]}";
	json_t *reply = json_loads(reply_text, 0, NULL);
	struct gp_buf out = {0};

	CHECK(reply != NULL);
	CHECK_EQ(gp_cli_render_queue(reply, &out), 0);
	CHECK_EQ(gp_buf_append(&out, "", 1), 0);
	CHECK_STR(out.data,
	    "POS  ID  NAME  USER   GROUP  GPUS  WAIT       WHY\n"
	    "  1   7  big   alice  lab-a     2  resources  no fitting GPU free "
	    "now\n"
	    "  2   9  half  bob    lab-b   0.5  share      lab-a went first\n"
	    "  3  10  gang  bob    lab-b   3x2  gang       2 nodes free of 3\n"
	    "job 7 holds the reservation: expected start "
	    "2026-11-22T22:00:00.000Z\n");
	gp_buf_free(&out);
	json_decref(reply);
	reply = json_loads("{\"nodes\": []}", 0, NULL);
	CHECK_EQ(gp_cli_render_queue(reply, &out), GP_EPROTO);
	gp_buf_free(&out);
	json_decref(reply);
}

TEST(job_elapsed)
{
	json_t *done =
	    json_loads("{\"state\": \"succeeded\","
	               " \"started_at\": \"2026-11-22T21:00:00.000Z\","
	               " \"finished_at\": \"2026-11-22T21:00:10.500Z\"}",
	        0, NULL);

	CHECK_EQ(gp_cli_job_elapsed(done, 0), 10500);
	json_decref(done);
}

TEST(nodes_table)
{
	const char *reply_text =
	    "{\"nodes\": ["
	    "{\"id\": 3, \"name\": \"lab-a\", \"group\": \"lab-a\","
	    " \"state\": \"up\", \"cpus\": 16,"
	    " \"mem_mib\": 65536, \"gpus\": ["
	    "  {\"index\": 0, \"model\": \"NVIDIA A100\", \"mem_mib\": 40960,"
	    "   \"job\": 42},"
	    "  {\"index\": 1, \"model\": \"NVIDIA A100\", \"mem_mib\": 40960,"
	    "   \"job\": 42},"
	    "  {\"index\": 2, \"model\": \"NVIDIA A100\", \"mem_mib\": 40960,"
	    "   \"job\": 7},"
	    "  {\"index\": 3, \"model\": \"NVIDIA A100\", \"mem_mib\": 40960,"
	    "   \"job\": null}]},"
	    "{\"id\": 4, \"name\": \"cpu-box\", \"state\": \"down\","
	    " \"cpus\": 4, \"mem_mib\": 8192, \"gpus\": []}]}";
	json_t *reply = json_loads(reply_text, 0, NULL);
	struct gp_buf out = {0};

	CHECK(reply != NULL);
	CHECK_EQ(gp_cli_render_nodes(reply, &out), 0);
	CHECK_EQ(gp_buf_append(&out, "", 1), 0);
	CHECK_STR(out.data,
	    "NODE     GROUP  STATE  GPUS  MODEL        GPU-MEM  CPUS  MEM  JOBS\n"
	    "lab-a    lab-a  up      3/4  NVIDIA A100      40G    16  64G  42,7\n"
	    "cpu-box  -      down    0/0  -                  -     4   8G  -\n");
	gp_buf_free(&out);
	json_decref(reply);
}

int
main(void)
{
	RUN(elapsed_format);
	RUN(mib_format);
	RUN(table_alignment);
	RUN(ps_table);
	RUN(queue_table);
	RUN(job_elapsed);
	RUN(nodes_table);
	return unit_report();
}
