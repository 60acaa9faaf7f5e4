/*
 * test_gpushare.c: the agent's side of enforced GPU sharing
 * (src/agent/gpushare.c) and the region it shares with
 * libgpupool-cuda.so (src/shim/region.h): the effective share (alone,
 * strict, owner throttle), a job's cgroup from /proc/PID/cgroup text, a
 * prepared work directory's region read back and steered, and the
 * reaping of a dead process's bytes.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/gpushare.h"
#include "gp.h"
#include "shim/region.h"
#include "unit.h"

TEST(effective_share)
{
	/* Alone and elastic: the whole GPU; strict: its share. */
	CHECK_EQ(gp_gpushare_effective(250, 1, 0, 0), 1000);
	CHECK_EQ(gp_gpushare_effective(250, 1, 1, 0), 250);
	CHECK_EQ(gp_gpushare_effective(250, 0, 0, 0), 250);
	/* The owner's throttle caps either. */
	CHECK_EQ(gp_gpushare_effective(250, 1, 0, 100), 100);
	CHECK_EQ(gp_gpushare_effective(50, 0, 0, 100), 50);
}

TEST(share_milli)
{
	CHECK_EQ(gp_gpushare_share_milli(250, 0, 16384), 250);
	CHECK_EQ(gp_gpushare_share_milli(250, 8192, 16384), 250);
	CHECK_EQ(gp_gpushare_share_milli(0, 4096, 16384), 250);
	CHECK_EQ(gp_gpushare_share_milli(0, 1, 16384), 1);
	CHECK_EQ(gp_gpushare_share_milli(0, 99999, 16384), 1000);
	CHECK_EQ(gp_gpushare_share_milli(0, 512, 0), 1000);
}

TEST(cgroup_job)
{
	int64_t job = 0, attempt = 0;

	CHECK_EQ(gp_gpushare_cgroup_job("0::/gpupool-lab-1234/17-2\n", &job,
	    &attempt), 1);
	CHECK_EQ(job, 17);
	CHECK_EQ(attempt, 2);
	CHECK_EQ(gp_gpushare_cgroup_job("12:pids:/user.slice\n"
	    "7:memory:/x/gpupool-g-9/3-1/inner\n", &job, &attempt), 1);
	CHECK_EQ(job, 3);
	CHECK_EQ(attempt, 1);
	CHECK_EQ(gp_gpushare_cgroup_job("0::/user.slice/session-1.scope\n",
	    &job, &attempt), 0);
	/* The agent's own cgroup, or a name that is not ID-ATTEMPT. */
	CHECK_EQ(gp_gpushare_cgroup_job("0::/gpupool-g-9\n", &job, &attempt),
	    0);
	CHECK_EQ(gp_gpushare_cgroup_job("0::/gpupool-g-9/3-1x\n", &job,
	    &attempt), 0);
	CHECK_EQ(gp_gpushare_cgroup_job("0::/gpupool-g-9/\n1::/3-1\n", &job,
	    &attempt), 0);
}

TEST(prepare_and_steer)
{
	char dir[] = "/tmp/test_gpushare.XXXXXX", lib[4096], region[4096];
	char src[4200];
	struct gp_gpushare_usage u;
	FILE *f;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/lib.so", dir);
	CHECK((f = fopen(src, "w")) != NULL);
	fputs("not really a library", f);
	fclose(f);
	CHECK_EQ(gp_gpushare_prepare(dir, src, 512LL << 20, 500, NULL, lib,
	    sizeof(lib), region, sizeof(region)), 0);
	CHECK(access(lib, R_OK) == 0);
	CHECK_EQ(gp_gpushare_steer(dir, -1, -1, &u), 0);
	CHECK_EQ(u.limit_bytes, 512LL << 20);
	CHECK_EQ(u.share_milli, 500);
	CHECK_EQ(u.effective_milli, 500);
	CHECK_EQ(u.used_bytes, 0);
	CHECK_EQ(gp_gpushare_steer(dir, 1000, 42, NULL), 0);
	CHECK_EQ(gp_gpushare_steer(dir, -1, -1, &u), 0);
	CHECK_EQ(u.effective_milli, 1000);
	unlink(lib);
	unlink(region);
	CHECK_EQ(gp_gpushare_steer(dir, -1, -1, &u), GP_ENOENT);
	unlink(src);
	rmdir(dir);
}

/*
 * The region is writable by the job: a job that truncates it, or fills it
 * with anything, must get the agent an error, never a SIGBUS (the agent
 * once read it through a mapping; a read past the end of a truncated
 * file's mapping kills the reader).
 */
TEST(truncated_or_garbled_region)
{
	char dir[] = "/tmp/test_gpushare.XXXXXX", lib[4096], region[4096];
	char src[4200], junk[4096];
	struct gp_gpushare_usage u;
	FILE *f;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/lib.so", dir);
	CHECK((f = fopen(src, "w")) != NULL);
	fputs("not really a library", f);
	fclose(f);
	CHECK_EQ(gp_gpushare_prepare(dir, src, 512LL << 20, 500, NULL, lib,
	    sizeof(lib), region, sizeof(region)), 0);
	CHECK_EQ(gp_gpushare_steer(dir, -1, -1, &u), 0);
	CHECK_EQ(truncate(region, 0), 0);
	CHECK_EQ(gp_gpushare_steer(dir, -1, -1, &u), GP_EIO);
	CHECK_EQ(gp_gpushare_steer(dir, 700, 10, NULL), GP_EIO);
	CHECK_EQ(truncate(region, 100), 0);
	CHECK_EQ(gp_gpushare_steer(dir, -1, -1, &u), GP_EIO);
	/* Full size, but not a region. */
	memset(junk, 0x5a, sizeof(junk));
	CHECK((fd = open(region, O_WRONLY | O_TRUNC)) >= 0);
	for (size_t n = 0; n < sizeof(struct gp_region); n += sizeof(junk))
		CHECK_EQ(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	CHECK(gp_gpushare_steer(dir, -1, -1, &u) != 0);
	unlink(lib);
	unlink(region);
	unlink(src);
	rmdir(dir);
}

struct truncater {
	const char *path;
	_Atomic int stop;
	long rounds;
};

static void *
truncate_loop(void *arg)
{
	struct truncater *t = arg;

	while (!atomic_load(&t->stop)) {
		if (truncate(t->path, 0) != 0 ||
		    truncate(t->path, sizeof(struct gp_region)) != 0)
			break;
		t->rounds++;
	}
	return NULL;
}

/*
 * The race itself: a job truncating its region again and again while the
 * agent steers it. Each steer answers 0 or GP_EIO and the agent lives on
 * (checking the size first and then mapping left a window in which the
 * truncation turned the agent's next read into a SIGBUS).
 */
TEST(region_truncated_while_steered)
{
	char dir[] = "/tmp/test_gpushare.XXXXXX", lib[4096], region[4096];
	char src[4200];
	struct gp_gpushare_usage u;
	struct truncater t = {.path = region};
	pthread_t th;
	FILE *f;
	int i, rc, ok = 0, eio = 0;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/lib.so", dir);
	CHECK((f = fopen(src, "w")) != NULL);
	fputs("not really a library", f);
	fclose(f);
	CHECK_EQ(gp_gpushare_prepare(dir, src, 512LL << 20, 500, NULL, lib,
	    sizeof(lib), region, sizeof(region)), 0);
	CHECK_EQ(pthread_create(&th, NULL, truncate_loop, &t), 0);
	for (i = 0; i < 20000; i++) {
		rc = gp_gpushare_steer(dir, 700, 10, &u);
		if (rc == 0)
			ok++;
		else if (rc == GP_EIO)
			eio++;
		else
			break;
	}
	atomic_store(&t.stop, 1);
	pthread_join(th, NULL);
	CHECK_EQ(ok + eio, 20000);
	CHECK(t.rounds > 0);
	unlink(lib);
	unlink(region);
	unlink(src);
	rmdir(dir);
}

TEST(reap_dead_process)
{
	struct gp_region *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t child;
	int status;

	CHECK(r != MAP_FAILED);
	gp_region_init(r, 1000, 1000, 0);
	CHECK(gp_region_valid(r));
	/* A child takes a slot and 700 bytes, then dies without a word. */
	if ((child = fork()) == 0) {
		atomic_store(&r->slots[3].start, gp_region_pid_start(getpid()));
		atomic_store(&r->slots[3].used, 700);
		atomic_fetch_add(&r->used, 700);
		atomic_store(&r->slots[3].pid, getpid());
		_exit(0);
	}
	CHECK(child > 0);
	CHECK_EQ(waitpid(child, &status, 0), child);
	/* A live process (us) keeps its bytes. */
	atomic_store(&r->slots[5].pid, getpid());
	atomic_store(&r->slots[5].start, gp_region_pid_start(getpid()));
	atomic_store(&r->slots[5].used, 100);
	atomic_fetch_add(&r->used, 100);
	CHECK_EQ(atomic_load(&r->used), 800);
	CHECK_EQ(gp_region_reap(r), 700);
	CHECK_EQ(atomic_load(&r->used), 100);
	CHECK_EQ(atomic_load(&r->slots[3].pid), 0);
	CHECK_EQ(atomic_load(&r->slots[5].pid), getpid());
	/* A recorded start time that is not the pid's: reused, dead. */
	atomic_store(&r->slots[5].start, 1);
	CHECK_EQ(gp_region_reap(r), 100);
	CHECK_EQ(atomic_load(&r->used), 0);
	munmap(r, sizeof(*r));
}

int
main(void)
{
	RUN(effective_share);
	RUN(share_milli);
	RUN(cgroup_job);
	RUN(prepare_and_steer);
	RUN(truncated_or_garbled_region);
	RUN(region_truncated_while_steered);
	RUN(reap_dead_process);
	return unit_report();
}
