/*
 * state.h: requests and ops (a change queued to the state thread), and
 * what state.c offers the other files: the thread, look-ups, JSON views,
 * the scheduler's hooks, the agent protocol's decoders.
 */
#ifndef GP_COORD_STATE_H
#define GP_COORD_STATE_H

#include "model.h"

struct api_route;
struct MHD_Response;

/* An HTTP request in progress (the connection's con_cls). */
struct request {
	struct gp_buf body;
	size_t body_limit;
	int too_big;
	const struct token_entry *auth; /* NULL until authenticated */
	struct token_entry auth_copy;
	struct op *op;		/* a change queued to the state thread */
	struct waiter *waiter;	/* set while suspended in a long poll */
	int resumed;
	int suspended;
	int superseded;	/* a newer poll from the same node took over */
	int waited;	/* it waited (notify_wait): its end forgets it */
	int64_t deadline_mono; /* long polls: when to answer anyway */
	const struct api_route *route; /* its route (route.h); NULL: none */
	void *stream;	/* a streamed body's state, its route's (route.h) */
	int relay_taken; /* relay.c holds the connection (relay_tls.h) */
	/* Run on held.c's threads: where it stands, what it answered. */
	int held;			 /* HELD_* (held.h) */
	unsigned held_status;
	struct MHD_Response *held_resp; /* NULL: no answer, close */
	int held_rc;			 /* the handler's enum MHD_Result */
};

/* A change to apply, queued to the state thread by a handler. */
enum op_type {
	OP_SUBMIT,
	OP_SUBMIT_ARRAY, /* a job array: spec and tasks */
	OP_CANCEL,
	OP_TOKEN_CREATE,
	OP_REGISTER,
	OP_STARTED,
	OP_FINISHED,
	OP_LOST, /* heartbeat: an attempt the agent no longer has */
	OP_CHECKPOINT, /* a checkpoint version was committed (ckpt.c) */
	OP_OFFER,      /* heartbeat: the owner's offer changed */
	OP_LEAVE,      /* the owner took the node out of the pool */
	OP_IMAGE_SIGNED, /* an image got a signature (image.c) */
	OP_ACCT,       /* groups, members, prices, budgets (acct_api.c) */
	OP_TOKEN_REVOKE, /* an admin revokes a token (job_id: its id) */
	OP_REPORTS,	 /* an agent's batch of started/finished reports */
	OP_IDLE,	 /* an attempt's interactive idle clock (relay.c) */
};

struct op {
	enum op_type type;
	struct op *next;
	struct MHD_Connection *conn; /* resumed when done; NULL: none */
	struct request *req;
	/* Input. */
	struct token_entry caller;
	struct gp_jobspec spec;
	int64_t job_id;
	int attempt;
	int64_t node_id;
	json_t *body;
	int64_t version, bytes; /* OP_CHECKPOINT */
	int64_t idle_limit_ms, idle_seen_ms; /* OP_IDLE */
	char peer[64];		/* OP_REGISTER: the caller's IP address */
	struct acct_request acct; /* OP_ACCT, OP_TOKEN_CREATE */
	int *tasks;		  /* OP_SUBMIT_ARRAY: indices, owned */
	int ntasks;
	/* Output. */
	int status;
	json_t *result;
	int refused; /* STATE_REFUSE_*: answered so, nothing committed */
	/*
	 * Who frees the op: 0 while the state thread has it; the state
	 * thread sets OP_ANSWERED and resumes conn (the handler frees it on
	 * resumption, or api_completed if the connection closes first);
	 * api_completed sets OP_ABANDONED if it comes first, and then the
	 * state thread frees it.
	 */
	_Atomic int claim;
};
enum { OP_ANSWERED = 1, OP_ABANDONED = 2 };

/*
 * Walking the model, with state.lock held (for reading is enough): the
 * nodes, the jobs in memory and the tokens, and the queue in its order.
 * A cursor starts at 0; each call returns the next one (NULL at the end)
 * and moves the cursor past it, so that a walk may let the lock go and
 * take it again between two calls (the model may have changed; nothing
 * is returned twice):
 *
 *	int64_t c = 0;
 *	struct node *n;
 *	while ((n = state_node_next(&c)) != NULL)
 *		...
 *
 * Inline: the scheduler and the metrics walk 10,000 nodes at a time.
 * Nothing outside state*.c indexes struct state's arrays.
 */
static inline struct node *
state_node_next(int64_t *cursor)
{
	if (*cursor < 1)
		*cursor = 1;
	while (*cursor < state.nnodes) {
		struct node *n = state.nodes[(*cursor)++];
		if (n != NULL)
			return n;
	}
	return NULL;
}

static inline struct job *
state_job_next(int64_t *cursor)
{
	if (*cursor < 1)
		*cursor = 1;
	while (*cursor < state.next_job_id) {
		struct job *j = state.jobs[(*cursor)++];
		if (j != NULL)
			return j;
	}
	return NULL;
}

static inline struct token_entry *
state_token_next(int64_t *cursor)
{
	if (*cursor < 0)
		*cursor = 0;
	while ((size_t)*cursor < state.tokens_cap) {
		struct token_entry *t = state.tokens[(*cursor)++];
		if (t != NULL)
			return t;
	}
	return NULL;
}

/* The queue: its places (holes included: an upper bound of its jobs). */
static inline int
state_queue_places(void)
{
	return state.nqueue;
}

static inline struct job *
state_queued_next(int64_t *cursor)
{
	if (*cursor < 0)
		*cursor = 0;
	while (*cursor < state.nqueue) {
		struct job *j = state.queue[(*cursor)++];
		if (j != NULL)
			return j;
	}
	return NULL;
}

/* main.c */
extern struct MHD_Daemon *coord_daemon;
extern volatile int coord_stopping; /* answer long polls at once */
/*
 * Any thread: the coordinator stops as on SIGTERM (writes that fail are
 * no longer retried: pg_stop_retrying), and exits with status (the
 * first non-zero one given wins; 0: as a SIGTERM would).
 */
void coord_stop(int status);

/*
 * Why the state thread answers without committing. Once set (the first
 * wins, state_refuse), nothing more is committed: every op, the batch
 * whose commit failed among them, is answered 503 with Retry-After
 * (api.c), and so is every request still in the coordinator (a long
 * poll resumed, a request on a kept-alive connection), until it exits.
 */
enum state_refusal {
	STATE_REFUSE_NONE = 0,
	/* A commit failed and the coordinator stops (SIGTERM, or PostgreSQL
	 * failing past its retry window): "not committed". */
	STATE_REFUSE_STOPPING,
	/* The lead was lost (leader_lost): "not the leader", naming the new
	 * leader when it is known (X-Gpupool-Leader). */
	STATE_REFUSE_NOT_LEADER,
};
/* state_loop.c: why (copied) says what happened, for the answers. */
void state_refuse(enum state_refusal kind, const char *why);
enum state_refusal state_refusal(void);
/* The answers' message, into out. */
void state_refusal_message(char *out, size_t len);

/* state.c */
int state_init(const struct coord_config *cfg);
/*
 * Frees the model and closes the ledger and the store, so that
 * state_init may load it again (a restart in-process: the unit tests).
 * Not with the state thread running.
 */
void state_fini(void);
int state_start_thread(void);
void state_stop_thread(void);
/* Queues op; the state thread resumes op->conn when done. */
void state_submit_op(struct op *op);
struct op *op_new(enum op_type type, struct token_entry *caller);
void op_free(struct op *op);
/* api_completed: the connection of a queued or answered op is gone. */
void op_abandon(struct op *op);
struct job *state_job(int64_t id);
/*
 * A job by id, in memory or, when it left memory (min-job-age), read
 * back from state.db: then *stored is set and the caller frees the copy
 * with state_job_stored_free. NULL: no such job. Call with state.lock
 * held (either way); the read has its own connection (store_read_job).
 */
struct job *state_job_any(int64_t id, int *stored);
void state_job_stored_free(struct job *job);
/*
 * What the GCs and access checks need of any job, in memory or not:
 * its owner, state and end. 0, GP_ENOENT (no such job) or GP_EIO. Takes
 * state.lock for reading.
 */
int state_job_brief(int64_t id, char *user, enum job_state *st,
    int64_t *finished_ms);
struct node *state_node(int64_t id);
struct node *state_node_by_name(const char *name);
const struct token_entry *state_token_lookup(const char *hash);
void state_heartbeat_ms(int64_t *heartbeat_ms, int64_t *lease_ms);
const char *job_state_name(enum job_state s);
int job_finished(const struct job *job);
/*
 * JSON views; call with state.lock held. job_to_json shows the job to
 * viewer (borrowed, never NULL): the values of its environment, which
 * may hold secrets (gpupool jupyter's JUPYTER_TOKEN, a user's API keys),
 * only to its owner; anyone else (an admin, the provider of its node)
 * gets each key with a null value. The agent's assignment
 * (assignment_to_json) carries them whole.
 */
json_t *job_to_json(const struct job *job, int with_history,
    const struct token_entry *viewer);
/* 1 when who is the job's owner (a user's or admin's token of its name). */
int job_owned_by(const struct job *job, const struct token_entry *who);
json_t *node_to_json(const struct node *node);
/* The assignment of part part of job's current attempt. */
json_t *assignment_to_json(const struct job *job, int part);
/* The part of job placed on node_id, or -1. */
int job_part_on(const struct job *job, int64_t node_id);
/*
 * The bytes the job's current (or last) attempt sent and received over
 * its network so far, its parts added up (any lock).
 */
void job_net_bytes(const struct job *job, int64_t *sent, int64_t *received);
/* Allocates job->parts as its spec asks. 0 or GP_ENOMEM. */
int job_parts_alloc(struct job *job);
/*
 * For live.c, in the state thread: budget holds before a pass; whether a
 * job the plan starts still fits its budgets (else held, 0); the start of
 * a job's parts (as[k]: part k's assignment); a preemption (victim asked
 * to save and stop for for_job); a GPU's price; closing the queue's holes.
 */
void state_budget_holds(void);
int state_budget_admit(struct job *job);
void state_job_assign(struct job *job,
    const struct gp_sched_assignment *const *as);
void state_job_preempt(struct job *victim, const struct job *for_job);
int64_t state_gpu_price(struct node_gpu *g);
void state_queue_compact(void);
/*
 * The owners' acceptance (images, plain commands) as the scheduler's
 * predicate; 1 when some node refuses plain commands (acceptance then
 * matters for every job).
 */
int state_owner_accepts(void *arg, const struct gp_sched_node *n,
    const struct gp_sched_job *j);
int state_any_refuses_plain(void);
/*
 * 1 when some node's owner may refuse a job like spec for what it is (a
 * plain command, an interactive job), its image and network aside.
 */
int state_refuses_job(const struct gp_jobspec *spec);
/* 1 when the caller may see the job. */
int job_visible_to(const struct job *job, const struct token_entry *who);
/* Heartbeat reconciliation: fills kill with attempts to kill. */
void state_reconcile(struct node *node, json_t *running, json_t *kill,
    int queue_lost);
int state_create_admin_token_if_none(void);
/* The tokens as JSON (id order, never their hashes). With state.lock. */
json_t *state_tokens_json(void);
/*
 * The group a new job of user runs for: group (a name) when given and
 * the caller may use it, else the user's first. OUT: *group_id. Returns
 * 0, GP_ENOENT (no such group) or GP_EPERM (not a member). Call in the
 * state thread.
 */
int state_job_group(const struct token_entry *caller, const char *group,
    int64_t *group_id);
/*
 * Records in the job's attempt history that (job_id, attempt) committed
 * checkpoint version (bytes in all, label from its marker). Queued to the
 * state thread; safe from any thread, without state.lock.
 */
void state_note_checkpoint(int64_t job_id, int attempt, int64_t version,
    int64_t bytes, const char *label);
/*
 * Keeps (job_id, attempt)'s interactive idle clock in its attempt record
 * (the store's): its limit and when it last saw traffic (wall clock,
 * ms), for the relay to rebuild after a restart. Queued to the state
 * thread; safe from any thread, without state.lock. The relay calls it
 * at a coarse grain, never per byte.
 */
void state_note_idle(int64_t job_id, int attempt, int64_t limit_ms,
    int64_t seen_ms);
/* An agent's offer (what its owner lends now), decoded. */
struct offer {
	int64_t seq;
	uint64_t lent;
	int accepting;
	int cpus;
	int64_t mem_mib;
	int64_t max_job_s;
	/* The owner's image policy: GP_SCHED_IMAGES_*, plain jobs, keys. */
	int images;
	int refuse_plain;
	int network;		/* 1 + the most jobs get; 0: not said */
	int refuse_interactive;	/* "interactive": false */
	int no_gang_links;	/* "gangs": false (links no gang across nodes) */
	int interactive_gpus;	/* "interactive_gpus": kept for them */
	int ntrusted;
	char trusted[GP_TRUST_KEYS_MAX][GP_SIGN_PUBLIC_TEXT];
};
/*
 * Decodes an offer object (untrusted) for a node with ngpus GPUs.
 * Returns 0 or GP_EINVAL with err set.
 */
int offer_decode(json_t *o, int ngpus, struct offer *out, char *err,
    size_t errlen);
/* 1 when a finished reason means "requeue: the owner took it back". */
int reason_requeues(const char *reason);

/*
 * state_retry.c: the requeue back-off for attempts that failed to start
 * (state thread, state.lock held for writing unless said otherwise).
 */
/* 1 for "image_unavailable", "restore_failed", "refused". */
int reason_start_failed(const char *reason);
/* The wait after failures start failures in a row: 1 s doubling, 60 s. */
int64_t retry_delay_ms(int failures);
/* Part of job on node_id ended with reason: a failed start avoids it. */
void retry_node_failed(struct job *job, int64_t node_id, const char *reason);
/*
 * job goes back to the queue for reason; ran: its attempt had started.
 * A failed start counts and sets the back-off (returns its length, ms);
 * another reason requeues at once, and after a run forgets the
 * failures (returns 0).
 */
int64_t retry_requeued(struct job *job, const char *reason, int ran);
/* Frees job's back-off. */
void retry_clear(struct job *job);
/* Sets job->sj's back-off and nodes to avoid for a pass at now_ms. */
void retry_sched_job(struct job *job, int64_t now_ms);
/*
 * 1 once a back-off has ended since the last call that said 1: the
 * scheduler should look at the queue again.
 */
int retry_due(int64_t now_ms);
/*
 * why as shown (read lock is enough): a job waiting on its back-off
 * gets ": next try in 8 s" added.
 */
void retry_wait_words(const struct job *job, const char *why, char *buf,
    size_t len);
/* A queued job loaded from the store: its back-off from its history. */
void retry_restore(struct job *job);

/*
 * Decodes a register body (untrusted). OUT: tmp->name, cpus, mem_mib,
 * gpus (malloc'd, caller frees even on failure), *running (a new
 * reference on success). Returns 0 or GP_EINVAL with err set.
 */
int register_decode(json_t *body, struct node *tmp, json_t **running,
    char *err, size_t errlen);

#endif
