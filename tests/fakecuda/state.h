/*
 * state.h: the file a test controls, shared by the fake libcuda.so.1 and
 * libnvidia-ml.so.1 (tests/fakecuda/). $FAKECUDA_STATE names it; each
 * line is "key value":
 *
 *   total_bytes 17179869184   device memory (default 16 GiB)
 *   util 40                   device utilisation, percent (default 0)
 *   name Fake H100            device name (default "Fake CUDA GPU")
 *   uuid GPU-...              (default GPU-fakecuda-0)
 *   proc_util PID PERCENT     a process's SM utilisation (repeatable)
 *   proc PID                  a process using the GPU (repeatable)
 *   no_proc_util 1            no per-process utilisation (as drivers or
 *                             GPUs without it: NVML_ERROR_NOT_SUPPORTED)
 *   reserved_bytes 503316480  what the driver keeps (default 0): NVML's
 *                             total includes it, CUDA's does not
 *   ctx_bytes 67108864        what a process's context takes (default 0),
 *                             in its CUDA free memory and NVML's list
 *
 * Read again on every query that returns it, so a test changes the
 * readings by rewriting the file (write a temporary file, rename it).
 */
#ifndef FAKECUDA_STATE_H
#define FAKECUDA_STATE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_PROCS_MAX 32

struct fake_state {
	unsigned long long total_bytes;
	unsigned long long reserved_bytes;
	unsigned long long ctx_bytes;
	unsigned util;
	unsigned no_proc_util;
	char name[96];
	char uuid[96];
	int nproc_util;
	unsigned proc_util_pid[FAKE_PROCS_MAX], proc_util[FAKE_PROCS_MAX];
	int nprocs;
	unsigned procs[FAKE_PROCS_MAX];
};

static inline void
fake_state_read(struct fake_state *s)
{
	const char *path = getenv("FAKECUDA_STATE");
	char line[256];
	FILE *f;

	memset(s, 0, sizeof(*s));
	s->total_bytes = 16ULL << 30;
	strcpy(s->name, "Fake CUDA GPU");
	strcpy(s->uuid, "GPU-fakecuda-0");
	if (path == NULL || (f = fopen(path, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned a, b;
		char *nl = strchr(line, '\n');

		if (nl != NULL)
			*nl = '\0';
		if (sscanf(line, "total_bytes %llu", &s->total_bytes) == 1)
			continue;
		if (sscanf(line, "reserved_bytes %llu", &s->reserved_bytes) ==
		    1 || sscanf(line, "ctx_bytes %llu", &s->ctx_bytes) == 1)
			continue;
		if (sscanf(line, "no_proc_util %u", &s->no_proc_util) == 1)
			continue;
		if (sscanf(line, "util %u", &s->util) == 1)
			continue;
		if (strncmp(line, "name ", 5) == 0) {
			snprintf(s->name, sizeof(s->name), "%.95s", line + 5);
			continue;
		}
		if (strncmp(line, "uuid ", 5) == 0) {
			snprintf(s->uuid, sizeof(s->uuid), "%.95s", line + 5);
			continue;
		}
		if (sscanf(line, "proc_util %u %u", &a, &b) == 2 &&
		    s->nproc_util < FAKE_PROCS_MAX) {
			s->proc_util_pid[s->nproc_util] = a;
			s->proc_util[s->nproc_util++] = b;
			continue;
		}
		if (sscanf(line, "proc %u", &a) == 1 &&
		    s->nprocs < FAKE_PROCS_MAX)
			s->procs[s->nprocs++] = a;
	}
	fclose(f);
}

#endif
