/*
 * store.h: SQLite persistence of the model (state.db), store.c.
 */
#ifndef GP_COORD_STORE_H
#define GP_COORD_STORE_H

#include "state.h"

/* store.c */
int store_open(const char *path);
void store_close(void);
int store_begin(void);
int store_commit(void);
int store_put_job(const struct job *job);
/*
 * A job array as submitted, one row (its tasks' ids are first, first + 1
 * ...; tasks: their indices; spec: the array's, with array_job_id set):
 * its tasks have no rows of their own until they change (store_put_job).
 * store_load hands on the tasks without rows as queued jobs.
 */
/* submit_key.c: idempotency keys (state thread, in its transaction) */
/*
 * 1, *job_id and *count when user's key made a job in the last day (count
 * 0: one job; n: a job array of n tasks, job_id its first); 0; GP_EIO.
 */
int submit_key_find(const char *user, const char *key, int64_t now_ms,
    int64_t *job_id, int64_t *count);
int submit_key_put(const char *user, const char *key, int64_t job_id,
    int64_t count, int64_t now_ms);
void submit_key_close(void);

int store_put_array(int64_t first, const char *user,
    const struct gp_jobspec *spec, const int *tasks, int ntasks,
    int64_t submitted_ms);
int store_put_node(const struct node *node);
int store_put_token(const struct token_entry *token, int64_t created_ms);
/* A token's group (gpupool group move --provider). */
int store_set_token_group(int64_t token_id, int64_t group_id);
/* The state thread's connection: the ledger writes through it. */
struct sqlite3 *store_db(void);
/* Deletes token id; ids up to it are never given again (see below). */
int store_delete_token(int64_t id);
/* OUT: *next: the lowest id a new token may take (0: no revocation). */
int store_token_id_floor(int64_t *next);
/*
 * Calls back for every row at start-up, except the jobs that finished
 * before finished_before (ms since the epoch; 0: none): those stay on
 * disk, counted by state in skipped[]. OUT: *max_job_id, the highest job
 * id the store holds (skipped or not; ids are never given twice).
 */
int store_load(void (*on_token)(struct token_entry *),
    void (*on_node)(struct node *), void (*on_job)(struct job *),
    int64_t finished_before, int64_t *skipped, int64_t *max_job_id);
/*
 * Reads job id's row back, for a job that left memory, through a
 * read-only connection of its own (behind a mutex; any thread): *out is
 * a malloc'd job (the caller frees it, state_job_stored_free). 0,
 * GP_ENOENT (no row), GP_ENOMEM or GP_EIO.
 */
int store_read_job(int64_t id, struct job **out);
/* Only the row's user, state and finished_ms (as store_read_job). */
int store_read_job_brief(int64_t id, char *user, int *st,
    int64_t *finished_ms);

#endif
