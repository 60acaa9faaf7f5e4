/*
 * sched.h: the scheduler, as pure logic: given the nodes, what runs on them
 * and the queue, decide which queued jobs start now, where, which running
 * jobs to preempt for them, and why every other job waits. No I/O, no
 * locks, no clock: the caller passes "now". The coordinator (state.c) and
 * the trace simulator (src/sim/) run the very same code. Unit-tested in
 * tests/unit/test_sched.c; docs/scheduling.md explains the policies.
 *
 * Requests. A job asks for `parts` parts (a gang: each on its own node,
 * all started together or none; 1 for an ordinary job), each of `gpus`
 * whole GPUs, or a share of one GPU (gpu_milli in 1..999 and/or GPU
 * memory with `shared`), plus CPUs (milli-CPUs) and memory. Constraints:
 * GPU model (case-insensitive substrings, alternatives "A|B"), the GPU's
 * total memory, compute capability, price per GPU-hour, the owner's
 * longest job, and an acceptance predicate the caller may add per job and
 * node (images: "would this node run this image").
 *
 * Order. (1) Provider first: a job of a lab (group) goes first onto the
 * GPUs its lab lends and may preempt borrowed work there (running jobs of
 * other groups that are preemptible), taking the victims that lose the
 * least. (2) Every other job by weighted fair share: the group, then the
 * user, whose decayed usage plus what it holds now is smallest for its
 * weight goes next (progressive filling, in the spirit of Slurm's fair
 * share and of dominant resource fairness). (3) EASY backfill: the first
 * job in that order that cannot start gets a reservation at the earliest
 * time the time limits of what runs free enough for it; later jobs start
 * only where they cannot delay it. Held jobs (budget exhausted) wait.
 *
 * Placement: among the nodes where a part fits, a policy (an ops table,
 * sched_policy.c) picks the node and its GPUs: "bestfit" (least left
 * over), "fgd" (Fragmentation Gradient Descent, USENIX ATC '23), the
 * default "frag" (gpupool's fragmentation-aware policy), and the
 * baselines "random", "dotprod", "clustering", "packing".
 */
#ifndef GP_SCHED_H
#define GP_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define GP_SCHED_GPUS_MAX  64
#define GP_SCHED_PARTS_MAX 64
#define GP_SCHED_MILLI     1000 /* one whole GPU, one CPU */

struct gp_sched_gpu {
	int index;         /* the node's own GPU index */
	const char *model; /* "NVIDIA A100-SXM4-40GB" */
	int64_t mem_mib;
	int64_t job_id; /* the job holding it whole; 0: none; -1: not lent */
	/* What shared (fractional) jobs hold of it now. */
	int shared_milli;
	int64_t shared_mem_mib;
	int nshared;
	int capability; /* compute capability x 10 (86 for 8.6); 0: unknown */
	int64_t price;  /* per GPU-hour (the price table's unit); 0: free */
	/* 1: the owner keeps it for interactive jobs (interactive-gpus). */
	int interactive_only;
};

struct gp_sched_node {
	int64_t id;
	int up;             /* 0: lease expired, paused or draining */
	int64_t cpu_milli;  /* what jobs may take in all (the offer) */
	int64_t mem_mib;    /* idem, 0 means unknown: not a constraint */
	int64_t max_time_s; /* the owner's longest job; 0: any */
	int64_t group;      /* the lab that lends it; 0: none */
	int ngpus;
	struct gp_sched_gpu *gpus;
};

enum gp_sched_hold {
	GP_SCHED_HOLD_NONE = 0,
	GP_SCHED_HOLD_BUDGET, /* the user's or group's budget is spent */
	GP_SCHED_HOLD_USER,   /* held by its owner or an admin */
	GP_SCHED_HOLD_OTHER,  /* the caller's reason, in hold_reason */
};

struct gp_sched_job {
	int64_t id;
	int gpus;            /* whole GPUs per part; a shared job: 1 */
	int gpu_milli;       /* 1..999: a share of one GPU; 0, 1000: whole */
	int shared;          /* 1: a fraction of one GPU (share and/or mem) */
	int64_t gpu_mem_mib; /* whole GPUs: each has at least this much;
	                        shared: the GPU memory it takes */
	int64_t min_gpu_mem_mib; /* the GPU's total memory, at least */
	const char *gpu_model;   /* substrings, "A|B"; NULL/"": any */
	int min_capability;      /* x 10; 0: any */
	int64_t max_price;       /* per GPU-hour; 0: any price */
	int64_t cpu_milli;       /* per part */
	int64_t mem_mib;         /* per part, 0: no reservation */
	int64_t time_limit_s;    /* 0: unlimited */
	int parts;               /* gang: parts on distinct nodes; 0, 1: one */
	int64_t group, user;     /* 0: none */
	int hold;                /* enum gp_sched_hold */
	const char *hold_reason; /* for GP_SCHED_HOLD_OTHER, or NULL */
	/*
	 * 1: an interactive job (docs/interactive.md): it goes ahead of its
	 * user's batch jobs in fair share, and only it may take GPUs kept
	 * for interactive work (interactive_only).
	 */
	int interactive;
	/*
	 * Back-off after attempts that failed to start (docs/scheduling.md):
	 * the job waits (GP_SCHED_WAIT_BACKOFF, retry_why) until
	 * not_before_ms; 0: no back-off.
	 */
	int64_t not_before_ms;
	const char *retry_why; /* NULL: the reason's words */
	/*
	 * Nodes where its attempts failed to start lately: its parts go
	 * elsewhere when other nodes can take them now, and onto these only
	 * when none can.
	 */
	const int64_t *avoid_nodes;
	int navoid;
};

/*
 * A job already running: one entry per part. Whole GPUs it holds are
 * marked by job_id in the nodes; a shared part names its GPU here (and the
 * caller has counted it in that GPU's shared_* fields).
 */
struct gp_sched_running {
	int64_t job_id;
	int64_t node_id;
	int64_t cpu_milli;
	int64_t mem_mib;
	int64_t end_ms;      /* INT64_MAX when it has no time limit */
	int64_t group;       /* its job's group */
	int preemptible;     /* 1: may be checkpointed and requeued */
	int64_t loss;        /* what preempting it loses (e.g. GPU-seconds
	                        since its last checkpoint); least goes first */
	int64_t saved_ms;    /* > 0: when its work was last saved; the loss
	                        is then its GPUs x the time since (GPU-ms) */
	int64_t preempt_for; /* being stopped for this job (deferred
	                        preemption under way); 0: none */
	int shared;          /* 1: holds a share of the GPU below */
	int gpu;             /* shared: the node's GPU index */
	int gpu_milli;       /* shared: its share */
	int64_t gpu_mem_mib; /* shared: its GPU memory */
};

/* A group's (lab's) or a user's standing for fair share. */
struct gp_sched_share {
	int64_t id;
	double weight; /* <= 0: 1 */
	double usage;  /* decayed recent usage (e.g. GPU-seconds) */
};

/*
 * The recent mix of requests, for fragmentation-aware policies: shapes
 * with weights. Built by the caller (the simulator: from the trace) or,
 * when absent, by the plan from the queue and the running jobs.
 */
struct gp_sched_shape {
	int64_t cpu_milli;
	int64_t mem_mib;
	int gpus;      /* whole GPUs, or 1 for a share */
	int gpu_milli; /* per GPU: 1000 whole, less: a share */
	const char *gpu_model;
	double weight;
};

struct gp_sched_mix {
	struct gp_sched_shape *shapes;
	size_t nshapes;
};

struct gp_sched_policy; /* an ops table: sched_policy.c */

/* Finds a placement policy by name ("frag", "bestfit", ...), or NULL. */
const struct gp_sched_policy *gp_sched_policy_find(const char *name);
/* The default policy ("frag"). */
const struct gp_sched_policy *gp_sched_policy_default(void);
const char *gp_sched_policy_name(const struct gp_sched_policy *policy);
/* The names of all policies, ", "-separated, for help texts. */
const char *gp_sched_policy_names(void);

/* Per job and node: 1 when the node accepts the job (e.g. its image). */
typedef int (*gp_sched_accepts_fn)(void *arg, const struct gp_sched_node *node,
    const struct gp_sched_job *job);

struct gp_sched_input {
	int64_t now_ms;
	struct gp_sched_node *nodes;
	size_t nnodes;
	const struct gp_sched_running *running;
	size_t nrunning;
	const struct gp_sched_job *queue; /* in submission order */
	size_t nqueue;
	const struct gp_sched_share *groups; /* absent ones: weight 1 */
	size_t ngroups;
	const struct gp_sched_share *users;
	size_t nusers;
	const struct gp_sched_policy *policy; /* NULL: the default */
	const struct gp_sched_mix *mix;       /* NULL: from the queue */
	gp_sched_accepts_fn accepts;          /* NULL: every node */
	void *accepts_arg;
	int no_preempt; /* 1: provider first without preemption */
	uint64_t seed;  /* for the "random" policy */
};

/* One part of a job that starts now. */
struct gp_sched_assignment {
	int64_t job_id;
	int part; /* 0 .. parts-1 */
	int64_t node_id;
	int ngpus;
	int gpus[GP_SCHED_GPUS_MAX]; /* the node's GPU indices */
	int gpu_milli;               /* 1000: whole GPUs; less: a share */
	int64_t gpu_mem_mib;         /* shared: the GPU memory it takes */
};

/* A running job to checkpoint and requeue, and the job it makes room for. */
struct gp_sched_preemption {
	int64_t job_id;
	int64_t for_job_id;
	int64_t node_id;
};

enum gp_sched_wait {
	GP_SCHED_WAIT_RESOURCES = 1, /* no room now: GPUs, CPUs or memory */
	GP_SCHED_WAIT_NEVER,         /* no node that is up could ever hold it */
	GP_SCHED_WAIT_SHARE,         /* it fitted, but groups with less
	                                recent usage went first */
	GP_SCHED_WAIT_PRIORITY,      /* it fitted, but jobs ahead of it in
	                                its group took the room */
	GP_SCHED_WAIT_RESERVATION,   /* it would delay the reservation */
	GP_SCHED_WAIT_GANG,          /* not enough nodes for all its parts */
	GP_SCHED_WAIT_HELD,          /* held by the caller (budget ...) */
	GP_SCHED_WAIT_PREEMPTING,    /* borrowed work on its lab's GPUs is
	                                being checkpointed for it */
	GP_SCHED_WAIT_BACKOFF,       /* its last attempts failed to start:
	                                it waits until not_before_ms */
};

/* Why a queued job did not start. */
struct gp_sched_waiting {
	int64_t job_id;
	int reason;       /* enum gp_sched_wait */
	int64_t start_ms; /* the reservation's start (the head), or 0 */
	char why[160];    /* the reason in words, for `gpupool queue` */
};

struct gp_sched_result {
	struct gp_sched_assignment *assignments; /* part by part */
	size_t nassignments;
	struct gp_sched_preemption *preemptions;
	size_t npreemptions;
	struct gp_sched_waiting *waiting; /* every queued job not started */
	size_t nwaiting;
	int64_t head_job_id; /* the job holding the reservation, 0: none */
};

/*
 * Decides what starts now. IN: in (not modified). OUT: *res (filled;
 * release with gp_sched_result_fini whatever the result). Returns 0,
 * GP_ENOMEM, or GP_EINVAL (a bad policy or input).
 */
int gp_sched_plan(const struct gp_sched_input *in, struct gp_sched_result *res);
void gp_sched_result_fini(struct gp_sched_result *res);

/* Words for a wait reason ("behind a reservation"). */
const char *gp_sched_wait_name(int reason);

/*
 * 1 when some node, empty and up or down, could ever run job; else 0 and
 * why (for example "no node has 8 GPUs of model A100 with 80000 MiB; the
 * largest offer is 4 GPUs on node 3").
 */
int gp_sched_can_ever_fit(const struct gp_sched_node *nodes, size_t nnodes,
    const struct gp_sched_job *job, char *why, size_t whylen);

/*
 * The owner's acceptance of image and plain-command jobs (sched_accept.c),
 * the predicate state.c passes as `accepts`: what a node's owner takes,
 * and what a job is. The zero values accept everything.
 */
enum {
	GP_SCHED_IMAGES_ANY = 0, /* any image */
	GP_SCHED_IMAGES_SIGNED,	 /* images signed by a key it trusts */
	GP_SCHED_IMAGES_NONE,	 /* no images */
};
struct gp_sched_owner {
	int images;		     /* GP_SCHED_IMAGES_* */
	int refuse_plain;	     /* 1: no plain-command jobs */
	const char *const *trusted;  /* ntrusted public keys */
	int ntrusted;
	int network;		     /* 1 + the most its jobs reach (none 1,
					internet 2, lan 3); 0: not said */
	int refuse_interactive;	     /* 1: no interactive jobs */
	int no_gang_links;	     /* 1: cannot link a gang's parts to
					other nodes (a non-root agent) */
};
struct gp_sched_image {
	int image;		     /* 0: a plain command */
	const char *const *signers;  /* the keys that signed the image */
	int nsigners;
	int network;		     /* 1 + the network it asks for; 0 */
	int interactive;	     /* 1: an interactive job */
	int gang;		     /* 1: a gang of several nodes */
};
/*
 * 1 when the owner would accept the job: a plain command where plain jobs
 * are allowed; an image where images are, signed by a key the owner trusts
 * when only signed images are. When 0, why (for example "takes no images").
 */
int gp_sched_why_refused(const struct gp_sched_owner *owner,
    const struct gp_sched_image *job, char *why, size_t whylen);
int gp_sched_owner_accepts(const struct gp_sched_owner *owner,
    const struct gp_sched_image *job);

/* 1 when the GPU matches the job's model, memory, capability and price. */
int gp_sched_gpu_matches(const struct gp_sched_gpu *gpu,
    const struct gp_sched_job *job);

/* 1 when model (a GPU's) matches want ("A|B": any of the substrings). */
int gp_sched_model_matches(const char *model, const char *want);

/*
 * The engine: a world that persists between passes, for the simulator
 * (and any caller that applies each plan at once). gp_sched_plan builds
 * one from its input, runs one pass and drops it.
 */
struct gp_sched_engine;

/*
 * Makes an engine over nodes (copied: GPUs start as the nodes say), with
 * policy (NULL: default), mix (copied; NULL: none yet) and seed. OUT: *out.
 * Returns 0, GP_ENOMEM or GP_EINVAL.
 */
int gp_sched_engine_new(const struct gp_sched_node *nodes, size_t nnodes,
    const struct gp_sched_policy *policy, const struct gp_sched_mix *mix,
    uint64_t seed, struct gp_sched_engine **out);
void gp_sched_engine_free(struct gp_sched_engine *e);
/*
 * One pass over queue at now_ms; what it starts (and preempts) is applied
 * to the engine at once: started parts run until gp_sched_engine_end,
 * preempted ones are gone. groups/users: fair-share standings (may be
 * NULL). OUT: *res as for gp_sched_plan.
 */
int gp_sched_engine_pass(struct gp_sched_engine *e, int64_t now_ms,
    const struct gp_sched_job *queue, size_t nqueue,
    const struct gp_sched_share *groups, size_t ngroups,
    const struct gp_sched_share *users, size_t nusers,
    struct gp_sched_result *res);
/* Frees what the job's parts hold. Returns 0 or GP_ENOENT. */
int gp_sched_engine_end(struct gp_sched_engine *e, int64_t job_id);
/* Free whole GPUs, and GPU milli free on partly used GPUs, over up nodes. */
void gp_sched_engine_gpu_stats(const struct gp_sched_engine *e,
    int64_t *gpus_total, int64_t *milli_allocated, int64_t *gpus_idle,
    int64_t *gpus_partial);
/*
 * The pool's fragmentation for the engine's mix (FGD's measure): GPU
 * milli free that the mix's requests, weighted, could not use. 0 without
 * a mix.
 */
double gp_sched_engine_frag(struct gp_sched_engine *e);
/*
 * quick: jobs that do not start now get no reservation and no reason
 * beyond "no room" (the FGD protocol: each request is placed at once or
 * fails; nothing waits).
 */
void gp_sched_engine_set_quick(struct gp_sched_engine *e, int quick);
/*
 * Reuse the head job's reservation for up to ms (0: never) in later passes
 * while the same job heads the queue and its start is still ahead; the
 * live coordinator sets 1000.
 */
void gp_sched_engine_set_resv_reuse(struct gp_sched_engine *s, int64_t ms);
/* Decisions made (parts placed or refused) since the engine was made. */
uint64_t gp_sched_engine_decisions(const struct gp_sched_engine *e);

/*
 * The live coordinator keeps one engine for its whole life and tells it
 * only what changed: nodes that come, change or go down, parts that end,
 * and (after a restart) what runs. Passes take the queue as pointers.
 */

/*
 * Adds node (its id above every node the engine has) or updates the node
 * with its id: up, limits, lab, CPUs, memory and GPUs (model, memory,
 * capability, price; job_id -1: not lent, else lent; shared_* ignored).
 * What runs on it stays and keeps what it holds: free CPUs and memory are
 * the new totals less what runs. Strings are copied. Returns 0,
 * GP_ENOMEM, or GP_EINVAL (an id out of order, too many GPUs).
 */
int gp_sched_engine_node_set(struct gp_sched_engine *e,
    const struct gp_sched_node *node);
/*
 * Records a part that runs (placed before the engine was made, e.g.
 * before a restart): r->shared with r->gpu, or whole GPUs (the node's GPU
 * indices gpus[0..ngpus)). Returns 0, GP_ENOENT (no such node), GP_ECONFLICT
 * (a GPU is held already: nothing taken) or GP_ENOMEM.
 */
int gp_sched_engine_run_add(struct gp_sched_engine *e,
    const struct gp_sched_running *r, const int *gpus, int ngpus);
/* Frees what the job's part on node_id holds. 0 or GP_ENOENT. */
int gp_sched_engine_end_part(struct gp_sched_engine *e, int64_t job_id,
    int64_t node_id);
/*
 * Changes what the engine knows of a running job's parts: preemptible,
 * saved_ms (see struct gp_sched_running), preempt_for. 0 or GP_ENOENT.
 */
int gp_sched_engine_run_set(struct gp_sched_engine *e, int64_t job_id,
    int preemptible, int64_t saved_ms, int64_t preempt_for);
/* Replaces the mix (copied; NULL: none). Returns 0 or GP_ENOMEM. */
int gp_sched_engine_set_mix(struct gp_sched_engine *e,
    const struct gp_sched_mix *mix);

/* One pass of a long-lived engine. */
struct gp_sched_pass {
	int64_t now_ms;
	const struct gp_sched_job *const *queue; /* in submission order */
	size_t nqueue;
	const struct gp_sched_share *groups, *users;
	size_t ngroups, nusers;
	gp_sched_accepts_fn accepts; /* NULL: every node */
	void *accepts_arg;
	int no_preempt;
	/*
	 * 1: a preemption is only asked for: the victims keep what they hold
	 * (marked preempt_for, no longer preemptible) until the caller ends
	 * them, and the job waits (GP_SCHED_WAIT_PREEMPTING) without trying
	 * other nodes or preempting again; once they are gone, provider
	 * first gives it their room. 0: victims are gone at once and the job
	 * starts in the same pass (gp_sched_plan, the simulator).
	 */
	int defer_preempt;
};

/*
 * Like gp_sched_engine_pass. What it starts is applied to the engine at
 * once (the caller ends a part it does not start after all).
 */
int gp_sched_engine_run_pass(struct gp_sched_engine *e,
    const struct gp_sched_pass *p, struct gp_sched_result *res);
/* Running parts the engine holds records of (alive), for checks. */
size_t gp_sched_engine_nrunning(const struct gp_sched_engine *e);
/* Records it keeps, alive or reusable: at most the most ever alive. */
size_t gp_sched_engine_nrecords(const struct gp_sched_engine *e);

#endif
