/*
 * nvidia.c: finds the NVIDIA device nodes, driver libraries (from the ld
 * cache, through `ldconfig -p`) and utility programs of this host, and
 * turns them into container edits for a job's GPUs. See nvidia.h.
 */
#include "agent/nvidia.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

/* The driver's libraries a CUDA, NVML or video job may load. */
static const char *libraries[] = {
	"libcuda.so", "libcudadebugger.so", "libnvidia-ml.so",
	"libnvidia-cfg.so", "libnvidia-nscq.so", "libnvidia-opencl.so",
	"libnvidia-gpucomp.so", "libnvidia-ptxjitcompiler.so",
	"libnvidia-fatbinaryloader.so", "libnvidia-allocator.so",
	"libnvidia-compiler.so", "libnvidia-nvvm.so", "libnvidia-pkcs11.so",
	"libnvidia-pkcs11-openssl3.so", "libnvidia-encode.so",
	"libnvidia-opticalflow.so", "libnvcuvid.so",
};

static const char *programs[] = {
	"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
	"nvidia-cuda-mps-control", "nvidia-cuda-mps-server",
};

static const char *control_nodes[] = {
	"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset",
};

/* "libcuda.so.1" is one of ours: a listed prefix, then "." or the end. */
static int
wanted(const char *soname)
{
	for (size_t i = 0; i < GP_ARRAY_LEN(libraries); i++) {
		size_t n = strlen(libraries[i]);
		if (strncmp(soname, libraries[i], n) == 0 &&
		    (soname[n] == '\0' || soname[n] == '.'))
			return 1;
	}
	return 0;
}

int
gp_nvidia_parse_ldcache(const char *text,
    int (*add)(void *arg, const char *soname, const char *path), void *arg)
{
	const char *line = text;
	int kept = 0;

	while (line != NULL && *line != '\0') {
		const char *end = strchrnul(line, '\n');
		char buf[4096], *name, *flags, *arrow, *path;
		size_t len = (size_t)(end - line);

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			name = buf + strspn(buf, " \t");
			flags = strstr(name, " (");
			arrow = strstr(name, ") => ");
			if (flags != NULL && arrow != NULL && arrow > flags) {
				*flags = '\0';
				*arrow = '\0';
				path = arrow + 5;
				if (strstr(flags + 2, "x86-64") != NULL &&
				    wanted(name) && path[0] == '/' &&
				    add(arg, name, path) == 1)
					kept++;
			}
		}
		line = *end == '\n' ? end + 1 : NULL;
	}
	return kept;
}

static int
push_mount(struct gp_oci_edits *e, const char *host, const char *container)
{
	struct gp_oci_mount *m;

	for (int i = 0; i < e->nmounts; i++)
		if (strcmp(e->mounts[i].container_path, container) == 0)
			return 0;
	m = realloc(e->mounts, (size_t)(e->nmounts + 1) * sizeof(*m));
	if (m == NULL)
		return GP_ENOMEM;
	e->mounts = m;
	m = &e->mounts[e->nmounts];
	memset(m, 0, sizeof(*m));
	m->host_path = strdup(host);
	m->container_path = strdup(container);
	if (m->host_path == NULL || m->container_path == NULL) {
		free(m->host_path);
		free(m->container_path);
		return GP_ENOMEM;
	}
	e->nmounts++;
	return 1;
}

/* A device node at root+path: filled into d; 0, or -1 when absent. */
static int
node(const char *root, const char *path, struct gp_oci_device *d)
{
	char host[PATH_MAX + 64];
	struct stat st;

	memset(d, 0, sizeof(*d));
	snprintf(host, sizeof(host), "%s%s", root, path);
	if (stat(host, &st) != 0 || !S_ISCHR(st.st_mode))
		return -1;
	d->path = strdup(path);
	d->host_path = strdup(host);
	d->permissions = strdup("rw");
	if (d->path == NULL || d->host_path == NULL || d->permissions == NULL) {
		free(d->path);
		free(d->host_path);
		free(d->permissions);
		memset(d, 0, sizeof(*d));
		return -1;
	}
	d->type = 'c';
	d->major = major(st.st_rdev);
	d->minor = minor(st.st_rdev);
	return 0;
}

struct lib_ctx {
	struct gp_nvidia_host *h;
	char dirs[1024];	/* LD_LIBRARY_PATH of the libraries' dirs */
	int bad;
};

static int
add_lib(void *arg, const char *soname, const char *path)
{
	struct lib_ctx *c = arg;
	char host[PATH_MAX + 4096], dir[PATH_MAX], *slash;
	int r;

	(void)soname;
	snprintf(host, sizeof(host), "%s%s", c->h->root, path);
	if (access(host, R_OK) != 0)
		return 0;
	if ((r = push_mount(&c->h->common, host, path)) < 0) {
		c->bad = 1;
		return 0;
	}
	gp_strlcpy(dir, path, sizeof(dir));
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (strstr(c->dirs, dir) == NULL &&
		    strlen(c->dirs) + strlen(dir) + 2 < sizeof(c->dirs)) {
			if (c->dirs[0] != '\0')
				strcat(c->dirs, ":");
			strcat(c->dirs, dir);
		}
	}
	return r;
}

static void
find_libraries(struct gp_nvidia_host *h, struct lib_ctx *c)
{
	char cmd[PATH_MAX + 64], *text = NULL;
	struct gp_buf out = {0};
	char buf[4096];
	size_t n;
	FILE *f;

	if (h->root[0] != '\0')
		snprintf(cmd, sizeof(cmd), "ldconfig -p -C '%s/etc/ld.so.cache' "
		    "2>/dev/null", h->root);
	else
		snprintf(cmd, sizeof(cmd), "ldconfig -p 2>/dev/null");
	if (strchr(h->root, '\'') != NULL || (f = popen(cmd, "r")) == NULL)
		return;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && out.len < (8 << 20))
		if (gp_buf_append(&out, buf, n) != 0)
			break;
	pclose(f);
	if (gp_buf_append(&out, "", 1) == 0) {
		text = out.data;
		h->nlibs = gp_nvidia_parse_ldcache(text, add_lib, c);
	}
	gp_buf_free(&out);
}

int
gp_nvidia_discover(const char *root, const int *minors, int ngpus,
    struct gp_nvidia_host *h)
{
	struct gp_oci_device d;
	struct lib_ctx c;
	char path[64], host[PATH_MAX + 64];
	int i;

	memset(h, 0, sizeof(*h));
	if (root != NULL && strcmp(root, "/") != 0)
		gp_strlcpy(h->root, root, sizeof(h->root));
	if (node(h->root, "/dev/nvidiactl", &d) != 0)
		return 0;
	free(d.path);
	free(d.host_path);
	free(d.permissions);
	h->present = 1;
	for (i = 0; i < (int)GP_ARRAY_LEN(control_nodes); i++) {
		struct gp_oci_device *grown;

		snprintf(path, sizeof(path), "/dev/%s", control_nodes[i]);
		if (node(h->root, path, &d) != 0)
			continue;
		grown = realloc(h->common.devices,
		    (size_t)(h->common.ndevices + 1) * sizeof(*grown));
		if (grown == NULL) {
			free(d.path);
			free(d.host_path);
			free(d.permissions);
			goto nomem;
		}
		h->common.devices = grown;
		h->common.devices[h->common.ndevices++] = d;
	}
	if (ngpus > 0 && (h->gpu_nodes = calloc((size_t)ngpus,
	    sizeof(*h->gpu_nodes))) == NULL)
		goto nomem;
	h->ngpus = ngpus;
	for (i = 0; i < ngpus; i++) {
		snprintf(path, sizeof(path), "/dev/nvidia%d", minors[i]);
		node(h->root, path, &h->gpu_nodes[i]);
	}
	memset(&c, 0, sizeof(c));
	c.h = h;
	find_libraries(h, &c);
	for (i = 0; i < (int)GP_ARRAY_LEN(programs); i++) {
		static const char *dirs[] = {"/usr/bin", "/usr/sbin", "/bin"};
		for (size_t k = 0; k < GP_ARRAY_LEN(dirs); k++) {
			snprintf(path, sizeof(path), "%s/%s", dirs[k],
			    programs[i]);
			snprintf(host, sizeof(host), "%s%s", h->root, path);
			if (access(host, X_OK) == 0) {
				if (push_mount(&h->common, host, path) < 0)
					c.bad = 1;
				break;
			}
		}
	}
	if (c.dirs[0] != '\0') {
		char *kv;
		if (asprintf(&kv, "LD_LIBRARY_PATH=%s", c.dirs) < 0 ||
		    (h->common.env = calloc(2, sizeof(char *))) == NULL) {
			c.bad = 1;
		} else {
			h->common.env[0] = kv;
			h->common.nenv = 1;
		}
	}
	if (c.bad)
		goto nomem;
	return 0;
nomem:
	gp_nvidia_host_fini(h);
	return GP_ENOMEM;
}

void
gp_nvidia_host_fini(struct gp_nvidia_host *h)
{
	gp_oci_edits_fini(&h->common);
	for (int i = 0; i < h->ngpus; i++) {
		free(h->gpu_nodes[i].path);
		free(h->gpu_nodes[i].host_path);
		free(h->gpu_nodes[i].permissions);
	}
	free(h->gpu_nodes);
	h->gpu_nodes = NULL;
	h->ngpus = 0;
}

int
gp_nvidia_edits(const struct gp_nvidia_host *h, const int *gpus, int n,
    struct gp_oci_edits *out, char *err, size_t errlen)
{
	struct gp_oci_edits mine;
	int i, ret;

	if (n == 0 || !h->present)
		return 0;
	memset(&mine, 0, sizeof(mine));
	mine.devices = calloc((size_t)n, sizeof(*mine.devices));
	if (mine.devices == NULL)
		return GP_ENOMEM;
	for (i = 0; i < n; i++) {
		if (gpus[i] < 0 || gpus[i] >= h->ngpus ||
		    h->gpu_nodes[gpus[i]].path == NULL) {
			snprintf(err, errlen, "GPU %d has no device node under "
			    "%s/dev", gpus[i], h->root);
			free(mine.devices);
			return GP_ENOENT;
		}
		/* Borrowed: appended as copies below. */
		mine.devices[mine.ndevices++] = h->gpu_nodes[gpus[i]];
	}
	ret = gp_oci_edits_append(out, &h->common);
	if (ret == 0)
		ret = gp_oci_edits_append(out, &mine);
	free(mine.devices);
	return ret;
}
