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

#include "coordd.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "sched.h"

struct state state;

static pthread_mutex_t op_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t op_cond = PTHREAD_COND_INITIALIZER;
static struct op *op_head, *op_tail;
static int stopping;
static int thread_exited; /* under op_lock: nobody takes ops any more */
static pthread_t state_thread;

/* What a batch hands out after its commit. */
struct effect {
	struct node *node;
	json_t *assign; /* or NULL */
	json_t *cancel; /* or NULL */
	json_t *stop;	/* or NULL: save and stop (preempt, gang) */
};
static struct effect *effects;
static size_t neffects, capeffects;
static struct job **woken_jobs;
static size_t nwoken, capwoken;
static void done_push(int64_t id);
static void done_sort(void);

static void acct_job_json(const struct job *job, json_t *o);
static void acct_node_json(const struct node *node, json_t *o);
static void bill_attempt_end(struct job *job, struct attempt_record *a);
static void bill_part_end(struct job *job, int k);
static void bill_part_start(struct job *job, int k, int64_t now);
static struct attempt_record *current_attempt(struct job *job);
static int64_t token_group(int64_t token_id);

/* Grace before a delivered attempt that an agent does not list is lost. */
#define LOST_GRACE_MS 3000
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

static int
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

static int
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
static void
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
static int
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

static void
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
static void
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
static void
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
load_token(struct token_entry *t)
{
	if (token_insert(t) != 0)
		gp_fatalx("out of memory loading tokens");
}

static void
load_node(struct node *n)
{
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
static void
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
load_job(struct job *j)
{
	struct node *node;
	int k;

	if (job_insert(j) != 0 || job_parts_alloc(j) != 0)
		gp_fatalx("out of memory loading jobs");
	job_from_disk(j);
	j->user_id = live_user_id(j->user);
	live_sched_job(j, &j->spec, &j->sj);
	if (job_finished(j)) {
		done_push(j->id);
	} else if (j->state == JOB_QUEUED) {
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
	if (store_begin() != 0 || ledger_prices_replace(&ledger, table, n) != 0 ||
	    store_commit() != 0)
		return GP_EIO;
	gp_info("prices loaded path=%s classes=%zu", path, n);
	return 0;
}

int
state_init(const struct coord_config *cfg)
{
	char path[1200];
	int64_t i, queued = 0, running = 0;

	pthread_rwlock_init(&state.lock, NULL);
	state.cfg = *cfg;
	state.next_job_id = state.next_node_id = state.next_token_id = 1;
	snprintf(path, sizeof(path), "%s/state.db", cfg->data_dir);
	if (store_open(path) != 0)
		return GP_EIO;
	if (joblog_init(cfg->data_dir) != 0)
		return GP_EIO;
	if (ledger_open(&ledger, store_db(), path, cfg->half_life_ms,
		gp_now_ms()) != 0)
		return GP_EIO;
	if (cfg->prices_file[0] != '\0' && load_prices(cfg->prices_file) != 0)
		return GP_EIO;
	if (store_load(load_token, load_node, load_job,
	        cfg->min_job_age_ms > 0 ? gp_now_ms() - cfg->min_job_age_ms
	                                : 0,
	        state.purged, &i) != 0)
		return GP_EIO;
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
	if (store_token_id_floor(&i) != 0)
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
	if (store_begin() != 0 || store_put_token(t, t->created_ms) != 0 ||
	    store_commit() != 0) {
		free(t);
		return GP_EIO;
	}
	token_insert(t);
	snprintf(path, sizeof(path), "%s/admin.token", state.cfg.data_dir);
	{
		char line[GP_TOKEN_LEN + 2];
		snprintf(line, sizeof(line), "%s\n", token);
		if (gp_write_file(path, line, strlen(line), 0600) != 0)
			gp_error("cannot write admin token path=%s", path);
	}
	printf("gpupool: admin token (shown once; also in %s): %s\n", path,
	    token);
	fflush(stdout);
	return 0;
}

/* ---- JSON views ---- */

static json_t *
time_json(int64_t ms)
{
	char buf[40];

	if (ms <= 0)
		return json_null();
	gp_format_time(ms, buf, sizeof(buf));
	return json_string(buf);
}

json_t *
job_to_json(const struct job *job, int with_history)
{
	const struct node *node = state_node(job->node_id);
	json_t *o, *gpus = json_array(), *uuids = json_array(), *req;
	int i;

	for (i = 0; i < job->ngpus; i++) {
		json_array_append_new(gpus, json_integer(job->gpus[i]));
		if (node != NULL && job->gpus[i] < node->ngpus)
			json_array_append_new(uuids,
			    json_string(node->gpus[job->gpus[i]].uuid));
	}
	req = json_pack("{s:i,s:I,s:s?,s:i,s:I,s:I}", "gpus", job->spec.gpus,
	    "gpu_mem_mib", (json_int_t)job->spec.gpu_mem_mib, "gpu_model",
	    job->spec.gpu_model[0] ? job->spec.gpu_model : NULL, "cpus",
	    job->spec.cpus, "mem_mib", (json_int_t)job->spec.mem_mib,
	    "time_limit_s", (json_int_t)job->spec.time_limit_s);
	live_request_json(job, req);
	if (req != NULL && gp_jobspec_network_name(job->spec.network) != NULL)
		json_object_set_new(req, "network", json_string(
		    gp_jobspec_network_name(job->spec.network)));
	o = json_pack("{s:I,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,"
		      "s:o,s:o,s:i,s:b,s:o,s:O,s:O}",
	    "id", (json_int_t)job->id, "name", job->spec.name, "user",
	    job->user, "state", job_state_name(job->state), "exit_code",
	    job->has_exit && job->signal == 0 ? json_integer(job->exit_code)
					      : json_null(),
	    "signal", job->signal ? json_integer(job->signal) : json_null(),
	    "reason", job->reason[0] ? json_string(job->reason) : json_null(),
	    "node", node != NULL ? json_string(node->name) : json_null(),
	    "node_id", node != NULL ? json_integer(node->id) : json_null(),
	    "gpus", gpus, "gpu_uuids", uuids, "submitted_at",
	    time_json(job->submitted_ms), "started_at",
	    time_json(job->started_ms), "finished_at",
	    time_json(job->finished_ms), "message",
	    job->message ? json_string(job->message) : json_null(),
	    "attempts", job->attempts, "cancel_requested",
	    job->cancel_requested, "request", req, "command",
	    job->spec.command, "env", job->spec.env);
	if (o != NULL && json_array_size(job->spec.data) > 0)
		json_object_set(o, "data", job->spec.data);
	if (o != NULL && job->spec.array_job_id > 0) {
		json_object_set_new(o, "array_job_id",
		    json_integer(job->spec.array_job_id));
		json_object_set_new(o, "array_task_id",
		    json_integer(job->spec.array_task_id));
		if (job->spec.array_limit > 0)
			json_object_set_new(o, "array_limit",
			    json_integer(job->spec.array_limit));
	}
	if (o != NULL) {
		json_object_set_new(o, "image", job->spec.image[0]
		    ? json_string(job->spec.image) : json_null());
		if (job->state == JOB_QUEUED) {
			char why[1200];
			job_acceptance(job, why, sizeof(why));
			if (why[0] != '\0')
				json_object_set_new(o, "wait_reason",
				    json_string(why));
		}
	}
	if (o != NULL && with_history) {
		json_t *hist = json_array();
		for (i = 0; i < job->nhistory; i++) {
			const struct attempt_record *a = &job->history[i];
			const struct node *an = state_node(a->node_id);
			int64_t end = a->finished_ms ? a->finished_ms
						     : gp_now_ms();
			int64_t saved = a->ckpt_ms > 0 ? a->ckpt_ms : a->started_ms;
			json_t *ck = a->ckpt_version > 0
			    ? json_pack("{s:I,s:o,s:I,s:s,s:I}", "version",
				  (json_int_t)a->ckpt_version, "at",
				  time_json(a->ckpt_ms), "bytes",
				  (json_int_t)a->ckpt_bytes, "label",
				  a->ckpt_label ? a->ckpt_label : "", "uploads",
				  (json_int_t)a->ckpt_count)
			    : json_null();
			json_array_append_new(hist,
			    json_pack("{s:i,s:s?,s:o,s:o,s:s?,s:I,s:o,s:I,s:I}",
				"attempt", a->attempt, "node",
				an ? an->name : NULL, "started_at",
				time_json(a->started_ms), "finished_at",
				time_json(a->finished_ms), "reason",
				a->reason[0] ? a->reason : NULL,
				"restored_version",
				(json_int_t)a->restored_version, "checkpoint",
				ck, "saved_s",
				(json_int_t)((saved - a->started_ms) / 1000),
				"lost_s",
				(json_int_t)(end > saved ? (end - saved) / 1000
							 : 0)));
			/* A preempted attempt: the job it made room for. */
			json_object_set_new(json_array_get(hist, (size_t)i),
			    "preempted_for",
			    a->preempt_for != 0 ? json_integer(a->preempt_for)
						: json_null());
		}
		json_object_set_new(o, "history", hist);
	}
	acct_job_json(job, o);
	live_job_json(job, o);
	return o;
}

json_t *
node_to_json(const struct node *node)
{
	static const char *const images[] = {"any", "signed", "none"};
	json_t *gpus = json_array(), *o, *keys;
	int i;

	for (i = 0; i < node->ngpus; i++) {
		const struct node_gpu *g = &node->gpus[i];
		const struct job *j = state_job(g->job_id);
		/* Who uses each GPU is for everyone to see (the commons). */
		json_t *gj = json_pack(
		    "{s:i,s:s,s:s,s:I,s:o,s:s?,s:i,s:I,s:b,s:o,s:o}", "index",
		    g->index, "uuid", g->uuid, "model", g->model, "mem_mib",
		    (json_int_t)g->mem_mib, "job",
		    g->job_id ? json_integer(g->job_id) : json_null(), "user",
		    j != NULL && g->job_id ? j->user : NULL, "util", g->util,
		    "mem_used_mib", (json_int_t)g->mem_used_mib, "lent",
		    i < 64 && ((node->lent >> i) & 1), "temp_c",
		    node->up && g->temp_c >= 0 ? json_integer(g->temp_c)
					       : json_null(),
		    "power_mw",
		    node->up && g->power_mw >= 0 ? json_integer(g->power_mw)
						 : json_null());
		live_gpu_json(node, i, gj);
		json_array_append_new(gpus, gj);
	}
	o = json_pack("{s:I,s:s,s:s,s:s,s:i,s:I,s:o,s:o,s:i,s:b,s:i,s:I,"
			 "s:I}",
	    "id", (json_int_t)node->id, "name", node->name, "owner",
	    node->owner_name, "state",
	    node->left ? "left" : !node->up ? "down"
	    : !node->accepting ? "paused" : "up",
	    "cpus", node->cpus, "mem_mib", (json_int_t)node->mem_mib,
	    "last_seen", time_json(node->last_seen_ms), "gpus", gpus, "jobs",
	    node->njobs, "accepting", node->accepting, "offer_cpus",
	    node->offer_cpus > 0 ? node->offer_cpus : node->cpus,
	    "offer_mem_mib",
	    (json_int_t)(node->offer_mem_mib > 0 ? node->offer_mem_mib
						 : node->mem_mib),
	    "max_job_s", (json_int_t)node->max_job_s);
	/* What its owner accepts (docs/images.md). */
	if (o != NULL) {
		keys = json_array();
		for (i = 0; i < node->ntrusted && i < GP_TRUST_KEYS_MAX; i++)
			json_array_append_new(keys,
			    json_string(node->trusted[i]));
		json_object_set_new(o, "images", json_string(
		    images[node->images >= 0 && node->images < 3 ?
		    node->images : 0]));
		json_object_set_new(o, "plain_jobs",
		    json_boolean(!node->refuse_plain));
		json_object_set_new(o, "trusted_keys", keys);
	}
	acct_node_json(node, o);
	if (o != NULL)
		json_object_set_new(o, "addr", json_string(node->addr));
	return o;
}

json_t *
assignment_to_json(const struct job *job, int part)
{
	const struct job_part *p = &job->parts[part];
	json_t *gpus = json_array(), *o;
	int i;

	for (i = 0; i < p->ngpus; i++)
		json_array_append_new(gpus, json_integer(p->gpus[i]));
	o = json_pack("{s:I,s:i,s:s,s:s,s:O,s:O,s:o,s:i,s:I,s:I,s:I,s:i,"
			 "s:i}",
	    "job_id", (json_int_t)job->id, "attempt", job->attempts, "name",
	    job->spec.name, "user", job->user, "command", job->spec.command,
	    "env", job->spec.env, "gpus", gpus, "cpus", job->spec.cpus,
	    "mem_mib", (json_int_t)job->spec.mem_mib, "time_limit_s",
	    (json_int_t)job->spec.time_limit_s, "checkpoint_every_s",
	    (json_int_t)job->spec.checkpoint_every_s, "checkpoint_signal",
	    job->spec.checkpoint_signal, "restart_count", job->attempts - 1);
	/* A job array's task: its index and the array's id, as Slurm's. */
	if (o != NULL && job->spec.array_job_id > 0) {
		json_t *env = json_copy(job->spec.env); /* the spec keeps its */
		char v[32];
		snprintf(v, sizeof(v), "%lld", (long long)job->spec.array_job_id);
		json_object_set_new(env, "GPUPOOL_ARRAY_JOB_ID", json_string(v));
		snprintf(v, sizeof(v), "%d", job->spec.array_task_id);
		json_object_set_new(env, "GPUPOOL_ARRAY_TASK_ID", json_string(v));
		json_object_set_new(o, "env", env);
	}
	/* The pinned data sets; the agent fetches the K-th as data/K. */
	if (o != NULL && json_array_size(job->spec.data) > 0)
		json_object_set(o, "data", job->spec.data);
	if (o != NULL && gp_jobspec_network_name(job->spec.network) != NULL)
		json_object_set_new(o, "network", json_string(
		    gp_jobspec_network_name(job->spec.network)));
	live_assignment_json(job, part, o);
	return o;
}

/* The assignment, with the pinned image's digest when it has one. */
static json_t *
assignment_json(const struct job *job, int part)
{
	json_t *a = assignment_to_json(job, part);
	const char *digest = gp_jobspec_image_digest(&job->spec);

	if (a != NULL && digest != NULL)
		json_object_set_new(a, "image", json_string(digest));
	return a;
}

int
job_visible_to(const struct job *job, const struct token_entry *who)
{
	const struct node *node;

	switch (who->role) {
	case GP_ROLE_ADMIN:
		return 1;
	case GP_ROLE_USER:
		return strcmp(job->user, who->name) == 0;
	case GP_ROLE_PROVIDER: {
		/* Its nodes hold (or held last) a part of it. */
		int k;
		for (k = 0; k < job->nparts; k++) {
			node = state_node(job->parts[k].node_id);
			if (node != NULL && node->owner_token == who->id)
				return 1;
		}
		node = state_node(job->node_id);
		return node != NULL && node->owner_token == who->id;
	case GP_ROLE_METRICS:
		return 0;
	}
	}
	return 0;
}

/* ---- effects ---- */

static void
add_effect(struct node *node, json_t *assign, json_t *cancel)
{
	if (neffects == capeffects) {
		size_t cap = capeffects ? capeffects * 2 : 256;
		struct effect *e = realloc(effects, cap * sizeof(*e));
		if (e == NULL)
			gp_fatalx("out of memory");
		effects = e;
		capeffects = cap;
	}
	effects[neffects].node = node;
	effects[neffects].assign = assign;
	effects[neffects].cancel = cancel;
	effects[neffects].stop = NULL;
	neffects++;
}

static void
add_effect_stop(struct node *node, json_t *stop)
{
	add_effect(node, NULL, NULL);
	effects[neffects - 1].stop = stop;
}

static void
wake_job_later(struct job *job)
{
	if (nwoken == capwoken) {
		size_t cap = capwoken ? capwoken * 2 : 256;
		struct job **w = realloc(woken_jobs, cap * sizeof(*w));
		if (w == NULL)
			gp_fatalx("out of memory");
		woken_jobs = w;
		capwoken = cap;
	}
	woken_jobs[nwoken++] = job;
}

static void
persist_job(const struct job *job)
{
	if (store_put_job(job) != 0)
		gp_fatalx("cannot write job %lld to the database",
		    (long long)job->id);
}

static json_t *
cancel_json(const struct job *job)
{
	return json_pack("{s:I,s:i}", "job_id", (json_int_t)job->id, "attempt",
	    job->attempts);
}

/* ---- transitions ---- */

static void
history_close(struct job *job, const char *reason)
{
	struct attempt_record *a;

	if (job->nhistory == 0)
		return;
	a = &job->history[job->nhistory - 1];
	if (a->attempt != job->attempts || a->finished_ms != 0)
		return;
	a->finished_ms = gp_now_ms();
	bill_attempt_end(job, a);
	gp_strlcpy(a->reason, reason, sizeof(a->reason));
}

/*
 * Part k of job no longer holds anything: off its node, out of the
 * scheduler's engine, its meter closed (a gang's parts are billed one by
 * one). The part keeps node_id (the history names it) until the next
 * assignment; ended marks it.
 */
static void
part_release(struct job *job, int k)
{
	struct job_part *p = &job->parts[k];
	struct node *node;

	if (p->ended || p->node_id == 0)
		return;
	node = state_node(p->node_id);
	if (node != NULL) {
		node_remove_job(node, job, k);
		live_part_ended(job, node);
	}
	bill_part_end(job, k);
	p->ended = 1;
}

static void
job_release_all(struct job *job)
{
	int k;

	for (k = 0; k < job->nparts; k++)
		part_release(job, k);
}

static void
job_finish(struct job *job, enum job_state st, const char *reason)
{
	if (job->state == JOB_RUNNING) {
		job_release_all(job);
		live_array_running(job, -1);
	}
	queue_remove(job);
	history_close(job, reason);
	job->state = st;
	job->finished_ms = gp_now_ms();
	job->stopping[0] = '\0';
	job->preempt_for = 0;
	gp_strlcpy(job->reason, reason, sizeof(job->reason));
	persist_job(job);
	wake_job_later(job);
	done_push(job->id);
	state.sched_dirty = 1;
	gp_info("job finished job=%lld state=%s reason=%s exit=%d signal=%d",
	    (long long)job->id, job_state_name(st), reason, job->exit_code,
	    job->signal);
}

#define MAX_ATTEMPTS 200

/* An attempt is gone (node lost, agent forgot it): try again elsewhere. */
static void
job_requeue(struct job *job, const char *reason)
{
	struct node *node = state_node(job->node_id);
	char note[160];

	if (job->cancel_requested) {
		job_finish(job, JOB_CANCELLED, "cancelled");
		return;
	}
	if (job->state == JOB_RUNNING && job->attempts >= MAX_ATTEMPTS) {
		job->has_exit = 0;
		free(job->message);
		job->message = strdup("gave up after too many attempts");
		job_finish(job, JOB_FAILED, reason);
		return;
	}
	job_release_all(job);
	history_close(job, reason);
	metrics_job_requeued(reason);
	if (job->state == JOB_RUNNING)
		live_array_running(job, -1);
	job->state = JOB_QUEUED;
	job->ngpus = 0;
	job->started_ack = 0;
	job->stopping[0] = '\0';
	job->preempt_for = 0;
	snprintf(note, sizeof(note),
	    "[gpupool: attempt %d on node %s ended: %s; job requeued]",
	    job->attempts, node != NULL ? node->name : "?", reason);
	joblog_note(job, note);
	queue_insert(job);
	persist_job(job);
	state.sched_dirty = 1;
	gp_info("job requeued job=%lld attempt=%d reason=%s",
	    (long long)job->id, job->attempts, reason);
}

/*
 * Asks every part of job that still runs to save its work and stop
 * (the checkpoint signal, the owner's grace, a final upload), with
 * reason ("preempted", "gang_stopped"): what a reclaim does, asked by
 * the coordinator. The parts report back with that reason.
 */
static void
job_stop_parts(struct job *job, const char *reason)
{
	int k;

	for (k = 0; k < job->nparts; k++) {
		struct job_part *p = &job->parts[k];
		struct node *node = state_node(p->node_id);
		if (p->ended || node == NULL)
			continue;
		add_effect_stop(node, json_pack("{s:I,s:i,s:s}", "job_id",
		    (json_int_t)job->id, "attempt", job->attempts, "reason",
		    reason));
	}
}

/* Kills every part of job that still runs (a failed gang, a cancel). */
static void
job_cancel_parts(struct job *job)
{
	int k;

	for (k = 0; k < job->nparts; k++) {
		struct job_part *p = &job->parts[k];
		struct node *node = state_node(p->node_id);
		if (p->ended || node == NULL)
			continue;
		add_effect(node, NULL, cancel_json(job));
	}
}

/* 1 when every part of the current attempt has ended. */
static int
all_parts_ended(const struct job *job)
{
	int k;

	for (k = 0; k < job->nparts; k++)
		if (!job->parts[k].ended && job->parts[k].node_id != 0)
			return 0;
	return 1;
}

/*
 * What ends a gang once its last part has ended: a cancel, a part that
 * failed, a stop (requeue with the reason of the part that was lost), or
 * every part's success.
 */
static void
gang_settle(struct job *job)
{
	if (!all_parts_ended(job))
		return;
	if (job->cancel_requested)
		job_finish(job, JOB_CANCELLED, "cancelled");
	else if (job->stopping[0] != '\0')
		job_requeue(job, job->stopping);
	else if (job->gang_failed != 0)
		job_finish(job, (enum job_state)job->gang_failed, job->reason);
	else
		job_finish(job, JOB_SUCCEEDED, "exited");
}

/*
 * Part k of a running job is gone or gave its GPU back (node lost, owner
 * reclaimed, preempted): an ordinary job goes back to the queue; a gang
 * stops its other parts (each saves its work) and goes back to the
 * queue, whole, once they all have.
 */
static void
job_part_lost(struct job *job, int k, const char *reason)
{
	if (job->nparts <= 1) {
		job_requeue(job, reason);
		return;
	}
	part_release(job, k);
	if (job->stopping[0] == '\0' && !job->cancel_requested &&
	    job->gang_failed == 0) {
		gp_strlcpy(job->stopping, reason, sizeof(job->stopping));
		gp_info("gang stopping job=%lld attempt=%d part=%d reason=%s",
		    (long long)job->id, job->attempts, k, reason);
		job_stop_parts(job, "gang_stopped");
		persist_job(job);
	}
	gang_settle(job);
}

/*
 * Places job's parts (one assignment each, by part) in one attempt. The
 * rank-0 part's node is the job's node.
 */
void
state_job_assign(struct job *job, const struct gp_sched_assignment *const *as)
{
	struct attempt_record *rec;
	struct node *n0 = state_node(as[0]->node_id);
	char note[160];
	int i, k;

	metrics_job_assigned(job, gp_now_ms());
	queue_remove(job);
	job->attempts++;
	job->state = JOB_RUNNING;
	live_array_running(job, 1);
	job->node_id = n0->id;
	job->ngpus = as[0]->ngpus;
	for (i = 0; i < as[0]->ngpus; i++)
		job->gpus[i] = (uint8_t)as[0]->gpus[i];
	job->started_ack = 0;
	atomic_store(&job->assigned_mono, gp_mono_ms());
	job->started_ms = gp_now_ms();
	job->stopping[0] = '\0';
	job->reason[0] = '\0';
	job->has_exit = 0;
	job->exit_code = job->signal = 0;
	job->preempting = 0;
	job->preempt_for = 0;
	job->gang_failed = 0;
	job->wait_reason = 0;
	for (k = 0; k < job->nparts; k++) {
		struct job_part *p = &job->parts[k];
		const struct gp_sched_assignment *a = as[k];
		memset(p->gpus, 0, sizeof(p->gpus));
		p->node_id = a->node_id;
		p->ngpus = a->ngpus;
		for (i = 0; i < a->ngpus; i++)
			p->gpus[i] = (uint8_t)a->gpus[i];
		p->gpu_milli = a->gpu_milli;
		p->gpu_mem_mib = a->gpu_milli < GP_SCHED_MILLI ? a->gpu_mem_mib
		                                               : 0;
		p->started_ack = 0;
		p->ended = 0;
		p->delivered_mono = 0;
		node_take_part(state_node(a->node_id), job, k);
	}
	if (job->nparts > 1)
		job->master_port = live_master_port(job);
	if (job->attempts > 1) {
		snprintf(note, sizeof(note), "[gpupool: attempt %d on node %s]",
		    job->attempts, n0->name);
		joblog_note(job, note);
		for (k = 1; k < job->nparts; k++)
			joblog_part_note(job, k, note);
	}
	job->log_base = job->log_size;
	for (k = 1; k < job->nparts; k++)
		job->parts[k].log_base = job->parts[k].log_size;
	rec = realloc(job->history,
	    (size_t)(job->nhistory + 1) * sizeof(*rec));
	if (rec == NULL)
		gp_fatalx("out of memory");
	job->history = rec;
	rec = &job->history[job->nhistory++];
	memset(rec, 0, sizeof(*rec));
	rec->attempt = job->attempts;
	rec->node_id = n0->id;
	rec->started_ms = job->started_ms;
	if (job->nparts > 1) {
		rec->more = calloc((size_t)job->nparts - 1, sizeof(*rec->more));
		if (rec->more == NULL)
			gp_fatalx("out of memory");
		rec->nmore = job->nparts - 1;
		for (k = 1; k < job->nparts; k++)
			rec->more[k - 1].node_id = job->parts[k].node_id;
	}
	persist_job(job);
	for (k = 0; k < job->nparts; k++)
		add_effect(state_node(job->parts[k].node_id),
		    assignment_json(job, k), NULL);
	gp_debug("job assigned job=%lld attempt=%d node=%s gpus=%d parts=%d",
	    (long long)job->id, job->attempts, n0->name, job->ngpus,
	    job->nparts);
}

/*
 * The scheduler preempts victim for for_job (provider first): its agent
 * is asked to save and stop; it keeps its GPUs until it has, and is then
 * requeued with reason "preempted" (apply_finished).
 */
void
state_job_preempt(struct job *victim, const struct job *for_job)
{
	struct attempt_record *a = current_attempt(victim);

	if (victim->state != JOB_RUNNING || victim->preempt_for != 0)
		return;
	victim->preempt_for = for_job->id;
	if (a != NULL)
		a->preempt_for = for_job->id;
	if (victim->nparts > 1)
		gp_strlcpy(victim->stopping, "preempted",
		    sizeof(victim->stopping));
	job_stop_parts(victim, "preempted");
	persist_job(victim);
	gp_info("job preempted job=%lld attempt=%d for=%lld group=%lld",
	    (long long)victim->id, victim->attempts, (long long)for_job->id,
	    (long long)for_job->group_id);
}

void
state_queue_compact(void)
{
	queue_compact();
}

/* ---- accounting (ledger.c, docs/accounting.md) ---- */

/* The group of a token, by id (a scan: only used at start-up). */
static int64_t
token_group(int64_t token_id)
{
	size_t i;

	for (i = 0; i < state.tokens_cap; i++)
		if (state.tokens[i] != NULL && state.tokens[i]->id == token_id)
			return state.tokens[i]->group_id > 0
			    ? state.tokens[i]->group_id
			    : 1;
	return 1;
}

/* A GPU's price per GPU-hour, looked up again after a price change. */
int64_t
state_gpu_price(struct node_gpu *g)
{
	/* +1: a new GPU (price_gen 0) is never taken as up to date. */
	if (g->price_gen != ledger.prices_gen + 1) {
		g->price = ledger_price_of(&ledger, g->model);
		g->price_gen = ledger.prices_gen + 1;
	}
	return g->price;
}

int
state_job_group(const struct token_entry *caller, const char *group,
    int64_t *group_id)
{
	const struct ledger_group *g;
	int64_t first;

	if (group == NULL || group[0] == '\0') {
		if (ledger_user_groups(&ledger, caller->name, &first, 1) != 1)
			return GP_ENOENT;
		*group_id = first;
		return 0;
	}
	if ((g = ledger_group_by_name(&ledger, group)) == NULL)
		return GP_ENOENT;
	if (caller->role != GP_ROLE_ADMIN &&
	    !ledger_is_member(&ledger, caller->name, g->id))
		return GP_EPERM;
	*group_id = g->id;
	return 0;
}

static struct attempt_record *
current_attempt(struct job *job)
{
	struct attempt_record *a;

	if (job->nhistory == 0)
		return NULL;
	a = &job->history[job->nhistory - 1];
	return a->attempt == job->attempts && a->finished_ms == 0 ? a : NULL;
}

/* The meter of part k of attempt a, and the group its provider had. */
static struct acct_meter *
part_meter(struct attempt_record *a, int k, int64_t **pgroup)
{
	if (k == 0) {
		*pgroup = &a->provider_group;
		return &a->meter;
	}
	if (k - 1 >= a->nmore)
		return NULL;
	*pgroup = &a->more[k - 1].provider_group;
	return &a->more[k - 1].meter;
}

/*
 * Billing of a part starts when its agent reports its start, at the
 * prices of its GPUs then (a later price change applies to later
 * attempts); a fraction of a GPU pays its fraction. Each part of a gang
 * is billed on its own, to its own provider.
 */
static void
bill_part_start(struct job *job, int k, int64_t now)
{
	struct attempt_record *a = current_attempt(job);
	struct job_part *p = &job->parts[k];
	struct node *node = state_node(p->node_id);
	struct acct_meter *m;
	int64_t rate = 0, share = 0, *pgroup;
	int i;

	if (a == NULL || node == NULL ||
	    (m = part_meter(a, k, &pgroup)) == NULL || m->from_ms > 0)
		return;
	for (i = 0; i < p->ngpus; i++) {
		int64_t sh = p->gpu_milli > 0 && p->gpu_milli < 1000
		    ? p->gpu_milli * ACCT_SHARE_WHOLE / 1000
		    : ACCT_SHARE_WHOLE;
		if (p->gpus[i] >= node->ngpus)
			continue;
		rate += state_gpu_price(&node->gpus[p->gpus[i]]) * sh;
		share += sh;
	}
	acct_meter_start(m, now, rate, share);
	*pgroup = node->group_id;
}

/* Posts what part k ran since its last posting, in this batch. */
static void
bill_part_post(struct job *job, struct attempt_record *a, int k, int64_t now,
    int final)
{
	const struct node *node;
	struct acct_posting p;
	struct acct_delta d;
	struct acct_meter *m;
	int64_t *pgroup, node_id;

	if ((m = part_meter(a, k, &pgroup)) == NULL)
		return;
	node_id = k == 0 ? a->node_id : a->more[k - 1].node_id;
	node = state_node(node_id);
	/* A gang's parts share the attempt's posting numbers. */
	if (job->nparts > 1)
		m->seq = a->next_seq;
	if (!acct_meter_advance(m, now, &d))
		return;
	if (job->nparts > 1)
		a->next_seq = m->seq;
	acct_posting_fill(&p, job->id, a->attempt, &d, final, now, node_id,
	    job->user, job->group_id, node != NULL ? node->owner_name : "?",
	    *pgroup);
	p.part = k;
	/* As for the job rows: memory ahead of disk must not go on. */
	if (ledger_post(&ledger, &p) != 0)
		gp_fatalx("cannot write the ledger");
}

/* Part k ended (part_release): its last posting. */
static void
bill_part_end(struct job *job, int k)
{
	struct attempt_record *a = current_attempt(job);

	if (a != NULL)
		bill_part_post(job, a, k, gp_now_ms(), 1);
}

/* The attempt ended (history_close): the parts not yet posted. */
static void
bill_attempt_end(struct job *job, struct attempt_record *a)
{
	int k;

	for (k = 0; k < job->nparts && k <= a->nmore; k++)
		if (!job->parts[k].ended)
			bill_part_post(job, a, k, a->finished_ms, 1);
}

/*
 * The periodic accrual: a running attempt posts what it ran once its last
 * posting is --accrual-interval old. Attempts started at different times
 * come due at different ticks, so the work is spread, not one large
 * batch every interval.
 */
static void
accrue(int64_t now)
{
	int64_t id, *pgroup;
	int k, part;

	for (id = 1; id < state.nnodes; id++) {
		struct node *n = state.nodes[id];
		for (k = 0; n != NULL && k < n->njobs; k++) {
			struct job *j = state_job(n->jobs[k]);
			struct attempt_record *a;
			struct acct_meter *m;
			if (j == NULL || (a = current_attempt(j)) == NULL ||
			    (part = job_part_on(j, n->id)) < 0 ||
			    (m = part_meter(a, part, &pgroup)) == NULL)
				continue;
			if (m->from_ms == 0) {
				/* Started before a restart, never reported. */
				if (!j->parts[part].started_ack)
					continue;
				bill_part_start(j, part, now);
				persist_job(j);
			}
			if (now - (m->from_ms + m->billed_ms) <
			    state.cfg.accrual_ms)
				continue;
			bill_part_post(j, a, part, now, 0);
		}
	}
}

/* Called by the state thread each round (mono: its monotonic clock). */
static void
acct_tick(int64_t mono)
{
	static int64_t last_accrual, last_period;
	int64_t now = gp_now_ms();

	if (mono - last_accrual >= 250) {
		accrue(now);
		last_accrual = mono;
	}
	if (mono - last_period >= 1000) {
		if (ledger_tick(&ledger, now))
			state.sched_dirty = 1;
		last_period = mono;
	}
}

/*
 * Budgets. A queued job is held when what its user or group spent this
 * period, plus what running jobs may still cost, plus the most the job
 * may cost, is more than the budget. The most a job may cost: its GPUs
 * for its time limit (or --budget-untimed when it has none) at the
 * highest price of a GPU in the pool that it could run on.
 */
struct price_class {
	const char *model;
	int64_t mem_mib;
	int64_t price;
};
static struct price_class *classes;
static size_t nclasses, capclasses;
static int classes_ready;

/* The distinct (model, memory, price) of the pool's GPUs, once a pass. */
static void
collect_classes(void)
{
	int64_t id;
	size_t c;
	int g;

	nclasses = 0;
	for (id = 1; id < state.nnodes; id++) {
		struct node *n = state.nodes[id];
		for (g = 0; n != NULL && g < n->ngpus; g++) {
			int64_t price = state_gpu_price(&n->gpus[g]);
			for (c = 0; c < nclasses; c++)
				if (classes[c].price == price &&
				    classes[c].mem_mib == n->gpus[g].mem_mib &&
				    strcmp(classes[c].model,
					n->gpus[g].model) == 0)
					break;
			if (c < nclasses)
				continue;
			if (nclasses == capclasses) {
				size_t cap = capclasses ? capclasses * 2 : 16;
				struct price_class *p = realloc(classes,
				    cap * sizeof(*p));
				if (p == NULL)
					gp_fatalx("out of memory");
				classes = p;
				capclasses = cap;
			}
			classes[nclasses].model = n->gpus[g].model;
			classes[nclasses].mem_mib = n->gpus[g].mem_mib;
			classes[nclasses++].price = price;
		}
	}
	classes_ready = 1;
}

/* a + b for amounts that may be INT64_MAX (an estimate saturates). */
static int64_t
add_saturated(int64_t a, int64_t b)
{
	return b > 0 && a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* The most the job may cost (micro-credits). */
static int64_t
job_estimate(const struct job *j)
{
	struct gp_sched_job sj;
	int64_t best = 0, seconds;
	size_t c;

	if (!classes_ready)
		collect_classes();
	live_sched_job(j, &j->spec, &sj);
	for (c = 0; c < nclasses; c++) {
		struct gp_sched_gpu g;
		memset(&g, 0, sizeof(g));
		g.model = classes[c].model;
		g.mem_mib = classes[c].mem_mib;
		g.price = classes[c].price;
		if (g.price > best && gp_sched_gpu_matches(&g, &sj))
			best = g.price;
	}
	seconds = j->spec.time_limit_s > 0 ? j->spec.time_limit_s
					   : state.cfg.budget_untimed_s;
	if (gp_jobspec_is_fraction(&j->spec)) {
		/* A fraction pays its fraction: its share of one GPU. */
		int64_t one = acct_estimate(j->nparts, best, seconds);
		int milli = j->spec.gpu_milli > 0 ? j->spec.gpu_milli : 1000;
		return one == INT64_MAX ? one : one / 1000 * milli +
		    one % 1000 * milli / 1000;
	}
	return acct_estimate(j->spec.gpus * j->nparts, best, seconds);
}

/* What a running job may still cost. */
static int64_t
job_remaining(struct job *j)
{
	struct attempt_record *a = current_attempt(j);
	int64_t seconds, total, sum = 0, *pgroup;
	int k;

	if (a == NULL || a->meter.from_ms == 0)
		return job_estimate(j);
	seconds = j->spec.time_limit_s > 0 ? j->spec.time_limit_s
					   : state.cfg.budget_untimed_s;
	for (k = 0; k < j->nparts; k++) {
		struct acct_meter *m = part_meter(a, k, &pgroup);
		if (m == NULL)
			continue;
		total = acct_cost(m->rate, seconds * 1000);
		if (total > m->amount)
			sum = add_saturated(sum, total - m->amount);
	}
	return sum;
}

/* The user's and the group's budgets, either may be NULL. */
static void
job_budgets(const struct job *j, struct ledger_budget **user,
    struct ledger_budget **group)
{
	*user = ledger_budget_find(&ledger, LEDGER_USER, j->user);
	*group = ledger_budget_find(&ledger, LEDGER_GROUP,
	    ledger_group_name(&ledger, j->group_id));
}


/* 1 when est fits in b; else sets the job's hold reason. */
static int
budget_fits(struct job *j, const struct ledger_budget *b, int64_t est)
{
	char left[32], amount[32], cost[32];
	int64_t rest;

	/* amount and reserved are >= 0: amount - reserved cannot overflow */
	if (b == NULL || est <= 0 || est <= b->amount - b->reserved)
		return 1;
	rest = b->amount - b->reserved;
	gp_credits_format(rest > 0 ? rest : 0, left, sizeof(left));
	gp_credits_format(b->amount, amount, sizeof(amount));
	gp_credits_format(est, cost, sizeof(cost));
	if (j->wait == NULL)
		return 1; /* not queued: nothing to hold */
	if (j->wait->hold_reason == NULL &&
	    (j->wait->hold_reason = malloc(HOLD_REASON_MAX)) == NULL)
		return 1; /* out of memory: the budget is checked at start */
	snprintf(j->wait->hold_reason, HOLD_REASON_MAX,
	    "budget: %s %s has %s of %s credits left %s; the job may cost %s",
	    b->kind == LEDGER_USER ? "user" : "group", b->name, left, amount,
	    b->period == ACCT_PERIOD_TOTAL ? "in total"
	    : b->period == ACCT_PERIOD_DAY ? "today"
	    : b->period == ACCT_PERIOD_WEEK ? "this week"
					   : "this month",
	    cost);
	return 0;
}

/* Sets or clears every queued job's hold, before a scheduling pass. */
/* Some queued job may still carry a budget hold from a pass. */
static int holds_left;

void
state_budget_holds(void)
{
	struct ledger_budget *ub, *gb;
	int64_t id, est;
	size_t b;
	int i, k;

	classes_ready = 0;
	/* With no budget there is no hold to clear but last pass's. */
	if (ledger.nbudgets == 0 && !holds_left)
		return;
	for (i = 0; i < state.nqueue; i++)
		if (state.queue[i] != NULL && state.queue[i]->wait != NULL &&
		    state.queue[i]->wait->hold_reason != NULL)
			state.queue[i]->wait->hold_reason[0] = '\0';
	holds_left = 0;
	if (ledger.nbudgets == 0)
		return;
	holds_left = 1;
	for (b = 0; b < ledger.nbudgets; b++)
		ledger.budgets[b].reserved = ledger.budgets[b].spent;
	for (id = 1; id < state.nnodes; id++) {
		struct node *n = state.nodes[id];
		for (k = 0; n != NULL && k < n->njobs; k++) {
			struct job *j = state_job(n->jobs[k]);
			if (j == NULL)
				continue;
			job_budgets(j, &ub, &gb);
			if (ub == NULL && gb == NULL)
				continue;
			est = job_remaining(j);
			if (ub != NULL)
				ub->reserved = add_saturated(ub->reserved, est);
			if (gb != NULL)
				gb->reserved = add_saturated(gb->reserved, est);
		}
	}
	for (i = 0; i < state.nqueue; i++) {
		struct job *j = state.queue[i];
		job_budgets(j, &ub, &gb);
		if (ub == NULL && gb == NULL)
			continue;
		est = job_estimate(j);
		if (budget_fits(j, ub, est))
			budget_fits(j, gb, est);
	}
}

/*
 * A job the plan starts: 1 when its budgets still have room once the
 * jobs started before it in this pass are counted (they are reserved
 * here), else 0 and held: it waits for the next pass.
 */
int
state_budget_admit(struct job *j)
{
	struct ledger_budget *ub, *gb;
	int64_t est;

	if (ledger.nbudgets == 0)
		return 1;
	job_budgets(j, &ub, &gb);
	if (ub == NULL && gb == NULL)
		return 1;
	est = job_estimate(j);
	if (!budget_fits(j, ub, est) || !budget_fits(j, gb, est)) {
		state.sched_dirty = 1;
		return 0;
	}
	if (ub != NULL)
		ub->reserved = add_saturated(ub->reserved, est);
	if (gb != NULL)
		gb->reserved = add_saturated(gb->reserved, est);
	return 1;
}

/* The accounting fields of a job's JSON (docs/api.md). */
static void
acct_job_json(const struct job *job, json_t *o)
{
	json_t *hist = json_object_get(o, "history");
	int64_t cost = 0, gpu_ms = 0;
	int i;

	if (o == NULL)
		return;
	for (i = 0; i < job->nhistory; i++) {
		const struct attempt_record *a = &job->history[i];
		cost += a->meter.amount;
		gpu_ms += a->meter.gpu_ms;
		if (json_is_array(hist) && (size_t)i < json_array_size(hist))
			json_object_update_new(json_array_get(hist, i),
			    json_pack("{s:I,s:I,s:I}", "cost_micro",
				(json_int_t)a->meter.amount, "gpu_ms",
				(json_int_t)a->meter.gpu_ms, "rate_micro",
				(json_int_t)(a->meter.rate / ACCT_SHARE_WHOLE)));
	}
	json_object_set_new(o, "group",
	    json_string(ledger_group_name(&ledger, job->group_id)));
	json_object_set_new(o, "hold_reason",
	    job->state == JOB_QUEUED && job->wait != NULL &&
		    job->wait->hold_reason != NULL && job->wait->hold_reason[0]
		? json_string(job->wait->hold_reason)
		: json_null());
	json_object_set_new(o, "cost_micro", json_integer(cost));
	json_object_set_new(o, "gpu_ms", json_integer(gpu_ms));
	json_object_set_new(json_object_get(o, "request"), "max_price_micro",
	    json_integer(job->spec.max_price_micro));
}

/* The accounting fields of a node's JSON: its group, its GPUs' prices. */
static void
acct_node_json(const struct node *node, json_t *o)
{
	json_t *gpus = json_object_get(o, "gpus");
	int i;

	if (o == NULL)
		return;
	json_object_set_new(o, "group",
	    json_string(ledger_group_name(&ledger, node->group_id)));
	for (i = 0; i < node->ngpus && (size_t)i < json_array_size(gpus); i++)
		json_object_set_new(json_array_get(gpus, i), "price_micro",
		    json_integer(ledger_price_of(&ledger,
			node->gpus[i].model)));
}

/* What a node's owner accepts (its offer), for sched_accept.c. */
static void
owner_of(const struct node *node, struct gp_sched_owner *o)
{
	o->images = node->images;
	o->refuse_plain = node->refuse_plain;
	o->network = node->network;
	o->trusted = node->trusted_keys;
	o->ntrusted = node->ntrusted;
}

/* What a job is to an owner: its image's signers, or a plain command. */
static void
image_of(const struct job *job, struct gp_sched_image *im)
{
	im->image = job->spec.image[0] != '\0';
	im->signers = job->signer_keys;
	im->nsigners = job->nsigners;
	im->network = job->spec.network;
}

/* A count kept by offer_apply: this was a walk over every node, 7 % of
 * the coordinator's CPU while 10,000 nodes took a backlog. */
int
state_any_refuses_plain(void)
{
	return state.nrefuse_plain > 0;
}

/* The planner's acceptance predicate: the node's owner and the job. */
int
state_owner_accepts(void *arg, const struct gp_sched_node *n,
    const struct gp_sched_job *j)
{
	const struct node *node = state_node(n->id);
	const struct job *job = state_job(j->id);
	struct gp_sched_owner o;
	struct gp_sched_image im;

	(void)arg;
	if (node == NULL || job == NULL)
		return 1;
	owner_of(node, &o);
	image_of(job, &im);
	return gp_sched_owner_accepts(&o, &im);
}

/* ---- ops ---- */

struct op *
op_new(enum op_type type, struct token_entry *caller)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return NULL;
	op->type = type;
	if (caller != NULL)
		op->caller = *caller;
	gp_jobspec_init(&op->spec);
	return op;
}

void
op_free(struct op *op)
{
	if (op == NULL)
		return;
	gp_jobspec_fini(&op->spec);
	json_decref(op->body);
	json_decref(op->result);
	free(op->tasks);
	free(op);
}

static void set_error(struct op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * The state thread is done with op: resume its connection, which frees it,
 * unless the connection went first (op_abandon), or there never was one.
 */
static void
op_answer(struct op *op)
{
	int expected = 0;

	if (op->conn != NULL &&
	    atomic_compare_exchange_strong(&op->claim, &expected, OP_ANSWERED))
		notify_resume(op->conn, op->req);
	else
		op_free(op);
}

void
op_abandon(struct op *op)
{
	int expected = 0;

	/* Answered but never resumed (the connection closed): ours. */
	if (!atomic_compare_exchange_strong(&op->claim, &expected,
		OP_ABANDONED))
		op_free(op);
}

void
state_submit_op(struct op *op)
{
	pthread_mutex_lock(&op_lock);
	if (thread_exited) {
		/*
		 * Shutting down: a handler that raced the state thread's last
		 * batch is answered now, so that no connection stays
		 * suspended when the HTTP daemon stops.
		 */
		pthread_mutex_unlock(&op_lock);
		set_error(op, 503, "the coordinator is stopping");
		op_answer(op);
		return;
	}
	op->next = NULL;
	if (op_tail != NULL)
		op_tail->next = op;
	else
		op_head = op;
	op_tail = op;
	pthread_cond_signal(&op_cond);
	pthread_mutex_unlock(&op_lock);
}

static void
set_error(struct op *op, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	op->status = status;
	json_decref(op->result);
	op->result = json_pack("{s:s}", "error", msg);
}

/*
 * Keeps in nodes[0..*n) the nodes whose owners would accept job. When
 * none would, returns 0 with why listing each node's refusal.
 */
static int
accepting_nodes(struct gp_sched_node *nodes, size_t *n,
    const struct gp_sched_image *im, char *why, size_t whylen)
{
	struct gp_sched_owner o;
	struct gp_buf b = {0};
	char one[160];
	size_t i, k = 0;

	for (i = 0; i < *n; i++) {
		const struct node *nd = state_node(nodes[i].id);
		if (nd == NULL)
			continue;
		owner_of(nd, &o);
		if (gp_sched_why_refused(&o, im, one, sizeof(one))) {
			nodes[k++] = nodes[i];
			continue;
		}
		if (i < 8)
			gp_buf_printf(&b, "%snode %s %s", b.len ? "; " : "",
			    nd->name, one);
	}
	if (k == 0) {
		gp_strlcpy(why, b.data != NULL ? b.data : "", whylen);
		gp_buf_free(&b);
		return 0;
	}
	gp_buf_free(&b);
	*n = k;
	return 1;
}

void
job_set_signers(struct job *job, json_t *signers)
{
	json_t *v;
	size_t i;

	free(job->signer_keys);
	json_decref(job->signers);
	job->signer_keys = NULL;
	job->nsigners = 0;
	job->signers = signers;
	if (!json_is_array(signers) || json_array_size(signers) == 0)
		return;
	job->signer_keys = calloc(json_array_size(signers),
	    sizeof(*job->signer_keys));
	if (job->signer_keys == NULL)
		return;
	json_array_foreach(signers, i, v)
		if (json_is_string(v))
			job->signer_keys[job->nsigners++] =
			    json_string_value(v);
}

void
job_acceptance(const struct job *job, char *why, size_t len)
{
	struct gp_sched_node *snodes;
	struct gp_sched_image im;
	size_t nn;

	why[0] = '\0';
	if (job->spec.image[0] == '\0' && job->spec.network <= 1) {
		/* Cheap: only owners who refuse plain commands matter. */
		int64_t id;
		int any = 0;
		for (id = 1; id < state.nnodes && !any; id++)
			any = state.nodes[id] != NULL &&
			    state.nodes[id]->refuse_plain;
		if (!any)
			return;
	}
	if (live_hw_nodes(&snodes, &nn) != 0)
		return;
	image_of(job, &im);
	if (nn > 0 && !accepting_nodes(snodes, &nn, &im, why, len)) {
		char tmp[1024];
		snprintf(tmp, sizeof(tmp), "no node would accept it: %s", why);
		gp_strlcpy(why, tmp, len);
	}
	free(snodes);
}

static void
apply_image_signed(struct op *op)
{
	const char *digest = json_string_value(json_object_get(op->body,
	    "digest"));
	json_t *key = json_object_get(op->body, "key"), *list, *v;
	const char *d;
	int64_t id;
	size_t i;
	int have;

	if (digest == NULL || !json_is_string(key))
		return;
	for (id = 1; id < state.next_job_id; id++) {
		struct job *j = state.jobs[id];
		if (j == NULL || job_finished(j) ||
		    (d = gp_jobspec_image_digest(&j->spec)) == NULL ||
		    strcmp(d, digest) != 0)
			continue;
		have = 0;
		json_array_foreach(j->signers, i, v)
			if (json_equal(v, key))
				have = 1;
		if (have)
			continue;
		list = json_is_array(j->signers) ? json_copy(j->signers)
						 : json_array();
		json_array_append(list, key);
		job_set_signers(j, list);
		state.sched_dirty = 1;
	}
}

void
state_note_image_signed(const char *digest, const char *key)
{
	struct op *op = op_new(OP_IMAGE_SIGNED, NULL);

	if (op == NULL)
		return;
	op->body = json_pack("{s:s,s:s}", "digest", digest, "key", key);
	state_submit_op(op);
}

/*
 * A submission's checks, on op->spec: its group (op->spec.group becomes
 * the group's name) and whether any node could ever run it. Returns 0
 * with *group_id, or -1 with the op's error set.
 */
static int
submit_check(struct op *op, int64_t *group_id)
{
	struct gp_sched_node *snodes = NULL;
	struct gp_sched_job sj;
	struct gp_sched_image im;
	struct job tmpjob;
	size_t nn = 0;
	int fits;
	char why[1024];

	switch (state_job_group(&op->caller, op->spec.group, group_id)) {
	case 0:
		break;
	case GP_EPERM:
		set_error(op, 403, "group: %s is not a member of group '%s'",
		    op->caller.name, op->spec.group);
		return -1;
	default:
		set_error(op, 400, "group: no group '%s'", op->spec.group);
		return -1;
	}
	gp_strlcpy(op->spec.group, ledger_group_name(&ledger, *group_id),
	    sizeof(op->spec.group));
	/*
	 * Can any node we know, up or down, ever run it? When an owner
	 * picks what it runs (images, no plain commands, networks), only
	 * among the nodes whose owners would accept it.
	 */
	if (op->spec.image[0] == '\0' && !state_any_refuses_plain() &&
	    op->spec.network <= 1) {
		fits = live_can_ever_fit(&op->spec, why, sizeof(why));
	} else {
		if (live_hw_nodes(&snodes, &nn) != 0) {
			set_error(op, 503, "out of memory");
			return -1;
		}
		live_sched_job(NULL, &op->spec, &sj);
		memset(&tmpjob, 0, sizeof(tmpjob));
		tmpjob.spec = op->spec; /* (borrowed: image_of reads it) */
		if (json_is_array(op->body)) {
			/* The image's signers (image_resolve, the handler). */
			job_set_signers(&tmpjob, json_incref(op->body));
		}
		image_of(&tmpjob, &im);
		if (nn > 0 &&
		    !accepting_nodes(snodes, &nn, &im, why, sizeof(why))) {
			free(snodes);
			job_set_signers(&tmpjob, NULL);
			set_error(op, 422, "no node in the pool would accept "
			    "this job: %s", why);
			return -1;
		}
		fits = gp_sched_can_ever_fit(snodes, nn, &sj, why,
		    sizeof(why));
		job_set_signers(&tmpjob, NULL);
		free(snodes);
	}
	if (fits < 0) {
		set_error(op, 503, "out of memory");
		return -1;
	}
	if (!fits) {
		set_error(op, 422, "no node in the pool can ever run this job: %s",
		    why);
		return -1;
	}
	return 0;
}

/*
 * New jobs come from blocks of JOB_BLOCK, zeroed: one block costs one
 * allocation (fresh pages, mapped at once) where a job each grew the
 * state thread's malloc arena a page at a time, an mprotect call every
 * second job (480 for an array of 1,000 tasks). Blocks are never freed:
 * a job that leaves memory (purge_finished) gives its place back to
 * job_free_slots, and the next job takes it first.
 */
#define JOB_BLOCK 1024
static struct job **job_blocks; /* every block (kept reachable) */
static size_t njob_blocks, job_block_used = JOB_BLOCK;
static struct job **job_free_slots;
static size_t nfree_slots, capfree_slots;

static struct job *
job_alloc(void)
{
	struct job **bl, *b;

	if (nfree_slots > 0) {
		b = job_free_slots[--nfree_slots];
		memset(b, 0, sizeof(*b));
		b->in_block = 1;
		return b;
	}
	if (job_block_used == JOB_BLOCK) {
		bl = realloc(job_blocks, (njob_blocks + 1) * sizeof(*bl));
		if (bl == NULL)
			return NULL;
		job_blocks = bl;
		if ((b = calloc(JOB_BLOCK, sizeof(*b))) == NULL)
			return NULL;
		job_blocks[njob_blocks++] = b;
		job_block_used = 0;
	}
	b = &job_blocks[njob_blocks - 1][job_block_used++];
	b->in_block = 1;
	return b;
}

/*
 * Frees what a job owns and the job: a block's slot goes back to
 * job_free_slots (state thread, write lock), a malloc'd job (loaded at
 * start-up, or read back by store_read_job) to free.
 */
static void
job_free(struct job *job)
{
	int i;

	gp_jobspec_fini(&job->spec);
	free(job->message);
	for (i = 0; job->history != NULL && i < job->nhistory; i++) {
		free(job->history[i].ckpt_label);
		free(job->history[i].more);
	}
	free(job->history);
	free(job->parts);
	free(job->signer_keys);
	json_decref(job->signers);
	if (job->wait != NULL) /* (a finished job has none) */
		free(job->wait->hold_reason);
	free(job->wait);
	if (!job->in_block) {
		free(job);
		return;
	}
	if (nfree_slots == capfree_slots) {
		size_t cap = capfree_slots ? capfree_slots * 2 : 1024;
		struct job **p = realloc(job_free_slots, cap * sizeof(*p));
		if (p == NULL)
			return; /* the slot is lost, not the job's data */
		job_free_slots = p;
		capfree_slots = cap;
	}
	job_free_slots[nfree_slots++] = job;
}

void
state_job_stored_free(struct job *job)
{
	if (job != NULL)
		job_free(job);
}

/*
 * A queued job of op's caller with *spec, which it takes (*spec is left
 * empty), in memory (the caller persists it). NULL, with the op's error
 * set, when out of memory.
 */
/*
 * An empty env or data list is one shared value: nothing changes a job's
 * spec once the job is made, and most jobs have neither (an empty
 * jansson object with its table costs about 250 bytes, an empty array
 * about 100: 35 MB over 100,000 jobs).
 */
static void
share_empty(json_t **value, json_t **shared, json_t *(*make)(void))
{
	int empty = json_is_object(*value) ? json_object_size(*value) == 0
	    : json_is_array(*value)	       ? json_array_size(*value) == 0
					       : 0;

	if (!empty || (*shared == NULL && (*shared = make()) == NULL))
		return;
	json_decref(*value);
	*value = json_incref(*shared);
}

static struct job *
submit_make(struct op *op, struct gp_jobspec *spec, int64_t group_id)
{
	static json_t *empty_env, *empty_data;
	struct job *job = job_alloc();

	if (job == NULL) {
		set_error(op, 503, "out of memory");
		return NULL;
	}
	job->id = state.next_job_id;
	gp_strlcpy(job->user, op->caller.name, sizeof(job->user));
	share_empty(&spec->env, &empty_env, json_object);
	share_empty(&spec->data, &empty_data, json_array);
	job->spec = *spec;
	/* The job owns the spec now (no new empty containers: an array
	 * makes a thousand jobs; gp_jobspec_fini takes NULLs). */
	memset(spec, 0, sizeof(*spec));
	job->state = JOB_QUEUED;
	job->submitted_ms = gp_now_ms();
	job->queue_pos = -1;
	if (json_is_array(op->body))
		job_set_signers(job, json_incref(op->body));
	job->group_id = group_id;
	job->user_id = live_user_id(job->user);
	live_sched_job(job, &job->spec, &job->sj);
	if (job_parts_alloc(job) != 0 || job_insert(job) != 0 ||
	    queue_insert(job) != 0) {
		set_error(op, 503, "out of memory");
		return NULL;
	}
	state.sched_dirty = 1;
	return job;
}

static void
apply_submit(struct op *op)
{
	struct job *job;
	int64_t group_id;

	if (submit_check(op, &group_id) != 0 ||
	    (job = submit_make(op, &op->spec, group_id)) == NULL)
		return;
	persist_job(job);
	op->status = 201;
	op->result = json_pack("{s:I,s:s}", "id", (json_int_t)job->id, "state",
	    "queued");
}

/*
 * A job array: one job per task, ids consecutive from the first (the
 * array's id), all or none. The checks are the same for every task, so
 * they are made once; a later failure (memory) cancels the tasks already
 * made, so that none runs. Stored as one row (store_put_array): a task
 * gets a row of its own when it changes.
 */
static void
apply_submit_array(struct op *op)
{
	int64_t first = state.next_job_id, group_id, now = gp_now_ms();
	struct gp_jobspec spec;
	struct job *job;
	int i, k;

	if (submit_check(op, &group_id) != 0)
		return;
	op->spec.array_job_id = first;
	op->spec.array_task_id = 0;
	for (i = 0; i < op->ntasks; i++) {
		/*
		 * The tasks share the spec's command, env and data: nothing
		 * changes them once a job is made (replies hold them too,
		 * job_to_json), and jansson counts references atomically.
		 */
		spec = op->spec;
		json_incref(spec.command);
		json_incref(spec.env);
		json_incref(spec.data);
		spec.image = NULL; /* (its own copy: op->spec keeps its) */
		if (gp_jobspec_set_image(&spec, op->spec.image) != 0) {
			gp_jobspec_fini(&spec);
			set_error(op, 503, "out of memory");
			break;
		}
		spec.array_task_id = op->tasks[i];
		job = submit_make(op, &spec, group_id);
		gp_jobspec_fini(&spec);
		if (job == NULL)
			break;
		job->submitted_ms = now; /* as the array's row has it */
	}
	if (i == op->ntasks) {
		if (store_put_array(first, op->caller.name, &op->spec,
		        op->tasks, op->ntasks, now) != 0)
			gp_fatalx("cannot write job array %lld to the database",
			    (long long)first);
		op->status = 201;
		op->result = json_pack("{s:I,s:I,s:I,s:i,s:s}", "array_job_id",
		    (json_int_t)first, "first_id", (json_int_t)first,
		    "last_id", (json_int_t)(first + op->ntasks - 1), "count",
		    op->ntasks, "state", "queued");
		return;
	}
	for (k = 0; k < i; k++) {
		struct job *j = state_job(first + k);
		if (j != NULL && !job_finished(j))
			job_finish(j, JOB_CANCELLED, "array_incomplete");
	}
}

static void
apply_cancel(struct op *op)
{
	int stored;
	struct job *job = state_job_any(op->job_id, &stored);

	if (job == NULL || !job_visible_to(job, &op->caller)) {
		set_error(op, 404, "no job %lld", (long long)op->job_id);
		if (stored)
			state_job_stored_free(job);
		return;
	}
	if (job_finished(job)) {
		set_error(op, 409, "job %lld has already finished (%s)",
		    (long long)job->id, job_state_name(job->state));
		if (stored)
			state_job_stored_free(job);
		return;
	}
	if (job->state == JOB_QUEUED) {
		job_finish(job, JOB_CANCELLED, "cancelled");
	} else if (!job->cancel_requested) {
		job->cancel_requested = 1;
		persist_job(job);
		job_cancel_parts(job);
	}
	op->status = 200;
	op->result = job_to_json(job, 0);
}

static void
apply_token_create(struct op *op)
{
	char token[GP_TOKEN_LEN + 1];
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
	if (token_insert(t) != 0 || store_put_token(t, t->created_ms) != 0)
		gp_fatalx("cannot store token");
	/* A user token makes its user a member of its group. */
	if (t->role == GP_ROLE_USER &&
	    ledger_member_add(&ledger, t->name, g->id) != 0)
		gp_fatalx("cannot store a group member");
	op->status = 201;
	op->result = json_pack("{s:s,s:I,s:s,s:s,s:s}", "token", token, "id",
	    (json_int_t)t->id, "role", gp_role_name(t->role), "name", t->name,
	    "group", g->name);
	gp_info("token created id=%lld role=%s name=%s group=%s",
	    (long long)t->id, gp_role_name(t->role), t->name, g->name);
}

static void
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
	if (store_delete_token(t->id) != 0)
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

/* Is (job, attempt) in the agent's list? */
static int
listed(json_t *running, int64_t job_id, int attempt)
{
	json_t *r;
	size_t i;

	json_array_foreach(running, i, r)
	{
		if (json_integer_value(json_object_get(r, "job_id")) ==
			job_id &&
		    json_integer_value(json_object_get(r, "attempt")) ==
			attempt)
			return 1;
	}
	return 0;
}

void
state_reconcile(struct node *node, json_t *running, json_t *kill,
    int queue_lost)
{
	int64_t now = gp_mono_ms();
	json_t *r;
	size_t i;
	int k;

	json_array_foreach(running, i, r)
	{
		int64_t jid = json_integer_value(json_object_get(r, "job_id"));
		int att = (int)json_integer_value(json_object_get(r, "attempt"));
		struct job *job = state_job(jid);
		int part = job != NULL ? job_part_on(job, node->id) : -1;
		if (job == NULL || job->state != JOB_RUNNING || part < 0 ||
		    job->parts[part].ended || job->attempts != att)
			json_array_append_new(kill,
			    json_pack("{s:I,s:i}", "job_id", (json_int_t)jid,
				"attempt", att));
	}
	for (k = 0; k < node->njobs; k++) {
		struct job *job = state_job(node->jobs[k]);
		const struct job_part *p;
		int64_t delivered;
		int part;
		if (job == NULL || (part = job_part_on(job, node->id)) < 0 ||
		    listed(running, job->id, job->attempts))
			continue;
		p = &job->parts[part];
		delivered = p->delivered_mono;
		if (!p->started_ack &&
		    (delivered == 0 || now - delivered < LOST_GRACE_MS))
			continue; /* on its way */
		if (p->started_ack && delivered != 0 &&
		    now - delivered < LOST_GRACE_MS)
			continue;
		if (queue_lost) {
			struct op *op = op_new(OP_LOST, NULL);
			if (op == NULL)
				continue;
			op->job_id = job->id;
			op->attempt = job->attempts;
			op->node_id = node->id;
			state_submit_op(op);
		} else {
			job_part_lost(job, part, "node_lost");
			k--; /* node->jobs changed under us */
		}
	}
}

int
reason_requeues(const char *reason)
{
	static const char *const requeue[] = {"reclaimed", "owner_present",
	    "window_closed", "provider_left", "agent_stopped", "refused",
	    "restore_failed", "image_unavailable", "preempted",
	    "gang_stopped", NULL};
	int i;

	for (i = 0; requeue[i] != NULL; i++)
		if (strcmp(reason, requeue[i]) == 0)
			return 1;
	return 0;
}

int
offer_decode(json_t *o, int ngpus, struct offer *out, char *err,
    size_t errlen)
{
	json_t *v, *lent;
	const char *key;
	size_t i;

	if (!json_is_object(o)) {
		snprintf(err, errlen, "offer: must be an object");
		return GP_EINVAL;
	}
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "seq") && strcmp(key, "lent") &&
		    strcmp(key, "accepting") && strcmp(key, "cpus") &&
		    strcmp(key, "mem_mib") && strcmp(key, "max_job_s") &&
		    strcmp(key, "images") && strcmp(key, "plain_jobs") &&
		    strcmp(key, "trusted_keys") && strcmp(key, "network")) {
			snprintf(err, errlen, "offer: unknown field '%.64s'",
			    key);
			return GP_EINVAL;
		}
	}
	memset(out, 0, sizeof(*out));
	v = json_object_get(o, "seq");
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		snprintf(err, errlen, "offer.seq: a non-negative integer");
		return GP_EINVAL;
	}
	out->seq = json_integer_value(v);
	lent = json_object_get(o, "lent");
	if (!json_is_array(lent) || json_array_size(lent) > 64) {
		snprintf(err, errlen, "offer.lent: an array of GPU indices");
		return GP_EINVAL;
	}
	json_array_foreach(lent, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= ngpus ||
		    json_integer_value(v) >= 64) {
			snprintf(err, errlen, "offer.lent[%zu]: not a GPU of "
					      "this node", i);
			return GP_EINVAL;
		}
		out->lent |= 1ULL << json_integer_value(v);
	}
	v = json_object_get(o, "accepting");
	if (!json_is_boolean(v)) {
		snprintf(err, errlen, "offer.accepting: true or false");
		return GP_EINVAL;
	}
	out->accepting = json_is_true(v);
	v = json_object_get(o, "cpus");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 100000)) {
		snprintf(err, errlen, "offer.cpus: an integer from 0 to 100000");
		return GP_EINVAL;
	}
	out->cpus = (int)json_integer_value(v);
	v = json_object_get(o, "mem_mib");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (1LL << 40))) {
		snprintf(err, errlen, "offer.mem_mib: a non-negative integer");
		return GP_EINVAL;
	}
	out->mem_mib = json_integer_value(v);
	v = json_object_get(o, "max_job_s");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > GP_TIME_LIMIT_MAX)) {
		snprintf(err, errlen, "offer.max_job_s: seconds, at most %lld",
		    GP_TIME_LIMIT_MAX);
		return GP_EINVAL;
	}
	out->max_job_s = json_integer_value(v);
	/* The owner's image policy; absent: anything is accepted. */
	v = json_object_get(o, "images");
	if (v == NULL || (json_is_string(v) &&
	    strcmp(json_string_value(v), "any") == 0))
		out->images = GP_SCHED_IMAGES_ANY;
	else if (json_is_string(v) &&
	    strcmp(json_string_value(v), "signed") == 0)
		out->images = GP_SCHED_IMAGES_SIGNED;
	else if (json_is_string(v) &&
	    strcmp(json_string_value(v), "none") == 0)
		out->images = GP_SCHED_IMAGES_NONE;
	else {
		snprintf(err, errlen, "offer.images: any, signed or none");
		return GP_EINVAL;
	}
	v = json_object_get(o, "plain_jobs");
	if (v != NULL && !json_is_boolean(v)) {
		snprintf(err, errlen, "offer.plain_jobs: true or false");
		return GP_EINVAL;
	}
	out->refuse_plain = json_is_false(v);
	/* Absent: an agent before job networks (its jobs share its own). */
	v = json_object_get(o, "network");
	if (v != NULL && (!json_is_string(v) || gp_jobspec_network_parse(
	    json_string_value(v), &out->network) != 0)) {
		snprintf(err, errlen, "offer.network: none, internet or lan");
		return GP_EINVAL;
	}
	v = json_object_get(o, "trusted_keys");
	if (v != NULL && (!json_is_array(v) ||
	    json_array_size(v) > GP_TRUST_KEYS_MAX)) {
		snprintf(err, errlen, "offer.trusted_keys: an array of at most "
		    "%d public keys", GP_TRUST_KEYS_MAX);
		return GP_EINVAL;
	}
	json_array_foreach(v, i, lent)
	{
		unsigned char pk[32];
		if (!gp_sign_public_parse(json_string_value(lent), pk)) {
			snprintf(err, errlen, "offer.trusted_keys[%zu]: not "
			    "ed25519:<base64 of 32 bytes>", i);
			return GP_EINVAL;
		}
		gp_strlcpy(out->trusted[out->ntrusted++],
		    json_string_value(lent), GP_SIGN_PUBLIC_TEXT);
	}
	return 0;
}

/* Applies an offer at least as new as the last one; 1 when applied. */
static int
offer_apply(struct node *node, const struct offer *o, int force)
{
	if (!force && o->seq <= node->offer_seq)
		return 0;
	node->offer_seq = o->seq;
	node->lent = o->lent;
	node->accepting = o->accepting;
	node->offer_cpus = o->cpus;
	node->offer_mem_mib = o->mem_mib;
	node->max_job_s = o->max_job_s;
	node->images = o->images;
	state.nrefuse_plain += (o->refuse_plain != 0) - (node->refuse_plain != 0);
	node->refuse_plain = o->refuse_plain;
	node->network = o->network;
	node->ntrusted = o->ntrusted;
	for (int i = 0; i < o->ntrusted && i < GP_TRUST_KEYS_MAX; i++) {
		gp_strlcpy(node->trusted[i], o->trusted[i],
		    sizeof(node->trusted[i]));
		node->trusted_keys[i] = node->trusted[i];
	}
	live_node_changed(node);
	state.sched_dirty = 1;
	gp_debug("offer applied node=%s seq=%lld lent=0x%llx accepting=%d",
	    node->name, (long long)o->seq, (unsigned long long)o->lent,
	    o->accepting);
	return 1;
}

/* A host name or an IP address (v4, or v6 without brackets). */
static int
addr_valid(const char *a)
{
	size_t i, n = strlen(a);

	if (n == 0 || n > 253)
		return 0;
	for (i = 0; i < n; i++) {
		char c = a[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			(c >= '0' && c <= '9') || c == '.' || c == ':' ||
			c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

int
register_decode(json_t *body, struct node *tmp, json_t **running,
    char *err, size_t errlen)
{
	json_t *gpus, *g, *v;
	const char *key;
	size_t i;

	json_object_foreach(body, key, v)
	{
		if (strcmp(key, "protocol") && strcmp(key, "name") &&
		    strcmp(key, "cpus") && strcmp(key, "mem_mib") &&
		    strcmp(key, "gpus") && strcmp(key, "running") &&
		    strcmp(key, "version") && strcmp(key, "offer") &&
		    strcmp(key, "addr")) {
			snprintf(err, errlen, "unknown field '%.64s'", key);
			return GP_EINVAL;
		}
	}
	v = json_object_get(body, "protocol");
	if (!json_is_integer(v) ||
	    json_integer_value(v) != GP_PROTOCOL_VERSION) {
		snprintf(err, errlen,
		    "protocol: this coordinator speaks protocol %d",
		    GP_PROTOCOL_VERSION);
		return GP_EINVAL;
	}
	v = json_object_get(body, "name");
	if (!json_is_string(v) || !gp_name_valid(json_string_value(v))) {
		snprintf(err, errlen, "name: 1 to 64 of A-Z a-z 0-9 . _ -");
		return GP_EINVAL;
	}
	gp_strlcpy(tmp->name, json_string_value(v), sizeof(tmp->name));
	v = json_object_get(body, "addr");
	tmp->addr[0] = '\0';
	if (v != NULL) {
		if (!json_is_string(v) || !addr_valid(json_string_value(v))) {
			snprintf(err, errlen,
			    "addr: a host name or IP address others reach "
			    "this node at (1 to 253 of A-Z a-z 0-9 . : - _)");
			return GP_EINVAL;
		}
		gp_strlcpy(tmp->addr, json_string_value(v), sizeof(tmp->addr));
	}
	v = json_object_get(body, "cpus");
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > 100000) {
		snprintf(err, errlen, "cpus: an integer from 1 to 100000");
		return GP_EINVAL;
	}
	tmp->cpus = (int)json_integer_value(v);
	v = json_object_get(body, "mem_mib");
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (1LL << 40)) {
		snprintf(err, errlen, "mem_mib: a non-negative integer");
		return GP_EINVAL;
	}
	tmp->mem_mib = json_integer_value(v);
	gpus = json_object_get(body, "gpus");
	if (!json_is_array(gpus) || json_array_size(gpus) > GP_SCHED_GPUS_MAX) {
		snprintf(err, errlen, "gpus: an array of at most %d GPUs",
		    GP_SCHED_GPUS_MAX);
		return GP_EINVAL;
	}
	tmp->ngpus = (int)json_array_size(gpus);
	tmp->gpus = calloc((size_t)tmp->ngpus + 1, sizeof(*tmp->gpus));
	if (tmp->gpus == NULL)
		return GP_ENOMEM;
	json_array_foreach(gpus, i, g)
	{
		json_t *idx = json_object_get(g, "index"),
		       *uuid = json_object_get(g, "uuid"),
		       *model = json_object_get(g, "model"),
		       *mem = json_object_get(g, "mem_mib"),
		       *cap = json_object_get(g, "compute_capability");
		if (!json_is_object(g) || !json_is_integer(idx) ||
		    json_integer_value(idx) != (json_int_t)i ||
		    !json_is_string(uuid) || json_string_length(uuid) > 95 ||
		    !json_is_string(model) ||
		    json_string_length(model) > GP_NAME_MAX ||
		    !json_is_integer(mem) || json_integer_value(mem) < 0) {
			snprintf(err, errlen,
			    "gpus[%zu]: needs index (= its position), uuid, "
			    "model (at most 64 bytes) and mem_mib",
			    i);
			return GP_EINVAL;
		}
		tmp->gpus[i].index = (int)i;
		gp_strlcpy(tmp->gpus[i].uuid, json_string_value(uuid),
		    sizeof(tmp->gpus[i].uuid));
		gp_strlcpy(tmp->gpus[i].model, json_string_value(model),
		    sizeof(tmp->gpus[i].model));
		tmp->gpus[i].mem_mib = json_integer_value(mem);
		if (cap != NULL && !json_is_null(cap) &&
		    (!json_is_string(cap) || json_string_length(cap) > 8 ||
			gp_capability_parse(json_string_value(cap),
			    &tmp->gpus[i].capability) != 0)) {
			snprintf(err, errlen,
			    "gpus[%zu].compute_capability: X.Y, like \"8.6\"",
			    i);
			return GP_EINVAL;
		}
		tmp->gpus[i].temp_c = -1;
		tmp->gpus[i].power_mw = -1;
	}
	v = json_object_get(body, "offer");
	if (v != NULL) {
		struct offer o;
		if (offer_decode(v, tmp->ngpus, &o, err, errlen) != 0)
			return GP_EINVAL;
	}
	*running = json_object_get(body, "running");
	if (*running == NULL)
		*running = json_array();
	else
		json_incref(*running);
	json_array_foreach(*running, i, g)
	{
		if (!json_is_integer(json_object_get(g, "job_id")) ||
		    !json_is_integer(json_object_get(g, "attempt"))) {
			snprintf(err, errlen,
			    "running[%zu]: needs job_id and attempt", i);
			json_decref(*running);
			*running = NULL;
			return GP_EINVAL;
		}
	}
	if (!json_is_array(*running)) {
		snprintf(err, errlen, "running: must be an array");
		json_decref(*running);
		*running = NULL;
		return GP_EINVAL;
	}
	return 0;
}

static void
apply_register(struct op *op)
{
	struct node tmp, *node;
	json_t *running = NULL, *kill;
	char err[256];
	int i, k, is_new = 0;
	int64_t hb_ms, lease_ms;

	memset(&tmp, 0, sizeof(tmp));
	if (register_decode(op->body, &tmp, &running, err, sizeof(err)) != 0) {
		free(tmp.gpus);
		set_error(op, 400, "%s", err);
		return;
	}
	node = state_node_by_name(tmp.name);
	/*
	 * A provider token of the owner's name takes the node over: that is
	 * how an owner's token is rotated (a new token of the same name,
	 * the agent restarted with it, the old one revoked).
	 */
	if (node != NULL && node->owner_token != op->caller.id &&
	    op->caller.role == GP_ROLE_PROVIDER &&
	    strcmp(node->owner_name, op->caller.name) == 0) {
		gp_info("node taken over by a new token of its owner node=%s "
			"owner=%s token=%lld",
		    node->name, node->owner_name, (long long)op->caller.id);
		node->owner_token = op->caller.id;
	}
	if (node != NULL && node->owner_token != op->caller.id &&
	    op->caller.role != GP_ROLE_ADMIN) {
		free(tmp.gpus);
		json_decref(running);
		set_error(op, 403,
		    "node '%s' belongs to another provider token", tmp.name);
		return;
	}
	if (node == NULL) {
		node = calloc(1, sizeof(*node));
		if (node == NULL) {
			free(tmp.gpus);
			json_decref(running);
			set_error(op, 503, "out of memory");
			return;
		}
		node->id = state.next_node_id;
		gp_strlcpy(node->name, tmp.name, sizeof(node->name));
		node->owner_token = op->caller.id;
		gp_strlcpy(node->owner_name, op->caller.name,
		    sizeof(node->owner_name));
		node_insert(node);
		is_new = 1;
	}
	/* The lab that lends it: its owner token's group. */
	if (node->owner_token == op->caller.id)
		node->group_id = op->caller.group_id;
	/* Where other nodes reach it: what it says, else what we see. */
	gp_strlcpy(node->addr, tmp.addr[0] != '\0' ? tmp.addr : op->peer,
	    sizeof(node->addr));
	/* Parts on GPUs it no longer has are lost. */
	for (k = 0; k < node->njobs; k++) {
		struct job *j = state_job(node->jobs[k]);
		int part = j != NULL ? job_part_on(j, node->id) : -1;
		if (part < 0)
			continue;
		for (i = 0; i < j->parts[part].ngpus; i++)
			if (j->parts[part].gpus[i] >= tmp.ngpus)
				break;
		if (i < j->parts[part].ngpus) {
			job_part_lost(j, part, "node_lost");
			k--;
		}
	}
	/* The GPUs may have changed; keep who uses which by index. */
	for (i = 0; i < tmp.ngpus && i < node->ngpus; i++) {
		tmp.gpus[i].job_id = node->gpus[i].job_id;
		tmp.gpus[i].shared_milli = node->gpus[i].shared_milli;
		tmp.gpus[i].shared_mem_mib = node->gpus[i].shared_mem_mib;
		tmp.gpus[i].nshared = node->gpus[i].nshared;
	}
	free(node->gpus);
	node->gpus = tmp.gpus;
	node->ngpus = tmp.ngpus;
	node->cpus = tmp.cpus;
	node->mem_mib = tmp.mem_mib;
	node->up = 1;
	node->left = 0;
	{
		/* A new agent process starts its offers over: force. */
		struct offer o;
		json_t *ov = json_object_get(op->body, "offer");

		memset(&o, 0, sizeof(o));
		o.lent = ~0ULL;
		o.accepting = 1;
		if (ov != NULL)
			offer_decode(ov, node->ngpus, &o, err, sizeof(err));
		offer_apply(node, &o, 1);
	}
	atomic_store(&node->last_seen_mono, gp_mono_ms());
	node->last_seen_ms = gp_now_ms();
	if (store_put_node(node) != 0)
		gp_fatalx("cannot store node");
	/*
	 * Reconcile: what it runs that we do not want dies; what we placed
	 * there and it never got is delivered again; what it started and
	 * lost (an agent restart) goes back to the queue.
	 */
	kill = json_array();
	pthread_mutex_lock(&notify_lock);
	json_array_clear(node->outbox_assign);
	pthread_mutex_unlock(&notify_lock);
	for (k = 0; k < node->njobs; k++) {
		struct job *j = state_job(node->jobs[k]);
		int part = j != NULL ? job_part_on(j, node->id) : -1;
		if (part < 0)
			continue;
		if (listed(running, j->id, j->attempts)) {
			/* Stops asked before a restart of ours: again. */
			if (j->preempt_for != 0 || j->stopping[0] != '\0')
				add_effect_stop(node,
				    json_pack("{s:I,s:i,s:s}", "job_id",
					(json_int_t)j->id, "attempt",
					j->attempts, "reason",
					j->stopping[0] != '\0'
					    ? "gang_stopped"
					    : "preempted"));
			continue;
		}
		if (j->parts[part].started_ack) {
			job_part_lost(j, part, "node_lost");
			k--;
		} else {
			j->parts[part].delivered_mono = 0;
			add_effect(node, assignment_json(j, part), NULL);
		}
	}
	state_reconcile(node, running, kill, 0);
	json_decref(running);
	live_node_changed(node);
	live_nodes_registered();
	state.sched_dirty = 1;
	op->status = 200;
	state_heartbeat_ms(&hb_ms, &lease_ms);
	atomic_store(&node->lease_told_ms, lease_ms);
	op->result = json_pack("{s:I,s:I,s:I,s:o}", "node_id",
	    (json_int_t)node->id, "heartbeat_ms", (json_int_t)hb_ms,
	    "lease_ms", (json_int_t)lease_ms, "kill", kill);
	gp_info("node registered node=%s id=%lld gpus=%d cpus=%d new=%d",
	    node->name, (long long)node->id, node->ngpus, node->cpus, is_new);
}

/*
 * The node op names, when its caller owns it (or is an admin); else NULL
 * with the op's error set (403).
 */
static struct node *
callers_node(struct op *op)
{
	struct node *node = state_node(op->node_id);

	if (node == NULL || (node->owner_token != op->caller.id &&
				op->caller.role != GP_ROLE_ADMIN)) {
		set_error(op, 403, "node %lld is not yours",
		    (long long)op->node_id);
		return NULL;
	}
	return node;
}

/*
 * Checks that the caller may report for (job, attempt) from node_id.
 * Returns the job and *part (the part that runs there), or NULL with the
 * op's error set.
 */
static struct job *
reporting_job(struct op *op, int *part)
{
	struct node *node = callers_node(op);
	struct job *job = state_job(op->job_id);

	if (node == NULL)
		return NULL;
	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != op->attempt ||
	    (*part = job_part_on(job, node->id)) < 0 ||
	    job->parts[*part].ended) {
		set_error(op, 409, "stale attempt %d of job %lld: kill it",
		    op->attempt, (long long)op->job_id);
		json_object_set_new(op->result, "kill", json_true());
		return NULL;
	}
	return job;
}

static void
apply_started(struct op *op)
{
	struct job_part *p;
	struct job *job;
	int part, k, all = 1;

	if ((job = reporting_job(op, &part)) == NULL)
		return;
	p = &job->parts[part];
	if (!p->started_ack) {
		json_t *rv = json_object_get(op->body, "restored_version");
		int64_t now = gp_now_ms();
		struct attempt_record *a = current_attempt(job);
		p->started_ack = 1;
		if (a != NULL && part == 0 && json_is_integer(rv)) {
			a->restored_version = json_integer_value(rv);
			if (a->restored_version > 0)
				metrics_job_restored();
		}
		bill_part_start(job, part, now);
		for (k = 0; k < job->nparts; k++)
			all &= job->parts[k].started_ack;
		/* A gang runs once every part has started. */
		if (all && !job->started_ack) {
			job->started_ack = 1;
			job->started_ms = now;
			if (a != NULL)
				a->started_ms = now;
			live_job_started(job);
			wake_job_later(job);
		}
		persist_job(job);
	}
	op->status = 200;
	op->result = json_object();
}

/* What a finished part's report says: its state and reason. */
static enum job_state
finished_state(struct job *job, json_t *body, const char **reason)
{
	json_t *v;

	v = json_object_get(body, "exit_code");
	job->exit_code = json_is_integer(v) ? (int)json_integer_value(v) : 0;
	v = json_object_get(body, "signal");
	job->signal = json_is_integer(v) ? (int)json_integer_value(v) : 0;
	job->has_exit = strcmp(*reason, "start_failed") != 0 &&
	    strcmp(*reason, "image_refused") != 0;
	v = json_object_get(body, "message");
	free(job->message);
	job->message = json_is_string(v) && json_string_length(v) > 0
	    ? strndup(json_string_value(v), 1000)
	    : NULL;
	if (job->signal != 0 && strcmp(*reason, "exited") == 0)
		*reason = "killed";
	if (job->cancel_requested || strcmp(*reason, "cancelled") == 0) {
		*reason = "cancelled";
		return JOB_CANCELLED;
	}
	if (strcmp(*reason, "timeout") == 0)
		return JOB_TIMEOUT;
	if (strcmp(*reason, "exited") == 0 && job->exit_code == 0 &&
	    job->signal == 0)
		return JOB_SUCCEEDED;
	return JOB_FAILED;
}

/*
 * A gang's part has ended with an outcome of its own: the first part to
 * fail decides how the job ends (the others are killed); rank 0's
 * success is what a gang that succeeds reports.
 */
static void
gang_part_finished(struct job *job, int part, json_t *body,
    const char *reason)
{
	int failed_before = job->gang_failed != 0 || job->cancel_requested ||
	    job->stopping[0] != '\0';
	int saved_exit = job->exit_code, saved_signal = job->signal,
	    saved_has = job->has_exit;
	char *saved_msg = job->message ? strdup(job->message) : NULL;
	enum job_state st;

	st = finished_state(job, body, &reason);
	if (failed_before || (st == JOB_SUCCEEDED && part != 0)) {
		/* Keep what decided (or will decide) the outcome. */
		job->exit_code = saved_exit;
		job->signal = saved_signal;
		job->has_exit = saved_has;
		free(job->message);
		job->message = saved_msg;
		saved_msg = NULL;
	} else if (st != JOB_SUCCEEDED) {
		job->gang_failed = (int)st;
		gp_strlcpy(job->reason, reason, sizeof(job->reason));
		gp_info("gang part failed job=%lld part=%d reason=%s: "
			"stopping the others",
		    (long long)job->id, part, reason);
		job_cancel_parts(job);
	}
	free(saved_msg);
	part_release(job, part);
	persist_job(job);
	gang_settle(job);
}

static void
apply_finished(struct op *op)
{
	json_t *body = op->body;
	const char *reason;
	enum job_state st;
	struct job *job;
	json_t *v;
	int part;

	if ((job = reporting_job(op, &part)) == NULL)
		return;
	reason = json_string_value(json_object_get(body, "reason"));
	if (reason == NULL)
		reason = "exited";
	v = json_object_get(body, "offer");
	if (v != NULL) {
		struct node *node = state_node(op->node_id);
		struct offer o;
		char err[256];
		if (node != NULL &&
		    offer_decode(v, node->ngpus, &o, err, sizeof(err)) == 0)
			offer_apply(node, &o, 0);
	}
	op->status = 200;
	op->result = json_object();
	if (reason_requeues(reason) && !job->cancel_requested) {
		/* Saved and stopped as asked, or its GPU was taken back. */
		job_part_lost(job, part, reason);
		return;
	}
	if (job->nparts > 1) {
		gang_part_finished(job, part, body, reason);
		return;
	}
	st = finished_state(job, body, &reason);
	job_finish(job, st, reason);
}

/*
 * A batch of reports from one node (checked by api_check_reports): each
 * applies as its single report would, in order, and gets its own status
 * and answer; the node must be the caller's, as for a single report.
 */
static void
apply_reports(struct op *op)
{
	struct node *node = callers_node(op);
	json_t *results, *r, *res;
	size_t i;

	if (node == NULL)
		return;
	if ((results = json_array()) == NULL) {
		set_error(op, 503, "out of memory");
		return;
	}
	json_array_foreach(json_object_get(op->body, "reports"), i, r)
	{
		const char *event = json_string_value(json_object_get(r,
		    "event"));
		struct op *one = op_new(strcmp(event, "started") == 0
			? OP_STARTED
			: OP_FINISHED,
		    &op->caller);
		if (one == NULL) {
			res = json_pack("{s:i,s:s}", "status", 503, "error",
			    "out of memory");
		} else {
			one->job_id = json_integer_value(json_object_get(r,
			    "job_id"));
			one->attempt = (int)json_integer_value(
			    json_object_get(r, "attempt"));
			one->node_id = op->node_id;
			one->body = json_incref(r);
			if (one->type == OP_STARTED)
				apply_started(one);
			else
				apply_finished(one);
			res = one->result != NULL ? json_incref(one->result)
						  : json_object();
			json_object_set_new(res, "status",
			    json_integer(one->status ? one->status : 500));
			op_free(one);
		}
		json_array_append_new(results, res);
	}
	op->status = 200;
	op->result = json_pack("{s:o}", "results", results);
}

static void
apply_lost(struct op *op)
{
	struct job *job = state_job(op->job_id);
	int part;

	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != op->attempt ||
	    (part = job_part_on(job, op->node_id)) < 0 ||
	    job->parts[part].ended)
		return;
	job_part_lost(job, part, "node_lost");
}

static void
apply_checkpoint(struct op *op)
{
	struct job *job = state_job(op->job_id);
	struct attempt_record *a = NULL;
	const char *label;
	int i;

	if (job == NULL)
		return;
	for (i = job->nhistory - 1; i >= 0; i--)
		if (job->history[i].attempt == op->attempt) {
			a = &job->history[i];
			break;
		}
	if (a == NULL || op->version <= a->ckpt_version)
		return;
	a->ckpt_version = op->version;
	a->ckpt_count++;
	a->ckpt_ms = gp_now_ms();
	if (a->attempt == job->attempts && job->state == JOB_RUNNING)
		live_job_saved(job, a->ckpt_ms);
	a->ckpt_bytes = op->bytes;
	metrics_checkpoint_committed(op->bytes);
	label = json_string_value(json_object_get(op->body, "label"));
	free(a->ckpt_label);
	a->ckpt_label = label != NULL && label[0] != '\0'
	    ? strndup(label, 200)
	    : NULL;
	persist_job(job);
	gp_info("checkpoint committed job=%lld attempt=%d version=%lld "
		"bytes=%lld",
	    (long long)job->id, op->attempt, (long long)op->version,
	    (long long)op->bytes);
}

void
state_note_checkpoint(int64_t job_id, int attempt, int64_t version,
    int64_t bytes, const char *label)
{
	struct op *op = op_new(OP_CHECKPOINT, NULL);

	if (op == NULL)
		return;
	op->job_id = job_id;
	op->attempt = attempt;
	op->version = version;
	op->bytes = bytes;
	op->body = json_pack("{s:s}", "label", label != NULL ? label : "");
	state_submit_op(op);
}

static void
apply_offer(struct op *op)
{
	struct node *node = state_node(op->node_id);
	struct offer o;
	char err[256];

	if (node == NULL || !node->up ||
	    offer_decode(op->body, node->ngpus, &o, err, sizeof(err)) != 0)
		return;
	offer_apply(node, &o, 0);
}

/* Every part on node is lost (reason); its outboxes are dropped. */
static void
node_lose_jobs(struct node *node, const char *reason)
{
	while (node->njobs > 0) {
		struct job *j = state_job(node->jobs[0]);
		int part = j != NULL ? job_part_on(j, node->id) : -1;
		if (part < 0 || j->state != JOB_RUNNING) {
			node->jobs[0] = node->jobs[--node->njobs];
			continue;
		}
		job_part_lost(j, part, reason);
	}
	pthread_mutex_lock(&notify_lock);
	json_array_clear(node->outbox_assign);
	json_array_clear(node->outbox_cancel);
	json_array_clear(node->outbox_checkpoint);
	json_array_clear(node->outbox_stop);
	pthread_mutex_unlock(&notify_lock);
}

static void
apply_leave(struct op *op)
{
	struct node *node = callers_node(op);

	if (node == NULL)
		return;
	node->left = 1;
	node->up = 0;
	node->accepting = 0;
	node_lose_jobs(node, "provider_left");
	live_node_changed(node);
	state.sched_dirty = 1;
	op->status = 200;
	op->result = json_pack("{s:s}", "node", node->name);
	gp_info("node left the pool node=%s", node->name);
}

static void
apply(struct op *op)
{
	switch (op->type) {
	case OP_SUBMIT:
		apply_submit(op);
		break;
	case OP_SUBMIT_ARRAY:
		apply_submit_array(op);
		break;
	case OP_CANCEL:
		apply_cancel(op);
		break;
	case OP_TOKEN_CREATE:
		apply_token_create(op);
		break;
	case OP_REGISTER:
		apply_register(op);
		break;
	case OP_STARTED:
		apply_started(op);
		break;
	case OP_FINISHED:
		apply_finished(op);
		break;
	case OP_LOST:
		apply_lost(op);
		break;
	case OP_CHECKPOINT:
		apply_checkpoint(op);
		break;
	case OP_OFFER:
		apply_offer(op);
		break;
	case OP_LEAVE:
		apply_leave(op);
		break;
	case OP_IMAGE_SIGNED:
		apply_image_signed(op);
		break;
	case OP_ACCT:
		acct_apply(op);
		break;
	case OP_TOKEN_REVOKE:
		apply_token_revoke(op);
		break;
	case OP_REPORTS:
		apply_reports(op);
		break;
	}
}

/*
 * The heartbeat period and lease agents are told now (under state.lock).
 * The whole pool may send at most cfg.heartbeat_rate heartbeats a second:
 * N nodes beat every max(heartbeat_ms, N * 1000 / rate) ms, at most a
 * minute, and the lease keeps its ratio to the period (5 s to 1 s by
 * default). 10,000 nodes under the default 2,000 a second beat every 5 s
 * with a 25 s lease, as Kubernetes' kubelets renew a 40 s lease every 10 s.
 */
void
state_heartbeat_ms(int64_t *heartbeat_ms, int64_t *lease_ms)
{
	int64_t hb = state.cfg.heartbeat_ms, nodes = state.nnodes - 1;

	if (state.cfg.heartbeat_rate > 0 && nodes > 0) {
		int64_t want = (nodes * 1000 + state.cfg.heartbeat_rate - 1) /
		    state.cfg.heartbeat_rate;
		if (want > hb)
			hb = want < 60000 ? want : 60000;
	}
	*heartbeat_ms = hb;
	*lease_ms = hb == state.cfg.heartbeat_ms
	    ? state.cfg.lease_ms
	    : state.cfg.lease_ms * hb / state.cfg.heartbeat_ms;
}

/*
 * Nodes whose lease ran out: their jobs go back to the queue. At most
 * LEASE_JOBS_MAX jobs a batch: when thousands of leases run out at once
 * (10,000 agents, a stalled network), requeueing all of them under the
 * state lock held it for seconds. Returns 1 when nodes are left for the
 * next batch (which then runs at once), resuming after the last seen.
 */
#define LEASE_JOBS_MAX 256
static int
expire_leases(int64_t now)
{
	static int64_t next_id = 1;
	int64_t id, k, taken = 0;

	for (k = 1; k < state.nnodes; k++) {
		struct node *n;
		int64_t seen;
		id = next_id < state.nnodes ? next_id : 1;
		next_id = id + 1;
		n = state.nodes[id];
		if (n == NULL || (n->njobs == 0 && !n->up))
			continue;
		seen = atomic_load(&n->last_seen_mono);
		if (now - seen <= state.cfg.lease_ms ||
		    now - seen <= atomic_load(&n->lease_told_ms))
			continue;
		if (n->up) {
			gp_warn("node lease expired node=%s jobs=%d", n->name,
			    n->njobs);
			live_node_changed(n);
		}
		n->up = 0;
		taken += n->njobs;
		node_lose_jobs(n, "node_lost");
		if (taken >= LEASE_JOBS_MAX) {
			gp_debug("lease expiry goes on in the next batch "
				 "requeued=%lld",
			    (long long)taken);
			return 1;
		}
	}
	return 0;
}

/*
 * Finished jobs leave memory (--min-job-age, as Slurm's MinJobAge): a
 * job that ended more than min_job_age_ms ago is freed, its row in
 * state.db answering for it from then on (state_job_any). done_ids holds
 * the finished jobs still in memory in the order they ended (a ring), so
 * a batch looks only at the oldest; at most PURGE_JOBS_MAX a batch, so
 * that the end of 100,000 jobs never holds the write lock for long
 * (returns 1 when more are due: the next batch runs at once).
 */
#define PURGE_JOBS_MAX 512
static int64_t *done_ids;
static size_t done_head, done_len, done_cap;

static void
done_push(int64_t id)
{
	if (state.cfg.min_job_age_ms <= 0)
		return;
	if (done_len == done_cap) {
		size_t cap = done_cap ? done_cap * 2 : 1024, i;
		int64_t *p = malloc(cap * sizeof(*p));
		if (p == NULL)
			return; /* it stays in memory, as without a purge */
		for (i = 0; i < done_len; i++)
			p[i] = done_ids[(done_head + i) % done_cap];
		free(done_ids);
		done_ids = p;
		done_cap = cap;
		done_head = 0;
	}
	done_ids[(done_head + done_len) % done_cap] = id;
	done_len++;
}

static int
cmp_finished(const void *a, const void *b)
{
	const struct job *x = state_job(*(const int64_t *)a);
	const struct job *y = state_job(*(const int64_t *)b);
	int64_t fx = x != NULL ? x->finished_ms : 0;
	int64_t fy = y != NULL ? y->finished_ms : 0;

	return fx < fy ? -1 : fx > fy;
}

/* At start-up: the loaded finished jobs in the order they ended. */
static void
done_sort(void)
{
	if (done_len > 0)
		qsort(done_ids, done_len, sizeof(*done_ids), cmp_finished);
}

/*
 * What still needs job in memory: a waiter or a log follower attached
 * (notify.c; under notify_lock), or the queue. Its accounting was settled
 * when it ended (job_finish closes its attempt's meter), and checkpoint
 * and output reads of a job that left look it up with state_job_brief.
 */
static int
job_pinned(const struct job *job)
{
	int pinned;

	pthread_mutex_lock(&notify_lock);
	pinned = job->waiters != NULL;
	pthread_mutex_unlock(&notify_lock);
	return pinned || job->queue_pos >= 0;
}

static int
purge_finished(int64_t now_ms)
{
	int64_t cutoff = now_ms - state.cfg.min_job_age_ms, id;
	size_t seen = 0, n = done_len;
	struct job *job;
	int freed = 0;

	if (state.cfg.min_job_age_ms <= 0)
		return 0;
	while (done_len > 0 && seen < n && seen < PURGE_JOBS_MAX) {
		id = done_ids[done_head];
		job = state_job(id);
		if (job != NULL && job_finished(job) &&
		    job->finished_ms > cutoff)
			break; /* the oldest is young yet: so are the rest */
		done_head = (done_head + 1) % done_cap;
		done_len--;
		seen++;
		if (job == NULL || !job_finished(job))
			continue;
		if (job_pinned(job)) {
			done_push(id); /* again later */
			continue;
		}
		state.jobs[id] = NULL;
		state.jobs_resident--;
		if (job->state <= JOB_TIMEOUT)
			state.purged[job->state]++;
		state.purged_now++;
		job_free(job);
		freed++;
	}
	if (freed > 0)
		gp_debug("finished jobs left memory purged=%d in_memory=%lld",
		    freed, (long long)state.jobs_resident);
	return seen == PURGE_JOBS_MAX && freed > 0 && done_len > 0;
}

struct job *
state_job_any(int64_t id, int *stored)
{
	struct job *j = state_job(id);

	*stored = 0;
	if (j != NULL || id <= 0 || id >= state.next_job_id)
		return j;
	if (store_read_job(id, &j) != 0)
		return NULL;
	/* As load_job makes it, but kept out of the model. */
	job_from_disk(j);
	*stored = 1;
	return j;
}

int
state_job_brief(int64_t id, char *user, enum job_state *st,
    int64_t *finished_ms)
{
	const struct job *j;
	int rc = GP_ENOENT, s = 0;

	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(id)) != NULL) {
		gp_strlcpy(user, j->user, GP_NAME_MAX + 1);
		*st = j->state;
		*finished_ms = j->finished_ms;
		rc = 0;
	} else if (id > 0 && id < state.next_job_id) {
		rc = store_read_job_brief(id, user, &s, finished_ms);
		*st = (enum job_state)s;
	}
	pthread_rwlock_unlock(&state.lock);
	return rc;
}

static void
publish(void)
{
	size_t i;

	pthread_mutex_lock(&notify_lock);
	for (i = 0; i < neffects; i++) {
		struct effect *e = &effects[i];
		if (e->assign != NULL)
			json_array_append_new(e->node->outbox_assign,
			    e->assign);
		if (e->cancel != NULL)
			json_array_append_new(e->node->outbox_cancel,
			    e->cancel);
		if (e->stop != NULL)
			json_array_append_new(e->node->outbox_stop, e->stop);
		notify_wake_node(e->node);
	}
	for (i = 0; i < nwoken; i++)
		notify_wake_job(woken_jobs[i]);
	pthread_mutex_unlock(&notify_lock);
	neffects = 0;
	nwoken = 0;
}

/* A batch this long is logged with where its time went. */
#define SLOW_BATCH_US 100000

static void *
state_main(void *arg)
{
	struct op *batch, *op, *next;
	struct timespec ts;
	int64_t last_lease_check = 0, now, t[8];
	int nops, lease_more = 0, purge_more = 0;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&op_lock);
		if (op_head == NULL && !stopping && !state.sched_more &&
		    !lease_more && !purge_more) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&op_cond, &op_lock, &ts);
		}
		batch = op_head;
		op_head = op_tail = NULL;
		if (batch == NULL && stopping) {
			thread_exited = 1;
			pthread_mutex_unlock(&op_lock);
			break;
		}
		pthread_mutex_unlock(&op_lock);

		now = gp_mono_ms();
		t[0] = gp_mono_us();
		pthread_rwlock_wrlock(&state.lock);
		t[1] = gp_mono_us();
		if (store_begin() != 0)
			gp_fatalx("cannot begin a database transaction");
		for (op = batch, nops = 0; op != NULL; op = op->next, nops++)
			apply(op);
		t[6] = gp_mono_us();
		if (now - last_lease_check >= 100 || lease_more) {
			lease_more = expire_leases(now);
			last_lease_check = now;
		}
		purge_more = purge_finished(gp_now_ms());
		t[7] = gp_mono_us();
		acct_tick(now);
		t[2] = gp_mono_us();
		/*
		 * sched_more: the last pass placed jobs and left some of the
		 * queue unseen (depth-bounded); the next pass must run even
		 * when nothing else changed (agents holding their reports,
		 * say), or the loop spins on empty batches and the rest of
		 * the queue waits for the next event.
		 */
		if (state.sched_dirty || state.sched_more)
			live_schedule();
		queue_compact();
		pthread_rwlock_unlock(&state.lock);
		t[3] = gp_mono_us();
		/*
		 * Durable before anybody hears of it. A failed commit leaves
		 * memory ahead of disk: stop, and let the restart reload.
		 */
		if (store_commit() != 0)
			gp_fatalx("cannot commit to the database");
		t[4] = gp_mono_us();
		publish();
		t[5] = gp_mono_us();
		if (t[5] - t[0] >= SLOW_BATCH_US)
			gp_warn("slow state batch ops=%d lock_wait_ms=%.1f "
				"apply_ms=%.1f leases_ms=%.1f acct_ms=%.1f "
				"schedule_ms=%.1f commit_ms=%.1f publish_ms=%.1f",
			    nops, (double)(t[1] - t[0]) / 1e3,
			    (double)(t[6] - t[1]) / 1e3,
			    (double)(t[7] - t[6]) / 1e3,
			    (double)(t[2] - t[7]) / 1e3,
			    (double)(t[3] - t[2]) / 1e3,
			    (double)(t[4] - t[3]) / 1e3,
			    (double)(t[5] - t[4]) / 1e3);
		for (op = batch; op != NULL; op = next) {
			next = op->next;
			op_answer(op);
		}
		notify_expire(gp_mono_ms());
	}
	return NULL;
}

int
state_start_thread(void)
{
	return pthread_create(&state_thread, NULL, state_main, NULL) == 0
	    ? 0
	    : GP_EIO;
}

void
state_stop_thread(void)
{
	pthread_mutex_lock(&op_lock);
	stopping = 1;
	pthread_cond_signal(&op_cond);
	pthread_mutex_unlock(&op_lock);
	pthread_join(state_thread, NULL);
}
