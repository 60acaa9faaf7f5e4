/*
 * oci.c: the image formats of oci.h: digests, manifests, indexes,
 * configs, docker-save manifests, archive paths and image references.
 * Decoders jump to one `bad` exit on the first fault and name the field.
 */
#include "oci.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "util.h"

/* ---- digests ---- */

int
gp_oci_digest_valid(const char *text)
{
	int i;

	if (text == NULL || strncmp(text, "sha256:", 7) != 0)
		return 0;
	for (i = 7; i < GP_OCI_DIGEST_LEN; i++)
		if (!((text[i] >= '0' && text[i] <= '9') ||
		        (text[i] >= 'a' && text[i] <= 'f')))
			return 0;
	return text[GP_OCI_DIGEST_LEN] == '\0';
}

void
gp_oci_digest_format(const unsigned char hash[32], char *out)
{
	memcpy(out, "sha256:", 7);
	sodium_bin2hex(out + 7, 65, hash, 32);
}

void
gp_oci_digest_of(const void *data, size_t len, char *out)
{
	unsigned char hash[32];

	crypto_hash_sha256(hash, data, len);
	gp_oci_digest_format(hash, out);
}

/* ---- JSON helpers ---- */

/* A string without NUL of at most max bytes, or NULL. */
static const char *
str_field(json_t *obj, const char *key, size_t max)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_string(v) || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

static json_t *
load_object(const char *text, size_t len, const char *what, char *err,
    size_t errlen)
{
	json_error_t jerr;
	json_t *root;

	if (len > GP_OCI_JSON_MAX) {
		gp_fail(err, errlen, GP_EINVAL, "%s: larger than %d bytes",
		    what, GP_OCI_JSON_MAX);
		return NULL;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		gp_fail(err, errlen, GP_EINVAL, "%s: not JSON: %s", what,
		    jerr.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		gp_fail(err, errlen, GP_EINVAL, "%s: not a JSON object", what);
		return NULL;
	}
	return root;
}

static int
schema_version_2(json_t *root, const char *what, char *err, size_t errlen)
{
	json_t *v = json_object_get(root, "schemaVersion");

	if (!json_is_integer(v) || json_integer_value(v) != 2)
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s: schemaVersion must be 2", what);
	return 0;
}

static int
is_one_of(const char *s, const char *const *list)
{
	int i;

	for (i = 0; list[i] != NULL; i++)
		if (strcmp(s, list[i]) == 0)
			return 1;
	return 0;
}

static const char *const manifest_types[] = {GP_OCI_MT_MANIFEST,
    GP_DOCKER_MT_MANIFEST, NULL};
static const char *const index_types[] = {GP_OCI_MT_INDEX, GP_DOCKER_MT_LIST,
    NULL};
static const char *const config_types[] = {GP_OCI_MT_CONFIG,
    GP_DOCKER_MT_CONFIG, NULL};
static const char *const layer_types[] = {GP_OCI_MT_LAYER, GP_OCI_MT_LAYER_GZ,
    GP_OCI_MT_LAYER_ZST, GP_DOCKER_MT_LAYER, NULL};

/*
 * Decodes a descriptor: mediaType (one of types, when types is not
 * NULL), digest, size in [1, max]; no "urls" (foreign layers are never
 * fetched from elsewhere).
 */
static int
decode_descriptor(json_t *o, const char *what, const char *const *types,
    int64_t max, struct gp_oci_descriptor *d, char *err, size_t errlen)
{
	const char *mt, *digest;
	json_t *size;

	memset(d, 0, sizeof(*d));
	if (!json_is_object(o))
		return gp_fail(err, errlen, GP_EINVAL, "%s: not an object",
		    what);
	mt = str_field(o, "mediaType", GP_OCI_MEDIA_TYPE_MAX);
	if (mt == NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s.mediaType: missing or not a "
		    "short string",
		    what);
	if (types != NULL && !is_one_of(mt, types))
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s.mediaType: unsupported type "
		    "'%.80s'",
		    what, mt);
	digest = str_field(o, "digest", 200);
	if (digest == NULL || !gp_oci_digest_valid(digest))
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s.digest: not sha256:<64 lowercase "
		    "hex digits>",
		    what);
	size = json_object_get(o, "size");
	if (!json_is_integer(size) || json_integer_value(size) < 1 ||
	    json_integer_value(size) > max)
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s.size: must be from 1 to %lld", what, (long long)max);
	if (json_object_get(o, "urls") != NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s: foreign layers (\"urls\") are "
		    "not supported",
		    what);
	gp_strlcpy(d->media_type, mt, sizeof(d->media_type));
	gp_strlcpy(d->digest, digest, sizeof(d->digest));
	d->size = json_integer_value(size);
	return 0;
}

enum gp_oci_kind
gp_oci_detect(const char *text, size_t len, const char *content_type)
{
	json_t *root;
	const char *mt;
	enum gp_oci_kind kind = GP_OCI_UNKNOWN;

	if (len > GP_OCI_JSON_MAX)
		return GP_OCI_UNKNOWN;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(root)) {
		json_decref(root);
		return GP_OCI_UNKNOWN;
	}
	mt = str_field(root, "mediaType", GP_OCI_MEDIA_TYPE_MAX);
	if (mt == NULL && content_type != NULL && content_type[0] != '\0')
		mt = content_type;
	if (mt != NULL) {
		if (is_one_of(mt, manifest_types))
			kind = GP_OCI_MANIFEST;
		else if (is_one_of(mt, index_types))
			kind = GP_OCI_INDEX;
	}
	if (kind == GP_OCI_UNKNOWN && mt == NULL) {
		if (json_is_array(json_object_get(root, "manifests")))
			kind = GP_OCI_INDEX;
		else if (json_is_array(json_object_get(root, "layers")))
			kind = GP_OCI_MANIFEST;
	}
	json_decref(root);
	return kind;
}

/* ---- manifests ---- */

void
gp_oci_manifest_fini(struct gp_oci_manifest *m)
{
	free(m->layers);
	memset(m, 0, sizeof(*m));
}

int64_t
gp_oci_manifest_bytes(const struct gp_oci_manifest *m)
{
	int64_t n = m->config.size;
	int i;

	for (i = 0; i < m->nlayers; i++)
		n += m->layers[i].size;
	return n;
}

int
gp_oci_manifest_decode(const char *text, size_t len, struct gp_oci_manifest *m,
    char *err, size_t errlen)
{
	json_t *root, *layers;
	const char *mt;
	char what[32];
	size_t i, n;
	int ret = GP_EINVAL;

	memset(m, 0, sizeof(*m));
	if ((root = load_object(text, len, "manifest", err, errlen)) == NULL)
		return GP_EINVAL;
	if (schema_version_2(root, "manifest", err, errlen) != 0)
		goto out;
	if (json_object_get(root, "mediaType") != NULL) {
		mt = str_field(root, "mediaType", GP_OCI_MEDIA_TYPE_MAX);
		if (mt == NULL || !is_one_of(mt, manifest_types)) {
			if (mt != NULL && is_one_of(mt, index_types))
				gp_fail(err, errlen, GP_EINVAL,
				    "manifest: is an image "
				    "index, not an image manifest");
			else
				gp_fail(err, errlen, GP_EINVAL,
				    "manifest.mediaType: not an "
				    "image manifest type");
			goto out;
		}
		gp_strlcpy(m->media_type, mt, sizeof(m->media_type));
	}
	if (decode_descriptor(json_object_get(root, "config"),
	        "manifest.config", config_types, GP_OCI_JSON_MAX, &m->config,
	        err, errlen) != 0)
		goto out;
	layers = json_object_get(root, "layers");
	if (!json_is_array(layers) || (n = json_array_size(layers)) == 0) {
		gp_fail(err, errlen, GP_EINVAL,
		    "manifest.layers: must be a non-empty array");
		goto out;
	}
	if (n > GP_OCI_LAYERS_MAX) {
		gp_fail(err, errlen, GP_EINVAL,
		    "manifest.layers: %zu layers, at most %d", n,
		    GP_OCI_LAYERS_MAX);
		goto out;
	}
	if ((m->layers = calloc(n, sizeof(*m->layers))) == NULL) {
		gp_fail(err, errlen, GP_EINVAL, "out of memory");
		ret = GP_ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "manifest.layers[%zu]", i);
		if (decode_descriptor(json_array_get(layers, i), what,
		        layer_types, GP_OCI_LAYER_MAX, &m->layers[i], err,
		        errlen) != 0)
			goto out;
		m->nlayers++;
	}
	ret = 0;
out:
	json_decref(root);
	if (ret != 0)
		gp_oci_manifest_fini(m);
	return ret;
}

/* ---- indexes ---- */

void
gp_oci_index_fini(struct gp_oci_index *idx)
{
	free(idx->manifests);
	memset(idx, 0, sizeof(*idx));
}

static int
copy_platform_field(json_t *platform, const char *key, char *out, size_t outlen)
{
	json_t *v = json_object_get(platform, key);
	const char *s;

	if (v == NULL)
		return 0;
	s = str_field(platform, key, outlen - 1);
	if (s == NULL)
		return GP_EINVAL;
	gp_strlcpy(out, s, outlen);
	return 0;
}

int
gp_oci_index_decode(const char *text, size_t len, struct gp_oci_index *idx,
    char *err, size_t errlen)
{
	json_t *root, *list, *e, *platform;
	const char *mt;
	char what[32];
	size_t i, n;
	int ret = GP_EINVAL;

	memset(idx, 0, sizeof(*idx));
	if ((root = load_object(text, len, "index", err, errlen)) == NULL)
		return GP_EINVAL;
	if (schema_version_2(root, "index", err, errlen) != 0)
		goto out;
	if (json_object_get(root, "mediaType") != NULL) {
		mt = str_field(root, "mediaType", GP_OCI_MEDIA_TYPE_MAX);
		if (mt == NULL || !is_one_of(mt, index_types)) {
			gp_fail(err, errlen, GP_EINVAL,
			    "index.mediaType: not an image index "
			    "type");
			goto out;
		}
	}
	list = json_object_get(root, "manifests");
	if (!json_is_array(list) || (n = json_array_size(list)) == 0 ||
	    n > GP_OCI_INDEX_MAX) {
		gp_fail(err, errlen, GP_EINVAL,
		    "index.manifests: must be an array of 1 to "
		    "%d entries",
		    GP_OCI_INDEX_MAX);
		goto out;
	}
	if ((idx->manifests = calloc(n, sizeof(*idx->manifests))) == NULL) {
		gp_fail(err, errlen, GP_EINVAL, "out of memory");
		ret = GP_ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct gp_oci_descriptor *d = &idx->manifests[i];

		e = json_array_get(list, i);
		snprintf(what, sizeof(what), "index.manifests[%zu]", i);
		/* Entries of other types (attestations, ...) are kept and
		 * skipped by the picker. */
		if (decode_descriptor(e, what, NULL, GP_OCI_JSON_MAX, d, err,
		        errlen) != 0)
			goto out;
		platform = json_object_get(e, "platform");
		if (platform != NULL &&
		    (!json_is_object(platform) ||
		        copy_platform_field(platform, "os", d->os,
		            sizeof(d->os)) != 0 ||
		        copy_platform_field(platform, "architecture", d->arch,
		            sizeof(d->arch)) != 0 ||
		        copy_platform_field(platform, "variant", d->variant,
		            sizeof(d->variant)) != 0)) {
			gp_fail(err, errlen, GP_EINVAL,
			    "%s.platform: os, architecture and "
			    "variant must be short strings",
			    what);
			goto out;
		}
		idx->n++;
	}
	ret = 0;
out:
	json_decref(root);
	if (ret != 0)
		gp_oci_index_fini(idx);
	return ret;
}

int
gp_oci_index_pick(const struct gp_oci_index *idx, const char *os,
    const char *arch, struct gp_oci_descriptor *out, char *err, size_t errlen)
{
	const struct gp_oci_descriptor *only = NULL;
	struct gp_buf seen = {0};
	int i, nimages = 0;

	for (i = 0; i < idx->n; i++) {
		const struct gp_oci_descriptor *d = &idx->manifests[i];

		if (!is_one_of(d->media_type, manifest_types))
			continue;
		nimages++;
		only = d;
		if (strcmp(d->os, os) == 0 && strcmp(d->arch, arch) == 0) {
			*out = *d;
			gp_buf_free(&seen);
			return 0;
		}
		gp_buf_printf(&seen, "%s%s/%s", seen.len > 0 ? ", " : "",
		    d->os[0] ? d->os : "?", d->arch[0] ? d->arch : "?");
	}
	if (nimages == 1 && only->os[0] == '\0' && only->arch[0] == '\0') {
		*out = *only;
		gp_buf_free(&seen);
		return 0;
	}
	if (errlen > 0)
		snprintf(err, errlen,
		    "the index has no %s/%s image (it has: "
		    "%.300s)",
		    os, arch, seen.len > 0 ? seen.data : "none");
	gp_buf_free(&seen);
	return GP_ENOENT;
}

/* ---- configs ---- */

void
gp_oci_config_fini(struct gp_oci_image_config *c)
{
	gp_strv_free(c->env);
	gp_strv_free(c->entrypoint);
	gp_strv_free(c->cmd);
	free(c->workdir);
	free(c->user);
	memset(c, 0, sizeof(*c));
}

static int
env_item_valid(const char *s)
{
	const char *eq = strchr(s, '=');
	const char *p;

	if (eq == NULL || eq == s || eq - s > 1024)
		return 0;
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
	        *s == '_'))
		return 0;
	for (p = s + 1; p < eq; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		        (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
		        *p == '-'))
			return 0;
	return 1;
}

/* An array of strings (or null / absent: *out stays NULL). */
static int
decode_strv(json_t *cfg, const char *key, int env, char ***out, char *err,
    size_t errlen)
{
	json_t *v = json_object_get(cfg, key), *s;
	size_t i, n;
	char **list;

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_array(v) || (n = json_array_size(v)) > GP_OCI_STRINGS_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "config.%s: must be an array of at "
		    "most %d strings",
		    key, GP_OCI_STRINGS_MAX);
	if ((list = calloc(n + 1, sizeof(*list))) == NULL)
		return gp_fail(err, errlen, GP_EINVAL, "out of memory");
	*out = list;
	for (i = 0; i < n; i++) {
		s = json_array_get(v, i);
		if (!json_is_string(s) ||
		    json_string_length(s) > GP_OCI_STRING_MAX ||
		    strlen(json_string_value(s)) != json_string_length(s))
			return gp_fail(err, errlen, GP_EINVAL,
			    "config.%s[%zu]: not a string "
			    "of at most %d bytes without NUL",
			    key, i, GP_OCI_STRING_MAX);
		if (env && !env_item_valid(json_string_value(s)))
			return gp_fail(err, errlen, GP_EINVAL,
			    "config.%s[%zu]: not NAME="
			    "VALUE",
			    key, i);
		if ((list[i] = strdup(json_string_value(s))) == NULL)
			return gp_fail(err, errlen, GP_EINVAL, "out of memory");
	}
	return 0;
}

static int
decode_opt_string(json_t *cfg, const char *key, size_t max, char **out,
    char *err, size_t errlen)
{
	json_t *v = json_object_get(cfg, key);
	const char *s;

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if ((s = str_field(cfg, key, max)) == NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "config.%s: not a string of at most "
		    "%zu bytes without NUL",
		    key, max);
	if (s[0] == '\0')
		return 0;
	if ((*out = strdup(s)) == NULL)
		return gp_fail(err, errlen, GP_EINVAL, "out of memory");
	return 0;
}

int
gp_oci_config_decode(const char *text, size_t len, struct gp_oci_image_config *c,
    char *err, size_t errlen)
{
	json_t *root, *cfg, *rootfs, *diff;
	const char *s;
	int ret = GP_EINVAL;

	memset(c, 0, sizeof(*c));
	if ((root = load_object(text, len, "config", err, errlen)) == NULL)
		return GP_EINVAL;
	if (json_object_get(root, "os") != NULL) {
		if ((s = str_field(root, "os", sizeof(c->os) - 1)) == NULL) {
			gp_fail(err, errlen, GP_EINVAL,
			    "config.os: not a short string");
			goto out;
		}
		gp_strlcpy(c->os, s, sizeof(c->os));
	}
	if (json_object_get(root, "architecture") != NULL) {
		if ((s = str_field(root, "architecture",
		         sizeof(c->arch) - 1)) == NULL) {
			gp_fail(err, errlen, GP_EINVAL,
			    "config.architecture: not a short "
			    "string");
			goto out;
		}
		gp_strlcpy(c->arch, s, sizeof(c->arch));
	}
	rootfs = json_object_get(root, "rootfs");
	if (rootfs != NULL) {
		diff = json_object_get(rootfs, "diff_ids");
		if (!json_is_object(rootfs) ||
		    (diff != NULL && !json_is_array(diff))) {
			gp_fail(err, errlen, GP_EINVAL,
			    "config.rootfs: diff_ids must be an "
			    "array");
			goto out;
		}
		c->ndiff_ids = (int)(json_array_size(diff) > 100000
		        ? 100000
		        : json_array_size(diff));
	}
	cfg = json_object_get(root, "config");
	if (cfg == NULL || json_is_null(cfg)) {
		ret = 0;
		goto out;
	}
	if (!json_is_object(cfg)) {
		gp_fail(err, errlen, GP_EINVAL, "config.config: not an object");
		goto out;
	}
	if (decode_strv(cfg, "Env", 1, &c->env, err, errlen) != 0 ||
	    decode_strv(cfg, "Entrypoint", 0, &c->entrypoint, err, errlen) !=
	        0 ||
	    decode_strv(cfg, "Cmd", 0, &c->cmd, err, errlen) != 0 ||
	    decode_opt_string(cfg, "WorkingDir", 4096, &c->workdir, err,
	        errlen) != 0 ||
	    decode_opt_string(cfg, "User", 256, &c->user, err, errlen) != 0)
		goto out;
	if (c->workdir != NULL && c->workdir[0] != '/') {
		gp_fail(err, errlen, GP_EINVAL,
		    "config.WorkingDir: must be an absolute path");
		goto out;
	}
	ret = 0;
out:
	json_decref(root);
	if (ret != 0)
		gp_oci_config_fini(c);
	return ret;
}

/* ---- archive paths ---- */

int
gp_archive_path_clean(const char *path, char *out, size_t outlen, char *err,
    size_t errlen)
{
	const char *p = path, *end;
	size_t n = 0, len;

	if (path == NULL || path[0] == '\0')
		return gp_fail(err, errlen, GP_EINVAL, "empty path");
	if (strlen(path) > 4096)
		return gp_fail(err, errlen, GP_EINVAL,
		    "path longer than 4096 bytes");
	if (path[0] == '/')
		return gp_fail(err, errlen, GP_EINVAL, "absolute path '%.200s'",
		    path);
	for (end = path; *end != '\0'; end++)
		if ((unsigned char)*end < 0x20 || *end == 0x7f)
			return gp_fail(err, errlen, GP_EINVAL,
			    "control character in path "
			    "'%.200s'",
			    path);
	if (outlen == 0)
		return GP_EINVAL;
	while (*p != '\0') {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		end = strchr(p, '/');
		len = end != NULL ? (size_t)(end - p) : strlen(p);
		if (len == 1 && p[0] == '.') {
			p += len;
			continue;
		}
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return gp_fail(err, errlen, GP_EINVAL,
			    "'..' in path '%.200s'", path);
		if (n + (n > 0) + len + 1 > outlen)
			return gp_fail(err, errlen, GP_EINVAL, "path too long");
		if (n > 0)
			out[n++] = '/';
		memcpy(out + n, p, len);
		n += len;
		p += len;
	}
	out[n] = '\0';
	return 0;
}

/* ---- docker save ---- */

void
gp_docker_save_fini(struct gp_docker_save *ds)
{
	int i, k;

	for (i = 0; i < ds->n; i++) {
		struct gp_docker_save_image *im = &ds->images[i];
		free(im->config);
		for (k = 0; k < im->nlayers; k++)
			free(im->layers[k]);
		free(im->layers);
		for (k = 0; k < im->ntags; k++)
			free(im->tags[k]);
		free(im->tags);
	}
	free(ds->images);
	memset(ds, 0, sizeof(*ds));
}

static int
safe_path_dup(json_t *v, const char *what, char **out, char *err, size_t errlen)
{
	char clean[4097], why[256];

	if (!json_is_string(v) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return gp_fail(err, errlen, GP_EINVAL, "%s: not a string",
		    what);
	if (gp_archive_path_clean(json_string_value(v), clean, sizeof(clean),
	        why, sizeof(why)) != 0 ||
	    clean[0] == '\0')
		return gp_fail(err, errlen, GP_EINVAL, "%s: %s", what,
		    clean[0] == '\0' ? "empty path" : why);
	if ((*out = strdup(clean)) == NULL)
		return gp_fail(err, errlen, GP_EINVAL, "out of memory");
	return 0;
}

int
gp_docker_save_decode(const char *text, size_t len, struct gp_docker_save *ds,
    char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *e, *layers, *tags;
	char what[64];
	size_t i, k, n;
	int ret = GP_EINVAL;

	memset(ds, 0, sizeof(*ds));
	if (len > GP_OCI_JSON_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "manifest.json: larger than %d bytes", GP_OCI_JSON_MAX);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "manifest.json: not JSON: %s", jerr.text);
	if (!json_is_array(root) || (n = json_array_size(root)) == 0 ||
	    n > 64) {
		gp_fail(err, errlen, GP_EINVAL,
		    "manifest.json: must be an array of 1 to 64 "
		    "images");
		goto out;
	}
	if ((ds->images = calloc(n, sizeof(*ds->images))) == NULL) {
		gp_fail(err, errlen, GP_EINVAL, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct gp_docker_save_image *im = &ds->images[i];

		e = json_array_get(root, i);
		ds->n++;
		if (!json_is_object(e)) {
			gp_fail(err, errlen, GP_EINVAL,
			    "manifest.json[%zu]: not an object", i);
			goto out;
		}
		snprintf(what, sizeof(what), "manifest.json[%zu].Config", i);
		if (safe_path_dup(json_object_get(e, "Config"), what,
		        &im->config, err, errlen) != 0)
			goto out;
		layers = json_object_get(e, "Layers");
		if (!json_is_array(layers) || json_array_size(layers) == 0 ||
		    json_array_size(layers) > GP_OCI_LAYERS_MAX) {
			gp_fail(err, errlen, GP_EINVAL,
			    "manifest.json[%zu].Layers: must be "
			    "an array of 1 to %d paths",
			    i, GP_OCI_LAYERS_MAX);
			goto out;
		}
		im->layers =
		    calloc(json_array_size(layers), sizeof(*im->layers));
		if (im->layers == NULL) {
			gp_fail(err, errlen, GP_EINVAL, "out of memory");
			goto out;
		}
		for (k = 0; k < json_array_size(layers); k++) {
			snprintf(what, sizeof(what),
			    "manifest.json[%zu].Layers[%zu]", i, k);
			if (safe_path_dup(json_array_get(layers, k), what,
			        &im->layers[k], err, errlen) != 0)
				goto out;
			im->nlayers++;
		}
		tags = json_object_get(e, "RepoTags");
		if (tags == NULL || json_is_null(tags))
			continue;
		if (!json_is_array(tags) || json_array_size(tags) > 64) {
			gp_fail(err, errlen, GP_EINVAL,
			    "manifest.json[%zu].RepoTags: must be "
			    "an array of at most 64 names",
			    i);
			goto out;
		}
		im->tags = calloc(json_array_size(tags) + 1, sizeof(*im->tags));
		if (im->tags == NULL) {
			gp_fail(err, errlen, GP_EINVAL, "out of memory");
			goto out;
		}
		for (k = 0; k < json_array_size(tags); k++) {
			json_t *t = json_array_get(tags, k);
			if (!json_is_string(t) ||
			    json_string_length(t) > GP_IMAGE_NAME_MAX ||
			    strlen(json_string_value(t)) !=
			        json_string_length(t)) {
				gp_fail(err, errlen, GP_EINVAL,
				    "manifest.json[%zu].RepoTags"
				    "[%zu]: not a name",
				    i, k);
				goto out;
			}
			if ((im->tags[k] = strdup(json_string_value(t))) ==
			    NULL) {
				gp_fail(err, errlen, GP_EINVAL,
				    "out of memory");
				goto out;
			}
			im->ntags++;
		}
	}
	ret = 0;
out:
	json_decref(root);
	if (ret != 0)
		gp_docker_save_fini(ds);
	return ret;
}

/* ---- references ---- */

static int
is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One repository path component: alnum runs joined by separators. */
static int
component_valid(const char *s, size_t len)
{
	size_t i = 0, run;

	if (len == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[len - 1]))
		return 0;
	while (i < len) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		/* A separator: ".", "_", "__" or a run of "-". */
		run = 0;
		if (s[i] == '-') {
			while (i < len && s[i] == '-')
				i++, run++;
		} else if (s[i] == '_') {
			while (i < len && s[i] == '_')
				i++, run++;
			if (run > 2)
				return 0;
		} else if (s[i] == '.') {
			i++;
		} else {
			return 0;
		}
		if (i >= len || !is_lower_alnum(s[i]))
			return 0;
	}
	return 1;
}

static int
repository_valid(const char *s)
{
	const char *p = s, *slash;
	size_t len;

	if (s[0] == '\0' || strlen(s) > 255)
		return 0;
	for (;;) {
		slash = strchr(p, '/');
		len = slash != NULL ? (size_t)(slash - p) : strlen(p);
		if (!component_valid(p, len))
			return 0;
		if (slash == NULL)
			return 1;
		p = slash + 1;
	}
}

static int
tag_valid(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 128)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '_' ||
		        (i > 0 && (c == '.' || c == '-'))))
			return 0;
	}
	return 1;
}

/* host[:port]: letters, digits, '.', '-', or an IPv6 literal in []. */
static int
registry_valid(const char *s)
{
	const char *colon;
	size_t i, n = strlen(s);
	int64_t port;

	if (n == 0 || n > 253)
		return 0;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL)
			return 0;
		for (i = 1; s + i < close; i++)
			if (!((s[i] >= '0' && s[i] <= '9') ||
			        (s[i] >= 'a' && s[i] <= 'f') ||
			        (s[i] >= 'A' && s[i] <= 'F') || s[i] == ':'))
				return 0;
		colon = close[1] == ':' ? close + 1 : NULL;
		if (close[1] != '\0' && colon == NULL)
			return 0;
	} else {
		colon = strchr(s, ':');
		for (i = 0; s + i < (colon ? colon : s + n); i++)
			if (!((s[i] >= 'a' && s[i] <= 'z') ||
			        (s[i] >= 'A' && s[i] <= 'Z') ||
			        (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
			        s[i] == '-'))
				return 0;
		if (i == 0)
			return 0;
	}
	if (colon != NULL && gp_parse_int(colon + 1, 1, 65535, &port) != 0)
		return 0;
	return 1;
}

/*
 * Splits text into registry (when the first component looks like one),
 * path, tag and digest, without Docker Hub rewriting. OUT: ref.
 */
static int
split_ref(const char *text, struct gp_image_ref *ref, char *err, size_t errlen)
{
	char buf[600], *at, *slash, *colon, *path;

	memset(ref, 0, sizeof(*ref));
	if (text == NULL || text[0] == '\0')
		return gp_fail(err, errlen, GP_EINVAL, "empty image reference");
	if (gp_strlcpy(buf, text, sizeof(buf)) >= sizeof(buf))
		return gp_fail(err, errlen, GP_EINVAL,
		    "image reference too long");
	if ((at = strchr(buf, '@')) != NULL) {
		*at++ = '\0';
		if (!gp_oci_digest_valid(at))
			return gp_fail(err, errlen, GP_EINVAL,
			    "'%.200s': the digest must be "
			    "sha256:<64 lowercase hex digits>",
			    text);
		gp_strlcpy(ref->digest, at, sizeof(ref->digest));
	}
	path = buf;
	slash = strchr(buf, '/');
	if (slash != NULL) {
		*slash = '\0';
		if (strchr(buf, '.') != NULL || strchr(buf, ':') != NULL ||
		    strcmp(buf, "localhost") == 0 || buf[0] == '[') {
			if (!registry_valid(buf))
				return gp_fail(err, errlen, GP_EINVAL,
				    "'%.200s': bad "
				    "registry host '%.100s'",
				    text, buf);
			gp_strlcpy(ref->registry, buf, sizeof(ref->registry));
			ref->explicit_registry = 1;
			path = slash + 1;
		} else
			*slash = '/';
	}
	/* A tag: after a ':' in the last path component. */
	slash = strrchr(path, '/');
	colon = strrchr(slash != NULL ? slash : path, ':');
	if (colon != NULL) {
		*colon++ = '\0';
		if (!tag_valid(colon))
			return gp_fail(err, errlen, GP_EINVAL,
			    "'%.200s': bad tag '%.130s' "
			    "(letters, digits, _ . -; at most 128)",
			    text, colon);
		gp_strlcpy(ref->tag, colon, sizeof(ref->tag));
	}
	if (!repository_valid(path))
		return gp_fail(err, errlen, GP_EINVAL,
		    "'%.200s': bad repository name "
		    "'%.200s' (lowercase letters and digits, separated by "
		    ". _ - or /)",
		    text, path);
	gp_strlcpy(ref->repository, path, sizeof(ref->repository));
	return 0;
}

int
gp_image_ref_parse(const char *text, struct gp_image_ref *ref, char *err,
    size_t errlen)
{
	char repo[sizeof(ref->repository)];

	if (split_ref(text, ref, err, errlen) != 0)
		return GP_EINVAL;
	if (!ref->explicit_registry ||
	    strcmp(ref->registry, "docker.io") == 0 ||
	    strcmp(ref->registry, "index.docker.io") == 0) {
		gp_strlcpy(ref->registry, "registry-1.docker.io",
		    sizeof(ref->registry));
		if (strchr(ref->repository, '/') == NULL) {
			if (strlen(ref->repository) + 8 >=
			    sizeof(ref->repository))
				return gp_fail(err, errlen, GP_EINVAL,
				    "repository name too "
				    "long");
			memcpy(repo, "library/", 8);
			gp_strlcpy(repo + 8, ref->repository, sizeof(repo) - 8);
			gp_strlcpy(ref->repository, repo,
			    sizeof(ref->repository));
		}
	}
	return 0;
}

int
gp_image_name_normalize(const char *text, char *out, size_t outlen, char *err,
    size_t errlen)
{
	struct gp_image_ref r;
	int n;

	if (text != NULL && strchr(text, '@') != NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "'%.200s': an image name has no "
		    "digest (name it NAME[:TAG])",
		    text);
	if (split_ref(text, &r, err, errlen) != 0)
		return GP_EINVAL;
	n = snprintf(out, outlen, "%s%s%s:%s", r.registry,
	    r.registry[0] ? "/" : "", r.repository,
	    r.tag[0] ? r.tag : "latest");
	if (n < 0 || (size_t)n >= outlen || n > GP_IMAGE_NAME_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "image name longer than %d bytes", GP_IMAGE_NAME_MAX);
	return 0;
}
