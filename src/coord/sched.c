/*
 * sched.c: the scheduler (see sched.h): best fit with EASY backfill over
 * arrays the caller owns. A plan works on its own copy of what is free on
 * each node (CPUs, memory, GPUs) and takes from it as it places jobs, so
 * resources only shrink while it runs. That is what the shortcuts rely on:
 *
 *   - only nodes that are up and have a free CPU are scanned ("candidates";
 *     every job is taken to need at least one CPU), and the queue is left
 *     as soon as no candidate remains;
 *   - candidates sit in lists by their count of free GPUs, scanned from
 *     the job's count up: the first list with room holds the best fit;
 *   - a node whose cheapest free GPUs cannot beat the best offer so far
 *     is passed over without matching its GPUs;
 *   - a job shaped like one that found no room at all is skipped at once;
 *   - GPU models are interned once per plan, so that a job matches each
 *     distinct model string once rather than once per GPU.
 *
 * The reservation of EASY backfill is computed once, for the first job
 * that cannot start, from the time limits of what holds each node (the
 * running jobs and the jobs this plan starts). A reservation that only
 * the end of jobs without a time limit could satisfy lies at INT64_MAX:
 * jobs with a time limit end before it, jobs without one do not.
 */
#include "sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"

#define END_NEVER     INT64_MAX
#define FAILED_SHAPES 32
#define NBUCKETS      (GP_SCHED_GPUS_MAX + 1) /* the last: 64 or more */
#define NONE	      ((size_t)-1)

struct gpu_state {
	int64_t end_ms;		 /* when it is free: now_ms if it is */
	int model;		 /* in plan.models, -1 when NULL */
	unsigned char taken;	 /* by a running job or by this plan */
	unsigned char reserved;	 /* held for the reservation */
};

struct node_state {
	const struct gp_sched_node *node;
	struct gpu_state *gpus;
	int free_cpus;
	int free_gpus;
	int64_t free_mem;	/* INT64_MAX when memory is no constraint */
	int64_t min_free_gpu_mem; /* of its free GPUs */
	int64_t max_gpu_mem;	/* of all its GPUs */
	int model;		/* of all its GPUs; -1: none, -2: mixed */
	int bucket;		/* candidate list it is on, -1: none */
	size_t prev, next;	/* on that list, NONE at the ends */
};

/* Something that gives resources back to a node when it ends. */
struct release {
	size_t node;
	int cpus;
	int64_t mem_mib;
	int64_t end_ms;
};

/* The reservation EASY backfill holds for the first job that waits. */
struct reservation {
	struct node_state *ns; /* NULL: none */
	int64_t start_ms;
	int extra_cpus;	       /* left over at start_ms once the job is in */
	int64_t extra_mem;
};

/* Where a job could go on one node. */
struct offer {
	int leftover;	  /* free GPUs left on the node */
	int64_t gpu_mem;  /* the memory of the GPUs it would use */
	int ngpus;
	int gpus[GP_SCHED_GPUS_MAX]; /* positions in the node's GPU array */
};

struct id_index {
	int64_t id;
	size_t index;
};

struct plan {
	const struct gp_sched_input *in;
	struct node_state *nodes;
	struct gpu_state *gpus;
	struct id_index *by_id;		     /* nodes sorted by id */
	struct gp_sched_running *by_job;     /* running sorted by job id */
	size_t buckets[NBUCKETS]; /* candidates by free GPUs: first node */
	size_t ncandidates;
	int64_t candidate_gpus; /* free GPUs on the candidates */
	struct release *started; /* what this plan starts */
	size_t nstarted, capstarted;
	struct reservation resv;
	const struct gp_sched_job *failed[FAILED_SHAPES];
	size_t nfailed, nextfailed;
	struct gp_sched_assignment *out;
	size_t nout, capout;
	/* Distinct GPU models, and whether they match the current job. */
	const char **models;
	size_t nmodels;
	unsigned *match_gen;
	unsigned char *match;
	unsigned gen;
};

int
gp_sched_gpu_matches(const struct gp_sched_gpu *gpu,
    const struct gp_sched_job *job)
{
	if (job->gpu_mem_mib > 0 && gpu->mem_mib < job->gpu_mem_mib)
		return 0;
	if (job->gpu_model != NULL && job->gpu_model[0] != '\0' &&
	    (gpu->model == NULL || strcasestr(gpu->model, job->gpu_model) ==
		NULL))
		return 0;
	return 1;
}

static int
job_cpus(const struct gp_sched_job *job)
{
	return job->cpus > 0 ? job->cpus : 1;
}

static int64_t
job_end(const struct gp_sched_input *in, const struct gp_sched_job *job)
{
	if (job->time_limit_s <= 0 ||
	    job->time_limit_s > (END_NEVER - in->now_ms) / 1000)
		return END_NEVER;
	return in->now_ms + job->time_limit_s * 1000;
}

static int
cmp_id_index(const void *a, const void *b)
{
	const struct id_index *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int
cmp_running_job(const void *a, const void *b)
{
	const struct gp_sched_running *x = a, *y = b;

	return x->job_id < y->job_id ? -1 : x->job_id > y->job_id;
}

static struct node_state *
node_by_id(struct plan *p, int64_t id)
{
	size_t lo = 0, hi = p->in->nnodes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->by_id[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->in->nnodes && p->by_id[lo].id == id)
		return &p->nodes[p->by_id[lo].index];
	return NULL;
}

/* When the running job frees its GPUs; never when it is not listed. */
static int64_t
running_end(const struct plan *p, int64_t job_id)
{
	size_t lo = 0, hi = p->in->nrunning;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->by_job[mid].job_id < job_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->in->nrunning && p->by_job[lo].job_id == job_id)
		return p->by_job[lo].end_ms;
	return END_NEVER;
}

/* Puts an up node with a free CPU on the list for its free GPUs. */
static void
candidate_add(struct plan *p, struct node_state *ns)
{
	int b = ns->free_gpus < NBUCKETS - 1 ? ns->free_gpus : NBUCKETS - 1;
	size_t i = (size_t)(ns - p->nodes);

	ns->bucket = b;
	ns->prev = NONE;
	ns->next = p->buckets[b];
	if (ns->next != NONE)
		p->nodes[ns->next].prev = i;
	p->buckets[b] = i;
	p->ncandidates++;
	p->candidate_gpus += ns->free_gpus;
}

static void
candidate_remove(struct plan *p, struct node_state *ns)
{
	if (ns->bucket < 0)
		return;
	if (ns->prev != NONE)
		p->nodes[ns->prev].next = ns->next;
	else
		p->buckets[ns->bucket] = ns->next;
	if (ns->next != NONE)
		p->nodes[ns->next].prev = ns->prev;
	ns->bucket = -1;
	p->ncandidates--;
	p->candidate_gpus -= ns->free_gpus;
}

static void
update_min_free_gpu_mem(struct node_state *ns)
{
	int i;

	ns->min_free_gpu_mem = INT64_MAX;
	for (i = 0; i < ns->node->ngpus; i++)
		if (!ns->gpus[i].taken &&
		    ns->node->gpus[i].mem_mib < ns->min_free_gpu_mem)
			ns->min_free_gpu_mem = ns->node->gpus[i].mem_mib;
}

static uint64_t
hash_string(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

/* Numbers each distinct GPU model string: gpu_state.model. */
static int
intern_models(struct plan *p, size_t ngpus)
{
	const struct gp_sched_input *in = p->in;
	size_t size = 16, i, h;
	size_t *table;
	int j;

	while (size < 2 * ngpus)
		size *= 2;
	table = malloc(size * sizeof(*table));
	p->models = calloc(ngpus + 1, sizeof(*p->models));
	p->match_gen = calloc(ngpus + 1, sizeof(*p->match_gen));
	p->match = calloc(ngpus + 1, sizeof(*p->match));
	if (table == NULL || p->models == NULL || p->match_gen == NULL ||
	    p->match == NULL) {
		free(table);
		return GP_ENOMEM;
	}
	for (i = 0; i < size; i++)
		table[i] = NONE;
	for (i = 0; i < in->nnodes; i++) {
		const struct gp_sched_node *node = &in->nodes[i];

		for (j = 0; j < node->ngpus; j++) {
			const char *model = node->gpus[j].model;

			if (model == NULL) {
				p->nodes[i].gpus[j].model = -1;
				continue;
			}
			h = (size_t)hash_string(model) & (size - 1);
			while (table[h] != NONE &&
			    strcmp(p->models[table[h]], model) != 0)
				h = (h + 1) & (size - 1);
			if (table[h] == NONE) {
				table[h] = p->nmodels;
				p->models[p->nmodels++] = model;
			}
			p->nodes[i].gpus[j].model = (int)table[h];
		}
	}
	for (i = 0; i < in->nnodes; i++) {
		struct node_state *ns = &p->nodes[i];

		ns->model = ns->node->ngpus > 0 ? ns->gpus[0].model : -1;
		for (j = 0; j < ns->node->ngpus; j++) {
			if (ns->gpus[j].model != ns->model)
				ns->model = -2;
			if (ns->node->gpus[j].mem_mib > ns->max_gpu_mem)
				ns->max_gpu_mem = ns->node->gpus[j].mem_mib;
		}
	}
	free(table);
	return 0;
}

/* 1 when model number m (-1: none) matches the job's model. */
static int
model_matches(struct plan *p, int m, const struct gp_sched_job *job)
{
	if (job->gpu_model == NULL || job->gpu_model[0] == '\0')
		return 1;
	if (m < 0)
		return 0;
	if (p->match_gen[m] != p->gen) {
		p->match_gen[m] = p->gen;
		p->match[m] = strcasestr(p->models[m], job->gpu_model) != NULL;
	}
	return p->match[m];
}

/* gp_sched_gpu_matches, with the model's answer kept for the job. */
static int
gpu_matches(struct plan *p, const struct node_state *ns, int i,
    const struct gp_sched_job *job)
{
	if (job->gpu_mem_mib > 0 && ns->node->gpus[i].mem_mib <
	    job->gpu_mem_mib)
		return 0;
	return model_matches(p, ns->gpus[i].model, job);
}

static int
plan_init(struct plan *p, const struct gp_sched_input *in)
{
	size_t i, j, ngpus = 0;
	struct gpu_state *g;

	memset(p, 0, sizeof(*p));
	p->in = in;
	for (i = 0; i < in->nnodes; i++)
		ngpus += (size_t)(in->nodes[i].ngpus > 0 ? in->nodes[i].ngpus :
							    0);
	p->nodes = calloc(in->nnodes + 1, sizeof(*p->nodes));
	p->gpus = calloc(ngpus + 1, sizeof(*p->gpus));
	p->by_id = calloc(in->nnodes + 1, sizeof(*p->by_id));
	p->by_job = calloc(in->nrunning + 1, sizeof(*p->by_job));
	for (i = 0; i < NBUCKETS; i++)
		p->buckets[i] = NONE;
	if (p->nodes == NULL || p->gpus == NULL || p->by_id == NULL ||
	    p->by_job == NULL)
		return GP_ENOMEM;

	for (i = 0; i < in->nnodes; i++) {
		p->by_id[i].id = in->nodes[i].id;
		p->by_id[i].index = i;
	}
	qsort(p->by_id, in->nnodes, sizeof(*p->by_id), cmp_id_index);
	if (in->nrunning > 0)
		memcpy(p->by_job, in->running,
		    in->nrunning * sizeof(*p->by_job));
	qsort(p->by_job, in->nrunning, sizeof(*p->by_job), cmp_running_job);

	g = p->gpus;
	for (i = 0; i < in->nnodes; i++) {
		const struct gp_sched_node *node = &in->nodes[i];
		struct node_state *ns = &p->nodes[i];

		ns->node = node;
		ns->gpus = g;
		ns->free_cpus = node->cpus;
		ns->free_mem = node->mem_mib > 0 ? node->mem_mib : INT64_MAX;
		ns->bucket = -1;
		for (j = 0; j < (size_t)(node->ngpus > 0 ? node->ngpus : 0);
		     j++, g++) {
			if (node->gpus[j].job_id != 0) {
				g->taken = 1;
				g->end_ms = running_end(p, node->gpus[j].job_id);
			} else {
				g->end_ms = in->now_ms;
				ns->free_gpus++;
			}
		}
	}
	for (i = 0; i < in->nrunning; i++) {
		const struct gp_sched_running *r = &in->running[i];
		struct node_state *ns = node_by_id(p, r->node_id);

		if (ns == NULL)
			continue;
		ns->free_cpus -= r->cpus;
		if (ns->free_mem != INT64_MAX && r->mem_mib > 0)
			ns->free_mem -= r->mem_mib;
	}
	for (i = 0; i < in->nnodes; i++) {
		struct node_state *ns = &p->nodes[i];

		if (!ns->node->up || ns->free_cpus < 1)
			continue;
		update_min_free_gpu_mem(ns);
		candidate_add(p, ns);
	}
	return intern_models(p, ngpus);
}

static void
plan_fini(struct plan *p)
{
	free(p->nodes);
	free(p->gpus);
	free(p->by_id);
	free(p->by_job);
	free(p->started);
	free(p->models);
	free(p->match_gen);
	free(p->match);
}

/* Two jobs ask for the same resources now (time limits aside). */
static int
same_shape(const struct gp_sched_job *a, const struct gp_sched_job *b)
{
	const char *ma = a->gpu_model != NULL ? a->gpu_model : "";
	const char *mb = b->gpu_model != NULL ? b->gpu_model : "";

	return a->gpus == b->gpus && a->gpu_mem_mib == b->gpu_mem_mib &&
	    job_cpus(a) == job_cpus(b) && a->mem_mib == b->mem_mib &&
	    strcasecmp(ma, mb) == 0;
}

static int
shape_failed(const struct plan *p, const struct gp_sched_job *job)
{
	size_t i;

	for (i = 0; i < p->nfailed; i++)
		if (same_shape(p->failed[i], job))
			return 1;
	return 0;
}

static void
remember_failed(struct plan *p, const struct gp_sched_job *job)
{
	p->failed[p->nextfailed] = job;
	p->nextfailed = (p->nextfailed + 1) % FAILED_SHAPES;
	if (p->nfailed < FAILED_SHAPES)
		p->nfailed++;
}

/* The owner's max-job-time: a job must have a time limit within it. */
static int
time_allowed(const struct gp_sched_node *node, const struct gp_sched_job *job)
{
	return node->max_time_s <= 0 ||
	    (job->time_limit_s > 0 && job->time_limit_s <= node->max_time_s);
}

/*
 * Fills o with the job's best GPUs on the node (the free matching ones
 * with the least memory; with avoid_reserved, not the reserved ones).
 * Returns 1 when the job fits there now, else 0.
 */
static int
node_offer(struct plan *p, const struct node_state *ns,
    const struct gp_sched_job *job, int avoid_reserved, struct offer *o)
{
	const struct gp_sched_node *node = ns->node;
	int cpus = job_cpus(job), i, k, n = 0;

	if (ns->free_cpus < cpus || ns->free_gpus < job->gpus ||
	    !time_allowed(node, job) || !gp_sched_node_accepts(node, job))
		return 0;
	if (job->mem_mib > 0 && ns->free_mem != INT64_MAX &&
	    ns->free_mem < job->mem_mib)
		return 0;
	if (avoid_reserved && (p->resv.extra_cpus < cpus ||
				  (job->mem_mib > 0 &&
				      p->resv.extra_mem < job->mem_mib)))
		return 0;
	o->leftover = ns->free_gpus - job->gpus;
	o->gpu_mem = 0;
	o->ngpus = job->gpus;
	if (job->gpus == 0)
		return 1;
	/* Whole nodes of the wrong model or too small, at once. */
	if (job->gpu_mem_mib > ns->max_gpu_mem ||
	    (ns->model != -2 && !model_matches(p, ns->model, job)))
		return 0;
	for (i = 0; i < node->ngpus; i++) {
		const struct gpu_state *g = &ns->gpus[i];
		int64_t mem = node->gpus[i].mem_mib;

		if (g->taken || (avoid_reserved && g->reserved) ||
		    !gpu_matches(p, ns, i, job))
			continue;
		/* Keep the job->gpus smallest, sorted by memory. */
		if (n == job->gpus &&
		    node->gpus[o->gpus[n - 1]].mem_mib <= mem)
			continue;
		k = n < job->gpus ? n++ : n - 1;
		while (k > 0 && node->gpus[o->gpus[k - 1]].mem_mib > mem) {
			o->gpus[k] = o->gpus[k - 1];
			k--;
		}
		o->gpus[k] = i;
	}
	if (n < job->gpus)
		return 0;
	for (i = 0; i < n; i++)
		o->gpu_mem += node->gpus[o->gpus[i]].mem_mib;
	return 1;
}

/* 1 when offer a on node na beats offer b on node nb. */
static int
better(const struct offer *a, const struct node_state *na,
    const struct offer *b, const struct node_state *nb)
{
	if (a->leftover != b->leftover)
		return a->leftover < b->leftover;
	if (a->gpu_mem != b->gpu_mem)
		return a->gpu_mem < b->gpu_mem;
	return na->node->id < nb->node->id;
}

static int
cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

static int
assign(struct plan *p, const struct gp_sched_job *job, struct node_state *ns,
    const struct offer *o, int uses_extra)
{
	struct gp_sched_assignment *a;
	struct release *r;
	int64_t end = job_end(p->in, job);
	int i, cpus = job_cpus(job);

	if (p->nout == p->capout) {
		size_t cap = p->capout ? p->capout * 2 : 16;
		a = realloc(p->out, cap * sizeof(*a));
		if (a == NULL)
			return GP_ENOMEM;
		p->out = a;
		p->capout = cap;
	}
	if (p->nstarted == p->capstarted) {
		size_t cap = p->capstarted ? p->capstarted * 2 : 16;
		r = realloc(p->started, cap * sizeof(*r));
		if (r == NULL)
			return GP_ENOMEM;
		p->started = r;
		p->capstarted = cap;
	}
	a = &p->out[p->nout++];
	memset(a, 0, sizeof(*a));
	a->job_id = job->id;
	a->node_id = ns->node->id;
	a->ngpus = o->ngpus;
	for (i = 0; i < o->ngpus; i++) {
		struct gpu_state *g = &ns->gpus[o->gpus[i]];
		g->taken = 1;
		g->end_ms = end;
		a->gpus[i] = ns->node->gpus[o->gpus[i]].index;
	}
	qsort(a->gpus, (size_t)a->ngpus, sizeof(a->gpus[0]), cmp_int);
	r = &p->started[p->nstarted++];
	r->node = (size_t)(ns - p->nodes);
	r->cpus = cpus;
	r->mem_mib = job->mem_mib > 0 ? job->mem_mib : 0;
	r->end_ms = end;

	candidate_remove(p, ns); /* to come back on another list */
	ns->free_gpus -= o->ngpus;
	ns->free_cpus -= cpus;
	if (ns->free_mem != INT64_MAX && job->mem_mib > 0)
		ns->free_mem -= job->mem_mib;
	if (uses_extra) {
		p->resv.extra_cpus -= cpus;
		if (job->mem_mib > 0 && p->resv.extra_mem != INT64_MAX)
			p->resv.extra_mem -= job->mem_mib;
	}
	if (ns->free_cpus >= 1) {
		update_min_free_gpu_mem(ns);
		candidate_add(p, ns);
	}
	return 0;
}

/*
 * Places job on its best node if it can start now without delaying the
 * reservation. OUT: *placed; *room: 1 when some node had room for it now,
 * reservation aside. Returns 0 or GP_ENOMEM.
 */
static int
try_place(struct plan *p, const struct gp_sched_job *job, int *placed,
    int *room)
{
	struct offer best, o;
	struct node_state *best_ns = NULL;
	int64_t end = job_end(p->in, job), least;
	int best_extra = 0, b, extra;
	size_t i;

	*placed = *room = 0;
	memset(&best, 0, sizeof(best));
	p->gen++; /* a new job: forget which models matched */
	for (b = job->gpus; b < NBUCKETS; b++) {
		for (i = p->buckets[b]; i != NONE; i = p->nodes[i].next) {
			struct node_state *ns = &p->nodes[i];

			/* The least GPU memory it could use there. */
			least = job->gpus > 0 ?
			    job->gpus * ns->min_free_gpu_mem : 0;
			if (best_ns != NULL &&
			    (ns->free_gpus - job->gpus > best.leftover ||
				(ns->free_gpus - job->gpus == best.leftover &&
				    (least > best.gpu_mem ||
					(least == best.gpu_mem &&
					    ns->node->id > best_ns->node->id)))))
				continue;
			if (!node_offer(p, ns, job, 0, &o))
				continue;
			*room = 1;
			extra = 0;
			if (ns == p->resv.ns &&
			    !(end != END_NEVER && end <= p->resv.start_ms)) {
				/* It would run past the reservation here. */
				if (!node_offer(p, ns, job, 1, &o))
					continue;
				extra = 1;
			}
			if (best_ns == NULL || better(&o, ns, &best, best_ns)) {
				best = o;
				best_ns = ns;
				best_extra = extra;
			}
		}
		/* Later lists leave more GPUs over (but the last mixes). */
		if (best_ns != NULL && b < NBUCKETS - 1)
			break;
	}
	if (best_ns == NULL)
		return 0;
	*placed = 1;
	return assign(p, job, best_ns, &best, best_extra);
}

static int
cmp_release(const void *a, const void *b)
{
	const struct release *x = a, *y = b;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->end_ms < y->end_ms ? -1 : x->end_ms > y->end_ms;
}

static int
cmp_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The earliest time the node could hold the job, given what ends when
 * (rel[0..nrel), sorted by end); -1 when never.
 */
static int64_t
node_start_time(const struct plan *p, const struct node_state *ns,
    const struct gp_sched_job *job, const struct release *rel, size_t nrel,
    int64_t *ends)
{
	const struct gp_sched_node *node = ns->node;
	int64_t t = p->in->now_ms, mem;
	int cpus = job_cpus(job), have_cpus, i, n = 0;
	size_t r;

	if (!node->up || node->cpus < cpus || !time_allowed(node, job) ||
	    (node->mem_mib > 0 && job->mem_mib > node->mem_mib))
		return -1;
	for (i = 0; i < node->ngpus; i++)
		if (gp_sched_gpu_matches(&node->gpus[i], job))
			ends[n++] = ns->gpus[i].end_ms;
	if (n < job->gpus)
		return -1;
	if (job->gpus > 0) {
		qsort(ends, (size_t)n, sizeof(*ends), cmp_int64);
		if (ends[job->gpus - 1] > t)
			t = ends[job->gpus - 1];
	}
	have_cpus = ns->free_cpus;
	for (r = 0; r < nrel && have_cpus < cpus; r++)
		have_cpus += rel[r].cpus;
	if (have_cpus < cpus)
		return -1;
	if (r > 0 && rel[r - 1].end_ms > t)
		t = rel[r - 1].end_ms;
	if (job->mem_mib > 0 && ns->free_mem != INT64_MAX) {
		mem = ns->free_mem;
		for (r = 0; r < nrel && mem < job->mem_mib; r++)
			mem += rel[r].mem_mib;
		if (mem < job->mem_mib)
			return -1;
		if (r > 0 && rel[r - 1].end_ms > t)
			t = rel[r - 1].end_ms;
	}
	return t;
}

/* Reserved GPUs: those ending last go first, so that free ones stay. */
struct reserve_pick {
	int64_t end_ms;
	int64_t mem_mib;
	int pos;
};

static int
cmp_reserve_pick(const void *a, const void *b)
{
	const struct reserve_pick *x = a, *y = b;

	if (x->end_ms != y->end_ms)
		return x->end_ms > y->end_ms ? -1 : 1;
	if (x->mem_mib != y->mem_mib)
		return x->mem_mib < y->mem_mib ? -1 : 1;
	return x->pos - y->pos;
}

/*
 * Sets the reservation for job, the first that cannot start: the node
 * where it could start the soonest (then the lowest id). Leaves none when
 * no node that is up could ever hold it. Returns 0 or GP_ENOMEM.
 */
static int
reserve(struct plan *p, const struct gp_sched_job *job)
{
	const struct gp_sched_input *in = p->in;
	struct release *rel = NULL;
	struct reserve_pick *picks = NULL;
	size_t *first = NULL, nrel = 0, i, r, best = 0;
	int64_t *ends = NULL, t, best_t = -1;
	struct node_state *ns;
	int maxgpus = 1, n, rc = GP_ENOMEM;

	for (i = 0; i < in->nnodes; i++)
		if (in->nodes[i].ngpus > maxgpus)
			maxgpus = in->nodes[i].ngpus;
	rel = calloc(in->nrunning + p->nstarted + 1, sizeof(*rel));
	first = calloc(in->nnodes + 1, sizeof(*first));
	ends = calloc((size_t)maxgpus, sizeof(*ends));
	picks = calloc((size_t)maxgpus, sizeof(*picks));
	if (rel == NULL || first == NULL || ends == NULL || picks == NULL)
		goto fail;
	for (i = 0; i < in->nrunning; i++) {
		ns = node_by_id(p, in->running[i].node_id);
		if (ns == NULL)
			continue;
		rel[nrel].node = (size_t)(ns - p->nodes);
		rel[nrel].cpus = in->running[i].cpus;
		rel[nrel].mem_mib = in->running[i].mem_mib > 0 ?
		    in->running[i].mem_mib : 0;
		rel[nrel++].end_ms = in->running[i].end_ms;
	}
	for (i = 0; i < p->nstarted; i++)
		rel[nrel++] = p->started[i];
	qsort(rel, nrel, sizeof(*rel), cmp_release);
	for (i = 0, r = 0; i <= in->nnodes; i++) {
		while (r < nrel && rel[r].node < i)
			r++;
		first[i] = r;
	}
	for (i = 0; i < in->nnodes; i++) {
		ns = &p->nodes[i];
		t = node_start_time(p, ns, job, rel + first[i],
		    first[i + 1] - first[i], ends);
		if (t < 0)
			continue;
		if (best_t < 0 || t < best_t ||
		    (t == best_t && ns->node->id < p->nodes[best].node->id)) {
			best_t = t;
			best = i;
		}
	}
	rc = 0;
	if (best_t < 0)
		goto fail;

	/* What is free on the node at best_t, and what the job takes. */
	ns = &p->nodes[best];
	p->resv.ns = ns;
	p->resv.start_ms = best_t;
	p->resv.extra_cpus = ns->free_cpus - job_cpus(job);
	p->resv.extra_mem = ns->free_mem;
	for (r = first[best]; r < first[best + 1]; r++) {
		if (rel[r].end_ms > best_t)
			break;
		p->resv.extra_cpus += rel[r].cpus;
		if (p->resv.extra_mem != INT64_MAX)
			p->resv.extra_mem += rel[r].mem_mib;
	}
	if (p->resv.extra_mem != INT64_MAX && job->mem_mib > 0)
		p->resv.extra_mem -= job->mem_mib;
	for (n = 0, i = 0; i < (size_t)ns->node->ngpus; i++) {
		if (ns->gpus[i].end_ms > best_t ||
		    !gp_sched_gpu_matches(&ns->node->gpus[i], job))
			continue;
		picks[n].end_ms = ns->gpus[i].end_ms;
		picks[n].mem_mib = ns->node->gpus[i].mem_mib;
		picks[n++].pos = (int)i;
	}
	qsort(picks, (size_t)n, sizeof(*picks), cmp_reserve_pick);
	for (i = 0; i < (size_t)job->gpus && (int)i < n; i++)
		ns->gpus[picks[i].pos].reserved = 1;
fail:
	free(rel);
	free(first);
	free(ends);
	free(picks);
	return rc;
}

int
gp_sched_plan(const struct gp_sched_input *in,
    struct gp_sched_assignment **out, size_t *nout)
{
	struct plan p;
	size_t q;
	int rc, placed, room;

	*out = NULL;
	*nout = 0;
	if ((rc = plan_init(&p, in)) != 0)
		goto fail;
	for (q = 0; q < in->nqueue && p.ncandidates > 0; q++) {
		const struct gp_sched_job *job = &in->queue[q];

		if (job->gpus < 0 || job->gpus > GP_SCHED_GPUS_MAX)
			continue;
		if (shape_failed(&p, job))
			continue;
		room = 0;
		if (job->gpus <= p.candidate_gpus) {
			if ((rc = try_place(&p, job, &placed, &room)) != 0)
				goto fail;
			if (placed)
				continue;
		}
		/*
		 * The first job that waits gets the reservation; when no up
		 * node could ever hold it, the next one that waits does.
		 */
		if (p.resv.ns == NULL && (rc = reserve(&p, job)) != 0)
			goto fail;
		if (!room)
			remember_failed(&p, job);
	}
	*out = p.out;
	*nout = p.nout;
	p.out = NULL;
	rc = 0;
fail:
	free(p.out);
	plan_fini(&p);
	return rc;
}

static void
describe_gpus(const struct gp_sched_job *job, char *buf, size_t len)
{
	int n;

	n = snprintf(buf, len, "%d GPU%s", job->gpus, job->gpus == 1 ? "" :
									"s");
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
	int best_gpus = -1, cpus = job_cpus(job), i;
	size_t k;

	if (whylen > 0)
		why[0] = '\0';
	if (job->gpus > GP_SCHED_GPUS_MAX) {
		snprintf(why, whylen, "a job may use at most %d GPUs",
		    GP_SCHED_GPUS_MAX);
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
			n += gp_sched_gpu_matches(&node->gpus[i], job);
		if (n > best_gpus ||
		    (n == best_gpus && node->id < most_gpus->id)) {
			best_gpus = n;
			most_gpus = node;
		}
		if (n < job->gpus)
			continue;
		if (most_cpus == NULL || node->cpus > most_cpus->cpus)
			most_cpus = node;
		if (node->cpus < cpus)
			continue;
		if (most_mem == NULL || node->mem_mib <= 0 ||
		    (most_mem->mem_mib > 0 &&
			node->mem_mib > most_mem->mem_mib))
			most_mem = node;
		if (job->mem_mib > 0 && node->mem_mib > 0 &&
		    node->mem_mib < job->mem_mib)
			continue;
		return 1;
	}
	describe_gpus(job, gpus, sizeof(gpus));
	if (most_cpus == NULL)
		snprintf(why, whylen, "no node has %s; the largest offer is "
				      "%d on node %lld", gpus, best_gpus,
		    (long long)most_gpus->id);
	else if (most_mem == NULL)
		snprintf(why, whylen, "no node with %s has %d CPUs; the "
				      "largest offer is %d CPUs on node %lld",
		    gpus, cpus, most_cpus->cpus, (long long)most_cpus->id);
	else
		snprintf(why, whylen, "no node with %s and %d CPUs has %lld "
				      "MiB of memory; the largest offer is "
				      "%lld MiB on node %lld",
		    gpus, cpus, (long long)job->mem_mib,
		    (long long)most_mem->mem_mib, (long long)most_mem->id);
	return 0;
}
