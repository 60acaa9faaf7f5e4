/*
 * datacache.c: the provider's cache of data set versions (datacache.h).
 *
 * Layout under the cache directory (mode 0700: a job reaches a version
 * only through its read-only mount, never through this path):
 *   sets/<owner>+<name>@<version>/manifest.json  the version's manifest;
 *                                                 its mtime is the LRU time
 *   sets/<owner>+<name>@<version>/tree/          the files, read-only
 *   sets/<key>.partial/                           a version being built
 * ('+' and '@' never occur in names, so keys are unique and never "." or
 * "..".) A version is built under .partial, synced, and renamed into
 * place: a version directory that exists is whole. A run that finds
 * .partial directories (a crash mid-build) removes them.
 *
 * Accounting: each version counts its full size against the cap, even
 * when some of its files are hard links into another version (so the
 * real disk use is at most what is counted).
 */
#include "agent/datacache.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "gp.h"
#include "jobspec.h"
#include "log.h"
#include "util.h"

#define KEY_LEN           (2 * GP_NAME_MAX + 32)
#define MANIFEST_FILE_MAX (64u << 20)

enum entry_state {
	ENTRY_BUILDING,
	ENTRY_READY
};

struct entry {
	char key[KEY_LEN];
	enum entry_state state;
	int refs; /* jobs holding it, and builds reading from it */
	int64_t bytes, files;
	int64_t last_used;  /* ms since the epoch */
	json_t *files_list; /* the manifest's "files" (READY) */
	char digest[65];    /* of the manifest's files */
	struct entry *next;
};

#define DIR_MAX 2048 /* the cache directory's path: room for the rest */

struct gp_datacache {
	char dir[DIR_MAX];
	int64_t max;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* an entry finished building or was dropped */
	struct entry *entries;
	int64_t bytes;   /* of every entry, building ones included */
	int64_t fetched; /* bytes fetched since start */
};

/* ---- the eviction rule ---- */

int
gp_datacache_plan(const struct gp_datacache_view *e, size_t n, int64_t cap,
    int64_t need, size_t *victims, size_t *nvictims)
{
	int64_t total = 0, freed = 0;
	size_t i, j, k, ncand = 0;

	*nvictims = 0;
	for (i = 0; i < n; i++)
		total += e[i].bytes;
	if (need > cap)
		return GP_ETOOBIG;
	if (total + need <= cap)
		return 0;
	/* Unused entries, least recently used first (insertion sort). */
	for (i = 0; i < n; i++) {
		if (e[i].in_use)
			continue;
		for (j = ncand;
		     j > 0 && e[victims[j - 1]].last_used > e[i].last_used; j--)
			victims[j] = victims[j - 1];
		victims[j] = i;
		ncand++;
	}
	for (k = 0; k < ncand && total - freed + need > cap; k++)
		freed += e[victims[k]].bytes;
	if (total - freed + need > cap)
		return GP_ETOOBIG;
	*nvictims = k;
	return 0;
}

/* ---- helpers ---- */

static void
entry_path(const struct gp_datacache *c, const char *key, const char *sub,
    char *out, size_t len)
{
	snprintf(out, len, "%s/sets/%s%s%s", c->dir, key, sub[0] ? "/" : "",
	    sub);
}

static void
make_key(const char *owner, const char *name, int64_t version, char *key)
{
	snprintf(key, KEY_LEN, "%s+%s@%lld", owner, name, (long long)version);
}

/* The BLAKE2b hex of a manifest's files list, written in one form. */
static int
files_digest(json_t *files, char out[65])
{
	unsigned char hash[32];
	char *text = json_dumps(files, JSON_COMPACT | JSON_SORT_KEYS);

	if (text == NULL)
		return GP_ENOMEM;
	crypto_generichash(hash, sizeof(hash), (unsigned char *)text,
	    strlen(text), NULL, 0);
	sodium_bin2hex(out, 65, hash, sizeof(hash));
	free(text);
	return 0;
}

static struct entry *
find(struct gp_datacache *c, const char *key)
{
	struct entry *e;

	for (e = c->entries; e != NULL; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static void
unlink_entry(struct gp_datacache *c, struct entry *gone)
{
	struct entry **pp;

	for (pp = &c->entries; *pp != NULL; pp = &(*pp)->next)
		if (*pp == gone) {
			*pp = gone->next;
			break;
		}
	c->bytes -= gone->bytes;
	json_decref(gone->files_list);
	free(gone);
}

/*
 * Makes room for need bytes: evicts the least recently used unused
 * versions (lock held). OUT: *doomed, keys whose directories to remove
 * after unlocking (malloc'd array of malloc'd strings). Returns 0 or
 * GP_ETOOBIG.
 */
static int
make_room(struct gp_datacache *c, int64_t need, char ***doomed, size_t *ndoomed)
{
	struct gp_datacache_view *v;
	struct entry *e, **es;
	size_t n = 0, i, *victims, nv = 0;
	int ret;

	*doomed = NULL;
	*ndoomed = 0;
	for (e = c->entries; e != NULL; e = e->next)
		n++;
	v = calloc(n + 1, sizeof(*v));
	es = calloc(n + 1, sizeof(*es));
	victims = calloc(n + 1, sizeof(*victims));
	*doomed = calloc(n + 1, sizeof(char *));
	if (v == NULL || es == NULL || victims == NULL || *doomed == NULL) {
		ret = GP_ENOMEM;
		goto out;
	}
	for (i = 0, e = c->entries; e != NULL; e = e->next, i++) {
		es[i] = e;
		v[i].bytes = e->bytes;
		v[i].last_used = e->last_used;
		v[i].in_use = e->refs > 0 || e->state != ENTRY_READY;
	}
	ret = gp_datacache_plan(v, n, c->max, need, victims, &nv);
	for (i = 0; ret == 0 && i < nv; i++) {
		e = es[victims[i]];
		gp_info("data cache evicts set=%s bytes=%lld", e->key,
		    (long long)e->bytes);
		if (((*doomed)[(*ndoomed)++] = strdup(e->key)) == NULL)
			(*ndoomed)--;
		unlink_entry(c, e);
	}
out:
	free(v);
	free(es);
	free(victims);
	return ret;
}

static void
remove_doomed(struct gp_datacache *c, char **doomed, size_t n)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < n; i++) {
		entry_path(c, doomed[i], "", path, sizeof(path));
		if (gp_remove_tree(path) != 0)
			gp_warn("data cache: cannot remove %s", path);
		free(doomed[i]);
	}
	free(doomed);
}

/* ---- building a version ---- */

/* Where a chunk can be read locally: a file of a cached version. */
struct local {
	char *path; /* absolute */
	int64_t offset;
};

struct build_chunk {
	size_t file;
	int64_t index;
	char name[GP_CKPT_NAME_HEX];
	size_t want;
	int local; /* index into locals, -1: fetch it */
};

struct build {
	const char *tree; /* the new version's tree (partial) */
	json_t *files;
	struct build_chunk *chunks;
	size_t nchunks;
	struct local *locals;
	size_t nlocals;
	const char *chunk_prefix;
	_Atomic int64_t copied;
};

/* Reads a local chunk into buf and checks its name. 1 when good. */
static int
read_local(const struct local *l, const char *name, size_t want, char *buf)
{
	char got[GP_CKPT_NAME_HEX];
	size_t done = 0;
	ssize_t r;
	int fd;

	if ((fd = open(l->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return 0;
	while (done < want) {
		r = pread(fd, buf + done, want - done,
		    l->offset + (int64_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	close(fd);
	if (done != want)
		return 0;
	gp_ckpt_chunk_name(buf, want, got);
	return strcmp(got, name) == 0;
}

static int
build_task(struct gp_transfer_worker *w, size_t task, void *ctx)
{
	struct build *b = ctx;
	struct build_chunk *c = &b->chunks[task];
	json_t *file = json_array_get(b->files, c->file);
	const char *rel = json_string_value(json_object_get(file, "path"));
	char *buf = gp_transfer_buf(w), path[PATH_MAX];
	int fd, ret = 0, local = 0;

	snprintf(path, sizeof(path), "%s/%s", b->tree, rel);
	fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		gp_transfer_fail(w, GP_EIO, "cannot write %.200s: %s", rel,
		    strerror(errno));
		return GP_EIO;
	}
	if (c->local >= 0 &&
	    read_local(&b->locals[c->local], c->name, c->want, buf)) {
		local = 1;
		if (pwrite(fd, buf, c->want, c->index * GP_CKPT_CHUNK_SIZE) !=
		    (ssize_t)c->want) {
			gp_transfer_fail(w, GP_EIO, "cannot write %.200s: %s",
			    rel, strerror(errno));
			ret = GP_EIO;
		}
	} else {
		/* Written as it arrives, verified against its name. */
		ret = gp_transfer_get_chunk_into(w, b->chunk_prefix, c->name,
		    c->want, fd, c->index * GP_CKPT_CHUNK_SIZE, rel);
	}
	close(fd);
	if (ret != 0)
		return ret;
	if (local)
		atomic_fetch_add(&b->copied, (int64_t)c->want);
	else
		gp_transfer_count(w, (int64_t)c->want);
	return 0;
}

/* A file's identity for hard links: size, mode and chunk names. */
static int
file_signature(json_t *f, char out[65])
{
	json_t *sig = json_pack("{s:O,s:O,s:O}", "size",
	    json_object_get(f, "size"), "mode", json_object_get(f, "mode"),
	    "chunks", json_object_get(f, "chunks"));
	int ret;

	if (sig == NULL)
		return GP_ENOMEM;
	ret = files_digest(sig, out);
	json_decref(sig);
	return ret;
}

/*
 * The cached versions to read from (lock held): every chunk and whole
 * file of the new manifest found in a READY version. Each version used is
 * held (refs) until unpin_sources. OUT: *chunks (name -> [local index])
 * and *whole (signature -> absolute path), *locals.
 */
static int
find_sources(struct gp_datacache *c, json_t *files, json_t **chunks,
    json_t **whole, struct local **locals, size_t *nlocals,
    struct entry ***pinned, size_t *npinned)
{
	json_t *want = json_object(), *sigs = json_object(), *f, *ch;
	struct entry *e;
	char sig[65], tree[DIR_MAX + 256], path[PATH_MAX];
	size_t i, k, n = 0, cap = 0, np = 0;
	int used;

	*chunks = json_object();
	*whole = json_object();
	*locals = NULL;
	*nlocals = 0;
	for (e = c->entries; e != NULL; e = e->next)
		np++;
	*pinned = calloc(np + 1, sizeof(**pinned));
	*npinned = 0;
	if (want == NULL || sigs == NULL || *chunks == NULL || *whole == NULL ||
	    *pinned == NULL)
		goto nomem;
	json_array_foreach(files, i, f)
	{
		json_array_foreach(json_object_get(f, "chunks"), k, ch)
		    json_object_set(want, json_string_value(ch), json_true());
		if (file_signature(f, sig) != 0)
			goto nomem;
		json_object_set(sigs, sig, json_true());
	}
	for (e = c->entries; e != NULL; e = e->next) {
		if (e->state != ENTRY_READY || e->files_list == NULL)
			continue;
		entry_path(c, e->key, "tree", tree, sizeof(tree));
		used = 0;
		json_array_foreach(e->files_list, i, f)
		{
			const char *rel =
			    json_string_value(json_object_get(f, "path"));

			snprintf(path, sizeof(path), "%s/%s", tree, rel);
			if (file_signature(f, sig) == 0 &&
			    json_object_get(sigs, sig) != NULL &&
			    json_object_get(*whole, sig) == NULL) {
				json_object_set_new(*whole, sig,
				    json_string(path));
				used = 1;
			}
			json_array_foreach(json_object_get(f, "chunks"), k, ch)
			{
				const char *name = json_string_value(ch);

				if (json_object_get(want, name) == NULL ||
				    json_object_get(*chunks, name) != NULL)
					continue;
				if (n == cap) {
					struct local *l = realloc(*locals,
					    (cap ? cap * 2 : 64) * sizeof(*l));
					if (l == NULL)
						goto nomem;
					*locals = l;
					cap = cap ? cap * 2 : 64;
				}
				(*locals)[n].path = strdup(path);
				(*locals)[n].offset =
				    (int64_t)k * GP_CKPT_CHUNK_SIZE;
				if ((*locals)[n].path == NULL)
					goto nomem;
				json_object_set_new(*chunks, name,
				    json_integer((json_int_t)n));
				n++;
				*nlocals = n;
				used = 1;
			}
		}
		if (used) {
			e->refs++;
			(*pinned)[(*npinned)++] = e;
		}
	}
	json_decref(want);
	json_decref(sigs);
	return 0;
nomem:
	json_decref(want);
	json_decref(sigs);
	return GP_ENOMEM;
}

static void
free_locals(struct local *l, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(l[i].path);
	free(l);
}

/*
 * Builds the version of manifest m into dir/sets/key (absent), from the
 * sources found and the coordinator. OUT: st->fetched, copied, linked.
 */
static int
build(struct gp_datacache *c, const struct gp_datacache_source *src,
    const char *key, json_t *chunks, json_t *whole, struct local *locals,
    size_t nlocals, struct gp_datacache_stats *st, char *err, size_t errlen)
{
	char partial[DIR_MAX + 256], final[PATH_MAX], tree[DIR_MAX + 300];
	char path[PATH_MAX], parent[PATH_MAX], sig[65], mpath[DIR_MAX + 300];
	struct build b;
	json_t *files = json_object_get(src->manifest, "files"), *f, *ch, *l;
	int64_t size, mode, want, fetched = 0;
	size_t i, k, n = 0, total = 0;
	char *text = NULL;
	int ret = GP_EIO, fd, linked, dfd;

	memset(&b, 0, sizeof(b));
	snprintf(partial, sizeof(partial), "%s/sets/%s.partial", c->dir, key);
	entry_path(c, key, "", final, sizeof(final));
	snprintf(tree, sizeof(tree), "%s/tree", partial);
	gp_remove_tree(partial);
	if (mkdir(partial, 0755) != 0 || mkdir(tree, 0755) != 0) {
		snprintf(err, errlen, "cannot create %s: %s", tree,
		    strerror(errno));
		goto out;
	}
	json_array_foreach(files, i, f) total +=
	    json_array_size(json_object_get(f, "chunks"));
	if ((b.chunks = calloc(total + 1, sizeof(*b.chunks))) == NULL) {
		ret = GP_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* The tree: whole files linked, the others created at their size. */
	json_array_foreach(files, i, f)
	{
		const char *rel = json_string_value(json_object_get(f, "path"));

		size = json_integer_value(json_object_get(f, "size"));
		mode = json_integer_value(json_object_get(f, "mode"));
		snprintf(path, sizeof(path), "%s/%s", tree, rel);
		gp_strlcpy(parent, path, sizeof(parent));
		if (gp_mkdir_p(dirname(parent), 0755) != 0) {
			snprintf(err, errlen,
			    "cannot create the directory of "
			    "%.200s: %s",
			    rel, strerror(errno));
			goto out;
		}
		linked = 0;
		if (file_signature(f, sig) == 0 &&
		    (l = json_object_get(whole, sig)) != NULL &&
		    link(json_string_value(l), path) == 0) {
			st->linked += size;
			linked = 1;
		}
		if (linked)
			continue;
		fd = open(path,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, size) != 0 ||
		    fchmod(fd, (mode_t)((mode & 0555) | 0444)) != 0) {
			snprintf(err, errlen, "cannot create %.200s: %s", rel,
			    strerror(errno));
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
		json_array_foreach(json_object_get(f, "chunks"), k, ch)
		{
			struct build_chunk *bc = &b.chunks[n++];

			bc->file = i;
			bc->index = (int64_t)k;
			gp_strlcpy(bc->name, json_string_value(ch),
			    sizeof(bc->name));
			want = size - (int64_t)k * GP_CKPT_CHUNK_SIZE;
			bc->want = (size_t)(want > GP_CKPT_CHUNK_SIZE
			        ? GP_CKPT_CHUNK_SIZE
			        : want);
			l = json_object_get(chunks, bc->name);
			bc->local = l != NULL &&
			        json_integer_value(l) < (json_int_t)nlocals
			    ? (int)json_integer_value(l)
			    : -1;
		}
	}
	b.tree = tree;
	b.files = files;
	b.nchunks = n;
	b.locals = locals;
	b.nlocals = nlocals;
	b.chunk_prefix = src->chunk_prefix;
	ret = gp_transfer_run(src->peer, 1, n, build_task, &b, &fetched, err,
	    errlen);
	st->fetched = fetched;
	st->copied = atomic_load(&b.copied);
	if (ret != 0)
		goto out;
	/* The manifest beside the tree, then durable, then in place. */
	snprintf(mpath, sizeof(mpath), "%s/manifest.json", partial);
	if ((text = json_dumps(src->manifest, JSON_COMPACT)) == NULL ||
	    gp_write_file(mpath, text, strlen(text), 0600) != 0) {
		ret = GP_EIO;
		snprintf(err, errlen, "cannot write %s", mpath);
		goto out;
	}
	if ((dfd = open(partial, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		syncfs(dfd);
		close(dfd);
	}
	if (rename(partial, final) != 0) {
		ret = GP_EIO;
		snprintf(err, errlen, "cannot rename %s: %s", partial,
		    strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (ret != 0)
		gp_remove_tree(partial);
	free(text);
	free(b.chunks);
	return ret;
}

/* ---- the cache ---- */

int
gp_datacache_acquire(struct gp_datacache *c,
    const struct gp_datacache_source *src, char **tree,
    struct gp_datacache_stats *st, char *err, size_t errlen)
{
	char key[KEY_LEN], digest[65], path[PATH_MAX], need_s[32], max_s[32];
	struct gp_ckpt_totals tot;
	json_t *files, *chunks = NULL, *whole = NULL;
	struct local *locals = NULL;
	struct entry *e, **pinned = NULL;
	char **doomed = NULL;
	size_t nlocals = 0, npinned = 0, ndoomed = 0, i;
	int64_t start = gp_mono_ms();
	int ret;

	memset(st, 0, sizeof(*st));
	err[0] = '\0';
	if ((ret = gp_ckpt_manifest_check(src->manifest, 0, 1, &tot, err,
	         errlen)) != 0)
		return ret;
	files = json_object_get(src->manifest, "files");
	if (files_digest(files, digest) != 0) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	st->files = tot.files;
	st->bytes = tot.bytes;
	make_key(src->owner, src->name, src->version, key);
	entry_path(c, key, "tree", path, sizeof(path));
	pthread_mutex_lock(&c->lock);
	for (;;) {
		e = find(c, key);
		if (e == NULL)
			break;
		if (e->state == ENTRY_BUILDING) {
			/* Another job builds it: wait and share. */
			pthread_cond_wait(&c->cond, &c->lock);
			continue;
		}
		if (strcmp(e->digest, digest) == 0) {
			e->refs++;
			e->last_used = gp_now_ms();
			pthread_mutex_unlock(&c->lock);
			entry_path(c, key, "manifest.json", path, sizeof(path));
			utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
			entry_path(c, key, "tree", path, sizeof(path));
			st->cached = 1;
			st->elapsed_ms = gp_mono_ms() - start;
			if ((*tree = strdup(path)) == NULL) {
				gp_datacache_release(c, src->owner, src->name,
				    src->version);
				return GP_ENOMEM;
			}
			return 0;
		}
		/* Versions never change: this one is stale, rebuild it. */
		if (e->refs > 0) {
			pthread_mutex_unlock(&c->lock);
			snprintf(err, errlen,
			    "data cache: %s changed while "
			    "in use",
			    key);
			return GP_ECONFLICT;
		}
		gp_warn("data cache: stale version, rebuilding set=%s", key);
		ndoomed = 0;
		doomed = calloc(1, sizeof(char *));
		if (doomed != NULL && (doomed[0] = strdup(key)) != NULL)
			ndoomed = 1;
		unlink_entry(c, e);
		pthread_mutex_unlock(&c->lock);
		remove_doomed(c, doomed, ndoomed);
		pthread_mutex_lock(&c->lock);
	}
	gp_format_bytes(tot.bytes, need_s, sizeof(need_s));
	gp_format_bytes(c->max, max_s, sizeof(max_s));
	ret = make_room(c, tot.bytes, &doomed, &ndoomed);
	if (ret != 0) {
		pthread_mutex_unlock(&c->lock);
		remove_doomed(c, doomed, ndoomed);
		if (tot.bytes > c->max)
			snprintf(err, errlen,
			    "data set %s/%s@%lld is %s, more "
			    "than this provider's data cache holds (%s)",
			    src->owner, src->name, (long long)src->version,
			    need_s, max_s);
		else
			snprintf(err, errlen,
			    "no room for %s/%s@%lld (%s) in "
			    "the data cache (%s): the rest is in use by "
			    "running jobs",
			    src->owner, src->name, (long long)src->version,
			    need_s, max_s);
		return ret == GP_ENOMEM ? GP_ENOMEM : GP_ETOOBIG;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL) {
		pthread_mutex_unlock(&c->lock);
		remove_doomed(c, doomed, ndoomed);
		return GP_ENOMEM;
	}
	gp_strlcpy(e->key, key, sizeof(e->key));
	gp_strlcpy(e->digest, digest, sizeof(e->digest));
	e->state = ENTRY_BUILDING;
	e->refs = 1;
	e->bytes = tot.bytes;
	e->files = tot.files;
	e->next = c->entries;
	c->entries = e;
	c->bytes += e->bytes;
	ret = find_sources(c, files, &chunks, &whole, &locals, &nlocals,
	    &pinned, &npinned);
	pthread_mutex_unlock(&c->lock);
	remove_doomed(c, doomed, ndoomed);
	if (ret == 0)
		ret = build(c, src, key, chunks, whole, locals, nlocals, st,
		    err, errlen);
	else
		snprintf(err, errlen, "out of memory");
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < npinned; i++) {
		pinned[i]->refs--;
		pinned[i]->last_used = gp_now_ms();
	}
	c->fetched += st->fetched;
	if (ret == 0) {
		e->state = ENTRY_READY;
		e->last_used = gp_now_ms();
		e->files_list = json_incref(files);
	} else {
		unlink_entry(c, e);
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	json_decref(chunks);
	json_decref(whole);
	free_locals(locals, nlocals);
	free(pinned);
	st->elapsed_ms = gp_mono_ms() - start;
	if (ret != 0)
		return ret;
	if ((*tree = strdup(path)) == NULL) {
		gp_datacache_release(c, src->owner, src->name, src->version);
		return GP_ENOMEM;
	}
	return 0;
}

void
gp_datacache_release(struct gp_datacache *c, const char *owner,
    const char *name, int64_t version)
{
	char key[KEY_LEN];
	struct entry *e;

	make_key(owner, name, version, key);
	pthread_mutex_lock(&c->lock);
	if ((e = find(c, key)) != NULL && e->refs > 0) {
		e->refs--;
		e->last_used = gp_now_ms();
	}
	pthread_mutex_unlock(&c->lock);
}

json_t *
gp_datacache_status(struct gp_datacache *c)
{
	struct entry *e;
	int64_t n = 0, used = 0;
	json_t *o;

	pthread_mutex_lock(&c->lock);
	for (e = c->entries; e != NULL; e = e->next) {
		n++;
		if (e->refs > 0)
			used++;
	}
	o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I}", "dir", c->dir, "max_bytes",
	    (json_int_t)c->max, "bytes", (json_int_t)c->bytes, "versions",
	    (json_int_t)n, "in_use", (json_int_t)used, "fetched_bytes",
	    (json_int_t)c->fetched);
	pthread_mutex_unlock(&c->lock);
	return o;
}

/* Takes back a version a previous run left (dir/sets/<name>). */
static void
load_entry(struct gp_datacache *c, const char *name)
{
	char path[PATH_MAX], *text = NULL;
	struct gp_ckpt_totals tot;
	struct stat st;
	struct entry *e;
	json_t *m = NULL;
	size_t len;
	char err[200];

	entry_path(c, name, "manifest.json", path, sizeof(path));
	if (strlen(name) >= KEY_LEN || strchr(name, '+') == NULL ||
	    strchr(name, '@') == NULL || stat(path, &st) != 0 ||
	    gp_read_file(path, MANIFEST_FILE_MAX, &text, &len) != 0 ||
	    (m = json_loadb(text, len, 0, NULL)) == NULL ||
	    gp_ckpt_manifest_check(m, 0, 1, &tot, err, sizeof(err)) != 0 ||
	    (e = calloc(1, sizeof(*e))) == NULL) {
		entry_path(c, name, "", path, sizeof(path));
		gp_warn("data cache: removing unreadable %s", path);
		gp_remove_tree(path);
		free(text);
		json_decref(m);
		return;
	}
	gp_strlcpy(e->key, name, sizeof(e->key));
	e->state = ENTRY_READY;
	e->bytes = tot.bytes;
	e->files = tot.files;
	e->last_used =
	    (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	e->files_list = json_incref(json_object_get(m, "files"));
	files_digest(e->files_list, e->digest);
	e->next = c->entries;
	c->entries = e;
	c->bytes += e->bytes;
	free(text);
	json_decref(m);
}

struct gp_datacache *
gp_datacache_new(const char *dir, int64_t max_bytes, char *err, size_t errlen)
{
	struct gp_datacache *c;
	char sets[DIR_MAX + 16], path[PATH_MAX], **doomed = NULL;
	struct dirent *d;
	size_t ndoomed = 0, len;
	DIR *dh;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (gp_strlcpy(c->dir, dir, sizeof(c->dir)) >= sizeof(c->dir)) {
		snprintf(err, errlen, "data cache path longer than %d bytes",
		    DIR_MAX - 1);
		free(c);
		return NULL;
	}
	c->max = max_bytes;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	snprintf(sets, sizeof(sets), "%s/sets", dir);
	/* 0700: jobs see a version through its mount only. */
	if (gp_mkdir_p(sets, 0700) != 0 || chmod(dir, 0700) != 0 ||
	    chmod(sets, 0700) != 0) {
		snprintf(err, errlen, "cannot create %s: %s", sets,
		    strerror(errno));
		gp_datacache_free(c);
		return NULL;
	}
	if ((dh = opendir(sets)) != NULL) {
		while ((d = readdir(dh)) != NULL) {
			if (d->d_name[0] == '.' &&
			    (d->d_name[1] == '\0' ||
			        strcmp(d->d_name, "..") == 0))
				continue;
			len = strlen(d->d_name);
			if (len > 8 &&
			    strcmp(d->d_name + len - 8, ".partial") == 0) {
				snprintf(path, sizeof(path), "%s/%s", sets,
				    d->d_name);
				gp_remove_tree(path);
				continue;
			}
			load_entry(c, d->d_name);
		}
		closedir(dh);
	}
	if (c->bytes > c->max)
		make_room(c, 0, &doomed, &ndoomed);
	remove_doomed(c, doomed, ndoomed);
	gp_info("data cache dir=%s max_bytes=%lld bytes=%lld", dir,
	    (long long)c->max, (long long)c->bytes);
	return c;
}

void
gp_datacache_free(struct gp_datacache *c)
{
	if (c == NULL)
		return;
	while (c->entries != NULL)
		unlink_entry(c, c->entries);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}
