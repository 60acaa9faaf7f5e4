/*
 * test_gpu_presence.c: owner presence in the GPU layer (src/agent/gpu.c,
 * gpu_fake.c): which processes are the pool's (by their cgroup), and the
 * fake backend's process file (agent --fake-gpu-procs).
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

int
main(void)
{
	RUN(cgroup_is_pool);
	RUN(fake_processes);
	return unit_report();
}
