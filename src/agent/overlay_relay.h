/*
 * overlay_relay.h: a gang part's way through the coordinator's relay
 * (coord/gang_relay.h) for the remote parts its WireGuard device cannot
 * reach directly (NATs that change ports per destination; docs/agent.md
 * "The relay").
 *
 * One per local part that needs it, made when the first of its peers
 * has had no handshake for a while (overlay.c): a thread, one UDP socket
 * connected to the relay (its own outbound flow: any NAT lets the
 * answers in; a hello opens it and keeps it open) and, per remote part, a
 * UDP socket on 127.0.0.1 that the part's WireGuard peer is pointed at.
 * A datagram wireguard-go sends there goes to the relay with a header
 * naming the gang, this part and that remote part, and a MAC with this
 * part's relay key; a datagram from the relay goes to wireguard-go from
 * the remote part's socket. Only WireGuard's ciphertext crosses.
 */
#ifndef GP_AGENT_OVERLAY_RELAY_H
#define GP_AGENT_OVERLAY_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "relay_wire.h"

/* What the coordinator sent of its relay (gang.overlay_relay). */
struct gp_overlay_relay {
	int port;		/* its UDP port; 0: no relay */
	uint8_t key[GP_RELAY_KEY]; /* this part's relay key */
	uint32_t attempt;
};

struct gp_ovrelay;

/*
 * Starts part's relay: host, the coordinator's (its URL's), cfg its relay;
 * remote[0..nremote-1]: the remote parts it may carry; wg_port: the
 * part's WireGuard port on this machine. OUT: *out. 0, or GP_E* with err
 * set. The name is resolved and the flow opened by its thread.
 */
int gp_ovrelay_new(struct gp_ovrelay **out, const char *host,
    const struct gp_overlay_relay *cfg, int64_t job, int part,
    const int *remote, int nremote, int wg_port, char *err, size_t errlen);
/* The 127.0.0.1 port to point remote part's peer at; 0 if not carried. */
int gp_ovrelay_port(const struct gp_ovrelay *r, int remote);
/* Datagrams carried each way so far (logs). */
void gp_ovrelay_counts(const struct gp_ovrelay *r, uint64_t *out,
    uint64_t *in);
/* Stops the thread and closes the sockets; wipes the key. NULL is fine. */
void gp_ovrelay_free(struct gp_ovrelay *r);

#endif
