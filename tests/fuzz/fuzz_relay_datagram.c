/*
 * fuzz_relay_datagram.c: libFuzzer harness for gp_relay_decode and
 * gp_relay_verify (common/relay_wire.c), which read every datagram that
 * reaches the coordinator's gang relay and the agents' relay flows
 * (untrusted: anyone may send UDP there). A datagram accepted has its
 * payload inside the input and re-encodes to the same header; nothing is
 * read past the input (ASan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relay_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[GP_RELAY_KEY] = {7};
	struct gp_relay_header h, d;
	const uint8_t *payload;
	uint8_t *copy, *out;
	size_t plen, len;

	/* an exact-size copy: ASan sees any read past the datagram */
	if ((copy = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(copy, data, size);
	if (gp_relay_decode(copy, size, &h, &payload, &plen) == 0) {
		if (payload != copy + GP_RELAY_HEADER ||
		    plen != size - GP_RELAY_HEADER ||
		    plen > GP_RELAY_PAYLOAD_MAX)
			abort();
		(void)gp_relay_verify(copy, size, key);
		if ((out = malloc(size)) == NULL)
			goto out;
		len = gp_relay_encode(out, &h, payload, plen, key);
		if (len != size || gp_relay_decode(out, len, &d, &payload,
		    &plen) != 0 || d.type != h.type || d.job != h.job ||
		    d.attempt != h.attempt || d.from != h.from ||
		    d.to != h.to || d.counter != h.counter ||
		    !gp_relay_verify(out, len, key))
			abort();
		free(out);
	}
out:
	free(copy);
	return 0;
}
