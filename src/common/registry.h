/*
 * registry.h: a client of the OCI distribution API (the "Docker Registry
 * HTTP API V2") on libcurl, enough to pull: manifests by tag or digest,
 * blobs by digest, and the authentication registries ask for: Basic, or
 * the Bearer token flow (a 401 with `WWW-Authenticate: Bearer realm=...,
 * service=..., scope=...` sends the client to the realm for a token).
 *
 * Nothing a registry says is trusted: a manifest is at most
 * GP_OCI_JSON_MAX bytes and is checked against the digest it was asked
 * by; a blob must have exactly its descriptor's size and digest, and the
 * download stops as soon as it goes past that size (an endless body); a
 * transfer that stalls for a minute is given up.
 */
#ifndef GP_REGISTRY_H
#define GP_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "oci.h"
#include "util.h"

enum gp_auth_scheme {
	GP_AUTH_NONE = 0,
	GP_AUTH_BASIC,
	GP_AUTH_BEARER
};

struct gp_auth_challenge {
	enum gp_auth_scheme scheme;
	char realm[1024];
	char service[256];
	char scope[512];
	char error[64];
};

/*
 * Parses one WWW-Authenticate value (RFC 7235: scheme, then auth-params
 * of token or quoted-string values). Of several challenges in one value
 * the first Bearer one is taken, else the first Basic one. Unknown
 * parameters are ignored; over-long values refuse the header. OUT: c.
 * Returns 0, or GP_EINVAL (malformed, or no Basic/Bearer challenge).
 */
int gp_auth_challenge_parse(const char *header, struct gp_auth_challenge *c);

struct gp_registry_opts {
	int plain_http;       /* http:// instead of https:// */
	const char *ca_file;  /* PEM CA bundle, or NULL: the system's */
	const char *username; /* Basic credentials, or NULL */
	const char *password;
	const char *user_agent; /* or NULL */
};

struct gp_registry;

/* A client for ref's registry and repository (copied). NULL: no memory. */
struct gp_registry *gp_registry_new(const struct gp_image_ref *ref,
    const struct gp_registry_opts *opts);
void gp_registry_free(struct gp_registry *r);

/*
 * GET /v2/REPO/manifests/REFERENCE (a tag or a digest), accepting OCI and
 * Docker manifests and indexes. OUT: body (emptied first), content_type,
 * digest: the SHA-256 of the bytes received; when reference is a digest
 * they must hash to it (else GP_EPROTO). Returns 0 or a GP_E* with err.
 */
int gp_registry_manifest(struct gp_registry *r, const char *reference,
    struct gp_buf *body, char *content_type, size_t ctlen, char *digest,
    char *err, size_t errlen);

/*
 * GET /v2/REPO/blobs/DIGEST, following redirects, into sink (called with
 * each piece; a non-zero return aborts). The body must be exactly
 * d->size bytes hashing to d->digest: GP_EPROTO otherwise (err names
 * which). OUT: *received. Returns 0 or a GP_E* with err.
 */
int gp_registry_blob(struct gp_registry *r, const struct gp_oci_descriptor *d,
    int (*sink)(void *arg, const char *data, size_t len), void *arg,
    int64_t *received, char *err, size_t errlen);

#endif
