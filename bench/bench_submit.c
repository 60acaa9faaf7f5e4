/*
 * bench_submit.c: how fast the coordinator acknowledges submissions. N
 * client threads (one HTTP client each) POST /v1/jobs in a loop for a
 * time or a job count; only 201 answers count. Prints "metric value unit"
 * lines. Usage: bench_submit [--url URL] [--token TOKEN] [--clients N]
 * [--seconds S | --jobs N] [--gpus G]; GPUPOOL_URL and GPUPOOL_TOKEN are
 * read from the environment when the flags are absent.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "http_client.h"
#include "util.h"

struct options {
	const char *url;
	const char *token;
	int clients;
	int seconds;
	long jobs; /* 0: run for seconds */
	int gpus;
};

struct worker {
	pthread_t thread;
	const struct options *opt;
	int64_t *lat_us; /* acknowledged submissions' latencies */
	size_t nlat, caplat;
	long errors;
	char first_error[256];
};

static atomic_long claimed;   /* jobs handed out, --jobs mode */
static int64_t deadline_us;   /* --seconds mode */

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static double
percentile_ms(const int64_t *sorted, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0.0;
	i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	return (double)sorted[i] / 1000.0;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	const struct options *opt = w->opt;
	struct gp_http_client *c;
	struct gp_http_response resp;
	char body[256];
	int64_t t0, *p;
	int len;

	c = gp_http_client_new(opt->url, opt->token, NULL);
	if (c == NULL) {
		w->errors++;
		return NULL;
	}
	len = snprintf(body, sizeof(body),
	    "{\"command\":[\"true\"],\"name\":\"bench-submit\",\"gpus\":%d}",
	    opt->gpus);
	for (;;) {
		if (opt->jobs > 0 ? atomic_fetch_add(&claimed, 1) >= opt->jobs :
				    gp_mono_us() >= deadline_us)
			break;
		t0 = gp_mono_us();
		if (gp_http_request(c, "POST", "/v1/jobs", body, (size_t)len,
			NULL, 10000, &resp) == 0 && resp.status == 201) {
			if (w->nlat == w->caplat) {
				size_t cap = w->caplat ? w->caplat * 2 : 4096;
				p = realloc(w->lat_us, cap * sizeof(*p));
				if (p == NULL)
					break;
				w->lat_us = p;
				w->caplat = cap;
			}
			w->lat_us[w->nlat++] = gp_mono_us() - t0;
		} else {
			if (w->errors++ == 0)
				gp_http_error_text(&resp, w->first_error,
				    sizeof(w->first_error));
		}
		gp_http_response_fini(&resp);
	}
	gp_http_client_free(c);
	return NULL;
}

static void
usage(void)
{
	fprintf(stderr, "usage: bench_submit [--url URL] [--token TOKEN] "
			"[--clients N] [--seconds S | --jobs N] [--gpus G]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct options opt = {getenv("GPUPOOL_URL"), getenv("GPUPOOL_TOKEN"),
	    16, 10, 0, 0};
	struct worker *w;
	int64_t start, elapsed, *all;
	size_t total = 0, k;
	long errors = 0;
	int i;

	for (i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v == NULL)
			usage();
		if (strcmp(argv[i], "--url") == 0)
			opt.url = v;
		else if (strcmp(argv[i], "--token") == 0)
			opt.token = v;
		else if (strcmp(argv[i], "--clients") == 0)
			opt.clients = atoi(v);
		else if (strcmp(argv[i], "--seconds") == 0)
			opt.seconds = atoi(v);
		else if (strcmp(argv[i], "--jobs") == 0)
			opt.jobs = atol(v);
		else if (strcmp(argv[i], "--gpus") == 0)
			opt.gpus = atoi(v);
		else
			usage();
		i++;
	}
	if (opt.url == NULL)
		opt.url = "http://127.0.0.1:7070";
	if (opt.token == NULL || opt.clients < 1 || opt.seconds < 1 ||
	    opt.jobs < 0 || opt.gpus < 0) {
		fprintf(stderr, "bench_submit: need a token (--token or "
				"GPUPOOL_TOKEN) and positive counts\n");
		return 2;
	}
	gp_http_global_init();
	w = calloc((size_t)opt.clients, sizeof(*w));
	if (w == NULL)
		return 1;
	start = gp_mono_us();
	deadline_us = start + (int64_t)opt.seconds * 1000000;
	for (i = 0; i < opt.clients; i++) {
		w[i].opt = &opt;
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "bench_submit: pthread_create failed\n");
			return 1;
		}
	}
	for (i = 0; i < opt.clients; i++) {
		pthread_join(w[i].thread, NULL);
		total += w[i].nlat;
		errors += w[i].errors;
	}
	elapsed = gp_mono_us() - start;
	all = malloc((total + 1) * sizeof(*all));
	if (all == NULL)
		return 1;
	for (i = 0, k = 0; i < opt.clients; i++) {
		if (w[i].nlat > 0)
			memcpy(all + k, w[i].lat_us,
			    w[i].nlat * sizeof(*all));
		k += w[i].nlat;
		free(w[i].lat_us);
	}
	for (i = 0; i < opt.clients && errors > 0; i++)
		if (w[i].errors > 0) {
			fprintf(stderr, "bench_submit: an error: %s\n",
			    w[i].first_error);
			break;
		}
	qsort(all, total, sizeof(*all), cmp_i64);
	printf("submit_clients %d threads\n", opt.clients);
	printf("submit_gpus_per_job %d gpus\n", opt.gpus);
	printf("submit_acknowledged %zu jobs\n", total);
	printf("submit_elapsed %.3f s\n", (double)elapsed / 1e6);
	printf("submit_rate %.1f jobs/s\n",
	    elapsed > 0 ? (double)total * 1e6 / (double)elapsed : 0.0);
	printf("submit_latency_p50 %.3f ms\n", percentile_ms(all, total, 50));
	printf("submit_latency_p99 %.3f ms\n", percentile_ms(all, total, 99));
	printf("submit_latency_max %.3f ms\n",
	    percentile_ms(all, total, 100));
	printf("submit_errors %ld count\n", errors);
	free(all);
	free(w);
	return total > 0 ? 0 : 1;
}
