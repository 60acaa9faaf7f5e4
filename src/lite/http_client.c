/*
 * http_client.c (lite): the gp_http_client calls the CLI's everyday
 * commands make (gp_http_client_new, gp_http_request, ...), for the
 * `gpupool` executable, over http_lite.c instead of libcurl. Only plain
 * http:// coordinators: for any other URL the command line goes to the
 * whole program in libgpupool.so (load.c), which has libcurl.
 */
#include "http_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord_urls.h"
#include "gp.h"
#include "http_lite.h"
#include "lite/lite.h"

/* One http_lite connection per coordinator, made on first use. */
struct gp_http_client {
	struct gp_coord_urls urls;
	struct gp_http_lite *lite[GP_COORD_URLS_MAX];
	char *token;
};

void
gp_http_global_init(void)
{
}

/* The client of url[i]: made now if it was not. 0 or GP_E*. */
static int
lite_of(struct gp_http_client *c, int i, struct gp_http_lite **out)
{
	char err[256];
	int rc;

	if (c->lite[i] == NULL) {
		rc = gp_http_lite_new(c->urls.url[i], c->token, &c->lite[i],
		    err, sizeof(err));
		if (rc == GP_EINVAL) {
			/* https:// (or a URL libcurl may make sense of). */
			exit(gp_lite_run_full());
		}
		if (rc != 0)
			return rc;
	}
	*out = c->lite[i];
	return 0;
}

struct gp_http_client *
gp_http_client_new(const char *base_url, const char *token, const char *ca_file)
{
	struct gp_http_client *c;
	struct gp_http_lite *first;
	char err[256];

	(void)ca_file; /* plain http only: nothing to verify */
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	if (gp_coord_urls_parse(base_url, &c->urls, err, sizeof(err)) != 0) {
		fprintf(stderr, "gpupool: %s\n", err);
		free(c);
		return NULL;
	}
	if (!gp_coord_urls_all_start(base_url, "http://"))
		exit(gp_lite_run_full()); /* https://: libcurl's */
	if ((token != NULL && (c->token = strdup(token)) == NULL) ||
	    lite_of(c, 0, &first) != 0) {
		gp_http_client_free(c);
		return NULL;
	}
	return c;
}

void
gp_http_client_free(struct gp_http_client *c)
{
	int i;

	if (c == NULL)
		return;
	for (i = 0; i < c->urls.n; i++)
		gp_http_lite_free(c->lite[i]);
	if (c->token != NULL) {
		memset(c->token, 0, strlen(c->token)); /* a secret */
		free(c->token);
	}
	free(c);
}

int
gp_http_request(struct gp_http_client *c, const char *method, const char *path,
    const void *body, size_t body_len, const char *content_type,
    long timeout_ms, struct gp_http_response *resp)
{
	struct gp_http_lite *lite;
	enum gp_coord_try outcome;
	int rc;

	gp_coord_urls_begin(&c->urls);
	for (;;) {
		if ((rc = lite_of(c, c->urls.cur, &lite)) != 0)
			return rc;
		rc = gp_http_lite_request(lite, method, path, body, body_len,
		    content_type, timeout_ms, resp);
		if (c->urls.n < 2)
			return rc;
		if (rc == 0)
			outcome = resp->not_leader ? GP_COORD_NOT_LEADER :
						     GP_COORD_ANSWERED;
		else
			outcome = resp->no_connect ? GP_COORD_NO_CONNECT :
						     GP_COORD_LOST;
		if (!gp_coord_urls_after(&c->urls, outcome,
		    rc == 0 ? resp->leader : NULL))
			return rc;
		gp_http_response_fini(resp);
		if (gp_coord_urls_pause_ms(&c->urls) > 0)
			usleep((useconds_t)gp_coord_urls_pause_ms(&c->urls) *
			    1000);
	}
}
