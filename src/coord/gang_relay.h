/*
 * gang_relay.h: the coordinator's UDP relay for gang overlays whose
 * parts cannot reach each other directly (NATs that change ports per
 * destination, firewalls that drop unsolicited inbound UDP; issue 14,
 * docs/agent.md "The relay").
 *
 * A UDP socket on the coordinator's --listen address (port: the same as
 * its TCP one unless --gang-relay says otherwise). An agent that sees no
 * WireGuard handshake with a remote part opens a flow of its own to it
 * (a hello, then keepalives: its own outbound flow, so any NAT lets the
 * answers in) and points that WireGuard peer at a local socket that
 * forwards here; the relay sends each datagram on to the flow of the
 * part it names. What it forwards is WireGuard's ciphertext.
 *
 * It forwards only between parts of one running gang attempt: each
 * datagram carries a MAC with its sending part's relay key (derived from
 * this coordinator's secret, handed to that part's agent alone in its
 * assignment), the sender must be the flow its part opened, the gang's
 * attempt must run here (checked in the model when it is first seen and
 * every RELAY_CHECK_MS after: a gang that ended is forgotten), a part's
 * rate is bounded, and nothing is queued (a datagram that cannot be sent
 * at once is dropped: WireGuard's own retries cover it).
 */
#ifndef GP_COORD_GANG_RELAY_H
#define GP_COORD_GANG_RELAY_H

#include <stdint.h>

#include "relay_wire.h"

struct gp_buf;

/*
 * Starts the relay on UDP addr:port (port 0: none) with the secret in
 * dir/gang-relay.key (the blob directory, which every coordinator of the
 * pool shares; made, 0600, when absent). 0, or GP_E* with err set.
 */
int gang_relay_start(const char *addr, int port, const char *dir,
    char *err, size_t errlen);
void gang_relay_stop(void);
/* The relay's UDP port, 0 when it does not run. */
int gang_relay_port(void);
/* Part's relay key (for its assignment). 0, or -1 when none runs. */
int gang_relay_part_key(int64_t job, uint32_t attempt, int part,
    uint8_t out[GP_RELAY_KEY]);
/* gpupool_gang_relay_* for GET /metrics. */
int gang_relay_metrics_render(struct gp_buf *out);

#endif
