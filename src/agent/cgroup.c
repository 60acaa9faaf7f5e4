/*
 * cgroup.c: per-job cgroups (v2, or v1 memory + pids) for limits and for
 * killing a job's every process. See cgroup.h and docs/agent.md.
 */
#include "agent/cgroup.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

static int
write_text(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX + 64];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return GP_EIO;
	if (write(fd, text, strlen(text)) < 0)
		ret = GP_EIO;
	close(fd);
	return ret;
}

static int
has_controllers(const char *root)
{
	char path[PATH_MAX], *data = NULL;
	size_t len;
	int ok;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	if (gp_read_file(path, 4096, &data, &len) != 0)
		return 0;
	ok = strstr(data, "memory") != NULL && strstr(data, "pids") != NULL;
	free(data);
	return ok;
}

/* "gpupool-<node>": agents of several nodes on one host never collide. */
static char parent_name[128] = "gpupool";

void
gp_cgroup_set_scope(const char *node_name)
{
	/*
	 * The pid too: two agents with one node name (the default, the
	 * hostname) may serve two coordinators whose job ids overlap.
	 */
	snprintf(parent_name, sizeof(parent_name), "gpupool-%s-%d", node_name,
	    (int)getpid());
}

static int
make_parent(const char *root, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s/%s", root, parent_name);
	if (mkdir(out, 0755) != 0 && errno != EEXIST)
		return GP_EIO;
	return 0;
}

static int
init_v2(struct gp_cgroups *cg, const char *root, char *why, size_t whylen)
{
	if (!has_controllers(root)) {
		snprintf(why, whylen, "%s has no memory and pids controllers",
		    root);
		return GP_ENOENT;
	}
	if (write_text(root, "cgroup.subtree_control", "+memory +pids") != 0 ||
	    make_parent(root, cg->v2, sizeof(cg->v2)) != 0 ||
	    write_text(cg->v2, "cgroup.subtree_control", "+memory +pids") !=
	    0) {
		snprintf(why, whylen, "cannot set up %s/%s: %s", root,
		    parent_name, strerror(errno));
		return GP_EIO;
	}
	return 0;
}

void
gp_cgroup_init(struct gp_cgroups *cg)
{
	char why[512] = "", why1[512] = "";
	int mem, pids;

	memset(cg, 0, sizeof(*cg));
	if (init_v2(cg, "/sys/fs/cgroup", why, sizeof(why)) == 0 ||
	    init_v2(cg, "/sys/fs/cgroup/unified", why, sizeof(why)) == 0) {
		cg->mode = GP_CGROUP_V2;
		gp_info("cgroups mode=v2 parent=%s", cg->v2);
		return;
	}
	mem = access("/sys/fs/cgroup/memory/cgroup.procs", F_OK) == 0 &&
	    make_parent("/sys/fs/cgroup/memory", cg->memory,
	    sizeof(cg->memory)) == 0;
	if (!mem) {
		snprintf(why1, sizeof(why1), "v1 memory: %s", strerror(errno));
		cg->memory[0] = '\0';
	}
	pids = access("/sys/fs/cgroup/pids/cgroup.procs", F_OK) == 0 &&
	    make_parent("/sys/fs/cgroup/pids", cg->pids,
	    sizeof(cg->pids)) == 0;
	if (!pids)
		cg->pids[0] = '\0';
	if (mem || pids) {
		cg->mode = GP_CGROUP_V1;
		gp_info("cgroups mode=v1 memory=%s pids=%s",
		    mem ? cg->memory : "unavailable",
		    pids ? cg->pids : "unavailable");
		if (!mem || !pids)
			gp_warn("cgroup limits partly unavailable: %s; jobs "
			    "run without %s limits", mem ? "no v1 pids "
			    "hierarchy" : why1, mem ? "pids" : "memory");
		return;
	}
	cg->mode = GP_CGROUP_NONE;
	gp_warn("cgroup limits unavailable: %s; %s; jobs run without "
	    "memory/pids limits", why[0] ? why : "no cgroup v2",
	    why1[0] ? why1 : "no cgroup v1 memory/pids");
}

static int
add_dir(struct gp_cgroup_job *job, const char *parent, const char *name,
    const char *limits[][2], int nlimits, char *err, size_t errlen)
{
	char *dir = job->dirs[job->ndirs];
	char path[PATH_MAX + 32];
	int i, fd;

	snprintf(dir, PATH_MAX, "%s/%s", parent, name);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
		return GP_EIO;
	}
	job->ndirs++;
	for (i = 0; i < nlimits; i++) {
		if (limits[i][1] == NULL)
			continue;
		if (write_text(dir, limits[i][0], limits[i][1]) != 0) {
			snprintf(err, errlen, "%s/%s: %s", dir, limits[i][0],
			    strerror(errno));
			return GP_EIO;
		}
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return GP_EIO;
	}
	job->procs_fds[job->nfds++] = fd;
	return 0;
}

int
gp_cgroup_create(const struct gp_cgroups *cg, const char *name,
    int64_t mem_mib, int64_t pids_max, struct gp_cgroup_job *job, char *err,
    size_t errlen)
{
	char mem[32], pids[32];
	int ret = 0;

	memset(job, 0, sizeof(*job));
	snprintf(mem, sizeof(mem), "%lld", (long long)mem_mib * 1048576);
	snprintf(pids, sizeof(pids), "%lld", (long long)pids_max);
	if (cg->mode == GP_CGROUP_V2) {
		const char *limits[][2] = {
			{"memory.max", mem_mib > 0 ? mem : NULL},
			{"memory.swap.max", mem_mib > 0 ? "0" : NULL},
			{"pids.max", pids},
		};
		ret = add_dir(job, cg->v2, name, limits, 3, err, errlen);
		/* memory.swap.max is absent without swap accounting. */
		if (ret != 0 && strstr(err, "memory.swap.max") != NULL) {
			const char *retry[][2] = {{"pids.max", pids}};
			job->ndirs = 0;
			ret = add_dir(job, cg->v2, name, retry, 1, err,
			    errlen);
		}
	} else if (cg->mode == GP_CGROUP_V1) {
		const char *mlimits[][2] = {
			{"memory.limit_in_bytes", mem_mib > 0 ? mem : NULL},
		};
		const char *plimits[][2] = {{"pids.max", pids}};
		if (cg->memory[0] != '\0')
			ret = add_dir(job, cg->memory, name, mlimits, 1, err,
			    errlen);
		if (ret == 0 && cg->pids[0] != '\0')
			ret = add_dir(job, cg->pids, name, plimits, 1, err,
			    errlen);
	}
	if (ret != 0) {
		gp_cgroup_close_fds(job);
		gp_cgroup_remove(job);
	}
	return ret;
}

/* dir is a cgroup directly below parent (a non-empty path). */
static int
is_below(const char *dir, const char *parent)
{
	size_t n = strlen(parent);

	return n > 0 && strncmp(dir, parent, n) == 0 && dir[n] == '/';
}

int
gp_cgroup_set_limits(const struct gp_cgroups *cg,
    const struct gp_cgroup_job *job, int64_t mem_mib, int64_t pids_max,
    char *err, size_t errlen)
{
	char mem[32], pids[32];
	int i, k;

	snprintf(mem, sizeof(mem), "%lld", (long long)mem_mib * 1048576);
	snprintf(pids, sizeof(pids), "%lld", (long long)pids_max);
	for (i = 0; i < job->ndirs; i++) {
		const char *dir = job->dirs[i], *limits[2][2] = {{NULL}};

		if (cg->mode == GP_CGROUP_V2) {
			limits[0][0] = mem_mib > 0 ? "memory.max" : NULL;
			limits[0][1] = mem;
			limits[1][0] = "pids.max";
			limits[1][1] = pids;
		} else if (cg->memory[0] != '\0' && is_below(dir, cg->memory)) {
			limits[0][0] = mem_mib > 0 ? "memory.limit_in_bytes" :
			    NULL;
			limits[0][1] = mem;
		} else if (cg->pids[0] != '\0' && is_below(dir, cg->pids)) {
			limits[0][0] = "pids.max";
			limits[0][1] = pids;
		}
		for (k = 0; k < 2; k++)
			if (limits[k][0] != NULL &&
			    write_text(dir, limits[k][0], limits[k][1]) != 0) {
				snprintf(err, errlen, "%s/%s: %s", dir,
				    limits[k][0], strerror(errno));
				return GP_EIO;
			}
		/* Absent without swap accounting, as at creation. */
		if (cg->mode == GP_CGROUP_V2 && mem_mib > 0)
			(void)write_text(dir, "memory.swap.max", "0");
	}
	return 0;
}

int
gp_cgroup_rename(struct gp_cgroup_job *job, const char *name)
{
	char path[PATH_MAX];
	const char *slash;
	int i, ret = 0;

	for (i = 0; i < job->ndirs; i++) {
		if ((slash = strrchr(job->dirs[i], '/')) == NULL)
			continue;
		if (snprintf(path, sizeof(path), "%.*s/%s",
		    (int)(slash - job->dirs[i]), job->dirs[i], name) >=
		    (int)sizeof(path) || rename(job->dirs[i], path) != 0) {
			ret = GP_EIO;
			continue;
		}
		memcpy(job->dirs[i], path, strlen(path) + 1);
	}
	return ret;
}

void
gp_cgroup_paths(const struct gp_cgroups *cg, const char *name,
    struct gp_cgroup_job *job)
{
	memset(job, 0, sizeof(*job));
	if (cg->mode == GP_CGROUP_V2)
		snprintf(job->dirs[job->ndirs++], PATH_MAX, "%.4000s/%s",
		    cg->v2, name);
	else if (cg->mode == GP_CGROUP_V1) {
		if (cg->memory[0] != '\0')
			snprintf(job->dirs[job->ndirs++], PATH_MAX,
			    "%.4000s/%s", cg->memory, name);
		if (cg->pids[0] != '\0')
			snprintf(job->dirs[job->ndirs++], PATH_MAX,
			    "%.4000s/%s", cg->pids, name);
	}
}

int
gp_cgroup_runtime_path(const struct gp_cgroups *cg, const char *name,
    char *out, size_t len)
{
	if (cg->mode == GP_CGROUP_NONE)
		return GP_ENOENT;
	snprintf(out, len, "/%s/%s", parent_name, name);
	return 0;
}

/*
 * Calls fn(arg, mount point) for each mounted cgroup or cgroup2 file
 * system (from /proc/self/mountinfo).
 */
static void
each_hierarchy(void (*fn)(void *arg, const char *mnt), void *arg)
{
	char *data = NULL, *line, *next;
	size_t len;

	if (gp_read_file("/proc/self/mountinfo", 1 << 20, &data, &len) != 0)
		return;
	for (line = data; line != NULL && *line != '\0'; line = next) {
		char *sep, *mnt, *end;

		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if ((sep = strstr(line, " - ")) == NULL ||
		    (strncmp(sep + 3, "cgroup ", 7) != 0 &&
		    strncmp(sep + 3, "cgroup2 ", 8) != 0))
			continue;
		/* Field 5 is the mount point (no escapes in these paths). */
		mnt = line;
		for (int f = 0; f < 4 && mnt != NULL; f++)
			if ((mnt = strchr(mnt, ' ')) != NULL)
				mnt++;
		if (mnt == NULL || (end = strchr(mnt, ' ')) == NULL)
			continue;
		*end = '\0';
		fn(arg, mnt);
	}
	free(data);
}

struct removal {
	const char *name;	/* below the parent, or NULL: the parent */
	int64_t deadline;
	int failed;
};

static void
remove_in(void *arg, const char *mnt)
{
	struct removal *r = arg;
	char path[PATH_MAX];

	if (r->name != NULL)
		snprintf(path, sizeof(path), "%s/%s/%s", mnt, parent_name,
		    r->name);
	else
		snprintf(path, sizeof(path), "%s/%s", mnt, parent_name);
	/* Processes that closed their files may not have left it yet. */
	while (rmdir(path) != 0 && errno == EBUSY) {
		if (gp_mono_ms() >= r->deadline) {
			r->failed = 1;
			return;
		}
		usleep(1000);
	}
}

int
gp_cgroup_remove_everywhere(const struct gp_cgroups *cg, const char *name,
    int timeout_ms)
{
	struct removal r = {name, gp_mono_ms() + timeout_ms, 0};

	if (cg->mode == GP_CGROUP_NONE)
		return 0;
	each_hierarchy(remove_in, &r);
	return r.failed ? GP_EIO : 0;
}

void
gp_cgroup_fini(const struct gp_cgroups *cg)
{
	struct removal r = {NULL, gp_mono_ms(), 0};

	if (cg->mode != GP_CGROUP_NONE)
		each_hierarchy(remove_in, &r);
}

/*
 * Parents that agents killed without their exit path left behind
 * ("gpupool-<node>-<pid>" whose pid is gone): their empty job cgroups and
 * then the parent are removed. rmdir removes only empty cgroups, so a
 * job still running in one (an agent killed -9 leaves its jobs for the
 * next agent's fencing) keeps it; a pid that was reused is left alone.
 */
static int
parent_pid(const char *name)
{
	const char *dash = strrchr(name, '-');
	char *end;
	long pid;

	if (strncmp(name, "gpupool-", 8) != 0 || dash == NULL ||
	    dash == name + 7)
		return 0;
	errno = 0;
	pid = strtol(dash + 1, &end, 10);
	if (errno != 0 || *end != '\0' || end == dash + 1 || pid <= 1 ||
	    pid > 1 << 22)
		return 0;
	return (int)pid;
}

static void
sweep_in(void *arg, const char *mnt)
{
	DIR *d, *sub;
	struct dirent *e, *j;
	char path[PATH_MAX], child[PATH_MAX + 256];
	int pid, *removed = arg;

	if ((d = opendir(mnt)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if ((pid = parent_pid(e->d_name)) == 0 ||
		    strcmp(e->d_name, parent_name) == 0 ||
		    kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", mnt, e->d_name);
		if ((sub = opendir(path)) != NULL) {
			while ((j = readdir(sub)) != NULL) {
				if (j->d_type != DT_DIR || j->d_name[0] == '.')
					continue;
				snprintf(child, sizeof(child), "%s/%s", path,
				    j->d_name);
				rmdir(child);
			}
			closedir(sub);
		}
		if (rmdir(path) == 0)
			(*removed)++;
	}
	closedir(d);
}

int
gp_cgroup_sweep_stale(const struct gp_cgroups *cg)
{
	int removed = 0;

	if (cg->mode == GP_CGROUP_NONE)
		return 0;
	each_hierarchy(sweep_in, &removed);
	if (removed > 0)
		gp_info("cgroups swept=%d (left by agents that are gone)",
		    removed);
	return removed;
}

void
gp_cgroup_close_fds(struct gp_cgroup_job *job)
{
	int i;

	for (i = 0; i < job->nfds; i++)
		close(job->procs_fds[i]);
	job->nfds = 0;
}

void
gp_cgroup_kill(const struct gp_cgroup_job *job)
{
	char path[PATH_MAX + 32], *data, *p, *end;
	size_t len;
	int i;

	for (i = 0; i < job->ndirs; i++) {
		/* v2 has cgroup.kill; v1 needs the list. */
		if (write_text(job->dirs[i], "cgroup.kill", "1") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/cgroup.procs", job->dirs[i]);
		if (gp_read_file(path, 1 << 20, &data, &len) != 0)
			continue;
		for (p = data; *p != '\0'; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			if (pid > 1)
				kill((pid_t)pid, SIGKILL);
		}
		free(data);
	}
}

int
gp_cgroup_remove(struct gp_cgroup_job *job)
{
	int i, ret = 0;

	for (i = 0; i < job->ndirs; i++) {
		if (job->dirs[i][0] == '\0')
			continue;
		if (rmdir(job->dirs[i]) == 0 || errno == ENOENT)
			job->dirs[i][0] = '\0';
		else
			ret = GP_EIO;
	}
	return ret;
}

long
gp_cgroup_oom_kills(const struct gp_cgroup_job *job)
{
	static const char *files[] = {"memory.events", "memory.oom_control"};
	char path[PATH_MAX + 32], buf[1024], *p;
	long kills = 0;
	ssize_t n;
	int fd;

	for (int i = 0; i < job->ndirs; i++)
		for (size_t k = 0; k < GP_ARRAY_LEN(files); k++) {
			snprintf(path, sizeof(path), "%s/%s", job->dirs[i],
			    files[k]);
			if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
				continue;
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (n <= 0)
				continue;
			buf[n] = '\0';
			if ((p = strstr(buf, "oom_kill ")) != NULL)
				kills += strtol(p + 9, NULL, 10);
		}
	return kills;
}
