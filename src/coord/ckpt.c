/*
 * ckpt.c: the coordinator's checkpoint store (docs/api.md, "Checkpoints").
 *
 * Layout under DATA:
 *   checkpoints.db                      versions (SQLite, WAL), its own
 *                                       connection, guarded by ckpt_lock
 *   checkpoints/<user>/chunks/ab/<hex>  chunks, named by BLAKE2b-256
 *   checkpoints/<user>/tmp/             chunks being received
 * Chunks are stored per user (the job's owner), so deduplication never
 * crosses users and nobody can probe for another user's data. (A user
 * name that starts with '.' gets a '%' prefix: "..", a valid name, must
 * not climb out.)
 *
 * Durability. Two promises: a chunk that exists is whole, even after a
 * crash (so "missing" can trust existence and a commit only has to check
 * that every referenced chunk is there), and a commit is answered only
 * when every chunk of the version is durable.
 *  - A chunk is received into tmp/, hashed as it arrives, written with
 *    O_DIRECT, and fdatasync'ed before it is renamed to its name: its
 *    bytes and its size are on disk before the name exists, so a name
 *    that survives a crash always comes with the whole chunk. A chunk
 *    that fails its hash is never renamed.
 *  - The flush and the rename are done behind the PUT's answer, by one of
 *    STORE_THREADS store threads (at most STORES_MAX queued, beyond that
 *    the PUT does them before it answers): the client sends its next
 *    chunk while the disk flushes this one. A commit that does not find
 *    a chunk waits for that chunk's store (ckpt_stat_chunk) before it
 *    says "not stored"; a store that fails removes the file, and the
 *    commit refuses the version as for a chunk never sent. A crash
 *    between the answer and the rename loses the chunk the same way.
 *  - The rename's directory entry is made durable later: the PUT notes
 *    the chunk's directory (dirty_dirs), and the commit syncs every noted
 *    directory of its user before it records the version. A crash before
 *    that loses the entry, and with it only chunks no version refers to
 *    (the next upload sends them again). A coordinator that died between
 *    a rename and the sync left the entry in the page cache, where a
 *    commit after the restart would find it unsynced: ckpt_init syncs the
 *    store's file system before the first commit.
 *  One flush per chunk overlaps with the other uploads in flight; the
 *  directory syncs, one journal commit for the whole version instead of
 *  one per chunk, wait for the commit.
 *
 * Memory. Chunks go to disk with O_DIRECT from WRITE_BLOCK buffers kept in
 * a small pool (block_get), not through the page cache: on the VMs this
 * runs on, every page-cache page is memory the host has to hand over
 * afresh, which costs more than the transfer itself (bench/RESULTS.md).
 * Where the file system refuses O_DIRECT the writes are buffered. Chunks
 * are read back for GETs with sendfile (MHD's file responses).
 *
 * Garbage: no reference counts are kept. The GC thread computes the
 * chunks a user's kept versions reference from their manifests and
 * removes the others, except chunks younger than CHUNK_GRACE_MS: an
 * upload in progress has not committed yet. "missing" refreshes the
 * mtime of every chunk it reports present, so a chunk an upload counts on
 * is young again. GC of a user runs under ckpt_lock, which every commit
 * and "missing" takes too, so a chunk is never removed between a
 * commit's check and its insert.
 *
 * Locking: ckpt_lock (the database, the chunk files' life), then
 * state.lock for reading, briefly, to authorise a caller; never the
 * other way round.
 *
 * Shared with data.c (data sets and job outputs): the database
 * connection (its tables live beside these), ckpt_lock, the per-user
 * chunk directories (so a chunk is stored once per user, whichever of
 * them uses it), the streamed chunk PUT and the GC, which asks data.c for
 * the chunks its objects and open uploads reference (data_collect_refs).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_store.h"
#include "coord_metrics.h"
#include "datasets.h"
#include "joblog.h"
#include "route.h"
#include "state.h"
#include "gp.h"
#include "log.h"

#define CKPT_JSON_BODY_MAX (32u << 20)
#define MISSING_MAX	   200000
#define CHUNK_GRACE_MS	   (3600 * 1000LL)
#define GC_PERIOD_MS	   60000
#define AGENT_PREFIX	   "/v1/agent/jobs/"
#define USER_PREFIX	   "/v1/jobs/"
#define WRITE_BLOCK	   (1u << 20) /* a chunk is written in these */
#define WRITE_ALIGN	   4096	      /* O_DIRECT: offsets, sizes, memory */
#define BLOCK_POOL_MAX	   8	      /* idle write blocks kept */

static sqlite3 *db;
pthread_mutex_t ckpt_lock = PTHREAD_MUTEX_INITIALIZER;
static char root[1100]; /* DATA/checkpoints */
static int64_t chunk_grace_ms = CHUNK_GRACE_MS;
static int64_t gc_period_ms = GC_PERIOD_MS;
static int keep = 3;
static int64_t max_bytes = 64LL << 30;
static int64_t retain_ms = 7 * 86400 * 1000LL;
static int direct_io = 1; /* 0: buffered writes (tests only) */

/* Idle write blocks, kept so that their memory is reused (see the top). */
static pthread_mutex_t block_lock = PTHREAD_MUTEX_INITIALIZER;
static char *block_pool[BLOCK_POOL_MAX];
static int block_count;

/*
 * Chunk directories with entries not yet known durable: {user: {dir:
 * true}}, guarded by dirs_lock. A commit syncs its user's (see the top).
 */
static pthread_mutex_t dirs_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *dirty_dirs;

static pthread_t gc_thread;
static int gc_started;
static pthread_mutex_t gc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gc_cond;	/* monotonic: gp_cond_init_monotonic */
static int gc_stopping;
static json_t *gc_dirty; /* users whose versions changed: {name: true} */

static void stores_start(void);
static void stores_stop(void);

/* A chunk PUT being received (the request's upload). */
struct ckpt_upload {
	int status; /* 0, or the HTTP error to answer */
	char error[200];
	int kill;   /* with 409: tell the agent to kill the attempt */
	int exists; /* already stored: the body is read and dropped */
	int fd;
	int direct;   /* fd is O_DIRECT: whole aligned blocks from buf */
	size_t len;   /* bytes received */
	size_t limit; /* the most bytes the chunk may have */
	size_t off;   /* bytes written to fd (a multiple of WRITE_BLOCK) */
	char *buf;    /* WRITE_BLOCK bytes, aligned, from the pool */
	size_t fill;  /* bytes of buf in use */
	char name[GP_CKPT_NAME_HEX];
	char user[GP_NAME_MAX + 1];
	char tmp[1400], final[1400], dir[1400];
	crypto_generichash_state hash;
};

/* ---- paths ---- */

static void
user_dir(const char *user, char *out, size_t len)
{
	snprintf(out, len, "%s/%s%s", root, user[0] == '.' ? "%" : "", user);
}

static void
chunk_path(const char *user, const char *name, char *out, size_t len)
{
	char dir[1200];

	user_dir(user, dir, sizeof(dir));
	snprintf(out, len, "%s/chunks/%.2s/%s", dir, name, name);
}

static int
fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return GP_EIO;
	if (fsync(fd) != 0)
		ret = GP_EIO;
	close(fd);
	return ret;
}

void
ckpt_chunk_path(const char *user, const char *name, char *out, size_t len)
{
	chunk_path(user, name, out, len);
}

/* ---- chunk directories to sync ---- */

static void
dir_dirty(const char *user, const char *dir)
{
	json_t *set;

	pthread_mutex_lock(&dirs_lock);
	set = json_object_get(dirty_dirs, user);
	if (set == NULL) {
		set = json_object();
		json_object_set_new(dirty_dirs, user, set);
	}
	json_object_set_new(set, dir, json_true());
	pthread_mutex_unlock(&dirs_lock);
}

/*
 * Syncs the directories of user's chunks renamed into place since the
 * last sync, so that every chunk a commit found is there after a crash.
 * ckpt_lock held (two commits of one user do not race past each other's
 * sync). Returns 0, or GP_EIO (the directories stay to be synced).
 */
int
ckpt_sync_user_dirs(const char *user)
{
	json_t *set, *v;
	const char *dir;
	int ret = 0;

	pthread_mutex_lock(&dirs_lock);
	set = json_incref(json_object_get(dirty_dirs, user));
	json_object_del(dirty_dirs, user);
	pthread_mutex_unlock(&dirs_lock);
	if (set == NULL)
		return 0;
	json_object_foreach(set, dir, v)
	{
		if (fsync_dir(dir) != 0) {
			gp_error("checkpoint chunk directory sync failed dir=%s "
				 "error=\"%s\"", dir, strerror(errno));
			ret = GP_EIO;
			break;
		}
	}
	if (ret != 0)
		json_object_foreach(set, dir, v)
			dir_dirty(user, dir);
	json_decref(set);
	return ret;
}

/* ---- write blocks ---- */

/* A WRITE_BLOCK buffer aligned for O_DIRECT, or NULL. */
static char *
block_get(void)
{
	void *b = NULL;

	pthread_mutex_lock(&block_lock);
	if (block_count > 0)
		b = block_pool[--block_count];
	pthread_mutex_unlock(&block_lock);
	if (b == NULL && posix_memalign(&b, WRITE_ALIGN, WRITE_BLOCK) != 0)
		return NULL;
	return b;
}

static void
block_put(char *b)
{
	if (b == NULL)
		return;
	pthread_mutex_lock(&block_lock);
	if (block_count < BLOCK_POOL_MAX) {
		block_pool[block_count++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&block_lock);
	free(b);
}

/* ---- database ---- */

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS versions("
    " job_id INTEGER NOT NULL, version INTEGER NOT NULL,"
    " attempt INTEGER NOT NULL, user TEXT NOT NULL,"
    " manifest TEXT NOT NULL, bytes INTEGER NOT NULL,"
    " files INTEGER NOT NULL, label TEXT NOT NULL,"
    " created_ms INTEGER NOT NULL, PRIMARY KEY(job_id, version));"
    "CREATE INDEX IF NOT EXISTS versions_user ON versions(user);"
    /* Version numbers are never reused, even after retention. */
    "CREATE TABLE IF NOT EXISTS next_version("
    " job_id INTEGER PRIMARY KEY, next INTEGER NOT NULL);";

static int
exec(const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		gp_error("checkpoint database error=\"%s\"",
		    msg != NULL ? msg : "?");
		sqlite3_free(msg);
		return GP_EIO;
	}
	return 0;
}

static sqlite3_stmt *
prepare(const char *sql)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		gp_error("checkpoint database prepare error=\"%s\"",
		    sqlite3_errmsg(db));
		return NULL;
	}
	return st;
}

static void
mark_dirty(const char *user)
{
	pthread_mutex_lock(&gc_lock);
	if (gc_dirty != NULL)
		json_object_set_new(gc_dirty, user, json_true());
	pthread_mutex_unlock(&gc_lock);
}

sqlite3 *
ckpt_db(void)
{
	return db;
}

void
ckpt_gc_mark_dirty(const char *user)
{
	mark_dirty(user);
}

/* ---- garbage collection ---- */

/* Adds the chunks of every kept version of user to refs. ckpt_lock held. */
static int
collect_refs(const char *user, json_t *refs)
{
	sqlite3_stmt *st;
	json_t *m, *f, *c;
	size_t i, k;
	int rc;

	st = prepare("SELECT manifest FROM versions WHERE user = ?");
	if (st == NULL)
		return GP_EIO;
	sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		m = json_loads((const char *)sqlite3_column_text(st, 0), 0,
		    NULL);
		if (m == NULL) {
			/* Cannot say what it references: remove nothing. */
			sqlite3_finalize(st);
			return GP_EIO;
		}
		json_array_foreach(json_object_get(m, "files"), i, f)
		{
			json_array_foreach(json_object_get(f, "chunks"), k, c)
				json_object_set(refs, json_string_value(c),
				    json_true());
		}
		json_decref(m);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return GP_EIO;
	/* Data sets, job outputs and their uploads in progress. */
	return data_collect_refs(user, refs);
}

/*
 * Removes files in dir older than cutoff (ms) and not in keep_set.
 * OUT: *young, incremented for each one left because it is too young.
 */
static int64_t
sweep_dir(const char *dir, json_t *keep_set, int64_t cutoff_ms,
    int64_t *young)
{
	char path[2048];
	struct dirent *d;
	struct stat st;
	int64_t removed = 0;
	DIR *dh;

	if ((dh = opendir(dir)) == NULL)
		return 0;
	while ((d = readdir(dh)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		if (keep_set != NULL && json_object_get(keep_set, d->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if ((int64_t)st.st_mtim.tv_sec * 1000 >= cutoff_ms) {
			(*young)++;
			continue;
		}
		if (unlink(path) == 0)
			removed++;
	}
	closedir(dh);
	return removed;
}

/* Returns 1 when garbage too young to remove was left (look again). */
static int
gc_user(const char *user)
{
	char dir[1200], sub[1400];
	int64_t cutoff = gp_now_ms() - chunk_grace_ms, removed = 0, young = 0;
	json_t *refs = json_object();
	struct dirent *d;
	DIR *dh;

	if (refs == NULL)
		return 1;
	user_dir(user, dir, sizeof(dir));
	pthread_mutex_lock(&ckpt_lock);
	if (collect_refs(user, refs) != 0) {
		pthread_mutex_unlock(&ckpt_lock);
		json_decref(refs);
		gp_warn("checkpoint gc skipped user=%s", user);
		return 1;
	}
	snprintf(sub, sizeof(sub), "%s/chunks", dir);
	if ((dh = opendir(sub)) != NULL) {
		while ((d = readdir(dh)) != NULL) {
			char fan[1700];
			if (d->d_name[0] == '.')
				continue;
			snprintf(fan, sizeof(fan), "%s/%s", sub, d->d_name);
			removed += sweep_dir(fan, refs, cutoff, &young);
		}
		closedir(dh);
	}
	pthread_mutex_unlock(&ckpt_lock);
	/* Temp files of uploads abandoned long ago. */
	snprintf(sub, sizeof(sub), "%s/tmp", dir);
	sweep_dir(sub, NULL, cutoff, &young);
	json_decref(refs);
	if (removed > 0)
		gp_info("checkpoint gc user=%s chunks_removed=%lld", user,
		    (long long)removed);
	return young > 0;
}

/* Removes every version of jobs that finished more than retain_ms ago. */
static void
gc_finished_jobs(void)
{
	sqlite3_stmt *st, *del;
	int64_t now = gp_now_ms(), *ids = NULL, id, fin;
	char owner[GP_NAME_MAX + 1];
	size_t n = 0, cap = 0, i;
	enum job_state js;
	int expired, rc;

	pthread_mutex_lock(&ckpt_lock);
	st = prepare("SELECT DISTINCT job_id FROM versions");
	while (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		id = sqlite3_column_int64(st, 0);
		/* A job that left memory is asked of state.db. */
		rc = state_job_brief(id, owner, &js, &fin);
		expired = rc == GP_ENOENT ||
		    (rc == 0 && js >= JOB_SUCCEEDED && fin + retain_ms < now);
		if (!expired)
			continue;
		if (n == cap) {
			int64_t *p = realloc(ids, (cap ? cap * 2 : 16) *
				sizeof(*ids));
			if (p == NULL)
				break;
			ids = p;
			cap = cap ? cap * 2 : 16;
		}
		ids[n++] = id;
	}
	sqlite3_finalize(st);
	del = prepare("DELETE FROM versions WHERE job_id = ? "
		      "RETURNING user");
	for (i = 0; del != NULL && i < n; i++) {
		sqlite3_bind_int64(del, 1, ids[i]);
		while (sqlite3_step(del) == SQLITE_ROW)
			mark_dirty((const char *)sqlite3_column_text(del, 0));
		sqlite3_reset(del);
		gp_info("checkpoints expired job=%lld", (long long)ids[i]);
	}
	sqlite3_finalize(del);
	pthread_mutex_unlock(&ckpt_lock);
	free(ids);
}

static void *
gc_main(void *arg)
{
	json_t *dirty, *v;
	const char *user;
	int first = 1;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&gc_lock);
		if (!first && !gc_stopping) {
			gp_cond_wait_ms(&gc_cond, &gc_lock, gc_period_ms);
		}
		first = 0;
		if (gc_stopping) {
			pthread_mutex_unlock(&gc_lock);
			break;
		}
		pthread_mutex_unlock(&gc_lock);
		gc_finished_jobs();
		data_gc_expire();
		pthread_mutex_lock(&gc_lock);
		dirty = gc_dirty;
		gc_dirty = json_object();
		pthread_mutex_unlock(&gc_lock);
		json_object_foreach(dirty, user, v)
		{
			/* Young garbage left: that user gets another pass. */
			if (gc_user(user))
				mark_dirty(user);
		}
		json_decref(dirty);
	}
	return NULL;
}

int
ckpt_init(const struct coord_config *cfg)
{
	char path[1200];
	sqlite3_stmt *st;
	const char *test_gc = getenv("GPUPOOL_TEST_CKPT_GC_MS");
	int64_t v;
	int fd;

	/*
	 * Tests only (tests/e2e/test_checkpoint_gc.sh): GC every N ms, and
	 * chunks are collectable after N ms instead of an hour.
	 */
	if (test_gc != NULL && gp_parse_int(test_gc, 10, 3600000, &v) == 0) {
		gc_period_ms = v;
		chunk_grace_ms = v;
		gp_warn("checkpoint gc test mode gc_ms=%lld", (long long)v);
	}
	/*
	 * Tests only (test_checkpoint_store.sh): buffered writes, as on a file
	 * system without O_DIRECT.
	 */
	if (getenv("GPUPOOL_TEST_BUFFERED_IO") != NULL) {
		direct_io = 0;
		gp_warn("checkpoint store test mode: buffered writes");
	}
	if (gp_cond_init_monotonic(&gc_cond) != 0)
		return GP_ENOMEM;
	keep = cfg->ckpt_keep > 0 ? cfg->ckpt_keep : 3;
	max_bytes = cfg->ckpt_max > 0 ? cfg->ckpt_max : 64LL << 30;
	retain_ms = cfg->ckpt_retain_ms > 0 ? cfg->ckpt_retain_ms
					    : 7 * 86400 * 1000LL;
	snprintf(root, sizeof(root), "%s/checkpoints", cfg->data_dir);
	if (gp_mkdir_p(root, 0700) != 0) {
		gp_error("cannot create %s: %s", root, strerror(errno));
		return GP_EIO;
	}
	/*
	 * Chunks renamed into place by a process that died before their
	 * directories were synced: durable now, before any commit counts on
	 * them.
	 */
	if ((fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    syncfs(fd) != 0) {
		gp_error("cannot sync %s: %s", root, strerror(errno));
		if (fd >= 0)
			close(fd);
		return GP_EIO;
	}
	close(fd);
	if ((dirty_dirs = json_object()) == NULL)
		return GP_ENOMEM;
	snprintf(path, sizeof(path), "%s/checkpoints.db", cfg->data_dir);
	if (sqlite3_open_v2(path, &db,
		SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
		    SQLITE_OPEN_FULLMUTEX,
		NULL) != SQLITE_OK) {
		gp_error("cannot open database path=%s", path);
		return GP_EIO;
	}
	/* FULL: a version is on disk before its commit is answered. */
	if (exec("PRAGMA journal_mode=WAL;") != 0 ||
	    exec("PRAGMA synchronous=FULL;") != 0 || exec(schema) != 0)
		return GP_EIO;
	/* After a restart every user with versions gets one GC pass. */
	gc_dirty = json_object();
	if ((st = prepare("SELECT DISTINCT user FROM versions")) == NULL)
		return GP_EIO;
	while (sqlite3_step(st) == SQLITE_ROW)
		mark_dirty((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (pthread_create(&gc_thread, NULL, gc_main, NULL) != 0)
		return GP_ENOMEM;
	gc_started = 1;
	stores_start();
	gp_info("checkpoint store root=%s keep=%d max_bytes=%lld "
		"retain_s=%lld",
	    root, keep, (long long)max_bytes, (long long)(retain_ms / 1000));
	return 0;
}

void
ckpt_stop(void)
{
	stores_stop();
	if (gc_started) {
		pthread_mutex_lock(&gc_lock);
		gc_stopping = 1;
		pthread_cond_signal(&gc_cond);
		pthread_mutex_unlock(&gc_lock);
		pthread_join(gc_thread, NULL);
		gc_started = 0;
	}
	pthread_mutex_lock(&ckpt_lock);
	if (db != NULL)
		sqlite3_close(db);
	db = NULL;
	pthread_mutex_unlock(&ckpt_lock);
	json_decref(gc_dirty);
	gc_dirty = NULL;
	pthread_mutex_lock(&dirs_lock);
	json_decref(dirty_dirs);
	dirty_dirs = NULL;
	pthread_mutex_unlock(&dirs_lock);
	pthread_mutex_lock(&block_lock);
	while (block_count > 0)
		free(block_pool[--block_count]);
	pthread_mutex_unlock(&block_lock);
}

/* ---- replies ---- */

/* Sends a stored chunk's bytes. */
enum MHD_Result
ckpt_reply_chunk(struct MHD_Connection *conn, const char *user,
    const char *name)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	char path[1400];
	struct stat st;
	int fd;

	chunk_path(user, name, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return reply_error(conn, 404, "no chunk %.64s", name);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return reply_error(conn, 500, "cannot read chunk");
	}
	resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (resp == NULL) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type",
	    "application/octet-stream");
	MHD_add_response_header(resp, "X-Gpupool-Protocol", "1");
	rc = MHD_queue_response(conn, 200, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* ---- who may do what ---- */

/*
 * An agent's checkpoint (or data) call for (id, attempt): the caller's
 * token must own the node running that attempt (a gang: to write, its
 * rank-0 part's node; to read, any part's), and it must be the job's
 * current, running attempt (the rule of reporting_job() in state.c).
 * OUT: user (the job's owner). Returns 0 or the HTTP status, with err
 * (and *kill for a stale attempt).
 */
int
ckpt_agent_job(const struct token_entry *who, int64_t id, int64_t attempt,
    int write, char *user, char *err, size_t errlen, int *kill)
{
	struct node *node;
	struct job *job;
	int status = 0, k, mine = 0;

	*kill = 0;
	if (who->role != GP_ROLE_PROVIDER && who->role != GP_ROLE_ADMIN) {
		snprintf(err, errlen, "agent calls need a provider token");
		return 403;
	}
	pthread_rwlock_rdlock(&state.lock);
	job = state_job(id);
	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != attempt) {
		snprintf(err, errlen, "stale attempt %lld of job %lld: kill it",
		    (long long)attempt, (long long)id);
		*kill = 1;
		status = 409;
	} else {
		/*
		 * A gang's checkpoint is its rank-0 part's: that node writes
		 * it, every part's node may read it (to resume).
		 */
		for (k = 0; k < (write ? 1 : job->nparts); k++) {
			node = state_node(job->parts[k].node_id);
			mine |= node != NULL && !job->parts[k].ended &&
			    node->owner_token == who->id;
		}
		if (!mine && who->role != GP_ROLE_ADMIN) {
			snprintf(err, errlen, write && job->nparts > 1
			    ? "job %lld's checkpoint is written by its "
			      "rank-0 part"
			    : "job %lld does not run on your node",
			    (long long)id);
			status = 403;
		} else {
			gp_strlcpy(user, job->user, GP_NAME_MAX + 1);
		}
	}
	pthread_rwlock_unlock(&state.lock);
	return status;
}

/* A user's call: the job must be visible to them (else 404). */
static int
user_job(const struct token_entry *who, int64_t id, char *user)
{
	struct job *job;
	int ok, stored;

	pthread_rwlock_rdlock(&state.lock);
	job = state_job_any(id, &stored); /* it may have left memory */
	ok = job != NULL && job_visible_to(job, who);
	if (ok)
		gp_strlcpy(user, job->user, GP_NAME_MAX + 1);
	pthread_rwlock_unlock(&state.lock);
	if (stored)
		state_job_stored_free(job);
	return ok;
}

/* ---- URLs ---- */

/*
 * Parses "/v1/agent/jobs/ID/ATTEMPT/checkpoint[/REST]" (agent) or
 * "/v1/jobs/ID/checkpoints[/REST]" (user). OUT: *id, *attempt (0 for
 * users), *rest ("" when none). Returns 1 when url is such a route.
 */
static int
parse_url(const char *url, int *agent, int64_t *id, int64_t *attempt,
    const char **rest)
{
	char num[24];
	const char *p, *slash;
	size_t len;
	int i;

	if (strncmp(url, AGENT_PREFIX, strlen(AGENT_PREFIX)) == 0) {
		*agent = 1;
		p = url + strlen(AGENT_PREFIX);
	} else if (strncmp(url, USER_PREFIX, strlen(USER_PREFIX)) == 0) {
		*agent = 0;
		p = url + strlen(USER_PREFIX);
	} else {
		return 0;
	}
	*attempt = 0;
	for (i = 0; i < (*agent ? 2 : 1); i++) {
		slash = strchr(p, '/');
		if (slash == NULL || (len = (size_t)(slash - p)) == 0 ||
		    len >= sizeof(num))
			return 0;
		memcpy(num, p, len);
		num[len] = '\0';
		if (gp_parse_int(num, 1, INT64_MAX / 2, i == 0 ? id : attempt)
		    != 0)
			return 0;
		p = slash + 1;
	}
	if (*agent && *attempt > 1000000)
		return 0;
	len = strlen(*agent ? "checkpoint" : "checkpoints");
	if (strncmp(p, *agent ? "checkpoint" : "checkpoints", len) != 0 ||
	    (p[len] != '\0' && p[len] != '/'))
		return 0;
	p += len;
	*rest = *p == '/' ? p + 1 : p;
	if (*p == '/' && **rest == '\0')
		return 0;
	return 1;
}

/* ---- chunks stored behind the answer ---- */

/*
 * A received chunk, verified and written, whose flush and rename a store
 * thread does after its PUT was answered (see the top). A commit that
 * does not find a chunk waits for its store (ckpt_stat_chunk).
 */
struct pending_store {
	struct pending_store *next;
	int fd;
	size_t len;
	int taken;		/* a store thread is on it */
	char name[GP_CKPT_NAME_HEX];
	char user[GP_NAME_MAX + 1];
	char tmp[1400], final[1400], dir[1400];
};

#define STORE_THREADS	4
#define STORES_MAX	64	/* queued; beyond, a PUT stores before answering */

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t store_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t store_done = PTHREAD_COND_INITIALIZER;
static struct pending_store *stores;	/* queued and being stored */
static int nstores, store_stopping, nstore_threads;
static int64_t store_delay_ms;	/* tests only: each store waits first */
static pthread_t store_threads[STORE_THREADS];

/*
 * Flushes, closes and names a written chunk: whole on disk before it
 * takes its name. Returns 0 or GP_EIO (the temporary file is removed).
 */
static int
store_chunk(int fd, const char *tmp, const char *final, const char *user,
    const char *dir, size_t len)
{
	int ret = 0;

	if (fdatasync(fd) != 0)
		ret = GP_EIO;
	if (close(fd) != 0)
		ret = GP_EIO;
	if (ret == 0 && rename(tmp, final) != 0)
		ret = GP_EIO;
	if (ret != 0) {
		unlink(tmp);
		return ret;
	}
	dir_dirty(user, dir);
	metrics_chunk_stored(len);
	return 0;
}

static void *
store_main(void *arg)
{
	struct pending_store *p, **pp;

	(void)arg;
	pthread_mutex_lock(&store_lock);
	for (;;) {
		for (p = stores; p != NULL && p->taken; p = p->next)
			;
		if (p == NULL) {
			if (store_stopping)
				break;
			pthread_cond_wait(&store_work, &store_lock);
			continue;
		}
		p->taken = 1;
		pthread_mutex_unlock(&store_lock);
		if (store_delay_ms > 0)
			usleep((useconds_t)store_delay_ms * 1000);
		if (store_chunk(p->fd, p->tmp, p->final, p->user, p->dir,
		    p->len) != 0)
			gp_error("checkpoint chunk not stored chunk=%.16s "
				 "user=%s error=\"%s\"", p->name, p->user,
			    strerror(errno));
		pthread_mutex_lock(&store_lock);
		for (pp = &stores; *pp != p; pp = &(*pp)->next)
			;
		*pp = p->next;
		nstores--;
		free(p);
		pthread_cond_broadcast(&store_done);
	}
	pthread_mutex_unlock(&store_lock);
	return NULL;
}

/* Queues u's written chunk (taking its fd). Returns 0, or -1: full. */
static int
store_behind(struct ckpt_upload *u)
{
	struct pending_store *p, **pp;

	if (nstore_threads == 0 || (p = calloc(1, sizeof(*p))) == NULL)
		return -1;
	pthread_mutex_lock(&store_lock);
	if (nstores >= STORES_MAX || store_stopping) {
		pthread_mutex_unlock(&store_lock);
		free(p);
		return -1;
	}
	p->fd = u->fd;
	p->len = u->len;
	gp_strlcpy(p->name, u->name, sizeof(p->name));
	gp_strlcpy(p->user, u->user, sizeof(p->user));
	gp_strlcpy(p->tmp, u->tmp, sizeof(p->tmp));
	gp_strlcpy(p->final, u->final, sizeof(p->final));
	gp_strlcpy(p->dir, u->dir, sizeof(p->dir));
	for (pp = &stores; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = p;
	nstores++;
	u->fd = -1;
	pthread_cond_signal(&store_work);
	pthread_mutex_unlock(&store_lock);
	return 0;
}

int
ckpt_stat_chunk(const char *user, const char *name, struct stat *sb)
{
	struct pending_store *p;
	char path[1400];
	int pending;

	chunk_path(user, name, path, sizeof(path));
	if (stat(path, sb) == 0)
		return 0;
	/* Received and answered, maybe not named yet: wait for its store. */
	pthread_mutex_lock(&store_lock);
	do {
		pending = 0;
		for (p = stores; p != NULL; p = p->next)
			if (strcmp(p->user, user) == 0 &&
			    strcmp(p->name, name) == 0)
				pending = 1;
		if (pending)
			pthread_cond_wait(&store_done, &store_lock);
	} while (pending);
	pthread_mutex_unlock(&store_lock);
	return stat(path, sb);
}

static void
stores_start(void)
{
	const char *delay = getenv("GPUPOOL_TEST_CKPT_STORE_DELAY_MS");

	/*
	 * Tests only (test_checkpoint_store_behind.sh): every store waits N
	 * ms, so that commits come while their chunks are still queued.
	 */
	if (delay != NULL &&
	    gp_parse_int(delay, 1, 10000, &store_delay_ms) == 0)
		gp_warn("checkpoint store test mode store_delay_ms=%lld",
		    (long long)store_delay_ms);
	/* Benchmarks only (bench/ckpt.sh A/B): every PUT stores first. */
	if (getenv("GPUPOOL_BENCH_CKPT_STORE_FIRST") != NULL) {
		gp_warn("checkpoint store bench mode: chunks stored before "
			"the answer");
		return;
	}
	for (nstore_threads = 0; nstore_threads < STORE_THREADS;
	    nstore_threads++)
		if (pthread_create(&store_threads[nstore_threads], NULL,
		    store_main, NULL) != 0)
			break;
}

/* Stores what is queued, then ends the threads. */
static void
stores_stop(void)
{
	int i;

	pthread_mutex_lock(&store_lock);
	store_stopping = 1;
	pthread_cond_broadcast(&store_work);
	pthread_mutex_unlock(&store_lock);
	for (i = 0; i < nstore_threads; i++)
		pthread_join(store_threads[i], NULL);
	nstore_threads = 0;
	store_stopping = 0;
}

/* ---- the streamed chunk PUT ---- */

void
ckpt_upload_refuse(struct ckpt_upload *u, int status, const char *msg)
{
	if (u->status == 0) {
		u->status = status;
		gp_strlcpy(u->error, msg, sizeof(u->error));
	}
	if (u->fd >= 0) {
		close(u->fd);
		u->fd = -1;
		unlink(u->tmp);
	}
}

struct ckpt_upload *
ckpt_upload_new(struct request *req)
{
	struct ckpt_upload *u;

	if ((u = calloc(1, sizeof(*u))) == NULL)
		return NULL; /* _end answers 503 when req->stream is NULL */
	u->fd = -1;
	u->limit = GP_CKPT_CHUNK_SIZE;
	req->stream = u;
	if (req->auth == NULL)
		ckpt_upload_refuse(u, 401,
		    "missing or unknown token (Authorization: Bearer ...)");
	return u;
}

void
ckpt_upload_begin(struct request *req, const char *url)
{
	struct ckpt_upload *u;
	char user[GP_NAME_MAX + 1], err[200];
	const char *rest;
	int64_t id, attempt;
	int agent, status;

	if ((u = ckpt_upload_new(req)) == NULL || u->status != 0)
		return;
	if (!parse_url(url, &agent, &id, &attempt, &rest) ||
	    !gp_ckpt_name_valid(rest + 7)) {
		ckpt_upload_refuse(u, 404,
		    "chunks are named by 64 lowercase hex digits");
		return;
	}
	status = ckpt_agent_job(req->auth, id, attempt, 1, user, err, sizeof(err),
	    &u->kill);
	if (status != 0) {
		ckpt_upload_refuse(u, status, err);
		return;
	}
	ckpt_upload_open(u, user, rest + 7, GP_CKPT_CHUNK_SIZE);
}

void
ckpt_upload_open(struct ckpt_upload *u, const char *user, const char *name,
    size_t limit)
{
	char udir[1200];

	gp_strlcpy(u->name, name, sizeof(u->name));
	gp_strlcpy(u->user, user, sizeof(u->user));
	u->limit = limit;
	chunk_path(user, u->name, u->final, sizeof(u->final));
	/* Stored already: young again (see GC), and the body is dropped. */
	if (utimensat(AT_FDCWD, u->final, NULL, AT_SYMLINK_NOFOLLOW) == 0) {
		u->exists = 1;
		return;
	}
	user_dir(user, udir, sizeof(udir));
	snprintf(u->dir, sizeof(u->dir), "%s/chunks/%.2s", udir, u->name);
	snprintf(u->tmp, sizeof(u->tmp), "%s/tmp", udir);
	if (gp_mkdir_p(u->dir, 0700) != 0 || gp_mkdir_p(u->tmp, 0700) != 0) {
		ckpt_upload_refuse(u, 500, "cannot create the chunk directory");
		return;
	}
	if ((u->buf = block_get()) == NULL) {
		ckpt_upload_refuse(u, 503, "out of memory");
		return;
	}
	snprintf(u->tmp, sizeof(u->tmp), "%s/tmp/%.16s.XXXXXX", udir, u->name);
	u->fd = mkostemp(u->tmp, O_CLOEXEC);
	if (u->fd < 0) {
		ckpt_upload_refuse(u, 500, "cannot create a temporary file");
		return;
	}
	/* Past the page cache where the file system allows it. */
	u->direct = direct_io && fcntl(u->fd, F_SETFL, O_DIRECT) == 0;
	crypto_generichash_init(&u->hash, NULL, 0, 32);
}

/*
 * Writes the first n bytes of u->buf at u->off. With O_DIRECT, n is a
 * multiple of WRITE_ALIGN; a file system that refuses O_DIRECT writes
 * (EINVAL) gets buffered ones.
 */
static int
write_block(struct ckpt_upload *u, size_t n)
{
	size_t done = 0;
	ssize_t w;

	while (done < n) {
		w = pwrite(u->fd, u->buf + done, n - done,
		    (off_t)(u->off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EINVAL && u->direct && done == 0 &&
		    fcntl(u->fd, F_SETFL, 0) == 0) {
			u->direct = 0;
			continue;
		}
		if (w <= 0)
			return GP_EIO;
		done += (size_t)w;
	}
	u->off += n;
	u->fill = 0;
	return 0;
}

void
ckpt_upload_data(struct request *req, const char *data, size_t len)
{
	struct ckpt_upload *u = req->stream;
	size_t n;

	if (u == NULL || u->status != 0 || u->exists)
		return; /* read and dropped */
	if (u->len + len > u->limit) {
		ckpt_upload_refuse(u, 413, u->limit == GP_CKPT_CHUNK_SIZE
		    ? "a chunk is at most 4 MiB"
		    : "the chunk is larger than the manifest says");
		return;
	}
	crypto_generichash_update(&u->hash, (const unsigned char *)data, len);
	u->len += len;
	while (len > 0) {
		n = WRITE_BLOCK - u->fill;
		if (n > len)
			n = len;
		memcpy(u->buf + u->fill, data, n);
		u->fill += n;
		data += n;
		len -= n;
		if (u->fill == WRITE_BLOCK && write_block(u, WRITE_BLOCK) != 0) {
			ckpt_upload_refuse(u, 500, "cannot write the chunk");
			return;
		}
	}
}

/* Writes what is left in u->buf; the file ends at u->len. */
static int
write_tail(struct ckpt_upload *u)
{
	size_t n = u->fill;

	if (n == 0)
		return 0;
	if (u->direct) {
		/* Whole blocks, zero-padded; the padding is cut off. */
		n = (n + WRITE_ALIGN - 1) / WRITE_ALIGN * WRITE_ALIGN;
		memset(u->buf + u->fill, 0, n - u->fill);
	}
	if (write_block(u, n) != 0)
		return GP_EIO;
	if (u->off != u->len && ftruncate(u->fd, (off_t)u->len) != 0)
		return GP_EIO;
	return 0;
}

enum MHD_Result
ckpt_upload_end(struct MHD_Connection *conn, struct request *req)
{
	struct ckpt_upload *u = req->stream;
	unsigned char hash[32];
	char hex[GP_CKPT_NAME_HEX];
	int ret;

	if (u == NULL)
		return reply_error(conn, 503, "out of memory");
	if (u->status == 409 && u->kill)
		return reply_json(conn, 409, json_pack("{s:s,s:b}", "error",
		    u->error, "kill", 1));
	if (u->status != 0)
		return reply_error(conn, u->status, "%s", u->error);
	if (u->exists)
		return reply_json(conn, 200, json_pack("{s:b}", "stored", 0));
	crypto_generichash_final(&u->hash, hash, sizeof(hash));
	sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));
	if (strcmp(hex, u->name) != 0) {
		ckpt_upload_refuse(u, 400, "");
		gp_warn("checkpoint chunk refused: content does not match its "
			"name chunk=%.16s bytes=%zu",
		    u->name, u->len);
		return reply_error(conn, 400,
		    "chunk content does not match its name (BLAKE2b-256)");
	}
	ret = write_tail(u);
	if (ret != 0) {
		close(u->fd);
		u->fd = -1;
		unlink(u->tmp);
		return reply_error(conn, 500, "cannot write the chunk");
	}
	/*
	 * Flushed and named behind the answer (see the top); when too many
	 * wait, here: whole on disk before it takes its name either way.
	 */
	if (store_behind(u) != 0) {
		ret = store_chunk(u->fd, u->tmp, u->final, u->user, u->dir,
		    u->len);
		u->fd = -1;
		if (ret != 0)
			return reply_error(conn, 500, "cannot store the chunk");
	}
	return reply_json(conn, 201, json_pack("{s:b}", "stored", 1));
}

void
ckpt_upload_release(void *stream)
{
	ckpt_upload_free(stream);
}

void
ckpt_upload_free(struct ckpt_upload *u)
{
	if (u == NULL)
		return;
	if (u->fd >= 0) {
		close(u->fd);
		unlink(u->tmp);
	}
	block_put(u->buf);
	free(u);
}

/* ---- handlers ---- */

static json_t *
body_json(struct request *req)
{
	json_t *v = json_loadb(req->body.data ? req->body.data : "",
	    req->body.len, JSON_REJECT_DUPLICATES, NULL);

	if (v != NULL && !json_is_object(v)) {
		json_decref(v);
		return NULL;
	}
	return v;
}

static enum MHD_Result
handle_missing(struct MHD_Connection *conn, struct request *req,
    const char *user)
{
	json_t *body = body_json(req), *list, *missing, *c;
	char path[1400];
	size_t i;

	list = json_object_get(body, "chunks");
	if (!json_is_array(list) || json_array_size(list) > MISSING_MAX) {
		json_decref(body);
		return reply_error(conn, 400,
		    "body: {\"chunks\": [names]} with at most %d names",
		    MISSING_MAX);
	}
	json_array_foreach(list, i, c)
	{
		if (!gp_ckpt_name_valid(json_string_value(c))) {
			json_decref(body);
			return reply_error(conn, 400, "chunks[%zu]: 64 "
			    "lowercase hex digits", i);
		}
	}
	missing = json_array();
	pthread_mutex_lock(&ckpt_lock);
	json_array_foreach(list, i, c)
	{
		chunk_path(user, json_string_value(c), path, sizeof(path));
		/* Present: young again, so GC leaves it to the commit. */
		if (utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW) != 0)
			json_array_append(missing, c);
	}
	pthread_mutex_unlock(&ckpt_lock);
	json_decref(body);
	return reply_json(conn, 200, json_pack("{s:o}", "missing", missing));
}

static enum MHD_Result
handle_commit(struct MHD_Connection *conn, struct request *req,
    int64_t id, int64_t attempt, const char *user)
{
	struct gp_ckpt_totals tot;
	sqlite3_stmt *st = NULL;
	json_t *body = body_json(req), *f, *c, *stored;
	const char *label, *name;
	char err[256], *text = NULL;
	int64_t version = 0, size, want;
	struct stat sb;
	size_t i, k;
	int ret, status = 0;

	if (body == NULL)
		return reply_error(conn, 400, "body: a JSON manifest object");
	ret = gp_ckpt_manifest_check(body, max_bytes, 0, &tot, err,
	    sizeof(err));
	if (ret != 0) {
		json_decref(body);
		return reply_error(conn, ret == GP_ETOOBIG ? 413 : 400, "%s",
		    err);
	}
	label = json_string_value(json_object_get(body, "label"));
	if (label == NULL)
		label = "";
	stored = json_pack("{s:O,s:s}", "files", json_object_get(body,
	    "files"), "label", label);
	text = stored != NULL ? json_dumps(stored, JSON_COMPACT) : NULL;
	json_decref(stored);
	if (text == NULL) {
		json_decref(body);
		return reply_error(conn, 503, "out of memory");
	}
	pthread_mutex_lock(&ckpt_lock);
	/* Every chunk stored, each of the size its place says. */
	json_array_foreach(json_object_get(body, "files"), i, f)
	{
		size = json_integer_value(json_object_get(f, "size"));
		json_array_foreach(json_object_get(f, "chunks"), k, c)
		{
			name = json_string_value(c);
			want = size - (int64_t)k * GP_CKPT_CHUNK_SIZE;
			if (want > GP_CKPT_CHUNK_SIZE)
				want = GP_CKPT_CHUNK_SIZE;
			if (ckpt_stat_chunk(user, name, &sb) != 0) {
				snprintf(err, sizeof(err),
				    "chunk %s of %.200s is not stored: upload "
				    "it first", name,
				    json_string_value(json_object_get(f,
					"path")));
				status = 400;
				goto unlock;
			}
			if (sb.st_size != want) {
				snprintf(err, sizeof(err),
				    "chunk %s of %.200s holds %lld bytes, not "
				    "%lld", name,
				    json_string_value(json_object_get(f,
					"path")),
				    (long long)sb.st_size, (long long)want);
				status = 400;
				goto unlock;
			}
		}
	}
	status = 500;
	snprintf(err, sizeof(err), "cannot make the chunks durable");
	if (ckpt_sync_user_dirs(user) != 0)
		goto unlock;
	snprintf(err, sizeof(err), "cannot record the version");
	if (exec("BEGIN IMMEDIATE") != 0)
		goto unlock;
	st = prepare("SELECT COALESCE((SELECT next FROM next_version WHERE "
		     "job_id = ?1), (SELECT MAX(version) + 1 FROM versions "
		     "WHERE job_id = ?1), 1)");
	if (st == NULL)
		goto rollback;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) != SQLITE_ROW)
		goto rollback;
	version = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	st = NULL;
	st = prepare("INSERT INTO versions VALUES(?,?,?,?,?,?,?,?,?)");
	if (st == NULL)
		goto rollback;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, version);
	sqlite3_bind_int64(st, 3, attempt);
	sqlite3_bind_text(st, 4, user, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, text, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, tot.bytes);
	sqlite3_bind_int64(st, 7, tot.files);
	sqlite3_bind_text(st, 8, label, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 9, gp_now_ms());
	if (sqlite3_step(st) != SQLITE_DONE)
		goto rollback;
	sqlite3_finalize(st);
	st = NULL;
	st = prepare("INSERT OR REPLACE INTO next_version VALUES(?, ?)");
	if (st == NULL)
		goto rollback;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, version + 1);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto rollback;
	sqlite3_finalize(st);
	/* Retention: the last `keep` versions of the job. */
	st = prepare("DELETE FROM versions WHERE job_id = ?1 AND version <= "
		     "?2");
	if (st == NULL)
		goto rollback;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, version - keep);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto rollback;
	sqlite3_finalize(st);
	st = NULL;
	if (exec("COMMIT") != 0)
		goto rollback;
	status = 0;
	goto unlock;
rollback:
	sqlite3_finalize(st);
	exec("ROLLBACK");
unlock:
	pthread_mutex_unlock(&ckpt_lock);
	free(text);
	if (status != 0) {
		json_decref(body);
		gp_warn("checkpoint commit refused job=%lld attempt=%lld "
			"status=%d error=\"%s\"",
		    (long long)id, (long long)attempt, status, err);
		return reply_error(conn, status, "%s", err);
	}
	mark_dirty(user);
	state_note_checkpoint(id, (int)attempt, version, tot.bytes, label);
	gp_info("checkpoint committed job=%lld attempt=%lld version=%lld "
		"files=%lld bytes=%lld",
	    (long long)id, (long long)attempt, (long long)version,
	    (long long)tot.files, (long long)tot.bytes);
	json_decref(body);
	return reply_json(conn, 200,
	    json_pack("{s:I}", "version", (json_int_t)version));
}

/* The manifest of a version (0: the latest), with its metadata. */
static enum MHD_Result
handle_manifest(struct MHD_Connection *conn, int64_t id, int64_t version)
{
	sqlite3_stmt *st;
	json_t *m = NULL;
	char tm[40];

	pthread_mutex_lock(&ckpt_lock);
	st = prepare(version > 0
		? "SELECT manifest, version, attempt, created_ms, bytes FROM "
		  "versions WHERE job_id = ?1 AND version = ?2"
		: "SELECT manifest, version, attempt, created_ms, bytes FROM "
		  "versions WHERE job_id = ?1 ORDER BY version DESC LIMIT 1");
	if (st != NULL) {
		sqlite3_bind_int64(st, 1, id);
		if (version > 0)
			sqlite3_bind_int64(st, 2, version);
		if (sqlite3_step(st) == SQLITE_ROW) {
			m = json_loads((const char *)sqlite3_column_text(st, 0),
			    0, NULL);
			gp_format_time(sqlite3_column_int64(st, 3), tm,
			    sizeof(tm));
			json_object_set_new(m, "version",
			    json_integer(sqlite3_column_int64(st, 1)));
			json_object_set_new(m, "attempt",
			    json_integer(sqlite3_column_int64(st, 2)));
			json_object_set_new(m, "created_at", json_string(tm));
			json_object_set_new(m, "bytes",
			    json_integer(sqlite3_column_int64(st, 4)));
		}
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&ckpt_lock);
	if (m == NULL)
		return reply_error(conn, 404, "no checkpoint");
	return reply_json(conn, 200, m);
}

static enum MHD_Result
handle_list(struct MHD_Connection *conn, int64_t id)
{
	json_t *list = json_array();
	sqlite3_stmt *st;
	char tm[40];

	pthread_mutex_lock(&ckpt_lock);
	st = prepare("SELECT version, attempt, bytes, files, label, "
		     "created_ms FROM versions WHERE job_id = ? ORDER BY "
		     "version");
	if (st != NULL) {
		sqlite3_bind_int64(st, 1, id);
		while (sqlite3_step(st) == SQLITE_ROW) {
			gp_format_time(sqlite3_column_int64(st, 5), tm,
			    sizeof(tm));
			json_array_append_new(list,
			    json_pack("{s:I,s:I,s:I,s:I,s:s,s:s}", "version",
				(json_int_t)sqlite3_column_int64(st, 0),
				"attempt",
				(json_int_t)sqlite3_column_int64(st, 1),
				"bytes",
				(json_int_t)sqlite3_column_int64(st, 2),
				"files",
				(json_int_t)sqlite3_column_int64(st, 3),
				"label",
				(const char *)sqlite3_column_text(st, 4),
				"created_at", tm));
		}
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&ckpt_lock);
	return reply_json(conn, 200, json_pack("{s:I,s:o}", "job_id",
	    (json_int_t)id, "checkpoints", list));
}

enum MHD_Result
ckpt_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	char user[GP_NAME_MAX + 1], err[200];
	int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	int64_t id, attempt, version;
	const char *rest;
	int agent, status, kill;

	if (!parse_url(url, &agent, &id, &attempt, &rest))
		return reply_error(conn, 404, "no such endpoint: %.100s", url);
	if (agent) {
		status = ckpt_agent_job(req->auth, id, attempt, !get, user, err,
		    sizeof(err), &kill);
		if (status == 409 && kill)
			return reply_json(conn, 409, json_pack("{s:s,s:b}",
			    "error", err, "kill", 1));
		if (status != 0)
			return reply_error(conn, status, "%s", err);
		if (get && rest[0] == '\0')
			return handle_manifest(conn, id, 0);
		if (get && strncmp(rest, "chunks/", 7) == 0 &&
		    gp_ckpt_name_valid(rest + 7))
			return ckpt_reply_chunk(conn, user, rest + 7);
		if (post && strcmp(rest, "missing") == 0)
			return handle_missing(conn, req, user);
		if (post && strcmp(rest, "commit") == 0)
			return handle_commit(conn, req, id, attempt, user);
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	}
	if (!user_job(req->auth, id, user))
		return reply_error(conn, 404, "no job %lld", (long long)id);
	if (!get)
		return reply_error(conn, 405, "method %.16s not allowed",
		    method);
	if (rest[0] == '\0')
		return handle_list(conn, id);
	if (strncmp(rest, "chunks/", 7) == 0 && gp_ckpt_name_valid(rest + 7))
		return ckpt_reply_chunk(conn, user, rest + 7);
	if (strcmp(rest, "latest") == 0)
		return handle_manifest(conn, id, 0);
	if (gp_parse_int(rest, 1, INT64_MAX / 2, &version) == 0)
		return handle_manifest(conn, id, version);
	return reply_error(conn, 404, "no such endpoint: %s %.100s", method,
	    url);
}

static const struct api_stream chunk_stream = {ckpt_upload_begin,
    ckpt_upload_data, ckpt_upload_end, ckpt_upload_release};

/* Checkpoints: the agent's (its attempt's) and the user's (read only). */
const struct api_route ckpt_routes[] = {
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/chunks/*/**", API_PUT, 0,
        NULL, 0, 0, NULL, &chunk_stream},
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/missing", API_ANY, 0, NULL,
        CKPT_JSON_BODY_MAX, 0, ckpt_handle, NULL},
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/commit", API_ANY, 0, NULL,
        CKPT_JSON_BODY_MAX, 0, ckpt_handle, NULL},
    {"/v1/agent/jobs/{id}/{attempt}/checkpoint/**", API_ANY, 0, NULL, 0, 0,
        ckpt_handle, NULL},
    {"/v1/jobs/{id}/checkpoints/**", API_ANY, 0, NULL, 0, 0, ckpt_handle,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
