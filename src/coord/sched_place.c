/*
 * sched_place.c: placing a job's parts on nodes (the scan over classes
 * of like nodes, the policy's score, gangs across several nodes) and
 * the pass's result (assignments, preemptions, wait reasons). Part of
 * the scheduler: see sched.c and sched_int.h.
 */
#include "sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "sched_int.h"
#include "util.h"

/* ---- the result ---- */

static struct gp_sched_assignment *
result_assign(struct gp_sched_engine *s)
{
	struct gp_sched_result *res = s->res;

	if (res->nassignments == s->capassign) {
		size_t cap = s->capassign ? s->capassign * 2 : 16;
		struct gp_sched_assignment *a =
		    realloc(res->assignments, cap * sizeof(*a));
		if (a == NULL)
			return NULL;
		res->assignments = a;
		s->capassign = cap;
	}
	return &res->assignments[res->nassignments++];
}

int
result_preempt(struct gp_sched_engine *s, int64_t job_id, int64_t for_job,
    int64_t node_id)
{
	struct gp_sched_result *res = s->res;

	if (res->npreemptions == s->cappreempt) {
		size_t cap = s->cappreempt ? s->cappreempt * 2 : 8;
		struct gp_sched_preemption *p =
		    realloc(res->preemptions, cap * sizeof(*p));
		if (p == NULL)
			return GP_ENOMEM;
		res->preemptions = p;
		s->cappreempt = cap;
	}
	res->preemptions[res->npreemptions].job_id = job_id;
	res->preemptions[res->npreemptions].for_job_id = for_job;
	res->preemptions[res->npreemptions++].node_id = node_id;
	return 0;
}

int
result_wait(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int reason, const char *why)
{
	struct gp_sched_result *res = s->res;
	struct gp_sched_waiting *w;

	if (res->nwaiting == s->capwait) {
		size_t cap = s->capwait ? s->capwait * 2 : 16;
		w = realloc(res->waiting, cap * sizeof(*w));
		if (w == NULL)
			return GP_ENOMEM;
		res->waiting = w;
		s->capwait = cap;
	}
	w = &res->waiting[res->nwaiting++];
	memset(w, 0, sizeof(*w));
	w->job_id = job->id;
	w->reason = reason;
	gp_strlcpy(w->why, why != NULL ? why : gp_sched_wait_name(reason),
	    sizeof(w->why));
	return 0;
}

void
gp_sched_result_fini(struct gp_sched_result *res)
{
	if (res == NULL)
		return;
	free(res->assignments);
	free(res->preemptions);
	free(res->waiting);
	memset(res, 0, sizeof(*res));
}

const char *
gp_sched_wait_name(int reason)
{
	switch (reason) {
	case GP_SCHED_WAIT_RESOURCES:
		return "no node that could hold it has room now";
	case GP_SCHED_WAIT_NEVER:
		return "no node that is up could ever hold it";
	case GP_SCHED_WAIT_SHARE:
		return "group over its share: groups with less recent usage "
		       "went first";
	case GP_SCHED_WAIT_PRIORITY:
		return "jobs ahead of it took the free GPUs";
	case GP_SCHED_WAIT_RESERVATION:
		return "behind a reservation";
	case GP_SCHED_WAIT_GANG:
		return "waiting for nodes for all of its gang's parts";
	case GP_SCHED_WAIT_HELD:
		return "held";
	case GP_SCHED_WAIT_PREEMPTING:
		return "borrowed work on its lab's GPUs is saving a checkpoint "
		       "to make room for it";
	case GP_SCHED_WAIT_BACKOFF:
		return "retrying after attempts that failed to start";
	}
	return "waiting";
}

/* ---- placing parts ---- */

/* Takes c on n for r: returns the record's index, or NONE (memory). */
static size_t
take(struct gp_sched_engine *s, struct eng_node *n, const struct part_req *r,
    const struct choice *c, int64_t end_ms, int owner)
{
	struct run_rec rec;
	int i;

	memset(&rec, 0, sizeof(rec));
	rec.job_id = r->job->id;
	rec.node = (size_t)(n - s->e.nodes);
	rec.cpu = r->cpu;
	rec.mem = r->mem;
	rec.end_ms = end_ms;
	rec.group = r->job->group;
	rec.user = r->job->user;
	/* An interactive job is never checkpointed and moved: a person
	 * is at its terminal (docs/scheduling.md). */
	rec.preemptible = !r->job->interactive;
	rec.alive = 1;
	rec.pass_no = s->pass_no;
	rec.owner = owner;
	rec.gpu_pos = -1;
	n->cpu_free -= r->cpu;
	if (n->mem_total != INT64_MAX)
		n->mem_free -= r->mem;
	if (r->shared && c->ngpus == 1) {
		struct eng_gpu *g = &n->gpus[c->pos[0]];
		rec.shared = 1;
		rec.gpu_pos = c->pos[0];
		rec.milli = r->milli;
		rec.gpu_mem = r->gpu_mem;
		g->milli_free -= r->milli;
		g->mem_free -= r->gpu_mem;
		g->nshared++;
	} else {
		for (i = 0; i < c->ngpus; i++) {
			struct eng_gpu *g = &n->gpus[c->pos[i]];
			g->holder = r->job->id;
			g->end_ms = end_ms;
			rec.whole |= 1ULL << c->pos[i];
		}
	}
	node_changed(&s->e, n);
	return run_add(s, &rec);
}

static int
cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

static int
emit_assignment(struct gp_sched_engine *s, const struct eng_node *n,
    const struct part_req *r, const struct choice *c, int part)
{
	struct gp_sched_assignment *a = result_assign(s);
	int i;

	if (a == NULL)
		return GP_ENOMEM;
	memset(a, 0, sizeof(*a));
	a->job_id = r->job->id;
	a->part = part;
	a->node_id = n->id;
	a->ngpus = c->ngpus;
	for (i = 0; i < c->ngpus; i++)
		a->gpus[i] = n->gpus[c->pos[i]].index;
	qsort(a->gpus, (size_t)a->ngpus, sizeof(a->gpus[0]), cmp_int);
	a->gpu_milli = r->shared ? r->milli : GP_SCHED_MILLI;
	a->gpu_mem_mib = r->shared ? r->gpu_mem : 0;
	return 0;
}

/* 1 when (a on na) beats (b on nb). */
static int
better(const struct choice *a, const struct eng_node *na,
    const struct choice *b, const struct eng_node *nb)
{
	if (a->score != b->score)
		return a->score < b->score;
	if (a->tie != b->tie)
		return a->tie < b->tie;
	return na->id < nb->id;
}

/*
 * Whether the part may go on n given the reservation: 1 yes, 0 no; sets
 * r->avoid_reserved when it must keep off the reserved GPUs.
 */
static int
resv_allows(struct gp_sched_engine *s, const struct eng_node *n,
    struct part_req *r, const struct scan *sc)
{
	const struct resv_node *rn;

	r->avoid_reserved = 0;
	if (!sc->use_resv || !s->resv.active || n->resv < 0)
		return 1;
	if (sc->end_ms != END_NEVER && sc->end_ms <= s->resv.start_ms)
		return 1;
	rn = &s->resv.n[n->resv];
	if (rn->extra_cpu < r->cpu)
		return 0;
	if (r->mem > 0 && rn->extra_mem != INT64_MAX && rn->extra_mem < r->mem)
		return 0;
	r->avoid_reserved = 1;
	return 1;
}

/* 1 when job's last start failures were on node id. */
static int
avoided(const struct gp_sched_job *job, int64_t id)
{
	int i;

	for (i = 0; i < job->navoid; i++)
		if (job->avoid_nodes[i] == id)
			return 1;
	return 0;
}

/* Scores r on n against the best so far. */
static void
consider(struct gp_sched_engine *s, struct eng_node *n, struct part_req *r,
    const struct scan *sc, struct choice *best, struct eng_node **best_n,
    int *room)
{
	struct engine *e = &s->e;
	struct choice c;

	if (n->gang_mark || (sc->only_group != 0 && n->group != sc->only_group))
		return;
	if (sc->avoid && avoided(r->job, n->id))
		return;
	if (!node_may_fit(e, n, r))
		return;
	if (!resv_allows(s, n, r, sc)) {
		*room = 1;
		return;
	}
	if (e->accepts != NULL && !e->accepts(e->accepts_arg, n->src, r->job))
		return;
	c.ngpus = 0;
	c.score = c.tie = 0;
	if (e->policy->score(e, n, r, &c) != 0) {
		/* Perhaps only the reserved GPUs would do. */
		if (r->avoid_reserved) {
			r->avoid_reserved = 0;
			if (e->policy->score(e, n, r, &c) == 0)
				*room = 1;
		}
		return;
	}
	*room = 1;
	if (*best_n == NULL || better(&c, n, best, *best_n)) {
		*best = c;
		*best_n = n;
	}
}

/*
 * The best node for r now, or NULL. OUT: *best (with its GPUs), *room
 * (some node fits, reservation aside). Visits the classes of like nodes
 * in buckets of free GPU share, from the least that could do; one node
 * per class unless the policy breaks ties at random or the caller checks
 * nodes one by one (accepts); stops early for a leftover-first policy.
 */
static struct eng_node *
best_node(struct gp_sched_engine *s, struct part_req *r, const struct scan *sc,
    struct choice *best, int *room)
{
	struct engine *e = &s->e;
	struct eng_node *best_n = NULL, *n;
	int64_t need = r->shared ? r->milli : (int64_t)r->gpus * GP_SCHED_MILLI;
	int b, whole, per_node = e->policy->random_ties || e->accepts != NULL ||
	                         sc->avoid;
	const struct bucket *bk;
	size_t k, i;

	*room = 0;
	/* Whole GPUs: the lists by wholly free GPUs; else by free share. */
	whole = !r->shared && r->gpus > 0;
	for (b = whole ? r->gpus : (int)(need / GP_SCHED_MILLI);
	     b < (whole ? GP_SCHED_GPUS_MAX + 1 : NBUCKETS); b++) {
		/* No node further on can leave less over. */
		if (e->policy->leftover_first && best_n != NULL &&
		    (double)((int64_t)b * GP_SCHED_MILLI - need) > best->score)
			break;
		bk = whole ? &e->wbuckets[b] : &e->buckets[b];
		for (k = 0; k < bk->n; k++) {
			const struct bucket_entry *be = &bk->v[k];
			struct node_class *c;
			if (be->cpu_free < r->cpu ||
			    (r->mem > 0 && be->mem_free < r->mem))
				continue;
			c = &e->classes[be->cls];
			if (per_node) {
				for (i = c->first; i != NONE;
				     i = e->nodes[i].cnext)
					consider(s, &e->nodes[i], r, sc, best,
					    &best_n, room);
				continue;
			}
			n = class_rep(e, c);
			if (n != NULL)
				consider(s, n, r, sc, best, &best_n, room);
		}
	}
	if (best_n == NULL)
		return NULL;
	/* The winner: its reservation rule, and its GPUs if not picked. */
	resv_allows(s, best_n, r, sc);
	if (best->ngpus < 0) {
		r->no_cache = 1;
		if (e->policy->score(e, best_n, r, best) != 0)
			best_n = NULL;
		r->no_cache = 0;
	}
	return best_n;
}

/* place_job on the nodes sc0 allows (avoided ones too unless sc0->avoid). */
static int
place_on(struct gp_sched_engine *s, const struct gp_sched_job *job,
    const struct scan *sc0, int *placed, int *room, int *nodes_fit)
{
	struct engine *e = &s->e;
	struct part_req r;
	struct choice c;
	struct eng_node *n, *used[GP_SCHED_PARTS_MAX];
	size_t recs[GP_SCHED_PARTS_MAX], nassign0 = s->res->nassignments;
	int extra[GP_SCHED_PARTS_MAX];
	struct scan sc = *sc0;
	int parts = job_parts(job), p, k, any_room = 0;

	memset(&c, 0, sizeof(c));
	*placed = *room = *nodes_fit = 0;
	if (parts > GP_SCHED_PARTS_MAX || job->gpus > GP_SCHED_GPUS_MAX)
		return 0;
	part_init(e, job, &r);
	sc.end_ms = job_end(e->now_ms, job);
	for (p = 0; p < parts; p++) {
		int rm = 0;

		n = best_node(s, &r, &sc, &c, &rm);
		any_room |= rm;
		e->decisions++;
		if (n == NULL)
			break;
		if (emit_assignment(s, n, &r, &c, p) != 0)
			return GP_ENOMEM;
		recs[p] = take(s, n, &r, &c, sc.end_ms, sc.only_group != 0);
		if (recs[p] == NONE)
			return GP_ENOMEM;
		extra[p] = r.avoid_reserved && n->resv >= 0;
		if (extra[p]) {
			s->resv.n[n->resv].extra_cpu -= r.cpu;
			if (s->resv.n[n->resv].extra_mem != INT64_MAX)
				s->resv.n[n->resv].extra_mem -= r.mem;
		}
		used[p] = n;
		n->gang_mark = 1;
	}
	*nodes_fit = p;
	*room = any_room;
	for (k = 0; k < p; k++)
		used[k]->gang_mark = 0;
	if (p == parts) {
		*placed = 1;
		return 0;
	}
	/* Not all of a gang: give back what its first parts took. */
	for (k = p; k-- > 0;) {
		run_release(s, recs[k]);
		if (k == 0)
			job_reclaim(s, job->id);
		if (extra[k]) {
			/* Its use of the spare room is given back too. */
			struct resv_node *rn = &s->resv.n[used[k]->resv];
			rn->extra_cpu += r.cpu;
			if (rn->extra_mem != INT64_MAX)
				rn->extra_mem += r.mem;
		}
	}
	s->res->nassignments = nassign0;
	return 0;
}

/*
 * Places every part of job (on distinct nodes) or none. OUT: *placed,
 * *room (some node had room for a part, reservation aside), *nodes_fit
 * (how many parts found a node). A job whose attempts failed to start on
 * some nodes lately (avoid_nodes) goes elsewhere when it can, and onto
 * those only when no other set of nodes takes it now. Returns 0 or
 * GP_ENOMEM.
 */
int
place_job(struct gp_sched_engine *s, const struct gp_sched_job *job,
    const struct scan *sc0, int *placed, int *room, int *nodes_fit)
{
	struct scan sc = *sc0;
	int rc;

	if (job->navoid > 0 && job->avoid_nodes != NULL) {
		sc.avoid = 1;
		rc = place_on(s, job, &sc, placed, room, nodes_fit);
		if (rc != 0 || *placed)
			return rc;
		sc.avoid = 0;
	}
	return place_on(s, job, &sc, placed, room, nodes_fit);
}
