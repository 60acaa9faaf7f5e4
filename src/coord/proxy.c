/*
 * proxy.c: the job port proxy (proxy.h; docs/interactive.md): the grant
 * route on the API (POST /v1/jobs/{id}/proxy: a one-time code for the
 * job's owner), and the proxy listener: a thread that accepts browsers'
 * connections on --proxy-listen, one thread per connection that reads
 * the request's head, signs in with a code (/_gpupool/login) or checks
 * the session cookie of the job's own origin, then splices the
 * connection's bytes, both ways, to one relay stream into the job's
 * loopback port (relay_open, GP_STREAM_TCP): HTTP keep-alive and
 * WebSocket upgrades pass through untouched, and a connection never
 * changes origin, so the check at its start holds for its life. Codes and
 * sessions live in memory (a restart signs everyone out of the proxy).
 * With a certificate (the coordinator has TLS) the listener speaks only
 * HTTPS (proxy_tls.c), its cookies are Secure, and a plain request there
 * gets a redirect, never the job's page.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_int.h"
#include "gp.h"
#include "joblog.h"
#include "log.h"
#include "proxy.h"
#include "relay.h"
#include "route.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "web.h"

#define CODE_TTL_MS	 60000		  /* a code is good this long, once */
#define SESSION_TTL_MS	 (12 * 3600000LL) /* a session cookie's life */
#define NCODES		 256
#define NSESSIONS	 1024
#define CONNS_MAX	 512		  /* connections at once */
#define HEAD_TIMEOUT_MS	 10000		  /* to send a request's head */
#define SECRET_BYTES	 24

struct grant {
	char secret[SECRET_BYTES * 2 + 1]; /* "" : free */
	int64_t job_id;
	int port;
	char user[GP_NAME_MAX + 1];
	int64_t expires_mono;
};

static pthread_mutex_t proxy_lock = PTHREAD_MUTEX_INITIALIZER;
static struct grant codes[NCODES], sessions[NSESSIONS], tickets[NCODES];
static struct proxy_config pcfg;
static struct ssl_ctx_st *tls_ctx; /* NULL: plain HTTP */
static int listen_fd = -1;
static pthread_t listener;
static atomic_int stopping;
static int started;
/*
 * The connections: each thread's socket in a slot (-1: free), so that
 * the stop ends them all (shutdown wakes every wait on a socket) and
 * waits for their threads. A thread frees its slot before it closes its
 * socket: a number reused by then is never shut down.
 */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conns_done; /* nconns fell */
static int conn_fds[CONNS_MAX], nconns;
#define CONNS_STOP_MS 5000 /* for the connections to end at the stop */

/* ---- codes and sessions ---- */

/* Stores a new grant in table (the free, expired or oldest slot). */
static void
grant_new(struct grant *table, size_t n, int64_t job_id, int port,
    const char *user, int64_t ttl_ms, char *secret_out)
{
	unsigned char raw[SECRET_BYTES];
	int64_t now = gp_mono_ms();
	size_t i, pick = 0;

	randombytes_buf(raw, sizeof(raw));
	pthread_mutex_lock(&proxy_lock);
	for (i = 0; i < n; i++) {
		if (table[i].secret[0] == '\0' ||
		    table[i].expires_mono <= now) {
			pick = i;
			break;
		}
		if (table[i].expires_mono < table[pick].expires_mono)
			pick = i;
	}
	sodium_bin2hex(table[pick].secret, sizeof(table[pick].secret), raw,
	    sizeof(raw));
	table[pick].job_id = job_id;
	table[pick].port = port;
	gp_strlcpy(table[pick].user, user, sizeof(table[pick].user));
	table[pick].expires_mono = now + ttl_ms;
	gp_strlcpy(secret_out, table[pick].secret, SECRET_BYTES * 2 + 1);
	pthread_mutex_unlock(&proxy_lock);
	sodium_memzero(raw, sizeof(raw));
}

/*
 * Finds the live grant for (secret, job, port) in table; copies its user
 * out, and forgets it when once (a code). 1 when found.
 */
static int
grant_take(struct grant *table, size_t n, const char *secret, int64_t job_id,
    int port, int once, char *user, size_t userlen)
{
	int64_t now = gp_mono_ms();
	size_t i, len = strlen(secret);
	int found = 0;

	if (len != SECRET_BYTES * 2)
		return 0;
	pthread_mutex_lock(&proxy_lock);
	for (i = 0; i < n && !found; i++) {
		struct grant *g = &table[i];
		if (g->secret[0] == '\0' ||
		    sodium_memcmp(g->secret, secret, len) != 0)
			continue;
		if (g->expires_mono > now && g->job_id == job_id &&
		    g->port == port) {
			gp_strlcpy(user, g->user, userlen);
			found = 1;
		}
		if (once || !found)
			memset(g, 0, sizeof(*g)); /* used, or misused */
	}
	pthread_mutex_unlock(&proxy_lock);
	return found;
}

/*
 * The dashboard terminal's tickets (terminal.c), the same mechanism; a
 * ticket's grant keeps the part where a code's keeps the port.
 */
void
proxy_ticket_new(int64_t job_id, int part, const char *user, char *ticket)
{
	grant_new(tickets, NCODES, job_id, part, user, CODE_TTL_MS / 2,
	    ticket);
}

int
proxy_ticket_take(const char *ticket, int64_t job_id, int part, char *user,
    size_t userlen)
{
	return grant_take(tickets, NCODES, ticket, job_id, part, 1, user,
	    userlen);
}

/* ---- the grant route ---- */

/* POST /v1/jobs/{id}/proxy {"port": P}: a one-time sign-in link. */
static enum MHD_Result
route_grant(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	API_PATH_PARTS(url, p, n);
	static const char *const fields[] = {"port", NULL};
	const struct job *job;
	const char *bad;
	enum MHD_Result rc;
	char code[SECRET_BYTES * 2 + 1], origin[400], link[600];
	int64_t job_id;
	int status = 0, port;
	json_t *body, *v;

	if (n != 4 || !api_path_id(p[2], &job_id))
		return api_no_route(conn, url, method, 0);
	if (!started)
		return reply_error(conn, 503, "this coordinator has no job "
		    "port proxy (--proxy-listen)");
	if ((body = api_parse_body(conn, req, &rc)) == NULL)
		return rc;
	v = json_object_get(body, "port");
	if (!api_only_fields(body, fields, &bad) || !json_is_integer(v) ||
	    json_integer_value(v) < 1 || json_integer_value(v) > 65535) {
		json_decref(body);
		return reply_error(conn, 400, "a body {\"port\": 1..65535}");
	}
	port = (int)json_integer_value(v);
	json_decref(body);
	pthread_rwlock_rdlock(&state.lock);
	job = state_job(job_id);
	/* Only the owner: an admin is answered as for another's job. */
	if (job == NULL || strcmp(job->user, req->auth->name) != 0)
		status = 404;
	else if (!gp_jobspec_exposes(&job->spec, port))
		status = 400;
	else if (job->state != JOB_RUNNING)
		status = 409;
	pthread_rwlock_unlock(&state.lock);
	if (status == 404)
		return reply_error(conn, 404, "no such job");
	if (status == 400)
		return reply_error(conn, 400, "job %lld declares no port %d "
		    "(submit --expose %d)", (long long)job_id, port, port);
	if (status == 409)
		return reply_error(conn, 409, "job %lld is not running",
		    (long long)job_id);
	grant_new(codes, NCODES, job_id, port, req->auth->name, CODE_TTL_MS,
	    code);
	proxy_origin(job_id, port, origin, sizeof(origin));
	snprintf(link, sizeof(link), "%s/_gpupool/login#%s", origin, code);
	gp_info("proxy grant job=%lld port=%d user=%s", (long long)job_id,
	    port, req->auth->name);
	return reply_json(conn, 201, json_pack("{s:s,s:s,s:i}", "url", link,
	    "origin", origin, "expires_in_s", CODE_TTL_MS / 1000));
}

/* "https://j12-p8888.DOMAIN:PORT" (no port when it is the scheme's). */
void
proxy_origin(int64_t job_id, int port, char *out, size_t len)
{
	const char *scheme = tls_ctx != NULL ? "https" : "http";
	char at[16] = "";

	if (pcfg.port != (tls_ctx != NULL ? 443 : 80))
		snprintf(at, sizeof(at), ":%d", pcfg.port);
	snprintf(out, len, "%s://j%lld-p%d.%s%s", scheme, (long long)job_id,
	    port, pcfg.domain, at);
}

int
proxy_running(void)
{
	return started;
}

#define PROXY_USERS (API_ROLE(GP_ROLE_USER) | API_ROLE(GP_ROLE_ADMIN))

const struct api_route proxy_routes[] = {
    {"/v1/jobs/{id}/proxy", API_POST, PROXY_USERS,
        "only the job's owner may open its ports", 1024, 0, route_grant,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};

/* ---- the listener's connections ---- */

static int
write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			if (poll(&pfd, 1, 30000) <= 0)
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The proxy's own answers: small, never cached, never framed. */
static void
answer(struct proxy_conn *c, int status, const char *reason,
    const char *ctype, const char *extra, const char *body)
{
	char head[1200];
	int n;

	/*
	 * Over TLS, HSTS: the sign-in page is the first answer every job
	 * origin gets, so the browser keeps that host on HTTPS from then
	 * on (the job's own answers pass untouched).
	 */
	n = snprintf(head, sizeof(head),
	    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\nCache-Control: no-store\r\n"
	    "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
	    "X-Frame-Options: DENY\r\nContent-Security-Policy: default-src "
	    "'none'; script-src 'self'; connect-src 'self'; "
	    "frame-ancestors 'none'\r\n%s%s\r\n",
	    status, reason, ctype, strlen(body), c->ssl != NULL ?
	    "Strict-Transport-Security: " GP_HSTS "\r\n" : "", extra);
	if (n > 0 && (size_t)n < sizeof(head) && proxy_conn_write_all(c, head,
	    (size_t)n) == 0)
		proxy_conn_write_all(c, body, strlen(body));
}

static void
answer_text(struct proxy_conn *c, int status, const char *reason,
    const char *text)
{
	answer(c, status, reason, "text/plain; charset=utf-8", "", text);
}

static const char login_html[] =
    "<!doctype html>\n<meta charset=\"utf-8\">\n<title>gpupool</title>\n"
    "<script src=\"/_gpupool/login.js\"></script>\n"
    "<p id=\"m\">Signing in to the job's port...</p>\n";

/*
 * The code rides in the fragment, which no request carries: the script
 * posts it, then loads the job's page with the cookie it got.
 */
static const char login_js[] =
    "(async () => {\n"
    "  const code = location.hash.slice(1);\n"
    "  history.replaceState(null, '', '/_gpupool/login');\n"
    "  const r = await fetch('/_gpupool/login', {method: 'POST', body: "
    "code});\n"
    "  if (r.ok) { location.replace('/'); return; }\n"
    "  document.getElementById('m').textContent = 'This link is used or "
    "expired: open the port again from the gpupool dashboard.';\n"
    "})();\n";

/* Reads more of a head (or a body) into buf by deadline: 0 or -1. */
static int
read_more(struct proxy_conn *c, char *buf, size_t cap, size_t *have,
    int64_t deadline)
{
	int n;

	if (*have >= cap ||
	    (n = proxy_conn_read_wait(c, buf + *have, cap - *have,
		deadline)) <= 0)
		return -1;
	*have += (size_t)n;
	return 0;
}

/* /_gpupool/login: the page, its script, and the code's exchange. */
static void
login(struct proxy_conn *c, const struct proxy_head *h, char *buf,
    size_t have, size_t head_len, int64_t job_id, int port)
{
	char code[SECRET_BYTES * 2 + 1], user[GP_NAME_MAX + 1];
	char secret[SECRET_BYTES * 2 + 1], cookie[200];
	int64_t deadline = gp_mono_ms() + HEAD_TIMEOUT_MS;
	size_t len;

	if (strcmp(h->method, "GET") == 0 &&
	    strcmp(h->path, "/_gpupool/login.js") == 0) {
		answer(c, 200, "OK", "text/javascript; charset=utf-8", "",
		    login_js);
		return;
	}
	if (strcmp(h->method, "GET") == 0) {
		answer(c, 200, "OK", "text/html; charset=utf-8", "",
		    login_html);
		return;
	}
	if (strcmp(h->method, "POST") != 0 || h->content_length < 0 ||
	    h->content_length > SECRET_BYTES * 2) {
		answer_text(c, 400, "Bad Request", "a sign-in code\n");
		return;
	}
	len = (size_t)h->content_length;
	while (have < head_len + len)
		if (read_more(c, buf, PROXY_HEAD_MAX, &have, deadline) != 0)
			return;
	memcpy(code, buf + head_len, len);
	code[len] = '\0';
	sodium_memzero(buf + head_len, len);
	if (!grant_take(codes, NCODES, code, job_id, port, 1, user,
	    sizeof(user))) {
		gp_info("proxy sign-in refused job=%lld port=%d",
		    (long long)job_id, port);
		answer_text(c, 403, "Forbidden", "this link is used or "
		    "expired\n");
		return;
	}
	grant_new(sessions, NSESSIONS, job_id, port, user, SESSION_TTL_MS,
	    secret);
	/*
	 * Host-only (no Domain): this job's port alone gets it back; Secure
	 * over TLS: the browser never sends it in clear.
	 */
	snprintf(cookie, sizeof(cookie), "Set-Cookie: " PROXY_COOKIE
	    "=%s; Path=/; HttpOnly;%s SameSite=Lax; Max-Age=%lld\r\n", secret,
	    tls_ctx != NULL ? " Secure;" : "",
	    (long long)(SESSION_TTL_MS / 1000));
	gp_info("proxy sign-in job=%lld port=%d user=%s", (long long)job_id,
	    port, user);
	answer(c, 200, "OK", "text/plain; charset=utf-8", cookie, "ok\n");
	sodium_memzero(secret, sizeof(secret));
}

/* Writes one frame (blocking fd). */
static int
send_frame(int fd, int type, const void *data, size_t len)
{
	uint8_t head[GP_FRAME_HEADER];

	gp_frame_header(head, type, len);
	if (write_all(fd, head, sizeof(head)) != 0)
		return -1;
	return len > 0 ? write_all(fd, data, len) : 0;
}

static int
send_data(int fd, const char *data, size_t len)
{
	while (len > 0) {
		size_t n = len < GP_FRAME_MAX ? len : GP_FRAME_MAX;
		if (send_frame(fd, GP_FRAME_DATA, data, n) != 0)
			return -1;
		data += n;
		len -= n;
	}
	return 0;
}

/*
 * The connection's bytes to the job's port and back: the head already
 * read (pre) first, then whatever either side sends, until the job's
 * side ends (EXIT, ERROR or the stream closing).
 */
static void
splice_stream(struct proxy_conn *c, int rfd, int port, const char *pre,
    size_t npre)
{
	struct gp_frame_reader *fr = malloc(sizeof(*fr));
	char open[64], buf[16384];
	int client_open = 1, flags;

	if (fr == NULL)
		return;
	gp_frame_reader_init(fr);
	flags = fcntl(rfd, F_GETFL);
	if (flags >= 0)
		fcntl(rfd, F_SETFL, flags & ~O_NONBLOCK);
	snprintf(open, sizeof(open), "{\"kind\":\"tcp\",\"port\":%d}", port);
	if (send_frame(rfd, GP_FRAME_OPEN, open, strlen(open)) != 0 ||
	    send_data(rfd, pre, npre) != 0)
		goto out;
	for (;;) {
		struct pollfd pfd[2] = {{.fd = rfd, .events = POLLIN},
		    {.fd = c->fd, .events = client_open ? c->want : 0}};
		/* TLS may hold a record's rest that poll cannot see. */
		int pending = client_open && proxy_conn_pending(c);
		ssize_t n;
		if (poll(pfd, 2, pending ? 0 : -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (client_open && (pending || (pfd[1].revents &
		    (POLLIN | POLLOUT | POLLHUP | POLLERR)))) {
			n = proxy_conn_read(c, buf, sizeof(buf));
			if (n == 0 || n == -1) {
				client_open = 0;
				if (send_frame(rfd, GP_FRAME_EOF, NULL, 0) != 0)
					break;
			} else if (n > 0 && send_data(rfd, buf,
			    (size_t)n) != 0) {
				break;
			}
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			size_t off = 0, used;
			int r = 0;
			n = read(rfd, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0)
				break;
			while (off < (size_t)n) {
				r = gp_frame_read(fr, (uint8_t *)buf + off,
				    (size_t)n - off, &used);
				off += used;
				if (r < 0)
					goto out;
				if (r == 0)
					break;
				if (fr->type == GP_FRAME_STDOUT &&
				    proxy_conn_write_all(c, fr->payload,
					fr->len) != 0)
					goto out;
				if (fr->type == GP_FRAME_EOF)
					proxy_conn_shutdown_write(c);
				if (fr->type == GP_FRAME_EXIT ||
				    fr->type == GP_FRAME_ERROR)
					goto out;
			}
		}
	}
out:
	free(fr);
}

/*
 * A plain HTTP request on the HTTPS listener: never proxied (its cookie,
 * if a client sent one, crossed in clear already; the browser's Secure
 * cookie is never sent here). A job's host is sent to its https:// root.
 */
static void
plain_on_tls(struct proxy_conn *c, char *buf, int64_t deadline)
{
	struct proxy_head h;
	char extra[400];
	int64_t job_id;
	size_t have = 0;
	int rc, port;

	while ((rc = proxy_head_parse(buf, have, &h)) == 0)
		if (read_more(c, buf, PROXY_HEAD_MAX, &have, deadline) != 0)
			return;
	if (rc < 0 || proxy_host_parse(h.host, pcfg.domain, &job_id,
	    &port) != 0) {
		answer_text(c, 400, "Bad Request", "this port speaks HTTPS\n");
		return;
	}
	gp_debug("proxy plain request on the HTTPS listener job=%lld "
	    "port=%d", (long long)job_id, port);
	/* h.host passed proxy_host_parse: "jN-pN.DOMAIN[:PORT]", no CR/LF. */
	snprintf(extra, sizeof(extra), "Location: https://%s/\r\n", h.host);
	answer(c, 301, "Moved Permanently", "text/plain; charset=utf-8",
	    extra, "this port speaks HTTPS\n");
}

/* 1: the client opens with a TLS handshake record; 0: not; -1: gone. */
static int
starts_tls(int fd, int64_t deadline)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int64_t left;
	unsigned char b;
	ssize_t n;

	for (;;) {
		n = recv(fd, &b, 1, MSG_PEEK);
		if (n == 1)
			return b == 0x16; /* TLS: a handshake record */
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		left = deadline - gp_mono_ms();
		if (left <= 0 || poll(&pfd, 1, (int)left) < 0)
			return -1;
	}
}

static void *
conn_main(void *arg)
{
	int slot = (int)(intptr_t)arg, cfd = conn_fds[slot], rfd = -1;
	int port = 0, rc = 0, status;
	char *buf = malloc(PROXY_HEAD_MAX);
	char user[GP_NAME_MAX + 1];
	int64_t deadline = gp_mono_ms() + HEAD_TIMEOUT_MS, job_id = 0, sid;
	struct proxy_conn conn, *c = &conn;
	struct proxy_head h;
	size_t have = 0;

	proxy_conn_start(c, NULL, cfd, deadline); /* plain until told */
	if (buf == NULL)
		goto out;
	if (tls_ctx != NULL) {
		int tls = starts_tls(cfd, deadline);
		if (tls == 0)
			plain_on_tls(c, buf, deadline);
		if (tls != 1 || proxy_conn_start(c, tls_ctx, cfd,
		    deadline) != 0) {
			if (tls != 0) /* (plain_on_tls said why) */
				gp_debug("proxy connection ended before a "
				    "request: %s", tls < 0 ? "closed, or "
				    "nothing sent in time" : "TLS handshake "
				    "failed");
			goto out;
		}
	}
	while ((rc = proxy_head_parse(buf, have, &h)) == 0)
		if (read_more(c, buf, PROXY_HEAD_MAX, &have, deadline) != 0) {
			gp_debug("proxy connection ended before a request: no "
			    "whole head in time (%zu bytes)", have);
			goto out;
		}
	if (rc < 0) {
		answer_text(c, 400, "Bad Request", "bad request\n");
		goto out;
	}
	if (proxy_host_parse(h.host, pcfg.domain, &job_id, &port) != 0) {
		answer_text(c, 404, "Not Found", "not the address of a "
		    "job's port\n");
		goto out;
	}
	if (strncmp(h.path, "/_gpupool/login", 15) == 0) {
		login(c, &h, buf, have, (size_t)rc, job_id, port);
		goto out;
	}
	if (!grant_take(sessions, NSESSIONS, h.cookie, job_id, port, 0, user,
	    sizeof(user))) {
		answer_text(c, 403, "Forbidden", "open this port from the "
		    "gpupool dashboard (the job's page, Open)\n");
		goto out;
	}
	status = relay_open(job_id, user, GP_STREAM_TCP, 0, &rfd, &sid);
	if (status != 0) {
		answer_text(c, status == GP_ECONFLICT ? 409 : status ==
		    GP_ETOOBIG ? 429 : 404, "Unavailable", status ==
		    GP_ECONFLICT ? "the job is not running\n" : status ==
		    GP_ETOOBIG ? "too many streams\n" : "no such job\n");
		goto out;
	}
	gp_debug("proxy connection job=%lld port=%d user=%s stream=%lld "
	    "tls=%d", (long long)job_id, port, user, (long long)sid,
	    c->ssl != NULL);
	splice_stream(c, rfd, port, buf, have);
out:
	if (buf != NULL)
		sodium_memzero(buf, PROXY_HEAD_MAX);
	free(buf);
	if (rfd >= 0)
		close(rfd);
	pthread_mutex_lock(&conns_lock);
	conn_fds[slot] = -1;
	pthread_mutex_unlock(&conns_lock);
	proxy_conn_close(c);
	pthread_mutex_lock(&conns_lock);
	nconns--;
	pthread_cond_broadcast(&conns_done);
	pthread_mutex_unlock(&conns_lock);
	return NULL;
}

/* A free slot for fd, under conns_lock: its index, or -1 (all taken). */
static int
conn_slot(int fd)
{
	int i;

	if (nconns >= CONNS_MAX)
		return -1;
	for (i = 0; i < CONNS_MAX; i++)
		if (conn_fds[i] < 0) {
			conn_fds[i] = fd;
			nconns++;
			return i;
		}
	return -1;
}

static void *
listener_main(void *arg)
{
	int one = 1;

	(void)arg;
	while (!atomic_load(&stopping)) {
		struct pollfd pfd = {.fd = listen_fd, .events = POLLIN};
		pthread_attr_t attr;
		pthread_t t;
		int cfd, slot;

		if (poll(&pfd, 1, 250) <= 0)
			continue;
		cfd = accept4(listen_fd, NULL, NULL,
		    SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cfd < 0)
			continue;
		/*
		 * No Nagle: a TLS handshake's last flight (session tickets)
		 * and the first answer are two small writes, and the second
		 * waited for the browser's delayed ACK (40 ms a connection).
		 */
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_mutex_lock(&conns_lock);
		slot = conn_slot(cfd);
		pthread_mutex_unlock(&conns_lock);
		if (slot < 0) {
			/* (Over TLS, no handshake for an answer: closed.) */
			if (tls_ctx == NULL) {
				struct proxy_conn busy;
				proxy_conn_start(&busy, NULL, cfd, 0);
				answer_text(&busy, 503, "Busy", "too many "
				    "connections\n");
			}
			close(cfd);
			continue;
		}
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		if (pthread_create(&t, &attr, conn_main,
		    (void *)(intptr_t)slot) != 0) {
			pthread_mutex_lock(&conns_lock);
			conn_fds[slot] = -1;
			nconns--;
			pthread_mutex_unlock(&conns_lock);
			close(cfd);
		}
		pthread_attr_destroy(&attr);
	}
	return NULL;
}

int
proxy_start(const struct proxy_config *cfg, char *why, size_t whylen)
{
	struct sockaddr_in addr;
	int one = 1;

	why[0] = '\0';
	if (cfg->addr[0] == '\0')
		return 0;
	pcfg = *cfg;
	for (int i = 0; i < CONNS_MAX; i++)
		conn_fds[i] = -1;
	if (gp_cond_init_monotonic(&conns_done) != 0)
		return GP_ENOMEM;
	if (cfg->tls_cert[0] != '\0' &&
	    (tls_ctx = proxy_tls_new(cfg, why, whylen)) == NULL)
		return GP_EINVAL;
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)cfg->port);
	if (inet_pton(AF_INET, cfg->addr, &addr.sin_addr) != 1)
		return GP_EINVAL;
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0)
		return GP_EIO;
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
	    listen(listen_fd, 128) != 0) {
		snprintf(why, whylen, "cannot listen on %s:%d: %s", cfg->addr,
		    cfg->port, strerror(errno));
		goto fail;
	}
	if (pthread_create(&listener, NULL, listener_main, NULL) != 0) {
		snprintf(why, whylen, "cannot start its thread");
		goto fail;
	}
	started = 1;
	gp_info("job port proxy listening addr=%s:%d domain=%s tls=%s",
	    cfg->addr, cfg->port, cfg->domain, tls_ctx != NULL ? "yes" : "no");
	if (tls_ctx == NULL && (ntohl(addr.sin_addr.s_addr) >> 24) != 127)
		gp_warn("the job port proxy serves plain HTTP beyond "
		    "loopback: its cookies cross the network in clear (give "
		    "the coordinator TLS, or --proxy-tls-cert) addr=%s",
		    cfg->addr);
	return 0;
fail:
	close(listen_fd);
	listen_fd = -1;
	proxy_tls_free(tls_ctx);
	tls_ctx = NULL;
	return GP_EIO;
}

void
proxy_stop(void)
{
	if (!started)
		return;
	int64_t deadline = gp_mono_ms() + CONNS_STOP_MS;
	int i;

	atomic_store(&stopping, 1);
	pthread_join(listener, NULL);
	close(listen_fd);
	listen_fd = -1;
	started = 0;
	/* Every connection ends now: its thread sees its socket shut. */
	pthread_mutex_lock(&conns_lock);
	for (i = 0; i < CONNS_MAX; i++)
		if (conn_fds[i] >= 0)
			shutdown(conn_fds[i], SHUT_RDWR);
	while (nconns > 0 && gp_mono_ms() < deadline)
		gp_cond_wait_ms(&conns_done, &conns_lock,
		    deadline - gp_mono_ms());
	i = nconns;
	pthread_mutex_unlock(&conns_lock);
	if (i > 0)
		gp_warn("proxy: %d connection(s) still ending at the stop", i);
	/* (Those may still hold tls_ctx: it stays.) */
}
