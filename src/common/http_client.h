/*
 * http_client.h: the HTTP client every gpupool program uses to reach the
 * coordinator (libcurl underneath). One client per thread: it keeps its
 * connection alive between requests.
 */
#ifndef GP_HTTP_CLIENT_H
#define GP_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

struct gp_http_client;

struct gp_http_response {
	long status;	/* HTTP status; 0 when no answer came */
	char *body;	/* malloc'd, NUL-terminated; freed by _response_fini */
	size_t body_len;
	/* Values of the X-Gpupool-* headers the log endpoint sends. */
	int64_t log_offset; /* X-Gpupool-Offset, -1 if absent */
	char job_state[32]; /* X-Gpupool-State */
	int log_done;	    /* X-Gpupool-Done: 1 */
	char error[256];    /* transport error text when status == 0 */
	int refused;	    /* no answer: the connection was refused (the
			       host is up, no server listens) */
	int no_connect;	    /* no answer: no connection was made, nothing
			       was sent (refused, unreachable, unresolved) */
	/* A standby's 503 (X-Gpupool-Role: standby): the leader it named
	 * (X-Gpupool-Leader), "" when it knows none. */
	int not_leader;
	char leader[512];
};

/* Calls curl_global_init once; call from main before threads start. */
void gp_http_global_init(void);

/*
 * IN: base_url ("http://127.0.0.1:7070", or several coordinators'
 * URLs separated by commas: the client follows the leader among them,
 * common/coord_urls.h), token (may be NULL), ca_file
 * (PEM file to verify the server with, or NULL for the system store).
 * The strings are copied. Returns NULL on allocation failure.
 */
/*
 * The pin of a CA certificate (PEM file): SHA-256 of its public key (DER
 * SubjectPublicKeyInfo), 64 hex digits and a NUL into hex. 0 or GP_EIO.
 */
int gp_tls_pin_of_file(const char *pem_path, char *hex);

struct gp_http_client *gp_http_client_new(const char *base_url,
    const char *token, const char *ca_file);
void gp_http_client_free(struct gp_http_client *client);

/*
 * Several coordinators: the index, in the client's list, of the one it
 * talks to now (0 with one URL).
 */
int gp_http_client_current(const struct gp_http_client *client);
/*
 * Several coordinators: each request of client begins at the URL whose
 * index *index holds (another client's gp_http_client_current, kept
 * there by the thread that finds the leader: the agent's heartbeat), and
 * ends (GP_ECONN) as soon as *index changes: a long poll or a report held
 * by a coordinator that froze is let go once the leader moved. NULL:
 * neither (the default). libcurl's client only.
 */
void gp_http_client_follow(struct gp_http_client *client,
    const _Atomic int *index);

/*
 * A call of the client ends (GP_ECONN) within about a second of *flag
 * becoming non-zero (at once with gp_http_client_abort), a long poll
 * included: a thread that stops can be joined. NULL: never (the default).
 * libcurl's client only.
 */
void gp_http_client_abort_on(struct gp_http_client *client,
    const _Atomic int *flag);
/*
 * With abort_on set: ends the call in flight now (its socket shut), from
 * another thread; the caller has set *flag first.
 */
void gp_http_client_abort(struct gp_http_client *client);

/*
 * Sends one request. IN: method ("GET", "POST"), path ("/v1/jobs?all=1"),
 * body/body_len (may be NULL/0), content_type (NULL means JSON),
 * timeout_ms (0 means 30 s). OUT: *resp, to be released with
 * gp_http_response_fini() whatever the result. Returns 0 when an HTTP
 * answer arrived (any status), GP_ECONN or GP_ETIMEDOUT otherwise.
 */
int gp_http_request(struct gp_http_client *client, const char *method,
    const char *path, const void *body, size_t body_len,
    const char *content_type, long timeout_ms, struct gp_http_response *resp);
void gp_http_response_fini(struct gp_http_response *resp);
/*
 * As gp_http_request, but the body goes into *sink (emptied first, its
 * memory kept and reused: for many large bodies, such as checkpoint
 * chunks); resp->body stays NULL. The caller frees sink.
 */
struct gp_buf;
int gp_http_request_into(struct gp_http_client *client, const char *method,
    const char *path, const void *body, size_t body_len,
    const char *content_type, long timeout_ms, struct gp_http_response *resp,
    struct gp_buf *sink);

/*
 * Large bodies streamed instead of held in memory (checkpoint chunks).
 * read_body, when set, produces the request body (body_len bytes): it
 * fills up to max bytes of buf and returns how many, or (size_t)-1 to
 * abort the request. write_body, when set, takes the body of a 200 answer
 * as it arrives: it returns 0, or -1 to abort the request (an answer of
 * another status goes to resp->body, for gp_http_error_text). Either may
 * be called several times and, on a retried request, again from the
 * start.
 */
struct gp_http_stream {
	size_t (*read_body)(void *arg, char *buf, size_t max);
	int64_t body_len;
	int (*write_body)(void *arg, const char *data, size_t len);
	void *arg;
};

/*
 * As gp_http_request with the bodies of *stream. A request aborted by a
 * callback returns GP_EPROTO (write_body) or GP_EIO (read_body). OUT:
 * *resp, released with gp_http_response_fini() whatever the result.
 */
int gp_http_request_stream(struct gp_http_client *client, const char *method,
    const char *path, const char *content_type, long timeout_ms,
    const struct gp_http_stream *stream, struct gp_http_response *resp);

/*
 * Streams a request body of exactly body_len bytes from read (called with
 * a buffer to fill; returns the bytes it wrote, 0 only at the end, -1 to
 * abort) and collects the answer like gp_http_request. For big bodies
 * there is no total time limit; a transfer slower than one byte a second
 * for a minute is given up. Returns 0 when an answer arrived, GP_ECONN,
 * GP_ETIMEDOUT, or GP_EIO when read aborted.
 */
int gp_http_upload(struct gp_http_client *client, const char *method,
    const char *path, const char *content_type, int64_t body_len,
    long (*read)(void *arg, char *buf, size_t len), void *arg,
    struct gp_http_response *resp);

/*
 * GETs path; a 2xx answer's body goes to write (a non-zero return
 * aborts: GP_EIO), at most max_bytes of it (beyond: GP_ETOOBIG, the
 * transfer is cut). Another answer's body (at most 64 KiB) goes to
 * resp->body for gp_http_error_text. Stall limit as gp_http_upload.
 */
int gp_http_download(struct gp_http_client *client, const char *path,
    int64_t max_bytes, int (*write)(void *arg, const char *data, size_t len),
    void *arg, struct gp_http_response *resp);

/*
 * The error text to show a person for a response: the "error" field of a
 * JSON body, else the transport error, else "HTTP <status>". Writes out.
 */
void gp_http_error_text(const struct gp_http_response *resp, char *out,
    size_t len);

/*
 * A connection taken over by an HTTP/1.1 Upgrade (the interactive
 * streams, common/stream.h): after the coordinator's 101 answer, a byte
 * pipe, TLS included when the URL is https (same verification as the
 * client's requests).
 */
struct gp_http_upgraded;
/*
 * Sends "GET path" with Upgrade: GP_STREAM_PROTOCOL and the client's
 * token (a header, never the URL), and extra_header ("Name: value", or
 * NULL), on a connection of its own. Returns 0
 * with *out (free with gp_http_upgraded_free) on 101; else GP_ECONN /
 * GP_ETIMEDOUT / GP_EPROTO, or GP_EPERM with resp->status and resp->body
 * (the error; release resp with gp_http_response_fini) on another status.
 */
int gp_http_upgrade(struct gp_http_client *client, const char *path,
    const char *extra_header, long timeout_ms, struct gp_http_upgraded **out,
    struct gp_http_response *resp);
/* The socket to poll (never read or write it directly). */
int gp_http_upgraded_fd(const struct gp_http_upgraded *u);
/*
 * Bytes of the pipe: the count (> 0), 0 at the end (recv), GP_EAGAIN
 * when nothing can move now (poll the fd), GP_EIO when broken. recv
 * must be called until GP_EAGAIN after the fd polls readable (TLS keeps
 * bytes of its own).
 */
#define GP_EAGAIN (-100)
long gp_http_upgraded_recv(struct gp_http_upgraded *u, void *buf,
    size_t len);
long gp_http_upgraded_send(struct gp_http_upgraded *u, const void *buf,
    size_t len);
/*
 * 1 when recv has bytes of its own that the fd would not show: the
 * answer's extra bytes, or what TLS decrypted and holds.
 */
int gp_http_upgraded_pending(const struct gp_http_upgraded *u);
void gp_http_upgraded_free(struct gp_http_upgraded *u);

#endif
