/*
 * gpu_nvml.c: real NVIDIA GPUs through NVML, loaded with dlopen so that
 * the binary neither links against nor needs the driver. The few NVML
 * declarations below are our own (no CUDA headers on build machines).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpu.h"
#include "gp.h"
#include "util.h"

typedef int nvml_return;	/* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef void *nvml_device;	/* nvmlDevice_t */

struct nvml_memory {		/* nvmlMemory_t (v1) */
	unsigned long long total, free, used;
};

struct nvml_utilization {	/* nvmlUtilization_t */
	unsigned int gpu, memory;
};

struct nvml {
	void *lib;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*count)(unsigned int *);
	nvml_return (*handle)(unsigned int, nvml_device *);
	nvml_return (*name)(nvml_device, char *, unsigned int);
	nvml_return (*uuid)(nvml_device, char *, unsigned int);
	nvml_return (*memory)(nvml_device, struct nvml_memory *);
	nvml_return (*util)(nvml_device, struct nvml_utilization *);
	unsigned int n;
};

static int
resolve(struct nvml *v, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		size_t offset;
	} syms[] = {
		{"nvmlInit_v2", offsetof(struct nvml, init)},
		{"nvmlShutdown", offsetof(struct nvml, shutdown)},
		{"nvmlDeviceGetCount_v2", offsetof(struct nvml, count)},
		{"nvmlDeviceGetHandleByIndex_v2", offsetof(struct nvml, handle)},
		{"nvmlDeviceGetName", offsetof(struct nvml, name)},
		{"nvmlDeviceGetUUID", offsetof(struct nvml, uuid)},
		{"nvmlDeviceGetMemoryInfo", offsetof(struct nvml, memory)},
		{"nvmlDeviceGetUtilizationRates", offsetof(struct nvml, util)},
	};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(syms); i++) {
		void *sym = dlsym(v->lib, syms[i].name);
		if (sym == NULL) {
			snprintf(err, errlen, "libnvidia-ml.so.1 lacks %s",
			    syms[i].name);
			return GP_EIO;
		}
		/* Function pointers and void * share a size on Linux. */
		memcpy((char *)v + syms[i].offset, &sym, sizeof(sym));
	}
	return 0;
}

static int
nvml_open(const char *spec, const char *node_name, void **state, char *err,
    size_t errlen)
{
	struct nvml *v;
	int rc;

	(void)spec;
	(void)node_name;
	if ((v = calloc(1, sizeof(*v))) == NULL)
		return GP_ENOMEM;
	v->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (v->lib == NULL) {
		snprintf(err, errlen, "no NVML (libnvidia-ml.so.1 not found)");
		free(v);
		return GP_ENOENT;
	}
	if (resolve(v, err, errlen) != 0)
		goto fail;
	if ((rc = v->init()) != 0) {
		snprintf(err, errlen, "nvmlInit_v2 failed: NVML error %d", rc);
		goto fail;
	}
	if ((rc = v->count(&v->n)) != 0) {
		snprintf(err, errlen, "nvmlDeviceGetCount_v2 failed: "
		    "NVML error %d", rc);
		v->shutdown();
		goto fail;
	}
	if (v->n > 64)
		v->n = 64;
	*state = v;
	return 0;
fail:
	dlclose(v->lib);
	free(v);
	return GP_EIO;
}

static int
nvml_list(void *state, struct gp_gpu_info **out, int *n)
{
	struct nvml *v = state;
	struct gp_gpu_info *gpus = NULL;
	unsigned int i;

	if (v->n > 0 && (gpus = calloc(v->n, sizeof(*gpus))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < v->n; i++) {
		nvml_device dev;
		struct nvml_memory mem;

		if (v->handle(i, &dev) != 0 ||
		    v->name(dev, gpus[i].model, sizeof(gpus[i].model)) != 0 ||
		    v->uuid(dev, gpus[i].uuid, sizeof(gpus[i].uuid)) != 0 ||
		    v->memory(dev, &mem) != 0) {
			free(gpus);
			return GP_EIO;
		}
		gpus[i].model[sizeof(gpus[i].model) - 1] = '\0';
		gpus[i].uuid[sizeof(gpus[i].uuid) - 1] = '\0';
		gpus[i].index = (int)i;
		gpus[i].mem_mib = (int64_t)(mem.total >> 20);
	}
	*out = gpus;
	*n = (int)v->n;
	return 0;
}

static int
nvml_usage(void *state, int index, struct gp_gpu_usage *usage)
{
	struct nvml *v = state;
	struct nvml_utilization u;
	struct nvml_memory mem;
	nvml_device dev;

	if (index < 0 || (unsigned int)index >= v->n ||
	    v->handle((unsigned int)index, &dev) != 0)
		return GP_EINVAL;
	if (v->util(dev, &u) != 0 || v->memory(dev, &mem) != 0)
		return GP_EIO;
	usage->util = u.gpu > 100 ? 100 : (int)u.gpu;
	usage->mem_used_mib = (int64_t)(mem.used >> 20);
	return 0;
}

static void
nvml_close(void *state)
{
	struct nvml *v = state;

	v->shutdown();
	dlclose(v->lib);
	free(v);
}

const struct gp_gpu_ops gp_gpu_nvml_ops = {
	.name = "nvml",
	.open = nvml_open,
	.list = nvml_list,
	.usage = nvml_usage,
	.close = nvml_close,
};
