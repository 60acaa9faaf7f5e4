/*
 * relay_tls.h: a stream leg's TLS, held by the relay itself (relay.c;
 * docs/interactive.md, "TLS on the stream legs").
 *
 * libmicrohttpd 0.9.75 forwards an upgraded TLS connection through a
 * socket pair with buffers cut from what its connection pool has left,
 * which is 4 bytes each way (bench/RESULTS.md, inter7): about 1 MB/s.
 * So on an HTTPS coordinator the relay does not ask for the Upgrade: it
 * takes the connection's GnuTLS session (libmicrohttpd's own, after its
 * handshake and the request's authentication on the same port and route
 * table), answers 101 itself, suspends the connection in libmicrohttpd
 * and moves the stream's bytes with gnutls_record_recv/send on the
 * socket in its own thread, 16 KiB records. At the stream's end it
 * shuts the socket and resumes the connection, which libmicrohttpd then
 * closes (the route answers MHD_NO to the call that follows).
 */
#ifndef GP_COORD_RELAY_TLS_H
#define GP_COORD_RELAY_TLS_H

#include <stddef.h>
#include <sys/types.h>

struct MHD_Connection;
struct relay_tls;

/*
 * Takes conn's TLS for a stream leg: writes head (the 101 answer) on it,
 * suspends conn. Call from the route's handler. Returns the leg's TLS and
 * its socket in *fd (non-blocking); NULL with *fd = -1 when conn is plain
 * HTTP (use the Upgrade); NULL with *fd = -2 on an error (the connection
 * is lost: answer MHD_NO).
 */
struct relay_tls *relay_tls_take(struct MHD_Connection *conn,
    const char *head, size_t len, int *fd);
/*
 * As read(2) / send(2) on the leg: > 0 bytes, 0 at the end, -1 with errno
 * EAGAIN (try when epoll says so) or another errno (the leg is broken).
 */
ssize_t relay_tls_recv(struct relay_tls *t, void *buf, size_t cap);
ssize_t relay_tls_send(struct relay_tls *t, const void *buf, size_t len);
/* Bytes already decrypted and waiting (epoll does not see them). */
size_t relay_tls_pending(struct relay_tls *t);
/* Ends the leg's TLS (close_notify, best effort) and shuts its socket. */
void relay_tls_shut(struct relay_tls *t);
/*
 * Gives the connection back to libmicrohttpd (resumed: it closes it) and
 * frees t. Call without the relay's lock (MHD takes its own).
 */
void relay_tls_release(struct relay_tls *t);
/*
 * The route's call after the resume answers MHD_NO (close), which
 * libmicrohttpd logs as an application error: the route calls
 * relay_tls_set_quiet_close first, and the coordinator's logger asks
 * relay_tls_quiet_close (1 once, in that thread) and logs the message
 * at debug level only.
 */
void relay_tls_set_quiet_close(void);
int relay_tls_quiet_close(void);

#endif
