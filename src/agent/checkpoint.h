/*
 * checkpoint.h: moving a job's checkpoint directory to and from the
 * coordinator's content-addressed checkpoint store (docs/checkpoints.md).
 *
 * The job's side of the protocol: a job saves into $GPUPOOL_CHECKPOINT_DIR
 * whenever it likes and writes the file COMPLETE last (ideally by renaming
 * a temporary file into place). A version is uploaded only when it is
 * consistent: COMPLETE exists, no other file is newer than COMPLETE, and
 * nothing changed (size, mtime, inode of any file) between the start and
 * the end of reading it. The job is never stopped for an upload.
 *
 * These calls block (they do network I/O) and are thread-safe: each call
 * uses its own HTTP clients. The agent runs them on its checkpoint
 * threads, never on the executor thread.
 */
#ifndef GP_AGENT_CHECKPOINT_H
#define GP_AGENT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

#endif
