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

#include "gp.h"
#include "http_lite.h"
#include "lite/lite.h"

struct gp_http_client {
	struct gp_http_lite *lite;
};

void
gp_http_global_init(void)
{
}

struct gp_http_client *
gp_http_client_new(const char *base_url, const char *token, const char *ca_file)
{
	struct gp_http_client *c;
	char err[256];
	int rc;

	(void)ca_file; /* plain http only: nothing to verify */
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	rc = gp_http_lite_new(base_url, token, &c->lite, err, sizeof(err));
	if (rc == GP_EINVAL) {
		/* https:// (or a URL libcurl may make sense of). */
		free(c);
		exit(gp_lite_run_full());
	}
	if (rc != 0) {
		free(c);
		return NULL;
	}
	return c;
}

void
gp_http_client_free(struct gp_http_client *c)
{
	if (c == NULL)
		return;
	gp_http_lite_free(c->lite);
	free(c);
}

int
gp_http_request(struct gp_http_client *c, const char *method, const char *path,
    const void *body, size_t body_len, const char *content_type,
    long timeout_ms, struct gp_http_response *resp)
{
	return gp_http_lite_request(c->lite, method, path, body, body_len,
	    content_type, timeout_ms, resp);
}
