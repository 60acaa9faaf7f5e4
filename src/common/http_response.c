/*
 * http_response.c: what both HTTP clients share about an answer
 * (http_client.h): releasing it and the error text shown to a person.
 * Kept apart from http_client.c so the CLI's small client (http_lite.c)
 * has it without libcurl.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "http_client.h"

void
gp_http_response_fini(struct gp_http_response *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->body_len = 0;
}

void
gp_http_error_text(const struct gp_http_response *resp, char *out, size_t len)
{
	json_t *root, *err;

	if (resp->status == 0) {
		snprintf(out, len, "%s",
		    resp->error[0] ? resp->error : "no answer");
		return;
	}
	if (resp->body != NULL) {
		root = json_loadb(resp->body, resp->body_len, 0, NULL);
		err = json_object_get(root, "error");
		if (json_is_string(err)) {
			snprintf(out, len, "%s", json_string_value(err));
			json_decref(root);
			return;
		}
		json_decref(root);
	}
	snprintf(out, len, "HTTP %ld", resp->status);
}
