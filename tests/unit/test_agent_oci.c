/*
 * test_agent_oci.c: the container executor's pure parts: CDI specs
 * (YAML and JSON, good and refused, lookup order), config.json (what
 * every container gets, what is refused), the image user's resolution,
 * the ld cache filter for NVIDIA libraries, the user namespace range
 * check. No root needed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cdi.h"
#include "agent/container.h"
#include "agent/nvidia.h"
#include "agent/oci.h"
#include "gp.h"
#include "log.h"
#include "unit.h"
#include "util.h"

static const char nvidia_ctk_yaml[] =
    "---\n"
    "cdiVersion: 0.5.0\n"
    "kind: nvidia.com/gpu\n"
    "devices:\n"
    "- name: \"0\"\n"
    "  containerEdits:\n"
    "    deviceNodes:\n"
    "    - path: /dev/nvidia0\n"
    "- name: GPU-4cf8db2d\n"
    "  containerEdits:\n"
    "    deviceNodes:\n"
    "    - path: /dev/nvidia0\n"
    "      hostPath: /host/dev/nvidia0\n"
    "      type: c\n"
    "      major: 195\n"
    "      minor: '0'\n"
    "      permissions: rw\n"
    "containerEdits:\n"
    "  env:\n"
    "  - NVIDIA_VISIBLE_DEVICES=void\n"
    "  deviceNodes:\n"
    "  - path: /dev/nvidiactl\n"
    "  hooks:\n"
    "  - hookName: createContainer\n"
    "    path: /usr/bin/nvidia-ctk\n"
    "    args: [nvidia-ctk, hook, update-ldcache]\n"
    "    timeout: 10\n"
    "  mounts:\n"
    "  - hostPath: /usr/lib/libcuda.so.1\n"
    "    containerPath: /usr/lib/libcuda.so.1\n"
    "    options: [ro, nosuid, nodev, bind]\n"
    "  additionalGIDs: [44, '0o55']\n";

TEST(cdi_yaml)
{
	struct gp_cdi_spec spec;
	char err[256];

	CHECK_EQ(gp_cdi_parse(nvidia_ctk_yaml, strlen(nvidia_ctk_yaml), 0,
	    &spec, err, sizeof(err)), 0);
	CHECK_STR(spec.kind, "nvidia.com/gpu");
	CHECK_STR(spec.version, "0.5.0");
	CHECK_EQ(spec.ndevices, 2);
	CHECK_STR(spec.devices[0].name, "0");
	CHECK_EQ(spec.devices[0].edits.ndevices, 1);
	CHECK_EQ(spec.devices[0].edits.devices[0].major, -1);
	CHECK_EQ(spec.devices[0].edits.devices[0].type, 0);
	CHECK_STR(spec.devices[1].edits.devices[0].host_path,
	    "/host/dev/nvidia0");
	CHECK_EQ(spec.devices[1].edits.devices[0].type, 'c');
	CHECK_EQ(spec.devices[1].edits.devices[0].major, 195);
	CHECK_EQ(spec.devices[1].edits.devices[0].minor, 0);
	CHECK_STR(spec.devices[1].edits.devices[0].permissions, "rw");
	CHECK_EQ(spec.edits.nenv, 1);
	CHECK_STR(spec.edits.env[0], "NVIDIA_VISIBLE_DEVICES=void");
	CHECK_EQ(spec.edits.nhooks, 1);
	CHECK_STR(spec.edits.hooks[0].hook_name, "createContainer");
	CHECK_STR(spec.edits.hooks[0].args[2], "update-ldcache");
	CHECK(spec.edits.hooks[0].args[3] == NULL);
	CHECK_EQ(spec.edits.hooks[0].timeout, 10);
	CHECK_EQ(spec.edits.nmounts, 1);
	CHECK_STR(spec.edits.mounts[0].options[3], "bind");
	CHECK_EQ(spec.edits.ngids, 2);
	CHECK_EQ(spec.edits.gids[1], 055);
	gp_cdi_spec_fini(&spec);
}

TEST(cdi_json)
{
	static const char text[] = "{\"cdiVersion\": \"0.6.0\", \"kind\": "
	    "\"vendor.com/class\", \"devices\": [{\"name\": \"a\", "
	    "\"containerEdits\": {\"deviceNodes\": [{\"path\": \"/dev/a\", "
	    "\"major\": 10, \"minor\": 200}]}}], \"annotations\": {}}";
	struct gp_cdi_spec spec;
	char err[256];

	CHECK_EQ(gp_cdi_parse(text, strlen(text), 1, &spec, err,
	    sizeof(err)), 0);
	CHECK_EQ(spec.ndevices, 1);
	CHECK_EQ(spec.devices[0].edits.devices[0].minor, 200);
	gp_cdi_spec_fini(&spec);
}

TEST(cdi_refused)
{
	static const struct {
		const char *text;
		int json;
		const char *why;
	} bad[] = {
		{"kind: a/b\ndevices: []\n", 0, "cdiVersion"},
		{"cdiVersion: x\nkind: ab\ndevices: []\n", 0, "kind"},
		{"cdiVersion: x\nkind: a/b\n", 0, "devices"},
		{"cdiVersion: x\nkind: a/b\ndevices:\n- name: '-x'\n", 0,
		    "name"},
		{"cdiVersion: x\nkind: a/b\ndevices:\n- name: x\n"
		    "  containerEdits:\n    deviceNodes:\n    - path: dev/x\n",
		    0, "absolute"},
		{"cdiVersion: x\nkind: a/b\ndevices:\n- name: x\n"
		    "  containerEdits:\n    deviceNodes:\n    - path: /dev/x\n"
		    "      type: p\n", 0, "type"},
		{"cdiVersion: x\nkind: a/b\ndevices:\n- name: x\n"
		    "  containerEdits:\n    deviceNodes:\n    - path: /dev/x\n"
		    "      major: ten\n", 0, "major"},
		{"cdiVersion: x\nkind: a/b\ndevices:\n- name: x\n"
		    "  containerEdits:\n    hooks:\n    - hookName: x\n"
		    "      path: /bin/true\n", 0, "hookName"},
		{"cdiVersion: x\nkind: a/b\ndevices:\n- name: x\n"
		    "  containerEdits:\n    env: [A]\n", 0, "KEY=VALUE"},
		{"cdiVersion: x\nkind: a/b\ndevices: {}\n", 0, "list"},
		{"a: &a [*a]\ncdiVersion: x\nkind: a/b\ndevices: []\n", 0,
		    "too deep"},
		{"[1, 2", 0, "YAML"},
		{"{\"cdiVersion\": \"x\", \"kind\": \"a/b\", \"kind\": \"a/c\", "
		    "\"devices\": []}", 1, "JSON"},
		{"{\"cdiVersion\": 5, \"kind\": \"a/b\", \"devices\": []}", 1,
		    "text"},
	};
	struct gp_cdi_spec spec;
	char err[256];

	for (size_t i = 0; i < GP_ARRAY_LEN(bad); i++) {
		err[0] = '\0';
		CHECK_EQ(gp_cdi_parse(bad[i].text, strlen(bad[i].text),
		    bad[i].json, &spec, err, sizeof(err)), GP_EINVAL);
		if (strstr(err, bad[i].why) == NULL)
			fprintf(stderr, "case %zu: \"%s\" lacks \"%s\"\n", i,
			    err, bad[i].why);
		CHECK(strstr(err, bad[i].why) != NULL);
		gp_cdi_spec_fini(&spec);
	}
}

TEST(cdi_billion_laughs)
{
	struct gp_buf b = {0};
	struct gp_cdi_spec spec;
	char err[256];

	gp_buf_printf(&b, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
	for (int i = 1; i < 12; i++) {
		gp_buf_printf(&b, "a%d: &a%d [", i, i);
		for (int k = 0; k < 10; k++)
			gp_buf_printf(&b, "%s*a%d", k ? ", " : "", i - 1);
		gp_buf_printf(&b, "]\n");
	}
	gp_buf_printf(&b, "cdiVersion: x\nkind: a/b\ndevices: []\n");
	/* 10^12 nodes if expanded: refused within the node budget. */
	CHECK_EQ(gp_cdi_parse(b.data, b.len, 0, &spec, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "too big") != NULL);
	gp_cdi_spec_fini(&spec);
	gp_buf_free(&b);
}

TEST(cdi_registry_order)
{
	char dir[] = "/tmp/gpupool-cdi-XXXXXX", a[64], b[64], path[128];
	const char *dirs[2] = {a, b};
	const struct gp_cdi_device *d;
	const struct gp_cdi_spec *s;
	struct gp_cdi_registry reg;
	FILE *f;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(a, sizeof(a), "%s/etc", dir);
	snprintf(b, sizeof(b), "%s/run", dir);
	mkdir(a, 0755);
	mkdir(b, 0755);
	snprintf(path, sizeof(path), "%s/gpu.yaml", a);
	f = fopen(path, "w");
	fputs("cdiVersion: x\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n"
	    "  containerEdits: {env: [FROM=etc]}\n- name: \"1\"\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/gpu.json", b);
	f = fopen(path, "w");
	fputs("{\"cdiVersion\": \"x\", \"kind\": \"nvidia.com/gpu\", "
	    "\"devices\": [{\"name\": \"0\", \"containerEdits\": {\"env\": "
	    "[\"FROM=run\"]}}]}", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/broken.yaml", b);
	f = fopen(path, "w");
	fputs("kind: [", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/ignored.txt", b);
	f = fopen(path, "w");
	fputs("not a spec", f);
	fclose(f);
	CHECK_EQ(gp_cdi_load(dirs, 2, &reg), 2);
	CHECK(gp_cdi_has_kind(&reg, GP_CDI_KIND_GPU));
	CHECK(!gp_cdi_has_kind(&reg, "other.com/x"));
	/* /var/run/cdi (loaded later) wins over /etc/cdi. */
	d = gp_cdi_find(&reg, GP_CDI_KIND_GPU, "0", &s);
	CHECK(d != NULL && d->edits.nenv == 1 &&
	    strcmp(d->edits.env[0], "FROM=run") == 0);
	d = gp_cdi_find(&reg, GP_CDI_KIND_GPU, "1", &s);
	CHECK(d != NULL && strstr(s->path, "/etc/") != NULL);
	CHECK(gp_cdi_find(&reg, GP_CDI_KIND_GPU, "2", NULL) == NULL);
	gp_cdi_registry_fini(&reg);
	gp_remove_tree(dir);
}

/* ---- config.json ---- */

static char *args[] = {GP_OCI_INIT_PATH, "--", "python3", "train.py", NULL};
static char *env[] = {"PATH=/usr/bin", "A=b", NULL};

static void
base_config(struct gp_oci_config *c)
{
	memset(c, 0, sizeof(*c));
	c->args = args;
	c->env = env;
	c->cwd = "/work/jobs/1-1";
	c->uid = 1000;
	c->gid = 1000;
	c->rootfs = "/b/rootfs";
	c->userns_host = 2147418112U;
	c->userns_size = 65536;
	c->cgroups_path = "/gpupool-n-1/1-1";
	c->mem_bytes = 1 << 30;
	c->pids_max = 4096;
	c->cpu_quota_us = 200000;
	c->cpu_period_us = 100000;
	c->scratch_bytes = 1 << 20;
	c->workdir = "/work/jobs/1-1";
	c->init_host_path = "/usr/lib/gpupool/gpupool-init";
}

static json_t *
find_mount(json_t *cfg, const char *dest)
{
	json_t *m;
	size_t i;

	json_array_foreach(json_object_get(cfg, "mounts"), i, m)
		if (strcmp(json_string_value(json_object_get(m,
		    "destination")), dest) == 0)
			return m;
	return NULL;
}

static int
has_option(json_t *mount, const char *opt)
{
	json_t *o;
	size_t i;

	json_array_foreach(json_object_get(mount, "options"), i, o)
		if (strcmp(json_string_value(o), opt) == 0)
			return 1;
	return 0;
}

TEST(config_basics)
{
	struct gp_oci_config c;
	json_t *cfg = NULL, *proc, *lin, *res, *m, *caps;
	char err[256];
	size_t i;

	base_config(&c);
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), 0);
	proc = json_object_get(cfg, "process");
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(proc,
	    "user"), "uid")), 1000);
	CHECK(json_is_true(json_object_get(proc, "noNewPrivileges")));
	CHECK(json_is_false(json_object_get(proc, "terminal")));
	caps = json_object_get(proc, "capabilities");
	CHECK(json_object_size(caps) == 5);
	CHECK_EQ(json_array_size(json_object_get(caps, "bounding")), 0);
	CHECK_EQ(json_array_size(json_object_get(caps, "effective")), 0);
	CHECK(json_is_true(json_object_get(json_object_get(cfg, "root"),
	    "readonly")));
	lin = json_object_get(cfg, "linux");
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(
	    json_object_get(lin, "uidMappings"), 0), "hostID")), 2147418112);
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(
	    json_object_get(lin, "uidMappings"), 0), "containerID")), 0);
	CHECK_STR(json_string_value(json_object_get(lin, "cgroupsPath")),
	    "/gpupool-n-1/1-1");
	res = json_object_get(lin, "resources");
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(res,
	    "memory"), "limit")), 1 << 30);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(res,
	    "pids"), "limit")), 4096);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(res,
	    "cpu"), "quota")), 200000);
	/* Every device denied first. */
	CHECK(json_is_false(json_object_get(json_array_get(json_object_get(res,
	    "devices"), 0), "allow")));
	CHECK(json_array_size(json_object_get(lin, "maskedPaths")) > 5);
	CHECK(json_array_size(json_object_get(lin, "readonlyPaths")) > 3);
	/* No network namespace (the host's network); a user namespace. */
	{
		json_t *ns;
		int user = 0, net = 0;
		json_array_foreach(json_object_get(lin, "namespaces"), i, ns) {
			const char *t = json_string_value(json_object_get(ns,
			    "type"));
			user |= strcmp(t, "user") == 0;
			net |= strcmp(t, "network") == 0;
		}
		CHECK(user && !net);
	}
	/* nosuid on every mount; the work directory read-write. */
	json_array_foreach(json_object_get(cfg, "mounts"), i, m)
		CHECK(has_option(m, "nosuid"));
	m = find_mount(cfg, "/work/jobs/1-1");
	CHECK(m != NULL && has_option(m, "rw"));
	m = find_mount(cfg, GP_OCI_INIT_PATH);
	CHECK(m != NULL && has_option(m, "ro"));
	m = find_mount(cfg, "/tmp");
	CHECK(m != NULL && has_option(m, "size=1048576"));
	json_decref(cfg);
}

TEST(config_edits_and_mounts)
{
	struct gp_oci_device dev = {"/dev/nvidia1", "/fake/dev/nvidia1", 'c',
	    195, 1, "rw"};
	char *opts[] = {"ro", NULL};
	struct gp_oci_mount em = {"/usr/lib/libcuda.so.1",
	    "/usr/lib/libcuda.so.1", NULL, opts};
	char *hargs[] = {"sh", "-c", "true", NULL};
	struct gp_oci_hook hook = {"createRuntime", "/bin/sh", hargs, NULL, 3};
	struct gp_oci_edits e = {NULL, 0, &dev, 1, &em, 1, &hook, 1, NULL, 0};
	struct gp_mount jm[] = {{"/data/set", "/data", 1},
	    {"/out", "/results", 0}};
	struct gp_oci_config c;
	json_t *cfg = NULL, *devs, *m;
	char err[256];

	base_config(&c);
	c.edits = &e;
	c.mounts = jm;
	c.nmounts = 2;
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), 0);
	devs = json_object_get(json_object_get(json_object_get(cfg, "linux"),
	    "resources"), "devices");
	CHECK_EQ(json_array_size(devs), 2);
	CHECK(json_is_true(json_object_get(json_array_get(devs, 1), "allow")));
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(devs, 1),
	    "minor")), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(devs, 1),
	    "access")), "rw");
	/* The node is bound from its host path. */
	m = find_mount(cfg, "/dev/nvidia1");
	CHECK(m != NULL && strcmp(json_string_value(json_object_get(m,
	    "source")), "/fake/dev/nvidia1") == 0);
	/* Read-only: the job may use the host's node, not chmod or chown it. */
	CHECK(m != NULL && has_option(m, "ro"));
	/* An edit's bind gets "bind" and "nosuid" added. */
	m = find_mount(cfg, "/usr/lib/libcuda.so.1");
	CHECK(m != NULL && has_option(m, "bind") && has_option(m, "nosuid") &&
	    has_option(m, "ro"));
	m = find_mount(cfg, "/data");
	CHECK(m != NULL && has_option(m, "ro") && has_option(m, "nodev"));
	m = find_mount(cfg, "/results");
	CHECK(m != NULL && has_option(m, "rw"));
	CHECK_EQ(json_array_size(json_object_get(json_object_get(cfg, "hooks"),
	    "createRuntime")), 1);
	json_decref(cfg);
}

TEST(config_refused)
{
	struct gp_mount bad_target[] = {{"/x", "/proc/sys", 1}};
	struct gp_mount above_work[] = {{"/x", "/work", 1}};
	struct gp_mount relative[] = {{"/x", "data/../etc", 1}};
	struct gp_oci_config c;
	json_t *cfg = NULL;
	char err[256];

	base_config(&c);
	c.uid = 0;
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), GP_EINVAL);
	base_config(&c);
	c.gid = 70000;
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), GP_EINVAL);
	base_config(&c);
	c.mounts = bad_target;
	c.nmounts = 1;
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), GP_EINVAL);
	c.mounts = above_work;
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), GP_EINVAL);
	c.mounts = relative;
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), GP_EINVAL);
	base_config(&c);
	c.cwd = "relative";
	CHECK_EQ(gp_oci_config_build(&c, &cfg, err, sizeof(err)), GP_EINVAL);
	CHECK(cfg == NULL);
}

/* ---- the image's user ---- */

TEST(resolve_user)
{
	char dir[] = "/tmp/gpupool-user-XXXXXX", path[128], err[256];
	uint32_t uid, gid;
	FILE *f;
	int root;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/etc", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/etc/passwd", dir);
	f = fopen(path, "w");
	fputs("root:x:0:0::/root:/bin/sh\nworker:x:2000:2001::/:/bin/sh\n"
	    "zero:x:3000:0::/:/bin/sh\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/etc/group", dir);
	f = fopen(path, "w");
	fputs("root:x:0:\nstaff:x:50:\n", f);
	fclose(f);
	root = open(dir, O_PATH | O_DIRECTORY);
	CHECK(root >= 0);
	CHECK_EQ(gp_container_resolve_user(root, NULL, &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 1000 && gid == 1000);
	CHECK_EQ(gp_container_resolve_user(root, "root", &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 1000 && gid == 1000);
	CHECK_EQ(gp_container_resolve_user(root, "0:0", &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 1000 && gid == 1000);
	CHECK_EQ(gp_container_resolve_user(root, "worker", &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 2000 && gid == 2001);
	CHECK_EQ(gp_container_resolve_user(root, "worker:staff", &uid, &gid,
	    err, sizeof(err)), 0);
	CHECK(uid == 2000 && gid == 50);
	CHECK_EQ(gp_container_resolve_user(root, "2000", &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 2000 && gid == 2001);
	CHECK_EQ(gp_container_resolve_user(root, "4242:77", &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 4242 && gid == 77);
	CHECK_EQ(gp_container_resolve_user(root, "4242", &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 4242 && gid == 4242);
	/* gid 0 is never used either. */
	CHECK_EQ(gp_container_resolve_user(root, "zero", &uid, &gid, err,
	    sizeof(err)), 0);
	CHECK(uid == 3000 && gid == 1000);
	CHECK_EQ(gp_container_resolve_user(root, "nobody-here", &uid, &gid,
	    err, sizeof(err)), GP_ENOENT);
	CHECK(strstr(err, "nobody-here") != NULL);
	CHECK_EQ(gp_container_resolve_user(root, "worker:nogroup", &uid, &gid,
	    err, sizeof(err)), GP_ENOENT);
	close(root);
	gp_remove_tree(dir);
}

/* ---- NVIDIA libraries from the ld cache ---- */

static int
collect(void *arg, const char *soname, const char *path)
{
	struct gp_buf *b = arg;

	gp_buf_printf(b, "%s=%s;", soname, path);
	return 1;
}

TEST(ldcache_filter)
{
	static const char text[] =
	    "686 libs found in cache `/etc/ld.so.cache'\n"
	    "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n"
	    "\tlibnvidia-ml.so.1 (libc6,x86-64) => "
	    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
	    "\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
	    "\tlibcuda.so.1 (libc6,x86-64) => "
	    "/usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
	    "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/libcudart\n"
	    "\tlibcuda.so (libc6,x86-64) => relative/libcuda.so\n"
	    "Cache generated by: ldconfig\n";
	struct gp_buf b = {0};

	CHECK_EQ(gp_nvidia_parse_ldcache(text, collect, &b), 2);
	gp_buf_append(&b, "", 1);
	CHECK_STR(b.data, "libnvidia-ml.so.1=/usr/lib/x86_64-linux-gnu/"
	    "libnvidia-ml.so.1;libcuda.so.1=/usr/lib/x86_64-linux-gnu/"
	    "libcuda.so.1;");
	gp_buf_free(&b);
}

TEST(userns_range)
{
	char err[256];

	CHECK_EQ(gp_oci_userns_check(0, 65536, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "uid 0") != NULL);
	CHECK_EQ(gp_oci_userns_check(100000, 1000, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_oci_userns_check(4294967295U - 1000, 65536, err,
	    sizeof(err)), GP_EINVAL);
	/* nobody (65534) is a user of this host. */
	CHECK_EQ(gp_oci_userns_check(1, 65536, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "includes user") != NULL);
	CHECK_EQ(gp_oci_userns_check(GP_CONTAINER_USERNS_BASE,
	    GP_CONTAINER_USERNS_SIZE, err, sizeof(err)), 0);
}

int
main(void)
{
	gp_log_init("test", GP_LOG_ERROR);
	RUN(cdi_yaml);
	RUN(cdi_json);
	RUN(cdi_refused);
	RUN(cdi_billion_laughs);
	RUN(cdi_registry_order);
	RUN(config_basics);
	RUN(config_edits_and_mounts);
	RUN(config_refused);
	RUN(resolve_user);
	RUN(ldcache_filter);
	RUN(userns_range);
	return unit_report();
}
