/*
 * gang_relay_table.h: the gang relay's decisions (gang_relay_table.c),
 * apart from its socket and thread (gang_relay.c) so that they can be
 * tested alone: which gangs it relays for, each part's key, flow,
 * counter and rate, and what to do with one datagram (drop it and why,
 * forward it and where, or answer a hello). docs/agent.md "The relay".
 */
#ifndef GP_COORD_GANG_RELAY_TABLE_H
#define GP_COORD_GANG_RELAY_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "relay_wire.h"

/* Gangs relayed at once; a datagram of one more is dropped ("full"). */
#define RELAY_GANGS_MAX 1024
/* A gang's attempt is looked up (alive) this often. */
#define RELAY_CHECK_MS 2000
/* A gang none of whose parts sent anything new this long is forgotten. */
#define RELAY_IDLE_MS 90000
/* Each part may send this many bytes a second (and a burst of one s). */
#define RELAY_PART_RATE (64LL << 20)

enum relay_drop {
	RELAY_DROP_MALFORMED, RELAY_DROP_AUTH, RELAY_DROP_NO_GANG,
	RELAY_DROP_FULL, RELAY_DROP_REPLAY, RELAY_DROP_UNREGISTERED,
	RELAY_DROP_NO_PEER, RELAY_DROP_RATE, RELAY_DROP_SEND, RELAY_NDROPS
};
/* "malformed", "auth", ... (the metric's reason label). */
const char *relay_drop_name(int reason);

enum relay_verdict {
	RELAY_DROP,	/* out.reason says why */
	RELAY_FORWARD,	/* send the datagram, unchanged, to out.to */
	RELAY_ANSWER,	/* send buf (rewritten, *len) back to the source */
};

struct relay_out {
	enum relay_drop reason;
	const struct sockaddr_storage *to;	/* into the table */
	socklen_t tolen;
	size_t payload;		/* RELAY_FORWARD: WireGuard's bytes */
};

/*
 * 1 when job's attempt runs as a gang with an overlay (*parts: how many
 * parts), else 0. The coordinator's looks in its model.
 */
typedef int (*relay_alive_fn)(int64_t job, uint32_t attempt, int *parts);

struct relay_table;

/* NULL when out of memory. The secret is copied. */
struct relay_table *relay_table_new(const uint8_t secret[GP_RELAY_KEY],
    relay_alive_fn alive);
void relay_table_free(struct relay_table *t);
/*
 * One datagram (buf, *len) from src at now (ms): the verdict, with out
 * filled. A hello's answer is written into buf (and *len).
 */
enum relay_verdict relay_table_handle(struct relay_table *t, uint8_t *buf,
    size_t *len, const struct sockaddr_storage *src, socklen_t srclen,
    int64_t now, struct relay_out *out);
/* Forgets the gangs whose attempt ended or whose flows went quiet. */
void relay_table_tick(struct relay_table *t, int64_t now);
/* Gangs known now. */
int relay_table_gangs(const struct relay_table *t);

#endif
