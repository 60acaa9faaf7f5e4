/*
 * full.c: the whole program's dispatch, the entry point of
 * libgpupool.so. The `gpupool` executable (src/main.c, src/lite/) runs the
 * CLI's everyday commands itself and hands everything else (the
 * coordinator, the agent, `up`, images, data, checkpoints, https://
 * coordinators) to this function, loaded with dlopen(), so the
 * executable starts without libcurl, libmicrohttpd, SQLite and the rest.
 */
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "coord/coord.h"
#include "gp.h"

int
gp_main_full(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "coordinator") == 0)
		return gp_coord_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "agent") == 0)
		return gp_agent_main(argc - 1, argv + 1);
	if (argc >= 2 &&
	    (strcmp(argv[1], "--version") == 0 ||
	        strcmp(argv[1], "version") == 0)) {
		printf("gpupool %s (protocol %d)\n", GP_VERSION,
		    GP_PROTOCOL_VERSION);
		return 0;
	}
	return gp_cli_main(argc, argv);
}
