/*
 * image.h: the CLI's image commands' insides (cli/image.c, the commands;
 * cli/image_archive.c, reading image archives), shared with
 * tests/unit/test_image_archive.c.
 */
#ifndef GP_CLI_IMAGE_H
#define GP_CLI_IMAGE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "oci.h"
#include "util.h"

enum gp_archive_kind {
	GP_ARCHIVE_OCI = 1, /* an OCI image layout (oci-layout, index.json) */
	GP_ARCHIVE_DOCKER,  /* `docker save` (manifest.json) */
};

/* A blob of the image and where its bytes are. */
struct gp_archive_blob {
	struct gp_oci_descriptor d;
	char *entry; /* the archive entry holding it, or NULL */
	char *data;  /* or its bytes in memory (manifest, config) */
	size_t len;
};

/*
 * An image read from an archive, ready to upload: the manifest (as bytes
 * and decoded: for a docker-save archive, an OCI manifest built here),
 * its config and layers. Every digest and size here was checked against
 * the archive's bytes, except those of layers kept in the archive, which
 * are hashed while they are sent (and checked again by the coordinator).
 */
struct gp_image_archive {
	char path[PATH_MAX];
	enum gp_archive_kind kind;
	char name[GP_IMAGE_NAME_MAX + 1]; /* as the archive names it, or "" */
	struct gp_archive_blob manifest;
	struct gp_archive_blob config;
	struct gp_archive_blob *layers;
	int nlayers;
	char os[32], arch[32]; /* the config's platform */
};

/*
 * Reads the image in the archive at path (a tar, plain or gzip): an OCI
 * image layout, or `docker save` output (whose image becomes an OCI
 * manifest with uncompressed tar layers). want_name (may be NULL) picks
 * among several images of a docker-save archive. Entries are refused as
 * the layer unpacker refuses them: absolute paths, "..", links that
 * escape, devices, fifos. OUT: ia (release with _fini whatever the
 * result), err. Returns 0 or a GP_E* code.
 */
int gp_image_archive_read(const char *path, const char *want_name,
    struct gp_image_archive *ia, char *err, size_t errlen);
void gp_image_archive_fini(struct gp_image_archive *ia);

/* Reads the archive entry of one blob (see gp_image_archive_each). */
struct gp_archive_reader;
/* Up to len bytes; 0 at the end of the entry; -1 on a read error. */
long gp_archive_reader_read(void *reader, char *buf, size_t len);

/*
 * One pass over the archive: for each blob of want (a NULL-ended list of
 * pointers into ia) whose bytes are in an entry, in the archive's order,
 * calls fn(arg, blob, reader); what fn leaves unread is read after it.
 * Each entry's bytes must then hash to the blob's digest (when it has
 * one; else the digest is filled in) and have its size: GP_EINVAL with
 * err naming the blob otherwise. A non-zero return from fn stops the
 * pass with that code. Returns 0 or a GP_E* code with err.
 */
int gp_image_archive_each(struct gp_image_archive *ia,
    struct gp_archive_blob **want,
    int (*fn)(void *arg, struct gp_archive_blob *b, void *reader), void *arg,
    char *err, size_t errlen);

#endif
