/*
 * sched_backfill.c: EASY backfill's reservation: when the head job that
 * cannot start could start (earliest_start, from the time limits of what
 * runs), on which nodes and GPUs, and keeping it across passes. Part of
 * the scheduler: see sched.c and sched_int.h.
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

/* ---- EASY backfill: the reservation ---- */

struct release {
	size_t node;
	int64_t cpu, mem, end_ms;
};

static int
cmp_release(const void *a, const void *b)
{
	const struct release *x = a, *y = b;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->end_ms < y->end_ms ? -1 : x->end_ms > y->end_ms;
}

/* A shared part on a GPU: when it ends and what it gives back. */
struct sharer {
	size_t node;
	int pos;
	int64_t end_ms, mem;
	int milli;
};

static int
cmp_sharer(const void *a, const void *b)
{
	const struct sharer *x = a, *y = b;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	if (x->pos != y->pos)
		return x->pos - y->pos;
	return x->end_ms < y->end_ms ? -1 : x->end_ms > y->end_ms;
}

static int
cmp_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* 1 when the GPU could ever take the part (held or not, not unlent). */
static int
gpu_could(struct engine *e, const struct eng_gpu *g, const struct part_req *r)
{
	if (g->holder < 0)
		return 0;
	if (r->gpu_mem > 0 && g->mem_total < r->gpu_mem)
		return 0;
	return eng_gpu_kind_fits(e, g, r->job);
}

/* When the GPU could take the part; END_NEVER: at the end of time (what
 * holds it has no time limit); -1: never (sh: its sharers, by end). */
static int64_t
gpu_free_at(const struct engine *e, const struct eng_gpu *g,
    const struct part_req *r, const struct sharer *sh, size_t nsh)
{
	int64_t t = e->now_ms, memf = g->mem_free;
	int milli = g->milli_free;
	size_t i;

	if (g->holder > 0)
		return g->end_ms > e->now_ms ? g->end_ms : e->now_ms;
	if (!r->shared) {
		if (g->nshared == 0 && g->milli_free >= GP_SCHED_MILLI)
			return t;
		for (i = 0; i < nsh; i++)
			if (sh[i].end_ms > t)
				t = sh[i].end_ms;
		return t;
	}
	for (i = 0; milli < r->milli || (r->gpu_mem > 0 && memf < r->gpu_mem);
	     i++) {
		if (i == nsh)
			return -1;
		milli += sh[i].milli;
		memf += sh[i].mem;
		t = sh[i].end_ms;
	}
	return t;
}

/*
 * The earliest time n could hold one part of r, given what ends when
 * (rel: n's releases, by end); -1 when never. OUT: *gpu_t (per GPU: when
 * it could take the part, END_NEVER when never).
 */
static int64_t
node_start_time(struct gp_sched_engine *s, const struct eng_node *n,
    const struct part_req *r, const struct release *rel, size_t nrel,
    const struct sharer *sh, size_t nsh, int64_t *gpu_t, int64_t *ends)
{
	struct engine *e = &s->e;
	int64_t t = e->now_ms, have, mem;
	size_t k, j;
	int i, cnt = 0;

	if (!n->up || n->cpu_total < r->cpu || !time_allowed(n, r->job) ||
	    (r->mem > 0 && n->mem_total != INT64_MAX && r->mem > n->mem_total))
		return -1;
	if (e->accepts != NULL && !e->accepts(e->accepts_arg, n->src, r->job))
		return -1;
	if (r->gpus > 0) {
		for (i = 0, k = 0; i < n->ngpus; i++) {
			gpu_t[i] = -1;
			while (k < nsh && sh[k].pos < i)
				k++;
			for (j = k; j < nsh && sh[j].pos == i; j++)
				;
			if (!gpu_could(e, &n->gpus[i], r))
				continue;
			gpu_t[i] =
			    gpu_free_at(e, &n->gpus[i], r, sh + k, j - k);
			if (gpu_t[i] >= 0)
				ends[cnt++] = gpu_t[i];
		}
		if (cnt < r->gpus)
			return -1;
		qsort(ends, (size_t)cnt, sizeof(*ends), cmp_int64);
		if (ends[r->gpus - 1] > t)
			t = ends[r->gpus - 1];
	}
	have = n->cpu_free;
	for (k = 0; k < nrel && have < r->cpu; k++)
		have += rel[k].cpu;
	if (have < r->cpu)
		return -1;
	if (k > 0 && rel[k - 1].end_ms > t)
		t = rel[k - 1].end_ms;
	if (r->mem > 0 && n->mem_total != INT64_MAX) {
		mem = n->mem_free;
		for (k = 0; k < nrel && mem < r->mem; k++)
			mem += rel[k].mem;
		if (mem < r->mem)
			return -1;
		if (k > 0 && rel[k - 1].end_ms > t)
			t = rel[k - 1].end_ms;
	}
	return t;
}

/* Reserved GPUs: those free last go first, so that free ones stay. */
struct reserve_pick {
	int64_t end_ms, mem;
	int pos;
};

static int
cmp_reserve_pick(const void *a, const void *b)
{
	const struct reserve_pick *x = a, *y = b;

	if (x->end_ms != y->end_ms)
		return x->end_ms > y->end_ms ? -1 : 1;
	if (x->mem != y->mem)
		return x->mem < y->mem ? -1 : 1;
	return x->pos - y->pos;
}

struct node_t {
	int64_t t;
	size_t node;
};

static int
cmp_node_t(const void *a, const void *b)
{
	const struct node_t *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

/*
 * The earliest start of job on up nodes: sets the reservation when
 * reserve_it, else only answers. Returns 1 when it could ever start, 0
 * when no up nodes could ever hold all of its parts, GP_ENOMEM.
 */
int
earliest_start(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int reserve_it)
{
	struct engine *e = &s->e;
	struct release *rel = NULL;
	struct sharer *sh = NULL;
	struct node_t *nt = NULL;
	struct reserve_pick picks[GP_SCHED_GPUS_MAX];
	int64_t gpu_t[GP_SCHED_GPUS_MAX], ends[GP_SCHED_GPUS_MAX], start;
	size_t *first = NULL, *sfirst = NULL, nrel = 0, nsh = 0, i, r, nnt = 0;
	struct part_req req;
	int parts = job_parts(job), rc = GP_ENOMEM, p, n;

	part_init(e, job, &req);
	rel = calloc(s->nruns + 1, sizeof(*rel));
	sh = calloc(s->nruns + 1, sizeof(*sh));
	nt = calloc(e->nnodes + 1, sizeof(*nt));
	first = calloc(e->nnodes + 1, sizeof(*first));
	sfirst = calloc(e->nnodes + 1, sizeof(*sfirst));
	if (rel == NULL || sh == NULL || nt == NULL || first == NULL ||
	    sfirst == NULL)
		goto out;
	for (i = 0; i < s->nruns; i++) {
		const struct run_rec *rr = &s->runs[i];
		if (!rr->alive)
			continue;
		rel[nrel].node = rr->node;
		rel[nrel].cpu = rr->cpu;
		rel[nrel].mem = rr->mem;
		rel[nrel++].end_ms = rr->end_ms;
		if (rr->shared && rr->gpu_pos >= 0) {
			sh[nsh].node = rr->node;
			sh[nsh].pos = rr->gpu_pos;
			sh[nsh].end_ms = rr->end_ms;
			sh[nsh].milli = rr->milli;
			sh[nsh++].mem = rr->gpu_mem;
		}
	}
	qsort(rel, nrel, sizeof(*rel), cmp_release);
	qsort(sh, nsh, sizeof(*sh), cmp_sharer);
	for (i = 0, r = 0; i <= e->nnodes; i++) {
		while (r < nrel && rel[r].node < i)
			r++;
		first[i] = r;
	}
	for (i = 0, r = 0; i <= e->nnodes; i++) {
		while (r < nsh && sh[r].node < i)
			r++;
		sfirst[i] = r;
	}
	for (i = 0; i < e->nnodes; i++) {
		int64_t t = node_start_time(s, &e->nodes[i], &req,
		    rel + first[i], first[i + 1] - first[i], sh + sfirst[i],
		    sfirst[i + 1] - sfirst[i], gpu_t, ends);
		if (t < 0)
			continue;
		nt[nnt].t = t;
		nt[nnt++].node = i;
	}
	rc = nnt >= (size_t)parts;
	if (!rc || !reserve_it)
		goto out;
	/* The parts' nodes: those free soonest, then by position. */
	qsort(nt, nnt, sizeof(*nt), cmp_node_t);
	start = nt[parts - 1].t;
	s->resv.active = 1;
	s->resv.job = job;
	s->resv.start_ms = start;
	s->resv.nnodes = (size_t)parts;
	for (p = 0; p < parts; p++) {
		struct eng_node *nd = &e->nodes[nt[p].node];
		struct resv_node *rn = &s->resv.n[p];
		size_t b = first[nt[p].node], en = first[nt[p].node + 1];

		rn->node = nt[p].node;
		nd->resv = p;
		if (req.gpus == 0)
			node_changed(e, nd);
		rn->extra_cpu = nd->cpu_free - req.cpu;
		rn->extra_mem =
		    nd->mem_total == INT64_MAX ? INT64_MAX : nd->mem_free;
		for (r = b; r < en && rel[r].end_ms <= start; r++) {
			rn->extra_cpu += rel[r].cpu;
			if (rn->extra_mem != INT64_MAX)
				rn->extra_mem += rel[r].mem;
		}
		if (rn->extra_mem != INT64_MAX)
			rn->extra_mem -= req.mem;
		if (req.gpus == 0)
			continue;
		/* Its GPUs: as node_start_time saw them. */
		node_start_time(s, nd, &req, rel + b, en - b,
		    sh + sfirst[nt[p].node],
		    sfirst[nt[p].node + 1] - sfirst[nt[p].node], gpu_t, ends);
		for (n = 0, i = 0; i < (size_t)nd->ngpus; i++) {
			if (gpu_t[i] < 0 || gpu_t[i] > start)
				continue;
			picks[n].end_ms = gpu_t[i];
			picks[n].mem = nd->gpus[i].mem_total;
			picks[n++].pos = (int)i;
		}
		qsort(picks, (size_t)n, sizeof(*picks), cmp_reserve_pick);
		for (i = 0; i < (size_t)req.gpus && (int)i < n; i++)
			nd->gpus[picks[i].pos].reserved = 1;
		node_changed(e, nd);
	}
out:
	free(rel);
	free(sh);
	free(nt);
	free(first);
	free(sfirst);
	return rc;
}

void
resv_clear(struct gp_sched_engine *s)
{
	size_t i;
	int g;

	for (i = 0; i < s->resv.nnodes; i++) {
		struct eng_node *n = &s->e.nodes[s->resv.n[i].node];
		n->resv = -1;
		for (g = 0; g < n->ngpus; g++)
			n->gpus[g].reserved = 0;
		node_changed(&s->e, n);
	}
	memset(&s->resv, 0, sizeof(s->resv));
}

/* Keeps the reservation just made (earliest_start) for later passes. */
void
resv_save(struct gp_sched_engine *s, const struct gp_sched_job *job)
{
	struct resv_cache *c = &s->rcache;
	size_t i;
	int g;

	c->valid = 1;
	c->job_id = job->id;
	c->computed_ms = s->e.now_ms;
	c->resv = s->resv;
	c->resv.job = NULL;
	for (i = 0; i < s->resv.nnodes; i++) {
		const struct eng_node *n = &s->e.nodes[s->resv.n[i].node];
		c->gpus[i] = 0;
		for (g = 0; g < n->ngpus; g++)
			if (n->gpus[g].reserved)
				c->gpus[i] |= 1ULL << g;
	}
}

/*
 * The kept reservation, applied again for job when it is job's, recent,
 * and still ahead: 1 when applied, else 0 (compute it).
 */
int
resv_reuse(struct gp_sched_engine *s, const struct gp_sched_job *job)
{
	struct resv_cache *c = &s->rcache;
	size_t i;
	int g;

	if (!c->valid || c->job_id != job->id ||
	    s->e.now_ms - c->computed_ms >= s->resv_reuse_ms ||
	    s->e.now_ms < c->computed_ms || c->resv.start_ms <= s->e.now_ms)
		return 0;
	for (i = 0; i < c->resv.nnodes; i++)
		if (c->resv.n[i].node >= s->e.nnodes)
			return 0;
	s->resv = c->resv;
	s->resv.active = 1;
	s->resv.job = job;
	for (i = 0; i < c->resv.nnodes; i++) {
		struct eng_node *n = &s->e.nodes[c->resv.n[i].node];
		n->resv = (int)i;
		for (g = 0; g < n->ngpus; g++)
			if (c->gpus[i] & (1ULL << g))
				n->gpus[g].reserved = 1;
		node_changed(&s->e, n);
	}
	return 1;
}
