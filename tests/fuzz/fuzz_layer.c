/*
 * fuzz_layer.c: libFuzzer harness for the layer unpacker's checks
 * (agent/layer.c). Bytes starting with 0 are an archive scanned with
 * every check of the unpacker (libarchive's tar, gzip and zstd readers,
 * the entry checks, the link bookkeeping, the bomb limits), writing
 * nothing; otherwise they are one entry "TYPE PATH\0LINK" for the pure
 * entry check, whose accepted paths must be clean and relative, and
 * whose accepted symbolic links must not climb out.
 */
#include <sys/stat.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/layer.h"
#include "gp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned types[] = {S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR,
	    S_IFIFO, 0};
	struct gp_layer_limits lim;
	struct gp_layer_stats st;
	enum gp_layer_action action;
	char err[600], clean[4200], clean_link[4200], *text, *nul;
	const char *link = NULL;

	if (size < 2)
		return 0;
	if (data[0] == 0) {
		gp_layer_limits_default(&lim);
		lim.max_bytes = 64 << 20;
		lim.ratio_floor = 1 << 20;
		lim.max_entries = 10000;
		if (gp_layer_scan_memory(data + 1, size - 1, &lim, &st, err,
		        sizeof(err)) != 0 &&
		    err[0] == '\0')
			abort();
		return 0;
	}
	if ((text = malloc(size)) == NULL)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if ((nul = memchr(text, '\0', size - 1)) != NULL &&
	    (size_t)(nul - text) + 1 < size - 1)
		link = nul + 1;
	if (gp_layer_entry_check(text, types[data[0] % GP_ARRAY_LEN(types)],
	        link, clean, sizeof(clean), clean_link, sizeof(clean_link),
	        &action, err, sizeof(err)) == 0) {
		if (clean[0] == '/' || strstr(clean, "../") == clean ||
		    strstr(clean, "/../") != NULL ||
		    (strlen(clean) >= 3 &&
		        strcmp(clean + strlen(clean) - 3, "/..") == 0) ||
		    strcmp(clean, "..") == 0)
			abort();
		if (action == GP_LAYER_HARDLINK &&
		    (clean_link[0] == '\0' || clean_link[0] == '/' ||
		        strcmp(clean_link, "..") == 0 ||
		        strncmp(clean_link, "../", 3) == 0 ||
		        strstr(clean_link, "/../") != NULL))
			abort();
	} else if (err[0] == '\0')
		abort();
	free(text);
	return 0;
}
