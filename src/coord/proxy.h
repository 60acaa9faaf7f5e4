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
#include <sys/types.h>

#define PROXY_HEAD_MAX 16384	   /* a request's head, at most */
#define PROXY_COOKIE "gpupool_proxy" /* the session cookie's name */

struct proxy_config {
	char addr[128];	  /* "" : no proxy */
	int port;
	char domain[128]; /* the job hosts' parent: "localhost" */
	char tls_cert[1024]; /* PEM chain for *.domain; "" : plain HTTP */
	char tls_key[1024];
};

/*
 * Starts the listener (nothing when cfg->addr is ""): HTTPS when
 * cfg->tls_cert is set (a plain request there is answered with a
 * redirect and never proxied). 0, GP_EINVAL (a certificate that does not
 * fit: the reason in why), or GP_EIO.
 */
int proxy_start(const struct proxy_config *cfg, char *why, size_t whylen);
void proxy_stop(void);
/* 1 when the proxy listens. */
int proxy_running(void);
/*
 * A job's port's origin on the proxy, "https://j12-p8888.DOMAIN:PORT"
 * (http:// without TLS; no ":PORT" when it is the scheme's own).
 */
void proxy_origin(int64_t job_id, int port, char *out, size_t len);

/* ---- proxy_tls.c ---- */

struct coord_config;
struct ssl_ctx_st;
struct ssl_st;

/*
 * Picks the proxy's certificate into pc->tls_cert and tls_key: the one
 * given (--proxy-tls-cert) if any; none when the coordinator is plain
 * HTTP (cfg->tls_cert ""); else, with the coordinator's own CA (own_ca:
 * tls_auto_setup made it), one it signs for "*.DOMAIN"; else the API's
 * own certificate (proxy_tls_new refuses it unless it names the job
 * hosts). 0 or GP_EIO.
 */
int proxy_tls_choose(struct proxy_config *pc, const struct coord_config *cfg,
    int own_ca);
/* The TLS context for pc, or NULL with the reason in why. */
struct ssl_ctx_st *proxy_tls_new(const struct proxy_config *pc, char *why,
    size_t whylen);
void proxy_tls_free(struct ssl_ctx_st *ctx);

#define PROXY_AGAIN (-2)		/* proxy_conn_read: nothing yet */
#define PROXY_WRITE_TIMEOUT_MS 30000	/* a stalled reader, then the end */

/* One browser connection over its non-blocking socket, plain or TLS. */
struct proxy_conn {
	int fd;
	struct ssl_st *ssl; /* NULL: plain */
	short want;	    /* what a PROXY_AGAIN waits for: POLLIN, POLLOUT */
};
/*
 * Takes fd (non-blocking) and, with ctx, makes the TLS handshake by
 * deadline (gp_mono_ms). 0 or -1; proxy_conn_close either way.
 */
int proxy_conn_start(struct proxy_conn *c, struct ssl_ctx_st *ctx, int fd,
    int64_t deadline);
/* Bytes read (> 0), 0 at the end, -1 on an error, PROXY_AGAIN. */
ssize_t proxy_conn_read(struct proxy_conn *c, void *buf, size_t cap);
/* Reads at least one byte by deadline: its count, or -1. */
int proxy_conn_read_wait(struct proxy_conn *c, void *buf, size_t cap,
    int64_t deadline);
/* 1 when TLS holds bytes read from the socket and not yet returned. */
int proxy_conn_pending(const struct proxy_conn *c);
/* Writes it all (PROXY_WRITE_TIMEOUT_MS without progress: -1). 0 or -1. */
int proxy_conn_write_all(struct proxy_conn *c, const void *data, size_t len);
/* Ends this side's direction (TLS close_notify, TCP half-close). */
void proxy_conn_shutdown_write(struct proxy_conn *c);
void proxy_conn_close(struct proxy_conn *c);

/*
 * One-time tickets (30 s) for the dashboard's terminal (terminal.c): the
 * ticket is PROXY_TICKET_HEX - 1 hex characters, bound to a job and a
 * part of it (a gang's; 0 else); take returns 1 with the user when it is
 * live and for job_id and part, and forgets it either way.
 */
#define PROXY_TICKET_HEX 49
void proxy_ticket_new(int64_t job_id, int part, const char *user,
    char *ticket);
int proxy_ticket_take(const char *ticket, int64_t job_id, int part,
    char *user, size_t userlen);

/*
 * terminal.c: ends the dashboard's terminals (their WebSockets shut),
 * starts no more, and waits up to wait_ms for their threads: before the
 * HTTP daemon stops, whose upgraded connections they close.
 */
void terminal_stop(int64_t wait_ms);

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
