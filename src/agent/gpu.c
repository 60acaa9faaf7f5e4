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

int
gp_gpu_minor(struct gp_gpu_set *set, int index)
{
	int m;

	if (set->ops != NULL && set->state != NULL && set->ops->minor != NULL &&
	    (m = set->ops->minor(set->state, index)) >= 0)
		return m;
	return index;
}

int
gp_gpu_process_util(struct gp_gpu_set *set, int index, pid_t *pids,
    int *util, int max)
{
	if (set->ops == NULL || set->state == NULL ||
	    set->ops->process_util == NULL)
		return GP_ENOENT;
	return set->ops->process_util(set->state, index, pids, util, max);
}

int64_t
gp_gpu_process_bytes(struct gp_gpu_set *set, int index, pid_t pid)
{
	if (set->ops == NULL || set->state == NULL ||
	    set->ops->process_bytes == NULL)
		return GP_ENOENT;
	return set->ops->process_bytes(set->state, index, pid);
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
gp_gpu_usage(struct gp_gpu_set *set, int index, int busy,
    struct gp_gpu_usage *usage)
{
	int ret;

	memset(usage, 0, sizeof(*usage));
	usage->temp_c = usage->power_mw = -1;
	if (set->ops == NULL || set->state == NULL)
		return GP_ENOENT;
	if (index < 0 || index >= set->n)
		return GP_EINVAL;
	ret = set->ops->usage(set->state, index, busy, usage);
	if (ret != 0) {
		memset(usage, 0, sizeof(*usage));
		usage->temp_c = usage->power_mw = -1;
	}
	return ret;
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

int
gp_gpu_cgroup_is_pool(const char *text)
{
	const char *line = text, *end, *path, *hit;
	size_t n;

	/* Lines "HIERARCHY:CONTROLLERS:PATH"; jobs live in the agent's
	 * "gpupool-<node>-<pid>/<job>" cgroups (cgroup.c). */
	while (line != NULL && *line != '\0') {
		end = strchr(line, '\n');
		n = end != NULL ? (size_t)(end - line) : strlen(line);
		path = memchr(line, ':', n);
		if (path != NULL)
			path = memchr(path + 1, ':', n - (size_t)(path + 1 -
			    line));
		for (hit = path; hit != NULL && hit < line + n;) {
			hit = memmem(hit, (size_t)(line + n - hit),
			    "/gpupool-", 9);
			if (hit == NULL)
				break;
			/* A job's cgroup is below the agent's. */
			if (memchr(hit + 1, '/', (size_t)(line + n - hit - 1)) !=
			    NULL)
				return 1;
			hit++;
		}
		line = end != NULL ? end + 1 : NULL;
	}
	return 0;
}

int
gp_gpu_pid_is_pool(pid_t pid)
{
	char path[64], *text = NULL;
	int pool;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (gp_read_file(path, 64 * 1024, &text, NULL) != 0)
		return 0;
	pool = gp_gpu_cgroup_is_pool(text);
	free(text);
	return pool;
}

#define PROCS_MAX 1024

int
gp_gpu_foreign_processes(struct gp_gpu_set *set, int index, pid_t *pids,
    int max)
{
	pid_t *all;
	int i, n, count = 0;

	if (set->ops == NULL || set->state == NULL ||
	    set->ops->processes == NULL)
		return 0;
	if (index < 0 || index >= set->n)
		return GP_EINVAL;
	if ((all = calloc(PROCS_MAX, sizeof(*all))) == NULL)
		return GP_ENOMEM;
	n = set->ops->processes(set->state, index, all, PROCS_MAX);
	for (i = 0; i < n; i++) {
		if (all[i] <= 0 || gp_gpu_pid_is_pool(all[i]))
			continue;
		if (pids != NULL && count < max)
			pids[count] = all[i];
		count++;
	}
	free(all);
	return n < 0 ? n : count;
}

int
gp_gpu_set_fake_procs(struct gp_gpu_set *set, const char *path)
{
	if (set->ops != &gp_gpu_fake_ops || set->state == NULL)
		return GP_EINVAL;
	return gp_gpu_fake_procs_file(set->state, path);
}
