/*
 * netns6.c: IPv6 for a root agent's jobs: the host's IPv6 egress found,
 * forwarding turned on, the jobs' ULA addresses and the rules of the
 * agent's table for them (see netns6.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "agent/netns.h"
#include "agent/netns6.h"
#include "gp.h"
#include "log.h"
#include "util.h"

/* fd67:7075:706c::/48 ("gpupl"), a /64 per agent block. */
#define NET6_PREFIX "fd67:7075:706c"
#define NET6_SLOT_BASE 0x100

/*
 * Calls fn with each IPv6 default route's interface (/proc/net/ipv6_route:
 * destination ::/0, up, not a reject route, not on lo). Returns how many.
 */
static int
default_routes(void (*fn)(const char *ifname, void *arg), void *arg)
{
	char *text = NULL, *line, *save = NULL;
	size_t len;
	int n = 0;

	if (gp_read_file("/proc/net/ipv6_route", 1 << 20, &text, &len) != 0)
		return 0;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char dst[40], dst_len[4], src[40], src_len[4], hop[40];
		char dev[32];
		unsigned long metric, ref, use, flags;

		if (sscanf(line, "%39s %3s %39s %3s %39s %lx %lx %lx %lx %31s",
		    dst, dst_len, src, src_len, hop, &metric, &ref, &use,
		    &flags, dev) != 10)
			continue;
		if (strcmp(dst, "00000000000000000000000000000000") != 0 ||
		    strcmp(dst_len, "00") != 0 || !(flags & 0x1) ||
		    (flags & 0x200) || strcmp(dev, "lo") == 0)
			continue;
		n++;
		if (fn != NULL)
			fn(dev, arg);
	}
	free(text);
	return n;
}

int
gp_net6_egress(void)
{
	return default_routes(NULL, NULL) > 0;
}

/* Where accept_ra is 1, forwarding would stop it: 2 keeps it. */
static void
keep_ra(const char *ifname, void *arg)
{
	char path[128], *text = NULL;
	size_t len;
	int fd;

	(void)arg;
	if (strchr(ifname, '/') != NULL)
		return;
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/accept_ra",
	    ifname);
	if (gp_read_file(path, 64, &text, &len) == 0 && text[0] == '1' &&
	    (fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "2\n", 2) == 2)
			gp_info("job networks: accept_ra=2 on %s (router "
			    "advertisements still accepted with IPv6 "
			    "forwarding on)", ifname);
		close(fd);
	}
	free(text);
}

/* Before forwarding goes on: accept_ra kept on the default routes'. */
static void
keep_ra_on_default_routes(void)
{
	default_routes(keep_ra, NULL);
}

int
gp_net6_forwarding_on(char *err, size_t errlen)
{
	return gp_net_sysctl_on("net.ipv6.conf.all.forwarding",
	    "IPv6 forwarding", keep_ra_on_default_routes, err, errlen);
}

void
gp_net6_addr(int block, int slot, int job_end, struct in6_addr *out)
{
	unsigned int low = NET6_SLOT_BASE + 2u * (unsigned int)slot +
	    (job_end ? 1u : 0u);

	memset(out, 0, sizeof(*out));
	/* fd67:7075:706c:<block>::<low> */
	out->s6_addr[0] = 0xfd;
	out->s6_addr[1] = 0x67;
	out->s6_addr[2] = 0x70;
	out->s6_addr[3] = 0x75;
	out->s6_addr[4] = 0x70;
	out->s6_addr[5] = 0x6c;
	out->s6_addr[6] = (unsigned char)(block >> 8);
	out->s6_addr[7] = (unsigned char)block;
	out->s6_addr[14] = (unsigned char)(low >> 8);
	out->s6_addr[15] = (unsigned char)low;
}

void
gp_net6_prefix_text(int block, char *out, size_t len)
{
	snprintf(out, len, NET6_PREFIX ":%x::/64", (unsigned int)block);
}

int
gp_net6_chain(struct gp_buf *b, int block)
{
	struct in6_addr a;
	char in_lo[INET6_ADDRSTRLEN], in_hi[INET6_ADDRSTRLEN];
	char lan_lo[INET6_ADDRSTRLEN], lan_hi[INET6_ADDRSTRLEN];

	/* Slots 0..255 internet jobs, 256..511 lan jobs (the job's ends). */
	gp_net6_addr(block, 0, 1, &a);
	inet_ntop(AF_INET6, &a, in_lo, sizeof(in_lo));
	gp_net6_addr(block, 255, 1, &a);
	inet_ntop(AF_INET6, &a, in_hi, sizeof(in_hi));
	gp_net6_addr(block, 256, 1, &a);
	inet_ntop(AF_INET6, &a, lan_lo, sizeof(lan_lo));
	gp_net6_addr(block, 511, 1, &a);
	inet_ntop(AF_INET6, &a, lan_hi, sizeof(lan_hi));
	gp_buf_printf(b,
	    "  chain from_job6 {\n"
	    "    ct state established,related accept\n"
	    "    meta l4proto != { tcp, udp } drop\n"
	    "    ip6 daddr ::ffff:0.0.0.0/96 drop\n"
	    "    ip6 daddr " NET6_PREFIX "::/48 drop\n"
	    "    ip6 saddr %s-%s ip6 daddr != 2000::/3 drop\n"
	    "    ip6 saddr %s-%s ip6 daddr != { 2000::/3, fc00::/7 } drop\n"
	    "    ip6 saddr %s-%s accept\n"
	    "    ip6 saddr %s-%s accept\n"
	    "    drop\n"
	    "  }\n", in_lo, in_hi, lan_lo, lan_hi, in_lo, in_hi, lan_lo,
	    lan_hi);
	return b->data != NULL ? 0 : GP_ENOMEM;
}
