/*
 * gpu.h: the GPUs a node lends, behind a small backend ops table: NVML
 * (dlopen'd libnvidia-ml.so.1, no CUDA headers needed) or fake GPUs for
 * tests (--fake-gpus N[:MODEL[:MEM_MIB]]).
 *
 * For other parts (the CLI's `gpupool up`), the one call to know:
 *
 *   int gp_gpu_discover(const char *fake_spec, struct gp_gpu_info **out,
 *       int *n, char *err, size_t errlen);
 *
 * IN: fake_spec: NULL to ask NVML for the real GPUs, or a --fake-gpus
 * spec ("2", "4:A100:40960"). OUT (only on success): *out (malloc'd array
 * of *n entries, caller free()s; NULL when *n == 0), *n. err is written
 * on failure, and also on success with 0 GPUs when NVML is missing.
 * Returns 0 (possibly 0 GPUs), GP_ENOENT when libnvidia-ml.so.1 cannot be
 * loaded (*out = NULL, *n = 0 are still written), GP_EIO when NVML is
 * there but fails, GP_EINVAL for a bad fake spec. Fake UUIDs use the
 * hostname ("GPU-fake-<host>-<i>").
 */
#ifndef GP_AGENT_GPU_H
#define GP_AGENT_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GP_GPU_UUID_MAX	 96
#define GP_GPU_MODEL_MAX 96

struct gp_gpu_info {
	int index;			/* 0..n-1, what jobs are assigned */
	char uuid[GP_GPU_UUID_MAX];	/* "GPU-..." */
	char model[GP_GPU_MODEL_MAX];	/* "NVIDIA A100-SXM4-40GB" */
	/*
	 * Memory jobs can have: the card's total less what the driver
	 * keeps for itself (NVML's reserved; CUDA's total memory).
	 */
	int64_t mem_mib;
	int capability;			/* compute capability x 10; 0: unknown */
	/*
	 * What a CUDA context takes of it (ctxprobe.h), charged to each
	 * process of a job holding a fraction; 0: not known.
	 */
	int64_t ctx_bytes;
	/* The backend reads each process's utilisation of it. */
	int proc_util;
};

struct gp_gpu_usage {
	int util;		/* percent, 0..100 */
	int64_t mem_used_mib;
	int temp_c;		/* degrees Celsius; -1: unknown */
	int power_mw;		/* milliwatts; -1: unknown */
};

/* A backend: one implementation per file (nvml.c, fake.c). */
struct gp_gpu_ops {
	const char *name;
	/*
	 * IN: spec (backend specific, may be NULL), node_name (for stable
	 * fake UUIDs). OUT: *state. Returns 0 or GP_E*; err says why.
	 */
	int (*open)(const char *spec, const char *node_name, void **state,
	    char *err, size_t errlen);
	/* OUT: *out (malloc'd, caller frees), *n. */
	int (*list)(void *state, struct gp_gpu_info **out, int *n);
	/*
	 * Current use of GPU index. busy: whether one of the pool's jobs
	 * holds it (the fake backend makes its readings up from it; NVML
	 * ignores it). Returns 0 or GP_E*.
	 */
	int (*usage)(void *state, int index, int busy,
	    struct gp_gpu_usage *usage);
	void (*close)(void *state);
	/*
	 * The processes using GPU index, the pool's included. OUT: pids (at
	 * most max). Returns how many it wrote, or GP_E*.
	 */
	int (*processes)(void *state, int index, pid_t *pids, int max);
	/*
	 * Optional: the minor number of GPU index's /dev/nvidia<minor>, or
	 * GP_E* when unknown.
	 */
	int (*minor)(void *state, int index);
	/*
	 * Optional: each process's SM utilisation on GPU index (percent,
	 * averaged over the samples since the last call). OUT: pids[i],
	 * util[i] (at most max). Returns how many, or GP_E*.
	 */
	int (*process_util)(void *state, int index, pid_t *pids, int *util,
	    int max);
	/*
	 * Optional: the device memory process pid holds on GPU index (its
	 * context included), bytes; GP_ENOENT when it holds none or the
	 * backend cannot say.
	 */
	int64_t (*process_bytes)(void *state, int index, pid_t pid);
};

extern const struct gp_gpu_ops gp_gpu_nvml_ops;
extern const struct gp_gpu_ops gp_gpu_fake_ops;

int gp_gpu_discover(const char *fake_spec, struct gp_gpu_info **out, int *n,
    char *err, size_t errlen);

/*
 * Parses a --fake-gpus spec "N[:MODEL[:MEM_MIB[:CAPABILITY]]]" (N in
 * 0..64; MODEL defaults to "Fake GPU", MEM_MIB to 16384 and accepts
 * "40G"-style sizes; CAPABILITY "8.0", default unknown). OUT (only on
 * success): count, model, mem_mib, *capability (x 10, 0: unknown; may be
 * NULL). 0 or GP_EINVAL.
 */
int gp_gpu_fake_parse(const char *spec, int *count, char *model,
    size_t modellen, int64_t *mem_mib, int *capability);
/* The fake backend's side of gp_gpu_set_fake_procs (state: its own). */
int gp_gpu_fake_procs_file(void *state, const char *path);

/*
 * The agent's handle: a backend with its GPU list. gp_gpu_open picks the
 * fake backend when fake_spec is not NULL, else NVML; a missing NVML is
 * not an error (0 GPUs, a clear log line). Returns NULL with err set on
 * failure.
 */
struct gp_gpu_set {
	const struct gp_gpu_ops *ops;
	void *state;
	struct gp_gpu_info *gpus;
	int n;
};
int gp_gpu_open(const char *fake_spec, const char *node_name,
    struct gp_gpu_set *set, char *err, size_t errlen);
void gp_gpu_close(struct gp_gpu_set *set);
/*
 * What GPU index does now (see the ops' usage). With no backend, or on a
 * backend error, writes zeros and -1 for the unknown sensors and returns
 * the error (0 on success).
 */
int gp_gpu_usage(struct gp_gpu_set *set, int index, int busy,
    struct gp_gpu_usage *usage);

/*
 * The minor number of GPU index's device node /dev/nvidia<minor> (the
 * container executor gives a job the nodes of its GPUs only): what the
 * backend says, else the index.
 */
int gp_gpu_minor(struct gp_gpu_set *set, int index);

/*
 * Each process's SM utilisation on GPU index (see the ops' process_util).
 * Returns how many it wrote, GP_ENOENT when the backend cannot say, or
 * GP_E*.
 */
int gp_gpu_process_util(struct gp_gpu_set *set, int index, pid_t *pids,
    int *util, int max);

/* The ops' process_bytes, or GP_ENOENT where the backend has none. */
int64_t gp_gpu_process_bytes(struct gp_gpu_set *set, int index, pid_t pid);

/*
 * Owner presence: how many processes that are not the pool's use GPU
 * index (a process is the pool's when its cgroup is one the agent made,
 * see gp_gpu_cgroup_is_pool). OUT: pids (the first max of them; may be
 * NULL when max is 0). Returns that count (0 without a backend) or GP_E*.
 * NVML lists compute and graphics processes; the fake backend reads the
 * file given to gp_gpu_set_fake_procs.
 */
int gp_gpu_foreign_processes(struct gp_gpu_set *set, int index, pid_t *pids,
    int max);

/*
 * Test hook (agent --fake-gpu-procs FILE), fake backend only: FILE holds
 * lines "GPU_INDEX PID" (# comments, blank lines); a listed pid uses that
 * GPU while it is alive. A missing file means no process. Re-read on
 * every gp_gpu_foreign_processes. Returns 0, or GP_EINVAL when set is not
 * the fake backend or path is too long.
 */
int gp_gpu_set_fake_procs(struct gp_gpu_set *set, const char *path);

/*
 * 1 when the text of a /proc/PID/cgroup file names a cgroup the agent
 * made for a job (a path containing "/gpupool-"), else 0.
 */
int gp_gpu_cgroup_is_pool(const char *cgroup_text);
/* 1 when /proc/<pid>/cgroup says pid is the pool's; 0 (unreadable too). */
int gp_gpu_pid_is_pool(pid_t pid);

/*
 * For tests (gpu_nvml.c): one NVML process-list call through fn, an
 * nvmlDeviceGet*RunningProcesses[_v2|_v3] of that version (1, 2, 3),
 * appending the pids it reports to pids[*n..max). Returns 0 or GP_E*.
 */
int gp_gpu_nvml_processes_call(int (*fn)(void *, unsigned int *, void *),
    int version, void *dev, pid_t *pids, int *n, int max);

#endif
