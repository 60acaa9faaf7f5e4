/*
 * route.h: the route table (route.c). Each subsystem declares its HTTP
 * routes in one table: the path, the methods, the roles that may call it,
 * the largest body it takes, and either a handler that gets the body
 * collected in memory or a stream that gets it piece by piece (uploads).
 * api.c walks the tables in the order of api_tables[]: the first route
 * whose path and method match answers.
 */
#ifndef GP_COORD_ROUTE_H
#define GP_COORD_ROUTE_H

#include <stddef.h>

#include "state.h"

/* Methods, as a mask. */
enum {
	API_GET = 1 << 0,
	API_HEAD = 1 << 1,
	API_POST = 1 << 2,
	API_PUT = 1 << 3,
	API_DELETE = 1 << 4,
	/* Every method, even one without a bit: the handler sorts them. */
	API_ANY = 0xffff,
};

/* Roles, as a mask; 0 in api_route.roles: any token. */
#define API_ROLE(r)   (1u << (r))
#define API_PROVIDERS (API_ROLE(GP_ROLE_PROVIDER) | API_ROLE(GP_ROLE_ADMIN))

/* Flags. */
#define API_PUBLIC 1 /* answered without a token (the dashboard's files) */
/*
 * A method the path does not take is answered 405 (with Allow). Without
 * it the API answers as before the table: 404 "no such endpoint" for GET
 * or POST, 405 (with Allow) for any other method on a /v1/ path.
 */
#define API_STRICT_METHODS 2
/*
 * It may wait on the database (the blob users' records, store_meta.h, or
 * a lock a request holds while it waits): its handler, or its stream's
 * begin, runs on held.c's threads, not on the HTTP worker.
 */
#define API_HELD 4

/*
 * A handler: answers conn for req (req->body holds the body, req->auth
 * the caller). url and method are the request's.
 */
typedef enum MHD_Result api_handler(struct MHD_Connection *conn,
    struct request *req, const char *url, const char *method);

/*
 * A body streamed to its subsystem instead of collected: begin when the
 * headers are in (req->auth is set when the token is good; begin keeps
 * its state in req->stream, and refuses through it), data for each piece,
 * end when the body is complete (it answers), release when the
 * connection ends (frees req->stream; NULL is fine).
 */
struct api_stream {
	void (*begin)(struct request *req, const char *url);
	void (*data)(struct request *req, const char *data, size_t len);
	enum MHD_Result (*end)(struct MHD_Connection *conn,
	    struct request *req);
	void (*release)(void *stream);
};

/*
 * One route. path is matched segment by segment: a literal; "*" any one
 * non-empty segment; "{id}" a job id (1 to INT64_MAX / 2); "{attempt}"
 * an attempt (1 to 1,000,000); "**", last, the rest of the URL, which may
 * be empty: "/v1/groups" then "**" matches "/v1/groups", "/v1/groups/"
 * and "/v1/groups/x/y".
 */
struct api_route {
	const char *path;
	unsigned methods;	   /* API_GET | ...; API_ANY */
	unsigned roles;		   /* API_ROLE(...) | ...; 0: any token */
	const char *refusal;	   /* the 403 error when roles refuse */
	size_t body_limit;	   /* 0: GP_SUBMIT_BODY_MAX */
	unsigned flags;		   /* API_PUBLIC */
	api_handler *handle;	   /* NULL when stream answers */
	const struct api_stream *stream;
};

/* The tables, each ended by a route whose path is NULL. */
extern const struct api_route web_routes[];	/* web.c */
extern const struct api_route metrics_routes[]; /* api.c */
extern const struct api_route image_routes[];	/* image.c */
extern const struct api_route ckpt_routes[];	/* ckpt.c */
extern const struct api_route data_routes[];	/* data.c */
extern const struct api_route acct_routes[];	/* acct_api.c */
extern const struct api_route user_routes[];	/* api.c */
extern const struct api_route jobs_routes[];	/* api_jobs.c */
extern const struct api_route agent_routes[];	/* api_agent.c */
extern const struct api_route relay_routes[];	/* relay.c */
extern const struct api_route proxy_routes[];	/* proxy.c */
extern const struct api_route terminal_routes[]; /* terminal.c */

/* Every table, in the order they are asked; NULL-terminated. */
extern const struct api_route *const api_tables[];

/* route.c */
/* The method's bit; 0 for one without a bit. */
unsigned api_method_bit(const char *method);
/* 1 when url matches the pattern path (above). */
int api_path_match(const char *path, const char *url);
/*
 * Finds the route for method and url in tables (NULL-terminated).
 * Returns 200 with *route set. Else *allow is the methods of the routes
 * that have the path (0: none has it), and it returns 405 when one of
 * them is API_STRICT_METHODS, 404 when not.
 */
int api_route_find(const struct api_route *const *tables, const char *url,
    const char *method, const struct api_route **route, unsigned *allow);
/* 1 when role may call route. */
int api_route_permits(const struct api_route *route, int role);
/* The largest body route takes (GP_SUBMIT_BODY_MAX when it says 0). */
size_t api_route_body_limit(const struct api_route *route);
/* Writes the Allow header's value for methods ("GET, POST") into out. */
void api_allow_text(unsigned methods, char *out, size_t len);

#endif
