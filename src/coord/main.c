/*
 * main.c: placeholder until the coord lands.
 */
#include <stdio.h>

#include "coord/coord.h"

int
gp_coord_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "gpupool: coord: not built yet\n");
	return 2;
}
