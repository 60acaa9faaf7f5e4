/*
 * fuzz_proxy_head.c: libFuzzer harness for the job port proxy's parsers
 * (coord/proxy_parse.c): a browser's request head and its Host are
 * untrusted bytes. An accepted head has a method of capital letters, a
 * path starting with '/', a Host, and its length within the input; every
 * field stays within its buffer; the host parser yields a job id and a
 * port from 1 to 65535 or nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coord/proxy.h"
#include "jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_head h;
	int64_t job;
	int part, port, rc;

	rc = proxy_head_parse((const char *)data, size, &h);
	if (rc > 0) {
		if ((size_t)rc > size || h.path[0] != '/' || h.host[0] == '\0' ||
		    h.method[0] < 'A' || h.method[0] > 'Z')
			abort();
		if (strlen(h.path) >= sizeof(h.path) ||
		    strlen(h.host) >= sizeof(h.host) ||
		    strlen(h.cookie) >= sizeof(h.cookie))
			abort();
		if (proxy_host_parse(h.host, "localhost", &job, &part,
		    &port) == 0 && (job < 1 || port < 1 || port > 65535 ||
		    part < 0 || part >= GP_NODES_MAX))
			abort();
	}
	return 0;
}
