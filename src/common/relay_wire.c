/*
 * relay_wire.c: the gang relay's datagrams (relay_wire.h): their header,
 * MAC (keyed BLAKE2b, libsodium's crypto_generichash) and the parts'
 * keys.
 */
#include "relay_wire.h"

#include <sodium.h>
#include <string.h>

#include "gp.h"

static const uint8_t magic[4] = {'G', 'P', 'R', '1'};

static uint64_t
get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void
put_be(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--) {
		p[i] = (uint8_t)(v & 255);
		v >>= 8;
	}
}

int
gp_relay_decode(const uint8_t *buf, size_t len, struct gp_relay_header *h,
    const uint8_t **payload, size_t *payload_len)
{
	struct gp_relay_header t;
	uint64_t job;

	if (len < GP_RELAY_HEADER || len > GP_RELAY_DATAGRAM_MAX ||
	    memcmp(buf, magic, sizeof(magic)) != 0 || buf[5] != 0 ||
	    buf[6] != 0 || buf[7] != 0)
		return GP_EINVAL;
	t.type = buf[4];
	job = get_be(buf + 8, 8);
	if (job == 0 || job > (uint64_t)INT64_MAX)
		return GP_EINVAL;
	t.job = (int64_t)job;
	t.attempt = (uint32_t)get_be(buf + 16, 4);
	t.from = (int)get_be(buf + 20, 2);
	t.to = (int)get_be(buf + 22, 2);
	t.counter = get_be(buf + 24, 8);
	if (t.from >= GP_RELAY_PARTS_MAX || t.to >= GP_RELAY_PARTS_MAX)
		return GP_EINVAL;
	switch (t.type) {
	case GP_RELAY_HELLO:
	case GP_RELAY_HELLO_ACK:
		if (len != GP_RELAY_HEADER || t.from != t.to)
			return GP_EINVAL;
		break;
	case GP_RELAY_DATA:
		if (len == GP_RELAY_HEADER || t.from == t.to)
			return GP_EINVAL;
		break;
	default:
		return GP_EINVAL;
	}
	*h = t;
	*payload = buf + GP_RELAY_HEADER;
	*payload_len = len - GP_RELAY_HEADER;
	return 0;
}

static void
mac(const uint8_t *buf, size_t len, const uint8_t key[GP_RELAY_KEY],
    uint8_t out[GP_RELAY_MAC])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, key, GP_RELAY_KEY, GP_RELAY_MAC);
	crypto_generichash_update(&st, buf, 32);
	crypto_generichash_update(&st, buf + GP_RELAY_HEADER,
	    len - GP_RELAY_HEADER);
	crypto_generichash_final(&st, out, GP_RELAY_MAC);
}

int
gp_relay_verify(const uint8_t *buf, size_t len,
    const uint8_t key[GP_RELAY_KEY])
{
	uint8_t m[GP_RELAY_MAC];

	if (len < GP_RELAY_HEADER)
		return 0;
	mac(buf, len, key, m);
	return sodium_memcmp(m, buf + 32, GP_RELAY_MAC) == 0;
}

size_t
gp_relay_encode(uint8_t *out, const struct gp_relay_header *h,
    const uint8_t *payload, size_t payload_len,
    const uint8_t key[GP_RELAY_KEY])
{
	memcpy(out, magic, sizeof(magic));
	out[4] = (uint8_t)h->type;
	out[5] = out[6] = out[7] = 0;
	put_be(out + 8, (uint64_t)h->job, 8);
	put_be(out + 16, h->attempt, 4);
	put_be(out + 20, (uint64_t)h->from, 2);
	put_be(out + 22, (uint64_t)h->to, 2);
	put_be(out + 24, h->counter, 8);
	if (payload_len > 0 && payload != out + GP_RELAY_HEADER)
		memmove(out + GP_RELAY_HEADER, payload, payload_len);
	mac(out, GP_RELAY_HEADER + payload_len, key, out + 32);
	return GP_RELAY_HEADER + payload_len;
}

void
gp_relay_part_key(const uint8_t secret[GP_RELAY_KEY], int64_t job,
    uint32_t attempt, int part, uint8_t out[GP_RELAY_KEY])
{
	static const char label[] = "gpupool gang relay part key v1";
	crypto_generichash_state st;
	uint8_t id[14];

	put_be(id, (uint64_t)job, 8);
	put_be(id + 8, attempt, 4);
	put_be(id + 12, (uint64_t)part, 2);
	crypto_generichash_init(&st, secret, GP_RELAY_KEY, GP_RELAY_KEY);
	crypto_generichash_update(&st, (const uint8_t *)label,
	    sizeof(label) - 1);
	crypto_generichash_update(&st, id, sizeof(id));
	crypto_generichash_final(&st, out, GP_RELAY_KEY);
}

int
gp_relay_key_b64(const uint8_t key[GP_RELAY_KEY], char out[GP_RELAY_KEY_B64])
{
	sodium_bin2base64(out, GP_RELAY_KEY_B64, key, GP_RELAY_KEY,
	    sodium_base64_VARIANT_ORIGINAL);
	return 0;
}

int
gp_relay_key_parse(const char *s, uint8_t out[GP_RELAY_KEY])
{
	size_t n = 0;

	if (s == NULL || strlen(s) != GP_RELAY_KEY_B64 - 1 ||
	    sodium_base642bin(out, GP_RELAY_KEY, s, strlen(s), NULL, &n, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0 || n != GP_RELAY_KEY)
		return GP_EINVAL;
	return 0;
}
