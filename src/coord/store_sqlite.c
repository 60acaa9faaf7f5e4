/*
 * store_sqlite.c: the SQLite store (store.h), the first implementation
 * of struct gp_store_ops: state.db in WAL mode with synchronous=FULL.
 * Only the state thread writes, one transaction per batch of changes, so
 * concurrent submissions share one fsync (group commit). The jobs that
 * left memory, and the ledger's queries, are read from any thread
 * through a read-only connection of their own behind a mutex (WAL: they
 * never wait for the state thread's transaction, and see what it
 * committed). The ledger's tables: store_sqlite_ledger.c.
 */
#include "store_sqlite.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "log.h"
#include "util.h"

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
    /* Idempotency keys of submissions (submit_key.c). */
    "CREATE TABLE IF NOT EXISTS submit_keys(user TEXT NOT NULL,"
    " key TEXT NOT NULL, job_id INTEGER NOT NULL,"
    " created_ms INTEGER NOT NULL, count INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(user, key)) WITHOUT ROWID;";

int
sqlite_store_fail(struct sqlite_store *s, struct gp_sqlite *db, int code)
{
	snprintf(s->base.error, sizeof(s->base.error), "%s",
	    gp_sqlite_errmsg(db)[0] != '\0' ? gp_sqlite_errmsg(db)
	                                    : gp_strerror(code));
	return code;
}

int
sqlite_store_run(struct gp_store *gs, const char *sql, const char *fmt, ...)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	sqlite3_stmt *st = gp_sqlite_stmt(&s->w, sql);
	va_list ap;
	int rc;

	if (st == NULL)
		return sqlite_store_fail(s, &s->w, GP_EIO);
	va_start(ap, fmt);
	rc = gp_sqlite_vbind(&s->w, st, fmt, ap);
	va_end(ap);
	if (rc != 0) {
		gp_sqlite_done(st);
		return sqlite_store_fail(s, &s->w, rc);
	}
	if ((rc = gp_sqlite_step_done(&s->w, st)) != 0)
		return sqlite_store_fail(s, &s->w, rc);
	return 0;
}

/*
 * Columns added since the first schema, each detected by its presence
 * (not by a version number, so that additions from different branches
 * compose): tokens.group_id (accounting; the group "default" is id 1),
 * submit_keys.count (job arrays).
 */
static int
migrate(struct sqlite_store *s)
{
	if (!gp_sqlite_has(&s->w, "tokens", "group_id") &&
	    gp_sqlite_exec(&s->w,
	        "ALTER TABLE tokens ADD COLUMN group_id"
	        " INTEGER NOT NULL DEFAULT 1;") != 0)
		return GP_EIO;
	if (!gp_sqlite_has(&s->w, "submit_keys", "count") &&
	    gp_sqlite_exec(&s->w,
	        "ALTER TABLE submit_keys ADD COLUMN count"
	        " INTEGER NOT NULL DEFAULT 0;") != 0)
		return GP_EIO;
	return sqlite_ledger_migrate(s);
}

/*
 * The fingerprint of this build's schema text (FNV-1a of the tables'
 * statements, both files'): a store whose meta holds it was made or
 * migrated by this very schema, and opens without running it again.
 */
static void
schema_hash(char out[17])
{
	const char *parts[] = {schema, sqlite_ledger_schema, NULL};
	uint64_t h = 1469598103934665603ULL;
	const char *c;
	int i;

	for (i = 0; parts[i] != NULL; i++)
		for (c = parts[i]; *c != '\0'; c++)
			h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* The schema version, refused when newer than this build's. */
static int
check_version(struct sqlite_store *s, char *err, size_t errlen)
{
	int64_t version = 0;

	if (gp_sqlite_query_int(&s->w,
		"SELECT CAST(value AS INTEGER) FROM"
		" meta WHERE key = 'schema_version'",
		&version, NULL) < 0)
		return GP_EIO;
	if (version > GP_STORE_SCHEMA) {
		snprintf(err, errlen,
		    "%s: schema version %lld is newer than "
		    "this coordinator's (%d)",
		    s->base.target, (long long)version, GP_STORE_SCHEMA);
		return GP_EPROTO;
	}
	return 0;
}

/* Reads the pool id into s->base. */
static int
read_pool_id(struct sqlite_store *s)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = gp_sqlite_stmt(&s->w,
		 "SELECT value FROM meta WHERE key = 'pool_id'")) == NULL)
		return GP_EIO;
	if ((rc = gp_sqlite_step(&s->w, st)) == 1)
		gp_strlcpy(s->base.pool_id, gp_sqlite_text(st, 0),
		    sizeof(s->base.pool_id));
	gp_sqlite_done(st);
	s->base.schema_version = GP_STORE_SCHEMA;
	return rc == 1 ? 0 : GP_EIO;
}

/* 1 when the store was made by this build's schema (schema_hash). */
static int
schema_current(struct sqlite_store *s, const char *hash)
{
	sqlite3_stmt *st;
	int same = 0;

	if (!gp_sqlite_has(&s->w, "meta", NULL) ||
	    (st = gp_sqlite_stmt(&s->w,
		 "SELECT value FROM meta WHERE key = 'schema_hash'")) == NULL)
		return 0;
	if (gp_sqlite_step(&s->w, st) == 1)
		same = strcmp(gp_sqlite_text(st, 0), hash) == 0;
	gp_sqlite_done(st);
	return same;
}

/*
 * The schema made or brought up to date (in the caller's transaction),
 * the version checked and written, a pool id made when there is none.
 */
static int
make_schema(struct sqlite_store *s, const char *hash, char *err,
    size_t errlen)
{
	char id[GP_STORE_POOL_ID_LEN + 1];
	int rc;

	if (gp_sqlite_exec(&s->w, schema) != 0 ||
	    gp_sqlite_exec(&s->w, sqlite_ledger_schema) != 0 ||
	    migrate(s) != 0)
		return GP_EIO;
	if ((rc = check_version(s, err, errlen)) != 0)
		return rc;
	gp_store_new_pool_id(id);
	if (sqlite_store_run(&s->base,
		"INSERT OR REPLACE INTO meta VALUES('schema_version', ?)", "i",
		GP_STORE_SCHEMA) != 0 ||
	    sqlite_store_run(&s->base,
		"INSERT OR REPLACE INTO meta VALUES('schema_hash', ?)", "s",
		hash) != 0 ||
	    sqlite_store_run(&s->base,
		"INSERT OR IGNORE INTO meta VALUES('pool_id', ?)", "s",
		id) != 0)
		return GP_EIO;
	return 0;
}

static void store_close(struct gp_store *gs);

static int
store_open(const char *path, struct gp_store **out, char *err, size_t errlen)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));
	char hash[17];
	int rc = GP_EIO;

	*out = NULL;
	if (s == NULL)
		return GP_ENOMEM;
	s->base.ops = &gp_store_sqlite_ops;
	snprintf(s->base.target, sizeof(s->base.target), "%s", path);
	pthread_mutex_init(&s->rlock, NULL);
	if (gp_sqlite_open(&s->w, path, 0, "state") != 0) {
		snprintf(err, errlen, "cannot open %s: %s", path,
		    gp_sqlite_errmsg(&s->w));
		goto fail;
	}
	schema_hash(hash);
	if (gp_sqlite_exec(&s->w, "PRAGMA cache_size=-4000;") != 0)
		goto fail_text;
	if (schema_current(s, hash)) {
		/* Made by this schema: only who it is. */
		if ((rc = check_version(s, err, errlen)) != 0)
			goto fail;
		if ((rc = read_pool_id(s)) != 0)
			goto fail_text;
	} else if (gp_sqlite_begin(&s->w) != 0 ||
	    (rc = make_schema(s, hash, err, errlen)) != 0 ||
	    (rc = read_pool_id(s)) != 0 || gp_sqlite_commit(&s->w) != 0) {
		/* One transaction: a half-made schema never stays. */
		if (rc == GP_EIO || rc == 0) {
			rc = GP_EIO;
			snprintf(err, errlen, "%s: %s", path,
			    gp_sqlite_errmsg(&s->w));
		}
		gp_sqlite_rollback(&s->w);
		goto fail;
	}
	if (gp_sqlite_open(&s->r, path, GP_SQLITE_READONLY, "state-read") !=
	    0) {
		snprintf(err, errlen, "cannot open %s for reading: %s", path,
		    gp_sqlite_errmsg(&s->r));
		rc = GP_EIO;
		goto fail;
	}
	*out = &s->base;
	return 0;
fail_text:
	rc = GP_EIO;
	snprintf(err, errlen, "%s: %s", path, gp_sqlite_errmsg(&s->w));
fail:
	store_close(&s->base);
	return rc;
}

static void
store_close(struct gp_store *gs)
{
	struct sqlite_store *s = sqlite_store_of(gs);

	if (s == NULL)
		return;
	gp_sqlite_close(&s->w);
	pthread_mutex_lock(&s->rlock);
	gp_sqlite_close(&s->r);
	pthread_mutex_unlock(&s->rlock);
	pthread_mutex_destroy(&s->rlock);
	free(s);
}

static int
store_begin(struct gp_store *gs)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	int rc = gp_sqlite_begin(&s->w);

	return rc != 0 ? sqlite_store_fail(s, &s->w, rc) : 0;
}

static int
store_commit(struct gp_store *gs)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	int rc = gp_sqlite_commit(&s->w);

	return rc != 0 ? sqlite_store_fail(s, &s->w, rc) : 0;
}

static int
store_rollback(struct gp_store *gs)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	int rc = gp_sqlite_rollback(&s->w);

	return rc != 0 ? sqlite_store_fail(s, &s->w, rc) : 0;
}

/* ---- the model ---- */

static int
put_job(struct gp_store *s, const struct job *job)
{
	struct store_job_text t;
	int rc;

	if (store_job_encode(job, &t) != 0)
		return gp_store_fail(s, GP_ENOMEM, "out of memory");
	rc = sqlite_store_run(s,
	    "INSERT OR REPLACE INTO jobs VALUES(?,?,?,?,?,?,?,?,?,?,?,"
	    "?,?,?,?,?,?,?,?)",
	    "IssiiiIsIIIiiisssIi", job->id, job->user, t.spec, (int)job->state,
	    job->cancel_requested, job->attempts, job->node_id, t.gpus,
	    job->submitted_ms, job->started_ms, job->finished_ms, job->has_exit,
	    job->exit_code, job->signal, job->reason,
	    job->message ? job->message : "", t.history, job->log_base,
	    job->log_truncated);
	store_job_text_free(&t);
	return rc;
}

static int
put_array(struct gp_store *s, int64_t first, const char *user,
    const struct gp_jobspec *spec, const int *tasks, int ntasks,
    int64_t submitted_ms)
{
	json_t *js = gp_jobspec_encode(spec);
	char *spec_text = js != NULL ? json_dumps(js, JSON_COMPACT) : NULL;
	char *list = store_array_tasks_encode(tasks, ntasks);
	int rc;

	json_decref(js);
	if (spec_text == NULL || list == NULL)
		rc = gp_store_fail(s, GP_ENOMEM, "out of memory");
	else
		rc = sqlite_store_run(s,
		    "INSERT OR REPLACE INTO arrays VALUES(?,?,?,?,?)", "IsssI",
		    first, user, spec_text, list, submitted_ms);
	free(spec_text);
	free(list);
	return rc;
}

static int
put_node(struct gp_store *s, const struct node *node)
{
	char *gpus = store_node_gpus_encode(node);
	int rc;

	if (gpus == NULL)
		return gp_store_fail(s, GP_ENOMEM, "out of memory");
	rc = sqlite_store_run(s,
	    "INSERT OR REPLACE INTO nodes VALUES(?,?,?,?,?,?,?)", "IsIsiIs",
	    node->id, node->name, node->owner_token, node->owner_name,
	    node->cpus, node->mem_mib, gpus);
	free(gpus);
	return rc;
}

static int
put_token(struct gp_store *s, const struct token_entry *t, int64_t created_ms)
{
	return sqlite_store_run(s,
	    "INSERT INTO tokens(id, name, role, hash, created_ms,"
	    " group_id) VALUES(?,?,?,?,?,?)",
	    "IsssII", t->id, t->name, gp_role_name(t->role), t->hash,
	    created_ms, t->group_id > 0 ? t->group_id : (int64_t)1);
}

static int
set_token_group(struct gp_store *s, int64_t token_id, int64_t group_id)
{
	return sqlite_store_run(s,
	    "UPDATE tokens SET group_id = ? WHERE id = ?", "II", group_id,
	    token_id);
}

/*
 * A revoked token's row goes, but its id stays used: meta's
 * token_id_floor is above every id ever given, so that a node still
 * naming a revoked owner token can never pass to a new token that
 * happens to get the same id.
 */
static int
delete_token(struct gp_store *s, int64_t id)
{
	int rc =
	    sqlite_store_run(s, "DELETE FROM tokens WHERE id = ?", "I", id);

	if (rc != 0)
		return rc;
	return sqlite_store_run(s,
	    "INSERT INTO meta VALUES('token_id_floor', ?) "
	    "ON CONFLICT(key) DO UPDATE SET value = "
	    "max(CAST(value AS INTEGER), CAST(excluded.value AS "
	    "INTEGER))",
	    "I", id + 1);
}

static int
token_id_floor(struct gp_store *gs, int64_t *next)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	int rc;

	*next = 0;
	rc = gp_sqlite_query_int(&s->w,
	    "SELECT CAST(value AS INTEGER) FROM meta"
	    " WHERE key = 'token_id_floor'",
	    next, NULL);
	return rc < 0 ? sqlite_store_fail(s, &s->w, rc) : 0;
}

static int
load_tokens(struct sqlite_store *s, const struct store_loader *l)
{
	sqlite3_stmt *st;
	struct token_entry *t;
	int rc;

	if ((st = gp_sqlite_prepare(&s->w,
	         "SELECT id, name, role, hash,"
	         " group_id, created_ms FROM tokens")) == NULL)
		return GP_EIO;
	while ((rc = gp_sqlite_step(&s->w, st)) == 1) {
		if ((t = calloc(1, sizeof(*t))) == NULL) {
			rc = GP_ENOMEM;
			break;
		}
		t->id = sqlite3_column_int64(st, 0);
		gp_strlcpy(t->name, gp_sqlite_text(st, 1), sizeof(t->name));
		if (gp_role_parse(gp_sqlite_text(st, 2), &t->role) != 0)
			t->role = GP_ROLE_USER;
		gp_strlcpy(t->hash, gp_sqlite_text(st, 3), sizeof(t->hash));
		t->group_id = sqlite3_column_int64(st, 4);
		t->created_ms = sqlite3_column_int64(st, 5);
		l->token(l->arg, t);
	}
	sqlite3_finalize(st);
	return rc;
}

static int
load_nodes(struct sqlite_store *s, const struct store_loader *l)
{
	sqlite3_stmt *st;
	struct node *n;
	int rc;

	if ((st = gp_sqlite_prepare(&s->w,
	         "SELECT id, name, owner_token, owner_name, cpus, mem_mib,"
	         " gpus FROM nodes ORDER BY id")) == NULL)
		return GP_EIO;
	while ((rc = gp_sqlite_step(&s->w, st)) == 1) {
		if ((n = calloc(1, sizeof(*n))) == NULL) {
			rc = GP_ENOMEM;
			break;
		}
		n->id = sqlite3_column_int64(st, 0);
		gp_strlcpy(n->name, gp_sqlite_text(st, 1), sizeof(n->name));
		n->owner_token = sqlite3_column_int64(st, 2);
		gp_strlcpy(n->owner_name, gp_sqlite_text(st, 3),
		    sizeof(n->owner_name));
		n->cpus = sqlite3_column_int(st, 4);
		n->mem_mib = sqlite3_column_int64(st, 5);
		if (store_node_gpus_decode(gp_sqlite_text(st, 6), n) != 0) {
			free(n);
			rc = GP_ENOMEM;
			break;
		}
		l->node(l->arg, n);
	}
	sqlite3_finalize(st);
	return rc;
}

/* A job from a row of SELECT * FROM jobs (see store_job_decode). */
static struct job *
job_from_row(sqlite3_stmt *st)
{
	struct store_job_row r;

	r.id = sqlite3_column_int64(st, 0);
	r.user = gp_sqlite_text(st, 1);
	r.spec = gp_sqlite_text(st, 2);
	r.state = sqlite3_column_int(st, 3);
	r.cancel_requested = sqlite3_column_int(st, 4);
	r.attempts = sqlite3_column_int(st, 5);
	r.node_id = sqlite3_column_int64(st, 6);
	r.gpus = gp_sqlite_text(st, 7);
	r.submitted_ms = sqlite3_column_int64(st, 8);
	r.started_ms = sqlite3_column_int64(st, 9);
	r.finished_ms = sqlite3_column_int64(st, 10);
	r.has_exit = sqlite3_column_int(st, 11);
	r.exit_code = sqlite3_column_int(st, 12);
	r.signal = sqlite3_column_int(st, 13);
	r.reason = gp_sqlite_text(st, 14);
	r.message = gp_sqlite_text(st, 15);
	r.history = gp_sqlite_text(st, 16);
	r.log_base = sqlite3_column_int64(st, 17);
	r.log_truncated = sqlite3_column_int(st, 18);
	return store_job_decode(&r);
}

static int
load_jobs(struct sqlite_store *s, const struct store_loader *l,
    int64_t finished_before, int64_t *skipped, int64_t *max_id)
{
	struct store_arrays *arrays = store_arrays_new();
	sqlite3_stmt *st = NULL;
	struct job *j;
	int64_t id;
	int rc = GP_ENOMEM, job_state;

	*max_id = 0;
	if (arrays == NULL)
		return GP_ENOMEM;
	if ((st = gp_sqlite_prepare(&s->w,
	         "SELECT id, user, spec, tasks,"
	         " submitted_ms FROM arrays ORDER BY id")) == NULL) {
		rc = GP_EIO;
		goto out;
	}
	while ((rc = gp_sqlite_step(&s->w, st)) == 1)
		if ((rc = store_arrays_add(arrays, sqlite3_column_int64(st, 0),
		         gp_sqlite_text(st, 1), gp_sqlite_text(st, 2),
		         gp_sqlite_text(st, 3), sqlite3_column_int64(st, 4))) !=
		    0)
			break;
	sqlite3_finalize(st);
	if (rc != 0)
		goto out;
	*max_id = store_arrays_max_id(arrays);
	if ((st = gp_sqlite_prepare(&s->w, "SELECT * FROM jobs ORDER BY id")) ==
	    NULL) {
		rc = GP_EIO;
		goto out;
	}
	while ((rc = gp_sqlite_step(&s->w, st)) == 1) {
		id = sqlite3_column_int64(st, 0);
		if (id > *max_id)
			*max_id = id;
		/* The walk passes over this id either way: a task whose row
		 * stays on disk must not come back as queued. */
		if ((rc = store_arrays_before(arrays, id, l)) != 0)
			break;
		job_state = sqlite3_column_int(st, 3);
		if (store_job_row_skipped(job_state,
		        sqlite3_column_int64(st, 10), finished_before)) {
			skipped[job_state]++;
			continue;
		}
		if ((j = job_from_row(st)) == NULL) {
			rc = GP_ENOMEM;
			break;
		}
		l->job(l->arg, j);
	}
	sqlite3_finalize(st);
	if (rc == 0)
		rc = store_arrays_before(arrays, INT64_MAX, l);
out:
	store_arrays_free(arrays);
	return rc;
}

static int
load(struct gp_store *gs, const struct store_loader *l, int64_t finished_before,
    int64_t *skipped, int64_t *max_job_id)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	int rc;

	*max_job_id = 0;
	if ((rc = load_tokens(s, l)) != 0 || (rc = load_nodes(s, l)) != 0 ||
	    (rc = load_jobs(s, l, finished_before, skipped, max_job_id)) != 0)
		return sqlite_store_fail(s, &s->w, rc);
	return 0;
}

/*
 * Reads of jobs that left memory, from any thread: the read-only
 * connection, behind rlock. Such reads are rare (a user asks about an
 * old job; a GC pass), so one connection is enough.
 */
static int
read_job(struct gp_store *gs, int64_t id, struct job **out)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	sqlite3_stmt *st;
	int rc;

	*out = NULL;
	pthread_mutex_lock(&s->rlock);
	if ((st = gp_sqlite_stmt(&s->r, "SELECT * FROM jobs WHERE id = ?")) ==
	        NULL ||
	    gp_sqlite_bind(&s->r, st, "I", id) != 0) {
		gp_sqlite_done(st);
		pthread_mutex_unlock(&s->rlock);
		return GP_EIO;
	}
	rc = gp_sqlite_step(&s->r, st);
	if (rc == 1) {
		*out = job_from_row(st);
		rc = *out != NULL ? 0 : GP_ENOMEM;
	} else if (rc == 0) {
		rc = GP_ENOENT;
	} else {
		rc = GP_EIO;
	}
	gp_sqlite_done(st);
	pthread_mutex_unlock(&s->rlock);
	return rc;
}

static int
read_job_brief(struct gp_store *gs, int64_t id, char *user, int *job_state,
    int64_t *finished_ms)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	sqlite3_stmt *st;
	int rc;

	pthread_mutex_lock(&s->rlock);
	if ((st = gp_sqlite_stmt(&s->r,
	         "SELECT user, state, finished_ms"
	         " FROM jobs WHERE id = ?")) == NULL ||
	    gp_sqlite_bind(&s->r, st, "I", id) != 0) {
		gp_sqlite_done(st);
		pthread_mutex_unlock(&s->rlock);
		return GP_EIO;
	}
	rc = gp_sqlite_step(&s->r, st);
	if (rc == 1) {
		gp_strlcpy(user, gp_sqlite_text(st, 0), GP_NAME_MAX + 1);
		*job_state = sqlite3_column_int(st, 1);
		*finished_ms = sqlite3_column_int64(st, 2);
		rc = 0;
	} else if (rc == 0) {
		rc = GP_ENOENT;
	} else {
		rc = GP_EIO;
	}
	gp_sqlite_done(st);
	pthread_mutex_unlock(&s->rlock);
	return rc;
}

/* ---- submit keys ---- */

static int
submit_key_find(struct gp_store *gs, const char *user, const char *key,
    int64_t since_ms, int64_t *job_id, int64_t *count)
{
	struct sqlite_store *s = sqlite_store_of(gs);
	sqlite3_stmt *st = gp_sqlite_stmt(&s->w,
	    "SELECT job_id, count FROM submit_keys"
	    " WHERE user = ? AND key = ? AND created_ms >= ?");
	int rc;

	if (st == NULL)
		return sqlite_store_fail(s, &s->w, GP_EIO);
	if ((rc = gp_sqlite_bind(&s->w, st, "ssI", user, key, since_ms)) == 0 &&
	    (rc = gp_sqlite_step(&s->w, st)) == 1) {
		*job_id = sqlite3_column_int64(st, 0);
		*count = sqlite3_column_int64(st, 1);
	}
	gp_sqlite_done(st);
	return rc < 0 ? sqlite_store_fail(s, &s->w, rc) : rc;
}

static int
submit_key_put(struct gp_store *s, const char *user, const char *key,
    int64_t job_id, int64_t count, int64_t now_ms, int64_t prune_before_ms)
{
	if (prune_before_ms > 0)
		(void)sqlite_store_run(s,
		    "DELETE FROM submit_keys WHERE created_ms < ?", "I",
		    prune_before_ms);
	return sqlite_store_run(s,
	    "INSERT OR REPLACE INTO submit_keys(user, key, job_id,"
	    " created_ms, count) VALUES(?,?,?,?,?)",
	    "ssIII", user, key, job_id, now_ms, count);
}

/* The blob users' records: their own files beside state.db. */
static int
meta_open(struct gp_store *s, enum gp_meta_area area, const char *data_dir,
    struct gp_meta **out)
{
	char path[1200];

	(void)s;
	gp_meta_sqlite_path(area, data_dir, path, sizeof(path));
	return gp_meta_sqlite_open(area, path, out);
}

const struct gp_store_ops gp_store_sqlite_ops = {
    .name = "sqlite",
    .open = store_open,
    .close = store_close,
    .begin = store_begin,
    .commit = store_commit,
    .rollback = store_rollback,
    .put_job = put_job,
    .put_array = put_array,
    .put_node = put_node,
    .put_token = put_token,
    .set_token_group = set_token_group,
    .delete_token = delete_token,
    .token_id_floor = token_id_floor,
    .load = load,
    .read_job = read_job,
    .read_job_brief = read_job_brief,
    .submit_key_find = submit_key_find,
    .submit_key_put = submit_key_put,
    .ledger_put_group = sqlite_ledger_put_group,
    .ledger_put_member = sqlite_ledger_put_member,
    .ledger_delete_member = sqlite_ledger_delete_member,
    .ledger_put_price = sqlite_ledger_put_price,
    .ledger_delete_price = sqlite_ledger_delete_price,
    .ledger_put_budget = sqlite_ledger_put_budget,
    .ledger_delete_budget = sqlite_ledger_delete_budget,
    .ledger_put_decay = sqlite_ledger_put_decay,
    .ledger_post = sqlite_ledger_post,
    .ledger_load = sqlite_ledger_load,
    .ledger_spent = sqlite_ledger_spent,
    .ledger_attempt = sqlite_ledger_attempt,
    .ledger_usage = sqlite_ledger_usage,
    .ledger_postings = sqlite_ledger_postings,
    .meta_open = meta_open,
};
