/*
 * transfer.c: moving trees to and from the coordinator's chunk store
 * (transfer.h): walks a directory, names its chunks, uploads the ones
 * the coordinator lacks and commits the manifest; restores a manifest
 * into an empty directory. Checkpoints use the whole cycle here
 * (gp_ckpt_upload, gp_ckpt_download); data sets and job outputs use the
 * pieces (gp_tree_*, gp_transfer_fetch, the pool) with their own routes.
 *
 * A directory may belong to an unprivileged user while we run as root
 * (a job's checkpoint or output directory), so nothing here follows a
 * symbolic link: every path is opened one component at a time relative
 * to the directory's descriptor with O_NOFOLLOW, and every file read is
 * checked (fstat) to be the regular file that the walk recorded.
 *
 * Transfers run on a small pool of threads (peer->parallel), each with
 * its own HTTP client and a small buffer; they take tasks from a shared
 * atomic counter. A failed transfer is retried (CHUNK_TRIES) before the
 * whole call gives up. Chunk bodies are streamed: a checkpoint upload
 * names a batch of chunks, asks which the coordinator lacks and sends
 * those straight from their files (batch_task); a tree's upload sends the
 * chunks it was told are missing the same way (send_chunk); a download
 * names and writes each chunk as its bytes arrive (fetch_write). Nothing
 * holds a whole chunk in memory, except the data cache's own tasks
 * (gp_transfer_run), which get a chunk-sized buffer.
 */
#include "transfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "util.h"

#define CHUNK_TRIES	 3
#define PARALLEL_DEFAULT 4
#define PARALLEL_MAX	 32
#define DEPTH_MAX	 64
#define CHUNK_TIMEOUT_MS 120000L
#define JSON_TIMEOUT_MS	 120000L
#define UPLOAD_BATCH	 8 /* chunks named, asked about and sent together */
#define HASH_PIECE	 (256 << 10) /* read and named at once: stays in
					the CPU's cache */

/* One regular file of the directory, as the walk saw it. */
struct entry {
	char *path;
	int64_t size, mtime_ns, ino;
	int mode;
	size_t first_chunk; /* index in the chunk list */
};

/* One chunk of one file. */
struct chunk {
	size_t file;
	int64_t index;
	char name[GP_CKPT_NAME_HEX];
	int send; /* checkpoint upload: its batch asks about its name (the
		     first chunk of that name to be named) */
};

struct walk {
	struct entry *files;
	size_t nfiles, cap;
	int64_t skipped; /* links, sockets, fifos, devices, others' files */
	uid_t only_uid;	 /* (uid_t)-1: files of any owner */
};

/* ---- paths beneath a directory, without following links ---- */

int
gp_open_beneath(int dirfd, const char *path, int flags, int mode, int create,
    int dir_mode, uid_t uid, gid_t gid)
{
	char comp[GP_CKPT_PATH_MAX + 1];
	const char *p = path, *slash;
	int fd = dirfd, next;
	size_t len;

	while ((slash = strchr(p, '/')) != NULL) {
		len = (size_t)(slash - p);
		memcpy(comp, p, len);
		comp[len] = '\0';
		if (create && mkdirat(fd, comp, (mode_t)dir_mode) == 0) {
			next = openat(fd, comp, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			if (next >= 0 && (fchown(next, uid, gid) != 0 ||
			    fchmod(next, (mode_t)dir_mode) != 0)) {
				close(next);
				next = -1;
			}
		} else {
			next = openat(fd, comp, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd != dirfd)
			close(fd);
		if (next < 0)
			return -1;
		fd = next;
		p = slash + 1;
	}
	next = openat(fd, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd != dirfd)
		close(fd);
	return next;
}

static int
open_beneath(int dirfd, const char *path, int flags, int mode, int create,
    uid_t uid, gid_t gid)
{
	return gp_open_beneath(dirfd, path, flags, mode, create, 0755, uid,
	    gid);
}

static int64_t
mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int
walk_add(struct walk *w, const char *path, const struct stat *st)
{
	struct entry *e;

	if (w->nfiles == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		e = realloc(w->files, cap * sizeof(*e));
		if (e == NULL)
			return GP_ENOMEM;
		w->files = e;
		w->cap = cap;
	}
	e = &w->files[w->nfiles];
	if ((e->path = strdup(path)) == NULL)
		return GP_ENOMEM;
	e->size = st->st_size;
	e->mtime_ns = mtime_ns(st);
	e->ino = (int64_t)st->st_ino;
	e->mode = (int)(st->st_mode & 07777);
	e->first_chunk = 0;
	w->nfiles++;
	return 0;
}

static void
walk_free(struct walk *w)
{
	size_t i;

	for (i = 0; i < w->nfiles; i++)
		free(w->files[i].path);
	free(w->files);
	memset(w, 0, sizeof(*w));
}

/* Records every regular file beneath fd (consumed) into w. */
static int
walk_dir(int fd, const char *rel, int depth, struct walk *w, char *err,
    size_t errlen)
{
	char path[GP_CKPT_PATH_MAX + 2];
	struct dirent *d;
	struct stat st;
	DIR *dir;
	int ret = 0, sub;

	if (depth > DEPTH_MAX) {
		close(fd);
		snprintf(err, errlen, "directories nested deeper than %d",
		    DEPTH_MAX);
		return GP_ETOOBIG;
	}
	if ((dir = fdopendir(fd)) == NULL) {
		close(fd);
		snprintf(err, errlen, "cannot read directory %.200s: %s",
		    rel[0] ? rel : ".", strerror(errno));
		return GP_EIO;
	}
	while (ret == 0 && (d = readdir(dir)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
		    0)
			continue; /* gone meanwhile */
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			w->skipped++; /* links, sockets, fifos, devices */
			continue;
		}
		if ((size_t)snprintf(path, sizeof(path), "%s%s%s", rel,
			rel[0] ? "/" : "", d->d_name) > GP_CKPT_PATH_MAX ||
		    !gp_ckpt_path_valid(path)) {
			snprintf(err, errlen,
			    "path %.200s: longer than %d bytes or with control "
			    "characters",
			    path, GP_CKPT_PATH_MAX);
			ret = GP_EINVAL;
			break;
		}
		if (S_ISREG(st.st_mode)) {
			if (w->only_uid != (uid_t)-1 &&
			    st.st_uid != w->only_uid) {
				w->skipped++;
				continue;
			}
			if (w->nfiles >= GP_CKPT_FILES_MAX) {
				snprintf(err, errlen, "more than %d files",
				    GP_CKPT_FILES_MAX);
				ret = GP_ETOOBIG;
			} else if ((ret = walk_add(w, path, &st)) != 0) {
				snprintf(err, errlen, "out of memory");
			}
			continue;
		}
		sub = openat(dirfd(dir), d->d_name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue; /* replaced by a link or gone: skip it */
		ret = walk_dir(sub, path, depth + 1, w, err, errlen);
	}
	closedir(dir);
	return ret;
}

/* ---- a pool of transfer threads ---- */

struct pool;

struct gp_transfer_worker {
	struct pool *pool;
	struct gp_http_client *http;
	char *buf; /* pool->buf_size bytes: uploads read into it a piece
		      at a time to name chunks; gp_transfer_run's tasks
		      get a whole chunk's room */
	pthread_t thread;
};

struct pool {
	const char *url, *token, *ca_file;
	int need_http;
	size_t buf_size; /* each worker's buffer; 0: HASH_PIECE */
	size_t ntasks;
	_Atomic size_t next;
	_Atomic int stop;
	/* Returns 0 or GP_E*; writes err through pool_fail. */
	int (*run)(struct gp_transfer_worker *w, size_t task);
	void *ctx;
	pthread_mutex_t lock;
	int err;
	char errtext[256];
	_Atomic int64_t bytes_sent;
	_Atomic int64_t chunks_sent;
	_Atomic int changed; /* a file changed while being read */
	/* gp_transfer_run's task and its context. */
	gp_transfer_task task;
	void *task_ctx;
};

static void
pool_vfail(struct pool *p, int err, const char *fmt, va_list ap)
{
	pthread_mutex_lock(&p->lock);
	if (p->err == 0) {
		p->err = err;
		vsnprintf(p->errtext, sizeof(p->errtext), fmt, ap);
	}
	pthread_mutex_unlock(&p->lock);
	atomic_store(&p->stop, 1);
}

static void
pool_fail(struct pool *p, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
pool_fail(struct pool *p, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pool_vfail(p, err, fmt, ap);
	va_end(ap);
}

static void *
worker_main(void *arg)
{
	struct gp_transfer_worker *w = arg;
	struct pool *p = w->pool;
	size_t task;
	int ret;

	while (!atomic_load(&p->stop)) {
		task = atomic_fetch_add(&p->next, 1);
		if (task >= p->ntasks)
			break;
		if ((ret = p->run(w, task)) != 0) {
			pool_fail(p, ret, "%s", "transfer failed");
			break;
		}
	}
	return NULL;
}

/* Runs p->run over every task on n threads; returns p->err. */
static int
pool_run(struct pool *p, int n)
{
	struct gp_transfer_worker *w;
	int i, started = 0;

	if (p->ntasks == 0)
		return 0;
	if (n <= 0)
		n = PARALLEL_DEFAULT;
	if (n > PARALLEL_MAX)
		n = PARALLEL_MAX;
	if ((size_t)n > p->ntasks)
		n = (int)p->ntasks;
	if ((w = calloc((size_t)n, sizeof(*w))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < n; i++) {
		w[i].pool = p;
		w[i].buf = malloc(p->buf_size ? p->buf_size : HASH_PIECE);
		if (p->need_http)
			w[i].http = gp_http_client_new(p->url, p->token,
			    p->ca_file);
		if (w[i].buf == NULL || (p->need_http && w[i].http == NULL)) {
			pool_fail(p, GP_ENOMEM, "out of memory");
			break;
		}
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) !=
		    0) {
			pool_fail(p, GP_ENOMEM, "cannot start a thread");
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	for (i = 0; i < n; i++) {
		gp_http_client_free(w[i].http);
		free(w[i].buf);
	}
	free(w);
	return p->err;
}

/* ---- the pool for other users (transfer.h) ---- */

static int
run_task(struct gp_transfer_worker *w, size_t task)
{
	return w->pool->task(w, task, w->pool->task_ctx);
}

int
gp_transfer_run(const struct gp_transfer_peer *peer, int need_http,
    size_t ntasks, gp_transfer_task fn, void *ctx, int64_t *bytes,
    char *err, size_t errlen)
{
	struct pool p;
	int ret;

	memset(&p, 0, sizeof(p));
	pthread_mutex_init(&p.lock, NULL);
	p.url = peer->url;
	p.token = peer->token;
	p.ca_file = peer->ca_file;
	p.need_http = need_http;
	p.buf_size = GP_CKPT_CHUNK_SIZE;
	p.ntasks = ntasks;
	p.run = run_task;
	p.task = fn;
	p.task_ctx = ctx;
	ret = pool_run(&p, peer->parallel > 0 ? peer->parallel
					      : PARALLEL_DEFAULT);
	pthread_mutex_destroy(&p.lock);
	if (bytes != NULL)
		*bytes = atomic_load(&p.bytes_sent);
	if (ret != 0)
		snprintf(err, errlen, "%s", p.errtext);
	return ret;
}

char *
gp_transfer_buf(struct gp_transfer_worker *w)
{
	return w->buf;
}

void
gp_transfer_fail(struct gp_transfer_worker *w, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pool_vfail(w->pool, err, fmt, ap);
	va_end(ap);
}

void
gp_transfer_count(struct gp_transfer_worker *w, int64_t bytes)
{
	atomic_fetch_add(&w->pool->bytes_sent, bytes);
	atomic_fetch_add(&w->pool->chunks_sent, 1);
}

/* ---- upload ---- */

/* A walked tree, and the upload's plan for it. */
struct gp_tree {
	int dirfd;
	struct walk walk;
	struct chunk *chunks;
	size_t nchunks;
	const char *chunk_prefix;
	/* Checkpoint upload: names some batch has asked about. */
	const char *missing_path;
	pthread_mutex_t lock;
	json_t *claimed; /* {name: index} */
	/* gp_tree_send: the indices of the chunks to send. */
	size_t *send;
	size_t nsend;
	/* Optional (gp_tree_send): after each chunk sent, of send_total. */
	void (*progress)(void *arg, int64_t done, int64_t total);
	void *progress_arg;
	int64_t send_total;
};

/*
 * Opens the file of chunk c, checking that it is still the one the walk
 * saw. OUT: *fd, *off and *len (the chunk's place). Returns 0 or
 * GP_ECONFLICT (changed).
 */
static int
open_chunk(struct gp_tree *u, const struct chunk *c, int *fd, int64_t *off,
    size_t *len)
{
	const struct entry *e = &u->walk.files[c->file];
	struct stat st;

	*off = c->index * GP_CKPT_CHUNK_SIZE;
	*len = (size_t)(e->size - *off < GP_CKPT_CHUNK_SIZE
		? e->size - *off
		: GP_CKPT_CHUNK_SIZE);
	*fd = open_beneath(u->dirfd, e->path, O_RDONLY | O_NONBLOCK, 0, 0, 0,
	    0);
	if (*fd < 0)
		return GP_ECONFLICT;
	if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (int64_t)st.st_ino != e->ino || st.st_size != e->size) {
		close(*fd);
		return GP_ECONFLICT;
	}
	return 0;
}

/* pread until len bytes or the end: returns the count, or -1. */
static ssize_t
pread_full(int fd, char *buf, size_t len, int64_t off)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = pread(fd, buf + got, len - got, off + (int64_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * Names chunk c, reading it a piece at a time into buf (HASH_PIECE
 * bytes). Returns 0, GP_ECONFLICT (changed) or GP_EIO.
 */
static int
name_chunk(struct gp_tree *u, struct chunk *c, char *buf)
{
	gp_ckpt_hash_state hs;
	size_t len, done = 0, want;
	int64_t off;
	ssize_t n;
	int fd, ret;

	if ((ret = open_chunk(u, c, &fd, &off, &len)) != 0)
		return ret;
	gp_ckpt_hash_init(&hs);
	while (done < len) {
		want = len - done < HASH_PIECE ? len - done : HASH_PIECE;
		n = pread_full(fd, buf, want, off + (int64_t)done);
		if (n < 0) {
			close(fd);
			return GP_EIO;
		}
		if ((size_t)n != want) {
			close(fd);
			return GP_ECONFLICT;
		}
		gp_ckpt_hash_update(&hs, buf, want);
		done += want;
	}
	close(fd);
	gp_ckpt_hash_final(&hs, c->name);
	return 0;
}

/* Tells the pool that a file changed while being read. */
static int
changed(struct pool *p)
{
	atomic_store(&p->changed, 1);
	atomic_store(&p->stop, 1);
	return 0;
}

static int
hash_task(struct gp_transfer_worker *w, size_t task)
{
	struct gp_tree *u = w->pool->ctx;
	struct chunk *c = &u->chunks[task];
	int ret;

	ret = name_chunk(u, c, w->buf);
	if (ret == GP_ECONFLICT)
		return changed(w->pool);
	if (ret != 0) {
		pool_fail(w->pool, ret, "cannot read %.200s: %s",
		    u->walk.files[c->file].path, strerror(errno));
		return ret;
	}
	return 0;
}

/* GP_E* for a refusal by the coordinator. */
static int
status_error(long status)
{
	switch (status) {
	case 401:
		return GP_EAUTH;
	case 403:
		return GP_EPERM;
	case 404:
		return GP_ENOENT;
	case 409:
		return GP_ECONFLICT;
	case 413:
		return GP_ETOOBIG;
	default:
		return status >= 500 ? GP_EIO : GP_EPROTO;
	}
}

/* A chunk's bytes as a request body, read from its file as sent. */
struct send_src {
	int fd;
	int64_t off;
	size_t len, pos;
	int changed; /* the file ended early */
	int failed;  /* a read error */
};

static size_t
send_read(void *arg, char *buf, size_t max)
{
	struct send_src *s = arg;
	ssize_t n;

	if (max > s->len - s->pos)
		max = s->len - s->pos;
	if (max == 0)
		return 0;
	n = pread_full(s->fd, buf, max, s->off + (int64_t)s->pos);
	if (n < 0) {
		s->failed = 1;
		return (size_t)-1;
	}
	if ((size_t)n != max) {
		s->changed = 1;
		return (size_t)-1;
	}
	s->pos += max;
	return max;
}

/*
 * Sends chunk c with PUT u->chunk_prefix + its name, streamed from its
 * file (the coordinator checks it against its name). Returns 0 (also
 * when the file changed: the pool is told) or GP_E* after pool_fail.
 */
static int
send_chunk(struct gp_transfer_worker *w, struct chunk *c)
{
	struct gp_tree *u = w->pool->ctx;
	struct gp_http_response resp;
	struct gp_http_stream body;
	struct send_src src;
	struct chunk again;
	char path[512], text[256];
	int64_t done;
	int ret, tries;

	memset(&src, 0, sizeof(src));
	if (open_chunk(u, c, &src.fd, &src.off, &src.len) != 0)
		return changed(w->pool);
	memset(&body, 0, sizeof(body));
	body.read_body = send_read;
	body.body_len = (int64_t)src.len;
	body.arg = &src;
	snprintf(path, sizeof(path), "%s%s", u->chunk_prefix, c->name);
	for (tries = 1;; tries++) {
		src.pos = 0;
		ret = gp_http_request_stream(w->http, "PUT", path,
		    "application/octet-stream", CHUNK_TIMEOUT_MS, &body, &resp);
		if (ret == 0 && (resp.status == 200 || resp.status == 201)) {
			gp_http_response_fini(&resp);
			close(src.fd);
			done = atomic_fetch_add(&w->pool->bytes_sent,
			    (int64_t)src.len) + (int64_t)src.len;
			atomic_fetch_add(&w->pool->chunks_sent, 1);
			if (u->progress != NULL)
				u->progress(u->progress_arg, done,
				    u->send_total);
			return 0;
		}
		gp_http_error_text(&resp, text, sizeof(text));
		gp_http_response_fini(&resp);
		if (src.changed) {
			close(src.fd);
			return changed(w->pool);
		}
		if (ret == 0 && resp.status == 400) {
			/* Refused as corrupt: did the file change under us? */
			again = *c;
			if (name_chunk(u, &again, w->buf) != 0 ||
			    strcmp(again.name, c->name) != 0) {
				close(src.fd);
				return changed(w->pool);
			}
		}
		if ((ret == 0 && resp.status < 500) || tries >= CHUNK_TRIES ||
		    src.failed || atomic_load(&w->pool->stop)) {
			close(src.fd);
			if (src.failed) {
				pool_fail(w->pool, GP_EIO, "cannot read %.200s",
				    u->walk.files[c->file].path);
				return GP_EIO;
			}
			ret = ret != 0 ? ret : status_error(resp.status);
			pool_fail(w->pool, ret, "chunk upload: %s", text);
			return ret;
		}
		gp_debug("chunk upload retry try=%d error=%s", tries, text);
	}
}

static int
send_task(struct gp_transfer_worker *w, size_t task)
{
	struct gp_tree *u = w->pool->ctx;

	return send_chunk(w, &u->chunks[u->send[task]]);
}
/* One JSON request with retries on transport errors and 5xx. */
static int
json_call(struct gp_http_client *http, const char *method, const char *path,
    json_t *body, json_t **reply, long *status, char *err, size_t errlen)
{
	struct gp_http_response resp;
	char *text = NULL, etext[256];
	int ret, tries;

	*reply = NULL;
	*status = 0;
	if (body != NULL &&
	    (text = json_dumps(body, JSON_COMPACT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	for (tries = 1;; tries++) {
		ret = gp_http_request(http, method, path, text,
		    text != NULL ? strlen(text) : 0, NULL, JSON_TIMEOUT_MS,
		    &resp);
		if (ret == 0 && resp.status < 500)
			break;
		gp_http_error_text(&resp, etext, sizeof(etext));
		gp_http_response_fini(&resp);
		if (tries >= CHUNK_TRIES) {
			snprintf(err, errlen, "%s %s: %s", method, path, etext);
			free(text);
			return ret != 0 ? ret : GP_EIO;
		}
	}
	free(text);
	*status = resp.status;
	if (resp.status != 200 && resp.status != 201) {
		gp_http_error_text(&resp, etext, sizeof(etext));
		snprintf(err, errlen, "%s", etext);
		gp_http_response_fini(&resp);
		return status_error(*status);
	}
	*reply = json_loadb(resp.body, resp.body_len, 0, NULL);
	gp_http_response_fini(&resp);
	if (*reply == NULL) {
		snprintf(err, errlen, "%s %s: the answer is not JSON", method,
		    path);
		return GP_EPROTO;
	}
	return 0;
}

/*
 * One batch of UPLOAD_BATCH consecutive chunks: name each one, ask the
 * coordinator which of the names no other batch has asked about yet it
 * lacks, send those. Naming, asking and sending of different batches
 * overlap on the pool's threads, so the transfer does not wait for the
 * whole directory to be named. Each chunk is read once to be named and
 * once more as it is sent (from the page cache, a piece at a time); a
 * file that changes in between is caught by the coordinator (the content
 * no longer matches the name) and by the final check of every file's
 * mtime before the commit.
 */
static int
batch_task(struct gp_transfer_worker *w, size_t task)
{
	struct gp_tree *u = w->pool->ctx;
	size_t first = task * UPLOAD_BATCH, n = u->nchunks - first, i, k;
	json_t *names = NULL, *body = NULL, *reply = NULL, *v;
	char err[256];
	long status;
	int ret;

	if (n > UPLOAD_BATCH)
		n = UPLOAD_BATCH;
	for (i = first; i < first + n; i++) {
		struct chunk *c = &u->chunks[i];
		ret = name_chunk(u, c, w->buf);
		if (ret == GP_ECONFLICT)
			return changed(w->pool);
		if (ret != 0) {
			pool_fail(w->pool, ret, "cannot read %.200s: %s",
			    u->walk.files[c->file].path, strerror(errno));
			return ret;
		}
	}
	/* Names already asked about by a batch are that batch's to send. */
	if ((names = json_array()) == NULL)
		goto nomem;
	pthread_mutex_lock(&u->lock);
	for (i = first; i < first + n; i++) {
		if (json_object_get(u->claimed, u->chunks[i].name) != NULL)
			continue;
		if (json_object_set_new(u->claimed, u->chunks[i].name,
			json_integer((json_int_t)i)) != 0 ||
		    json_array_append_new(names,
			json_string(u->chunks[i].name)) != 0) {
			pthread_mutex_unlock(&u->lock);
			goto nomem;
		}
		u->chunks[i].send = 1;
	}
	pthread_mutex_unlock(&u->lock);
	if (json_array_size(names) == 0) {
		json_decref(names);
		return 0;
	}
	body = json_pack("{s:o}", "chunks", names);
	names = NULL;
	if (body == NULL)
		goto nomem;
	ret = json_call(w->http, "POST", u->missing_path, body, &reply,
	    &status, err, sizeof(err));
	json_decref(body);
	if (ret != 0) {
		pool_fail(w->pool, ret, "%s", err);
		return ret;
	}
	/* Send what is missing. */
	for (i = first; i < first + n && !atomic_load(&w->pool->stop); i++) {
		int wanted = 0;
		if (!u->chunks[i].send)
			continue;
		json_array_foreach(json_object_get(reply, "missing"), k, v)
		{
			if (json_is_string(v) &&
			    strcmp(json_string_value(v), u->chunks[i].name) ==
				0) {
				wanted = 1;
				break;
			}
		}
		if (!wanted)
			continue;
		if ((ret = send_chunk(w, &u->chunks[i])) != 0) {
			json_decref(reply);
			return ret;
		}
	}
	json_decref(reply);
	return 0;
nomem:
	json_decref(names);
	pool_fail(w->pool, GP_ENOMEM, "out of memory");
	return GP_ENOMEM;
}

/* Builds the chunk list from the walk. */
static int
plan_chunks(struct gp_tree *u)
{
	size_t i, n = 0;
	int64_t k, count;

	for (i = 0; i < u->walk.nfiles; i++)
		n += (size_t)gp_ckpt_chunk_count(u->walk.files[i].size);
	u->chunks = calloc(n ? n : 1, sizeof(*u->chunks));
	if (u->chunks == NULL)
		return GP_ENOMEM;
	n = 0;
	for (i = 0; i < u->walk.nfiles; i++) {
		count = gp_ckpt_chunk_count(u->walk.files[i].size);
		u->walk.files[i].first_chunk = n;
		for (k = 0; k < count; k++) {
			u->chunks[n].file = i;
			u->chunks[n].index = k;
			n++;
		}
	}
	u->nchunks = n;
	return 0;
}

/* 1 when every file still has the size, mtime and inode the walk saw. */
static int
unchanged_since_walk(struct gp_tree *u)
{
	struct stat st;
	size_t i;
	int fd;

	for (i = 0; i < u->walk.nfiles; i++) {
		const struct entry *e = &u->walk.files[i];
		fd = open_beneath(u->dirfd, e->path, O_RDONLY | O_NONBLOCK, 0,
		    0, 0, 0);
		if (fd < 0)
			return 0;
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
		    (int64_t)st.st_ino != e->ino || st.st_size != e->size ||
		    mtime_ns(&st) != e->mtime_ns) {
			close(fd);
			return 0;
		}
		close(fd);
	}
	return 1;
}

static json_t *
manifest_json(struct gp_tree *u, const char *label)
{
	json_t *files = json_array(), *m, *chunks;
	size_t i;
	int64_t k, count;

	if (files == NULL)
		return NULL;
	for (i = 0; i < u->walk.nfiles; i++) {
		const struct entry *e = &u->walk.files[i];
		chunks = json_array();
		count = gp_ckpt_chunk_count(e->size);
		for (k = 0; k < count && chunks != NULL; k++)
			json_array_append_new(chunks,
			    json_string(u->chunks[e->first_chunk + (size_t)k]
					    .name));
		if (chunks == NULL ||
		    json_array_append_new(files,
			json_pack("{s:s,s:I,s:i,s:o}", "path", e->path, "size",
			    (json_int_t)e->size, "mode", e->mode, "chunks",
			    chunks)) != 0) {
			json_decref(files);
			return NULL;
		}
	}
	if (label == NULL)
		return json_pack("{s:o}", "files", files);
	m = json_pack("{s:o,s:s}", "files", files, "label", label);
	return m;
}

/* Reads the marker's label through the walk's checks. */
static void
read_label(struct gp_tree *u, size_t marker, char *label)
{
	char buf[GP_CKPT_LABEL_LEN + 2];
	struct stat st;
	ssize_t n;
	int fd;

	label[0] = '\0';
	fd = open_beneath(u->dirfd, u->walk.files[marker].path,
	    O_RDONLY | O_NONBLOCK, 0, 0, 0, 0);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (n = pread(fd, buf, sizeof(buf), 0)) > 0)
		gp_ckpt_label(buf, (size_t)n, label);
	close(fd);
}

int
gp_transfer_status_error(long status)
{
	return status_error(status);
}

int
gp_transfer_json_call(struct gp_http_client *http, const char *method,
    const char *path, json_t *body, json_t **reply, long *status, char *err,
    size_t errlen)
{
	return json_call(http, method, path, body, reply, status, err,
	    errlen);
}

/* ---- any tree (transfer.h) ---- */

/* Opens a single regular file's tree: its directory and its name. */
static int
tree_single(struct gp_tree *t, const char *path, const struct stat *seen,
    char *err, size_t errlen)
{
	char dcopy[PATH_MAX], bcopy[PATH_MAX], *base;
	struct stat st;

	if (gp_strlcpy(dcopy, path, sizeof(dcopy)) >= sizeof(dcopy)) {
		snprintf(err, errlen, "path too long");
		return GP_EINVAL;
	}
	gp_strlcpy(bcopy, path, sizeof(bcopy));
	base = basename(bcopy);
	if (!gp_ckpt_path_valid(base) || strchr(base, '/') != NULL) {
		snprintf(err, errlen, "%.200s: not a usable file name", base);
		return GP_EINVAL;
	}
	t->dirfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0 ||
	    fstatat(t->dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISREG(st.st_mode) || st.st_ino != seen->st_ino ||
	    st.st_dev != seen->st_dev) {
		snprintf(err, errlen, "%.200s changed while it was opened",
		    path);
		return GP_ECONFLICT;
	}
	if (t->walk.only_uid != (uid_t)-1 && st.st_uid != t->walk.only_uid) {
		snprintf(err, errlen, "%.200s: owned by another user", path);
		return GP_EPERM;
	}
	if (walk_add(&t->walk, base, &st) != 0) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	return 0;
}

int
gp_tree_open(const char *path, int single_ok, uid_t only_uid,
    struct gp_tree **out, char *err, size_t errlen)
{
	struct gp_tree *t;
	struct stat st;
	int fd, ret;

	if ((t = calloc(1, sizeof(*t))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	t->dirfd = -1;
	t->walk.only_uid = only_uid;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "cannot open %.200s: %s", path,
		    errno == ELOOP ? "a symbolic link" : strerror(errno));
		ret = errno == ENOENT ? GP_ENOENT : GP_EIO;
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		t->dirfd = fd;
		fd = -1;
		if ((fd = dup(t->dirfd)) < 0) {
			snprintf(err, errlen, "dup: %s", strerror(errno));
			ret = GP_EIO;
			goto fail;
		}
		ret = walk_dir(fd, "", 0, &t->walk, err, errlen);
		fd = -1; /* consumed */
	} else if (S_ISREG(st.st_mode) && single_ok) {
		close(fd);
		fd = -1;
		ret = tree_single(t, path, &st, err, errlen);
	} else {
		snprintf(err, errlen, "%.200s: not a directory%s", path,
		    single_ok ? " or a regular file" : "");
		ret = GP_EINVAL;
	}
	if (ret == 0 && (ret = plan_chunks(t)) != 0)
		snprintf(err, errlen, "out of memory");
	if (ret != 0)
		goto fail;
	*out = t;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	gp_tree_free(t);
	return ret;
}

void
gp_tree_free(struct gp_tree *t)
{
	if (t == NULL)
		return;
	walk_free(&t->walk);
	free(t->chunks);
	free(t->send);
	if (t->dirfd >= 0)
		close(t->dirfd);
	free(t);
}

void
gp_tree_totals(const struct gp_tree *t, struct gp_transfer_stats *st)
{
	size_t i;

	st->files = (int64_t)t->walk.nfiles;
	st->bytes = 0;
	for (i = 0; i < t->walk.nfiles; i++)
		st->bytes += t->walk.files[i].size;
	st->chunks = (int64_t)t->nchunks;
	st->skipped = t->walk.skipped;
}

int
gp_tree_hash(struct gp_tree *t, int parallel, char *err, size_t errlen)
{
	struct pool p;
	int ret;

	memset(&p, 0, sizeof(p));
	pthread_mutex_init(&p.lock, NULL);
	p.ntasks = t->nchunks;
	p.run = hash_task;
	p.ctx = t;
	ret = pool_run(&p, parallel > 0 ? parallel : PARALLEL_DEFAULT);
	pthread_mutex_destroy(&p.lock);
	if (ret != 0) {
		snprintf(err, errlen, "%s", p.errtext);
		return ret;
	}
	if (atomic_load(&p.changed) || !unchanged_since_walk(t)) {
		snprintf(err, errlen, "a file changed while it was read");
		return GP_ECONFLICT;
	}
	return 0;
}

json_t *
gp_tree_manifest(const struct gp_tree *t)
{
	return manifest_json((struct gp_tree *)t, NULL);
}

int
gp_tree_send(struct gp_tree *t, const struct gp_transfer_peer *peer,
    const char *chunk_prefix, json_t *missing, struct gp_transfer_stats *st,
    char *err, size_t errlen)
{
	json_t *names = json_object(), *v, *idx;
	struct pool p;
	size_t i, k;
	int ret;

	if (names == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	for (i = 0; i < t->nchunks; i++)
		if (json_object_get(names, t->chunks[i].name) == NULL)
			json_object_set_new(names, t->chunks[i].name,
			    json_integer((json_int_t)i));
	free(t->send);
	t->nsend = 0;
	t->send = calloc(json_object_size(names) + 1, sizeof(*t->send));
	if (t->send == NULL) {
		json_decref(names);
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	json_array_foreach(missing, k, v)
	{
		idx = json_is_string(v) ? json_object_get(names,
		    json_string_value(v)) : NULL;
		if (idx == NULL)
			continue;
		t->send[t->nsend++] = (size_t)json_integer_value(idx);
		json_object_del(names, json_string_value(v));
	}
	json_decref(names);
	t->chunk_prefix = chunk_prefix;
	t->progress = peer->progress;
	t->progress_arg = peer->progress_arg;
	t->send_total = 0;
	for (k = 0; k < t->nsend; k++) {
		const struct chunk *c = &t->chunks[t->send[k]];
		int64_t left = t->walk.files[c->file].size -
		    c->index * GP_CKPT_CHUNK_SIZE;
		t->send_total += left < GP_CKPT_CHUNK_SIZE ? left
							   : GP_CKPT_CHUNK_SIZE;
	}
	memset(&p, 0, sizeof(p));
	pthread_mutex_init(&p.lock, NULL);
	p.url = peer->url;
	p.token = peer->token;
	p.ca_file = peer->ca_file;
	p.need_http = 1;
	p.ntasks = t->nsend;
	p.run = send_task;
	p.ctx = t;
	ret = pool_run(&p, peer->parallel > 0 ? peer->parallel
					      : PARALLEL_DEFAULT);
	pthread_mutex_destroy(&p.lock);
	st->bytes_sent += atomic_load(&p.bytes_sent);
	st->chunks_sent += atomic_load(&p.chunks_sent);
	if (ret != 0) {
		snprintf(err, errlen, "%s", p.errtext);
		return ret;
	}
	if (atomic_load(&p.changed)) {
		snprintf(err, errlen, "a file changed while it was sent");
		return GP_ECONFLICT;
	}
	return 0;
}

int
gp_ckpt_upload(const struct gp_ckpt_target *t, const char *dir,
    struct gp_ckpt_mark *mark, struct gp_ckpt_stats *st, char *err,
    size_t errlen)
{
	struct gp_tree u;
	struct pool p;
	struct gp_http_client *http = NULL;
	struct stat mst;
	char base[128], path[256], prefix[192];
	json_t *reply = NULL, *m = NULL;
	int64_t start = gp_mono_ms(), version, t_sent = 0;
	size_t i, marker = SIZE_MAX;
	long status;
	int ret, fd;

	memset(st, 0, sizeof(*st));
	memset(&u, 0, sizeof(u));
	u.dirfd = -1;
	u.walk.only_uid = (uid_t)-1;
	pthread_mutex_init(&u.lock, NULL);
	err[0] = '\0';
	snprintf(base, sizeof(base), "/v1/agent/jobs/%lld/%lld/checkpoint",
	    (long long)t->job_id, (long long)t->attempt);
	snprintf(prefix, sizeof(prefix), "%s/chunks/", base);
	u.chunk_prefix = prefix;
	u.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (u.dirfd < 0) {
		snprintf(err, errlen, "cannot open %.200s: %s", dir,
		    strerror(errno));
		ret = GP_EIO;
		goto out;
	}
	if (fstatat(u.dirfd, GP_CKPT_MARKER, &mst, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISREG(mst.st_mode)) {
		gp_strlcpy(st->skipped, "no COMPLETE marker",
		    sizeof(st->skipped));
		ret = 0;
		goto out;
	}
	if (mtime_ns(&mst) == mark->marker_mtime_ns &&
	    (int64_t)mst.st_ino == mark->marker_ino &&
	    mst.st_size == mark->marker_size) {
		gp_strlcpy(st->skipped, "unchanged", sizeof(st->skipped));
		ret = 0;
		goto out;
	}
	/* Walk: record every file's (size, mtime, inode). */
	fd = dup(u.dirfd);
	if (fd < 0) {
		ret = GP_EIO;
		snprintf(err, errlen, "dup: %s", strerror(errno));
		goto out;
	}
	if ((ret = walk_dir(fd, "", 0, &u.walk, err, errlen)) != 0)
		goto out;
	for (i = 0; i < u.walk.nfiles; i++)
		if (strcmp(u.walk.files[i].path, GP_CKPT_MARKER) == 0)
			marker = i;
	if (marker == SIZE_MAX) {
		gp_strlcpy(st->skipped, "no COMPLETE marker",
		    sizeof(st->skipped));
		goto out;
	}
	for (i = 0; i < u.walk.nfiles; i++) {
		if (u.walk.files[i].mtime_ns >
		    u.walk.files[marker].mtime_ns) {
			/* The job is writing its next version. */
			gp_debug("checkpoint file newer than COMPLETE job=%lld "
				 "path=%.200s",
			    (long long)t->job_id, u.walk.files[i].path);
			gp_strlcpy(st->skipped, "changed while reading",
			    sizeof(st->skipped));
			goto out;
		}
	}
	read_label(&u, marker, st->label);
	if ((ret = plan_chunks(&u)) != 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* Name, ask about and send the chunks, batch by batch. */
	snprintf(path, sizeof(path), "%s/missing", base);
	u.missing_path = path;
	if ((u.claimed = json_object()) == NULL) {
		ret = GP_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	memset(&p, 0, sizeof(p));
	pthread_mutex_init(&p.lock, NULL);
	p.url = t->url;
	p.token = t->token;
	p.ca_file = t->ca_file;
	p.need_http = 1;
	p.ntasks = (u.nchunks + UPLOAD_BATCH - 1) / UPLOAD_BATCH;
	p.run = batch_task;
	p.ctx = &u;
	ret = pool_run(&p, t->parallel > 0 ? t->parallel : PARALLEL_DEFAULT);
	pthread_mutex_destroy(&p.lock);
	st->bytes_sent = atomic_load(&p.bytes_sent);
	st->chunks_sent = atomic_load(&p.chunks_sent);
	if (ret != 0) {
		snprintf(err, errlen, "%s", p.errtext);
		goto out;
	}
	/* Every file as the walk saw it, all along: the version is whole. */
	if (atomic_load(&p.changed) || !unchanged_since_walk(&u)) {
		gp_strlcpy(st->skipped, "changed while reading",
		    sizeof(st->skipped));
		goto out;
	}
	t_sent = gp_mono_ms();
	/* Commit. */
	http = gp_http_client_new(t->url, t->token, t->ca_file);
	if (http == NULL || (m = manifest_json(&u, st->label)) == NULL) {
		ret = GP_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	snprintf(path, sizeof(path), "%s/commit", base);
	ret = json_call(http, "POST", path, m, &reply, &status, err, errlen);
	if (ret != 0)
		goto out;
	version = json_integer_value(json_object_get(reply, "version"));
	if (version <= 0) {
		ret = GP_EPROTO;
		snprintf(err, errlen, "commit: no version in the answer");
		goto out;
	}
	st->version = version;
	gp_debug("checkpoint upload timing job=%lld transfer_ms=%lld "
		 "commit_ms=%lld",
	    (long long)t->job_id, (long long)(t_sent - start),
	    (long long)(gp_mono_ms() - t_sent));
	for (i = 0; i < u.walk.nfiles; i++)
		st->bytes += u.walk.files[i].size;
	mark->marker_mtime_ns = u.walk.files[marker].mtime_ns;
	mark->marker_ino = u.walk.files[marker].ino;
	mark->marker_size = u.walk.files[marker].size;
	mark->version = version;
	gp_info("checkpoint uploaded job=%lld attempt=%lld version=%lld "
		"files=%zu bytes=%lld sent=%lld",
	    (long long)t->job_id, (long long)t->attempt, (long long)version,
	    u.walk.nfiles, (long long)st->bytes, (long long)st->bytes_sent);
out:
	if (st->version == 0)
		for (i = 0; i < u.walk.nfiles; i++)
			st->bytes += u.walk.files[i].size;
	st->files = (int64_t)u.walk.nfiles;
	st->chunks = (int64_t)u.nchunks;
	st->elapsed_ms = gp_mono_ms() - start;
	json_decref(m);
	json_decref(reply);
	json_decref(u.claimed);
	pthread_mutex_destroy(&u.lock);
	gp_http_client_free(http);
	walk_free(&u.walk);
	free(u.chunks);
	if (u.dirfd >= 0)
		close(u.dirfd);
	return ret;
}

/* ---- download ---- */

struct fetch {
	int dirfd;
	json_t *files; /* the manifest's list */
	int64_t *inodes; /* of the files as created, to check each write */
	struct chunk *chunks;
	size_t nchunks;
	const char *chunk_prefix;
	/* Optional, after each chunk written: bytes so far of total. */
	void (*progress)(void *arg, int64_t done, int64_t total);
	void *progress_arg;
	int64_t total;
};

/*
 * A chunk being received: named and written into its file as it arrives,
 * straight from curl's buffer. (Through the page cache: on a VM whose
 * disk serves one request at a time, O_DIRECT here would put the
 * download's writes in line with the coordinator's reads of the same
 * chunks; bench/RESULTS.md.)
 */
struct fetch_dst {
	int fd;
	int64_t off;	  /* the chunk's place in its file */
	size_t want, got; /* bytes expected, received and written */
	gp_ckpt_hash_state hash;
	int failed;	  /* a write error (errno in err) */
	int err;
};

static int
fetch_write(void *arg, const char *data, size_t len)
{
	struct fetch_dst *d = arg;
	size_t done = 0;
	ssize_t n;

	if (d->got + len > d->want)
		return -1; /* longer than its place: corrupt */
	gp_ckpt_hash_update(&d->hash, data, len);
	while (done < len) {
		n = pwrite(d->fd, data + done, len - done,
		    d->off + (int64_t)(d->got + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			d->failed = 1;
			d->err = n < 0 ? errno : EIO;
			return -1;
		}
		done += (size_t)n;
	}
	d->got += len;
	return 0;
}

int
gp_transfer_get_chunk_into(struct gp_transfer_worker *w, const char *prefix,
    const char *cname, size_t want, int fd, int64_t off, const char *what)
{
	struct gp_http_response resp;
	struct gp_http_stream body;
	struct fetch_dst d;
	char url[512], name[GP_CKPT_NAME_HEX], text[256];
	int ret, tries;

	memset(&d, 0, sizeof(d));
	d.fd = fd;
	d.off = off;
	d.want = want;
	memset(&body, 0, sizeof(body));
	body.write_body = fetch_write;
	body.arg = &d;
	snprintf(url, sizeof(url), "%s%s", prefix, cname);
	for (tries = 1;; tries++) {
		d.got = 0;
		gp_ckpt_hash_init(&d.hash);
		ret = gp_http_request_stream(w->http, "GET", url, NULL,
		    CHUNK_TIMEOUT_MS, &body, &resp);
		if (d.failed) {
			gp_http_response_fini(&resp);
			pool_fail(w->pool, GP_EIO, "cannot write %.200s: %s",
			    what, strerror(d.err));
			return GP_EIO;
		}
		if (ret == 0 && resp.status == 200) {
			gp_ckpt_hash_final(&d.hash, name);
			if (d.got == d.want && strcmp(name, cname) == 0) {
				gp_http_response_fini(&resp);
				return 0;
			}
			ret = GP_EPROTO;
		}
		if (ret == GP_EPROTO)
			snprintf(text, sizeof(text),
			    "chunk %.16s... is corrupt (%zu bytes)", cname,
			    d.got);
		else
			gp_http_error_text(&resp, text, sizeof(text));
		gp_http_response_fini(&resp);
		if (ret == 0)
			ret = status_error(resp.status);
		if ((ret != GP_EPROTO && ret != GP_EIO && ret != GP_ECONN &&
			ret != GP_ETIMEDOUT) ||
		    tries >= CHUNK_TRIES || atomic_load(&w->pool->stop)) {
			pool_fail(w->pool, ret, "chunk download: %s", text);
			return ret;
		}
	}
}

static int
fetch_task(struct gp_transfer_worker *w, size_t task)
{
	struct fetch *f = w->pool->ctx;
	struct chunk *c = &f->chunks[task];
	json_t *file = json_array_get(f->files, c->file);
	const char *path = json_string_value(json_object_get(file, "path"));
	int64_t size = json_integer_value(json_object_get(file, "size"));
	int64_t off = c->index * GP_CKPT_CHUNK_SIZE, done;
	size_t want = (size_t)(size - off < GP_CKPT_CHUNK_SIZE
		? size - off
		: GP_CKPT_CHUNK_SIZE);
	struct stat sb;
	int ret, fd;

	/* The very file we created, not something put in its place. */
	fd = open_beneath(f->dirfd, path, O_WRONLY | O_NONBLOCK, 0, 0, 0, 0);
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
	    (int64_t)sb.st_ino != f->inodes[c->file]) {
		if (fd >= 0)
			close(fd);
		pool_fail(w->pool, GP_EIO, "cannot write %.200s: %s", path,
		    fd >= 0 ? "replaced" : strerror(errno));
		return GP_EIO;
	}
	ret = gp_transfer_get_chunk_into(w, f->chunk_prefix, c->name, want,
	    fd, off, path);
	close(fd);
	if (ret != 0)
		return ret;
	done = atomic_fetch_add(&w->pool->bytes_sent, (int64_t)want) +
	    (int64_t)want;
	atomic_fetch_add(&w->pool->chunks_sent, 1);
	if (f->progress != NULL)
		f->progress(f->progress_arg, done, f->total);
	return 0;
}

/* Removes everything beneath dirfd (what a failed download wrote). */
static void
clear_dir(int dirfd)
{
	struct dirent *d;
	struct stat st;
	DIR *dir;
	int fd, sub;

	if ((fd = dup(dirfd)) < 0)
		return;
	if ((dir = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	rewinddir(dir);
	while ((d = readdir(dir)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) {
			sub = openat(dirfd, d->d_name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				clear_dir(sub);
				close(sub);
			}
			unlinkat(dirfd, d->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(dirfd, d->d_name, 0);
		}
	}
	closedir(dir);
}

/*
 * Download order: the k-th chunk of every file before the (k+1)-th, so
 * that parallel writers mostly write different files (writes to one file
 * serialise on its inode lock).
 */
static int
cmp_spread(const void *a, const void *b)
{
	const struct chunk *x = a, *y = b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return x->file < y->file ? -1 : x->file > y->file;
}

static int
dir_is_empty(int dirfd)
{
	struct dirent *d;
	DIR *dir;
	int fd, empty = 1;

	if ((fd = dup(dirfd)) < 0)
		return 0;
	if ((dir = fdopendir(fd)) == NULL) {
		close(fd);
		return 0;
	}
	while ((d = readdir(dir)) != NULL)
		if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0)
			empty = 0;
	closedir(dir);
	return empty;
}

/*
 * Creates the files of manifest m (checked; tot its totals) beneath dirfd
 * and fetches their chunks. On failure what was written is left for the
 * caller to clear. OUT: *bytes_sent, *chunks_sent.
 */
static int
fetch_into(const struct gp_transfer_peer *peer, int dirfd, json_t *m,
    const struct gp_ckpt_totals *tot, const char *prefix, uid_t uid,
    gid_t gid, int64_t *bytes_sent, int64_t *chunks_sent, char *err,
    size_t errlen)
{
	struct fetch f;
	struct pool p;
	struct stat mst;
	json_t *file, *chunks, *c;
	int64_t size, mode;
	size_t i, k, n;
	int ret, fd;

	memset(&f, 0, sizeof(f));
	f.dirfd = dirfd;
	f.chunk_prefix = prefix;
	f.progress = peer->progress;
	f.progress_arg = peer->progress_arg;
	f.total = tot->bytes;
	f.files = json_object_get(m, "files");
	f.chunks = calloc((size_t)tot->chunks + 1, sizeof(*f.chunks));
	f.inodes = calloc((size_t)tot->files + 1, sizeof(*f.inodes));
	if (f.chunks == NULL || f.inodes == NULL) {
		ret = GP_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* Create the tree: directories, then every file at its size. */
	n = 0;
	json_array_foreach(f.files, i, file)
	{
		size = json_integer_value(json_object_get(file, "size"));
		mode = json_integer_value(json_object_get(file, "mode"));
		fd = open_beneath(f.dirfd,
		    json_string_value(json_object_get(file, "path")),
		    O_WRONLY | O_CREAT | O_EXCL, 0600, 1, uid, gid);
		if (fd < 0 || fchown(fd, uid, gid) != 0 ||
		    fchmod(fd, (mode_t)((mode & 0755) | 0600)) != 0 ||
		    ftruncate(fd, size) != 0 || fstat(fd, &mst) != 0) {
			snprintf(err, errlen, "cannot create %.200s: %s",
			    json_string_value(json_object_get(file, "path")),
			    strerror(errno));
			if (fd >= 0)
				close(fd);
			ret = GP_EIO;
			goto out;
		}
		f.inodes[i] = (int64_t)mst.st_ino;
		close(fd);
		chunks = json_object_get(file, "chunks");
		json_array_foreach(chunks, k, c)
		{
			f.chunks[n].file = i;
			f.chunks[n].index = (int64_t)k;
			gp_strlcpy(f.chunks[n].name, json_string_value(c),
			    sizeof(f.chunks[n].name));
			n++;
		}
	}
	f.nchunks = n;
	qsort(f.chunks, f.nchunks, sizeof(*f.chunks), cmp_spread);
	memset(&p, 0, sizeof(p));
	pthread_mutex_init(&p.lock, NULL);
	p.url = peer->url;
	p.token = peer->token;
	p.ca_file = peer->ca_file;
	p.need_http = 1;
	p.ntasks = f.nchunks;
	p.run = fetch_task;
	p.ctx = &f;
	ret = pool_run(&p,
	    peer->parallel > 0 ? peer->parallel : PARALLEL_DEFAULT);
	pthread_mutex_destroy(&p.lock);
	*bytes_sent = atomic_load(&p.bytes_sent);
	*chunks_sent = atomic_load(&p.chunks_sent);
	if (ret != 0)
		snprintf(err, errlen, "%s", p.errtext);
out:
	free(f.chunks);
	free(f.inodes);
	return ret;
}

/* Opens dir for a fetch: it must exist and be empty. Returns fd or -1. */
static int
open_empty_dir(const char *dir, int *ret, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "cannot open %.200s: %s", dir,
		    strerror(errno));
		*ret = GP_EIO;
		return -1;
	}
	if (!dir_is_empty(fd)) {
		snprintf(err, errlen, "%.200s is not empty", dir);
		*ret = GP_EINVAL;
		close(fd);
		return -1;
	}
	return fd;
}

int
gp_transfer_fetch(const struct gp_transfer_peer *peer, json_t *manifest,
    const char *chunk_prefix, const char *dir, uid_t uid, gid_t gid,
    struct gp_transfer_stats *st, char *err, size_t errlen)
{
	struct gp_ckpt_totals tot;
	int64_t start = gp_mono_ms();
	int ret, dirfd;

	memset(st, 0, sizeof(*st));
	err[0] = '\0';
	if ((dirfd = open_empty_dir(dir, &ret, err, errlen)) < 0)
		return ret;
	if ((ret = gp_ckpt_manifest_check(manifest, 0, 1, &tot, err,
	    errlen)) == 0)
		ret = fetch_into(peer, dirfd, manifest, &tot, chunk_prefix, uid,
		    gid, &st->bytes_sent, &st->chunks_sent, err, errlen);
	if (ret != 0) {
		clear_dir(dirfd);
	} else {
		st->files = tot.files;
		st->bytes = tot.bytes;
		st->chunks = tot.chunks;
	}
	st->elapsed_ms = gp_mono_ms() - start;
	close(dirfd);
	return ret;
}

int
gp_ckpt_fetch(const struct gp_ckpt_source *src, const char *dir, uid_t uid,
    gid_t gid, struct gp_ckpt_mark *mark, struct gp_ckpt_stats *st,
    char *err, size_t errlen)
{
	struct gp_transfer_peer peer;
	struct gp_http_client *http = NULL;
	struct gp_ckpt_totals tot;
	struct stat mst;
	json_t *m = NULL;
	const char *label;
	int64_t start = gp_mono_ms(), version;
	long status;
	int ret, fd, dirfd, wrote = 0;

	memset(st, 0, sizeof(*st));
	err[0] = '\0';
	if ((dirfd = open_empty_dir(dir, &ret, err, errlen)) < 0)
		return ret;
	if ((http = gp_http_client_new(src->url, src->token, src->ca_file)) ==
	    NULL) {
		ret = GP_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ret = json_call(http, "GET", src->manifest_path, NULL, &m, &status,
	    err, errlen);
	if (ret == GP_ENOENT && status == 404) {
		/* No checkpoint yet: start from scratch. */
		err[0] = '\0';
		ret = 0;
		goto out;
	}
	if (ret != 0)
		goto out;
	if ((ret = gp_ckpt_manifest_check(m, 0, 1, &tot, err, errlen)) != 0)
		goto out;
	version = json_integer_value(json_object_get(m, "version"));
	if (version <= 0) {
		ret = GP_EPROTO;
		snprintf(err, errlen, "manifest without a version");
		goto out;
	}
	wrote = 1;
	peer.url = src->url;
	peer.token = src->token;
	peer.ca_file = src->ca_file;
	peer.parallel = src->parallel;
	peer.progress = src->progress;
	peer.progress_arg = src->progress_arg;
	ret = fetch_into(&peer, dirfd, m, &tot, src->chunk_prefix, uid, gid,
	    &st->bytes_sent, &st->chunks_sent, err, errlen);
	if (ret != 0)
		goto out;
	/*
	 * The marker is touched last so that it is the newest file, as a
	 * job's own save leaves it; *mark then says "unchanged".
	 */
	memset(mark, 0, sizeof(*mark));
	fd = open_beneath(dirfd, GP_CKPT_MARKER, O_RDONLY | O_NONBLOCK, 0, 0,
	    0, 0);
	if (fd >= 0) {
		if (futimens(fd, NULL) == 0 && fstat(fd, &mst) == 0 &&
		    S_ISREG(mst.st_mode)) {
			mark->marker_mtime_ns = mtime_ns(&mst);
			mark->marker_ino = (int64_t)mst.st_ino;
			mark->marker_size = mst.st_size;
		}
		close(fd);
	}
	mark->version = version;
	st->version = version;
	st->files = tot.files;
	st->bytes = tot.bytes;
	st->chunks = tot.chunks;
	label = json_string_value(json_object_get(m, "label"));
	gp_strlcpy(st->label, label != NULL ? label : "", sizeof(st->label));
	wrote = 0;
out:
	if (wrote)
		clear_dir(dirfd);
	st->elapsed_ms = gp_mono_ms() - start;
	json_decref(m);
	gp_http_client_free(http);
	close(dirfd);
	return ret;
}

int
gp_ckpt_download(const struct gp_ckpt_target *t, const char *dir, uid_t uid,
    gid_t gid, struct gp_ckpt_mark *mark, struct gp_ckpt_stats *st,
    char *err, size_t errlen)
{
	struct gp_ckpt_source src;
	char manifest[128], prefix[160];
	int ret;

	snprintf(manifest, sizeof(manifest),
	    "/v1/agent/jobs/%lld/%lld/checkpoint", (long long)t->job_id,
	    (long long)t->attempt);
	snprintf(prefix, sizeof(prefix), "%s/chunks/", manifest);
	memset(&src, 0, sizeof(src));
	src.url = t->url;
	src.token = t->token;
	src.ca_file = t->ca_file;
	src.manifest_path = manifest;
	src.chunk_prefix = prefix;
	src.parallel = t->parallel;
	ret = gp_ckpt_fetch(&src, dir, uid, gid, mark, st, err, errlen);
	if (ret == 0 && st->version > 0)
		gp_info("checkpoint restored job=%lld attempt=%lld "
			"version=%lld files=%lld bytes=%lld",
		    (long long)t->job_id, (long long)t->attempt,
		    (long long)st->version, (long long)st->files,
		    (long long)st->bytes);
	return ret;
}
