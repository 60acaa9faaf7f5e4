/*
 * sched.c: the scheduler's engine and pass (see sched.h for what it
 * decides; sched_policy.c for where parts go). The engine is a world of
 * nodes and GPUs with what is free on each, and the records of what runs.
 * A pass works on it in three steps:
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

/* What runs: one record per part. */
struct run_rec {
	int64_t job_id;
	size_t node;
	int64_t cpu, mem, end_ms, group, user, loss;
	int preemptible, shared, gpu_pos, milli;
	int64_t gpu_mem;
	uint64_t whole; /* positions of the GPUs it holds whole */
	int alive;
	unsigned pass_no; /* the pass that started it, 0: the caller's */
	int owner;        /* started there for its lab (provider first) */
	size_t next;      /* the job's next part, NONE at the end */
	size_t nprev, nnext; /* the node's records (alive or not) */
	int64_t saved_ms;    /* see gp_sched_running */
	int64_t preempt_for; /* being stopped for this job; 0: none */
	int linked;          /* on its node's list */
};

struct resv_node {
	size_t node;
	int64_t extra_cpu, extra_mem; /* left at the start, job in */
};

struct reservation {
	int active;
	const struct gp_sched_job *job;
	int64_t start_ms;
	size_t nnodes;
	struct resv_node n[GP_SCHED_PARTS_MAX];
};

/*
 * The head job's reservation, kept from the pass that computed it: with
 * 10,000 nodes and 80,000 running parts, computing it (earliest_start:
 * every release sorted, every node's GPUs timed) took most of a pass, and
 * a busy coordinator passes after nearly every batch. The live scheduler
 * reuses it for the same head job for a while (gp_sched_engine_set_
 * resv_reuse) while its start is still ahead; the simulator does not.
 */
struct resv_cache {
	int valid;
	int64_t job_id;
	int64_t computed_ms; /* engine time it was computed at */
	struct reservation resv;
	uint64_t gpus[GP_SCHED_PARTS_MAX]; /* reserved GPUs, per part */
};

/* The rest of the engine, beside the parts policies see (sched_int.h). */
struct gp_sched_engine {
	struct engine e;
	struct run_rec *runs;
	size_t nruns, capruns;
	size_t free_runs; /* reclaimed records, chained by next; NONE */
	size_t nalive;    /* records alive */
	size_t *index;    /* open addressing: job id -> first record */
	size_t capindex, nindex;
	struct reservation resv;
	struct resv_cache rcache;
	int64_t resv_reuse_ms; /* 0: compute the reservation every pass */
	size_t *shape_failed; /* per shape, this pass: 1 + the index of the
	                         waiting entry whose reason it shares */
	size_t capfailed;
	/* The pass's output. */
	struct gp_sched_result *res;
	size_t capassign, cappreempt, capwait;
	/* Fair share. */
	const struct gp_sched_share *groups, *users;
	size_t ngroups, nusers;
	unsigned pass_no;                /* passes so far */
	int quick;                       /* no reservations, no reasons */
	int defer_preempt;               /* this pass: see gp_sched_pass */
	struct gp_sched_node *own_nodes; /* engine_new's copies */
	struct gp_sched_gpu *own_gpus;
	struct gp_sched_node **set_nodes; /* node_set's copies, per node */
	/* Labs that lend up nodes: (group, count), for provider first. */
	struct lab_count {
		int64_t group;
		size_t up;
	} *labs;
	size_t nlabs, caplabs;
	/* Jobs whose victims are being stopped: alive victim parts each. */
	struct pending {
		int64_t for_job;
		size_t parts;
	} *pend;
	size_t npend, cappend;
	/* Shape model strings (copies), for freeing. */
	char **shape_models;
	size_t nshape_models, capshape_models;
};

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

static int
job_is_shared(const struct gp_sched_job *job)
{
	return job->shared || (job->gpu_milli > 0 && job->gpu_milli < 1000);
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

static int
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

static void
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
static struct eng_node *
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
static void
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
static size_t
job_runs(const struct gp_sched_engine *s, int64_t job_id)
{
	size_t h = index_find(s, job_id);

	return h == NONE ? NONE : s->index[h];
}

/*
 * Counts delta more (or fewer) alive victim parts being stopped for
 * for_job. Returns 0 or GP_ENOMEM.
 */
static int
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
static int
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
static int
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
static size_t
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
static void
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
static void
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
static int
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
static int
lab_has_nodes(const struct gp_sched_engine *s, int64_t group)
{
	size_t i;

	for (i = 0; i < s->nlabs; i++)
		if (s->labs[i].group == group)
			return s->labs[i].up > 0;
	return 0;
}

static int
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

static void
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

static struct eng_node *
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
static int
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

static int64_t
job_end(int64_t now_ms, const struct gp_sched_job *job)
{
	if (job->time_limit_s <= 0 ||
	    job->time_limit_s > (END_NEVER - now_ms) / 1000)
		return END_NEVER;
	return now_ms + job->time_limit_s * 1000;
}

static int
job_parts(const struct gp_sched_job *job)
{
	return job->parts > 1 ? job->parts : 1;
}

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

static void
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

static int
time_allowed(const struct eng_node *n, const struct gp_sched_job *job)
{
	return n->max_time_s <= 0 ||
	    (job->time_limit_s > 0 && job->time_limit_s <= n->max_time_s);
}

/* Cheap checks of n for r: CPU, memory, counts, model, limits. */
static int
node_may_fit(struct engine *e, const struct eng_node *n,
    const struct part_req *r)
{
	const struct gp_sched_job *job = r->job;

	if (!n->up || n->cpu_free < r->cpu || !time_allowed(n, job))
		return 0;
	if (r->mem > 0 && n->mem_total != INT64_MAX && n->mem_free < r->mem)
		return 0;
	if (r->gpus == 0)
		return 1;
	if (!r->shared ? n->nfree < r->gpus : n->milli_free < r->milli)
		return 0;
	if ((r->gpu_mem > 0 || job->min_gpu_mem_mib > 0) &&
	    (n->max_gpu_mem < r->gpu_mem ||
	        n->max_gpu_mem < job->min_gpu_mem_mib))
		return 0;
	if (n->model >= 0 && !eng_model_matches(e, n->model, job->gpu_model))
		return 0;
	return 1;
}

/* ---- the result ---- */

static struct gp_sched_assignment *
result_assign(struct gp_sched_engine *s)
{
	struct gp_sched_result *res = s->res;

	if (res->nassignments == s->capassign) {
		size_t cap = s->capassign ? s->capassign * 2 : 16;
		struct gp_sched_assignment *a =
		    realloc(res->assignments, cap * sizeof(*a));
		if (a == NULL)
			return NULL;
		res->assignments = a;
		s->capassign = cap;
	}
	return &res->assignments[res->nassignments++];
}

static int
result_preempt(struct gp_sched_engine *s, int64_t job_id, int64_t for_job,
    int64_t node_id)
{
	struct gp_sched_result *res = s->res;

	if (res->npreemptions == s->cappreempt) {
		size_t cap = s->cappreempt ? s->cappreempt * 2 : 8;
		struct gp_sched_preemption *p =
		    realloc(res->preemptions, cap * sizeof(*p));
		if (p == NULL)
			return GP_ENOMEM;
		res->preemptions = p;
		s->cappreempt = cap;
	}
	res->preemptions[res->npreemptions].job_id = job_id;
	res->preemptions[res->npreemptions].for_job_id = for_job;
	res->preemptions[res->npreemptions++].node_id = node_id;
	return 0;
}

static int
result_wait(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int reason, const char *why)
{
	struct gp_sched_result *res = s->res;
	struct gp_sched_waiting *w;

	if (res->nwaiting == s->capwait) {
		size_t cap = s->capwait ? s->capwait * 2 : 16;
		w = realloc(res->waiting, cap * sizeof(*w));
		if (w == NULL)
			return GP_ENOMEM;
		res->waiting = w;
		s->capwait = cap;
	}
	w = &res->waiting[res->nwaiting++];
	memset(w, 0, sizeof(*w));
	w->job_id = job->id;
	w->reason = reason;
	gp_strlcpy(w->why, why != NULL ? why : gp_sched_wait_name(reason),
	    sizeof(w->why));
	return 0;
}

void
gp_sched_result_fini(struct gp_sched_result *res)
{
	if (res == NULL)
		return;
	free(res->assignments);
	free(res->preemptions);
	free(res->waiting);
	memset(res, 0, sizeof(*res));
}

const char *
gp_sched_wait_name(int reason)
{
	switch (reason) {
	case GP_SCHED_WAIT_RESOURCES:
		return "no node that could hold it has room now";
	case GP_SCHED_WAIT_NEVER:
		return "no node that is up could ever hold it";
	case GP_SCHED_WAIT_SHARE:
		return "group over its share: groups with less recent usage "
		       "went first";
	case GP_SCHED_WAIT_PRIORITY:
		return "jobs ahead of it took the free GPUs";
	case GP_SCHED_WAIT_RESERVATION:
		return "behind a reservation";
	case GP_SCHED_WAIT_GANG:
		return "waiting for nodes for all of its gang's parts";
	case GP_SCHED_WAIT_HELD:
		return "held";
	case GP_SCHED_WAIT_PREEMPTING:
		return "borrowed work on its lab's GPUs is saving a checkpoint "
		       "to make room for it";
	}
	return "waiting";
}

/* ---- placing parts ---- */

/* Takes c on n for r: returns the record's index, or NONE (memory). */
static size_t
take(struct gp_sched_engine *s, struct eng_node *n, const struct part_req *r,
    const struct choice *c, int64_t end_ms, int owner)
{
	struct run_rec rec;
	int i;

	memset(&rec, 0, sizeof(rec));
	rec.job_id = r->job->id;
	rec.node = (size_t)(n - s->e.nodes);
	rec.cpu = r->cpu;
	rec.mem = r->mem;
	rec.end_ms = end_ms;
	rec.group = r->job->group;
	rec.user = r->job->user;
	/* An interactive job is never checkpointed and moved: a person
	 * is at its terminal (docs/scheduling.md). */
	rec.preemptible = !r->job->interactive;
	rec.alive = 1;
	rec.pass_no = s->pass_no;
	rec.owner = owner;
	rec.gpu_pos = -1;
	n->cpu_free -= r->cpu;
	if (n->mem_total != INT64_MAX)
		n->mem_free -= r->mem;
	if (r->shared && c->ngpus == 1) {
		struct eng_gpu *g = &n->gpus[c->pos[0]];
		rec.shared = 1;
		rec.gpu_pos = c->pos[0];
		rec.milli = r->milli;
		rec.gpu_mem = r->gpu_mem;
		g->milli_free -= r->milli;
		g->mem_free -= r->gpu_mem;
		g->nshared++;
	} else {
		for (i = 0; i < c->ngpus; i++) {
			struct eng_gpu *g = &n->gpus[c->pos[i]];
			g->holder = r->job->id;
			g->end_ms = end_ms;
			rec.whole |= 1ULL << c->pos[i];
		}
	}
	node_changed(&s->e, n);
	return run_add(s, &rec);
}

static int
cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

static int
emit_assignment(struct gp_sched_engine *s, const struct eng_node *n,
    const struct part_req *r, const struct choice *c, int part)
{
	struct gp_sched_assignment *a = result_assign(s);
	int i;

	if (a == NULL)
		return GP_ENOMEM;
	memset(a, 0, sizeof(*a));
	a->job_id = r->job->id;
	a->part = part;
	a->node_id = n->id;
	a->ngpus = c->ngpus;
	for (i = 0; i < c->ngpus; i++)
		a->gpus[i] = n->gpus[c->pos[i]].index;
	qsort(a->gpus, (size_t)a->ngpus, sizeof(a->gpus[0]), cmp_int);
	a->gpu_milli = r->shared ? r->milli : GP_SCHED_MILLI;
	a->gpu_mem_mib = r->shared ? r->gpu_mem : 0;
	return 0;
}

/* 1 when (a on na) beats (b on nb). */
static int
better(const struct choice *a, const struct eng_node *na,
    const struct choice *b, const struct eng_node *nb)
{
	if (a->score != b->score)
		return a->score < b->score;
	if (a->tie != b->tie)
		return a->tie < b->tie;
	return na->id < nb->id;
}

struct scan {
	int64_t only_group; /* 0: any node; else the lab's own */
	int use_resv;       /* respect the reservation */
	int64_t end_ms;     /* when the part would end */
};

/*
 * Whether the part may go on n given the reservation: 1 yes, 0 no; sets
 * r->avoid_reserved when it must keep off the reserved GPUs.
 */
static int
resv_allows(struct gp_sched_engine *s, const struct eng_node *n,
    struct part_req *r, const struct scan *sc)
{
	const struct resv_node *rn;

	r->avoid_reserved = 0;
	if (!sc->use_resv || !s->resv.active || n->resv < 0)
		return 1;
	if (sc->end_ms != END_NEVER && sc->end_ms <= s->resv.start_ms)
		return 1;
	rn = &s->resv.n[n->resv];
	if (rn->extra_cpu < r->cpu)
		return 0;
	if (r->mem > 0 && rn->extra_mem != INT64_MAX && rn->extra_mem < r->mem)
		return 0;
	r->avoid_reserved = 1;
	return 1;
}

/* Scores r on n against the best so far. */
static void
consider(struct gp_sched_engine *s, struct eng_node *n, struct part_req *r,
    const struct scan *sc, struct choice *best, struct eng_node **best_n,
    int *room)
{
	struct engine *e = &s->e;
	struct choice c;

	if (n->gang_mark || (sc->only_group != 0 && n->group != sc->only_group))
		return;
	if (!node_may_fit(e, n, r))
		return;
	if (!resv_allows(s, n, r, sc)) {
		*room = 1;
		return;
	}
	if (e->accepts != NULL && !e->accepts(e->accepts_arg, n->src, r->job))
		return;
	c.ngpus = 0;
	c.score = c.tie = 0;
	if (e->policy->score(e, n, r, &c) != 0) {
		/* Perhaps only the reserved GPUs would do. */
		if (r->avoid_reserved) {
			r->avoid_reserved = 0;
			if (e->policy->score(e, n, r, &c) == 0)
				*room = 1;
		}
		return;
	}
	*room = 1;
	if (*best_n == NULL || better(&c, n, best, *best_n)) {
		*best = c;
		*best_n = n;
	}
}

/*
 * The best node for r now, or NULL. OUT: *best (with its GPUs), *room
 * (some node fits, reservation aside). Visits the classes of like nodes
 * in buckets of free GPU share, from the least that could do; one node
 * per class unless the policy breaks ties at random or the caller checks
 * nodes one by one (accepts); stops early for a leftover-first policy.
 */
static struct eng_node *
best_node(struct gp_sched_engine *s, struct part_req *r, const struct scan *sc,
    struct choice *best, int *room)
{
	struct engine *e = &s->e;
	struct eng_node *best_n = NULL, *n;
	int64_t need = r->shared ? r->milli : (int64_t)r->gpus * GP_SCHED_MILLI;
	int b, whole, per_node = e->policy->random_ties || e->accepts != NULL;
	const struct bucket *bk;
	size_t k, i;

	*room = 0;
	/* Whole GPUs: the lists by wholly free GPUs; else by free share. */
	whole = !r->shared && r->gpus > 0;
	for (b = whole ? r->gpus : (int)(need / GP_SCHED_MILLI);
	     b < (whole ? GP_SCHED_GPUS_MAX + 1 : NBUCKETS); b++) {
		/* No node further on can leave less over. */
		if (e->policy->leftover_first && best_n != NULL &&
		    (double)((int64_t)b * GP_SCHED_MILLI - need) > best->score)
			break;
		bk = whole ? &e->wbuckets[b] : &e->buckets[b];
		for (k = 0; k < bk->n; k++) {
			const struct bucket_entry *be = &bk->v[k];
			struct node_class *c;
			if (be->cpu_free < r->cpu ||
			    (r->mem > 0 && be->mem_free < r->mem))
				continue;
			c = &e->classes[be->cls];
			if (per_node) {
				for (i = c->first; i != NONE;
				     i = e->nodes[i].cnext)
					consider(s, &e->nodes[i], r, sc, best,
					    &best_n, room);
				continue;
			}
			n = class_rep(e, c);
			if (n != NULL)
				consider(s, n, r, sc, best, &best_n, room);
		}
	}
	if (best_n == NULL)
		return NULL;
	/* The winner: its reservation rule, and its GPUs if not picked. */
	resv_allows(s, best_n, r, sc);
	if (best->ngpus < 0) {
		r->no_cache = 1;
		if (e->policy->score(e, best_n, r, best) != 0)
			best_n = NULL;
		r->no_cache = 0;
	}
	return best_n;
}

/*
 * Places every part of job (on distinct nodes) or none. OUT: *placed,
 * *room (some node had room for a part, reservation aside), *nodes_fit
 * (how many parts found a node). Returns 0 or GP_ENOMEM.
 */
static int
place_job(struct gp_sched_engine *s, const struct gp_sched_job *job,
    const struct scan *sc0, int *placed, int *room, int *nodes_fit)
{
	struct engine *e = &s->e;
	struct part_req r;
	struct choice c;
	struct eng_node *n, *used[GP_SCHED_PARTS_MAX];
	size_t recs[GP_SCHED_PARTS_MAX], nassign0 = s->res->nassignments;
	int extra[GP_SCHED_PARTS_MAX];
	struct scan sc = *sc0;
	int parts = job_parts(job), p, k, any_room = 0;

	memset(&c, 0, sizeof(c));
	*placed = *room = *nodes_fit = 0;
	if (parts > GP_SCHED_PARTS_MAX || job->gpus > GP_SCHED_GPUS_MAX)
		return 0;
	part_init(e, job, &r);
	sc.end_ms = job_end(e->now_ms, job);
	for (p = 0; p < parts; p++) {
		int rm = 0;

		n = best_node(s, &r, &sc, &c, &rm);
		any_room |= rm;
		e->decisions++;
		if (n == NULL)
			break;
		if (emit_assignment(s, n, &r, &c, p) != 0)
			return GP_ENOMEM;
		recs[p] = take(s, n, &r, &c, sc.end_ms, sc.only_group != 0);
		if (recs[p] == NONE)
			return GP_ENOMEM;
		extra[p] = r.avoid_reserved && n->resv >= 0;
		if (extra[p]) {
			s->resv.n[n->resv].extra_cpu -= r.cpu;
			if (s->resv.n[n->resv].extra_mem != INT64_MAX)
				s->resv.n[n->resv].extra_mem -= r.mem;
		}
		used[p] = n;
		n->gang_mark = 1;
	}
	*nodes_fit = p;
	*room = any_room;
	for (k = 0; k < p; k++)
		used[k]->gang_mark = 0;
	if (p == parts) {
		*placed = 1;
		return 0;
	}
	/* Not all of a gang: give back what its first parts took. */
	for (k = p; k-- > 0;) {
		run_release(s, recs[k]);
		if (k == 0)
			job_reclaim(s, job->id);
		if (extra[k]) {
			/* Its use of the spare room is given back too. */
			struct resv_node *rn = &s->resv.n[used[k]->resv];
			rn->extra_cpu += r.cpu;
			if (rn->extra_mem != INT64_MAX)
				rn->extra_mem += r.mem;
		}
	}
	s->res->nassignments = nassign0;
	return 0;
}

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
	const struct gp_sched_job *job = r->job;

	if (g->holder < 0)
		return 0;
	if (r->gpu_mem > 0 && g->mem_total < r->gpu_mem)
		return 0;
	if (job->min_gpu_mem_mib > 0 && g->mem_total < job->min_gpu_mem_mib)
		return 0;
	if (job->min_capability > 0 && g->capability < job->min_capability)
		return 0;
	if (job->max_price > 0 && g->price > job->max_price)
		return 0;
	if (g->interactive && !job->interactive)
		return 0;
	return eng_model_matches(e, g->model, job->gpu_model);
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
static int
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

static void
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
static void
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
static int
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
static int
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
static int
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

/* ---- fair share ---- */

struct fs_user {
	int64_t id;
	double usage, weight, held;
	size_t first, next_job; /* in the order array */
	size_t njobs, taken;
};

struct fs_group {
	int64_t id;
	double usage, weight, held;
	size_t first_user, nusers;
};

static const struct gp_sched_share *
share_find(const struct gp_sched_share *t, size_t n, int64_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (t[i].id == id)
			return &t[i];
	return NULL;
}

/* The dominant share of a part held, of the up nodes' totals. */
static double
dominant(const struct engine *e, double gpus, int64_t cpu, int64_t mem)
{
	double d = 0, x;

	if (e->total_gpus > 0 && (x = gpus / (double)e->total_gpus) > d)
		d = x;
	if (e->total_cpu > 0 && (x = (double)cpu / (double)e->total_cpu) > d)
		d = x;
	if (e->total_mem > 0 && (x = (double)mem / (double)e->total_mem) > d)
		d = x;
	return d;
}

static double
job_dominant(const struct engine *e, const struct gp_sched_job *job)
{
	double gpus;

	if (!job_is_shared(job))
		gpus = job->gpus > 0 ? job->gpus : 0;
	else if (job->gpu_milli > 0 && job->gpu_milli < 1000)
		gpus = job->gpu_milli / 1000.0;
	else
		gpus = 0;
	return job_parts(job) *
	    dominant(e, gpus, job->cpu_milli,
	        job->mem_mib > 0 ? job->mem_mib : 0);
}

struct fair {
	struct fs_group *groups;
	size_t ngroups;
	struct fs_user *users;
	size_t nusers;
	size_t *order; /* job indices, grouped by user */
	double usage_total, weight_total, user_weight_total;
};

/* Groups, their users and the users' jobs (in queue order). */
static int
fair_init(struct gp_sched_engine *s, struct fair *f,
    const struct gp_sched_job *const *queue, const unsigned char *todo,
    size_t nqueue)
{
	struct engine *e = &s->e;
	size_t i, j, *user_of = NULL, pos;
	const struct gp_sched_share *sh;

	memset(f, 0, sizeof(*f));
	f->groups = calloc(nqueue + 1, sizeof(*f->groups));
	f->users = calloc(nqueue + 1, sizeof(*f->users));
	f->order = calloc(nqueue + 1, sizeof(*f->order));
	user_of = calloc(nqueue + 1, sizeof(*user_of));
	if (f->groups == NULL || f->users == NULL || f->order == NULL ||
	    user_of == NULL) {
		free(user_of);
		return GP_ENOMEM;
	}
	/* Users (group, user), in order of first appearance. */
	for (i = 0; i < nqueue; i++) {
		if (!todo[i])
			continue;
		for (j = 0; j < f->nusers; j++)
			if (f->users[j].id == queue[i]->user &&
			    f->groups[f->users[j].first].id == queue[i]->group)
				break;
		if (j == f->nusers) {
			size_t g;
			for (g = 0; g < f->ngroups; g++)
				if (f->groups[g].id == queue[i]->group)
					break;
			if (g == f->ngroups) {
				f->groups[g].id = queue[i]->group;
				sh = share_find(s->groups, s->ngroups,
				    queue[i]->group);
				f->groups[g].weight =
				    sh != NULL && sh->weight > 0 ? sh->weight
				                                 : 1;
				f->groups[g].usage =
				    sh != NULL && sh->usage > 0 ? sh->usage : 0;
				f->ngroups++;
			}
			f->users[j].id = queue[i]->user;
			f->users[j].first = g; /* its group, for now */
			sh = share_find(s->users, s->nusers, queue[i]->user);
			f->users[j].weight =
			    sh != NULL && sh->weight > 0 ? sh->weight : 1;
			f->users[j].usage =
			    sh != NULL && sh->usage > 0 ? sh->usage : 0;
			f->nusers++;
		}
		user_of[i] = j;
		f->users[j].njobs++;
	}
	/* Usage of the other groups counts in the total too. */
	for (i = 0; i < s->ngroups; i++)
		if (s->groups[i].usage > 0)
			f->usage_total += s->groups[i].usage;
	for (i = 0; i < f->ngroups; i++)
		f->weight_total += f->groups[i].weight;
	/* What each holds now (it orders only when there is a choice). */
	for (i = 0; i < s->nruns && (f->ngroups > 1 || f->nusers > 1); i++) {
		const struct run_rec *rr = &s->runs[i];
		double gpus;
		if (!rr->alive)
			continue;
		gpus = (double)__builtin_popcountll(rr->whole) +
		    (double)rr->milli / 1000.0;
		for (j = 0; j < f->ngroups; j++)
			if (f->groups[j].id == rr->group)
				f->groups[j].held +=
				    dominant(e, gpus, rr->cpu, rr->mem);
		for (j = 0; j < f->nusers; j++)
			if (f->users[j].id == rr->user &&
			    f->groups[f->users[j].first].id == rr->group)
				f->users[j].held +=
				    dominant(e, gpus, rr->cpu, rr->mem);
	}
	/* Each user's jobs together, in queue order. */
	for (j = 0, pos = 0; j < f->nusers; j++) {
		size_t g = f->users[j].first;
		f->users[j].first = pos;
		f->users[j].next_job = pos;
		pos += f->users[j].njobs;
		f->users[j].njobs = 0;
		f->users[j].taken = g; /* its group, kept here */
	}
	/*
	 * Interactive jobs first, then batch ones, each in queue order: a
	 * person waiting goes ahead of the user's own batch work, while fair
	 * share still decides which group and user goes next.
	 */
	for (int batch = 0; batch < 2; batch++)
		for (i = 0; i < nqueue; i++) {
			struct fs_user *u;
			if (!todo[i] || (queue[i]->interactive != 0) == batch)
				continue;
			u = &f->users[user_of[i]];
			f->order[u->first + u->njobs++] = i;
		}
	free(user_of);
	return 0;
}

static void
fair_fini(struct fair *f)
{
	free(f->groups);
	free(f->users);
	free(f->order);
}

static double
group_key(const struct fair *f, const struct fs_group *g)
{
	double u = f->usage_total > 0 ? g->usage / f->usage_total : 0;
	double w = f->weight_total > 0 ? g->weight / f->weight_total : 1;

	return (u + g->held) / w;
}

/* The next job in fair-share order, or NONE. OUT: *user. */
static size_t
fair_next(struct fair *f, size_t *user)
{
	size_t g, j, best_g = NONE, best_u = NONE;
	double key, best = 0, wsum, usum;

	for (g = 0; g < f->ngroups; g++) {
		int any = 0;
		for (j = 0; j < f->nusers; j++)
			if (f->users[j].taken == g &&
			    f->users[j].next_job <
			        f->users[j].first + f->users[j].njobs)
				any = 1;
		if (!any)
			continue;
		key = group_key(f, &f->groups[g]);
		if (best_g == NONE || key < best ||
		    (key == best && f->groups[g].id < f->groups[best_g].id)) {
			best = key;
			best_g = g;
		}
	}
	if (best_g == NONE)
		return NONE;
	wsum = usum = 0;
	for (j = 0; j < f->nusers; j++)
		if (f->users[j].taken == best_g) {
			wsum += f->users[j].weight;
			usum += f->users[j].usage;
		}
	for (j = 0; j < f->nusers; j++) {
		struct fs_user *u = &f->users[j];
		if (u->taken != best_g || u->next_job >= u->first + u->njobs)
			continue;
		key = ((usum > 0 ? u->usage / usum : 0) + u->held) /
		    (u->weight / wsum);
		if (best_u == NONE || key < best ||
		    (key == best && u->id < f->users[best_u].id)) {
			best = key;
			best_u = j;
		}
	}
	*user = best_u;
	return f->order[f->users[best_u].next_job++];
}

/* ---- the pass ---- */

static const char *
hold_words(const struct gp_sched_job *job, char *buf, size_t len)
{
	switch (job->hold) {
	case GP_SCHED_HOLD_BUDGET:
		return "held: budget exhausted";
	case GP_SCHED_HOLD_USER:
		return "held by its owner or an admin";
	default:
		snprintf(buf, len, "held: %s",
		    job->hold_reason != NULL ? job->hold_reason
		                             : "by the pool");
		return buf;
	}
}

/*
 * How many of job's parts could go somewhere now, reservation aside,
 * with this pass's own starts given back when without_pass (nothing is
 * changed in the end).
 */
static int
parts_fitting(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int without_pass, int64_t *other_group)
{
	struct part_req r;
	size_t i;
	int cnt = 0, parts = job_parts(job);

	*other_group = 0;
	if (without_pass)
		for (i = 0; i < s->nruns; i++) {
			struct run_rec *rr = &s->runs[i];
			if (!rr->alive || rr->pass_no != s->pass_no ||
			    rr->owner)
				continue;
			if (rr->group != job->group)
				*other_group = 1;
			run_release(s, i);
			rr->owner = 2; /* to take back below */
		}
	part_init(&s->e, job, &r);
	for (i = 0; i < s->e.nnodes && cnt < parts; i++)
		cnt += fits_node(s, &s->e.nodes[i], &r);
	if (without_pass)
		for (i = 0; i < s->nruns; i++)
			if (s->runs[i].owner == 2) {
				s->runs[i].owner = 0;
				run_restore(s, i);
			}
	return cnt;
}

/* 1 when GPU g of n could ever serve r: lent, of its model, big enough. */
static int
gpu_could_serve(struct engine *e, const struct eng_gpu *g,
    const struct part_req *r)
{
	const struct gp_sched_job *job = r->job;

	if (!g->lent && g->holder <= 0)
		return 0;
	if (r->gpu_mem > 0 && g->mem_total < r->gpu_mem)
		return 0;
	if (job->min_gpu_mem_mib > 0 && g->mem_total < job->min_gpu_mem_mib)
		return 0;
	if (job->min_capability > 0 && g->capability < job->min_capability)
		return 0;
	if (job->max_price > 0 && g->price > job->max_price)
		return 0;
	if (g->interactive && !job->interactive)
		return 0;
	return eng_model_matches(e, g->model, job->gpu_model);
}

/* CPUs in milli as words: "4 CPUs", "0.5 CPU". */
static void
cpu_words(int64_t milli, char *out, size_t len)
{
	snprintf(out, len, "%g CPU%s", (double)milli / 1000.0,
	    milli == 1000 ? "" : "s");
}

/*
 * What a job that found no room waits for, in words that name the
 * resource short on the nodes that could hold it when empty (up, its
 * time limit allowed, accepting it): "no node has 4 CPUs free now (at
 * most 0.5 CPUs free on a node that could hold it)", "no node has 1 GPU
 * of model A100 free now", "... 2 GPUs and 16 CPUs free at once". Empty
 * when no such node is short of anything (the generic words then).
 */
static void
short_resource(struct gp_sched_engine *s, const struct gp_sched_job *job,
    char *why, size_t len)
{
	struct engine *e = &s->e;
	struct part_req r, twin_r;
	struct gp_sched_job twin = *job;
	int64_t most_cpu = -1, most_mem = -1;
	int most_gpus = -1, nshort_cpu = 0, nshort_mem = 0, nshort_gpu = 0;
	int nkinds, g, could, now, kept = 0;
	char items[3][96], buf[32], out[512];
	size_t i, k = 0;

	why[0] = '\0';
	part_init(e, job, &r);
	/* The same job were it interactive: what owners keep from it. */
	twin.interactive = 1;
	twin_r = r;
	twin_r.job = &twin;
	for (i = 0; i < e->nnodes; i++) {
		const struct eng_node *n = &e->nodes[i];
		int cpu_short, mem_short, gpu_short;
		if (!n->up || !time_allowed(n, job) || n->cpu_total < r.cpu ||
		    (r.mem > 0 && n->mem_total != INT64_MAX &&
		        n->mem_total < r.mem))
			continue;
		if (e->accepts != NULL &&
		    !e->accepts(e->accepts_arg, n->src, job))
			continue;
		for (g = 0, could = 0, now = 0; g < n->ngpus && r.gpus > 0;
		     g++) {
			if (!gpu_could_serve(e, &n->gpus[g], &r)) {
				kept += !job->interactive &&
				    gpu_could_serve(e, &n->gpus[g], &twin_r);
				continue;
			}
			could++;
			now += eng_gpu_usable(e, n, g, &r);
		}
		if (could < r.gpus)
			continue;
		cpu_short = n->cpu_free < r.cpu;
		mem_short = r.mem > 0 && n->mem_total != INT64_MAX &&
		    n->mem_free < r.mem;
		gpu_short = now < r.gpus;
		nshort_cpu += cpu_short;
		nshort_mem += mem_short;
		nshort_gpu += gpu_short;
		if (n->cpu_free > most_cpu)
			most_cpu = n->cpu_free;
		if (n->mem_total != INT64_MAX && n->mem_free > most_mem)
			most_mem = n->mem_free;
		if (now > most_gpus)
			most_gpus = now;
	}
	if (nshort_gpu > 0) {
		if (r.shared)
			snprintf(items[k], sizeof(items[k]),
			    "a %.3g share of a GPU%s%s",
			    (double)r.milli / 1000.0,
			    job->gpu_model != NULL ? " of model " : "",
			    job->gpu_model != NULL ? job->gpu_model : "");
		else
			snprintf(items[k], sizeof(items[k]), "%d GPU%s%s%s",
			    r.gpus, r.gpus == 1 ? "" : "s",
			    job->gpu_model != NULL ? " of model " : "",
			    job->gpu_model != NULL ? job->gpu_model : "");
		k++;
	}
	if (nshort_cpu > 0) {
		cpu_words(r.cpu, items[k], sizeof(items[k]));
		k++;
	}
	if (nshort_mem > 0) {
		gp_format_bytes(r.mem * 1048576, buf, sizeof(buf));
		snprintf(items[k], sizeof(items[k]), "%s of memory", buf);
		k++;
	}
	nkinds = (int)k;
	if (nkinds == 0) {
		if (kept > 0)
			snprintf(why, len, "%d GPU%s that could hold it %s "
			    "kept for interactive jobs (interactive-gpus)", kept,
			    kept == 1 ? "" : "s", kept == 1 ? "is" : "are");
		return;
	}
	if (nkinds == 1) {
		char most[64];
		if (nshort_cpu > 0)
			cpu_words(most_cpu, most, sizeof(most));
		else if (nshort_mem > 0)
			gp_format_bytes(most_mem * 1048576, most, sizeof(most));
		else if (r.shared)
			gp_strlcpy(most, "no such share", sizeof(most));
		else
			snprintf(most, sizeof(most), "%d GPU%s", most_gpus,
			    most_gpus == 1 ? "" : "s");
		snprintf(out, sizeof(out),
		    "no node has %s free now (at most %s free on a node that "
		    "could hold it%s)",
		    items[0], most, kept > 0 ? "; more are kept for "
		    "interactive jobs" : "");
	} else {
		snprintf(out, sizeof(out),
		    "no node has %s%s%s%s%s free at once", items[0],
		    nkinds == 3 ? ", " : " and ", items[1],
		    nkinds == 3 ? " and " : "", nkinds == 3 ? items[2] : "");
	}
	gp_strlcpy(why, out, len);
}

/* Why job (that did not start) waits. */
static int
explain(struct gp_sched_engine *s, const struct gp_sched_job *job, int room,
    int is_head)
{
	char why[160];
	int parts = job_parts(job), now, before;
	int64_t other = 0;

	if (room && !is_head) {
		snprintf(why, sizeof(why),
		    "behind the reservation of job "
		    "%lld",
		    (long long)(s->resv.job != NULL ? s->resv.job->id : 0));
		return result_wait(s, job, GP_SCHED_WAIT_RESERVATION, why);
	}
	now = parts_fitting(s, job, 0, &other);
	if (parts > 1 && now > 0) {
		snprintf(why, sizeof(why),
		    "waiting for its gang: %d of %d "
		    "parts fit now",
		    now, parts);
		return result_wait(s, job, GP_SCHED_WAIT_GANG, why);
	}
	before = parts_fitting(s, job, 1, &other);
	if (before >= parts)
		return result_wait(s, job,
		    other ? GP_SCHED_WAIT_SHARE : GP_SCHED_WAIT_PRIORITY, NULL);
	if (parts > 1 && before > 0) {
		snprintf(why, sizeof(why),
		    "waiting for its gang: %d of %d "
		    "parts fit now",
		    before, parts);
		return result_wait(s, job, GP_SCHED_WAIT_GANG, why);
	}
	short_resource(s, job, why, sizeof(why));
	return result_wait(s, job, GP_SCHED_WAIT_RESOURCES,
	    why[0] != '\0' ? why : NULL);
}

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

static int
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
static const struct gp_sched_job **
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

/* ---- can it ever fit ---- */

static void
describe_gpus(const struct gp_sched_job *job, char *buf, size_t len)
{
	int n;

	n = snprintf(buf, len, "%d GPU%s", job->gpus,
	    job->gpus == 1 ? "" : "s");
	if (n < 0 || (size_t)n >= len)
		return;
	if (job->gpu_model != NULL && job->gpu_model[0] != '\0') {
		n += snprintf(buf + n, len - (size_t)n, " of model %s",
		    job->gpu_model);
		if (n < 0 || (size_t)n >= len)
			return;
	}
	if (job->gpu_mem_mib > 0)
		snprintf(buf + n, len - (size_t)n, " with %lld MiB",
		    (long long)job->gpu_mem_mib);
}

int
gp_sched_can_ever_fit(const struct gp_sched_node *nodes, size_t nnodes,
    const struct gp_sched_job *job, char *why, size_t whylen)
{
	char gpus[GP_SCHED_GPUS_MAX * 2 + 128];
	const struct gp_sched_node *most_gpus = NULL, *most_cpus = NULL,
	                           *most_mem = NULL;
	int best_gpus = -1, want = job_is_shared(job) ? 1 : job->gpus, i;
	int64_t cpu = job->cpu_milli;
	size_t k, fit = 0;
	int parts = job_parts(job);

	if (whylen > 0)
		why[0] = '\0';
	if (job->gpus > GP_SCHED_GPUS_MAX) {
		snprintf(why, whylen, "a job may use at most %d GPUs",
		    GP_SCHED_GPUS_MAX);
		return 0;
	}
	if (parts > GP_SCHED_PARTS_MAX) {
		snprintf(why, whylen, "a gang may have at most %d parts",
		    GP_SCHED_PARTS_MAX);
		return 0;
	}
	if (nnodes == 0) {
		snprintf(why, whylen, "no node is registered");
		return 0;
	}
	for (k = 0; k < nnodes; k++) {
		const struct gp_sched_node *node = &nodes[k];
		int n = 0;

		for (i = 0; i < node->ngpus; i++)
			n += node->gpus[i].job_id >= 0 &&
			    gp_sched_gpu_matches(&node->gpus[i], job);
		if (n > best_gpus ||
		    (n == best_gpus && node->id < most_gpus->id)) {
			best_gpus = n;
			most_gpus = node;
		}
		if (n < want)
			continue;
		if (most_cpus == NULL || node->cpu_milli > most_cpus->cpu_milli)
			most_cpus = node;
		if (node->cpu_milli < cpu)
			continue;
		if (most_mem == NULL || node->mem_mib <= 0 ||
		    (most_mem->mem_mib > 0 &&
		        node->mem_mib > most_mem->mem_mib))
			most_mem = node;
		if (job->mem_mib > 0 && node->mem_mib > 0 &&
		    node->mem_mib < job->mem_mib)
			continue;
		if (++fit >= (size_t)parts)
			return 1;
	}
	describe_gpus(job, gpus, sizeof(gpus));
	if (fit > 0)
		snprintf(why, whylen,
		    "a gang of %d parts needs %d nodes with "
		    "%s; the pool has %zu",
		    parts, parts, gpus, fit);
	else if (most_cpus == NULL)
		snprintf(why, whylen,
		    "no node has %s; the largest offer is "
		    "%d on node %lld",
		    gpus, best_gpus, (long long)most_gpus->id);
	else if (most_mem == NULL)
		snprintf(why, whylen,
		    "no node with %s has %g CPUs; the "
		    "largest offer is %g CPUs on node %lld",
		    gpus, (double)cpu / 1000.0,
		    (double)most_cpus->cpu_milli / 1000.0,
		    (long long)most_cpus->id);
	else
		snprintf(why, whylen,
		    "no node with %s and %g CPUs has %lld "
		    "MiB of memory; the largest offer is "
		    "%lld MiB on node %lld",
		    gpus, (double)cpu / 1000.0, (long long)job->mem_mib,
		    (long long)most_mem->mem_mib, (long long)most_mem->id);
	return 0;
}
