/*
 * prom.h: the Prometheus text exposition format (version 0.0.4), for the
 * coordinator's and the agent's /metrics: metric families (# HELP and
 * # TYPE lines), samples with escaped label values, and lock-free
 * histograms that hot paths may observe into (a few atomic adds).
 *
 * Names follow Prometheus conventions: base units in the name (_seconds,
 * _bytes, _celsius, _watts, _ratio), counters end in _total. Labels are
 * given as a NULL-terminated list of name, value pairs; a NULL list means
 * no labels.
 */
#ifndef GP_PROM_H
#define GP_PROM_H

#include <stdatomic.h>
#include <stdint.h>

#include "util.h"

/* The Content-Type of an exposition. */
#define GP_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Writes "# HELP name help" and "# TYPE name type". 0 or GP_ENOMEM. */
int gp_prom_family(struct gp_buf *out, const char *name, const char *type,
    const char *help);

/*
 * Writes one sample "name{l1="v1",...} value". Label values are escaped
 * (\\, \", \n); other control characters become '?'. Integral values are
 * written without a fraction, NaN as "NaN", infinities as "+Inf"/"-Inf".
 * Returns 0 or GP_ENOMEM.
 */
int gp_prom_sample(struct gp_buf *out, const char *name,
    const char *const *labels, double value);

/* Escapes a label value into out (as gp_prom_sample does). */
int gp_prom_escape(struct gp_buf *out, const char *value);

#define GP_PROM_BUCKETS_MAX 24

/*
 * A histogram of durations in seconds, safe to observe from any thread
 * without a lock. Buckets are upper bounds in seconds, increasing; the
 * +Inf bucket is implied. Initialise with gp_prom_histogram_init.
 */
struct gp_prom_histogram {
	const double *bounds;
	int nbounds;
	_Atomic uint64_t counts[GP_PROM_BUCKETS_MAX + 1]; /* not cumulative */
	_Atomic uint64_t sum_us;                          /* microseconds */
};

/* bounds must outlive h; at most GP_PROM_BUCKETS_MAX. 0 or GP_EINVAL. */
int gp_prom_histogram_init(struct gp_prom_histogram *h, const double *bounds,
    int nbounds);
/* Records one observation of seconds (negative counts as 0). */
void gp_prom_histogram_observe(struct gp_prom_histogram *h, double seconds);
/*
 * Writes the family (HELP, TYPE histogram) and its _bucket, _sum and
 * _count samples; _count always equals the +Inf bucket. 0 or GP_ENOMEM.
 */
int gp_prom_histogram_write(struct gp_buf *out, const char *name,
    const char *help, struct gp_prom_histogram *h);

#endif
