/*
 * fuzz_register.c: libFuzzer harness for the coordinator's decoder of
 * agent registrations (POST /v1/agent/register), which is fed bytes from
 * the network. A decoded node must be consistent with what was checked.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coordd.h"
#include "gp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct node tmp;
	json_t *body, *running = NULL;
	char err[256];
	int i;

	body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES,
	    NULL);
	if (body == NULL)
		return 0;
	memset(&tmp, 0, sizeof(tmp));
	if (json_is_object(body) &&
	    register_decode(body, &tmp, &running, err, sizeof(err)) == 0) {
		if (!gp_name_valid(tmp.name) || tmp.cpus < 1 ||
		    tmp.mem_mib < 0 || tmp.ngpus < 0 || tmp.ngpus > 64 ||
		    !json_is_array(running))
			abort();
		for (i = 0; i < tmp.ngpus; i++)
			if (tmp.gpus[i].index != i || tmp.gpus[i].mem_mib < 0)
				abort();
		json_decref(running);
	}
	free(tmp.gpus);
	json_decref(body);
	return 0;
}
