/*
 * sign.h: image attestation with ed25519 (libsodium). An admin's signing
 * key signs an image's manifest digest; a provider's agent trusts some
 * public keys (its owner's policy) and runs only images one of them signed.
 *
 * What is signed (versioned and domain-separated, so a signature can
 * never be replayed as another kind of statement):
 *
 *     "gpupool-image-signature-v1\n" + "sha256:<64 hex>"
 *
 * Text forms: a public key is "ed25519:" + standard base64 of its 32
 * bytes; a signature is standard base64 of its 64 bytes. The private key
 * file (written 0600 by `gpupool key create`) is "key = value" lines:
 * name, public and secret (base64 of libsodium's 64-byte secret key).
 */
#ifndef GP_SIGN_H
#define GP_SIGN_H

#include <jansson.h>
#include <stddef.h>

#define GP_SIGN_PAYLOAD_PREFIX "gpupool-image-signature-v1\n"
#define GP_SIGN_PUBLIC_TEXT    64 /* "ed25519:" + 44 + NUL, rounded */
#define GP_SIGN_SIG_TEXT       96 /* base64 of 64 bytes + NUL, rounded */
#define GP_SIGN_KEYFILE_MAX    4096
#define GP_SIGN_NAME_MAX       64

struct gp_sign_key {
	char name[GP_SIGN_NAME_MAX + 1];
	char public_text[GP_SIGN_PUBLIC_TEXT];
	unsigned char pk[32];
	unsigned char sk[64]; /* secret: wipe with gp_sign_key_wipe */
};

/* A key a provider trusts. */
struct gp_trusted_key {
	char key[GP_SIGN_PUBLIC_TEXT];   /* "ed25519:..." */
	char name[GP_SIGN_NAME_MAX + 1]; /* the owner's label, may be "" */
};

/* 1 when text is "ed25519:" and base64 of exactly 32 bytes. OUT: pk. */
int gp_sign_public_parse(const char *text, unsigned char pk[32]);
void gp_sign_public_format(const unsigned char pk[32], char *out,
    size_t outlen);

/*
 * A new key named name (1..64 of [A-Za-z0-9._-]). OUT: key; text: the key
 * file's contents (malloc'd, caller wipes and frees). Returns 0 or
 * GP_EINVAL / GP_ENOMEM.
 */
int gp_sign_key_generate(const char *name, struct gp_sign_key *key,
    char **text);
/* Parses a key file; checks that public matches secret. 0 or GP_EINVAL. */
int gp_sign_key_parse(const char *text, size_t len, struct gp_sign_key *key,
    char *err, size_t errlen);
void gp_sign_key_wipe(struct gp_sign_key *key);

/* The bytes signed for digest. OUT: out (at least 128 bytes); its length. */
size_t gp_sign_payload(const char *digest, char *out, size_t outlen);
/* Signs digest. OUT: sig_text (GP_SIGN_SIG_TEXT bytes). 0 or GP_EINVAL. */
int gp_sign_digest(const struct gp_sign_key *key, const char *digest,
    char *sig_text, size_t siglen);
/*
 * 0 when sig_text is a valid signature of digest by public key key_text;
 * GP_EINVAL when either text is malformed, GP_EPERM when it does not
 * verify.
 */
int gp_sign_verify(const char *key_text, const char *digest,
    const char *sig_text);

/*
 * The agent's check: does one of the trusted keys vouch for digest?
 * signatures: [{"key": "ed25519:...", "signature": "..."}, ...] as the
 * coordinator sends them (untrusted). Returns 0 (OUT: why names the key
 * that signed), or GP_EPERM with why saying which check failed:
 * "unsigned", "not signed by a trusted key", or "the signature by trusted
 * key ... does not verify".
 */
int gp_sign_check(const char *digest, json_t *signatures,
    const struct gp_trusted_key *trusted, int ntrusted, char *why,
    size_t whylen);

#endif
