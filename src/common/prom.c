/*
 * prom.c: the Prometheus text exposition format (see prom.h): families,
 * samples with escaped labels, and atomic histograms.
 */
#include "prom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"

/* A "%g" text that reads back as v, short when it can be. */
static void
format_double(double v, char *out, size_t len)
{
	int prec;

	if (isnan(v)) {
		snprintf(out, len, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(out, len, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == floor(v) && fabs(v) < 9007199254740992.0) {
		snprintf(out, len, "%.0f", v);
		return;
	}
	/* Short when that reads back exactly (0.37), else all digits. */
	for (prec = 6; prec <= 17; prec += prec < 15 ? 9 : 1) {
		snprintf(out, len, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

int
gp_prom_family(struct gp_buf *out, const char *name, const char *type,
    const char *help)
{
	return gp_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	    name, type);
}

int
gp_prom_escape(struct gp_buf *out, const char *value)
{
	const char *p, *run = value;
	const char *esc;

	for (p = value; *p != '\0'; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '\\')
			esc = "\\\\";
		else if (c == '"')
			esc = "\\\"";
		else if (c == '\n')
			esc = "\\n";
		else if (c < 0x20 || c == 0x7f)
			esc = "?";
		else
			continue;
		if (gp_buf_append(out, run, (size_t)(p - run)) != 0 ||
		    gp_buf_append(out, esc, strlen(esc)) != 0)
			return GP_ENOMEM;
		run = p + 1;
	}
	return gp_buf_append(out, run, (size_t)(p - run));
}

int
gp_prom_sample(struct gp_buf *out, const char *name, const char *const *labels,
    double value)
{
	char num[40];
	int i, rc = 0;

	rc |= gp_buf_append(out, name, strlen(name));
	if (labels != NULL && labels[0] != NULL) {
		rc |= gp_buf_append(out, "{", 1);
		for (i = 0; labels[i] != NULL && labels[i + 1] != NULL;
		     i += 2) {
			if (i > 0)
				rc |= gp_buf_append(out, ",", 1);
			rc |= gp_buf_printf(out, "%s=\"", labels[i]);
			rc |= gp_prom_escape(out, labels[i + 1]);
			rc |= gp_buf_append(out, "\"", 1);
		}
		rc |= gp_buf_append(out, "}", 1);
	}
	format_double(value, num, sizeof(num));
	rc |= gp_buf_printf(out, " %s\n", num);
	return rc != 0 ? GP_ENOMEM : 0;
}

int
gp_prom_histogram_init(struct gp_prom_histogram *h, const double *bounds,
    int nbounds)
{
	int i;

	if (nbounds < 0 || nbounds > GP_PROM_BUCKETS_MAX)
		return GP_EINVAL;
	for (i = 1; i < nbounds; i++)
		if (!(bounds[i] > bounds[i - 1]))
			return GP_EINVAL;
	h->bounds = bounds;
	h->nbounds = nbounds;
	for (i = 0; i <= GP_PROM_BUCKETS_MAX; i++)
		atomic_init(&h->counts[i], 0);
	atomic_init(&h->sum_us, 0);
	return 0;
}

void
gp_prom_histogram_observe(struct gp_prom_histogram *h, double seconds)
{
	int i;

	if (!(seconds > 0))
		seconds = 0;
	for (i = 0; i < h->nbounds && seconds > h->bounds[i]; i++)
		;
	atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_us,
	    seconds < 1e12 ? (uint64_t)(seconds * 1e6 + 0.5) : (uint64_t)1e18,
	    memory_order_relaxed);
}

int
gp_prom_histogram_write(struct gp_buf *out, const char *name, const char *help,
    struct gp_prom_histogram *h)
{
	char metric[160], le[40];
	const char *labels[] = {"le", le, NULL};
	uint64_t cum = 0;
	int i, rc;

	rc = gp_prom_family(out, name, "histogram", help);
	snprintf(metric, sizeof(metric), "%s_bucket", name);
	for (i = 0; i <= h->nbounds && rc == 0; i++) {
		cum +=
		    atomic_load_explicit(&h->counts[i], memory_order_relaxed);
		if (i < h->nbounds)
			format_double(h->bounds[i], le, sizeof(le));
		else
			snprintf(le, sizeof(le), "+Inf");
		rc = gp_prom_sample(out, metric, labels, (double)cum);
	}
	snprintf(metric, sizeof(metric), "%s_sum", name);
	if (rc == 0)
		rc = gp_prom_sample(out, metric, NULL,
		    (double)atomic_load_explicit(&h->sum_us,
		        memory_order_relaxed) /
		        1e6);
	snprintf(metric, sizeof(metric), "%s_count", name);
	if (rc == 0)
		rc = gp_prom_sample(out, metric, NULL, (double)cum);
	return rc;
}
