/*
 * ckpt_store.h: the checkpoint store (ckpt.c): chunks, versions, GC.
 */
#ifndef GP_COORD_CKPT_STORE_H
#define GP_COORD_CKPT_STORE_H

#include "state.h"

/* ckpt.c */
struct ckpt_upload;
/* Opens DATA/checkpoints.db and starts the GC thread. */
int ckpt_init(const struct coord_config *cfg);
void ckpt_stop(void);
/* The routes (ckpt_routes, route.h) are answered by ckpt_handle. */
enum MHD_Result ckpt_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/*
 * A chunk PUT is streamed to a temporary file while it arrives: _begin
 * (after authentication, before any body byte) checks the caller and
 * sets req->stream, _data takes the body, _end verifies and answers,
 * _free (_release from api_completed) removes what an aborted upload
 * left. The route table's stream (route.h) is these.
 */
void ckpt_upload_begin(struct request *req, const char *url);
void ckpt_upload_data(struct request *req, const char *data, size_t len);
enum MHD_Result ckpt_upload_end(struct MHD_Connection *conn,
    struct request *req);
void ckpt_upload_free(struct ckpt_upload *upload);
void ckpt_upload_release(void *stream);
/*
 * The chunk store, shared with data.c. ckpt_lock guards the database
 * (ckpt_db, one connection for checkpoints, data sets and outputs) and
 * the chunk files' life (GC). Take it before state.lock, never after.
 */
extern pthread_mutex_t ckpt_lock;
struct sqlite3 *ckpt_db(void);
/* DATA/checkpoints/<user>/chunks/ab/<name> (user escaped). */
void ckpt_chunk_path(const char *user, const char *name, char *out,
    size_t len);
/* The user's chunks may have become garbage: GC them on the next pass. */
void ckpt_gc_mark_dirty(const char *user);
/* Answers a stored chunk of user (404 when absent). */
enum MHD_Result ckpt_reply_chunk(struct MHD_Connection *conn,
    const char *user, const char *name);
/*
 * A chunk PUT for another route: _new sets req->stream (refused with 401
 * when the caller is unauthenticated; NULL when out of memory), _refuse
 * records the answer, _open makes it store the body as user's chunk name
 * of at most limit bytes. ckpt_upload_data and _end do the rest.
 */
struct ckpt_upload *ckpt_upload_new(struct request *req);
void ckpt_upload_refuse(struct ckpt_upload *u, int status, const char *msg);
void ckpt_upload_open(struct ckpt_upload *u, const char *user,
    const char *name, size_t limit);
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

/*
 * A stored chunk is whole once its PUT is answered, but its directory
 * entry is synced only by this call: whatever records, durably, an object
 * that references a user's chunks (a checkpoint commit, a data set
 * version, a job's output: data.c) calls it first, with ckpt_lock
 * held. Returns 0 or GP_EIO.
 */
int ckpt_sync_user_dirs(const char *user);

/*
 * stat(2) of user's chunk name, waiting first, when it is not there, for
 * its store if its PUT was answered and the chunk is being flushed and
 * named behind (ckpt.c). Returns 0 or -1 (errno set).
 */
struct stat;
int ckpt_stat_chunk(const char *user, const char *name, struct stat *sb);

#endif
