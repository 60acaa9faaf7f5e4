/*
 * gpushare.h: the agent's side of enforced GPU sharing (docs/
 * gpu-sharing.md). A job holding a fraction of one GPU runs with
 * libgpupool-cuda.so preloaded (a copy in its work directory, which a
 * container job sees at the same path) and a region file beside it
 * (src/shim/region.h) that carries its memory cap and its share; the
 * provider's tick steers the share it may use now (owner presence,
 * idle time) and reads back what the job uses.
 */
#ifndef GP_AGENT_GPUSHARE_H
#define GP_AGENT_GPUSHARE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/gpu.h"

#define GP_GPUSHARE_REGION ".gpupool-gpushare"
#define GP_GPUSHARE_LIB    ".gpupool-cuda.so"

/*
 * Finds libgpupool-cuda.so next to the running executable or in
 * ../lib/gpupool/. OUT: path. Returns 0 or GP_ENOENT.
 */
int gp_gpushare_find_lib(char *path, size_t len);

/*
 * Prepares workdir for a job with a fraction: copies lib there and makes
 * the region (limit_bytes: the cap, 0 for none; share_milli: 1..1000;
 * gpu, or NULL: its context's size, charged to each of the job's
 * processes, and whether the agent will send the job's utilisation).
 * OUT: lib_out, region_out (paths). Returns 0 or GP_E*.
 */
int gp_gpushare_prepare(const char *workdir, const char *lib,
    int64_t limit_bytes, int share_milli, const struct gp_gpu_info *gpu,
    char *lib_out, size_t lib_len, char *region_out, size_t region_len);

struct gp_gpushare_usage {
	int64_t used_bytes, limit_bytes, peak_bytes;
	int share_milli;	/* asked for */
	int effective_milli;	/* allowed now */
	int util;		/* percent, as the library last measured */
	int64_t launches, oom;
};

/*
 * Sets the share the job in workdir may use now (effective_milli >= 0;
 * -1: leave it) and, when host_util >= 0, its utilisation as measured on
 * the host; reads its usage (out may be NULL). Returns 0, GP_ENOENT when
 * the job has no region (a whole-GPU job), or GP_EIO.
 */
int gp_gpushare_steer(const char *workdir, int effective_milli,
    int host_util, struct gp_gpushare_usage *out);

/*
 * The job (job_id, attempt) a /proc/PID/cgroup text puts a process in,
 * when it is one of the agent's job cgroups ("/gpupool-<node>-<pid>/
 * <job>-<attempt>"). Returns 1 and writes them, else 0.
 */
int gp_gpushare_cgroup_job(const char *cgroup_text, int64_t *job_id,
    int64_t *attempt);

/*
 * A fraction's share of its GPU's time, thousandths (1..1000): what it
 * asked (gpu_milli), else its memory's part of the GPU's (total_mib).
 */
int gp_gpushare_share_milli(int gpu_milli, int64_t gpu_mem_mib,
    int64_t total_mib);

/*
 * The share a job may use now: its own (share_milli); 1000 when it is
 * alone on its GPU and the policy is elastic; at most throttle_milli
 * while the owner uses the GPU (throttle_milli 0: no throttle).
 */
int gp_gpushare_effective(int share_milli, int alone, int strict,
    int throttle_milli);

#endif
