/*
 * image.c: the agent's image cache (image.h).
 *
 * Layout under the cache directory (0700, the agent's own):
 *   blobs/<hex>          manifests and configs, verified, small
 *   layers/<hex>/        unpacked layers, named by the compressed
 *                        layer's digest
 *   layers/<hex>.json    {"bytes": N}: written last, so a layer without
 *                        it is an interrupted unpack and is removed
 *   tmp/                 downloads and unpacks in progress, and evicted
 *                        layers on their way out
 *
 * Only what was verified enters blobs/ and layers/: a download goes to
 * tmp/, is checked against its digest and size, and is renamed in (or
 * unpacked from there). So a cache hit needs no transfer and no hashing.
 *
 * One mutex guards the table of layers; no network or disk work is done
 * holding it, except renames and the bookkeeping of eviction.
 */
#include "agent/image.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/policy.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "common/oci.h"
#include "util.h"

enum lstate {
	L_READY,
	L_FETCHING
};

struct layer {
	char hex[65];
	enum lstate state;
	int64_t bytes;     /* unpacked file data */
	int64_t last_used; /* wall clock ms */
	int refs;          /* jobs using it */
	struct layer *next;
};

struct gp_image_cache {
	char dir[PATH_MAX];
	int64_t max_bytes;
	struct gp_layer_limits lim;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a fetch ended */
	struct layer *layers;
	int64_t bytes;
	int64_t hits, misses, evictions, fetched_bytes;
};

struct gp_image_hold {
	int n;
	char hex[][65];
};

/* ---- the table (lock held) ---- */

static struct layer *
find(struct gp_image_cache *c, const char *hex)
{
	struct layer *l;

	for (l = c->layers; l != NULL; l = l->next)
		if (strcmp(l->hex, hex) == 0)
			return l;
	return NULL;
}

static void
unlink_layer(struct gp_image_cache *c, struct layer *gone)
{
	struct layer **pp;

	for (pp = &c->layers; *pp != NULL; pp = &(*pp)->next)
		if (*pp == gone) {
			*pp = gone->next;
			break;
		}
	free(gone);
}

/*
 * Evicts unused layers, least recently used first, until the cache holds
 * at most target bytes. Their directories are moved to tmp/ under the
 * lock and removed by the caller (OUT: *trash, a NULL-ended list).
 */
static void
evict_to(struct gp_image_cache *c, int64_t target, char ***trash)
{
	struct layer *l, *lru;
	char from[PATH_MAX + 80], to[PATH_MAX + 80], meta[PATH_MAX + 80];
	int n = 0;

	*trash = NULL;
	while (c->bytes > target) {
		lru = NULL;
		for (l = c->layers; l != NULL; l = l->next)
			if (l->state == L_READY && l->refs == 0 &&
			    (lru == NULL || l->last_used < lru->last_used))
				lru = l;
		if (lru == NULL)
			break;
		snprintf(from, sizeof(from), "%s/layers/%s", c->dir, lru->hex);
		snprintf(meta, sizeof(meta), "%s/layers/%s.json", c->dir,
		    lru->hex);
		snprintf(to, sizeof(to), "%s/tmp/evicted-%s-%lld", c->dir,
		    lru->hex, (long long)gp_mono_us());
		unlink(meta);
		if (rename(from, to) == 0) {
			char **t =
			    realloc(*trash, (size_t)(n + 2) * sizeof(*t));
			if (t != NULL) {
				*trash = t;
				t[n++] = strdup(to);
				t[n] = NULL;
			}
		} else
			gp_remove_tree(from);
		gp_info("image cache evicted layer=sha256:%.12s bytes=%lld "
		        "cache_bytes=%lld max_bytes=%lld",
		    lru->hex, (long long)lru->bytes,
		    (long long)(c->bytes - lru->bytes),
		    (long long)c->max_bytes);
		c->bytes -= lru->bytes;
		c->evictions++;
		unlink_layer(c, lru);
	}
}

static void
empty_trash(char **trash)
{
	int i;

	for (i = 0; trash != NULL && trash[i] != NULL; i++) {
		gp_remove_tree(trash[i]);
		free(trash[i]);
	}
	free(trash);
}

/* ---- opening ---- */

static int
load(struct gp_image_cache *c, char *err, size_t errlen)
{
	char dir[PATH_MAX + 16], path[PATH_MAX + 300], *data;
	struct dirent *d;
	struct stat st;
	DIR *dh;
	size_t len;

	snprintf(dir, sizeof(dir), "%s/layers", c->dir);
	if ((dh = opendir(dir)) == NULL)
		return gp_fail(err, errlen, GP_EIO, "%s: %s", dir,
		    strerror(errno));
	while ((d = readdir(dh)) != NULL) {
		size_t n = strlen(d->d_name);
		struct layer *l;
		json_t *meta;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (n == 64 + 5 && strcmp(d->d_name + 64, ".json") == 0) {
			/* Its directory must be there too. */
			snprintf(path, sizeof(path), "%s/%.64s", dir,
			    d->d_name);
			if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
				snprintf(path, sizeof(path), "%s/%s", dir,
				    d->d_name);
				unlink(path);
			}
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s.json", dir, d->d_name);
		data = NULL;
		meta = NULL;
		if (n == 64 && gp_read_file(path, 4096, &data, &len) == 0)
			meta = json_loadb(data, len, 0, NULL);
		free(data);
		if (!json_is_integer(json_object_get(meta, "bytes")) ||
		    stat(path, &st) != 0 ||
		    (l = calloc(1, sizeof(*l))) == NULL) {
			/* Interrupted, or not ours: gone. */
			json_decref(meta);
			snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
			gp_remove_tree(path);
			continue;
		}
		gp_strlcpy(l->hex, d->d_name, sizeof(l->hex));
		l->bytes = json_integer_value(json_object_get(meta, "bytes"));
		l->last_used = (int64_t)st.st_mtim.tv_sec * 1000 +
		    st.st_mtim.tv_nsec / 1000000;
		l->state = L_READY;
		l->next = c->layers;
		c->layers = l;
		c->bytes += l->bytes;
		json_decref(meta);
	}
	closedir(dh);
	return 0;
}

struct gp_image_cache *
gp_image_cache_new(const char *dir, int64_t max_bytes,
    const struct gp_layer_limits *lim, char *err, size_t errlen)
{
	struct gp_image_cache *c;
	char path[PATH_MAX + 16], **trash;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		gp_fail(err, errlen, GP_ENOMEM, "out of memory");
		return NULL;
	}
	gp_strlcpy(c->dir, dir, sizeof(c->dir));
	c->max_bytes = max_bytes;
	if (lim != NULL)
		c->lim = *lim;
	else
		gp_layer_limits_default(&c->lim);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	snprintf(path, sizeof(path), "%s/tmp", dir);
	gp_remove_tree(path);
	if (gp_mkdir_p(dir, 0700) != 0 || chmod(dir, 0700) != 0 ||
	    gp_mkdir_p(path, 0700) != 0) {
		gp_fail(err, errlen, GP_EIO, "cannot create %s: %s", path,
		    strerror(errno));
		gp_image_cache_free(c);
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/blobs", dir);
	if (gp_mkdir_p(path, 0700) != 0) {
		gp_fail(err, errlen, GP_EIO, "cannot create %s", path);
		gp_image_cache_free(c);
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/layers", dir);
	if (gp_mkdir_p(path, 0700) != 0 || load(c, err, errlen) != 0) {
		gp_image_cache_free(c);
		return NULL;
	}
	evict_to(c, c->max_bytes, &trash);
	empty_trash(trash);
	gp_info("image cache dir=%s layers_bytes=%lld max_bytes=%lld", dir,
	    (long long)c->bytes, (long long)c->max_bytes);
	return c;
}

void
gp_image_cache_free(struct gp_image_cache *c)
{
	if (c == NULL)
		return;
	while (c->layers != NULL)
		unlink_layer(c, c->layers);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void
gp_image_cache_stats(struct gp_image_cache *c, struct gp_image_cache_stats *o)
{
	struct layer *l;

	memset(o, 0, sizeof(*o));
	pthread_mutex_lock(&c->lock);
	for (l = c->layers; l != NULL; l = l->next) {
		if (l->state != L_READY)
			continue;
		o->layers++;
		o->in_use += l->refs > 0;
	}
	o->bytes = c->bytes;
	o->max_bytes = c->max_bytes;
	o->hits = c->hits;
	o->misses = c->misses;
	o->evictions = c->evictions;
	o->fetched_bytes = c->fetched_bytes;
	pthread_mutex_unlock(&c->lock);
}

/* ---- fetching ---- */

struct fetch {
	struct gp_http_client *http;
	const struct gp_image_source *src;
	int64_t fetched;
};

struct sink {
	int fd;             /* to a file, or -1 */
	struct gp_buf *buf; /* or into memory */
	crypto_hash_sha256_state hash;
	int64_t got;
};

static int
sink_write(void *arg, const char *data, size_t len)
{
	struct sink *s = arg;

	crypto_hash_sha256_update(&s->hash, (const unsigned char *)data, len);
	s->got += (int64_t)len;
	if (s->buf != NULL)
		return gp_buf_append(s->buf, data, len);
	return gp_write_all(s->fd, data, len);
}

/*
 * GETs the job's blob d (size and digest as the manifest says) into fd
 * or buf, verifying both. what names it in messages ("layer 2").
 */
static int
fetch_blob(struct fetch *f, const struct gp_oci_descriptor *d, int fd,
    struct gp_buf *buf, const char *what, char *why, size_t whylen)
{
	struct gp_http_response resp;
	struct sink s;
	unsigned char hash[32];
	char path[200], got[GP_OCI_DIGEST_SIZE], text[300];
	int ret;

	memset(&s, 0, sizeof(s));
	s.fd = fd;
	s.buf = buf;
	crypto_hash_sha256_init(&s.hash);
	snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/image/blobs/%s",
	    (long long)f->src->job_id, (long long)f->src->attempt, d->digest);
	ret = gp_http_download(f->http, path, d->size, sink_write, &s, &resp);
	f->fetched += s.got;
	if (ret == GP_ETOOBIG) {
		gp_http_response_fini(&resp);
		return gp_fail(why, whylen, GP_EINVAL,
		    "tampered image: the "
		    "coordinator sent more than the %lld bytes the manifest "
		    "gives %s %s",
		    (long long)d->size, what, d->digest);
	}
	if (ret != 0) {
		gp_http_error_text(&resp, text, sizeof(text));
		gp_http_response_fini(&resp);
		return gp_fail(why, whylen, ret == GP_EIO ? GP_EIO : GP_ECONN,
		    "cannot fetch %s %s: %s", what, d->digest, text);
	}
	if (resp.status != 200) {
		gp_http_error_text(&resp, text, sizeof(text));
		gp_http_response_fini(&resp);
		return gp_fail(why, whylen,
		    resp.status == 404 ? GP_EINVAL : GP_ECONN,
		    "cannot fetch %s %s: %s", what, d->digest, text);
	}
	gp_http_response_fini(&resp);
	if (s.got != d->size)
		return gp_fail(why, whylen, GP_EINVAL,
		    "tampered image: %s %s "
		    "arrived with %lld bytes, the manifest says %lld",
		    what, d->digest, (long long)s.got, (long long)d->size);
	crypto_hash_sha256_final(&s.hash, hash);
	gp_oci_digest_format(hash, got);
	if (strcmp(got, d->digest) != 0)
		return gp_fail(why, whylen, GP_EINVAL,
		    "tampered image: %s %s "
		    "failed its digest check (the bytes hash to %s)",
		    what, d->digest, got);
	return 0;
}

/*
 * A small verified blob (manifest, config): from blobs/ if cached (and
 * still hashing right), else fetched and kept. OUT: *data (caller
 * frees), *len.
 */
static int
small_blob(struct gp_image_cache *c, struct fetch *f,
    const struct gp_oci_descriptor *d, const char *what, char **data,
    size_t *len, char *why, size_t whylen)
{
	char path[PATH_MAX + 100], got[GP_OCI_DIGEST_SIZE];
	struct gp_buf b = {0};
	int ret;

	snprintf(path, sizeof(path), "%s/blobs/%s", c->dir, d->digest + 7);
	if (gp_read_file(path, GP_OCI_JSON_MAX, data, len) == 0) {
		gp_oci_digest_of(*data, *len, got);
		if (strcmp(got, d->digest) == 0 &&
		    (d->size <= 0 || (int64_t)*len == d->size))
			return 0;
		free(*data);
		unlink(path);
	}
	if ((ret = fetch_blob(f, d, -1, &b, what, why, whylen)) != 0) {
		gp_buf_free(&b);
		return ret;
	}
	if (gp_buf_append(&b, "", 0) != 0) {
		gp_buf_free(&b);
		return gp_fail(why, whylen, GP_ENOMEM, "out of memory");
	}
	gp_write_file(path, b.data, b.len, 0600);
	*data = b.data;
	*len = b.len;
	return 0;
}

/* Fetches and unpacks layer d into layers/<hex>. Lock not held. */
static int
fetch_layer(struct gp_image_cache *c, struct fetch *f,
    const struct gp_oci_descriptor *d, int index, int64_t *bytes, char *why,
    size_t whylen)
{
	char blob[PATH_MAX + 100], dir[PATH_MAX + 100], final[PATH_MAX + 100];
	char meta[PATH_MAX + 120], what[32], err[600], text[64];
	struct gp_layer_stats st;
	int fd, ret;

	snprintf(what, sizeof(what), "layer %d", index);
	snprintf(blob, sizeof(blob), "%s/tmp/%.64s.blob.XXXXXX", c->dir,
	    d->digest + 7);
	if ((fd = mkostemp(blob, O_CLOEXEC)) < 0)
		return gp_fail(why, whylen, GP_EIO, "cannot create %s: %s",
		    blob, strerror(errno));
	ret = fetch_blob(f, d, fd, NULL, what, why, whylen);
	close(fd);
	if (ret != 0) {
		unlink(blob);
		return ret;
	}
	snprintf(dir, sizeof(dir), "%s/tmp/%.64s.dir.%lld", c->dir,
	    d->digest + 7, (long long)gp_mono_us());
	ret = gp_layer_unpack(blob, dir, &c->lim, &st, err, sizeof(err));
	unlink(blob);
	if (ret != 0)
		return gp_fail(why, whylen, ret == GP_EIO ? GP_EIO : GP_EINVAL,
		    "%s %s refused: %s", what, d->digest, err);
	snprintf(final, sizeof(final), "%s/layers/%.64s", c->dir,
	    d->digest + 7);
	snprintf(meta, sizeof(meta), "%s.json", final);
	snprintf(text, sizeof(text), "{\"bytes\":%lld}\n", (long long)st.bytes);
	gp_remove_tree(final);
	if (rename(dir, final) != 0 ||
	    gp_write_file(meta, text, strlen(text), 0600) != 0) {
		gp_remove_tree(dir);
		gp_remove_tree(final);
		return gp_fail(why, whylen, GP_EIO, "cannot store %s: %s", what,
		    strerror(errno));
	}
	gp_debug("image layer unpacked layer=%s entries=%lld bytes=%lld "
	         "whiteouts=%d",
	    d->digest, (long long)st.entries, (long long)st.bytes,
	    st.whiteouts);
	*bytes = st.bytes;
	return 0;
}

/*
 * Takes a reference on layer d: a hit, or a fetch (once, whoever asks
 * first; others wait for it). OUT: *hit.
 */
static int
acquire(struct gp_image_cache *c, struct fetch *f,
    const struct gp_oci_descriptor *d, int index, int *hit, char *why,
    size_t whylen)
{
	const char *hex = d->digest + 7;
	struct layer *l;
	char **trash = NULL, meta[PATH_MAX + 100];
	int64_t bytes = 0;
	int ret;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		l = find(c, hex);
		if (l == NULL || l->state == L_READY)
			break;
		pthread_cond_wait(&c->cond, &c->lock);
	}
	if (l != NULL) {
		l->refs++;
		l->last_used = gp_now_ms();
		c->hits++;
		pthread_mutex_unlock(&c->lock);
		snprintf(meta, sizeof(meta), "%s/layers/%s.json", c->dir, hex);
		utimensat(AT_FDCWD, meta, NULL, 0);
		*hit = 1;
		return 0;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		pthread_mutex_unlock(&c->lock);
		return gp_fail(why, whylen, GP_ENOMEM, "out of memory");
	}
	gp_strlcpy(l->hex, hex, sizeof(l->hex));
	l->state = L_FETCHING;
	l->next = c->layers;
	c->layers = l;
	/* Room for it, as far as its compressed size tells. */
	evict_to(c, c->max_bytes - d->size, &trash);
	pthread_mutex_unlock(&c->lock);
	empty_trash(trash);
	*hit = 0;
	ret = fetch_layer(c, f, d, index, &bytes, why, whylen);
	pthread_mutex_lock(&c->lock);
	if (ret != 0) {
		unlink_layer(c, l);
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return ret;
	}
	l->state = L_READY;
	l->bytes = bytes;
	l->refs = 1;
	l->last_used = gp_now_ms();
	c->bytes += bytes;
	c->misses++;
	c->fetched_bytes += d->size;
	/* Over the cap: unused layers go now; a job's stay until released. */
	evict_to(c, c->max_bytes, &trash);
	if (c->bytes > c->max_bytes)
		gp_warn("image cache over its cap while jobs use it "
		        "cache_bytes=%lld max_bytes=%lld",
		    (long long)c->bytes, (long long)c->max_bytes);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	empty_trash(trash);
	return 0;
}

void
gp_image_release(struct gp_image_cache *c, struct gp_image_hold *hold)
{
	struct layer *l;
	char **trash = NULL;
	int i;

	if (c == NULL || hold == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < hold->n; i++)
		if ((l = find(c, hold->hex[i])) != NULL && l->refs > 0) {
			l->refs--;
			l->last_used = gp_now_ms();
		}
	evict_to(c, c->max_bytes, &trash);
	pthread_mutex_unlock(&c->lock);
	empty_trash(trash);
	free(hold);
}

/* ---- prepare ---- */

static const char *
machine_arch(void)
{
	static struct utsname u;

	if (uname(&u) != 0)
		return "amd64";
	if (strcmp(u.machine, "x86_64") == 0)
		return "amd64";
	if (strcmp(u.machine, "aarch64") == 0)
		return "arm64";
	return u.machine;
}

/* The coordinator's signatures for the job's image; checks the digest. */
static int
fetch_signatures(struct fetch *f, const char *digest, json_t **sigs, char *why,
    size_t whylen)
{
	struct gp_http_response resp;
	char path[128], text[300];
	json_t *root;
	int ret;

	*sigs = NULL;
	snprintf(path, sizeof(path), "/v1/agent/jobs/%lld/%lld/image",
	    (long long)f->src->job_id, (long long)f->src->attempt);
	ret =
	    gp_http_request(f->http, "GET", path, NULL, 0, NULL, 60000, &resp);
	if (ret != 0 || resp.status != 200) {
		gp_http_error_text(&resp, text, sizeof(text));
		ret = resp.status == 409 ? GP_ECONFLICT : GP_ECONN;
		gp_http_response_fini(&resp);
		return gp_fail(why, whylen, ret,
		    "cannot ask the coordinator "
		    "about the image: %s",
		    text);
	}
	root = json_loadb(resp.body, resp.body_len, 0, NULL);
	gp_http_response_fini(&resp);
	if (!json_is_string(json_object_get(root, "digest")) ||
	    strcmp(json_string_value(json_object_get(root, "digest")),
	        digest) != 0 ||
	    !json_is_array(json_object_get(root, "signatures")) ||
	    json_array_size(json_object_get(root, "signatures")) > 64) {
		json_decref(root);
		return gp_fail(why, whylen, GP_EINVAL,
		    "the coordinator's answer "
		    "about image %s is not for that image",
		    digest);
	}
	*sigs = json_incref(json_object_get(root, "signatures"));
	json_decref(root);
	return 0;
}

/* Copies a NULL-ended string list (NULL stays NULL). */
static char **
strv_take(char ***from)
{
	char **v = *from;

	*from = NULL;
	return v;
}

int
gp_image_prepare(struct gp_image_cache *c, const struct gp_image_source *src,
    const char *digest, const struct gp_image_trust *trust,
    struct gp_container_image **imgp, struct gp_image_hold **holdp,
    struct gp_image_prepared *st, char *why, size_t whylen)
{
	struct gp_oci_manifest m;
	struct gp_oci_image_config cfg;
	struct gp_container_image *img = NULL;
	struct gp_image_hold *hold = NULL;
	struct fetch f;
	json_t *sigs = NULL;
	char *data = NULL, path[PATH_MAX + 100];
	size_t len;
	int64_t t0 = gp_mono_ms(), need = 0;
	int ret, i, hit = 0;

	*imgp = NULL;
	*holdp = NULL;
	memset(st, 0, sizeof(*st));
	memset(&m, 0, sizeof(m));
	memset(&cfg, 0, sizeof(cfg));
	memset(&f, 0, sizeof(f));
	if (!gp_oci_digest_valid(digest))
		return gp_fail(why, whylen, GP_EINVAL, "not an image digest");
	if (trust->images == GP_IMAGES_NONE)
		return gp_fail(why, whylen, GP_EPERM,
		    "this provider runs no "
		    "container images (its policy says images = none)");
	f.src = src;
	if ((f.http = gp_http_client_new(src->url, src->token, src->ca_file)) ==
	    NULL)
		return gp_fail(why, whylen, GP_ENOMEM, "out of memory");
	/* 1. The owner's trust, checked here, whatever the coordinator says. */
	if ((ret = fetch_signatures(&f, digest, &sigs, why, whylen)) != 0)
		goto out;
	if (trust->images == GP_IMAGES_SIGNED) {
		ret = gp_sign_check(digest, sigs, trust->keys, trust->nkeys,
		    st->trusted_by, sizeof(st->trusted_by));
		if (ret != 0) {
			ret = gp_fail(why, whylen, GP_EPERM, "%s",
			    st->trusted_by);
			goto out;
		}
	} else
		gp_strlcpy(st->trusted_by, "any image allowed (images = any)",
		    sizeof(st->trusted_by));
	/* 2. The manifest: it must hash to the pinned digest. */
	snprintf(path, sizeof(path), "%s/blobs/%s", c->dir, digest + 7);
	if (gp_read_file(path, GP_OCI_JSON_MAX, &data, &len) == 0) {
		char got[GP_OCI_DIGEST_SIZE];
		gp_oci_digest_of(data, len, got);
		if (strcmp(got, digest) != 0) {
			free(data);
			data = NULL;
			unlink(path);
		}
	} else
		data = NULL;
	if (data == NULL) {
		struct gp_buf b = {0};
		/* Its size is unknown: fetch up to the cap, then check. */
		struct gp_http_response resp;
		struct sink s;
		unsigned char hash[32];
		char got[GP_OCI_DIGEST_SIZE], p2[200], text[300];

		memset(&s, 0, sizeof(s));
		s.buf = &b;
		crypto_hash_sha256_init(&s.hash);
		snprintf(p2, sizeof(p2),
		    "/v1/agent/jobs/%lld/%lld/image/"
		    "blobs/%s",
		    (long long)src->job_id, (long long)src->attempt, digest);
		ret = gp_http_download(f.http, p2, GP_OCI_JSON_MAX, sink_write,
		    &s, &resp);
		f.fetched += s.got;
		if (ret != 0 || resp.status != 200) {
			gp_http_error_text(&resp, text, sizeof(text));
			gp_http_response_fini(&resp);
			gp_buf_free(&b);
			ret = gp_fail(why, whylen,
			    ret == GP_ETOOBIG ? GP_EINVAL : GP_ECONN,
			    "cannot fetch the manifest %s: %s", digest,
			    ret == GP_ETOOBIG ? "larger than 4 MiB" : text);
			goto out;
		}
		gp_http_response_fini(&resp);
		crypto_hash_sha256_final(&s.hash, hash);
		gp_oci_digest_format(hash, got);
		if (strcmp(got, digest) != 0) {
			gp_buf_free(&b);
			ret = gp_fail(why, whylen, GP_EINVAL,
			    "tampered image: the "
			    "manifest failed its digest check (it hashes to "
			    "%s, the job is pinned to %s)",
			    got, digest);
			goto out;
		}
		gp_buf_append(&b, "", 0);
		gp_write_file(path, b.data, b.len, 0600);
		data = b.data;
		len = b.len;
	}
	if (gp_oci_manifest_decode(data, len, &m, why, whylen) != 0) {
		ret = GP_EINVAL;
		goto out;
	}
	free(data);
	data = NULL;
	/* 3. The config. */
	if ((ret = small_blob(c, &f, &m.config, "config", &data, &len, why,
	         whylen)) != 0)
		goto out;
	if (gp_oci_config_decode(data, len, &cfg, why, whylen) != 0) {
		ret = GP_EINVAL;
		goto out;
	}
	if ((cfg.os[0] != '\0' && strcmp(cfg.os, "linux") != 0) ||
	    (cfg.arch[0] != '\0' && strcmp(cfg.arch, machine_arch()) != 0)) {
		ret = gp_fail(why, whylen, GP_EINVAL,
		    "the image is for %s/%s; "
		    "this provider runs linux/%s",
		    cfg.os, cfg.arch, machine_arch());
		goto out;
	}
	if (cfg.ndiff_ids != 0 && cfg.ndiff_ids != m.nlayers) {
		ret = gp_fail(why, whylen, GP_EINVAL,
		    "bad image: the config lists "
		    "%d layers, the manifest %d",
		    cfg.ndiff_ids, m.nlayers);
		goto out;
	}
	for (i = 0; i < m.nlayers; i++)
		need += m.layers[i].size;
	if (need > c->max_bytes) {
		ret = gp_fail(why, whylen, GP_ETOOBIG,
		    "the image's layers (%lld "
		    "bytes compressed) do not fit the image cache "
		    "(--image-cache-max %lld)",
		    (long long)need, (long long)c->max_bytes);
		goto out;
	}
	/* 4. Every layer: cached, or fetched, verified and unpacked. */
	hold = calloc(1, sizeof(*hold) + (size_t)m.nlayers * 65);
	img = calloc(1, sizeof(*img));
	if (hold == NULL || img == NULL ||
	    (img->layers = calloc((size_t)m.nlayers + 1, sizeof(char *))) ==
	        NULL ||
	    (img->digest = strdup(digest)) == NULL) {
		ret = gp_fail(why, whylen, GP_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < m.nlayers; i++) {
		ret = acquire(c, &f, &m.layers[i], i, &hit, why, whylen);
		if (ret != 0)
			goto out;
		gp_strlcpy(hold->hex[hold->n++], m.layers[i].digest + 7, 65);
		st->cached += hit;
		st->fetched += !hit;
		snprintf(path, sizeof(path), "%s/layers/%s", c->dir,
		    m.layers[i].digest + 7);
		if ((img->layers[i] = strdup(path)) == NULL) {
			ret = gp_fail(why, whylen, GP_ENOMEM, "out of memory");
			goto out;
		}
	}
	st->layers = m.nlayers;
	img->env = strv_take(&cfg.env);
	if (img->env == NULL)
		img->env = calloc(1, sizeof(char *));
	img->entrypoint = strv_take(&cfg.entrypoint);
	img->cmd = strv_take(&cfg.cmd);
	img->workdir = cfg.workdir;
	cfg.workdir = NULL;
	img->user = cfg.user;
	cfg.user = NULL;
	ret = 0;
out:
	st->fetched_bytes = f.fetched;
	st->elapsed_ms = gp_mono_ms() - t0;
	free(data);
	json_decref(sigs);
	gp_oci_manifest_fini(&m);
	gp_oci_config_fini(&cfg);
	gp_http_client_free(f.http);
	if (ret != 0) {
		gp_image_release(c, hold);
		gp_container_image_free(img);
		return ret;
	}
	*imgp = img;
	*holdp = hold;
	return 0;
}
