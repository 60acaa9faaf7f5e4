/*
 * notify.h: long polls: suspended connections and their wake-ups.
 */
#ifndef GP_COORD_NOTIFY_H
#define GP_COORD_NOTIFY_H

#include "state.h"

/* notify.c */
struct waiter {
	struct MHD_Connection *conn;
	struct request *req;
	int64_t deadline_mono;
	int kind; /* WAIT_POLL, WAIT_LOG, WAIT_JOB */
	int64_t key; /* node id or job id */
	struct waiter *next_on_key;
	struct waiter *next_all, *prev_all;
};
enum { WAIT_POLL = 1, WAIT_LOG, WAIT_JOB };
extern pthread_mutex_t notify_lock;
/* Suspends conn until woken or deadline; call with notify_lock held. */
void notify_wait(struct MHD_Connection *conn, struct request *req, int kind,
    int64_t key, int64_t wait_ms);
/* Wakes the node's poller / the job's waiters. Take notify_lock first. */
void notify_wake_node(struct node *node);
void notify_wake_job(struct job *job);
/*
 * Ends the node's waiting poll, if any, with an empty answer: it belongs to
 * an agent process that a new registration replaced (one killed with its
 * poll still suspended here), and must not carry away assignments meant for
 * the new one. Take notify_lock first.
 */
void notify_supersede_node(struct node *node);
/* Agents' polls held open now (the gauge gpupool_agent_polls_waiting). */
int64_t notify_polls_waiting(void);
/* Resumes every waiter whose deadline passed (called by the ticker). */
void notify_expire(int64_t now_mono);
/* Called when a request finishes, to unlink a waiter still listed. */
void notify_forget(struct request *req);
/* Resume a suspended connection that has its answer ready. */
void notify_resume(struct MHD_Connection *conn, struct request *req);

#endif
