/*
 * sandbox.c: the job sandbox, natively: clone3 into new namespaces, then,
 * in the child ("init", pid 1 of the job's pid namespace), private mounts,
 * a read-only root, fresh /proc, private /tmp and /dev/shm, the work
 * directory bound writable, a fixed hostname, no privileges, and a fork
 * of the job's command. The child never allocates memory: the agent is
 * multi-threaded and another thread may hold the allocator's lock.
 */
#include "agent/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* The clone3 argument, version 0 (Linux 5.3), declared here. */
struct clone3_args {
	uint64_t flags;
	uint64_t pidfd;
	uint64_t child_tid;
	uint64_t parent_tid;
	uint64_t exit_signal;
	uint64_t stack;
	uint64_t stack_size;
	uint64_t tls;
};

enum stage {
	STAGE_CGROUP = 1,
	STAGE_SETSID,
	STAGE_USERNS,
	STAGE_PRIVATE,
	STAGE_READONLY,
	STAGE_PROC,
	STAGE_TMP,
	STAGE_SHM,
	STAGE_WORKDIR,
	STAGE_MOUNTS,
	STAGE_HOSTNAME,
	STAGE_USER,
	STAGE_NO_NEW_PRIVS,
	STAGE_CHDIR,
	STAGE_FORK,
};

static const char *stage_names[] = {
	[STAGE_CGROUP] = "join cgroup",
	[STAGE_SETSID] = "setsid",
	[STAGE_USERNS] = "map user namespace",
	[STAGE_PRIVATE] = "make mounts private",
	[STAGE_READONLY] = "make / read-only",
	[STAGE_PROC] = "mount /proc",
	[STAGE_TMP] = "mount /tmp",
	[STAGE_SHM] = "mount /dev/shm",
	[STAGE_WORKDIR] = "bind work directory",
	[STAGE_MOUNTS] = "bind data mounts",
	[STAGE_HOSTNAME] = "sethostname",
	[STAGE_USER] = "switch user",
	[STAGE_NO_NEW_PRIVS] = "no_new_privs",
	[STAGE_CHDIR] = "chdir work directory",
	[STAGE_FORK] = "fork",
};

const char *
gp_sandbox_stage_name(int stage)
{
	if (stage <= 0 || (size_t)stage >= GP_ARRAY_LEN(stage_names) ||
	    stage_names[stage] == NULL)
		return "setup";
	return stage_names[stage];
}

int
gp_sandbox_user_init(const char *run_as, struct gp_sandbox_user *user,
    char *err, size_t errlen)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	int n = GP_SANDBOX_GROUPS_MAX;

	memset(user, 0, sizeof(*user));
	if (geteuid() != 0) {
		getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &pwp);
		if (run_as != NULL && (pwp == NULL ||
		    strcmp(run_as, pwp->pw_name) != 0)) {
			snprintf(err, errlen, "--run-as %s needs root; as a "
			    "normal user jobs run as that user", run_as);
			return GP_EPERM;
		}
		user->userns = 1;
		user->uid = geteuid();
		user->gid = getegid();
		gp_strlcpy(user->name, pwp != NULL ? pwp->pw_name : "user",
		    sizeof(user->name));
		snprintf(user->uid_map, sizeof(user->uid_map), "%u %u 1\n",
		    (unsigned)user->uid, (unsigned)user->uid);
		snprintf(user->gid_map, sizeof(user->gid_map), "%u %u 1\n",
		    (unsigned)user->gid, (unsigned)user->gid);
		return 0;
	}
	if (run_as == NULL) {
		gp_warn("running as root without --run-as: jobs run as "
		    "user=nobody");
		run_as = "nobody";
	}
	if (getpwnam_r(run_as, &pw, buf, sizeof(buf), &pwp) != 0 ||
	    pwp == NULL) {
		snprintf(err, errlen, "--run-as: no user %s", run_as);
		return GP_ENOENT;
	}
	if (pwp->pw_uid == 0 || pwp->pw_gid == 0) {
		snprintf(err, errlen, "--run-as %s: refusing to run jobs as "
		    "root", run_as);
		return GP_EPERM;
	}
	user->uid = pwp->pw_uid;
	user->gid = pwp->pw_gid;
	gp_strlcpy(user->name, pwp->pw_name, sizeof(user->name));
	if (getgrouplist(pwp->pw_name, pwp->pw_gid, user->groups, &n) < 0)
		n = 0;
	user->ngroups = 0;
	for (int i = 0; i < n; i++)
		if (user->groups[i] != 0)	/* never the root group */
			user->groups[user->ngroups++] = user->groups[i];
	return 0;
}

/* Child side: everything below runs between clone and exec. */

static void
report(int fd, int kind, int stage, int value)
{
	struct gp_sandbox_record rec = {kind, stage, value};

	(void)!write(fd, &rec, sizeof(rec));
}

static __attribute__((noreturn)) void
fail(int fd, int stage)
{
	report(fd, GP_SANDBOX_SETUP_FAILED, stage, errno);
	_exit(127);
}

static int
write_file(const char *path, const char *text)
{
	int fd, ret = 0;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (write(fd, text, strlen(text)) < 0)
		ret = -1;
	close(fd);
	return ret;
}

/* Closes every descriptor above 2 except keep[0..n-1] (sorted here). */
static void
close_except(int *keep, int n)
{
	unsigned int from = 3;
	int i, j, t;

	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (keep[j] < keep[i]) {
				t = keep[i];
				keep[i] = keep[j];
				keep[j] = t;
			}
	for (i = 0; i < n; i++) {
		if (keep[i] < (int)from)
			continue;
		if ((unsigned int)keep[i] > from)
			close_range(from, (unsigned int)keep[i] - 1, 0);
		from = (unsigned int)keep[i] + 1;
	}
	close_range(from, ~0U, 0);
}

/*
 * Fallback for kernels without mount_setattr: remount every mount
 * read-only, one by one, from /proc/self/mountinfo.
 */
static int
remount_all_readonly(void)
{
	char buf[65536], path[4096];
	ssize_t n;
	int fd, ret = 0;
	size_t len = 0;

	if ((fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	for (char *line = buf; line != NULL && *line != '\0';) {
		char *next = strchr(line, '\n'), *p = line;
		size_t k = 0;
		int field;

		if (next != NULL)
			*next++ = '\0';
		for (field = 0; field < 4 && p != NULL; field++)
			if ((p = strchr(p, ' ')) != NULL)
				p++;
		/* p: the mount point, octal-escaped. */
		while (p != NULL && *p != '\0' && *p != ' ' &&
		    k < sizeof(path) - 1) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' &&
			    p[2] != '\0' && p[3] != '\0') {
				path[k++] = (char)((p[1] - '0') * 64 +
				    (p[2] - '0') * 8 + (p[3] - '0'));
				p += 4;
			} else
				path[k++] = *p++;
		}
		path[k] = '\0';
		if (k > 0 && mount(NULL, path, NULL,
		    MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0 &&
		    strcmp(path, "/") == 0)
			ret = -1;
		line = next;
	}
	return ret;
}

static void
setup(const struct gp_sandbox_spec *s)
{
	const struct gp_sandbox_user *u = s->user;
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
	int fd = s->status_fd, i;

	for (i = 0; i < s->ncgroup_fds; i++)
		if (write(s->cgroup_fds[i], "0", 1) != 1)
			fail(fd, STAGE_CGROUP);
	if (setsid() < 0)
		fail(fd, STAGE_SETSID);
	if (u->userns &&
	    (write_file("/proc/self/setgroups", "deny") != 0 ||
	    write_file("/proc/self/uid_map", u->uid_map) != 0 ||
	    write_file("/proc/self/gid_map", u->gid_map) != 0))
		fail(fd, STAGE_USERNS);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		fail(fd, STAGE_PRIVATE);
	if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &attr,
	    sizeof(attr)) != 0) {
		if (errno != ENOSYS || remount_all_readonly() != 0)
			fail(fd, STAGE_READONLY);
	}
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) != 0)
		fail(fd, STAGE_PROC);
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=1777") != 0)
		fail(fd, STAGE_TMP);
	if (access("/dev/shm", F_OK) == 0 &&
	    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=1777") != 0)
		fail(fd, STAGE_SHM);
	/* A bind inherits the read-only flag of /: remount it writable. */
	if (mount(s->workdir, s->workdir, NULL, MS_BIND, NULL) != 0 ||
	    mount(NULL, s->workdir, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID |
	    MS_NODEV, NULL) != 0)
		fail(fd, STAGE_WORKDIR);
	/*
	 * STAND-IN until the "containers" branch lands its mount code: the
	 * job's mounts (data sets), bound onto existing directories, then
	 * remounted read-only (a bind keeps its source's flags otherwise).
	 */
	for (i = 0; i < s->nmounts; i++) {
		unsigned long ro = s->mounts[i].read_only ? MS_RDONLY : 0;

		if (mount(s->mounts[i].source, s->mounts[i].target, NULL,
		    MS_BIND | MS_REC, NULL) != 0 ||
		    mount(NULL, s->mounts[i].target, NULL, MS_REMOUNT |
		    MS_BIND | MS_NOSUID | MS_NODEV | ro, NULL) != 0)
			fail(fd, STAGE_MOUNTS);
	}
	if (sethostname("gpupool-job", 11) != 0)
		fail(fd, STAGE_HOSTNAME);
	if (!u->userns) {
		/* Drop the capability bounding set, then become the user. */
		for (i = 0; i < 64; i++)
			if (prctl(PR_CAPBSET_DROP, i, 0, 0, 0) != 0 &&
			    errno == EINVAL)
				break;
		/*
		 * Raw system calls: glibc's wrappers would signal the
		 * agent's other threads (setxid) and take their locks.
		 */
		if (syscall(SYS_setgroups, (size_t)u->ngroups,
		    u->groups) != 0 ||
		    syscall(SYS_setresgid, u->gid, u->gid, u->gid) != 0 ||
		    syscall(SYS_setresuid, u->uid, u->uid, u->uid) != 0)
			fail(fd, STAGE_USER);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fail(fd, STAGE_NO_NEW_PRIVS);
	/* After the user change, which clears it: die with the agent. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (chdir(s->workdir) != 0)
		fail(fd, STAGE_CHDIR);
}

/*
 * init passes the signals a job may be asked to checkpoint with on to the
 * command (like `docker stop` signals a container's main process). A
 * signal that comes before the command exists is passed on when it does.
 * Only init's own copy of these variables is ever used.
 */
static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2,
    SIGALRM, SIGTERM};
static volatile sig_atomic_t command_pid, pending_signal;

static void
forward_signal(int sig)
{
	int saved = errno;

	if (command_pid > 0)
		syscall(SYS_kill, (pid_t)command_pid, sig);
	else
		pending_signal = sig;
	errno = saved;
}

static void
forward_signals(void)
{
	struct sigaction sa;
	sigset_t set;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&set);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		sigaddset(&sa.sa_mask, forwarded[i]);
		sigaddset(&set, forwarded[i]);
	}
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &sa, NULL);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

static __attribute__((noreturn)) void
run_command(const struct gp_sandbox_spec *s, int exec_fd, int null_fd)
{
	extern char **environ;
	sigset_t none;
	int err;

	sigemptyset(&none);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		signal(forwarded[i], SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (dup2(null_fd, 0) < 0 || dup2(s->out_fd, 1) < 0 ||
	    dup2(s->out_fd, 2) < 0)
		goto fail;
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	environ = (char **)s->envp;
	execvp(s->argv[0], s->argv);
fail:
	err = errno;
	(void)!write(exec_fd, &err, sizeof(err));
	_exit(127);
}

static __attribute__((noreturn)) void
init_main(const struct gp_sandbox_spec *s)
{
	int keep[2] = {s->out_fd, s->status_fd};
	int exec_pipe[2], null_fd, err, status;
	pid_t child, pid;
	ssize_t n;

	command_pid = 0;
	pending_signal = 0;
	forward_signals();
	setup(s);
	/* The cgroup descriptors were used by setup; drop the rest. */
	close_except(keep, 2);
	if ((null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
	    pipe2(exec_pipe, O_CLOEXEC) != 0)
		fail(s->status_fd, STAGE_FORK);
	/*
	 * Not fork(): glibc's fork takes locks (malloc, stdio) that another
	 * agent thread may have held when init was cloned. A raw clone
	 * copies nothing but the process.
	 */
	child = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	if (child < 0)
		fail(s->status_fd, STAGE_FORK);
	if (child == 0)
		run_command(s, exec_pipe[1], null_fd);
	command_pid = child;
	if (pending_signal != 0)
		syscall(SYS_kill, child, (int)pending_signal);
	close(exec_pipe[1]);
	close(null_fd);
	close(s->out_fd);
	do
		n = read(exec_pipe[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(exec_pipe[0]);
	if (n == (ssize_t)sizeof(err))
		report(s->status_fd, GP_SANDBOX_EXEC_FAILED, 0, err);
	else
		report(s->status_fd, GP_SANDBOX_EXEC_OK, 0, 0);
	/* Reap everything; end with the command, which ends the namespace. */
	for (;;) {
		pid = waitpid(-1, &status, 0);
		if (pid == child)
			break;
		if (pid < 0 && errno != EINTR)
			_exit(127);
	}
	if (n != (ssize_t)sizeof(err))
		report(s->status_fd, GP_SANDBOX_EXITED, 0, status);
	_exit(0);
}

int
gp_sandbox_spawn(const struct gp_sandbox_spec *spec, pid_t *pid, int *pidfd)
{
	struct clone3_args args;
	int fd = -1;
	long ret;

	memset(&args, 0, sizeof(args));
	args.flags = CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
	    CLONE_NEWUTS | (spec->user->userns ? CLONE_NEWUSER : 0);
	args.pidfd = (uint64_t)(uintptr_t)&fd;
	args.exit_signal = SIGCHLD;
	ret = syscall(SYS_clone3, &args, sizeof(args));
	if (ret < 0)
		return GP_EIO;
	if (ret == 0)
		init_main(spec);
	*pid = (pid_t)ret;
	*pidfd = fd;
	return 0;
}
