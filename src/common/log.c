/*
 * log.c: the shared logger. Lines are written with one write(2) so that
 * threads do not interleave within a line.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_name = "gpupool";
static enum gp_log_level log_level = GP_LOG_INFO;
static const char *level_names[] = {"error", "warn", "info", "debug"};

void
gp_log_init(const char *name, enum gp_log_level level)
{
	log_name = name;
	log_level = level;
}

void
gp_log_set_level(enum gp_log_level level)
{
	log_level = level;
}

int
gp_log_enabled(enum gp_log_level level)
{
	return level <= log_level;
}

static void
log_write(enum gp_log_level level, const char *fmt, va_list ap,
    const char *suffix)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
	    "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    ts.tv_nsec / 1000000, log_name, level_names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if ((size_t)n >= sizeof(line) - 64)
		n = (int)sizeof(line) - 64;
	if (suffix != NULL)
		n += snprintf(line + n, sizeof(line) - (size_t)n, ": %s",
		    suffix);
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)n);
}

void
gp_log(enum gp_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	log_write(level, fmt, ap, NULL);
	va_end(ap);
}

void
gp_fatal(const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	log_write(GP_LOG_ERROR, fmt, ap, strerror(saved));
	va_end(ap);
	exit(1);
}

void
gp_fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_write(GP_LOG_ERROR, fmt, ap, NULL);
	va_end(ap);
	exit(1);
}
