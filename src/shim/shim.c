/*
 * shim.c: libgpupool-cuda.so, the CUDA interposition library that the
 * agent preloads into jobs holding a fraction of a GPU (docs/
 * gpu-sharing.md). It enforces the job's memory cap on every allocation
 * path of the driver API, shows the cap through cuMemGetInfo and NVML's
 * memory queries, and paces kernel launches with a token bucket to the
 * job's share of the GPU's time. Everything else passes through.
 *
 * How calls reach it: programs linked against libcuda.so.1 bind to the
 * exported hooks below (the library is preloaded, so it comes first);
 * programs that dlopen the driver get them from our dlsym; the CUDA 12+
 * runtime asks cuGetProcAddress(_v2), whose answers we replace with our
 * hooks. The hooks, and only they, are exported (-fvisibility=hidden).
 *
 * The job's books live in a region shared by its processes (region.h),
 * named by GPUPOOL_SHIM_REGION (the agent creates it); without one, a
 * process makes its own from GPUPOOL_SHIM_LIMIT_BYTES and
 * GPUPOOL_SHIM_SHARE (thousandths), which the tests use.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cudadrv.h"
#include "region.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- the hooked symbols ---- */

enum hook {
	H_MEM_ALLOC,
	H_MEM_ALLOC_PITCH,
	H_MEM_ALLOC_MANAGED,
	H_MEM_ALLOC_ASYNC,
	H_MEM_ALLOC_ASYNC_PTSZ,
	H_MEM_ALLOC_POOL,
	H_MEM_ALLOC_POOL_PTSZ,
	H_MEM_CREATE,
	H_ARRAY_CREATE,
	H_ARRAY3D_CREATE,
	H_MEM_FREE,
	H_MEM_FREE_ASYNC,
	H_MEM_FREE_ASYNC_PTSZ,
	H_MEM_RELEASE,
	H_ARRAY_DESTROY,
	H_MEM_GET_INFO,
	H_LAUNCH,
	H_LAUNCH_PTSZ,
	H_LAUNCH_EX,
	H_LAUNCH_EX_PTSZ,
	H_LAUNCH_COOP,
	H_LAUNCH_COOP_PTSZ,
	H_GET_PROC,
	H_GET_PROC_V2,
	H_NVML_MEMORY,
	H_NVML_MEMORY_V2,
	H_COUNT
};

struct hook_entry {
	const char *name;	/* the exported symbol */
	const char *base;	/* its cuGetProcAddress name */
	int nvml;		/* 1: in libnvidia-ml.so.1 */
	void *hook;		/* ours */
};

/* Declared before the table; defined with the hooks below. */
#define HOOK_DECL(ret, name, args) EXPORT ret name args;
HOOK_DECL(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t))
HOOK_DECL(CUresult, cuMemAllocPitch_v2, (CUdeviceptr *, size_t *, size_t,
    size_t, unsigned int))
HOOK_DECL(CUresult, cuMemAllocManaged, (CUdeviceptr *, size_t, unsigned int))
HOOK_DECL(CUresult, cuMemAllocAsync, (CUdeviceptr *, size_t, CUstream))
HOOK_DECL(CUresult, cuMemAllocAsync_ptsz, (CUdeviceptr *, size_t, CUstream))
HOOK_DECL(CUresult, cuMemAllocFromPoolAsync, (CUdeviceptr *, size_t,
    CUmemoryPool, CUstream))
HOOK_DECL(CUresult, cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *, size_t,
    CUmemoryPool, CUstream))
HOOK_DECL(CUresult, cuMemCreate, (CUmemGenericAllocationHandle *, size_t,
    const void *, unsigned long long))
HOOK_DECL(CUresult, cuArrayCreate_v2, (CUarray *, const gp_cu_array_desc *))
HOOK_DECL(CUresult, cuArray3DCreate_v2, (CUarray *,
    const gp_cu_array3d_desc *))
HOOK_DECL(CUresult, cuMemFree_v2, (CUdeviceptr))
HOOK_DECL(CUresult, cuMemFreeAsync, (CUdeviceptr, CUstream))
HOOK_DECL(CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr, CUstream))
HOOK_DECL(CUresult, cuMemRelease, (CUmemGenericAllocationHandle))
HOOK_DECL(CUresult, cuArrayDestroy, (CUarray))
HOOK_DECL(CUresult, cuMemGetInfo_v2, (size_t *, size_t *))
#define LAUNCH_ARGS (CUfunction, unsigned, unsigned, unsigned, unsigned, \
    unsigned, unsigned, unsigned, CUstream, void **, void **)
HOOK_DECL(CUresult, cuLaunchKernel, LAUNCH_ARGS)
HOOK_DECL(CUresult, cuLaunchKernel_ptsz, LAUNCH_ARGS)
HOOK_DECL(CUresult, cuLaunchKernelEx, (const void *, CUfunction, void **,
    void **))
HOOK_DECL(CUresult, cuLaunchKernelEx_ptsz, (const void *, CUfunction, void **,
    void **))
HOOK_DECL(CUresult, cuLaunchCooperativeKernel, (CUfunction, unsigned,
    unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
    void **))
HOOK_DECL(CUresult, cuLaunchCooperativeKernel_ptsz, (CUfunction, unsigned,
    unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
    void **))
HOOK_DECL(CUresult, cuGetProcAddress, (const char *, void **, int, uint64_t))
HOOK_DECL(CUresult, cuGetProcAddress_v2, (const char *, void **, int,
    uint64_t, int *))
HOOK_DECL(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t,
    gp_nvml_memory *))
HOOK_DECL(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t,
    gp_nvml_memory_v2 *))
EXPORT void *dlsym(void *handle, const char *name);

static const struct hook_entry hooks[H_COUNT] = {
#define H(id, sym, base) [id] = {#sym, base, 0, (void *)sym}
	H(H_MEM_ALLOC, cuMemAlloc_v2, "cuMemAlloc"),
	H(H_MEM_ALLOC_PITCH, cuMemAllocPitch_v2, "cuMemAllocPitch"),
	H(H_MEM_ALLOC_MANAGED, cuMemAllocManaged, "cuMemAllocManaged"),
	H(H_MEM_ALLOC_ASYNC, cuMemAllocAsync, "cuMemAllocAsync"),
	H(H_MEM_ALLOC_ASYNC_PTSZ, cuMemAllocAsync_ptsz, NULL),
	H(H_MEM_ALLOC_POOL, cuMemAllocFromPoolAsync,
	    "cuMemAllocFromPoolAsync"),
	H(H_MEM_ALLOC_POOL_PTSZ, cuMemAllocFromPoolAsync_ptsz, NULL),
	H(H_MEM_CREATE, cuMemCreate, "cuMemCreate"),
	H(H_ARRAY_CREATE, cuArrayCreate_v2, "cuArrayCreate"),
	H(H_ARRAY3D_CREATE, cuArray3DCreate_v2, "cuArray3DCreate"),
	H(H_MEM_FREE, cuMemFree_v2, "cuMemFree"),
	H(H_MEM_FREE_ASYNC, cuMemFreeAsync, "cuMemFreeAsync"),
	H(H_MEM_FREE_ASYNC_PTSZ, cuMemFreeAsync_ptsz, NULL),
	H(H_MEM_RELEASE, cuMemRelease, "cuMemRelease"),
	H(H_ARRAY_DESTROY, cuArrayDestroy, "cuArrayDestroy"),
	H(H_MEM_GET_INFO, cuMemGetInfo_v2, "cuMemGetInfo"),
	H(H_LAUNCH, cuLaunchKernel, "cuLaunchKernel"),
	H(H_LAUNCH_PTSZ, cuLaunchKernel_ptsz, NULL),
	H(H_LAUNCH_EX, cuLaunchKernelEx, "cuLaunchKernelEx"),
	H(H_LAUNCH_EX_PTSZ, cuLaunchKernelEx_ptsz, NULL),
	H(H_LAUNCH_COOP, cuLaunchCooperativeKernel,
	    "cuLaunchCooperativeKernel"),
	H(H_LAUNCH_COOP_PTSZ, cuLaunchCooperativeKernel_ptsz, NULL),
	H(H_GET_PROC, cuGetProcAddress, NULL),
	H(H_GET_PROC_V2, cuGetProcAddress_v2, NULL),
#undef H
	[H_NVML_MEMORY] = {"nvmlDeviceGetMemoryInfo", NULL, 1,
	    (void *)nvmlDeviceGetMemoryInfo},
	[H_NVML_MEMORY_V2] = {"nvmlDeviceGetMemoryInfo_v2", NULL, 1,
	    (void *)nvmlDeviceGetMemoryInfo_v2},
};

/* The per-thread-stream twin of each hook that has one. */
static const enum hook ptsz_twin[H_COUNT] = {
	[H_MEM_ALLOC_ASYNC] = H_MEM_ALLOC_ASYNC_PTSZ,
	[H_MEM_ALLOC_POOL] = H_MEM_ALLOC_POOL_PTSZ,
	[H_MEM_FREE_ASYNC] = H_MEM_FREE_ASYNC_PTSZ,
	[H_LAUNCH] = H_LAUNCH_PTSZ,
	[H_LAUNCH_EX] = H_LAUNCH_EX_PTSZ,
	[H_LAUNCH_COOP] = H_LAUNCH_COOP_PTSZ,
};

/* The real functions, resolved once (init). */
static void *real[H_COUNT];
static void *(*real_dlsym)(void *, const char *);
static void *cuda_lib, *nvml_lib;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

#define REAL(id, type) ((type)real[id])

/* ---- the job's region ---- */

static struct gp_region *region;	/* NULL: nothing to enforce */
static int my_slot = -1;		/* this process's slot */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

static void
warn_once(const char *what)
{
	static atomic_int said;

	if (atomic_exchange(&said, 1) == 0)
		fprintf(stderr, "libgpupool-cuda: %s; GPU limits not "
		    "enforced in this process\n", what);
}

static uint64_t
env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (v == NULL || *v == '\0')
		return dflt;
	x = strtoull(v, &end, 10);
	return *end == '\0' ? x : dflt;
}

/*
 * Without the agent (tests, a user's own run): the first process makes
 * the region from the environment, whole before anyone sees it (a
 * temporary file linked into place; a loser of the race opens the
 * winner's). Returns an open descriptor or -1.
 */
static int
create_region(const char *path)
{
	struct gp_region r;
	char tmp[4096];
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		return -1;
	gp_region_init(&r, env_u64("GPUPOOL_SHIM_LIMIT_BYTES", 0),
	    (uint32_t)env_u64("GPUPOOL_SHIM_SHARE", 1000), 0);
	atomic_store(&r.ctx_bytes, env_u64("GPUPOOL_SHIM_CTX_BYTES", 0));
	if ((fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
		return -1;
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r) ||
	    (link(tmp, path) != 0 && errno != EEXIST)) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	unlink(tmp);
	return open(path, O_RDWR | O_CLOEXEC);
}

static void
map_region(void)
{
	const char *path = getenv("GPUPOOL_SHIM_REGION");
	struct gp_region *r;
	int fd;

	if (path == NULL || *path == '\0') {
		/* No agent: a region of this process's own (tests). */
		uint64_t limit = env_u64("GPUPOOL_SHIM_LIMIT_BYTES", 0);
		uint64_t share = env_u64("GPUPOOL_SHIM_SHARE", 1000);

		if (limit == 0 && share >= 1000)
			return;
		r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (r == MAP_FAILED)
			return warn_once("no memory for a region");
		gp_region_init(r, limit, (uint32_t)share, 0);
		atomic_store(&r->ctx_bytes,
		    env_u64("GPUPOOL_SHIM_CTX_BYTES", 0));
		region = r;
		return;
	}
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) < 0 && errno == ENOENT)
		fd = create_region(path);
	if (fd < 0)
		return warn_once("cannot open GPUPOOL_SHIM_REGION");
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return warn_once("cannot map GPUPOOL_SHIM_REGION");
	if (!gp_region_valid(r)) {
		munmap(r, sizeof(*r));
		return warn_once("GPUPOOL_SHIM_REGION has another version");
	}
	region = r;
}

/*
 * This process's slot (-1: none free), taken when it first uses the
 * device (an allocation, a memory query, a launch): its context is
 * charged then.
 */
static int
slot(void)
{
	int i, s;
	pid_t pid;

	if ((s = __atomic_load_n(&my_slot, __ATOMIC_ACQUIRE)) >= 0)
		return s;
	pthread_mutex_lock(&slot_lock);
	if (my_slot < 0) {
		pid = getpid();
		gp_region_reap(region);
		for (i = 0; i < GP_REGION_SLOTS; i++) {
			int32_t zero = 0;

			if (atomic_compare_exchange_strong(
			    &region->slots[i].pid, &zero, (int32_t)pid)) {
				uint64_t ctx = atomic_load(
				    &region->ctx_bytes);

				atomic_store(&region->slots[i].start,
				    gp_region_pid_start(pid));
				/*
				 * The process's context, charged whatever
				 * the cap: it exists already, and the
				 * allocations after it are what fail.
				 */
				atomic_store(&region->slots[i].used, ctx);
				atomic_fetch_add(&region->used, ctx);
				__atomic_store_n(&my_slot, i,
				    __ATOMIC_RELEASE);
				break;
			}
		}
	}
	s = my_slot;
	pthread_mutex_unlock(&slot_lock);
	return s;
}

/*
 * Takes bytes from the job's cap. Returns 0, or -1 when they would pass
 * it (after giving back what dead processes held).
 */
static int
reserve(uint64_t bytes)
{
	uint64_t limit, cur, peak;
	int s, reaped = 0;

	if (region == NULL)
		return 0;
	s = slot();
	limit = atomic_load_explicit(&region->limit, memory_order_relaxed);
	cur = atomic_load(&region->used);
	for (;;) {
		if (limit != 0 && (bytes > limit || cur > limit - bytes)) {
			if (!reaped && gp_region_reap(region) > 0) {
				reaped = 1;
				cur = atomic_load(&region->used);
				continue;
			}
			atomic_fetch_add(&region->oom, 1);
			return -1;
		}
		if (atomic_compare_exchange_weak(&region->used, &cur,
		    cur + bytes))
			break;
	}
	if (s >= 0)
		atomic_fetch_add(&region->slots[s].used, bytes);
	peak = atomic_load(&region->peak);
	while (cur + bytes > peak &&
	    !atomic_compare_exchange_weak(&region->peak, &peak, cur + bytes))
		;
	return 0;
}

static void
unreserve(uint64_t bytes)
{
	if (region == NULL || bytes == 0)
		return;
	if (my_slot >= 0)
		atomic_fetch_sub(&region->slots[my_slot].used, bytes);
	atomic_fetch_sub(&region->used, bytes);
}

/* ---- what this process holds: (namespace, address or handle) -> bytes */

enum space { SP_PTR = 1, SP_HANDLE, SP_ARRAY };

struct held {
	uint64_t key;
	uint64_t bytes;		/* 0: free slot; UINT64_MAX: tombstone */
	int space;
};

static struct held *table;
static size_t table_cap, table_used;	/* used: live + tombstones */
static size_t table_live;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t
hash(uint64_t key, int space)
{
	key ^= (uint64_t)space << 59;
	key *= 0x9e3779b97f4a7c15ULL;
	return (size_t)(key >> 17);
}

/* Rehashes (dropping tombstones), doubling when live entries need it. */
static int
table_grow(void)
{
	size_t cap = table_cap == 0 ? 1024 : table_live * 4 > table_cap ?
	    table_cap * 2 : table_cap, i, j;
	struct held *n = calloc(cap, sizeof(*n));

	if (n == NULL)
		return -1;
	table_used = 0;
	for (i = 0; i < table_cap; i++) {
		if (table[i].bytes == 0 || table[i].bytes == UINT64_MAX)
			continue;
		for (j = hash(table[i].key, table[i].space) & (cap - 1);
		    n[j].bytes != 0; j = (j + 1) & (cap - 1))
			;
		n[j] = table[i];
		table_used++;
	}
	free(table);
	table = n;
	table_cap = cap;
	return 0;
}

static void
table_put(uint64_t key, int space, uint64_t bytes)
{
	size_t j;

	if (bytes == 0)
		bytes = 1;	/* keeps the entry (0 marks a free slot) */
	pthread_mutex_lock(&table_lock);
	if ((table_used + 1) * 2 > table_cap && table_grow() != 0) {
		pthread_mutex_unlock(&table_lock);
		return;
	}
	for (j = hash(key, space) & (table_cap - 1);
	    table[j].bytes != 0 && table[j].bytes != UINT64_MAX;
	    j = (j + 1) & (table_cap - 1))
		;
	if (table[j].bytes == 0)
		table_used++;
	table_live++;
	table[j].key = key;
	table[j].space = space;
	table[j].bytes = bytes;
	pthread_mutex_unlock(&table_lock);
}

/* Removes key; returns its bytes (0: not ours). */
static uint64_t
table_take(uint64_t key, int space)
{
	uint64_t bytes = 0;
	size_t j;

	pthread_mutex_lock(&table_lock);
	if (table_cap == 0)
		goto out;
	for (j = hash(key, space) & (table_cap - 1); table[j].bytes != 0;
	    j = (j + 1) & (table_cap - 1))
		if (table[j].bytes != UINT64_MAX && table[j].key == key &&
		    table[j].space == space) {
			bytes = table[j].bytes;
			table[j].bytes = UINT64_MAX;
			table_live--;
			break;
		}
out:
	pthread_mutex_unlock(&table_lock);
	return bytes;
}

/* ---- start-up, fork, exit ---- */

static void
child_after_fork(void)
{
	/*
	 * A CUDA context does not cross fork: the child holds no device
	 * memory of its own yet, and takes a slot of its own when it
	 * allocates.
	 */
	my_slot = -1;
	pthread_mutex_init(&slot_lock, NULL);
	pthread_mutex_init(&table_lock, NULL);
	free(table);
	table = NULL;
	table_cap = table_used = table_live = 0;
}

static void throttle_reset_after_fork(void);

static void
after_fork(void)
{
	child_after_fork();
	throttle_reset_after_fork();
}

static void
resolve_dlsym(void)
{
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5",
		"GLIBC_2.17", "GLIBC_2.0"};
	size_t i;
	void *p;

	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if ((p = dlvsym(RTLD_NEXT, "dlsym", versions[i])) != NULL) {
			memcpy(&real_dlsym, &p, sizeof(p));
			return;
		}
}

/*
 * Set while init runs in this thread: the driver's own start-up (its
 * constructors, run by our dlopen) may call dlsym, which must then not
 * wait for the init it is part of.
 */
static __thread int initialising;

static void
init(void)
{
	int i;

	initialising = 1;
	if (real_dlsym == NULL)
		resolve_dlsym();
	cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	nvml_lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	for (i = 0; i < H_COUNT; i++) {
		void *lib = hooks[i].nvml ? nvml_lib : cuda_lib;

		real[i] = lib != NULL && real_dlsym != NULL ?
		    real_dlsym(lib, hooks[i].name) : NULL;
	}
	map_region();
	pthread_atfork(NULL, NULL, after_fork);
	initialising = 0;
}

static inline void
ready(void)
{
	pthread_once(&init_once, init);
}

__attribute__((destructor)) static void
at_exit(void)
{
	/* The driver frees a process's memory when it ends. */
	if (region != NULL && my_slot >= 0) {
		struct gp_region_slot *s = &region->slots[my_slot];

		atomic_fetch_sub(&region->used, atomic_exchange(&s->used, 0));
		atomic_store(&s->pid, 0);
		my_slot = -1;
	}
}

/* ---- allocation hooks ---- */

#define NOT_FOUND_IF_MISSING(id)                                          \
	if (real[id] == NULL)                                             \
		return CUDA_ERROR_NOT_FOUND

/* Accounts an allocation made by call (which sets *key). */
#define ACCOUNTED(id, bytes, space, keyp, call)                           \
	do {                                                              \
		CUresult r_;                                              \
		ready();                                                  \
		NOT_FOUND_IF_MISSING(id);                                 \
		if ((bytes) == 0 || region == NULL)                       \
			return call;                                      \
		if (reserve(bytes) != 0)                                  \
			return CUDA_ERROR_OUT_OF_MEMORY;                  \
		if ((r_ = call) != CUDA_SUCCESS) {                        \
			unreserve(bytes);                                 \
			return r_;                                        \
		}                                                         \
		table_put((uint64_t)(uintptr_t)*(keyp), space, bytes);    \
		return CUDA_SUCCESS;                                      \
	} while (0)

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool,
    CUstream);

EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	ACCOUNTED(H_MEM_ALLOC, n, SP_PTR, p,
	    REAL(H_MEM_ALLOC, alloc_fn)(p, n));
}

EXPORT CUresult
cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags)
{
	ACCOUNTED(H_MEM_ALLOC_MANAGED, n, SP_PTR, p,
	    REAL(H_MEM_ALLOC_MANAGED, CUresult (*)(CUdeviceptr *, size_t,
	    unsigned))(p, n, flags));
}

EXPORT CUresult
cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
	ACCOUNTED(H_MEM_ALLOC_ASYNC, n, SP_PTR, p,
	    REAL(H_MEM_ALLOC_ASYNC, alloc_async_fn)(p, n, s));
}

EXPORT CUresult
cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s)
{
	ACCOUNTED(H_MEM_ALLOC_ASYNC_PTSZ, n, SP_PTR, p,
	    REAL(H_MEM_ALLOC_ASYNC_PTSZ, alloc_async_fn)(p, n, s));
}

EXPORT CUresult
cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool,
    CUstream s)
{
	ACCOUNTED(H_MEM_ALLOC_POOL, n, SP_PTR, p,
	    REAL(H_MEM_ALLOC_POOL, alloc_pool_fn)(p, n, pool, s));
}

EXPORT CUresult
cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool,
    CUstream s)
{
	ACCOUNTED(H_MEM_ALLOC_POOL_PTSZ, n, SP_PTR, p,
	    REAL(H_MEM_ALLOC_POOL_PTSZ, alloc_pool_fn)(p, n, pool, s));
}

EXPORT CUresult
cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const void *prop,
    unsigned long long flags)
{
	ACCOUNTED(H_MEM_CREATE, n, SP_HANDLE, h,
	    REAL(H_MEM_CREATE, CUresult (*)(CUmemGenericAllocationHandle *,
	    size_t, const void *, unsigned long long))(h, n, prop, flags));
}

static size_t
format_bytes(int format)
{
	switch (format) {
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

/* An array's bytes (the driver may pad rows: within its granularity). */
static uint64_t
array_bytes(size_t w, size_t h, size_t d, unsigned channels, int format)
{
	return (uint64_t)w * (h ? h : 1) * (d ? d : 1) * channels *
	    format_bytes(format);
}

EXPORT CUresult
cuArrayCreate_v2(CUarray *a, const gp_cu_array_desc *d)
{
	uint64_t n = d != NULL ? array_bytes(d->Width, d->Height, 1,
	    d->NumChannels, d->Format) : 0;

	ACCOUNTED(H_ARRAY_CREATE, n, SP_ARRAY, a,
	    REAL(H_ARRAY_CREATE, CUresult (*)(CUarray *,
	    const gp_cu_array_desc *))(a, d));
}

EXPORT CUresult
cuArray3DCreate_v2(CUarray *a, const gp_cu_array3d_desc *d)
{
	uint64_t n = d != NULL ? array_bytes(d->Width, d->Height, d->Depth,
	    d->NumChannels, d->Format) : 0;

	ACCOUNTED(H_ARRAY3D_CREATE, n, SP_ARRAY, a,
	    REAL(H_ARRAY3D_CREATE, CUresult (*)(CUarray *,
	    const gp_cu_array3d_desc *))(a, d));
}

/* Pitch: the driver picks the pitch, so the bytes are known after. */
EXPORT CUresult
cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h,
    unsigned int elem)
{
	CUresult r;
	uint64_t n;

	ready();
	NOT_FOUND_IF_MISSING(H_MEM_ALLOC_PITCH);
	r = REAL(H_MEM_ALLOC_PITCH, CUresult (*)(CUdeviceptr *, size_t *,
	    size_t, size_t, unsigned))(p, pitch, w, h, elem);
	if (r != CUDA_SUCCESS || region == NULL)
		return r;
	n = (uint64_t)*pitch * h;
	if (reserve(n) != 0) {
		if (real[H_MEM_FREE] != NULL)
			REAL(H_MEM_FREE, CUresult (*)(CUdeviceptr))(*p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	table_put(*p, SP_PTR, n);
	return CUDA_SUCCESS;
}

#define RELEASED(id, key, space, call)                                    \
	do {                                                              \
		CUresult r_;                                              \
		ready();                                                  \
		NOT_FOUND_IF_MISSING(id);                                 \
		if ((r_ = call) == CUDA_SUCCESS && region != NULL)        \
			unreserve(table_take((uint64_t)(uintptr_t)(key),  \
			    space));                                      \
		return r_;                                                \
	} while (0)

EXPORT CUresult
cuMemFree_v2(CUdeviceptr p)
{
	RELEASED(H_MEM_FREE, p, SP_PTR,
	    REAL(H_MEM_FREE, CUresult (*)(CUdeviceptr))(p));
}

EXPORT CUresult
cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	RELEASED(H_MEM_FREE_ASYNC, p, SP_PTR,
	    REAL(H_MEM_FREE_ASYNC, CUresult (*)(CUdeviceptr, CUstream))(p, s));
}

EXPORT CUresult
cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
	RELEASED(H_MEM_FREE_ASYNC_PTSZ, p, SP_PTR,
	    REAL(H_MEM_FREE_ASYNC_PTSZ, CUresult (*)(CUdeviceptr,
	    CUstream))(p, s));
}

EXPORT CUresult
cuMemRelease(CUmemGenericAllocationHandle h)
{
	RELEASED(H_MEM_RELEASE, h, SP_HANDLE,
	    REAL(H_MEM_RELEASE, CUresult (*)(
	    CUmemGenericAllocationHandle))(h));
}

EXPORT CUresult
cuArrayDestroy(CUarray a)
{
	RELEASED(H_ARRAY_DESTROY, a, SP_ARRAY,
	    REAL(H_ARRAY_DESTROY, CUresult (*)(CUarray))(a));
}

/* ---- what the job sees: the cap as the device's memory ---- */

/*
 * OUT: *limit, *used of the job when it has a cap; else 0. cuda: the
 * caller has a context (cuMemGetInfo), which is charged now if it was
 * not; NVML's callers (nvidia-smi) have none.
 */
static int
capped(uint64_t *limit, uint64_t *used, int cuda)
{
	if (region == NULL ||
	    (*limit = atomic_load(&region->limit)) == 0)
		return 0;
	/* Not a hot path: show what the dead no longer hold. */
	gp_region_reap(region);
	if (cuda)
		(void)slot();	/* this process's context counts */
	*used = atomic_load(&region->used);
	if (*used > *limit)
		*used = *limit;
	return 1;
}

EXPORT CUresult
cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
	uint64_t limit, used;
	CUresult r;

	ready();
	NOT_FOUND_IF_MISSING(H_MEM_GET_INFO);
	r = REAL(H_MEM_GET_INFO, CUresult (*)(size_t *, size_t *))(
	    free_bytes, total_bytes);
	if (r != CUDA_SUCCESS || !capped(&limit, &used, 1))
		return r;
	*total_bytes = limit;
	if (*free_bytes > limit - used)
		*free_bytes = limit - used;
	return r;
}

EXPORT nvmlReturn_t
nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, gp_nvml_memory *m)
{
	uint64_t limit, used;
	nvmlReturn_t r;

	ready();
	if (real[H_NVML_MEMORY] == NULL)
		return 13;	/* NVML_ERROR_FUNCTION_NOT_FOUND */
	r = REAL(H_NVML_MEMORY, nvmlReturn_t (*)(nvmlDevice_t,
	    gp_nvml_memory *))(dev, m);
	if (r != NVML_SUCCESS || !capped(&limit, &used, 0))
		return r;
	m->total = limit;
	m->used = used;
	m->free = limit - used;
	return r;
}

EXPORT nvmlReturn_t
nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, gp_nvml_memory_v2 *m)
{
	uint64_t limit, used;
	nvmlReturn_t r;

	ready();
	if (real[H_NVML_MEMORY_V2] == NULL)
		return 13;
	r = REAL(H_NVML_MEMORY_V2, nvmlReturn_t (*)(nvmlDevice_t,
	    gp_nvml_memory_v2 *))(dev, m);
	if (r != NVML_SUCCESS || !capped(&limit, &used, 0))
		return r;
	m->total = limit;
	m->used = used;
	m->reserved = 0;
	m->free = limit - used;
	return r;
}

/* ---- the compute share: a token bucket on kernel launches ---- */

/*
 * Each process of a throttled job paces its launches at `rate` a second
 * (bursts up to a tenth of a second's worth). A controller thread
 * steers the rate every period toward the job's effective share of the
 * GPU's time, from NVML's utilisation of the job: the agent's reading
 * (host pids matched by cgroup, written into the region once a second)
 * when it sends one, else our own processes' SM utilisation when NVML
 * lists them under pids we know, else the device's.
 * Kernels differ in length, so launches are not time; the feedback on
 * measured utilisation is what makes the share hold.
 */
#define PERIOD_MS_DEFAULT 100
#define SAMPLES_MAX 1024	/* NVML's ring of utilisation samples */
/* An agent that promised readings and sent none for this long: ours. */
#define AGENT_WAIT_NS (3ULL * 1000000000ULL)
#define RATE_MAX 1e9
#define RATE_MIN 1.0

static struct {
	pthread_mutex_t lock;
	double rate;		/* launches a second; 0: not set yet */
	double tokens;
	uint64_t last_ns;
	int waited;		/* the bucket ran dry this period */
	uint64_t launches;	/* this process, for the controller */
} bucket = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0};
static atomic_int controller_started;
static int period_ms = PERIOD_MS_DEFAULT;
static nvmlReturn_t (*nvml_util)(nvmlDevice_t, gp_nvml_utilization *);
static nvmlReturn_t (*nvml_proc_util)(nvmlDevice_t, gp_nvml_process_sample *,
    unsigned int *, unsigned long long);
static nvmlDevice_t nvml_dev;

static uint64_t
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void
throttle_reset_after_fork(void)
{
	pthread_mutex_init(&bucket.lock, NULL);
	bucket.rate = 0;
	bucket.tokens = 0;
	bucket.last_ns = 0;
	bucket.launches = 0;
	atomic_store(&controller_started, 0);
}

static void
nvml_open_util(void)
{
	nvmlReturn_t (*fn_init)(void);
	nvmlReturn_t (*fn_handle)(unsigned int, nvmlDevice_t *);
	void *p;

	if (nvml_lib == NULL || real_dlsym == NULL)
		return;
	if ((p = real_dlsym(nvml_lib, "nvmlInit_v2")) == NULL)
		return;
	memcpy(&fn_init, &p, sizeof(p));
	if ((p = real_dlsym(nvml_lib, "nvmlDeviceGetHandleByIndex_v2")) ==
	    NULL)
		return;
	memcpy(&fn_handle, &p, sizeof(p));
	/* The job sees its one GPU, as index 0. */
	if (fn_init() != NVML_SUCCESS || fn_handle(0, &nvml_dev) !=
	    NVML_SUCCESS)
		return;
	if ((p = real_dlsym(nvml_lib, "nvmlDeviceGetUtilizationRates")) !=
	    NULL)
		memcpy(&nvml_util, &p, sizeof(p));
	if ((p = real_dlsym(nvml_lib, "nvmlDeviceGetProcessUtilization")) !=
	    NULL)
		memcpy(&nvml_proc_util, &p, sizeof(p));
}

static int
pid_is_job(unsigned int pid)
{
	int i;

	for (i = 0; i < GP_REGION_SLOTS; i++)
		if ((unsigned)atomic_load(&region->slots[i].pid) == pid)
			return 1;
	return (pid_t)pid == getpid();
}

/*
 * The job's utilisation now, percent; -1 when NVML cannot say. When NVML
 * gives per-process readings, a job none of whose pids is among them
 * used nothing (a paced job often has no sample at all): the device's
 * utilisation, other jobs' work, is the answer only where NVML has no
 * per-process readings. Taking it for ours made a throttled job pace
 * itself down to nothing on a real GPU.
 */
static int
job_utilisation(unsigned long long *since)
{
	static gp_nvml_process_sample samples[SAMPLES_MAX];
	gp_nvml_utilization u;
	unsigned int n = SAMPLES_MAX, i, sum = 0, count = 0;
	nvmlReturn_t r = 13;	/* NVML_ERROR_FUNCTION_NOT_FOUND */

	/*
	 * NVML keeps a ring of samples per process: the first call (since
	 * 0) may return more than fit, and a call that fails leaves since
	 * where it was, so the buffer holds the ring's worth.
	 */
	if (nvml_proc_util != NULL)
		r = nvml_proc_util(nvml_dev, samples, &n, *since);
	if (r == NVML_SUCCESS) {
		/* Each process's mean over its samples, summed. */
		unsigned int pid[16], psum[16], pcount[16], k;

		for (i = 0; i < n && i < SAMPLES_MAX; i++) {
			if (samples[i].timeStamp > *since)
				*since = samples[i].timeStamp;
			if (!pid_is_job(samples[i].pid))
				continue;
			for (k = 0; k < count && pid[k] != samples[i].pid; k++)
				;
			if (k == count) {
				if (count == 16)
					continue;
				pid[count] = samples[i].pid;
				psum[count] = pcount[count] = 0;
				count++;
			}
			psum[k] += samples[i].smUtil;
			pcount[k]++;
		}
		for (k = 0; k < count; k++)
			sum += psum[k] / pcount[k];
		return sum > 100 ? 100 : (int)sum;
	}
	if (r == NVML_ERROR_NOT_FOUND)
		return 0;	/* no process ran since */
	if (nvml_util != NULL && nvml_util(nvml_dev, &u) == NVML_SUCCESS)
		return (int)u.gpu;
	return -1;
}

static void *
controller(void *arg)
{
	unsigned long long since = 0;
	uint64_t last_launches = 0, t_last = now_ns(), t_start = t_last;
	uint32_t last_seq = 0, seq;

	/* GPUPOOL_SHIM_TRACE=1: each step on stderr (a job's log). */
	int trace = env_u64("GPUPOOL_SHIM_TRACE", 0) != 0;

	(void)arg;
	nvml_open_util();
	for (;;) {
		struct timespec ts = {period_ms / 1000,
			(long)(period_ms % 1000) * 1000000L};
		uint32_t eff;
		int util, waited, fresh;
		double target, observed, rate, dt;
		uint64_t t, launches;

		nanosleep(&ts, NULL);
		eff = atomic_load(&region->effective);
		/*
		 * The agent's reading (host pids, by cgroup) when it sends
		 * them: act on each new one once; else our own.
		 */
		seq = atomic_load(&region->host_util_seq);
		fresh = 1;
		if (seq != 0) {
			util = (int)atomic_load(&region->host_util);
			fresh = seq != last_seq;
			last_seq = seq;
		} else if ((atomic_load(&region->flags) &
		    GP_REGION_AGENT_UTIL) && now_ns() - t_start <
		    AGENT_WAIT_NS)
			util = -1;	/* no reading from the agent yet */
		else	/* our own (an agent that sends none after all) */
			util = job_utilisation(&since);
		if (util >= 0)
			atomic_store(&region->util, (uint32_t)util);
		t = now_ns();
		dt = (double)(t - t_last) / 1e9;
		t_last = t;
		pthread_mutex_lock(&bucket.lock);
		launches = bucket.launches;
		waited = bucket.waited;
		bucket.waited = 0;
		observed = dt > 0 ? (double)(launches - last_launches) / dt : 0;
		last_launches = launches;
		rate = bucket.rate;
		target = eff / 10.0;
		if (eff >= 1000 || util < 0) {
			rate = 0;	/* unthrottled (or blind) */
		} else if (!fresh && rate != 0) {
			bucket.waited = waited;	/* wait for a new reading */
		} else {
			if (rate == 0)
				rate = observed > RATE_MIN ? observed : 100;
			if (util > target)
				rate *= target / util > 0.5 ? target / util
							     : 0.5;
			else if (waited && util < target)
				rate *= util > 0 && target / util < 1.5 ?
				    target / util : 1.5;
			if (rate < RATE_MIN)
				rate = RATE_MIN;
			if (rate > RATE_MAX)
				rate = RATE_MAX;
		}
		bucket.rate = rate;
		pthread_mutex_unlock(&bucket.lock);
		if (trace && fresh)
			fprintf(stderr, "libgpupool-cuda: steer effective=%u "
			    "util=%d launches/s=%.1f rate=%.1f waited=%d\n",
			    eff, util, observed, rate, waited);
	}
	return NULL;
}

static void
start_controller(void)
{
	pthread_attr_t attr;
	pthread_t t;
	int expected = 0;

	if (!atomic_compare_exchange_strong(&controller_started, &expected, 1))
		return;
	period_ms = (int)env_u64("GPUPOOL_SHIM_PERIOD_MS", PERIOD_MS_DEFAULT);
	if (period_ms < 10 || period_ms > 10000)
		period_ms = PERIOD_MS_DEFAULT;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, controller, NULL) != 0)
		atomic_store(&controller_started, 0);
	pthread_attr_destroy(&attr);
}

/*
 * Called before each launch: waits for a token when the job is paced,
 * in steps of at most one period, so that a rate the controller raises
 * takes effect at once.
 */
static inline void
throttle(void)
{
	uint64_t t, wait_ns;
	double burst;

	if (region == NULL)
		return;
	if (__builtin_expect(__atomic_load_n(&my_slot, __ATOMIC_RELAXED) < 0,
	    0))
		(void)slot();	/* a launch before any allocation */
	atomic_fetch_add_explicit(&region->launches, 1, memory_order_relaxed);
	if (atomic_load_explicit(&region->effective, memory_order_relaxed) >=
	    1000 && bucket.rate == 0)
		return;
	start_controller();
	pthread_mutex_lock(&bucket.lock);
	bucket.launches++;
	while (bucket.rate > 0) {
		t = now_ns();
		if (bucket.last_ns == 0)
			bucket.last_ns = t;
		burst = bucket.rate / 10 > 1 ? bucket.rate / 10 : 1;
		bucket.tokens += bucket.rate * (double)(t - bucket.last_ns) /
		    1e9;
		if (bucket.tokens > burst)
			bucket.tokens = burst;
		bucket.last_ns = t;
		if (bucket.tokens >= 1) {
			bucket.tokens -= 1;
			break;
		}
		wait_ns = (uint64_t)((1 - bucket.tokens) / bucket.rate * 1e9);
		if (wait_ns > (uint64_t)period_ms * 1000000ULL)
			wait_ns = (uint64_t)period_ms * 1000000ULL;
		bucket.waited = 1;
		pthread_mutex_unlock(&bucket.lock);
		{
			struct timespec ts = {(time_t)(wait_ns / 1000000000ULL),
				(long)(wait_ns % 1000000000ULL)};

			nanosleep(&ts, NULL);
		}
		atomic_fetch_add_explicit(&region->throttled_ns, wait_ns,
		    memory_order_relaxed);
		pthread_mutex_lock(&bucket.lock);
		bucket.waited = 1;
	}
	pthread_mutex_unlock(&bucket.lock);
}

#define LAUNCH_PARAMS f, gx, gy, gz, bx, by, bz, shm, s
#define LAUNCH_DEF(name, id)                                              \
	EXPORT CUresult name(CUfunction f, unsigned gx, unsigned gy,     \
	    unsigned gz, unsigned bx, unsigned by, unsigned bz,           \
	    unsigned shm, CUstream s, void **params, void **extra)        \
	{                                                                 \
		ready();                                                  \
		NOT_FOUND_IF_MISSING(id);                                 \
		throttle();                                               \
		return REAL(id, CUresult (*) LAUNCH_ARGS)(LAUNCH_PARAMS,  \
		    params, extra);                                       \
	}
LAUNCH_DEF(cuLaunchKernel, H_LAUNCH)
LAUNCH_DEF(cuLaunchKernel_ptsz, H_LAUNCH_PTSZ)

#define COOP_DEF(name, id)                                                \
	EXPORT CUresult name(CUfunction f, unsigned gx, unsigned gy,     \
	    unsigned gz, unsigned bx, unsigned by, unsigned bz,           \
	    unsigned shm, CUstream s, void **params)                      \
	{                                                                 \
		ready();                                                  \
		NOT_FOUND_IF_MISSING(id);                                 \
		throttle();                                               \
		return REAL(id, CUresult (*)(CUfunction, unsigned,        \
		    unsigned, unsigned, unsigned, unsigned, unsigned,     \
		    unsigned, CUstream, void **))(LAUNCH_PARAMS, params); \
	}
COOP_DEF(cuLaunchCooperativeKernel, H_LAUNCH_COOP)
COOP_DEF(cuLaunchCooperativeKernel_ptsz, H_LAUNCH_COOP_PTSZ)

#define EX_DEF(name, id)                                                  \
	EXPORT CUresult name(const void *config, CUfunction f,           \
	    void **params, void **extra)                                  \
	{                                                                 \
		ready();                                                  \
		NOT_FOUND_IF_MISSING(id);                                 \
		throttle();                                               \
		return REAL(id, CUresult (*)(const void *, CUfunction,    \
		    void **, void **))(config, f, params, extra);         \
	}
EX_DEF(cuLaunchKernelEx, H_LAUNCH_EX)
EX_DEF(cuLaunchKernelEx_ptsz, H_LAUNCH_EX_PTSZ)

/* ---- how programs find the hooks: dlsym and cuGetProcAddress ---- */

static int
hook_by_name(const char *name)
{
	int i;

	for (i = 0; i < H_COUNT; i++)
		if (strcmp(hooks[i].name, name) == 0)
			return i;
	return -1;
}

EXPORT void *
dlsym(void *handle, const char *name)
{
	int i;

	if (real_dlsym == NULL)
		resolve_dlsym();
	if (initialising)
		return real_dlsym != NULL ? real_dlsym(handle, name) : NULL;
	if ((name[0] == 'c' || name[0] == 'n') &&
	    (strncmp(name, "cu", 2) == 0 || strncmp(name, "nvml", 4) == 0) &&
	    (i = hook_by_name(name)) >= 0) {
		ready();
		/* Only when the library there has it: else as it would. */
		if (real[i] != NULL && real_dlsym(handle, name) != NULL)
			return hooks[i].hook;
	}
	return real_dlsym != NULL ? real_dlsym(handle, name) : NULL;
}

/*
 * Our hook for what the real cuGetProcAddress answered: the entry whose
 * real function it gave; failing that (a driver may hand out internal
 * addresses), by name: the _ptsz twin when the per-thread default
 * stream was asked for, the _v2 entry from CUDA 3.2 on.
 */
static void *
proc_hook(const char *symbol, void *pfn, int version, uint64_t flags)
{
	int i;

	if (pfn == NULL)
		return NULL;
	for (i = 0; i < H_COUNT; i++)
		if (real[i] == pfn && !hooks[i].nvml)
			return hooks[i].hook;
	if (strcmp(symbol, "cuGetProcAddress") == 0)
		return version >= 12000 ? hooks[H_GET_PROC_V2].hook
					: hooks[H_GET_PROC].hook;
	for (i = 0; i < H_COUNT; i++) {
		if (hooks[i].base == NULL || strcmp(hooks[i].base, symbol) != 0)
			continue;
		if (strstr(hooks[i].name, "_v2") != NULL && version < 3020)
			return pfn;
		if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
		    ptsz_twin[i] != 0)
			return hooks[ptsz_twin[i]].hook;
		return hooks[i].hook;
	}
	return pfn;
}

EXPORT CUresult
cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags)
{
	CUresult r;

	ready();
	NOT_FOUND_IF_MISSING(H_GET_PROC);
	r = REAL(H_GET_PROC, CUresult (*)(const char *, void **, int,
	    uint64_t))(symbol, pfn, version, flags);
	if (r == CUDA_SUCCESS && pfn != NULL && symbol != NULL)
		*pfn = proc_hook(symbol, *pfn, version, flags);
	return r;
}

EXPORT CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
    uint64_t flags, int *status)
{
	CUresult r;

	ready();
	NOT_FOUND_IF_MISSING(H_GET_PROC_V2);
	r = REAL(H_GET_PROC_V2, CUresult (*)(const char *, void **, int,
	    uint64_t, int *))(symbol, pfn, version, flags, status);
	if (r == CUDA_SUCCESS && pfn != NULL && symbol != NULL)
		*pfn = proc_hook(symbol, *pfn, version, flags);
	return r;
}
