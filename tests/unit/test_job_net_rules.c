/*
 * test_job_net_rules.c: the pure parts of job networks (issue 14): the
 * IPv6 addresses and chain of a root agent's table (netns6.c), and the
 * table a non-root agent writes in each job's namespace (netns_pasta.c).
 * The e2e tests (test_job_network_ipv6, test_job_network_pasta) load
 * them into nftables and send traffic through them.
 */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "agent/netns6.h"
#include "agent/netns_pasta.h"
#include "gp.h"
#include "util.h"
#include "unit.h"

static void
addr_text(int block, int slot, int job_end, char *out, size_t len)
{
	struct in6_addr a;

	gp_net6_addr(block, slot, job_end, &a);
	inet_ntop(AF_INET6, &a, out, (socklen_t)len);
}

TEST(ipv6_addresses)
{
	char t[INET6_ADDRSTRLEN];

	addr_text(0x1f, 0, 0, t, sizeof(t));
	CHECK_STR(t, "fd67:7075:706c:1f::100");
	addr_text(0x1f, 0, 1, t, sizeof(t));
	CHECK_STR(t, "fd67:7075:706c:1f::101");
	addr_text(0, 511, 1, t, sizeof(t));
	CHECK_STR(t, "fd67:7075:706c::4ff");
	addr_text(255, 256, 0, t, sizeof(t));
	CHECK_STR(t, "fd67:7075:706c:ff::300");
	gp_net6_prefix_text(0xab, t, sizeof(t));
	CHECK_STR(t, "fd67:7075:706c:ab::/64");
}

TEST(ipv6_chain)
{
	struct gp_buf b;

	memset(&b, 0, sizeof(b));
	CHECK_EQ(gp_net6_chain(&b, 2), 0);
	CHECK(b.data != NULL);
	if (b.data == NULL)
		return;
	/* internet slots: global unicast only. */
	CHECK(strstr(b.data, "ip6 saddr fd67:7075:706c:2::101-"
	    "fd67:7075:706c:2::2ff ip6 daddr != 2000::/3 drop") != NULL);
	/* lan slots: and ULA. */
	CHECK(strstr(b.data, "ip6 saddr fd67:7075:706c:2::301-"
	    "fd67:7075:706c:2::4ff ip6 daddr != { 2000::/3, fc00::/7 } "
	    "drop") != NULL);
	/* Never v4-mapped, never other jobs, never anything but TCP/UDP. */
	CHECK(strstr(b.data, "ip6 daddr ::ffff:0.0.0.0/96 drop") != NULL);
	CHECK(strstr(b.data, "ip6 daddr fd67:7075:706c::/48 drop") != NULL);
	CHECK(strstr(b.data, "meta l4proto != { tcp, udp } drop") != NULL);
	/* The other jobs' drop comes before the lan accept. */
	CHECK(strstr(b.data, "fd67:7075:706c::/48 drop") <
	    strstr(b.data, "2::4ff accept"));
	gp_buf_free(&b);
}

TEST(pasta_rules)
{
	struct gp_buf b;

	memset(&b, 0, sizeof(b));
	CHECK_EQ(gp_pasta_rules(&b, GP_NET_INTERNET, "192.168.77.2, "
	    "172.31.5.1", "2001:db8:77::2"), 0);
	CHECK(b.data != NULL);
	if (b.data == NULL)
		return;
	CHECK(strstr(b.data, "hook output") != NULL);
	CHECK(strstr(b.data, "set host4 { type ipv4_addr; elements = { "
	    "192.168.77.2, 172.31.5.1 };") != NULL);
	CHECK(strstr(b.data, "elements = { 2001:db8:77::2 };") != NULL);
	CHECK(strstr(b.data, "ip daddr @not_internet drop") != NULL);
	CHECK(strstr(b.data, "ip daddr @not_lan drop") == NULL);
	CHECK(strstr(b.data, "fc00::/7") == NULL);
	CHECK(strstr(b.data, "ip daddr @host4 drop") != NULL);
	CHECK(strstr(b.data, "ip6 daddr != @ok6 drop") != NULL);
	/* Only loopback and pasta's DNS forwarder before the drops. */
	CHECK(strstr(b.data, "oifname \"lo\" accept") <
	    strstr(b.data, "@host4 drop"));
	gp_buf_free(&b);

	memset(&b, 0, sizeof(b));
	CHECK_EQ(gp_pasta_rules(&b, GP_NET_LAN, "", ""), 0);
	CHECK(b.data != NULL);
	if (b.data == NULL)
		return;
	CHECK(strstr(b.data, "ip daddr @not_lan drop") != NULL);
	CHECK(strstr(b.data, "ip daddr @not_internet drop") == NULL);
	CHECK(strstr(b.data, "2000::/3, fc00::/7") != NULL);
	/* No host address: empty sets, no empty element list. */
	CHECK(strstr(b.data, "set host4 { type ipv4_addr;  }") != NULL);
	CHECK(strstr(b.data, "elements = {  }") == NULL);
	gp_buf_free(&b);
}

int
main(void)
{
	RUN(ipv6_addresses);
	RUN(ipv6_chain);
	RUN(pasta_rules);
	return unit_report();
}
