/*
 * ckpt.c: chunk naming and manifest validation for the checkpoint store
 * (ckpt.h). Both sides use it: the coordinator on every commit, the agent
 * and the CLI on every manifest they download.
 */
#include "ckpt.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "gp.h"
#include "jobspec.h"
#include "util.h"

void
gp_ckpt_chunk_name(const void *data, size_t len, char out[GP_CKPT_NAME_HEX])
{
	unsigned char hash[32];

	crypto_generichash(hash, sizeof(hash), data, len, NULL, 0);
	sodium_bin2hex(out, GP_CKPT_NAME_HEX, hash, sizeof(hash));
}

void
gp_ckpt_hash_init(gp_ckpt_hash_state *st)
{
	crypto_generichash_init(st, NULL, 0, 32);
}

void
gp_ckpt_hash_update(gp_ckpt_hash_state *st, const void *data, size_t len)
{
	crypto_generichash_update(st, data, len);
}

void
gp_ckpt_hash_final(gp_ckpt_hash_state *st, char out[GP_CKPT_NAME_HEX])
{
	unsigned char hash[32];

	crypto_generichash_final(st, hash, sizeof(hash));
	sodium_bin2hex(out, GP_CKPT_NAME_HEX, hash, sizeof(hash));
}

int
gp_ckpt_name_valid(const char *name)
{
	int i;

	if (name == NULL)
		return 0;
	for (i = 0; i < 64; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
			(name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	return name[64] == '\0';
}

int
gp_ckpt_path_valid(const char *path)
{
	size_t len, i, start;

	if (path == NULL || (len = strlen(path)) == 0 ||
	    len > GP_CKPT_PATH_MAX || path[0] == '/' || path[len - 1] == '/')
		return 0;
	start = 0;
	for (i = 0; i <= len; i++) {
		unsigned char c = (unsigned char)path[i];
		if (i < len && (c < 0x20 || c == 0x7f))
			return 0;
		if (i < len && c != '/')
			continue;
		/* A component is path[start, i). */
		if (i == start ||
		    (i - start == 1 && path[start] == '.') ||
		    (i - start == 2 && path[start] == '.' &&
			path[start + 1] == '.'))
			return 0;
		start = i + 1;
	}
	return 1;
}

int64_t
gp_ckpt_chunk_count(int64_t size)
{
	return (size + GP_CKPT_CHUNK_SIZE - 1) / GP_CKPT_CHUNK_SIZE;
}

static int
key_in(const char *key, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strcmp(key, *list) == 0)
			return 1;
	return 0;
}

/* 1 when a string value holds no NUL (JSON allows "\u0000"). */
static int
plain_string(json_t *v)
{
	return json_is_string(v) &&
	    strlen(json_string_value(v)) == json_string_length(v);
}

int
gp_ckpt_manifest_check(json_t *m, int64_t max_bytes, int meta,
    struct gp_ckpt_totals *tot, char *err, size_t errlen)
{
	static const char *const top[] = {"files", "label", NULL};
	static const char *const top_meta[] = {"files", "label",
	    GP_CKPT_META_KEYS, NULL};
	static const char *const file_keys[] = {"path", "size", "mode",
	    "chunks", NULL};
	struct gp_ckpt_totals t = {0, 0, 0};
	json_t *files, *f, *v, *chunks, *c, *seen = NULL;
	const char *key, *path, *label;
	char prefix[GP_CKPT_PATH_MAX + 1];
	size_t i, k;
	int64_t size, mode;
	int ret;

	if (!json_is_object(m))
		return gp_fail(err, errlen, GP_EINVAL,
		    "manifest: not a JSON object");
	json_object_foreach(m, key, v)
	{
		if (!key_in(key, meta ? top_meta : top))
			return gp_fail(err, errlen, GP_EINVAL,
			    "manifest: unknown field '%.64s'", key);
	}
	v = json_object_get(m, "label");
	if (v != NULL) {
		if (!plain_string(v) ||
		    json_string_length(v) > GP_CKPT_LABEL_LEN)
			return gp_fail(err, errlen, GP_EINVAL,
			    "label: a string of at most %d bytes",
			    GP_CKPT_LABEL_LEN);
		for (label = json_string_value(v); *label != '\0'; label++)
			if ((unsigned char)*label < 0x20 || *label == 0x7f)
				return gp_fail(err, errlen, GP_EINVAL,
				    "label: control characters");
	}
	files = json_object_get(m, "files");
	if (!json_is_array(files))
		return gp_fail(err, errlen, GP_EINVAL,
		    "files: missing or not a "
		    "list");
	if (json_array_size(files) > GP_CKPT_FILES_MAX)
		return gp_fail(err, errlen, GP_ETOOBIG,
		    "files: more than %d files", GP_CKPT_FILES_MAX);
	if ((seen = json_object()) == NULL)
		return gp_fail(err, errlen, GP_ENOMEM, "out of memory");
	json_array_foreach(files, i, f)
	{
		ret = GP_EINVAL;
		if (!json_is_object(f)) {
			gp_fail(err, errlen, ret, "files[%zu]: not an object",
			    i);
			goto fail;
		}
		json_object_foreach(f, key, v)
		{
			if (!key_in(key, file_keys)) {
				gp_fail(err, errlen, ret,
				    "files[%zu]: unknown field '%.64s'", i,
				    key);
				goto fail;
			}
		}
		v = json_object_get(f, "path");
		path = json_string_value(v);
		if (!plain_string(v) || !gp_ckpt_path_valid(path)) {
			gp_fail(err, errlen, ret,
			    "files[%zu].path: a relative path without '..', "
			    "at most %d bytes",
			    i, GP_CKPT_PATH_MAX);
			goto fail;
		}
		if (json_object_get(seen, path) != NULL) {
			gp_fail(err, errlen, ret,
			    "files[%zu].path: '%.100s' "
			    "listed twice",
			    i, path);
			goto fail;
		}
		json_object_set_new(seen, path, json_true());
		v = json_object_get(f, "size");
		size = json_integer_value(v);
		if (!json_is_integer(v) || size < 0 ||
		    size > INT64_MAX / 4) {
			gp_fail(err, errlen, ret,
			    "files[%zu].size: a size in bytes", i);
			goto fail;
		}
		v = json_object_get(f, "mode");
		mode = json_integer_value(v);
		if (!json_is_integer(v) || mode < 0 || mode > 07777) {
			gp_fail(err, errlen, ret, "files[%zu].mode: 0 to 07777",
			    i);
			goto fail;
		}
		chunks = json_object_get(f, "chunks");
		if (!json_is_array(chunks) ||
		    (int64_t)json_array_size(chunks) !=
			gp_ckpt_chunk_count(size)) {
			gp_fail(err, errlen, ret,
			    "files[%zu].chunks: %lld chunk names for %lld "
			    "bytes",
			    i, (long long)gp_ckpt_chunk_count(size),
			    (long long)size);
			goto fail;
		}
		json_array_foreach(chunks, k, c)
		{
			if (!gp_ckpt_name_valid(json_string_value(c))) {
				gp_fail(err, errlen, ret,
				    "files[%zu].chunks[%zu]: 64 lowercase hex "
				    "digits",
				    i, k);
				goto fail;
			}
		}
		t.bytes += size;
		t.files++;
		t.chunks += (int64_t)json_array_size(chunks);
		if (max_bytes > 0 && t.bytes > max_bytes) {
			gp_fail(err, errlen, GP_ETOOBIG,
			    "version larger than %lld bytes",
			    (long long)max_bytes);
			ret = GP_ETOOBIG;
			goto fail;
		}
	}
	/* A path may not be a file and a directory of another file. */
	json_array_foreach(files, i, f)
	{
		path = json_string_value(json_object_get(f, "path"));
		for (k = 0; path[k] != '\0'; k++) {
			if (path[k] != '/')
				continue;
			memcpy(prefix, path, k);
			prefix[k] = '\0';
			if (json_object_get(seen, prefix) != NULL) {
				ret = gp_fail(err, errlen, GP_EINVAL,
				    "files: '%.100s' is a file and a "
				    "directory",
				    prefix);
				goto fail;
			}
		}
	}
	json_decref(seen);
	*tot = t;
	return 0;
fail:
	json_decref(seen);
	return ret;
}

void
gp_ckpt_label(const char *text, size_t len, char *out)
{
	size_t i, n = 0;

	for (i = 0; i < len && n < GP_CKPT_LABEL_LEN; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == '\n' || c == '\r')
			break;
		out[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	out[n] = '\0';
}

int
gp_upload_request_decode(const char *text, size_t len, int want_name,
    int64_t max_bytes, char *name, json_t **manifest,
    struct gp_ckpt_totals *tot, char *err, size_t errlen)
{
	struct gp_ckpt_totals t;
	json_t *root, *m, *v, *f, *c, *sizes = NULL;
	const char *key, *cname;
	int64_t size, want;
	size_t i, k;
	int ret = GP_EINVAL;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(root)) {
		json_decref(root);
		return gp_fail(err, errlen, GP_EINVAL, "body: a JSON object");
	}
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "manifest") != 0 &&
		    !(want_name && strcmp(key, "data_set") == 0)) {
			gp_fail(err, errlen, ret, "unknown field '%.64s'", key);
			goto out;
		}
	}
	if (want_name) {
		v = json_object_get(root, "data_set");
		if (!plain_string(v) || !gp_data_name_valid(
		    json_string_value(v))) {
			gp_fail(err, errlen, ret,
			    "data_set: 1 to 64 of A-Z a-z "
			    "0-9 . _ -, not starting with '.'");
			goto out;
		}
	}
	m = json_object_get(root, "manifest");
	if (!json_is_object(m)) {
		gp_fail(err, errlen, ret, "manifest: missing or not an object");
		goto out;
	}
	if (json_object_get(m, "label") != NULL) {
		gp_fail(err, errlen, ret, "manifest: label is for checkpoints");
		goto out;
	}
	if ((ret = gp_ckpt_manifest_check(m, max_bytes, 0, &t, err,
	    errlen)) != 0)
		goto out;
	/* A chunk name stands for one content, hence one size. */
	ret = GP_EINVAL;
	if ((sizes = json_object()) == NULL) {
		ret = gp_fail(err, errlen, GP_ENOMEM, "out of memory");
		goto out;
	}
	json_array_foreach(json_object_get(m, "files"), i, f)
	{
		size = json_integer_value(json_object_get(f, "size"));
		json_array_foreach(json_object_get(f, "chunks"), k, c)
		{
			cname = json_string_value(c);
			want = size - (int64_t)k * GP_CKPT_CHUNK_SIZE;
			if (want > GP_CKPT_CHUNK_SIZE)
				want = GP_CKPT_CHUNK_SIZE;
			v = json_object_get(sizes, cname);
			if (v == NULL) {
				json_object_set_new(sizes, cname,
				    json_integer(want));
				continue;
			}
			if (json_integer_value(v) != want) {
				gp_fail(err, errlen, ret,
				    "files[%zu].chunks[%zu]: "
				    "chunk %.16s... listed with two sizes, "
				    "%lld and %lld",
				    i, k, cname,
				    (long long)json_integer_value(v),
				    (long long)want);
				goto out;
			}
		}
	}
	if (want_name)
		snprintf(name, GP_CKPT_DATA_NAME_LEN, "%s",
		    json_string_value(json_object_get(root, "data_set")));
	else
		name[0] = '\0';
	*manifest = json_incref(m);
	*tot = t;
	ret = 0;
out:
	json_decref(sizes);
	json_decref(root);
	return ret;
}

int
gp_share_request_decode(const char *text, size_t len, char *user, char *err,
    size_t errlen)
{
	json_t *body = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *v = json_object_get(body, "user");
	int ret = 0;

	if (!json_is_object(body) || json_object_size(body) != 1 ||
	    !plain_string(v) || !gp_name_valid(json_string_value(v)))
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "body: {\"user\": NAME}, a "
		    "user name of 1 to 64 of A-Z a-z 0-9 . _ -");
	else
		snprintf(user, GP_CKPT_DATA_NAME_LEN, "%s",
		    json_string_value(v));
	json_decref(body);
	return ret;
}

int
gp_quota_request_decode(const char *text, size_t len, int64_t *bytes,
    char *err, size_t errlen)
{
	json_t *body = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *v = json_object_get(body, "bytes");
	int ret = 0;

	if (!json_is_object(body) || json_object_size(body) != 1 ||
	    v == NULL || !(json_is_null(v) || (json_is_integer(v) &&
	    json_integer_value(v) >= 1)))
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "body: {\"bytes\": N} (N >= 1) "
		    "or {\"bytes\": null} for no limit");
	else
		*bytes = json_is_integer(v) ? json_integer_value(v) : 0;
	json_decref(body);
	return ret;
}
