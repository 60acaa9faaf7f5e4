/*
 * test_stream.c: the interactive stream protocol's codecs
 * (common/stream.c): frames read whole from any split of the bytes, bad
 * headers refused, the relay's scan finds the boundaries, OPEN frames
 * decode and encode, Upgrade answers parse.
 */
#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "unit.h"

/* Appends a frame to buf at *n. */
static void
put(uint8_t *buf, size_t *n, int type, const char *payload)
{
	size_t len = strlen(payload);

	gp_frame_header(buf + *n, type, len);
	memcpy(buf + *n + GP_FRAME_HEADER, payload, len);
	*n += GP_FRAME_HEADER + len;
}

TEST(frames_any_split)
{
	static struct gp_frame_reader r;
	uint8_t buf[256];
	size_t n = 0, at, used, step;
	int rc, got;

	put(buf, &n, GP_FRAME_STDOUT, "hello");
	put(buf, &n, GP_FRAME_EOF, "");
	put(buf, &n, GP_FRAME_STDERR, "a longer piece of output");
	for (step = 1; step <= n; step++) {
		gp_frame_reader_init(&r);
		got = 0;
		for (at = 0; at < n; at += used) {
			size_t k = step < n - at ? step : n - at;
			rc = gp_frame_read(&r, buf + at, k, &used);
			CHECK(rc >= 0);
			if (rc != 1)
				continue;
			if (got == 0)
				CHECK(r.type == GP_FRAME_STDOUT && r.len == 5 &&
				    memcmp(r.payload, "hello", 5) == 0);
			if (got == 1)
				CHECK(r.type == GP_FRAME_EOF && r.len == 0);
			if (got == 2)
				CHECK(r.type == GP_FRAME_STDERR && r.len == 24);
			got++;
		}
		CHECK_EQ(got, 3);
	}
}

TEST(bad_headers)
{
	static struct gp_frame_reader r;
	uint8_t unknown[4] = {99, 0, 0, 1}, huge[4] = {GP_FRAME_DATA, 0x01,
	    0x00, 0x01}, zero[4] = {0, 0, 0, 0};
	struct gp_frame_scan s;
	size_t used;

	gp_frame_reader_init(&r);
	CHECK(gp_frame_read(&r, unknown, 4, &used) < 0);
	gp_frame_reader_init(&r);
	CHECK(gp_frame_read(&r, huge, 4, &used) < 0); /* 65537 > 32 KiB */
	gp_frame_reader_init(&r);
	CHECK(gp_frame_read(&r, zero, 4, &used) < 0);
	memset(&s, 0, sizeof(s));
	CHECK(gp_frame_scan(&s, huge, 4) < 0);
}

TEST(scan_boundaries)
{
	struct gp_frame_scan s;
	uint8_t buf[64];
	size_t n = 0, i;

	put(buf, &n, GP_FRAME_STDOUT, "abc");
	put(buf, &n, GP_FRAME_EXIT, "\x00\x00\x00\x07");
	memset(&s, 0, sizeof(s));
	CHECK(gp_frame_scan_at_boundary(&s));
	for (i = 0; i < n; i++) {
		CHECK(gp_frame_scan(&s, buf + i, 1) == 0);
		/* Boundaries: after "abc" (7) and at the end. */
		CHECK_EQ(gp_frame_scan_at_boundary(&s), i + 1 == 7 ||
		    i + 1 == n);
	}
	CHECK_EQ(s.last_type, GP_FRAME_EXIT);
	CHECK_EQ(s.frames, 2);
}

TEST(open_codec)
{
	struct gp_stream_open o, back;
	char *argv[] = {"sh", "-c", "echo hi", NULL};
	char text[1024], err[256];
	int n;

	memset(&o, 0, sizeof(o));
	o.kind = GP_STREAM_EXEC;
	o.tty = 1;
	o.rows = 24;
	o.cols = 80;
	strcpy(o.term, "xterm-256color");
	o.argv = argv;
	o.argc = 3;
	n = gp_stream_open_encode(&o, text, sizeof(text));
	CHECK(n > 0);
	CHECK(gp_stream_open_decode((uint8_t *)text, (size_t)n, &back, err,
	    sizeof(err)) == 0);
	CHECK(back.kind == GP_STREAM_EXEC && back.tty && back.rows == 24 &&
	    back.cols == 80 && back.argc == 3);
	CHECK_STR(back.term, "xterm-256color");
	CHECK_STR(back.argv[2], "echo hi");
	CHECK(back.argv[3] == NULL);
	gp_stream_open_fini(&back);

#define REFUSED(json)                                                       \
	do {                                                                \
		CHECK(gp_stream_open_decode((const uint8_t *)(json),        \
		    strlen(json), &back, err, sizeof(err)) != 0);           \
		gp_stream_open_fini(&back);                                 \
	} while (0)
	REFUSED("{\"kind\":\"tcp\"}");			/* no port */
	REFUSED("{\"kind\":\"exec\",\"port\":22}");	/* port not for exec */
	REFUSED("{\"kind\":\"tcp\",\"port\":70000}");
	REFUSED("{\"kind\":\"ssh\"}");
	REFUSED("{\"kind\":\"pty\",\"extra\":1}");
	REFUSED("{\"kind\":\"exec\",\"argv\":[]}");
	REFUSED("{\"kind\":\"exec\",\"argv\":[1]}");
	REFUSED("{\"kind\":\"pty\",\"term\":\"x;rm -rf\"}");
	REFUSED("{\"kind\":\"exec\",\"argv\":[\"a\\u0000b\"]}");
	REFUSED("[]");
	CHECK(gp_stream_open_decode((const uint8_t *)"{\"kind\":\"pty\"}", 14,
	    &back, err, sizeof(err)) == 0 && back.tty && back.argc == 0);
	gp_stream_open_fini(&back);
}

TEST(upgrade_answer)
{
	const char *ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n"
			 "\r\nREST";
	const char *err = "HTTP/1.1 409 Conflict\r\ncontent-length: 12\r\n\r\n";
	int64_t cl;
	int status = 0;

	CHECK_EQ(gp_upgrade_answer_parse(ok, strlen(ok), &status, &cl),
	    strlen(ok) - 4);
	CHECK_EQ(status, 101);
	CHECK_EQ(cl, -1);
	CHECK_EQ(gp_upgrade_answer_parse(ok, 20, &status, &cl), 0);
	CHECK(gp_upgrade_answer_parse(err, strlen(err), &status, &cl) > 0);
	CHECK_EQ(status, 409);
	CHECK_EQ(cl, 12);
	CHECK(gp_upgrade_answer_parse("SSH-2.0-x\r\n\r\n", 13, &status,
	    &cl) < 0);
	CHECK(gp_upgrade_answer_parse("HTTP/1.1 99x\r\n\r\n", 16, &status,
	    &cl) < 0);
}

int
main(void)
{
	RUN(frames_any_split);
	RUN(bad_headers);
	RUN(scan_boundaries);
	RUN(open_codec);
	RUN(upgrade_answer);
	return unit_report();
}
