/*
 * blob.h: the coordinator's one blob store (blob.c): content-addressed
 * files, received streamed and verified, stored whole and durable,
 * deduplicated, and garbage-collected from their users' references.
 *
 * Two stores are open in a coordinator (blob_init):
 *   blob_chunks  DATA/checkpoints/<owner>/chunks/ab/<hex>, BLAKE2b-256,
 *                per owner (a user): checkpoints (ckpt.c), data sets and
 *                job outputs (data*.c) share it, so a chunk is stored
 *                once per user whichever of them uses it
 *   blob_images  DATA/images/blobs/ab/<hex>, sha256, pool-wide: image
 *                manifests, configs and layers (image.c)
 * A store knows files, never what they mean: which blobs are kept is
 * asked of its users (struct blob_user) at each GC pass.
 *
 * Locking: a store's lock (blob_lock) guards its files' life: the GC
 * holds it from its users' references to the last removal, and a user
 * that checks that blobs exist and then records an object naming them
 * holds it across both. Order: blob_lock, then the user's own lock (its
 * database), then state.lock; never the other way round.
 */
#ifndef GP_COORD_BLOB_H
#define GP_COORD_BLOB_H

#include <jansson.h>
#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

struct stat;
struct MHD_Connection;
struct coord_config;

enum blob_hash {
	BLOB_BLAKE2B_256, /* crypto_generichash, 32 bytes */
	BLOB_SHA256,      /* crypto_hash_sha256 */
};

/* What a blob name is: the lowercase hex of its hash. */
#define BLOB_HEX_LEN 64

struct blob_store_config {
	const char *what;   /* "checkpoint", "image": logs and errors */
	const char *root;   /* the store's directory */
	const char *subdir; /* "chunks" or "blobs": where named blobs go */
	enum blob_hash hash;
	int per_owner; /* blobs under root/<owner>/ (else root/) */
	int direct_io; /* O_DIRECT writes where the file system can */
	/*
	 * Threads that flush and name a received blob behind its PUT's
	 * answer (0: before it).
	 */
	int store_threads;
	/*
	 * 1: a named blob's directory entry is made durable by
	 * blob_sync_owner (the commit's), not by its PUT.
	 */
	int defer_dir_sync;
	int64_t store_delay_ms; /* tests only: each store behind waits */
	/*
	 * Tests only (GPUPOOL_TEST_GC_PAUSE_MS): each owner's GC pass
	 * waits this long between its reference scan and its fence, so
	 * that a test can pause the leader there (test_gc_fence_pg.sh).
	 */
	int64_t gc_pause_ms;
	int64_t grace_ms;       /* garbage younger than this stays */
	int64_t gc_period_ms;
	void (*on_stored)(size_t bytes); /* metrics; may be NULL */
};

struct blob_store;

/*
 * A user of a store: what it keeps. Both run on the store's GC thread.
 * expire: before each pass, without blob_lock: drops the user's own
 *   objects that have expired and marks their owners (blob_gc_mark).
 * collect: with blob_lock held: adds to refs ({hex: true}) every blob
 *   the owner's objects (and uploads in progress) reference. A failure
 *   (GP_EIO) keeps every blob of the owner for this pass.
 * fence: with blob_lock held, after every user's collect and before
 *   anything is removed: 0 while this coordinator still leads (the
 *   records it scanned are the pool's); else the pass removes nothing
 *   (with several coordinators: gp_meta_fence, an empty fenced
 *   transaction, which also steps a fenced-off coordinator down).
 *   NULL: always 0.
 */
struct blob_user {
	const char *name;
	void (*expire)(void);
	int (*collect)(const char *owner, json_t *refs);
	int (*fence)(void);
};

/* blob.c */
extern struct blob_store *blob_chunks, *blob_images;

/*
 * Opens both stores under cfg->data_dir (the test and bench hooks of
 * docs/testing.md read here). The GC threads start with blob_start, once
 * every user has been added. Returns 0, GP_EIO or GP_ENOMEM.
 */
int blob_init(const struct coord_config *cfg);
int blob_start(void);
/* Stores what is queued, stops the threads and closes both stores. */
void blob_stop(void);

/* Adds a user (its struct must outlive the store); before blob_start. */
int blob_add_user(struct blob_store *s, const struct blob_user *user);

/* The store's lock (see the top). */
void blob_lock(struct blob_store *s);
void blob_unlock(struct blob_store *s);

/* The path of a blob (owner ignored by a pool-wide store). */
void blob_path(const struct blob_store *s, const char *owner, const char *hex,
    char *out, size_t len);
/*
 * stat(2) of a blob, waiting first, when it is not there, for its store
 * behind an answered PUT. Returns 0 or -1 (errno set).
 */
int blob_stat(struct blob_store *s, const char *owner, const char *hex,
    struct stat *sb);
/*
 * 0 when the blob is stored, and then young again, so that the GC leaves
 * it to the commit that counts on it ("missing"); -1 when it is not.
 * Takes blob_lock (unless the caller holds it: locked = 1).
 */
int blob_touch(struct blob_store *s, const char *owner, const char *hex,
    int locked);
/* Reads a blob of at most max bytes. OUT: *data (caller frees), *len. */
int blob_read(const struct blob_store *s, const char *owner, const char *hex,
    size_t max, char **data, size_t *len);
/*
 * Answers a blob's bytes (sendfile), or 404 when it is not stored ("no
 * chunk HEX" in a per-owner store, "blob sha256:HEX is not stored" in
 * the image store: the answers the API always gave).
 */
enum MHD_Result blob_reply(struct MHD_Connection *conn,
    const struct blob_store *s, const char *owner, const char *hex);
/*
 * "missing": the names in list (a JSON array of strings, checked by the
 * caller; each name's first skip characters are not part of the blob's
 * hex, as "sha256:") that are not stored, as a new array; the stored ones
 * are made young again, so the GC leaves them to the commit that counts
 * on them. Takes blob_lock.
 */
json_t *blob_missing(struct blob_store *s, const char *owner, json_t *list,
    size_t skip);
/*
 * Makes durable the directory entries of the owner's blobs named since
 * the last call: whoever records, durably, an object that references an
 * owner's blobs calls it first, with blob_lock held. Returns 0 or GP_EIO
 * (the directories stay to be synced).
 */
int blob_sync_owner(struct blob_store *s, const char *owner);
/* The owner's blobs may have become garbage: look at them next pass. */
void blob_gc_mark(struct blob_store *s, const char *owner);
/* A pass now rather than at the end of the period. */
void blob_gc_kick(struct blob_store *s);
/* One pass on the caller's thread (the GC thread's; tests). */
void blob_gc_run(struct blob_store *s);

/*
 * A blob PUT being received. _new: an empty upload (NULL: out of
 * memory). _refuse records the answer (the first one wins) and drops
 * what was written. _open starts receiving hex for owner, at most limit
 * bytes (beyond: 413 with too_big); a blob stored already is made young
 * again and its body read and dropped. _data hashes and writes. _end
 * verifies and stores: see enum blob_end. _free removes what an aborted
 * upload left.
 */
struct blob_upload;

enum blob_end {
	BLOB_STORED,   /* new: whole and verified (flushed behind) */
	BLOB_EXISTED,  /* it was there already; the body was dropped */
	BLOB_REFUSED,  /* refused earlier: blob_upload_refused says */
	BLOB_MISMATCH, /* its content hashes to another name */
	BLOB_WRITE_FAILED,
	BLOB_STORE_FAILED,
};

struct blob_upload *blob_upload_new(void);
void blob_upload_refuse(struct blob_upload *u, int status, const char *msg);
/* A 409 whose answer tells the agent to kill its stale attempt. */
void blob_upload_refuse_kill(struct blob_upload *u, const char *msg);
int blob_upload_kill(const struct blob_upload *u);
void blob_upload_open(struct blob_upload *u, struct blob_store *s,
    const char *owner, const char *hex, int64_t limit, const char *too_big);
void blob_upload_data(struct blob_upload *u, const char *data, size_t len);
/* OUT: got (the content's hex, BLOB_HEX_LEN + 1 bytes) on a mismatch. */
enum blob_end blob_upload_end(struct blob_upload *u, char *got);
/*
 * The HTTP status of a refusal (0: none) and its message. As
 * api_stream's release: blob_upload_release (a void *).
 */
int blob_upload_refused(const struct blob_upload *u, const char **msg);
int64_t blob_upload_len(const struct blob_upload *u);
/* The blob's name (hex) as given to _open ("" before). */
const char *blob_upload_name(const struct blob_upload *u);
void blob_upload_free(struct blob_upload *u);
void blob_upload_release(void *stream);
/* The upload's limit (as given to _open, or 0 before it). */
int64_t blob_upload_limit(const struct blob_upload *u);

#endif
