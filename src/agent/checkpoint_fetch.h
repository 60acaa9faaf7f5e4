/*
 * checkpoint_fetch.h: the download half of checkpoint.h, for any source
 * of manifests and chunks: the agent's routes (gp_ckpt_download) and the
 * user's (`gpupool checkpoint get`) differ only in their paths.
 */
#ifndef GP_AGENT_CHECKPOINT_FETCH_H
#define GP_AGENT_CHECKPOINT_FETCH_H

#include "agent/checkpoint.h"

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
 * set, and leaves dir empty on failure.
 */
int gp_ckpt_fetch(const struct gp_ckpt_source *src, const char *dir,
    uid_t uid, gid_t gid, struct gp_ckpt_mark *mark,
    struct gp_ckpt_stats *st, char *err, size_t errlen);

#endif
