/*
 * metrics.h: the agent's Prometheus endpoint (agent --metrics-listen),
 * see metrics.c and docs/operations.md for what it shows.
 */
#ifndef GP_AGENT_METRICS_H
#define GP_AGENT_METRICS_H

#include <netinet/in.h>

#include <stddef.h>

#include "util.h"

struct gp_agent;
struct gp_agent_metrics;

/*
 * Parses "PORT" (on 127.0.0.1) or "ADDR:PORT" (IPv4). OUT: *addr.
 * Returns 0 or GP_EINVAL.
 */
int gp_agent_metrics_parse_listen(const char *text, struct sockaddr_in *addr);
/*
 * Serves GET /metrics on addr; token, when not NULL, is the bearer token
 * scrapers must send (copied). Returns NULL with err set on failure.
 */
struct gp_agent_metrics *gp_agent_metrics_start(struct gp_agent *ag,
    const struct sockaddr_in *addr, const char *token, char *err,
    size_t errlen);
void gp_agent_metrics_stop(struct gp_agent_metrics *m);
/* The exposition text, appended to out. 0 or GP_ENOMEM. */
int gp_agent_metrics_render(struct gp_agent *ag, struct gp_buf *out);

#endif
