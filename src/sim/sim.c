/*
 * sim.c: replays a trace through the scheduler's engine (sched.h) with a
 * virtual clock. Two modes:
 *
 *   gp_sim_fgd     the FGD paper's protocol: pods shuffled with a seed,
 *                  inflated to 1.3x the cluster's GPUs, placed one by one
 *                  (one engine pass each, "quick": no queue), nothing
 *                  departs; the unallocated GPU share when the requests
 *                  that arrived reach 100% (and 130%) of the GPUs.
 *   gp_sim_replay  arrivals at their creation time, a queue ordered by
 *                  fair share between labs with EASY backfill (each pod's
 *                  true run time as its time limit), departures; against
 *                  the same labs each on its own GPUs (static partition).
 *
 * Our shuffle and draws use splitmix64, not Go's math/rand as the FGD
 * artifact does: per-seed figures differ, means over seeds compare.
 */
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gp.h"
#include "util.h"

/*
 * CPU time of this thread, in microseconds: the scheduler's speed is
 * measured in decisions per CPU-second, which a busy machine distorts
 * less than wall time.
 */
static int64_t
cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t
splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A uniform number in [0, n). */
static size_t
below(uint64_t *s, size_t n)
{
	return (size_t)(splitmix(s) % (uint64_t)n);
}

static int
cmp_pod_name(const void *a, const void *b, void *arg)
{
	const struct gp_trace *t = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return strcmp(t->pods[x].name, t->pods[y].name);
}

/* The trace's nodes for the engine. OUT: *nodes, *gpus (caller frees). */
static int
make_nodes(const struct gp_trace *t, const int64_t *groups,
    struct gp_sched_node **nodes, struct gp_sched_gpu **gpus,
    int64_t *ngpus_out)
{
	struct gp_sched_node *sn;
	struct gp_sched_gpu *sg;
	size_t i, ng = 0;
	int g;

	for (i = 0; i < t->nnodes; i++)
		ng += (size_t)t->nodes[i].gpus;
	sn = calloc(t->nnodes + 1, sizeof(*sn));
	sg = calloc(ng + 1, sizeof(*sg));
	if (sn == NULL || sg == NULL) {
		free(sn);
		free(sg);
		return GP_ENOMEM;
	}
	ng = 0;
	for (i = 0; i < t->nnodes; i++) {
		const struct gp_trace_node *tn = &t->nodes[i];
		sn[i].id = (int64_t)i + 1;
		sn[i].up = 1;
		sn[i].cpu_milli = tn->cpu_milli;
		sn[i].mem_mib = tn->mem_mib;
		sn[i].group = groups != NULL ? groups[i] : 0;
		sn[i].ngpus = tn->gpus;
		sn[i].gpus = &sg[ng];
		for (g = 0; g < tn->gpus; g++, ng++) {
			sg[ng].index = g;
			sg[ng].model = tn->model[0] != '\0' ? tn->model : NULL;
			sg[ng].mem_mib = gp_trace_model_mem(tn->model);
		}
	}
	*nodes = sn;
	*gpus = sg;
	*ngpus_out = (int64_t)ng;
	return 0;
}

static void
pod_job(const struct gp_trace_pod *p, int64_t id, struct gp_sched_job *j)
{
	memset(j, 0, sizeof(*j));
	j->id = id;
	j->gpus = p->num_gpu;
	if (p->num_gpu == 1 && p->gpu_milli > 0 && p->gpu_milli < 1000) {
		j->shared = 1;
		j->gpu_milli = p->gpu_milli;
	}
	j->cpu_milli = p->cpu_milli;
	j->mem_mib = p->mem_mib;
	j->gpu_model = p->gpu_spec[0] != '\0' ? p->gpu_spec : NULL;
}

static int64_t
pod_gpu_milli(const struct gp_trace_pod *p)
{
	return (int64_t)p->num_gpu * p->gpu_milli;
}

/*
 * The request mix of the trace: its pods' shapes, counted. OUT: mix
 * (shapes malloc'd, caller frees mix->shapes).
 */
static int
trace_mix(const struct gp_trace *t, struct gp_sched_mix *mix)
{
	struct gp_sched_shape *sh;
	size_t i, j, n = 0;

	sh = calloc(t->npods + 1, sizeof(*sh));
	if (sh == NULL)
		return GP_ENOMEM;
	for (i = 0; i < t->npods; i++) {
		const struct gp_trace_pod *p = &t->pods[i];
		const char *model = p->gpu_spec[0] != '\0' ? p->gpu_spec : NULL;
		int milli = p->num_gpu > 0 ? p->gpu_milli : 0;
		for (j = 0; j < n; j++)
			if (sh[j].cpu_milli == p->cpu_milli &&
			    sh[j].mem_mib == p->mem_mib &&
			    sh[j].gpus == p->num_gpu &&
			    sh[j].gpu_milli == milli &&
			    (sh[j].gpu_model == model ||
			        (sh[j].gpu_model != NULL && model != NULL &&
			            strcmp(sh[j].gpu_model, model) == 0)))
				break;
		if (j == n) {
			sh[n].cpu_milli = p->cpu_milli;
			sh[n].mem_mib = p->mem_mib;
			sh[n].gpus = p->num_gpu;
			sh[n].gpu_milli = milli;
			sh[n].gpu_model = model;
			n++;
		}
		sh[j].weight += 1;
	}
	mix->shapes = sh;
	mix->nshapes = n;
	return 0;
}

/* ---- the FGD protocol ---- */

int
gp_sim_fgd(const struct gp_trace *t, const struct gp_sim_opts *opts,
    struct gp_sim_fgd_result *res)
{
	const struct gp_sched_policy *policy =
	    opts->policy != NULL ? opts->policy : gp_sched_policy_default();
	struct gp_sched_node *nodes = NULL;
	struct gp_sched_gpu *gpus = NULL;
	struct gp_sched_engine *e = NULL;
	struct gp_sched_mix mix = {NULL, 0};
	struct gp_sched_result r;
	struct gp_sched_job job;
	size_t *order = NULL, *byname = NULL, n, cap, i;
	uint64_t rng = opts->seed;
	int64_t ngpus = 0, total = 0, target, arrived = 0, alloc = 0, t0, t1,
	        pass_us = 0, wall0 = gp_mono_us();
	double sum100 = 0, sum130 = 0, near100 = 0, near130 = 0, a,
	       frag100 = -1;
	int64_t n100 = 0, n130 = 0, nn100 = 0, nn130 = 0;
	int rc = GP_ENOMEM;

	memset(res, 0, sizeof(*res));
	if (t->npods == 0 || t->nnodes == 0)
		return GP_EINVAL;
	if ((rc = make_nodes(t, NULL, &nodes, &gpus, &ngpus)) != 0)
		return rc;
	rc = GP_ENOMEM;
	if (ngpus == 0) {
		rc = GP_EINVAL;
		goto out;
	}
	/* Sorted by name, shuffled; then inflated with draws by name. */
	byname = calloc(t->npods, sizeof(*byname));
	cap = t->npods * 2 + 16;
	order = calloc(cap, sizeof(*order));
	if (byname == NULL || order == NULL)
		goto out;
	for (i = 0; i < t->npods; i++) {
		byname[i] = i;
		total += pod_gpu_milli(&t->pods[i]);
	}
	qsort_r(byname, t->npods, sizeof(*byname), cmp_pod_name, (void *)t);
	memcpy(order, byname, t->npods * sizeof(*order));
	for (i = t->npods; i > 1; i--) {
		size_t k = below(&rng, i), tmp = order[i - 1];
		order[i - 1] = order[k];
		order[k] = tmp;
	}
	n = t->npods;
	target = (int64_t)(opts->inflate * (double)ngpus * 1000.0);
	/*
	 * Draws count only by their GPUs, so a trace that asks for none is
	 * not inflated, and one whose GPU pods are rare and tiny stops at a
	 * bound far beyond any real trace's 1.3x (a fuzzed input drew
	 * CPU-only pods until it ran out of memory).
	 */
	if (total == 0)
		target = 0;
	while (total < target && n < 64 * t->npods + 65536) {
		size_t k = byname[below(&rng, t->npods)];
		if (total + pod_gpu_milli(&t->pods[k]) > target)
			break;
		if (n == cap) {
			size_t *o = realloc(order, 2 * cap * sizeof(*o));
			if (o == NULL)
				goto out;
			order = o;
			cap *= 2;
		}
		order[n++] = k;
		total += pod_gpu_milli(&t->pods[k]);
	}
	/* The mix: every shape of the trace, by count (the artifact keeps
	 * the most frequent 95%; see docs/scheduling.md). */
	if ((rc = trace_mix(t, &mix)) != 0)
		goto out;
	if ((rc = gp_sched_engine_new(nodes, t->nnodes, policy, &mix,
	         opts->seed, &e)) != 0)
		goto out;
	gp_sched_engine_set_quick(e, 1);
	for (i = 0; i < n; i++) {
		const struct gp_trace_pod *p = &t->pods[order[i]];
		pod_job(p, (int64_t)i + 1, &job);
		arrived += pod_gpu_milli(p);
		t0 = cpu_us();
		rc = gp_sched_engine_pass(e, 0, &job, 1, NULL, 0, NULL, 0, &r);
		t1 = cpu_us();
		pass_us += t1 - t0;
		if (rc != 0)
			goto out;
		if (r.nassignments > 0)
			alloc += pod_gpu_milli(p);
		else
			res->pods_failed++;
		gp_sched_result_fini(&r);
		a = 100.0 * (double)arrived / ((double)ngpus * 1000.0);

		/* As the artifact's analysis: the allocation at the pods whose
		 * arrived share rounds to 100 (130), averaged. */
		if (llround(a) == 100) {
			sum100 +=
			    100.0 * (double)alloc / ((double)ngpus * 1000.0);
			n100++;
		}
		if (llround(a) == 130) {
			sum130 +=
			    100.0 * (double)alloc / ((double)ngpus * 1000.0);
			n130++;
		}
		if (fabs(a - 100) <= 1) {
			near100 +=
			    100.0 * (double)alloc / ((double)ngpus * 1000.0);
			nn100++;
		}
		if (fabs(a - 130) <= 1) {
			near130 +=
			    100.0 * (double)alloc / ((double)ngpus * 1000.0);
			nn130++;
		}
		if (frag100 < 0 && a >= 100)
			frag100 = 100.0 * gp_sched_engine_frag(e) /
			    ((double)ngpus * 1000.0);
		if (opts->series != NULL)
			fprintf(opts->series, "%.4f,%.4f\n", a,
			    100.0 * (double)alloc / ((double)ngpus * 1000.0));
	}
	res->gpus = ngpus;
	res->pods = (int64_t)n;
	res->unallocated_pct_at_100 = 100.0 -
	    (n100 > 0           ? sum100 / (double)n100
	            : nn100 > 0 ? near100 / (double)nn100
	                        : 0);
	res->unallocated_pct_at_130 = 100.0 -
	    (n130 > 0           ? sum130 / (double)n130
	            : nn130 > 0 ? near130 / (double)nn130
	                        : 0);
	res->frag_pct_at_100 = frag100 < 0 ? 0 : frag100;
	res->decisions_per_s =
	    pass_us > 0 ? (double)n * 1e6 / (double)pass_us : 0;
	res->seconds = (double)(gp_mono_us() - wall0) / 1e6;
	rc = 0;
out:
	gp_sched_engine_free(e);
	free(mix.shapes);
	free(nodes);
	free(gpus);
	free(order);
	free(byname);
	return rc;
}

/* ---- the replay ---- */

#define HALF_LIFE_S (7 * 86400.0) /* fair share: as Slurm's default */

struct heap_item {
	int64_t end;
	size_t pod;
};

struct heap {
	struct heap_item *a;
	size_t n, cap;
};

static int
heap_push(struct heap *h, int64_t end, size_t pod)
{
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct heap_item *a = realloc(h->a, cap * sizeof(*a));
		if (a == NULL)
			return GP_ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	for (i = h->n++; i > 0 && h->a[(i - 1) / 2].end > end; i = (i - 1) / 2)
		h->a[i] = h->a[(i - 1) / 2];
	h->a[i].end = end;
	h->a[i].pod = pod;
	return 0;
}

static struct heap_item
heap_pop(struct heap *h)
{
	struct heap_item top = h->a[0], last = h->a[--h->n];
	size_t i = 0, c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->a[c + 1].end < h->a[c].end)
			c++;
		if (h->a[c].end >= last.end)
			break;
		h->a[i] = h->a[c];
		i = c;
	}
	if (h->n > 0)
		h->a[i] = last;
	return top;
}

/* How long a pod runs: deletion - scheduled (or - creation), at least 1. */
static int64_t
pod_runtime(const struct gp_trace_pod *p)
{
	if (p->deletion >= 0 && p->scheduled >= 0 && p->deletion > p->scheduled)
		return p->deletion - p->scheduled;
	if (p->deletion >= 0 && p->deletion > p->creation)
		return p->deletion - p->creation;
	if (p->deletion < 0)
		return 86400;
	return 1;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
stats_of(double *v, size_t n, struct gp_sim_stats *s)
{
	double sum = 0;
	size_t i;

	memset(s, 0, sizeof(*s));
	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	for (i = 0; i < n; i++)
		sum += v[i];
	s->mean = sum / (double)n;
	s->p50 = v[(n - 1) / 2];
	s->p90 = v[(size_t)((double)(n - 1) * 0.9)];
	s->p99 = v[(size_t)((double)(n - 1) * 0.99)];
	s->max = v[n - 1];
}

/* What one replay (pooled, or one lab alone) gives. */
struct core_out {
	int64_t t0, end; /* first arrival, last departure */
	int64_t last_arrival;
	double busy_milli_s; /* GPU milli x seconds allocated, while
	                        pods arrive (t0 to last_arrival) */
	double idle_gpu_s;   /* idle GPUs x seconds, idem */
	double frag_milli_s; /* fragmented milli x seconds (sampled) */
	double frag_span_s;
	int64_t never;
	double *wait, *jct;   /* per pod that ran (caller frees) */
	double *service;      /* per pod: runtime / jct */
	int64_t *lab_of_done; /* per pod that ran: its lab */
	size_t ndone;
	uint64_t decisions;
	int64_t pass_us;
};

static uint64_t
fnv(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

/* When the pod arrives in the replay: its creation time, compressed. */
static int64_t
arrival(const struct gp_trace_pod *p, double speed)
{
	return (int64_t)((double)p->creation / speed);
}

struct by_arrival {
	const struct gp_trace *t;
	double speed;
};

static int
cmp_arrival(const void *a, const void *b, void *arg)
{
	const struct by_arrival *ba = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int64_t tx = arrival(&ba->t->pods[x], ba->speed),
	        ty = arrival(&ba->t->pods[y], ba->speed);

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return x < y ? -1 : x > y;
}

/*
 * Replays t's pods (labs: per pod) on t's nodes (node_labs: per node),
 * counting busy and idle GPU time until until (0: its last arrival).
 * OUT: *out. Returns 0 or GP_E*.
 */
static int
replay_core(const struct gp_trace *t, const int64_t *labs,
    const int64_t *node_labs, int nlabs, const struct gp_sim_opts *opts,
    int64_t until, struct core_out *out)
{
	struct gp_sched_node *nodes = NULL;
	struct gp_sched_gpu *gpus = NULL;
	struct gp_sched_engine *e = NULL;
	struct gp_sched_mix mix = {NULL, 0};
	struct gp_sched_share *shares = NULL;
	struct gp_sched_job *jobs = NULL;
	struct gp_sched_result r;
	struct heap h = {NULL, 0, 0};
	size_t *arr = NULL, *queue = NULL, nq = 0, next = 0, i, k;
	double *held = NULL, frag_every, frag_next;
	double speed = opts->speed > 0 ? opts->speed : 1;
	struct by_arrival ba;
	int64_t ngpus = 0, now, prev, tot, alloc, idle, partial, t0;
	int rc = GP_ENOMEM, changed;

	memset(out, 0, sizeof(*out));
	if (t->npods == 0)
		return 0;
	if ((rc = make_nodes(t, node_labs, &nodes, &gpus, &ngpus)) != 0)
		return rc;
	rc = GP_ENOMEM;
	arr = calloc(t->npods, sizeof(*arr));
	queue = calloc(t->npods, sizeof(*queue));
	jobs = calloc(t->npods, sizeof(*jobs));
	shares = calloc((size_t)nlabs + 1, sizeof(*shares));
	held = calloc((size_t)nlabs + 1, sizeof(*held));
	out->wait = calloc(t->npods, sizeof(double));
	out->jct = calloc(t->npods, sizeof(double));
	out->service = calloc(t->npods, sizeof(double));
	out->lab_of_done = calloc(t->npods, sizeof(int64_t));
	if (arr == NULL || queue == NULL || jobs == NULL || shares == NULL ||
	    held == NULL || out->wait == NULL || out->jct == NULL ||
	    out->service == NULL || out->lab_of_done == NULL)
		goto out;
	for (i = 0; i < t->npods; i++)
		arr[i] = i;
	ba.t = t;
	ba.speed = speed;
	qsort_r(arr, t->npods, sizeof(*arr), cmp_arrival, &ba);
	for (i = 0; i < (size_t)nlabs; i++) {
		shares[i].id = (int64_t)i + 1;
		shares[i].weight = 1;
	}
	if ((rc = trace_mix(t, &mix)) != 0)
		goto out;
	if ((rc = gp_sched_engine_new(nodes, t->nnodes, opts->policy, &mix,
	         opts->seed, &e)) != 0)
		goto out;
	rc = GP_ENOMEM;
	t0 = prev = arrival(&t->pods[arr[0]], speed);
	out->t0 = t0;
	out->last_arrival =
	    until > 0 ? until : arrival(&t->pods[arr[t->npods - 1]], speed);
	frag_every =
	    (double)(arrival(&t->pods[arr[t->npods - 1]], speed) - t0) / 200 +
	    1;
	frag_next = (double)t0;
	alloc = 0;
	idle = ngpus;
	while (next < t->npods || h.n > 0) {
		now = next < t->npods ? arrival(&t->pods[arr[next]], speed)
		                      : INT64_MAX;
		if (h.n > 0 && h.a[0].end < now)
			now = h.a[0].end;
		/* What held until now, while pods arrive. */
		if (prev < out->last_arrival) {
			int64_t upto =
			    now < out->last_arrival ? now : out->last_arrival;
			out->busy_milli_s +=
			    (double)alloc * (double)(upto - prev);
			out->idle_gpu_s += (double)idle * (double)(upto - prev);
		}
		for (k = 0; k < (size_t)nlabs; k++)
			shares[k].usage = shares[k].usage *
			        pow(0.5, (double)(now - prev) / HALF_LIFE_S) +
			    held[k] * (double)(now - prev);
		prev = now;
		changed = 0;
		while (h.n > 0 && h.a[0].end == now) {
			struct heap_item it = heap_pop(&h);
			const struct gp_trace_pod *p = &t->pods[it.pod];
			gp_sched_engine_end(e, (int64_t)it.pod + 1);
			held[labs[it.pod] - 1] -=
			    (double)pod_gpu_milli(p) / 1000.0;
			changed = 1;
		}
		while (next < t->npods &&
		    arrival(&t->pods[arr[next]], speed) == now) {
			queue[nq++] = arr[next++];
			changed = 1;
		}
		if (changed && nq > 0) {
			size_t keep = 0;
			for (i = 0; i < nq; i++) {
				const struct gp_trace_pod *p =
				    &t->pods[queue[i]];
				pod_job(p, (int64_t)queue[i] + 1, &jobs[i]);
				jobs[i].time_limit_s = pod_runtime(p);
				jobs[i].group = labs[queue[i]];
				jobs[i].user = labs[queue[i]];
			}
			int64_t p0 = cpu_us();
			rc = gp_sched_engine_pass(e, now * 1000, jobs, nq,
			    shares, (size_t)nlabs, shares, (size_t)nlabs, &r);
			out->pass_us += cpu_us() - p0;
			if (rc != 0)
				goto out;
			for (i = 0; i < r.nassignments; i++) {
				size_t pod =
				    (size_t)(r.assignments[i].job_id - 1);
				const struct gp_trace_pod *p = &t->pods[pod];
				int64_t d = pod_runtime(p);
				if ((rc = heap_push(&h, now + d, pod)) != 0) {
					gp_sched_result_fini(&r);
					goto out;
				}
				held[labs[pod] - 1] +=
				    (double)pod_gpu_milli(p) / 1000.0;
				out->wait[out->ndone] =
				    (double)(now - arrival(p, speed));
				out->jct[out->ndone] =
				    (double)(now + d - arrival(p, speed));
				out->service[out->ndone] = (double)d /
				    (double)(now + d - arrival(p, speed));
				out->lab_of_done[out->ndone++] = labs[pod];
				jobs[0].id = 0;
			}
			/* Started and never-fitting pods leave the queue. */
			for (i = 0; i < nq; i++) {
				int64_t id = (int64_t)queue[i] + 1, gone = 0;
				for (k = 0; k < r.nwaiting; k++)
					if (r.waiting[k].job_id == id) {
						if (r.waiting[k].reason ==
						    GP_SCHED_WAIT_NEVER) {
							gone = 1;
							out->never++;
						}
						break;
					}
				if (k == r.nwaiting)
					gone = 1; /* it started */
				if (!gone)
					queue[keep++] = queue[i];
			}
			nq = keep;
			gp_sched_result_fini(&r);
		}
		if (changed)
			gp_sched_engine_gpu_stats(e, &tot, &alloc, &idle,
			    &partial);
		if ((double)now >= frag_next) {
			out->frag_milli_s +=
			    gp_sched_engine_frag(e) * frag_every;
			out->frag_span_s += frag_every;
			frag_next += frag_every;
		}
		if (opts->series != NULL && changed)
			fprintf(opts->series, "%lld,%.4f,%lld,%zu\n",
			    (long long)(now - t0),
			    100.0 * (double)alloc / ((double)ngpus * 1000.0),
			    (long long)idle, nq);
		out->end = now;
	}
	out->decisions = gp_sched_engine_decisions(e);
	rc = 0;
out:
	gp_sched_engine_free(e);
	free(mix.shapes);
	free(nodes);
	free(gpus);
	free(arr);
	free(queue);
	free(jobs);
	free(shares);
	free(held);
	free(h.a);
	return rc;
}

static void
core_free(struct core_out *o)
{
	free(o->wait);
	free(o->jct);
	free(o->service);
	free(o->lab_of_done);
}

/* Who is a lab: per pod, and the nodes dealt by the labs' demand. */
static int
make_labs(const struct gp_trace *t, const char *group_by, int64_t *labs,
    int64_t *node_labs, int *nlabs_out)
{
	char qos[16][16];
	double demand[64] = {0}, credit[64], total = 0;
	int nlabs = 4, nq = 0, g, best;
	size_t i, j;

	if (group_by != NULL && strcmp(group_by, "qos") == 0) {
		for (i = 0; i < t->npods; i++) {
			for (g = 0; g < nq; g++)
				if (strcmp(qos[g], t->pods[i].qos) == 0)
					break;
			if (g == nq) {
				if (nq == 16)
					return GP_EINVAL;
				memcpy(qos[nq++], t->pods[i].qos, 16);
			}
			labs[i] = g + 1;
		}
		nlabs = nq;
	} else {
		if (group_by != NULL)
			nlabs = atoi(group_by + 5);
		if (nlabs < 1 || nlabs > 64)
			return GP_EINVAL;
		for (i = 0; i < t->npods; i++)
			labs[i] =
			    (int64_t)(fnv(t->pods[i].name) % (uint64_t)nlabs) +
			    1;
	}
	for (i = 0; i < t->npods; i++) {
		double d = (double)pod_gpu_milli(&t->pods[i]) *
		    (double)pod_runtime(&t->pods[i]);
		demand[labs[i] - 1] += d;
		total += d;
	}
	/* Each model's nodes, by name, dealt by smooth weighted round robin
	 * so that each lab lends about its share of the demand. */
	for (i = 0; i < t->nnodes; i++)
		node_labs[i] = 0;
	for (i = 0; i < t->nnodes; i++) {
		if (node_labs[i] != 0)
			continue;
		for (g = 0; g < nlabs; g++)
			credit[g] = 0;
		for (j = i; j < t->nnodes; j++) {
			if (node_labs[j] != 0 ||
			    strcmp(t->nodes[j].model, t->nodes[i].model) != 0)
				continue;
			for (g = 0, best = 0; g < nlabs; g++) {
				credit[g] +=
				    total > 0 ? demand[g] / total : 1.0 / nlabs;
				if (credit[g] > credit[best])
					best = g;
			}
			credit[best] -= 1;
			node_labs[j] = best + 1;
		}
	}
	*nlabs_out = nlabs;
	return 0;
}

int
gp_sim_replay(const struct gp_trace *t, const struct gp_sim_opts *opts,
    struct gp_sim_replay_result *res)
{
	struct core_out pooled, part;
	struct gp_trace sub;
	int64_t *labs = NULL, *node_labs = NULL, wall0 = gp_mono_us(), end;
	double x[64] = {0}, cnt[64] = {0}, sum = 0, sum2 = 0, busy = 0,
	       *waits = NULL, span;
	size_t i, nw = 0;
	int64_t ngpus = 0;
	int nlabs, g, rc = GP_ENOMEM, used = 0;

	memset(res, 0, sizeof(*res));
	memset(&pooled, 0, sizeof(pooled));
	memset(&sub, 0, sizeof(sub));
	labs = calloc(t->npods + 1, sizeof(*labs));
	node_labs = calloc(t->nnodes + 1, sizeof(*node_labs));
	if (labs == NULL || node_labs == NULL)
		goto out;
	if ((rc = make_labs(t, opts->group_by, labs, node_labs, &nlabs)) != 0)
		goto out;
	for (i = 0; i < t->nnodes; i++)
		ngpus += t->nodes[i].gpus;
	if ((rc = replay_core(t, labs, node_labs, nlabs, opts, 0, &pooled)) !=
	    0)
		goto out;
	res->gpus = ngpus;
	res->nlabs = nlabs;
	res->pods = (int64_t)t->npods;
	for (i = 0; i < t->npods; i++)
		res->pods_gpu += t->pods[i].num_gpu > 0;
	res->pods_never = pooled.never;
	res->makespan_s = pooled.end - pooled.t0;
	span = (double)(pooled.last_arrival - pooled.t0);
	if (span > 0 && ngpus > 0) {
		res->alloc_pct_mean = 100.0 * pooled.busy_milli_s /
		    ((double)ngpus * 1000.0 * span);
		res->util_pct = res->alloc_pct_mean;
		res->unalloc_gpus_mean = pooled.idle_gpu_s / span;
	}
	if (pooled.frag_span_s > 0)
		res->frag_gpus_mean =
		    pooled.frag_milli_s / pooled.frag_span_s / 1000.0;
	for (i = 0; i < pooled.ndone; i++) {
		x[pooled.lab_of_done[i] - 1] += pooled.service[i];
		cnt[pooled.lab_of_done[i] - 1] += 1;
	}
	for (g = 0; g < nlabs; g++) {
		if (cnt[g] == 0)
			continue;
		used++;
		sum += x[g] / cnt[g];
		sum2 += (x[g] / cnt[g]) * (x[g] / cnt[g]);
	}
	res->jain = sum2 > 0 ? sum * sum / ((double)used * sum2) : 1;
	res->decisions_per_s = pooled.pass_us > 0
	    ? (double)pooled.decisions * 1e6 / (double)pooled.pass_us
	    : 0;
	stats_of(pooled.wait, pooled.ndone, &res->wait_s);
	stats_of(pooled.jct, pooled.ndone, &res->jct_s);

	/* Each lab alone on the GPUs it lends. */
	if (opts->static_partition) {
		struct gp_sim_opts o = *opts;
		int64_t *sub_labs, *sub_nodes;
		o.series = NULL;
		sub.pods = calloc(t->npods + 1, sizeof(*sub.pods));
		sub.nodes = calloc(t->nnodes + 1, sizeof(*sub.nodes));
		sub_labs = calloc(t->npods + 1, sizeof(*sub_labs));
		sub_nodes = calloc(t->nnodes + 1, sizeof(*sub_nodes));
		waits = calloc(t->npods + 1, sizeof(*waits));
		rc = GP_ENOMEM;
		if (sub.pods == NULL || sub.nodes == NULL || sub_labs == NULL ||
		    sub_nodes == NULL || waits == NULL) {
			free(sub_labs);
			free(sub_nodes);
			goto out;
		}
		end = pooled.t0;
		busy = 0;
		for (g = 1; g <= nlabs; g++) {
			sub.npods = sub.nnodes = 0;
			for (i = 0; i < t->npods; i++)
				if (labs[i] == g) {
					sub_labs[sub.npods] = 1;
					sub.pods[sub.npods++] = t->pods[i];
				}
			for (i = 0; i < t->nnodes; i++)
				if (node_labs[i] == g) {
					sub_nodes[sub.nnodes] = 1;
					sub.nodes[sub.nnodes++] = t->nodes[i];
				}
			if (sub.npods == 0)
				continue;
			if (sub.nnodes == 0) {
				res->pods_never += 0;
				continue;
			}
			rc = replay_core(&sub, sub_labs, sub_nodes, 1, &o,
			    pooled.last_arrival, &part);
			if (rc != 0) {
				core_free(&part);
				free(sub_labs);
				free(sub_nodes);
				goto out;
			}
			/* Its busy time over the pooled run's window. */
			busy += part.busy_milli_s;
			if (part.end > end)
				end = part.end;
			for (i = 0; i < part.ndone; i++)
				waits[nw++] = part.wait[i];
			core_free(&part);
		}
		free(sub_labs);
		free(sub_nodes);
		res->static_makespan_s = (double)(end - pooled.t0);
		if (span > 0 && ngpus > 0)
			res->static_util_pct =
			    100.0 * busy / ((double)ngpus * 1000.0 * span);
		stats_of(waits, nw, &res->static_wait_s);
	}
	res->seconds = (double)(gp_mono_us() - wall0) / 1e6;
	rc = 0;
out:
	core_free(&pooled);
	free(sub.pods);
	free(sub.nodes);
	free(waits);
	free(labs);
	free(node_labs);
	return rc;
}
