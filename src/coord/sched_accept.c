/*
 * sched_accept.c: the owner's acceptance of a job (sched.h): would this
 * node's owner take this job, given its image's signers or its being a
 * plain command? Kept apart from placement: state.c passes it to the
 * planner as its `accepts` predicate, and uses it to tell a user why no
 * node would take a job.
 */
#include <stdio.h>
#include <string.h>

#include "sched.h"

static int
trusts_a_signer(const struct gp_sched_owner *owner,
    const struct gp_sched_image *job)
{
	int i, k;

	for (i = 0; i < owner->ntrusted; i++)
		for (k = 0; k < job->nsigners; k++)
			if (owner->trusted[i] != NULL &&
			    job->signers[k] != NULL &&
			    strcmp(owner->trusted[i], job->signers[k]) == 0)
				return 1;
	return 0;
}

static const char *
network_name(int n)
{
	static const char *const names[] = {"none", "internet", "lan"};

	return n >= 1 && n <= 3 ? names[n - 1] : "?";
}

int
gp_sched_why_refused(const struct gp_sched_owner *owner,
    const struct gp_sched_image *job, char *why, size_t whylen)
{
	/* A job may ask for less network than the owner allows, never more. */
	if (job->network > 1 && owner->network > 0 &&
	    job->network > owner->network) {
		snprintf(why, whylen, "lets jobs reach only network %s (the job "
		    "asks for %s)", network_name(owner->network),
		    network_name(job->network));
		return 0;
	}
	if (job->interactive && owner->refuse_interactive) {
		snprintf(why, whylen, "takes no interactive jobs "
		    "(interactive = refuse)");
		return 0;
	}
	/*
	 * A gang's parts, each on its own node, must reach each other;
	 * a node whose agent cannot link them would start a part that
	 * waits for the others until its time limit.
	 */
	if (job->gang && owner->no_gang_links) {
		snprintf(why, whylen, "cannot link a gang's parts across "
		    "nodes (its agent is not root, or its network is none)");
		return 0;
	}
	if (!job->image) {
		if (!owner->refuse_plain)
			return 1;
		snprintf(why, whylen,
		    "takes only container images, no plain commands");
		return 0;
	}
	switch (owner->images) {
	case GP_SCHED_IMAGES_ANY:
		return 1;
	case GP_SCHED_IMAGES_NONE:
		snprintf(why, whylen, "takes no images");
		return 0;
	default:
		if (trusts_a_signer(owner, job))
			return 1;
		if (job->nsigners == 0)
			snprintf(why, whylen,
			    "takes only signed images, and this one is "
			    "unsigned");
		else
			snprintf(why, whylen,
			    "trusts none of the %d key%s that signed the image",
			    job->nsigners, job->nsigners == 1 ? "" : "s");
		return 0;
	}
}

int
gp_sched_owner_accepts(const struct gp_sched_owner *owner,
    const struct gp_sched_image *job)
{
	char why[8];

	return gp_sched_why_refused(owner, job, why, sizeof(why));
}
