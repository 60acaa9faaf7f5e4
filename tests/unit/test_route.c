/*
 * test_route.c: the route table (src/coord/route.c) and the coordinator's
 * real tables: the path patterns; each route reached by its own URL (none
 * shadowed by one before it); a method a path does not take: the methods
 * it does, for Allow, and 405 where the route is strict; the roles each route admits and the error it
 * refuses the others with; body limits and streamed uploads.
 */
#include <stdlib.h>
#include <string.h>

#include "coord/route.h"
#include "gp.h"
#include "unit.h"

TEST(path_patterns)
{
	CHECK(api_path_match("/", "/"));
	CHECK(!api_path_match("/", "/x"));
	CHECK(api_path_match("/v1/jobs", "/v1/jobs"));
	CHECK(!api_path_match("/v1/jobs", "/v1/jobs/"));
	CHECK(!api_path_match("/v1/jobs", "/v1/job"));
	CHECK(!api_path_match("/v1/jobs", "/v1/jobsx"));
	CHECK(api_path_match("/v1/jobs/*", "/v1/jobs/12"));
	CHECK(api_path_match("/v1/jobs/*", "/v1/jobs/abc"));
	CHECK(!api_path_match("/v1/jobs/*", "/v1/jobs/"));
	CHECK(!api_path_match("/v1/jobs/*", "/v1/jobs/1/cancel"));
	CHECK(api_path_match("/v1/jobs/*/cancel", "/v1/jobs/1/cancel"));
	CHECK(!api_path_match("/v1/jobs/*/cancel", "/v1/jobs//cancel"));
	/* "**": the rest, empty or not */
	CHECK(api_path_match("/v1/groups/**", "/v1/groups"));
	CHECK(api_path_match("/v1/groups/**", "/v1/groups/"));
	CHECK(api_path_match("/v1/groups/**", "/v1/groups/a/b/c"));
	CHECK(!api_path_match("/v1/groups/**", "/v1/groupsx"));
	CHECK(!api_path_match("/v1/groups/**", "/v1/group"));
	/* numbers */
	CHECK(api_path_match("/a/{id}/{attempt}", "/a/4611686018427387903/1"));
	CHECK(!api_path_match("/a/{id}/{attempt}", "/a/4611686018427387904/1"));
	CHECK(!api_path_match("/a/{id}/{attempt}", "/a/0/1"));
	CHECK(!api_path_match("/a/{id}/{attempt}", "/a/-1/1"));
	CHECK(!api_path_match("/a/{id}/{attempt}", "/a/x/1"));
	CHECK(api_path_match("/a/{id}/{attempt}", "/a/5/1000000"));
	CHECK(!api_path_match("/a/{id}/{attempt}", "/a/5/1000001"));
	CHECK(!api_path_match("/a/{id}/{attempt}", "/a/5/"));
}

/* A URL that route r's path matches: "*" x, {id} 7, {attempt} 1, "**" /x. */
static void
sample_url(const char *path, char *out, size_t len)
{
	const char *p = path;
	size_t used = 0;

	out[0] = '\0';
	while (*p != '\0' && used + 16 < len) {
		if (strncmp(p, "**", 2) == 0) {
			out[used++] = 'x';
			p += 2;
		} else if (*p == '*') {
			out[used++] = 'x';
			p++;
		} else if (strncmp(p, "{id}", 4) == 0) {
			out[used++] = '7';
			p += 4;
		} else if (strncmp(p, "{attempt}", 9) == 0) {
			out[used++] = '1';
			p += 9;
		} else {
			out[used++] = *p++;
		}
		out[used] = '\0';
	}
}

/* Each route's own URL with one of its methods reaches that route. */
TEST(every_route_reachable)
{
	static const char *const names[] = {"GET", "HEAD", "POST", "PUT",
	    "DELETE"};
	const struct api_route *r, *got;
	char url[256];
	unsigned allow;
	size_t t, m;
	int reached, count = 0;

	for (t = 0; api_tables[t] != NULL; t++) {
		for (r = api_tables[t]; r->path != NULL; r++) {
			count++;
			CHECK(r->path[0] == '/');
			CHECK(r->methods != 0);
			/* a handler or a stream, not both */
			CHECK((r->handle != NULL) != (r->stream != NULL));
			/* a route that refuses roles says why */
			CHECK(r->roles == 0 || r->refusal != NULL);
			/* streams are uploads */
			CHECK(r->stream == NULL || r->methods == API_PUT);
			sample_url(r->path, url, sizeof(url));
			reached = 0;
			for (m = 0; m < GP_ARRAY_LEN(names); m++) {
				if (r->methods != API_ANY &&
				    (r->methods & api_method_bit(names[m])) ==
					0)
					continue;
				got = NULL;
				if (api_route_find(api_tables, url, names[m],
				        &got, &allow) == 200 &&
				    got == r)
					reached = 1;
			}
			if (!reached)
				fprintf(stderr, "route %s: shadowed (%s)\n",
				    r->path, url);
			CHECK(reached);
		}
	}
	CHECK(count > 40);
}

static const struct api_route *
find(const char *method, const char *url, int *status, unsigned *allow)
{
	const struct api_route *r = NULL;

	*allow = 0;
	*status = api_route_find(api_tables, url, method, &r, allow);
	return *status == 200 ? r : NULL;
}

TEST(method_not_allowed)
{
	unsigned allow;
	char text[64];
	int status;

	/* /metrics is strict: 405 for any method but GET, Allow: GET */
	CHECK(find("POST", "/metrics", &status, &allow) == NULL);
	CHECK_EQ(status, 405);
	CHECK_EQ(allow, API_GET);
	api_allow_text(allow, text, sizeof(text));
	CHECK_STR(text, "GET");
	CHECK(find("DELETE", "/metrics", &status, &allow) == NULL);
	CHECK_EQ(status, 405);
	/*
	 * The rest answer as before the table (api_no_route): the methods
	 * the path takes come back for the 405 of a method not GET or POST.
	 */
	CHECK(find("DELETE", "/v1/jobs", &status, &allow) == NULL);
	CHECK_EQ(status, 404);
	api_allow_text(allow, text, sizeof(text));
	CHECK_STR(text, "GET, POST");
	CHECK(find("PATCH", "/v1/jobs/3/cancel", &status, &allow) == NULL);
	CHECK_EQ(status, 404);
	CHECK_EQ(allow, API_GET | API_POST);
	CHECK(find("PUT", "/v1/tokens/3/revoke", &status, &allow) == NULL);
	CHECK_EQ(allow, API_POST);
	CHECK(find("POST", "/", &status, &allow) == NULL);
	CHECK_EQ(status, 404);
	api_allow_text(allow, text, sizeof(text));
	CHECK_STR(text, "GET, HEAD");
	/* the subsystems that sort methods themselves take every one */
	CHECK(find("PATCH", "/v1/images", &status, &allow) != NULL);
	CHECK(find("DELETE", "/v1/groups/a", &status, &allow) != NULL);
	/* no route for the path: nothing to allow */
	CHECK(find("GET", "/v1/nothing", &status, &allow) == NULL);
	CHECK_EQ(status, 404);
	CHECK_EQ(allow, 0);
	CHECK(find("GET", "/v1/jobs/", &status, &allow) == NULL);
	CHECK_EQ(allow, 0);
	CHECK(find("GET", "/ui//x", &status, &allow) == NULL);
	CHECK_EQ(allow, 0);
	api_allow_text(0, text, sizeof(text));
	CHECK_STR(text, "");
}

TEST(roles)
{
	const struct api_route *r;
	unsigned allow;
	int status;

	r = find("GET", "/metrics", &status, &allow);
	CHECK(r != NULL);
	if (r != NULL) {
		CHECK(api_route_permits(r, GP_ROLE_ADMIN));
		CHECK(api_route_permits(r, GP_ROLE_METRICS));
		CHECK(!api_route_permits(r, GP_ROLE_USER));
		CHECK(!api_route_permits(r, GP_ROLE_PROVIDER));
		CHECK_STR(r->refusal, "/metrics needs an admin or metrics token");
	}
	/* every agent call, known or not, is a provider's */
	r = find("GET", "/v1/agent/poll", &status, &allow);
	CHECK(r != NULL && !api_route_permits(r, GP_ROLE_USER));
	CHECK(r != NULL && api_route_permits(r, GP_ROLE_PROVIDER));
	CHECK(r != NULL && api_route_permits(r, GP_ROLE_ADMIN));
	CHECK(r != NULL &&
	    strcmp(r->refusal, "agent calls need a provider token") == 0);
	r = find("GET", "/v1/agent/register", &status, &allow);
	CHECK(r != NULL && !api_route_permits(r, GP_ROLE_USER));
	r = find("POST", "/v1/agent/jobs/x/1/log", &status, &allow);
	CHECK(r != NULL && !api_route_permits(r, GP_ROLE_USER));
	/* submitting is not a provider's */
	r = find("POST", "/v1/jobs", &status, &allow);
	CHECK(r != NULL && !api_route_permits(r, GP_ROLE_PROVIDER));
	CHECK(r != NULL && api_route_permits(r, GP_ROLE_USER));
	CHECK(r != NULL && strcmp(r->refusal,
	    "a provider token cannot submit jobs") == 0);
	r = find("POST", "/v1/jobs/array", &status, &allow);
	CHECK(r != NULL && !api_route_permits(r, GP_ROLE_PROVIDER));
	/* but reading the list is anyone's */
	r = find("GET", "/v1/jobs", &status, &allow);
	CHECK(r != NULL && api_route_permits(r, GP_ROLE_PROVIDER));
	/* tokens are an admin's */
	r = find("POST", "/v1/tokens", &status, &allow);
	CHECK(r != NULL && !api_route_permits(r, GP_ROLE_USER));
	CHECK(r != NULL && api_route_permits(r, GP_ROLE_ADMIN));
	r = find("GET", "/v1/tokens", &status, &allow);
	CHECK(r != NULL && strcmp(r->refusal,
	    "only an admin may list tokens") == 0);
	r = find("POST", "/v1/tokens/3/revoke", &status, &allow);
	CHECK(r != NULL && !api_route_permits(r, GP_ROLE_PROVIDER));
	/* a token id that is not one: "no token 'x'" to anyone */
	r = find("POST", "/v1/tokens/x/revoke", &status, &allow);
	CHECK(r != NULL && api_route_permits(r, GP_ROLE_USER));
	/* the dashboard's files need no token */
	r = find("GET", "/", &status, &allow);
	CHECK(r != NULL && (r->flags & API_PUBLIC) != 0);
	r = find("HEAD", "/ui/app.js", &status, &allow);
	CHECK(r != NULL && (r->flags & API_PUBLIC) != 0);
	r = find("GET", "/ui/", &status, &allow);
	CHECK(r != NULL && (r->flags & API_PUBLIC) != 0);
	r = find("GET", "/v1/whoami", &status, &allow);
	CHECK(r != NULL && (r->flags & API_PUBLIC) == 0);
}

TEST(body_limits_and_streams)
{
	const struct api_route *r;
	unsigned allow;
	int status;

	CHECK_EQ(api_route_body_limit(NULL), GP_SUBMIT_BODY_MAX);
	r = find("POST", "/v1/jobs", &status, &allow);
	CHECK_EQ(api_route_body_limit(r), GP_SUBMIT_BODY_MAX);
	r = find("POST", "/v1/agent/reports", &status, &allow);
	CHECK_EQ(api_route_body_limit(r), 1 << 20);
	r = find("POST", "/v1/agent/jobs/3/1/log", &status, &allow);
	CHECK_EQ(api_route_body_limit(r), 1 << 20);
	r = find("POST", "/v1/agent/jobs/3/1/started", &status, &allow);
	CHECK_EQ(api_route_body_limit(r), GP_SUBMIT_BODY_MAX);
	r = find("POST", "/v1/agent/jobs/3/1/checkpoint/commit", &status,
	    &allow);
	CHECK_EQ(api_route_body_limit(r), 32u << 20);
	r = find("POST", "/v1/uploads", &status, &allow);
	CHECK_EQ(api_route_body_limit(r), 32u << 20);
	r = find("POST", "/v1/agent/jobs/3/1/output", &status, &allow);
	CHECK_EQ(api_route_body_limit(r), 32u << 20);
	r = find("POST", "/v1/images", &status, &allow);
	CHECK_EQ(api_route_body_limit(r), 1 << 20);
	r = find("POST", "/v1/images/blobs/missing", &status, &allow);
	CHECK(r != NULL && r->stream == NULL);
	CHECK_EQ(api_route_body_limit(r), 1 << 20);
	/* uploads are streamed to their owner, not collected */
	r = find("PUT", "/v1/images/blobs/sha256:ab", &status, &allow);
	CHECK(r != NULL && r->stream != NULL);
	r = find("PUT", "/v1/agent/jobs/3/1/checkpoint/chunks/ab", &status,
	    &allow);
	CHECK(r != NULL && r->stream != NULL);
	r = find("PUT", "/v1/uploads/5/chunks/ab", &status, &allow);
	CHECK(r != NULL && r->stream != NULL);
	/* a bad job id is not a checkpoint route */
	r = find("PUT", "/v1/agent/jobs/x/1/checkpoint/chunks/ab", &status,
	    &allow);
	CHECK(r == NULL && status == 404);
	r = find("PUT", "/v1/agent/jobs/3/1000001/checkpoint/chunks/ab",
	    &status, &allow);
	CHECK(r == NULL);
}

/* The order of the tables: the subsystem that owns a URL answers it. */
TEST(precedence)
{
	const struct api_route *a, *b;
	unsigned allow;
	int status;

	a = find("GET", "/v1/jobs/5/checkpoints", &status, &allow);
	b = find("GET", "/v1/jobs/5/checkpoints/latest", &status, &allow);
	CHECK(a != NULL && a == b);
	CHECK(a != NULL && a->handle != NULL);
	b = find("GET", "/v1/jobs/5", &status, &allow);
	CHECK(b != NULL && a != b);
	/* the user's checkpoint request (POST .../checkpoint) is a job's */
	b = find("POST", "/v1/jobs/5/checkpoint", &status, &allow);
	CHECK(b != NULL && strcmp(b->path, "/v1/jobs/*/checkpoint") == 0);
	b = find("GET", "/v1/jobs/5/output", &status, &allow);
	CHECK(b != NULL && strcmp(b->path, "/v1/jobs/*/output/**") == 0);
	b = find("GET", "/v1/agent/jobs/5/1/image/manifest", &status, &allow);
	CHECK(b != NULL && strstr(b->path, "/image/") != NULL);
	b = find("GET", "/v1/agent/jobs/5/1/data/1", &status, &allow);
	CHECK(b != NULL && strstr(b->path, "/data/") != NULL);
}

int
main(void)
{
	RUN(path_patterns);
	RUN(every_route_reachable);
	RUN(method_not_allowed);
	RUN(roles);
	RUN(body_limits_and_streams);
	RUN(precedence);
	return unit_report();
}
