/*
 * test_proxy.c: the job port proxy's pure parsers (coord/proxy_parse.c):
 * request heads as browsers send them, and the per-job host names that
 * give each job's port an origin of its own.
 */
#include <stdint.h>
#include <string.h>

#include "coord/proxy.h"
#include "gp.h"
#include "unit.h"

static int
parse(const char *text, struct proxy_head *h)
{
	return proxy_head_parse(text, strlen(text), h);
}

TEST(heads)
{
	struct proxy_head h;
	const char *get = "GET /tree?x=1 HTTP/1.1\r\nHost: j12-p8888.localhost:"
	    "7071\r\nCookie: _xsrf=abc; " PROXY_COOKIE "=s3cr3t; other=1\r\n"
	    "\r\nleftover";

	CHECK_EQ(parse(get, &h), (int)(strlen(get) - strlen("leftover")));
	CHECK_STR(h.method, "GET");
	CHECK_STR(h.path, "/tree?x=1");
	CHECK_STR(h.host, "j12-p8888.localhost:7071");
	CHECK_STR(h.cookie, "s3cr3t");
	CHECK_EQ(h.content_length, -1);
	/* Not whole yet. */
	CHECK_EQ(parse("GET / HTTP/1.1\r\nHost: x\r\n", &h), 0);
	CHECK(parse("POST /_gpupool/login HTTP/1.1\r\nhost: a\r\n"
	    "content-length: 48\r\n\r\n", &h) > 0);
	CHECK_EQ(h.content_length, 48);
	CHECK_STR(h.host, "a");
	CHECK_STR(h.cookie, "");
	/* Refused: no Host, two, a bad request line or length. */
	CHECK_EQ(parse("GET / HTTP/1.1\r\n\r\n", &h), GP_EINVAL);
	CHECK_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &h),
	    GP_EINVAL);
	CHECK_EQ(parse("GET /\r\nHost: a\r\n\r\n", &h), GP_EINVAL);
	CHECK_EQ(parse("get / HTTP/1.1\r\nHost: a\r\n\r\n", &h), GP_EINVAL);
	CHECK_EQ(parse("GET x HTTP/1.1\r\nHost: a\r\n\r\n", &h), GP_EINVAL);
	CHECK_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n"
	    "\r\n", &h), GP_EINVAL);
}

TEST(hosts)
{
	int64_t job;
	int part = -1, port;

	CHECK_EQ(proxy_host_parse("j12-p8888.localhost:7071", "localhost",
	    &job, &part, &port), 0);
	CHECK_EQ(job, 12);
	CHECK_EQ(part, 0);
	CHECK_EQ(port, 8888);
	CHECK_EQ(proxy_host_parse("J3-P80.Jobs.Example.org", "jobs.example.org",
	    &job, &part, &port), 0);
	CHECK_EQ(job, 3);
	CHECK_EQ(port, 80);
	/* A gang's part K >= 1 names itself; part 0 has only one name. */
	CHECK_EQ(proxy_host_parse("j12-part3-p8888.localhost", "localhost",
	    &job, &part, &port), 0);
	CHECK_EQ(job, 12);
	CHECK_EQ(part, 3);
	CHECK_EQ(port, 8888);
	CHECK_EQ(proxy_host_parse("J7-PART63-P22.localhost:7071", "localhost",
	    &job, &part, &port), 0);
	CHECK_EQ(part, 63);
	CHECK_EQ(proxy_host_parse("j12-part0-p8888.localhost", "localhost",
	    &job, &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j12-part01-p8888.localhost", "localhost",
	    &job, &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j12-part64-p8888.localhost", "localhost",
	    &job, &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j12-part-p8888.localhost", "localhost",
	    &job, &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j12-part2.localhost", "localhost",
	    &job, &part, &port), GP_EINVAL);
	/* The dashboard's host, other domains, bad numbers: not a job's. */
	CHECK_EQ(proxy_host_parse("127.0.0.1:7070", "localhost", &job, &part, &port),
	    GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j12-p8888.localhost.evil.org", "localhost",
	    &job, &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j12-p8888.evil.localhost", "localhost",
	    &job, &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j0-p80.localhost", "localhost", &job, &part, &port),
	    GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j1-p65536.localhost", "localhost", &job,
	    &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j1-p80.localhost:", "localhost", &job,
	    &part, &port), GP_EINVAL);
	CHECK_EQ(proxy_host_parse("j1-p80.localhost:8x", "localhost", &job,
	    &part, &port), GP_EINVAL);
}

int
main(void)
{
	RUN(heads);
	RUN(hosts);
	return unit_report();
}
