/*
 * test_agent_parse.c: the agent's pure parsing: --fake-gpus specs, fake
 * GPU lists, and poll answers (good and bad).
 */
#include <stdlib.h>
#include <string.h>

#include "agent/assignment.h"
#include "agent/gpu.h"
#include "agent/overlay.h"
#include "gp.h"
#include "unit.h"

TEST(fake_spec)
{
	char model[96];
	int64_t mem;
	int n, cap = -1;

	CHECK_EQ(gp_gpu_fake_parse("2", &n, model, sizeof(model), &mem, NULL), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(model, "Fake GPU");
	CHECK_EQ(mem, 16384);
	CHECK_EQ(gp_gpu_fake_parse("4:A100:40960", &n, model, sizeof(model),
	    &mem, NULL), 0);
	CHECK_EQ(n, 4);
	CHECK_STR(model, "A100");
	CHECK_EQ(mem, 40960);
	CHECK_EQ(gp_gpu_fake_parse("1:H100:80G", &n, model, sizeof(model),
	    &mem, &cap), 0);
	CHECK_EQ(mem, 81920);
	CHECK_EQ(cap, 0);
	CHECK_EQ(gp_gpu_fake_parse("1:H100:80G:9.0", &n, model, sizeof(model),
	    &mem, &cap), 0);
	CHECK_EQ(cap, 90);
	CHECK_EQ(gp_gpu_fake_parse("1:T4:16G:7.5", &n, model, sizeof(model),
	    &mem, &cap), 0);
	CHECK_EQ(cap, 75);
	CHECK_EQ(gp_gpu_fake_parse("1:T4:16G:seven", &n, model, sizeof(model),
	    &mem, &cap), GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("1:T4:16G:", &n, model, sizeof(model),
	    &mem, &cap), GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("0", &n, model, sizeof(model), &mem, NULL), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(gp_gpu_fake_parse("", &n, model, sizeof(model), &mem, NULL),
	    GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("x", &n, model, sizeof(model), &mem, NULL),
	    GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("65", &n, model, sizeof(model), &mem, NULL),
	    GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("-1", &n, model, sizeof(model), &mem, NULL),
	    GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("2::100", &n, model, sizeof(model), &mem, NULL),
	    GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("2:A:0", &n, model, sizeof(model), &mem, NULL),
	    GP_EINVAL);
	CHECK_EQ(gp_gpu_fake_parse("2:A:lots", &n, model, sizeof(model),
	    &mem, NULL), GP_EINVAL);
}

TEST(fake_list)
{
	struct gp_gpu_set set;
	char err[256];

	CHECK_EQ(gp_gpu_open("3:T4:15360", "lab-a", &set, err, sizeof(err)),
	    0);
	CHECK_EQ(set.n, 3);
	CHECK_STR(set.gpus[2].uuid, "GPU-fake-lab-a-2");
	CHECK_STR(set.gpus[0].model, "T4");
	CHECK_EQ(set.gpus[1].mem_mib, 15360);
	CHECK_EQ(set.gpus[1].index, 1);
	gp_gpu_close(&set);
	CHECK(gp_gpu_open("nope", "lab-a", &set, err, sizeof(err)) != 0);
	CHECK(strstr(err, "--fake-gpus") != NULL);
}

TEST(discover)
{
	struct gp_gpu_info *gpus = NULL;
	char err[256] = "";
	int n = -1, ret;

	CHECK_EQ(gp_gpu_discover("2", &gpus, &n, err, sizeof(err)), 0);
	CHECK_EQ(n, 2);
	free(gpus);
	/* Without NVML on this machine: no GPUs and a reason, no crash. */
	ret = gp_gpu_discover(NULL, &gpus, &n, err, sizeof(err));
	CHECK(ret == 0 || ret == GP_ENOENT || ret == GP_EIO);
	if (ret == GP_ENOENT)
		CHECK(n == 0 && gpus == NULL && strstr(err, "NVML") != NULL);
	if (ret == 0)
		free(gpus);
}

static int
decode(const char *text, struct gp_poll_answer *a)
{
	char err[256];

	return gp_assignment_decode(text, strlen(text), a, err, sizeof(err));
}

TEST(assignment_good)
{
	struct gp_poll_answer a;

	CHECK_EQ(decode("{\"assignments\":[{\"job_id\":42,\"attempt\":1,"
	    "\"name\":\"train\",\"user\":\"alice\",\"command\":[\"python3\","
	    "\"train.py\"],\"env\":{\"EPOCHS\":\"3\"},\"gpus\":[0,1],"
	    "\"cpus\":2,\"mem_mib\":512,\"time_limit_s\":3600,"
	    "\"future_field\":true}],\"cancels\":[{\"job_id\":17,"
	    "\"attempt\":2}]}", &a), 0);
	CHECK_EQ(a.nassignments, 1);
	CHECK_EQ(a.assignments[0].id.job_id, 42);
	CHECK_EQ(a.assignments[0].argc, 2);
	CHECK_STR(a.assignments[0].argv[1], "train.py");
	CHECK(a.assignments[0].argv[2] == NULL);
	CHECK_STR(a.assignments[0].env[0], "EPOCHS=3");
	CHECK_EQ(a.assignments[0].ngpus, 2);
	CHECK_EQ(a.assignments[0].gpus[1], 1);
	CHECK_EQ(a.assignments[0].cpus, 2);
	CHECK_EQ(a.assignments[0].mem_mib, 512);
	CHECK_EQ(a.assignments[0].time_limit_s, 3600);
	CHECK_STR(a.assignments[0].name, "train");
	CHECK_EQ(a.ncancels, 1);
	CHECK_EQ(a.cancels[0].attempt, 2);
	gp_poll_answer_fini(&a);
	CHECK_EQ(decode("{}", &a), 0);
	CHECK_EQ(a.nassignments + a.ncancels + a.nstops, 0);
	gp_poll_answer_fini(&a);
}

TEST(assignment_share_gang_stops)
{
	struct gp_poll_answer a;

	CHECK_EQ(decode("{\"assignments\":[{\"job_id\":4,\"attempt\":1,"
	    "\"command\":[\"x\"],\"gpus\":[2],\"gpu_milli\":500,"
	    "\"gpu_mem_mib\":8192},{\"job_id\":5,\"attempt\":2,"
	    "\"command\":[\"y\"],\"gpus\":[0,1],\"gang\":{\"part\":2,"
	    "\"parts\":3,\"gpus_per_node\":2,\"master_addr\":\"10.0.0.7\","
	    "\"master_port\":29511}}],\"stops\":[{\"job_id\":9,"
	    "\"attempt\":1,\"reason\":\"preempted\"},{\"job_id\":5,"
	    "\"attempt\":1,\"reason\":\"gang_stopped\"}]}", &a), 0);
	CHECK_EQ(a.nassignments, 2);
	CHECK_EQ(a.assignments[0].gpu_milli, 500);
	CHECK_EQ(a.assignments[0].gpu_mem_mib, 8192);
	CHECK_EQ(a.assignments[0].parts, 0);
	CHECK_EQ(a.assignments[1].gpu_milli, 0);
	CHECK_EQ(a.assignments[1].part, 2);
	CHECK_EQ(a.assignments[1].parts, 3);
	CHECK_EQ(a.assignments[1].gpus_per_node, 2);
	CHECK_STR(a.assignments[1].master_addr, "10.0.0.7");
	CHECK_EQ(a.assignments[1].master_port, 29511);
	CHECK_EQ(a.nstops, 2);
	CHECK_EQ(a.stops[0].id.job_id, 9);
	CHECK_STR(a.stops[0].reason, "preempted");
	CHECK_STR(a.stops[1].reason, "gang_stopped");
	gp_poll_answer_fini(&a);
}

TEST(wg_keys)
{
	char priv[GP_WG_KEY_LEN], pub[GP_WG_KEY_LEN], again[GP_WG_KEY_LEN];

	/* a pair made by `wg genkey | tee /dev/stderr | wg pubkey` */
	CHECK_EQ(gp_wg_pubkey("uFkjxn3mdIyhaH7LqJB6QkSZ+OxeO8qKijgBTj5G5Wc=", pub), 0);
	CHECK_STR(pub, "9eepCSsn2Gk9Yk8ZexzFLYWW7Blv3meT4KQsLxO2AAw=");
	CHECK_EQ(gp_wg_keypair(priv, pub), 0);
	CHECK(gp_wg_key_valid(priv));
	CHECK(gp_wg_key_valid(pub));
	CHECK(strcmp(priv, pub) != 0);
	CHECK_EQ(gp_wg_pubkey(priv, again), 0);
	CHECK_STR(again, pub);
	CHECK(!gp_wg_key_valid(NULL));
	CHECK(!gp_wg_key_valid(""));
	CHECK(!gp_wg_key_valid("uFkjxn3mdIyhaH7LqJB6QkSZ+OxeO8qKijgBTj5G5Wc"));   /* 43 characters */
	CHECK(!gp_wg_key_valid("uFkjxn3mdIyhaH7LqJB6QkSZ+OxeO8qKijgBTj5G5Wc==")); /* 45 */
	CHECK(!gp_wg_key_valid("uFkjxn3mdIyhaH7LqJB6QkSZ+OxeO8qKijgBTj5G5Wc*"));  /* not base64 */
	CHECK_EQ(gp_wg_pubkey("nope", pub), GP_EINVAL);
	CHECK(gp_overlay_endpoint_valid("203.0.113.2:51821"));
	CHECK(gp_overlay_endpoint_valid("gpu-7.lab:1"));
	CHECK(!gp_overlay_endpoint_valid("203.0.113.2"));
	CHECK(!gp_overlay_endpoint_valid("203.0.113.2:0"));
	CHECK(!gp_overlay_endpoint_valid("203.0.113.2:65536"));
	CHECK(!gp_overlay_endpoint_valid("203.0.113.2:5x"));
	CHECK(!gp_overlay_endpoint_valid(":51820"));
	CHECK(!gp_overlay_endpoint_valid("h;rm:1"));
	CHECK(!gp_overlay_endpoint_valid("203.0.113.2:"));
}

TEST(overlay_mode)
{
	enum gp_overlay_mode m = GP_OVERLAY_AUTO;

	CHECK_EQ(gp_overlay_mode_parse("off", &m), 0);
	CHECK_EQ(m, GP_OVERLAY_OFF);
	CHECK_EQ(gp_overlay_mode_parse("always", &m), 0);
	CHECK_EQ(m, GP_OVERLAY_ALWAYS);
	CHECK_EQ(gp_overlay_mode_parse("auto", &m), 0);
	CHECK_EQ(m, GP_OVERLAY_AUTO);
	CHECK_STR(gp_overlay_mode_name(GP_OVERLAY_ALWAYS), "always");
	CHECK_EQ(gp_overlay_mode_parse("on", &m), GP_EINVAL);
	CHECK_EQ(gp_overlay_mode_parse("", &m), GP_EINVAL);
	CHECK_EQ(gp_overlay_mode_parse("Auto", &m), GP_EINVAL);
	CHECK_EQ(m, GP_OVERLAY_AUTO);
}

TEST(assignment_overlay)
{
	struct gp_poll_answer a;

	/* an assignment without gang.overlay: none (as older coordinators) */
	CHECK_EQ(decode("{\"assignments\":[{\"job_id\":4,\"attempt\":1,"
	    "\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":2,"
	    "\"master_addr\":\"h\",\"master_port\":1}}]}", &a), 0);
	CHECK(a.assignments[0].overlay_peers == NULL);
	gp_poll_answer_fini(&a);
	/* part 0's own private key goes with it (of its entry's key) */
#define OV_PEERS "\"overlay\":[" \
	    "{\"key\":\"OU8LLPJ3GlDMY2YI6FgeY505atiVsbub+JbpaguRp2E=\",\"endpoint\":\"198.51.100.2:51820\"}," \
	    "null,{\"key\":\"uFkjxn3mdIyhaH7LqJB6QkSZ+OxeO8qKijgBTj5G5Wc=\",\"endpoint\":\"203.0.113.2:51821\"," \
	    "\"later\":1}]"
#define OV_HEAD "{\"assignments\":[{\"job_id\":4,\"attempt\":1," \
	    "\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":3," \
	    "\"master_addr\":\"h\",\"master_port\":1,"
	CHECK_EQ(decode(OV_HEAD OV_PEERS ",\"overlay_private_key\":"
	    "\"YMUveLusxSLq/8Rrdk3/I2JXtBcXuXcxytcJshXcmE8=\"}}]}", &a), 0);
	CHECK_EQ(a.nassignments, 1);
	CHECK(a.assignments[0].overlay_peers != NULL);
	CHECK_STR(a.assignments[0].overlay_peers[0].key, "OU8LLPJ3GlDMY2YI6FgeY505atiVsbub+JbpaguRp2E=");
	CHECK_STR(a.assignments[0].overlay_peers[0].endpoint,
	    "198.51.100.2:51820");
	CHECK_STR(a.assignments[0].overlay_peers[1].key, "");
	CHECK_STR(a.assignments[0].overlay_peers[2].endpoint,
	    "203.0.113.2:51821");
	CHECK_STR(a.assignments[0].overlay_priv, "YMUveLusxSLq/8Rrdk3/I2JXtBcXuXcxytcJshXcmE8=");
	CHECK_EQ(a.assignments[0].overlay_relay.port, 0);
	gp_poll_answer_fini(&a);
	/* the coordinator's relay: its port and this part's key */
#define OV_PRIV ",\"overlay_private_key\":" \
	    "\"YMUveLusxSLq/8Rrdk3/I2JXtBcXuXcxytcJshXcmE8=\""
	CHECK_EQ(decode(OV_HEAD OV_PEERS OV_PRIV ",\"overlay_relay\":"
	    "{\"port\":7070,\"key\":"
	    "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"}}}]}", &a), 0);
	CHECK_EQ(a.assignments[0].overlay_relay.port, 7070);
	CHECK_EQ(a.assignments[0].overlay_relay.attempt, 1);
	CHECK_EQ(a.assignments[0].overlay_relay.key[31], 31);
	gp_poll_answer_fini(&a);
	/* a bad port or key: refused */
	CHECK(decode(OV_HEAD OV_PEERS OV_PRIV ",\"overlay_relay\":"
	    "{\"port\":0,\"key\":"
	    "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"}}}]}", &a) != 0);
	gp_poll_answer_fini(&a);
	CHECK(decode(OV_HEAD OV_PEERS OV_PRIV ",\"overlay_relay\":"
	    "{\"port\":7070,\"key\":\"AAEC\"}}}]}", &a) != 0);
	gp_poll_answer_fini(&a);
	CHECK(decode(OV_HEAD OV_PEERS OV_PRIV ",\"overlay_relay\":7070}}]}",
	    &a) != 0);
#undef OV_PRIV
	gp_poll_answer_fini(&a);
	/* no private key, or not the part's own: refused */
	CHECK(decode(OV_HEAD OV_PEERS "}}]}", &a) != 0);
	gp_poll_answer_fini(&a);
	CHECK(decode(OV_HEAD OV_PEERS ",\"overlay_private_key\":"
	    "\"9eepCSsn2Gk9Yk8ZexzFLYWW7Blv3meT4KQsLxO2AAw=\"}}]}", &a) != 0);
	gp_poll_answer_fini(&a);
#undef OV_HEAD
#undef OV_PEERS
}

TEST(assignment_bad)
{
	static const char *bad[] = {
		"",
		"[]",
		"{\"assignments\":{}}",
		"{\"assignments\":[1]}",
		"{\"assignments\":[{\"attempt\":1,\"command\":[\"x\"]}]}",
		"{\"assignments\":[{\"job_id\":0,\"attempt\":1,"
		"\"command\":[\"x\"]}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[]}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"\"]}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[7]}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"env\":{\"A\":1}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"env\":{\"A-B\":\"1\"}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gpus\":[64]}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gpus\":[1,1]}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"mem_mib\":-1}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"time_limit_s\":\"1h\"}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"name\":5}]}",
		"{\"cancels\":[{\"job_id\":1}]}",
		"{\"cancels\":{}}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gpu_milli\":1000}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gpus\":[0,1],\"gpu_milli\":500}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gang\":{\"part\":3,\"parts\":3,"
		"\"master_addr\":\"h\",\"master_port\":1}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":2,"
		"\"master_addr\":\"h;rm\",\"master_port\":1}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":2,"
		"\"master_addr\":\"h\",\"master_port\":70000}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":2,"
		"\"master_addr\":\"h\",\"master_port\":1,"
		"\"overlay\":[null]}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":2,"
		"\"master_addr\":\"h\",\"master_port\":1,"
		"\"overlay\":[null,{\"key\":\"x\",\"endpoint\":\"h:1\"}]}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":2,"
		"\"master_addr\":\"h\",\"master_port\":1,"
		"\"overlay\":[null,{\"key\":\"9eepCSsn2Gk9Yk8ZexzFLYWW7Blv3meT4KQsLxO2AAw=\","
		"\"endpoint\":\"h\"}]}}]}",
		"{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
		"\"command\":[\"x\"],\"gang\":{\"part\":0,\"parts\":2,"
		"\"master_addr\":\"h\",\"master_port\":1,"
		"\"overlay\":[7,null]}}]}",
		"{\"stops\":[{\"job_id\":1,\"attempt\":1}]}",
		"{\"stops\":[{\"job_id\":1,\"attempt\":1,\"reason\":\"x\"}]}",
		"{\"stops\":{}}",
		"{\"a\":1,\"a\":2}",
	};
	struct gp_poll_answer a;

	for (size_t i = 0; i < GP_ARRAY_LEN(bad); i++) {
		int ret = decode(bad[i], &a);
		if (ret != GP_EINVAL)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK_EQ(ret, GP_EINVAL);
		CHECK_EQ(a.nassignments, 0);
		gp_poll_answer_fini(&a);
	}
}

int
main(void)
{
	RUN(fake_spec);
	RUN(fake_list);
	RUN(discover);
	RUN(assignment_good);
	RUN(assignment_share_gang_stops);
	RUN(wg_keys);
	RUN(overlay_mode);
	RUN(assignment_overlay);
	RUN(assignment_bad);
	return unit_report();
}
