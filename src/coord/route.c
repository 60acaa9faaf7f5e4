/*
 * route.c: walking the route table (route.h). Pure: no connection, no
 * state, so tests/unit/test_route.c drives it with the real tables.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gp.h"
#include "route.h"

static const struct {
	const char *name;
	unsigned bit;
} methods[] = {
    {"GET", API_GET},
    {"HEAD", API_HEAD},
    {"POST", API_POST},
    {"PUT", API_PUT},
    {"DELETE", API_DELETE},
};

unsigned
api_method_bit(const char *method)
{
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(methods); i++)
		if (strcmp(method, methods[i].name) == 0)
			return methods[i].bit;
	return 0;
}

/* 1 when the len bytes at text are an integer in [1, max]. */
static int
segment_number(const char *text, size_t len, int64_t max)
{
	char num[24];
	int64_t v;

	if (len == 0 || len >= sizeof(num))
		return 0;
	memcpy(num, text, len);
	num[len] = '\0';
	return gp_parse_int(num, 1, max, &v) == 0;
}

/* At a '/' that starts a segment that is not a literal ("*", "**", "{"). */
#define WILD_NEXT(p) ((p)[0] == '/' && ((p)[1] == '*' || (p)[1] == '{'))

int
api_path_match(const char *path, const char *url)
{
	const char *pend, *uend;
	size_t plen, ulen;

	/*
	 * The literal head, character by character, up to the first segment
	 * that is not a literal: most routes differ from the URL there, and
	 * every request walks the table (10,000 agents' heartbeats).
	 */
	while (*path != '\0' && *path == *url && !WILD_NEXT(path)) {
		path++;
		url++;
	}
	if (*path != '\0' && !WILD_NEXT(path))
		return 0;
	for (;;) {
		if (*path == '\0')
			return *url == '\0';
		if (strcmp(path, "/**") == 0)
			return *url == '\0' || *url == '/';
		if (*path != '/' || *url != '/')
			return 0;
		path++;
		url++;
		pend = strchr(path, '/');
		plen = pend != NULL ? (size_t)(pend - path) : strlen(path);
		uend = strchr(url, '/');
		ulen = uend != NULL ? (size_t)(uend - url) : strlen(url);
		if (plen == 1 && path[0] == '*') {
			if (ulen == 0)
				return 0;
		} else if (plen == 4 && strncmp(path, "{id}", 4) == 0) {
			if (!segment_number(url, ulen, INT64_MAX / 2))
				return 0;
		} else if (plen == 9 && strncmp(path, "{attempt}", 9) == 0) {
			if (!segment_number(url, ulen, 1000000))
				return 0;
		} else if (plen != ulen || strncmp(path, url, plen) != 0) {
			return 0;
		}
		path += plen;
		url += ulen;
	}
}

int
api_route_find(const struct api_route *const *tables, const char *url,
    const char *method, const struct api_route **route, unsigned *allow)
{
	unsigned bit = api_method_bit(method), seen = 0, strict = 0;
	const struct api_route *r;
	size_t t;

	*allow = 0;
	for (t = 0; tables[t] != NULL; t++) {
		for (r = tables[t]; r->path != NULL; r++) {
			if (!api_path_match(r->path, url))
				continue;
			if (r->methods == API_ANY || (r->methods & bit) != 0) {
				*route = r;
				return 200;
			}
			seen |= r->methods;
			strict |= r->flags & API_STRICT_METHODS;
		}
	}
	*allow = seen;
	return strict ? 405 : 404;
}

int
api_route_permits(const struct api_route *route, int role)
{
	return route->roles == 0 || (route->roles & API_ROLE(role)) != 0;
}

size_t
api_route_body_limit(const struct api_route *route)
{
	return route != NULL && route->body_limit > 0 ? route->body_limit
						      : GP_SUBMIT_BODY_MAX;
}

void
api_allow_text(unsigned bits, char *out, size_t len)
{
	size_t i, used = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	for (i = 0; i < GP_ARRAY_LEN(methods); i++) {
		if ((bits & methods[i].bit) == 0)
			continue;
		snprintf(out + used, len - used, "%s%s", used > 0 ? ", " : "",
		    methods[i].name);
		used = strlen(out);
	}
}
