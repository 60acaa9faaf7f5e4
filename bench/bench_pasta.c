/*
 * bench_pasta.c: what a job's network adds to its start when the agent is
 * not root (issue 14, netns_pasta.c): gp_net_job_open and
 * gp_net_job_attach for a namespace made as the job's own clone makes it
 * (a new user and network namespace), that is the rules written in it,
 * pasta started and ready; and gp_net_job_close (pasta stopped). Run it
 * as a user that is not root, where /dev/net/tun can be opened
 * (bench/net_pasta.sh makes such a place).
 *
 * Usage: bench_pasta [N] [internet|lan]
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/netns.h"
#include "gp.h"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
pct(const double *v, int n, double p)
{
	int i = (int)(p * (n - 1) + 0.5);

	return v[i < n ? i : n - 1];
}

/* A process in a new user and network namespace, as a job's init. */
static pid_t
job_like(int *release)
{
	int ready[2], hold[2];
	pid_t pid;
	char c;

	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(hold, O_CLOEXEC) != 0)
		return -1;
	if ((pid = fork()) == 0) {
		close(ready[0]);
		close(hold[1]);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
			_exit(1);
		(void)!write(ready[1], "r", 1);
		(void)!read(hold[0], &c, 1);
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	if (pid < 0 || read(ready[0], &c, 1) != 1) {
		close(ready[0]);
		close(hold[1]);
		return -1;
	}
	close(ready[0]);
	*release = hold[1];
	return pid;
}

int
main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 50, i, release;
	enum gp_net_policy policy = GP_NET_INTERNET;
	double *open_ms, *close_ms, t;
	struct gp_net *net;
	struct gp_net_job j;
	char err[1024];
	pid_t pid;

	if (argc > 2 && gp_net_policy_parse(argv[2], &policy) != 0) {
		fprintf(stderr, "usage: bench_pasta [N] [internet|lan]\n");
		return 2;
	}
	if (n < 1 || geteuid() == 0) {
		fprintf(stderr, "bench_pasta: needs a user that is not root "
		    "and N >= 1\n");
		return 2;
	}
	open_ms = calloc((size_t)n, sizeof(double));
	close_ms = calloc((size_t)n, sizeof(double));
	if (open_ms == NULL || close_ms == NULL)
		return 1;
	if (gp_net_new(&net, policy, 0, argc > 3 ? argv[3] : "/tmp", err,
	    sizeof(err)) != 0 || gp_net_offer(net) != policy) {
		fprintf(stderr, "bench_pasta: %s\n", gp_net_offer_why(net) ?
		    gp_net_offer_why(net) : err);
		return 1;
	}
	for (i = 0; i < n; i++) {
		if ((pid = job_like(&release)) < 0) {
			fprintf(stderr, "bench_pasta: cannot make a user "
			    "namespace\n");
			return 1;
		}
		t = now_ms();
		if (gp_net_job_open(net, policy, NULL, &j, err,
		    sizeof(err)) != 0 ||
		    gp_net_job_attach(net, &j, pid, err, sizeof(err)) != 0) {
			fprintf(stderr, "bench_pasta: start %d: %s\n", i, err);
			return 1;
		}
		open_ms[i] = now_ms() - t;
		close(release);
		waitpid(pid, NULL, 0);
		t = now_ms();
		gp_net_job_close(net, &j);
		close_ms[i] = now_ms() - t;
	}
	gp_net_free(net);
	qsort(open_ms, (size_t)n, sizeof(double), cmp);
	qsort(close_ms, (size_t)n, sizeof(double), cmp);
	printf("policy=%s pasta: n=%d start_p50_ms=%.2f start_p99_ms=%.2f "
	    "close_p50_ms=%.2f close_p99_ms=%.2f\n",
	    gp_net_policy_name(policy), n, pct(open_ms, n, 0.5),
	    pct(open_ms, n, 0.99), pct(close_ms, n, 0.5),
	    pct(close_ms, n, 0.99));
	free(open_ms);
	free(close_ms);
	return 0;
}
