/*
 * test_sim.c: the trace reader (src/sim/trace.c) and the simulator
 * (src/sim/sim.c) on small hand-made traces with known answers: the FGD
 * protocol on a tiny cluster, and a replay with a queue and labs.
 */
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
 * The default policy on a GPU-type-constrained trace of the Alibaba
 * cluster (25% of the pods name a model; ../shared/data/traces): at 100%
 * arrived, seed 42, it must leave at least 5% less unallocated than the
 * FGD artifact's published mean (6.09%). Before the contention term it
 * left 8.2%. SKIP when the trace is not there.
 */
TEST(frag_beats_fgd_on_a_model_constrained_trace)
{
	const char *dir = "../shared/data/traces";
	char nodes[256], pods[256], err[256];
	struct gp_trace t;
	struct gp_sim_opts o;
	struct gp_sim_fgd_result r;
	FILE *f;

	snprintf(nodes, sizeof(nodes), "%s/openb_node_list_gpu_node.csv", dir);
	snprintf(pods, sizeof(pods), "%s/openb_pod_list_gpuspec25.csv", dir);
	if ((f = fopen(pods, "r")) == NULL) {
		fprintf(stderr, "SKIP frag_beats_fgd_on_a_model_constrained_trace:"
		                " no %s\n", pods);
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
	CHECK(r.unallocated_pct_at_100 < 0.95 * 6.09);
	if (r.unallocated_pct_at_100 >= 0.95 * 6.09)
		fprintf(stderr, "gpuspec25: %.2f%% unallocated\n",
		    r.unallocated_pct_at_100);
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
	RUN(replay_known_answers);
	return unit_report();
}
