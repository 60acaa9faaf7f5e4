/*
 * blob.c: the coordinator's blob store (blob.h; docs/architecture.md,
 * "The blob store"). One mechanism under checkpoints, data sets, job
 * outputs and images: a blob is a file named by the hex of its content's
 * hash, received streamed, verified, stored whole and durable, stored
 * once (per owner), and removed by a GC that asks the store's users what
 * they still reference.
 *
 * Layout of a store (struct blob_store_config):
 *   ROOT[/<owner>]/SUBDIR/ab/<hex>   blobs (an owner that starts with '.'
 *                                    gets a '%' prefix: "..", a valid
 *                                    user name, must not climb out)
 *   ROOT[/<owner>]/tmp/              blobs being received
 *
 * Durability. Two promises: a blob that exists is whole, even after a
 * crash (so "missing" can trust existence and a commit only has to check
 * that every referenced blob is there with its size), and an object that
 * references blobs is recorded only when they are durable.
 *  - A blob is received into tmp/ under a unique name (mkostemp), hashed
 *    as it arrives, written in WRITE_BLOCK blocks (O_DIRECT where the file
 *    system allows), and fdatasync'ed before it is renamed to its name:
 *    its bytes and its size are on disk before the name exists. A blob
 *    that fails its hash is never renamed.
 *  - A store with store threads (the chunk store) flushes and renames
 *    behind the PUT's answer (at most STORES_MAX queued; beyond, the PUT
 *    does it before it answers): the client sends its next chunk while
 *    the disk flushes this one. blob_stat waits for a queued blob's store
 *    before it says "not there"; a store that fails removes the file. The
 *    rename's directory entry is made durable by blob_sync_owner, which a
 *    commit calls before it records its object: one directory sync for a
 *    version instead of one per chunk. blob_init syncs the store's file
 *    system, for entries a coordinator that died left unsynced.
 *  - A store without (the image store) renames and syncs the directory
 *    before the PUT is answered.
 *
 * Garbage. No count is stored: each pass computes, from the users'
 * records (struct blob_user's collect), the blobs an owner's objects
 * reference, and removes the others that are older than the grace time
 * (an upload in progress has not committed yet; "missing" and a PUT of a
 * stored blob make it young again, blob_touch). The count lives in the
 * users' databases, so no blob file, index or counter has to be kept
 * right across crashes or across coordinators (docs/architecture.md).
 * Only owners marked (blob_gc_mark) since the last pass are looked at.
 *
 * Threads: the HTTP threads (uploads, reads), a store's store threads,
 * and its GC thread. Locks: blob_lock (the files' life, see blob.h),
 * then the users' own; dirs_lock, gc_lock and store_lock are leaves.
 */
#include "blob.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coord_metrics.h"
#include "gp.h"
#include "joblog.h"
#include "log.h"

#define WRITE_BLOCK    (1u << 20) /* a blob is written in these */
#define WRITE_ALIGN    4096       /* O_DIRECT: offsets, sizes, memory */
#define BLOCK_POOL_MAX 8          /* idle write blocks kept */
#define STORE_THREADS  4
#define STORES_MAX     64 /* queued; beyond, a PUT stores before answering */
#define USERS_MAX      4
#define PATH_LEN       1400

/*
 * A received blob, verified and written, whose flush and rename a store
 * thread does after its PUT was answered.
 */
struct pending_store {
	struct pending_store *next;
	int fd;
	size_t len;
	int taken; /* a store thread is on it */
	char hex[BLOB_HEX_LEN + 1];
	char owner[GP_NAME_MAX + 1];
	char tmp[PATH_LEN], final[PATH_LEN], dir[PATH_LEN];
};

struct blob_store {
	struct blob_store_config cfg;
	char root[1100], subdir[16], what[16];
	pthread_mutex_t lock; /* blob_lock: the files' life */

	/* Directories with entries not yet durable: {owner: {dir: true}}. */
	pthread_mutex_t dirs_lock;
	json_t *dirty_dirs;

	const struct blob_user *users[USERS_MAX];
	int nusers;

	pthread_t gc_thread;
	int gc_started, gc_stopping, gc_wanted;
	pthread_mutex_t gc_lock;
	pthread_cond_t gc_cond; /* monotonic: gp_cond_init_monotonic */
	json_t *gc_dirty;       /* owners to look at: {owner: true} */

	pthread_mutex_t store_lock;
	pthread_cond_t store_work, store_done;
	struct pending_store *stores; /* queued and being stored */
	int nstores, store_stopping, nstore_threads;
	pthread_t store_threads[STORE_THREADS];
};

/* A blob PUT being received (the request's stream). */
struct blob_upload {
	struct blob_store *store;
	int status; /* 0, or the HTTP error to answer */
	char error[200];
	int kill;   /* with 409: tell the agent to kill the attempt */
	int exists; /* already stored: the body is read and dropped */
	int fd;
	int direct;    /* fd is O_DIRECT: whole aligned blocks from buf */
	int64_t len;   /* bytes received */
	int64_t limit; /* the most bytes the blob may have */
	char too_big[120];
	size_t off;  /* bytes written to fd (a multiple of WRITE_BLOCK) */
	char *buf;   /* WRITE_BLOCK bytes, aligned, from the pool */
	size_t fill; /* bytes of buf in use */
	char hex[BLOB_HEX_LEN + 1];
	char owner[GP_NAME_MAX + 1];
	char tmp[PATH_LEN], final[PATH_LEN], dir[PATH_LEN];
	union {
		crypto_generichash_state blake2b;
		crypto_hash_sha256_state sha256;
	} hash;
};

struct blob_store *blob_chunks, *blob_images;

/* Idle write blocks, shared by the stores, kept so that memory is reused. */
static pthread_mutex_t block_lock = PTHREAD_MUTEX_INITIALIZER;
static char *block_pool[BLOCK_POOL_MAX];
static int block_count;

/* ---- paths ---- */

static void
owner_dir(const struct blob_store *s, const char *owner, char *out, size_t len)
{
	if (!s->cfg.per_owner)
		snprintf(out, len, "%s", s->root);
	else
		snprintf(out, len, "%s/%s%s", s->root,
		    owner[0] == '.' ? "%" : "", owner);
}

void
blob_path(const struct blob_store *s, const char *owner, const char *hex,
    char *out, size_t len)
{
	char dir[1200];

	owner_dir(s, owner, dir, sizeof(dir));
	snprintf(out, len, "%s/%s/%.2s/%s", dir, s->subdir, hex, hex);
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
blob_lock(struct blob_store *s)
{
	pthread_mutex_lock(&s->lock);
}

void
blob_unlock(struct blob_store *s)
{
	pthread_mutex_unlock(&s->lock);
}

/* ---- directories to sync ---- */

static void
dir_dirty(struct blob_store *s, const char *owner, const char *dir)
{
	json_t *set;

	pthread_mutex_lock(&s->dirs_lock);
	set = json_object_get(s->dirty_dirs, owner);
	if (set == NULL) {
		set = json_object();
		json_object_set_new(s->dirty_dirs, owner, set);
	}
	json_object_set_new(set, dir, json_true());
	pthread_mutex_unlock(&s->dirs_lock);
}

int
blob_sync_owner(struct blob_store *s, const char *owner)
{
	json_t *set, *v;
	const char *dir;
	int ret = 0;

	pthread_mutex_lock(&s->dirs_lock);
	set = json_incref(json_object_get(s->dirty_dirs, owner));
	json_object_del(s->dirty_dirs, owner);
	pthread_mutex_unlock(&s->dirs_lock);
	if (set == NULL)
		return 0;
	json_object_foreach(set, dir, v)
	{
		if (fsync_dir(dir) != 0) {
			gp_error("%s blob directory sync failed dir=%s "
			         "error=\"%s\"",
			    s->what, dir, strerror(errno));
			ret = GP_EIO;
			break;
		}
	}
	if (ret != 0)
		json_object_foreach(set, dir, v) dir_dirty(s, owner, dir);
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

/* ---- reading ---- */

int
blob_touch(struct blob_store *s, const char *owner, const char *hex, int locked)
{
	char path[PATH_LEN];
	int rc;

	blob_path(s, owner, hex, path, sizeof(path));
	if (!locked)
		blob_lock(s);
	rc = utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
	if (!locked)
		blob_unlock(s);
	return rc == 0 ? 0 : -1;
}

int
blob_read(const struct blob_store *s, const char *owner, const char *hex,
    size_t max, char **data, size_t *len)
{
	char path[PATH_LEN];

	blob_path(s, owner, hex, path, sizeof(path));
	return gp_read_file(path, max, data, len);
}

json_t *
blob_missing(struct blob_store *s, const char *owner, json_t *list, size_t skip)
{
	json_t *missing = json_array(), *c;
	const char *name;
	size_t i;

	if (missing == NULL)
		return NULL;
	blob_lock(s);
	json_array_foreach(list, i, c)
	{
		name = json_string_value(c);
		if (name == NULL || strlen(name) < skip ||
		    blob_touch(s, owner, name + skip, 1) != 0)
			json_array_append(missing, c);
	}
	blob_unlock(s);
	return missing;
}

enum MHD_Result
blob_reply(struct MHD_Connection *conn, const struct blob_store *s,
    const char *owner, const char *hex)
{
	struct MHD_Response *resp;
	char path[PATH_LEN];
	struct stat st;
	int fd;

	blob_path(s, owner, hex, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && s->cfg.hash != BLOB_SHA256)
		return reply_error(conn, 404, "no chunk %.64s", hex);
	if (fd < 0)
		return reply_error(conn, 404, "blob sha256:%.64s is not stored",
		    hex);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return reply_error(conn, 500, "cannot read %s",
		    s->cfg.per_owner ? "chunk" : "blob");
	}
	resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (resp == NULL) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type",
	    "application/octet-stream");
	MHD_add_response_header(resp, "X-Gpupool-Protocol", "1");
	return reply_queue(conn, 200, resp);
}

/* ---- storing: behind the answer or before it ---- */

/*
 * Flushes, closes and names a written blob: whole on disk before it
 * takes its name. Returns 0 or GP_EIO (the temporary file is removed).
 */
static int
store_blob(struct blob_store *s, int fd, const char *tmp, const char *final,
    const char *owner, const char *dir, size_t len)
{
	int ret = 0;

	if (fdatasync(fd) != 0)
		ret = GP_EIO;
	if (close(fd) != 0)
		ret = GP_EIO;
	if (ret == 0 && rename(tmp, final) != 0)
		ret = GP_EIO;
	if (ret == 0 && !s->cfg.defer_dir_sync && fsync_dir(dir) != 0)
		ret = GP_EIO;
	if (ret != 0) {
		unlink(tmp);
		return ret;
	}
	if (s->cfg.defer_dir_sync)
		dir_dirty(s, owner, dir);
	if (s->cfg.on_stored != NULL)
		s->cfg.on_stored(len);
	return 0;
}

static void *
store_main(void *arg)
{
	struct blob_store *s = arg;
	struct pending_store *p, **pp;

	pthread_mutex_lock(&s->store_lock);
	for (;;) {
		for (p = s->stores; p != NULL && p->taken; p = p->next)
			;
		if (p == NULL) {
			if (s->store_stopping)
				break;
			pthread_cond_wait(&s->store_work, &s->store_lock);
			continue;
		}
		p->taken = 1;
		pthread_mutex_unlock(&s->store_lock);
		if (s->cfg.store_delay_ms > 0)
			usleep((useconds_t)s->cfg.store_delay_ms * 1000);
		if (store_blob(s, p->fd, p->tmp, p->final, p->owner, p->dir,
		        p->len) != 0)
			gp_error("%s blob not stored blob=%.16s owner=%s "
			         "error=\"%s\"",
			    s->what, p->hex, p->owner, strerror(errno));
		pthread_mutex_lock(&s->store_lock);
		for (pp = &s->stores; *pp != p; pp = &(*pp)->next)
			;
		*pp = p->next;
		s->nstores--;
		free(p);
		pthread_cond_broadcast(&s->store_done);
	}
	pthread_mutex_unlock(&s->store_lock);
	return NULL;
}

/* Queues u's written blob (taking its fd). Returns 0, or -1: full. */
static int
store_behind(struct blob_upload *u)
{
	struct blob_store *s = u->store;
	struct pending_store *p, **pp;

	if (s->nstore_threads == 0 || (p = calloc(1, sizeof(*p))) == NULL)
		return -1;
	pthread_mutex_lock(&s->store_lock);
	if (s->nstores >= STORES_MAX || s->store_stopping) {
		pthread_mutex_unlock(&s->store_lock);
		free(p);
		return -1;
	}
	p->fd = u->fd;
	p->len = (size_t)u->len;
	gp_strlcpy(p->hex, u->hex, sizeof(p->hex));
	gp_strlcpy(p->owner, u->owner, sizeof(p->owner));
	gp_strlcpy(p->tmp, u->tmp, sizeof(p->tmp));
	gp_strlcpy(p->final, u->final, sizeof(p->final));
	gp_strlcpy(p->dir, u->dir, sizeof(p->dir));
	for (pp = &s->stores; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = p;
	s->nstores++;
	u->fd = -1;
	pthread_cond_signal(&s->store_work);
	pthread_mutex_unlock(&s->store_lock);
	return 0;
}

int
blob_stat(struct blob_store *s, const char *owner, const char *hex,
    struct stat *sb)
{
	struct pending_store *p;
	char path[PATH_LEN];
	int pending;

	blob_path(s, owner, hex, path, sizeof(path));
	if (stat(path, sb) == 0)
		return 0;
	/* Received and answered, maybe not named yet: wait for its store. */
	pthread_mutex_lock(&s->store_lock);
	do {
		pending = 0;
		for (p = s->stores; p != NULL; p = p->next)
			if (strcmp(p->hex, hex) == 0 &&
			    (!s->cfg.per_owner || strcmp(p->owner, owner) == 0))
				pending = 1;
		if (pending)
			pthread_cond_wait(&s->store_done, &s->store_lock);
	} while (pending);
	pthread_mutex_unlock(&s->store_lock);
	return stat(path, sb);
}

static void
stores_start(struct blob_store *s)
{
	for (s->nstore_threads = 0; s->nstore_threads < s->cfg.store_threads &&
	     s->nstore_threads < STORE_THREADS;
	     s->nstore_threads++)
		if (pthread_create(&s->store_threads[s->nstore_threads], NULL,
		        store_main, s) != 0)
			break;
}

/* Stores what is queued, then ends the threads. */
static void
stores_stop(struct blob_store *s)
{
	int i;

	pthread_mutex_lock(&s->store_lock);
	s->store_stopping = 1;
	pthread_cond_broadcast(&s->store_work);
	pthread_mutex_unlock(&s->store_lock);
	for (i = 0; i < s->nstore_threads; i++)
		pthread_join(s->store_threads[i], NULL);
	s->nstore_threads = 0;
	s->store_stopping = 0;
}

/* ---- the streamed PUT ---- */

struct blob_upload *
blob_upload_new(void)
{
	struct blob_upload *u = calloc(1, sizeof(*u));

	if (u != NULL)
		u->fd = -1;
	return u;
}

void
blob_upload_refuse(struct blob_upload *u, int status, const char *msg)
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

void
blob_upload_refuse_kill(struct blob_upload *u, const char *msg)
{
	if (u->status == 0)
		u->kill = 1;
	blob_upload_refuse(u, 409, msg);
}

int
blob_upload_kill(const struct blob_upload *u)
{
	return u->kill;
}

int
blob_upload_refused(const struct blob_upload *u, const char **msg)
{
	*msg = u->error;
	return u->status;
}

int64_t
blob_upload_len(const struct blob_upload *u)
{
	return u->len;
}

const char *
blob_upload_name(const struct blob_upload *u)
{
	return u->hex;
}

int64_t
blob_upload_limit(const struct blob_upload *u)
{
	return u->limit;
}

void
blob_upload_open(struct blob_upload *u, struct blob_store *s, const char *owner,
    const char *hex, int64_t limit, const char *too_big)
{
	char odir[1200];

	u->store = s;
	gp_strlcpy(u->hex, hex, sizeof(u->hex));
	gp_strlcpy(u->owner, owner != NULL ? owner : "", sizeof(u->owner));
	gp_strlcpy(u->too_big, too_big, sizeof(u->too_big));
	u->limit = limit;
	blob_path(s, u->owner, u->hex, u->final, sizeof(u->final));
	/* Stored already: young again (see GC), and the body is dropped. */
	if (blob_touch(s, u->owner, u->hex, 0) == 0) {
		u->exists = 1;
		return;
	}
	owner_dir(s, u->owner, odir, sizeof(odir));
	snprintf(u->dir, sizeof(u->dir), "%s/%s/%.2s", odir, s->subdir, u->hex);
	snprintf(u->tmp, sizeof(u->tmp), "%s/tmp", odir);
	if (gp_mkdir_p(u->dir, 0700) != 0 || gp_mkdir_p(u->tmp, 0700) != 0) {
		blob_upload_refuse(u, 500,
		    s->cfg.per_owner ? "cannot create the chunk directory"
		                     : "cannot create the blob directory");
		return;
	}
	if ((u->buf = block_get()) == NULL) {
		blob_upload_refuse(u, 503, "out of memory");
		return;
	}
	snprintf(u->tmp, sizeof(u->tmp), "%s/tmp/%.16s.XXXXXX", odir, u->hex);
	u->fd = mkostemp(u->tmp, O_CLOEXEC);
	if (u->fd < 0) {
		blob_upload_refuse(u, 500, "cannot create a temporary file");
		return;
	}
	/* Past the page cache where the file system allows it. */
	u->direct = s->cfg.direct_io && fcntl(u->fd, F_SETFL, O_DIRECT) == 0;
	if (s->cfg.hash == BLOB_SHA256)
		crypto_hash_sha256_init(&u->hash.sha256);
	else
		crypto_generichash_init(&u->hash.blake2b, NULL, 0, 32);
}

/*
 * Writes the first n bytes of u->buf at u->off. With O_DIRECT, n is a
 * multiple of WRITE_ALIGN; a file system that refuses O_DIRECT writes
 * (EINVAL) gets buffered ones.
 */
static int
write_block(struct blob_upload *u, size_t n)
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
blob_upload_data(struct blob_upload *u, const char *data, size_t len)
{
	size_t n;

	if (u == NULL || u->status != 0 || u->exists || u->store == NULL)
		return; /* read and dropped */
	if (u->len + (int64_t)len > u->limit) {
		blob_upload_refuse(u, 413, u->too_big);
		return;
	}
	if (u->store->cfg.hash == BLOB_SHA256)
		crypto_hash_sha256_update(&u->hash.sha256,
		    (const unsigned char *)data, len);
	else
		crypto_generichash_update(&u->hash.blake2b,
		    (const unsigned char *)data, len);
	u->len += (int64_t)len;
	while (len > 0) {
		n = WRITE_BLOCK - u->fill;
		if (n > len)
			n = len;
		memcpy(u->buf + u->fill, data, n);
		u->fill += n;
		data += n;
		len -= n;
		if (u->fill == WRITE_BLOCK &&
		    write_block(u, WRITE_BLOCK) != 0) {
			blob_upload_refuse(u, 500,
			    u->store->cfg.per_owner ? "cannot write the chunk"
			                            : "cannot write the blob");
			return;
		}
	}
}

/* Writes what is left in u->buf; the file ends at u->len. */
static int
write_tail(struct blob_upload *u)
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
	if ((int64_t)u->off != u->len && ftruncate(u->fd, (off_t)u->len) != 0)
		return GP_EIO;
	return 0;
}

enum blob_end
blob_upload_end(struct blob_upload *u, char *got)
{
	unsigned char hash[32];
	struct blob_store *s = u->store;

	if (u->status != 0 || s == NULL)
		return BLOB_REFUSED;
	if (u->exists)
		return BLOB_EXISTED;
	if (s->cfg.hash == BLOB_SHA256)
		crypto_hash_sha256_final(&u->hash.sha256, hash);
	else
		crypto_generichash_final(&u->hash.blake2b, hash, sizeof(hash));
	sodium_bin2hex(got, BLOB_HEX_LEN + 1, hash, sizeof(hash));
	if (strcmp(got, u->hex) != 0) {
		blob_upload_refuse(u, 400, "");
		gp_warn("%s blob refused: content does not match its name "
		        "blob=%.16s got=%.16s bytes=%lld",
		    s->what, u->hex, got, (long long)u->len);
		return BLOB_MISMATCH;
	}
	if (write_tail(u) != 0) {
		close(u->fd);
		u->fd = -1;
		unlink(u->tmp);
		return BLOB_WRITE_FAILED;
	}
	/*
	 * Flushed and named behind the answer (see the top); when too many
	 * wait, or the store has no threads, here: whole on disk before it
	 * takes its name either way.
	 */
	if (store_behind(u) != 0) {
		int ret = store_blob(s, u->fd, u->tmp, u->final, u->owner,
		    u->dir, (size_t)u->len);
		u->fd = -1;
		if (ret != 0)
			return BLOB_STORE_FAILED;
	}
	gp_debug("%s blob stored blob=%.16s bytes=%lld", s->what, u->hex,
	    (long long)u->len);
	return BLOB_STORED;
}

void
blob_upload_free(struct blob_upload *u)
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

void
blob_upload_release(void *stream)
{
	blob_upload_free(stream);
}

/* ---- garbage collection ---- */

void
blob_gc_mark(struct blob_store *s, const char *owner)
{
	pthread_mutex_lock(&s->gc_lock);
	if (s->gc_dirty != NULL)
		json_object_set_new(s->gc_dirty, owner, json_true());
	pthread_mutex_unlock(&s->gc_lock);
}

void
blob_gc_kick(struct blob_store *s)
{
	pthread_mutex_lock(&s->gc_lock);
	s->gc_wanted = 1;
	pthread_cond_signal(&s->gc_cond);
	pthread_mutex_unlock(&s->gc_lock);
}

/*
 * Removes the files in dir older than cutoff (ms) and not in keep (NULL:
 * none kept). OUT: *young, incremented for each one left as too young.
 */
static int64_t
sweep_dir(const char *dir, json_t *keep, int64_t cutoff_ms, int64_t *young)
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
		if (keep != NULL && json_object_get(keep, d->d_name) != NULL)
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
gc_owner(struct blob_store *s, const char *owner)
{
	char dir[1200], sub[PATH_LEN], fan[1700];
	int64_t cutoff = gp_now_ms() - s->cfg.grace_ms, removed = 0, young = 0;
	json_t *refs = json_object();
	struct dirent *d;
	DIR *dh;
	int i;

	if (refs == NULL)
		return 1;
	owner_dir(s, owner, dir, sizeof(dir));
	blob_lock(s);
	for (i = 0; i < s->nusers; i++) {
		if (s->users[i]->collect(owner, refs) != 0) {
			blob_unlock(s);
			json_decref(refs);
			gp_warn("%s gc skipped owner=%s user=%s", s->what,
			    owner, s->users[i]->name);
			return 1;
		}
	}
	if (s->cfg.gc_pause_ms > 0) {
		gp_info("%s gc references scanned owner=%s: pausing ms=%lld "
			"(GPUPOOL_TEST_GC_PAUSE_MS, tests only)",
		    s->what, owner, (long long)s->cfg.gc_pause_ms);
		struct timespec ts = {(time_t)(s->cfg.gc_pause_ms / 1000),
		    (long)(s->cfg.gc_pause_ms % 1000) * 1000000L};

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	/* Nothing is removed unless this coordinator still leads. */
	for (i = 0; i < s->nusers; i++) {
		if (s->users[i]->fence != NULL && s->users[i]->fence() != 0) {
			blob_unlock(s);
			json_decref(refs);
			gp_warn("%s gc skipped owner=%s user=%s: not fenced",
			    s->what, owner, s->users[i]->name);
			return 1;
		}
	}
	snprintf(sub, sizeof(sub), "%s/%s", dir, s->subdir);
	if ((dh = opendir(sub)) != NULL) {
		while ((d = readdir(dh)) != NULL) {
			if (d->d_name[0] == '.')
				continue;
			snprintf(fan, sizeof(fan), "%s/%s", sub, d->d_name);
			removed += sweep_dir(fan, refs, cutoff, &young);
		}
		closedir(dh);
	}
	blob_unlock(s);
	/* Temporary files of uploads abandoned long ago. */
	snprintf(sub, sizeof(sub), "%s/tmp", dir);
	sweep_dir(sub, NULL, cutoff, &young);
	json_decref(refs);
	if (removed > 0)
		gp_info("%s gc owner=%s blobs_removed=%lld", s->what,
		    s->cfg.per_owner ? owner : "-", (long long)removed);
	/* Pool-wide: every pass looks again anyway (its users mark it). */
	return s->cfg.per_owner && young > 0;
}

void
blob_gc_run(struct blob_store *s)
{
	json_t *dirty, *v;
	const char *owner;
	int i;

	for (i = 0; i < s->nusers; i++)
		if (s->users[i]->expire != NULL)
			s->users[i]->expire();
	pthread_mutex_lock(&s->gc_lock);
	dirty = s->gc_dirty;
	s->gc_dirty = json_object();
	pthread_mutex_unlock(&s->gc_lock);
	json_object_foreach(dirty, owner, v)
	{
		/* Young garbage left: that owner gets another pass. */
		if (gc_owner(s, owner))
			blob_gc_mark(s, owner);
	}
	json_decref(dirty);
}

static void *
gc_main(void *arg)
{
	struct blob_store *s = arg;
	int first = 1;

	for (;;) {
		pthread_mutex_lock(&s->gc_lock);
		if (!first && !s->gc_wanted && !s->gc_stopping)
			gp_cond_wait_ms(&s->gc_cond, &s->gc_lock,
			    s->cfg.gc_period_ms);
		first = 0;
		s->gc_wanted = 0;
		if (s->gc_stopping) {
			pthread_mutex_unlock(&s->gc_lock);
			break;
		}
		pthread_mutex_unlock(&s->gc_lock);
		blob_gc_run(s);
	}
	return NULL;
}

/* ---- opening and closing ---- */

int
blob_add_user(struct blob_store *s, const struct blob_user *user)
{
	if (s->nusers >= USERS_MAX || s->gc_started)
		return GP_EINVAL;
	s->users[s->nusers++] = user;
	return 0;
}

static int
store_open(const struct blob_store_config *cfg, struct blob_store **out)
{
	struct blob_store *s;
	char path[1300];
	int fd;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return GP_ENOMEM;
	s->cfg = *cfg;
	gp_strlcpy(s->root, cfg->root, sizeof(s->root));
	gp_strlcpy(s->subdir, cfg->subdir, sizeof(s->subdir));
	gp_strlcpy(s->what, cfg->what, sizeof(s->what));
	s->cfg.root = s->root;
	s->cfg.subdir = s->subdir;
	s->cfg.what = s->what;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->dirs_lock, NULL);
	pthread_mutex_init(&s->gc_lock, NULL);
	pthread_mutex_init(&s->store_lock, NULL);
	pthread_cond_init(&s->store_work, NULL);
	pthread_cond_init(&s->store_done, NULL);
	if (gp_cond_init_monotonic(&s->gc_cond) != 0)
		goto nomem;
	if ((s->dirty_dirs = json_object()) == NULL ||
	    (s->gc_dirty = json_object()) == NULL)
		goto nomem;
	*out = s; /* blob_stop frees it whatever follows */
	if (gp_mkdir_p(s->root, 0700) != 0) {
		gp_error("cannot create %s: %s", s->root, strerror(errno));
		return GP_EIO;
	}
	if (!cfg->per_owner) {
		snprintf(path, sizeof(path), "%s/tmp", s->root);
		if (gp_mkdir_p(path, 0700) == 0)
			snprintf(path, sizeof(path), "%s/%s", s->root,
			    s->subdir);
		if (gp_mkdir_p(path, 0700) != 0) {
			gp_error("cannot create %s: %s", path, strerror(errno));
			return GP_EIO;
		}
	}
	/*
	 * Blobs renamed into place by a process that died before their
	 * directories were synced: durable now, before a commit counts on
	 * them.
	 */
	if ((fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    syncfs(fd) != 0) {
		gp_error("cannot sync %s: %s", s->root, strerror(errno));
		if (fd >= 0)
			close(fd);
		return GP_EIO;
	}
	close(fd);
	stores_start(s);
	return 0;
nomem:
	json_decref(s->dirty_dirs);
	json_decref(s->gc_dirty);
	free(s);
	return GP_ENOMEM;
}

static void
store_close(struct blob_store *s)
{
	if (s == NULL)
		return;
	stores_stop(s);
	if (s->gc_started) {
		pthread_mutex_lock(&s->gc_lock);
		s->gc_stopping = 1;
		pthread_cond_signal(&s->gc_cond);
		pthread_mutex_unlock(&s->gc_lock);
		pthread_join(s->gc_thread, NULL);
		s->gc_started = 0;
	}
	json_decref(s->gc_dirty);
	json_decref(s->dirty_dirs);
	pthread_cond_destroy(&s->gc_cond);
	free(s);
}

/* A test or bench hook: an integer from the environment, or def. */
static int64_t
env_int(const char *name, int64_t min, int64_t max, int64_t def)
{
	const char *v = getenv(name);
	int64_t n;

	if (v == NULL || gp_parse_int(v, min, max, &n) != 0)
		return def;
	return n;
}

/*
 * Tests only: GPUPOOL_TEST_GC_PAUSE_MS, a GC pass's wait between its
 * reference scan and its fence (test_gc_fence_pg.sh pauses the leader
 * there).
 */
static int64_t
gc_pause_ms(void)
{
	int64_t ms = env_int("GPUPOOL_TEST_GC_PAUSE_MS", 1, 600000, 0);

	if (ms > 0)
		gp_warn("blob gc test mode gc_pause_ms=%lld", (long long)ms);
	return ms;
}

int
blob_init(const struct coord_config *cfg)
{
	char chunks_root[1100], images_root[1100];
	const char *base;
	struct blob_store_config c;
	int64_t gc_ms;
	int ret;

	/* --blob-dir (data_dir unless given): every coordinator's. */
	base = cfg->blob_dir[0] != '\0' ? cfg->blob_dir : cfg->data_dir;
	snprintf(chunks_root, sizeof(chunks_root), "%s/checkpoints", base);
	snprintf(images_root, sizeof(images_root), "%s/images", base);
	memset(&c, 0, sizeof(c));
	c.what = "checkpoint";
	c.root = chunks_root;
	c.subdir = "chunks";
	c.hash = BLOB_BLAKE2B_256;
	c.per_owner = 1;
	/*
	 * Tests only: buffered writes, as on a file system without O_DIRECT
	 * (test_checkpoint_store.sh); every store behind waits N ms, so that
	 * commits come while their chunks are queued
	 * (test_checkpoint_store_behind.sh); GC every N ms, and garbage
	 * collectable after N ms instead of an hour (test_checkpoint_gc.sh,
	 * test_image_store.sh). Benchmarks only (bench/ckpt.sh A/B): every
	 * PUT stores before it answers.
	 */
	c.direct_io = getenv("GPUPOOL_TEST_BUFFERED_IO") == NULL;
	if (!c.direct_io)
		gp_warn("checkpoint store test mode: buffered writes");
	c.store_threads = STORE_THREADS;
	if (getenv("GPUPOOL_BENCH_CKPT_STORE_FIRST") != NULL) {
		c.store_threads = 0;
		gp_warn("checkpoint store bench mode: chunks stored before "
		        "the answer");
	}
	c.store_delay_ms =
	    env_int("GPUPOOL_TEST_CKPT_STORE_DELAY_MS", 1, 10000, 0);
	if (c.store_delay_ms > 0)
		gp_warn("checkpoint store test mode store_delay_ms=%lld",
		    (long long)c.store_delay_ms);
	gc_ms = env_int("GPUPOOL_TEST_CKPT_GC_MS", 10, 3600000, 0);
	if (gc_ms > 0)
		gp_warn("checkpoint gc test mode gc_ms=%lld", (long long)gc_ms);
	c.grace_ms = gc_ms > 0 ? gc_ms : 3600 * 1000LL;
	c.gc_period_ms = gc_ms > 0 ? gc_ms : 60000;
	c.on_stored = metrics_chunk_stored;
	c.defer_dir_sync = 1;
	c.gc_pause_ms = gc_pause_ms();
	if ((ret = store_open(&c, &blob_chunks)) != 0)
		return ret;

	memset(&c, 0, sizeof(c));
	c.what = "image";
	c.root = images_root;
	c.subdir = "blobs";
	c.hash = BLOB_SHA256;
	c.direct_io = getenv("GPUPOOL_TEST_BUFFERED_IO") == NULL;
	c.store_threads = 0; /* named and synced before the answer */
	gc_ms = env_int("GPUPOOL_TEST_IMAGE_GC_MS", 10, 3600000, 0);
	if (gc_ms > 0)
		gp_warn("image gc test mode gc_ms=%lld", (long long)gc_ms);
	c.grace_ms = gc_ms > 0 ? gc_ms : 3600 * 1000LL;
	c.gc_period_ms = gc_ms > 0 ? gc_ms : 60000;
	c.gc_pause_ms = gc_pause_ms();
	return store_open(&c, &blob_images);
}

int
blob_start(void)
{
	struct blob_store *s[2] = {blob_chunks, blob_images};
	int i;

	for (i = 0; i < 2; i++) {
		if (s[i] == NULL || s[i]->gc_started)
			continue;
		if (pthread_create(&s[i]->gc_thread, NULL, gc_main, s[i]) != 0)
			return GP_ENOMEM;
		s[i]->gc_started = 1;
	}
	return 0;
}

void
blob_stop(void)
{
	store_close(blob_chunks);
	store_close(blob_images);
	blob_chunks = blob_images = NULL;
	pthread_mutex_lock(&block_lock);
	while (block_count > 0)
		free(block_pool[--block_count]);
	pthread_mutex_unlock(&block_lock);
}
