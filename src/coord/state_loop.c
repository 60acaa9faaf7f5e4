/*
 * state_loop.c: the state thread: ops (made by handlers, answered after
 * the commit), the dispatch of a batch's ops, purge of finished jobs,
 * publishing a batch's effects, the loop itself, start and stop.
 * Part of the state module (state_int.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "state.h"
#include "state_int.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "leader.h"
#include "sched.h"

static pthread_mutex_t refuse_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int refusal;	/* enum state_refusal; set once */
static char refusal_why[256];	/* under refuse_lock */
static pthread_mutex_t op_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t op_cond;	/* monotonic: gp_cond_init_monotonic */
static struct op *op_head, *op_tail;
static int stopping;
static int thread_exited; /* under op_lock: nobody takes ops any more */
static pthread_t state_thread;
struct effect *effects;
size_t neffects, capeffects;
struct job **woken_jobs;
size_t nwoken, capwoken;

/* ---- ops ---- */

struct op *
op_new(enum op_type type, struct token_entry *caller)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return NULL;
	op->type = type;
	if (caller != NULL)
		op->caller = *caller;
	gp_jobspec_init(&op->spec);
	return op;
}

void
op_free(struct op *op)
{
	if (op == NULL)
		return;
	gp_jobspec_fini(&op->spec);
	json_decref(op->body);
	json_decref(op->result);
	free(op->tasks);
	free(op);
}

/*
 * The state thread is done with op: resume its connection, which frees it,
 * unless the connection went first (op_abandon), or there never was one.
 */
static void
op_answer(struct op *op)
{
	int expected = 0;

	if (op->conn != NULL &&
	    atomic_compare_exchange_strong(&op->claim, &expected, OP_ANSWERED))
		notify_resume(op->conn, op->req);
	else
		op_free(op);
}

void
op_abandon(struct op *op)
{
	int expected = 0;

	/* Answered but never resumed (the connection closed): ours. */
	if (!atomic_compare_exchange_strong(&op->claim, &expected,
		OP_ABANDONED))
		op_free(op);
}

/* ---- refusals: nothing more is committed ---- */

void
state_refuse(enum state_refusal kind, const char *why)
{
	pthread_mutex_lock(&refuse_lock);
	if (atomic_load(&refusal) == STATE_REFUSE_NONE) {
		gp_strlcpy(refusal_why, why != NULL ? why : "", sizeof(refusal_why));
		atomic_store(&refusal, kind);
	}
	pthread_mutex_unlock(&refuse_lock);
}

enum state_refusal
state_refusal(void)
{
	return (enum state_refusal)atomic_load(&refusal);
}

void
state_refusal_message(char *out, size_t len)
{
	pthread_mutex_lock(&refuse_lock);
	if (atomic_load(&refusal) == STATE_REFUSE_NOT_LEADER)
		snprintf(out, len, "not the leader: this coordinator lost the "
		    "lead (%s); nothing of this request was committed; retry "
		    "at the leader", refusal_why);
	else
		snprintf(out, len, "not committed: the coordinator is stopping "
		    "(%s); nothing of this request was committed; retry",
		    refusal_why);
	pthread_mutex_unlock(&refuse_lock);
}

/* op is answered as the refusal says, whatever it had. */
static void
refuse_op(struct op *op)
{
	char msg[400];

	state_refusal_message(msg, sizeof(msg));
	set_error(op, 503, "%s", msg);
	op->refused = state_refusal();
}

void
state_submit_op(struct op *op)
{
	pthread_mutex_lock(&op_lock);
	if (thread_exited) {
		/*
		 * Shutting down: a handler that raced the state thread's last
		 * batch is answered now, so that no connection stays
		 * suspended when the HTTP daemon stops.
		 */
		pthread_mutex_unlock(&op_lock);
		if (state_refusal() != STATE_REFUSE_NONE) {
			refuse_op(op);
		} else {
			set_error(op, 503, "the coordinator is stopping; retry");
			op->refused = STATE_REFUSE_STOPPING;
		}
		op_answer(op);
		return;
	}
	op->next = NULL;
	if (op_tail != NULL)
		op_tail->next = op;
	else
		op_head = op;
	op_tail = op;
	pthread_cond_signal(&op_cond);
	pthread_mutex_unlock(&op_lock);
}

void
set_error(struct op *op, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	op->status = status;
	json_decref(op->result);
	op->result = json_pack("{s:s}", "error", msg);
}

static void
apply(struct op *op)
{
	switch (op->type) {
	case OP_SUBMIT:
		apply_submit(op);
		break;
	case OP_SUBMIT_ARRAY:
		apply_submit_array(op);
		break;
	case OP_CANCEL:
		apply_cancel(op);
		break;
	case OP_TOKEN_CREATE:
		apply_token_create(op);
		break;
	case OP_REGISTER:
		apply_register(op);
		break;
	case OP_STARTED:
		apply_started(op);
		break;
	case OP_FINISHED:
		apply_finished(op);
		break;
	case OP_LOST:
		apply_lost(op);
		break;
	case OP_CHECKPOINT:
		apply_checkpoint(op);
		break;
	case OP_OFFER:
		apply_offer(op);
		break;
	case OP_LEAVE:
		apply_leave(op);
		break;
	case OP_IMAGE_SIGNED:
		apply_image_signed(op);
		break;
	case OP_ACCT:
		acct_apply(op);
		break;
	case OP_TOKEN_REVOKE:
		apply_token_revoke(op);
		break;
	case OP_REPORTS:
		apply_reports(op);
		break;
	case OP_IDLE:
		apply_idle(op);
		break;
	}
}

/*
 * Finished jobs leave memory (--min-job-age, as Slurm's MinJobAge): a
 * job that ended more than min_job_age_ms ago is freed, its row in
 * state.db answering for it from then on (state_job_any). done_ids holds
 * the finished jobs still in memory in the order they ended (a ring), so
 * a batch looks only at the oldest; at most PURGE_JOBS_MAX a batch, so
 * that the end of 100,000 jobs never holds the write lock for long
 * (returns 1 when more are due: the next batch runs at once).
 */
#define PURGE_JOBS_MAX 512
static int64_t *done_ids;
static size_t done_head, done_len, done_cap;

void
done_reset(void)
{
	free(done_ids);
	done_ids = NULL;
	done_head = done_len = done_cap = 0;
}

void
done_push(int64_t id)
{
	if (state.cfg.min_job_age_ms <= 0)
		return;
	if (done_len == done_cap) {
		size_t cap = done_cap ? done_cap * 2 : 1024, i;
		int64_t *p = malloc(cap * sizeof(*p));
		if (p == NULL)
			return; /* it stays in memory, as without a purge */
		for (i = 0; i < done_len; i++)
			p[i] = done_ids[(done_head + i) % done_cap];
		free(done_ids);
		done_ids = p;
		done_cap = cap;
		done_head = 0;
	}
	done_ids[(done_head + done_len) % done_cap] = id;
	done_len++;
}

static int
cmp_finished(const void *a, const void *b)
{
	const struct job *x = state_job(*(const int64_t *)a);
	const struct job *y = state_job(*(const int64_t *)b);
	int64_t fx = x != NULL ? x->finished_ms : 0;
	int64_t fy = y != NULL ? y->finished_ms : 0;

	return fx < fy ? -1 : fx > fy;
}

/* At start-up: the loaded finished jobs in the order they ended. */
void
done_sort(void)
{
	if (done_len > 0)
		qsort(done_ids, done_len, sizeof(*done_ids), cmp_finished);
}

/*
 * What still needs job in memory: a waiter or a log follower attached
 * (notify.c; under notify_lock), this batch's wake-ups, or the queue. Its accounting was settled
 * when it ended (job_finish closes its attempt's meter), and checkpoint
 * and output reads of a job that left look it up with state_job_brief.
 */
static int
job_pinned(const struct job *job)
{
	size_t i;
	int pinned;

	/*
	 * Ended in this very batch (a min-job-age shorter than the batch):
	 * publish wakes its waiters after the purge, so it stays till the
	 * next (test_state_random found the use after free).
	 */
	for (i = 0; i < nwoken; i++)
		if (woken_jobs[i] == job)
			return 1;
	pthread_mutex_lock(&notify_lock);
	pinned = job->waiters != NULL;
	pthread_mutex_unlock(&notify_lock);
	return pinned || job->queue_pos >= 0;
}

static int
purge_finished(int64_t now_ms)
{
	int64_t cutoff = now_ms - state.cfg.min_job_age_ms, id;
	size_t seen = 0, n = done_len;
	struct job *job;
	int freed = 0;

	if (state.cfg.min_job_age_ms <= 0)
		return 0;
	while (done_len > 0 && seen < n && seen < PURGE_JOBS_MAX) {
		id = done_ids[done_head];
		job = state_job(id);
		if (job != NULL && job_finished(job) &&
		    job->finished_ms > cutoff)
			break; /* the oldest is young yet: so are the rest */
		done_head = (done_head + 1) % done_cap;
		done_len--;
		seen++;
		if (job == NULL || !job_finished(job))
			continue;
		if (job_pinned(job)) {
			done_push(id); /* again later */
			continue;
		}
		state.jobs[id] = NULL;
		state.jobs_resident--;
		if (job->state <= JOB_TIMEOUT)
			state.purged[job->state]++;
		state.purged_now++;
		job_free(job);
		freed++;
	}
	if (freed > 0)
		gp_debug("finished jobs left memory purged=%d in_memory=%lld",
		    freed, (long long)state.jobs_resident);
	return seen == PURGE_JOBS_MAX && freed > 0 && done_len > 0;
}

struct job *
state_job_any(int64_t id, int *stored)
{
	struct job *j = state_job(id);

	*stored = 0;
	if (j != NULL || id <= 0 || id >= state.next_job_id)
		return j;
	if (state.store->ops->read_job(state.store, id, &j) != 0)
		return NULL;
	/* As load_job makes it, but kept out of the model. */
	job_from_disk(j);
	*stored = 1;
	return j;
}

int
state_job_brief(int64_t id, char *user, enum job_state *st,
    int64_t *finished_ms)
{
	const struct job *j;
	int rc = GP_ENOENT, s = 0;

	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(id)) != NULL) {
		gp_strlcpy(user, j->user, GP_NAME_MAX + 1);
		*st = j->state;
		*finished_ms = j->finished_ms;
		rc = 0;
	} else if (id > 0 && id < state.next_job_id) {
		rc = state.store->ops->read_job_brief(state.store, id, user, &s,
		    finished_ms);
		*st = (enum job_state)s;
	}
	pthread_rwlock_unlock(&state.lock);
	return rc;
}

static void
publish(void)
{
	size_t i;

	pthread_mutex_lock(&notify_lock);
	for (i = 0; i < neffects; i++) {
		struct effect *e = &effects[i];
		if (e->assign != NULL)
			json_array_append_new(e->node->outbox_assign,
			    e->assign);
		if (e->cancel != NULL)
			json_array_append_new(e->node->outbox_cancel,
			    e->cancel);
		if (e->stop != NULL)
			json_array_append_new(e->node->outbox_stop, e->stop);
		notify_wake_node(e->node);
	}
	for (i = 0; i < nwoken; i++)
		notify_wake_job(woken_jobs[i]);
	pthread_mutex_unlock(&notify_lock);
	neffects = 0;
	nwoken = 0;
}

/*
 * The batch's commit failed (the store's error says why: PostgreSQL
 * failing past its retry window, the retry given up as the coordinator
 * stops, a fence found another leader): memory is ahead of the store,
 * so nothing more is committed. Its ops are answered 503 (refuse_op),
 * nothing of it is published, and the coordinator stops.
 */
static void
batch_not_committed(struct op *batch, int rc)
{
	struct op *op;
	size_t i;
	int n = 0;

	state_refuse(STATE_REFUSE_STOPPING, gp_store_error(state.store));
	for (op = batch; op != NULL; op = op->next, n++) {
		refuse_op(op);
		if (state.store->commit_unknown)
			set_error(op, 503, "not confirmed: the coordinator "
			    "stops (%s) and the database's answer to this "
			    "request's commit was lost: whether it was "
			    "committed is unknown; retry (a submission with "
			    "the same idempotency key is not made twice)",
			    gp_store_error(state.store));
	}
	for (i = 0; i < neffects; i++) {
		json_decref(effects[i].assign);
		json_decref(effects[i].cancel);
		json_decref(effects[i].stop);
	}
	neffects = 0;
	nwoken = 0;
	gp_error("state batch not committed ops=%d rc=%s error=\"%s\": "
		 "answered 503, nothing more is committed; stopping",
	    n, gp_strerror(rc), gp_store_error(state.store));
	coord_stop(state_refusal() == STATE_REFUSE_NOT_LEADER
		? LEADER_EXIT_STEPPED_DOWN
		: 1);
}

/* A batch this long is logged with where its time went. */
#define SLOW_BATCH_US 100000

void
state_batch_run(struct op *batch, int64_t now, struct state_batch_clock *clk)
{
	struct op *op;
	int64_t t[8];
	int nops, rc;

	t[0] = gp_mono_us();
	pthread_rwlock_wrlock(&state.lock);
	t[1] = gp_mono_us();
	/* One batch, one transaction (group commit: store.h). */
	if (state.store->ops->begin(state.store) != 0)
		gp_fatalx("cannot begin a store transaction: %s",
		    gp_store_error(state.store));
	for (op = batch, nops = 0; op != NULL; op = op->next, nops++)
		apply(op);
	t[6] = gp_mono_us();
	if (now - clk->last_lease_check >= 100 || clk->lease_more) {
		clk->lease_more = expire_leases(now);
		clk->last_lease_check = now;
	}
	clk->purge_more = purge_finished(gp_now_ms());
	t[7] = gp_mono_us();
	acct_tick(now);
	t[2] = gp_mono_us();
	/*
	 * sched_more: the last pass placed jobs and left some of the
	 * queue unseen (depth-bounded); the next pass must run even
	 * when nothing else changed (agents holding their reports,
	 * say), or the loop spins on empty batches and the rest of
	 * the queue waits for the next event.
	 */
	/* A job's back-off after failed starts has ended (state_retry.c). */
	if (retry_due(gp_now_ms()))
		state.sched_dirty = 1;
	if (state.sched_dirty || state.sched_more)
		live_schedule();
	queue_compact();
	pthread_rwlock_unlock(&state.lock);
	t[3] = gp_mono_us();
	/*
	 * Durable before anybody hears of it. A failed commit leaves
	 * memory ahead of disk: stop, and let the restart reload.
	 */
	if ((rc = state.store->ops->commit(state.store)) != 0) {
		batch_not_committed(batch, rc);
		return;
	}
	t[4] = gp_mono_us();
	publish();
	t[5] = gp_mono_us();
	if (t[5] - t[0] >= SLOW_BATCH_US)
		gp_warn("slow state batch ops=%d lock_wait_ms=%.1f "
			"apply_ms=%.1f leases_ms=%.1f acct_ms=%.1f "
			"schedule_ms=%.1f commit_ms=%.1f publish_ms=%.1f",
		    nops, (double)(t[1] - t[0]) / 1e3,
		    (double)(t[6] - t[1]) / 1e3,
		    (double)(t[7] - t[6]) / 1e3,
		    (double)(t[2] - t[7]) / 1e3,
		    (double)(t[3] - t[2]) / 1e3,
		    (double)(t[4] - t[3]) / 1e3,
		    (double)(t[5] - t[4]) / 1e3);
}

static void *
state_main(void *arg)
{
	struct state_batch_clock clk = {0, 0, 0};
	struct op *batch, *op, *next;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&op_lock);
		if (op_head == NULL && !stopping &&
		    (state_refusal() != STATE_REFUSE_NONE ||
			(!state.sched_more && !clk.lease_more &&
			    !clk.purge_more))) {
			gp_cond_wait_ms(&op_cond, &op_lock, 100);
		}
		batch = op_head;
		op_head = op_tail = NULL;
		if (batch == NULL && stopping) {
			thread_exited = 1;
			pthread_mutex_unlock(&op_lock);
			break;
		}
		pthread_mutex_unlock(&op_lock);

		if (state_refusal() != STATE_REFUSE_NONE) {
			/* Nothing is committed any more (state_refuse). */
			for (op = batch; op != NULL; op = op->next)
				refuse_op(op);
		} else {
			state_batch_run(batch, gp_mono_ms(), &clk);
		}
		for (op = batch; op != NULL; op = next) {
			next = op->next;
			op_answer(op);
		}
		notify_expire(gp_mono_ms());
	}
	return NULL;
}

/* The op queue's wake-up, timed on the monotonic clock. 0 or GP_ENOMEM. */
int
loop_init(void)
{
	return gp_cond_init_monotonic(&op_cond);
}

int
state_start_thread(void)
{
	return pthread_create(&state_thread, NULL, state_main, NULL) == 0
	    ? 0
	    : GP_EIO;
}

void
state_stop_thread(void)
{
	pthread_mutex_lock(&op_lock);
	stopping = 1;
	pthread_cond_signal(&op_cond);
	pthread_mutex_unlock(&op_lock);
	pthread_join(state_thread, NULL);
}
