/*
 * fuzz_control.c: libFuzzer harness for the control socket's request
 * decoder (src/agent/control.c), fed what any local user may send.
 * Whatever the bytes, decoding must not crash, leak or read out of
 * bounds; an accepted request holds what control.h promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_control_request req;
	char err[256];

	memset(&req, 0, sizeof(req));
	if (gp_control_decode((const char *)data, size, &req, err,
	    sizeof(err)) != 0) {
		if (err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL)
			abort();
		return 0;
	}
	if (req.cmd < GP_CONTROL_STATUS || req.cmd > GP_CONTROL_POLICY_SHOW ||
	    (req.now != 0 && req.now != 1) ||
	    (req.now && req.cmd != GP_CONTROL_RECLAIM) ||
	    (req.gpus != 0 && req.cmd != GP_CONTROL_RECLAIM &&
	    req.cmd != GP_CONTROL_RESUME))
		abort();
	return 0;
}
