/*
 * executor.c: the job table and its one thread. An epoll loop watches,
 * for every job, the pidfd of its sandbox init, its output pipe and its
 * status pipe; an eventfd wakes it for new work from other threads. A job
 * is over when init is reaped and both pipes are at end of file.
 */
#include "agent/executor.h"

#include <errno.h>
#include <fcntl.h>
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

struct job {
	struct gp_attempt_id id;
	char argv0[256];
	char workdir[PATH_MAX];
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
};

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
gp_executor_checkpoint_dir(const struct gp_exec_config *cfg,
    const struct gp_attempt_id *id, char *out, size_t len)
{
	snprintf(out, len, "%s/jobs/%lld-%lld/checkpoint", cfg->work_dir,
	    (long long)id->job_id, (long long)id->attempt);
}

void
gp_executor_output_dir(const struct gp_exec_config *cfg,
    const struct gp_attempt_id *id, char *out, size_t len)
{
	snprintf(out, len, "%s/jobs/%lld-%lld/output", cfg->work_dir,
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
	    strncmp(kv, "GPUPOOL_", 8) == 0 || strncmp(kv, "HOME=", 5) == 0;
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

/* Builds the job's environment. Returns NULL on allocation failure. */
static char **
build_env(struct gp_executor *ex, const struct gp_assignment *a,
    const char *workdir)
{
	const struct gp_exec_config *cfg = ex->cfg;
	char devices[GP_GPUS_MAX * GP_GPU_UUID_MAX], indices[GP_GPUS_MAX * 4];
	char **env;
	int i, n = 0, have_path = 0;
	size_t dl = 0, il = 0;

	devices[0] = indices[0] = '\0';
	for (i = 0; i < a->ngpus; i++) {
		const struct gp_gpu_info *g = &cfg->gpus[a->gpus[i]];
		dl += (size_t)snprintf(devices + dl, sizeof(devices) - dl,
		    "%s%s", i ? "," : "", g->uuid);
		il += (size_t)snprintf(indices + il, sizeof(indices) - il,
		    "%s%d", i ? "," : "", a->gpus[i]);
	}
	if ((env = calloc((size_t)a->nenv + 16, sizeof(char *))) == NULL)
		return NULL;
	for (i = 0; i < a->nenv; i++) {
		if (env_reserved(a->env[i]))
			continue;
		if (strncmp(a->env[i], "PATH=", 5) == 0)
			have_path = 1;
		if ((env[n++] = strdup(a->env[i])) == NULL)
			goto fail;
	}
#define ADD(...)                                                            \
	do {                                                                \
		if (asprintf(&env[n], __VA_ARGS__) < 0) {                   \
			env[n] = NULL;                                      \
			goto fail;                                          \
		}                                                           \
		n++;                                                        \
	} while (0)
	if (!have_path)
		ADD("PATH=%s", DEFAULT_PATH);
	ADD("HOME=%s", workdir);
	ADD("CUDA_VISIBLE_DEVICES=%s", cfg->gpu_uuids ? devices : indices);
	ADD("NVIDIA_VISIBLE_DEVICES=%s", a->ngpus == 0 ? "none" :
	    cfg->gpu_uuids ? devices : indices);
	ADD("GPUPOOL_JOB_ID=%lld", (long long)a->id.job_id);
	ADD("GPUPOOL_ATTEMPT=%lld", (long long)a->id.attempt);
	ADD("GPUPOOL_GPUS=%s", indices);
	ADD("GPUPOOL_JOB_NAME=%s", a->name);
	ADD("GPUPOOL_CHECKPOINT_DIR=%s/checkpoint", workdir);
	ADD("GPUPOOL_OUTPUT_DIR=%s/output", workdir);
	ADD("GPUPOOL_RESTART_COUNT=%lld", (long long)a->restart_count);
	ADD("GPUPOOL_CHECKPOINT_VERSION=%lld", (long long)a->restored_version);
	ADD("GPUPOOL_CHECKPOINT_SIGNAL=%s",
	    gp_signal_name(a->checkpoint_signal ? a->checkpoint_signal
						: SIGUSR1));
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

/*
 * The job's directory, its checkpoint directory (restored or empty) and
 * its output directory (empty).
 */
static int
make_workdir(struct gp_executor *ex, struct job *j, const char *restore)
{
	const struct gp_sandbox_user *u = ex->cfg->user;
	char ckpt[PATH_MAX + 16], output[PATH_MAX + 16];
	struct stat st;

	if (lstat(j->workdir, &st) == 0)
		gp_remove_tree(j->workdir);
	if (mkdir(j->workdir, 0700) != 0)
		return errno;
	if (!u->userns && chown(j->workdir, u->uid, u->gid) != 0)
		return errno;
	snprintf(ckpt, sizeof(ckpt), "%s/checkpoint", j->workdir);
	if (restore != NULL) {
		if (rename(restore, ckpt) != 0)
			return errno;
	} else if (mkdir(ckpt, 0700) != 0)
		return errno;
	if (!u->userns && chown(ckpt, u->uid, u->gid) != 0)
		return errno;
	snprintf(output, sizeof(output), "%s/output", j->workdir);
	if (mkdir(output, 0700) != 0)
		return errno;
	if (!u->userns && chown(output, u->uid, u->gid) != 0)
		return errno;
	return 0;
}

/*
 * STAND-IN until the "containers" branch lands its mount code for both
 * executors: a plain job's mounts are bound onto directories that exist
 * on the provider's (read-only) root, as the sandbox cannot create a
 * mount point there. Returns 0, or fails the start with a message.
 */
static int
check_mounts(struct gp_executor *ex, const struct gp_assignment *a)
{
	struct stat st;
	int i;

	for (i = 0; i < a->nmounts; i++) {
		if (stat(a->mounts[i].target, &st) != 0 ||
		    !S_ISDIR(st.st_mode)) {
			fail_start(ex, &a->id, "mount target %s does not exist "
			    "on this provider (plain jobs mount data sets on "
			    "existing directories, such as /mnt)",
			    a->mounts[i].target, 0);
			return -1;
		}
	}
	return 0;
}

static void
start_job(struct gp_executor *ex, struct gp_assignment *a)
{
	const struct gp_exec_config *cfg = ex->cfg;
	int out[2] = {-1, -1}, status[2] = {-1, -1}, i, err;
	struct gp_sandbox_spec spec;
	char name[64], cgerr[512];
	char **env = NULL;
	struct job *j;

	if (find(ex, &a->id) != NULL) {
		gp_warn("executor: duplicate assignment ignored job=%lld "
		    "attempt=%lld", (long long)a->id.job_id,
		    (long long)a->id.attempt);
		return;
	}
	for (i = 0; i < a->ngpus; i++)
		if (a->gpus[i] >= cfg->ngpus) {
			snprintf(name, sizeof(name), "%d", a->gpus[i]);
			fail_start(ex, &a->id, "GPU index %s is not on this "
			    "node", name, 0);
			return;
		}
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		fail_start(ex, &a->id, "%s", "agent out of memory", 0);
		return;
	}
	j->id = a->id;
	j->pidfd = j->out_fd = j->status_fd = -1;
	gp_strlcpy(j->argv0, a->argv[0], sizeof(j->argv0));
	snprintf(name, sizeof(name), "%lld-%lld", (long long)a->id.job_id,
	    (long long)a->id.attempt);
	snprintf(j->workdir, sizeof(j->workdir), "%s/jobs/%s", cfg->work_dir,
	    name);
	if (check_mounts(ex, a) != 0)
		goto fail;
	if ((err = make_workdir(ex, j, a->restore_dir)) != 0) {
		fail_start(ex, &a->id, "work directory %s", j->workdir, err);
		goto fail;
	}
	if ((env = build_env(ex, a, j->workdir)) == NULL) {
		fail_start(ex, &a->id, "%s", "agent out of memory", 0);
		goto fail;
	}
	if (gp_cgroup_create(cfg->cgroups, name, a->mem_mib,
	    cfg->pids_max > 0 ? cfg->pids_max : GP_CGROUP_PIDS_MAX,
	    &j->cgroup, cgerr, sizeof(cgerr)) != 0)
		gp_warn("job runs without cgroup limits job=%lld attempt=%lld "
		    "why=\"%s\"", (long long)a->id.job_id,
		    (long long)a->id.attempt, cgerr);
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0) {
		fail_start(ex, &a->id, "%s", "pipe", errno);
		goto fail;
	}
	memset(&spec, 0, sizeof(spec));
	spec.user = cfg->user;
	spec.workdir = j->workdir;
	spec.argv = a->argv;
	spec.envp = env;
	spec.out_fd = out[1];
	spec.status_fd = status[1];
	spec.cgroup_fds = j->cgroup.procs_fds;
	spec.ncgroup_fds = j->cgroup.nfds;
	spec.mounts = a->mounts;
	spec.nmounts = a->nmounts;
	if (gp_sandbox_spawn(&spec, &j->pid, &j->pidfd) != 0) {
		fail_start(ex, &a->id, "%s", "clone", errno);
		goto fail;
	}
	close(out[1]);
	close(status[1]);
	gp_cgroup_close_fds(&j->cgroup);
	free_strings(env);
	j->out_fd = out[0];
	j->status_fd = status[0];
	fcntl(j->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(j->status_fd, F_SETFL, O_NONBLOCK);
	watch(ex, j, WATCH_PID, j->pidfd);
	watch(ex, j, WATCH_OUT, j->out_fd);
	watch(ex, j, WATCH_STATUS, j->status_fd);
	if (a->time_limit_s > 0)
		j->deadline = gp_mono_ms() + a->time_limit_s * 1000;
	j->next = ex->jobs;
	ex->jobs = j;
	gp_debug("job spawned job=%lld attempt=%lld pid=%d",
	    (long long)j->id.job_id, (long long)j->id.attempt, (int)j->pid);
	return;
fail:
	for (i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (status[i] >= 0)
			close(status[i]);
	}
	free_strings(env);
	gp_cgroup_close_fds(&j->cgroup);
	gp_cgroup_remove(&j->cgroup);
	gp_remove_tree(j->workdir);
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
	gp_cgroup_kill(&j->cgroup);
}

static void
result_of(const struct job *j, struct gp_exec_result *r)
{
	memset(r, 0, sizeof(*r));
	if (j->setup_stage != 0) {
		r->reason = "start_failed";
		snprintf(r->message, sizeof(r->message), "sandbox: %s: %s",
		    gp_sandbox_stage_name(j->setup_stage),
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
	} else {
		/* init itself died: killed from outside, or by the OOM killer. */
		r->reason = "killed";
		r->signal = j->init_exit.si_code == CLD_KILLED ||
		    j->init_exit.si_code == CLD_DUMPED ?
		    j->init_exit.si_status : SIGKILL;
	}
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
	unwatch(ex, &j->pidfd);
	if (gp_cgroup_remove(&j->cgroup) != 0) {
		gp_cgroup_kill(&j->cgroup);
		if (gp_cgroup_remove(&j->cgroup) != 0)
			gp_warn("cannot remove cgroup job=%lld attempt=%lld "
			    "dir=%s", (long long)j->id.job_id,
			    (long long)j->id.attempt, j->cgroup.dirs[0]);
	}
	if (!ex->cfg->keep_workdir && gp_remove_tree(j->workdir) != 0)
		gp_warn("cannot remove work directory dir=%s", j->workdir);
	r.workdir = j->workdir;
	gp_info("job finished job=%lld attempt=%lld reason=%s exit_code=%d "
	    "signal=%d", (long long)j->id.job_id, (long long)j->id.attempt,
	    r.reason, r.exit_code, r.signal);
	ex->ev->finished(ex->ev->arg, &j->id, &r);
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

static int
next_timeout(struct gp_executor *ex)
{
	int64_t now = gp_mono_ms(), soonest = -1;
	struct job *j;

	for (j = ex->jobs; j != NULL; j = j->next) {
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
		if (stopping && ex->jobs == NULL)
			break;
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
	free(ex);
}
