/* Temporary: replaced by the GPU layer's owner-presence support. */
#include <sys/types.h>

#include "agent/gpu.h"

int gp_gpu_foreign_processes(struct gp_gpu_set *set, int index, pid_t *pids,
    int max);

int
gp_gpu_foreign_processes(struct gp_gpu_set *set, int index, pid_t *pids,
    int max)
{
	(void)set;
	(void)index;
	(void)pids;
	(void)max;
	return 0;
}
