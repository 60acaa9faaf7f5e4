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

#endif
