/*
 * test_prom.c: the Prometheus text format writer (src/common/prom.c):
 * families, samples, label escaping, number formatting, histograms; the
 * agent's --metrics-listen parser; the fake GPU backend's made-up
 * readings (idle cool and at rest, busy within plausible bounds).
 */
#include <arpa/inet.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpu.h"
#include "agent/metrics.h"
#include "gp.h"
#include "prom.h"
#include "unit.h"
#include "util.h"

/* The buffer as a NUL-terminated string (for comparisons). */
static const char *
text(struct gp_buf *b)
{
	gp_buf_append(b, "", 1);
	b->len--;
	return b->data;
}

TEST(family_and_samples)
{
	struct gp_buf b = {0};
	const char *l[] = {"node", "n1", "gpu", "0", NULL};

	CHECK_EQ(gp_prom_family(&b, "gpupool_x_total", "counter", "Things"), 0);
	CHECK_EQ(gp_prom_sample(&b, "gpupool_x_total", NULL, 3), 0);
	CHECK_EQ(gp_prom_sample(&b, "gpupool_x_total", l, 0.25), 0);
	CHECK_STR(text(&b),
	    "# HELP gpupool_x_total Things\n"
	    "# TYPE gpupool_x_total counter\n"
	    "gpupool_x_total 3\n"
	    "gpupool_x_total{node=\"n1\",gpu=\"0\"} 0.25\n");
	gp_buf_free(&b);
}

TEST(escaping)
{
	struct gp_buf b = {0};
	const char *l[] = {"model", "A \"big\" \\ GPU\nx\ty", NULL};

	CHECK_EQ(gp_prom_sample(&b, "m", l, 1), 0);
	CHECK_STR(text(&b), "m{model=\"A \\\"big\\\" \\\\ GPU\\nx?y\"} 1\n");
	gp_buf_free(&b);
	CHECK_EQ(gp_prom_escape(&b, ""), 0);
	CHECK_EQ(b.len, 0);
	gp_buf_free(&b);
}

TEST(numbers)
{
	static const struct {
		double v;
		const char *want;
	} cases[] = {
	    {0, "m 0\n"},
	    {-2, "m -2\n"},
	    {17179869184.0, "m 17179869184\n"},
	    {0.1, "m 0.1\n"},
	    {0.005, "m 0.005\n"},
	    {1795456077.369, "m 1795456077.369\n"},
	    {1e300, "m 1e+300\n"},
	};
	struct gp_buf b = {0};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(cases); i++) {
		b.len = 0;
		CHECK_EQ(gp_prom_sample(&b, "m", NULL, cases[i].v), 0);
		CHECK_STR(text(&b), cases[i].want);
	}
	b.len = 0;
	gp_prom_sample(&b, "m", NULL, NAN);
	CHECK_STR(text(&b), "m NaN\n");
	b.len = 0;
	gp_prom_sample(&b, "m", NULL, -INFINITY);
	CHECK_STR(text(&b), "m -Inf\n");
	gp_buf_free(&b);
}

TEST(histogram)
{
	static const double bounds[] = {0.1, 1, 10};
	static const double bad[] = {1, 1};
	struct gp_prom_histogram h;
	struct gp_buf b = {0};

	CHECK_EQ(gp_prom_histogram_init(&h, bad, 2), GP_EINVAL);
	CHECK_EQ(gp_prom_histogram_init(&h, bounds, GP_PROM_BUCKETS_MAX + 1),
	    GP_EINVAL);
	CHECK_EQ(gp_prom_histogram_init(&h, bounds, 3), 0);
	gp_prom_histogram_observe(&h, 0.05);
	gp_prom_histogram_observe(&h, 0.1); /* le is inclusive */
	gp_prom_histogram_observe(&h, 0.5);
	gp_prom_histogram_observe(&h, 100);
	gp_prom_histogram_observe(&h, -3);  /* counts as 0 */
	gp_prom_histogram_observe(&h, NAN); /* counts as 0 */
	CHECK_EQ(gp_prom_histogram_write(&b, "h_seconds", "A histogram", &h),
	    0);
	CHECK_STR(text(&b),
	    "# HELP h_seconds A histogram\n"
	    "# TYPE h_seconds histogram\n"
	    "h_seconds_bucket{le=\"0.1\"} 4\n"
	    "h_seconds_bucket{le=\"1\"} 5\n"
	    "h_seconds_bucket{le=\"10\"} 5\n"
	    "h_seconds_bucket{le=\"+Inf\"} 6\n"
	    "h_seconds_sum 100.65\n"
	    "h_seconds_count 6\n");
	gp_buf_free(&b);
}

TEST(metrics_listen)
{
	struct sockaddr_in a;
	char host[INET_ADDRSTRLEN];

	CHECK_EQ(gp_agent_metrics_parse_listen("9400", &a), 0);
	CHECK_EQ(ntohs(a.sin_port), 9400);
	inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
	CHECK_STR(host, "127.0.0.1");
	CHECK_EQ(gp_agent_metrics_parse_listen("0.0.0.0:9401", &a), 0);
	inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
	CHECK_STR(host, "0.0.0.0");
	CHECK_EQ(ntohs(a.sin_port), 9401);
	CHECK_EQ(gp_agent_metrics_parse_listen("", &a), GP_EINVAL);
	CHECK_EQ(gp_agent_metrics_parse_listen("0", &a), GP_EINVAL);
	CHECK_EQ(gp_agent_metrics_parse_listen("65536", &a), GP_EINVAL);
	CHECK_EQ(gp_agent_metrics_parse_listen(":9400", &a), GP_EINVAL);
	CHECK_EQ(gp_agent_metrics_parse_listen("host:9400", &a), GP_EINVAL);
	CHECK_EQ(gp_agent_metrics_parse_listen("1.2.3.4:x", &a), GP_EINVAL);
}

TEST(fake_readings)
{
	struct gp_gpu_set set;
	struct gp_gpu_usage u;
	char err[256];
	int i;

	CHECK_EQ(gp_gpu_open("2:T4:16384", "n", &set, err, sizeof(err)), 0);
	for (i = 0; i < 2; i++) {
		CHECK_EQ(gp_gpu_usage(&set, i, 0, &u), 0);
		CHECK_EQ(u.util, 0);
		CHECK_EQ(u.mem_used_mib, 0);
		CHECK(u.temp_c >= 25 && u.temp_c <= 45);
		CHECK(u.power_mw >= 10000 && u.power_mw <= 40000);
		CHECK_EQ(gp_gpu_usage(&set, i, 1, &u), 0);
		CHECK(u.util >= 50 && u.util <= 100);
		CHECK(u.mem_used_mib > 0 && u.mem_used_mib < 16384);
		CHECK(u.temp_c > 45 && u.temp_c < 90);
		CHECK(u.power_mw > 100000 && u.power_mw < 300000);
	}
	CHECK_EQ(gp_gpu_usage(&set, 2, 1, &u), GP_EINVAL);
	CHECK_EQ(u.temp_c, -1);
	gp_gpu_close(&set);
	/* No backend: zeros, sensors unknown. */
	CHECK_EQ(gp_gpu_usage(&set, 0, 1, &u), GP_ENOENT);
	CHECK_EQ(u.util, 0);
	CHECK_EQ(u.power_mw, -1);
}

int
main(void)
{
	RUN(family_and_samples);
	RUN(escaping);
	RUN(numbers);
	RUN(histogram);
	RUN(metrics_listen);
	RUN(fake_readings);
	return unit_report();
}
