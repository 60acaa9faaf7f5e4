/*
 * fuzz_token_pin.c: libFuzzer harness for gp_token_split_pin
 * (common/token.c), which reads the bearer of every request's
 * Authorization header (untrusted) and the tokens users paste. An
 * accepted split gives a prefix of the input as the bearer and, when
 * there is a pin, 64 lower-case hex digits; nothing is written past the
 * buffers (ASan).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char bearer[GP_TOKEN_LEN + 1], pin[GP_TOKEN_PIN_HEX + 1];
	char *text = malloc(size + 1);

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (gp_token_split_pin(text, bearer, sizeof(bearer), pin,
	    sizeof(pin)) == 0) {
		if (strncmp(text, bearer, strlen(bearer)) != 0)
			abort();
		if (pin[0] != '\0') {
			if (strlen(pin) != GP_TOKEN_PIN_HEX)
				abort();
			for (size_t i = 0; i < GP_TOKEN_PIN_HEX; i++)
				if (!isxdigit((unsigned char)pin[i]) ||
				    isupper((unsigned char)pin[i]))
					abort();
		}
	}
	free(text);
	return 0;
}
