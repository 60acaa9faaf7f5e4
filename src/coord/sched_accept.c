/*
 * sched_accept.c: the owner's acceptance predicate of the scheduler
 * (sched.h): would this node's owner take this job? Kept apart from the
 * placement policy: the planner calls it for every node it considers,
 * and the coordinator uses it to explain to a user why no node would.
 */
#include <stdio.h>
#include <string.h>

#include "sched.h"

static int
trusts_a_signer(const struct gp_sched_node *node,
    const struct gp_sched_job *job)
{
	int i, k;

	for (i = 0; i < node->ntrusted; i++)
		for (k = 0; k < job->nsigners; k++)
			if (node->trusted[i] != NULL &&
			    job->signers[k] != NULL &&
			    strcmp(node->trusted[i], job->signers[k]) == 0)
				return 1;
	return 0;
}

int
gp_sched_why_refused(const struct gp_sched_node *node,
    const struct gp_sched_job *job, char *why, size_t whylen)
{
	if (!job->image) {
		if (!node->refuse_plain)
			return 1;
		snprintf(why, whylen,
		    "takes only container images, no plain "
		    "commands");
		return 0;
	}
	switch (node->images) {
	case GP_SCHED_IMAGES_ANY:
		return 1;
	case GP_SCHED_IMAGES_NONE:
		snprintf(why, whylen, "takes no images");
		return 0;
	default:
		if (trusts_a_signer(node, job))
			return 1;
		if (job->nsigners == 0)
			snprintf(why, whylen,
			    "takes only signed images, and "
			    "this one is unsigned");
		else
			snprintf(why, whylen,
			    "trusts none of the %d key%s "
			    "that signed the image",
			    job->nsigners, job->nsigners == 1 ? "" : "s");
		return 0;
	}
}

int
gp_sched_node_accepts(const struct gp_sched_node *node,
    const struct gp_sched_job *job)
{
	char why[8];

	return gp_sched_why_refused(node, job, why, sizeof(why));
}
