/*
 * datasets.h: data sets, job outputs and quotas (data.c).
 */
#ifndef GP_COORD_DATASETS_H
#define GP_COORD_DATASETS_H

#include "state.h"

/* data.c */
/*
 * Opens data.c's tables (store_meta.h: DATA/checkpoints.db or the
 * pool's PostgreSQL, a connection of its own) and adds data sets and outputs to the chunk store's users (after
 * blob_init, before blob_start). data_stop closes them (after blob_stop).
 */
int data_init(const struct coord_config *cfg);
void data_stop(void);
/* The routes (data_routes, route.h) are answered by data_handle. */
enum MHD_Result data_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/* A chunk PUT of an upload (PUT /v1/uploads/ID/chunks/HEX) begins. */
void data_upload_begin(struct request *req, const char *url);
/*
 * Submit: resolves and checks spec->data for the caller (owner defaults
 * to the caller, version to the latest; the job's owner must own each
 * data set or have it shared), writing the pinned owner and version into
 * spec. Returns 0, or the HTTP status with err set.
 */
int data_pin(const struct token_entry *who, struct gp_jobspec *spec,
    char *err, size_t errlen);

/*
 * live.c: the live scheduler. One engine (sched.h) for the coordinator's
 * life, told only what changes; every call from the state thread, under
 * the write lock, except the *_json views (read lock).
 */
/* A pass: what starts, what is preempted, why the rest waits. */
void live_schedule(void);
/* The node changed (registered, offer, up/down, left, prices). */
void live_node_changed(struct node *node);
/* A part ended on node: the engine frees what it held. */
void live_part_ended(const struct job *job, const struct node *node);
/* Every part of the job has started; it saved its work at ms. */
void live_job_started(const struct job *job);
void live_job_saved(const struct job *job, int64_t ms);
/*
 * A task of an array with a %LIMIT starts running (+1) or stops (-1):
 * the count the pass holds the limit to. Other jobs: nothing.
 */
void live_array_running(const struct job *job, int delta);
/* A job entered (+1) or left (-1) the queue: its user's queued count. */
void live_queued(const struct job *job, int delta);
/*
 * Forgets everything the scheduler's glue keeps (the engine, users,
 * counts, caches): the model is about to be loaded again (state_fini).
 */
void live_fini(void);
/*
 * 1 when some node the pool knows (up or down) could ever run spec; 0
 * with why; GP_ENOMEM. Cached per shape until a node registers.
 */
int live_can_ever_fit(const struct gp_jobspec *spec, char *why,
    size_t whylen);
/* What the scheduler is told about a job (j may be NULL: a new spec). */
void live_sched_job(const struct job *j, const struct gp_jobspec *spec,
    struct gp_sched_job *out);
/* A number for a user name (fair share), the same for the same name. */
int64_t live_user_id(const char *user);
/* A node registered: what the pool could ever run may have changed. */
void live_nodes_registered(void);
/*
 * Every node the pool knows as hardware (up or down), for can-ever-fit
 * checks: OUT *nodes (malloc'd, the caller frees; their GPUs stay valid
 * until the next register), *n. 0 or GP_ENOMEM.
 */
int live_hw_nodes(struct gp_sched_node **nodes, size_t *n);
/* A port for a gang's rank 0, free among the gangs on its node. */
int live_master_port(const struct job *job);
/* JSON views (docs/api.md): request fields, parts and waiting, GPUs'
 * shares and capability, an assignment's share and gang. */
void live_request_json(const struct job *job, json_t *req);
void live_job_json(const struct job *job, json_t *o);
void live_gpu_json(const struct node *node, int gpu, json_t *o);
void live_assignment_json(const struct job *job, int part, json_t *o);
/*
 * Makes job's gang overlay (when it needs one: each part's WireGuard key
 * pair and UDP port slot), wiping what an earlier attempt had. At its
 * assignment, state thread.
 */
void live_overlay_keys(struct job *job);
/* Wipes part's overlay key pair and frees its port slot. */
void live_overlay_forget(struct job *job, int part);
/* Its agent reported part started: wipes its overlay private key. */
void live_overlay_started(struct job *job, int part);
/* A running job loaded from the store: logs the overlay it kept. */
void live_overlay_loaded(const struct job *job);
/* GET /v1/queue: the queued jobs who may see, in the scheduler's order. */
/* GET /v1/queue's body, as text, appended to out; GP_ENOMEM. */
int live_queue_text(const struct token_entry *who, struct gp_buf *out);
/* "resources", "share", ... for enum gp_sched_wait. */
const char *live_wait_code(int reason);

/*
 * Records that the image with digest got a signature by key: queued
 * jobs pinned to it may now be placed on nodes that trust key. Queued to
 * the state thread; safe from any thread, without state.lock.
 */
void state_note_image_signed(const char *digest, const char *key);
/* Sets a job's signer list (takes the reference); state.lock held. */
void job_set_signers(struct job *job, json_t *signers);
/*
 * Why no registered node would accept the job (its image or plain
 * command), or "" when some would. state.lock held.
 */
void job_acceptance(const struct job *job, char *why, size_t len);

#endif
