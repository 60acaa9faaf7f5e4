/*
 * held.c: the threads that run requests which may wait on the database
 * (held.h says why). A handler that reaches one of them suspends its
 * connection and queues it here; a thread of the pool runs it with its
 * answers captured (reply.c), keeps the answer in the request and resumes
 * the connection; libmicrohttpd then calls api_handle again on the
 * connection's own worker, which queues the answer (held_answer). The
 * worker meanwhile serves its other connections. Queued requests wait
 * for a free thread: while the database is away, the first HELD_THREADS
 * of them wait on it and the rest behind them, and no worker does.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "held.h"
#include "joblog.h"
#include "log.h"
#include "state.h"

/* Held requests at once: each may wait up to 120 s on the database. */
#define HELD_THREADS 8

struct held_job {
	struct MHD_Connection *conn;
	struct request *req;
	held_fn fn;
	int begin;
	char *url, *method;
	struct held_job *next;
};

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t held_idle = PTHREAD_COND_INITIALIZER;
/* Under held_lock. */
static struct held_job *queue_head, *queue_tail;
static int accepting, quitting, busy;
static pthread_t threads[HELD_THREADS];
static int nthreads;

static void
job_free(struct held_job *j)
{
	free(j->url);
	free(j->method);
	free(j);
}

/* Runs one job; its request is the worker's again once resumed. */
static void
run(struct held_job *j)
{
	struct reply_capture cap = {0, NULL};
	struct request *req = j->req;
	enum MHD_Result rc;

	reply_capture_set(&cap);
	rc = j->fn(j->conn, req, j->url, j->method);
	reply_capture_set(NULL);
	req->held_status = cap.status;
	req->held_resp = cap.resp;
	req->held_rc = rc;
	req->held = j->begin ? HELD_BEGUN : HELD_DONE;
	/* Last: the worker may end the request at once. */
	MHD_resume_connection(j->conn);
}

static void *
held_main(void *arg)
{
	struct held_job *j;

	(void)arg;
	pthread_mutex_lock(&held_lock);
	for (;;) {
		while (queue_head == NULL && !quitting)
			pthread_cond_wait(&held_work, &held_lock);
		if (queue_head == NULL)
			break;
		j = queue_head;
		queue_head = j->next;
		if (queue_head == NULL)
			queue_tail = NULL;
		busy++;
		pthread_mutex_unlock(&held_lock);
		run(j);
		job_free(j);
		pthread_mutex_lock(&held_lock);
		busy--;
		if (busy == 0 && queue_head == NULL)
			pthread_cond_broadcast(&held_idle);
	}
	pthread_mutex_unlock(&held_lock);
	return NULL;
}

int
held_start(void)
{
	pthread_mutex_lock(&held_lock);
	quitting = 0;
	for (nthreads = 0; nthreads < HELD_THREADS; nthreads++)
		if (pthread_create(&threads[nthreads], NULL, held_main, NULL) !=
		    0)
			break;
	accepting = nthreads > 0;
	pthread_mutex_unlock(&held_lock);
	if (nthreads < HELD_THREADS)
		gp_warn("held requests: %d of %d threads started", nthreads,
		    HELD_THREADS);
	return nthreads > 0 ? 0 : GP_EIO;
}

void
held_stop(void)
{
	int i;

	pthread_mutex_lock(&held_lock);
	accepting = 0;
	while (busy > 0 || queue_head != NULL)
		pthread_cond_wait(&held_idle, &held_lock);
	quitting = 1;
	pthread_cond_broadcast(&held_work);
	pthread_mutex_unlock(&held_lock);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	nthreads = 0;
}

int
held_offload(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method, held_fn fn, int begin)
{
	struct held_job *j = calloc(1, sizeof(*j));

	if (j == NULL || (j->url = strdup(url)) == NULL ||
	    (j->method = strdup(method)) == NULL) {
		if (j != NULL)
			job_free(j);
		return 0;
	}
	j->conn = conn;
	j->req = req;
	j->fn = fn;
	j->begin = begin;
	pthread_mutex_lock(&held_lock);
	if (!accepting) {
		pthread_mutex_unlock(&held_lock);
		job_free(j);
		return 0;
	}
	/* Suspended before a thread can take it (and resume it). */
	req->held = HELD_RUNNING;
	MHD_suspend_connection(conn);
	if (queue_tail != NULL)
		queue_tail->next = j;
	else
		queue_head = j;
	queue_tail = j;
	pthread_cond_signal(&held_work);
	pthread_mutex_unlock(&held_lock);
	return 1;
}

enum MHD_Result
held_answer(struct MHD_Connection *conn, struct request *req)
{
	struct MHD_Response *resp = req->held_resp;
	enum MHD_Result rc;

	req->held = HELD_NONE;
	req->held_resp = NULL;
	if (resp == NULL)
		return MHD_NO; /* no answer: libmicrohttpd closes */
	rc = MHD_queue_response(conn, req->held_status, resp);
	MHD_destroy_response(resp);
	return req->held_rc == MHD_YES ? rc : MHD_NO;
}
