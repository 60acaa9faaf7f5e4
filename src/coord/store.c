/*
 * store.c: what every store shares (store.h): choosing one by --db, the
 * pool id and its check against the data dir, errors, and the codec of
 * the job's and node's text columns (the jobspec, GPUs, the attempts'
 * history with parts and meters, array tasks), so that SQLite and
 * PostgreSQL hold the same text.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"
#include "wg.h"

/* ---- choosing a store ---- */

int
gp_store_open(const char *db, const char *data_dir, struct gp_store **out,
    char *err, size_t errlen)
{
	char path[1200];

	*out = NULL;
	if (db == NULL || db[0] == '\0') {
		snprintf(path, sizeof(path), "%s/state.db", data_dir);
		return gp_store_sqlite_ops.open(path, out, err, errlen);
	}
	if (strncmp(db, "postgresql://", 13) == 0 ||
	    strncmp(db, "postgres://", 11) == 0)
		return gp_store_pg_ops.open(db, out, err, errlen);
	if (strncmp(db, "sqlite:", 7) == 0)
		db += 7;
	if (db[0] == '\0' || strstr(db, "://") != NULL) {
		snprintf(err, errlen,
		    "--db: not a store: '%.200s' (PATH, "
		    "sqlite:PATH or postgresql://...)",
		    db);
		return GP_EINVAL;
	}
	return gp_store_sqlite_ops.open(db, out, err, errlen);
}

void
gp_store_close(struct gp_store *s)
{
	if (s != NULL)
		s->ops->close(s);
}

const char *
gp_store_error(const struct gp_store *s)
{
	return s != NULL && s->error[0] != '\0' ? s->error : "?";
}

int
gp_store_fail(struct gp_store *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	return code;
}

void
gp_store_new_pool_id(char out[GP_STORE_POOL_ID_LEN + 1])
{
	unsigned char raw[GP_STORE_POOL_ID_LEN / 2];

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(out, GP_STORE_POOL_ID_LEN + 1, raw, sizeof(raw));
}

int
gp_store_check_pool(struct gp_store *s, const char *data_dir, char *err,
    size_t errlen)
{
	char path[1200], have[GP_STORE_POOL_ID_LEN + 2];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/pool_id", data_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 ||
		    write(fd, s->pool_id, strlen(s->pool_id)) !=
		        (ssize_t)strlen(s->pool_id) ||
		    write(fd, "\n", 1) != 1 || fsync(fd) != 0) {
			snprintf(err, errlen, "cannot write %s: %s", path,
			    strerror(errno));
			if (fd >= 0)
				close(fd);
			return GP_EIO;
		}
		close(fd);
		return 0;
	}
	if (fd < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path,
		    strerror(errno));
		return GP_EIO;
	}
	n = read(fd, have, sizeof(have) - 1);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path,
		    strerror(errno));
		return GP_EIO;
	}
	have[n] = '\0';
	have[strcspn(have, "\n")] = '\0';
	if (strcmp(have, s->pool_id) != 0) {
		snprintf(err, errlen,
		    "the store %s belongs to pool %s, but "
		    "this data directory (%s) to pool %.32s: another pool's "
		    "database",
		    s->target, s->pool_id, data_dir, have);
		return GP_ECONFLICT;
	}
	return 0;
}

/* ---- the job's columns ---- */

/* A meter as stored (see load_meter). */
static json_t *
meter_json(const struct acct_meter *m, int64_t provider_group)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:I}", "from_ms",
	    (json_int_t)m->from_ms, "rate", (json_int_t)m->rate, "share",
	    (json_int_t)m->share, "billed_ms", (json_int_t)m->billed_ms,
	    "amount", (json_int_t)m->amount, "gpu_ms", (json_int_t)m->gpu_ms,
	    "seq", m->seq, "provider_group", (json_int_t)provider_group);
}

/*
 * The current attempt's parts (gangs, fractions), kept in its history
 * record: where each part runs, its GPUs and share, whether it ended, and
 * what the job's gang and preemption state is. Older rows have none: their
 * one part is the job's node and GPUs.
 */
static void
parts_json(const struct job *job, const struct attempt_record *a, json_t *h)
{
	json_t *parts = json_array(), *more = json_array();
	int k, i;

	for (k = 0; k < job->nparts; k++) {
		const struct job_part *p = &job->parts[k];
		json_t *g = json_array(), *po;
		for (i = 0; i < p->ngpus; i++)
			json_array_append_new(g, json_integer(p->gpus[i]));
		po = json_pack("{s:I,s:o,s:i,s:I,s:b,s:b}", "node_id",
		    (json_int_t)p->node_id, "gpus", g, "gpu_milli",
		    p->gpu_milli, "gpu_mem_mib", (json_int_t)p->gpu_mem_mib,
		    "started", p->started_ack, "ended", p->ended);
		/*
		 * Its gang overlay while it runs (docs/agent.md, "Gangs
		 * behind NATs"): the public key and port slot it was handed,
		 * so that a restarted coordinator answers the same overlay
		 * and gives no other part its port. Never the private key.
		 */
		if (po != NULL && !p->ended && p->ov_slot > 0 &&
		    p->ov_pub[0] != '\0') {
			json_object_set_new(po, "overlay_key",
			    json_string(p->ov_pub));
			json_object_set_new(po, "overlay_slot",
			    json_integer(p->ov_slot));
		}
		json_array_append_new(parts, po);
	}
	for (k = 0; k < a->nmore; k++)
		json_array_append_new(more,
		    json_pack("{s:I,s:o}", "node_id",
		        (json_int_t)a->more[k].node_id, "meter",
		        meter_json(&a->more[k].meter,
		            a->more[k].provider_group)));
	json_object_set_new(h, "parts", parts);
	json_object_set_new(h, "more", more);
	json_object_set_new(h, "next_seq", json_integer(a->next_seq));
	json_object_set_new(h, "preempt_for", json_integer(a->preempt_for));
	json_object_set_new(h, "master_port", json_integer(job->master_port));
	json_object_set_new(h, "stopping", json_string(job->stopping));
	json_object_set_new(h, "gang_failed", json_boolean(job->gang_failed));
}

/* JSON text of value (consumed); NULL: out of memory. */
static char *
dump(json_t *value)
{
	char *text = value != NULL ? json_dumps(value, JSON_COMPACT) : NULL;

	json_decref(value);
	return text;
}

void
store_job_text_free(struct store_job_text *t)
{
	free(t->spec);
	free(t->gpus);
	free(t->history);
	memset(t, 0, sizeof(*t));
}

/*
 * A job that never ran (no GPUs, no history) has "[]" for both without
 * going through jansson: each dump costs a loop-check table.
 */
int
store_job_encode(const struct job *job, struct store_job_text *out)
{
	json_t *gpus = NULL, *hist = NULL;
	int i;

	memset(out, 0, sizeof(*out));
	if (job->ngpus > 0 || job->nhistory > 0) {
		gpus = json_array();
		hist = json_array();
	}
	for (i = 0; i < job->ngpus; i++)
		json_array_append_new(gpus, json_integer(job->gpus[i]));
	for (i = 0; i < job->nhistory; i++) {
		const struct attempt_record *a = &job->history[i];
		json_t *h;

		h = json_pack("{s:i,s:I,s:I,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:s}",
		    "attempt", a->attempt, "node_id", (json_int_t)a->node_id,
		    "started_ms", (json_int_t)a->started_ms, "finished_ms",
		    (json_int_t)a->finished_ms, "reason", a->reason,
		    "restored_version", (json_int_t)a->restored_version,
		    "ckpt_version", (json_int_t)a->ckpt_version, "ckpt_count",
		    (json_int_t)a->ckpt_count, "ckpt_ms",
		    (json_int_t)a->ckpt_ms, "ckpt_bytes",
		    (json_int_t)a->ckpt_bytes, "ckpt_label",
		    a->ckpt_label ? a->ckpt_label : "");
		/* Its network's bytes, once it ended (history_close). */
		if (h != NULL && (a->net_sent > 0 || a->net_received > 0)) {
			json_object_set_new(h, "net_sent_bytes",
			    json_integer(a->net_sent));
			json_object_set_new(h, "net_received_bytes",
			    json_integer(a->net_received));
		}
		/* Its interactive idle clock (relay.c), if it has one. */
		if (h != NULL && a->idle_limit_ms > 0) {
			json_object_set_new(h, "idle_limit_ms",
			    json_integer(a->idle_limit_ms));
			json_object_set_new(h, "idle_seen_ms",
			    json_integer(a->idle_seen_ms));
		}
		/* Accounting: the meter, once billing began. */
		if (h != NULL && a->meter.from_ms > 0)
			json_object_set_new(h, "meter",
			    meter_json(&a->meter, a->provider_group));
		if (h != NULL && i == job->nhistory - 1 &&
		    a->attempt == job->attempts && job->parts != NULL)
			parts_json(job, a, h);
		json_array_append_new(hist, h);
	}
	out->spec = dump(gp_jobspec_encode(&job->spec));
	out->gpus = gpus == NULL ? strdup("[]") : dump(gpus);
	out->history = hist == NULL ? strdup("[]") : dump(hist);
	if (out->spec == NULL || out->gpus == NULL || out->history == NULL) {
		store_job_text_free(out);
		return GP_ENOMEM;
	}
	return 0;
}

/* An accounting meter (see meter_json), if any. */
static void
load_meter_into(json_t *m, struct acct_meter *meter, int64_t *group)
{
	if (!json_is_object(m))
		return;
	meter->from_ms = json_integer_value(json_object_get(m, "from_ms"));
	meter->rate = json_integer_value(json_object_get(m, "rate"));
	meter->share = json_integer_value(json_object_get(m, "share"));
	meter->billed_ms = json_integer_value(json_object_get(m, "billed_ms"));
	meter->amount = json_integer_value(json_object_get(m, "amount"));
	meter->gpu_ms = json_integer_value(json_object_get(m, "gpu_ms"));
	meter->seq = (int)json_integer_value(json_object_get(m, "seq"));
	*group = json_integer_value(json_object_get(m, "provider_group"));
}

static void
load_meter(json_t *m, struct attempt_record *a)
{
	load_meter_into(m, &a->meter, &a->provider_group);
}

/*
 * A running part's overlay (see parts_json): its public key and port
 * slot, when both are there and sound (a slot indexes the coordinator's
 * table of 256, live.c); else none.
 */
static void
load_part_overlay(struct job_part *p, json_t *v)
{
	const char *key =
	    json_string_value(json_object_get(v, "overlay_key"));
	json_int_t slot =
	    json_integer_value(json_object_get(v, "overlay_slot"));

	if (p->ended || key == NULL || !gp_wg_key_valid(key) || slot < 1 ||
	    slot > GP_OVERLAY_SLOTS_MAX)
		return;
	gp_strlcpy(p->ov_pub, key, sizeof(p->ov_pub));
	p->ov_slot = (int)slot;
}

/*
 * The job's parts (see parts_json), from its last history record, else
 * (rows from before gangs) its node and GPUs as part 0. 0 or GP_ENOMEM.
 */
static int
load_parts(struct job *j, json_t *h)
{
	struct attempt_record *a = j->nhistory > 0 &&
	        j->history[j->nhistory - 1].attempt == j->attempts
	    ? &j->history[j->nhistory - 1]
	    : NULL;
	json_t *parts = json_object_get(h, "parts"),
	       *more = json_object_get(h, "more"), *v, *g;
	int n = j->spec.nodes > 1 ? j->spec.nodes : 1;
	size_t i, x;

	j->parts = calloc((size_t)n, sizeof(*j->parts));
	if (j->parts == NULL)
		return GP_ENOMEM;
	j->nparts = n;
	if (a == NULL || !json_is_array(parts)) {
		if (j->state != JOB_RUNNING)
			return 0;
		j->parts[0].node_id = j->node_id;
		j->parts[0].ngpus = j->ngpus;
		memcpy(j->parts[0].gpus, j->gpus, sizeof(j->gpus));
		return 0;
	}
	json_array_foreach(parts, i, v)
	{
		struct job_part *p = &j->parts[i];
		if ((int)i >= n)
			break;
		p->node_id = json_integer_value(json_object_get(v, "node_id"));
		json_array_foreach(json_object_get(v, "gpus"), x,
		    g) if (x < GP_GPUS_MAX) p->gpus[p->ngpus++] =
		    (uint8_t)json_integer_value(g);
		p->gpu_milli =
		    (int)json_integer_value(json_object_get(v, "gpu_milli"));
		p->gpu_mem_mib =
		    json_integer_value(json_object_get(v, "gpu_mem_mib"));
		p->started_ack = json_is_true(json_object_get(v, "started"));
		p->ended = json_is_true(json_object_get(v, "ended"));
		load_part_overlay(p, v);
	}
	if (json_array_size(more) > 0) {
		a->more = calloc(json_array_size(more), sizeof(*a->more));
		if (a->more == NULL)
			return GP_ENOMEM;
		json_array_foreach(more, i, v)
		{
			a->more[i].node_id =
			    json_integer_value(json_object_get(v, "node_id"));
			load_meter_into(json_object_get(v, "meter"),
			    &a->more[i].meter, &a->more[i].provider_group);
		}
		a->nmore = (int)json_array_size(more);
	}
	a->next_seq = (int)json_integer_value(json_object_get(h, "next_seq"));
	a->preempt_for = json_integer_value(json_object_get(h, "preempt_for"));
	j->master_port =
	    (int)json_integer_value(json_object_get(h, "master_port"));
	gp_strlcpy(j->stopping,
	    json_string_value(json_object_get(h, "stopping")) ?: "",
	    sizeof(j->stopping));
	j->gang_failed = json_is_true(json_object_get(h, "gang_failed"));
	return 0;
}

/* ---- job arrays ---- */

/*
 * Job arrays: a row each (store_put_array), and a row in jobs only for a
 * task that changed since (persist_job writes it; it wins). A task
 * without its own row is loaded as it was made: queued, from the array's
 * spec with its task index. The arrays are merged into the jobs' order
 * (ids ascending), so the queue is rebuilt in order.
 */
struct stored_array {
	int64_t first, submitted_ms;
	char user[GP_NAME_MAX + 1];
	char *spec;
	json_t *tasks;
};

static void
stored_arrays_free(struct stored_array *a, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(a[i].spec);
		json_decref(a[i].tasks);
	}
	free(a);
}

struct store_arrays {
	struct stored_array *a;
	size_t n, cap;
	size_t ai, ti; /* where the walk is (array, task) */
};

struct store_arrays *
store_arrays_new(void)
{
	return calloc(1, sizeof(struct store_arrays));
}

void
store_arrays_free(struct store_arrays *a)
{
	if (a == NULL)
		return;
	stored_arrays_free(a->a, a->n);
	free(a);
}

int
store_arrays_add(struct store_arrays *s, int64_t first, const char *user,
    const char *spec, const char *tasks, int64_t submitted_ms)
{
	struct stored_array *t;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		if ((t = realloc(s->a, cap * sizeof(*t))) == NULL)
			return GP_ENOMEM;
		s->a = t;
		s->cap = cap;
	}
	t = &s->a[s->n];
	memset(t, 0, sizeof(*t));
	t->first = first;
	gp_strlcpy(t->user, user, sizeof(t->user));
	t->submitted_ms = submitted_ms;
	if ((t->spec = strdup(spec)) == NULL)
		return GP_ENOMEM;
	t->tasks = json_loads(tasks, 0, NULL);
	if (!json_is_array(t->tasks))
		gp_warn("stored job array tasks invalid array=%lld",
		    (long long)first);
	s->n++;
	return 0;
}

int64_t
store_arrays_max_id(const struct store_arrays *s)
{
	int64_t max = 0, id;
	size_t k;

	for (k = 0; k < s->n; k++) {
		id =
		    s->a[k].first + (int64_t)json_array_size(s->a[k].tasks) - 1;
		if (id > max)
			max = id;
	}
	return max;
}

/* The task at index k of array a, as it was made. NULL: no memory. */
static struct job *
array_task_job(const struct stored_array *a, size_t k)
{
	struct job *j = calloc(1, sizeof(*j));
	char err[256];

	if (j == NULL)
		return NULL;
	j->id = a->first + (int64_t)k;
	gp_strlcpy(j->user, a->user, sizeof(j->user));
	if (gp_jobspec_decode(a->spec, strlen(a->spec), &j->spec, err,
	        sizeof(err)) != 0)
		gp_warn("stored job array spec invalid array=%lld error=\"%s\"",
		    (long long)a->first, err);
	j->spec.array_job_id = a->first;
	j->spec.array_task_id =
	    (int)json_integer_value(json_array_get(a->tasks, k));
	j->state = JOB_QUEUED;
	j->submitted_ms = a->submitted_ms;
	j->history = calloc(1, sizeof(*j->history));
	if (j->history == NULL || load_parts(j, NULL) != 0) {
		gp_jobspec_fini(&j->spec);
		free(j->history);
		free(j);
		return NULL;
	}
	return j;
}

/*
 * Hands the loader the array tasks without a row of their own whose ids
 * are below limit, and passes over the task whose id is limit (its row
 * comes next).
 */
int
store_arrays_before(struct store_arrays *s, int64_t limit,
    const struct store_loader *loader)
{
	const struct stored_array *a = s->a;
	struct job *j;
	int64_t id;

	while (s->ai < s->n) {
		if (s->ti >= json_array_size(a[s->ai].tasks)) {
			s->ai++;
			s->ti = 0;
			continue;
		}
		id = a[s->ai].first + (int64_t)s->ti;
		if (id > limit)
			return 0;
		s->ti++;
		if (id == limit)
			continue; /* its own row */
		if ((j = array_task_job(&a[s->ai], s->ti - 1)) == NULL)
			return GP_ENOMEM;
		loader->job(loader->arg, j);
	}
	return 0;
}

char *
store_array_tasks_encode(const int *tasks, int ntasks)
{
	json_t *list = json_array();
	int i;

	if (list == NULL)
		return NULL;
	for (i = 0; i < ntasks; i++)
		if (json_array_append_new(list, json_integer(tasks[i])) != 0) {
			json_decref(list);
			return NULL;
		}
	return dump(list);
}

/* ---- a job's row back ---- */

/*
 * A job from a row of SELECT * FROM jobs (malloc'd; NULL: out of
 * memory). A spec that does not decode is logged and left empty.
 */
struct job *
store_job_decode(const struct store_job_row *r)
{
	struct job *j;
	char err[256];
	const char *spec, *label;
	json_t *arr, *v;
	size_t i;

	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	j->id = r->id;
	gp_strlcpy(j->user, r->user, sizeof(j->user));
	spec = r->spec;
	if (gp_jobspec_decode(spec, strlen(spec), &j->spec, err, sizeof(err)) !=
	    0)
		gp_warn("stored job spec invalid job=%lld error=\"%s\"",
		    (long long)j->id, err);
	j->state = (enum job_state)r->state;
	j->cancel_requested = r->cancel_requested;
	j->attempts = r->attempts;
	j->node_id = r->node_id;
	arr = json_loads(r->gpus, 0, NULL);
	json_array_foreach(arr, i, v)
	{
		if (i < GP_GPUS_MAX)
			j->gpus[j->ngpus++] = (uint8_t)json_integer_value(v);
	}
	json_decref(arr);
	j->submitted_ms = r->submitted_ms;
	j->started_ms = r->started_ms;
	j->finished_ms = r->finished_ms;
	j->has_exit = r->has_exit;
	j->exit_code = r->exit_code;
	j->signal = r->signal;
	gp_strlcpy(j->reason, r->reason, sizeof(j->reason));
	if (*r->message != '\0')
		j->message = strdup(r->message);
	arr = json_loads(r->history, 0, NULL);
	j->nhistory = (int)json_array_size(arr);
	j->history = calloc((size_t)j->nhistory + 1, sizeof(*j->history));
	if (j->history == NULL)
		j->nhistory = 0;
	json_array_foreach(arr, i, v)
	{
		struct attempt_record *a;
		if (j->history == NULL)
			break;
		a = &j->history[i];
		a->attempt =
		    (int)json_integer_value(json_object_get(v, "attempt"));
		a->node_id = json_integer_value(json_object_get(v, "node_id"));
		a->started_ms =
		    json_integer_value(json_object_get(v, "started_ms"));
		a->finished_ms =
		    json_integer_value(json_object_get(v, "finished_ms"));
		gp_strlcpy(a->reason,
		    json_string_value(json_object_get(v, "reason")) ?: "",
		    sizeof(a->reason));
		a->restored_version =
		    json_integer_value(json_object_get(v, "restored_version"));
		a->ckpt_version =
		    json_integer_value(json_object_get(v, "ckpt_version"));
		a->ckpt_count =
		    json_integer_value(json_object_get(v, "ckpt_count"));
		a->ckpt_ms = json_integer_value(json_object_get(v, "ckpt_ms"));
		a->ckpt_bytes =
		    json_integer_value(json_object_get(v, "ckpt_bytes"));
		a->net_sent =
		    json_integer_value(json_object_get(v, "net_sent_bytes"));
		a->net_received = json_integer_value(
		    json_object_get(v, "net_received_bytes"));
		a->idle_limit_ms =
		    json_integer_value(json_object_get(v, "idle_limit_ms"));
		a->idle_seen_ms =
		    json_integer_value(json_object_get(v, "idle_seen_ms"));
		label = json_string_value(json_object_get(v, "ckpt_label"));
		a->ckpt_label = label != NULL && label[0] != '\0'
		    ? strndup(label, 200)
		    : NULL;
		load_meter(json_object_get(v, "meter"), a);
	}
	if (j->history == NULL ||
	    load_parts(j,
	        json_array_get(arr,
	            j->nhistory > 0 ? (size_t)j->nhistory - 1 : 0)) != 0) {
		json_decref(arr);
		state_job_stored_free(j);
		return NULL;
	}
	json_decref(arr);
	j->log_base = r->log_base;
	j->log_truncated = r->log_truncated;
	return j;
}

int
store_job_row_skipped(int st, int64_t fin, int64_t finished_before)
{
	return finished_before > 0 && st >= JOB_SUCCEEDED &&
	    st <= JOB_TIMEOUT && fin > 0 && fin < finished_before;
}

/* ---- a node's GPUs ---- */

char *
store_node_gpus_encode(const struct node *node)
{
	json_t *gpus = json_array();
	int i;

	if (gpus == NULL)
		return NULL;
	for (i = 0; i < node->ngpus; i++) {
		const struct node_gpu *g = &node->gpus[i];
		json_array_append_new(gpus,
		    json_pack("{s:i,s:s,s:s,s:I}", "index", g->index, "uuid",
		        g->uuid, "model", g->model, "mem_mib",
		        (json_int_t)g->mem_mib));
	}
	return dump(gpus);
}

int
store_node_gpus_decode(const char *text, struct node *n)
{
	json_t *gpus = json_loads(text, 0, NULL), *g;
	size_t i;

	n->ngpus = (int)json_array_size(gpus);
	n->gpus = calloc((size_t)n->ngpus + 1, sizeof(*n->gpus));
	if (n->gpus == NULL) {
		json_decref(gpus);
		n->ngpus = 0;
		return GP_ENOMEM;
	}
	json_array_foreach(gpus, i, g)
	{
		struct node_gpu *ng = &n->gpus[i];
		ng->index =
		    (int)json_integer_value(json_object_get(g, "index"));
		gp_strlcpy(ng->uuid,
		    json_string_value(json_object_get(g, "uuid")) ?: "",
		    sizeof(ng->uuid));
		gp_strlcpy(ng->model,
		    json_string_value(json_object_get(g, "model")) ?: "",
		    sizeof(ng->model));
		ng->mem_mib = json_integer_value(json_object_get(g, "mem_mib"));
	}
	json_decref(gpus);
	return 0;
}
