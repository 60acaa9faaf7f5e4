/*
 * data.c: the data commands (docs/data.md): `data put|ls|rm|share|
 * unshare` (data sets), `fetch` and `output rm` (job outputs), `quota
 * set|show`, and the pure helpers behind them (data set references, the
 * tables). Uploads and downloads use the chunk client of
 * common/transfer.c, as the agent's checkpoints do.
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cmd.h"
#include "gp.h"
#include "http_client.h"
#include "transfer.h"
#include "util.h"

#define HASH_TRIES 3

/* s, or def when s is NULL. */
static const char *
or_else(const char *s, const char *def)
{
	return s != NULL ? s : def;
}

int
gp_cli_parse_data_ref(const char *text, const char *self, char *owner,
    char *name, int64_t *version)
{
	const char *slash, *at, *n;
	size_t len;

	if (text == NULL)
		return GP_EINVAL;
	slash = strchr(text, '/');
	n = slash != NULL ? slash + 1 : text;
	at = strchr(n, '@');
	*version = 0;
	if (slash != NULL) {
		len = (size_t)(slash - text);
		if (len == 0 || len > GP_NAME_MAX)
			return GP_EINVAL;
		memcpy(owner, text, len);
		owner[len] = '\0';
		if (!gp_name_valid(owner))
			return GP_EINVAL;
	} else {
		if (self == NULL)
			return GP_EINVAL;
		gp_strlcpy(owner, self, GP_NAME_MAX + 1);
	}
	len = at != NULL ? (size_t)(at - n) : strlen(n);
	if (len == 0 || len > GP_NAME_MAX)
		return GP_EINVAL;
	memcpy(name, n, len);
	name[len] = '\0';
	if (!gp_data_name_valid(name))
		return GP_EINVAL;
	if (at != NULL && gp_parse_int(at + 1, 1, INT64_MAX / 2, version) != 0)
		return GP_EINVAL;
	return 0;
}

int
gp_cli_render_data_sets(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"DATA SET", "VERSION", "SIZE",
	    "FILES", "VERSIONS", "CREATED", "SHARED WITH"};
	char set[GP_NAME_MAX * 2 + 4], version[24], size[32], files[24];
	char versions[24], shared[512];
	const char *row[7];
	struct gp_table t;
	json_t *list, *v, *s;
	size_t i, k, used;
	int rc;

	list = json_object_get(reply, "data_sets");
	if (!json_is_array(list))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 7, header)) != 0)
		return rc;
	t.right[1] = t.right[2] = t.right[3] = t.right[4] = 1;
	json_array_foreach(list, i, v)
	{
		snprintf(set, sizeof(set), "%s/%s",
		    or_else(gp_cli_json_str(v, "owner"), "?"),
		    or_else(gp_cli_json_str(v, "name"), "?"));
		snprintf(version, sizeof(version), "%lld",
		    (long long)json_integer_value(
		        json_object_get(v, "version")));
		gp_format_bytes(json_integer_value(json_object_get(v, "bytes")),
		    size, sizeof(size));
		snprintf(files, sizeof(files), "%lld",
		    (long long)json_integer_value(json_object_get(v, "files")));
		snprintf(versions, sizeof(versions), "%lld",
		    (long long)json_integer_value(
		        json_object_get(v, "versions")));
		shared[0] = '\0';
		used = 0;
		json_array_foreach(json_object_get(v, "shared_with"), k,
		    s) if (json_is_string(s) && used + 70 < sizeof(shared))
		    used +=
		    (size_t)snprintf(shared + used, sizeof(shared) - used,
		        "%s%s", k ? "," : "", json_string_value(s));
		row[0] = set;
		row[1] = version;
		row[2] = size;
		row[3] = files;
		row[4] = versions;
		row[5] = gp_cli_json_str(v, "created_at");
		row[6] = shared[0] ? shared : NULL;
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if (rc == 0)
		rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	return rc;
}

/* The caller's user name (GET /v1/whoami). Returns an exit code. */
static int
whoami(struct gp_cli_conn *conn, char *name)
{
	json_t *reply;
	int rc;

	if ((rc = gp_cli_call(conn, "GET", "/v1/whoami", NULL, 0, &reply,
	         NULL)) != 0)
		return rc;
	gp_strlcpy(name, or_else(gp_cli_json_str(reply, "name"), ""),
	    GP_NAME_MAX + 1);
	json_decref(reply);
	return 0;
}

static int
parallel_of(const struct gp_cli_args *args, int *parallel)
{
	const char *v = gp_cli_value(args, "parallel");
	int64_t n = 0;

	if (v != NULL && gp_parse_int(v, 1, 32, &n) != 0)
		return gp_cli_usage_error(args, "--parallel: 1 to 32");
	*parallel = (int)n;
	return 0;
}

static void
peer_of(const struct gp_cli_conn *conn, int parallel,
    struct gp_transfer_peer *peer)
{
	memset(peer, 0, sizeof(*peer));
	peer->url = conn->cfg.url;
	peer->token = conn->cfg.token;
	peer->ca_file = conn->cfg.ca[0] != '\0' ? conn->cfg.ca : NULL;
	peer->parallel = parallel;
}

int
gp_cli_cmd_data_put(const struct gp_cli_args *args)
{
	const char *name = args->operands[0], *path = args->operands[1];
	struct gp_transfer_stats st;
	struct gp_transfer_peer peer;
	struct gp_progress progress;
	struct gp_cli_conn conn;
	struct gp_tree *tree = NULL;
	char real[PATH_MAX], err[512], prefix[96], commit[96], total[32];
	char sent[32];
	json_t *body = NULL, *reply = NULL, *done = NULL;
	int64_t start = gp_mono_ms(), upload;
	long status;
	int rc, ret, tries, parallel;

	if (!gp_data_name_valid(name))
		return gp_cli_usage_error(args,
		    "'%s' is not a data set name "
		    "(1 to %d of A-Z a-z 0-9 . _ -, not starting with '.')",
		    name, GP_NAME_MAX);
	if ((rc = parallel_of(args, &parallel)) != 0)
		return rc;
	/* The path named is followed; links beneath it are not. */
	if (realpath(path, real) == NULL) {
		gp_cli_error("%s: %s", path, strerror(errno));
		return GP_CLI_EXIT_FAIL;
	}
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	peer_of(&conn, parallel, &peer);
	memset(&st, 0, sizeof(st));
	/* Read and name every chunk; again if a file changes meanwhile. */
	for (tries = 1;; tries++) {
		ret = gp_tree_open(real, 1, (uid_t)-1, &tree, err, sizeof(err));
		if (ret == 0)
			ret = gp_tree_hash(tree, parallel, err, sizeof(err));
		if (ret != GP_ECONFLICT || tries >= HASH_TRIES)
			break;
		gp_tree_free(tree);
		tree = NULL;
	}
	if (ret != 0)
		goto fail;
	gp_tree_totals(tree, &st);
	if (st.skipped > 0)
		fprintf(stderr,
		    "gpupool: %lld symbolic links or special files "
		    "skipped (not uploaded)\n",
		    (long long)st.skipped);
	body = json_pack("{s:s,s:o}", "data_set", name, "manifest",
	    gp_tree_manifest(tree));
	if (body == NULL) {
		ret = GP_ENOMEM;
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	ret = gp_transfer_json_call(conn.http, "POST", "/v1/uploads", body,
	    &reply, &status, err, sizeof(err));
	if (ret != 0)
		goto fail;
	upload = json_integer_value(json_object_get(reply, "upload"));
	if (upload <= 0 || !json_is_array(json_object_get(reply, "missing"))) {
		ret = GP_EPROTO;
		snprintf(err, sizeof(err),
		    "the coordinator's answer has no "
		    "upload");
		goto fail;
	}
	snprintf(prefix, sizeof(prefix), "/v1/uploads/%lld/chunks/",
	    (long long)upload);
	gp_progress_begin(&progress, "uploading", 0);
	peer.progress = gp_progress_callback;
	peer.progress_arg = &progress;
	ret = gp_tree_send(tree, &peer, prefix,
	    json_object_get(reply, "missing"), &st, err, sizeof(err));
	gp_progress_end(&progress);
	if (ret == GP_ECONFLICT)
		snprintf(err, sizeof(err),
		    "a file changed while it was sent; "
		    "run the command again (what was sent is kept)");
	if (ret != 0)
		goto fail;
	snprintf(commit, sizeof(commit), "/v1/uploads/%lld/commit",
	    (long long)upload);
	ret = gp_transfer_json_call(conn.http, "POST", commit, NULL, &done,
	    &status, err, sizeof(err));
	if (ret != 0)
		goto fail;
	st.elapsed_ms = gp_mono_ms() - start;
	if (gp_cli_flag(args, "json")) {
		json_object_set_new(done, "chunks", json_integer(st.chunks));
		json_object_set_new(done, "chunks_sent",
		    json_integer(st.chunks_sent));
		json_object_set_new(done, "bytes_sent",
		    json_integer(st.bytes_sent));
		json_object_set_new(done, "skipped", json_integer(st.skipped));
		json_object_set_new(done, "elapsed_ms",
		    json_integer(st.elapsed_ms));
		gp_cli_print_json(done);
	} else {
		gp_format_bytes(st.bytes, total, sizeof(total));
		gp_format_bytes(st.bytes_sent, sent, sizeof(sent));
		printf("%s/%s@%lld: %lld files, %s; sent %s (%lld of %lld "
		       "chunks) in %.1fs\n",
		    or_else(gp_cli_json_str(done, "owner"), "?"), name,
		    (long long)json_integer_value(
		        json_object_get(done, "version")),
		    (long long)st.files, total, sent, (long long)st.chunks_sent,
		    (long long)st.chunks, (double)st.elapsed_ms / 1000);
	}
	json_decref(done);
	json_decref(reply);
	json_decref(body);
	gp_tree_free(tree);
	gp_cli_disconnect(&conn);
	return 0;
fail:
	gp_cli_error("data put %s: %s", name, err);
	json_decref(reply);
	json_decref(body);
	gp_tree_free(tree);
	gp_cli_disconnect(&conn);
	return GP_CLI_EXIT_FAIL;
}

/* `data ls [OWNER/]NAME`: the versions of one data set. */
static int
list_versions(struct gp_cli_conn *conn, const struct gp_cli_args *args)
{
	static const char *const header[] = {"VERSION", "SIZE", "FILES",
	    "CREATED"};
	char owner[GP_NAME_MAX + 1], name[GP_NAME_MAX + 1],
	    self[GP_NAME_MAX + 1];
	char path[200], version[24], size[32], files[24];
	const char *row[4];
	struct gp_buf out = {0};
	struct gp_table t;
	json_t *reply, *v;
	int64_t ver;
	size_t i;
	int rc;

	if (strchr(args->operands[0], '/') == NULL &&
	    (rc = whoami(conn, self)) != 0)
		return rc;
	if (gp_cli_parse_data_ref(args->operands[0], self, owner, name, &ver) !=
	        0 ||
	    ver != 0)
		return gp_cli_usage_error(args, "'%s' is not [OWNER/]NAME",
		    args->operands[0]);
	snprintf(path, sizeof(path), "/v1/data/%s/%s", owner, name);
	if ((rc = gp_cli_call(conn, "GET", path, NULL, 0, &reply, NULL)) != 0)
		return rc;
	if (gp_cli_flag(args, "json")) {
		gp_cli_print_json(reply);
		json_decref(reply);
		return 0;
	}
	if ((rc = gp_table_init(&t, 4, header)) != 0) {
		json_decref(reply);
		return GP_CLI_EXIT_FAIL;
	}
	t.right[0] = t.right[1] = t.right[2] = 1;
	json_array_foreach(json_object_get(reply, "versions"), i, v)
	{
		snprintf(version, sizeof(version), "%lld",
		    (long long)json_integer_value(
		        json_object_get(v, "version")));
		gp_format_bytes(json_integer_value(json_object_get(v, "bytes")),
		    size, sizeof(size));
		snprintf(files, sizeof(files), "%lld",
		    (long long)json_integer_value(json_object_get(v, "files")));
		row[0] = version;
		row[1] = size;
		row[2] = files;
		row[3] = gp_cli_json_str(v, "created_at");
		gp_table_add(&t, row);
	}
	gp_table_render(&t, &out);
	gp_table_fini(&t);
	printf("%s/%s", owner, name);
	if (json_array_size(json_object_get(reply, "shared_with")) > 0)
		printf(", shared with");
	json_array_foreach(json_object_get(reply, "shared_with"), i, v)
	    printf("%s %s", i ? "," : "", json_string_value(v));
	printf("\n");
	fwrite(out.data, 1, out.len, stdout);
	gp_buf_free(&out);
	json_decref(reply);
	return 0;
}

int
gp_cli_cmd_data_ls(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	int rc;

	if (args->noperands != 1)
		return gp_cli_get_list(args,
		    gp_cli_flag(args, "all") ? "/v1/data?all=1" : "/v1/data",
		    gp_cli_render_data_sets);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	rc = list_versions(&conn, args);
	gp_cli_disconnect(&conn);
	return rc;
}

int
gp_cli_cmd_data_rm(const struct gp_cli_args *args)
{
	char owner[GP_NAME_MAX + 1], name[GP_NAME_MAX + 1],
	    self[GP_NAME_MAX + 1];
	char path[200];
	struct gp_cli_conn conn;
	json_t *reply;
	int64_t version;
	int rc;

	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	if (strchr(args->operands[0], '/') == NULL &&
	    (rc = whoami(&conn, self)) != 0) {
		gp_cli_disconnect(&conn);
		return rc;
	}
	if (gp_cli_parse_data_ref(args->operands[0], self, owner, name,
	        &version) != 0) {
		gp_cli_disconnect(&conn);
		return gp_cli_usage_error(args,
		    "'%s' is not "
		    "[OWNER/]NAME[@VERSION]",
		    args->operands[0]);
	}
	if (version > 0)
		snprintf(path, sizeof(path), "/v1/data/%s/%s/%lld", owner, name,
		    (long long)version);
	else
		snprintf(path, sizeof(path), "/v1/data/%s/%s", owner, name);
	rc = gp_cli_call(&conn, "DELETE", path, NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	printf("removed %s/%s%s: %lld version(s)\n", owner, name,
	    version > 0 ? strchr(args->operands[0], '@') : "",
	    (long long)json_integer_value(json_object_get(reply, "removed")));
	json_decref(reply);
	return 0;
}

static int
share(const struct gp_cli_args *args, const char *what)
{
	char owner[GP_NAME_MAX + 1], name[GP_NAME_MAX + 1],
	    self[GP_NAME_MAX + 1];
	char path[220];
	struct gp_cli_conn conn;
	json_t *reply, *body, *v;
	int64_t version;
	size_t i;
	int rc;

	if (!gp_name_valid(args->operands[1]))
		return gp_cli_usage_error(args, "'%s' is not a user name",
		    args->operands[1]);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	if (strchr(args->operands[0], '/') == NULL &&
	    (rc = whoami(&conn, self)) != 0) {
		gp_cli_disconnect(&conn);
		return rc;
	}
	if (gp_cli_parse_data_ref(args->operands[0], self, owner, name,
	        &version) != 0 ||
	    version != 0) {
		gp_cli_disconnect(&conn);
		return gp_cli_usage_error(args,
		    "'%s' is not [OWNER/]NAME (a "
		    "data set is shared with all its versions)",
		    args->operands[0]);
	}
	snprintf(path, sizeof(path), "/v1/data/%s/%s/%s", owner, name, what);
	body = json_pack("{s:s}", "user", args->operands[1]);
	rc = gp_cli_call(&conn, "POST", path, body, 0, &reply, NULL);
	json_decref(body);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	printf("%s/%s is shared with", owner, name);
	v = json_object_get(reply, "shared_with");
	if (json_array_size(v) == 0)
		printf(" nobody");
	json_array_foreach(json_object_get(reply, "shared_with"), i, v)
	    printf("%s %s", i ? "," : "", json_string_value(v));
	printf("\n");
	json_decref(reply);
	return 0;
}

int
gp_cli_cmd_data_share(const struct gp_cli_args *args)
{
	return share(args, "share");
}

int
gp_cli_cmd_data_unshare(const struct gp_cli_args *args)
{
	return share(args, "unshare");
}

int
gp_cli_cmd_fetch(const struct gp_cli_args *args)
{
	char dest[PATH_MAX], path[96], prefix[96], err[512], size[32];
	struct gp_transfer_stats st;
	struct gp_transfer_peer peer;
	struct gp_progress progress;
	struct gp_cli_conn conn;
	json_t *m;
	int64_t id;
	int rc, parallel, made = 0;

	if (gp_cli_parse_job_id(args->operands[0], &id) != 0)
		return gp_cli_usage_error(args, "'%s' is not a job id",
		    args->operands[0]);
	if ((rc = parallel_of(args, &parallel)) != 0)
		return rc;
	if (args->noperands > 1)
		gp_strlcpy(dest, args->operands[1], sizeof(dest));
	else
		snprintf(dest, sizeof(dest), "job-%lld-output", (long long)id);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%lld/output", (long long)id);
	if ((rc = gp_cli_call(&conn, "GET", path, NULL, 0, &m, NULL)) != 0) {
		gp_cli_disconnect(&conn);
		return rc;
	}
	if (mkdir(dest, 0755) == 0)
		made = 1;
	else if (errno != EEXIST) {
		gp_cli_error("cannot create %s: %s", dest, strerror(errno));
		json_decref(m);
		gp_cli_disconnect(&conn);
		return GP_CLI_EXIT_FAIL;
	}
	peer_of(&conn, parallel, &peer);
	snprintf(prefix, sizeof(prefix), "/v1/jobs/%lld/output/chunks/",
	    (long long)id);
	gp_progress_begin(&progress, "fetching", 0);
	peer.progress = gp_progress_callback;
	peer.progress_arg = &progress;
	rc = gp_transfer_fetch(&peer, m, prefix, dest, (uid_t)-1, (gid_t)-1,
	    &st, err, sizeof(err));
	gp_progress_end(&progress);
	json_decref(m);
	gp_cli_disconnect(&conn);
	if (rc != 0) {
		if (made)
			rmdir(dest);
		gp_cli_error("fetch %lld: %s", (long long)id, err);
		return GP_CLI_EXIT_FAIL;
	}
	gp_format_bytes(st.bytes, size, sizeof(size));
	fprintf(stderr,
	    "fetched the output of job %lld into %s: %lld files, "
	    "%s (every chunk verified)\n",
	    (long long)id, dest, (long long)st.files, size);
	return 0;
}

int
gp_cli_cmd_output_rm(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	char path[96];
	json_t *reply;
	int64_t id;
	int rc;

	if (gp_cli_parse_job_id(args->operands[0], &id) != 0)
		return gp_cli_usage_error(args, "'%s' is not a job id",
		    args->operands[0]);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%lld/output", (long long)id);
	rc = gp_cli_call(&conn, "DELETE", path, NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	json_decref(reply);
	printf("removed the output of job %lld\n", (long long)id);
	return 0;
}

int
gp_cli_render_quota(json_t *q, struct gp_buf *out)
{
	char limit[32], used[32], data[32], outputs[32];
	const char *source = or_else(gp_cli_json_str(q, "source"), "none");
	json_t *l = json_object_get(q, "limit");

	if (!json_is_object(q) || gp_cli_json_str(q, "user") == NULL)
		return GP_EPROTO;
	if (json_is_integer(l))
		gp_format_bytes(json_integer_value(l), limit, sizeof(limit));
	else
		gp_strlcpy(limit, "none", sizeof(limit));
	gp_format_bytes(json_integer_value(json_object_get(q, "used")), used,
	    sizeof(used));
	gp_format_bytes(json_integer_value(json_object_get(q, "data_bytes")),
	    data, sizeof(data));
	gp_format_bytes(json_integer_value(json_object_get(q, "output_bytes")),
	    outputs, sizeof(outputs));
	return gp_buf_printf(out,
	    "user:       %s\n"
	    "limit:      %s%s\n"
	    "used:       %s\n"
	    "data sets:  %s in %lld versions\n"
	    "outputs:    %s in %lld jobs\n",
	    gp_cli_json_str(q, "user"), limit,
	    strcmp(source, "default") == 0 ? " (the pool's default)" : "", used,
	    data,
	    (long long)json_integer_value(json_object_get(q, "data_versions")),
	    outputs,
	    (long long)json_integer_value(json_object_get(q, "outputs")));
}

int
gp_cli_cmd_quota_show(const struct gp_cli_args *args)
{
	char user[GP_NAME_MAX + 1], path[120];
	struct gp_cli_conn conn;
	struct gp_buf out = {0};
	json_t *reply;
	int rc;

	if (args->noperands > 0 && !gp_name_valid(args->operands[0]))
		return gp_cli_usage_error(args, "'%s' is not a user name",
		    args->operands[0]);
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	if (args->noperands > 0)
		gp_strlcpy(user, args->operands[0], sizeof(user));
	else if ((rc = whoami(&conn, user)) != 0) {
		gp_cli_disconnect(&conn);
		return rc;
	}
	snprintf(path, sizeof(path), "/v1/quotas/%s", user);
	rc = gp_cli_call(&conn, "GET", path, NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	if (gp_cli_flag(args, "json")) {
		gp_cli_print_json(reply);
	} else if (gp_cli_render_quota(reply, &out) == 0) {
		fwrite(out.data, 1, out.len, stdout);
	} else {
		gp_cli_error("unexpected answer from the coordinator");
		rc = GP_CLI_EXIT_FAIL;
	}
	gp_buf_free(&out);
	json_decref(reply);
	return rc;
}

int
gp_cli_cmd_quota_set(const struct gp_cli_args *args)
{
	const char *user = args->operands[0], *size = args->operands[1];
	char path[120], text[32];
	struct gp_cli_conn conn;
	json_t *body = NULL, *reply;
	int64_t bytes = 0;
	int rc;

	if (!gp_name_valid(user))
		return gp_cli_usage_error(args, "'%s' is not a user name",
		    user);
	if (strcmp(size, "none") == 0)
		body = json_pack("{s:n}", "bytes");
	else if (strcmp(size, "default") != 0) {
		if (gp_parse_bytes(size, &bytes) != 0 || bytes < 1)
			return gp_cli_usage_error(args,
			    "'%s' is not a size "
			    "(try 500M, 20G, 1T), none or default",
			    size);
		body = json_pack("{s:I}", "bytes", (json_int_t)bytes);
	}
	if ((rc = gp_cli_connect_token_file(&conn, NULL, 1)) != 0) {
		json_decref(body);
		return rc;
	}
	snprintf(path, sizeof(path), "/v1/quotas/%s", user);
	rc = gp_cli_call(&conn, body != NULL ? "POST" : "DELETE", path, body, 0,
	    &reply, NULL);
	json_decref(body);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	if (json_is_integer(json_object_get(reply, "limit")))
		gp_format_bytes(json_integer_value(
		                    json_object_get(reply, "limit")),
		    text, sizeof(text));
	else
		gp_strlcpy(text, "none", sizeof(text));
	printf("quota of %s: %s%s\n", user, text,
	    strcmp(or_else(gp_cli_json_str(reply, "source"), ""), "default") ==
	            0
	        ? " (the pool's default)"
	        : "");
	json_decref(reply);
	return 0;
}
