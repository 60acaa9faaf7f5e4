/*
 * netns.c: every job's network namespace, its veth pair and the agent's
 * nftables table (see netns.h and docs/agent.md for the design and why
 * veth + nftables was chosen over pasta and slirp4netns).
 *
 * Addresses: 10.200.0.0/14 is cut into 256 blocks of /22, one per agent
 * on the machine, held by an flock on /run/gpupool-net/<block>.lock (so a
 * killed agent's block is free again, and the next agent to start sweeps
 * what it left). In a block, slot s (0..511) is the /31 pair
 * base+2s (the host's end) and base+2s+1 (the job's); slots 0..255 are
 * internet jobs, 256..511 lan jobs. The table's rules tell them apart by
 * source address, so a start writes no rule.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <libmnl/libmnl.h>

#include "agent/netns.h"
#include "agent/overlay.h"
#include "agent/netns_pasta.h"
#include "agent/netns6.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#define NET_RUN_DIR "/run/gpupool-net"
#define NET_BLOCKS 256
#define NET_SLOTS 512		/* per block: /31 pairs in a /22 */
#define NET_HALF 256		/* internet slots; then lan slots */
#define NET_BASE 0x0ac80000u	/* 10.200.0.0 */
#define NET_GANG_BASE 0x0acc0000u /* 10.204.0.0/14: gangs' parts */
/* Routes to other machines' gang parts: metric 7000 + the agent's block. */
#define NET_ROUTE_PRIO 7000u
#define NET_TABLE_FMT "gpupool_%02x"
#define NET_IF_FMT "gp%02x.%d"
#define NET_POOL 32		/* namespaces kept for reuse, per policy */
/*
 * A gang part that ended keeps its links this long: what it sent just
 * before it exited (an answer, a last gradient) is still in flight, and
 * tearing its overlay and namespace down at once drops it, leaving the
 * other parts waiting. Closed at once when the same part starts again.
 */
#define NET_GANG_LINGER_MS 5000
#define NET_LINGER_MAX	   64

struct gp_net {
	enum gp_net_policy policy;	/* the owner's */
	enum gp_net_policy offer;
	const char *offer_why;
	int64_t rate_bps;
	int root;
	int block;		/* -1 when not root */
	int lock_fd;
	struct mnl_socket *nl;	/* rtnetlink, in the agent's namespace */
	unsigned int seq;
	unsigned char used[NET_SLOTS];
	int next[2];		/* where the next search starts, per half */
	char table[32];
	/* Namespaces of ended jobs, ready for the next (per policy). */
	struct gp_net_job pool[3][NET_POOL];
	int npool[3];
	int closing;		/* gp_net_free: pool nothing more */
	/*
	 * The DNS relay, when the host's resolver is on its loopback:
	 * dnsmasq on 169.254.53.<block> (an address on the agent's lo),
	 * and the resolv.conf jobs get instead of the host's.
	 */
	pid_t dns_pid;
	char dns_addr[20];
	char resolv_conf[64];
	struct gp_overlay *overlay;	/* gangs across NATs; not owned */
	/* A non-root agent's: pasta for its jobs (NULL: loopback only). */
	struct gp_pasta *pasta;
	/* Why jobs get less than the policy (pasta or nftables failed). */
	char pasta_why[512];
	int nft_ok;		/* a root agent's nft works */
	int ipv6;		/* jobs get IPv6 too (netns6.h) */
	/* Gang parts that ended, their links kept until linger_until. */
	struct gp_net_job linger[NET_LINGER_MAX];
	int64_t linger_until[NET_LINGER_MAX];
	int nlinger;
};

static void close_now(struct gp_net *n, struct gp_net_job *j);
static void gang_unlink(struct gp_net *n, struct gp_net_job *j);
static void linger_close(struct gp_net *n, int i);

const char *
gp_net_policy_name(enum gp_net_policy p)
{
	switch (p) {
	case GP_NET_NONE:
		return "none";
	case GP_NET_INTERNET:
		return "internet";
	case GP_NET_LAN:
		return "lan";
	}
	return "?";
}

int
gp_net_policy_parse(const char *s, enum gp_net_policy *out)
{
	if (strcmp(s, "none") == 0)
		*out = GP_NET_NONE;
	else if (strcmp(s, "internet") == 0)
		*out = GP_NET_INTERNET;
	else if (strcmp(s, "lan") == 0)
		*out = GP_NET_LAN;
	else
		return GP_EINVAL;
	return 0;
}

int
gp_net_rate_parse(const char *s, int64_t *bps)
{
	int64_t mult = 1, v = 0;
	const char *p = s;
	int digits = 0;

	if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0) {
		*bps = 0;
		return 0;
	}
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		if (v > (INT64_MAX - 9) / 10)
			return GP_EINVAL;
		v = v * 10 + (*p - '0');
	}
	if (digits == 0 || v == 0)
		return GP_EINVAL;
	switch (*p) {
	case 'k': case 'K':
		mult = 1000;
		p++;
		break;
	case 'M':
		mult = 1000 * 1000;
		p++;
		break;
	case 'G':
		mult = 1000 * 1000 * 1000;
		p++;
		break;
	case '\0':
		break;
	default:
		return GP_EINVAL;
	}
	/* "200Mbit" and "200M" mean the same; bytes are not accepted. */
	if (strcmp(p, "bit") == 0)
		p += 3;
	if (*p != '\0' || v > INT64_MAX / mult)
		return GP_EINVAL;
	v *= mult;
	/* Below 8 kbit/s a token bucket cannot pass one packet a second. */
	if (v < 8000 || v > (int64_t)1000 * 1000 * 1000 * 1000)
		return GP_EINVAL;
	*bps = v;
	return 0;
}

/* ---- running nft and tc ---- */

/*
 * Runs argv (an absolute path or a name found on PATH) with stdin_text
 * on its standard input (or /dev/null). In the child, enter(arg) runs
 * first (NULL: nothing); a nonzero answer is the child's exit status.
 * The output goes to out (may be NULL); *exit_status (may be NULL) gets
 * the exit status, -1 when killed. 0 when it exits 0.
 */
int
gp_net_run_entered(char *const argv[], const char *stdin_text,
    int (*enter)(void *), void *arg, char *out, size_t outlen,
    int *exit_status)
{
	int in[2] = {-1, -1}, o[2] = {-1, -1}, status, ret = GP_EIO;
	size_t used = 0;
	pid_t pid;
	ssize_t got;

	if (exit_status != NULL)
		*exit_status = -1;
	if (out != NULL && outlen > 0)
		out[0] = '\0';
	if (pipe2(in, O_CLOEXEC) != 0)
		return GP_EIO;
	if (pipe2(o, O_CLOEXEC) != 0)
		goto done;
	if ((pid = fork()) < 0)
		goto done;
	if (pid == 0) {
		sigset_t none;
		int why;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (enter != NULL && (why = enter(arg)) != 0)
			_exit(why);
		if (dup2(in[0], 0) < 0 || dup2(o[1], 1) < 0 ||
		    dup2(o[1], 2) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(o[1]);
	in[0] = o[1] = -1;
	if (stdin_text != NULL)
		(void)gp_write_all(in[1], stdin_text, strlen(stdin_text));
	close(in[1]);
	in[1] = -1;
	for (;;) {
		char junk[512];
		char *dst = junk;
		size_t room = sizeof(junk);

		if (out != NULL && used + 1 < outlen) {
			dst = out + used;
			room = outlen - used - 1;
		}
		got = read(o[0], dst, room);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		if (dst != junk)
			used += (size_t)got;
	}
	if (out != NULL && outlen > 0)
		out[used] = '\0';
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			goto done;
	if (exit_status != NULL && WIFEXITED(status))
		*exit_status = WEXITSTATUS(status);
	ret = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : GP_EIO;
done:
	if (in[0] >= 0)
		close(in[0]);
	if (in[1] >= 0)
		close(in[1]);
	if (o[0] >= 0)
		close(o[0]);
	if (o[1] >= 0)
		close(o[1]);
	return ret;
}

/* In the child: into network namespace *(int *)arg. */
static int
enter_net(void *arg)
{
	int ns_fd = *(int *)arg;

	return setns(ns_fd, CLONE_NEWNET) != 0 ? 126 : 0;
}

/*
 * Runs argv with stdin_text on its standard input, in network namespace
 * ns_fd (-1: the agent's). Its output goes to out (may be NULL). 0 when
 * it exits 0.
 */
static int
run(char *const argv[], const char *stdin_text, int ns_fd, char *out,
    size_t outlen)
{
	return gp_net_run_entered(argv, stdin_text,
	    ns_fd >= 0 ? enter_net : NULL, &ns_fd, out, outlen, NULL);
}

int
gp_net_run(char *const argv[], const char *stdin_text, int ns_fd,
    char *out, size_t outlen)
{
	return run(argv, stdin_text, ns_fd, out, outlen);
}

/* ---- rtnetlink ---- */

static struct mnl_socket *
nl_open(void)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);

	if (nl == NULL)
		return NULL;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/*
 * Sends one request and reads the answers (each passed to cb, may be
 * NULL) up to its acknowledgement or the end of a dump. 0 or -errno.
 */
static int
nl_ask(struct mnl_socket *nl, unsigned int *seq, struct nlmsghdr *nlh,
    mnl_cb_t cb, void *data)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	ssize_t got;
	int ret;

	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++*seq;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	do {
		got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (got < 0 && errno == EINTR) {
			ret = 1;	/* a signal: the answer is still coming */
			continue;
		}
		if (got < 0)
			return -errno;
		/*
		 * An answer to an earlier request that gave up reading (a
		 * dump cut short by NLM_F_DUMP_INTR while other agents change
		 * links leaves the rest of it queued) would fail the sequence
		 * check (EPROTO), and so would every request after it: not
		 * ours, read on.
		 */
		if ((size_t)got >= sizeof(struct nlmsghdr) &&
		    ((const struct nlmsghdr *)(const void *)buf)->nlmsg_seq !=
		    nlh->nlmsg_seq) {
			ret = 1;
			continue;
		}
		ret = mnl_cb_run(buf, (size_t)got, nlh->nlmsg_seq,
		    mnl_socket_get_portid(nl), cb, data);
	} while (ret > 0);
	return ret < 0 ? -errno : 0;
}

static int
nl_talk(struct mnl_socket *nl, unsigned int *seq, struct nlmsghdr *nlh)
{
	return nl_ask(nl, seq, nlh, NULL, NULL);
}

/* Links whose name starts with prefix (a dump), for the sweep. */
struct link_list {
	const char *prefix;
	char names[64][IFNAMSIZ];
	int n;
};

static int
link_list_cb(const struct nlmsghdr *nlh, void *data)
{
	struct link_list *l = data;
	struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg)) {
		const char *name;

		if (mnl_attr_get_type(a) != IFLA_IFNAME ||
		    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0)
			continue;
		name = mnl_attr_get_str(a);
		if (strncmp(name, l->prefix, strlen(l->prefix)) == 0 &&
		    l->n < (int)GP_ARRAY_LEN(l->names))
			gp_strlcpy(l->names[l->n++], name, IFNAMSIZ);
	}
	return MNL_CB_OK;
}

static int
link_list(struct mnl_socket *nl, unsigned int *seq, struct link_list *l)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtgenmsg *g;

	nlh->nlmsg_type = RTM_GETLINK;
	nlh->nlmsg_flags = NLM_F_DUMP;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_PACKET;
	l->n = 0;
	return nl_ask(nl, seq, nlh, link_list_cb, l);
}

static int
link_stats_cb(const struct nlmsghdr *nlh, void *data)
{
	struct rtnl_link_stats64 *st = data;
	struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg))
		if (mnl_attr_get_type(a) == IFLA_STATS64 &&
		    mnl_attr_get_payload_len(a) >= sizeof(*st))
			memcpy(st, mnl_attr_get_payload(a), sizeof(*st));
	return MNL_CB_OK;
}

static int
link_stats64_cb(const struct nlmsghdr *nlh, void *data)
{
	struct rtnl_link_stats64 *st = data;
	struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct if_stats_msg))
		if (mnl_attr_get_type(a) == IFLA_STATS_LINK_64 &&
		    mnl_attr_get_payload_len(a) >= sizeof(*st))
			memcpy(st, mnl_attr_get_payload(a), sizeof(*st));
	return MNL_CB_OK;
}

/*
 * A link's counters (in nl's namespace, whatever /sys shows): by index
 * when known, with RTM_GETSTATS asking for the 64-bit counters alone
 * (RTM_GETLINK fills every attribute of the link, IPv6's settings
 * included: most of what reading a job's bytes cost), else by name.
 */
static int
link_stats(struct mnl_socket *nl, unsigned int *seq, const char *name,
    int ifindex, struct rtnl_link_stats64 *st)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct if_stats_msg *ism;
	struct ifinfomsg *ifm;

	memset(st, 0, sizeof(*st));
	if (ifindex > 0) {
		nlh->nlmsg_type = RTM_GETSTATS;
		ism = mnl_nlmsg_put_extra_header(nlh, sizeof(*ism));
		ism->family = AF_UNSPEC;
		ism->ifindex = (uint32_t)ifindex;
		ism->filter_mask = IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64);
		return nl_ask(nl, seq, nlh, link_stats64_cb, st);
	}
	nlh->nlmsg_type = RTM_GETLINK;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return nl_ask(nl, seq, nlh, link_stats_cb, st);
}

static int
link_up(struct mnl_socket *nl, unsigned int *seq, int ifindex)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifm;

	nlh->nlmsg_type = RTM_NEWLINK;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	ifm->ifi_change = IFF_UP;
	ifm->ifi_flags = IFF_UP;
	return nl_talk(nl, seq, nlh);
}

static int
link_del(struct mnl_socket *nl, unsigned int *seq, const char *name)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifm;

	nlh->nlmsg_type = RTM_DELLINK;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return nl_talk(nl, seq, nlh);
}

/* A veth pair: host_if here, "eth0" in the namespace ns_fd. */
static int
veth_add(struct mnl_socket *nl, unsigned int *seq, const char *host_if,
    int ns_fd)
{
	char buf[1024];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifm, *peer_ifm;
	struct nlattr *info, *data, *peer;

	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host_if);
	info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	peer_ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*peer_ifm));
	peer_ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, "eth0");
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)ns_fd);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return nl_talk(nl, seq, nlh);
}

static int
addr_add(struct mnl_socket *nl, unsigned int *seq, int ifindex,
    uint32_t addr)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	uint32_t a = htonl(addr);

	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = 31;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned int)ifindex;
	mnl_attr_put_u32(nlh, IFA_LOCAL, a);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, a);
	return nl_talk(nl, seq, nlh);
}

/*
 * A route: to dst/32 (dst 0: the default route), through gateway (0:
 * none, the link itself) on ifindex (0: any); onlink: the gateway is on
 * the link whatever the link's addresses say. del: removes it instead.
 */
static int
route_set(struct mnl_socket *nl, unsigned int *seq, int del, uint32_t dst,
    int ifindex, uint32_t gateway, int onlink, uint32_t prio)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;

	nlh->nlmsg_type = del ? RTM_DELROUTE : RTM_NEWROUTE;
	/* A part's own address replaces a route another agent made. */
	nlh->nlmsg_flags = del ? 0 : NLM_F_CREATE |
	    (dst != 0 && gateway == 0 ? NLM_F_REPLACE : NLM_F_EXCL);
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = gateway == 0 && !del ? RT_SCOPE_LINK :
	    RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	if (onlink)
		rtm->rtm_flags |= RTNH_F_ONLINK;
	if (dst != 0) {
		rtm->rtm_dst_len = 32;
		mnl_attr_put_u32(nlh, RTA_DST, htonl(dst));
	}
	if (gateway != 0)
		mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
	if (ifindex > 0)
		mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	if (prio > 0)
		mnl_attr_put_u32(nlh, RTA_PRIORITY, prio);
	return nl_talk(nl, seq, nlh);
}

static int
route_default(struct mnl_socket *nl, unsigned int *seq, int ifindex,
    uint32_t gateway)
{
	return route_set(nl, seq, 0, 0, ifindex, gateway, 0, 0);
}

static int
addr_add_len(struct mnl_socket *nl, unsigned int *seq, int ifindex,
    uint32_t addr, int prefixlen)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	uint32_t a = htonl(addr);

	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefixlen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned int)ifindex;
	mnl_attr_put_u32(nlh, IFA_LOCAL, a);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, a);
	return nl_talk(nl, seq, nlh);
}

/* An IPv6 address of a /127 on ifindex, usable at once (no DAD). */
static int
addr6_add(struct mnl_socket *nl, unsigned int *seq, int ifindex,
    const struct in6_addr *addr)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;

	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET6;
	ifa->ifa_prefixlen = 127;
	ifa->ifa_flags = IFA_F_NODAD;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned int)ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, sizeof(*addr), addr);
	mnl_attr_put(nlh, IFA_ADDRESS, sizeof(*addr), addr);
	return nl_talk(nl, seq, nlh);
}

/* The IPv6 default route through gateway on ifindex. */
static int
route6_default(struct mnl_socket *nl, unsigned int *seq, int ifindex,
    const struct in6_addr *gateway)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;

	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET6;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put(nlh, RTA_GATEWAY, sizeof(*gateway), gateway);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	return nl_talk(nl, seq, nlh);
}

int
gp_net_loopback_up(void)
{
	struct ifreq ifr;
	int fd, ret = 0;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0)
		ret = -errno;
	else if (!(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
			ret = -errno;
	}
	close(fd);
	return ret;
}

/* ---- the agent's table ---- */

static void
ip_text(uint32_t a, char *out, size_t len)
{
	snprintf(out, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255,
	    (a >> 8) & 255, a & 255);
}

/* The IPv4 name servers of /etc/resolv.conf, ", "-separated, into out. */
static void
resolvers(char *out, size_t len, int *loopback_only)
{
	char *text = NULL, *line, *save = NULL;
	struct in_addr a;
	size_t n, used = 0;
	int any = 0, loop = 0;

	out[0] = '\0';
	if (gp_read_file("/etc/resolv.conf", 65536, &text, &n) != 0)
		goto done;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char word[16], addr[64];

		if (sscanf(line, " %15s %63s", word, addr) != 2 ||
		    strcmp(word, "nameserver") != 0 ||
		    inet_pton(AF_INET, addr, &a) != 1)
			continue;
		if ((ntohl(a.s_addr) >> 24) == 127) {
			loop = 1;
			continue;
		}
		if (used + strlen(addr) + 3 >= len)
			break;
		used += (size_t)snprintf(out + used, len - used, "%s%s",
		    any ? ", " : "", addr);
		any = 1;
	}
done:
	free(text);
	*loopback_only = loop && !any;
}

/* ---- the DNS relay (a resolver on the host's loopback) ---- */

#define NET_DNS_NET "169.254.53."	/* + the block: the relay's address */
#define NET_DNS_PID_FMT NET_RUN_DIR "/%02x.dns.pid"
#define NET_RESOLV_FMT NET_RUN_DIR "/%02x.resolv.conf"

/* 1 when process pid is in the caller's network namespace. */
static int
same_net(long pid)
{
	char mine[64], theirs[64], path[64];
	ssize_t a, t;

	snprintf(path, sizeof(path), "/proc/%ld/ns/net", pid);
	a = readlink("/proc/thread-self/ns/net", mine, sizeof(mine));
	t = readlink(path, theirs, sizeof(theirs));
	return a > 0 && t == a && memcmp(mine, theirs, (size_t)a) == 0;
}

/*
 * Stops a relay a killed agent of block b left (its pid file). A relay
 * in another network namespace (the blocks' locks are the machine's,
 * tests run agents in namespaces of their own) is that one's agents' to
 * sweep: left alone, its pid file too.
 */
static void
dns_sweep(int b, const char *lo_addrs)
{
	char path[64], comm[32], addr[32], *text = NULL;
	size_t n;
	long pid;
	int fd;

	snprintf(path, sizeof(path), NET_DNS_PID_FMT, b);
	if (gp_read_file(path, 64, &text, &n) == 0 &&
	    (pid = strtol(text, NULL, 10)) > 1) {
		char proc[64];

		snprintf(proc, sizeof(proc), "/proc/%ld/comm", pid);
		if ((fd = open(proc, O_RDONLY | O_CLOEXEC)) >= 0) {
			ssize_t k = read(fd, comm, sizeof(comm) - 1);

			close(fd);
			comm[k > 0 ? k : 0] = '\0';
			if (strcmp(comm, "dnsmasq\n") == 0 && !same_net(pid)) {
				free(text);
				return;
			}
			if (strcmp(comm, "dnsmasq\n") == 0 &&
			    kill((pid_t)pid, SIGTERM) == 0)
				gp_info("job networks: stopped a stale DNS "
				    "relay block=%d pid=%ld", b, pid);
		}
	}
	free(text);
	unlink(path);
	snprintf(addr, sizeof(addr), NET_DNS_NET "%d/32", b);
	if (lo_addrs != NULL && strstr(lo_addrs, addr) != NULL) {
		char *argv[] = {"ip", "addr", "del", addr, "dev", "lo", NULL};

		(void)run(argv, NULL, -1, NULL, 0);
	}
}

/*
 * The host's resolver is on its loopback, where jobs cannot reach it:
 * dnsmasq (Debian's dnsmasq-base) relays to it from 169.254.53.<block>,
 * an address put on the agent's lo, and jobs get a resolv.conf naming
 * that address (with the host's search and options lines). 0, or -1
 * with why set (jobs then get no DNS).
 */
static int
dns_relay_start(struct gp_net *n, char *why, size_t whylen)
{
	static const char dnsmasq[] = "/usr/sbin/dnsmasq";
	char *text = NULL, *line, *save = NULL, addr[32], pidfile[64];
	char *argv[24], servers[8][80], listen[48];
	struct gp_buf conf;
	struct in_addr a;
	int nservers = 0, argc = 0, i, fd;
	size_t len;
	pid_t pid;

	if (access(dnsmasq, X_OK) != 0) {
		snprintf(why, whylen, "%s is not installed (Debian's "
		    "dnsmasq-base relays DNS to it)", dnsmasq);
		return -1;
	}
	memset(&conf, 0, sizeof(conf));
	gp_buf_printf(&conf, "# gpupool agent: the host's resolver relayed "
	    "(docs/agent.md, \"Job networks\")\nnameserver " NET_DNS_NET
	    "%d\n", n->block);
	if (gp_read_file("/etc/resolv.conf", 65536, &text, &len) == 0)
		for (line = strtok_r(text, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			char word[16], ip[64];

			if (sscanf(line, " %15s %63s", word, ip) != 2)
				continue;
			if (strcmp(word, "search") == 0 ||
			    strcmp(word, "domain") == 0 ||
			    strcmp(word, "options") == 0)
				gp_buf_printf(&conf, "%s\n", line);
			else if (strcmp(word, "nameserver") == 0 &&
			    inet_pton(AF_INET, ip, &a) == 1 &&
			    (ntohl(a.s_addr) >> 24) == 127 && nservers < 8)
				snprintf(servers[nservers++],
				    sizeof(servers[0]), "--server=%s", ip);
		}
	free(text);
	if (nservers == 0 || conf.data == NULL) {
		snprintf(why, whylen, "no IPv4 loopback name server in "
		    "/etc/resolv.conf");
		gp_buf_free(&conf);
		return -1;
	}
	snprintf(n->resolv_conf, sizeof(n->resolv_conf), NET_RESOLV_FMT,
	    n->block);
	fd = open(n->resolv_conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644);
	if (fd < 0 || gp_write_all(fd, conf.data, strlen(conf.data)) != 0 ||
	    fchmod(fd, 0644) != 0) {
		snprintf(why, whylen, "%s: %s", n->resolv_conf,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		gp_buf_free(&conf);
		n->resolv_conf[0] = '\0';
		return -1;
	}
	close(fd);
	gp_buf_free(&conf);
	snprintf(n->dns_addr, sizeof(n->dns_addr), NET_DNS_NET "%d",
	    n->block);
	snprintf(addr, sizeof(addr), "%s/32", n->dns_addr);
	{
		char *ip[] = {"ip", "addr", "replace", addr, "dev", "lo",
		    NULL};

		if (run(ip, NULL, -1, why, whylen) != 0)
			goto fail;
	}
	snprintf(listen, sizeof(listen), "--listen-address=%s", n->dns_addr);
	snprintf(pidfile, sizeof(pidfile), "--pid-file=" NET_DNS_PID_FMT,
	    n->block);
	argv[argc++] = (char *)dnsmasq;
	argv[argc++] = "--keep-in-foreground";
	argv[argc++] = "--conf-file=/dev/null";
	argv[argc++] = "--no-resolv";
	argv[argc++] = "--no-hosts";
	argv[argc++] = "--no-poll";
	argv[argc++] = "--bind-interfaces";
	argv[argc++] = listen;
	argv[argc++] = "--user=nobody";
	argv[argc++] = "--group=nogroup";
	argv[argc++] = "--log-facility=-";
	argv[argc++] = pidfile;
	for (i = 0; i < nservers; i++)
		argv[argc++] = servers[i];
	argv[argc] = NULL;
	if ((pid = fork()) < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Its stdout, stderr: the agent's log. */
		execv(dnsmasq, argv);
		_exit(127);
	}
	n->dns_pid = pid;
	gp_info("job networks: the host's resolver is on its loopback: "
	    "jobs' DNS relayed by dnsmasq addr=%s pid=%d servers=%d",
	    n->dns_addr, (int)pid, nservers);
	return 0;
fail:
	unlink(n->resolv_conf);
	n->resolv_conf[0] = '\0';
	n->dns_addr[0] = '\0';
	return -1;
}

static void
dns_relay_stop(struct gp_net *n)
{
	char addr[32], pidfile[64];

	if (n->dns_pid > 0) {
		kill(n->dns_pid, SIGTERM);
		while (waitpid(n->dns_pid, NULL, 0) < 0 && errno == EINTR)
			;
		n->dns_pid = 0;
		snprintf(pidfile, sizeof(pidfile), NET_DNS_PID_FMT, n->block);
		unlink(pidfile);
	}
	if (n->dns_addr[0] != '\0') {
		char *argv[] = {"ip", "addr", "del", addr, "dev", "lo", NULL};

		snprintf(addr, sizeof(addr), "%s/32", n->dns_addr);
		(void)run(argv, NULL, -1, NULL, 0);
		n->dns_addr[0] = '\0';
	}
	if (n->resolv_conf[0] != '\0') {
		unlink(n->resolv_conf);
		n->resolv_conf[0] = '\0';
	}
}

const char *
gp_net_resolv_conf(const struct gp_net *n)
{
	if (n != NULL && n->pasta != NULL)
		return gp_pasta_resolv_conf(n->pasta);
	return n != NULL && n->resolv_conf[0] != '\0' ? n->resolv_conf :
	    NULL;
}

/*
 * The agent's table: what a job may reach, by its source address. The
 * host itself (input) is closed to jobs but for DNS to the resolvers;
 * nothing new enters a job from outside (forward).
 */
static int
table_text(struct gp_net *n, struct gp_buf *b)
{
	uint32_t base = NET_BASE + (uint32_t)n->block * 1024;
	char blk[20], inet[20], lan[20], ifs[16], dns[512], prefix6[48];
	struct gp_buf chain6;
	int loop;

	ip_text(base, blk, sizeof(blk));
	ip_text(base, inet, sizeof(inet));
	ip_text(base + 512, lan, sizeof(lan));
	snprintf(ifs, sizeof(ifs), "gp%02x.*", n->block);
	resolvers(dns, sizeof(dns), &loop);
	if (loop) {
		char why[256] = "";

		if (dns_relay_start(n, why, sizeof(why)) == 0)
			gp_strlcpy(dns, n->dns_addr, sizeof(dns));
		else
			gp_warn("job networks: the host's resolver is on its "
			    "loopback, which jobs cannot reach, and cannot be "
			    "relayed (%s): jobs get no DNS", why);
	}
	memset(&chain6, 0, sizeof(chain6));
	gp_net6_prefix_text(n->block, prefix6, sizeof(prefix6));
	if (n->ipv6 && gp_net6_chain(&chain6, n->block) != 0) {
		gp_buf_free(&chain6);
		return GP_ENOMEM;
	}
	gp_buf_printf(b,
	    "table inet %s {\n"
	    "  set not_internet { type ipv4_addr; flags interval;\n"
	    "    elements = { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10,\n"
	    "      127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12,\n"
	    "      192.168.0.0/16, 224.0.0.0/3 } }\n"
	    "  set not_lan { type ipv4_addr; flags interval;\n"
	    "    elements = { 0.0.0.0/8, 10.200.0.0/14, 127.0.0.0/8,\n"
	    "      169.254.0.0/16, 224.0.0.0/3 } }\n"
	    "  set dns { type ipv4_addr; %s%s%s }\n"
	    "  map gang_out { type ipv4_addr : verdict; }\n"
	    "  map gang_in { type ipv4_addr : verdict; }\n"
	    "  chain input { type filter hook input priority -1;\n"
	    "    iifname \"%s\" ip daddr @dns meta l4proto { tcp, udp }"
	    " th dport 53 accept\n"
	    "    iifname \"%s\" icmpv6 type { nd-neighbor-solicit,"
	    " nd-neighbor-advert } accept\n"
	    "    iifname \"%s\" drop\n  }\n"
	    "  chain forward { type filter hook forward priority -1;\n"
	    "    oifname \"%s\" ct state established,related accept\n"
	    "    oifname \"%s\" ip daddr vmap @gang_in\n"
	    "    oifname \"%s\" drop\n"
	    "    iifname \"%s\" jump from_job\n  }\n"
	    "%s"
	    "  chain from_job {\n"
	    "    meta nfproto ipv6 %s\n"
	    "    ct state established,related accept\n"
	    "    ip saddr vmap @gang_out\n"
	    "    meta l4proto != { tcp, udp } drop\n"
	    "    ip daddr @dns th dport 53 accept\n"
	    "    ip saddr %s/23 ip daddr @not_internet drop\n"
	    "    ip saddr %s/23 ip daddr @not_lan drop\n"
	    "    ip saddr %s/23 accept\n"
	    "    ip saddr %s/23 accept\n"
	    "    drop\n  }\n"
	    "  chain nat { type nat hook postrouting priority 100;\n"
	    "    ip saddr %s/22 oifname != \"%s\" masquerade\n"
	    "    ip saddr 10.204.0.0/14 ip daddr != 10.204.0.0/14"
	    " oifname != \"%s\" masquerade\n"
	    "    ip6 saddr %s oifname != \"%s\" masquerade\n  }\n"
	    "}\n", n->table, dns[0] ? "elements = { " : "", dns,
	    dns[0] ? " };" : "", ifs, ifs, ifs, ifs, ifs, ifs, ifs,
	    chain6.data != NULL ? chain6.data : "",
	    n->ipv6 ? "jump from_job6" : "drop", inet, lan,
	    inet, lan, blk, ifs, ifs, prefix6, ifs);
	gp_buf_free(&chain6);
	return b->data != NULL ? 0 : GP_ENOMEM;
}

/* Routes to other machines' gang parts that block b's agent made. */
struct route_list {
	uint32_t prio;
	uint32_t dst[256], gw[256];
	int n;
};

/* A /32 IPv4 route's destination, gateway and metric: 0, or -1. */
static int
route_parse(const struct nlmsghdr *nlh, uint32_t *dst, uint32_t *gw,
    uint32_t *prio)
{
	const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
	struct nlattr *a;

	*dst = *gw = *prio = 0;
	if (rtm->rtm_family != AF_INET || rtm->rtm_dst_len != 32)
		return -1;
	mnl_attr_for_each(a, nlh, sizeof(*rtm)) {
		if (mnl_attr_get_payload_len(a) < 4)
			continue;
		switch (mnl_attr_get_type(a)) {
		case RTA_DST:
			*dst = ntohl(mnl_attr_get_u32(a));
			break;
		case RTA_GATEWAY:
			*gw = ntohl(mnl_attr_get_u32(a));
			break;
		case RTA_PRIORITY:
			*prio = mnl_attr_get_u32(a);
			break;
		}
	}
	return 0;
}

static int
route_list_cb(const struct nlmsghdr *nlh, void *data)
{
	struct route_list *l = data;
	uint32_t dst, gw, prio;

	if (route_parse(nlh, &dst, &gw, &prio) == 0 && prio == l->prio &&
	    (dst & 0xfffc0000u) == NET_GANG_BASE &&
	    l->n < (int)GP_ARRAY_LEN(l->dst)) {
		l->dst[l->n] = dst;
		l->gw[l->n++] = gw;
	}
	return MNL_CB_OK;
}

/* Marks the blocks (stale[]) whose gang routes (their metric) are here. */
static int
route_block_cb(const struct nlmsghdr *nlh, void *data)
{
	unsigned char *stale = data;
	uint32_t dst, gw, prio;

	if (route_parse(nlh, &dst, &gw, &prio) == 0 &&
	    (dst & 0xfffc0000u) == NET_GANG_BASE && prio >= NET_ROUTE_PRIO &&
	    prio < NET_ROUTE_PRIO + NET_BLOCKS)
		stale[prio - NET_ROUTE_PRIO] = 1;
	return MNL_CB_OK;
}

static void
sweep_routes(struct gp_net *n, int b)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;
	struct route_list *l;
	int i, gone = 0, ret = 0, tries;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return;
	l->prio = NET_ROUTE_PRIO + (uint32_t)b;
	nlh->nlmsg_type = RTM_GETROUTE;
	nlh->nlmsg_flags = NLM_F_DUMP;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	/* A dump that links changing under it cut short (EINTR): again. */
	for (tries = 0; tries < 4; tries++) {
		l->n = 0;
		nlh->nlmsg_flags = NLM_F_DUMP;
		if ((ret = nl_ask(n->nl, &n->seq, nlh, route_list_cb, l)) !=
		    -EINTR)
			break;
	}
	if (ret == 0)
		for (i = 0; i < l->n; i++)
			if (route_set(n->nl, &n->seq, 1, l->dst[i], 0, l->gw[i],
			    0, l->prio) == 0)
				gone++;
	if (gone > 0)
		gp_info("job networks: swept stale gang routes block=%d "
		    "count=%d", b, gone);
	free(l);
}

/* Deletes block b's table (when there), its veth pairs, its DNS relay. */
static void
sweep_block(struct gp_net *n, int b, const char *tables, const char *lo_addrs)
{
	char name[32], pattern[16], needle[48];
	struct link_list l;
	int links = 0, i, ret = 0, tries;

	snprintf(name, sizeof(name), NET_TABLE_FMT, b);
	snprintf(needle, sizeof(needle), "table inet %s\n", name);
	if (tables != NULL && strstr(tables, needle) != NULL) {
		char *argv[] = {"nft", "delete", "table", "inet", name, NULL};

		if (run(argv, NULL, -1, NULL, 0) != 0)
			gp_warn("job networks: cannot delete a stale table "
			    "table=%s", name);
		else
			gp_info("job networks: swept a stale table table=%s",
			    name);
	}
	sweep_routes(n, b);
	dns_sweep(b, lo_addrs);
	gp_overlay_sweep(b, tables);
	snprintf(pattern, sizeof(pattern), "gp%02x.", b);
	l.prefix = pattern;
	for (tries = 0; tries < 4; tries++)
		if ((ret = link_list(n->nl, &n->seq, &l)) != -EINTR)
			break;
	if (ret != 0)
		return;
	for (i = 0; i < l.n; i++)
		if (link_del(n->nl, &n->seq, l.names[i]) == 0)
			links++;
	if (links > 0)
		gp_info("job networks: swept stale veth pairs block=%d "
		    "count=%d", b, links);
}

int
gp_net_hex_byte(const char *s)
{
	int i, v = 0;

	for (i = 0; i < 2; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			v = v * 16 + (s[i] - '0');
		else if (s[i] >= 'a' && s[i] <= 'f')
			v = v * 16 + (s[i] - 'a' + 10);
		else
			return -1;
	}
	return v;
}

/*
 * Sets stale[b] for each block b that has something here for
 * sweep_block to delete: a table, a veth pair, a gang route, a DNS
 * relay's address or pid file, an overlay's leftovers. One look at each
 * kind for all blocks: sweeping every block whose lock was free, thing
 * by thing, took ~1.1 s of each start at load ~5 here (256 blocks times
 * 256 overlay devices looked up by name; bench/agent_net_start.sh). A
 * look that fails marks every block, as the sweep of old did.
 */
static void
stale_blocks(struct gp_net *n, const char *tables, const char *lo_addrs,
    unsigned char stale[NET_BLOCKS])
{
	static const char table[] = "table inet gpupool_";
	static const char relay[] = " " NET_DNS_NET;
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct if_nameindex *ifs, *i;
	struct rtmsg *rtm;
	struct dirent *e;
	const char *t;
	char *end;
	long b;
	int tries, ret = 0;
	DIR *d;

	for (t = tables; (t = strstr(t, table)) != NULL;
	    t += sizeof(table) - 1)
		if ((b = gp_net_hex_byte(t + sizeof(table) - 1)) >= 0 &&
		    t[sizeof(table) + 1] == '\n')
			stale[b] = 1;
	/* Veth pairs, gpXX.N (NET_IF_FMT). */
	if ((ifs = if_nameindex()) != NULL) {
		for (i = ifs; i->if_index != 0; i++)
			if (strncmp(i->if_name, "gp", 2) == 0 &&
			    (b = gp_net_hex_byte(i->if_name + 2)) >= 0 &&
			    i->if_name[4] == '.')
				stale[b] = 1;
		if_freenameindex(ifs);
	} else
		memset(stale, 1, NET_BLOCKS);
	/* Relays' addresses on lo, 169.254.53.B/32, and pid files. */
	for (t = lo_addrs; (t = strstr(t, relay)) != NULL;
	    t += sizeof(relay) - 1) {
		b = strtol(t + sizeof(relay) - 1, &end, 10);
		if (*end == '/' && b >= 0 && b < NET_BLOCKS)
			stale[b] = 1;
	}
	if ((d = opendir(NET_RUN_DIR)) != NULL) {
		while ((e = readdir(d)) != NULL)
			if ((b = gp_net_hex_byte(e->d_name)) >= 0 &&
			    strcmp(e->d_name + 2, ".dns.pid") == 0)
				stale[b] = 1;
		closedir(d);
	} else
		memset(stale, 1, NET_BLOCKS);
	/* Gang routes, by their metric (one dump for all blocks). */
	nlh->nlmsg_type = RTM_GETROUTE;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	for (tries = 0; tries < 4; tries++) {
		nlh->nlmsg_flags = NLM_F_DUMP;
		if ((ret = nl_ask(n->nl, &n->seq, nlh, route_block_cb,
		    stale)) != -EINTR)
			break;
	}
	if (ret != 0)
		memset(stale, 1, NET_BLOCKS);
	gp_overlay_stale_blocks(tables, stale, NET_BLOCKS);
}

/* Takes a free block (its lock) and sweeps every block no agent holds. */
static int
take_block(struct gp_net *n, const char *work_dir, char *err, size_t errlen)
{
	char path[64], tables[16384] = "", lo_addrs[8192] = "";
	char *argv[] = {"nft", "list", "tables", NULL};
	unsigned char stale[NET_BLOCKS] = {0};
	uint32_t h = 2166136261u;
	const char *p;
	int i, b, fd;

	if (gp_mkdir_p(NET_RUN_DIR, 0700) != 0) {
		snprintf(err, errlen, "%s: %s", NET_RUN_DIR, strerror(errno));
		return GP_EIO;
	}
	for (p = work_dir; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	for (i = 0; i < NET_BLOCKS && n->block < 0; i++) {
		b = (int)((h + (uint32_t)i) % NET_BLOCKS);
		snprintf(path, sizeof(path), NET_RUN_DIR "/%02x.lock", b);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			snprintf(err, errlen, "%s: %s", path,
			    strerror(errno));
			return GP_EIO;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			n->block = b;
			n->lock_fd = fd;
		} else
			close(fd);
	}
	if (n->block < 0) {
		snprintf(err, errlen, "every one of the %d address blocks "
		    "of 10.200.0.0/14 is held by another agent", NET_BLOCKS);
		return GP_ECONFLICT;
	}
	/*
	 * Without a working nft (not installed, or a kernel without
	 * nf_tables) there is no table to sweep, and gp_net_new offers
	 * loopback only.
	 */
	n->nft_ok = run(argv, NULL, -1, tables, sizeof(tables)) == 0;
	if (!n->nft_ok) {
		size_t len = strlen(tables);

		while (len > 0 && (tables[len - 1] == '\n' ||
		    tables[len - 1] == ' '))
			tables[--len] = '\0';
		snprintf(err, errlen, "nft list tables failed: %.200s (is "
		    "nftables installed?)", tables);
		tables[0] = '\0';
	}
	/* The relays' addresses on lo (dns_sweep). */
	{
		char *ip[] = {"ip", "-o", "-4", "addr", "show", "dev", "lo",
		    NULL};

		if (run(ip, NULL, -1, lo_addrs, sizeof(lo_addrs)) != 0)
			lo_addrs[0] = '\0';
	}
	/*
	 * Ours, and those whose agent is gone (their lock is free): those
	 * with anything left.
	 */
	stale_blocks(n, tables, lo_addrs, stale);
	if (stale[n->block])
		sweep_block(n, n->block, tables, lo_addrs);
	for (b = 0; b < NET_BLOCKS; b++) {
		if (b == n->block || !stale[b])
			continue;
		snprintf(path, sizeof(path), NET_RUN_DIR "/%02x.lock", b);
		if ((fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			sweep_block(n, b, tables, lo_addrs);
		close(fd);
	}
	return 0;
}

int
gp_net_sysctl_on(const char *name, const char *what, void (*before)(void),
    char *err, size_t errlen)
{
	char path[128], *text = NULL, *c;
	size_t len;
	int fd;

	/* net.ipv4.ip_forward is /proc/sys/net/ipv4/ip_forward. */
	snprintf(path, sizeof(path), "/proc/sys/%s", name);
	for (c = path; *c != '\0'; c++)
		if (*c == '.')
			*c = '/';
	if (gp_read_file(path, 64, &text, &len) == 0 && text[0] == '1') {
		free(text);
		return 0;
	}
	free(text);
	if (before != NULL)
		before();
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0 ||
	    write(fd, "1\n", 2) != 2) {
		snprintf(err, errlen, "cannot turn %s on: %s", what,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return GP_EIO;
	}
	close(fd);
	gp_warn("job networks: turned %s on (%s=1) for jobs' veth pairs", what,
	    name);
	return 0;
}

/*
 * A root agent whose egress machinery cannot work here (no nft, a kernel
 * without nf_tables, forwarding that cannot be turned on) still lends its
 * GPUs: its jobs get loopback only, as a non-root agent's do without pasta,
 * and the provider's status and registration say why. Never the host's
 * network.
 */
static void
root_loopback_only(struct gp_net *n, const char *why)
{
	char one[401];
	size_t i, len;

	/* A tool's error, on one line (it is shown in status). */
	for (i = len = 0; why[i] != '\0' && len < sizeof(one) - 1; i++)
		if (why[i] != '\n' || (len > 0 && why[i + 1] != '\0'))
			one[len++] = why[i] == '\n' ? ' ' : why[i];
	while (len > 0 && one[len - 1] == ' ')
		len--;
	one[len] = '\0';
	n->offer = GP_NET_NONE;
	n->ipv6 = 0;
	n->table[0] = '\0';	/* no table of ours to delete */
	snprintf(n->pasta_why, sizeof(n->pasta_why), "this host's "
	    "nftables cannot work (%s): jobs get loopback only", one);
	n->offer_why = n->pasta_why;
	gp_warn("job networks: network=%s: %s", gp_net_policy_name(n->policy),
	    n->pasta_why);
}

int
gp_net_new(struct gp_net **out, enum gp_net_policy policy,
    int64_t rate_bps, const char *work_dir, char *err, size_t errlen)
{
	struct gp_net *n;
	struct gp_buf b;
	char *argv[] = {"nft", "-f", "-", NULL};
	char why[1024];
	int ret;

	if ((n = calloc(1, sizeof(*n))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	n->policy = n->offer = policy;
	n->rate_bps = rate_bps;
	n->block = -1;
	n->lock_fd = -1;
	n->next[1] = NET_HALF;
	n->root = geteuid() == 0;
	if (!n->root) {
		if (policy != GP_NET_NONE &&
		    gp_pasta_new(&n->pasta, rate_bps, work_dir, why,
		    sizeof(why)) != 0) {
			n->offer = GP_NET_NONE;
			snprintf(n->pasta_why, sizeof(n->pasta_why), "the "
			    "agent is not root and pasta cannot work here "
			    "(%.400s): jobs get loopback only", why);
			n->offer_why = n->pasta_why;
			gp_warn("job networks: network=%s: %s",
			    gp_net_policy_name(policy), n->pasta_why);
		} else if (policy != GP_NET_NONE) {
			gp_info("job networks ready policy=%s stack=pasta "
			    "(the agent is not root)%s",
			    gp_net_policy_name(policy), rate_bps > 0 ?
			    ": net-rate caps what jobs send only" : "");
		}
		*out = n;
		return 0;
	}
	if ((n->nl = nl_open()) == NULL) {
		snprintf(err, errlen, "rtnetlink: %s", strerror(errno));
		ret = GP_EIO;
		goto fail;
	}
	err[0] = '\0';
	if ((ret = take_block(n, work_dir, err, errlen)) != 0)
		goto fail;
	snprintf(n->table, sizeof(n->table), NET_TABLE_FMT, n->block);
	if (policy == GP_NET_NONE) {
		err[0] = '\0';
		*out = n;
		return 0;
	}
	if (!n->nft_ok) {
		root_loopback_only(n, err);
		*out = n;
		return 0;
	}
	if (gp_net_sysctl_on("net.ipv4.ip_forward", "IPv4 forwarding", NULL,
	    why, sizeof(why)) != 0) {
		root_loopback_only(n, why);
		*out = n;
		return 0;
	}
	/* IPv6 where the host has it (a failure costs jobs IPv6 only). */
	if ((n->ipv6 = gp_net6_egress()) &&
	    gp_net6_forwarding_on(why, sizeof(why)) != 0) {
		gp_warn("job networks: no IPv6 for jobs: %s", why);
		n->ipv6 = 0;
	}
	memset(&b, 0, sizeof(b));
	if ((ret = table_text(n, &b)) != 0) {
		snprintf(err, errlen, "out of memory");
		gp_buf_free(&b);
		goto fail;
	}
	ret = run(argv, b.data, -1, why, sizeof(why));
	gp_buf_free(&b);
	if (ret != 0) {
		char nft[1024];

		snprintf(nft, sizeof(nft), "nft: %.900s", why);
		root_loopback_only(n, nft);
		*out = n;
		return 0;
	}
	gp_info("job networks ready policy=%s block=10.%d.%d.0/22 table=%s "
	    "ipv6=%s", gp_net_policy_name(policy), 200 + n->block / 64,
	    (n->block % 64) * 4, n->table, n->ipv6 ? "yes" : "no");
	*out = n;
	return 0;
fail:
	gp_net_free(n);
	return ret;
}

void
gp_net_free(struct gp_net *n)
{
	int p;

	if (n == NULL)
		return;
	n->closing = 1;
	while (n->nlinger > 0)
		linger_close(n, n->nlinger - 1);
	for (p = 0; p < 3; p++)
		while (n->npool[p] > 0)
			gp_net_job_close(n, &n->pool[p][--n->npool[p]]);
	if (n->block >= 0 && n->policy != GP_NET_NONE && n->table[0]) {
		char *argv[] = {"nft", "delete", "table", "inet", n->table,
		    NULL};

		(void)run(argv, NULL, -1, NULL, 0);
	}
	dns_relay_stop(n);
	gp_pasta_free(n->pasta);
	if (n->nl != NULL)
		mnl_socket_close(n->nl);
	if (n->lock_fd >= 0)
		close(n->lock_fd);
	free(n);
}

enum gp_net_policy
gp_net_offer(const struct gp_net *n)
{
	return n->offer;
}

const char *
gp_net_offer_why(const struct gp_net *n)
{
	return n->offer_why;
}

int64_t
gp_net_rate(const struct gp_net *n)
{
	return n->rate_bps;
}

int
gp_net_block(const struct gp_net *n)
{
	return n->block;
}

void
gp_net_set_overlay(struct gp_net *n, struct gp_overlay *o)
{
	n->overlay = o;
}

/* Closes lingering part i (the last takes its place). */
static void
linger_close(struct gp_net *n, int i)
{
	gang_unlink(n, &n->linger[i]);
	close_now(n, &n->linger[i]);
	n->nlinger--;
	n->linger[i] = n->linger[n->nlinger];
	n->linger_until[i] = n->linger_until[n->nlinger];
}

int64_t
gp_net_tick(struct gp_net *n, int64_t now)
{
	int64_t next, t;
	int i;

	if (n == NULL)
		return -1;
	next = gp_overlay_tick(n->overlay, now);
	for (i = 0; i < n->nlinger;) {
		if (n->linger_until[i] <= now) {
			linger_close(n, i);
			continue;
		}
		t = n->linger_until[i] - now;
		if (next < 0 || t < next)
			next = t;
		i++;
	}
	return next;
}

/* ---- one job ---- */

/* 1 when addr (host order) is one of this host's own (it can bind it). */
static int
is_local(uint32_t addr)
{
	struct sockaddr_in sin;
	int fd, ok;

	if ((addr >> 24) == 127)
		return 1;
	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return 0;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(addr);
	ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
	close(fd);
	return ok;
}

static uint32_t
gang_addr(int64_t job_id, int part)
{
	return NET_GANG_BASE + (uint32_t)((job_id % 4096) << 6) +
	    (uint32_t)part;
}

void
gp_net_gang_addr(int64_t job_id, int part, char *out, size_t len)
{
	ip_text(gang_addr(job_id, part), out, len);
}

int
gp_net_gangs(const struct gp_net *n)
{
	return n->root && n->offer != GP_NET_NONE;
}

/*
 * A gang part's links: a route to each other part's address through its
 * node (by --advertise-addr, an IPv4 address; a part whose node gave none,
 * or this node's own, gets none), and two chains of the agent's table,
 * reached by the part's address: out of the part, the other parts and then
 * the policy; into it, the other parts only.
 */
static int
gang_link(struct gp_net *n, const struct gp_net_gang *g,
    struct gp_net_job *r, char *err, size_t errlen)
{
	char *argv[] = {"nft", "-f", "-", NULL};
	char me[20], peer[20], out[1024], peers[64 * 20];
	struct in_addr via;
	struct gp_buf b;
	size_t used = 0;
	int p, ret;

	ip_text(r->gang_addr, me, sizeof(me));
	if ((r->peer_dst = calloc((size_t)g->parts, sizeof(uint32_t))) ==
	    NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	if (g->overlay != NULL && n->overlay != NULL) {
		struct gp_overlay_peer *ov;
		uint32_t addrs[64];

		if ((ov = calloc((size_t)g->parts, sizeof(*ov))) == NULL) {
			snprintf(err, errlen, "out of memory");
			return GP_ENOMEM;
		}
		for (p = 0; p < g->parts; p++) {
			char host[264], *colon;

			addrs[p] = gang_addr(g->job_id, p);
			ov[p] = g->overlay[p];
			/*
			 * A part on this machine (its endpoint one of our
			 * addresses): its own agent routes it, as above.
			 */
			gp_strlcpy(host, ov[p].endpoint, sizeof(host));
			if ((colon = strrchr(host, ':')) != NULL)
				*colon = '\0';
			if (p != g->part && inet_pton(AF_INET, host, &via) ==
			    1 && is_local(ntohl(via.s_addr)))
				ov[p].key[0] = '\0';
		}
		ret = gp_overlay_link(n->overlay, g->job_id, g->part, g->parts,
		    ov, g->overlay_priv, addrs, r->gang_addr,
		    g->overlay_relay, err, errlen);
		free(ov);
		if (ret != 0)
			return ret;
		r->overlay = 1;
	} else if (g->overlay != NULL)
		gp_warn("gang part job=%lld part=%d: the gang has an overlay "
		    "but this agent runs none (--gang-overlay): linked "
		    "directly", (long long)g->job_id, g->part);
	peers[0] = '\0';
	for (p = 0; p < g->parts; p++) {
		if (p == g->part)
			continue;
		ip_text(gang_addr(g->job_id, p), peer, sizeof(peer));
		used += (size_t)snprintf(peers + used, sizeof(peers) - used,
		    "%s%s", used ? ", " : "", peer);
		/* Through the overlay: routed there (overlay.c) below. */
		if (r->overlay)
			continue;
		if (g->addrs == NULL || inet_pton(AF_INET, g->addrs[p],
		    &via) != 1) {
			gp_warn("gang part job=%lld part=%d: no IPv4 address "
			    "for part %d's node (--advertise-addr): no route",
			    (long long)g->job_id, g->part, p);
			continue;
		}
		/* A part on this machine: its own agent routes it. */
		if (is_local(ntohl(via.s_addr))) {
			gp_debug("gang part job=%lld part=%d: part %d is on "
			    "this machine (%s)", (long long)g->job_id, g->part,
			    p, g->addrs[p]);
			continue;
		}
		ret = route_set(n->nl, &n->seq, 0, gang_addr(g->job_id, p), 0,
		    ntohl(via.s_addr), 0, NET_ROUTE_PRIO + (uint32_t)n->block);
		if (ret == 0) {
			r->peer_dst[r->npeers++] = gang_addr(g->job_id, p);
			gp_info("gang part job=%lld part=%d: part %d via %s",
			    (long long)g->job_id, g->part, p, g->addrs[p]);
		}
		else
			gp_warn("gang part job=%lld part=%d: no route to part "
			    "%d via %s: %s", (long long)g->job_id, g->part, p,
			    g->addrs[p], strerror(-ret));
	}
	memset(&b, 0, sizeof(b));
	gp_buf_printf(&b,
	    "add chain inet %s g%lld_%d_out\n"
	    "add rule inet %s g%lld_%d_out ip daddr { %s } accept\n"
	    "add chain inet %s g%lld_%d_in\n"
	    "add rule inet %s g%lld_%d_in ip saddr { %s } accept\n"
	    "add rule inet %s g%lld_%d_in drop\n"
	    "add element inet %s gang_out { %s : jump g%lld_%d_out }\n"
	    "add element inet %s gang_in { %s : jump g%lld_%d_in }\n",
	    n->table, (long long)g->job_id, g->part,
	    n->table, (long long)g->job_id, g->part, peers,
	    n->table, (long long)g->job_id, g->part,
	    n->table, (long long)g->job_id, g->part, peers,
	    n->table, (long long)g->job_id, g->part,
	    n->table, me, (long long)g->job_id, g->part,
	    n->table, me, (long long)g->job_id, g->part);
	/* Then the policy, as for any job. */
	gp_buf_printf(&b, "add rule inet %s g%lld_%d_out meta l4proto != "
	    "{ tcp, udp } drop\n", n->table, (long long)g->job_id, g->part);
	if (r->policy == GP_NET_NONE)
		gp_buf_printf(&b, "add rule inet %s g%lld_%d_out drop\n",
		    n->table, (long long)g->job_id, g->part);
	else
		gp_buf_printf(&b, "add rule inet %s g%lld_%d_out ip daddr "
		    "@dns th dport 53 accept\n"
		    "add rule inet %s g%lld_%d_out ip daddr @%s drop\n"
		    "add rule inet %s g%lld_%d_out accept\n",
		    n->table, (long long)g->job_id, g->part,
		    n->table, (long long)g->job_id, g->part,
		    r->policy == GP_NET_LAN ? "not_lan" : "not_internet",
		    n->table, (long long)g->job_id, g->part);
	if (b.data == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	ret = run(argv, b.data, -1, out, sizeof(out));
	gp_buf_free(&b);
	if (ret != 0) {
		snprintf(err, errlen, "gang rules: nft: %.400s", out);
		return GP_EIO;
	}
	return 0;
}

static void
gang_unlink(struct gp_net *n, struct gp_net_job *j)
{
	char *argv[] = {"nft", "-f", "-", NULL};
	char me[20], text[1024];
	int i;

	if (j->overlay) {
		gp_overlay_unlink(n->overlay, j->gang_job, j->gang_part);
		j->overlay = 0;
	}
	for (i = 0; i < j->npeers; i++)
		(void)route_set(n->nl, &n->seq, 1, j->peer_dst[i], 0, 0, 0,
		    NET_ROUTE_PRIO + (uint32_t)n->block);
	free(j->peer_dst);
	j->peer_dst = NULL;
	j->npeers = 0;
	ip_text(j->gang_addr, me, sizeof(me));
	snprintf(text, sizeof(text),
	    "delete element inet %s gang_out { %s }\n"
	    "delete element inet %s gang_in { %s }\n"
	    "delete chain inet %s g%lld_%d_out\n"
	    "delete chain inet %s g%lld_%d_in\n",
	    n->table, me, n->table, me, n->table, (long long)j->gang_job,
	    j->gang_part, n->table, (long long)j->gang_job, j->gang_part);
	if (run(argv, text, -1, NULL, 0) != 0)
		gp_warn("gang part job=%lld part=%d: its rules were not all "
		    "removed", (long long)j->gang_job, j->gang_part);
	j->gang = 0;
}

void
gp_net_job_init(struct gp_net_job *j)
{
	memset(j, 0, sizeof(*j));
	j->ns_fd = -1;
	j->slot = -1;
}

static int
slot_take(struct gp_net *n, enum gp_net_policy p)
{
	int half = p == GP_NET_LAN, lo = half * NET_HALF, i, s;

	for (i = 0; i < NET_HALF; i++) {
		s = lo + (n->next[half] - lo + i) % NET_HALF;
		if (!n->used[s]) {
			n->used[s] = 1;
			n->next[half] = lo + (s - lo + 1) % NET_HALF;
			return s;
		}
	}
	return -1;
}

/* A token bucket of rate on dev, in namespace ns_fd (-1: the host's). */
static int
rate_cap(int64_t bps, const char *dev, int ns_fd, char *err, size_t errlen)
{
	char rate[32], burst[32], out[512];
	/* 10 ms of traffic, at least a few full frames. */
	int64_t bytes = bps / 8 / 100 < 16384 ? 16384 : bps / 8 / 100;
	char *argv[] = {"tc", "qdisc", "replace", "dev", (char *)dev, "root",
	    "tbf", "rate", rate, "burst", burst, "latency", "50ms", NULL};

	snprintf(rate, sizeof(rate), "%lldbit", (long long)bps);
	snprintf(burst, sizeof(burst), "%lld", (long long)bytes);
	if (run(argv, NULL, ns_fd, out, sizeof(out)) != 0) {
		snprintf(err, errlen, "tc on %s: %.300s", dev, out);
		return GP_EIO;
	}
	return 0;
}

static void close_now(struct gp_net *n, struct gp_net_job *j);

/* Slot s's IPv6 pair (netns6.h): both ends' addresses, the job's route. */
static int
job_ipv6(struct gp_net *n, int s, int hidx, struct mnl_socket *jnl,
    unsigned int *jseq, int jidx)
{
	struct in6_addr host6, job6;
	int ret;

	gp_net6_addr(n->block, s, 0, &host6);
	gp_net6_addr(n->block, s, 1, &job6);
	if ((ret = addr6_add(n->nl, &n->seq, hidx, &host6)) != 0 ||
	    (ret = addr6_add(jnl, jseq, jidx, &job6)) != 0)
		return ret;
	return route6_default(jnl, jseq, jidx, &host6);
}

int
gp_net_job_open(struct gp_net *n, enum gp_net_policy want,
    const struct gp_net_gang *gang, struct gp_net_job *j, char *err,
    size_t errlen)
{
	struct mnl_socket *jnl = NULL;
	unsigned int jseq = 0;
	uint32_t host, job;
	int orig = -1, ns = -1, hidx, jidx, ret, s = -1, tries;
	struct gp_net_job r;

	gp_net_job_init(&r);
	r.policy = want < n->offer ? want : n->offer;
	if (!n->root) {
		/* The job's own clone makes its namespace; pasta then. */
		r.pasta_wanted = r.policy != GP_NET_NONE && n->pasta != NULL;
		*j = r;
		return 0;
	}
	if (gang != NULL && gp_net_gangs(n) && gang->parts > 1 &&
	    gang->parts <= 64 && gang->part >= 0 && gang->part < gang->parts)
		r.gang = 1;
	/* The same part again (a new attempt): its old links go first. */
	if (r.gang) {
		int i;

		for (i = 0; i < n->nlinger;)
			if (n->linger[i].gang_job == gang->job_id &&
			    n->linger[i].gang_part == gang->part)
				linger_close(n, i);
			else
				i++;
	}
	/* A gang's part gets a namespace of its own, never a kept one. */
	if (!r.gang && n->npool[r.policy] > 0) {
		int64_t sent, received;

		r = n->pool[r.policy][--n->npool[r.policy]];
		r.base_sent = r.base_received = 0;
		gp_net_job_bytes(&r, &sent, &received);
		r.base_sent = sent;
		r.base_received = received;
		*j = r;
		return 0;
	}
	if ((orig = open("/proc/thread-self/ns/net", O_RDONLY |
	    O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "network namespace: %s", strerror(errno));
		return GP_EIO;
	}
	if (unshare(CLONE_NEWNET) != 0) {
		snprintf(err, errlen, "new network namespace: %s",
		    strerror(errno));
		close(orig);
		return GP_EIO;
	}
	ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		ret = errno;
	else if ((ret = gp_net_loopback_up()) != 0)
		ret = -ret;
	else if (r.policy != GP_NET_NONE && (jnl = nl_open()) == NULL)
		ret = errno;
	/* The executor thread must never stay in a job's namespace. */
	if (setns(orig, CLONE_NEWNET) != 0)
		abort();
	close(orig);
	r.ns_fd = ns;
	if (ret != 0) {
		snprintf(err, errlen, "job network namespace: %s",
		    strerror(ret));
		ret = GP_EIO;
		goto fail;
	}
	snprintf(r.ns_path, sizeof(r.ns_path), "/proc/%d/fd/%d",
	    (int)getpid(), ns);
	/* A gang's part gets its pair whatever its policy: its links. */
	if (r.policy == GP_NET_NONE && !r.gang) {
		*j = r;
		return 0;
	}
	/*
	 * A slot whose pair the kernel is still tearing down (a namespace
	 * goes away asynchronously) is taken: try the next ones.
	 */
	for (tries = 0; tries < 16; tries++) {
		if ((s = slot_take(n, r.policy)) < 0) {
			snprintf(err, errlen, "no free job address on this "
			    "node");
			ret = GP_ECONFLICT;
			goto fail;
		}
		snprintf(r.host_if, sizeof(r.host_if), NET_IF_FMT, n->block,
		    s);
		if ((ret = veth_add(n->nl, &n->seq, r.host_if, ns)) != -EEXIST)
			break;
		n->used[s] = 0;
		s = -1;
	}
	if (ret != 0) {
		snprintf(err, errlen, "veth pair %s: %s", r.host_if,
		    strerror(-ret));
		ret = GP_EIO;
		goto fail;
	}
	host = NET_BASE + (uint32_t)n->block * 1024 + (uint32_t)s * 2;
	job = host + 1;
	ip_text(job, r.address, sizeof(r.address));
	r.slot = s;
	hidx = (int)if_nametoindex(r.host_if);
	r.host_ifindex = hidx;
	/* In a namespace of lo and eth0 only, eth0 is the second link. */
	jidx = 2;
	if (r.gang) {
		r.gang_job = gang->job_id;
		r.gang_part = gang->part;
		r.gang_addr = gang_addr(gang->job_id, gang->part);
		ip_text(r.gang_addr, r.address, sizeof(r.address));
	}
	if (hidx == 0 ||
	    (ret = addr_add(n->nl, &n->seq, hidx, host)) != 0 ||
	    (ret = link_up(n->nl, &n->seq, hidx)) != 0 ||
	    (ret = (r.gang ? addr_add_len(jnl, &jseq, jidx, r.gang_addr, 32) :
	    addr_add(jnl, &jseq, jidx, job))) != 0 ||
	    (ret = link_up(jnl, &jseq, jidx)) != 0 ||
	    (ret = (r.gang ? route_set(jnl, &jseq, 0, 0, jidx, host, 1, 0) :
	    route_default(jnl, &jseq, jidx, host))) != 0 ||
	    (r.gang && (ret = route_set(n->nl, &n->seq, 0, r.gang_addr, hidx,
	    0, 0, 0)) != 0) ||
	    (n->ipv6 && !r.gang && (ret = job_ipv6(n, s, hidx, jnl, &jseq,
	    jidx)) != 0)) {
		snprintf(err, errlen, "job network %s: %s", r.host_if,
		    strerror(ret ? -ret : errno));
		ret = GP_EIO;
		goto fail;
	}
	mnl_socket_close(jnl);
	jnl = NULL;
	if (r.gang && (ret = gang_link(n, gang, &r, err, errlen)) != 0)
		goto fail;
	if (n->rate_bps > 0 &&
	    ((ret = rate_cap(n->rate_bps, r.host_if, -1, err, errlen)) != 0 ||
	    (ret = rate_cap(n->rate_bps, "eth0", ns, err, errlen)) != 0))
		goto fail;
	*j = r;
	return 0;
fail:
	if (jnl != NULL)
		mnl_socket_close(jnl);
	/* Half made: never kept for another job. */
	if (r.gang && r.peer_dst != NULL)
		gang_unlink(n, &r);
	close_now(n, &r);
	if (s >= 0)
		n->used[s] = 0;
	return ret;
}

void
gp_net_job_bytes(const struct gp_net_job *j, int64_t *sent,
    int64_t *received)
{
	struct rtnl_link_stats64 st;
	struct mnl_socket *nl;
	unsigned int seq = 0;

	*sent = *received = 0;
	if (j->pasta > 0 && j->pasta_net != NULL) {
		gp_pasta_job_bytes(j->pasta_net, j->pasta, sent, received);
		return;
	}
	if (j->slot < 0 || (nl = nl_open()) == NULL)
		return;
	/* The host's end receives what the job sends. */
	if (link_stats(nl, &seq, j->host_if, j->host_ifindex, &st) == 0) {
		*sent = (int64_t)st.rx_bytes - j->base_sent;
		*received = (int64_t)st.tx_bytes - j->base_received;
	}
	mnl_socket_close(nl);
}

/* Frees the job's slot and closes its namespace (the kernel does the rest). */
static void
close_now(struct gp_net *n, struct gp_net_job *j)
{
	if (j->slot >= 0) {
		n->used[j->slot] = 0;
		j->slot = -1;
	}
	if (j->ns_fd >= 0)
		close(j->ns_fd);
	j->ns_fd = -1;
}

void
gp_net_job_close(struct gp_net *n, struct gp_net_job *j)
{
	int gang = j->gang;

	if (j->pasta > 0 && n->pasta != NULL) {
		gp_pasta_job_stop(n->pasta, j->pasta);
		j->pasta = 0;
	}
	if (gang && n->root && !n->closing && n->nlinger < NET_LINGER_MAX) {
		n->linger_until[n->nlinger] = gp_mono_ms() +
		    NET_GANG_LINGER_MS;
		n->linger[n->nlinger++] = *j;
		gp_net_job_init(j);
		return;
	}
	if (gang)
		gang_unlink(n, j);
	/*
	 * Closing the last reference to the namespace (its processes are
	 * gone) lets the kernel remove it with its end of the pair, and so
	 * the pair, asynchronously: deleting the pair here would hold the
	 * executor thread for tens of milliseconds (RCU grace periods).
	 * Slots are taken in turn, so this one is not wanted again soon.
	 */
	if (j->ns_fd >= 0 && n->root && n->npool[j->policy] < NET_POOL &&
	    !n->closing && !gang) {
		n->pool[j->policy][n->npool[j->policy]++] = *j;
		gp_net_job_init(j);
		return;
	}
	close_now(n, j);
}

int
gp_net_job_attach(struct gp_net *n, struct gp_net_job *j, pid_t pid,
    char *err, size_t errlen)
{
	int ret;

	if (!j->pasta_wanted || j->pasta > 0)
		return 0;
	if (n->pasta == NULL) {
		snprintf(err, errlen, "no pasta for this agent's jobs");
		return GP_EIO;
	}
	if ((ret = gp_pasta_job_start(n->pasta, j->policy, pid, &j->pasta,
	    err, errlen)) != 0)
		return ret;
	j->pasta_net = n->pasta;
	return 0;
}
