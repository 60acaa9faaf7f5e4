/*
 * test_sched_live.c: the scheduler's long-lived engine as the coordinator
 * keeps it (sched.h, "The live coordinator keeps one engine"): nodes
 * added and changed in place (offers, lent GPUs, up and down), parts that
 * end one by one, what runs recorded after a restart, deferred
 * preemption, records reused, and a property test: after any sequence of
 * changes, a pass of the long-lived engine places exactly as a fresh plan
 * over the same world does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/sched.h"
#include "gp.h"
#include "unit.h"

#define NOW 1000000000LL

struct lnode {
	struct gp_sched_node n;
	struct gp_sched_gpu g[8];
};

static void
lnode_init(struct lnode *ln, int64_t id, int ngpus, int cpus, int64_t group)
{
	int i;

	memset(ln, 0, sizeof(*ln));
	ln->n.id = id;
	ln->n.up = 1;
	ln->n.cpu_milli = (int64_t)cpus * 1000;
	ln->n.group = group;
	ln->n.ngpus = ngpus;
	ln->n.gpus = ln->g;
	for (i = 0; i < ngpus; i++) {
		ln->g[i].index = i;
		ln->g[i].model = "Fake GPU";
		ln->g[i].mem_mib = 16384;
		ln->g[i].capability = 80;
	}
}

static struct gp_sched_job
job1(int64_t id, int gpus, int milli, int64_t group)
{
	struct gp_sched_job j;

	memset(&j, 0, sizeof(j));
	j.id = id;
	j.gpus = gpus;
	j.gpu_milli = milli;
	j.shared = milli > 0 && milli < 1000;
	j.cpu_milli = 1000;
	j.group = group;
	j.user = 1;
	return j;
}

/* One pass over jobs (pointers), deferred preemption as live does. */
static int
run(struct gp_sched_engine *e, struct gp_sched_job *jobs, size_t n,
    struct gp_sched_result *res)
{
	const struct gp_sched_job *q[64];
	struct gp_sched_pass p;
	size_t i;

	for (i = 0; i < n; i++)
		q[i] = &jobs[i];
	memset(&p, 0, sizeof(p));
	p.now_ms = NOW;
	p.queue = q;
	p.nqueue = n;
	p.defer_preempt = 1;
	return gp_sched_engine_run_pass(e, &p, res);
}

static int64_t
node_of(const struct gp_sched_result *r, int64_t job)
{
	size_t i;

	for (i = 0; i < r->nassignments; i++)
		if (r->assignments[i].job_id == job)
			return r->assignments[i].node_id;
	return 0;
}

static int
reason_of(const struct gp_sched_result *r, int64_t job)
{
	size_t i;

	for (i = 0; i < r->nwaiting; i++)
		if (r->waiting[i].job_id == job)
			return r->waiting[i].reason;
	return 0;
}

TEST(nodes_come_change_and_go)
{
	struct gp_sched_engine *e = NULL;
	struct gp_sched_result res;
	struct lnode a, b;
	struct gp_sched_job j[4];

	CHECK_EQ(gp_sched_engine_new(NULL, 0, gp_sched_policy_find("bestfit"),
	             NULL, 1, &e),
	    0);
	lnode_init(&a, 1, 2, 8, 0);
	lnode_init(&b, 2, 1, 8, 0);
	CHECK_EQ(gp_sched_engine_node_set(e, &a.n), 0);
	CHECK_EQ(gp_sched_engine_node_set(e, &b.n), 0);
	/* ids must grow */
	CHECK_EQ(gp_sched_engine_node_set(e, &(struct gp_sched_node){.id = 0}),
	    GP_EINVAL);
	/* a lends only GPU 1 now; b goes down */
	a.g[0].job_id = -1;
	b.n.up = 0;
	CHECK_EQ(gp_sched_engine_node_set(e, &a.n), 0);
	CHECK_EQ(gp_sched_engine_node_set(e, &b.n), 0);
	j[0] = job1(10, 1, 0, 0);
	j[1] = job1(11, 1, 0, 0);
	CHECK_EQ(run(e, j, 2, &res), 0);
	CHECK_EQ(res.nassignments, 1);
	CHECK_EQ(node_of(&res, 10), 1);
	CHECK_EQ(res.assignments[0].gpus[0], 1);
	CHECK_EQ(reason_of(&res, 11), GP_SCHED_WAIT_PRIORITY);
	gp_sched_result_fini(&res);
	/* b comes back: 11 goes there */
	b.n.up = 1;
	CHECK_EQ(gp_sched_engine_node_set(e, &b.n), 0);
	CHECK_EQ(run(e, &j[1], 1, &res), 0);
	CHECK_EQ(node_of(&res, 11), 2);
	gp_sched_result_fini(&res);
	/* a reclaims GPU 1 while 10 runs: it keeps it until it ends, and
	 * the GPU is not given again once free */
	a.g[1].job_id = -1;
	CHECK_EQ(gp_sched_engine_node_set(e, &a.n), 0);
	CHECK_EQ(gp_sched_engine_nrunning(e), 2);
	CHECK_EQ(gp_sched_engine_end_part(e, 10, 1), 0);
	CHECK_EQ(gp_sched_engine_end_part(e, 10, 1), GP_ENOENT);
	j[2] = job1(12, 1, 0, 0);
	CHECK_EQ(run(e, &j[2], 1, &res), 0);
	CHECK_EQ(res.nassignments, 0);
	gp_sched_result_fini(&res);
	/* fewer CPUs offered than what runs uses: nothing more fits */
	b.n.cpu_milli = 500;
	b.g[0].job_id = 0;
	CHECK_EQ(gp_sched_engine_node_set(e, &b.n), 0);
	CHECK_EQ(gp_sched_engine_end_part(e, 11, 2), 0);
	CHECK_EQ(run(e, &j[2], 1, &res), 0);
	CHECK_EQ(res.nassignments, 0);
	gp_sched_result_fini(&res);
	b.n.cpu_milli = 8000;
	CHECK_EQ(gp_sched_engine_node_set(e, &b.n), 0);
	CHECK_EQ(run(e, &j[2], 1, &res), 0);
	CHECK_EQ(node_of(&res, 12), 2);
	gp_sched_result_fini(&res);
	gp_sched_engine_free(e);
}

TEST(fractions_share_a_gpu_and_restart)
{
	struct gp_sched_engine *e = NULL;
	struct gp_sched_result res;
	struct gp_sched_running r;
	struct lnode a;
	struct gp_sched_job j[3];
	int gpu = 0;

	CHECK_EQ(gp_sched_engine_new(NULL, 0, NULL, NULL, 1, &e), 0);
	lnode_init(&a, 5, 1, 8, 0);
	CHECK_EQ(gp_sched_engine_node_set(e, &a.n), 0);
	/* after a restart: a half runs there */
	memset(&r, 0, sizeof(r));
	r.job_id = 1;
	r.node_id = 5;
	r.cpu_milli = 1000;
	r.end_ms = INT64_MAX;
	r.shared = 1;
	r.gpu = 0;
	r.gpu_milli = 500;
	CHECK_EQ(gp_sched_engine_run_add(e, &r, NULL, 0), 0);
	/* a whole job cannot take a shared GPU, nor a record its GPU */
	CHECK_EQ(gp_sched_engine_run_add(e,
	             &(struct gp_sched_running){.job_id = 2, .node_id = 5},
	             &gpu, 1),
	    GP_ECONFLICT);
	CHECK_EQ(gp_sched_engine_run_add(e,
	             &(struct gp_sched_running){.job_id = 2, .node_id = 9},
	             &gpu, 1),
	    GP_ENOENT);
	j[0] = job1(2, 1, 500, 0);
	j[1] = job1(3, 1, 500, 0);
	j[2] = job1(4, 1, 0, 0);
	CHECK_EQ(run(e, j, 3, &res), 0);
	CHECK_EQ(res.nassignments, 1);
	CHECK_EQ(node_of(&res, 2), 5);
	CHECK_EQ(res.assignments[0].gpu_milli, 500);
	CHECK(reason_of(&res, 3) != 0);
	CHECK(reason_of(&res, 4) != 0);
	gp_sched_result_fini(&res);
	CHECK_EQ(gp_sched_engine_end(e, 1), 0);
	CHECK_EQ(run(e, &j[1], 1, &res), 0);
	CHECK_EQ(node_of(&res, 3), 5);
	gp_sched_result_fini(&res);
	gp_sched_engine_free(e);
}

TEST(gang_parts_end_one_by_one)
{
	struct gp_sched_engine *e = NULL;
	struct gp_sched_result res;
	struct lnode n[3];
	struct gp_sched_job g, other;
	int i;

	CHECK_EQ(gp_sched_engine_new(NULL, 0, NULL, NULL, 1, &e), 0);
	for (i = 0; i < 3; i++) {
		lnode_init(&n[i], i + 1, 1, 4, 0);
		CHECK_EQ(gp_sched_engine_node_set(e, &n[i].n), 0);
	}
	g = job1(7, 1, 0, 0);
	g.parts = 3;
	CHECK_EQ(run(e, &g, 1, &res), 0);
	CHECK_EQ(res.nassignments, 3);
	gp_sched_result_fini(&res);
	CHECK_EQ(gp_sched_engine_nrunning(e), 3);
	/* node 2 is lost: its part ends; the others still hold theirs */
	CHECK_EQ(gp_sched_engine_end_part(e, 7, 2), 0);
	CHECK_EQ(gp_sched_engine_nrunning(e), 2);
	other = job1(8, 1, 0, 0);
	other.parts = 2;
	CHECK_EQ(run(e, &other, 1, &res), 0);
	CHECK_EQ(res.nassignments, 0);
	CHECK_EQ(reason_of(&res, 8), GP_SCHED_WAIT_GANG);
	gp_sched_result_fini(&res);
	CHECK_EQ(gp_sched_engine_end_part(e, 7, 1), 0);
	CHECK_EQ(gp_sched_engine_end_part(e, 7, 3), 0);
	CHECK_EQ(gp_sched_engine_nrunning(e), 0);
	CHECK_EQ(run(e, &other, 1, &res), 0);
	CHECK_EQ(res.nassignments, 2);
	gp_sched_result_fini(&res);
	gp_sched_engine_free(e);
}

TEST(deferred_preemption)
{
	struct gp_sched_engine *e = NULL;
	struct gp_sched_result res;
	struct lnode lab, pub;
	struct gp_sched_job borrowed[2], own, plain;

	CHECK_EQ(gp_sched_engine_new(NULL, 0, NULL, NULL, 1, &e), 0);
	lnode_init(&lab, 1, 2, 8, 7); /* lab 7 lends 2 GPUs */
	lnode_init(&pub, 2, 1, 8, 0);
	CHECK_EQ(gp_sched_engine_node_set(e, &lab.n), 0);
	borrowed[0] = job1(1, 1, 0, 3);
	borrowed[1] = job1(2, 1, 0, 3);
	CHECK_EQ(run(e, borrowed, 2, &res), 0);
	CHECK_EQ(res.nassignments, 2);
	gp_sched_result_fini(&res);
	/* job 1 saved its work a minute ago, job 2 just now: 2 loses less */
	CHECK_EQ(gp_sched_engine_run_set(e, 1, 1, NOW - 60000, 0), 0);
	CHECK_EQ(gp_sched_engine_run_set(e, 2, 1, NOW - 1000, 0), 0);
	own = job1(3, 1, 0, 7);
	CHECK_EQ(run(e, &own, 1, &res), 0);
	CHECK_EQ(res.nassignments, 0);
	CHECK_EQ(res.npreemptions, 1);
	CHECK_EQ(res.preemptions[0].job_id, 2);
	CHECK_EQ(res.preemptions[0].for_job_id, 3);
	CHECK_EQ(reason_of(&res, 3), GP_SCHED_WAIT_PREEMPTING);
	gp_sched_result_fini(&res);
	/* the victim still holds its GPU: nothing is preempted twice, the
	 * lab's job takes no other room (a public node comes up) */
	CHECK_EQ(gp_sched_engine_node_set(e, &pub.n), 0);
	CHECK_EQ(run(e, &own, 1, &res), 0);
	CHECK_EQ(res.nassignments, 0);
	CHECK_EQ(res.npreemptions, 0);
	CHECK_EQ(reason_of(&res, 3), GP_SCHED_WAIT_PREEMPTING);
	gp_sched_result_fini(&res);
	/* another job cannot take the victim's GPU either */
	plain = job1(4, 1, 0, 3);
	CHECK_EQ(run(e, &plain, 1, &res), 0);
	CHECK_EQ(node_of(&res, 4), 2);
	gp_sched_result_fini(&res);
	/* the victim has saved and gone: the lab's job gets its GPU */
	CHECK_EQ(gp_sched_engine_end(e, 2), 0);
	CHECK_EQ(run(e, &own, 1, &res), 0);
	CHECK_EQ(node_of(&res, 3), 1);
	CHECK_EQ(res.npreemptions, 0);
	gp_sched_result_fini(&res);
	gp_sched_engine_free(e);
}

/*
 * An interactive job on a lab's GPU is never preempted for the lab's own
 * work (docs/scheduling.md: interactive jobs are not moved): provider
 * first finds no victim, the lab's job waits for the GPU.
 */
TEST(interactive_jobs_are_not_preempted)
{
	struct gp_sched_engine *e = NULL;
	struct gp_sched_result res;
	struct lnode lab;
	struct gp_sched_job shell, own;

	CHECK_EQ(gp_sched_engine_new(NULL, 0, NULL, NULL, 1, &e), 0);
	lnode_init(&lab, 1, 1, 8, 7);
	CHECK_EQ(gp_sched_engine_node_set(e, &lab.n), 0);
	shell = job1(1, 1, 0, 3);
	shell.interactive = 1;
	CHECK_EQ(run(e, &shell, 1, &res), 0);
	CHECK_EQ(node_of(&res, 1), 1);
	gp_sched_result_fini(&res);
	own = job1(2, 1, 0, 7);
	CHECK_EQ(run(e, &own, 1, &res), 0);
	CHECK_EQ(res.nassignments, 0);
	CHECK_EQ(res.npreemptions, 0);
	CHECK(reason_of(&res, 2) != GP_SCHED_WAIT_PREEMPTING);
	gp_sched_result_fini(&res);
	gp_sched_engine_free(e);
}

TEST(records_are_reused)
{
	struct gp_sched_engine *e = NULL;
	struct gp_sched_result res;
	struct lnode a;
	struct gp_sched_job j[4];
	int64_t id = 1;
	int round, k;

	CHECK_EQ(gp_sched_engine_new(NULL, 0, NULL, NULL, 1, &e), 0);
	lnode_init(&a, 1, 4, 16, 0);
	CHECK_EQ(gp_sched_engine_node_set(e, &a.n), 0);
	for (round = 0; round < 5000; round++) {
		for (k = 0; k < 4; k++)
			j[k] = job1(id + k, 1, 0, 0);
		CHECK_EQ(run(e, j, 4, &res), 0);
		CHECK_EQ(res.nassignments, 4);
		gp_sched_result_fini(&res);
		for (k = 0; k < 4; k++)
			CHECK_EQ(gp_sched_engine_end(e, id + k), 0);
		id += 4;
	}
	CHECK_EQ(gp_sched_engine_nrunning(e), 0);
	CHECK(gp_sched_engine_nrecords(e) <= 8);
	gp_sched_engine_free(e);
}

/*
 * Property: random worlds changed at random (nodes up and down, GPUs lent
 * or not, CPUs offered, jobs started and ended part by part); at each
 * step a pass of the long-lived engine and a fresh gp_sched_plan over the
 * same world place the same jobs on the same nodes and GPUs.
 */
#define PN 12
#define PJ 400

struct pjob {
	int running;
	int64_t node[4];
	int gpus[4][8], ngpus[4];
	int nparts;
	struct gp_sched_job spec;
};

static uint64_t rng = 88172645463325252ULL;

static unsigned
rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

/* Parts alive in the test's own books. */
static size_t
nr_alive_check(const struct pjob *jobs)
{
	size_t k, n = 0;
	int part;

	for (k = 1; k < PJ; k++)
		for (part = 0; jobs[k].running && part < jobs[k].nparts;
		     part++)
			n += jobs[k].node[part] != 0;
	return n;
}

TEST(property_same_as_a_fresh_plan)
{
	struct gp_sched_engine *e = NULL;
	struct lnode nodes[PN];
	static struct pjob jobs[PJ];
	struct gp_sched_node view[PN];
	struct gp_sched_gpu vg[PN][8];
	struct gp_sched_running run_in[PJ * 4];
	struct gp_sched_job queue[16];
	const struct gp_sched_job *qp[16];
	struct gp_sched_result a, b;
	struct gp_sched_input in;
	struct gp_sched_pass p;
	size_t nq, nr, i, k;
	int step, x, g, mismatches = 0, placed = 0;
	int64_t next_job = 1;

	CHECK_EQ(gp_sched_engine_new(NULL, 0, gp_sched_policy_find("bestfit"),
	             NULL, 1, &e),
	    0);
	for (i = 0; i < PN; i++) {
		lnode_init(&nodes[i], (int64_t)i + 1, 1 + (int)rnd(8),
		    4 + (int)rnd(12), 0);
		CHECK_EQ(gp_sched_engine_node_set(e, &nodes[i].n), 0);
	}
	memset(jobs, 0, sizeof(jobs));
	for (step = 0; step < 300; step++) {
		/* change some nodes */
		for (x = 0; x < 2; x++) {
			struct lnode *ln = &nodes[rnd(PN)];
			switch (rnd(3)) {
			case 0:
				ln->n.up = rnd(4) != 0;
				break;
			case 1:
				g = (int)rnd((unsigned)ln->n.ngpus);
				ln->g[g].job_id = rnd(3) == 0 ? -1 : 0;
				break;
			default:
				ln->n.cpu_milli = (4 + rnd(12)) * 1000;
			}
			CHECK_EQ(gp_sched_engine_node_set(e, &ln->n), 0);
		}
		/* end some parts: a whole job at a time, or one part */
		for (k = 1; k < (size_t)next_job && k < PJ; k++) {
			struct pjob *j = &jobs[k];
			if (!j->running || rnd(4) != 0)
				continue;
			if (j->nparts > 1 && rnd(2) == 0) {
				int part = (int)rnd((unsigned)j->nparts);
				if (j->node[part] != 0) {
					CHECK_EQ(gp_sched_engine_end_part(e,
					             (int64_t)k, j->node[part]),
					    0);
					j->node[part] = 0;
				}
				continue;
			}
			gp_sched_engine_end(e, (int64_t)k);
			j->running = 0;
		}
		/* the world, as a fresh plan sees it */
		nr = 0;
		for (i = 0; i < PN; i++) {
			view[i] = nodes[i].n;
			view[i].gpus = vg[i];
			for (g = 0; g < nodes[i].n.ngpus; g++)
				vg[i][g] = nodes[i].g[g];
		}
		for (k = 1; k < (size_t)next_job && k < PJ; k++) {
			struct pjob *j = &jobs[k];
			int part;
			for (part = 0; j->running && part < j->nparts; part++) {
				struct gp_sched_running *r = &run_in[nr];
				size_t ni;
				if (j->node[part] == 0)
					continue;
				ni = (size_t)j->node[part] - 1;
				memset(r, 0, sizeof(*r));
				r->job_id = (int64_t)k;
				r->node_id = j->node[part];
				r->cpu_milli = j->spec.cpu_milli;
				r->end_ms = INT64_MAX;
				if (j->spec.shared) {
					r->shared = 1;
					r->gpu = j->gpus[part][0];
					r->gpu_milli = j->spec.gpu_milli;
					vg[ni][r->gpu].shared_milli +=
					    j->spec.gpu_milli;
					vg[ni][r->gpu].nshared++;
				} else {
					for (g = 0; g < j->ngpus[part]; g++)
						vg[ni][j->gpus[part][g]].job_id =
						    (int64_t)k;
				}
				nr++;
			}
		}
		/* unlent GPUs nobody holds whole */
		for (i = 0; i < PN; i++)
			for (g = 0; g < nodes[i].n.ngpus; g++)
				if (vg[i][g].job_id == 0 &&
				    nodes[i].g[g].job_id < 0)
					vg[i][g].job_id = -1;
		/* a few new jobs */
		nq = 0;
		for (x = 0; x < 6 && next_job < PJ; x++) {
			struct pjob *j = &jobs[next_job];
			int shape = (int)rnd(5);
			j->spec = job1(next_job, 1 + (int)rnd(3), 0, 0);
			if (shape == 0) {
				j->spec.gpus = 1;
				j->spec.gpu_milli = 250 * (1 + (int)rnd(3));
				j->spec.shared = 1;
			} else if (shape == 1) {
				j->spec.parts = 2 + (int)rnd(2);
				j->spec.gpus = 1;
			}
			j->spec.cpu_milli = 1000 * (1 + (int)rnd(3));
			queue[nq] = j->spec;
			qp[nq] = &queue[nq];
			nq++;
			next_job++;
		}
		memset(&in, 0, sizeof(in));
		in.now_ms = NOW;
		in.nodes = view;
		in.nnodes = PN;
		in.running = run_in;
		in.nrunning = nr;
		in.queue = queue;
		in.nqueue = nq;
		in.policy = gp_sched_policy_find("bestfit");
		in.no_preempt = 1;
		CHECK_EQ(gp_sched_plan(&in, &a), 0);
		memset(&p, 0, sizeof(p));
		p.now_ms = NOW;
		p.queue = qp;
		p.nqueue = nq;
		p.no_preempt = 1;
		CHECK_EQ(gp_sched_engine_run_pass(e, &p, &b), 0);
		if (a.nassignments != b.nassignments)
			mismatches++;
		for (i = 0; i < a.nassignments && i < b.nassignments; i++) {
			const struct gp_sched_assignment *x1 =
			    &a.assignments[i], *x2 = &b.assignments[i];
			if (x1->job_id != x2->job_id ||
			    x1->node_id != x2->node_id ||
			    x1->ngpus != x2->ngpus ||
			    memcmp(x1->gpus, x2->gpus,
			        sizeof(int) * (size_t)x1->ngpus) != 0)
				mismatches++;
		}
		/* what the long-lived engine started runs now */
		placed += (int)b.nassignments;
		for (i = 0; i < b.nassignments; i++) {
			const struct gp_sched_assignment *as =
			    &b.assignments[i];
			struct pjob *j = &jobs[as->job_id];
			j->running = 1;
			j->nparts = j->spec.parts > 1 ? j->spec.parts : 1;
			j->node[as->part] = as->node_id;
			j->ngpus[as->part] = as->ngpus;
			memcpy(j->gpus[as->part], as->gpus,
			    sizeof(int) * (size_t)as->ngpus);
		}
		gp_sched_result_fini(&a);
		gp_sched_result_fini(&b);
	}
	CHECK_EQ(mismatches, 0);
	CHECK(placed > 300); /* not vacuous */
	CHECK_EQ(gp_sched_engine_nrunning(e), nr_alive_check(jobs));
	gp_sched_engine_free(e);
}

int
main(void)
{
	RUN(nodes_come_change_and_go);
	RUN(fractions_share_a_gpu_and_restart);
	RUN(gang_parts_end_one_by_one);
	RUN(deferred_preemption);
	RUN(interactive_jobs_are_not_preempted);
	RUN(records_are_reused);
	RUN(property_same_as_a_fresh_plan);
	return unit_report();
}
