/*
 * datacache.h: the provider's cache of data set versions (docs/data.md,
 * "On the provider"). A version a job mounts is materialised once into a
 * read-only directory tree under the agent's work directory and kept for
 * the next job that mounts it, which then starts without a transfer.
 *
 * Content-addressed: a new version is built from the chunks the cache
 * already holds (files of other versions, read back and verified against
 * their BLAKE2b-256 names; a whole unchanged file is hard-linked) and only
 * the rest is fetched from the coordinator, every chunk verified. The
 * cache has a size cap; when a version needs room, the least recently
 * used versions no running job holds are evicted. A version in use is
 * never evicted.
 *
 * The coordinator still authorises every use: the caller fetches the
 * version's manifest through the job's route (which checks that the job's
 * owner may read the data set) before gp_datacache_acquire, even when the
 * version is cached.
 *
 * Thread-safe; acquire blocks (network, disk) and is called from the
 * provider's preparation workers.
 */
#ifndef GP_AGENT_DATACACHE_H
#define GP_AGENT_DATACACHE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "transfer.h"

struct gp_datacache;

/*
 * Opens (creating, mode 0700) the cache in dir, keeping the versions a
 * previous run left complete and removing unfinished ones, evicting down
 * to max_bytes. Returns NULL with err set.
 */
struct gp_datacache *gp_datacache_new(const char *dir, int64_t max_bytes,
    char *err, size_t errlen);
void gp_datacache_free(struct gp_datacache *c);

/* What making one version ready cost. */
struct gp_datacache_stats {
	int64_t files, bytes; /* the version's */
	int64_t fetched;      /* bytes fetched from the coordinator */
	int64_t copied;       /* bytes copied from other cached versions */
	int64_t linked;       /* bytes of whole files hard-linked */
	int cached;           /* 1: ready already, nothing was done */
	int64_t elapsed_ms;
};

/* Which version of which data set, and where its chunks come from. */
struct gp_datacache_source {
	const char *owner, *name;
	int64_t version;
	json_t *manifest; /* checked (gp_ckpt_manifest_check), with meta */
	const struct gp_transfer_peer *peer;
	const char *chunk_prefix; /* GET prefix + name: the chunk's bytes */
};

/*
 * Makes the version ready (cached, or materialised from cached chunks and
 * the coordinator) and holds it until gp_datacache_release. OUT: *tree
 * (malloc'd: the directory to mount), *st. Returns 0, GP_ETOOBIG (larger
 * than the cap, or no room: the rest is in use), or GP_E* with err set.
 */
int gp_datacache_acquire(struct gp_datacache *c,
    const struct gp_datacache_source *src, char **tree,
    struct gp_datacache_stats *st, char *err, size_t errlen);
void gp_datacache_release(struct gp_datacache *c, const char *owner,
    const char *name, int64_t version);

/* {"dir", "max_bytes", "bytes", "versions", "in_use", "fetched_bytes"}. */
json_t *gp_datacache_status(struct gp_datacache *c);

/* ---- the eviction rule, pure (tests/unit/test_datacache.c) ---- */

struct gp_datacache_view {
	int64_t bytes;
	int64_t last_used; /* larger: more recent */
	int in_use;        /* held by a job or being built: never evicted */
};

/*
 * Chooses the entries to evict so that need more bytes fit under cap:
 * the least recently used entries not in use, oldest first, as few as
 * will do. OUT: victims (indices into e, room for n), *nvictims. Returns
 * 0, or GP_ETOOBIG when need cannot fit even with every unused entry
 * evicted (nothing is chosen then).
 */
int gp_datacache_plan(const struct gp_datacache_view *e, size_t n, int64_t cap,
    int64_t need, size_t *victims, size_t *nvictims);

#endif
