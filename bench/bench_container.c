/*
 * bench_container.c: what the container executor adds to a job's start
 * over the OCI runtime's own `run` of the same bundle (issue 4's target:
 * at most 15 ms). Both sides run busybox's `echo` from a busybox-static
 * image layer, interleaved, N times each:
 *
 *   runtime: `RUNTIME --root STATE run --bundle B ID` of a bundle made
 *            once (config.json from the same builder, the layer as its
 *            root), started through gp_oci_spawn with no root to attach
 *            (the private mount namespace crun needs on a cgroup v1/v2
 *            hybrid host), the process being echo itself;
 *   executor: gp_executor_start of an assignment with the image, through
 *            everything a job gets (overlay root, mount points, bundle,
 *            config.json, gpupool-init forking echo, the reports).
 *
 * Measured: from the start call to the first byte of the job's output
 * (its first instructions ran), and to the end (the process reaped, and
 * for the executor the job cleaned up and reported). Prints "metric value
 * unit" lines (medians and p90 in ms). Root only.
 *
 * Usage: bench_container [--runtime auto|crun|runc] [-n N]
 *            [--init PATH] [--layer DIR]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/container.h"
#include "agent/executor.h"
#include "agent/oci.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int64_t t_output, t_finished;
static const char *finish_reason;

static void
on_started(void *arg, const struct gp_attempt_id *id, pid_t pid)
{
	(void)arg;
	(void)id;
	(void)pid;
}

static void
on_output(void *arg, const struct gp_attempt_id *id, const char *data,
    size_t len)
{
	(void)arg;
	(void)id;
	(void)data;
	(void)len;
	pthread_mutex_lock(&lock);
	if (t_output == 0)
		t_output = gp_mono_us();
	pthread_mutex_unlock(&lock);
}

static void
on_finished(void *arg, const struct gp_attempt_id *id,
    const struct gp_exec_result *r)
{
	(void)arg;
	(void)id;
	pthread_mutex_lock(&lock);
	t_finished = gp_mono_us();
	finish_reason = r->reason;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static const struct gp_exec_events events = {
	.started = on_started, .output = on_output, .finished = on_finished,
};

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(double), cmp);
	return v[(int)(p * (n - 1) + 0.5)];
}

static char **
strv2(const char *a, const char *b)
{
	char **v = calloc(3, sizeof(char *));

	v[0] = strdup(a);
	v[1] = b ? strdup(b) : NULL;
	return v;
}

/* One executor run; OUT: ms to first output and to the end. */
static int
run_executor(struct gp_executor *ex, const char *layer, int id,
    double *first, double *end)
{
	struct gp_container_image *img = calloc(1, sizeof(*img));
	struct gp_assignment a;
	int64_t t0;

	img->digest = strdup("sha256:bench");
	img->layers = strv2(layer, NULL);
	img->env = strv2("PATH=/bin", NULL);
	memset(&a, 0, sizeof(a));
	a.id.job_id = id;
	a.id.attempt = 1;
	a.argv = calloc(3, sizeof(char *));
	a.argv[0] = strdup("echo");
	a.argv[1] = strdup("x");
	a.argc = 2;
	a.container = img;
	pthread_mutex_lock(&lock);
	t_output = t_finished = 0;
	finish_reason = NULL;
	pthread_mutex_unlock(&lock);
	t0 = gp_mono_us();
	if (gp_executor_start(ex, &a) != 0)
		return -1;
	pthread_mutex_lock(&lock);
	while (t_finished == 0)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	if (strcmp(finish_reason, "exited") != 0 || t_output == 0) {
		fprintf(stderr, "bench: job ended %s\n", finish_reason);
		return -1;
	}
	*first = (double)(t_output - t0) / 1000.0;
	*end = (double)(t_finished - t0) / 1000.0;
	return 0;
}

/* The runtime's own run of the prepared bundle. */
static int
run_runtime(const struct gp_oci_runtime *rt, const char *bundle,
    const char *state, int id, double *first, double *end)
{
	char name[64];
	char *argv[] = {(char *)rt->name, "--root", (char *)state, "run",
	    "--bundle", (char *)bundle, name, NULL};
	char *envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
	    "/usr/bin:/sbin:/bin", NULL};
	struct gp_oci_spawn s;
	struct pollfd p;
	int out[2], pidfd, ret = -1;
	int64_t t0, t1 = 0;
	siginfo_t si;
	pid_t pid;
	char buf[64];

	snprintf(name, sizeof(name), "gpupool-bench-%d-%d", (int)getpid(), id);
	if (pipe2(out, O_CLOEXEC) != 0)
		return -1;
	memset(&s, 0, sizeof(s));
	s.rt = rt;
	s.argv = argv;
	s.envp = envp;
	s.rootfs_fd = -1;
	s.fds[0] = -1;
	s.fds[1] = s.fds[2] = out[1];
	s.fds[3] = s.fds[4] = -1;
	s.status_fd = -1;
	t0 = gp_mono_us();
	if (gp_oci_spawn(&s, &pid, &pidfd) != 0) {
		close(out[0]);
		close(out[1]);
		return -1;
	}
	close(out[1]);
	p.fd = out[0];
	p.events = POLLIN;
	if (poll(&p, 1, 30000) == 1 && read(out[0], buf, sizeof(buf)) > 0)
		t1 = gp_mono_us();
	while (read(out[0], buf, sizeof(buf)) > 0)
		;
	memset(&si, 0, sizeof(si));
	if (syscall(SYS_waitid, P_PIDFD, pidfd, &si, WEXITED, NULL) == 0 &&
	    si.si_code == CLD_EXITED && si.si_status == 0 && t1 != 0) {
		*first = (double)(t1 - t0) / 1000.0;
		*end = (double)(gp_mono_us() - t0) / 1000.0;
		ret = 0;
	} else
		fprintf(stderr, "bench: the runtime's run failed (status %d)\n",
		    si.si_status);
	close(pidfd);
	close(out[0]);
	return ret;
}

static int
build_layer(const char *layer)
{
	char cmd[3 * PATH_MAX + 256];

	snprintf(cmd, sizeof(cmd), "mkdir -p %s/bin && cp /bin/busybox "
	    "%s/bin/busybox && for a in sh echo true; do ln -sf busybox "
	    "%s/bin/$a; done", layer, layer, layer);
	return system(cmd) == 0 ? 0 : -1;
}

/* A bundle for the runtime's own run: the same builder, echo as pid 1. */
static int
build_bundle(const struct gp_oci_runtime *rt, const char *dir,
    const char *layer, const char *work, const struct gp_cgroups *cg)
{
	static char *args[] = {"/bin/echo", "x", NULL};
	static char *env[] = {"PATH=/bin", NULL};
	char rootfs[PATH_MAX + 16], path[3 * PATH_MAX], cgpath[256];
	struct gp_oci_config c;
	char err[512];
	json_t *cfg;
	static const char *points[] = {"proc", "dev", "sys", "tmp"};

	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", dir);
	snprintf(path, sizeof(path), "cp -a %s %s", layer, rootfs);
	if (system(path) != 0)
		return -1;
	for (size_t i = 0; i < GP_ARRAY_LEN(points); i++) {
		snprintf(path, sizeof(path), "%s/%s", rootfs, points[i]);
		mkdir(path, 0755);
	}
	snprintf(path, sizeof(path), "%s/tmp", rootfs);
	chmod(path, 01777);
	snprintf(path, sizeof(path), "%s%s", rootfs, work);
	if (gp_mkdir_p(path, 0755) != 0)
		return -1;
	memset(&c, 0, sizeof(c));
	c.args = args;
	c.env = env;
	c.cwd = "/";
	c.uid = c.gid = GP_CONTAINER_DEFAULT_UID;
	c.rootfs = rootfs;
	c.userns_host = rt->userns_host;
	c.userns_size = rt->userns_size;
	if (gp_cgroup_runtime_path(cg, "bench-runtime", cgpath,
	    sizeof(cgpath)) == 0)
		c.cgroups_path = cgpath;
	c.pids_max = GP_CGROUP_PIDS_MAX;
	c.scratch_bytes = GP_CONTAINER_SCRATCH_DEFAULT;
	c.workdir = work;
	c.init_host_path = rt->init_path;
	if (gp_oci_config_build(&c, &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench: %s\n", err);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/config.json", dir);
	if (json_dump_file(cfg, path, JSON_COMPACT) != 0) {
		json_decref(cfg);
		return -1;
	}
	json_decref(cfg);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
		{"runtime", required_argument, NULL, 'r'},
		{"init", required_argument, NULL, 'i'},
		{"layer", required_argument, NULL, 'l'},
		{NULL, 0, NULL, 0},
	};
	const char *runtime = "auto", *init = NULL, *layer_arg = NULL;
	char dir[] = "/var/tmp/gpupool-bench-ctr-XXXXXX", layer[PATH_MAX];
	char work[PATH_MAX], bundle[PATH_MAX], state[PATH_MAX], init_buf[PATH_MAX];
	struct gp_container_options o;
	struct gp_containers *containers;
	struct gp_sandbox_user user;
	struct gp_exec_config cfg;
	struct gp_cgroups cg;
	struct gp_executor *ex;
	double *rf, *re, *ef, *ee;
	char err[1024];
	int n = 30, c, i, status = 0;

	while ((c = getopt_long(argc, argv, "n:", options, NULL)) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'r': runtime = optarg; break;
		case 'i': init = optarg; break;
		case 'l': layer_arg = optarg; break;
		default:
			fprintf(stderr, "usage: bench_container [--runtime "
			    "auto|crun|runc] [-n N] [--init PATH] "
			    "[--layer DIR]\n");
			return 2;
		}
	}
	if (n < 3)
		n = 3;
	if (geteuid() != 0) {
		fprintf(stderr, "bench_container: needs root\n");
		return 1;
	}
	gp_log_init("bench", GP_LOG_WARN);
	if (init == NULL) {
		ssize_t k = readlink("/proc/self/exe", init_buf,
		    sizeof(init_buf) - 32);
		if (k <= 0)
			return 1;
		init_buf[k] = '\0';
		/* build/bench/bench_container -> build/gpupool-init */
		*strrchr(init_buf, '/') = '\0';
		*strrchr(init_buf, '/') = '\0';
		strcat(init_buf, "/gpupool-init");
		init = init_buf;
	}
	if (mkdtemp(dir) == NULL)
		return 1;
	chmod(dir, 0711);
	snprintf(work, sizeof(work), "%s/work", dir);
	snprintf(bundle, sizeof(bundle), "%s/bundle", dir);
	snprintf(state, sizeof(state), "%s/runtime-state", dir);
	mkdir(work, 0711);
	mkdir(bundle, 0711);
	mkdir(state, 0700);
	if (layer_arg != NULL)
		gp_strlcpy(layer, layer_arg, sizeof(layer));
	else {
		snprintf(layer, sizeof(layer), "%s/layer", dir);
		if (build_layer(layer) != 0) {
			fprintf(stderr, "bench: no busybox-static?\n");
			status = 1;
			goto out;
		}
	}
	if (gp_sandbox_user_init(NULL, &user, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench: %s\n", err);
		status = 1;
		goto out;
	}
	gp_cgroup_set_scope("bench");
	gp_cgroup_init(&cg);
	memset(&o, 0, sizeof(o));
	o.runtime = runtime;
	o.init_path = init;
	if (gp_containers_new(work, &o, &cg, NULL, 0, NULL, &containers, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "bench: %s\n", err);
		status = 1;
		goto out;
	}
	if (build_bundle(gp_containers_runtime(containers), bundle, layer,
	    work, &cg) != 0) {
		fprintf(stderr, "bench: cannot build the bundle\n");
		status = 1;
		goto free_containers;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.user = &user;
	cfg.cgroups = &cg;
	cfg.work_dir = work;
	cfg.containers = containers;
	if ((ex = gp_executor_new(&cfg, &events)) == NULL) {
		status = 1;
		goto free_containers;
	}
	rf = calloc((size_t)n, sizeof(double));
	re = calloc((size_t)n, sizeof(double));
	ef = calloc((size_t)n, sizeof(double));
	ee = calloc((size_t)n, sizeof(double));
	/* One of each first: caches warm. */
	run_runtime(gp_containers_runtime(containers), bundle, state, 0,
	    &rf[0], &re[0]);
	run_executor(ex, layer, 1000000, &ef[0], &ee[0]);
	for (i = 0; i < n && status == 0; i++) {
		if (run_runtime(gp_containers_runtime(containers), bundle,
		    state, i + 1, &rf[i], &re[i]) != 0 ||
		    run_executor(ex, layer, i + 1, &ef[i], &ee[i]) != 0)
			status = 1;
	}
	gp_executor_free(ex);
	if (status == 0) {
		double rf50 = pct(rf, n, 0.5), ef50 = pct(ef, n, 0.5);
		double re50 = pct(re, n, 0.5), ee50 = pct(ee, n, 0.5);

		printf("container_runtime %s name\n",
		    gp_containers_runtime(containers)->name);
		printf("container_runs %d runs\n", n);
		printf("runtime_run_first_output_p50 %.2f ms\n", rf50);
		printf("runtime_run_first_output_p90 %.2f ms\n",
		    pct(rf, n, 0.9));
		printf("executor_first_output_p50 %.2f ms\n", ef50);
		printf("executor_first_output_p90 %.2f ms\n", pct(ef, n, 0.9));
		printf("container_start_overhead_p50 %.2f ms\n", ef50 - rf50);
		printf("runtime_run_end_p50 %.2f ms\n", re50);
		printf("executor_end_p50 %.2f ms\n", ee50);
		printf("container_end_overhead_p50 %.2f ms\n", ee50 - re50);
	}
	free(rf);
	free(re);
	free(ef);
	free(ee);
free_containers:
	gp_containers_free(containers);
	gp_cgroup_fini(&cg);
out:
	gp_remove_tree(dir);
	return status;
}
