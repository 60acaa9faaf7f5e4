/*
 * netns.h: a network of its own for every job (issue 14, docs/agent.md).
 *
 * Each job, plain or container, gets a network namespace made by the
 * agent: its loopback (and its abstract Unix sockets) are its own, and
 * nothing of the host's is in it. Under the owner's policy `network`:
 *
 *   none      loopback only;
 *   internet  plus a veth pair to the host, routed and masqueraded, with
 *             nftables rules (one table per agent, written once at start)
 *             that let out TCP and UDP to public addresses only;
 *   lan       internet plus the provider's private networks.
 *
 * The host itself (every address of it) is never reachable from a job.
 * Which rules apply to a job is told by its address: each agent owns a
 * /22 of 10.200.0.0/14 (found free under a lock file in /run), the first
 * half for internet jobs, the second for lan jobs, so a start writes no
 * rule: it makes the namespace, the veth pair, two addresses and a route
 * over rtnetlink (libmnl), well under a millisecond.
 *
 * An agent that is not root: its jobs' own clone makes their namespaces
 * (in their user namespace), and pasta gives them egress under the same
 * policies, enforced by nftables inside each job's namespace
 * (netns_pasta.c); where pasta or those rules cannot work, loopback only.
 */
#ifndef GP_AGENT_NETNS_H
#define GP_AGENT_NETNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Ordered: a job may ask for any level up to its node's. */
enum gp_net_policy {
	GP_NET_NONE = 0,
	GP_NET_INTERNET,
	GP_NET_LAN,
};

/* "none", "internet", "lan". */
const char *gp_net_policy_name(enum gp_net_policy p);
/* 0 and *out, or GP_EINVAL for anything else. */
int gp_net_policy_parse(const char *s, enum gp_net_policy *out);
/*
 * A rate as the policy writes it ("200M", "1G", "500k": bits per second,
 * SI multipliers; "0" or "off": no cap). 0 and *bps, or GP_EINVAL.
 */
int gp_net_rate_parse(const char *s, int64_t *bps);

struct gp_net;
struct gp_overlay;
struct gp_overlay_peer;
struct gp_overlay_relay;
struct gp_pasta;

/*
 * Sets the agent's job networks up: as root, takes a free /22 under
 * /run/gpupool-net (a lock held for the agent's life), sweeps what agents
 * killed before left (their nftables tables and veth pairs), writes this
 * agent's table and turns IPv4 forwarding on. policy: the owner's;
 * rate_bps: per job and direction, 0 for none; work_dir: picks the /22
 * first tried. OUT: *out. Returns 0 or GP_E* with err set.
 */
int gp_net_new(struct gp_net **out, enum gp_net_policy policy,
    int64_t rate_bps, const char *work_dir, char *err, size_t errlen);
/* Removes the agent's table and lets its /22 go. NULL is fine. */
void gp_net_free(struct gp_net *n);
/* The most a job gets here (the policy, or none for a non-root agent). */
enum gp_net_policy gp_net_offer(const struct gp_net *n);
/* Why the offer is less than the policy, or NULL. */
const char *gp_net_offer_why(const struct gp_net *n);
/*
 * The resolv.conf jobs get instead of the host's, or NULL (the host's):
 * set when the host's resolver is on its loopback and the agent relays
 * DNS to it (dnsmasq on 169.254.53.<block>; docs/agent.md).
 */
const char *gp_net_resolv_conf(const struct gp_net *n);
int64_t gp_net_rate(const struct gp_net *n);
/* The agent's address block (0..255), -1 without one (not root). */
int gp_net_block(const struct gp_net *n);
/*
 * Gangs whose assignment has an overlay go through o (overlay.h; not
 * owned, outlives n's jobs); NULL: every gang is linked directly.
 */
void gp_net_set_overlay(struct gp_net *n, struct gp_overlay *o);
/*
 * Timed work of the networks (the overlay's, gp_overlay_tick): the ms
 * until the next, or -1. Executor thread; NULL is fine.
 */
int64_t gp_net_tick(struct gp_net *n, int64_t now);
/*
 * Runs argv (an absolute path or a name on PATH) with stdin_text on its
 * standard input (NULL: none), in network namespace ns_fd (-1: the
 * agent's); its output into out (may be NULL). 0 when it exits 0.
 */
int gp_net_run(char *const argv[], const char *stdin_text, int ns_fd,
    char *out, size_t outlen);
/*
 * The block or sequence number in one of our names' "%02x" (two
 * lowercase hex digits at s): 0 to 255, or -1.
 */
int gp_net_hex_byte(const char *s);
/*
 * gp_net_run with enter(arg) run in the child before the exec, in place
 * of the network namespace (a nonzero answer: the child's exit status);
 * *exit_status (may be NULL) gets the exit status, -1 when killed.
 */
int gp_net_run_entered(char *const argv[], const char *stdin_text,
    int (*enter)(void *), void *arg, char *out, size_t outlen,
    int *exit_status);

/*
 * Turns the sysctl name (a 0/1 one, "net.ipv4.ip_forward") on unless it
 * is on already, calling before() first (NULL: nothing), and logs that
 * it did; what names it in err and the log ("IPv4 forwarding"). 0, or
 * GP_EIO with err set. (netns.c's IPv4 forwarding, netns6.c's IPv6.)
 */
int gp_net_sysctl_on(const char *name, const char *what, void (*before)(void),
    char *err, size_t errlen);

/* One job's network. */
struct gp_net_job {
	/*
	 * The namespace (close-on-exec), -1 when the job's own clone makes
	 * an empty one (a non-root agent).
	 */
	int ns_fd;
	enum gp_net_policy policy;
	int slot;		/* -1: no veth pair */
	char host_if[16];	/* the host's end, "gpXX.N" */
	int host_ifindex;	/* its index (0: not known) */
	char ns_path[64];	/* /proc/<agent>/fd/<ns_fd>, for runtimes */
	char address[16];	/* the job's IPv4 address, or "" */
	int64_t base_sent;	/* the pair's counters when the job got it */
	int64_t base_received;
	/* A gang's part (gp_net_gang): its address and peers' routes. */
	int gang;
	int64_t gang_job;
	int gang_part;
	uint32_t gang_addr;
	uint32_t *peer_dst;	/* npeers routes, owned (never pooled) */
	int npeers;
	int overlay;		/* linked through the overlay (overlay.h) */
	/*
	 * A non-root agent's job: 1 when pasta is to be attached once its
	 * init is cloned (gp_net_job_attach); then its pasta's id.
	 */
	int pasta_wanted;
	int pasta;
	struct gp_pasta *pasta_net;	/* whose id it is (for the bytes) */
};

/* A gang's part, for gp_net_job_open (docs/agent.md, "Gangs"). */
struct gp_net_gang {
	int64_t job_id;
	int part, parts;	/* parts <= 64 */
	const char (*addrs)[64]; /* each part's node address ("" unknown) */
	/* Each part's overlay peer (gang.overlay), NULL: linked directly. */
	const struct gp_overlay_peer *overlay;
	/* This part's private key in it (gang.overlay_private_key). */
	const char *overlay_priv;
	/* The coordinator's relay (gang.overlay_relay), NULL: none. */
	const struct gp_overlay_relay *overlay_relay;
};

/*
 * A gang part's address, 10.204.0.0/14 from its job and part: the same
 * on every agent, so each part knows where the others are.
 */
void gp_net_gang_addr(int64_t job_id, int part, char *out, size_t len);
/* 1 when this agent links gangs' parts (root, a network other than none). */
int gp_net_gangs(const struct gp_net *n);

/*
 * Makes a job's network for policy want (capped at the offer); for a
 * gang's part (gang not NULL, and gp_net_gangs), with its gang address,
 * routes to the other parts over their nodes' addresses, and rules that
 * let the parts, and only them, connect to each other. Called on
 * one thread (the executor's); the calling thread's network namespace is
 * changed and restored. OUT: *j. Returns 0, or GP_E* with err set and
 * nothing left behind.
 */
int gp_net_job_open(struct gp_net *n, enum gp_net_policy want,
    const struct gp_net_gang *gang, struct gp_net_job *j, char *err,
    size_t errlen);
/*
 * Bytes the job sent and received over its veth pair so far (0 without
 * one). Any thread.
 */
void gp_net_job_bytes(const struct gp_net_job *j, int64_t *sent,
    int64_t *received);
/*
 * After the job's processes are gone: keeps the namespace for a later
 * job of the same policy (nothing of a job outlives its processes in a
 * namespace it holds no privilege in, but TIME_WAIT sockets), or closes
 * it (the kernel then removes it and its pair). Idempotent.
 */
void gp_net_job_close(struct gp_net *n, struct gp_net_job *j);
/*
 * A non-root agent's job (pasta_wanted): attaches pasta and the policy's
 * rules to the namespace of pid, the job's init, which must not run the
 * job before this returns 0. Executor thread. Returns 0 (nothing to do
 * when !pasta_wanted), or GP_E* with err set and nothing left behind.
 */
int gp_net_job_attach(struct gp_net *n, struct gp_net_job *j, pid_t pid,
    char *err, size_t errlen);
/* A job without a network yet (ns_fd -1, no slot). */
void gp_net_job_init(struct gp_net_job *j);

/*
 * Brings the loopback of the calling process's (fresh) namespace up.
 * Async-signal-safe (the sandbox's init calls it). 0 or -errno.
 */
int gp_net_loopback_up(void);

#endif
