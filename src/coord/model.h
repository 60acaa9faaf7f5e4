/*
 * model.h: the coordinator's model: jobs, their parts and attempts, nodes,
 * tokens, the configuration and the one `struct state` (state.c owns it).
 */
#ifndef GP_COORD_MODEL_H
#define GP_COORD_MODEL_H

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
/* UDP port slots a node may register for gang overlay parts (at most). */
#define GP_OVERLAY_SLOTS_MAX 256

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
	/* Bytes over its network, all parts added up, once it ended. */
	int64_t net_sent, net_received;
	/*
	 * Its interactive idle clock (relay.c), kept so that a coordinator
	 * restart does not forget it: the session's idle limit (0: none)
	 * and when its streams last moved a byte (wall clock, ms), written
	 * at the relay's coarse grain (relay.c's idle_grain_ms), never per
	 * byte.
	 */
	int64_t idle_limit_ms, idle_seen_ms;
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
	/*
	 * A fraction's use as libgpupool-cuda.so reports it through the
	 * agent's heartbeat (docs/gpu-sharing.md); written under the read
	 * lock, hence atomic. gpu_effective_milli 0: no report yet.
	 */
	_Atomic int64_t gpu_mem_used_mib;
	_Atomic int32_t gpu_effective_milli, gpu_util;
	/*
	 * Bytes the part sent and received over its network, from the
	 * agent's heartbeat (under the read lock, hence atomic) and its
	 * finished report.
	 */
	_Atomic int64_t net_sent, net_received;
	/*
	 * Its gang overlay (live.c; docs/agent.md "Gangs behind NATs"): the
	 * WireGuard key pair made for this part when its gang is assigned
	 * ("" none), and its UDP port's slot on its node + 1 (0 none, at
	 * most GP_OVERLAY_SLOTS_MAX). The public key and the slot are kept
	 * in the store with the part while it runs (store.c's parts_json),
	 * so that a restarted coordinator answers the same overlay and
	 * gives no other part its port. The private key goes to this
	 * part's agent alone, is never in the store, and is wiped once its
	 * agent reports the part started (nothing sends it again) or when
	 * the part ends (live_overlay_forget).
	 */
	char ov_priv[48], ov_pub[48];
	int ov_slot;
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

/*
 * The requeue back-off (state_retry.c): attempts in a row that failed to
 * start, when the next may be placed, and the nodes to keep off for a
 * while. Allocated at the first such failure, freed once an attempt has
 * started and run, or the job ends.
 */
#define RETRY_AVOID_MAX 8
struct job_retry {
	int failures;		/* attempts in a row that failed to start */
	int64_t not_before_ms;	/* wall clock: placed again from then on */
	char reason[24];	/* the last one's ("image_unavailable") */
	char node[GP_NAME_MAX + 1]; /* the node it failed on ("" unknown) */
	char why[160];		/* the wait's words, for the scheduler */
	int navoid;
	int64_t avoid[RETRY_AVOID_MAX];	      /* node ids */
	int64_t avoid_until_ms[RETRY_AVOID_MAX]; /* each, until then */
	int64_t avoid_now[RETRY_AVOID_MAX];   /* this pass's (sj points) */
};

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
	struct job_retry *retry; /* NULL: no back-off */
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
	/*
	 * Its gang overlay (register's "overlay"; docs/agent.md): its gang
	 * parts' UDP ports, overlay_port (0: it joins no overlay) and the
	 * overlay_ports - 1 after it, one per overlay gang part it runs.
	 */
	int overlay_port, overlay_ports;
	/*
	 * 1 when its gangs need the overlay: it gave no --advertise-addr
	 * (nothing says other nodes route to it) or its agent asked for the
	 * overlay always (register's overlay.always).
	 */
	int overlay_needed;
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
	int refuse_interactive;		/* no interactive jobs */
	int no_gang_links;		/* links no gang's parts across nodes */
	int interactive_gpus;		/* lent GPUs kept for interactive jobs */
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
	/*
	 * The blob store's files (checkpoints/, images/): --blob-dir, a
	 * directory every coordinator of the pool mounts; data_dir unless
	 * given.
	 */
	char blob_dir[1024];
	/*
	 * Where the durable state is (--db: PATH, sqlite:PATH,
	 * postgresql://...; "": data_dir/state.db); see store.h.
	 */
	char db[1024];
	char tls_cert[1024];
	char tls_key[1024];
	/*
	 * Its own CA's hash (tls_auto.c), carried by the tokens it hands out
	 * ("<token>@sha256:<pin>"); "" with a certificate of the owner's or
	 * none. insecure: plain HTTP beyond loopback (--insecure).
	 */
	char tls_pin[65];
	int insecure;
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
	/*
	 * Interactive jobs (docs/scheduling.md): the time limit of one that
	 * asks for none, and the longest one may ask for.
	 */
	int64_t interactive_time_s;
	int64_t interactive_time_max_s;
};

/* tls_auto.c: DATA/tls, made at first start; sets tls_cert, tls_key, pin */
int tls_auto_setup(struct coord_config *cfg);
/*
 * The job port proxy's certificate, for "*.domain", signed by the CA
 * tls_auto_setup made (DATA/tls/proxy-DOMAIN.key and -chain.pem, made
 * once per domain): their paths in cert and key (each PATH_MAX bytes).
 * 0 or GP_EIO.
 */
int tls_auto_proxy_cert(const struct coord_config *cfg, const char *domain,
    char *cert, char *key);

struct gp_store;

struct state {
	pthread_rwlock_t lock;
	struct coord_config cfg;
	/* The durable state (store.h): the state thread's handle. */
	struct gp_store *store;
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
	/* Nodes whose owner takes no interactive job (offer_apply). */
	int nrefuse_interactive;
	/* Nodes that link no gang's parts across nodes (offer_apply). */
	int nno_gang_links;
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

#endif
