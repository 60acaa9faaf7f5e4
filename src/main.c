/*
 * main.c: the one gpupool binary. The first argument picks the part:
 * the coordinator, the agent, or one of the user commands.
 */
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "coord/coord.h"
#include "gp.h"

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "coordinator") == 0)
		return gp_coord_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "agent") == 0)
		return gp_agent_main(argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "--version") == 0 ||
			     strcmp(argv[1], "version") == 0)) {
		printf("gpupool %s (protocol %d)\n", GP_VERSION,
		    GP_PROTOCOL_VERSION);
		return 0;
	}
	return gp_cli_main(argc, argv);
}
