/*
 * fuzz_data_request.c: libFuzzer harness for the bodies of the data
 * requests (src/coord/data.c). Every input goes to each decoder:
 * - the first request of a data set or job output upload
 *   (gp_upload_request_decode: POST /v1/uploads, POST
 *   /v1/agent/jobs/ID/ATTEMPT/output): an accepted request holds a valid
 *   data set name (or none), and a manifest with safe paths and chunk
 *   counts that match the sizes, no label, and no chunk name listed with
 *   two sizes (the store checks stored chunks against these sizes);
 * - a share or unshare (gp_share_request_decode): a valid user name;
 * - a quota change (gp_quota_request_decode): a limit of at least 1, or
 *   none.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "gp.h"
#include "jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[GP_CKPT_DATA_NAME_LEN], err[256];
	struct gp_ckpt_totals tot, again;
	json_t *m, *sizes, *f, *c, *v;
	int64_t want, s;
	size_t i, k;
	char user[GP_CKPT_DATA_NAME_LEN];
	int64_t bytes = -1;
	int named;

	err[0] = '\0';
	if (gp_share_request_decode((const char *)data, size, user, err,
	        sizeof(err)) == 0) {
		if (!gp_name_valid(user))
			abort();
	} else if (err[0] == '\0') {
		abort();
	}
	err[0] = '\0';
	if (gp_quota_request_decode((const char *)data, size, &bytes, err,
	        sizeof(err)) == 0) {
		if (bytes < 0)
			abort();
	} else if (err[0] == '\0') {
		abort();
	}
	for (named = 0; named < 2; named++) {
		err[0] = '\0';
		if (gp_upload_request_decode((const char *)data, size, named,
		        1LL << 40, name, &m, &tot, err, sizeof(err)) != 0) {
			if (err[0] == '\0')
				abort();
			continue;
		}
		if ((named && !gp_data_name_valid(name)) ||
		    (!named && name[0] != '\0') ||
		    json_object_get(m, "label") != NULL ||
		    gp_ckpt_manifest_check(m, 1LL << 40, 0, &again, err,
		        sizeof(err)) != 0 ||
		    again.bytes != tot.bytes || again.chunks != tot.chunks)
			abort();
		sizes = json_object();
		json_array_foreach(json_object_get(m, "files"), i, f)
		{
			s = json_integer_value(json_object_get(f, "size"));
			json_array_foreach(json_object_get(f, "chunks"), k, c)
			{
				want = s - (int64_t)k * GP_CKPT_CHUNK_SIZE;
				if (want > GP_CKPT_CHUNK_SIZE)
					want = GP_CKPT_CHUNK_SIZE;
				v = json_object_get(sizes,
				    json_string_value(c));
				if (v != NULL && json_integer_value(v) != want)
					abort();
				json_object_set_new(sizes, json_string_value(c),
				    json_integer(want));
			}
		}
		json_decref(sizes);
		json_decref(m);
	}
	return 0;
}
