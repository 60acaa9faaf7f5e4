/*
 * fuzz_ckpt_manifest.c: libFuzzer harness for the checkpoint manifest
 * decoder (gp_ckpt_manifest_check), which the coordinator runs on every
 * commit body and the agent on every manifest it downloads. An accepted
 * manifest must satisfy what the store relies on: safe relative paths,
 * 64-hex chunk names, one chunk per 4 MiB, totals that add up.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "gp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_ckpt_totals tot;
	int64_t bytes = 0, chunks = 0, s;
	json_t *m, *f, *c;
	char err[256];
	size_t i, k;
	int meta;

	m = json_loadb((const char *)data, size,
	    JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	if (m == NULL)
		return 0;
	for (meta = 0; meta < 2; meta++) {
		if (gp_ckpt_manifest_check(m, 1LL << 40, meta, &tot, err,
			sizeof(err)) != 0) {
			if (err[0] == '\0')
				abort(); /* a refusal must say why */
			continue;
		}
		bytes = chunks = 0;
		json_array_foreach(json_object_get(m, "files"), i, f)
		{
			const char *path = json_string_value(
			    json_object_get(f, "path"));
			size_t n = path != NULL ? strlen(path) : 0;
			if (path == NULL || path[0] == '/' ||
			    strcmp(path, "..") == 0 ||
			    strncmp(path, "../", 3) == 0 ||
			    strstr(path, "/../") != NULL ||
			    (n >= 3 && strcmp(path + n - 3, "/..") == 0))
				abort();
			s = json_integer_value(json_object_get(f, "size"));
			if (gp_ckpt_chunk_count(s) !=
			    (int64_t)json_array_size(json_object_get(f,
				"chunks")))
				abort();
			json_array_foreach(json_object_get(f, "chunks"), k, c)
			{
				if (!gp_ckpt_name_valid(json_string_value(c)))
					abort();
				chunks++;
			}
			bytes += s;
		}
		if (bytes != tot.bytes || chunks != tot.chunks ||
		    tot.files != (int64_t)json_array_size(
				     json_object_get(m, "files")) ||
		    tot.files > GP_CKPT_FILES_MAX)
			abort();
	}
	json_decref(m);
	return 0;
}
