/*
 * jobs.c: the job commands: submit, ps, show, logs, cancel and wait, and
 * the pure helpers behind them (building a job spec from the command
 * line, exit codes, the ps table).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "credits.h"
#include "gp.h"
#include "util.h"

/* Long polls ask the coordinator to hold the call this long. */
#define LONG_POLL_MS       25000
/* ...and give it this much more before giving up on the answer. */
#define LONG_POLL_SLACK_MS 15000
/* How long wait and logs -f keep retrying a coordinator that went away. */
#define RECONNECT_TRIES    60

int
gp_cli_parse_job_id(const char *text, int64_t *id)
{
	if (text == NULL || text[0] < '0' || text[0] > '9')
		return GP_EINVAL;
	return gp_parse_int(text, 1, INT64_MAX / 2, id);
}

/* The name the coordinator would give: the command's basename, cleaned. */
static void
default_name(const char *arg0, char *name, size_t len)
{
	const char *base = strrchr(arg0, '/');
	size_t i, n = 0;
	char c;

	base = base != NULL ? base + 1 : arg0;
	for (i = 0; base[i] != '\0' && n + 1 < len && n < GP_NAME_MAX; i++) {
		c = base[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')
			name[n++] = c;
	}
	name[n] = '\0';
	if (n == 0)
		gp_strlcpy(name, "job", len);
}

int
gp_cli_build_jobspec(const struct gp_cli_args *args, struct gp_jobspec *spec,
    char *err, size_t errlen)
{
	const struct gp_cli_option *o;
	const char *v, *eq;
	char key[GP_ENV_KEY_MAX + 2];
	json_t *s;
	int64_t n, gpus_seen = -1, per_node_seen = -1;
	int i;

	gp_jobspec_init(spec);
	if (spec->command == NULL || spec->env == NULL)
		return gp_fail(err, errlen, GP_EINVAL, "out of memory");
	for (i = 0; i < args->nseen; i++) {
		o = &args->cmd->options[args->seen[i].option];
		v = args->seen[i].value;
		if (strcmp(o->name, "gpus") == 0 ||
		    strcmp(o->name, "gpus-per-node") == 0 ||
		    strcmp(o->name, "nodes") == 0 ||
		    strcmp(o->name, "cpus") == 0) {
			if (gp_parse_int(v, INT_MIN, INT_MAX, &n) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--%s: '%s' is not a whole number", o->name,
				    v);
			if (strcmp(o->name, "gpus") == 0)
				spec->gpus = (int)(gpus_seen = n);
			else if (strcmp(o->name, "gpus-per-node") == 0)
				spec->gpus = (int)(per_node_seen = n);
			else if (strcmp(o->name, "nodes") == 0)
				spec->nodes = (int)n;
			else
				spec->cpus = (int)n;
		} else if (strcmp(o->name, "gpu-share") == 0) {
			if (gp_share_parse(v, &spec->gpu_milli) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--gpu-share: '%s' is not a share of one "
				    "GPU above 0 and below 1 (like 0.5)",
				    v);
		} else if (strcmp(o->name, "compute-capability") == 0) {
			if (gp_capability_parse(v, &spec->min_capability) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--compute-capability: '%s' is not X.Y "
				    "(like 8.0)",
				    v);
		} else if (strcmp(o->name, "disk") == 0) {
			if (v[0] == '-' || gp_parse_mib(v, &n) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--disk: '%s' is not a size in MiB (try "
				    "512M, 16G, 1T)",
				    v);
			spec->disk_mib = n;
		} else if (strcmp(o->name, "gpu-mem") == 0 ||
		    strcmp(o->name, "min-gpu-mem") == 0 ||
		    strcmp(o->name, "mem") == 0) {
			const char *field = o->name[0] == 'g' ? "gpu_mem_mib"
			    : o->name[1] == 'i'               ? "min_gpu_mem_mib"
			                                      : "mem_mib";
			if (v[0] == '-')
				return gp_fail(err, errlen, GP_EINVAL,
				    "%s: must be between 0 and %lld", field,
				    GP_MIB_MAX);
			if (gp_parse_mib(v, &n) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--%s: '%s' is not a size in MiB (try "
				    "512M, 16G, 1T)",
				    o->name, v);
			if (o->name[0] == 'g')
				spec->gpu_mem_mib = n;
			else if (o->name[1] == 'i')
				spec->min_gpu_mem_mib = n;
			else
				spec->mem_mib = n;
		} else if (strcmp(o->name, "network") == 0) {
			if (gp_jobspec_network_parse(v, &spec->network) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--network: '%s' is not none, internet or "
				    "lan",
				    v);
		} else if (strcmp(o->name, "interactive") == 0) {
			spec->interactive = 1;
		} else if (strcmp(o->name, "expose") == 0) {
			int part, port;

			if (gp_jobspec_expose_parse(v, &part, &port) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--expose: '%s' is not PORT (1 to 65535) "
				    "or PART:PORT (a gang's part, 0 to %d)",
				    v, GP_NODES_MAX - 1);
			if (gp_jobspec_exposes_on(spec, part, port))
				return gp_fail(err, errlen, GP_EINVAL,
				    "--expose: port %d of part %d given twice",
				    port, part);
			if (spec->n_expose == GP_EXPOSE_MAX)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--expose: at most %d ports",
				    GP_EXPOSE_MAX);
			spec->expose_part[spec->n_expose] = (uint8_t)part;
			spec->expose[spec->n_expose++] = (uint16_t)port;
		} else if (strcmp(o->name, "gpu-model") == 0) {
			if (strlen(v) > GP_NAME_MAX)
				return gp_fail(err, errlen, GP_EINVAL,
				    "gpu_model: must be a string of at most "
				    "%d characters",
				    GP_NAME_MAX);
			gp_strlcpy(spec->gpu_model, v, sizeof(spec->gpu_model));
		} else if (strcmp(o->name, "time") == 0) {
			if (gp_parse_duration(v, &n) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--time: '%s' is not a duration (try 90m, "
				    "2h, 1h30m, 2:00:00, 1-12:00:00)",
				    v);
			spec->time_limit_s = n;
		} else if (strcmp(o->name, "checkpoint-every") == 0) {
			if (gp_parse_duration(v, &n) != 0 || n < 1)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--checkpoint-every: '%s' is not a "
				    "duration of at least 1s (try 30s, 10m)",
				    v);
			spec->checkpoint_every_s = n;
		} else if (strcmp(o->name, "checkpoint-signal") == 0) {
			if (gp_signal_parse(v) < 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--checkpoint-signal: '%s' is not one of "
				    "HUP INT QUIT USR1 USR2 ALRM TERM",
				    v);
			spec->checkpoint_signal = gp_signal_parse(v);
		} else if (strcmp(o->name, "name") == 0) {
			if (strlen(v) > GP_NAME_MAX || !gp_name_valid(v))
				return gp_fail(err, errlen, GP_EINVAL,
				    "name: must be 1 to %d characters of "
				    "A-Z a-z 0-9 . _ -",
				    GP_NAME_MAX);
			gp_strlcpy(spec->name, v, sizeof(spec->name));
		} else if (strcmp(o->name, "image") == 0) {
			if (v[0] == '\0' || strlen(v) > GP_IMAGE_REF_MAX)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--image: a name in "
				    "the image store (gpupool image ls), at "
				    "most %d characters",
				    GP_IMAGE_REF_MAX);
			if (gp_jobspec_set_image(spec, v) != 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "out of memory");
		} else if (strcmp(o->name, "group") == 0) {
			if (strlen(v) > GP_NAME_MAX || !gp_name_valid(v))
				return gp_fail(err, errlen, GP_EINVAL,
				    "group: must be 1 to %d characters of "
				    "A-Z a-z 0-9 . _ -",
				    GP_NAME_MAX);
			gp_strlcpy(spec->group, v, sizeof(spec->group));
		} else if (strcmp(o->name, "max-price") == 0) {
			if (gp_credits_parse(v, GP_PRICE_MICRO_MAX, &n) != 0 ||
			    n == 0)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--max-price: '%s' is not a price above 0 "
				    "in credits per GPU-hour (like 2.5)",
				    v);
			spec->max_price_micro = n;
		} else if (strcmp(o->name, "env") == 0) {
			eq = strchr(v, '=');
			if (eq == NULL || eq == v)
				return gp_fail(err, errlen, GP_EINVAL,
				    "--env: expected NAME=VALUE, got '%.64s'",
				    v);
			if ((size_t)(eq - v) >= sizeof(key))
				return gp_fail(err, errlen, GP_EINVAL,
				    "env: invalid variable name '%.64s'", v);
			memcpy(key, v, (size_t)(eq - v));
			key[eq - v] = '\0';
			s = json_string(eq + 1);
			if (s == NULL)
				return gp_fail(err, errlen, GP_EINVAL,
				    "env.%s: not valid UTF-8", key);
			json_object_set_new(spec->env, key, s);
		} else if (strcmp(o->name, "data") == 0) {
			if (gp_data_spec_parse(v, &s, err, errlen) != 0)
				return GP_EINVAL;
			json_array_append_new(spec->data, s);
		}
	}
	for (i = 0; i < args->noperands; i++) {
		s = json_string(args->operands[i]);
		if (s == NULL)
			return gp_fail(err, errlen, GP_EINVAL,
			    "command[%d]: not valid UTF-8", i);
		json_array_append_new(spec->command, s);
	}
	if (args->noperands == 0 && spec->image[0] == '\0')
		return gp_fail(err, errlen, GP_EINVAL,
		    "submit: missing COMMAND (it may be "
		    "left out only with --image)");
	if (spec->name[0] == '\0' && args->noperands > 0)
		default_name(args->operands[0], spec->name, sizeof(spec->name));
	if (gpus_seen >= 0 && per_node_seen >= 0 && gpus_seen != per_node_seen)
		return gp_fail(err, errlen, GP_EINVAL,
		    "--gpus and --gpus-per-node say different things (they "
		    "are the same: GPUs per node)");
	if (gp_jobspec_is_fraction(spec) && gpus_seen < 0 &&
	    per_node_seen < 0)
		spec->gpus = 1;
	if (gp_jobspec_is_fraction(spec) && spec->gpus != 1)
		return gp_fail(err, errlen, GP_EINVAL,
		    "--gpu-share and --gpu-mem ask for a fraction of one GPU: "
		    "--gpus must be 1 (for GPUs with at least this much "
		    "memory, use --min-gpu-mem)");
	if (spec->name[0] == '\0') {
		/* The image's repository: "lab/pytorch:2" names it pytorch. */
		char base[GP_IMAGE_REF_MAX + 1];
		const char *slash = strrchr(spec->image, '/');
		gp_strlcpy(base, slash != NULL ? slash + 1 : spec->image,
		    sizeof(base));
		base[strcspn(base, ":@")] = '\0';
		if (strncmp(spec->image, "sha256:", 7) == 0)
			gp_strlcpy(base, "image", sizeof(base));
		default_name(base, spec->name, sizeof(spec->name));
	}
	return gp_jobspec_validate(spec, err, errlen);
}

static int wait_for_job(struct gp_cli_conn *conn, int64_t id);
static int submit_call(struct gp_cli_conn *conn, const char *path,
    json_t *body, const char *key, json_t **reply);

/*
 * submit --array: one request for every task (POST /v1/jobs/array), sent
 * again with the same key (in body) while no answer comes (submit_call).
 * Takes body (the encoded spec). Prints the tasks' ids, consecutive:
 * "FIRST-LAST" (or the one id).
 */
static int
submit_array(const struct gp_cli_args *args, json_t *body, const char *key)
{
	const char *text = gp_cli_value(args, "array");
	struct gp_cli_conn conn;
	json_t *reply, *first, *last;
	char err[512];
	int *tasks, n, limit, rc;

	if (gp_cli_flag(args, "wait")) {
		json_decref(body);
		return gp_cli_usage_error(args, "--wait waits for one job: not "
		    "with --array (use `gpupool wait` on the ids)");
	}
	rc = gp_array_parse(text, &tasks, &n, &limit, err, sizeof(err));
	if (rc != 0) {
		json_decref(body);
		if (rc == GP_ENOMEM) {
			gp_cli_error("out of memory");
			return GP_CLI_EXIT_FAIL;
		}
		return gp_cli_usage_error(args, "--%s", err);
	}
	free(tasks);
	body = json_pack("{s:o,s:s}", "job", body, "array", text);
	if (body == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	if ((rc = gp_cli_connect(&conn, NULL)) != 0) {
		json_decref(body);
		return rc;
	}
	rc = submit_call(&conn, "/v1/jobs/array", body, key, &reply);
	json_decref(body);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	first = json_object_get(reply, "first_id");
	last = json_object_get(reply, "last_id");
	if (!json_is_integer(first) || !json_is_integer(last)) {
		gp_cli_error("the coordinator's answer has no job ids");
		json_decref(reply);
		return GP_CLI_EXIT_FAIL;
	}
	if (json_integer_value(first) == json_integer_value(last))
		printf("%lld\n", (long long)json_integer_value(first));
	else
		printf("%lld-%lld\n", (long long)json_integer_value(first),
		    (long long)json_integer_value(last));
	json_decref(reply);
	return 0;
}

/* How long submit retries a submission whose answer was lost. */
#define SUBMIT_RETRY_MS 60000

/*
 * POST path (/v1/jobs, /v1/jobs/array) with body, which carries an
 * idempotency key: sent again,
 * unchanged, while no answer comes back (the coordinator restarting, a
 * connection cut, 502-504 from a proxy), for up to SUBMIT_RETRY_MS. A
 * repeat makes no second job: the coordinator answers it with the first
 * one's id. OUT: *reply (caller frees). Returns 0; GP_CLI_EXIT_FAIL when
 * the coordinator refused it (said; no job was made), or when no answer
 * came at all (said: the outcome is unknown, and how to learn it).
 */
static int
submit_call(struct gp_cli_conn *conn, const char *path, json_t *body,
    const char *key, json_t **reply)
{
	int64_t end = gp_mono_ms() + SUBMIT_RETRY_MS, pause_ms = 100;
	struct gp_http_response resp;
	json_error_t jerr;
	char *text;
	int rc, tries = 0;

	*reply = NULL;
	if ((text = json_dumps(body, JSON_COMPACT)) == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	for (;;) {
		tries++;
		rc = gp_http_request(conn->http, "POST", path, text,
		    strlen(text), NULL, 0, &resp);
		if (rc == 0 && (resp.status < 502 || resp.status > 504))
			break;
		if (gp_mono_ms() + pause_ms >= end) {
			gp_cli_report_http(conn, rc, &resp);
			gp_cli_error("no answer to the submission after %d tries: "
			    "it may or may not have made a job; the same "
			    "command with --key %s tells (a repeat with the "
			    "key never makes a second job)", tries, key);
			gp_http_response_fini(&resp);
			free(text);
			return GP_CLI_EXIT_FAIL;
		}
		gp_http_response_fini(&resp);
		usleep((useconds_t)pause_ms * 1000);
		if (pause_ms < 2000)
			pause_ms *= 2;
	}
	free(text);
	if (resp.status < 200 || resp.status > 299) {
		gp_cli_report_http(conn, 0, &resp);
		gp_http_response_fini(&resp);
		return GP_CLI_EXIT_FAIL;
	}
	*reply = json_loadb(resp.body, resp.body_len, 0, &jerr);
	gp_http_response_fini(&resp);
	if (*reply == NULL) {
		gp_cli_error("the coordinator at %s answered invalid JSON: %s",
		    conn->cfg.url, jerr.text);
		return GP_CLI_EXIT_FAIL;
	}
	return 0;
}

/* A fresh idempotency key: 128 random bits, hex. 0 or -1. */
static int
new_submit_key(char *out, size_t len)
{
	unsigned char raw[16];
	int fd, ok;

	if (len < 2 * sizeof(raw) + 1 ||
	    (fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	ok = read(fd, raw, sizeof(raw)) == (ssize_t)sizeof(raw);
	close(fd);
	if (!ok)
		return -1;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

int
gp_cli_cmd_submit(const struct gp_cli_args *args)
{
	struct gp_jobspec spec;
	struct gp_cli_conn conn;
	json_t *body, *reply;
	char err[512], key_text[GP_IDEMPOTENCY_KEY_MAX + 1];
	const char *key;
	int64_t id;
	int rc;

	if (gp_cli_build_jobspec(args, &spec, err, sizeof(err)) != 0) {
		gp_jobspec_fini(&spec);
		return gp_cli_usage_error(NULL, "%s", err);
	}
	key = gp_cli_value(args, "key");
	if (key != NULL && !gp_idempotency_key_valid(key)) {
		gp_jobspec_fini(&spec);
		return gp_cli_usage_error(NULL, "--key: %d to %d of A-Z a-z "
		    "0-9 _ -", GP_IDEMPOTENCY_KEY_MIN, GP_IDEMPOTENCY_KEY_MAX);
	}
	/* Every submission carries a key: its retries make no second job. */
	if (key != NULL)
		gp_strlcpy(spec.idempotency_key, key,
		    sizeof(spec.idempotency_key));
	else if (new_submit_key(spec.idempotency_key,
	    sizeof(spec.idempotency_key)) != 0) {
		gp_jobspec_fini(&spec);
		gp_cli_error("cannot read /dev/urandom for a submission key");
		return GP_CLI_EXIT_FAIL;
	}
	body = gp_jobspec_encode(&spec);
	gp_strlcpy(key_text, spec.idempotency_key, sizeof(key_text));
	gp_jobspec_fini(&spec);
	if (body == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	if (gp_cli_value(args, "array") != NULL)
		return submit_array(args, body, key_text);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0) {
		json_decref(body);
		return rc;
	}
	rc = submit_call(&conn, "/v1/jobs", body, key_text, &reply);
	json_decref(body);
	if (rc != 0) {
		gp_cli_disconnect(&conn);
		return rc;
	}
	if (!json_is_integer(json_object_get(reply, "id"))) {
		gp_cli_error("the coordinator's answer has no job id");
		json_decref(reply);
		gp_cli_disconnect(&conn);
		return GP_CLI_EXIT_FAIL;
	}
	id = json_integer_value(json_object_get(reply, "id"));
	json_decref(reply);
	printf("%lld\n", (long long)id);
	/* --wait: the id first (a script may want it), then the outcome. */
	if (gp_cli_flag(args, "wait")) {
		fflush(stdout);
		rc = wait_for_job(&conn, id);
	}
	gp_cli_disconnect(&conn);
	return rc;
}

static int64_t
json_time(json_t *job, const char *key)
{
	const char *s = gp_cli_json_str(job, key);
	int64_t ms;

	if (s == NULL || gp_parse_time(s, &ms) != 0)
		return -1;
	return ms;
}

int64_t
gp_cli_job_elapsed(json_t *job, int64_t now_ms)
{
	int64_t start = json_time(job, "started_at");
	int64_t end = json_time(job, "finished_at");
	const char *state = gp_cli_json_str(job, "state");

	if (start < 0 || (state != NULL && strcmp(state, "queued") == 0))
		return -1;
	if (end < 0)
		end = now_ms;
	return end > start ? end - start : 0;
}

static const char *
display_state(json_t *job)
{
	const char *state = gp_cli_json_str(job, "state");

	if (state == NULL)
		return "?";
	if (strcmp(state, "running") == 0 &&
	    json_is_true(json_object_get(job, "cancel_requested")))
		return "cancelling";
	/* Queued, but a budget keeps it from starting (hold_reason). */
	if (strcmp(state, "queued") == 0 &&
	    gp_cli_json_str(job, "hold_reason") != NULL)
		return "held";
	return state;
}

/* ps's STATE: the state, "(i)" after it for an interactive job. */
static const char *
state_cell(json_t *job, char *buf, size_t len)
{
	if (!json_is_true(json_object_get(job, "interactive")))
		return display_state(job);
	snprintf(buf, len, "%s (i)", display_state(job));
	return buf;
}

/*
 * A request's GPUs as ps shows them: "2", a share "0.5", a gang "3x2".
 */
static void
gpus_text(json_t *req, char *buf, size_t len)
{
	json_int_t gpus = json_integer_value(json_object_get(req, "gpus"));
	json_int_t nodes = json_integer_value(json_object_get(req, "nodes"));
	json_t *share = json_object_get(req, "gpu_share");

	if (json_is_number(share))
		snprintf(buf, len, "%g", json_number_value(share));
	else if (nodes > 1)
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT "x%" JSON_INTEGER_FORMAT,
		    nodes, gpus);
	else
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, gpus);
}

/*
 * ps's WAIT: the scheduler's code; for "resources", with what is short as
 * its why says it ("no node has 4 CPUs free now (...)" gives "resources:
 * 4 CPUs"; src/coord/sched.c words it so).
 */
static const char *
wait_cell(json_t *wait, char *buf, size_t len)
{
	const char *reason = gp_cli_json_str(wait, "reason");
	const char *why = gp_cli_json_str(wait, "why");
	static const char lead[] = "no node has ";
	const char *end;

	if (reason == NULL || strcmp(reason, "resources") != 0 ||
	    why == NULL || strncmp(why, lead, sizeof(lead) - 1) != 0)
		return reason;
	why += sizeof(lead) - 1;
	if ((end = strstr(why, " free")) == NULL)
		return reason;
	snprintf(buf, len, "%s: %.*s", reason, (int)(end - why), why);
	return buf;
}

int
gp_cli_render_jobs(json_t *reply, int64_t now_ms, struct gp_buf *out)
{
	static const char *const header[] = {"ID", "NAME", "USER", "GROUP",
	    "STATE", "NODE", "GPUS", "ELAPSED", "WAIT"};
	struct gp_table t;
	json_t *jobs, *job, *req;
	char id[32], gpus[16], elapsed[32], wait[128], state[32];
	const char *row[9];
	int64_t ms;
	size_t i;
	int rc;

	jobs = json_object_get(reply, "jobs");
	if (!json_is_array(jobs))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 9, header)) != 0)
		return rc;
	t.right[0] = t.right[6] = t.right[7] = 1;
	json_array_foreach(jobs, i, job)
	{
		snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(json_object_get(job, "id")));
		req = json_object_get(job, "request");
		gpus_text(req, gpus, sizeof(gpus));
		ms = gp_cli_job_elapsed(job, now_ms);
		if (ms >= 0)
			gp_cli_format_elapsed(ms, elapsed, sizeof(elapsed));
		else
			gp_strlcpy(elapsed, "-", sizeof(elapsed));
		row[0] = id;
		row[1] = gp_cli_json_str(job, "name");
		row[2] = gp_cli_json_str(job, "user");
		row[3] = gp_cli_json_str(job, "group");
		row[4] = state_cell(job, state, sizeof(state));
		row[5] = gp_cli_json_str(job, "node");
		row[6] = json_is_object(req) ? gpus : NULL;
		row[7] = elapsed;
		/* Why a queued job waits (the scheduler's reason). */
		row[8] = wait_cell(json_object_get(job, "wait"), wait,
		    sizeof(wait));
		/* A running job's open interactive sessions (shells ...). */
		if (json_integer_value(json_object_get(job, "sessions")) > 0) {
			snprintf(wait, sizeof(wait), "%" JSON_INTEGER_FORMAT
			    " session%s", json_integer_value(json_object_get(
			    job, "sessions")), json_integer_value(
			    json_object_get(job, "sessions")) > 1 ? "s" : "");
			row[8] = wait;
		}
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if (rc == 0)
		rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	return rc;
}

/* ps renders ages against now. */
static int
render_jobs_now(json_t *reply, struct gp_buf *out)
{
	return gp_cli_render_jobs(reply, gp_now_ms(), out);
}

int
gp_cli_cmd_ps(const struct gp_cli_args *args)
{
	const char *lv = gp_cli_value(args, "last");
	int all = gp_cli_flag(args, "all");
	int64_t last = 0;
	char path[64];

	if (lv != NULL && !all)
		return gp_cli_usage_error(NULL, "ps: --last needs --all");
	if (lv != NULL && gp_parse_int(lv, 1, INT32_MAX, &last) != 0)
		return gp_cli_usage_error(NULL,
		    "ps: --last '%s' is not a positive number of jobs", lv);
	if (last > 0)
		snprintf(path, sizeof(path), "/v1/jobs?all=1&limit=%lld",
		    (long long)last);
	else
		snprintf(path, sizeof(path), "%s",
		    all ? "/v1/jobs?all=1" : "/v1/jobs");
	return gp_cli_get_list(args, path, render_jobs_now);
}

int
gp_cli_render_queue(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"POS", "ID", "NAME", "USER",
	    "GROUP", "GPUS", "WAIT", "WHY"};
	struct gp_table t;
	json_t *jobs, *job, *head;
	char pos[32], id[32], gpus[32];
	const char *row[8];
	size_t i;
	int rc;

	jobs = json_object_get(reply, "jobs");
	if (!json_is_array(jobs))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 8, header)) != 0)
		return rc;
	t.right[0] = t.right[1] = t.right[5] = 1;
	json_array_foreach(jobs, i, job)
	{
		snprintf(pos, sizeof(pos), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(json_object_get(job, "position")));
		snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(json_object_get(job, "id")));
		gpus_text(job, gpus, sizeof(gpus));
		row[0] = pos;
		row[1] = id;
		row[2] = gp_cli_json_str(job, "name");
		row[3] = gp_cli_json_str(job, "user");
		row[4] = gp_cli_json_str(job, "group");
		row[5] = gpus;
		row[6] = gp_cli_json_str(job, "reason");
		row[7] = gp_cli_json_str(job, "why");
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if (rc == 0)
		rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	if (rc != 0)
		return rc;
	head = json_object_get(reply, "head");
	json_array_foreach(jobs, i, job)
	{
		if (!json_is_integer(head) ||
		    json_integer_value(json_object_get(job, "id")) !=
		        json_integer_value(head))
			continue;
		if (gp_cli_json_str(job, "expected_start") != NULL)
			rc = gp_buf_printf(out,
			    "job %" JSON_INTEGER_FORMAT
			    " holds the reservation: expected start %s\n",
			    json_integer_value(head),
			    gp_cli_json_str(job, "expected_start"));
	}
	return rc;
}

int
gp_cli_cmd_queue(const struct gp_cli_args *args)
{
	return gp_cli_get_list(args, "/v1/queue", gp_cli_render_queue);
}

/* The job id operand, checked before any network call. */
static int
job_operand(const struct gp_cli_args *args, int64_t *id)
{
	if (gp_cli_parse_job_id(args->operands[0], id) != 0)
		return gp_cli_usage_error(NULL,
		    "%s: '%s' is not a job id (a positive whole number)",
		    args->cmd->name, args->operands[0]);
	return 0;
}

static void
print_field(const char *key, const char *value)
{
	printf("%s: %s\n", key, value != NULL ? value : "-");
}

static void
print_int_field(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	char text[32];

	if (json_is_integer(v)) {
		snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		print_field(key, text);
	} else
		print_field(key, NULL);
}

/* Joins a JSON array of strings or integers into a gp_buf. */
static void
join_array(json_t *array, const char *sep, int quote, struct gp_buf *out)
{
	const char *s;
	json_t *v;
	size_t i;

	json_array_foreach(array, i, v)
	{
		if (i > 0)
			gp_buf_printf(out, "%s", sep);
		if (json_is_integer(v)) {
			gp_buf_printf(out, "%" JSON_INTEGER_FORMAT,
			    json_integer_value(v));
			continue;
		}
		s = json_string_value(v);
		if (s == NULL)
			continue;
		if (quote &&
		    (s[0] == '\0' ||
		        strpbrk(s, " \t\n'\"\\$`*?;&|<>()") != NULL))
			gp_buf_printf(out, "'%s'", s);
		else
			gp_buf_printf(out, "%s", s);
	}
}

static const char *
or_dash(const char *s)
{
	return s != NULL ? s : "-";
}

/* A queued job's wait: "share (why); position 3; expected start T". */
static void
print_wait(json_t *w)
{
	if (!json_is_object(w))
		return;
	printf("wait: %s (%s); position %" JSON_INTEGER_FORMAT,
	    or_dash(gp_cli_json_str(w, "reason")),
	    or_dash(gp_cli_json_str(w, "why")),
	    json_integer_value(json_object_get(w, "position")));
	if (gp_cli_json_str(w, "expected_start") != NULL)
		printf("; expected start %s",
		    gp_cli_json_str(w, "expected_start"));
	printf("\n");
}

/* A gang's parts: "part 0: node=a gpus=0,1 started". */
static void
print_parts(json_t *parts)
{
	struct gp_buf b = {0};
	json_t *p;
	size_t i;

	if (json_array_size(parts) < 2 && !(json_array_size(parts) == 1 &&
	        json_is_number(json_object_get(json_array_get(parts, 0),
	            "gpu_share"))))
		return;
	printf("parts:\n");
	json_array_foreach(parts, i, p)
	{
		join_array(json_object_get(p, "gpus"), ",", 0, &b);
		printf("  part %" JSON_INTEGER_FORMAT ": node=%s gpus=%s",
		    json_integer_value(json_object_get(p, "part")),
		    or_dash(gp_cli_json_str(p, "node")),
		    b.len > 0 ? b.data : "-");
		if (json_is_number(json_object_get(p, "gpu_share")))
			printf(" share=%g",
			    json_number_value(json_object_get(p, "gpu_share")));
		/* What libgpupool-cuda.so measured (docs/gpu-sharing.md). */
		if (json_is_object(json_object_get(p, "gpu_use"))) {
			json_t *u = json_object_get(p, "gpu_use");
			printf(" gpu_mem=%" JSON_INTEGER_FORMAT "/%"
			    JSON_INTEGER_FORMAT "M share_now=%.3f util=%"
			    JSON_INTEGER_FORMAT "%%",
			    json_integer_value(json_object_get(u,
			    "mem_used_mib")), json_integer_value(
			    json_object_get(u, "mem_limit_mib")),
			    json_number_value(json_object_get(u, "share_now")),
			    json_integer_value(json_object_get(u, "util")));
		}
		printf(" %s\n",
		    json_is_true(json_object_get(p, "ended"))         ? "ended"
		    : json_is_true(json_object_get(p, "started")) ? "started"
		                                                   : "starting");
		gp_buf_free(&b);
	}
}

static void
print_job(json_t *job)
{
	struct gp_buf b = {0};
	json_t *req, *h, *v;
	char text[64], mib[32];
	int64_t ms;
	size_t i;

	print_int_field(job, "id");
	print_field("name", gp_cli_json_str(job, "name"));
	print_field("user", gp_cli_json_str(job, "user"));
	if (gp_cli_json_str(job, "group") != NULL)
		print_field("group", gp_cli_json_str(job, "group"));
	print_field("state", display_state(job));
	if (gp_cli_json_str(job, "wait_reason") != NULL)
		print_field("waiting", gp_cli_json_str(job, "wait_reason"));
	if (gp_cli_json_str(job, "hold_reason") != NULL)
		print_field("held", gp_cli_json_str(job, "hold_reason"));
	print_field("reason", gp_cli_json_str(job, "reason"));
	print_wait(json_object_get(job, "wait"));
	if (gp_cli_json_str(job, "message") != NULL &&
	    gp_cli_json_str(job, "message")[0] != '\0')
		print_field("message", gp_cli_json_str(job, "message"));
	print_int_field(job, "exit_code");
	if (json_integer_value(json_object_get(job, "signal")) > 0)
		print_int_field(job, "signal");
	print_field("node", gp_cli_json_str(job, "node"));
	join_array(json_object_get(job, "gpus"), ",", 0, &b);
	print_field("gpus", b.len > 0 ? b.data : NULL);
	gp_buf_free(&b);
	print_parts(json_object_get(job, "parts"));
	if (json_array_size(json_object_get(job, "gpu_uuids")) > 0) {
		join_array(json_object_get(job, "gpu_uuids"), ",", 0, &b);
		print_field("gpu_uuids", b.data);
		gp_buf_free(&b);
	}
	if (gp_cli_json_str(job, "image") != NULL)
		print_field("image", gp_cli_json_str(job, "image"));
	if (json_is_true(json_object_get(job, "interactive")))
		print_field("interactive", "yes");
	if (json_array_size(json_object_get(job, "expose")) > 0) {
		join_array(json_object_get(job, "expose"), ",", 0, &b);
		print_field("expose", b.data);
		gp_buf_free(&b);
	}
	/* Where the coordinator's proxy serves them (sign in: dashboard). */
	if (json_array_size(json_object_get(job, "proxy_urls")) > 0) {
		join_array(json_object_get(job, "proxy_urls"), " ", 0, &b);
		print_field("proxy", b.data);
		gp_buf_free(&b);
	}
	join_array(json_object_get(job, "command"), " ", 1, &b);
	print_field("command", b.data);
	gp_buf_free(&b);
	/* Data sets: "alice/imagenet@3:/mnt, ..." */
	json_array_foreach(json_object_get(job, "data"), i, v)
		gp_buf_printf(&b, "%s%s/%s@%" JSON_INTEGER_FORMAT ":%s",
		    i ? ", " : "", or_dash(gp_cli_json_str(v, "owner")),
		    or_dash(gp_cli_json_str(v, "name")),
		    json_integer_value(json_object_get(v, "version")),
		    or_dash(gp_cli_json_str(v, "path")));
	if (b.len > 0)
		print_field("data", b.data);
	gp_buf_free(&b);
	print_field("submitted_at", gp_cli_json_str(job, "submitted_at"));
	print_field("started_at", gp_cli_json_str(job, "started_at"));
	print_field("finished_at", gp_cli_json_str(job, "finished_at"));
	ms = gp_cli_job_elapsed(job, gp_now_ms());
	if (ms >= 0) {
		gp_cli_format_elapsed(ms, text, sizeof(text));
		print_field("elapsed", text);
	}
	print_int_field(job, "attempts");
	/* Interactive sessions open into it (docs/interactive.md). */
	if (json_is_integer(json_object_get(job, "sessions")))
		print_int_field(job, "sessions");
	if (json_is_integer(json_object_get(job, "cost_micro"))) {
		char credits[40], gpu_time[40];
		gp_credits_format(json_integer_value(json_object_get(job,
				      "cost_micro")),
		    credits, sizeof(credits));
		gp_cli_format_gpu_time(json_integer_value(json_object_get(job,
					   "gpu_ms")),
		    gpu_time, sizeof(gpu_time));
		printf("cost: %s credits for %s GPU time\n", credits, gpu_time);
	}
	/* A coordinator older than job network accounting has none. */
	if (json_is_integer(json_object_get(job, "net_received_bytes"))) {
		char sent[32], received[32];
		gp_format_bytes(json_integer_value(json_object_get(job,
		    "net_sent_bytes")), sent, sizeof(sent));
		gp_format_bytes(json_integer_value(json_object_get(job,
		    "net_received_bytes")), received, sizeof(received));
		printf("network: %s sent, %s received\n", sent, received);
	}
	req = json_object_get(job, "request");
	if (json_is_object(req)) {
		gp_buf_printf(&b, "gpus=%" JSON_INTEGER_FORMAT,
		    json_integer_value(json_object_get(req, "gpus")));
		if (json_integer_value(json_object_get(req, "nodes")) > 1)
			gp_buf_printf(&b, " nodes=%" JSON_INTEGER_FORMAT,
			    json_integer_value(json_object_get(req, "nodes")));
		if (json_is_number(json_object_get(req, "gpu_share")))
			gp_buf_printf(&b, " gpu_share=%g",
			    json_number_value(json_object_get(req,
			        "gpu_share")));
		if (json_integer_value(json_object_get(req, "gpu_mem_mib")) >
		    0) {
			gp_cli_format_mib(json_integer_value(
			                      json_object_get(req,
			                          "gpu_mem_mib")),
			    mib, sizeof(mib));
			gp_buf_printf(&b, " gpu_mem=%s", mib);
		}
		if (json_integer_value(json_object_get(req,
		        "min_gpu_mem_mib")) > 0) {
			gp_cli_format_mib(json_integer_value(
			                      json_object_get(req,
			                          "min_gpu_mem_mib")),
			    mib, sizeof(mib));
			gp_buf_printf(&b, " min_gpu_mem=%s", mib);
		}
		if (gp_cli_json_str(req, "compute_capability") != NULL)
			gp_buf_printf(&b, " compute_capability=%s",
			    gp_cli_json_str(req, "compute_capability"));
		if (gp_cli_json_str(req, "gpu_model") != NULL)
			gp_buf_printf(&b, " gpu_model=%s",
			    gp_cli_json_str(req, "gpu_model"));
		if (gp_cli_json_str(req, "network") != NULL)
			gp_buf_printf(&b, " network=%s",
			    gp_cli_json_str(req, "network"));
		gp_buf_printf(&b, " cpus=%" JSON_INTEGER_FORMAT,
		    json_integer_value(json_object_get(req, "cpus")));
		if (json_integer_value(json_object_get(req, "mem_mib")) > 0) {
			gp_cli_format_mib(json_integer_value(
			                      json_object_get(req, "mem_mib")),
			    mib, sizeof(mib));
			gp_buf_printf(&b, " mem=%s", mib);
		}
		if (json_integer_value(json_object_get(req,
			"max_price_micro")) > 0) {
			char price[40];
			gp_credits_format(json_integer_value(json_object_get(
					      req, "max_price_micro")),
			    price, sizeof(price));
			gp_buf_printf(&b, " max_price=%s", price);
		}
		if (json_integer_value(json_object_get(req, "time_limit_s")) >
		    0) {
			gp_format_duration(json_integer_value(
			                       json_object_get(req,
			                           "time_limit_s")),
			    text, sizeof(text));
			gp_buf_printf(&b, " time=%s", text);
		}
		print_field("request", b.data);
		gp_buf_free(&b);
	}
	if (json_object_size(json_object_get(job, "env")) > 0) {
		const char *key;
		json_object_foreach(json_object_get(job, "env"), key, v)
		    gp_buf_printf(&b, "%s%s=%s", b.len > 0 ? " " : "", key,
		        json_is_null(v) ? "(hidden)" /* not the owner */
		        : json_string_value(v) ? json_string_value(v) : "");
		print_field("env", b.data);
		gp_buf_free(&b);
	}
	h = json_object_get(job, "history");
	if (json_array_size(h) > 0) {
		printf("history:\n");
		json_array_foreach(h, i, v)
		{
			json_t *ck = json_object_get(v, "checkpoint");
			json_int_t rv = json_integer_value(
			    json_object_get(v, "restored_version"));

			printf("  attempt %" JSON_INTEGER_FORMAT
			       ": node=%s started=%s finished=%s reason=%s\n",
			    json_integer_value(json_object_get(v, "attempt")),
			    or_dash(gp_cli_json_str(v, "node")),
			    or_dash(gp_cli_json_str(v, "started_at")),
			    or_dash(gp_cli_json_str(v, "finished_at")),
			    or_dash(gp_cli_json_str(v, "reason")));
			if (rv > 0)
				printf("    resumed from checkpoint version %"
				       JSON_INTEGER_FORMAT "\n", rv);
			if (json_integer_value(json_object_get(v,
				"rate_micro")) > 0) {
				char cost[40], rate[40], gt[40];
				gp_credits_format(json_integer_value(
						      json_object_get(v,
							  "cost_micro")),
				    cost, sizeof(cost));
				gp_credits_format(json_integer_value(
						      json_object_get(v,
							  "rate_micro")),
				    rate, sizeof(rate));
				gp_cli_format_gpu_time(json_integer_value(
							   json_object_get(v,
							       "gpu_ms")),
				    gt, sizeof(gt));
				printf("    cost: %s credits (%s GPU time at "
				       "%s credits/hour)\n",
				    cost, gt, rate);
			}
			if (json_is_object(ck))
				printf("    saved: checkpoint version %"
				       JSON_INTEGER_FORMAT " (%s) at %s, %"
				       JSON_INTEGER_FORMAT " bytes; work since "
				       "then: %" JSON_INTEGER_FORMAT " s\n",
				    json_integer_value(
					json_object_get(ck, "version")),
				    or_dash(gp_cli_json_str(ck, "label")),
				    or_dash(gp_cli_json_str(ck, "at")),
				    json_integer_value(
					json_object_get(ck, "bytes")),
				    json_integer_value(
					json_object_get(v, "lost_s")));
			else if (json_object_get(v, "finished_at") != NULL &&
			    !json_is_null(json_object_get(v, "finished_at")))
				printf("    saved: no checkpoint; work lost: %"
				       JSON_INTEGER_FORMAT " s\n",
				    json_integer_value(
					json_object_get(v, "lost_s")));
		}
	}
}

int
gp_cli_cmd_show(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	char path[64];
	json_t *reply;
	int64_t id;
	int rc;

	if ((rc = job_operand(args, &id)) != 0)
		return rc;
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%lld", (long long)id);
	rc = gp_cli_call(&conn, "GET", path, NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	if (gp_cli_flag(args, "json"))
		gp_cli_print_json(reply);
	else
		print_job(reply);
	json_decref(reply);
	return 0;
}

/*
 * One request that survives the coordinator going away for a while
 * (a restart): retries connection errors once a second. Returns what
 * gp_http_request returns.
 */
static int
patient_request(struct gp_cli_conn *conn, const char *path, long timeout_ms,
    struct gp_http_response *resp)
{
	int rc, tries = 0, warned = 0;

	for (;;) {
		rc = gp_http_request(conn->http, "GET", path, NULL, 0, NULL,
		    timeout_ms, resp);
		if (rc == 0 && resp->status != 502 && resp->status != 503)
			return 0;
		if (rc == 0 && ++tries >= RECONNECT_TRIES)
			return 0;
		if (rc != 0 && ++tries >= RECONNECT_TRIES)
			return rc;
		if (!warned) {
			gp_cli_error("lost the coordinator at %s; retrying",
			    conn->cfg.url);
			warned = 1;
		}
		gp_http_response_fini(resp);
		sleep(1);
	}
}

int
gp_cli_cmd_logs(const struct gp_cli_args *args)
{
	struct gp_http_response resp;
	struct gp_cli_conn conn;
	int follow = gp_cli_flag(args, "follow");
	const char *pv = gp_cli_value(args, "part");
	int64_t id, offset = 0, part = 0;
	char path[160];
	int rc;

	if ((rc = job_operand(args, &id)) != 0)
		return rc;
	if (pv != NULL &&
	    gp_parse_int(pv, 0, GP_NODES_MAX - 1, &part) != 0)
		return gp_cli_usage_error(NULL,
		    "logs: --part '%s' is not a part number (0 to %d)", pv,
		    GP_NODES_MAX - 1);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	for (;;) {
		if (follow) {
			snprintf(path, sizeof(path),
			    "/v1/jobs/%lld/log?offset=%lld&wait_ms=%d&part=%lld",
			    (long long)id, (long long)offset, LONG_POLL_MS,
			    (long long)part);
			rc = patient_request(&conn, path,
			    LONG_POLL_MS + LONG_POLL_SLACK_MS, &resp);
		} else {
			snprintf(path, sizeof(path),
			    "/v1/jobs/%lld/log?offset=%lld&part=%lld",
			    (long long)id, (long long)offset, (long long)part);
			rc = gp_http_request(conn.http, "GET", path, NULL, 0,
			    NULL, 0, &resp);
		}
		if (rc != 0 || resp.status != 200) {
			gp_cli_report_http(&conn, rc, &resp);
			gp_http_response_fini(&resp);
			rc = GP_CLI_EXIT_FAIL;
			break;
		}
		if (resp.body_len > 0 &&
		    gp_write_all(STDOUT_FILENO, resp.body, resp.body_len) !=
		        0) {
			gp_http_response_fini(&resp);
			rc = GP_CLI_EXIT_FAIL;
			break;
		}
		if (resp.log_offset >= 0)
			offset = resp.log_offset;
		else
			offset += (int64_t)resp.body_len;
		if (resp.log_done || (!follow && resp.body_len == 0)) {
			gp_http_response_fini(&resp);
			rc = 0;
			break;
		}
		gp_http_response_fini(&resp);
	}
	gp_cli_disconnect(&conn);
	return rc;
}

int
gp_cli_cmd_checkpoint_now(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	json_t *reply, *body;
	char path[64];
	int64_t id;
	int rc;

	if ((rc = job_operand(args, &id)) != 0)
		return rc;
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%lld/checkpoint",
	    (long long)id);
	body = json_object();
	rc = gp_cli_call(&conn, "POST", path, body, 0, &reply, NULL);
	json_decref(body);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	printf("checkpoint upload requested for %lld (attempt %lld)\n",
	    (long long)id,
	    (long long)json_integer_value(json_object_get(reply, "attempt")));
	json_decref(reply);
	return 0;
}

int
gp_cli_cmd_cancel(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	json_t *reply, *body;
	const char *state, *node;
	char path[64];
	int64_t id;
	int rc;

	if ((rc = job_operand(args, &id)) != 0)
		return rc;
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%lld/cancel", (long long)id);
	body = json_object();
	rc = gp_cli_call(&conn, "POST", path, body, 0, &reply, NULL);
	json_decref(body);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	state = gp_cli_json_str(reply, "state");
	node = gp_cli_json_str(reply, "node");
	if (state != NULL && strcmp(state, "running") == 0)
		printf("cancel requested for %lld (running on %s)\n",
		    (long long)id, node != NULL ? node : "?");
	else
		printf("cancelled %lld\n", (long long)id);
	json_decref(reply);
	return 0;
}

static int
finished(const char *state)
{
	return state != NULL &&
	    (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
	        strcmp(state, "cancelled") == 0 ||
	        strcmp(state, "timeout") == 0);
}

int
gp_cli_job_exit_code(json_t *job, char *note, size_t len)
{
	const char *state = gp_cli_json_str(job, "state");
	const char *reason = gp_cli_json_str(job, "reason");
	const char *message = gp_cli_json_str(job, "message");
	json_t *exit_code = json_object_get(job, "exit_code");
	json_int_t sig = json_integer_value(json_object_get(job, "signal"));
	long long id = json_integer_value(json_object_get(job, "id"));
	int code;

	int stopped_by_gpupool;

	note[0] = '\0';
	/* A cancel or a time limit is gpupool's kill, not the job's fate. */
	stopped_by_gpupool = (state != NULL &&
	                         (strcmp(state, "cancelled") == 0 ||
	                             strcmp(state, "timeout") == 0)) ||
	    (reason != NULL &&
	        (strcmp(reason, "cancelled") == 0 ||
	            strcmp(reason, "timeout") == 0 ||
	            strcmp(reason, "start_failed") == 0 ||
	            strcmp(reason, "image_refused") == 0));
	if (json_is_integer(exit_code))
		code = (int)(json_integer_value(exit_code) & 255);
	else if (sig > 0 && !stopped_by_gpupool)
		code = 128 + (int)sig;
	else if (state != NULL && strcmp(state, "succeeded") == 0)
		code = 0;
	else
		code = 1;
	/* Who ended it, when the coordinator noted it (apply_cancel). */
	if (state != NULL && strcmp(state, "cancelled") == 0 &&
	    message != NULL && (strncmp(message, "cancelled by ", 13) == 0 ||
	    strncmp(message, "ended by ", 9) == 0))
		snprintf(note, len, "job %lld was %s", id, message);
	else if (state != NULL && strcmp(state, "cancelled") == 0)
		snprintf(note, len, "job %lld was cancelled", id);
	else if ((state != NULL && strcmp(state, "timeout") == 0) ||
	    (reason != NULL && strcmp(reason, "timeout") == 0))
		snprintf(note, len, "job %lld reached its time limit", id);
	else if (reason != NULL && strcmp(reason, "start_failed") == 0)
		snprintf(note, len, "job %lld could not start%s%s", id,
		    message != NULL && message[0] ? ": " : "",
		    message != NULL ? message : "");
	else if (reason != NULL && strcmp(reason, "image_refused") == 0)
		snprintf(note, len, "job %lld: the provider refused its "
		    "image%s%s", id, message != NULL && message[0] ? ": " : "",
		    message != NULL ? message : "");
	else if (sig > 0 && !json_is_integer(exit_code))
		snprintf(note, len, "job %lld was killed by signal %d", id,
		    (int)sig);
	return code;
}

int
gp_cli_job_await(struct gp_cli_conn *conn, int64_t id, json_t **job)
{
	struct gp_http_response resp;
	char path[96];
	int rc;

	snprintf(path, sizeof(path), "/v1/jobs/%lld/wait?wait_ms=%d",
	    (long long)id, LONG_POLL_MS);
	for (;;) {
		rc = patient_request(conn, path,
		    LONG_POLL_MS + LONG_POLL_SLACK_MS, &resp);
		if (rc != 0 || resp.status != 200) {
			gp_cli_report_http(conn, rc, &resp);
			gp_http_response_fini(&resp);
			return GP_CLI_EXIT_FAIL;
		}
		*job = json_loadb(resp.body, resp.body_len, 0, NULL);
		gp_http_response_fini(&resp);
		if (*job == NULL) {
			gp_cli_error("the coordinator answered invalid JSON");
			return GP_CLI_EXIT_FAIL;
		}
		if (finished(gp_cli_json_str(*job, "state")))
			return 0;
		json_decref(*job);
	}
}

/*
 * Waits until job id has finished; returns its exit code (as
 * gp_cli_job_exit_code) or GP_CLI_EXIT_FAIL with the error printed.
 */
static int
wait_for_job(struct gp_cli_conn *conn, int64_t id)
{
	char note[512];
	json_t *job;
	int rc;

	if ((rc = gp_cli_job_await(conn, id, &job)) != 0)
		return rc;
	rc = gp_cli_job_exit_code(job, note, sizeof(note));
	if (note[0] != '\0')
		gp_cli_error("%s", note);
	json_decref(job);
	return rc;
}

int
gp_cli_cmd_wait(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	int64_t id;
	int rc;

	if ((rc = job_operand(args, &id)) != 0)
		return rc;
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	rc = wait_for_job(&conn, id);
	gp_cli_disconnect(&conn);
	return rc;
}
