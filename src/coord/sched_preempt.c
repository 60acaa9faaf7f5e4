/*
 * sched_preempt.c: provider first: a lab's job preempts borrowed work on
 * the nodes its lab lends, choosing the victims that lose the least.
 * Part of the scheduler: see sched.c and sched_int.h.
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

/* ---- provider first: preemption ---- */

/* What preempting the job loses: over all its parts. */
static int64_t
job_loss(const struct gp_sched_engine *s, int64_t job_id)
{
	int64_t loss = 0;
	size_t i;

	for (i = job_runs(s, job_id); i != NONE; i = s->runs[i].next) {
		const struct run_rec *r = &s->runs[i];
		int64_t milli;
		if (!r->alive)
			continue;
		if (r->saved_ms <= 0) {
			loss += r->loss;
			continue;
		}
		/* GPU-milliseconds since its work was last saved. */
		milli = r->shared ? r->milli
		                  : GP_SCHED_MILLI *
		        (int64_t)__builtin_popcountll(r->whole);
		if (s->e.now_ms > r->saved_ms)
			loss += (s->e.now_ms - r->saved_ms) * milli /
			    GP_SCHED_MILLI;
	}
	return loss;
}

struct victim {
	size_t rec;
	int64_t loss;
	int64_t job_id;
};

static int
cmp_victim(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	if (x->loss != y->loss)
		return x->loss < y->loss ? -1 : 1;
	/* Equal losses: the newest job first. */
	return x->job_id > y->job_id ? -1 : x->job_id < y->job_id;
}

/* 1 when one part of r fits n now. */
int
fits_node(struct gp_sched_engine *s, struct eng_node *n, struct part_req *r)
{
	struct choice c;

	r->avoid_reserved = 0;
	if (!node_may_fit(&s->e, n, r))
		return 0;
	if (s->e.accepts != NULL &&
	    !s->e.accepts(s->e.accepts_arg, n->src, r->job))
		return 0;
	memset(&c, 0, sizeof(c));
	return s->e.policy->score(&s->e, n, r, &c) == 0;
}

/*
 * Victims on n for r: borrowed, preemptible work, least loss first, only
 * those needed. OUT: v[0..*nv). Returns the total loss, -1 when even all
 * of them would not make room. Leaves the engine as it found it.
 */
static int64_t
victims_on(struct gp_sched_engine *s, struct eng_node *n, struct part_req *r,
    struct victim *v, size_t *nv)
{
	size_t i, k, cnt = 0, upto;
	int64_t total = 0;
	int fit = 0;

	for (i = n->runs; i != NONE; i = s->runs[i].nnext) {
		const struct run_rec *rr = &s->runs[i];
		if (!rr->alive || rr->group == n->group || !rr->preemptible ||
		    rr->preempt_for != 0 || rr->pass_no == s->pass_no)
			continue;
		v[cnt].rec = i;
		v[cnt].job_id = rr->job_id;
		v[cnt++].loss = job_loss(s, rr->job_id);
	}
	qsort(v, cnt, sizeof(*v), cmp_victim);
	for (upto = 0; upto < cnt && !fit; upto++) {
		run_release(s, v[upto].rec);
		fit = fits_node(s, n, r);
	}
	if (!fit) {
		for (k = upto; k-- > 0;)
			run_restore(s, v[k].rec);
		return -1;
	}
	/* Keep back those not needed after all, the costliest first. */
	for (k = upto; k-- > 0;) {
		run_restore(s, v[k].rec);
		if (fits_node(s, n, r)) {
			v[k].rec = NONE;
			continue;
		}
		run_release(s, v[k].rec);
	}
	for (k = 0, *nv = 0; k < upto; k++) {
		if (v[k].rec == NONE)
			continue;
		run_restore(s, v[k].rec);
		total += v[k].loss;
		v[(*nv)++] = v[k];
	}
	return total;
}

/* Preempts borrowed work on the lab's nodes for job, when that helps. */
int
try_preempt(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int *placed)
{
	struct engine *e = &s->e;
	struct victim *v = NULL, *best_v = NULL;
	size_t nv = 0, best_nv = 0, i, k, capv = 0;
	struct eng_node *best_n = NULL;
	struct part_req r;
	int64_t loss, best_loss = -1;
	struct scan sc;
	int room, fit, rc = GP_ENOMEM;

	*placed = 0;
	if (job_parts(job) > 1 || job->gpus > GP_SCHED_GPUS_MAX)
		return 0;
	part_init(e, job, &r);
	for (i = 0; i < e->nnodes; i++) {
		struct eng_node *n = &e->nodes[i];
		size_t cnt = 0;
		if (!n->up || n->group != job->group)
			continue;
		/* Room for the victims on n: what runs there. */
		for (k = n->runs; k != NONE; k = s->runs[k].nnext)
			cnt++;
		if (cnt == 0)
			continue;
		if (cnt > capv) {
			struct victim *a = realloc(v, cnt * sizeof(*a));
			struct victim *b = a != NULL
			    ? realloc(best_v, cnt * sizeof(*b))
			    : NULL;
			if (a != NULL)
				v = a;
			if (b == NULL)
				goto out;
			best_v = b;
			capv = cnt;
		}
		loss = victims_on(s, n, &r, v, &nv);
		if (loss < 0 || nv == 0)
			continue;
		if (best_n == NULL || loss < best_loss ||
		    (loss == best_loss && nv < best_nv)) {
			best_n = n;
			best_loss = loss;
			best_nv = nv;
			memcpy(best_v, v, nv * sizeof(*v));
		}
	}
	rc = 0;
	if (best_n == NULL)
		goto out;
	for (k = 0; k < best_nv; k++) {
		int64_t id = s->runs[best_v[k].rec].job_id;
		int64_t node_id = e->nodes[s->runs[best_v[k].rec].node].id;
		if (!s->runs[best_v[k].rec].alive ||
		    s->runs[best_v[k].rec].preempt_for != 0)
			continue; /* another part of a job already taken */
		for (i = job_runs(s, id); i != NONE; i = s->runs[i].next) {
			if (!s->defer_preempt) {
				run_release(s, i);
				continue;
			}
			/* Asked to stop: it holds its room until it has. */
			s->runs[i].preempt_for = job->id;
			if (s->runs[i].alive &&
			    pending_adj(s, job->id, 1) != 0) {
				rc = GP_ENOMEM;
				goto out;
			}
		}
		if (!s->defer_preempt)
			job_reclaim(s, id);
		if ((rc = result_preempt(s, id, job->id, node_id)) != 0)
			goto out;
	}
	if (s->defer_preempt)
		goto out;
	memset(&sc, 0, sizeof(sc));
	sc.only_group = job->group;
	rc = place_job(s, job, &sc, placed, &room, &fit);
out:
	free(v);
	free(best_v);
	return rc;
}
