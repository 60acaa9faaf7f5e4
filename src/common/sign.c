/*
 * sign.c: ed25519 image signatures (sign.h) on libsodium: keys and their
 * text forms, the key file, signing, verifying and the agent's check.
 */
#include "sign.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "jobspec.h"
#include "oci.h"
#include "util.h"

#define B64 sodium_base64_VARIANT_ORIGINAL

/* Decodes exactly want bytes of base64 (no spaces, padding required). */
static int
b64_exact(const char *text, size_t textlen, unsigned char *out, size_t want)
{
	size_t got = 0;
	const char *end = NULL;

	if (textlen != sodium_base64_ENCODED_LEN(want, B64) - 1)
		return GP_EINVAL;
	if (sodium_base642bin(out, want, text, textlen, NULL, &got, &end,
	        B64) != 0 ||
	    got != want || end != text + textlen)
		return GP_EINVAL;
	return 0;
}

int
gp_sign_public_parse(const char *text, unsigned char pk[32])
{
	if (text == NULL || strncmp(text, "ed25519:", 8) != 0)
		return 0;
	return b64_exact(text + 8, strlen(text + 8), pk, 32) == 0;
}

void
gp_sign_public_format(const unsigned char pk[32], char *out, size_t outlen)
{
	char b64[sodium_base64_ENCODED_LEN(32, B64)];

	sodium_bin2base64(b64, sizeof(b64), pk, 32, B64);
	snprintf(out, outlen, "ed25519:%s", b64);
}

void
gp_sign_key_wipe(struct gp_sign_key *key)
{
	sodium_memzero(key, sizeof(*key));
}

int
gp_sign_key_generate(const char *name, struct gp_sign_key *key, char **text)
{
	char sk64[sodium_base64_ENCODED_LEN(64, B64)];
	struct gp_buf b = {0};

	*text = NULL;
	if (name == NULL || !gp_name_valid(name))
		return GP_EINVAL;
	memset(key, 0, sizeof(*key));
	if (sodium_init() < 0)
		return GP_EIO;
	crypto_sign_keypair(key->pk, key->sk);
	gp_strlcpy(key->name, name, sizeof(key->name));
	gp_sign_public_format(key->pk, key->public_text,
	    sizeof(key->public_text));
	sodium_bin2base64(sk64, sizeof(sk64), key->sk, 64, B64);
	if (gp_buf_printf(&b,
	        "# gpupool image signing key (ed25519). Keep it "
	        "secret.\n# Providers trust the public key: put it in their "
	        "policy as\n# trust-key = %s %s\nname = %s\npublic = %s\n"
	        "secret = %s\n",
	        key->public_text, name, name, key->public_text, sk64) != 0) {
		sodium_memzero(sk64, sizeof(sk64));
		if (b.data != NULL)
			sodium_memzero(b.data, b.cap);
		gp_buf_free(&b);
		gp_sign_key_wipe(key);
		return GP_ENOMEM;
	}
	sodium_memzero(sk64, sizeof(sk64));
	*text = b.data;
	return 0;
}

int
gp_sign_key_parse(const char *text, size_t len, struct gp_sign_key *key,
    char *err, size_t errlen)
{
	char *copy, *line, *next, *eq, *k, *v, *e;
	int have_name = 0, have_pub = 0, have_sec = 0, lineno = 0, ret;
	unsigned char pk[32];

	memset(key, 0, sizeof(*key));
	if (len > GP_SIGN_KEYFILE_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "larger than %d bytes: not a key file",
		    GP_SIGN_KEYFILE_MAX);
	if (memchr(text, '\0', len) != NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "NUL byte: not a key file");
	if ((copy = malloc(len + 1)) == NULL)
		return gp_fail(err, errlen, GP_EINVAL, "out of memory");
	memcpy(copy, text, len);
	copy[len] = '\0';
	ret = GP_EINVAL;
	for (line = copy; line != NULL; line = next) {
		lineno++;
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		e = line + strlen(line);
		while (e > line &&
		    (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			*--e = '\0';
		if (*line == '\0' || *line == '#')
			continue;
		if ((eq = strchr(line, '=')) == NULL) {
			gp_fail(err, errlen, GP_EINVAL,
			    "line %d: expected key = value", lineno);
			goto out;
		}
		*eq = '\0';
		k = line;
		for (e = eq; e > k && (e[-1] == ' ' || e[-1] == '\t');)
			*--e = '\0';
		for (v = eq + 1; *v == ' ' || *v == '\t'; v++)
			;
		if (strcmp(k, "name") == 0 && !have_name++) {
			if (!gp_name_valid(v)) {
				gp_fail(err, errlen, GP_EINVAL,
				    "line %d: name: 1 to 64 of "
				    "A-Z a-z 0-9 . _ -",
				    lineno);
				goto out;
			}
			gp_strlcpy(key->name, v, sizeof(key->name));
		} else if (strcmp(k, "public") == 0 && !have_pub++) {
			if (!gp_sign_public_parse(v, key->pk)) {
				gp_fail(err, errlen, GP_EINVAL,
				    "line %d: public: not "
				    "ed25519:<base64 of 32 bytes>",
				    lineno);
				goto out;
			}
		} else if (strcmp(k, "secret") == 0 && !have_sec++) {
			if (b64_exact(v, strlen(v), key->sk, 64) != 0) {
				gp_fail(err, errlen, GP_EINVAL,
				    "line %d: secret: not base64 "
				    "of 64 bytes",
				    lineno);
				goto out;
			}
		} else {
			gp_fail(err, errlen, GP_EINVAL,
			    "line %d: unknown or repeated key "
			    "'%.32s' (expected name, public, secret once each)",
			    lineno, k);
			goto out;
		}
	}
	if (!have_name || !have_pub || !have_sec) {
		gp_fail(err, errlen, GP_EINVAL,
		    "needs name, public and secret");
		goto out;
	}
	crypto_sign_ed25519_sk_to_pk(pk, key->sk);
	if (sodium_memcmp(pk, key->pk, 32) != 0) {
		gp_fail(err, errlen, GP_EINVAL,
		    "the public key does not belong to the "
		    "secret key");
		goto out;
	}
	gp_sign_public_format(key->pk, key->public_text,
	    sizeof(key->public_text));
	ret = 0;
out:
	sodium_memzero(copy, len + 1);
	free(copy);
	if (ret != 0)
		gp_sign_key_wipe(key);
	return ret;
}

size_t
gp_sign_payload(const char *digest, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s%s", GP_SIGN_PAYLOAD_PREFIX, digest);

	return n < 0 ? 0 : (size_t)n;
}

int
gp_sign_digest(const struct gp_sign_key *key, const char *digest,
    char *sig_text, size_t siglen)
{
	unsigned char sig[64];
	char payload[128];
	size_t n;

	if (!gp_oci_digest_valid(digest) ||
	    siglen < sodium_base64_ENCODED_LEN(64, B64))
		return GP_EINVAL;
	n = gp_sign_payload(digest, payload, sizeof(payload));
	crypto_sign_detached(sig, NULL, (const unsigned char *)payload, n,
	    key->sk);
	sodium_bin2base64(sig_text, siglen, sig, sizeof(sig), B64);
	return 0;
}

int
gp_sign_verify(const char *key_text, const char *digest, const char *sig_text)
{
	unsigned char pk[32], sig[64];
	char payload[128];
	size_t n;

	if (!gp_oci_digest_valid(digest) ||
	    !gp_sign_public_parse(key_text, pk) || sig_text == NULL ||
	    b64_exact(sig_text, strlen(sig_text), sig, 64) != 0)
		return GP_EINVAL;
	n = gp_sign_payload(digest, payload, sizeof(payload));
	if (crypto_sign_verify_detached(sig, (const unsigned char *)payload, n,
	        pk) != 0)
		return GP_EPERM;
	return 0;
}

/* "ed25519:AbCdEfGh…" for messages. */
static void
short_key(const char *key, char *out, size_t len)
{
	snprintf(out, len, "%.20s...", key);
}

int
gp_sign_check(const char *digest, json_t *signatures,
    const struct gp_trusted_key *trusted, int ntrusted, char *why,
    size_t whylen)
{
	const char *key, *sig;
	char shown[32], bad[GP_SIGN_PUBLIC_TEXT + GP_SIGN_NAME_MAX + 8];
	struct gp_buf others = {0};
	json_t *s;
	size_t i;
	int k, n = 0, nbad = 0;

	bad[0] = '\0';
	if (!json_is_array(signatures) || json_array_size(signatures) == 0) {
		snprintf(why, whylen,
		    "unsigned: the image carries no "
		    "signature, and this provider runs only images signed by "
		    "a key it trusts");
		return GP_EPERM;
	}
	json_array_foreach(signatures, i, s)
	{
		key = json_string_value(json_object_get(s, "key"));
		sig = json_string_value(json_object_get(s, "signature"));
		if (key == NULL || sig == NULL || i >= 64)
			continue;
		n++;
		for (k = 0; k < ntrusted; k++)
			if (strcmp(trusted[k].key, key) == 0)
				break;
		if (k == ntrusted) {
			short_key(key, shown, sizeof(shown));
			gp_buf_printf(&others, "%s%s", others.len ? ", " : "",
			    shown);
			continue;
		}
		if (gp_sign_verify(key, digest, sig) == 0) {
			snprintf(why, whylen, "signed by trusted key %s%s%s",
			    trusted[k].name[0] ? trusted[k].name : "",
			    trusted[k].name[0] ? " " : "", trusted[k].key);
			gp_buf_free(&others);
			return 0;
		}
		nbad++;
		snprintf(bad, sizeof(bad), "%s%s%s", trusted[k].name,
		    trusted[k].name[0] ? " " : "", key);
	}
	if (nbad > 0)
		snprintf(why, whylen,
		    "wrongly signed: the signature by trusted "
		    "key %s does not verify against manifest digest %s (a "
		    "forged signature or a tampered image)",
		    bad, digest);
	else if (n == 0)
		snprintf(why, whylen,
		    "unsigned: the image carries no usable "
		    "signature");
	else
		snprintf(why, whylen,
		    "not signed by a key this provider "
		    "trusts (signed by %.300s)",
		    others.data ? others.data : "?");
	gp_buf_free(&others);
	return GP_EPERM;
}
