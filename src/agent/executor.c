/*
 * executor.c: the job table and its one thread. An epoll loop watches,
 * for every job, the pidfd of its pid 1 (the sandbox's init, or the OCI
 * runtime's process for a container), its output pipe and its status
 * pipe; an eventfd wakes it for new work from other threads. A job is
 * over when its pid 1 is reaped and both pipes are at end of file. What
 * is common to every job lives here (work directory, environment,
 * cgroups, pipes, time limits, kill, signals, reaping); how its processes
 * are made is the job's struct gp_executor_ops.
 */
#include "agent/executor.h"
#include "agent/gpushare.h"

#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:" \
		     "/sbin:/bin"

enum watch_kind { WATCH_PID, WATCH_OUT, WATCH_STATUS };

struct job;

struct watch {
	struct job *job;
	enum watch_kind kind;
};

/* How often a job with a disk cap has its work directory measured. */
#define DISK_CHECK_MS 1000

struct job {
	struct gp_attempt_id id;
	struct gp_exec_job x;		/* what the implementation sees */
	const struct gp_executor_ops *ops;
	char argv0[256];
	pid_t pid;
	int pidfd, out_fd, status_fd;
	struct watch watches[3];
	int reaped, out_eof, status_eof;
	siginfo_t init_exit;
	int exec_ok, exec_errno;	/* exec_errno: exec failed */
	int setup_stage, setup_errno;	/* setup_stage: setup failed */
	int have_status, status;	/* the command's wait status */
	enum gp_exec_kill kill_how;	/* 0, or why we killed it */
	int timed_out;
	int64_t deadline;		/* gp_mono_ms(), 0 for none */
	int64_t mem_mib;		/* its memory limit, 0 for none */
	int64_t disk_mib;		/* its work directory's cap, 0: none */
	int64_t disk_check;		/* gp_mono_ms() of the next look */
	int64_t disk_used_mib;		/* what it held, past its cap */
	struct gp_cgroup_job cgroup;
	struct job *next;
};

enum op_kind { OP_START, OP_KILL, OP_SIGNAL };

struct op {
	enum op_kind kind;
	struct gp_assignment assignment;	/* OP_START */
	struct gp_attempt_id id;		/* OP_KILL */
	enum gp_exec_kill how;
	int sig;				/* OP_SIGNAL */
	struct op *next;
};

struct gp_executor {
	const struct gp_exec_config *cfg;
	const struct gp_exec_events *ev;
	int epfd, wakefd;
	pthread_t thread;
	pthread_mutex_t lock;
	struct op *ops, **ops_tail;	/* under lock */
	int stopping;			/* under lock */
	struct job *jobs;		/* executor thread only */
	/* The warm sandbox for the next plain job (executor thread). */
	struct gp_sandbox_warm warm;
	int have_warm;
	unsigned int warm_seq;
	int64_t warm_retry_ms;		/* gp_mono_ms() of the next try */
	unsigned long warm_starts;	/* under lock */
	/* The running jobs' networks, for /metrics (under lock). */
	struct gp_exec_network *nets;
	int nnets, capnets;
	/* How to enter each running job (under lock; attach.c). */
	struct enter_entry *enters;
};

struct enter_entry {
	struct gp_exec_enter e;
	struct enter_entry *next;
};

static void free_strings(char **v);

static char **
copy_strings(char *const *v)
{
	char **out;
	size_t n = 0, i;

	while (v != NULL && v[n] != NULL)
		n++;
	if ((out = calloc(n + 1, sizeof(*out))) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((out[i] = strdup(v[i])) == NULL) {
			free_strings(out);
			return NULL;
		}
	return out;
}

void
gp_exec_enter_fini(struct gp_exec_enter *e)
{
	free_strings(e->env);
	e->env = NULL;
}

/* Called when j's init runs, with its environment still in j->x.env. */
static void
enter_add(struct gp_executor *ex, const struct job *j)
{
	const struct gp_sandbox_user *u = ex->cfg->user;
	struct enter_entry *n = calloc(1, sizeof(*n));

	if (n == NULL || (n->e.env = copy_strings(j->x.env)) == NULL) {
		free(n);
		return;
	}
	n->e.id = j->id;
	n->e.pid = j->pid;
	n->e.uid = u != NULL ? u->uid : (uid_t)-1;
	n->e.gid = u != NULL ? u->gid : (gid_t)-1;
	n->e.userns = u != NULL && u->userns;
	n->e.container = j->ops == &gp_container_exec_ops;
	/* A path too long for PATH_MAX leaves it out of the cgroup. */
	if (j->x.cgroup.ndirs > 0 &&
	    strlen(j->x.cgroup.dirs[0]) + 14 < sizeof(n->e.cgroup_procs)) {
		memcpy(n->e.cgroup_procs, j->x.cgroup.dirs[0],
		    strlen(j->x.cgroup.dirs[0]));
		strcat(n->e.cgroup_procs, "/cgroup.procs");
	}
	pthread_mutex_lock(&ex->lock);
	n->next = ex->enters;
	ex->enters = n;
	pthread_mutex_unlock(&ex->lock);
}

static void
enter_remove(struct gp_executor *ex, const struct gp_attempt_id *id)
{
	struct enter_entry **p, *n;

	pthread_mutex_lock(&ex->lock);
	for (p = &ex->enters; (n = *p) != NULL; p = &n->next)
		if (n->e.id.job_id == id->job_id &&
		    n->e.id.attempt == id->attempt) {
			*p = n->next;
			gp_exec_enter_fini(&n->e);
			free(n);
			break;
		}
	pthread_mutex_unlock(&ex->lock);
}

int
gp_executor_enter_info(struct gp_executor *ex,
    const struct gp_attempt_id *id, struct gp_exec_enter *out)
{
	struct enter_entry *n;
	int ret = GP_ENOENT;

	pthread_mutex_lock(&ex->lock);
	for (n = ex->enters; n != NULL; n = n->next)
		if (n->e.id.job_id == id->job_id &&
		    n->e.id.attempt == id->attempt) {
			*out = n->e;
			out->env = copy_strings(n->e.env);
			ret = out->env != NULL ? 0 : GP_ENOMEM;
			break;
		}
	pthread_mutex_unlock(&ex->lock);
	return ret;
}

static void
networks_add(struct gp_executor *ex, const struct job *j)
{
	struct gp_exec_network *n;

	if (j->x.net.slot < 0)
		return;
	pthread_mutex_lock(&ex->lock);
	if (ex->nnets == ex->capnets) {
		int cap = ex->capnets ? 2 * ex->capnets : 16;

		n = realloc(ex->nets, (size_t)cap * sizeof(*n));
		if (n == NULL) {
			pthread_mutex_unlock(&ex->lock);
			return;		/* only /metrics misses it */
		}
		ex->nets = n;
		ex->capnets = cap;
	}
	ex->nets[ex->nnets].id = j->id;
	ex->nets[ex->nnets].net = j->x.net;
	ex->nnets++;
	pthread_mutex_unlock(&ex->lock);
}

static void
networks_remove(struct gp_executor *ex, const struct gp_attempt_id *id)
{
	int i;

	pthread_mutex_lock(&ex->lock);
	for (i = 0; i < ex->nnets; i++)
		if (ex->nets[i].id.job_id == id->job_id &&
		    ex->nets[i].id.attempt == id->attempt) {
			ex->nets[i] = ex->nets[--ex->nnets];
			break;
		}
	pthread_mutex_unlock(&ex->lock);
}

int
gp_executor_networks(struct gp_executor *ex, struct gp_exec_network *out,
    int max)
{
	int i, n;

	pthread_mutex_lock(&ex->lock);
	n = ex->nnets;
	for (i = 0; i < n && i < max; i++)
		out[i] = ex->nets[i];
	pthread_mutex_unlock(&ex->lock);
	return n;
}

static void
wake(struct gp_executor *ex)
{
	uint64_t one = 1;

	(void)!write(ex->wakefd, &one, sizeof(one));
}

static void
push(struct gp_executor *ex, struct op *op)
{
	pthread_mutex_lock(&ex->lock);
	op->next = NULL;
	*ex->ops_tail = op;
	ex->ops_tail = &op->next;
	pthread_mutex_unlock(&ex->lock);
	wake(ex);
}

int
gp_executor_start(struct gp_executor *ex, struct gp_assignment *a)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return GP_ENOMEM;
	op->kind = OP_START;
	op->assignment = *a;
	memset(a, 0, sizeof(*a));
	push(ex, op);
	return 0;
}

void
gp_executor_kill(struct gp_executor *ex, const struct gp_attempt_id *id,
    enum gp_exec_kill how)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL) {
		gp_error("executor: out of memory queuing kill job=%lld",
		    (long long)id->job_id);
		return;
	}
	op->kind = OP_KILL;
	op->id = *id;
	op->how = how;
	push(ex, op);
}

void
gp_executor_signal(struct gp_executor *ex, const struct gp_attempt_id *id,
    int sig)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL) {
		gp_error("executor: out of memory queuing signal job=%lld",
		    (long long)id->job_id);
		return;
	}
	op->kind = OP_SIGNAL;
	op->id = *id;
	op->sig = sig;
	push(ex, op);
}

void
gp_executor_output_dir(const struct gp_exec_config *cfg,
    const struct gp_attempt_id *id, char *out, size_t len)
{
	snprintf(out, len, "%s/jobs/%lld-%lld/output", cfg->work_dir,
	    (long long)id->job_id, (long long)id->attempt);
}

void
gp_executor_checkpoint_dir(const struct gp_exec_config *cfg,
    const struct gp_attempt_id *id, char *out, size_t len)
{
	snprintf(out, len, "%s/jobs/%lld-%lld/checkpoint", cfg->work_dir,
	    (long long)id->job_id, (long long)id->attempt);
}

static struct job *
find(struct gp_executor *ex, const struct gp_attempt_id *id)
{
	struct job *j;

	for (j = ex->jobs; j != NULL; j = j->next)
		if (j->id.job_id == id->job_id && j->id.attempt == id->attempt)
			return j;
	return NULL;
}

static void
fail_start(struct gp_executor *ex, const struct gp_attempt_id *id,
    const char *fmt, const char *arg, int err)
{
	struct gp_exec_result r = {.reason = "start_failed"};
	char what[256];

	snprintf(what, sizeof(what), fmt, arg);
	if (err != 0)
		snprintf(r.message, sizeof(r.message), "%s: %s", what,
		    strerror(err));
	else
		gp_strlcpy(r.message, what, sizeof(r.message));
	gp_warn("job start failed job=%lld attempt=%lld message=\"%s\"",
	    (long long)id->job_id, (long long)id->attempt, r.message);
	ex->ev->finished(ex->ev->arg, id, &r);
}

static int
env_reserved(const char *kv)
{
	return strncmp(kv, "CUDA_VISIBLE_DEVICES=", 21) == 0 ||
	    strncmp(kv, "NVIDIA_VISIBLE_DEVICES=", 23) == 0 ||
	    (strncmp(kv, "GPUPOOL_", 8) == 0 &&
		/* a job array's task: set by the coordinator (state.c) */
		strncmp(kv, "GPUPOOL_ARRAY_JOB_ID=", 21) != 0 &&
		strncmp(kv, "GPUPOOL_ARRAY_TASK_ID=", 22) != 0) ||
	    strncmp(kv, "HOME=", 5) == 0;
}

static void
free_strings(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p != NULL; p++)
		free(*p);
	free(v);
}

/*
 * Sets kv in env (n entries, room for more): replaces an entry with the
 * same key, or appends. With append_value, a PATH or LD_LIBRARY_PATH
 * already set gets kv's value appended after a colon. Takes kv.
 */
static void
env_set(char **env, int *n, char *kv, int append_value)
{
	size_t klen = strcspn(kv, "=");
	char *joined;

	for (int i = 0; i < *n; i++) {
		if (strncmp(env[i], kv, klen) != 0 || env[i][klen] != '=')
			continue;
		if (append_value && (strncmp(kv, "PATH=", 5) == 0 ||
		    strncmp(kv, "LD_LIBRARY_PATH=", 16) == 0) &&
		    env[i][klen + 1] != '\0' &&
		    asprintf(&joined, "%s:%s", env[i], kv + klen + 1) >= 0) {
			free(kv);
			kv = joined;
		}
		free(env[i]);
		env[i] = kv;
		return;
	}
	env[(*n)++] = kv;
}

static int
count_strings(char *const *v)
{
	int n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

/*
 * Builds the job's environment: the implementation's base (an image's
 * Env), the job's env minus reserved names, the implementation's device
 * env, then PATH (when none), HOME and the GPU and GPUPOOL_* variables.
 * A later entry replaces an earlier one of the same name. Returns NULL
 * on allocation failure.
 */
static char **
build_env(struct gp_executor *ex, const struct gp_assignment *a,
    const struct gp_exec_job *x)
{
	const struct gp_exec_config *cfg = ex->cfg;
	char devices[GP_GPUS_MAX * GP_GPU_UUID_MAX], indices[GP_GPUS_MAX * 4];
	char visible[GP_GPUS_MAX * 4], *kv;
	const char *cuda;
	char **env;
	int i, n = 0, have_path = 0, room;
	size_t dl = 0, il = 0, vl = 0;

	devices[0] = indices[0] = visible[0] = '\0';
	for (i = 0; i < a->ngpus; i++) {
		const struct gp_gpu_info *g = &cfg->gpus[a->gpus[i]];
		dl += (size_t)snprintf(devices + dl, sizeof(devices) - dl,
		    "%s%s", i ? "," : "", g->uuid);
		il += (size_t)snprintf(indices + il, sizeof(indices) - il,
		    "%s%d", i ? "," : "", a->gpus[i]);
		vl += (size_t)snprintf(visible + vl, sizeof(visible) - vl,
		    "%s%d", i ? "," : "", i);
	}
	/* A container sees its GPUs only, numbered from 0. */
	cuda = cfg->gpu_uuids ? devices : x->gpus_renumbered ? visible :
	    indices;
	room = count_strings(x->base_env) + a->nenv +
	    count_strings(x->device_env) + 32;
	if ((env = calloc((size_t)room + 1, sizeof(char *))) == NULL)
		return NULL;
	for (i = 0; i < count_strings(x->base_env); i++) {
		if ((kv = strdup(x->base_env[i])) == NULL)
			goto fail;
		env_set(env, &n, kv, 0);
	}
	for (i = 0; i < a->nenv; i++) {
		if (env_reserved(a->env[i]))
			continue;
		if ((kv = strdup(a->env[i])) == NULL)
			goto fail;
		env_set(env, &n, kv, 0);
	}
	for (i = 0; i < count_strings(x->device_env); i++) {
		if (env_reserved(x->device_env[i]))
			continue;
		if ((kv = strdup(x->device_env[i])) == NULL)
			goto fail;
		env_set(env, &n, kv, 1);
	}
	for (i = 0; i < n; i++)
		if (strncmp(env[i], "PATH=", 5) == 0)
			have_path = 1;
#define ADD(...)                                                            \
	do {                                                                \
		if (asprintf(&kv, __VA_ARGS__) < 0)                         \
			goto fail;                                          \
		env_set(env, &n, kv, 0);                                    \
	} while (0)
	if (!have_path)
		ADD("PATH=%s", DEFAULT_PATH);
	ADD("HOME=%s", x->workdir);
	ADD("CUDA_VISIBLE_DEVICES=%s", cuda);
	ADD("NVIDIA_VISIBLE_DEVICES=%s", a->ngpus == 0 ? "none" : cuda);
	ADD("GPUPOOL_JOB_ID=%lld", (long long)a->id.job_id);
	ADD("GPUPOOL_ATTEMPT=%lld", (long long)a->id.attempt);
	ADD("GPUPOOL_GPUS=%s", indices);
	ADD("GPUPOOL_JOB_NAME=%s", a->name);
	ADD("GPUPOOL_CHECKPOINT_DIR=%s/checkpoint", x->workdir);
	ADD("GPUPOOL_OUTPUT_DIR=%s/output", x->workdir);
	ADD("GPUPOOL_RESTART_COUNT=%lld", (long long)a->restart_count);
	ADD("GPUPOOL_CHECKPOINT_VERSION=%lld", (long long)a->restored_version);
	ADD("GPUPOOL_CHECKPOINT_SIGNAL=%s",
	    gp_signal_name(a->checkpoint_signal ? a->checkpoint_signal
						: SIGUSR1));
	if ((a->gpu_milli > 0 || a->gpu_mem_mib > 0) && a->ngpus == 1) {
		/* A fraction of its one GPU. */
		int64_t total = cfg->gpus[a->gpus[0]].mem_mib;
		int milli = gp_gpushare_share_milli(a->gpu_milli,
		    a->gpu_mem_mib, total);
		int64_t mem_mib = a->gpu_mem_mib > 0 ? a->gpu_mem_mib
						     : total * milli / 1000;
		char lib[PATH_MAX], region[PATH_MAX];

		ADD("GPUPOOL_GPU_SHARE=%d.%03d", milli / 1000, milli % 1000);
		ADD("GPUPOOL_GPU_MEM_MIB=%lld", (long long)mem_mib);
		/* Enforced by libgpupool-cuda.so (docs/gpu-sharing.md). */
		if (cfg->gpu_shim != NULL) {
			int rc = gp_gpushare_prepare(x->workdir, cfg->gpu_shim,
			    mem_mib * 1048576, milli, &cfg->gpus[a->gpus[0]],
			    lib, sizeof(lib), region, sizeof(region));

			if (rc != 0) {
				gp_error("executor: gpushare job=%lld: %s",
				    (long long)a->id.job_id, gp_strerror(rc));
				goto fail;
			}
			ADD("LD_PRELOAD=%s", lib);
			ADD("GPUPOOL_SHIM_REGION=%s", region);
		}
	}
	if (a->parts > 1) {
		/* torchrun / DDP: one node per part (docs/scheduling.md). */
		char gaddr[20];

		/* Linked gangs: the master part's own address (netns.c). */
		if (cfg->net != NULL && gp_net_gangs(cfg->net)) {
			gp_net_gang_addr(a->id.job_id, 0, gaddr, sizeof(gaddr));
			ADD("MASTER_ADDR=%s", gaddr);
			ADD("GLOO_SOCKET_IFNAME=%s", "eth0");
			ADD("NCCL_SOCKET_IFNAME=%s", "eth0");
		} else
			ADD("MASTER_ADDR=%s", a->master_addr);
		ADD("MASTER_PORT=%d", a->master_port);
		ADD("WORLD_SIZE=%d", a->parts);
		ADD("RANK=%d", a->part);
		ADD("LOCAL_RANK=0");
		ADD("NODE_RANK=%d", a->part);
		ADD("GPUPOOL_NNODES=%d", a->parts);
		ADD("GPUPOOL_NODE_RANK=%d", a->part);
		ADD("GPUPOOL_GPUS_PER_NODE=%d", a->gpus_per_node);
	}
#undef ADD
	return env;
fail:
	free_strings(env);
	return NULL;
}

static void
watch(struct gp_executor *ex, struct job *j, enum watch_kind kind, int fd)
{
	struct epoll_event e = {.events = EPOLLIN};

	j->watches[kind].job = j;
	j->watches[kind].kind = kind;
	e.data.ptr = &j->watches[kind];
	if (epoll_ctl(ex->epfd, EPOLL_CTL_ADD, fd, &e) != 0)
		gp_error("executor: epoll_ctl: %s", strerror(errno));
}

static void
unwatch(struct gp_executor *ex, int *fd)
{
	if (*fd < 0)
		return;
	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, *fd, NULL);
	close(*fd);
	*fd = -1;
}

/* What prepare and the executor made for a job, apart from its cgroups. */
static void
release(struct job *j)
{
	struct gp_exec_job *x = &j->x;

	x->a = NULL;
	j->ops->release(x);
	if (x->cfg->net != NULL)
		gp_net_job_close(x->cfg->net, &x->net);
	free_strings(x->argv);
	free_strings(x->base_env);
	free_strings(x->device_env);
	free_strings(x->env);
	x->argv = x->base_env = x->device_env = x->env = NULL;
	gp_cgroup_close_fds(&x->cgroup);
}

static uid_t chown_uid;
static gid_t chown_gid;

static int
chown_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return lchown(path, chown_uid, chown_gid) != 0 ? -1 : 0;
}

/*
 * The job's directory, its checkpoint directory (restored or empty) and
 * its output directory (empty), owned by the job's uid unless it is -1 (a
 * user namespace of the agent's own user). A restored checkpoint's files
 * were written for the plain sandbox's user: handed over to the job's uid
 * (a container's differs).
 */
static int
make_workdir(struct job *j, const char *restore)
{
	const struct gp_exec_job *x = &j->x;
	char ckpt[PATH_MAX + 16], output[PATH_MAX + 16];
	int own = x->uid != (uid_t)-1;
	struct stat st;

	if (lstat(x->workdir, &st) == 0)
		gp_remove_tree(x->workdir);
	if (mkdir(x->workdir, 0700) != 0)
		return errno;
	if (own && chown(x->workdir, x->uid, x->gid) != 0)
		return errno;
	snprintf(ckpt, sizeof(ckpt), "%s/checkpoint", x->workdir);
	if (restore != NULL) {
		if (rename(restore, ckpt) != 0)
			return errno;
		/* The executor thread only: the statics are safe here. */
		chown_uid = x->uid;
		chown_gid = x->gid;
		if (own && nftw(ckpt, chown_one, 16, FTW_PHYS) != 0)
			return errno ? errno : EIO;
	} else if (mkdir(ckpt, 0700) != 0)
		return errno;
	if (own && chown(ckpt, x->uid, x->gid) != 0)
		return errno;
	snprintf(output, sizeof(output), "%s/output", x->workdir);
	if (mkdir(output, 0700) != 0)
		return errno;
	if (own && chown(output, x->uid, x->gid) != 0)
		return errno;
	return 0;
}

static int64_t
job_pids_max(const struct gp_exec_config *cfg)
{
	return cfg->pids_max > 0 ? cfg->pids_max : GP_CGROUP_PIDS_MAX;
}

/*
 * Makes the warm sandbox when there is none: its cgroup, and init cloned
 * into it, where it waits for the next plain job. The slow step of a
 * start (joining a cgroup: an RCU grace period) happens here, between
 * jobs, instead of when a job comes.
 */
static void
make_warm(struct gp_executor *ex)
{
	const struct gp_exec_config *cfg = ex->cfg;
	char name[32], why[512] = "";
	int64_t now;

	if (ex->have_warm || cfg->no_warm || cfg->user == NULL ||
	    cfg->cgroups == NULL || cfg->cgroups->mode == GP_CGROUP_NONE)
		return;
	if ((now = gp_mono_ms()) < ex->warm_retry_ms)
		return;
	snprintf(name, sizeof(name), "warm-%u", ++ex->warm_seq);
	if (gp_sandbox_warm_make(&ex->warm, cfg->spawner, cfg->cgroups,
	    cfg->user, name, job_pids_max(cfg), why, sizeof(why)) != 0) {
		/* Jobs start the usual way meanwhile. */
		gp_warn("no warm sandbox why=\"%s\" retry_s=10", why);
		ex->warm_retry_ms = now + 10000;
		return;
	}
	/* Its mount namespace holds the root template of now. */
	ex->warm.root_gen = gp_sandbox_template_gen(cfg->root_template);
	ex->have_warm = 1;
}

/*
 * Hands a plain job to the warm sandbox when there is one: its cgroup
 * gets the job's limits (before init may run anything of the job) and
 * name, init the job's spec. Returns 1 when the job runs (j's pid, pidfd
 * and pipes, x->cgroup set), 0 for the usual start; a warm sandbox that
 * failed is discarded.
 */
static int
start_warm(struct gp_executor *ex, struct job *j)
{
	struct gp_sandbox_warm *w = &ex->warm;
	struct gp_exec_job *x = &j->x;
	char why[1024] = "";

	if (!ex->have_warm || j->ops != &gp_sandbox_exec_ops ||
	    x->runtime_cgroups)
		return 0;
	ex->have_warm = 0;
	if (gp_cgroup_set_limits(ex->cfg->cgroups, &w->cgroup, x->a->mem_mib,
	    job_pids_max(ex->cfg), why, sizeof(why)) != 0)
		goto discard;
	/* Named after its job, where the hierarchy allows (v1 does). */
	(void)gp_cgroup_rename(&w->cgroup, x->name);
	x->warm = w;
	if (j->ops->spawn(x, &j->pid, &j->pidfd, why, sizeof(why)) != 0) {
		x->warm = NULL;
		goto discard;
	}
	x->warm = NULL;
	x->cgroup = w->cgroup;
	j->out_fd = w->out_fd;
	j->status_fd = w->status_fd;
	gp_sandbox_warm_forget(w);
	pthread_mutex_lock(&ex->lock);
	ex->warm_starts++;
	pthread_mutex_unlock(&ex->lock);
	return 1;
discard:
	gp_warn("warm sandbox not used job=%lld attempt=%lld why=\"%s\"",
	    (long long)j->id.job_id, (long long)j->id.attempt, why);
	gp_sandbox_warm_discard(w);
	return 0;
}

static void
start_job(struct gp_executor *ex, struct gp_assignment *a)
{
	const struct gp_exec_config *cfg = ex->cfg;
	int out[2] = {-1, -1}, status[2] = {-1, -1}, i, err;
	char name[64], why[1024];
	struct gp_net_gang gang;
	struct gp_exec_job *x;
	struct job *j;

	if (find(ex, &a->id) != NULL) {
		gp_warn("executor: duplicate assignment ignored job=%lld "
		    "attempt=%lld", (long long)a->id.job_id,
		    (long long)a->id.attempt);
		return;
	}
	for (i = 0; i < a->ngpus; i++)
		if (a->gpus[i] < 0 || a->gpus[i] >= cfg->ngpus) {
			snprintf(name, sizeof(name), "%d", a->gpus[i]);
			fail_start(ex, &a->id, "GPU index %s is not on this "
			    "node", name, 0);
			return;
		}
	if (a->container != NULL && cfg->containers == NULL) {
		fail_start(ex, &a->id, "this agent runs no container jobs: %s",
		    cfg->containers_why ? cfg->containers_why :
		    "not configured", 0);
		return;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		fail_start(ex, &a->id, "%s", "agent out of memory", 0);
		return;
	}
	j->id = a->id;
	j->pidfd = j->out_fd = j->status_fd = -1;
	j->ops = a->container != NULL ? &gp_container_exec_ops :
	    &gp_sandbox_exec_ops;
	x = &j->x;
	x->cfg = cfg;
	x->a = a;
	x->uid = (uid_t)-1;
	x->gid = (gid_t)-1;
	x->out_fd = x->status_fd = -1;
	gp_net_job_init(&x->net);
	snprintf(x->name, sizeof(x->name), "%lld-%lld",
	    (long long)a->id.job_id, (long long)a->id.attempt);
	snprintf(x->workdir, sizeof(x->workdir), "%s/jobs/%s", cfg->work_dir,
	    x->name);
	why[0] = '\0';
	if (j->ops->prepare(x, why, sizeof(why)) != 0) {
		fail_start(ex, &a->id, "%s", why, 0);
		goto fail;
	}
	gp_strlcpy(j->argv0, x->argv0 ? x->argv0 : "", sizeof(j->argv0));
	if ((err = make_workdir(j, a->restore_dir)) != 0) {
		fail_start(ex, &a->id, "work directory %s", x->workdir, err);
		goto fail;
	}
	if ((x->env = build_env(ex, a, x)) == NULL) {
		fail_start(ex, &a->id, "%s", "agent out of memory", 0);
		goto fail;
	}
	/* Never the agent's network: no namespace, no start. */
	gang.job_id = a->id.job_id;
	gang.part = a->part;
	gang.parts = a->parts;
	gang.addrs = (const char (*)[64])a->part_addrs;
	gang.overlay = a->overlay_peers;
	gang.overlay_priv = a->overlay_priv;
	gang.overlay_relay = a->overlay_relay.port > 0 ? &a->overlay_relay :
	    NULL;
	if (cfg->net != NULL && gp_net_job_open(cfg->net, a->network > 0 ?
	    (enum gp_net_policy)(a->network - 1) : GP_NET_LAN,
	    a->parts > 1 ? &gang : NULL, &x->net, why, sizeof(why)) != 0) {
		fail_start(ex, &a->id, "job network: %s", why, 0);
		goto fail;
	}
	if (start_warm(ex, j))
		goto started;
	if (x->runtime_cgroups)
		gp_cgroup_paths(cfg->cgroups, x->name, &x->cgroup);
	else if (gp_cgroup_create(cfg->cgroups, x->name, a->mem_mib,
	    job_pids_max(cfg), &x->cgroup, why, sizeof(why)) != 0)
		gp_warn("job runs without cgroup limits job=%lld attempt=%lld "
		    "why=\"%s\"", (long long)a->id.job_id,
		    (long long)a->id.attempt, why);
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0) {
		fail_start(ex, &a->id, "%s", "pipe", errno);
		goto fail;
	}
	x->out_fd = out[1];
	x->status_fd = status[1];
	why[0] = '\0';
	if (j->ops->spawn(x, &j->pid, &j->pidfd, why, sizeof(why)) != 0) {
		fail_start(ex, &a->id, "%s", why, 0);
		goto fail;
	}
	close(out[1]);
	close(status[1]);
	x->out_fd = x->status_fd = -1;
	j->out_fd = out[0];
	j->status_fd = status[0];
started:
	x->a = NULL;
	enter_add(ex, j);
	gp_cgroup_close_fds(&x->cgroup);
	free_strings(x->env);
	x->env = NULL;
	fcntl(j->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(j->status_fd, F_SETFL, O_NONBLOCK);
	watch(ex, j, WATCH_PID, j->pidfd);
	watch(ex, j, WATCH_OUT, j->out_fd);
	watch(ex, j, WATCH_STATUS, j->status_fd);
	if (a->time_limit_s > 0)
		j->deadline = gp_mono_ms() + a->time_limit_s * 1000;
	j->mem_mib = a->mem_mib;
	j->disk_mib = a->disk_mib;
	j->disk_check = gp_mono_ms() + DISK_CHECK_MS;
	j->next = ex->jobs;
	ex->jobs = j;
	networks_add(ex, j);
	gp_debug("job spawned job=%lld attempt=%lld pid=%d executor=%s "
	    "cgroup=%s", (long long)j->id.job_id, (long long)j->id.attempt,
	    (int)j->pid, j->ops->name,
	    j->x.cgroup.ndirs > 0 ? j->x.cgroup.dirs[0] : "none");
	return;
fail:
	for (i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (status[i] >= 0)
			close(status[i]);
	}
	release(j);
	gp_cgroup_remove(&x->cgroup);
	gp_remove_tree(x->workdir);
	free(j);
}

static void
kill_job(struct job *j, enum gp_exec_kill how, int timed_out)
{
	if (j->kill_how == 0 && !j->timed_out) {
		j->kill_how = how;
		j->timed_out = timed_out;
	}
	if (!j->reaped && j->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
	/* Backstop: anything that is in the cgroup but not the namespace. */
	gp_cgroup_kill(&j->x.cgroup);
}

/*
 * A job killed for passing its memory limit says so (`gpupool show`'s
 * message), its files in /tmp and /dev/shm counting, as the kernel
 * charges them to its cgroup.
 */
static void
explain_limit(struct job *j, struct gp_exec_result *r)
{
	if (j->disk_used_mib > 0 && j->kill_how == 0 && !j->timed_out) {
		r->reason = "killed";
		r->signal = SIGKILL;
		snprintf(r->message, sizeof(r->message), "stopped for passing "
		    "its disk limit of %lld MiB in its work directory (it held "
		    "%lld MiB): ask for more with submit --disk, within the "
		    "node's scratch-max", (long long)j->disk_mib,
		    (long long)j->disk_used_mib);
		return;
	}
	if (strcmp(r->reason, "killed") != 0 || r->signal != SIGKILL ||
	    j->mem_mib <= 0 || gp_cgroup_oom_kills(&j->x.cgroup) <= 0)
		return;
	snprintf(r->message, sizeof(r->message), "stopped for passing its "
	    "memory limit of %lld MiB (the kernel's out-of-memory killer; "
	    "its files in /tmp and /dev/shm count): ask for more with "
	    "submit --mem", (long long)j->mem_mib);
}

static void
result_of(struct job *j, struct gp_exec_result *r)
{
	char why[400];

	memset(r, 0, sizeof(*r));
	if (j->setup_stage != 0) {
		r->reason = "start_failed";
		snprintf(r->message, sizeof(r->message), "%s: %s: %s",
		    j->ops->name, j->ops->stage_name(j->setup_stage),
		    strerror(j->setup_errno));
	} else if (j->exec_errno != 0) {
		r->reason = "start_failed";
		snprintf(r->message, sizeof(r->message), "exec %s: %s",
		    j->argv0, strerror(j->exec_errno));
	} else if (j->timed_out) {
		r->reason = "timeout";
		r->signal = SIGKILL;
	} else if (j->kill_how == GP_EXEC_CANCELLED) {
		r->reason = "cancelled";
		r->signal = SIGKILL;
	} else if (j->have_status && WIFEXITED(j->status)) {
		r->reason = "exited";
		r->exit_code = WEXITSTATUS(j->status);
	} else if (j->have_status && WIFSIGNALED(j->status)) {
		r->reason = "killed";
		r->signal = WTERMSIG(j->status);
	} else if (!j->exec_ok && j->kill_how == 0 && j->ops->explain != NULL &&
	    (why[0] = '\0', j->ops->explain(&j->x, why, sizeof(why)),
	    why[0] != '\0')) {
		/* Its runtime failed before the command could start. */
		r->reason = "start_failed";
		gp_strlcpy(r->message, why, sizeof(r->message));
	} else {
		/* init itself died: killed from outside, or by the OOM killer. */
		r->reason = "killed";
		r->signal = j->init_exit.si_code == CLD_KILLED ||
		    j->init_exit.si_code == CLD_DUMPED ?
		    j->init_exit.si_status : SIGKILL;
	}
	explain_limit(j, r);
}

static void
finish_job(struct gp_executor *ex, struct job *j)
{
	struct gp_exec_result r;
	struct job **pp;

	for (pp = &ex->jobs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	result_of(j, &r);
	gp_net_job_bytes(&j->x.net, &r.net_sent, &r.net_received);
	networks_remove(ex, &j->id);
	enter_remove(ex, &j->id);
	unwatch(ex, &j->pidfd);
	/* A container's runtime removes its cgroups: before our backstop. */
	release(j);
	/* Nothing of the job outlives its report. */
	gp_cgroup_kill(&j->x.cgroup);
	if (!ex->cfg->keep_workdir && gp_remove_tree(j->x.workdir) != 0)
		gp_warn("cannot remove work directory dir=%s", j->x.workdir);
	r.workdir = j->x.workdir;
	gp_info("job finished job=%lld attempt=%lld reason=%s exit_code=%d "
	    "signal=%d net_sent=%lld net_received=%lld",
	    (long long)j->id.job_id, (long long)j->id.attempt, r.reason,
	    r.exit_code, r.signal, (long long)r.net_sent,
	    (long long)r.net_received);
	ex->ev->finished(ex->ev->arg, &j->id, &r);
	/*
	 * After the report: removing a cgroup waits for the kernel's
	 * cgroup lock, which a warm sandbox joining its own holds for a
	 * grace period.
	 */
	if (gp_cgroup_remove(&j->x.cgroup) != 0) {
		gp_cgroup_kill(&j->x.cgroup);
		if (gp_cgroup_remove(&j->x.cgroup) != 0)
			gp_warn("cannot remove cgroup job=%lld attempt=%lld "
			    "dir=%s", (long long)j->id.job_id,
			    (long long)j->id.attempt, j->x.cgroup.dirs[0]);
	}
	free(j);
}

static void
on_status(struct gp_executor *ex, struct job *j)
{
	struct gp_sandbox_record rec;
	ssize_t n;

	/* Records are smaller than PIPE_BUF: they arrive whole. */
	while ((n = read(j->status_fd, &rec, sizeof(rec))) ==
	    (ssize_t)sizeof(rec)) {
		switch (rec.kind) {
		case GP_SANDBOX_SETUP_FAILED:
			j->setup_stage = rec.stage ? rec.stage : -1;
			j->setup_errno = rec.value;
			break;
		case GP_SANDBOX_EXEC_FAILED:
			j->exec_errno = rec.value ? rec.value : ENOEXEC;
			break;
		case GP_SANDBOX_EXEC_OK:
			j->exec_ok = 1;
			gp_debug("job started job=%lld attempt=%lld pid=%d",
			    (long long)j->id.job_id, (long long)j->id.attempt,
			    (int)j->pid);
			ex->ev->started(ex->ev->arg, &j->id, j->pid);
			break;
		case GP_SANDBOX_EXITED:
			j->have_status = 1;
			j->status = rec.value;
			break;
		}
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		unwatch(ex, &j->status_fd);
		j->status_eof = 1;
	}
}

static void
on_output(struct gp_executor *ex, struct job *j)
{
	char buf[65536];
	ssize_t n;
	int rounds = 0;

	/* A few reads per wakeup, so that one chatty job cannot starve. */
	while (rounds++ < 4) {
		n = read(j->out_fd, buf, sizeof(buf));
		if (n > 0) {
			ex->ev->output(ex->ev->arg, &j->id, buf, (size_t)n);
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			unwatch(ex, &j->out_fd);
			j->out_eof = 1;
		}
		break;
	}
}

static void
on_pid(struct gp_executor *ex, struct job *j)
{
	memset(&j->init_exit, 0, sizeof(j->init_exit));
	if (syscall(SYS_waitid, P_PIDFD, j->pidfd, &j->init_exit,
	    WEXITED | WNOHANG, NULL) != 0 || j->init_exit.si_pid == 0)
		return;
	j->reaped = 1;
	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, j->pidfd, NULL);
}

static void
run_ops(struct gp_executor *ex)
{
	struct op *op, *next;
	uint64_t count;
	struct job *j;
	int stopping;

	(void)!read(ex->wakefd, &count, sizeof(count));
	pthread_mutex_lock(&ex->lock);
	stopping = ex->stopping;
	op = ex->ops;
	ex->ops = NULL;
	ex->ops_tail = &ex->ops;
	pthread_mutex_unlock(&ex->lock);
	for (; op != NULL; op = next) {
		next = op->next;
		if (op->kind == OP_START) {
			/* Nothing new starts once we are stopping. */
			if (!stopping)
				start_job(ex, &op->assignment);
			gp_assignment_fini(&op->assignment);
		} else if (op->kind == OP_SIGNAL) {
			if ((j = find(ex, &op->id)) != NULL && !j->reaped &&
			    j->pidfd >= 0) {
				gp_info("signalling job job=%lld attempt=%lld "
				    "signal=%s", (long long)op->id.job_id,
				    (long long)op->id.attempt,
				    gp_signal_name(op->sig));
				syscall(SYS_pidfd_send_signal, j->pidfd,
				    op->sig, NULL, 0);
			}
		} else if ((j = find(ex, &op->id)) != NULL) {
			gp_info("killing job job=%lld attempt=%lld why=%s",
			    (long long)op->id.job_id,
			    (long long)op->id.attempt,
			    op->how == GP_EXEC_CANCELLED ? "cancelled" :
			    op->how == GP_EXEC_RECLAIMED ? "reclaimed" :
			    "stale");
			kill_job(j, op->how, 0);
		}
		free(op);
	}
}

/* What a tree holds on disk, in bytes (its blocks; no mount crossed). */
static int64_t tree_bytes;

static int
add_blocks(const char *path, const struct stat *st, int type,
    struct FTW *ftw)
{
	(void)path;
	(void)type;
	(void)ftw;
	tree_bytes += (int64_t)st->st_blocks * 512;
	return 0;
}

/*
 * Looks at a job's work directory once DISK_CHECK_MS has passed since its
 * last look: a job holding more than its cap is killed (explain_limit
 * says why). Executor thread only.
 */
static void
check_disk(struct job *j, int64_t now)
{
	int64_t used_mib;

	if (j->disk_mib <= 0 || j->reaped || j->disk_used_mib > 0 ||
	    now < j->disk_check)
		return;
	j->disk_check = now + DISK_CHECK_MS;
	tree_bytes = 0;
	if (nftw(j->x.workdir, add_blocks, 32, FTW_PHYS | FTW_MOUNT) != 0)
		return;
	used_mib = tree_bytes >> 20;
	if (used_mib <= j->disk_mib)
		return;
	gp_info("disk limit passed job=%lld attempt=%lld used_mib=%lld "
	    "limit_mib=%lld", (long long)j->id.job_id,
	    (long long)j->id.attempt, (long long)used_mib,
	    (long long)j->disk_mib);
	j->disk_used_mib = used_mib;
	kill_job(j, 0, 0);
}

static int
next_timeout(struct gp_executor *ex)
{
	int64_t now = gp_mono_ms(), soonest = -1, t;
	struct job *j;

	for (j = ex->jobs; j != NULL; j = j->next) {
		check_disk(j, now);
		if (j->disk_mib > 0 && !j->reaped && j->disk_used_mib == 0 &&
		    (soonest < 0 || j->disk_check - now < soonest))
			soonest = j->disk_check > now ? j->disk_check - now : 0;
		if (j->deadline == 0 || j->timed_out || j->reaped)
			continue;
		if (j->deadline <= now) {
			gp_info("time limit reached job=%lld attempt=%lld",
			    (long long)j->id.job_id, (long long)j->id.attempt);
			kill_job(j, 0, 1);
			continue;
		}
		if (soonest < 0 || j->deadline - now < soonest)
			soonest = j->deadline - now;
	}
	/* The gang overlay's stalled handshakes (agent/overlay.c). */
	if ((t = gp_net_tick(ex->cfg->net, now)) >= 0 &&
	    (soonest < 0 || t < soonest))
		soonest = t;
	return soonest > INT_MAX ? INT_MAX : (int)soonest;
}

static void *
loop(void *arg)
{
	struct gp_executor *ex = arg;
	struct epoll_event evs[64];
	struct watch done;	/* marks events of a job already finished */
	int i, n, stopping = 0;

	for (;;) {
		pthread_mutex_lock(&ex->lock);
		if (ex->stopping && !stopping) {
			stopping = 1;
			for (struct job *j = ex->jobs; j != NULL; j = j->next)
				kill_job(j, GP_EXEC_STALE, 0);
		}
		pthread_mutex_unlock(&ex->lock);
		if (stopping && ex->have_warm) {
			gp_sandbox_warm_discard(&ex->warm);
			ex->have_warm = 0;
		}
		if (stopping && ex->jobs == NULL)
			break;
		if (!stopping)
			make_warm(ex);
		n = epoll_wait(ex->epfd, evs, GP_ARRAY_LEN(evs),
		    next_timeout(ex));
		for (i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			struct job *j;

			if (w == &done)
				continue;
			if (w == NULL) {
				run_ops(ex);
				continue;
			}
			j = w->job;
			if (w->kind == WATCH_PID)
				on_pid(ex, j);
			else if (w->kind == WATCH_OUT)
				on_output(ex, j);
			else
				on_status(ex, j);
			/* The other events of this round may name j too. */
			if (j->reaped && j->out_eof && j->status_eof) {
				for (int k = i + 1; k < n; k++) {
					struct watch *o = evs[k].data.ptr;
					if (o != NULL && o != &done &&
					    o->job == j)
						evs[k].data.ptr = &done;
				}
				finish_job(ex, j);
			}
		}
	}
	return NULL;
}

struct gp_executor *
gp_executor_new(const struct gp_exec_config *cfg,
    const struct gp_exec_events *events)
{
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
	struct gp_executor *ex;
	char jobs[PATH_MAX];

	snprintf(jobs, sizeof(jobs), "%s/jobs", cfg->work_dir);
	if (gp_mkdir_p(jobs, 0711) != 0) {
		gp_error("cannot create %s: %s", jobs, strerror(errno));
		return NULL;
	}
	/* The run-as user must be able to reach its directory. */
	chmod(cfg->work_dir, 0711);
	chmod(jobs, 0711);
	if ((ex = calloc(1, sizeof(*ex))) == NULL)
		return NULL;
	ex->cfg = cfg;
	ex->ev = events;
	ex->ops_tail = &ex->ops;
	pthread_mutex_init(&ex->lock, NULL);
	ex->epfd = epoll_create1(EPOLL_CLOEXEC);
	ex->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ex->epfd < 0 || ex->wakefd < 0 ||
	    epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->wakefd, &e) != 0 ||
	    pthread_create(&ex->thread, NULL, loop, ex) != 0) {
		gp_error("executor: cannot start: %s", strerror(errno));
		if (ex->epfd >= 0)
			close(ex->epfd);
		if (ex->wakefd >= 0)
			close(ex->wakefd);
		free(ex);
		return NULL;
	}
	return ex;
}

unsigned long
gp_executor_warm_starts(struct gp_executor *ex)
{
	unsigned long n;

	pthread_mutex_lock(&ex->lock);
	n = ex->warm_starts;
	pthread_mutex_unlock(&ex->lock);
	return n;
}

void
gp_executor_free(struct gp_executor *ex)
{
	struct op *op, *next;

	if (ex == NULL)
		return;
	pthread_mutex_lock(&ex->lock);
	ex->stopping = 1;
	pthread_mutex_unlock(&ex->lock);
	wake(ex);
	pthread_join(ex->thread, NULL);
	for (op = ex->ops; op != NULL; op = next) {
		next = op->next;
		gp_assignment_fini(&op->assignment);
		free(op);
	}
	close(ex->epfd);
	close(ex->wakefd);
	pthread_mutex_destroy(&ex->lock);
	free(ex->nets);
	free(ex);
}
