/*
 * state_retry.c: the requeue back-off for attempts that fail to start.
 * An attempt that ends because its node could not start it
 * ("image_unavailable", "restore_failed", "refused": the job's image, its
 * checkpoint or the owner's rules, not the owner taking the GPU back)
 * puts the job back in the queue, but not straight back on the same
 * node: the job waits 1 s, then 2, 4 ... up to 60 s after each such
 * failure in a row, and for a while keeps off the nodes where it failed
 * whenever other nodes can take it. An attempt that started and ran
 * resets it. Reasons that are not the job's doing (reclaimed, preempted,
 * node lost, window closed, agent stopped, provider left) requeue at once
 * as before. Runs in the state thread (state_int.h); docs/scheduling.md
 * ("Back-off after failed starts") explains it to users.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "state_int.h"
#include "gp.h"
#include "log.h"
#include "sched.h"
#include "util.h"

/*
 * Kubernetes waits 10 s doubling to 5 min before pulling an image again:
 * it retries on the same node, from a registry that may be down. Here a
 * failed start is most often one node's (its cache, its owner's rules)
 * and the job tries other nodes first, so the first retry comes sooner
 * (1 s) and the cap is lower (60 s): a job that can start once its image
 * is pushed or a node frees up does not sit idle for minutes, yet a job
 * no node can start makes one attempt a minute, not a hundred a second
 * (MAX_ATTEMPTS in state_job.c is then reached after about three hours,
 * not in seconds).
 */
#define RETRY_BASE_MS  1000
#define RETRY_CAP_MS   60000
/* How long a node where the job failed to start is kept off. */
#define RETRY_AVOID_MS (5 * 60 * 1000)

/* The earliest end of a back-off the scheduler has not seen end yet. */
static int64_t wake_ms;

int
reason_start_failed(const char *reason)
{
	return reason != NULL && (strcmp(reason, "image_unavailable") == 0 ||
	    strcmp(reason, "restore_failed") == 0 ||
	    strcmp(reason, "refused") == 0);
}

int64_t
retry_delay_ms(int failures)
{
	int64_t d = RETRY_BASE_MS;

	if (failures <= 0)
		return 0;
	while (--failures > 0 && d < RETRY_CAP_MS)
		d *= 2;
	return d < RETRY_CAP_MS ? d : RETRY_CAP_MS;
}

static void
wake_at(int64_t ms)
{
	if (ms > 0 && (wake_ms == 0 || ms < wake_ms))
		wake_ms = ms;
}

int
retry_due(int64_t now_ms)
{
	if (wake_ms == 0 || now_ms < wake_ms)
		return 0;
	wake_ms = 0;
	return 1;
}

static struct job_retry *
retry_of(struct job *job)
{
	if (job->retry == NULL &&
	    (job->retry = calloc(1, sizeof(*job->retry))) == NULL)
		gp_fatalx("out of memory");
	return job->retry;
}

void
retry_clear(struct job *job)
{
	free(job->retry);
	job->retry = NULL;
	job->sj.not_before_ms = 0;
	job->sj.retry_why = NULL;
	job->sj.avoid_nodes = NULL;
	job->sj.navoid = 0;
}

/* Keeps job off node_id until until_ms (the oldest entry makes room). */
static void
avoid_add(struct job_retry *r, int64_t node_id, int64_t until_ms)
{
	int i;

	for (i = 0; i < r->navoid; i++)
		if (r->avoid[i] == node_id)
			break;
	if (i == r->navoid) {
		if (r->navoid == RETRY_AVOID_MAX) {
			memmove(&r->avoid[0], &r->avoid[1],
			    (RETRY_AVOID_MAX - 1) * sizeof(r->avoid[0]));
			memmove(&r->avoid_until_ms[0], &r->avoid_until_ms[1],
			    (RETRY_AVOID_MAX - 1) *
			        sizeof(r->avoid_until_ms[0]));
			i = RETRY_AVOID_MAX - 1;
		} else {
			r->navoid++;
		}
		r->avoid[i] = node_id;
	}
	r->avoid_until_ms[i] = until_ms;
}

void
retry_node_failed(struct job *job, int64_t node_id, const char *reason)
{
	struct job_retry *r;
	struct node *node;

	if (!reason_start_failed(reason) || node_id == 0)
		return;
	r = retry_of(job);
	avoid_add(r, node_id, gp_now_ms() + RETRY_AVOID_MS);
	node = state_node(node_id);
	gp_strlcpy(r->node, node != NULL ? node->name : "", sizeof(r->node));
}

/* The wait's words: "retrying after image_unavailable on node n1 ...". */
static void
retry_words(struct job_retry *r)
{
	int n;

	n = snprintf(r->why, sizeof(r->why), "retrying after %s",
	    r->reason);
	if (r->node[0] != '\0' && n > 0 && (size_t)n < sizeof(r->why))
		n += snprintf(r->why + n, sizeof(r->why) - (size_t)n,
		    " on node %s", r->node);
	if (r->failures > 1 && n > 0 && (size_t)n < sizeof(r->why))
		snprintf(r->why + n, sizeof(r->why) - (size_t)n,
		    " (%d failed starts in a row)", r->failures);
}

int64_t
retry_requeued(struct job *job, const char *reason, int ran)
{
	struct job_retry *r;

	if (!reason_start_failed(reason)) {
		/* Started and ran: whatever failed before is forgotten. */
		if (ran)
			retry_clear(job);
		else if (job->retry != NULL)
			job->retry->not_before_ms = 0; /* not its doing */
		return 0;
	}
	r = retry_of(job);
	r->failures++;
	gp_strlcpy(r->reason, reason, sizeof(r->reason));
	r->not_before_ms = gp_now_ms() + retry_delay_ms(r->failures);
	retry_words(r);
	wake_at(r->not_before_ms);
	return retry_delay_ms(r->failures);
}

void
retry_sched_job(struct job *job, int64_t now_ms)
{
	struct job_retry *r = job->retry;
	int i, n = 0;

	if (r == NULL) {
		job->sj.not_before_ms = 0;
		job->sj.retry_why = NULL;
		job->sj.avoid_nodes = NULL;
		job->sj.navoid = 0;
		return;
	}
	job->sj.not_before_ms = r->not_before_ms > now_ms ? r->not_before_ms
	                                                  : 0;
	job->sj.retry_why = r->why;
	if (r->not_before_ms > now_ms)
		wake_at(r->not_before_ms);
	for (i = 0; i < r->navoid; i++)
		if (r->avoid_until_ms[i] > now_ms)
			r->avoid_now[n++] = r->avoid[i];
	job->sj.avoid_nodes = n > 0 ? r->avoid_now : NULL;
	job->sj.navoid = n;
}

void
retry_wait_words(const struct job *job, const char *why, char *buf,
    size_t len)
{
	int64_t left;

	if (job->retry == NULL || job->wait_reason != GP_SCHED_WAIT_BACKOFF) {
		gp_strlcpy(buf, why, len);
		return;
	}
	left = job->retry->not_before_ms - gp_now_ms();
	if (left > 0)
		snprintf(buf, len, "%s: next try in %lld s", why,
		    (long long)((left + 999) / 1000));
	else
		snprintf(buf, len, "%s: next try now", why);
}

void
retry_restore(struct job *job)
{
	const struct attempt_record *a;
	struct job_retry *r;
	struct node *node;
	int i;

	for (i = job->nhistory; i > 0; i--)
		if (!reason_start_failed(job->history[i - 1].reason))
			break;
	if (i == job->nhistory)
		return;
	r = retry_of(job);
	r->failures = job->nhistory - i;
	a = &job->history[job->nhistory - 1];
	gp_strlcpy(r->reason, a->reason, sizeof(r->reason));
	node = state_node(a->node_id);
	/* A gang's record names its rank-0 node, not the part that failed. */
	if (job->nparts <= 1 && node != NULL) {
		gp_strlcpy(r->node, node->name, sizeof(r->node));
		for (; i < job->nhistory; i++)
			avoid_add(r, job->history[i].node_id,
			    job->history[i].finished_ms + RETRY_AVOID_MS);
	}
	r->not_before_ms = a->finished_ms + retry_delay_ms(r->failures);
	retry_words(r);
	wake_at(r->not_before_ms);
}
