/*
 * provider.c: `gpupool provider ...`, the owner's commands for the local
 * agent: status, pause, resume, reclaim, leave, policy show (over the
 * agent's control socket, src/agent/control.h) and policy check (local).
 * The renderers take the agent's JSON answers and tolerate missing
 * fields: an older or newer agent still gets readable output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/control.h"
#include "agent/policy.h"
#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

/* Short commands answer at once; reclaim and leave wait for jobs. */
#define QUICK_TIMEOUT_MS 30000

int
gp_cli_provider_socket(const char *opt, const struct gp_cli_config *cfg,
    char *out, size_t len)
{
	const char *v;
	int n;

	if (opt != NULL && opt[0] != '\0')
		n = snprintf(out, len, "%s", opt);
	else if ((v = getenv("GPUPOOL_AGENT_SOCKET")) != NULL && v[0] != '\0')
		n = snprintf(out, len, "%s", v);
	else if (cfg != NULL && cfg->agent_socket[0] != '\0')
		n = snprintf(out, len, "%s", cfg->agent_socket);
	else if (geteuid() == 0)
		n = snprintf(out, len, "/var/lib/gpupool/agent/agent.sock");
	else if ((v = getenv("XDG_STATE_HOME")) != NULL && v[0] == '/')
		n = snprintf(out, len, "%s/gpupool/agent/agent.sock", v);
	else if ((v = getenv("HOME")) != NULL && v[0] == '/')
		n = snprintf(out, len, "%s/.local/state/gpupool/agent/agent.sock",
		    v);
	else
		return GP_EINVAL;
	return n > 0 && (size_t)n < len ? 0 : GP_EINVAL;
}

json_t *
gp_cli_provider_gpus(char **operands, int n, char *err, size_t errlen)
{
	json_t *gpus;
	uint64_t seen = 0;
	int64_t g;
	int i;

	if ((gpus = json_array()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if (gp_parse_int(operands[i], 0, 63, &g) != 0) {
			snprintf(err, errlen, "'%.32s' is not a GPU index "
			    "(0..63)", operands[i]);
			json_decref(gpus);
			return NULL;
		}
		if (seen & (UINT64_C(1) << g))
			continue;
		seen |= UINT64_C(1) << g;
		json_array_append_new(gpus, json_integer(g));
	}
	return gpus;
}

/* An integer field, or def when absent. */
static int64_t
int_field(json_t *obj, const char *key, int64_t def)
{
	json_t *v = json_object_get(obj, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

/* "0,1,3" from an array of integers; "none" when empty. */
static void
format_index_list(json_t *array, char *out, size_t len)
{
	json_t *v;
	size_t i, n = 0;

	out[0] = '\0';
	json_array_foreach(array, i, v) {
		if (!json_is_integer(v))
			continue;
		n += (size_t)snprintf(out + n, n < len ? len - n : 0,
		    "%s%" JSON_INTEGER_FORMAT, n > 0 ? "," : "",
		    json_integer_value(v));
	}
	if (n == 0)
		snprintf(out, len, "none");
}

/* "open, closes in 3h0m" / "closed, opens in ..." / "always open". */
static void
format_window(json_t *obj, char *out, size_t len)
{
	json_t *open = json_object_get(obj, "window_open");
	int64_t next = int_field(obj, "window_next_change_s", -1);
	char d[32];

	if (!json_is_boolean(open)) {
		snprintf(out, len, "unknown");
		return;
	}
	if (next < 0) {
		snprintf(out, len, "%s", json_is_true(open) ? "always open" :
		    "closed");
		return;
	}
	gp_format_duration(next, d, sizeof(d));
	snprintf(out, len, "%s, %s in %s", json_is_true(open) ? "open" :
	    "closed", json_is_true(open) ? "closes" : "opens", d);
}

/* The policy object of policy_to_json, one "key: value" line each. */
static void
render_policy(json_t *policy, struct gp_buf *out)
{
	json_t *v, *w;
	char text[1024];
	size_t i, n;

	if (!json_is_object(policy))
		return;
	v = json_object_get(policy, "gpus");
	if (json_is_string(v))
		gp_buf_printf(out, "  gpus:             %s\n",
		    json_string_value(v));
	else if (json_is_array(v)) {
		format_index_list(v, text, sizeof(text));
		gp_buf_printf(out, "  gpus:             %s\n", text);
	}
	v = json_object_get(policy, "windows");
	if (json_is_array(v)) {
		n = 0;
		text[0] = '\0';
		json_array_foreach(v, i, w)
			if (json_is_string(w))
				n += (size_t)snprintf(text + n, n <
				    sizeof(text) ? sizeof(text) - n : 0,
				    "%s%s", n > 0 ? "; " : "",
				    json_string_value(w));
		gp_buf_printf(out, "  windows:          %s\n",
		    n > 0 ? text : "always (no window)");
	}
	v = json_object_get(policy, "cpus");
	if (json_is_integer(v))
		gp_buf_printf(out, "  cpus:             %" JSON_INTEGER_FORMAT
		    "\n", json_integer_value(v));
	else if (json_is_null(v))
		gp_buf_printf(out, "  cpus:             the agent's\n");
	v = json_object_get(policy, "memory_mib");
	if (json_is_integer(v)) {
		gp_cli_format_mib(json_integer_value(v), text, sizeof(text));
		gp_buf_printf(out, "  memory:           %s\n", text);
	} else if (json_is_null(v))
		gp_buf_printf(out, "  memory:           the agent's\n");
	v = json_object_get(policy, "max_job_time_s");
	if (json_is_integer(v)) {
		gp_format_duration(json_integer_value(v), text, sizeof(text));
		gp_buf_printf(out, "  max-job-time:     %s\n", text);
	} else if (json_is_null(v))
		gp_buf_printf(out, "  max-job-time:     any\n");
	v = json_object_get(policy, "checkpoint_grace_s");
	if (json_is_integer(v)) {
		gp_format_duration(json_integer_value(v), text, sizeof(text));
		gp_buf_printf(out, "  checkpoint-grace: %s\n", text);
	}
	if (gp_cli_json_str(policy, "owner_presence") != NULL)
		gp_buf_printf(out, "  owner-presence:   %s\n",
		    gp_cli_json_str(policy, "owner_presence"));
	if (gp_cli_json_str(policy, "network") != NULL)
		gp_buf_printf(out, "  network:          %s\n",
		    gp_cli_json_str(policy, "network"));
	v = json_object_get(policy, "net_rate_bps");
	if (json_is_integer(v))
		gp_buf_printf(out, "  net-rate:         %" JSON_INTEGER_FORMAT
		    " bit/s per job, each way\n", json_integer_value(v));
}

/* "policy: FILE" and, when the agent could not load it, why. */
static void
render_policy_file(json_t *answer, const char *file_key,
    const char *error_key, struct gp_buf *out)
{
	const char *file = gp_cli_json_str(answer, file_key);
	const char *error = gp_cli_json_str(answer, error_key);

	gp_buf_printf(out, "policy:   %s\n", file != NULL ? file :
	    "none (defaults: every GPU, always)");
	if (error != NULL)
		gp_buf_printf(out, "          error: %s (the agent keeps the "
		    "policy it had)\n", error);
}

/* "running 2:03" style cells of one GPU row. */
static void
gpu_row(json_t *gpu, struct gp_table *t, struct gp_buf *notes)
{
	json_t *job = json_object_get(gpu, "job"), *procs;
	char index[16], id[48], running[32], ckpt[64], age[32];
	const char *row[8];
	int64_t version, age_s;

	snprintf(index, sizeof(index), "%lld",
	    (long long)int_field(gpu, "index", -1));
	row[0] = index;
	row[1] = gp_cli_json_str(gpu, "state");
	row[2] = gp_cli_json_str(gpu, "model");
	row[3] = row[4] = row[5] = row[6] = row[7] = NULL;
	if (json_is_object(job)) {
		snprintf(id, sizeof(id), "%lld", (long long)int_field(job, "id",
		    0));
		if (int_field(job, "attempt", 0) > 1)
			snprintf(id + strlen(id), sizeof(id) - strlen(id),
			    " (attempt %lld)",
			    (long long)int_field(job, "attempt", 0));
		row[3] = id;
		row[4] = gp_cli_json_str(job, "user");
		row[5] = gp_cli_json_str(job, "name");
		if (int_field(job, "running_s", -1) >= 0) {
			gp_cli_format_elapsed(int_field(job, "running_s", 0) *
			    1000, running, sizeof(running));
			row[6] = running;
		}
		version = int_field(job, "checkpoint_version", 0);
		age_s = int_field(job, "checkpoint_age_s", -1);
		if (version > 0) {
			if (age_s >= 0) {
				gp_format_duration(age_s, age, sizeof(age));
				snprintf(ckpt, sizeof(ckpt),
				    "v%lld, %s ago", (long long)version, age);
			} else
				snprintf(ckpt, sizeof(ckpt), "v%lld",
				    (long long)version);
			row[7] = ckpt;
		}
	}
	gp_table_add(t, row);
	procs = json_object_get(gpu, "owner_processes");
	if (json_is_array(procs) && json_array_size(procs) > 0) {
		format_index_list(procs, ckpt, sizeof(ckpt));
		gp_buf_printf(notes, "GPU %s: used by the owner's process%s "
		    "%s\n", index, json_array_size(procs) > 1 ? "es" : "",
		    ckpt);
	}
}

int
gp_cli_render_provider_status(json_t *answer, struct gp_buf *out)
{
	static const char *const header[] = {"GPU", "STATE", "MODEL", "JOB",
	    "USER", "NAME", "RUNNING", "CHECKPOINT"};
	struct gp_buf notes = {0};
	struct gp_table t;
	json_t *gpus, *gpu, *v;
	const char *node, *lending;
	char window[96];
	size_t i;
	int rc;

	if (!json_is_object(answer))
		return GP_EPROTO;
	node = gp_cli_json_str(answer, "node");
	gp_buf_printf(out, "node:     %s", node != NULL ? node : "?");
	if (json_is_integer(json_object_get(answer, "node_id")))
		gp_buf_printf(out, " (id %lld)",
		    (long long)int_field(answer, "node_id", 0));
	v = json_object_get(answer, "connected");
	if (json_is_boolean(v))
		gp_buf_printf(out, ", %s", json_is_true(v) ?
		    "connected to the coordinator" :
		    "NOT connected to the coordinator");
	gp_buf_printf(out, "\n");
	if (json_is_true(json_object_get(answer, "leaving")))
		lending = "leaving the pool";
	else if (json_is_true(json_object_get(answer, "paused")))
		lending = "paused (no new jobs; `gpupool provider resume`)";
	else if (json_is_false(json_object_get(answer, "paused")))
		lending = "lending";
	else
		lending = NULL;
	if (lending != NULL)
		gp_buf_printf(out, "state:    %s\n", lending);
	if (json_object_get(answer, "window_open") != NULL) {
		format_window(answer, window, sizeof(window));
		gp_buf_printf(out, "window:   %s\n", window);
	}
	if (gp_cli_json_str(json_object_get(answer, "network"), "applies") !=
	    NULL) {
		json_t *net = json_object_get(answer, "network");
		const char *why = gp_cli_json_str(net, "why");

		gp_buf_printf(out, "network:  jobs get %s%s%s%s\n",
		    gp_cli_json_str(net, "applies"), why != NULL ? " (" : "",
		    why != NULL ? why : "", why != NULL ? ")" : "");
	}
	if (json_object_get(answer, "policy_file") != NULL ||
	    json_object_get(answer, "policy_error") != NULL)
		render_policy_file(answer, "policy_file", "policy_error", out);
	render_policy(json_object_get(answer, "policy"), out);
	gpus = json_object_get(answer, "gpus");
	if (!json_is_array(gpus))
		return 0;
	if (json_array_size(gpus) == 0) {
		gp_buf_printf(out, "\nno GPU\n");
		return 0;
	}
	if ((rc = gp_table_init(&t, 8, header)) != 0)
		return rc;
	t.right[0] = t.right[6] = 1;
	json_array_foreach(gpus, i, gpu)
		gpu_row(gpu, &t, &notes);
	gp_buf_printf(out, "\n");
	rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	if (notes.len > 0)
		gp_buf_append(out, notes.data, notes.len);
	gp_buf_free(&notes);
	return rc;
}

/* "GPU 0: free after 0.21 s (job 4 checkpointed, version 3)". */
static void
render_freed(json_t *item, struct gp_buf *out)
{
	json_t *job = json_object_get(item, "job");
	const char *outcome = gp_cli_json_str(job, "outcome");
	int64_t ms = int_field(item, "freed_ms", -1), version;

	gp_buf_printf(out, "GPU %lld: ", (long long)int_field(item, "index",
	    -1));
	if (ms >= 0)
		gp_buf_printf(out, "free after %.2f s", (double)ms / 1000);
	else
		gp_buf_printf(out, "free");
	if (!json_is_object(job) || (outcome != NULL &&
	    strcmp(outcome, "none") == 0)) {
		gp_buf_printf(out, " (no job)\n");
		return;
	}
	gp_buf_printf(out, " (job %lld", (long long)int_field(job, "id", 0));
	version = int_field(job, "checkpoint_version", 0);
	if (outcome == NULL)
		outcome = "stopped";
	if (strcmp(outcome, "checkpointed") == 0 && version > 0)
		gp_buf_printf(out, " checkpointed, version %lld)\n",
		    (long long)version);
	else if (strcmp(outcome, "killed") == 0)
		gp_buf_printf(out, " killed; %s)\n", version > 0 ?
		    "it resumes from its last uploaded checkpoint" :
		    "no checkpoint: it restarts from the beginning");
	else
		gp_buf_printf(out, " %s)\n", outcome);
}

int
gp_cli_render_provider_reclaim(json_t *answer, struct gp_buf *out)
{
	json_t *gpus, *item;
	size_t i;

	if (!json_is_object(answer))
		return GP_EPROTO;
	gpus = json_object_get(answer, "gpus");
	json_array_foreach(gpus, i, item)
		render_freed(item, out);
	if (json_is_array(gpus) && json_array_size(gpus) == 0)
		gp_buf_printf(out, "no GPU to reclaim\n");
	if (int_field(answer, "elapsed_ms", -1) >= 0)
		gp_buf_printf(out, "done in %.2f s\n",
		    (double)int_field(answer, "elapsed_ms", 0) / 1000);
	return 0;
}

int
gp_cli_render_provider_leave(json_t *answer, struct gp_buf *out)
{
	json_t *jobs, *item, *un;
	size_t i;

	if (!json_is_object(answer))
		return GP_EPROTO;
	jobs = json_object_get(answer, "jobs");
	json_array_foreach(jobs, i, item)
		render_freed(item, out);
	un = json_object_get(answer, "unregistered");
	if (json_is_true(un))
		gp_buf_printf(out, "left the pool: the node is unregistered\n");
	else if (json_is_false(un))
		gp_buf_printf(out, "stopped lending, but the coordinator was "
		    "not told (it will expire the node)\n");
	if (int_field(answer, "elapsed_ms", -1) >= 0)
		gp_buf_printf(out, "done in %.2f s\n",
		    (double)int_field(answer, "elapsed_ms", 0) / 1000);
	return 0;
}

int
gp_cli_render_provider_pause(json_t *answer, struct gp_buf *out)
{
	json_t *paused, *lent;
	char list[256] = "";

	if (!json_is_object(answer))
		return GP_EPROTO;
	paused = json_object_get(answer, "paused");
	lent = json_object_get(answer, "lent");
	if (json_is_array(lent))
		format_index_list(lent, list, sizeof(list));
	if (json_is_true(paused))
		gp_buf_printf(out, "paused: no new jobs%s%s\n",
		    list[0] != '\0' ? "; lent GPUs: " : "", list);
	else if (json_is_false(paused))
		gp_buf_printf(out, "lending%s%s\n",
		    list[0] != '\0' ? "; lent GPUs: " : "", list);
	else
		gp_buf_printf(out, "done\n");
	return 0;
}

int
gp_cli_render_provider_policy(json_t *answer, struct gp_buf *out)
{
	char window[96];

	if (!json_is_object(answer))
		return GP_EPROTO;
	render_policy_file(answer, "file", "error", out);
	render_policy(json_object_get(answer, "policy"), out);
	if (json_object_get(answer, "window_open") != NULL) {
		format_window(answer, window, sizeof(window));
		gp_buf_printf(out, "window:   %s\n", window);
	}
	return 0;
}

/* Sends one request; prints the answer (JSON or rendered). */
static int
call(const struct gp_cli_args *args, json_t *req, long timeout_ms,
    int (*render)(json_t *, struct gp_buf *))
{
	struct gp_cli_config cfg;
	struct gp_buf out = {0};
	char path[1024], err[1024], *line;
	json_t *answer;
	int rc;

	/* The config only for agent_socket: url and token may be absent. */
	rc = gp_cli_config_load(&cfg, err, sizeof(err));
	if (rc != 0 && rc != GP_ENOENT) {
		gp_cli_error("%s", err);
		json_decref(req);
		return GP_CLI_EXIT_FAIL;
	}
	if (gp_cli_provider_socket(gp_cli_value(args, "socket"), &cfg, path,
	    sizeof(path)) != 0) {
		gp_cli_error("cannot tell where the agent's socket is: give "
		    "--socket PATH or set GPUPOOL_AGENT_SOCKET");
		json_decref(req);
		return GP_CLI_EXIT_FAIL;
	}
	line = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (line == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	rc = gp_control_call(path, line, timeout_ms, &answer, err,
	    sizeof(err));
	free(line);
	if (rc != 0) {
		if (rc == GP_ECONN)
			gp_cli_error("%s (is the agent running? --socket or "
			    "GPUPOOL_AGENT_SOCKET name another socket)", err);
		else
			gp_cli_error("%s", err);
		return GP_CLI_EXIT_FAIL;
	}
	if (gp_cli_flag(args, "json")) {
		gp_cli_print_json(answer);
		json_decref(answer);
		return 0;
	}
	rc = render(answer, &out);
	json_decref(answer);
	if (rc != 0) {
		gp_cli_error("unexpected answer from the agent: %s",
		    gp_strerror(rc));
		gp_buf_free(&out);
		return GP_CLI_EXIT_FAIL;
	}
	if (out.len > 0)
		fwrite(out.data, 1, out.len, stdout);
	gp_buf_free(&out);
	return 0;
}

static json_t *
request(const char *cmd)
{
	return json_pack("{s:s}", "cmd", cmd);
}

int
gp_cli_cmd_provider_status(const struct gp_cli_args *args)
{
	return call(args, request("status"), QUICK_TIMEOUT_MS,
	    gp_cli_render_provider_status);
}

int
gp_cli_cmd_provider_pause(const struct gp_cli_args *args)
{
	return call(args, request("pause"), QUICK_TIMEOUT_MS,
	    gp_cli_render_provider_pause);
}

/* A request with the GPU operands, when there are any. */
static int
request_with_gpus(const struct gp_cli_args *args, const char *cmd,
    json_t **req)
{
	char err[128];
	json_t *gpus;

	*req = request(cmd);
	if (args->noperands == 0)
		return 0;
	gpus = gp_cli_provider_gpus(args->operands, args->noperands, err,
	    sizeof(err));
	if (gpus == NULL) {
		json_decref(*req);
		*req = NULL;
		return gp_cli_usage_error(args, "%s", err);
	}
	json_object_set_new(*req, "gpus", gpus);
	return 0;
}

int
gp_cli_cmd_provider_resume(const struct gp_cli_args *args)
{
	json_t *req;
	int rc;

	if ((rc = request_with_gpus(args, "resume", &req)) != 0)
		return rc;
	return call(args, req, QUICK_TIMEOUT_MS, gp_cli_render_provider_pause);
}

int
gp_cli_cmd_provider_reclaim(const struct gp_cli_args *args)
{
	json_t *req;
	int rc;

	if ((rc = request_with_gpus(args, "reclaim", &req)) != 0)
		return rc;
	if (gp_cli_flag(args, "now"))
		json_object_set_new(req, "now", json_true());
	/* Waits for the grace period and the uploads: no timeout. */
	return call(args, req, 0, gp_cli_render_provider_reclaim);
}

int
gp_cli_cmd_provider_leave(const struct gp_cli_args *args)
{
	return call(args, request("leave"), 0, gp_cli_render_provider_leave);
}

int
gp_cli_cmd_provider_policy_show(const struct gp_cli_args *args)
{
	return call(args, request("policy-show"), QUICK_TIMEOUT_MS,
	    gp_cli_render_provider_policy);
}

int
gp_cli_cmd_provider_policy_check(const struct gp_cli_args *args)
{
	const char *file = args->operands[0];
	struct gp_policy p;
	char err[512], summary[512];
	const char *why;
	int line;

	if (gp_policy_load(file, &p, &line, err, sizeof(err)) != 0) {
		fflush(stdout);
		/* "FILE:LINE: reason", as compilers write it. */
		why = err;
		if (line > 0 && strncmp(err, "line ", 5) == 0 &&
		    (why = strstr(err, ": ")) != NULL)
			why += 2;
		else
			why = err;
		if (line > 0)
			fprintf(stderr, "%s:%d: %s\n", file, line, why);
		else
			fprintf(stderr, "%s: %s\n", file, why);
		return GP_CLI_EXIT_FAIL;
	}
	gp_policy_describe(&p, summary, sizeof(summary));
	printf("%s: ok\n%s\n", file, summary);
	return 0;
}
