/*
 * provider.c: the owner's side of the agent, and what keeps a job's work
 * safe when its GPU goes away.
 *
 * It sits between the coordinator link and the executor: every attempt
 * the coordinator assigns becomes a `pjob` here. A pjob is prepared before
 * it starts: its container image made ready (agent/image.c: the owner's
 * trust checked, every digest verified, layers from the cache or fetched
 * and unpacked) when it has one, and restored (its latest checkpoint
 * downloaded) when it ran before,
 * uploads its checkpoint directory while it runs (at most every
 * checkpoint_every_s, when the job wrote a new COMPLETE marker, or when
 * the user asks), and on a reclaim gets the checkpoint signal, the
 * owner's grace period, then SIGKILL; its last consistent version is
 * uploaded before the coordinator hears that it ended, so the next
 * attempt resumes from it.
 *
 * The owner drives it through the control socket (control.c): pause,
 * resume, reclaim, leave, status, and the policy file (policy.c), which
 * is re-read when it changes or on SIGHUP. A tick thread applies what
 * changes with time: availability windows, the owner's own processes on
 * a lent GPU (owner presence), grace deadlines, and fencing: when the
 * coordinator has been unreachable for longer than the lease allows
 * (but not refusing connections, which means it is down and cannot
 * requeue anything), the agent kills its jobs itself, before the
 * coordinator gives them to another node, so that no job ever runs
 * twice.
 *
 * Before a job starts, a worker also makes its data sets ready (the
 * data cache, datacache.c: fetched once, kept for the next job) and
 * fills the assignment's mounts; when it ends, what the job left in its
 * output directory is uploaded before the finished report (docs/data.md).
 *
 * Threads: the tick thread, WORKERS checkpoint workers (uploads, data
 * sets and restores, which block on the network), and the control
 * socket's. One mutex guards everything here; no network call is made
 * holding it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agentd.h"
#include "transfer.h"
#include "agent/control.h"
#include "agent/datacache.h"
#include "agent/gpushare.h"
#include "agent/image.h"
#include "agent/policy.h"
#include "ckpt.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "util.h"

#define WORKERS		  2
#define TICK_MS		  200
#define POLICY_CHECK_MS	  1000
#define PRESENCE_CHECK_MS 1000
#define UPLOAD_TRIES	  3
#define RESTORE_TRIES	  3
#define RESTORE_FAILS_MAX 3

enum phase {
	PJ_RESTORING,	/* waiting for a worker to prepare its image, make
			   its data sets ready and download its checkpoint */
	PJ_RUNNING,	/* handed to the executor */
	PJ_FINAL,	/* ended: final upload, then the finished report */
};

struct pjob {
	struct gp_attempt_id id;
	char user[GP_NAME_MAX + 1];
	char name[GP_NAME_MAX + 1];
	int gpus[GP_GPUS_MAX];
	int ngpus;
	int64_t started_mono;
	/*
	 * The job's pid namespace (the inode of its init's
	 * /proc/PID/ns/pid; 0: not known): NVML's pids of the job are
	 * found by it where no cgroup names the job.
	 */
	ino_t pidns;
	int64_t every_ms;
	int sig;
	char dir[PATH_MAX];		/* its checkpoint directory */
	struct gp_ckpt_mark mark;
	int64_t version;		/* last committed or restored */
	int64_t version_mono;		/* when (0: never) */
	int64_t last_try_mono;		/* last upload attempt ended */
	int busy;			/* a worker has it */
	int want_upload;		/* the user asked */
	int no_upload;			/* a gang's part K > 0: rank 0 saves */
	int stale;			/* the coordinator disowned it */
	int cancelled;
	enum phase phase;
	struct gp_assignment pending;	/* PJ_RESTORING: to start after */
	struct gp_image_hold *image;	/* the image layers it uses */
	/* A fraction's use from its region (gpushare_steer). */
	struct gp_gpushare_usage share;
	int have_share;
	int share_milli;	/* a fraction's (0: a whole GPU or none) */
	/* Ending it on the owner's behalf. */
	const char *end_reason;		/* "reclaimed", ... or NULL */
	int interactive;		/* no checkpoint signal; the hook */
	int64_t end_mono;		/* when it was asked to end */
	int64_t kill_at_mono;		/* graceful: SIGKILL after this */
	int killed;
	/* Once ended. */
	int exited;
	int64_t exited_mono;
	struct gp_exec_result result;
	char message[512];
	char workdir[PATH_MAX];
	/* Data set versions held in the data cache while the job runs. */
	struct gp_data_ref *held;
	int nheld;
	struct pjob *next;
};

struct gp_provider {
	struct gp_agent *ag;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* pjobs changed; work to do */
	struct pjob *jobs;
	/* The owner's state. */
	struct gp_policy policy;
	int have_policy_file;
	struct stat policy_st;
	char policy_error[PATH_MAX + 600];
	int paused, leaving;
	uint64_t reclaimed;		/* by `provider reclaim`, until resume */
	uint64_t present;		/* owner processes seen on these */
	uint64_t owner_busy;		/* same, under owner-presence throttle */
	int present_pids[GP_GPUS_MAX];
	int window_open;
	int64_t window_next_s;
	int fenced;
	int64_t policy_gen;		/* bumped by each policy (re)load */
	int64_t offer_policy_gen;	/* the one the offer carries */
	/* The offer the coordinator knows. */
	int64_t offer_seq;
	uint64_t offer_lent;
	int offer_accepting;
	/* Threads. */
	int stop;
	pthread_t tick, workers[WORKERS];
	int nworkers, tick_started;
	struct gp_control *control;
	/* How recent attempts ended, for the reclaim command's answer. */
	struct ended {
		struct gp_attempt_id id;
		int64_t version;
		int killed;
	} recent[64];
	int nrecent;
	/* For /metrics (agent/metrics.c): counted as they happen. */
	_Atomic int64_t uploads, upload_failures, upload_bytes;
	_Atomic int64_t restores, restore_failures;
	int64_t owner_ends[GP_PROVIDER_END_REASONS]; /* under lock */
	/* Interactive jobs ended by the owner: their terminals are told. */
	gp_provider_reclaim_fn reclaim_hook;
	void *reclaim_arg;
};

/* The reasons end_job is given, in gp_provider_snapshot's order. */
static const char *const end_reasons[GP_PROVIDER_END_REASONS] = {
    "reclaimed", "owner_present", "window_closed", "provider_left",
    "agent_stopped", "other"};

/* ---- helpers (call with p->lock held unless said otherwise) ---- */

static uint64_t
all_gpus_mask(const struct gp_provider *p)
{
	int n = p->ag->gpus.n;

	return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}

static uint64_t
job_mask(const struct pjob *j)
{
	uint64_t m = 0;
	int i;

	for (i = 0; i < j->ngpus; i++)
		if (j->gpus[i] >= 0 && j->gpus[i] < 64)
			m |= 1ULL << j->gpus[i];
	return m;
}

/* The GPUs lent now. */
static uint64_t
lent_mask(const struct gp_provider *p)
{
	uint64_t m = 0;
	int i;

	if (p->leaving || !p->window_open)
		return 0;
	for (i = 0; i < p->ag->gpus.n && i < 64; i++)
		if (gp_policy_lends_gpu(&p->policy, i))
			m |= 1ULL << i;
	return m & ~p->reclaimed & ~p->present;
}

static int
accepting(const struct gp_provider *p)
{
	return !p->paused && !p->leaving && !p->fenced;
}

static int
policy_cpus(const struct gp_provider *p)
{
	int c = p->ag->cpus;

	return p->policy.cpus > 0 && p->policy.cpus < c ? p->policy.cpus : c;
}

static int64_t
policy_mem(const struct gp_provider *p)
{
	int64_t m = p->ag->mem_mib;

	return p->policy.mem_mib > 0 && p->policy.mem_mib < m
	    ? p->policy.mem_mib
	    : m;
}

/* Tells the heartbeat thread to beat now (the offer changed). */
static void
kick_heartbeat(struct gp_provider *p)
{
	pthread_mutex_lock(&p->ag->lock);
	pthread_cond_broadcast(&p->ag->cond);
	pthread_mutex_unlock(&p->ag->lock);
}

/* Bumps the offer's sequence when what it says changed. */
static int
offer_update(struct gp_provider *p)
{
	uint64_t lent = lent_mask(p);
	int acc = accepting(p);

	if (lent == p->offer_lent && acc == p->offer_accepting &&
	    p->policy_gen == p->offer_policy_gen)
		return 0;
	p->offer_lent = lent;
	p->offer_accepting = acc;
	p->offer_policy_gen = p->policy_gen;
	p->offer_seq++;
	gp_info("offer changed seq=%lld lent=0x%llx accepting=%d",
	    (long long)p->offer_seq, (unsigned long long)lent, acc);
	return 1;
}

/* 1 when image jobs may come: the owner allows some, and a runtime runs. */
static int
takes_images(const struct gp_provider *p)
{
	return p->policy.images != GP_IMAGES_NONE && p->ag->containers != NULL;
}

static json_t *
offer_json_locked(struct gp_provider *p)
{
	json_t *lent = json_array(), *keys = json_array(), *o;
	int i;

	for (i = 0; i < p->ag->gpus.n && i < 64; i++)
		if (p->offer_lent & (1ULL << i))
			json_array_append_new(lent, json_integer(i));
	/* The coordinator places only what the owner would accept. */
	for (i = 0; i < p->policy.nkeys && i < GP_POLICY_KEYS_MAX; i++)
		json_array_append_new(keys, json_string(p->policy.keys[i].key));
	o = json_pack("{sI so sb si sI sI ss sb so s:s*}", "seq",
	    (json_int_t)p->offer_seq, "lent", lent, "accepting",
	    p->offer_accepting, "cpus", policy_cpus(p), "mem_mib",
	    (json_int_t)policy_mem(p), "max_job_s",
	    (json_int_t)p->policy.max_job_s, "images",
	    gp_policy_images_name(takes_images(p) ? p->policy.images :
	    GP_IMAGES_NONE), "plain_jobs",
	    !p->policy.refuse_plain, "trusted_keys", keys, "network",
	    p->ag->net != NULL ? gp_net_policy_name(gp_net_offer(p->ag->net)) :
	    NULL);
	/* Only when said: a coordinator before interactive jobs knows
	 * neither field and would refuse the offer. */
	if (o != NULL && p->policy.refuse_interactive)
		json_object_set_new(o, "interactive", json_false());
	/* Only when not: this agent cannot link a gang's parts to other
	 * nodes (not root, or network none: netns.c), so it gets none. */
	if (o != NULL && p->ag->net != NULL && !gp_net_gangs(p->ag->net))
		json_object_set_new(o, "gangs", json_false());
	if (o != NULL && p->policy.interactive_gpus > 0)
		json_object_set_new(o, "interactive_gpus",
		    json_integer(p->policy.interactive_gpus));
	return o;
}

void
gp_provider_set_reclaim_hook(struct gp_provider *p, gp_provider_reclaim_fn fn,
    void *arg)
{
	pthread_mutex_lock(&p->lock);
	p->reclaim_hook = fn;
	p->reclaim_arg = arg;
	pthread_mutex_unlock(&p->lock);
}

json_t *
gp_provider_offer_json(struct gp_provider *p)
{
	json_t *o;

	pthread_mutex_lock(&p->lock);
	o = offer_json_locked(p);
	pthread_mutex_unlock(&p->lock);
	return o;
}

static struct pjob *
find(struct gp_provider *p, const struct gp_attempt_id *id)
{
	struct pjob *j;

	for (j = p->jobs; j != NULL; j = j->next)
		if (j->id.job_id == id->job_id && j->id.attempt == id->attempt)
			return j;
	return NULL;
}

static void
unlink_job(struct gp_provider *p, struct pjob *j)
{
	struct pjob **pp;

	for (pp = &p->jobs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	gp_assignment_fini(&j->pending);
	free(j->held);
	gp_image_release(p->ag->images, j->image);
	free(j);
}

/*
 * Asks a job to end on the owner's behalf: graceful sends the checkpoint
 * signal and arms the grace deadline; otherwise it is killed now.
 */
static void
end_job(struct gp_provider *p, struct pjob *j, const char *reason,
    int graceful)
{
	int64_t now = gp_mono_ms();

	if (j->exited || j->phase == PJ_FINAL)
		return;
	if (j->end_reason == NULL) {
		int k;
		j->end_reason = reason;
		j->end_mono = now;
		for (k = 0; k + 1 < GP_PROVIDER_END_REASONS &&
		     strcmp(reason, end_reasons[k]) != 0; k++)
			;
		p->owner_ends[k]++;
	}
	if (j->phase == PJ_RESTORING) {
		/* Not started: the worker ends it once its download is over. */
		pthread_cond_broadcast(&p->cond);
		return;
	}
	if (j->interactive && j->kill_at_mono == 0 && !j->killed) {
		/*
		 * A person is at its terminal: no checkpoint signal (a shell
		 * dies of SIGUSR1), a warning through the relay, and the end
		 * after the grace; the coordinator does not move it.
		 */
		int64_t grace_s = graceful ? p->policy.grace_s : 0;
		gp_info("interactive job ends on the owner's behalf job=%lld "
		    "attempt=%lld reason=%s grace_s=%lld",
		    (long long)j->id.job_id, (long long)j->id.attempt, reason,
		    (long long)grace_s);
		if (p->reclaim_hook != NULL)
			p->reclaim_hook(p->reclaim_arg, &j->id, reason,
			    grace_s);
		if (grace_s > 0) {
			j->kill_at_mono = now + grace_s * 1000;
			return;
		}
	}
	if (graceful && p->policy.grace_s > 0 && !j->killed) {
		if (j->kill_at_mono == 0) {
			j->kill_at_mono = now + p->policy.grace_s * 1000;
			gp_info("asking job to checkpoint and exit job=%lld "
			    "attempt=%lld reason=%s grace_s=%lld",
			    (long long)j->id.job_id, (long long)j->id.attempt,
			    reason, (long long)p->policy.grace_s);
			gp_executor_signal(p->ag->executor, &j->id, j->sig);
		}
		return;
	}
	if (!j->killed) {
		j->killed = 1;
		gp_info("ending job now job=%lld attempt=%lld reason=%s",
		    (long long)j->id.job_id, (long long)j->id.attempt,
		    reason);
		gp_executor_kill(p->ag->executor, &j->id, GP_EXEC_RECLAIMED);
	}
}

/* Ends every job on a GPU of mask. */
static void
end_jobs_on(struct gp_provider *p, uint64_t mask, const char *reason,
    int graceful)
{
	struct pjob *j;

	for (j = p->jobs; j != NULL; j = j->next)
		if (job_mask(j) & mask)
			end_job(p, j, reason, graceful);
}

/* ---- policy ---- */

static void
policy_apply(struct gp_provider *p)
{
	uint64_t before = p->offer_lent, now_lent;

	if (offer_update(p)) {
		now_lent = p->offer_lent;
		/* GPUs the new policy no longer lends: take them back. */
		end_jobs_on(p, before & ~now_lent & ~p->present &
		    ~p->reclaimed, p->window_open ? "reclaimed" :
		    "window_closed", 1);
		kick_heartbeat(p);
	}
}

/* (Re)reads the policy file; keeps the old policy when it is invalid. */
static void
policy_load(struct gp_provider *p, int force)
{
	struct gp_policy np;
	struct stat st;
	char err[512];
	int line = 0;

	if (p->ag->policy_path[0] == '\0')
		return;
	if (stat(p->ag->policy_path, &st) != 0) {
		if (p->policy_error[0] == '\0' || force)
			gp_warn("policy file unreadable path=%s error=\"%s\"; "
			    "keeping the policy in force",
			    p->ag->policy_path, strerror(errno));
		snprintf(p->policy_error, sizeof(p->policy_error), "%s: %s",
		    p->ag->policy_path, strerror(errno));
		return;
	}
	if (!force && p->have_policy_file &&
	    st.st_mtim.tv_sec == p->policy_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == p->policy_st.st_mtim.tv_nsec &&
	    st.st_size == p->policy_st.st_size &&
	    st.st_ino == p->policy_st.st_ino)
		return;
	p->policy_st = st;
	p->have_policy_file = 1;
	if (gp_policy_load(p->ag->policy_path, &np, &line, err,
	    sizeof(err)) != 0) {
		if (line > 0)
			snprintf(p->policy_error, sizeof(p->policy_error),
			    "%s:%d: %s", p->ag->policy_path, line, err);
		else
			snprintf(p->policy_error, sizeof(p->policy_error),
			    "%s: %s", p->ag->policy_path, err);
		gp_error("policy rejected, the previous one stays in force: "
		    "%s", p->policy_error);
		return;
	}
	/* Jobs' networks are made once, at start (netns.c). */
	if (np.network != p->policy.network ||
	    np.net_rate_bps != p->policy.net_rate_bps) {
		gp_warn("policy: network and net-rate take effect at the "
		    "agent's next start; %s stays in force",
		    gp_net_policy_name(p->policy.network));
		np.network = p->policy.network;
		np.net_rate_bps = p->policy.net_rate_bps;
	}
	p->policy = np;
	p->policy_gen++;
	p->policy_error[0] = '\0';
	gp_info("policy loaded path=%s", p->ag->policy_path);
}

void
gp_provider_net_policy(struct gp_provider *p, enum gp_net_policy *net,
    int64_t *rate_bps)
{
	pthread_mutex_lock(&p->lock);
	*net = p->policy.network;
	*rate_bps = p->policy.net_rate_bps;
	pthread_mutex_unlock(&p->lock);
}

void
gp_provider_reload(struct gp_provider *p)
{
	pthread_mutex_lock(&p->lock);
	policy_load(p, 1);
	policy_apply(p);
	pthread_mutex_unlock(&p->lock);
}

/* ---- executor callbacks ---- */

void
gp_provider_on_started(void *arg, const struct gp_attempt_id *id, pid_t pid)
{
	struct gp_provider *p = arg;
	struct pjob *j;
	struct stat st, self;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	pthread_mutex_lock(&p->lock);
	/* A namespace of the job's own only (never the agent's). */
	if ((j = find(p, id)) != NULL && stat(path, &st) == 0 &&
	    stat("/proc/self/ns/pid", &self) == 0 && st.st_ino != self.st_ino)
		j->pidns = st.st_ino;
	pthread_mutex_unlock(&p->lock);
	gp_reports_on_started(p->ag->reports, id, pid);
}

void
gp_provider_on_output(void *arg, const struct gp_attempt_id *id,
    const char *data, size_t len)
{
	struct gp_provider *p = arg;

	gp_reports_on_output(p->ag->reports, id, data, len);
}

void
gp_provider_on_finished(void *arg, const struct gp_attempt_id *id,
    const struct gp_exec_result *result)
{
	struct gp_provider *p = arg;
	struct pjob *j;

	pthread_mutex_lock(&p->lock);
	j = find(p, id);
	if (j == NULL) {
		pthread_mutex_unlock(&p->lock);
		gp_reports_on_finished(p->ag->reports, id, result);
		if (result->workdir != NULL)
			gp_remove_tree(result->workdir);
		return;
	}
	j->exited = 1;
	j->exited_mono = gp_mono_ms();
	j->result = *result;
	gp_strlcpy(j->message, result->message, sizeof(j->message));
	gp_strlcpy(j->workdir, result->workdir ? result->workdir : "",
	    sizeof(j->workdir));
	j->result.workdir = NULL;
	j->phase = PJ_FINAL;
	if (j->end_reason != NULL)
		gp_info("gpu free job=%lld attempt=%lld reason=%s "
		    "after_ms=%lld", (long long)id->job_id,
		    (long long)id->attempt, j->end_reason,
		    (long long)(j->exited_mono - j->end_mono));
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* ---- from the coordinator ---- */

/* Refuses an assignment at once: the coordinator requeues it. */
static void
refuse(struct gp_provider *p, struct gp_assignment *a, const char *why)
{
	struct gp_exec_result r;

	memset(&r, 0, sizeof(r));
	r.reason = "refused";
	gp_strlcpy(r.message, why, sizeof(r.message));
	gp_warn("assignment refused job=%lld attempt=%lld why=\"%s\"",
	    (long long)a->id.job_id, (long long)a->id.attempt, why);
	gp_reports_on_finished(p->ag->reports, &a->id, &r);
}

/*
 * A job that did not say how much memory it needs gets its share of what
 * the owner lends (issue 15): the lent memory (policy "memory", else the
 * node's) times the larger of its share of the lent GPUs (a fraction's
 * share of one) and its share of the CPUs; a job asking for neither
 * counts as one GPU's share. At least 64 MiB, at most all.
 */
static int64_t
default_mem_mib(const struct gp_provider *p, const struct gp_assignment *a)
{
	int64_t mem = policy_mem(p), m;
	int i, lent = 0, cpus = policy_cpus(p);
	double share, by_cpus;

	for (i = 0; i < p->ag->gpus.n && i < 64; i++)
		lent += gp_policy_lends_gpu(&p->policy, i);
	if (lent == 0)
		lent = 1;
	if (a->gpu_milli > 0)
		share = a->gpu_milli / 1000.0 / lent;
	else
		share = (a->ngpus > 0 ? a->ngpus : 1) / (double)lent;
	by_cpus = a->cpus > 0 && cpus > 0 ? a->cpus / (double)cpus : 0;
	if (by_cpus > share)
		share = by_cpus;
	m = (int64_t)(mem * (share < 1 ? share : 1));
	return m < 64 ? 64 : m;
}

/*
 * A plain command gets the owner's exposures as the policy says now
 * (p->lock held): the executor, in its own thread, reads them from the
 * assignment, never from the policy a reload may change. 0 or GP_ENOMEM.
 */
static int
copy_exposures(struct gp_provider *p, struct gp_assignment *a)
{
	int i, n = p->policy.nexpose;

	if (a->image[0] != '\0' || n == 0)
		return 0;
	if ((a->expose = calloc((size_t)n, sizeof(*a->expose))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < n; i++) {
		struct gp_mount *m = &a->expose[i];

		if ((m->source = strdup(p->policy.expose[i].path)) == NULL)
			return GP_ENOMEM;
		m->target = m->source;
		m->read_only = p->policy.expose[i].read_only;
		a->nexpose++;
	}
	return 0;
}

/*
 * 1 when the environment says GPUPOOL_AGENT_REFUSE_JOBS=1: the agent
 * refuses every assignment, as a node that cannot start jobs would (a
 * test knob: tests/e2e/test_backoff.sh plays such a node with it).
 */
static int
refuse_all_for_tests(void)
{
	const char *v = getenv("GPUPOOL_AGENT_REFUSE_JOBS");

	return v != NULL && strcmp(v, "1") == 0;
}

void
gp_provider_assign(struct gp_provider *p, struct gp_assignment *a)
{
	struct pjob *j;
	uint64_t m = 0;
	int i;

	if (refuse_all_for_tests()) {
		if (gp_reports_add(p->ag->reports, &a->id) == 0)
			refuse(p, a,
			    "GPUPOOL_AGENT_REFUSE_JOBS=1 (a test knob)");
		gp_assignment_fini(a);
		return;
	}

	if (gp_reports_add(p->ag->reports, &a->id) != 0) {
		gp_warn("assignment already known, ignored job=%lld "
		    "attempt=%lld", (long long)a->id.job_id,
		    (long long)a->id.attempt);
		gp_assignment_fini(a);
		return;
	}
	for (i = 0; i < a->ngpus; i++)
		if (a->gpus[i] >= 0 && a->gpus[i] < 64)
			m |= 1ULL << a->gpus[i];
	pthread_mutex_lock(&p->lock);
	if (!accepting(p) || (m & ~lent_mask(p)) != 0 ||
	    (p->policy.max_job_s > 0 && (a->time_limit_s == 0 ||
	    a->time_limit_s > p->policy.max_job_s)) ||
	    (a->image[0] == '\0' && p->policy.refuse_plain) ||
	    (a->image[0] != '\0' && !takes_images(p))) {
		/* A race with the owner's change: the job goes elsewhere. */
		const char *why = !accepting(p) ? "the node is not accepting "
		    "jobs (paused, leaving or cut off)" : (m & ~lent_mask(p))
		    ? "a GPU it needs is no longer lent"
		    : a->image[0] == '\0' && p->policy.refuse_plain
		    ? "the owner takes no plain-command jobs (plain-jobs = "
		      "refuse)"
		    : a->image[0] != '\0' && !takes_images(p)
		    ? "this node takes no container images (images = none, "
		      "or no container runtime)"
		    : "longer than the owner's max-job-time";
		pthread_mutex_unlock(&p->lock);
		refuse(p, a, why);
		gp_assignment_fini(a);
		return;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL || copy_exposures(p, a) != 0) {
		free(j);
		pthread_mutex_unlock(&p->lock);
		refuse(p, a, "agent out of memory");
		gp_assignment_fini(a);
		return;
	}
	/* The work directory's cap: the user's --disk within scratch-max. */
	if (p->policy.scratch_max_mib > 0 && (a->disk_mib <= 0 ||
	    a->disk_mib > p->policy.scratch_max_mib))
		a->disk_mib = p->policy.scratch_max_mib;
	if (a->mem_mib <= 0) {
		a->mem_mib = default_mem_mib(p, a);
		gp_info("default memory limit job=%lld attempt=%lld "
		    "mem_mib=%lld", (long long)a->id.job_id,
		    (long long)a->id.attempt, (long long)a->mem_mib);
	}
	j->id = a->id;
	gp_strlcpy(j->user, a->user, sizeof(j->user));
	gp_strlcpy(j->name, a->name, sizeof(j->name));
	memcpy(j->gpus, a->gpus, sizeof(j->gpus));
	j->ngpus = a->ngpus;
	j->interactive = a->interactive;
	if ((a->gpu_milli > 0 || a->gpu_mem_mib > 0) && a->ngpus == 1 &&
	    a->gpus[0] >= 0 && a->gpus[0] < p->ag->gpus.n)
		j->share_milli = gp_gpushare_share_milli(a->gpu_milli,
		    a->gpu_mem_mib, p->ag->gpus.gpus[a->gpus[0]].mem_mib);
	j->started_mono = gp_mono_ms();
	j->every_ms = (a->checkpoint_every_s > 0 ? a->checkpoint_every_s
						 : GP_CHECKPOINT_EVERY_DEFAULT) *
	    1000;
	j->sig = a->checkpoint_signal > 0 ? a->checkpoint_signal : SIGUSR1;
	/* A gang's checkpoint is its rank-0 part's; every part restores it. */
	j->no_upload = a->parts > 1 && a->part > 0;
	j->last_try_mono = j->started_mono;
	gp_executor_checkpoint_dir(&p->ag->exec_cfg, &a->id, j->dir,
	    sizeof(j->dir));
	j->next = p->jobs;
	p->jobs = j;
	if (a->restart_count > 0 || a->ndata > 0 || a->image[0] != '\0') {
		/*
		 * Its image, its data sets and its checkpoint if it ran
		 * before come first (a worker: they block on the network).
		 */
		j->phase = PJ_RESTORING;
		j->pending = *a;
		memset(a, 0, sizeof(*a));
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		return;
	}
	j->phase = PJ_RUNNING;
	pthread_mutex_unlock(&p->lock);
	if (gp_executor_start(p->ag->executor, a) != 0) {
		struct gp_exec_result r = {.reason = "start_failed"};
		gp_strlcpy(r.message, "agent out of memory", sizeof(r.message));
		gp_provider_on_finished(p, &j->id, &r);
		gp_assignment_fini(a);
	}
}

void
gp_provider_cancel(struct gp_provider *p, const struct gp_attempt_id *id)
{
	struct pjob *j;

	pthread_mutex_lock(&p->lock);
	if ((j = find(p, id)) != NULL) {
		j->cancelled = 1;
		j->end_reason = NULL; /* a cancel wins over a reclaim */
	}
	pthread_mutex_unlock(&p->lock);
	gp_executor_kill(p->ag->executor, id, GP_EXEC_CANCELLED);
}

void
gp_provider_drop(struct gp_provider *p, const struct gp_attempt_id *id)
{
	struct pjob *j;

	pthread_mutex_lock(&p->lock);
	if ((j = find(p, id)) != NULL)
		j->stale = 1;
	pthread_mutex_unlock(&p->lock);
	gp_reports_forget(p->ag->reports, id);
	gp_executor_kill(p->ag->executor, id, GP_EXEC_STALE);
}

void
gp_provider_checkpoint_now(struct gp_provider *p,
    const struct gp_attempt_id *id)
{
	struct pjob *j;

	pthread_mutex_lock(&p->lock);
	if ((j = find(p, id)) != NULL) {
		j->want_upload = 1;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
}

void
gp_provider_stop(struct gp_provider *p, const struct gp_attempt_id *id,
    const char *reason)
{
	struct pjob *j;

	pthread_mutex_lock(&p->lock);
	if ((j = find(p, id)) != NULL && !j->cancelled)
		end_job(p, j, reason, 1);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* ---- checkpoint workers ---- */

static void
target_of(struct gp_provider *p, const struct pjob *j,
    struct gp_ckpt_target *t)
{
	memset(t, 0, sizeof(*t));
	t->url = p->ag->url;
	t->token = p->ag->token;
	t->ca_file = p->ag->ca_file;
	t->job_id = j->id.job_id;
	t->attempt = j->id.attempt;
}

/* 1 when the job's COMPLETE marker differs from what was uploaded. */
static int
marker_changed(const struct pjob *j)
{
	char path[PATH_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", j->dir, GP_CKPT_MARKER);
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	return (int64_t)st.st_mtim.tv_sec * 1000000000LL +
		st.st_mtim.tv_nsec != j->mark.marker_mtime_ns ||
	    (int64_t)st.st_ino != j->mark.marker_ino ||
	    (int64_t)st.st_size != j->mark.marker_size;
}

/* Runs one upload for j (p->lock not held; j->busy set). */
static int
upload(struct gp_provider *p, struct pjob *j, struct gp_ckpt_mark *mark,
    const char *why)
{
	struct gp_ckpt_target t;
	struct gp_ckpt_stats st;
	char err[512];
	int ret;

	target_of(p, j, &t);
	memset(&st, 0, sizeof(st));
	ret = gp_ckpt_upload(&t, j->dir, mark, &st, err, sizeof(err));
	if (ret == 0 && st.version > 0) {
		atomic_fetch_add(&p->uploads, 1);
		atomic_fetch_add(&p->upload_bytes, st.bytes_sent);
	} else if (ret != 0)
		atomic_fetch_add(&p->upload_failures, 1);
	if (ret != 0) {
		gp_warn("checkpoint upload failed job=%lld attempt=%lld "
		    "why=%s error=\"%s\"", (long long)j->id.job_id,
		    (long long)j->id.attempt, why, err);
		return ret;
	}
	if (st.version > 0)
		gp_info("checkpoint uploaded job=%lld attempt=%lld why=%s "
		    "version=%lld files=%lld bytes=%lld sent=%lld ms=%lld "
		    "label=\"%s\"", (long long)j->id.job_id,
		    (long long)j->id.attempt, why, (long long)st.version,
		    (long long)st.files, (long long)st.bytes,
		    (long long)st.bytes_sent, (long long)st.elapsed_ms,
		    st.label);
	else
		gp_debug("checkpoint not uploaded job=%lld attempt=%lld "
		    "why=%s skipped=\"%s\"", (long long)j->id.job_id,
		    (long long)j->id.attempt, why, st.skipped);
	return st.version > 0 ? 1 : 0;
}

/* 1 when b is a or lies beneath it. */
static int
path_within(const char *a, const char *b)
{
	size_t n = strlen(a);

	return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* Lets go of the data set versions j holds in the cache. */
static void
release_data(struct gp_provider *p, struct pjob *j)
{
	int i;

	for (i = 0; i < j->nheld; i++)
		gp_datacache_release(p->ag->datacache, j->held[i].owner,
		    j->held[i].name, j->held[i].version);
	j->nheld = 0;
}

/*
 * Makes the job's data sets ready in the data cache (p->lock not held;
 * j->busy set) and fills *a's mounts. The manifest of each is fetched
 * through the job's route even when cached: the coordinator decides
 * whether the job's owner may still read it. Returns 0, or GP_E* with
 * err and *why: the finished reason ("start_failed" when retrying cannot
 * help, "restore_failed" to requeue, "killed" for a stale attempt).
 */
static int
prepare_data(struct gp_provider *p, struct pjob *j, struct gp_assignment *a,
    const char **why, char *err, size_t errlen)
{
	struct gp_datacache_source src;
	struct gp_datacache_stats st;
	struct gp_transfer_peer peer;
	struct gp_http_client *http = NULL;
	char path[160], prefix[200], e[512];
	json_t *m = NULL;
	char *tree = NULL;
	long status;
	int i, ret = 0;

	*why = "start_failed";
	if (a->ndata == 0)
		return 0;
	j->held = calloc((size_t)a->ndata, sizeof(*j->held));
	a->mounts = calloc((size_t)a->ndata, sizeof(*a->mounts));
	if (j->held == NULL || a->mounts == NULL) {
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	if ((http = gp_http_client_new(p->ag->url, p->ag->token,
	    p->ag->ca_file)) == NULL) {
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	memset(&peer, 0, sizeof(peer));
	peer.url = p->ag->url;
	peer.token = p->ag->token;
	peer.ca_file = p->ag->ca_file;
	for (i = 0; i < a->ndata && ret == 0; i++) {
		const struct gp_data_ref *r = &a->data[i];

		if (path_within(r->path, p->ag->work) ||
		    path_within(p->ag->work, r->path)) {
			snprintf(err, errlen, "data set %s/%s: mount path %s "
			    "would cover this provider's work directory",
			    r->owner, r->name, r->path);
			ret = GP_EINVAL;
			break;
		}
		snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/data/%d",
		    (long long)j->id.job_id, (long long)j->id.attempt, i + 1);
		snprintf(prefix, sizeof(prefix), "%s/chunks/", path);
		ret = gp_transfer_json_call(http, "GET", path, NULL, &m, &status,
		    e, sizeof(e));
		if (ret == 0 && gp_ckpt_manifest_check(m, 0, 1,
		    &(struct gp_ckpt_totals){0, 0, 0}, e, sizeof(e)) != 0)
			ret = GP_EPROTO;
		if (ret != 0) {
			snprintf(err, errlen, "data set %s/%s@%lld: %s",
			    r->owner, r->name, (long long)r->version, e);
			*why = ret == GP_ECONFLICT ? "killed"
			    : ret == GP_ENOENT || ret == GP_EPERM ||
				ret == GP_EPROTO
			    ? "start_failed"
			    : "restore_failed";
			break;
		}
		memset(&src, 0, sizeof(src));
		src.owner = r->owner;
		src.name = r->name;
		src.version = r->version;
		src.manifest = m;
		src.peer = &peer;
		src.chunk_prefix = prefix;
		ret = gp_datacache_acquire(p->ag->datacache, &src, &tree, &st,
		    e, sizeof(e));
		json_decref(m);
		m = NULL;
		if (ret != 0) {
			snprintf(err, errlen, "data set %s/%s@%lld: %s",
			    r->owner, r->name, (long long)r->version, e);
			/*
			 * Requeue when it may work later or elsewhere (the
			 * network, a cache full of running jobs' data); a
			 * version larger than the cache or a refusal does not.
			 */
			if (ret == GP_ECONFLICT)
				*why = "killed";
			else if (ret == GP_ECONN || ret == GP_ETIMEDOUT ||
			    ret == GP_EIO || (ret == GP_ETOOBIG &&
				strstr(e, "more than") == NULL))
				*why = "restore_failed";
			else
				*why = "start_failed";
			break;
		}
		j->held[j->nheld++] = *r;
		j->held[j->nheld - 1].path = NULL;
		a->mounts[a->nmounts].source = tree;
		a->mounts[a->nmounts].target = strdup(r->path);
		a->mounts[a->nmounts].read_only = 1;
		a->nmounts++;
		tree = NULL;
		if (a->mounts[a->nmounts - 1].target == NULL) {
			snprintf(err, errlen, "agent out of memory");
			ret = GP_ENOMEM;
			break;
		}
		gp_info("data set ready job=%lld attempt=%lld set=%s/%s@%lld "
		    "path=%s files=%lld bytes=%lld fetched=%lld copied=%lld "
		    "linked=%lld cached=%d ms=%lld", (long long)j->id.job_id,
		    (long long)j->id.attempt, r->owner, r->name,
		    (long long)r->version, r->path, (long long)st.files,
		    (long long)st.bytes, (long long)st.fetched,
		    (long long)st.copied, (long long)st.linked, st.cached,
		    (long long)st.elapsed_ms);
	}
	gp_http_client_free(http);
	if (ret != 0)
		gp_warn("data sets not ready job=%lld attempt=%lld error=\"%s\"",
		    (long long)j->id.job_id, (long long)j->id.attempt, err);
	return ret;
}

/*
 * Makes the pending assignment's image ready (p->lock not held; j->busy
 * set): fills j->pending.container and j->image. Returns 0 or the
 * cache's GP_E* code with err.
 */
static int
prepare_image(struct gp_provider *p, struct pjob *j, char *err,
    size_t errlen)
{
	struct gp_trusted_key keys[GP_POLICY_KEYS_MAX];
	struct gp_image_trust trust;
	struct gp_image_source src;
	struct gp_image_prepared st;
	struct gp_container_image *img = NULL;
	struct gp_image_hold *hold = NULL;
	int ret;

	/* The owner's trust as it is now, copied: the policy may reload. */
	pthread_mutex_lock(&p->lock);
	trust.images = (int)p->policy.images;
	trust.nkeys = p->policy.nkeys;
	memcpy(keys, p->policy.keys, sizeof(keys));
	pthread_mutex_unlock(&p->lock);
	trust.keys = keys;
	memset(&src, 0, sizeof(src));
	src.url = p->ag->url;
	src.token = p->ag->token;
	src.ca_file = p->ag->ca_file;
	src.job_id = j->id.job_id;
	src.attempt = j->id.attempt;
	if (p->ag->images == NULL) {
		snprintf(err, errlen, "this agent has no image cache");
		return GP_EIO;
	}
	ret = gp_image_prepare(p->ag->images, &src, j->pending.image, &trust,
	    &img, &hold, &st, err, errlen);
	if (ret != 0) {
		gp_warn("image refused job=%lld attempt=%lld digest=%s "
		    "code=%d fetched_bytes=%lld why=\"%s\"",
		    (long long)j->id.job_id, (long long)j->id.attempt,
		    j->pending.image, ret, (long long)st.fetched_bytes, err);
		return ret;
	}
	gp_info("image ready job=%lld attempt=%lld digest=%s layers=%d "
	    "cached=%d fetched=%d fetched_bytes=%lld ms=%lld trust=\"%s\"",
	    (long long)j->id.job_id, (long long)j->id.attempt,
	    j->pending.image, st.layers, st.cached, st.fetched,
	    (long long)st.fetched_bytes, (long long)st.elapsed_ms,
	    st.trusted_by);
	pthread_mutex_lock(&p->lock);
	gp_container_image_free(j->pending.container);
	j->pending.container = img;
	j->image = hold;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/*
 * The job cannot start with its image: refused (by the owner's trust, or
 * a bad or tampered image: the job fails, the message names the check)
 * or unavailable (the coordinator or the disk: it is tried elsewhere).
 * p->lock held.
 */
static void
image_failed(struct pjob *j, int ret, const char *err)
{
	j->exited = 1;
	j->exited_mono = gp_mono_ms();
	memset(&j->result, 0, sizeof(j->result));
	if (j->cancelled)
		j->result.reason = "cancelled";
	else if (j->end_reason != NULL || j->stale || ret == GP_ECONFLICT)
		j->result.reason = "killed";
	else if (ret == GP_EPERM || ret == GP_EINVAL || ret == GP_ETOOBIG) {
		j->result.reason = "image_refused";
		snprintf(j->message, sizeof(j->message), "image refused: %.480s",
		    err);
	} else {
		j->result.reason = "image_unavailable";
		snprintf(j->message, sizeof(j->message), "image unavailable: "
		    "%.470s", err);
	}
	gp_strlcpy(j->result.message, j->message, sizeof(j->result.message));
	j->phase = PJ_FINAL;
}

static void
do_restore(struct gp_provider *p, struct pjob *j)
{
	struct gp_ckpt_target t;
	struct gp_ckpt_stats st;
	struct gp_ckpt_mark mark;
	struct gp_assignment a;
	char staging[PATH_MAX + 64], base[PATH_MAX + 16], err[PATH_MAX + 600];
	const char *why = "restore_failed";
	int tries, ret = 0;
	const struct gp_sandbox_user *u = &p->ag->user;

	snprintf(base, sizeof(base), "%s/restore", p->ag->work);
	snprintf(staging, sizeof(staging), "%s/%lld-%lld", base,
	    (long long)j->id.job_id, (long long)j->id.attempt);
	target_of(p, j, &t);
	memset(&st, 0, sizeof(st));
	memset(&mark, 0, sizeof(mark));
	err[0] = '\0';
	if (j->pending.image[0] != '\0') {
		ret = prepare_image(p, j, err, sizeof(err));
		if (ret != 0) {
			pthread_mutex_lock(&p->lock);
			j->busy = 0;
			image_failed(j, ret, err);
			pthread_cond_broadcast(&p->cond);
			pthread_mutex_unlock(&p->lock);
			return;
		}
	}
	/* Then the data sets: the job cannot start without them. */
	ret = prepare_data(p, j, &j->pending, &why, err, sizeof(err));
	for (tries = 0; ret == 0 && j->pending.restart_count > 0 &&
	    tries < RESTORE_TRIES; tries++) {
		why = "restore_failed";
		gp_remove_tree(staging);
		if (gp_mkdir_p(base, 0700) != 0 || mkdir(staging, 0700) != 0) {
			snprintf(err, sizeof(err), "mkdir %s: %s", staging,
			    strerror(errno));
			ret = GP_EIO;
			break;
		}
		ret = gp_ckpt_download(&t, staging, u->userns ? getuid() :
		    u->uid, u->userns ? getgid() : u->gid, &mark, &st, err,
		    sizeof(err));
		if (ret == 0 || ret == GP_ECONFLICT)
			break;
		gp_warn("checkpoint restore failed job=%lld attempt=%lld "
		    "try=%d error=\"%s\"", (long long)j->id.job_id,
		    (long long)j->id.attempt, tries + 1, err);
		sleep(1);
	}
	if (ret != 0 && strncmp(err, "data set ", 9) != 0) {
		char cause[PATH_MAX + 600];

		gp_strlcpy(cause, err, sizeof(cause));
		snprintf(err, sizeof(err), "cannot restore checkpoint: %.450s",
		    cause);
	}
	pthread_mutex_lock(&p->lock);
	j->busy = 0;
	if (ret == 0 && !j->stale && !j->cancelled && j->end_reason == NULL) {
		a = j->pending;
		memset(&j->pending, 0, sizeof(j->pending));
		if (st.version > 0) {
			atomic_fetch_add(&p->restores, 1);
			a.restore_dir = strdup(staging);
			a.restored_version = st.version;
			j->mark = mark;
			j->version = st.version;
			gp_info("checkpoint restored job=%lld attempt=%lld "
			    "version=%lld files=%lld bytes=%lld ms=%lld",
			    (long long)j->id.job_id, (long long)j->id.attempt,
			    (long long)st.version, (long long)st.files,
			    (long long)st.bytes, (long long)st.elapsed_ms);
		} else
			gp_remove_tree(staging);
		j->phase = PJ_RUNNING;
		j->started_mono = j->last_try_mono = gp_mono_ms();
		pthread_mutex_unlock(&p->lock);
		gp_reports_set_restored(p->ag->reports, &j->id,
		    a.restored_version);
		if (gp_executor_start(p->ag->executor, &a) != 0) {
			struct gp_exec_result r = {.reason = "start_failed"};
			gp_strlcpy(r.message, "agent out of memory",
			    sizeof(r.message));
			gp_assignment_fini(&a);
			gp_provider_on_finished(p, &j->id, &r);
		}
		return;
	}
	/* Not started: end it here. */
	gp_remove_tree(staging);
	j->exited = 1;
	j->exited_mono = gp_mono_ms();
	memset(&j->result, 0, sizeof(j->result));
	if (j->cancelled)
		j->result.reason = "cancelled";
	else if (j->end_reason != NULL || j->stale ||
	    strcmp(why, "killed") == 0)
		j->result.reason = "killed";
	else {
		if (strcmp(why, "restore_failed") == 0)
			atomic_fetch_add(&p->restore_failures, 1);
		j->result.reason = why;
		snprintf(j->message, sizeof(j->message), "%.500s", err);
		gp_strlcpy(j->result.message, j->message,
		    sizeof(j->result.message));
	}
	j->phase = PJ_FINAL;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/*
 * Collects what the job left in its output directory (p->lock not held):
 * uploads it as the job's output (only the chunks the coordinator
 * lacks; retried). A failure, a quota refusal among them, is appended to
 * j->message: the job still ends with its own exit status.
 */
static void
upload_output(struct gp_provider *p, struct pjob *j)
{
	struct gp_transfer_stats st;
	struct gp_transfer_peer peer;
	struct gp_http_client *http;
	struct gp_tree *tree = NULL;
	char dir[PATH_MAX + 16], err[400], path[160], prefix[96];
	json_t *body = NULL, *reply = NULL, *done = NULL;
	int64_t upload, start = gp_mono_ms();
	struct stat dst;
	long status = 0;
	int ret = 0, tries;
	size_t len;

	snprintf(dir, sizeof(dir), "%s/output", j->workdir);
	memset(&peer, 0, sizeof(peer));
	peer.url = p->ag->url;
	peer.token = p->ag->token;
	peer.ca_file = p->ag->ca_file;
	if ((http = gp_http_client_new(p->ag->url, p->ag->token,
	    p->ag->ca_file)) == NULL)
		return;
	snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/output",
	    (long long)j->id.job_id, (long long)j->id.attempt);
	for (tries = 1; tries <= UPLOAD_TRIES; tries++) {
		memset(&st, 0, sizeof(st));
		gp_tree_free(tree);
		tree = NULL;
		json_decref(body);
		json_decref(reply);
		body = reply = NULL;
		/*
		 * The job's directory, read as root: never followed if it is
		 * a link, and only files owned by whoever owns the directory
		 * (the executor made it the job's: the plain sandbox's user,
		 * or a container's mapped uid), not a hard link to a file
		 * the job could not read.
		 */
		if (lstat(dir, &dst) != 0) {
			ret = 0; /* removed by the job: nothing to collect */
			break;
		}
		ret = gp_tree_open(dir, 0, dst.st_uid, &tree, err,
		    sizeof(err));
		if (ret == GP_ENOENT) {
			ret = 0;
			break;
		}
		if (ret == 0) {
			gp_tree_totals(tree, &st);
			if (st.files == 0)
				break;
			ret = gp_tree_hash(tree, 0, err, sizeof(err));
		}
		if (ret == 0 && (body = json_pack("{s:o}", "manifest",
		    gp_tree_manifest(tree))) == NULL)
			ret = GP_ENOMEM;
		if (ret == 0)
			ret = gp_transfer_json_call(http, "POST", path, body,
			    &reply, &status, err, sizeof(err));
		upload = json_integer_value(json_object_get(reply, "upload"));
		if (ret == 0 && upload <= 0) {
			ret = GP_EPROTO;
			snprintf(err, sizeof(err), "no upload in the answer");
		}
		if (ret == 0) {
			snprintf(prefix, sizeof(prefix),
			    "/v1/uploads/%lld/chunks/", (long long)upload);
			ret = gp_tree_send(tree, &peer, prefix,
			    json_object_get(reply, "missing"), &st, err,
			    sizeof(err));
		}
		if (ret == 0) {
			snprintf(prefix, sizeof(prefix),
			    "/v1/uploads/%lld/commit", (long long)upload);
			ret = gp_transfer_json_call(http, "POST", prefix, NULL,
			    &done, &status, err, sizeof(err));
			json_decref(done);
		}
		if (ret == 0) {
			gp_info("job output stored job=%lld attempt=%lld "
			    "files=%lld bytes=%lld sent=%lld ms=%lld",
			    (long long)j->id.job_id, (long long)j->id.attempt,
			    (long long)st.files, (long long)st.bytes,
			    (long long)st.bytes_sent,
			    (long long)(gp_mono_ms() - start));
			break;
		}
		/* Refusals (quota, bad manifest, stale) stay refusals. */
		if (ret != GP_ECONN && ret != GP_ETIMEDOUT && ret != GP_EIO &&
		    ret != GP_ECONFLICT)
			break;
		if (ret == GP_ECONFLICT && status == 409)
			break;
		sleep(1);
	}
	gp_tree_free(tree);
	json_decref(body);
	json_decref(reply);
	gp_http_client_free(http);
	if (ret == 0 || (ret == GP_ECONFLICT && status == 409))
		return;
	gp_warn("job output not stored job=%lld attempt=%lld error=\"%s\"",
	    (long long)j->id.job_id, (long long)j->id.attempt, err);
	pthread_mutex_lock(&p->lock);
	len = strlen(j->message);
	snprintf(j->message + len, sizeof(j->message) - len,
	    "%soutput not stored: %s", len > 0 ? "; " : "", err);
	pthread_mutex_unlock(&p->lock);
}

/* The final step of an attempt: last upload, then the finished report. */
static void
do_final(struct gp_provider *p, struct pjob *j)
{
	struct gp_exec_result r;
	struct gp_ckpt_mark mark;
	struct ended *e;
	int tries, ret = 0, need, stale, output;

	pthread_mutex_lock(&p->lock);
	need = j->end_reason != NULL && !j->stale && !j->cancelled &&
	    !j->no_upload && j->workdir[0] != '\0';
	mark = j->mark;
	pthread_mutex_unlock(&p->lock);
	/* Ended on the owner's behalf: save what it saved, then requeue. */
	for (tries = 0; need && tries < UPLOAD_TRIES; tries++) {
		ret = upload(p, j, &mark, "final");
		if (ret >= 0 || ret == GP_ECONFLICT)
			break;
		sleep(1);
	}
	pthread_mutex_lock(&p->lock);
	if (ret > 0) {
		j->mark = mark;
		j->version = mark.version;
	}
	/* The job's end (not a requeue): collect its output. */
	/* A gang's output is its rank-0 part's, as its checkpoint. */
	output = !j->stale && !j->no_upload && j->end_reason == NULL &&
	    j->workdir[0] != '\0' && j->result.reason != NULL &&
	    (strcmp(j->result.reason, "exited") == 0 ||
		strcmp(j->result.reason, "killed") == 0 ||
		strcmp(j->result.reason, "timeout") == 0 ||
		strcmp(j->result.reason, "cancelled") == 0);
	pthread_mutex_unlock(&p->lock);
	if (output)
		upload_output(p, j);
	pthread_mutex_lock(&p->lock);
	release_data(p, j);
	r = j->result;
	gp_strlcpy(r.message, j->message, sizeof(r.message));
	if (j->end_reason != NULL && !j->cancelled)
		r.reason = j->end_reason;
	stale = j->stale;
	pthread_mutex_unlock(&p->lock);
	if (!stale)
		gp_reports_on_finished(p->ag->reports, &j->id, &r);
	else
		gp_reports_forget(p->ag->reports, &j->id);
	if (j->workdir[0] != '\0' && gp_remove_tree(j->workdir) != 0)
		gp_warn("cannot remove work directory dir=%s", j->workdir);
	pthread_mutex_lock(&p->lock);
	e = &p->recent[p->nrecent++ % (int)GP_ARRAY_LEN(p->recent)];
	e->id = j->id;
	e->version = j->version;
	e->killed = j->killed;
	unlink_job(p, j);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Picks work for a worker; p->lock held. */
static struct pjob *
pick(struct gp_provider *p, int64_t now, int *kind)
{
	struct pjob *j;

	for (j = p->jobs; j != NULL; j = j->next) {
		if (j->busy)
			continue;
		if (j->phase == PJ_FINAL) {
			*kind = PJ_FINAL;
			return j;
		}
		if (j->phase == PJ_RESTORING) {
			*kind = PJ_RESTORING;
			return j;
		}
		if (j->stale || j->exited || j->end_reason != NULL ||
		    j->no_upload)
			continue;
		if (j->want_upload ||
		    (now - j->last_try_mono >= j->every_ms &&
			marker_changed(j))) {
			*kind = PJ_RUNNING;
			return j;
		}
	}
	return NULL;
}

static void
timed_wait(struct gp_provider *p, int64_t ms)
{
	gp_cond_wait_ms(&p->cond, &p->lock, ms);
}

static void *
worker_main(void *arg)
{
	struct gp_provider *p = arg;
	struct gp_ckpt_mark mark;
	struct pjob *j;
	int kind = 0, ret;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		if ((j = pick(p, gp_mono_ms(), &kind)) == NULL) {
			timed_wait(p, TICK_MS);
			continue;
		}
		j->busy = 1;
		if (kind == PJ_FINAL) {
			pthread_mutex_unlock(&p->lock);
			do_final(p, j); /* frees j */
			pthread_mutex_lock(&p->lock);
			continue;
		}
		if (kind == PJ_RESTORING) {
			pthread_mutex_unlock(&p->lock);
			do_restore(p, j);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		j->want_upload = 0;
		mark = j->mark;
		pthread_mutex_unlock(&p->lock);
		ret = upload(p, j, &mark, "periodic");
		pthread_mutex_lock(&p->lock);
		j->busy = 0;
		j->last_try_mono = gp_mono_ms();
		if (ret > 0) {
			j->mark = mark;
			j->version = mark.version;
			j->version_mono = j->last_try_mono;
		} else if (ret == GP_ECONFLICT)
			j->stale = 1;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- the tick: time-driven changes ---- */

static void
check_window(struct gp_provider *p)
{
	struct tm tm;
	time_t t = time(NULL);
	int open;

	localtime_r(&t, &tm);
	open = gp_policy_window_open(&p->policy, &tm, &p->window_next_s);
	if (open == p->window_open)
		return;
	p->window_open = open;
	gp_info("availability window %s", open ? "opened" : "closed");
	if (!open)
		end_jobs_on(p, all_gpus_mask(p), "window_closed", 1);
}

static void
check_presence(struct gp_provider *p)
{
	pid_t pids[8];
	int i, n;

	for (i = 0; i < p->ag->gpus.n && i < 64; i++) {
		uint64_t bit = 1ULL << i;

		if (p->policy.presence == GP_PRESENCE_IGNORE) {
			p->present &= ~bit;
			p->owner_busy &= ~bit;
			continue;
		}
		n = gp_gpu_foreign_processes(&p->ag->gpus, i, pids,
		    (int)GP_ARRAY_LEN(pids));
		if (p->policy.presence == GP_PRESENCE_THROTTLE) {
			/* Lent still: gpushare_steer slows its jobs. */
			p->present &= ~bit;
			if (n > 0 && !(p->owner_busy & bit))
				gp_info("owner process on lent GPU, "
				    "throttling pool jobs gpu=%d pid=%d "
				    "share_milli=%d", i, (int)pids[0],
				    p->policy.throttle_milli);
			else if (n <= 0 && (p->owner_busy & bit))
				gp_info("owner processes gone, pool jobs at "
				    "their shares again gpu=%d", i);
			if (n > 0)
				p->owner_busy |= bit;
			else
				p->owner_busy &= ~bit;
			continue;
		}
		p->owner_busy &= ~bit;
		if (n > 0 && !(p->present & bit)) {
			p->present |= bit;
			p->present_pids[i] = (int)pids[0];
			gp_info("owner process on lent GPU, reclaiming gpu=%d "
			    "pid=%d", i, (int)pids[0]);
			end_jobs_on(p, bit, "owner_present", 1);
		} else if (n <= 0 && (p->present & bit)) {
			p->present &= ~bit;
			p->present_pids[i] = 0;
			gp_info("owner processes gone, GPU lent again gpu=%d",
			    i);
		}
	}
}

/*
 * Enforced GPU sharing (agent/gpushare.h): each fractional job may use
 * its share; all of its GPU when it is alone there and the policy is
 * elastic; at most the owner-presence throttle while the owner's own
 * processes use the GPU.
 */
/*
 * The job's SM utilisation from NVML's per-process readings of its GPU
 * (host pids, matched to the job by their cgroup, or by the job's pid
 * namespace where no cgroup names it), or -1 when NVML cannot say.
 */
/* 1 when pid lives in the pid namespace whose inode is ns (0: none). */
static int
in_pidns(pid_t pid, ino_t ns)
{
	struct stat st;
	char path[64];

	if (ns == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	return stat(path, &st) == 0 && st.st_ino == ns;
}

static int
job_host_util(const struct pjob *j, const pid_t *pids, const int *util,
    int n)
{
	char path[64], text[2048];
	int64_t job, attempt;
	int i, sum = 0;
	ssize_t len;
	int fd;

	int matched = 0;
	char other[128] = "";

	if (n < 0)
		return -1;
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pids[i]);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		len = read(fd, text, sizeof(text) - 1);
		close(fd);
		if (len <= 0)
			continue;
		text[len] = '\0';
		if ((gp_gpushare_cgroup_job(text, &job, &attempt) &&
		    job == j->id.job_id && attempt == j->id.attempt) ||
		    in_pidns(pids[i], j->pidns)) {
			sum += util[i];
			matched++;
		} else if (other[0] == '\0') {
			char *nl;

			snprintf(other, sizeof(other), "%.120s", text);
			while ((nl = strchr(other, '\n')) != NULL)
				*nl = ' ';
		}
	}
	gp_debug("gpu share reading job=%lld processes=%d ours=%d util=%d "
	    "first_pid=%d first_util=%d other_cgroup=\"%s\"",
	    (long long)j->id.job_id, n, matched, sum, n > 0 ? (int)pids[0] : 0,
	    n > 0 ? util[0] : 0, other);
	return sum > 100 ? 100 : sum;
}

static void
gpushare_steer(struct gp_provider *p)
{
	struct pjob *j, *o;
	struct gp_gpushare_usage u;
	char dir[PATH_MAX];
	pid_t pids[GP_GPUS_MAX][64];
	int utils[GP_GPUS_MAX][64], nutil[GP_GPUS_MAX];
	int alone, eff, throttle, g;

	for (g = 0; g < GP_GPUS_MAX; g++)
		nutil[g] = -2;		/* not asked yet */
	for (j = p->jobs; j != NULL; j = j->next) {
		if (j->phase != PJ_RUNNING || j->exited || j->share_milli == 0 ||
		    (g = j->gpus[0]) < 0 || g >= GP_GPUS_MAX)
			continue;
		snprintf(dir, sizeof(dir), "%s/jobs/%lld-%lld",
		    p->ag->exec_cfg.work_dir, (long long)j->id.job_id,
		    (long long)j->id.attempt);
		if (gp_gpushare_steer(dir, -1, -1, &u) != 0)
			continue;
		/* NVML's per-process readings, once a GPU per tick. */
		if (nutil[g] == -2)
			nutil[g] = gp_gpu_process_util(&p->ag->gpus, g,
			    pids[g], utils[g], 64);
		gp_gpushare_steer(dir, -1, job_host_util(j, pids[g], utils[g],
		    nutil[g]), NULL);
		j->share = u;
		j->have_share = 1;
		alone = 1;
		for (o = p->jobs; o != NULL; o = o->next)
			if (o != j && !o->exited && o->ngpus > 0 &&
			    o->gpus[0] == j->gpus[0])
				alone = 0;
		throttle = j->gpus[0] < 64 &&
		    (p->owner_busy & (1ULL << j->gpus[0])) ?
		    p->policy.throttle_milli : 0;
		/* The job may write its region: its share is the agent's. */
		eff = gp_gpushare_effective(j->share_milli, alone,
		    p->policy.gpu_share == GP_SHARE_STRICT, throttle);
		if (eff != u.effective_milli) {
			gp_gpushare_steer(dir, eff, -1, NULL);
			j->share.effective_milli = eff;
			gp_info("gpu share job=%lld gpu=%d share_milli=%d "
			    "effective_milli=%d", (long long)j->id.job_id,
			    j->gpus[0], j->share_milli, eff);
		}
	}
}

static void
check_deadlines(struct gp_provider *p, int64_t now)
{
	struct pjob *j;

	for (j = p->jobs; j != NULL; j = j->next)
		if (j->kill_at_mono != 0 && !j->killed && !j->exited &&
		    now >= j->kill_at_mono) {
			j->killed = 1;
			gp_info("grace period over, killing job=%lld "
			    "attempt=%lld", (long long)j->id.job_id,
			    (long long)j->id.attempt);
			gp_executor_kill(p->ag->executor, &j->id,
			    GP_EXEC_RECLAIMED);
		}
}

/* Kills everything when the coordinator may already have requeued it. */
static void
check_fence(struct gp_provider *p, int64_t now)
{
	int64_t lease = p->ag->lease_ms, hb = p->ag->heartbeat_ms, limit;
	int64_t last = atomic_load(&p->ag->last_contact_mono);
	struct pjob *j;

	if (lease <= 0 || last == 0)
		return;
	limit = lease > 2 * hb ? lease - hb : lease / 2;
	if (now - last <= limit) {
		if (p->fenced) {
			p->fenced = 0;
			gp_info("coordinator reachable: accepting jobs again");
		}
		return;
	}
	if (!p->fenced) {
		p->fenced = 1;
		gp_warn("coordinator unreachable for %lld ms (lease %lld ms): "
		    "killing this node's jobs before they are given to "
		    "another node", (long long)(now - last), (long long)lease);
	}
	for (j = p->jobs; j != NULL; j = j->next)
		if (!j->exited && !j->stale) {
			j->stale = 1;
			if (j->phase == PJ_RUNNING)
				gp_executor_kill(p->ag->executor, &j->id,
				    GP_EXEC_STALE);
		}
}

static void *
tick_main(void *arg)
{
	struct gp_provider *p = arg;
	int64_t last_policy = 0, last_presence = 0, now;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		now = gp_mono_ms();
		if (now - last_policy >= POLICY_CHECK_MS) {
			policy_load(p, 0);
			check_window(p);
			last_policy = now;
		}
		if (now - last_presence >= PRESENCE_CHECK_MS) {
			check_presence(p);
			gpushare_steer(p);
			last_presence = now;
		}
		check_deadlines(p, now);
		check_fence(p, now);
		policy_apply(p);
		timed_wait(p, TICK_MS);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- the owner's commands ---- */

static json_t *
job_json(const struct pjob *j, int64_t now)
{
	return json_pack("{sI sI ss ss sI sI s:o}", "id",
	    (json_int_t)j->id.job_id, "attempt", (json_int_t)j->id.attempt,
	    "user", j->user, "name", j->name, "running_s",
	    (json_int_t)((now - j->started_mono) / 1000),
	    "checkpoint_version", (json_int_t)j->version,
	    "checkpoint_age_s",
	    j->version_mono ? json_integer((now - j->version_mono) / 1000)
			    : json_null());
}

static const char *
gpu_state(const struct gp_provider *p, int i, const struct pjob **jobp)
{
	uint64_t bit = 1ULL << i;
	const struct pjob *j;

	*jobp = NULL;
	for (j = p->jobs; j != NULL; j = j->next)
		if (job_mask(j) & bit) {
			*jobp = j;
			break;
		}
	if (p->leaving)
		return "leaving";
	if (!gp_policy_lends_gpu(&p->policy, i))
		return "not_lent";
	if (p->present & bit)
		return "owner_present";
	if (p->reclaimed & bit)
		return "reclaimed";
	if (!p->window_open)
		return "window_closed";
	if (*jobp != NULL)
		return "running";
	return p->paused ? "paused" : "idle";
}

json_t *
gp_provider_gpushare_json(struct gp_provider *p)
{
	const struct pjob *j;
	json_t *list = json_array();

	pthread_mutex_lock(&p->lock);
	for (j = p->jobs; j != NULL && list != NULL; j = j->next)
		if (j->have_share && j->phase == PJ_RUNNING && !j->exited)
			json_array_append_new(list, json_pack(
			    "{sI sI si sI sI si si si sI}", "job_id",
			    (json_int_t)j->id.job_id, "attempt",
			    (json_int_t)j->id.attempt, "gpu", j->gpus[0],
			    "mem_used_mib",
			    (json_int_t)(j->share.used_bytes >> 20),
			    "mem_limit_mib",
			    (json_int_t)(j->share.limit_bytes >> 20),
			    "share_milli", j->share.share_milli,
			    "effective_milli", j->share.effective_milli,
			    "util", j->share.util, "oom",
			    (json_int_t)j->share.oom));
	pthread_mutex_unlock(&p->lock);
	return list;
}

uint64_t
gp_provider_busy_gpus(struct gp_provider *p)
{
	const struct pjob *j;
	uint64_t m = 0;

	pthread_mutex_lock(&p->lock);
	for (j = p->jobs; j != NULL; j = j->next)
		if (j->phase == PJ_RUNNING && !j->exited)
			m |= job_mask(j);
	pthread_mutex_unlock(&p->lock);
	return m;
}

void
gp_provider_snapshot(struct gp_provider *p, struct gp_provider_snapshot *out)
{
	const struct pjob *j;
	int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->lock);
	out->ngpus = p->ag->gpus.n < 64 ? p->ag->gpus.n : 64;
	for (i = 0; i < out->ngpus; i++) {
		struct gp_provider_gpu *g = &out->gpus[i];
		g->state = gpu_state(p, i, &j);
		g->lent = (p->offer_lent >> i) & 1;
		if (j != NULL) {
			g->job_id = j->id.job_id;
			g->attempt = j->id.attempt;
			gp_strlcpy(g->user, j->user, sizeof(g->user));
			gp_strlcpy(g->name, j->name, sizeof(g->name));
			if (j->phase == PJ_RUNNING && !j->exited)
				out->busy |= 1ULL << i;
		}
	}
	for (j = p->jobs; j != NULL; j = j->next)
		out->jobs++;
	out->paused = p->paused;
	out->leaving = p->leaving;
	out->fenced = p->fenced;
	out->window_open = p->window_open;
	for (i = 0; i < GP_PROVIDER_END_REASONS; i++) {
		out->end_reasons[i] = end_reasons[i];
		out->owner_ends[i] = p->owner_ends[i];
	}
	pthread_mutex_unlock(&p->lock);
	out->uploads = atomic_load(&p->uploads);
	out->upload_failures = atomic_load(&p->upload_failures);
	out->upload_bytes = atomic_load(&p->upload_bytes);
	out->restores = atomic_load(&p->restores);
	out->restore_failures = atomic_load(&p->restore_failures);
}

static json_t *
status_json(struct gp_provider *p)
{
	json_t *gpus = json_array(), *o, *image_cache = NULL;
	int64_t now = gp_mono_ms(), node_id;
	const struct pjob *j;
	int i, njobs = 0;

	pthread_mutex_lock(&p->ag->lock);
	node_id = p->ag->node_id;
	pthread_mutex_unlock(&p->ag->lock);
	for (i = 0; i < p->ag->gpus.n && i < 64; i++) {
		const struct gp_gpu_info *g = &p->ag->gpus.gpus[i];
		const char *st = gpu_state(p, i, &j);
		json_t *owner = json_array();

		if (p->present_pids[i] > 0)
			json_array_append_new(owner,
			    json_integer(p->present_pids[i]));
		json_array_append_new(gpus, json_pack("{si ss ss ss sb so so}",
		    "index", i, "uuid", g->uuid, "model", g->model, "state",
		    st, "lent", (p->offer_lent >> i) & 1, "job",
		    j != NULL ? job_json(j, now) : json_null(),
		    "owner_processes", owner));
	}
	for (j = p->jobs; j != NULL; j = j->next)
		njobs++;
	if (p->ag->images != NULL) {
		struct gp_image_cache_stats cs;
		gp_image_cache_stats(p->ag->images, &cs);
		image_cache = json_pack("{sI sI si si sI sI sI sI}", "bytes",
		    (json_int_t)cs.bytes, "max_bytes", (json_int_t)cs.max_bytes,
		    "layers", cs.layers, "in_use", cs.in_use, "hits",
		    (json_int_t)cs.hits, "misses", (json_int_t)cs.misses,
		    "evictions", (json_int_t)cs.evictions, "fetched_bytes",
		    (json_int_t)cs.fetched_bytes);
	}
	o = json_pack("{ss sI sb sb sb sb sI ss s:o so so si sb}", "node",
	    p->ag->name, "node_id", (json_int_t)node_id, "connected",
	    node_id != 0 && !p->fenced, "paused", p->paused, "leaving",
	    p->leaving, "window_open", p->window_open, "window_next_change_s",
	    (json_int_t)p->window_next_s, "policy_file",
	    p->ag->policy_path, "policy_error",
	    p->policy_error[0] ? json_string(p->policy_error) : json_null(),
	    "policy", gp_policy_to_json(&p->policy), "gpus", gpus, "jobs",
	    njobs, "fenced", p->fenced);
	if (o != NULL && p->ag->net != NULL)
		json_object_set_new(o, "network", json_pack("{ss s:o}",
		    "applies", gp_net_policy_name(gp_net_offer(p->ag->net)),
		    "why", gp_net_offer_why(p->ag->net) != NULL ?
		    json_string(gp_net_offer_why(p->ag->net)) : json_null()));
	if (o != NULL && p->ag->datacache != NULL)
		json_object_set_new(o, "data_cache",
		    gp_datacache_status(p->ag->datacache));
	if (o != NULL && image_cache != NULL)
		json_object_set_new(o, "image_cache", image_cache);
	else
		json_decref(image_cache);
	return o;
}

static uint64_t
request_mask(const struct gp_provider *p, uint64_t gpus, char *err,
    size_t errlen)
{
	uint64_t all = all_gpus_mask(p);

	if (gpus == 0)
		return all;
	if (gpus & ~all) {
		snprintf(err, errlen, "no such GPU on this node (it has %d)",
		    p->ag->gpus.n);
		return 0;
	}
	return gpus;
}

/*
 * Ends the jobs on mask with reason and waits until their GPUs are free
 * (the job's processes are gone). Returns the answer's "gpus" list.
 */
static json_t *
reclaim_wait(struct gp_provider *p, uint64_t mask, const char *reason,
    int now, int64_t t0)
{
	json_t *list = json_array();
	int64_t limit = t0 + p->policy.grace_s * 1000 + 10000;
	struct pjob *j, *on[GP_GPUS_MAX];
	struct gp_attempt_id ids[GP_GPUS_MAX];
	int64_t freed[GP_GPUS_MAX];
	int i, waiting;

	memset(on, 0, sizeof(on));
	for (i = 0; i < p->ag->gpus.n && i < 64; i++) {
		freed[i] = -1;
		for (j = p->jobs; j != NULL; j = j->next)
			if (!j->exited && (job_mask(j) & (1ULL << i)) &&
			    (mask & (1ULL << i))) {
				on[i] = j;
				ids[i] = j->id;
			}
	}
	end_jobs_on(p, mask, reason, !now);
	/* Wait for each job to be reaped: its GPU is free. */
	do {
		waiting = 0;
		for (i = 0; i < p->ag->gpus.n && i < 64; i++) {
			if (on[i] == NULL || freed[i] >= 0)
				continue;
			j = find(p, &ids[i]);
			if (j == NULL || j->exited)
				freed[i] = (j != NULL ? j->exited_mono
						      : gp_mono_ms()) - t0;
			else
				waiting = 1;
		}
		if (waiting)
			timed_wait(p, 20);
	} while (waiting && gp_mono_ms() < limit);
	/* Then for the final uploads, so the answer names the version. */
	do {
		waiting = 0;
		for (i = 0; i < p->ag->gpus.n && i < 64; i++)
			if (on[i] != NULL && find(p, &ids[i]) != NULL)
				waiting = 1;
		if (waiting)
			timed_wait(p, 50);
	} while (waiting && gp_mono_ms() < limit + 60000);
	for (i = 0; i < p->ag->gpus.n && i < 64; i++) {
		json_t *job = json_null();
		const struct ended *e = NULL;
		int k, n = p->nrecent < (int)GP_ARRAY_LEN(p->recent)
		    ? p->nrecent : (int)GP_ARRAY_LEN(p->recent);

		if (!(mask & (1ULL << i)))
			continue;
		if (on[i] != NULL) {
			for (k = 0; k < n; k++)
				if (p->recent[k].id.job_id == ids[i].job_id &&
				    p->recent[k].id.attempt == ids[i].attempt)
					e = &p->recent[k];
			job = json_pack("{sI sI ss sI}", "id",
			    (json_int_t)ids[i].job_id, "attempt",
			    (json_int_t)ids[i].attempt, "outcome",
			    e == NULL ? "running" : e->killed ? "killed"
			    : "checkpointed",
			    "checkpoint_version",
			    (json_int_t)(e != NULL ? e->version : 0));
		}
		json_array_append_new(list, json_pack("{si sI so}", "index", i,
		    "freed_ms", (json_int_t)(freed[i] >= 0 ? freed[i] : -1),
		    "job", job));
	}
	return list;
}

/* Tells the coordinator this node leaves (best effort). */
static int
unregister(struct gp_provider *p)
{
	struct gp_http_client *http;
	struct gp_http_response resp;
	char body[64];
	int64_t node_id;
	int ok;

	pthread_mutex_lock(&p->ag->lock);
	node_id = p->ag->node_id;
	pthread_mutex_unlock(&p->ag->lock);
	if (node_id == 0)
		return 0;
	http = gp_http_client_new(p->ag->url, p->ag->token, p->ag->ca_file);
	if (http == NULL)
		return 0;
	snprintf(body, sizeof(body), "{\"node_id\":%lld}", (long long)node_id);
	/*
	 * From here on the node is gone for the coordinator: a heartbeat
	 * would get 404 and register it again (undoing the leave) before
	 * the agent exits.
	 */
	atomic_store(&p->ag->left, 1);
	ok = gp_http_request(http, "POST", "/v1/agent/leave", body,
	    strlen(body), NULL, 10000, &resp) == 0 && resp.status == 200;
	gp_http_response_fini(&resp);
	gp_http_client_free(http);
	return ok;
}

static void *
exit_later(void *arg)
{
	(void)arg;
	usleep(200 * 1000);
	kill(getpid(), SIGTERM);
	return NULL;
}

static json_t *
handle(void *arg, const struct gp_control_request *req, char *err,
    size_t errlen)
{
	struct gp_provider *p = arg;
	int64_t t0 = gp_mono_ms();
	json_t *o = NULL, *lent;
	uint64_t mask;
	pthread_t t;
	int i;

	pthread_mutex_lock(&p->lock);
	switch (req->cmd) {
	case GP_CONTROL_STATUS:
		o = status_json(p);
		break;
	case GP_CONTROL_POLICY_SHOW:
		o = json_pack("{ss s:o so sb sI}", "file", p->ag->policy_path,
		    "error", p->policy_error[0] ? json_string(p->policy_error)
						: json_null(),
		    "policy", gp_policy_to_json(&p->policy), "window_open",
		    p->window_open, "window_next_change_s",
		    (json_int_t)p->window_next_s);
		break;
	case GP_CONTROL_PAUSE:
	case GP_CONTROL_RESUME:
		if (p->leaving) {
			snprintf(err, errlen, "the node is leaving");
			break;
		}
		if (req->cmd == GP_CONTROL_PAUSE) {
			p->paused = 1;
		} else {
			if ((mask = request_mask(p, req->gpus, err,
			    errlen)) == 0)
				break;
			p->reclaimed &= ~mask;
			if (req->gpus == 0)
				p->paused = 0;
		}
		gp_info("owner %s gpus=0x%llx", req->cmd == GP_CONTROL_PAUSE ?
		    "paused" : "resumed", (unsigned long long)req->gpus);
		policy_apply(p);
		kick_heartbeat(p);
		lent = json_array();
		for (i = 0; i < p->ag->gpus.n && i < 64; i++)
			if (p->offer_lent & (1ULL << i))
				json_array_append_new(lent, json_integer(i));
		o = json_pack("{sb so}", "paused", p->paused, "lent", lent);
		break;
	case GP_CONTROL_RECLAIM:
		if ((mask = request_mask(p, req->gpus, err, errlen)) == 0)
			break;
		p->reclaimed |= mask;
		gp_info("owner reclaims gpus=0x%llx now=%d",
		    (unsigned long long)mask, req->now);
		/* The coordinator hears first, so it places nothing there. */
		offer_update(p);
		kick_heartbeat(p);
		o = json_pack("{so}", "gpus",
		    reclaim_wait(p, mask, "reclaimed", req->now, t0));
		json_object_set_new(o, "elapsed_ms",
		    json_integer(gp_mono_ms() - t0));
		break;
	case GP_CONTROL_LEAVE:
		p->leaving = 1;
		gp_info("owner leaves: draining");
		offer_update(p);
		kick_heartbeat(p);
		o = json_pack("{so}", "jobs",
		    reclaim_wait(p, all_gpus_mask(p), "provider_left", 0, t0));
		/* Final uploads and finished reports, then unregister. */
		while (p->jobs != NULL &&
		    gp_mono_ms() - t0 < p->policy.grace_s * 1000 + 120000)
			timed_wait(p, 100);
		pthread_mutex_unlock(&p->lock);
		gp_reports_wait_empty(p->ag->reports, 30000);
		json_object_set_new(o, "unregistered",
		    json_boolean(unregister(p)));
		pthread_mutex_lock(&p->lock);
		json_object_set_new(o, "elapsed_ms",
		    json_integer(gp_mono_ms() - t0));
		if (pthread_create(&t, NULL, exit_later, NULL) == 0)
			pthread_detach(t);
		break;
	}
	pthread_mutex_unlock(&p->lock);
	if (o == NULL && err[0] == '\0')
		snprintf(err, errlen, "out of memory");
	return o;
}

/* ---- life cycle ---- */

void
gp_provider_drain(struct gp_provider *p, const char *reason)
{
	int64_t t0 = gp_mono_ms(), limit;

	pthread_mutex_lock(&p->lock);
	if (p->jobs != NULL)
		gp_info("draining jobs=%s reason=%s", "all", reason);
	p->leaving = 1;
	offer_update(p);
	kick_heartbeat(p);
	end_jobs_on(p, ~0ULL, reason, 1);
	/* Jobs without GPUs too. */
	for (struct pjob *j = p->jobs; j != NULL; j = j->next)
		end_job(p, j, reason, 1);
	limit = t0 + p->policy.grace_s * 1000 + 60000;
	while (p->jobs != NULL && gp_mono_ms() < limit) {
		check_deadlines(p, gp_mono_ms());
		timed_wait(p, 50);
	}
	pthread_mutex_unlock(&p->lock);
}

struct gp_provider *
gp_provider_new(struct gp_agent *ag, char *err, size_t errlen)
{
	struct gp_control_ops ops;
	struct gp_provider *p;
	int i;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->ag = ag;
	pthread_mutex_init(&p->lock, NULL);
	gp_cond_init_monotonic(&p->cond);
	gp_policy_default(&p->policy);
	if (ag->policy_path[0] != '\0') {
		struct gp_policy np;
		int line = 0;
		char perr[512];

		if (gp_policy_load(ag->policy_path, &np, &line, perr,
		    sizeof(perr)) != 0) {
			if (line > 0)
				snprintf(err, errlen, "%s:%d: %s",
				    ag->policy_path, line, perr);
			else
				snprintf(err, errlen, "%s: %s",
				    ag->policy_path, perr);
			goto fail;
		}
		p->policy = np;
		stat(ag->policy_path, &p->policy_st);
		p->have_policy_file = 1;
	}
	p->window_open = -1;
	{
		struct tm tm;
		time_t t = time(NULL);
		localtime_r(&t, &tm);
		p->window_open = gp_policy_window_open(&p->policy, &tm,
		    &p->window_next_s);
	}
	p->offer_lent = lent_mask(p);
	p->offer_accepting = accepting(p);
	p->offer_seq = 1;
	if (ag->control_path[0] != '\0') {
		ops.arg = p;
		ops.handle = handle;
		p->control = gp_control_start(ag->control_path, ag->owner_uid,
		    &ops, err, errlen);
		if (p->control == NULL)
			goto fail;
	}
	for (i = 0; i < WORKERS; i++) {
		if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0)
			break;
		p->nworkers++;
	}
	if (p->nworkers == 0 ||
	    pthread_create(&p->tick, NULL, tick_main, p) != 0) {
		snprintf(err, errlen, "cannot start threads");
		goto fail;
	}
	p->tick_started = 1;
	return p;
fail:
	gp_provider_free(p);
	return NULL;
}

void
gp_provider_free(struct gp_provider *p)
{
	int i;

	if (p == NULL)
		return;
	if (p->control != NULL)
		gp_control_stop(p->control);
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (p->tick_started)
		pthread_join(p->tick, NULL);
	for (i = 0; i < p->nworkers; i++)
		pthread_join(p->workers[i], NULL);
	while (p->jobs != NULL)
		unlink_job(p, p->jobs);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
