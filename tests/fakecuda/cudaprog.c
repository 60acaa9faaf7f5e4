/*
 * cudaprog.c: a small program that uses the CUDA driver API as a
 * framework would, for the tests of libgpupool-cuda.so (on the fake
 * driver here, on a real GPU in scripts/gpu-check.sh). It resolves the
 * driver's entry points one of three ways (the first argument):
 *
 *   direct     linked against libcuda.so.1 (built as cudaprog-linked)
 *   dlsym      dlopen("libcuda.so.1") and dlsym of each _v2 name
 *   procaddr   dlsym of cuGetProcAddress_v2 only, everything else through
 *              it, as the CUDA 12 runtime does ("procaddr-legacy": the
 *              4-argument cuGetProcAddress; "procaddr-ptsz": with the
 *              per-thread default stream flag)
 *
 * then runs the operations given as arguments, printing one line each:
 *
 *   alloc:N managed:N async:N pool:N vmm:N   allocate N bytes that way
 *   pitch:W:H   array:W:H (float)   array3d:W:H:D (float)
 *   free        frees the newest allocation      freeall
 *   info        cuMemGetInfo          nvml      NVML's memory info
 *   launch:N    N kernel launches     launchfor:MS  launch for MS ms
 *   allocfree:N:SIZE  N cuMemAlloc_v2 + cuMemFree_v2 pairs, timed
 *   stress:STEPS:SEED:CAP   random allocations and frees of every kind,
 *               checking that each fails with OOM exactly when it would
 *               pass CAP bytes over what this process holds
 *   child:OP,OP,...   runs those operations in a forked child, waits
 *   touch:PATH  sleep:MS  waitfile:PATH (at most 60 s)
 *   ptx         (real GPU) a kernel from hand-written PTX adds 1 to
 *               1M integers; checks the result
 *   spin:SECONDS:ITERS  (real GPU) launches a busy kernel and waits for
 *               it, for SECONDS; prints kernels per second
 *
 * Exits 0 when every operation did what it says (an allocation refused
 * with CUDA_ERROR_OUT_OF_MEMORY prints "oom" and is not a failure), 1 on
 * a failure, 2 on bad usage.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#undef cuGetProcAddress

typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t,
    CUdriverProcAddressQueryResult *);
typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t);

static struct api {
	CUresult (*init)(unsigned int);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*ctx_sync)(void);
	CUresult (*mem_info)(size_t *, size_t *);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t,
	    unsigned int);
	CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned int);
	CUresult (*free)(CUdeviceptr);
	CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
	CUresult (*free_async)(CUdeviceptr, CUstream);
	CUresult (*pool_create)(CUmemoryPool *, const CUmemPoolProps *);
	CUresult (*alloc_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
	CUresult (*granularity)(size_t *, const CUmemAllocationProp *,
	    CUmemAllocationGranularity_flags);
	CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t,
	    const CUmemAllocationProp *, unsigned long long);
	CUresult (*mem_release)(CUmemGenericAllocationHandle);
	CUresult (*addr_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
	    unsigned long long);
	CUresult (*addr_free)(CUdeviceptr, size_t);
	CUresult (*mem_map)(CUdeviceptr, size_t, size_t,
	    CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*mem_unmap)(CUdeviceptr, size_t);
	CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *,
	    size_t);
	CUresult (*array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
	CUresult (*array3d_create)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
	CUresult (*array_destroy)(CUarray);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*module_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned,
	    unsigned, unsigned, unsigned, CUstream, void **, void **);
} api;

/* Each entry: its base name (cuGetProcAddress), its symbol, its slot. */
#define API_ENTRIES(X)                                                    \
	X(init, "cuInit", "cuInit")                                       \
	X(device_get, "cuDeviceGet", "cuDeviceGet")                       \
	X(primary_retain, "cuDevicePrimaryCtxRetain",                     \
	    "cuDevicePrimaryCtxRetain")                                   \
	X(ctx_set, "cuCtxSetCurrent", "cuCtxSetCurrent")                  \
	X(ctx_sync, "cuCtxSynchronize", "cuCtxSynchronize")               \
	X(mem_info, "cuMemGetInfo", "cuMemGetInfo_v2")                    \
	X(alloc, "cuMemAlloc", "cuMemAlloc_v2")                           \
	X(alloc_pitch, "cuMemAllocPitch", "cuMemAllocPitch_v2")           \
	X(alloc_managed, "cuMemAllocManaged", "cuMemAllocManaged")        \
	X(free, "cuMemFree", "cuMemFree_v2")                              \
	X(alloc_async, "cuMemAllocAsync", "cuMemAllocAsync")              \
	X(free_async, "cuMemFreeAsync", "cuMemFreeAsync")                 \
	X(pool_create, "cuMemPoolCreate", "cuMemPoolCreate")              \
	X(alloc_pool, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync") \
	X(granularity, "cuMemGetAllocationGranularity",                   \
	    "cuMemGetAllocationGranularity")                              \
	X(mem_create, "cuMemCreate", "cuMemCreate")                       \
	X(mem_release, "cuMemRelease", "cuMemRelease")                    \
	X(addr_reserve, "cuMemAddressReserve", "cuMemAddressReserve")     \
	X(addr_free, "cuMemAddressFree", "cuMemAddressFree")              \
	X(mem_map, "cuMemMap", "cuMemMap")                                \
	X(mem_unmap, "cuMemUnmap", "cuMemUnmap")                          \
	X(set_access, "cuMemSetAccess", "cuMemSetAccess")                 \
	X(array_create, "cuArrayCreate", "cuArrayCreate_v2")              \
	X(array3d_create, "cuArray3DCreate", "cuArray3DCreate_v2")        \
	X(array_destroy, "cuArrayDestroy", "cuArrayDestroy")              \
	X(htod, "cuMemcpyHtoD", "cuMemcpyHtoD_v2")                        \
	X(dtoh, "cuMemcpyDtoH", "cuMemcpyDtoH_v2")                        \
	X(module_load, "cuModuleLoadData", "cuModuleLoadData")            \
	X(module_function, "cuModuleGetFunction", "cuModuleGetFunction")  \
	X(launch, "cuLaunchKernel", "cuLaunchKernel")

static int
resolve(const char *mode)
{
	void *lib, *p;
	get_proc_v2_fn gp2 = NULL;
	get_proc_fn gp1 = NULL;
	cuuint64_t flags = 0;
	int legacy = 0;

#ifdef CUDAPROG_LINKED
	if (strcmp(mode, "direct") != 0) {
		fprintf(stderr, "cudaprog-linked: mode is direct\n");
		return -1;
	}
#define LINK(slot, base, sym) api.slot = (void *)sym;
	(void)lib, (void)p, (void)gp2, (void)gp1, (void)flags, (void)legacy;
	api.init = cuInit;
	api.device_get = cuDeviceGet;
	api.primary_retain = cuDevicePrimaryCtxRetain;
	api.ctx_set = cuCtxSetCurrent;
	api.ctx_sync = cuCtxSynchronize;
	api.mem_info = cuMemGetInfo_v2;
	api.alloc = cuMemAlloc_v2;
	api.alloc_pitch = cuMemAllocPitch_v2;
	api.alloc_managed = cuMemAllocManaged;
	api.free = cuMemFree_v2;
	api.alloc_async = cuMemAllocAsync;
	api.free_async = cuMemFreeAsync;
	api.pool_create = cuMemPoolCreate;
	api.alloc_pool = cuMemAllocFromPoolAsync;
	api.granularity = cuMemGetAllocationGranularity;
	api.mem_create = cuMemCreate;
	api.mem_release = cuMemRelease;
	api.addr_reserve = cuMemAddressReserve;
	api.addr_free = cuMemAddressFree;
	api.mem_map = cuMemMap;
	api.mem_unmap = cuMemUnmap;
	api.set_access = cuMemSetAccess;
	api.array_create = cuArrayCreate_v2;
	api.array3d_create = cuArray3DCreate_v2;
	api.array_destroy = cuArrayDestroy;
	api.htod = cuMemcpyHtoD_v2;
	api.dtoh = cuMemcpyDtoH_v2;
	api.module_load = cuModuleLoadData;
	api.module_function = cuModuleGetFunction;
	api.launch = cuLaunchKernel;
	return 0;
#else
	if ((lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		fprintf(stderr, "cudaprog: %s\n", dlerror());
		return -1;
	}
	if (strcmp(mode, "dlsym") == 0) {
#define SYM(slot, base, sym)                                              \
	if ((p = dlsym(lib, sym)) == NULL) {                              \
		fprintf(stderr, "cudaprog: no %s\n", sym);                \
		return -1;                                                \
	}                                                                 \
	memcpy(&api.slot, &p, sizeof(p));
		API_ENTRIES(SYM)
#undef SYM
		return 0;
	}
	if (strcmp(mode, "procaddr") == 0 ||
	    strcmp(mode, "procaddr-ptsz") == 0) {
		if ((p = dlsym(lib, "cuGetProcAddress_v2")) == NULL)
			return -1;
		memcpy(&gp2, &p, sizeof(p));
		if (strcmp(mode, "procaddr-ptsz") == 0)
			flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	} else if (strcmp(mode, "procaddr-legacy") == 0) {
		if ((p = dlsym(lib, "cuGetProcAddress")) == NULL)
			return -1;
		memcpy(&gp1, &p, sizeof(p));
		legacy = 1;
	} else {
		fprintf(stderr, "cudaprog: unknown mode %s\n", mode);
		return -1;
	}
	/* The runtime asks for cuGetProcAddress itself first. */
	if (!legacy) {
		CUdriverProcAddressQueryResult st;

		if (gp2("cuGetProcAddress", &p, 12000, 0, &st) != CUDA_SUCCESS)
			return -1;
		memcpy(&gp2, &p, sizeof(p));
	}
#define PROC(slot, base, sym)                                             \
	{                                                                 \
		CUdriverProcAddressQueryResult st;                        \
		CUresult r = legacy ? gp1(base, &p, 12000, flags)         \
				    : gp2(base, &p, 12000, flags, &st);   \
		if (r != CUDA_SUCCESS || p == NULL) {                     \
			fprintf(stderr, "cudaprog: no %s\n", base);       \
			return -1;                                        \
		}                                                         \
		memcpy(&api.slot, &p, sizeof(p));                         \
	}
	API_ENTRIES(PROC)
#undef PROC
	return 0;
#endif
}

/* ---- the operations ---- */

enum kind { K_ALLOC, K_MANAGED, K_ASYNC, K_POOL, K_VMM, K_PITCH, K_ARRAY,
	K_ARRAY3D, K_KINDS };
static const char *const kind_names[] = {"alloc", "managed", "async",
	"pool", "vmm", "pitch", "array", "array3d"};

struct allocation {
	enum kind kind;
	CUdeviceptr ptr;
	CUmemGenericAllocationHandle handle;
	CUarray array;
	size_t size;
};

static struct allocation *live;
static size_t nlive, live_cap;
static CUmemoryPool pool;
static CUstream stream;	/* the legacy default stream (NULL) */

static int
check(CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return 0;
	printf("%s err %d\n", what, (int)r);
	return -1;
}

static CUresult
allocate(enum kind k, size_t a, size_t b, size_t c, struct allocation *out)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	CUresult r;

	memset(out, 0, sizeof(*out));
	out->kind = k;
	switch (k) {
	case K_ALLOC:
		out->size = a;
		return api.alloc(&out->ptr, a);
	case K_MANAGED:
		out->size = a;
		return api.alloc_managed(&out->ptr, a, CU_MEM_ATTACH_GLOBAL);
	case K_ASYNC:
		out->size = a;
		return api.alloc_async(&out->ptr, a, stream);
	case K_POOL:
		out->size = a;
		if (pool == NULL) {
			CUmemPoolProps pp;

			memset(&pp, 0, sizeof(pp));
			pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
			pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
			if ((r = api.pool_create(&pool, &pp)) != CUDA_SUCCESS)
				return r;
		}
		return api.alloc_pool(&out->ptr, a, pool, stream);
	case K_VMM:
		out->size = a;
		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		if ((r = api.mem_create(&out->handle, a, &prop, 0)) !=
		    CUDA_SUCCESS)
			return r;
		if ((r = api.addr_reserve(&out->ptr, a, 0, 0, 0)) !=
		    CUDA_SUCCESS ||
		    (r = api.mem_map(out->ptr, a, 0, out->handle, 0)) !=
		    CUDA_SUCCESS)
			return r;
		memset(&access, 0, sizeof(access));
		access.location = prop.location;
		access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		return api.set_access(out->ptr, a, &access, 1);
	case K_PITCH: {
		size_t pitch = 0;

		r = api.alloc_pitch(&out->ptr, &pitch, a, b, 4);
		out->size = pitch * b;
		return r;
	}
	case K_ARRAY: {
		CUDA_ARRAY_DESCRIPTOR d = {.Width = a, .Height = b,
			.Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};

		out->size = a * (b ? b : 1) * 4;
		return api.array_create(&out->array, &d);
	}
	case K_ARRAY3D: {
		CUDA_ARRAY3D_DESCRIPTOR d = {.Width = a, .Height = b,
			.Depth = c, .Format = CU_AD_FORMAT_FLOAT,
			.NumChannels = 1};

		out->size = a * (b ? b : 1) * (c ? c : 1) * 4;
		return api.array3d_create(&out->array, &d);
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult
release(const struct allocation *x)
{
	CUresult r;

	switch (x->kind) {
	case K_ASYNC:
	case K_POOL:
		return api.free_async(x->ptr, stream);
	case K_VMM:
		if ((r = api.mem_unmap(x->ptr, x->size)) != CUDA_SUCCESS ||
		    (r = api.addr_free(x->ptr, x->size)) != CUDA_SUCCESS)
			return r;
		return api.mem_release(x->handle);
	case K_ARRAY:
	case K_ARRAY3D:
		return api.array_destroy(x->array);
	default:
		return api.free(x->ptr);
	}
}

static int
keep(const struct allocation *x)
{
	if (nlive == live_cap) {
		size_t cap = live_cap ? live_cap * 2 : 64;
		struct allocation *n = realloc(live, cap * sizeof(*n));

		if (n == NULL)
			return -1;
		live = n;
		live_cap = cap;
	}
	live[nlive++] = *x;
	return 0;
}

static double
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* xorshift64*: the stress test's own generator, seeded. */
static uint64_t rng_state;
static uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static int
stress(long steps, unsigned long long seed, size_t cap)
{
	size_t held = 0;
	long i, ooms = 0, allocs = 0, frees = 0;
	size_t j;

	/* What this process held before counts against the cap too. */
	for (j = 0; j < nlive; j++)
		held += live[j].size;
	rng_state = seed ? seed : 1;
	for (i = 0; i < steps; i++) {
		struct allocation x;
		enum kind k;
		size_t a, b = 0, c = 0, want;
		CUresult r;

		if (nlive > 0 && rng() % 100 < 45) {
			size_t at = rng() % nlive;

			if (check(release(&live[at]), "stress free") != 0)
				return -1;
			held -= live[at].size;
			live[at] = live[--nlive];
			frees++;
			continue;
		}
		k = (enum kind)(rng() % K_KINDS);
		/* Sizes from 1 byte to cap/4, so the cap is met often. */
		a = 1 + rng() % (cap / 4 + 1);
		switch (k) {
		case K_PITCH:	/* whole 512-byte rows: pitch == width */
			a = 512 * (1 + rng() % 64);
			b = 1 + rng() % (cap / 4 / a + 1);
			want = a * b;
			break;
		case K_ARRAY:
			a = 1 + rng() % 4096;
			b = 1 + rng() % (cap / 16 / a + 1);
			want = a * b * 4;
			break;
		case K_ARRAY3D:
			a = 1 + rng() % 256;
			b = 1 + rng() % 64;
			c = 1 + rng() % (cap / 16 / (a * b) + 1);
			want = a * b * c * 4;
			break;
		default:
			want = a;
		}
		r = allocate(k, a, b, c, &x);
		if (r == CUDA_ERROR_OUT_OF_MEMORY) {
			if (held + want <= cap) {
				printf("stress FALSE-OOM step=%ld kind=%s "
				    "size=%zu held=%zu cap=%zu\n", i,
				    kind_names[k], want, held, cap);
				return -1;
			}
			ooms++;
			continue;
		}
		if (check(r, "stress alloc") != 0)
			return -1;
		if (held + want > cap) {
			printf("stress MISSED-OOM step=%ld kind=%s size=%zu "
			    "held=%zu cap=%zu\n", i, kind_names[k], want, held,
			    cap);
			return -1;
		}
		held += x.size;
		allocs++;
		if (keep(&x) != 0)
			return -1;
	}
	printf("stress ok steps=%ld allocs=%ld frees=%ld oom=%ld held=%zu\n",
	    steps, allocs, frees, ooms, held);
	return 0;
}

static const char ptx_source[] =
    ".version 6.4\n"
    ".target sm_52\n"
    ".address_size 64\n"
    ".visible .entry add_one(.param .u64 p, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r<7>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  mov.u32 %r3, %ntid.x;\n"
    "  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %p, %r5, %r1;\n"
    "  @%p bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mul.wide.u32 %rd3, %r5, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n"
    "  ld.global.u32 %r6, [%rd4];\n"
    "  add.s32 %r6, %r6, 1;\n"
    "  st.global.u32 [%rd4], %r6;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n"
    ".visible .entry spin(.param .u64 p, .param .u32 iters)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r<5>;\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u32 %r1, [iters];\n"
    "  mov.u32 %r2, 0;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "LOOP:\n"
    "  mad.lo.s32 %r3, %r3, 1664525, 1013904223;\n"
    "  add.s32 %r2, %r2, 1;\n"
    "  setp.lt.u32 %p, %r2, %r1;\n"
    "  @%p bra LOOP;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  st.global.u32 [%rd2], %r3;\n"
    "  ret;\n"
    "}\n";

static int
ptx_add_one(void)
{
	enum { N = 1 << 20 };
	CUmodule mod;
	CUfunction fn;
	CUdeviceptr d;
	unsigned int *h, n = N, i, bad = 0;
	void *args[2];

	if ((h = malloc(N * sizeof(*h))) == NULL)
		return -1;
	for (i = 0; i < N; i++)
		h[i] = i * 3;
	if (check(api.module_load(&mod, ptx_source), "ptx load") ||
	    check(api.module_function(&fn, mod, "add_one"), "ptx function") ||
	    check(api.alloc(&d, N * sizeof(*h)), "ptx alloc") ||
	    check(api.htod(d, h, N * sizeof(*h)), "ptx copy in"))
		return free(h), -1;
	args[0] = &d;
	args[1] = &n;
	if (check(api.launch(fn, N / 256, 1, 1, 256, 1, 1, 0, NULL, args,
	    NULL), "ptx launch") || check(api.ctx_sync(), "ptx sync") ||
	    check(api.dtoh(h, d, N * sizeof(*h)), "ptx copy out"))
		return free(h), -1;
	for (i = 0; i < N; i++)
		if (h[i] != i * 3 + 1)
			bad++;
	api.free(d);
	free(h);
	printf("ptx %s: %u of %u values wrong\n", bad ? "FAILED" : "ok", bad,
	    (unsigned)N);
	return bad ? -1 : 0;
}

static int
ptx_spin(double seconds, unsigned iters)
{
	CUmodule mod;
	CUfunction fn;
	CUdeviceptr d;
	void *args[2];
	double start, end;
	long k = 0;

	if (check(api.module_load(&mod, ptx_source), "spin load") ||
	    check(api.module_function(&fn, mod, "spin"), "spin function") ||
	    check(api.alloc(&d, 4096), "spin alloc"))
		return -1;
	args[0] = &d;
	args[1] = &iters;
	start = now_ms();
	end = start + seconds * 1e3;
	while (now_ms() < end) {
		if (check(api.launch(fn, 1024, 1, 1, 256, 1, 1, 0, NULL, args,
		    NULL), "spin launch") || check(api.ctx_sync(), "spin sync"))
			return -1;
		k++;
	}
	printf("spin kernels=%ld seconds=%.2f rate=%.1f\n", k,
	    (now_ms() - start) / 1e3, k / ((now_ms() - start) / 1e3));
	api.free(d);
	return 0;
}

static int
nvml_info(void)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL), *p;
	int (*init)(void), (*get)(unsigned int, void **), (*mem)(void *,
	    unsigned long long *);
	unsigned long long m[3];
	void *dev;

	if (lib == NULL) {
		printf("nvml err no library\n");
		return -1;
	}
	p = dlsym(lib, "nvmlInit_v2");
	memcpy(&init, &p, sizeof(p));
	p = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	memcpy(&get, &p, sizeof(p));
	p = dlsym(lib, "nvmlDeviceGetMemoryInfo");
	memcpy(&mem, &p, sizeof(p));
	if (init == NULL || get == NULL || mem == NULL || init() != 0 ||
	    get(0, &dev) != 0 || mem(dev, m) != 0) {
		printf("nvml err\n");
		return -1;
	}
	printf("nvml total=%llu free=%llu used=%llu\n", m[0], m[1], m[2]);
	return 0;
}

static int run_ops(int n, char **ops);

static int
run_child(const char *list)
{
	char *copy = strdup(list), *save = NULL, *tok, *argv[64];
	int n = 0, status;
	pid_t pid;

	if (copy == NULL)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok != NULL && n < 64;
	    tok = strtok_r(NULL, ",", &save))
		argv[n++] = tok;
	fflush(stdout);
	if ((pid = fork()) < 0)
		return free(copy), -1;
	if (pid == 0) {
		/* A CUDA context does not survive fork: start again. */
		CUdevice dev;
		CUcontext ctx;

		nlive = 0;
		if (check(api.init(0), "child init") ||
		    check(api.device_get(&dev, 0), "child device") ||
		    check(api.primary_retain(&ctx, dev), "child context") ||
		    check(api.ctx_set(ctx), "child set"))
			_exit(1);
		pool = NULL;
		_exit(run_ops(n, argv) == 0 ? 0 : 1);
	}
	free(copy);
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) :
	    128 + WTERMSIG(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int
run_op(char *op)
{
	unsigned long long a = 0, b = 0, c = 0;
	struct allocation x;
	size_t i;
	int k;

	for (k = 0; k < K_KINDS; k++) {
		size_t len = strlen(kind_names[k]);
		CUresult r;

		if (strncmp(op, kind_names[k], len) != 0 || op[len] != ':')
			continue;
		if (sscanf(op + len + 1, "%llu:%llu:%llu", &a, &b, &c) < 1)
			return -2;
		r = allocate((enum kind)k, a, b, c, &x);
		if (r == CUDA_ERROR_OUT_OF_MEMORY) {
			printf("%s %zu oom\n", kind_names[k], x.size);
			return 0;
		}
		if (check(r, kind_names[k]) != 0)
			return -1;
		printf("%s %zu ok\n", kind_names[k], x.size);
		return keep(&x);
	}
	if (strcmp(op, "free") == 0) {
		if (nlive == 0)
			return -2;
		if (check(release(&live[nlive - 1]), "free") != 0)
			return -1;
		printf("free %zu ok\n", live[--nlive].size);
		return 0;
	}
	if (strcmp(op, "freeall") == 0) {
		for (i = nlive; i > 0; i--)
			if (check(release(&live[i - 1]), "freeall") != 0)
				return -1;
		nlive = 0;
		printf("freeall ok\n");
		return 0;
	}
	if (strcmp(op, "info") == 0) {
		size_t f, t;

		if (check(api.mem_info(&f, &t), "info") != 0)
			return -1;
		printf("info free=%zu total=%zu\n", f, t);
		return 0;
	}
	if (strcmp(op, "nvml") == 0)
		return nvml_info();
	if (sscanf(op, "launch:%llu", &a) == 1) {
		double t0 = now_ms();

		for (i = 0; i < a; i++)
			if (check(api.launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL,
			    NULL, NULL), "launch") != 0)
				return -1;
		printf("launch %llu ms=%.1f\n", a, now_ms() - t0);
		return 0;
	}
	if (sscanf(op, "allocfree:%llu:%llu", &a, &b) == 2) {
		double t0 = now_ms();
		CUdeviceptr d;

		for (i = 0; i < a; i++)
			if (check(api.alloc(&d, b), "allocfree alloc") != 0 ||
			    check(api.free(d), "allocfree free") != 0)
				return -1;
		printf("allocfree %llu ms=%.1f\n", a, now_ms() - t0);
		return 0;
	}
	if (sscanf(op, "launchfor:%llu", &a) == 1) {
		double t0 = now_ms(), t;
		long n = 0;

		while ((t = now_ms()) < t0 + (double)a) {
			if (check(api.launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL,
			    NULL, NULL), "launch") != 0)
				return -1;
			n++;
		}
		printf("launchfor n=%ld ms=%.1f rate=%.1f\n", n, t - t0,
		    n / ((t - t0) / 1e3));
		return 0;
	}
	if (sscanf(op, "stress:%llu:%llu:%llu", &a, &b, &c) == 3)
		return stress((long)a, b, c);
	if (strncmp(op, "child:", 6) == 0)
		return run_child(op + 6);
	if (strncmp(op, "touch:", 6) == 0) {
		FILE *f = fopen(op + 6, "w");

		if (f == NULL)
			return -1;
		fclose(f);
		return 0;
	}
	if (strncmp(op, "waitfile:", 9) == 0) {
		struct stat st;

		for (i = 0; i < 6000; i++) {
			if (stat(op + 9, &st) == 0)
				return 0;
			usleep(10000);
		}
		printf("waitfile %s: timed out\n", op + 9);
		return -1;
	}
	if (sscanf(op, "sleep:%llu", &a) == 1) {
		usleep((useconds_t)(a * 1000));
		return 0;
	}
	if (strcmp(op, "ptx") == 0)
		return ptx_add_one();
	if (sscanf(op, "spin:%llu:%llu", &a, &b) == 2)
		return ptx_spin((double)a, (unsigned)b);
	return -2;
}

static int
run_ops(int n, char **ops)
{
	int i, r;

	for (i = 0; i < n; i++) {
		if ((r = run_op(ops[i])) == -2) {
			fprintf(stderr, "cudaprog: bad operation %s\n", ops[i]);
			exit(2);
		}
		if (r != 0)
			return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: cudaprog MODE [OP...]\n");
		return 2;
	}
	if (resolve(argv[1]) != 0)
		return 1;
	if (check(api.init(0), "init") || check(api.device_get(&dev, 0),
	    "device") || check(api.primary_retain(&ctx, dev), "context") ||
	    check(api.ctx_set(ctx), "set context"))
		return 1;
	return run_ops(argc - 2, argv + 2) == 0 ? 0 : 1;
}
