/*
 * campus.c: the campus protocol of `gpupool sim` (docs/scheduling.md).
 * Labs own nodes; each lab's owner uses their own GPUs by a daily and
 * weekly pattern drawn from the seed (working hours, deadlines, a
 * semester break), as the agent's owner presence sees them: the GPUs the
 * owner uses are not lent, and a pool job on one is stopped and moved.
 * Pool jobs of every lab (shapes from the Alibaba pods, run times from
 * Philly's) run through the scheduler's engine (src/coord/sched.c, the
 * live coordinator's) on what is idle; a move costs what gpupool's
 * mechanisms cost (the checkpoint signal and grace, the upload and the
 * download at the rates bench/RESULTS.md measured, the work since the
 * last checkpoint for a job that could not save in time); interactive
 * sessions start only in gaps the owner leaves long enough. The same
 * demand on each lab alone, on its own GPUs, is the baseline.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "sim/sim.h"
#include "util.h"

#define DAY  86400
#define WEEK (7 * DAY)
#define STEP 30 /* seconds per tick */

static uint64_t
mix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double
unit(uint64_t *s)
{
	return (double)(mix64(s) >> 11) / 9007199254740992.0;
}

/* ---- owners ---- */

static const char *const pattern_names[GP_CAMPUS_NPATTERNS] = {"office",
    "deadline", "semester", "mixed"};

int
gp_campus_pattern_parse(const char *name)
{
	int i;

	for (i = 0; i < GP_CAMPUS_NPATTERNS; i++)
		if (strcmp(name, pattern_names[i]) == 0)
			return i;
	return -1;
}

const char *
gp_campus_pattern_name(int pattern)
{
	return pattern >= 0 && pattern < GP_CAMPUS_NPATTERNS
	    ? pattern_names[pattern]
	    : "?";
}

void
gp_campus_owner_draw(uint64_t seed, int lab, int pattern, int64_t horizon_s,
    struct gp_campus_owner *o)
{
	uint64_t s = seed * 0x2545f4914f6cdd1dULL + (uint64_t)lab * 7919 + 1;
	int64_t d;

	memset(o, 0, sizeof(*o));
	if (pattern == GP_CAMPUS_MIXED)
		pattern = (int)(unit(&s) * 3);
	o->pattern = pattern;
	/* Working hours: from 8:00 to 10:00, for 8 to 10 hours. */
	o->start_s = 8 * 3600 + (int)(unit(&s) * 7200);
	o->end_s = o->start_s + 8 * 3600 + (int)(unit(&s) * 7200);
	o->share = 0.25 + 0.5 * unit(&s);
	o->saturday = unit(&s) < 0.2;
	if (pattern == GP_CAMPUS_DEADLINE) {
		/* The first in the first three weeks, then every 2 to 4. */
		d = (int64_t)(5 * DAY + unit(&s) * 16 * DAY);
		while (d < horizon_s + 3 * DAY &&
		    o->ndeadlines < GP_CAMPUS_DEADLINES_MAX) {
			o->deadline[o->ndeadlines++] = d;
			d += (int64_t)(14 * DAY + unit(&s) * 14 * DAY);
		}
	}
	if (pattern == GP_CAMPUS_SEMESTER) {
		/* A break of 7 to 10 days from the middle of the horizon. */
		o->break_from = horizon_s / 2 + (int64_t)(unit(&s) * 4 * DAY);
		o->break_to =
		    o->break_from + 7 * DAY + (int64_t)(unit(&s) * 3 * DAY);
	}
}

int
gp_campus_owner_gpus(const struct gp_campus_owner *o, int64_t t, int ngpus)
{
	int64_t day = (t / DAY) % 7, sec = t % DAY;
	int i, k;

	if (t < 0 || ngpus <= 0)
		return 0;
	if (o->pattern == GP_CAMPUS_SEMESTER && t >= o->break_from &&
	    t < o->break_to)
		return 0;
	for (i = 0; i < o->ndeadlines; i++)
		if (t >= o->deadline[i] - 3 * DAY && t < o->deadline[i])
			return ngpus;
	if (!(day < 5 || (day == 5 && o->saturday)))
		return 0;
	if (sec < o->start_s || sec >= o->end_s)
		return 0;
	k = (int)ceil(o->share * ngpus - 1e-9);
	return k < ngpus ? k : ngpus;
}

/* ---- the cost of a move ---- */

void
gp_campus_costs_default(struct gp_campus_costs *c)
{
	c->grace_s = 30;           /* checkpoint-grace's default */
	c->write_mb_s = 183;       /* dd ... conv=fsync on the dev VM */
	c->upload_mb_s = 288.1;    /* 1 GiB upload, default --conn-memory */
	c->download_mb_s = 747.7;  /* 1 GiB download, median */
	c->ckpt_mb_per_gpu = 2048; /* weights and optimizer state */
	c->every_s = 600;          /* --checkpoint-every 10m */
}

void
gp_campus_move_cost(const struct gp_campus_costs *c, int gpus, int checkpoints,
    double run_s, struct gp_campus_move *m)
{
	double mb = c->ckpt_mb_per_gpu * (gpus > 0 ? gpus : 1), write_s,
	       periodic;

	memset(m, 0, sizeof(*m));
	if (run_s < 0)
		run_s = 0;
	if (!checkpoints) {
		/* It ignores the signal: killed after the grace. */
		m->outcome = GP_CAMPUS_RESTARTED;
		m->stop_s = c->grace_s;
		m->lost_s = run_s;
		return;
	}
	write_s = mb / c->write_mb_s;
	if (write_s <= c->grace_s) {
		m->outcome = GP_CAMPUS_SAVED;
		m->stop_s = write_s + mb / c->upload_mb_s;
		m->start_s = mb / c->download_mb_s;
		return;
	}
	/* Killed at the grace: back to the last upload while it ran. */
	periodic = c->every_s > 0 ? floor(run_s / c->every_s) * c->every_s : 0;
	m->stop_s = c->grace_s;
	m->lost_s = run_s - periodic;
	if (periodic > 0) {
		m->outcome = GP_CAMPUS_PARTIAL;
		m->start_s = mb / c->download_mb_s;
	} else {
		m->outcome = GP_CAMPUS_RESTARTED;
	}
}

double
gp_sim_jain(const double *x, size_t n)
{
	double sum = 0, sq = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		sum += x[i];
		sq += x[i] * x[i];
	}
	return n > 0 && sq > 0 ? sum * sum / ((double)n * sq) : 1;
}

/* ---- the world: nodes, labs, owners, jobs ---- */

enum {
	J_FUTURE,
	J_QUEUED,
	J_RUNNING,
	J_STOPPING,
	J_DONE
};

struct cjob {
	struct gp_sched_job sj;
	int lab; /* 0-based */
	int interactive, checkpoints;
	double gpus; /* GPUs it holds: a share counts its part */
	int64_t arrive;
	double work, done, saved; /* seconds of run time */
	int64_t ready, run_from, started;
	double restore_s; /* download before it runs again */
	int state;
	int64_t node;
	int gpu[GP_SCHED_GPUS_MAX], ngpu;
};

struct world {
	const struct gp_campus_opts *o;
	struct gp_sched_node *nodes;
	struct gp_sched_gpu *gpus;
	size_t nnodes;
	int64_t ngpus;
	int *node_lab;
	int lab_gpus[GP_CAMPUS_LABS_MAX];
	struct gp_campus_owner owner[GP_CAMPUS_LABS_MAX];
	struct cjob *jobs;
	size_t njobs;
	int64_t horizon;
};

static int
cmp_arrive(const void *a, const void *b)
{
	const struct cjob *x = a, *y = b;

	return x->arrive < y->arrive ? -1 : x->arrive > y->arrive;
}

/* A run time from Philly's list, in [lo, hi] (tries, then lo). */
static double
draw_runtime(const struct gp_trace *t, uint64_t *s, double lo, double hi)
{
	int i;

	for (i = 0; i < 64 && t->nruntimes > 0; i++) {
		double r = (double)t->runtimes[mix64(s) % t->nruntimes];
		if (r >= lo && r <= hi)
			return r;
	}
	return lo;
}

/* A pod that fits some node of the campus when empty; NULL: none. */
static const struct gp_trace_pod *
draw_pod(const struct gp_trace *t, const struct world *w, uint64_t *s,
    int one_gpu)
{
	size_t i, k;
	int tries;

	for (tries = 0; tries < 256; tries++) {
		const struct gp_trace_pod *p = &t->pods[mix64(s) % t->npods];
		if (p->num_gpu <= 0 || (one_gpu && p->num_gpu != 1))
			continue;
		for (i = 0; i < w->nnodes; i++) {
			const struct gp_sched_node *n = &w->nodes[i];
			if (n->ngpus >= p->num_gpu &&
			    n->cpu_milli >= p->cpu_milli &&
			    n->mem_mib >= p->mem_mib)
				break;
		}
		k = i;
		if (k < w->nnodes)
			return p;
	}
	return NULL;
}

static void
job_from_pod(const struct gp_trace_pod *p, struct cjob *j)
{
	j->sj.gpus = p->num_gpu;
	if (p->num_gpu == 1 && p->gpu_milli > 0 && p->gpu_milli < 1000) {
		j->sj.shared = 1;
		j->sj.gpu_milli = p->gpu_milli;
		j->gpus = (double)p->gpu_milli / 1000.0;
	} else {
		j->gpus = p->num_gpu;
	}
	j->sj.cpu_milli = p->cpu_milli;
	j->sj.mem_mib = p->mem_mib;
}

/* The campus: nodes, owners and the demand, drawn from the seed. */
static int
world_make(const struct gp_trace *t, const struct gp_campus_opts *o,
    struct world *w)
{
	uint64_t s = o->seed ^ 0x6a09e667f3bcc909ULL;
	double weight[GP_CAMPUS_LABS_MAX], wsum = 0, mean_gs = 0, want, x;
	size_t *gpu_nodes = NULL, ngn = 0, i, cap;
	int64_t g0 = 0;
	int lab, g, k;

	memset(w, 0, sizeof(*w));
	w->o = o;
	w->horizon = (int64_t)o->days * DAY;
	w->nnodes = (size_t)o->labs * (size_t)o->lab_nodes;
	gpu_nodes = calloc(t->nnodes + 1, sizeof(*gpu_nodes));
	w->nodes = calloc(w->nnodes + 1, sizeof(*w->nodes));
	w->gpus = calloc(w->nnodes * GP_SCHED_GPUS_MAX + 1, sizeof(*w->gpus));
	w->node_lab = calloc(w->nnodes + 1, sizeof(int));
	if (gpu_nodes == NULL || w->nodes == NULL || w->gpus == NULL ||
	    w->node_lab == NULL)
		goto nomem;
	for (i = 0; i < t->nnodes; i++)
		if (t->nodes[i].gpus > 0)
			gpu_nodes[ngn++] = i;
	if (ngn == 0 || t->npods == 0) {
		free(gpu_nodes);
		return GP_EINVAL;
	}
	/* Nodes drawn from the trace's, dealt to the labs in turn. */
	for (i = 0; i < w->nnodes; i++) {
		const struct gp_trace_node *tn =
		    &t->nodes[gpu_nodes[mix64(&s) % ngn]];
		struct gp_sched_node *n = &w->nodes[i];
		n->id = (int64_t)i + 1;
		n->up = 1;
		n->cpu_milli = tn->cpu_milli;
		n->mem_mib = tn->mem_mib;
		n->ngpus = tn->gpus;
		n->gpus = &w->gpus[g0];
		lab = (int)(i / (size_t)o->lab_nodes);
		n->group = lab + 1;
		w->node_lab[i] = lab;
		w->lab_gpus[lab] += tn->gpus;
		for (g = 0; g < tn->gpus; g++) {
			n->gpus[g].index = g;
			n->gpus[g].model =
			    NULL; /* a campus: any model will do */
			n->gpus[g].mem_mib = gp_trace_model_mem(tn->model);
		}
		g0 += tn->gpus;
	}
	w->ngpus = g0;
	free(gpu_nodes);
	for (lab = 0; lab < o->labs; lab++) {
		gp_campus_owner_draw(o->seed, lab, o->pattern, w->horizon,
		    &w->owner[lab]);
		/* Some labs ask much more than others: 1 / U(0.15, 1.15). */
		weight[lab] = 1.0 / (0.15 + unit(&s));
		wsum += weight[lab];
	}
	/* The mean GPU-seconds of a job, to reach the load asked for. */
	{
		uint64_t s2 = s;
		for (k = 0; k < 4000; k++) {
			const struct gp_trace_pod *p = draw_pod(t, w, &s2, 0);
			double len = unit(&s2) < o->interactive
			    ? draw_runtime(t, &s2, 300, 7200)
			    : draw_runtime(t, &s2, 60, 3.0 * DAY);
			if (p != NULL)
				mean_gs += len *
				    (p->num_gpu == 1 && p->gpu_milli < 1000
				            ? p->gpu_milli / 1000.0
				            : p->num_gpu);
		}
		mean_gs /= 4000;
	}
	want = o->load * (double)w->ngpus * (double)w->horizon;
	cap = mean_gs > 0 ? (size_t)(want / mean_gs * 1.5) + 16 : 16;
	if (cap > 2000000)
		cap = 2000000;
	w->jobs = calloc(cap, sizeof(*w->jobs));
	if (w->jobs == NULL)
		goto nomem;
	for (x = 0; x < want && w->njobs < cap;) {
		struct cjob *j = &w->jobs[w->njobs];
		const struct gp_trace_pod *p;
		double r = unit(&s) * wsum;
		int64_t at;
		for (lab = 0; lab < o->labs - 1 && r >= weight[lab]; lab++)
			r -= weight[lab];
		j->interactive = unit(&s) < o->interactive;
		if ((p = draw_pod(t, w, &s, j->interactive)) == NULL)
			break;
		job_from_pod(p, j);
		/* Submissions: more by day on weekdays than at night. */
		do {
			at = (int64_t)(unit(&s) * (double)w->horizon);
		} while (!(((at / DAY) % 7 < 5 && at % DAY >= 8 * 3600 &&
		               at % DAY < 20 * 3600) ||
		    unit(&s) < 0.4));
		j->arrive = at;
		j->lab = lab;
		j->work = j->interactive ? draw_runtime(t, &s, 300, 7200)
		                         : draw_runtime(t, &s, 60, 3.0 * DAY);
		j->checkpoints = !j->interactive && unit(&s) < o->ckpt_share;
		j->sj.group = lab + 1;
		j->sj.user = lab + 1;
		if (j->interactive)
			j->sj.time_limit_s = (int64_t)j->work;
		x += j->work * j->gpus;
		w->njobs++;
	}
	qsort(w->jobs, w->njobs, sizeof(*w->jobs), cmp_arrive);
	for (i = 0; i < w->njobs; i++)
		w->jobs[i].sj.id = (int64_t)i + 1;
	return 0;
nomem:
	free(gpu_nodes);
	return GP_ENOMEM;
}

static void
world_free(struct world *w)
{
	free(w->nodes);
	free(w->gpus);
	free(w->node_lab);
	free(w->jobs);
	memset(w, 0, sizeof(*w));
}

/* ---- one run: the pooled campus, or one lab alone ---- */

struct run {
	struct world *w;
	int only_lab; /* -1: every lab */
	struct gp_sched_engine *e;
	struct gp_sched_node *nodes; /* this run's, with their own GPUs */
	struct gp_sched_gpu *gpus;
	size_t nnodes;
	int *owned;       /* per node: GPUs the owner uses now */
	int64_t *gap_end; /* per node: when the owner next takes more */
	int64_t now;
	size_t *running, nrunning;
	size_t *stopping, nstopping; /* being saved, requeued when ready */
	double owner_gs, pool_gs, lost_gs;
	struct gp_campus_run *out;
};

/* How many of node i's GPUs its lab's owner uses at t. */
static int
owner_on_node(const struct run *r, size_t i, int64_t t)
{
	const struct world *w = r->w;
	int64_t id = r->nodes[i].id;
	int lab = w->node_lab[id - 1];
	int k = gp_campus_owner_gpus(&w->owner[lab], t, w->lab_gpus[lab]);
	size_t m;

	/* The lab's nodes in order, each filled before the next. */
	for (m = 0; m < w->nnodes && k > 0; m++) {
		if (w->node_lab[m] != lab)
			continue;
		if ((int64_t)m + 1 == id)
			return k < w->nodes[m].ngpus ? k : w->nodes[m].ngpus;
		k -= w->nodes[m].ngpus;
	}
	return 0;
}

/* When the owner next takes more of node i's GPUs than at t (24 h at
 * most): a session shorter than that gap is not disturbed. */
static int64_t
next_take(const struct run *r, size_t i, int64_t t)
{
	int now = owner_on_node(r, i, t);
	int64_t u;

	for (u = t + 300; u < t + DAY; u += 300)
		if (owner_on_node(r, i, u) > now)
			return u;
	return t + DAY;
}

static size_t
node_index(const struct run *r, int64_t id)
{
	size_t i;

	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i].id == id)
			return i;
	return r->nnodes;
}

/* The owner's predictable schedule, as a `window` would tell: a session
 * goes only where the gap lasts as long as it does. */
static int
accepts(void *arg, const struct gp_sched_node *node,
    const struct gp_sched_job *job)
{
	struct run *r = arg;
	const struct cjob *j = &r->w->jobs[job->id - 1];
	size_t i;

	if (!j->interactive)
		return 1;
	if ((i = node_index(r, node->id)) == r->nnodes)
		return 0;
	if (r->gap_end[i] <= r->now) {
		r->gap_end[i] = next_take(r, i, r->now);
	}
	return (double)(r->gap_end[i] - r->now) >= j->work - j->done;
}

static void
drop_running(struct run *r, size_t k)
{
	size_t i;

	for (i = 0; i < r->nrunning; i++)
		if (r->running[i] == k) {
			r->running[i] = r->running[--r->nrunning];
			return;
		}
}

/* Stops job k (the owner came back, or the lab's own job preempts it). */
static void
stop_job(struct run *r, size_t k, int by_owner, int engine_has_it)
{
	struct cjob *j = &r->w->jobs[k];
	const struct gp_campus_costs *c = &r->w->o->costs;
	struct gp_campus_move m;

	if (engine_has_it)
		gp_sched_engine_end(r->e, j->sj.id);
	drop_running(r, k);
	gp_campus_move_cost(c, j->sj.shared ? 1 : j->sj.gpus, j->checkpoints,
	    j->done, &m);
	r->out->migrations++;
	if (by_owner)
		r->out->by_owner++;
	else
		r->out->by_lab++;
	if (m.outcome == GP_CAMPUS_SAVED)
		r->out->saved++;
	else if (m.outcome == GP_CAMPUS_PARTIAL)
		r->out->partial++;
	else
		r->out->restarted++;
	r->lost_gs += m.lost_s * j->gpus;
	j->done -= m.lost_s;
	if (j->done < 0)
		j->done = 0;
	j->saved = j->done;
	j->restore_s = j->done > 0 ? m.start_s : 0;
	j->ready = r->now + (int64_t)ceil(m.stop_s);
	j->state = J_STOPPING;
	j->node = 0;
	r->stopping[r->nstopping++] = k;
}

/* Marks what the owners use on the run's nodes now; stops what is on it. */
static int
owners_update(struct run *r, int *changed)
{
	size_t i, q;
	int g, k, rc;

	for (i = 0; i < r->nnodes; i++) {
		struct gp_sched_node *n = &r->nodes[i];
		k = owner_on_node(r, i, r->now);
		if (k == r->owned[i])
			continue;
		if (k > r->owned[i]) {
			/* Jobs on the GPUs the owner takes move. */
			for (q = 0; q < r->nrunning;) {
				struct cjob *j = &r->w->jobs[r->running[q]];
				int hit = 0, a;
				for (a = 0; a < j->ngpu && j->node == n->id;
				     a++)
					hit |= j->gpu[a] < k;
				if (hit)
					stop_job(r, r->running[q], 1, 1);
				else
					q++;
			}
		}
		for (g = 0; g < n->ngpus; g++)
			n->gpus[g].job_id = g < k ? -1 : 0;
		r->owned[i] = k;
		r->gap_end[i] = 0;
		if ((rc = gp_sched_engine_node_set(r->e, n)) != 0)
			return rc;
		*changed = 1;
	}
	return 0;
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int
run_once(struct world *w, int only_lab, struct gp_campus_run *out, FILE *ser)
{
	const struct gp_campus_opts *o = w->o;
	struct run r;
	struct gp_sched_shape *shapes = NULL;
	struct gp_sched_mix mix;
	struct gp_sched_share shares[GP_CAMPUS_LABS_MAX];
	const struct gp_sched_job **queue = NULL;
	double held[GP_CAMPUS_LABS_MAX], asked[GP_CAMPUS_LABS_MAX],
	    done_gh[GP_CAMPUS_LABS_MAX], wsum[GP_CAMPUS_LABS_MAX],
	    *waits = NULL, ratios[GP_CAMPUS_LABS_MAX];
	int64_t wn[GP_CAMPUS_LABS_MAX];
	size_t i, k, next = 0, nshapes = 0, nwait = 0, nlabs = 0, *qlist = NULL,
	             nql = 0;
	int64_t g0 = 0;
	int rc = GP_ENOMEM, lab, changed;

	memset(&r, 0, sizeof(r));
	memset(held, 0, sizeof(held));
	memset(asked, 0, sizeof(asked));
	memset(done_gh, 0, sizeof(done_gh));
	memset(wsum, 0, sizeof(wsum));
	memset(wn, 0, sizeof(wn));
	memset(out, 0, sizeof(*out));
	r.w = w;
	r.only_lab = only_lab;
	r.out = out;
	r.nodes = calloc(w->nnodes + 1, sizeof(*r.nodes));
	r.gpus = calloc((size_t)w->ngpus + 1, sizeof(*r.gpus));
	r.owned = calloc(w->nnodes + 1, sizeof(int));
	r.gap_end = calloc(w->nnodes + 1, sizeof(int64_t));
	r.running = calloc(w->njobs + 1, sizeof(size_t));
	r.stopping = calloc(w->njobs + 1, sizeof(size_t));
	qlist = calloc(w->njobs + 1, sizeof(size_t));
	queue = calloc(w->njobs + 1, sizeof(*queue));
	shapes = calloc(w->njobs + 1, sizeof(*shapes));
	waits = calloc(w->njobs + 1, sizeof(double));
	if (r.nodes == NULL || r.gpus == NULL || r.owned == NULL ||
	    r.gap_end == NULL || r.running == NULL || r.stopping == NULL ||
	    qlist == NULL || queue == NULL || shapes == NULL || waits == NULL)
		goto out;
	for (i = 0; i < w->nnodes; i++) {
		if (only_lab >= 0 && w->node_lab[i] != only_lab)
			continue;
		r.nodes[r.nnodes] = w->nodes[i];
		r.nodes[r.nnodes].gpus = &r.gpus[g0];
		memcpy(&r.gpus[g0], w->nodes[i].gpus,
		    (size_t)w->nodes[i].ngpus * sizeof(*r.gpus));
		g0 += w->nodes[i].ngpus;
		r.nnodes++;
	}
	for (i = 0; i < w->njobs; i++) {
		struct cjob *j = &w->jobs[i];
		j->state = J_FUTURE;
		j->done = j->saved = 0;
		j->restore_s = 0;
		j->started = -1;
		j->node = 0;
		j->ngpu = 0;
		if (only_lab >= 0 && j->lab != only_lab)
			continue;
		shapes[nshapes].cpu_milli = j->sj.cpu_milli;
		shapes[nshapes].mem_mib = j->sj.mem_mib;
		shapes[nshapes].gpus = j->sj.shared ? 1 : j->sj.gpus;
		shapes[nshapes].gpu_milli =
		    j->sj.shared ? j->sj.gpu_milli : 1000;
		shapes[nshapes++].weight = 1;
	}
	mix.shapes = shapes;
	mix.nshapes = nshapes;
	for (lab = 0; lab < o->labs; lab++) {
		shares[lab].id = lab + 1;
		shares[lab].weight = 1;
		shares[lab].usage = 0;
	}
	if ((rc = gp_sched_engine_new(r.nodes, r.nnodes, o->policy, &mix,
	         o->seed, &r.e)) != 0)
		goto out;
	for (r.now = 0; r.now < w->horizon; r.now += STEP) {
		size_t nq = 0;
		int64_t owner_now = 0;
		double pool_now = 0;

		changed = 0;
		if ((rc = owners_update(&r, &changed)) != 0)
			goto out;
		/* Work done in the last tick; the jobs that are through. */
		for (k = 0; k < r.nrunning;) {
			struct cjob *j = &w->jobs[r.running[k]];
			if (r.now > j->run_from) {
				double before = j->done;
				j->done += (double)STEP;
				if (j->checkpoints && o->costs.every_s > 0 &&
				    floor(j->done / o->costs.every_s) >
				        floor(before / o->costs.every_s)) {
					j->saved =
					    floor(j->done / o->costs.every_s) *
					    o->costs.every_s;
					/* As the coordinator: the loss of
					 * preempting it runs from here. */
					gp_sched_engine_run_set(r.e, j->sj.id,
					    1, r.now * 1000, 0);
				}
			}
			if (j->done >= j->work) {
				gp_sched_engine_end(r.e, j->sj.id);
				j->state = J_DONE;
				done_gh[j->lab] += j->work * j->gpus / 3600;
				out->jobs_done++;
				out->gpu_h_done += j->work * j->gpus / 3600;
				held[j->lab] -= j->gpus;
				r.running[k] = r.running[--r.nrunning];
				changed = 1;
				continue;
			}
			k++;
		}
		/* Saved jobs back in the queue, in submission order. */
		for (k = 0; k < r.nstopping;) {
			struct cjob *j = &w->jobs[r.stopping[k]];
			size_t at;
			if (j->ready > r.now) {
				k++;
				continue;
			}
			j->state = J_QUEUED;
			held[j->lab] -= j->gpus;
			for (at = nql; at > 0 && qlist[at - 1] > r.stopping[k];
			     at--)
				qlist[at] = qlist[at - 1];
			qlist[at] = r.stopping[k];
			nql++;
			r.stopping[k] = r.stopping[--r.nstopping];
			changed = 1;
		}
		for (; next < w->njobs && w->jobs[next].arrive <= r.now;
		     next++) {
			struct cjob *j = &w->jobs[next];
			if (only_lab >= 0 && j->lab != only_lab)
				continue;
			j->state = J_QUEUED;
			out->jobs++;
			asked[j->lab] += j->work * j->gpus / 3600;
			if (j->interactive)
				out->sessions++;
			qlist[nql++] = next;
			changed = 1;
		}
		for (lab = 0; lab < o->labs; lab++)
			shares[lab].usage = shares[lab].usage *
			        pow(0.5, (double)STEP / (7.0 * DAY)) +
			    held[lab] * STEP;
		/* A pass when something changed, and every 5 minutes for
		 * sessions waiting on a gap. */
		if (nql > 0 && (changed || r.now % 300 == 0)) {
			struct gp_sched_pass p;
			struct gp_sched_result res;
			size_t keep = 0;
			for (nq = 0; nq < nql; nq++)
				queue[nq] = &w->jobs[qlist[nq]].sj;
			memset(&p, 0, sizeof(p));
			p.now_ms = r.now * 1000;
			p.queue = queue;
			p.nqueue = nq;
			p.groups = shares;
			p.ngroups = (size_t)o->labs;
			p.users = shares;
			p.nusers = (size_t)o->labs;
			p.accepts = accepts;
			p.accepts_arg = &r;
			if ((rc = gp_sched_engine_run_pass(r.e, &p, &res)) != 0)
				goto out;
			for (i = 0; i < res.npreemptions; i++) {
				k = (size_t)(res.preemptions[i].job_id - 1);
				if (w->jobs[k].state == J_RUNNING)
					stop_job(&r, k, 0, 0);
			}
			for (i = 0; i < res.nassignments; i++) {
				const struct gp_sched_assignment *a =
				    &res.assignments[i];
				struct cjob *j = &w->jobs[a->job_id - 1];
				j->state = J_RUNNING;
				j->node = a->node_id;
				j->ngpu = a->ngpus;
				memcpy(j->gpu, a->gpus,
				    (size_t)a->ngpus * sizeof(int));
				j->run_from =
				    r.now + (int64_t)ceil(j->restore_s);
				if (j->started < 0) {
					j->started = r.now;
					if (j->interactive &&
					    r.now - j->arrive <= 60)
						out->sessions_1min++;
					if (!j->interactive) {
						waits[nwait++] =
						    (double)(r.now - j->arrive);
						wsum[j->lab] +=
						    (double)(r.now - j->arrive);
						wn[j->lab]++;
					}
				}
				held[j->lab] += j->gpus;
				r.running[r.nrunning++] = (size_t)(j - w->jobs);
				/* Batch jobs may be preempted; what that loses
				 * is their GPUs x the time since they last
				 * saved (their start until they upload). */
				if (!j->interactive)
					gp_sched_engine_run_set(r.e, j->sj.id,
					    1, r.now * 1000 + 1, 0);
			}
			gp_sched_result_fini(&res);
			for (k = 0; k < nql; k++)
				if (w->jobs[qlist[k]].state == J_QUEUED)
					qlist[keep++] = qlist[k];
			nql = keep;
		}
		for (i = 0; i < r.nnodes; i++)
			owner_now += r.owned[i];
		for (k = 0; k < r.nrunning; k++)
			pool_now += w->jobs[r.running[k]].gpus;
		r.owner_gs += (double)owner_now * STEP;
		r.pool_gs += pool_now * STEP;
		if (ser != NULL && r.now % 3600 == 0)
			fprintf(ser, "%.2f,%lld,%.2f,%zu\n",
			    (double)r.now / 3600.0, (long long)owner_now,
			    pool_now, nql);
	}
	/* Batch jobs still waiting at the end waited the rest of it. */
	for (i = 0; i < next; i++) {
		struct cjob *j = &w->jobs[i];
		if ((only_lab >= 0 && j->lab != only_lab) || j->interactive ||
		    j->started >= 0)
			continue;
		waits[nwait++] = (double)(w->horizon - j->arrive);
		wsum[j->lab] += (double)(w->horizon - j->arrive);
		wn[j->lab]++;
	}
	if (g0 > 0) {
		double all = (double)g0 * (double)w->horizon;
		out->owner_pct = 100 * r.owner_gs / all;
		out->pool_pct = 100 * r.pool_gs / all;
		out->util_pct = out->owner_pct + out->pool_pct;
	}
	out->lost_gpu_h = r.lost_gs / 3600;
	if (nwait > 0) {
		double sum = 0;
		qsort(waits, nwait, sizeof(double), cmp_dbl);
		for (i = 0; i < nwait; i++)
			sum += waits[i];
		out->wait_mean_s = sum / (double)nwait;
		out->wait_p90_s = waits[(size_t)((double)(nwait - 1) * 0.9)];
	}
	for (lab = 0; lab < o->labs; lab++) {
		out->lab_wait_mean_s[lab] =
		    wn[lab] > 0 ? wsum[lab] / (double)wn[lab] : 0;
		out->lab_done_ratio[lab] =
		    asked[lab] > 0 ? done_gh[lab] / asked[lab] : 0;
		if (asked[lab] > 0)
			ratios[nlabs++] = out->lab_done_ratio[lab];
	}
	out->jain = gp_sim_jain(ratios, nlabs);
	rc = 0;
out:
	gp_sched_engine_free(r.e);
	free(r.nodes);
	free(r.gpus);
	free(r.owned);
	free(r.gap_end);
	free(r.running);
	free(r.stopping);
	free(qlist);
	free(queue);
	free(shapes);
	free(waits);
	return rc;
}

/* Adds one lab's lone run into the sum of all labs alone. */
static void
add_alone(struct gp_campus_run *sum, const struct gp_campus_run *one, int lab,
    double gpus_share)
{
	sum->util_pct += one->util_pct * gpus_share;
	sum->owner_pct += one->owner_pct * gpus_share;
	sum->pool_pct += one->pool_pct * gpus_share;
	sum->jobs += one->jobs;
	sum->jobs_done += one->jobs_done;
	sum->gpu_h_done += one->gpu_h_done;
	sum->sessions += one->sessions;
	sum->sessions_1min += one->sessions_1min;
	sum->migrations += one->migrations;
	sum->saved += one->saved;
	sum->partial += one->partial;
	sum->restarted += one->restarted;
	sum->by_owner += one->by_owner;
	sum->by_lab += one->by_lab;
	sum->lost_gpu_h += one->lost_gpu_h;
	sum->lab_wait_mean_s[lab] = one->lab_wait_mean_s[lab];
	sum->lab_done_ratio[lab] = one->lab_done_ratio[lab];
	/* Means over jobs: weighted by the lab's jobs. */
	sum->wait_mean_s += one->wait_mean_s * (double)one->jobs;
	if (one->wait_p90_s > sum->wait_p90_s)
		sum->wait_p90_s = one->wait_p90_s; /* the worst lab's */
}

int
gp_sim_campus(const struct gp_trace *t, const struct gp_campus_opts *o,
    struct gp_campus_result *res)
{
	struct world w;
	struct gp_campus_run one;
	double ratios[GP_CAMPUS_LABS_MAX];
	int64_t wall0 = gp_mono_us();
	size_t n = 0;
	int rc, lab;

	memset(res, 0, sizeof(*res));
	if (o->labs < 1 || o->labs > GP_CAMPUS_LABS_MAX || o->lab_nodes < 1 ||
	    o->lab_nodes > 64 || o->days < 1 || o->days > 366 ||
	    !(o->load > 0) || o->load > 10 || o->pattern < 0 ||
	    o->pattern >= GP_CAMPUS_NPATTERNS)
		return GP_EINVAL;
	if ((rc = world_make(t, o, &w)) != 0)
		return rc;
	res->labs = o->labs;
	res->pattern = o->pattern;
	res->gpus = w.ngpus;
	res->nodes = (int64_t)w.nnodes;
	if ((rc = run_once(&w, -1, &res->pooled, o->series)) != 0)
		goto out;
	for (lab = 0; lab < o->labs; lab++) {
		if ((rc = run_once(&w, lab, &one, NULL)) != 0)
			goto out;
		add_alone(&res->alone, &one, lab,
		    w.ngpus > 0 ? (double)w.lab_gpus[lab] / (double)w.ngpus
		                : 0);
		if (one.jobs > 0)
			ratios[n++] = one.lab_done_ratio[lab];
	}
	if (res->alone.jobs > 0)
		res->alone.wait_mean_s /= (double)res->alone.jobs;
	res->alone.jain = gp_sim_jain(ratios, n);
	res->seconds = (double)(gp_mono_us() - wall0) / 1e6;
out:
	world_free(&w);
	return rc;
}
