/*
 * sched_policy.c: the placement policies behind one ops table (struct
 * gp_sched_policy in sched_int.h). The engine (sched.c) finds the nodes
 * where a part fits; a policy scores each (lower is better) and picks the
 * GPUs there.
 *
 *   frag       gpupool's default: fragmentation-aware. The pool's
 *              fragmentation, for the recent mix of requests M, is the sum
 *              over nodes of F(n) = sum over m in M of p(m) x the free GPU
 *              share on n that m could not use (all of it when m does not
 *              fit n at all: CPUs, memory, GPU model, too few GPUs; else
 *              the GPUs with less free than m needs). A part goes where F
 *              grows least (Fragmentation Gradient Descent, Weng et al.,
 *              USENIX ATC '23), scored exactly, counting memory, ties
 *              broken by best fit; on a node, the GPU whose use adds the
 *              least fragmentation, then the fullest one. F also counts
 *              what one request's copies would leave (whole GPUs) and
 *              the free share the node's CPUs cannot feed at the mix's
 *              CPUs per GPU share (eng_node_frag). Plus a
 *              contention term: what the GPUs taken are worth to the
 *              requests of the mix that can only use their model, or
 *              (multi-GPU requests) only nodes as large as this one.
 *   fgd        FGD as its authors' artifact runs it: the same measure
 *              without memory, turned into a 0..100 integer node score
 *              (sigmoid of the change, in GPUs) with ties broken at random,
 *              and the first GPU of the best score on the node. It is the
 *              baseline the default has to beat.
 *   bestfit    the least GPU share left over on the node (then the least
 *              GPU memory used, then the lowest node id); on a node the
 *              fullest GPU that fits (a share) or the smallest ones.
 *   random, dotprod, clustering, packing: the artifact's baselines
 *              (docs/scheduling.md), integer scores and random ties.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "sched_int.h"

/* ---- the request mix and fragmentation ---- */

void
eng_mix_free(struct engine *e)
{
	size_t i;

	for (i = 0; i < e->nmix; i++)
		free(e->mix[i].model_ok);
	free(e->mix);
	e->mix = NULL;
	e->nmix = 0;
	free(e->model_rho);
	e->model_rho = NULL;
	e->nmodel_rho = 0;
	free(e->node_rho);
	e->node_rho = NULL;
	e->nnode_rho = 0;
}

/* Whether an empty n could hold m. */
static int
node_holds(const struct engine *e, const struct eng_node *n,
    const struct mix_entry *m)
{
	if (n->ngpus < m->gpus || n->cpu_total < m->cpu ||
	    (n->mem_total != INT64_MAX && n->mem_total < m->mem))
		return 0;
	if (m->model_ok == NULL)
		return 1;
	return n->model >= 0 && (size_t)n->model < e->mix_nmodels &&
	    m->model_ok[n->model];
}

/*
 * Each node's contention by the mix's multi-GPU requests: as a model's,
 * but such a request is dealt to the nodes that could hold it empty
 * (enough GPUs, CPUs, memory, an accepted model), in proportion to
 * their GPUs.
 */
static int
mix_node_contention(struct engine *e)
{
	double total_supply = 0, total_demand = 0, ok, want;
	size_t i, k;

	free(e->node_rho);
	e->nnode_rho = 0;
	e->node_rho = calloc(e->nnodes + 1, sizeof(double));
	if (e->node_rho == NULL)
		return GP_ENOMEM;
	for (i = 0; i < e->nnodes; i++)
		if (e->nodes[i].up)
			total_supply += (double)e->nodes[i].ngpus;
	for (k = 0; k < e->nmix; k++)
		total_demand += e->mix[k].weight * e->mix[k].gpus *
		    e->mix[k].milli / (double)GP_SCHED_MILLI;
	if (total_supply <= 0 || total_demand <= 0)
		return 0;
	for (k = 0; k < e->nmix; k++) {
		const struct mix_entry *m = &e->mix[k];
		if (m->gpus < 2)
			continue;
		want = m->weight * m->gpus;
		for (i = 0, ok = 0; i < e->nnodes; i++)
			if (e->nodes[i].up && node_holds(e, &e->nodes[i], m))
				ok += e->nodes[i].ngpus;
		for (i = 0; i < e->nnodes && ok > 0; i++)
			if (e->nodes[i].up && node_holds(e, &e->nodes[i], m))
				e->node_rho[i] += want / ok;
	}
	for (i = 0; i < e->nnodes; i++)
		e->node_rho[i] = e->node_rho[i] / total_demand * total_supply;
	e->nnode_rho = e->nnodes;
	return 0;
}

/*
 * Each GPU model's contention, for the fragmentation-aware policy. The
 * requests of the mix that only some models can serve (a gpu_spec such
 * as "T4" or "V100M16|V100M32") ask for their GPU share; it is dealt to
 * the models they accept in proportion to the GPUs each lends. A model's
 * rho is the share of all the demand it got over its share of the
 * supply: 0 when nobody needs it in particular, 1 when the requests
 * that must have it would take all of it if the pool filled up. Taking
 * such a GPU for a request that could go elsewhere takes it from those
 * that cannot (docs/scheduling.md).
 */
static int
mix_contention(struct engine *e)
{
	double *supply, *demand, total_supply = 0, total_demand = 0, ok;
	size_t i, k, m;
	int g;

	free(e->model_rho);
	e->nmodel_rho = 0;
	e->model_rho = calloc(e->nmodels + 1, sizeof(double));
	supply = calloc(e->nmodels + 1, sizeof(double));
	demand = calloc(e->nmodels + 1, sizeof(double));
	if (e->model_rho == NULL || supply == NULL || demand == NULL) {
		free(supply);
		free(demand);
		return GP_ENOMEM;
	}
	for (i = 0; i < e->nnodes; i++) {
		const struct eng_node *n = &e->nodes[i];
		if (!n->up)
			continue;
		for (g = 0; g < n->ngpus; g++)
			if (n->gpus[g].lent && n->gpus[g].model >= 0) {
				supply[n->gpus[g].model] += GP_SCHED_MILLI;
				total_supply += GP_SCHED_MILLI;
			}
	}
	for (k = 0; k < e->nmix; k++) {
		const struct mix_entry *me = &e->mix[k];
		double want = me->weight * me->gpus * me->milli;
		total_demand += want;
		if (me->model_ok == NULL || want <= 0)
			continue;
		for (m = 0, ok = 0; m < e->mix_nmodels; m++)
			ok += me->model_ok[m] ? supply[m] : 0;
		for (m = 0; m < e->mix_nmodels && ok > 0; m++)
			if (me->model_ok[m])
				demand[m] += want * supply[m] / ok;
	}
	for (m = 0; m < e->nmodels; m++)
		if (supply[m] > 0 && total_demand > 0)
			e->model_rho[m] = (demand[m] / total_demand) /
			    (supply[m] / total_supply);
	e->nmodel_rho = e->nmodels;
	free(supply);
	free(demand);
	return 0;
}

/*
 * The CPUs the mix's GPU requests ask per GPU milli they ask, each shape
 * by its weight: how many CPUs a node needs beside its free GPU share for
 * the requests to come to use it. CPU-only requests are left out (they
 * may go to nodes without GPUs; counting them sent GPU requests away
 * from nodes whose CPUs they would have used: docs/scheduling.md).
 */
static double
mix_cpu_per_milli(const struct engine *e)
{
	double cpu = 0, milli = 0;
	size_t k;

	for (k = 0; k < e->nmix; k++) {
		const struct mix_entry *m = &e->mix[k];
		if (m->gpus == 0)
			continue;
		cpu += m->weight * (double)m->cpu;
		milli += m->weight * (double)m->gpus * (double)m->milli;
	}
	return milli > 0 ? cpu / milli : 0;
}

int
eng_mix_build(struct engine *e, const struct gp_sched_mix *mix)
{
	double total = 0;
	size_t i, j, n = 0, m;

	eng_mix_free(e);
	e->mix = calloc(mix->nshapes + 1, sizeof(*e->mix));
	if (e->mix == NULL)
		return GP_ENOMEM;
	for (i = 0; i < mix->nshapes; i++) {
		const struct gp_sched_shape *sh = &mix->shapes[i];
		struct mix_entry *me;
		int milli = sh->gpu_milli > 0 && sh->gpu_milli < 1000
		    ? sh->gpu_milli
		    : GP_SCHED_MILLI;

		/* Requests without GPUs add the same to every choice: only
		 * the artifact's FGD keeps them (they move its rounding). */
		if (sh->weight <= 0 || (sh->gpus <= 0 && !e->policy->mix_cpu))
			continue;
		total += sh->weight;
		for (j = 0; j < n; j++) {
			me = &e->mix[j];
			/* Models by text: each job's lives in its own spec
			 * (by address, 100,000 queued jobs were 100,000
			 * entries, and building the mix was quadratic). */
			if (me->cpu == sh->cpu_milli &&
			    me->mem == sh->mem_mib && me->gpus == sh->gpus &&
			    me->milli == milli &&
			    strcmp(me->model_want != NULL ? me->model_want : "",
			        sh->gpu_model != NULL ? sh->gpu_model : "") == 0)
				break;
		}
		if (j < n) {
			e->mix[j].weight += sh->weight;
			continue;
		}
		me = &e->mix[n++];
		me->cpu = sh->cpu_milli;
		me->mem = sh->mem_mib > 0 ? sh->mem_mib : 0;
		me->gpus = sh->gpus > 0 ? sh->gpus : 0;
		me->milli = sh->gpus > 0 ? milli : 0;
		me->weight = sh->weight;
		me->model_want = sh->gpu_model;
		if (sh->gpu_model != NULL && sh->gpu_model[0] != '\0') {
			me->model_ok = calloc(e->nmodels + 1, 1);
			if (me->model_ok == NULL) {
				e->nmix = n;
				return GP_ENOMEM;
			}
			for (m = 0; m < e->nmodels; m++)
				me->model_ok[m] = (unsigned char)
				    gp_sched_model_matches(e->models[m],
				        sh->gpu_model);
		}
	}
	e->nmix = n;
	e->mix_nmodels = e->nmodels;
	for (i = 0; i < n; i++)
		e->mix[i].weight /= total;
	e->mix_cpu_per_milli = mix_cpu_per_milli(e);
	if (mix_contention(e) != 0 || mix_node_contention(e) != 0)
		return GP_ENOMEM;
	free(e->node_frag);
	free(e->node_frag_version);
	e->node_frag = calloc(e->capnodes + 1, sizeof(*e->node_frag));
	e->node_frag_version =
	    calloc(e->capnodes + 1, sizeof(*e->node_frag_version));
	if (e->node_frag == NULL || e->node_frag_version == NULL)
		return GP_ENOMEM;
	return 0;
}

/*
 * F(n) for the mix, with the GPUs' free shares given (0 for GPUs held
 * whole or not lent), and the CPUs and memory free. With use_mem, a
 * request that does not fit the node's memory counts as not fitting.
 *
 * Per request m, FGD's measure is the free share m cannot use now: all
 * of it when m does not fit, else that of the GPUs with less free than m
 * needs. The fill measure (weight fill, FGD's gets 1 - fill) looks
 * further: the free share left over once the node is filled with copies
 * of m alone, as many as its GPUs, CPUs and memory allow; it sees a node
 * whose CPUs run out before its GPUs do, which FGD's measure only sees
 * when the last CPUs are gone. It counts for whole-GPU requests only: a
 * share's copies leave what one size leaves (1000 mod 470), where a GPU
 * takes shares of every size (docs/scheduling.md).
 *
 * The unfed measure (weight unfed; 0 leaves it out) sees the mix as a
 * whole, where the fill measure sees one request at a time: the free
 * share beyond what the node's free CPUs can feed at the mix's CPUs per
 * GPU share (mix_cpu_per_milli). A node whose CPUs go faster than its
 * GPUs, whatever takes them (a CPU-heavy request, several shares on one
 * GPU, a CPU-only request), leaves GPUs that the requests to come, on
 * average, cannot use.
 */
double
eng_node_frag(struct engine *e, const struct eng_node *n, const int *milli_free,
    int64_t cpu_free, int64_t mem_free, int use_mem, double fill, double unfed)
{
	int64_t total = 0;
	double frag = 0;
	size_t k;
	int g;

	for (g = 0; g < n->ngpus; g++)
		total += milli_free[g];
	if (total == 0)
		return 0;
	for (k = 0; k < e->nmix; k++) {
		const struct mix_entry *m = &e->mix[k];
		int64_t stranded = 0;
		double fw;
		int fit = 0;

		if (m->gpus == 0) {
			/* As the artifact counts them: all free GPUs. */
			frag += m->weight * (double)total;
			continue;
		}
		if (cpu_free < m->cpu || (use_mem && mem_free < m->mem)) {
			frag += m->weight * (double)total;
			continue;
		}
		/* Shares: FGD's measure alone (what a GPU's copies of one
		 * share leave says little where shares of every size meet on
		 * a GPU; their CPUs are the unfed measure's). */
		fw = m->milli < GP_SCHED_MILLI ? 0 : fill;
		if (fw > 0) {
			/* Fill the node with m alone: what is left over. */
			int64_t copies = 0, most;
			for (g = 0; g < n->ngpus; g++) {
				int ok = m->model_ok == NULL ||
				    (n->gpus[g].model >= 0 &&
				        (size_t)n->gpus[g].model <
				            e->mix_nmodels &&
				        m->model_ok[n->gpus[g].model]);
				if (ok)
					copies += milli_free[g] / m->milli;
			}
			copies /= m->gpus;
			if (m->cpu > 0 && (most = cpu_free / m->cpu) < copies)
				copies = most;
			if (use_mem && m->mem > 0 &&
			    (most = mem_free / m->mem) < copies)
				copies = most;
			frag += fw * m->weight *
			    (double)(total - copies * m->gpus * m->milli);
		}
		for (g = 0; g < n->ngpus; g++) {
			int ok = m->model_ok == NULL ||
			    (n->gpus[g].model >= 0 &&
			        (size_t)n->gpus[g].model < e->mix_nmodels &&
			        m->model_ok[n->gpus[g].model]);
			if (ok && milli_free[g] >= m->milli)
				fit++;
			else
				stranded += milli_free[g];
		}
		frag += (1 - fw) * m->weight *
		    (double)(fit >= m->gpus ? stranded : total);
	}
	if (unfed > 0 && e->mix_cpu_per_milli > 0) {
		/* The free share the node's CPUs cannot feed at the mix's
		 * CPUs per GPU share. */
		double fed = (double)cpu_free / e->mix_cpu_per_milli;
		if ((double)total > fed)
			frag += unfed * ((double)total - fed);
	}
	return frag;
}

/* The fill measure's weight in frag's (docs/scheduling.md: chosen on the
 * four Alibaba traces, 0.5 to 0.6 equally good). */
#define FRAG_FILL 0.5

/*
 * The unfed measure's weight in frag's: 1, the free share the CPUs cannot
 * feed counts as fragmented as FGD's and the fill measure's together
 * (docs/scheduling.md: 0.5 to 20 all meet the target on the ten traces;
 * 1 and 2 measured alike).
 */
#define FRAG_UNFED 1.0

/* The free shares of n's GPUs now (0 for those held whole). */
static void
free_shares(const struct eng_node *n, int *out)
{
	int g;

	for (g = 0; g < n->ngpus; g++)
		out[g] = n->gpus[g].holder != 0 ? 0 : n->gpus[g].milli_free;
}

static double
frag_now(struct engine *e, const struct eng_node *n, int use_mem, double fill,
    double unfed)
{
	size_t i = (size_t)(n - e->nodes);
	int fr[GP_SCHED_GPUS_MAX];

	if (e->node_frag_version[i] == n->version + 1)
		return e->node_frag[i];
	free_shares(n, fr);
	e->node_frag[i] = eng_node_frag(e, n, fr, n->cpu_free, n->mem_free,
	    use_mem, fill, unfed);
	e->node_frag_version[i] = n->version + 1;
	return e->node_frag[i];
}

/* F(n) once c is taken for r, minus F(n) now. */
static double
frag_delta(struct engine *e, const struct eng_node *n, const struct part_req *r,
    const struct choice *c, int use_mem, double fill, double unfed)
{
	int fr[GP_SCHED_GPUS_MAX], i;
	int64_t mem = n->mem_free;

	free_shares(n, fr);
	for (i = 0; i < c->ngpus; i++)
		fr[c->pos[i]] -= r->shared ? r->milli : GP_SCHED_MILLI;
	if (n->mem_total != INT64_MAX)
		mem -= r->mem;
	return eng_node_frag(e, n, fr, n->cpu_free - r->cpu, mem, use_mem,
	           fill, unfed) -
	    frag_now(e, n, use_mem, fill, unfed);
}

/* The GPU memory c would use on n. */
static double
mem_used(const struct eng_node *n, const struct choice *c)
{
	double m = 0;
	int i;

	for (i = 0; i < c->ngpus; i++)
		m += (double)n->gpus[c->pos[i]].mem_total;
	return m;
}

/* GPU milli free on n once c is taken. */
static int64_t
left_after(const struct eng_node *n, const struct part_req *r,
    const struct choice *c)
{
	return n->milli_free -
	    (int64_t)c->ngpus * (r->shared ? r->milli : GP_SCHED_MILLI);
}

/* A random number in [0, 1). */
static double
uniform(struct engine *e)
{
	return (double)(eng_random(e) >> 11) / 9007199254740992.0;
}

/* The usable GPU of n with the least share free that fits r (shared). */
static int
pick_fullest(struct engine *e, const struct eng_node *n,
    const struct part_req *r, struct choice *c)
{
	int g, best = -1;

	for (g = 0; g < n->ngpus; g++) {
		if (!eng_gpu_usable(e, n, g, r))
			continue;
		if (best < 0 ||
		    n->gpus[g].milli_free < n->gpus[best].milli_free ||
		    (n->gpus[g].milli_free == n->gpus[best].milli_free &&
		        n->gpus[g].mem_free < n->gpus[best].mem_free))
			best = g;
	}
	if (best < 0)
		return -1;
	c->ngpus = 1;
	c->pos[0] = best;
	return 0;
}

/* The GPUs for r on n by the "best" rule (the artifact's default). */
static int
pick_best(struct engine *e, const struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	if (r->gpus == 0) {
		c->ngpus = 0;
		return 0;
	}
	return r->shared ? pick_fullest(e, n, r, c)
	                 : eng_pick_whole(e, n, r, c);
}

/* ---- frag: gpupool's default ---- */


/*
 * The contention term's weight: what taking a GPU whose model's rho is 1
 * costs, in GPU shares, against the fragmentation it adds (chosen on the
 * gpuspec traces: 0.25 to 0.5 equally good; 0 is the old policy).
 */
#define FRAG_CONTENTION 0.25

/*
 * What taking r's GPUs on n costs the requests that need n's model: the
 * rho of the model of each GPU r takes, times its share. r's own model
 * constraint needs no exception: every node it may use has a model it
 * accepts, and the term only weighs one such model against another.
 * Then, with the same weight, what they cost the multi-GPU requests that
 * only nodes like n could hold (n's node rho per GPU taken).
 */
static double
contention(const struct engine *e, const struct eng_node *n,
    const struct part_req *r, const struct choice *c)
{
	double rho = 0;
	int i, m;

	if (e->model_rho == NULL || r->gpus == 0)
		return 0;
	if (n->model >= 0) {
		if ((size_t)n->model < e->nmodel_rho)
			rho = e->model_rho[n->model] * r->gpus;
	} else if (c != NULL && c->ngpus > 0) {
		for (i = 0; i < c->ngpus; i++) {
			m = n->gpus[c->pos[i]].model;
			if (m >= 0 && (size_t)m < e->nmodel_rho)
				rho += e->model_rho[m];
		}
	}
	if (e->node_rho != NULL && (size_t)(n - e->nodes) < e->nnode_rho)
		rho += e->node_rho[n - e->nodes] *
		    (c != NULL && c->ngpus > 0 ? c->ngpus : r->gpus);
	return FRAG_CONTENTION * rho *
	    (double)(r->shared ? r->milli : GP_SCHED_MILLI);
}

static int
score_frag(struct engine *e, struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	struct score_cache *sc = NULL;
	struct choice t;
	double d, best = 0;
	int g, h, found = 0, dup;

	if (r->gpus == 0) {
		/* CPUs and memory taken may strand GPUs too. */
		c->ngpus = 0;
		c->score =
		    e->nmix > 0 ? frag_delta(e, n, r, c, 1, FRAG_FILL, FRAG_UNFED) : 0;
		c->tie = (double)n->milli_free;
		return 0;
	}
	if (r->shape >= 0 && !r->avoid_reserved && e->cache != NULL) {
		sc = &e->cache[(size_t)(n - e->nodes) * e->capshapes +
		    (size_t)r->shape];
		/* A node of several models: its contention term depends on
		 * the GPUs picked, so it is scored afresh. */
		if (sc->version == n->version + 1 && !r->no_cache &&
		    (n->model >= 0 || e->model_rho == NULL)) {
			if (!sc->ok)
				return -1;
			c->score = sc->score + contention(e, n, r, NULL);
			c->tie = sc->tie;
			c->ngpus = -1; /* picked again if it wins */
			return 0;
		}
	}
	if (!r->shared) {
		if (eng_pick_whole(e, n, r, c) != 0)
			goto none;
		c->score =
		    e->nmix > 0 ? frag_delta(e, n, r, c, 1, FRAG_FILL, FRAG_UNFED) : 0;
		/* Best fit, then the smallest GPUs (keep large ones). */
		c->tie = (double)left_after(n, r, c) * 1e7 + mem_used(n, c);
		found = 1;
	} else {
		/* Each distinct kind of usable GPU once. */
		memset(&t, 0, sizeof(t));
		t.ngpus = 1;
		for (g = 0; g < n->ngpus; g++) {
			if (!eng_gpu_usable(e, n, g, r))
				continue;
			for (h = 0, dup = 0; h < g && !dup; h++)
				dup = n->gpus[h].milli_free ==
				        n->gpus[g].milli_free &&
				    n->gpus[h].mem_free ==
				        n->gpus[g].mem_free &&
				    n->gpus[h].model == n->gpus[g].model &&
				    eng_gpu_usable(e, n, h, r);
			if (dup)
				continue;
			t.pos[0] = g;
			d = e->nmix > 0 ? frag_delta(e, n, r, &t, 1, FRAG_FILL,
			                      FRAG_UNFED)
			                : 0;
			/* Then the fullest GPU: the best fit. */
			if (!found || d < best - 1e-9 ||
			    (fabs(d - best) < 1e-9 &&
			        n->gpus[g].milli_free <
			            n->gpus[c->pos[0]].milli_free)) {
				best = d;
				c->ngpus = 1;
				c->pos[0] = g;
				found = 1;
			}
		}
		if (!found)
			goto none;
		c->score = best;
		c->tie = (double)left_after(n, r, c) * 1e7 + mem_used(n, c);
	}
	if (sc != NULL) {
		sc->version = n->version + 1;
		sc->ok = 1;
		sc->score = c->score;
		sc->tie = c->tie;
	}
	/* Not cached: a mixed node's term depends on the GPUs picked. */
	c->score += contention(e, n, r, c);
	return 0;
none:
	if (sc != NULL) {
		sc->version = n->version + 1;
		sc->ok = 0;
	}
	return -1;
}

/* ---- fgd: as the FGD artifact scores ---- */

static double
sigmoid(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

static int
score_fgd(struct engine *e, struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	struct score_cache *sc = NULL;
	struct choice t;
	int64_t s, best = 0;
	int g, found = 0;

	if (r->shape >= 0 && !r->avoid_reserved && e->cache != NULL) {
		sc = &e->cache[(size_t)(n - e->nodes) * e->capshapes +
		    (size_t)r->shape];
		if (sc->version == n->version + 1 && !r->no_cache) {
			if (!sc->ok)
				return -1;
			c->score = sc->score;
			c->tie = uniform(e);
			c->ngpus = -1;
			return 0;
		}
	}

	if (r->gpus == 0) {
		c->ngpus = 0;
		c->score =
		    -(double)(int64_t)(sigmoid(-frag_delta(e, n, r, c, 0, 0, 0) /
		                           1000.0) *
		        100.0);
		c->tie = uniform(e);
		return 0;
	}
	if (!r->shared) {
		/* The first free GPUs by position. */
		for (g = 0, c->ngpus = 0; g < n->ngpus && c->ngpus < r->gpus;
		     g++)
			if (eng_gpu_usable(e, n, g, r))
				c->pos[c->ngpus++] = g;
		if (c->ngpus < r->gpus)
			goto none;
		best =
		    (int64_t)(sigmoid(-frag_delta(e, n, r, c, 0, 0, 0) / 1000.0) *
		        100.0);
	} else {
		memset(&t, 0, sizeof(t));
		t.ngpus = 1;
		for (g = 0; g < n->ngpus; g++) {
			if (!eng_gpu_usable(e, n, g, r))
				continue;
			t.pos[0] = g;
			s = (int64_t)(sigmoid(-frag_delta(e, n, r, &t, 0, 0, 0) /
			                  1000.0) *
			    100.0);
			if (!found || s > best) {
				best = s;
				c->ngpus = 1;
				c->pos[0] = g;
				found = 1;
			}
		}
		if (!found)
			goto none;
	}
	c->score = -(double)best;
	c->tie = uniform(e);
	if (sc != NULL) {
		sc->version = n->version + 1;
		sc->ok = 1;
		sc->score = c->score;
	}
	return 0;
none:
	if (sc != NULL) {
		sc->version = n->version + 1;
		sc->ok = 0;
	}
	return -1;
}

/* ---- bestfit ---- */

static int
score_bestfit(struct engine *e, struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	int i;

	if (pick_best(e, n, r, c) != 0)
		return -1;
	c->score = (double)left_after(n, r, c);
	c->tie = 0;
	for (i = 0; i < c->ngpus; i++)
		c->tie += (double)n->gpus[c->pos[i]].mem_total;
	return 0;
}

/* ---- the artifact's baselines ---- */

#define MAX_SPEC_CPU 128000.0
#define MAX_SPEC_GPU 8000.0

static int
score_random(struct engine *e, struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	if (r->shared) {
		/* A random GPU among those that fit. */
		int g, cnt = 0;
		for (g = 0; g < n->ngpus; g++)
			if (eng_gpu_usable(e, n, g, r) &&
			    eng_random(e) % (uint64_t)++cnt == 0) {
				c->ngpus = 1;
				c->pos[0] = g;
			}
		if (cnt == 0)
			return -1;
	} else if (pick_best(e, n, r, c) != 0) {
		return -1;
	}
	c->score = 0;
	c->tie = uniform(e);
	return 0;
}

static int
score_dotprod(struct engine *e, struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	double dot;

	if (pick_best(e, n, r, c) != 0)
		return -1;
	/* Tetris's alignment of the free vector and the request, each
	 * normalised by the largest node; the artifact prefers the least. */
	dot = ((double)n->cpu_free / MAX_SPEC_CPU) *
	        ((double)r->cpu / MAX_SPEC_CPU) +
	    ((double)n->milli_free / MAX_SPEC_GPU) *
	        ((double)r->gpus * (r->shared ? r->milli : 1000) /
	            MAX_SPEC_GPU);
	c->score = -(double)(int64_t)(100.0 * (1.0 - dot / 2.0));
	c->tie = uniform(e);
	return 0;
}

static int
score_packing(struct engine *e, struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	int64_t s, free_share = 0;
	int i, whole_used = 0;

	if (pick_best(e, n, r, c) != 0)
		return -1;
	if (n->nfree == n->ngpus) {
		s = 100 / 3 - n->nfree; /* an idle node */
		if (s < n->nfree)
			s = n->nfree;
	} else {
		for (i = 0; i < c->ngpus; i++) {
			const struct eng_gpu *g = &n->gpus[c->pos[i]];
			if (g->nshared == 0 && g->milli_free == GP_SCHED_MILLI)
				whole_used++;
			free_share += g->milli_free * 100 / GP_SCHED_MILLI;
		}
		if (whole_used > 0) {
			s = 100 / 2 - whole_used;
			if (s < 100 / 3)
				s = 100 / 3;
		} else {
			s = 100 - free_share / 10;
			if (s < 100 / 2)
				s = 100 / 2;
		}
	}
	if (r->gpus == 0)
		s = 0;
	c->score = -(double)s;
	c->tie = uniform(e);
	return 0;
}

/*
 * Clustering: like requests together. The artifact tags a node with the
 * kinds of GPU requests it holds; without that history here, a node's
 * kind is read from its GPUs: shared (some GPU partly used), whole (some
 * GPU held whole), both, or idle.
 */
static int
score_clustering(struct engine *e, struct eng_node *n, const struct part_req *r,
    struct choice *c)
{
	int g, has_shared = 0, has_whole = 0, same, kinds;
	int64_t base, s;

	if (pick_best(e, n, r, c) != 0)
		return -1;
	for (g = 0; g < n->ngpus; g++) {
		has_shared |= n->gpus[g].nshared > 0;
		has_whole |= n->gpus[g].holder > 0;
	}
	kinds = has_shared + has_whole;
	same = r->shared ? has_shared : has_whole;
	if (r->gpus == 0)
		base = -25;
	else if (same && kinds == 1)
		base = 75;
	else if (same)
		base = 50;
	else if (kinds == 0)
		base = 25;
	else
		base = 0;
	s = base +
	    25 * (int64_t)(MAX_SPEC_GPU - (double)n->milli_free) /
	        (int64_t)MAX_SPEC_GPU;
	c->score = -(double)s;
	c->tie = uniform(e);
	return 0;
}

static const struct gp_sched_policy policies[] = {
    {"frag", "fragmentation-aware (gpupool's default)", 1, 0, 0, 0, score_frag},
    {"fgd", "Fragmentation Gradient Descent as its artifact scores", 1, 1, 0, 1,
        score_fgd},
    {"bestfit", "least GPU share left over on the node", 0, 0, 1, 0,
        score_bestfit},
    {"random", "a random node that fits", 0, 1, 0, 0, score_random},
    {"dotprod", "Tetris-style dot product of free and asked", 0, 1, 0, 0,
        score_dotprod},
    {"clustering", "like requests together", 0, 1, 0, 0, score_clustering},
    {"packing", "shared GPUs first, then used nodes, then idle ones", 0, 1, 0,
        0, score_packing},
};

const struct gp_sched_policy *
gp_sched_policy_find(const char *name)
{
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(policies); i++)
		if (strcmp(policies[i].name, name) == 0)
			return &policies[i];
	return NULL;
}

const struct gp_sched_policy *
gp_sched_policy_default(void)
{
	return &policies[0];
}

const char *
gp_sched_policy_name(const struct gp_sched_policy *policy)
{
	return policy != NULL ? policy->name : policies[0].name;
}

const char *
gp_sched_policy_names(void)
{
	return "frag, fgd, bestfit, random, dotprod, clustering, packing";
}
