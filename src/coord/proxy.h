/*
 * proxy.h: the coordinator's proxy to a port a job declares (submit
 * --expose; docs/interactive.md, "The job port proxy"), for the job's
 * owner in a browser. It listens apart from the API (--proxy-listen) and
 * gives each job's port an origin of its own, "j<JOB>-p<PORT>.<DOMAIN>",
 * so that a page a job serves shares no origin with the dashboard (whose
 * token it can never read) nor with another job's. Its credential is a
 * cookie of that origin alone, set from a one-time code the dashboard
 * gets with the user's token (POST /v1/jobs/{id}/proxy) and hands over in
 * the URL's fragment (never sent to a server, so never in a log). Every
 * connection then becomes one GP_STREAM_TCP stream of the relay
 * (relay_open) to the job's own loopback: HTTP and WebSocket alike.
 */
#ifndef GP_COORD_PROXY_H
#define GP_COORD_PROXY_H

#include <stddef.h>
#include <stdint.h>

#define PROXY_HEAD_MAX 16384	   /* a request's head, at most */
#define PROXY_COOKIE "gpupool_proxy" /* the session cookie's name */

struct proxy_config {
	char addr[128];	  /* "" : no proxy */
	int port;
	char domain[128]; /* the job hosts' parent: "localhost" */
};

/* Starts the listener (nothing when cfg->addr is ""). 0 or GP_E*. */
int proxy_start(const struct proxy_config *cfg);
void proxy_stop(void);

/*
 * One-time tickets (30 s) for the dashboard's terminal (terminal.c): the
 * ticket is PROXY_TICKET_HEX - 1 hex characters; take returns 1 with the
 * user when it is live and for job_id, and forgets it either way.
 */
#define PROXY_TICKET_HEX 49
void proxy_ticket_new(int64_t job_id, const char *user, char *ticket);
int proxy_ticket_take(const char *ticket, int64_t job_id, char *user,
    size_t userlen);

/* What proxy_head_parse takes from a request's head. */
struct proxy_head {
	char method[16];
	char path[2048];
	char host[256];
	char cookie[80];	/* our cookie's value; "" : none */
	int64_t content_length; /* -1: none */
};
/*
 * Parses the head of a request (untrusted): "METHOD /path HTTP/1.x", one
 * Host, our cookie, Content-Length. Returns the head's length (with its
 * blank line) when it is whole, 0 when more bytes are needed, GP_EINVAL
 * when it is malformed or longer than PROXY_HEAD_MAX.
 */
int proxy_head_parse(const char *buf, size_t len, struct proxy_head *h);
/*
 * "j12-p8888.DOMAIN[:PORT]" -> 12, 8888 (the domain compared without
 * case). 0, or GP_EINVAL for any other host.
 */
int proxy_host_parse(const char *host, const char *domain, int64_t *job_id,
    int *port);

#endif
