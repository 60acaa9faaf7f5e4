/*
 * top.c: `gpupool top`, a live view of the pool in the terminal: the
 * nodes and each GPU (its use, memory, temperature, power, and the job
 * and user on it), the running jobs and the queue with the reason each
 * job waits (the scheduler's "wait" object when the coordinator gives
 * one, else what the job says: a budget hold, or queued). Redraws every
 * --interval seconds and at once on any key; q or Ctrl-C quits and
 * gives the terminal back as it was. Without a terminal (or with --once)
 * it prints plain frames, which is what scripts and tests read.
 *
 * The frame is built by gp_cli_render_top, a pure function of the
 * coordinator's answers to GET /v1/nodes and GET /v1/jobs.
 */
#include <sys/ioctl.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

/* ---- the frame ---- */

/* Appends one line, cut at width columns (the text is ASCII). */
static int line(struct gp_buf *out, int width, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
line(struct gp_buf *out, int width, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	n = strlen(text);
	while (n > 0 && text[n - 1] == ' ')
		n--;
	if (width > 0 && n > (size_t)width)
		n = (size_t)width;
	if (gp_buf_append(out, text, n) != 0 || gp_buf_append(out, "\n", 1))
		return GP_ENOMEM;
	return 0;
}

static int64_t
int_field(json_t *o, const char *key, int64_t def)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : def;
}

static const char *
str_field(json_t *o, const char *key, const char *def)
{
	const char *s = gp_cli_json_str(o, key);

	return s != NULL ? s : def;
}

/* "[#####     ]" for a percentage, w cells inside. */
static void
bar(int pct, int w, char *out, size_t len)
{
	int i, fill;

	if (w + 3 > (int)len)
		w = (int)len - 3;
	fill = pct <= 0 ? 0 : pct >= 100 ? w : (pct * w + 50) / 100;
	out[0] = '[';
	for (i = 0; i < w; i++)
		out[1 + i] = i < fill ? '#' : ' ';
	out[1 + w] = ']';
	out[2 + w] = '\0';
}

static int64_t
time_field(json_t *o, const char *key)
{
	const char *s = gp_cli_json_str(o, key);
	int64_t ms;

	return s != NULL && gp_parse_time(s, &ms) == 0 ? ms : -1;
}

/* Counts "up", "paused", "down", "left" nodes and GPUs by use. */
struct summary {
	int nodes[4], gpus_busy, gpus_idle, gpus_unlent, gpus_down;
	int running, queued;
};

static void
summarise(json_t *nodes, json_t *jobs, struct summary *s)
{
	static const char *const states[] = {"up", "paused", "down", "left"};
	json_t *n, *g, *j;
	size_t i, k;
	int st;

	memset(s, 0, sizeof(*s));
	json_array_foreach(nodes, i, n)
	{
		const char *state = str_field(n, "state", "?");
		for (st = 0; st < 4 && strcmp(state, states[st]) != 0; st++)
			;
		if (st < 4)
			s->nodes[st]++;
		json_array_foreach(json_object_get(n, "gpus"), k, g)
		{
			if (st >= 2)
				s->gpus_down++;
			else if (json_is_integer(json_object_get(g, "job")))
				s->gpus_busy++;
			else if (st == 1 ||
			    !json_is_true(json_object_get(g, "lent")))
				s->gpus_unlent++;
			else
				s->gpus_idle++;
		}
	}
	json_array_foreach(jobs, i, j)
	{
		const char *state = str_field(j, "state", "");
		s->running += strcmp(state, "running") == 0;
		s->queued += strcmp(state, "queued") == 0;
	}
}

static int
render_gpus(json_t *nodes, int width, int max_lines, struct gp_buf *out,
    int *used)
{
	json_t *n, *g;
	size_t i, k;
	int rc = 0, shown = 0, total = 0;
	char util[40], mem[40], a[16], b[16], temp[16], power[16], job[24];

	json_array_foreach(nodes, i, n)
	{
		size_t ng = json_array_size(json_object_get(n, "gpus"));
		total += ng > 0 ? (int)ng : 1;
	}
	rc |= line(out, width,
	    "%-14s %-6s %3s  %-14s %-17s %-13s %5s %6s "
	    "%6s  %s",
	    "NODE", "STATE", "GPU", "MODEL", "UTIL", "MEM", "TEMP", "POWER",
	    "JOB", "USER");
	shown++;
	json_array_foreach(nodes, i, n)
	{
		const char *name = str_field(n, "name", "?");
		const char *state = str_field(n, "state", "?");
		int up =
		    strcmp(state, "up") == 0 || strcmp(state, "paused") == 0;
		json_t *gpus = json_object_get(n, "gpus");

		if (json_array_size(gpus) == 0) {
			if (max_lines > 0 && shown >= max_lines - 1)
				break;
			rc |= line(out, width, "%-14.14s %-6.6s %3s", name,
			    state, "-");
			shown++;
			continue;
		}
		json_array_foreach(gpus, k, g)
		{
			int64_t pct = int_field(g, "util", 0);
			int64_t t = int_field(g, "temp_c", -1);
			int64_t p = int_field(g, "power_mw", -1);

			if (max_lines > 0 && shown >= max_lines - 1)
				goto more;
			if (up) {
				bar((int)pct, 10, util, sizeof(util));
				snprintf(util + strlen(util),
				    sizeof(util) - strlen(util), " %3d%%",
				    (int)pct);
				gp_cli_format_mib(int_field(g, "mem_used_mib",
				                      0),
				    a, sizeof(a));
			} else {
				snprintf(util, sizeof(util), "-");
				snprintf(a, sizeof(a), "-");
			}
			gp_cli_format_mib(int_field(g, "mem_mib", 0), b,
			    sizeof(b));
			snprintf(mem, sizeof(mem), "%s/%s", a, b);
			if (up && t >= 0)
				snprintf(temp, sizeof(temp), "%dC", (int)t);
			else
				snprintf(temp, sizeof(temp), "-");
			if (up && p >= 0)
				snprintf(power, sizeof(power), "%dW",
				    (int)((p + 500) / 1000));
			else
				snprintf(power, sizeof(power), "-");
			if (json_is_integer(json_object_get(g, "job")))
				snprintf(job, sizeof(job), "%lld",
				    (long long)int_field(g, "job", 0));
			else
				snprintf(job, sizeof(job),
				    up &&
				            !json_is_true(
				                json_object_get(g, "lent"))
				        ? "unlent"
				        : "-");
			rc |= line(out, width,
			    "%-14.14s %-6.6s %3lld  %-14.14s %-17s %-13s %5s "
			    "%6s %6s  %s",
			    k == 0 ? name : "", k == 0 ? state : "",
			    (long long)int_field(g, "index", (int64_t)k),
			    str_field(g, "model", "?"), util, mem, temp, power,
			    job, str_field(g, "user", "-"));
			shown++;
		}
	}
	*used = shown;
	return rc;
more:
	rc |= line(out, width, "  ... %d more GPU rows", total - (shown - 1));
	*used = shown + 1;
	return rc;
}

/*
 * Why a queued job waits: the scheduler's reason, its explanation and
 * when the job is expected to start (reason, why: never NULL; expected:
 * -1 when not known), from the job's "wait" object when present, else
 * from its budget hold, else its state.
 */
static void
wait_reason(json_t *job, const char **reason, const char **why,
    int64_t *expected)
{
	json_t *w = json_object_get(job, "wait");
	const char *hold = str_field(job, "hold_reason", "");

	*expected = -1;
	if (json_is_object(w) && gp_cli_json_str(w, "reason") != NULL) {
		*reason = str_field(w, "reason", "?");
		*why = str_field(w, "why", "");
		*expected = time_field(w, "expected_start");
	} else if (hold[0] != '\0') {
		*reason = "held";
		*why = hold;
	} else {
		*reason = str_field(job, "state", "?");
		*why = "";
	}
}

/* The scheduler's place of a queued job (wait.position), else INT64_MAX. */
static int64_t
queue_position(json_t *job)
{
	json_t *w = json_object_get(job, "wait");

	return json_is_object(w) ? int_field(w, "position", INT64_MAX)
	                         : INT64_MAX;
}

/* Queued jobs in the scheduler's order when it gives one, else as listed. */
struct queued {
	json_t *job;
	int64_t position;
	size_t index;
};

static int
queued_cmp(const void *a, const void *b)
{
	const struct queued *x = a, *y = b;

	if (x->position != y->position)
		return x->position < y->position ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * A fraction's use as the enforcement layer measured it (the job's
 * first part's gpu_use), "  gpu 512/1024M share 0.50 util 40%", or "".
 */
static void
gpu_use_text(json_t *job, char *out, size_t len)
{
	json_t *u = json_object_get(json_array_get(json_object_get(job,
	    "parts"), 0), "gpu_use");

	out[0] = '\0';
	if (!json_is_object(u))
		return;
	snprintf(out, len, "  gpu %lld/%lldM share %.2f util %lld%%",
	    (long long)int_field(u, "mem_used_mib", 0),
	    (long long)int_field(u, "mem_limit_mib", 0),
	    json_number_value(json_object_get(u, "share_now")),
	    (long long)int_field(u, "util", 0));
}

static int
render_jobs(json_t *jobs, int64_t now_ms, int width, int max_lines,
    struct gp_buf *out)
{
	struct queued *q;
	json_t *j;
	size_t i, n = 0, k;
	int rc = 0, pass, shown, count;
	char when[24], gpus[16], why[400], clock[16];

	/* Each section's jobs: running as listed, the queue sorted. */
	q = calloc(json_array_size(jobs) + 1, sizeof(*q));
	if (q == NULL)
		return GP_ENOMEM;
	for (pass = 0; pass < 2; pass++) {
		const char *want = pass == 0 ? "running" : "queued";
		n = 0;
		json_array_foreach(jobs, i, j)
		{
			if (strcmp(str_field(j, "state", ""), want) != 0)
				continue;
			q[n].job = j;
			q[n].position = pass == 0 ? 0 : queue_position(j);
			q[n].index = i;
			n++;
		}
		if (pass == 1)
			qsort(q, n, sizeof(*q), queued_cmp);
		count = (int)n;
		rc |= line(out, width, "%s", "");
		rc |= line(out, width, "%s (%d)",
		    pass == 0 ? "RUNNING" : "QUEUE", count);
		if (count == 0)
			continue;
		if (pass == 0)
			rc |= line(out, width, "%8s  %-12s %-16s %-14s %4s  %s",
			    "ID", "USER", "NAME", "NODE", "GPUS", "ELAPSED");
		else
			rc |= line(out, width,
			    "%8s  %-12s %-16s %-14s %4s  %-8s %s", "ID", "USER",
			    "NAME", "REASON", "GPUS", "WAITING", "WHY");
		shown = 0;
		for (k = 0; k < n; k++) {
			int64_t since, expected;
			const char *reason, *text;
			j = q[k].job;
			if (max_lines > 0 && shown >= max_lines) {
				rc |= line(out, width, "%8s  ... %d more", "",
				    count - shown);
				break;
			}
			since = time_field(j,
			    pass == 0 ? "started_at" : "submitted_at");
			if (since > 0)
				gp_cli_format_elapsed(now_ms - since, when,
				    sizeof(when));
			else
				snprintf(when, sizeof(when), "-");
			snprintf(gpus, sizeof(gpus), "%lld",
			    (long long)int_field(json_object_get(j, "request"),
			        "gpus", 0));
			if (pass == 0) {
				char use[96];
				gpu_use_text(j, use, sizeof(use));
				rc |= line(out, width,
				    "%8lld  %-12.12s %-16.16s "
				    "%-14.14s %4s  %s%s%s",
				    (long long)int_field(j, "id", 0),
				    str_field(j, "user", "?"),
				    str_field(j, "name", "?"),
				    str_field(j, "node", "-"), gpus, when,
				    use,
				    json_is_true(
				        json_object_get(j, "cancel_requested"))
				        ? "  (cancelling)"
				        : "");
				shown++;
				continue;
			}
			wait_reason(j, &reason, &text, &expected);
			if (expected > 0) {
				time_t t = (time_t)(expected / 1000);
				struct tm tm;
				localtime_r(&t, &tm);
				strftime(clock, sizeof(clock), "%H:%M", &tm);
				snprintf(why, sizeof(why), "%s%sstarts ~%s",
				    text, text[0] != '\0' ? "; " : "", clock);
			} else
				snprintf(why, sizeof(why), "%s", text);
			rc |= line(out, width,
			    "%8lld  %-12.12s %-16.16s %-14.14s %4s  %-8s %s",
			    (long long)int_field(j, "id", 0),
			    str_field(j, "user", "?"),
			    str_field(j, "name", "?"), reason, gpus, when, why);
			shown++;
		}
	}
	free(q);
	return rc;
}

int
gp_cli_render_top(json_t *nodes_reply, json_t *jobs_reply, const char *url,
    int64_t now_ms, int width, int height, struct gp_buf *out)
{
	json_t *nodes = json_object_get(nodes_reply, "nodes");
	json_t *jobs = json_object_get(jobs_reply, "jobs");
	struct summary s;
	char clock[16];
	time_t t = (time_t)(now_ms / 1000);
	struct tm tm;
	int rc = 0, used = 0, gpu_lines = 0, job_lines = 0;

	if (!json_is_array(nodes) || !json_is_array(jobs))
		return GP_EPROTO;
	summarise(nodes, jobs, &s);
	localtime_r(&t, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	rc |= line(out, width, "gpupool top  %s  %s", url, clock);
	rc |= line(out, width,
	    "nodes %d up, %d paused, %d down   GPUs %d busy, %d idle, %d "
	    "unlent, %d down   jobs %d running, %d queued",
	    s.nodes[0], s.nodes[1], s.nodes[2] + s.nodes[3], s.gpus_busy,
	    s.gpus_idle, s.gpus_unlent, s.gpus_down, s.running, s.queued);
	rc |= line(out, width, "%s", "");
	/* With a height: GPUs take up to half, the jobs share the rest. */
	if (height > 0) {
		gpu_lines = (height - 3) / 2;
		if (gpu_lines < 3)
			gpu_lines = 3;
	}
	rc |= render_gpus(nodes, width, gpu_lines, out, &used);
	if (height > 0) {
		job_lines = (height - 3 - used - 6) / 2;
		if (job_lines < 1)
			job_lines = 1;
	}
	rc |= render_jobs(jobs, now_ms, width, job_lines, out);
	return rc != 0 ? GP_ENOMEM : 0;
}

/* ---- the terminal ---- */

static volatile sig_atomic_t stop_top, resized;

static void
on_stop(int sig)
{
	(void)sig;
	stop_top = 1;
}

static void
on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

/* GET path; OUT: *reply. On failure writes why into err. */
static int
fetch(struct gp_cli_conn *conn, const char *path, json_t **reply, char *err,
    size_t errlen)
{
	struct gp_http_response resp;
	int rc;

	*reply = NULL;
	rc = gp_http_request(conn->http, "GET", path, NULL, 0, NULL, 10000,
	    &resp);
	if (rc != 0 || resp.status != 200) {
		gp_http_error_text(&resp, err, errlen);
		gp_http_response_fini(&resp);
		return GP_EIO;
	}
	*reply = json_loadb(resp.body, resp.body_len, 0, NULL);
	gp_http_response_fini(&resp);
	if (*reply == NULL) {
		snprintf(err, errlen, "the coordinator answered invalid JSON");
		return GP_EPROTO;
	}
	return 0;
}

/* One frame's text; an error becomes the frame when interactive. */
static int
frame(struct gp_cli_conn *conn, int width, int height, struct gp_buf *out,
    char *err, size_t errlen)
{
	json_t *nodes = NULL, *jobs = NULL;
	int rc;

	rc = fetch(conn, "/v1/nodes", &nodes, err, errlen);
	if (rc == 0)
		rc = fetch(conn, "/v1/jobs", &jobs, err, errlen);
	if (rc == 0) {
		rc = gp_cli_render_top(nodes, jobs, conn->cfg.url, gp_now_ms(),
		    width, height, out);
		if (rc != 0)
			snprintf(err, errlen,
			    "unexpected answer from the "
			    "coordinator");
	}
	json_decref(nodes);
	json_decref(jobs);
	return rc;
}

int
gp_cli_cmd_top(const struct gp_cli_args *args)
{
	const char *iv = gp_cli_value(args, "interval");
	int once = gp_cli_flag(args, "once");
	int tty = !once && isatty(STDOUT_FILENO);
	int keys = tty && isatty(STDIN_FILENO);
	struct gp_cli_conn conn;
	struct termios saved, raw;
	struct sigaction sa;
	struct winsize ws;
	struct gp_buf out = {0};
	struct pollfd pfd;
	char err[512], c;
	int64_t interval = 2, deadline;
	int rc, width, height, status = 0, first = 1;

	if (iv != NULL && gp_parse_int(iv, 1, 3600, &interval) != 0)
		return gp_cli_usage_error(args,
		    "--interval: whole seconds, 1 to 3600");
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	if (keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
		raw = saved;
		raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	} else
		keys = 0;
	if (tty)
		fputs("\033[?1049h\033[?25l",
		    stdout); /* own screen, no cursor */
	while (!stop_top) {
		width = 100;
		height = 0;
		if (getenv("COLUMNS") != NULL)
			width = atoi(getenv("COLUMNS"));
		if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 &&
		    ws.ws_col > 0) {
			width = ws.ws_col;
			height = ws.ws_row;
		}
		if (width < 40)
			width = 40;
		out.len = 0;
		rc = frame(&conn, width, height, &out, err, sizeof(err));
		if (rc != 0 && !tty) {
			gp_cli_error("%s", err);
			status = GP_CLI_EXIT_FAIL;
			break;
		}
		if (tty) {
			/* Home, each line cleared to its end, the rest cleared.
			 */
			const char *p = out.data, *nl;
			fputs("\033[H", stdout);
			if (rc != 0)
				printf("gpupool top  %s\n\ncannot reach the "
				       "coordinator: %s\033[K\n",
				    conn.cfg.url, err);
			while (rc == 0 && p != NULL &&
			    (nl = memchr(p, '\n',
			         out.len - (size_t)(p - out.data))) != NULL) {
				fwrite(p, 1, (size_t)(nl - p), stdout);
				fputs("\033[K\n", stdout);
				p = nl + 1;
			}
			fputs("\033[J", stdout);
		} else {
			if (!first)
				fputc('\n', stdout);
			fwrite(out.data, 1, out.len, stdout);
		}
		fflush(stdout);
		first = 0;
		if (once)
			break;
		deadline = gp_mono_ms() + interval * 1000;
		while (!stop_top && !resized && gp_mono_ms() < deadline) {
			pfd.fd = STDIN_FILENO;
			pfd.events = POLLIN;
			if (poll(&pfd, keys ? 1 : 0,
			        (int)(deadline - gp_mono_ms())) > 0 &&
			    read(STDIN_FILENO, &c, 1) == 1) {
				if (c == 'q' || c == 'Q')
					stop_top = 1;
				break; /* any other key: redraw now */
			}
		}
		resized = 0;
	}
	if (tty)
		fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	gp_buf_free(&out);
	gp_cli_disconnect(&conn);
	return status;
}
