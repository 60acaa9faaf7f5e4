/*
 * http_lite.c: the CLI's own HTTP/1.1 client (http_lite.h). It writes a
 * request line and headers itself and hands every byte of the answer to
 * http-parser (nodejs http-parser 2.9), which does the parsing: status
 * line, headers, Content-Length, chunked bodies, keep-alive.
 */
#include "http_lite.h"
#include "token.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gp.h"
#include "util.h"

#define CONNECT_TIMEOUT_MS 5000 /* as http_client.c gives curl */
#define DEFAULT_TIMEOUT_MS 30000
#define BODY_MAX           ((size_t)1 << 30)
#define FIELD_MAX          64
#define VALUE_MAX          256

struct gp_http_answer {
	http_parser parser;
	http_parser_settings settings;
	size_t max_body;
	struct gp_buf body;
	long status;
	int64_t log_offset;
	char job_state[32];
	int log_done;
	int not_leader;
	char leader[VALUE_MAX + 1];
	/* The header being read: http-parser may hand it over in pieces. */
	char field[FIELD_MAX + 1];
	size_t field_len;
	char value[VALUE_MAX + 1];
	size_t value_len;
	int in_value;
	int complete;
	int too_big;
	int no_memory;
	int bad_status;
	int keep_alive;
};

struct gp_http_lite {
	char host[256]; /* for connecting */
	char port[8];
	char host_hdr[272]; /* for the Host header: "[::1]:7070" */
	char *prefix;       /* the URL's path, without a trailing slash */
	char *auth;         /* "Authorization: Bearer ...\r\n", or NULL */
	char *url;          /* for error texts */
	int fd;             /* the kept connection, or -1 */
};

/* Answer parsing. */

static void
header_done(struct gp_http_answer *a)
{
	if (!a->in_value)
		return;
	a->field[a->field_len] = '\0';
	a->value[a->value_len] = '\0';
	if (strcasecmp(a->field, "X-Gpupool-Offset") == 0)
		a->log_offset = strtoll(a->value, NULL, 10);
	else if (strcasecmp(a->field, "X-Gpupool-State") == 0)
		gp_strlcpy(a->job_state, a->value, sizeof(a->job_state));
	else if (strcasecmp(a->field, "X-Gpupool-Done") == 0)
		a->log_done = atoi(a->value);
	else if (strcasecmp(a->field, "X-Gpupool-Role") == 0)
		a->not_leader = strcmp(a->value, "leader") != 0;
	else if (strcasecmp(a->field, "X-Gpupool-Leader") == 0)
		gp_strlcpy(a->leader, a->value, sizeof(a->leader));
	a->field_len = a->value_len = 0;
	a->in_value = 0;
}

/* Appends a piece, keeping at most max bytes (longer ones are cut). */
static void
append_piece(char *dst, size_t *len, size_t max, const char *at, size_t n)
{
	if (n > max - *len)
		n = max - *len;
	memcpy(dst + *len, at, n);
	*len += n;
}

static int
on_header_field(http_parser *p, const char *at, size_t n)
{
	struct gp_http_answer *a = p->data;

	header_done(a);
	append_piece(a->field, &a->field_len, FIELD_MAX, at, n);
	return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t n)
{
	struct gp_http_answer *a = p->data;

	a->in_value = 1;
	append_piece(a->value, &a->value_len, VALUE_MAX, at, n);
	return 0;
}

static int
on_headers_complete(http_parser *p)
{
	struct gp_http_answer *a = p->data;

	header_done(a);
	/* http-parser takes any three digits; "000" is no HTTP status. */
	if (p->status_code < 100) {
		a->bad_status = 1;
		return -1;
	}
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t n)
{
	struct gp_http_answer *a = p->data;

	if (n > a->max_body - a->body.len) {
		a->too_big = 1;
		return -1;
	}
	if (gp_buf_append(&a->body, at, n) != 0) {
		a->no_memory = 1;
		return -1;
	}
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	struct gp_http_answer *a = p->data;

	if (p->status_code / 100 == 1) {
		/* "100 Continue" and the like: the real answer follows. */
		a->body.len = 0;
		a->log_offset = -1;
		a->job_state[0] = '\0';
		a->log_done = 0;
		a->not_leader = 0;
		a->leader[0] = '\0';
		return 0;
	}
	a->status = p->status_code;
	a->keep_alive = http_should_keep_alive(p);
	a->complete = 1;
	/* Nothing after the answer is ours: stop here. */
	http_parser_pause(p, 1);
	return 0;
}

struct gp_http_answer *
gp_http_answer_new(size_t max_body)
{
	struct gp_http_answer *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return NULL;
	http_parser_init(&a->parser, HTTP_RESPONSE);
	a->parser.data = a;
	http_parser_settings_init(&a->settings);
	a->settings.on_header_field = on_header_field;
	a->settings.on_header_value = on_header_value;
	a->settings.on_headers_complete = on_headers_complete;
	a->settings.on_body = on_body;
	a->settings.on_message_complete = on_message_complete;
	a->max_body = max_body;
	a->log_offset = -1;
	return a;
}

void
gp_http_answer_free(struct gp_http_answer *a)
{
	if (a == NULL)
		return;
	gp_buf_free(&a->body);
	free(a);
}

int
gp_http_answer_feed(struct gp_http_answer *a, const char *data, size_t len,
    const char **why)
{
	enum http_errno e;

	*why = NULL;
	if (a->complete)
		return 1;
	http_parser_execute(&a->parser, &a->settings, data, len);
	e = HTTP_PARSER_ERRNO(&a->parser);
	if (a->too_big) {
		*why = "the answer is too large";
		return GP_ETOOBIG;
	}
	if (a->no_memory) {
		*why = "out of memory";
		return GP_ENOMEM;
	}
	if (a->bad_status) {
		*why = "invalid status code";
		return GP_EPROTO;
	}
	if (a->complete)
		return 1;
	if (e != HPE_OK) {
		*why = http_errno_description(e);
		return GP_EPROTO;
	}
	return 0;
}

int
gp_http_answer_eof(struct gp_http_answer *a, const char **why)
{
	*why = NULL;
	if (a->complete)
		return 1;
	/* An answer without a length ends with the connection. */
	if (gp_http_answer_feed(a, NULL, 0, why) == 1)
		return 1;
	*why = *why != NULL ? *why : "the connection closed mid-answer";
	return GP_EPROTO;
}

int
gp_http_answer_take(struct gp_http_answer *a, struct gp_http_response *resp,
    int *keep_alive)
{
	if (a->body.data == NULL && gp_buf_append(&a->body, "", 0) != 0)
		return GP_ENOMEM;
	resp->status = a->status;
	resp->body = a->body.data;
	resp->body_len = a->body.len;
	resp->log_offset = a->log_offset;
	gp_strlcpy(resp->job_state, a->job_state, sizeof(resp->job_state));
	resp->log_done = a->log_done;
	resp->not_leader = a->status == 503 && a->not_leader;
	gp_strlcpy(resp->leader, a->leader, sizeof(resp->leader));
	memset(&a->body, 0, sizeof(a->body));
	*keep_alive = a->keep_alive;
	return 0;
}

/* The client. */

int
gp_http_lite_new(const char *base_url, const char *token,
    struct gp_http_lite **out, char *err, size_t errlen)
{
	struct http_parser_url u;
	struct gp_http_lite *c;
	size_t len = strlen(base_url), hlen, plen;
	const char *host;

	http_parser_url_init(&u);
	if (http_parser_parse_url(base_url, len, 0, &u) != 0 ||
	    !(u.field_set & (1 << UF_SCHEMA)) ||
	    !(u.field_set & (1 << UF_HOST))) {
		snprintf(err, errlen, "'%s' is not a URL", base_url);
		return GP_EINVAL;
	}
	if (u.field_data[UF_SCHEMA].len != 4 ||
	    strncasecmp(base_url + u.field_data[UF_SCHEMA].off, "http", 4) !=
	        0) {
		snprintf(err, errlen, "'%s' is not a plain http:// URL",
		    base_url);
		return GP_EINVAL;
	}
	if (u.field_set &
	    ((1 << UF_USERINFO) | (1 << UF_QUERY) | (1 << UF_FRAGMENT))) {
		snprintf(err, errlen,
		    "'%s': a coordinator URL has no user, query or fragment",
		    base_url);
		return GP_EINVAL;
	}
	hlen = u.field_data[UF_HOST].len;
	host = base_url + u.field_data[UF_HOST].off;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return GP_ENOMEM;
	c->fd = -1;
	if (hlen >= sizeof(c->host)) {
		snprintf(err, errlen, "'%s': the host name is too long",
		    base_url);
		free(c);
		return GP_EINVAL;
	}
	memcpy(c->host, host, hlen);
	c->host[hlen] = '\0';
	snprintf(c->port, sizeof(c->port), "%u",
	    (u.field_set & (1 << UF_PORT)) ? u.port : 80u);
	snprintf(c->host_hdr, sizeof(c->host_hdr), "%s%s%s:%s",
	    strchr(c->host, ':') != NULL ? "[" : "", c->host,
	    strchr(c->host, ':') != NULL ? "]" : "", c->port);
	plen = (u.field_set & (1 << UF_PATH)) ? u.field_data[UF_PATH].len : 0;
	c->prefix =
	    strndup(plen > 0 ? base_url + u.field_data[UF_PATH].off : "", plen);
	c->url = strdup(base_url);
	if (c->prefix == NULL || c->url == NULL)
		goto nomem;
	while (plen > 0 && c->prefix[plen - 1] == '/')
		c->prefix[--plen] = '\0';
	if (token != NULL) {
		size_t alen = strlen(token) + 32;
		char bearer[256], pin[GP_TOKEN_PIN_HEX + 1];

		/* Plain http:// only here: a CA hash has nothing to check. */
		if (gp_token_split_pin(token, bearer, sizeof(bearer), pin,
		    sizeof(pin)) != 0)
			gp_strlcpy(bearer, token, sizeof(bearer));
		if ((c->auth = malloc(alen)) == NULL)
			goto nomem;
		snprintf(c->auth, alen, "Authorization: Bearer %s\r\n", bearer);
	}
	*out = c;
	return 0;
nomem:
	gp_http_lite_free(c);
	snprintf(err, errlen, "out of memory");
	return GP_ENOMEM;
}

static void
drop_connection(struct gp_http_lite *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void
gp_http_lite_free(struct gp_http_lite *c)
{
	if (c == NULL)
		return;
	drop_connection(c);
	if (c->auth != NULL) {
		/* The header holds a secret: clear it before freeing. */
		memset(c->auth, 0, strlen(c->auth));
		free(c->auth);
	}
	free(c->prefix);
	free(c->url);
	free(c);
}

/* Milliseconds left until deadline (a gp_mono_ms time), at least 0. */
static int
left_ms(int64_t deadline)
{
	int64_t left = deadline - gp_mono_ms();

	return left < 0 ? 0 : left > 1000000 ? 1000000 : (int)left;
}

/* Waits for events on fd until deadline. 1: ready, 0: timed out. */
static int
wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = {fd, events, 0};
	int n;

	do
		n = poll(&p, 1, left_ms(deadline));
	while (n < 0 && errno == EINTR);
	return n > 0;
}

/* Connects to one address within deadline. Returns the fd or -errno. */
static int
connect_one(const struct addrinfo *ai, int64_t deadline)
{
	int fd, flags, one = 1, soerr = 0;
	socklen_t slen = sizeof(soerr);

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
	    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		if (errno != EINPROGRESS) {
			soerr = errno;
			goto fail;
		}
		if (!wait_fd(fd, POLLOUT, deadline)) {
			soerr = ETIMEDOUT;
			goto fail;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) != 0)
			soerr = errno;
		if (soerr != 0)
			goto fail;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:
	close(fd);
	return -soerr;
}

static int
open_connection(struct gp_http_lite *c, int64_t deadline,
    struct gp_http_response *resp)
{
	struct addrinfo hints, *res = NULL, *ai;
	int64_t connect_deadline = gp_mono_ms() + CONNECT_TIMEOUT_MS;
	int rc, fd = -ECONNREFUSED;

	if (connect_deadline > deadline)
		connect_deadline = deadline;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(c->host, c->port, &hints, &res);
	if (rc != 0) {
		snprintf(resp->error, sizeof(resp->error),
		    "%.160s: could not resolve host %.60s", c->url, c->host);
		resp->no_connect = 1;
		return GP_ECONN;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = connect_one(ai, connect_deadline);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(resp->error, sizeof(resp->error), "%.160s: %.80s",
		    c->url,
		    fd == -ETIMEDOUT ? "connection timed out" : strerror(-fd));
		resp->refused = fd == -ECONNREFUSED;
		resp->no_connect = 1;
		return fd == -ETIMEDOUT ? GP_ETIMEDOUT : GP_ECONN;
	}
	c->fd = fd;
	return 0;
}

/* Sends the request's bytes. Returns 0, GP_ECONN or GP_ETIMEDOUT. */
static int
send_all(int fd, struct iovec *iov, int n, int64_t deadline)
{
	struct msghdr msg;
	ssize_t w;

	while (n > 0) {
		if (iov->iov_len == 0) {
			iov++, n--;
			continue;
		}
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = iov;
		msg.msg_iovlen = (size_t)n;
		w = sendmsg(fd, &msg, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return GP_ECONN;
			if (!wait_fd(fd, POLLOUT, deadline))
				return GP_ETIMEDOUT;
			continue;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++, n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/*
 * One attempt on the current connection. OUT: *got_bytes, 1 once any byte
 * of an answer arrived (then the request must not be sent again).
 */
static int
attempt(struct gp_http_lite *c, const struct gp_buf *head, const void *body,
    size_t body_len, int64_t deadline, struct gp_http_response *resp,
    int *got_bytes)
{
	struct iovec iov[2] = {{head->data, head->len},
	    {(void *)(uintptr_t)body, body_len}};
	struct gp_http_answer *a;
	char buf[65536];
	const char *why = NULL;
	int rc, keep = 0;
	ssize_t r;

	*got_bytes = 0;
	rc = send_all(c->fd, iov, 2, deadline);
	if (rc != 0) {
		snprintf(resp->error, sizeof(resp->error), "%.160s: %s", c->url,
		    rc == GP_ETIMEDOUT ? "timed out sending the request"
		                       : "the connection broke while sending");
		/* Never sent on again: the next request makes a new one. */
		drop_connection(c);
		return rc;
	}
	if ((a = gp_http_answer_new(BODY_MAX)) == NULL)
		return GP_ENOMEM;
	for (;;) {
		if (!wait_fd(c->fd, POLLIN, deadline)) {
			snprintf(resp->error, sizeof(resp->error),
			    "%.160s: timed out waiting for the answer", c->url);
			rc = GP_ETIMEDOUT;
			goto out;
		}
		r = read(c->fd, buf, sizeof(buf));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0 && !*got_bytes) {
			rc = GP_ECONN;
			snprintf(resp->error, sizeof(resp->error),
			    "%.160s: %.80s", c->url, strerror(errno));
			goto out;
		}
		if (r <= 0) {
			if (!*got_bytes) {
				rc = GP_ECONN;
				snprintf(resp->error, sizeof(resp->error),
				    "%.160s: the connection closed before an "
				    "answer",
				    c->url);
				goto out;
			}
			rc = gp_http_answer_eof(a, &why);
			keep = 0;
			break;
		}
		*got_bytes = 1;
		rc = gp_http_answer_feed(a, buf, (size_t)r, &why);
		if (rc != 0)
			break;
	}
	if (rc == 1)
		rc = gp_http_answer_take(a, resp, &keep);
	else {
		snprintf(resp->error, sizeof(resp->error),
		    "%.150s: malformed answer: %.60s", c->url,
		    why != NULL ? why : "?");
		if (rc != GP_ENOMEM)
			rc = GP_EPROTO;
		resp->status = 0;
	}
out:
	gp_http_answer_free(a);
	if (rc != 0 || !keep)
		drop_connection(c);
	return rc;
}

int
gp_http_lite_request(struct gp_http_lite *c, const char *method,
    const char *path, const void *body, size_t body_len,
    const char *content_type, long timeout_ms, struct gp_http_response *resp)
{
	struct gp_buf head = {0};
	int64_t deadline;
	int rc, reused, got_bytes, tries;

	memset(resp, 0, sizeof(*resp));
	resp->log_offset = -1;
	deadline =
	    gp_mono_ms() + (timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS);
	if (strpbrk(method, " \r\n") != NULL ||
	    strpbrk(path, " \r\n") != NULL ||
	    (content_type != NULL && strpbrk(content_type, "\r\n") != NULL))
		return GP_EINVAL;
	if (gp_buf_printf(&head, "%s %s%s HTTP/1.1\r\nHost: %s\r\n%s", method,
	        c->prefix, path, c->host_hdr,
	        c->auth != NULL ? c->auth : "") != 0)
		goto nomem;
	if (strcmp(method, "GET") != 0 &&
	    gp_buf_printf(&head, "Content-Type: %s\r\nContent-Length: %zu\r\n",
	        content_type != NULL ? content_type : "application/json",
	        body_len) != 0)
		goto nomem;
	if (gp_buf_append(&head, "\r\n", 2) != 0)
		goto nomem;
	for (tries = 0;; tries++) {
		reused = c->fd >= 0;
		if (!reused && (rc = open_connection(c, deadline, resp)) != 0)
			break;
		rc = attempt(c, &head, body, body_len, deadline, resp,
		    &got_bytes);
		/*
		 * A kept connection the server closed while we were idle:
		 * the request never reached it, send it on a new one.
		 */
		if (rc == GP_ECONN && reused && !got_bytes && tries == 0) {
			memset(resp->error, 0, sizeof(resp->error));
			continue;
		}
		break;
	}
	if (head.data != NULL)
		memset(head.data, 0, head.len); /* it holds the token */
	gp_buf_free(&head);
	return rc;
nomem:
	if (head.data != NULL)
		memset(head.data, 0, head.len);
	gp_buf_free(&head);
	return GP_ENOMEM;
}
