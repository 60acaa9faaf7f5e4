/*
 * state_job.c: job transitions: the effects a batch hands out, finish,
 * requeue, cancel, gangs (parts lost, settled), assignment and
 * preemption, the owners' acceptance, and the submit, array and cancel
 * ops. Runs in the state thread. Part of the state module (state_int.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "state.h"
#include "state_int.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "sched.h"

/* ---- effects ---- */

void
add_effect(struct node *node, json_t *assign, json_t *cancel)
{
	if (neffects == capeffects) {
		size_t cap = capeffects ? capeffects * 2 : 256;
		struct effect *e = realloc(effects, cap * sizeof(*e));
		if (e == NULL)
			gp_fatalx("out of memory");
		effects = e;
		capeffects = cap;
	}
	effects[neffects].node = node;
	effects[neffects].assign = assign;
	effects[neffects].cancel = cancel;
	effects[neffects].stop = NULL;
	neffects++;
}

void
add_effect_stop(struct node *node, json_t *stop)
{
	add_effect(node, NULL, NULL);
	effects[neffects - 1].stop = stop;
}

void
wake_job_later(struct job *job)
{
	if (nwoken == capwoken) {
		size_t cap = capwoken ? capwoken * 2 : 256;
		struct job **w = realloc(woken_jobs, cap * sizeof(*w));
		if (w == NULL)
			gp_fatalx("out of memory");
		woken_jobs = w;
		capwoken = cap;
	}
	woken_jobs[nwoken++] = job;
}

void
persist_job(const struct job *job)
{
	if (state.store->ops->put_job(state.store, job) != 0)
		gp_fatalx("cannot write job %lld to the store: %s",
		    (long long)job->id, gp_store_error(state.store));
}

static json_t *
cancel_json(const struct job *job)
{
	return json_pack("{s:I,s:i}", "job_id", (json_int_t)job->id, "attempt",
	    job->attempts);
}

/* ---- transitions ---- */

static void
history_close(struct job *job, const char *reason)
{
	struct attempt_record *a;

	if (job->nhistory == 0)
		return;
	a = &job->history[job->nhistory - 1];
	if (a->attempt != job->attempts || a->finished_ms != 0)
		return;
	a->finished_ms = gp_now_ms();
	bill_attempt_end(job, a);
	gp_strlcpy(a->reason, reason, sizeof(a->reason));
	job_net_bytes(job, &a->net_sent, &a->net_received);
}

void
job_net_bytes(const struct job *job, int64_t *sent, int64_t *received)
{
	int k;

	*sent = *received = 0;
	for (k = 0; job->parts != NULL && k < job->nparts; k++) {
		*sent += atomic_load(&job->parts[k].net_sent);
		*received += atomic_load(&job->parts[k].net_received);
	}
}

/*
 * Part k of job no longer holds anything: off its node, out of the
 * scheduler's engine, its meter closed (a gang's parts are billed one by
 * one). The part keeps node_id (the history names it) until the next
 * assignment; ended marks it.
 */
void
part_release(struct job *job, int k)
{
	struct job_part *p = &job->parts[k];
	struct node *node;

	if (p->ended || p->node_id == 0)
		return;
	node = state_node(p->node_id);
	if (node != NULL) {
		node_remove_job(node, job, k);
		live_part_ended(job, node);
	}
	bill_part_end(job, k);
	p->ended = 1;
	/* Its overlay key dies with it (its agent drops its own). */
	live_overlay_forget(job, k);
}

static void
job_release_all(struct job *job)
{
	int k;

	for (k = 0; k < job->nparts; k++)
		part_release(job, k);
}

void
job_finish(struct job *job, enum job_state st, const char *reason)
{
	if (job->state == JOB_RUNNING) {
		job_release_all(job);
		live_array_running(job, -1);
	}
	queue_remove(job);
	history_close(job, reason);
	job->state = st;
	job->finished_ms = gp_now_ms();
	job->stopping[0] = '\0';
	job->preempt_for = 0;
	retry_clear(job);
	gp_strlcpy(job->reason, reason, sizeof(job->reason));
	persist_job(job);
	wake_job_later(job);
	done_push(job->id);
	state.sched_dirty = 1;
	gp_info("job finished job=%lld state=%s reason=%s exit=%d signal=%d",
	    (long long)job->id, job_state_name(st), reason, job->exit_code,
	    job->signal);
}

#define MAX_ATTEMPTS 200

/*
 * An attempt is gone (node lost, agent forgot it, could not start it):
 * try again, elsewhere if it can, after a back-off if it failed to start
 * (state_retry.c).
 */
static void
job_requeue(struct job *job, const char *why)
{
	struct node *node = state_node(job->node_id);
	char note[288], reason[64], after[64] = "";
	int64_t delay;

	/* A copy: why is often job->stopping, which is cleared below. */
	gp_strlcpy(reason, why, sizeof(reason));

	if (job->cancel_requested) {
		job_finish(job, JOB_CANCELLED, "cancelled");
		return;
	}
	if (job->state == JOB_RUNNING && job->attempts >= MAX_ATTEMPTS) {
		job->has_exit = 0;
		free(job->message);
		job->message = strdup("gave up after too many attempts");
		job_finish(job, JOB_FAILED, reason);
		return;
	}
	job_release_all(job);
	history_close(job, reason);
	metrics_job_requeued(reason);
	if (job->state == JOB_RUNNING)
		live_array_running(job, -1);
	delay = retry_requeued(job, reason, job->started_ack);
	if (delay > 0)
		snprintf(after, sizeof(after),
		    ", next try in %lld s (failed start %d in a row)",
		    (long long)((delay + 999) / 1000), job->retry->failures);
	job->state = JOB_QUEUED;
	job->ngpus = 0;
	job->started_ack = 0;
	job->stopping[0] = '\0';
	job->preempt_for = 0;
	snprintf(note, sizeof(note),
	    "[gpupool: attempt %d on node %s ended: %s; job requeued%s]",
	    job->attempts, node != NULL ? node->name : "?", reason, after);
	joblog_note(job, note);
	queue_insert(job);
	persist_job(job);
	state.sched_dirty = 1;
	gp_info("job requeued job=%lld attempt=%d reason=%s backoff_ms=%lld",
	    (long long)job->id, job->attempts, reason, (long long)delay);
}

/*
 * Asks every part of job that still runs to save its work and stop
 * (the checkpoint signal, the owner's grace, a final upload), with
 * reason ("preempted", "gang_stopped"): what a reclaim does, asked by
 * the coordinator. The parts report back with that reason.
 */
static void
job_stop_parts(struct job *job, const char *reason)
{
	int k;

	for (k = 0; k < job->nparts; k++) {
		struct job_part *p = &job->parts[k];
		struct node *node = state_node(p->node_id);
		if (p->ended || node == NULL)
			continue;
		add_effect_stop(node, json_pack("{s:I,s:i,s:s}", "job_id",
		    (json_int_t)job->id, "attempt", job->attempts, "reason",
		    reason));
	}
}

/* Kills every part of job that still runs (a failed gang, a cancel). */
void
job_cancel_parts(struct job *job)
{
	int k;

	for (k = 0; k < job->nparts; k++) {
		struct job_part *p = &job->parts[k];
		struct node *node = state_node(p->node_id);
		if (p->ended || node == NULL)
			continue;
		add_effect(node, NULL, cancel_json(job));
	}
}

/* 1 when every part of the current attempt has ended. */
static int
all_parts_ended(const struct job *job)
{
	int k;

	for (k = 0; k < job->nparts; k++)
		if (!job->parts[k].ended && job->parts[k].node_id != 0)
			return 0;
	return 1;
}

/*
 * What ends a gang once its last part has ended: a cancel, a part that
 * failed, a stop (requeue with the reason of the part that was lost), or
 * every part's success.
 */
void
gang_settle(struct job *job)
{
	if (!all_parts_ended(job))
		return;
	if (job->cancel_requested)
		job_finish(job, JOB_CANCELLED, "cancelled");
	else if (job->stopping[0] != '\0')
		job_requeue(job, job->stopping);
	else if (job->gang_failed != 0)
		job_finish(job, (enum job_state)job->gang_failed, job->reason);
	else
		job_finish(job, JOB_SUCCEEDED, "exited");
}

/*
 * Part k of a running job is gone or gave its GPU back (node lost, owner
 * reclaimed, preempted): an ordinary job goes back to the queue; a gang
 * stops its other parts (each saves its work) and goes back to the
 * queue, whole, once they all have.
 */
void
job_part_lost(struct job *job, int k, const char *reason)
{
	/* Its node could not start it: the next attempts keep off it. */
	retry_node_failed(job, job->parts[k].node_id, reason);
	if (job->nparts <= 1) {
		job_requeue(job, reason);
		return;
	}
	part_release(job, k);
	if (job->stopping[0] == '\0' && !job->cancel_requested &&
	    job->gang_failed == 0) {
		gp_strlcpy(job->stopping, reason, sizeof(job->stopping));
		gp_info("gang stopping job=%lld attempt=%d part=%d reason=%s",
		    (long long)job->id, job->attempts, k, reason);
		job_stop_parts(job, "gang_stopped");
		persist_job(job);
	}
	gang_settle(job);
}

/*
 * Places job's parts (one assignment each, by part) in one attempt. The
 * rank-0 part's node is the job's node.
 */
void
state_job_assign(struct job *job, const struct gp_sched_assignment *const *as)
{
	struct attempt_record *rec;
	struct node *n0 = state_node(as[0]->node_id);
	char note[160];
	int i, k;

	metrics_job_assigned(job, gp_now_ms());
	queue_remove(job);
	job->attempts++;
	job->state = JOB_RUNNING;
	live_array_running(job, 1);
	job->node_id = n0->id;
	job->ngpus = as[0]->ngpus;
	for (i = 0; i < as[0]->ngpus; i++)
		job->gpus[i] = (uint8_t)as[0]->gpus[i];
	job->started_ack = 0;
	atomic_store(&job->assigned_mono, gp_mono_ms());
	job->started_ms = gp_now_ms();
	job->stopping[0] = '\0';
	job->reason[0] = '\0';
	job->has_exit = 0;
	job->exit_code = job->signal = 0;
	job->preempting = 0;
	job->preempt_for = 0;
	job->gang_failed = 0;
	job->wait_reason = 0;
	for (k = 0; k < job->nparts; k++) {
		struct job_part *p = &job->parts[k];
		const struct gp_sched_assignment *a = as[k];
		memset(p->gpus, 0, sizeof(p->gpus));
		p->node_id = a->node_id;
		p->ngpus = a->ngpus;
		for (i = 0; i < a->ngpus; i++)
			p->gpus[i] = (uint8_t)a->gpus[i];
		p->gpu_milli = a->gpu_milli;
		p->gpu_mem_mib = a->gpu_milli < GP_SCHED_MILLI ? a->gpu_mem_mib
		                                               : 0;
		p->started_ack = 0;
		p->ended = 0;
		p->delivered_mono = 0;
		atomic_store(&p->net_sent, 0);
		atomic_store(&p->net_received, 0);
		node_take_part(state_node(a->node_id), job, k);
	}
	if (job->nparts > 1)
		job->master_port = live_master_port(job);
	if (job->attempts > 1) {
		snprintf(note, sizeof(note), "[gpupool: attempt %d on node %s]",
		    job->attempts, n0->name);
		joblog_note(job, note);
		for (k = 1; k < job->nparts; k++)
			joblog_part_note(job, k, note);
	}
	job->log_base = job->log_size;
	for (k = 1; k < job->nparts; k++)
		job->parts[k].log_base = job->parts[k].log_size;
	rec = realloc(job->history,
	    (size_t)(job->nhistory + 1) * sizeof(*rec));
	if (rec == NULL)
		gp_fatalx("out of memory");
	job->history = rec;
	rec = &job->history[job->nhistory++];
	memset(rec, 0, sizeof(*rec));
	rec->attempt = job->attempts;
	rec->node_id = n0->id;
	rec->started_ms = job->started_ms;
	if (job->nparts > 1) {
		rec->more = calloc((size_t)job->nparts - 1, sizeof(*rec->more));
		if (rec->more == NULL)
			gp_fatalx("out of memory");
		rec->nmore = job->nparts - 1;
		for (k = 1; k < job->nparts; k++)
			rec->more[k - 1].node_id = job->parts[k].node_id;
	}
	/* (before the row: the store keeps its public keys and slots) */
	live_overlay_keys(job);
	persist_job(job);
	for (k = 0; k < job->nparts; k++)
		add_effect(state_node(job->parts[k].node_id),
		    assignment_json(job, k), NULL);
	gp_debug("job assigned job=%lld attempt=%d node=%s gpus=%d parts=%d",
	    (long long)job->id, job->attempts, n0->name, job->ngpus,
	    job->nparts);
}

/*
 * The scheduler preempts victim for for_job (provider first): its agent
 * is asked to save and stop; it keeps its GPUs until it has, and is then
 * requeued with reason "preempted" (apply_finished).
 */
void
state_job_preempt(struct job *victim, const struct job *for_job)
{
	struct attempt_record *a = current_attempt(victim);

	if (victim->state != JOB_RUNNING || victim->preempt_for != 0)
		return;
	victim->preempt_for = for_job->id;
	if (a != NULL)
		a->preempt_for = for_job->id;
	if (victim->nparts > 1)
		gp_strlcpy(victim->stopping, "preempted",
		    sizeof(victim->stopping));
	job_stop_parts(victim, "preempted");
	persist_job(victim);
	gp_info("job preempted job=%lld attempt=%d for=%lld group=%lld",
	    (long long)victim->id, victim->attempts, (long long)for_job->id,
	    (long long)for_job->group_id);
}

void
state_queue_compact(void)
{
	queue_compact();
}

/* What a node's owner accepts (its offer), for sched_accept.c. */
static void
owner_of(const struct node *node, struct gp_sched_owner *o)
{
	o->images = node->images;
	o->refuse_plain = node->refuse_plain;
	o->network = node->network;
	o->refuse_interactive = node->refuse_interactive;
	o->no_gang_links = node->no_gang_links;
	o->trusted = node->trusted_keys;
	o->ntrusted = node->ntrusted;
}

/* What a job is to an owner: its image's signers, or a plain command. */
static void
image_of(const struct job *job, struct gp_sched_image *im)
{
	im->image = job->spec.image[0] != '\0';
	im->signers = job->signer_keys;
	im->nsigners = job->nsigners;
	im->network = job->spec.network;
	im->interactive = job->spec.interactive;
	im->gang = job->spec.nodes > 1;
}

/* A count kept by offer_apply: this was a walk over every node, 7 % of
 * the coordinator's CPU while 10,000 nodes took a backlog. */
int
state_any_refuses_plain(void)
{
	return state.nrefuse_plain > 0;
}

int
state_refuses_job(const struct gp_jobspec *spec)
{
	return (spec->image[0] == '\0' && state.nrefuse_plain > 0) ||
	    (spec->interactive && state.nrefuse_interactive > 0) ||
	    (spec->nodes > 1 && state.nno_gang_links > 0);
}

/* The planner's acceptance predicate: the node's owner and the job. */
int
state_owner_accepts(void *arg, const struct gp_sched_node *n,
    const struct gp_sched_job *j)
{
	const struct node *node = state_node(n->id);
	const struct job *job = state_job(j->id);
	struct gp_sched_owner o;
	struct gp_sched_image im;

	(void)arg;
	if (node == NULL || job == NULL)
		return 1;
	owner_of(node, &o);
	image_of(job, &im);
	return gp_sched_owner_accepts(&o, &im);
}

/*
 * Keeps in nodes[0..*n) the nodes whose owners would accept job; why
 * lists the others' refusals ("" when none refuses). Returns 0 when no
 * node would accept it (*n unchanged), else 1.
 */
static int
accepting_nodes(struct gp_sched_node *nodes, size_t *n,
    const struct gp_sched_image *im, char *why, size_t whylen)
{
	struct gp_sched_owner o;
	struct gp_buf b = {0};
	char one[160];
	size_t i, k = 0;

	for (i = 0; i < *n; i++) {
		const struct node *nd = state_node(nodes[i].id);
		if (nd == NULL)
			continue;
		owner_of(nd, &o);
		if (gp_sched_why_refused(&o, im, one, sizeof(one))) {
			nodes[k++] = nodes[i];
			continue;
		}
		if (i < 8)
			gp_buf_printf(&b, "%snode %s %s", b.len ? "; " : "",
			    nd->name, one);
	}
	gp_strlcpy(why, b.data != NULL ? b.data : "", whylen);
	gp_buf_free(&b);
	if (k == 0)
		return 0;
	*n = k;
	return 1;
}

void
job_set_signers(struct job *job, json_t *signers)
{
	json_t *v;
	size_t i;

	free(job->signer_keys);
	json_decref(job->signers);
	job->signer_keys = NULL;
	job->nsigners = 0;
	job->signers = signers;
	if (!json_is_array(signers) || json_array_size(signers) == 0)
		return;
	job->signer_keys = calloc(json_array_size(signers),
	    sizeof(*job->signer_keys));
	if (job->signer_keys == NULL)
		return;
	json_array_foreach(signers, i, v)
		if (json_is_string(v))
			job->signer_keys[job->nsigners++] =
			    json_string_value(v);
}

void
job_acceptance(const struct job *job, char *why, size_t len)
{
	struct gp_sched_node *snodes;
	struct gp_sched_image im;
	size_t nn;

	why[0] = '\0';
	if (job->spec.image[0] == '\0' && job->spec.network <= 1 &&
	    !state_refuses_job(&job->spec))
		return; /* cheap: no owner refuses what it is */
	if (live_hw_nodes(&snodes, &nn) != 0)
		return;
	image_of(job, &im);
	if (nn > 0 && !accepting_nodes(snodes, &nn, &im, why, len)) {
		char tmp[1024];
		snprintf(tmp, sizeof(tmp), "no node would accept it: %s", why);
		gp_strlcpy(why, tmp, len);
	} else if (nn > 0 && job->spec.nodes > 1 && why[0] != '\0') {
		/* A gang: too few nodes up would take a part of it. */
		char tmp[1024];
		size_t i, up = 0;

		/* (live_hw_nodes' up is as of the last registration) */
		for (i = 0; i < nn; i++) {
			const struct node *nd = state_node(snodes[i].id);

			up += nd != NULL && nd->up && nd->accepting &&
			    !nd->left;
		}
		if (up < (size_t)job->spec.nodes) {
			snprintf(tmp, sizeof(tmp), "only %zu of the nodes up "
			    "would take a part of this gang of %d: %s", up,
			    job->spec.nodes, why);
			gp_strlcpy(why, tmp, len);
		} else
			why[0] = '\0';
	} else
		why[0] = '\0';
	free(snodes);
}

void
apply_image_signed(struct op *op)
{
	const char *digest = json_string_value(json_object_get(op->body,
	    "digest"));
	json_t *key = json_object_get(op->body, "key"), *list, *v;
	const char *d;
	int64_t id;
	size_t i;
	int have;

	if (digest == NULL || !json_is_string(key))
		return;
	for (id = 1; id < state.next_job_id; id++) {
		struct job *j = state.jobs[id];
		if (j == NULL || job_finished(j) ||
		    (d = gp_jobspec_image_digest(&j->spec)) == NULL ||
		    strcmp(d, digest) != 0)
			continue;
		have = 0;
		json_array_foreach(j->signers, i, v)
			if (json_equal(v, key))
				have = 1;
		if (have)
			continue;
		list = json_is_array(j->signers) ? json_copy(j->signers)
						 : json_array();
		json_array_append(list, key);
		job_set_signers(j, list);
		state.sched_dirty = 1;
	}
}

void
state_note_image_signed(const char *digest, const char *key)
{
	struct op *op = op_new(OP_IMAGE_SIGNED, NULL);

	if (op == NULL)
		return;
	op->body = json_pack("{s:s,s:s}", "digest", digest, "key", key);
	state_submit_op(op);
}

/*
 * An interactive job's time limit (docs/scheduling.md): the pool's
 * default when it asks for none, refused beyond the pool's maximum (0:
 * none configured). Returns 0, or GP_EINVAL with the op's error set.
 */
static int
interactive_time(struct op *op)
{
	const struct coord_config *cfg = &state.cfg;
	char most[32];

	if (!op->spec.interactive)
		return 0;
	if (op->spec.time_limit_s == 0)
		op->spec.time_limit_s = cfg->interactive_time_s;
	if (cfg->interactive_time_max_s > 0 &&
	    op->spec.time_limit_s > cfg->interactive_time_max_s) {
		gp_format_duration(cfg->interactive_time_max_s, most,
		    sizeof(most));
		set_error(op, 400, "time_limit_s: an interactive job runs at "
		    "most %s in this pool (--interactive-time-max)", most);
		return GP_EINVAL;
	}
	return 0;
}

/*
 * A submission's checks, on op->spec: its group (op->spec.group becomes
 * the group's name) and whether any node could ever run it. Returns 0
 * with *group_id, or with the op's error set GP_EPERM (not a member),
 * GP_ENOENT (no such group), GP_ENOMEM, or GP_EINVAL (no node would or
 * could ever run it).
 */
static int
submit_check(struct op *op, int64_t *group_id)
{
	struct gp_sched_node *snodes = NULL;
	struct gp_sched_job sj;
	struct gp_sched_image im;
	struct job tmpjob;
	size_t nn = 0;
	int fits;
	char why[1024], refused[1024] = "";

	switch (state_job_group(&op->caller, op->spec.group, group_id)) {
	case 0:
		break;
	case GP_EPERM:
		set_error(op, 403, "group: %s is not a member of group '%s'",
		    op->caller.name, op->spec.group);
		return GP_EPERM;
	default:
		set_error(op, 400, "group: no group '%s'", op->spec.group);
		return GP_ENOENT;
	}
	gp_strlcpy(op->spec.group, ledger_group_name(&ledger, *group_id),
	    sizeof(op->spec.group));
	if (interactive_time(op) != 0)
		return GP_EINVAL;
	/*
	 * Can any node we know, up or down, ever run it? When an owner
	 * picks what it runs (images, no plain commands, networks), only
	 * among the nodes whose owners would accept it.
	 */
	if (op->spec.image[0] == '\0' && !state_refuses_job(&op->spec) &&
	    op->spec.network <= 1) {
		fits = live_can_ever_fit(&op->spec, why, sizeof(why));
	} else {
		if (live_hw_nodes(&snodes, &nn) != 0) {
			set_error(op, 503, "out of memory");
			return GP_ENOMEM;
		}
		live_sched_job(NULL, &op->spec, &sj);
		memset(&tmpjob, 0, sizeof(tmpjob));
		tmpjob.spec = op->spec; /* (borrowed: image_of reads it) */
		if (json_is_array(op->body)) {
			/* The image's signers (image_resolve, the handler). */
			job_set_signers(&tmpjob, json_incref(op->body));
		}
		image_of(&tmpjob, &im);
		if (nn > 0 && !accepting_nodes(snodes, &nn, &im, refused,
		    sizeof(refused))) {
			free(snodes);
			job_set_signers(&tmpjob, NULL);
			set_error(op, 422, "no node in the pool would accept "
			    "this job: %s", refused);
			return GP_EINVAL;
		}
		fits = gp_sched_can_ever_fit(snodes, nn, &sj, why,
		    sizeof(why));
		job_set_signers(&tmpjob, NULL);
		free(snodes);
	}
	if (fits < 0) {
		set_error(op, 503, "out of memory");
		return GP_ENOMEM;
	}
	if (!fits && refused[0] != '\0') {
		/* Among those that would accept it: say why the rest not. */
		set_error(op, 422, "no node in the pool can ever run this job: "
		    "%s (of the nodes that would accept it; the others: %s)",
		    why, refused);
		return GP_EINVAL;
	}
	if (!fits) {
		set_error(op, 422, "no node in the pool can ever run this job: %s",
		    why);
		return GP_EINVAL;
	}
	return 0;
}

/*
 * New jobs come from blocks of JOB_BLOCK, zeroed: one block costs one
 * allocation (fresh pages, mapped at once) where a job each grew the
 * state thread's malloc arena a page at a time, an mprotect call every
 * second job (480 for an array of 1,000 tasks). Blocks are never freed:
 * a job that leaves memory (purge_finished) gives its place back to
 * job_free_slots, and the next job takes it first.
 */
#define JOB_BLOCK 1024
static struct job **job_blocks; /* every block (kept reachable) */
static size_t njob_blocks, job_block_used = JOB_BLOCK;
static struct job **job_free_slots;
static size_t nfree_slots, capfree_slots;

static struct job *
job_alloc(void)
{
	struct job **bl, *b;

	if (nfree_slots > 0) {
		b = job_free_slots[--nfree_slots];
		memset(b, 0, sizeof(*b));
		b->in_block = 1;
		return b;
	}
	if (job_block_used == JOB_BLOCK) {
		bl = realloc(job_blocks, (njob_blocks + 1) * sizeof(*bl));
		if (bl == NULL)
			return NULL;
		job_blocks = bl;
		if ((b = calloc(JOB_BLOCK, sizeof(*b))) == NULL)
			return NULL;
		job_blocks[njob_blocks++] = b;
		job_block_used = 0;
	}
	b = &job_blocks[njob_blocks - 1][job_block_used++];
	b->in_block = 1;
	return b;
}

/*
 * Frees what a job owns and the job: a block's slot goes back to
 * job_free_slots (state thread, write lock), a malloc'd job (loaded at
 * start-up, or read back by store_read_job) to free.
 */
void
job_free(struct job *job)
{
	int i;

	gp_jobspec_fini(&job->spec);
	free(job->message);
	free(job->retry);
	for (i = 0; job->history != NULL && i < job->nhistory; i++) {
		free(job->history[i].ckpt_label);
		free(job->history[i].more);
	}
	free(job->history);
	for (i = 0; job->parts != NULL && i < job->nparts; i++)
		live_overlay_forget(job, i);
	free(job->parts);
	free(job->signer_keys);
	json_decref(job->signers);
	if (job->wait != NULL) /* (a finished job has none) */
		free(job->wait->hold_reason);
	free(job->wait);
	if (!job->in_block) {
		free(job);
		return;
	}
	if (nfree_slots == capfree_slots) {
		size_t cap = capfree_slots ? capfree_slots * 2 : 1024;
		struct job **p = realloc(job_free_slots, cap * sizeof(*p));
		if (p == NULL)
			return; /* the slot is lost, not the job's data */
		job_free_slots = p;
		capfree_slots = cap;
	}
	job_free_slots[nfree_slots++] = job;
}

void
state_job_stored_free(struct job *job)
{
	if (job != NULL)
		job_free(job);
}

/*
 * A queued job of op's caller with *spec, which it takes (*spec is left
 * empty), in memory (the caller persists it). NULL, with the op's error
 * set, when out of memory.
 */
/*
 * An empty env or data list is one shared value: nothing changes a job's
 * spec once the job is made, and most jobs have neither (an empty
 * jansson object with its table costs about 250 bytes, an empty array
 * about 100: 35 MB over 100,000 jobs).
 */
static void
share_empty(json_t **value, json_t **shared, json_t *(*make)(void))
{
	int empty = json_is_object(*value) ? json_object_size(*value) == 0
	    : json_is_array(*value)	       ? json_array_size(*value) == 0
					       : 0;

	if (!empty || (*shared == NULL && (*shared = make()) == NULL))
		return;
	json_decref(*value);
	*value = json_incref(*shared);
}

static struct job *
submit_make(struct op *op, struct gp_jobspec *spec, int64_t group_id)
{
	static json_t *empty_env, *empty_data;
	struct job *job = job_alloc();

	if (job == NULL) {
		set_error(op, 503, "out of memory");
		return NULL;
	}
	job->id = state.next_job_id;
	gp_strlcpy(job->user, op->caller.name, sizeof(job->user));
	share_empty(&spec->env, &empty_env, json_object);
	share_empty(&spec->data, &empty_data, json_array);
	job->spec = *spec;
	/* The job owns the spec now (no new empty containers: an array
	 * makes a thousand jobs; gp_jobspec_fini takes NULLs). */
	memset(spec, 0, sizeof(*spec));
	job->state = JOB_QUEUED;
	job->submitted_ms = gp_now_ms();
	job->queue_pos = -1;
	if (json_is_array(op->body))
		job_set_signers(job, json_incref(op->body));
	job->group_id = group_id;
	job->user_id = live_user_id(job->user);
	live_sched_job(job, &job->spec, &job->sj);
	if (job_parts_alloc(job) != 0 || job_insert(job) != 0 ||
	    queue_insert(job) != 0) {
		set_error(op, 503, "out of memory");
		return NULL;
	}
	state.sched_dirty = 1;
	return job;
}

/*
 * A submission whose key its user gave before (docs/api.md): answered as
 * the first one was (200, "repeated"), or 409 when the key made the other
 * kind (one job, a job array). 1 when answered, 0 when the key is new or
 * there is none.
 */
static int
submit_repeat(struct op *op, const char *key, int array)
{
	int64_t prior, count;
	int found;

	if (key[0] == '\0')
		return 0;
	found = submit_key_find(op->caller.name, key, gp_now_ms(), &prior,
	    &count);
	if (found < 0) {
		set_error(op, 500, "cannot read the submission keys");
		return 1;
	}
	if (!found)
		return 0;
	if ((count > 0) != array) {
		set_error(op, 409, "idempotency_key: already used for %s %lld",
		    count > 0 ? "the job array" : "the job", (long long)prior);
		return 1;
	}
	op->status = 200;
	op->result = array ? json_pack("{s:I,s:I,s:I,s:I,s:b}",
	    "array_job_id", (json_int_t)prior, "first_id", (json_int_t)prior,
	    "last_id", (json_int_t)(prior + count - 1), "count",
	    (json_int_t)count, "repeated", 1) : json_pack("{s:I,s:b}", "id",
	    (json_int_t)prior, "repeated", 1);
	return 1;
}

void
apply_submit(struct op *op)
{
	char key[sizeof(op->spec.idempotency_key)];
	struct job *job;
	int64_t group_id;

	/* (A copy: submit_make takes op->spec's fields.) */
	memcpy(key, op->spec.idempotency_key, sizeof(key));
	/* A repeat of a submission (its key known): the first one's job. */
	if (submit_repeat(op, key, 0))
		return;
	if (submit_check(op, &group_id) != 0 ||
	    (job = submit_make(op, &op->spec, group_id)) == NULL)
		return;
	persist_job(job);
	/* In this batch's transaction: the job and its key, or neither. */
	if (key[0] != '\0' && submit_key_put(op->caller.name, key, job->id, 0,
	    gp_now_ms()) != 0)
		gp_fatalx("cannot write the submission key of job %lld",
		    (long long)job->id);
	op->status = 201;
	op->result = json_pack("{s:I,s:s}", "id", (json_int_t)job->id, "state",
	    "queued");
}

/*
 * A job array: one job per task, ids consecutive from the first (the
 * array's id), all or none. The checks are the same for every task, so
 * they are made once; a later failure (memory) cancels the tasks already
 * made, so that none runs. Stored as one row (put_array, store.h): a task
 * gets a row of its own when it changes.
 */
void
apply_submit_array(struct op *op)
{
	int64_t first = state.next_job_id, group_id, now = gp_now_ms();
	const char *key = op->spec.idempotency_key;
	struct gp_jobspec spec;
	struct job *job;
	int i, k;

	/* A repeat (its key known): the first submission's tasks. */
	if (submit_repeat(op, key, 1) || submit_check(op, &group_id) != 0)
		return;
	op->spec.array_job_id = first;
	op->spec.array_task_id = 0;
	for (i = 0; i < op->ntasks; i++) {
		/*
		 * The tasks share the spec's command, env and data: nothing
		 * changes them once a job is made (replies hold them too,
		 * job_to_json), and jansson counts references atomically.
		 */
		spec = op->spec;
		json_incref(spec.command);
		json_incref(spec.env);
		json_incref(spec.data);
		spec.image = NULL; /* (its own copy: op->spec keeps its) */
		if (gp_jobspec_set_image(&spec, op->spec.image) != 0) {
			gp_jobspec_fini(&spec);
			set_error(op, 503, "out of memory");
			break;
		}
		spec.array_task_id = op->tasks[i];
		job = submit_make(op, &spec, group_id);
		gp_jobspec_fini(&spec);
		if (job == NULL)
			break;
		job->submitted_ms = now; /* as the array's row has it */
	}
	if (i == op->ntasks) {
		if (state.store->ops->put_array(state.store, first,
			op->caller.name, &op->spec, op->tasks, op->ntasks,
			now) != 0)
			gp_fatalx("cannot write job array %lld to the database",
			    (long long)first);
		/* In this batch's transaction, as the array's row. */
		if (key[0] != '\0' && submit_key_put(op->caller.name, key,
		    first, op->ntasks, now) != 0)
			gp_fatalx("cannot write the submission key of job "
			    "array %lld", (long long)first);
		op->status = 201;
		op->result = json_pack("{s:I,s:I,s:I,s:i,s:s}", "array_job_id",
		    (json_int_t)first, "first_id", (json_int_t)first,
		    "last_id", (json_int_t)(first + op->ntasks - 1), "count",
		    op->ntasks, "state", "queued");
		return;
	}
	for (k = 0; k < i; k++) {
		struct job *j = state_job(first + k);
		if (j != NULL && !job_finished(j))
			job_finish(j, JOB_CANCELLED, "array_incomplete");
	}
}

void
apply_idle(struct op *op)
{
	struct job *job = state_job(op->job_id);
	struct attempt_record *a;

	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != op->attempt || job->nhistory == 0)
		return;
	a = &job->history[job->nhistory - 1];
	if (a->attempt != op->attempt || (a->idle_limit_ms ==
	    op->idle_limit_ms && a->idle_seen_ms >= op->idle_seen_ms))
		return;
	a->idle_limit_ms = op->idle_limit_ms;
	if (op->idle_seen_ms > a->idle_seen_ms)
		a->idle_seen_ms = op->idle_seen_ms;
	persist_job(job);
}

void
state_note_idle(int64_t job_id, int attempt, int64_t limit_ms,
    int64_t seen_ms)
{
	struct op *op = op_new(OP_IDLE, NULL);

	if (op == NULL)
		return;
	op->job_id = job_id;
	op->attempt = attempt;
	op->idle_limit_ms = limit_ms;
	op->idle_seen_ms = seen_ms;
	state_submit_op(op);
}

/*
 * Who ended job, in its message ("cancelled by alice", "ended by its idle
 * limit"), so that a CLI waiting on it (`wait`, `jupyter`,
 * `port-forward`) can say why. The relay's idle end cancels as the
 * admin "idle-limit" with no token (relay.c's cancel_for_idle). Without
 * memory the job merely keeps no note.
 */
static void
note_canceller(struct job *job, const struct token_entry *caller)
{
	char text[GP_NAME_MAX + 32];

	if (caller->id == 0 && strcmp(caller->name, "idle-limit") == 0)
		gp_strlcpy(text, "ended by its idle limit (no interactive "
		    "traffic)", sizeof(text));
	else
		snprintf(text, sizeof(text), "cancelled by %s%s", caller->name,
		    strcmp(caller->name, job->user) != 0 &&
		    caller->role == GP_ROLE_ADMIN ? " (an admin)" : "");
	free(job->message);
	job->message = strdup(text);
}

void
apply_cancel(struct op *op)
{
	int stored;
	struct job *job = state_job_any(op->job_id, &stored);

	if (job == NULL || !job_visible_to(job, &op->caller)) {
		set_error(op, 404, "no job %lld", (long long)op->job_id);
		if (stored)
			state_job_stored_free(job);
		return;
	}
	if (job_finished(job)) {
		set_error(op, 409, "job %lld has already finished (%s)",
		    (long long)job->id, job_state_name(job->state));
		if (stored)
			state_job_stored_free(job);
		return;
	}
	if (job->state == JOB_QUEUED) {
		note_canceller(job, &op->caller);
		job_finish(job, JOB_CANCELLED, "cancelled");
	} else if (!job->cancel_requested) {
		job->cancel_requested = 1;
		note_canceller(job, &op->caller);
		persist_job(job);
		job_cancel_parts(job);
	}
	op->status = 200;
	op->result = job_to_json(job, 0, &op->caller);
}
