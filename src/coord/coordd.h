/*
 * coordd.h: the coordinator's internal model, shared by its files.
 *
 * Reading order: main.c (start-up), state.c (the model and the state
 * thread: every change goes through it, in batches, one SQLite transaction
 * per batch), store.c (SQLite), api.c (HTTP routing, auth, handlers),
 * notify.c (long polls: suspended connections and who wakes them),
 * joblog.c (job output files), sched.c (pure scheduling), ckpt.c (the
 * checkpoint store: its own SQLite database and chunk files), data.c
 * (data sets, job outputs and quotas, over ckpt.c's chunk store), image.c
 * (the image store: its own SQLite database and content-addressed blobs).
 *
 * Locking: `state.lock` (rwlock) guards the model. The state thread takes
 * it for writing while it applies a batch; HTTP handlers take it for
 * reading. `notify_lock` (notify.c) guards node outboxes and the lists of
 * suspended connections; it is taken after state.lock when both are held.
 */
#ifndef GP_COORDD_H
#define GP_COORDD_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "acct.h"
#include "jobspec.h"
#include "sched.h"
#include "sign.h"
#include "token.h"
#include "util.h"

/* Keys a node's owner may trust (the policy's trust-key lines). */
#define GP_TRUST_KEYS_MAX 32

enum job_state {
	JOB_QUEUED,
	JOB_RUNNING,
	JOB_SUCCEEDED,
	JOB_FAILED,
	JOB_CANCELLED,
	JOB_TIMEOUT,
};

struct attempt_record {
	int attempt;
	int64_t node_id;
	int64_t started_ms;
	int64_t finished_ms;
	char reason[24];
	/* Checkpoints: what this attempt started from and saved. */
	int64_t restored_version; /* 0: started from scratch */
	int64_t ckpt_version;	  /* last version committed by it, 0: none */
	int64_t ckpt_count;	  /* versions it committed */
	int64_t ckpt_ms;	  /* when the last one was committed */
	int64_t ckpt_bytes;	  /* its size */
	char *ckpt_label;	  /* its COMPLETE marker's first line (NULL:
				     none; at most 200 bytes) */
	/* Accounting (ledger.c): what this attempt is charged. */
	struct acct_meter meter;  /* from the start ack; rate at that time */
	int64_t provider_group;	  /* the node's group when billing began */
	/* A gang's other parts (1..nmore): each is charged on its own. */
	struct part_bill *more;
	int nmore;
	int next_seq;		  /* a gang: the attempt's next posting */
	int64_t preempt_for;	  /* being stopped for this job; 0: none */
};

/* A gang part's meter in an attempt (parts 1.. ; part 0: the record's). */
struct part_bill {
	int64_t node_id;
	struct acct_meter meter;
	int64_t provider_group;
};

/*
 * One part of a job's current attempt. An ordinary job has one; a gang
 * (spec.nodes > 1) one per node, all started together. Part 0 is rank 0.
 */
struct job_part {
	int64_t node_id;	    /* 0: not placed */
	int ngpus;
	uint8_t gpus[GP_GPUS_MAX];  /* the node's GPU indices */
	int gpu_milli;		    /* < 1000: a share of gpus[0] */
	int64_t gpu_mem_mib;	    /* a share: the GPU memory it takes */
	_Atomic int64_t delivered_mono; /* when its assignment went out */
	int started_ack;	    /* its agent confirmed the start */
	int ended;		    /* it stopped (a gang that is stopping) */
	/* Output of parts 1..: DATA/logs/<id>.<part>.log (part 0: job's) */
	int64_t log_size, log_base;
	int log_truncated;
};

struct waiter;
struct gp_sched_policy;

/*
 * What only a queued job needs, apart from its job so that the many that
 * run or have ended do not carry it (480 bytes a job).
 */
struct job_wait {
	/*
	 * Why it may not start (NULL or "": none). HOLD_REASON_MAX bytes,
	 * allocated at its first hold and kept while it is queued (the pass
	 * points at it); most queued jobs are never held.
	 */
	char *hold_reason;
	char wait_why[160];	/* the last pass's reason in words */
};
#define HOLD_REASON_MAX 320

struct job {
	int64_t id;
	char user[GP_NAME_MAX + 1];
	struct gp_jobspec spec;
	enum job_state state;
	int cancel_requested;
	int attempts;	  /* number of the current (or last) attempt */
	int64_t node_id;  /* current or last node (rank 0's), 0: never */
	int ngpus;	  /* rank 0's GPUs */
	uint8_t gpus[GP_GPUS_MAX]; /* the node's GPU indices */
	struct job_part *parts;	   /* spec.nodes of them */
	int nparts;
	int master_port;	   /* a gang: the port rank 0 listens on */
	/* A gang that lost a part: every part stops, then it requeues. */
	char stopping[24];	   /* the reason ("node_lost"), "": no */
	int gang_failed;	   /* a part failed: the job's end state */
	int64_t submitted_ms, started_ms, finished_ms;
	_Atomic int64_t assigned_mono;	/* when placed; 0 once dispatched */
	int started_ack;	/* every part's agent confirmed its start */
	int has_exit;
	int exit_code, signal;
	char reason[24];
	char *message; /* why it could not start, or NULL */
	struct attempt_record *history;
	int nhistory;
	/* Output: DATA/logs/<id>.log, all attempts one after another. */
	int64_t log_size;     /* bytes in the file */
	int64_t log_base;     /* file offset where this attempt starts */
	int log_truncated;
	struct waiter *waiters; /* log followers and waiters (notify.c) */
	int queue_pos;		/* index in the queue array, -1 if absent */
	/*
	 * Image jobs: the keys whose signatures the pinned image carries
	 * (image.c keeps them current); signer_keys points into signers,
	 * for the scheduler.
	 */
	json_t *signers;	/* array of "ed25519:..." or NULL */
	const char **signer_keys;
	int nsigners;
	/* Accounting: the group it runs for (spec.group resolved). */
	int64_t group_id;
	/* Scheduling (live.c). */
	struct gp_sched_job sj; /* what the scheduler is told (spec's) */
	int64_t user_id;	/* a number for its user, for fair share */
	/* Queued: why it waits (NULL when not queued; state.c's queue). */
	struct job_wait *wait;
	int wait_reason;	/* enum gp_sched_wait of the last pass; 0 */
	int64_t wait_start_ms;	/* the head: its reservation's start */
	int queue_rank;		/* its place in the last pass's order */
	int64_t preempt_for;	/* running: being stopped for this job */
	int preempting;		/* queued: victims are saving for it */
	int in_block;		/* from job_alloc's blocks (not malloc'd) */
};

struct node_gpu {
	int index;
	char uuid[96];
	char model[GP_NAME_MAX + 1];
	int64_t mem_mib;
	int64_t job_id;	 /* held whole by this job; 0 when not */
	/* Jobs sharing it (fractions): their shares added up. */
	int shared_milli;
	int64_t shared_mem_mib;
	int nshared;
	int capability;	 /* compute capability x 10; 0: unknown */
	int util;	 /* percent, from heartbeats */
	int64_t mem_used_mib;
	int64_t price;		/* micro-credits per GPU-hour, cached */
	uint64_t price_gen;	/* ledger.prices_gen it was looked up at */
	int temp_c;	 /* from heartbeats; -1: not reported */
	int power_mw;	 /* milliwatts; -1: not reported */
};

struct node {
	int64_t id;
	char name[GP_NAME_MAX + 1];
	int64_t owner_token;
	char owner_name[GP_NAME_MAX + 1];
	int64_t group_id;		/* the owner token's group: the lab */
	char addr[256];			/* where other nodes reach it */
	int cpus;
	int64_t mem_mib;
	int ngpus;
	struct node_gpu *gpus;
	int up;				/* registered and lease alive */
	int left;			/* the owner took it out (leave) */
	/* What the owner lends now: the agent's latest offer. */
	int64_t offer_seq;
	uint64_t lent;			/* bit i: GPU i may take new jobs */
	int accepting;			/* 0: paused or leaving */
	int offer_cpus;			/* CPUs jobs may take in all */
	int64_t offer_mem_mib;
	int64_t max_job_s;		/* 0: any */
	/* What the owner's policy accepts (docs/images.md). */
	int images;			/* GP_SCHED_IMAGES_* */
	int refuse_plain;		/* no plain-command jobs */
	int network;			/* 1 + the most its jobs get; 0: ? */
	int ntrusted;
	char trusted[GP_TRUST_KEYS_MAX][GP_SIGN_PUBLIC_TEXT];
	const char *trusted_keys[GP_TRUST_KEYS_MAX];
	_Atomic int64_t last_seen_mono; /* renewed by heartbeats */
	_Atomic int64_t lease_told_ms;	/* the lease its last answer gave */
	int64_t last_seen_ms;		/* wall clock, for display */
	/* Jobs placed here (running), by id. */
	int64_t *jobs;
	int njobs, capjobs;
	/* notify.c: what waits for delivery, and the held poll. */
	json_t *outbox_assign; /* array */
	json_t *outbox_cancel; /* array */
	json_t *outbox_checkpoint; /* array: upload now, please */
	json_t *outbox_stop;	   /* array: save and stop, please */
	struct waiter *poller;
	int sched_dirty;	   /* the scheduler must hear of it */
};

struct token_entry {
	int64_t id;
	char name[GP_NAME_MAX + 1];
	enum gp_role role;
	char hash[GP_TOKEN_HASH_HEX];
	int64_t group_id; /* the group it was made for (default: 1) */
	int64_t created_ms;
};

struct coord_config {
	char listen_addr[128];
	int port;
	char data_dir[1024];
	char tls_cert[1024];
	char tls_key[1024];
	int64_t lease_ms;
	int64_t heartbeat_ms;
	/*
	 * Heartbeats a second the whole pool may send (0: no bound): a big
	 * pool's agents are told to beat less often (state_heartbeat_ms).
	 */
	int64_t heartbeat_rate;
	int64_t log_cap;
	int threads;
	size_t conn_memory; /* each HTTP connection's memory pool */
	/* Checkpoints (ckpt.c). */
	int ckpt_keep;		/* versions kept per job */
	int64_t ckpt_max;	/* bytes in one version */
	int64_t ckpt_retain_ms; /* kept after the job finished */
	/* Data sets and job outputs (data.c). */
	int64_t quota_default;	  /* bytes per user; 0: no limit */
	int64_t data_max;	  /* bytes in one data set version or output */
	int64_t output_retain_ms; /* outputs kept after the job finished */
	/* Images (image.c). */
	int64_t image_blob_max;	/* bytes in one blob */
	/* Where jobs go (sched_policy.c): --placement. */
	const struct gp_sched_policy *placement;
	/* Accounting (ledger.c, docs/accounting.md). */
	char prices_file[1024];	   /* --prices: replaces the table at start */
	int64_t accrual_ms;	   /* running attempts are posted this often */
	int64_t half_life_ms;	   /* of decayed usage (fair share) */
	int64_t budget_untimed_s;  /* a job without a time limit, for budgets */
	/*
	 * A finished job leaves memory this long after it ended (its row in
	 * state.db answers for it from then on); 0: kept for ever.
	 */
	int64_t min_job_age_ms;
};

struct state {
	pthread_rwlock_t lock;
	struct coord_config cfg;
	/* Jobs by id: ids are dense, jobs[id] (jobs[0] unused). */
	struct job **jobs;
	int64_t njobs_cap;
	int64_t next_job_id;
	/*
	 * The queue in job id order (the scheduler orders it by fair share).
	 * A removed job leaves a hole (NULL) until the state thread closes
	 * them all at once (queue_compact), before it lets readers in: they
	 * never see one.
	 */
	struct job **queue;
	int nqueue, capqueue;
	int queue_holes;
	/* Nodes by id, dense like jobs. */
	struct node **nodes;
	int64_t nnodes; /* highest id + 1 */
	int64_t nodes_cap;
	/* Tokens: open-addressing table on the hash, and the id counter. */
	struct token_entry **tokens;
	size_t tokens_cap, ntokens;
	int64_t next_token_id;
	int64_t next_node_id;
	int sched_dirty; /* something changed that may let a job start */
	/*
	 * The last pass looked at part of a long queue and started jobs:
	 * the next runs at once (state thread only).
	 */
	int sched_more;
	/* Nodes whose owner takes no plain-command job (offer_apply). */
	int nrefuse_plain;
	/*
	 * Finished jobs that left memory (min-job-age), by state, since the
	 * store was created as far as start-up can tell (those it left on
	 * disk) plus those purged since; jobs_resident: jobs in memory.
	 */
	int64_t purged[JOB_TIMEOUT + 1];
	int64_t purged_now; /* purged by this process: the counter */
	int64_t jobs_resident;
};

extern struct state state;

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
	int64_t deadline_mono; /* long polls: when to answer anyway */
	struct ckpt_upload *upload; /* a streamed chunk PUT (ckpt.c) */
	struct image_upload *image_upload; /* a streamed blob PUT (image.c) */
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
	char peer[64];		/* OP_REGISTER: the caller's IP address */
	struct acct_request acct; /* OP_ACCT, OP_TOKEN_CREATE */
	int *tasks;		  /* OP_SUBMIT_ARRAY: indices, owned */
	int ntasks;
	/* Output. */
	int status;
	json_t *result;
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

/* main.c */
extern struct MHD_Daemon *coord_daemon;
extern volatile int coord_stopping; /* answer long polls at once */

/* state.c */
int state_init(const struct coord_config *cfg);
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
/* JSON views; call with state.lock held. */
json_t *job_to_json(const struct job *job, int with_history);
json_t *node_to_json(const struct node *node);
/* The assignment of part part of job's current attempt. */
json_t *assignment_to_json(const struct job *job, int part);
/* The part of job placed on node_id, or -1. */
int job_part_on(const struct job *job, int64_t node_id);
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
 * Decodes a register body (untrusted). OUT: tmp->name, cpus, mem_mib,
 * gpus (malloc'd, caller frees even on failure), *running (a new
 * reference on success). Returns 0 or GP_EINVAL with err set.
 */
int register_decode(json_t *body, struct node *tmp, json_t **running,
    char *err, size_t errlen);

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
/* Resumes every waiter whose deadline passed (called by the ticker). */
void notify_expire(int64_t now_mono);
/* Called when a request finishes, to unlink a waiter still listed. */
void notify_forget(struct request *req);
/* Resume a suspended connection that has its answer ready. */
void notify_resume(struct MHD_Connection *conn, struct request *req);

/* joblog.c */
int joblog_init(const char *data_dir);
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
/* Reads up to max bytes of part's log at offset. OUT: *data, *len. */
int joblog_read(int64_t job_id, int part, int64_t offset, size_t max,
    char **data, size_t *len);
int64_t joblog_size_on_disk(int64_t job_id);
int64_t joblog_part_size_on_disk(int64_t job_id, int part);
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

/* ckpt.c */
struct ckpt_upload;
/* Opens DATA/checkpoints.db and starts the GC thread. */
int ckpt_init(const struct coord_config *cfg);
void ckpt_stop(void);
/* 1 when url is a checkpoint route (answered by ckpt_handle). */
int ckpt_route_match(const char *url);
/* The body limit of a checkpoint route; 0: the default. */
size_t ckpt_body_limit(const char *url);
enum MHD_Result ckpt_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/*
 * A chunk PUT is streamed to a temporary file while it arrives: _begin
 * (after authentication, before any body byte) checks the caller and
 * sets req->upload, _data takes the body, _end verifies and answers,
 * _free (from api_completed) removes what an aborted upload left.
 */
int ckpt_upload_wanted(const char *url, const char *method);
void ckpt_upload_begin(struct request *req, const char *url);
void ckpt_upload_data(struct request *req, const char *data, size_t len);
enum MHD_Result ckpt_upload_end(struct MHD_Connection *conn,
    struct request *req);
void ckpt_upload_free(struct ckpt_upload *upload);
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
 * A chunk PUT for another route: _new sets req->upload (refused with 401
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

/* data.c */
/* Creates data.c's tables in ckpt_db (after ckpt_init). */
int data_init(const struct coord_config *cfg);
/* 1 when url is a data route (answered by data_handle). */
int data_route_match(const char *url);
/* The body limit of a data route; 0: the default. */
size_t data_body_limit(const char *url);
enum MHD_Result data_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/* A chunk PUT of an upload (PUT /v1/uploads/ID/chunks/HEX). */
int data_upload_wanted(const char *url, const char *method);
void data_upload_begin(struct request *req, const char *url);
/*
 * Submit: resolves and checks spec->data for the caller (owner defaults
 * to the caller, version to the latest; the job's owner must own each
 * data set or have it shared), writing the pinned owner and version into
 * spec. Returns 0, or the HTTP status with err set.
 */
int data_pin(const struct token_entry *who, struct gp_jobspec *spec,
    char *err, size_t errlen);
/* Adds the chunks user's data sets, outputs and uploads use (ckpt_lock). */
int data_collect_refs(const char *user, json_t *refs);
/* Drops expired uploads and outputs (the GC thread). */
void data_gc_expire(void);

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

/* image.c */
struct image_upload;
/* Opens DATA/images.db and starts the GC thread. */
int image_init(const struct coord_config *cfg);
void image_stop(void);
/* 1 when url is an image route (answered by image_handle). */
int image_route_match(const char *url);
size_t image_body_limit(const char *url);
enum MHD_Result image_handle(struct MHD_Connection *conn,
    struct request *req, const char *url, const char *method);
/* The streamed blob PUT, as ckpt_upload_* (see there). */
int image_upload_wanted(const char *url, const char *method);
void image_upload_begin(struct request *req, const char *url);
void image_upload_data(struct request *req, const char *data, size_t len);
enum MHD_Result image_upload_end(struct MHD_Connection *conn,
    struct request *req);
void image_upload_free(struct image_upload *upload);
/*
 * Resolves a submit's image reference (a name, NAME@sha256:..., or
 * sha256:...) and pins it. OUT: pinned ("NAME@sha256:..."), *signers (a
 * new array of the keys that signed it). Returns 0, or GP_ENOENT /
 * GP_EINVAL with err.
 */
int image_resolve(const char *ref, char *pinned, size_t len,
    json_t **signers, char *err, size_t errlen);
/* The signer keys of a stored image (a new array; empty when none). */
json_t *image_signers(const char *digest);
/* At start-up: fills the signers of every unfinished image job. */
void image_attach_jobs(void);
/* acct_api.c: groups, prices, budgets, usage and the ledger over HTTP */
/* 1 when url is an accounting route (answered by acct_handle). */
int acct_route_match(const char *url);
enum MHD_Result acct_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/* Applies an OP_ACCT in the state thread. */
void acct_apply(struct op *op);
/* metrics.c: Prometheus metrics; the event hooks are lock-free. */
int metrics_init(void);
/* The state thread places job (before job_assign changes it). */
void metrics_job_assigned(const struct job *job, int64_t now_ms);
/* A poll hands job to its agent (first hand-over of the attempt only). */
void metrics_job_delivered(struct job *job, int64_t now_mono);
void metrics_job_requeued(const char *reason);
void metrics_job_restored(void);
void metrics_checkpoint_committed(int64_t bytes);
void metrics_chunk_stored(size_t bytes);
void metrics_unauthorized(void);
/* The exposition; takes state.lock for reading. 0 or GP_ENOMEM. */
int metrics_render(struct gp_buf *out);

/* web.c: the dashboard's embedded files (GET /, /ui/...). */
int web_route_match(const char *url, const char *method);
enum MHD_Result web_handle(struct MHD_Connection *conn, const char *url);
/* The size of an embedded file (0: none); for tests. */
size_t web_asset_size(const char *url);

/* api.c */
enum MHD_Result api_handle(void *cls, struct MHD_Connection *conn,
    const char *url, const char *method, const char *version,
    const char *upload_data, size_t *upload_data_size, void **con_cls);
/*
 * Checks an agent's heartbeat, started or finished body (untrusted):
 * kind is "heartbeat", "started" or "finished". Returns 0 or GP_EINVAL
 * with err set. Fuzzed: tests/fuzz/fuzz_agent_report.c.
 */
int api_check_agent_body(const char *kind, json_t *body, char *err,
    size_t errlen);
/*
 * Checks a batch of reports (POST /v1/agent/reports, untrusted): node_id
 * and 1 to API_REPORTS_MAX reports, each {job_id, attempt, event} plus
 * what a started or finished report carries, every one valid. Returns 0
 * or GP_EINVAL with err naming the first bad report. Fuzzed:
 * tests/fuzz/fuzz_agent_reports.c.
 */
#define API_REPORTS_MAX 1024
int api_check_reports(json_t *body, char *err, size_t errlen);
void api_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe);

#endif
