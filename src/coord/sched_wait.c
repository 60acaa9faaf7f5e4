/*
 * sched_wait.c: why a job waits (the words of a wait reason: the short
 * resource, what holds it) and whether it can ever fit the nodes known
 * (gp_sched_can_ever_fit). Part of the scheduler: see sched.c and
 * sched_int.h.
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

/* ---- the pass ---- */

const char *
hold_words(const struct gp_sched_job *job, char *buf, size_t len)
{
	switch (job->hold) {
	case GP_SCHED_HOLD_BUDGET:
		return "held: budget exhausted";
	case GP_SCHED_HOLD_USER:
		return "held by its owner or an admin";
	default:
		snprintf(buf, len, "held: %s",
		    job->hold_reason != NULL ? job->hold_reason
		                             : "by the pool");
		return buf;
	}
}

/*
 * How many of job's parts could go somewhere now, reservation aside,
 * with this pass's own starts given back when without_pass (nothing is
 * changed in the end).
 */
static int
parts_fitting(struct gp_sched_engine *s, const struct gp_sched_job *job,
    int without_pass, int64_t *other_group)
{
	struct part_req r;
	size_t i;
	int cnt = 0, parts = job_parts(job);

	*other_group = 0;
	if (without_pass)
		for (i = 0; i < s->nruns; i++) {
			struct run_rec *rr = &s->runs[i];
			if (!rr->alive || rr->pass_no != s->pass_no ||
			    rr->owner)
				continue;
			if (rr->group != job->group)
				*other_group = 1;
			run_release(s, i);
			rr->owner = 2; /* to take back below */
		}
	part_init(&s->e, job, &r);
	for (i = 0; i < s->e.nnodes && cnt < parts; i++)
		cnt += fits_node(s, &s->e.nodes[i], &r);
	if (without_pass)
		for (i = 0; i < s->nruns; i++)
			if (s->runs[i].owner == 2) {
				s->runs[i].owner = 0;
				run_restore(s, i);
			}
	return cnt;
}

/* 1 when GPU g of n could ever serve r: lent, of its model, big enough. */
static int
gpu_could_serve(struct engine *e, const struct eng_gpu *g,
    const struct part_req *r)
{
	if (!g->lent && g->holder <= 0)
		return 0;
	if (r->gpu_mem > 0 && g->mem_total < r->gpu_mem)
		return 0;
	return eng_gpu_kind_fits(e, g, r->job);
}

/* CPUs in milli as words: "4 CPUs", "0.5 CPU". */
static void
cpu_words(int64_t milli, char *out, size_t len)
{
	snprintf(out, len, "%g CPU%s", (double)milli / 1000.0,
	    milli == 1000 ? "" : "s");
}

/*
 * What a job that found no room waits for, in words that name the
 * resource short on the nodes that could hold it when empty (up, its
 * time limit allowed, accepting it): "no node has 4 CPUs free now (at
 * most 0.5 CPUs free on a node that could hold it)", "no node has 1 GPU
 * of model A100 free now", "... 2 GPUs and 16 CPUs free at once". Empty
 * when no such node is short of anything (the generic words then).
 */
void
short_resource(struct gp_sched_engine *s, const struct gp_sched_job *job,
    char *why, size_t len)
{
	struct engine *e = &s->e;
	struct part_req r, twin_r;
	struct gp_sched_job twin = *job;
	int64_t most_cpu = -1, most_mem = -1;
	int most_gpus = -1, nshort_cpu = 0, nshort_mem = 0, nshort_gpu = 0;
	int nkinds, g, could, now, kept = 0;
	char items[3][96], buf[32], out[512];
	size_t i, k = 0;

	why[0] = '\0';
	part_init(e, job, &r);
	/* The same job were it interactive: what owners keep from it. */
	twin.interactive = 1;
	twin_r = r;
	twin_r.job = &twin;
	for (i = 0; i < e->nnodes; i++) {
		const struct eng_node *n = &e->nodes[i];
		int cpu_short, mem_short, gpu_short;
		if (!n->up || !time_allowed(n, job) || n->cpu_total < r.cpu ||
		    (r.mem > 0 && n->mem_total != INT64_MAX &&
		        n->mem_total < r.mem))
			continue;
		if (e->accepts != NULL &&
		    !e->accepts(e->accepts_arg, n->src, job))
			continue;
		for (g = 0, could = 0, now = 0; g < n->ngpus && r.gpus > 0;
		     g++) {
			if (!gpu_could_serve(e, &n->gpus[g], &r)) {
				kept += !job->interactive &&
				    gpu_could_serve(e, &n->gpus[g], &twin_r);
				continue;
			}
			could++;
			now += eng_gpu_usable(e, n, g, &r);
		}
		if (could < r.gpus)
			continue;
		cpu_short = n->cpu_free < r.cpu;
		mem_short = r.mem > 0 && n->mem_total != INT64_MAX &&
		    n->mem_free < r.mem;
		gpu_short = now < r.gpus;
		nshort_cpu += cpu_short;
		nshort_mem += mem_short;
		nshort_gpu += gpu_short;
		if (n->cpu_free > most_cpu)
			most_cpu = n->cpu_free;
		if (n->mem_total != INT64_MAX && n->mem_free > most_mem)
			most_mem = n->mem_free;
		if (now > most_gpus)
			most_gpus = now;
	}
	if (nshort_gpu > 0) {
		if (r.shared)
			snprintf(items[k], sizeof(items[k]),
			    "a %.3g share of a GPU%s%s",
			    (double)r.milli / 1000.0,
			    job->gpu_model != NULL ? " of model " : "",
			    job->gpu_model != NULL ? job->gpu_model : "");
		else
			snprintf(items[k], sizeof(items[k]), "%d GPU%s%s%s",
			    r.gpus, r.gpus == 1 ? "" : "s",
			    job->gpu_model != NULL ? " of model " : "",
			    job->gpu_model != NULL ? job->gpu_model : "");
		k++;
	}
	if (nshort_cpu > 0) {
		cpu_words(r.cpu, items[k], sizeof(items[k]));
		k++;
	}
	if (nshort_mem > 0) {
		gp_format_bytes(r.mem * 1048576, buf, sizeof(buf));
		snprintf(items[k], sizeof(items[k]), "%s of memory", buf);
		k++;
	}
	nkinds = (int)k;
	if (nkinds == 0) {
		if (kept > 0)
			snprintf(why, len, "%d GPU%s that could hold it %s "
			    "kept for interactive jobs (interactive-gpus)", kept,
			    kept == 1 ? "" : "s", kept == 1 ? "is" : "are");
		return;
	}
	if (nkinds == 1) {
		char most[64];
		if (nshort_cpu > 0)
			cpu_words(most_cpu, most, sizeof(most));
		else if (nshort_mem > 0)
			gp_format_bytes(most_mem * 1048576, most, sizeof(most));
		else if (r.shared)
			gp_strlcpy(most, "no such share", sizeof(most));
		else
			snprintf(most, sizeof(most), "%d GPU%s", most_gpus,
			    most_gpus == 1 ? "" : "s");
		snprintf(out, sizeof(out),
		    "no node has %s free now (at most %s free on a node that "
		    "could hold it%s)",
		    items[0], most, kept > 0 ? "; more are kept for "
		    "interactive jobs" : "");
	} else {
		snprintf(out, sizeof(out),
		    "no node has %s%s%s%s%s free at once", items[0],
		    nkinds == 3 ? ", " : " and ", items[1],
		    nkinds == 3 ? " and " : "", nkinds == 3 ? items[2] : "");
	}
	gp_strlcpy(why, out, len);
}

/* Why job (that did not start) waits. */
int
explain(struct gp_sched_engine *s, const struct gp_sched_job *job, int room,
    int is_head)
{
	char why[160];
	int parts = job_parts(job), now, before;
	int64_t other = 0;

	if (room && !is_head) {
		snprintf(why, sizeof(why),
		    "behind the reservation of job "
		    "%lld",
		    (long long)(s->resv.job != NULL ? s->resv.job->id : 0));
		return result_wait(s, job, GP_SCHED_WAIT_RESERVATION, why);
	}
	now = parts_fitting(s, job, 0, &other);
	if (parts > 1 && now > 0) {
		snprintf(why, sizeof(why),
		    "waiting for its gang: %d of %d "
		    "parts fit now",
		    now, parts);
		return result_wait(s, job, GP_SCHED_WAIT_GANG, why);
	}
	before = parts_fitting(s, job, 1, &other);
	if (before >= parts)
		return result_wait(s, job,
		    other ? GP_SCHED_WAIT_SHARE : GP_SCHED_WAIT_PRIORITY, NULL);
	if (parts > 1 && before > 0) {
		snprintf(why, sizeof(why),
		    "waiting for its gang: %d of %d "
		    "parts fit now",
		    before, parts);
		return result_wait(s, job, GP_SCHED_WAIT_GANG, why);
	}
	short_resource(s, job, why, sizeof(why));
	return result_wait(s, job, GP_SCHED_WAIT_RESOURCES,
	    why[0] != '\0' ? why : NULL);
}

/* ---- can it ever fit ---- */

static void
describe_gpus(const struct gp_sched_job *job, char *buf, size_t len)
{
	int n;

	n = snprintf(buf, len, "%d GPU%s", job->gpus,
	    job->gpus == 1 ? "" : "s");
	if (n < 0 || (size_t)n >= len)
		return;
	if (job->gpu_model != NULL && job->gpu_model[0] != '\0') {
		n += snprintf(buf + n, len - (size_t)n, " of model %s",
		    job->gpu_model);
		if (n < 0 || (size_t)n >= len)
			return;
	}
	if (job->gpu_mem_mib > 0)
		snprintf(buf + n, len - (size_t)n, " with %lld MiB",
		    (long long)job->gpu_mem_mib);
}

int
gp_sched_can_ever_fit(const struct gp_sched_node *nodes, size_t nnodes,
    const struct gp_sched_job *job, char *why, size_t whylen)
{
	char gpus[GP_SCHED_GPUS_MAX * 2 + 128];
	const struct gp_sched_node *most_gpus = NULL, *most_cpus = NULL,
	                           *most_mem = NULL;
	int best_gpus = -1, want = job_is_shared(job) ? 1 : job->gpus, i;
	int64_t cpu = job->cpu_milli;
	size_t k, fit = 0;
	int parts = job_parts(job);

	if (whylen > 0)
		why[0] = '\0';
	if (job->gpus > GP_SCHED_GPUS_MAX) {
		snprintf(why, whylen, "a job may use at most %d GPUs",
		    GP_SCHED_GPUS_MAX);
		return 0;
	}
	if (parts > GP_SCHED_PARTS_MAX) {
		snprintf(why, whylen, "a gang may have at most %d parts",
		    GP_SCHED_PARTS_MAX);
		return 0;
	}
	if (nnodes == 0) {
		snprintf(why, whylen, "no node is registered");
		return 0;
	}
	for (k = 0; k < nnodes; k++) {
		const struct gp_sched_node *node = &nodes[k];
		int n = 0;

		for (i = 0; i < node->ngpus; i++)
			n += node->gpus[i].job_id >= 0 &&
			    gp_sched_gpu_matches(&node->gpus[i], job);
		if (n > best_gpus ||
		    (n == best_gpus && node->id < most_gpus->id)) {
			best_gpus = n;
			most_gpus = node;
		}
		if (n < want)
			continue;
		if (most_cpus == NULL || node->cpu_milli > most_cpus->cpu_milli)
			most_cpus = node;
		if (node->cpu_milli < cpu)
			continue;
		if (most_mem == NULL || node->mem_mib <= 0 ||
		    (most_mem->mem_mib > 0 &&
		        node->mem_mib > most_mem->mem_mib))
			most_mem = node;
		if (job->mem_mib > 0 && node->mem_mib > 0 &&
		    node->mem_mib < job->mem_mib)
			continue;
		if (++fit >= (size_t)parts)
			return 1;
	}
	describe_gpus(job, gpus, sizeof(gpus));
	if (fit > 0)
		snprintf(why, whylen,
		    "a gang of %d parts needs %d nodes with "
		    "%s; the pool has %zu",
		    parts, parts, gpus, fit);
	else if (most_cpus == NULL)
		snprintf(why, whylen,
		    "no node has %s; the largest offer is "
		    "%d on node %lld",
		    gpus, best_gpus, (long long)most_gpus->id);
	else if (most_mem == NULL)
		snprintf(why, whylen,
		    "no node with %s has %g CPUs; the "
		    "largest offer is %g CPUs on node %lld",
		    gpus, (double)cpu / 1000.0,
		    (double)most_cpus->cpu_milli / 1000.0,
		    (long long)most_cpus->id);
	else
		snprintf(why, whylen,
		    "no node with %s and %g CPUs has %lld "
		    "MiB of memory; the largest offer is "
		    "%lld MiB on node %lld",
		    gpus, (double)cpu / 1000.0, (long long)job->mem_mib,
		    (long long)most_mem->mem_mib, (long long)most_mem->id);
	return 0;
}
