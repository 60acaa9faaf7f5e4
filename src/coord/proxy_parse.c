/*
 * proxy_parse.c: the pure parsers of the job port proxy (proxy.c,
 * docs/interactive.md): a request's head as a browser sends it to the
 * proxy listener (untrusted: fuzzed by tests/fuzz/fuzz_proxy_head.c) and
 * the per-job host name "j<JOB>[-part<K>]-p<PORT>.<DOMAIN>[:<port>]".
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "jobspec.h"
#include "proxy.h"

/* The value of header name in line (name ": " value), or NULL. */
static const char *
header_value(const char *line, size_t len, const char *name, size_t *vlen)
{
	size_t n = strlen(name), i;

	if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
		return NULL;
	for (i = n + 1; i < len && (line[i] == ' ' || line[i] == '\t'); i++)
		;
	*vlen = len - i;
	while (*vlen > 0 && (line[i + *vlen - 1] == ' ' ||
	    line[i + *vlen - 1] == '\t'))
		(*vlen)--;
	return line + i;
}

/* Our cookie's value in a Cookie header's value, if there. */
static void
find_cookie(const char *v, size_t len, struct proxy_head *h)
{
	static const char name[] = PROXY_COOKIE "=";
	size_t i = 0, k;

	while (i < len) {
		while (i < len && (v[i] == ' ' || v[i] == ';'))
			i++;
		k = i;
		while (k < len && v[k] != ';')
			k++;
		if (k - i > sizeof(name) - 1 &&
		    memcmp(v + i, name, sizeof(name) - 1) == 0 &&
		    k - i - (sizeof(name) - 1) < sizeof(h->cookie)) {
			memcpy(h->cookie, v + i + sizeof(name) - 1,
			    k - i - (sizeof(name) - 1));
			h->cookie[k - i - (sizeof(name) - 1)] = '\0';
		}
		i = k;
	}
}

int
proxy_head_parse(const char *buf, size_t len, struct proxy_head *h)
{
	const char *end = NULL, *p, *line, *sp1, *sp2, *v;
	size_t i, n, vlen;
	int first = 1;

	memset(h, 0, sizeof(*h));
	h->content_length = -1;
	for (i = 0; i + 3 < len; i++)
		if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
			end = buf + i;
			break;
		}
	if (end == NULL)
		return len >= PROXY_HEAD_MAX ? GP_EINVAL : 0;
	if ((size_t)(end - buf) + 4 > PROXY_HEAD_MAX)
		return GP_EINVAL;
	for (p = buf; p < end; p = line + n + 2) {
		const char *nl;
		line = p;
		nl = memchr(line, '\r', (size_t)(end - line));
		n = nl != NULL ? (size_t)(nl - line) : (size_t)(end - line);
		if (memchr(line, '\0', n) != NULL)
			return GP_EINVAL;
		if (first) {
			/* METHOD SP TARGET SP HTTP/1.x */
			first = 0;
			sp1 = memchr(line, ' ', n);
			if (sp1 == NULL || sp1 == line ||
			    (size_t)(sp1 - line) >= sizeof(h->method))
				return GP_EINVAL;
			sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line));
			if (sp2 == NULL || sp2 == sp1 + 1 ||
			    (size_t)(line + n - sp2 - 1) != 8 ||
			    strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
				return GP_EINVAL;
			memcpy(h->method, line, (size_t)(sp1 - line));
			for (i = 0; h->method[i] != '\0'; i++)
				if (!isupper((unsigned char)h->method[i]))
					return GP_EINVAL;
			if ((size_t)(sp2 - sp1 - 1) >= sizeof(h->path))
				return GP_EINVAL;
			memcpy(h->path, sp1 + 1, (size_t)(sp2 - sp1 - 1));
			if (h->path[0] != '/')
				return GP_EINVAL;
			continue;
		}
		if ((v = header_value(line, n, "Host", &vlen)) != NULL) {
			if (h->host[0] != '\0' || vlen == 0 ||
			    vlen >= sizeof(h->host))
				return GP_EINVAL; /* none, two or too long */
			memcpy(h->host, v, vlen);
		} else if ((v = header_value(line, n, "Cookie", &vlen)) !=
		    NULL) {
			find_cookie(v, vlen, h);
		} else if ((v = header_value(line, n, "Content-Length",
		    &vlen)) != NULL) {
			int64_t cl = 0;
			if (vlen == 0 || vlen > 12 || h->content_length >= 0)
				return GP_EINVAL;
			for (i = 0; i < vlen; i++) {
				if (!isdigit((unsigned char)v[i]))
					return GP_EINVAL;
				cl = cl * 10 + (v[i] - '0');
			}
			h->content_length = cl;
		}
		if (line + n >= end)
			break;
	}
	if (h->host[0] == '\0')
		return GP_EINVAL;
	return (int)(end - buf) + 4;
}

int
proxy_host_parse(const char *host, const char *domain, int64_t *job_id,
    int *part, int *port)
{
	const char *p = host, *dot;
	int64_t job = 0, pt = 0, k = 0;
	size_t dlen = strlen(domain), rest;

	if (*p != 'j' && *p != 'J')
		return GP_EINVAL;
	for (p++; isdigit((unsigned char)*p) && job < INT64_MAX / 20; p++)
		job = job * 10 + (*p - '0');
	if (job < 1)
		return GP_EINVAL;
	/* "-partK": a gang's part K >= 1 (part 0 has no label: one name). */
	if (strncasecmp(p, "-part", 5) == 0) {
		if (!isdigit((unsigned char)p[5]) || p[5] == '0')
			return GP_EINVAL;
		for (p += 5; isdigit((unsigned char)*p) && k < GP_NODES_MAX;
		    p++)
			k = k * 10 + (*p - '0');
		if (k >= GP_NODES_MAX)
			return GP_EINVAL;
	}
	if (strncasecmp(p, "-p", 2) != 0)
		return GP_EINVAL;
	for (p += 2; isdigit((unsigned char)*p) && pt <= 65535; p++)
		pt = pt * 10 + (*p - '0');
	if (pt < 1 || pt > 65535 || *p != '.')
		return GP_EINVAL;
	dot = p + 1;
	rest = strcspn(dot, ":");
	if (rest != dlen || strncasecmp(dot, domain, dlen) != 0)
		return GP_EINVAL;
	if (dot[rest] == ':') {
		const char *q = dot + rest + 1;
		if (*q == '\0')
			return GP_EINVAL;
		for (; *q != '\0'; q++)
			if (!isdigit((unsigned char)*q))
				return GP_EINVAL;
	}
	*job_id = job;
	*part = (int)k;
	*port = (int)pt;
	return 0;
}
