/*
 * cudadrv.h: the few CUDA driver API and NVML types the interposition
 * library needs, declared from NVIDIA's public driver API and NVML
 * reference (so that the library builds without the CUDA toolkit). Only
 * what libgpupool-cuda.so looks into is spelt out; every handle is an
 * opaque pointer or integer, as in the documentation.
 */
#ifndef GP_SHIM_CUDADRV_H
#define GP_SHIM_CUDADRV_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
#define CUDA_SUCCESS			0
#define CUDA_ERROR_INVALID_VALUE	1
#define CUDA_ERROR_OUT_OF_MEMORY	2
#define CUDA_ERROR_NOT_FOUND		500

typedef uint64_t CUdeviceptr;			/* _v2: pointer-sized */
typedef void *CUstream;
typedef void *CUfunction;
typedef void *CUarray;
typedef void *CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;

/* CUarray_format: the element formats, whose size in bytes matters. */
enum {
	CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
	CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
	CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
	CU_AD_FORMAT_SIGNED_INT8 = 0x08,
	CU_AD_FORMAT_SIGNED_INT16 = 0x09,
	CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
	CU_AD_FORMAT_HALF = 0x10,
	CU_AD_FORMAT_FLOAT = 0x20,
};

typedef struct {			/* CUDA_ARRAY_DESCRIPTOR (_v2) */
	size_t Width;
	size_t Height;
	int Format;			/* CUarray_format */
	unsigned int NumChannels;
} gp_cu_array_desc;

typedef struct {			/* CUDA_ARRAY3D_DESCRIPTOR (_v2) */
	size_t Width;
	size_t Height;
	size_t Depth;
	int Format;
	unsigned int NumChannels;
	unsigned int Flags;
} gp_cu_array3d_desc;

/* cuGetProcAddress flags (CUdriverProcAddress_flags). */
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2

/* NVML */
typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_FOUND 6
typedef void *nvmlDevice_t;
typedef struct {			/* nvmlMemory_t */
	unsigned long long total, free, used;
} gp_nvml_memory;
typedef struct {			/* nvmlMemory_v2_t */
	unsigned int version;
	unsigned long long total, reserved, free, used;
} gp_nvml_memory_v2;
typedef struct {			/* nvmlUtilization_t */
	unsigned int gpu, memory;
} gp_nvml_utilization;
typedef struct {			/* nvmlProcessUtilizationSample_t */
	unsigned int pid;
	unsigned long long timeStamp;
	unsigned int smUtil, memUtil, encUtil, decUtil;
} gp_nvml_process_sample;

#endif
