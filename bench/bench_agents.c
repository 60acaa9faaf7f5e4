/*
 * bench_agents.c: the coordinator at scale (issue 6). Simulates many
 * agents from one process on W worker threads, each an event loop of its
 * own over a slice of the agents (libcurl's multi interface over epoll, so
 * 10,000 agents cost sockets, not threads; one loop for all stalled, and
 * its stalls showed up as dispatch latency): each agent registers a node
 * of G fake GPUs, heartbeats every heartbeat_ms (as the coordinator asks,
 * with its running attempts), holds its long poll, and reports every
 * assignment started at once and finished --hold-ms later without
 * starting anything: pending reports go out together in one POST
 * /v1/agent/reports (at most --report-batch; 0: one request per report,
 * the single-report endpoints). Submitter threads post 1-GPU `true` jobs.
 *
 * Each worker has its own connections: one per agent's long poll, a
 * pool for reports (--report-conns, split between workers) and one for
 * heartbeats (--heartbeat-conns, split), unless the open-file limit
 * allows a heartbeat connection per agent. Per-worker state is
 * _Thread_local; counters and latency samples are shared (atomics, the
 * job table under its lock), so the output lines are the whole run's.
 *
 * Phases:
 *   register  A nodes, at most --register-inflight at a time;
 *   steady    --rate R jobs/s for --seconds D: dispatch latency (the
 *             submission's 201 to the agent holding the job; 0 when the
 *             assignment came first), heartbeat round trips, and the
 *             coordinator's CPU and memory over the phase (--coord-pid);
 *   backlog   (--backlog N) every node pauses (an offer with accepting
 *             false, as `gpupool provider pause` sends), N jobs are
 *             submitted, every node resumes: the fill rate is the jobs
 *             that fit (min(N, GPUs)) over the time from the first resume
 *             to the last of them received, the agents holding their
 *             reports meanwhile (the coordinator's placement alone); the
 *             placement rate is N over the time to the last assignment,
 *             the rest placed as jobs end (bound by the reports and
 *             --hold-ms).
 *
 * Prints "metric value unit" lines. The open-file limit is raised as far
 * as the process may (the hard limit, and the hard limit itself up to
 * fs.nr_open when root); what it got is printed.
 *
 * Usage: bench_agents --url URL --token ADMIN [--agents A]
 *   [--gpus-per-node G] [--rate R] [--seconds D] [--backlog N]
 *   [--submitters K] [--register-inflight K] [--report-conns K]
 *   [--coord-pid PID] [--drain-s S] [--register-timeout-s S]
 *   [--workers W] [--heartbeat-conns K] [--report-batch N] [--hold-ms MS]
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "util.h"

#define POLL_WAIT_MS	  25000
#define POLL_TIMEOUT_MS	  35000
#define REQUEST_TIMEOUT_MS 30000
#define TICK_MS		  5
#define REPORT_TRIES	  50
#define HB_SAMPLES_MAX	  (4 << 20)
#define API_BATCH_DEFAULT 1024 /* the coordinator's API_REPORTS_MAX */

struct options {
	const char *url;
	const char *token;
	int agents;
	int gpus;
	double rate;
	int seconds;
	long backlog;
	int submitters;
	int register_inflight;
	int report_conns;
	long coord_pid;
	int drain_s;
	int register_timeout_s;
	int workers;
	int heartbeat_conns; /* 0: 8 a worker */
	int report_batch;    /* reports a request; 0: the single endpoints */
	int hold_ms;	     /* started to finished */
};

static struct options opt = {NULL, NULL, 10000, 8, 100.0, 30, 0, 0, 64, 256,
    0, 60, 600, 4, 0, API_BATCH_DEFAULT, 0};

/* ---- what the submitters and the agents share ---- */

struct job_times {
	int64_t job_id; /* 0: empty slot */
	int64_t t_ack;	/* µs, monotonic */
	int64_t t_recv;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct job_times *table;
static size_t table_size;

static atomic_long submitted, acked, submit_errors;
static atomic_long dispatched, finished_ok, agent_errors, report_retries;
/* Attempts whose reports are over: finished 200, or 409 (not ours). */
static atomic_long reports_done;
static atomic_long heartbeats, heartbeats_late, reregistered, cancels_seen;
static atomic_long registered;
static atomic_int stopping;

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

/* ---- the simulated agents (one event-loop thread) ---- */

enum xfer_kind {
	X_REGISTER,
	X_HEARTBEAT,
	X_POLL,
	X_STARTED,
	X_FINISHED,
	X_REPORTS /* a batch: the agent's pending reports marked sent */
};

struct agent;

/* One request in flight (or waiting to be retried). */
struct xfer {
	enum xfer_kind kind;
	CURL *easy;
	struct agent *agent;
	int64_t job_id, attempt;
	int tries;
	int64_t t_start; /* µs */
	int64_t offer_seq; /* heartbeat/register: the offer it carries */
	char *body;
	char *resp;
	size_t resp_len, resp_cap;
	int64_t retry_at; /* µs; 0 when not waiting */
	struct xfer *next; /* free list or retry list */
};

struct attempt_ref {
	int64_t job_id, attempt;
};

/* A report waiting for its batch (--report-batch > 0). */
struct pending {
	int64_t job_id, attempt;
	int64_t due; /* µs */
	int finished;
	int sent; /* 1: in the batch in flight; 2: done */
};

struct agent {
	int index;
	/*
	 * Each agent's poll and heartbeats go to host names of their own
	 * (CURLOPT_CONNECT_TO maps them to the coordinator), so that each
	 * keeps a connection of its own, as a real agent's poll and
	 * heartbeat threads do; reports share a pool of connections.
	 */
	struct curl_slist *poll_to, *hb_to;
	int64_t node_id; /* 0: not registered */
	int registering;
	int hb_inflight;
	int64_t hb_due;	    /* µs */
	int hb_ms;	    /* the period the coordinator asks of this agent */
	int64_t offer_acked; /* offer seq the coordinator has */
	struct xfer *poll;
	int poll_active; /* the poll is in flight */
	struct attempt_ref *run;
	int nrun, caprun;
	struct pending *pend;
	int npend, cappend;
	int batch_inflight;
	int64_t batch_retry_at; /* µs */
};

static struct agent *agents;
static struct curl_slist *headers;
/* Each worker's own (the agents [lo, hi) it runs). */
static _Thread_local int worker_lo, worker_hi, worker_index;
static _Thread_local CURLM *multi_poll;	 /* a connection per long poll */
static _Thread_local CURLM *multi_other; /* register, reports: a pool */
static _Thread_local CURLM *multi_hb;	 /* heartbeats: a pool */
static _Thread_local int epfd;
/* µs deadlines the multis asked for; -1: none. */
static _Thread_local int64_t timeout_poll = -1, timeout_other = -1,
			     timeout_hb = -1;
static _Thread_local struct xfer *free_xfers, *retry_list;
/*
 * Backlog phase: while set, the agents hold their started reports (in
 * held_reports) so that the resume offers are not queued behind them on
 * the shared connections; the tick sends them once it is cleared.
 */
static atomic_int hold_reports;
static _Thread_local struct xfer *held_reports;
static _Atomic int heartbeat_ms = 1000; /* the longest period asked */

/* The heartbeat period a register or heartbeat answer asks for. */
static void
take_period(struct agent *a, json_t *r)
{
	json_t *hb = json_object_get(r, "heartbeat_ms");

	if (a->hb_ms <= 0)
		a->hb_ms = 1000;
	if (!json_is_integer(hb) || json_integer_value(hb) < 10 ||
	    json_integer_value(hb) > 600000)
		return;
	if (json_integer_value(hb) != a->hb_ms) {
		int64_t was = a->hb_ms;
		a->hb_ms = (int)json_integer_value(hb);
		/* The next beat moves with the period. */
		a->hb_due += ((int64_t)a->hb_ms - was) * 1000;
	}
	if (a->hb_ms > atomic_load(&heartbeat_ms))
		atomic_store(&heartbeat_ms, a->hb_ms);
}
static _Thread_local int64_t hb_t0;
static _Thread_local int register_next, register_inflight, offer_inflight;
/*
 * Periodic heartbeats in flight on the pool. A heartbeat starts only when
 * a pool connection is free: one queued inside curl behind others would
 * carry a running list that is stale by the time it is sent (a real
 * agent builds its body when it sends), and the coordinator would take
 * the assignments that came meanwhile for lost.
 */
static _Thread_local int hb_pool_inflight;
/* Per worker: the shares of --register-inflight and of the pools. */
static int w_register_inflight, w_report_conns, w_hb_conns;

/* The offer every agent should have; the main thread bumps it. */
static atomic_llong want_offer_seq = 1;
static atomic_int want_accepting = 1;
static atomic_long offer_acks; /* agents at want_offer_seq */

/* Heartbeat round trips (µs), for percentiles. */
static int64_t *hb_samples;
static atomic_long hb_nsamples;
static atomic_int hb_recording;

static char *strdup_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* A malloc'd formatted string; exits when memory runs out. */
static char *
strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		gp_fatalx("out of memory");
	return s;
}

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;

	if (x->resp_len + len + 1 > x->resp_cap) {
		size_t cap = x->resp_cap ? x->resp_cap : 1024;
		char *p;
		while (cap < x->resp_len + len + 1)
			cap *= 2;
		if ((p = realloc(x->resp, cap)) == NULL)
			return 0;
		x->resp = p;
		x->resp_cap = cap;
	}
	memcpy(x->resp + x->resp_len, data, len);
	x->resp_len += len;
	x->resp[x->resp_len] = '\0';
	return len;
}

static struct xfer *
xfer_get(enum xfer_kind kind, struct agent *a)
{
	struct xfer *x = free_xfers;

	if (x != NULL) {
		free_xfers = x->next;
	} else {
		if ((x = calloc(1, sizeof(*x))) == NULL ||
		    (x->easy = curl_easy_init()) == NULL)
			gp_fatalx("out of memory");
	}
	curl_easy_reset(x->easy);
	x->kind = kind;
	x->agent = a;
	x->tries = 0;
	x->retry_at = 0;
	x->next = NULL;
	x->offer_seq = 0;
	return x;
}

static void
xfer_put(struct xfer *x)
{
	free(x->body);
	x->body = NULL;
	x->resp_len = 0;
	x->next = free_xfers;
	free_xfers = x;
}

static char url_scheme[16], url_host[256];
/* Heartbeats on a connection per agent (else on the heartbeat pool). */
static int hb_own_conn = 1;
static int url_port;

/* Splits opt.url ("http://HOST:PORT"); returns 0 or -1. */
static int
parse_url(void)
{
	const char *p = strstr(opt.url, "://"), *h, *colon;
	size_t n;

	if (p == NULL || (size_t)(p - opt.url) >= sizeof(url_scheme))
		return -1;
	memcpy(url_scheme, opt.url, (size_t)(p - opt.url));
	url_scheme[p - opt.url] = '\0';
	h = p + 3;
	colon = strchr(h, ':');
	if (colon == NULL || (n = (size_t)(colon - h)) >= sizeof(url_host))
		return -1;
	memcpy(url_host, h, n);
	url_host[n] = '\0';
	url_port = atoi(colon + 1);
	return url_port > 0 && strcmp(url_scheme, "http") == 0 ? 0 : -1;
}

/* Starts x: method GET when body is NULL, else POST of body (owned). */
static void
xfer_start(struct xfer *x, const char *path, char *body, long timeout_ms)
{
	char url[512];
	/*
	 * A heartbeat that carries a new offer (pause, resume: all agents
	 * at once) goes over the report pool, idle while reports are held,
	 * so that the periodic heartbeats keep their own pool.
	 */
	CURLM *m = x->kind == X_POLL ? multi_poll
	    : x->kind == X_HEARTBEAT && x->offer_seq == 0 ? multi_hb
							   : multi_other;
	struct agent *a = x->agent;

	if (x->kind == X_POLL ||
	    (x->kind == X_HEARTBEAT && x->offer_seq == 0 && hb_own_conn)) {
		snprintf(url, sizeof(url), "%s://%c%d:%d%s", url_scheme,
		    x->kind == X_POLL ? 'p' : 'h', a->index, url_port, path);
		curl_easy_setopt(x->easy, CURLOPT_CONNECT_TO,
		    x->kind == X_POLL ? a->poll_to : a->hb_to);
	} else {
		snprintf(url, sizeof(url), "%s%s", opt.url, path);
	}
	free(x->body);
	x->body = body;
	x->resp_len = 0;
	curl_easy_setopt(x->easy, CURLOPT_URL, url);
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(x->easy, CURLOPT_BUFFERSIZE, 4096L);
	if (body != NULL) {
		curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(body));
	} else {
		curl_easy_setopt(x->easy, CURLOPT_HTTPGET, 1L);
	}
	x->t_start = gp_mono_us();
	if (curl_multi_add_handle(m, x->easy) != CURLM_OK)
		gp_fatalx("curl_multi_add_handle failed");
}

static void
retry_later(struct xfer *x, int64_t delay_us)
{
	x->retry_at = gp_mono_us() + delay_us;
	x->next = retry_list;
	retry_list = x;
}

static char *
offer_json(void)
{
	char lent[64 * 4 + 8], *p = lent;
	int g;

	for (g = 0; g < opt.gpus; g++)
		p += sprintf(p, "%s%d", g ? "," : "", g);
	*p = '\0';
	return strdup_printf("{\"seq\":%lld,\"lent\":[%s],\"accepting\":%s}",
	    (long long)atomic_load(&want_offer_seq), lent,
	    atomic_load(&want_accepting) ? "true" : "false");
}

static void
start_register(struct agent *a)
{
	struct xfer *x = xfer_get(X_REGISTER, a);
	char *gpus, *body, *offer, *p;
	size_t cap = (size_t)opt.gpus * 128 + 16;
	int g;

	if ((gpus = malloc(cap)) == NULL)
		gp_fatalx("out of memory");
	p = gpus;
	for (g = 0; g < opt.gpus; g++)
		p += sprintf(p, "%s{\"index\":%d,\"uuid\":\"GPU-scale-%d-%d-%d\","
				"\"model\":\"Bench GPU\",\"mem_mib\":81920}",
		    g ? "," : "", g, (int)getpid(), a->index, g);
	offer = offer_json();
	x->offer_seq = atomic_load(&want_offer_seq);
	body = strdup_printf("{\"protocol\":%d,\"name\":\"scale-%d-%d\","
				"\"cpus\":%d,\"mem_mib\":%d,\"gpus\":[%s],"
				"\"running\":[],\"offer\":%s}",
	    GP_PROTOCOL_VERSION, (int)getpid(), a->index, 4 * opt.gpus + 4,
	    1 << 20, gpus, offer);
	free(gpus);
	free(offer);
	a->registering = 1;
	register_inflight++;
	xfer_start(x, "/v1/agent/register", body, REQUEST_TIMEOUT_MS);
}

static void
start_poll(struct agent *a)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/agent/poll?node_id=%lld&wait_ms=%d",
	    (long long)a->node_id, POLL_WAIT_MS);
	a->poll->kind = X_POLL;
	a->poll_active = 1;
	xfer_start(a->poll, path, NULL, POLL_TIMEOUT_MS);
}

static void
start_heartbeat(struct agent *a, int with_offer)
{
	struct xfer *x = xfer_get(X_HEARTBEAT, a);
	size_t cap = (size_t)a->nrun * 48 + 256;
	char *body, *p, *offer = NULL;
	int i;

	if (with_offer) {
		offer = offer_json();
		cap += strlen(offer);
		x->offer_seq = atomic_load(&want_offer_seq);
		offer_inflight++;
	}
	if ((body = malloc(cap)) == NULL)
		gp_fatalx("out of memory");
	p = body + sprintf(body, "{\"node_id\":%lld,\"running\":[",
			   (long long)a->node_id);
	for (i = 0; i < a->nrun; i++)
		p += sprintf(p, "%s{\"job_id\":%lld,\"attempt\":%lld}",
		    i ? "," : "", (long long)a->run[i].job_id,
		    (long long)a->run[i].attempt);
	if (offer != NULL)
		sprintf(p, "],\"offer\":%s}", offer);
	else
		strcpy(p, "]}");
	free(offer);
	a->hb_inflight = 1;
	if (!with_offer && !hb_own_conn)
		hb_pool_inflight++;
	xfer_start(x, "/v1/agent/heartbeat", body, REQUEST_TIMEOUT_MS);
}

static void
start_report(struct xfer *x)
{
	char path[160];
	char *body;

	snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/%s",
	    (long long)x->job_id, (long long)x->attempt,
	    x->kind == X_STARTED ? "started" : "finished");
	if (x->kind == X_STARTED)
		body = strdup_printf("{\"node_id\":%lld,\"pid\":1}",
		    (long long)x->agent->node_id);
	else
		body = strdup_printf("{\"node_id\":%lld,\"exit_code\":0,"
					"\"signal\":0,\"reason\":\"exited\","
					"\"message\":\"\"}",
		    (long long)x->agent->node_id);
	xfer_start(x, path, body, REQUEST_TIMEOUT_MS);
}

/* Queues a report for the agent's next batch. */
static void
pend_add(struct agent *a, int64_t job_id, int64_t attempt, int finished,
    int64_t due)
{
	if (a->npend == a->cappend) {
		int cap = a->cappend ? a->cappend * 2 : 16;
		struct pending *p = realloc(a->pend, (size_t)cap *
		    sizeof(*p));
		if (p == NULL)
			gp_fatalx("out of memory");
		a->pend = p;
		a->cappend = cap;
	}
	a->pend[a->npend].job_id = job_id;
	a->pend[a->npend].attempt = attempt;
	a->pend[a->npend].finished = finished;
	a->pend[a->npend].due = due;
	a->pend[a->npend++].sent = 0;
}

/*
 * Sends the agent's due reports in one request, in the order they came
 * (an attempt's started before its finished); 0 when none is due.
 */
static int
start_batch(struct agent *a, int64_t now)
{
	struct gp_buf b = {0};
	struct xfer *x;
	char one[256];
	int i, n = 0, len;

	for (i = 0; i < a->npend && n < opt.report_batch; i++) {
		struct pending *p = &a->pend[i];
		if (p->due > now)
			continue;
		if (p->finished)
			len = snprintf(one, sizeof(one),
			    "%s{\"job_id\":%lld,\"attempt\":%lld,"
			    "\"event\":\"finished\",\"exit_code\":0,"
			    "\"signal\":0,\"reason\":\"exited\","
			    "\"message\":\"\"}",
			    n ? "," : "", (long long)p->job_id,
			    (long long)p->attempt);
		else
			len = snprintf(one, sizeof(one),
			    "%s{\"job_id\":%lld,\"attempt\":%lld,"
			    "\"event\":\"started\",\"pid\":1}",
			    n ? "," : "", (long long)p->job_id,
			    (long long)p->attempt);
		if (n == 0) {
			char head[64];
			int hl = snprintf(head, sizeof(head),
			    "{\"node_id\":%lld,\"reports\":[",
			    (long long)a->node_id);
			if (gp_buf_append(&b, head, (size_t)hl) != 0)
				gp_fatalx("out of memory");
		}
		if (gp_buf_append(&b, one, (size_t)len) != 0)
			gp_fatalx("out of memory");
		p->sent = 1;
		n++;
	}
	if (n == 0)
		return 0;
	if (gp_buf_append(&b, "]}", 3) != 0)
		gp_fatalx("out of memory");
	x = xfer_get(X_REPORTS, a);
	a->batch_inflight = 1;
	xfer_start(x, "/v1/agent/reports", b.data, REQUEST_TIMEOUT_MS);
	return 1;
}

/* Removes the agent's reports marked done (sent == 2), keeping order. */
static void
pend_compact(struct agent *a)
{
	int i, k = 0;

	for (i = 0; i < a->npend; i++)
		if (a->pend[i].sent != 2)
			a->pend[k++] = a->pend[i];
	a->npend = k;
}

static void run_remove(struct agent *a, int64_t job_id, int64_t attempt);

static void
on_batch_done(struct xfer *x, long status)
{
	struct agent *a = x->agent;
	json_t *r = NULL, *results, *res;
	size_t k = 0;
	int i;

	a->batch_inflight = 0;
	if (status == 200)
		r = json_loadb(x->resp, x->resp_len, 0, NULL);
	results = json_object_get(r, "results");
	if (!json_is_array(results)) {
		/* The whole batch again, shortly. */
		for (i = 0; i < a->npend; i++)
			a->pend[i].sent = 0;
		if (atomic_fetch_add(&agent_errors, 1) < 5)
			fprintf(stderr, "bench_agents: reports: HTTP %ld "
					"%.200s\n",
			    status, x->resp ? x->resp : "");
		atomic_fetch_add(&report_retries, 1);
		a->batch_retry_at = gp_mono_us() + 100000;
		json_decref(r);
		xfer_put(x);
		return;
	}
	for (i = 0; i < a->npend; i++) {
		struct pending *p = &a->pend[i];
		long st;
		if (p->sent != 1)
			continue;
		res = json_array_get(results, k++);
		st = (long)json_integer_value(json_object_get(res, "status"));
		if (st != 200 && st != 409) {
			/* Not this time: it goes with the next batch. */
			p->sent = 0;
			atomic_fetch_add(&agent_errors, 1);
			atomic_fetch_add(&report_retries, 1);
			continue;
		}
		p->sent = 2;
		if (p->finished) {
			if (st == 200)
				atomic_fetch_add(&finished_ok, 1);
			atomic_fetch_add(&reports_done, 1);
			run_remove(a, p->job_id, p->attempt);
		}
	}
	pend_compact(a);
	json_decref(r);
	xfer_put(x);
}

static void
run_remove(struct agent *a, int64_t job_id, int64_t attempt)
{
	int i;

	for (i = 0; i < a->nrun; i++)
		if (a->run[i].job_id == job_id &&
		    a->run[i].attempt == attempt) {
			a->run[i] = a->run[--a->nrun];
			return;
		}
}

static void
run_add(struct agent *a, int64_t job_id, int64_t attempt)
{
	if (a->nrun == a->caprun) {
		int cap = a->caprun ? a->caprun * 2 : 8;
		struct attempt_ref *p = realloc(a->run, (size_t)cap *
		    sizeof(*p));
		if (p == NULL)
			gp_fatalx("out of memory");
		a->run = p;
		a->caprun = cap;
	}
	a->run[a->nrun].job_id = job_id;
	a->run[a->nrun++].attempt = attempt;
}

/* The node is unknown to the coordinator (lease lost): register again. */
static void
lost(struct agent *a)
{
	if (a->registering)
		return;
	atomic_fetch_add(&reregistered, 1);
	a->node_id = 0;
	a->nrun = 0;
	start_register(a);
}

static void
on_poll_done(struct xfer *x, long status)
{
	struct agent *a = x->agent;
	json_t *r, *v;
	size_t i;

	a->poll_active = 0;
	if (status == 404) {
		lost(a);
		return;
	}
	if (status != 200) {
		atomic_fetch_add(&agent_errors, 1);
		retry_later(x, 200000);
		return;
	}
	r = json_loadb(x->resp, x->resp_len, 0, NULL);
	json_array_foreach(json_object_get(r, "assignments"), i, v)
	{
		int64_t t = gp_mono_us();
		struct xfer *rep = xfer_get(X_STARTED, a);

		rep->job_id = json_integer_value(json_object_get(v, "job_id"));
		rep->attempt = json_integer_value(json_object_get(v,
		    "attempt"));
		note(rep->job_id, t, 1);
		atomic_fetch_add(&dispatched, 1);
		run_add(a, rep->job_id, rep->attempt);
		if (opt.report_batch > 0) {
			/* The tick sends it with the agent's next batch. */
			pend_add(a, rep->job_id, rep->attempt, 0, t);
			pend_add(a, rep->job_id, rep->attempt, 1,
			    t + (int64_t)opt.hold_ms * 1000);
			xfer_put(rep);
		} else if (atomic_load(&hold_reports)) {
			rep->next = held_reports;
			held_reports = rep;
		} else {
			start_report(rep);
		}
	}
	atomic_fetch_add(&cancels_seen,
	    (long)json_array_size(json_object_get(r, "cancels")));
	json_decref(r);
	start_poll(a);
}

static void
on_report_done(struct xfer *x, long status)
{
	struct agent *a = x->agent;

	if (status == 200 && x->kind == X_STARTED) {
		x->kind = X_FINISHED;
		x->tries = 0;
		if (opt.hold_ms > 0)
			retry_later(x, (int64_t)opt.hold_ms * 1000);
		else
			start_report(x);
		return;
	}
	if (status == 200 || status == 409) {
		if (status == 200 && x->kind == X_FINISHED)
			atomic_fetch_add(&finished_ok, 1);
		atomic_fetch_add(&reports_done, 1);
		run_remove(a, x->job_id, x->attempt);
		xfer_put(x);
		return;
	}
	atomic_fetch_add(&agent_errors, 1);
	if (++x->tries >= REPORT_TRIES) {
		atomic_fetch_add(&reports_done, 1);
		run_remove(a, x->job_id, x->attempt);
		xfer_put(x);
		return;
	}
	atomic_fetch_add(&report_retries, 1);
	retry_later(x, 100000);
}

static void
on_done(struct xfer *x, CURLcode result)
{
	struct agent *a = x->agent;
	long status = 0;
	json_t *r;

	if (result == CURLE_OK)
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	switch (x->kind) {
	case X_REGISTER:
		register_inflight--;
		a->registering = 0;
		r = status == 200 || status == 201
		    ? json_loadb(x->resp, x->resp_len, 0, NULL)
		    : NULL;
		if (r == NULL) {
			if (atomic_fetch_add(&agent_errors, 1) < 5)
				fprintf(stderr, "bench_agents: register: HTTP "
						"%ld %.200s\n",
				    status, x->resp ? x->resp : "");
			xfer_put(x);
			/* Again shortly, through the tick. */
			a->node_id = -1;
			return;
		}
		a->node_id = json_integer_value(json_object_get(r, "node_id"));
		take_period(a, r);
		json_decref(r);
		if (x->offer_seq > a->offer_acked) {
			if (a->offer_acked < atomic_load(&want_offer_seq) &&
			    x->offer_seq >= atomic_load(&want_offer_seq))
				atomic_fetch_add(&offer_acks, 1);
			a->offer_acked = x->offer_seq;
		}
		xfer_put(x);
		atomic_fetch_add(&registered, 1);
		a->hb_due = hb_t0 + (int64_t)a->hb_ms * 1000 * a->index /
		    opt.agents;
		while (a->hb_due < gp_mono_us())
			a->hb_due += (int64_t)a->hb_ms * 1000;
		if (!a->poll_active)
			start_poll(a);
		return;
	case X_HEARTBEAT:
		a->hb_inflight = 0;
		if (x->offer_seq > 0)
			offer_inflight--;
		else if (!hb_own_conn)
			hb_pool_inflight--;
		if (status == 200) {
			int64_t rtt = gp_mono_us() - x->t_start;
			long k;
			atomic_fetch_add(&heartbeats, 1);
			if ((r = json_loadb(x->resp, x->resp_len, 0, NULL)) !=
			    NULL) {
				take_period(a, r);
				json_decref(r);
			}
			if (atomic_load(&hb_recording) &&
			    (k = atomic_fetch_add(&hb_nsamples, 1)) <
				HB_SAMPLES_MAX)
				hb_samples[k] = rtt;
			if (x->offer_seq > a->offer_acked) {
				if (a->offer_acked <
					atomic_load(&want_offer_seq) &&
				    x->offer_seq >=
					atomic_load(&want_offer_seq))
					atomic_fetch_add(&offer_acks, 1);
				a->offer_acked = x->offer_seq;
			}
		} else if (status == 404) {
			xfer_put(x);
			lost(a);
			return;
		} else {
			atomic_fetch_add(&agent_errors, 1);
		}
		xfer_put(x);
		return;
	case X_POLL:
		on_poll_done(x, status);
		return;
	case X_STARTED:
	case X_FINISHED:
		on_report_done(x, status);
		return;
	case X_REPORTS:
		on_batch_done(x, status);
		return;
	}
}

static int
on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp)
{
	struct epoll_event ev;
	int which = userp == multi_poll ? 0 : userp == multi_hb ? 2 : 1;

	(void)easy;
	(void)sockp;
	memset(&ev, 0, sizeof(ev));
	ev.data.u64 = ((uint64_t)fd << 2) | (uint64_t)which;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		return 0;
	}
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) |
	    (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
		epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

static int
on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	int64_t *deadline = userp;

	(void)multi;
	*deadline = timeout_ms < 0 ? -1 : gp_mono_us() + timeout_ms * 1000;
	return 0;
}

static void
drain_done(CURLM *m)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(m, &left)) != NULL) {
		struct xfer *x;
		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
		    (char **)&x);
		curl_multi_remove_handle(m, msg->easy_handle);
		on_done(x, msg->data.result);
	}
}

/* Periodic work: registrations, heartbeats, offers, retries. */
static void
tick(void)
{
	int64_t now = gp_mono_us(), want = atomic_load(&want_offer_seq);
	struct xfer *x, **pp;
	int i;

	int held = atomic_load(&hold_reports);

	while (register_next < worker_hi &&
	    register_inflight < w_register_inflight)
		start_register(&agents[register_next++]);
	for (i = worker_lo; i < register_next; i++) {
		struct agent *a = &agents[i];
		if (a->node_id == -1 && !a->registering &&
		    register_inflight < w_register_inflight) {
			a->node_id = 0;
			start_register(a);
		}
		if (a->node_id <= 0 || a->registering)
			continue;
		if (a->npend > 0 && !held && !a->batch_inflight &&
		    a->batch_retry_at <= now)
			start_batch(a, now);
		if (a->offer_acked < want && !a->hb_inflight &&
		    offer_inflight < w_report_conns) {
			start_heartbeat(a, 1);
			continue;
		}
		if (a->hb_due <= now && !a->hb_inflight && !hb_own_conn &&
		    hb_pool_inflight >= w_hb_conns)
			continue; /* due: sent when a connection is free */
		if (a->hb_due <= now) {
			/* Late: a period past due, or the last still out. */
			int late = now - a->hb_due > (int64_t)a->hb_ms * 1000;
			a->hb_due += (int64_t)a->hb_ms * 1000;
			if (a->hb_due <= now) /* far behind: do not burst */
				a->hb_due = now + (int64_t)a->hb_ms * 1000;
			if (late && !a->hb_inflight)
				atomic_fetch_add(&heartbeats_late, 1);
			if (a->hb_inflight)
				atomic_fetch_add(&heartbeats_late, 1);
			else
				start_heartbeat(a, 0);
		}
	}
	if (!held)
		while ((x = held_reports) != NULL) {
			held_reports = x->next;
			x->next = NULL;
			start_report(x);
		}
	for (pp = &retry_list; (x = *pp) != NULL;) {
		if (x->retry_at > now) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		x->next = NULL;
		x->retry_at = 0;
		if (x->kind == X_POLL) {
			if (x->agent->node_id > 0 &&
			    !x->agent->registering && !x->agent->poll_active)
				start_poll(x->agent);
		} else {
			start_report(x);
		}
	}
}

static CURLM *
new_multi(int64_t *deadline, long host_conns, long max_conns)
{
	CURLM *m = curl_multi_init();

	if (m == NULL)
		gp_fatalx("curl_multi_init failed");
	curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(m, CURLMOPT_SOCKETDATA, m);
	curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(m, CURLMOPT_TIMERDATA, deadline);
	/* Requests beyond the pool wait inside curl for a free connection. */
	if (host_conns > 0)
		curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, host_conns);
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, max_conns);
	return m;
}

/* One worker: the event loop of agents [lo, hi). */
static void *
loop_main(void *arg)
{
	struct epoll_event evs[256];
	int64_t next_tick = 0;
	int n, i, running, nagents;

	worker_index = (int)(intptr_t)arg;
	worker_lo = (int)((int64_t)opt.agents * worker_index / opt.workers);
	worker_hi = (int)((int64_t)opt.agents * (worker_index + 1) /
	    opt.workers);
	register_next = worker_lo;
	nagents = worker_hi - worker_lo;
	if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		gp_fatalx("epoll_create1 failed");
	multi_poll = new_multi(&timeout_poll, 0, (long)nagents + 16);
	multi_other = new_multi(&timeout_other, w_report_conns,
	    (long)w_report_conns + 16);
	multi_hb = new_multi(&timeout_hb, hb_own_conn ? 0 : w_hb_conns,
	    hb_own_conn ? (long)nagents + 16 : (long)w_hb_conns + 16);
	hb_t0 = gp_mono_us();
	while (!atomic_load(&stopping)) {
		int64_t now = gp_mono_us(), wait = TICK_MS * 1000;
		if (timeout_poll >= 0 && timeout_poll - now < wait)
			wait = timeout_poll - now;
		if (timeout_other >= 0 && timeout_other - now < wait)
			wait = timeout_other - now;
		if (timeout_hb >= 0 && timeout_hb - now < wait)
			wait = timeout_hb - now;
		if (next_tick - now < wait)
			wait = next_tick - now;
		n = epoll_wait(epfd, evs, 256,
		    wait > 0 ? (int)((wait + 999) / 1000) : 0);
		for (i = 0; i < n; i++) {
			int fd = (int)(evs[i].data.u64 >> 2);
			int which = (int)(evs[i].data.u64 & 3);
			CURLM *m = which == 0 ? multi_poll
			    : which == 2      ? multi_hb
					      : multi_other;
			int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN
							     : 0) |
			    (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
			    (evs[i].events & (EPOLLERR | EPOLLHUP)
				    ? CURL_CSELECT_ERR
				    : 0);
			curl_multi_socket_action(m, fd, flags, &running);
		}
		now = gp_mono_us();
		if (timeout_poll >= 0 && timeout_poll <= now) {
			timeout_poll = -1;
			curl_multi_socket_action(multi_poll,
			    CURL_SOCKET_TIMEOUT, 0, &running);
		}
		if (timeout_other >= 0 && timeout_other <= now) {
			timeout_other = -1;
			curl_multi_socket_action(multi_other,
			    CURL_SOCKET_TIMEOUT, 0, &running);
		}
		if (timeout_hb >= 0 && timeout_hb <= now) {
			timeout_hb = -1;
			curl_multi_socket_action(multi_hb,
			    CURL_SOCKET_TIMEOUT, 0, &running);
		}
		drain_done(multi_poll);
		drain_done(multi_other);
		drain_done(multi_hb);
		if (now >= next_tick) {
			tick();
			next_tick = now + TICK_MS * 1000;
		}
	}
	return NULL;
}

/* ---- submitters (threads, blocking clients) ---- */

static atomic_long submit_budget; /* jobs left to submit in this phase */
static int64_t phase_start_us;
static double phase_period_us;	/* between one submitter's jobs; 0: ASAP */

static void *
submitter_main(void *arg)
{
	long index = (long)(intptr_t)arg, i;
	struct gp_http_client *c;
	struct gp_http_response resp;
	static const char body[] =
	    "{\"command\":[\"true\"],\"name\":\"bench-agents\",\"gpus\":1}";
	int64_t start = phase_start_us, due;

	if ((c = gp_http_client_new(opt.url, opt.token, NULL)) == NULL)
		return NULL;
	start += (int64_t)(phase_period_us * (double)index / opt.submitters);
	for (i = 0;; i++) {
		if (atomic_fetch_sub(&submit_budget, 1) <= 0)
			break;
		due = start + (int64_t)(phase_period_us * (double)i);
		for (;;) {
			int64_t wait = due - gp_mono_us();
			if (wait <= 0)
				break;
			usleep((useconds_t)wait);
		}
		atomic_fetch_add(&submitted, 1);
		if (gp_http_request(c, "POST", "/v1/jobs", body,
			sizeof(body) - 1, NULL, 30000, &resp) == 0 &&
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
			if (atomic_fetch_add(&submit_errors, 1) < 3)
				fprintf(stderr, "bench_agents: submit: %s\n",
				    err);
		}
		gp_http_response_fini(&resp);
	}
	gp_http_client_free(c);
	return NULL;
}

/* Submits n jobs: at rate jobs/s, or as fast as possible when rate <= 0. */
static void
submit_jobs(long n, double rate)
{
	pthread_t *t = calloc((size_t)opt.submitters, sizeof(*t));
	int k;

	if (t == NULL)
		gp_fatalx("out of memory");
	atomic_store(&submit_budget, n);
	phase_start_us = gp_mono_us();
	phase_period_us = rate > 0 ? 1e6 * opt.submitters / rate : 0;
	for (k = 0; k < opt.submitters; k++)
		pthread_create(&t[k], NULL, submitter_main,
		    (void *)(intptr_t)k);
	for (k = 0; k < opt.submitters; k++)
		pthread_join(t[k], NULL);
	free(t);
}

/* ---- measurements ---- */

struct proc_sample {
	int64_t t_us;
	long ticks; /* utime + stime of the coordinator */
	long rss_kib, hwm_kib, threads, fds;
	double self_cpu_s;
};

static void
sample(struct proc_sample *s)
{
	char path[64], line[512];
	unsigned long ut = 0, st = 0;
	struct rusage ru;
	FILE *f;

	memset(s, 0, sizeof(*s));
	s->t_us = gp_mono_us();
	getrusage(RUSAGE_SELF, &ru);
	s->self_cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	if (opt.coord_pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/stat", opt.coord_pid);
	if ((f = fopen(path, "r")) != NULL) {
		if (fgets(line, sizeof(line), f) != NULL) {
			char *p = strrchr(line, ')');
			/* After "pid (comm)": state is field 3, utime 14. */
			if (p != NULL &&
			    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u "
					  "%*u %*u %*u %lu %lu",
				&ut, &st) == 2)
				s->ticks = (long)(ut + st);
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%ld/status", opt.coord_pid);
	if ((f = fopen(path, "r")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL) {
			sscanf(line, "VmRSS: %ld", &s->rss_kib);
			sscanf(line, "VmHWM: %ld", &s->hwm_kib);
			sscanf(line, "Threads: %ld", &s->threads);
		}
		fclose(f);
	}
}

static void
print_usage_between(const char *phase, const struct proc_sample *a,
    const struct proc_sample *b)
{
	double secs = (double)(b->t_us - a->t_us) / 1e6;

	printf("%s_generator_cpu %.2f cores\n", phase,
	    secs > 0 ? (b->self_cpu_s - a->self_cpu_s) / secs : 0.0);
	if (opt.coord_pid <= 0)
		return;
	printf("%s_coord_cpu %.2f cores\n", phase,
	    secs > 0 ? (double)(b->ticks - a->ticks) /
		    (double)sysconf(_SC_CLK_TCK) / secs
		     : 0.0);
	printf("%s_coord_rss_start %ld KiB\n", phase, a->rss_kib);
	printf("%s_coord_rss %ld KiB\n", phase, b->rss_kib);
	printf("%s_coord_rss_peak %ld KiB\n", phase, b->hwm_kib);
	printf("%s_coord_threads %ld count\n", phase, b->threads);
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

/*
 * Dispatch latencies of the jobs acknowledged since the table was
 * cleared. OUT: *first_ack, *last_recv. Returns a sorted malloc'd array.
 */
static int64_t *
latencies(size_t *n, int64_t *first_ack, int64_t *last_recv)
{
	int64_t *lat = malloc((table_size + 1) * sizeof(*lat));
	size_t i;

	if (lat == NULL)
		gp_fatalx("out of memory");
	*n = 0;
	*first_ack = INT64_MAX;
	*last_recv = 0;
	pthread_mutex_lock(&table_lock);
	for (i = 0; i < table_size; i++) {
		struct job_times *jt = &table[i];
		if (jt->job_id == 0 || jt->t_ack == 0 || jt->t_recv == 0)
			continue;
		lat[(*n)++] = jt->t_recv > jt->t_ack ? jt->t_recv - jt->t_ack
						     : 0;
		if (jt->t_ack < *first_ack)
			*first_ack = jt->t_ack;
		if (jt->t_recv > *last_recv)
			*last_recv = jt->t_recv;
	}
	pthread_mutex_unlock(&table_lock);
	qsort(lat, *n, sizeof(*lat), cmp_i64);
	return lat;
}

static void
table_reset(long expected)
{
	pthread_mutex_lock(&table_lock);
	free(table);
	for (table_size = 1024; table_size < 2 * (size_t)expected + 2;)
		table_size *= 2;
	if ((table = calloc(table_size, sizeof(*table))) == NULL)
		gp_fatalx("out of memory");
	pthread_mutex_unlock(&table_lock);
}

/* Waits until *counter reaches target or s seconds pass; 0 on success. */
static int
wait_for(atomic_long *counter, long target, int s)
{
	int64_t end = gp_mono_us() + (int64_t)s * 1000000;

	while (atomic_load(counter) < target) {
		if (gp_mono_us() > end)
			return -1;
		usleep(20000);
	}
	return 0;
}

/* Every agent must take the offer (accepting or not); returns 0 if all did. */
static int
set_offer(int accepting)
{
	atomic_store(&offer_acks, 0);
	atomic_store(&want_accepting, accepting);
	atomic_fetch_add(&want_offer_seq, 1);
	return wait_for(&offer_acks, opt.agents, 120);
}

/* As far as this process may: the hard limit, raised to nr_open as root. */
static void
raise_nofile(void)
{
	struct rlimit rl;
	long nr_open = 0;
	FILE *f = fopen("/proc/sys/fs/nr_open", "r");

	if (f != NULL) {
		if (fscanf(f, "%ld", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (nr_open > 0 && (rlim_t)nr_open > rl.rlim_max) {
		struct rlimit up = {(rlim_t)nr_open, (rlim_t)nr_open};
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	printf("agents_nofile_limit %llu fds\n",
	    (unsigned long long)rl.rlim_cur);
	if (rl.rlim_cur < 2 * (rlim_t)opt.agents + (rlim_t)opt.report_conns +
		64) {
		/* Not enough for two connections per agent: a pool. */
		hb_own_conn = 0;
		fprintf(stderr, "bench_agents: %d agents with a heartbeat "
				"connection each need about %d open files; the "
				"limit is %llu: heartbeats go over %d "
				"connections of their own\n",
		    opt.agents, 2 * opt.agents + opt.report_conns + 64,
		    (unsigned long long)rl.rlim_cur, opt.heartbeat_conns);
	}
	if (rl.rlim_cur < (rlim_t)opt.agents + (rlim_t)opt.report_conns +
		(rlim_t)opt.heartbeat_conns + 64)
		fprintf(stderr, "bench_agents: %d agents need at least %d open "
				"files; the limit is %llu\n",
		    opt.agents,
		    opt.agents + opt.report_conns + opt.heartbeat_conns + 64,
		    (unsigned long long)rl.rlim_cur);
	printf("agents_heartbeat_connections %s mode\n",
	    hb_own_conn ? "own" : "pool");
	if (!hb_own_conn)
		printf("agents_heartbeat_pool %d connections\n",
		    opt.heartbeat_conns);
}

static int
setup_provider(char *token, size_t len)
{
	struct gp_http_client *admin = gp_http_client_new(opt.url, opt.token,
	    NULL);
	struct gp_http_response resp;
	char body[128];
	json_t *r;
	int rc = -1;

	if (admin == NULL)
		return -1;
	snprintf(body, sizeof(body), "{\"role\":\"provider\",\"name\":"
				     "\"scale-%d\"}",
	    (int)getpid());
	if (gp_http_request(admin, "POST", "/v1/tokens", body, strlen(body),
		NULL, 10000, &resp) == 0 &&
	    resp.status == 201) {
		r = json_loadb(resp.body, resp.body_len, 0, NULL);
		if (json_is_string(json_object_get(r, "token"))) {
			gp_strlcpy(token,
			    json_string_value(json_object_get(r, "token")),
			    len);
			rc = 0;
		}
		json_decref(r);
	}
	if (rc != 0)
		fprintf(stderr, "bench_agents: cannot create a provider token "
				"(HTTP %ld)\n",
		    resp.status);
	gp_http_response_fini(&resp);
	gp_http_client_free(admin);
	return rc;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: bench_agents [--url URL] [--token ADMIN] [--agents A]\n"
	    "  [--gpus-per-node G] [--rate R] [--seconds D] [--backlog N]\n"
	    "  [--submitters K] [--register-inflight K] [--report-conns K]\n"
	    "  [--coord-pid PID] [--drain-s S] [--register-timeout-s S]\n"
	    "  [--workers W] [--heartbeat-conns K] [--report-batch N]\n"
	    "  [--hold-ms MS]\n");
	exit(2);
}

/* The coordinator's dispatch histogram (placement to the poll's answer). */
#define HIST_MAX 64
struct coord_hist {
	int n;
	char le[HIST_MAX][24];
	double cum[HIST_MAX];
};

/*
 * Reads the histogram's buckets from the coordinator's /metrics (our
 * own coordinator's output, a line per bucket); 0, or -1 when absent.
 */
static int
coord_hist_get(struct coord_hist *h)
{
	static const char name[] = "gpupool_job_dispatch_latency_seconds_bucket";
	struct gp_http_client *c = gp_http_client_new(opt.url, opt.token,
	    NULL);
	struct gp_http_response resp;
	char *text, *line, *save = NULL, *le, *end, *val;
	int rc = -1;

	h->n = 0;
	if (c == NULL)
		return -1;
	if (gp_http_request(c, "GET", "/metrics", NULL, 0, NULL, 10000,
		&resp) == 0 &&
	    resp.status == 200 &&
	    (text = strndup(resp.body, resp.body_len)) != NULL) {
		for (line = strtok_r(text, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			if (strncmp(line, name, sizeof(name) - 1) != 0 ||
			    (le = strstr(line, "le=\"")) == NULL ||
			    (end = strchr(le + 4, '"')) == NULL ||
			    (val = strrchr(line, ' ')) == NULL ||
			    h->n == HIST_MAX)
				continue;
			snprintf(h->le[h->n], sizeof(h->le[h->n]), "%.*s",
			    (int)(end - le - 4), le + 4);
			h->cum[h->n++] = atof(val + 1);
		}
		free(text);
		rc = h->n > 0 ? 0 : -1;
	}
	gp_http_response_fini(&resp);
	gp_http_client_free(c);
	return rc;
}

/* The bucket bounds under which 50 and 99 % of (after - before) fall. */
static void
report_coord_hist(const char *phase, const struct coord_hist *before,
    const struct coord_hist *after)
{
	static const int qs[] = {50, 90, 99};
	double total, d;
	size_t q;
	int i;

	if (after->n == 0 || before->n != after->n)
		return;
	total = after->cum[after->n - 1] - before->cum[before->n - 1];
	printf("%s_coord_dispatch_count %.0f jobs\n", phase, total);
	if (total <= 0)
		return;
	for (q = 0; q < GP_ARRAY_LEN(qs); q++)
		for (i = 0; i < after->n; i++) {
			d = after->cum[i] - before->cum[i];
			if (d >= total * qs[q] / 100.0) {
				printf("%s_coord_dispatch_latency_p%d_le %s s\n",
				    phase, qs[q], after->le[i]);
				break;
			}
		}
}

static void
report_dispatch(const char *phase)
{
	int64_t *lat, first_ack, last_recv;
	size_t n;

	lat = latencies(&n, &first_ack, &last_recv);
	printf("%s_dispatch_latency_p50 %.3f ms\n", phase, pct_ms(lat, n, 50));
	printf("%s_dispatch_latency_p90 %.3f ms\n", phase, pct_ms(lat, n, 90));
	printf("%s_dispatch_latency_p99 %.3f ms\n", phase, pct_ms(lat, n, 99));
	printf("%s_dispatch_latency_max %.3f ms\n", phase,
	    pct_ms(lat, n, 100));
	free(lat);
}

int
main(int argc, char **argv)
{
	char provider[160], auth[200];
	struct proc_sample s0, s1;
	pthread_t *loops;
	static struct coord_hist h0, h1;
	int64_t t0, t1;
	int submitters_given = 0;
	long base_dispatched, base_finished, base_done, base_hb, base_late, n;
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
			opt.gpus = atoi(v);
		else if (strcmp(argv[k], "--rate") == 0)
			opt.rate = atof(v);
		else if (strcmp(argv[k], "--seconds") == 0)
			opt.seconds = atoi(v);
		else if (strcmp(argv[k], "--backlog") == 0)
			opt.backlog = atol(v);
		else if (strcmp(argv[k], "--submitters") == 0) {
			opt.submitters = atoi(v);
			submitters_given = 1;
		}
		else if (strcmp(argv[k], "--register-inflight") == 0)
			opt.register_inflight = atoi(v);
		else if (strcmp(argv[k], "--report-conns") == 0)
			opt.report_conns = atoi(v);
		else if (strcmp(argv[k], "--coord-pid") == 0)
			opt.coord_pid = atol(v);
		else if (strcmp(argv[k], "--drain-s") == 0)
			opt.drain_s = atoi(v);
		else if (strcmp(argv[k], "--register-timeout-s") == 0)
			opt.register_timeout_s = atoi(v);
		else if (strcmp(argv[k], "--workers") == 0)
			opt.workers = atoi(v);
		else if (strcmp(argv[k], "--heartbeat-conns") == 0)
			opt.heartbeat_conns = atoi(v);
		else if (strcmp(argv[k], "--report-batch") == 0)
			opt.report_batch = atoi(v);
		else if (strcmp(argv[k], "--hold-ms") == 0)
			opt.hold_ms = atoi(v);
		else
			usage();
	}
	if (opt.url == NULL)
		opt.url = "http://127.0.0.1:7070";
	if (opt.submitters <= 0)
		opt.submitters = opt.rate > 500 ? 16 : 4;
	if (opt.token == NULL || opt.agents < 1 || opt.gpus < 1 ||
	    opt.gpus > 64 || opt.rate < 0 || opt.seconds < 0 ||
	    opt.backlog < 0 || opt.register_inflight < 1 ||
	    opt.report_conns < 1 || opt.submitters > 256 ||
	    opt.workers < 1 || opt.workers > 64 || opt.workers > opt.agents ||
	    opt.heartbeat_conns < 0 || opt.report_batch < 0 ||
	    opt.report_batch > API_BATCH_DEFAULT || opt.hold_ms < 0) {
		fprintf(stderr, "bench_agents: need an admin token (--token "
				"or GPUPOOL_TOKEN) and sane counts\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (opt.heartbeat_conns == 0)
		opt.heartbeat_conns = 8 * opt.workers;
	w_register_inflight = opt.register_inflight / opt.workers > 0
	    ? opt.register_inflight / opt.workers
	    : 1;
	w_report_conns = opt.report_conns / opt.workers > 0
	    ? opt.report_conns / opt.workers
	    : 1;
	w_hb_conns = opt.heartbeat_conns / opt.workers > 0
	    ? opt.heartbeat_conns / opt.workers
	    : 1;
	raise_nofile();
	gp_http_global_init();
	if (setup_provider(provider, sizeof(provider)) != 0)
		return 1;
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", provider);
	headers = curl_slist_append(NULL, auth);
	headers = curl_slist_append(headers, "Content-Type: application/json");
	headers = curl_slist_append(headers, "Expect:");
	agents = calloc((size_t)opt.agents, sizeof(*agents));
	hb_samples = malloc(HB_SAMPLES_MAX * sizeof(*hb_samples));
	if (agents == NULL || hb_samples == NULL || headers == NULL)
		return 1;
	if (parse_url() != 0) {
		fprintf(stderr, "bench_agents: --url must be http://HOST:PORT\n");
		return 2;
	}
	for (k = 0; k < opt.agents; k++) {
		char map[400];
		agents[k].index = k;
		agents[k].poll = xfer_get(X_POLL, &agents[k]);
		snprintf(map, sizeof(map), "p%d:%d:%s:%d", k, url_port,
		    url_host, url_port);
		agents[k].poll_to = curl_slist_append(NULL, map);
		snprintf(map, sizeof(map), "h%d:%d:%s:%d", k, url_port,
		    url_host, url_port);
		agents[k].hb_to = curl_slist_append(NULL, map);
		if (agents[k].poll_to == NULL || agents[k].hb_to == NULL)
			return 1;
	}
	table_reset(1024);

	printf("agents_workers %d threads\n", opt.workers);
	printf("agents_report_batch %d reports\n", opt.report_batch);
	printf("agents_hold %d ms\n", opt.hold_ms);
	printf("agents_nodes %d nodes\n", opt.agents);
	printf("agents_gpus %d gpus\n", opt.agents * opt.gpus);
	sample(&s0);
	t0 = gp_mono_us();
	if ((loops = calloc((size_t)opt.workers, sizeof(*loops))) == NULL)
		return 1;
	for (k = 0; k < opt.workers; k++)
		if (pthread_create(&loops[k], NULL, loop_main,
			(void *)(intptr_t)k) != 0)
			gp_fatalx("cannot start worker %d", k);
	if (wait_for(&registered, opt.agents, opt.register_timeout_s) != 0) {
		fprintf(stderr, "bench_agents: only %ld of %d agents "
				"registered in %d s\n",
		    atomic_load(&registered), opt.agents,
		    opt.register_timeout_s);
		return 1;
	}
	t1 = gp_mono_us();
	sample(&s1);
	printf("register_seconds %.2f s\n", (double)(t1 - t0) / 1e6);
	printf("register_rate %.0f nodes/s\n",
	    opt.agents / ((double)(t1 - t0) / 1e6));
	printf("agents_heartbeat_period %d ms\n", heartbeat_ms);
	print_usage_between("register", &s0, &s1);
	/* Let the long polls settle and the heartbeats spread out. */
	sleep(3);

	/* ---- steady ---- */
	if (opt.seconds > 0) {
		/* --rate 0: the agents only heartbeat and poll. */
		n = (long)(opt.rate * opt.seconds);
		table_reset(n);
		base_dispatched = atomic_load(&dispatched);
		base_finished = atomic_load(&finished_ok);
		base_done = atomic_load(&reports_done);
		base_hb = atomic_load(&heartbeats);
		base_late = atomic_load(&heartbeats_late);
		atomic_store(&hb_nsamples, 0);
		atomic_store(&hb_recording, 1);
		atomic_store(&acked, 0);
		coord_hist_get(&h0);
		sample(&s0);
		if (n > 0)
			submit_jobs(n, opt.rate);
		else
			sleep((unsigned)opt.seconds);
		t1 = gp_mono_us();
		wait_for(&dispatched, base_dispatched + atomic_load(&acked),
		    opt.drain_s);
		sample(&s1);
		atomic_store(&hb_recording, 0);
		coord_hist_get(&h1);
		wait_for(&reports_done, base_done + atomic_load(&acked),
		    opt.drain_s);
		printf("steady_offered_rate %.1f jobs/s\n", opt.rate);
		printf("steady_seconds %.1f s\n",
		    (double)(t1 - s0.t_us) / 1e6);
		printf("steady_submitted %ld jobs\n", n);
		printf("steady_acknowledged %ld jobs\n", atomic_load(&acked));
		printf("steady_dispatched %ld jobs\n",
		    atomic_load(&dispatched) - base_dispatched);
		printf("steady_finished %ld jobs\n",
		    atomic_load(&finished_ok) - base_finished);
		report_dispatch("steady");
		report_coord_hist("steady", &h0, &h1);
		{
			long hn = atomic_load(&hb_nsamples);
			if (hn > HB_SAMPLES_MAX)
				hn = HB_SAMPLES_MAX;
			qsort(hb_samples, (size_t)hn, sizeof(*hb_samples),
			    cmp_i64);
			printf("steady_heartbeats %ld count\n",
			    atomic_load(&heartbeats) - base_hb);
			printf("steady_heartbeat_rate %.0f /s\n",
			    (double)(atomic_load(&heartbeats) - base_hb) /
				((double)(s1.t_us - s0.t_us) / 1e6));
			printf("steady_heartbeat_period %d ms\n",
			    atomic_load(&heartbeat_ms));
			printf("steady_heartbeats_late %ld count\n",
			    atomic_load(&heartbeats_late) - base_late);
			printf("steady_heartbeat_rtt_p50 %.3f ms\n",
			    pct_ms(hb_samples, (size_t)hn, 50));
			printf("steady_heartbeat_rtt_p99 %.3f ms\n",
			    pct_ms(hb_samples, (size_t)hn, 99));
		}
		print_usage_between("steady", &s0, &s1);
	}

	/* ---- backlog ---- */
	if (opt.backlog > 0) {
		int64_t t_resume, first_ack, last_recv, t_fill;
		long fill;
		size_t nl;
		int64_t *lat;
		long before;

		if (set_offer(0) != 0)
			fprintf(stderr, "bench_agents: not every agent took "
					"the pause (%ld of %d)\n",
			    atomic_load(&offer_acks), opt.agents);
		/* The offers apply in the state thread's next batch. */
		sleep(1);
		table_reset(opt.backlog);
		atomic_store(&acked, 0);
		base_dispatched = atomic_load(&dispatched);
		base_finished = atomic_load(&finished_ok);
		base_done = atomic_load(&reports_done);
		t0 = gp_mono_us();
		/* As fast as it goes: enough clients to fill each commit. */
		if (!submitters_given)
			opt.submitters = 32;
		submit_jobs(opt.backlog, 0);
		t1 = gp_mono_us();
		printf("backlog_jobs %ld jobs\n", opt.backlog);
		printf("backlog_acknowledged %ld jobs\n", atomic_load(&acked));
		printf("backlog_submit_rate %.0f jobs/s\n",
		    (double)atomic_load(&acked) / ((double)(t1 - t0) / 1e6));
		before = atomic_load(&dispatched) - base_dispatched;
		printf("backlog_placed_while_paused %ld jobs\n", before);
		sample(&s0);
		/*
		 * Fill: until every agent has the resume and the pool is full
		 * (or the backlog placed), the agents hold their reports: the
		 * placement of what fits is the coordinator's alone, not
		 * bound by jobs ending.
		 */
		fill = (long)opt.agents * opt.gpus < atomic_load(&acked)
		    ? (long)opt.agents * opt.gpus
		    : atomic_load(&acked);
		atomic_store(&hold_reports, 1);
		t_resume = gp_mono_us();
		if (set_offer(1) != 0)
			fprintf(stderr, "bench_agents: not every agent took "
					"the resume (%ld of %d)\n",
			    atomic_load(&offer_acks), opt.agents);
		printf("backlog_resume_seconds %.2f s\n",
		    (double)(gp_mono_us() - t_resume) / 1e6);
		wait_for(&dispatched, base_dispatched + fill, opt.drain_s);
		t_fill = gp_mono_us();
		atomic_store(&hold_reports, 0);
		printf("backlog_fill_jobs %ld jobs\n",
		    atomic_load(&dispatched) - base_dispatched);
		printf("backlog_fill_seconds %.2f s\n",
		    (double)(t_fill - t_resume) / 1e6);
		printf("backlog_fill_rate %.0f jobs/s\n",
		    (double)(atomic_load(&dispatched) - base_dispatched) /
			((double)(t_fill - t_resume) / 1e6));
		wait_for(&dispatched, base_dispatched + atomic_load(&acked),
		    opt.drain_s * 5);
		sample(&s1);
		lat = latencies(&nl, &first_ack, &last_recv);
		free(lat);
		printf("backlog_dispatched %ld jobs\n",
		    atomic_load(&dispatched) - base_dispatched);
		printf("backlog_placement_seconds %.2f s\n",
		    (double)(last_recv - t_resume) / 1e6);
		printf("backlog_placement_rate %.0f jobs/s\n",
		    last_recv > t_resume
			? (double)(atomic_load(&dispatched) -
			      base_dispatched - before) /
			    ((double)(last_recv - t_resume) / 1e6)
			: 0.0);
		wait_for(&reports_done, base_done + atomic_load(&acked),
		    opt.drain_s);
		printf("backlog_finished %ld jobs\n",
		    atomic_load(&finished_ok) - base_finished);
		print_usage_between("backlog", &s0, &s1);
	}
	printf("agents_submit_errors %ld count\n", atomic_load(&submit_errors));
	printf("agents_errors %ld count\n", atomic_load(&agent_errors));
	printf("agents_report_retries %ld count\n",
	    atomic_load(&report_retries));
	printf("agents_reregistered %ld count\n", atomic_load(&reregistered));
	fflush(stdout);
	/* The loop holds 10,000 long polls: leave without tearing down. */
	atomic_store(&stopping, 1);
	_exit(atomic_load(&submit_errors) == 0 ? 0 : 1);
}
