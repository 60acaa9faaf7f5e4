/*
 * coord_metrics.h: the coordinator's Prometheus metrics (metrics.c).
 */
#ifndef GP_COORD_METRICS_H
#define GP_COORD_METRICS_H

#include "state.h"

/* metrics.c: Prometheus metrics; the event hooks are lock-free. */
int metrics_init(void);
/* The state thread places job (before job_assign changes it). */
void metrics_job_assigned(const struct job *job, int64_t now_ms);
/* A poll hands job to its agent (first hand-over of the attempt only). */
void metrics_job_delivered(struct job *job, int64_t now_mono);
void metrics_job_requeued(const char *reason);
void metrics_job_restored(void);
void metrics_checkpoint_committed(int64_t bytes);
void metrics_chunk_stored(size_t bytes);
void metrics_unauthorized(void);
/* The exposition; takes state.lock for reading. 0 or GP_ENOMEM. */
int metrics_render(struct gp_buf *out);

#endif
