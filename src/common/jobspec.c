/*
 * jobspec.c: decoding and validating submissions.
 */
#include "jobspec.h"

#include <ctype.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "util.h"

/* The image of every spec that has none. */
static char no_image[1];

void
gp_jobspec_init(struct gp_jobspec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->image = no_image;
	spec->command = json_array();
	spec->env = json_object();
	spec->data = json_array();
	spec->gpus = 1;
	spec->nodes = 1;
	spec->cpus = 1;
	spec->checkpoint_every_s = GP_CHECKPOINT_EVERY_DEFAULT;
	spec->checkpoint_signal = SIGUSR1;
}

int
gp_idempotency_key_valid(const char *key)
{
	size_t n = strlen(key);

	if (n < GP_IDEMPOTENCY_KEY_MIN || n > GP_IDEMPOTENCY_KEY_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)key[i]) && key[i] != '_' &&
		    key[i] != '-')
			return 0;
	return 1;
}

/* The signals a job may be asked to checkpoint with. */
static const struct {
	const char *name;
	int sig;
} signals[] = {
	{"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT},
	{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM},
	{"TERM", SIGTERM},
};

int
gp_signal_parse(const char *text)
{
	size_t i;
	int64_t n;

	if (strncasecmp(text, "SIG", 3) == 0)
		text += 3;
	for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (strcasecmp(text, signals[i].name) == 0)
			return signals[i].sig;
	if (gp_parse_int(text, 1, 64, &n) == 0)
		for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
			if (signals[i].sig == (int)n)
				return (int)n;
	return -1;
}

const char *
gp_signal_name(int sig)
{
	size_t i;

	for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (signals[i].sig == sig)
			return signals[i].name;
	return "?";
}

void
gp_jobspec_fini(struct gp_jobspec *spec)
{
	json_decref(spec->command);
	json_decref(spec->env);
	json_decref(spec->data);
	spec->command = spec->env = spec->data = NULL;
	if (spec->image != no_image)
		free(spec->image);
	spec->image = no_image;
}

int
gp_jobspec_set_image(struct gp_jobspec *spec, const char *ref)
{
	char *copy = no_image;

	if (ref != NULL && ref[0] != '\0' && (copy = strdup(ref)) == NULL)
		return GP_ENOMEM;
	if (spec->image != no_image)
		free(spec->image);
	spec->image = copy;
	return 0;
}

int
gp_jobspec_is_fraction(const struct gp_jobspec *spec)
{
	return spec->gpu_milli > 0 || spec->gpu_mem_mib > 0;
}

int
gp_capability_parse(const char *text, int *out)
{
	int64_t major, minor = 0;
	const char *dot = strchr(text, '.');
	char buf[8];
	size_t n = dot != NULL ? (size_t)(dot - text) : strlen(text);

	if (n == 0 || n >= sizeof(buf))
		return GP_EINVAL;
	memcpy(buf, text, n);
	buf[n] = '\0';
	if (buf[0] < '0' || buf[0] > '9' ||
	    gp_parse_int(buf, 1, 99, &major) != 0)
		return GP_EINVAL;
	if (dot != NULL) {
		if (dot[1] < '0' || dot[1] > '9' || dot[2] != '\0')
			return GP_EINVAL;
		minor = dot[1] - '0';
	}
	*out = (int)(major * 10 + minor);
	return 0;
}

void
gp_capability_format(int cap, char *buf, size_t len)
{
	snprintf(buf, len, "%d.%d", cap / 10, cap % 10);
}

/* A share 0 < f < 1 in thousandths, or -1. */
static int
share_milli(double f)
{
	long m;

	if (!(f > 0 && f < 1))
		return -1;
	m = lround(f * 1000);
	return m >= 1 && m <= 999 ? (int)m : -1;
}

int
gp_share_parse(const char *text, int *milli)
{
	char *end;
	double f;
	int m;
	size_t i;

	/* Digits and one dot only: no signs, exponents, "nan" or "inf". */
	if (text[0] == '\0' || strlen(text) > 16)
		return GP_EINVAL;
	for (i = 0; text[i] != '\0'; i++)
		if (!((text[i] >= '0' && text[i] <= '9') || text[i] == '.'))
			return GP_EINVAL;
	f = strtod(text, &end);
	if (*end != '\0' || (m = share_milli(f)) < 0)
		return GP_EINVAL;
	*milli = m;
	return 0;
}

int
gp_name_valid(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > GP_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' ||
			c == '-'))
			return 0;
	}
	return 1;
}

int
gp_data_name_valid(const char *name)
{
	return gp_name_valid(name) && name[0] != '.';
}

/* The job's own directories: a data set never covers them. */
static const char *const reserved_trees[] = {"/proc", "/dev", "/sys",
    NULL};
static const char *const reserved_dirs[] = {"/", "/bin", "/boot", "/etc",
    "/lib", "/lib32", "/lib64", "/libx32", "/run", "/sbin", "/tmp", "/usr",
    "/var", NULL};

int
gp_mount_path_check(const char *path, char *err, size_t errlen)
{
	size_t len, i, start, n;

	if (path == NULL || path[0] != '/')
		return gp_fail(err, errlen, GP_EINVAL,
		    "mount path '%.100s': must be an "
		    "absolute path",
		    path != NULL ? path : "");
	len = strlen(path);
	if (len > GP_MOUNT_PATH_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "mount path: longer than %d bytes", GP_MOUNT_PATH_MAX);
	for (i = 0; i < len; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return gp_fail(err, errlen, GP_EINVAL,
			    "mount path: control "
			    "characters");
	for (i = 0; reserved_dirs[i] != NULL; i++)
		if (strcmp(path, reserved_dirs[i]) == 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "mount path %.100s is "
			    "reserved: it would cover the job's system "
			    "directories",
			    path);
	/* Components: path[start, i) between slashes. */
	for (start = 1, i = 1; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		n = i - start;
		if (n == 0 || (n == 1 && path[start] == '.') ||
		    (n == 2 && path[start] == '.' && path[start + 1] == '.'))
			return gp_fail(err, errlen, GP_EINVAL,
			    "mount path '%.100s': empty, "
			    "'.' or '..' component, or a trailing '/'",
			    path);
		start = i + 1;
	}
	for (i = 0; reserved_trees[i] != NULL; i++) {
		n = strlen(reserved_trees[i]);
		if (strncmp(path, reserved_trees[i], n) == 0 &&
		    (path[n] == '\0' || path[n] == '/'))
			return gp_fail(err, errlen, GP_EINVAL,
			    "mount path %.100s is "
			    "reserved: %s is the job's own",
			    path, reserved_trees[i]);
	}
	return 0;
}

/* 1 when b is a or lies beneath it. */
static int
path_within(const char *a, const char *b)
{
	size_t n = strlen(a);

	return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* Checks the data list of a spec: entries, names, paths, overlaps. */
static int
validate_data(json_t *data, char *err, size_t errlen)
{
	static const char *const keys[] = {"name", "owner", "version", "path",
	    NULL};
	const char *key, *name, *owner, *path, *other;
	json_t *d, *v;
	size_t i, k;
	int known;

	if (!json_is_array(data))
		return gp_fail(err, errlen, GP_EINVAL,
		    "data: must be an array of objects");
	if (json_array_size(data) > GP_DATA_MOUNTS_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "data: more than %d data sets", GP_DATA_MOUNTS_MAX);
	json_array_foreach(data, i, d)
	{
		if (!json_is_object(d))
			return gp_fail(err, errlen, GP_EINVAL,
			    "data[%zu]: not an object", i);
		json_object_foreach(d, key, v)
		{
			known = 0;
			for (k = 0; keys[k] != NULL; k++)
				if (strcmp(key, keys[k]) == 0)
					known = 1;
			if (!known)
				return gp_fail(err, errlen, GP_EINVAL,
				    "data[%zu]: unknown field '%.64s'", i, key);
		}
		v = json_object_get(d, "name");
		name = json_string_value(v);
		if (name == NULL || strlen(name) != json_string_length(v) ||
		    !gp_data_name_valid(name))
			return gp_fail(err, errlen, GP_EINVAL,
			    "data[%zu].name: 1 to %d "
			    "characters of A-Z a-z 0-9 . _ -, not starting "
			    "with '.'",
			    i, GP_NAME_MAX);
		v = json_object_get(d, "owner");
		owner = json_string_value(v);
		if (v != NULL && (owner == NULL ||
		    strlen(owner) != json_string_length(v) ||
		    !gp_name_valid(owner)))
			return gp_fail(err, errlen, GP_EINVAL,
			    "data[%zu].owner: a user name", i);
		v = json_object_get(d, "version");
		if (v != NULL && (!json_is_integer(v) ||
		    json_integer_value(v) < 1 ||
		    json_integer_value(v) > INT64_MAX / 2))
			return gp_fail(err, errlen, GP_EINVAL,
			    "data[%zu].version: a "
			    "positive integer",
			    i);
		v = json_object_get(d, "path");
		path = json_string_value(v);
		if (path == NULL || strlen(path) != json_string_length(v))
			return gp_fail(err, errlen, GP_EINVAL,
			    "data[%zu].path: missing or "
			    "not a string",
			    i);
		if (gp_mount_path_check(path, err, errlen) != 0)
			return GP_EINVAL;
		for (k = 0; k < i; k++) {
			other = json_string_value(json_object_get(
			    json_array_get(data, k), "path"));
			if (path_within(other, path) ||
			    path_within(path, other))
				return gp_fail(err, errlen, GP_EINVAL,
				    "data[%zu].path: %.100s "
				    "%s %.100s of data[%zu]",
				    i, path,
				    strcmp(path, other) == 0
				        ? "is the path"
				        : "overlaps the path",
				    other, k);
		}
	}
	return 0;
}

int
gp_data_spec_parse(const char *text, json_t **out, char *err, size_t errlen)
{
	char buf[GP_NAME_MAX * 2 + 64], *colon, *slash, *at, *name;
	json_t *o;
	int64_t version = 0;

	colon = text != NULL ? strchr(text, ':') : NULL;
	if (colon == NULL || (size_t)(colon - text) >= sizeof(buf) ||
	    colon == text)
		return gp_fail(err, errlen, GP_EINVAL,
		    "--data: expected "
		    "[OWNER/]NAME[@VERSION]:/PATH, got '%.100s'",
		    text != NULL ? text : "");
	memcpy(buf, text, (size_t)(colon - text));
	buf[colon - text] = '\0';
	name = buf;
	slash = strchr(buf, '/');
	if (slash != NULL) {
		*slash = '\0';
		name = slash + 1;
		if (!gp_name_valid(buf))
			return gp_fail(err, errlen, GP_EINVAL,
			    "--data: '%.64s' is not a "
			    "user name",
			    buf);
	}
	at = strchr(name, '@');
	if (at != NULL) {
		*at = '\0';
		if (gp_parse_int(at + 1, 1, INT64_MAX / 2, &version) != 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "--data: '%.64s' is not a "
			    "version number",
			    at + 1);
	}
	if (!gp_data_name_valid(name))
		return gp_fail(err, errlen, GP_EINVAL,
		    "--data: '%.64s' is not a data set "
		    "name (1 to %d of A-Z a-z 0-9 . _ -, not starting with "
		    "'.')",
		    name, GP_NAME_MAX);
	if (gp_mount_path_check(colon + 1, err, errlen) != 0)
		return GP_EINVAL;
	o = json_pack("{s:s,s:s}", "name", name, "path", colon + 1);
	if (o == NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "--data: not valid UTF-8");
	if (slash != NULL)
		json_object_set_new(o, "owner", json_string(buf));
	if (version > 0)
		json_object_set_new(o, "version",
		    json_integer((json_int_t)version));
	*out = o;
	return 0;
}

static int
env_key_valid(const char *key)
{
	size_t i, n = strlen(key);

	if (n == 0 || n > GP_ENV_KEY_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = key[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			c == '_' || (i > 0 && c >= '0' && c <= '9')))
			return 0;
	}
	return 1;
}

int
gp_jobspec_validate(const struct gp_jobspec *spec, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	size_t i;

	if (!json_is_array(spec->command) ||
	    (json_array_size(spec->command) == 0 && spec->image[0] == '\0'))
		return gp_fail(err, errlen, GP_EINVAL,
		    "command: must be a non-empty array "
		    "of strings (it may be empty only "
		    "with an image)");
	if (json_array_size(spec->command) > GP_ARGC_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "command: more than %d arguments", GP_ARGC_MAX);
	json_array_foreach(spec->command, i, v)
	{
		size_t n;
		if (!json_is_string(v))
			return gp_fail(err, errlen, GP_EINVAL,
			    "command[%zu]: not a string", i);
		n = json_string_length(v);
		if (n == 0 && i == 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "command[0]: empty");
		if (n > GP_ARG_MAX)
			return gp_fail(err, errlen, GP_EINVAL,
			    "command[%zu]: longer than %d bytes", i,
			    GP_ARG_MAX);
		if (strlen(json_string_value(v)) != n)
			return gp_fail(err, errlen, GP_EINVAL,
			    "command[%zu]: contains NUL", i);
	}
	if (!json_is_object(spec->env))
		return gp_fail(err, errlen, GP_EINVAL,
		    "env: must be an object of strings");
	if (json_object_size(spec->env) > GP_ENV_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "env: more than %d variables", GP_ENV_MAX);
	json_object_foreach(spec->env, key, v)
	{
		if (!env_key_valid(key))
			return gp_fail(err, errlen, GP_EINVAL,
			    "env: invalid variable name '%.64s'", key);
		if (strcmp(key, "CUDA_VISIBLE_DEVICES") == 0 ||
		    strncmp(key, "GPUPOOL_", 8) == 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "env: %s is set by gpupool and reserved", key);
		if (!json_is_string(v))
			return gp_fail(err, errlen, GP_EINVAL,
			    "env.%s: not a string", key);
		if (json_string_length(v) > GP_ARG_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return gp_fail(err, errlen, GP_EINVAL,
			    "env.%s: longer than %d bytes or contains NUL", key,
			    GP_ARG_MAX);
	}
	if (strlen(spec->image) > GP_IMAGE_REF_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "image: longer than %d bytes", GP_IMAGE_REF_MAX);
	for (i = 0; spec->image[i] != '\0'; i++)
		if ((unsigned char)spec->image[i] <= 0x20 ||
		    spec->image[i] == 0x7f)
			return gp_fail(err, errlen, GP_EINVAL,
			    "image: spaces or control "
			    "characters in the reference");
	if (!gp_name_valid(spec->name))
		return gp_fail(err, errlen, GP_EINVAL,
		    "name: must be 1 to %d characters of A-Z a-z 0-9 . _ -",
		    GP_NAME_MAX);
	if (spec->gpus < 0 || spec->gpus > GP_GPUS_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "gpus: must be between 0 and %d", GP_GPUS_MAX);
	if (spec->gpu_mem_mib < 0 || spec->gpu_mem_mib > GP_MIB_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "gpu_mem_mib: must be between 0 and %lld", GP_MIB_MAX);
	if (spec->min_gpu_mem_mib < 0 || spec->min_gpu_mem_mib > GP_MIB_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "min_gpu_mem_mib: must be between 0 and %lld", GP_MIB_MAX);
	if (spec->gpu_milli < 0 || spec->gpu_milli > 999)
		return gp_fail(err, errlen, GP_EINVAL,
		    "gpu_share: must be above 0 and below 1");
	if (spec->min_capability != 0 &&
	    (spec->min_capability < 10 ||
		spec->min_capability > GP_CAPABILITY_MAX))
		return gp_fail(err, errlen, GP_EINVAL,
		    "compute_capability: X.Y with X from 1 to 99");
	if (spec->nodes < 1 || spec->nodes > GP_NODES_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "nodes: must be between 1 and %d", GP_NODES_MAX);
	for (int e = 0; e < spec->n_expose; e++)
		if (spec->expose_part[e] >= spec->nodes)
			return gp_fail(err, errlen, GP_EINVAL,
			    "expose: %d:%d names part %d "
			    "of a job of %d part%s (parts 0 to %d)",
			    spec->expose_part[e], spec->expose[e],
			    spec->expose_part[e], spec->nodes,
			    spec->nodes == 1 ? "" : "s", spec->nodes - 1);
	if (gp_jobspec_is_fraction(spec) && spec->gpus != 1)
		return gp_fail(err, errlen, GP_EINVAL,
		    "gpu_share and gpu_mem_mib ask for a fraction of one GPU: "
		    "gpus must be 1 (for GPUs with at least this much memory, "
		    "use min_gpu_mem_mib)");
	if (spec->cpus < 1 || spec->cpus > GP_CPUS_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "cpus: must be between 1 and %d", GP_CPUS_MAX);
	if (spec->mem_mib < 0 || spec->mem_mib > GP_MIB_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "mem_mib: must be between 0 and %lld", GP_MIB_MAX);
	if (spec->time_limit_s < 0 || spec->time_limit_s > GP_TIME_LIMIT_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "time_limit_s: must be between 0 and %lld",
		    GP_TIME_LIMIT_MAX);
	if (spec->checkpoint_every_s < 1 ||
	    spec->checkpoint_every_s > GP_TIME_LIMIT_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "checkpoint_every_s: must be between 1 and %lld",
		    GP_TIME_LIMIT_MAX);
	if (gp_signal_name(spec->checkpoint_signal)[0] == '?')
		return gp_fail(err, errlen, GP_EINVAL,
		    "checkpoint_signal: must be one of HUP INT QUIT USR1 USR2 "
		    "ALRM TERM");
	if (spec->group[0] != '\0' && !gp_name_valid(spec->group))
		return gp_fail(err, errlen, GP_EINVAL,
		    "group: must be 1 to %d characters of A-Z a-z 0-9 . _ -",
		    GP_NAME_MAX);
	if (spec->max_price_micro < 0 ||
	    spec->max_price_micro > GP_MAX_PRICE_MICRO_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "max_price_micro: must be between 0 and %lld",
		    GP_MAX_PRICE_MICRO_MAX);
	if ((spec->min_gpu_mem_mib > 0 || spec->gpu_model[0] != '\0' ||
		spec->min_capability > 0) &&
	    spec->gpus == 0)
		return gp_fail(err, errlen, GP_EINVAL,
		    "gpu_model, min_gpu_mem_mib and compute_capability need "
		    "gpus of at least 1");
	return validate_data(spec->data, err, errlen);
}

static int
get_int(json_t *v, const char *field, int64_t min, int64_t max,
    int64_t *out, char *err, size_t errlen)
{
	json_int_t n;

	if (!json_is_integer(v))
		return gp_fail(err, errlen, GP_EINVAL, "%s: must be an integer",
		    field);
	n = json_integer_value(v);
	if (n < min || n > max)
		return gp_fail(err, errlen, GP_EINVAL,
		    "%s: must be between %lld and %lld", field, (long long)min,
		    (long long)max);
	*out = n;
	return 0;
}

/*
 * The default name: the basename of the command's first word, else of
 * the image's repository ("lab/pytorch:2.1" names the job "pytorch").
 */
static void
default_name(struct gp_jobspec *spec)
{
	const char *arg0, *base;
	size_t i, n = 0;

	arg0 = json_string_value(json_array_get(spec->command, 0));
	if (arg0 == NULL && spec->image[0] != '\0')
		arg0 = spec->image;
	if (arg0 == NULL)
		return;
	base = strrchr(arg0, '/');
	base = base != NULL ? base + 1 : arg0;
	for (i = 0; base[i] != '\0' && base[i] != ':' && base[i] != '@' &&
	    n < GP_NAME_MAX; i++) {
		char c = base[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')
			spec->name[n++] = c;
	}
	spec->name[n] = '\0';
	if (n == 0)
		gp_strlcpy(spec->name, "job", sizeof(spec->name));
}

int
gp_jobspec_expose_parse(const char *text, int *part, int *port)
{
	int64_t k = 0, p;
	const char *colon = strchr(text, ':');
	char head[8];
	size_t n;

	if (colon != NULL) {
		n = (size_t)(colon - text);
		if (n == 0 || n >= sizeof(head))
			return GP_EINVAL;
		memcpy(head, text, n);
		head[n] = '\0';
		if (gp_parse_int(head, 0, GP_NODES_MAX - 1, &k) != 0)
			return GP_EINVAL;
		text = colon + 1;
	}
	if (gp_parse_int(text, 1, 65535, &p) != 0)
		return GP_EINVAL;
	*part = (int)k;
	*port = (int)p;
	return 0;
}

/*
 * "expose": an array of at most GP_EXPOSE_MAX distinct (part, port)
 * pairs: PORT (part 0) or "PART:PORT" (a gang's part; "0:PORT" is PORT).
 */
static int
decode_expose(json_t *v, struct gp_jobspec *spec, char *err, size_t errlen)
{
	json_t *entry;
	size_t i;
	int part, port;

	if (!json_is_array(v) || json_array_size(v) > GP_EXPOSE_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "expose: must be an array of at most "
		    "%d ports",
		    GP_EXPOSE_MAX);
	spec->n_expose = 0;
	json_array_foreach(v, i, entry)
	{
		json_int_t p = json_integer_value(entry);
		if (json_is_integer(entry) && p >= 1 && p <= 65535) {
			part = 0;
			port = (int)p;
		} else if (!json_is_string(entry) || strchr(
		    json_string_value(entry), ':') == NULL ||
		    gp_jobspec_expose_parse(json_string_value(entry), &part,
		    &port) != 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "expose[%zu]: a port from 1 "
			    "to 65535, or \"PART:PORT\" (a gang's part, 0 "
			    "to %d)",
			    i, GP_NODES_MAX - 1);
		if (gp_jobspec_exposes_on(spec, part, port))
			return gp_fail(err, errlen, GP_EINVAL,
			    "expose: port %d of part %d "
			    "given twice",
			    port, part);
		spec->expose_part[spec->n_expose] = (uint8_t)part;
		spec->expose[spec->n_expose++] = (uint16_t)port;
	}
	return 0;
}

int
gp_jobspec_exposes(const struct gp_jobspec *spec, int port)
{
	return gp_jobspec_exposes_on(spec, 0, port);
}

int
gp_jobspec_exposes_on(const struct gp_jobspec *spec, int part, int port)
{
	for (int i = 0; i < spec->n_expose; i++)
		if (spec->expose[i] == port && spec->expose_part[i] == part)
			return 1;
	return 0;
}

json_t *
gp_jobspec_expose_entry(const struct gp_jobspec *spec, int i)
{
	char text[16];

	if (spec->expose_part[i] == 0)
		return json_integer(spec->expose[i]);
	snprintf(text, sizeof(text), "%d:%d", spec->expose_part[i],
	    spec->expose[i]);
	return json_string(text);
}

int
gp_jobspec_decode(const char *text, size_t len, struct gp_jobspec *spec,
    char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	int64_t n;
	int rc = GP_EINVAL;

	gp_jobspec_init(spec);
	if (len > GP_SUBMIT_BODY_MAX)
		return gp_fail(err, errlen, GP_EINVAL,
		    "body larger than %d bytes", GP_SUBMIT_BODY_MAX);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "invalid JSON at line %d column %d: %s", jerr.line,
		    jerr.column, jerr.text);
	if (!json_is_object(root)) {
		gp_fail(err, errlen, GP_EINVAL, "body must be a JSON object");
		goto out;
	}
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "command") == 0) {
			json_decref(spec->command);
			spec->command = json_incref(v);
		} else if (strcmp(key, "env") == 0) {
			json_decref(spec->env);
			spec->env = json_incref(v);
		} else if (strcmp(key, "data") == 0) {
			json_decref(spec->data);
			spec->data = json_incref(v);
		} else if (strcmp(key, "name") == 0) {
			if (!json_is_string(v) ||
			    json_string_length(v) > GP_NAME_MAX) {
				gp_fail(err, errlen, GP_EINVAL,
				    "name: must be a string of "
				    "at most %d characters",
				    GP_NAME_MAX);
				goto out;
			}
			gp_strlcpy(spec->name, json_string_value(v),
			    sizeof(spec->name));
			if (spec->name[0] == '\0') {
				gp_fail(err, errlen, GP_EINVAL, "name: empty");
				goto out;
			}
		} else if (strcmp(key, "gpu_model") == 0) {
			if (json_is_null(v))
				continue;
			if (!json_is_string(v) ||
			    json_string_length(v) > GP_NAME_MAX ||
			    strlen(json_string_value(v)) !=
				json_string_length(v)) {
				gp_fail(err, errlen, GP_EINVAL,
				    "gpu_model: must be a string "
				    "of at most %d characters",
				    GP_NAME_MAX);
				goto out;
			}
			gp_strlcpy(spec->gpu_model, json_string_value(v),
			    sizeof(spec->gpu_model));
		} else if (strcmp(key, "gpus") == 0) {
			if (get_int(v, key, 0, GP_GPUS_MAX, &n, err, errlen))
				goto out;
			spec->gpus = (int)n;
		} else if (strcmp(key, "gpu_mem_mib") == 0) {
			if (get_int(v, key, 0, GP_MIB_MAX, &n, err, errlen))
				goto out;
			spec->gpu_mem_mib = n;
		} else if (strcmp(key, "min_gpu_mem_mib") == 0) {
			if (get_int(v, key, 0, GP_MIB_MAX, &n, err, errlen))
				goto out;
			spec->min_gpu_mem_mib = n;
		} else if (strcmp(key, "gpu_share") == 0) {
			if (json_is_null(v))
				continue;
			if (!json_is_real(v) ||
			    share_milli(json_real_value(v)) < 0) {
				gp_fail(err, errlen, GP_EINVAL,
				    "gpu_share: a number above 0 "
				    "and below 1 (at least "
				    "0.001)");
				goto out;
			}
			spec->gpu_milli = share_milli(json_real_value(v));
		} else if (strcmp(key, "compute_capability") == 0) {
			if (json_is_null(v))
				continue;
			if (!json_is_string(v) ||
			    json_string_length(v) > 8 ||
			    strlen(json_string_value(v)) !=
				json_string_length(v) ||
			    gp_capability_parse(json_string_value(v),
				&spec->min_capability) != 0) {
				gp_fail(err, errlen, GP_EINVAL,
				    "compute_capability: a "
				    "string X.Y, like \"8.0\"");
				goto out;
			}
		} else if (strcmp(key, "nodes") == 0) {
			if (get_int(v, key, 1, GP_NODES_MAX, &n, err, errlen))
				goto out;
			spec->nodes = (int)n;
		} else if (strcmp(key, "cpus") == 0) {
			if (get_int(v, key, 1, GP_CPUS_MAX, &n, err, errlen))
				goto out;
			spec->cpus = (int)n;
		} else if (strcmp(key, "mem_mib") == 0) {
			if (get_int(v, key, 0, GP_MIB_MAX, &n, err, errlen))
				goto out;
			spec->mem_mib = n;
		} else if (strcmp(key, "disk_mib") == 0) {
			if (get_int(v, key, 0, GP_MIB_MAX, &n, err, errlen))
				goto out;
			spec->disk_mib = n;
		} else if (strcmp(key, "time_limit_s") == 0) {
			if (get_int(v, key, 0, GP_TIME_LIMIT_MAX, &n, err,
				errlen))
				goto out;
			spec->time_limit_s = n;
		} else if (strcmp(key, "checkpoint_every_s") == 0) {
			if (get_int(v, key, 1, GP_TIME_LIMIT_MAX, &n, err,
				errlen))
				goto out;
			spec->checkpoint_every_s = n;
		} else if (strcmp(key, "checkpoint_signal") == 0) {
			if (!json_is_string(v) ||
			    json_string_length(v) > 16 ||
			    strlen(json_string_value(v)) !=
				json_string_length(v) ||
			    gp_signal_parse(json_string_value(v)) < 0) {
				gp_fail(err, errlen, GP_EINVAL,
				    "checkpoint_signal: must be "
				    "one of HUP INT QUIT USR1 "
				    "USR2 ALRM TERM");
				goto out;
			}
			spec->checkpoint_signal =
			    gp_signal_parse(json_string_value(v));
		} else if (strcmp(key, "image") == 0) {
			if (json_is_null(v))
				continue;
			if (!json_is_string(v) || json_string_length(v) == 0 ||
			    json_string_length(v) > GP_IMAGE_REF_MAX ||
			    strlen(json_string_value(v)) !=
				json_string_length(v)) {
				gp_fail(err, errlen, GP_EINVAL,
				    "image: must be an image "
				    "reference of 1 to %d "
				    "characters",
				    GP_IMAGE_REF_MAX);
				goto out;
			}
			if (gp_jobspec_set_image(spec, json_string_value(v)) !=
			    0) {
				gp_fail(err, errlen, GP_EINVAL,
				    "out of memory");
				goto out;
			}
		} else if (strcmp(key, "group") == 0) {
			if (json_is_null(v))
				continue;
			if (!json_is_string(v) ||
			    json_string_length(v) > GP_NAME_MAX ||
			    strlen(json_string_value(v)) !=
				json_string_length(v) ||
			    !gp_name_valid(json_string_value(v))) {
				gp_fail(err, errlen, GP_EINVAL,
				    "group: must be 1 to %d "
				    "characters of A-Z a-z 0-9 "
				    ". _ -",
				    GP_NAME_MAX);
				goto out;
			}
			gp_strlcpy(spec->group, json_string_value(v),
			    sizeof(spec->group));
		} else if (strcmp(key, "idempotency_key") == 0) {
			if (!json_is_string(v) || strlen(json_string_value(v)) !=
			    json_string_length(v) ||
			    !gp_idempotency_key_valid(json_string_value(v))) {
				gp_fail(err, errlen, GP_EINVAL,
				    "idempotency_key: %d to %d of "
				    "A-Z a-z 0-9 _ -",
				    GP_IDEMPOTENCY_KEY_MIN,
				    GP_IDEMPOTENCY_KEY_MAX);
				goto out;
			}
			gp_strlcpy(spec->idempotency_key, json_string_value(v),
			    sizeof(spec->idempotency_key));
		} else if (strcmp(key, "max_price_micro") == 0) {
			if (get_int(v, key, 0, GP_MAX_PRICE_MICRO_MAX, &n, err,
				errlen))
				goto out;
			spec->max_price_micro = n;
		} else if (strcmp(key, "array_job_id") == 0) {
			if (get_int(v, key, 1, INT64_MAX, &n, err, errlen))
				goto out;
			spec->array_job_id = n;
		} else if (strcmp(key, "array_task_id") == 0) {
			if (get_int(v, key, 0, GP_ARRAY_TASK_MAX, &n, err,
				errlen))
				goto out;
			spec->array_task_id = (int)n;
		} else if (strcmp(key, "network") == 0) {
			if (json_is_null(v))
				continue;
			if (!json_is_string(v) || gp_jobspec_network_parse(
			    json_string_value(v), &spec->network) != 0) {
				gp_fail(err, errlen, GP_EINVAL,
				    "network: must be none, "
				    "internet or lan");
				goto out;
			}
		} else if (strcmp(key, "interactive") == 0) {
			if (!json_is_boolean(v)) {
				gp_fail(err, errlen, GP_EINVAL,
				    "interactive: must be true "
				    "or false");
				goto out;
			}
			spec->interactive = json_is_true(v);
		} else if (strcmp(key, "expose") == 0) {
			if (decode_expose(v, spec, err, errlen) != 0)
				goto out;
		} else if (strcmp(key, "array_limit") == 0) {
			if (get_int(v, key, 1, GP_ARRAY_MAX, &n, err, errlen))
				goto out;
			spec->array_limit = (int)n;
		} else {
			gp_fail(err, errlen, GP_EINVAL, "unknown field '%.64s'",
			    key);
			goto out;
		}
	}
	if (json_object_get(root, "command") == NULL &&
	    spec->image[0] == '\0') {
		gp_fail(err, errlen, GP_EINVAL, "command: missing");
		goto out;
	}
	if (spec->name[0] == '\0' && json_is_array(spec->command))
		default_name(spec);
	rc = gp_jobspec_validate(spec, err, errlen);
out:
	json_decref(root);
	return rc;
}

/* The fields every spec has. */
static json_t *
encode_fields(const struct gp_jobspec *spec)
{
	json_t *o;

	o = json_pack("{s:s, s:O, s:O, s:i, s:I, s:s?, s:i, s:I, s:I, s:I, "
			 "s:s}",
	    "name", spec->name, "command", spec->command, "env", spec->env,
	    "gpus", spec->gpus, "gpu_mem_mib", (json_int_t)spec->gpu_mem_mib,
	    "gpu_model", spec->gpu_model[0] ? spec->gpu_model : NULL, "cpus",
	    spec->cpus, "mem_mib", (json_int_t)spec->mem_mib, "time_limit_s",
	    (json_int_t)spec->time_limit_s, "checkpoint_every_s",
	    (json_int_t)spec->checkpoint_every_s, "checkpoint_signal",
	    gp_signal_name(spec->checkpoint_signal));
	if (o != NULL && json_array_size(spec->data) > 0 &&
	    json_object_set(o, "data", spec->data) != 0) {
		json_decref(o);
		o = NULL;
	}
	if (o != NULL && spec->image[0] != '\0')
		json_object_set_new(o, "image", json_string(spec->image));
	if (o != NULL && gp_jobspec_network_name(spec->network) != NULL)
		json_object_set_new(o, "network", json_string(
		    gp_jobspec_network_name(spec->network)));
	return o;
}

static const char *const network_names[] = {"none", "internet", "lan"};

const char *
gp_jobspec_network_name(int network)
{
	if (network < 1 || network > (int)GP_ARRAY_LEN(network_names))
		return NULL;
	return network_names[network - 1];
}

int
gp_jobspec_network_parse(const char *name, int *network)
{
	int i;

	for (i = 0; i < (int)GP_ARRAY_LEN(network_names); i++)
		if (strcmp(name, network_names[i]) == 0) {
			*network = i + 1;
			return 0;
		}
	return GP_EINVAL;
}

const char *
gp_jobspec_image_digest(const struct gp_jobspec *spec)
{
	const char *at = strrchr(spec->image, '@');
	const char *d = at != NULL ? at + 1 : spec->image;

	return strncmp(d, "sha256:", 7) == 0 && strlen(d) == 71 ? d : NULL;
}

json_t *
gp_jobspec_encode(const struct gp_jobspec *spec)
{
	json_t *o = encode_fields(spec);

	/* Newer fields only when set: older readers never see them. */
	if (o != NULL && spec->gpu_milli > 0)
		json_object_set_new(o, "gpu_share",
		    json_real(spec->gpu_milli / 1000.0));
	if (o != NULL && spec->min_gpu_mem_mib > 0)
		json_object_set_new(o, "min_gpu_mem_mib",
		    json_integer(spec->min_gpu_mem_mib));
	if (o != NULL && spec->min_capability > 0) {
		char cap[16];
		gp_capability_format(spec->min_capability, cap, sizeof(cap));
		json_object_set_new(o, "compute_capability", json_string(cap));
	}
	if (o != NULL && spec->nodes > 1)
		json_object_set_new(o, "nodes", json_integer(spec->nodes));
	if (o != NULL && spec->group[0] != '\0')
		json_object_set_new(o, "group", json_string(spec->group));
	if (o != NULL && spec->max_price_micro > 0)
		json_object_set_new(o, "max_price_micro",
		    json_integer(spec->max_price_micro));
	if (o != NULL && spec->disk_mib > 0)
		json_object_set_new(o, "disk_mib",
		    json_integer(spec->disk_mib));
	if (o != NULL && spec->idempotency_key[0] != '\0')
		json_object_set_new(o, "idempotency_key",
		    json_string(spec->idempotency_key));
	if (o != NULL && spec->interactive)
		json_object_set_new(o, "interactive", json_true());
	if (o != NULL && spec->n_expose > 0) {
		json_t *ports = json_array();
		for (int i = 0; i < spec->n_expose; i++)
			json_array_append_new(ports,
			    gp_jobspec_expose_entry(spec, i));
		json_object_set_new(o, "expose", ports);
	}
	if (o != NULL && spec->array_job_id > 0) {
		json_object_set_new(o, "array_job_id",
		    json_integer(spec->array_job_id));
		json_object_set_new(o, "array_task_id",
		    json_integer(spec->array_task_id));
		if (spec->array_limit > 0)
			json_object_set_new(o, "array_limit",
			    json_integer(spec->array_limit));
	}
	return o;
}

/* A task index at *p: digits only, at most GP_ARRAY_TASK_MAX. */
static int
array_index(const char **p, long *out)
{
	long v = 0;

	if (**p < '0' || **p > '9')
		return GP_EINVAL;
	while (**p >= '0' && **p <= '9') {
		v = v * 10 + (**p - '0');
		if (v > GP_ARRAY_TASK_MAX)
			return GP_EINVAL;
		(*p)++;
	}
	*out = v;
	return 0;
}

static int
cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

int
gp_array_parse(const char *text, int **tasks, int *n, int *limit, char *err,
    size_t errlen)
{
	const char *p = text;
	long first, last, step, lim = 0;
	int *v = NULL, count = 0, i;

	if ((v = malloc(GP_ARRAY_MAX * sizeof(*v))) == NULL)
		return GP_ENOMEM;
	for (;;) {
		if (array_index(&p, &first) != 0)
			goto bad;
		last = first;
		step = 1;
		if (*p == '-') {
			p++;
			if (array_index(&p, &last) != 0 || last < first)
				goto bad;
			if (*p == ':') {
				p++;
				if (array_index(&p, &step) != 0 || step < 1)
					goto bad;
			}
		}
		if ((last - first) / step + 1 > GP_ARRAY_MAX - count) {
			free(v);
			return gp_fail(err, errlen, GP_EINVAL,
			    "array: more than %d tasks", GP_ARRAY_MAX);
		}
		for (; first <= last; first += step)
			v[count++] = (int)first;
		if (*p == '\0')
			break;
		if (*p == '%') {
			p++;
			if (array_index(&p, &lim) != 0 || *p != '\0' ||
			    lim < 1 || lim > GP_ARRAY_MAX) {
				free(v);
				return gp_fail(err, errlen, GP_EINVAL,
				    "array: '%.64s': %%LIMIT must be a number "
				    "of tasks from 1 to %d, at the end",
				    text, GP_ARRAY_MAX);
			}
			if (limit == NULL) {
				free(v);
				return gp_fail(err, errlen, GP_EINVAL,
				    "array: %%LIMIT is not taken here");
			}
			break;
		}
		if (*p++ != ',')
			goto bad;
	}
	qsort(v, (size_t)count, sizeof(*v), cmp_int);
	for (i = 1; i < count; i++)
		if (v[i] == v[i - 1]) {
			int twice = v[i];
			free(v);
			return gp_fail(err, errlen, GP_EINVAL,
			    "array: task %d given twice", twice);
		}
	*tasks = v;
	*n = count;
	if (limit != NULL)
		*limit = (int)lim;
	return 0;
bad:
	free(v);
	return gp_fail(err, errlen, GP_EINVAL,
	    "array: '%.64s' is not N, A-B or A-B:STEP items separated by "
	    "commas (0 <= N <= %d)",
	    text, GP_ARRAY_TASK_MAX);
}
