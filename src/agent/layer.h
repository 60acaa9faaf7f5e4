/*
 * layer.h: unpacking one image layer (a tar, plain, gzip or zstd, read
 * with libarchive) into a directory of its own, safely, for overlayfs.
 *
 * Every entry is checked before anything is written (gp_layer_entry_check,
 * pure, fuzzed with the rest of the scan in tests/fuzz/fuzz_layer.c):
 * absolute paths, ".." components, device nodes, fifos and sockets are
 * refused; a symbolic link whose target climbs above the layer's root
 * (resolved from the link's own directory) is refused; a hard link must
 * name a regular file unpacked earlier from the same layer. Writing never
 * follows a symbolic link: each entry's directory is opened with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so an entry that would
 * pass through a link (created by an earlier entry) is refused too.
 * Set-user-ID and set-group-ID bits are dropped, owner and extended
 * attributes of the archive are not applied (files belong to the agent;
 * no trusted.* attribute ever comes from an image).
 *
 * Whiteouts become overlayfs whiteouts: ".wh.NAME" a 0/0 character device
 * NAME, ".wh..wh..opq" the opaque attribute on its directory
 * (trusted.overlay.opaque = y as root, else user.overlay.opaque).
 *
 * Decompression bombs: the unpacked bytes, the entries and the ratio of
 * the uncompressed stream to the compressed layer are bounded while
 * reading, so an endless stream is cut off early. Whatever fails, the
 * target directory is removed: nothing is left behind.
 */
#ifndef GP_AGENT_LAYER_H
#define GP_AGENT_LAYER_H

#include <stddef.h>
#include <stdint.h>

struct gp_layer_limits {
	int64_t max_bytes;   /* file data, in all (default 64 GiB) */
	int64_t max_entries; /* default 1,000,000 */
	int64_t max_ratio;   /* uncompressed stream / compressed size */
	int64_t ratio_floor; /* no ratio check below this many bytes */
};

/* The defaults above; ratio 200 past 64 MiB. */
void gp_layer_limits_default(struct gp_layer_limits *lim);

struct gp_layer_stats {
	int64_t entries;
	int64_t bytes;        /* file data written */
	int64_t stream_bytes; /* uncompressed tar stream read */
	int whiteouts;
	int opaques;
};

/* What an entry asks for, once checked. */
enum gp_layer_action {
	GP_LAYER_SKIP = 0, /* the root directory itself */
	GP_LAYER_FILE,
	GP_LAYER_DIR,
	GP_LAYER_SYMLINK,
	GP_LAYER_HARDLINK,
	GP_LAYER_WHITEOUT, /* clean names the path to hide */
	GP_LAYER_OPAQUE,   /* clean names the directory made opaque */
};

/*
 * The pure check of one archive entry. IN: path (as in the archive),
 * type (the S_IFMT bits of its mode), link (symlink target or hard link
 * target, NULL when none). OUT: clean (the cleaned relative path,
 * cleanlen bytes), clean_link (for hard links: the cleaned target),
 * *action. Returns 0, or GP_EINVAL with err saying why it is refused.
 */
int gp_layer_entry_check(const char *path, unsigned type, const char *link,
    char *clean, size_t cleanlen, char *clean_link, size_t linklen,
    enum gp_layer_action *action, char *err, size_t errlen);

/*
 * Unpacks the layer file at blob into dir (created here, 0755; it must
 * not exist). lim may be NULL (the defaults). OUT: *st. Returns 0;
 * GP_EINVAL when the archive is refused (err names the entry and the
 * check), GP_ETOOBIG for a bomb, GP_EIO for a local failure; on any
 * failure dir is removed.
 */
int gp_layer_unpack(const char *blob, const char *dir,
    const struct gp_layer_limits *lim, struct gp_layer_stats *st, char *err,
    size_t errlen);

/*
 * Every check of gp_layer_unpack on an archive in memory, writing
 * nothing (the fuzz harness's entry point). Same returns.
 */
int gp_layer_scan_memory(const void *data, size_t len,
    const struct gp_layer_limits *lim, struct gp_layer_stats *st, char *err,
    size_t errlen);

#endif
