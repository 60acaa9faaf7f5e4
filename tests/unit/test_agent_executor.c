/*
 * test_agent_executor.c: runs real sandboxed jobs through the executor
 * (as root, the jobs run as "nobody") and checks what the sandbox
 * promises: not root, read-only /, writable work directory, private /tmp,
 * own pid namespace, GPU variables, exit codes, killing a whole job tree,
 * time limits, exec failures, the checkpoint signal; and the escapes the
 * sandbox closes: the provider's home directories and secrets, other
 * jobs' files, setuid binaries, capabilities; and the job's mounts, also
 * where the host has no mount point (nothing is made on the host). Skips
 * (SKIP, tests/unit/unit.h) when not root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/executor.h"
#include "agent/spawner.h"
#include "gp.h"
#include "log.h"
#include "exec_outcomes.h"
#include "unit.h"
#include "util.h"

static struct gp_executor *ex;
static struct gp_spawner *spawner;
static struct gp_sandbox_user user;
static struct gp_cgroups cgroups;
static struct gp_gpu_info gpus[2] = {
	{0, "GPU-fake-t-0", "Fake GPU", 16384, 0, 0, 0},
	{1, "GPU-fake-t-1", "Fake GPU", 16384, 0, 0, 0},
};
static char work[] = "/var/tmp/gpupool-test-XXXXXX";
static char token_file[PATH_MAX + 32];
static char extra[PATH_MAX];	/* test files outside the agent's directory */
static int next_id = 1;

static const struct gp_mount *next_mounts;
static int next_nmounts;
/* The next submit's share and gang fields (then cleared). */
static struct gp_assignment next_extra;
static const char *next_expose;	/* a path the owner exposes, read-only */

/* Submits sh -c script; returns the attempt id. */
static struct gp_attempt_id
submit(const char *script, int ngpus, int64_t time_limit_s)
{
	struct gp_assignment a;

	memset(&a, 0, sizeof(a));
	a.id.job_id = next_id++;
	a.id.attempt = 1;
	a.argv = calloc(4, sizeof(char *));
	a.argv[0] = strdup("sh");
	a.argv[1] = strdup("-c");
	a.argv[2] = strdup(script);
	a.argc = 3;
	a.env = calloc(2, sizeof(char *));
	a.env[0] = strdup("GREETING=hello");
	a.nenv = 1;
	for (int i = 0; i < ngpus; i++)
		a.gpus[a.ngpus++] = i;
	a.time_limit_s = time_limit_s;
	if (next_nmounts > 0) {
		a.mounts = calloc((size_t)next_nmounts, sizeof(*a.mounts));
		for (int i = 0; i < next_nmounts; i++) {
			a.mounts[i].source = strdup(next_mounts[i].source);
			a.mounts[i].target = strdup(next_mounts[i].target);
			a.mounts[i].read_only = next_mounts[i].read_only;
		}
		a.nmounts = next_nmounts;
	}
	if (next_expose != NULL) {
		a.expose = calloc(1, sizeof(*a.expose));
		a.expose[0].source = a.expose[0].target = strdup(next_expose);
		a.expose[0].read_only = 1;
		a.nexpose = 1;
	}
	a.mem_mib = next_extra.mem_mib;
	a.gpu_milli = next_extra.gpu_milli;
	a.gpu_mem_mib = next_extra.gpu_mem_mib;
	a.part = next_extra.part;
	a.parts = next_extra.parts;
	a.gpus_per_node = next_extra.gpus_per_node;
	a.master_port = next_extra.master_port;
	memcpy(a.master_addr, next_extra.master_addr, sizeof(a.master_addr));
	memset(&next_extra, 0, sizeof(next_extra));
	CHECK_EQ(gp_executor_start(ex, &a), 0);
	return (struct gp_attempt_id){next_id - 1, 1};
}

static struct outcome
run(const char *script, int ngpus, int64_t time_limit_s)
{
	struct outcome o;

	wait_done(submit(script, ngpus, time_limit_s), &o);
	return o;
}

static int
has(const struct outcome *o, const char *text)
{
	return strstr(o->output.data, text) != NULL;
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

TEST(homes_and_secrets_hidden)
{
	char root_secret[128], home[128], home_secret[192], script[8192];
	struct outcome o;

	snprintf(root_secret, sizeof(root_secret), "/root/gpupool-test-%d",
	    (int)getpid());
	snprintf(home, sizeof(home), "/home/gpupool-test-%d", (int)getpid());
	snprintf(home_secret, sizeof(home_secret), "%s/secret", home);
	mkdir(home, 0755);
	CHECK(write_text(root_secret, "TOPSECRET-root") == 0);
	CHECK(write_text(home_secret, "TOPSECRET-home") == 0);
	/* World-readable, so that only hiding keeps them from the job. */
	chmod(root_secret, 0644);
	chmod(home_secret, 0644);
	chmod("/root", 0755);
	snprintf(script, sizeof(script), "cat %s; cat %s; cat %s; ls -A /home "
	    "/root 2>/dev/null | wc -l; echo done", root_secret, home_secret,
	    token_file);
	o = run(script, 0, 0);
	chmod("/root", 0700);
	CHECK(has(&o, "done"));
	CHECK(!has(&o, "TOPSECRET"));
	/* /home and /root are not in the job's minimal root at all. */
	CHECK(has(&o, "\n0\n"));
	unlink(root_secret);
	unlink(home_secret);
	rmdir(home);
	free(o.output.data);
}

TEST(other_jobs_hidden)
{
	char script[1024];
	struct gp_attempt_id a;
	struct outcome o;

	a = submit("echo TOPSECRET-job > mine; chmod 644 mine; echo up; "
	    "sleep 1000", 0, 0);
	wait_output(a, "up");
	snprintf(script, sizeof(script), "cat %s/jobs/%lld-1/mine; "
	    "ls -d %s/jobs/*; ps -e -o args", work, (long long)a.job_id, work);
	o = run(script, 0, 0);
	/* Its directory is not there (an empty tmpfs but for our own). */
	CHECK(!has(&o, "TOPSECRET"));
	CHECK(has(&o, "-1/mine: No such file or directory"));
	/* Nor are its processes. */
	CHECK(!has(&o, "sleep 1000"));
	if (unit_failed_checks > 0)
		fprintf(stderr, "other_jobs: %s\n", o.output.data);
	free(o.output.data);
	gp_executor_kill(ex, &a, GP_EXEC_CANCELLED);
	wait_done(a, &o);
	free(o.output.data);
}

TEST(no_privileges)
{
	char suid[PATH_MAX + 32], script[PATH_MAX + 512];
	struct outcome o;

	/* A setuid-root binary on the host, runnable by anyone. */
	snprintf(suid, sizeof(suid), "%s/suid", extra);
	mkdir(suid, 0755);
	snprintf(script, sizeof(script), "cp /bin/busybox %s/busybox", suid);
	CHECK(system(script) == 0);
	snprintf(suid, sizeof(suid), "%s/suid/busybox", extra);
	CHECK(chown(suid, 0, 0) == 0 && chmod(suid, 04755) == 0);
	snprintf(script, sizeof(script), "%s id -u; grep -E "
	    "'^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; "
	    "grep ' / / ' /proc/self/mountinfo", suid);
	/* Exposed by the owner (else the job would not see it at all). */
	snprintf(suid, sizeof(suid), "%s/suid", extra);
	next_expose = suid;
	o = run(script, 0, 0);
	next_expose = NULL;
	CHECK(!has(&o, "\n0\n") && strncmp(o.output.data, "0\n", 2) != 0);
	CHECK(atoi(o.output.data) == (int)user.uid);
	CHECK(has(&o, "CapEff:\t0000000000000000"));
	CHECK(has(&o, "CapBnd:\t0000000000000000"));
	CHECK(has(&o, "NoNewPrivs:\t1"));
	CHECK(has(&o, "nosuid"));
	free(o.output.data);
}

TEST(checkpoint_signal)
{
	struct gp_attempt_id id;
	struct outcome o;

	id = submit("trap 'echo got-usr1; exit 3' USR1; echo ready; "
	    "while :; do sleep 0.1; done", 0, 0);
	wait_output(id, "ready");
	gp_executor_signal(ex, &id, SIGUSR1);
	wait_done(id, &o);
	CHECK(has(&o, "got-usr1"));
	CHECK_EQ(o.result.exit_code, 3);
	free(o.output.data);
}

TEST(mounts)
{
	char data[PATH_MAX + 16], file[PATH_MAX + 32], rw[PATH_MAX + 16];
	char here[PATH_MAX + 16], missing[128], script[16384];
	struct gp_mount m[5];
	struct outcome o;

	snprintf(data, sizeof(data), "%s/data", extra);
	snprintf(file, sizeof(file), "%s/data/file", extra);
	snprintf(rw, sizeof(rw), "%s/rw", extra);
	snprintf(here, sizeof(here), "%s/target-here", extra);
	snprintf(missing, sizeof(missing), "/gpupool-test-%d", (int)getpid());
	mkdir(data, 0755);
	mkdir(rw, 0777);
	chmod(rw, 0777);
	mkdir(here, 0755);
	CHECK(write_text(file, "dataset-content\n") == 0);
	chmod(file, 0644);
	/* The host has no /gpupool-test-N: made in a tmpfs shadow of /. */
	m[0] = (struct gp_mount){data, NULL, 1};
	snprintf(script, sizeof(script), "%s/set", missing);
	m[0].target = strdup(script);
	m[1] = (struct gp_mount){rw, "/mnt/gpupool-test-rw", 0};
	m[2] = (struct gp_mount){file, "/tmp/in-tmp/file", 1};
	m[3] = (struct gp_mount){data, here, 1};
	m[4] = (struct gp_mount){file, "/etc/gpupool-test-file", 1};
	next_mounts = m;
	next_nmounts = 5;
	snprintf(script, sizeof(script), "cat %s/set/file; touch %s/set/x && "
	    "echo RO-BROKEN; echo w > /mnt/gpupool-test-rw/w && echo rw-ok; "
	    "cat /tmp/in-tmp/file; cat %s/file; cat /etc/gpupool-test-file; "
	    "ls / | grep -c gpupool-test; echo done", missing, missing, here);
	o = run(script, 0, 0);
	next_nmounts = 0;
	CHECK(has(&o, "done"));
	CHECK(!has(&o, "RO-BROKEN"));
	CHECK(has(&o, "rw-ok"));
	{
		int n = 0;
		for (const char *p = o.output.data;
		    (p = strstr(p, "dataset-content")) != NULL; p++)
			n++;
		CHECK_EQ(n, 4);
	}
	/* Nothing was made on the host. */
	CHECK(access(missing, F_OK) != 0);
	CHECK(access("/mnt/gpupool-test-rw", F_OK) != 0);
	CHECK(access("/etc/gpupool-test-file", F_OK) != 0);
	snprintf(script, sizeof(script), "%s/w", rw);
	CHECK(access(script, F_OK) == 0);
	if (unit_failed_checks > 0)
		fprintf(stderr, "mounts: %s %s\n", o.result.message,
		    o.output.data);
	free(o.output.data);
	free((char *)m[0].target);
	/* A reserved target is refused. */
	m[0] = (struct gp_mount){data, "/proc/x", 1};
	next_mounts = m;
	next_nmounts = 1;
	o = run("true", 0, 0);
	next_nmounts = 0;
	CHECK_STR(o.result.reason, "start_failed");
	free(o.output.data);
}

TEST(exit_code_and_output)
{
	struct outcome o = run("echo out; echo err >&2; echo $GREETING; "
	    "exit 7", 0, 0);

	CHECK_EQ(o.started, 1);
	CHECK_STR(o.result.reason, "exited");
	CHECK_EQ(o.result.exit_code, 7);
	CHECK(strstr(o.output.data, "out\n") != NULL);
	CHECK(strstr(o.output.data, "err\n") != NULL);
	CHECK(strstr(o.output.data, "hello\n") != NULL);
	free(o.output.data);
}

TEST(not_root)
{
	struct outcome o = run("id -u", 0, 0);

	CHECK_STR(o.result.reason, "exited");
	CHECK(strcmp(o.output.data, "0\n") != 0);
	CHECK_EQ(atoi(o.output.data), (int)user.uid);
	free(o.output.data);
}

TEST(root_read_only)
{
	struct outcome o = run("touch /etc/gpupool-x && echo writable; "
	    "touch /usr/gpupool-x && echo writable; echo x > /dev/null && "
	    "echo devnull-ok", 0, 0);

	CHECK(strstr(o.output.data, "writable") == NULL);
	CHECK(strstr(o.output.data, "devnull-ok") != NULL);
	CHECK(access("/etc/gpupool-x", F_OK) != 0);
	free(o.output.data);
}

TEST(workdir_writable)
{
	struct outcome o = run("echo data > f && cat f && pwd && "
	    "echo $HOME", 0, 0);

	CHECK_STR(o.result.reason, "exited");
	CHECK_EQ(o.result.exit_code, 0);
	CHECK(strstr(o.output.data, "data\n") != NULL);
	CHECK(strstr(o.output.data, "/jobs/") != NULL);
	free(o.output.data);
}

TEST(tmp_private)
{
	char marker[64], script[256];
	struct outcome o;
	int fd;

	snprintf(marker, sizeof(marker), "/tmp/gpupool-marker-%d",
	    (int)getpid());
	fd = open(marker, O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0);
	close(fd);
	snprintf(script, sizeof(script), "test -e %s && echo visible; "
	    "echo x > /tmp/inside && echo tmp-writable; ls -A /tmp", marker);
	o = run(script, 0, 0);
	CHECK(strstr(o.output.data, "visible") == NULL);
	CHECK(strstr(o.output.data, "tmp-writable") != NULL);
	CHECK(access("/tmp/inside", F_OK) != 0);
	unlink(marker);
	free(o.output.data);
}

TEST(pid_namespace)
{
	char script[256];
	struct outcome o;

	snprintf(script, sizeof(script), "echo pid=$$; test -d /proc/%d && "
	    "echo sees-agent; hostname", (int)getpid());
	o = run(script, 0, 0);
	CHECK(strstr(o.output.data, "pid=2\n") != NULL);
	CHECK(strstr(o.output.data, "sees-agent") == NULL);
	CHECK(strstr(o.output.data, "gpupool-job") != NULL);
	free(o.output.data);
}

TEST(gpu_env)
{
	struct outcome o = run("echo cvd=$CUDA_VISIBLE_DEVICES "
	    "id=$GPUPOOL_JOB_ID att=$GPUPOOL_ATTEMPT g=$GPUPOOL_GPUS", 2, 0);

	CHECK(strstr(o.output.data, "cvd=0,1 ") != NULL);
	CHECK(strstr(o.output.data, "att=1 g=0,1") != NULL);
	free(o.output.data);
	o = run("echo cvd=[$CUDA_VISIBLE_DEVICES]", 0, 0);
	CHECK(strstr(o.output.data, "cvd=[]") != NULL);
	free(o.output.data);
}

TEST(share_and_gang_env)
{
	struct outcome o;

	next_extra.gpu_milli = 500;
	o = run("echo cvd=$CUDA_VISIBLE_DEVICES share=$GPUPOOL_GPU_SHARE "
	        "mem=$GPUPOOL_GPU_MEM_MIB ws=[$WORLD_SIZE]", 1, 0);
	CHECK(strstr(o.output.data, "cvd=0 share=0.500 mem=8192 ws=[]") !=
	    NULL);
	free(o.output.data);
	next_extra.gpu_mem_mib = 4096;
	o = run("echo share=$GPUPOOL_GPU_SHARE mem=$GPUPOOL_GPU_MEM_MIB", 1, 0);
	CHECK(strstr(o.output.data, "share=0.250 mem=4096") != NULL);
	free(o.output.data);
	o = run("echo share=[$GPUPOOL_GPU_SHARE]", 1, 0);
	CHECK(strstr(o.output.data, "share=[]") != NULL);
	free(o.output.data);
	next_extra.part = 2;
	next_extra.parts = 3;
	next_extra.gpus_per_node = 2;
	next_extra.master_port = 29517;
	gp_strlcpy(next_extra.master_addr, "10.1.2.3",
	    sizeof(next_extra.master_addr));
	o = run("echo $MASTER_ADDR:$MASTER_PORT ws=$WORLD_SIZE r=$RANK "
	        "lr=$LOCAL_RANK nr=$NODE_RANK n=$GPUPOOL_NNODES "
	        "g=$GPUPOOL_GPUS_PER_NODE", 2, 0);
	CHECK(strstr(o.output.data, "10.1.2.3:29517 ws=3 r=2 lr=0 nr=2 n=3 g=2") !=
	    NULL);
	free(o.output.data);
}

TEST(cancel_kills_tree)
{
	char marker[64], script[256];
	struct gp_attempt_id id;
	struct outcome o;

	snprintf(marker, sizeof(marker), "gpupool-marker-%d-bg",
	    (int)getpid());
	snprintf(script, sizeof(script), "sh -c 'sleep 1000; true %s' & "
	    "echo up; wait", marker);
	id = submit(script, 0, 0);
	wait_output(id, "up");
	CHECK(marker_alive(marker));
	gp_executor_kill(ex, &id, GP_EXEC_CANCELLED);
	wait_done(id, &o);
	CHECK_STR(o.result.reason, "cancelled");
	CHECK(!marker_alive(marker));
	free(o.output.data);
}

TEST(time_limit)
{
	struct outcome o = run("echo begin; sleep 1000", 0, 1);

	CHECK_STR(o.result.reason, "timeout");
	CHECK(strstr(o.output.data, "begin") != NULL);
	free(o.output.data);
}

TEST(exec_failure)
{
	struct gp_assignment a;
	struct gp_attempt_id id;
	struct outcome o;

	memset(&a, 0, sizeof(a));
	id.job_id = a.id.job_id = next_id++;
	id.attempt = a.id.attempt = 1;
	a.argv = calloc(2, sizeof(char *));
	a.argv[0] = strdup("no-such-command-gpupool");
	a.argc = 1;
	CHECK_EQ(gp_executor_start(ex, &a), 0);
	wait_done(id, &o);
	CHECK_STR(o.result.reason, "start_failed");
	CHECK_EQ(o.started, 0);
	CHECK(strstr(o.result.message, "exec no-such-command-gpupool: No such "
	    "file or directory") != NULL);
	free(o.output.data);
	/* A command that exits 127 by itself is not a start failure. */
	o = run("exit 127", 0, 0);
	CHECK_STR(o.result.reason, "exited");
	CHECK_EQ(o.result.exit_code, 127);
	free(o.output.data);
}

TEST(bad_gpu_index)
{
	struct gp_assignment a;
	struct gp_attempt_id id;
	struct outcome o;

	memset(&a, 0, sizeof(a));
	id.job_id = a.id.job_id = next_id++;
	id.attempt = a.id.attempt = 1;
	a.argv = calloc(2, sizeof(char *));
	a.argv[0] = strdup("true");
	a.argc = 1;
	a.gpus[0] = 5;
	a.ngpus = 1;
	CHECK_EQ(gp_executor_start(ex, &a), 0);
	wait_done(id, &o);
	CHECK_STR(o.result.reason, "start_failed");
	free(o.output.data);
}

TEST(workdir_removed)
{
	char path[PATH_MAX];
	struct outcome o = run("echo hi > f", 0, 0);

	snprintf(path, sizeof(path), "%s/jobs/%lld-1", work,
	    (long long)o.id.job_id);
	CHECK(access(path, F_OK) != 0);
	free(o.output.data);
}

TEST(many_jobs)
{
	struct gp_attempt_id ids[16];
	struct outcome o;
	int i;

	for (i = 0; i < 16; i++)
		ids[i] = submit("true", 0, 0);
	for (i = 0; i < 16; i++) {
		wait_done(ids[i], &o);
		CHECK_STR(o.result.reason, "exited");
		CHECK_EQ(o.result.exit_code, 0);
		free(o.output.data);
	}
}

static const struct gp_exec_config *base_cfg;

/*
 * Runs jobs of mem_mib 64, 96 and 0 (no limit) on the current executor;
 * each prints its cgroups (v1) and their limits, which must be its own
 * (named after the job) and the job's, seen by the command itself.
 */
static void
check_limits(void)
{
	static const char script[] =
	    "m=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); "
	    "p=$(sed -n 's/^[0-9]*:pids://p' /proc/self/cgroup); "
	    "echo \"mem=$m\"; echo \"pids=$p\"; "
	    "echo \"limit=$(cat /sys/fs/cgroup/memory$m/memory.limit_in_bytes)\"; "
	    "echo \"pmax=$(cat /sys/fs/cgroup/pids$p/pids.max)\"";
	const int64_t mems[] = {64, 96, 0};
	const char *mrel = strrchr(cgroups.memory, '/');
	const char *prel = strrchr(cgroups.pids, '/');
	char want[PATH_MAX + 64];
	struct gp_attempt_id id;
	struct outcome o;
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(mems); i++) {
		next_extra.mem_mib = mems[i];
		id = submit(script, 0, 0);
		wait_done(id, &o);
		CHECK_STR(o.result.reason, "exited");
		snprintf(want, sizeof(want), "mem=%s/%lld-1\n", mrel,
		    (long long)id.job_id);
		CHECK(has(&o, want));
		snprintf(want, sizeof(want), "pids=%s/%lld-1\n", prel,
		    (long long)id.job_id);
		CHECK(has(&o, want));
		if (mems[i] > 0) {
			snprintf(want, sizeof(want), "limit=%lld\n",
			    (long long)mems[i] * 1048576);
			CHECK(has(&o, want));
		} else
			/* The kernel's "no limit": 2^63 rounded to pages. */
			CHECK(has(&o, "limit=92233720368547"));
		CHECK(has(&o, "pmax=4096\n"));
		if (unit_failed_checks > 0)
			fprintf(stderr, "output: %s\n", o.output.data);
		free(o.output.data);
		/* Removed after the report: a bounded wait, then gone. */
		snprintf(want, sizeof(want), "%s/%lld-1", cgroups.memory,
		    (long long)id.job_id);
		for (int k = 0; k < 500 && access(want, F_OK) == 0; k++)
			usleep(10000);
		CHECK(access(want, F_OK) != 0);
	}
}

/* Started from a warm sandbox: still in its own cgroups, with its limits. */
TEST(warm_limits)
{
	unsigned long before = gp_executor_warm_starts(ex);

	if (cgroups.mode != GP_CGROUP_V1 || cgroups.memory[0] == '\0' ||
	    cgroups.pids[0] == '\0') {
		UNIT_SKIP("cgroup-v1", "the limits are checked in v1 memory "
		    "and pids");
		return;
	}
	check_limits();
	/* The warm sandbox is made between jobs: all three used one. */
	CHECK_EQ(gp_executor_warm_starts(ex) - before, 3);
}

/* The same, each job cloned when it comes (no warm sandbox). */
TEST(cold_limits)
{
	struct gp_executor *warm_ex = ex;
	struct gp_exec_config cfg = *base_cfg;

	if (cgroups.mode != GP_CGROUP_V1 || cgroups.memory[0] == '\0' ||
	    cgroups.pids[0] == '\0') {
		UNIT_SKIP("cgroup-v1", "the limits are checked in v1 memory "
		    "and pids");
		return;
	}
	cfg.no_warm = 1;
	CHECK((ex = gp_executor_new(&cfg, &events)) != NULL);
	if (ex != NULL) {
		check_limits();
		CHECK_EQ(gp_executor_warm_starts(ex), 0);
		gp_executor_free(ex);
	}
	ex = warm_ex;
}

/* The job's init (pid 1 of its namespace): its RssAnon in KiB, or -1. */
static long
init_rss_anon_kib(void)
{
	struct outcome o = run("grep RssAnon: /proc/1/status", 0, 0);
	const char *p;
	long kib = -1;

	if (o.output.data != NULL &&
	    (p = strstr(o.output.data, "RssAnon:")) != NULL)
		sscanf(p, "RssAnon: %ld", &kib);
	free(o.output.data);
	return kib;
}

/*
 * A job's start copies nothing of the agent's memory: with a big touched
 * heap here, init (warm or cloned when the job comes) is small when the
 * spawn helper clones it, and as big as this process when the executor's
 * thread does (which shows that the check sees a copy).
 */
#define BLOAT_MIB 96
TEST(start_copies_no_agent_memory)
{
	struct gp_executor *saved = ex;
	struct gp_exec_config cfg = *base_cfg;
	size_t len = (size_t)BLOAT_MIB << 20, i;
	char *heap = malloc(len);
	long kib;
	int no_warm;

	/* The suite's executor always has its helper: none is a failure. */
	CHECK(heap != NULL && cfg.spawner != NULL);
	if (heap == NULL || cfg.spawner == NULL) {
		free(heap);
		return;
	}
	for (i = 0; i < len; i += 4096)
		heap[i] = 1;
	for (no_warm = 0; no_warm <= 1; no_warm++) {
		cfg.no_warm = no_warm;
		CHECK((ex = gp_executor_new(&cfg, &events)) != NULL);
		if (ex == NULL)
			break;
		/* Twice: the second from a warm sandbox made after the heap. */
		(void)init_rss_anon_kib();
		kib = init_rss_anon_kib();
		CHECK(kib >= 0 && kib < BLOAT_MIB * 1024 / 4);
		if (!(kib >= 0 && kib < BLOAT_MIB * 1024 / 4))
			fprintf(stderr, "  init RssAnon %ld KiB no_warm=%d\n",
			    kib, no_warm);
		gp_executor_free(ex);
	}
	cfg.no_warm = 0;
	cfg.spawner = NULL;
	CHECK((ex = gp_executor_new(&cfg, &events)) != NULL);
	if (ex != NULL) {
		(void)init_rss_anon_kib();
		kib = init_rss_anon_kib();
		CHECK(kib >= BLOAT_MIB * 1024 * 3 / 4);
		gp_executor_free(ex);
	}
	ex = saved;
	free(heap);
}

/* A helper that is gone: jobs are cloned from here, and still run. */
TEST(spawner_gone)
{
	struct gp_executor *saved = ex;
	struct gp_exec_config cfg = *base_cfg;
	struct gp_spawner *gone;
	struct outcome o;
	char err[256];

	CHECK((gone = gp_spawner_start(err, sizeof(err))) != NULL);
	if (gone == NULL)
		return;
	kill(gp_spawner_pid(gone), SIGKILL);
	cfg.spawner = gone;
	for (cfg.no_warm = 0; cfg.no_warm <= 1; cfg.no_warm++) {
		CHECK((ex = gp_executor_new(&cfg, &events)) != NULL);
		if (ex == NULL)
			break;
		o = run("echo still-runs", 0, 0);
		CHECK(o.output.data != NULL &&
		    strstr(o.output.data, "still-runs") != NULL);
		free(o.output.data);
		gp_executor_free(ex);
	}
	ex = saved;
	gp_spawner_free(gone);
}

/* 1 when the directory has an entry whose name starts with prefix. */
static int
has_entry(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int found = 0;

	while (d != NULL && (de = readdir(d)) != NULL)
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			found = 1;
	if (d != NULL)
		closedir(d);
	return found;
}

int
main(void)
{
	struct gp_exec_config cfg;
	char err[256];

	if (geteuid() != 0) {
		return unit_skip_all("root", "the sandbox needs root");
	}
	gp_log_init("test", GP_LOG_WARN);
	/* Before any thread: every job's init is cloned from it. */
	if ((spawner = gp_spawner_start(err, sizeof(err))) == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (mkdtemp(work) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	if (gp_sandbox_user_init(NULL, &user, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	/* gpupool-unit-<pid>: never shared with another run of this test. */
	gp_cgroup_set_scope("unit");
	gp_cgroup_init(&cgroups);
	memset(&cfg, 0, sizeof(cfg));
	cfg.user = &user;
	cfg.cgroups = &cgroups;
	cfg.work_dir = work;
	cfg.gpus = gpus;
	cfg.ngpus = 2;
	cfg.spawner = spawner;
	snprintf(extra, sizeof(extra), "%s.extra", work);
	mkdir(extra, 0755);
	snprintf(token_file, sizeof(token_file), "%s/agent.token", extra);
	if (write_text(token_file, "TOPSECRET-token\n") != 0)
		return 1;
	chmod(token_file, 0644);
	{
		static char *hidden[2];
		hidden[0] = token_file;
		cfg.hidden_paths = hidden;
	}
	ex = gp_executor_new(&cfg, &events);
	if (ex == NULL)
		return 1;
	RUN(exit_code_and_output);
	RUN(not_root);
	RUN(root_read_only);
	RUN(workdir_writable);
	RUN(tmp_private);
	RUN(pid_namespace);
	RUN(gpu_env);
	RUN(share_and_gang_env);
	RUN(cancel_kills_tree);
	RUN(time_limit);
	RUN(exec_failure);
	RUN(bad_gpu_index);
	RUN(workdir_removed);
	RUN(many_jobs);
	RUN(homes_and_secrets_hidden);
	RUN(other_jobs_hidden);
	RUN(no_privileges);
	RUN(checkpoint_signal);
	RUN(mounts);
	base_cfg = &cfg;
	RUN(warm_limits);
	RUN(cold_limits);
	RUN(start_copies_no_agent_memory);
	RUN(spawner_gone);
	gp_executor_free(ex);
	gp_spawner_free(spawner);
	/* The executor's stop discards its warm sandbox and its cgroup. */
	if (cgroups.mode == GP_CGROUP_V1 && cgroups.memory[0] != '\0' &&
	    has_entry(cgroups.memory, "warm-")) {
		fprintf(stderr, "a warm sandbox's cgroup outlived its "
		    "executor in %s\n", cgroups.memory);
		unit_failed++;
	}
	gp_cgroup_fini(&cgroups);
	for (int i = 0; i < noutcomes; i++)
		gp_buf_free(&outcomes[i].output);
	gp_remove_tree(work);
	gp_remove_tree(extra);
	return unit_report();
}
