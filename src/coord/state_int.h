/*
 * state_int.h: what the state module's files share and nobody else
 * sees: the batch's effects, the transitions the agent protocol and the
 * loop call, billing's hooks. The files, by what they do:
 *
 *   state.c        the model: tables, loading, tokens
 *   state_view.c   JSON views
 *   state_job.c    job transitions: submit, arrays, cancel, gangs,
 *                  preemption, the owners' acceptance
 *   state_bill.c   billing
 *   state_agent.c  the agent protocol: register, offers, reports, leases
 *   state_loop.c   the ops, the state thread's loop, purge
 *
 * Everything here runs in the state thread, under state.lock for
 * writing, unless its comment says otherwise.
 */
#ifndef GP_COORD_STATE_INT_H
#define GP_COORD_STATE_INT_H

#include "acct_api.h"
#include "coord_metrics.h"
#include "datasets.h"
#include "joblog.h"
#include "notify.h"
#include "state.h"
#include "store.h"

/* Grace before a delivered attempt that an agent does not list is lost. */
#define LOST_GRACE_MS 3000

/* What a batch hands out after its commit. */
struct effect {
	struct node *node;
	json_t *assign; /* or NULL */
	json_t *cancel; /* or NULL */
	json_t *stop;	/* or NULL: save and stop (preempt, gang) */
};

/* state.c */
int job_insert(struct job *job);
int node_insert(struct node *node);
void queue_compact(void);
int queue_insert(struct job *job);
void queue_remove(struct job *job);
void node_take_part(struct node *node, const struct job *job, int k);
void node_remove_job(struct node *node, const struct job *job, int k);
void job_from_disk(struct job *j);
void apply_token_create(struct op *op);
void apply_token_revoke(struct op *op);

/* state_view.c */
json_t *assignment_json(const struct job *job, int part);

/* state_job.c */
void add_effect(struct node *node, json_t *assign, json_t *cancel);
void add_effect_stop(struct node *node, json_t *stop);
void wake_job_later(struct job *job);
void persist_job(const struct job *job);
void part_release(struct job *job, int k);
void job_finish(struct job *job, enum job_state st, const char *reason);
void job_cancel_parts(struct job *job);
void gang_settle(struct job *job);
void job_part_lost(struct job *job, int k, const char *reason);
void apply_image_signed(struct op *op);
void job_free(struct job *job);
void apply_submit(struct op *op);
void apply_submit_array(struct op *op);
void apply_cancel(struct op *op);
void apply_idle(struct op *op);

/* state_bill.c */
int64_t token_group(int64_t token_id);
struct attempt_record *current_attempt(struct job *job);
void bill_part_start(struct job *job, int k, int64_t now);
void bill_part_end(struct job *job, int k);
void bill_attempt_end(struct job *job, struct attempt_record *a);
void acct_tick(int64_t mono);
void acct_job_json(const struct job *job, json_t *o);
void acct_node_json(const struct node *node, json_t *o);

/* state_agent.c */
void apply_register(struct op *op);
void apply_started(struct op *op);
void apply_finished(struct op *op);
void apply_reports(struct op *op);
void apply_lost(struct op *op);
void apply_checkpoint(struct op *op);
void apply_offer(struct op *op);
void apply_leave(struct op *op);
int expire_leases(int64_t now);

/* state_loop.c */
extern struct effect *effects;
extern size_t neffects, capeffects;
extern struct job **woken_jobs;
extern size_t nwoken, capwoken;
void set_error(struct op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void done_push(int64_t id);
void done_sort(void);
/* Forgets the finished jobs waiting for purge (state_fini). */
void done_reset(void);
int loop_init(void);
/* What the loop keeps from one batch to the next. */
struct state_batch_clock {
	int64_t last_lease_check; /* monotonic ms */
	int lease_more;		  /* lease expiry goes on next batch */
	int purge_more;		  /* so does purge */
};
/*
 * One batch, as the state thread runs it: every op of batch (a list
 * through op->next) applied under the write lock, leases expired (every
 * 100 ms of now, the monotonic clock in ms), finished jobs purged, billed,
 * scheduled, one transaction committed, the effects published. The ops
 * are not answered: the loop answers them (op_answer); a unit test reads
 * op->status and op->result and frees them. So the state machine runs
 * in-process, without threads or HTTP (tests/unit/test_state.c).
 */
void state_batch_run(struct op *batch, int64_t now,
    struct state_batch_clock *clk);

/*
 * submit_key.c: idempotency keys (state thread, in its transaction),
 * kept for a day. 1, *job_id and *count when user's key made a job in
 * the last day (count 0: one job; n: a job array of n tasks, job_id its
 * first); 0; a GP_E* code.
 */
int submit_key_find(const char *user, const char *key, int64_t now_ms,
    int64_t *job_id, int64_t *count);
int submit_key_put(const char *user, const char *key, int64_t job_id,
    int64_t count, int64_t now_ms);

#endif
