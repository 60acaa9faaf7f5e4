/*
 * ckpt.h: what the checkpoint store's two sides share (docs/api.md,
 * "Checkpoints"): the chunk size and naming, and the manifest format with
 * its validation. Pure: no I/O, no global state (tests/unit/test_ckpt.c,
 * tests/fuzz/fuzz_ckpt_manifest.c).
 *
 * A version is a manifest: {"files":[{"path":"a/b","size":N,"mode":420,
 * "chunks":["<hex>",...]}],"label":"step=40"}. Files are cut into
 * GP_CKPT_CHUNK_SIZE chunks (the last one shorter), each named by the hex
 * of its BLAKE2b-256 hash.
 */
#ifndef GP_CKPT_H
#define GP_CKPT_H

#include <jansson.h>
#include <sodium.h>
#include <stddef.h>
#include <stdint.h>

#define GP_CKPT_CHUNK_SIZE (4 << 20)
#define GP_CKPT_FILES_MAX  100000
#define GP_CKPT_PATH_MAX   1024 /* bytes of a relative path */
#define GP_CKPT_NAME_HEX   65	/* 64 hex digits and a NUL */
#define GP_CKPT_LABEL_LEN  200

/* Names a chunk: OUT: out, the lowercase hex of BLAKE2b-256(data). */
void gp_ckpt_chunk_name(const void *data, size_t len,
    char out[GP_CKPT_NAME_HEX]);
/*
 * The same name, computed piece by piece as the chunk is read or
 * received: _init, _update for each piece in order, _final.
 */
typedef crypto_generichash_state gp_ckpt_hash_state;
void gp_ckpt_hash_init(gp_ckpt_hash_state *st);
void gp_ckpt_hash_update(gp_ckpt_hash_state *st, const void *data,
    size_t len);
void gp_ckpt_hash_final(gp_ckpt_hash_state *st,
    char out[GP_CKPT_NAME_HEX]);
/* 1 when name is 64 lowercase hex digits. */
int gp_ckpt_name_valid(const char *name);
/*
 * 1 when path is a safe relative path: 1 to GP_CKPT_PATH_MAX bytes, no
 * leading or trailing '/', no empty, "." or ".." component, no control
 * characters.
 */
int gp_ckpt_path_valid(const char *path);
/* Chunks a file of size bytes is cut into. */
int64_t gp_ckpt_chunk_count(int64_t size);

struct gp_ckpt_totals {
	int64_t bytes;
	int64_t files;
	int64_t chunks;
};

/*
 * Keys a stored manifest carries beside files and label (GET answers):
 * checkpoints, data set versions (owner, name) and job outputs (job_id).
 */
#define GP_CKPT_META_KEYS "version", "attempt", "created_at", "bytes", \
	"owner", "name", "job_id"

/*
 * Checks a manifest (untrusted). IN: max_bytes, the largest total size
 * (0: no limit); meta: 1 to accept GP_CKPT_META_KEYS too. OUT: *tot
 * (written only on success). Returns 0, GP_ETOOBIG (over max_bytes or
 * GP_CKPT_FILES_MAX) or GP_EINVAL with err set.
 */
int gp_ckpt_manifest_check(json_t *manifest, int64_t max_bytes, int meta,
    struct gp_ckpt_totals *tot, char *err, size_t errlen);

/*
 * Decodes the first request of a data set or output upload (untrusted;
 * tests/fuzz/fuzz_upload_request.c): {"data_set": NAME, "manifest": M}
 * with want_name, {"manifest": M} without. M is checked as by
 * gp_ckpt_manifest_check (no label, no metadata, at most max_bytes) and
 * may not list one chunk name with two sizes. OUT: name (at least
 * GP_CKPT_DATA_NAME_LEN bytes; "" without want_name), *manifest (a new
 * reference), *tot, all written only on success. Returns 0, GP_ETOOBIG
 * or GP_EINVAL with err set.
 */
#define GP_CKPT_DATA_NAME_LEN 65
int gp_upload_request_decode(const char *text, size_t len, int want_name,
    int64_t max_bytes, char *name, json_t **manifest,
    struct gp_ckpt_totals *tot, char *err, size_t errlen);

/*
 * Decodes the body of a data set's share or unshare request (untrusted):
 * {"user": NAME}, NAME a valid user name. OUT: user (GP_NAME_MAX + 1
 * bytes), written only on success. Returns 0 or GP_EINVAL with err set.
 */
int gp_share_request_decode(const char *text, size_t len, char *user,
    char *err, size_t errlen);

/*
 * Decodes the body of a quota change (untrusted): {"bytes": N} (N >= 1)
 * or {"bytes": null} (no limit). OUT: *bytes (0 for null), written only
 * on success. Returns 0 or GP_EINVAL with err set.
 */
int gp_quota_request_decode(const char *text, size_t len, int64_t *bytes,
    char *err, size_t errlen);

/*
 * The label a COMPLETE marker gives: its first line, at most
 * GP_CKPT_LABEL_LEN bytes, non-printable bytes replaced by '?'. OUT: out
 * (at least GP_CKPT_LABEL_LEN + 1 bytes).
 */
void gp_ckpt_label(const char *text, size_t len, char *out);

#endif
