/*
 * libnvidia-ml.c: a fake NVML (libnvidia-ml.so.1) for tests, written from
 * the public NVML reference: one GPU whose name, UUID, memory total,
 * utilisation and processes come from the state file (state.h), read on
 * each call. Memory "used" is 0: the fake driver keeps no cross-process
 * books (the interposition library's NVML answers are what tests check).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <unistd.h>
#include <string.h>

#include "state.h"

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_NOT_FOUND 6

static char device_token;	/* the one device handle */

struct memory { unsigned long long total, free, used; };
struct memory_v2 {
	unsigned int version;
	unsigned long long total, reserved, free, used;
};
struct utilization { unsigned int gpu, memory; };
struct process_sample {
	unsigned int pid;
	unsigned long long timeStamp;
	unsigned int smUtil, memUtil, encUtil, decUtil;
};
struct process_info {		/* nvmlProcessInfo_v2_t */
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
};

EXPORT nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
	return r == NVML_SUCCESS ? "Success" : "Fake NVML error";
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len)
{
	snprintf(v, len, "550.00-fake");
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = 1;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i,
    nvmlDevice_t *d)
{
	if (i != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*d = &device_token;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name,
    unsigned int len)
{
	struct fake_state s;

	(void)d;
	fake_state_read(&s);
	snprintf(name, len, "%s", s.name);
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid,
    unsigned int len)
{
	struct fake_state s;

	(void)d;
	fake_state_read(&s);
	snprintf(uuid, len, "%s", s.uuid);
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *m)
{
	(void)d;
	*m = 0;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d,
    int *major, int *minor)
{
	(void)d;
	*major = 9;
	*minor = 0;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, struct memory *m)
{
	struct fake_state s;

	(void)d;
	fake_state_read(&s);
	m->total = s.total_bytes;
	m->used = s.reserved_bytes;	/* v1: the driver's part is used */
	m->free = s.total_bytes - s.reserved_bytes;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d,
    struct memory_v2 *m)
{
	struct fake_state s;

	(void)d;
	fake_state_read(&s);
	m->total = s.total_bytes;
	m->reserved = s.reserved_bytes;
	m->used = 0;
	m->free = s.total_bytes - s.reserved_bytes;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d,
    struct utilization *u)
{
	struct fake_state s;

	(void)d;
	fake_state_read(&s);
	u->gpu = s.util;
	u->memory = s.util / 2;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
    struct process_sample *out, unsigned int *count,
    unsigned long long since)
{
	struct fake_state s;
	unsigned int i;

	(void)d;
	(void)since;
	fake_state_read(&s);
	if (s.no_proc_util)
		return 3;	/* NVML_ERROR_NOT_SUPPORTED */
	if (s.nproc_util == 0)
		return NVML_ERROR_NOT_FOUND;
	if (out == NULL || *count < (unsigned)s.nproc_util) {
		*count = (unsigned)s.nproc_util;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (i = 0; i < (unsigned)s.nproc_util; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].pid = s.proc_util_pid[i];
		out[i].smUtil = s.proc_util[i];
		out[i].timeStamp = since + 1;
	}
	*count = (unsigned)s.nproc_util;
	return NVML_SUCCESS;
}
static nvmlReturn_t
processes(unsigned int *count, struct process_info *out)
{
	struct fake_state s;
	unsigned int i;

	unsigned long long (*own)(void);
	unsigned long long mine = 0;
	void *p;

	fake_state_read(&s);
	/* This process, when the fake libcuda in it made a context. */
	if ((p = dlsym(RTLD_DEFAULT, "fakecuda_process_bytes")) != NULL) {
		memcpy(&own, &p, sizeof(p));
		mine = own();
	}
	if (mine > 0 && s.nprocs < FAKE_PROCS_MAX)
		s.procs[s.nprocs++] = (unsigned)getpid();
	if (*count < (unsigned)s.nprocs || (out == NULL && s.nprocs > 0)) {
		*count = (unsigned)s.nprocs;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (i = 0; i < (unsigned)s.nprocs; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].pid = s.procs[i];
		if (mine > 0 && s.procs[i] == (unsigned)getpid())
			out[i].usedGpuMemory = mine;
	}
	*count = (unsigned)s.nprocs;
	return NVML_SUCCESS;
}
/* Only the _v2 layout (24 bytes a process) is exported. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d,
    unsigned int *count, struct process_info *out)
{
	(void)d;
	return processes(count, out);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d,
    unsigned int *count, struct process_info *out)
{
	(void)d;
	*count = 0;
	(void)out;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor,
    unsigned int *t)
{
	(void)d;
	(void)sensor;
	*t = 40;
	return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	(void)d;
	*mw = 50000;
	return NVML_SUCCESS;
}
