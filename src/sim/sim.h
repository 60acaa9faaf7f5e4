/*
 * sim.h: the trace simulator behind `gpupool sim`: reads the Alibaba
 * GPU-sharing 2023 traces (trace.c, with libcsv) and replays them through
 * the scheduler's own engine (src/coord/sched.c) with a virtual clock and
 * no network (sim.c): either the FGD paper's measurement protocol, or a
 * replay of arrivals and departures with a queue. docs/scheduling.md
 * explains both and what is measured.
 */
#ifndef GP_SIM_H
#define GP_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "coord/sched.h"

#define GP_TRACE_NAME_MAX  64
#define GP_TRACE_MODEL_MAX 32
#define GP_TRACE_SPEC_MAX  128
#define GP_TRACE_ROWS_MAX  10000000

struct gp_trace_node {
	char name[GP_TRACE_NAME_MAX];
	int64_t cpu_milli;
	int64_t mem_mib;
	int gpus;
	char model[GP_TRACE_MODEL_MAX];
};

struct gp_trace_pod {
	char name[GP_TRACE_NAME_MAX];
	int64_t cpu_milli;
	int64_t mem_mib;
	int num_gpu;
	int gpu_milli; /* per GPU: 1000 whole; less: a share of one */
	char gpu_spec[GP_TRACE_SPEC_MAX]; /* "A|B", "" for any */
	char qos[16];
	char phase[16];
	int64_t creation, deletion, scheduled; /* seconds; -1: absent */
};

struct gp_trace {
	struct gp_trace_node *nodes;
	size_t nnodes;
	struct gp_trace_pod *pods;
	size_t npods;
	int64_t *runtimes; /* seconds (philly_runtime.csv), or NULL */
	size_t nruntimes;
};

/*
 * Parses a node list (header: sn, cpu_milli, memory_mib, gpu, model; more
 * columns are ignored) or a pod list (name, cpu_milli, memory_mib,
 * num_gpu, gpu_milli, gpu_spec, and, when present, qos, pod_phase,
 * creation_time, deletion_time, scheduled_time) from buf, appending to t.
 * Returns 0, GP_ENOMEM or GP_EINVAL with err naming the line and field.
 * Never trusts its input (tests/fuzz/fuzz_trace.c).
 */
int gp_trace_parse_nodes(const char *buf, size_t len, struct gp_trace *t,
    char *err, size_t errlen);
int gp_trace_parse_pods(const char *buf, size_t len, struct gp_trace *t,
    char *err, size_t errlen);
/* A run-time list (header: runtime; seconds, 0 to a year), appended. */
int gp_trace_parse_runtimes(const char *buf, size_t len, struct gp_trace *t,
    char *err, size_t errlen);
int gp_trace_load_runtimes(const char *path, struct gp_trace *t, char *err,
    size_t errlen);
/* Reads both files; same contract, err starts with the file's name. */
int gp_trace_load(const char *nodes_path, const char *pods_path,
    struct gp_trace *t, char *err, size_t errlen);
void gp_trace_free(struct gp_trace *t);
/* A GPU model's memory in MiB when the trace names a known one, else 0. */
int64_t gp_trace_model_mem(const char *model);

struct gp_sim_opts {
	const struct gp_sched_policy *policy; /* NULL: the default */
	uint64_t seed;
	double inflate;       /* FGD: total GPU request / capacity (1.3) */
	const char *group_by; /* replay: "labs:N" or "qos"; NULL: labs:4 */
	FILE *series;         /* when not NULL: a time series, CSV */
	int static_partition; /* replay: also each lab on its own GPUs */
	double speed;         /* replay: arrivals this many times denser
	                         (run times unchanged); 0: 1 */
};

/* What the FGD protocol measures. */
struct gp_sim_fgd_result {
	int64_t gpus; /* in the cluster */
	int64_t pods; /* arrived, inflation included */
	int64_t pods_failed;
	double unallocated_pct_at_100, unallocated_pct_at_130;
	double frag_pct_at_100; /* fragmented GPU share, of all GPUs */
	double decisions_per_s;
	double seconds; /* wall time of the replay */
};

/*
 * The FGD paper's protocol (docs/scheduling.md): the pods sorted by name
 * and shuffled with seed, inflated with pods drawn from the trace until
 * the GPU request is opts->inflate x the cluster's, each placed once or
 * failed for good, nothing departs. Returns 0 or a GP_E* code.
 */
int gp_sim_fgd(const struct gp_trace *t, const struct gp_sim_opts *opts,
    struct gp_sim_fgd_result *res);

/* What a replay with arrivals, departures and a queue measures. */
struct gp_sim_stats {
	double p50, p90, p99, mean, max;
};

struct gp_sim_replay_result {
	int64_t gpus;
	int64_t pods, pods_gpu, pods_never; /* never fit: dropped */
	int64_t makespan_s;
	double alloc_pct_mean;    /* GPU share allocated, time-weighted */
	double unalloc_gpus_mean; /* idle GPUs, time-weighted */
	double frag_gpus_mean;    /* GPU share fragmented, in GPUs */
	double util_pct; /* GPU-seconds used / GPU-seconds of makespan */
	struct gp_sim_stats wait_s, jct_s;
	double jain; /* Jain's index over the labs' slowdowns */
	int nlabs;
	/* Each lab alone on its own GPUs (static partition). */
	double static_util_pct, static_makespan_s;
	struct gp_sim_stats static_wait_s;
	double decisions_per_s;
	double seconds;
};

/*
 * Replays the trace in time: pods arrive at their creation time, wait in
 * the queue (fair share between labs, EASY backfill with their true run
 * time as time limit), run for deletion - scheduled seconds, depart.
 * Returns 0 or a GP_E* code.
 */
int gp_sim_replay(const struct gp_trace *t, const struct gp_sim_opts *opts,
    struct gp_sim_replay_result *res);

/* ---- the campus protocol (campus.c) ---- */

/* How an owner uses their own GPUs (docs/scheduling.md). */
enum gp_campus_pattern {
	GP_CAMPUS_OFFICE = 0, /* working hours on weekdays */
	GP_CAMPUS_DEADLINE,   /* office, and the days before deadlines:
	                         every GPU, day and night */
	GP_CAMPUS_SEMESTER,   /* office in term; nobody in the break */
	GP_CAMPUS_MIXED,      /* each lab one of the three, by the seed */
	GP_CAMPUS_NPATTERNS
};

#define GP_CAMPUS_DEADLINES_MAX 16

/* One lab's owner, drawn from the seed. Times in seconds from Monday
 * 00:00 of the first week. */
struct gp_campus_owner {
	int pattern;         /* office, deadline or semester */
	int start_s, end_s;  /* working hours, seconds after midnight */
	double share;        /* of the lab's GPUs used while working */
	int saturday;        /* works Saturdays too */
	int64_t deadline[GP_CAMPUS_DEADLINES_MAX]; /* crunch: the 3 days */
	int ndeadlines;                             /* before each */
	int64_t break_from, break_to; /* semester: nobody, [from, to) */
};

/* Parses "office", "deadline", "semester", "mixed"; -1 when unknown. */
int gp_campus_pattern_parse(const char *name);
const char *gp_campus_pattern_name(int pattern);
/*
 * Draws lab's owner (0-based) for pattern over horizon_s: the same seed,
 * lab and pattern give the same owner. OUT: *o.
 */
void gp_campus_owner_draw(uint64_t seed, int lab, int pattern,
    int64_t horizon_s, struct gp_campus_owner *o);
/* How many of the lab's ngpus GPUs the owner uses at t. */
int gp_campus_owner_gpus(const struct gp_campus_owner *o, int64_t t, int ngpus);

/* What moving a job costs, with gpupool's mechanisms (defaults: the
 * policy's checkpoint-grace and the rates in bench/RESULTS.md). */
struct gp_campus_costs {
	double grace_s;         /* checkpoint-grace (30) */
	double write_mb_s;      /* the job writes its checkpoint (183) */
	double upload_mb_s;     /* the agent uploads it (288.1) */
	double download_mb_s;   /* the next agent fetches it (747.7) */
	double ckpt_mb_per_gpu; /* checkpoint size per GPU (2048) */
	double every_s;         /* --checkpoint-every: uploads while it runs
	                           (600) */
};

enum gp_campus_outcome {
	GP_CAMPUS_SAVED = 0, /* saved at the signal within the grace: no loss */
	GP_CAMPUS_PARTIAL,   /* killed after the grace: back to its last
	                        periodic checkpoint */
	GP_CAMPUS_RESTARTED  /* no checkpoint at all: from the start */
};

struct gp_campus_move {
	int outcome;    /* enum gp_campus_outcome */
	double stop_s;  /* from the owner's return to the job requeued */
	double start_s; /* restore before it runs again (download) */
	double lost_s;  /* run time lost (to do again), per GPU */
};

/* Fills *c with the defaults above. */
void gp_campus_costs_default(struct gp_campus_costs *c);
/*
 * What stopping a job of gpus GPUs that has run run_s seconds (of work
 * kept) costs; checkpoints: the job saves on the signal and every
 * every_s. OUT: *m.
 */
void gp_campus_move_cost(const struct gp_campus_costs *c, int gpus,
    int checkpoints, double run_s, struct gp_campus_move *m);
/* Jain's fairness index of x[0..n): 1 when all equal, 1/n at worst. */
double gp_sim_jain(const double *x, size_t n);

struct gp_campus_opts {
	const struct gp_sched_policy *policy; /* NULL: the default */
	uint64_t seed;
	int labs;           /* 8 */
	int lab_nodes;      /* nodes per lab, 2 */
	int days;           /* horizon, 28 */
	double load;        /* pool demand, GPU-seconds over the GPUs', 0.5 */
	double interactive; /* share of jobs that are sessions, 0.3 */
	double ckpt_share;  /* share of batch jobs that checkpoint, 0.8 */
	int pattern;        /* enum gp_campus_pattern */
	struct gp_campus_costs costs;
	FILE *series; /* when not NULL: hourly CSV */
};

#define GP_CAMPUS_LABS_MAX 64

/* One run: the pooled campus, or every lab alone on its own GPUs. */
struct gp_campus_run {
	double util_pct;       /* (owner + pool) GPU-seconds / all */
	double owner_pct;      /* the owners' part */
	double pool_pct;       /* pool jobs' GPU-seconds / all */
	int64_t jobs, jobs_done;
	double gpu_h_done;     /* GPU-hours of work of the jobs completed */
	double wait_mean_s, wait_p90_s; /* batch jobs' first start */
	double lab_wait_mean_s[GP_CAMPUS_LABS_MAX];
	double lab_done_ratio[GP_CAMPUS_LABS_MAX]; /* GPU-h done / asked */
	int64_t sessions, sessions_1min; /* interactive: served in 60 s */
	int64_t migrations, saved, partial, restarted, by_owner, by_lab;
	double lost_gpu_h; /* work lost to migrations */
	double jain;       /* over labs' lab_done_ratio */
};

struct gp_campus_result {
	int labs, pattern;
	int64_t gpus, nodes;
	struct gp_campus_run pooled, alone;
	double seconds;
};

/*
 * The campus protocol: labs own nodes drawn from t's node list; each
 * lab's owner uses its GPUs by the pattern (owner presence); pool jobs of
 * every lab (shapes from t's pods, run times from t->runtimes) run on what
 * is idle, migrate with gpupool's costs when an owner returns or the
 * owning lab's own job preempts them; sessions start only in gaps long
 * enough. Against each lab alone on its own GPUs. Returns 0 or GP_E*.
 */
int gp_sim_campus(const struct gp_trace *t, const struct gp_campus_opts *o,
    struct gp_campus_result *res);

#endif
