/*
 * oci_config.c: a container job's config.json (OCI runtime spec 1.0),
 * built with jansson from struct gp_oci_config, and the container edits
 * that CDI and NVIDIA discovery add to it. Pure: no file system access
 * except gp_oci_edits_resolve's stat of device nodes.
 *
 * What every container gets (docs/agent.md, "Container jobs"): a user
 * namespace mapped to the agent's unprivileged range, pid, ipc, uts,
 * mount and cgroup namespaces (the network one is the job's own, which
 * the runtime is started in: netns.c), no capabilities,
 * noNewPrivileges, a read-only root, nosuid on every mount, /proc, /dev
 * as a tmpfs with the standard nodes, /tmp and /dev/shm as size-bound
 * tmpfs (the writable scratch), the job's work directory read-write at
 * its host path, runc's default masked and read-only paths, memory,
 * pids and CPU limits, and a devices cgroup that denies every device but
 * the standard ones and those the edits add.
 */
#include "agent/oci.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "gp.h"
#include "util.h"

static const char *masked_paths[] = {
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	"/sys/devices/virtual/powercap",
};

static const char *readonly_paths[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
	"/proc/sysrq-trigger",
};

static const char *hook_names[] = {
	"prestart", "createRuntime", "createContainer", "startContainer",
	"poststart", "poststop",
};

/* ---- edits ---- */

static char **
dup_strv(char *const *v)
{
	size_t n = 0, i;
	char **out;

	if (v == NULL)
		return NULL;
	while (v[n] != NULL)
		n++;
	if ((out = calloc(n + 1, sizeof(char *))) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((out[i] = strdup(v[i])) == NULL) {
			gp_strv_free(out);
			return NULL;
		}
	return out;
}

/* strdup that keeps NULL; sets *bad on allocation failure. */
static char *
dup_or_null(const char *s, int *bad)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		*bad = 1;
	return d;
}

void
gp_oci_edits_fini(struct gp_oci_edits *e)
{
	int i;

	if (e == NULL)
		return;
	for (i = 0; i < e->nenv; i++)
		free(e->env[i]);
	free(e->env);
	for (i = 0; i < e->ndevices; i++) {
		free(e->devices[i].path);
		free(e->devices[i].host_path);
		free(e->devices[i].permissions);
	}
	free(e->devices);
	for (i = 0; i < e->nmounts; i++) {
		free(e->mounts[i].host_path);
		free(e->mounts[i].container_path);
		free(e->mounts[i].type);
		gp_strv_free(e->mounts[i].options);
	}
	free(e->mounts);
	for (i = 0; i < e->nhooks; i++) {
		free(e->hooks[i].hook_name);
		free(e->hooks[i].path);
		gp_strv_free(e->hooks[i].args);
		gp_strv_free(e->hooks[i].env);
	}
	free(e->hooks);
	free(e->gids);
	memset(e, 0, sizeof(*e));
}

/* Grows *arr (of n elements of size) by add; 0 or GP_ENOMEM. */
static int
grow(void *arr, int n, int add, size_t size)
{
	void **p = arr, *q;

	if (add == 0)
		return 0;
	if ((q = realloc(*p, (size_t)(n + add) * size)) == NULL)
		return GP_ENOMEM;
	memset((char *)q + (size_t)n * size, 0, (size_t)add * size);
	*p = q;
	return 0;
}

int
gp_oci_edits_append(struct gp_oci_edits *dst, const struct gp_oci_edits *src)
{
	int i, bad = 0;

	if (grow(&dst->env, dst->nenv, src->nenv, sizeof(char *)) != 0 ||
	    grow(&dst->devices, dst->ndevices, src->ndevices,
	    sizeof(*dst->devices)) != 0 ||
	    grow(&dst->mounts, dst->nmounts, src->nmounts,
	    sizeof(*dst->mounts)) != 0 ||
	    grow(&dst->hooks, dst->nhooks, src->nhooks,
	    sizeof(*dst->hooks)) != 0 ||
	    grow(&dst->gids, dst->ngids, src->ngids, sizeof(int64_t)) != 0)
		return GP_ENOMEM;
	for (i = 0; i < src->nenv; i++)
		dst->env[dst->nenv++] = dup_or_null(src->env[i], &bad);
	for (i = 0; i < src->ndevices; i++) {
		const struct gp_oci_device *s = &src->devices[i];
		struct gp_oci_device *d = &dst->devices[dst->ndevices++];

		d->path = dup_or_null(s->path, &bad);
		d->host_path = dup_or_null(s->host_path, &bad);
		d->permissions = dup_or_null(s->permissions, &bad);
		d->type = s->type;
		d->major = s->major;
		d->minor = s->minor;
	}
	for (i = 0; i < src->nmounts; i++) {
		const struct gp_oci_mount *s = &src->mounts[i];
		struct gp_oci_mount *d = &dst->mounts[dst->nmounts++];

		d->host_path = dup_or_null(s->host_path, &bad);
		d->container_path = dup_or_null(s->container_path, &bad);
		d->type = dup_or_null(s->type, &bad);
		if (s->options != NULL &&
		    (d->options = dup_strv(s->options)) == NULL)
			bad = 1;
	}
	for (i = 0; i < src->nhooks; i++) {
		const struct gp_oci_hook *s = &src->hooks[i];
		struct gp_oci_hook *d = &dst->hooks[dst->nhooks++];

		d->hook_name = dup_or_null(s->hook_name, &bad);
		d->path = dup_or_null(s->path, &bad);
		if (s->args != NULL && (d->args = dup_strv(s->args)) == NULL)
			bad = 1;
		if (s->env != NULL && (d->env = dup_strv(s->env)) == NULL)
			bad = 1;
		d->timeout = s->timeout;
	}
	for (i = 0; i < src->ngids; i++)
		dst->gids[dst->ngids++] = src->gids[i];
	return bad ? GP_ENOMEM : 0;
}

int
gp_oci_edits_resolve(struct gp_oci_edits *e, char *err, size_t errlen)
{
	struct stat st;
	int i;

	for (i = 0; i < e->ndevices; i++) {
		struct gp_oci_device *d = &e->devices[i];
		const char *host = d->host_path ? d->host_path : d->path;

		if (d->type != 0 && d->major >= 0 && d->minor >= 0)
			continue;
		if (stat(host, &st) != 0) {
			snprintf(err, errlen, "device %s: %s", host,
			    strerror(errno));
			return GP_ENOENT;
		}
		if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
			snprintf(err, errlen, "device %s: not a device node",
			    host);
			return GP_EINVAL;
		}
		if (d->type == 0)
			d->type = S_ISCHR(st.st_mode) ? 'c' : 'b';
		if (d->major < 0)
			d->major = major(st.st_rdev);
		if (d->minor < 0)
			d->minor = minor(st.st_rdev);
	}
	return 0;
}

/* ---- paths ---- */

int
gp_oci_path_normal(const char *p)
{
	const char *c;

	if (p == NULL || p[0] != '/' || strlen(p) >= 4096)
		return 0;
	if (strcmp(p, "/") == 0)
		return 1;
	for (c = p; *c != '\0';) {
		const char *end;
		size_t len;

		c++;	/* past '/' */
		end = strchrnul(c, '/');
		len = (size_t)(end - c);
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c = end;
	}
	return 1;
}

/* 1 when p is dir or below it. */
static int
under(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int
gp_oci_reserved_target(const char *t)
{
	return strcmp(t, "/") == 0 || under(t, "/proc") || under(t, "/sys") ||
	    under(t, "/dev") || strcmp(t, "/tmp") == 0;
}

/* ---- the document ---- */

struct builder {
	json_t *root;
	int bad;	/* allocation failed */
};

/* Takes the reference to v; records a failure. */
static void
put(struct builder *b, json_t *obj, const char *key, json_t *v)
{
	if (v == NULL || obj == NULL) {
		json_decref(v);
		b->bad = 1;
	} else if (json_object_set_new(obj, key, v) != 0)
		b->bad = 1;
}

static void
push(struct builder *b, json_t *arr, json_t *v)
{
	if (v == NULL || arr == NULL) {
		json_decref(v);
		b->bad = 1;
	} else if (json_array_append_new(arr, v) != 0)
		b->bad = 1;
}

static json_t *
strings(struct builder *b, char *const *v)
{
	json_t *a = json_array();

	for (; v != NULL && *v != NULL; v++)
		push(b, a, json_string(*v));
	if (a == NULL)
		b->bad = 1;
	return a;
}

static json_t *
strings_c(struct builder *b, const char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		push(b, a, json_string(v[i]));
	if (a == NULL)
		b->bad = 1;
	return a;
}

static void
add_mount(struct builder *b, json_t *mounts, const char *dest,
    const char *type, const char *source, const char *const *opts,
    size_t nopts)
{
	json_t *m = json_object();

	put(b, m, "destination", json_string(dest));
	put(b, m, "type", json_string(type));
	put(b, m, "source", json_string(source));
	put(b, m, "options", strings_c(b, opts, nopts));
	push(b, mounts, m);
}

/* "size=N" for tmpfs, into buf. */
static const char *
size_opt(char *buf, size_t len, int64_t bytes)
{
	snprintf(buf, len, "size=%lld", (long long)bytes);
	return buf;
}

static int
has_opt(char *const *opts, const char *name)
{
	for (; opts != NULL && *opts != NULL; opts++)
		if (strcmp(*opts, name) == 0)
			return 1;
	return 0;
}

/* An edit's mount: its options, plus bind for binds and always nosuid. */
static void
add_edit_mount(struct builder *b, json_t *mounts, const struct gp_oci_mount *m)
{
	static const char *defaults[] = {"bind", "ro", "nosuid", "nodev"};
	const char *type = m->type != NULL ? m->type : "bind";
	json_t *o = json_object(), *opts;

	put(b, o, "destination", json_string(m->container_path));
	put(b, o, "type", json_string(type));
	put(b, o, "source", json_string(m->host_path));
	if (m->options == NULL)
		opts = strings_c(b, defaults, GP_ARRAY_LEN(defaults));
	else {
		opts = strings(b, m->options);
		if (strcmp(type, "bind") == 0 && !has_opt(m->options, "bind") &&
		    !has_opt(m->options, "rbind"))
			push(b, opts, json_string("bind"));
		if (!has_opt(m->options, "nosuid"))
			push(b, opts, json_string("nosuid"));
	}
	put(b, o, "options", opts);
	push(b, mounts, o);
}

static json_t *
id_map(struct builder *b, uint32_t host, uint32_t size)
{
	json_t *a = json_array(), *m = json_object();

	put(b, m, "containerID", json_integer(0));
	put(b, m, "hostID", json_integer(host));
	put(b, m, "size", json_integer(size));
	push(b, a, m);
	if (a == NULL)
		b->bad = 1;
	return a;
}

static json_t *
device_rule(struct builder *b, int allow, char type, int64_t major,
    int64_t minor, const char *access)
{
	json_t *r = json_object();
	char t[2] = {type, '\0'};

	put(b, r, "allow", json_boolean(allow));
	if (type != 0) {
		put(b, r, "type", json_string(t));
		put(b, r, "major", json_integer(major));
		put(b, r, "minor", json_integer(minor));
	}
	put(b, r, "access", json_string(access));
	return r;
}

static json_t *
capabilities(struct builder *b)
{
	static const char *sets[] = {"bounding", "effective", "permitted",
	    "inheritable", "ambient"};
	json_t *c = json_object();

	for (size_t i = 0; i < GP_ARRAY_LEN(sets); i++)
		put(b, c, sets[i], json_array());
	return c;
}

static int
check(const struct gp_oci_config *c, char *err, size_t errlen)
{
	const struct gp_oci_edits *e = c->edits;
	int i;

	if (c->uid == 0 || c->gid == 0) {
		snprintf(err, errlen, "a container job never runs as root");
		return GP_EINVAL;
	}
	if (c->userns_size == 0 || c->uid >= c->userns_size ||
	    c->gid >= c->userns_size) {
		snprintf(err, errlen, "uid %u or gid %u is outside the user "
		    "namespace (size %u)", c->uid, c->gid, c->userns_size);
		return GP_EINVAL;
	}
	if (!gp_oci_path_normal(c->cwd) || !gp_oci_path_normal(c->workdir) ||
	    !gp_oci_path_normal(c->rootfs)) {
		snprintf(err, errlen, "not an absolute, normal path: cwd %s, "
		    "work directory %s or rootfs %s", c->cwd, c->workdir,
		    c->rootfs);
		return GP_EINVAL;
	}
	for (i = 0; i < c->nmounts; i++) {
		const char *t = c->mounts[i].target;

		if (!gp_oci_path_normal(t) || !gp_oci_path_normal(c->mounts[i].source)) {
			snprintf(err, errlen, "mount %s on %s: paths must be "
			    "absolute and normal", c->mounts[i].source, t);
			return GP_EINVAL;
		}
		if (gp_oci_reserved_target(t) || under(c->workdir, t)) {
			snprintf(err, errlen, "mount on %s: a reserved place "
			    "(/, /proc, /sys, /dev, /tmp, the work directory "
			    "or above it)", t);
			return GP_EINVAL;
		}
	}
	for (i = 0; e != NULL && i < e->ndevices; i++)
		if (!gp_oci_path_normal(e->devices[i].path) ||
		    e->devices[i].type == 0 || e->devices[i].major < 0 ||
		    e->devices[i].minor < 0) {
			snprintf(err, errlen, "device %s: bad path or unknown "
			    "type and numbers", e->devices[i].path);
			return GP_EINVAL;
		}
	for (i = 0; e != NULL && i < e->nmounts; i++)
		if (!gp_oci_path_normal(e->mounts[i].container_path) ||
		    e->mounts[i].host_path == NULL ||
		    e->mounts[i].host_path[0] != '/') {
			snprintf(err, errlen, "edit mount %s: paths must be "
			    "absolute", e->mounts[i].container_path ?
			    e->mounts[i].container_path : "(none)");
			return GP_EINVAL;
		}
	for (i = 0; e != NULL && i < e->nhooks; i++) {
		size_t k;

		for (k = 0; k < GP_ARRAY_LEN(hook_names); k++)
			if (e->hooks[i].hook_name != NULL &&
			    strcmp(e->hooks[i].hook_name, hook_names[k]) == 0)
				break;
		if (k == GP_ARRAY_LEN(hook_names) ||
		    e->hooks[i].path == NULL || e->hooks[i].path[0] != '/') {
			snprintf(err, errlen, "hook %s %s: unknown hook or "
			    "relative path", e->hooks[i].hook_name ?
			    e->hooks[i].hook_name : "(none)",
			    e->hooks[i].path ? e->hooks[i].path : "(none)");
			return GP_EINVAL;
		}
	}
	return 0;
}

static void
build_mounts(struct builder *b, const struct gp_oci_config *c, json_t *mounts)
{
	static const char *proc_o[] = {"nosuid", "noexec", "nodev"};
	static const char *dev_o[] = {"nosuid", "strictatime", "mode=755",
	    "size=65536k"};
	static const char *pts_o[] = {"nosuid", "noexec", "newinstance",
	    "ptmxmode=0666", "mode=0620"};
	static const char *mq_o[] = {"nosuid", "noexec", "nodev"};
	static const char *sys_o[] = {"rbind", "nosuid", "noexec", "nodev",
	    "ro"};
	static const char *cg_o[] = {"nosuid", "noexec", "nodev", "relatime",
	    "ro"};
	static const char *init_o[] = {"bind", "ro", "nosuid", "nodev"};
	static const char *work_o[] = {"bind", "rw", "nosuid", "nodev"};
	const struct gp_oci_edits *e = c->edits;
	char size[64];
	const char *shm_o[] = {"nosuid", "nodev", "mode=1777",
	    size_opt(size, sizeof(size), c->scratch_bytes)};
	int i;

	add_mount(b, mounts, "/proc", "proc", "proc", proc_o,
	    GP_ARRAY_LEN(proc_o));
	add_mount(b, mounts, "/dev", "tmpfs", "tmpfs", dev_o,
	    GP_ARRAY_LEN(dev_o));
	add_mount(b, mounts, "/dev/pts", "devpts", "devpts", pts_o,
	    GP_ARRAY_LEN(pts_o));
	add_mount(b, mounts, "/dev/shm", "tmpfs", "shm", shm_o,
	    GP_ARRAY_LEN(shm_o));
	add_mount(b, mounts, "/dev/mqueue", "mqueue", "mqueue", mq_o,
	    GP_ARRAY_LEN(mq_o));
	/* The host's /sys, read-only (bound, as runc's rootless default). */
	add_mount(b, mounts, "/sys", "none", "/sys", sys_o,
	    GP_ARRAY_LEN(sys_o));
	if (c->cgroup_mount)
		add_mount(b, mounts, "/sys/fs/cgroup", "cgroup", "cgroup",
		    cg_o, GP_ARRAY_LEN(cg_o));
	add_mount(b, mounts, "/tmp", "tmpfs", "tmpfs", shm_o,
	    GP_ARRAY_LEN(shm_o));
	add_mount(b, mounts, GP_OCI_INIT_PATH, "bind", c->init_host_path,
	    init_o, GP_ARRAY_LEN(init_o));
	add_mount(b, mounts, c->workdir, "bind", c->workdir, work_o,
	    GP_ARRAY_LEN(work_o));
	for (i = 0; i < c->nmounts; i++) {
		const char *o[] = {"bind", c->mounts[i].read_only ? "ro" :
		    "rw", "nosuid", "nodev"};
		add_mount(b, mounts, c->mounts[i].target, "bind",
		    c->mounts[i].source, o, GP_ARRAY_LEN(o));
	}
	for (i = 0; e != NULL && i < e->ndevices; i++) {
		/*
		 * The host's node: read-only, so that the job can open it
		 * for writing (a device ignores the mount's flag) but not
		 * chmod or chown it for everyone else (issue 15).
		 */
		static const char *dev_bind_o[] = {"bind", "ro", "nosuid",
		    "noexec"};
		const struct gp_oci_device *d = &e->devices[i];
		add_mount(b, mounts, d->path, "bind",
		    d->host_path ? d->host_path : d->path, dev_bind_o,
		    GP_ARRAY_LEN(dev_bind_o));
	}
	for (i = 0; e != NULL && i < e->nmounts; i++)
		add_edit_mount(b, mounts, &e->mounts[i]);
}

static json_t *
build_hooks(struct builder *b, const struct gp_oci_edits *e)
{
	json_t *hooks = json_object();
	int i;

	for (i = 0; e != NULL && i < e->nhooks; i++) {
		const struct gp_oci_hook *h = &e->hooks[i];
		json_t *list = json_object_get(hooks, h->hook_name), *o;

		if (list == NULL) {
			list = json_array();
			put(b, hooks, h->hook_name, list);
		}
		o = json_object();
		put(b, o, "path", json_string(h->path));
		if (h->args != NULL)
			put(b, o, "args", strings(b, h->args));
		if (h->env != NULL)
			put(b, o, "env", strings(b, h->env));
		if (h->timeout > 0)
			put(b, o, "timeout", json_integer(h->timeout));
		push(b, list, o);
	}
	return hooks;
}

static json_t *
build_resources(struct builder *b, const struct gp_oci_config *c)
{
	const struct gp_oci_edits *e = c->edits;
	json_t *r = json_object(), *devs = json_array(), *o;
	int i;

	push(b, devs, device_rule(b, 0, 0, 0, 0, "rwm"));
	for (i = 0; e != NULL && i < e->ndevices; i++) {
		const struct gp_oci_device *d = &e->devices[i];
		push(b, devs, device_rule(b, 1, d->type, d->major, d->minor,
		    d->permissions ? d->permissions : "rwm"));
	}
	put(b, r, "devices", devs);
	if (c->mem_bytes > 0) {
		o = json_object();
		put(b, o, "limit", json_integer(c->mem_bytes));
		if (c->mem_swap)
			put(b, o, "swap", json_integer(c->mem_bytes));
		put(b, r, "memory", o);
	}
	if (c->pids_max > 0) {
		o = json_object();
		put(b, o, "limit", json_integer(c->pids_max));
		put(b, r, "pids", o);
	}
	if (c->cpu_quota_us > 0) {
		o = json_object();
		put(b, o, "quota", json_integer(c->cpu_quota_us));
		put(b, o, "period", json_integer(c->cpu_period_us > 0 ?
		    c->cpu_period_us : 100000));
		put(b, r, "cpu", o);
	}
	return r;
}

int
gp_oci_config_build(const struct gp_oci_config *c, json_t **out, char *err,
    size_t errlen)
{
	static const char *ns[] = {"pid", "ipc", "uts", "mount", "user",
	    "cgroup"};
	const struct gp_oci_edits *e = c->edits;
	struct builder b = {json_object(), 0};
	json_t *proc, *user, *root, *linux, *nss, *mounts, *gids;
	int i, ret;

	if (b.root == NULL)
		return GP_ENOMEM;
	if ((ret = check(c, err, errlen)) != 0) {
		json_decref(b.root);
		return ret;
	}
	put(&b, b.root, "ociVersion", json_string("1.0.2"));

	proc = json_object();
	put(&b, proc, "terminal", json_false());
	user = json_object();
	put(&b, user, "uid", json_integer(c->uid));
	put(&b, user, "gid", json_integer(c->gid));
	if (e != NULL && e->ngids > 0) {
		gids = json_array();
		for (i = 0; i < e->ngids; i++)
			push(&b, gids, json_integer(e->gids[i]));
		put(&b, user, "additionalGids", gids);
	}
	put(&b, proc, "user", user);
	put(&b, proc, "args", strings(&b, c->args));
	put(&b, proc, "env", strings(&b, c->env));
	put(&b, proc, "cwd", json_string(c->cwd));
	put(&b, proc, "capabilities", capabilities(&b));
	put(&b, proc, "noNewPrivileges", json_true());
	put(&b, b.root, "process", proc);

	root = json_object();
	put(&b, root, "path", json_string(c->rootfs));
	put(&b, root, "readonly", json_true());
	put(&b, b.root, "root", root);
	put(&b, b.root, "hostname", json_string(c->hostname ? c->hostname :
	    "gpupool-job"));

	mounts = json_array();
	build_mounts(&b, c, mounts);
	put(&b, b.root, "mounts", mounts);
	if (e != NULL && e->nhooks > 0)
		put(&b, b.root, "hooks", build_hooks(&b, e));

	linux = json_object();
	put(&b, linux, "uidMappings", id_map(&b, c->userns_host,
	    c->userns_size));
	put(&b, linux, "gidMappings", id_map(&b, c->userns_host,
	    c->userns_size));
	nss = json_array();
	for (i = 0; i < (int)GP_ARRAY_LEN(ns); i++) {
		json_t *n = json_object();
		put(&b, n, "type", json_string(ns[i]));
		push(&b, nss, n);
	}
	if (c->new_net) {
		json_t *n = json_object();
		put(&b, n, "type", json_string("network"));
		push(&b, nss, n);
	}
	put(&b, linux, "namespaces", nss);
	if (c->cgroups_path != NULL)
		put(&b, linux, "cgroupsPath", json_string(c->cgroups_path));
	put(&b, linux, "resources", build_resources(&b, c));
	put(&b, linux, "maskedPaths", strings_c(&b, masked_paths,
	    GP_ARRAY_LEN(masked_paths)));
	put(&b, linux, "readonlyPaths", strings_c(&b, readonly_paths,
	    GP_ARRAY_LEN(readonly_paths)));
	put(&b, b.root, "linux", linux);
	if (b.bad) {
		json_decref(b.root);
		return GP_ENOMEM;
	}
	*out = b.root;
	return 0;
}
