/*
 * held.h: requests that may wait on the database, run off the HTTP
 * workers (held.c). The blob users' routes (checkpoints, images, data
 * sets: API_HELD in route.h) read and write records that PostgreSQL may
 * hold for up to 120 s (store_meta.h), or wait for a lock that such a
 * request holds meanwhile (blob_lock, data_lock). libmicrohttpd gives each
 * connection to one of its few worker threads for good: a handler that
 * waits there stalls every other connection of that worker (agents'
 * heartbeats and polls, reads), so such a handler runs on a thread of
 * this pool instead, its connection suspended, and its answer is queued
 * by the worker once it is resumed.
 */
#ifndef GP_COORD_HELD_H
#define GP_COORD_HELD_H

#include <microhttpd.h>

struct request;

/* Where a request stands with the pool (struct request's held). */
enum {
	HELD_NONE,    /* runs on its worker, as any request */
	HELD_RUNNING, /* on the pool, its connection suspended */
	HELD_BEGUN,   /* its stream's begin ran; the next call is a repeat */
	HELD_DONE,    /* its handler ran; its answer waits in the request */
};

/* What runs held: a route's handler, or a stream's begin (api.c). */
typedef enum MHD_Result (*held_fn)(struct MHD_Connection *conn,
    struct request *req, const char *url, const char *method);

/* Starts the pool's threads. 0, or GP_EIO. */
int held_start(void);
/*
 * Waits for every held request to be answered, then stops the threads;
 * a request that comes later runs on its worker (held_offload says 0).
 * Call before the HTTP daemon stops: it must find no connection
 * suspended.
 */
void held_stop(void);
/*
 * Runs fn(conn, req, url, method) on the pool, conn suspended until it
 * has run, its answer (reply.c's, captured) kept in req: 1. 0 when the
 * pool is not running or out of memory: the caller runs fn itself.
 * begin: fn is a stream's begin (req->held then says so, see api.c).
 */
int held_offload(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method, held_fn fn, int begin);
/*
 * The answer a held request's fn left, queued on its worker (where
 * libmicrohttpd calls api_handle again after the resume).
 */
enum MHD_Result held_answer(struct MHD_Connection *conn, struct request *req);

#endif
