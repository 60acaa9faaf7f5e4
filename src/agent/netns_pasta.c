/*
 * netns_pasta.c: the job networks of an agent that is not root: pasta
 * for egress, nftables inside the job's namespace for the policy (see
 * netns_pasta.h, and docs/agent.md for what this can and cannot enforce
 * and how it compares with the root agent's veth pairs).
 *
 * Each job's pasta is a child of the executor thread, run in the
 * foreground with PR_SET_PDEATHSIG: an agent killed with SIGKILL takes
 * them along (nothing to sweep), and its jobs' namespaces go with their
 * processes. Readiness: pasta writes its pid file once the namespace is
 * configured.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/capability.h>

#include "agent/netns_pasta.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#define PASTA_BIN "/usr/bin/pasta"
/* What jobs name as their resolver: pasta forwards it to the host's. */
#define PASTA_DNS "169.254.53.53"
#define PASTA_JOBS 512
/* How long pasta may take to set a namespace up. */
#define PASTA_READY_MS 10000
/* How long init may take to let the agent into its namespaces. */
#define INIT_REACHABLE_MS 5000

struct pasta_job {
	int id;			/* 0: free */
	pid_t pid;		/* pasta */
	int dev_fd;		/* /proc/net/dev of the job's namespace */
};

struct gp_pasta {
	int64_t rate_bps;
	char work_dir[4096];
	char resolv_conf[4200];
	pthread_mutex_t lock;	/* jobs[], for gp_pasta_job_bytes */
	struct pasta_job jobs[PASTA_JOBS];
	int next_id;
};

int
gp_pasta_rules(struct gp_buf *b, enum gp_net_policy policy,
    const char *host4, const char *host6)
{
	/*
	 * Drops, in the job's own namespace, what leaves it for where the
	 * policy does not go. Loopback is the job's own; the host's
	 * addresses never (pasta would connect to them from the host).
	 */
	gp_buf_printf(b,
	    "table inet gpupool_job {\n"
	    "  set host4 { type ipv4_addr; %s%s%s }\n"
	    "  set host6 { type ipv6_addr; %s%s%s }\n"
	    "  set not_internet { type ipv4_addr; flags interval;\n"
	    "    elements = { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10,\n"
	    "      127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12,\n"
	    "      192.168.0.0/16, 224.0.0.0/3 } }\n"
	    "  set not_lan { type ipv4_addr; flags interval;\n"
	    "    elements = { 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16,\n"
	    "      224.0.0.0/3 } }\n"
	    "  set ok6 { type ipv6_addr; flags interval;\n"
	    "    elements = { 2000::/3%s } }\n"
	    "  chain output { type filter hook output priority -1;\n"
	    "    oifname \"lo\" accept\n"
	    "    meta l4proto != { tcp, udp } drop\n"
	    "    ip daddr " PASTA_DNS " udp dport 53 accept\n"
	    "    ip daddr @host4 drop\n"
	    "    ip daddr @%s drop\n"
	    "    ip6 daddr @host6 drop\n"
	    "    ip6 daddr ::ffff:0.0.0.0/96 drop\n"
	    "    ip6 daddr != @ok6 drop\n"
	    "  }\n"
	    "}\n",
	    host4[0] ? "elements = { " : "", host4, host4[0] ? " };" : "",
	    host6[0] ? "elements = { " : "", host6, host6[0] ? " };" : "",
	    policy == GP_NET_LAN ? ", fc00::/7" : "",
	    policy == GP_NET_LAN ? "not_lan" : "not_internet");
	return b->data != NULL ? 0 : GP_ENOMEM;
}

/* 1 when item is one of the comma-separated list's. */
static int
listed(const char *list, const char *item)
{
	size_t n = strlen(item);
	const char *p;

	for (p = list; p != NULL && (p = strstr(p, item)) != NULL; p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ',' ||
		    p[n] == '\0'))
			return 1;
	return 0;
}

/*
 * The host's own addresses, comma-separated, per family, into v4 and v6
 * (empty buffers). 0, or GP_ENOMEM or GP_EIO.
 */
static int
host_addresses(struct gp_buf *v4, struct gp_buf *v6)
{
	struct ifaddrs *ifa, *i;
	char text[INET6_ADDRSTRLEN];
	struct gp_buf *b;
	const void *a;

	if (getifaddrs(&ifa) != 0)
		return GP_EIO;
	for (i = ifa; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			b = v4;
			a = &((struct sockaddr_in *)(void *)i->ifa_addr)->
			    sin_addr;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			b = v6;
			a = &((struct sockaddr_in6 *)(void *)i->ifa_addr)->
			    sin6_addr;
		} else
			continue;
		if (inet_ntop(i->ifa_addr->sa_family, a, text,
		    sizeof(text)) == NULL || listed(b->data, text))
			continue;
		if (gp_buf_printf(b, "%s%s", b->data != NULL &&
		    b->data[0] != '\0' ? ", " : "", text) < 0) {
			freeifaddrs(ifa);
			return GP_ENOMEM;
		}
	}
	freeifaddrs(ifa);
	return 0;
}

/*
 * Keeps CAP_NET_ADMIN (held in the namespace just entered) across the
 * exec that follows: the job's user namespace maps no root, so nft and
 * tc run as the agent's user and would lose it. Async-signal-safe.
 */
static int
keep_net_admin(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		return -1;
	d[CAP_NET_ADMIN / 32].inheritable |= 1u << (CAP_NET_ADMIN % 32);
	if (syscall(SYS_capset, &h, d) != 0)
		return -1;
	return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0,
	    0);
}

/* What run_in's child enters. */
struct run_in_ns {
	pid_t target;
	char user[64], net[64], uid_map[64], gid_map[64];
};

/* In the child: run_in's namespaces, CAP_NET_ADMIN kept over the exec. */
static int
enter_run_in(void *arg)
{
	struct run_in_ns *r = arg;
	int u, n, fd;

	if (r->target > 0) {
		/* The user namespace first: it owns the other. */
		if ((u = open(r->user, O_RDONLY | O_CLOEXEC)) < 0 ||
		    (n = open(r->net, O_RDONLY | O_CLOEXEC)) < 0 ||
		    setns(u, CLONE_NEWUSER) != 0 ||
		    setns(n, CLONE_NEWNET) != 0)
			return 125;
	} else {
		/* The agent is not dumpable (main.c): our maps. */
		if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 ||
		    unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
			return 124;
		if ((fd = open("/proc/self/setgroups", O_WRONLY)) < 0 ||
		    write(fd, "deny", 4) != 4 || close(fd) != 0 ||
		    (fd = open("/proc/self/uid_map", O_WRONLY)) < 0 ||
		    write(fd, r->uid_map, strlen(r->uid_map)) < 0 ||
		    close(fd) != 0 ||
		    (fd = open("/proc/self/gid_map", O_WRONLY)) < 0 ||
		    write(fd, r->gid_map, strlen(r->gid_map)) < 0 ||
		    close(fd) != 0)
			return 124;
	}
	return keep_net_admin() != 0 ? 123 : 0;
}

/*
 * Runs argv with stdin_text on its standard input, in the user and
 * network namespaces of process target (0: new ones of its own, for the
 * check at start). Its output goes to out. 0 when it exits 0.
 */
static int
run_in(pid_t target, char *const argv[], const char *stdin_text,
    char *out, size_t outlen)
{
	struct run_in_ns r = {.target = target};
	int ret, code;

	snprintf(r.user, sizeof(r.user), "/proc/%d/ns/user", (int)target);
	snprintf(r.net, sizeof(r.net), "/proc/%d/ns/net", (int)target);
	snprintf(r.uid_map, sizeof(r.uid_map), "%u %u 1\n",
	    (unsigned)geteuid(), (unsigned)geteuid());
	snprintf(r.gid_map, sizeof(r.gid_map), "%u %u 1\n",
	    (unsigned)getegid(), (unsigned)getegid());
	ret = gp_net_run_entered(argv, stdin_text, enter_run_in, &r, out,
	    outlen, &code);
	if (ret != 0 && out != NULL && outlen > 0 && out[0] == '\0' &&
	    code >= 0)
		snprintf(out, outlen, "%s",
		    code == 123 ? "cannot keep CAP_NET_ADMIN over exec" :
		    code == 125 ? "cannot enter the job's namespaces" :
		    code == 124 ? "cannot make a user and network namespace" :
		    code == 127 ? "not installed" : "failed");
	return ret;
}

/* Writes the resolv.conf jobs get: pasta's forwarder, the host's search. */
static int
write_resolv_conf(struct gp_pasta *p, char *why, size_t whylen)
{
	char *text = NULL, *line, *save = NULL;
	struct gp_buf conf;
	size_t len;
	int fd, ret = 0;

	memset(&conf, 0, sizeof(conf));
	gp_buf_printf(&conf, "# gpupool agent: DNS through pasta "
	    "(docs/agent.md)\nnameserver " PASTA_DNS "\n");
	if (gp_read_file("/etc/resolv.conf", 65536, &text, &len) == 0)
		for (line = strtok_r(text, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			char word[16];

			if (sscanf(line, " %15s", word) == 1 &&
			    (strcmp(word, "search") == 0 ||
			    strcmp(word, "domain") == 0 ||
			    strcmp(word, "options") == 0))
				gp_buf_printf(&conf, "%s\n", line);
		}
	free(text);
	snprintf(p->resolv_conf, sizeof(p->resolv_conf), "%s/resolv.conf",
	    p->work_dir);
	fd = open(p->resolv_conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644);
	if (conf.data == NULL || fd < 0 ||
	    gp_write_all(fd, conf.data, strlen(conf.data)) != 0 ||
	    fchmod(fd, 0644) != 0) {
		snprintf(why, whylen, "%s: %s", p->resolv_conf,
		    strerror(errno));
		ret = GP_EIO;
	}
	if (fd >= 0)
		close(fd);
	gp_buf_free(&conf);
	return ret;
}

int
gp_pasta_new(struct gp_pasta **out, int64_t rate_bps, const char *work_dir,
    char *why, size_t whylen)
{
	char *nft[] = {"nft", "-f", "-", NULL}, text[512];
	struct gp_buf rules;
	struct gp_pasta *p;
	int fd, ret;

	if (access(PASTA_BIN, X_OK) != 0) {
		snprintf(why, whylen, "%s is not installed (Debian's passt)",
		    PASTA_BIN);
		return GP_ENOENT;
	}
	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) < 0) {
		snprintf(why, whylen, "pasta needs /dev/net/tun: %s (Debian "
		    "makes it 0666)", strerror(errno));
		return GP_EPERM;
	}
	close(fd);
	/* The rules of a job, in a namespace of the agent's own: a check. */
	memset(&rules, 0, sizeof(rules));
	if (gp_pasta_rules(&rules, GP_NET_LAN, "192.0.2.1", "2001:db8::1") !=
	    0) {
		snprintf(why, whylen, "out of memory");
		return GP_ENOMEM;
	}
	ret = run_in(0, nft, rules.data, text, sizeof(text));
	gp_buf_free(&rules);
	if (ret != 0) {
		snprintf(why, whylen, "nftables in a user namespace of the "
		    "agent's: %.300s (without it no policy can be enforced)",
		    text);
		return GP_EIO;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(why, whylen, "out of memory");
		return GP_ENOMEM;
	}
	p->rate_bps = rate_bps;
	snprintf(p->work_dir, sizeof(p->work_dir), "%s/net", work_dir);
	if (gp_mkdir_p(p->work_dir, 0700) != 0) {
		snprintf(why, whylen, "%s: %s", p->work_dir, strerror(errno));
		free(p);
		return GP_EIO;
	}
	chmod(p->work_dir, 0711);
	if ((ret = write_resolv_conf(p, why, whylen)) != 0) {
		free(p);
		return ret;
	}
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

const char *
gp_pasta_resolv_conf(const struct gp_pasta *p)
{
	return p->resolv_conf;
}

static void
job_stop(struct gp_pasta *p, struct pasta_job *j)
{
	char path[4200];

	/* Nothing of pasta's to save: the tap goes with the namespace. */
	if (j->pid > 0) {
		kill(j->pid, SIGKILL);
		while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	snprintf(path, sizeof(path), "%s/pasta-%d.pid", p->work_dir, j->id);
	unlink(path);
	snprintf(path, sizeof(path), "%s/pasta-%d.log", p->work_dir, j->id);
	unlink(path);
	if (j->dev_fd >= 0)
		close(j->dev_fd);
	j->pid = 0;
	j->dev_fd = -1;
	j->id = 0;
}

void
gp_pasta_free(struct gp_pasta *p)
{
	int i;

	if (p == NULL)
		return;
	for (i = 0; i < PASTA_JOBS; i++)
		if (p->jobs[i].id != 0)
			job_stop(p, &p->jobs[i]);
	unlink(p->resolv_conf);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/*
 * Opens /proc/net/dev as seen from the namespace of process target: the
 * descriptor reads that namespace's counters for as long as it is open.
 */
static int
open_dev_stats(pid_t target)
{
	char user[64], net[64];
	int sv[2], fd = -1, status;
	pid_t pid;

	snprintf(user, sizeof(user), "/proc/%d/ns/user", (int)target);
	snprintf(net, sizeof(net), "/proc/%d/ns/net", (int)target);
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	if ((pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		char cbuf[CMSG_SPACE(sizeof(int))], byte = 0;
		struct iovec iov = {.iov_base = &byte, .iov_len = 1};
		struct msghdr m;
		struct cmsghdr *c;
		int u, n, d;

		if ((u = open(user, O_RDONLY | O_CLOEXEC)) < 0 ||
		    (n = open(net, O_RDONLY | O_CLOEXEC)) < 0 ||
		    setns(u, CLONE_NEWUSER) != 0 ||
		    setns(n, CLONE_NEWNET) != 0 ||
		    (d = open("/proc/self/net/dev", O_RDONLY | O_CLOEXEC)) < 0)
			_exit(1);
		memset(&m, 0, sizeof(m));
		memset(cbuf, 0, sizeof(cbuf));
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &d, sizeof(int));
		_exit(sendmsg(sv[1], &m, 0) == 1 ? 0 : 1);
	}
	close(sv[1]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		char cbuf[CMSG_SPACE(sizeof(int))], byte;
		struct iovec iov = {.iov_base = &byte, .iov_len = 1};
		struct msghdr m;
		struct cmsghdr *c;

		memset(&m, 0, sizeof(m));
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		if (recvmsg(sv[0], &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) == 1 &&
		    (c = CMSG_FIRSTHDR(&m)) != NULL &&
		    c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	}
	close(sv[0]);
	return fd;
}

/*
 * Waits until the agent's user may open target's namespaces. A fresh
 * init is a clone of the agent, which is not dumpable (main.c), so
 * /proc/<init>/ns/ refuses the agent's user (EACCES) until init has made
 * itself dumpable, first thing (sandbox.c): pasta and nft, started at
 * once, failed now and then ("cannot enter the job's namespaces"). 0, or
 * GP_EIO with err set (init gone, or refused after INIT_REACHABLE_MS).
 */
static int
init_reachable(pid_t target, char *err, size_t errlen)
{
	const struct timespec ms = {0, 1000000};
	int64_t end = gp_mono_ms() + INIT_REACHABLE_MS;
	char path[64];
	int fd, tries = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)target);
	while ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		if ((errno != EACCES && errno != EPERM) ||
		    gp_mono_ms() >= end) {
			snprintf(err, errlen, "the job's namespaces: %s: %s",
			    path, strerror(errno));
			return GP_EIO;
		}
		nanosleep(&ms, NULL);
		tries++;
	}
	close(fd);
	if (tries > 0)
		gp_debug("job network: init pid=%d let the agent in after "
		    "%d ms", (int)target, tries);
	return 0;
}

/* Starts pasta for the namespace of target (pasta_ready waits for it). */
static int
pasta_spawn(struct gp_pasta *p, int id, pid_t target, pid_t *out,
    char *err, size_t errlen)
{
	char pidfile[4200], logfile[4200], target_text[16];
	char *argv[32];
	int argc = 0, fd;
	pid_t pid;

	snprintf(pidfile, sizeof(pidfile), "%s/pasta-%d.pid", p->work_dir, id);
	snprintf(logfile, sizeof(logfile), "%s/pasta-%d.log", p->work_dir, id);
	snprintf(target_text, sizeof(target_text), "%d", (int)target);
	unlink(pidfile);
	argv[argc++] = PASTA_BIN;
	argv[argc++] = "--foreground";
	argv[argc++] = "--quiet";
	argv[argc++] = "--config-net";
	/* The gateway is the gateway, never the host's loopback. */
	argv[argc++] = "--no-map-gw";
	/* No port of the host into the job, none of the job's out. */
	argv[argc++] = "--tcp-ports";
	argv[argc++] = "none";
	argv[argc++] = "--udp-ports";
	argv[argc++] = "none";
	argv[argc++] = "--tcp-ns";
	argv[argc++] = "none";
	argv[argc++] = "--udp-ns";
	argv[argc++] = "none";
	argv[argc++] = "--ns-ifname";
	argv[argc++] = "eth0";
	argv[argc++] = "--dns-forward";
	argv[argc++] = PASTA_DNS;
	argv[argc++] = "--pid";
	argv[argc++] = pidfile;
	argv[argc++] = target_text;
	argv[argc] = NULL;
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return GP_EIO;
	}
	if (pid == 0) {
		sigset_t none;
		int null;

		/* Dies with the executor thread, so with the agent. */
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/*
		 * The agent ignores SIGPIPE, which an exec keeps: pasta
		 * takes an ignored SIGPIPE for a failure to set its own.
		 */
		signal(SIGPIPE, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		if ((null = open("/dev/null", O_RDWR)) < 0 ||
		    (fd = open(logfile, O_WRONLY | O_CREAT | O_TRUNC,
		    0600)) < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
		    dup2(fd, 2) < 0)
			_exit(126);
		execv(PASTA_BIN, argv);
		_exit(127);
	}
	*out = pid;
	return 0;
}

/*
 * Waits for pasta id (*pid) to write its pid file: the namespace is set.
 * A pasta that exited is reaped (*pid 0).
 */
static int
pasta_ready(struct gp_pasta *p, int id, pid_t *pid, char *err,
    size_t errlen)
{
	char pidfile[4200], logfile[4200], *log = NULL;
	int64_t deadline;
	struct stat st;
	size_t len;
	int status;

	snprintf(pidfile, sizeof(pidfile), "%s/pasta-%d.pid", p->work_dir, id);
	snprintf(logfile, sizeof(logfile), "%s/pasta-%d.log", p->work_dir, id);
	deadline = gp_mono_ms() + PASTA_READY_MS;
	for (;;) {
		struct timespec ms = {0, 500 * 1000};

		if (stat(pidfile, &st) == 0 && st.st_size > 0)
			break;
		if (waitpid(*pid, &status, WNOHANG) == *pid) {
			*pid = 0;
			if (gp_read_file(logfile, 2048, &log, &len) != 0)
				log = NULL;
			snprintf(err, errlen, "pasta exited %d: %.400s",
			    WIFEXITED(status) ? WEXITSTATUS(status) : -1,
			    log != NULL ? log : "");
			free(log);
			unlink(logfile);
			return GP_EIO;
		}
		if (gp_mono_ms() > deadline) {
			snprintf(err, errlen, "pasta not ready in %d ms",
			    PASTA_READY_MS);
			unlink(logfile);
			return GP_EIO;
		}
		nanosleep(&ms, NULL);
	}
	unlink(logfile);
	return 0;
}

int
gp_pasta_job_start(struct gp_pasta *p, enum gp_net_policy policy, pid_t pid,
    int *id, char *err, size_t errlen)
{
	char *nft[] = {"nft", "-f", "-", NULL}, out[512];
	char rate[32], burst[32];
	char *tc[] = {"tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
	    "rate", rate, "burst", burst, "latency", "50ms", NULL};
	struct pasta_job j = {.dev_fd = -1};
	struct gp_buf rules, v4, v6;
	int i, slot = -1, ret;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < PASTA_JOBS && slot < 0; i++)
		if (p->jobs[i].id == 0)
			slot = i;
	if (slot >= 0) {
		if (++p->next_id <= 0)
			p->next_id = 1;
		j.id = p->next_id;
		p->jobs[slot].id = -1;	/* taken, not ready */
	}
	pthread_mutex_unlock(&p->lock);
	if (slot < 0) {
		snprintf(err, errlen, "more than %d jobs with pasta",
		    PASTA_JOBS);
		return GP_ECONFLICT;
	}
	/*
	 * pasta sets itself up (most of the time this takes) while the
	 * rules are written: the job sends nothing before both are done
	 * (its init waits for the go byte).
	 */
	if ((ret = init_reachable(pid, err, errlen)) != 0 ||
	    (ret = pasta_spawn(p, j.id, pid, &j.pid, err, errlen)) != 0)
		goto fail;
	memset(&rules, 0, sizeof(rules));
	memset(&v4, 0, sizeof(v4));
	memset(&v6, 0, sizeof(v6));
	if ((ret = host_addresses(&v4, &v6)) != 0 ||
	    (ret = gp_pasta_rules(&rules, policy, v4.data ? v4.data : "",
	    v6.data ? v6.data : "")) != 0) {
		snprintf(err, errlen, "the host's addresses: %s",
		    gp_strerror(ret));
		gp_buf_free(&v4);
		gp_buf_free(&v6);
		gp_buf_free(&rules);
		goto fail;
	}
	gp_buf_free(&v4);
	gp_buf_free(&v6);
	ret = run_in(pid, nft, rules.data, out, sizeof(out));
	gp_buf_free(&rules);
	if (ret != 0) {
		snprintf(err, errlen, "nft in the job's namespace: %.400s",
		    out);
		goto fail;
	}
	if ((j.dev_fd = open_dev_stats(pid)) < 0)
		gp_warn("job network: no byte counts for pasta id=%d", j.id);
	if ((ret = pasta_ready(p, j.id, &j.pid, err, errlen)) != 0)
		goto fail;
	/*
	 * What the job sends (its tap's egress). What it receives cannot
	 * be capped in a namespace without ingress policing (docs).
	 */
	if (p->rate_bps > 0) {
		/*
		 * 10 ms of traffic, and never less than two of the tap's
		 * 65520-byte frames: a bigger one would never pass.
		 */
		int64_t bytes = p->rate_bps / 8 / 100 < 131072 ? 131072 :
		    p->rate_bps / 8 / 100;

		snprintf(rate, sizeof(rate), "%lldbit", (long long)p->rate_bps);
		snprintf(burst, sizeof(burst), "%lld", (long long)bytes);
		if ((ret = run_in(pid, tc, NULL, out, sizeof(out))) != 0) {
			snprintf(err, errlen, "tc in the job's namespace: "
			    "%.400s", out);
			goto fail;
		}
	}
	pthread_mutex_lock(&p->lock);
	p->jobs[slot] = j;
	pthread_mutex_unlock(&p->lock);
	*id = j.id;
	return 0;
fail:
	job_stop(p, &j);
	pthread_mutex_lock(&p->lock);
	p->jobs[slot].id = 0;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* eth0's counters in a /proc/net/dev text. */
static void
parse_dev(const char *text, int64_t *sent, int64_t *received)
{
	const char *l = strstr(text, " eth0:");
	long long v[16];
	int i, n = 0;

	if (l == NULL && strncmp(text, "eth0:", 5) == 0)
		l = text - 1;
	if (l == NULL)
		return;
	l += 6;
	for (i = 0; i < 16; i++) {
		char *end;

		v[i] = strtoll(l, &end, 10);
		if (end == l)
			break;
		l = end;
		n++;
	}
	if (n >= 9) {
		*received = v[0];
		*sent = v[8];
	}
}

void
gp_pasta_job_bytes(struct gp_pasta *p, int id, int64_t *sent,
    int64_t *received)
{
	char text[8192];
	ssize_t got;
	int i;

	*sent = *received = 0;
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < PASTA_JOBS; i++)
		if (p->jobs[i].id == id && id > 0 && p->jobs[i].dev_fd >= 0) {
			got = pread(p->jobs[i].dev_fd, text, sizeof(text) - 1,
			    0);
			if (got > 0) {
				text[got] = '\0';
				parse_dev(text, sent, received);
			}
			break;
		}
	pthread_mutex_unlock(&p->lock);
}

void
gp_pasta_job_stop(struct gp_pasta *p, int id)
{
	struct pasta_job j;
	int i;

	if (id <= 0)
		return;
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < PASTA_JOBS; i++)
		if (p->jobs[i].id == id)
			break;
	if (i == PASTA_JOBS) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	j = p->jobs[i];
	p->jobs[i].id = 0;
	p->jobs[i].dev_fd = -1;
	p->jobs[i].pid = 0;
	pthread_mutex_unlock(&p->lock);
	job_stop(p, &j);
}
