/*
 * test_http_lite.c: the CLI's own HTTP client (http_lite.c) against a
 * scripted server on 127.0.0.1 in a thread: Content-Length and chunked
 * answers with the X-Gpupool-* headers, one connection kept alive for
 * several requests, a kept connection the server closed being replaced,
 * the request as sent (method, path under the URL's prefix, token, body),
 * a refused connection, an answer that never comes, a malformed answer
 * and URLs it must leave to libcurl. The server reads requests with
 * http-parser too. Also the job array's index parser (gp_array_parse).
 */
#include <sys/socket.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <http_parser.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gp.h"
#include "http_lite.h"
#include "jobspec.h"
#include "unit.h"

/* One answer of the script; close_after: close the connection after it. */
struct step {
	const char *answer; /* NULL: read the request, never answer */
	int close_after;
	int reset; /* with close_after: an abortive close (RST) */
};

struct server {
	int lfd, port;
	const struct step *steps;
	int nsteps;
	pthread_t thread;
	/* What it saw. */
	int accepts, requests;
	char method[16], url[256], auth[256], ctype[64], body[256];
	/* request parsing */
	char field[64];
	int complete;
};

static int
on_url(http_parser *p, const char *at, size_t n)
{
	struct server *s = p->data;
	size_t len = strlen(s->url);

	if (len + n < sizeof(s->url)) {
		memcpy(s->url + len, at, n);
		s->url[len + n] = '\0';
	}
	return 0;
}

static int
on_field(http_parser *p, const char *at, size_t n)
{
	struct server *s = p->data;

	snprintf(s->field, sizeof(s->field), "%.*s", (int)n, at);
	return 0;
}

static int
on_value(http_parser *p, const char *at, size_t n)
{
	struct server *s = p->data;

	if (strcasecmp(s->field, "Authorization") == 0)
		snprintf(s->auth, sizeof(s->auth), "%.*s", (int)n, at);
	else if (strcasecmp(s->field, "Content-Type") == 0)
		snprintf(s->ctype, sizeof(s->ctype), "%.*s", (int)n, at);
	return 0;
}

static int
on_req_body(http_parser *p, const char *at, size_t n)
{
	struct server *s = p->data;
	size_t len = strlen(s->body);

	if (len + n < sizeof(s->body)) {
		memcpy(s->body + len, at, n);
		s->body[len + n] = '\0';
	}
	return 0;
}

static int
on_req_done(http_parser *p)
{
	struct server *s = p->data;

	s->complete = 1;
	snprintf(s->method, sizeof(s->method), "%s",
	    http_method_str((enum http_method)p->method));
	http_parser_pause(p, 1);
	return 0;
}

/* Reads one request from fd. Returns 0, or -1 when the peer closed. */
static int
read_request(struct server *s, int fd)
{
	http_parser_settings st;
	http_parser p;
	char buf[4096];
	ssize_t r;

	http_parser_settings_init(&st);
	st.on_url = on_url;
	st.on_header_field = on_field;
	st.on_header_value = on_value;
	st.on_body = on_req_body;
	st.on_message_complete = on_req_done;
	http_parser_init(&p, HTTP_REQUEST);
	p.data = s;
	s->url[0] = s->auth[0] = s->ctype[0] = s->body[0] = '\0';
	s->complete = 0;
	while (!s->complete) {
		r = read(fd, buf, sizeof(buf));
		if (r <= 0)
			return -1;
		http_parser_execute(&p, &st, buf, (size_t)r);
	}
	return 0;
}

static void *
serve(void *arg)
{
	struct server *s = arg;
	int fd = -1, i;
	char drain[256];

	for (i = 0; i < s->nsteps; i++) {
		if (fd < 0) {
			struct timeval tv = {5, 0};
			fd = accept(s->lfd, NULL, NULL);
			if (fd < 0)
				return NULL;
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
			    sizeof(tv));
			s->accepts++;
		}
		if (read_request(s, fd) != 0) {
			/* The client gave this connection up: a new one. */
			close(fd);
			fd = -1;
			i--;
			continue;
		}
		s->requests++;
		if (s->steps[i].answer == NULL) {
			/* Never answer: wait until the client gives up. */
			while (read(fd, drain, sizeof(drain)) > 0)
				;
		} else if (write(fd, s->steps[i].answer,
		               strlen(s->steps[i].answer)) < 0) {
			break;
		}
		if (s->steps[i].close_after || s->steps[i].answer == NULL) {
			if (s->steps[i].reset) {
				struct linger l = {1, 0};
				setsockopt(fd, SOL_SOCKET, SO_LINGER, &l,
				    sizeof(l));
			}
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0) {
		/* Wait for the client to close (so it sees no early EOF). */
		while (read(fd, drain, sizeof(drain)) > 0)
			;
		close(fd);
	}
	return NULL;
}

static int
listen_any(int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* accept() and read() give up after 5 s: a broken client fails the
	 * test instead of hanging it. */
	struct timeval tv = {5, 0};

	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(fd, 8) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		perror("listen");
		exit(1);
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static void
server_start(struct server *s, const struct step *steps, int n)
{
	memset(s, 0, sizeof(*s));
	s->steps = steps;
	s->nsteps = n;
	s->lfd = listen_any(&s->port);
	pthread_create(&s->thread, NULL, serve, s);
}

static void
server_stop(struct server *s)
{
	pthread_join(s->thread, NULL);
	close(s->lfd);
}

static struct gp_http_lite *
client(const struct server *s, const char *prefix, const char *token)
{
	struct gp_http_lite *c = NULL;
	char url[128], err[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", s->port, prefix);
	CHECK(gp_http_lite_new(url, token, &c, err, sizeof(err)) == 0);
	return c;
}

#define OK_JSON                                                                \
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"                \
	"Content-Length: 11\r\n\r\n{\"jobs\":[]}"
#define CHUNKED                                                                \
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"                    \
	"X-Gpupool-Offset: 42\r\nX-Gpupool-State: running\r\n"                 \
	"X-Gpupool-Done: 1\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
#define UNAUTHORIZED                                                           \
	"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"      \
	"Content-Length: 25\r\n\r\n{\"error\":\"unknown token\"}"

TEST(content_length_chunked_keep_alive)
{
	static const struct step steps[] = {{OK_JSON, 0, 0}, {CHUNKED, 0, 0},
	    {UNAUTHORIZED, 0, 0}};
	struct gp_http_response r;
	struct server s;
	struct gp_http_lite *c;
	char text[128];

	server_start(&s, steps, 3);
	c = client(&s, "/", "gpt_secret");
	CHECK_EQ(gp_http_lite_request(c, "GET", "/v1/jobs", NULL, 0, NULL, 0,
	             &r),
	    0);
	CHECK_EQ(r.status, 200);
	CHECK_STR(r.body, "{\"jobs\":[]}");
	CHECK_EQ(r.log_offset, -1);
	gp_http_response_fini(&r);
	CHECK_EQ(gp_http_lite_request(c, "GET", "/v1/jobs/1/log", NULL, 0, NULL,
	             0, &r),
	    0);
	CHECK_EQ(r.status, 200);
	CHECK_STR(r.body, "hello world");
	CHECK_EQ(r.log_offset, 42);
	CHECK_STR(r.job_state, "running");
	CHECK_EQ(r.log_done, 1);
	gp_http_response_fini(&r);
	CHECK_EQ(gp_http_lite_request(c, "POST", "/v1/jobs", "{}", 2, NULL, 0,
	             &r),
	    0);
	CHECK_EQ(r.status, 401);
	gp_http_error_text(&r, text, sizeof(text));
	CHECK_STR(text, "unknown token");
	gp_http_response_fini(&r);
	gp_http_lite_free(c);
	server_stop(&s);
	CHECK_EQ(s.accepts, 1); /* three requests, one connection */
	CHECK_EQ(s.requests, 3);
	CHECK_STR(s.method, "POST");
	CHECK_STR(s.auth, "Bearer gpt_secret");
	CHECK_STR(s.ctype, "application/json");
	CHECK_STR(s.body, "{}");
}

TEST(prefix_and_closed_connection_replaced)
{
	/* The server drops the connection after each answer, once without
	 * saying so (an idle timeout): the next request goes on a new one. */
	static const struct step steps[] = {{OK_JSON, 1, 0}, {OK_JSON, 0, 0},
	    {OK_JSON, 0, 0}};
	struct gp_http_response r;
	struct server s;
	struct gp_http_lite *c;
	int i;

	server_start(&s, steps, 3);
	c = client(&s, "/pool/", NULL);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(gp_http_lite_request(c, "POST", "/v1/jobs/7/cancel",
		             "", 0, "text/plain", 0, &r),
		    0);
		CHECK_EQ(r.status, 200);
		gp_http_response_fini(&r);
		if (i == 0)
			usleep(50000); /* let the close arrive first */
	}
	gp_http_lite_free(c);
	server_stop(&s);
	CHECK_EQ(s.accepts, 2);
	CHECK_EQ(s.requests, 3);
	CHECK_STR(s.url, "/pool/v1/jobs/7/cancel");
	CHECK_STR(s.auth, "");
	CHECK_STR(s.ctype, "text/plain");
}

TEST(reset_connection_replaced)
{
	/*
	 * The server resets the kept connection after an answer (a
	 * coordinator killed and started again): the next request's send
	 * fails on it, and goes on a new connection, as do the ones after
	 * (a broken connection was kept, so that every later request of
	 * `submit`'s retries failed on it: "the connection broke while
	 * sending", 23 times in a minute).
	 */
	static const struct step steps[] = {{OK_JSON, 1, 1}, {OK_JSON, 0, 0},
	    {OK_JSON, 0, 0}};
	struct gp_http_response r;
	struct server s;
	struct gp_http_lite *c;
	int i;

	server_start(&s, steps, 3);
	c = client(&s, "/", NULL);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(gp_http_lite_request(c, "POST", "/v1/jobs", "{}", 2,
		             NULL, 0, &r),
		    0);
		CHECK_EQ(r.status, 200);
		gp_http_response_fini(&r);
		if (i == 0)
			usleep(50000); /* let the reset arrive first */
	}
	gp_http_lite_free(c);
	server_stop(&s);
	CHECK_EQ(s.accepts, 2);
	CHECK_EQ(s.requests, 3);
}

TEST(refused_timeout_malformed)
{
	static const struct step silent[] = {{NULL, 0, 0}};
	static const struct step bad[] = {{"HTTP/1.1 2x0 OK\r\n\r\n", 1, 0}};
	struct gp_http_response r;
	struct server s;
	struct gp_http_lite *c;
	int port;

	/* Nobody listens: refused, and said so. */
	close(listen_any(&port));
	s.port = port;
	c = client(&s, "", "t");
	CHECK_EQ(gp_http_lite_request(c, "GET", "/v1/whoami", NULL, 0, NULL, 0,
	             &r),
	    GP_ECONN);
	CHECK_EQ(r.status, 0);
	CHECK_EQ(r.refused, 1);
	CHECK(strstr(r.error, "Connection refused") != NULL);
	gp_http_response_fini(&r);
	gp_http_lite_free(c);
	/* An answer that never comes: the request's time limit. */
	server_start(&s, silent, 1);
	c = client(&s, "", "t");
	CHECK_EQ(gp_http_lite_request(c, "GET", "/v1/whoami", NULL, 0, NULL,
	             200, &r),
	    GP_ETIMEDOUT);
	CHECK(strstr(r.error, "timed out") != NULL);
	gp_http_response_fini(&r);
	gp_http_lite_free(c);
	server_stop(&s);
	/* A malformed answer. */
	server_start(&s, bad, 1);
	c = client(&s, "", "t");
	CHECK_EQ(gp_http_lite_request(c, "GET", "/v1/whoami", NULL, 0, NULL, 0,
	             &r),
	    GP_EPROTO);
	CHECK(strstr(r.error, "malformed answer") != NULL);
	gp_http_response_fini(&r);
	gp_http_lite_free(c);
	server_stop(&s);
}

TEST(urls)
{
	struct gp_http_lite *c = NULL;
	char err[256];

	CHECK_EQ(gp_http_lite_new("https://127.0.0.1:7070", NULL, &c, err,
	             sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "http://") != NULL);
	CHECK_EQ(gp_http_lite_new("not a url", NULL, &c, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_http_lite_new("http://u:p@h:1", NULL, &c, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(c == NULL);
	CHECK_EQ(gp_http_lite_new("http://[::1]:7070/", "t", &c, err,
	             sizeof(err)),
	    0);
	gp_http_lite_free(c);
}

TEST(array_parse)
{
	char err[256];
	int *t = NULL, n = 0, lim = -1;

	CHECK_EQ(gp_array_parse("0-999", &t, &n, &lim, err, sizeof(err)), 0);
	CHECK_EQ(n, 1000);
	CHECK_EQ(lim, 0);
	CHECK_EQ(t[0], 0);
	CHECK_EQ(t[999], 999);
	free(t);
	CHECK_EQ(gp_array_parse("1-10:4,0,20", &t, &n, &lim, err, sizeof(err)),
	    0);
	CHECK_EQ(n, 5); /* 1 5 9, 0, 20: ascending */
	CHECK(n == 5 && t[0] == 0 && t[1] == 1 && t[2] == 5 && t[3] == 9 &&
	    t[4] == 20);
	free(t);
	n = -1;
	CHECK_EQ(gp_array_parse("0-10000", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "more than 10000") != NULL);
	CHECK_EQ(gp_array_parse("3,1-4", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "task 3 given twice") != NULL);
	/* %LIMIT: at most so many at once, at the end only */
	CHECK_EQ(gp_array_parse("0-9%2", &t, &n, &lim, err, sizeof(err)), 0);
	CHECK(n == 10 && lim == 2);
	free(t);
	CHECK_EQ(gp_array_parse("1,5-7%10000", &t, &n, &lim, err, sizeof(err)),
	    0);
	CHECK(n == 4 && t[1] == 5 && lim == 10000);
	free(t);
	n = -1;
	lim = -1;
	CHECK_EQ(gp_array_parse("0-9%0", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "%LIMIT") != NULL);
	CHECK_EQ(gp_array_parse("0-9%10001", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_array_parse("0-9%2,11", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_array_parse("0-9%", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_array_parse("%2", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(lim, -1); /* written only on success */
	CHECK_EQ(gp_array_parse("0-9%2", &t, &n, NULL, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "not taken") != NULL);
	CHECK_EQ(gp_array_parse("5-2", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_array_parse("1-4:0", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_array_parse("", &t, &n, &lim, err, sizeof(err)), GP_EINVAL);
	CHECK_EQ(gp_array_parse("1,", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_array_parse("-1", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_array_parse("1000000", &t, &n, &lim, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(n, -1); /* written only on success */
}

int
main(void)
{
	RUN(content_length_chunked_keep_alive);
	RUN(prefix_and_closed_connection_replaced);
	RUN(reset_connection_replaced);
	RUN(refused_timeout_malformed);
	RUN(urls);
	RUN(array_parse);
	return unit_report();
}
