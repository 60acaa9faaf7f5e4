/*
 * ctxprobe.h: what a CUDA context takes of each GPU's memory (ctxprobe.c).
 *
 *   gp_ctxprobe_measure(gpus, n): at the agent's start, sets each GPU's
 *       ctx_bytes (0 where it cannot be measured, which is logged); a
 *       child a GPU, side by side, at most 30 s in all.
 *   gp_ctxprobe_child(): at the very start of `gpupool agent`: -1 when
 *       this process is not a probe, else the probe's exit status (it
 *       printed "ctx_bytes N").
 */
#ifndef GP_AGENT_CTXPROBE_H
#define GP_AGENT_CTXPROBE_H

#include "agent/gpu.h"

void gp_ctxprobe_measure(struct gp_gpu_info *gpus, int n);
int gp_ctxprobe_child(void);

#endif
