/*
 * executor.h: the agent's job table. One thread owns every job process:
 * it starts jobs in sandboxes, pumps their output, enforces time limits,
 * kills on request and reaps, all from one epoll loop over pidfds and
 * pipes (no sleeping, no SIGCHLD handler). What happens to a job is told
 * through callbacks, called on the executor thread.
 */
#ifndef GP_AGENT_EXECUTOR_H
#define GP_AGENT_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/assignment.h"
#include "agent/cgroup.h"
#include "agent/gpu.h"
#include "agent/sandbox.h"

struct gp_exec_result {
	const char *reason;	/* exited killed cancelled timeout start_failed */
	int exit_code;		/* for "exited" */
	int signal;		/* for "killed", "cancelled", "timeout" */
	char message[512];	/* for "start_failed"; else "" */
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

struct gp_exec_config {
	const struct gp_sandbox_user *user;
	const struct gp_cgroups *cgroups;
	const char *work_dir;	/* jobs run in <work_dir>/jobs/<id>-<attempt> */
	const struct gp_gpu_info *gpus;
	int ngpus;
	int gpu_uuids;		/* CUDA_VISIBLE_DEVICES by UUID, not index */
	int64_t pids_max;	/* per job; 0 means GP_CGROUP_PIDS_MAX */
	int keep_workdir;	/* leave job directories to the callee */
};

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

#endif
