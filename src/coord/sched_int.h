/*
 * sched_int.h: the scheduler's insides, shared by its files: sched.c
 * (the engine's world and run records), sched_place.c (placing parts,
 * gangs, the result), sched_backfill.c (EASY backfill's reservation),
 * sched_preempt.c (provider first: preemption), sched_fair.c (fair
 * share), sched_wait.c (why a job waits; can it ever fit), sched_pass.c
 * (the pass and gp_sched_plan), sched_engine.c (the engine kept across
 * passes: gp_sched_engine_*) and sched_policy.c (the placement
 * policies). Not for other callers: they use sched.h.
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

struct scan {
	int64_t only_group; /* 0: any node; else the lab's own */
	int use_resv;       /* respect the reservation */
	int64_t end_ms;     /* when the part would end */
	int avoid;          /* 1: not on the job's avoid_nodes */
};

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

struct fair {
	struct fs_group *groups;
	size_t ngroups;
	struct fs_user *users;
	size_t nusers;
	size_t *order; /* job indices, grouped by user */
	double usage_total, weight_total, user_weight_total;
};

/* sched.c */
int eng_pick_whole(struct engine *e, const struct eng_node *n,
    const struct part_req *r, struct choice *c);
uint64_t eng_random(struct engine *e);
int intern_model(struct engine *e, const char *model);
void class_leave(struct engine *e, struct eng_node *n);
struct eng_node *class_rep(struct engine *e, struct node_class *c);
void node_changed(struct engine *e, struct eng_node *n);
size_t job_runs(const struct gp_sched_engine *s, int64_t job_id);
int pending_adj(struct gp_sched_engine *s, int64_t for_job, int delta);
int job_pending(const struct gp_sched_engine *s, int64_t job_id);
int job_reclaim(struct gp_sched_engine *s, int64_t job_id);
size_t run_add(struct gp_sched_engine *s, const struct run_rec *r);
void run_release(struct gp_sched_engine *s, size_t i);
void run_restore(struct gp_sched_engine *s, size_t i);
int node_totals(struct gp_sched_engine *s, const struct eng_node *n, int sign);
int lab_has_nodes(const struct gp_sched_engine *s, int64_t group);
int engine_init(struct gp_sched_engine *s, const struct gp_sched_node *nodes,
    size_t nnodes, const struct gp_sched_policy *policy, uint64_t seed);
void engine_fini(struct gp_sched_engine *s);
struct eng_node *node_by_id(struct gp_sched_engine *s, int64_t id);
int engine_add_running(struct gp_sched_engine *s,
    const struct gp_sched_running *running, size_t nrunning);
void part_init(struct engine *e, const struct gp_sched_job *job,
    struct part_req *r);

/* sched_place.c */
int result_preempt(struct gp_sched_engine *s, int64_t job_id, int64_t for_job,
    int64_t node_id);
int result_wait(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int reason, const char *why);
int place_job(struct gp_sched_engine *s, const struct gp_sched_job *job,
    const struct scan *sc0, int *placed, int *room, int *nodes_fit);

/* sched_backfill.c */
int earliest_start(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int reserve_it);
void resv_clear(struct gp_sched_engine *s);
void resv_save(struct gp_sched_engine *s, const struct gp_sched_job *job);
int resv_reuse(struct gp_sched_engine *s, const struct gp_sched_job *job);

/* sched_preempt.c */
int fits_node(struct gp_sched_engine *s, struct eng_node *n,
    struct part_req *r);
int try_preempt(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int *placed);

/* sched_fair.c */
double job_dominant(const struct engine *e, const struct gp_sched_job *job);
int fair_init(struct gp_sched_engine *s, struct fair *f,
    const struct gp_sched_job *const *queue, const unsigned char *todo,
    size_t nqueue);
void fair_fini(struct fair *f);
size_t fair_next(struct fair *f, size_t *user);

/* sched_wait.c */
const char *hold_words(const struct gp_sched_job *job, char *buf, size_t len);
void short_resource(struct gp_sched_engine *s, const struct gp_sched_job *job,
    char *why, size_t len);
int explain(struct gp_sched_engine *s, const struct gp_sched_job *job, int room,
    int is_head);

/* sched_pass.c */
int pass(struct gp_sched_engine *s, const struct gp_sched_job *const *queue,
    size_t nqueue, int no_preempt);
const struct gp_sched_job **queue_ptrs(const struct gp_sched_job *queue,
    size_t nqueue);

/* sched_policy.c */
double eng_node_frag(struct engine *e, const struct eng_node *n,
    const int *milli_free, int64_t cpu_free, int64_t mem_free, int use_mem,
    double fill, double unfed);
int eng_mix_build(struct engine *e, const struct gp_sched_mix *mix);
void eng_mix_free(struct engine *e);

/*
 * Inline: the placement loops ask these for every GPU and node they look
 * at, from several files.
 */
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

/*
 * 1 when the GPU is of a kind the job asks for, whatever holds it: its
 * memory (the job's min_gpu_mem_mib), capability, price, interactive
 * or not, and model. What a part asks beyond (free room, its gpu_mem)
 * each caller checks first.
 */
static inline int
eng_gpu_kind_fits(struct engine *e, const struct eng_gpu *g,
    const struct gp_sched_job *job)
{
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

/* 1 when the part may take the GPU at position pos of n now. */
static inline int
eng_gpu_usable(struct engine *e, const struct eng_node *n, int pos,
    const struct part_req *r)
{
	const struct eng_gpu *g = &n->gpus[pos];

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
	return eng_gpu_kind_fits(e, g, r->job);
}

static inline int
job_is_shared(const struct gp_sched_job *job)
{
	return job->shared || (job->gpu_milli > 0 && job->gpu_milli < 1000);
}

static inline int64_t
job_end(int64_t now_ms, const struct gp_sched_job *job)
{
	if (job->time_limit_s <= 0 ||
	    job->time_limit_s > (END_NEVER - now_ms) / 1000)
		return END_NEVER;
	return now_ms + job->time_limit_s * 1000;
}

static inline int
job_parts(const struct gp_sched_job *job)
{
	return job->parts > 1 ? job->parts : 1;
}

static inline int
time_allowed(const struct eng_node *n, const struct gp_sched_job *job)
{
	return n->max_time_s <= 0 ||
	    (job->time_limit_s > 0 && job->time_limit_s <= n->max_time_s);
}

/* Cheap checks of n for r: CPU, memory, counts, model, limits. */
static inline int
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

#endif
