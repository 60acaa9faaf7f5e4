/*
 * libcuda.c: a fake CUDA driver (libcuda.so.1) for tests, written from
 * the public driver API reference: one device whose memory total comes
 * from the state file (state.h). Allocations hand out addresses from a
 * counter and never touch memory; the device's free memory is what this
 * process has not taken (each process sees the whole device, as a real
 * one would without other users). Kernel launches only count. Every
 * entry point a framework resolves is exported and reachable through
 * cuGetProcAddress too, with the CUDA 12 names (_v2, _ptsz).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "state.h"

#undef cuGetProcAddress

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long used, next_address = 0x7f0000000000ULL;
static int initialised;
static _Atomic unsigned long long launches;

/* A tiny table of live allocations: address or handle -> size. */
#define LIVE_MAX 65536
static struct { unsigned long long key, size; } live[LIVE_MAX];

static unsigned long long total_bytes;	/* read at cuInit */
static unsigned long long ctx_bytes;	/* the same */
static int ctx_live;		/* this process made a context */

/*
 * What this process holds on the device, its context included, for the
 * fake NVML's process list (0 before a context).
 */
EXPORT unsigned long long fakecuda_process_bytes(void);
EXPORT unsigned long long
fakecuda_process_bytes(void)
{
	unsigned long long b;

	pthread_mutex_lock(&lock);
	b = ctx_live ? used : 0;
	pthread_mutex_unlock(&lock);
	return b;
}

/* A context takes ctx_bytes of the device, once a process. */
static void
context_made(void)
{
	pthread_mutex_lock(&lock);
	if (!ctx_live) {
		ctx_live = 1;
		used += ctx_bytes;
	}
	pthread_mutex_unlock(&lock);
}

static unsigned long long
total(void)
{
	return total_bytes;
}

static CUresult
take(unsigned long long *key_out, size_t size)
{
	unsigned long long t = total(), key;
	int i;

	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (used + size > t) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	key = next_address;
	next_address += (size + 511) & ~511ULL;
	for (i = 0; i < LIVE_MAX; i++)
		if (live[i].key == 0) {
			live[i].key = key;
			live[i].size = size;
			break;
		}
	if (i == LIVE_MAX) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	used += size;
	pthread_mutex_unlock(&lock);
	*key_out = key;
	return CUDA_SUCCESS;
}

static CUresult
give(unsigned long long key)
{
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < LIVE_MAX; i++)
		if (live[i].key == key && key != 0) {
			used -= live[i].size;
			live[i].key = 0;
			pthread_mutex_unlock(&lock);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

/*
 * As a real driver may, look a symbol up while being loaded: a preloaded
 * dlsym must answer without waiting for its own start-up (the library
 * dlopens us from there).
 */
static void *volatile seen_at_load;

__attribute__((constructor)) static void
fake_loaded(void)
{
	/* Kept (not a tail call): glibc's dlsym looks at its caller. */
	seen_at_load = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
}

EXPORT CUresult cuInit(unsigned int flags)
{
	struct fake_state s;

	(void)flags;
	fake_state_read(&s);
	total_bytes = s.total_bytes > s.reserved_bytes ?
	    s.total_bytes - s.reserved_bytes : 0;
	ctx_bytes = s.ctx_bytes;
	initialised = 1;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDriverGetVersion(int *v)
{
	*v = 12040;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	struct fake_state s;

	(void)d;
	fake_state_read(&s);
	snprintf(name, (size_t)len, "%s", s.name);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
	struct fake_state s;

	(void)d;
	fake_state_read(&s);
	*bytes = s.total_bytes;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	(void)d;
	*v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	(void)d;
	*c = (CUcontext)(uintptr_t)0x1000;
	context_made();
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	(void)d;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxCreate_v2(CUcontext *c, unsigned int flags, CUdevice d)
{
	(void)flags;
	(void)d;
	*c = (CUcontext)(uintptr_t)0x2000;
	context_made();
	return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
	(void)c;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxDestroy_v2(CUcontext c)
{
	(void)c;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSynchronize(void)
{
	return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	(void)flags;
	*s = (CUstream)(uintptr_t)0x3000;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	(void)s;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorName(CUresult e, const char **s)
{
	*s = e == CUDA_SUCCESS ? "CUDA_SUCCESS" :
	    e == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" :
	    "CUDA_ERROR_FAKE";
	return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorString(CUresult e, const char **s)
{
	return cuGetErrorName(e, s);
}
EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_out)
{
	unsigned long long t = total();

	pthread_mutex_lock(&lock);
	*free_bytes = used < t ? t - used : 0;
	pthread_mutex_unlock(&lock);
	*total_out = t;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	return take((unsigned long long *)p, n);
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w,
    size_t h, unsigned int elem)
{
	size_t pw = (w + 511) & ~(size_t)511;
	CUresult r;

	(void)elem;
	if ((r = take((unsigned long long *)p, pw * h)) == CUDA_SUCCESS)
		*pitch = pw;
	return r;
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int f)
{
	(void)f;
	return take((unsigned long long *)p, n);
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	return give(p);
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
	(void)s;
	return take((unsigned long long *)p, n);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s)
{
	return cuMemAllocAsync(p, n, s);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	(void)s;
	return give(p);
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
	return cuMemFreeAsync(p, s);
}
EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *pp)
{
	(void)pp;
	*pool = (CUmemoryPool)(uintptr_t)0x4000;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	(void)pool;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n,
    CUmemoryPool pool, CUstream s)
{
	(void)pool;
	(void)s;
	return take((unsigned long long *)p, n);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n,
    CUmemoryPool pool, CUstream s)
{
	return cuMemAllocFromPoolAsync(p, n, pool, s);
}
EXPORT CUresult cuMemGetAllocationGranularity(size_t *g,
    const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags o)
{
	(void)prop;
	(void)o;
	*g = 2 << 20;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n,
    const CUmemAllocationProp *prop, unsigned long long flags)
{
	(void)prop;
	(void)flags;
	return take(h, n);
}
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	return give(h);
}
EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align,
    CUdeviceptr addr, unsigned long long flags)
{
	(void)align;
	(void)addr;
	(void)flags;
	pthread_mutex_lock(&lock);
	*p = next_address;
	next_address += (n + 511) & ~511ULL;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
	(void)p;
	(void)n;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off,
    CUmemGenericAllocationHandle h, unsigned long long flags)
{
	(void)p;
	(void)n;
	(void)off;
	(void)h;
	(void)flags;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
	(void)p;
	(void)n;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t n,
    const CUmemAccessDesc *d, size_t count)
{
	(void)p;
	(void)n;
	(void)d;
	(void)count;
	return CUDA_SUCCESS;
}

static size_t
format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 1;
	}
}
EXPORT CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
	size_t h = d->Height ? d->Height : 1;

	return take((unsigned long long *)a,
	    d->Width * h * d->NumChannels * format_bytes(d->Format));
}
EXPORT CUresult cuArray3DCreate_v2(CUarray *a,
    const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	size_t h = d->Height ? d->Height : 1, z = d->Depth ? d->Depth : 1;

	return take((unsigned long long *)a,
	    d->Width * h * z * d->NumChannels * format_bytes(d->Format));
}
EXPORT CUresult cuArrayDestroy(CUarray a)
{
	return give((unsigned long long)(uintptr_t)a);
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
	(void)d;
	(void)s;
	(void)n;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
	(void)s;
	memset(d, 0, n);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
	(void)image;
	*m = (CUmodule)(uintptr_t)0x5000;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m,
    const char *name)
{
	(void)m;
	(void)name;
	*f = (CUfunction)(uintptr_t)0x6000;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
    unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
    CUstream s, void **params, void **extra)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz;
	(void)shared, (void)s, (void)params, (void)extra;
	atomic_fetch_add_explicit(&launches, 1, memory_order_relaxed);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
    unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
    CUstream s, void **params, void **extra)
{
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params,
	    extra);
}

/* cuGetProcAddress: every export above by its CUDA 12 base name. */
static const struct {
	const char *name;	/* what a caller asks for */
	void *fn, *ptsz;	/* ptsz: the per-thread stream variant */
} procs[] = {
#define P(base, fn) {base, (void *)fn, NULL}
#define PZ(base, fn) {base, (void *)fn, (void *)fn##_ptsz}
	P("cuInit", cuInit),
	P("cuDriverGetVersion", cuDriverGetVersion),
	P("cuDeviceGetCount", cuDeviceGetCount),
	P("cuDeviceGet", cuDeviceGet),
	P("cuDeviceGetName", cuDeviceGetName),
	P("cuDeviceTotalMem", cuDeviceTotalMem_v2),
	P("cuDeviceGetAttribute", cuDeviceGetAttribute),
	P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
	P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2),
	P("cuCtxCreate", cuCtxCreate_v2),
	P("cuCtxSetCurrent", cuCtxSetCurrent),
	P("cuCtxDestroy", cuCtxDestroy_v2),
	P("cuCtxSynchronize", cuCtxSynchronize),
	P("cuStreamCreate", cuStreamCreate),
	P("cuStreamSynchronize", cuStreamSynchronize),
	P("cuGetErrorName", cuGetErrorName),
	P("cuGetErrorString", cuGetErrorString),
	P("cuMemGetInfo", cuMemGetInfo_v2),
	P("cuMemAlloc", cuMemAlloc_v2),
	P("cuMemAllocPitch", cuMemAllocPitch_v2),
	P("cuMemAllocManaged", cuMemAllocManaged),
	P("cuMemFree", cuMemFree_v2),
	PZ("cuMemAllocAsync", cuMemAllocAsync),
	PZ("cuMemFreeAsync", cuMemFreeAsync),
	P("cuMemPoolCreate", cuMemPoolCreate),
	P("cuMemPoolDestroy", cuMemPoolDestroy),
	PZ("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync),
	P("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity),
	P("cuMemCreate", cuMemCreate),
	P("cuMemRelease", cuMemRelease),
	P("cuMemAddressReserve", cuMemAddressReserve),
	P("cuMemAddressFree", cuMemAddressFree),
	P("cuMemMap", cuMemMap),
	P("cuMemUnmap", cuMemUnmap),
	P("cuMemSetAccess", cuMemSetAccess),
	P("cuArrayCreate", cuArrayCreate_v2),
	P("cuArray3DCreate", cuArray3DCreate_v2),
	P("cuArrayDestroy", cuArrayDestroy),
	P("cuMemcpyHtoD", cuMemcpyHtoD_v2),
	P("cuMemcpyDtoH", cuMemcpyDtoH_v2),
	P("cuModuleLoadData", cuModuleLoadData),
	P("cuModuleGetFunction", cuModuleGetFunction),
	PZ("cuLaunchKernel", cuLaunchKernel),
	P("cuGetProcAddress", NULL),	/* filled below */
#undef P
#undef PZ
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
    int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status);

static CUresult
lookup(const char *symbol, void **pfn, cuuint64_t flags)
{
	size_t i;

	for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++)
		if (strcmp(procs[i].name, symbol) == 0) {
			*pfn = procs[i].fn;
			if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
			    && procs[i].ptsz != NULL)
				*pfn = procs[i].ptsz;
			if (*pfn == NULL)
				*pfn = (void *)cuGetProcAddress_v2;
			return CUDA_SUCCESS;
		}
	*pfn = NULL;
	return CUDA_ERROR_NOT_FOUND;
}
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
    int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	CUresult r;

	(void)version;
	r = lookup(symbol, pfn, flags);
	if (status != NULL)
		*status = r == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS :
		    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return r;
}
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
    cuuint64_t flags);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
    cuuint64_t flags)
{
	(void)version;
	return lookup(symbol, pfn, flags);
}

/* For tests: how many kernels this process launched. */
EXPORT unsigned long long fakecuda_launches(void);
EXPORT unsigned long long fakecuda_launches(void)
{
	return atomic_load(&launches);
}
