/*
 * token.c: token generation and hashing with libsodium.
 */
#include "token.h"

#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "gp.h"

int
gp_token_init(void)
{
	return sodium_init() < 0 ? GP_EIO : 0;
}

void
gp_token_generate(char *out)
{
	unsigned char raw[32];

	randombytes_buf(raw, sizeof(raw));
	memcpy(out, "gpt_", 4);
	sodium_bin2base64(out + 4, GP_TOKEN_LEN - 4 + 1, raw, sizeof(raw),
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
}

int
gp_token_well_formed(const char *text)
{
	size_t i;

	if (text == NULL || strlen(text) != GP_TOKEN_LEN ||
	    strncmp(text, "gpt_", 4) != 0)
		return 0;
	for (i = 4; i < GP_TOKEN_LEN; i++) {
		char c = text[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			(c >= '0' && c <= '9') || c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

void
gp_token_hash(const char *token, char *hex)
{
	unsigned char hash[32];

	crypto_generichash(hash, sizeof(hash), (const unsigned char *)token,
	    strlen(token), NULL, 0);
	sodium_bin2hex(hex, GP_TOKEN_HASH_HEX, hash, sizeof(hash));
}

void
gp_token_prefix(const char *token, char *out, size_t len)
{
	snprintf(out, len, "%.8s...", token != NULL ? token : "");
}

const char *
gp_role_name(enum gp_role role)
{
	switch (role) {
	case GP_ROLE_ADMIN:
		return "admin";
	case GP_ROLE_USER:
		return "user";
	case GP_ROLE_PROVIDER:
		return "provider";
	case GP_ROLE_METRICS:
		return "metrics";
	}
	return NULL;
}

int
gp_role_parse(const char *name, enum gp_role *role)
{
	if (name == NULL)
		return GP_EINVAL;
	if (strcmp(name, "admin") == 0)
		*role = GP_ROLE_ADMIN;
	else if (strcmp(name, "user") == 0)
		*role = GP_ROLE_USER;
	else if (strcmp(name, "provider") == 0)
		*role = GP_ROLE_PROVIDER;
	else if (strcmp(name, "metrics") == 0)
		*role = GP_ROLE_METRICS;
	else
		return GP_EINVAL;
	return 0;
}

int
gp_token_split_pin(const char *text, char *bearer, size_t bearer_len,
    char *pin, size_t pin_len)
{
	const char *at = strstr(text, GP_TOKEN_PIN_SEP), *hex;
	size_t n = at != NULL ? (size_t)(at - text) : strlen(text);

	if (n >= bearer_len || pin_len < GP_TOKEN_PIN_HEX + 1)
		return GP_EINVAL;
	memcpy(bearer, text, n);
	bearer[n] = '\0';
	pin[0] = '\0';
	if (at == NULL)
		return 0;
	hex = at + strlen(GP_TOKEN_PIN_SEP);
	if (strlen(hex) != GP_TOKEN_PIN_HEX)
		return GP_EINVAL;
	for (size_t i = 0; i < GP_TOKEN_PIN_HEX; i++) {
		if (!isxdigit((unsigned char)hex[i]))
			return GP_EINVAL;
		pin[i] = (char)tolower((unsigned char)hex[i]);
	}
	pin[GP_TOKEN_PIN_HEX] = '\0';
	return 0;
}
