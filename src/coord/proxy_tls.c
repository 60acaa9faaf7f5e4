/*
 * proxy_tls.c: the job port proxy's connections, plain or TLS (proxy.h;
 * docs/interactive.md, "TLS on the proxy"). When the coordinator has TLS
 * the proxy has it too: which certificate (the operator's for the proxy,
 * one the coordinator's own CA signs for "*.DOMAIN", or the API's own
 * when it names the job hosts), the OpenSSL context (TLS 1.2 or newer,
 * no renegotiation, no ALPN: the job's server speaks HTTP/1.1), and one
 * I/O interface over a non-blocking socket for proxy.c, whose connection
 * thread moves both directions itself (so SSL_read and SSL_write are
 * never called at once on one connection).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "gp.h"
#include "log.h"
#include "model.h"
#include "proxy.h"
#include "util.h"

int
proxy_tls_choose(struct proxy_config *pc, const struct coord_config *cfg,
    int own_ca)
{
	if (pc->tls_cert[0] != '\0')
		return 0; /* --proxy-tls-cert: the operator's */
	if (cfg->tls_cert[0] == '\0')
		return 0; /* the coordinator is plain HTTP: so is the proxy */
	if (own_ca) {
		char cert[PATH_MAX], key[PATH_MAX];
		if (tls_auto_proxy_cert(cfg, pc->domain, cert, key) != 0)
			return GP_EIO;
		gp_strlcpy(pc->tls_cert, cert, sizeof(pc->tls_cert));
		gp_strlcpy(pc->tls_key, key, sizeof(pc->tls_key));
		return 0;
	}
	/* The API's certificate: proxy_tls_new checks that it fits. */
	gp_strlcpy(pc->tls_cert, cfg->tls_cert, sizeof(pc->tls_cert));
	gp_strlcpy(pc->tls_key, cfg->tls_key, sizeof(pc->tls_key));
	return 0;
}

/* OpenSSL's first queued error, as text, into why (and the queue cleared). */
static void
ssl_why(char *why, size_t len, const char *what)
{
	unsigned long e = ERR_get_error();
	char text[256];

	ERR_error_string_n(e, text, sizeof(text));
	snprintf(why, len, "%s: %s", what, e != 0 ? text : "unknown error");
	ERR_clear_error();
}

SSL_CTX *
proxy_tls_new(const struct proxy_config *pc, char *why, size_t whylen)
{
	char host[300];
	SSL_CTX *ctx;
	X509 *leaf;

	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		ssl_why(why, whylen, "SSL_CTX_new");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (SSL_CTX_use_certificate_chain_file(ctx, pc->tls_cert) != 1) {
		ssl_why(why, whylen, pc->tls_cert);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, pc->tls_key, SSL_FILETYPE_PEM) !=
	    1 || SSL_CTX_check_private_key(ctx) != 1) {
		ssl_why(why, whylen, pc->tls_key);
		goto fail;
	}
	/*
	 * Every job's port has a host name of its own under the domain: the
	 * certificate must name them all (a wildcard "*.DOMAIN", which
	 * browsers and OpenSSL accept only under two labels or more).
	 */
	snprintf(host, sizeof(host), "j1-p1.%s", pc->domain);
	leaf = SSL_CTX_get0_certificate(ctx);
	if (leaf == NULL || X509_check_host(leaf, host, 0, 0, NULL) != 1) {
		snprintf(why, whylen, "the certificate %s does not name the "
		    "job hosts *.%s (give --proxy-tls-cert and "
		    "--proxy-tls-key for *.%s%s)", pc->tls_cert, pc->domain,
		    pc->domain, strchr(pc->domain, '.') == NULL ? ", and a "
		    "--proxy-domain of two labels or more, such as "
		    "jobs.localhost: no client accepts *.localhost" : "");
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

void
proxy_tls_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

/* Waits (poll) for events on c's socket until deadline; 0 or -1. */
static int
wait_for(const struct proxy_conn *c, short events, int64_t deadline)
{
	struct pollfd pfd = {.fd = c->fd, .events = events};
	int64_t left;
	int n;

	for (;;) {
		left = deadline - gp_mono_ms();
		if (left <= 0)
			return -1;
		n = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* What the last SSL call needs: POLLIN, POLLOUT, or -1 (the end). */
static int
ssl_wants(SSL *ssl, int ret)
{
	switch (SSL_get_error(ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		return POLLIN;
	case SSL_ERROR_WANT_WRITE:
		return POLLOUT;
	default:
		ERR_clear_error();
		return -1;
	}
}

int
proxy_conn_start(struct proxy_conn *c, SSL_CTX *ctx, int fd,
    int64_t deadline)
{
	int ret, want;

	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->want = POLLIN;
	if (ctx == NULL)
		return 0;
	if ((c->ssl = SSL_new(ctx)) == NULL || SSL_set_fd(c->ssl, fd) != 1) {
		ERR_clear_error();
		return -1;
	}
	while ((ret = SSL_accept(c->ssl)) != 1) {
		if ((want = ssl_wants(c->ssl, ret)) < 0 ||
		    wait_for(c, (short)want, deadline) != 0)
			return -1;
	}
	return 0;
}

ssize_t
proxy_conn_read(struct proxy_conn *c, void *buf, size_t cap)
{
	ssize_t n;
	int ret, want;

	c->want = POLLIN;
	if (c->ssl == NULL) {
		n = read(c->fd, buf, cap);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return PROXY_AGAIN;
		return n < 0 ? -1 : n;
	}
	ret = SSL_read(c->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
	if (ret > 0)
		return ret;
	if (SSL_get_error(c->ssl, ret) == SSL_ERROR_ZERO_RETURN)
		return 0; /* close_notify */
	if ((want = ssl_wants(c->ssl, ret)) < 0)
		return -1; /* an error, or the peer gone without close_notify */
	c->want = (short)want;
	return PROXY_AGAIN;
}

int
proxy_conn_read_wait(struct proxy_conn *c, void *buf, size_t cap,
    int64_t deadline)
{
	ssize_t n;

	while ((n = proxy_conn_read(c, buf, cap)) == PROXY_AGAIN)
		if (wait_for(c, c->want, deadline) != 0)
			return -1;
	return n > 0 ? (int)n : -1;
}

int
proxy_conn_pending(const struct proxy_conn *c)
{
	return c->ssl != NULL && SSL_has_pending(c->ssl);
}

int
proxy_conn_write_all(struct proxy_conn *c, const void *data, size_t len)
{
	const char *p = data;
	int64_t deadline = gp_mono_ms() + PROXY_WRITE_TIMEOUT_MS;
	ssize_t n;
	int want;

	while (len > 0) {
		if (c->ssl == NULL) {
			n = write(c->fd, p, len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN) {
				if (wait_for(c, POLLOUT, deadline) != 0)
					return -1;
				continue;
			}
		} else {
			n = SSL_write(c->ssl, p, len > INT_MAX ? INT_MAX
			    : (int)len);
			if (n <= 0) {
				if ((want = ssl_wants(c->ssl, (int)n)) < 0 ||
				    wait_for(c, (short)want, deadline) != 0)
					return -1;
				continue;
			}
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
		deadline = gp_mono_ms() + PROXY_WRITE_TIMEOUT_MS;
	}
	return 0;
}

void
proxy_conn_close(struct proxy_conn *c)
{
	if (c->ssl != NULL) {
		/* close_notify, once, without waiting for the peer's. */
		if (SSL_is_init_finished(c->ssl))
			SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
		ERR_clear_error();
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void
proxy_conn_shutdown_write(struct proxy_conn *c)
{
	/*
	 * The job's side closed its direction. Over TLS a close_notify says
	 * so (TLS 1.3 keeps the other direction open after it; a TLS 1.2
	 * peer closes); plain TCP has its half-close.
	 */
	if (c->ssl != NULL) {
		if (SSL_is_init_finished(c->ssl))
			SSL_shutdown(c->ssl);
		ERR_clear_error();
	} else {
		shutdown(c->fd, SHUT_WR);
	}
}
