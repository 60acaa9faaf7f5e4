/*
 * oci_runtime.c: the OCI runtime (crun or runc) as the container executor
 * uses it: detection at start (a probe container must really run), the
 * image's root (the layers composed with overlayfs as a detached mount,
 * and mount points made in it without leaving it), the runtime's process
 * (cloned into a private mount and pid namespace where its bundle is a
 * tmpfs and, on a cgroup v1/v2 hybrid host, the v2 mount is hidden), and
 * deleting what a killed runtime left behind. See oci.h and
 * docs/agent.md.
 */
#include "agent/oci.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "agent/sandbox.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define RUNTIME_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:" \
		     "/usr/bin:/sbin:/bin"
#define LAYERS_MAX 128

enum stage {
	STAGE_PRIVATE = 1,
	STAGE_PROC,
	STAGE_HIDE,
	STAGE_BUNDLE,
	STAGE_ROOTFS,
	STAGE_FDS,
	STAGE_EXEC,
	STAGE_NETWORK,
};

static const char *stage_names[] = {
	[STAGE_PRIVATE] = "make mounts private",
	[STAGE_PROC] = "mount the runtime's /proc",
	[STAGE_HIDE] = "hide the cgroup v2 mount",
	[STAGE_BUNDLE] = "write the bundle",
	[STAGE_ROOTFS] = "mount the image's root",
	[STAGE_FDS] = "set up descriptors",
	[STAGE_EXEC] = "exec the OCI runtime",
	[STAGE_NETWORK] = "join the job's network namespace",
};

const char *
gp_oci_stage_name(int stage)
{
	if (stage <= 0 || (size_t)stage >= GP_ARRAY_LEN(stage_names) ||
	    stage_names[stage] == NULL)
		return "setup";
	return stage_names[stage];
}

/* ---- the image's root ---- */

static int
set_err(char *err, size_t errlen, const char *what, const char *arg)
{
	int e = errno;

	snprintf(err, errlen, "%s %.300s: %s", what, arg ? arg : "",
	    strerror(e));
	errno = e;
	return GP_EIO;
}

int
gp_oci_rootfs_compose(char *const *layers, int64_t scratch_bytes, int *root_fd,
    char *err, size_t errlen)
{
	char size[32], upper[64], work[64];
	int tfs = -1, tmnt = -1, ofs = -1, omnt, n = 0, i, ret = GP_EIO;

	while (layers != NULL && layers[n] != NULL)
		n++;
	if (n == 0 || n > LAYERS_MAX) {
		snprintf(err, errlen, "an image needs 1 to %d layers, not %d",
		    LAYERS_MAX, n);
		return GP_EINVAL;
	}
	/* The upper layer: a small tmpfs that only holds mount points. */
	snprintf(size, sizeof(size), "%lld", (long long)(scratch_bytes > 0 ?
	    scratch_bytes : 4 << 20));
	if ((tfs = fsopen("tmpfs", FSOPEN_CLOEXEC)) < 0 ||
	    fsconfig(tfs, FSCONFIG_SET_STRING, "size", size, 0) != 0 ||
	    fsconfig(tfs, FSCONFIG_SET_STRING, "mode", "0755", 0) != 0 ||
	    fsconfig(tfs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0 ||
	    (tmnt = fsmount(tfs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID |
	    MOUNT_ATTR_NODEV)) < 0 || mkdirat(tmnt, "upper", 0755) != 0 ||
	    mkdirat(tmnt, "work", 0700) != 0) {
		set_err(err, errlen, "scratch tmpfs", "");
		goto out;
	}
	snprintf(upper, sizeof(upper), "/proc/self/fd/%d/upper", tmnt);
	snprintf(work, sizeof(work), "/proc/self/fd/%d/work", tmnt);
	if ((ofs = fsopen("overlay", FSOPEN_CLOEXEC)) < 0) {
		set_err(err, errlen, "overlayfs", "");
		goto out;
	}
	/* lowerdir+ (Linux 6.8) takes the layers top first, one by one. */
	for (i = n - 1; i >= 0; i--)
		if (fsconfig(ofs, FSCONFIG_SET_STRING, "lowerdir+", layers[i],
		    0) != 0) {
			set_err(err, errlen, "overlayfs layer", layers[i]);
			goto out;
		}
	if (fsconfig(ofs, FSCONFIG_SET_STRING, "upperdir", upper, 0) != 0 ||
	    fsconfig(ofs, FSCONFIG_SET_STRING, "workdir", work, 0) != 0 ||
	    fsconfig(ofs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0 ||
	    (omnt = fsmount(ofs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID |
	    MOUNT_ATTR_NODEV)) < 0) {
		set_err(err, errlen, "overlayfs", "");
		goto out;
	}
	*root_fd = omnt;
	ret = 0;
out:
	if (tfs >= 0)
		close(tfs);
	if (tmnt >= 0)
		close(tmnt);
	if (ofs >= 0)
		close(ofs);
	return ret;
}

int
gp_oci_rootfs_open(int root, const char *path, int flags)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
	    RESOLVE_NO_XDEV;
	while (*path == '/')
		path++;
	return (int)syscall(SYS_openat2, root, path[0] == '\0' ? "." : path,
	    &how, sizeof(how));
}

int
gp_oci_rootfs_mkpath(int root, const char *path, int is_file, char *err,
    size_t errlen)
{
	char buf[PATH_MAX], *slash;
	int fd, dir;
	size_t len;

	while (*path == '/')
		path++;
	if (gp_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf)) {
		snprintf(err, errlen, "path too long");
		return GP_EINVAL;
	}
	len = strlen(buf);
	if (len == 0)
		return 0;
	if ((fd = gp_oci_rootfs_open(root, buf, O_PATH)) >= 0) {
		close(fd);
		return 0;
	}
	if (errno != ENOENT)
		return set_err(err, errlen, "mount point", path);
	/* Create each missing component below the deepest existing one. */
	for (slash = buf; ; ) {
		char *next = strchr(slash, '/');
		int last = next == NULL;

		if (next != NULL)
			*next = '\0';
		if ((fd = gp_oci_rootfs_open(root, buf, O_PATH)) < 0) {
			char *name = strrchr(buf, '/');

			if (errno != ENOENT)
				return set_err(err, errlen, "mount point",
				    path);
			if (name != NULL) {
				*name = '\0';
				dir = gp_oci_rootfs_open(root, buf,
				    O_PATH | O_DIRECTORY);
				*name++ = '/';
			} else {
				dir = gp_oci_rootfs_open(root, "", O_PATH |
				    O_DIRECTORY);
				name = buf;
			}
			if (dir < 0)
				return set_err(err, errlen, "mount point",
				    path);
			if (last && is_file) {
				fd = openat(dir, name, O_WRONLY | O_CREAT |
				    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
				if (fd >= 0)
					close(fd);
			} else
				fd = mkdirat(dir, name, 0755);
			close(dir);
			if (fd < 0 && errno != EEXIST)
				return set_err(err, errlen, "mount point",
				    path);
		} else
			close(fd);
		if (last)
			break;
		*next = '/';
		slash = next + 1;
	}
	return 0;
}

/* ---- the runtime's process ---- */

/* Paths the child needs, made before clone (it allocates nothing). */
struct prepared {
	const struct gp_oci_spawn *s;
	char config[PATH_MAX + 16];
	char rootfs[PATH_MAX + 16];
};

static __attribute__((noreturn)) void
child_fail(const struct gp_oci_spawn *s, int stage)
{
	struct gp_sandbox_record rec = {GP_SANDBOX_SETUP_FAILED, stage, errno};

	if (s->status_fd >= 0)
		(void)!write(s->status_fd, &rec, sizeof(rec));
	_exit(127);
}

static int
write_bundle(const struct prepared *p)
{
	const struct gp_oci_spawn *s = p->s;
	size_t done = 0;
	ssize_t n;
	int fd;

	if (mount("tmpfs", s->bundle, "tmpfs", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, "mode=0711,size=4m") != 0 ||
	    mkdir(p->rootfs, 0755) != 0 ||
	    (fd = open(p->config, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) < 0)
		return -1;
	while (done < s->config_len) {
		n = write(fd, s->config + done, s->config_len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	return close(fd);
}

/*
 * What stands for a descriptor the caller left out (-1). A runtime that
 * starts a container gives its standard streams to the container's user
 * (crun fchowns them), so it must never hold a host object there: the
 * host's /dev/null would become the job's to chmod (issue 15). Standard
 * input is the read end of a pipe whose write end is closed (reads end of
 * file at once); a container's other streams must be given (EBADF). Only
 * a runtime that starts no container (delete: no bundle) gets /dev/null,
 * opened once into *null_fd. Returns the descriptor or -1.
 */
static int
absent_stream(const struct gp_oci_spawn *s, int index, int *null_fd)
{
	int p[2];

	if (s->bundle == NULL) {
		if (*null_fd < 0)
			*null_fd = open("/dev/null", O_RDWR);
		return *null_fd;
	}
	if (index != 0) {
		errno = EBADF;
		return -1;
	}
	if (pipe(p) != 0)
		return -1;
	close(p[1]);
	return p[0];
}

static __attribute__((noreturn)) void
child_main(const struct prepared *p)
{
	const struct gp_oci_spawn *s = p->s;
	int high[5], i, null_fd = -1;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* The runtime, and so the container, in the job's network. */
	if (s->net_fd != NULL && setns(*s->net_fd, CLONE_NEWNET) != 0)
		child_fail(s, STAGE_NETWORK);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		child_fail(s, STAGE_PRIVATE);
	/* Our pid namespace's /proc, so that the runtime's pids mean it. */
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) != 0)
		child_fail(s, STAGE_PROC);
	if (s->rt->hide_unified &&
	    umount2("/sys/fs/cgroup/unified", MNT_DETACH) != 0 &&
	    errno != EINVAL && errno != ENOENT)
		child_fail(s, STAGE_HIDE);
	if (s->bundle != NULL && write_bundle(p) != 0)
		child_fail(s, STAGE_BUNDLE);
	if (s->bundle != NULL && s->rootfs_fd >= 0 && move_mount(s->rootfs_fd,
	    "", AT_FDCWD, p->rootfs, MOVE_MOUNT_F_EMPTY_PATH) != 0)
		child_fail(s, STAGE_ROOTFS);
	/* Move every descriptor out of 0..4 first, then into place. */
	for (i = 0; i < 5; i++) {
		int fd = s->fds[i];

		if (fd < 0 && (fd = absent_stream(s, i, &null_fd)) < 0)
			child_fail(s, STAGE_FDS);
		if ((high[i] = fcntl(fd, F_DUPFD, 16)) < 0)
			child_fail(s, STAGE_FDS);
	}
	for (i = 0; i < 5; i++)
		if (dup2(high[i], i) != i)
			child_fail(s, STAGE_FDS);
	close_range(5, ~0U, 0);
	execve(s->rt->path, s->argv, s->envp);
	{
		struct gp_sandbox_record rec = {GP_SANDBOX_SETUP_FAILED,
		    STAGE_EXEC, errno};
		if (s->status_fd >= 0 && s->fds[3] == s->status_fd)
			(void)!write(3, &rec, sizeof(rec));
	}
	_exit(127);
}

/* glibc's clone() entry: the child's side (never returns). */
static int
child_entry(void *arg)
{
	child_main(arg);
}

/* The child's stack: it runs a few system calls, then execs. */
#define CHILD_STACK_LEN ((size_t)256 << 10)

int
gp_oci_spawn(const struct gp_oci_spawn *s, pid_t *pid, int *pidfd)
{
	struct prepared p;
	char *stack;
	int fd = -1, ret, saved;

	memset(&p, 0, sizeof(p));
	p.s = s;
	if (s->bundle != NULL) {
		snprintf(p.config, sizeof(p.config), "%s/config.json",
		    s->bundle);
		snprintf(p.rootfs, sizeof(p.rootfs), "%s/rootfs", s->bundle);
	}
	stack = mmap(NULL, CHILD_STACK_LEN, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return GP_EIO;
	/*
	 * As posix_spawn does: the child shares the agent's memory until it
	 * execs (CLONE_VM), and this thread waits until then (CLONE_VFORK),
	 * so nothing of the agent's address space is copied, however big it
	 * is (docs/agent.md). The child only makes system calls, on its own
	 * stack; p and s stay valid meanwhile.
	 */
	ret = clone(child_entry, stack + CHILD_STACK_LEN, CLONE_VM |
	    CLONE_VFORK | CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID | SIGCHLD,
	    &p, &fd);
	saved = errno;
	munmap(stack, CHILD_STACK_LEN);
	if (ret < 0) {
		errno = saved;
		return GP_EIO;
	}
	*pid = (pid_t)ret;
	*pidfd = fd;
	return 0;
}

/*
 * Waits for the process behind pidfd at most timeout_ms (-1: forever),
 * then kills it. OUT: *status (wait status). Closes pidfd. Returns 0 or
 * GP_ETIMEDOUT.
 */
static int
wait_pidfd(int pidfd, int timeout_ms, int *status)
{
	struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
	siginfo_t si;
	int ret = 0, n;
	int64_t end = gp_mono_ms() + timeout_ms;

	for (;;) {
		int left = timeout_ms < 0 ? -1 : (int)(end - gp_mono_ms());
		if (timeout_ms >= 0 && left < 0)
			left = 0;
		n = poll(&pfd, 1, left);
		if (n > 0)
			break;
		if (n == 0) {
			syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
			ret = GP_ETIMEDOUT;
			break;
		}
		if (errno != EINTR)
			break;
	}
	memset(&si, 0, sizeof(si));
	while (syscall(SYS_waitid, P_PIDFD, pidfd, &si, WEXITED, NULL) != 0 &&
	    errno == EINTR)
		;
	close(pidfd);
	if (si.si_code == CLD_EXITED)
		*status = (si.si_status & 0xff) << 8;
	else
		*status = si.si_status & 0x7f;
	return ret;
}

/* ---- delete ---- */

int
gp_oci_runtime_delete(const struct gp_oci_runtime *rt, const char *id,
    int timeout_ms)
{
	char state[PATH_MAX + 300];
	struct gp_oci_spawn s;
	char *argv[] = {(char *)rt->name, "--root", (char *)rt->state_root,
	    "delete", "--force", (char *)id, NULL};
	char *envp[] = {RUNTIME_PATH, NULL};
	struct stat st;
	pid_t pid;
	int pidfd, status = 0, ret;

	snprintf(state, sizeof(state), "%s/%s", rt->state_root, id);
	if (lstat(state, &st) != 0)
		return 0;	/* the runtime cleaned up after itself */
	memset(&s, 0, sizeof(s));
	s.rt = rt;
	s.argv = argv;
	s.envp = envp;
	s.rootfs_fd = -1;
	s.fds[0] = s.fds[1] = s.fds[2] = s.fds[3] = s.fds[4] = -1;
	s.status_fd = -1;
	if (gp_oci_spawn(&s, &pid, &pidfd) != 0)
		return GP_EIO;
	ret = wait_pidfd(pidfd, timeout_ms, &status);
	if (ret == 0 && status != 0)
		ret = GP_EIO;
	return ret;
}

void
gp_oci_runtime_sweep(const struct gp_oci_runtime *rt)
{
	DIR *d = opendir(rt->state_root);
	struct dirent *de;
	int n = 0;

	while (d != NULL && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (gp_oci_runtime_delete(rt, de->d_name, 10000) != 0)
			gp_warn("cannot delete a container left by an earlier "
			    "agent id=%s", de->d_name);
		n++;
	}
	if (d != NULL)
		closedir(d);
	if (n > 0)
		gp_info("deleted containers left by an earlier agent count=%d",
		    n);
}

/* ---- user namespace range ---- */

int
gp_oci_userns_check(uint32_t host, uint32_t size, char *err, size_t errlen)
{
	uint64_t end = (uint64_t)host + size;	/* one past the last */
	struct passwd *pw;
	struct group *gr;
	int ret = 0;

	if (host == 0) {
		snprintf(err, errlen, "the user namespace range must not "
		    "include uid 0");
		return GP_EINVAL;
	}
	if (size < 65536 || end > 4294967295ULL) {
		snprintf(err, errlen, "the user namespace range %u+%u must "
		    "hold at least 65536 ids and end below 4294967295", host,
		    size);
		return GP_EINVAL;
	}
	setpwent();
	while ((pw = getpwent()) != NULL)
		if (pw->pw_uid >= host && pw->pw_uid < end) {
			snprintf(err, errlen, "the user namespace range "
			    "%u..%llu includes user %s (uid %u)", host,
			    (unsigned long long)end - 1, pw->pw_name,
			    (unsigned)pw->pw_uid);
			ret = GP_EINVAL;
			break;
		}
	endpwent();
	if (ret != 0)
		return ret;
	setgrent();
	while ((gr = getgrent()) != NULL)
		if (gr->gr_gid >= host && gr->gr_gid < end) {
			snprintf(err, errlen, "the user namespace range "
			    "%u..%llu includes group %s (gid %u)", host,
			    (unsigned long long)end - 1, gr->gr_name,
			    (unsigned)gr->gr_gid);
			ret = GP_EINVAL;
			break;
		}
	endgrent();
	return ret;
}

/* ---- detection ---- */

/* Finds name in PATH and the sbin directories. OUT: path. 0 or -1. */
static int
find_binary(const char *name, char *out, size_t len)
{
	static const char *extra = "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
	    "/usr/bin:/sbin:/bin";
	const char *env = getenv("PATH");
	char dirs[8192], *save = NULL, *dir;

	if (strchr(name, '/') != NULL) {
		if (access(name, X_OK) != 0)
			return -1;
		gp_strlcpy(out, name, len);
		return 0;
	}
	snprintf(dirs, sizeof(dirs), "%s:%s", env != NULL ? env : "", extra);
	for (dir = strtok_r(dirs, ":", &save); dir != NULL;
	    dir = strtok_r(NULL, ":", &save)) {
		if (dir[0] != '/')
			continue;
		snprintf(out, len, "%s/%s", dir, name);
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* First line of `path --version`, into out. */
static void
runtime_version(const char *path, char *out, size_t len)
{
	char cmd[PATH_MAX + 32];
	FILE *f;

	gp_strlcpy(out, "unknown", len);
	snprintf(cmd, sizeof(cmd), "'%s' --version 2>/dev/null", path);
	if (strchr(path, '\'') != NULL || (f = popen(cmd, "r")) == NULL)
		return;
	if (fgets(out, (int)len, f) != NULL)
		out[strcspn(out, "\n")] = '\0';
	else
		gp_strlcpy(out, "unknown", len);
	pclose(f);
}

static int
is_hybrid(void)
{
	struct statfs a, b;

	return statfs("/sys/fs/cgroup", &a) == 0 &&
	    a.f_type == TMPFS_MAGIC &&
	    statfs("/sys/fs/cgroup/unified", &b) == 0 &&
	    b.f_type == CGROUP2_SUPER_MAGIC;
}

static int
has_swap(void)
{
	char *data = NULL;
	size_t len;
	int lines = 0;

	if (gp_read_file("/proc/swaps", 1 << 16, &data, &len) != 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (data[i] == '\n')
			lines++;
	free(data);
	return lines > 1;
}

void
gp_oci_log_last_line(int fd, char *out, size_t len)
{
	char buf[8192], *p, *start;
	struct stat st;
	ssize_t n;
	off_t from;

	out[0] = '\0';
	if (fd < 0 || fstat(fd, &st) != 0)
		return;
	from = st.st_size > (off_t)sizeof(buf) - 1 ?
	    st.st_size - (off_t)sizeof(buf) + 1 : 0;
	if ((n = pread(fd, buf, sizeof(buf) - 1, from)) <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	p = strrchr(buf, '\n');
	start = p != NULL ? p + 1 : buf;
	gp_strlcpy(out, start, len);
}

/*
 * Runs the probe container with rt: an empty layer, gpupool-init running
 * gpupool-init without arguments (which prints its usage and exits 127).
 * Returns 0 when init reported exec OK and the exit status 127; else
 * GP_EIO with why.
 */
static int
probe(struct gp_oci_runtime *rt, const char *base, const char *cgroups_path,
    char *why, size_t whylen)
{
	char dir[PATH_MAX], layer[PATH_MAX + 16], rootfs[PATH_MAX + 32];
	char work[PATH_MAX + 16], bundle[PATH_MAX + 16], id[64], line[512];
	char *layers[] = {layer, NULL};
	char *args[] = {GP_OCI_INIT_PATH, "--", GP_OCI_INIT_PATH, NULL};
	char *env[] = {RUNTIME_PATH, NULL};
	char *argv[] = {rt->name, "--root", rt->state_root, "run", "--bundle",
	    bundle, "--preserve-fds", "2", id, NULL};
	char *envp[] = {RUNTIME_PATH, NULL};
	struct gp_sandbox_record rec;
	struct gp_oci_config c;
	struct gp_oci_spawn s;
	int status_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, logfd = -1;
	int root_fd = -1;
	int pidfd, status = 0, ret = GP_EIO, exec_ok = 0, exited = -1;
	json_t *cfg = NULL;
	char *text = NULL;
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/probe-%d", base, (int)getpid());
	snprintf(id, sizeof(id), "gpupool-probe-%d", (int)getpid());
	snprintf(layer, sizeof(layer), "%s/layer", dir);
	snprintf(work, sizeof(work), "%s/work", dir);
	snprintf(bundle, sizeof(bundle), "%s/bundle", base);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", bundle);
	gp_remove_tree(dir);
	if (gp_mkdir_p(layer, 0711) != 0 || mkdir(work, 0755) != 0) {
		snprintf(why, whylen, "mkdir %.400s: %s", dir,
		    strerror(errno));
		goto out;
	}
	memset(&c, 0, sizeof(c));
	c.args = args;
	c.env = env;
	c.cwd = "/";
	c.uid = c.gid = 1000;
	c.rootfs = rootfs;
	c.userns_host = rt->userns_host;
	c.userns_size = rt->userns_size;
	c.cgroups_path = cgroups_path;
	c.mem_bytes = 64 << 20;
	c.mem_swap = rt->mem_swap;
	c.pids_max = 64;
	c.cpu_quota_us = 100000;
	c.cpu_period_us = 100000;
	c.scratch_bytes = 1 << 20;
	c.workdir = work;
	c.init_host_path = rt->init_path;
	if (gp_oci_config_build(&c, &cfg, why, whylen) != 0)
		goto out;
	if ((text = json_dumps(cfg, JSON_COMPACT)) == NULL) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	if (pipe2(status_pipe, O_CLOEXEC) != 0 ||
	    pipe2(out_pipe, O_CLOEXEC) != 0 ||
	    (logfd = memfd_create("gpupool-runtime-log", MFD_CLOEXEC)) < 0) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		goto out;
	}
	if (gp_oci_rootfs_compose(layers, 1 << 20, &root_fd, why, whylen) != 0)
		goto out;
	{
		static const char *points[] = {"/proc", "/dev", "/sys", "/tmp"};
		for (size_t i = 0; i < GP_ARRAY_LEN(points); i++)
			if (gp_oci_rootfs_mkpath(root_fd, points[i], 0, why,
			    whylen) != 0)
				goto out;
		if (gp_oci_rootfs_mkpath(root_fd, work, 0, why, whylen) != 0)
			goto out;
	}
	memset(&s, 0, sizeof(s));
	s.rt = rt;
	s.argv = argv;
	s.envp = envp;
	s.bundle = bundle;
	s.config = text;
	s.config_len = strlen(text);
	s.rootfs_fd = root_fd;
	s.fds[0] = -1;
	s.fds[1] = s.fds[2] = logfd;
	s.fds[3] = s.status_fd = status_pipe[1];
	s.fds[4] = out_pipe[1];
	if (gp_oci_spawn(&s, &pid, &pidfd) != 0) {
		snprintf(why, whylen, "clone: %s", strerror(errno));
		goto out;
	}
	close(status_pipe[1]);
	close(out_pipe[1]);
	close(root_fd);
	status_pipe[1] = out_pipe[1] = root_fd = -1;
	wait_pidfd(pidfd, 20000, &status);
	while (read(status_pipe[0], &rec, sizeof(rec)) == (ssize_t)sizeof(rec)) {
		if (rec.kind == GP_SANDBOX_SETUP_FAILED) {
			snprintf(why, whylen, "%s: %s",
			    gp_oci_stage_name(rec.stage), strerror(rec.value));
			goto cleanup;
		}
		if (rec.kind == GP_SANDBOX_EXEC_OK)
			exec_ok = 1;
		if (rec.kind == GP_SANDBOX_EXITED)
			exited = rec.value;
	}
	if (exec_ok && WIFEXITED(exited) && WEXITSTATUS(exited) == 127)
		ret = 0;
	else {
		gp_oci_log_last_line(logfd, line, sizeof(line));
		snprintf(why, whylen, "the probe container failed (runtime "
		    "exit status %d): %s", WIFEXITED(status) ?
		    WEXITSTATUS(status) : 128 + WTERMSIG(status),
		    line[0] ? line : "no message");
	}
cleanup:
	gp_oci_runtime_delete(rt, id, 10000);
out:
	for (int i = 0; i < 2; i++) {
		if (status_pipe[i] >= 0)
			close(status_pipe[i]);
		if (out_pipe[i] >= 0)
			close(out_pipe[i]);
	}
	if (logfd >= 0)
		close(logfd);
	if (root_fd >= 0)
		close(root_fd);
	json_decref(cfg);
	free(text);
	gp_remove_tree(dir);
	return ret;
}

static int
default_init(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return -1;
	self[n] = '\0';
	snprintf(out, len, "%s/gpupool-init", dirname(self));
	return 0;
}

static int
try_runtime(struct gp_oci_runtime *rt, const char *name, const char *base,
    const char *cgroups_path, char *why, size_t whylen)
{
	const char *file;

	if (find_binary(name, rt->path, sizeof(rt->path)) != 0) {
		snprintf(why, whylen, "%s: not found", name);
		return GP_ENOENT;
	}
	file = strrchr(rt->path, '/') ? strrchr(rt->path, '/') + 1 : rt->path;
	gp_strlcpy(rt->name, file, sizeof(rt->name));
	rt->kind = strcmp(file, "crun") == 0 ? GP_OCI_CRUN :
	    strcmp(file, "runc") == 0 ? GP_OCI_RUNC : GP_OCI_OTHER;
	runtime_version(rt->path, rt->version, sizeof(rt->version));
	return probe(rt, base, cgroups_path, why, whylen);
}

int
gp_oci_runtime_detect(const char *want, const char *base,
    const char *init_path, uint32_t userns_host, uint32_t userns_size,
    struct gp_oci_runtime *rt, char *err, size_t errlen)
{
	const char *names[2] = {want, NULL};
	char cgpath[128], why[2][700], bundle[PATH_MAX + 16];
	struct stat st;
	int i, n = 1;

	memset(rt, 0, sizeof(*rt));
	memset(why, 0, sizeof(why));
	if (geteuid() != 0) {
		snprintf(err, errlen, "container jobs need an agent running "
		    "as root (it maps each container to an unprivileged uid "
		    "range)");
		return GP_EPERM;
	}
	if (strcmp(want, "auto") == 0) {
		names[0] = "crun";
		names[1] = "runc";
		n = 2;
	}
	snprintf(rt->state_root, sizeof(rt->state_root), "%s/state", base);
	if (init_path != NULL)
		gp_strlcpy(rt->init_path, init_path, sizeof(rt->init_path));
	else if (default_init(rt->init_path, sizeof(rt->init_path)) != 0) {
		snprintf(err, errlen, "cannot find gpupool-init");
		return GP_ENOENT;
	}
	if (stat(rt->init_path, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: %s (gpupool-init is built next to "
		    "gpupool; or give --container-init)", rt->init_path,
		    errno ? strerror(errno) : "not a file");
		return GP_ENOENT;
	}
	/*
	 * The container's root (an unprivileged host uid) must be able to
	 * pass through base to its bundle's rootfs.
	 */
	snprintf(bundle, sizeof(bundle), "%.4000s/bundle", base);
	if (gp_mkdir_p(base, 0711) != 0 || chmod(base, 0711) != 0 ||
	    gp_mkdir_p(rt->state_root, 0700) != 0 ||
	    (mkdir(bundle, 0711) != 0 && errno != EEXIST)) {
		snprintf(err, errlen, "mkdir %s: %s", rt->state_root,
		    strerror(errno));
		return GP_EIO;
	}
	rt->hide_unified = is_hybrid();
	rt->userns_host = userns_host;
	rt->userns_size = userns_size;
	rt->mem_swap = has_swap() &&
	    (access("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes",
	    F_OK) == 0 || access("/sys/fs/cgroup/cgroup.controllers",
	    F_OK) == 0);
	snprintf(cgpath, sizeof(cgpath), "/gpupool-probe-%d", (int)getpid());
	for (i = 0; i < n; i++) {
		struct gp_oci_runtime cand = *rt;

		if (try_runtime(&cand, names[i], base, cgpath, why[i],
		    sizeof(why[i])) == 0) {
			*rt = cand;
			gp_oci_runtime_sweep(rt);
			return 0;
		}
		gp_info("container runtime not usable runtime=%s why=\"%s\"",
		    names[i], why[i]);
	}
	snprintf(err, errlen, "no OCI runtime works here: %s%s%s", why[0],
	    n > 1 ? "; " : "", n > 1 ? why[1] : "");
	return GP_ENOENT;
}
