/*
 * relay_tls.c: a stream leg's TLS, held by the relay (relay_tls.h).
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gp.h"
#include "log.h"
#include "relay_tls.h"
#include "util.h"

#define HEAD_WRITE_MS 5000

struct relay_tls {
	struct MHD_Connection *conn;
	gnutls_session_t session;
	int fd;
	size_t sending;	/* a record_send that said AGAIN: its length */
};

static _Thread_local int quiet_close;

/* errno for a GnuTLS error: EAGAIN, or the leg is broken. */
static ssize_t
tls_errno(ssize_t n)
{
	errno = n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED ? EAGAIN :
	    ECONNRESET;
	return -1;
}

ssize_t
relay_tls_recv(struct relay_tls *t, void *buf, size_t cap)
{
	ssize_t n = gnutls_record_recv(t->session, buf, cap), more;
	int records = 1;

	if (n == GNUTLS_E_PREMATURE_TERMINATION)
		return 0; /* closed without close_notify: an end all the same */
	if (n < 0)
		return tls_errno(n);
	/* One record a call: take what else came, as read(2) would. */
	while (n > 0 && (size_t)n < cap && records++ < 4) {
		more = gnutls_record_recv(t->session, (char *)buf + n,
		    cap - (size_t)n);
		if (more <= 0)
			break; /* AGAIN, or the end: the next call sees it again */
		n += more;
	}
	return n;
}

/*
 * gnutls_record_send that said AGAIN holds its record: the next call
 * must repeat it (NULL, 0 does, and answers the first call's length), so
 * the bytes it took stay the caller's until then (relay.c leaves them in
 * its buffer and offers at least as many again).
 */
ssize_t
relay_tls_send(struct relay_tls *t, const void *buf, size_t len)
{
	ssize_t n;

	if (t->sending > 0) {
		if (len < t->sending) {
			errno = EINVAL;
			return -1;
		}
		n = gnutls_record_send(t->session, NULL, 0);
	} else
		n = gnutls_record_send(t->session, buf, len);
	if (n >= 0) {
		t->sending = 0;
		return n;
	}
	if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
		if (t->sending == 0)
			t->sending = len < 16384 ? len : 16384;
	}
	return tls_errno(n);
}

size_t
relay_tls_pending(struct relay_tls *t)
{
	return gnutls_record_check_pending(t->session);
}

void
relay_tls_shut(struct relay_tls *t)
{
	/* Non-blocking: the close_notify goes if the socket takes it. */
	(void)gnutls_bye(t->session, GNUTLS_SHUT_WR);
	shutdown(t->fd, SHUT_RDWR);
}

void
relay_tls_release(struct relay_tls *t)
{
	MHD_resume_connection(t->conn);
	free(t);
}

void
relay_tls_set_quiet_close(void)
{
	quiet_close = 1;
}

int
relay_tls_quiet_close(void)
{
	int q = quiet_close;

	quiet_close = 0;
	return q;
}

struct relay_tls *
relay_tls_take(struct MHD_Connection *conn, const char *head, size_t len,
    int *fd)
{
	const union MHD_ConnectionInfo *ti, *fi;
	struct relay_tls *t;
	int64_t deadline = gp_mono_ms() + HEAD_WRITE_MS;
	size_t sent = 0;
	int one = 1;

	*fd = -1;
	ti = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	fi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ti == NULL || ti->tls_session == NULL || fi == NULL)
		return NULL; /* plain HTTP: the Upgrade is fast */
	*fd = -2;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	t->conn = conn;
	t->session = (gnutls_session_t)ti->tls_session;
	t->fd = fi->connect_fd;
	/* Frames go as they come (keystrokes): no Nagle wait for an ACK. */
	(void)setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* The 101, at once: a fresh connection's buffers take it. */
	while (sent < len) {
		struct pollfd p = {.fd = t->fd, .events = POLLOUT};
		ssize_t n = relay_tls_send(t, head + sent, len - sent);

		if (n > 0) {
			sent += (size_t)n;
			continue;
		}
		if (n == 0 || errno != EAGAIN || gp_mono_ms() >= deadline) {
			gp_info("relay: stream answer not written why=%s",
			    n < 0 && errno != EAGAIN ? strerror(errno) :
			    "timed out");
			free(t);
			return NULL;
		}
		(void)poll(&p, 1, 100);
	}
	MHD_suspend_connection(conn);
	*fd = t->fd;
	return t;
}
