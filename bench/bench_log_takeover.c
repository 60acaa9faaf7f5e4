/*
 * bench_log_takeover.c: what fencing job logs by epoch costs a new
 * leader (joblog.c, docs/operations.md "The shared blob directory"):
 * writes J job logs of M MiB each (epoch 1's files, <id>.e1.log) and
 * L finished jobs' small logs into a scratch blob directory (default
 * under /var/tmp, or --dir), then times, as a leader of epoch 2 does on
 * taking the lead, the scan of BLOB/logs (joblog_init) and the copy of
 * each unfinished job's log into its own epoch's files
 * (joblog_take_over), warm (the files just written) or, with --cold 1,
 * after dropping the page cache (root only; it slows every other process
 * on the machine for a while). Prints "metric value unit" lines.
 * Usage: bench_log_takeover [--jobs J] [--mib M] [--finished L]
 * [--dir DIR] [--cold 0|1] (defaults 16, 16, 10000, /var/tmp, 0).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord/joblog.h"
#include "gp.h"
#include "log.h"
#include "util.h"

static double
ms_since(int64_t start_us)
{
	return (double)(gp_mono_us() - start_us) / 1000.0;
}

static int
write_log(const char *path, int64_t bytes)
{
	static char buf[1 << 16];
	int64_t done = 0;
	int fd;

	if (buf[0] == '\0')
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = i % 64 == 63 ? '\n' : 'a' + (char)(i % 26);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0)
		return -1;
	while (done < bytes) {
		size_t n = bytes - done < (int64_t)sizeof(buf)
		    ? (size_t)(bytes - done)
		    : sizeof(buf);
		if (gp_write_all(fd, buf, n) != 0) {
			close(fd);
			return -1;
		}
		done += (int64_t)n;
	}
	fsync(fd);
	return close(fd);
}

int
main(int argc, char **argv)
{
	long jobs = 16, mib = 16, finished = 10000, cold = 0, i;
	const char *base = "/var/tmp";
	char dir[1024], logs[1100], path[1200], cmd[1200];
	struct job *js;
	int64_t t0;
	double scan_ms, copy_ms;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--jobs") == 0)
			jobs = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--mib") == 0)
			mib = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--finished") == 0)
			finished = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--cold") == 0)
			cold = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--dir") == 0)
			base = argv[i + 1];
	}
	if (jobs < 1 || mib < 0 || finished < 0) {
		fprintf(stderr, "usage: bench_log_takeover [--jobs J] "
		    "[--mib M] [--finished L] [--dir DIR]\n");
		return 2;
	}
	gp_log_set_level(GP_LOG_WARN);
	snprintf(dir, sizeof(dir), "%s/gp-bench-takeover.XXXXXX", base);
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(logs, sizeof(logs), "%s/logs", dir);
	if (gp_mkdir_p(logs, 0700) != 0)
		return 1;
	for (i = 0; i < jobs; i++) {
		snprintf(path, sizeof(path), "%s/%ld.e1.log", logs, i + 1);
		if (write_log(path, (int64_t)mib << 20) != 0)
			return 1;
	}
	for (i = 0; i < finished; i++) {
		snprintf(path, sizeof(path), "%s/%ld.e1.log", logs,
		    jobs + i + 1);
		if (write_log(path, 4096) != 0)
			return 1;
	}
	if (cold && system("sync; echo 1 >/proc/sys/vm/drop_caches") != 0)
		cold = 0;
	printf("cache_dropped %ld bool\n", cold ? 1L : 0L);
	t0 = gp_mono_us();
	if (joblog_init(dir, dir, 2) != 0)
		return 1;
	scan_ms = ms_since(t0);
	if ((js = calloc((size_t)jobs, sizeof(*js))) == NULL)
		return 1;
	t0 = gp_mono_us();
	for (i = 0; i < jobs; i++) {
		js[i].id = i + 1;
		js[i].state = JOB_RUNNING;
		js[i].log_epoch = joblog_epoch_of(js[i].id);
		js[i].log_size = joblog_size_on_disk(js[i].id, js[i].log_epoch);
		if (joblog_take_over(&js[i]) != 0)
			return 1;
	}
	copy_ms = ms_since(t0);
	printf("logs_listed %ld files\n", jobs + finished);
	printf("scan_ms %.1f ms\n", scan_ms);
	printf("copied %ld jobs\n", jobs);
	printf("copied_mib %ld MiB\n", jobs * mib);
	printf("copy_ms %.1f ms\n", copy_ms);
	if (copy_ms > 0)
		printf("copy_rate %.0f MiB/s\n",
		    (double)(jobs * mib) / (copy_ms / 1000.0));
	free(js);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}
