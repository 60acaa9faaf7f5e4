/*
 * state.c: the coordinator's model (jobs, nodes, tokens) and the state
 * thread. Handlers never change the model themselves: they queue an op and
 * suspend their connection. The state thread takes every queued op at
 * once, applies them under the write lock, expires leases, runs the
 * scheduler, writes the whole batch in one SQLite transaction, and only
 * then answers the callers and hands new work to the agents. So an
 * acknowledged submission is on disk, a dispatched job is on disk before an
 * agent sees it, and N concurrent submissions cost one fsync.
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "state.h"
#include "state_int.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "sched.h"

struct state state;

/* How long nodes have to come back after a coordinator restart. */
#define RESTART_GRACE_MS 15000

const char *
job_state_name(enum job_state s)
{
	static const char *names[] = {"queued", "running", "succeeded",
	    "failed", "cancelled", "timeout"};

	return (unsigned)s < GP_ARRAY_LEN(names) ? names[s] : "unknown";
}

int
job_finished(const struct job *job)
{
	return job->state >= JOB_SUCCEEDED;
}

/* ---- tables ---- */

static size_t
hash_slot(const char *hex, size_t cap)
{
	uint64_t h = 1469598103934665603ULL;

	while (*hex)
		h = (h ^ (unsigned char)*hex++) * 1099511628211ULL;
	return (size_t)(h & (cap - 1));
}

static int
token_insert(struct token_entry *t)
{
	size_t i, slot;

	if ((state.ntokens + 1) * 2 > state.tokens_cap) {
		size_t cap = state.tokens_cap ? state.tokens_cap * 2 : 64;
		struct token_entry **tab = calloc(cap, sizeof(*tab));
		if (tab == NULL)
			return GP_ENOMEM;
		for (i = 0; i < state.tokens_cap; i++) {
			struct token_entry *e = state.tokens[i];
			if (e == NULL)
				continue;
			slot = hash_slot(e->hash, cap);
			while (tab[slot] != NULL)
				slot = (slot + 1) & (cap - 1);
			tab[slot] = e;
		}
		free(state.tokens);
		state.tokens = tab;
		state.tokens_cap = cap;
	}
	slot = hash_slot(t->hash, state.tokens_cap);
	while (state.tokens[slot] != NULL)
		slot = (slot + 1) & (state.tokens_cap - 1);
	state.tokens[slot] = t;
	state.ntokens++;
	if (t->id >= state.next_token_id)
		state.next_token_id = t->id + 1;
	return 0;
}

/* Takes t out of the table (open addressing: re-places its cluster). */
static void
token_remove(const struct token_entry *t)
{
	size_t slot, next;
	struct token_entry *e;

	slot = hash_slot(t->hash, state.tokens_cap);
	while (state.tokens[slot] != NULL && state.tokens[slot] != t)
		slot = (slot + 1) & (state.tokens_cap - 1);
	if (state.tokens[slot] == NULL)
		return;
	state.tokens[slot] = NULL;
	state.ntokens--;
	for (next = (slot + 1) & (state.tokens_cap - 1);
	     (e = state.tokens[next]) != NULL;
	     next = (next + 1) & (state.tokens_cap - 1)) {
		state.tokens[next] = NULL;
		slot = hash_slot(e->hash, state.tokens_cap);
		while (state.tokens[slot] != NULL)
			slot = (slot + 1) & (state.tokens_cap - 1);
		state.tokens[slot] = e;
	}
}

static struct token_entry *
token_by_id(int64_t id)
{
	size_t i;

	for (i = 0; i < state.tokens_cap; i++)
		if (state.tokens[i] != NULL && state.tokens[i]->id == id)
			return state.tokens[i];
	return NULL;
}

static int
cmp_token_id(const void *a, const void *b)
{
	const struct token_entry *x = *(const struct token_entry *const *)a;
	const struct token_entry *y = *(const struct token_entry *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

const struct token_entry *
state_token_lookup(const char *hash)
{
	size_t slot;

	if (state.tokens_cap == 0)
		return NULL;
	slot = hash_slot(hash, state.tokens_cap);
	while (state.tokens[slot] != NULL) {
		if (strcmp(state.tokens[slot]->hash, hash) == 0)
			return state.tokens[slot];
		slot = (slot + 1) & (state.tokens_cap - 1);
	}
	return NULL;
}

static int
grow(void **arr, int64_t *cap, int64_t need, size_t elem)
{
	int64_t ncap = *cap ? *cap : 1024;
	void *p;

	if (need < *cap)
		return 0;
	while (ncap <= need)
		ncap *= 2;
	p = realloc(*arr, (size_t)ncap * elem);
	if (p == NULL)
		return GP_ENOMEM;
	memset((char *)p + (size_t)*cap * elem, 0,
	    (size_t)(ncap - *cap) * elem);
	*arr = p;
	*cap = ncap;
	return 0;
}

struct job *
state_job(int64_t id)
{
	if (id <= 0 || id >= state.njobs_cap)
		return NULL;
	return state.jobs[id];
}

struct node *
state_node(int64_t id)
{
	if (id <= 0 || id >= state.nodes_cap)
		return NULL;
	return state.nodes[id];
}

struct node *
state_node_by_name(const char *name)
{
	int64_t i;

	for (i = 1; i < state.nnodes; i++)
		if (state.nodes[i] != NULL &&
		    strcmp(state.nodes[i]->name, name) == 0)
			return state.nodes[i];
	return NULL;
}

int
job_insert(struct job *job)
{
	if (grow((void **)&state.jobs, &state.njobs_cap, job->id,
		sizeof(*state.jobs)) != 0)
		return GP_ENOMEM;
	state.jobs[job->id] = job;
	state.jobs_resident++;
	if (job->id >= state.next_job_id)
		state.next_job_id = job->id + 1;
	return 0;
}

int
node_insert(struct node *node)
{
	if (grow((void **)&state.nodes, &state.nodes_cap, node->id,
		sizeof(*state.nodes)) != 0)
		return GP_ENOMEM;
	state.nodes[node->id] = node;
	if (node->id >= state.nnodes)
		state.nnodes = node->id + 1;
	if (node->id >= state.next_node_id)
		state.next_node_id = node->id + 1;
	node->outbox_assign = json_array();
	node->outbox_cancel = json_array();
	node->outbox_checkpoint = json_array();
	node->outbox_stop = json_array();
	node->lent = ~0ULL;
	node->accepting = 1;
	return 0;
}

/* Closes the holes removals left in the queue, in one pass. */
void
queue_compact(void)
{
	int i, n = 0;

	if (state.queue_holes == 0)
		return;
	for (i = 0; i < state.nqueue; i++) {
		struct job *j = state.queue[i];
		if (j == NULL)
			continue;
		j->queue_pos = n;
		state.queue[n++] = j;
	}
	state.nqueue = n;
	state.queue_holes = 0;
}

/* The queue: kept in job id order, so a requeued job keeps its place. */
int
queue_insert(struct job *job)
{
	int i;

	queue_compact();
	if (state.nqueue == state.capqueue) {
		int cap = state.capqueue ? state.capqueue * 2 : 1024;
		struct job **q = realloc(state.queue, (size_t)cap * sizeof(*q));
		if (q == NULL)
			return GP_ENOMEM;
		state.queue = q;
		state.capqueue = cap;
	}
	i = state.nqueue;
	while (i > 0 && state.queue[i - 1]->id > job->id) {
		state.queue[i] = state.queue[i - 1];
		state.queue[i]->queue_pos = i;
		i--;
	}
	if (job->wait == NULL &&
	    (job->wait = calloc(1, sizeof(*job->wait))) == NULL)
		return GP_ENOMEM;
	state.queue[i] = job;
	job->queue_pos = i;
	state.nqueue++;
	live_queued(job, 1);
	return 0;
}

void
queue_remove(struct job *job)
{
	if (job->queue_pos < 0)
		return;
	state.queue[job->queue_pos] = NULL;
	state.queue_holes++;
	job->queue_pos = -1;
	live_queued(job, -1);
	if (job->wait != NULL)
		free(job->wait->hold_reason);
	free(job->wait);
	job->wait = NULL;
	job->sj.hold_reason = NULL; /* it pointed into wait */
}

static void
node_add_job(struct node *node, int64_t job_id)
{
	if (node->njobs == node->capjobs) {
		int cap = node->capjobs ? node->capjobs * 2 : 8;
		int64_t *p = realloc(node->jobs, (size_t)cap * sizeof(*p));
		if (p == NULL)
			gp_fatalx("out of memory");
		node->jobs = p;
		node->capjobs = cap;
	}
	node->jobs[node->njobs++] = job_id;
}

/* Marks on node what part k of job holds: GPUs whole, or a share. */
void
node_take_part(struct node *node, const struct job *job, int k)
{
	const struct job_part *p = &job->parts[k];
	int i;

	node_add_job(node, job->id);
	if (p->gpu_milli > 0 && p->gpu_milli < 1000) {
		if (p->ngpus == 1 && p->gpus[0] < node->ngpus) {
			struct node_gpu *g = &node->gpus[p->gpus[0]];
			g->shared_milli += p->gpu_milli;
			g->shared_mem_mib += p->gpu_mem_mib;
			g->nshared++;
		}
		return;
	}
	for (i = 0; i < p->ngpus; i++)
		if (p->gpus[i] < node->ngpus)
			node->gpus[p->gpus[i]].job_id = job->id;
}

/* Undoes node_take_part. */
void
node_remove_job(struct node *node, const struct job *job, int k)
{
	const struct job_part *p = &job->parts[k];
	int i;

	for (i = 0; i < node->njobs; i++) {
		if (node->jobs[i] == job->id) {
			node->jobs[i] = node->jobs[--node->njobs];
			break;
		}
	}
	if (p->gpu_milli > 0 && p->gpu_milli < 1000) {
		if (p->ngpus == 1 && p->gpus[0] < node->ngpus) {
			struct node_gpu *g = &node->gpus[p->gpus[0]];
			g->shared_milli -= p->gpu_milli;
			g->shared_mem_mib -= p->gpu_mem_mib;
			if (--g->nshared <= 0) {
				g->nshared = 0;
				g->shared_milli = 0;
				g->shared_mem_mib = 0;
			}
		}
		return;
	}
	for (i = 0; i < node->ngpus; i++)
		if (node->gpus[i].job_id == job->id)
			node->gpus[i].job_id = 0;
}

/* The part of job placed on node_id, or -1. */
int
job_part_on(const struct job *job, int64_t node_id)
{
	int k;

	for (k = 0; k < job->nparts; k++)
		if (job->parts[k].node_id == node_id && node_id != 0)
			return k;
	return -1;
}

/* A job's parts, as its spec asks (store.c may have filled some). */
int
job_parts_alloc(struct job *job)
{
	int n = job->spec.nodes > 1 ? job->spec.nodes : 1;

	if (job->parts != NULL && job->nparts == n)
		return 0;
	free(job->parts);
	job->parts = calloc((size_t)n, sizeof(*job->parts));
	if (job->parts == NULL)
		return GP_ENOMEM;
	job->nparts = n;
	return 0;
}

/* ---- loading ---- */

static void
load_token(void *arg, struct token_entry *t)
{
	(void)arg;
	if (token_insert(t) != 0)
		gp_fatalx("out of memory loading tokens");
}

static void
load_node(void *arg, struct node *n)
{
	(void)arg;
	/*
	 * Unknown until the agent comes back. Agents retry with a backoff
	 * of up to a few seconds while we are down, so the first lease after
	 * a restart is longer: RESTART_GRACE_MS, or the lease if longer.
	 */
	n->up = 0;
	n->group_id = token_group(n->owner_token);
	atomic_store(&n->last_seen_mono,
	    gp_mono_ms() + (state.cfg.lease_ms < RESTART_GRACE_MS
				   ? RESTART_GRACE_MS - state.cfg.lease_ms
				   : 0));
	if (node_insert(n) != 0)
		gp_fatalx("out of memory loading nodes");
}

/*
 * What a job read from the database has beside its row: no place in the
 * queue, its logs' sizes on disk, its group's id (by the name submit
 * wrote into its spec). Its parts, if any, must be allocated.
 */
void
job_from_disk(struct job *j)
{
	const struct ledger_group *g;
	int k;

	j->queue_pos = -1;
	j->log_size = joblog_size_on_disk(j->id);
	for (k = 0; k < j->nparts; k++)
		j->parts[k].log_size = k == 0
		    ? j->log_size
		    : joblog_part_size_on_disk(j->id, k);
	g = ledger_group_by_name(&ledger, j->spec.group);
	if (g == NULL)
		g = ledger_group_by_name(&ledger, ACCT_DEFAULT_GROUP);
	j->group_id = g != NULL ? g->id : 1;
}

static void
load_job(void *arg, struct job *j)
{
	struct node *node;
	int k;

	(void)arg;
	if (job_insert(j) != 0 || job_parts_alloc(j) != 0)
		gp_fatalx("out of memory loading jobs");
	job_from_disk(j);
	j->user_id = live_user_id(j->user);
	live_sched_job(j, &j->spec, &j->sj);
	if (job_finished(j)) {
		done_push(j->id);
	} else if (j->state == JOB_QUEUED) {
		retry_restore(j); /* its back-off, from its history */
		queue_insert(j);
	} else if (j->state == JOB_RUNNING) {
		live_array_running(j, 1);
		struct attempt_record *a = j->nhistory > 0 &&
		        j->history[j->nhistory - 1].attempt == j->attempts
		    ? &j->history[j->nhistory - 1]
		    : NULL;
		for (k = 0; k < j->nparts; k++) {
			struct job_part *p = &j->parts[k];
			if (p->ended || p->node_id == 0)
				continue;
			node = state_node(p->node_id);
			if (node == NULL) {
				gp_warn("running job on unknown node job=%lld "
					"part=%d",
				    (long long)j->id, k);
				p->node_id = 0;
				p->ended = 1;
				live_overlay_forget(j, k);
				continue;
			}
			node_take_part(node, j, k);
			/* After a restart we cannot know whether it was
			 * delivered; the agent's next register or
			 * heartbeat will confirm it. */
			if (!p->started_ack)
				p->delivered_mono = gp_mono_ms();
			p->started_ack = 1;
		}
		live_overlay_loaded(j);
		j->started_ack = 1;
		j->preempt_for = a != NULL ? a->preempt_for : 0;
		/* What was posted for it: the ledger is the truth. */
		if (a != NULL && a->meter.from_ms > 0 &&
		    ledger_restore_meter(&ledger, j->id, j->attempts,
			j->nparts > 1 ? 0 : -1, &a->meter) != 0)
			gp_fatalx("cannot read the ledger of job %lld",
			    (long long)j->id);
		for (k = 0; a != NULL && k < a->nmore; k++)
			if (a->more[k].meter.from_ms > 0 &&
			    ledger_restore_meter(&ledger, j->id, j->attempts,
				k + 1, &a->more[k].meter) != 0)
				gp_fatalx("cannot read the ledger of job %lld",
				    (long long)j->id);
		if (a != NULL && j->nparts > 1)
			a->next_seq = ledger_next_seq(&ledger, j->id,
			    j->attempts);
	}
}

/* --prices FILE: replaces the price table (docs/accounting.md). */
static int
load_prices(const char *path)
{
	struct acct_price table[ACCT_PRICES_MAX];
	char *text, err[256];
	size_t len, n;
	int rc;

	if (gp_read_file(path, 1 << 20, &text, &len) != 0) {
		gp_error("cannot read the price file path=%s", path);
		return GP_EIO;
	}
	rc = acct_prices_parse(text, len, table, ACCT_PRICES_MAX, &n, err,
	    sizeof(err));
	free(text);
	if (rc != 0) {
		gp_error("bad price file path=%s error=\"%s\"", path, err);
		return GP_EINVAL;
	}
	if (state.store->ops->begin(state.store) != 0)
		return GP_EIO;
	if (ledger_prices_replace(&ledger, table, n) != 0) {
		state.store->ops->rollback(state.store);
		return GP_EIO;
	}
	if (state.store->ops->commit(state.store) != 0)
		return GP_EIO;
	gp_info("prices loaded path=%s classes=%zu", path, n);
	return 0;
}

int
state_init(const struct coord_config *cfg)
{
	const struct store_loader loader = {NULL, load_token, load_node,
	    load_job};
	char err[512];
	int64_t i, queued = 0, running = 0;
	int rc;

	pthread_rwlock_init(&state.lock, NULL);
	if (loop_init() != 0)
		return GP_ENOMEM;
	state.cfg = *cfg;
	state.next_job_id = state.next_node_id = state.next_token_id = 1;
	if ((rc = gp_store_open(cfg->db, cfg->data_dir, &state.store, err,
		 sizeof(err))) != 0) {
		gp_error("cannot open the store error=\"%s\"", err);
		return rc;
	}
	if ((rc = gp_store_check_pool(state.store, cfg->data_dir, err,
		 sizeof(err))) != 0) {
		gp_error("refusing the store error=\"%s\"", err);
		return rc;
	}
	gp_info("store open kind=%s target=%s pool=%s schema=%d",
	    state.store->ops->name, state.store->target, state.store->pool_id,
	    state.store->schema_version);
	/* Logs beside the blobs (--blob-dir; data_dir unless given). */
	if (joblog_init(cfg->blob_dir[0] != '\0' ? cfg->blob_dir :
	    cfg->data_dir, cfg->data_dir) != 0)
		return GP_EIO;
	if (ledger_open(&ledger, state.store, cfg->half_life_ms,
		gp_now_ms()) != 0)
		return GP_EIO;
	if (cfg->prices_file[0] != '\0' && load_prices(cfg->prices_file) != 0)
		return GP_EIO;
	if (state.store->ops->load(state.store, &loader,
	        cfg->min_job_age_ms > 0 ? gp_now_ms() - cfg->min_job_age_ms
	                                : 0,
	        state.purged, &i) != 0) {
		gp_error("cannot load the state error=\"%s\"",
		    gp_store_error(state.store));
		return GP_EIO;
	}
	/*
	 * Ids are never given twice: not those of jobs left on disk. Every
	 * id below next_job_id has its slot (NULL when on disk only).
	 */
	if (i >= state.next_job_id)
		state.next_job_id = i + 1;
	if (grow((void **)&state.jobs, &state.njobs_cap, state.next_job_id,
	        sizeof(*state.jobs)) != 0)
		return GP_ENOMEM;
	done_sort();
	/* Revoked tokens' ids are never given again. */
	if (state.store->ops->token_id_floor(state.store, &i) != 0)
		return GP_EIO;
	if (i > state.next_token_id)
		state.next_token_id = i;
	for (i = 1; i < state.next_job_id; i++) {
		if (state.jobs[i] == NULL)
			continue;
		queued += state.jobs[i]->state == JOB_QUEUED;
		running += state.jobs[i]->state == JOB_RUNNING;
	}
	gp_info("state loaded jobs=%lld in_memory=%lld queued=%lld "
		"running=%lld nodes=%lld tokens=%zu",
	    (long long)(state.next_job_id - 1),
	    (long long)state.jobs_resident, (long long)queued,
	    (long long)running, (long long)(state.next_node_id - 1),
	    state.ntokens);
	state.sched_dirty = 1;
	return 0;
}

/* A node and what hangs off it (state_fini). */
static void
node_free(struct node *n)
{
	free(n->gpus);
	free(n->jobs);
	json_decref(n->outbox_assign);
	json_decref(n->outbox_cancel);
	json_decref(n->outbox_checkpoint);
	json_decref(n->outbox_stop);
	free(n);
}

void
state_fini(void)
{
	int64_t i;
	size_t k;

	for (i = 1; i < state.next_job_id && state.jobs != NULL; i++)
		if (state.jobs[i] != NULL)
			job_free(state.jobs[i]);
	free(state.jobs);
	for (i = 0; i < state.nnodes && state.nodes != NULL; i++)
		if (state.nodes[i] != NULL)
			node_free(state.nodes[i]);
	free(state.nodes);
	for (k = 0; k < state.tokens_cap && state.tokens != NULL; k++)
		free(state.tokens[k]);
	free(state.tokens);
	free(state.queue);
	done_reset();
	live_fini();
	ledger_close(&ledger);
	gp_store_close(state.store);
	pthread_rwlock_destroy(&state.lock);
	memset(&state, 0, sizeof(state));
}

int
state_create_admin_token_if_none(void)
{
	char token[GP_TOKEN_LEN + 1], path[1200];
	struct token_entry *t;
	size_t i;

	for (i = 0; i < state.tokens_cap; i++)
		if (state.tokens[i] != NULL &&
		    state.tokens[i]->role == GP_ROLE_ADMIN)
			return 0;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return GP_ENOMEM;
	gp_token_generate(token);
	gp_token_hash(token, t->hash);
	t->id = state.next_token_id;
	t->role = GP_ROLE_ADMIN;
	t->created_ms = gp_now_ms();
	gp_strlcpy(t->name, "admin", sizeof(t->name));
	if (ledger_user_groups(&ledger, t->name, &t->group_id, 1) != 1)
		t->group_id = 1;
	if (state.store->ops->begin(state.store) != 0) {
		free(t);
		return GP_EIO;
	}
	if (state.store->ops->put_token(state.store, t, t->created_ms) != 0 ||
	    state.store->ops->commit(state.store) != 0) {
		state.store->ops->rollback(state.store);
		free(t);
		return GP_EIO;
	}
	token_insert(t);
	snprintf(path, sizeof(path), "%s/admin.token", state.cfg.data_dir);
	{
		char line[GP_TOKEN_LEN + 96];
		snprintf(line, sizeof(line), "%s%s%s\n", token,
		    state.cfg.tls_pin[0] ? GP_TOKEN_PIN_SEP : "",
		    state.cfg.tls_pin);
		if (gp_write_file(path, line, strlen(line), 0600) != 0)
			gp_error("cannot write admin token path=%s", path);
	}
	printf("gpupool: admin token (shown once; also in %s): %s%s%s\n",
	    path, token, state.cfg.tls_pin[0] ? GP_TOKEN_PIN_SEP : "",
	    state.cfg.tls_pin);
	fflush(stdout);
	return 0;
}

void
apply_token_create(struct op *op)
{
	char token[GP_TOKEN_LEN + 96];
	struct token_entry *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		set_error(op, 503, "out of memory");
		return;
	}
	const struct ledger_group *g = ledger_group_by_name(&ledger,
	    op->acct.group[0] ? op->acct.group : ACCT_DEFAULT_GROUP);

	if (g == NULL) {
		free(t);
		set_error(op, 400,
		    "group: no group '%s' (an admin creates it: gpupool group "
		    "create %s)",
		    op->acct.group, op->acct.group);
		return;
	}
	/* The handler checked role and name (acct_decode). */
	gp_token_generate(token);
	gp_token_hash(token, t->hash);
	t->id = state.next_token_id;
	t->role = op->acct.role;
	gp_strlcpy(t->name, op->acct.name, sizeof(t->name));
	t->group_id = g->id;
	t->created_ms = gp_now_ms();
	if (token_insert(t) != 0 ||
	    state.store->ops->put_token(state.store, t, t->created_ms) != 0)
		gp_fatalx("cannot store token");
	/* A user token makes its user a member of its group. */
	if (t->role == GP_ROLE_USER &&
	    ledger_member_add(&ledger, t->name, g->id) != 0)
		gp_fatalx("cannot store a group member");
	op->status = 201;
	/* With its own CA: the token carries its hash (tls_auto.c). */
	if (state.cfg.tls_pin[0] != '\0') {
		char with_pin[2 * (GP_TOKEN_LEN + 96)];

		snprintf(with_pin, sizeof(with_pin), "%s%s%s", token,
		    GP_TOKEN_PIN_SEP, state.cfg.tls_pin);
		gp_strlcpy(token, with_pin, sizeof(token));
	}
	op->result = json_pack("{s:s,s:I,s:s,s:s,s:s}", "token", token, "id",
	    (json_int_t)t->id, "role", gp_role_name(t->role), "name", t->name,
	    "group", g->name);
	gp_info("token created id=%lld role=%s name=%s group=%s",
	    (long long)t->id, gp_role_name(t->role), t->name, g->name);
}

void
apply_token_revoke(struct op *op)
{
	struct token_entry *t = token_by_id(op->job_id);
	size_t i, admins = 0;

	if (t == NULL) {
		set_error(op, 404, "no token %lld", (long long)op->job_id);
		return;
	}
	for (i = 0; i < state.tokens_cap; i++)
		admins += state.tokens[i] != NULL &&
		    state.tokens[i]->role == GP_ROLE_ADMIN;
	if (t->role == GP_ROLE_ADMIN && admins <= 1) {
		set_error(op, 409,
		    "token %lld is the last admin token: create another "
		    "admin token first",
		    (long long)t->id);
		return;
	}
	if (state.store->ops->delete_token(state.store, t->id) != 0)
		gp_fatalx("cannot delete token %lld", (long long)t->id);
	token_remove(t);
	op->status = 200;
	op->result = json_pack("{s:I,s:s,s:s,s:b}", "id", (json_int_t)t->id,
	    "role", gp_role_name(t->role), "name", t->name, "revoked", 1);
	gp_info("token revoked id=%lld role=%s name=%s by=%s",
	    (long long)t->id, gp_role_name(t->role), t->name, op->caller.name);
	free(t);
}

json_t *
state_tokens_json(void)
{
	struct token_entry **list;
	json_t *arr = json_array();
	char when[40];
	size_t i, n = 0;

	list = calloc(state.ntokens + 1, sizeof(*list));
	if (list == NULL || arr == NULL) {
		free(list);
		json_decref(arr);
		return NULL;
	}
	for (i = 0; i < state.tokens_cap; i++)
		if (state.tokens[i] != NULL)
			list[n++] = state.tokens[i];
	qsort(list, n, sizeof(*list), cmp_token_id);
	for (i = 0; i < n; i++) {
		if (list[i]->created_ms > 0)
			gp_format_time(list[i]->created_ms, when, sizeof(when));
		json_array_append_new(arr,
		    json_pack("{s:I,s:s,s:s,s:s?}", "id",
			(json_int_t)list[i]->id, "name", list[i]->name, "role",
			gp_role_name(list[i]->role), "created_at",
			list[i]->created_ms > 0 ? when : NULL));
	}
	free(list);
	return json_pack("{s:o}", "tokens", arr);
}
