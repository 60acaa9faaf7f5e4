/*
 * fuzz_www_authenticate.c: libFuzzer harness for the WWW-Authenticate
 * challenge parser of the registry client (common/registry.c): a
 * registry's 401 answer is untrusted text. An accepted Bearer challenge
 * always has a realm; every field stays within its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_auth_challenge c;
	char *text = malloc(size + 1);

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (gp_auth_challenge_parse(text, &c) == 0) {
		if (c.scheme == GP_AUTH_BEARER && c.realm[0] == '\0')
			abort();
		if (c.scheme != GP_AUTH_BEARER && c.scheme != GP_AUTH_BASIC)
			abort();
		if (strlen(c.realm) >= sizeof(c.realm) ||
		    strlen(c.scope) >= sizeof(c.scope))
			abort();
	}
	free(text);
	return 0;
}
