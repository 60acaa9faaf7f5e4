/*
 * overlay.h: a gang's parts joined through WireGuard when their machines
 * cannot reach each other (each behind its own NAT; issue 14,
 * docs/agent.md "Gangs behind NATs").
 *
 * One wireguard-go (Debian's; this kernel has no wireguard module) per
 * agent, started with the first gang part that needs it and stopped with
 * the last: a TUN device gpw<block> in the agent's namespace, configured
 * with `wg` (wireguard-tools), the agent's key pair (made at start,
 * src/common/wg.c; the private key reaches `wg` on a pipe, never a
 * file), its UDP port, and one peer per other agent of a running gang
 * whose allowed IPs are that agent's parts' gang addresses (/32 each).
 * Each remote part's address is routed through the device; an nftables
 * table of its own (gpupool_ov_<block>) lets only pairs of one gang's
 * parts cross it, and nothing reach the host from it.
 *
 * When: the agent registers its key and port unless --gang-overlay off;
 * the coordinator sends a gang its overlay (gang.overlay) when every
 * part's node registered one and one of them needs it (it gave no
 * --advertise-addr, or runs --gang-overlay always); else the parts are
 * linked directly (netns.c).
 */
#ifndef GP_AGENT_OVERLAY_H
#define GP_AGENT_OVERLAY_H

#include <stddef.h>
#include <stdint.h>

#include "wg.h"

enum gp_overlay_mode {
	GP_OVERLAY_OFF = 0,	/* no key registered: gangs go direct */
	GP_OVERLAY_AUTO,	/* the overlay when a part's node needs it */
	GP_OVERLAY_ALWAYS,	/* every gang of this node (all joined) */
};

/* "off", "auto", "always": 0 and *out, or GP_EINVAL. */
int gp_overlay_mode_parse(const char *s, enum gp_overlay_mode *out);
const char *gp_overlay_mode_name(enum gp_overlay_mode m);

struct gp_overlay;

/*
 * Readies the overlay (nothing runs yet): checks that wireguard-go, wg
 * and /dev/net/tun are usable, makes the key pair. block: the agent's
 * address block (netns.c; names the device, the table and the default
 * port); port: the UDP port (0: 51820 + block). OUT: *out. 0, or GP_E*
 * with err set (the agent then registers no overlay).
 */
int gp_overlay_new(struct gp_overlay **out, enum gp_overlay_mode mode,
    int block, int port, char *err, size_t errlen);
/* Stops what runs and wipes the private key. NULL is fine. */
void gp_overlay_free(struct gp_overlay *o);
const char *gp_overlay_public_key(const struct gp_overlay *o);
int gp_overlay_port(const struct gp_overlay *o);
enum gp_overlay_mode gp_overlay_mode(const struct gp_overlay *o);

/*
 * Links gang part (job, part) at local_addr to the other parts: peers[k]
 * is part k's (the coordinator's gang.overlay), addrs[k] its gang
 * address (host order); parts on this agent (its own key) are skipped.
 * Starts wireguard-go when nothing runs. Executor thread only. 0, or
 * GP_E* with err set and nothing of this part left.
 */
int gp_overlay_link(struct gp_overlay *o, int64_t job, int part, int parts,
    const struct gp_overlay_peer *peers, const uint32_t *addrs,
    uint32_t local_addr, char *err, size_t errlen);
/* Undoes gp_overlay_link; the last part's end stops wireguard-go. */
void gp_overlay_unlink(struct gp_overlay *o, int64_t job, int part);
/*
 * Nudges peers whose first handshake stalls (crossed initiations; see
 * overlay.c). now: gp_mono_ms(). Returns the ms until it wants to be
 * called again, -1 for no need. Executor thread only; NULL is fine.
 */
int64_t gp_overlay_tick(struct gp_overlay *o, int64_t now);

/*
 * What a killed agent of block b left: its wireguard-go (found by its
 * pid file), control socket, device and table. tables: `nft list
 * tables`' output. The caller holds b's lock.
 */
void gp_overlay_sweep(int b, const char *tables);

#endif
