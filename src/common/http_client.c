/*
 * http_client.c: libcurl underneath gp_http_request().
 */
#include "http_client.h"
#include "token.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coord_urls.h"
#include "gp.h"
#include "log.h"
#include "util.h"
#include "stream.h"

struct gp_http_client {
	CURL *curl;
	struct gp_coord_urls urls; /* the coordinators; url[cur] in use */
	char *auth_header;
	char *ca_file;
	char pin[GP_TOKEN_PIN_HEX + 1];	/* the token's CA hash, or "" */
	const _Atomic int *follow;	/* see gp_http_client_follow */
	int follow_seen;		/* *follow when the request began */
	const _Atomic int *abort_on;	/* see gp_http_client_abort_on */
	/* With abort_on: the socket in use (-1: none), for gp_http_client_abort. */
	pthread_mutex_t sock_lock;
	curl_socket_t sock;
};

#define STREAM_BUFFER (512L << 10) /* curl's buffers for streamed bodies */

/* ---- a coordinator's own CA, known by its hash (the token's pin) ---- */

/* SHA-256 of a certificate's public key (DER SubjectPublicKeyInfo). */
static int
spki_hex(X509 *cert, char *hex)
{
	unsigned char *der = NULL, md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int n = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);

	if (n <= 0)
		return -1;
	if (EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != 32) {
		OPENSSL_free(der);
		return -1;
	}
	OPENSSL_free(der);
	for (unsigned int i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

int
gp_tls_pin_of_file(const char *pem_path, char *hex)
{
	FILE *f = fopen(pem_path, "r");
	X509 *cert;
	int ret;

	if (f == NULL)
		return GP_EIO;
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (cert == NULL)
		return GP_EIO;
	ret = spki_hex(cert, hex) == 0 ? 0 : GP_EIO;
	X509_free(cert);
	return ret;
}

/*
 * OpenSSL's verification of the server's chain, replaced: the CA is the
 * certificate of the chain whose public key has the pinned hash, and the
 * chain must verify up to it (signatures, dates) as to any trust anchor.
 * The host name is not checked: only the coordinator holds that CA's key.
 */
static int
verify_pinned(X509_STORE_CTX *ctx, void *arg)
{
	const char *pin = arg;
	STACK_OF(X509) *chain = X509_STORE_CTX_get0_untrusted(ctx);
	X509 *leaf = X509_STORE_CTX_get0_cert(ctx), *ca = NULL;
	X509_STORE *store = NULL;
	X509_STORE_CTX *v = NULL;
	char hex[2 * 32 + 1];
	int ok = 0, i;

	for (i = 0; chain != NULL && i < sk_X509_num(chain) && ca == NULL;
	    i++)
		if (spki_hex(sk_X509_value(chain, i), hex) == 0 &&
		    strcmp(hex, pin) == 0)
			ca = sk_X509_value(chain, i);
	if (ca != NULL && (store = X509_STORE_new()) != NULL &&
	    (v = X509_STORE_CTX_new()) != NULL &&
	    X509_STORE_add_cert(store, ca) == 1 &&
	    X509_STORE_CTX_init(v, store, leaf, chain) == 1)
		ok = X509_verify_cert(v) == 1;
	if (!ok)
		X509_STORE_CTX_set_error(ctx, ca == NULL ?
		    X509_V_ERR_CERT_UNTRUSTED : v != NULL ?
		    X509_STORE_CTX_get_error(v) : X509_V_ERR_UNSPECIFIED);
	X509_STORE_CTX_free(v);
	X509_STORE_free(store);
	return ok;
}

static CURLcode
pin_ssl_ctx(CURL *curl, void *ssl_ctx, void *arg)
{
	(void)curl;
	SSL_CTX_set_cert_verify_callback(ssl_ctx, verify_pinned, arg);
	return CURLE_OK;
}

/* With no CA file but a pinned one: verify the chain up to that CA. */
static void
trust_pinned_ca(struct gp_http_client *c)
{
	curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(c->curl, CURLOPT_SSL_CTX_FUNCTION, pin_ssl_ctx);
	curl_easy_setopt(c->curl, CURLOPT_SSL_CTX_DATA, c->pin);
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void
global_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void
gp_http_global_init(void)
{
	pthread_once(&global_once, global_init_once);
}

struct gp_http_client *
gp_http_client_new(const char *base_url, const char *token,
    const char *ca_file)
{
	struct gp_http_client *c;
	char err[256];

	gp_http_global_init();
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->sock = CURL_SOCKET_BAD;
	pthread_mutex_init(&c->sock_lock, NULL);
	c->curl = curl_easy_init();
	if (c->curl == NULL)
		goto fail;
	if (gp_coord_urls_parse(base_url, &c->urls, err, sizeof(err)) != 0) {
		gp_warn("%s", err);
		goto fail;
	}
	if (token != NULL) {
		size_t len = strlen(token) + 32;
		char bearer[256];

		/* A bad pin is no pin: the server's certificate then fails. */
		if (gp_token_split_pin(token, bearer, sizeof(bearer), c->pin,
		    sizeof(c->pin)) != 0) {
			gp_strlcpy(bearer, token, sizeof(bearer));
			c->pin[0] = '\0';
		}
		c->auth_header = malloc(len);
		if (c->auth_header == NULL)
			goto fail;
		snprintf(c->auth_header, len, "Authorization: Bearer %s",
		    bearer);
	}
	if (ca_file != NULL && (c->ca_file = strdup(ca_file)) == NULL)
		goto fail;
	return c;
fail:
	gp_http_client_free(c);
	return NULL;
}

int
gp_http_client_current(const struct gp_http_client *c)
{
	return c->urls.cur;
}

void
gp_http_client_follow(struct gp_http_client *c, const _Atomic int *index)
{
	c->follow = index;
}

void
gp_http_client_abort_on(struct gp_http_client *c, const _Atomic int *flag)
{
	c->abort_on = flag;
}

void
gp_http_client_abort(struct gp_http_client *c)
{
	pthread_mutex_lock(&c->sock_lock);
	if (c->sock != CURL_SOCKET_BAD)
		shutdown(c->sock, SHUT_RDWR);
	pthread_mutex_unlock(&c->sock_lock);
}

/*
 * libcurl's socket made and closed, for a client with abort_on: the
 * socket is known (under sock_lock) from its creation to its close, so
 * gp_http_client_abort never shuts a number reused by then.
 */
static curl_socket_t
open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct gp_http_client *c = arg;
	curl_socket_t fd;

	(void)purpose;
	fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	if (fd == CURL_SOCKET_BAD)
		return fd;
	pthread_mutex_lock(&c->sock_lock);
	c->sock = fd;
	if (atomic_load(c->abort_on))
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&c->sock_lock);
	return fd;
}

static int
close_socket(void *arg, curl_socket_t fd)
{
	struct gp_http_client *c = arg;

	pthread_mutex_lock(&c->sock_lock);
	if (c->sock == fd)
		c->sock = CURL_SOCKET_BAD;
	pthread_mutex_unlock(&c->sock_lock);
	return close(fd);
}

/*
 * libcurl's progress callback (called at least once a second, waiting
 * included): non-zero ends the transfer.
 */
static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
    curl_off_t ultotal, curl_off_t ulnow)
{
	struct gp_http_client *c = arg;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	if (c->abort_on != NULL && atomic_load(c->abort_on))
		return 1;
	return c->follow != NULL && atomic_load(c->follow) != c->follow_seen;
}

/*
 * A call about to be made by a client that follows another: from the
 * URL that one uses (request() then gives it up when that one moves).
 */
static void
arm_follow(struct gp_http_client *c)
{
	int i;

	if (c->follow == NULL)
		return;
	i = atomic_load(c->follow);
	if (i >= 0 && i < c->urls.n)
		c->urls.cur = i;
	c->follow_seen = i;
}

void
gp_http_client_free(struct gp_http_client *c)
{
	if (c == NULL)
		return;
	if (c->curl != NULL)
		curl_easy_cleanup(c->curl);
	if (c->auth_header != NULL) {
		/* The header holds a secret: clear it before freeing. */
		memset(c->auth_header, 0, strlen(c->auth_header));
		free(c->auth_header);
	}
	free(c->ca_file);
	pthread_mutex_destroy(&c->sock_lock);
	free(c);
}

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct gp_buf *buf = arg;

	if (gp_buf_append(buf, data, size * nmemb) != 0)
		return 0;
	return size * nmemb;
}

static size_t
on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct gp_http_response *resp = arg;
	size_t len = size * nmemb;
	char line[256];
	char *value;

	if (len >= sizeof(line))
		return len;
	memcpy(line, data, len);
	line[len] = '\0';
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n'))
		line[--len] = '\0';
	value = strchr(line, ':');
	if (value == NULL)
		return size * nmemb;
	*value++ = '\0';
	while (*value == ' ')
		value++;
	if (strcasecmp(line, "X-Gpupool-Offset") == 0)
		resp->log_offset = strtoll(value, NULL, 10);
	else if (strcasecmp(line, "X-Gpupool-State") == 0)
		gp_strlcpy(resp->job_state, value, sizeof(resp->job_state));
	else if (strcasecmp(line, "X-Gpupool-Done") == 0)
		resp->log_done = atoi(value);
	else if (strcasecmp(line, "X-Gpupool-Role") == 0)
		resp->not_leader = strcmp(value, "leader") != 0;
	else if (strcasecmp(line, "X-Gpupool-Leader") == 0)
		gp_strlcpy(resp->leader, value, sizeof(resp->leader));
	return size * nmemb;
}

/* Where a streamed request's answer goes (gp_http_request_stream). */
struct stream_sink {
	CURL *curl;
	const struct gp_http_stream *stream;
	struct gp_buf *other; /* the body of an answer other than 200 */
	int aborted;	      /* write_body said stop */
	int read_failed;      /* read_body said stop */
};

#define OTHER_BODY_MAX (64u << 10)

static size_t
on_stream_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct stream_sink *s = arg;
	long status = 0;
	size_t len = size * nmemb;

	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200 || s->stream->write_body == NULL) {
		/* An error's JSON: kept (bounded) for the error text. */
		if (s->other->len + len <= OTHER_BODY_MAX &&
		    gp_buf_append(s->other, data, len) != 0)
			return 0;
		return len;
	}
	if (s->stream->write_body(s->stream->arg, data, len) != 0) {
		s->aborted = 1;
		return 0;
	}
	return len;
}

static size_t
on_stream_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct stream_sink *s = arg;
	size_t n = s->stream->read_body(s->stream->arg, buf, size * nitems);

	if (n == (size_t)-1) {
		s->read_failed = 1;
		return CURL_READFUNC_ABORT;
	}
	return n;
}

/*
 * The body goes to *sink (see _request_into), or through *stream when it
 * is not NULL; resp->body is left NULL.
 */
static int
request(struct gp_http_client *c, const char *method, const char *path,
    const void *body, size_t body_len, const char *content_type,
    long timeout_ms, struct gp_http_response *resp, struct gp_buf *sink,
    const struct gp_http_stream *stream)
{
	struct stream_sink ss = {c->curl, stream, sink, 0, 0};
	struct curl_slist *headers = NULL;
	char url[4096], ctype[128];
	CURLcode rc;
	int ret = 0;

	memset(resp, 0, sizeof(*resp));
	resp->log_offset = -1;
	curl_easy_reset(c->curl);
	if (c->urls.fails == 0 && c->urls.hops == 0)
		arm_follow(c); /* a call's first try */
	if ((size_t)snprintf(url, sizeof(url), "%s%s", c->urls.url[c->urls.cur], path) >=
	    sizeof(url))
		return GP_EINVAL;
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS,
	    timeout_ms > 0 ? timeout_ms : 30000L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
	if (c->follow != NULL || c->abort_on != NULL) {
		curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION,
		    on_progress);
		curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	}
	if (c->abort_on != NULL) {
		curl_easy_setopt(c->curl, CURLOPT_OPENSOCKETFUNCTION,
		    open_socket);
		curl_easy_setopt(c->curl, CURLOPT_OPENSOCKETDATA, c);
		curl_easy_setopt(c->curl, CURLOPT_CLOSESOCKETFUNCTION,
		    close_socket);
		curl_easy_setopt(c->curl, CURLOPT_CLOSESOCKETDATA, c);
	}
	if (stream != NULL) {
		curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION,
		    on_stream_body);
		curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &ss);
		/* Fewer, larger pieces for large bodies. */
		curl_easy_setopt(c->curl, CURLOPT_BUFFERSIZE,
		    (long)STREAM_BUFFER);
	} else {
		curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, sink);
	}
	curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, resp);
	if (c->ca_file != NULL) {
		curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->ca_file);
		/* Trust a CA, not a leaf certificate given as one. */
		curl_easy_setopt(c->curl, CURLOPT_SSL_OPTIONS,
		    (long)CURLSSLOPT_NO_PARTIALCHAIN);
	} else if (c->pin[0] != '\0')
		trust_pinned_ca(c);
	if (c->auth_header != NULL)
		headers = curl_slist_append(headers, c->auth_header);
	/* No "Expect: 100-continue" round trip on larger bodies. */
	headers = curl_slist_append(headers, "Expect:");
	if (strcmp(method, "GET") != 0) {
		snprintf(ctype, sizeof(ctype), "Content-Type: %s",
		    content_type != NULL ? content_type : "application/json");
		headers = curl_slist_append(headers, ctype);
		curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
		if (stream != NULL && stream->read_body != NULL) {
			curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(c->curl, CURLOPT_READFUNCTION,
			    on_stream_read);
			curl_easy_setopt(c->curl, CURLOPT_READDATA, &ss);
			curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE,
			    (curl_off_t)stream->body_len);
			curl_easy_setopt(c->curl, CURLOPT_UPLOAD_BUFFERSIZE,
			    (long)STREAM_BUFFER);
		} else {
			curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS,
			    body != NULL ? body : "");
			curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)body_len);
		}
	}
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
	rc = curl_easy_perform(c->curl);
	curl_slist_free_all(headers);
	if (rc != CURLE_OK) {
		snprintf(resp->error, sizeof(resp->error), "%.160s: %.80s", url,
		    curl_easy_strerror(rc));
		ret = rc == CURLE_OPERATION_TIMEDOUT ? GP_ETIMEDOUT : GP_ECONN;
		if (ss.aborted)
			ret = GP_EPROTO;
		else if (ss.read_failed)
			ret = GP_EIO;
		if (rc == CURLE_COULDNT_CONNECT) {
			long oserr = 0;
			curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &oserr);
			resp->refused = oserr == ECONNREFUSED;
		}
		resp->no_connect = rc == CURLE_COULDNT_CONNECT ||
		    rc == CURLE_COULDNT_RESOLVE_HOST;
		return ret;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &resp->status);
	resp->not_leader = resp->status == 503 && resp->not_leader;
	if (sink->data == NULL && gp_buf_append(sink, "", 0) != 0)
		return GP_ENOMEM;
	return 0;
}

/*
 * After one try of a call: where the client goes next among several
 * coordinators (coord_urls.h), and whether the call tries again there
 * (after the pause, done here). One coordinator: never.
 */
static int
follow(struct gp_http_client *c, int ret, const struct gp_http_response *resp,
    int may_retry)
{
	enum gp_coord_try outcome;
	int again;

	if (c->urls.n < 2)
		return 0;
	if (ret == 0)
		outcome = resp->not_leader ? GP_COORD_NOT_LEADER :
					     GP_COORD_ANSWERED;
	else
		outcome = resp->no_connect ? GP_COORD_NO_CONNECT :
					     GP_COORD_LOST;
	again = gp_coord_urls_after(&c->urls, outcome,
	    ret == 0 ? resp->leader : NULL);
	if (!again || !may_retry)
		return 0;
	if (gp_coord_urls_pause_ms(&c->urls) > 0)
		usleep((useconds_t)gp_coord_urls_pause_ms(&c->urls) * 1000);
	return 1;
}

int
gp_http_request(struct gp_http_client *c, const char *method,
    const char *path, const void *body, size_t body_len,
    const char *content_type, long timeout_ms, struct gp_http_response *resp)
{
	struct gp_buf buf = {0};
	int ret;

	gp_coord_urls_begin(&c->urls);
	for (;;) {
		buf.len = 0;
		ret = request(c, method, path, body, body_len, content_type,
		    timeout_ms, resp, &buf, NULL);
		if (!follow(c, ret, resp, 1))
			break;
	}
	if (ret != 0) {
		gp_buf_free(&buf);
		return ret;
	}
	resp->body = buf.data;
	resp->body_len = buf.len;
	return 0;
}

int
gp_http_request_into(struct gp_http_client *c, const char *method,
    const char *path, const void *body, size_t body_len,
    const char *content_type, long timeout_ms, struct gp_http_response *resp,
    struct gp_buf *sink)
{
	int ret;

	gp_coord_urls_begin(&c->urls);
	for (;;) {
		sink->len = 0;
		ret = request(c, method, path, body, body_len, content_type,
		    timeout_ms, resp, sink, NULL);
		if (!follow(c, ret, resp, 1))
			return ret;
	}
}

/*
 * A streamed body cannot be sent twice here: only a try that sent
 * nothing (no connection) is made again; after a standby's answer the
 * next call goes to the leader.
 */
int
gp_http_request_stream(struct gp_http_client *c, const char *method,
    const char *path, const char *content_type, long timeout_ms,
    const struct gp_http_stream *stream, struct gp_http_response *resp)
{
	struct gp_buf other = {0};
	int ret;

	gp_coord_urls_begin(&c->urls);
	for (;;) {
		other.len = 0;
		ret = request(c, method, path, NULL, 0, content_type,
		    timeout_ms, resp, &other, stream);
		if (!follow(c, ret, resp, ret != 0 && resp->no_connect))
			break;
	}
	if (ret != 0 || other.len == 0) {
		gp_buf_free(&other);
		return ret;
	}
	resp->body = other.data;
	resp->body_len = other.len;
	return 0;
}

/* Headers every request carries; the caller frees the list. */
static struct curl_slist *
base_headers(struct gp_http_client *c)
{
	struct curl_slist *headers = NULL;

	if (c->auth_header != NULL)
		headers = curl_slist_append(headers, c->auth_header);
	return curl_slist_append(headers, "Expect:");
}

static void
base_setup(struct gp_http_client *c, const char *url,
    struct gp_http_response *resp)
{
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, resp);
	if (c->ca_file != NULL) {
		curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->ca_file);
		curl_easy_setopt(c->curl, CURLOPT_SSL_OPTIONS,
		    (long)CURLSSLOPT_NO_PARTIALCHAIN);
	} else if (c->pin[0] != '\0')
		trust_pinned_ca(c);
}

static int
finish(struct gp_http_client *c, CURLcode rc, const char *url,
    struct gp_http_response *resp)
{
	if (rc != CURLE_OK) {
		snprintf(resp->error, sizeof(resp->error), "%.160s: %.80s", url,
		    curl_easy_strerror(rc));
		if (rc == CURLE_COULDNT_CONNECT) {
			long oserr = 0;
			curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &oserr);
			resp->refused = oserr == ECONNREFUSED;
		}
		resp->no_connect = rc == CURLE_COULDNT_CONNECT ||
		    rc == CURLE_COULDNT_RESOLVE_HOST;
		return rc == CURLE_OPERATION_TIMEDOUT ? GP_ETIMEDOUT : GP_ECONN;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &resp->status);
	resp->not_leader = resp->status == 503 && resp->not_leader;
	return 0;
}

/*
 * A streamed call's one try (gp_http_upload, gp_http_download: what it
 * streamed, a body read or an answer written, cannot be streamed again,
 * so it is never retried here): _begin
 * empties resp, makes url (of urllen bytes) on the current coordinator
 * and sets c->curl up (base_setup); 0 or GP_EINVAL when the url does not
 * fit. The caller adds its options and headers; _end performs it, frees
 * headers, returns finish's code, starts the next call at the first
 * coordinator again and tells follow the outcome.
 */
static int
streamed_begin(struct gp_http_client *c, const char *path, char *url,
    size_t urllen, struct gp_http_response *resp)
{
	memset(resp, 0, sizeof(*resp));
	resp->log_offset = -1;
	if ((size_t)snprintf(url, urllen, "%s%s", c->urls.url[c->urls.cur],
	    path) >= urllen)
		return GP_EINVAL;
	base_setup(c, url, resp);
	return 0;
}

static int
streamed_end(struct gp_http_client *c, struct curl_slist *headers,
    const char *url, struct gp_http_response *resp)
{
	CURLcode rc = curl_easy_perform(c->curl);
	int ret;

	curl_slist_free_all(headers);
	ret = finish(c, rc, url, resp);
	gp_coord_urls_begin(&c->urls);
	follow(c, ret, resp, 0);
	return ret;
}

struct upload_src {
	long (*read)(void *arg, char *buf, size_t len);
	void *arg;
	int failed;
};

static size_t
on_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct upload_src *src = arg;
	long n = src->read(src->arg, buf, size * nitems);

	if (n < 0) {
		src->failed = 1;
		return CURL_READFUNC_ABORT;
	}
	return (size_t)n;
}

int
gp_http_upload(struct gp_http_client *c, const char *method, const char *path,
    const char *content_type, int64_t body_len,
    long (*read)(void *arg, char *buf, size_t len), void *arg,
    struct gp_http_response *resp)
{
	struct curl_slist *headers;
	struct upload_src src = {read, arg, 0};
	struct gp_buf buf = {0};
	char url[4096], ctype[128];
	int ret;

	if ((ret = streamed_begin(c, path, url, sizeof(url), resp)) != 0)
		return ret;
	headers = base_headers(c);
	snprintf(ctype, sizeof(ctype), "Content-Type: %s",
	    content_type != NULL ? content_type : "application/octet-stream");
	headers = curl_slist_append(headers, ctype);
	curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE,
	    (curl_off_t)body_len);
	curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(c->curl, CURLOPT_READDATA, &src);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &buf);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
	ret = streamed_end(c, headers, url, resp);
	if (ret != 0 && src.failed) {
		snprintf(resp->error, sizeof(resp->error), "reading the data "
		    "to send failed");
		ret = GP_EIO;
	}
	if (ret != 0) {
		gp_buf_free(&buf);
		return ret;
	}
	if (buf.data == NULL && gp_buf_append(&buf, "", 0) != 0)
		return GP_ENOMEM;
	resp->body = buf.data;
	resp->body_len = buf.len;
	return 0;
}

struct download_sink {
	CURL *curl;
	int (*write)(void *arg, const char *data, size_t len);
	void *arg;
	int64_t max, got;
	int toolong, failed;
	struct gp_buf err;
};

static size_t
on_download(char *data, size_t size, size_t nmemb, void *arg)
{
	struct download_sink *d = arg;
	size_t len = size * nmemb;
	long status = 0;

	curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		if (d->err.len < 65536 && gp_buf_append(&d->err, data,
		    len < 65536 - d->err.len ? len : 65536 - d->err.len) != 0)
			return 0;
		return len;
	}
	if (d->got + (int64_t)len > d->max) {
		d->toolong = 1;
		return 0;
	}
	d->got += (int64_t)len;
	if (d->write(d->arg, data, len) != 0) {
		d->failed = 1;
		return 0;
	}
	return len;
}

int
gp_http_download(struct gp_http_client *c, const char *path,
    int64_t max_bytes, int (*write)(void *arg, const char *data, size_t len),
    void *arg, struct gp_http_response *resp)
{
	struct download_sink d;
	struct curl_slist *headers;
	char url[4096];
	int ret;

	memset(&d, 0, sizeof(d));
	if ((ret = streamed_begin(c, path, url, sizeof(url), resp)) != 0)
		return ret;
	d.curl = c->curl;
	d.write = write;
	d.arg = arg;
	d.max = max_bytes;
	headers = base_headers(c);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_download);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &d);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
	ret = streamed_end(c, headers, url, resp);
	if (ret != 0 && d.toolong) {
		snprintf(resp->error, sizeof(resp->error), "%.160s: the answer "
		    "is longer than %lld bytes", url, (long long)max_bytes);
		ret = GP_ETOOBIG;
	} else if (ret != 0 && d.failed) {
		snprintf(resp->error, sizeof(resp->error), "%.160s: cannot "
		    "store the data", url);
		ret = GP_EIO;
	}
	if (ret != 0) {
		gp_buf_free(&d.err);
		return ret;
	}
	if (d.err.data == NULL && gp_buf_append(&d.err, "", 0) != 0)
		return GP_ENOMEM;
	resp->body = d.err.data;
	resp->body_len = d.err.len;
	return 0;
}

/* ---- connections taken over by an Upgrade (common/stream.h) ---- */

struct gp_http_upgraded {
	CURL *curl;
	int fd;
	/* Bytes that came after the 101 answer's head, handed out first. */
	char *extra;
	size_t extra_len, extra_at;
};

/* "host:port" of base_url into out. */
static void
url_host(const char *base_url, char *out, size_t len)
{
	const char *p = strstr(base_url, "://");
	size_t n;

	p = p != NULL ? p + 3 : base_url;
	n = strcspn(p, "/");
	if (n >= len)
		n = len - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* Waits up to ms for fd to be readable (want_write 0) or writable. */
static int
wait_fd(int fd, int want_write, long ms)
{
	struct pollfd p = {.fd = fd, .events = want_write ? POLLOUT : POLLIN};

	return poll(&p, 1, (int)ms) > 0 ? 0 : GP_ETIMEDOUT;
}

int
gp_http_upgrade(struct gp_http_client *c, const char *path,
    const char *extra_header, long timeout_ms, struct gp_http_upgraded **out,
    struct gp_http_response *resp)
{
	struct gp_http_upgraded *u;
	char url[4096], host[256], *req = NULL, buf[16384];
	size_t have = 0, sent = 0, reqlen, n;
	int64_t deadline, content_length;
	curl_socket_t sock;
	CURLcode rc;
	int status = 0, head, ret = GP_ECONN;

	memset(resp, 0, sizeof(*resp));
	resp->log_offset = -1;
	*out = NULL;
	if (timeout_ms <= 0)
		timeout_ms = 30000;
	deadline = gp_mono_ms() + timeout_ms;
	if ((size_t)snprintf(url, sizeof(url), "%s%s", c->urls.url[c->urls.cur], path) >=
	    sizeof(url))
		return GP_EINVAL;
	u = calloc(1, sizeof(*u));
	if (u == NULL || (u->curl = curl_easy_init()) == NULL) {
		free(u);
		return GP_ENOMEM;
	}
	curl_easy_setopt(u->curl, CURLOPT_URL, url);
	curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(u->curl, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT_MS,
	    timeout_ms < 5000 ? timeout_ms : 5000L);
	curl_easy_setopt(u->curl, CURLOPT_TCP_NODELAY, 1L);
	if (c->ca_file != NULL) {
		curl_easy_setopt(u->curl, CURLOPT_CAINFO, c->ca_file);
		curl_easy_setopt(u->curl, CURLOPT_SSL_OPTIONS,
		    (long)CURLSSLOPT_NO_PARTIALCHAIN);
	} else if (c->pin[0] != '\0') {
		curl_easy_setopt(u->curl, CURLOPT_SSL_VERIFYPEER, 1L);
		curl_easy_setopt(u->curl, CURLOPT_SSL_VERIFYHOST, 0L);
		curl_easy_setopt(u->curl, CURLOPT_SSL_CTX_FUNCTION,
		    pin_ssl_ctx);
		curl_easy_setopt(u->curl, CURLOPT_SSL_CTX_DATA, c->pin);
	}
	rc = curl_easy_perform(u->curl);
	if (rc != CURLE_OK) {
		snprintf(resp->error, sizeof(resp->error), "%s",
		    curl_easy_strerror(rc));
		resp->refused = rc == CURLE_COULDNT_CONNECT;
		goto fail;
	}
	if (curl_easy_getinfo(u->curl, CURLINFO_ACTIVESOCKET, &sock) !=
	    CURLE_OK || sock == CURL_SOCKET_BAD)
		goto fail;
	u->fd = (int)sock;
	url_host(c->urls.url[c->urls.cur], host, sizeof(host));
	if (extra_header == NULL)
		extra_header = "";
	reqlen = strlen(path) + strlen(host) + 256 + strlen(extra_header) +
	    (c->auth_header != NULL ? strlen(c->auth_header) : 0);
	if ((req = malloc(reqlen)) == NULL) {
		ret = GP_ENOMEM;
		goto fail;
	}
	reqlen = (size_t)snprintf(req, reqlen,
	    "GET %s HTTP/1.1\r\nHost: %s\r\n%s%s%s%sConnection: Upgrade\r\n"
	    "Upgrade: %s\r\n\r\n", path, host,
	    c->auth_header != NULL ? c->auth_header : "",
	    c->auth_header != NULL ? "\r\n" : "", extra_header,
	    extra_header[0] != '\0' ? "\r\n" : "", GP_STREAM_PROTOCOL);
	while (sent < reqlen) {
		rc = curl_easy_send(u->curl, req + sent, reqlen - sent, &n);
		if (rc == CURLE_AGAIN) {
			if (wait_fd(u->fd, 1, deadline - gp_mono_ms()) != 0) {
				ret = GP_ETIMEDOUT;
				goto fail;
			}
			continue;
		}
		if (rc != CURLE_OK)
			goto fail;
		sent += n;
	}
	/* The head, then (not 101) the error's body. */
	for (;;) {
		rc = curl_easy_recv(u->curl, buf + have, sizeof(buf) - 1 - have,
		    &n);
		if (rc == CURLE_AGAIN) {
			if (gp_mono_ms() >= deadline ||
			    wait_fd(u->fd, 0, deadline - gp_mono_ms()) != 0) {
				ret = GP_ETIMEDOUT;
				goto fail;
			}
			continue;
		}
		if (rc != CURLE_OK || n == 0) {
			ret = GP_EPROTO;
			goto fail;
		}
		have += n;
		head = gp_upgrade_answer_parse(buf, have, &status,
		    &content_length);
		if (head < 0) {
			ret = GP_EPROTO;
			goto fail;
		}
		if (head == 0) {
			if (have == sizeof(buf) - 1) {
				ret = GP_EPROTO;
				goto fail;
			}
			continue;
		}
		if (status == 101)
			break;
		if (content_length >= 0 && have - (size_t)head <
		    (size_t)content_length && have < sizeof(buf) - 1)
			continue;
		resp->status = status;
		resp->body_len = have - (size_t)head;
		resp->body = malloc(resp->body_len + 1);
		if (resp->body != NULL) {
			memcpy(resp->body, buf + head, resp->body_len);
			resp->body[resp->body_len] = '\0';
		}
		ret = GP_EPERM;
		goto fail;
	}
	resp->status = 101;
	if (have > (size_t)head) {
		u->extra_len = have - (size_t)head;
		if ((u->extra = malloc(u->extra_len)) == NULL) {
			ret = GP_ENOMEM;
			goto fail;
		}
		memcpy(u->extra, buf + head, u->extra_len);
	}
	free(req);
	*out = u;
	return 0;
fail:
	if (req != NULL) {
		memset(req, 0, reqlen);
		free(req);
	}
	gp_http_upgraded_free(u);
	return ret;
}

int
gp_http_upgraded_fd(const struct gp_http_upgraded *u)
{
	return u->fd;
}

int
gp_http_upgraded_pending(const struct gp_http_upgraded *u)
{
	struct curl_tlssessioninfo *info = NULL;

	if (u->extra_at < u->extra_len)
		return 1;
	/*
	 * TLS: what OpenSSL decrypted with a record it read for an earlier,
	 * smaller recv (the socket no longer shows it). The coordinator's
	 * relay sends a stream's frames in records of up to 16 KiB.
	 */
	if (curl_easy_getinfo(u->curl, CURLINFO_TLS_SSL_PTR, &info) ==
	    CURLE_OK && info != NULL &&
	    info->backend == CURLSSLBACKEND_OPENSSL && info->internals != NULL)
		return SSL_pending((const SSL *)info->internals) > 0;
	return 0;
}

long
gp_http_upgraded_recv(struct gp_http_upgraded *u, void *buf, size_t len)
{
	CURLcode rc;
	size_t n;

	if (u->extra_at < u->extra_len) {
		n = u->extra_len - u->extra_at;
		if (n > len)
			n = len;
		memcpy(buf, u->extra + u->extra_at, n);
		u->extra_at += n;
		return (long)n;
	}
	rc = curl_easy_recv(u->curl, buf, len, &n);
	if (rc == CURLE_AGAIN)
		return GP_EAGAIN;
	if (rc != CURLE_OK)
		return GP_EIO;
	return (long)n;
}

long
gp_http_upgraded_send(struct gp_http_upgraded *u, const void *buf,
    size_t len)
{
	CURLcode rc;
	size_t n = 0;

	rc = curl_easy_send(u->curl, buf, len, &n);
	if (rc == CURLE_AGAIN)
		return GP_EAGAIN;
	if (rc != CURLE_OK)
		return GP_EIO;
	return (long)n;
}

void
gp_http_upgraded_free(struct gp_http_upgraded *u)
{
	if (u == NULL)
		return;
	if (u->curl != NULL)
		curl_easy_cleanup(u->curl);
	free(u->extra);
	free(u);
}
