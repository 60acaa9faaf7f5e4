/*
 * oci.h: container images as the OCI image specification and Docker's
 * registry formats describe them: content digests, descriptors, image
 * manifests, indexes (multi-platform manifest lists), image configs,
 * `docker save`'s manifest.json, and image references
 * ("registry:5000/lab/pytorch:2.1@sha256:..."). Every decoder here is fed
 * bytes from outside (archives, registries, the coordinator), so each is
 * strict about types and bounds, names the field at fault, and never
 * trusts a length (tests/fuzz/fuzz_oci.c, tests/unit/test_oci.c).
 */
#ifndef GP_OCI_H
#define GP_OCI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* "sha256:" and 64 lowercase hex digits, and the NUL. */
#define GP_OCI_DIGEST_LEN     71
#define GP_OCI_DIGEST_SIZE    72
#define GP_OCI_MEDIA_TYPE_MAX 127

/* Bounds (docs/images.md). */
#define GP_OCI_LAYERS_MAX  128          /* layers in one image */
#define GP_OCI_JSON_MAX    (4 << 20)    /* manifest, index, config */
#define GP_OCI_LAYER_MAX   (64LL << 30) /* one compressed layer */
#define GP_OCI_INDEX_MAX   256          /* manifests in one index */
#define GP_OCI_STRINGS_MAX 1024         /* Env, Entrypoint, Cmd items */
#define GP_OCI_STRING_MAX  32768        /* one such item */
#define GP_IMAGE_NAME_MAX  255          /* "lab/pytorch:2.1" */

#define GP_OCI_MT_MANIFEST  "application/vnd.oci.image.manifest.v1+json"
#define GP_OCI_MT_INDEX     "application/vnd.oci.image.index.v1+json"
#define GP_OCI_MT_CONFIG    "application/vnd.oci.image.config.v1+json"
#define GP_OCI_MT_LAYER     "application/vnd.oci.image.layer.v1.tar"
#define GP_OCI_MT_LAYER_GZ  "application/vnd.oci.image.layer.v1.tar+gzip"
#define GP_OCI_MT_LAYER_ZST "application/vnd.oci.image.layer.v1.tar+zstd"
#define GP_DOCKER_MT_MANIFEST                                                  \
	"application/vnd.docker.distribution.manifest.v2+json"
#define GP_DOCKER_MT_LIST                                                      \
	"application/vnd.docker.distribution.manifest.list.v2+json"
#define GP_DOCKER_MT_CONFIG "application/vnd.docker.container.image.v1+json"
#define GP_DOCKER_MT_LAYER  "application/vnd.docker.image.rootfs.diff.tar.gzip"

/* 1 when text is "sha256:" and 64 lowercase hex digits. */
int gp_oci_digest_valid(const char *text);
/* Writes "sha256:<hex>" of 32 hash bytes into out (GP_OCI_DIGEST_SIZE). */
void gp_oci_digest_format(const unsigned char hash[32], char *out);
/* The digest of data (SHA-256). */
void gp_oci_digest_of(const void *data, size_t len, char *out);

/* What a descriptor points to: one blob. */
struct gp_oci_descriptor {
	char media_type[GP_OCI_MEDIA_TYPE_MAX + 1];
	char digest[GP_OCI_DIGEST_SIZE];
	int64_t size;
	/* In an index only ("" when absent). */
	char os[32];
	char arch[32];
	char variant[32];
};

enum gp_oci_kind {
	GP_OCI_UNKNOWN = 0,
	GP_OCI_MANIFEST, /* an image manifest (OCI or Docker v2 schema 2) */
	GP_OCI_INDEX,    /* an image index or Docker manifest list */
};

/*
 * What a manifest-like document is, from its mediaType field, else the
 * content type it came with (may be NULL), else its shape ("layers" or
 * "manifests"). GP_OCI_UNKNOWN when it is none of them or not JSON.
 */
enum gp_oci_kind gp_oci_detect(const char *text, size_t len,
    const char *content_type);

struct gp_oci_manifest {
	char media_type[GP_OCI_MEDIA_TYPE_MAX + 1]; /* "" when absent */
	struct gp_oci_descriptor config;
	struct gp_oci_descriptor *layers; /* nlayers, owned */
	int nlayers;
};

/*
 * Decodes an image manifest: schemaVersion 2, a config descriptor of a
 * known config type (at most GP_OCI_JSON_MAX bytes), 1..GP_OCI_LAYERS_MAX
 * layers of known layer types (tar, tar+gzip, tar+zstd; no foreign
 * "urls"), each 1..GP_OCI_LAYER_MAX bytes with a sha256 digest. OUT: m
 * (zeroed first; release with gp_oci_manifest_fini whatever the result),
 * err. Returns 0 or GP_EINVAL.
 */
int gp_oci_manifest_decode(const char *text, size_t len,
    struct gp_oci_manifest *m, char *err, size_t errlen);
void gp_oci_manifest_fini(struct gp_oci_manifest *m);
/* Config plus layer sizes. */
int64_t gp_oci_manifest_bytes(const struct gp_oci_manifest *m);

struct gp_oci_index {
	struct gp_oci_descriptor *manifests; /* n, owned */
	int n;
};

/*
 * Decodes an image index / manifest list (schemaVersion 2, 1..
 * GP_OCI_INDEX_MAX entries with digest, size and media type; platform
 * optional). Same contract as the manifest decoder.
 */
int gp_oci_index_decode(const char *text, size_t len, struct gp_oci_index *idx,
    char *err, size_t errlen);
void gp_oci_index_fini(struct gp_oci_index *idx);
/*
 * Picks the image manifest for os/arch (e.g. "linux", "amd64") from an
 * index. An entry without a platform is taken only when it is the only
 * image manifest. OUT: *out. Returns 0, or GP_ENOENT with err listing
 * the platforms the index offers.
 */
int gp_oci_index_pick(const struct gp_oci_index *idx, const char *os,
    const char *arch, struct gp_oci_descriptor *out, char *err, size_t errlen);

/* What the agent needs of an image config ("config" object). */
struct gp_oci_image_config {
	char **env;        /* "K=V", NULL-ended; NULL when absent */
	char **entrypoint; /* NULL-ended or NULL */
	char **cmd;        /* NULL-ended or NULL */
	char *workdir;     /* or NULL */
	char *user;        /* or NULL */
	char os[32];       /* "" when absent */
	char arch[32];
	int ndiff_ids; /* rootfs.diff_ids entries */
};

/*
 * Decodes an image config. Env items must be "K=V" with a valid name,
 * WorkingDir absolute, every string free of NUL and bounded. OUT: c
 * (zeroed first; release with gp_oci_config_fini), err. Returns 0 or
 * GP_EINVAL.
 */
int gp_oci_config_decode(const char *text, size_t len, struct gp_oci_image_config *c,
    char *err, size_t errlen);
void gp_oci_config_fini(struct gp_oci_image_config *c);

/* One image of a `docker save` archive (manifest.json). */
struct gp_docker_save_image {
	char *config;  /* path in the archive of the config JSON */
	char **layers; /* nlayers paths of layer tars, bottom first */
	int nlayers;
	char **tags; /* ntags "name:tag" (RepoTags), may be 0 */
	int ntags;
};
struct gp_docker_save {
	struct gp_docker_save_image *images;
	int n;
};

/*
 * Decodes `docker save`'s manifest.json: an array of 1..64 objects with
 * Config, Layers (1..GP_OCI_LAYERS_MAX) and RepoTags (array or null);
 * every path must be a safe relative path (gp_archive_path_clean). OUT:
 * ds (release with gp_docker_save_fini whatever the result).
 */
int gp_docker_save_decode(const char *text, size_t len,
    struct gp_docker_save *ds, char *err, size_t errlen);
void gp_docker_save_fini(struct gp_docker_save *ds);

/*
 * Cleans a path inside an archive: drops "./" and repeated slashes.
 * Refuses (GP_EINVAL, err says why) an empty path, an absolute one, a
 * ".." component, control characters, more than 4096 bytes. OUT: out
 * (outlen bytes; "" for the archive's root "./").
 */
int gp_archive_path_clean(const char *path, char *out, size_t outlen, char *err,
    size_t errlen);

/* An image reference, parsed as Docker parses it. */
struct gp_image_ref {
	char registry[256];   /* "127.0.0.1:5000", "registry-1.docker.io" */
	char repository[256]; /* "test/busybox", "library/busybox" */
	char tag[129];        /* "" when none */
	char digest[GP_OCI_DIGEST_SIZE]; /* "" when none */
	int explicit_registry;           /* the text named a registry */
};

/*
 * Parses "[REGISTRY/]REPOSITORY[:TAG][@sha256:HEX]". REGISTRY is the first
 * component when it has a '.' or a ':' or is "localhost"; otherwise
 * Docker Hub ("docker.io" becomes "registry-1.docker.io", and a
 * one-component repository gets "library/"). Repository components are
 * lowercase [a-z0-9] separated by '.', '_', "__" or '-' runs; a tag is
 * [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. Returns 0 or GP_EINVAL with err.
 */
int gp_image_ref_parse(const char *text, struct gp_image_ref *ref, char *err,
    size_t errlen);

/*
 * A name in the coordinator's image store: "NAME[:TAG]" with NAME as a
 * reference's registry and repository as written (no Docker Hub
 * rewriting) and ":latest" added when no tag is given. OUT: out
 * (GP_IMAGE_NAME_MAX + 1 bytes). Refuses a digest ('@'). Returns 0 or
 * GP_EINVAL with err.
 */
int gp_image_name_normalize(const char *text, char *out, size_t outlen,
    char *err, size_t errlen);

#endif
