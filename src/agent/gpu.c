/*
 * gpu.c: picks a GPU backend (fake or NVML) and keeps the list of GPUs the
 * node lends. The backends live in gpu_fake.c and gpu_nvml.c.
 */
#include "agent/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

int
gp_gpu_open(const char *fake_spec, const char *node_name,
    struct gp_gpu_set *set, char *err, size_t errlen)
{
	const struct gp_gpu_ops *ops;
	void *state = NULL;
	int ret;

	memset(set, 0, sizeof(*set));
	ops = fake_spec != NULL ? &gp_gpu_fake_ops : &gp_gpu_nvml_ops;
	ret = ops->open(fake_spec, node_name, &state, err, errlen);
	if (ret == GP_ENOENT && ops == &gp_gpu_nvml_ops) {
		/* No NVML: lend no GPU rather than refuse to start. */
		set->ops = ops;
		return 0;
	}
	if (ret != 0)
		return ret;
	ret = ops->list(state, &set->gpus, &set->n);
	if (ret != 0) {
		snprintf(err, errlen, "%s: cannot list GPUs: %s", ops->name,
		    gp_strerror(ret));
		ops->close(state);
		return ret;
	}
	set->ops = ops;
	set->state = state;
	return 0;
}

void
gp_gpu_close(struct gp_gpu_set *set)
{
	if (set->ops != NULL && set->state != NULL)
		set->ops->close(set->state);
	free(set->gpus);
	memset(set, 0, sizeof(*set));
}

int
gp_gpu_discover(const char *fake_spec, struct gp_gpu_info **out, int *n,
    char *err, size_t errlen)
{
	const struct gp_gpu_ops *ops;
	char host[256];
	void *state = NULL;
	int ret;

	if (gethostname(host, sizeof(host)) != 0)
		gp_strlcpy(host, "localhost", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	ops = fake_spec != NULL ? &gp_gpu_fake_ops : &gp_gpu_nvml_ops;
	ret = ops->open(fake_spec, host, &state, err, errlen);
	if (ret == GP_ENOENT) {
		*out = NULL;
		*n = 0;
		return ret;
	}
	if (ret != 0)
		return ret;
	ret = ops->list(state, out, n);
	if (ret != 0)
		snprintf(err, errlen, "%s: cannot list GPUs: %s", ops->name,
		    gp_strerror(ret));
	ops->close(state);
	return ret;
}
