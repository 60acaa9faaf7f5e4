/*
 * image_archive.c: reading an image out of an archive for `gpupool image
 * import` (image.h): an OCI image layout or `docker save` output, as a
 * tar, plain or compressed (libarchive). The archive is read in passes
 * and never unpacked: a first pass lists the entries (refusing unsafe
 * ones) and keeps the small ones (metadata, manifests, configs) in
 * memory; later passes stream the layers' bytes to whoever wants them.
 */
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/image.h"
#include "gp.h"

#define SMALL_MAX       GP_OCI_JSON_MAX /* kept in memory up to this */
#define SMALL_TOTAL_MAX (256LL << 20)   /* ... and this much in all */
#define ENTRIES_MAX     100000
#define LINK_HOPS_MAX   8
#define BLOCK           (256 * 1024)

struct entry {
	char *path;
	int64_t size;
	char *data; /* small regular files */
	size_t len;
	char *link; /* symlink or hard link: the entry it stands for */
};

struct listing {
	struct entry *e;
	size_t n, cap;
	int64_t small_total;
};

static struct archive *
open_archive(const char *path, int *fd, char *err, size_t errlen)
{
	struct archive *a;

	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		gp_fail(err, errlen, GP_EIO, "cannot open %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	if ((a = archive_read_new()) == NULL) {
		close(*fd);
		gp_fail(err, errlen, GP_ENOMEM, "out of memory");
		return NULL;
	}
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	if (archive_read_open_fd(a, *fd, BLOCK) != ARCHIVE_OK) {
		gp_fail(err, errlen, GP_EINVAL,
		    "%s: not a tar archive (plain or "
		    "compressed): %s",
		    path,
		    archive_error_string(a) ? archive_error_string(a) : "?");
		archive_read_free(a);
		close(*fd);
		return NULL;
	}
	return a;
}

/*
 * Resolves a symbolic link's target (relative to the link's directory)
 * to an archive path, ".." included; refuses one that climbs out.
 */
static int
resolve_symlink(const char *linkpath, const char *target, char *out,
    size_t outlen)
{
	char buf[8300], *parts[2048], *p, *save = NULL;
	size_t n = 0, i, len = 0;
	const char *slash = strrchr(linkpath, '/');

	if (target[0] == '/' || strlen(target) > 4096)
		return GP_EINVAL;
	snprintf(buf, sizeof(buf), "%.*s%s%s",
	    slash != NULL ? (int)(slash - linkpath) : 0, linkpath,
	    slash != NULL ? "/" : "", target);
	for (p = strtok_r(buf, "/", &save); p != NULL;
	     p = strtok_r(NULL, "/", &save)) {
		if (strcmp(p, ".") == 0)
			continue;
		if (strcmp(p, "..") == 0) {
			if (n == 0)
				return GP_EINVAL;
			n--;
			continue;
		}
		if (n == GP_ARRAY_LEN(parts))
			return GP_EINVAL;
		parts[n++] = p;
	}
	if (n == 0 || outlen == 0)
		return GP_EINVAL;
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		size_t l = strlen(parts[i]);
		if (len + l + 2 > outlen)
			return GP_EINVAL;
		if (i > 0)
			out[len++] = '/';
		memcpy(out + len, parts[i], l);
		len += l;
		out[len] = '\0';
	}
	return 0;
}

static void
listing_free(struct listing *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		free(l->e[i].path);
		free(l->e[i].data);
		free(l->e[i].link);
	}
	free(l->e);
	memset(l, 0, sizeof(*l));
}

/* Metadata worth keeping in memory. */
static int
maybe_metadata(const char *path, int64_t size)
{
	size_t n = strlen(path);

	if (size > SMALL_MAX)
		return 0;
	return strcmp(path, "index.json") == 0 ||
	    strcmp(path, "oci-layout") == 0 ||
	    strcmp(path, "manifest.json") == 0 ||
	    (n > 5 && strcmp(path + n - 5, ".json") == 0) ||
	    strncmp(path, "blobs/", 6) == 0;
}

/* Pass 1: every entry, checked; small ones kept. */
static int
list_entries(const char *path, struct listing *l, char *err, size_t errlen)
{
	struct archive *a;
	struct archive_entry *e;
	char clean[4200], why[300];
	const char *name, *target;
	unsigned type;
	int fd, r, ret = 0;

	if ((a = open_archive(path, &fd, err, errlen)) == NULL)
		return GP_EINVAL;
	for (;;) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			ret = gp_fail(err, errlen, GP_EINVAL, "%s: %s", path,
			    archive_error_string(a) ? archive_error_string(a)
			                            : "read error");
			break;
		}
		name = archive_entry_pathname(e);
		if (gp_archive_path_clean(name, clean, sizeof(clean), why,
		        sizeof(why)) != 0) {
			ret = gp_fail(err, errlen, GP_EINVAL,
			    "%s: entry "
			    "'%.200s': %s",
			    path, name ? name : "", why);
			break;
		}
		type = archive_entry_filetype(e);
		if (type == AE_IFDIR || clean[0] == '\0')
			continue;
		if (l->n == ENTRIES_MAX) {
			ret = gp_fail(err, errlen, GP_ETOOBIG,
			    "%s: more than %d "
			    "entries: not an image archive",
			    path, ENTRIES_MAX);
			break;
		}
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 64;
			struct entry *p = realloc(l->e, cap * sizeof(*p));
			if (p == NULL) {
				ret = gp_fail(err, errlen, GP_ENOMEM,
				    "out of memory");
				break;
			}
			l->e = p;
			l->cap = cap;
		}
		memset(&l->e[l->n], 0, sizeof(l->e[l->n]));
		if ((l->e[l->n].path = strdup(clean)) == NULL) {
			ret = gp_fail(err, errlen, GP_ENOMEM, "out of memory");
			break;
		}
		l->n++;
		if ((target = archive_entry_hardlink(e)) != NULL) {
			char t[4200];
			if (gp_archive_path_clean(target, t, sizeof(t), why,
			        sizeof(why)) != 0 ||
			    t[0] == '\0') {
				ret = gp_fail(err, errlen, GP_EINVAL,
				    "%s: entry "
				    "'%.200s': hard link target escapes the "
				    "archive",
				    path, clean);
				break;
			}
			l->e[l->n - 1].link = strdup(t);
			continue;
		}
		if (type == AE_IFLNK) {
			char t[4200];
			target = archive_entry_symlink(e);
			if (target == NULL ||
			    resolve_symlink(clean, target, t, sizeof(t)) != 0) {
				ret = gp_fail(err, errlen, GP_EINVAL,
				    "%s: entry "
				    "'%.200s': symbolic link to '%.200s' "
				    "escapes the archive",
				    path, clean, target ? target : "");
				break;
			}
			l->e[l->n - 1].link = strdup(t);
			continue;
		}
		if (type != AE_IFREG) {
			ret = gp_fail(err, errlen, GP_EINVAL,
			    "%s: entry '%.200s': "
			    "%s are not allowed in an image archive",
			    path, clean,
			    type == AE_IFCHR || type == AE_IFBLK
			        ? "device nodes"
			        : type == AE_IFIFO ? "fifos"
			                           : "special files");
			break;
		}
		l->e[l->n - 1].size = archive_entry_size(e);
		if (maybe_metadata(clean, l->e[l->n - 1].size) &&
		    l->small_total + l->e[l->n - 1].size <= SMALL_TOTAL_MAX) {
			int64_t size = l->e[l->n - 1].size;
			char *buf = malloc((size_t)size + 1);
			la_ssize_t got;
			if (buf == NULL) {
				ret = gp_fail(err, errlen, GP_ENOMEM,
				    "out of memory");
				break;
			}
			got = archive_read_data(a, buf, (size_t)size);
			if (got != size) {
				free(buf);
				ret = gp_fail(err, errlen, GP_EINVAL,
				    "%s: entry "
				    "'%.200s' is truncated",
				    path, clean);
				break;
			}
			buf[size] = '\0';
			l->e[l->n - 1].data = buf;
			l->e[l->n - 1].len = (size_t)size;
			l->small_total += size;
		}
	}
	archive_read_free(a);
	close(fd);
	return ret;
}

/* The regular entry path stands for, following links. */
static struct entry *
find(struct listing *l, const char *path)
{
	const char *p = path;
	size_t i;
	int hops;

	for (hops = 0; hops <= LINK_HOPS_MAX; hops++) {
		for (i = 0; i < l->n; i++)
			if (strcmp(l->e[i].path, p) == 0)
				break;
		if (i == l->n)
			return NULL;
		if (l->e[i].link == NULL)
			return &l->e[i];
		p = l->e[i].link;
	}
	return NULL;
}

/* A small entry's bytes (kept in memory by pass 1). */
static int
small(struct listing *l, const char *path, char **data, size_t *len, char *err,
    size_t errlen)
{
	struct entry *e = find(l, path);

	if (e == NULL)
		return gp_fail(err, errlen, GP_ENOENT,
		    "the archive has no "
		    "'%.200s'",
		    path);
	if (e->data == NULL)
		return gp_fail(err, errlen, GP_ETOOBIG,
		    "'%.200s' is larger than "
		    "%d bytes (or the archive's metadata is too large)",
		    path, SMALL_MAX);
	*data = e->data;
	*len = e->len;
	return 0;
}

void
gp_image_archive_fini(struct gp_image_archive *ia)
{
	int i;

	free(ia->manifest.entry);
	free(ia->manifest.data);
	free(ia->config.entry);
	free(ia->config.data);
	for (i = 0; i < ia->nlayers; i++) {
		free(ia->layers[i].entry);
		free(ia->layers[i].data);
	}
	free(ia->layers);
	memset(ia, 0, sizeof(*ia));
}

/* A copy of a small blob of the layout, checked against d. */
static int
layout_blob(struct listing *l, const struct gp_oci_descriptor *d,
    const char *what, struct gp_archive_blob *out, char *err, size_t errlen)
{
	char path[100], got[GP_OCI_DIGEST_SIZE];
	char *data;
	size_t len;
	int ret;

	snprintf(path, sizeof(path), "blobs/sha256/%s", d->digest + 7);
	if ((ret = small(l, path, &data, &len, err, errlen)) != 0)
		return ret;
	if ((int64_t)len != d->size)
		return gp_fail(err, errlen, GP_EINVAL,
		    "the image says its %s %s "
		    "has %lld bytes; the archive's blob has %zu",
		    what, d->digest, (long long)d->size, len);
	gp_oci_digest_of(data, len, got);
	if (strcmp(got, d->digest) != 0)
		return gp_fail(err, errlen, GP_EINVAL,
		    "the archive's %s blob %s "
		    "hashes to %s: the archive lies about it",
		    what, d->digest, got);
	out->d = *d;
	if ((out->data = malloc(len + 1)) == NULL)
		return gp_fail(err, errlen, GP_ENOMEM, "out of memory");
	memcpy(out->data, data, len);
	out->data[len] = '\0';
	out->len = len;
	return 0;
}

/* The image name an index entry's annotations give, or "". */
static void
annotated_name(json_t *entry, char *out, size_t outlen)
{
	json_t *ann = json_object_get(entry, "annotations");
	const char *n =
	    json_string_value(json_object_get(ann, "io.containerd.image.name"));
	char err[200];

	out[0] = '\0';
	if (n == NULL) {
		n = json_string_value(
		    json_object_get(ann, "org.opencontainers.image.ref.name"));
		/* Often just a tag ("latest"): not a name on its own. */
		if (n != NULL && strchr(n, ':') == NULL &&
		    strchr(n, '/') == NULL)
			n = NULL;
	}
	if (n != NULL &&
	    gp_image_name_normalize(n, out, outlen, err, sizeof(err)) != 0)
		out[0] = '\0';
}

static int
read_layout(struct listing *l, const char *want_name,
    struct gp_image_archive *ia, char *err, size_t errlen)
{
	struct gp_oci_index idx, sub;
	struct gp_oci_descriptor pick;
	struct gp_oci_manifest m;
	struct gp_oci_image_config cfg;
	char *data, want[GP_IMAGE_NAME_MAX + 1] = "",
	                                     name[GP_IMAGE_NAME_MAX + 1];
	size_t len, i;
	json_t *root = NULL;
	int ret, found = 0, k;

	memset(&idx, 0, sizeof(idx));
	memset(&sub, 0, sizeof(sub));
	memset(&m, 0, sizeof(m));
	if ((ret = small(l, "oci-layout", &data, &len, err, errlen)) != 0)
		return ret;
	root = json_loadb(data, len, 0, NULL);
	if (!json_is_string(json_object_get(root, "imageLayoutVersion"))) {
		json_decref(root);
		return gp_fail(err, errlen, GP_EINVAL,
		    "oci-layout: no "
		    "imageLayoutVersion");
	}
	json_decref(root);
	if ((ret = small(l, "index.json", &data, &len, err, errlen)) != 0)
		return ret;
	if (gp_oci_index_decode(data, len, &idx, err, errlen) != 0)
		return GP_EINVAL;
	root = json_loadb(data, len, 0, NULL);
	if (want_name != NULL &&
	    gp_image_name_normalize(want_name, want, sizeof(want), err,
	        errlen) != 0) {
		ret = GP_EINVAL;
		goto out;
	}
	/* By name when the archive names several; else the only one. */
	for (i = 0; i < (size_t)idx.n && want[0] != '\0'; i++) {
		annotated_name(json_array_get(json_object_get(root,
		                                  "manifests"),
		                   i),
		    name, sizeof(name));
		if (strcmp(name, want) == 0) {
			pick = idx.manifests[i];
			gp_strlcpy(ia->name, name, sizeof(ia->name));
			found = 1;
			break;
		}
	}
	if (!found && idx.n == 1) {
		pick = idx.manifests[0];
		annotated_name(json_array_get(json_object_get(root,
		                                  "manifests"),
		                   0),
		    ia->name, sizeof(ia->name));
		found = 1;
	}
	if (!found) {
		ret = gp_oci_index_pick(&idx, "linux", "amd64", &pick, err,
		    errlen);
		if (ret != 0)
			goto out;
		found = 1;
	}
	/* A nested index (a multi-platform image): linux/amd64. */
	if (strcmp(pick.media_type, GP_OCI_MT_INDEX) == 0 ||
	    strcmp(pick.media_type, GP_DOCKER_MT_LIST) == 0) {
		struct gp_archive_blob b;
		memset(&b, 0, sizeof(b));
		if ((ret = layout_blob(l, &pick, "index", &b, err, errlen)) !=
		    0)
			goto out;
		ret = gp_oci_index_decode(b.data, b.len, &sub, err, errlen);
		if (ret == 0)
			ret = gp_oci_index_pick(&sub, "linux", "amd64", &pick,
			    err, errlen);
		free(b.data);
		if (ret != 0)
			goto out;
	}
	if ((ret = layout_blob(l, &pick, "manifest", &ia->manifest, err,
	         errlen)) != 0)
		goto out;
	if ((ret = gp_oci_manifest_decode(ia->manifest.data, ia->manifest.len,
	         &m, err, errlen)) != 0)
		goto out;
	if ((ret = layout_blob(l, &m.config, "config", &ia->config, err,
	         errlen)) != 0)
		goto out;
	if ((ret = gp_oci_config_decode(ia->config.data, ia->config.len, &cfg,
	         err, errlen)) != 0)
		goto out;
	gp_strlcpy(ia->os, cfg.os, sizeof(ia->os));
	gp_strlcpy(ia->arch, cfg.arch, sizeof(ia->arch));
	gp_oci_config_fini(&cfg);
	if ((ia->layers = calloc((size_t)m.nlayers, sizeof(*ia->layers))) ==
	    NULL) {
		ret = gp_fail(err, errlen, GP_ENOMEM, "out of memory");
		goto out;
	}
	for (k = 0; k < m.nlayers; k++) {
		char path[100];
		struct entry *e;
		snprintf(path, sizeof(path), "blobs/sha256/%s",
		    m.layers[k].digest + 7);
		ia->layers[k].d = m.layers[k];
		ia->nlayers++;
		if ((e = find(l, path)) == NULL) {
			ret = gp_fail(err, errlen, GP_EINVAL,
			    "layer %d (%s) is "
			    "not in the archive",
			    k, m.layers[k].digest);
			goto out;
		}
		if (e->size != m.layers[k].size) {
			ret = gp_fail(err, errlen, GP_EINVAL,
			    "the manifest says "
			    "layer %d (%s) has %lld bytes; the archive's blob "
			    "has %lld",
			    k, m.layers[k].digest, (long long)m.layers[k].size,
			    (long long)e->size);
			goto out;
		}
		if ((ia->layers[k].entry = strdup(e->path)) == NULL) {
			ret = gp_fail(err, errlen, GP_ENOMEM, "out of memory");
			goto out;
		}
	}
	ia->kind = GP_ARCHIVE_OCI;
out:
	json_decref(root);
	gp_oci_index_fini(&idx);
	gp_oci_index_fini(&sub);
	gp_oci_manifest_fini(&m);
	return ret;
}

static int
read_docker(struct listing *l, const char *want_name,
    struct gp_image_archive *ia, char *err, size_t errlen)
{
	struct gp_docker_save ds;
	struct gp_docker_save_image *im = NULL;
	struct gp_oci_image_config cfg;
	char want[GP_IMAGE_NAME_MAX + 1] = "", tag[GP_IMAGE_NAME_MAX + 1];
	char *data;
	size_t len;
	int i, k, ret;

	if ((ret = small(l, "manifest.json", &data, &len, err, errlen)) != 0)
		return ret;
	if (gp_docker_save_decode(data, len, &ds, err, errlen) != 0)
		return GP_EINVAL;
	if (want_name != NULL &&
	    gp_image_name_normalize(want_name, want, sizeof(want), err,
	        errlen) != 0) {
		ret = GP_EINVAL;
		goto out;
	}
	for (i = 0; i < ds.n && im == NULL; i++)
		for (k = 0; k < ds.images[i].ntags && want[0] != '\0'; k++)
			if (gp_image_name_normalize(ds.images[i].tags[k], tag,
			        sizeof(tag), err, errlen) == 0 &&
			    strcmp(tag, want) == 0) {
				im = &ds.images[i];
				gp_strlcpy(ia->name, tag, sizeof(ia->name));
				break;
			}
	if (im == NULL && ds.n == 1) {
		im = &ds.images[0];
		if (im->ntags > 0 &&
		    gp_image_name_normalize(im->tags[0], ia->name,
		        sizeof(ia->name), err, errlen) != 0)
			ia->name[0] = '\0';
	}
	if (im == NULL) {
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "the archive holds %d "
		    "images: name one with --name (its RepoTags)",
		    ds.n);
		goto out;
	}
	if ((ret = small(l, im->config, &data, &len, err, errlen)) != 0)
		goto out;
	if ((ret = gp_oci_config_decode(data, len, &cfg, err, errlen)) != 0)
		goto out;
	gp_strlcpy(ia->os, cfg.os, sizeof(ia->os));
	gp_strlcpy(ia->arch, cfg.arch, sizeof(ia->arch));
	if (cfg.ndiff_ids != 0 && cfg.ndiff_ids != im->nlayers) {
		gp_oci_config_fini(&cfg);
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "the config lists %d layers, "
		    "manifest.json %d",
		    cfg.ndiff_ids, im->nlayers);
		goto out;
	}
	gp_oci_config_fini(&cfg);
	if ((ia->config.data = malloc(len + 1)) == NULL) {
		ret = gp_fail(err, errlen, GP_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(ia->config.data, data, len);
	ia->config.data[len] = '\0';
	ia->config.len = len;
	gp_strlcpy(ia->config.d.media_type, GP_OCI_MT_CONFIG,
	    sizeof(ia->config.d.media_type));
	gp_oci_digest_of(data, len, ia->config.d.digest);
	ia->config.d.size = (int64_t)len;
	if ((ia->layers = calloc((size_t)im->nlayers, sizeof(*ia->layers))) ==
	    NULL) {
		ret = gp_fail(err, errlen, GP_ENOMEM, "out of memory");
		goto out;
	}
	for (k = 0; k < im->nlayers; k++) {
		struct entry *e = find(l, im->layers[k]);
		ia->nlayers++;
		if (e == NULL) {
			ret = gp_fail(err, errlen, GP_EINVAL,
			    "layer %d "
			    "('%.200s') is not in the archive",
			    k, im->layers[k]);
			goto out;
		}
		if (e->size < 1 || e->size > GP_OCI_LAYER_MAX) {
			ret = gp_fail(err, errlen, GP_EINVAL,
			    "layer %d "
			    "('%.200s'): %lld bytes",
			    k, im->layers[k], (long long)e->size);
			goto out;
		}
		ia->layers[k].d.size = e->size;
		if ((ia->layers[k].entry = strdup(e->path)) == NULL) {
			ret = gp_fail(err, errlen, GP_ENOMEM, "out of memory");
			goto out;
		}
	}
	ia->kind = GP_ARCHIVE_DOCKER;
	ret = 0;
out:
	gp_docker_save_fini(&ds);
	return ret;
}

/* ---- streaming entries ---- */

struct gp_archive_reader {
	struct archive *a;
	int64_t left;
	int failed;
	crypto_hash_sha256_state hash;
	unsigned char head[4]; /* the first bytes, for docker layers */
	int nhead;
};

long
gp_archive_reader_read(void *reader, char *buf, size_t len)
{
	struct gp_archive_reader *r = reader;
	la_ssize_t n;

	if (r->failed)
		return -1;
	if (r->left <= 0)
		return 0;
	if ((int64_t)len > r->left)
		len = (size_t)r->left;
	n = archive_read_data(r->a, buf, len);
	if (n <= 0) {
		r->failed = 1;
		return -1;
	}
	crypto_hash_sha256_update(&r->hash, (const unsigned char *)buf,
	    (size_t)n);
	while (r->nhead < 4 && r->nhead < n) {
		r->head[r->nhead] = (unsigned char)buf[r->nhead];
		r->nhead++;
	}
	r->left -= n;
	return (long)n;
}

int
gp_image_archive_each(struct gp_image_archive *ia,
    struct gp_archive_blob **want,
    int (*fn)(void *arg, struct gp_archive_blob *b, void *reader), void *arg,
    char *err, size_t errlen)
{
	struct gp_archive_reader rd;
	struct archive *a;
	struct archive_entry *e;
	char clean[4200], why[300], *buf, got[GP_OCI_DIGEST_SIZE];
	unsigned char hash[32];
	int fd, r, ret = 0, i, nwant = 0, done = 0;

	for (i = 0; want[i] != NULL; i++)
		if (want[i]->entry != NULL)
			nwant++;
	if (nwant == 0)
		return 0;
	if ((buf = malloc(BLOCK)) == NULL)
		return gp_fail(err, errlen, GP_ENOMEM, "out of memory");
	if ((a = open_archive(ia->path, &fd, err, errlen)) == NULL) {
		free(buf);
		return GP_EIO;
	}
	while (ret == 0 && done < nwant) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			ret = gp_fail(err, errlen, GP_EINVAL, "%s: %s",
			    ia->path,
			    archive_error_string(a) ? archive_error_string(a)
			                            : "read error");
			break;
		}
		if (gp_archive_path_clean(archive_entry_pathname(e), clean,
		        sizeof(clean), why, sizeof(why)) != 0 ||
		    archive_entry_filetype(e) != AE_IFREG ||
		    archive_entry_hardlink(e) != NULL)
			continue;
		for (i = 0; want[i] != NULL; i++) {
			struct gp_archive_blob *b = want[i];
			int j;
			if (b->entry == NULL || strcmp(b->entry, clean) != 0)
				continue;
			memset(&rd, 0, sizeof(rd));
			rd.a = a;
			rd.left = archive_entry_size(e);
			crypto_hash_sha256_init(&rd.hash);
			ret = fn(arg, b, &rd);
			/* Drain what fn left, hashing it. */
			while (ret == 0 && rd.left > 0)
				if (gp_archive_reader_read(&rd, buf, BLOCK) < 0)
					break;
			if (ret != 0)
				break;
			if (rd.failed) {
				ret = gp_fail(err, errlen, GP_EINVAL,
				    "%s: cannot "
				    "read '%.200s': %s",
				    ia->path, clean,
				    archive_error_string(a)
				        ? archive_error_string(a)
				        : "truncated");
				break;
			}
			crypto_hash_sha256_final(&rd.hash, hash);
			gp_oci_digest_format(hash, got);
			if (b->d.digest[0] == '\0') {
				gp_strlcpy(b->d.digest, got,
				    sizeof(b->d.digest));
				/* Docker layers: tar, or compressed tar. */
				if (rd.nhead >= 2 && rd.head[0] == 0x1f &&
				    rd.head[1] == 0x8b)
					gp_strlcpy(b->d.media_type,
					    GP_OCI_MT_LAYER_GZ,
					    sizeof(b->d.media_type));
				else if (rd.nhead >= 4 && rd.head[0] == 0x28 &&
				    rd.head[1] == 0xb5 && rd.head[2] == 0x2f &&
				    rd.head[3] == 0xfd)
					gp_strlcpy(b->d.media_type,
					    GP_OCI_MT_LAYER_ZST,
					    sizeof(b->d.media_type));
				else
					gp_strlcpy(b->d.media_type,
					    GP_OCI_MT_LAYER,
					    sizeof(b->d.media_type));
			} else if (strcmp(got, b->d.digest) != 0) {
				ret = gp_fail(err, errlen, GP_EINVAL,
				    "the archive's blob for %s hashes to %s: "
				    "the archive lies about it",
				    b->d.digest, got);
				break;
			}
			done++;
			/* Other blobs of the same entry (a repeated layer). */
			for (j = i + 1; want[j] != NULL; j++) {
				if (want[j]->entry == NULL ||
				    strcmp(want[j]->entry, clean) != 0)
					continue;
				if (want[j]->d.digest[0] == '\0') {
					gp_strlcpy(want[j]->d.digest, got,
					    sizeof(want[j]->d.digest));
					gp_strlcpy(want[j]->d.media_type,
					    b->d.media_type,
					    sizeof(want[j]->d.media_type));
				} else if (strcmp(got, want[j]->d.digest) !=
				    0) {
					ret = gp_fail(err, errlen, GP_EINVAL,
					    "the archive's blob for %s hashes "
					    "to %s",
					    want[j]->d.digest, got);
					break;
				}
				done++;
			}
			break;
		}
	}
	archive_read_free(a);
	close(fd);
	free(buf);
	if (ret == 0 && done < nwant)
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "%s: the archive changed "
		    "while it was read",
		    ia->path);
	return ret;
}

static int
hash_only(void *arg, struct gp_archive_blob *b, void *reader)
{
	(void)arg;
	(void)b;
	(void)reader;
	return 0;
}

/* Docker: the layers are hashed, then the OCI manifest is written. */
static int
build_manifest(struct gp_image_archive *ia, char *err, size_t errlen)
{
	struct gp_archive_blob **want;
	json_t *layers, *m;
	struct gp_oci_manifest check;
	char *text;
	int i, ret;

	if ((want = calloc((size_t)ia->nlayers + 1, sizeof(*want))) == NULL)
		return gp_fail(err, errlen, GP_ENOMEM, "out of memory");
	for (i = 0; i < ia->nlayers; i++)
		want[i] = &ia->layers[i];
	ret = gp_image_archive_each(ia, want, hash_only, NULL, err, errlen);
	free(want);
	if (ret != 0)
		return ret;
	layers = json_array();
	for (i = 0; i < ia->nlayers; i++)
		json_array_append_new(layers,
		    json_pack("{s:s,s:s,s:I}", "mediaType",
		        ia->layers[i].d.media_type, "digest",
		        ia->layers[i].d.digest, "size",
		        (json_int_t)ia->layers[i].d.size));
	m = json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:o}", "schemaVersion", 2,
	    "mediaType", GP_OCI_MT_MANIFEST, "config", "mediaType",
	    GP_OCI_MT_CONFIG, "digest", ia->config.d.digest, "size",
	    (json_int_t)ia->config.d.size, "layers", layers);
	text = m != NULL ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	if (text == NULL)
		return gp_fail(err, errlen, GP_ENOMEM, "out of memory");
	ia->manifest.data = text;
	ia->manifest.len = strlen(text);
	gp_strlcpy(ia->manifest.d.media_type, GP_OCI_MT_MANIFEST,
	    sizeof(ia->manifest.d.media_type));
	gp_oci_digest_of(text, ia->manifest.len, ia->manifest.d.digest);
	ia->manifest.d.size = (int64_t)ia->manifest.len;
	/* What the coordinator will check, checked now. */
	ret =
	    gp_oci_manifest_decode(text, ia->manifest.len, &check, err, errlen);
	gp_oci_manifest_fini(&check);
	return ret;
}

int
gp_image_archive_read(const char *path, const char *want_name,
    struct gp_image_archive *ia, char *err, size_t errlen)
{
	struct listing l;
	int ret;

	memset(ia, 0, sizeof(*ia));
	memset(&l, 0, sizeof(l));
	if (gp_strlcpy(ia->path, path, sizeof(ia->path)) >= sizeof(ia->path))
		return gp_fail(err, errlen, GP_EINVAL, "path too long");
	if ((ret = list_entries(path, &l, err, errlen)) != 0)
		goto out;
	if (find(&l, "oci-layout") != NULL && find(&l, "index.json") != NULL)
		ret = read_layout(&l, want_name, ia, err, errlen);
	else if (find(&l, "manifest.json") != NULL) {
		ret = read_docker(&l, want_name, ia, err, errlen);
		if (ret == 0)
			ret = build_manifest(ia, err, errlen);
	} else
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "%s is neither an OCI image "
		    "layout (oci-layout, index.json) nor `docker save` output "
		    "(manifest.json)",
		    path);
out:
	listing_free(&l);
	return ret;
}
