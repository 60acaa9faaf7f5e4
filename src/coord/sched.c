/*
 * sched.c: TEMPORARY first-fit scheduler so the coordinator links; the
 * real one (best fit + EASY backfill) replaces this file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "sched.h"

int
gp_sched_gpu_matches(const struct gp_sched_gpu *gpu,
    const struct gp_sched_job *job)
{
	if (gpu->mem_mib < job->gpu_mem_mib)
		return 0;
	if (job->gpu_model != NULL && job->gpu_model[0] != '\0' &&
	    strcasestr(gpu->model, job->gpu_model) == NULL)
		return 0;
	return 1;
}

int
gp_sched_can_ever_fit(const struct gp_sched_node *nodes, size_t nnodes,
    const struct gp_sched_job *job, char *why, size_t whylen)
{
	size_t i;
	int g, n;

	for (i = 0; i < nnodes; i++) {
		for (n = 0, g = 0; g < nodes[i].ngpus; g++)
			n += gp_sched_gpu_matches(&nodes[i].gpus[g], job);
		if (n >= job->gpus && nodes[i].cpus >= job->cpus)
			return 1;
	}
	snprintf(why, whylen, "no node has %d matching GPUs", job->gpus);
	return 0;
}

int
gp_sched_plan(const struct gp_sched_input *in,
    struct gp_sched_assignment **out, size_t *nout)
{
	struct gp_sched_assignment *res;
	size_t q, i, n = 0;
	int g, k;
	int64_t *taken;
	size_t ntaken = 0, total = 0;

	for (i = 0; i < in->nnodes; i++)
		total += (size_t)in->nodes[i].ngpus;
	res = calloc(in->nqueue + 1, sizeof(*res));
	taken = calloc(total + 1, sizeof(*taken));
	if (res == NULL || taken == NULL) {
		free(res);
		free(taken);
		return GP_ENOMEM;
	}
	for (q = 0; q < in->nqueue; q++) {
		const struct gp_sched_job *job = &in->queue[q];
		for (i = 0; i < in->nnodes; i++) {
			struct gp_sched_node *node = &in->nodes[i];
			int free_idx[GP_SCHED_GPUS_MAX], nf = 0;
			if (!node->up)
				continue;
			for (g = 0; g < node->ngpus && nf < job->gpus; g++) {
				struct gp_sched_gpu *gpu = &node->gpus[g];
				int used = gpu->job_id != 0;
				for (k = 0; k < (int)ntaken; k++)
					if (taken[k] == (int64_t)(intptr_t)gpu)
						used = 1;
				if (!used && gp_sched_gpu_matches(gpu, job))
					free_idx[nf++] = g;
			}
			if (nf < job->gpus)
				continue;
			res[n].job_id = job->id;
			res[n].node_id = node->id;
			res[n].ngpus = job->gpus;
			for (k = 0; k < job->gpus; k++) {
				res[n].gpus[k] = node->gpus[free_idx[k]].index;
				taken[ntaken++] = (int64_t)(intptr_t)&node->gpus[free_idx[k]];
			}
			n++;
			break;
		}
	}
	free(taken);
	*out = res;
	*nout = n;
	return 0;
}
