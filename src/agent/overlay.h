/*
 * overlay.h: a gang's parts joined through WireGuard when their machines
 * cannot reach each other (each behind its own NAT; issue 14,
 * docs/agent.md "Gangs behind NATs").
 *
 * One wireguard-go (Debian's; this kernel has no wireguard module) per
 * local gang part in the overlay, started with the part and stopped at
 * its end: a TUN device gpw<block><seq> in the agent's namespace,
 * configured with `wg` (wireguard-tools) with the part's own key pair
 * (made per gang by the coordinator, sent to this part's agent alone in
 * gang.overlay_private_key; it reaches `wg` on a pipe, never a file, and
 * lives on only in that wireguard-go), the part's UDP port (one of the
 * agent's range) and one peer per remote part whose allowed IP is that
 * part's gang address (/32). Each remote part's address is routed
 * through the device; an nftables table of its own
 * (gpupool_ov_<block>_<seq>) lets only the pairs of this part and its
 * remote parts cross it, and nothing reach the host from it. A helper
 * thread keeps one wireguard-go started ahead so that a part's start
 * does not wait for one.
 *
 * When: the agent registers its port range unless --gang-overlay off;
 * the coordinator sends a gang its overlay (gang.overlay) when every
 * part's node registered one and one of them needs it (it gave no
 * --advertise-addr, or runs --gang-overlay always); else the parts are
 * linked directly (netns.c).
 */
#ifndef GP_AGENT_OVERLAY_H
#define GP_AGENT_OVERLAY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/overlay_relay.h"
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
 * and /dev/net/tun are usable and its UDP ports free. block: the agent's
 * address block (netns.c; names the devices, the tables and the default
 * ports); port: the first UDP port (0: 51820 + 16 * block), 16 from
 * there. OUT: *out. 0, or GP_E* with err set (the agent then registers no
 * overlay).
 */
int gp_overlay_new(struct gp_overlay **out, enum gp_overlay_mode mode,
    int block, int port, char *err, size_t errlen);
/*
 * Starts the helper thread that keeps a spare wireguard-go (after the
 * sweep of gp_net_new). 0, or GP_EIO with err set.
 */
int gp_overlay_start(struct gp_overlay *o, char *err, size_t errlen);
/* Stops the helper and every device (their keys go with them). */
void gp_overlay_free(struct gp_overlay *o);
/* The first UDP port and how many (register's overlay.port, .ports). */
int gp_overlay_port(const struct gp_overlay *o);
int gp_overlay_ports(const struct gp_overlay *o);
enum gp_overlay_mode gp_overlay_mode(const struct gp_overlay *o);

/*
 * Where the coordinator's relay is (overlay_relay.h): the host of the
 * agent's coordinator URL, urls ("URL[,URL...]") at index *at (the one
 * the agent reaches now; may change). Both must outlive o.
 */
void gp_overlay_set_coordinator(struct gp_overlay *o, const char *urls,
    const atomic_int *at);

/*
 * Links gang part (job, part) at local_addr to the other parts through a
 * device of its own: peers[k] is part k's (the coordinator's
 * gang.overlay; a key "" for a part on this machine, skipped), addrs[k]
 * its gang address (host order), priv this part's private key (the
 * caller wipes its copy), relay the coordinator's relay (NULL, or port 0:
 * none; a peer with no handshake OV_RELAY_MS after it is configured goes
 * through it). Its port: its own endpoint's. Takes the spare
 * wireguard-go (waits for it only when parts came faster than it
 * starts). Executor thread only. 0, or GP_E* with err set and nothing of
 * this part left.
 */
int gp_overlay_link(struct gp_overlay *o, int64_t job, int part, int parts,
    const struct gp_overlay_peer *peers, const char *priv,
    const uint32_t *addrs, uint32_t local_addr,
    const struct gp_overlay_relay *relay, char *err, size_t errlen);
/*
 * Undoes gp_overlay_link: stops the part's wireguard-go (its key gone)
 * and its relay flow.
 */
void gp_overlay_unlink(struct gp_overlay *o, int64_t job, int part);
/*
 * Nudges peers whose first handshake stalls (crossed initiations; see
 * overlay.c), and sends through the relay those that have none after
 * OV_RELAY_MS. now: gp_mono_ms(). Returns the ms until it wants to be
 * called again, -1 for no need. Executor thread only; NULL is fine.
 */
int64_t gp_overlay_tick(struct gp_overlay *o, int64_t now);

/*
 * What a killed agent of block b left: its wireguard-gos (found by their
 * pid files), control sockets, devices and tables. tables: `nft list
 * tables`' output. The caller holds b's lock.
 */
void gp_overlay_sweep(int b, const char *tables);

/*
 * Sets stale[b] to 1 for each block b (below nblocks) of which this
 * machine holds an overlay's leftovers: a wireguard-go pid file, a
 * control socket, a device (in the caller's namespace) or a table (in
 * tables, `nft list tables`' output). One look at each kind for every
 * block, so that gp_overlay_sweep runs only where there is something.
 */
void gp_overlay_stale_blocks(const char *tables, unsigned char *stale,
    int nblocks);

#endif
