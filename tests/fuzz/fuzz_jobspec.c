/*
 * fuzz_jobspec.c: libFuzzer harness for the submit-body decoder. Whatever
 * decodes must encode, and the encoding must decode to the same spec;
 * abort() when it does not. Corpus: tests/fuzz/corpus/jobspec/.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
same_spec(const struct gp_jobspec *a, const struct gp_jobspec *b)
{
	return strcmp(a->name, b->name) == 0 &&
	    json_equal(a->command, b->command) && json_equal(a->env, b->env) &&
	    a->gpus == b->gpus && a->gpu_mem_mib == b->gpu_mem_mib &&
	    strcmp(a->gpu_model, b->gpu_model) == 0 && a->cpus == b->cpus &&
	    a->mem_mib == b->mem_mib && a->time_limit_s == b->time_limit_s &&
	    strcmp(a->group, b->group) == 0 &&
	    a->max_price_micro == b->max_price_micro;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_jobspec spec, again;
	char err[256], err2[256];
	json_t *enc;
	char *text;

	err[0] = '\0';
	if (gp_jobspec_decode((const char *)data, size, &spec, err,
		sizeof(err)) != 0) {
		/* Refused: it must say why. */
		if (err[0] == '\0')
			abort();
		gp_jobspec_fini(&spec);
		return 0;
	}
	if (gp_jobspec_validate(&spec, err, sizeof(err)) != 0)
		abort();
	enc = gp_jobspec_encode(&spec);
	if (enc == NULL)
		abort();
	text = json_dumps(enc, JSON_COMPACT);
	if (text == NULL)
		abort();
	if (gp_jobspec_decode(text, strlen(text), &again, err2,
		sizeof(err2)) != 0 ||
	    !same_spec(&spec, &again))
		abort();
	free(text);
	json_decref(enc);
	gp_jobspec_fini(&again);
	gp_jobspec_fini(&spec);
	return 0;
}
