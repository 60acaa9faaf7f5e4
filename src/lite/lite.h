/*
 * lite.h: the `gpupool` executable's own parts (src/lite/, linked into
 * the executable only, never into libgpupool). The executable runs the
 * CLI's everyday commands itself over http_lite.c and loads
 * libgpupool.so for the rest (full.c there).
 */
#ifndef GP_LITE_H
#define GP_LITE_H

/* Keeps a copy of the command line for gp_lite_run_full (call first). */
void gp_lite_keep_args(int argc, char **argv);
/*
 * Loads libgpupool.so (next to the executable, else ../lib/gpupool/ from
 * it) and runs gp_main_full with the command line kept. Returns its exit
 * code, or 1 with a message on stderr when the library cannot be loaded.
 */
int gp_lite_run_full(void);

#endif
