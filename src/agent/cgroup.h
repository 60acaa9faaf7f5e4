/*
 * cgroup.h: one cgroup per job for memory and pids limits and for killing
 * a whole job. Works on cgroup v2 (pure or the hybrid "unified" mount when
 * it has the controllers), else on v1 memory and pids hierarchies, else
 * not at all (said once in the log; jobs then run without limits).
 */
#ifndef GP_AGENT_CGROUP_H
#define GP_AGENT_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

enum gp_cgroup_mode { GP_CGROUP_NONE, GP_CGROUP_V1, GP_CGROUP_V2 };

#define GP_CGROUP_PIDS_MAX 4096

struct gp_cgroups {
	enum gp_cgroup_mode mode;
	char v2[PATH_MAX];	/* v2: <mount>/gpupool */
	char memory[PATH_MAX];	/* v1: <memory mount>/gpupool, or "" */
	char pids[PATH_MAX];	/* v1: <pids mount>/gpupool, or "" */
};

struct gp_cgroup_job {
	char dirs[2][PATH_MAX];	/* the job's cgroup directories */
	int ndirs;
	int procs_fds[2];	/* cgroup.procs of each, open for writing */
	int nfds;
};

/*
 * Names the parents "gpupool-<node>-<pid>" (call before init), so that two
 * agents on one host never share a job's cgroup.
 */
void gp_cgroup_set_scope(const char *node_name);

/* Picks the mode and creates the parents; logs the outcome. */
void gp_cgroup_init(struct gp_cgroups *cg);

/*
 * Creates the job's cgroup(s) named name with the limits (mem_mib 0: no
 * memory limit). OUT: job, with cgroup.procs open (the sandbox child
 * writes "0" into them to join before it forks the job). With mode NONE
 * this succeeds with nothing. Returns 0 or GP_E* (err says why).
 */
int gp_cgroup_create(const struct gp_cgroups *cg, const char *name,
    int64_t mem_mib, int64_t pids_max, struct gp_cgroup_job *job, char *err,
    size_t errlen);
/*
 * Writes the job's limits into cgroups gp_cgroup_create made (a warm
 * slot's, made before its job was known): the memory limit (mem_mib 0:
 * none, left as made) and pids.max. Returns 0 or GP_EIO (err says why).
 */
int gp_cgroup_set_limits(const struct gp_cgroups *cg,
    const struct gp_cgroup_job *job, int64_t mem_mib, int64_t pids_max,
    char *err, size_t errlen);
/*
 * Renames the job's cgroup directories to name (same parents), where the
 * hierarchy allows it (v1 does, v2 does not). dirs follow each rename
 * that worked. Returns 0, or GP_EIO when one kept its old name.
 */
int gp_cgroup_rename(struct gp_cgroup_job *job, const char *name);
/*
 * For a job whose cgroups an OCI runtime makes (at the path
 * gp_cgroup_runtime_path names): fills job with the directories the
 * runtime will make in the memory and pids hierarchies (v1) or the v2
 * tree, without making anything, so that gp_cgroup_kill and
 * gp_cgroup_remove work as for the agent's own. No descriptors.
 */
void gp_cgroup_paths(const struct gp_cgroups *cg, const char *name,
    struct gp_cgroup_job *job);
/*
 * linux.cgroupsPath for a job: "/gpupool-<node>-<pid>/<name>", under the
 * same parent as the agent's own job cgroups. Returns 0, or GP_ENOENT
 * in mode NONE (the runtime then picks its default).
 */
int gp_cgroup_runtime_path(const struct gp_cgroups *cg, const char *name,
    char *out, size_t len);
/*
 * Removes the cgroup "<parent>/<name>" from every mounted cgroup
 * hierarchy (an OCI runtime makes a job's cgroups in all of them),
 * waiting up to timeout_ms for exiting processes to leave. Returns 0 or
 * GP_EIO when one is still there.
 */
int gp_cgroup_remove_everywhere(const struct gp_cgroups *cg, const char *name,
    int timeout_ms);
/*
 * Removes the agent's parent cgroup "gpupool-<node>-<pid>" from every
 * hierarchy (at exit, after the last job). Best effort.
 */
void gp_cgroup_fini(const struct gp_cgroups *cg);
/*
 * Removes the empty cgroups of agents whose pid is gone (killed without
 * their exit path) in every hierarchy; non-empty ones stay. Returns how
 * many parents it removed.
 */
int gp_cgroup_sweep_stale(const struct gp_cgroups *cg);
/* Closes the cgroup.procs descriptors (the parent's copies). */
void gp_cgroup_close_fds(struct gp_cgroup_job *job);
/* SIGKILLs every process in the job's cgroup(s). */
void gp_cgroup_kill(const struct gp_cgroup_job *job);
/* Removes the job's cgroup(s). Returns 0, or GP_EIO while busy. */
int gp_cgroup_remove(struct gp_cgroup_job *job);

/*
 * How many times the kernel's out-of-memory killer killed a process of
 * the job's cgroup ("oom_kill" of memory.events, v2, or of
 * memory.oom_control, v1); 0 when it cannot tell.
 */
long gp_cgroup_oom_kills(const struct gp_cgroup_job *job);

#endif
