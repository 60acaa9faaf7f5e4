/*
 * joblog.h: job output files (BLOB/logs: --blob-dir), joblog.c.
 */
#ifndef GP_COORD_JOBLOG_H
#define GP_COORD_JOBLOG_H

#include "state.h"

/* joblog.c */
/*
 * Logs go to blob_dir/logs; those an older coordinator left in
 * data_dir/logs move there (once). epoch: this leader's fencing epoch
 * (0: one coordinator, SQLite); files of other epochs than the one that
 * holds each job's log are removed. Call only while this process leads.
 */
int joblog_init(const char *blob_dir, const char *data_dir, int64_t epoch);
/* Which epoch's files hold the job's log (job->log_epoch when loaded). */
int64_t joblog_epoch_of(int64_t job_id);
/*
 * Copies a loaded job's log (every part's, up to the sizes its state
 * holds) into files of this leader's epoch; they hold it from then on
 * (job->log_epoch). For every job that may still be written: a deposed
 * leader's late write then lands where nobody reads. 0 or GP_EIO.
 */
int joblog_take_over(struct job *job);
/* Logs what the load's takeovers copied (jobs, bytes, ms), once. */
void joblog_took_over(void);
/*
 * Appends output of the current attempt's part at its offset in the
 * attempt's stream; OUT: *held. Parts other than 0 (a gang's) have logs
 * of their own.
 */
int joblog_append(struct job *job, int part, int64_t offset,
    const char *data, size_t len, int64_t cap, int64_t *held);
/* Writes a marker line ("[gpupool: ...]") into the (part's) log. */
int joblog_note(struct job *job, const char *text);
int joblog_part_note(struct job *job, int part, const char *text);
/*
 * Reads up to max bytes of part's log, in epoch's file (job->log_epoch),
 * at offset. OUT: *data, *len.
 */
int joblog_read(int64_t job_id, int64_t epoch, int part, int64_t offset,
    size_t max, char **data, size_t *len);
int64_t joblog_size_on_disk(int64_t job_id, int64_t epoch);
int64_t joblog_part_size_on_disk(int64_t job_id, int64_t epoch, int part);
extern pthread_mutex_t joblog_lock;

/*
 * reply.c: answers. reply_raw takes text (malloc'd; freed in every case)
 * and queues it, or with out != NULL hands the response back unqueued.
 * reply_json steals value (NULL answers "out of memory"). reply_error
 * answers {"error": message}.
 */
enum MHD_Result reply_raw(struct MHD_Connection *conn, int status,
    char *text, size_t len, const char *ctype, struct MHD_Response **out);
enum MHD_Result reply_json(struct MHD_Connection *conn, int status,
    json_t *value);
enum MHD_Result reply_error(struct MHD_Connection *conn, int status,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * Queues resp with status and lets go of the caller's reference to it,
 * as MHD_queue_response then MHD_destroy_response; every answer of a
 * route that may run held goes through here. On a thread that has set a
 * capture (held.c) the response is kept in it instead, the reference
 * with it, for the connection's worker to queue.
 */
enum MHD_Result reply_queue(struct MHD_Connection *conn, unsigned status,
    struct MHD_Response *resp);
struct reply_capture {
	unsigned status;
	struct MHD_Response *resp; /* NULL: none yet */
};
/* This thread's capture from now on (NULL: queue as usual). */
void reply_capture_set(struct reply_capture *c);

#endif
