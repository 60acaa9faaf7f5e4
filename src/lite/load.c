/*
 * load.c: hands a command line to the whole program in libgpupool.so
 * (lite.h). The library is looked for next to /proc/self/exe (the build
 * tree) and then in ../lib/gpupool/ (installed: /usr/bin/gpupool and
 * /usr/lib/gpupool/libgpupool.so).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lite/lite.h"

static int kept_argc;
static char **kept_argv;

void
gp_lite_keep_args(int argc, char **argv)
{
	/* The CLI's parser reorders argv: keep the order as given. */
	kept_argv = calloc((size_t)argc + 1, sizeof(*kept_argv));
	if (kept_argv == NULL) {
		kept_argv = argv;
	} else {
		memcpy(kept_argv, argv, (size_t)argc * sizeof(*argv));
	}
	kept_argc = argc;
}

/* The library's path. Returns 0, or -1 with err saying where it looked. */
static int
library_path(char *out, size_t len, char *err, size_t errlen)
{
	char exe[PATH_MAX];
	ssize_t n;
	char *slash;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(err, errlen, "cannot read /proc/self/exe");
		return -1;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash == NULL) {
		snprintf(err, errlen, "odd executable path %s", exe);
		return -1;
	}
	*slash = '\0';
	snprintf(out, len, "%s/libgpupool.so", exe);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(out, len, "%s/../lib/gpupool/libgpupool.so", exe);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(err, errlen,
	    "libgpupool.so is neither in %s nor in %s/../lib/gpupool", exe,
	    exe);
	return -1;
}

int
gp_lite_run_full(void)
{
	int (*full)(int, char **);
	char path[PATH_MAX + 32], err[PATH_MAX * 2 + 64];
	void *lib;

	if (library_path(path, sizeof(path), err, sizeof(err)) != 0) {
		fprintf(stderr,
		    "gpupool: %s (the coordinator, the agent and "
		    "most commands live there; reinstall gpupool)\n",
		    err);
		return 1;
	}
	lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "gpupool: cannot load %s: %s\n", path,
		    dlerror());
		return 1;
	}
	*(void **)&full = dlsym(lib, "gp_main_full");
	if (full == NULL) {
		fprintf(stderr, "gpupool: %s has no gp_main_full: %s\n", path,
		    dlerror());
		return 1;
	}
	fflush(stdout);
	return full(kept_argc, kept_argv);
}
