/*
 * policy.c: the owner's lending policy (policy.h): the parser of the
 * policy file (docs/provider.md), the weekly windows evaluated in local
 * time, and the policy as JSON for `gpupool provider policy show`.
 *
 * The file is edited by hand, so every error names its 1-based line and
 * the reason; the parser writes the caller's policy only on success.
 */
#include "agent/policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "jobspec.h"
#include "util.h"

#define DAY_MIN	 1440
#define WEEK_MIN (7 * DAY_MIN)
#define GRACE_DEFAULT_S 30
#define GRACE_MAX_S	3600
#define ALL_DAYS 0x7fu

static const char *const day_names[7] = {"Mon", "Tue", "Wed", "Thu", "Fri",
    "Sat", "Sun"};

void
gp_policy_default(struct gp_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->all_gpus = 1;
	p->grace_s = GRACE_DEFAULT_S;
	p->presence = GP_PRESENCE_RECLAIM;
	p->network = GP_NET_INTERNET;
}

/* The parser's state: where it is and what it says about the first error. */
struct parse {
	int line;
	char *err;
	size_t errlen;
	int seen_line[24];	/* line of each single-valued key, 0: unseen */
};

static int
fail(struct parse *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
fail(struct parse *ps, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (ps->line > 0)
		snprintf(ps->err, ps->errlen, "line %d: %s", ps->line, why);
	else
		snprintf(ps->err, ps->errlen, "%s", why);
	return GP_EINVAL;
}

static char *
trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' ||
	    end[-1] == '\r'))
		*--end = '\0';
	return s;
}

static int
parse_gpus(struct parse *ps, char *value, struct gp_policy *p)
{
	char *item, *rest = value;
	int64_t i;

	if (strcasecmp(value, "all") == 0) {
		p->all_gpus = 1;
		p->gpus = 0;
		return 0;
	}
	p->all_gpus = 0;
	p->gpus = 0;
	while ((item = strsep(&rest, ",")) != NULL) {
		item = trim(item);
		if (*item == '\0')
			return fail(ps, "gpus: empty item in the list");
		if (gp_parse_int(item, 0, GP_GPUS_MAX - 1, &i) != 0)
			return fail(ps, "gpus: '%.32s' is not a GPU index "
			    "(0..%d) or 'all'", item, GP_GPUS_MAX - 1);
		p->gpus |= UINT64_C(1) << i;
	}
	if (p->gpus == 0)
		return fail(ps, "gpus: empty list (write 'all' or indices)");
	return 0;
}

/* Sizes as elsewhere in gpupool, plus K (whole MiB only). */
static int
parse_size(const char *text, int64_t *mib)
{
	char buf[64];
	size_t n;
	int64_t kib;

	if (gp_parse_mib(text, mib) == 0)
		return 0;
	if (gp_strlcpy(buf, text, sizeof(buf)) >= sizeof(buf))
		return GP_EINVAL;
	n = strlen(buf);
	if (n >= 3 && strcasecmp(buf + n - 2, "iB") == 0)
		buf[n -= 2] = '\0';
	else if (n >= 2 && (buf[n - 1] == 'B' || buf[n - 1] == 'b'))
		buf[--n] = '\0';
	if (n < 2 || (buf[n - 1] != 'K' && buf[n - 1] != 'k'))
		return GP_EINVAL;
	buf[n - 1] = '\0';
	if (gp_parse_int(buf, 0, GP_MIB_MAX * 1024, &kib) != 0 ||
	    kib % 1024 != 0)
		return GP_EINVAL;
	*mib = kib / 1024;
	return 0;
}

static int
day_index(const char *s, size_t len)
{
	static const char *const full[7] = {"monday", "tuesday", "wednesday",
	    "thursday", "friday", "saturday", "sunday"};
	int d;

	for (d = 0; d < 7; d++)
		if ((len == 3 && strncasecmp(s, day_names[d], 3) == 0) ||
		    (len == strlen(full[d]) && strncasecmp(s, full[d], len) ==
		    0))
			return d;
	return -1;
}

/* "Mon-Fri", "Sat,Sun", "daily", "Fri-Mon", ... OUT: *days. */
static int
parse_days(const char *text, unsigned *days)
{
	const char *p = text, *end, *dash;
	unsigned set = 0;
	int a, b;

	if (strcasecmp(text, "daily") == 0) {
		*days = ALL_DAYS;
		return 0;
	}
	while (*p != '\0') {
		end = strchr(p, ',');
		if (end == NULL)
			end = p + strlen(p);
		if (end == p)
			return GP_EINVAL;
		dash = memchr(p, '-', (size_t)(end - p));
		if ((size_t)(end - p) == 8 &&
		    strncasecmp(p, "weekdays", 8) == 0)
			set |= 0x1fu;
		else if ((size_t)(end - p) == 8 &&
		    strncasecmp(p, "weekends", 8) == 0)
			set |= 0x60u;
		else if ((size_t)(end - p) == 5 &&
		    strncasecmp(p, "daily", 5) == 0)
			set |= ALL_DAYS;
		else if (dash != NULL) {
			a = day_index(p, (size_t)(dash - p));
			b = day_index(dash + 1, (size_t)(end - dash - 1));
			if (a < 0 || b < 0)
				return GP_EINVAL;
			/* A range may wrap around the week: Fri-Mon. */
			for (;;) {
				set |= 1u << a;
				if (a == b)
					break;
				a = (a + 1) % 7;
			}
		} else {
			if ((a = day_index(p, (size_t)(end - p))) < 0)
				return GP_EINVAL;
			set |= 1u << a;
		}
		p = *end == ',' ? end + 1 : end;
		if (*end == ',' && *p == '\0')
			return GP_EINVAL;
	}
	if (set == 0)
		return GP_EINVAL;
	*days = set;
	return 0;
}

/* "HH:MM", 00:00..23:59, and 24:00 when end. OUT: *min. */
static int
parse_clock(const char *s, size_t len, int end, int *min)
{
	int h, m;

	if (len != 5 || !isdigit((unsigned char)s[0]) ||
	    !isdigit((unsigned char)s[1]) || s[2] != ':' ||
	    !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]))
		return GP_EINVAL;
	h = (s[0] - '0') * 10 + (s[1] - '0');
	m = (s[3] - '0') * 10 + (s[4] - '0');
	if (m > 59 || h > 24 || (h == 24 && (!end || m != 0)))
		return GP_EINVAL;
	*min = h * 60 + m;
	return 0;
}

/* "[DAYS ]HH:MM-HH:MM". */
static int
parse_window(struct parse *ps, char *value, struct gp_policy_window *w)
{
	char *times, *dash;
	unsigned days = ALL_DAYS;

	times = value + strcspn(value, " \t");
	if (*times != '\0') {
		*times++ = '\0';
		times = trim(times);
		if (parse_days(value, &days) != 0)
			return fail(ps, "window: '%.64s' is not a list of days "
			    "(Mon..Sun, Mon-Fri, Sat,Sun, daily, weekdays, "
			    "weekends)", value);
	} else
		times = value;
	dash = strchr(times, '-');
	if (dash == NULL ||
	    parse_clock(times, (size_t)(dash - times), 0, &w->start_min) !=
	    0 ||
	    parse_clock(dash + 1, strlen(dash + 1), 1, &w->end_min) != 0)
		return fail(ps, "window: '%.64s' is not a time range "
		    "HH:MM-HH:MM (00:00..24:00)", times);
	/* An end at midnight is the end of the day it falls in. */
	if (w->end_min == 0)
		w->end_min = DAY_MIN;
	w->days = days;
	return 0;
}

enum key {
	KEY_GPUS,
	KEY_CPUS,
	KEY_MEMORY,
	KEY_MAX_JOB_TIME,
	KEY_GRACE,
	KEY_PRESENCE,
	KEY_WINDOW,
	KEY_IMAGES,
	KEY_PLAIN_JOBS,
	KEY_TRUST_KEY,
	KEY_EXPOSE,
	KEY_SCRATCH_MAX,
	KEY_GPU_SHARE,
	KEY_NETWORK,
	KEY_NET_RATE,
	KEY_INTERACTIVE,
	KEY_INTERACTIVE_GPUS,
};

static const char *const key_names[] = {"gpus", "cpus", "memory",
    "max-job-time", "checkpoint-grace", "owner-presence", "window",
    "images", "plain-jobs", "trust-key", "expose", "scratch-max",
    "gpu-share", "network", "net-rate", "interactive", "interactive-gpus"};
_Static_assert(GP_ARRAY_LEN(key_names) <= 24,
    "struct parse's seen_line has a row per key");

/* "ed25519:BASE64 [NAME]". */
static int
parse_trust_key(struct parse *ps, char *value, struct gp_policy *p)
{
	unsigned char pk[32];
	char *name = value + strcspn(value, " \t");
	int i;

	if (*name != '\0') {
		*name++ = '\0';
		name = trim(name);
	}
	if (!gp_sign_public_parse(value, pk))
		return fail(ps, "trust-key: '%.64s' is not a public key "
		    "(ed25519:<base64>, as `gpupool key create` prints)", value);
	if (*name != '\0' && !gp_name_valid(name))
		return fail(ps, "trust-key: the key's label '%.64s' must be 1 "
		    "to 64 of A-Z a-z 0-9 . _ -", name);
	for (i = 0; i < p->nkeys; i++)
		if (strcmp(p->keys[i].key, value) == 0)
			return fail(ps, "trust-key: %.60s is listed twice",
			    value);
	if (p->nkeys == GP_POLICY_KEYS_MAX)
		return fail(ps, "trust-key: too many keys (at most %d)",
		    GP_POLICY_KEYS_MAX);
	gp_strlcpy(p->keys[p->nkeys].key, value, sizeof(p->keys[0].key));
	gp_strlcpy(p->keys[p->nkeys].name, name, sizeof(p->keys[0].name));
	p->nkeys++;
	return 0;
}

/* 1 when path is dir or below it. */
static int
path_below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '\0' ||
	    path[n] == '/');
}

/*
 * "PATH [ro|rw]" (ro when not said): an absolute, normal path (no "." or
 * ".." component, no "//", no trailing "/"), not "/" and not in what the
 * sandbox makes its own (/proc, /dev, /tmp).
 */
static int
parse_expose(struct parse *ps, char *value, struct gp_policy *p)
{
	static const char *const own[] = {"/proc", "/dev", "/tmp"};
	char *mode = value + strcspn(value, " \t");
	struct gp_policy_expose *e;
	const char *c;
	size_t i;
	int read_only = 1;

	if (*mode != '\0') {
		*mode++ = '\0';
		mode = trim(mode);
		if (strcmp(mode, "rw") == 0)
			read_only = 0;
		else if (strcmp(mode, "ro") != 0)
			return fail(ps, "expose: '%.32s' is not ro or rw",
			    mode);
	}
	if (value[0] != '/' || strlen(value) >= GP_POLICY_PATH_MAX)
		return fail(ps, "expose: '%.64s' is not an absolute path (of "
		    "at most %d bytes)", value, GP_POLICY_PATH_MAX - 1);
	if (strcmp(value, "/") == 0)
		return fail(ps, "expose: not the whole root; name the "
		    "directories jobs need (expose = /opt/conda ro)");
	for (c = value; *c != '\0'; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return fail(ps, "expose: a control character in the "
			    "path");
		if (c[0] == '/' && (c[1] == '/' || c[1] == '\0' ||
		    (c[1] == '.' && (c[2] == '/' || c[2] == '\0' ||
		    (c[2] == '.' && (c[3] == '/' || c[3] == '\0'))))))
			return fail(ps, "expose: '%.64s' is not a normal path "
			    "(no //, . or .. component, no / at the end)",
			    value);
	}
	for (i = 0; i < GP_ARRAY_LEN(own); i++)
		if (path_below(value, own[i]))
			return fail(ps, "expose: %.64s is the job's own (%s "
			    "is made for each job)", value, own[i]);
	for (i = 0; i < (size_t)p->nexpose; i++)
		if (strcmp(p->expose[i].path, value) == 0)
			return fail(ps, "expose: %.64s is listed twice", value);
	if (p->nexpose == GP_POLICY_EXPOSE_MAX)
		return fail(ps, "expose: too many paths (at most %d)",
		    GP_POLICY_EXPOSE_MAX);
	e = &p->expose[p->nexpose++];
	gp_strlcpy(e->path, value, sizeof(e->path));
	e->read_only = read_only;
	return 0;
}

/* owner-presence = throttle:N% (N from 1 to 100, a tenth at most). */
static int
parse_throttle(struct parse *ps, const char *text, struct gp_policy *p)
{
	int whole = 0, tenths = 0, digits = 0;
	const char *c = text;

	while (*c >= '0' && *c <= '9' && digits < 4) {
		whole = whole * 10 + (*c++ - '0');
		digits++;
	}
	if (digits > 0 && *c == '.' && c[1] >= '0' && c[1] <= '9') {
		tenths = c[1] - '0';
		c += 2;
	}
	if (digits == 0 || digits > 3 || strcmp(c, "%") != 0 ||
	    whole * 10 + tenths < 1 || whole * 10 + tenths > 1000)
		return fail(ps, "owner-presence: throttle:'%.64s' is not a "
		    "share from 0.1%% to 100%% (\"throttle:10%%\")", text);
	p->presence = GP_PRESENCE_THROTTLE;
	p->throttle_milli = whole * 10 + tenths;
	return 0;
}

static int
parse_line(struct parse *ps, char *key, char *value, struct gp_policy *p)
{
	int64_t v;
	int k;

	for (k = 0; k < (int)GP_ARRAY_LEN(key_names); k++)
		if (strcmp(key, key_names[k]) == 0)
			break;
	if (k == (int)GP_ARRAY_LEN(key_names))
		return fail(ps, "unknown key '%.64s' (expected gpus, cpus, "
		    "memory, max-job-time, checkpoint-grace, window, "
		    "owner-presence, images, plain-jobs, trust-key, expose, "
		    "scratch-max, gpu-share, network, net-rate, interactive "
		    "or interactive-gpus)", key);
	if (*value == '\0')
		return fail(ps, "%s: missing value", key);
	if (k != KEY_WINDOW && k != KEY_TRUST_KEY && k != KEY_EXPOSE) {
		if (ps->seen_line[k] != 0)
			return fail(ps, "%s: given twice (first on line %d)",
			    key, ps->seen_line[k]);
		ps->seen_line[k] = ps->line;
	}
	switch (k) {
	case KEY_GPUS:
		return parse_gpus(ps, value, p);
	case KEY_CPUS:
		if (gp_parse_int(value, 0, GP_CPUS_MAX, &v) != 0)
			return fail(ps, "cpus: '%.64s' is not a CPU count "
			    "(0..%d)", value, GP_CPUS_MAX);
		p->cpus = (int)v;
		return 0;
	case KEY_MEMORY:
		if (parse_size(value, &v) != 0)
			return fail(ps, "memory: '%.64s' is not a size "
			    "(\"32G\", \"512M\")", value);
		if (v > GP_MIB_MAX)
			return fail(ps, "memory: '%.64s' is too large", value);
		p->mem_mib = v;
		return 0;
	case KEY_MAX_JOB_TIME:
		if (gp_parse_duration(value, &v) != 0)
			return fail(ps, "max-job-time: '%.64s' is not a "
			    "duration (\"12h\", \"90m\", \"1d\")", value);
		if (v > GP_TIME_LIMIT_MAX)
			return fail(ps, "max-job-time: '%.64s' is over a "
			    "year", value);
		p->max_job_s = v;
		return 0;
	case KEY_GRACE:
		if (gp_parse_duration(value, &v) != 0)
			return fail(ps, "checkpoint-grace: '%.64s' is not a "
			    "duration (\"30s\", \"2m\")", value);
		if (v > GRACE_MAX_S)
			return fail(ps, "checkpoint-grace: '%.64s' is over "
			    "the maximum of 1h", value);
		p->grace_s = v;
		return 0;
	case KEY_PRESENCE:
		if (strcmp(value, "reclaim") == 0)
			p->presence = GP_PRESENCE_RECLAIM;
		else if (strcmp(value, "ignore") == 0)
			p->presence = GP_PRESENCE_IGNORE;
		else if (strncmp(value, "throttle:", 9) == 0)
			return parse_throttle(ps, value + 9, p);
		else
			return fail(ps, "owner-presence: '%.64s' is not "
			    "reclaim, ignore or throttle:N%%", value);
		return 0;
	case KEY_GPU_SHARE:
		if (strcmp(value, "elastic") == 0)
			p->gpu_share = GP_SHARE_ELASTIC;
		else if (strcmp(value, "strict") == 0)
			p->gpu_share = GP_SHARE_STRICT;
		else
			return fail(ps, "gpu-share: '%.64s' is not elastic "
			    "or strict", value);
		return 0;
	case KEY_IMAGES:
		if (strcmp(value, "signed") == 0)
			p->images = GP_IMAGES_SIGNED;
		else if (strcmp(value, "any") == 0)
			p->images = GP_IMAGES_ANY;
		else if (strcmp(value, "none") == 0)
			p->images = GP_IMAGES_NONE;
		else
			return fail(ps, "images: '%.64s' is not signed, any or "
			    "none", value);
		return 0;
	case KEY_PLAIN_JOBS:
		if (strcmp(value, "allow") == 0)
			p->refuse_plain = 0;
		else if (strcmp(value, "refuse") == 0)
			p->refuse_plain = 1;
		else
			return fail(ps, "plain-jobs: '%.64s' is not allow or "
			    "refuse", value);
		return 0;
	case KEY_INTERACTIVE:
		if (strcmp(value, "allow") == 0)
			p->refuse_interactive = 0;
		else if (strcmp(value, "refuse") == 0)
			p->refuse_interactive = 1;
		else
			return fail(ps, "interactive: '%.64s' is not allow or "
			    "refuse", value);
		return 0;
	case KEY_INTERACTIVE_GPUS:
		if (gp_parse_int(value, 0, 64, &v) != 0)
			return fail(ps, "interactive-gpus: '%.64s' is not a "
			    "number of GPUs (0..64)", value);
		p->interactive_gpus = (int)v;
		return 0;
	case KEY_TRUST_KEY:
		return parse_trust_key(ps, value, p);
	case KEY_NETWORK:
		if (gp_net_policy_parse(value, &p->network) != 0)
			return fail(ps, "network: '%.64s' is not none, internet "
			    "or lan", value);
		return 0;
	case KEY_NET_RATE:
		if (gp_net_rate_parse(value, &p->net_rate_bps) != 0)
			return fail(ps, "net-rate: '%.64s' is not a rate in "
			    "bits per second from 8k to 1T (\"200M\", \"1G\", "
			    "\"500k\") or off", value);
		return 0;
	case KEY_EXPOSE:
		return parse_expose(ps, value, p);
	case KEY_SCRATCH_MAX:
		if (parse_size(value, &v) != 0 || v == 0)
			return fail(ps, "scratch-max: '%.64s' is not a size "
			    "(\"20G\", \"512M\")", value);
		if (v > GP_MIB_MAX)
			return fail(ps, "scratch-max: '%.64s' is too large",
			    value);
		p->scratch_max_mib = v;
		return 0;
	case KEY_WINDOW:
		if (p->nwindows == GP_POLICY_WINDOWS_MAX)
			return fail(ps, "window: too many windows (at most "
			    "%d)", GP_POLICY_WINDOWS_MAX);
		if (parse_window(ps, value, &p->windows[p->nwindows]) != 0)
			return GP_EINVAL;
		p->nwindows++;
		return 0;
	}
	return GP_EINVAL;
}

int
gp_policy_parse(const char *text, size_t len, struct gp_policy *p,
    int *line, char *err, size_t errlen)
{
	struct parse ps = {0};
	struct gp_policy tmp;
	char *copy, *cur, *next, *key, *value, *eq, *nul;
	int rc = 0;

	ps.err = err;
	ps.errlen = errlen;
	*line = 0;
	if (len > GP_POLICY_FILE_MAX) {
		fail(&ps, "the file is larger than %d KiB",
		    GP_POLICY_FILE_MAX / 1024);
		return GP_EINVAL;
	}
	if ((nul = memchr(text, '\0', len)) != NULL) {
		const char *q;
		ps.line = 1;
		for (q = text; q < nul; q++)
			if (*q == '\n')
				ps.line++;
		*line = ps.line;
		return fail(&ps, "NUL byte (is this a text file?)");
	}
	if ((copy = malloc(len + 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	gp_policy_default(&tmp);
	cur = copy;
	/* A UTF-8 byte order mark, as some editors write. */
	if (len >= 3 && memcmp(cur, "\xef\xbb\xbf", 3) == 0)
		cur += 3;
	for (;;) {
		ps.line++;
		next = strchr(cur, '\n');
		if (next != NULL)
			*next = '\0';
		if ((eq = strchr(cur, '#')) != NULL)
			*eq = '\0';
		key = trim(cur);
		if (*key != '\0') {
			if ((eq = strchr(key, '=')) == NULL) {
				rc = fail(&ps, "expected key = value, not "
				    "'%.64s'", key);
				break;
			}
			*eq = '\0';
			key = trim(key);
			value = trim(eq + 1);
			if ((rc = parse_line(&ps, key, value, &tmp)) != 0)
				break;
		}
		if (next == NULL)
			break;
		cur = next + 1;
	}
	free(copy);
	if (rc != 0) {
		*line = ps.line;
		return rc;
	}
	*p = tmp;
	return 0;
}

int
gp_policy_load(const char *path, struct gp_policy *p, int *line, char *err,
    size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	*line = 0;
	rc = gp_read_file(path, GP_POLICY_FILE_MAX, &text, &len);
	if (rc == GP_ETOOBIG) {
		snprintf(err, errlen, "the file is larger than %d KiB",
		    GP_POLICY_FILE_MAX / 1024);
		return GP_EINVAL;
	}
	if (rc != 0) {
		snprintf(err, errlen, "cannot read it: %s",
		    rc == GP_ENOENT ? "no such file" : strerror(errno));
		return GP_EIO;
	}
	rc = gp_policy_parse(text, len, p, line, err, errlen);
	free(text);
	return rc;
}

/* Marks the minutes of the week (Monday 00:00 = 0) the windows cover. */
static void
week_map(const struct gp_policy *p, unsigned char *week)
{
	const struct gp_policy_window *w;
	int i, d, m, start, dur;

	memset(week, 0, WEEK_MIN);
	for (i = 0; i < p->nwindows && i < GP_POLICY_WINDOWS_MAX; i++) {
		w = &p->windows[i];
		if (w->start_min < 0 || w->start_min >= DAY_MIN ||
		    w->end_min < 1 || w->end_min > DAY_MIN)
			continue;
		dur = w->end_min > w->start_min ? w->end_min - w->start_min :
		    w->end_min + DAY_MIN - w->start_min;
		for (d = 0; d < 7; d++) {
			if (!(w->days & (1u << d)))
				continue;
			start = d * DAY_MIN + w->start_min;
			for (m = 0; m < dur; m++)
				week[(start + m) % WEEK_MIN] = 1;
		}
	}
}

int
gp_policy_window_open(const struct gp_policy *p, const struct tm *tm,
    int64_t *next_change_s)
{
	unsigned char week[WEEK_MIN];
	int now, k, open, sec;

	if (p->nwindows == 0) {
		if (next_change_s != NULL)
			*next_change_s = -1;
		return 1;
	}
	week_map(p, week);
	now = ((tm->tm_wday + 6) % 7) * DAY_MIN + tm->tm_hour * 60 +
	    tm->tm_min;
	if (now < 0 || now >= WEEK_MIN)	/* a struct tm out of range */
		now = ((now % WEEK_MIN) + WEEK_MIN) % WEEK_MIN;
	open = week[now];
	if (next_change_s != NULL) {
		*next_change_s = -1;
		sec = tm->tm_sec < 0 ? 0 : tm->tm_sec > 59 ? 59 : tm->tm_sec;
		for (k = 1; k <= WEEK_MIN; k++)
			if (week[(now + k) % WEEK_MIN] != open) {
				*next_change_s = (int64_t)k * 60 - sec;
				break;
			}
	}
	return open;
}

const char *
gp_policy_images_name(enum gp_image_policy images)
{
	switch (images) {
	case GP_IMAGES_ANY:
		return "any";
	case GP_IMAGES_NONE:
		return "none";
	default:
		return "signed";
	}
}

int
gp_policy_lends_gpu(const struct gp_policy *p, int i)
{
	if (i < 0 || i >= GP_GPUS_MAX)
		return 0;
	return p->all_gpus || (p->gpus & (UINT64_C(1) << i)) != 0;
}

/* "daily", "Mon-Fri", "Mon,Wed-Fri,Sun": what parse_days reads back. */
static void
format_days(unsigned days, char *out, size_t len)
{
	size_t n = 0;
	int d = 0, e;

	out[0] = '\0';
	if ((days & ALL_DAYS) == ALL_DAYS) {
		snprintf(out, len, "daily");
		return;
	}
	while (d < 7) {
		if (!(days & (1u << d))) {
			d++;
			continue;
		}
		for (e = d; e + 1 < 7 && (days & (1u << (e + 1))); e++)
			;
		if (e - d >= 2)
			n += (size_t)snprintf(out + n, n < len ? len - n : 0,
			    "%s%s-%s", n > 0 ? "," : "", day_names[d],
			    day_names[e]);
		else
			for (; d <= e; d++)
				n += (size_t)snprintf(out + n,
				    n < len ? len - n : 0, "%s%s",
				    n > 0 ? "," : "", day_names[d]);
		d = e + 1;
	}
}

void
gp_policy_window_format(const struct gp_policy_window *w, char *out,
    size_t len)
{
	char days[64];

	format_days(w->days, days, sizeof(days));
	snprintf(out, len, "%s %02d:%02d-%02d:%02d", days, w->start_min / 60,
	    w->start_min % 60, w->end_min / 60, w->end_min % 60);
}

/* "reclaim", "ignore" or "throttle:10%" (tenths when there are). */
static void
presence_text(const struct gp_policy *p, char *out, size_t len)
{
	if (p->presence == GP_PRESENCE_THROTTLE) {
		if (p->throttle_milli % 10 == 0)
			snprintf(out, len, "throttle:%d%%",
			    p->throttle_milli / 10);
		else
			snprintf(out, len, "throttle:%d.%d%%",
			    p->throttle_milli / 10, p->throttle_milli % 10);
	} else
		gp_strlcpy(out, p->presence == GP_PRESENCE_IGNORE ? "ignore" :
		    "reclaim", len);
}

json_t *
gp_policy_to_json(const struct gp_policy *p)
{
	json_t *o, *gpus, *windows;
	char text[96];
	int i;

	o = json_object();
	if (p->all_gpus)
		gpus = json_string("all");
	else {
		gpus = json_array();
		for (i = 0; i < GP_GPUS_MAX; i++)
			if (p->gpus & (UINT64_C(1) << i))
				json_array_append_new(gpus, json_integer(i));
	}
	windows = json_array();
	for (i = 0; i < p->nwindows && i < GP_POLICY_WINDOWS_MAX; i++) {
		gp_policy_window_format(&p->windows[i], text, sizeof(text));
		json_array_append_new(windows, json_string(text));
	}
	json_object_set_new(o, "gpus", gpus);
	json_object_set_new(o, "cpus",
	    p->cpus > 0 ? json_integer(p->cpus) : json_null());
	json_object_set_new(o, "memory_mib",
	    p->mem_mib > 0 ? json_integer(p->mem_mib) : json_null());
	json_object_set_new(o, "max_job_time_s",
	    p->max_job_s > 0 ? json_integer(p->max_job_s) : json_null());
	json_object_set_new(o, "checkpoint_grace_s",
	    json_integer(p->grace_s));
	json_object_set_new(o, "windows", windows);
	presence_text(p, text, sizeof(text));
	json_object_set_new(o, "owner_presence", json_string(text));
	json_object_set_new(o, "gpu_share", json_string(
	    p->gpu_share == GP_SHARE_STRICT ? "strict" : "elastic"));
	json_object_set_new(o, "images", json_string(gp_policy_images_name(
	    p->images)));
	json_object_set_new(o, "plain_jobs", json_string(p->refuse_plain ?
	    "refuse" : "allow"));
	json_object_set_new(o, "interactive", json_string(
	    p->refuse_interactive ? "refuse" : "allow"));
	json_object_set_new(o, "interactive_gpus",
	    json_integer(p->interactive_gpus));
	windows = json_array();
	for (i = 0; i < p->nkeys && i < GP_POLICY_KEYS_MAX; i++)
		json_array_append_new(windows, json_pack("{s:s,s:s}", "key",
		    p->keys[i].key, "name", p->keys[i].name));
	json_object_set_new(o, "trusted_keys", windows);
	windows = json_array();
	for (i = 0; i < p->nexpose && i < GP_POLICY_EXPOSE_MAX; i++)
		json_array_append_new(windows, json_pack("{s:s,s:b}", "path",
		    p->expose[i].path, "read_only", p->expose[i].read_only));
	json_object_set_new(o, "expose", windows);
	json_object_set_new(o, "scratch_max_mib", p->scratch_max_mib > 0 ?
	    json_integer(p->scratch_max_mib) : json_null());
	json_object_set_new(o, "network", json_string(gp_net_policy_name(
	    p->network)));
	json_object_set_new(o, "net_rate_bps", p->net_rate_bps > 0 ?
	    json_integer(p->net_rate_bps) : json_null());
	return o;
}

void
gp_policy_describe(const struct gp_policy *p, char *out, size_t len)
{
	struct gp_buf b = {0};
	char text[64];
	int i, first = 1;

	if (p->all_gpus)
		gp_buf_printf(&b, "gpus all");
	else {
		gp_buf_printf(&b, "gpus ");
		for (i = 0; i < GP_GPUS_MAX; i++)
			if (p->gpus & (UINT64_C(1) << i)) {
				gp_buf_printf(&b, "%s%d", first ? "" : ",", i);
				first = 0;
			}
	}
	if (p->nwindows == 0)
		gp_buf_printf(&b, ", always");
	else
		gp_buf_printf(&b, ", %d window%s", p->nwindows,
		    p->nwindows == 1 ? "" : "s");
	if (p->cpus > 0)
		gp_buf_printf(&b, ", cpus %d", p->cpus);
	if (p->mem_mib > 0)
		gp_buf_printf(&b, ", memory %lldM", (long long)p->mem_mib);
	if (p->max_job_s > 0) {
		gp_format_duration(p->max_job_s, text, sizeof(text));
		gp_buf_printf(&b, ", max-job-time %s", text);
	}
	gp_format_duration(p->grace_s, text, sizeof(text));
	gp_buf_printf(&b, ", checkpoint-grace %s", text);
	presence_text(p, text, sizeof(text));
	gp_buf_printf(&b, ", owner-presence %s", text);
	if (p->gpu_share == GP_SHARE_STRICT)
		gp_buf_printf(&b, ", gpu-share strict");
	/* Image settings when they differ from the defaults. */
	if (p->images != GP_IMAGES_SIGNED || p->nkeys > 0)
		gp_buf_printf(&b, ", images %s", gp_policy_images_name(
		    p->images));
	if (p->nkeys > 0)
		gp_buf_printf(&b, " (%d trusted key%s)", p->nkeys,
		    p->nkeys == 1 ? "" : "s");
	if (p->refuse_plain)
		gp_buf_printf(&b, ", plain-jobs refuse");
	if (p->refuse_interactive)
		gp_buf_printf(&b, ", interactive refuse");
	if (p->interactive_gpus > 0)
		gp_buf_printf(&b, ", interactive-gpus %d", p->interactive_gpus);
	if (p->scratch_max_mib > 0)
		gp_buf_printf(&b, ", scratch-max %lldM",
		    (long long)p->scratch_max_mib);
	if (p->network != GP_NET_INTERNET)
		gp_buf_printf(&b, ", network %s",
		    gp_net_policy_name(p->network));
	if (p->net_rate_bps > 0)
		gp_buf_printf(&b, ", net-rate %lldbit/s",
		    (long long)p->net_rate_bps);
	gp_strlcpy(out, b.data != NULL ? b.data : "", len);
	gp_buf_free(&b);
}
