/*
 * report.c: delivers what happens to jobs (started, output, finished) to
 * the coordinator, in order per attempt, retrying with backoff until it
 * answers 200 or 409, so that reports survive a coordinator restart. A few
 * sender threads share one table of attempts; each has its own HTTP
 * client. Output is buffered in memory per attempt up to BUFFER_CAP bytes;
 * beyond that it is dropped and a notice saying how much goes into the
 * stream instead (see docs/agent.md). When several attempts have a
 * started or finished report due at once (a node's jobs ending together,
 * reports held while the coordinator was away), a sender takes up to
 * BATCH_MAX of them into one POST /v1/agent/reports; a coordinator that
 * refuses the batch whole gets them one at a time again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/agentd.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "util.h"

#define BUFFER_CAP	 (8 << 20)	/* unsent output kept per attempt */
#define CHUNK_MAX	 (1 << 20)	/* bytes per log request */
#define FLUSH_MS	 100		/* output waits at most this long */
#define FLUSH_BYTES	 (256 << 10)	/* or until this much is waiting */
#define BACKOFF_MIN_MS	 100
#define BACKOFF_MAX_MS	 5000
#define REQUEST_TIMEOUT	 15000
#define BATCH_MAX	 64		/* reports in one batch */

struct attempt {
	struct gp_attempt_id id;
	int busy;		/* a sender works on it, unlocked */
	int gone;		/* forgotten while busy: free when done */
	int started_pending;
	pid_t pid;
	struct gp_buf log;	/* unsent output */
	int64_t log_base;	/* stream offset of log.data[0] */
	int64_t dropped;	/* bytes dropped over the cap, not yet told */
	int64_t first_unsent;	/* gp_mono_ms() when log became non-empty */
	int finished_pending;
	int64_t restored_version;	/* told with "started" */
	struct gp_exec_result result;
	int64_t next_try;	/* gp_mono_ms() */
	int backoff_ms;
	int failures;
	struct attempt *next;
};

struct gp_reports {
	struct gp_agent *agent;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct attempt *list;
	int stopping;
	int no_batch;	/* the coordinator refused a batch: single reports */
	int nthreads;
	pthread_t threads[16];
};

static struct attempt *
find(struct gp_reports *r, const struct gp_attempt_id *id)
{
	struct attempt *a;

	for (a = r->list; a != NULL; a = a->next)
		if (!a->gone && a->id.job_id == id->job_id &&
		    a->id.attempt == id->attempt)
			return a;
	return NULL;
}

static void
unlink_free(struct gp_reports *r, struct attempt *a)
{
	struct attempt **pp;

	for (pp = &r->list; *pp != NULL; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	gp_buf_free(&a->log);
	free(a);
}

int
gp_reports_add(struct gp_reports *r, const struct gp_attempt_id *id)
{
	struct attempt *a;

	pthread_mutex_lock(&r->lock);
	if (find(r, id) != NULL) {
		pthread_mutex_unlock(&r->lock);
		return GP_ECONFLICT;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		pthread_mutex_unlock(&r->lock);
		return GP_ENOMEM;
	}
	a->id = *id;
	a->next = r->list;
	r->list = a;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

void
gp_reports_forget(struct gp_reports *r, const struct gp_attempt_id *id)
{
	struct attempt *a;

	pthread_mutex_lock(&r->lock);
	if ((a = find(r, id)) != NULL) {
		if (a->busy)
			a->gone = 1;
		else
			unlink_free(r, a);
	}
	pthread_mutex_unlock(&r->lock);
}

json_t *
gp_reports_running(struct gp_reports *r)
{
	json_t *list = json_array();
	struct attempt *a;

	pthread_mutex_lock(&r->lock);
	for (a = r->list; a != NULL && list != NULL; a = a->next)
		if (!a->gone)
			json_array_append_new(list, json_pack("{sI sI}",
			    "job_id", (json_int_t)a->id.job_id, "attempt",
			    (json_int_t)a->id.attempt));
	pthread_mutex_unlock(&r->lock);
	return list;
}

void
gp_reports_on_started(void *arg, const struct gp_attempt_id *id, pid_t pid)
{
	struct gp_reports *r = arg;
	struct attempt *a;

	pthread_mutex_lock(&r->lock);
	if ((a = find(r, id)) != NULL) {
		a->started_pending = 1;
		a->pid = pid;
		pthread_cond_signal(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
}

static void
append_notice(struct attempt *a)
{
	char notice[160];
	int n;

	n = snprintf(notice, sizeof(notice), "\n[gpupool: the agent dropped "
	    "%" PRId64 " bytes of output while the coordinator was "
	    "unreachable]\n", a->dropped);
	if (gp_buf_append(&a->log, notice, (size_t)n) == 0)
		a->dropped = 0;
}

void
gp_reports_on_output(void *arg, const struct gp_attempt_id *id,
    const char *data, size_t len)
{
	struct gp_reports *r = arg;
	struct attempt *a;

	pthread_mutex_lock(&r->lock);
	if ((a = find(r, id)) == NULL)
		goto out;
	if (a->log.len == 0)
		a->first_unsent = gp_mono_ms();
	if (a->dropped > 0 && a->log.len < BUFFER_CAP / 2)
		append_notice(a);
	if (a->dropped > 0 || a->log.len + len > BUFFER_CAP ||
	    gp_buf_append(&a->log, data, len) != 0) {
		if (a->dropped == 0)
			gp_warn("output buffer full, dropping output job=%lld "
			    "attempt=%lld", (long long)id->job_id,
			    (long long)id->attempt);
		a->dropped += (int64_t)len;
	}
	/* Senders wake by themselves within FLUSH_MS; a big backlog now. */
	if (a->log.len >= FLUSH_BYTES)
		pthread_cond_signal(&r->cond);
out:
	pthread_mutex_unlock(&r->lock);
}

void
gp_reports_on_finished(void *arg, const struct gp_attempt_id *id,
    const struct gp_exec_result *result)
{
	struct gp_reports *r = arg;
	struct attempt *a;

	pthread_mutex_lock(&r->lock);
	if ((a = find(r, id)) != NULL) {
		if (a->dropped > 0)
			append_notice(a);
		a->finished_pending = 1;
		a->result = *result;
		a->result.workdir = NULL;
		pthread_cond_signal(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
}

/* When an attempt has something to send: now (0), later (ms), never (-1). */
static int64_t
due_in(const struct attempt *a, int64_t now)
{
	int64_t at;

	if (a->busy || a->gone)
		return -1;
	if (a->started_pending || (a->finished_pending && a->log.len == 0))
		at = a->next_try;
	else if (a->log.len > 0) {
		at = a->first_unsent + FLUSH_MS;
		if (a->finished_pending || a->log.len >= FLUSH_BYTES)
			at = a->next_try;
		if (at < a->next_try)
			at = a->next_try;
	} else
		return -1;
	return at <= now ? 0 : at - now;
}

enum outcome { SENT, RETRY, STALE, DROP };

static void settle(struct gp_reports *r, struct attempt *a, const char *what,
    enum outcome out, int64_t held);

static enum outcome
classify(struct attempt *a, const char *what, int ret,
    struct gp_http_response *resp)
{
	char text[256];

	if (ret == 0 && resp->status == 200)
		return SENT;
	/*
	 * Only 409 means stale. A 404 is "node not registered (yet)", as
	 * right after a coordinator restart: retry, the heartbeat thread
	 * registers again meanwhile.
	 */
	if (ret == 0 && resp->status == 409) {
		gp_info("coordinator says attempt is stale job=%lld "
		    "attempt=%lld report=%s status=%ld",
		    (long long)a->id.job_id, (long long)a->id.attempt, what,
		    resp->status);
		return STALE;
	}
	gp_http_error_text(resp, text, sizeof(text));
	if (ret == 0 && (resp->status == 400 || resp->status == 413)) {
		gp_error("coordinator refused report job=%lld attempt=%lld "
		    "report=%s status=%ld error=\"%s\"; dropping it",
		    (long long)a->id.job_id, (long long)a->id.attempt, what,
		    resp->status, text);
		return DROP;
	}
	if (a->failures++ == 0)
		gp_warn("report not delivered, will retry job=%lld "
		    "attempt=%lld report=%s error=\"%s\"",
		    (long long)a->id.job_id, (long long)a->id.attempt, what,
		    text);
	return RETRY;
}

/*
 * Adds the attempt's network bytes to its finished report (r->lock held)
 * when the coordinator takes them (its heartbeat answer said so): 1 when
 * added.
 */
static int
add_net_bytes(struct gp_reports *r, const struct attempt *a, json_t *report)
{
	if (report == NULL || !atomic_load(&r->agent->coord_net))
		return 0;
	json_object_set_new(report, "net_sent_bytes",
	    json_integer(a->result.net_sent));
	json_object_set_new(report, "net_received_bytes",
	    json_integer(a->result.net_received));
	return 1;
}

/*
 * A finished report that carried network bytes was refused (400): a
 * coordinator older than them. It goes again without them.
 */
static enum outcome
net_refused(struct gp_reports *r)
{
	gp_warn("coordinator refused a finished report with network bytes: "
	    "sending it again without them");
	atomic_store(&r->agent->net_refused, 1);
	atomic_store(&r->agent->coord_net, 0);
	return RETRY;
}

/*
 * Sends the next report of attempt a. Called unlocked, with a->busy set;
 * reads a's fields that only busy holders change, copies the rest.
 */
static void
send_one(struct gp_reports *r, struct gp_http_client *http, struct attempt *a,
    int64_t node_id)
{
	struct gp_http_response resp;
	char path[256], *body = NULL;
	enum outcome out = SENT;
	const char *what;
	json_t *json = NULL;
	size_t len = 0;
	int64_t base = 0, held = 0;
	int ret, sent_net = 0;

	pthread_mutex_lock(&r->lock);
	if (a->started_pending) {
		what = "started";
		json = json_pack("{sI si sI}", "node_id", (json_int_t)node_id,
		    "pid", (int)a->pid, "restored_version",
		    (json_int_t)a->restored_version);
	} else if (a->log.len > 0) {
		what = "log";
		len = a->log.len < CHUNK_MAX ? a->log.len : CHUNK_MAX;
		base = a->log_base;
		if ((body = malloc(len)) != NULL)
			memcpy(body, a->log.data, len);
	} else {
		what = "finished";
		json = json_pack("{sI si si ss ss so*}", "node_id",
		    (json_int_t)node_id, "exit_code", a->result.exit_code,
		    "signal", a->result.signal, "reason", a->result.reason,
		    "message", a->result.message, "offer",
		    r->agent->provider != NULL ?
		    gp_provider_offer_json(r->agent->provider) : NULL);
		sent_net = add_net_bytes(r, a, json);
	}
	pthread_mutex_unlock(&r->lock);
	if (strcmp(what, "log") == 0) {
		snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/log?"
		    "node_id=%lld&offset=%lld", (long long)a->id.job_id,
		    (long long)a->id.attempt, (long long)node_id,
		    (long long)base);
		if (body == NULL) {
			out = RETRY;
			goto done;
		}
		ret = gp_http_request(http, "POST", path, body, len,
		    "application/octet-stream", REQUEST_TIMEOUT, &resp);
	} else {
		snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/%s",
		    (long long)a->id.job_id, (long long)a->id.attempt, what);
		body = json != NULL ? json_dumps(json, JSON_COMPACT) : NULL;
		if (body == NULL) {
			out = RETRY;
			goto done;
		}
		ret = gp_http_request(http, "POST", path, body, strlen(body),
		    NULL, REQUEST_TIMEOUT, &resp);
	}
	out = classify(a, what, ret, &resp);
	if (out == DROP && sent_net)
		out = net_refused(r);
	held = base + (int64_t)len;
	if (out == SENT && strcmp(what, "log") == 0) {
		json_t *root = json_loadb(resp.body, resp.body_len, 0, NULL);
		json_t *off = json_object_get(root, "offset");
		if (json_is_integer(off))
			held = json_integer_value(off);
		json_decref(root);
		if (held < base) {
			gp_warn("coordinator holds less log than before "
			    "job=%lld attempt=%lld held=%lld sent_from=%lld",
			    (long long)a->id.job_id, (long long)a->id.attempt,
			    (long long)held, (long long)base);
			held = base + (int64_t)len;
		}
	}
	gp_http_response_fini(&resp);
done:
	free(body);
	json_decref(json);
	pthread_mutex_lock(&r->lock);
	settle(r, a, what, out, held);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/*
 * What a report's outcome does to its attempt (r->lock held): the report
 * is done (sent, or dropped), the attempt stale, or retried later; held is
 * the log offset the coordinator has after a log report.
 */
static void
settle(struct gp_reports *r, struct attempt *a, const char *what,
    enum outcome out, int64_t held)
{
	if (out == SENT || out == DROP) {
		a->failures = 0;
		a->backoff_ms = 0;
		a->next_try = 0;
		if (strcmp(what, "started") == 0)
			a->started_pending = 0;
		else if (strcmp(what, "log") == 0) {
			size_t skip = (size_t)(held - a->log_base);
			if (out == DROP || skip > a->log.len)
				skip = a->log.len;
			memmove(a->log.data, a->log.data + skip,
			    a->log.len - skip);
			a->log.len -= skip;
			a->log_base += (int64_t)skip;
			a->first_unsent = gp_mono_ms();
		} else
			a->gone = 1;	/* finished: delivered */
	} else if (out == STALE) {
		/* The coordinator is authoritative: kill it, forget it. */
		gp_executor_kill(r->agent->executor, &a->id, GP_EXEC_STALE);
		a->gone = 1;
	} else {
		a->backoff_ms = a->backoff_ms == 0 ? BACKOFF_MIN_MS :
		    a->backoff_ms * 2;
		if (a->backoff_ms > BACKOFF_MAX_MS)
			a->backoff_ms = BACKOFF_MAX_MS;
		a->next_try = gp_mono_ms() + a->backoff_ms;
	}
	if (out == SENT && strcmp(what, "finished") == 0)
		gp_debug("finished report delivered job=%lld attempt=%lld",
		    (long long)a->id.job_id, (long long)a->id.attempt);
	a->busy = 0;
	if (a->gone)
		unlink_free(r, a);
}

/* A started or finished report is what a is due to send next. */
static int
batchable(const struct attempt *a)
{
	return a->started_pending || (a->finished_pending && a->log.len == 0);
}

/*
 * Sends the started/finished reports of n attempts (busy, each with
 * batchable() true) in one request. Called unlocked. Each report's result
 * settles its attempt as a single report's would; a batch refused whole
 * (an old coordinator's 404, a 400) is retried as single reports.
 */
static void
send_batch(struct gp_reports *r, struct gp_http_client *http,
    struct attempt **as, int n, int64_t node_id)
{
	const char *what[BATCH_MAX];
	enum outcome out[BATCH_MAX];
	int sent_net[BATCH_MAX] = {0};
	struct gp_http_response resp;
	json_t *list = json_array(), *root, *results, *res, *offer = NULL;
	char *body = NULL, text[256];
	int i, ret = -1, whole_refused = 0, offer_told = 0;
	long st;

	pthread_mutex_lock(&r->lock);
	for (i = 0; i < n; i++) {
		struct attempt *a = as[i];
		json_t *one;
		if (a->started_pending) {
			what[i] = "started";
			one = json_pack("{sI sI ss si sI}", "job_id",
			    (json_int_t)a->id.job_id, "attempt",
			    (json_int_t)a->id.attempt, "event", "started",
			    "pid", (int)a->pid, "restored_version",
			    (json_int_t)a->restored_version);
		} else {
			what[i] = "finished";
			/* The owner's offer once, before the first ends. */
			if (offer == NULL && r->agent->provider != NULL)
				offer = gp_provider_offer_json(
				    r->agent->provider);
			one = json_pack("{sI sI ss si si ss ss sO*}", "job_id",
			    (json_int_t)a->id.job_id, "attempt",
			    (json_int_t)a->id.attempt, "event", "finished",
			    "exit_code", a->result.exit_code, "signal",
			    a->result.signal, "reason", a->result.reason,
			    "message", a->result.message, "offer",
			    offer_told ? NULL : offer);
			offer_told = 1;
			sent_net[i] = add_net_bytes(r, a, one);
		}
		/* Out of memory: the batch goes short and is retried. */
		if (list != NULL)
			json_array_append_new(list, one);
		else
			json_decref(one);
	}
	pthread_mutex_unlock(&r->lock);
	json_decref(offer);
	root = json_pack("{sI so}", "node_id", (json_int_t)node_id, "reports",
	    list);
	if (root != NULL)
		body = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	memset(&resp, 0, sizeof(resp));
	if (body != NULL)
		ret = gp_http_request(http, "POST", "/v1/agent/reports", body,
		    strlen(body), NULL, REQUEST_TIMEOUT, &resp);
	free(body);
	root = ret == 0 && resp.status == 200
	    ? json_loadb(resp.body, resp.body_len, 0, NULL)
	    : NULL;
	results = json_object_get(root, "results");
	if (ret == 0 && (resp.status == 400 || resp.status == 404 ||
			    resp.status == 413)) {
		gp_http_error_text(&resp, text, sizeof(text));
		gp_warn("coordinator refused a batch of reports status=%ld "
			"error=\"%s\"; sending them one at a time",
		    resp.status, text);
		whole_refused = 1;
	}
	for (i = 0; i < n; i++) {
		res = json_is_array(results) &&
			json_array_size(results) == (size_t)n
		    ? json_array_get(results, (size_t)i)
		    : NULL;
		st = (long)json_integer_value(json_object_get(res, "status"));
		if (whole_refused)
			out[i] = RETRY;
		else if (st == 200)
			out[i] = SENT;
		else if (st == 409) {
			gp_info("coordinator says attempt is stale job=%lld "
				"attempt=%lld report=%s status=409",
			    (long long)as[i]->id.job_id,
			    (long long)as[i]->id.attempt, what[i]);
			out[i] = STALE;
		} else if (st == 400 || st == 413) {
			gp_error("coordinator refused report job=%lld "
				 "attempt=%lld report=%s status=%ld; dropping "
				 "it",
			    (long long)as[i]->id.job_id,
			    (long long)as[i]->id.attempt, what[i], st);
			out[i] = sent_net[i] ? net_refused(r) : DROP;
		} else {
			if (as[i]->failures++ == 0) {
				gp_http_error_text(&resp, text, sizeof(text));
				gp_warn("report not delivered, will retry "
					"job=%lld attempt=%lld report=%s "
					"error=\"%s\" status=%ld",
				    (long long)as[i]->id.job_id,
				    (long long)as[i]->id.attempt, what[i],
				    text, st);
			}
			out[i] = RETRY;
		}
	}
	json_decref(root);
	gp_http_response_fini(&resp);
	gp_debug("reports sent in one batch reports=%d delivered=%d", n,
	    whole_refused ? 0 : n);
	pthread_mutex_lock(&r->lock);
	if (whole_refused)
		r->no_batch = 1;
	for (i = 0; i < n; i++) {
		if (whole_refused) {
			/* Again at once, one at a time. */
			as[i]->busy = 0;
			if (as[i]->gone)
				unlink_free(r, as[i]);
			continue;
		}
		settle(r, as[i], what[i], out[i], 0);
	}
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void
wait_ms(struct gp_reports *r, int64_t ms)
{
	gp_cond_wait_ms(&r->cond, &r->lock, ms);
}

static void *
sender(void *arg)
{
	struct gp_reports *r = arg;
	struct gp_http_client *http;
	struct attempt *a, *pick, *batch[BATCH_MAX];
	int64_t now, soonest, due, node_id;
	int nbatch;

	http = gp_http_client_new(r->agent->url, r->agent->token,
	    r->agent->ca_file);
	if (http == NULL) {
		gp_error("reports: cannot create an HTTP client");
		return NULL;
	}
	gp_http_client_follow(http, &r->agent->coord_at);
	pthread_mutex_lock(&r->lock);
	while (!r->stopping) {
		now = gp_mono_ms();
		pick = NULL;
		soonest = 1000;
		for (a = r->list; a != NULL; a = a->next) {
			if ((due = due_in(a, now)) < 0)
				continue;
			if (due == 0) {
				pick = a;
				break;
			}
			if (due < soonest)
				soonest = due;
		}
		pthread_mutex_lock(&r->agent->lock);
		node_id = r->agent->node_id;
		pthread_mutex_unlock(&r->agent->lock);
		if (pick == NULL || node_id == 0) {
			wait_ms(r, pick == NULL ? soonest : 100);
			continue;
		}
		pick->busy = 1;
		/* Others due with a started or finished report go along. */
		nbatch = 0;
		if (!r->no_batch && batchable(pick)) {
			batch[nbatch++] = pick;
			for (a = pick->next; a != NULL && nbatch < BATCH_MAX;
			    a = a->next)
				if (due_in(a, now) == 0 && batchable(a)) {
					a->busy = 1;
					batch[nbatch++] = a;
				}
		}
		pthread_mutex_unlock(&r->lock);
		if (nbatch > 1)
			send_batch(r, http, batch, nbatch, node_id);
		else
			send_one(r, http, pick, node_id);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	gp_http_client_free(http);
	return NULL;
}

struct gp_reports *
gp_reports_new(struct gp_agent *agent, int nthreads)
{
	struct gp_reports *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->agent = agent;
	pthread_mutex_init(&r->lock, NULL);
	gp_cond_init_monotonic(&r->cond);
	if (nthreads > (int)GP_ARRAY_LEN(r->threads))
		nthreads = (int)GP_ARRAY_LEN(r->threads);
	for (r->nthreads = 0; r->nthreads < nthreads; r->nthreads++)
		if (pthread_create(&r->threads[r->nthreads], NULL, sender,
		    r) != 0)
			break;
	if (r->nthreads == 0) {
		gp_error("reports: cannot start sender threads");
		free(r);
		return NULL;
	}
	return r;
}

void
gp_reports_set_restored(struct gp_reports *r, const struct gp_attempt_id *id,
    int64_t version)
{
	struct attempt *a;

	pthread_mutex_lock(&r->lock);
	if ((a = find(r, id)) != NULL)
		a->restored_version = version;
	pthread_mutex_unlock(&r->lock);
}

int
gp_reports_wait_empty(struct gp_reports *r, int64_t timeout_ms)
{
	int64_t end = gp_mono_ms() + timeout_ms;
	int empty;

	pthread_mutex_lock(&r->lock);
	while (r->list != NULL && gp_mono_ms() < end)
		wait_ms(r, 50);
	empty = r->list == NULL;
	pthread_mutex_unlock(&r->lock);
	return empty ? 0 : GP_ETIMEDOUT;
}

static int
pending(struct gp_reports *r)
{
	struct attempt *a;

	for (a = r->list; a != NULL; a = a->next)
		if (!a->gone && (a->busy || a->started_pending ||
		    a->log.len > 0 || a->finished_pending))
			return 1;
	return 0;
}

void
gp_reports_free(struct gp_reports *r, int grace_ms)
{
	int64_t end = gp_mono_ms() + grace_ms;
	int i;

	if (r == NULL)
		return;
	pthread_mutex_lock(&r->lock);
	while (pending(r) && gp_mono_ms() < end)
		wait_ms(r, 50);
	r->stopping = 1;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	for (i = 0; i < r->nthreads; i++)
		pthread_join(r->threads[i], NULL);
	while (r->list != NULL)
		unlink_free(r, r->list);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
