/*
 * gpu_fake.c: fake GPUs for tests and benchmarks (--fake-gpus
 * N[:MODEL[:MEM_MIB[:CAPABILITY]]]). UUIDs are "GPU-fake-<node>-<i>", stable per node
 * name. Their readings are made up, plausible and plainly fake: an idle
 * GPU reads 0 % and 0 MiB at a cool idle power; one a job holds swings
 * slowly between about 55 and 95 % with half its memory in use, and its
 * temperature and power follow. The processes using each GPU come from a
 * file the tests write (--fake-gpu-procs: "GPU_INDEX PID" lines).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpu.h"
#include "gp.h"
#include "jobspec.h"
#include "util.h"

struct fake {
	int count;
	char model[GP_GPU_MODEL_MAX];
	int64_t mem_mib;
	int capability;
	char node[64];	
	char procs[PATH_MAX];	/* "": no process file */
};

int
gp_gpu_fake_parse(const char *spec, int *count, char *model,
    size_t modellen, int64_t *mem_mib, int *capability)
{
	char buf[256], *colon, *model_part = NULL, *mem_part = NULL;
	char *cap_part = NULL;
	int64_t c, mem = 16384;
	int cap = 0;

	if (spec == NULL || gp_strlcpy(buf, spec, sizeof(buf)) >= sizeof(buf))
		return GP_EINVAL;
	if ((colon = strchr(buf, ':')) != NULL) {
		*colon = '\0';
		model_part = colon + 1;
		if ((colon = strchr(model_part, ':')) != NULL) {
			*colon = '\0';
			mem_part = colon + 1;
			if ((colon = strchr(mem_part, ':')) != NULL) {
				*colon = '\0';
				cap_part = colon + 1;
			}
		}
	}
	if (gp_parse_int(buf, 0, GP_GPUS_MAX, &c) != 0)
		return GP_EINVAL;
	if (model_part != NULL && (model_part[0] == '\0' ||
	    strlen(model_part) >= modellen || strlen(model_part) > 64))
		return GP_EINVAL;
	if (mem_part != NULL && (gp_parse_mib(mem_part, &mem) != 0 ||
	    mem <= 0 || mem > GP_MIB_MAX))
		return GP_EINVAL;
	if (cap_part != NULL && gp_capability_parse(cap_part, &cap) != 0)
		return GP_EINVAL;
	*count = (int)c;
	if (capability != NULL)
		*capability = cap;
	gp_strlcpy(model, model_part != NULL ? model_part : "Fake GPU",
	    modellen);
	*mem_mib = mem;
	return 0;
}

static int
fake_open(const char *spec, const char *node_name, void **state, char *err,
    size_t errlen)
{
	struct fake *f;

	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return GP_ENOMEM;
	if (gp_gpu_fake_parse(spec, &f->count, f->model, sizeof(f->model),
	    &f->mem_mib, &f->capability) != 0) {
		snprintf(err, errlen, "bad --fake-gpus \"%s\": want "
		    "N[:MODEL[:MEM_MIB[:CAPABILITY]]] with N in 0..%d", spec,
		    GP_GPUS_MAX);
		free(f);
		return GP_EINVAL;
	}
	gp_strlcpy(f->node, node_name != NULL ? node_name : "node",
	    sizeof(f->node));
	*state = f;
	return 0;
}

static int
fake_list(void *state, struct gp_gpu_info **out, int *n)
{
	struct fake *f = state;
	struct gp_gpu_info *gpus = NULL;
	int i;

	if (f->count > 0 &&
	    (gpus = calloc((size_t)f->count, sizeof(*gpus))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < f->count; i++) {
		gpus[i].index = i;
		snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-fake-%s-%d",
		    f->node, i);
		gp_strlcpy(gpus[i].model, f->model, sizeof(gpus[i].model));
		gpus[i].mem_mib = f->mem_mib;
		gpus[i].capability = f->capability;
	}
	*out = gpus;
	*n = f->count;
	return 0;
}

static int
fake_usage(void *state, int index, int busy, struct gp_gpu_usage *usage)
{
	struct fake *f = state;
	double t = (double)gp_mono_ms() / 1000.0, wave;

	if (index < 0 || index >= f->count)
		return GP_EINVAL;
	/* A slow wave (a minute or so), shifted per GPU. */
	wave = sin(t / 9.0 + index * 1.7);
	if (busy) {
		usage->util = 75 + (int)(20.0 * wave);
		usage->mem_used_mib = (int64_t)((double)f->mem_mib *
		    (0.5 + 0.1 * wave));
	} else {
		usage->util = 0;
		usage->mem_used_mib = 0;
	}
	usage->temp_c = 33 + index % 4 + usage->util * 2 / 5;
	usage->power_mw = 25000 + usage->util * 2200;
	return 0;
}

int
gp_gpu_fake_procs_file(void *state, const char *path)
{
	struct fake *f = state;

	if (path == NULL || gp_strlcpy(f->procs, path, sizeof(f->procs)) >=
	    sizeof(f->procs)) {
		f->procs[0] = '\0';
		return GP_EINVAL;
	}
	return 0;
}

static int
fake_processes(void *state, int index, pid_t *pids, int max)
{
	struct fake *f = state;
	char *text = NULL, *line, *next;
	long gpu, pid;
	int n = 0, rc;

	if (index < 0 || index >= f->count)
		return GP_EINVAL;
	if (f->procs[0] == '\0')
		return 0;
	rc = gp_read_file(f->procs, 1 << 20, &text, NULL);
	if (rc == GP_ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	for (line = text; line != NULL && n < max; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if (sscanf(line, "%ld %ld", &gpu, &pid) != 2 || gpu != index ||
		    pid <= 0 || pid > INT_MAX)
			continue;
		/* Alive: signal 0 succeeds, or the pid is another user's. */
		if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
			continue;
		pids[n++] = (pid_t)pid;
	}
	free(text);
	return n;
}

static void
fake_close(void *state)
{
	free(state);
}

const struct gp_gpu_ops gp_gpu_fake_ops = {
	.name = "fake",
	.open = fake_open,
	.list = fake_list,
	.usage = fake_usage,
	.close = fake_close,
	.processes = fake_processes,
};
