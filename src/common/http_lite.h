/*
 * http_lite.h: a small HTTP/1.1 client for plain http:// URLs, one socket
 * kept alive between requests, answers parsed by http-parser. It is what
 * the `gpupool` executable talks to the coordinator with (src/lite/), so
 * the CLI starts without libcurl's tree of libraries; https://, streamed
 * bodies and everything else go through libcurl (http_client.c).
 */
#ifndef GP_HTTP_LITE_H
#define GP_HTTP_LITE_H

#include <stddef.h>

#include "http_client.h"

struct gp_http_lite;

/*
 * IN: base_url ("http://127.0.0.1:7070", optionally with a path prefix),
 * token (may be NULL; copied). OUT: *out. Returns 0, GP_EINVAL (not a
 * plain http:// URL: err says why) or GP_ENOMEM.
 */
int gp_http_lite_new(const char *base_url, const char *token,
    struct gp_http_lite **out, char *err, size_t errlen);
/* Closes the connection and clears the token. NULL is fine. */
void gp_http_lite_free(struct gp_http_lite *c);

/*
 * Sends one request, as gp_http_request (http_client.h): the same
 * arguments, results and *resp (release with gp_http_response_fini
 * whatever the result). A request on a kept connection that the server
 * closed meanwhile is sent again once on a new one.
 */
int gp_http_lite_request(struct gp_http_lite *c, const char *method,
    const char *path, const void *body, size_t body_len,
    const char *content_type, long timeout_ms, struct gp_http_response *resp);

/*
 * The answer parser on its own (for the fuzz harness and the tests): feed
 * it the bytes of one answer as they arrive.
 */
struct gp_http_answer;
/* max_body: the largest body accepted (beyond: GP_ETOOBIG). */
struct gp_http_answer *gp_http_answer_new(size_t max_body);
void gp_http_answer_free(struct gp_http_answer *a);
/*
 * Returns 0 (more bytes needed), 1 (the answer is complete; bytes after it
 * are not read), GP_EPROTO (malformed: *why says how, static text),
 * GP_ETOOBIG or GP_ENOMEM.
 */
int gp_http_answer_feed(struct gp_http_answer *a, const char *data, size_t len,
    const char **why);
/* The peer closed the connection: 1 when that ends the answer, else
 * GP_EPROTO. */
int gp_http_answer_eof(struct gp_http_answer *a, const char **why);
/*
 * After a complete answer: moves status, body and the X-Gpupool-* values
 * into *resp (resp->body malloc'd, NUL-terminated). OUT: *keep_alive, 1
 * when the connection may carry the next request. Returns 0 or GP_ENOMEM.
 */
int gp_http_answer_take(struct gp_http_answer *a, struct gp_http_response *resp,
    int *keep_alive);

#endif
