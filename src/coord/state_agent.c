/*
 * state_agent.c: the agent protocol in the state thread: reconciling
 * heartbeats, offers, register, started and finished reports (alone or
 * in batches), lost attempts, checkpoints, leaving, lease expiry.
 * Part of the state module (state_int.h).
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
#include "wg.h"

/* Is (job, attempt) in the agent's list? */
static int
listed(json_t *running, int64_t job_id, int attempt)
{
	json_t *r;
	size_t i;

	json_array_foreach(running, i, r)
	{
		if (json_integer_value(json_object_get(r, "job_id")) ==
			job_id &&
		    json_integer_value(json_object_get(r, "attempt")) ==
			attempt)
			return 1;
	}
	return 0;
}

void
state_reconcile(struct node *node, json_t *running, json_t *kill,
    int queue_lost)
{
	int64_t now = gp_mono_ms();
	json_t *r;
	size_t i;
	int k;

	json_array_foreach(running, i, r)
	{
		int64_t jid = json_integer_value(json_object_get(r, "job_id"));
		int att = (int)json_integer_value(json_object_get(r, "attempt"));
		struct job *job = state_job(jid);
		int part = job != NULL ? job_part_on(job, node->id) : -1;
		if (job == NULL || job->state != JOB_RUNNING || part < 0 ||
		    job->parts[part].ended || job->attempts != att)
			json_array_append_new(kill,
			    json_pack("{s:I,s:i}", "job_id", (json_int_t)jid,
				"attempt", att));
	}
	for (k = 0; k < node->njobs; k++) {
		struct job *job = state_job(node->jobs[k]);
		const struct job_part *p;
		int64_t delivered;
		int part;
		if (job == NULL || (part = job_part_on(job, node->id)) < 0 ||
		    listed(running, job->id, job->attempts))
			continue;
		p = &job->parts[part];
		delivered = p->delivered_mono;
		if (!p->started_ack &&
		    (delivered == 0 || now - delivered < LOST_GRACE_MS))
			continue; /* on its way */
		if (p->started_ack && delivered != 0 &&
		    now - delivered < LOST_GRACE_MS)
			continue;
		if (queue_lost) {
			struct op *op = op_new(OP_LOST, NULL);
			if (op == NULL)
				continue;
			op->job_id = job->id;
			op->attempt = job->attempts;
			op->node_id = node->id;
			state_submit_op(op);
		} else {
			job_part_lost(job, part, "node_lost");
			k--; /* node->jobs changed under us */
		}
	}
}

int
reason_requeues(const char *reason)
{
	static const char *const requeue[] = {"reclaimed", "owner_present",
	    "window_closed", "provider_left", "agent_stopped", "refused",
	    "restore_failed", "image_unavailable", "preempted",
	    "gang_stopped", NULL};
	int i;

	for (i = 0; requeue[i] != NULL; i++)
		if (strcmp(reason, requeue[i]) == 0)
			return 1;
	return 0;
}

int
offer_decode(json_t *o, int ngpus, struct offer *out, char *err,
    size_t errlen)
{
	json_t *v, *lent;
	const char *key;
	size_t i;

	if (!json_is_object(o)) {
		snprintf(err, errlen, "offer: must be an object");
		return GP_EINVAL;
	}
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "seq") && strcmp(key, "lent") &&
		    strcmp(key, "accepting") && strcmp(key, "cpus") &&
		    strcmp(key, "mem_mib") && strcmp(key, "max_job_s") &&
		    strcmp(key, "images") && strcmp(key, "plain_jobs") &&
		    strcmp(key, "trusted_keys") && strcmp(key, "network") &&
		    strcmp(key, "interactive") && strcmp(key, "gangs") &&
		    strcmp(key, "interactive_gpus")) {
			snprintf(err, errlen, "offer: unknown field '%.64s'",
			    key);
			return GP_EINVAL;
		}
	}
	memset(out, 0, sizeof(*out));
	v = json_object_get(o, "seq");
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		snprintf(err, errlen, "offer.seq: a non-negative integer");
		return GP_EINVAL;
	}
	out->seq = json_integer_value(v);
	lent = json_object_get(o, "lent");
	if (!json_is_array(lent) || json_array_size(lent) > 64) {
		snprintf(err, errlen, "offer.lent: an array of GPU indices");
		return GP_EINVAL;
	}
	json_array_foreach(lent, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= ngpus ||
		    json_integer_value(v) >= 64) {
			snprintf(err, errlen, "offer.lent[%zu]: not a GPU of "
					      "this node", i);
			return GP_EINVAL;
		}
		out->lent |= 1ULL << json_integer_value(v);
	}
	v = json_object_get(o, "accepting");
	if (!json_is_boolean(v)) {
		snprintf(err, errlen, "offer.accepting: true or false");
		return GP_EINVAL;
	}
	out->accepting = json_is_true(v);
	v = json_object_get(o, "cpus");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 100000)) {
		snprintf(err, errlen, "offer.cpus: an integer from 0 to 100000");
		return GP_EINVAL;
	}
	out->cpus = (int)json_integer_value(v);
	v = json_object_get(o, "mem_mib");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (1LL << 40))) {
		snprintf(err, errlen, "offer.mem_mib: a non-negative integer");
		return GP_EINVAL;
	}
	out->mem_mib = json_integer_value(v);
	v = json_object_get(o, "max_job_s");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > GP_TIME_LIMIT_MAX)) {
		snprintf(err, errlen, "offer.max_job_s: seconds, at most %lld",
		    GP_TIME_LIMIT_MAX);
		return GP_EINVAL;
	}
	out->max_job_s = json_integer_value(v);
	/* The owner's image policy; absent: anything is accepted. */
	v = json_object_get(o, "images");
	if (v == NULL || (json_is_string(v) &&
	    strcmp(json_string_value(v), "any") == 0))
		out->images = GP_SCHED_IMAGES_ANY;
	else if (json_is_string(v) &&
	    strcmp(json_string_value(v), "signed") == 0)
		out->images = GP_SCHED_IMAGES_SIGNED;
	else if (json_is_string(v) &&
	    strcmp(json_string_value(v), "none") == 0)
		out->images = GP_SCHED_IMAGES_NONE;
	else {
		snprintf(err, errlen, "offer.images: any, signed or none");
		return GP_EINVAL;
	}
	v = json_object_get(o, "plain_jobs");
	if (v != NULL && !json_is_boolean(v)) {
		snprintf(err, errlen, "offer.plain_jobs: true or false");
		return GP_EINVAL;
	}
	out->refuse_plain = json_is_false(v);
	/* Absent: an agent before job networks (its jobs share its own). */
	v = json_object_get(o, "network");
	if (v != NULL && (!json_is_string(v) || gp_jobspec_network_parse(
	    json_string_value(v), &out->network) != 0)) {
		snprintf(err, errlen, "offer.network: none, internet or lan");
		return GP_EINVAL;
	}
	/* Interactive jobs (docs/interactive.md); absent: taken, none kept. */
	v = json_object_get(o, "interactive");
	if (v != NULL && !json_is_boolean(v)) {
		snprintf(err, errlen, "offer.interactive: true or false");
		return GP_EINVAL;
	}
	out->refuse_interactive = json_is_false(v);
	/*
	 * Gangs (docs/agent.md, "Gangs"); absent: its gang parts reach
	 * each other's nodes (a root agent, or one before job networks).
	 */
	v = json_object_get(o, "gangs");
	if (v != NULL && !json_is_boolean(v)) {
		snprintf(err, errlen, "offer.gangs: true or false");
		return GP_EINVAL;
	}
	out->no_gang_links = json_is_false(v);
	v = json_object_get(o, "interactive_gpus");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 64)) {
		snprintf(err, errlen, "offer.interactive_gpus: an integer from "
		    "0 to 64");
		return GP_EINVAL;
	}
	out->interactive_gpus = (int)json_integer_value(v);
	v = json_object_get(o, "trusted_keys");
	if (v != NULL && (!json_is_array(v) ||
	    json_array_size(v) > GP_TRUST_KEYS_MAX)) {
		snprintf(err, errlen, "offer.trusted_keys: an array of at most "
		    "%d public keys", GP_TRUST_KEYS_MAX);
		return GP_EINVAL;
	}
	json_array_foreach(v, i, lent)
	{
		unsigned char pk[32];
		if (!gp_sign_public_parse(json_string_value(lent), pk)) {
			snprintf(err, errlen, "offer.trusted_keys[%zu]: not "
			    "ed25519:<base64 of 32 bytes>", i);
			return GP_EINVAL;
		}
		gp_strlcpy(out->trusted[out->ntrusted++],
		    json_string_value(lent), GP_SIGN_PUBLIC_TEXT);
	}
	return 0;
}

/* Applies an offer at least as new as the last one; 1 when applied. */
static int
offer_apply(struct node *node, const struct offer *o, int force)
{
	if (!force && o->seq <= node->offer_seq)
		return 0;
	node->offer_seq = o->seq;
	node->lent = o->lent;
	node->accepting = o->accepting;
	node->offer_cpus = o->cpus;
	node->offer_mem_mib = o->mem_mib;
	node->max_job_s = o->max_job_s;
	node->images = o->images;
	state.nrefuse_plain += (o->refuse_plain != 0) - (node->refuse_plain != 0);
	node->refuse_plain = o->refuse_plain;
	node->network = o->network;
	state.nrefuse_interactive += (o->refuse_interactive != 0) -
	    (node->refuse_interactive != 0);
	node->refuse_interactive = o->refuse_interactive;
	state.nno_gang_links += (o->no_gang_links != 0) -
	    (node->no_gang_links != 0);
	node->no_gang_links = o->no_gang_links;
	node->interactive_gpus = o->interactive_gpus;
	node->ntrusted = o->ntrusted;
	for (int i = 0; i < o->ntrusted && i < GP_TRUST_KEYS_MAX; i++) {
		gp_strlcpy(node->trusted[i], o->trusted[i],
		    sizeof(node->trusted[i]));
		node->trusted_keys[i] = node->trusted[i];
	}
	live_node_changed(node);
	state.sched_dirty = 1;
	gp_debug("offer applied node=%s seq=%lld lent=0x%llx accepting=%d",
	    node->name, (long long)o->seq, (unsigned long long)o->lent,
	    o->accepting);
	return 1;
}

/* A host name or an IP address (v4, or v6 without brackets). */
static int
addr_valid(const char *a)
{
	size_t i, n = strlen(a);

	if (n == 0 || n > 253)
		return 0;
	for (i = 0; i < n; i++) {
		char c = a[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			(c >= '0' && c <= '9') || c == '.' || c == ':' ||
			c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

/*
 * register's "overlay": {"port": the first of its gang parts' UDP ports,
 * "ports": how many from there (optional, 1 to 256, default 1; one per
 * overlay gang part it runs at once), "always": true when its gangs go
 * through the overlay even with an --advertise-addr (optional), "key":
 * ignored (an agent older than per-gang keys sent its own)}, from an
 * agent that joins gangs through an overlay (docs/agent.md, "Gangs behind
 * NATs"); may be absent. The gangs' keys are the coordinator's (live.c).
 */
static int
overlay_decode(json_t *v, struct node *tmp, char *err, size_t errlen)
{
	json_t *port, *ports, *always, *key;

	tmp->overlay_port = 0;
	tmp->overlay_ports = 0;
	tmp->overlay_needed = 0;
	if (v == NULL)
		return 0;
	port = json_object_get(v, "port");
	ports = json_object_get(v, "ports");
	always = json_object_get(v, "always");
	key = json_object_get(v, "key");
	if (!json_is_object(v) ||
	    json_object_size(v) != 1u + (ports != NULL) + (always != NULL) +
	    (key != NULL) ||
	    (key != NULL && !gp_wg_key_valid(json_string_value(key))) ||
	    !json_is_integer(port) || json_integer_value(port) < 1 ||
	    (ports != NULL && (!json_is_integer(ports) ||
	    json_integer_value(ports) < 1 ||
	    json_integer_value(ports) > GP_OVERLAY_SLOTS_MAX)) ||
	    json_integer_value(port) + (ports != NULL ?
	    json_integer_value(ports) : 1) - 1 > 65535 ||
	    (always != NULL && !json_is_boolean(always))) {
		snprintf(err, errlen, "overlay: {\"port\": 1 to 65535, "
		    "\"ports\": optional, 1 to 256 (port + ports - 1 <= "
		    "65535), \"always\": optional boolean, \"key\": "
		    "optional, a WireGuard public key (ignored)}");
		return GP_EINVAL;
	}
	tmp->overlay_needed = json_is_true(always);
	tmp->overlay_port = (int)json_integer_value(port);
	tmp->overlay_ports = ports != NULL ? (int)json_integer_value(ports) :
	    1;
	return 0;
}

int
register_decode(json_t *body, struct node *tmp, json_t **running,
    char *err, size_t errlen)
{
	json_t *gpus, *g, *v;
	const char *key;
	size_t i;

	json_object_foreach(body, key, v)
	{
		if (strcmp(key, "protocol") && strcmp(key, "name") &&
		    strcmp(key, "cpus") && strcmp(key, "mem_mib") &&
		    strcmp(key, "gpus") && strcmp(key, "running") &&
		    strcmp(key, "version") && strcmp(key, "offer") &&
		    strcmp(key, "addr") && strcmp(key, "overlay")) {
			snprintf(err, errlen, "unknown field '%.64s'", key);
			return GP_EINVAL;
		}
	}
	v = json_object_get(body, "protocol");
	if (!json_is_integer(v) ||
	    json_integer_value(v) != GP_PROTOCOL_VERSION) {
		snprintf(err, errlen,
		    "protocol: this coordinator speaks protocol %d",
		    GP_PROTOCOL_VERSION);
		return GP_EINVAL;
	}
	v = json_object_get(body, "name");
	if (!json_is_string(v) || !gp_name_valid(json_string_value(v))) {
		snprintf(err, errlen, "name: 1 to 64 of A-Z a-z 0-9 . _ -");
		return GP_EINVAL;
	}
	gp_strlcpy(tmp->name, json_string_value(v), sizeof(tmp->name));
	v = json_object_get(body, "addr");
	tmp->addr[0] = '\0';
	if (v != NULL) {
		if (!json_is_string(v) || !addr_valid(json_string_value(v))) {
			snprintf(err, errlen,
			    "addr: a host name or IP address others reach "
			    "this node at (1 to 253 of A-Z a-z 0-9 . : - _)");
			return GP_EINVAL;
		}
		gp_strlcpy(tmp->addr, json_string_value(v), sizeof(tmp->addr));
	}
	if (overlay_decode(json_object_get(body, "overlay"), tmp, err,
	        errlen) != 0)
		return GP_EINVAL;
	v = json_object_get(body, "cpus");
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > 100000) {
		snprintf(err, errlen, "cpus: an integer from 1 to 100000");
		return GP_EINVAL;
	}
	tmp->cpus = (int)json_integer_value(v);
	v = json_object_get(body, "mem_mib");
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (1LL << 40)) {
		snprintf(err, errlen, "mem_mib: a non-negative integer");
		return GP_EINVAL;
	}
	tmp->mem_mib = json_integer_value(v);
	gpus = json_object_get(body, "gpus");
	if (!json_is_array(gpus) || json_array_size(gpus) > GP_SCHED_GPUS_MAX) {
		snprintf(err, errlen, "gpus: an array of at most %d GPUs",
		    GP_SCHED_GPUS_MAX);
		return GP_EINVAL;
	}
	tmp->ngpus = (int)json_array_size(gpus);
	tmp->gpus = calloc((size_t)tmp->ngpus + 1, sizeof(*tmp->gpus));
	if (tmp->gpus == NULL)
		return GP_ENOMEM;
	json_array_foreach(gpus, i, g)
	{
		json_t *idx = json_object_get(g, "index"),
		       *uuid = json_object_get(g, "uuid"),
		       *model = json_object_get(g, "model"),
		       *mem = json_object_get(g, "mem_mib"),
		       *cap = json_object_get(g, "compute_capability");
		if (!json_is_object(g) || !json_is_integer(idx) ||
		    json_integer_value(idx) != (json_int_t)i ||
		    !json_is_string(uuid) || json_string_length(uuid) > 95 ||
		    !json_is_string(model) ||
		    json_string_length(model) > GP_NAME_MAX ||
		    !json_is_integer(mem) || json_integer_value(mem) < 0) {
			snprintf(err, errlen,
			    "gpus[%zu]: needs index (= its position), uuid, "
			    "model (at most 64 bytes) and mem_mib",
			    i);
			return GP_EINVAL;
		}
		tmp->gpus[i].index = (int)i;
		gp_strlcpy(tmp->gpus[i].uuid, json_string_value(uuid),
		    sizeof(tmp->gpus[i].uuid));
		gp_strlcpy(tmp->gpus[i].model, json_string_value(model),
		    sizeof(tmp->gpus[i].model));
		tmp->gpus[i].mem_mib = json_integer_value(mem);
		if (cap != NULL && !json_is_null(cap) &&
		    (!json_is_string(cap) || json_string_length(cap) > 8 ||
			gp_capability_parse(json_string_value(cap),
			    &tmp->gpus[i].capability) != 0)) {
			snprintf(err, errlen,
			    "gpus[%zu].compute_capability: X.Y, like \"8.6\"",
			    i);
			return GP_EINVAL;
		}
		tmp->gpus[i].temp_c = -1;
		tmp->gpus[i].power_mw = -1;
	}
	v = json_object_get(body, "offer");
	if (v != NULL) {
		struct offer o;
		if (offer_decode(v, tmp->ngpus, &o, err, errlen) != 0)
			return GP_EINVAL;
	}
	*running = json_object_get(body, "running");
	if (*running == NULL)
		*running = json_array();
	else
		json_incref(*running);
	json_array_foreach(*running, i, g)
	{
		if (!json_is_integer(json_object_get(g, "job_id")) ||
		    !json_is_integer(json_object_get(g, "attempt"))) {
			snprintf(err, errlen,
			    "running[%zu]: needs job_id and attempt", i);
			json_decref(*running);
			*running = NULL;
			return GP_EINVAL;
		}
	}
	if (!json_is_array(*running)) {
		snprintf(err, errlen, "running: must be an array");
		json_decref(*running);
		*running = NULL;
		return GP_EINVAL;
	}
	return 0;
}

void
apply_register(struct op *op)
{
	struct node tmp, *node;
	json_t *running = NULL, *kill;
	char err[256];
	int i, k, is_new = 0;
	int64_t hb_ms, lease_ms;

	memset(&tmp, 0, sizeof(tmp));
	if (register_decode(op->body, &tmp, &running, err, sizeof(err)) != 0) {
		free(tmp.gpus);
		set_error(op, 400, "%s", err);
		return;
	}
	node = state_node_by_name(tmp.name);
	/*
	 * A provider token of the owner's name takes the node over: that is
	 * how an owner's token is rotated (a new token of the same name,
	 * the agent restarted with it, the old one revoked).
	 */
	if (node != NULL && node->owner_token != op->caller.id &&
	    op->caller.role == GP_ROLE_PROVIDER &&
	    strcmp(node->owner_name, op->caller.name) == 0) {
		gp_info("node taken over by a new token of its owner node=%s "
			"owner=%s token=%lld",
		    node->name, node->owner_name, (long long)op->caller.id);
		node->owner_token = op->caller.id;
	}
	if (node != NULL && node->owner_token != op->caller.id &&
	    op->caller.role != GP_ROLE_ADMIN) {
		free(tmp.gpus);
		json_decref(running);
		set_error(op, 403,
		    "node '%s' belongs to another provider token", tmp.name);
		return;
	}
	if (node == NULL) {
		node = calloc(1, sizeof(*node));
		if (node == NULL) {
			free(tmp.gpus);
			json_decref(running);
			set_error(op, 503, "out of memory");
			return;
		}
		node->id = state.next_node_id;
		gp_strlcpy(node->name, tmp.name, sizeof(node->name));
		node->owner_token = op->caller.id;
		gp_strlcpy(node->owner_name, op->caller.name,
		    sizeof(node->owner_name));
		node_insert(node);
		is_new = 1;
	}
	/* The lab that lends it: its owner token's group. */
	if (node->owner_token == op->caller.id)
		node->group_id = op->caller.group_id;
	/* Where other nodes reach it: what it says, else what we see. */
	gp_strlcpy(node->addr, tmp.addr[0] != '\0' ? tmp.addr : op->peer,
	    sizeof(node->addr));
	node->overlay_port = tmp.overlay_port;
	node->overlay_ports = tmp.overlay_ports;
	/* No --advertise-addr: nothing says other nodes route to it. */
	node->overlay_needed = tmp.overlay_needed || tmp.addr[0] == '\0';
	/* Parts on GPUs it no longer has are lost. */
	for (k = 0; k < node->njobs; k++) {
		struct job *j = state_job(node->jobs[k]);
		int part = j != NULL ? job_part_on(j, node->id) : -1;
		if (part < 0)
			continue;
		for (i = 0; i < j->parts[part].ngpus; i++)
			if (j->parts[part].gpus[i] >= tmp.ngpus)
				break;
		if (i < j->parts[part].ngpus) {
			job_part_lost(j, part, "node_lost");
			k--;
		}
	}
	/* The GPUs may have changed; keep who uses which by index. */
	for (i = 0; i < tmp.ngpus && i < node->ngpus; i++) {
		tmp.gpus[i].job_id = node->gpus[i].job_id;
		tmp.gpus[i].shared_milli = node->gpus[i].shared_milli;
		tmp.gpus[i].shared_mem_mib = node->gpus[i].shared_mem_mib;
		tmp.gpus[i].nshared = node->gpus[i].nshared;
	}
	free(node->gpus);
	node->gpus = tmp.gpus;
	node->ngpus = tmp.ngpus;
	node->cpus = tmp.cpus;
	node->mem_mib = tmp.mem_mib;
	node->up = 1;
	node->left = 0;
	{
		/* A new agent process starts its offers over: force. */
		struct offer o;
		json_t *ov = json_object_get(op->body, "offer");

		memset(&o, 0, sizeof(o));
		o.lent = ~0ULL;
		o.accepting = 1;
		if (ov != NULL)
			offer_decode(ov, node->ngpus, &o, err, sizeof(err));
		offer_apply(node, &o, 1);
	}
	atomic_store(&node->last_seen_mono, gp_mono_ms());
	node->last_seen_ms = gp_now_ms();
	if (state.store->ops->put_node(state.store, node) != 0)
		gp_fatalx("cannot store node");
	/*
	 * Reconcile: what it runs that we do not want dies; what we placed
	 * there and it never got is delivered again; what it started and
	 * lost (an agent restart) goes back to the queue.
	 */
	kill = json_array();
	pthread_mutex_lock(&notify_lock);
	json_array_clear(node->outbox_assign);
	notify_supersede_node(node);
	pthread_mutex_unlock(&notify_lock);
	for (k = 0; k < node->njobs; k++) {
		struct job *j = state_job(node->jobs[k]);
		int part = j != NULL ? job_part_on(j, node->id) : -1;
		if (part < 0)
			continue;
		if (listed(running, j->id, j->attempts)) {
			/* Stops asked before a restart of ours: again. */
			if (j->preempt_for != 0 || j->stopping[0] != '\0')
				add_effect_stop(node,
				    json_pack("{s:I,s:i,s:s}", "job_id",
					(json_int_t)j->id, "attempt",
					j->attempts, "reason",
					j->stopping[0] != '\0'
					    ? "gang_stopped"
					    : "preempted"));
			continue;
		}
		if (j->parts[part].started_ack) {
			job_part_lost(j, part, "node_lost");
			k--;
		} else {
			j->parts[part].delivered_mono = 0;
			add_effect(node, assignment_json(j, part), NULL);
		}
	}
	state_reconcile(node, running, kill, 0);
	json_decref(running);
	live_node_changed(node);
	live_nodes_registered();
	state.sched_dirty = 1;
	op->status = 200;
	state_heartbeat_ms(&hb_ms, &lease_ms);
	atomic_store(&node->lease_told_ms, lease_ms);
	op->result = json_pack("{s:I,s:I,s:I,s:o}", "node_id",
	    (json_int_t)node->id, "heartbeat_ms", (json_int_t)hb_ms,
	    "lease_ms", (json_int_t)lease_ms, "kill", kill);
	gp_info("node registered node=%s id=%lld gpus=%d cpus=%d new=%d",
	    node->name, (long long)node->id, node->ngpus, node->cpus, is_new);
}

/*
 * The node op names, when its caller owns it (or is an admin); else NULL
 * with the op's error set (403).
 */
static struct node *
callers_node(struct op *op)
{
	struct node *node = state_node(op->node_id);

	if (node == NULL || (node->owner_token != op->caller.id &&
				op->caller.role != GP_ROLE_ADMIN)) {
		set_error(op, 403, "node %lld is not yours",
		    (long long)op->node_id);
		return NULL;
	}
	return node;
}

/*
 * Checks that the caller may report for (job, attempt) from node_id.
 * Returns the job and *part (the part that runs there), or NULL with the
 * op's error set.
 */
static struct job *
reporting_job(struct op *op, int *part)
{
	struct node *node = callers_node(op);
	struct job *job = state_job(op->job_id);

	if (node == NULL)
		return NULL;
	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != op->attempt ||
	    (*part = job_part_on(job, node->id)) < 0 ||
	    job->parts[*part].ended) {
		set_error(op, 409, "stale attempt %d of job %lld: kill it",
		    op->attempt, (long long)op->job_id);
		json_object_set_new(op->result, "kill", json_true());
		return NULL;
	}
	return job;
}

void
apply_started(struct op *op)
{
	struct job_part *p;
	struct job *job;
	int part, k, all = 1;

	if ((job = reporting_job(op, &part)) == NULL)
		return;
	p = &job->parts[part];
	if (!p->started_ack) {
		json_t *rv = json_object_get(op->body, "restored_version");
		int64_t now = gp_now_ms();
		struct attempt_record *a = current_attempt(job);
		p->started_ack = 1;
		live_overlay_started(job, part);
		if (a != NULL && part == 0 && json_is_integer(rv)) {
			a->restored_version = json_integer_value(rv);
			if (a->restored_version > 0)
				metrics_job_restored();
		}
		bill_part_start(job, part, now);
		for (k = 0; k < job->nparts; k++)
			all &= job->parts[k].started_ack;
		/* A gang runs once every part has started. */
		if (all && !job->started_ack) {
			job->started_ack = 1;
			job->started_ms = now;
			if (a != NULL)
				a->started_ms = now;
			live_job_started(job);
			wake_job_later(job);
		}
		persist_job(job);
	}
	op->status = 200;
	op->result = json_object();
}

/* What a finished part's report says: its state and reason. */
static enum job_state
finished_state(struct job *job, json_t *body, const char **reason)
{
	json_t *v;

	v = json_object_get(body, "exit_code");
	job->exit_code = json_is_integer(v) ? (int)json_integer_value(v) : 0;
	v = json_object_get(body, "signal");
	job->signal = json_is_integer(v) ? (int)json_integer_value(v) : 0;
	job->has_exit = strcmp(*reason, "start_failed") != 0 &&
	    strcmp(*reason, "image_refused") != 0;
	v = json_object_get(body, "message");
	/* A cancel's note (who, apply_cancel) stays unless the agent says. */
	if (!job->cancel_requested || job->message == NULL ||
	    (json_is_string(v) && json_string_length(v) > 0)) {
		free(job->message);
		job->message = json_is_string(v) && json_string_length(v) > 0
		    ? strndup(json_string_value(v), 1000)
		    : NULL;
	}
	if (job->signal != 0 && strcmp(*reason, "exited") == 0)
		*reason = "killed";
	if (job->cancel_requested || strcmp(*reason, "cancelled") == 0) {
		*reason = "cancelled";
		return JOB_CANCELLED;
	}
	if (strcmp(*reason, "timeout") == 0)
		return JOB_TIMEOUT;
	if (strcmp(*reason, "exited") == 0 && job->exit_code == 0 &&
	    job->signal == 0)
		return JOB_SUCCEEDED;
	return JOB_FAILED;
}

/*
 * A gang's part has ended with an outcome of its own: the first part to
 * fail decides how the job ends (the others are killed); rank 0's
 * success is what a gang that succeeds reports.
 */
static void
gang_part_finished(struct job *job, int part, json_t *body,
    const char *reason)
{
	int failed_before = job->gang_failed != 0 || job->cancel_requested ||
	    job->stopping[0] != '\0';
	int saved_exit = job->exit_code, saved_signal = job->signal,
	    saved_has = job->has_exit;
	char *saved_msg = job->message ? strdup(job->message) : NULL;
	enum job_state st;

	st = finished_state(job, body, &reason);
	if (failed_before || (st == JOB_SUCCEEDED && part != 0)) {
		/* Keep what decided (or will decide) the outcome. */
		job->exit_code = saved_exit;
		job->signal = saved_signal;
		job->has_exit = saved_has;
		free(job->message);
		job->message = saved_msg;
		saved_msg = NULL;
	} else if (st != JOB_SUCCEEDED) {
		job->gang_failed = (int)st;
		gp_strlcpy(job->reason, reason, sizeof(job->reason));
		gp_info("gang part failed job=%lld part=%d reason=%s: "
			"stopping the others",
		    (long long)job->id, part, reason);
		job_cancel_parts(job);
	}
	free(saved_msg);
	part_release(job, part);
	persist_job(job);
	gang_settle(job);
}

void
apply_finished(struct op *op)
{
	json_t *body = op->body;
	const char *reason;
	enum job_state st;
	struct job *job;
	json_t *v;
	int part;

	if ((job = reporting_job(op, &part)) == NULL)
		return;
	/* Its network's final counts (checked by api_check_agent_body). */
	v = json_object_get(body, "net_sent_bytes");
	if (json_is_integer(v))
		atomic_store(&job->parts[part].net_sent, json_integer_value(v));
	v = json_object_get(body, "net_received_bytes");
	if (json_is_integer(v))
		atomic_store(&job->parts[part].net_received,
		    json_integer_value(v));
	reason = json_string_value(json_object_get(body, "reason"));
	if (reason == NULL)
		reason = "exited";
	v = json_object_get(body, "offer");
	if (v != NULL) {
		struct node *node = state_node(op->node_id);
		struct offer o;
		char err[256];
		if (node != NULL &&
		    offer_decode(v, node->ngpus, &o, err, sizeof(err)) == 0)
			offer_apply(node, &o, 0);
	}
	op->status = 200;
	op->result = json_object();
	/*
	 * An interactive job is not moved elsewhere: the owner's reclaim
	 * (or window, or leaving) ends it (docs/scheduling.md).
	 */
	if (reason_requeues(reason) && !job->cancel_requested &&
	    !job->spec.interactive) {
		/* Saved and stopped as asked, or its GPU was taken back. */
		job_part_lost(job, part, reason);
		return;
	}
	if (job->nparts > 1) {
		gang_part_finished(job, part, body, reason);
		return;
	}
	st = finished_state(job, body, &reason);
	job_finish(job, st, reason);
}

/*
 * A batch of reports from one node (checked by api_check_reports): each
 * applies as its single report would, in order, and gets its own status
 * and answer; the node must be the caller's, as for a single report.
 */
void
apply_reports(struct op *op)
{
	struct node *node = callers_node(op);
	json_t *results, *r, *res;
	size_t i;

	if (node == NULL)
		return;
	if ((results = json_array()) == NULL) {
		set_error(op, 503, "out of memory");
		return;
	}
	json_array_foreach(json_object_get(op->body, "reports"), i, r)
	{
		const char *event = json_string_value(json_object_get(r,
		    "event"));
		struct op *one = op_new(strcmp(event, "started") == 0
			? OP_STARTED
			: OP_FINISHED,
		    &op->caller);
		if (one == NULL) {
			res = json_pack("{s:i,s:s}", "status", 503, "error",
			    "out of memory");
		} else {
			one->job_id = json_integer_value(json_object_get(r,
			    "job_id"));
			one->attempt = (int)json_integer_value(
			    json_object_get(r, "attempt"));
			one->node_id = op->node_id;
			one->body = json_incref(r);
			if (one->type == OP_STARTED)
				apply_started(one);
			else
				apply_finished(one);
			res = one->result != NULL ? json_incref(one->result)
						  : json_object();
			json_object_set_new(res, "status",
			    json_integer(one->status ? one->status : 500));
			op_free(one);
		}
		json_array_append_new(results, res);
	}
	op->status = 200;
	op->result = json_pack("{s:o}", "results", results);
}

void
apply_lost(struct op *op)
{
	struct job *job = state_job(op->job_id);
	int part;

	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != op->attempt ||
	    (part = job_part_on(job, op->node_id)) < 0 ||
	    job->parts[part].ended)
		return;
	job_part_lost(job, part, "node_lost");
}

void
apply_checkpoint(struct op *op)
{
	struct job *job = state_job(op->job_id);
	struct attempt_record *a = NULL;
	const char *label;
	int i;

	if (job == NULL)
		return;
	for (i = job->nhistory - 1; i >= 0; i--)
		if (job->history[i].attempt == op->attempt) {
			a = &job->history[i];
			break;
		}
	if (a == NULL || op->version <= a->ckpt_version)
		return;
	a->ckpt_version = op->version;
	a->ckpt_count++;
	a->ckpt_ms = gp_now_ms();
	if (a->attempt == job->attempts && job->state == JOB_RUNNING)
		live_job_saved(job, a->ckpt_ms);
	a->ckpt_bytes = op->bytes;
	metrics_checkpoint_committed(op->bytes);
	label = json_string_value(json_object_get(op->body, "label"));
	free(a->ckpt_label);
	a->ckpt_label = label != NULL && label[0] != '\0'
	    ? strndup(label, 200)
	    : NULL;
	persist_job(job);
	gp_info("checkpoint committed job=%lld attempt=%d version=%lld "
		"bytes=%lld",
	    (long long)job->id, op->attempt, (long long)op->version,
	    (long long)op->bytes);
}

void
state_note_checkpoint(int64_t job_id, int attempt, int64_t version,
    int64_t bytes, const char *label)
{
	struct op *op = op_new(OP_CHECKPOINT, NULL);

	if (op == NULL)
		return;
	op->job_id = job_id;
	op->attempt = attempt;
	op->version = version;
	op->bytes = bytes;
	op->body = json_pack("{s:s}", "label", label != NULL ? label : "");
	state_submit_op(op);
}

void
apply_offer(struct op *op)
{
	struct node *node = state_node(op->node_id);
	struct offer o;
	char err[256];

	if (node == NULL || !node->up ||
	    offer_decode(op->body, node->ngpus, &o, err, sizeof(err)) != 0)
		return;
	offer_apply(node, &o, 0);
}

/* Every part on node is lost (reason); its outboxes are dropped. */
static void
node_lose_jobs(struct node *node, const char *reason)
{
	while (node->njobs > 0) {
		struct job *j = state_job(node->jobs[0]);
		int part = j != NULL ? job_part_on(j, node->id) : -1;
		if (part < 0 || j->state != JOB_RUNNING) {
			node->jobs[0] = node->jobs[--node->njobs];
			continue;
		}
		job_part_lost(j, part, reason);
	}
	pthread_mutex_lock(&notify_lock);
	json_array_clear(node->outbox_assign);
	json_array_clear(node->outbox_cancel);
	json_array_clear(node->outbox_checkpoint);
	json_array_clear(node->outbox_stop);
	pthread_mutex_unlock(&notify_lock);
}

void
apply_leave(struct op *op)
{
	struct node *node = callers_node(op);

	if (node == NULL)
		return;
	node->left = 1;
	node->up = 0;
	node->accepting = 0;
	node_lose_jobs(node, "provider_left");
	live_node_changed(node);
	state.sched_dirty = 1;
	op->status = 200;
	op->result = json_pack("{s:s}", "node", node->name);
	gp_info("node left the pool node=%s", node->name);
}

/*
 * The heartbeat period and lease agents are told now (under state.lock).
 * The whole pool may send at most cfg.heartbeat_rate heartbeats a second:
 * N nodes beat every max(heartbeat_ms, N * 1000 / rate) ms, at most a
 * minute, and the lease keeps its ratio to the period (5 s to 1 s by
 * default). 10,000 nodes under the default 2,000 a second beat every 5 s
 * with a 25 s lease, as Kubernetes' kubelets renew a 40 s lease every 10 s.
 */
void
state_heartbeat_ms(int64_t *heartbeat_ms, int64_t *lease_ms)
{
	int64_t hb = state.cfg.heartbeat_ms, nodes = state.nnodes - 1;

	if (state.cfg.heartbeat_rate > 0 && nodes > 0) {
		int64_t want = (nodes * 1000 + state.cfg.heartbeat_rate - 1) /
		    state.cfg.heartbeat_rate;
		if (want > hb)
			hb = want < 60000 ? want : 60000;
	}
	*heartbeat_ms = hb;
	*lease_ms = hb == state.cfg.heartbeat_ms
	    ? state.cfg.lease_ms
	    : state.cfg.lease_ms * hb / state.cfg.heartbeat_ms;
}

/*
 * Nodes whose lease ran out: their jobs go back to the queue. At most
 * LEASE_JOBS_MAX jobs a batch: when thousands of leases run out at once
 * (10,000 agents, a stalled network), requeueing all of them under the
 * state lock held it for seconds. Returns 1 when nodes are left for the
 * next batch (which then runs at once), resuming after the last seen.
 */
#define LEASE_JOBS_MAX 256
int
expire_leases(int64_t now)
{
	static int64_t next_id = 1;
	int64_t id, k, taken = 0;

	for (k = 1; k < state.nnodes; k++) {
		struct node *n;
		int64_t seen;
		id = next_id < state.nnodes ? next_id : 1;
		next_id = id + 1;
		n = state.nodes[id];
		if (n == NULL || (n->njobs == 0 && !n->up))
			continue;
		seen = atomic_load(&n->last_seen_mono);
		if (now - seen <= state.cfg.lease_ms ||
		    now - seen <= atomic_load(&n->lease_told_ms))
			continue;
		if (n->up) {
			gp_warn("node lease expired node=%s jobs=%d", n->name,
			    n->njobs);
			live_node_changed(n);
		}
		n->up = 0;
		taken += n->njobs;
		node_lose_jobs(n, "node_lost");
		if (taken >= LEASE_JOBS_MAX) {
			gp_debug("lease expiry goes on in the next batch "
				 "requeued=%lld",
			    (long long)taken);
			return 1;
		}
	}
	return 0;
}
