/*
 * stream.h: the interactive stream protocol (docs/interactive.md), shared
 * by the coordinator's relay (coord/relay.c), the agent's attach
 * (agent/attach.c) and the CLI (cli/interactive.c). Pure: no I/O.
 *
 * A stream is a byte pipe between a client and a job, spliced by the
 * coordinator from two connections that both dialled it (HTTP/1.1
 * Upgrade: gpupool-stream/1). Both directions carry frames:
 *
 *	+--------+--------------------------+------------------+
 *	| type   | payload length (24 bits, | payload          |
 *	| 1 byte | big-endian, <= 32 KiB)   |                  |
 *	+--------+--------------------------+------------------+
 *
 * The client's first frame is GP_FRAME_OPEN (a JSON object: what to run
 * or which port); the agent answers GP_FRAME_READY or GP_FRAME_ERROR.
 */
#ifndef GP_STREAM_H
#define GP_STREAM_H

#include <stddef.h>
#include <stdint.h>

#define GP_STREAM_PROTOCOL "gpupool-stream/1"
#define GP_FRAME_HEADER 4
#define GP_FRAME_MAX (32 * 1024) /* the largest payload */
#define GP_STREAM_ARGV_MAX 256	 /* words of an exec's command */

enum gp_frame_type {
	GP_FRAME_OPEN = 1,   /* client: JSON, what to open */
	GP_FRAME_DATA = 2,   /* client: stdin / bytes to the job's port */
	GP_FRAME_STDOUT = 3, /* agent: stdout / bytes from the job's port */
	GP_FRAME_STDERR = 4, /* agent: stderr (exec without a tty) */
	GP_FRAME_EOF = 5,    /* either: the sender's data direction ended */
	GP_FRAME_RESIZE = 6, /* client: rows, cols (2 x u16 BE) */
	GP_FRAME_SIGNAL = 7, /* client: a signal number (1 byte) */
	GP_FRAME_EXIT = 8,   /* agent: exit code (i32 BE); 128+n: signal n */
	GP_FRAME_ERROR = 9,  /* agent or coordinator: text; the end */
	GP_FRAME_NOTICE = 10, /* coordinator: text for the terminal */
	GP_FRAME_READY = 11, /* agent: the process runs / the port answered */
	GP_FRAME_TYPE_MAX = 11,
};

/* What a stream opens. */
enum gp_stream_kind { GP_STREAM_EXEC = 1, GP_STREAM_PTY, GP_STREAM_TCP };

/* "exec", "pty", "tcp" <-> the kind; 0 for an unknown name. */
const char *gp_stream_kind_name(int kind);
int gp_stream_kind_parse(const char *name);

/* Writes a frame header for type and len (<= GP_FRAME_MAX) into out. */
void gp_frame_header(uint8_t out[GP_FRAME_HEADER], int type, size_t len);

/*
 * An incremental frame reader over a byte stream, for untrusted input:
 * it never reads past what it is given and never keeps more than one
 * frame (GP_FRAME_HEADER + GP_FRAME_MAX bytes, in the caller's struct).
 */
struct gp_frame_reader {
	uint8_t head[GP_FRAME_HEADER];
	size_t head_have;
	int type;
	size_t len, have;
	uint8_t payload[GP_FRAME_MAX];
};
void gp_frame_reader_init(struct gp_frame_reader *r);
/*
 * Feeds up to n bytes of data; *used says how many were taken. Returns 1
 * when a whole frame is ready (r->type, r->payload, r->len; the next call
 * starts the next frame), 0 when more bytes are needed (all were used),
 * GP_EINVAL on a bad frame (unknown type, too long): the stream is broken.
 */
int gp_frame_read(struct gp_frame_reader *r, const uint8_t *data, size_t n,
    size_t *used);

/*
 * The relay's view of frames going by: where the boundaries are, with no
 * payload kept (the coordinator copies bytes through). Feeding it every
 * byte of one direction in order, at_boundary says whether a frame of
 * our own may be put in between now.
 */
struct gp_frame_scan {
	uint8_t head[GP_FRAME_HEADER];
	size_t head_have;
	size_t left;	/* payload bytes still to pass */
	int last_type;	/* the type of the last header seen; 0: none */
	int64_t frames;
};
/* 0, or GP_EINVAL on a bad header (the stream is broken). */
int gp_frame_scan(struct gp_frame_scan *s, const uint8_t *data, size_t n);
int gp_frame_scan_at_boundary(const struct gp_frame_scan *s);

/* What an OPEN frame asks for (decoded by gp_stream_open_decode). */
struct gp_stream_open {
	int kind;		/* enum gp_stream_kind */
	int tty;		/* exec/pty: a terminal */
	int rows, cols;		/* its size; 0: unknown */
	char term[64];		/* TERM; "" for none */
	int port;		/* tcp: the job's loopback port */
	char **argv;		/* exec: NULL-ended, owned; NULL: a shell */
	int argc;
};
/*
 * Decodes an OPEN payload (JSON: {"kind": "exec", "argv": [...], "tty":
 * true, "rows": 24, "cols": 80, "term": "xterm"} or {"kind": "tcp",
 * "port": 22}). Unknown fields are refused. 0, or GP_EINVAL with err.
 * Release with gp_stream_open_fini whatever the result.
 */
int gp_stream_open_decode(const uint8_t *data, size_t len,
    struct gp_stream_open *open, char *err, size_t errlen);
void gp_stream_open_fini(struct gp_stream_open *open);
/* Encodes open as an OPEN payload into out; its length or GP_EINVAL. */
int gp_stream_open_encode(const struct gp_stream_open *open, char *out,
    size_t outlen);

/*
 * Parses the answer to an Upgrade request, as far as it has come: the
 * status line and headers up to the blank line. Returns the header's
 * length (the bytes after it are the stream's, or an error's body) with
 * *status set, 0 when the blank line has not come yet, GP_EINVAL when it
 * is not HTTP/1.x or longer than 16 KiB. *content_length: its header's
 * value, -1 without one.
 */
int gp_upgrade_answer_parse(const char *data, size_t len, int *status,
    int64_t *content_length);

#endif
