/*
 * fuzz_data_spec.c: libFuzzer harness for the `submit --data` operand
 * parser (gp_data_spec_parse) and the mount path rule it applies
 * (gp_mount_path_check). What is accepted must be what the agent relies
 * on: a valid data set name, an absolute path without '.', '..' or empty
 * components that covers no reserved directory, and an object the job
 * spec validator takes as it is.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "jobspec.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_jobspec spec;
	char *text, err[256];
	const char *path, *name;
	json_t *d = NULL;

	if ((text = malloc(size + 1)) == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = '\0';
	if (gp_mount_path_check(text, err, sizeof(err)) == 0) {
		if (text[0] != '/' || strstr(text, "//") != NULL ||
		    strstr(text, "/../") != NULL ||
		    strstr(text, "/./") != NULL || strcmp(text, "/") == 0 ||
		    (strncmp(text, "/proc", 5) == 0 &&
		        (text[5] == '\0' || text[5] == '/')))
			abort();
	} else if (err[0] == '\0') {
		abort(); /* a refusal says why */
	}
	err[0] = '\0';
	if (gp_data_spec_parse(text, &d, err, sizeof(err)) == 0) {
		name = json_string_value(json_object_get(d, "name"));
		path = json_string_value(json_object_get(d, "path"));
		if (name == NULL || !gp_data_name_valid(name) || path == NULL ||
		    gp_mount_path_check(path, err, sizeof(err)) != 0)
			abort();
		/* An accepted operand makes a valid job spec. */
		gp_jobspec_init(&spec);
		json_array_append_new(spec.command, json_string("true"));
		gp_strlcpy(spec.name, "job", sizeof(spec.name));
		json_array_append(spec.data, d);
		if (gp_jobspec_validate(&spec, err, sizeof(err)) != 0)
			abort();
		gp_jobspec_fini(&spec);
		json_decref(d);
	} else if (err[0] == '\0') {
		abort();
	}
	free(text);
	return 0;
}
