/*
 * sched.h: the scheduler, as pure logic: given the nodes, what runs on them
 * and the queue, decide which queued jobs start now and where. No I/O, no
 * locks, no clock: the caller passes "now". Unit-tested in
 * tests/unit/test_sched.c.
 *
 * Policy: the queue is taken in the caller's order. A job goes to the node
 * where it fits best (the fewest free GPUs left over, then the least GPU
 * memory used for it, then the lowest node id); on that node the
 * matching GPUs with the least memory are used. EASY backfill: the first
 * job that cannot start gets a reservation at the earliest time the
 * running jobs' time limits free enough resources on one node; later jobs
 * may start only if they cannot delay it (they end before the reservation
 * on that node, or run on other resources). Running jobs without a time
 * limit never end in this reckoning.
 */
#ifndef GP_SCHED_H
#define GP_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define GP_SCHED_GPUS_MAX 64

/* What a node's owner accepts (the zero values accept everything). */
enum {
	GP_SCHED_IMAGES_ANY = 0, /* any image */
	GP_SCHED_IMAGES_SIGNED,	 /* images signed by a key it trusts */
	GP_SCHED_IMAGES_NONE,	 /* no images */
};

struct gp_sched_gpu {
	int index;	   /* the node's own GPU index */
	const char *model; /* "NVIDIA A100-SXM4-40GB" */
	int64_t mem_mib;
	int64_t job_id;	   /* the running job using it, 0 when free */
};

struct gp_sched_node {
	int64_t id;
	int up;		/* 0: lease expired, paused or draining: no new jobs */
	int cpus;	/* total */
	int64_t mem_mib; /* total, 0 means unknown: not a constraint */
	int64_t max_time_s; /* the owner's longest job; 0: any */
	int ngpus;
	struct gp_sched_gpu *gpus;
	/* The owner's acceptance (gp_sched_node_accepts). */
	int images;		/* GP_SCHED_IMAGES_* */
	int refuse_plain;	/* 1: no plain-command jobs */
	const char *const *trusted; /* ntrusted public keys */
	int ntrusted;
};

struct gp_sched_job {
	int64_t id;
	int gpus;
	int64_t gpu_mem_mib; /* each GPU at least this much, 0: any */
	const char *gpu_model; /* case-insensitive substring, NULL/"": any */
	int cpus;
	int64_t mem_mib;      /* 0: no reservation */
	int64_t time_limit_s; /* 0: unlimited */
	/* Image jobs: the keys that signed the image. */
	int image;		/* 0: a plain command */
	const char *const *signers;
	int nsigners;
};

/* A job already running: what it holds and when its time limit ends. */
struct gp_sched_running {
	int64_t job_id;
	int64_t node_id;
	int cpus;
	int64_t mem_mib;
	int64_t end_ms; /* INT64_MAX when it has no time limit */
};

struct gp_sched_assignment {
	int64_t job_id;
	int64_t node_id;
	int ngpus;
	int gpus[GP_SCHED_GPUS_MAX]; /* the node's GPU indices */
};

struct gp_sched_input {
	int64_t now_ms;
	struct gp_sched_node *nodes;
	size_t nnodes;
	const struct gp_sched_running *running;
	size_t nrunning;
	const struct gp_sched_job *queue; /* in priority order */
	size_t nqueue;
};

/*
 * Decides what starts now. IN: in (not modified). OUT: *out (malloc'd
 * array, caller frees; NULL when nothing starts), *nout. The GPUs of
 * running jobs are marked by job_id in the nodes; CPUs and memory held by
 * running jobs come from the running list. Returns 0 or GP_ENOMEM.
 */
int gp_sched_plan(const struct gp_sched_input *in,
    struct gp_sched_assignment **out, size_t *nout);

/*
 * 1 when some node, empty and up or down, could ever run job; else 0 and
 * why (for example "no node has 8 GPUs of model A100 with 80000 MiB; the
 * largest offer is 4 GPUs on node 3").
 */
int gp_sched_can_ever_fit(const struct gp_sched_node *nodes, size_t nnodes,
    const struct gp_sched_job *job, char *why, size_t whylen);

/*
 * 1 when the node's owner would accept the job: a plain command where
 * plain jobs are allowed; an image where images are, signed by a key the
 * node trusts when it takes only signed images. (sched_accept.c.)
 */
int gp_sched_node_accepts(const struct gp_sched_node *node,
    const struct gp_sched_job *job);
/* As above; when 0, why (for example "takes no images"). */
int gp_sched_why_refused(const struct gp_sched_node *node,
    const struct gp_sched_job *job, char *why, size_t whylen);

/* 1 when the GPU matches the job's model and memory constraints. */
int gp_sched_gpu_matches(const struct gp_sched_gpu *gpu,
    const struct gp_sched_job *job);

#endif
