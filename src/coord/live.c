/*
 * live.c: the live scheduler. The coordinator keeps one scheduling engine
 * (sched.h) for its whole life and tells it only what changed: nodes that
 * register, change their offer or go down (live_node_changed), parts that
 * end (live_part_ended); what a pass starts is applied to the engine by
 * the pass itself. So a pass costs what the queue and the changes cost,
 * not a rebuild of every node and GPU (issue 6: 10,000 agents).
 *
 * What the engine is told: each node's offer (up, CPUs, memory, GPUs lent,
 * models, memory, compute capability, price, the lab that lends it), each
 * queued job's request (fractions, gangs, constraints, lab, user, budget
 * hold), each lab's weight and decayed usage and each user's (from the
 * ledger, for fair share), each running job's last saved work (the loss a
 * preemption would cause). What comes back: the parts that start, the
 * borrowed jobs to preempt for a lab's own (asked to save and stop; the
 * lab's job waits for their room), and why every other job waits (kept on
 * the job for ps, show and `gpupool queue`).
 *
 * The group "default" is nobody's lab: its nodes are lent to all alike and
 * its jobs never preempt anything (engine group 0).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "datasets.h"
#include "gang_relay.h"
#include "state.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "sched.h"
#include "wg.h"

#define MASTER_PORT_BASE  29500
#define MASTER_PORT_RANGE 500
#define MIX_REFRESH_MS    5000
#define FIT_CACHE_MAX     1024

static struct gp_sched_engine *eng;
static int eng_failed; /* building it ran out of memory */
static int64_t *dirty; /* node ids the engine must hear of */
static size_t ndirty, capdirty;
static uint64_t prices_gen_seen; /* ledger.prices_gen + 1 */
static int64_t mix_built_mono;

/*
 * Pass depth: an event-triggered pass looks at each user's first
 * DEPTH_PER_USER queued jobs, a deep pass every DEEP_PASS_MS at each
 * user's first DEEP_DEPTH_PER_USER (a 100,000-job queue whole took
 * seconds under the lock). A shorter queue is taken whole.
 */
#define DEPTH_PER_USER      1000
#define DEEP_DEPTH_PER_USER 10000
#define DEEP_PASS_MS        10000
/* The head job's reservation is computed at most once a second. */
#define RESV_REUSE_MS  1000
static int64_t deep_pass_mono;
static int *ucount; /* per user id: jobs taken this pass */
static size_t capucount;
/*
 * Per user id: jobs in the queue, and how many users have any. A pass
 * stops walking the queue once every such user has had its depth (one
 * user's 100,000 queued jobs were a walk of 100,000 at every pass).
 * uqueued_lost: a count could not be kept (out of memory): walk it all.
 */
static int *uqueued;
static size_t capuqueued;
static int nusers_queued, uqueued_lost;
/*
 * Interactive jobs queued: each pass looks at them all, past the depth
 * per user (a person is waiting; docs/scheduling.md).
 */
static int64_t interactive_queued;

/* Per pass: the queue as the engine takes it, and shares. */
static const struct gp_sched_job **qptrs;
static size_t capq;
static struct gp_sched_share *gshares, *ushares;
static size_t capg, capu;

/* ---- users ---- */

struct user_slot {
	char name[GP_NAME_MAX + 1];
	int64_t id;
};
static struct user_slot *users;
static size_t users_cap, nusers_known;
static unsigned pass_stamp;
static unsigned *ustamp; /* by user id: the pass that listed it last */
static size_t capustamp;

static size_t
name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return (size_t)h;
}

static struct user_slot *
user_slot(const char *name)
{
	size_t i, h;

	if ((nusers_known + 1) * 2 > users_cap) {
		size_t cap = users_cap ? users_cap * 2 : 64;
		struct user_slot *t = calloc(cap, sizeof(*t));
		if (t == NULL)
			return NULL;
		for (i = 0; i < users_cap; i++) {
			if (users[i].id == 0)
				continue;
			h = name_hash(users[i].name) & (cap - 1);
			while (t[h].id != 0)
				h = (h + 1) & (cap - 1);
			t[h] = users[i];
		}
		free(users);
		users = t;
		users_cap = cap;
	}
	for (h = name_hash(name) & (users_cap - 1); users[h].id != 0;
	     h = (h + 1) & (users_cap - 1))
		if (strcmp(users[h].name, name) == 0)
			return &users[h];
	gp_strlcpy(users[h].name, name, sizeof(users[h].name));
	users[h].id = (int64_t)++nusers_known;
	return &users[h];
}

int64_t
live_user_id(const char *user)
{
	struct user_slot *u = user_slot(user);

	return u != NULL ? u->id : 0;
}

/* The per-user counters cover every user id known. */
static int
ucount_grow(void)
{
	size_t want = nusers_known + 1;
	int *c;

	if (want <= capucount)
		return 0;
	want = want * 2 + 16;
	if ((c = calloc(want, sizeof(*c))) == NULL)
		return GP_ENOMEM;
	free(ucount);
	ucount = c;
	capucount = want;
	return 0;
}

void
live_queued(const struct job *job, int delta)
{
	size_t u = job->user_id > 0 ? (size_t)job->user_id : 0;

	if (job->spec.interactive)
		interactive_queued += delta;
	if (u >= capuqueued) {
		size_t cap = u * 2 + 16;
		int *c = realloc(uqueued, cap * sizeof(*c));
		if (c == NULL) {
			uqueued_lost = 1;
			return;
		}
		memset(c + capuqueued, 0, (cap - capuqueued) * sizeof(*c));
		uqueued = c;
		capuqueued = cap;
	}
	if (delta > 0 && uqueued[u]++ == 0)
		nusers_queued++;
	else if (delta < 0 && uqueued[u] > 0 && --uqueued[u] == 0)
		nusers_queued--;
}

/* ---- what the engine is told ---- */

/* The lab a group is for the scheduler: "default" is nobody's. */
static int64_t
lab_of(int64_t group_id)
{
	return group_id <= 1 ? 0 : group_id;
}

void
live_sched_job(const struct job *j, const struct gp_jobspec *spec,
    struct gp_sched_job *out)
{
	memset(out, 0, sizeof(*out));
	out->id = j != NULL ? j->id : 0;
	out->gpus = spec->gpus;
	out->gpu_milli = spec->gpu_milli;
	out->shared = gp_jobspec_is_fraction(spec);
	out->gpu_mem_mib = spec->gpu_mem_mib;
	out->min_gpu_mem_mib = spec->min_gpu_mem_mib;
	out->min_capability = spec->min_capability;
	/* NULL when any model does: a pass compares it job after job, and
	 * the text lies in the job, a cache line further. */
	out->gpu_model = spec->gpu_model[0] != '\0' ? spec->gpu_model : NULL;
	/* Every job takes at least one CPU. */
	out->cpu_milli =
	    (int64_t)(spec->cpus > 0 ? spec->cpus : 1) * GP_SCHED_MILLI;
	out->mem_mib = spec->mem_mib;
	out->time_limit_s = spec->time_limit_s;
	out->max_price = spec->max_price_micro;
	out->parts = spec->nodes > 1 ? spec->nodes : 1;
	out->interactive = spec->interactive;
	if (j != NULL) {
		out->group = lab_of(j->group_id);
		out->user = j->user_id;
	}
}

/* The node as the engine sees it: what its owner lends now. */
static void
node_view(struct node *node, struct gp_sched_node *sn, struct gp_sched_gpu *sg,
    int offered)
{
	int g, kept;

	memset(sn, 0, sizeof(*sn));
	sn->id = node->id;
	sn->up = node->up;
	sn->cpu_milli = (int64_t)node->cpus * GP_SCHED_MILLI;
	sn->mem_mib = node->mem_mib;
	sn->group = lab_of(node->group_id);
	sn->ngpus = node->ngpus;
	sn->gpus = sg;
	if (offered) {
		sn->up = node->up && node->accepting && !node->left;
		if (node->offer_cpus > 0 && node->offer_cpus < node->cpus)
			sn->cpu_milli =
			    (int64_t)node->offer_cpus * GP_SCHED_MILLI;
		if (node->offer_mem_mib > 0 &&
		    (node->mem_mib <= 0 || node->offer_mem_mib < node->mem_mib))
			sn->mem_mib = node->offer_mem_mib;
		sn->max_time_s = node->max_job_s;
	}
	for (g = 0; g < node->ngpus; g++) {
		memset(&sg[g], 0, sizeof(sg[g]));
		sg[g].index = node->gpus[g].index;
		sg[g].model = node->gpus[g].model;
		sg[g].mem_mib = node->gpus[g].mem_mib;
		sg[g].capability = node->gpus[g].capability;
		sg[g].price = state_gpu_price(&node->gpus[g]);
		if (offered && (g >= 64 || !((node->lent >> g) & 1)))
			sg[g].job_id = -1;
	}
	/*
	 * The owner keeps interactive_gpus of the lent GPUs for interactive
	 * jobs (interactive-gpus in the policy): the last ones lent, so that
	 * batch work packs from the first.
	 */
	for (g = node->ngpus - 1, kept = 0; offered && g >= 0 &&
	    kept < node->interactive_gpus; g--)
		if (sg[g].job_id == 0) {
			sg[g].interactive_only = 1;
			kept++;
		}
}

/* Tells the engine about node now. */
static int
engine_node(struct node *node)
{
	struct gp_sched_gpu sg[GP_SCHED_GPUS_MAX];
	struct gp_sched_node sn;

	if (node->ngpus > GP_SCHED_GPUS_MAX)
		return GP_EINVAL;
	node_view(node, &sn, sg, 1);
	return gp_sched_engine_node_set(eng, &sn);
}

/* When a part ends at the latest (its time limit), INT64_MAX: never. */
static int64_t
job_end_ms(const struct job *j)
{
	if (j->spec.time_limit_s <= 0)
		return INT64_MAX;
	return j->started_ms + j->spec.time_limit_s * 1000;
}

/* When the job's work was last saved: its checkpoint, else its start. */
static int64_t
job_saved_ms(const struct job *j)
{
	const struct attempt_record *a =
	    j->nhistory > 0 ? &j->history[j->nhistory - 1] : NULL;

	if (a != NULL && a->attempt == j->attempts && a->ckpt_ms > 0)
		return a->ckpt_ms;
	return j->started_ms > 0 ? j->started_ms : gp_now_ms();
}

/* Records a running part (after a restart, or a rebuild). */
static int
engine_run(const struct job *j, int k)
{
	const struct job_part *p = &j->parts[k];
	struct gp_sched_running r;
	int gpus[GP_GPUS_MAX], i;

	memset(&r, 0, sizeof(r));
	r.job_id = j->id;
	r.node_id = p->node_id;
	r.cpu_milli =
	    (int64_t)(j->spec.cpus > 0 ? j->spec.cpus : 1) * GP_SCHED_MILLI;
	r.mem_mib = j->spec.mem_mib;
	r.end_ms = job_end_ms(j);
	r.group = lab_of(j->group_id);
	r.preemptible = !j->spec.interactive; /* never moved */
	r.saved_ms = job_saved_ms(j);
	r.preempt_for = j->preempt_for;
	if (p->gpu_milli > 0 && p->gpu_milli < GP_SCHED_MILLI &&
	    p->ngpus == 1) {
		r.shared = 1;
		r.gpu = p->gpus[0];
		r.gpu_milli = p->gpu_milli;
		r.gpu_mem_mib = p->gpu_mem_mib;
	}
	for (i = 0; i < p->ngpus; i++)
		gpus[i] = p->gpus[i];
	return gp_sched_engine_run_add(eng, &r, gpus, r.shared ? 0 : p->ngpus);
}

/* The engine, from every node and what runs (the first pass). */
static int
engine_build(void)
{
	int64_t c;
	struct node *n;
	struct job *j;
	int k, rc;

	rc = gp_sched_engine_new(NULL, 0, state.cfg.placement, NULL, 1, &eng);
	if (rc != 0)
		return rc;
	gp_sched_engine_set_resv_reuse(eng, RESV_REUSE_MS);
	c = 0;
	while ((n = state_node_next(&c)) != NULL) {
		if ((rc = engine_node(n)) != 0) {
			gp_error("scheduler: node not usable node=%s error=%s",
			    n->name, gp_strerror(rc));
			if (rc == GP_ENOMEM)
				return rc;
		}
		n->sched_dirty = 0;
	}
	ndirty = 0;
	c = 0;
	while ((j = state_job_next(&c)) != NULL) {
		if (j->state != JOB_RUNNING)
			continue;
		for (k = 0; k < j->nparts; k++) {
			if (j->parts[k].ended || j->parts[k].node_id == 0)
				continue;
			rc = engine_run(j, k);
			if (rc == GP_ENOMEM)
				return rc;
			if (rc != 0)
				gp_warn("scheduler: running part not recorded "
				        "job=%lld part=%d error=%s",
				    (long long)j->id, k, gp_strerror(rc));
		}
	}
	prices_gen_seen = ledger.prices_gen + 1;
	gp_info("scheduler engine built nodes=%lld running=%zu policy=%s",
	    (long long)(state.next_node_id - 1), gp_sched_engine_nrunning(eng),
	    gp_sched_policy_name(state.cfg.placement != NULL
	            ? state.cfg.placement
	            : gp_sched_policy_default()));
	return 0;
}

void
live_node_changed(struct node *node)
{
	if (node->sched_dirty)
		return;
	if (ndirty == capdirty) {
		size_t cap = capdirty ? capdirty * 2 : 64;
		int64_t *d = realloc(dirty, cap * sizeof(*d));
		if (d == NULL) {
			/* The next pass rebuilds the engine instead. */
			gp_sched_engine_free(eng);
			eng = NULL;
			return;
		}
		dirty = d;
		capdirty = cap;
	}
	node->sched_dirty = 1;
	dirty[ndirty++] = node->id;
}

void
live_part_ended(const struct job *job, const struct node *node)
{
	if (eng != NULL)
		gp_sched_engine_end_part(eng, job->id, node->id);
}

void
live_job_started(const struct job *job)
{
	live_job_saved(job, job->started_ms);
}

void
live_job_saved(const struct job *job, int64_t ms)
{
	if (eng != NULL)
		gp_sched_engine_run_set(eng, job->id, !job->spec.interactive,
		    ms, job->preempt_for);
}

/* Tells the engine what changed since the last pass. */
static int
flush_changes(void)
{
	size_t i;
	int64_t c;
	struct node *nd;
	int rc;

	if (eng == NULL) {
		for (i = 0; i < ndirty; i++) {
			struct node *n = state_node(dirty[i]);
			if (n != NULL)
				n->sched_dirty = 0;
		}
		ndirty = 0;
		return engine_build();
	}
	if (prices_gen_seen != ledger.prices_gen + 1) {
		/* Prices are part of every GPU: tell it all nodes. */
		c = 0;
		while ((nd = state_node_next(&c)) != NULL)
			live_node_changed(nd);
		prices_gen_seen = ledger.prices_gen + 1;
	}
	for (i = 0; i < ndirty; i++) {
		struct node *n = state_node(dirty[i]);
		if (n == NULL)
			continue;
		n->sched_dirty = 0;
		rc = engine_node(n);
		if (rc == GP_ENOMEM) {
			ndirty = 0;
			return rc;
		}
		if (rc != 0)
			gp_error("scheduler: node not usable node=%s error=%s",
			    n->name, gp_strerror(rc));
	}
	ndirty = 0;
	return 0;
}

/*
 * The recent mix of requests (for the fragmentation-aware policies): the
 * queue's shapes and what runs, refreshed every few seconds (each refresh
 * makes the policy score every node again).
 */
/* What a job asks of one node, as the request mix counts it. */
static void
mix_shape(const struct job *j, double weight, struct gp_sched_shape *sh)
{
	sh->cpu_milli = j->sj.cpu_milli;
	sh->mem_mib = j->sj.mem_mib;
	sh->gpus = j->sj.shared ? 1 : j->sj.gpus;
	sh->gpu_milli = j->sj.shared && j->sj.gpu_milli > 0 ? j->sj.gpu_milli
	                                                 : GP_SCHED_MILLI;
	sh->gpu_model = j->spec.gpu_model;
	sh->weight = weight;
}

static void
refresh_mix(void)
{
	const struct gp_sched_policy *pol = state.cfg.placement != NULL
	    ? state.cfg.placement
	    : gp_sched_policy_default();
	struct gp_sched_shape *sh;
	struct gp_sched_mix mix;
	size_t n = 0, cap;
	int64_t now = gp_mono_ms(), c;
	const struct node *nd;
	const struct job *qj;
	int k;

	if (strcmp(gp_sched_policy_name(pol), "frag") != 0 &&
	    strcmp(gp_sched_policy_name(pol), "fgd") != 0)
		return;
	if (mix_built_mono != 0 && now - mix_built_mono < MIX_REFRESH_MS)
		return;
	mix_built_mono = now;
	cap = (size_t)state_queue_places() + 1;
	c = 0;
	while ((nd = state_node_next(&c)) != NULL)
		cap += (size_t)nd->njobs;
	if ((sh = calloc(cap, sizeof(*sh))) == NULL)
		return;
	c = 0;
	while ((qj = state_queued_next(&c)) != NULL)
		mix_shape(qj, qj->nparts, &sh[n++]);
	c = 0;
	while ((nd = state_node_next(&c)) != NULL) {
		for (k = 0; k < nd->njobs && n < cap; k++) {
			const struct job *j = state_job(nd->jobs[k]);
			if (j == NULL)
				continue;
			mix_shape(j, 1, &sh[n++]);
		}
	}
	mix.shapes = sh;
	mix.nshapes = n;
	if (gp_sched_engine_set_mix(eng, n > 0 ? &mix : NULL) != 0)
		gp_error("scheduler: no memory for the request mix");
	free(sh);
}

/* Fair-share standings: every lab's, and the queued jobs' users'. */
static int
build_shares(int64_t now, const struct gp_sched_job *const *q, size_t nq,
    size_t *ng, size_t *nu)
{
	size_t i, n = 0;
	struct acct_decay d;

	if (ledger.ngroups + 1 > capg) {
		struct gp_sched_share *g =
		    realloc(gshares, (ledger.ngroups + 1) * sizeof(*g));
		if (g == NULL)
			return GP_ENOMEM;
		gshares = g;
		capg = ledger.ngroups + 1;
	}
	for (i = 0; i < ledger.ngroups; i++) {
		const struct ledger_group *g = &ledger.groups[i];
		ledger_group_usage(&ledger, g->id, now, &d);
		gshares[n].id = lab_of(g->id);
		gshares[n].weight = g->weight > 0 ? (double)g->weight : 1;
		gshares[n++].usage = d.gpu_s;
	}
	*ng = n;
	n = 0;
	if (++pass_stamp == 0 && capustamp > 0) { /* wrapped: start over */
		memset(ustamp, 0, capustamp * sizeof(*ustamp));
		pass_stamp = 1;
	}
	/* The users by id (the jobs have theirs): no name lookup a job. */
	if (nusers_known + 1 > capustamp) {
		size_t cap = (nusers_known + 1) * 2;
		unsigned *t = realloc(ustamp, cap * sizeof(*t));
		if (t == NULL)
			return GP_ENOMEM;
		memset(t + capustamp, 0, (cap - capustamp) * sizeof(*t));
		ustamp = t;
		capustamp = cap;
	}
	for (i = 0; i < nq; i++) {
		const struct job *j = (const struct job *)(const void *)((
		    const char *)q[i] - offsetof(struct job, sj));
		int64_t uid = j->user_id;
		if (uid <= 0) { /* (its id ran out of memory) */
			struct user_slot *u = user_slot(j->user);
			if (u == NULL)
				continue;
			uid = u->id;
		}
		if ((size_t)uid >= capustamp || ustamp[uid] == pass_stamp)
			continue;
		ustamp[uid] = pass_stamp;
		if (n == capu) {
			size_t cap = capu ? capu * 2 : 64;
			struct gp_sched_share *s =
			    realloc(ushares, cap * sizeof(*s));
			if (s == NULL)
				return GP_ENOMEM;
			ushares = s;
			capu = cap;
		}
		ledger_user_usage(&ledger, j->user, now, &d);
		ushares[n].id = uid;
		ushares[n].weight = 1;
		ushares[n++].usage = d.gpu_s;
	}
	*nu = n;
	return 0;
}

/*
 * Copies the list why ("a: b; c; d") into out, cut after the last whole
 * item that fits (then "; ...") rather than in the middle of one.
 */
static void
why_fit(char *out, size_t len, const char *why)
{
	const char *cut;
	size_t n;

	if (strlen(why) < len) {
		gp_strlcpy(out, why, len);
		return;
	}
	for (cut = why + len - 6; cut > why && strncmp(cut, "; ", 2) != 0;
	    cut--)
		;
	n = cut > why ? (size_t)(cut - why) : len - 6;
	snprintf(out, len, "%.*s; ...", (int)n, why);
}

/* Applies what a pass decided. */
static void
apply_result(const struct gp_sched_result *res, int64_t now)
{
	const struct gp_sched_assignment *as[GP_SCHED_PARTS_MAX];
	size_t i, k;
	int rank = 0;

	for (i = 0; i < res->nassignments; i = k) {
		int64_t id = res->assignments[i].job_id;
		struct job *j = state_job(id);
		int n = 0, ok;
		for (k = i;
		     k < res->nassignments && res->assignments[k].job_id == id;
		     k++)
			if (n < GP_SCHED_PARTS_MAX &&
			    res->assignments[k].part == n)
				as[n++] = &res->assignments[k];
		ok = j != NULL && j->state == JOB_QUEUED && n == j->nparts;
		if (!ok)
			gp_error("scheduler returned a bad assignment job=%lld",
			    (long long)id);
		if (!ok || !state_budget_admit(j)) {
			gp_sched_engine_end(eng, id);
			continue;
		}
		state_job_assign(j, as);
		gp_sched_engine_run_set(eng, j->id, !j->spec.interactive, now,
		    0);
	}
	for (i = 0; i < res->npreemptions; i++) {
		struct job *v = state_job(res->preemptions[i].job_id);
		struct job *f = state_job(res->preemptions[i].for_job_id);
		if (v != NULL && f != NULL)
			state_job_preempt(v, f);
	}
	/* Why the others wait, and their places in the order. */
	for (i = 0; i < res->nwaiting; i++) {
		const struct gp_sched_waiting *w = &res->waiting[i];
		struct job *j = state_job(w->job_id);
		if (j == NULL || j->state != JOB_QUEUED || j->wait == NULL)
			continue;
		j->wait_reason = w->reason;
		j->wait_start_ms = w->start_ms;
		j->preempting = w->reason == GP_SCHED_WAIT_PREEMPTING;
		gp_strlcpy(j->wait->wait_why, w->why,
		    sizeof(j->wait->wait_why));
		/* A gang no nodes up would all take: say which refuse. */
		if (w->reason == GP_SCHED_WAIT_NEVER && j->spec.nodes > 1 &&
		    state.nno_gang_links > 0) {
			char why[1200];

			job_acceptance(j, why, sizeof(why));
			if (why[0] != '\0')
				why_fit(j->wait->wait_why,
				    sizeof(j->wait->wait_why), why);
		}
		if (w->reason != GP_SCHED_WAIT_HELD)
			j->queue_rank = ++rank;
	}
	for (i = 0; i < res->nwaiting; i++) {
		struct job *j = state_job(res->waiting[i].job_id);
		if (j != NULL && j->state == JOB_QUEUED &&
		    res->waiting[i].reason == GP_SCHED_WAIT_HELD)
			j->queue_rank = ++rank;
	}
}

/*
 * A job array's %LIMIT: its running tasks, counted as they start and stop
 * (state.c calls live_array_running), so the count holds whether or not
 * the tasks are in memory. One entry per array with a limit and a task
 * running; a pool runs few such arrays at once, so a list will do.
 */
struct array_count {
	int64_t array_job_id;
	int running;
};
static struct array_count *acounts;
static size_t nacounts, capacounts;

static struct array_count *
array_count_find(int64_t array_job_id)
{
	size_t i;

	for (i = 0; i < nacounts; i++)
		if (acounts[i].array_job_id == array_job_id)
			return &acounts[i];
	return NULL;
}

void
live_array_running(const struct job *job, int delta)
{
	struct array_count *c;

	if (job->spec.array_limit <= 0 || job->spec.array_job_id <= 0)
		return;
	c = array_count_find(job->spec.array_job_id);
	if (c == NULL && delta > 0) {
		if (nacounts == capacounts) {
			size_t cap = capacounts ? capacounts * 2 : 16;
			struct array_count *a =
			    realloc(acounts, cap * sizeof(*a));
			if (a == NULL) {
				gp_error("out of memory counting an array's "
				         "running tasks array=%lld",
				    (long long)job->spec.array_job_id);
				return;
			}
			acounts = a;
			capacounts = cap;
		}
		c = &acounts[nacounts++];
		c->array_job_id = job->spec.array_job_id;
		c->running = 0;
	}
	if (c == NULL)
		return;
	c->running += delta;
	if (c->running <= 0)
		*c = acounts[--nacounts];
}

/*
 * How many more of an array's tasks may start in this pass: its limit
 * less those running, taken down as the pass lets them go. The queue is
 * in id order, so an array's queued tasks come one after the other.
 */
static int64_t limit_array; /* the array counted last, 0: none */
static int limit_left;

static int
array_may_start(const struct job *j)
{
	const struct array_count *c;

	if (j->spec.array_job_id != limit_array) {
		limit_array = j->spec.array_job_id;
		c = array_count_find(limit_array);
		limit_left = j->spec.array_limit - (c != NULL ? c->running : 0);
	}
	if (limit_left <= 0)
		return 0;
	limit_left--;
	return 1;
}

void
live_schedule(void)
{
	struct gp_sched_result res;
	struct gp_sched_pass p;
	size_t n = 0, ng = 0, nu = 0, skipped = 0;
	int64_t now = gp_now_ms();
	int i, rc, choosy, deep, depth, nfull = 0, all_full = 0, held;

	state.sched_dirty = 0;
	state.sched_more = 0;
	state_queue_compact();
	state_budget_holds();
	if ((rc = flush_changes()) != 0) {
		if (!eng_failed)
			gp_error("scheduler: out of memory; the next pass "
			         "rebuilds it");
		eng_failed = 1;
		gp_sched_engine_free(eng);
		eng = NULL;
		state.sched_dirty = 1;
		return;
	}
	eng_failed = 0;
	if (state.nqueue == 0)
		return;
	if ((size_t)state.nqueue > capq) {
		const struct gp_sched_job **q =
		    realloc(qptrs, (size_t)state.nqueue * sizeof(*q));
		if (q == NULL)
			return;
		qptrs = q;
		capq = (size_t)state.nqueue;
	}
	/*
	 * How deep this pass looks: each user's first `depth` jobs, as
	 * Slurm's default_queue_depth bounds its event-triggered passes.
	 * The jobs further back keep their last reason; a deep pass looks
	 * further every DEEP_PASS_MS (they may fit where the front does
	 * not).
	 */
	deep = gp_mono_ms() - deep_pass_mono >= DEEP_PASS_MS;
	if (deep)
		deep_pass_mono = gp_mono_ms();
	depth = deep ? DEEP_DEPTH_PER_USER : DEPTH_PER_USER;
	if (state.nqueue <= depth || ucount_grow() != 0)
		depth = 0; /* all of it */
	choosy = state_any_refuses_plain();
	for (i = 0; i < state.nqueue; i++) {
		struct job *j = state.queue[i];
		if (j == NULL)
			continue;
		/* (one backing off takes no place of its user's depth) */
		if (depth > 0 && !j->spec.interactive &&
		    (j->retry == NULL || j->retry->not_before_ms <= now)) {
			size_t u = j->user_id > 0 &&
			        (size_t)j->user_id < capucount
			    ? (size_t)j->user_id
			    : 0;
			if (ucount[u] >= depth) {
				skipped++;
				continue;
			}
			/*
			 * Every user with queued jobs has had its depth: the
			 * rest would all be skipped (after this one).
			 */
			if (++ucount[u] == depth && ++nfull == nusers_queued &&
			    !uqueued_lost && interactive_queued == 0) {
				all_full = 1;
				skipped += (size_t)(state.nqueue - i - 1);
			}
		}
		/*
		 * (A job asking for internet or lan: a node allowing less
		 * refuses it, and placed there it would get less.)
		 */
		choosy |= j->spec.image[0] != '\0' ||
		    (j->spec.interactive && state.nrefuse_interactive > 0) ||
		    (j->spec.nodes > 1 && state.nno_gang_links > 0) ||
		    j->spec.network > 1;
		retry_sched_job(j, now); /* its back-off, nodes to avoid */
		held = j->wait->hold_reason != NULL &&
		    j->wait->hold_reason[0] != '\0';
		j->sj.hold = held ? GP_SCHED_HOLD_BUDGET : GP_SCHED_HOLD_NONE;
		j->sj.hold_reason = held ? j->wait->hold_reason : NULL;
		/* Past its array's %LIMIT: held (the pass copies the why). */
		if (j->sj.hold == GP_SCHED_HOLD_NONE &&
		    j->spec.array_limit > 0 && !array_may_start(j)) {
			snprintf(j->wait->wait_why, sizeof(j->wait->wait_why),
			    "its array runs at most %d tasks at once",
			    j->spec.array_limit);
			j->sj.hold = GP_SCHED_HOLD_OTHER;
			j->sj.hold_reason = j->wait->wait_why;
		}
		qptrs[n++] = &j->sj;
		if (all_full)
			break;
	}
	limit_array = 0;
	if (depth > 0)
		memset(ucount, 0, capucount * sizeof(*ucount));
	if (build_shares(now, qptrs, n, &ng, &nu) != 0)
		return;
	refresh_mix();
	memset(&p, 0, sizeof(p));
	p.now_ms = now;
	p.queue = qptrs;
	p.nqueue = n;
	p.groups = gshares;
	p.ngroups = ng;
	p.users = ushares;
	p.nusers = nu;
	p.defer_preempt = 1;
	/* The owners' acceptance, when an owner or a job makes it matter. */
	if (choosy)
		p.accepts = state_owner_accepts;
	if (gp_sched_engine_run_pass(eng, &p, &res) != 0) {
		gp_error("scheduler failed: out of memory");
		return;
	}
	apply_result(&res, now);
	/* Jobs further back may take what the front could not. */
	state.sched_more = skipped > 0 && res.nassignments > 0;
	gp_sched_result_fini(&res);
}

/* ---- can it ever run ---- */

/* The pool's nodes as hardware (up or down), rebuilt when one registers. */
static struct gp_sched_node *hw_nodes;
static struct gp_sched_gpu *hw_gpus;
static size_t hw_n;
static int64_t hw_gen = -1;

struct fit_entry {
	char key[GP_NAME_MAX + 160];
	int fits;
	char why[256];
};
static struct fit_entry *fit_cache;
static size_t nfit;

/* Bumped on every register: what nodes could ever hold may change. */
static int64_t nodes_gen;

static int
hw_view(void)
{
	size_t ng = 0, nn = 0;
	struct node *node;
	int64_t c;

	if (hw_gen == nodes_gen)
		return 0;
	free(hw_nodes);
	free(hw_gpus);
	hw_nodes = NULL;
	hw_gpus = NULL;
	c = 0;
	while ((node = state_node_next(&c)) != NULL) {
		ng += (size_t)node->ngpus;
		nn++;
	}
	hw_nodes = calloc(nn + 1, sizeof(*hw_nodes));
	hw_gpus = calloc(ng + 1, sizeof(*hw_gpus));
	if (hw_nodes == NULL || hw_gpus == NULL)
		return GP_ENOMEM;
	ng = 0;
	nn = 0;
	c = 0;
	while ((node = state_node_next(&c)) != NULL) {
		node_view(node, &hw_nodes[nn], &hw_gpus[ng], 0);
		ng += (size_t)node->ngpus;
		nn++;
	}
	hw_n = nn;
	hw_gen = nodes_gen;
	nfit = 0;
	return 0;
}

int
live_can_ever_fit(const struct gp_jobspec *spec, char *why, size_t whylen)
{
	struct gp_sched_job sj;
	char key[sizeof(fit_cache->key)];
	size_t i;
	int fits;

	if (hw_view() != 0)
		return GP_ENOMEM;
	snprintf(key, sizeof(key), "%d/%d/%lld/%lld/%d/%d/%lld/%d/%lld/%s",
	    spec->gpus, spec->gpu_milli, (long long)spec->gpu_mem_mib,
	    (long long)spec->min_gpu_mem_mib, spec->min_capability, spec->cpus,
	    (long long)spec->mem_mib, spec->nodes,
	    (long long)spec->max_price_micro, spec->gpu_model);
	for (i = 0; i < nfit; i++)
		if (strcmp(fit_cache[i].key, key) == 0) {
			gp_strlcpy(why, fit_cache[i].why, whylen);
			return fit_cache[i].fits;
		}
	live_sched_job(NULL, spec, &sj);
	fits = gp_sched_can_ever_fit(hw_nodes, hw_n, &sj, why, whylen);
	if (fit_cache == NULL &&
	    (fit_cache = calloc(FIT_CACHE_MAX, sizeof(*fit_cache))) == NULL)
		return fits;
	if (nfit == FIT_CACHE_MAX)
		nfit = 0; /* many shapes: start over */
	gp_strlcpy(fit_cache[nfit].key, key, sizeof(fit_cache[nfit].key));
	gp_strlcpy(fit_cache[nfit].why, why, sizeof(fit_cache[nfit].why));
	fit_cache[nfit++].fits = fits;
	return fits;
}

int
live_hw_nodes(struct gp_sched_node **nodes, size_t *n)
{
	if (hw_view() != 0)
		return GP_ENOMEM;
	*nodes = calloc(hw_n + 1, sizeof(**nodes));
	if (*nodes == NULL)
		return GP_ENOMEM;
	memcpy(*nodes, hw_nodes, hw_n * sizeof(**nodes));
	*n = hw_n;
	return 0;
}

/* ---- gangs ---- */

int
live_master_port(const struct job *job)
{
	const struct node *n0 = state_node(job->parts[0].node_id);
	int tries, port, k;

	port = MASTER_PORT_BASE +
	    (int)((uint64_t)job->id * 7919 % MASTER_PORT_RANGE);
	for (tries = 0; n0 != NULL && tries < MASTER_PORT_RANGE; tries++) {
		int used = 0;
		for (k = 0; k < n0->njobs && !used; k++) {
			const struct job *o = state_job(n0->jobs[k]);
			used = o != NULL && o != job && o->nparts > 1 &&
			    o->parts[0].node_id == n0->id &&
			    o->master_port == port;
		}
		if (!used)
			break;
		port = MASTER_PORT_BASE +
		    (port - MASTER_PORT_BASE + 1) % MASTER_PORT_RANGE;
	}
	return port;
}

/* ---- JSON views ---- */

const char *
live_wait_code(int reason)
{
	switch (reason) {
	case GP_SCHED_WAIT_RESOURCES:
		return "resources";
	case GP_SCHED_WAIT_NEVER:
		return "never";
	case GP_SCHED_WAIT_SHARE:
		return "share";
	case GP_SCHED_WAIT_PRIORITY:
		return "priority";
	case GP_SCHED_WAIT_RESERVATION:
		return "reservation";
	case GP_SCHED_WAIT_GANG:
		return "gang";
	case GP_SCHED_WAIT_HELD:
		return "held";
	case GP_SCHED_WAIT_PREEMPTING:
		return "preempting";
	case GP_SCHED_WAIT_BACKOFF:
		return "backoff";
	}
	return "pending";
}

static json_t *
time_or_null(int64_t ms)
{
	char buf[40];

	if (ms <= 0 || ms == INT64_MAX)
		return json_null();
	gp_format_time(ms, buf, sizeof(buf));
	return json_string(buf);
}

void
live_request_json(const struct job *job, json_t *req)
{
	char cap[16];

	if (req == NULL)
		return;
	json_object_set_new(req, "gpu_share",
	    job->spec.gpu_milli > 0 ? json_real(job->spec.gpu_milli / 1000.0)
	                            : json_null());
	json_object_set_new(req, "min_gpu_mem_mib",
	    json_integer(job->spec.min_gpu_mem_mib));
	gp_capability_format(job->spec.min_capability, cap, sizeof(cap));
	json_object_set_new(req, "compute_capability",
	    job->spec.min_capability > 0 ? json_string(cap) : json_null());
	json_object_set_new(req, "nodes", json_integer(job->nparts));
}

/*
 * Part p's overlay endpoint into buf: its node's address (what it said or
 * else what the coordinator saw) and its slot's UDP port. 0, or -1 when
 * the node is unknown or has registered no overlay (yet: after a restart,
 * until its agent registers again).
 */
static int
part_endpoint(const struct job_part *p, char *buf, size_t len)
{
	const struct node *n = state_node(p->node_id);

	if (n == NULL || n->overlay_port <= 0 || n->addr[0] == '\0' ||
	    p->ov_slot <= 0)
		return -1;
	snprintf(buf, len, "%s:%d", n->addr, n->overlay_port + p->ov_slot - 1);
	return 0;
}

void
live_job_json(const struct job *job, json_t *o)
{
	json_t *parts;
	int k, i;

	if (o == NULL)
		return;
	parts = json_array();
	for (k = 0; k < job->nparts && job->state == JOB_RUNNING; k++) {
		const struct job_part *p = &job->parts[k];
		const struct node *n = state_node(p->node_id);
		json_t *g = json_array();
		char endpoint[320];
		for (i = 0; i < p->ngpus; i++)
			json_array_append_new(g, json_integer(p->gpus[i]));
		json_t *po = json_pack("{s:i,s:s?,s:o,s:o,s:o,s:b,s:b}",
		    "part", k, "node", n != NULL ? n->name : NULL, "node_id",
		    n != NULL ? json_integer(n->id) : json_null(), "gpus", g,
		    "gpu_share",
		    p->gpu_milli > 0 && p->gpu_milli < GP_SCHED_MILLI
		        ? json_real(p->gpu_milli / 1000.0)
		        : json_null(),
		    "started", p->started_ack, "ended", p->ended);
		/*
		 * Its gang overlay as handed out (public: its key and where
		 * its agent listens), the same after a coordinator restart.
		 */
		if (po != NULL && p->ov_slot > 0 && p->ov_pub[0] != '\0')
			json_object_set_new(po, "overlay", json_pack("{s:s,s:o}",
			    "key", p->ov_pub, "endpoint",
			    part_endpoint(p, endpoint, sizeof(endpoint)) == 0
			        ? json_string(endpoint) : json_null()));
		/* What the enforcement layer measured (a fraction only). */
		if (po != NULL && atomic_load(&p->gpu_effective_milli) > 0)
			json_object_set_new(po, "gpu_use", json_pack(
			    "{s:I,s:I,s:f,s:i}", "mem_used_mib",
			    (json_int_t)atomic_load(&p->gpu_mem_used_mib),
			    "mem_limit_mib", (json_int_t)p->gpu_mem_mib,
			    "share_now",
			    atomic_load(&p->gpu_effective_milli) / 1000.0,
			    "util", (int)atomic_load(&p->gpu_util)));
		json_array_append_new(parts, po);
	}
	json_object_set_new(o, "parts", parts);
	if (job->state == JOB_QUEUED && job->wait_reason != 0 &&
	    job->wait != NULL) {
		char why[sizeof(job->wait->wait_why) + 32];
		int backoff = job->wait_reason == GP_SCHED_WAIT_BACKOFF &&
		    job->retry != NULL;
		retry_wait_words(job, job->wait->wait_why, why, sizeof(why));
		json_object_set_new(o, "wait",
		    json_pack("{s:s,s:s,s:i,s:o,s:o,s:o}", "reason",
		        live_wait_code(job->wait_reason), "why", why,
		        "position", job->queue_rank, "expected_start",
		        time_or_null(job->wait_start_ms), "next_try",
		        backoff ? time_or_null(job->retry->not_before_ms)
		                : json_null(),
		        "failed_starts",
		        job->retry != NULL ? json_integer(job->retry->failures)
		                           : json_null()));
	} else {
		json_object_set_new(o, "wait", json_null());
	}
	json_object_set_new(o, "preempted_for",
	    job->preempt_for != 0 ? json_integer(job->preempt_for)
	                          : json_null());
	json_object_set_new(o, "stopping",
	    job->stopping[0] != '\0' ? json_string(job->stopping)
	                             : json_null());
}

void
live_gpu_json(const struct node *node, int gpu, json_t *o)
{
	json_t *shares;
	char cap[16];
	int k, part;

	if (o == NULL)
		return;
	gp_capability_format(node->gpus[gpu].capability, cap, sizeof(cap));
	json_object_set_new(o, "compute_capability",
	    node->gpus[gpu].capability > 0 ? json_string(cap) : json_null());
	shares = json_array();
	for (k = 0; k < node->njobs && node->gpus[gpu].nshared > 0; k++) {
		const struct job *j = state_job(node->jobs[k]);
		const struct job_part *p;
		if (j == NULL || (part = job_part_on(j, node->id)) < 0)
			continue;
		p = &j->parts[part];
		if (p->gpu_milli > 0 && p->gpu_milli < GP_SCHED_MILLI &&
		    p->ngpus == 1 && p->gpus[0] == gpu)
			json_array_append_new(shares,
			    json_pack("{s:I,s:f,s:I}", "job", (json_int_t)j->id,
			        "share", p->gpu_milli / 1000.0, "mem_mib",
			        (json_int_t)p->gpu_mem_mib));
	}
	json_object_set_new(o, "shares", shares);
}

/*
 * Where each part's node is reached (its --advertise-addr, "" when it
 * gave none): the agents route the parts' job networks over these
 * (docs/agent.md, "Gangs").
 */
static json_t *
part_addrs(const struct job *job)
{
	json_t *a = json_array();
	int k;

	for (k = 0; k < job->nparts; k++) {
		const struct node *n = state_node(job->parts[k].node_id);

		json_array_append_new(a, json_string(n != NULL ? n->addr : ""));
	}
	return a;
}

/*
 * 1 when job's gang goes through an overlay: every part's node joins one
 * (register's "overlay") with an IPv4 address, and one of them needs it
 * (gave no --advertise-addr, or asked for it always). Otherwise the parts
 * are linked directly (docs/agent.md, "Gangs behind NATs").
 */
static int
gang_overlay_needed(const struct job *job)
{
	int k, needed = 0;

	if (job->nparts <= 1)
		return 0;
	for (k = 0; k < job->nparts; k++) {
		const struct node *n = state_node(job->parts[k].node_id);

		/* (an IPv6 address is not an overlay endpoint yet) */
		if (n == NULL || n->overlay_port <= 0 || n->addr[0] == '\0' ||
		    strchr(n->addr, ':') != NULL)
			return 0;
		needed |= n->overlay_needed;
	}
	return needed;
}

/*
 * The lowest port slot of node n (0 .. overlay_ports - 1) that no other
 * overlay gang part on it holds (its jobs' parts' ov_slot), or -1.
 */
static int
overlay_slot(const struct node *n, const struct job *job, int part)
{
	uint8_t used[GP_OVERLAY_SLOTS_MAX];
	int i, k;

	memset(used, 0, sizeof(used));
	for (i = 0; i < n->njobs; i++) {
		const struct job *j = state_job(n->jobs[i]);

		for (k = 0; j != NULL && k < j->nparts; k++)
			if (j->parts[k].node_id == n->id && !j->parts[k].ended &&
			    j->parts[k].ov_slot > 0 && (j != job || k != part))
				used[j->parts[k].ov_slot - 1] = 1;
	}
	for (i = 0; i < n->overlay_ports && i < GP_OVERLAY_SLOTS_MAX; i++)
		if (!used[i])
			return i;
	return -1;
}

void
live_overlay_forget(struct job *job, int part)
{
	struct job_part *p = &job->parts[part];

	sodium_memzero(p->ov_priv, sizeof(p->ov_priv));
	sodium_memzero(p->ov_pub, sizeof(p->ov_pub));
	p->ov_slot = 0;
}

void
live_overlay_started(struct job *job, int part)
{
	/*
	 * Its assignment is never sent again (a part its agent stops
	 * listing is lost, not delivered anew), so its private key is of
	 * no more use here: the agent's wireguard-go holds it.
	 */
	sodium_memzero(job->parts[part].ov_priv,
	    sizeof(job->parts[part].ov_priv));
}

void
live_overlay_loaded(const struct job *job)
{
	int k, kept = 0;

	for (k = 0; k < job->nparts; k++)
		kept += !job->parts[k].ended && job->parts[k].ov_slot > 0;
	if (kept > 0)
		gp_info("gang overlay kept job=%lld attempt=%d parts=%d",
		    (long long)job->id, job->attempts, kept);
}

void
live_overlay_keys(struct job *job)
{
	int k;

	for (k = 0; k < job->nparts; k++)
		live_overlay_forget(job, k);
	if (!gang_overlay_needed(job))
		return;
	for (k = 0; k < job->nparts; k++) {
		struct job_part *p = &job->parts[k];
		const struct node *n = state_node(p->node_id);
		int slot = overlay_slot(n, job, k);

		if (slot < 0 || gp_wg_keypair(p->ov_priv, p->ov_pub) != 0) {
			gp_warn("gang overlay: job=%lld part=%d on node=%s: %s: "
			    "the gang goes without one", (long long)job->id, k,
			    n->name, slot < 0 ? "all its overlay ports are in "
			    "use" : "cannot make a key pair");
			for (k = 0; k < job->nparts; k++)
				live_overlay_forget(job, k);
			return;
		}
		p->ov_slot = slot + 1;
	}
	gp_info("gang overlay keys made job=%lld attempt=%d parts=%d",
	    (long long)job->id, job->attempts, job->nparts);
}

/*
 * The gang's overlay for part: each part's public key and endpoint. NULL
 * when the gang has none, or its keys are gone.
 */
static json_t *
part_overlay(const struct job *job)
{
	json_t *a;
	char endpoint[320];
	int k;

	if (!gang_overlay_needed(job))
		return NULL;
	a = json_array();
	for (k = 0; k < job->nparts; k++) {
		const struct job_part *p = &job->parts[k];

		if (p->ov_pub[0] == '\0' ||
		    part_endpoint(p, endpoint, sizeof(endpoint)) != 0) {
			json_decref(a);
			return NULL;
		}
		json_array_append_new(a, json_pack("{s:s,s:s}", "key",
		    p->ov_pub, "endpoint", endpoint));
	}
	return a;
}

/*
 * gang.overlay_relay: the coordinator's gang relay (gang_relay.h), its
 * UDP port and this part's own relay key (this part's agent alone, as
 * its private key), when the relay runs.
 */
static void
relay_json(const struct job *job, int part, json_t *gang)
{
	uint8_t key[GP_RELAY_KEY];
	char b64[GP_RELAY_KEY_B64];

	if (gang_relay_part_key(job->id, (uint32_t)job->attempts, part,
	    key) != 0)
		return;
	gp_relay_key_b64(key, b64);
	json_object_set_new(gang, "overlay_relay", json_pack("{s:i,s:s}",
	    "port", gang_relay_port(), "key", b64));
	sodium_memzero(key, sizeof(key));
	sodium_memzero(b64, sizeof(b64));
}

void
live_assignment_json(const struct job *job, int part, json_t *o)
{
	const struct job_part *p = &job->parts[part];
	const struct node *n0;

	if (o == NULL)
		return;
	if (p->gpu_milli > 0 && p->gpu_milli < GP_SCHED_MILLI) {
		json_object_set_new(o, "gpu_milli", json_integer(p->gpu_milli));
		json_object_set_new(o, "gpu_mem_mib",
		    json_integer(p->gpu_mem_mib));
	}
	if (job->nparts <= 1)
		return;
	n0 = state_node(job->parts[0].node_id);
	json_object_set_new(o, "gang",
	    json_pack("{s:i,s:i,s:i,s:s,s:i,s:o}", "part", part, "parts",
	        job->nparts, "gpus_per_node", job->spec.gpus, "master_addr",
	        n0 != NULL && n0->addr[0] != '\0' ? n0->addr : "127.0.0.1",
	        "master_port", job->master_port, "addrs", part_addrs(job)));
	{
		json_t *overlay = part_overlay(job);

		/*
		 * Its own private key: in its assignment alone. A part
		 * whose key is wiped (started, or loaded after a restart:
		 * never in the store) is never assigned again; were it,
		 * an overlay without its key would be refused by its agent.
		 */
		if (overlay != NULL && p->ov_priv[0] == '\0') {
			gp_warn("gang overlay: job=%lld attempt=%d part=%d has "
			    "no private key here: sent without the overlay",
			    (long long)job->id, job->attempts, part);
			json_decref(overlay);
			overlay = NULL;
		}
		if (overlay != NULL) {
			json_object_set_new(json_object_get(o, "gang"),
			    "overlay", overlay);
			json_object_set_new(json_object_get(o, "gang"),
			    "overlay_private_key", json_string(p->ov_priv));
			relay_json(job, part, json_object_get(o, "gang"));
		}
	}
}

static int
cmp_rank(const void *a, const void *b)
{
	const struct job *x = *(const struct job *const *)a;
	const struct job *y = *(const struct job *const *)b;

	if (x->queue_rank != y->queue_rank) {
		/* Not ranked yet (no pass since it came): last. */
		if (x->queue_rank == 0 || y->queue_rank == 0)
			return x->queue_rank == 0 ? 1 : -1;
		return x->queue_rank < y->queue_rank ? -1 : 1;
	}
	return x->id < y->id ? -1 : x->id > y->id;
}

int
live_queue_text(const struct token_entry *who, struct gp_buf *out)
{
	const struct job **v, *qj;
	size_t n = 0, i, listed = 0;
	int64_t head = 0, c;
	char *t;
	int failed = 0;

	/*
	 * Each job's entry is dumped as text at once: as jansson values a
	 * queue of 100,000 took hundreds of MB for a moment.
	 */
	v = calloc((size_t)state_queue_places() + 1, sizeof(*v));
	if (v == NULL || gp_buf_append(out, "{\"jobs\":[", 9) != 0) {
		free(v);
		return GP_ENOMEM;
	}
	c = 0;
	while ((qj = state_queued_next(&c)) != NULL)
		v[n++] = qj;
	qsort(v, n, sizeof(*v), cmp_rank);
	for (i = 0; i < n && !failed; i++) {
		const struct job *j = v[i];
		char cap[16], why[sizeof(j->wait->wait_why) + 32];
		json_t *o;
		if (j->wait_start_ms > 0 && head == 0)
			head = j->id;
		if (!job_visible_to(j, who))
			continue;
		gp_capability_format(j->spec.min_capability, cap, sizeof(cap));
		if (j->wait_reason != 0 && j->wait != NULL)
			retry_wait_words(j, j->wait->wait_why, why,
			    sizeof(why));
		o = json_pack("{s:I,s:i,s:s,s:s,s:s,s:s,s:s,s:o,s:i,s:i,s:o,"
		              "s:o}",
		    "id", (json_int_t)j->id, "position", (int)i + 1, "name",
		    j->spec.name, "user", j->user, "group",
		    ledger_group_name(&ledger, j->group_id), "reason",
		    j->wait_reason != 0 ? live_wait_code(j->wait_reason)
		                        : "pending",
		    "why",
		    j->wait_reason != 0 && j->wait != NULL
		        ? why
		        : "not looked at by the scheduler yet",
		    "expected_start", time_or_null(j->wait_start_ms), "gpus",
		    j->spec.gpus, "nodes", j->nparts, "gpu_share",
		    j->spec.gpu_milli > 0 ? json_real(j->spec.gpu_milli / 1000.0)
		                          : json_null(),
		    "submitted_at", time_or_null(j->submitted_ms));
		t = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (t == NULL ||
		    (listed++ > 0 && gp_buf_append(out, ",", 1) != 0) ||
		    gp_buf_append(out, t, strlen(t)) != 0)
			failed = 1;
		free(t);
	}
	free(v);
	if (failed || gp_buf_printf(out, "],\"queued\":%zu,\"head\":", n) != 0 ||
	    (head != 0 ? gp_buf_printf(out, "%lld}", (long long)head)
	               : gp_buf_append(out, "null}", 5)) != 0)
		return GP_ENOMEM;
	return 0;
}

/* Register: nodes may hold more now (can_ever_fit's cache). */
void
live_nodes_registered(void)
{
	nodes_gen++;
}

void
live_fini(void)
{
	if (eng != NULL)
		gp_sched_engine_free(eng);
	eng = NULL;
	eng_failed = 0;
	ndirty = 0;
	prices_gen_seen = 0;
	mix_built_mono = 0;
	deep_pass_mono = 0;
	if (ucount != NULL)
		memset(ucount, 0, capucount * sizeof(*ucount));
	if (uqueued != NULL)
		memset(uqueued, 0, capuqueued * sizeof(*uqueued));
	nusers_queued = 0;
	uqueued_lost = 0;
	free(users);
	users = NULL;
	users_cap = nusers_known = 0;
	if (ustamp != NULL)
		memset(ustamp, 0, capustamp * sizeof(*ustamp));
	nacounts = 0;
	limit_array = 0;
	limit_left = 0;
	nodes_gen++; /* the hardware view is rebuilt */
	nfit = 0;
}
