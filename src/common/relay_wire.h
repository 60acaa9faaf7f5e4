/*
 * relay_wire.h: the datagrams of the gang relay (issue 14, docs/api.md
 * "Gang relay datagrams"): what an agent and the coordinator's relay
 * (coord/gang_relay.c) exchange over UDP for a gang part whose peer
 * cannot be reached directly (NATs that change ports per destination).
 *
 * Every datagram is a 48-byte header and a payload (WireGuard's own
 * datagram, ciphertext: the relay never sees a gang's traffic in clear):
 *
 *   0  "GPR1"           magic and version
 *   4  type             1 hello (no payload), 2 data, 3 the relay's
 *                       answer to a hello (no payload; its counter, MAC'd
 *                       with the same part's key)
 *   5  0 0 0            reserved, zero
 *   8  job              int64, big-endian
 *   16 attempt          uint32, big-endian
 *   20 from, to         uint16 each, big-endian: parts of the gang
 *   24 counter          uint64, big-endian: a hello's grows (replays of an
 *                       older hello are refused); data: any
 *   32 mac              16 bytes: keyed BLAKE2b of bytes 0..31 and the
 *                       payload, with the sending part's relay key
 *
 * A part's relay key is keyed BLAKE2b of (job, attempt, part) with the
 * coordinator's relay secret: the coordinator hands each part its own in
 * the assignment (gang.overlay_relay.key) and derives any part's when a
 * datagram comes, so it keeps no table of keys.
 */
#ifndef GP_RELAY_WIRE_H
#define GP_RELAY_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define GP_RELAY_HEADER 48
#define GP_RELAY_MAC 16
#define GP_RELAY_KEY 32
/* The largest payload relayed (WireGuard's datagrams: MTU 1420 + 32). */
#define GP_RELAY_PAYLOAD_MAX 1600
#define GP_RELAY_DATAGRAM_MAX (GP_RELAY_HEADER + GP_RELAY_PAYLOAD_MAX)
/* A relay key in base64 (44 characters and a NUL). */
#define GP_RELAY_KEY_B64 45
#define GP_RELAY_PARTS_MAX 64

enum gp_relay_type {
	GP_RELAY_HELLO = 1,	/* opens (and keeps) a part's flow */
	GP_RELAY_DATA = 2,	/* a WireGuard datagram for part `to` */
	GP_RELAY_HELLO_ACK = 3,	/* the relay took a hello */
};

struct gp_relay_header {
	int type;		/* enum gp_relay_type */
	int64_t job;
	uint32_t attempt;
	int from, to;		/* 0 .. GP_RELAY_PARTS_MAX - 1 */
	uint64_t counter;
};

/*
 * Decodes a datagram's header (the MAC is not checked: gp_relay_verify).
 * OUT: *h, *payload and *payload_len (into buf) on success. 0, or
 * GP_EINVAL for a datagram that is not one (short, too long, wrong magic,
 * type or reserved bytes, a part out of range, a hello (or its answer)
 * with a payload or naming two parts,
 * a data datagram without one, a job id not positive).
 */
int gp_relay_decode(const uint8_t *buf, size_t len, struct gp_relay_header *h,
    const uint8_t **payload, size_t *payload_len);

/* 1 when datagram (len bytes, decoded) carries key's MAC. */
int gp_relay_verify(const uint8_t *buf, size_t len,
    const uint8_t key[GP_RELAY_KEY]);

/*
 * Writes h, payload (payload_len <= GP_RELAY_PAYLOAD_MAX; it may already
 * sit at out + GP_RELAY_HEADER) and the MAC with key into out (room for
 * GP_RELAY_HEADER + payload_len). Returns the datagram's length.
 */
size_t gp_relay_encode(uint8_t *out, const struct gp_relay_header *h,
    const uint8_t *payload, size_t payload_len,
    const uint8_t key[GP_RELAY_KEY]);

/* Part's relay key from the coordinator's secret. */
void gp_relay_part_key(const uint8_t secret[GP_RELAY_KEY], int64_t job,
    uint32_t attempt, int part, uint8_t out[GP_RELAY_KEY]);

/* Key to and from base64 (the assignment's). 0, or GP_EINVAL. */
int gp_relay_key_b64(const uint8_t key[GP_RELAY_KEY],
    char out[GP_RELAY_KEY_B64]);
int gp_relay_key_parse(const char *s, uint8_t out[GP_RELAY_KEY]);

#endif
