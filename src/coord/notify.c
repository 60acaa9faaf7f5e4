/*
 * notify.c: long polls. A handler with nothing to answer yet suspends its
 * connection (libmicrohttpd's suspend/resume) and leaves a waiter: on a
 * node (an agent's poll for work) or on a job (a log follower, a `wait`).
 * Whoever changes what they wait for resumes them at once; the state
 * thread resumes the ones whose time is up. No thread is held per waiting
 * client, so thousands of agents can hold a poll each.
 *
 * Every waiter is also on one list in deadline order, so that finding the
 * ones whose time is up (after every batch of the state thread) looks at
 * those only, not at the 10,000 polls of a large pool. Deadlines mostly
 * arrive in order (the same wait_ms, later), so an insertion searches from
 * the tail and usually stops at once.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "notify.h"
#include "state.h"
#include "log.h"

pthread_mutex_t notify_lock = PTHREAD_MUTEX_INITIALIZER;
/* Every waiter, earliest deadline first. */
static struct waiter *all_waiters, *last_waiter;
/* Nodes with a poll waiting (changed under notify_lock, read without). */
static _Atomic int64_t polls_waiting;

static void
unlink_all(struct waiter *w)
{
	if (w->prev_all != NULL)
		w->prev_all->next_all = w->next_all;
	else
		all_waiters = w->next_all;
	if (w->next_all != NULL)
		w->next_all->prev_all = w->prev_all;
	else
		last_waiter = w->prev_all;
	w->next_all = w->prev_all = NULL;
}

/* Inserts w after every waiter whose deadline is not later than its own. */
static void
link_all(struct waiter *w)
{
	struct waiter *after = last_waiter;

	while (after != NULL && after->deadline_mono > w->deadline_mono)
		after = after->prev_all;
	w->prev_all = after;
	w->next_all = after != NULL ? after->next_all : all_waiters;
	if (w->next_all != NULL)
		w->next_all->prev_all = w;
	else
		last_waiter = w;
	if (after != NULL)
		after->next_all = w;
	else
		all_waiters = w;
}

/* Removes w from the list of its node or job. */
static void
unlink_key(struct waiter *w)
{
	struct waiter **pp;
	struct node *node;
	struct job *job;

	if (w->kind == WAIT_POLL) {
		node = state_node(w->key);
		if (node != NULL && node->poller == w) {
			node->poller = NULL;
			atomic_fetch_sub(&polls_waiting, 1);
		}
		return;
	}
	job = state_job(w->key);
	if (job == NULL)
		return;
	for (pp = &job->waiters; *pp != NULL; pp = &(*pp)->next_on_key) {
		if (*pp == w) {
			*pp = w->next_on_key;
			break;
		}
	}
}

/* Resumes w's connection and frees w. Call with notify_lock held. */
static void
fire(struct waiter *w)
{
	struct request *req = w->req;

	unlink_all(w);
	unlink_key(w);
	req->waiter = NULL;
	notify_resume(w->conn, req);
	free(w);
}

void
notify_resume(struct MHD_Connection *conn, struct request *req)
{
	req->resumed = 1;
	req->suspended = 0;
	MHD_resume_connection(conn);
}

void
notify_wait(struct MHD_Connection *conn, struct request *req, int kind,
    int64_t key, int64_t wait_ms)
{
	struct waiter *w;
	struct node *node;
	struct job *job;

	/*
	 * Stopping: never suspend. coord_stopping is set before the final
	 * notify_expire takes notify_lock, and we hold that lock, so a
	 * waiter is either registered before that sweep (and fired by it)
	 * or sees the flag here.
	 */
	w = coord_stopping ? NULL : calloc(1, sizeof(*w));
	if (w == NULL) {
		/* Answer at once with what there is. */
		req->resumed = 1;
		return;
	}
	w->conn = conn;
	w->req = req;
	w->kind = kind;
	w->key = key;
	w->deadline_mono = gp_mono_ms() + wait_ms;
	if (kind == WAIT_POLL) {
		node = state_node(key);
		/* A newer poll from the same node replaces the old one. */
		notify_supersede_node(node);
		node->poller = w;
		atomic_fetch_add(&polls_waiting, 1);
	} else {
		job = state_job(key);
		w->next_on_key = job->waiters;
		job->waiters = w;
	}
	link_all(w);
	req->waiter = w;
	req->waited = 1;
	req->resumed = 0;
	req->suspended = 1;
	MHD_suspend_connection(conn);
}

void
notify_wake_node(struct node *node)
{
	if (node->poller != NULL)
		fire(node->poller);
}

int64_t
notify_polls_waiting(void)
{
	return atomic_load(&polls_waiting);
}

void
notify_supersede_node(struct node *node)
{
	if (node->poller != NULL) {
		node->poller->req->superseded = 1;
		fire(node->poller);
	}
}

void
notify_wake_job(struct job *job)
{
	while (job->waiters != NULL)
		fire(job->waiters);
}

void
notify_expire(int64_t now_mono)
{
	pthread_mutex_lock(&notify_lock);
	while (all_waiters != NULL && all_waiters->deadline_mono <= now_mono)
		fire(all_waiters);
	pthread_mutex_unlock(&notify_lock);
}

void
notify_forget(struct request *req)
{
	pthread_mutex_lock(&notify_lock);
	if (req->waiter != NULL) {
		struct waiter *w = req->waiter;
		unlink_all(w);
		unlink_key(w);
		free(w);
		req->waiter = NULL;
	}
	pthread_mutex_unlock(&notify_lock);
}
