/*
 * fuzz_stream.c: libFuzzer harness for the interactive stream protocol's
 * parsers (common/stream.c), which read bytes from the network: the
 * frame reader (the agent and the CLI read frames from the coordinator),
 * the relay's boundary scan (the coordinator reads the agent's frames),
 * the OPEN frame's JSON (the agent reads the client's), and the head of
 * an Upgrade answer (the agent and the CLI read the coordinator's). The
 * first byte picks which. What is accepted must keep every promised
 * bound, else abort().
 * Corpus: tests/fuzz/corpus/stream/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
frames(const uint8_t *data, size_t size)
{
	static struct gp_frame_reader r;
	struct gp_frame_scan scan;
	size_t at = 0, used, step;
	int rc, n = 0;

	memset(&scan, 0, sizeof(scan));
	gp_frame_reader_init(&r);
	/* In uneven pieces, as reads deliver them. */
	while (at < size) {
		step = 1 + (size_t)(data[at] % 7);
		if (step > size - at)
			step = size - at;
		rc = gp_frame_read(&r, data + at, step, &used);
		if (used > step)
			abort();
		if (rc < 0)
			break;
		if (rc == 1) {
			if (r.len > GP_FRAME_MAX || r.type < GP_FRAME_OPEN ||
			    r.type > GP_FRAME_TYPE_MAX)
				abort();
			n++;
		} else if (used != step)
			abort();
		at += used;
	}
	/* The scan agrees with the reader on where frames are. */
	if (gp_frame_scan(&scan, data, at) == 0 && scan.frames < n)
		abort();
}

static void
open_frame(const uint8_t *data, size_t size)
{
	struct gp_stream_open o;
	char err[256], out[GP_FRAME_MAX];
	int i;

	if (gp_stream_open_decode(data, size, &o, err, sizeof(err)) == 0) {
		if (o.kind < GP_STREAM_EXEC || o.kind > GP_STREAM_TCP ||
		    (o.kind == GP_STREAM_TCP) != (o.port > 0) ||
		    o.port > 65535 || o.rows > 65535 || o.cols > 65535 ||
		    o.argc > GP_STREAM_ARGV_MAX ||
		    strlen(o.term) >= sizeof(o.term))
			abort();
		for (i = 0; i < o.argc; i++)
			if (o.argv[i] == NULL)
				abort();
		if (o.argv != NULL && o.argv[o.argc] != NULL)
			abort();
		/* What decodes encodes (when it fits a frame). */
		(void)gp_stream_open_encode(&o, out, sizeof(out));
	}
	gp_stream_open_fini(&o);
}

static void
answer(const uint8_t *data, size_t size)
{
	int64_t cl;
	int status = 0, head;

	head = gp_upgrade_answer_parse((const char *)data, size, &status,
	    &cl);
	if (head > 0 && ((size_t)head > size || status < 100 ||
	    status > 599 || cl < -1))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		frames(data + 1, size - 1);
		break;
	case 1:
		open_frame(data + 1, size - 1);
		break;
	default:
		answer(data + 1, size - 1);
		break;
	}
	return 0;
}
