/*
 * api_int.h: what the API's handler files share (api.c, api_jobs.c,
 * api_agent.c): body and query parsing, queueing a change to the state
 * thread, long-poll deadlines, path parts, the answer for no route.
 */
#ifndef GP_COORD_API_INT_H
#define GP_COORD_API_INT_H

#include "state.h"

/* The longest long poll a caller may ask for (?wait_ms=). */
#define API_WAIT_MS_MAX 60000

/* api.c */
/* Answers 200 with a constant JSON text (the agents' idle answers). */
enum MHD_Result api_reply_const(struct MHD_Connection *conn,
    const char *json);
/* A query argument; NULL when absent. */
const char *api_query(struct MHD_Connection *conn, const char *key);
/* A strict integer query argument; def when absent. -1 on bad input. */
int api_query_int(struct MHD_Connection *conn, const char *key, int64_t def,
    int64_t min, int64_t max, int64_t *out);
/* Parses req's body as a JSON object; answers 400 itself (*rc) if not. */
json_t *api_parse_body(struct MHD_Connection *conn, struct request *req,
    enum MHD_Result *rc);
/*
 * req's body as a JSON object (duplicate keys refused), or NULL when it
 * is not JSON or not an object: the caller answers, in its own words.
 */
json_t *api_body_object(const struct request *req);
/* 1 when every key of obj is in the NULL-terminated list; else *bad. */
int api_only_fields(json_t *obj, const char *const *allowed,
    const char **bad);
/* Queues op to the state thread and suspends conn until it answers. */
enum MHD_Result api_queue_op(struct MHD_Connection *conn,
    struct request *req, struct op *op);
/*
 * Sets req's long-poll deadline once (?wait_ms=); returns the ms left (0:
 * answer now); *bad set when wait_ms is not 0 to API_WAIT_MS_MAX.
 */
int64_t api_wait_left(struct MHD_Connection *conn, struct request *req,
    int64_t *bad);
/*
 * Splits "/v1/a/b" into at most max parts of under 32 bytes; returns the
 * count or GP_EINVAL (too many parts, an empty or overlong one).
 */
int api_split_path(const char *url, char parts[][32], int max);
/* 1 when text is an id (1 to INT64_MAX / 2), in *id. */
int api_path_id(const char *text, int64_t *id);
/*
 * The answer for a URL no route answers: 404, or 405 for a method other
 * than GET and POST on a /v1/ path, with Allow: allow (0: none).
 */
enum MHD_Result api_no_route(struct MHD_Connection *conn, const char *url,
    const char *method, unsigned allow);

/* A route adapter's path parts: char p[8][32], int n (or GP_EINVAL). */
#define API_PATH_PARTS(url, p, n)                                              \
	char p[8][32];                                                         \
	int n = api_split_path(url, p, 8)

#endif
