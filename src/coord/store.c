/*
 * store.c: the coordinator's durable state in SQLite (WAL, synchronous=FULL).
 * Only the state thread writes, one transaction per batch of changes, so
 * concurrent submissions share one fsync (group commit). At start-up the
 * model is loaded back into memory, but for the jobs that finished more
 * than min-job-age ago: those are read back one at a time when asked
 * for (store_read_job, through a read-only connection of its own).
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "store.h"
#include "gp.h"
#include "log.h"

static sqlite3 *db;
static sqlite3_stmt *put_job_stmt, *put_node_stmt, *put_token_stmt;
static sqlite3_stmt *put_array_stmt;
/* Every state batch begins and commits: prepared once. */
static sqlite3_stmt *begin_stmt, *commit_stmt;
static sqlite3_stmt *token_group_stmt;
/* Reads of jobs that left memory (store_read_job): their own connection. */
static sqlite3 *rdb;
static sqlite3_stmt *read_job_stmt, *read_brief_stmt;
static pthread_mutex_t rdb_lock = PTHREAD_MUTEX_INITIALIZER;

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE IF NOT EXISTS tokens(id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL, role TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,"
    " created_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS nodes(id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL UNIQUE, owner_token INTEGER NOT NULL,"
    " owner_name TEXT NOT NULL, cpus INTEGER NOT NULL,"
    " mem_mib INTEGER NOT NULL, gpus TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS jobs(id INTEGER PRIMARY KEY,"
    " user TEXT NOT NULL, spec TEXT NOT NULL, state INTEGER NOT NULL,"
    " cancel_requested INTEGER NOT NULL, attempts INTEGER NOT NULL,"
    " node_id INTEGER NOT NULL, gpus TEXT NOT NULL,"
    " submitted_ms INTEGER NOT NULL, started_ms INTEGER NOT NULL,"
    " finished_ms INTEGER NOT NULL, has_exit INTEGER NOT NULL,"
    " exit_code INTEGER NOT NULL, signal INTEGER NOT NULL,"
    " reason TEXT NOT NULL, message TEXT NOT NULL, history TEXT NOT NULL,"
    " log_base INTEGER NOT NULL, log_truncated INTEGER NOT NULL);"
    /* A job array as submitted (store_put_array): id is its first job's. */
    "CREATE TABLE IF NOT EXISTS arrays(id INTEGER PRIMARY KEY,"
    " user TEXT NOT NULL, spec TEXT NOT NULL, tasks TEXT NOT NULL,"
    " submitted_ms INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO meta VALUES('schema_version', '1');";

static int
exec(const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		gp_error("sqlite failed sql=\"%.40s\" error=\"%s\"", sql,
		    err != NULL ? err : "?");
		sqlite3_free(err);
		return GP_EIO;
	}
	return 0;
}

/*
 * Columns added since the first schema, each detected by its presence
 * (not by a version number, so that additions from different branches
 * compose): tokens.group_id (accounting; the group "default" is id 1).
 */
static int
migrate(void)
{
	sqlite3_stmt *s;
	int have = 0;

	if (sqlite3_prepare_v2(db,
		"SELECT COUNT(*) FROM pragma_table_info('tokens')"
		" WHERE name = 'group_id'",
		-1, &s, NULL) != SQLITE_OK)
		return GP_EIO;
	if (sqlite3_step(s) == SQLITE_ROW)
		have = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	if (!have && exec("ALTER TABLE tokens ADD COLUMN group_id INTEGER NOT"
			  " NULL DEFAULT 1;") != 0)
		return GP_EIO;
	return 0;
}

static int
prepare(const char *sql, sqlite3_stmt **stmt)
{
	if (sqlite3_prepare_v2(db, sql, -1, stmt, NULL) != SQLITE_OK) {
		gp_error("sqlite prepare failed error=\"%s\"",
		    sqlite3_errmsg(db));
		return GP_EIO;
	}
	return 0;
}

int
store_open(const char *path)
{
	if (sqlite3_open_v2(path, &db,
		SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
		    SQLITE_OPEN_NOMUTEX,
		NULL) != SQLITE_OK) {
		gp_error("cannot open database path=%s error=\"%s\"", path,
		    db != NULL ? sqlite3_errmsg(db) : "out of memory");
		return GP_EIO;
	}
	/* FULL: a commit is fsynced before the state thread answers. */
	if (exec("PRAGMA journal_mode=WAL;") != 0 ||
	    exec("PRAGMA synchronous=FULL;") != 0 ||
	    exec("PRAGMA cache_size=-4000;") != 0 || exec(schema) != 0 ||
	    migrate() != 0)
		return GP_EIO;
	if (prepare("INSERT OR REPLACE INTO jobs VALUES(?,?,?,?,?,?,?,?,?,?,?,"
		    "?,?,?,?,?,?,?,?)",
		&put_job_stmt) != 0 ||
	    prepare("INSERT OR REPLACE INTO nodes VALUES(?,?,?,?,?,?,?)",
		&put_node_stmt) != 0 ||
	    prepare("INSERT INTO tokens(id, name, role, hash, created_ms,"
		    " group_id) VALUES(?,?,?,?,?,?)",
		&put_token_stmt) != 0 ||
	    prepare("UPDATE tokens SET group_id = ? WHERE id = ?",
		&token_group_stmt) != 0 ||
	    prepare("INSERT OR REPLACE INTO arrays VALUES(?,?,?,?,?)",
		&put_array_stmt) != 0 ||
	    prepare("BEGIN IMMEDIATE;", &begin_stmt) != 0 ||
	    prepare("COMMIT;", &commit_stmt) != 0)
		return GP_EIO;
	if (sqlite3_open_v2(path, &rdb, SQLITE_OPEN_READONLY |
	            SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(rdb, "SELECT * FROM jobs WHERE id = ?", -1,
	        &read_job_stmt, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(rdb,
	        "SELECT user, state, finished_ms FROM jobs WHERE id = ?", -1,
	        &read_brief_stmt, NULL) != SQLITE_OK) {
		gp_error("cannot open database for reading path=%s "
		         "error=\"%s\"",
		    path, rdb != NULL ? sqlite3_errmsg(rdb) : "out of memory");
		return GP_EIO;
	}
	sqlite3_busy_timeout(rdb, 5000);
	return 0;
}

void
store_close(void)
{
	sqlite3_finalize(put_job_stmt);
	sqlite3_finalize(put_node_stmt);
	sqlite3_finalize(put_token_stmt);
	sqlite3_finalize(token_group_stmt);
	sqlite3_finalize(put_array_stmt);
	sqlite3_finalize(begin_stmt);
	sqlite3_finalize(commit_stmt);
	sqlite3_close(db);
	db = NULL;
	pthread_mutex_lock(&rdb_lock);
	sqlite3_finalize(read_job_stmt);
	sqlite3_finalize(read_brief_stmt);
	read_job_stmt = read_brief_stmt = NULL;
	sqlite3_close(rdb);
	rdb = NULL;
	pthread_mutex_unlock(&rdb_lock);
}

sqlite3 *
store_db(void)
{
	return db;
}

/* Steps a statement without rows once (sql: for the log). */
static int
step_once(sqlite3_stmt *stmt, const char *sql)
{
	int rc = sqlite3_step(stmt);

	if (rc != SQLITE_DONE)
		gp_error("sqlite failed sql=\"%s\" error=\"%s\"", sql,
		    sqlite3_errmsg(db));
	sqlite3_reset(stmt);
	return rc == SQLITE_DONE ? 0 : GP_EIO;
}

int
store_begin(void)
{
	return step_once(begin_stmt, "BEGIN IMMEDIATE;");
}

int
store_commit(void)
{
	return step_once(commit_stmt, "COMMIT;");
}

static int
step_reset(sqlite3_stmt *stmt)
{
	int rc = sqlite3_step(stmt);

	sqlite3_reset(stmt);
	sqlite3_clear_bindings(stmt);
	if (rc != SQLITE_DONE) {
		gp_error("sqlite write failed error=\"%s\"", sqlite3_errmsg(db));
		return GP_EIO;
	}
	return 0;
}

/* Binds a JSON value as text; frees it. */
static int
bind_json(sqlite3_stmt *stmt, int col, json_t *value)
{
	char *text = json_dumps(value, JSON_COMPACT);

	json_decref(value);
	if (text == NULL)
		return GP_ENOMEM;
	sqlite3_bind_text(stmt, col, text, -1, free);
	return 0;
}

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
		json_t *g = json_array();
		for (i = 0; i < p->ngpus; i++)
			json_array_append_new(g, json_integer(p->gpus[i]));
		json_array_append_new(parts,
		    json_pack("{s:I,s:o,s:i,s:I,s:b,s:b}", "node_id",
			(json_int_t)p->node_id, "gpus", g, "gpu_milli",
			p->gpu_milli, "gpu_mem_mib", (json_int_t)p->gpu_mem_mib,
			"started", p->started_ack, "ended", p->ended));
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

/*
 * A job that never ran (no GPUs, no history) has "[]" for both without
 * going through jansson: each dump costs a loop-check table.
 */
int
store_put_job(const struct job *job)
{
	sqlite3_stmt *s = put_job_stmt;
	json_t *gpus = NULL, *hist = NULL;
	int i;

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
			"ckpt_version", (json_int_t)a->ckpt_version,
			"ckpt_count", (json_int_t)a->ckpt_count, "ckpt_ms",
			(json_int_t)a->ckpt_ms, "ckpt_bytes",
			(json_int_t)a->ckpt_bytes, "ckpt_label",
			a->ckpt_label ? a->ckpt_label : "");
		/* Accounting: the meter, once billing began. */
		if (h != NULL && a->meter.from_ms > 0)
			json_object_set_new(h, "meter",
			    meter_json(&a->meter, a->provider_group));
		if (h != NULL && i == job->nhistory - 1 &&
		    a->attempt == job->attempts && job->parts != NULL)
			parts_json(job, a, h);
		json_array_append_new(hist, h);
	}
	sqlite3_bind_int64(s, 1, job->id);
	sqlite3_bind_text(s, 2, job->user, -1, SQLITE_STATIC);
	if (bind_json(s, 3, gp_jobspec_encode(&job->spec)) != 0)
		goto fail;
	sqlite3_bind_int(s, 4, (int)job->state);
	sqlite3_bind_int(s, 5, job->cancel_requested);
	sqlite3_bind_int(s, 6, job->attempts);
	sqlite3_bind_int64(s, 7, job->node_id);
	if (gpus == NULL)
		sqlite3_bind_text(s, 8, "[]", 2, SQLITE_STATIC);
	else if (bind_json(s, 8, gpus) != 0)
		goto fail_hist;
	sqlite3_bind_int64(s, 9, job->submitted_ms);
	sqlite3_bind_int64(s, 10, job->started_ms);
	sqlite3_bind_int64(s, 11, job->finished_ms);
	sqlite3_bind_int(s, 12, job->has_exit);
	sqlite3_bind_int(s, 13, job->exit_code);
	sqlite3_bind_int(s, 14, job->signal);
	sqlite3_bind_text(s, 15, job->reason, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 16, job->message ? job->message : "", -1,
	    SQLITE_STATIC);
	if (hist == NULL)
		sqlite3_bind_text(s, 17, "[]", 2, SQLITE_STATIC);
	else if (bind_json(s, 17, hist) != 0)
		goto fail_reset;
	sqlite3_bind_int64(s, 18, job->log_base);
	sqlite3_bind_int(s, 19, job->log_truncated);
	return step_reset(s);
fail:
	json_decref(gpus);
fail_hist:
	json_decref(hist);
fail_reset:
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return GP_ENOMEM;
}

int
store_put_array(int64_t first, const char *user, const struct gp_jobspec *spec,
    const int *tasks, int ntasks, int64_t submitted_ms)
{
	sqlite3_stmt *s = put_array_stmt;
	json_t *list = json_array();
	int i;

	if (list == NULL)
		return GP_ENOMEM;
	for (i = 0; i < ntasks; i++)
		if (json_array_append_new(list, json_integer(tasks[i])) != 0) {
			json_decref(list);
			return GP_ENOMEM;
		}
	sqlite3_bind_int64(s, 1, first);
	sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
	if (bind_json(s, 3, gp_jobspec_encode(spec)) != 0) {
		json_decref(list);
		goto fail;
	}
	if (bind_json(s, 4, list) != 0)
		goto fail;
	sqlite3_bind_int64(s, 5, submitted_ms);
	return step_reset(s);
fail:
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return GP_ENOMEM;
}

int
store_put_node(const struct node *node)
{
	sqlite3_stmt *s = put_node_stmt;
	json_t *gpus = json_array();
	int i;

	for (i = 0; i < node->ngpus; i++) {
		const struct node_gpu *g = &node->gpus[i];
		json_array_append_new(gpus,
		    json_pack("{s:i,s:s,s:s,s:I}", "index", g->index, "uuid",
			g->uuid, "model", g->model, "mem_mib",
			(json_int_t)g->mem_mib));
	}
	sqlite3_bind_int64(s, 1, node->id);
	sqlite3_bind_text(s, 2, node->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, node->owner_token);
	sqlite3_bind_text(s, 4, node->owner_name, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 5, node->cpus);
	sqlite3_bind_int64(s, 6, node->mem_mib);
	if (bind_json(s, 7, gpus) != 0) {
		sqlite3_reset(s);
		sqlite3_clear_bindings(s);
		return GP_ENOMEM;
	}
	return step_reset(s);
}

int
store_put_token(const struct token_entry *t, int64_t created_ms)
{
	sqlite3_stmt *s = put_token_stmt;

	sqlite3_bind_int64(s, 1, t->id);
	sqlite3_bind_text(s, 2, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, gp_role_name(t->role), -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, t->hash, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, created_ms);
	sqlite3_bind_int64(s, 6, t->group_id > 0 ? t->group_id : 1);
	return step_reset(s);
}

int
store_set_token_group(int64_t token_id, int64_t group_id)
{
	sqlite3_stmt *s = token_group_stmt;

	sqlite3_bind_int64(s, 1, group_id);
	sqlite3_bind_int64(s, 2, token_id);
	return step_reset(s);
}

/*
 * A revoked token's row goes, but its id stays used: meta's
 * token_id_floor is above every id ever given, so that a node still
 * naming a revoked owner token can never pass to a new token that
 * happens to get the same id.
 */
int
store_delete_token(int64_t id)
{
	sqlite3_stmt *s;
	int ret;

	if (prepare("DELETE FROM tokens WHERE id = ?", &s) != 0)
		return GP_EIO;
	sqlite3_bind_int64(s, 1, id);
	ret = step_reset(s);
	sqlite3_finalize(s);
	if (ret != 0)
		return ret;
	if (prepare("INSERT INTO meta VALUES('token_id_floor', ?) "
		    "ON CONFLICT(key) DO UPDATE SET value = "
		    "max(CAST(value AS INTEGER), CAST(excluded.value AS "
		    "INTEGER))",
		&s) != 0)
		return GP_EIO;
	sqlite3_bind_int64(s, 1, id + 1);
	ret = step_reset(s);
	sqlite3_finalize(s);
	return ret;
}

int
store_token_id_floor(int64_t *next)
{
	sqlite3_stmt *s;

	*next = 0;
	if (prepare("SELECT CAST(value AS INTEGER) FROM meta "
		    "WHERE key = 'token_id_floor'",
		&s) != 0)
		return GP_EIO;
	if (sqlite3_step(s) == SQLITE_ROW)
		*next = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return 0;
}

static const char *
col_text(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	return t != NULL ? (const char *)t : "";
}

static int
load_tokens(void (*on_token)(struct token_entry *))
{
	sqlite3_stmt *s;
	struct token_entry *t;

	if (prepare("SELECT id, name, role, hash, group_id, created_ms"
		    " FROM tokens", &s) != 0)
		return GP_EIO;
	while (sqlite3_step(s) == SQLITE_ROW) {
		t = calloc(1, sizeof(*t));
		if (t == NULL)
			break;
		t->id = sqlite3_column_int64(s, 0);
		gp_strlcpy(t->name, col_text(s, 1), sizeof(t->name));
		if (gp_role_parse(col_text(s, 2), &t->role) != 0)
			t->role = GP_ROLE_USER;
		gp_strlcpy(t->hash, col_text(s, 3), sizeof(t->hash));
		t->group_id = sqlite3_column_int64(s, 4);
		t->created_ms = sqlite3_column_int64(s, 5);
		on_token(t);
	}
	sqlite3_finalize(s);
	return 0;
}

static int
load_nodes(void (*on_node)(struct node *))
{
	sqlite3_stmt *s;
	struct node *n;
	json_t *gpus, *g;
	size_t i;

	if (prepare("SELECT id, name, owner_token, owner_name, cpus, mem_mib,"
		    " gpus FROM nodes ORDER BY id",
		&s) != 0)
		return GP_EIO;
	while (sqlite3_step(s) == SQLITE_ROW) {
		n = calloc(1, sizeof(*n));
		if (n == NULL)
			break;
		n->id = sqlite3_column_int64(s, 0);
		gp_strlcpy(n->name, col_text(s, 1), sizeof(n->name));
		n->owner_token = sqlite3_column_int64(s, 2);
		gp_strlcpy(n->owner_name, col_text(s, 3), sizeof(n->owner_name));
		n->cpus = sqlite3_column_int(s, 4);
		n->mem_mib = sqlite3_column_int64(s, 5);
		gpus = json_loads(col_text(s, 6), 0, NULL);
		n->ngpus = (int)json_array_size(gpus);
		n->gpus = calloc((size_t)n->ngpus + 1, sizeof(*n->gpus));
		json_array_foreach(gpus, i, g)
		{
			struct node_gpu *ng = &n->gpus[i];
			ng->index = (int)json_integer_value(
			    json_object_get(g, "index"));
			gp_strlcpy(ng->uuid,
			    json_string_value(json_object_get(g, "uuid")) ?: "",
			    sizeof(ng->uuid));
			gp_strlcpy(ng->model,
			    json_string_value(json_object_get(g, "model")) ?: "",
			    sizeof(ng->model));
			ng->mem_mib = json_integer_value(
			    json_object_get(g, "mem_mib"));
		}
		json_decref(gpus);
		on_node(n);
	}
	sqlite3_finalize(s);
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
		json_array_foreach(json_object_get(v, "gpus"), x, g)
			if (x < GP_GPUS_MAX)
				p->gpus[p->ngpus++] =
				    (uint8_t)json_integer_value(g);
		p->gpu_milli =
		    (int)json_integer_value(json_object_get(v, "gpu_milli"));
		p->gpu_mem_mib =
		    json_integer_value(json_object_get(v, "gpu_mem_mib"));
		p->started_ack = json_is_true(json_object_get(v, "started"));
		p->ended = json_is_true(json_object_get(v, "ended"));
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

static int
load_arrays(struct stored_array **out, size_t *nout)
{
	struct stored_array *a = NULL, *t;
	size_t n = 0, cap = 0;
	sqlite3_stmt *s;

	*out = NULL;
	*nout = 0;
	if (prepare("SELECT id, user, spec, tasks, submitted_ms FROM arrays"
	            " ORDER BY id",
	        &s) != 0)
		return GP_EIO;
	while (sqlite3_step(s) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((t = realloc(a, cap * sizeof(*a))) == NULL)
				goto nomem;
			a = t;
		}
		memset(&a[n], 0, sizeof(a[n]));
		a[n].first = sqlite3_column_int64(s, 0);
		gp_strlcpy(a[n].user, col_text(s, 1), sizeof(a[n].user));
		a[n].spec = strdup(col_text(s, 2));
		a[n].tasks = json_loads(col_text(s, 3), 0, NULL);
		a[n].submitted_ms = sqlite3_column_int64(s, 4);
		n++;
		if (a[n - 1].spec == NULL)
			goto nomem;
		if (!json_is_array(a[n - 1].tasks))
			gp_warn("stored job array tasks invalid array=%lld",
			    (long long)a[n - 1].first);
	}
	sqlite3_finalize(s);
	*out = a;
	*nout = n;
	return 0;
nomem:
	sqlite3_finalize(s);
	stored_arrays_free(a, n);
	return GP_ENOMEM;
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
 * Hands on_job the array tasks without a row of their own whose ids are
 * below limit, and passes over the task whose id is limit (its row comes
 * next). *ai, *ti: where the walk is (array, task).
 */
static int
array_tasks_before(const struct stored_array *a, size_t na, size_t *ai,
    size_t *ti, int64_t limit, void (*on_job)(struct job *))
{
	struct job *j;
	int64_t id;

	while (*ai < na) {
		if (*ti >= json_array_size(a[*ai].tasks)) {
			(*ai)++;
			*ti = 0;
			continue;
		}
		id = a[*ai].first + (int64_t)*ti;
		if (id > limit)
			return 0;
		(*ti)++;
		if (id == limit)
			continue; /* its own row */
		if ((j = array_task_job(&a[*ai], *ti - 1)) == NULL)
			return GP_ENOMEM;
		on_job(j);
	}
	return 0;
}

/*
 * A job from a row of SELECT * FROM jobs (malloc'd; NULL: out of
 * memory). A spec that does not decode is logged and left empty.
 */
static struct job *
job_from_row(sqlite3_stmt *s)
{
	struct job *j;
	char err[256];
	const char *spec, *label;
	json_t *arr, *v;
	size_t i;

	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	j->id = sqlite3_column_int64(s, 0);
	gp_strlcpy(j->user, col_text(s, 1), sizeof(j->user));
	spec = col_text(s, 2);
	if (gp_jobspec_decode(spec, strlen(spec), &j->spec, err,
		sizeof(err)) != 0)
		gp_warn("stored job spec invalid job=%lld error=\"%s\"",
		    (long long)j->id, err);
	j->state = (enum job_state)sqlite3_column_int(s, 3);
	j->cancel_requested = sqlite3_column_int(s, 4);
	j->attempts = sqlite3_column_int(s, 5);
	j->node_id = sqlite3_column_int64(s, 6);
	arr = json_loads(col_text(s, 7), 0, NULL);
	json_array_foreach(arr, i, v)
	{
		if (i < GP_GPUS_MAX)
			j->gpus[j->ngpus++] = (uint8_t)json_integer_value(v);
	}
	json_decref(arr);
	j->submitted_ms = sqlite3_column_int64(s, 8);
	j->started_ms = sqlite3_column_int64(s, 9);
	j->finished_ms = sqlite3_column_int64(s, 10);
	j->has_exit = sqlite3_column_int(s, 11);
	j->exit_code = sqlite3_column_int(s, 12);
	j->signal = sqlite3_column_int(s, 13);
	gp_strlcpy(j->reason, col_text(s, 14), sizeof(j->reason));
	if (*col_text(s, 15) != '\0')
		j->message = strdup(col_text(s, 15));
	arr = json_loads(col_text(s, 16), 0, NULL);
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
		a->attempt = (int)json_integer_value(
		    json_object_get(v, "attempt"));
		a->node_id = json_integer_value(json_object_get(v, "node_id"));
		a->started_ms = json_integer_value(
		    json_object_get(v, "started_ms"));
		a->finished_ms = json_integer_value(
		    json_object_get(v, "finished_ms"));
		gp_strlcpy(a->reason,
		    json_string_value(json_object_get(v, "reason")) ?: "",
		    sizeof(a->reason));
		a->restored_version = json_integer_value(
		    json_object_get(v, "restored_version"));
		a->ckpt_version = json_integer_value(
		    json_object_get(v, "ckpt_version"));
		a->ckpt_count = json_integer_value(
		    json_object_get(v, "ckpt_count"));
		a->ckpt_ms = json_integer_value(json_object_get(v, "ckpt_ms"));
		a->ckpt_bytes = json_integer_value(
		    json_object_get(v, "ckpt_bytes"));
		label = json_string_value(json_object_get(v, "ckpt_label"));
		a->ckpt_label = label != NULL && label[0] != '\0'
		    ? strndup(label, 200)
		    : NULL;
		load_meter(json_object_get(v, "meter"), a);
	}
	if (j->history == NULL ||
	    load_parts(j, json_array_get(arr, j->nhistory > 0
		                             ? (size_t)j->nhistory - 1
		                             : 0)) != 0) {
		json_decref(arr);
		state_job_stored_free(j);
		return NULL;
	}
	json_decref(arr);
	j->log_base = sqlite3_column_int64(s, 17);
	j->log_truncated = sqlite3_column_int(s, 18);
	return j;
}

/* A row of a job that finished before finished_before (0: none). */
static int
row_left_on_disk(sqlite3_stmt *s, int64_t finished_before)
{
	int st = sqlite3_column_int(s, 3);
	int64_t fin = sqlite3_column_int64(s, 10);

	return finished_before > 0 && st >= JOB_SUCCEEDED &&
	    st <= JOB_TIMEOUT && fin > 0 && fin < finished_before;
}

static int
load_jobs(void (*on_job)(struct job *), int64_t finished_before,
    int64_t *skipped, int64_t *max_id)
{
	struct stored_array *arrays;
	size_t narrays, ai = 0, ti = 0, k;
	sqlite3_stmt *s;
	struct job *j;
	int64_t id;
	int rc = 0;

	*max_id = 0;
	if (load_arrays(&arrays, &narrays) != 0)
		return GP_EIO;
	for (k = 0; k < narrays; k++) {
		id = arrays[k].first +
		    (int64_t)json_array_size(arrays[k].tasks) - 1;
		if (id > *max_id)
			*max_id = id;
	}
	if (prepare("SELECT * FROM jobs ORDER BY id", &s) != 0) {
		stored_arrays_free(arrays, narrays);
		return GP_EIO;
	}
	while (sqlite3_step(s) == SQLITE_ROW) {
		id = sqlite3_column_int64(s, 0);
		if (id > *max_id)
			*max_id = id;
		/* The walk passes over this id either way: a task whose row
		 * stays on disk must not come back as queued. */
		if (array_tasks_before(arrays, narrays, &ai, &ti, id,
		        on_job) != 0) {
			rc = GP_ENOMEM;
			break;
		}
		if (row_left_on_disk(s, finished_before)) {
			skipped[sqlite3_column_int(s, 3)]++;
			continue;
		}
		if ((j = job_from_row(s)) == NULL) {
			rc = GP_ENOMEM;
			break;
		}
		on_job(j);
	}
	sqlite3_finalize(s);
	if (rc == 0 &&
	    array_tasks_before(arrays, narrays, &ai, &ti, INT64_MAX, on_job) !=
	        0)
		rc = GP_ENOMEM;
	stored_arrays_free(arrays, narrays);
	return rc;
}

int
store_load(void (*on_token)(struct token_entry *),
    void (*on_node)(struct node *), void (*on_job)(struct job *),
    int64_t finished_before, int64_t *skipped, int64_t *max_job_id)
{
	if (load_tokens(on_token) != 0 || load_nodes(on_node) != 0 ||
	    load_jobs(on_job, finished_before, skipped, max_job_id) != 0)
		return GP_EIO;
	return 0;
}

/*
 * Reads of jobs that left memory, from any thread: a read-only
 * connection of their own (WAL: they never wait for the state thread's
 * transaction, and see what it committed), behind rdb_lock. Such reads
 * are rare (a user asks about an old job; a GC pass), so one connection
 * is enough.
 */
int
store_read_job(int64_t id, struct job **out)
{
	int rc;

	*out = NULL;
	pthread_mutex_lock(&rdb_lock);
	if (read_job_stmt == NULL) {
		pthread_mutex_unlock(&rdb_lock);
		return GP_EIO;
	}
	sqlite3_bind_int64(read_job_stmt, 1, id);
	rc = sqlite3_step(read_job_stmt);
	if (rc == SQLITE_ROW) {
		*out = job_from_row(read_job_stmt);
		rc = *out != NULL ? 0 : GP_ENOMEM;
	} else if (rc == SQLITE_DONE) {
		rc = GP_ENOENT;
	} else {
		gp_error("sqlite read failed job=%lld error=\"%s\"",
		    (long long)id, sqlite3_errmsg(rdb));
		rc = GP_EIO;
	}
	sqlite3_reset(read_job_stmt);
	sqlite3_clear_bindings(read_job_stmt);
	pthread_mutex_unlock(&rdb_lock);
	return rc;
}

int
store_read_job_brief(int64_t id, char *user, int *st, int64_t *finished_ms)
{
	int rc;

	pthread_mutex_lock(&rdb_lock);
	if (read_brief_stmt == NULL) {
		pthread_mutex_unlock(&rdb_lock);
		return GP_EIO;
	}
	sqlite3_bind_int64(read_brief_stmt, 1, id);
	rc = sqlite3_step(read_brief_stmt);
	if (rc == SQLITE_ROW) {
		gp_strlcpy(user, col_text(read_brief_stmt, 0),
		    GP_NAME_MAX + 1);
		*st = sqlite3_column_int(read_brief_stmt, 1);
		*finished_ms = sqlite3_column_int64(read_brief_stmt, 2);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = GP_ENOENT;
	} else {
		gp_error("sqlite read failed job=%lld error=\"%s\"",
		    (long long)id, sqlite3_errmsg(rdb));
		rc = GP_EIO;
	}
	sqlite3_reset(read_brief_stmt);
	sqlite3_clear_bindings(read_brief_stmt);
	pthread_mutex_unlock(&rdb_lock);
	return rc;
}
