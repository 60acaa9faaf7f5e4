/*
 * bench_netns.c: what a job's network adds to its start (issue 14): the
 * time of gp_net_job_open when it makes a new one (a namespace, a veth
 * pair, addresses, a route: N opens held at once) and when it reuses an
 * ended job's (N open-close pairs), and of gp_net_job_close, for one
 * policy. Needs root (it makes
 * and removes a real nftables table and real veth pairs; run it in a
 * network namespace of its own to leave the host alone:
 * `unshare -n build/bench/bench_netns 500 internet`).
 *
 * Usage: bench_netns [N] [none|internet|lan]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int
main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200, i, nfresh;
	enum gp_net_policy policy = GP_NET_INTERNET;
	struct gp_net *net;
	struct gp_net_job j;
	double *open_ms, *close_ms, *fresh_ms, t;
	struct gp_net_job *held;
	char err[1024];

	if (argc > 2 && gp_net_policy_parse(argv[2], &policy) != 0) {
		fprintf(stderr, "usage: bench_netns [N] [none|internet|lan]\n");
		return 2;
	}
	if (n < 1 || geteuid() != 0) {
		fprintf(stderr, "bench_netns: needs root and N >= 1\n");
		return 2;
	}
	open_ms = calloc((size_t)n, sizeof(double));
	close_ms = calloc((size_t)n, sizeof(double));
	fresh_ms = calloc((size_t)n, sizeof(double));
	held = calloc((size_t)n, sizeof(*held));
	if (open_ms == NULL || close_ms == NULL || fresh_ms == NULL ||
	    held == NULL)
		return 1;
	if (gp_net_new(&net, policy, 0, "/bench", err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_netns: %s\n", err);
		return 1;
	}
	for (i = 0; i < n && i < 200; i++) {
		t = now_ms();
		if (gp_net_job_open(net, policy, NULL, &held[i], err,
		    sizeof(err)) != 0) {
			fprintf(stderr, "bench_netns: open %d: %s\n", i, err);
			gp_net_free(net);
			return 1;
		}
		fresh_ms[i] = now_ms() - t;
	}
	nfresh = i;
	for (i = 0; i < nfresh; i++)
		gp_net_job_close(net, &held[i]);
	for (i = 0; i < n; i++) {
		t = now_ms();
		if (gp_net_job_open(net, policy, NULL, &j, err,
		    sizeof(err)) != 0) {
			fprintf(stderr, "bench_netns: open %d: %s\n", i, err);
			gp_net_free(net);
			return 1;
		}
		open_ms[i] = now_ms() - t;
		t = now_ms();
		gp_net_job_close(net, &j);
		close_ms[i] = now_ms() - t;
	}
	gp_net_free(net);
	qsort(fresh_ms, (size_t)nfresh, sizeof(double), cmp);
	qsort(open_ms, (size_t)n, sizeof(double), cmp);
	qsort(close_ms, (size_t)n, sizeof(double), cmp);
	printf("policy=%s new: n=%d open_p50_ms=%.3f open_p99_ms=%.3f; "
	    "reused: n=%d open_p50_ms=%.3f open_p99_ms=%.3f "
	    "close_p50_ms=%.3f close_p99_ms=%.3f\n",
	    gp_net_policy_name(policy), nfresh, pct(fresh_ms, nfresh, 0.5),
	    pct(fresh_ms, nfresh, 0.99), n, pct(open_ms, n, 0.5),
	    pct(open_ms, n, 0.99), pct(close_ms, n, 0.5),
	    pct(close_ms, n, 0.99));
	free(fresh_ms);
	free(held);
	free(open_ms);
	free(close_ms);
	return 0;
}
