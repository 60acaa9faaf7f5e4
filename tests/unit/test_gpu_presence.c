/*
 * test_gpu_presence.c: owner presence in the GPU layer (src/agent/gpu.c,
 * gpu_fake.c, gpu_nvml.c): which processes are the pool's (by their
 * cgroup), the fake backend's process file (agent --fake-gpu-procs), and
 * NVML's process lists in each struct layout, through stand-in calls.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/gpu.h"
#include "gp.h"
#include "unit.h"

TEST(cgroup_is_pool)
{
	/* cgroup v2: jobs live in gpupool-<node>-<agent pid>/<job>. */
	CHECK_EQ(gp_gpu_cgroup_is_pool("0::/gpupool-n1-123/job-4-2\n"), 1);
	CHECK_EQ(gp_gpu_cgroup_is_pool("0::/gpupool-n1-123/job-4-2"), 1);
	/* Below a delegated or containerised root. */
	CHECK_EQ(gp_gpu_cgroup_is_pool(
	    "0::/system.slice/agent.service/gpupool-n1-9/job-1-1\n"), 1);
	/* cgroup v1: one line per hierarchy; any of them. */
	CHECK_EQ(gp_gpu_cgroup_is_pool(
	    "12:cpuset:/\n11:memory:/gpupool-n-1/job-7-1\n"
	    "5:pids:/gpupool-n-1/job-7-1\n0::/\n"), 1);
	/* The owner's processes. */
	CHECK_EQ(gp_gpu_cgroup_is_pool(
	    "0::/user.slice/user-1000.slice/session-3.scope\n"), 0);
	CHECK_EQ(gp_gpu_cgroup_is_pool("0::/\n"), 0);
	CHECK_EQ(gp_gpu_cgroup_is_pool(""), 0);
	/* The agent's own parent (no job below it), a unit so named, and
	 * the name in another field. */
	CHECK_EQ(gp_gpu_cgroup_is_pool("0::/gpupool-n1-123\n"), 0);
	CHECK_EQ(gp_gpu_cgroup_is_pool(
	    "0::/system.slice/gpupool-agent.service\n"), 0);
	CHECK_EQ(gp_gpu_cgroup_is_pool("1:/gpupool-x/y\n"), 0);
	CHECK_EQ(gp_gpu_cgroup_is_pool("0::/home/gpupool2/x/y\n"), 0);
	/* This test is not a job. */
	CHECK_EQ(gp_gpu_pid_is_pool(getpid()), 0);
	CHECK_EQ(gp_gpu_pid_is_pool(0x7ffffff0), 0);
}

static void
write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return;
	fputs(text, f);
	fclose(f);
}

TEST(fake_processes)
{
	char path[] = "/var/tmp/gpupool-procs.XXXXXX", err[256], text[256];
	struct gp_gpu_set set, none;
	pid_t pids[4], child;
	int fd, status;

	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	unlink(path);
	CHECK_EQ(gp_gpu_open("2", "n1", &set, err, sizeof(err)), 0);
	/* No file given, and a missing file: nobody. */
	CHECK_EQ(gp_gpu_foreign_processes(&set, 0, pids, 4), 0);
	CHECK_EQ(gp_gpu_set_fake_procs(&set, path), 0);
	CHECK_EQ(gp_gpu_foreign_processes(&set, 0, pids, 4), 0);
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	snprintf(text, sizeof(text), "# gpu pid\n0 %d\n\n1 %d\n1 2147483000\n"
	    "junk\n5 %d\n", (int)child, (int)getpid(), (int)getpid());
	write_text(path, text);
	CHECK_EQ(gp_gpu_foreign_processes(&set, 0, pids, 4), 1);
	CHECK_EQ(pids[0], child);
	/* The dead pid does not count. */
	CHECK_EQ(gp_gpu_foreign_processes(&set, 1, pids, 4), 1);
	CHECK_EQ(pids[0], getpid());
	/* max 0: only the count. */
	CHECK_EQ(gp_gpu_foreign_processes(&set, 1, NULL, 0), 1);
	CHECK_EQ(gp_gpu_foreign_processes(&set, 2, pids, 4), GP_EINVAL);
	CHECK_EQ(gp_gpu_foreign_processes(&set, -1, pids, 4), GP_EINVAL);
	/* Once the process is gone, the GPU is free again. */
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	CHECK_EQ(gp_gpu_foreign_processes(&set, 0, pids, 4), 0);
	unlink(path);
	gp_gpu_close(&set);
	/* The hook is for the fake backend only. */
	memset(&none, 0, sizeof(none));
	CHECK_EQ(gp_gpu_set_fake_procs(&none, path), GP_EINVAL);
	CHECK_EQ(gp_gpu_foreign_processes(&none, 0, pids, 4), 0);
}

/* The NVML layouts (see gpu_nvml.c). */
struct info_v1 {
	unsigned int pid;
	unsigned long long mem;
};
struct info_v2 {
	unsigned int pid;
	unsigned long long mem;
	unsigned int gi, ci;
};
struct info_v3_cc {
	unsigned int pid;
	unsigned long long mem;
	unsigned int gi, ci;
	unsigned long long cc;
};

static const unsigned int fake_pids[3] = {101, 202, 303};

#define FILL(type)                                                          \
	do {                                                                \
		type *e = infos;                                            \
		unsigned int i;                                             \
		if (*count < 3) {                                           \
			*count = 3;                                         \
			return 7;                                           \
		}                                                           \
		for (i = 0; i < 3; i++) {                                   \
			memset(&e[i], 0, sizeof(e[i]));                     \
			e[i].pid = fake_pids[i];                            \
			e[i].mem = 1 << 20;                                 \
		}                                                           \
		*count = 3;                                                 \
		return 0;                                                   \
	} while (0)

static int
list_v1(void *dev, unsigned int *count, void *infos)
{
	(void)dev;
	FILL(struct info_v1);
}

static int
list_v2(void *dev, unsigned int *count, void *infos)
{
	(void)dev;
	FILL(struct info_v2);
}

static int
list_v3_cc(void *dev, unsigned int *count, void *infos)
{
	(void)dev;
	FILL(struct info_v3_cc);
}

static int calls_small;

/* Reports 600 processes when asked with less room; then 3. */
static int
list_growing(void *dev, unsigned int *count, void *infos)
{
	(void)dev;
	if (*count < 600) {
		calls_small++;
		*count = 600;
		return 7;
	}
	FILL(struct info_v2);
}

static int
list_not_supported(void *dev, unsigned int *count, void *infos)
{
	(void)dev;
	(void)count;
	(void)infos;
	return 3;
}

static int
list_broken(void *dev, unsigned int *count, void *infos)
{
	(void)dev;
	(void)count;
	(void)infos;
	return 999;
}

static int
same_pids(const pid_t *pids, int n)
{
	return n == 3 && pids[0] == 101 && pids[1] == 202 && pids[2] == 303;
}

TEST(nvml_layouts)
{
	pid_t pids[8];
	int n;

	n = 0;
	CHECK_EQ(gp_gpu_nvml_processes_call(list_v1, 1, NULL, pids, &n, 8), 0);
	CHECK(same_pids(pids, n));
	n = 0;
	CHECK_EQ(gp_gpu_nvml_processes_call(list_v2, 2, NULL, pids, &n, 8), 0);
	CHECK(same_pids(pids, n));
	/* _v3 with the 24-byte layout, and with the 32-byte one. */
	n = 0;
	CHECK_EQ(gp_gpu_nvml_processes_call(list_v2, 3, NULL, pids, &n, 8), 0);
	CHECK(same_pids(pids, n));
	n = 0;
	CHECK_EQ(gp_gpu_nvml_processes_call(list_v3_cc, 3, NULL, pids, &n, 8),
	    0);
	CHECK(same_pids(pids, n));
	/* Appends, up to max. */
	n = 1;
	pids[0] = 7;
	CHECK_EQ(gp_gpu_nvml_processes_call(list_v2, 2, NULL, pids, &n, 3), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(pids[0], 7);
	CHECK_EQ(pids[2], 202);
	/* More processes than room: asks again with enough. */
	n = 0;
	CHECK_EQ(gp_gpu_nvml_processes_call(list_growing, 2, NULL, pids, &n,
	    8), 0);
	CHECK(same_pids(pids, n));
	CHECK_EQ(calls_small, 1);
	n = 0;
	CHECK_EQ(gp_gpu_nvml_processes_call(list_not_supported, 3, NULL, pids,
	    &n, 8), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(gp_gpu_nvml_processes_call(list_broken, 3, NULL, pids, &n, 8),
	    GP_EIO);
	CHECK_EQ(gp_gpu_nvml_processes_call(NULL, 3, NULL, pids, &n, 8), 0);
	CHECK_EQ(n, 0);
}

int
main(void)
{
	RUN(cgroup_is_pool);
	RUN(fake_processes);
	RUN(nvml_layouts);
	return unit_report();
}
