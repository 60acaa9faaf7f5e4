/*
 * fuzz_http_lite.c: libFuzzer harness for the CLI's HTTP answer parser
 * (gp_http_answer_*, http_lite.c over http-parser): the bytes a
 * coordinator, or whatever listens at the configured URL, sends back.
 * The first byte picks where the answer is cut in two, as reads cut it;
 * the rest is the answer. Whole or cut, the parser must reach the same
 * result (status, body, X-Gpupool-* values), a complete answer has a
 * status of 200..999 and a NUL-terminated body within the limit, and a
 * refusal says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "http_lite.h"

#define MAX_BODY 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	int rc;
	struct gp_http_response resp;
	int keep_alive;
};

static void
parse(const char *text, size_t len, size_t cut, struct outcome *o)
{
	struct gp_http_answer *a = gp_http_answer_new(MAX_BODY);
	const char *why = NULL;

	memset(o, 0, sizeof(*o));
	if (a == NULL)
		abort();
	o->rc = gp_http_answer_feed(a, text, cut, &why);
	if (o->rc == 0)
		o->rc = gp_http_answer_feed(a, text + cut, len - cut, &why);
	if (o->rc == 0)
		o->rc = gp_http_answer_eof(a, &why);
	if (o->rc < 0 && why == NULL)
		abort(); /* a refusal says why */
	if (o->rc == 1) {
		if (gp_http_answer_take(a, &o->resp, &o->keep_alive) != 0)
			abort();
		if (o->resp.status < 200 || o->resp.status > 999 ||
		    o->resp.body == NULL || o->resp.body_len > MAX_BODY ||
		    o->resp.body[o->resp.body_len] != '\0')
			abort();
	}
	gp_http_answer_free(a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole, cut;
	const char *text;
	size_t len, at;

	if (size < 1)
		return 0;
	text = (const char *)data + 1;
	len = size - 1;
	at = len > 0 ? data[0] % (len + 1) : 0;
	parse(text, len, len, &whole);
	parse(text, len, at, &cut);
	if (whole.rc != cut.rc)
		abort();
	if (whole.rc == 1 &&
	    (whole.resp.status != cut.resp.status ||
	        whole.resp.body_len != cut.resp.body_len ||
	        memcmp(whole.resp.body, cut.resp.body, whole.resp.body_len) !=
	            0 ||
	        whole.resp.log_offset != cut.resp.log_offset ||
	        whole.resp.log_done != cut.resp.log_done ||
	        strcmp(whole.resp.job_state, cut.resp.job_state) != 0 ||
	        whole.keep_alive != cut.keep_alive))
		abort();
	gp_http_response_fini(&whole.resp);
	gp_http_response_fini(&cut.resp);
	return 0;
}
