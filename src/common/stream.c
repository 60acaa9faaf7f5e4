/*
 * stream.c: the interactive stream protocol's codecs (stream.h): frame
 * headers, the incremental frame reader, the relay's boundary scan, the
 * OPEN frame's JSON and the Upgrade answer's head. Pure; every input may
 * come from the network (tests/fuzz/fuzz_stream.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "stream.h"
#include "util.h"

static const char *const kind_names[] = {NULL, "exec", "pty", "tcp"};

const char *
gp_stream_kind_name(int kind)
{
	if (kind < GP_STREAM_EXEC || kind > GP_STREAM_TCP)
		return "?";
	return kind_names[kind];
}

int
gp_stream_kind_parse(const char *name)
{
	int k;

	for (k = GP_STREAM_EXEC; k <= GP_STREAM_TCP; k++)
		if (name != NULL && strcmp(name, kind_names[k]) == 0)
			return k;
	return 0;
}

void
gp_frame_header(uint8_t out[GP_FRAME_HEADER], int type, size_t len)
{
	out[0] = (uint8_t)type;
	out[1] = (uint8_t)(len >> 16);
	out[2] = (uint8_t)(len >> 8);
	out[3] = (uint8_t)len;
}

/* 0 when head is a valid header (*type, *len), else GP_EINVAL. */
static int
header_decode(const uint8_t head[GP_FRAME_HEADER], int *type, size_t *len)
{
	*type = head[0];
	*len = (size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3];
	if (*type < GP_FRAME_OPEN || *type > GP_FRAME_TYPE_MAX ||
	    *len > GP_FRAME_MAX)
		return GP_EINVAL;
	return 0;
}

void
gp_frame_reader_init(struct gp_frame_reader *r)
{
	r->head_have = 0;
	r->type = 0;
	r->len = r->have = 0;
}

int
gp_frame_read(struct gp_frame_reader *r, const uint8_t *data, size_t n,
    size_t *used)
{
	size_t take, at = 0;

	*used = 0;
	if (r->head_have == GP_FRAME_HEADER && r->have == r->len) {
		/* The previous call handed out a whole frame: start anew. */
		r->head_have = 0;
		r->have = r->len = 0;
	}
	while (r->head_have < GP_FRAME_HEADER) {
		if (at == n)
			return 0;
		r->head[r->head_have++] = data[at++];
		*used = at;
		if (r->head_have == GP_FRAME_HEADER &&
		    header_decode(r->head, &r->type, &r->len) != 0)
			return GP_EINVAL;
	}
	take = r->len - r->have;
	if (take > n - at)
		take = n - at;
	memcpy(r->payload + r->have, data + at, take);
	r->have += take;
	at += take;
	*used = at;
	return r->have == r->len ? 1 : 0;
}

int
gp_frame_scan(struct gp_frame_scan *s, const uint8_t *data, size_t n)
{
	size_t at = 0, take;
	int type;

	while (at < n) {
		if (s->left > 0) {
			take = n - at < s->left ? n - at : s->left;
			s->left -= take;
			at += take;
			continue;
		}
		s->head[s->head_have++] = data[at++];
		if (s->head_have < GP_FRAME_HEADER)
			continue;
		s->head_have = 0;
		if (header_decode(s->head, &type, &s->left) != 0)
			return GP_EINVAL;
		s->last_type = type;
		s->frames++;
	}
	return 0;
}

int
gp_frame_scan_at_boundary(const struct gp_frame_scan *s)
{
	return s->left == 0 && s->head_have == 0;
}

void
gp_stream_open_fini(struct gp_stream_open *open)
{
	int i;

	for (i = 0; open->argv != NULL && i < open->argc; i++)
		free(open->argv[i]);
	free(open->argv);
	open->argv = NULL;
	open->argc = 0;
}

static int
bad(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s", what);
	return GP_EINVAL;
}

/* An integer field in [min, max], or def when absent. */
static int
int_field(json_t *o, const char *key, int min, int max, int def, int *out)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return GP_EINVAL;
	*out = (int)json_integer_value(v);
	return 0;
}

int
gp_stream_open_decode(const uint8_t *data, size_t len,
    struct gp_stream_open *open, char *err, size_t errlen)
{
	static const char *const fields[] = {"kind", "argv", "tty", "rows",
	    "cols", "term", "port", NULL};
	json_error_t jerr;
	json_t *root, *v, *argv;
	const char *key, *term;
	size_t i, n;
	int ret = GP_EINVAL;

	memset(open, 0, sizeof(*open));
	root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES,
	    &jerr);
	if (root == NULL || !json_is_object(root)) {
		json_decref(root);
		return bad(err, errlen, "open: not a JSON object");
	}
	json_object_foreach(root, key, v) {
		for (i = 0; fields[i] != NULL; i++)
			if (strcmp(key, fields[i]) == 0)
				break;
		if (fields[i] == NULL) {
			snprintf(err, errlen, "open: unknown field '%.40s'",
			    key);
			goto fail;
		}
	}
	v = json_object_get(root, "kind");
	open->kind = json_is_string(v) ?
	    gp_stream_kind_parse(json_string_value(v)) : 0;
	if (open->kind == 0) {
		bad(err, errlen, "open: kind: exec, pty or tcp");
		goto fail;
	}
	v = json_object_get(root, "tty");
	if (v != NULL && !json_is_boolean(v)) {
		bad(err, errlen, "open: tty: true or false");
		goto fail;
	}
	open->tty = open->kind == GP_STREAM_PTY || json_is_true(v);
	if (int_field(root, "rows", 0, 65535, 0, &open->rows) != 0 ||
	    int_field(root, "cols", 0, 65535, 0, &open->cols) != 0) {
		bad(err, errlen, "open: rows, cols: 0 to 65535");
		goto fail;
	}
	if (int_field(root, "port", 1, 65535, 0, &open->port) != 0 ||
	    (open->kind == GP_STREAM_TCP) != (open->port != 0)) {
		bad(err, errlen, "open: port: 1 to 65535, for tcp only");
		goto fail;
	}
	v = json_object_get(root, "term");
	if (v != NULL) {
		term = json_string_value(v);
		if (term == NULL || strlen(term) >= sizeof(open->term) ||
		    strspn(term, "abcdefghijklmnopqrstuvwxyz"
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+") !=
			strlen(term)) {
			bad(err, errlen, "open: term: a terminal name");
			goto fail;
		}
		snprintf(open->term, sizeof(open->term), "%s", term);
	}
	argv = json_object_get(root, "argv");
	if (argv != NULL) {
		if (open->kind == GP_STREAM_TCP || !json_is_array(argv) ||
		    (n = json_array_size(argv)) == 0 ||
		    n > GP_STREAM_ARGV_MAX) {
			bad(err, errlen, "open: argv: 1 to 256 words, not "
					 "for tcp");
			goto fail;
		}
		open->argv = calloc(n + 1, sizeof(*open->argv));
		if (open->argv == NULL) {
			ret = GP_ENOMEM;
			bad(err, errlen, "out of memory");
			goto fail;
		}
		for (i = 0; i < n; i++) {
			const char *w = json_string_value(json_array_get(argv,
			    i));
			if (w == NULL || json_string_length(json_array_get(
			    argv, i)) != strlen(w) || strlen(w) > 4096) {
				bad(err, errlen, "open: argv: strings without "
						 "NUL, at most 4096 bytes");
				goto fail;
			}
			if ((open->argv[i] = strdup(w)) == NULL) {
				ret = GP_ENOMEM;
				goto fail;
			}
			open->argc++;
		}
	}
	json_decref(root);
	return 0;
fail:
	json_decref(root);
	gp_stream_open_fini(open);
	return ret;
}

int
gp_stream_open_encode(const struct gp_stream_open *open, char *out,
    size_t outlen)
{
	json_t *o, *argv;
	size_t n;
	int i;

	o = json_pack("{s:s}", "kind", gp_stream_kind_name(open->kind));
	if (o == NULL)
		return GP_ENOMEM;
	if (open->kind == GP_STREAM_TCP)
		json_object_set_new(o, "port", json_integer(open->port));
	else {
		json_object_set_new(o, "tty", json_boolean(open->tty));
		if (open->rows > 0 && open->cols > 0) {
			json_object_set_new(o, "rows",
			    json_integer(open->rows));
			json_object_set_new(o, "cols",
			    json_integer(open->cols));
		}
		if (open->term[0] != '\0')
			json_object_set_new(o, "term",
			    json_string(open->term));
		if (open->argc > 0) {
			argv = json_array();
			for (i = 0; i < open->argc; i++)
				json_array_append_new(argv,
				    json_string(open->argv[i]));
			json_object_set_new(o, "argv", argv);
		}
	}
	n = json_dumpb(o, out, outlen, JSON_COMPACT);
	json_decref(o);
	if (n == 0 || n > outlen || n > GP_FRAME_MAX)
		return GP_EINVAL;
	return (int)n;
}

#define ANSWER_HEAD_MAX (16 * 1024)

int
gp_upgrade_answer_parse(const char *data, size_t len, int *status,
    int64_t *content_length)
{
	const char *end = NULL, *line, *eol, *colon;
	size_t i, head;
	char num[24];
	int64_t v;

	*content_length = -1;
	for (i = 3; i < len && i < ANSWER_HEAD_MAX; i++)
		if (memcmp(data + i - 3, "\r\n\r\n", 4) == 0) {
			end = data + i + 1;
			break;
		}
	if (end == NULL)
		return len >= ANSWER_HEAD_MAX ? GP_EINVAL : 0;
	head = (size_t)(end - data);
	/* "HTTP/1.1 101 Switching Protocols" */
	if (head < 13 || memcmp(data, "HTTP/1.", 7) != 0 || data[8] != ' ' ||
	    data[9] < '1' || data[9] > '5' || data[10] < '0' ||
	    data[10] > '9' || data[11] < '0' || data[11] > '9' ||
	    (data[12] != ' ' && data[12] != '\r'))
		return GP_EINVAL;
	*status = (data[9] - '0') * 100 + (data[10] - '0') * 10 +
	    (data[11] - '0');
	line = memchr(data, '\n', head);
	while (line != NULL && (size_t)(line + 1 - data) < head) {
		line++;
		eol = memchr(line, '\n', head - (size_t)(line - data));
		if (eol == NULL)
			break;
		colon = memchr(line, ':', (size_t)(eol - line));
		if (colon != NULL && colon - line == 14 &&
		    strncasecmp(line, "Content-Length", 14) == 0) {
			const char *p = colon + 1;
			size_t k = 0;

			while (p < eol && (*p == ' ' || *p == '\t'))
				p++;
			while (p < eol && *p >= '0' && *p <= '9' &&
			    k < sizeof(num) - 1)
				num[k++] = *p++;
			num[k] = '\0';
			if (k == 0 || gp_parse_int(num, 0, INT64_MAX / 2,
			    &v) != 0)
				return GP_EINVAL;
			*content_length = v;
		}
		line = eol;
	}
	return (int)head;
}
