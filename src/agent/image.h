/*
 * image.h: the agent's image cache (docs/images.md, "On the provider").
 *
 * Before a container job starts, gp_image_prepare() decides whether the
 * owner lets the image run (the policy's images setting and trusted keys:
 * the agent checks every signature itself), fetches what is missing from
 * the coordinator (the manifest, the config, each layer), verifies every
 * byte against its digest, unpacks each layer once into a directory of
 * its own (agent/layer.c) and fills a struct gp_container_image for the
 * executor. Layers stay cached (WORK/images/layers/<hex>) for later jobs,
 * up to a size cap, evicting the least recently used; a layer a running
 * job uses is never evicted.
 *
 * It blocks on the network: call it from a worker thread, never from the
 * poll or heartbeat threads. Every function is thread-safe; two jobs that
 * want the same layer at once fetch it once.
 */
#ifndef GP_AGENT_IMAGE_H
#define GP_AGENT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/assignment.h"
#include "agent/layer.h"
#include "sign.h"

struct gp_image_cache;
struct gp_image_hold;

/* What the owner lets run (agent/policy.h's images and trust-key). */
struct gp_image_trust {
	int images; /* enum gp_image_policy */
	const struct gp_trusted_key *keys;
	int nkeys;
};

/* Where to fetch a job's image: the coordinator, as that attempt. */
struct gp_image_source {
	const char *url;
	const char *token;
	const char *ca_file;
	int64_t job_id;
	int64_t attempt;
};

/* What one prepare did (for the log line and tests). */
struct gp_image_prepared {
	int layers;
	int cached;            /* layers found in the cache */
	int fetched;           /* layers transferred */
	int64_t fetched_bytes; /* blob bytes transferred (all kinds) */
	int64_t elapsed_ms;
	char trusted_by[300]; /* how the signature check passed */
};

struct gp_image_cache_stats {
	int64_t bytes;     /* unpacked layers held */
	int64_t max_bytes; /* the cap */
	int layers;
	int in_use; /* layers running jobs use */
	int64_t hits, misses, evictions;
	int64_t fetched_bytes; /* since start */
};

/*
 * Opens (creating) the cache in dir with a cap of max_bytes (> 0);
 * removes what an interrupted unpack left and loads what is cached.
 * lim: the unpack limits (NULL: defaults). Returns NULL with err.
 */
struct gp_image_cache *gp_image_cache_new(const char *dir, int64_t max_bytes,
    const struct gp_layer_limits *lim, char *err, size_t errlen);
void gp_image_cache_free(struct gp_image_cache *c);

/*
 * Makes image digest ready for a job. OUT: *img (the executor's view;
 * owned by the caller), *hold (the layers it uses, to release with
 * gp_image_release when the job is over), *st, why.
 * Returns 0, or:
 *   GP_EPERM   the owner's policy refuses it: not allowed, unsigned,
 *              signed by no trusted key, or a signature that does not
 *              verify (why says which);
 *   GP_EINVAL  the image is bad or was tampered with: a manifest, config
 *              or layer that does not hash to its digest or has another
 *              size, a malformed manifest, a layer that unpacks to
 *              something refused, another platform;
 *   GP_ETOOBIG larger than the cache;
 *   GP_ECONN, GP_ETIMEDOUT, GP_EIO  the coordinator or the disk failed
 *              (worth another try elsewhere).
 */
int gp_image_prepare(struct gp_image_cache *c,
    const struct gp_image_source *src, const char *digest,
    const struct gp_image_trust *trust, struct gp_container_image **img,
    struct gp_image_hold **hold, struct gp_image_prepared *st, char *why,
    size_t whylen);

/* Releases a job's layers (NULL is fine); they may be evicted again. */
void gp_image_release(struct gp_image_cache *c, struct gp_image_hold *hold);

void gp_image_cache_stats(struct gp_image_cache *c,
    struct gp_image_cache_stats *out);

#endif
