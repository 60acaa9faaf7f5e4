/*
 * coord_urls.h: following the leader among several coordinators
 * (coord_urls.c). A client is given a comma-separated list of coordinator
 * URLs (GPUPOOL_URL=http://a:7070,http://b:7070, `agent --coordinator`
 * repeated); it talks to one of them and, after each try, asks
 * gp_coord_urls_after where to go next:
 *
 * - an answer other than a standby's 503: done;
 * - a standby's 503 naming a leader that is in the list: that one, at
 *   once; naming none, itself (a leader still loading) or one not in the
 *   list (a token is never sent where the user did not point it): the
 *   next URL;
 * - no connection (refused, unreachable; nothing was sent): the next URL;
 * - a request sent whose answer never came: done (the caller decides
 *   whether a repeat is safe: submissions carry an idempotency key), the
 *   next call goes to the next URL.
 *
 * A pause (gp_coord_urls_pause_ms) comes after each full round of URLs
 * that all failed, doubling from 50 ms to 1 s; at most
 * GP_COORD_URLS_ROUNDS rounds in one call. Pure: no I/O, no clock.
 */
#ifndef GP_COORD_URLS_H
#define GP_COORD_URLS_H

#include <stddef.h>

#define GP_COORD_URLS_MAX    8
#define GP_COORD_URLS_LEN    512
#define GP_COORD_URLS_ROUNDS 3

struct gp_coord_urls {
	int n;	 /* URLs in url[] */
	int cur; /* the one in use */
	char url[GP_COORD_URLS_MAX][GP_COORD_URLS_LEN];
	/* One call's following (reset by gp_coord_urls_begin). */
	int fails; /* tries that failed in this call */
	int hops;  /* hops to a named leader in this call */
	long pause_ms; /* before the next try */
};

/*
 * Parses "URL[,URL...]" (spaces around commas allowed, trailing slashes
 * dropped) into *out, cur = 0. 0, or GP_EINVAL (empty, an empty item,
 * more than GP_COORD_URLS_MAX, one too long) with why in err.
 */
int gp_coord_urls_parse(const char *text, struct gp_coord_urls *out,
    char *err, size_t errlen);

/* The outcome of one try. */
enum gp_coord_try {
	GP_COORD_ANSWERED,   /* an answer, not a standby's */
	GP_COORD_NOT_LEADER, /* 503 from a standby (leader given or not) */
	GP_COORD_NO_CONNECT, /* no connection: nothing was sent */
	GP_COORD_LOST,	     /* sent, no answer (timeout, cut) */
};

/* Starts one call's following. */
void gp_coord_urls_begin(struct gp_coord_urls *u);

/*
 * After a try at url[cur] ended in outcome (leader: the standby's
 * X-Gpupool-Leader, or NULL): moves cur. Returns 1 when the call should
 * try again (after gp_coord_urls_pause_ms), 0 when it is over.
 */
int gp_coord_urls_after(struct gp_coord_urls *u, enum gp_coord_try outcome,
    const char *leader);

/* How long to wait before the try gp_coord_urls_after asked for. */
#define gp_coord_urls_pause_ms(u) ((u)->pause_ms)

/* 1 when every URL of text starts with prefix (case-insensitive). */
int gp_coord_urls_all_start(const char *text, const char *prefix);

#endif
