/*
 * agentd.h: what the agent's files share: the agent's state and the
 * prototypes of report.c and link.c, grouped by file. The sandbox, the
 * executor, cgroups, GPUs and the decoders have their own headers.
 */
#ifndef GP_AGENTD_H
#define GP_AGENTD_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "agent/assignment.h"
#include "agent/cgroup.h"
#include "agent/executor.h"
#include "agent/gpu.h"
#include "agent/sandbox.h"

struct gp_reports;
struct gp_provider;
struct gp_datacache;
struct gp_image_cache;

struct gp_agent {
	/* Configuration, fixed after start. */
	const char *url;
	const char *token;	/* never logged */
	const char *ca_file;
	char name[GP_NAME_MAX + 1];
	char work[PATH_MAX];
	/* Where other nodes reach this one (a gang's MASTER_ADDR); "": the
	 * address the coordinator sees. */
	char advertise_addr[256];
	int cpus;
	int64_t mem_mib;
	struct gp_gpu_set gpus;
	int gpu_minors[64];	/* of /dev/nvidia<minor>, by GPU index */
	struct gp_sandbox_user user;
	struct gp_cgroups cgroups;
	struct gp_exec_config exec_cfg;
	struct gp_net *net;		/* jobs' networks (netns.h) */
	struct gp_overlay *overlay;	/* gangs across NATs (overlay.h) */
	char gpu_shim[PATH_MAX];	/* libgpupool-cuda.so; "": none */
	struct gp_exec_events exec_events;
	struct gp_containers *containers;	/* NULL: no container jobs */
	char containers_why[512];		/* why not */
	char *hidden[3];	/* token files: plain jobs never see them */

	struct gp_executor *executor;
	struct gp_spawner *spawner;	/* agent/spawner.h; NULL: none */
	struct gp_reports *reports;
	struct gp_provider *provider;
	struct gp_datacache *datacache; /* data sets jobs mount */
	struct gp_image_cache *images;	/* agent/image.c */

	/* The owner's side (provider.c); paths "" when not given. */
	char policy_path[PATH_MAX];
	char control_path[PATH_MAX];
	uid_t owner_uid;
	/*
	 * gp_mono_ms() of the last heartbeat that reached the coordinator
	 * (its send time) or was refused outright (coordinator process
	 * down: nothing can be requeued meanwhile). The provider fences
	 * (kills its jobs) when this grows older than the lease allows.
	 */
	_Atomic int64_t last_contact_mono;

	/* Link state, under lock; cond signals a change of node_id. */
	pthread_mutex_t lock;
	/*
	 * Held by the poll thread while it applies an answer; gp_link_stop
	 * takes it once after setting stop, so that no answer is applied
	 * after the provider and executor are freed (the poll thread is
	 * detached: a long poll may hold it for a minute).
	 */
	pthread_mutex_t apply_lock;
	pthread_cond_t cond;
	int64_t node_id;	/* 0 while (re-)registering */
	int heartbeat_ms;
	int lease_ms;
	atomic_int stop;	/* set on SIGINT/SIGTERM */
	atomic_int fatal;	/* the coordinator refused us for good */
	atomic_int left;	/* the owner left: never heartbeat or register again */
	/*
	 * The coordinator takes jobs' network bytes (its last heartbeat
	 * answer said "job_network": true): the heartbeat's "network" and
	 * the finished report's net_sent_bytes, net_received_bytes.
	 * net_refused: it refused them once (400); never again.
	 */
	atomic_int coord_net, net_refused;
	/*
	 * Several coordinators: the index (in url's list) of the one the
	 * heartbeat thread reaches; every other client of the agent begins
	 * its requests there and lets go of one held by a coordinator that
	 * froze when it changes (gp_http_client_follow).
	 */
	atomic_int coord_at;
};

/* report.c */
struct gp_reports *gp_reports_new(struct gp_agent *agent, int nthreads);
/* Stops the senders, giving them up to grace_ms to deliver. */
void gp_reports_free(struct gp_reports *r, int grace_ms);
/* An attempt the coordinator assigned: tracked until finished is acked. */
int gp_reports_add(struct gp_reports *r, const struct gp_attempt_id *id);
/* Drops an attempt without reporting anything more (kill lists, 409). */
void gp_reports_forget(struct gp_reports *r, const struct gp_attempt_id *id);
/* The running list for register and heartbeat (a new JSON array). */
json_t *gp_reports_running(struct gp_reports *r);
/* Executor callbacks; arg is the struct gp_reports. */
void gp_reports_on_started(void *arg, const struct gp_attempt_id *id,
    pid_t pid);
void gp_reports_on_output(void *arg, const struct gp_attempt_id *id,
    const char *data, size_t len);
void gp_reports_on_finished(void *arg, const struct gp_attempt_id *id,
    const struct gp_exec_result *result);
/* The checkpoint version an attempt started from (sent with "started"). */
void gp_reports_set_restored(struct gp_reports *r,
    const struct gp_attempt_id *id, int64_t version);
/* Waits until every attempt's reports are delivered. 0 or GP_ETIMEDOUT. */
int gp_reports_wait_empty(struct gp_reports *r, int64_t timeout_ms);

/* provider.c: the owner's side: policy, reclaim, checkpoints, fencing. */
/* attach.c: dials the coordinator for stream r and serves it (a thread). */
struct gp_stream_request;
void gp_attach_stream(struct gp_agent *ag, const struct gp_stream_request *r);
/*
 * Ends the streams into jobs (each client is told the agent stops; what a
 * stream started ends with it), starts no more, and waits up to wait_ms
 * for their threads; returns how many are still running.
 */
int gp_attach_stop(int64_t wait_ms);
/* A NOTICE frame with text to every live stream (the agent's stop). */
void gp_attach_notice_all(const char *text);
/*
 * The provider's reclaim hook (gp_provider_set_reclaim_hook): a NOTICE
 * to every stream of the attempt, sent by its own thread within a second
 * ("gpupool: the owner takes this machine back (reclaimed): job 12 ends
 * in 30 s"). Does not block.
 */
struct gp_attempt_id;
void gp_attach_reclaim_notice(void *arg, const struct gp_attempt_id *id,
    const char *reason, int64_t grace_s);

struct gp_provider *gp_provider_new(struct gp_agent *agent, char *err,
    size_t errlen);
/* Stops the threads and the control socket (jobs are the executor's). */
void gp_provider_free(struct gp_provider *p);
/* Executor callbacks (arg: the provider); they pass on to report.c. */
void gp_provider_on_started(void *arg, const struct gp_attempt_id *id,
    pid_t pid);
void gp_provider_on_output(void *arg, const struct gp_attempt_id *id,
    const char *data, size_t len);
void gp_provider_on_finished(void *arg, const struct gp_attempt_id *id,
    const struct gp_exec_result *result);
/* From the coordinator: a new attempt (takes *a), a cancel, a kill. */
void gp_provider_assign(struct gp_provider *p, struct gp_assignment *a);
void gp_provider_cancel(struct gp_provider *p, const struct gp_attempt_id *id);
void gp_provider_drop(struct gp_provider *p, const struct gp_attempt_id *id);
/* The user asked for an upload now. */
void gp_provider_checkpoint_now(struct gp_provider *p,
    const struct gp_attempt_id *id);
/*
 * The coordinator asks the job to save and stop (a preemption, a gang
 * that lost a part): as a graceful reclaim (checkpoint signal, the
 * owner's grace, final upload), reported with reason. Unknown: ignored.
 */
void gp_provider_stop(struct gp_provider *p, const struct gp_attempt_id *id,
    const char *reason);
/* What the node offers now (new object), for register and heartbeats. */
json_t *gp_provider_offer_json(struct gp_provider *p);
/*
 * Ends every job as the owner would on leave (checkpoint signal, grace,
 * final upload, "reason" reported) and waits until they are reported.
 */
void gp_provider_drain(struct gp_provider *p, const char *reason);
/* Re-reads the policy file (SIGHUP). */
void gp_provider_reload(struct gp_provider *p);
/* The policy's network and net-rate (read once, at start). */
void gp_provider_net_policy(struct gp_provider *p, enum gp_net_policy *net,
    int64_t *rate_bps);
/* The GPUs a running job holds now (bit i: GPU i). */
uint64_t gp_provider_busy_gpus(struct gp_provider *p);
/*
 * Interactive jobs (docs/interactive.md): the owner ends one (a reclaim,
 * a closing window, presence, leaving) with no checkpoint signal; it is
 * killed after the grace (grace_s, 0: now) and not moved elsewhere. The
 * hook is how the warning reaches the job's terminals: the interactive
 * relay (issue 17 part A) registers it and writes, for example, "gpupool:
 * the owner reclaims this machine: this session ends in 30 s" to every
 * stream attached to the attempt. Called once per attempt, with the
 * provider's lock held: it must not block or call back into the provider
 * (queue the message and return). reason: "reclaimed", "owner_present",
 * "window_closed", "provider_left", ... A NULL fn removes the hook.
 */
typedef void (*gp_provider_reclaim_fn)(void *arg,
    const struct gp_attempt_id *id, const char *reason, int64_t grace_s);
void gp_provider_set_reclaim_hook(struct gp_provider *p,
    gp_provider_reclaim_fn fn, void *arg);
/*
 * What the fractional jobs use, from libgpupool-cuda.so's regions (read
 * once a second): [{job_id, attempt, gpu, mem_used_mib, mem_limit_mib,
 * share_milli, effective_milli, util, oom}]. New reference.
 */
json_t *gp_provider_gpushare_json(struct gp_provider *p);
/* What /metrics shows of the owner's side, copied under the lock. */
#define GP_PROVIDER_END_REASONS 6
struct gp_provider_gpu {
	const char *state;	/* as `provider status`: running, idle, ... */
	int lent;		/* in the offer the coordinator knows */
	int64_t job_id, attempt; /* 0: no job */
	char user[GP_NAME_MAX + 1], name[GP_NAME_MAX + 1];
};
struct gp_provider_snapshot {
	int ngpus;
	struct gp_provider_gpu gpus[64];
	uint64_t busy;
	int jobs, paused, leaving, fenced, window_open;
	int64_t uploads, upload_failures, upload_bytes;
	int64_t restores, restore_failures;
	/* Jobs ended on the owner's behalf, by reason. */
	const char *end_reasons[GP_PROVIDER_END_REASONS];
	int64_t owner_ends[GP_PROVIDER_END_REASONS];
};
void gp_provider_snapshot(struct gp_provider *p,
    struct gp_provider_snapshot *out);

/* link.c */
/* Starts the heartbeat (which registers first) and poll threads. */
int gp_link_start(struct gp_agent *agent);
/* Waits for the heartbeat thread; the poll thread is left to exit. */
void gp_link_stop(struct gp_agent *agent);
/* Blocks until registered or stopping; returns the node id or 0. */
int64_t gp_link_node_id(struct gp_agent *agent);
/* Kills and forgets each attempt of a "kill" list. */
void gp_link_apply_kills(struct gp_agent *agent, json_t *list);

#endif
