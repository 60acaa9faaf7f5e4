/*
 * test_store.c: the SQLite store through the storage interface (store.h):
 * finished jobs that left the coordinator's memory (--min-job-age): load
 * leaves on disk the
 * jobs that finished before the cutoff, counts them by state, and still
 * reports the highest id the store holds (ids are never given twice);
 * an array task whose row stays on disk does not come back as a queued
 * task, while a task without a row does; read_job and read_job_brief
 * read a row back through their own connection, and answer GP_ENOENT
 * where there is none; a running gang's overlay (public keys and port
 * slots, never private keys) comes back with its parts.
 */
#include <stdint.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord/coordd.h"
#include "gp.h"
#include "jobspec.h"
#include "log.h"
#include "unit.h"
#include "wg.h"

static char dir[256], path[300], cmd[300];
static int64_t loaded[16];
static int loaded_state[16];
static int nloaded;

static void
on_token(void *arg, struct token_entry *t)
{
	(void)arg;
	free(t);
}

static void
on_node(void *arg, struct node *n)
{
	(void)arg;
	free(n->gpus);
	free(n);
}

static void
on_job(void *arg, struct job *j)
{
	(void)arg;
	if (nloaded < 16) {
		loaded[nloaded] = j->id;
		loaded_state[nloaded] = (int)j->state;
		nloaded++;
	}
	state_job_stored_free(j);
}

static struct gp_store *store;
static const struct store_loader loader = {NULL, on_token, on_node, on_job};

/* Opens the SQLite store at path, through the interface. */
static int
open_store(void)
{
	char err[512];
	int rc = gp_store_open(path, dir, &store, err, sizeof(err));

	if (rc != 0)
		fprintf(stderr, "open: %s\n", err);
	return rc;
}

static int
make_spec(struct gp_jobspec *spec)
{
	static const char text[] = "{\"command\": [\"true\"], \"gpus\": 0}";
	char err[256];

	memset(spec, 0, sizeof(*spec));
	return gp_jobspec_decode(text, strlen(text), spec, err, sizeof(err));
}

/* A job row: id, state, finished_ms (0: not finished). */
static int
put(int64_t id, enum job_state st, int64_t finished_ms, int task)
{
	struct job j;
	int rc;

	memset(&j, 0, sizeof(j));
	if (make_spec(&j.spec) != 0)
		return GP_EINVAL;
	j.id = id;
	gp_strlcpy(j.user, "alice", sizeof(j.user));
	j.state = st;
	j.submitted_ms = 500;
	j.finished_ms = finished_ms;
	if (task >= 0) {
		j.spec.array_job_id = 4;
		j.spec.array_task_id = task;
	}
	rc = store->ops->put_job(store, &j);
	gp_jobspec_fini(&j.spec);
	return rc;
}

static int
was_loaded(int64_t id)
{
	int i;

	for (i = 0; i < nloaded; i++)
		if (loaded[i] == id)
			return loaded_state[i];
	return -1;
}

TEST(finished_jobs_stay_on_disk)
{
	int64_t skipped[JOB_TIMEOUT + 1] = {0}, max_id = 0, fin = 0;
	struct gp_jobspec spec;
	static const int tasks[] = {0, 1, 2};
	char user[GP_NAME_MAX + 1];
	struct job *j = NULL;
	int st = -1;

	snprintf(dir, sizeof(dir), "/tmp/gp-test-store.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	CHECK_EQ(open_store(), 0);
	CHECK_EQ(store->ops->begin(store), 0);
	/* 1: old, 2: finished lately, 3: running; 4-6 an array whose
	 * tasks 4 and 6 ended long ago (rows) and 5 never ran (no row). */
	CHECK_EQ(put(1, JOB_SUCCEEDED, 1000, -1), 0);
	CHECK_EQ(put(2, JOB_FAILED, 5000, -1), 0);
	CHECK_EQ(put(3, JOB_RUNNING, 0, -1), 0);
	CHECK_EQ(make_spec(&spec), 0);
	spec.array_job_id = 4;
	CHECK_EQ(store->ops->put_array(store, 4, "alice", &spec, tasks, 3,
		     500),
	    0);
	gp_jobspec_fini(&spec);
	CHECK_EQ(put(4, JOB_SUCCEEDED, 1000, 0), 0);
	CHECK_EQ(put(6, JOB_CANCELLED, 1000, 2), 0);
	CHECK_EQ(store->ops->commit(store), 0);

	/* min-job-age: what finished before 3000 stays on disk */
	nloaded = 0;
	CHECK_EQ(store->ops->load(store, &loader, 3000, skipped, &max_id),
	    0);
	CHECK_EQ(nloaded, 3);
	CHECK_EQ(was_loaded(1), -1);
	CHECK_EQ(was_loaded(2), JOB_FAILED);
	CHECK_EQ(was_loaded(3), JOB_RUNNING);
	CHECK_EQ(was_loaded(4), -1); /* not back as a queued task */
	CHECK_EQ(was_loaded(5), JOB_QUEUED);
	CHECK_EQ(was_loaded(6), -1);
	CHECK_EQ(skipped[JOB_SUCCEEDED], 2);
	CHECK_EQ(skipped[JOB_CANCELLED], 1);
	CHECK_EQ(skipped[JOB_FAILED], 0);
	CHECK_EQ(max_id, 6);

	/* 0: every job, as before min-job-age */
	memset(skipped, 0, sizeof(skipped));
	nloaded = 0;
	CHECK_EQ(store->ops->load(store, &loader, 0, skipped, &max_id),
	    0);
	CHECK_EQ(nloaded, 6);
	CHECK_EQ(was_loaded(4), JOB_SUCCEEDED);
	CHECK_EQ(skipped[JOB_SUCCEEDED], 0);

	/* read back, row by row */
	CHECK_EQ(store->ops->read_job(store, 4, &j), 0);
	CHECK(j != NULL);
	if (j != NULL) {
		CHECK_EQ(j->state, JOB_SUCCEEDED);
		CHECK_EQ(j->finished_ms, 1000);
		CHECK_EQ(j->spec.array_job_id, 4);
		CHECK_EQ(j->spec.array_task_id, 0);
		CHECK_STR(j->user, "alice");
		CHECK_EQ(j->nparts, 1);
		state_job_stored_free(j);
	}
	j = NULL;
	CHECK_EQ(store->ops->read_job(store, 5, &j), GP_ENOENT);
	CHECK(j == NULL);
	CHECK_EQ(store->ops->read_job(store, 99, &j), GP_ENOENT);
	CHECK_EQ(store->ops->read_job_brief(store, 6, user, &st, &fin), 0);
	CHECK_STR(user, "alice");
	CHECK_EQ(st, JOB_CANCELLED);
	CHECK_EQ(fin, 1000);
	CHECK_EQ(store->ops->read_job_brief(store, 5, user, &st, &fin),
	    GP_ENOENT);
	gp_store_close(store);
	store = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

/*
 * Idempotency keys: a single job's (count 0) and an array's (its first id
 * and count), each user's own, forgotten after a day; a table of the
 * first version (no count column) gets one and keeps its rows.
 */
TEST(submit_keys)
{
	int64_t id = -1, count = -1, day = 24LL * 3600 * 1000;
	sqlite3 *db;

	snprintf(dir, sizeof(dir), "/tmp/gp-test-store.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	/* The first version's table, with one key in it. */
	CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
	CHECK_EQ(sqlite3_exec(db, "CREATE TABLE submit_keys(user TEXT NOT "
	    "NULL, key TEXT NOT NULL, job_id INTEGER NOT NULL, created_ms "
	    "INTEGER NOT NULL, PRIMARY KEY(user, key)) WITHOUT ROWID;"
	    "INSERT INTO submit_keys VALUES('alice','old-key-0123456789',7,"
	    "1000);", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	CHECK_EQ(open_store(), 0);
	CHECK_EQ(store->ops->begin(store), 0);
	CHECK_EQ(store->ops->submit_key_find(store, "alice",
	    "old-key-0123456789", 2000 - day, &id, &count), 1);
	CHECK_EQ(id, 7);
	CHECK_EQ(count, 0);
	CHECK_EQ(store->ops->submit_key_put(store, "alice",
	    "array-key-0123456789", 40, 1000, 3000, 0), 0);
	CHECK_EQ(store->ops->submit_key_find(store, "alice",
	    "array-key-0123456789", 4000 - day, &id, &count), 1);
	CHECK_EQ(id, 40);
	CHECK_EQ(count, 1000);
	CHECK_EQ(store->ops->submit_key_find(store, "bob",
	    "array-key-0123456789", 4000 - day, &id, &count), 0);
	CHECK_EQ(store->ops->submit_key_find(store, "alice",
	    "array-key-0123456789", 3000 + 1, &id, &count), 0);
	CHECK_EQ(store->ops->commit(store), 0);
	gp_store_close(store);
	store = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

/*
 * A running job's row back as it went in: its GPUs, message, its history
 * record with a meter, its parts (the codec every store shares).
 */
TEST(job_round_trip)
{
	struct attempt_record hist[1];
	struct job j, *back = NULL;

	snprintf(dir, sizeof(dir), "/tmp/gp-test-store.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	CHECK_EQ(open_store(), 0);
	memset(&j, 0, sizeof(j));
	memset(hist, 0, sizeof(hist));
	CHECK_EQ(make_spec(&j.spec), 0);
	j.id = 9;
	gp_strlcpy(j.user, "bob", sizeof(j.user));
	j.state = JOB_RUNNING;
	j.attempts = 1;
	j.node_id = 2;
	j.ngpus = 2;
	j.gpus[0] = 1;
	j.gpus[1] = 3;
	j.submitted_ms = 100;
	j.started_ms = 200;
	j.message = (char *)"hello";
	j.log_base = 77;
	hist[0].attempt = 1;
	hist[0].node_id = 2;
	hist[0].started_ms = 200;
	hist[0].meter.from_ms = 200;
	hist[0].meter.rate = 1000;
	hist[0].meter.amount = 5;
	hist[0].provider_group = 4;
	gp_strlcpy(hist[0].reason, "", sizeof(hist[0].reason));
	j.history = hist;
	j.nhistory = 1;
	CHECK_EQ(store->ops->begin(store), 0);
	CHECK_EQ(store->ops->put_job(store, &j), 0);
	CHECK_EQ(store->ops->commit(store), 0);
	CHECK_EQ(store->ops->read_job(store, 9, &back), 0);
	CHECK(back != NULL);
	if (back != NULL) {
		CHECK_STR(back->user, "bob");
		CHECK_EQ(back->state, JOB_RUNNING);
		CHECK_EQ(back->ngpus, 2);
		CHECK_EQ(back->gpus[0], 1);
		CHECK_EQ(back->gpus[1], 3);
		CHECK_EQ(back->node_id, 2);
		CHECK_EQ(back->started_ms, 200);
		CHECK(back->message != NULL &&
		    strcmp(back->message, "hello") == 0);
		CHECK_EQ(back->log_base, 77);
		CHECK_EQ(back->nhistory, 1);
		CHECK_EQ(back->history[0].meter.rate, 1000);
		CHECK_EQ(back->history[0].meter.amount, 5);
		CHECK_EQ(back->history[0].provider_group, 4);
		CHECK_EQ(back->nparts, 1);
		CHECK_EQ(back->parts[0].ngpus, 2);
		CHECK_EQ(back->parts[0].node_id, 2);
		state_job_stored_free(back);
	}
	j.message = NULL;
	gp_jobspec_fini(&j.spec);
	gp_store_close(store);
	store = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

/* The history column of job id, as stored (malloc'd), or NULL. */
static char *
history_text(int64_t id)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char *out = NULL;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		return NULL;
	if (sqlite3_prepare_v2(db, "SELECT history FROM jobs WHERE id = ?", -1,
		&st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, id);
		if (sqlite3_step(st) == SQLITE_ROW)
			out = strdup((const char *)sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return out;
}

/*
 * A running gang's overlay (issue 14, docs/agent.md "Gangs behind NATs"):
 * each running part's public key and port slot come back from the store
 * (a restarted coordinator answers the same overlay and gives no other
 * part its port); the private keys are never written; a part that ended
 * has none in its row; a key or a slot that is not sound is dropped.
 */
TEST(gang_overlay_round_trip)
{
	static const char text[] = "{\"command\": [\"true\"], \"gpus\": 1,"
				   " \"nodes\": 2}";
	struct attempt_record hist[1];
	struct job_part parts[2];
	struct job j, *back = NULL;
	char err[256], pubs[2][48], privs[2][48], *h;
	sqlite3 *db;
	int k;

	snprintf(dir, sizeof(dir), "/tmp/gp-test-store.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	CHECK_EQ(open_store(), 0);
	memset(&j, 0, sizeof(j));
	memset(hist, 0, sizeof(hist));
	memset(parts, 0, sizeof(parts));
	CHECK_EQ(gp_jobspec_decode(text, strlen(text), &j.spec, err,
		     sizeof(err)),
	    0);
	j.id = 12;
	gp_strlcpy(j.user, "bob", sizeof(j.user));
	j.state = JOB_RUNNING;
	j.attempts = 1;
	j.node_id = 1;
	hist[0].attempt = 1;
	hist[0].node_id = 1;
	j.history = hist;
	j.nhistory = 1;
	j.parts = parts;
	j.nparts = 2;
	for (k = 0; k < 2; k++) {
		CHECK_EQ(gp_wg_keypair(privs[k], pubs[k]), 0);
		gp_strlcpy(parts[k].ov_priv, privs[k], sizeof(parts[k].ov_priv));
		gp_strlcpy(parts[k].ov_pub, pubs[k], sizeof(parts[k].ov_pub));
		parts[k].node_id = k + 1;
		parts[k].started_ack = 1;
	}
	parts[0].ov_slot = 3;
	parts[1].ov_slot = GP_OVERLAY_SLOTS_MAX;
	CHECK_EQ(store->ops->begin(store), 0);
	CHECK_EQ(store->ops->put_job(store, &j), 0);
	CHECK_EQ(store->ops->commit(store), 0);
	h = history_text(12);
	CHECK(h != NULL && strstr(h, pubs[0]) != NULL);
	CHECK(h != NULL && strstr(h, privs[0]) == NULL &&
	    strstr(h, privs[1]) == NULL);
	free(h);
	CHECK_EQ(store->ops->read_job(store, 12, &back), 0);
	CHECK(back != NULL && back->nparts == 2);
	if (back != NULL && back->nparts == 2) {
		CHECK_STR(back->parts[0].ov_pub, pubs[0]);
		CHECK_STR(back->parts[1].ov_pub, pubs[1]);
		CHECK_EQ(back->parts[0].ov_slot, 3);
		CHECK_EQ(back->parts[1].ov_slot, GP_OVERLAY_SLOTS_MAX);
		CHECK_STR(back->parts[0].ov_priv, "");
		CHECK_STR(back->parts[1].ov_priv, "");
	}
	state_job_stored_free(back);
	back = NULL;

	/* part 1 ended: its overlay leaves the row, part 0's stays */
	parts[1].ended = 1;
	CHECK_EQ(store->ops->begin(store), 0);
	CHECK_EQ(store->ops->put_job(store, &j), 0);
	CHECK_EQ(store->ops->commit(store), 0);
	h = history_text(12);
	CHECK(h != NULL && strstr(h, pubs[1]) == NULL &&
	    strstr(h, pubs[0]) != NULL);
	free(h);
	CHECK_EQ(store->ops->read_job(store, 12, &back), 0);
	if (back != NULL && back->nparts == 2) {
		CHECK_EQ(back->parts[0].ov_slot, 3);
		CHECK_EQ(back->parts[1].ov_slot, 0);
		CHECK_STR(back->parts[1].ov_pub, "");
	}
	state_job_stored_free(back);
	back = NULL;

	/* a slot past the table, a key that is not one: dropped */
	CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
	CHECK_EQ(sqlite3_exec(db,
		     "UPDATE jobs SET history = replace(replace(history,"
		     " '\"overlay_slot\":3', '\"overlay_slot\":257'),"
		     " '\"ended\":true', '\"ended\":false,"
		     "\"overlay_key\":\"nope\",\"overlay_slot\":1')"
		     " WHERE id = 12",
		     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	CHECK_EQ(store->ops->read_job(store, 12, &back), 0);
	if (back != NULL && back->nparts == 2) {
		CHECK_EQ(back->parts[0].ov_slot, 0);
		CHECK_STR(back->parts[0].ov_pub, "");
		CHECK_EQ(back->parts[1].ended, 0);
		CHECK_EQ(back->parts[1].ov_slot, 0);
	}
	state_job_stored_free(back);
	sodium_memzero(privs, sizeof(privs));
	gp_jobspec_fini(&j.spec);
	gp_store_close(store);
	store = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

/*
 * --db: a path, sqlite:PATH, postgresql:// (a bad one refused at once); the
 * pool id: made once, kept in the data dir, another pool's store
 * refused; a store from a newer schema refused.
 */
TEST(selection_and_identity)
{
	char err[512], other[1200], target[1300], id[GP_STORE_POOL_ID_LEN + 1];
	struct gp_store *b = NULL;
	sqlite3 *db;

	snprintf(dir, sizeof(dir), "/tmp/gp-test-store.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	err[0] = '\0';
	/* postgresql:// is the PostgreSQL store's: a bad URL fails at once */
	CHECK_EQ(gp_store_open("postgresql://u@db/pool?no_such_option=1", dir,
		     &b, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(b == NULL);
	CHECK(strstr(err, "no_such_option") != NULL);
	CHECK_EQ(gp_store_open("ftp://x", dir, &b, err, sizeof(err)),
	    GP_EINVAL);
	/* the default: DIR/state.db */
	CHECK_EQ(gp_store_open(NULL, dir, &store, err, sizeof(err)), 0);
	CHECK_STR(store->ops->name, "sqlite");
	CHECK_EQ((int)strlen(store->pool_id), GP_STORE_POOL_ID_LEN);
	CHECK_EQ(store->schema_version, GP_STORE_SCHEMA);
	gp_strlcpy(id, store->pool_id, sizeof(id));
	CHECK_EQ(gp_store_check_pool(store, dir, err, sizeof(err)), 0);
	CHECK_EQ(gp_store_check_pool(store, dir, err, sizeof(err)), 0);
	gp_store_close(store);
	/* opened again (sqlite:PATH): the same pool */
	snprintf(target, sizeof(target), "sqlite:%s/state.db", dir);
	CHECK_EQ(gp_store_open(target, dir, &store, err, sizeof(err)), 0);
	CHECK_STR(store->pool_id, id);
	gp_store_close(store);
	/* another pool's store, pointed at from this data dir: refused */
	snprintf(other, sizeof(other), "%s/other.db", dir);
	CHECK_EQ(gp_store_open(other, dir, &b, err, sizeof(err)), 0);
	CHECK(strcmp(b->pool_id, id) != 0);
	CHECK_EQ(gp_store_check_pool(b, dir, err, sizeof(err)), GP_ECONFLICT);
	CHECK(strstr(err, "another pool") != NULL);
	gp_store_close(b);
	/* a store written by a newer coordinator: refused */
	CHECK_EQ(sqlite3_open(other, &db), SQLITE_OK);
	CHECK_EQ(sqlite3_exec(db,
		     "UPDATE meta SET value = '999' WHERE key ="
		     " 'schema_version'",
		     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	b = NULL;
	CHECK_EQ(gp_store_open(other, dir, &b, err, sizeof(err)), GP_EPROTO);
	CHECK(b == NULL);
	CHECK(strstr(err, "newer") != NULL);
	store = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

int
main(void)
{
	gp_log_init("test", GP_LOG_ERROR);
	RUN(finished_jobs_stay_on_disk);
	RUN(submit_keys);
	RUN(selection_and_identity);
	RUN(job_round_trip);
	RUN(gang_overlay_round_trip);
	return unit_report();
}
