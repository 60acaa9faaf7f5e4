/*
 * sandbox.c: the job sandbox, natively: clone3 into new namespaces, then,
 * in the child ("init", pid 1 of the job's pid namespace), private mounts,
 * a read-only root, fresh /proc, private /tmp and /dev/shm, the work
 * directory bound writable, a fixed hostname, no privileges, and a fork
 * of the job's command. The child never allocates memory: the agent is
 * multi-threaded and another thread may hold the allocator's lock. A warm
 * sandbox is such an init cloned before its job is known: it joins its
 * cgroup, then waits for the job's spec in a shared mapping.
 */
#include "agent/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/executor.h"
#include "agent/netns.h"
#include "agent/oci.h"
#include "agent/spawner.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

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
	STAGE_CLONE,
	STAGE_SHADOW,
	STAGE_MOUNT_POINT,
	STAGE_READONLY,
	STAGE_PROC,
	STAGE_TMP,
	STAGE_SHM,
	STAGE_WORKDIR,
	STAGE_HIDE,
	STAGE_MOUNT,
	STAGE_HOSTNAME,
	STAGE_USER,
	STAGE_NO_NEW_PRIVS,
	STAGE_CHDIR,
	STAGE_FORK,
	STAGE_ROOT,
	STAGE_EXPOSE_RW,
	STAGE_NETWORK,
	STAGE_ROOT_DEV,
	STAGE_ROOT_SWITCH,
};

static const char *stage_names[] = {
	[STAGE_CGROUP] = "join cgroup",
	[STAGE_SETSID] = "setsid",
	[STAGE_USERNS] = "map user namespace",
	[STAGE_PRIVATE] = "make mounts private",
	[STAGE_CLONE] = "take the work directory and mount sources",
	[STAGE_SHADOW] = "make room for a mount point (tmpfs of binds)",
	[STAGE_MOUNT_POINT] = "make a mount point",
	[STAGE_READONLY] = "make / read-only",
	[STAGE_PROC] = "mount /proc",
	[STAGE_TMP] = "mount /tmp",
	[STAGE_SHM] = "mount /dev/shm",
	[STAGE_WORKDIR] = "bind work directory",
	[STAGE_HIDE] = "hide a path (home directories, the agent's files)",
	[STAGE_MOUNT] = "bind a mount",
	[STAGE_HOSTNAME] = "sethostname",
	[STAGE_USER] = "switch user",
	[STAGE_NO_NEW_PRIVS] = "no_new_privs",
	[STAGE_CHDIR] = "chdir work directory",
	[STAGE_FORK] = "fork",
	[STAGE_ROOT] = "build the minimal root",
	[STAGE_EXPOSE_RW] = "make an exposed path writable",
	[STAGE_NETWORK] = "join the job's network namespace",
	[STAGE_ROOT_DEV] = "give the root template a /dev of the job's",
	[STAGE_ROOT_SWITCH] = "switch to the root template",
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
 * read-only and nosuid, one by one, from /proc/self/mountinfo.
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
		    MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) != 0 &&
		    strcmp(path, "/") == 0)
			ret = -1;
		line = next;
	}
	return ret;
}

/* The cloned trees setup takes before anything hides their paths. */
struct trees {
	int workdir;
	int mounts[GP_SANDBOX_MOUNTS_MAX];
};

/* dst = a + "/" + b (a may be "/"); 0, or -1 when it does not fit. */
static int
join(char *dst, size_t len, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la == 1 && a[0] == '/')
		la = 0;
	if (la + 1 + lb + 1 > len)
		return -1;
	memcpy(dst, a, la);
	dst[la] = '/';
	memcpy(dst + la + 1, b, lb + 1);
	return 0;
}

/* mkdir -p, without following anything but directories it makes. */
static int
mkdir_p(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -1;
		buf[i] = i < n ? '/' : '\0';
	}
	return 0;
}

static int
make_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		return errno == EEXIST ? 0 : -1;
	close(fd);
	return 0;
}

/*
 * Fills the directory dst (a fresh tmpfs) with an entry for each entry of
 * tree (a detached clone of the original directory): directories and
 * files are bound from the clone (recursively, with their submounts),
 * symbolic links copied; "proc" and "tmp" of the root stay empty (their
 * own mounts come later).
 */
static int
populate(const char *dst, int tree, int is_root)
{
	char buf[16384], path[4096], link[4096];
	struct stat st;
	long n;
	int dir;

	if ((dir = openat(tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64 {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *de = (void *)(buf + off);
			const char *name = de->name;
			int sub;

			off += de->reclen;
			if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
				continue;
			if (join(path, sizeof(path), dst, name) != 0 ||
			    fstatat(tree, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				goto fail;
			if (S_ISLNK(st.st_mode)) {
				ssize_t k = readlinkat(tree, name, link,
				    sizeof(link) - 1);
				if (k < 0)
					goto fail;
				link[k] = '\0';
				if (symlink(link, path) != 0)
					goto fail;
				continue;
			}
			if (S_ISDIR(st.st_mode)) {
				if (mkdir(path, st.st_mode & 07777) != 0)
					goto fail;
				if (is_root && (strcmp(name, "proc") == 0 ||
				    strcmp(name, "tmp") == 0))
					continue;
			} else if (make_file(path) != 0)
				goto fail;
			sub = (int)syscall(SYS_open_tree, tree, name,
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
			if (sub < 0)
				goto fail;
			if (move_mount(sub, "", AT_FDCWD, path,
			    MOVE_MOUNT_F_EMPTY_PATH) != 0) {
				close(sub);
				goto fail;
			}
			close(sub);
		}
	}
	close(dir);
	return n == 0 ? 0 : -1;
fail:
	close(dir);
	return -1;
}

/*
 * Re-creates dir as a tmpfs holding binds of everything it had, so that
 * a mount point can be made in it without touching the host. The root
 * is rebuilt on a staging tmpfs (over the host's /tmp, covered later by
 * the job's own) and switched to, as switch_root does.
 */
static int
shadow(const char *dir)
{
	int is_root = strcmp(dir, "/") == 0, tree, ret = -1;
	const char *at = is_root ? "/tmp" : dir;

	tree = (int)syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE |
	    OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree < 0)
		return -1;
	if (mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=0755,size=1m") != 0 || populate(at, tree, is_root) != 0)
		goto out;
	if (is_root && (chdir("/tmp") != 0 ||
	    mount("/tmp", "/", NULL, MS_MOVE, NULL) != 0 || chroot(".") != 0 ||
	    chdir("/") != 0))
		goto out;
	ret = 0;
out:
	close(tree);
	return ret;
}

/* ---- the minimal root: only what the job needs of the host ---- */

/* Where the root is built: a tmpfs over the host's /tmp, as shadow's. */
#define ROOT_STAGING "/tmp"

/*
 * Puts the host's path (absolute) at target (absolute, the same place
 * for root_put) under staging: a symbolic link as a copy of the link, a
 * directory or any other file as a bind of it with its submounts; the
 * directories above it are made. A path the host lacks is left out.
 * 0 or -1.
 */
static int
root_put_as(const char *staging, const char *path, const char *target)
{
	char dst[4096], link[4096];
	struct stat st;
	char *slash;
	ssize_t k;
	int tree, ret;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	if (join(dst, sizeof(dst), staging, target + 1) != 0)
		return -1;
	slash = strrchr(dst, '/');
	*slash = '\0';
	ret = mkdir_p(dst);
	*slash = '/';
	if (ret != 0)
		return -1;
	if (S_ISLNK(st.st_mode)) {
		if ((k = readlink(path, link, sizeof(link) - 1)) < 0)
			return -1;
		link[k] = '\0';
		return symlink(link, dst) == 0 || errno == EEXIST ? 0 : -1;
	}
	if (S_ISDIR(st.st_mode) ? mkdir(dst, 0755) != 0 && errno != EEXIST :
	    make_file(dst) != 0)
		return -1;
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE |
	    OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
	if (tree < 0)
		return -1;
	ret = move_mount(tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
	close(tree);
	return ret;
}

static int
root_put(const char *staging, const char *path)
{
	return root_put_as(staging, path, path);
}

/* 1 when the host's path is in /dev (its own in each job's root). */
static int
in_dev(const char *path)
{
	return strncmp(path, "/dev/", 5) == 0;
}

/*
 * The staging root's /dev, made a directory already: shm (for its own
 * mount later), the links fd, stdin, stdout and stderr, and the /dev
 * entries of root_binds. 0 or -1.
 */
static int
root_dev_fill(const char *staging, const struct gp_sandbox_spec *s)
{
	static const char *const links[][2] = {{"fd", "/proc/self/fd"},
	    {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
	    {"stderr", "/proc/self/fd/2"}};
	char dev[4096], path[4096];
	size_t i;

	if (join(dev, sizeof(dev), staging, "dev") != 0 ||
	    join(path, sizeof(path), dev, "shm") != 0 ||
	    mkdir(path, 0755) != 0)
		return -1;
	for (i = 0; i < GP_ARRAY_LEN(links); i++)
		if (join(path, sizeof(path), dev, links[i][0]) != 0 ||
		    symlink(links[i][1], path) != 0)
			return -1;
	for (char *const *p = s->root_binds; *p != NULL; p++)
		if (in_dev(*p) && root_put(staging, *p) != 0)
			return -1;
	return 0;
}

/* Switches to the root built at staging (a mount), as switch_root does. */
static int
root_switch(const char *staging)
{
	if (chdir(staging) != 0 || mount(staging, "/", NULL, MS_MOVE,
	    NULL) != 0 || chroot(".") != 0 || chdir("/") != 0)
		return -1;
	return 0;
}

/*
 * Fills dir, a fresh tmpfs, with what a job's root holds of the host but
 * /dev's entries: empty proc, tmp and dev, the root_binds not under /dev,
 * the owner's exposures, and the path of the agent's work directory for
 * hide() to cover. Nothing else of the host's tree. 0 or -1.
 */
static int
root_fill(const char *dir, char *const *root_binds, char *const *expose_ro,
    char *const *expose_rw, const char *agent_work, const char *resolv_conf)
{
	static const char *const dirs[] = {"proc", "tmp", "dev"};
	char *const *lists[] = {root_binds, expose_ro, expose_rw};
	char path[4096];
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(dirs); i++)
		if (join(path, sizeof(path), dir, dirs[i]) != 0 ||
		    mkdir(path, 0755) != 0)
			return -1;
	for (i = 0; i < GP_ARRAY_LEN(lists); i++)
		for (char *const *p = lists[i]; p != NULL && *p != NULL; p++)
			if (!in_dev(*p) && (resolv_conf != NULL && i == 0 &&
			    strcmp(*p, "/etc/resolv.conf") == 0 ?
			    root_put_as(dir, resolv_conf, *p) :
			    root_put(dir, *p)) != 0)
				return -1;
	if (join(path, sizeof(path), dir, agent_work + 1) != 0 ||
	    mkdir_p(path) != 0)
		return -1;
	return 0;
}

/*
 * Builds the job's root on a fresh tmpfs and switches to it (as
 * switch_root does): the root_binds (system directories, a few files of
 * /etc, device nodes), the owner's exposures, /dev's links, empty /proc,
 * /tmp and /dev/shm for their own mounts, and the path of the agent's
 * work directory for hide() to cover. Nothing else of the host's tree.
 */
static int
build_root(const struct gp_sandbox_spec *s)
{
	if (mount("tmpfs", ROOT_STAGING, "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=0755,size=1m") != 0 ||
	    root_fill(ROOT_STAGING, s->root_binds, s->expose_ro,
	    s->expose_rw, s->agent_work, s->resolv_conf) != 0 ||
	    root_dev_fill(ROOT_STAGING, s) != 0)
		return -1;
	return root_switch(ROOT_STAGING);
}

/*
 * The same root from the template (this mount namespace's copy of it):
 * a /dev of the job's own on it, then the switch. The template's tmpfs
 * is every job's: nothing is written to it, only mounted on.
 */
static void
root_from_template(const struct gp_sandbox_spec *s)
{
	char dev[4096];

	if (join(dev, sizeof(dev), s->root_template, "dev") != 0 ||
	    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=0755,size=1m") != 0)
		fail(s->status_fd, STAGE_ROOT_DEV);
	if (root_dev_fill(s->root_template, s) != 0)
		fail(s->status_fd, STAGE_ROOT);
	if (root_switch(s->root_template) != 0)
		fail(s->status_fd, STAGE_ROOT_SWITCH);
}

/* After / was made read-only: the exposures the owner lends writable. */
static int
expose_writable(const struct gp_sandbox_spec *s)
{
	struct mount_attr rw = {.attr_clr = MOUNT_ATTR_RDONLY,
	    .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};

	for (char *const *p = s->expose_rw; p != NULL && *p != NULL; p++)
		if (mount_setattr(AT_FDCWD, *p, AT_RECURSIVE, &rw,
		    sizeof(rw)) != 0)
			return -1;
	return 0;
}

/*
 * The agent's work directory becomes an empty tmpfs but for the job's
 * own directory (other jobs' directories, the agent's caches and socket
 * are not there); /home, /root, /run/user and the agent's secrets become
 * empty, read-only. Then the job's directory, taken before, goes back at
 * its path, writable.
 */
static int
hide(const struct gp_sandbox_spec *s, const struct trees *t)
{
	struct mount_attr rw = {.attr_clr = MOUNT_ATTR_RDONLY,
	    .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	char jobs[4096];
	int i;

	for (i = 0; s->hide_dirs != NULL && s->hide_dirs[i] != NULL; i++)
		if (mount("tmpfs", s->hide_dirs[i], "tmpfs", MS_NOSUID |
		    MS_NODEV | MS_NOEXEC, "mode=0755,size=1m") != 0)
			return -1;
	for (i = 0; s->hide_files != NULL && s->hide_files[i] != NULL; i++)
		if (mount("/dev/null", s->hide_files[i], NULL, MS_BIND, NULL) !=
		    0 || mount(NULL, s->hide_files[i], NULL, MS_REMOUNT |
		    MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    NULL) != 0)
			return -1;
	/* Under a hidden directory already: only make the path there. */
	if (!s->agent_work_hidden && mount("tmpfs", s->agent_work, "tmpfs",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=1m") != 0)
		return -1;
	if (join(jobs, sizeof(jobs), s->agent_work, "jobs") != 0 ||
	    mkdir_p(s->workdir) != 0 || chmod(s->agent_work, 0711) != 0 ||
	    chmod(jobs, 0711) != 0)
		return -1;
	if (move_mount(t->workdir, "", AT_FDCWD, s->workdir,
	    MOVE_MOUNT_F_EMPTY_PATH) != 0 ||
	    mount_setattr(AT_FDCWD, s->workdir, 0, &rw, sizeof(rw)) != 0)
		return -1;
	/* The tmpfs themselves read-only now that their paths exist. */
	for (i = 0; s->hide_dirs != NULL && s->hide_dirs[i] != NULL; i++)
		if (mount(NULL, s->hide_dirs[i], NULL, MS_REMOUNT | MS_RDONLY |
		    MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m") != 0)
			return -1;
	if (!s->agent_work_hidden && mount(NULL, s->agent_work, NULL,
	    MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0711,size=1m") != 0)
		return -1;
	return 0;
}

static void
setup(const struct gp_sandbox_spec *s)
{
	const struct gp_sandbox_user *u = s->user;
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY |
	    MOUNT_ATTR_NOSUID};
	struct trees t;
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
	/* What hiding covers later: taken now, put back later. */
	t.workdir = (int)syscall(SYS_open_tree, AT_FDCWD, s->workdir,
	    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (t.workdir < 0)
		fail(fd, STAGE_CLONE);
	for (i = 0; i < s->nmounts; i++) {
		struct mount_attr ma = {.attr_set = MOUNT_ATTR_NOSUID |
		    MOUNT_ATTR_NODEV | (s->mounts[i].read_only ?
		    MOUNT_ATTR_RDONLY : 0)};
		t.mounts[i] = (int)syscall(SYS_open_tree, AT_FDCWD,
		    s->mounts[i].source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
		    AT_RECURSIVE);
		if (t.mounts[i] < 0 || mount_setattr(t.mounts[i], "",
		    AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof(ma)) != 0)
			fail(fd, STAGE_CLONE);
	}
	if (s->root_binds != NULL && s->root_template != NULL)
		root_from_template(s);
	else if (s->root_binds != NULL && build_root(s) != 0)
		fail(fd, STAGE_ROOT);
	/* Room for mount points that the host does not have. */
	for (i = 0; s->shadows != NULL && s->shadows[i] != NULL; i++)
		if (shadow(s->shadows[i]) != 0)
			fail(fd, STAGE_SHADOW);
	for (i = 0; i < s->nmounts; i++)
		if (!s->mounts[i].in_tmp && s->mounts[i].make &&
		    (s->mounts[i].is_file ?
		    mkdir_p(s->mounts[i].parent) != 0 ||
		    make_file(s->mounts[i].target) != 0 :
		    mkdir_p(s->mounts[i].target) != 0))
			fail(fd, STAGE_MOUNT_POINT);
	if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &attr,
	    sizeof(attr)) != 0) {
		if (errno != ENOSYS || remount_all_readonly() != 0)
			fail(fd, STAGE_READONLY);
	}
	if (expose_writable(s) != 0)
		fail(fd, STAGE_EXPOSE_RW);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) != 0)
		fail(fd, STAGE_PROC);
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
	    s->tmp_options != NULL ? s->tmp_options : "mode=1777") != 0)
		fail(fd, STAGE_TMP);
	if (access("/dev/shm", F_OK) == 0 &&
	    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
	    s->tmp_options != NULL ? s->tmp_options : "mode=1777") != 0)
		fail(fd, STAGE_SHM);
	for (i = 0; i < s->nmounts; i++)
		if (s->mounts[i].in_tmp && s->mounts[i].make &&
		    (s->mounts[i].is_file ?
		    mkdir_p(s->mounts[i].parent) != 0 ||
		    make_file(s->mounts[i].target) != 0 :
		    mkdir_p(s->mounts[i].target) != 0))
			fail(fd, STAGE_MOUNT_POINT);
	if (hide(s, &t) != 0)
		fail(fd, STAGE_HIDE);
	for (i = 0; i < s->nmounts; i++)
		if (move_mount(t.mounts[i], "", AT_FDCWD, s->mounts[i].target,
		    MOVE_MOUNT_F_EMPTY_PATH) != 0)
			fail(fd, STAGE_MOUNT);
	if (sethostname("gpupool-job", 11) != 0)
		fail(fd, STAGE_HOSTNAME);
	/* No capability can come back, in a user namespace either. */
	for (i = 0; i < 64; i++)
		if (prctl(PR_CAPBSET_DROP, i, 0, 0, 0) != 0 && errno == EINVAL)
			break;
	if (!u->userns) {
		/* Then become the user (which clears every capability). */
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

/* What the command needs before its exec (on init's stack, shared). */
struct command_start {
	const struct gp_sandbox_spec *s;
	int exec_fd, null_fd;
};

static int
command_main(void *arg)
{
	const struct command_start *c = arg;

	run_command(c->s, c->exec_fd, c->null_fd);
}

/*
 * Starts the job's command as posix_spawn does: a clone that shares
 * init's memory (CLONE_VM) on a stack of its own, init suspended
 * (CLONE_VFORK) until the command has exec'd or failed, so that init's
 * address space (a copy of the spawn helper's, or the agent's) is not
 * copied a second time only to be thrown away by the exec: that copy
 * and its teardown were a fifth of a `true` job's CPU time. Every signal
 * is blocked around the clone: the command runs no handler of init's
 * before run_command resets them. Not glibc's fork(), which takes locks
 * (malloc, stdio) another agent thread may have held at init's clone.
 * Returns the command's pid, or -1.
 */
#if defined(__SANITIZE_ADDRESS__)
#define COMMAND_SHARES_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COMMAND_SHARES_MEMORY 0
#endif
#endif
#ifndef COMMAND_SHARES_MEMORY
#define COMMAND_SHARES_MEMORY 1
#endif

static pid_t
start_command(const struct gp_sandbox_spec *s, int exec_fd, int null_fd)
{
	struct command_start c = {s, exec_fd, null_fd};
	size_t argc = 0, len;
	sigset_t all, old;
	char *stack;
	pid_t pid;

	if (!COMMAND_SHARES_MEMORY) {
		/*
		 * ASan's one shadow of the shared memory takes a CLONE_VM
		 * child's frames for overflows: under it, a copy as before.
		 */
		pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
		if (pid == 0)
			command_main(&c);
		return pid;
	}
	/* execvp may put argv on the stack again (a script's interpreter). */
	while (s->argv[argc] != NULL)
		argc++;
	len = ((size_t)256 << 10) + (argc + 2) * sizeof(char *);
	len = (len + 4095) & ~(size_t)4095;
	stack = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
	if (stack == MAP_FAILED)
		return -1;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = clone(command_main, stack + len, CLONE_VM | CLONE_VFORK |
	    SIGCHLD, &c);
	sigprocmask(SIG_SETMASK, &old, NULL);
	munmap(stack, len);
	return pid;
}

/*
 * Init is a copy of the agent: the command line and environment it shows
 * as /proc/1/cmdline and /proc/1/environ are the agent's ("--token ..."
 * included, world-readable). This copy's are overwritten (the agent's own
 * stay): "gpupool-sandbox", then zeros. Their places are /proc/self/stat's
 * fields 48 to 51 (arg_start, arg_end, env_start, env_end), read without
 * allocating.
 */
static void
scrub_cmdline(void)
{
	static const char name[] = "gpupool-sandbox";
	unsigned long v[4] = {0, 0, 0, 0};
	char buf[2048], *p;
	ssize_t n;
	int fd, field = 2;

	if ((fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* Field 2 is the name in parentheses (it may hold spaces). */
	if ((p = strrchr(buf, ')')) == NULL)
		return;
	for (p++; *p != '\0' && field < 51; ) {
		while (*p == ' ')
			p++;
		if (++field >= 48) {
			if (*p < '0' || *p > '9')
				return;
			for (; *p >= '0' && *p <= '9'; p++)
				v[field - 48] = v[field - 48] * 10 +
				    (unsigned long)(*p - '0');
		}
		while (*p != ' ' && *p != '\0')
			p++;
	}
	if (field != 51 || v[1] <= v[0] || v[3] < v[2])
		return;
	memset((void *)v[0], 0, v[1] - v[0]);
	memset((void *)v[2], 0, v[3] - v[2]);
	if (v[1] - v[0] > sizeof(name))
		memcpy((void *)v[0], name, sizeof(name));
}

/* The job's network namespace (netns.h), before anything else. */
static void
join_network(const struct gp_sandbox_spec *s)
{
	if (s->net_fd >= 0) {
		if (setns(s->net_fd, CLONE_NEWNET) != 0)
			fail(s->status_fd, STAGE_NETWORK);
		close(s->net_fd);
	} else if (s->new_net && gp_net_loopback_up() != 0)
		fail(s->status_fd, STAGE_NETWORK);
	/* A non-root agent's pasta: attached to this namespace meanwhile. */
	if (s->net_wait_fd >= 0) {
		char go;
		ssize_t got;

		do
			got = read(s->net_wait_fd, &go, 1);
		while (got < 0 && errno == EINTR);
		if (got != 1)
			fail(s->status_fd, STAGE_NETWORK);
		close(s->net_wait_fd);
	}
}

static __attribute__((noreturn)) void
init_main(const struct gp_sandbox_spec *s)
{
	int keep[2] = {s->out_fd, s->status_fd};
	int exec_pipe[2], null_fd, err, status;
	pid_t child, pid;
	ssize_t n;

	/*
	 * A non-root agent is not dumpable (agent/main.c), nor then its
	 * clone: until setup is done, the agent must reach init's /proc
	 * (its namespaces, for pasta's nft and tc) and init its own
	 * (/proc/self/uid_map), as when the agent was dumpable. Init is
	 * made undumpable again below, before the job's command exists.
	 */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	command_pid = 0;
	pending_signal = 0;
	scrub_cmdline();
	forward_signals();
	join_network(s);
	setup(s);
	/*
	 * The job's user may be init's (an agent not run as root): nothing
	 * of init's, a copy of the agent's memory, may be read through
	 * /proc/1/mem or /proc/1/environ, nor init traced. (The capabilities
	 * init holds in its user namespace refuse that too; this does not
	 * rest on them. An agent as root: setresuid made init so already.)
	 */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* The cgroup descriptors were used by setup; drop the rest. */
	close_except(keep, 2);
	if ((null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
	    pipe2(exec_pipe, O_CLOEXEC) != 0)
		fail(s->status_fd, STAGE_FORK);
	if ((child = start_command(s, exec_pipe[1], null_fd)) < 0)
		fail(s->status_fd, STAGE_FORK);
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

/* ---- warm sandboxes: init cloned and in its cgroup before the job ---- */

/* The shared page(s) a job's spec is copied into: untouched pages cost no
 * memory; argv and the environment together stay far below this. */
#define WARM_ARENA_LEN ((size_t)4 << 20)

/* What a warm init needs before its job (its own copy, on its stack). */
struct warm_child {
	int out_fd, status_fd, go_fd;
	int cgroup_fds[2];
	int ncgroup_fds;
	struct gp_sandbox_spec *spec;	/* in the shared arena */
};

/* The go byte, and the job's network namespace when one comes with it. */
static ssize_t
recv_go(int fd, char *go, int *net_fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {go, 1};
	struct msghdr m;
	struct cmsghdr *c;
	ssize_t got;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	*net_fd = -1;
	got = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	c = got == 1 ? CMSG_FIRSTHDR(&m) : NULL;
	if (c != NULL && c->cmsg_level == SOL_SOCKET &&
	    c->cmsg_type == SCM_RIGHTS)
		memcpy(net_fd, CMSG_DATA(c), sizeof(int));
	return got;
}

static __attribute__((noreturn)) void
warm_main(const struct warm_child *c)
{
	int keep[5] = {c->out_fd, c->status_fd, c->go_fd}, n = 3, i;
	struct gp_sandbox_spec *s = c->spec;
	int net_fd;
	ssize_t got;
	char go;

	for (i = 0; i < c->ncgroup_fds; i++)
		keep[n++] = c->cgroup_fds[i];
	/* Nothing of the agent's is held while waiting (its sockets). */
	close_except(keep, n);
	/* With the agent's executor thread, or at once if it is gone. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	for (i = 0; i < c->ncgroup_fds; i++) {
		if (write(c->cgroup_fds[i], "0", 1) != 1)
			fail(c->status_fd, STAGE_CGROUP);
		close(c->cgroup_fds[i]);
	}
	do
		got = recv_go(c->go_fd, &go, &net_fd);
	while (got < 0 && errno == EINTR);
	/* End of file: the slot was discarded, or the agent is gone. */
	if (got != 1)
		_exit(0);
	close(c->go_fd);
	s->net_fd = net_fd;
	s->out_fd = c->out_fd;
	s->status_fd = c->status_fd;
	s->cgroup_fds = NULL;
	s->ncgroup_fds = 0;
	init_main(s);
}

static uint64_t init_clone_flags(const struct gp_sandbox_user *user);
static void *arena_map(int *memfd);
static int clone_init(struct gp_spawner *sp, int kind, uint64_t flags,
    int memfd, void *arena, const int *fds, int nfds, pid_t *pid,
    int *pidfd);

int
gp_sandbox_warm_make(struct gp_sandbox_warm *w, struct gp_spawner *sp,
    const struct gp_cgroups *cg, const struct gp_sandbox_user *user,
    const char *name, int64_t pids_max, char *err, size_t errlen)
{
	struct gp_sandbox_warm n;
	int out[2] = {-1, -1}, status[2] = {-1, -1}, go[2] = {-1, -1}, i;
	int fds[5], nfds = 0, memfd = -1;

	memset(&n, 0, sizeof(n));
	n.pidfd = n.go_fd = n.out_fd = n.status_fd = -1;
	n.arena = MAP_FAILED;
	if (gp_cgroup_create(cg, name, 0, pids_max, &n.cgroup, err,
	    errlen) != 0)
		return GP_EIO;
	if (n.cgroup.nfds == 0 || n.cgroup.nfds > 2) {
		snprintf(err, errlen, "no cgroup to join");
		goto fail;
	}
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	if ((n.arena = arena_map(&memfd)) == MAP_FAILED) {
		snprintf(err, errlen, "arena: %s", strerror(errno));
		goto fail;
	}
	n.arena_len = WARM_ARENA_LEN;
	fds[nfds++] = out[1];
	fds[nfds++] = status[1];
	fds[nfds++] = go[1];
	for (i = 0; i < n.cgroup.nfds; i++)
		fds[nfds++] = n.cgroup.procs_fds[i];
	/* Not root: no namespace of the agent's to join; one of its own. */
	if (clone_init(sp, GP_SANDBOX_CHILD_WARM, init_clone_flags(user) |
	    (user->userns ? CLONE_NEWNET : 0), memfd, n.arena, fds, nfds,
	    &n.pid, &n.pidfd) != 0) {
		snprintf(err, errlen, "clone: %s", strerror(errno));
		goto fail;
	}
	close(memfd);
	close(out[1]);
	close(status[1]);
	close(go[1]);
	gp_cgroup_close_fds(&n.cgroup);
	n.out_fd = out[0];
	n.status_fd = status[0];
	n.go_fd = go[0];
	*w = n;
	return 0;
fail:
	if (memfd >= 0)
		close(memfd);
	for (i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (status[i] >= 0)
			close(status[i]);
		if (go[i] >= 0)
			close(go[i]);
	}
	if (n.arena != MAP_FAILED)
		munmap(n.arena, WARM_ARENA_LEN);
	gp_cgroup_close_fds(&n.cgroup);
	gp_cgroup_remove(&n.cgroup);
	return GP_EIO;
}

/* A bump allocator over the arena; ok drops to 0 when it is full. */
struct arena {
	char *base;
	size_t len, used;
	int ok;
};

static void *
arena_get(struct arena *a, size_t n)
{
	size_t at = (a->used + 15) & ~(size_t)15;

	if (at > a->len || n > a->len - at) {
		a->ok = 0;
		return NULL;
	}
	a->used = at + n;
	return a->base + at;
}

static char *
arena_str(struct arena *a, const char *str)
{
	size_t n;
	char *d;

	if (str == NULL)
		return NULL;
	n = strlen(str) + 1;
	if ((d = arena_get(a, n)) != NULL)
		memcpy(d, str, n);
	return d;
}

static char *const *
arena_strv(struct arena *a, char *const *v)
{
	size_t n = 0, i;
	char **d;

	if (v == NULL)
		return NULL;
	while (v[n] != NULL)
		n++;
	if ((d = arena_get(a, (n + 1) * sizeof(*d))) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		d[i] = arena_str(a, v[i]);
	d[n] = NULL;
	return d;
}

/* The go byte, with the job's network namespace (net_fd >= 0). */
static ssize_t
send_go(int fd, int net_fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {"g", 1};
	struct msghdr m;
	struct cmsghdr *c;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (net_fd >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &net_fd, sizeof(int));
	}
	return sendmsg(fd, &m, MSG_NOSIGNAL);
}

/*
 * Deep-copies spec into the arena at base (its start: init finds it
 * there); out_fd, status_fd and cgroup_fds are left for init to set.
 * Returns 0 or GP_ETOOBIG.
 */
static int
arena_fill(void *base, size_t len, const struct gp_sandbox_spec *spec)
{
	struct arena a = {base, len, 0, 1};
	struct gp_sandbox_mount *m = NULL;
	struct gp_sandbox_user *u;
	struct gp_sandbox_spec *s;
	int i;

	/* The spec first: init finds it at the start of the arena. */
	if ((s = arena_get(&a, sizeof(*s))) == NULL ||
	    (u = arena_get(&a, sizeof(*u))) == NULL)
		return GP_ETOOBIG;
	*s = *spec;
	*u = *spec->user;
	s->user = u;
	s->workdir = arena_str(&a, spec->workdir);
	s->agent_work = arena_str(&a, spec->agent_work);
	s->hide_dirs = arena_strv(&a, spec->hide_dirs);
	s->hide_files = arena_strv(&a, spec->hide_files);
	s->shadows = arena_strv(&a, spec->shadows);
	s->tmp_options = arena_str(&a, spec->tmp_options);
	s->root_binds = arena_strv(&a, spec->root_binds);
	s->root_template = arena_str(&a, spec->root_template);
	s->resolv_conf = arena_str(&a, spec->resolv_conf);
	s->expose_ro = arena_strv(&a, spec->expose_ro);
	s->expose_rw = arena_strv(&a, spec->expose_rw);
	if (spec->nmounts > 0 &&
	    (m = arena_get(&a, (size_t)spec->nmounts * sizeof(*m))) != NULL)
		for (i = 0; i < spec->nmounts; i++) {
			m[i] = spec->mounts[i];
			m[i].source = arena_str(&a, spec->mounts[i].source);
			m[i].target = arena_str(&a, spec->mounts[i].target);
			m[i].parent = arena_str(&a, spec->mounts[i].parent);
		}
	s->mounts = m;
	s->argv = arena_strv(&a, spec->argv);
	s->envp = arena_strv(&a, spec->envp);
	s->out_fd = s->status_fd = -1;
	s->cgroup_fds = NULL;
	s->ncgroup_fds = 0;
	if (!a.ok)
		return GP_ETOOBIG;
	s->net_fd = -1;	/* init's own: the go byte or the clone brings it */
	s->net_wait_fd = -1;	/* the same */
	return 0;
}

/*
 * The flags every init is cloned with: its own mount, pid, IPC and UTS
 * namespaces, and a user namespace when the agent is not root.
 */
static uint64_t
init_clone_flags(const struct gp_sandbox_user *user)
{
	return CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
	    (user->userns ? CLONE_NEWUSER : 0);
}

/*
 * Maps a new arena: a memfd (*memfd, close-on-exec) mapped shared, so
 * that the spawn helper can map the same pages at the same address.
 * Returns the mapping or MAP_FAILED (errno set).
 */
static void *
arena_map(int *memfd)
{
	void *p;
	int fd;

	if ((fd = memfd_create("gpupool-spec", MFD_CLOEXEC)) < 0)
		return MAP_FAILED;
	if (ftruncate(fd, (off_t)WARM_ARENA_LEN) != 0 ||
	    (p = mmap(NULL, WARM_ARENA_LEN, PROT_READ | PROT_WRITE,
	    MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int saved = errno;

		close(fd);
		errno = saved;
		return MAP_FAILED;
	}
	*memfd = fd;
	return p;
}

/*
 * Clones init, from the spawn helper when there is one (the agent's own
 * address space is never copied then) or from the agent. kind says
 * what the child runs (gp_sandbox_child_main); fds are its descriptors
 * in that order. OUT: *pid, *pidfd. Returns 0 or GP_EIO (errno set).
 */
static int
clone_init(struct gp_spawner *sp, int kind, uint64_t flags, int memfd,
    void *arena, const int *fds, int nfds, pid_t *pid, int *pidfd)
{
	struct clone3_args args;
	int fd = -1;
	long ret;

	if (sp != NULL && gp_spawner_clone(sp, kind, flags, memfd, arena,
	    WARM_ARENA_LEN, fds, nfds, pid, pidfd) == 0)
		return 0;
	memset(&args, 0, sizeof(args));
	args.flags = flags | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)&fd;
	args.exit_signal = SIGCHLD;
	ret = syscall(SYS_clone3, &args, sizeof(args));
	if (ret == 0)
		gp_sandbox_child_main(kind, arena, fds, nfds);
	if (ret < 0)
		return GP_EIO;
	*pid = (pid_t)ret;
	*pidfd = fd;
	return 0;
}

void
gp_sandbox_child_main(int kind, void *arena, const int *fds, int nfds)
{
	struct gp_sandbox_spec *s = arena;
	struct warm_child c;
	int i;

	if (kind == GP_SANDBOX_CHILD_WARM && nfds >= 3 && nfds <= 5) {
		memset(&c, 0, sizeof(c));
		c.out_fd = fds[0];
		c.status_fd = fds[1];
		c.go_fd = fds[2];
		c.ncgroup_fds = nfds - 3;
		for (i = 0; i < c.ncgroup_fds; i++)
			c.cgroup_fds[i] = fds[3 + i];
		c.spec = s;
		warm_main(&c);
	}
	if (kind == GP_SANDBOX_CHILD_NOW && nfds >= 2) {
		/* The arena is this child's to write now. */
		i = 2;
		s->out_fd = fds[0];
		s->status_fd = fds[1];
		if (s->net_fd >= 0 && nfds > i)
			s->net_fd = fds[i++];
		else
			s->net_fd = -1;
		if (s->net_wait_fd >= 0 && nfds > i)
			s->net_wait_fd = fds[i++];
		else
			s->net_wait_fd = -1;
		s->cgroup_fds = fds + i;
		s->ncgroup_fds = nfds - i;
		init_main(s);
	}
	_exit(127);
}

int
gp_sandbox_spawn(struct gp_spawner *sp, const struct gp_sandbox_spec *spec,
    pid_t *pid, int *pidfd)
{
	int fds[4 + GP_SANDBOX_CGROUP_FDS_MAX], nfds = 0, memfd = -1, i, ret;
	void *arena;

	if (spec->ncgroup_fds > GP_SANDBOX_CGROUP_FDS_MAX) {
		errno = EINVAL;
		return GP_EIO;
	}
	if ((arena = arena_map(&memfd)) == MAP_FAILED)
		return GP_EIO;
	if (arena_fill(arena, WARM_ARENA_LEN, spec) != 0) {
		ret = GP_EIO;
		errno = E2BIG;
		goto out;
	}
	fds[nfds++] = spec->out_fd;
	fds[nfds++] = spec->status_fd;
	/* The job's network namespace to join, when it has one made. */
	if (spec->net_fd >= 0) {
		((struct gp_sandbox_spec *)arena)->net_fd = 0;
		fds[nfds++] = spec->net_fd;
	}
	if (spec->net_wait_fd >= 0) {
		((struct gp_sandbox_spec *)arena)->net_wait_fd = 0;
		fds[nfds++] = spec->net_wait_fd;
	}
	for (i = 0; i < spec->ncgroup_fds; i++)
		fds[nfds++] = spec->cgroup_fds[i];
	ret = clone_init(sp, GP_SANDBOX_CHILD_NOW,
	    init_clone_flags(spec->user) | (spec->net_fd < 0 &&
	    spec->new_net ? CLONE_NEWNET : 0), memfd, arena, fds, nfds, pid,
	    pidfd);
out:
	i = errno;
	munmap(arena, WARM_ARENA_LEN);
	close(memfd);
	errno = i;
	return ret;
}

int
gp_sandbox_warm_use(struct gp_sandbox_warm *w,
    const struct gp_sandbox_spec *spec)
{
	int ret;

	if (w->arena == NULL || w->go_fd < 0)
		return GP_EIO;
	if ((ret = arena_fill(w->arena, w->arena_len, spec)) != 0)
		return ret;
	/* A socket, not a pipe: a gone init is EPIPE, never SIGPIPE. */
	if (send_go(w->go_fd, spec->net_fd) != 1)
		return GP_EIO;
	return 0;
}

void
gp_sandbox_warm_forget(struct gp_sandbox_warm *w)
{
	/* init has its own mapping of the arena: ours can go now. */
	if (w->arena != NULL)
		munmap(w->arena, w->arena_len);
	if (w->go_fd >= 0)
		close(w->go_fd);
	memset(w, 0, sizeof(*w));
	w->pidfd = w->go_fd = w->out_fd = w->status_fd = -1;
}

void
gp_sandbox_warm_discard(struct gp_sandbox_warm *w)
{
	siginfo_t info;

	if (w->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
		memset(&info, 0, sizeof(info));
		while (syscall(SYS_waitid, P_PIDFD, w->pidfd, &info, WEXITED,
		    NULL) != 0 && errno == EINTR)
			;
		close(w->pidfd);
	}
	if (w->out_fd >= 0)
		close(w->out_fd);
	if (w->status_fd >= 0)
		close(w->status_fd);
	/* Its one process is reaped: the cgroup is empty. */
	if (gp_cgroup_remove(&w->cgroup) != 0)
		gp_warn("cannot remove a warm sandbox's cgroup dir=%s",
		    w->cgroup.dirs[0]);
	gp_sandbox_warm_forget(w);
}

/* ---- the plain sandbox as an executor implementation ---- */

/* Hidden from every plain job when they exist. */
static const char *hidden_always[] = {"/home", "/root", "/run/user"};

/*
 * The minimal root of a plain job (docs/agent.md, "What a job can see and
 * do"): the system's programs and libraries, these entries of /etc (name
 * resolution, users and groups, the dynamic linker's cache, time zone,
 * certificates, alternatives, GPU loaders' vendor files), a few device
 * nodes, the GPU control nodes and the job's own GPUs' (never another
 * GPU's /dev/nvidia<minor>), and /sys read-only (the kernel's
 * view of the hardware and of the job's cgroups, as containers have
 * it). The host's /srv, /opt, /var, /mnt, /home and the rest of /etc are
 * not there; an owner lends more with "expose" in the policy.
 */
static const char *const root_system[] = {"/usr", "/bin", "/sbin", "/lib",
    "/lib32", "/lib64", "/libx32", "/sys"};
static const char *const root_etc[] = {"passwd", "group", "hosts",
    "hostname", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
    "protocols", "services", "networks", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "localtime", "timezone", "os-release",
    "debian_version", "alternatives", "ssl", "ca-certificates",
    "ca-certificates.conf", "mime.types", "shells", "profile",
    "bash.bashrc", "environment", "inputrc", "locale.alias", "terminfo",
    "magic", "mailcap", "OpenCL", "vulkan", "nvidia", "glvnd", "egl",
    "python3", "fonts"};
static const char *const root_dev[] = {"/dev/null", "/dev/zero",
    "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
/* In /dev besides the job's own GPUs' /dev/nvidia<minor>. */
static const char *const nvidia_control[] = {"nvidiactl", "nvidia-uvm",
    "nvidia-uvm-tools", "nvidia-modeset"};

/* What a plain job's sandbox needs besides the executor's (priv). */
struct sjob {
	char **hide_dirs, **hide_files, **shadows;
	int nhide_dirs, nhide_files, nshadows;
	char **root_binds, **expose_ro, **expose_rw;
	int nroot_binds, nexpose_ro, nexpose_rw;
	char tmp_options[64];	/* /tmp and /dev/shm: its memory's size */
	struct gp_sandbox_mount mounts[GP_SANDBOX_MOUNTS_MAX];
	char *strings[3 * GP_SANDBOX_MOUNTS_MAX];
	int nmounts, nstrings;
	int agent_work_hidden;
	int writes_root;	/* a mount point made in the root itself */
	const char *resolv_conf; /* instead of the host's (netns.h), or NULL */
};

static int
below(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return 1;
	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Appends a copy of str to a NULL-ended list of n. 0 or GP_ENOMEM. */
static int
list_add(char ***list, int *n, const char *str)
{
	char **grown = realloc(*list, (size_t)(*n + 2) * sizeof(char *));

	if (grown == NULL)
		return GP_ENOMEM;
	*list = grown;
	if ((grown[*n] = strdup(str)) == NULL)
		return GP_ENOMEM;
	grown[++*n] = NULL;
	return 0;
}

static void
list_free(char **list)
{
	for (char **p = list; p != NULL && *p != NULL; p++)
		free(*p);
	free(list);
}

static char *
keep(struct sjob *sj, const char *str)
{
	char *d;

	if (sj->nstrings == (int)GP_ARRAY_LEN(sj->strings) ||
	    (d = strdup(str)) == NULL)
		return NULL;
	sj->strings[sj->nstrings++] = d;
	return d;
}

/* 1 when the host's path (real, absolute) is in the job's minimal root. */
static int
in_view(const struct sjob *sj, const char *real)
{
	char *const *lists[] = {sj->root_binds, sj->expose_ro, sj->expose_rw};

	for (size_t i = 0; i < GP_ARRAY_LEN(lists); i++)
		for (char *const *p = lists[i]; p != NULL && *p != NULL; p++)
			if (below(real, *p))
				return 1;
	return 0;
}

/*
 * The minimal root's lists: what of root_system, root_etc, root_dev and
 * nvidia_control this host has, the job's GPUs' /dev/nvidia<minor>, and
 * the owner's exposures (each must be its own real path: an exposure
 * through a symbolic link is left out, with a warning, since what hides
 * the agent's files goes by real paths). 0 or GP_ENOMEM.
 */
static int
plan_root(struct sjob *sj, const struct gp_exec_job *x)
{
	char path[PATH_MAX], real[PATH_MAX];
	struct stat st;
	size_t i;
	int k;

	for (i = 0; i < GP_ARRAY_LEN(root_system); i++)
		if (lstat(root_system[i], &st) == 0 &&
		    list_add(&sj->root_binds, &sj->nroot_binds,
		    root_system[i]) != 0)
			return GP_ENOMEM;
	for (i = 0; i < GP_ARRAY_LEN(root_etc); i++) {
		snprintf(path, sizeof(path), "/etc/%s", root_etc[i]);
		if (lstat(path, &st) == 0 &&
		    list_add(&sj->root_binds, &sj->nroot_binds, path) != 0)
			return GP_ENOMEM;
	}
	for (i = 0; i < GP_ARRAY_LEN(root_dev); i++)
		if (lstat(root_dev[i], &st) == 0 &&
		    list_add(&sj->root_binds, &sj->nroot_binds,
		    root_dev[i]) != 0)
			return GP_ENOMEM;
	/* The GPUs' control nodes, then the job's own GPUs', no other's. */
	for (i = 0; i < GP_ARRAY_LEN(nvidia_control); i++) {
		snprintf(path, sizeof(path), "/dev/%s", nvidia_control[i]);
		if (lstat(path, &st) == 0 &&
		    list_add(&sj->root_binds, &sj->nroot_binds, path) != 0)
			return GP_ENOMEM;
	}
	for (k = 0; k < x->a->ngpus; k++) {
		int g = x->a->gpus[k];

		if (g < 0 || g >= x->cfg->ngpus)
			continue;
		snprintf(path, sizeof(path), "/dev/nvidia%d",
		    x->cfg->gpu_minors != NULL ? x->cfg->gpu_minors[g] : g);
		if (lstat(path, &st) == 0 &&
		    list_add(&sj->root_binds, &sj->nroot_binds, path) != 0)
			return GP_ENOMEM;
	}
	/* Never NULL: NULL would mean the host's whole root. */
	if (sj->root_binds == NULL &&
	    (sj->root_binds = calloc(1, sizeof(char *))) == NULL)
		return GP_ENOMEM;
	for (k = 0; k < x->a->nexpose; k++) {
		const struct gp_mount *m = &x->a->expose[k];

		if (realpath(m->source, real) == NULL) {
			gp_warn("policy expose path=%s error=\"%s\": not shown "
			    "to job=%s", m->source, strerror(errno), x->name);
			continue;
		}
		if (strcmp(real, m->source) != 0) {
			gp_warn("policy expose path=%s is reached through a "
			    "symbolic link (real path %s): not shown to job=%s; "
			    "expose the real path", m->source, real, x->name);
			continue;
		}
		if (m->read_only ? list_add(&sj->expose_ro, &sj->nexpose_ro,
		    real) : list_add(&sj->expose_rw, &sj->nexpose_rw, real))
			return GP_ENOMEM;
	}
	return 0;
}

/*
 * /home, /root, /run/user and the agent's secrets, as they exist here and
 * where the job's minimal root shows them (under an exposure, mostly).
 */
static int
plan_hiding(struct sjob *sj, const struct gp_exec_config *cfg)
{
	char real[PATH_MAX];
	struct stat st;
	size_t i, n = GP_ARRAY_LEN(hidden_always);
	int k;

	for (k = 0; cfg->hidden_paths != NULL && cfg->hidden_paths[k]; k++)
		n++;
	for (i = 0; i < n; i++) {
		const char *p = i < GP_ARRAY_LEN(hidden_always) ?
		    hidden_always[i] :
		    cfg->hidden_paths[i - GP_ARRAY_LEN(hidden_always)];
		int covered = 0;

		if (realpath(p, real) == NULL || stat(real, &st) != 0 ||
		    strcmp(real, "/") == 0)
			continue;
		/* Already out of sight: under the work tmpfs or a hidden dir. */
		if (below(real, cfg->work_dir) || !in_view(sj, real))
			continue;
		for (k = 0; k < sj->nhide_dirs; k++)
			covered |= below(real, sj->hide_dirs[k]);
		if (covered)
			continue;
		if (S_ISDIR(st.st_mode) ? list_add(&sj->hide_dirs,
		    &sj->nhide_dirs, real) : list_add(&sj->hide_files,
		    &sj->nhide_files, real))
			return GP_ENOMEM;
	}
	for (k = 0; k < sj->nhide_dirs; k++)
		if (below(cfg->work_dir, sj->hide_dirs[k]))
			sj->agent_work_hidden = 1;
	return 0;
}

/*
 * Checks a job's mount and plans its mount point: where the host has
 * none, the deepest directory it has is shadowed (a tmpfs of binds) and
 * the rest made there; in /tmp and /dev/shm it is made in the job's own
 * tmpfs. Symbolic links on the way are refused (they could lead out).
 */
static int
plan_mount(struct sjob *sj, const struct gp_exec_job *x,
    const struct gp_mount *m, char *err, size_t errlen)
{
	struct gp_sandbox_mount *sm = &sj->mounts[sj->nmounts];
	char prefix[PATH_MAX], deepest[PATH_MAX];
	struct stat st;
	const char *t = m->target;
	size_t i, n;
	int k;

	if (m->source == NULL || t == NULL || !gp_oci_path_normal(t) ||
	    !gp_oci_path_normal(m->source)) {
		snprintf(err, errlen, "mount %s on %s: paths must be absolute "
		    "and normal", m->source ? m->source : "(none)",
		    t ? t : "(none)");
		return GP_EINVAL;
	}
	if (gp_oci_reserved_target(t) || below(x->workdir, t) ||
	    strcmp(t, "/dev/shm") == 0 ||
	    (below(t, x->cfg->work_dir) && !below(t, x->workdir))) {
		snprintf(err, errlen, "mount on %s: a reserved place (/, "
		    "/proc, /sys, /dev, /tmp, the agent's directory, the work "
		    "directory or above it)", t);
		return GP_EINVAL;
	}
	for (k = 0; k < sj->nhide_dirs; k++)
		if (below(t, sj->hide_dirs[k])) {
			snprintf(err, errlen, "mount on %s: %s is hidden from "
			    "jobs", t, sj->hide_dirs[k]);
			return GP_EINVAL;
		}
	if (stat(m->source, &st) != 0) {
		snprintf(err, errlen, "mount source %s: %s", m->source,
		    strerror(errno));
		return GP_ENOENT;
	}
	if (sj->nmounts == GP_SANDBOX_MOUNTS_MAX) {
		snprintf(err, errlen, "more than %d mounts",
		    GP_SANDBOX_MOUNTS_MAX);
		return GP_EINVAL;
	}
	memset(sm, 0, sizeof(*sm));
	sm->is_file = !S_ISDIR(st.st_mode);
	sm->read_only = m->read_only;
	sm->in_tmp = below(t, "/tmp") || below(t, "/dev/shm");
	if ((sm->source = keep(sj, m->source)) == NULL ||
	    (sm->target = keep(sj, t)) == NULL)
		return GP_ENOMEM;
	gp_strlcpy(prefix, t, sizeof(prefix));
	*strrchr(prefix, '/') = '\0';
	if ((sm->parent = keep(sj, prefix[0] ? prefix : "/")) == NULL)
		return GP_ENOMEM;
	sj->nmounts++;
	if (sm->in_tmp) {
		sm->make = 1;
		return 0;
	}
	/* Outside what the minimal root binds: made in its own tmpfs. */
	if (!in_view(sj, t)) {
		sm->make = 1;
		sj->writes_root = 1;
		return 0;
	}
	/* Walk the target on the host: the deepest part that exists. */
	strcpy(deepest, "/");
	n = strlen(t);
	for (i = 1; i <= n; i++) {
		if (t[i] != '/' && t[i] != '\0')
			continue;
		memcpy(prefix, t, i);
		prefix[i] = '\0';
		if (lstat(prefix, &st) != 0) {
			if (errno != ENOENT) {
				snprintf(err, errlen, "mount target %s: %s", t,
				    strerror(errno));
				return GP_EIO;
			}
			sm->make = 1;
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			snprintf(err, errlen, "mount target %s: %s is a "
			    "symbolic link on this host", t, prefix);
			return GP_EINVAL;
		}
		if (i < n && !S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "mount target %s: %s is not a "
			    "directory", t, prefix);
			return GP_EINVAL;
		}
		gp_strlcpy(deepest, prefix, sizeof(deepest));
	}
	if (!sm->make) {
		if (S_ISDIR(st.st_mode) == sm->is_file) {
			snprintf(err, errlen, "mount target %s: a %s on this "
			    "host, the source is not", t, sm->is_file ?
			    "directory" : "file");
			return GP_EINVAL;
		}
		return 0;
	}
	/* The job's own directory is writable: no shadow needed there. */
	if (below(deepest, x->workdir))
		return 0;
	for (k = 0; k < sj->nshadows; k++)
		if (strcmp(sj->shadows[k], deepest) == 0)
			return 0;
	if (list_add(&sj->shadows, &sj->nshadows, deepest) != 0)
		return GP_ENOMEM;
	/* Shallowest first: "/" before "/mnt" (a bind of it by then). */
	for (k = sj->nshadows - 1; k > 0 &&
	    strlen(sj->shadows[k]) < strlen(sj->shadows[k - 1]); k--) {
		char *tmp = sj->shadows[k];
		sj->shadows[k] = sj->shadows[k - 1];
		sj->shadows[k - 1] = tmp;
	}
	return 0;
}

static int
sandbox_prepare(struct gp_exec_job *x, char *err, size_t errlen)
{
	const struct gp_sandbox_user *u = x->cfg->user;
	const struct gp_assignment *a = x->a;
	struct sjob *sj;
	int i, ret;

	if (a->argc < 1 || a->argv == NULL || a->argv[0] == NULL) {
		snprintf(err, errlen, "no command to run");
		return GP_EINVAL;
	}
	if ((sj = calloc(1, sizeof(*sj))) == NULL ||
	    (x->argv = calloc((size_t)a->argc + 1, sizeof(char *))) == NULL) {
		free(sj);
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	x->priv = sj;
	for (i = 0; i < a->argc; i++)
		if ((x->argv[i] = strdup(a->argv[i])) == NULL) {
			snprintf(err, errlen, "agent out of memory");
			return GP_ENOMEM;
		}
	x->argv0 = x->argv[0];
	if (!u->userns) {
		x->uid = u->uid;
		x->gid = u->gid;
	}
	/*
	 * Its /tmp and /dev/shm are memory its cgroup is charged for: each
	 * at most its memory limit, so that filling one ends in "no space
	 * left" rather than the out-of-memory killer.
	 */
	if (a->mem_mib > 0)
		snprintf(sj->tmp_options, sizeof(sj->tmp_options),
		    "mode=1777,size=%lldm", (long long)a->mem_mib);
	else
		gp_strlcpy(sj->tmp_options, "mode=1777",
		    sizeof(sj->tmp_options));
	sj->resolv_conf = x->cfg->net != NULL ?
	    gp_net_resolv_conf(x->cfg->net) : NULL;
	if (plan_root(sj, x) != 0 || plan_hiding(sj, x->cfg) != 0) {
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	for (i = 0; i < a->nmounts; i++)
		if ((ret = plan_mount(sj, x, &a->mounts[i], err, errlen)) != 0) {
			if (ret == GP_ENOMEM)
				snprintf(err, errlen, "agent out of memory");
			return ret;
		}
	return 0;
}

/* ---- the minimal root's template (sandbox.h) ---- */

struct gp_sandbox_template {
	char dir[PATH_MAX];	/* <work>/roots, a private mount */
	char path[PATH_MAX];	/* <dir>/<gen>: the current one, or "" */
	unsigned int gen;
	int64_t built_ms;	/* gp_mono_ms() */
	int64_t retry_ms;	/* after a failed build: not before */
	char *key;		/* the lists it holds, as template_key */
	unsigned long builds;
	/*
	 * The one before, when this one was built only for its age (the
	 * same lists): a warm init cloned with it still has its copy.
	 */
	char prev_path[PATH_MAX];
	unsigned int prev_gen;
	int64_t prev_built_ms;
};

/*
 * The lists a template holds, as one string: root_binds not under /dev,
 * then the exposures, read-only and writable apart. NULL: no memory.
 */
static char *
template_key(const struct sjob *sj)
{
	char *const *lists[] = {sj->root_binds, sj->expose_ro, sj->expose_rw};
	size_t n = 1, i;
	char *key, *at;

	for (i = 0; i < GP_ARRAY_LEN(lists); i++)
		for (char *const *p = lists[i]; p != NULL && *p != NULL; p++)
			n += strlen(*p) + 1;
	n += GP_ARRAY_LEN(lists);
	if ((key = malloc(n)) == NULL)
		return NULL;
	at = key;
	for (i = 0; i < GP_ARRAY_LEN(lists); i++) {
		for (char *const *p = lists[i]; p != NULL && *p != NULL; p++) {
			if (i == 0 && in_dev(*p))
				continue;
			at += sprintf(at, "%s\n", *p);
		}
		*at++ = '|';
	}
	*at = '\0';
	if (sj->resolv_conf != NULL) {
		char *k2 = malloc(strlen(key) + strlen(sj->resolv_conf) + 2);

		if (k2 != NULL)
			sprintf(k2, "%s%s|", key, sj->resolv_conf);
		free(key);
		key = k2;
	}
	return key;
}

/*
 * Unmounts the template at path here; each job cloned with it keeps its
 * copy. The directory stays: removing it would detach the mounts on it
 * in every namespace (Linux does so for a removed mount point), those of
 * inits that have not yet moved their copy to / included.
 */
static void
template_drop(const char *path)
{
	if (path[0] != '\0' && umount2(path, MNT_DETACH) != 0 &&
	    errno != EINVAL)
		gp_warn("cannot unmount a root template dir=%s error=\"%s\"",
		    path, strerror(errno));
}

/*
 * Unmounts dir while it is a mount, then removes its (empty) entries:
 * at the agent's start and stop only (template_drop says why).
 */
static void
template_sweep(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int i;

	for (i = 0; i < 64 && umount2(dir, MNT_DETACH) == 0; i++)
		;
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (join(path, sizeof(path), dir, de->d_name) == 0 &&
		    rmdir(path) != 0)
			gp_warn("cannot remove a root template dir=%s "
			    "error=\"%s\"", path, strerror(errno));
	}
	closedir(d);
}

int
gp_sandbox_template_new(struct gp_sandbox_template **out,
    const char *work_dir, char *err, size_t errlen)
{
	struct gp_sandbox_template *t;

	if ((t = calloc(1, sizeof(*t))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	if (join(t->dir, sizeof(t->dir), work_dir, "roots") != 0) {
		snprintf(err, errlen, "work directory path too long");
		free(t);
		return GP_EINVAL;
	}
	template_sweep(t->dir);
	if ((mkdir(t->dir, 0700) != 0 && errno != EEXIST) ||
	    mount(t->dir, t->dir, NULL, MS_BIND, NULL) != 0 ||
	    mount(NULL, t->dir, NULL, MS_PRIVATE, NULL) != 0) {
		snprintf(err, errlen, "%s: %s", t->dir, strerror(errno));
		umount2(t->dir, MNT_DETACH);
		free(t);
		return GP_EIO;
	}
	*out = t;
	return 0;
}

void
gp_sandbox_template_free(struct gp_sandbox_template *t)
{
	if (t == NULL)
		return;
	template_drop(t->path);
	template_sweep(t->dir);
	free(t->key);
	free(t);
}

unsigned int
gp_sandbox_template_gen(const struct gp_sandbox_template *t)
{
	return t != NULL ? t->gen : 0;
}

unsigned long
gp_sandbox_template_builds(const struct gp_sandbox_template *t)
{
	return t != NULL ? t->builds : 0;
}

/*
 * Builds the next generation of the template holding sj's lists (key,
 * taken) and drops the one before. 0, or -1 (logged; no template then,
 * and none tried again for 10 s).
 */
static int
template_build(struct gp_sandbox_template *t, const struct sjob *sj,
    const char *agent_work, char *key)
{
	char path[PATH_MAX];
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY |
	    MOUNT_ATTR_NOSUID};
	unsigned int gen = t->gen + 1;
	int64_t t0 = gp_mono_ms();

	/* Two directories in turn, never removed while the agent runs. */
	snprintf(path, sizeof(path), "%.4000s/%u", t->dir, gen % 2);
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		goto fail;
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=0755,size=1m") != 0)
		goto fail;
	/*
	 * Read-only, the binds with it: whatever walks the agent's work
	 * directory (a removal after a kill -9, before the next start's
	 * sweep) cannot change the host through them. A job's writable
	 * exposures are made writable again in its own copy.
	 */
	if (root_fill(path, sj->root_binds, sj->expose_ro, sj->expose_rw,
	    agent_work, sj->resolv_conf) != 0 || mount_setattr(AT_FDCWD, path, AT_RECURSIVE,
	    &ro, sizeof(ro)) != 0) {
		int saved = errno;

		template_drop(path);
		errno = saved;
		goto fail;
	}
	template_drop(t->path);
	t->prev_gen = 0;
	if (t->key != NULL && strcmp(t->key, key) == 0) {
		t->prev_gen = t->gen;
		t->prev_built_ms = t->built_ms;
		gp_strlcpy(t->prev_path, t->path, sizeof(t->prev_path));
	}
	gp_strlcpy(t->path, path, sizeof(t->path));
	free(t->key);
	t->key = key;
	t->gen = gen;
	t->built_ms = gp_mono_ms();
	t->builds++;
	gp_debug("root template built gen=%u ms=%lld", gen,
	    (long long)(t->built_ms - t0));
	return 0;
fail:
	gp_warn("cannot build the root template dir=%s error=\"%s\": jobs "
	    "build their roots themselves for 10 s", path, strerror(errno));
	free(key);
	t->retry_ms = t0 + 10000;
	return -1;
}

/*
 * The template a job may start from (a path in its init's mount
 * namespace), built again when missing, older than the maximum age or
 * holding other lists; NULL when the job builds its own root: no
 * template, a job making a mount point in its root, or a warm init
 * cloned with a generation neither current nor the one before it with
 * the same lists (younger than twice the maximum age).
 */
static const char *
template_for(struct gp_sandbox_template *t, const struct sjob *sj,
    const struct gp_exec_job *x)
{
	int64_t now = gp_mono_ms();
	char *key;

	if (t == NULL || sj->writes_root || sj->root_binds == NULL ||
	    now < t->retry_ms || (key = template_key(sj)) == NULL)
		return NULL;
	if (t->gen == 0 || strcmp(key, t->key) != 0 ||
	    now - t->built_ms > GP_SANDBOX_TEMPLATE_MAX_AGE_MS) {
		if (template_build(t, sj, x->cfg->work_dir, key) != 0)
			return NULL;
	} else
		free(key);
	if (x->warm == NULL || x->warm->root_gen == t->gen)
		return t->path;
	/* A warm init's copy: the template before, younger than twice. */
	if (x->warm->root_gen == t->prev_gen && t->prev_gen != 0 &&
	    now - t->prev_built_ms <= 2 * GP_SANDBOX_TEMPLATE_MAX_AGE_MS)
		return t->prev_path;
	return NULL;
}


/*
 * A non-root agent's job with a network: init is cloned with its own
 * namespace and waits (net_wait_fd) while pasta is attached to it.
 */
static int
spawn_with_pasta(struct gp_exec_job *x, struct gp_sandbox_spec *spec,
    pid_t *pid, int *pidfd, char *err, size_t errlen)
{
	int go[2], ret;

	if (pipe2(go, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return GP_EIO;
	}
	spec->net_wait_fd = go[0];
	ret = gp_sandbox_spawn(x->cfg->spawner, spec, pid, pidfd);
	close(go[0]);
	if (ret != 0) {
		snprintf(err, errlen, "clone: %s", strerror(errno));
		close(go[1]);
		return GP_EIO;
	}
	if ((ret = gp_net_job_attach(x->cfg->net, &x->net, *pid, err,
	    errlen)) != 0) {
		/* init reads EOF: fails at stage network, never runs it. */
		close(go[1]);
		kill(*pid, SIGKILL);
		close(*pidfd);
		return ret;
	}
	if (write(go[1], "g", 1) != 1) {
		snprintf(err, errlen, "init gone: %s", strerror(errno));
		close(go[1]);
		close(*pidfd);
		return GP_EIO;
	}
	close(go[1]);
	return 0;
}
static int
sandbox_spawn(struct gp_exec_job *x, pid_t *pid, int *pidfd, char *err,
    size_t errlen)
{
	struct sjob *sj = x->priv;
	struct gp_sandbox_spec spec;

	memset(&spec, 0, sizeof(spec));
	spec.user = x->cfg->user;
	spec.workdir = x->workdir;
	spec.agent_work = x->cfg->work_dir;
	spec.agent_work_hidden = sj->agent_work_hidden;
	spec.hide_dirs = sj->hide_dirs;
	spec.hide_files = sj->hide_files;
	spec.shadows = sj->shadows;
	spec.tmp_options = sj->tmp_options;
	spec.root_binds = sj->root_binds;
	spec.root_template = template_for(x->cfg->root_template, sj, x);
	spec.resolv_conf = sj->resolv_conf;
	spec.expose_ro = sj->expose_ro;
	spec.expose_rw = sj->expose_rw;
	spec.mounts = sj->mounts;
	spec.nmounts = sj->nmounts;
	spec.argv = x->argv;
	spec.envp = x->env;
	spec.out_fd = x->out_fd;
	spec.status_fd = x->status_fd;
	spec.cgroup_fds = x->cgroup.procs_fds;
	spec.ncgroup_fds = x->cgroup.nfds;
	spec.net_fd = x->net.ns_fd;
	spec.new_net = x->cfg->net != NULL && x->net.ns_fd < 0;
	spec.net_wait_fd = -1;
	if (x->warm != NULL) {
		int ret;

		/* Its namespace was made with it: pasta before the go. */
		if (x->net.pasta_wanted && (ret = gp_net_job_attach(
		    x->cfg->net, &x->net, x->warm->pid, err, errlen)) != 0)
			return ret;
		ret = gp_sandbox_warm_use(x->warm, &spec);

		if (ret != 0 && x->net.pasta > 0)
			/* The usual start attaches a pasta of its own. */
			gp_net_job_close(x->cfg->net, &x->net);
		if (ret != 0) {
			snprintf(err, errlen, "warm sandbox: %s",
			    ret == GP_ETOOBIG ? "the job does not fit" :
			    strerror(errno));
			return ret;
		}
		*pid = x->warm->pid;
		*pidfd = x->warm->pidfd;
		return 0;
	}
	if (x->net.pasta_wanted && x->net.pasta == 0)
		return spawn_with_pasta(x, &spec, pid, pidfd, err, errlen);
	if (gp_sandbox_spawn(x->cfg->spawner, &spec, pid, pidfd) != 0) {
		snprintf(err, errlen, "clone: %s", strerror(errno));
		return GP_EIO;
	}
	return 0;
}

static void
sandbox_release(struct gp_exec_job *x)
{
	struct sjob *sj = x->priv;

	if (sj == NULL)
		return;
	list_free(sj->hide_dirs);
	list_free(sj->hide_files);
	list_free(sj->shadows);
	list_free(sj->root_binds);
	list_free(sj->expose_ro);
	list_free(sj->expose_rw);
	for (int i = 0; i < sj->nstrings; i++)
		free(sj->strings[i]);
	free(sj);
	x->priv = NULL;
}

const struct gp_executor_ops gp_sandbox_exec_ops = {
	.name = "sandbox",
	.prepare = sandbox_prepare,
	.spawn = sandbox_spawn,
	.stage_name = gp_sandbox_stage_name,
	.explain = NULL,
	.release = sandbox_release,
};
