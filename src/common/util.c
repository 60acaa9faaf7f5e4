/*
 * util.c: time, parsing of human quantities, small file helpers.
 */
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gp.h"

const char *
gp_strerror(int err)
{
	switch (err) {
	case GP_OK:
		return "success";
	case GP_ENOMEM:
		return "out of memory";
	case GP_EINVAL:
		return "invalid argument";
	case GP_EIO:
		return "input/output error";
	case GP_ENOENT:
		return "not found";
	case GP_EPERM:
		return "permission denied";
	case GP_ECONN:
		return "cannot connect";
	case GP_ETIMEDOUT:
		return "timed out";
	case GP_EPROTO:
		return "protocol error";
	case GP_ECONFLICT:
		return "conflict";
	case GP_ETOOBIG:
		return "too large";
	case GP_EAUTH:
		return "authentication failed";
	case GP_EFENCED:
		return "fenced: another coordinator leads";
	case GP_ESTOPPED:
		return "given up: the process is stopping";
	}
	return "unknown error";
}

int64_t
gp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
gp_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
gp_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int
gp_cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t attr;
	int rc;

	if (pthread_condattr_init(&attr) != 0)
		return GP_ENOMEM;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	rc = pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
	return rc == 0 ? 0 : GP_ENOMEM;
}

int
gp_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t ms)
{
	struct timespec ts;

	if (ms < 0)
		ms = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return pthread_cond_timedwait(cond, mutex, &ts) == ETIMEDOUT
	    ? GP_ETIMEDOUT
	    : 0;
}

void
gp_format_time(int64_t ms, char *out, size_t len)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

int
gp_parse_time(const char *text, int64_t *ms)
{
	struct tm tm;
	int msec = 0, n = 0;

	memset(&tm, 0, sizeof(tm));
	if (sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year,
		&tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
		&msec, &n) != 7 ||
	    text[n] != '\0')
		return GP_EINVAL;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*ms = (int64_t)timegm(&tm) * 1000 + msec;
	return 0;
}

/* Reads a run of digits into *v; returns the count of digits, 0 on none. */
static int
read_number(const char **p, int64_t *v)
{
	int digits = 0;

	*v = 0;
	while (isdigit((unsigned char)**p)) {
		if (*v > (INT64_MAX - 9) / 10)
			return 0;
		*v = *v * 10 + (**p - '0');
		(*p)++;
		digits++;
	}
	return digits;
}

static int
parse_clock_duration(const char *text, int64_t *seconds)
{
	/* [D-]HH:MM:SS or MM:SS, as Slurm writes them. */
	const char *p = text;
	int64_t parts[3], days = 0, v;
	int n = 0;

	if (strchr(text, '-') != NULL) {
		if (!read_number(&p, &days) || *p != '-')
			return GP_EINVAL;
		p++;
	}
	for (;;) {
		/* Bounded, so that parts[0] * 3600 cannot overflow. */
		if (n == 3 || !read_number(&p, &v) || v > 1000000000000LL)
			return GP_EINVAL;
		parts[n++] = v;
		if (*p == '\0')
			break;
		if (*p != ':')
			return GP_EINVAL;
		p++;
	}
	if (n == 1)
		return GP_EINVAL;
	if (n == 2) /* MM:SS */
		v = parts[0] * 60 + parts[1];
	else
		v = parts[0] * 3600 + parts[1] * 60 + parts[2];
	if (days > 100000 || v > INT64_MAX / 2)
		return GP_EINVAL;
	*seconds = days * 86400 + v;
	return 0;
}

int
gp_parse_duration(const char *text, int64_t *seconds)
{
	const char *p = text;
	int64_t total = 0, v, unit;
	int any = 0;

	if (text == NULL || *text == '\0')
		return GP_EINVAL;
	if (strchr(text, ':') != NULL)
		return parse_clock_duration(text, seconds);
	while (*p != '\0') {
		if (!read_number(&p, &v))
			return GP_EINVAL;
		switch (*p) {
		case '\0':
			if (any)
				return GP_EINVAL; /* "1h30" is ambiguous */
			unit = 1;
			break;
		case 's':
			unit = 1;
			p++;
			break;
		case 'm':
			unit = 60;
			p++;
			break;
		case 'h':
			unit = 3600;
			p++;
			break;
		case 'd':
			unit = 86400;
			p++;
			break;
		default:
			return GP_EINVAL;
		}
		if (v > (INT64_MAX / 2) / unit || total > INT64_MAX / 2)
			return GP_EINVAL;
		total += v * unit;
		any = 1;
	}
	*seconds = total;
	return 0;
}

void
gp_format_duration(int64_t seconds, char *out, size_t len)
{
	int64_t d = seconds / 86400, h = seconds / 3600 % 24,
		m = seconds / 60 % 60, s = seconds % 60;

	if (d > 0)
		snprintf(out, len, "%lldd%lldh", (long long)d, (long long)h);
	else if (h > 0)
		snprintf(out, len, "%lldh%lldm", (long long)h, (long long)m);
	else if (m > 0)
		snprintf(out, len, "%lldm%llds", (long long)m, (long long)s);
	else
		snprintf(out, len, "%llds", (long long)s);
}

/*
 * A number with an optional K, M, G or T (then "iB" or "B" allowed),
 * powers of 1024, in units of 1024^base (0: bytes, 2: MiB): a bare
 * number is in those units, a unit smaller than them is refused.
 */
static int
parse_size(const char *text, int base, int64_t *out)
{
	static const char units[] = "KMGT";
	const char *p = text, *unit;
	int64_t v, mult;
	int power = base;

	if (text == NULL || !read_number(&p, &v))
		return GP_EINVAL;
	if (*p != '\0') {
		unit = strchr(units, toupper((unsigned char)*p));
		if (unit == NULL || (power = (int)(unit - units) + 1) < base)
			return GP_EINVAL;
		p++;
		if (strcasecmp(p, "iB") == 0 || strcasecmp(p, "B") == 0)
			p += strlen(p);
		if (*p != '\0')
			return GP_EINVAL;
	}
	mult = 1LL << (10 * (power - base));
	if (v > INT64_MAX / mult)
		return GP_EINVAL;
	*out = v * mult;
	return 0;
}

int
gp_parse_mib(const char *text, int64_t *mib)
{
	return parse_size(text, 2, mib);
}

int
gp_parse_bytes(const char *text, int64_t *bytes)
{
	return parse_size(text, 0, bytes);
}

void
gp_format_bytes(int64_t bytes, char *out, size_t len)
{
	static const char *const units[] = {"K", "M", "G", "T", "P"};
	double v = (double)bytes;
	int i = -1;

	if (bytes < 1024) {
		snprintf(out, len, "%lldB", (long long)bytes);
		return;
	}
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(out, len, "%.1f%siB", v, units[i]);
}

int
gp_parse_int(const char *text, int64_t min, int64_t max, int64_t *out)
{
	const char *p = text;
	int64_t v;
	int neg = 0;

	if (text == NULL)
		return GP_EINVAL;
	if (*p == '-') {
		neg = 1;
		p++;
	}
	if (!read_number(&p, &v) || *p != '\0')
		return GP_EINVAL;
	if (neg)
		v = -v;
	if (v < min || v > max)
		return GP_EINVAL;
	*out = v;
	return 0;
}

size_t
gp_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size > 0) {
		size_t c = n < size - 1 ? n : size - 1;
		memcpy(dst, src, c);
		dst[c] = '\0';
	}
	return n;
}

int
gp_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

void
gp_strv_free(char **v)
{
	size_t i;

	if (v == NULL)
		return;
	for (i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

int
gp_read_file(const char *path, size_t max, char **data, size_t *len)
{
	struct gp_buf buf = {0};
	char chunk[65536];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? GP_ENOENT : GP_EIO;
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		if (buf.len + (size_t)n > max) {
			close(fd);
			gp_buf_free(&buf);
			return GP_ETOOBIG;
		}
		if (gp_buf_append(&buf, chunk, (size_t)n) != 0)
			goto fail;
	}
	close(fd);
	if (gp_buf_append(&buf, "", 1) != 0) {
		gp_buf_free(&buf);
		return GP_ENOMEM;
	}
	*data = buf.data;
	if (len != NULL)
		*len = buf.len - 1;
	return 0;
fail:
	close(fd);
	gp_buf_free(&buf);
	return GP_EIO;
}

int
gp_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return GP_EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
gp_write_file(const char *path, const void *data, size_t len, int mode)
{
	char tmp[PATH_MAX];
	int fd;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, getpid()) >=
	    sizeof(tmp))
		return GP_EINVAL;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return GP_EIO;
	if (fchmod(fd, (mode_t)mode) != 0 || gp_write_all(fd, data, len) != 0 ||
	    fsync(fd) != 0) {
		close(fd);
		unlink(tmp);
		return GP_EIO;
	}
	close(fd);
	if (rename(tmp, path) != 0) {
		unlink(tmp);
		return GP_EIO;
	}
	return 0;
}

int
gp_mkdir_p(const char *path, int mode)
{
	char tmp[PATH_MAX];
	char *p;

	if (gp_strlcpy(tmp, path, sizeof(tmp)) >= sizeof(tmp))
		return GP_EINVAL;
	for (p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, (mode_t)mode) != 0 && errno != EEXIST)
			return GP_EIO;
		*p = '/';
	}
	if (mkdir(tmp, (mode_t)mode) != 0 && errno != EEXIST)
		return GP_EIO;
	return 0;
}

int
gp_secret_check(const char *what, const char *path, char *err,
    size_t errlen)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return GP_EIO;
	}
	if ((st.st_mode & 077) == 0)
		return 0;
	snprintf(err, errlen, "%s %s is open to other users (mode %04o); "
	    "make it the owner's alone: chmod %s %s", what, path,
	    (unsigned)(st.st_mode & 07777), S_ISDIR(st.st_mode) ? "700" :
	    "600", path);
	return GP_EPERM;
}

int
gp_secret_tighten(const char *path, int *old_mode)
{
	struct stat st;

	*old_mode = -1;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : GP_EIO;
	if (S_ISLNK(st.st_mode) || (st.st_mode & 077) == 0)
		return 0;
	if (chmod(path, st.st_mode & 07700) != 0)
		return GP_EIO;
	*old_mode = (int)(st.st_mode & 07777);
	return 0;
}

int
gp_remove_tree(const char *path)
{
	struct stat st;
	struct dirent *de;
	DIR *dir;
	char child[PATH_MAX];
	int rc = 0;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : GP_EIO;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) == 0 ? 0 : GP_EIO;
	dir = opendir(path);
	if (dir == NULL)
		return GP_EIO;
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(child, sizeof(child), "%s/%s", path,
			de->d_name) >= sizeof(child)) {
			rc = GP_EINVAL;
			continue;
		}
		if (gp_remove_tree(child) != 0)
			rc = GP_EIO;
	}
	closedir(dir);
	if (rmdir(path) != 0)
		rc = GP_EIO;
	return rc;
}

int
gp_buf_append(struct gp_buf *buf, const void *data, size_t len)
{
	if (buf->len + len + 1 > buf->cap) {
		size_t cap = buf->cap ? buf->cap : 256;
		char *p;

		while (cap < buf->len + len + 1)
			cap *= 2;
		p = realloc(buf->data, cap);
		if (p == NULL)
			return GP_ENOMEM;
		buf->data = p;
		buf->cap = cap;
	}
	if (len > 0)
		memcpy(buf->data + buf->len, data, len);
	buf->len += len;
	buf->data[buf->len] = '\0';
	return 0;
}

int
gp_buf_printf(struct gp_buf *buf, const char *fmt, ...)
{
	va_list ap;
	char small[512];
	char *big;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return GP_EINVAL;
	if ((size_t)n < sizeof(small))
		return gp_buf_append(buf, small, (size_t)n);
	big = malloc((size_t)n + 1);
	if (big == NULL)
		return GP_ENOMEM;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	n = gp_buf_append(buf, big, (size_t)n);
	free(big);
	return n;
}

void
gp_buf_free(struct gp_buf *buf)
{
	free(buf->data);
	buf->data = NULL;
	buf->len = buf->cap = 0;
}
