/*
 * token.h: API tokens. A token is "gpt_" followed by 43 characters of
 * URL-safe base64 (32 random bytes from libsodium). The coordinator stores
 * only its BLAKE2b-256 hash, hex-encoded.
 */
#ifndef GP_TOKEN_H
#define GP_TOKEN_H

#include <stddef.h>

#define GP_TOKEN_LEN	  47 /* "gpt_" + 43 */
#define GP_TOKEN_HASH_HEX 65 /* 64 hex digits + NUL */

/* Calls sodium_init(); returns 0 or GP_EIO. */
int gp_token_init(void);
/* OUT: out (at least GP_TOKEN_LEN + 1 bytes): a new random token. */
void gp_token_generate(char *out);
/* Returns 1 when text has the form of a token, 0 otherwise. */
int gp_token_well_formed(const char *text);

/*
 * A token as a coordinator with its own CA hands it out: the bearer, then
 * "@sha256:" and the SHA-256 of the CA certificate's public key (its DER
 * SubjectPublicKeyInfo) in 64 hex digits, as kubeadm's join tokens carry
 * a CA hash: a client verifies the coordinator with it, nothing to copy.
 */
#define GP_TOKEN_PIN_SEP "@sha256:"
#define GP_TOKEN_PIN_HEX 64
/*
 * Splits text at GP_TOKEN_PIN_SEP. OUT: bearer (the part before; all of
 * text when there is no pin), pin (the 64 hex digits, lower case, or ""):
 * bearer_len and pin_len bytes (at least GP_TOKEN_PIN_HEX + 1). Returns
 * 0, or GP_EINVAL when a pin is there but not 64 hex digits, or a part
 * does not fit.
 */
int gp_token_split_pin(const char *text, char *bearer, size_t bearer_len,
    char *pin, size_t pin_len);
/* OUT: hex (GP_TOKEN_HASH_HEX bytes): the hash to store and look up. */
void gp_token_hash(const char *token, char *hex);
/* OUT: out: the first characters of a token, safe to log ("gpt_AbCd…"). */
void gp_token_prefix(const char *token, char *out, size_t len);
/*
 * Roles. Returns the role's name or NULL. A metrics token may only read
 * /metrics (and /v1/whoami): what a Prometheus server scrapes with.
 */
enum gp_role { GP_ROLE_ADMIN, GP_ROLE_USER, GP_ROLE_PROVIDER,
	GP_ROLE_METRICS };
const char *gp_role_name(enum gp_role role);
int gp_role_parse(const char *name, enum gp_role *role);

#endif
