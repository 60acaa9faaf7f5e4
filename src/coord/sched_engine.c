/*
 * sched_engine.c: the engine kept across passes (gp_sched_engine_*), for
 * the simulator and the live scheduler: nodes and running parts changed
 * one by one, passes run on demand, statistics read back. Part of the
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

/* ---- the engine, for the simulator ---- */

int
gp_sched_engine_new(const struct gp_sched_node *nodes, size_t nnodes,
    const struct gp_sched_policy *policy, const struct gp_sched_mix *mix,
    uint64_t seed, struct gp_sched_engine **out)
{
	struct gp_sched_engine *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (s == NULL)
		return GP_ENOMEM;
	if ((rc = engine_init(s, nodes, nnodes, policy, seed)) != 0)
		goto fail;
	if (mix != NULL && (rc = eng_mix_build(&s->e, mix)) != 0)
		goto fail;
	*out = s;
	return 0;
fail:
	engine_fini(s);
	free(s);
	return rc;
}

void
gp_sched_engine_free(struct gp_sched_engine *s)
{
	if (s == NULL)
		return;
	engine_fini(s);
	free(s);
}

int
gp_sched_engine_pass(struct gp_sched_engine *s, int64_t now_ms,
    const struct gp_sched_job *queue, size_t nqueue,
    const struct gp_sched_share *groups, size_t ngroups,
    const struct gp_sched_share *users, size_t nusers,
    struct gp_sched_result *res)
{
	int rc;

	memset(res, 0, sizeof(*res));
	s->e.now_ms = now_ms;
	s->groups = groups;
	s->ngroups = ngroups;
	s->users = users;
	s->nusers = nusers;
	s->res = res;
	s->capassign = s->cappreempt = s->capwait = 0;
	s->defer_preempt = 0;
	{
		const struct gp_sched_job **qp = queue_ptrs(queue, nqueue);
		rc = qp != NULL ? pass(s, qp, nqueue, 0) : GP_ENOMEM;
		free(qp);
	}
	s->res = NULL;
	if (rc != 0)
		gp_sched_result_fini(res);
	return rc;
}

int
gp_sched_engine_end(struct gp_sched_engine *s, int64_t job_id)
{
	size_t i = job_runs(s, job_id);
	int found = 0;

	for (; i != NONE; i = s->runs[i].next)
		if (s->runs[i].alive) {
			run_release(s, i);
			found = 1;
		}
	job_reclaim(s, job_id);
	return found ? 0 : GP_ENOENT;
}

int
gp_sched_engine_end_part(struct gp_sched_engine *s, int64_t job_id,
    int64_t node_id)
{
	size_t i = job_runs(s, job_id);
	int found = 0;

	for (; i != NONE; i = s->runs[i].next)
		if (s->runs[i].alive &&
		    s->e.nodes[s->runs[i].node].id == node_id) {
			run_release(s, i);
			found = 1;
		}
	job_reclaim(s, job_id);
	return found ? 0 : GP_ENOENT;
}

int
gp_sched_engine_run_set(struct gp_sched_engine *s, int64_t job_id,
    int preemptible, int64_t saved_ms, int64_t preempt_for)
{
	size_t i = job_runs(s, job_id);
	int found = 0;

	for (; i != NONE; i = s->runs[i].next) {
		struct run_rec *r = &s->runs[i];
		if (!r->alive)
			continue;
		found = 1;
		r->preemptible = preemptible;
		r->saved_ms = saved_ms;
		if (r->preempt_for != preempt_for) {
			if (r->preempt_for != 0)
				pending_adj(s, r->preempt_for, -1);
			r->preempt_for = preempt_for;
			if (preempt_for != 0 &&
			    pending_adj(s, preempt_for, 1) != 0)
				return GP_ENOMEM;
		}
	}
	return found ? 0 : GP_ENOENT;
}

size_t
gp_sched_engine_nrunning(const struct gp_sched_engine *s)
{
	return s->nalive;
}

size_t
gp_sched_engine_nrecords(const struct gp_sched_engine *s)
{
	return s->nruns;
}

int
gp_sched_engine_set_mix(struct gp_sched_engine *s,
    const struct gp_sched_mix *mix)
{
	if (mix == NULL) {
		eng_mix_free(&s->e);
		return 0;
	}
	return eng_mix_build(&s->e, mix);
}

/* Makes room for one more node: every per-node array grows. */
static int
grow_nodes(struct gp_sched_engine *s)
{
	struct engine *e = &s->e;
	size_t cap = e->capnodes ? e->capnodes * 2 : 64, i;
	struct eng_node *nodes;
	struct gp_sched_node **set;

	nodes = realloc(e->nodes, (cap + 1) * sizeof(*nodes));
	if (nodes == NULL)
		return GP_ENOMEM;
	e->nodes = nodes;
	set = realloc(s->set_nodes, (cap + 1) * sizeof(*set));
	if (set == NULL)
		return GP_ENOMEM;
	for (i = e->capnodes; i <= cap; i++)
		set[i] = NULL;
	if (s->set_nodes == NULL)
		for (i = 0; i < e->capnodes; i++)
			set[i] = NULL;
	s->set_nodes = set;
	if (e->cache != NULL) {
		struct score_cache *c =
		    calloc(cap * e->capshapes + 1, sizeof(*c));
		if (c == NULL)
			return GP_ENOMEM;
		memcpy(c, e->cache,
		    e->nnodes * e->capshapes * sizeof(*c));
		free(e->cache);
		e->cache = c;
	}
	if (e->node_frag != NULL) {
		double *f = realloc(e->node_frag, (cap + 1) * sizeof(*f));
		unsigned *v;
		if (f == NULL)
			return GP_ENOMEM;
		e->node_frag = f;
		v = realloc(e->node_frag_version, (cap + 1) * sizeof(*v));
		if (v == NULL)
			return GP_ENOMEM;
		e->node_frag_version = v;
		for (i = e->capnodes; i <= cap; i++)
			v[i] = 0;
	}
	e->capnodes = cap;
	return 0;
}

/* The caller's node, copied (strings: the engine's interned models). */
static struct gp_sched_node *
copy_src(struct engine *e, const struct gp_sched_node *src,
    const struct eng_node *n)
{
	struct gp_sched_node *c = calloc(1, sizeof(*c));
	int i;

	if (c == NULL)
		return NULL;
	*c = *src;
	c->gpus = calloc((size_t)src->ngpus + 1, sizeof(*c->gpus));
	if (c->gpus == NULL) {
		free(c);
		return NULL;
	}
	for (i = 0; i < src->ngpus; i++) {
		c->gpus[i] = src->gpus[i];
		c->gpus[i].model = n->gpus[i].model >= 0
		    ? e->models[n->gpus[i].model]
		    : NULL;
	}
	return c;
}

int
gp_sched_engine_node_set(struct gp_sched_engine *s,
    const struct gp_sched_node *src)
{
	struct engine *e = &s->e;
	struct eng_node *n;
	struct eng_gpu *gpus = NULL;
	struct gp_sched_node *copy;
	size_t idx;
	int j, m, is_new = 0, same_layout;
	int64_t cpu_used, mem_used;

	if (src->ngpus < 0 || src->ngpus > GP_SCHED_GPUS_MAX)
		return GP_EINVAL;
	/* Ids grow: a node above the last one is new. */
	n = e->nnodes > 0 && e->nodes[e->nnodes - 1].id >= src->id
	    ? node_by_id(s, src->id)
	    : NULL;
	if (n == NULL) {
		if (e->nnodes > 0 && e->nodes[e->nnodes - 1].id >= src->id)
			return GP_EINVAL;
		if (e->nnodes == e->capnodes && grow_nodes(s) != 0)
			return GP_ENOMEM;
		n = &e->nodes[e->nnodes];
		memset(n, 0, sizeof(*n));
		n->id = src->id;
		n->resv = -1;
		n->cls = NONE;
		n->runs = NONE;
		e->nnodes++;
		is_new = 1;
	} else if (node_totals(s, n, -1) != 0) {
		return GP_ENOMEM;
	}
	idx = (size_t)(n - e->nodes);
	same_layout = !is_new && n->ngpus == src->ngpus;
	for (j = 0; same_layout && j < src->ngpus; j++)
		if (n->gpus[j].mem_total != src->gpus[j].mem_mib ||
		    n->gpus[j].index != src->gpus[j].index ||
		    n->gpus[j].model < 0 || src->gpus[j].model == NULL ||
		    strcmp(e->models[n->gpus[j].model], src->gpus[j].model) !=
		        0)
			same_layout = 0;
	if (!same_layout) {
		/* New GPUs; those at positions both have keep their use. */
		gpus = calloc((size_t)src->ngpus + 1, sizeof(*gpus));
		if (gpus == NULL)
			return GP_ENOMEM;
		for (j = 0; j < src->ngpus; j++) {
			struct eng_gpu *g = &gpus[j];
			if (!is_new && j < n->ngpus) {
				*g = n->gpus[j];
				g->mem_free += src->gpus[j].mem_mib - g->mem_total;
			} else {
				g->milli_free = GP_SCHED_MILLI;
				g->mem_free = src->gpus[j].mem_mib;
				g->holder = 0;
			}
			g->index = src->gpus[j].index;
			g->mem_total = src->gpus[j].mem_mib;
			m = intern_model(e, src->gpus[j].model);
			if (m == -2) {
				free(gpus);
				return GP_ENOMEM;
			}
			g->model = m;
		}
		if (!is_new) {
			class_leave(e, n);
			if (n->own_gpus)
				free(n->gpus);
		}
		n->gpus = gpus;
		n->own_gpus = 1;
		n->ngpus = src->ngpus;
	}
	/* What runs keeps what it holds; the rest is the new offer. */
	cpu_used = is_new ? 0 : n->cpu_total - n->cpu_free;
	mem_used = is_new || n->mem_total == INT64_MAX
	    ? 0
	    : n->mem_total - n->mem_free;
	n->up = src->up;
	n->group = src->group;
	n->max_time_s = src->max_time_s;
	n->cpu_total = src->cpu_milli;
	n->cpu_free = src->cpu_milli - cpu_used;
	n->mem_total = src->mem_mib > 0 ? src->mem_mib : INT64_MAX;
	n->mem_free = n->mem_total == INT64_MAX ? INT64_MAX
	                                        : n->mem_total - mem_used;
	n->model = n->ngpus > 0 ? n->gpus[0].model : -1;
	n->max_gpu_mem = 0;
	n->same_mem = 1;
	for (j = 0; j < n->ngpus; j++) {
		struct eng_gpu *g = &n->gpus[j];
		g->lent = src->gpus[j].job_id >= 0;
		g->capability = src->gpus[j].capability;
		g->price = src->gpus[j].price;
		g->interactive = src->gpus[j].interactive_only != 0;
		/* Not held whole: lent or not, as the offer says now. */
		if (g->holder <= 0) {
			g->holder = g->lent ? 0 : -1;
			g->end_ms = 0;
		}
		if (g->model != n->model)
			n->model = -2;
		if (g->mem_total > n->max_gpu_mem)
			n->max_gpu_mem = g->mem_total;
		if (g->mem_total != n->gpus[0].mem_total)
			n->same_mem = 0;
	}
	copy = copy_src(e, src, n);
	if (copy == NULL)
		return GP_ENOMEM;
	if (s->set_nodes == NULL) {
		s->set_nodes = calloc(e->capnodes + 1, sizeof(*s->set_nodes));
		if (s->set_nodes == NULL) {
			free(copy->gpus);
			free(copy);
			return GP_ENOMEM;
		}
	}
	if (s->set_nodes[idx] != NULL) {
		free(s->set_nodes[idx]->gpus);
		free(s->set_nodes[idx]);
	}
	s->set_nodes[idx] = copy;
	n->src = copy;
	node_changed(e, n);
	if (node_totals(s, n, 1) != 0)
		return GP_ENOMEM;
	return e->class_oom ? GP_ENOMEM : 0;
}

int
gp_sched_engine_run_add(struct gp_sched_engine *s,
    const struct gp_sched_running *r, const int *gpus, int ngpus)
{
	struct eng_node *n = node_by_id(s, r->node_id);
	struct run_rec rec;
	int i, p;

	if (n == NULL)
		return GP_ENOENT;
	memset(&rec, 0, sizeof(rec));
	rec.job_id = r->job_id;
	rec.node = (size_t)(n - s->e.nodes);
	rec.cpu = r->cpu_milli > 0 ? r->cpu_milli : 0;
	rec.mem = r->mem_mib > 0 ? r->mem_mib : 0;
	rec.end_ms = r->end_ms;
	rec.group = r->group;
	rec.loss = r->loss;
	rec.saved_ms = r->saved_ms;
	rec.preempt_for = r->preempt_for;
	rec.preemptible = r->preemptible;
	rec.alive = 1;
	rec.gpu_pos = -1;
	if (r->shared) {
		for (p = 0; p < n->ngpus; p++)
			if (n->gpus[p].index == r->gpu)
				rec.gpu_pos = p;
		if (rec.gpu_pos < 0 || n->gpus[rec.gpu_pos].holder > 0)
			return GP_ECONFLICT;
		rec.shared = 1;
		rec.milli = r->gpu_milli > 0 && r->gpu_milli < GP_SCHED_MILLI
		    ? r->gpu_milli
		    : 0;
		rec.gpu_mem = r->gpu_mem_mib > 0 ? r->gpu_mem_mib : 0;
	} else {
		for (i = 0; i < ngpus; i++) {
			for (p = 0; p < n->ngpus; p++)
				if (n->gpus[p].index == gpus[i])
					break;
			if (p == n->ngpus || p >= 64 ||
			    n->gpus[p].holder > 0 || n->gpus[p].nshared > 0 ||
			    ((rec.whole >> p) & 1))
				return GP_ECONFLICT;
			rec.whole |= 1ULL << p;
		}
	}
	if (run_add(s, &rec) == NONE)
		return GP_ENOMEM;
	/* Take what it holds. */
	n->cpu_free -= rec.cpu;
	if (n->mem_total != INT64_MAX)
		n->mem_free -= rec.mem;
	for (p = 0; p < n->ngpus && rec.whole != 0; p++)
		if ((rec.whole >> p) & 1) {
			n->gpus[p].holder = r->job_id;
			n->gpus[p].end_ms = r->end_ms;
		}
	if (rec.shared) {
		struct eng_gpu *g = &n->gpus[rec.gpu_pos];
		g->milli_free -= rec.milli;
		g->mem_free -= rec.gpu_mem;
		g->nshared++;
	}
	node_changed(&s->e, n);
	return s->e.class_oom ? GP_ENOMEM : 0;
}

int
gp_sched_engine_run_pass(struct gp_sched_engine *s,
    const struct gp_sched_pass *p, struct gp_sched_result *res)
{
	int rc;

	memset(res, 0, sizeof(*res));
	s->e.now_ms = p->now_ms;
	s->e.accepts = p->accepts;
	s->e.accepts_arg = p->accepts_arg;
	s->groups = p->groups;
	s->ngroups = p->ngroups;
	s->users = p->users;
	s->nusers = p->nusers;
	s->res = res;
	s->capassign = s->cappreempt = s->capwait = 0;
	s->defer_preempt = p->defer_preempt;
	rc = pass(s, p->queue, p->nqueue, p->no_preempt);
	s->res = NULL;
	s->defer_preempt = 0;
	s->e.accepts = NULL;
	s->e.accepts_arg = NULL;
	if (rc != 0)
		gp_sched_result_fini(res);
	return rc;
}

void
gp_sched_engine_gpu_stats(const struct gp_sched_engine *s, int64_t *gpus_total,
    int64_t *milli_allocated, int64_t *gpus_idle, int64_t *gpus_partial)
{
	const struct engine *e = &s->e;
	size_t i;
	int g;

	*gpus_total = *milli_allocated = *gpus_idle = *gpus_partial = 0;
	for (i = 0; i < e->nnodes; i++) {
		const struct eng_node *n = &e->nodes[i];
		if (!n->up)
			continue;
		for (g = 0; g < n->ngpus; g++) {
			const struct eng_gpu *gp = &n->gpus[g];
			if (gp->holder < 0)
				continue;
			(*gpus_total)++;
			if (gp->holder > 0) {
				*milli_allocated += GP_SCHED_MILLI;
			} else {
				*milli_allocated +=
				    GP_SCHED_MILLI - gp->milli_free;
				if (gp->nshared == 0)
					(*gpus_idle)++;
				else
					(*gpus_partial)++;
			}
		}
	}
}

double
gp_sched_engine_frag(struct gp_sched_engine *s)
{
	struct engine *e = &s->e;
	int fr[GP_SCHED_GPUS_MAX], g;
	double frag = 0;
	size_t i;

	for (i = 0; i < e->nnodes && e->nmix > 0; i++) {
		const struct eng_node *n = &e->nodes[i];
		if (!n->up)
			continue;
		for (g = 0; g < n->ngpus; g++)
			fr[g] =
			    n->gpus[g].holder != 0 ? 0 : n->gpus[g].milli_free;
		frag += eng_node_frag(e, n, fr, n->cpu_free, n->mem_free, 0, 0,
		    0);
	}
	return frag;
}

void
gp_sched_engine_set_quick(struct gp_sched_engine *s, int quick)
{
	s->quick = quick;
}

void
gp_sched_engine_set_resv_reuse(struct gp_sched_engine *s, int64_t ms)
{
	s->resv_reuse_ms = ms > 0 ? ms : 0;
	s->rcache.valid = 0;
}

uint64_t
gp_sched_engine_decisions(const struct gp_sched_engine *s)
{
	return s->e.decisions;
}
