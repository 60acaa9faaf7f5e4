/*
 * terminal.c: the dashboard's terminal (docs/interactive.md): a shell in
 * a running job of the user's, in the browser (xterm.js, web/vendor/),
 * over a WebSocket on the dashboard's own origin. A browser cannot put
 * the user's token on a WebSocket, and a token must not ride in a URL:
 * so the page first asks POST /v1/jobs/{id}/terminal with its token for
 * a one-time ticket (30 s), opens GET /v1/jobs/{id}/terminal (Upgrade:
 * websocket; its Origin must be the dashboard's own) and sends the ticket
 * as its first message. The coordinator then opens a GP_STREAM_PTY stream
 * (relay_open) and carries it: binary messages are the terminal's input
 * (DATA frames), text messages JSON ({"resize": [rows, cols]}); the job's
 * output comes back as binary messages, {"exit": N}, {"error": "..."} and
 * {"notice": "..."} as text. WebSocket framing is wslay's; one thread per
 * terminal, its output queue bounded (the relay's socket is not read
 * while the browser lags).
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

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

#define WS_GUID	     "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define QUEUE_MAX    32	   /* output messages queued to the browser */
#define TICKET_WAIT  10000 /* ms for the first message */

struct term {
	int ws; /* the upgraded connection */
	struct MHD_UpgradeResponseHandle *urh;
	int rfd; /* the relay's stream; -1 until the ticket */
	int64_t job_id, opened_mono;
	char *pre; /* bytes that came with the upgrade */
	size_t npre, pre_off;
	int done;
	/*
	 * A close to send once the messages queued before it have gone:
	 * wslay sends control frames ahead of queued messages, and the
	 * browser must read the error that says why (0: none).
	 */
	uint16_t close_code;
	struct gp_frame_reader rd;
	struct term *next; /* in terms (under terms_lock) */
};

/*
 * The terminals' threads, listed so that the coordinator's stop ends
 * them (shutdown wakes a thread's wait on its WebSocket) and waits for
 * them before the HTTP daemon whose upgraded connections they close
 * goes. A thread leaves the list before it closes its socket.
 */
static pthread_mutex_t terms_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t terms_once = PTHREAD_ONCE_INIT;
static pthread_cond_t terms_done;
static struct term *terms;
static int terms_stopping;

static void
terms_init(void)
{
	if (gp_cond_init_monotonic(&terms_done) != 0)
		gp_fatalx("cannot make a condition variable");
}

/* Removes t from terms. */
static void
terms_leave(struct term *t)
{
	struct term **tp;

	pthread_mutex_lock(&terms_lock);
	for (tp = &terms; *tp != NULL; tp = &(*tp)->next)
		if (*tp == t) {
			*tp = t->next;
			break;
		}
	pthread_cond_broadcast(&terms_done);
	pthread_mutex_unlock(&terms_lock);
}

void
terminal_stop(int64_t wait_ms)
{
	int64_t deadline = gp_mono_ms() + wait_ms;
	struct term *t;
	int left = 0;

	pthread_once(&terms_once, terms_init);
	pthread_mutex_lock(&terms_lock);
	terms_stopping = 1;
	for (t = terms; t != NULL; t = t->next)
		shutdown(t->ws, SHUT_RDWR);
	while (terms != NULL && gp_mono_ms() < deadline)
		gp_cond_wait_ms(&terms_done, &terms_lock,
		    deadline - gp_mono_ms());
	for (t = terms; t != NULL; t = t->next)
		left++;
	pthread_mutex_unlock(&terms_lock);
	if (left > 0)
		gp_warn("%d terminal(s) still ending at the stop", left);
}

static int
write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
send_frame(int fd, int type, const void *data, size_t len)
{
	uint8_t head[GP_FRAME_HEADER];

	gp_frame_header(head, type, len);
	if (write_all(fd, head, sizeof(head)) != 0)
		return -1;
	return len > 0 ? write_all(fd, data, len) : 0;
}

static void
queue_text(wslay_event_context_ptr ctx, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT);
	struct wslay_event_msg m;

	json_decref(o);
	if (text == NULL)
		return;
	m.opcode = WSLAY_TEXT_FRAME;
	m.msg = (const uint8_t *)text;
	m.msg_length = strlen(text);
	wslay_event_queue_msg(ctx, &m); /* copies it */
	free(text);
}

static ssize_t
ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
    void *arg)
{
	struct term *t = arg;
	ssize_t n;

	(void)flags;
	if (t->pre_off < t->npre) {
		n = (ssize_t)(t->npre - t->pre_off < len ? t->npre - t->pre_off
		                                         : len);
		memcpy(buf, t->pre + t->pre_off, (size_t)n);
		t->pre_off += (size_t)n;
		return n;
	}
	n = recv(t->ws, buf, len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (n <= 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static ssize_t
ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
    int flags, void *arg)
{
	struct term *t = arg;
	ssize_t n;

	(void)flags;
	n = send(t->ws, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (n < 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

/* The first message: the ticket, and the terminal's size. */
static void
open_stream(wslay_event_context_ptr ctx, struct term *t, json_t *o)
{
	const char *ticket = json_string_value(json_object_get(o, "ticket"));
	json_int_t rows = json_integer_value(json_object_get(o, "rows"));
	json_int_t cols = json_integer_value(json_object_get(o, "cols"));
	json_t *pv = json_object_get(o, "part");
	char user[GP_NAME_MAX + 1], open[160];
	int64_t sid;
	int rc, flags, part;

	/* The part the ticket was asked for (route_ticket); 0 when none. */
	part = json_is_integer(pv) && json_integer_value(pv) >= 0 &&
	    json_integer_value(pv) < GP_NODES_MAX ?
	    (int)json_integer_value(pv) : pv == NULL ? 0 : -1;
	if (ticket == NULL || part < 0 || !proxy_ticket_take(ticket,
	    t->job_id, part, user, sizeof(user))) {
		queue_text(ctx, json_pack("{s:s}", "error", "this terminal's "
		    "ticket is used or expired: open it again"));
		t->close_code = 1008;
		return;
	}
	rc = relay_open_part(t->job_id, part, user, GP_STREAM_PTY, 0,
	    &t->rfd, &sid);
	if (rc != 0) {
		queue_text(ctx, json_pack("{s:s}", "error", rc == GP_ECONFLICT ?
		    "the job is not running" : rc == GP_EINVAL ?
		    "no such part" : rc == GP_ETOOBIG ?
		    "too many streams" : "no such job"));
		t->close_code = 1008;
		return;
	}
	flags = fcntl(t->rfd, F_GETFL);
	if (flags >= 0)
		fcntl(t->rfd, F_SETFL, flags & ~O_NONBLOCK);
	snprintf(open, sizeof(open), "{\"kind\":\"pty\",\"tty\":true,"
	    "\"rows\":%d,\"cols\":%d,\"term\":\"xterm-256color\"}",
	    rows > 0 && rows < 1000 ? (int)rows : 24,
	    cols > 0 && cols < 1000 ? (int)cols : 80);
	if (send_frame(t->rfd, GP_FRAME_OPEN, open, strlen(open)) != 0)
		t->done = 1;
	gp_info("terminal opened job=%lld part=%d user=%s stream=%lld",
	    (long long)t->job_id, part, user, (long long)sid);
}

static void
on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg
    *arg, void *user_data)
{
	struct term *t = user_data;
	json_t *o, *size;

	if (wslay_is_ctrl_frame(arg->opcode))
		return;
	if (arg->opcode == WSLAY_BINARY_FRAME) {
		size_t off = 0;
		if (t->rfd < 0)
			return;
		while (off < arg->msg_length && !t->done) {
			size_t n = arg->msg_length - off;
			if (n > GP_FRAME_MAX)
				n = GP_FRAME_MAX;
			if (send_frame(t->rfd, GP_FRAME_DATA, arg->msg + off,
			    n) != 0)
				t->done = 1;
			off += n;
		}
		return;
	}
	o = json_loadb((const char *)arg->msg, arg->msg_length, 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return;
	}
	if (t->rfd < 0) {
		open_stream(ctx, t, o);
	} else if (json_is_array(size = json_object_get(o, "resize")) &&
	    json_array_size(size) == 2) {
		json_int_t r = json_integer_value(json_array_get(size, 0));
		json_int_t c = json_integer_value(json_array_get(size, 1));
		uint8_t rs[4] = {(uint8_t)(r >> 8), (uint8_t)r,
		    (uint8_t)(c >> 8), (uint8_t)c};
		if (r > 0 && r < 1000 && c > 0 && c < 1000 &&
		    send_frame(t->rfd, GP_FRAME_RESIZE, rs, sizeof(rs)) != 0)
			t->done = 1;
	}
	json_decref(o);
}

/* The job's frames, as messages to the browser. */
static void
from_job(wslay_event_context_ptr ctx, struct term *t)
{
	uint8_t buf[16384];
	size_t off = 0, used;
	ssize_t n = read(t->rfd, buf, sizeof(buf));
	int r;

	if (n <= 0) {
		t->close_code = 1000;
		close(t->rfd);
		t->rfd = -2;
		return;
	}
	while (off < (size_t)n) {
		r = gp_frame_read(&t->rd, buf + off, (size_t)n - off, &used);
		off += used;
		if (r <= 0) {
			if (r < 0)
				t->done = 1;
			return;
		}
		if (t->rd.type == GP_FRAME_STDOUT ||
		    t->rd.type == GP_FRAME_STDERR) {
			struct wslay_event_msg m = {WSLAY_BINARY_FRAME,
			    t->rd.payload, t->rd.len};
			wslay_event_queue_msg(ctx, &m);
		} else if (t->rd.type == GP_FRAME_EXIT && t->rd.len == 4) {
			int32_t code = (int32_t)((uint32_t)t->rd.payload[0] << 24 |
			    (uint32_t)t->rd.payload[1] << 16 |
			    (uint32_t)t->rd.payload[2] << 8 | t->rd.payload[3]);
			queue_text(ctx, json_pack("{s:i}", "exit", code));
			t->close_code = 1000;
		} else if (t->rd.type == GP_FRAME_ERROR ||
		    t->rd.type == GP_FRAME_NOTICE) {
			queue_text(ctx, json_pack("{s:s%}", t->rd.type ==
			    GP_FRAME_ERROR ? "error" : "notice",
			    (const char *)t->rd.payload, t->rd.len));
			if (t->rd.type == GP_FRAME_ERROR)
				t->close_code = 1011;
		}
	}
}

static void *
term_main(void *arg)
{
	struct term *t = arg;
	struct wslay_event_callbacks cb = {ws_recv, ws_send, NULL, NULL, NULL,
	    NULL, on_msg};
	wslay_event_context_ptr ctx;

	gp_frame_reader_init(&t->rd);
	if (wslay_event_context_server_init(&ctx, &cb, t) != 0)
		goto out;
	while (!t->done && (wslay_event_want_read(ctx) ||
	    wslay_event_want_write(ctx))) {
		struct pollfd pf[2] = {{.fd = t->ws}, {.fd = -1}};
		int rfd_ok = t->rfd >= 0 &&
		    wslay_event_get_queued_msg_count(ctx) < QUEUE_MAX;

		if (t->rfd < 0 && t->rfd != -2 &&
		    gp_mono_ms() - t->opened_mono > TICKET_WAIT)
			break;
		pf[0].events = (wslay_event_want_read(ctx) ? POLLIN : 0) |
		    (wslay_event_want_write(ctx) ? POLLOUT : 0);
		if (rfd_ok) {
			pf[1].fd = t->rfd;
			pf[1].events = POLLIN;
		}
		if (t->pre_off < t->npre)
			pf[0].revents = POLLIN;
		else if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			break;
		if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    wslay_event_recv(ctx) != 0)
			break;
		if (rfd_ok && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			from_job(ctx, t);
		if (wslay_event_want_write(ctx) && wslay_event_send(ctx) != 0)
			break;
		if (t->close_code != 0 &&
		    wslay_event_get_queued_msg_count(ctx) == 0) {
			wslay_event_queue_close(ctx, t->close_code, NULL, 0);
			t->close_code = 0;
			if (wslay_event_send(ctx) != 0)
				break;
		}
	}
	wslay_event_context_free(ctx);
out:
	if (t->rfd >= 0)
		close(t->rfd);
	terms_leave(t);
	MHD_upgrade_action(t->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(t->pre);
	free(t);
	return NULL;
}

static void
on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls,
    const char *extra_in, size_t extra_in_size, MHD_socket sock,
    struct MHD_UpgradeResponseHandle *urh)
{
	struct term *t = cls;
	pthread_attr_t attr;
	pthread_t th;

	(void)conn;
	(void)con_cls;
	t->ws = sock;
	t->urh = urh;
	t->opened_mono = gp_mono_ms();
	if (extra_in_size > 0 && (t->pre = malloc(extra_in_size)) != NULL) {
		memcpy(t->pre, extra_in, extra_in_size);
		t->npre = extra_in_size;
	}
	pthread_once(&terms_once, terms_init);
	pthread_mutex_lock(&terms_lock);
	if (terms_stopping) {
		pthread_mutex_unlock(&terms_lock);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		free(t->pre);
		free(t);
		return;
	}
	t->next = terms;
	terms = t;
	pthread_mutex_unlock(&terms_lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, term_main, t) != 0) {
		terms_leave(t);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		free(t->pre);
		free(t);
	}
	pthread_attr_destroy(&attr);
}

/* 1 when the request's Origin is this very host (the dashboard's). */
static int
same_origin(struct MHD_Connection *conn)
{
	const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    "Origin");
	const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_HOST);
	const char *p;

	if (origin == NULL || host == NULL || (p = strstr(origin, "://")) ==
	    NULL)
		return 0;
	return strcmp(p + 3, host) == 0;
}

/* GET /v1/jobs/{id}/terminal, Upgrade: websocket (no token: the ticket). */
static enum MHD_Result
route_socket(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	API_PATH_PARTS(url, p, n);
	const char *up = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_UPGRADE);
	const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    "Sec-WebSocket-Key");
	unsigned char digest[SHA_DIGEST_LENGTH];
	char accept[64], joined[128];
	struct MHD_Response *resp;
	enum MHD_Result rc;
	struct term *t;
	int64_t job_id;

	(void)req;
	if (n != 4 || !api_path_id(p[2], &job_id))
		return api_no_route(conn, url, method, 0);
	if (up == NULL || strcasecmp(up, "websocket") != 0 || key == NULL ||
	    strlen(key) > 64)
		return reply_error(conn, 400, "a WebSocket (Upgrade: "
		    "websocket)");
	if (!same_origin(conn))
		return reply_error(conn, 403, "only the dashboard's own page "
		    "opens a terminal");
	snprintf(joined, sizeof(joined), "%s%s", key, WS_GUID);
	SHA1((const unsigned char *)joined, strlen(joined), digest);
	sodium_bin2base64(accept, sizeof(accept), digest, sizeof(digest),
	    sodium_base64_VARIANT_ORIGINAL);
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return reply_error(conn, 503, "out of memory");
	t->rfd = -1;
	t->job_id = job_id;
	resp = MHD_create_response_for_upgrade(on_upgrade, t);
	if (resp == NULL) {
		free(t);
		return reply_error(conn, 503, "out of memory");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
	rc = MHD_queue_response(conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	return rc;
}

/*
 * POST /v1/jobs/{id}/terminal[?part=K]: a one-time ticket for the owner,
 * good for a terminal in that part (a gang's; 0 when absent) only.
 */
static enum MHD_Result
route_ticket(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	API_PATH_PARTS(url, p, n);
	char ticket[PROXY_TICKET_HEX];
	const struct job *job;
	int64_t job_id, part;
	int status = 0, nparts = 1;

	if (n != 4 || !api_path_id(p[2], &job_id))
		return api_no_route(conn, url, method, 0);
	if (api_query_int(conn, "part", 0, 0, GP_NODES_MAX - 1, &part) != 0)
		return reply_error(conn, 400, "part: 0 to %d",
		    GP_NODES_MAX - 1);
	pthread_rwlock_rdlock(&state.lock);
	job = state_job(job_id);
	if (job == NULL || strcmp(job->user, req->auth->name) != 0)
		status = 404;
	else if (job->state != JOB_RUNNING)
		status = 409;
	else if ((nparts = job->spec.nodes > 1 ? job->spec.nodes : 1) <=
	    part)
		status = 400;
	pthread_rwlock_unlock(&state.lock);
	if (status == 404)
		return reply_error(conn, 404, "no such job");
	if (status == 409)
		return reply_error(conn, 409, "job %lld is not running",
		    (long long)job_id);
	if (status == 400)
		return reply_error(conn, 400, "job %lld has %d part%s: part 0%s",
		    (long long)job_id, nparts, nparts > 1 ? "s" : "",
		    nparts > 1 ? " to its last" : " only");
	proxy_ticket_new(job_id, (int)part, req->auth->name, ticket);
	return reply_json(conn, 201, json_pack("{s:s}", "ticket", ticket));
}

#define TERMINAL_USERS (API_ROLE(GP_ROLE_USER) | API_ROLE(GP_ROLE_ADMIN))

const struct api_route terminal_routes[] = {
    {"/v1/jobs/{id}/terminal", API_POST, TERMINAL_USERS,
        "only the job's owner may open a terminal in it", 1024, 0,
        route_ticket, NULL},
    {"/v1/jobs/{id}/terminal", API_GET, 0, NULL, 0, API_PUBLIC,
        route_socket, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
