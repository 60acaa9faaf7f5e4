/*
 * transfer.h: moving directory trees to and from the coordinator's
 * content-addressed chunk store (docs/api.md, "Checkpoints" and "Data
 * sets"). A tree is walked without following links, its files are cut
 * into chunks named by their BLAKE2b-256 hash (common/ckpt.h), only the
 * chunks the coordinator lacks are sent, and a manifest names the rest;
 * a fetch writes a manifest's files back, verifying every chunk.
 *
 * Three users share it: checkpoints (the agent: gp_ckpt_upload and
 * gp_ckpt_download below), data sets (`gpupool data put`, and the
 * agent's data cache, which uses the transfer pool directly) and job
 * outputs (the agent uploads them, `gpupool fetch` fetches them).
 *
 * These calls block (they do network I/O) and are thread-safe: each call
 * uses its own HTTP clients. The agent runs them on its checkpoint
 * threads, never on the executor thread.
 */
#ifndef GP_TRANSFER_H
#define GP_TRANSFER_H

#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gp_http_client;

/* ---- checkpoints (docs/checkpoints.md) ---- */

/*
 * The job's side of the protocol: a job saves into $GPUPOOL_CHECKPOINT_DIR
 * whenever it likes and writes the file COMPLETE last (ideally by renaming
 * a temporary file into place). A version is uploaded only when it is
 * consistent: COMPLETE exists, no other file is newer than COMPLETE, and
 * nothing changed (size, mtime, inode of any file) between the start and
 * the end of reading it. The job is never stopped for an upload.
 */
#define GP_CKPT_MARKER "COMPLETE"
#define GP_CKPT_LABEL_MAX 200

/* Where to upload to / download from, for one attempt of one job. */
struct gp_ckpt_target {
	const char *url;	/* coordinator base URL */
	const char *token;	/* the agent's provider token; never logged */
	const char *ca_file;	/* or NULL */
	int64_t job_id;
	int64_t attempt;
	int parallel;		/* concurrent chunk transfers; 0: default 4 */
};

/*
 * What was last uploaded from a directory, so an unchanged version is not
 * sent again. Zero it before the first call; gp_ckpt_upload updates it.
 */
struct gp_ckpt_mark {
	int64_t marker_mtime_ns;
	int64_t marker_ino;
	int64_t marker_size;
	int64_t version;	/* the last version committed, 0: none */
};

struct gp_ckpt_stats {
	int64_t version;	/* committed (upload) or restored (download);
				   0: nothing was done */
	int64_t files;
	int64_t bytes;		/* total size of the version */
	int64_t bytes_sent;	/* what went over the wire (new chunks) */
	int64_t chunks;
	int64_t chunks_sent;
	int64_t elapsed_ms;
	char label[GP_CKPT_LABEL_MAX + 1]; /* COMPLETE's first line */
	char skipped[128];	/* upload: why nothing was sent ("no COMPLETE
				   marker", "unchanged", "changed while
				   reading"), "" otherwise */
};

/*
 * Uploads the directory's complete version if it is newer than *mark and
 * consistent, and commits it as the next version of the job. Returns 0
 * with st->version > 0 when a version was committed, 0 with
 * st->version == 0 and st->skipped set when there was nothing to send, or
 * GP_E* with err set (network, refused by the coordinator: a 409 means
 * the attempt is stale). A failure part-way leaves the previous version
 * in force on the coordinator; a retry sends only the missing chunks.
 * files are read as the agent (root) but the directory is the job's:
 * symlinks and special files are skipped, never followed.
 */
int gp_ckpt_upload(const struct gp_ckpt_target *t, const char *dir,
    struct gp_ckpt_mark *mark, struct gp_ckpt_stats *st, char *err,
    size_t errlen);

/*
 * Downloads the job's latest version into dir (which must exist and be
 * empty), verifying every chunk, and chowns what it creates to
 * uid:gid. OUT: *mark describes the restored version (so it is not
 * uploaded again unchanged). Returns 0 (st->version == 0 when the job has
 * no checkpoint) or GP_E* with err set; on failure dir is left empty.
 */
int gp_ckpt_download(const struct gp_ckpt_target *t, const char *dir,
    uid_t uid, gid_t gid, struct gp_ckpt_mark *mark,
    struct gp_ckpt_stats *st, char *err, size_t errlen);

/*
 * The download half for any source of manifests and chunks: the agent's
 * routes (gp_ckpt_download) and the user's (`gpupool checkpoint get`)
 * differ only in their paths.
 */
struct gp_ckpt_source {
	const char *url;
	const char *token;	   /* never logged */
	const char *ca_file;	   /* or NULL */
	const char *manifest_path; /* "/v1/jobs/7/checkpoints/latest" */
	const char *chunk_prefix;  /* "/v1/jobs/7/checkpoints/chunks/" */
	int parallel;		   /* 0: default 4 */
	/*
	 * Optional: called from the transfer threads after each chunk
	 * written, with the bytes written so far and the version's size.
	 */
	void (*progress)(void *arg, int64_t done, int64_t total);
	void *progress_arg;
};

/*
 * Fetches the manifest at src->manifest_path and its chunks into dir
 * (existing, empty), verifying every chunk; chowns what it creates to
 * uid:gid ((uid_t)-1 and (gid_t)-1: leave as is). As gp_ckpt_download:
 * returns 0 (st->version 0 when the manifest is 404) or GP_E* with err
 * set, and leaves dir empty on failure. The manifest must carry a
 * "version".
 */
int gp_ckpt_fetch(const struct gp_ckpt_source *src, const char *dir,
    uid_t uid, gid_t gid, struct gp_ckpt_mark *mark,
    struct gp_ckpt_stats *st, char *err, size_t errlen);

/* ---- any tree: data sets and job outputs ---- */

/* Who to talk to. */
struct gp_transfer_peer {
	const char *url;
	const char *token;	/* never logged */
	const char *ca_file;	/* or NULL */
	int parallel;		/* concurrent chunk transfers; 0: default 4 */
	/*
	 * Optional (gp_tree_send, gp_transfer_fetch): called from the
	 * transfer threads after each chunk, with the bytes moved so far and
	 * the total to move.
	 */
	void (*progress)(void *arg, int64_t done, int64_t total);
	void *progress_arg;
};

/* What a transfer did. */
struct gp_transfer_stats {
	int64_t files;
	int64_t bytes;		/* total size of the tree */
	int64_t chunks;
	int64_t bytes_sent;	/* over the wire (either direction) */
	int64_t chunks_sent;
	int64_t skipped;	/* links and special files left out */
	int64_t elapsed_ms;
};

/* A walked tree: the regular files beneath a directory, or one file. */
struct gp_tree;

/*
 * Walks path: a directory (every regular file beneath it, relative paths;
 * symbolic links and special files are skipped and counted, never
 * followed) or, when single_ok, one regular file (its manifest path is
 * the file's name). With only_uid other than (uid_t)-1, regular files
 * owned by anyone else are skipped and counted too: a job's directory,
 * read as root, then yields only what the job itself wrote (not a hard
 * link to a file it could not read). OUT: *out (gp_tree_free). Returns 0
 * or GP_E* with err set (GP_ETOOBIG beyond GP_CKPT_FILES_MAX files).
 */
int gp_tree_open(const char *path, int single_ok, uid_t only_uid,
    struct gp_tree **out, char *err, size_t errlen);
void gp_tree_free(struct gp_tree *t);
/* OUT: st->files, bytes, chunks, skipped. */
void gp_tree_totals(const struct gp_tree *t, struct gp_transfer_stats *st);

/*
 * Names every chunk (reads every file, parallel threads). Returns 0,
 * GP_ECONFLICT when a file changed while it was read (walk again), or
 * GP_E* with err set.
 */
int gp_tree_hash(struct gp_tree *t, int parallel, char *err, size_t errlen);

/* The manifest of a hashed tree: {"files": [...]} (a new reference). */
json_t *gp_tree_manifest(const struct gp_tree *t);

/*
 * Sends the chunks named in missing (a JSON array of names; names the
 * tree does not hold are ignored) with PUT chunk_prefix + name. OUT:
 * st->bytes_sent, st->chunks_sent (added to). Returns 0, GP_ECONFLICT
 * when a file changed since it was hashed, or GP_E* with err set (an
 * HTTP refusal as status_error maps it: 409 is GP_ECONFLICT too, 413
 * GP_ETOOBIG).
 */
int gp_tree_send(struct gp_tree *t, const struct gp_transfer_peer *peer,
    const char *chunk_prefix, json_t *missing, struct gp_transfer_stats *st,
    char *err, size_t errlen);

/*
 * Fetches the files of manifest (checked by the caller with
 * gp_ckpt_manifest_check) into dir (existing, empty), every chunk GET
 * chunk_prefix + name and verified, files created with mode
 * (mode & 0755) | 0600 and chowned to uid:gid ((uid_t)-1: leave as is).
 * Returns 0 or GP_E* with err set; on failure dir is left empty.
 */
int gp_transfer_fetch(const struct gp_transfer_peer *peer, json_t *manifest,
    const char *chunk_prefix, const char *dir, uid_t uid, gid_t gid,
    struct gp_transfer_stats *st, char *err, size_t errlen);

/*
 * One JSON request, retried on transport errors and 5xx. body may be
 * NULL. OUT: *reply (a new reference) when the answer is 200 or 201,
 * *status (0 when no answer came). Returns 0 or GP_E* with err set to
 * the coordinator's error text (GP_ENOENT for 404, GP_EPERM for 403,
 * GP_ECONFLICT for 409, GP_ETOOBIG for 413, GP_EAUTH for 401).
 */
int gp_transfer_json_call(struct gp_http_client *http, const char *method,
    const char *path, json_t *body, json_t **reply, long *status, char *err,
    size_t errlen);

/* The GP_E* for an HTTP refusal (as gp_transfer_json_call maps it). */
int gp_transfer_status_error(long status);

/* ---- the transfer pool, for other chunk-level work (the data cache) ---- */

struct gp_transfer_worker;

/* One task; returns 0 or GP_E* (after gp_transfer_fail). */
typedef int (*gp_transfer_task)(struct gp_transfer_worker *w, size_t task,
    void *ctx);

/*
 * Runs fn over tasks 0..ntasks-1 on peer->parallel threads, each with its
 * own HTTP client (need_http) and chunk buffer. Stops at the first
 * failure. OUT: *bytes (what the tasks counted with gp_transfer_count).
 * Returns 0 or the first task's GP_E* with err set.
 */
int gp_transfer_run(const struct gp_transfer_peer *peer, int need_http,
    size_t ntasks, gp_transfer_task fn, void *ctx, int64_t *bytes,
    char *err, size_t errlen);
/* The worker's GP_CKPT_CHUNK_SIZE buffer (gp_transfer_run's tasks). */
char *gp_transfer_buf(struct gp_transfer_worker *w);
/*
 * GETs prefix + name (retrying transport errors) and writes it at off in
 * fd as its bytes arrive, checking that it is want bytes hashing to name
 * (what names the file in errors). Returns 0 or GP_E* (and the pool
 * fails with the reason); on failure the bytes at off are undefined.
 */
int gp_transfer_get_chunk_into(struct gp_transfer_worker *w,
    const char *prefix, const char *name, size_t want, int fd, int64_t off,
    const char *what);
/* Records the pool's failure (the first one wins) and stops it. */
void gp_transfer_fail(struct gp_transfer_worker *w, int err, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));
/* Adds to the pool's byte counter. */
void gp_transfer_count(struct gp_transfer_worker *w, int64_t bytes);

/*
 * Opens path (relative, checked with gp_ckpt_path_valid) beneath dirfd,
 * one component at a time, never following a symbolic link. With create,
 * missing directories are made (mode dir_mode, chowned to uid:gid unless
 * uid is (uid_t)-1). Returns the fd or -1 (errno).
 */
int gp_open_beneath(int dirfd, const char *path, int flags, int mode,
    int create, int dir_mode, uid_t uid, gid_t gid);

#endif
