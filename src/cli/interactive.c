/*
 * interactive.c: the CLI's interactive commands (docs/interactive.md):
 * shell, exec, port-forward, connect, ssh-config. Each opens streams
 * through the coordinator (GET /v1/jobs/{id}/stream with Upgrade; the
 * job's agent dials out for it) and speaks the frames of
 * common/stream.h over them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gp.h"
#include "http_client.h"
#include "jobspec.h"
#include "stream.h"
#include "util.h"

#define EXIT_STREAM 255 /* the stream broke: no exit status came */
#define IO_BUF (16 * 1024)
#define SHELL_IDLE_DEFAULT_S 3600

/* ---- one stream ---- */

struct stream {
	struct gp_http_upgraded *up;
	int fd;
	struct gp_frame_reader rd;
	/*
	 * Frames not yet sent. Sessions never block on a send: they read
	 * the job's side while theirs waits (else both could wait).
	 */
	uint8_t out[GP_FRAME_HEADER + IO_BUF + 64];
	size_t out_at, out_len;
};

/* Queues a frame if it fits (a DATA frame only into an empty queue). */
static int
queue_frame(struct stream *s, int type, const void *data, size_t len)
{
	if (s->out_at == s->out_len)
		s->out_at = s->out_len = 0;
	if (sizeof(s->out) - s->out_len < GP_FRAME_HEADER + len)
		return GP_ETOOBIG;
	gp_frame_header(s->out + s->out_len, type, len);
	if (len > 0)
		memcpy(s->out + s->out_len + GP_FRAME_HEADER, data, len);
	s->out_len += GP_FRAME_HEADER + len;
	return 0;
}

/* Sends what is queued, without blocking. 0 or GP_EIO. */
static int
flush_frames(struct stream *s)
{
	long n;

	while (s->out_at < s->out_len) {
		n = gp_http_upgraded_send(s->up, s->out + s->out_at,
		    s->out_len - s->out_at);
		if (n == GP_EAGAIN)
			return 0;
		if (n <= 0)
			return GP_EIO;
		s->out_at += (size_t)n;
	}
	return 0;
}

#define PENDING(s) ((s)->out_at < (s)->out_len)

/* Sends all of a frame, waiting as needed. 0 or GP_EIO. */
static int
send_frame(struct stream *s, int type, const void *data, size_t len)
{
	uint8_t head[GP_FRAME_HEADER];
	const uint8_t *parts[2] = {head, data};
	size_t lens[2] = {GP_FRAME_HEADER, len}, at;
	struct pollfd pf = {.fd = s->fd, .events = POLLOUT};
	long n;
	int i;

	gp_frame_header(head, type, len);
	for (i = 0; i < 2; i++)
		for (at = 0; at < lens[i];) {
			n = gp_http_upgraded_send(s->up, parts[i] + at,
			    lens[i] - at);
			if (n == GP_EAGAIN) {
				poll(&pf, 1, 1000);
				continue;
			}
			if (n <= 0)
				return GP_EIO;
			at += (size_t)n;
		}
	return 0;
}

/*
 * Reads what has come (never blocks). Returns 1 with a frame in s->rd,
 * 0 when nothing whole is there, GP_EIO at the end or when broken.
 */
static int
recv_frame(struct stream *s)
{
	uint8_t buf[GP_FRAME_HEADER];
	size_t want, used;
	long n;
	int rc;

	for (;;) {
		/* Up to the end of the frame, so that no byte waits here. */
		if (s->rd.head_have < GP_FRAME_HEADER ||
		    s->rd.have == s->rd.len) {
			want = s->rd.head_have < GP_FRAME_HEADER ?
			    GP_FRAME_HEADER - s->rd.head_have : GP_FRAME_HEADER;
			n = gp_http_upgraded_recv(s->up, buf, want);
			if (n > 0)
				rc = gp_frame_read(&s->rd, buf, (size_t)n,
				    &used);
			else
				rc = 0;
		} else {
			want = s->rd.len - s->rd.have;
			n = gp_http_upgraded_recv(s->up,
			    s->rd.payload + s->rd.have, want);
			if (n > 0) {
				s->rd.have += (size_t)n;
				rc = s->rd.have == s->rd.len;
			} else
				rc = 0;
		}
		if (n == GP_EAGAIN)
			return 0;
		if (n <= 0 || rc < 0)
			return GP_EIO;
		if (rc == 1)
			return 1;
	}
}

static void
stream_close(struct stream *s)
{
	gp_http_upgraded_free(s->up);
	s->up = NULL;
}

/*
 * Opens a stream into part of job (a gang's part; 0: rank 0, or the only
 * one) and sends open; waits for READY. idle_s: the session's idle limit
 * (0: none). Returns 0, or an exit code (said). *not_running: set when
 * the job was not running (the caller may wait).
 */
static int
stream_open(struct gp_cli_conn *conn, int64_t job, int part,
    const struct gp_stream_open *open, int64_t idle_s, struct stream *s,
    int quiet_not_running, int *not_running)
{
	struct gp_http_response resp;
	char path[160], payload[GP_FRAME_MAX];
	struct pollfd pf;
	int64_t deadline;
	int rc, n;

	memset(s, 0, sizeof(*s));
	gp_frame_reader_init(&s->rd);
	if (not_running != NULL)
		*not_running = 0;
	/* part=0 is left out: a coordinator before gangs' streams. */
	if (part > 0)
		snprintf(path, sizeof(path), "/v1/jobs/%lld/stream?kind=%s&"
		    "idle=%lld&part=%d", (long long)job,
		    gp_stream_kind_name(open->kind), (long long)idle_s, part);
	else
		snprintf(path, sizeof(path), "/v1/jobs/%lld/stream?kind=%s&"
		    "idle=%lld", (long long)job,
		    gp_stream_kind_name(open->kind), (long long)idle_s);
	rc = gp_http_upgrade(conn->http, path, NULL, 15000, &s->up, &resp);
	if (rc != 0) {
		if (resp.status == 409 && not_running != NULL)
			*not_running = 1;
		if (!(quiet_not_running && resp.status == 409))
			gp_cli_report_http(conn, rc == GP_EPERM ? 0 : rc,
			    &resp);
		gp_http_response_fini(&resp);
		return GP_CLI_EXIT_FAIL;
	}
	gp_http_response_fini(&resp);
	s->fd = gp_http_upgraded_fd(s->up);
	if ((n = gp_stream_open_encode(open, payload, sizeof(payload))) < 0 ||
	    send_frame(s, GP_FRAME_OPEN, payload, (size_t)n) != 0) {
		gp_cli_error("cannot send the stream's request");
		stream_close(s);
		return GP_CLI_EXIT_FAIL;
	}
	deadline = gp_mono_ms() + 30000;
	pf.fd = s->fd;
	pf.events = POLLIN;
	for (;;) {
		rc = recv_frame(s);
		if (rc == 1 && s->rd.type == GP_FRAME_READY)
			return 0;
		if (rc == 1 && s->rd.type == GP_FRAME_ERROR) {
			gp_cli_error("%.*s", (int)s->rd.len,
			    (const char *)s->rd.payload);
			stream_close(s);
			return GP_CLI_EXIT_FAIL;
		}
		if (rc == 1 && s->rd.type == GP_FRAME_NOTICE)
			continue;
		if (rc < 0 || rc == 1) {
			gp_cli_error("the stream into job %lld ended before it "
			    "started", (long long)job);
			stream_close(s);
			return GP_CLI_EXIT_FAIL;
		}
		if (gp_mono_ms() >= deadline) {
			gp_cli_error("job %lld's agent did not answer in 30 s",
			    (long long)job);
			stream_close(s);
			return GP_CLI_EXIT_FAIL;
		}
		poll(&pf, 1, 200);
	}
}

/* ---- a terminal or exec session ---- */

static volatile sig_atomic_t got_winch, got_signal;
static int sig_pipe[2] = {-1, -1};
static struct termios saved_tio;
static int tio_saved;

static void
on_signal(int sig)
{
	int saved = errno;
	unsigned char c = (unsigned char)sig;

	if (sig == SIGWINCH)
		got_winch = 1;
	else
		got_signal = sig;
	if (sig_pipe[1] >= 0 && write(sig_pipe[1], &c, 1) < 0)
		(void)0;
	errno = saved;
}

static void
restore_tty(void)
{
	if (tio_saved) {
		tcsetattr(0, TCSADRAIN, &saved_tio);
		tio_saved = 0;
	}
}

static int
raw_tty(void)
{
	struct termios raw;

	if (tcgetattr(0, &saved_tio) != 0)
		return -1;
	raw = saved_tio;
	cfmakeraw(&raw);
	if (tcsetattr(0, TCSADRAIN, &raw) != 0)
		return -1;
	tio_saved = 1;
	atexit(restore_tty);
	return 0;
}

static void
send_size(struct stream *s)
{
	struct winsize ws;
	uint8_t b[4];

	if (ioctl(0, TIOCGWINSZ, &ws) != 0)
		return;
	b[0] = (uint8_t)(ws.ws_row >> 8);
	b[1] = (uint8_t)ws.ws_row;
	b[2] = (uint8_t)(ws.ws_col >> 8);
	b[3] = (uint8_t)ws.ws_col;
	queue_frame(s, GP_FRAME_RESIZE, b, 4);
}

static int
write_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Runs a session on s: stdin to the job, its output to ours, until its
 * exit. tty: the terminal is ours (raw mode, size). Returns the job's
 * command's exit code, or EXIT_STREAM (said) when the stream broke.
 */
static int
session(struct stream *s, int tty)
{
	struct pollfd pf[3];
	uint8_t buf[IO_BUF];
	int stdin_open = 1, rc;
	ssize_t n;
	struct sigaction sa;

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		return EXIT_STREAM;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGWINCH, &sa, NULL);
	if (!tty) {
		/* Without a terminal our signals go to the command. */
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sigaction(SIGQUIT, &sa, NULL);
	}
	if (tty && raw_tty() != 0)
		tty = 0;
	for (;;) {
		if (flush_frames(s) != 0)
			goto broken;
		pf[0].fd = s->fd;
		pf[0].events = POLLIN | (PENDING(s) ? POLLOUT : 0);
		pf[1].fd = stdin_open && !PENDING(s) ? 0 : -1;
		pf[1].events = POLLIN;
		pf[2].fd = sig_pipe[0];
		pf[2].events = POLLIN;
		if (poll(pf, 3, gp_http_upgraded_pending(s->up) ? 0 : -1) <
		    0 && errno != EINTR)
			break;
		if (pf[2].revents) {
			while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
				;
			if (got_winch) {
				got_winch = 0;
				if (tty)
					send_size(s);
			}
			if (got_signal) {
				uint8_t sig = (uint8_t)got_signal;
				got_signal = 0;
				queue_frame(s, GP_FRAME_SIGNAL, &sig, 1);
			}
		}
		if (stdin_open && pf[1].fd >= 0 && pf[1].revents) {
			n = read(0, buf, sizeof(buf));
			if (n > 0)
				queue_frame(s, GP_FRAME_DATA, buf, (size_t)n);
			else if (n == 0 || errno != EINTR) {
				stdin_open = 0;
				if (!tty)
					queue_frame(s, GP_FRAME_EOF, NULL, 0);
			}
		}
		while ((rc = recv_frame(s)) == 1) {
			const uint8_t *p = s->rd.payload;

			switch (s->rd.type) {
			case GP_FRAME_STDOUT:
				write_all(1, p, s->rd.len);
				break;
			case GP_FRAME_STDERR:
				write_all(2, p, s->rd.len);
				break;
			case GP_FRAME_NOTICE:
				write_all(2, p, s->rd.len);
				break;
			case GP_FRAME_EXIT:
				if (s->rd.len != 4)
					goto broken;
				restore_tty();
				return (int)((uint32_t)p[0] << 24 |
				    (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
				    p[3]) & 0xff;
			case GP_FRAME_ERROR:
				restore_tty();
				fprintf(stderr, "\r\n");
				gp_cli_error("%.*s", (int)s->rd.len,
				    (const char *)p);
				return EXIT_STREAM;
			default:
				break;
			}
		}
		if (rc < 0)
			goto broken;
	}
broken:
	restore_tty();
	fprintf(stderr, "\r\n");
	gp_cli_error("the connection to the coordinator was lost: the "
	    "session ended without an exit status");
	return EXIT_STREAM;
}

/* ---- shell and exec ---- */

static int
job_operand(const char *text, int64_t *id)
{
	if (gp_cli_parse_job_id(text, id) != 0) {
		gp_cli_usage_error(NULL, "'%s' is not a job id", text);
		return -1;
	}
	return 0;
}

/* --part K: a gang's part (default 0). 0, or -1 (said). */
static int
part_option(const struct gp_cli_args *args, int *part)
{
	const char *v = gp_cli_value(args, "part");
	int64_t k = 0;

	if (v != NULL && gp_parse_int(v, 0, GP_NODES_MAX - 1, &k) != 0) {
		gp_cli_usage_error(args, "--part '%s' is not a part number "
		    "(0 to %d)", v, GP_NODES_MAX - 1);
		return -1;
	}
	*part = (int)k;
	return 0;
}

static int64_t
idle_option(const struct gp_cli_args *args, int64_t def)
{
	const char *v = gp_cli_value(args, "idle");
	int64_t s;

	if (v == NULL)
		return def;
	if (gp_parse_duration(v, &s) != 0 || s < 1)
		return -1;
	return s;
}

static void
fill_terminal(struct gp_stream_open *o)
{
	struct winsize ws;
	const char *term = getenv("TERM");

	if (ioctl(0, TIOCGWINSZ, &ws) == 0) {
		o->rows = ws.ws_row;
		o->cols = ws.ws_col;
	}
	if (term != NULL && strlen(term) < sizeof(o->term))
		snprintf(o->term, sizeof(o->term), "%s", term);
}

static int
attach_shell(struct gp_cli_conn *conn, int64_t job, int part,
    int64_t idle_s, char **argv, int argc, int *opened)
{
	struct gp_stream_open o = {0};
	struct stream s;
	int rc, tty = isatty(0);

	o.kind = tty ? GP_STREAM_PTY : GP_STREAM_EXEC;
	o.tty = tty;
	o.argv = argv;
	o.argc = argc;
	if (tty)
		fill_terminal(&o);
	rc = stream_open(conn, job, part, &o, idle_s, &s, opened != NULL,
	    opened);
	if (opened != NULL)
		*opened = *opened ? 0 : rc == 0;
	if (rc != 0)
		return rc;
	rc = session(&s, tty);
	stream_close(&s);
	return rc;
}

/* Waits for job to run, saying where it waits. 0, or an exit code. */
static int
wait_running(struct gp_cli_conn *conn, int64_t job)
{
	char last[512] = "", line[512];
	int64_t pause_ms = 20;
	json_t *reply;
	long status;
	int rc;

	for (;;) {
		const char *state;
		char path[64];

		snprintf(path, sizeof(path), "/v1/jobs/%lld", (long long)job);
		rc = gp_cli_call(conn, "GET", path, NULL, 0, &reply, &status);
		if (rc != 0)
			return rc;
		state = gp_cli_json_str(reply, "state");
		if (state != NULL && strcmp(state, "running") == 0) {
			json_decref(reply);
			if (last[0] != '\0')
				fprintf(stderr, "\n");
			return 0;
		}
		if (state == NULL || strcmp(state, "queued") != 0) {
			if (last[0] != '\0')
				fprintf(stderr, "\n");
			gp_cli_error("job %lld ended before its shell opened "
			    "(%s)", (long long)job, state != NULL ? state :
			    "?");
			json_decref(reply);
			return GP_CLI_EXIT_FAIL;
		}
		{
			json_t *w = json_object_get(reply, "wait");
			snprintf(line, sizeof(line), "job %lld queued: "
			    "position %lld, waiting: %s (%s)",
			    (long long)job, (long long)json_integer_value(
			    json_object_get(w, "position")),
			    gp_cli_json_str(w, "reason") != NULL ?
			    gp_cli_json_str(w, "reason") : "scheduling",
			    gp_cli_json_str(w, "why") != NULL ?
			    gp_cli_json_str(w, "why") : "-");
		}
		json_decref(reply);
		if (strcmp(line, last) != 0 && pause_ms >= 80) {
			fprintf(stderr, isatty(2) ? "\r\033[Kgpupool: %s" :
			    "gpupool: %s\n", line);
			snprintf(last, sizeof(last), "%s", line);
		}
		if (got_signal)
			return 130;
		usleep((useconds_t)pause_ms * 1000);
		if (pause_ms < 500)
			pause_ms = pause_ms * 2;
	}
}

static void
on_wait_signal(int sig)
{
	got_signal = sig;
}

/* Submits the shell's job: the submit options, "interactive": true. */
static int
submit_shell(struct gp_cli_conn *conn, const struct gp_cli_args *args,
    int64_t *job)
{
	static char *holder[] = {"sleep", "infinity", NULL};
	struct gp_http_response resp;
	struct gp_cli_args a = *args;
	char *text;
	struct gp_jobspec spec;
	unsigned char raw[16];
	json_t *body, *reply;
	char err[512];
	long status;
	int rc;

	a.operands = holder;
	a.noperands = 2;
	if (gp_cli_build_jobspec(&a, &spec, err, sizeof(err)) != 0) {
		gp_jobspec_fini(&spec);
		return gp_cli_usage_error(NULL, "%s", err);
	}
	if (gp_cli_value(args, "name") == NULL)
		gp_strlcpy(spec.name, "shell", sizeof(spec.name));
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(spec.idempotency_key, sizeof(spec.idempotency_key),
	    raw, sizeof(raw));
	body = gp_jobspec_encode(&spec);
	gp_jobspec_fini(&spec);
	if (body == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	/*
	 * issue 17 part B's field; a coordinator without it refuses it
	 * (400 naming the field): then the job is submitted without it.
	 */
	json_object_set_new(body, "interactive", json_true());
	reply = NULL;
	text = json_dumps(body, JSON_COMPACT);
	if (text != NULL && gp_http_request(conn->http, "POST", "/v1/jobs",
	    text, strlen(text), NULL, 0, &resp) == 0) {
		if (resp.status >= 200 && resp.status < 300)
			reply = json_loadb(resp.body, resp.body_len, 0, NULL);
		else if (resp.status == 400 && resp.body != NULL &&
		    strstr(resp.body, "interactive") != NULL)
			json_object_del(body, "interactive");
		gp_http_response_fini(&resp);
	}
	free(text);
	/* Else as submit does (the same key: a repeat makes no second job). */
	rc = reply != NULL ? 0 : gp_cli_call(conn, "POST", "/v1/jobs", body,
	    0, &reply, &status);
	json_decref(body);
	if (rc != 0)
		return rc;
	*job = json_integer_value(json_object_get(reply, "id"));
	json_decref(reply);
	if (*job <= 0) {
		gp_cli_error("the coordinator's answer has no job id");
		return GP_CLI_EXIT_FAIL;
	}
	return 0;
}

static void
cancel_job(struct gp_cli_conn *conn, int64_t job)
{
	char path[64];
	json_t *reply = NULL;
	long status;

	snprintf(path, sizeof(path), "/v1/jobs/%lld/cancel", (long long)job);
	if (gp_cli_call(conn, "POST", path, NULL, 0, &reply, &status) == 0)
		json_decref(reply);
}

int
gp_cli_cmd_shell(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	struct sigaction sa, old_int, old_term, old_hup;
	int64_t job, idle_s;
	int rc, opened = 0, tries, part;

	idle_s = idle_option(args, args->noperands > 0 ? 0 :
	    SHELL_IDLE_DEFAULT_S);
	if (idle_s < 0)
		return gp_cli_usage_error(args, "--idle: a duration (\"30m\")");
	if (part_option(args, &part) != 0)
		return GP_CLI_EXIT_USAGE;
	if (part > 0 && args->noperands == 0)
		return gp_cli_usage_error(args, "--part needs JOB: a new "
		    "interactive job's shell opens in its part 0");
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	if (args->noperands > 0) {
		if (job_operand(args->operands[0], &job) != 0) {
			gp_cli_disconnect(&conn);
			return GP_CLI_EXIT_USAGE;
		}
		rc = attach_shell(&conn, job, part, idle_s, NULL, 0, NULL);
		gp_cli_disconnect(&conn);
		return rc;
	}
	if ((rc = submit_shell(&conn, args, &job)) != 0) {
		gp_cli_disconnect(&conn);
		return rc;
	}
	fprintf(stderr, "gpupool: job %lld submitted\n", (long long)job);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_wait_signal;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	rc = wait_running(&conn, job);
	/* Running: a stream may still find its attempt not yet started. */
	for (tries = 0; rc == 0 && tries < 50 && !got_signal; tries++) {
		rc = attach_shell(&conn, job, 0, idle_s, NULL, 0, &opened);
		if (opened || rc != GP_CLI_EXIT_FAIL)
			break;
		rc = 0;
		usleep(100 * 1000);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	if (got_signal && !opened)
		rc = 130;
	/* Leaving the shell ends the job. */
	cancel_job(&conn, job);
	gp_cli_disconnect(&conn);
	return rc;
}

int
gp_cli_cmd_exec(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	struct gp_stream_open o = {0};
	struct stream s;
	int64_t job;
	int rc, tty = gp_cli_flag(args, "tty"), part;

	if (args->noperands < 2)
		return gp_cli_usage_error(args, "exec: JOB -- COMMAND [ARG...]");
	if (job_operand(args->operands[0], &job) != 0 ||
	    part_option(args, &part) != 0)
		return GP_CLI_EXIT_USAGE;
	if (tty && !isatty(0))
		return gp_cli_usage_error(args, "--tty: stdin is not a terminal");
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	o.kind = GP_STREAM_EXEC;
	o.tty = tty;
	o.argv = args->operands + 1;
	o.argc = args->noperands - 1;
	/* Options end at JOB: a "--" after it is only a separator. */
	if (o.argc > 0 && strcmp(o.argv[0], "--") == 0) {
		o.argv++;
		o.argc--;
	}
	if (o.argc == 0) {
		gp_cli_disconnect(&conn);
		return gp_cli_usage_error(args, "exec: JOB -- COMMAND "
		    "[ARG...]");
	}
	if (tty)
		fill_terminal(&o);
	rc = stream_open(&conn, job, part, &o, 0, &s, 0, NULL);
	if (rc == 0) {
		rc = session(&s, tty);
		stream_close(&s);
	}
	gp_cli_disconnect(&conn);
	return rc;
}

/* ---- TCP: connect and port-forward ---- */

/*
 * Pumps fd_in/fd_out <-> a tcp stream until both directions end.
 * Returns 0, or EXIT_STREAM (said when say) when the stream broke.
 */
static int
pump_tcp(struct stream *s, int fd_in, int fd_out, int say)
{
	struct pollfd pf[2];
	uint8_t buf[IO_BUF];
	int in_open = 1, out_open = 1, rc;
	ssize_t n;

	while (out_open || in_open || PENDING(s)) {
		if (flush_frames(s) != 0)
			goto broken;
		pf[0].fd = s->fd;
		pf[0].events = POLLIN | (PENDING(s) ? POLLOUT : 0);
		pf[1].fd = in_open && !PENDING(s) ? fd_in : -1;
		pf[1].events = POLLIN;
		if (poll(pf, 2, gp_http_upgraded_pending(s->up) ? 0 : -1) < 0 &&
		    errno != EINTR)
			return EXIT_STREAM;
		if (in_open && pf[1].fd >= 0 && pf[1].revents) {
			n = read(fd_in, buf, sizeof(buf));
			if (n > 0)
				queue_frame(s, GP_FRAME_DATA, buf, (size_t)n);
			else if (n == 0 || (errno != EINTR &&
			    errno != EAGAIN)) {
				in_open = 0;
				queue_frame(s, GP_FRAME_EOF, NULL, 0);
			}
		}
		while ((rc = recv_frame(s)) == 1) {
			if (s->rd.type == GP_FRAME_STDOUT) {
				if (write_all(fd_out, s->rd.payload,
				    s->rd.len) != 0)
					return 0;
			} else if (s->rd.type == GP_FRAME_EOF) {
				out_open = 0;
				if (fd_out == fd_in)
					shutdown(fd_out, SHUT_WR);
				else
					close(fd_out);
			} else if (s->rd.type == GP_FRAME_EXIT) {
				return 0;
			} else if (s->rd.type == GP_FRAME_ERROR) {
				if (say)
					gp_cli_error("%.*s", (int)s->rd.len,
					    (const char *)s->rd.payload);
				return EXIT_STREAM;
			}
		}
		if (rc < 0)
			goto broken;
	}
	return 0;
broken:
	if (say)
		gp_cli_error("the connection to the coordinator was lost");
	return EXIT_STREAM;
}

static int
parse_port(const char *text, int *port)
{
	int64_t v;

	if (gp_parse_int(text, 1, 65535, &v) != 0)
		return -1;
	*port = (int)v;
	return 0;
}

int
gp_cli_cmd_connect(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	struct gp_stream_open o = {0};
	struct stream s;
	int64_t job;
	int rc, port, part;

	if (job_operand(args->operands[0], &job) != 0 ||
	    part_option(args, &part) != 0)
		return GP_CLI_EXIT_USAGE;
	if (parse_port(args->operands[1], &port) != 0)
		return gp_cli_usage_error(args, "PORT: 1 to 65535");
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	o.kind = GP_STREAM_TCP;
	o.port = port;
	signal(SIGPIPE, SIG_IGN);
	rc = stream_open(&conn, job, part, &o, 0, &s, 0, NULL);
	if (rc == 0) {
		rc = pump_tcp(&s, 0, 1, 1);
		stream_close(&s);
	}
	gp_cli_disconnect(&conn);
	return rc;
}

struct forward {
	int local_port, job_port;
	int listen_fd;
};

struct forward_conn {
	struct gp_cli_conn *conn;
	int64_t job;
	int part;
	int port;
	int fd;
};

static pthread_mutex_t forward_lock = PTHREAD_MUTEX_INITIALIZER;

static void *
forward_main(void *arg)
{
	struct forward_conn *fc = arg;
	struct gp_stream_open o = {0};
	struct gp_cli_conn conn;
	struct stream s;

	/* A client per thread (libcurl handles are not shared). */
	memset(&conn, 0, sizeof(conn));
	conn.cfg = fc->conn->cfg;
	conn.http = gp_http_client_new(conn.cfg.url, conn.cfg.token,
	    conn.cfg.ca[0] != '\0' ? conn.cfg.ca : NULL);
	o.kind = GP_STREAM_TCP;
	o.port = fc->port;
	if (conn.http != NULL &&
	    stream_open(&conn, fc->job, fc->part, &o, 0, &s, 0, NULL) == 0) {
		if (pump_tcp(&s, fc->fd, fc->fd, 1) != 0) {
			pthread_mutex_lock(&forward_lock);
			fprintf(stderr, "gpupool: a connection to job %lld's "
			    "port %d ended early\n", (long long)fc->job,
			    fc->port);
			pthread_mutex_unlock(&forward_lock);
		}
		stream_close(&s);
	}
	gp_http_client_free(conn.http);
	close(fc->fd);
	free(fc);
	return NULL;
}

/*
 * The job's end, watched beside the forward (as kubectl port-forward
 * exits when its pod goes away): a thread long-polls the job (`gpupool
 * wait`'s loop) and, once it has ended, writes why and a byte to
 * wake_fd.
 */
struct job_watch {
	struct gp_cli_conn *conn;
	int64_t job;
	int wake_fd;
	char why[512];
};

static void *
job_watch_main(void *arg)
{
	struct job_watch *w = arg;
	struct gp_cli_conn conn;
	json_t *job = NULL;
	char note[480];
	int code;

	memset(&conn, 0, sizeof(conn));
	conn.cfg = w->conn->cfg;
	conn.http = gp_http_client_new(conn.cfg.url, conn.cfg.token,
	    conn.cfg.ca[0] != '\0' ? conn.cfg.ca : NULL);
	if (conn.http == NULL)
		snprintf(w->why, sizeof(w->why), "cannot follow job %lld",
		    (long long)w->job);
	else if (gp_cli_job_await(&conn, w->job, &job) != 0)
		snprintf(w->why, sizeof(w->why), "lost track of job %lld",
		    (long long)w->job);
	else {
		code = gp_cli_job_exit_code(job, note, sizeof(note));
		if (note[0] != '\0')
			gp_strlcpy(w->why, note, sizeof(w->why));
		else
			snprintf(w->why, sizeof(w->why), "job %lld ended "
			    "(%s, exit code %d)", (long long)w->job,
			    gp_cli_json_str(job, "state") ?: "?", code);
		json_decref(job);
	}
	gp_http_client_free(conn.http);
	(void)!write(w->wake_fd, "x", 1);
	return NULL;
}

int
gp_cli_cmd_port_forward(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	struct forward fw[32];
	struct pollfd pf[33];
	/* One a process, static: the thread may outlive this call. */
	static struct job_watch watch_one;
	struct job_watch *watch = &watch_one;
	pthread_t watcher;
	int wake[2];
	int64_t job;
	int n = 0, i, rc, one = 1, part;

	if (args->noperands < 2)
		return gp_cli_usage_error(args, "port-forward: JOB "
		    "[LOCAL:]PORT...");
	if (job_operand(args->operands[0], &job) != 0 ||
	    part_option(args, &part) != 0)
		return GP_CLI_EXIT_USAGE;
	if (args->noperands - 1 > (int)GP_ARRAY_LEN(fw))
		return gp_cli_usage_error(args, "at most 32 ports");
	for (i = 1; i < args->noperands; i++) {
		char text[32], *colon;

		gp_strlcpy(text, args->operands[i], sizeof(text));
		colon = strchr(text, ':');
		if (colon != NULL)
			*colon = '\0';
		if (parse_port(colon != NULL ? colon + 1 : text,
		    &fw[n].job_port) != 0 || parse_port(text,
		    &fw[n].local_port) != 0)
			return gp_cli_usage_error(args, "'%s': [LOCAL:]PORT, "
			    "ports 1 to 65535", args->operands[i]);
		n++;
	}
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < n; i++) {
		struct sockaddr_in sa = {.sin_family = AF_INET,
		    .sin_port = htons((uint16_t)fw[i].local_port),
		    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

		fw[i].listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC,
		    0);
		setsockopt(fw[i].listen_fd, SOL_SOCKET, SO_REUSEADDR, &one,
		    sizeof(one));
		if (fw[i].listen_fd < 0 || bind(fw[i].listen_fd,
		    (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    listen(fw[i].listen_fd, 128) != 0) {
			gp_cli_error("cannot listen on 127.0.0.1:%d: %s",
			    fw[i].local_port, strerror(errno));
			gp_cli_disconnect(&conn);
			return GP_CLI_EXIT_FAIL;
		}
		if (part > 0)
			printf("Forwarding from 127.0.0.1:%d -> job %lld part "
			    "%d port %d\n", fw[i].local_port, (long long)job,
			    part, fw[i].job_port);
		else
			printf("Forwarding from 127.0.0.1:%d -> job %lld port "
			    "%d\n", fw[i].local_port, (long long)job,
			    fw[i].job_port);
		pf[i].fd = fw[i].listen_fd;
		pf[i].events = POLLIN;
	}
	fflush(stdout);
	if (pipe2(wake, O_CLOEXEC) != 0) {
		gp_cli_error("pipe: %s", strerror(errno));
		gp_cli_disconnect(&conn);
		return GP_CLI_EXIT_FAIL;
	}
	watch->conn = &conn;
	watch->job = job;
	watch->wake_fd = wake[1];
	if (pthread_create(&watcher, NULL, job_watch_main, watch) != 0) {
		gp_cli_error("cannot start a thread");
		gp_cli_disconnect(&conn);
		return GP_CLI_EXIT_FAIL;
	}
	pthread_detach(watcher);
	pf[n].fd = wake[0];
	pf[n].events = POLLIN;
	for (;;) {
		if (poll(pf, (nfds_t)n + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[n].revents) {
			pthread_mutex_lock(&forward_lock);
			gp_cli_error("%s; forwarding stopped", watch->why);
			pthread_mutex_unlock(&forward_lock);
			break;
		}
		for (i = 0; i < n; i++) {
			struct forward_conn *fc;
			pthread_attr_t attr;
			pthread_t t;
			int fd;

			if (!pf[i].revents)
				continue;
			fd = accept4(fw[i].listen_fd, NULL, NULL,
			    SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			    sizeof(one));
			if ((fc = malloc(sizeof(*fc))) == NULL) {
				close(fd);
				continue;
			}
			fc->conn = &conn;
			fc->job = job;
			fc->part = part;
			fc->port = fw[i].job_port;
			fc->fd = fd;
			pthread_attr_init(&attr);
			pthread_attr_setdetachstate(&attr,
			    PTHREAD_CREATE_DETACHED);
			if (pthread_create(&t, &attr, forward_main, fc) != 0) {
				close(fd);
				free(fc);
			}
			pthread_attr_destroy(&attr);
		}
	}
	gp_cli_disconnect(&conn);
	return GP_CLI_EXIT_FAIL;
}

int
gp_cli_cmd_ssh_config(const struct gp_cli_args *args)
{
	const char *user = gp_cli_value(args, "user");
	const char *port_text = gp_cli_value(args, "port");
	char self[PATH_MAX], host[48], part_arg[24] = "";
	int64_t job;
	int port = 22, part;
	ssize_t n;

	if (job_operand(args->operands[0], &job) != 0 ||
	    part_option(args, &part) != 0)
		return GP_CLI_EXIT_USAGE;
	if (port_text != NULL && parse_port(port_text, &port) != 0)
		return gp_cli_usage_error(args, "--port: 1 to 65535");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		gp_strlcpy(self, "gpupool", sizeof(self));
	else
		self[n] = '\0';
	/* A gang's part: a host of its own (its own sshd, its own key). */
	if (part > 0) {
		snprintf(host, sizeof(host), "%lld-part%d", (long long)job,
		    part);
		snprintf(part_arg, sizeof(part_arg), "--part %d ", part);
	} else
		snprintf(host, sizeof(host), "%lld", (long long)job);
	printf("Host gpupool-%s\n", host);
	printf("    HostName gpupool-job-%s\n", host);
	printf("    HostKeyAlias gpupool-job-%s\n", host);
	if (user != NULL)
		printf("    User %s\n", user);
	printf("    ProxyCommand %s connect %s%lld %d\n", self, part_arg,
	    (long long)job, port);
	printf("    ServerAliveInterval 30\n");
	return 0;
}
