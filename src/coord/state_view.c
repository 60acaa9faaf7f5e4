/*
 * state_view.c: the model as JSON: jobs (with their history, parts and
 * accounting), nodes, assignments; who may see a job. Call with
 * state.lock held. Part of the state module (state_int.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy.h"
#include "relay.h"
#include "state.h"
#include "state_int.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "sched.h"

/* ---- JSON views ---- */

static json_t *
time_json(int64_t ms)
{
	char buf[40];

	if (ms <= 0)
		return json_null();
	gp_format_time(ms, buf, sizeof(buf));
	return json_string(buf);
}

/*
 * The bytes attempt a of job sent and received over its network: what
 * was kept when it ended, or its parts' counts while it runs.
 */
static void
attempt_net_bytes(const struct job *job, const struct attempt_record *a,
    int64_t *sent, int64_t *received)
{
	if (a->finished_ms == 0 && a->attempt == job->attempts &&
	    job->state == JOB_RUNNING)
		job_net_bytes(job, sent, received);
	else {
		*sent = a->net_sent;
		*received = a->net_received;
	}
}

/* An attempt's network bytes in its history entry h. */
static void
net_json(const struct job *job, const struct attempt_record *a, json_t *h)
{
	int64_t sent, received;

	attempt_net_bytes(job, a, &sent, &received);
	json_object_set_new(h, "net_sent_bytes", json_integer(sent));
	json_object_set_new(h, "net_received_bytes", json_integer(received));
}

int
job_owned_by(const struct job *job, const struct token_entry *who)
{
	return (who->role == GP_ROLE_USER || who->role == GP_ROLE_ADMIN) &&
	    strcmp(job->user, who->name) == 0;
}

/*
 * The environment as viewer may see it: the job's own object for its
 * owner; for anyone else a new one with the same keys and null values
 * (its values may be secrets only the owner may read).
 */
static json_t *
env_for(const struct job *job, const struct token_entry *viewer)
{
	const char *key;
	json_t *out, *v;

	if (job_owned_by(job, viewer))
		return json_incref(job->spec.env);
	if ((out = json_object()) == NULL)
		return NULL;
	json_object_foreach(job->spec.env, key, v)
		json_object_set_new(out, key, json_null());
	return out;
}

json_t *
job_to_json(const struct job *job, int with_history,
    const struct token_entry *viewer)
{
	const struct node *node = state_node(job->node_id);
	json_t *o, *gpus = json_array(), *uuids = json_array(), *req;
	int i;

	for (i = 0; i < job->ngpus; i++) {
		json_array_append_new(gpus, json_integer(job->gpus[i]));
		if (node != NULL && job->gpus[i] < node->ngpus)
			json_array_append_new(uuids,
			    json_string(node->gpus[job->gpus[i]].uuid));
	}
	req = json_pack("{s:i,s:I,s:s?,s:i,s:I,s:I}", "gpus", job->spec.gpus,
	    "gpu_mem_mib", (json_int_t)job->spec.gpu_mem_mib, "gpu_model",
	    job->spec.gpu_model[0] ? job->spec.gpu_model : NULL, "cpus",
	    job->spec.cpus, "mem_mib", (json_int_t)job->spec.mem_mib,
	    "time_limit_s", (json_int_t)job->spec.time_limit_s);
	live_request_json(job, req);
	if (req != NULL && gp_jobspec_network_name(job->spec.network) != NULL)
		json_object_set_new(req, "network", json_string(
		    gp_jobspec_network_name(job->spec.network)));
	o = json_pack("{s:I,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,"
		      "s:o,s:o,s:i,s:b,s:o,s:O,s:o}",
	    "id", (json_int_t)job->id, "name", job->spec.name, "user",
	    job->user, "state", job_state_name(job->state), "exit_code",
	    job->has_exit && job->signal == 0 ? json_integer(job->exit_code)
					      : json_null(),
	    "signal", job->signal ? json_integer(job->signal) : json_null(),
	    "reason", job->reason[0] ? json_string(job->reason) : json_null(),
	    "node", node != NULL ? json_string(node->name) : json_null(),
	    "node_id", node != NULL ? json_integer(node->id) : json_null(),
	    "gpus", gpus, "gpu_uuids", uuids, "submitted_at",
	    time_json(job->submitted_ms), "started_at",
	    time_json(job->started_ms), "finished_at",
	    time_json(job->finished_ms), "message",
	    job->message ? json_string(job->message) : json_null(),
	    "attempts", job->attempts, "cancel_requested",
	    job->cancel_requested, "request", req, "command",
	    job->spec.command, "env", env_for(job, viewer));
	if (o != NULL && json_array_size(job->spec.data) > 0)
		json_object_set(o, "data", job->spec.data);
	/* Interactive jobs and their declared ports (docs/interactive.md). */
	if (o != NULL && job->spec.interactive)
		json_object_set_new(o, "interactive", json_true());
	if (o != NULL && job->spec.n_expose > 0) {
		json_t *ports = json_array();
		/* Where the proxy serves them (its origins hold no secret). */
		json_t *urls = proxy_running() ? json_array() : NULL;
		for (i = 0; i < job->spec.n_expose; i++) {
			char url[400];
			/* PORT, or "PART:PORT" for a gang's part K >= 1. */
			json_array_append_new(ports,
			    gp_jobspec_expose_entry(&job->spec, i));
			if (urls == NULL)
				continue;
			proxy_origin(job->id, job->spec.expose_part[i],
			    job->spec.expose[i], url, sizeof(url) - 1);
			strcat(url, "/");
			json_array_append_new(urls, json_string(url));
		}
		json_object_set_new(o, "expose", ports);
		if (urls != NULL)
			json_object_set_new(o, "proxy_urls", urls);
	}
	if (o != NULL && job->spec.array_job_id > 0) {
		json_object_set_new(o, "array_job_id",
		    json_integer(job->spec.array_job_id));
		json_object_set_new(o, "array_task_id",
		    json_integer(job->spec.array_task_id));
		if (job->spec.array_limit > 0)
			json_object_set_new(o, "array_limit",
			    json_integer(job->spec.array_limit));
	}
	if (o != NULL) {
		json_object_set_new(o, "image", job->spec.image[0]
		    ? json_string(job->spec.image) : json_null());
		/* Interactive streams open into it (relay.c). */
		if (job->state == JOB_RUNNING) {
			int n = relay_job_sessions(job->id);
			if (n > 0)
				json_object_set_new(o, "sessions",
				    json_integer(n));
		}
		if (job->state == JOB_QUEUED) {
			char why[1200];
			job_acceptance(job, why, sizeof(why));
			if (why[0] != '\0')
				json_object_set_new(o, "wait_reason",
				    json_string(why));
		}
	}
	if (o != NULL && with_history) {
		json_t *hist = json_array();
		for (i = 0; i < job->nhistory; i++) {
			const struct attempt_record *a = &job->history[i];
			const struct node *an = state_node(a->node_id);
			int64_t end = a->finished_ms ? a->finished_ms
						     : gp_now_ms();
			int64_t saved = a->ckpt_ms > 0 ? a->ckpt_ms : a->started_ms;
			json_t *ck = a->ckpt_version > 0
			    ? json_pack("{s:I,s:o,s:I,s:s,s:I}", "version",
				  (json_int_t)a->ckpt_version, "at",
				  time_json(a->ckpt_ms), "bytes",
				  (json_int_t)a->ckpt_bytes, "label",
				  a->ckpt_label ? a->ckpt_label : "", "uploads",
				  (json_int_t)a->ckpt_count)
			    : json_null();
			json_array_append_new(hist,
			    json_pack("{s:i,s:s?,s:o,s:o,s:s?,s:I,s:o,s:I,s:I}",
				"attempt", a->attempt, "node",
				an ? an->name : NULL, "started_at",
				time_json(a->started_ms), "finished_at",
				time_json(a->finished_ms), "reason",
				a->reason[0] ? a->reason : NULL,
				"restored_version",
				(json_int_t)a->restored_version, "checkpoint",
				ck, "saved_s",
				(json_int_t)((saved - a->started_ms) / 1000),
				"lost_s",
				(json_int_t)(end > saved ? (end - saved) / 1000
							 : 0)));
			net_json(job, a, json_array_get(hist, (size_t)i));
			/* A preempted attempt: the job it made room for. */
			json_object_set_new(json_array_get(hist, (size_t)i),
			    "preempted_for",
			    a->preempt_for != 0 ? json_integer(a->preempt_for)
						: json_null());
		}
		json_object_set_new(o, "history", hist);
	}
	if (o != NULL) {
		int64_t sent = 0, received = 0;
		for (i = 0; i < job->nhistory; i++) {
			const struct attempt_record *a = &job->history[i];
			int64_t s, r;
			attempt_net_bytes(job, a, &s, &r);
			sent += s;
			received += r;
		}
		json_object_set_new(o, "net_sent_bytes", json_integer(sent));
		json_object_set_new(o, "net_received_bytes",
		    json_integer(received));
	}
	acct_job_json(job, o);
	live_job_json(job, o);
	return o;
}

json_t *
node_to_json(const struct node *node)
{
	static const char *const images[] = {"any", "signed", "none"};
	json_t *gpus = json_array(), *o, *keys;
	int i;

	for (i = 0; i < node->ngpus; i++) {
		const struct node_gpu *g = &node->gpus[i];
		const struct job *j = state_job(g->job_id);
		/* Who uses each GPU is for everyone to see (the commons). */
		json_t *gj = json_pack(
		    "{s:i,s:s,s:s,s:I,s:o,s:s?,s:i,s:I,s:b,s:o,s:o}", "index",
		    g->index, "uuid", g->uuid, "model", g->model, "mem_mib",
		    (json_int_t)g->mem_mib, "job",
		    g->job_id ? json_integer(g->job_id) : json_null(), "user",
		    j != NULL && g->job_id ? j->user : NULL, "util", g->util,
		    "mem_used_mib", (json_int_t)g->mem_used_mib, "lent",
		    i < 64 && ((node->lent >> i) & 1), "temp_c",
		    node->up && g->temp_c >= 0 ? json_integer(g->temp_c)
					       : json_null(),
		    "power_mw",
		    node->up && g->power_mw >= 0 ? json_integer(g->power_mw)
						 : json_null());
		live_gpu_json(node, i, gj);
		json_array_append_new(gpus, gj);
	}
	o = json_pack("{s:I,s:s,s:s,s:s,s:i,s:I,s:o,s:o,s:i,s:b,s:i,s:I,"
			 "s:I}",
	    "id", (json_int_t)node->id, "name", node->name, "owner",
	    node->owner_name, "state",
	    node->left ? "left" : !node->up ? "down"
	    : !node->accepting ? "paused" : "up",
	    "cpus", node->cpus, "mem_mib", (json_int_t)node->mem_mib,
	    "last_seen", time_json(node->last_seen_ms), "gpus", gpus, "jobs",
	    node->njobs, "accepting", node->accepting, "offer_cpus",
	    node->offer_cpus > 0 ? node->offer_cpus : node->cpus,
	    "offer_mem_mib",
	    (json_int_t)(node->offer_mem_mib > 0 ? node->offer_mem_mib
						 : node->mem_mib),
	    "max_job_s", (json_int_t)node->max_job_s);
	/* What its owner accepts (docs/images.md). */
	if (o != NULL) {
		keys = json_array();
		for (i = 0; i < node->ntrusted && i < GP_TRUST_KEYS_MAX; i++)
			json_array_append_new(keys,
			    json_string(node->trusted[i]));
		json_object_set_new(o, "images", json_string(
		    images[node->images >= 0 && node->images < 3 ?
		    node->images : 0]));
		json_object_set_new(o, "plain_jobs",
		    json_boolean(!node->refuse_plain));
		json_object_set_new(o, "gangs",
		    json_boolean(!node->no_gang_links));
		json_object_set_new(o, "trusted_keys", keys);
	}
	acct_node_json(node, o);
	if (o != NULL)
		json_object_set_new(o, "addr", json_string(node->addr));
	return o;
}

/*
 * The restarts of a job: its earlier attempts that started (their agent
 * acknowledged the start, which began their meter). An attempt assigned
 * but never delivered, or never started (its agent died first), is none
 * (issue 15).
 */
static int
started_before(const struct job *job)
{
	int i, n = 0;

	for (i = 0; i < job->nhistory; i++)
		if (job->history[i].attempt < job->attempts &&
		    job->history[i].meter.from_ms > 0)
			n++;
	return n;
}

json_t *
assignment_to_json(const struct job *job, int part)
{
	const struct job_part *p = &job->parts[part];
	json_t *gpus = json_array(), *o;
	int i;

	for (i = 0; i < p->ngpus; i++)
		json_array_append_new(gpus, json_integer(p->gpus[i]));
	o = json_pack("{s:I,s:i,s:s,s:s,s:O,s:O,s:o,s:i,s:I,s:I,s:I,s:i,"
			 "s:i}",
	    "job_id", (json_int_t)job->id, "attempt", job->attempts, "name",
	    job->spec.name, "user", job->user, "command", job->spec.command,
	    "env", job->spec.env, "gpus", gpus, "cpus", job->spec.cpus,
	    "mem_mib", (json_int_t)job->spec.mem_mib, "time_limit_s",
	    (json_int_t)job->spec.time_limit_s, "checkpoint_every_s",
	    (json_int_t)job->spec.checkpoint_every_s, "checkpoint_signal",
	    job->spec.checkpoint_signal, "restart_count", started_before(job));
	if (o != NULL && job->spec.disk_mib > 0)
		json_object_set_new(o, "disk_mib",
		    json_integer(job->spec.disk_mib));
	/* A job array's task: its index and the array's id, as Slurm's. */
	if (o != NULL && job->spec.array_job_id > 0) {
		json_t *env = json_copy(job->spec.env); /* the spec keeps its */
		char v[32];
		snprintf(v, sizeof(v), "%lld", (long long)job->spec.array_job_id);
		json_object_set_new(env, "GPUPOOL_ARRAY_JOB_ID", json_string(v));
		snprintf(v, sizeof(v), "%d", job->spec.array_task_id);
		json_object_set_new(env, "GPUPOOL_ARRAY_TASK_ID", json_string(v));
		json_object_set_new(o, "env", env);
	}
	/* The pinned data sets; the agent fetches the K-th as data/K. */
	if (o != NULL && json_array_size(job->spec.data) > 0)
		json_object_set(o, "data", job->spec.data);
	if (o != NULL && gp_jobspec_network_name(job->spec.network) != NULL)
		json_object_set_new(o, "network", json_string(
		    gp_jobspec_network_name(job->spec.network)));
	/* The agent ends it on a reclaim without the checkpoint signal. */
	if (o != NULL && job->spec.interactive)
		json_object_set_new(o, "interactive", json_true());
	live_assignment_json(job, part, o);
	return o;
}

/* The assignment, with the pinned image's digest when it has one. */
json_t *
assignment_json(const struct job *job, int part)
{
	json_t *a = assignment_to_json(job, part);
	const char *digest = gp_jobspec_image_digest(&job->spec);

	if (a != NULL && digest != NULL)
		json_object_set_new(a, "image", json_string(digest));
	return a;
}

int
job_visible_to(const struct job *job, const struct token_entry *who)
{
	const struct node *node;

	switch (who->role) {
	case GP_ROLE_ADMIN:
		return 1;
	case GP_ROLE_USER:
		return strcmp(job->user, who->name) == 0;
	case GP_ROLE_PROVIDER: {
		/* Its nodes hold (or held last) a part of it. */
		int k;
		for (k = 0; k < job->nparts; k++) {
			node = state_node(job->parts[k].node_id);
			if (node != NULL && node->owner_token == who->id)
				return 1;
		}
		node = state_node(job->node_id);
		return node != NULL && node->owner_token == who->id;
	case GP_ROLE_METRICS:
		return 0;
	}
	}
	return 0;
}
