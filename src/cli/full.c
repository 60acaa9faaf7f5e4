/*
 * full.c: the whole program's dispatch, the entry point of
 * libgpupool.so. The `gpupool` executable (src/main.c, src/lite/) runs the
 * CLI's everyday commands itself and hands everything else (the
 * coordinator, the agent, `up`, images, data, checkpoints, https://
 * coordinators) to this function, loaded with dlopen(), so the
 * executable starts without libcurl, libmicrohttpd, SQLite and the rest.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "coord/coord.h"
#include "gp.h"

int
gp_main_full(int argc, char **argv)
{
	/*
	 * OpenSSL (libcurl's, the proxy's, libpq's) frees its global state
	 * in an atexit handler unless told not to on its first use. Threads
	 * may still run while the process exits (a long poll, a stream that
	 * ends at that moment): one that ends after that handler leaks its
	 * per-thread state, and one still in a handshake uses freed memory.
	 * The process's end frees all of it anyway.
	 */
	OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
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
