/*
 * fuzz_agent_reports.c: libFuzzer harness for the coordinator's check of
 * an agent's batch of reports (POST /v1/agent/reports). The input is the
 * body. A body that passes must have the shape apply_reports then relies
 * on: an integer node_id, 1 to API_REPORTS_MAX objects, each with a
 * started or finished event, a positive job id, an attempt in range, no
 * node_id of its own.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coordd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body, *list, *r;
	const char *event;
	char err[320];
	size_t i;

	body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES,
	    NULL);
	if (body == NULL)
		return 0;
	if (api_check_reports(body, err, sizeof(err)) == 0) {
		list = json_object_get(body, "reports");
		if (!json_is_integer(json_object_get(body, "node_id")) ||
		    !json_is_array(list) || json_array_size(list) < 1 ||
		    json_array_size(list) > API_REPORTS_MAX)
			abort();
		json_array_foreach(list, i, r)
		{
			event = json_string_value(json_object_get(r, "event"));
			if (event == NULL || (strcmp(event, "started") != 0 &&
						 strcmp(event, "finished") != 0))
				abort();
			if (json_integer_value(json_object_get(r, "job_id")) <
				1 ||
			    json_integer_value(json_object_get(r, "attempt")) <
				1 ||
			    json_integer_value(json_object_get(r, "attempt")) >
				1000000 ||
			    json_object_get(r, "node_id") != NULL)
				abort();
		}
	} else if (strlen(err) == 0) {
		abort();
	}
	json_decref(body);
	return 0;
}
