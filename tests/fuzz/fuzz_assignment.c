/*
 * fuzz_assignment.c: libFuzzer harness for the agent's poll-answer decoder
 * (src/agent/assignment.c). Whatever the bytes, decoding must not crash,
 * leak or read out of bounds; an accepted answer must hold what the
 * decoder promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/assignment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_poll_answer answer;
	char err[256];
	int i;

	if (gp_assignment_decode((const char *)data, size, &answer, err,
	    sizeof(err)) == 0) {
		for (i = 0; i < answer.nassignments; i++) {
			struct gp_assignment *a = &answer.assignments[i];
			/* No command only with an image (its digest). */
			if ((a->argc < 1 && (strncmp(a->image, "sha256:", 7) !=
			    0 || strlen(a->image) != 71)) ||
			    a->argv == NULL || a->argv[a->argc] != NULL ||
			    a->id.job_id < 1 || a->id.attempt < 1 ||
			    a->ngpus > GP_GPUS_MAX ||
			    (a->nenv > 0 && a->env[a->nenv] != NULL) ||
			    (a->argc > 0 && strchr(a->argv[0], '\0') == NULL))
				abort();
		}
	}
	gp_poll_answer_fini(&answer);
	return 0;
}
