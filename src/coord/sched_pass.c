/*
 * sched_pass.c: one pass over the queue (provider first, fair share, EASY
 * backfill, the failed-shape memo) and gp_sched_plan, which builds an
 * engine from its input, runs one pass and drops it. Part of the
 * scheduler: see sched.c and sched_int.h.
 */
#include "sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "sched_int.h"
#include "util.h"

/* A (shape, lab) that found no room on the lab's nodes in step 1. */
struct own_fail {
	int shape;
	int64_t group;
};

static int
own_failed(const struct own_fail *f, size_t n, int shape, int64_t group)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (f[i].shape == shape && f[i].group == group)
			return 1;
	return 0;
}

static int
same_text(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/*
 * Whether two jobs ask for the same on every node (what earliest_start
 * looks at, owners' acceptance aside): one that could never start
 * answers for the other.
 */
static int
same_request(const struct gp_sched_job *a, const struct gp_sched_job *b)
{
	return a->gpus == b->gpus && a->gpu_milli == b->gpu_milli &&
	    a->shared == b->shared && a->gpu_mem_mib == b->gpu_mem_mib &&
	    a->min_gpu_mem_mib == b->min_gpu_mem_mib &&
	    a->min_capability == b->min_capability &&
	    a->max_price == b->max_price && a->cpu_milli == b->cpu_milli &&
	    a->interactive == b->interactive &&
	    a->mem_mib == b->mem_mib && a->time_limit_s == b->time_limit_s &&
	    job_parts(a) == job_parts(b) && same_text(a->gpu_model, b->gpu_model);
}

int
pass(struct gp_sched_engine *s, const struct gp_sched_job *const *queue,
    size_t nqueue, int no_preempt)
{
	struct engine *e = &s->e;
	const struct gp_sched_job *never = NULL; /* the last that never fits */
	unsigned char *todo = NULL;
	struct own_fail *ofail = NULL;
	size_t nofail = 0, capofail = 0;
	struct fair f;
	size_t q, user;
	int rc = GP_ENOMEM, placed, room, fit, ever;
	char buf[160];

	memset(&f, 0, sizeof(f));
	resv_clear(s);
	if (++s->pass_no == 0)
		s->pass_no = 1;
	todo = calloc(nqueue + 1, 1);
	if (todo == NULL)
		goto out;
	if (s->capfailed < e->nshapes + nqueue + 1) {
		free(s->shape_failed);
		s->capfailed = 2 * (e->nshapes + nqueue) + 16;
		s->shape_failed =
		    malloc(s->capfailed * sizeof(*s->shape_failed));
		if (s->shape_failed == NULL) {
			s->capfailed = 0;
			goto out;
		}
	}
	memset(s->shape_failed, 0, s->capfailed * sizeof(*s->shape_failed));

	/* Held jobs wait; the others are to do. */
	for (q = 0; q < nqueue; q++) {
		const struct gp_sched_job *job = queue[q];
		if (job->hold != GP_SCHED_HOLD_NONE) {
			if ((rc = result_wait(s, job, GP_SCHED_WAIT_HELD,
			         hold_words(job, buf, sizeof(buf)))) != 0)
				goto out;
			continue;
		}
		if (job->not_before_ms > s->e.now_ms) {
			if ((rc = result_wait(s, job, GP_SCHED_WAIT_BACKOFF,
			         job->retry_why)) != 0)
				goto out;
			continue;
		}
		if (job->gpus < 0 || job->gpus > GP_SCHED_GPUS_MAX ||
		    job_parts(job) > GP_SCHED_PARTS_MAX) {
			if ((rc = result_wait(s, job, GP_SCHED_WAIT_NEVER,
			         "asks for more than a node or a gang can "
			         "have")) != 0)
				goto out;
			continue;
		}
		todo[q] = 1;
	}

	/*
	 * 1. Provider first. Without preemption, or when it is only asked
	 * for (deferred), what is free only shrinks in this step: a shape
	 * that found no room on its lab's nodes is not tried again there.
	 */
	for (q = 0; q < nqueue; q++) {
		const struct gp_sched_job *job = queue[q];
		struct part_req r;
		struct scan sc;
		int pending;
		if (!todo[q] || job->group == 0 || !lab_has_nodes(s, job->group))
			continue;
		part_init(e, job, &r);
		pending = s->npend > 0 && job_pending(s, job->id);
		if (!pending && (no_preempt || s->defer_preempt) &&
		    own_failed(ofail, nofail, r.shape, job->group))
			continue;
		memset(&sc, 0, sizeof(sc));
		sc.only_group = job->group;
		if ((rc = place_job(s, job, &sc, &placed, &room, &fit)) != 0)
			goto out;
		if (!placed && !no_preempt && !pending &&
		    (rc = try_preempt(s, job, &placed)) != 0)
			goto out;
		if (placed) {
			todo[q] = 0;
			continue;
		}
		if (s->npend > 0 && job_pending(s, job->id)) {
			/* Its victims are saving their work: it waits for
			 * their room, and takes nobody else's. */
			todo[q] = 0;
			if ((rc = result_wait(s, job,
			         GP_SCHED_WAIT_PREEMPTING, NULL)) != 0)
				goto out;
			continue;
		}
		if ((no_preempt || s->defer_preempt) && r.shape >= 0) {
			if (nofail == capofail) {
				size_t cap = capofail ? capofail * 2 : 16;
				struct own_fail *o =
				    realloc(ofail, cap * sizeof(*o));
				if (o == NULL) {
					rc = GP_ENOMEM;
					goto out;
				}
				ofail = o;
				capofail = cap;
			}
			ofail[nofail].shape = r.shape;
			ofail[nofail++].group = job->group;
		}
	}

	/* 2, 3. Fair share, with EASY backfill. */
	if ((rc = fair_init(s, &f, queue, todo, nqueue)) != 0)
		goto out;
	while ((q = fair_next(&f, &user)) != NONE) {
		const struct gp_sched_job *job = queue[q];
		struct part_req r;
		struct scan sc;
		int is_head = 0;

		/*
		 * As the last one asking the same, which could not start
		 * and never can: never, without trying to place it (what is
		 * free has only shrunk since). A queue that no node up can
		 * take (all paused) is all of this kind.
		 */
		if (!s->quick && !s->resv.active && never != NULL &&
		    e->accepts == NULL && same_request(job, never)) {
			if ((rc = result_wait(s, job, GP_SCHED_WAIT_NEVER,
			         NULL)) != 0)
				goto out;
			continue;
		}
		part_init(e, job, &r);
		if (r.shape >= 0 && (size_t)r.shape < s->capfailed &&
		    s->shape_failed[r.shape]) {
			const struct gp_sched_waiting *w =
			    &s->res->waiting[s->shape_failed[r.shape] - 1];
			char why[sizeof(w->why)];
			gp_strlcpy(why, w->why, sizeof(why));
			if ((rc = result_wait(s, job, w->reason, why)) != 0)
				goto out;
			continue;
		}
		memset(&sc, 0, sizeof(sc));
		sc.use_resv = 1;
		if ((rc = place_job(s, job, &sc, &placed, &room, &fit)) != 0)
			goto out;
		if (placed) {
			double d = job_dominant(e, job);
			f.users[user].held += d;
			f.groups[f.users[user].taken].held += d;
			continue;
		}
		if (s->quick) {
			if ((rc = result_wait(s, job, GP_SCHED_WAIT_RESOURCES,
			         NULL)) != 0)
				goto out;
			continue;
		}
		/* The first job that waits (and could ever start) gets the
		 * reservation. */
		if (!s->resv.active) {
			ever = resv_reuse(s, job);
			if (!ever) {
				ever = earliest_start(s, job, 1);
				if (ever == 1)
					resv_save(s, job);
			}
			if (ever < 0) {
				rc = ever;
				goto out;
			}
			if (!ever) {
				char why[160] = "";
				never = job;
				/* Owners may keep what it needs for interactive
				 * jobs: say so rather than "never". */
				if (!job->interactive)
					short_resource(s, job, why, sizeof(why));
				if ((rc = result_wait(s, job,
				         GP_SCHED_WAIT_NEVER, strstr(why,
				         "interactive") != NULL ? why : NULL)) !=
				    0)
					goto out;
				continue;
			}
			is_head = 1;
			s->res->head_job_id = job->id;
		}
		if ((rc = explain(s, job, room, is_head)) != 0)
			goto out;
		if (is_head)
			s->res->waiting[s->res->nwaiting - 1].start_ms =
			    s->resv.start_ms;
		/* A shape with no room at all stays without: remember. */
		if (!room && r.shape >= 0 && (size_t)r.shape < s->capfailed &&
		    !is_head)
			s->shape_failed[r.shape] = s->res->nwaiting;
	}
	rc = 0;
out:
	fair_fini(&f);
	free(todo);
	free(ofail);
	resv_clear(s);
	return rc;
}

/* The queue as pointers (what pass takes). NULL on ENOMEM. */
const struct gp_sched_job **
queue_ptrs(const struct gp_sched_job *queue, size_t nqueue)
{
	const struct gp_sched_job **p = calloc(nqueue + 1, sizeof(*p));
	size_t i;

	if (p == NULL)
		return NULL;
	for (i = 0; i < nqueue; i++)
		p[i] = &queue[i];
	return p;
}

/* The mix, when the caller gives none: the queue and what runs. */
static int
mix_from_input(struct gp_sched_engine *s, const struct gp_sched_input *in)
{
	struct gp_sched_mix mix;
	struct gp_sched_shape *sh;
	size_t i, n = 0;
	int rc;

	sh = calloc(in->nqueue + s->nruns + 1, sizeof(*sh));
	if (sh == NULL)
		return GP_ENOMEM;
	for (i = 0; i < in->nqueue; i++) {
		const struct gp_sched_job *j = &in->queue[i];
		sh[n].cpu_milli = j->cpu_milli;
		sh[n].mem_mib = j->mem_mib;
		sh[n].gpus = job_is_shared(j) ? 1 : j->gpus;
		sh[n].gpu_milli = job_is_shared(j) ? j->gpu_milli : 1000;
		sh[n].gpu_model = j->gpu_model;
		sh[n++].weight = job_parts(j);
	}
	for (i = 0; i < s->nruns; i++) {
		const struct run_rec *r = &s->runs[i];
		sh[n].cpu_milli = r->cpu;
		sh[n].mem_mib = r->mem;
		sh[n].gpus = r->shared ? 1 : __builtin_popcountll(r->whole);
		sh[n].gpu_milli = r->shared ? r->milli : 1000;
		sh[n++].weight = 1;
	}
	mix.shapes = sh;
	mix.nshapes = n;
	rc = eng_mix_build(&s->e, &mix);
	free(sh);
	return rc;
}

int
gp_sched_plan(const struct gp_sched_input *in, struct gp_sched_result *res)
{
	struct gp_sched_engine s;
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = engine_init(&s, in->nodes, in->nnodes, in->policy,
	         in->seed)) != 0)
		goto out;
	s.e.now_ms = in->now_ms;
	s.e.accepts = in->accepts;
	s.e.accepts_arg = in->accepts_arg;
	s.groups = in->groups;
	s.ngroups = in->ngroups;
	s.users = in->users;
	s.nusers = in->nusers;
	s.res = res;
	if ((rc = engine_add_running(&s, in->running, in->nrunning)) != 0)
		goto out;
	if (s.e.policy->uses_mix) {
		rc = in->mix != NULL ? eng_mix_build(&s.e, in->mix)
		                     : mix_from_input(&s, in);
		if (rc != 0)
			goto out;
	}
	{
		const struct gp_sched_job **qp =
		    queue_ptrs(in->queue, in->nqueue);
		rc = qp != NULL ? pass(&s, qp, in->nqueue, in->no_preempt)
		                : GP_ENOMEM;
		free(qp);
	}
out:
	engine_fini(&s);
	if (rc != 0)
		gp_sched_result_fini(res);
	return rc;
}
