/*
 * test_agent_container.c: runs real container jobs through the executor
 * and each OCI runtime found (crun, runc), from a busybox-static root
 * file system the test builds as one image layer, and checks what the
 * container executor promises: non-root inside and outside, read-only
 * image, writable scratch and work directory, limits, no capabilities, a
 * setuid binary gains nothing, other jobs and the host's homes unseen,
 * time limit, cancel, the checkpoint signal, output, exec failures,
 * mounts, and GPUs: only the assigned ones, through a CDI spec and
 * through discovered (fake) NVIDIA nodes, denied by the devices cgroup.
 * Skips (SKIP, tests/unit/unit.h) when not root, without busybox-static,
 * or for each runtime not installed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/container.h"
#include "agent/executor.h"
#include "gp.h"
#include "log.h"
#include "exec_outcomes.h"
#include "unit.h"
#include "util.h"

static char dir[] = "/var/tmp/gpupool-ctest-XXXXXX";
static char work[PATH_MAX], layer[PATH_MAX], fakeroot[PATH_MAX];
static char cdiroot[PATH_MAX], datadir[PATH_MAX], init_path[PATH_MAX];
static const char *runtime_name;
static struct gp_executor *ex;
static struct gp_exec_config cfg;
static struct gp_sandbox_user user;
static struct gp_cgroups cgroups;
static struct gp_containers *containers;
static struct gp_gpu_info gpus[2] = {
	{0, "GPU-fake-t-0", "Fake GPU", 16384, 0, 0, 0},
	{1, "GPU-fake-t-1", "Fake GPU", 16384, 0, 0, 0},
};
static int next_id = 1;

/* ---- building the image and the fake host ---- */

static int
sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static int
write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* One layer: busybox-static and its applets, passwd, a setuid copy. */
static int
build_layer(void)
{
	char path[PATH_MAX + 64];

	if (sh("mkdir -p %s/bin %s/etc %s/root %s/home/worker && "
	    "cp /bin/busybox %s/bin/busybox && "
	    "for a in $(/bin/busybox --list); do "
	    "[ -e %s/bin/$a ] || ln -s busybox %s/bin/$a; done && "
	    "mkdir %s/bin/suid && cp /bin/busybox %s/bin/suid/busybox && "
	    "chown 0:0 %s/bin/suid/busybox && "
	    "chmod 4755 %s/bin/suid/busybox && "
	    "echo image-secret > %s/root/image-file && "
	    "chmod 700 %s/root",
	    layer, layer, layer, layer, layer, layer, layer, layer, layer,
	    layer, layer, layer, layer) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/etc/passwd", layer);
	if (write_text(path, "root:x:0:0:root:/root:/bin/sh\n"
	    "worker:x:2000:2001:worker:/home/worker:/bin/sh\n"
	    "nobody:x:65534:65534:nobody:/:/bin/false\n") != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/etc/group", layer);
	return write_text(path, "root:x:0:\nworkers:x:2001:\nstaff:x:3000:\n"
	    "nogroup:x:65534:\n");
}

/*
 * A fake NVIDIA host under root: device nodes with NVIDIA's major 195
 * (no driver here: opening one says ENXIO when the devices cgroup lets
 * it through, EPERM when it does not), a libcuda in an ld cache, and a
 * fake nvidia-smi.
 */
static int
build_fake_nvidia(const char *root)
{
	return sh("mkdir -p %s/dev %s/usr/lib/x86_64-linux-gnu %s/usr/bin "
	    "%s/etc && mknod -m 666 %s/dev/nvidia0 c 195 0 && "
	    "mknod -m 666 %s/dev/nvidia1 c 195 1 && "
	    "mknod -m 666 %s/dev/nvidiactl c 195 255 && "
	    "mknod -m 666 %s/dev/nvidia-uvm c 195 254 && "
	    "echo 'int cuInit(int f) { return f; }' > %s/cuda.c && "
	    "cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "
	    "%s/usr/lib/x86_64-linux-gnu/libcuda.so.999.1 %s/cuda.c && "
	    "ln -s libcuda.so.999.1 %s/usr/lib/x86_64-linux-gnu/libcuda.so.1 "
	    "&& echo /usr/lib/x86_64-linux-gnu > %s/etc/ld.so.conf && "
	    "ldconfig -r %s && printf '#!/bin/sh\\necho fake nvidia-smi\\n' "
	    "> %s/usr/bin/nvidia-smi && chmod 755 %s/usr/bin/nvidia-smi",
	    root, root, root, root, root, root, root, root, root, root, root,
	    root, root, root, root, root);
}

/* A CDI spec naming the fake nodes of root, plus a hook and a probe. */
static int
build_cdi(const char *root)
{
	char path[PATH_MAX + 64], text[32768];

	if (sh("mkdir -p %s/etc/cdi", root) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/etc/cdi/nvidia.yaml", root);
	snprintf(text, sizeof(text),
	    "cdiVersion: \"0.5.0\"\n"
	    "kind: nvidia.com/gpu\n"
	    "devices:\n"
	    "- name: \"0\"\n"
	    "  containerEdits:\n"
	    "    deviceNodes:\n"
	    "    - path: /dev/nvidia0\n"
	    "      hostPath: %s/dev/nvidia0\n"
	    "- name: GPU-fake-t-1\n"
	    "  containerEdits:\n"
	    "    deviceNodes:\n"
	    "    - path: /dev/nvidia1\n"
	    "      hostPath: %s/dev/nvidia1\n"
	    "    env: [CDI_DEVICE=one]\n"
	    "containerEdits:\n"
	    "  env:\n"
	    "  - NVIDIA_VISIBLE_DEVICES=void\n"
	    "  - CDI_COMMON=yes\n"
	    "  deviceNodes:\n"
	    "  - path: /dev/nvidiactl\n"
	    "    hostPath: %s/dev/nvidiactl\n"
	    "  mounts:\n"
	    "  - hostPath: %s/dev/nvidia0\n"
	    "    containerPath: /opt/probe-nvidia0\n"
	    "    options: [bind]\n"
	    "  - hostPath: %s/usr/lib/x86_64-linux-gnu/libcuda.so.999.1\n"
	    "    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.999.1\n"
	    "    options: [ro, nosuid, nodev, bind]\n"
	    "  hooks:\n"
	    "  - hookName: createRuntime\n"
	    "    path: /bin/sh\n"
	    "    args: [sh, -c, 'echo hooked > %s/hook-ran']\n",
	    root, root, root, root, root, root);
	return write_text(path, text);
}

/* ---- running jobs ---- */

struct job_opts {
	const char *user;	/* the image's User */
	char **env;		/* the image's Env */
	char **entrypoint, **cmd;
	const char *workdir;
	int64_t mem_mib;
	int cpus;
	int ngpus;
	int gpu0;		/* first GPU index */
	int64_t time_limit_s;
	struct gp_mount *mounts;
	int nmounts;
	int no_command;
};

static char **
strv(const char *a, const char *b, const char *c)
{
	char **v = calloc(4, sizeof(char *));

	if (a != NULL)
		v[0] = strdup(a);
	if (b != NULL)
		v[1] = strdup(b);
	if (c != NULL)
		v[2] = strdup(c);
	return v;
}

static struct gp_attempt_id
submit_opts(const char *script, const struct job_opts *o)
{
	struct gp_container_image *img = calloc(1, sizeof(*img));
	struct gp_assignment a;

	img->digest = strdup("sha256:test");
	img->layers = strv(layer, NULL, NULL);
	img->env = o->env ? o->env : strv("IMAGE_VAR=image",
	    "GREETING=from-image", NULL);
	img->entrypoint = o->entrypoint;
	img->cmd = o->cmd;
	img->workdir = o->workdir ? strdup(o->workdir) : NULL;
	img->user = o->user ? strdup(o->user) : NULL;
	memset(&a, 0, sizeof(a));
	a.id.job_id = next_id++;
	a.id.attempt = 1;
	if (!o->no_command) {
		a.argv = strv("sh", "-c", script);
		a.argc = 3;
	}
	a.env = calloc(2, sizeof(char *));
	a.env[0] = strdup("GREETING=hello");
	a.nenv = 1;
	for (int i = 0; i < o->ngpus; i++)
		a.gpus[a.ngpus++] = o->gpu0 + i;
	a.mem_mib = o->mem_mib;
	a.cpus = o->cpus;
	a.time_limit_s = o->time_limit_s;
	a.container = img;
	if (o->nmounts > 0) {
		a.mounts = calloc((size_t)o->nmounts, sizeof(*a.mounts));
		for (int i = 0; i < o->nmounts; i++) {
			a.mounts[i].source = strdup(o->mounts[i].source);
			a.mounts[i].target = strdup(o->mounts[i].target);
			a.mounts[i].read_only = o->mounts[i].read_only;
		}
		a.nmounts = o->nmounts;
	}
	CHECK_EQ(gp_executor_start(ex, &a), 0);
	return (struct gp_attempt_id){next_id - 1, 1};
}

static struct gp_attempt_id
submit(const char *script)
{
	struct job_opts o;

	memset(&o, 0, sizeof(o));
	return submit_opts(script, &o);
}

static struct outcome
run_opts(const char *script, const struct job_opts *o)
{
	struct outcome out;

	wait_done(submit_opts(script, o), &out);
	return out;
}

static struct outcome
run(const char *script)
{
	struct outcome out;

	wait_done(submit(script), &out);
	return out;
}

static int
has(const struct outcome *o, const char *text)
{
	return strstr(o->output.data, text) != NULL;
}

/* Prints a failed job's output, to make a failure readable. */
static void
show(const char *what, const struct outcome *o)
{
	if (unit_failed_checks > 0)
		fprintf(stderr, "[%s %s] reason=%s exit=%d signal=%d "
		    "message=\"%s\" output:\n%s\n", runtime_name, what,
		    o->result.reason, o->result.exit_code, o->result.signal,
		    o->result.message, o->output.data);
}

/* ---- the tests ---- */

TEST(output_exit_code_env)
{
	struct outcome o = run("echo out; echo err >&2; echo g=$GREETING; "
	    "echo i=$IMAGE_VAR; echo h=$HOME; echo c=$GPUPOOL_CHECKPOINT_DIR; "
	    "pwd; exit 7");

	CHECK_EQ(o.started, 1);
	CHECK_STR(o.result.reason, "exited");
	CHECK_EQ(o.result.exit_code, 7);
	CHECK(has(&o, "out\n") && has(&o, "err\n"));
	/* The job's env overrides the image's; the image's stays. */
	CHECK(has(&o, "g=hello\n"));
	CHECK(has(&o, "i=image\n"));
	/* The work directory has its host path inside too. */
	CHECK(has(&o, "h=") && has(&o, work));
	CHECK(has(&o, "/checkpoint\n"));
	show("output", &o);
	free(o.output.data);
}

TEST(entrypoint_and_cmd)
{
	struct job_opts opts;
	struct outcome o;

	/* No command: Entrypoint + Cmd. */
	memset(&opts, 0, sizeof(opts));
	opts.entrypoint = strv("echo", "entry", NULL);
	opts.cmd = strv("from-cmd", NULL, NULL);
	opts.no_command = 1;
	o = run_opts(NULL, &opts);
	CHECK_STR(o.result.reason, "exited");
	CHECK(has(&o, "entry from-cmd\n"));
	show("entrypoint", &o);
	free(o.output.data);
	/* A command replaces Cmd, not Entrypoint. */
	memset(&opts, 0, sizeof(opts));
	opts.entrypoint = strv("echo", "entry", NULL);
	opts.cmd = strv("from-cmd", NULL, NULL);
	o = run_opts("x", &opts);
	CHECK(has(&o, "entry sh -c x\n"));
	free(o.output.data);
	/* Neither: a start failure that says so. */
	memset(&opts, 0, sizeof(opts));
	opts.no_command = 1;
	o = run_opts(NULL, &opts);
	CHECK_STR(o.result.reason, "start_failed");
	CHECK(strstr(o.result.message, "nothing to run") != NULL);
	free(o.output.data);
}

TEST(not_root_inside_or_outside)
{
	char path[PATH_MAX + 64];
	struct gp_attempt_id id;
	struct outcome o;
	struct stat st;

	id = submit("id -u; id -g; cat /proc/self/uid_map; echo x > owned; "
	    "echo up; sleep 1000");
	wait_output(id, "up");
	/* Outside: what it writes belongs to base + 1000, not to root. */
	snprintf(path, sizeof(path), "%s/jobs/%lld-1/owned", work,
	    (long long)id.job_id);
	CHECK(stat(path, &st) == 0);
	CHECK_EQ(st.st_uid, GP_CONTAINER_USERNS_BASE + 1000);
	CHECK_EQ(st.st_gid, GP_CONTAINER_USERNS_BASE + 1000);
	gp_executor_kill(ex, &id, GP_EXEC_CANCELLED);
	wait_done(id, &o);
	CHECK(has(&o, "1000\n1000\n"));
	/* uid 0 inside is the range's first id, never host root. */
	CHECK(has(&o, " 2147418112 "));
	CHECK(has(&o, "65536"));
	show("not_root", &o);
	free(o.output.data);
}

TEST(image_user)
{
	struct job_opts opts;
	struct outcome o;

	memset(&opts, 0, sizeof(opts));
	opts.user = "worker";
	o = run_opts("id -u; id -g", &opts);
	CHECK(has(&o, "2000\n2001\n"));
	show("user worker", &o);
	free(o.output.data);
	opts.user = "worker:staff";
	o = run_opts("id -u; id -g", &opts);
	CHECK(has(&o, "2000\n3000\n"));
	free(o.output.data);
	opts.user = "root";
	o = run_opts("id -u; id -g", &opts);
	CHECK(has(&o, "1000\n1000\n"));
	free(o.output.data);
	opts.user = "0:0";
	o = run_opts("id -u", &opts);
	CHECK(has(&o, "1000\n"));
	free(o.output.data);
	opts.user = "nosuchuser";
	o = run_opts("id -u", &opts);
	CHECK_STR(o.result.reason, "start_failed");
	CHECK(strstr(o.result.message, "nosuchuser") != NULL);
	free(o.output.data);
}

TEST(read_only_image_writable_scratch)
{
	char path[PATH_MAX + 64];
	struct outcome o;
	struct stat st;

	o = run("touch /bin/new && echo image-writable; "
	    "rm /bin/sh && echo image-removable; "
	    "echo x > /tmp/f && echo tmp-ok; echo y > /dev/shm/f && "
	    "echo shm-ok; echo z > in-work && echo work-ok; "
	    "dd if=/dev/zero of=/tmp/big bs=1M count=12; "
	    "grep ' / ' /proc/mounts; ls -ld /tmp /dev/shm; "
	    "grep -E ' /tmp | /dev/shm ' /proc/mounts");
	CHECK(!has(&o, "image-writable"));
	CHECK(!has(&o, "image-removable"));
	CHECK(has(&o, "tmp-ok") && has(&o, "shm-ok") && has(&o, "work-ok"));
	/* The scratch is bounded (8 MiB in this test). */
	CHECK(has(&o, "No space left on device"));
	CHECK(has(&o, " ro,") || has(&o, " ro "));
	/* The layer on the host is unchanged. */
	snprintf(path, sizeof(path), "%s/bin/new", layer);
	CHECK(access(path, F_OK) != 0);
	snprintf(path, sizeof(path), "%s/bin/sh", layer);
	CHECK(lstat(path, &st) == 0);
	show("read_only", &o);
	free(o.output.data);
}

TEST(no_privileges)
{
	struct outcome o = run("grep -E '^(Cap|NoNewPrivs)' /proc/self/status; "
	    "/bin/suid/busybox id -u; ls -ln /bin/suid/busybox; "
	    "cat /root/image-file || echo no-root-dir");

	CHECK(has(&o, "CapEff:\t0000000000000000"));
	CHECK(has(&o, "CapPrm:\t0000000000000000"));
	CHECK(has(&o, "CapBnd:\t0000000000000000"));
	CHECK(has(&o, "NoNewPrivs:\t1"));
	/* The setuid-root copy runs as the job, not as root. */
	CHECK(has(&o, "\n1000\n"));
	CHECK(has(&o, "no-root-dir"));
	show("no_privileges", &o);
	free(o.output.data);
}

TEST(host_homes_unseen)
{
	char secret[128], script[512];
	struct outcome o;

	snprintf(secret, sizeof(secret), "/root/gpupool-ctest-secret-%d",
	    (int)getpid());
	CHECK(write_text(secret, "TOPSECRET") == 0);
	snprintf(script, sizeof(script), "cat %s && echo READ\"\"ROOT; "
	    "ls /home; ls /root; echo done", secret);
	o = run(script);
	CHECK(has(&o, "done"));
	CHECK(!has(&o, "READROOT"));
	CHECK(!has(&o, "TOPSECRET"));
	unlink(secret);
	free(o.output.data);
}

TEST(limits)
{
	char path[PATH_MAX + 64], *data = NULL;
	struct gp_attempt_id id;
	struct job_opts opts;
	struct outcome o;
	size_t len;

	memset(&opts, 0, sizeof(opts));
	opts.mem_mib = 48;
	opts.cpus = 1;
	id = submit_opts("echo up; sleep 1000", &opts);
	wait_output(id, "up");
	snprintf(path, sizeof(path), "%s/%lld-1/memory.limit_in_bytes",
	    cgroups.memory, (long long)id.job_id);
	CHECK(gp_read_file(path, 4096, &data, &len) == 0);
	CHECK(data != NULL && atoll(data) == 48LL << 20);
	free(data);
	data = NULL;
	snprintf(path, sizeof(path), "%s/%lld-1/pids.max", cgroups.pids,
	    (long long)id.job_id);
	CHECK(gp_read_file(path, 4096, &data, &len) == 0);
	CHECK(data != NULL && atoi(data) == GP_CGROUP_PIDS_MAX);
	free(data);
	data = NULL;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/cpu/%s/cpu.cfs_quota_us",
	    strrchr(cgroups.memory, '/') + 1);
	snprintf(path + strlen(path) - strlen("/cpu.cfs_quota_us"),
	    sizeof(path) - strlen(path), "/%lld-1/cpu.cfs_quota_us",
	    (long long)id.job_id);
	CHECK(gp_read_file(path, 4096, &data, &len) == 0);
	CHECK(data != NULL && atoi(data) == 100000);
	free(data);
	gp_executor_kill(ex, &id, GP_EXEC_CANCELLED);
	wait_done(id, &o);
	free(o.output.data);
	/* The cgroups are gone with the job. */
	snprintf(path, sizeof(path), "%s/%lld-1", cgroups.memory,
	    (long long)id.job_id);
	CHECK(access(path, F_OK) != 0);
	/* Over the memory limit: the OOM killer ends the command. */
	o = run_opts("dd if=/dev/zero of=/dev/null bs=96M count=1; "
	    "echo status=$?", &opts);
	CHECK(has(&o, "status=137"));
	show("limits oom", &o);
	free(o.output.data);
}

TEST(other_jobs_unseen)
{
	char marker[64], script[16384];
	struct gp_attempt_id a;
	struct outcome o;

	snprintf(marker, sizeof(marker), "ctest-other-%d", (int)getpid());
	snprintf(script, sizeof(script), "echo secret > mine; echo up; "
	    "sleep 1000 # %s", marker);
	a = submit(script);
	wait_output(a, "up");
	snprintf(script, sizeof(script), "ps -o pid,args; "
	    "ls %s/jobs; cat %s/jobs/%lld-1/mine && echo READ\"\"OTHER",
	    work, work, (long long)a.job_id);
	o = run(script);
	CHECK(!has(&o, marker));
	CHECK(!has(&o, "READOTHER"));
	/* Only its own directory is there. */
	CHECK(has(&o, "-1\n"));
	show("other_jobs", &o);
	free(o.output.data);
	gp_executor_kill(ex, &a, GP_EXEC_CANCELLED);
	wait_done(a, &o);
	free(o.output.data);
}

TEST(cancel_time_limit)
{
	char marker[64], script[256];
	struct gp_attempt_id id;
	struct job_opts opts;
	struct outcome o;

	snprintf(marker, sizeof(marker), "ctest-cancel-%d", (int)getpid());
	snprintf(script, sizeof(script), "sh -c 'sleep 1000; true %s' & "
	    "echo up; wait", marker);
	id = submit(script);
	wait_output(id, "up");
	CHECK(marker_alive(marker));
	gp_executor_kill(ex, &id, GP_EXEC_CANCELLED);
	wait_done(id, &o);
	CHECK_STR(o.result.reason, "cancelled");
	CHECK(!marker_alive(marker));
	free(o.output.data);
	memset(&opts, 0, sizeof(opts));
	opts.time_limit_s = 1;
	o = run_opts("echo begin; sleep 1000", &opts);
	CHECK_STR(o.result.reason, "timeout");
	CHECK(has(&o, "begin"));
	free(o.output.data);
}

TEST(checkpoint_signal)
{
	struct gp_attempt_id id;
	struct outcome o;

	id = submit("trap 'echo got-usr1; exit 3' USR1; echo ready; "
	    "while :; do sleep 0.1; done");
	wait_output(id, "ready");
	gp_executor_signal(ex, &id, SIGUSR1);
	wait_done(id, &o);
	CHECK(has(&o, "got-usr1"));
	CHECK_STR(o.result.reason, "exited");
	CHECK_EQ(o.result.exit_code, 3);
	show("checkpoint_signal", &o);
	free(o.output.data);
	/* Without a handler the default action ends it (it is not pid 1). */
	id = submit("echo ready; sleep 1000");
	wait_output(id, "ready");
	gp_executor_signal(ex, &id, SIGTERM);
	wait_done(id, &o);
	CHECK_STR(o.result.reason, "killed");
	CHECK_EQ(o.result.signal, SIGTERM);
	free(o.output.data);
}

TEST(exec_failure)
{
	struct job_opts opts;
	struct gp_assignment a;
	struct outcome o;

	memset(&opts, 0, sizeof(opts));
	opts.entrypoint = strv("no-such-command-gpupool", NULL, NULL);
	opts.no_command = 1;
	o = run_opts(NULL, &opts);
	CHECK_STR(o.result.reason, "start_failed");
	CHECK_EQ(o.started, 0);
	CHECK(strstr(o.result.message, "exec no-such-command-gpupool: No such "
	    "file or directory") != NULL);
	show("exec_failure", &o);
	free(o.output.data);
	o = run("exit 127");
	CHECK_STR(o.result.reason, "exited");
	CHECK_EQ(o.result.exit_code, 127);
	free(o.output.data);
	(void)a;
}

TEST(mounts)
{
	struct gp_mount m[2];
	struct job_opts opts;
	char rw[PATH_MAX + 16];
	struct outcome o;

	snprintf(rw, sizeof(rw), "%s/rw", datadir);
	mkdir(rw, 0777);
	chmod(rw, 0777);
	memset(&opts, 0, sizeof(opts));
	m[0].source = datadir;
	m[0].target = "/data/set";
	m[0].read_only = 1;
	m[1].source = rw;
	m[1].target = "/out/rw";
	m[1].read_only = 0;
	opts.mounts = m;
	opts.nmounts = 2;
	o = run_opts("cat /data/set/file; touch /data/set/x && echo ro-broken; "
	    "echo w > /out/rw/w && echo rw-ok", &opts);
	CHECK(has(&o, "dataset-content"));
	CHECK(!has(&o, "ro-broken"));
	CHECK(has(&o, "rw-ok"));
	show("mounts", &o);
	free(o.output.data);
	/* A reserved target is refused before anything runs. */
	m[0].target = "/proc/x";
	opts.nmounts = 1;
	o = run_opts("true", &opts);
	CHECK_STR(o.result.reason, "start_failed");
	free(o.output.data);
}

static void
run_gpu_checks(int cdi)
{
	struct job_opts opts;
	struct outcome o;
	char hook[PATH_MAX + 16];

	memset(&opts, 0, sizeof(opts));
	opts.ngpus = 1;
	opts.gpu0 = 1;
	o = run_opts("ls /dev; cat /dev/nvidia1; cat /dev/nvidia0; "
	    "cat /opt/probe-nvidia0; echo cvd=$CUDA_VISIBLE_DEVICES; "
	    "echo common=$CDI_COMMON dev=$CDI_DEVICE; echo ld=$LD_LIBRARY_PATH; "
	    "ls /usr/lib/x86_64-linux-gnu/; nvidia-smi; echo end", &opts);
	CHECK(has(&o, "end"));
	/* The assigned GPU's node: the devices cgroup lets it through. */
	CHECK(has(&o, "nvidia1\n"));
	CHECK(has(&o, "/dev/nvidia1': No such device or address"));
	CHECK(has(&o, "nvidiactl\n"));
	/* The other GPU's node is absent... */
	CHECK(!has(&o, "nvidia0\n"));
	CHECK(has(&o, "/dev/nvidia0': No such file or directory"));
	CHECK(has(&o, "cvd=0\n"));
	if (cdi) {
		/* ...and denied by the devices cgroup when put there. */
		CHECK(has(&o, "/opt/probe-nvidia0': Operation not "
		    "permitted"));
		CHECK(has(&o, "common=yes dev=one\n"));
		CHECK(has(&o, "libcuda.so.999.1"));
		snprintf(hook, sizeof(hook), "%s/hook-ran", cdiroot);
		CHECK(access(hook, F_OK) == 0);
	} else {
		CHECK(has(&o, "libcuda.so.1"));
		CHECK(has(&o, "ld=/usr/lib/x86_64-linux-gnu"));
		CHECK(has(&o, "fake nvidia-smi"));
	}
	show(cdi ? "gpus cdi" : "gpus nvidia", &o);
	free(o.output.data);
	/* A job without GPUs gets no NVIDIA node at all. */
	memset(&opts, 0, sizeof(opts));
	o = run_opts("ls /dev; echo end", &opts);
	CHECK(has(&o, "end") && !has(&o, "nvidia"));
	free(o.output.data);
}

TEST(gpus_nvidia_discovered)
{
	run_gpu_checks(0);
}

TEST(gpus_cdi)
{
	run_gpu_checks(1);
}

TEST(runtime_failure_reported)
{
	struct outcome o;
	char path[PATH_MAX + 64];

	/* A CDI hook that fails makes the runtime fail before exec. */
	snprintf(path, sizeof(path), "%s/etc/cdi/zz-broken.json", cdiroot);
	CHECK(write_text(path, "{\"cdiVersion\": \"0.5.0\", \"kind\": "
	    "\"nvidia.com/gpu\", \"devices\": [{\"name\": \"GPU-fake-t-1\", "
	    "\"containerEdits\": {\"hooks\": [{\"hookName\": "
	    "\"createRuntime\", \"path\": \"/bin/false\"}]}}]}") == 0);
	/* A directory change is noticed at the next GPU job. */
	{
		struct job_opts opts;
		memset(&opts, 0, sizeof(opts));
		opts.ngpus = 1;
		opts.gpu0 = 1;
		o = run_opts("echo should-not-run", &opts);
	}
	unlink(path);
	CHECK_STR(o.result.reason, "start_failed");
	CHECK(strstr(o.result.message, "container runtime") != NULL);
	CHECK(!has(&o, "should-not-run"));
	show("runtime_failure", &o);
	free(o.output.data);
}

TEST(nothing_left_behind)
{
	char path[PATH_MAX + 64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	/* Each bundle was a tmpfs private to its runtime: the path is empty. */
	snprintf(path, sizeof(path), "%s/containers/bundle", work);
	d = opendir(path);
	CHECK(d != NULL);
	while (d != NULL && (de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	if (d != NULL)
		closedir(d);
	CHECK_EQ(n, 0);
	/* No mount of ours is left in the agent's namespace. */
	{
		char *mounts = NULL;
		size_t len;
		CHECK(gp_read_file("/proc/self/mountinfo", 1 << 20, &mounts,
		    &len) == 0);
		CHECK(mounts != NULL && strstr(mounts, work) == NULL);
		free(mounts);
	}
	snprintf(path, sizeof(path), "%s/containers/state", work);
	n = 0;
	d = opendir(path);
	while (d != NULL && (de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	if (d != NULL)
		closedir(d);
	CHECK_EQ(n, 0);
}

static int
start_executor(const char *runtime, const char *gpu_root)
{
	struct gp_container_options o;
	char err[1024];

	memset(&o, 0, sizeof(o));
	o.runtime = runtime;
	o.init_path = init_path;
	o.scratch_bytes = 8 << 20;
	o.fake_gpu_root = gpu_root;
	if (gp_containers_new(work, &o, &cgroups, gpus, 2, NULL, &containers,
	    err, sizeof(err)) != 0) {
		fprintf(stderr, "containers with %s: %s\n", runtime, err);
		return -1;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.user = &user;
	cfg.cgroups = &cgroups;
	cfg.work_dir = work;
	cfg.gpus = gpus;
	cfg.ngpus = 2;
	cfg.containers = containers;
	ex = gp_executor_new(&cfg, &events);
	return ex != NULL ? 0 : -1;
}

static void
stop_executor(void)
{
	gp_executor_free(ex);
	gp_containers_free(containers);
	ex = NULL;
	containers = NULL;
}

static int
have_runtime(const char *name)
{
	return access(name, X_OK) == 0;
}

int
main(void)
{
	static const char *runtimes[][2] = {
		{"crun", "/usr/bin/crun"}, {"runc", "/usr/sbin/runc"},
	};
	const char *build = getenv("GPUPOOL_BUILD");
	char err[256], path[PATH_MAX + 64];

	if (geteuid() != 0) {
		return unit_skip_all("root", "container jobs need root");
	}
	if (access("/bin/busybox", X_OK) != 0) {
		return unit_skip_all("busybox",
		    "no /bin/busybox (busybox-static)");
	}
	gp_log_init("test", GP_LOG_WARN);
	snprintf(init_path, sizeof(init_path), "%s/gpupool-init",
	    build != NULL ? build : "build");
	if (access(init_path, X_OK) != 0) {
		fprintf(stderr, "no %s (run from the source tree, or set "
		    "GPUPOOL_BUILD)\n", init_path);
		return 1;
	}
	if (realpath(init_path, path) != NULL)
		gp_strlcpy(init_path, path, sizeof(init_path));
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	chmod(dir, 0711);
	snprintf(work, sizeof(work), "%s/work", dir);
	snprintf(layer, sizeof(layer), "%s/layer", dir);
	snprintf(fakeroot, sizeof(fakeroot), "%s/fake-nvidia", dir);
	snprintf(cdiroot, sizeof(cdiroot), "%s/fake-cdi", dir);
	snprintf(datadir, sizeof(datadir), "%s/data", dir);
	mkdir(work, 0711);
	mkdir(datadir, 0755);
	snprintf(path, sizeof(path), "%s/file", datadir);
	if (write_text(path, "dataset-content\n") != 0 || build_layer() != 0 ||
	    build_fake_nvidia(fakeroot) != 0 || build_fake_nvidia(cdiroot) ||
	    build_cdi(cdiroot) != 0) {
		fprintf(stderr, "cannot build the test image or fake hosts\n");
		return 1;
	}
	if (gp_sandbox_user_init(NULL, &user, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	gp_cgroup_set_scope("ctest");
	gp_cgroup_init(&cgroups);
	for (size_t r = 0; r < GP_ARRAY_LEN(runtimes); r++) {
		if (!have_runtime(runtimes[r][1])) {
			unit_skip_some(runtimes[r][0], runtimes[r][1]);
			continue;
		}
		runtime_name = runtimes[r][0];
		printf("== %s\n", runtime_name);
		if (start_executor(runtime_name, fakeroot) != 0) {
			CHECK(0);
			continue;
		}
		RUN(output_exit_code_env);
		RUN(entrypoint_and_cmd);
		RUN(not_root_inside_or_outside);
		RUN(image_user);
		RUN(read_only_image_writable_scratch);
		RUN(no_privileges);
		RUN(host_homes_unseen);
		RUN(limits);
		RUN(other_jobs_unseen);
		RUN(cancel_time_limit);
		RUN(checkpoint_signal);
		RUN(exec_failure);
		RUN(mounts);
		RUN(gpus_nvidia_discovered);
		stop_executor();
		if (start_executor(runtime_name, cdiroot) != 0) {
			CHECK(0);
			continue;
		}
		RUN(gpus_cdi);
		RUN(runtime_failure_reported);
		stop_executor();
		RUN(nothing_left_behind);
	}
	gp_cgroup_fini(&cgroups);
	for (int i = 0; i < noutcomes; i++)
		gp_buf_free(&outcomes[i].output);
	gp_remove_tree(dir);
	return unit_report();
}
