/*
 * test_relay_wire.c: the gang relay's datagrams (common/relay_wire.c):
 * a datagram encoded is decoded to the same header and payload and
 * carries its part's MAC; any change of a byte, another part's key or
 * another gang's key fails the MAC; what is not a datagram is refused;
 * the parts' keys differ by job, attempt and part.
 */
#include "unit.h"

#include <sodium.h>
#include <stdint.h>

#include "gp.h"
#include "relay_wire.h"

static const uint8_t secret[GP_RELAY_KEY] = {1, 2, 3, 4, 5, 6, 7, 8};

TEST(round_trip_and_mac)
{
	uint8_t key[GP_RELAY_KEY], other[GP_RELAY_KEY];
	uint8_t buf[GP_RELAY_DATAGRAM_MAX], payload[148];
	struct gp_relay_header h = {GP_RELAY_DATA, 42, 3, 1, 0, 99}, d;
	const uint8_t *p;
	size_t len, plen, i;

	randombytes_buf(payload, sizeof(payload));
	gp_relay_part_key(secret, 42, 3, 1, key);
	len = gp_relay_encode(buf, &h, payload, sizeof(payload), key);
	CHECK_EQ(len, GP_RELAY_HEADER + sizeof(payload));
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), 0);
	CHECK_EQ(d.type, GP_RELAY_DATA);
	CHECK_EQ(d.job, 42);
	CHECK_EQ(d.attempt, 3);
	CHECK_EQ(d.from, 1);
	CHECK_EQ(d.to, 0);
	CHECK_EQ(d.counter, 99);
	CHECK_EQ(plen, sizeof(payload));
	CHECK(memcmp(p, payload, plen) == 0);
	CHECK(gp_relay_verify(buf, len, key));
	/* another part's, attempt's or gang's key */
	gp_relay_part_key(secret, 42, 3, 0, other);
	CHECK(!gp_relay_verify(buf, len, other));
	gp_relay_part_key(secret, 42, 4, 1, other);
	CHECK(!gp_relay_verify(buf, len, other));
	gp_relay_part_key(secret, 43, 3, 1, other);
	CHECK(!gp_relay_verify(buf, len, other));
	/* any byte changed (the MAC's own included) */
	for (i = 0; i < len; i++) {
		buf[i] ^= 0x40;
		CHECK(!gp_relay_verify(buf, len, key));
		buf[i] ^= 0x40;
	}
	CHECK(gp_relay_verify(buf, len, key));
	/* the payload in place (the agent's way) */
	memmove(buf + GP_RELAY_HEADER, payload, sizeof(payload));
	CHECK_EQ(gp_relay_encode(buf, &h, buf + GP_RELAY_HEADER,
	    sizeof(payload), key), len);
	CHECK(gp_relay_verify(buf, len, key));
}

TEST(not_datagrams)
{
	uint8_t key[GP_RELAY_KEY], buf[GP_RELAY_DATAGRAM_MAX + 8];
	struct gp_relay_header h = {GP_RELAY_HELLO, 7, 1, 2, 2, 5}, d;
	const uint8_t *p;
	size_t len, plen;

	gp_relay_part_key(secret, 7, 1, 2, key);
	len = gp_relay_encode(buf, &h, NULL, 0, key);
	CHECK_EQ(len, GP_RELAY_HEADER);
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), 0);
	CHECK_EQ(d.type, GP_RELAY_HELLO);
	CHECK_EQ(gp_relay_decode(buf, len - 1, &d, &p, &plen), GP_EINVAL);
	/* a hello with a payload */
	CHECK_EQ(gp_relay_decode(buf, len + 1, &d, &p, &plen), GP_EINVAL);
	buf[0] = 'X';
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	buf[0] = 'G';
	buf[4] = 9;		/* type */
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	buf[4] = GP_RELAY_HELLO;
	buf[6] = 1;		/* reserved */
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	buf[6] = 0;
	buf[23] = 3;		/* a hello naming two parts */
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	buf[23] = 2;
	buf[21] = GP_RELAY_PARTS_MAX;	/* from */
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	buf[21] = 2;
	/* the relay's answer: as a hello, MAC'd with the part's key */
	h.type = GP_RELAY_HELLO_ACK;
	len = gp_relay_encode(buf, &h, NULL, 0, key);
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), 0);
	CHECK_EQ(d.type, GP_RELAY_HELLO_ACK);
	CHECK(gp_relay_verify(buf, len, key));
	len = gp_relay_encode(buf, &h, (const uint8_t *)"x", 1, key);
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	/* data: none, to itself, too long */
	h.type = GP_RELAY_DATA;
	h.to = 2;
	len = gp_relay_encode(buf, &h, (const uint8_t *)"x", 1, key);
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	h.to = 1;
	len = gp_relay_encode(buf, &h, NULL, 0, key);
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
	len = gp_relay_encode(buf, &h, buf + GP_RELAY_HEADER,
	    GP_RELAY_PAYLOAD_MAX, key);
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), 0);
	CHECK_EQ(gp_relay_decode(buf, len + 1, &d, &p, &plen), GP_EINVAL);
	/* a job id of 0 */
	h.job = 0;
	len = gp_relay_encode(buf, &h, (const uint8_t *)"x", 1, key);
	CHECK_EQ(gp_relay_decode(buf, len, &d, &p, &plen), GP_EINVAL);
}

TEST(keys_base64)
{
	uint8_t key[GP_RELAY_KEY], back[GP_RELAY_KEY];
	char b64[GP_RELAY_KEY_B64];

	gp_relay_part_key(secret, 1, 1, 0, key);
	gp_relay_key_b64(key, b64);
	CHECK_EQ(strlen(b64), GP_RELAY_KEY_B64 - 1);
	CHECK_EQ(gp_relay_key_parse(b64, back), 0);
	CHECK(memcmp(key, back, sizeof(key)) == 0);
	CHECK_EQ(gp_relay_key_parse("short", back), GP_EINVAL);
	CHECK_EQ(gp_relay_key_parse(NULL, back), GP_EINVAL);
	b64[3] = '*';
	CHECK_EQ(gp_relay_key_parse(b64, back), GP_EINVAL);
}

int
main(void)
{
	if (sodium_init() < 0)
		return 1;
	RUN(round_trip_and_mac);
	RUN(not_datagrams);
	RUN(keys_base64);
	return unit_report();
}
