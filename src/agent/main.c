/*
 * main.c: placeholder until the agent lands.
 */
#include <stdio.h>

#include "agent/agent.h"

int
gp_agent_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "gpupool: agent: not built yet\n");
	return 2;
}
