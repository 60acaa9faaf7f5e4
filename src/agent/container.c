/*
 * container.c: the container executor, the second implementation of
 * struct gp_executor_ops (the plain sandbox is the first, sandbox.c). A
 * job whose assignment carries a prepared image runs through the OCI
 * runtime detected at start (crun or runc):
 *
 *   prepare: the image's layers composed read-only (overlayfs, upper on a
 *            small tmpfs), the job's uid inside (the image's User unless
 *            root), argv (gpupool-init, then Entrypoint + the job's
 *            command or Cmd), the GPUs' container edits (CDI, or the
 *            NVIDIA nodes and libraries found), every mount point made
 *            inside the root;
 *   spawn:   config.json (oci_config.c), then the runtime's `run` in its
 *            own mount and pid namespace, where the bundle is a private
 *            tmpfs with the root attached, fds 3 (status) and 4 (output)
 *            preserved for gpupool-init, its messages in a memfd;
 *   release: `runtime delete --force` when a killed runtime left state,
 *            and its cgroups.
 *
 * See docs/agent.md, "Container jobs".
 */
#include "agent/container.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cdi.h"
#include "agent/executor.h"
#include "agent/nvidia.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#define ROOT_SCRATCH (4 << 20)	/* the upper layer: mount points only */
#define CPU_PERIOD_US 100000

struct gp_containers {
	struct gp_oci_runtime rt;
	char base[PATH_MAX];		/* WORK/containers */
	char bundle[PATH_MAX + 16];	/* base/bundle: every bundle's mount point */
	int64_t scratch_bytes;
	const struct gp_cgroups *cgroups;
	const struct gp_gpu_info *gpus;
	int ngpus;
	char cdi_dirs[2][PATH_MAX + 32];
	struct timespec cdi_mtime[2];	/* to notice a changed directory */
	struct gp_cdi_registry cdi;
	struct gp_nvidia_host nvidia;
};

/* One container job's part (struct gp_exec_job's priv). */
struct cjob {
	char id[96];			/* the runtime's container id */
	char rootfs[PATH_MAX + 160];	/* in the bundle, in its namespace */
	int log_fd;			/* memfd: the runtime's messages */
	char cwd[PATH_MAX];
	char cgroups_path[256];
	int have_cgroups_path;
	int root_fd;
	uint32_t uid, gid;		/* inside */
	struct gp_oci_edits edits;
};

/* ---- the image's user ---- */

static int
number(const char *s, uint32_t *out)
{
	int64_t v;

	if (gp_parse_int(s, 0, 4294967294LL, &v) != 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* Looks name up in the image's /etc/passwd: OUT uid, gid. 0 or -1. */
static int
passwd_lookup(int root_fd, const char *name, uint32_t byuid, int by_uid,
    uint32_t *uid, uint32_t *gid)
{
	struct passwd pw, *res;
	char buf[4096];
	int fd, found = -1;
	FILE *f;

	if ((fd = gp_oci_rootfs_open(root_fd, "/etc/passwd", O_RDONLY)) < 0)
		return -1;
	if ((f = fdopen(fd, "r")) == NULL) {
		close(fd);
		return -1;
	}
	while (fgetpwent_r(f, &pw, buf, sizeof(buf), &res) == 0) {
		if (by_uid ? pw.pw_uid == byuid :
		    strcmp(pw.pw_name, name) == 0) {
			*uid = pw.pw_uid;
			*gid = pw.pw_gid;
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

static int
group_lookup(int root_fd, const char *name, uint32_t *gid)
{
	struct group gr, *res;
	char buf[16384];
	int fd, found = -1;
	FILE *f;

	if ((fd = gp_oci_rootfs_open(root_fd, "/etc/group", O_RDONLY)) < 0)
		return -1;
	if ((f = fdopen(fd, "r")) == NULL) {
		close(fd);
		return -1;
	}
	while (fgetgrent_r(f, &gr, buf, sizeof(buf), &res) == 0)
		if (strcmp(gr.gr_name, name) == 0) {
			*gid = gr.gr_gid;
			found = 0;
			break;
		}
	fclose(f);
	return found;
}

int
gp_container_resolve_user(int root_fd, const char *user, uint32_t *uid,
    uint32_t *gid, char *err, size_t errlen)
{
	char spec[256], *group;
	uint32_t u = 0, g = 0, pg;
	int have_group = 0;

	*uid = GP_CONTAINER_DEFAULT_UID;
	*gid = GP_CONTAINER_DEFAULT_GID;
	if (user == NULL || user[0] == '\0')
		return 0;
	if (gp_strlcpy(spec, user, sizeof(spec)) >= sizeof(spec)) {
		snprintf(err, errlen, "image user is too long");
		return GP_EINVAL;
	}
	if ((group = strchr(spec, ':')) != NULL) {
		*group++ = '\0';
		have_group = group[0] != '\0';
	}
	if (number(spec, &u) == 0) {
		if (passwd_lookup(root_fd, NULL, u, 1, &u, &pg) == 0)
			g = pg;
		else
			g = u;
	} else if (passwd_lookup(root_fd, spec, 0, 0, &u, &g) != 0) {
		snprintf(err, errlen, "image user %s is not in the image's "
		    "/etc/passwd", spec);
		return GP_ENOENT;
	}
	if (have_group && number(group, &g) != 0 &&
	    group_lookup(root_fd, group, &g) != 0) {
		snprintf(err, errlen, "image group %s is not in the image's "
		    "/etc/group", group);
		return GP_ENOENT;
	}
	if (u == 0)	/* root: never; the fixed unprivileged user instead */
		return 0;
	*uid = u;
	*gid = g != 0 ? g : GP_CONTAINER_DEFAULT_GID;
	return 0;
}

/* ---- GPUs ---- */

static void
cdi_dirs_mtime(struct gp_containers *c, struct timespec *out)
{
	struct stat st;

	for (int i = 0; i < 2; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		if (stat(c->cdi_dirs[i], &st) == 0)
			out[i] = st.st_mtim;
	}
}

/* Re-reads the CDI specs when a directory changed (a file came or went). */
static void
cdi_refresh(struct gp_containers *c, int force)
{
	const char *dirs[2] = {c->cdi_dirs[0], c->cdi_dirs[1]};
	struct timespec now[2];

	cdi_dirs_mtime(c, now);
	if (!force && memcmp(now, c->cdi_mtime, sizeof(now)) == 0)
		return;
	memcpy(c->cdi_mtime, now, sizeof(now));
	gp_cdi_registry_fini(&c->cdi);
	if (gp_cdi_load(dirs, 2, &c->cdi) < 0)
		gp_warn("CDI specs: out of memory while loading");
}

static int
gpu_edits(struct gp_containers *c, const struct gp_assignment *a,
    struct gp_oci_edits *out, char *err, size_t errlen)
{
	const struct gp_cdi_spec *used[GP_GPUS_MAX];
	int i, k, nused = 0, ret;

	if (a->ngpus == 0)
		return 0;
	cdi_refresh(c, 0);
	if (!gp_cdi_has_kind(&c->cdi, GP_CDI_KIND_GPU))
		return gp_nvidia_edits(&c->nvidia, a->gpus, a->ngpus, out, err,
		    errlen);
	for (i = 0; i < a->ngpus; i++) {
		const struct gp_gpu_info *g = &c->gpus[a->gpus[i]];
		const struct gp_cdi_device *dev;
		const struct gp_cdi_spec *spec = NULL;
		char index[16];

		snprintf(index, sizeof(index), "%d", a->gpus[i]);
		dev = gp_cdi_find(&c->cdi, GP_CDI_KIND_GPU, g->uuid, &spec);
		if (dev == NULL)
			dev = gp_cdi_find(&c->cdi, GP_CDI_KIND_GPU, index,
			    &spec);
		if (dev == NULL) {
			snprintf(err, errlen, "GPU %d (%s) has no device in "
			    "the CDI specs of kind %s", a->gpus[i], g->uuid,
			    GP_CDI_KIND_GPU);
			return GP_ENOENT;
		}
		/* A spec's common edits once, before its devices' edits. */
		for (k = 0; k < nused && used[k] != spec; k++)
			;
		if (k == nused) {
			used[nused++] = spec;
			if ((ret = gp_oci_edits_append(out, &spec->edits)) != 0)
				return ret;
		}
		if ((ret = gp_oci_edits_append(out, &dev->edits)) != 0)
			return ret;
	}
	return 0;
}

/* ---- prepare ---- */

static char **
dup_strings(char *const *v)
{
	size_t n = 0;
	char **out;

	while (v != NULL && v[n] != NULL)
		n++;
	if ((out = calloc(n + 1, sizeof(char *))) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if ((out[i] = strdup(v[i])) == NULL) {
			for (size_t k = 0; k < i; k++)
				free(out[k]);
			free(out);
			return NULL;
		}
	return out;
}

/* gpupool-init, "--", Entrypoint, then the job's command or else Cmd. */
static char **
build_argv(const struct gp_assignment *a)
{
	const struct gp_container_image *img = a->container;
	char *const *tail = a->argc > 0 && a->argv != NULL ? a->argv : img->cmd;
	size_t n = 2, i = 0;
	char **argv;

	for (char *const *p = img->entrypoint; p != NULL && *p != NULL; p++)
		n++;
	for (char *const *p = tail; p != NULL && *p != NULL; p++)
		n++;
	if (n == 2 || (argv = calloc(n + 1, sizeof(char *))) == NULL)
		return NULL;
	argv[i++] = strdup(GP_OCI_INIT_PATH);
	argv[i++] = strdup("--");
	for (char *const *p = img->entrypoint; p != NULL && *p != NULL; p++)
		argv[i++] = strdup(*p);
	for (char *const *p = tail; p != NULL && *p != NULL; p++)
		argv[i++] = strdup(*p);
	for (size_t k = 0; k < n; k++)
		if (argv[k] == NULL) {
			for (k = 0; k < n; k++)
				free(argv[k]);
			free(argv);
			return NULL;
		}
	return argv;
}

static int
under_dir(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/*
 * Makes a mount target inside the root: a file when the source is one,
 * else a directory. /dev, /proc and /sys are the runtime's own mounts.
 */
static int
mount_point(int root_fd, const char *target, const char *source, char *err,
    size_t errlen)
{
	struct stat st;

	if (under_dir(target, "/dev") || under_dir(target, "/proc") ||
	    under_dir(target, "/sys"))
		return 0;
	if (stat(source, &st) != 0) {
		snprintf(err, errlen, "mount source %s: %s", source,
		    strerror(errno));
		return GP_ENOENT;
	}
	return gp_oci_rootfs_mkpath(root_fd, target, !S_ISDIR(st.st_mode), err,
	    errlen);
}

/*
 * The host's /etc/resolv.conf (or the agent's DNS relay's, netns.h) and
 * /etc/hosts.
 */
static int
add_host_files(struct gp_containers *c, struct cjob *cj,
    const struct gp_exec_job *x, char *err, size_t errlen)
{
	static const char *files[] = {"/etc/resolv.conf", "/etc/hosts"};
	const char *relay = x->cfg->net != NULL ?
	    gp_net_resolv_conf(x->cfg->net) : NULL;
	struct gp_oci_edits one;
	struct gp_oci_mount m;
	int fd, ret;

	(void)c;
	for (size_t i = 0; i < GP_ARRAY_LEN(files); i++) {
		if (access(files[i], R_OK) != 0 ||
		    gp_oci_rootfs_mkpath(cj->root_fd, files[i], 1, err,
		    errlen) != 0)
			continue;
		/* Only a regular file in the image (not a dangling link). */
		if ((fd = gp_oci_rootfs_open(cj->root_fd, files[i],
		    O_RDONLY | O_NOFOLLOW)) < 0)
			continue;
		close(fd);
		memset(&one, 0, sizeof(one));
		memset(&m, 0, sizeof(m));
		m.host_path = (char *)(i == 0 && relay != NULL ? relay :
		    files[i]);
		m.container_path = (char *)files[i];
		one.mounts = &m;
		one.nmounts = 1;
		if ((ret = gp_oci_edits_append(&cj->edits, &one)) != 0) {
			snprintf(err, errlen, "agent out of memory");
			return ret;
		}
	}
	err[0] = '\0';
	return 0;
}

static int
container_prepare(struct gp_exec_job *x, char *err, size_t errlen)
{
	struct gp_containers *c = x->cfg->containers;
	const struct gp_assignment *a = x->a;
	const struct gp_container_image *img = a->container;
	static const char *points[] = {"/proc", "/dev", "/sys", "/tmp"};
	struct cjob *cj;
	int i, ret, fd;

	if ((cj = calloc(1, sizeof(*cj))) == NULL) {
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	cj->root_fd = cj->log_fd = -1;
	x->priv = cj;
	snprintf(cj->id, sizeof(cj->id), "gpupool-%s", x->name);
	snprintf(cj->rootfs, sizeof(cj->rootfs), "%s/rootfs", c->bundle);
	cj->have_cgroups_path = gp_cgroup_runtime_path(c->cgroups, x->name,
	    cj->cgroups_path, sizeof(cj->cgroups_path)) == 0;
	if (img->layers == NULL || img->layers[0] == NULL) {
		snprintf(err, errlen, "image %s has no layers",
		    img->digest ? img->digest : "(no digest)");
		return GP_EINVAL;
	}
	if ((ret = gp_oci_rootfs_compose(img->layers, ROOT_SCRATCH,
	    &cj->root_fd, err, errlen)) != 0)
		return ret;
	if ((ret = gp_container_resolve_user(cj->root_fd, img->user, &cj->uid,
	    &cj->gid, err, errlen)) != 0)
		return ret;
	if (cj->uid >= c->rt.userns_size || cj->gid >= c->rt.userns_size) {
		snprintf(err, errlen, "image user %u:%u is outside the "
		    "container's %u ids", cj->uid, cj->gid,
		    c->rt.userns_size);
		return GP_EINVAL;
	}
	x->uid = c->rt.userns_host + cj->uid;
	x->gid = c->rt.userns_host + cj->gid;
	if ((x->argv = build_argv(a)) == NULL) {
		snprintf(err, errlen, "nothing to run: the image has no "
		    "Entrypoint or Cmd and the job gave no command");
		return GP_EINVAL;
	}
	x->argv0 = x->argv[2];
	if (img->workdir != NULL && img->workdir[0] != '\0') {
		snprintf(cj->cwd, sizeof(cj->cwd), "%s%s",
		    img->workdir[0] == '/' ? "" : "/", img->workdir);
		while (strlen(cj->cwd) > 1 && cj->cwd[strlen(cj->cwd) - 1] ==
		    '/')
			cj->cwd[strlen(cj->cwd) - 1] = '\0';
	} else
		gp_strlcpy(cj->cwd, x->workdir, sizeof(cj->cwd));
	if (img->env != NULL && (x->base_env = dup_strings(img->env)) == NULL) {
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	if ((ret = gpu_edits(c, a, &cj->edits, err, errlen)) != 0 ||
	    (ret = gp_oci_edits_resolve(&cj->edits, err, errlen)) != 0)
		return ret;
	if (cj->edits.nenv > 0) {
		if ((x->device_env = calloc((size_t)cj->edits.nenv + 1,
		    sizeof(char *))) == NULL) {
			snprintf(err, errlen, "agent out of memory");
			return GP_ENOMEM;
		}
		for (i = 0; i < cj->edits.nenv; i++)
			if ((x->device_env[i] = strdup(cj->edits.env[i])) ==
			    NULL) {
				snprintf(err, errlen, "agent out of memory");
				return GP_ENOMEM;
			}
	}
	if ((ret = add_host_files(c, cj, x, err, errlen)) != 0)
		return ret;
	x->gpus_renumbered = 1;
	x->runtime_cgroups = 1;
	/* Mount points, made as root: the runtime runs unprivileged. */
	for (i = 0; i < (int)GP_ARRAY_LEN(points); i++)
		if ((ret = gp_oci_rootfs_mkpath(cj->root_fd, points[i], 0, err,
		    errlen)) != 0)
			return ret;
	/*
	 * runc gives a tmpfs the mode of the directory it covers: /tmp must
	 * be 1777 in the root (a copy-up into the upper layer, the image's
	 * own files untouched).
	 */
	if ((fd = gp_oci_rootfs_open(cj->root_fd, "/tmp", O_RDONLY |
	    O_DIRECTORY)) < 0 || fchmod(fd, 01777) != 0) {
		snprintf(err, errlen, "/tmp in the image: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return GP_EIO;
	}
	close(fd);
	if ((ret = gp_oci_rootfs_mkpath(cj->root_fd, x->workdir, 0, err,
	    errlen)) != 0 || (ret = gp_oci_rootfs_mkpath(cj->root_fd,
	    cj->cwd, 0, err, errlen)) != 0)
		return ret;
	for (i = 0; i < a->nmounts; i++) {
		if (a->mounts[i].target == NULL || a->mounts[i].source == NULL ||
		    gp_oci_reserved_target(a->mounts[i].target)) {
			snprintf(err, errlen, "mount on %s: a reserved place",
			    a->mounts[i].target ? a->mounts[i].target :
			    "(none)");
			return GP_EINVAL;
		}
		if ((ret = mount_point(cj->root_fd, a->mounts[i].target,
		    a->mounts[i].source, err, errlen)) != 0)
			return ret;
	}
	for (i = 0; i < cj->edits.nmounts; i++)
		if ((ret = mount_point(cj->root_fd,
		    cj->edits.mounts[i].container_path,
		    cj->edits.mounts[i].host_path, err, errlen)) != 0)
			return ret;
	for (i = 0; i < cj->edits.ndevices; i++)
		if (!under_dir(cj->edits.devices[i].path, "/dev") &&
		    (ret = gp_oci_rootfs_mkpath(cj->root_fd,
		    cj->edits.devices[i].path, 1, err, errlen)) != 0)
			return ret;
	return 0;
}

/* ---- spawn ---- */

static int
container_spawn(struct gp_exec_job *x, pid_t *pid, int *pidfd, char *err,
    size_t errlen)
{
	struct gp_containers *c = x->cfg->containers;
	const struct gp_assignment *a = x->a;
	struct cjob *cj = x->priv;
	char *argv[] = {c->rt.name, "--root", c->rt.state_root, "run",
	    "--bundle", c->bundle, "--preserve-fds", "2", cj->id, NULL};
	char *envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
	    "/usr/bin:/sbin:/bin", NULL};
	struct gp_oci_config oc;
	struct gp_oci_spawn s;
	json_t *cfg = NULL;
	char *text;
	int ret;

	memset(&oc, 0, sizeof(oc));
	oc.args = x->argv;
	oc.env = x->env;
	oc.cwd = cj->cwd;
	oc.uid = cj->uid;
	oc.gid = cj->gid;
	oc.hostname = "gpupool-job";
	oc.rootfs = cj->rootfs;
	oc.userns_host = c->rt.userns_host;
	oc.userns_size = c->rt.userns_size;
	oc.cgroups_path = cj->have_cgroups_path ? cj->cgroups_path : NULL;
	oc.mem_bytes = a->mem_mib * 1048576;
	oc.mem_swap = c->rt.mem_swap;
	oc.pids_max = x->cfg->pids_max > 0 ? x->cfg->pids_max :
	    GP_CGROUP_PIDS_MAX;
	oc.cpu_quota_us = a->cpus > 0 ? (int64_t)a->cpus * CPU_PERIOD_US : 0;
	oc.cpu_period_us = CPU_PERIOD_US;
	oc.scratch_bytes = c->scratch_bytes;
	oc.workdir = x->workdir;
	oc.init_host_path = c->rt.init_path;
	oc.mounts = a->mounts;
	oc.nmounts = a->nmounts;
	oc.edits = &cj->edits;
	oc.new_net = x->cfg->net != NULL && x->net.ns_fd < 0;
	/* Never the agent's network, never less isolation than asked. */
	if (x->net.pasta_wanted) {
		snprintf(err, errlen, "network %s: an agent that is not root "
		    "gives pasta to plain jobs only; a container job here "
		    "may ask for --network none",
		    gp_net_policy_name(x->net.policy));
		return GP_EPERM;
	}
	if ((ret = gp_oci_config_build(&oc, &cfg, err, errlen)) != 0)
		return ret;
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	if (text == NULL ||
	    (cj->log_fd = memfd_create("gpupool-runtime-log", MFD_CLOEXEC)) < 0) {
		free(text);
		snprintf(err, errlen, "agent out of memory");
		return GP_ENOMEM;
	}
	/* A container of this id left by a crash: the runtime would refuse. */
	gp_oci_runtime_delete(&c->rt, cj->id, 10000);
	memset(&s, 0, sizeof(s));
	s.rt = &c->rt;
	s.argv = argv;
	s.envp = envp;
	s.bundle = c->bundle;
	s.config = text;
	s.config_len = strlen(text);
	s.rootfs_fd = cj->root_fd;
	s.net_fd = x->net.ns_fd >= 0 ? &x->net.ns_fd : NULL;
	s.fds[0] = -1;
	s.fds[1] = s.fds[2] = cj->log_fd;
	s.fds[3] = s.status_fd = x->status_fd;
	s.fds[4] = x->out_fd;
	ret = gp_oci_spawn(&s, pid, pidfd);
	if (ret != 0)
		snprintf(err, errlen, "clone: %s", strerror(errno));
	free(text);
	/* The runtime's process holds the root now. */
	close(cj->root_fd);
	cj->root_fd = -1;
	return ret;
}

static const char *
container_stage_name(int stage)
{
	return gp_oci_stage_name(stage);
}

static void
container_explain(struct gp_exec_job *x, char *msg, size_t len)
{
	struct gp_containers *c = x->cfg->containers;
	struct cjob *cj = x->priv;
	char line[400];

	if (cj == NULL)
		return;
	gp_oci_log_last_line(cj->log_fd, line, sizeof(line));
	if (line[0] == '\0')
		snprintf(msg, len, "container runtime %s failed without a "
		    "message", c->rt.name);
	else
		snprintf(msg, len, "container runtime %s: %s", c->rt.name,
		    line);
}

static void
container_release(struct gp_exec_job *x)
{
	struct gp_containers *c = x->cfg->containers;
	struct cjob *cj = x->priv;
	int ret;

	if (cj == NULL)
		return;
	if (cj->root_fd >= 0)
		close(cj->root_fd);
	/* Killed runtimes leave their state and cgroups: delete them. */
	if ((ret = gp_oci_runtime_delete(&c->rt, cj->id, 10000)) != 0)
		gp_warn("container delete failed id=%s runtime=%s error=%s",
		    cj->id, c->rt.name, gp_strerror(ret));
	if (cj->have_cgroups_path &&
	    gp_cgroup_remove_everywhere(c->cgroups, x->name, 2000) != 0)
		gp_warn("cannot remove a container's cgroups id=%s path=%s",
		    cj->id, cj->cgroups_path);
	if (cj->log_fd >= 0)
		close(cj->log_fd);
	gp_oci_edits_fini(&cj->edits);
	free(cj);
	x->priv = NULL;
}

const struct gp_executor_ops gp_container_exec_ops = {
	.name = "container",
	.prepare = container_prepare,
	.spawn = container_spawn,
	.stage_name = container_stage_name,
	.explain = container_explain,
	.release = container_release,
};

/* ---- set-up ---- */

int
gp_containers_new(const char *work_dir, const struct gp_container_options *o,
    const struct gp_cgroups *cgroups, const struct gp_gpu_info *gpus,
    int ngpus, const int *minors, struct gp_containers **out, char *err,
    size_t errlen)
{
	const char *root = o->fake_gpu_root != NULL ? o->fake_gpu_root : "";
	uint32_t base = o->userns_base ? o->userns_base :
	    GP_CONTAINER_USERNS_BASE;
	uint32_t size = o->userns_size ? o->userns_size :
	    GP_CONTAINER_USERNS_SIZE;
	int *idx = NULL, i, ret;
	struct gp_containers *c;

	if ((ret = gp_oci_userns_check(base, size, err, errlen)) != 0)
		return ret;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return GP_ENOMEM;
	snprintf(c->base, sizeof(c->base), "%.4000s/containers", work_dir);
	c->scratch_bytes = o->scratch_bytes > 0 ? o->scratch_bytes :
	    GP_CONTAINER_SCRATCH_DEFAULT;
	c->cgroups = cgroups;
	c->gpus = gpus;
	c->ngpus = ngpus;
	if ((ret = gp_oci_runtime_detect(o->runtime ? o->runtime : "auto",
	    c->base, o->init_path, base, size, &c->rt, err, errlen)) != 0)
		goto fail;
	snprintf(c->bundle, sizeof(c->bundle), "%s/bundle", c->base);
	snprintf(c->cdi_dirs[0], sizeof(c->cdi_dirs[0]), "%.4000s/etc/cdi",
	    root);
	snprintf(c->cdi_dirs[1], sizeof(c->cdi_dirs[1]),
	    "%.4000s/var/run/cdi", root);
	cdi_refresh(c, 1);
	if (minors == NULL && ngpus > 0) {
		if ((idx = calloc((size_t)ngpus, sizeof(int))) == NULL) {
			ret = GP_ENOMEM;
			goto fail;
		}
		for (i = 0; i < ngpus; i++)
			idx[i] = i;
	}
	ret = gp_nvidia_discover(root, minors != NULL ? minors : idx, ngpus,
	    &c->nvidia);
	free(idx);
	if (ret != 0)
		goto fail;
	gp_info("containers runtime=%s path=%s version=\"%s\" cgroup_v2_hidden=%d "
	    "userns=%u+%u scratch_mib=%lld gpus=%s nvidia_libraries=%d",
	    c->rt.name, c->rt.path, c->rt.version, c->rt.hide_unified,
	    c->rt.userns_host, c->rt.userns_size,
	    (long long)(c->scratch_bytes >> 20),
	    gp_cdi_has_kind(&c->cdi, GP_CDI_KIND_GPU) ? "cdi" :
	    c->nvidia.present ? "nvidia-devices" : "none", c->nvidia.nlibs);
	*out = c;
	return 0;
fail:
	gp_containers_free(c);
	return ret;
}

void
gp_containers_free(struct gp_containers *c)
{
	if (c == NULL)
		return;
	gp_cdi_registry_fini(&c->cdi);
	gp_nvidia_host_fini(&c->nvidia);
	free(c);
}

const struct gp_oci_runtime *
gp_containers_runtime(const struct gp_containers *c)
{
	return &c->rt;
}
