/*
 * test_sched.c: the scheduler (src/coord/sched.c): best fit, constraints,
 * FIFO order, EASY backfill, CPU and memory limits, can_ever_fit's
 * messages, scale, and a randomized property test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/sched.h"
#include "unit.h"
#include "util.h"

#define NOW  1000000000LL
#define HOUR 3600000LL

#define A100 "NVIDIA A100-SXM4-40GB"
#define H100 "NVIDIA H100 80GB HBM3"

/* A small world: nodes, their GPUs, what runs, the queue. */
struct world {
	struct gp_sched_node nodes[64];
	struct gp_sched_gpu gpus[64][GP_SCHED_GPUS_MAX];
	size_t nnodes;
	struct gp_sched_running running[256];
	size_t nrunning;
	struct gp_sched_job queue[256];
	size_t nqueue;
	const char *policy; /* placement policy; world_init: bestfit */
	struct gp_sched_result res;
	struct gp_sched_assignment *out; /* res's assignments */
	size_t nout;
};

static void
world_init(struct world *w)
{
	memset(w, 0, sizeof(*w));
	w->policy = "bestfit";
}

/* Adds an up node with ngpus GPUs of one model and memory. */
static struct gp_sched_node *
add_node(struct world *w, int64_t id, int cpus, int64_t mem_mib, int ngpus,
    const char *model, int64_t gpu_mem)
{
	size_t i = w->nnodes++;
	struct gp_sched_node *n = &w->nodes[i];
	int g;

	n->id = id;
	n->up = 1;
	n->cpu_milli = (int64_t)cpus * 1000;
	n->mem_mib = mem_mib;
	n->ngpus = ngpus;
	n->gpus = w->gpus[i];
	for (g = 0; g < ngpus; g++) {
		n->gpus[g].index = g;
		n->gpus[g].model = model;
		n->gpus[g].mem_mib = gpu_mem;
	}
	return n;
}

/* A running job on node holding the given GPU positions. */
static void
add_running(struct world *w, struct gp_sched_node *n, int64_t job_id,
    int cpus, int64_t mem_mib, int64_t end_ms, int first_gpu, int ngpus)
{
	struct gp_sched_running *r = &w->running[w->nrunning++];
	int g;

	r->job_id = job_id;
	r->node_id = n->id;
	r->cpu_milli = (int64_t)cpus * 1000;
	r->mem_mib = mem_mib;
	r->end_ms = end_ms;
	for (g = first_gpu; g < first_gpu + ngpus; g++)
		n->gpus[g].job_id = job_id;
}

static struct gp_sched_job *
add_job(struct world *w, int64_t id, int gpus, int64_t time_limit_s)
{
	struct gp_sched_job *j = &w->queue[w->nqueue++];

	memset(j, 0, sizeof(*j));
	j->id = id;
	j->gpus = gpus;
	j->cpu_milli = 1000;
	j->time_limit_s = time_limit_s;
	return j;
}

static int
plan(struct world *w)
{
	struct gp_sched_input in = {
		.now_ms = NOW,
		.nodes = w->nodes,
		.nnodes = w->nnodes,
		.running = w->running,
		.nrunning = w->nrunning,
		.queue = w->queue,
		.nqueue = w->nqueue,
		.policy = gp_sched_policy_find(w->policy),
	};
	int rc;

	gp_sched_result_fini(&w->res);
	rc = gp_sched_plan(&in, &w->res);
	w->out = w->res.assignments;
	w->nout = w->res.nassignments;
	return rc;
}

/* gp_sched_plan, keeping only the assignments (caller frees *out). */
static int
plan_flat(const struct gp_sched_input *in, struct gp_sched_assignment **out,
    size_t *nout)
{
	struct gp_sched_result res;
	int rc = gp_sched_plan(in, &res);

	*out = res.assignments;
	*nout = res.nassignments;
	res.assignments = NULL;
	gp_sched_result_fini(&res);
	return rc;
}

static const struct gp_sched_assignment *
find(const struct world *w, int64_t job_id)
{
	size_t i;

	for (i = 0; i < w->nout; i++)
		if (w->out[i].job_id == job_id)
			return &w->out[i];
	return NULL;
}

/* The node a job went to, 0 when it did not start. */
static int64_t
node_of(const struct world *w, int64_t job_id)
{
	const struct gp_sched_assignment *a = find(w, job_id);

	return a != NULL ? a->node_id : 0;
}

static void
world_fini(struct world *w)
{
	gp_sched_result_fini(&w->res);
	w->out = NULL;
	w->nout = 0;
}

TEST(owner_max_job_time_and_unlent_gpus)
{
	struct world w;
	struct gp_sched_node *n1, *n2;

	world_init(&w);
	/* Node 1 accepts jobs of at most an hour; node 2 lends one GPU of
	 * two (the other is marked taken for good, as the coordinator does
	 * for a GPU the owner took back). */
	n1 = add_node(&w, 1, 8, 0, 1, A100, 40960);
	n1->max_time_s = 3600;
	n2 = add_node(&w, 2, 8, 0, 2, A100, 40960);
	n2->gpus[1].job_id = -1;
	add_job(&w, 10, 1, 0);	  /* no limit: not on node 1 */
	add_job(&w, 12, 1, 1800); /* fits node 1 */
	add_job(&w, 11, 1, 7200); /* two hours: not on node 1, node 2 full */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 10), 2);
	CHECK_EQ(node_of(&w, 11), 0);
	CHECK_EQ(node_of(&w, 12), 1);
	if (find(&w, 10) != NULL)
		CHECK_EQ(find(&w, 10)->gpus[0], 0);
	world_fini(&w);
}

TEST(empty)
{
	struct world w;

	world_init(&w);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	CHECK(w.out == NULL);
	add_node(&w, 1, 8, 0, 4, A100, 40960);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	world_fini(&w);
}

TEST(single_fit)
{
	struct world w;
	const struct gp_sched_assignment *a;

	world_init(&w);
	add_node(&w, 7, 8, 0, 4, A100, 40960);
	add_job(&w, 42, 1, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 1);
	a = find(&w, 42);
	CHECK(a != NULL);
	if (a != NULL) {
		CHECK_EQ(a->node_id, 7);
		CHECK_EQ(a->ngpus, 1);
		CHECK(a->gpus[0] >= 0 && a->gpus[0] < 4);
	}
	world_fini(&w);
}

TEST(best_fit_picks_tighter_node)
{
	struct world w;
	struct gp_sched_node *n2;

	world_init(&w);
	add_node(&w, 1, 64, 0, 8, A100, 40960);
	n2 = add_node(&w, 2, 64, 0, 8, A100, 40960);
	add_running(&w, n2, 100, 1, 0, INT64_MAX, 0, 6);
	add_job(&w, 1, 2, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 2);
	if (find(&w, 1) != NULL) {
		CHECK_EQ(find(&w, 1)->gpus[0], 6);
		CHECK_EQ(find(&w, 1)->gpus[1], 7);
	}
	world_fini(&w);
}

TEST(best_fit_memory_then_id)
{
	struct world w;
	struct gp_sched_node *n;

	world_init(&w);
	/* Same leftover: the node whose GPUs have less memory wins. */
	add_node(&w, 1, 8, 0, 1, H100, 81920);
	add_node(&w, 2, 8, 0, 1, A100, 40960);
	add_job(&w, 1, 1, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 2);
	world_fini(&w);

	/* All equal: the lowest node id. */
	world_init(&w);
	add_node(&w, 9, 8, 0, 2, A100, 40960);
	add_node(&w, 3, 8, 0, 2, A100, 40960);
	add_node(&w, 5, 8, 0, 2, A100, 40960);
	add_job(&w, 1, 1, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 3);
	world_fini(&w);

	/* On the node, the matching GPUs with the least memory. */
	world_init(&w);
	n = add_node(&w, 1, 8, 0, 4, A100, 40960);
	n->gpus[0].mem_mib = 81920;
	n->gpus[1].mem_mib = 20480;
	n->gpus[2].mem_mib = 81920;
	n->gpus[3].mem_mib = 10240;
	add_job(&w, 1, 2, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 1);
	if (w.nout == 1) {
		CHECK_EQ(w.out[0].gpus[0], 1);
		CHECK_EQ(w.out[0].gpus[1], 3);
	}
	world_fini(&w);
}

TEST(gpu_indices_are_the_nodes_own)
{
	struct world w;
	struct gp_sched_node *n;

	world_init(&w);
	n = add_node(&w, 1, 8, 0, 3, A100, 40960);
	n->gpus[0].index = 4;
	n->gpus[1].index = 2;
	n->gpus[2].index = 7;
	add_job(&w, 1, 3, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 1);
	if (w.nout == 1) {
		CHECK_EQ(w.out[0].ngpus, 3);
		CHECK_EQ(w.out[0].gpus[0], 2);
		CHECK_EQ(w.out[0].gpus[1], 4);
		CHECK_EQ(w.out[0].gpus[2], 7);
	}
	world_fini(&w);
}

TEST(gpu_matches)
{
	struct gp_sched_gpu g = {.index = 0, .model = A100, .mem_mib = 40960};
	struct gp_sched_job j;

	memset(&j, 0, sizeof(j));
	j.gpus = 1;
	CHECK(gp_sched_gpu_matches(&g, &j));
	j.gpu_model = "";
	CHECK(gp_sched_gpu_matches(&g, &j));
	j.gpu_model = "a100";
	CHECK(gp_sched_gpu_matches(&g, &j));
	j.gpu_model = "SXM4-40";
	CHECK(gp_sched_gpu_matches(&g, &j));
	j.gpu_model = "nvidia a100-sxm4-40gb";
	CHECK(gp_sched_gpu_matches(&g, &j));
	j.gpu_model = "H100";
	CHECK(!gp_sched_gpu_matches(&g, &j));
	j.gpu_model = "NVIDIA A100-SXM4-40GB-more";
	CHECK(!gp_sched_gpu_matches(&g, &j));
	j.gpu_model = NULL;
	j.gpu_mem_mib = 40960;
	CHECK(gp_sched_gpu_matches(&g, &j));
	j.gpu_mem_mib = 40961;
	CHECK(!gp_sched_gpu_matches(&g, &j));
	g.model = NULL;
	j.gpu_mem_mib = 0;
	CHECK(gp_sched_gpu_matches(&g, &j));
	j.gpu_model = "a100";
	CHECK(!gp_sched_gpu_matches(&g, &j));
}

TEST(model_and_memory_constraints)
{
	struct world w;
	struct gp_sched_job *j;
	struct gp_sched_node *n;

	world_init(&w);
	add_node(&w, 1, 8, 0, 2, A100, 40960);
	add_node(&w, 2, 8, 0, 2, H100, 81920);
	j = add_job(&w, 1, 1, 0);
	j->gpu_model = "h100";
	j = add_job(&w, 2, 1, 0);
	j->gpu_mem_mib = 50000;
	j = add_job(&w, 3, 1, 0);
	j->gpu_model = "A100";
	j = add_job(&w, 4, 1, 0);
	j->gpu_model = "V100";
	j = add_job(&w, 5, 1, 0);
	j->gpu_model = "a100";
	j->gpu_mem_mib = 50000;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 2);
	CHECK_EQ(node_of(&w, 2), 2);
	CHECK_EQ(node_of(&w, 3), 1);
	CHECK_EQ(node_of(&w, 4), 0);
	CHECK_EQ(node_of(&w, 5), 0);
	CHECK_EQ(w.nout, 3);
	world_fini(&w);

	/* A mixed node: only the matching GPUs are used. */
	world_init(&w);
	n = add_node(&w, 1, 8, 0, 4, A100, 40960);
	n->gpus[1].model = H100;
	n->gpus[1].mem_mib = 81920;
	n->gpus[3].model = H100;
	n->gpus[3].mem_mib = 81920;
	j = add_job(&w, 1, 2, 0);
	j->gpu_model = "H100";
	j = add_job(&w, 2, 1, 0);
	j->gpu_mem_mib = 81920;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 1);
	if (w.nout == 1) {
		CHECK_EQ(w.out[0].job_id, 1);
		CHECK_EQ(w.out[0].gpus[0], 1);
		CHECK_EQ(w.out[0].gpus[1], 3);
	}
	world_fini(&w);
}

TEST(multi_gpu_stays_on_one_node)
{
	struct world w;
	struct gp_sched_node *a, *b;
	const struct gp_sched_assignment *as;

	world_init(&w);
	a = add_node(&w, 1, 8, 0, 4, A100, 40960);
	b = add_node(&w, 2, 8, 0, 4, A100, 40960);
	add_running(&w, a, 100, 1, 0, INT64_MAX, 0, 2);
	add_running(&w, b, 101, 1, 0, INT64_MAX, 2, 2);
	add_job(&w, 1, 4, 0); /* 4 GPUs free in all, never 4 on one */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	world_fini(&w);

	world_init(&w);
	add_node(&w, 1, 8, 0, 8, A100, 40960);
	add_job(&w, 1, 8, 0);
	CHECK_EQ(plan(&w), 0);
	as = find(&w, 1);
	CHECK(as != NULL);
	if (as != NULL) {
		int i;
		CHECK_EQ(as->ngpus, 8);
		for (i = 0; i < 8; i++)
			CHECK_EQ(as->gpus[i], i);
	}
	world_fini(&w);
}

TEST(jobs_that_do_not_fit_wait)
{
	struct world w;
	struct gp_sched_node *n;

	world_init(&w);
	n = add_node(&w, 1, 8, 0, 2, A100, 40960);
	add_running(&w, n, 100, 1, 0, NOW + HOUR, 0, 2);
	add_job(&w, 1, 1, 0);
	add_job(&w, 2, 3, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	CHECK(w.out == NULL);
	world_fini(&w);
}

TEST(fifo_fills_in_order)
{
	struct world w;
	int i;

	world_init(&w);
	add_node(&w, 1, 64, 0, 4, A100, 40960);
	for (i = 1; i <= 6; i++)
		add_job(&w, i, 1, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 4);
	for (i = 1; i <= 4; i++)
		CHECK_EQ(node_of(&w, i), 1);
	CHECK_EQ(node_of(&w, 5), 0);
	CHECK_EQ(node_of(&w, 6), 0);
	world_fini(&w);
}

TEST(fifo_head_is_not_overtaken_by_unlimited_job)
{
	struct world w;
	struct gp_sched_node *n;

	/* The head waits for 4 GPUs; the 1-GPU job would delay it. */
	world_init(&w);
	n = add_node(&w, 1, 64, 0, 4, A100, 40960);
	add_running(&w, n, 100, 1, 0, NOW + HOUR, 0, 2);
	add_job(&w, 1, 4, 0);
	add_job(&w, 2, 1, 0);
	add_job(&w, 3, 1, 2 * 3600);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	world_fini(&w);
}

TEST(backfill_short_job_ahead_of_blocked_big_job)
{
	struct world w;
	struct gp_sched_node *n;

	world_init(&w);
	n = add_node(&w, 1, 64, 0, 4, A100, 40960);
	add_running(&w, n, 100, 1, 0, NOW + HOUR, 0, 2);
	add_job(&w, 1, 4, 0);	    /* reservation at NOW + 1 h */
	add_job(&w, 2, 2, 1800);    /* ends in 30 min: backfills */
	add_job(&w, 3, 1, 3600);    /* ends exactly then: no room left */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 1);
	CHECK_EQ(node_of(&w, 1), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	world_fini(&w);

	/* Ending exactly at the reservation does not delay it. */
	world_init(&w);
	n = add_node(&w, 1, 64, 0, 4, A100, 40960);
	add_running(&w, n, 100, 1, 0, NOW + HOUR, 0, 2);
	add_job(&w, 1, 4, 0);
	add_job(&w, 2, 1, 3600);
	add_job(&w, 3, 1, 3601);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	CHECK_EQ(node_of(&w, 3), 0);
	world_fini(&w);
}

TEST(backfill_long_job_goes_to_another_node)
{
	struct world w;
	struct gp_sched_node *a;

	world_init(&w);
	a = add_node(&w, 1, 64, 0, 4, A100, 40960);
	add_node(&w, 2, 64, 0, 2, A100, 40960);
	add_running(&w, a, 100, 1, 0, NOW + HOUR, 0, 2);
	add_job(&w, 1, 4, 0);	 /* only node 1 could: reserved there */
	add_job(&w, 2, 1, 0);	 /* unlimited: not on node 1 */
	add_job(&w, 3, 1, 7200); /* ends after the reservation: idem */
	add_job(&w, 4, 1, 600);	 /* short: node 1 is fine */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 0);
	CHECK_EQ(node_of(&w, 2), 2);
	CHECK_EQ(node_of(&w, 3), 2);
	CHECK_EQ(node_of(&w, 4), 1);
	CHECK_EQ(w.nout, 3);
	world_fini(&w);
}

TEST(backfill_long_job_uses_resources_the_reservation_leaves)
{
	struct world w;
	struct gp_sched_node *n;
	const struct gp_sched_assignment *a;

	world_init(&w);
	n = add_node(&w, 1, 64, 0, 8, A100, 40960);
	add_running(&w, n, 100, 1, 0, NOW + HOUR, 0, 4);
	add_job(&w, 1, 6, 0); /* 4 free now: waits until NOW + 1 h */
	add_job(&w, 2, 2, 0); /* 8 - 6 = 2 GPUs spare at the reservation */
	add_job(&w, 3, 1, 0); /* nothing spare left */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 1);
	a = find(&w, 2);
	CHECK(a != NULL);
	if (a != NULL) {
		CHECK_EQ(a->ngpus, 2);
		CHECK(a->gpus[0] >= 4 && a->gpus[1] >= 4);
	}
	world_fini(&w);
}

TEST(backfill_respects_cpus_at_the_reservation)
{
	struct world w;
	struct gp_sched_node *n;
	struct gp_sched_job *j;

	/* 8 CPUs, 6 held for an hour; the head needs 4 of them. */
	world_init(&w);
	n = add_node(&w, 1, 8, 0, 0, NULL, 0);
	add_running(&w, n, 100, 6, 0, NOW + HOUR, 0, 0);
	j = add_job(&w, 1, 0, 0);
	j->cpu_milli = 4000;
	j = add_job(&w, 2, 0, 0); /* 1 CPU, unlimited: 4 spare at 1 h */
	j = add_job(&w, 3, 0, 0);
	j->cpu_milli = 1000;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	CHECK_EQ(node_of(&w, 3), 1);
	CHECK_EQ(w.nout, 2);
	world_fini(&w);

	world_init(&w);
	n = add_node(&w, 1, 8, 0, 0, NULL, 0);
	add_running(&w, n, 100, 6, 0, NOW + HOUR, 0, 0);
	j = add_job(&w, 1, 0, 0);
	j->cpu_milli = 7000; /* 1 spare at the reservation */
	add_job(&w, 2, 0, 0);
	add_job(&w, 3, 0, 0); /* would eat into the head's CPUs */
	j = add_job(&w, 4, 0, 60);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	CHECK_EQ(node_of(&w, 3), 0);
	CHECK_EQ(node_of(&w, 4), 1);
	world_fini(&w);
}

TEST(reservation_counts_jobs_this_plan_starts)
{
	struct world w;

	/*
	 * Job 1 starts for 2 h on 2 of 4 GPUs; job 2 (4 GPUs) is reserved
	 * at NOW + 2 h; job 3 (1 h) backfills; job 4 (3 h) may not.
	 */
	world_init(&w);
	add_node(&w, 1, 64, 0, 4, A100, 40960);
	add_job(&w, 1, 2, 7200);
	add_job(&w, 2, 4, 0);
	add_job(&w, 3, 1, 3600);
	add_job(&w, 4, 1, 3 * 3600);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 1);
	CHECK_EQ(node_of(&w, 2), 0);
	CHECK_EQ(node_of(&w, 3), 1);
	CHECK_EQ(node_of(&w, 4), 0);
	world_fini(&w);
}

TEST(reservation_on_earliest_node)
{
	struct world w;
	struct gp_sched_node *a, *b;

	/* Node 1 frees in 2 h, node 2 in 1 h: the head waits for node 2. */
	world_init(&w);
	a = add_node(&w, 1, 64, 0, 2, A100, 40960);
	b = add_node(&w, 2, 64, 0, 2, A100, 40960);
	add_running(&w, a, 100, 1, 0, NOW + 2 * HOUR, 0, 1);
	add_running(&w, b, 101, 1, 0, NOW + HOUR, 0, 1);
	add_job(&w, 1, 2, 0);
	add_job(&w, 2, 1, 0); /* unlimited: node 1 only */
	add_job(&w, 3, 1, 0); /* nothing left */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	CHECK_EQ(node_of(&w, 3), 0);
	world_fini(&w);
}

TEST(unlimited_running_jobs_never_end)
{
	struct world w;
	struct gp_sched_node *n;

	/*
	 * What holds the node has no limit: the reservation lies at the
	 * end of time. Jobs with a limit end before it; others do not.
	 */
	world_init(&w);
	n = add_node(&w, 1, 64, 0, 4, A100, 40960);
	add_running(&w, n, 100, 1, 0, INT64_MAX, 0, 2);
	add_job(&w, 1, 4, 0);
	add_job(&w, 2, 1, 0);
	add_job(&w, 3, 1, 31536000);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 2), 0);
	CHECK_EQ(node_of(&w, 3), 1);
	world_fini(&w);

	/* A GPU held by a job missing from the running list: the same. */
	world_init(&w);
	n = add_node(&w, 1, 64, 0, 2, A100, 40960);
	n->gpus[0].job_id = 555;
	add_job(&w, 1, 2, 0);
	add_job(&w, 2, 1, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	world_fini(&w);
}

TEST(job_that_no_up_node_can_hold_does_not_block)
{
	struct world w;
	struct gp_sched_node *d, *n;

	/* Job 1 only fits the down node: job 2 gets the reservation. */
	world_init(&w);
	d = add_node(&w, 1, 64, 0, 8, A100, 40960);
	d->up = 0;
	n = add_node(&w, 2, 64, 0, 2, A100, 40960);
	add_running(&w, n, 100, 1, 0, NOW + HOUR, 0, 1);
	add_job(&w, 1, 8, 0);
	add_job(&w, 2, 2, 0);
	add_job(&w, 3, 1, 0);	 /* would delay job 2 */
	add_job(&w, 4, 1, 1800); /* ends first */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 0);
	CHECK_EQ(node_of(&w, 2), 0);
	CHECK_EQ(node_of(&w, 3), 0);
	CHECK_EQ(node_of(&w, 4), 2);
	world_fini(&w);
}

TEST(down_nodes_are_skipped)
{
	struct world w;
	struct gp_sched_node *d;

	world_init(&w);
	d = add_node(&w, 1, 64, 0, 8, A100, 40960);
	d->up = 0;
	add_node(&w, 2, 64, 0, 8, A100, 40960);
	add_job(&w, 1, 1, 0);
	add_job(&w, 2, 0, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 2);
	CHECK_EQ(node_of(&w, 2), 2);
	world_fini(&w);

	world_init(&w);
	d = add_node(&w, 1, 64, 0, 8, A100, 40960);
	d->up = 0;
	add_job(&w, 1, 1, 0);
	add_job(&w, 2, 0, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	world_fini(&w);
}

TEST(cpu_limits)
{
	struct world w;
	struct gp_sched_node *n;
	struct gp_sched_job *j;

	world_init(&w);
	n = add_node(&w, 1, 4, 0, 4, A100, 40960);
	add_running(&w, n, 100, 3, 0, INT64_MAX, 0, 1);
	j = add_job(&w, 1, 1, 0);
	j->cpu_milli = 2000; /* only 1 CPU free */
	j = add_job(&w, 2, 1, 0);
	j->cpu_milli = 1000;
	j = add_job(&w, 3, 1, 0); /* no CPU left */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	CHECK_EQ(node_of(&w, 3), 0);
	world_fini(&w);

	/* What this plan assigns counts too. */
	world_init(&w);
	add_node(&w, 1, 3, 0, 4, A100, 40960);
	add_node(&w, 2, 8, 0, 8, A100, 40960);
	j = add_job(&w, 1, 1, 0);
	j->cpu_milli = 2000;
	j = add_job(&w, 2, 1, 0);
	j->cpu_milli = 2000;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 1);
	CHECK_EQ(node_of(&w, 2), 2);
	world_fini(&w);

	/* Running jobs on unknown nodes are ignored. */
	world_init(&w);
	add_node(&w, 1, 2, 0, 1, A100, 40960);
	w.running[0].job_id = 9;
	w.running[0].node_id = 77;
	w.running[0].cpu_milli = 100000;
	w.running[0].end_ms = INT64_MAX;
	w.nrunning = 1;
	j = add_job(&w, 1, 1, 0);
	j->cpu_milli = 2000;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 1);
	world_fini(&w);
}

TEST(memory_limits)
{
	struct world w;
	struct gp_sched_node *n;
	struct gp_sched_job *j;

	world_init(&w);
	n = add_node(&w, 1, 64, 16000, 4, A100, 40960);
	add_running(&w, n, 100, 1, 10000, INT64_MAX, 0, 1);
	j = add_job(&w, 1, 1, 0);
	j->mem_mib = 8000; /* 6000 free */
	j = add_job(&w, 2, 1, 0);
	j->mem_mib = 4000;
	j = add_job(&w, 3, 1, 0);
	j->mem_mib = 4000; /* 2000 left */
	j = add_job(&w, 4, 1, 0); /* no reservation: fits */
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	CHECK_EQ(node_of(&w, 3), 0);
	world_fini(&w);

	/* Node memory unknown (0): not a constraint. */
	world_init(&w);
	add_node(&w, 1, 64, 0, 4, A100, 40960);
	j = add_job(&w, 1, 1, 0);
	j->mem_mib = 1000000;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 1);
	world_fini(&w);
}

TEST(cpu_only_jobs)
{
	struct world w;
	struct gp_sched_node *g;
	struct gp_sched_job *j;
	int i;

	/* A 0-GPU job prefers the node with the fewest free GPUs. */
	world_init(&w);
	add_node(&w, 1, 16, 0, 8, A100, 40960);
	add_node(&w, 2, 16, 0, 0, NULL, 0);
	g = add_node(&w, 3, 16, 0, 8, A100, 40960);
	add_running(&w, g, 100, 1, 0, INT64_MAX, 0, 7);
	add_job(&w, 1, 0, 0);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 2);
	if (find(&w, 1) != NULL)
		CHECK_EQ(find(&w, 1)->ngpus, 0);
	world_fini(&w);

	/* CPU-only jobs fill a node with no GPUs, CPU by CPU. */
	world_init(&w);
	add_node(&w, 1, 4, 0, 0, NULL, 0);
	for (i = 1; i <= 6; i++) {
		j = add_job(&w, i, 0, 0);
		j->cpu_milli = 1000;
	}
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 4);
	world_fini(&w);

	/* No GPU free anywhere: CPU-only jobs still start. */
	world_init(&w);
	g = add_node(&w, 1, 8, 0, 2, A100, 40960);
	add_running(&w, g, 100, 1, 0, INT64_MAX, 0, 2);
	add_job(&w, 1, 1, 60);
	add_job(&w, 2, 0, 60);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 1), 0);
	CHECK_EQ(node_of(&w, 2), 1);
	world_fini(&w);
}

TEST(can_ever_fit)
{
	struct world w;
	struct gp_sched_job j;
	char why[256];

	world_init(&w);
	memset(&j, 0, sizeof(j));
	j.gpus = 1;
	j.cpu_milli = 1000;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 0, &j, why, sizeof(why)), 0);
	CHECK(strstr(why, "no node") != NULL);

	add_node(&w, 1, 16, 64000, 4, A100, 40960);
	add_node(&w, 3, 32, 128000, 2, H100, 81920);
	w.nodes[1].up = 0; /* down nodes count */
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 1);
	j.gpu_model = "h100";
	j.gpus = 2;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 1);

	j.gpus = 8;
	j.gpu_model = "A100";
	j.gpu_mem_mib = 40000;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 0);
	CHECK_STR(why, "no node has 8 GPUs of model A100 with 40000 MiB; the "
		       "largest offer is 4 on node 1");

	j.gpus = 1;
	j.gpu_model = "V100";
	j.gpu_mem_mib = 0;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 0);
	CHECK_STR(why, "no node has 1 GPU of model V100; the largest offer "
		       "is 0 on node 1");

	j.gpu_model = NULL;
	j.gpu_mem_mib = 80000;
	j.gpus = 2;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 1);
	j.gpus = 3;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 0);
	CHECK_STR(why, "no node has 3 GPUs with 80000 MiB; the largest offer "
		       "is 2 on node 3");

	j.gpus = 1;
	j.gpu_mem_mib = 0;
	j.cpu_milli = 64000;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 0);
	CHECK_STR(why, "no node with 1 GPU has 64 CPUs; the largest offer is "
		       "32 CPUs on node 3");

	j.cpu_milli = 8000;
	j.mem_mib = 200000;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 0);
	CHECK_STR(why, "no node with 1 GPU and 8 CPUs has 200000 MiB of "
		       "memory; the largest offer is 128000 MiB on node 3");
	w.nodes[0].mem_mib = 0; /* unknown memory: no constraint */
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 1);

	j.gpus = 65;
	j.mem_mib = 0;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 0);
	CHECK(strstr(why, "64") != NULL);

	j.gpus = 0;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, sizeof(why)), 1);
	/* A short buffer is still terminated. */
	j.gpus = 9;
	CHECK_EQ(gp_sched_can_ever_fit(w.nodes, 2, &j, why, 8), 0);
	CHECK_EQ(strlen(why), 7);
}

TEST(many_nodes)
{
	enum { NODES = 10000, GPUS = 8, QUEUE = 20000 };
	struct gp_sched_node *nodes = calloc(NODES, sizeof(*nodes));
	struct gp_sched_gpu *gpus = calloc(NODES * GPUS, sizeof(*gpus));
	struct gp_sched_job *queue = calloc(QUEUE, sizeof(*queue));
	unsigned char *used = calloc(NODES * GPUS, 1);
	struct gp_sched_input in;
	struct gp_sched_assignment *out = NULL;
	size_t nout = 0, i;
	int64_t t0, t1, t2, t3;
	int g, dup = 0;

	if (nodes == NULL || gpus == NULL || queue == NULL || used == NULL) {
		CHECK(0);
		goto out;
	}
	for (i = 0; i < NODES; i++) {
		nodes[i].id = (int64_t)i + 1;
		nodes[i].up = i % 10 != 9;
		nodes[i].cpu_milli = 64000;
		nodes[i].ngpus = GPUS;
		nodes[i].gpus = &gpus[i * GPUS];
		for (g = 0; g < GPUS; g++) {
			gpus[i * GPUS + g].index = g;
			gpus[i * GPUS + g].model = i % 2 ? H100 : A100;
			gpus[i * GPUS + g].mem_mib = i % 2 ? 81920 : 40960;
		}
	}
	for (i = 0; i < QUEUE; i++) {
		queue[i].id = (int64_t)i + 1;
		queue[i].gpus = 1 + (int)(i % 3);
		queue[i].cpu_milli = 1000;
		queue[i].gpu_model = i % 5 == 0 ? "h100" : NULL;
		queue[i].time_limit_s = i % 4 ? 3600 : 0;
	}
	memset(&in, 0, sizeof(in));
	in.now_ms = NOW;
	in.nodes = nodes;
	in.nnodes = NODES;
	in.queue = queue;
	in.nqueue = QUEUE;
	t0 = gp_mono_us();
	CHECK_EQ(plan_flat(&in, &out, &nout), 0);
	t1 = gp_mono_us();
	/* 9000 nodes up x 8 GPUs = 72000; the queue asks for 40000. */
	CHECK_EQ(nout, QUEUE);
	for (i = 0; i < nout; i++) {
		const struct gp_sched_assignment *a = &out[i];
		size_t n = (size_t)(a->node_id - 1);
		CHECK(nodes[n].up);
		for (g = 0; g < a->ngpus; g++) {
			dup += used[n * GPUS + (size_t)a->gpus[g]];
			used[n * GPUS + (size_t)a->gpus[g]] = 1;
			gpus[n * GPUS + (size_t)a->gpus[g]].job_id = a->job_id;
		}
	}
	CHECK_EQ(dup, 0);
	free(out);
	out = NULL;

	/* Saturated: most GPUs busy now, the same long queue again. */
	t2 = gp_mono_us();
	CHECK_EQ(plan_flat(&in, &out, &nout), 0);
	t2 = gp_mono_us() - t2;
	printf("    plan %d nodes, %d queued: %.1f ms placing all, %.1f ms "
	       "on a busy pool (%zu more)\n",
	    NODES, QUEUE, (double)(t1 - t0) / 1000.0, (double)t2 / 1000.0,
	    nout);
	for (i = 0; i < nout; i++) {
		size_t n = (size_t)(out[i].node_id - 1);
		for (g = 0; g < out[i].ngpus; g++) {
			dup += used[n * GPUS + (size_t)out[i].gpus[g]];
			gpus[n * GPUS + (size_t)out[i].gpus[g]].job_id =
			    out[i].job_id;
		}
	}
	CHECK_EQ(dup, 0);
	free(out);
	out = NULL;

	/* Full: nothing more fits; the queue must cost next to nothing. */
	t3 = gp_mono_us();
	CHECK_EQ(plan_flat(&in, &out, &nout), 0);
	t3 = gp_mono_us() - t3;
	printf("    and %.1f ms on a full pool (%zu more)\n",
	    (double)t3 / 1000.0, nout);
	/* No timing assertions in tests (house rule): the figures above are
	 * printed, and bench/ measures speed. */
	CHECK_EQ(nout, 0);
out:
	free(out);
	free(nodes);
	free(gpus);
	free(queue);
	free(used);
}

/* A tiny deterministic generator (xorshift64*), seeded per test. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static int
rnd(int n)
{
	return (int)(rng() % (uint64_t)n);
}

static const char *models[] = {A100, H100, "NVIDIA L4", "Tesla V100-PCIE"};
static const char *wanted[] = {NULL, "", "a100", "H100", "l4", "v100", "T4"};

/* Checks one plan's assignments against the world it was made from. */
static void
check_plan(const struct world *w)
{
	int64_t cpus[64] = {0}, add_cpus[64] = {0};
	int i;
	int64_t mem[64] = {0}, add_mem[64] = {0};
	unsigned char seen[256] = {0};
	unsigned char used[64][GP_SCHED_GPUS_MAX] = {{0}};
	size_t k, r, q;

	for (r = 0; r < w->nrunning; r++)
		for (k = 0; k < w->nnodes; k++)
			if (w->nodes[k].id == w->running[r].node_id) {
				cpus[k] += w->running[r].cpu_milli;
				mem[k] += w->running[r].mem_mib;
			}
	for (k = 0; k < w->nout; k++) {
		const struct gp_sched_assignment *a = &w->out[k];
		const struct gp_sched_job *j = NULL;
		const struct gp_sched_node *n = NULL;
		size_t ni = 0;

		for (q = 0; q < w->nqueue; q++)
			if (w->queue[q].id == a->job_id)
				j = &w->queue[q];
		for (ni = 0; ni < w->nnodes; ni++)
			if (w->nodes[ni].id == a->node_id) {
				n = &w->nodes[ni];
				break;
			}
		CHECK(j != NULL && n != NULL);
		if (j == NULL || n == NULL)
			return;
		CHECK(!seen[j - w->queue]);
		seen[j - w->queue] = 1;
		CHECK(n->up);
		CHECK_EQ(a->ngpus, j->gpus);
		for (i = 0; i < a->ngpus; i++) {
			int g, pos = -1;
			for (g = 0; g < n->ngpus; g++)
				if (n->gpus[g].index == a->gpus[i])
					pos = g;
			CHECK(pos >= 0);
			if (pos < 0)
				return;
			CHECK_EQ(n->gpus[pos].job_id, 0);
			CHECK(!used[ni][pos]);
			used[ni][pos] = 1;
			CHECK(gp_sched_gpu_matches(&n->gpus[pos], j));
		}
		add_cpus[ni] += j->cpu_milli;
		add_mem[ni] += j->mem_mib;
	}
	/* Running jobs may overcommit a node; the plan never adds to it. */
	for (k = 0; k < w->nnodes; k++) {
		if (add_cpus[k] > 0)
			CHECK(cpus[k] + add_cpus[k] <= w->nodes[k].cpu_milli);
		if (add_mem[k] > 0 && w->nodes[k].mem_mib > 0)
			CHECK(mem[k] + add_mem[k] <= w->nodes[k].mem_mib);
	}
}

/* 1 when job fits now on an up node, given only what runs already. */
static int
fits_now(const struct world *w, const struct gp_sched_job *j)
{
	size_t k, r;
	int g;

	for (k = 0; k < w->nnodes; k++) {
		const struct gp_sched_node *n = &w->nodes[k];
		int64_t cpus = n->cpu_milli;
		int free_gpus = 0;
		int64_t mem = n->mem_mib;
		if (!n->up)
			continue;
		for (r = 0; r < w->nrunning; r++)
			if (w->running[r].node_id == n->id) {
				cpus -= w->running[r].cpu_milli;
				mem -= w->running[r].mem_mib;
			}
		for (g = 0; g < n->ngpus; g++)
			free_gpus += n->gpus[g].job_id == 0 &&
			    gp_sched_gpu_matches(&n->gpus[g], j);
		if (cpus >= j->cpu_milli && free_gpus >= j->gpus &&
		    (n->mem_mib == 0 || j->mem_mib == 0 || mem >= j->mem_mib))
			return 1;
	}
	return 0;
}

static int64_t
end_of(const struct gp_sched_job *j)
{
	return j->time_limit_s > 0 ? NOW + j->time_limit_s * 1000 : INT64_MAX;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The earliest time job could start on up node k once what runs ends,
 * counting the plan's assignments of the queue positions in [0, upto);
 * -1 when never. Written apart from sched.c, the simple way.
 */
static int64_t
earliest(const struct world *w, size_t k, const struct gp_sched_job *job,
    size_t upto)
{
	const struct gp_sched_node *n = &w->nodes[k];
	int64_t gend[GP_SCHED_GPUS_MAX], times[512], t = NOW, best = -1;
	size_t a, q, r, ntimes = 0;
	int g, i, ng = 0;

	if (!n->up)
		return -1;
	for (g = 0; g < n->ngpus; g++) {
		int64_t e = NOW;
		if (n->gpus[g].job_id != 0) {
			e = INT64_MAX;
			for (r = 0; r < w->nrunning; r++)
				if (w->running[r].job_id == n->gpus[g].job_id)
					e = w->running[r].end_ms;
		}
		for (a = 0; a < w->nout; a++)
			for (q = 0; q < upto; q++)
				if (w->queue[q].id == w->out[a].job_id &&
				    w->out[a].node_id == n->id)
					for (i = 0; i < w->out[a].ngpus; i++)
						if (w->out[a].gpus[i] ==
						    n->gpus[g].index)
							e = end_of(&w->queue[q]);
		if (gp_sched_gpu_matches(&n->gpus[g], job))
			gend[ng++] = e;
	}
	if (ng < job->gpus)
		return -1;
	qsort(gend, (size_t)ng, sizeof(gend[0]), cmp_i64);
	if (job->gpus > 0 && gend[job->gpus - 1] > t)
		t = gend[job->gpus - 1];
	/* Try every moment something ends, from t on. */
	times[ntimes++] = t;
	for (r = 0; r < w->nrunning; r++)
		if (w->running[r].node_id == n->id)
			times[ntimes++] = w->running[r].end_ms;
	for (a = 0; a < w->nout; a++)
		for (q = 0; q < upto; q++)
			if (w->queue[q].id == w->out[a].job_id &&
			    w->out[a].node_id == n->id)
				times[ntimes++] = end_of(&w->queue[q]);
	for (i = 0; i < (int)ntimes; i++) {
		int64_t at = times[i] > t ? times[i] : t, mem = n->mem_mib;
		int64_t cpus = n->cpu_milli;
		if (best >= 0 && at >= best)
			continue;
		for (r = 0; r < w->nrunning; r++)
			if (w->running[r].node_id == n->id &&
			    w->running[r].end_ms > at) {
				cpus -= w->running[r].cpu_milli;
				mem -= w->running[r].mem_mib;
			}
		for (a = 0; a < w->nout; a++)
			for (q = 0; q < upto; q++)
				if (w->queue[q].id == w->out[a].job_id &&
				    w->out[a].node_id == n->id &&
				    end_of(&w->queue[q]) > at) {
					cpus -= w->queue[q].cpu_milli;
					mem -= w->queue[q].mem_mib;
				}
		if (cpus >= job->cpu_milli && (n->mem_mib == 0 ||
		    job->mem_mib == 0 || mem >= job->mem_mib))
			best = at;
	}
	return best;
}

/*
 * EASY backfill's promise: the first job that waits (and that an up node
 * could ever hold) can start as early with the jobs started after it in
 * the queue as without them.
 */
static void
check_backfill(const struct world *w)
{
	int64_t before = -1, after = -1, t;
	size_t q, k;

	for (q = 0; q < w->nqueue; q++) {
		if (find(w, w->queue[q].id) != NULL)
			continue;
		for (k = 0; k < w->nnodes; k++) {
			t = earliest(w, k, &w->queue[q], q);
			if (t >= 0 && (before < 0 || t < before))
				before = t;
			t = earliest(w, k, &w->queue[q], w->nqueue);
			if (t >= 0 && (after < 0 || t < after))
				after = t;
		}
		if (before >= 0)
			break;
	}
	CHECK_EQ(after, before);
}

TEST(property_random_worlds)
{
	static struct world w;
	int round, g;
	size_t k;
	int64_t next_job;

	static const char *policies[] = {"bestfit", "frag", "fgd", "random",
	    "dotprod", "clustering", "packing"};

	rng_state = 0x2545f4914f6cdd1dULL;
	for (round = 0; round < 2100; round++) {
		world_init(&w);
		w.policy = policies[round % 7];
		next_job = 1000;
		w.nnodes = 0;
		for (k = 0; k < (size_t)(1 + rnd(12)); k++) {
			int ngpus = rnd(9);
			struct gp_sched_node *n = add_node(&w,
			    (int64_t)(1 + rnd(1000)) * 64 + (int64_t)k,
			    1 + rnd(32), rnd(3) ? 0 : 1000 * (1 + rnd(64)),
			    ngpus, models[rnd(4)], 1024 * (8 + rnd(73)));
			n->up = rnd(8) != 0;
			for (g = 0; g < ngpus; g++) {
				if (rnd(3) == 0)
					n->gpus[g].model = models[rnd(4)];
				n->gpus[g].index = ngpus - 1 - g + rnd(2) * 100;
			}
			/* Some running jobs, each on a few GPUs. */
			for (g = 0; g < ngpus; g++) {
				int take = 1 + rnd(3), cpus;
				int64_t end;
				if (rnd(2) == 0)
					continue;
				if (g + take > ngpus)
					take = ngpus - g;
				cpus = rnd(1 + (int)(n->cpu_milli / 4000));
				end = rnd(4) == 0 ? INT64_MAX :
				    NOW + (int64_t)rnd(10 * 3600) * 1000;
				add_running(&w, n, next_job++, cpus,
				    n->mem_mib > 0 ? rnd(1 + (int)(
					n->mem_mib / 8)) : 0, end, g, take);
				g += take - 1;
			}
		}
		for (k = 0; k < (size_t)rnd(60); k++) {
			struct gp_sched_job *j = add_job(&w, (int64_t)k + 1,
			    rnd(5) == 0 ? 0 : 1 + rnd(rnd(4) == 0 ? 8 : 3),
			    rnd(3) == 0 ? 0 : 60 * (1 + rnd(600)));
			j->cpu_milli = 1000 * (1 + rnd(rnd(4) == 0 ? 16 : 3));
			j->mem_mib = rnd(3) == 0 ? 500 * rnd(20) : 0;
			if (j->gpus > 0) {
				j->gpu_model = wanted[rnd(7)];
				j->gpu_mem_mib = rnd(3) == 0 ?
				    1024 * rnd(80) : 0;
			}
		}
		if (plan(&w) != 0) {
			CHECK(0);
			break;
		}
		check_plan(&w);
		/* The head of the queue starts when it fits now. */
		if (w.nqueue > 0 && fits_now(&w, &w.queue[0]))
			CHECK(find(&w, w.queue[0].id) != NULL);
		/* Nothing runs past the reservation: see check_backfill. */
		check_backfill(&w);
		if (unit_failed_checks > 0) {
			fprintf(stderr, "property: failed in round %d (%s)\n",
			    round, w.policy);
			world_fini(&w);
			break;
		}
		world_fini(&w);
	}
}

/* The reason of queued job id, or NULL. */
static const struct gp_sched_waiting *
wait_of(const struct world *w, int64_t id)
{
	size_t i;

	for (i = 0; i < w->res.nwaiting; i++)
		if (w->res.waiting[i].job_id == id)
			return &w->res.waiting[i];
	return NULL;
}

/* A wait reason names what is short: CPUs, memory, GPUs, a GPU model. */
TEST(wait_reason_names_the_short_resource)
{
	const struct gp_sched_waiting *wt;
	struct gp_sched_node *g;
	struct gp_sched_job *j;
	struct world w;

	/* Every CPU held, GPUs free: a CPU-only job waits for CPUs. */
	world_init(&w);
	g = add_node(&w, 1, 8, 0, 2, A100, 40960);
	add_running(&w, g, 100, 8, 0, NOW + HOUR, 0, 0);
	j = add_job(&w, 1, 0, 60);
	j->cpu_milli = 4000;
	CHECK_EQ(plan(&w), 0);
	CHECK(wt = wait_of(&w, 1));
	if (wt != NULL) {
		CHECK_EQ(wt->reason, GP_SCHED_WAIT_RESOURCES);
		CHECK_STR(wt->why,
		    "no node has 4 CPUs free now (at most 0 CPUs free on a "
		    "node that could hold it)");
		CHECK(strstr(wt->why, "GPU") == NULL);
	}
	world_fini(&w);

	/* Memory held: it says memory. */
	world_init(&w);
	g = add_node(&w, 1, 8, 16384, 0, NULL, 0);
	add_running(&w, g, 100, 1, 12288, NOW + HOUR, 0, 0);
	j = add_job(&w, 1, 0, 60);
	j->mem_mib = 8192;
	CHECK_EQ(plan(&w), 0);
	CHECK(wt = wait_of(&w, 1));
	if (wt != NULL)
		CHECK(strstr(wt->why, "of memory free now") != NULL &&
		    strstr(wt->why, "CPU") == NULL);
	world_fini(&w);

	/* GPUs held, CPUs free: GPUs; with a model, the model. */
	world_init(&w);
	g = add_node(&w, 1, 8, 0, 2, A100, 40960);
	add_running(&w, g, 100, 1, 0, NOW + HOUR, 0, 2);
	add_node(&w, 2, 8, 0, 2, H100, 81920);
	add_running(&w, &w.nodes[1], 101, 1, 0, NOW + HOUR, 0, 1);
	j = add_job(&w, 1, 2, 60);
	j->gpu_model = "A100";
	CHECK_EQ(plan(&w), 0);
	CHECK(wt = wait_of(&w, 1));
	if (wt != NULL)
		CHECK_STR(wt->why, "no node has 2 GPUs of model A100 free now "
		                   "(at most 0 GPUs free on a node that could "
		                   "hold it)");
	world_fini(&w);

	/* Both short on the one node: both named. */
	world_init(&w);
	g = add_node(&w, 1, 8, 0, 2, A100, 40960);
	add_running(&w, g, 100, 6, 0, NOW + HOUR, 0, 2);
	j = add_job(&w, 1, 1, 60);
	j->cpu_milli = 4000;
	CHECK_EQ(plan(&w), 0);
	CHECK(wt = wait_of(&w, 1));
	if (wt != NULL)
		CHECK_STR(wt->why, "no node has 1 GPU and 4 CPUs free at once");
	world_fini(&w);

	/* A second job of the same shape gets the same words (the pass
	 * does not try it again). */
	world_init(&w);
	g = add_node(&w, 1, 8, 0, 2, A100, 40960);
	add_running(&w, g, 100, 8, 0, NOW + HOUR, 0, 0);
	add_running(&w, g, 101, 0, 0, INT64_MAX, 0, 0);
	j = add_job(&w, 1, 0, 60);
	j->cpu_milli = 4000;
	j = add_job(&w, 2, 0, 60);
	j->cpu_milli = 4000;
	j = add_job(&w, 3, 0, 60);
	j->cpu_milli = 4000;
	CHECK_EQ(plan(&w), 0);
	CHECK(wt = wait_of(&w, 3));
	if (wt != NULL)
		CHECK(strstr(wt->why, "4 CPUs") != NULL);
	world_fini(&w);
}

/*
 * Interactive jobs (docs/scheduling.md): GPUs an owner keeps for them
 * (interactive_only) take no batch job, whose wait reason says so; an
 * interactive job takes them.
 */
TEST(interactive_gpus_are_kept)
{
	const struct gp_sched_waiting *wt;
	struct gp_sched_node *n;
	struct gp_sched_job *j;
	struct world w;

	world_init(&w);
	n = add_node(&w, 1, 8, 0, 2, A100, 40960);
	n->gpus[1].interactive_only = 1;
	add_job(&w, 10, 1, 60);
	add_job(&w, 11, 1, 60);
	j = add_job(&w, 12, 1, 60);
	j->interactive = 1;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 10), 1);
	if (find(&w, 10) != NULL)
		CHECK_EQ(find(&w, 10)->gpus[0], 0);
	CHECK_EQ(node_of(&w, 11), 0);
	CHECK_EQ(node_of(&w, 12), 1);
	if (find(&w, 12) != NULL)
		CHECK_EQ(find(&w, 12)->gpus[0], 1);
	/* Job 10 took the one GPU batch work may have. */
	CHECK(wt = wait_of(&w, 11));
	if (wt != NULL)
		CHECK_EQ(wt->reason, GP_SCHED_WAIT_PRIORITY);
	world_fini(&w);

	/* A batch job holds the other GPU: the kept one is named. */
	world_init(&w);
	n = add_node(&w, 1, 8, 0, 2, A100, 40960);
	n->gpus[1].interactive_only = 1;
	add_running(&w, n, 100, 1, 0, NOW + HOUR, 0, 1);
	add_job(&w, 11, 1, 60);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 11), 0);
	CHECK(wt = wait_of(&w, 11));
	if (wt != NULL)
		CHECK(strstr(wt->why, "more are kept for interactive jobs") !=
		    NULL);
	world_fini(&w);

	/* Nothing interactive queued: the kept GPU stays free. */
	world_init(&w);
	n = add_node(&w, 1, 8, 0, 1, A100, 40960);
	n->gpus[0].interactive_only = 1;
	add_job(&w, 10, 1, 60);
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 0);
	CHECK(wt = wait_of(&w, 10));
	if (wt != NULL)
		CHECK(strstr(wt->why, "interactive") != NULL);
	world_fini(&w);

	/* can_ever_fit: a pool whose GPUs are all kept never runs it. */
	{
		struct gp_sched_gpu g = {.model = A100, .mem_mib = 40960,
		    .interactive_only = 1};
		struct gp_sched_job b = {.gpus = 1}, i = {.gpus = 1,
		    .interactive = 1};
		CHECK(!gp_sched_gpu_matches(&g, &b));
		CHECK(gp_sched_gpu_matches(&g, &i));
	}
}

/*
 * An interactive job goes ahead of its own user's batch jobs, but fair
 * share still decides between users.
 */
TEST(interactive_goes_first_within_fair_share)
{
	struct gp_sched_share users[2] = {{.id = 5, .weight = 1, .usage = 1e6},
	    {.id = 6, .weight = 1, .usage = 0}};
	struct gp_sched_job *j;
	struct world w;
	struct gp_sched_input in;

	/* One GPU; user 5's batch job came first, its interactive one next:
	 * the interactive one starts. */
	world_init(&w);
	add_node(&w, 1, 8, 0, 1, A100, 40960);
	j = add_job(&w, 20, 1, 600);
	j->user = 5;
	j = add_job(&w, 21, 1, 600);
	j->user = 5;
	j->interactive = 1;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 21), 1);
	CHECK_EQ(node_of(&w, 20), 0);
	world_fini(&w);

	/* User 6 has used less: its batch job goes before user 5's
	 * interactive one (fair share first). */
	world_init(&w);
	add_node(&w, 1, 8, 0, 1, A100, 40960);
	j = add_job(&w, 30, 1, 600);
	j->user = 5;
	j->interactive = 1;
	j = add_job(&w, 31, 1, 600);
	j->user = 6;
	memset(&in, 0, sizeof(in));
	in.now_ms = NOW;
	in.nodes = w.nodes;
	in.nnodes = w.nnodes;
	in.queue = w.queue;
	in.nqueue = w.nqueue;
	in.users = users;
	in.nusers = 2;
	in.policy = gp_sched_policy_find(w.policy);
	CHECK_EQ(gp_sched_plan(&in, &w.res), 0);
	w.out = w.res.assignments;
	w.nout = w.res.nassignments;
	CHECK_EQ(node_of(&w, 31), 1);
	CHECK_EQ(node_of(&w, 30), 0);
	world_fini(&w);
}

/*
 * The back-off after failed starts (state_retry.c tells the engine): a
 * job before its not_before_ms waits (GP_SCHED_WAIT_BACKOFF, with the
 * caller's words) though a node is free; a job to keep off a node goes
 * to another that fits (here the looser one: best fit alone picks the
 * avoided one), and to the avoided node when none other has room; a
 * gang keeps its parts off it too.
 */
TEST(backoff_and_avoided_nodes)
{
	static const int64_t avoid1[] = {1};
	struct world w;
	struct gp_sched_job *j;
	struct gp_sched_node *n2;
	size_t i;
	int k;

	world_init(&w);
	add_node(&w, 1, 8, 0, 1, A100, 40960);
	add_node(&w, 2, 8, 0, 2, A100, 40960);
	j = add_job(&w, 10, 1, 0);
	j->not_before_ms = NOW + 1000;
	j->retry_why = "retrying after image_unavailable on node n1";
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 10), 0);
	CHECK_EQ(w.res.nwaiting, 1);
	for (i = 0; i < w.res.nwaiting; i++) {
		CHECK_EQ(w.res.waiting[i].reason, GP_SCHED_WAIT_BACKOFF);
		CHECK_STR(w.res.waiting[i].why,
		    "retrying after image_unavailable on node n1");
	}
	/* Its back-off over: best fit would take node 1; it avoids it. */
	j->not_before_ms = NOW;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 10), 1);
	j->avoid_nodes = avoid1;
	j->navoid = 1;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 10), 2);
	world_fini(&w);

	/* No other node has room: back to the avoided one. */
	world_init(&w);
	add_node(&w, 1, 8, 0, 1, A100, 40960);
	n2 = add_node(&w, 2, 8, 0, 1, A100, 40960);
	add_running(&w, n2, 100, 1, 0, INT64_MAX, 0, 1);
	j = add_job(&w, 10, 1, 0);
	j->avoid_nodes = avoid1;
	j->navoid = 1;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(node_of(&w, 10), 1);
	world_fini(&w);

	/* A gang of two on three nodes keeps both parts off node 1. */
	world_init(&w);
	for (k = 1; k <= 3; k++)
		add_node(&w, k, 8, 0, 1, A100, 40960);
	j = add_job(&w, 10, 1, 0);
	j->parts = 2;
	j->avoid_nodes = avoid1;
	j->navoid = 1;
	CHECK_EQ(plan(&w), 0);
	CHECK_EQ(w.nout, 2);
	for (i = 0; i < w.nout; i++)
		CHECK(w.out[i].node_id != 1);
	world_fini(&w);
}

int
main(void)
{
	RUN(empty);
	RUN(owner_max_job_time_and_unlent_gpus);
	RUN(single_fit);
	RUN(backoff_and_avoided_nodes);
	RUN(best_fit_picks_tighter_node);
	RUN(best_fit_memory_then_id);
	RUN(gpu_indices_are_the_nodes_own);
	RUN(gpu_matches);
	RUN(model_and_memory_constraints);
	RUN(multi_gpu_stays_on_one_node);
	RUN(jobs_that_do_not_fit_wait);
	RUN(fifo_fills_in_order);
	RUN(fifo_head_is_not_overtaken_by_unlimited_job);
	RUN(backfill_short_job_ahead_of_blocked_big_job);
	RUN(backfill_long_job_goes_to_another_node);
	RUN(backfill_long_job_uses_resources_the_reservation_leaves);
	RUN(backfill_respects_cpus_at_the_reservation);
	RUN(reservation_counts_jobs_this_plan_starts);
	RUN(reservation_on_earliest_node);
	RUN(unlimited_running_jobs_never_end);
	RUN(job_that_no_up_node_can_hold_does_not_block);
	RUN(down_nodes_are_skipped);
	RUN(cpu_limits);
	RUN(memory_limits);
	RUN(cpu_only_jobs);
	RUN(wait_reason_names_the_short_resource);
	RUN(interactive_gpus_are_kept);
	RUN(interactive_goes_first_within_fair_share);
	RUN(can_ever_fit);
	RUN(many_nodes);
	RUN(property_random_worlds);
	return unit_report();
}
