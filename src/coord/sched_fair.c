/*
 * sched_fair.c: fair share: the order in which the pass takes jobs,
 * group then user by (decayed usage + what it holds) / weight, with
 * dominant resource shares. Part of the scheduler: see sched.c and
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

/* ---- fair share ---- */

static const struct gp_sched_share *
share_find(const struct gp_sched_share *t, size_t n, int64_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (t[i].id == id)
			return &t[i];
	return NULL;
}

/* The dominant share of a part held, of the up nodes' totals. */
static double
dominant(const struct engine *e, double gpus, int64_t cpu, int64_t mem)
{
	double d = 0, x;

	if (e->total_gpus > 0 && (x = gpus / (double)e->total_gpus) > d)
		d = x;
	if (e->total_cpu > 0 && (x = (double)cpu / (double)e->total_cpu) > d)
		d = x;
	if (e->total_mem > 0 && (x = (double)mem / (double)e->total_mem) > d)
		d = x;
	return d;
}

double
job_dominant(const struct engine *e, const struct gp_sched_job *job)
{
	double gpus;

	if (!job_is_shared(job))
		gpus = job->gpus > 0 ? job->gpus : 0;
	else if (job->gpu_milli > 0 && job->gpu_milli < 1000)
		gpus = job->gpu_milli / 1000.0;
	else
		gpus = 0;
	return job_parts(job) *
	    dominant(e, gpus, job->cpu_milli,
	        job->mem_mib > 0 ? job->mem_mib : 0);
}

/* Groups, their users and the users' jobs (in queue order). */
int
fair_init(struct gp_sched_engine *s, struct fair *f,
    const struct gp_sched_job *const *queue, const unsigned char *todo,
    size_t nqueue)
{
	struct engine *e = &s->e;
	size_t i, j, *user_of = NULL, pos;
	const struct gp_sched_share *sh;

	memset(f, 0, sizeof(*f));
	f->groups = calloc(nqueue + 1, sizeof(*f->groups));
	f->users = calloc(nqueue + 1, sizeof(*f->users));
	f->order = calloc(nqueue + 1, sizeof(*f->order));
	user_of = calloc(nqueue + 1, sizeof(*user_of));
	if (f->groups == NULL || f->users == NULL || f->order == NULL ||
	    user_of == NULL) {
		free(user_of);
		return GP_ENOMEM;
	}
	/* Users (group, user), in order of first appearance. */
	for (i = 0; i < nqueue; i++) {
		if (!todo[i])
			continue;
		for (j = 0; j < f->nusers; j++)
			if (f->users[j].id == queue[i]->user &&
			    f->groups[f->users[j].first].id == queue[i]->group)
				break;
		if (j == f->nusers) {
			size_t g;
			for (g = 0; g < f->ngroups; g++)
				if (f->groups[g].id == queue[i]->group)
					break;
			if (g == f->ngroups) {
				f->groups[g].id = queue[i]->group;
				sh = share_find(s->groups, s->ngroups,
				    queue[i]->group);
				f->groups[g].weight =
				    sh != NULL && sh->weight > 0 ? sh->weight
				                                 : 1;
				f->groups[g].usage =
				    sh != NULL && sh->usage > 0 ? sh->usage : 0;
				f->ngroups++;
			}
			f->users[j].id = queue[i]->user;
			f->users[j].first = g; /* its group, for now */
			sh = share_find(s->users, s->nusers, queue[i]->user);
			f->users[j].weight =
			    sh != NULL && sh->weight > 0 ? sh->weight : 1;
			f->users[j].usage =
			    sh != NULL && sh->usage > 0 ? sh->usage : 0;
			f->nusers++;
		}
		user_of[i] = j;
		f->users[j].njobs++;
	}
	/* Usage of the other groups counts in the total too. */
	for (i = 0; i < s->ngroups; i++)
		if (s->groups[i].usage > 0)
			f->usage_total += s->groups[i].usage;
	for (i = 0; i < f->ngroups; i++)
		f->weight_total += f->groups[i].weight;
	/* What each holds now (it orders only when there is a choice). */
	for (i = 0; i < s->nruns && (f->ngroups > 1 || f->nusers > 1); i++) {
		const struct run_rec *rr = &s->runs[i];
		double gpus;
		if (!rr->alive)
			continue;
		gpus = (double)__builtin_popcountll(rr->whole) +
		    (double)rr->milli / 1000.0;
		for (j = 0; j < f->ngroups; j++)
			if (f->groups[j].id == rr->group)
				f->groups[j].held +=
				    dominant(e, gpus, rr->cpu, rr->mem);
		for (j = 0; j < f->nusers; j++)
			if (f->users[j].id == rr->user &&
			    f->groups[f->users[j].first].id == rr->group)
				f->users[j].held +=
				    dominant(e, gpus, rr->cpu, rr->mem);
	}
	/* Each user's jobs together, in queue order. */
	for (j = 0, pos = 0; j < f->nusers; j++) {
		size_t g = f->users[j].first;
		f->users[j].first = pos;
		f->users[j].next_job = pos;
		pos += f->users[j].njobs;
		f->users[j].njobs = 0;
		f->users[j].taken = g; /* its group, kept here */
	}
	/*
	 * Interactive jobs first, then batch ones, each in queue order: a
	 * person waiting goes ahead of the user's own batch work, while fair
	 * share still decides which group and user goes next.
	 */
	for (int batch = 0; batch < 2; batch++)
		for (i = 0; i < nqueue; i++) {
			struct fs_user *u;
			if (!todo[i] || (queue[i]->interactive != 0) == batch)
				continue;
			u = &f->users[user_of[i]];
			f->order[u->first + u->njobs++] = i;
		}
	free(user_of);
	return 0;
}

void
fair_fini(struct fair *f)
{
	free(f->groups);
	free(f->users);
	free(f->order);
}

static double
group_key(const struct fair *f, const struct fs_group *g)
{
	double u = f->usage_total > 0 ? g->usage / f->usage_total : 0;
	double w = f->weight_total > 0 ? g->weight / f->weight_total : 1;

	return (u + g->held) / w;
}

/* The next job in fair-share order, or NONE. OUT: *user. */
size_t
fair_next(struct fair *f, size_t *user)
{
	size_t g, j, best_g = NONE, best_u = NONE;
	double key, best = 0, wsum, usum;

	for (g = 0; g < f->ngroups; g++) {
		int any = 0;
		for (j = 0; j < f->nusers; j++)
			if (f->users[j].taken == g &&
			    f->users[j].next_job <
			        f->users[j].first + f->users[j].njobs)
				any = 1;
		if (!any)
			continue;
		key = group_key(f, &f->groups[g]);
		if (best_g == NONE || key < best ||
		    (key == best && f->groups[g].id < f->groups[best_g].id)) {
			best = key;
			best_g = g;
		}
	}
	if (best_g == NONE)
		return NONE;
	wsum = usum = 0;
	for (j = 0; j < f->nusers; j++)
		if (f->users[j].taken == best_g) {
			wsum += f->users[j].weight;
			usum += f->users[j].usage;
		}
	for (j = 0; j < f->nusers; j++) {
		struct fs_user *u = &f->users[j];
		if (u->taken != best_g || u->next_job >= u->first + u->njobs)
			continue;
		key = ((usum > 0 ? u->usage / usum : 0) + u->held) /
		    (u->weight / wsum);
		if (best_u == NONE || key < best ||
		    (key == best && u->id < f->users[best_u].id)) {
			best = key;
			best_u = j;
		}
	}
	*user = best_u;
	return f->order[f->users[best_u].next_job++];
}
