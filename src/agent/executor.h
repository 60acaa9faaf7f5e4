/*
 * executor.h: the agent's job table. One thread owns every job process:
 * it starts jobs, pumps their output, enforces time limits, kills on
 * request, forwards signals and reaps, all from one epoll loop over
 * pidfds and pipes (no sleeping, no SIGCHLD handler). What happens to a
 * job is told through callbacks, called on the executor thread.
 *
 * How a job's processes are made is an implementation behind struct
 * gp_executor_ops: the plain sandbox (sandbox.c) for commands, the OCI
 * container (container.c) for jobs with an image. Both give the loop the
 * same things: a pidfd whose process is pid 1 of the job's pid namespace
 * (killing it kills the job), the output pipe, and the status pipe on
 * which the job's init writes struct gp_sandbox_record.
 */
#ifndef GP_AGENT_EXECUTOR_H
#define GP_AGENT_EXECUTOR_H

#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/assignment.h"
#include "agent/cgroup.h"
#include "agent/gpu.h"
#include "agent/netns.h"
#include "agent/sandbox.h"

struct gp_exec_result {
	const char *reason;	/* exited killed cancelled timeout start_failed */
	int exit_code;		/* for "exited" */
	int signal;		/* for "killed", "cancelled", "timeout" */
	char message[512];	/* for "start_failed"; else "" */
	int64_t net_sent;	/* bytes over the job's veth pair */
	int64_t net_received;
	/*
	 * The job's directory, valid during the callback. With
	 * keep_workdir the callee removes it (after the final checkpoint
	 * upload); else it is already gone.
	 */
	const char *workdir;
};

struct gp_exec_events {
	void *arg;
	/* The command was exec'd; pid is init's, in the agent's namespace. */
	void (*started)(void *arg, const struct gp_attempt_id *id, pid_t pid);
	/* Bytes of the combined stdout/stderr, in order. */
	void (*output)(void *arg, const struct gp_attempt_id *id,
	    const char *data, size_t len);
	/* The job is over and every byte of output was passed on. */
	void (*finished)(void *arg, const struct gp_attempt_id *id,
	    const struct gp_exec_result *result);
};

struct gp_containers;
struct gp_spawner;

struct gp_exec_config {
	const struct gp_sandbox_user *user;
	const struct gp_cgroups *cgroups;
	const char *work_dir;	/* jobs run in <work_dir>/jobs/<id>-<attempt> */
	const struct gp_gpu_info *gpus;
	int ngpus;
	int gpu_uuids;		/* CUDA_VISIBLE_DEVICES by UUID, not index */
	/*
	 * The minor number of each GPU's /dev/nvidia<minor> (ngpus of them),
	 * or NULL: the index. A plain job's /dev has its own GPUs' nodes.
	 */
	const int *gpu_minors;
	/*
	 * libgpupool-cuda.so, preloaded into jobs holding a fraction of a
	 * GPU (agent/gpushare.h); NULL: fractions are not enforced.
	 */
	const char *gpu_shim;
	int64_t pids_max;	/* per job; 0 means GP_CGROUP_PIDS_MAX */
	int keep_workdir;	/* leave job directories to the callee */
	/* Container jobs: NULL refuses them, saying containers_why. */
	struct gp_containers *containers;
	const char *containers_why;
	/*
	 * Plain jobs: paths hidden (an empty read-only tmpfs, or /dev/null
	 * over a file) besides /home, /root, /run/user and the agent's work
	 * directory; NULL-ended or NULL. The agent adds its token file.
	 */
	char *const *hidden_paths;
	/*
	 * 0: plain jobs start from a warm sandbox when one is ready (init
	 * cloned ahead into a fresh cgroup; docs/agent.md); 1: every job
	 * is cloned when it comes (tests of that path).
	 */
	int no_warm;
	/*
	 * Jobs' networks (netns.h): each job gets a namespace of its own;
	 * NULL: jobs share the agent's (unit tests of the executor).
	 */
	struct gp_net *net;
	/*
	 * The helper that clones each job's init (agent/spawner.h), NULL:
	 * the executor's thread clones them, copying the agent.
	 */
	struct gp_spawner *spawner;
	/*
	 * Plain jobs' minimal root, bound once and copied by each job
	 * (sandbox.h); NULL: each job's init binds its root path by path.
	 */
	struct gp_sandbox_template *root_template;
};

/* One job as the executor and its implementation see it. */
struct gp_exec_job {
	const struct gp_exec_config *cfg;
	const struct gp_assignment *a;	/* during prepare and spawn only */
	char name[64];			/* "<job>-<attempt>" */
	char workdir[PATH_MAX];

	/* Filled by prepare. */
	char **argv;		/* what init runs, NULL-ended, owned */
	const char *argv0;	/* the job's command (for messages) */
	uid_t uid;		/* owner of the work directory, or -1 */
	gid_t gid;
	char **base_env;	/* before the job's env (an image's), or NULL */
	char **device_env;	/* after it (GPU edits), or NULL; owned */
	int gpus_renumbered;	/* CUDA_VISIBLE_DEVICES 0..n-1 (not host) */
	int runtime_cgroups;	/* the runtime makes the job's cgroups */
	void *priv;		/* the implementation's */
	/* Made by the executor before spawn (cfg->net): spawn joins it. */
	struct gp_net_job net;

	/* Filled by the executor before spawn. */
	char **env;		/* NULL-ended, owned */
	int out_fd;		/* write end: stdout and stderr */
	int status_fd;		/* write end: init's records */
	struct gp_cgroup_job cgroup;
	/*
	 * Set by the executor during spawn only: a plain job goes to this
	 * warm init (already in x->cgroup) instead of a new clone.
	 */
	struct gp_sandbox_warm *warm;
};

/*
 * A way to run jobs. Called on the executor thread, in this order:
 * prepare, then (after the executor made the work directory, the
 * environment, the cgroups and the pipes) spawn; release once after the
 * processes are reaped, also when prepare or spawn failed.
 */
struct gp_executor_ops {
	const char *name;
	/* Fills the job's prepare fields. 0, or GP_E* with err set. */
	int (*prepare)(struct gp_exec_job *job, char *err, size_t errlen);
	/*
	 * Starts the job. OUT: *pid, *pidfd of its pid 1. 0, or GP_E* with
	 * err set.
	 */
	int (*spawn)(struct gp_exec_job *job, pid_t *pid, int *pidfd,
	    char *err, size_t errlen);
	/* A short name for a setup stage of a GP_SANDBOX_SETUP_FAILED. */
	const char *(*stage_name)(int stage);
	/*
	 * Why a job that was not killed ended without any record from its
	 * init (a runtime that failed): into msg, or "" (may be NULL).
	 */
	void (*explain)(struct gp_exec_job *job, char *msg, size_t len);
	/* Releases priv and whatever spawn left outside the job. */
	void (*release)(struct gp_exec_job *job);
};

extern const struct gp_executor_ops gp_sandbox_exec_ops;   /* sandbox.c */
extern const struct gp_executor_ops gp_container_exec_ops; /* container.c */

/* A job's checkpoint directory: <work_dir>/jobs/<id>-<attempt>/checkpoint */
void gp_executor_checkpoint_dir(const struct gp_exec_config *cfg,
    const struct gp_attempt_id *id, char *out, size_t len);
/*
 * A job's output directory ($GPUPOOL_OUTPUT_DIR, collected when it ends):
 * <work_dir>/jobs/<id>-<attempt>/output
 */
void gp_executor_output_dir(const struct gp_exec_config *cfg,
    const struct gp_attempt_id *id, char *out, size_t len);

enum gp_exec_kill {
	GP_EXEC_CANCELLED = 1,	/* the coordinator cancelled it */
	GP_EXEC_STALE,		/* the coordinator no longer wants it */
	GP_EXEC_RECLAIMED,	/* the owner takes its GPU back */
};

/*
 * Starts the executor thread. cfg and what it points to, and events,
 * must outlive the executor. Returns NULL on failure (logged).
 */
struct gp_executor *gp_executor_new(const struct gp_exec_config *cfg,
    const struct gp_exec_events *events);

/*
 * Queues an assignment to start. Takes what *a owns (and zeroes *a) on
 * success. Returns 0 or GP_ENOMEM.
 */
int gp_executor_start(struct gp_executor *ex, struct gp_assignment *a);

/* Queues a kill of the whole job; unknown attempts are ignored. */
void gp_executor_kill(struct gp_executor *ex, const struct gp_attempt_id *id,
    enum gp_exec_kill how);

/* Sends sig to the job's command (through its init); unknown: ignored. */
void gp_executor_signal(struct gp_executor *ex,
    const struct gp_attempt_id *id, int sig);

/* Kills every job, waits for each to be reaped, stops the thread. */
void gp_executor_free(struct gp_executor *ex);
/* A running job's network, as gp_executor_networks copies it. */
struct gp_exec_network {
	struct gp_attempt_id id;
	struct gp_net_job net;	/* a copy: for gp_net_job_bytes only */
};
/*
 * The networks of the running jobs (any thread). OUT: out[0..max-1].
 * Returns how many there are (may exceed max: only max are copied).
 */
int gp_executor_networks(struct gp_executor *ex, struct gp_exec_network *out,
    int max);
/*
 * What a new process needs to join a running job (agent/attach.c): its
 * init, its user, its environment, its cgroup. A copy (any thread);
 * release with gp_exec_enter_fini.
 */
struct gp_exec_enter {
	struct gp_attempt_id id;
	pid_t pid;		/* the job's init, in the agent's pid namespace */
	uid_t uid;		/* who its command runs as */
	gid_t gid;
	int userns;		/* the job has a user namespace of its own */
	int container;		/* an OCI container (its runtime's init) */
	char cgroup_procs[PATH_MAX]; /* its cgroup.procs, or "" */
	char **env;		/* its environment, NULL-ended, owned */
};
/* 0 with *out, or GP_ENOENT: no such running attempt here. */
int gp_executor_enter_info(struct gp_executor *ex,
    const struct gp_attempt_id *id, struct gp_exec_enter *out);
void gp_exec_enter_fini(struct gp_exec_enter *e);
/* How many jobs started from a warm sandbox so far (any thread). */
unsigned long gp_executor_warm_starts(struct gp_executor *ex);

#endif
