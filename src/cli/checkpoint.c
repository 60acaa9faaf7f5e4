/*
 * checkpoint.c: `gpupool checkpoints JOB` (the stored versions of a job's
 * checkpoint) and `gpupool checkpoint get JOB DIR` (restores one into an
 * empty directory, verifying every chunk, with the agent's client, and
 * a progress line on a terminal).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "transfer.h"
#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

static void
format_bytes(int64_t bytes, char *out, size_t len)
{
	if (bytes >= (1LL << 30))
		snprintf(out, len, "%.1fG", (double)bytes / (1 << 30));
	else if (bytes >= (1 << 20))
		snprintf(out, len, "%.1fM", (double)bytes / (1 << 20));
	else if (bytes >= (1 << 10))
		snprintf(out, len, "%.1fK", (double)bytes / (1 << 10));
	else
		snprintf(out, len, "%lld", (long long)bytes);
}

int
gp_cli_render_checkpoints(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"VERSION", "ATTEMPT", "SIZE",
	    "FILES", "CREATED", "LABEL"};
	char version[24], attempt[24], size[24], files[24];
	const char *row[6];
	struct gp_table t;
	json_t *list, *v;
	size_t i;
	int rc;

	list = json_object_get(reply, "checkpoints");
	if (!json_is_array(list))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 6, header)) != 0)
		return rc;
	t.right[0] = t.right[1] = t.right[2] = t.right[3] = 1;
	json_array_foreach(list, i, v)
	{
		snprintf(version, sizeof(version), "%lld",
		    (long long)json_integer_value(json_object_get(v,
			"version")));
		snprintf(attempt, sizeof(attempt), "%lld",
		    (long long)json_integer_value(json_object_get(v,
			"attempt")));
		format_bytes(json_integer_value(json_object_get(v, "bytes")),
		    size, sizeof(size));
		snprintf(files, sizeof(files), "%lld",
		    (long long)json_integer_value(json_object_get(v, "files")));
		row[0] = version;
		row[1] = attempt;
		row[2] = size;
		row[3] = files;
		row[4] = gp_cli_json_str(v, "created_at");
		row[5] = gp_cli_json_str(v, "label");
		if (row[5] != NULL && row[5][0] == '\0')
			row[5] = NULL;
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if (rc == 0)
		rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	return rc;
}

int
gp_cli_cmd_checkpoints(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	struct gp_buf out = {0};
	char path[64];
	json_t *reply;
	int64_t id;
	int rc;

	if (gp_cli_parse_job_id(args->operands[0], &id) != 0)
		return gp_cli_usage_error(args, "'%s' is not a job id",
		    args->operands[0]);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%lld/checkpoints",
	    (long long)id);
	rc = gp_cli_call(&conn, "GET", path, NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	if (gp_cli_flag(args, "json")) {
		gp_cli_print_json(reply);
		json_decref(reply);
		return 0;
	}
	rc = gp_cli_render_checkpoints(reply, &out);
	json_decref(reply);
	if (rc != 0) {
		gp_cli_error("unexpected answer from the coordinator: %s",
		    gp_strerror(rc));
		gp_buf_free(&out);
		return GP_CLI_EXIT_FAIL;
	}
	if (out.len == 0 || strchr(out.data, '\n') == out.data + out.len - 1)
		fprintf(stderr, "gpupool: job %lld has no checkpoint\n",
		    (long long)id);
	else
		fwrite(out.data, 1, out.len, stdout);
	gp_buf_free(&out);
	return 0;
}

int
gp_cli_cmd_checkpoint_get(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	struct gp_ckpt_source src;
	struct gp_ckpt_mark mark;
	struct gp_ckpt_stats st;
	struct gp_progress progress;
	const char *version = gp_cli_value(args, "version");
	char manifest[96], prefix[96], err[512], size[24];
	int64_t id, v;
	int rc;

	if (gp_cli_parse_job_id(args->operands[0], &id) != 0)
		return gp_cli_usage_error(args, "'%s' is not a job id",
		    args->operands[0]);
	if (version != NULL && gp_parse_int(version, 1, INT64_MAX / 2, &v) !=
	    0)
		return gp_cli_usage_error(args,
		    "--version: a version number, as `gpupool checkpoints` "
		    "lists");
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	snprintf(manifest, sizeof(manifest), "/v1/jobs/%lld/checkpoints/%s",
	    (long long)id, version != NULL ? version : "latest");
	snprintf(prefix, sizeof(prefix), "/v1/jobs/%lld/checkpoints/chunks/",
	    (long long)id);
	memset(&src, 0, sizeof(src));
	src.url = conn.cfg.url;
	src.token = conn.cfg.token;
	src.ca_file = conn.cfg.ca[0] != '\0' ? conn.cfg.ca : NULL;
	src.manifest_path = manifest;
	src.chunk_prefix = prefix;
	gp_progress_begin(&progress, "restoring", 0);
	src.progress = gp_progress_callback;
	src.progress_arg = &progress;
	memset(&mark, 0, sizeof(mark));
	rc = gp_ckpt_fetch(&src, args->operands[1], (uid_t)-1, (gid_t)-1,
	    &mark, &st, err, sizeof(err));
	gp_progress_end(&progress);
	gp_cli_disconnect(&conn);
	if (rc != 0) {
		gp_cli_error("%s", err);
		return GP_CLI_EXIT_FAIL;
	}
	if (st.version == 0) {
		gp_cli_error("job %lld has no checkpoint", (long long)id);
		return GP_CLI_EXIT_FAIL;
	}
	format_bytes(st.bytes, size, sizeof(size));
	fprintf(stderr, "restored version %lld of job %lld: %lld files, %s "
			"(%s)\n",
	    (long long)st.version, (long long)id, (long long)st.files, size,
	    st.label[0] ? st.label : "no label");
	return 0;
}
