/*
 * spawner.c: the helper that clones jobs' init processes (spawner.h).
 * The agent and the helper share one SOCK_SEQPACKET pair: a request is a
 * fixed struct and its descriptors (SCM_RIGHTS), the answer a fixed
 * struct and, on success, the child's pidfd. The helper is a fork of the
 * agent made before any thread, so it may call anything; it allocates
 * nothing per request, and every clone copies only its own small image.
 */
#include "agent/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/sandbox.h"
#include "gp.h"
#include "log.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SPAWNER_VERSION 1

struct request {
	uint32_t version;
	int32_t kind;
	uint64_t flags;		/* clone3 flags, CLONE_PARENT added */
	uint64_t arena;		/* the address to map the memfd at */
	uint64_t arena_len;
	int32_t nfds;		/* descriptors after the memfd */
	int32_t pad;
};

struct answer {
	uint32_t version;
	int32_t err;		/* 0 or an errno */
	int32_t pid;
	int32_t pad;
};

/* The clone3 argument, version 0 (Linux 5.3). */
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

struct gp_spawner {
	pthread_mutex_t lock;
	int fd;			/* the agent's end */
	pid_t pid;
	int gone;		/* under lock: the helper stopped answering */
};

/* Sends a struct and up to GP_SPAWNER_FDS_MAX + 1 descriptors. */
static int
send_with_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (GP_SPAWNER_FDS_MAX + 1))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {(void *)buf, len};
	struct msghdr msg;
	struct cmsghdr *cmsg;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > 0) {
		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)nfds);
	}
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -1;
}

/*
 * Receives exactly len bytes and the descriptors that came with them
 * (close-on-exec). OUT: fds, *nfds. Returns 1, 0 at end of file, -1.
 */
static int
recv_with_fds(int sock, void *buf, size_t len, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (GP_SPAWNER_FDS_MAX + 1))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {buf, len};
	struct msghdr msg;
	struct cmsghdr *cmsg;
	ssize_t n;
	int got = 0, i, bad = 0;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = control.buf;
	msg.msg_controllen = sizeof(control.buf);
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return (int)n;
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
	    cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		int k;

		if (cmsg->cmsg_level != SOL_SOCKET ||
		    cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int),
			    sizeof(int));
			if (got < GP_SPAWNER_FDS_MAX + 1)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	if (n != (ssize_t)len || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		bad = 1;
	if (bad) {
		for (i = 0; i < got; i++)
			close(fds[i]);
		errno = EPROTO;
		return -1;
	}
	*nfds = got;
	return 1;
}

/* Helper side: one request, one clone, one answer. */
static void
serve_one(int sock, const struct request *rq, int *fds, int nfds)
{
	struct answer an = {SPAWNER_VERSION, 0, 0, 0};
	struct clone3_args args;
	void *map = MAP_FAILED;
	int pidfd = -1, i;
	long ret;

	if (rq->version != SPAWNER_VERSION || nfds < 1 ||
	    rq->nfds != nfds - 1 || rq->arena_len == 0) {
		an.err = EPROTO;
		goto answer;
	}
	map = mmap((void *)(uintptr_t)rq->arena, (size_t)rq->arena_len,
	    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fds[0],
	    0);
	if (map == MAP_FAILED) {
		an.err = errno;
		goto answer;
	}
	/* A kernel before 4.17 takes the address as a hint only. */
	if ((uintptr_t)map != rq->arena) {
		an.err = EEXIST;
		goto answer;
	}
	memset(&args, 0, sizeof(args));
	args.flags = rq->flags | CLONE_PARENT | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)&pidfd;
	/* With CLONE_PARENT the kernel takes our own exit signal. */
	ret = syscall(SYS_clone3, &args, sizeof(args));
	if (ret == 0)
		gp_sandbox_child_main(rq->kind, map, fds + 1, nfds - 1);
	if (ret < 0)
		an.err = errno;
	else
		an.pid = (int32_t)ret;
answer:
	if (map != MAP_FAILED)
		munmap(map, (size_t)rq->arena_len);
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	if (send_with_fds(sock, &an, sizeof(an), &pidfd,
	    pidfd >= 0 ? 1 : 0) != 0)
		_exit(1);
	if (pidfd >= 0)
		close(pidfd);
}

static __attribute__((noreturn)) void
serve(int sock, pid_t agent)
{
	struct request rq;
	int fds[GP_SPAWNER_FDS_MAX + 1], nfds, r;

	/* Die with the agent, even if it was already gone. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != agent)
		_exit(0);
	prctl(PR_SET_NAME, "gpupool-spawn", 0, 0, 0);
	for (;;) {
		r = recv_with_fds(sock, &rq, sizeof(rq), fds, &nfds);
		if (r == 0)
			_exit(0);
		if (r < 0) {
			if (errno == EPROTO)
				continue;
			_exit(1);
		}
		serve_one(sock, &rq, fds, nfds);
	}
}

struct gp_spawner *
gp_spawner_start(char *err, size_t errlen)
{
	struct gp_spawner *sp;
	int sv[2];
	pid_t agent = getpid(), pid;

	if ((sp = calloc(1, sizeof(*sp))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		free(sp);
		return NULL;
	}
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		free(sp);
		return NULL;
	}
	if (pid == 0) {
		/* Keep stdio (for a crash's last words) and the socket. */
		close(sv[0]);
		if (sv[1] > 3)
			close_range(3, (unsigned int)sv[1] - 1, 0);
		close_range((unsigned int)sv[1] + 1, ~0U, 0);
		serve(sv[1], agent);
	}
	close(sv[1]);
	pthread_mutex_init(&sp->lock, NULL);
	sp->fd = sv[0];
	sp->pid = pid;
	return sp;
}

void
gp_spawner_free(struct gp_spawner *sp)
{
	if (sp == NULL)
		return;
	close(sp->fd);		/* the helper reads end of file and exits */
	while (waitpid(sp->pid, NULL, 0) < 0 && errno == EINTR)
		;
	pthread_mutex_destroy(&sp->lock);
	free(sp);
}

pid_t
gp_spawner_pid(const struct gp_spawner *sp)
{
	return sp->pid;
}

int
gp_spawner_clone(struct gp_spawner *sp, int kind, uint64_t flags, int memfd,
    void *arena, size_t arena_len, const int *fds, int nfds, pid_t *pid,
    int *pidfd)
{
	struct request rq;
	struct answer an;
	int all[GP_SPAWNER_FDS_MAX + 1], got[GP_SPAWNER_FDS_MAX + 1];
	int ngot = 0, i, r, ret = GP_EIO;

	if (nfds < 0 || nfds > GP_SPAWNER_FDS_MAX) {
		errno = EINVAL;
		return GP_EINVAL;
	}
	memset(&rq, 0, sizeof(rq));
	rq.version = SPAWNER_VERSION;
	rq.kind = kind;
	rq.flags = flags;
	rq.arena = (uint64_t)(uintptr_t)arena;
	rq.arena_len = arena_len;
	rq.nfds = nfds;
	all[0] = memfd;
	for (i = 0; i < nfds; i++)
		all[i + 1] = fds[i];
	pthread_mutex_lock(&sp->lock);
	if (sp->gone) {
		errno = EPIPE;
		goto out;
	}
	if (send_with_fds(sp->fd, &rq, sizeof(rq), all, nfds + 1) != 0)
		goto gone;
	r = recv_with_fds(sp->fd, &an, sizeof(an), got, &ngot);
	if (r <= 0 || an.version != SPAWNER_VERSION) {
		for (i = 0; r > 0 && i < ngot; i++)
			close(got[i]);
		goto gone;
	}
	if (an.err != 0 || ngot != 1) {
		for (i = 0; i < ngot; i++)
			close(got[i]);
		errno = an.err != 0 ? an.err : EPROTO;
		goto out;
	}
	*pid = (pid_t)an.pid;
	*pidfd = got[0];
	ret = 0;
	goto out;
gone:
	/* Said once: jobs are cloned by the agent itself from now on. */
	gp_warn("spawn helper gone pid=%d: jobs are cloned from the agent",
	    (int)sp->pid);
	sp->gone = 1;
	errno = EPIPE;
out:
	pthread_mutex_unlock(&sp->lock);
	return ret;
}
