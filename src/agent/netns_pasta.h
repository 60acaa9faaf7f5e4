/*
 * netns_pasta.h: job networks of an agent that is not root (netns.c's
 * helper; docs/agent.md, "Job networks of an agent that is not root").
 *
 * A non-root agent's job gets its network namespace from its own clone
 * (in the job's user namespace). Before the job runs, pasta (Debian's
 * passt) is attached to it for egress, with no port forwarded either way
 * (-t/-u/-T/-U none) and no gateway mapped to the host (--no-map-gw),
 * and an nftables table inside the job's namespace (the agent owns the
 * job's user namespace, so it may write one there, the job may not)
 * drops what the policy does not allow: the host's own addresses,
 * loopback, private, link-local, multicast, IPv6 ULA and link-local.
 */
#ifndef GP_AGENT_NETNS_PASTA_H
#define GP_AGENT_NETNS_PASTA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/netns.h"

struct gp_pasta;

/*
 * Checks that pasta can work here (pasta installed, /dev/net/tun
 * openable, nftables usable in a user namespace of the agent's) and
 * writes the resolv.conf jobs get (pasta forwards DNS). OUT: *out.
 * Returns 0, or GP_E* with why set: jobs then get loopback only.
 */
int gp_pasta_new(struct gp_pasta **out, int64_t rate_bps,
    const char *work_dir, char *why, size_t whylen);
/* Stops every job's pasta. NULL is fine. */
void gp_pasta_free(struct gp_pasta *p);
/* The resolv.conf jobs get (DNS through pasta's forwarder). */
const char *gp_pasta_resolv_conf(const struct gp_pasta *p);

/*
 * Gives the namespace of process pid (a job's init, its network not yet
 * used) the rules of policy (internet or lan), then pasta, then the rate
 * cap. Executor thread only (pasta dies with it: PR_SET_PDEATHSIG).
 * OUT: *id (> 0). Returns 0, or GP_E* with err set and nothing left.
 */
int gp_pasta_job_start(struct gp_pasta *p, enum gp_net_policy policy,
    pid_t pid, int *id, char *err, size_t errlen);
/* What job id sent and received so far (0 once stopped). Any thread. */
void gp_pasta_job_bytes(struct gp_pasta *p, int id, int64_t *sent,
    int64_t *received);
/* Stops job id's pasta. Idempotent. */
void gp_pasta_job_stop(struct gp_pasta *p, int id);

/*
 * The nftables table of a job's namespace for policy (internet or lan):
 * host4 and host6, the host's own addresses ("" for none), each a
 * comma-separated list. Into b. 0 or GP_ENOMEM. (Pure: unit-tested.)
 */
struct gp_buf;
int gp_pasta_rules(struct gp_buf *b, enum gp_net_policy policy,
    const char *host4, const char *host6);

#endif
