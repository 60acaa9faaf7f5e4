/*
 * gpu_nvml.c: real NVIDIA GPUs through NVML, loaded with dlopen so that
 * the binary neither links against nor needs the driver. The few NVML
 * declarations below are our own (no CUDA headers on build machines).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
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

struct nvml_memory_v2 {		/* nvmlMemory_v2_t */
	unsigned int version;
	unsigned long long total, reserved, free, used;
};
#define NVML_MEMORY_V2 ((unsigned int)sizeof(struct nvml_memory_v2) | \
    (2u << 24))

struct nvml_process_sample {	/* nvmlProcessUtilizationSample_t */
	unsigned int pid;
	unsigned long long timestamp;	/* microseconds */
	unsigned int sm, mem, enc, dec;
};

struct nvml_utilization {	/* nvmlUtilization_t */
	unsigned int gpu, memory;
};

/*
 * Process lists: nvmlProcessInfo_v1_t for the unversioned calls, the
 * _v2 layout (with MIG instance ids) for _v2 and _v3; some 12.x headers
 * gave the _v3 calls a 32-byte layout (usedGpuCcProtectedMemory), which
 * processes_call detects. Only pid is read; it comes first in all.
 */
#define NVML_ERROR_NOT_SUPPORTED     3
#define NVML_ERROR_NO_PERMISSION     4
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define PROC_ENTRY_MAX 32	/* the largest layout, in bytes */
#define PROC_LIST_MAX  512

typedef nvml_return (*nvml_procs_fn)(nvml_device, unsigned int *, void *);

struct nvml_procs {
	nvml_procs_fn fn;
	int version;	/* 3, 2 or 1: which layout fn writes */
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
	/* nvmlDeviceGetMemoryInfo_v2 (with reserved), or NULL. */
	nvml_return (*memory_v2)(nvml_device, struct nvml_memory_v2 *);
	nvml_return (*util)(nvml_device, struct nvml_utilization *);
	nvml_return (*minor)(nvml_device, unsigned int *); /* or NULL */
	/* nvmlDeviceGetProcessUtilization, or NULL. */
	nvml_return (*proc_util)(nvml_device, struct nvml_process_sample *,
	    unsigned int *, unsigned long long);
	unsigned long long util_seen[64];	/* last sample, per GPU */
	struct nvml_procs compute, graphics;	/* fn NULL: not in the lib */
	/* Sensors: NULL when the library lacks them. */
	nvml_return (*temperature)(nvml_device, int, unsigned int *);
	nvml_return (*power)(nvml_device, unsigned int *);
	/* nvmlDeviceGetCudaComputeCapability, or NULL. */
	nvml_return (*capability)(nvml_device, int *, int *);
	unsigned int n;
};

static int processes_call(const struct nvml_procs *procs, nvml_device dev,
    pid_t *pids, int *n, int max, int64_t *bytes);

/* The newest of name_v3, name_v2 and name that the library has. */
static void
resolve_procs(void *lib, const char *name, struct nvml_procs *out)
{
	static const char *const suffix[] = {"_v3", "_v2", ""};
	char sym[96];
	void *p;
	int i;

	out->fn = NULL;
	for (i = 0; i < 3; i++) {
		snprintf(sym, sizeof(sym), "%s%s", name, suffix[i]);
		if ((p = dlsym(lib, sym)) != NULL) {
			memcpy(&out->fn, &p, sizeof(p));
			out->version = 3 - i;
			return;
		}
	}
}

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
	{
		void *sym = dlsym(v->lib, "nvmlDeviceGetMinorNumber");
		void *t = dlsym(v->lib, "nvmlDeviceGetTemperature");
		void *w = dlsym(v->lib, "nvmlDeviceGetPowerUsage");
		void *cc = dlsym(v->lib, "nvmlDeviceGetCudaComputeCapability");
		void *pu = dlsym(v->lib, "nvmlDeviceGetProcessUtilization");
		void *m2 = dlsym(v->lib, "nvmlDeviceGetMemoryInfo_v2");
		memcpy(&v->proc_util, &pu, sizeof(pu));
		memcpy(&v->memory_v2, &m2, sizeof(m2));
		memcpy(&v->capability, &cc, sizeof(cc));
		memcpy(&v->minor, &sym, sizeof(sym));
		memcpy(&v->temperature, &t, sizeof(t));
		memcpy(&v->power, &w, sizeof(w));
	}
	resolve_procs(v->lib, "nvmlDeviceGetComputeRunningProcesses",
	    &v->compute);
	resolve_procs(v->lib, "nvmlDeviceGetGraphicsRunningProcesses",
	    &v->graphics);
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
		/*
		 * What jobs can have: less what the driver keeps (about
		 * 0.5 GiB on an H100), which no process can allocate.
		 */
		if (v->memory_v2 != NULL) {
			struct nvml_memory_v2 m2 = {.version = NVML_MEMORY_V2};

			if (v->memory_v2(dev, &m2) == 0 && m2.total ==
			    mem.total && m2.reserved < m2.total)
				gpus[i].mem_mib = (int64_t)((m2.total -
				    m2.reserved) >> 20);
		}
		gpus[i].proc_util = v->proc_util != NULL;
		{
			int major = 0, minor = 0;
			if (v->capability != NULL &&
			    v->capability(dev, &major, &minor) == 0 &&
			    major >= 1 && major <= 99 && minor >= 0 &&
			    minor <= 9)
				gpus[i].capability = major * 10 + minor;
		}
	}
	*out = gpus;
	*n = (int)v->n;
	return 0;
}

#define NVML_TEMPERATURE_GPU 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_NOT_FOUND 6
#define PROC_SAMPLES_MAX 1024

/*
 * Each process's SM utilisation since the last call: the mean of its
 * samples (NVML keeps a ring of them per GPU, each with a timestamp).
 */
static int
nvml_process_util(void *state, int index, pid_t *pids, int *util, int max)
{
	struct nvml *v = state;
	struct nvml_process_sample *s;
	unsigned int n = 0, i;
	unsigned long long since, newest;
	nvml_device dev;
	int count[64], out = 0, k, rc;
	long sum[64];

	if (v->proc_util == NULL)
		return GP_ENOENT;
	if (index < 0 || index >= 64 || (unsigned int)index >= v->n ||
	    v->handle((unsigned int)index, &dev) != 0)
		return GP_EINVAL;
	since = v->util_seen[index];
	rc = v->proc_util(dev, NULL, &n, since);
	if (rc == NVML_ERROR_NOT_FOUND)
		return 0;	/* no process has run since */
	if (rc != 0 && rc != NVML_ERROR_INSUFFICIENT_SIZE)
		return GP_EIO;
	if (n == 0)
		return 0;
	if (n > PROC_SAMPLES_MAX)
		n = PROC_SAMPLES_MAX;
	if ((s = calloc(n, sizeof(*s))) == NULL)
		return GP_ENOMEM;
	if ((rc = v->proc_util(dev, s, &n, since)) != 0) {
		free(s);
		return rc == NVML_ERROR_NOT_FOUND ? 0 : GP_EIO;
	}
	if (max > 64)
		max = 64;
	newest = since;
	for (i = 0; i < n && i < PROC_SAMPLES_MAX; i++) {
		if (s[i].timestamp > newest)
			newest = s[i].timestamp;
		for (k = 0; k < out && pids[k] != (pid_t)s[i].pid; k++)
			;
		if (k == out) {
			if (out == max)
				continue;
			pids[out] = (pid_t)s[i].pid;
			sum[out] = 0;
			count[out++] = 0;
		}
		sum[k] += s[i].sm > 100 ? 100 : s[i].sm;
		count[k]++;
	}
	v->util_seen[index] = newest;
	free(s);
	for (k = 0; k < out; k++)
		util[k] = (int)(sum[k] / (count[k] ? count[k] : 1));
	return out;
}

static int
nvml_usage(void *state, int index, int busy, struct gp_gpu_usage *usage)
{
	struct nvml *v = state;
	struct nvml_utilization u;
	struct nvml_memory mem;
	nvml_device dev;
	unsigned int x;

	(void)busy;
	if (index < 0 || (unsigned int)index >= v->n ||
	    v->handle((unsigned int)index, &dev) != 0)
		return GP_EINVAL;
	if (v->util(dev, &u) != 0 || v->memory(dev, &mem) != 0)
		return GP_EIO;
	usage->util = u.gpu > 100 ? 100 : (int)u.gpu;
	usage->mem_used_mib = (int64_t)(mem.used >> 20);
	/* Not every GPU has every sensor (NOT_SUPPORTED): -1, unknown. */
	usage->temp_c = v->temperature != NULL &&
		v->temperature(dev, NVML_TEMPERATURE_GPU, &x) == 0 && x < 250
	    ? (int)x
	    : -1;
	usage->power_mw = v->power != NULL && v->power(dev, &x) == 0 &&
		x <= 100000000
	    ? (int)x
	    : -1;
	return 0;
}

/*
 * Appends the pids one list call reports to pids[*n..max). The buffer is
 * filled with 0xff first: when the _v3 call leaves bytes [24c, 32c)
 * untouched its entries are 24 bytes, else 32.
 */
int
gp_gpu_nvml_processes_call(int (*fn)(void *, unsigned int *, void *),
    int version, void *dev, pid_t *pids, int *n, int max)
{
	struct nvml_procs procs = {fn, version};

	return processes_call(&procs, dev, pids, n, max, NULL);
}

static int
processes_call(const struct nvml_procs *procs, nvml_device dev, pid_t *pids,
    int *n, int max, int64_t *bytes)
{
	unsigned char *buf = NULL;
	unsigned int cap = PROC_LIST_MAX, count, i, pid;
	size_t stride, j;
	nvml_return rc;
	int tries;

	if (procs->fn == NULL)
		return 0;
	for (tries = 0; tries < 3; tries++) {
		free(buf);
		if ((buf = malloc((size_t)cap * PROC_ENTRY_MAX)) == NULL)
			return GP_ENOMEM;
		memset(buf, 0xff, (size_t)cap * PROC_ENTRY_MAX);
		count = cap;
		rc = procs->fn(dev, &count, buf);
		/* Processes started in between: ask again, with room. */
		if (rc != NVML_ERROR_INSUFFICIENT_SIZE || count > 65536)
			break;
		cap = count + 64;
	}
	if (rc == NVML_ERROR_NOT_SUPPORTED) {
		free(buf);
		return 0;
	}
	if (rc != 0 || count > cap) {
		free(buf);
		return rc == NVML_ERROR_NO_PERMISSION ? GP_EPERM : GP_EIO;
	}
	if (procs->version == 1)
		stride = 16;
	else if (procs->version == 2)
		stride = 24;
	else {
		stride = 24;
		for (j = (size_t)count * 24; j < (size_t)count * 32; j++)
			if (buf[j] != 0xff) {
				stride = 32;
				break;
			}
	}
	for (i = 0; i < count && *n < max; i++) {
		memcpy(&pid, buf + i * stride, sizeof(pid));
		if (pid == 0 || pid > (unsigned int)INT32_MAX)
			continue;
		/* usedGpuMemory follows pid (8 bytes in) in every layout. */
		if (bytes != NULL) {
			unsigned long long used;

			memcpy(&used, buf + i * stride + 8, sizeof(used));
			bytes[*n] = used >= (1ULL << 62) ? -1 : (int64_t)used;
		}
		pids[(*n)++] = (pid_t)pid;
	}
	free(buf);
	return 0;
}

static int
nvml_processes(void *state, int index, pid_t *pids, int max)
{
	struct nvml *v = state;
	nvml_device dev;
	int n = 0, rc, i, j, unique;

	if (index < 0 || (unsigned int)index >= v->n ||
	    v->handle((unsigned int)index, &dev) != 0)
		return GP_EINVAL;
	if ((rc = processes_call(&v->compute, dev, pids, &n, max, NULL)) != 0)
		return rc;
	i = n;
	if ((rc = processes_call(&v->graphics, dev, pids, &n, max, NULL)) !=
	    0)
		return rc;
	/* A process with both a compute and a graphics context: once. */
	for (unique = i; i < n; i++) {
		for (j = 0; j < unique && pids[j] != pids[i]; j++)
			;
		if (j == unique)
			pids[unique++] = pids[i];
	}
	return unique;
}

static int64_t
nvml_process_bytes(void *state, int index, pid_t pid)
{
	struct nvml *v = state;
	nvml_device dev;
	pid_t pids[64];
	int64_t bytes[64];
	int n = 0, i, rc;

	if (index < 0 || (unsigned int)index >= v->n ||
	    v->handle((unsigned int)index, &dev) != 0)
		return GP_EINVAL;
	if ((rc = processes_call(&v->compute, dev, pids, &n, 64, bytes)) != 0)
		return rc;
	for (i = 0; i < n; i++)
		if (pids[i] == pid)
			return bytes[i] >= 0 ? bytes[i] : GP_ENOENT;
	return GP_ENOENT;
}

static int
nvml_minor(void *state, int index)
{
	struct nvml *v = state;
	nvml_device dev;
	unsigned int m;

	if (v->minor == NULL || index < 0 || (unsigned int)index >= v->n ||
	    v->handle((unsigned int)index, &dev) != 0 || v->minor(dev, &m) != 0 ||
	    m > 255)
		return GP_ENOENT;
	return (int)m;
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
	.processes = nvml_processes,
	.minor = nvml_minor,
	.process_util = nvml_process_util,
	.process_bytes = nvml_process_bytes,
};
