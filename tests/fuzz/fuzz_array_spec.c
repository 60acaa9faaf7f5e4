/*
 * fuzz_array_spec.c: libFuzzer harness for the job array's task indices
 * (gp_array_parse, `submit --array` and POST /v1/jobs/array). What is
 * accepted is 1 to GP_ARRAY_MAX indices, ascending without repeats, each
 * in 0..GP_ARRAY_TASK_MAX, and a limit of 0 (none) or 1..GP_ARRAY_MAX; a
 * refusal says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, err[256];
	int *tasks = NULL, n = -1, limit = -1, i, rc;

	if ((text = malloc(size + 1)) == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = '\0';
	rc = gp_array_parse(text, &tasks, &n, &limit, err, sizeof(err));
	if (rc == 0) {
		if (n < 1 || n > GP_ARRAY_MAX || tasks == NULL || limit < 0 ||
		    limit > GP_ARRAY_MAX)
			abort();
		for (i = 0; i < n; i++)
			if (tasks[i] < 0 || tasks[i] > GP_ARRAY_TASK_MAX ||
			    (i > 0 && tasks[i] <= tasks[i - 1]))
				abort();
		free(tasks);
	} else if (rc == GP_EINVAL && err[0] == '\0') {
		abort();
	} else if (n != -1 || limit != -1) {
		abort(); /* written only on success */
	}
	free(text);
	return 0;
}
