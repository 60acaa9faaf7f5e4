/*
 * reply.c: the coordinator's HTTP answers, shared by every handler file
 * (api.c, ckpt.c, data.c, image.c, acct_api.c): a buffer, a JSON value,
 * or an error message as {"error": "..."}, each with the protocol header.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "joblog.h"
#include "leader.h"
#include "state.h"

/* This thread's capture (held.c): where its answers go instead. */
static _Thread_local struct reply_capture *capture;

void
reply_capture_set(struct reply_capture *c)
{
	capture = c;
}

enum MHD_Result
reply_queue(struct MHD_Connection *conn, unsigned status,
    struct MHD_Response *resp)
{
	enum MHD_Result rc;

	if (capture != NULL) {
		/* One answer a request, as libmicrohttpd takes. */
		if (capture->resp != NULL) {
			MHD_destroy_response(resp);
			return MHD_NO;
		}
		capture->status = status;
		capture->resp = resp;
		return MHD_YES;
	}
	rc = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return rc;
}

enum MHD_Result
reply_raw(struct MHD_Connection *conn, int status, char *text, size_t len,
    const char *ctype, struct MHD_Response **out)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	MHD_add_response_header(resp, "X-Gpupool-Protocol", "1");
	if (out != NULL) {
		*out = resp;
		return MHD_YES;
	}
	return reply_queue(conn, (unsigned)status, resp);
}

/*
 * A 503 while this coordinator has lost the lead (state_refusal; a blob
 * record's transaction given up as not the leader, say) carries what a
 * standby's does, so that clients follow the new leader.
 */
static enum MHD_Result
reply_unled(struct MHD_Connection *conn, char *text)
{
	struct MHD_Response *resp;
	char leader[512];

	if (reply_raw(conn, 503, text, strlen(text), "application/json",
	    &resp) != MHD_YES)
		return MHD_NO;
	leader_url(leader, sizeof(leader));
	MHD_add_response_header(resp, "X-Gpupool-Role", "standby");
	if (leader[0] != '\0')
		MHD_add_response_header(resp, "X-Gpupool-Leader", leader);
	MHD_add_response_header(resp, "Retry-After", "1");
	/* (a held request's, on held.c's thread: captured) */
	return reply_queue(conn, 503, resp);
}

enum MHD_Result
reply_json(struct MHD_Connection *conn, int status, json_t *value)
{
	char *text;

	if (value == NULL)
		value = json_pack("{s:s}", "error", "out of memory");
	text = json_dumps(value, JSON_COMPACT);
	json_decref(value);
	if (text == NULL)
		return MHD_NO;
	if (status == 503 && state_refusal() == STATE_REFUSE_NOT_LEADER)
		return reply_unled(conn, text);
	return reply_raw(conn, status, text, strlen(text), "application/json",
	    NULL);
}

enum MHD_Result
reply_error(struct MHD_Connection *conn, int status, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return reply_json(conn, status, json_pack("{s:s}", "error", msg));
}
