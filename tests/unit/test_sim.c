/*
 * test_sim.c: the trace reader (src/sim/trace.c) and the simulator
 * (src/sim/sim.c) on small hand-made traces with known answers: the FGD
 * protocol on a tiny cluster, and a replay with a queue and labs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "sim/sim.h"
#include "unit.h"

static int
parse(const char *nodes, const char *pods, struct gp_trace *t, char *err,
    size_t errlen)
{
	int rc;

	memset(t, 0, sizeof(*t));
	rc = gp_trace_parse_nodes(nodes, strlen(nodes), t, err, errlen);
	if (rc == 0 && pods != NULL)
		rc = gp_trace_parse_pods(pods, strlen(pods), t, err, errlen);
	return rc;
}

TEST(trace_reads_the_published_format)
{
	struct gp_trace t;
	char err[256];

	CHECK_EQ(
	    parse("sn,cpu_milli,memory_mib,gpu,model\n"
	          "openb-node-0000,64000,262144,2,P100\n"
	          "openb-node-0001,96000,393216,8,G2\n"
	          "\n"
	          "openb-node-0002,32000,131072,0,nan\n",
	        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
	        "pod_phase,creation_time,deletion_time,scheduled_time\n"
	        "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
	        "openb-pod-0001,6000,12288,1,460,V100M16|V100M32,BE,Failed,"
	        "5,20,6\n"
	        "openb-pod-0002,8000,30517,0,0,,LS,Running,7,,\n"
	        "\"openb-pod-0003\",4000,1,2,1000,\"G2\",LS,Running,8,9,8\n",
	        &t, err, sizeof(err)),
	    0);
	CHECK_EQ(t.nnodes, 3);
	CHECK_EQ(t.npods, 4);
	if (t.nnodes == 3 && t.npods == 4) {
		CHECK_STR(t.nodes[0].model, "P100");
		CHECK_EQ(t.nodes[1].gpus, 8);
		CHECK_EQ(t.nodes[1].cpu_milli, 96000);
		CHECK_STR(t.nodes[2].model, "");
		CHECK_EQ(t.pods[1].gpu_milli, 460);
		CHECK_STR(t.pods[1].gpu_spec, "V100M16|V100M32");
		CHECK_EQ(t.pods[1].creation, 5);
		CHECK_EQ(t.pods[1].scheduled, 6);
		CHECK_EQ(t.pods[2].num_gpu, 0);
		CHECK_EQ(t.pods[2].deletion, -1);
		CHECK_STR(t.pods[3].name, "openb-pod-0003");
		CHECK_EQ(t.pods[3].num_gpu, 2);
	}
	gp_trace_free(&t);
	CHECK_EQ(gp_trace_model_mem("V100M32"), 32510);
	CHECK_EQ(gp_trace_model_mem("G2"), 0);

	/* The multigpu trace has only the first five columns. */
	CHECK_EQ(parse("sn,cpu_milli,memory_mib,gpu,model\nn,1000,1,1,T4\n",
	             "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
	             "p,1000,1,4,1000\n",
	             &t, err, sizeof(err)),
	    0);
	CHECK_EQ(t.npods, 1);
	gp_trace_free(&t);
}

TEST(trace_refuses_bad_input)
{
	static const struct {
		const char *pods, *want;
	} bad[] = {
	    {"name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n",
	        "no column 'gpu_milli'"},
	    {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,x,1,1,1000\n",
	        "line 2: cpu_milli: bad number 'x'"},
	    {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n",
	        "a share of a GPU"},
	    {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,0\n",
	        "with gpu_milli 0"},
	    {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,99,1000\n",
	        "num_gpu: bad number"},
	    {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1001\n",
	        "gpu_milli: bad number"},
	    {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,-1,1,1,1000\n",
	        "cpu_milli: bad number"},
	    {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\"p,1,1,1,1000\n",
	        "line"},
	    {"", "no header"},
	};
	struct gp_trace t;
	char err[256], longname[400];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&t, 0, sizeof(t));
		CHECK_EQ(gp_trace_parse_pods(bad[i].pods, strlen(bad[i].pods),
		             &t, err, sizeof(err)),
		    GP_EINVAL);
		if (strstr(err, bad[i].want) == NULL)
			fprintf(stderr, "case %zu: '%s'\n", i, err);
		CHECK(strstr(err, bad[i].want) != NULL);
		gp_trace_free(&t);
	}
	/* A name longer than a field may be. */
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	{
		char buf[600];
		snprintf(buf, sizeof(buf),
		    "sn,cpu_milli,memory_mib,gpu,model\n%s,1,1,1,T4\n",
		    longname);
		memset(&t, 0, sizeof(t));
		CHECK_EQ(gp_trace_parse_nodes(buf, strlen(buf), &t, err,
		             sizeof(err)),
		    GP_EINVAL);
		CHECK(strstr(err, "longer") != NULL);
		gp_trace_free(&t);
	}
	memset(&t, 0, sizeof(t));
	CHECK_EQ(gp_trace_load("/nonexistent/n.csv", "/nonexistent/p.csv", &t,
	             err, sizeof(err)),
	    GP_ENOENT);
	CHECK(strstr(err, "/nonexistent/n.csv") != NULL);
}

/*
 * The FGD protocol on a tiny cluster: one node, 2 GPUs, 4 CPUs. Pods of
 * one GPU and 3 CPUs: the first fits, the second fails (CPUs), so at
 * 100% arrived half the GPUs are unallocated.
 */
TEST(fgd_protocol_known_answers)
{
	struct gp_trace t;
	struct gp_sim_opts o;
	struct gp_sim_fgd_result r;
	char err[256];

	CHECK_EQ(
	    parse("sn,cpu_milli,memory_mib,gpu,model\nn0,4000,65536,2,T4\n",
	        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	        "p0,3000,1024,1,1000,\np1,3000,1024,1,1000,\n",
	        &t, err, sizeof(err)),
	    0);
	memset(&o, 0, sizeof(o));
	o.seed = 42;
	o.inflate = 1.0; /* exactly the two pods */
	o.policy = gp_sched_policy_find("bestfit");
	CHECK_EQ(gp_sim_fgd(&t, &o, &r), 0);
	CHECK_EQ(r.gpus, 2);
	CHECK_EQ(r.pods, 2);
	CHECK_EQ(r.pods_failed, 1);
	CHECK(r.unallocated_pct_at_100 > 49.99 &&
	    r.unallocated_pct_at_100 < 50.01);
	gp_trace_free(&t);

	/* Shares: 600 + 400 on one GPU, then 1000 on the other: nothing
	 * unallocated at 100%; inflated to 1.5x, one more whole pod or
	 * share fails and the GPUs stay full. */
	CHECK_EQ(
	    parse("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,65536,2,T4\n",
	        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	        "a,1000,1024,1,600,\nb,1000,1024,1,400,\n"
	        "c,1000,1024,1,1000,T4\n",
	        &t, err, sizeof(err)),
	    0);
	o.inflate = 1.5;
	o.policy = NULL; /* frag */
	CHECK_EQ(gp_sim_fgd(&t, &o, &r), 0);
	CHECK(r.unallocated_pct_at_100 < 0.01);
	CHECK(r.pods > 3);
	CHECK(r.unallocated_pct_at_130 < 0.01);
	CHECK(r.pods_failed > 0);
	CHECK(r.decisions_per_s > 0);
	gp_trace_free(&t);

	/* A model no node has: every pod fails. */
	CHECK_EQ(
	    parse("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,65536,1,T4\n",
	        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	        "a,1000,1024,1,1000,A10\n",
	        &t, err, sizeof(err)),
	    0);
	o.inflate = 1.0;
	CHECK_EQ(gp_sim_fgd(&t, &o, &r), 0);
	CHECK_EQ(r.pods_failed, r.pods);
	CHECK(r.unallocated_pct_at_100 > 99.99);
	gp_trace_free(&t);
}

/*
 * The default policy on one trace of the Alibaba cluster
 * (../shared/data/traces): at 100% arrived, seed 42, it must leave at
 * least 5% less unallocated than the FGD artifact's published mean for
 * that trace. SKIP when the trace is not there.
 */
static void
frag_beats_fgd_on(const char *variant, double published_pct)
{
	const char *dir = "../shared/data/traces";
	char nodes[256], pods[256], err[256];
	struct gp_trace t;
	struct gp_sim_opts o;
	struct gp_sim_fgd_result r;
	FILE *f;

	snprintf(nodes, sizeof(nodes), "%s/openb_node_list_gpu_node.csv", dir);
	snprintf(pods, sizeof(pods), "%s/openb_pod_list_%s.csv", dir, variant);
	if ((f = fopen(pods, "r")) == NULL) {
		UNIT_SKIP("traces", "a trace of ../shared/data/traces is missing");
		return;
	}
	fclose(f);
	memset(&t, 0, sizeof(t));
	CHECK_EQ(gp_trace_load(nodes, pods, &t, err, sizeof(err)), 0);
	memset(&o, 0, sizeof(o));
	o.seed = 42;
	o.inflate = 1.3;
	CHECK_EQ(gp_sim_fgd(&t, &o, &r), 0);
	CHECK_EQ(r.gpus, 6212);
	CHECK(r.unallocated_pct_at_100 < 0.95 * published_pct);
	if (r.unallocated_pct_at_100 >= 0.95 * published_pct)
		fprintf(stderr, "%s: %.2f%% unallocated\n", variant,
		    r.unallocated_pct_at_100);
	gp_trace_free(&t);
}

/*
 * GPU-type-constrained (25% of the pods name a model): published FGD
 * 6.09%. Before the contention term the default left 8.2%.
 */
TEST(frag_beats_fgd_on_a_model_constrained_trace)
{
	frag_beats_fgd_on("gpuspec25", 6.09);
}

/*
 * Multi-GPU (20% of the GPUs asked by pods of 2 to 8 GPUs): published FGD
 * 4.47%. Without the node contention term it left 4.26% (the target is
 * 4.2465), with it 4.14.
 */
TEST(frag_beats_fgd_on_a_multi_gpu_trace)
{
	frag_beats_fgd_on("multigpu20", 4.47);
}

/*
 * GPU-share heavy (40% of the GPU pods ask for a share): published FGD
 * 6.04% (target 5.738). Before the unfed measure the default left 5.83%
 * on seed 42 (5.84 over seeds 42..51), with it 5.62.
 */
TEST(frag_beats_fgd_on_a_share_heavy_trace)
{
	frag_beats_fgd_on("gpushare40", 6.04);
}

/*
 * Multi-GPU, 30% of the GPUs asked by pods of 2 to 8 GPUs: published FGD
 * 3.64% (target 3.458). Before the unfed measure the default left 3.75%
 * on seed 42, more than the published FGD; with it 3.20.
 */
TEST(frag_beats_fgd_on_a_heavier_multi_gpu_trace)
{
	frag_beats_fgd_on("multigpu30", 3.64);
}

/* The owners' patterns: the same seed draws the same owner, another
 * seed another; office hours only on working days; a deadline's three
 * days take every GPU; a semester break takes none. */
TEST(campus_owner_patterns_by_seed)
{
	struct gp_campus_owner a, b, c;
	int64_t t, horizon = 28 * 86400LL;
	int same = 1, differ = 0, lab, in_crunch = 0;

	CHECK_EQ(gp_campus_pattern_parse("office"), GP_CAMPUS_OFFICE);
	CHECK_EQ(gp_campus_pattern_parse("semester"), GP_CAMPUS_SEMESTER);
	CHECK_EQ(gp_campus_pattern_parse("weekly"), -1);
	CHECK_STR(gp_campus_pattern_name(GP_CAMPUS_DEADLINE), "deadline");
	for (lab = 0; lab < 4; lab++) {
		gp_campus_owner_draw(42, lab, GP_CAMPUS_DEADLINE, horizon, &a);
		gp_campus_owner_draw(42, lab, GP_CAMPUS_DEADLINE, horizon, &b);
		gp_campus_owner_draw(43, lab, GP_CAMPUS_DEADLINE, horizon, &c);
		for (t = 0; t < horizon; t += 600) {
			same &= gp_campus_owner_gpus(&a, t, 8) ==
			    gp_campus_owner_gpus(&b, t, 8);
			differ |= gp_campus_owner_gpus(&a, t, 8) !=
			    gp_campus_owner_gpus(&c, t, 8);
		}
		CHECK(a.ndeadlines > 0);
		/* The day before the first deadline: all 8, even at 3:00. */
		t = a.deadline[0] - 86400 + 3 * 3600 - (a.deadline[0] % 86400);
		in_crunch += gp_campus_owner_gpus(&a, t, 8) == 8;
	}
	CHECK(same);
	CHECK(differ);
	CHECK_EQ(in_crunch, 4);

	/* Office: Monday at noon some GPUs, never all at night or on
	 * Sunday; share in [0.25, 0.75]. */
	gp_campus_owner_draw(7, 0, GP_CAMPUS_OFFICE, horizon, &a);
	CHECK(a.share >= 0.25 && a.share <= 0.75);
	CHECK(gp_campus_owner_gpus(&a, 12 * 3600, 8) > 0);
	CHECK(gp_campus_owner_gpus(&a, 12 * 3600, 8) < 8);
	CHECK_EQ(gp_campus_owner_gpus(&a, 3 * 3600, 8), 0);
	CHECK_EQ(gp_campus_owner_gpus(&a, 6 * 86400 + 12 * 3600, 8), 0);
	CHECK_EQ(gp_campus_owner_gpus(&a, 12 * 3600, 0), 0);

	/* Semester: a break of 7 to 10 days in the second half, nobody. */
	gp_campus_owner_draw(7, 0, GP_CAMPUS_SEMESTER, horizon, &a);
	CHECK(a.break_from >= horizon / 2);
	CHECK(a.break_to - a.break_from >= 7 * 86400);
	CHECK(a.break_to - a.break_from <= 10 * 86400);
	for (t = a.break_from; t < a.break_to; t += 3600)
		same &= gp_campus_owner_gpus(&a, t, 8) == 0;
	CHECK(same);

	/* Mixed: every lab one of the three. */
	for (lab = 0; lab < 16; lab++) {
		gp_campus_owner_draw(9, lab, GP_CAMPUS_MIXED, horizon, &a);
		CHECK(a.pattern >= GP_CAMPUS_OFFICE &&
		    a.pattern <= GP_CAMPUS_SEMESTER);
	}
}

/* What a move costs, by hand: 2 GiB per GPU written at 183 MB/s,
 * uploaded at 288.1, downloaded at 747.7, a 30 s grace, uploads every
 * 600 s while it runs. */
TEST(campus_move_cost_arithmetic)
{
	struct gp_campus_costs c;
	struct gp_campus_move m;

	gp_campus_costs_default(&c);
	/* One GPU: 11.2 s to write (within the grace), then the upload. */
	gp_campus_move_cost(&c, 1, 1, 5000, &m);
	CHECK_EQ(m.outcome, GP_CAMPUS_SAVED);
	CHECK(fabs(m.stop_s - (2048 / 183.0 + 2048 / 288.1)) < 1e-9);
	CHECK(fabs(m.start_s - 2048 / 747.7) < 1e-9);
	CHECK(m.lost_s == 0);
	/* Four GPUs: 44.8 s to write, past the grace: killed at 30 s,
	 * back to the upload at 4800 s of 5000. */
	gp_campus_move_cost(&c, 4, 1, 5000, &m);
	CHECK_EQ(m.outcome, GP_CAMPUS_PARTIAL);
	CHECK(fabs(m.stop_s - 30) < 1e-9);
	CHECK(fabs(m.lost_s - 200) < 1e-9);
	CHECK(fabs(m.start_s - 4 * 2048 / 747.7) < 1e-9);
	/* ... and before its first upload: from the start. */
	gp_campus_move_cost(&c, 4, 1, 500, &m);
	CHECK_EQ(m.outcome, GP_CAMPUS_RESTARTED);
	CHECK(fabs(m.lost_s - 500) < 1e-9);
	CHECK(m.start_s == 0);
	/* A job that never checkpoints: the grace, then all is lost. */
	gp_campus_move_cost(&c, 1, 0, 5000, &m);
	CHECK_EQ(m.outcome, GP_CAMPUS_RESTARTED);
	CHECK(fabs(m.stop_s - 30) < 1e-9);
	CHECK(fabs(m.lost_s - 5000) < 1e-9);
	/* A longer grace lets the four-GPU job save. */
	c.grace_s = 60;
	gp_campus_move_cost(&c, 4, 1, 5000, &m);
	CHECK_EQ(m.outcome, GP_CAMPUS_SAVED);
	CHECK(m.lost_s == 0);
}

TEST(jain_index)
{
	double eq[4] = {0.5, 0.5, 0.5, 0.5}, one[4] = {1, 0, 0, 0},
	       two[2] = {1, 3};

	CHECK(fabs(gp_sim_jain(eq, 4) - 1) < 1e-12);
	CHECK(fabs(gp_sim_jain(one, 4) - 0.25) < 1e-12);
	CHECK(fabs(gp_sim_jain(two, 2) - 16.0 / 20.0) < 1e-12);
	CHECK(fabs(gp_sim_jain(eq, 0) - 1) < 1e-12);
}

/* A small campus on a hand-made trace: pooling serves at least what the
 * labs alone serve, the same demand on both sides, and the seed makes it
 * the same again. */
TEST(campus_small_known_shape)
{
	struct gp_trace t;
	struct gp_campus_opts o;
	struct gp_campus_result a, b;
	char err[256];

	CHECK_EQ(parse("sn,cpu_milli,memory_mib,gpu,model\n"
	               "n0,32000,131072,4,T4\nn1,32000,131072,2,T4\n",
	             "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	             "p0,4000,8192,1,1000,\np1,4000,8192,2,1000,\n"
	             "p2,2000,4096,1,500,\n",
	             &t, err, sizeof(err)),
	    0);
	{
		const char *rt = "runtime\n600\n3600.0\n7200\n86400\n";
		CHECK_EQ(gp_trace_parse_runtimes(rt, strlen(rt), &t, err,
		             sizeof(err)),
		    0);
		CHECK_EQ(t.nruntimes, 4);
		CHECK_EQ(t.runtimes[1], 3600);
		rt = "runtime\n-5\n";
		CHECK_EQ(gp_trace_parse_runtimes(rt, strlen(rt), &t, err,
		             sizeof(err)),
		    GP_EINVAL);
		CHECK(strstr(err, "runtime") != NULL);
		CHECK_EQ(t.nruntimes, 4);
	}
	memset(&o, 0, sizeof(o));
	o.seed = 42;
	o.labs = 3;
	o.lab_nodes = 1;
	o.days = 7;
	o.load = 0.6;
	o.interactive = 0.3;
	o.ckpt_share = 0.8;
	o.pattern = GP_CAMPUS_DEADLINE;
	gp_campus_costs_default(&o.costs);
	CHECK_EQ(gp_sim_campus(&t, &o, &a), 0);
	CHECK_EQ(gp_sim_campus(&t, &o, &b), 0);
	CHECK_EQ(a.labs, 3);
	CHECK_EQ(a.nodes, 3);
	CHECK(a.pooled.jobs > 0);
	CHECK_EQ(a.pooled.jobs, a.alone.jobs);
	CHECK_EQ(a.pooled.sessions, a.alone.sessions);
	CHECK_EQ(a.pooled.jobs_done, b.pooled.jobs_done);
	CHECK(fabs(a.pooled.util_pct - b.pooled.util_pct) < 1e-9);
	CHECK(fabs(a.pooled.owner_pct - a.alone.owner_pct) < 1e-6);
	CHECK(a.pooled.util_pct <= 100 + 1e-9);
	CHECK(a.pooled.pool_pct >= a.alone.pool_pct - 1e-9);
	CHECK(a.pooled.migrations ==
	    a.pooled.saved + a.pooled.partial + a.pooled.restarted);
	CHECK(a.pooled.jain > 0 && a.pooled.jain <= 1 + 1e-12);
	CHECK(a.pooled.sessions_1min <= a.pooled.sessions);
	o.labs = 0;
	CHECK_EQ(gp_sim_campus(&t, &o, &a), GP_EINVAL);
	gp_trace_free(&t);
}

/*
 * A replay: one node, one GPU. Pod a runs 100 s from 0; pod b arrives at
 * 10 and runs 50 s: it waits 90 s and completes 140 s after it came.
 */
TEST(replay_known_answers)
{
	struct gp_trace t;
	struct gp_sim_opts o;
	struct gp_sim_replay_result r;
	char err[256];

	CHECK_EQ(
	    parse("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,1,T4\n",
	        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
	        "pod_phase,creation_time,deletion_time,scheduled_time\n"
	        "a,1000,1024,1,1000,,LS,Succeeded,0,100,0\n"
	        "b,1000,1024,1,1000,,LS,Succeeded,10,60,10\n",
	        &t, err, sizeof(err)),
	    0);
	memset(&o, 0, sizeof(o));
	o.group_by = "labs:1";
	o.static_partition = 1;
	CHECK_EQ(gp_sim_replay(&t, &o, &r), 0);
	CHECK_EQ(r.pods, 2);
	CHECK_EQ(r.makespan_s, 150);
	CHECK(r.wait_s.max > 89.9 && r.wait_s.max < 90.1);
	CHECK(r.jct_s.max > 139.9 && r.jct_s.max < 140.1);
	CHECK(r.util_pct > 99.9 && r.util_pct < 100.1);
	CHECK(r.jain > 0.999);
	CHECK(r.static_util_pct > 99.9);
	gp_trace_free(&t);

	/*
	 * Utilization while pods arrive (0 to 100 s): a holds one of two
	 * GPUs for 100 s, b the other for 10 s: 110 / 200 = 55%.
	 */
	CHECK_EQ(
	    parse("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,2,T4\n",
	        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
	        "pod_phase,creation_time,deletion_time,scheduled_time\n"
	        "a,1000,1024,1,1000,,LS,Succeeded,0,100,0\n"
	        "b,1000,1024,1,1000,,LS,Succeeded,0,10,0\n"
	        "c,1000,1024,1,1000,,LS,Succeeded,100,110,100\n",
	        &t, err, sizeof(err)),
	    0);
	CHECK_EQ(gp_sim_replay(&t, &o, &r), 0);
	CHECK(r.util_pct > 54.99 && r.util_pct < 55.01);
	CHECK(r.unalloc_gpus_mean > 0.89 && r.unalloc_gpus_mean < 0.91);
	CHECK_EQ(r.makespan_s, 110);
	gp_trace_free(&t);

	/*
	 * Two labs, one GPU node each. Lab 1 (pods named so that they
	 * hash to it) sends two pods at once; pooled, the second uses lab
	 * 2's idle GPU; alone, it waits.
	 */
	CHECK_EQ(parse("sn,cpu_milli,memory_mib,gpu,model\n"
	               "n0,8000,65536,1,T4\nn1,8000,65536,1,T4\n",
	             "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
	             "pod_phase,creation_time,deletion_time,scheduled_time\n"
	             "x,1000,1024,1,1000,,LS,Succeeded,0,100,0\n"
	             "y,1000,1024,1,1000,,LS,Succeeded,0,100,0\n"
	             "z,1000,1024,1,1000,,BE,Succeeded,500,600,500\n",
	             &t, err, sizeof(err)),
	    0);
	o.group_by = "qos"; /* lab LS: x, y; lab BE: z */
	CHECK_EQ(gp_sim_replay(&t, &o, &r), 0);
	CHECK_EQ(r.nlabs, 2);
	CHECK(r.wait_s.max < 0.1);
	CHECK(r.static_wait_s.max > 99.9);
	CHECK(r.util_pct > r.static_util_pct - 0.001);
	gp_trace_free(&t);
}

int
main(void)
{
	RUN(trace_reads_the_published_format);
	RUN(trace_refuses_bad_input);
	RUN(fgd_protocol_known_answers);
	RUN(frag_beats_fgd_on_a_model_constrained_trace);
	RUN(frag_beats_fgd_on_a_multi_gpu_trace);
	RUN(frag_beats_fgd_on_a_share_heavy_trace);
	RUN(frag_beats_fgd_on_a_heavier_multi_gpu_trace);
	RUN(campus_owner_patterns_by_seed);
	RUN(campus_move_cost_arithmetic);
	RUN(jain_index);
	RUN(campus_small_known_shape);
	RUN(replay_known_answers);
	return unit_report();
}
