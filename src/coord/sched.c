/*
 * sched.c: the scheduler's engine: a world of nodes and GPUs with what
 * is free on each (classes of like nodes, interned models and shapes),
 * the records of what runs, and what a job's parts ask (see sched.h for
 * what the scheduler decides; sched_policy.c for where parts go). The
 * rest of the scheduler, one file per step: sched_place.c (placing
 * parts, gangs, the result), sched_preempt.c, sched_fair.c,
 * sched_backfill.c, sched_wait.c (wait reasons), sched_pass.c (the pass,
 * gp_sched_plan) and sched_engine.c (gp_sched_engine_*), sharing
 * sched_int.h. A pass works on the engine in three steps:
 *
 *   1. provider first: each queued job of a lab tries the nodes its lab
 *      lends, then the same nodes after preempting borrowed work there
 *      (the victims that lose the least);
 *   2. fair share: the other jobs are taken one by one from the group,
 *      then the user, whose (decayed usage + what it holds) / weight is
 *      smallest; each takes its best node (the policy decides) unless it
 *      would delay the reservation;
 *   3. EASY backfill: the first job in that order that cannot start gets
 *      a reservation (nodes, GPUs, CPUs and memory at the earliest time
 *      the time limits of what runs free them); later jobs may use those
 *      only if they end before it.
 *
 * Resources only shrink during steps 2 and 3, so a shape of request that
 * found no room once in a pass is not tried again (a failed-shape memo),
 * and a whole pass over a saturated queue costs little. gp_sched_plan
 * builds an engine from its input, runs one pass and drops it; the
 * simulator keeps one engine for a whole trace (gp_sched_engine_*).
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

/* ---- matching ---- */

int
gp_sched_model_matches(const char *model, const char *want)
{
	char alt[128];
	const char *p, *bar;
	size_t len;
	int any = 0;

	if (want == NULL || want[0] == '\0')
		return 1;
	for (p = want;; p = bar + 1) {
		bar = strchr(p, '|');
		len = bar != NULL ? (size_t)(bar - p) : strlen(p);
		if (len > 0) {
			any = 1;
			if (len >= sizeof(alt))
				len = sizeof(alt) - 1;
			memcpy(alt, p, len);
			alt[len] = '\0';
			if (model != NULL && strcasestr(model, alt) != NULL)
				return 1;
		}
		if (bar == NULL)
			break;
	}
	return !any;
}

int
gp_sched_gpu_matches(const struct gp_sched_gpu *gpu,
    const struct gp_sched_job *job)
{
	if (job->gpu_mem_mib > 0 && gpu->mem_mib < job->gpu_mem_mib)
		return 0;
	if (job->min_gpu_mem_mib > 0 && gpu->mem_mib < job->min_gpu_mem_mib)
		return 0;
	if (job->min_capability > 0 && gpu->capability < job->min_capability)
		return 0;
	if (job->max_price > 0 && gpu->price > job->max_price)
		return 0;
	if (gpu->interactive_only && !job->interactive)
		return 0;
	return gp_sched_model_matches(gpu->model, job->gpu_model);
}

int
intern_model(struct engine *e, const char *model)
{
	size_t i;

	if (model == NULL)
		return -1;
	for (i = 0; i < e->nmodels; i++)
		if (strcmp(e->models[i], model) == 0)
			return (int)i;
	if (e->nmodels == e->capmodels) {
		size_t cap = e->capmodels ? e->capmodels * 2 : 8;
		const char **m = realloc(e->models, cap * sizeof(*m));
		unsigned *g = realloc(e->match_gen, cap * sizeof(*g));
		unsigned char *k;

		if (m != NULL)
			e->models = m;
		if (g != NULL)
			e->match_gen = g;
		k = realloc(e->match, cap);
		if (k != NULL)
			e->match = k;
		if (m == NULL || g == NULL || k == NULL)
			return -2;
		e->capmodels = cap;
	}
	/* A copy: a long-lived engine outlives the caller's strings. */
	if ((e->models[e->nmodels] = strdup(model)) == NULL)
		return -2;
	e->match_gen[e->nmodels] = 0;
	e->match[e->nmodels] = 0;
	return (int)e->nmodels++;
}

/* The part's whole GPUs on n: the usable ones with the least memory. */
int
eng_pick_whole(struct engine *e, const struct eng_node *n,
    const struct part_req *r, struct choice *c)
{
	int i, k, cnt = 0, kept_pass;

	/*
	 * An interactive part takes the GPUs kept for interactive work
	 * first (a first pass over them alone), leaving the others to batch.
	 */
	kept_pass = r->job->interactive;
again:
	for (i = 0; i < n->ngpus; i++) {
		int64_t mem = n->gpus[i].mem_total;

		if (!eng_gpu_usable(e, n, i, r) ||
		    (kept_pass && !n->gpus[i].interactive))
			continue;
		if (n->same_mem) {
			/* Any will do: the first ones, by position. */
			c->pos[cnt++] = i;
			if (cnt == r->gpus)
				break;
			continue;
		}
		if (cnt == r->gpus && n->gpus[c->pos[cnt - 1]].mem_total <= mem)
			continue;
		k = cnt < r->gpus ? cnt++ : cnt - 1;
		while (k > 0 && n->gpus[c->pos[k - 1]].mem_total > mem) {
			c->pos[k] = c->pos[k - 1];
			k--;
		}
		c->pos[k] = i;
	}
	if (kept_pass && cnt < r->gpus) {
		kept_pass = 0;
		cnt = 0;
		goto again;
	}
	c->ngpus = cnt;
	return cnt == r->gpus ? 0 : -1;
}

uint64_t
eng_random(struct engine *e)
{
	/* xorshift64* */
	e->rng ^= e->rng >> 12;
	e->rng ^= e->rng << 25;
	e->rng ^= e->rng >> 27;
	return e->rng * 2685821657736338717ULL;
}

/* ---- the engine ---- */

static uint64_t
mix64(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

/* What a deterministic policy sees of a node, hashed. */
static uint64_t
node_sig(const struct eng_node *n)
{
	uint64_t h = 0x84222325cbf29ce4ULL;
	int i;

	h = mix64(h, (uint64_t)n->group);
	h = mix64(h, (uint64_t)n->max_time_s);
	h = mix64(h, (uint64_t)n->cpu_free);
	h = mix64(h, (uint64_t)n->cpu_total); /* frag's node contention */
	h = mix64(h, (uint64_t)n->mem_free);
	h = mix64(h, (uint64_t)n->mem_total);
	h = mix64(h, (uint64_t)(n->resv + 1) << 8 | (uint64_t)n->ngpus);
	for (i = 0; i < n->ngpus; i++) {
		const struct eng_gpu *g = &n->gpus[i];
		h = mix64(h,
		    (uint64_t)(g->holder > 0 ? 1
		            : g->holder < 0  ? 2
		                             : 0) |
		        (uint64_t)g->nshared << 2 |
		        (uint64_t)g->reserved << 20 |
		        (uint64_t)g->interactive << 22 |
		        (uint64_t)(g->model + 1) << 24 |
		        (uint64_t)g->milli_free << 40);
		h = mix64(h, (uint64_t)g->mem_free);
		h = mix64(h,
		    (uint64_t)g->mem_total ^ (uint64_t)g->capability << 48);
		h = mix64(h, (uint64_t)g->price);
	}
	return h;
}

static int
same_state(const struct eng_node *a, const struct eng_node *b)
{
	int i;

	if (a->group != b->group || a->max_time_s != b->max_time_s ||
	    a->cpu_free != b->cpu_free || a->cpu_total != b->cpu_total ||
	    a->mem_free != b->mem_free ||
	    a->mem_total != b->mem_total || a->resv != b->resv ||
	    a->ngpus != b->ngpus || a->up != b->up)
		return 0;
	for (i = 0; i < a->ngpus; i++) {
		const struct eng_gpu *x = &a->gpus[i], *y = &b->gpus[i];
		if ((x->holder > 0) != (y->holder > 0) ||
		    (x->holder < 0) != (y->holder < 0) ||
		    x->nshared != y->nshared || x->reserved != y->reserved ||
		    x->model != y->model || x->milli_free != y->milli_free ||
		    x->mem_free != y->mem_free ||
		    x->mem_total != y->mem_total ||
		    x->capability != y->capability || x->price != y->price ||
		    x->interactive != y->interactive)
			return 0;
	}
	return 1;
}

static void
bucket_del(struct engine *e, struct bucket *bk, size_t pos, int whole)
{
	struct bucket_entry *last = &bk->v[--bk->n];

	if (pos != bk->n) {
		bk->v[pos] = *last;
		if (whole)
			e->classes[last->cls].wpos = pos;
		else
			e->classes[last->cls].bpos = pos;
	}
}

static int
bucket_add(struct bucket *bk, const struct eng_node *n, size_t ci, size_t *pos)
{
	if (bk->n == bk->cap) {
		size_t cap = bk->cap ? bk->cap * 2 : 16;
		struct bucket_entry *v = realloc(bk->v, cap * sizeof(*v));
		if (v == NULL)
			return GP_ENOMEM;
		bk->v = v;
		bk->cap = cap;
	}
	bk->v[bk->n].cpu_free = n->cpu_free;
	bk->v[bk->n].mem_free = n->mem_free;
	bk->v[bk->n].cls = ci;
	*pos = bk->n++;
	return 0;
}

static void
bucket_unlink(struct engine *e, struct node_class *c)
{
	if (c->wbucket >= 0) {
		bucket_del(e, &e->wbuckets[c->wbucket], c->wpos, 1);
		c->wbucket = -1;
	}
	if (c->bucket >= 0) {
		bucket_del(e, &e->buckets[c->bucket], c->bpos, 0);
		c->bucket = -1;
	}
}

void
class_leave(struct engine *e, struct eng_node *n)
{
	struct node_class *c;
	size_t i = (size_t)(n - e->nodes);

	if (n->cls == NONE)
		return;
	c = &e->classes[n->cls];
	if (n->cprev != NONE)
		e->nodes[n->cprev].cnext = n->cnext;
	else
		c->first = n->cnext;
	if (n->cnext != NONE)
		e->nodes[n->cnext].cprev = n->cprev;
	c->count--;
	if (c->rep == i)
		c->rep = NONE;
	if (c->count == 0)
		bucket_unlink(e, c);
	n->cls = NONE;
}

static int
class_index_grow(struct engine *e)
{
	size_t cap = e->capclass_index ? e->capclass_index * 2 : 256, i, h;
	size_t *t = malloc(cap * sizeof(*t));

	if (t == NULL)
		return GP_ENOMEM;
	for (i = 0; i < cap; i++)
		t[i] = NONE;
	for (i = 0; i < e->nclasses; i++) {
		h = (size_t)e->classes[i].sig & (cap - 1);
		while (t[h] != NONE)
			h = (h + 1) & (cap - 1);
		t[h] = i;
	}
	free(e->class_index);
	e->class_index = t;
	e->capclass_index = cap;
	return 0;
}

/* Puts n (up) in the class of its state. Returns 0 or GP_ENOMEM. */
static int
class_join(struct engine *e, struct eng_node *n)
{
	uint64_t sig = node_sig(n);
	size_t h, ci, i = (size_t)(n - e->nodes);
	struct node_class *c;
	int b;

	if (2 * (e->nclasses + 1) > e->capclass_index &&
	    class_index_grow(e) != 0)
		return GP_ENOMEM;
	h = (size_t)sig & (e->capclass_index - 1);
	for (;; h = (h + 1) & (e->capclass_index - 1)) {
		ci = e->class_index[h];
		if (ci == NONE)
			break;
		c = &e->classes[ci];
		if (c->sig == sig &&
		    (c->count == 0 || same_state(&e->nodes[c->first], n)))
			break;
	}
	if (ci == NONE) {
		if (e->nclasses == e->capclasses) {
			size_t cap = e->capclasses ? e->capclasses * 2 : 64;
			struct node_class *nc =
			    realloc(e->classes, cap * sizeof(*nc));
			if (nc == NULL)
				return GP_ENOMEM;
			e->classes = nc;
			e->capclasses = cap;
		}
		ci = e->nclasses++;
		c = &e->classes[ci];
		memset(c, 0, sizeof(*c));
		c->sig = sig;
		c->first = c->rep = NONE;
		c->bucket = c->wbucket = -1;
		e->class_index[h] = ci;
	}
	c = &e->classes[ci];
	n->cls = ci;
	n->cprev = NONE;
	n->cnext = c->first;
	if (c->first != NONE)
		e->nodes[c->first].cprev = i;
	c->first = i;
	if (c->count++ == 0) {
		c->rep = i;
		b = (int)(n->milli_free / GP_SCHED_MILLI);
		if (b > NBUCKETS - 1)
			b = NBUCKETS - 1;
		if (bucket_add(&e->buckets[b], n, ci, &c->bpos) != 0)
			return GP_ENOMEM;
		c->bucket = b;
		if (bucket_add(&e->wbuckets[n->nfree], n, ci, &c->wpos) != 0)
			return GP_ENOMEM;
		c->wbucket = n->nfree;
	} else if (c->rep != NONE && n->id < e->nodes[c->rep].id) {
		c->rep = i;
	}
	return 0;
}

/* The class's member with the lowest id that the gang has not used. */
struct eng_node *
class_rep(struct engine *e, struct node_class *c)
{
	struct eng_node *best = NULL;
	size_t i;

	if (c->rep != NONE && !e->nodes[c->rep].gang_mark)
		return &e->nodes[c->rep];
	for (i = c->first; i != NONE; i = e->nodes[i].cnext)
		if (!e->nodes[i].gang_mark &&
		    (best == NULL || e->nodes[i].id < best->id))
			best = &e->nodes[i];
	if (best != NULL && c->rep == NONE)
		c->rep = (size_t)(best - e->nodes);
	return best;
}

/* Counts what is free on n again and files it in its class. */
void
node_changed(struct engine *e, struct eng_node *n)
{
	int i;

	n->nfree = 0;
	n->milli_free = 0;
	for (i = 0; i < n->ngpus; i++) {
		const struct eng_gpu *g = &n->gpus[i];

		if (g->holder != 0)
			continue;
		n->milli_free += g->milli_free;
		if (g->nshared == 0 && g->milli_free >= GP_SCHED_MILLI)
			n->nfree++;
	}
	n->version++;
	class_leave(e, n);
	if (n->up && class_join(e, n) != 0)
		e->class_oom = 1;
}

static size_t
index_home(const struct gp_sched_engine *s, int64_t job_id)
{
	return (size_t)((uint64_t)job_id * 0x9e3779b97f4a7c15ULL) &
	    (s->capindex - 1);
}

static size_t
index_find(const struct gp_sched_engine *s, int64_t job_id)
{
	size_t h;

	if (s->capindex == 0)
		return NONE;
	h = index_home(s, job_id);
	while (s->index[h] != NONE) {
		if (s->runs[s->index[h]].job_id == job_id)
			return h;
		h = (h + 1) & (s->capindex - 1);
	}
	return h;
}

static int
index_grow(struct gp_sched_engine *s)
{
	size_t cap = s->capindex ? s->capindex * 2 : 64, i, *old = s->index,
	       oldcap = s->capindex;

	s->index = malloc(cap * sizeof(*s->index));
	if (s->index == NULL) {
		s->index = old;
		return GP_ENOMEM;
	}
	for (i = 0; i < cap; i++)
		s->index[i] = NONE;
	s->capindex = cap;
	for (i = 0; i < oldcap; i++)
		if (old[i] != NONE)
			s->index[index_find(s, s->runs[old[i]].job_id)] =
			    old[i];
	free(old);
	return 0;
}

/* The first record of the job's parts, or NONE. */
size_t
job_runs(const struct gp_sched_engine *s, int64_t job_id)
{
	size_t h = index_find(s, job_id);

	return h == NONE ? NONE : s->index[h];
}

/*
 * Counts delta more (or fewer) alive victim parts being stopped for
 * for_job. Returns 0 or GP_ENOMEM.
 */
int
pending_adj(struct gp_sched_engine *s, int64_t for_job, int delta)
{
	size_t i;

	for (i = 0; i < s->npend; i++)
		if (s->pend[i].for_job == for_job)
			break;
	if (i == s->npend) {
		if (delta < 0)
			return 0;
		if (s->npend == s->cappend) {
			size_t cap = s->cappend ? s->cappend * 2 : 8;
			struct pending *p = realloc(s->pend, cap * sizeof(*p));
			if (p == NULL)
				return GP_ENOMEM;
			s->pend = p;
			s->cappend = cap;
		}
		s->pend[s->npend].for_job = for_job;
		s->pend[s->npend++].parts = 0;
	}
	if (delta > 0)
		s->pend[i].parts += (size_t)delta;
	else if (s->pend[i].parts >= (size_t)-delta)
		s->pend[i].parts -= (size_t)-delta;
	else
		s->pend[i].parts = 0;
	if (s->pend[i].parts == 0)
		s->pend[i] = s->pend[--s->npend];
	return 0;
}

/* 1 when victims are being stopped for the job. */
int
job_pending(const struct gp_sched_engine *s, int64_t job_id)
{
	size_t i;

	for (i = 0; i < s->npend; i++)
		if (s->pend[i].for_job == job_id)
			return 1;
	return 0;
}

/* Removes slot h of the index (backward-shift deletion). */
static void
index_del(struct gp_sched_engine *s, size_t h)
{
	size_t j = h, k, mask = s->capindex - 1;

	s->index[h] = NONE;
	for (;;) {
		j = (j + 1) & mask;
		if (s->index[j] == NONE)
			break;
		k = index_home(s, s->runs[s->index[j]].job_id);
		/* Stays when its home lies cyclically in (h, j]. */
		if (h < j ? (h < k && k <= j) : (h < k || k <= j))
			continue;
		s->index[h] = s->index[j];
		s->index[j] = NONE;
		h = j;
	}
	s->nindex--;
}

/* Files record i in its node's list of records. */
static void
node_link(struct gp_sched_engine *s, size_t i)
{
	struct run_rec *r = &s->runs[i];
	struct eng_node *n = &s->e.nodes[r->node];

	r->nprev = NONE;
	r->nnext = n->runs;
	if (n->runs != NONE)
		s->runs[n->runs].nprev = i;
	n->runs = i;
	r->linked = 1;
}

static void
node_unlink(struct gp_sched_engine *s, size_t i)
{
	struct run_rec *r = &s->runs[i];
	struct eng_node *n = &s->e.nodes[r->node];

	if (!r->linked)
		return;
	if (r->nprev != NONE)
		s->runs[r->nprev].nnext = r->nnext;
	else
		n->runs = r->nnext;
	if (r->nnext != NONE)
		s->runs[r->nnext].nprev = r->nprev;
	r->linked = 0;
}

/*
 * Forgets the job's records when none is alive any more: they go to the
 * free list, so that a long-lived engine stays as large as what runs at
 * its busiest, not as all it ever ran. Returns 1 when it did.
 */
int
job_reclaim(struct gp_sched_engine *s, int64_t job_id)
{
	size_t h = index_find(s, job_id), i, next;

	if (h == NONE || s->index[h] == NONE)
		return 0;
	for (i = s->index[h]; i != NONE; i = s->runs[i].next)
		if (s->runs[i].alive)
			return 0;
	for (i = s->index[h]; i != NONE; i = next) {
		next = s->runs[i].next;
		node_unlink(s, i);
		s->runs[i].job_id = 0;
		s->runs[i].next = s->free_runs;
		s->free_runs = i;
	}
	index_del(s, h);
	return 1;
}

/* Adds a record (its resources already taken). Returns its index. */
size_t
run_add(struct gp_sched_engine *s, const struct run_rec *r)
{
	size_t i, h;

	/* An old attempt whose parts are all gone: forget it first. */
	job_reclaim(s, r->job_id);
	if (s->free_runs == NONE && s->nruns == s->capruns) {
		size_t cap = s->capruns ? s->capruns * 2 : 64;
		struct run_rec *n = realloc(s->runs, cap * sizeof(*n));
		if (n == NULL)
			return NONE;
		s->runs = n;
		s->capruns = cap;
	}
	if (2 * (s->nindex + 1) > s->capindex && index_grow(s) != 0)
		return NONE;
	if (s->free_runs != NONE) {
		i = s->free_runs;
		s->free_runs = s->runs[i].next;
	} else {
		i = s->nruns++;
	}
	s->runs[i] = *r;
	h = index_find(s, r->job_id);
	if (s->index[h] == NONE) {
		s->nindex++;
		s->runs[i].next = NONE;
	} else {
		s->runs[i].next = s->index[h]; /* another part of the job */
	}
	s->index[h] = i;
	node_link(s, i);
	if (s->runs[i].alive) {
		s->nalive++;
		if (r->preempt_for != 0 &&
		    pending_adj(s, r->preempt_for, 1) != 0)
			return NONE;
	}
	return i;
}

/* Gives back what record i holds (it stays, dead). */
void
run_release(struct gp_sched_engine *s, size_t i)
{
	struct run_rec *r = &s->runs[i];
	struct eng_node *n = &s->e.nodes[r->node];
	int p;

	if (!r->alive)
		return;
	r->alive = 0;
	s->nalive--;
	if (r->preempt_for != 0)
		pending_adj(s, r->preempt_for, -1);
	n->cpu_free += r->cpu;
	if (n->mem_total != INT64_MAX)
		n->mem_free += r->mem;
	for (p = 0; p < n->ngpus && r->whole != 0; p++)
		if ((r->whole >> p) & 1) {
			n->gpus[p].holder = n->gpus[p].lent ? 0 : -1;
			n->gpus[p].end_ms = s->e.now_ms;
		}
	if (r->shared && r->gpu_pos >= 0 && r->gpu_pos < n->ngpus) {
		struct eng_gpu *g = &n->gpus[r->gpu_pos];
		g->milli_free += r->milli;
		g->mem_free += r->gpu_mem;
		g->nshared--;
	}
	node_changed(&s->e, n);
}

/* Takes again what record i held (undoes run_release). */
void
run_restore(struct gp_sched_engine *s, size_t i)
{
	struct run_rec *r = &s->runs[i];
	struct eng_node *n = &s->e.nodes[r->node];
	int p;

	if (r->alive)
		return;
	r->alive = 1;
	s->nalive++;
	if (r->preempt_for != 0)
		pending_adj(s, r->preempt_for, 1);
	n->cpu_free -= r->cpu;
	if (n->mem_total != INT64_MAX)
		n->mem_free -= r->mem;
	for (p = 0; p < n->ngpus && r->whole != 0; p++)
		if ((r->whole >> p) & 1) {
			n->gpus[p].holder = r->job_id;
			n->gpus[p].end_ms = r->end_ms;
		}
	if (r->shared && r->gpu_pos >= 0 && r->gpu_pos < n->ngpus) {
		struct eng_gpu *g = &n->gpus[r->gpu_pos];
		g->milli_free -= r->milli;
		g->mem_free -= r->gpu_mem;
		g->nshared++;
	}
	node_changed(&s->e, n);
}

/*
 * Counts n (up or not) in the pool's totals and its lab's count of up
 * nodes (sign 1), or takes it out of them (sign -1). 0 or GP_ENOMEM.
 */
int
node_totals(struct gp_sched_engine *s, const struct eng_node *n, int sign)
{
	struct engine *e = &s->e;
	size_t i;

	if (!n->up)
		return 0;
	e->total_gpus += sign * n->ngpus;
	e->total_cpu += sign * n->cpu_total;
	if (n->mem_total != INT64_MAX)
		e->total_mem += sign * n->mem_total;
	if (n->group == 0)
		return 0;
	for (i = 0; i < s->nlabs; i++)
		if (s->labs[i].group == n->group)
			break;
	if (i == s->nlabs) {
		if (sign < 0)
			return 0;
		if (s->nlabs == s->caplabs) {
			size_t cap = s->caplabs ? s->caplabs * 2 : 8;
			struct lab_count *l =
			    realloc(s->labs, cap * sizeof(*l));
			if (l == NULL)
				return GP_ENOMEM;
			s->labs = l;
			s->caplabs = cap;
		}
		s->labs[s->nlabs].group = n->group;
		s->labs[s->nlabs++].up = 0;
	}
	if (sign > 0)
		s->labs[i].up++;
	else if (s->labs[i].up > 0)
		s->labs[i].up--;
	return 0;
}

/* 1 when the lab lends a node that is up. */
int
lab_has_nodes(const struct gp_sched_engine *s, int64_t group)
{
	size_t i;

	for (i = 0; i < s->nlabs; i++)
		if (s->labs[i].group == group)
			return s->labs[i].up > 0;
	return 0;
}

int
engine_init(struct gp_sched_engine *s, const struct gp_sched_node *nodes,
    size_t nnodes, const struct gp_sched_policy *policy, uint64_t seed)
{
	struct engine *e = &s->e;
	size_t i, ngpus = 0;
	int j, m;

	memset(s, 0, sizeof(*s));
	s->free_runs = NONE;
	e->policy = policy != NULL ? policy : gp_sched_policy_default();
	e->rng = seed != 0 ? seed : 0x9e3779b97f4a7c15ULL;
	for (i = 0; i < nnodes; i++) {
		if (nodes[i].ngpus < 0 || nodes[i].ngpus > GP_SCHED_GPUS_MAX)
			return GP_EINVAL;
		ngpus += (size_t)nodes[i].ngpus;
	}
	e->nodes = calloc(nnodes + 1, sizeof(*e->nodes));
	e->gpus = calloc(ngpus + 1, sizeof(*e->gpus));
	if (e->nodes == NULL || e->gpus == NULL)
		return GP_ENOMEM;
	e->nnodes = e->capnodes = nnodes;
	e->ngpus = ngpus;
	ngpus = 0;
	for (i = 0; i < nnodes; i++) {
		const struct gp_sched_node *src = &nodes[i];
		struct eng_node *n = &e->nodes[i];

		n->src = src;
		n->id = src->id;
		n->up = src->up;
		n->group = src->group;
		n->max_time_s = src->max_time_s;
		n->cpu_total = n->cpu_free = src->cpu_milli;
		n->mem_total = n->mem_free =
		    src->mem_mib > 0 ? src->mem_mib : INT64_MAX;
		n->ngpus = src->ngpus;
		n->gpus = &e->gpus[ngpus];
		n->resv = -1;
		n->cls = NONE;
		n->runs = NONE;
		n->model = src->ngpus > 0 ? -3 : -1;
		ngpus += (size_t)src->ngpus;
		for (j = 0; j < src->ngpus; j++) {
			const struct gp_sched_gpu *sg = &src->gpus[j];
			struct eng_gpu *g = &n->gpus[j];

			g->holder = sg->job_id;
			g->lent = sg->job_id >= 0;
			g->index = sg->index;
			g->mem_total = sg->mem_mib;
			g->milli_free = GP_SCHED_MILLI - sg->shared_milli;
			if (g->milli_free < 0)
				g->milli_free = 0;
			g->mem_free = sg->mem_mib - sg->shared_mem_mib;
			g->nshared = sg->nshared;
			if (g->nshared == 0 &&
			    (sg->shared_milli > 0 || sg->shared_mem_mib > 0))
				g->nshared = 1;
			g->capability = sg->capability;
			g->price = sg->price;
			g->interactive = sg->interactive_only != 0;
			g->end_ms = sg->job_id != 0 ? END_NEVER : 0;
			m = intern_model(e, sg->model);
			if (m == -2)
				return GP_ENOMEM;
			g->model = m;
			if (n->model == -3)
				n->model = m;
			else if (n->model != m)
				n->model = -2;
			if (sg->mem_mib > n->max_gpu_mem)
				n->max_gpu_mem = sg->mem_mib;
		}
		if (n->model == -3)
			n->model = -1;
		n->same_mem = 1;
		for (j = 1; j < src->ngpus; j++)
			if (src->gpus[j].mem_mib != src->gpus[0].mem_mib)
				n->same_mem = 0;
		node_changed(&s->e, n);
		if (node_totals(s, n, 1) != 0)
			return GP_ENOMEM;
	}
	return e->class_oom ? GP_ENOMEM : 0;
}

void
engine_fini(struct gp_sched_engine *s)
{
	struct engine *e = &s->e;
	size_t i;

	eng_mix_free(e);
	for (i = 0; i < e->nnodes; i++) {
		if (e->nodes[i].own_gpus)
			free(e->nodes[i].gpus);
		if (s->set_nodes != NULL && s->set_nodes[i] != NULL) {
			free(s->set_nodes[i]->gpus);
			free(s->set_nodes[i]);
		}
	}
	free(s->set_nodes);
	free(e->nodes);
	free(e->gpus);
	for (i = 0; i < e->nmodels; i++)
		free((char *)e->models[i]);
	free(e->models);
	for (i = 0; i < s->nshape_models; i++)
		free(s->shape_models[i]);
	free(s->shape_models);
	free(s->labs);
	free(s->pend);
	free(e->match_gen);
	free(e->match);
	free(e->shapes);
	free(e->shape_index);
	free(e->cache);
	free(e->classes);
	free(e->class_index);
	for (i = 0; i < NBUCKETS; i++)
		free(e->buckets[i].v);
	for (i = 0; i <= GP_SCHED_GPUS_MAX; i++)
		free(e->wbuckets[i].v);
	free(e->node_frag);
	free(e->node_frag_version);
	free(s->runs);
	free(s->index);
	free(s->shape_failed);
	free(s->own_nodes);
	free(s->own_gpus);
}

struct eng_node *
node_by_id(struct gp_sched_engine *s, int64_t id)
{
	size_t i;

	/* Nodes come sorted by id from the coordinator; search, then scan. */
	size_t lo = 0, hi = s->e.nnodes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->e.nodes[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->e.nnodes && s->e.nodes[lo].id == id)
		return &s->e.nodes[lo];
	for (i = 0; i < s->e.nnodes; i++)
		if (s->e.nodes[i].id == id)
			return &s->e.nodes[i];
	return NULL;
}

/*
 * Records what runs, from the caller's list: whole GPUs are those the
 * nodes mark with the job's id; shared parts were counted by the caller.
 */
int
engine_add_running(struct gp_sched_engine *s,
    const struct gp_sched_running *running, size_t nrunning)
{
	size_t i;
	int p;

	for (i = 0; i < nrunning; i++) {
		const struct gp_sched_running *r = &running[i];
		struct eng_node *n = node_by_id(s, r->node_id);
		struct run_rec rec;

		if (n == NULL)
			continue;
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
		rec.preemptible = r->preemptible && r->preempt_for == 0;
		rec.alive = 1;
		rec.gpu_pos = -1;
		if (r->shared) {
			rec.shared = 1;
			rec.milli = r->gpu_milli;
			rec.gpu_mem = r->gpu_mem_mib;
			for (p = 0; p < n->ngpus; p++)
				if (n->gpus[p].index == r->gpu)
					rec.gpu_pos = p;
		}
		for (p = 0; p < n->ngpus && p < 64; p++)
			if (n->gpus[p].holder == r->job_id) {
				/* Several parts of one job on a node: the
				 * first record holds the GPUs. */
				size_t o;
				int dup = 0;
				for (o = job_runs(s, r->job_id); o != NONE;
				     o = s->runs[o].next)
					if (s->runs[o].node == rec.node &&
					    ((s->runs[o].whole >> p) & 1))
						dup = 1;
				if (!dup) {
					rec.whole |= 1ULL << p;
					n->gpus[p].end_ms = r->end_ms;
				}
			}
		n->cpu_free -= rec.cpu;
		if (n->mem_total != INT64_MAX)
			n->mem_free -= rec.mem;
		node_changed(&s->e, n);
		if (run_add(s, &rec) == NONE)
			return GP_ENOMEM;
	}
	return s->e.class_oom ? GP_ENOMEM : 0;
}

/* ---- requests ---- */

static int
shape_equal(const struct shape_key *a, const struct shape_key *b)
{
	return a->cpu == b->cpu && a->mem == b->mem &&
	    a->gpu_mem == b->gpu_mem && a->min_gpu_mem == b->min_gpu_mem &&
	    a->max_price == b->max_price && a->gpus == b->gpus &&
	    a->milli == b->milli && a->shared == b->shared &&
	    a->min_capability == b->min_capability &&
	    a->interactive == b->interactive &&
	    strcasecmp(a->model, b->model) == 0;
}

/* Interns the shape of r's request (for the memo and policy caches). */
static int
intern_shape(struct engine *e, const struct part_req *r)
{
	struct shape_key k;
	size_t i, h;

	memset(&k, 0, sizeof(k));
	k.cpu = r->cpu;
	k.mem = r->mem;
	k.gpu_mem = r->gpu_mem;
	k.min_gpu_mem = r->job->min_gpu_mem_mib;
	k.max_price = r->job->max_price;
	k.gpus = r->gpus;
	k.milli = r->milli;
	k.shared = r->shared;
	k.min_capability = r->job->min_capability;
	k.interactive = r->job->interactive != 0;
	k.model = r->job->gpu_model != NULL ? r->job->gpu_model : "";
	k.hash = (uint64_t)k.cpu * 31 + (uint64_t)k.mem;
	k.hash = k.hash * 31 + (uint64_t)k.gpu_mem;
	k.hash = k.hash * 31 + (uint64_t)k.gpus * 1009 + (uint64_t)k.milli;
	k.hash = k.hash * 31 + (uint64_t)k.shared + (uint64_t)k.max_price +
	    (uint64_t)k.interactive * 7919;
	k.hash =
	    k.hash * 31 + (uint64_t)k.min_gpu_mem + (uint64_t)k.min_capability;
	for (h = 0; k.model[h] != '\0'; h++)
		k.hash = k.hash * 31 + (uint64_t)(k.model[h] | 0x20);
	k.hash *= 0x9e3779b97f4a7c15ULL;
	if (2 * (e->nshapes + 1) > e->capshape_index) {
		size_t cap = e->capshape_index ? e->capshape_index * 2 : 64;
		size_t *t = malloc(cap * sizeof(*t));
		if (t == NULL)
			return -1;
		for (i = 0; i < cap; i++)
			t[i] = NONE;
		for (i = 0; i < e->nshapes; i++) {
			h = (size_t)(e->shapes[i].hash >> 7) & (cap - 1);
			while (t[h] != NONE)
				h = (h + 1) & (cap - 1);
			t[h] = i;
		}
		free(e->shape_index);
		e->shape_index = t;
		e->capshape_index = cap;
	}
	for (h = (size_t)(k.hash >> 7) & (e->capshape_index - 1);
	     e->shape_index[h] != NONE; h = (h + 1) & (e->capshape_index - 1))
		if (e->shapes[e->shape_index[h]].hash == k.hash &&
		    shape_equal(&e->shapes[e->shape_index[h]], &k))
			return (int)e->shape_index[h];
	e->shape_index[h] = e->nshapes;
	if (e->nshapes == e->capshapes) {
		size_t cap = e->capshapes ? e->capshapes * 2 : 16;
		struct shape_key *n = realloc(e->shapes, cap * sizeof(*n));
		if (n == NULL)
			return -1;
		e->shapes = n;
		if (e->policy->uses_mix) {
			/* The score cache: capnodes x cap, moved over. */
			struct score_cache *c =
			    calloc(e->capnodes * cap + 1, sizeof(*c));
			size_t j;
			if (c == NULL)
				return -1;
			for (j = 0; j < e->nnodes && e->cache != NULL; j++)
				memcpy(&c[j * cap], &e->cache[j * e->capshapes],
				    e->capshapes * sizeof(*c));
			free(e->cache);
			e->cache = c;
		}
		e->capshapes = cap;
	}
	/* The key keeps a copy of the model: engines outlive jobs. */
	if (k.model[0] != '\0') {
		/* e is the first member of its gp_sched_engine. */
		struct gp_sched_engine *s = (struct gp_sched_engine *)e;
		char *copy = strdup(k.model);
		if (copy == NULL)
			return -1;
		if (s->nshape_models == s->capshape_models) {
			size_t cap = s->capshape_models
			    ? s->capshape_models * 2
			    : 16;
			char **m = realloc(s->shape_models, cap * sizeof(*m));
			if (m == NULL) {
				free(copy);
				return -1;
			}
			s->shape_models = m;
			s->capshape_models = cap;
		}
		s->shape_models[s->nshape_models++] = copy;
		k.model = copy;
	}
	e->shapes[e->nshapes] = k;
	return (int)e->nshapes++;
}

void
part_init(struct engine *e, const struct gp_sched_job *job, struct part_req *r)
{
	memset(r, 0, sizeof(*r));
	r->job = job;
	r->shared = job_is_shared(job);
	r->gpus = r->shared ? 1 : (job->gpus > 0 ? job->gpus : 0);
	r->milli = r->shared
	    ? (job->gpu_milli > 0 && job->gpu_milli < 1000 ? job->gpu_milli : 0)
	    : GP_SCHED_MILLI;
	r->gpu_mem = job->gpu_mem_mib > 0 ? job->gpu_mem_mib : 0;
	r->cpu = job->cpu_milli > 0 ? job->cpu_milli : 0;
	r->mem = job->mem_mib > 0 ? job->mem_mib : 0;
	r->shape = intern_shape(e, r);
}
