/*
 * netns6.h: IPv6 for a root agent's jobs (netns.c's helper; docs/agent.md,
 * "IPv6").
 *
 * When the host has an IPv6 default route, each job's veth pair also
 * carries IPv6: the agent's block b owns the ULA prefix
 * fd67:7075:706c:b::/64, slot s the /127 pair ::100+2s (the host's end)
 * and ::101+2s (the job's), masqueraded to the host's address on the way
 * out. What a job may reach, by its source address as for IPv4:
 *
 *   internet  global unicast (2000::/3) only;
 *   lan       plus the provider's private prefixes (ULA, fc00::/7),
 *             other jobs' prefix excepted;
 *
 * never the host itself (its input chain), loopback, link-local,
 * multicast or v4-mapped addresses.
 */
#ifndef GP_AGENT_NETNS6_H
#define GP_AGENT_NETNS6_H

#include <stddef.h>
#include <netinet/in.h>

struct gp_buf;

/* 1 when the host has an IPv6 default route (/proc/net/ipv6_route). */
int gp_net6_egress(void);
/*
 * Turns IPv6 forwarding on, first keeping router advertisements
 * accepted (accept_ra 2) where they were (1) on the interfaces of the
 * default routes. 0, or GP_EIO with err set.
 */
int gp_net6_forwarding_on(char *err, size_t errlen);
/* Slot slot's address in block block: the host's end, or the job's. */
void gp_net6_addr(int block, int slot, int job_end, struct in6_addr *out);
/* Block block's /64, as nftables writes it ("fd67:7075:706c:1f::/64"). */
void gp_net6_prefix_text(int block, char *out, size_t len);
/*
 * The chain from_job6 of block block's table (netns.c jumps to it for a
 * job's IPv6 packets), into b. 0 or GP_ENOMEM. (Pure: unit-tested.)
 */
int gp_net6_chain(struct gp_buf *b, int block);

#endif
