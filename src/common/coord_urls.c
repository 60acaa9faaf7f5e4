/*
 * coord_urls.c: where a client goes next among several coordinators
 * (coord_urls.h): the list's parser and the follower's steps, pure.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "coord_urls.h"
#include "gp.h"
#include "util.h"

int
gp_coord_urls_parse(const char *text, struct gp_coord_urls *out, char *err,
    size_t errlen)
{
	const char *p = text, *end, *comma;
	size_t len;

	memset(out, 0, sizeof(*out));
	for (;;) {
		comma = strchr(p, ',');
		end = comma != NULL ? comma : p + strlen(p);
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		len = (size_t)(end - p);
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t' ||
		    p[len - 1] == '/'))
			len--;
		if (len == 0) {
			snprintf(err, errlen, "'%s': an empty coordinator URL",
			    text);
			return GP_EINVAL;
		}
		if (out->n == GP_COORD_URLS_MAX) {
			snprintf(err, errlen, "more than %d coordinator URLs",
			    GP_COORD_URLS_MAX);
			return GP_EINVAL;
		}
		if (len >= GP_COORD_URLS_LEN) {
			snprintf(err, errlen, "a coordinator URL is longer "
			    "than %d bytes", GP_COORD_URLS_LEN - 1);
			return GP_EINVAL;
		}
		memcpy(out->url[out->n], p, len);
		out->url[out->n][len] = '\0';
		out->n++;
		if (comma == NULL)
			return 0;
		p = comma + 1;
	}
}

void
gp_coord_urls_begin(struct gp_coord_urls *u)
{
	u->fails = 0;
	u->hops = 0;
	u->pause_ms = 0;
}

/* The index of url in the list (trailing slashes aside), or -1. */
static int
find(const struct gp_coord_urls *u, const char *url)
{
	size_t len = strlen(url);
	int i;

	while (len > 0 && url[len - 1] == '/')
		len--;
	for (i = 0; i < u->n; i++)
		if (strlen(u->url[i]) == len &&
		    strncasecmp(u->url[i], url, len) == 0)
			return i;
	return -1;
}

/*
 * A failed try: the next URL, at once while the round lasts; after a
 * round where every one failed, a pause (50 ms, doubling to 1 s); no
 * further try after GP_COORD_URLS_ROUNDS rounds.
 */
static int
next(struct gp_coord_urls *u)
{
	int rounds;

	u->cur = (u->cur + 1) % u->n;
	u->fails++;
	rounds = u->fails / u->n;
	u->pause_ms = 0;
	if (u->fails % u->n == 0)
		u->pause_ms = rounds >= 5 ? 1000 : 50L << (rounds - 1);
	if (u->pause_ms > 1000)
		u->pause_ms = 1000;
	return rounds < GP_COORD_URLS_ROUNDS;
}

int
gp_coord_urls_after(struct gp_coord_urls *u, enum gp_coord_try outcome,
    const char *leader)
{
	int i;

	u->pause_ms = 0;
	switch (outcome) {
	case GP_COORD_ANSWERED:
		return 0;
	case GP_COORD_LOST:
		u->cur = (u->cur + 1) % u->n;
		return 0;
	case GP_COORD_NO_CONNECT:
		return next(u);
	case GP_COORD_NOT_LEADER:
		i = leader != NULL ? find(u, leader) : -1;
		if (i >= 0 && i != u->cur) {
			/* To the named leader at once, a bounded number of
			 * times (two standbys naming each other: stale). */
			if (u->hops >= u->n * GP_COORD_URLS_ROUNDS)
				return next(u);
			u->hops++;
			u->cur = i;
			return 1;
		}
		return next(u);
	}
	return 0;
}

int
gp_coord_urls_all_start(const char *text, const char *prefix)
{
	size_t plen = strlen(prefix);
	const char *p = text;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, prefix, plen) != 0)
			return 0;
		if ((p = strchr(p, ',')) == NULL)
			return 1;
		p++;
	}
}
