/*
 * ctxprobe.c: what a CUDA context takes of each GPU's memory, measured
 * once when the agent starts, so that an enforced fraction charges it to
 * each of a job's processes (docs/gpu-sharing.md, "Contexts").
 *
 * A context holds device memory that no allocation call shows: about
 * 520 MiB on an H100 with driver 580. Two jobs given half the card each
 * would otherwise not fit together once both made their contexts.
 *
 * The measurement runs in a child, the agent's own program exec'd with
 * GPUPOOL_AGENT_CTX_PROBE=INDEX and CUDA_VISIBLE_DEVICES=UUID (so that
 * CUDA's device 0 is that GPU): it makes the device's primary context and
 * asks NVML what its own pid holds. The agent never loads libcuda, and a
 * driver that hangs or crashes costs a child, not the agent.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/ctxprobe.h"
#include "gp.h"
#include "log.h"
#include "util.h"

extern char **environ;

#define PROBE_ENV     "GPUPOOL_AGENT_CTX_PROBE"
#define PROBE_TIMEOUT_MS 30000
#define PROBE_MAX     64

/* The child: prints "ctx_bytes N" and returns 0, or says why and 1. */
static int
probe_child(const char *index_text)
{
	int (*cu_init)(unsigned int);
	int (*cu_device_get)(int *, int);
	int (*cu_retain)(void **, int);
	int (*cu_set_current)(void *);
	int (*cu_mem_info)(size_t *, size_t *);
	struct gp_gpu_set set;
	char err[256];
	void *cu, *p[5], *ctx = NULL;
	size_t free_b, total_b;
	int64_t bytes;
	int dev, index, rc, i;
	static const char *const names[] = {"cuInit", "cuDeviceGet",
		"cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
		"cuMemGetInfo_v2"};

	index = atoi(index_text);
	/* Global, as a program's own libcuda is (NVML may look in it). */
	if ((cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) == NULL) {
		fprintf(stderr, "no libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	for (i = 0; i < 5; i++)
		if ((p[i] = dlsym(cu, names[i])) == NULL) {
			fprintf(stderr, "libcuda.so.1 lacks %s\n", names[i]);
			return 1;
		}
	memcpy(&cu_init, &p[0], sizeof(p[0]));
	memcpy(&cu_device_get, &p[1], sizeof(p[1]));
	memcpy(&cu_retain, &p[2], sizeof(p[2]));
	memcpy(&cu_set_current, &p[3], sizeof(p[3]));
	memcpy(&cu_mem_info, &p[4], sizeof(p[4]));
	if ((rc = cu_init(0)) != 0 || (rc = cu_device_get(&dev, 0)) != 0 ||
	    (rc = cu_retain(&ctx, dev)) != 0 ||
	    (rc = cu_set_current(ctx)) != 0 ||
	    (rc = cu_mem_info(&free_b, &total_b)) != 0) {
		fprintf(stderr, "CUDA error %d making a context\n", rc);
		return 1;
	}
	/* NVML sees this process under its pid: the agent's namespace. */
	if (gp_gpu_open(NULL, NULL, &set, err, sizeof(err)) != 0) {
		fprintf(stderr, "NVML: %s\n", err);
		return 1;
	}
	bytes = gp_gpu_process_bytes(&set, index, getpid());
	gp_gpu_close(&set);
	if (bytes < 0) {
		fprintf(stderr, "NVML lists no memory of this process\n");
		return 1;
	}
	printf("ctx_bytes %" PRId64 "\n", bytes);
	return 0;
}

int
gp_ctxprobe_child(void)
{
	const char *index = getenv(PROBE_ENV);

	if (index == NULL || *index == '\0')
		return -1;
	return probe_child(index);
}

struct probe {
	pid_t pid;
	int fd;
	char out[128];
	size_t len;
};

/* Starts GPU g's child; 0, or -1 (probe left with pid 0). */
static int
probe_start(struct probe *pr, const struct gp_gpu_info *g)
{
	char index_env[64], visible_env[160];
	char *argv[] = {"gpupool", "agent", NULL};
	posix_spawn_file_actions_t fa;
	char **env;
	size_t n = 0, i, j = 0;
	int fds[2], devnull, rc;

	pr->pid = 0;
	pr->fd = -1;
	pr->len = 0;
	while (environ[n] != NULL)
		n++;
	if ((env = calloc(n + 3, sizeof(*env))) == NULL)
		return -1;
	snprintf(index_env, sizeof(index_env), PROBE_ENV "=%d", g->index);
	snprintf(visible_env, sizeof(visible_env), "CUDA_VISIBLE_DEVICES=%s",
	    g->uuid);
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0 &&
		    strncmp(environ[i], PROBE_ENV "=", sizeof(PROBE_ENV)) != 0)
			env[j++] = environ[i];
	env[j++] = index_env;
	env[j++] = visible_env;
	env[j] = NULL;
	if (pipe2(fds, O_CLOEXEC) != 0) {
		free(env);
		return -1;
	}
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	posix_spawn_file_actions_init(&fa);
	/* Its answer, or why it has none, on one pipe. */
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
	if (devnull >= 0)
		posix_spawn_file_actions_adddup2(&fa, devnull, STDIN_FILENO);
	rc = posix_spawn(&pr->pid, "/proc/self/exe", &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	close(fds[1]);
	if (devnull >= 0)
		close(devnull);
	if (rc != 0) {
		pr->pid = 0;
		close(fds[0]);
		return -1;
	}
	pr->fd = fds[0];
	return 0;
}

static int64_t
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void
gp_ctxprobe_measure(struct gp_gpu_info *gpus, int n)
{
	struct probe pr[PROBE_MAX];
	struct pollfd pfd[PROBE_MAX];
	int64_t deadline = now_ms() + PROBE_TIMEOUT_MS;
	int i, open_fds = 0, st;

	if (n > PROBE_MAX)
		n = PROBE_MAX;
	/* Side by side: one start's cost (~0.5 s) for all the GPUs. */
	for (i = 0; i < n; i++)
		if (probe_start(&pr[i], &gpus[i]) == 0)
			open_fds++;
	while (open_fds > 0) {
		int64_t left = deadline - now_ms();
		int k = 0, got;

		if (left <= 0)
			break;
		for (i = 0; i < n; i++)
			if (pr[i].fd >= 0) {
				pfd[k].fd = pr[i].fd;
				pfd[k].events = POLLIN;
				pfd[k++].revents = 0;
			}
		if ((got = poll(pfd, (nfds_t)k, (int)left)) < 0 &&
		    errno != EINTR)
			break;
		for (i = 0, k = 0; i < n && got > 0; i++) {
			ssize_t r;

			if (pr[i].fd < 0)
				continue;
			if (pfd[k++].revents == 0)
				continue;
			r = read(pr[i].fd, pr[i].out + pr[i].len,
			    sizeof(pr[i].out) - 1 - pr[i].len);
			if (r > 0 && pr[i].len + (size_t)r <
			    sizeof(pr[i].out) - 1) {
				pr[i].len += (size_t)r;
				continue;
			}
			close(pr[i].fd);
			pr[i].fd = -1;
			open_fds--;
		}
	}
	for (i = 0; i < n; i++) {
		long long bytes;

		if (pr[i].fd >= 0)
			close(pr[i].fd);
		if (pr[i].pid <= 0) {
			gp_warn("gpu context probe index=%d: cannot start it",
			    gpus[i].index);
			continue;
		}
		kill(pr[i].pid, SIGKILL);	/* done, or past its time */
		while (waitpid(pr[i].pid, &st, 0) < 0 && errno == EINTR)
			;
		pr[i].out[pr[i].len] = '\0';
		if (sscanf(pr[i].out, "ctx_bytes %lld", &bytes) == 1 &&
		    bytes >= 0 && bytes < (16LL << 30)) {
			gpus[i].ctx_bytes = bytes;
			gp_info("gpu context index=%d ctx_mib=%lld "
			    "(charged to each process of a fractional job)",
			    gpus[i].index, bytes >> 20);
		} else {
			char *nl;

			while ((nl = strchr(pr[i].out, '\n')) != NULL)
				*nl = ' ';
			gp_warn("gpu context index=%d: not measured why=\"%s\": "
			    "fractional jobs' contexts are not charged to "
			    "their caps", gpus[i].index, pr[i].out[0] ?
			    pr[i].out : "no answer in time");
		}
	}
}
