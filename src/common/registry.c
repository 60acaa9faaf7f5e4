/*
 * registry.c: the distribution API client of registry.h and the
 * WWW-Authenticate parser. One curl handle per client; the Bearer token a
 * realm hands out is kept for the client's life and fetched again when
 * the registry answers 401 to it.
 */
#include "registry.h"

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "http_client.h"

#define TOKEN_BODY_MAX (1 << 20)
#define ERROR_BODY_MAX 4096

static const char accept_manifests[] =
    "Accept: " GP_OCI_MT_MANIFEST ", " GP_OCI_MT_INDEX
    ", " GP_DOCKER_MT_MANIFEST ", " GP_DOCKER_MT_LIST;

/* ---- WWW-Authenticate ---- */

static int
is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int
is_token68(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("-._~+/", c) != NULL);
}

static const char *
skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Reads a token into out (NUL-terminated, cut at outlen). */
static const char *
read_token(const char *p, char *out, size_t outlen, size_t *len)
{
	size_t n = 0;

	while (is_tchar(*p)) {
		if (n + 1 < outlen)
			out[n] = *p;
		n++;
		p++;
	}
	if (outlen > 0)
		out[n < outlen ? n : outlen - 1] = '\0';
	*len = n;
	return p;
}

/* A quoted-string (p at the opening quote). NULL when unterminated. */
static const char *
read_quoted(const char *p, char *out, size_t outlen, size_t *len)
{
	size_t n = 0;

	p++;
	while (*p != '"') {
		if (*p == '\0')
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == '\0')
				return NULL;
		}
		if ((unsigned char)*p < 0x20 && *p != '\t')
			return NULL;
		if (n + 1 < outlen)
			out[n] = *p;
		n++;
		p++;
	}
	if (outlen > 0)
		out[n < outlen ? n : outlen - 1] = '\0';
	*len = n;
	return p + 1;
}

int
gp_auth_challenge_parse(const char *header, struct gp_auth_challenge *c)
{
	struct gp_auth_challenge cur, basic;
	char scheme[32], name[64], value[1024];
	const char *p = header, *q, *w, *e, *r;
	size_t n, vn;
	int have_basic = 0, toolong;

	memset(c, 0, sizeof(*c));
	memset(&basic, 0, sizeof(basic));
	if (header == NULL || strlen(header) > 8192)
		return GP_EINVAL;
	p = skip_ows(p);
	while (*p != '\0') {
		/* A challenge: scheme, then params until the next scheme. */
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		p = read_token(p, scheme, sizeof(scheme), &n);
		if (n == 0 || n >= sizeof(scheme))
			return GP_EINVAL;
		memset(&cur, 0, sizeof(cur));
		if (strcasecmp(scheme, "Bearer") == 0)
			cur.scheme = GP_AUTH_BEARER;
		else if (strcasecmp(scheme, "Basic") == 0)
			cur.scheme = GP_AUTH_BASIC;
		for (;;) {
			p = skip_ows(p);
			if (*p == ',') {
				p++;
				continue;
			}
			if (*p == '\0')
				break;
			w = p;
			while (is_token68(*w))
				w++;
			if (w == p)
				return GP_EINVAL;
			q = skip_ows(w);
			if (*q != '=') {
				/* A token68 ("Basic dXNlcg"), or the next
				 * scheme. */
				if (memchr(p, '/', (size_t)(w - p)) != NULL ||
				    memchr(p, '+', (size_t)(w - p)) != NULL) {
					p = w;
					continue;
				}
				break;
			}
			e = q;
			while (*e == '=')
				e++;
			r = skip_ows(e);
			if (e - q >= 2 || *r == '\0' || *r == ',') {
				/* A token68 with its padding. */
				p = r;
				continue;
			}
			q = read_token(p, name, sizeof(name), &n);
			if (n == 0 || q != w || n >= sizeof(name))
				return GP_EINVAL;
			q = r;
			if (*q == '"')
				q = read_quoted(q, value, sizeof(value), &vn);
			else
				q = read_token(q, value, sizeof(value), &vn);
			if (q == NULL || vn == 0)
				return GP_EINVAL;
			toolong = vn >= sizeof(value);
			p = q;
			if (strcasecmp(name, "realm") == 0) {
				if (toolong || vn >= sizeof(cur.realm))
					return GP_EINVAL;
				gp_strlcpy(cur.realm, value, sizeof(cur.realm));
			} else if (strcasecmp(name, "service") == 0) {
				if (toolong || vn >= sizeof(cur.service))
					return GP_EINVAL;
				gp_strlcpy(cur.service, value,
				    sizeof(cur.service));
			} else if (strcasecmp(name, "scope") == 0) {
				if (toolong || vn >= sizeof(cur.scope))
					return GP_EINVAL;
				gp_strlcpy(cur.scope, value, sizeof(cur.scope));
			} else if (strcasecmp(name, "error") == 0) {
				gp_strlcpy(cur.error, value, sizeof(cur.error));
			}
			/* After a parameter: a comma, the end, or garbage. */
			q = skip_ows(p);
			if (*q != '\0' && *q != ',')
				return GP_EINVAL;
		}
		if (cur.scheme == GP_AUTH_BEARER) {
			if (cur.realm[0] == '\0')
				return GP_EINVAL;
			*c = cur;
			return 0;
		}
		if (cur.scheme == GP_AUTH_BASIC && !have_basic) {
			basic = cur;
			have_basic = 1;
		}
	}
	if (have_basic) {
		*c = basic;
		return 0;
	}
	return GP_EINVAL;
}

/* ---- the client ---- */

struct gp_registry {
	CURL *curl;
	struct gp_image_ref ref;
	struct gp_registry_opts opts;
	char *username, *password, *ca_file, *user_agent;
	char base[600]; /* "https://host/v2/repo" */
	char *bearer;   /* the token for this repository, or NULL */
	int basic;      /* the registry wants Basic credentials */
};

struct gp_registry *
gp_registry_new(const struct gp_image_ref *ref,
    const struct gp_registry_opts *opts)
{
	struct gp_registry *r;

	gp_http_global_init();
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->ref = *ref;
	r->opts = *opts;
	if ((r->curl = curl_easy_init()) == NULL ||
	    (opts->username != NULL &&
	        (r->username = strdup(opts->username)) == NULL) ||
	    (opts->password != NULL &&
	        (r->password = strdup(opts->password)) == NULL) ||
	    (opts->ca_file != NULL &&
	        (r->ca_file = strdup(opts->ca_file)) == NULL) ||
	    (opts->user_agent != NULL &&
	        (r->user_agent = strdup(opts->user_agent)) == NULL)) {
		gp_registry_free(r);
		return NULL;
	}
	snprintf(r->base, sizeof(r->base), "%s://%s/v2/%s",
	    opts->plain_http ? "http" : "https", ref->registry,
	    ref->repository);
	return r;
}

static void
wipe_free(char *s)
{
	if (s != NULL) {
		sodium_memzero(s, strlen(s));
		free(s);
	}
}

void
gp_registry_free(struct gp_registry *r)
{
	if (r == NULL)
		return;
	if (r->curl != NULL)
		curl_easy_cleanup(r->curl);
	wipe_free(r->username);
	wipe_free(r->password);
	wipe_free(r->bearer);
	free(r->ca_file);
	free(r->user_agent);
	free(r);
}

/* One transfer's state. */
struct xfer {
	CURL *curl;
	/* Headers of the last response (reset at each status line). */
	char content_type[128];
	char digest[GP_OCI_DIGEST_SIZE + 8];
	char challenge[2048];
	/* The body: into buf (capped at max) or to sink. */
	struct gp_buf *buf;
	int (*sink)(void *arg, const char *data, size_t len);
	void *arg;
	int64_t max; /* more than this many body bytes: abort */
	int64_t got;
	int toolong; /* aborted: the body went past max */
	int sink_failed;
	struct gp_buf errbody; /* a non-2xx answer's body, capped */
	crypto_hash_sha256_state hash;
};

static size_t
on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nmemb, n;
	char line[2100], *value;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		/* A new response (a redirect's, or after 100 Continue). */
		x->content_type[0] = x->digest[0] = x->challenge[0] = '\0';
		return len;
	}
	if (len >= sizeof(line))
		return len;
	memcpy(line, data, len);
	line[len] = '\0';
	n = len;
	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == '\n'))
		line[--n] = '\0';
	if ((value = strchr(line, ':')) == NULL)
		return len;
	*value++ = '\0';
	while (*value == ' ' || *value == '\t')
		value++;
	if (strcasecmp(line, "Content-Type") == 0) {
		gp_strlcpy(x->content_type, value, sizeof(x->content_type));
		/* Parameters (";charset=...") are not part of the type. */
		x->content_type[strcspn(x->content_type, "; ")] = '\0';
	} else if (strcasecmp(line, "Docker-Content-Digest") == 0) {
		gp_strlcpy(x->digest, value, sizeof(x->digest));
	} else if (strcasecmp(line, "WWW-Authenticate") == 0) {
		/* Keep a Bearer challenge over an earlier Basic one. */
		if (x->challenge[0] == '\0' ||
		    strncasecmp(value, "Bearer", 6) == 0)
			gp_strlcpy(x->challenge, value, sizeof(x->challenge));
	}
	return len;
}

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nmemb;
	long status = 0;

	curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		if (x->errbody.len < ERROR_BODY_MAX)
			gp_buf_append(&x->errbody, data,
			    len < ERROR_BODY_MAX - x->errbody.len
			        ? len
			        : ERROR_BODY_MAX - x->errbody.len);
		return len;
	}
	if (x->got + (int64_t)len > x->max) {
		x->toolong = 1;
		return 0; /* aborts the transfer */
	}
	x->got += (int64_t)len;
	crypto_hash_sha256_update(&x->hash, (const unsigned char *)data, len);
	if (x->buf != NULL) {
		if (gp_buf_append(x->buf, data, len) != 0)
			return 0;
	} else if (x->sink != NULL && x->sink(x->arg, data, len) != 0) {
		x->sink_failed = 1;
		return 0;
	}
	return len;
}

/* The error text of a registry's JSON error body, or of the status. */
static void
error_text(const struct xfer *x, long status, char *out, size_t outlen)
{
	json_t *root, *e;
	const char *msg = NULL, *code = NULL;

	root = x->errbody.len > 0
	    ? json_loadb(x->errbody.data, x->errbody.len, 0, NULL)
	    : NULL;
	e = json_array_get(json_object_get(root, "errors"), 0);
	msg = json_string_value(json_object_get(e, "message"));
	code = json_string_value(json_object_get(e, "code"));
	if (msg != NULL || code != NULL)
		snprintf(out, outlen, "HTTP %ld %.64s%s%.200s", status,
		    code ? code : "", code && msg ? ": " : "", msg ? msg : "");
	else
		snprintf(out, outlen, "HTTP %ld", status);
	json_decref(root);
}

static void
setup_common(struct gp_registry *r, struct xfer *x, const char *url)
{
	CURL *c = r->curl;

	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	/* A transfer that stalls for a minute is given up. */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR,
	    r->opts.plain_http ? "http,https" : "https");
#else
	curl_easy_setopt(c, CURLOPT_PROTOCOLS,
	    (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS,
	    r->opts.plain_http ? (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)
	                       : (long)CURLPROTO_HTTPS);
#endif
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	/* Credentials only ever go to the host they were meant for. */
	curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
	if (r->ca_file != NULL)
		curl_easy_setopt(c, CURLOPT_CAINFO, r->ca_file);
	curl_easy_setopt(c, CURLOPT_USERAGENT,
	    r->user_agent != NULL ? r->user_agent : "gpupool/" GP_VERSION);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	x->curl = c;
}

/* Fetches a token from the challenge's realm. */
static int
fetch_token(struct gp_registry *r, const struct gp_auth_challenge *ch,
    char *err, size_t errlen)
{
	struct gp_buf body = {0}, url = {0};
	struct xfer x;
	char scope[600], *e1, *e2;
	const char *tok;
	json_t *root;
	long status = 0;
	CURLcode rc;
	int ret = GP_EAUTH;

	if (strncmp(ch->realm, "https://", 8) != 0 &&
	    !(r->opts.plain_http && strncmp(ch->realm, "http://", 7) == 0)) {
		snprintf(err, errlen,
		    "the registry's token realm '%.200s' is "
		    "not https (use --plain-http only for a test registry)",
		    ch->realm);
		return GP_EPROTO;
	}
	if (ch->scope[0] != '\0')
		gp_strlcpy(scope, ch->scope, sizeof(scope));
	else
		snprintf(scope, sizeof(scope), "repository:%s:pull",
		    r->ref.repository);
	e1 = curl_easy_escape(r->curl, ch->service, 0);
	e2 = curl_easy_escape(r->curl, scope, 0);
	if (e1 == NULL || e2 == NULL) {
		curl_free(e1);
		curl_free(e2);
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	gp_buf_printf(&url, "%s%sservice=%s&scope=%s", ch->realm,
	    strchr(ch->realm, '?') != NULL ? "&" : "?", e1, e2);
	curl_free(e1);
	curl_free(e2);
	memset(&x, 0, sizeof(x));
	x.buf = &body;
	x.max = TOKEN_BODY_MAX;
	crypto_hash_sha256_init(&x.hash);
	setup_common(r, &x, url.data != NULL ? url.data : "");
	curl_easy_setopt(r->curl, CURLOPT_TIMEOUT_MS, 60000L);
	if (r->username != NULL) {
		curl_easy_setopt(r->curl, CURLOPT_HTTPAUTH,
		    (long)CURLAUTH_BASIC);
		curl_easy_setopt(r->curl, CURLOPT_USERNAME, r->username);
		curl_easy_setopt(r->curl, CURLOPT_PASSWORD,
		    r->password != NULL ? r->password : "");
	}
	rc = curl_easy_perform(r->curl);
	curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &status);
	gp_buf_free(&url);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "token realm %.200s: %s", ch->realm,
		    x.toolong ? "the answer is larger than 1 MiB"
		              : curl_easy_strerror(rc));
		ret = GP_ECONN;
		goto out;
	}
	if (status == 401 || status == 403) {
		snprintf(err, errlen,
		    "the registry's token service refused "
		    "%s (HTTP %ld): %s",
		    r->username != NULL ? "the credentials"
		                        : "an anonymous pull",
		    status,
		    r->username != NULL ? "check --username and "
		                          "GPUPOOL_REGISTRY_PASSWORD"
		                        : "give --username and "
		                          "GPUPOOL_REGISTRY_PASSWORD");
		goto out;
	}
	if (status != 200) {
		error_text(&x, status, err, errlen);
		ret = GP_EPROTO;
		goto out;
	}
	root = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
	tok = json_string_value(json_object_get(root, "token"));
	if (tok == NULL)
		tok = json_string_value(json_object_get(root, "access_token"));
	if (tok == NULL || tok[0] == '\0' || strlen(tok) > 64 * 1024 ||
	    strpbrk(tok, "\r\n") != NULL) {
		json_decref(root);
		snprintf(err, errlen,
		    "the token service's answer has no "
		    "token");
		ret = GP_EPROTO;
		goto out;
	}
	wipe_free(r->bearer);
	r->bearer = strdup(tok);
	json_decref(root);
	ret = r->bearer != NULL ? 0 : GP_ENOMEM;
out:
	if (body.data != NULL)
		sodium_memzero(body.data, body.cap);
	gp_buf_free(&body);
	gp_buf_free(&x.errbody);
	return ret;
}

static void
apply_auth(struct gp_registry *r)
{
	if (r->bearer != NULL) {
		curl_easy_setopt(r->curl, CURLOPT_HTTPAUTH,
		    (long)CURLAUTH_BEARER);
		curl_easy_setopt(r->curl, CURLOPT_XOAUTH2_BEARER, r->bearer);
	} else if (r->basic && r->username != NULL) {
		curl_easy_setopt(r->curl, CURLOPT_HTTPAUTH,
		    (long)CURLAUTH_BASIC);
		curl_easy_setopt(r->curl, CURLOPT_USERNAME, r->username);
		curl_easy_setopt(r->curl, CURLOPT_PASSWORD,
		    r->password != NULL ? r->password : "");
	}
}

/*
 * One GET of base + path, authenticating as the registry asks (once).
 * x is set up by the caller (buf/sink, max). OUT: *status.
 */
static int
get(struct gp_registry *r, const char *path, struct xfer *x, int manifests,
    long timeout_ms, long *status, char *err, size_t errlen)
{
	struct gp_auth_challenge ch;
	struct curl_slist *hdr = NULL;
	char url[1200];
	CURLcode rc;
	int attempt, ret;

	snprintf(url, sizeof(url), "%s/%s", r->base, path);
	for (attempt = 0; attempt < 2; attempt++) {
		x->got = 0;
		x->toolong = 0;
		x->sink_failed = 0;
		if (x->buf != NULL)
			x->buf->len = 0;
		x->errbody.len = 0;
		crypto_hash_sha256_init(&x->hash);
		setup_common(r, x, url);
		if (timeout_ms > 0)
			curl_easy_setopt(r->curl, CURLOPT_TIMEOUT_MS,
			    timeout_ms);
		if (manifests) {
			hdr = curl_slist_append(NULL, accept_manifests);
			curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, hdr);
		}
		apply_auth(r);
		rc = curl_easy_perform(r->curl);
		curl_slist_free_all(hdr);
		hdr = NULL;
		*status = 0;
		curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, status);
		if (rc != CURLE_OK) {
			if (x->toolong) {
				snprintf(err, errlen,
				    "%s/%s: the registry sent "
				    "more than %lld bytes",
				    r->ref.registry, path, (long long)x->max);
				return GP_EPROTO;
			}
			if (x->sink_failed) {
				snprintf(err, errlen,
				    "%s/%s: cannot store the "
				    "data",
				    r->ref.registry, path);
				return GP_EIO;
			}
			snprintf(err, errlen, "%s/%s: %s", r->ref.registry,
			    path, curl_easy_strerror(rc));
			return rc == CURLE_OPERATION_TIMEDOUT ? GP_ETIMEDOUT
			                                      : GP_ECONN;
		}
		if (*status != 401 || attempt == 1)
			break;
		if (gp_auth_challenge_parse(x->challenge, &ch) != 0) {
			snprintf(err, errlen,
			    "%s: the registry wants "
			    "authentication but its WWW-Authenticate header is "
			    "not a Basic or Bearer challenge",
			    r->ref.registry);
			return GP_EAUTH;
		}
		if (ch.scheme == GP_AUTH_BASIC) {
			if (r->username == NULL || r->basic) {
				snprintf(err, errlen,
				    "%s: the registry %s "
				    "(give --username and "
				    "GPUPOOL_REGISTRY_PASSWORD)",
				    r->ref.registry,
				    r->basic ? "refused the "
				               "credentials"
				             : "wants a user name and "
				               "password");
				return GP_EAUTH;
			}
			r->basic = 1;
		} else if ((ret = fetch_token(r, &ch, err, errlen)) != 0)
			return ret;
	}
	if (*status == 401 || *status == 403) {
		snprintf(err, errlen, "%s/%s: access denied (HTTP %ld)",
		    r->ref.registry, path, *status);
		return GP_EAUTH;
	}
	return 0;
}

int
gp_registry_manifest(struct gp_registry *r, const char *reference,
    struct gp_buf *body, char *content_type, size_t ctlen, char *digest,
    char *err, size_t errlen)
{
	struct xfer x;
	unsigned char hash[32];
	char path[300], text[300];
	long status;
	int ret;

	memset(&x, 0, sizeof(x));
	body->len = 0;
	x.buf = body;
	x.max = GP_OCI_JSON_MAX;
	snprintf(path, sizeof(path), "manifests/%s", reference);
	ret = get(r, path, &x, 1, 120000, &status, err, errlen);
	if (ret == GP_EPROTO && x.toolong)
		snprintf(err, errlen,
		    "%s: the manifest %s is larger than %d "
		    "bytes",
		    r->ref.registry, reference, GP_OCI_JSON_MAX);
	if (ret != 0)
		goto out;
	if (status != 200) {
		error_text(&x, status, text, sizeof(text));
		snprintf(err, errlen, "%s/%s: manifest %s: %s", r->ref.registry,
		    r->ref.repository, reference, text);
		ret = status == 404 ? GP_ENOENT : GP_EPROTO;
		goto out;
	}
	crypto_hash_sha256_final(&x.hash, hash);
	gp_oci_digest_format(hash, digest);
	if (gp_oci_digest_valid(reference) && strcmp(reference, digest) != 0) {
		snprintf(err, errlen,
		    "%s: the registry's manifest %s hashes "
		    "to %s: it lies about its content",
		    r->ref.registry, reference, digest);
		ret = GP_EPROTO;
		goto out;
	}
	gp_strlcpy(content_type, x.content_type, ctlen);
	if (body->data == NULL && gp_buf_append(body, "", 0) != 0)
		ret = GP_ENOMEM;
out:
	gp_buf_free(&x.errbody);
	return ret;
}

int
gp_registry_blob(struct gp_registry *r, const struct gp_oci_descriptor *d,
    int (*sink)(void *arg, const char *data, size_t len), void *arg,
    int64_t *received, char *err, size_t errlen)
{
	struct xfer x;
	unsigned char hash[32];
	char path[300], got[GP_OCI_DIGEST_SIZE], text[300];
	long status;
	int ret;

	memset(&x, 0, sizeof(x));
	x.sink = sink;
	x.arg = arg;
	x.max = d->size;
	*received = 0;
	snprintf(path, sizeof(path), "blobs/%s", d->digest);
	ret = get(r, path, &x, 0, 0, &status, err, errlen);
	*received = x.got;
	if (ret == GP_EPROTO && x.toolong)
		snprintf(err, errlen,
		    "%s: blob %s: the registry sent more than "
		    "the %lld bytes the manifest declares",
		    r->ref.registry, d->digest, (long long)d->size);
	if (ret != 0)
		goto out;
	if (status != 200) {
		error_text(&x, status, text, sizeof(text));
		snprintf(err, errlen, "%s/%s: blob %s: %s", r->ref.registry,
		    r->ref.repository, d->digest, text);
		ret = status == 404 ? GP_ENOENT : GP_EPROTO;
		goto out;
	}
	if (x.got != d->size) {
		snprintf(err, errlen,
		    "%s: blob %s: the registry sent %lld "
		    "bytes, the manifest declares %lld",
		    r->ref.registry, d->digest, (long long)x.got,
		    (long long)d->size);
		ret = GP_EPROTO;
		goto out;
	}
	crypto_hash_sha256_final(&x.hash, hash);
	gp_oci_digest_format(hash, got);
	if (strcmp(got, d->digest) != 0) {
		snprintf(err, errlen,
		    "%s: blob %s: the registry sent content "
		    "that hashes to %s (wrong digest)",
		    r->ref.registry, d->digest, got);
		ret = GP_EPROTO;
	}
out:
	gp_buf_free(&x.errbody);
	return ret;
}
