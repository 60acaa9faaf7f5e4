/*
 * fuzz_agent_report.c: libFuzzer harness for the coordinator's checks of
 * what agents send besides registrations: heartbeats, started and finished
 * reports, and the owner's offer they may carry. The first byte picks the
 * kind (and the node's GPU count for the offer), the rest is the body. A body
 * that passes must have the shape the handlers then rely on.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "coord/coordd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const kinds[] = {"heartbeat", "started",
	    "finished"};
	const char *kind;
	json_t *body;
	char err[256];

	if (size < 1)
		return 0;
	kind = kinds[data[0] % 3];
	body = json_loadb((const char *)data + 1, size - 1,
	    JSON_REJECT_DUPLICATES, NULL);
	if (body == NULL)
		return 0;
	if (api_check_agent_body(kind, body, err, sizeof(err)) == 0) {
		json_t *v = json_object_get(body, "running");
		if (!json_is_object(body) ||
		    !json_is_integer(json_object_get(body, "node_id")))
			abort();
		if (v != NULL && (!json_is_array(v) ||
				     json_array_size(v) > 4096))
			abort();
		/* A job's network bytes: absent or non-negative counts. */
		v = json_object_get(body, "network");
		if (v != NULL && (!json_is_array(v) ||
				     json_array_size(v) > 4096))
			abort();
		v = json_object_get(body, "net_received_bytes");
		if (v != NULL && (!json_is_integer(v) ||
				     json_integer_value(v) < 0))
			abort();
		/* The offer a heartbeat or finished report may carry. */
		if ((v = json_object_get(body, "offer")) != NULL) {
			struct offer o;
			if (offer_decode(v, data[0] % 65, &o, err,
				sizeof(err)) == 0 &&
			    ((data[0] % 65 < 64 &&
				 (o.lent >> (data[0] % 65)) != 0) ||
				o.seq < 0 || o.cpus < 0 || o.mem_mib < 0 ||
				o.max_job_s < 0))
				abort();
		}
	}
	json_decref(body);
	return 0;
}
