/*
 * gpushare.c: the agent's side of enforced GPU sharing: prepares a
 * fractional job's work directory (the library, the region) and steers
 * and reads its region. See gpushare.h and src/shim/region.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/gpushare.h"
#include "gp.h"
#include "shim/region.h"
#include "util.h"

int
gp_gpushare_find_lib(char *path, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n;
	static const char *const rel[] = {"libgpupool-cuda.so",
		"../lib/gpupool/libgpupool-cuda.so"};
	size_t i;

	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
		return GP_ENOENT;
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) == NULL)
		return GP_ENOENT;
	*slash = '\0';
	for (i = 0; i < GP_ARRAY_LEN(rel); i++) {
		if (snprintf(path, len, "%s/%s", exe, rel[i]) >= (int)len)
			continue;
		if (access(path, R_OK) == 0)
			return 0;
	}
	return GP_ENOENT;
}

static int
copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in, out, rc = 0;
	ssize_t n;

	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return GP_EIO;
	if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	    0644)) < 0) {
		close(in);
		return GP_EIO;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			rc = GP_EIO;
			break;
		}
	if (n < 0 || fchmod(out, 0644) != 0)
		rc = GP_EIO;
	close(in);
	if (close(out) != 0)
		rc = GP_EIO;
	return rc;
}

int
gp_gpushare_prepare(const char *workdir, const char *lib,
    int64_t limit_bytes, int share_milli, const struct gp_gpu_info *gpu,
    char *lib_out, size_t lib_len, char *region_out, size_t region_len)
{
	struct gp_region r;
	int fd, rc;

	if (snprintf(lib_out, lib_len, "%s/%s", workdir, GP_GPUSHARE_LIB) >=
	    (int)lib_len || snprintf(region_out, region_len, "%s/%s",
	    workdir, GP_GPUSHARE_REGION) >= (int)region_len)
		return GP_EINVAL;
	if ((rc = copy_file(lib, lib_out)) != 0)
		return rc;
	gp_region_init(&r, limit_bytes > 0 ? (uint64_t)limit_bytes : 0,
	    (uint32_t)(share_milli > 0 && share_milli <= 1000 ? share_milli
							      : 1000),
	    gpu != NULL && gpu->proc_util ? GP_REGION_AGENT_UTIL : 0);
	if (gpu != NULL && gpu->ctx_bytes > 0)
		atomic_store(&r.ctx_bytes, (uint64_t)gpu->ctx_bytes);
	if ((fd = open(region_out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	    0600)) < 0)
		return GP_EIO;
	/* The job's processes (its own user) account in it. */
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r) ||
	    fchmod(fd, 0666) != 0) {
		close(fd);
		return GP_EIO;
	}
	return close(fd) == 0 ? 0 : GP_EIO;
}

int
gp_gpushare_cgroup_job(const char *text, int64_t *job_id, int64_t *attempt)
{
	const char *p = text;
	long long j, a;
	int used;

	while ((p = strstr(p, "/gpupool-")) != NULL) {
		const char *slash = strchr(p + 1, '/');
		const char *eol = strchr(p, '\n');

		p++;
		if (slash == NULL || (eol != NULL && slash > eol))
			continue;
		if (sscanf(slash + 1, "%lld-%lld%n", &j, &a, &used) == 2 &&
		    j > 0 && a > 0 && (slash[1 + used] == '\0' ||
		    slash[1 + used] == '\n' || slash[1 + used] == '/')) {
			*job_id = j;
			*attempt = a;
			return 1;
		}
	}
	return 0;
}

/*
 * The region is the job's to write, so the agent never maps it: a job
 * that truncated the file under a mapping would kill the agent with
 * SIGBUS. It reads a copy (pread) and writes its own fields in place
 * (pwrite, aligned words the library reads with atomic loads).
 */
int
gp_gpushare_steer(const char *workdir, int effective_milli, int host_util,
    struct gp_gpushare_usage *out)
{
	char path[PATH_MAX];
	struct gp_region *r;
	struct stat st;
	uint32_t word[2];
	int fd, ret = GP_EIO;

	if (snprintf(path, sizeof(path), "%s/%s", workdir,
	    GP_GPUSHARE_REGION) >= (int)sizeof(path))
		return GP_EINVAL;
	if ((fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return errno == ENOENT ? GP_ENOENT : GP_EIO;
	if ((r = malloc(sizeof(*r))) == NULL) {
		close(fd);
		return GP_ENOMEM;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    pread(fd, r, sizeof(*r), 0) != (ssize_t)sizeof(*r) ||
	    !gp_region_valid(r))
		goto out;
	if (effective_milli >= 0) {
		word[0] = (uint32_t)effective_milli;
		if (pwrite(fd, word, sizeof(word[0]),
		    offsetof(struct gp_region, effective)) != sizeof(word[0]))
			goto out;
		atomic_store(&r->effective, word[0]);
	}
	if (host_util >= 0) {
		word[0] = (uint32_t)(host_util > 100 ? 100 : host_util);
		word[1] = atomic_load(&r->host_util_seq) + 1;
		if (pwrite(fd, word, sizeof(word),
		    offsetof(struct gp_region, host_util)) != sizeof(word))
			goto out;
	}
	if (out != NULL) {
		out->used_bytes = (int64_t)atomic_load(&r->used);
		out->limit_bytes = (int64_t)atomic_load(&r->limit);
		out->peak_bytes = (int64_t)atomic_load(&r->peak);
		out->share_milli = (int)atomic_load(&r->share);
		out->effective_milli = (int)atomic_load(&r->effective);
		out->util = (int)atomic_load(&r->util);
		out->launches = (int64_t)atomic_load(&r->launches);
		out->oom = (int64_t)atomic_load(&r->oom);
	}
	ret = 0;
out:
	free(r);
	close(fd);
	return ret;
}

int
gp_gpushare_share_milli(int gpu_milli, int64_t gpu_mem_mib, int64_t total_mib)
{
	int64_t milli = gpu_milli > 0 ? gpu_milli
	    : total_mib > 0 ? gpu_mem_mib * 1000 / total_mib : 1000;

	return milli < 1 ? 1 : milli > 1000 ? 1000 : (int)milli;
}

int
gp_gpushare_effective(int share_milli, int alone, int strict,
    int throttle_milli)
{
	int eff = alone && !strict ? 1000 : share_milli;

	if (throttle_milli > 0 && eff > throttle_milli)
		eff = throttle_milli;
	return eff;
}
