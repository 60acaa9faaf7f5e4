/*
 * metrics.c: the coordinator's Prometheus metrics (GET /metrics, see
 * docs/operations.md for the list). Two kinds:
 *
 * - events counted where they happen (queue wait and dispatch latency
 *   histograms, requeues, checkpoints): a few relaxed atomic adds, so the
 *   dispatch and heartbeat paths pay nothing more;
 * - the pool's state (jobs, nodes and GPUs by state, each GPU's sensors
 *   and the job on it with its owner and group) and the ledger's running
 *   totals (ledger.h: what each user was debited and each provider
 *   credited, by group) computed at scrape time: copied from the model
 *   under the read lock (a short scan), then formatted without any lock,
 *   so a scrape delays the state thread by the copy only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay.h"
#include "gang_relay.h"
#include "coord_metrics.h"
#include "state.h"
#include "gp.h"
#include "ledger.h"
#include "notify.h"
#include "prom.h"

static const double wait_bounds[] = {0.01, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300,
    900, 1800, 3600, 7200, 14400, 43200, 86400};
static const double dispatch_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

/* Requeue reasons counted apart; anything else is "other". */
static const char *const requeue_reasons[] = {"node_lost", "reclaimed",
    "owner_present", "window_closed", "provider_left", "agent_stopped",
    "refused", "restore_failed", "image_unavailable", "preempted",
    "gang_stopped", "other"};
#define NREASONS GP_ARRAY_LEN(requeue_reasons)

static struct {
	int64_t start_ms;
	struct gp_prom_histogram queue_wait, dispatch;
	_Atomic uint64_t requeues[NREASONS];
	_Atomic uint64_t restores;
	_Atomic uint64_t ckpt_versions, ckpt_version_bytes;
	_Atomic uint64_t ckpt_chunks, ckpt_chunk_bytes;
	_Atomic uint64_t unauthorized;
} m;

int
metrics_init(void)
{
	size_t i;

	m.start_ms = gp_now_ms();
	for (i = 0; i < NREASONS; i++)
		atomic_init(&m.requeues[i], 0);
	if (gp_prom_histogram_init(&m.queue_wait, wait_bounds,
	        (int)GP_ARRAY_LEN(wait_bounds)) != 0 ||
	    gp_prom_histogram_init(&m.dispatch, dispatch_bounds,
	        (int)GP_ARRAY_LEN(dispatch_bounds)) != 0)
		return GP_EINVAL;
	return 0;
}

void
metrics_job_assigned(const struct job *job, int64_t now_ms)
{
	int64_t since = job->submitted_ms;

	/* A requeued job has waited since its last attempt ended. */
	if (job->nhistory > 0 && job->history[job->nhistory - 1].finished_ms)
		since = job->history[job->nhistory - 1].finished_ms;
	gp_prom_histogram_observe(&m.queue_wait,
	    (double)(now_ms - since) / 1000.0);
}

void
metrics_job_delivered(struct job *job, int64_t now_mono)
{
	int64_t at = atomic_exchange(&job->assigned_mono, 0);

	if (at > 0)
		gp_prom_histogram_observe(&m.dispatch,
		    (double)(now_mono - at) / 1000.0);
}

void
metrics_job_requeued(const char *reason)
{
	size_t i;

	for (i = 0; i + 1 < NREASONS; i++)
		if (strcmp(reason, requeue_reasons[i]) == 0)
			break;
	atomic_fetch_add_explicit(&m.requeues[i], 1, memory_order_relaxed);
}

void
metrics_job_restored(void)
{
	atomic_fetch_add_explicit(&m.restores, 1, memory_order_relaxed);
}

void
metrics_checkpoint_committed(int64_t bytes)
{
	atomic_fetch_add_explicit(&m.ckpt_versions, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m.ckpt_version_bytes,
	    bytes > 0 ? (uint64_t)bytes : 0, memory_order_relaxed);
}

void
metrics_chunk_stored(size_t bytes)
{
	atomic_fetch_add_explicit(&m.ckpt_chunks, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m.ckpt_chunk_bytes, bytes,
	    memory_order_relaxed);
}

void
metrics_unauthorized(void)
{
	atomic_fetch_add_explicit(&m.unauthorized, 1, memory_order_relaxed);
}

static uint64_t
get(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

/* A family with one unlabelled sample. */
static int
single(struct gp_buf *out, const char *name, const char *type, const char *help,
    double value)
{
	return gp_prom_family(out, name, type, help) |
	    gp_prom_sample(out, name, NULL, value);
}

/*
 * What a scrape shows of the model, copied under the read lock (a few
 * microseconds for hundreds of nodes) so that formatting, which takes far
 * longer, never holds the state thread back.
 */
struct snap_node {
	char name[GP_NAME_MAX + 1], owner[GP_NAME_MAX + 1];
	const char *state;
	int up;
	int64_t last_seen_ms;
	int first_gpu, ngpus; /* in snap.gpus */
};

struct snap_gpu {
	int index, state, util, temp_c, power_mw;
	int64_t mem_mib, mem_used_mib, job_id;
	char uuid[96], model[GP_NAME_MAX + 1];
	char user[GP_NAME_MAX + 1], job_name[GP_NAME_MAX + 1];
	char group[GP_NAME_MAX + 1]; /* the job's */
};

/* A fractional job's use as libgpupool-cuda.so measured it. */
struct snap_share {
	int64_t job_id, used_mib, limit_mib;
	int gpu, effective_milli, util;
	char node[GP_NAME_MAX + 1], user[GP_NAME_MAX + 1];
	char group[GP_NAME_MAX + 1];
};

/* What a running job's part sent and received over its network. */
struct snap_net {
	int64_t job_id, sent, received;
	int attempt;
	char node[GP_NAME_MAX + 1], user[GP_NAME_MAX + 1];
	char group[GP_NAME_MAX + 1];
};

/* An account's ledger total (ledger_total with its group's name). */
struct snap_total {
	char name[GP_NAME_MAX + 1], group[GP_NAME_MAX + 1];
	int64_t amount, gpu_ms;
};

struct snap_group {
	char name[GP_NAME_MAX + 1];
	int64_t spent, used_gpu_ms, earned, lent_gpu_ms;
};

struct snap {
	struct snap_node *nodes;
	struct snap_gpu *gpus;
	int nnodes, ngpus;
	struct snap_share *shares;
	int nshares;
	struct snap_net *nets;
	int nnets;
	int64_t jobs[JOB_TIMEOUT + 1], submitted, oldest_ms, tokens[4];
	int64_t resident, purged; /* jobs in memory; purged (min-job-age) */
	struct snap_total *debited, *credited;
	struct snap_group *groups;
	size_t ndebited, ncredited, ngroups;
	int64_t postings;
};

static const char *
node_state(const struct node *n)
{
	return n->left      ? "left"
	    : !n->up        ? "down"
	    : !n->accepting ? "paused"
	                    : "up";
}

enum {
	GPU_BUSY,
	GPU_IDLE,
	GPU_UNLENT,
	GPU_DOWN,
	GPU_NSTATES
};
static const char *const gpu_states[] = {"busy", "idle", "unlent", "down"};

static int
gpu_state(const struct node *n, int i)
{
	if (!n->up || n->left)
		return GPU_DOWN;
	if (n->gpus[i].job_id != 0)
		return GPU_BUSY;
	if (!n->accepting || i >= 64 || !((n->lent >> i) & 1))
		return GPU_UNLENT;
	return GPU_IDLE;
}

/* Copies n ledger totals, naming their groups. */
static struct snap_total *
copy_totals(const struct ledger_totals *t)
{
	struct snap_total *v = calloc(t->n + 1, sizeof(*v));
	size_t i;

	for (i = 0; v != NULL && i < t->n; i++) {
		gp_strlcpy(v[i].name, t->v[i].name, sizeof(v[i].name));
		gp_strlcpy(v[i].group,
		    ledger_group_name(&ledger, t->v[i].group_id),
		    sizeof(v[i].group));
		v[i].amount = t->v[i].amount;
		v[i].gpu_ms = t->v[i].gpu_ms;
	}
	return v;
}

/* The ledger's running totals; call with state.lock held for reading. */
static int
snapshot_ledger(struct snap *sn)
{
	size_t i;

	sn->postings = ledger.postings;
	sn->debited = copy_totals(&ledger.debited);
	sn->credited = copy_totals(&ledger.credited);
	sn->groups = calloc(ledger.ngroups + 1, sizeof(*sn->groups));
	if (sn->debited == NULL || sn->credited == NULL || sn->groups == NULL)
		return GP_ENOMEM;
	sn->ndebited = ledger.debited.n;
	sn->ncredited = ledger.credited.n;
	sn->ngroups = ledger.ngroups;
	for (i = 0; i < ledger.ngroups; i++) {
		const struct ledger_group *g = &ledger.groups[i];
		gp_strlcpy(sn->groups[i].name, g->name,
		    sizeof(sn->groups[i].name));
		sn->groups[i].spent = g->spent;
		sn->groups[i].used_gpu_ms = g->used_gpu_ms;
		sn->groups[i].earned = g->earned;
		sn->groups[i].lent_gpu_ms = g->lent_gpu_ms;
	}
	return 0;
}

/* Copies what the scrape needs; call with state.lock held for reading. */
static int
snapshot(struct snap *sn)
{
	int64_t c;
	int i, k = 0, n = 0, ngpus = 0, njobs = 0, p;
	const struct node *nd;
	const struct job *j;
	const struct token_entry *t;

	memset(sn, 0, sizeof(*sn));
	c = 0;
	while ((nd = state_node_next(&c)) != NULL) {
		n++;
		ngpus += nd->ngpus;
		njobs += nd->njobs;
	}
	if ((sn->shares = calloc((size_t)njobs + 1, sizeof(*sn->shares))) ==
	    NULL ||
	    (sn->nets = calloc((size_t)njobs + 1, sizeof(*sn->nets))) == NULL)
		return GP_ENOMEM;
	sn->nodes = calloc((size_t)n + 1, sizeof(*sn->nodes));
	sn->gpus = calloc((size_t)ngpus + 1, sizeof(*sn->gpus));
	if (sn->nodes == NULL || sn->gpus == NULL)
		return GP_ENOMEM;
	c = 0;
	while ((nd = state_node_next(&c)) != NULL) {
		struct snap_node *o;
		o = &sn->nodes[sn->nnodes++];
		gp_strlcpy(o->name, nd->name, sizeof(o->name));
		gp_strlcpy(o->owner, nd->owner_name, sizeof(o->owner));
		o->state = node_state(nd);
		o->up = nd->up && !nd->left;
		o->last_seen_ms = nd->last_seen_ms;
		o->first_gpu = k;
		o->ngpus = nd->ngpus;
		for (i = 0; i < nd->njobs && sn->nnets < njobs; i++) {
			j = state_job(nd->jobs[i]);
			p = j != NULL && j->state == JOB_RUNNING
			    ? job_part_on(j, nd->id) : -1;
			if (p >= 0) {
				struct snap_net *s = &sn->nets[sn->nnets++];
				s->job_id = j->id;
				s->attempt = j->attempts;
				s->sent = atomic_load(&j->parts[p].net_sent);
				s->received =
				    atomic_load(&j->parts[p].net_received);
				gp_strlcpy(s->node, nd->name, sizeof(s->node));
				gp_strlcpy(s->user, j->user, sizeof(s->user));
				gp_strlcpy(s->group, ledger_group_name(&ledger,
				    j->group_id), sizeof(s->group));
			}
		}
		for (i = 0; i < nd->njobs && sn->nshares < njobs; i++) {
			j = state_job(nd->jobs[i]);
			for (p = 0; j != NULL && j->state == JOB_RUNNING &&
			    p < j->nparts; p++) {
				const struct job_part *jp = &j->parts[p];
				struct snap_share *s;
				if (jp->node_id != nd->id || jp->ngpus < 1 ||
				    atomic_load(&jp->gpu_effective_milli) <= 0)
					continue;
				s = &sn->shares[sn->nshares++];
				s->job_id = j->id;
				s->gpu = jp->gpus[0];
				s->used_mib = atomic_load(&jp->gpu_mem_used_mib);
				s->limit_mib = jp->gpu_mem_mib;
				s->effective_milli =
				    atomic_load(&jp->gpu_effective_milli);
				s->util = atomic_load(&jp->gpu_util);
				gp_strlcpy(s->node, nd->name, sizeof(s->node));
				gp_strlcpy(s->user, j->user, sizeof(s->user));
				gp_strlcpy(s->group, ledger_group_name(&ledger,
				    j->group_id), sizeof(s->group));
				break;
			}
		}
		for (i = 0; i < nd->ngpus; i++, k++) {
			const struct node_gpu *g = &nd->gpus[i];
			struct snap_gpu *sg = &sn->gpus[k];
			j = state_job(g->job_id);
			sg->index = g->index;
			sg->state = gpu_state(nd, i);
			sg->util = g->util < 0 ? 0
			    : g->util > 100    ? 100
			                       : g->util;
			sg->temp_c = g->temp_c;
			sg->power_mw = g->power_mw;
			sg->mem_mib = g->mem_mib;
			sg->mem_used_mib = g->mem_used_mib;
			gp_strlcpy(sg->uuid, g->uuid, sizeof(sg->uuid));
			gp_strlcpy(sg->model, g->model, sizeof(sg->model));
			if (g->job_id != 0 && j != NULL &&
			    j->state == JOB_RUNNING) {
				sg->job_id = j->id;
				gp_strlcpy(sg->user, j->user, sizeof(sg->user));
				gp_strlcpy(sg->job_name, j->spec.name,
				    sizeof(sg->job_name));
				gp_strlcpy(sg->group,
				    ledger_group_name(&ledger, j->group_id),
				    sizeof(sg->group));
			}
		}
	}
	sn->ngpus = k;
	c = 0;
	while ((j = state_job_next(&c)) != NULL)
		if (j->state <= JOB_TIMEOUT)
			sn->jobs[j->state]++;
	/* Those that left memory still count, in their end state. */
	for (i = 0; i <= JOB_TIMEOUT; i++)
		sn->jobs[i] += state.purged[i];
	sn->resident = state.jobs_resident;
	sn->purged = state.purged_now;
	sn->submitted = state.next_job_id - 1;
	c = 0;
	while ((j = state_queued_next(&c)) != NULL)
		if (sn->oldest_ms == 0 || j->submitted_ms < sn->oldest_ms)
			sn->oldest_ms = j->submitted_ms;
	c = 0;
	while ((t = state_token_next(&c)) != NULL)
		if ((unsigned)t->role < 4)
			sn->tokens[t->role]++;
	return snapshot_ledger(sn);
}

static void
snapshot_free(struct snap *sn)
{
	free(sn->nodes);
	free(sn->gpus);
	free(sn->shares);
	free(sn->nets);
	free(sn->debited);
	free(sn->credited);
	free(sn->groups);
}

/* The labels of GPU k: its node and index, and the job on it. */
struct gpu_labels {
	char gpu[16], job_id[24];
};

static void
gpu_labels(const struct snap_gpu *g, struct gpu_labels *l)
{
	snprintf(l->gpu, sizeof(l->gpu), "%d", g->index);
	l->job_id[0] = '\0';
	if (g->job_id > 0)
		snprintf(l->job_id, sizeof(l->job_id), "%lld",
		    (long long)g->job_id);
}

/* What libgpupool-cuda.so measured in each running fractional job. */
static int
gpu_shares(struct gp_buf *out, const struct snap *sn)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
	    {"gpupool_job_gpu_memory_used_bytes",
	        "GPU memory a job holding a fraction of a GPU has allocated, "
	        "summed over its processes (libgpupool-cuda.so)"},
	    {"gpupool_job_gpu_memory_limit_bytes",
	        "the GPU memory cap of a job holding a fraction of a GPU"},
	    {"gpupool_job_gpu_share_ratio",
	        "the share of its GPU's time a fractional job may use now "
	        "(1: not paced: alone on the GPU with an elastic policy)"},
	    {"gpupool_job_gpu_utilization_ratio",
	        "a fractional job's GPU utilization as its pacing measured it"},
	};
	const char *labels[] = {"node", NULL, "gpu", NULL, "job_id", NULL,
	    "user", NULL, "group", NULL, NULL};
	char gpu[16], job[24];
	size_t f;
	int i, rc = 0;
	double v;

	for (f = 0; f < GP_ARRAY_LEN(fam); f++) {
		rc |= gp_prom_family(out, fam[f].name, "gauge", fam[f].help);
		for (i = 0; i < sn->nshares; i++) {
			const struct snap_share *s = &sn->shares[i];
			snprintf(gpu, sizeof(gpu), "%d", s->gpu);
			snprintf(job, sizeof(job), "%lld", (long long)s->job_id);
			labels[1] = s->node;
			labels[3] = gpu;
			labels[5] = job;
			labels[7] = s->user;
			labels[9] = s->group;
			v = f == 0 ? (double)s->used_mib * 1048576.0
			    : f == 1 ? (double)s->limit_mib * 1048576.0
			    : f == 2 ? s->effective_milli / 1000.0
			             : s->util / 100.0;
			rc |= gp_prom_sample(out, fam[f].name, labels, v);
		}
	}
	return rc;
}

/*
 * What each running job's part sent and received over its network so far
 * (its agent's last heartbeat); a new attempt counts from 0 again.
 */
static int
job_networks(struct gp_buf *out, const struct snap *sn)
{
	static const char *const fam[] = {
	    "gpupool_job_network_sent_bytes_total",
	    "gpupool_job_network_received_bytes_total"};
	const char *labels[] = {"node", NULL, "job_id", NULL, "attempt", NULL,
	    "user", NULL, "group", NULL, NULL};
	char job[24], attempt[16];
	int f, i, rc = 0;

	for (f = 0; f < 2; f++) {
		rc |= gp_prom_family(out, fam[f], "counter", f == 0
		    ? "Bytes a running job sent over its network namespace"
		    : "Bytes a running job received over its network "
		      "namespace");
		for (i = 0; i < sn->nnets; i++) {
			const struct snap_net *s = &sn->nets[i];
			snprintf(job, sizeof(job), "%lld",
			    (long long)s->job_id);
			snprintf(attempt, sizeof(attempt), "%d", s->attempt);
			labels[1] = s->node;
			labels[3] = job;
			labels[5] = attempt;
			labels[7] = s->user;
			labels[9] = s->group;
			rc |= gp_prom_sample(out, fam[f], labels,
			    (double)(f == 0 ? s->sent : s->received));
		}
	}
	return rc;
}

/* Per-GPU gauges of nodes that are up: what their agents last said. */
static int
gpu_sensors(struct gp_buf *out, const struct snap *sn)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
	    {"gpupool_gpu_utilization_ratio",
	        "GPU utilization (0 to 1) in the agent's last heartbeat; "
	        "job_id, user and group name the job on the GPU"},
	    {"gpupool_gpu_memory_used_bytes",
	        "GPU memory in use in the agent's last heartbeat"},
	    {"gpupool_gpu_temperature_celsius",
	        "GPU temperature in the agent's last heartbeat"},
	    {"gpupool_gpu_power_watts",
	        "GPU power draw in the agent's last heartbeat"},
	};
	struct gpu_labels l;
	const char *labels[] = {"node", NULL, "gpu", NULL, "job_id", NULL,
	    "user", NULL, "group", NULL, NULL};
	size_t f;
	int n, i, rc = 0;
	double v;

	for (f = 0; f < GP_ARRAY_LEN(fam); f++) {
		rc |= gp_prom_family(out, fam[f].name, "gauge", fam[f].help);
		for (n = 0; n < sn->nnodes; n++) {
			const struct snap_node *nd = &sn->nodes[n];
			for (i = 0; nd->up && i < nd->ngpus; i++) {
				const struct snap_gpu *g =
				    &sn->gpus[nd->first_gpu + i];
				gpu_labels(g, &l);
				labels[1] = nd->name;
				labels[3] = l.gpu;
				labels[5] = l.job_id;
				labels[7] = g->user;
				labels[9] = g->group;
				if (f == 0)
					v = g->util / 100.0;
				else if (f == 1)
					v = (double)g->mem_used_mib * 1048576.0;
				else if (f == 2 && g->temp_c >= 0)
					v = g->temp_c;
				else if (f == 3 && g->power_mw >= 0)
					v = g->power_mw / 1000.0;
				else
					continue;
				rc |=
				    gp_prom_sample(out, fam[f].name, labels, v);
			}
		}
	}
	return rc;
}

/* What every GPU is: its model and memory, its state, its job. */
static int
gpu_inventory(struct gp_buf *out, const struct snap *sn, int64_t *by_state)
{
	struct gpu_labels l;
	const char *info[] = {"node", NULL, "gpu", NULL, "uuid", NULL, "model",
	    NULL, NULL};
	const char *mem[] = {"node", NULL, "gpu", NULL, NULL};
	const char *st[] = {"node", NULL, "gpu", NULL, "state", NULL, NULL};
	const char *job[] = {"node", NULL, "gpu", NULL, "job_id", NULL, "user",
	    NULL, "group", NULL, "job_name", NULL, NULL};
	int n, i, k, pass, rc = 0;

	for (pass = 0; pass < 4; pass++) {
		if (pass == 0)
			rc |= gp_prom_family(out, "gpupool_gpu_info", "gauge",
			    "Each GPU of the pool (1), with its UUID and "
			    "model");
		else if (pass == 1)
			rc |= gp_prom_family(out,
			    "gpupool_gpu_memory_total_bytes", "gauge",
			    "Each GPU's memory");
		else if (pass == 2)
			rc |= gp_prom_family(out, "gpupool_gpu_state", "gauge",
			    "Each GPU's state (1 for the current one): busy "
			    "(runs a job), idle (lent, free), unlent (not "
			    "lent or paused by its owner), down (its node is "
			    "down or left)");
		else
			rc |= gp_prom_family(out, "gpupool_gpu_job_info",
			    "gauge",
			    "The job running on each busy GPU (1), with its "
			    "owner, group and name");
		for (n = 0; n < sn->nnodes; n++) {
			const struct snap_node *nd = &sn->nodes[n];
			for (i = 0; i < nd->ngpus; i++) {
				const struct snap_gpu *g =
				    &sn->gpus[nd->first_gpu + i];
				gpu_labels(g, &l);
				info[1] = mem[1] = st[1] = job[1] = nd->name;
				info[3] = mem[3] = st[3] = job[3] = l.gpu;
				if (pass == 0) {
					info[5] = g->uuid;
					info[7] = g->model;
					rc |= gp_prom_sample(out,
					    "gpupool_gpu_info", info, 1);
				} else if (pass == 1) {
					rc |= gp_prom_sample(out,
					    "gpupool_gpu_memory_total_bytes",
					    mem,
					    (double)g->mem_mib * 1048576.0);
				} else if (pass == 2) {
					by_state[g->state]++;
					for (k = 0; k < GPU_NSTATES; k++) {
						st[5] = gpu_states[k];
						rc |= gp_prom_sample(out,
						    "gpupool_gpu_state", st,
						    k == g->state);
					}
				} else if (l.job_id[0] != '\0') {
					job[5] = l.job_id;
					job[7] = g->user;
					job[9] = g->group;
					job[11] = g->job_name;
					rc |= gp_prom_sample(out,
					    "gpupool_gpu_job_info", job, 1);
				}
			}
		}
	}
	return rc;
}

static int
nodes(struct gp_buf *out, const struct snap *sn)
{
	static const char *const states[] = {"up", "paused", "down", "left"};
	const char *l1[] = {"state", NULL, NULL};
	const char *l2[] = {"node", NULL, "owner", NULL, "state", NULL, NULL};
	const char *l3[] = {"node", NULL, NULL};
	int64_t count[4] = {0};
	size_t k;
	int n, rc = 0;

	rc |= gp_prom_family(out, "gpupool_node_state", "gauge",
	    "Each node's state (1 for the current one): up, paused (its "
	    "owner takes no new jobs), down (lease expired), left");
	for (n = 0; n < sn->nnodes; n++) {
		const struct snap_node *nd = &sn->nodes[n];
		l2[1] = nd->name;
		l2[3] = nd->owner;
		for (k = 0; k < GP_ARRAY_LEN(states); k++) {
			int is = strcmp(nd->state, states[k]) == 0;
			l2[5] = states[k];
			count[k] += is;
			rc |= gp_prom_sample(out, "gpupool_node_state", l2, is);
		}
	}
	rc |= gp_prom_family(out, "gpupool_nodes", "gauge",
	    "Nodes (providers' machines) by state");
	for (k = 0; k < GP_ARRAY_LEN(states); k++) {
		l1[1] = states[k];
		rc |=
		    gp_prom_sample(out, "gpupool_nodes", l1, (double)count[k]);
	}
	rc |= gp_prom_family(out, "gpupool_node_last_heartbeat_seconds",
	    "gauge", "When each node's agent was last heard from (Unix time)");
	for (n = 0; n < sn->nnodes; n++) {
		if (sn->nodes[n].last_seen_ms <= 0)
			continue;
		l3[1] = sn->nodes[n].name;
		rc |= gp_prom_sample(out, "gpupool_node_last_heartbeat_seconds",
		    l3, (double)sn->nodes[n].last_seen_ms / 1000.0);
	}
	return rc;
}

static int
jobs(struct gp_buf *out, const struct snap *sn, int64_t now_ms)
{
	const char *l[] = {"state", NULL, NULL};
	int i, rc = 0;

	rc |= gp_prom_family(out, "gpupool_jobs", "gauge",
	    "Jobs the coordinator knows, by state (in memory or left it)");
	for (i = 0; i <= JOB_TIMEOUT; i++) {
		l[1] = job_state_name((enum job_state)i);
		rc |=
		    gp_prom_sample(out, "gpupool_jobs", l, (double)sn->jobs[i]);
	}
	rc |= single(out, "gpupool_jobs_submitted_total", "counter",
	    "Jobs ever submitted (accepted)", (double)sn->submitted);
	rc |= single(out, "gpupool_jobs_in_memory", "gauge",
	    "Jobs the coordinator holds in memory (finished ones leave "
	    "after --min-job-age)",
	    (double)sn->resident);
	rc |= single(out, "gpupool_jobs_purged_total", "counter",
	    "Finished jobs that left memory since the coordinator started",
	    (double)sn->purged);
	rc |= single(out, "gpupool_queue_oldest_job_age_seconds", "gauge",
	    "How long ago the oldest queued job was submitted (0: queue "
	    "empty)",
	    sn->oldest_ms > 0 && now_ms > sn->oldest_ms
	        ? (double)(now_ms - sn->oldest_ms) / 1000.0
	        : 0);
	return rc;
}

static int
tokens(struct gp_buf *out, const struct snap *sn)
{
	static const char *const roles[] = {"admin", "user", "provider",
	    "metrics"};
	const char *l[] = {"role", NULL, NULL};
	size_t i;
	int rc;

	rc = gp_prom_family(out, "gpupool_tokens", "gauge",
	    "API tokens by role");
	for (i = 0; i < 4; i++) {
		l[1] = roles[i];
		rc |= gp_prom_sample(out, "gpupool_tokens", l,
		    (double)sn->tokens[i]);
	}
	return rc;
}

/* One counter family of account totals, in credits or GPU-seconds. */
static int
ledger_family(struct gp_buf *out, const char *name, const char *help,
    const char *who, const struct snap_total *v, size_t n, int gpu)
{
	const char *l[] = {NULL, NULL, "group", NULL, NULL};
	size_t i;
	int rc;

	l[0] = who;
	rc = gp_prom_family(out, name, "counter", help);
	for (i = 0; i < n; i++) {
		l[1] = v[i].name;
		l[3] = v[i].group;
		rc |= gp_prom_sample(out, name, l,
		    gpu ? (double)v[i].gpu_ms / 1000.0
		        : (double)v[i].amount / (double)GP_MICRO);
	}
	return rc;
}

/*
 * The ledger's totals since the books began: per user and per provider
 * (with the group of the job, or of the node), and per group, so that a
 * panel of a lab's spending or earning needs no glue and shows groups
 * that have none yet.
 */
static int
ledger_totals(struct gp_buf *out, const struct snap *sn)
{
	static const struct {
		const char *name, *help;
	} gfam[] = {
	    {"gpupool_ledger_group_debited_credits_total",
	        "Credits debited for the jobs of each group's users (spent)"},
	    {"gpupool_ledger_group_used_gpu_seconds_total",
	        "GPU time (share-weighted GPU-seconds) billed to each "
	        "group's jobs"},
	    {"gpupool_ledger_group_credited_credits_total",
	        "Credits credited to the providers of each group for their "
	        "nodes' work (earned)"},
	    {"gpupool_ledger_group_lent_gpu_seconds_total",
	        "GPU time (share-weighted GPU-seconds) each group's nodes "
	        "lent"},
	};
	const char *l[] = {"group", NULL, NULL};
	size_t f, i;
	int rc = 0;

	rc |= single(out, "gpupool_ledger_postings_total", "counter",
	    "Postings in the ledger (each a user's debit and a provider's "
	    "credit of the same amount)",
	    (double)sn->postings);
	rc |= ledger_family(out, "gpupool_ledger_user_debited_credits_total",
	    "Credits debited from each user, by the group of the jobs", "user",
	    sn->debited, sn->ndebited, 0);
	rc |= ledger_family(out, "gpupool_ledger_user_gpu_seconds_total",
	    "GPU time (share-weighted GPU-seconds) billed to each user, by "
	    "the group of the jobs",
	    "user", sn->debited, sn->ndebited, 1);
	rc |=
	    ledger_family(out, "gpupool_ledger_provider_credited_credits_total",
	        "Credits credited to each provider, by the group of the node",
	        "provider", sn->credited, sn->ncredited, 0);
	rc |= ledger_family(out, "gpupool_ledger_provider_gpu_seconds_total",
	    "GPU time (share-weighted GPU-seconds) each provider lent, by "
	    "the group of the node",
	    "provider", sn->credited, sn->ncredited, 1);
	for (f = 0; f < GP_ARRAY_LEN(gfam); f++) {
		rc |=
		    gp_prom_family(out, gfam[f].name, "counter", gfam[f].help);
		for (i = 0; i < sn->ngroups; i++) {
			const struct snap_group *g = &sn->groups[i];
			int64_t v = f == 0 ? g->spent
			    : f == 1       ? g->used_gpu_ms
			    : f == 2       ? g->earned
			                   : g->lent_gpu_ms;
			l[1] = g->name;
			rc |= gp_prom_sample(out, gfam[f].name, l,
			    f % 2 == 0 ? (double)v / (double)GP_MICRO
			               : (double)v / 1000.0);
		}
	}
	return rc;
}

/* Counters and histograms: no lock needed. */
static int
events(struct gp_buf *out)
{
	const char *l[] = {"reason", NULL, NULL};
	size_t i;
	int rc = 0;

	rc |= gp_prom_histogram_write(out, "gpupool_job_queue_wait_seconds",
	    "Time jobs waited in the queue before each placement (since "
	    "submission, or since their previous attempt ended)",
	    &m.queue_wait);
	rc |=
	    gp_prom_histogram_write(out, "gpupool_job_dispatch_latency_seconds",
	        "Time from a job's placement to its hand-over to the agent's "
	        "poll (includes the commit to disk)",
	        &m.dispatch);
	rc |= gp_prom_family(out, "gpupool_job_requeues_total", "counter",
	    "Attempts that ended without ending their job (the job went back "
	    "to the queue: a migration), by reason");
	for (i = 0; i < NREASONS; i++) {
		l[1] = requeue_reasons[i];
		rc |= gp_prom_sample(out, "gpupool_job_requeues_total", l,
		    (double)get(&m.requeues[i]));
	}
	rc |= single(out, "gpupool_agent_polls_waiting", "gauge",
	    "Agents' long polls for work held open at the coordinator",
	    (double)notify_polls_waiting());
	rc |= single(out, "gpupool_job_restores_total", "counter",
	    "Attempts that started from a checkpoint (a job resumed after "
	    "moving)",
	    (double)get(&m.restores));
	rc |= single(out, "gpupool_checkpoint_versions_total", "counter",
	    "Checkpoint versions committed", (double)get(&m.ckpt_versions));
	rc |= single(out, "gpupool_checkpoint_version_bytes_total", "counter",
	    "Bytes of the checkpoint versions committed (before "
	    "deduplication)",
	    (double)get(&m.ckpt_version_bytes));
	rc |= single(out, "gpupool_checkpoint_chunks_stored_total", "counter",
	    "Checkpoint chunks written to the store (new content only)",
	    (double)get(&m.ckpt_chunks));
	rc |= single(out, "gpupool_checkpoint_chunk_bytes_stored_total",
	    "counter", "Bytes of checkpoint chunks written to the store",
	    (double)get(&m.ckpt_chunk_bytes));
	rc |= single(out, "gpupool_http_unauthorized_total", "counter",
	    "Requests refused for a missing or unknown token",
	    (double)get(&m.unauthorized));
	rc |= relay_metrics_render(out);
	rc |= gang_relay_metrics_render(out);
	return rc;
}

int
metrics_render(struct gp_buf *out)
{
	const char *build[] = {"version", GP_VERSION, "protocol", NULL, NULL};
	int64_t gpus[GPU_NSTATES] = {0}, now = gp_now_ms();
	const char *l[] = {"state", NULL, NULL};
	struct snap sn;
	char proto[16];
	int k, rc = 0;

	snprintf(proto, sizeof(proto), "%d", GP_PROTOCOL_VERSION);
	build[3] = proto;
	rc |= gp_prom_family(out, "gpupool_build_info", "gauge",
	    "The coordinator's version (1)");
	rc |= gp_prom_sample(out, "gpupool_build_info", build, 1);
	rc |= single(out, "gpupool_start_time_seconds", "gauge",
	    "When the coordinator started (Unix time)",
	    (double)m.start_ms / 1000.0);
	pthread_rwlock_rdlock(&state.lock);
	k = snapshot(&sn);
	pthread_rwlock_unlock(&state.lock);
	if (k != 0) {
		snapshot_free(&sn);
		return GP_ENOMEM;
	}
	rc |= jobs(out, &sn, now);
	rc |= nodes(out, &sn);
	rc |= gpu_inventory(out, &sn, gpus);
	rc |= gpu_sensors(out, &sn);
	rc |= gpu_shares(out, &sn);
	rc |= job_networks(out, &sn);
	rc |= tokens(out, &sn);
	rc |= ledger_totals(out, &sn);
	snapshot_free(&sn);
	rc |= gp_prom_family(out, "gpupool_gpus", "gauge",
	    "GPUs by state (see gpupool_gpu_state)");
	for (k = 0; k < GPU_NSTATES; k++) {
		l[1] = gpu_states[k];
		rc |= gp_prom_sample(out, "gpupool_gpus", l, (double)gpus[k]);
	}
	rc |= events(out);
	return rc != 0 ? GP_ENOMEM : 0;
}
