/*
 * main.c: placeholder until the cli lands.
 */
#include <stdio.h>

#include "cli/cli.h"

int
gp_cli_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "gpupool: cli: not built yet\n");
	return 2;
}
