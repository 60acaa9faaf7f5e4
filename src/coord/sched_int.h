/*
 * sched_int.h: the scheduler's insides, shared by sched.c (the engine,
 * the pass: ordering, preemption, backfill, gangs, wait reasons) and
 * sched_policy.c (the placement policies). Not for other callers: they
 * use sched.h.
 */
#ifndef GP_SCHED_INT_H
#define GP_SCHED_INT_H

#include <stdint.h>

#include "sched.h"

#define END_NEVER INT64_MAX
#define NONE      ((size_t)-1)

/* One GPU of the engine's world. */
struct eng_gpu {
	int64_t holder;   /* job holding it whole; 0: none; -1: not lent */
	int milli_free;   /* share free: 1000 when nobody shares it */
	int64_t mem_free; /* GPU memory free of shared jobs */
	int64_t mem_total;
	int nshared;
	int model; /* interned, -1: none */
	int capability;
	int64_t price;
	int index;              /* the node's own GPU index */
	int64_t end_ms;         /* when it is wholly free (now_ms if it is) */
	unsigned char reserved; /* held for the reservation */
	unsigned char lent;     /* 0: not lent (holder -1 unless held) */
	unsigned char interactive; /* kept for interactive jobs only */
};

struct eng_node {
	const struct gp_sched_node *src;
	int64_t id;
	int up;
	int64_t group;
	int64_t max_time_s;
	int64_t cpu_total, mem_total; /* mem_total INT64_MAX: unknown */
	int64_t cpu_free, mem_free;
	int ngpus;
	struct eng_gpu *gpus;
	int nfree;          /* GPUs wholly free */
	int64_t milli_free; /* share free over GPUs not held whole */
	int model;          /* of all its GPUs; -1: none, -2: mixed */
	int64_t max_gpu_mem;
	int same_mem;        /* all its GPUs have the same memory */
	unsigned version;    /* bumped on every change */
	int resv;            /* index in the reservation's nodes, -1: none */
	int gang_mark;       /* used by the part being placed (gangs) */
	size_t cls;          /* its class of like nodes, NONE: down */
	size_t cprev, cnext; /* the class's other members */
	size_t runs;         /* its run records (sched.c), NONE: none */
	int own_gpus;        /* gpus is its own allocation (node_set) */
};

/*
 * Nodes in the same state (free CPUs, memory, GPUs, limits) score the
 * same under a deterministic policy: the scan visits one per class (the
 * lowest id), and classes sit in buckets by their free GPU share.
 */
#define NBUCKETS 66 /* by GPU milli free / 1000; the last: 65 and more */

struct node_class {
	uint64_t sig;
	size_t first; /* members, NONE: none */
	size_t count;
	size_t rep;  /* the member with the lowest id, NONE: unknown */
	int bucket;  /* -1: not listed (empty) */
	size_t bpos; /* its place in the bucket */
	int wbucket; /* by wholly free GPUs, -1: not listed */
	size_t wpos;
};

/* A bucket: its classes, packed, with what rules most of them out. */
struct bucket_entry {
	int64_t cpu_free, mem_free;
	size_t cls;
};

struct bucket {
	struct bucket_entry *v;
	size_t n, cap;
};

/* A job's part as placement sees it. */
struct part_req {
	const struct gp_sched_job *job;
	int gpus;  /* GPUs it takes */
	int milli; /* per GPU: 1000 whole, else a share */
	int shared;
	int64_t gpu_mem;  /* shared: taken; whole: least per GPU */
	int64_t cpu, mem; /* mem 0: none */
	int shape;        /* interned shape (policy caches), -1: none */
	int avoid_reserved;
	int no_cache; /* the policy must fill in the GPUs */
};

/* Where a part would go on one node. */
struct choice {
	double score;               /* lower is better */
	double tie;                 /* second key, lower is better */
	int ngpus;                  /* -1: GPUs not picked (a cached score) */
	int pos[GP_SCHED_GPUS_MAX]; /* positions in the node's GPU array */
};

struct engine;

/* The ops table behind every placement policy (sched_policy.c). */
struct gp_sched_policy {
	const char *name;
	const char *summary;
	int uses_mix;       /* needs the request mix */
	int random_ties;    /* scores each node (no classes) */
	int leftover_first; /* scores by GPU share left over, first */
	int mix_cpu;        /* keeps requests without GPUs in the mix */
	/*
	 * Scores placing r on n, where it fits (checked by the caller),
	 * and picks its GPUs into c. Returns 0, or -1 when it does not fit
	 * after all.
	 */
	int (*score)(struct engine *e, struct eng_node *n,
	    const struct part_req *r, struct choice *c);
};

/* The mix, ready for scoring: one entry per shape with weight > 0. */
struct mix_entry {
	int64_t cpu, mem;
	int gpus, milli;
	double weight;           /* normalised: the entries sum to 1 */
	unsigned char *model_ok; /* per interned model; NULL: any */
	const char *model_want;  /* the shape's model string */
};

struct shape_key {
	int64_t cpu, mem, gpu_mem, min_gpu_mem, max_price;
	int gpus, milli, shared, min_capability, interactive;
	const char *model;
	uint64_t hash;
};

/* What a policy remembers about (node, shape): valid for one version. */
struct score_cache {
	unsigned version; /* node version + 1; 0: empty */
	int ok;
	double score, tie;
};

struct engine {
	const struct gp_sched_policy *policy;
	struct eng_node *nodes;
	size_t nnodes, capnodes; /* per-node arrays have capnodes rows */
	struct eng_gpu *gpus;
	size_t ngpus;
	int64_t now_ms;
	uint64_t rng;
	uint64_t decisions;
	/* Interned GPU models. */
	const char **models;
	size_t nmodels, capmodels;
	/* The job model strings matched against each model. */
	const char *match_want;
	unsigned *match_gen;
	unsigned char *match;
	unsigned gen;
	/* The request mix (fragmentation-aware policies). */
	struct mix_entry *mix;
	size_t nmix;
	size_t mix_nmodels; /* models known when the mix was built */
	double *model_rho; /* per interned model: its contention, the share
	                      of it that requests needing it would take
	                      (sched_policy.c: mix_contention) */
	size_t nmodel_rho;
	double *node_rho; /* per node: the contention of multi-GPU requests
	                     for it (sched_policy.c: mix_node_contention) */
	size_t nnode_rho;
	double mix_cpu_per_milli; /* the CPUs (milli) the mix's GPU requests
	                             ask per GPU milli: 0 without any */
	double *node_frag; /* per node: its fragmentation, valid when */
	unsigned *node_frag_version; /* equal to version + 1 */
	/* Interned shapes and the per (node, shape) score cache. */
	struct shape_key *shapes;
	size_t nshapes, capshapes;
	size_t *shape_index; /* open addressing on the hash */
	size_t capshape_index;
	struct score_cache *cache; /* nnodes x capshapes */
	/* Classes of like nodes. */
	struct node_class *classes;
	size_t nclasses, capclasses;
	size_t *class_index; /* open addressing on sig */
	size_t capclass_index;
	struct bucket buckets[NBUCKETS];
	struct bucket wbuckets[GP_SCHED_GPUS_MAX + 1]; /* by free GPUs */
	int class_oom; /* a class could not be made: out of memory */
	gp_sched_accepts_fn accepts; /* NULL: every node */
	void *accepts_arg;
	/* Totals for fair share (over up nodes). */
	int64_t total_gpus, total_cpu, total_mem;
};

/* sched.c */
int eng_pick_whole(struct engine *e, const struct eng_node *n,
    const struct part_req *r, struct choice *c);
uint64_t eng_random(struct engine *e);

/* sched_policy.c */
double eng_node_frag(struct engine *e, const struct eng_node *n,
    const int *milli_free, int64_t cpu_free, int64_t mem_free, int use_mem,
    double fill, double unfed);
int eng_mix_build(struct engine *e, const struct gp_sched_mix *mix);
void eng_mix_free(struct engine *e);

/* Inline: the placement loops ask these for every GPU they look at. */
/* 1 when interned model m matches want; answers kept per want string. */
static inline int
eng_model_matches(struct engine *e, int m, const char *want)
{
	if (want == NULL || want[0] == '\0')
		return 1;
	if (m < 0)
		return gp_sched_model_matches(NULL, want);
	if (want != e->match_want) {
		e->match_want = want;
		e->gen++;
	}
	if (e->match_gen[m] != e->gen) {
		e->match_gen[m] = e->gen;
		e->match[m] =
		    (unsigned char)gp_sched_model_matches(e->models[m], want);
	}
	return e->match[m];
}

/* 1 when the part may take the GPU at position pos of n now. */
static inline int
eng_gpu_usable(struct engine *e, const struct eng_node *n, int pos,
    const struct part_req *r)
{
	const struct eng_gpu *g = &n->gpus[pos];
	const struct gp_sched_job *job = r->job;

	if (g->holder != 0 || (r->avoid_reserved && g->reserved))
		return 0;
	if (!r->shared) {
		if (g->nshared > 0 || g->milli_free < GP_SCHED_MILLI)
			return 0;
		if (r->gpu_mem > 0 && g->mem_total < r->gpu_mem)
			return 0;
	} else {
		if (g->milli_free < r->milli)
			return 0;
		if (r->gpu_mem > 0 && g->mem_free < r->gpu_mem)
			return 0;
	}
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

#endif
