/*
 * main.c: the `gpupool` executable. It runs the CLI's everyday commands
 * (submit, ps, show, logs, cancel, wait, nodes, token, accounting, top)
 * itself, talking to a plain http:// coordinator with its own small client
 * (src/common/http_lite.c), so it starts in about a millisecond; the
 * coordinator, the agent, the other commands and https:// coordinators
 * are the whole program in libgpupool.so, loaded on demand (src/lite/).
 * One command either way: the process stays `gpupool`.
 */
#include <sys/random.h>

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "cli/cmd.h"
#include "coord_urls.h"
#include "gp.h"
#include "lite/lite.h"

/* 1 when the configured coordinator is not a plain http:// URL. */
static int
needs_full_client(void)
{
	struct gp_cli_config cfg;
	const char *url = getenv("GPUPOOL_URL");
	char err[512];

	memset(&cfg, 0, sizeof(cfg));
	int full;

	/* GPUPOOL_URL overrides the file's: no need to read it twice. */
	if (url != NULL && url[0] != '\0')
		return !gp_coord_urls_all_start(url, "http://");
	if (gp_cli_config_load(&cfg, err, sizeof(err)) != 0)
		return 0; /* the command says what is wrong */
	full = !gp_coord_urls_all_start(cfg.url, "http://");
	memset(cfg.token, 0, sizeof(cfg.token)); /* a secret */
	return full;
}

int
main(int argc, char **argv)
{
	uint32_t seed;

	/* jansson's hash seed, in one system call (it would open, read and
	 * close /dev/urandom); where getrandom fails jansson seeds itself. */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == sizeof(seed))
		json_object_seed(seed != 0 ? seed : 1);
	gp_lite_keep_args(argc, argv);
	if (argc >= 2 &&
	    (strcmp(argv[1], "--version") == 0 ||
	        strcmp(argv[1], "version") == 0)) {
		printf("gpupool %s (protocol %d)\n", GP_VERSION,
		    GP_PROTOCOL_VERSION);
		return 0;
	}
	if (argc >= 2 &&
	    (strcmp(argv[1], "coordinator") == 0 ||
	        strcmp(argv[1], "agent") == 0))
		return gp_lite_run_full();
	if (argc >= 2 && needs_full_client())
		return gp_lite_run_full();
	return gp_cli_main(argc, argv);
}
