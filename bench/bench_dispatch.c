/*
 * bench_dispatch.c: how long a submitted job waits before an agent has
 * it. Simulates A agents in one process: with an admin token it creates
 * a provider token, registers A nodes of G fake GPUs, heartbeats them,
 * and keeps one long poll per node; each assignment is reported started
 * and finished (exit 0) at once, so GPUs free up. Submitters post 1-GPU
 * `true` jobs at R jobs/s for D seconds (or --jobs N as fast as they can)
 * and note when each 201 arrived; the dispatch latency of a job is the
 * time from its 201 to its assignment (0 when the assignment came
 * first). Prints "metric value unit" lines.
 *
 * Usage: bench_dispatch [--url URL] [--token ADMIN] [--agents A]
 * [--gpus-per-node G] [--rate R] [--seconds D] [--jobs N]
 * [--submitters K] [--drain-s S] [--coord-pid PID]
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gp.h"
#include "http_client.h"
#include "util.h"

struct options {
	const char *url;
	const char *token;
	int agents;
	int gpus_per_node;
	double rate;
	int seconds;
	long jobs; /* > 0: submit this many as fast as possible */
	int submitters;
	int drain_s;
	long coord_pid;
};

/* One job's times (monotonic µs), in an open-addressing table. */
struct job_times {
	int64_t job_id; /* 0: empty slot */
	int64_t t_ack;
	int64_t t_recv;
};

struct node {
	int64_t id;
	pthread_t poller;
	pthread_mutex_t lock;
	/* Attempts given to this node and not yet reported finished. */
	struct {
		int64_t job_id, attempt;
	} running[64];
	int nrunning;
};

static struct options opt = {NULL, NULL, 100, 8, 100.0, 10, 0, 0, 30, 0};
static char provider_token[128];
static struct node *nodes;
static int heartbeat_ms = 1000;
static atomic_int stopping;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct job_times *table;
static size_t table_size;
static atomic_long submitted, acked, dispatched, submit_errors,
    agent_errors, finished_ok;
static atomic_long claimed;

static struct job_times *
slot(int64_t job_id)
{
	size_t h = (size_t)((uint64_t)job_id * 11400714819323198485ULL) &
	    (table_size - 1);

	while (table[h].job_id != 0 && table[h].job_id != job_id)
		h = (h + 1) & (table_size - 1);
	table[h].job_id = job_id;
	return &table[h];
}

static void
note(int64_t job_id, int64_t t, int recv)
{
	struct job_times *jt;

	pthread_mutex_lock(&table_lock);
	jt = slot(job_id);
	if (recv && jt->t_recv == 0)
		jt->t_recv = t;
	else if (!recv)
		jt->t_ack = t;
	pthread_mutex_unlock(&table_lock);
}

static json_t *
request_json(struct gp_http_client *c, const char *method, const char *path,
    json_t *body, long timeout_ms, long *status)
{
	struct gp_http_response resp;
	char *text = NULL;
	json_t *out = NULL;

	if (body != NULL)
		text = json_dumps(body, JSON_COMPACT);
	*status = 0;
	if (gp_http_request(c, method, path, text, text ? strlen(text) : 0,
		NULL, timeout_ms, &resp) == 0) {
		*status = resp.status;
		out = json_loadb(resp.body, resp.body_len, 0, NULL);
	}
	gp_http_response_fini(&resp);
	free(text);
	return out;
}

static void
report(struct gp_http_client *c, struct node *n, int64_t job_id,
    int64_t attempt)
{
	char path[128];
	json_t *body, *r;
	long status;
	int i, tries;

	snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/started",
	    (long long)job_id, (long long)attempt);
	body = json_pack("{s:I, s:i}", "node_id", (json_int_t)n->id, "pid",
	    1);
	r = request_json(c, "POST", path, body, 10000, &status);
	json_decref(r);
	json_decref(body);
	if (status != 200 && status != 409)
		atomic_fetch_add(&agent_errors, 1);
	snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/finished",
	    (long long)job_id, (long long)attempt);
	body = json_pack("{s:I, s:i, s:i, s:s, s:s}", "node_id",
	    (json_int_t)n->id, "exit_code", 0, "signal", 0, "reason", "exited",
	    "message", "");
	for (tries = 0; tries < 5; tries++) {
		r = request_json(c, "POST", path, body, 10000, &status);
		json_decref(r);
		if (status == 200 || status == 409)
			break;
		atomic_fetch_add(&agent_errors, 1);
		usleep(100000);
	}
	json_decref(body);
	if (status == 200)
		atomic_fetch_add(&finished_ok, 1);
	pthread_mutex_lock(&n->lock);
	for (i = 0; i < n->nrunning; i++)
		if (n->running[i].job_id == job_id &&
		    n->running[i].attempt == attempt) {
			n->running[i] = n->running[--n->nrunning];
			break;
		}
	pthread_mutex_unlock(&n->lock);
}

static void *
poller_main(void *arg)
{
	struct node *n = arg;
	struct gp_http_client *c;
	char path[128];
	json_t *r, *a;
	long status;
	size_t i;

	c = gp_http_client_new(opt.url, provider_token, NULL);
	if (c == NULL)
		return NULL;
	snprintf(path, sizeof(path), "/v1/agent/poll?node_id=%lld&wait_ms=25000",
	    (long long)n->id);
	while (!atomic_load(&stopping)) {
		r = request_json(c, "GET", path, NULL, 35000, &status);
		if (status != 200) {
			atomic_fetch_add(&agent_errors, 1);
			json_decref(r);
			usleep(200000);
			continue;
		}
		json_array_foreach(json_object_get(r, "assignments"), i, a)
		{
			int64_t t = gp_mono_us();
			int64_t id = json_integer_value(
			    json_object_get(a, "job_id"));
			int64_t attempt = json_integer_value(
			    json_object_get(a, "attempt"));

			note(id, t, 1);
			atomic_fetch_add(&dispatched, 1);
			pthread_mutex_lock(&n->lock);
			if (n->nrunning < 64) {
				n->running[n->nrunning].job_id = id;
				n->running[n->nrunning++].attempt = attempt;
			}
			pthread_mutex_unlock(&n->lock);
			report(c, n, id, attempt);
		}
		json_decref(r);
	}
	gp_http_client_free(c);
	return NULL;
}

static void *
heartbeat_main(void *arg)
{
	long slice = (long)(intptr_t)arg, nslices = 4;
	struct gp_http_client *c;
	json_t *body, *running, *r;
	long status;
	int i, k;

	c = gp_http_client_new(opt.url, provider_token, NULL);
	if (c == NULL)
		return NULL;
	while (!atomic_load(&stopping)) {
		int64_t t0 = gp_mono_ms(), left;

		for (i = (int)slice; i < opt.agents; i += (int)nslices) {
			struct node *n = &nodes[i];

			running = json_array();
			pthread_mutex_lock(&n->lock);
			for (k = 0; k < n->nrunning; k++)
				json_array_append_new(running,
				    json_pack("{s:I, s:I}", "job_id",
					(json_int_t)n->running[k].job_id,
					"attempt",
					(json_int_t)n->running[k].attempt));
			pthread_mutex_unlock(&n->lock);
			body = json_pack("{s:I, s:o}", "node_id",
			    (json_int_t)n->id, "running", running);
			r = request_json(c, "POST", "/v1/agent/heartbeat",
			    body, 10000, &status);
			if (status != 200)
				atomic_fetch_add(&agent_errors, 1);
			json_decref(r);
			json_decref(body);
		}
		left = heartbeat_ms - (gp_mono_ms() - t0);
		if (left > 0)
			usleep((useconds_t)left * 1000);
	}
	gp_http_client_free(c);
	return NULL;
}

static void *
submitter_main(void *arg)
{
	long index = (long)(intptr_t)arg, i;
	struct gp_http_client *c;
	struct gp_http_response resp;
	static const char body[] =
	    "{\"command\":[\"true\"],\"name\":\"bench-dispatch\",\"gpus\":1}";
	int64_t start = gp_mono_us(), due;
	double period_us = opt.jobs > 0 ? 0 : 1e6 * opt.submitters / opt.rate;
	long count = opt.jobs > 0 ? opt.jobs :
	    (long)(opt.rate * opt.seconds / opt.submitters);

	c = gp_http_client_new(opt.url, opt.token, NULL);
	if (c == NULL)
		return NULL;
	/* Spread the submitters' schedules over one period. */
	start += (int64_t)(period_us * (double)index / opt.submitters);
	for (i = 0; i < count; i++) {
		if (opt.jobs > 0 && atomic_fetch_add(&claimed, 1) >= opt.jobs)
			break;
		due = start + (int64_t)(period_us * (double)i);
		for (;;) {
			int64_t wait = due - gp_mono_us();
			if (wait <= 0)
				break;
			usleep((useconds_t)wait);
		}
		atomic_fetch_add(&submitted, 1);
		if (gp_http_request(c, "POST", "/v1/jobs", body,
			sizeof(body) - 1, NULL, 10000, &resp) == 0 &&
		    resp.status == 201) {
			int64_t t = gp_mono_us();
			json_t *r = json_loadb(resp.body, resp.body_len, 0,
			    NULL);
			int64_t id = json_integer_value(json_object_get(r,
			    "id"));
			if (id > 0) {
				note(id, t, 0);
				atomic_fetch_add(&acked, 1);
			}
			json_decref(r);
		} else {
			char err[256];
			gp_http_error_text(&resp, err, sizeof(err));
			if (atomic_fetch_add(&submit_errors, 1) == 0)
				fprintf(stderr, "bench_dispatch: submit: %s\n",
				    err);
		}
		gp_http_response_fini(&resp);
	}
	gp_http_client_free(c);
	return NULL;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static double
pct_ms(const int64_t *v, size_t n, double p)
{
	if (n == 0)
		return 0.0;
	return (double)v[(size_t)(p / 100.0 * (double)(n - 1) + 0.5)] / 1000.0;
}

static long
rss_kib(long pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Creates the provider token and registers the nodes. */
static int
setup(void)
{
	struct gp_http_client *admin, *prov;
	json_t *body, *r, *gpus;
	char name[64];
	long status;
	int i, g;

	admin = gp_http_client_new(opt.url, opt.token, NULL);
	if (admin == NULL)
		return -1;
	snprintf(name, sizeof(name), "bench-provider-%d", (int)getpid());
	body = json_pack("{s:s, s:s}", "role", "provider", "name", name);
	r = request_json(admin, "POST", "/v1/tokens", body, 10000, &status);
	json_decref(body);
	if (status != 201 || !json_is_string(json_object_get(r, "token"))) {
		fprintf(stderr, "bench_dispatch: cannot create a provider "
				"token (HTTP %ld)\n", status);
		json_decref(r);
		gp_http_client_free(admin);
		return -1;
	}
	gp_strlcpy(provider_token,
	    json_string_value(json_object_get(r, "token")),
	    sizeof(provider_token));
	json_decref(r);
	gp_http_client_free(admin);

	prov = gp_http_client_new(opt.url, provider_token, NULL);
	if (prov == NULL)
		return -1;
	for (i = 0; i < opt.agents; i++) {
		gpus = json_array();
		for (g = 0; g < opt.gpus_per_node; g++) {
			char uuid[64];
			snprintf(uuid, sizeof(uuid), "GPU-bench-%d-%d-%d",
			    (int)getpid(), i, g);
			json_array_append_new(gpus,
			    json_pack("{s:i, s:s, s:s, s:i}", "index", g,
				"uuid", uuid, "model", "Bench GPU", "mem_mib",
				81920));
		}
		snprintf(name, sizeof(name), "bench-%d-%d", (int)getpid(), i);
		body = json_pack("{s:i, s:s, s:i, s:i, s:o, s:[]}", "protocol",
		    GP_PROTOCOL_VERSION, "name", name, "cpus", 4 *
		    opt.gpus_per_node + 4, "mem_mib", 1 << 20, "gpus", gpus,
		    "running");
		r = request_json(prov, "POST", "/v1/agent/register", body,
		    10000, &status);
		json_decref(body);
		if (status != 200 && status != 201) {
			fprintf(stderr, "bench_dispatch: register: HTTP %ld\n",
			    status);
			json_decref(r);
			gp_http_client_free(prov);
			return -1;
		}
		nodes[i].id = json_integer_value(json_object_get(r, "node_id"));
		if (json_is_integer(json_object_get(r, "heartbeat_ms")))
			heartbeat_ms = (int)json_integer_value(
			    json_object_get(r, "heartbeat_ms"));
		json_decref(r);
	}
	gp_http_client_free(prov);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: bench_dispatch [--url URL] [--token ADMIN] "
			"[--agents A] [--gpus-per-node G] [--rate R] "
			"[--seconds D] [--jobs N] [--submitters K] "
			"[--drain-s S] [--coord-pid PID]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	pthread_t *subs, hb[4];
	pthread_attr_t attr;
	int64_t t_start, t_sub_end, first_ack = INT64_MAX, last_recv = 0;
	int64_t *lat;
	size_t nlat = 0, i;
	long expected, rss_before = -1;
	int k;

	opt.url = getenv("GPUPOOL_URL");
	opt.token = getenv("GPUPOOL_TOKEN");
	for (k = 1; k < argc; k += 2) {
		const char *v = k + 1 < argc ? argv[k + 1] : NULL;
		if (v == NULL)
			usage();
		if (strcmp(argv[k], "--url") == 0)
			opt.url = v;
		else if (strcmp(argv[k], "--token") == 0)
			opt.token = v;
		else if (strcmp(argv[k], "--agents") == 0)
			opt.agents = atoi(v);
		else if (strcmp(argv[k], "--gpus-per-node") == 0)
			opt.gpus_per_node = atoi(v);
		else if (strcmp(argv[k], "--rate") == 0)
			opt.rate = atof(v);
		else if (strcmp(argv[k], "--seconds") == 0)
			opt.seconds = atoi(v);
		else if (strcmp(argv[k], "--jobs") == 0)
			opt.jobs = atol(v);
		else if (strcmp(argv[k], "--submitters") == 0)
			opt.submitters = atoi(v);
		else if (strcmp(argv[k], "--drain-s") == 0)
			opt.drain_s = atoi(v);
		else if (strcmp(argv[k], "--coord-pid") == 0)
			opt.coord_pid = atol(v);
		else
			usage();
	}
	if (opt.url == NULL)
		opt.url = "http://127.0.0.1:7070";
	if (opt.submitters <= 0)
		opt.submitters = opt.jobs > 0 ? 8 : 1;
	if (opt.token == NULL || opt.agents < 1 || opt.gpus_per_node < 1 ||
	    opt.gpus_per_node > 64 || opt.rate <= 0 || opt.seconds < 1 ||
	    opt.jobs < 0) {
		fprintf(stderr, "bench_dispatch: need an admin token (--token "
				"or GPUPOOL_TOKEN) and sane counts\n");
		return 2;
	}
	expected = opt.jobs > 0 ? opt.jobs : (long)(opt.rate * opt.seconds);
	for (table_size = 1024; table_size < 2 * (size_t)expected + 2;)
		table_size *= 2;
	table = calloc(table_size, sizeof(*table));
	nodes = calloc((size_t)opt.agents, sizeof(*nodes));
	subs = calloc((size_t)opt.submitters, sizeof(*subs));
	if (table == NULL || nodes == NULL || subs == NULL)
		return 1;
	gp_http_global_init();
	for (k = 0; k < opt.agents; k++)
		pthread_mutex_init(&nodes[k].lock, NULL);
	if (setup() != 0)
		return 1;
	if (opt.coord_pid > 0)
		rss_before = rss_kib(opt.coord_pid);

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (k = 0; k < 4; k++)
		pthread_create(&hb[k], &attr, heartbeat_main,
		    (void *)(intptr_t)k);
	for (k = 0; k < opt.agents; k++)
		if (pthread_create(&nodes[k].poller, &attr, poller_main,
			&nodes[k]) != 0) {
			fprintf(stderr, "bench_dispatch: cannot start poller "
					"%d\n", k);
			return 1;
		}
	usleep(300000); /* let the polls arrive */
	t_start = gp_mono_us();
	for (k = 0; k < opt.submitters; k++)
		pthread_create(&subs[k], &attr, submitter_main,
		    (void *)(intptr_t)k);
	for (k = 0; k < opt.submitters; k++)
		pthread_join(subs[k], NULL);
	t_sub_end = gp_mono_us();
	/* Wait for the dispatch of every acknowledged job, within reason. */
	while (atomic_load(&dispatched) < atomic_load(&acked) &&
	    gp_mono_us() - t_sub_end < (int64_t)opt.drain_s * 1000000)
		usleep(20000);
	/* And for the reports, so that the coordinator holds them all. */
	while (atomic_load(&finished_ok) < atomic_load(&dispatched) &&
	    gp_mono_us() - t_sub_end < (int64_t)opt.drain_s * 1000000)
		usleep(20000);
	atomic_store(&stopping, 1);

	pthread_mutex_lock(&table_lock);
	lat = malloc((table_size + 1) * sizeof(*lat));
	if (lat == NULL)
		return 1;
	for (i = 0; i < table_size; i++) {
		struct job_times *jt = &table[i];
		if (jt->job_id == 0 || jt->t_ack == 0 || jt->t_recv == 0)
			continue;
		lat[nlat++] = jt->t_recv > jt->t_ack ? jt->t_recv - jt->t_ack :
						       0;
		if (jt->t_ack < first_ack)
			first_ack = jt->t_ack;
		if (jt->t_recv > last_recv)
			last_recv = jt->t_recv;
	}
	pthread_mutex_unlock(&table_lock);
	qsort(lat, nlat, sizeof(*lat), cmp_i64);
	printf("dispatch_agents %d nodes\n", opt.agents);
	printf("dispatch_gpus %d gpus\n", opt.agents * opt.gpus_per_node);
	if (opt.jobs == 0)
		printf("dispatch_offered_rate %.1f jobs/s\n", opt.rate);
	printf("dispatch_submitted %ld jobs\n", atomic_load(&submitted));
	printf("dispatch_acknowledged %ld jobs\n", atomic_load(&acked));
	printf("dispatch_submit_rate %.1f jobs/s\n",
	    (double)atomic_load(&acked) * 1e6 / (double)(t_sub_end - t_start));
	printf("dispatch_dispatched %ld jobs\n", atomic_load(&dispatched));
	printf("dispatch_finished %ld jobs\n", atomic_load(&finished_ok));
	printf("dispatch_latency_p50 %.3f ms\n", pct_ms(lat, nlat, 50));
	printf("dispatch_latency_p90 %.3f ms\n", pct_ms(lat, nlat, 90));
	printf("dispatch_latency_p99 %.3f ms\n", pct_ms(lat, nlat, 99));
	printf("dispatch_latency_max %.3f ms\n", pct_ms(lat, nlat, 100));
	printf("dispatch_throughput %.1f jobs/s\n",
	    nlat > 0 && last_recv > first_ack ?
		(double)nlat * 1e6 / (double)(last_recv - first_ack) :
		0.0);
	printf("dispatch_submit_errors %ld count\n",
	    atomic_load(&submit_errors));
	printf("dispatch_agent_errors %ld count\n",
	    atomic_load(&agent_errors));
	if (opt.coord_pid > 0) {
		printf("coord_rss_after_register %ld KiB\n", rss_before);
		printf("coord_rss_after_jobs %ld KiB\n",
		    rss_kib(opt.coord_pid));
	}
	fflush(stdout);
	free(lat);
	/* The pollers sit in long polls: leave without joining them. */
	_exit(atomic_load(&dispatched) > 0 ? 0 : 1);
}
