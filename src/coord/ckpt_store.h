/*
 * ckpt_store.h: the checkpoint store (ckpt.c): chunks, versions, GC.
 */
#ifndef GP_COORD_CKPT_STORE_H
#define GP_COORD_CKPT_STORE_H

#include "state.h"

/* ckpt.c */
struct blob_upload;
/*
 * Opens the checkpoints' records (store_meta.h) and adds the checkpoints to the chunk store's
 * users (after blob_init, before blob_start).
 */
int ckpt_init(const struct coord_config *cfg);
/* Closes the database (after blob_stop). */
void ckpt_stop(void);
/* The routes (ckpt_routes, route.h) are answered by ckpt_handle. */
enum MHD_Result ckpt_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/*
 * The chunk PUT (a route's stream, route.h), checkpoints' and data
 * uploads': _begin checks the caller and opens a blob upload in the chunk
 * store (blob.h) as req->stream; _put_new makes that stream for another
 * route's _begin (refused with 401 when the caller is unauthenticated;
 * NULL when out of memory), which opens it (blob_upload_open) or refuses
 * it; _put_data takes the body, _put_end verifies and answers;
 * blob_upload_release frees it.
 */
void ckpt_upload_begin(struct request *req, const char *url);
struct blob_upload *ckpt_chunk_put_new(struct request *req);
void ckpt_chunk_put_data(struct request *req, const char *data, size_t len);
enum MHD_Result ckpt_chunk_put_end(struct MHD_Connection *conn,
    struct request *req);
/* Answers a stored chunk of user (404 when absent). */
enum MHD_Result ckpt_reply_chunk(struct MHD_Connection *conn,
    const char *user, const char *name);
/*
 * An agent's call for (id, attempt): the caller must own the node running
 * the job's current attempt (a gang: any part's node to read, the rank-0
 * part's to write: checkpoints and outputs are rank 0's). OUT: user (the
 * job's owner). Returns 0 or the HTTP status with err (and *kill for a
 * stale attempt).
 */
int ckpt_agent_job(const struct token_entry *who, int64_t id,
    int64_t attempt, int write, char *user, char *err, size_t errlen,
    int *kill);

#endif
