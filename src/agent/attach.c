/*
 * attach.c: the agent's side of an interactive stream (docs/interactive.md).
 *
 * The coordinator's poll answer lists a stream; gp_attach_stream starts a
 * thread that dials the coordinator for it (an Upgrade of its own, the
 * stream's secret in a header: the agent only ever dials out), reads the
 * client's OPEN frame and then:
 *
 *  - exec, pty: runs the command (a shell by default) inside the job with
 *    nsenter(1) from util-linux: the job's user, mount, UTS, IPC, network,
 *    pid and cgroup namespaces, its user and group, its working
 *    directory, its environment (its GPUs' variables included), its
 *    cgroup; on a pseudo-terminal of its own when asked (window size,
 *    changes, the terminal's signals), else on pipes (stdin, stdout,
 *    stderr; signals passed on to its process group);
 *  - tcp: connects to 127.0.0.1:PORT in the job's network namespace (the
 *    job's loopback, never the provider's).
 *
 * A container job's recorded pid is its runtime's (crun or runc run, in a
 * pid and mount namespace of the agent's making): the stream enters the
 * container's init instead, its child in namespaces of its own
 * (container_init), as the container's user (read from the init's
 * credentials through its user namespace's map) in the init's cgroup,
 * with the container's root and working directory.
 *
 * It pumps frames both ways with bounded buffers (a slow side stops the
 * other) and ends with the exit code (EXIT), or ERROR. The coordinator's
 * leg closing kills what the stream started. An idle stream's thread
 * sleeps in poll(2) without a timeout: it wakes for bytes, for its
 * command's exit (a pidfd) and for a notice (an eventfd), never on a
 * clock, so open sessions cost the agent no CPU while they are quiet.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent/agentd.h"
#include "agent/executor.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "stream.h"
#include "util.h"

#define NSENTER "/usr/bin/nsenter"
#define LOCAL_BUF (16 * 1024)
#define OPEN_WAIT_MS 15000
#define ENTER_WAIT_MS 20000 /* a job being started (image pulls aside) */
#define STOP_TEXT "the agent on the job's machine is stopping"


struct attach {
	struct gp_agent *ag;
	struct gp_stream_request req;
};

/* The stream's state in its thread. */
struct pump {
	struct gp_http_upgraded *up;
	int upfd;
	struct gp_frame_reader rd;
	/* To the coordinator: frames waiting to be sent. */
	uint8_t out[GP_FRAME_HEADER + LOCAL_BUF + 64];
	size_t out_start, out_end;
	/* To the job: bytes of DATA frames not yet written. */
	uint8_t in[GP_FRAME_MAX];
	size_t in_start, in_end;
	int in_eof;		/* the client's EOF came: close after in */
	int kind, tty;
	int to_fd;		/* stdin / the pty / the socket */
	int from_fd[2];		/* stdout, stderr (-1: closed or none) */
	pid_t pid;		/* exec, pty: nsenter's pid (its group's) */
	int pidfd;		/* readable when pid exits (-1: none) */
	int exited, status;
	int broken;		/* the coordinator's leg is gone */
	/* The owner's reclaim: a notice to send (under notice_lock). */
	char notice[256];
	int has_notice;
	int notice_fd;		/* an eventfd: a notice waits */
	int stop;		/* the agent stops (under notice_lock) */
};

/*
 * The attempts' live streams, for the owner's reclaim notice (issue 17
 * B: gp_attach_reclaim_notice, the provider's reclaim hook).
 */
struct live_stream {
	struct pump *p;
	struct gp_attempt_id id;
	struct live_stream *next;
};
static pthread_mutex_t notice_lock = PTHREAD_MUTEX_INITIALIZER;
static struct live_stream *live_streams;

/*
 * The stream threads, counted (under notice_lock) so that the agent's
 * stop ends them and waits for them (gp_attach_stop): none outlives the
 * executor it enters jobs through, nor the process.
 */
static pthread_once_t streams_once = PTHREAD_ONCE_INIT;
static pthread_cond_t streams_done;
static int streams_running, streams_stopping;

static void
streams_init(void)
{
	if (gp_cond_init_monotonic(&streams_done) != 0)
		gp_fatalx("cannot make a condition variable");
}

/* 1 once the agent stops: a stream being set up gives up. */
static int
stopping(const struct pump *p)
{
	int stop;

	pthread_mutex_lock(&notice_lock);
	stop = streams_stopping || (p != NULL && p->stop);
	pthread_mutex_unlock(&notice_lock);
	return stop;
}

/* ---- sending frames to the coordinator ---- */

/* Queues a frame; 0, or GP_ETOOBIG when out has no room now. */
static int
queue_frame(struct pump *p, int type, const void *data, size_t len)
{
	if (p->out_start == p->out_end)
		p->out_start = p->out_end = 0;
	if (sizeof(p->out) - p->out_end < GP_FRAME_HEADER + len &&
	    p->out_start > 0) {
		memmove(p->out, p->out + p->out_start,
		    p->out_end - p->out_start);
		p->out_end -= p->out_start;
		p->out_start = 0;
	}
	if (sizeof(p->out) - p->out_end < GP_FRAME_HEADER + len)
		return GP_ETOOBIG;
	gp_frame_header(p->out + p->out_end, type, len);
	if (len > 0)
		memcpy(p->out + p->out_end + GP_FRAME_HEADER, data, len);
	p->out_end += GP_FRAME_HEADER + len;
	return 0;
}

/* Sends what is queued, without blocking. */
static void
flush_out(struct pump *p)
{
	long n;

	while (p->out_start < p->out_end && !p->broken) {
		n = gp_http_upgraded_send(p->up, p->out + p->out_start,
		    p->out_end - p->out_start);
		if (n == GP_EAGAIN)
			return;
		if (n <= 0) {
			p->broken = 1;
			return;
		}
		p->out_start += (size_t)n;
	}
}

/* Sends what is queued, waiting up to ms (the stream's last words). */
static void
flush_out_wait(struct pump *p, int64_t ms)
{
	int64_t deadline = gp_mono_ms() + ms;
	struct pollfd pf = {.fd = p->upfd, .events = POLLOUT};

	for (;;) {
		flush_out(p);
		if (p->broken || p->out_start == p->out_end ||
		    gp_mono_ms() >= deadline)
			return;
		poll(&pf, 1, 50);
	}
}

static void
send_error(struct pump *p, const char *fmt, const char *what)
{
	char text[512];

	snprintf(text, sizeof(text), fmt, what);
	queue_frame(p, GP_FRAME_ERROR, text, strlen(text));
	flush_out_wait(p, 2000);
}

/* ---- starting what the stream asks for ---- */

/*
 * connect_in_job for an agent that is not root: it has no capability to
 * enter the job's network from its own user namespace, but it owns the
 * job's. A child process (single-threaded, as setns into a user
 * namespace needs) enters the job's user namespace, then its network,
 * connects there and passes the socket back (SCM_RIGHTS). Only system
 * calls in the child: the agent has threads.
 */
static int
connect_via_userns(pid_t pid, int port, char *err, size_t errlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char path[64], control[CMSG_SPACE(sizeof(int))];
	int userfd, netfd, sv[2] = {-1, -1}, fd = -1, report[2] = {0, 0};
	struct iovec iov = {.iov_base = report, .iov_len = sizeof(report)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;
	pid_t child;
	ssize_t n;

	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	userfd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	netfd = open(path, O_RDONLY | O_CLOEXEC);
	if (userfd < 0 || netfd < 0 || socketpair(AF_UNIX, SOCK_STREAM |
	    SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(err, errlen, "cannot enter the job's network: %s",
		    strerror(errno));
		goto out;
	}
	if ((child = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		goto out;
	}
	if (child == 0) {
		/* report: {stage, errno}; stage 0: the socket follows. */
		int s = -1;

		if (setns(userfd, CLONE_NEWUSER) != 0 ||
		    setns(netfd, CLONE_NEWNET) != 0)
			report[0] = 1;
		else if ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			report[0] = 2;
		else if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			report[0] = 3;
		report[1] = errno;
		if (report[0] == 0) {
			msg.msg_control = control;
			msg.msg_controllen = sizeof(control);
			cm = CMSG_FIRSTHDR(&msg);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &s, sizeof(int));
		}
		_exit(sendmsg(sv[1], &msg, 0) < 0);
	}
	close(sv[1]);
	sv[1] = -1;
	msg.msg_control = control;
	msg.msg_controllen = sizeof(control);
	do
		n = recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	cm = n == (ssize_t)sizeof(report) ? CMSG_FIRSTHDR(&msg) : NULL;
	if (cm != NULL && cm->cmsg_level == SOL_SOCKET &&
	    cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(report))
		snprintf(err, errlen, "cannot enter the job's network: its "
		    "helper failed");
	else if (report[0] == 1)
		snprintf(err, errlen, "cannot enter the job's network: %s",
		    strerror(report[1]));
	else if (report[0] == 2)
		snprintf(err, errlen, "socket: %s", strerror(report[1]));
	else if (report[0] == 3)
		snprintf(err, errlen, "nothing answers on the job's port %d: "
		    "%s", port, strerror(report[1]));
	else if (fd < 0)
		snprintf(err, errlen, "cannot enter the job's network: no "
		    "socket came back");
out:
	if (userfd >= 0)
		close(userfd);
	if (netfd >= 0)
		close(netfd);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return fd;
}

/* A socket connected to 127.0.0.1:port inside the job's network. */
static int
connect_in_job(pid_t pid, int port, char *err, size_t errlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char path[64];
	int own = -1, job = -1, fd = -1, one = 1;

	if (geteuid() != 0) {
		if ((fd = connect_via_userns(pid, port, err, errlen)) >= 0)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			    sizeof(one));
		return fd;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	/* setns(CLONE_NEWNET) moves this thread only: it is the stream's. */
	own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	job = open(path, O_RDONLY | O_CLOEXEC);
	if (own < 0 || job < 0 || setns(job, CLONE_NEWNET) != 0) {
		snprintf(err, errlen, "cannot enter the job's network: %s",
		    strerror(errno));
		goto out;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (setns(own, CLONE_NEWNET) != 0)
		gp_fatal("stream thread cannot return to the agent's network");
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		goto out;
	}
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		snprintf(err, errlen, "nothing answers on the job's port %d: "
		    "%s", port, strerror(errno));
		close(fd);
		fd = -1;
		goto out;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
out:
	if (own >= 0)
		close(own);
	if (job >= 0)
		close(job);
	return fd;
}

/* ---- a container job: its init, its user, its cgroup ---- */

/* 1 when paths a and b name the same file (a namespace, an executable). */
static int
same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	    sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/*
 * The first child of parent (in /proc's order) that pick(child, arg)
 * accepts (1). 0 with *child, GP_ENOENT when there is none, GP_EIO when
 * /proc cannot be read.
 */
static int
find_child(pid_t parent, int (*pick)(pid_t child, void *arg), void *arg,
    pid_t *child)
{
	char path[300], *text = NULL, *paren;
	struct dirent *d;
	DIR *dir;
	size_t len;
	long ppid;
	int ret = GP_ENOENT;

	if ((dir = opendir("/proc")) == NULL)
		return GP_EIO;
	while (ret != 0 && (d = readdir(dir)) != NULL) {
		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		if (gp_read_file(path, 4096, &text, &len) != 0)
			continue;
		/* pid (comm) state ppid: comm may hold anything but ')'. */
		paren = strrchr(text, ')');
		if (paren != NULL && sscanf(paren + 1, " %*c %ld", &ppid) ==
		    1 && ppid == (long)parent &&
		    pick((pid_t)atol(d->d_name), arg)) {
			*child = (pid_t)atol(d->d_name);
			ret = 0;
		}
		free(text);
		text = NULL;
	}
	closedir(dir);
	return ret;
}

/* find_child's pick: a pid namespace other than own's (a path). */
static int
other_pid_ns(pid_t child, void *own)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)child);
	return !same_file(path, own);
}

/*
 * The container's init: the child of the runtime's process rt in a pid
 * namespace other than rt's (a runtime's helper shares rt's). 0 with
 * *init, or GP_ENOENT while the runtime has not started it yet (or it is
 * still the runtime's own code, setting the container up: its exec has
 * not come).
 */
static int
container_init(pid_t rt, pid_t *init)
{
	char own[64];

	snprintf(own, sizeof(own), "/proc/%d/ns/pid", (int)rt);
	return find_child(rt, other_pid_ns, own, init);
}

/*
 * Maps the host id of KEY ("Uid:" or "Gid:", the effective one) of pid
 * through its user namespace's map (MAP: "uid_map" or "gid_map") into
 * the id the container knows. 0, or GP_ENOENT.
 */
static int
container_id(pid_t pid, const char *key, const char *map, unsigned *out)
{
	char path[64], *text = NULL, *line;
	unsigned long real, eff, inside, outside, count;
	size_t len;
	int ret = GP_ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (gp_read_file(path, 65536, &text, &len) != 0)
		return GP_ENOENT;
	line = strstr(text, key);
	if (line == NULL || sscanf(line + strlen(key), "%lu %lu", &real,
	    &eff) != 2) {
		free(text);
		return GP_ENOENT;
	}
	free(text);
	text = NULL;
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, map);
	if (gp_read_file(path, 65536, &text, &len) != 0)
		return GP_ENOENT;
	for (line = text; line != NULL && *line != '\0';) {
		if (sscanf(line, "%lu %lu %lu", &inside, &outside, &count) ==
		    3 && eff >= outside && eff - outside < count) {
			*out = (unsigned)(inside + (eff - outside));
			ret = 0;
			break;
		}
		if ((line = strchr(line, '\n')) != NULL)
			line++;
	}
	free(text);
	return ret;
}

/* The cgroup.procs of pid's cgroup (v2: its "0::" line), or GP_ENOENT. */
static int
container_cgroup(pid_t pid, char *out, size_t outlen)
{
	char path[64], *text = NULL, *line, *end;
	size_t len;
	int ret = GP_ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (gp_read_file(path, 65536, &text, &len) != 0)
		return GP_ENOENT;
	for (line = text; line != NULL && *line != '\0';) {
		if (strncmp(line, "0::/", 4) == 0) {
			if ((end = strchr(line, '\n')) != NULL)
				*end = '\0';
			if ((size_t)snprintf(out, outlen,
			    "/sys/fs/cgroup%s/cgroup.procs", line + 3) < outlen)
				ret = 0;
			break;
		}
		if ((line = strchr(line, '\n')) != NULL)
			line++;
	}
	free(text);
	return ret;
}

/*
 * Turns e (a container job's: its runtime's pid) into its container's:
 * the init's pid, user and cgroup. 0, or GP_ENOENT while the container
 * is not started yet.
 */
static int
enter_container(struct gp_exec_enter *e)
{
	char exe[64], rt_exe[64];
	pid_t init;
	unsigned uid, gid;
	int ret;

	if ((ret = container_init(e->pid, &init)) != 0)
		return ret;
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)init);
	snprintf(rt_exe, sizeof(rt_exe), "/proc/%d/exe", (int)e->pid);
	if (same_file(exe, rt_exe))
		return GP_ENOENT;
	if (container_id(init, "Uid:", "uid_map", &uid) != 0 ||
	    container_id(init, "Gid:", "gid_map", &gid) != 0)
		return GP_ENOENT;
	e->pid = init;
	e->uid = (uid_t)uid;
	e->gid = (gid_t)gid;
	e->userns = 1;
	if (container_cgroup(init, e->cgroup_procs,
	    sizeof(e->cgroup_procs)) != 0)
		e->cgroup_procs[0] = '\0';
	return 0;
}

/*
 * 1 when pid's namespaces may be opened (a zombie has none left); also
 * find_child's pick.
 */
static int
has_namespaces(pid_t pid, void *unused)
{
	char path[64];
	int fd;

	(void)unused;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	close(fd);
	return 1;
}

/*
 * A plain job of an agent that is not root has a user namespace of its
 * own, and its sandbox's init (e's pid) made itself non-dumpable (it is
 * a copy of the agent's memory): the agent, with no capability outside
 * the job's user namespace, may not open its /proc/PID/ns. A process
 * the job's command started (exec'd inside the job's namespaces: init's
 * children) may be opened: the stream enters through one. 0, or
 * GP_ENOENT while there is none (the command not started yet).
 */
static int
enter_through_child(struct gp_exec_enter *e)
{
	if (has_namespaces(e->pid, NULL))
		return 0;
	return find_child(e->pid, has_namespaces, NULL, &e->pid);
}

/*
 * A pseudo-terminal of the container's own devpts (its /dev/ptmx through
 * the init's root): a host one would have no name inside (tty(1): "not a
 * tty"). The peer is opened from the master (TIOCGPTPEER), never by a
 * path the container controls. 0, or -1 with errno.
 */
static int
container_pty(pid_t init, int *master, int *slave, const struct winsize *ws)
{
	char path[64];
	int m, s;

	snprintf(path, sizeof(path), "/proc/%d/root/dev/ptmx", (int)init);
	if ((m = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		return -1;
	if (unlockpt(m) != 0 || (s = ioctl(m, TIOCGPTPEER, O_RDWR |
	    O_NOCTTY)) < 0) {
		close(m);
		return -1;
	}
	if (ws != NULL)
		ioctl(s, TIOCSWINSZ, ws);
	*master = m;
	*slave = s;
	return 0;
}

/* envp: the job's environment, TERM set (or replaced) when term is. */
static char **
make_env(char **env, const char *term)
{
	size_t n = 0, i, k = 0;
	char **out;

	while (env != NULL && env[n] != NULL)
		n++;
	if ((out = calloc(n + 2, sizeof(*out))) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (term[0] == '\0' || strncmp(env[i], "TERM=", 5) != 0)
			out[k++] = env[i];
	if (term[0] != '\0') {
		static __thread char buf[80];

		snprintf(buf, sizeof(buf), "TERM=%s", term);
		out[k++] = buf;
	}
	return out;
}

/*
 * Whether job e has a namespace of kind ("mnt", "cgroup" ...) to enter.
 * An agent that is not root enters only those the job does not share
 * with it: it has no capability over its own (a job of its has its own
 * user, mount, pid, IPC, UTS and network namespaces, and the agent's
 * cgroup namespace, which it may not "enter" though it is in it). As
 * root, every one (entering one's own is nothing).
 */
static int
job_has_own(const struct gp_exec_enter *e, const char *kind)
{
	char mine[64], its[64];

	if (!e->userns || geteuid() == 0)
		return 1;
	snprintf(mine, sizeof(mine), "/proc/self/ns/%s", kind);
	snprintf(its, sizeof(its), "/proc/%d/ns/%s", (int)e->pid, kind);
	return !same_file(mine, its);
}

/*
 * Starts nsenter for the command what asks for, inside job e. Fills p's fds
 * and pid. 0, or GP_E* with err.
 */
static int
start_process(struct pump *p, const struct gp_exec_enter *e,
    const struct gp_stream_open *what, char *err, size_t errlen)
{
	static const char *kinds[] = {"mnt", "uts", "ipc", "net", "pid",
	    "cgroup"};
	static char *flags[] = {"--mount", "--uts", "--ipc", "--net", "--pid",
	    "--cgroup"};
	char target[24], uid[24], gid[24];
	char *argv[GP_STREAM_ARGV_MAX + 24], **envp = NULL;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
	int master = -1, slave = -1, k = 0, i, cg = -1;
	struct winsize ws = {.ws_row = (unsigned short)what->rows,
	    .ws_col = (unsigned short)what->cols};
	pid_t pid;

	snprintf(target, sizeof(target), "%d", (int)e->pid);
	snprintf(uid, sizeof(uid), "%u", (unsigned)e->uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned)e->gid);
	argv[k++] = "nsenter";
	argv[k++] = "--target";
	argv[k++] = target;
	if (e->userns)
		argv[k++] = "--user";
	for (i = 0; i < (int)GP_ARRAY_LEN(kinds); i++)
		if (job_has_own(e, kinds[i]))
			argv[k++] = flags[i];
	if (e->container)
		argv[k++] = "--root"; /* the image's, as the init's */
	argv[k++] = "--wd";
	if (e->userns && geteuid() != 0 && e->uid == geteuid() &&
	    e->gid == getegid()) {
		/*
		 * An agent that is not root: the job's user is the agent's,
		 * mapped to itself, and its namespace refuses setgroups.
		 * Keep the ids (nsenter would take uid 0, unmapped there);
		 * the exec drops the capabilities the namespace gave.
		 */
		argv[k++] = "--preserve-credentials";
	} else if (e->uid != (uid_t)-1) {
		argv[k++] = "--setuid";
		argv[k++] = uid;
		argv[k++] = "--setgid";
		argv[k++] = gid;
	}
	argv[k++] = "--";
	if (what->argc > 0)
		for (i = 0; i < what->argc; i++)
			argv[k++] = what->argv[i];
	else {
		/* A shell: the job's bash, else its sh. */
		argv[k++] = "/bin/sh";
		argv[k++] = "-c";
		argv[k++] = "if [ -x /bin/bash ]; then exec /bin/bash -i; "
			    "fi; exec /bin/sh -i";
	}
	argv[k] = NULL;
	if ((envp = make_env(e->env, what->term)) == NULL) {
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	if (e->cgroup_procs[0] != '\0')
		cg = open(e->cgroup_procs, O_WRONLY | O_CLOEXEC);
	if (what->tty && e->container) {
		if (container_pty(e->pid, &master, &slave,
		    ws.ws_row > 0 ? &ws : NULL) != 0) {
			snprintf(err, errlen, "the container's pty: %s",
			    strerror(errno));
			goto fail;
		}
	} else if (what->tty) {
		if (openpty(&master, &slave, NULL, NULL,
		    ws.ws_row > 0 ? &ws : NULL) != 0) {
			snprintf(err, errlen, "openpty: %s", strerror(errno));
			goto fail;
		}
		fcntl(master, F_SETFD, FD_CLOEXEC);
	} else if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
	    pipe2(errp, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		/* Only async-signal-safe calls here: the agent has threads. */
		static const int reset[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP,
		    SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGCHLD, SIGUSR1,
		    SIGUSR2, SIGALRM};
		sigset_t none;
		size_t r;

		/*
		 * Dispositions as a login's: an agent started in the
		 * background by a shell ignores SIGINT and SIGQUIT, and
		 * the ignoring would pass to the job's shell and commands
		 * (Ctrl-C would do nothing).
		 */
		for (r = 0; r < GP_ARRAY_LEN(reset); r++)
			signal(reset[r], SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Into the job's cgroup first: its limits cover us too. */
		if (cg >= 0 && write(cg, "0", 1) != 1)
			_exit(125);
		setsid();
		if (what->tty) {
			ioctl(slave, TIOCSCTTY, 0);
			dup2(slave, 0);
			dup2(slave, 1);
			dup2(slave, 2);
			if (slave > 2)
				close(slave);
		} else {
			dup2(in[0], 0);
			dup2(out[1], 1);
			dup2(errp[1], 2);
		}
		execve(NSENTER, argv, envp);
		_exit(127);
	}
	free(envp);
	if (cg >= 0)
		close(cg);
	p->pid = pid;
	/* Its exit wakes the pump (Linux 5.3); without, it is polled for. */
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p->pidfd >= 0)
		fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
	if (what->tty) {
		close(slave);
		p->to_fd = master;
		p->from_fd[0] = master;
		p->from_fd[1] = -1;
	} else {
		close(in[0]);
		close(out[1]);
		close(errp[1]);
		p->to_fd = in[1];
		p->from_fd[0] = out[0];
		p->from_fd[1] = errp[0];
		fcntl(p->from_fd[1], F_SETFL, O_NONBLOCK);
	}
	fcntl(p->to_fd, F_SETFL, O_NONBLOCK);
	fcntl(p->from_fd[0], F_SETFL, O_NONBLOCK);
	return 0;
fail:
	free(envp);
	if (cg >= 0)
		close(cg);
	for (i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	if (master >= 0)
		close(master);
	if (slave >= 0)
		close(slave);
	return GP_EIO;
}

/* ---- the pump ---- */

/* A frame from the client. 0, or GP_EINVAL: the stream is broken. */
static int
client_frame(struct pump *p, int type, const uint8_t *data, size_t len)
{
	struct winsize ws;

	switch (type) {
	case GP_FRAME_DATA:
		if (p->in_eof)
			return GP_EINVAL;
		/* Only read when in is empty: it always fits. */
		memcpy(p->in, data, len);
		p->in_start = 0;
		p->in_end = len;
		return 0;
	case GP_FRAME_EOF:
		p->in_eof = 1;
		return 0;
	case GP_FRAME_RESIZE:
		if (len != 4 || !p->tty)
			return 0;
		memset(&ws, 0, sizeof(ws));
		ws.ws_row = (unsigned short)(data[0] << 8 | data[1]);
		ws.ws_col = (unsigned short)(data[2] << 8 | data[3]);
		ioctl(p->to_fd, TIOCSWINSZ, &ws);
		return 0;
	case GP_FRAME_SIGNAL:
		/* The signals a person sends, to the command's group. */
		if (len == 1 && p->pid > 0 && !p->exited &&
		    (data[0] == SIGINT || data[0] == SIGTERM ||
		    data[0] == SIGHUP || data[0] == SIGQUIT ||
		    data[0] == SIGTSTP || data[0] == SIGCONT ||
		    data[0] == SIGKILL || data[0] == SIGWINCH ||
		    data[0] == SIGUSR1 || data[0] == SIGUSR2))
			kill(-p->pid, data[0]);
		return 0;
	default:
		return GP_EINVAL;
	}
}

/* Writes in to the job; after the client's EOF, closes its input. */
static void
write_in(struct pump *p)
{
	ssize_t n;

	while (p->in_start < p->in_end && p->to_fd >= 0) {
		n = write(p->to_fd, p->in + p->in_start,
		    p->in_end - p->in_start);
		if (n > 0) {
			p->in_start += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* The job closed its input: drop what is left. */
		p->in_start = p->in_end;
	}
	if (p->in_start == p->in_end && p->in_eof && p->to_fd >= 0) {
		if (p->kind == GP_STREAM_TCP)
			shutdown(p->to_fd, SHUT_WR);
		else if (!p->tty) {
			close(p->to_fd);
			p->to_fd = -1;
		}
		p->in_eof = 2;
	}
}

/* Reads the job's output i into an outgoing frame, if there is room. */
static void
read_from(struct pump *p, int i)
{
	uint8_t buf[LOCAL_BUF];
	ssize_t n;

	if (p->from_fd[i] < 0)
		return;
	if (sizeof(p->out) - (p->out_end - p->out_start) <
	    GP_FRAME_HEADER + sizeof(buf))
		return;
	n = read(p->from_fd[i], buf, sizeof(buf));
	if (n > 0) {
		queue_frame(p, i == 0 ? GP_FRAME_STDOUT : GP_FRAME_STDERR, buf,
		    (size_t)n);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* End (a pty says EIO when the last of the job's side closed). */
	if (p->kind == GP_STREAM_TCP) {
		queue_frame(p, GP_FRAME_EOF, NULL, 0);
		p->from_fd[i] = -2; /* the socket stays open for writing */
		return;
	}
	if (p->from_fd[i] != p->to_fd)
		close(p->from_fd[i]);
	p->from_fd[i] = -1;
}

static int
reap(struct pump *p, int block)
{
	int st;
	pid_t r;

	if (p->pid <= 0 || p->exited)
		return p->exited;
	r = waitpid(p->pid, &st, block ? 0 : WNOHANG);
	if (r == p->pid) {
		p->exited = 1;
		p->status = WIFEXITED(st) ? WEXITSTATUS(st) :
		    WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
	}
	return p->exited;
}

/*
 * The poll set of the pump: the coordinator's leg, the job's outputs
 * while a frame of them has room, its input while bytes wait for it,
 * the command's exit once its outputs are closed, a notice. Returns
 * the count; idx[] gets each slot's index in pf or -1.
 */
enum { PF_UP, PF_OUT, PF_ERR, PF_IN, PF_EXIT, PF_NOTICE, PF_N };

static nfds_t
pump_pollset(struct pump *p, struct pollfd *pf, int *idx, int out_open)
{
	int room = sizeof(p->out) - (p->out_end - p->out_start) >=
	    GP_FRAME_HEADER + LOCAL_BUF;
	nfds_t n = 0;
	int i;

	for (i = 0; i < PF_N; i++)
		idx[i] = -1;
	idx[PF_UP] = (int)n;
	pf[n].fd = p->upfd;
	pf[n++].events = (p->out_start < p->out_end ? POLLOUT : 0) |
	    (p->in_start == p->in_end ? POLLIN : 0);
	/* Output only while a frame of it fits: a slow client stops it. */
	for (i = 0; i < 2; i++)
		if (p->from_fd[i] >= 0 && room) {
			idx[PF_OUT + i] = (int)n;
			pf[n].fd = p->from_fd[i];
			pf[n++].events = POLLIN;
		}
	if (p->in_start < p->in_end && p->to_fd >= 0) {
		idx[PF_IN] = (int)n;
		pf[n].fd = p->to_fd;
		pf[n++].events = POLLOUT;
	}
	if (!out_open && p->kind != GP_STREAM_TCP && p->pidfd >= 0) {
		idx[PF_EXIT] = (int)n;
		pf[n].fd = p->pidfd;
		pf[n++].events = POLLIN;
	}
	if (p->notice_fd >= 0) {
		idx[PF_NOTICE] = (int)n;
		pf[n].fd = p->notice_fd;
		pf[n++].events = POLLIN;
	}
	for (i = 0; i < (int)n; i++)
		pf[i].revents = 0;
	return n;
}

static void
pump_loop(struct pump *p)
{
	struct pollfd pf[PF_N];
	int idx[PF_N], i, rc, out_open, timeout;
	nfds_t n;

	for (;;) {
		long got;
		uint8_t buf[LOCAL_BUF];
		size_t used;

		flush_out(p);
		if (p->broken)
			return;
		pthread_mutex_lock(&notice_lock);
		if (p->has_notice && queue_frame(p, GP_FRAME_NOTICE, p->notice,
		    strlen(p->notice)) == 0)
			p->has_notice = 0;
		rc = p->stop;
		pthread_mutex_unlock(&notice_lock);
		if (rc) {
			/* What the stream started ends with it (run_stream). */
			send_error(p, "%s", STOP_TEXT);
			p->broken = 1;
			return;
		}
		out_open = p->from_fd[0] >= 0 || p->from_fd[1] >= 0;
		if (p->kind == GP_STREAM_TCP) {
			if (p->from_fd[0] == -2 && p->in_eof == 2)
				return; /* both directions ended */
		} else if (!out_open && reap(p, 0))
			return;
		n = pump_pollset(p, pf, idx, out_open);
		/*
		 * No clock: every wake-up is an event. TLS may hold bytes the
		 * socket does not show (read them now if there is room); a
		 * command whose exit no pidfd tells is polled for.
		 */
		timeout = -1;
		if (gp_http_upgraded_pending(p->up) && p->in_start == p->in_end)
			timeout = 0;
		else if (!out_open && p->kind != GP_STREAM_TCP &&
		    p->pidfd < 0)
			timeout = 100;
		rc = poll(pf, n, timeout);
		if (rc < 0 && errno != EINTR)
			return;
		/*
		 * The coordinator's leg reset while the job's input is full
		 * (its socket is not read then): it would report the reset at
		 * once forever; the stream is over.
		 */
		if ((pf[idx[PF_UP]].revents & (POLLERR | POLLHUP)) != 0 &&
		    p->in_start < p->in_end) {
			p->broken = 1;
			return;
		}
		if (idx[PF_NOTICE] >= 0 && pf[idx[PF_NOTICE]].revents != 0) {
			uint64_t v;
			if (read(p->notice_fd, &v, sizeof(v)) < 0)
				(void)0; /* EAGAIN: another read took it */
		}
		if (idx[PF_IN] >= 0 && pf[idx[PF_IN]].revents != 0)
			write_in(p);
		for (i = 0; i < 2; i++)
			if (idx[PF_OUT + i] >= 0 &&
			    pf[idx[PF_OUT + i]].revents != 0)
				read_from(p, i);
		/* Frames from the client, one at a time, while in is empty. */
		while (p->in_start == p->in_end && !p->broken) {
			size_t want;

			if (p->rd.head_have < GP_FRAME_HEADER)
				want = GP_FRAME_HEADER - p->rd.head_have;
			else if (p->rd.have == p->rd.len)
				want = GP_FRAME_HEADER; /* the next frame */
			else
				want = p->rd.len - p->rd.have;
			if (want > sizeof(buf))
				want = sizeof(buf);
			got = gp_http_upgraded_recv(p->up, buf, want);
			if (got == GP_EAGAIN)
				break;
			if (got <= 0) {
				p->broken = 1;
				return;
			}
			rc = gp_frame_read(&p->rd, buf, (size_t)got, &used);
			if (rc < 0 || used != (size_t)got || (rc == 1 &&
			    client_frame(p, p->rd.type, p->rd.payload,
			    p->rd.len) != 0)) {
				p->broken = 1;
				return;
			}
			write_in(p);
		}
	}
}

/* Reads the OPEN frame (waits up to OPEN_WAIT_MS). */
static int
read_open(struct pump *p, struct gp_stream_open *open, char *err,
    size_t errlen)
{
	int64_t deadline = gp_mono_ms() + OPEN_WAIT_MS;
	struct pollfd pf = {.fd = p->upfd, .events = POLLIN};
	uint8_t b;
	size_t used;
	long got;
	int rc;

	for (;;) {
		/* Byte by byte: what follows OPEN belongs to the pump. */
		got = gp_http_upgraded_recv(p->up, &b, 1);
		if (got == GP_EAGAIN) {
			if (gp_mono_ms() >= deadline) {
				snprintf(err, errlen, "no open frame");
				return GP_ETIMEDOUT;
			}
			poll(&pf, 1, 100);
			continue;
		}
		if (got <= 0) {
			snprintf(err, errlen, "the client left");
			return GP_EIO;
		}
		rc = gp_frame_read(&p->rd, &b, 1, &used);
		if (rc < 0 || (rc == 1 && p->rd.type != GP_FRAME_OPEN)) {
			snprintf(err, errlen, "a stream starts with OPEN");
			return GP_EINVAL;
		}
		if (rc == 1)
			return gp_stream_open_decode(p->rd.payload, p->rd.len,
			    open, err, errlen);
	}
}

static void
run_stream(struct gp_agent *ag, const struct gp_stream_request *r)
{
	struct gp_http_client *http = NULL;
	struct gp_http_response resp;
	struct gp_stream_open open;
	struct gp_exec_enter e;
	struct live_stream live, **lp;
	struct pump *p;
	char path[96], header[96], err[512];
	int have_enter = 0, ret;

	memset(&open, 0, sizeof(open));
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return;
	p->to_fd = p->from_fd[0] = p->from_fd[1] = -1;
	p->pidfd = -1;
	p->notice_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	gp_frame_reader_init(&p->rd);
	http = gp_http_client_new(ag->url, ag->token, ag->ca_file);
	if (http == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/agent/stream?id=%lld",
	    (long long)r->id);
	snprintf(header, sizeof(header), "X-Gpupool-Stream-Secret: %s",
	    r->secret);
	ret = gp_http_upgrade(http, path, header, 10000, &p->up, &resp);
	if (ret != 0) {
		gp_http_error_text(&resp, err, sizeof(err));
		gp_warn("stream id=%lld: cannot dial the coordinator: %s",
		    (long long)r->id, err);
		gp_http_response_fini(&resp);
		goto out;
	}
	gp_http_response_fini(&resp);
	p->upfd = gp_http_upgraded_fd(p->up);
	if (read_open(p, &open, err, sizeof(err)) != 0) {
		send_error(p, "%s", err);
		goto out;
	}
	if (stopping(NULL)) {
		send_error(p, "%s", STOP_TEXT);
		goto out;
	}
	p->kind = open.kind;
	p->tty = open.tty;
	/*
	 * The coordinator counts a job running from its assignment: its
	 * init may still be starting here. Wait for it, a while.
	 */
	for (ret = 0; ; ret++) {
		if (gp_executor_enter_info(ag->executor, &r->job, &e) == 0) {
			if (e.container ? enter_container(&e) == 0 :
			    !e.userns || geteuid() == 0 ||
			    enter_through_child(&e) == 0)
				break;
			gp_exec_enter_fini(&e);
		}
		if (ret >= ENTER_WAIT_MS / 50) {
			send_error(p, "%s", "the job's attempt does not run "
					    "here");
			goto out;
		}
		if (stopping(NULL)) {
			send_error(p, "%s", STOP_TEXT);
			goto out;
		}
		usleep(50 * 1000);
	}
	have_enter = 1;
	if (open.kind == GP_STREAM_TCP) {
		p->to_fd = p->from_fd[0] = connect_in_job(e.pid, open.port,
		    err, sizeof(err));
		if (p->to_fd < 0) {
			send_error(p, "%s", err);
			goto out;
		}
		fcntl(p->to_fd, F_SETFL, O_NONBLOCK);
	} else if (start_process(p, &e, &open, err, sizeof(err)) != 0) {
		send_error(p, "%s", err);
		goto out;
	}
	gp_info("stream started id=%lld job=%lld attempt=%lld kind=%s "
	    "tty=%d port=%d", (long long)r->id, (long long)r->job.job_id,
	    (long long)r->job.attempt, gp_stream_kind_name(open.kind),
	    open.tty, open.port);
	queue_frame(p, GP_FRAME_READY, NULL, 0);
	live.p = p;
	live.id = r->job;
	pthread_mutex_lock(&notice_lock);
	live.next = live_streams;
	live_streams = &live;
	p->stop = streams_stopping; /* (a stop just before: seen at once) */
	pthread_mutex_unlock(&notice_lock);
	pump_loop(p);
	pthread_mutex_lock(&notice_lock);
	for (lp = &live_streams; *lp != NULL; lp = &(*lp)->next)
		if (*lp == &live) {
			*lp = live.next;
			break;
		}
	pthread_mutex_unlock(&notice_lock);
	if (p->kind != GP_STREAM_TCP) {
		if (p->broken && !p->exited && p->pid > 0) {
			/* The client left: end what it started. */
			kill(-p->pid, SIGHUP);
			kill(-p->pid, SIGKILL);
		}
		reap(p, 1);
		if (!p->broken) {
			int32_t code = p->status;
			uint8_t be[4] = {(uint8_t)(code >> 24),
			    (uint8_t)(code >> 16), (uint8_t)(code >> 8),
			    (uint8_t)code};
			queue_frame(p, GP_FRAME_EXIT, be, 4);
		}
	} else if (!p->broken) {
		uint8_t zero[4] = {0, 0, 0, 0};
		queue_frame(p, GP_FRAME_EXIT, zero, 4);
	}
	flush_out_wait(p, 5000);
	gp_info("stream ended id=%lld job=%lld status=%d client_left=%d",
	    (long long)r->id, (long long)r->job.job_id, p->status, p->broken);
out:
	if (p->to_fd >= 0)
		close(p->to_fd);
	for (ret = 0; ret < 2; ret++)
		if (p->from_fd[ret] >= 0 && p->from_fd[ret] != p->to_fd)
			close(p->from_fd[ret]);
	if (p->pidfd >= 0)
		close(p->pidfd);
	if (p->notice_fd >= 0)
		close(p->notice_fd);
	if (have_enter)
		gp_exec_enter_fini(&e);
	gp_stream_open_fini(&open);
	gp_http_upgraded_free(p->up);
	gp_http_client_free(http);
	free(p);
}

void
gp_attach_reclaim_notice(void *arg, const struct gp_attempt_id *id,
    const char *reason, int64_t grace_s)
{
	struct live_stream *l;

	(void)arg;
	pthread_mutex_lock(&notice_lock);
	for (l = live_streams; l != NULL; l = l->next) {
		if (l->id.job_id != id->job_id || l->id.attempt != id->attempt)
			continue;
		snprintf(l->p->notice, sizeof(l->p->notice),
		    "\r\ngpupool: the owner takes this machine back (%s): job "
		    "%lld ends in %lld s\r\n", reason, (long long)id->job_id,
		    (long long)grace_s);
		l->p->has_notice = 1;
		if (l->p->notice_fd >= 0 && write(l->p->notice_fd,
		    &(uint64_t){1}, sizeof(uint64_t)) < 0)
			gp_debug("stream notice: %s", strerror(errno));
	}
	pthread_mutex_unlock(&notice_lock);
}

static void *
attach_main(void *arg)
{
	struct attach *a = arg;

	/* Named for ps and for tests that count an idle stream's wake-ups. */
	pthread_setname_np(pthread_self(), "gp-stream");
	run_stream(a->ag, &a->req);
	free(a);
	pthread_mutex_lock(&notice_lock);
	streams_running--;
	pthread_cond_broadcast(&streams_done);
	pthread_mutex_unlock(&notice_lock);
	return NULL;
}

void
gp_attach_stream(struct gp_agent *ag, const struct gp_stream_request *r)
{
	struct attach *a = malloc(sizeof(*a));
	pthread_attr_t attr;
	pthread_t t;

	if (a == NULL)
		return;
	a->ag = ag;
	a->req = *r;
	pthread_once(&streams_once, streams_init);
	pthread_mutex_lock(&notice_lock);
	if (streams_stopping) {
		pthread_mutex_unlock(&notice_lock);
		gp_info("stream id=%lld: not started, the agent stops",
		    (long long)r->id);
		free(a);
		return;
	}
	streams_running++;
	pthread_mutex_unlock(&notice_lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (pthread_create(&t, &attr, attach_main, a) != 0) {
		gp_error("stream id=%lld: cannot start a thread",
		    (long long)r->id);
		free(a);
		pthread_mutex_lock(&notice_lock);
		streams_running--;
		pthread_cond_broadcast(&streams_done);
		pthread_mutex_unlock(&notice_lock);
	}
	pthread_attr_destroy(&attr);
}

void
gp_attach_notice_all(const char *text)
{
	struct live_stream *l;

	pthread_mutex_lock(&notice_lock);
	for (l = live_streams; l != NULL; l = l->next) {
		snprintf(l->p->notice, sizeof(l->p->notice), "%s", text);
		l->p->has_notice = 1;
		if (l->p->notice_fd >= 0 && write(l->p->notice_fd,
		    &(uint64_t){1}, sizeof(uint64_t)) < 0)
			gp_debug("stream notice: %s", strerror(errno));
	}
	pthread_mutex_unlock(&notice_lock);
}

int
gp_attach_stop(int64_t wait_ms)
{
	int64_t deadline = gp_mono_ms() + wait_ms;
	struct live_stream *l;
	int left;

	pthread_once(&streams_once, streams_init);
	pthread_mutex_lock(&notice_lock);
	streams_stopping = 1;
	for (l = live_streams; l != NULL; l = l->next) {
		l->p->stop = 1;
		if (l->p->notice_fd >= 0 && write(l->p->notice_fd,
		    &(uint64_t){1}, sizeof(uint64_t)) < 0)
			gp_debug("stream stop: %s", strerror(errno));
	}
	while (streams_running > 0 && gp_mono_ms() < deadline)
		gp_cond_wait_ms(&streams_done, &notice_lock,
		    deadline - gp_mono_ms());
	left = streams_running;
	pthread_mutex_unlock(&notice_lock);
	if (left > 0)
		gp_warn("%d stream(s) still ending after %lld ms", left,
		    (long long)wait_ms);
	return left;
}
