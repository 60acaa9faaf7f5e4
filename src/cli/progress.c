/*
 * progress.c: a progress line for long transfers (`checkpoint get`, and
 * the image and data commands): "LABEL  42% [####......] 1.2G/2.9G
 * 35.2M/s ETA 0:48", redrawn in place on stderr at most ten times a
 * second, only when stderr is a terminal (and GPUPOOL_NO_PROGRESS is not
 * set), so scripts and logs never see it. Safe to update from several
 * transfer threads at once.
 */
#include <sys/ioctl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

#define REDRAW_MS 100

static void
format_size(int64_t bytes, char *out, size_t len)
{
	static const char units[] = "BKMGTP";
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, len, "%lldB", (long long)bytes);
	else
		snprintf(out, len, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

void
gp_progress_format(char *out, size_t len, const char *label, int64_t done,
    int64_t total, int64_t elapsed_ms, int width)
{
	char d[16], t[16], rate[24], eta[32], bar[64];
	int pct = -1, barw, fill, i;
	double bps = 0;

	if (done < 0)
		done = 0;
	if (total > 0 && done > total)
		done = total;
	format_size(done, d, sizeof(d));
	format_size(total, t, sizeof(t));
	if (elapsed_ms >= 500 && done > 0)
		bps = (double)done * 1000.0 / (double)elapsed_ms;
	if (bps > 0) {
		format_size((int64_t)bps, rate, sizeof(rate));
		strcat(rate, "/s");
	} else
		snprintf(rate, sizeof(rate), "-");
	eta[0] = '\0';
	if (total > 0) {
		pct = (int)(done * 100 / total);
		if (bps > 0 && done < total) {
			char e[20];
			gp_cli_format_elapsed((int64_t)((double)(total - done) /
			                          bps * 1000.0),
			    e, sizeof(e));
			snprintf(eta, sizeof(eta), " ETA %s", e);
		}
	}
	/* The bar takes what the other fields leave of the width. */
	barw = width - (int)strlen(label) - 44;
	if (barw > 30)
		barw = 30;
	if (pct < 0 || barw < 5) {
		snprintf(out, len, "%s %s%s%s %s", label, d,
		    total > 0 ? "/" : "", total > 0 ? t : "", rate);
		if (pct >= 0)
			snprintf(out + strlen(out), len - strlen(out),
			    " %d%%%s", pct, eta);
		return;
	}
	fill = barw * pct / 100;
	for (i = 0; i < barw; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[barw] = '\0';
	snprintf(out, len, "%s %3d%% [%s] %s/%s %s%s", label, pct, bar, d, t,
	    rate, eta);
}

static int
term_width(FILE *out)
{
	struct winsize ws;

	if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		return ws.ws_col;
	return 80;
}

void
gp_progress_begin(struct gp_progress *p, const char *label, int64_t total)
{
	const char *off = getenv("GPUPOOL_NO_PROGRESS");

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	p->out = stderr;
	gp_strlcpy(p->label, label, sizeof(p->label));
	p->total = total;
	p->start_ms = gp_mono_ms();
	p->enabled = isatty(fileno(stderr)) && (off == NULL || off[0] == '\0');
}

static void
draw(struct gp_progress *p, int64_t now)
{
	char line[256];
	int w = term_width(p->out);

	gp_progress_format(line, sizeof(line), p->label, p->done, p->total,
	    now - p->start_ms, w - 1);
	fprintf(p->out, "\r%.*s\033[K", w - 1, line);
	fflush(p->out);
	p->last_ms = now;
	p->drawn = 1;
}

void
gp_progress_update(struct gp_progress *p, int64_t done, int64_t total)
{
	int64_t now;

	if (!p->enabled)
		return;
	pthread_mutex_lock(&p->lock);
	if (total > 0)
		p->total = total;
	if (done > p->done)
		p->done = done;
	now = gp_mono_ms();
	if (now - p->last_ms >= REDRAW_MS ||
	    (p->total > 0 && p->done >= p->total))
		draw(p, now);
	pthread_mutex_unlock(&p->lock);
}

void
gp_progress_callback(void *arg, int64_t done, int64_t total)
{
	gp_progress_update(arg, done, total);
}

void
gp_progress_end(struct gp_progress *p)
{
	pthread_mutex_lock(&p->lock);
	if (p->enabled && p->drawn) {
		fputs("\r\033[K", p->out);
		fflush(p->out);
	}
	p->drawn = 0;
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_destroy(&p->lock);
}
