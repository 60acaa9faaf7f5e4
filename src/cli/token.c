/*
 * token.c: `gpupool token create` (asks the coordinator for a new token,
 * an admin call, and prints just the token, so that scripts can capture
 * it), `gpupool token ls` (the tokens, never their secrets), `gpupool
 * token revoke ID...`, and how every admin command finds its admin token.
 */
#include "token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

/* Reads the first line of a token file into out. Returns 0 or GP_E*. */
static int
read_token_file(const char *path, char *out, size_t len)
{
	char *text;
	size_t n;
	int rc;

	if ((rc = gp_read_file(path, 4096, &text, &n)) != 0)
		return rc;
	n = strcspn(text, "\r\n \t");
	text[n] = '\0';
	rc = n > 0 && n < len ? 0 : GP_EINVAL;
	if (rc == 0)
		gp_strlcpy(out, text, len);
	memset(text, 0, n);
	free(text);
	return rc;
}

int
gp_cli_connect_token_file(struct gp_cli_conn *conn, const char *file,
    int admin)
{
	const char *env_token = getenv("GPUPOOL_TOKEN");
	struct gp_cli_config cfg;
	char token[256], err[1024];
	int rc;

	/*
	 * Which token to authenticate with: --token-file, GPUPOOL_TOKEN,
	 * the config's admin_token_file (admin calls), the config's token.
	 */
	token[0] = '\0';
	if (admin && file == NULL &&
	    (env_token == NULL || env_token[0] == '\0') &&
	    gp_cli_config_load(&cfg, err, sizeof(err)) != GP_EINVAL &&
	    cfg.admin_token_file[0] != '\0')
		file = cfg.admin_token_file;
	if (file != NULL && read_token_file(file, token, sizeof(token)) != 0) {
		gp_cli_error("cannot read a token from %s", file);
		return GP_CLI_EXIT_FAIL;
	}
	rc = gp_cli_connect(conn, token[0] ? token : NULL);
	memset(token, 0, sizeof(token));
	return rc;
}

/* Connects with an admin token (gp_cli_connect_token_file). */
static int
admin_connect(const struct gp_cli_args *args, struct gp_cli_conn *conn)
{
	return gp_cli_connect_token_file(conn,
	    gp_cli_value(args, "token-file"), 1);
}

int
gp_cli_render_tokens(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"ID", "ROLE", "NAME", "CREATED"};
	const char *row[4];
	char id[24];
	struct gp_table t;
	json_t *list, *v;
	size_t i;
	int rc;

	list = json_object_get(reply, "tokens");
	if (!json_is_array(list))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 4, header)) != 0)
		return rc;
	t.right[0] = 1;
	json_array_foreach(list, i, v)
	{
		snprintf(id, sizeof(id), "%lld",
		    (long long)json_integer_value(json_object_get(v, "id")));
		row[0] = id;
		row[1] = gp_cli_json_str(v, "role");
		row[2] = gp_cli_json_str(v, "name");
		row[3] = gp_cli_json_str(v, "created_at");
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if (rc == 0)
		rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	return rc;
}

int
gp_cli_cmd_token_ls(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	json_t *reply;
	int rc;

	if ((rc = admin_connect(args, &conn)) != 0)
		return rc;
	rc = gp_cli_call(&conn, "GET", "/v1/tokens", NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	return gp_cli_show_list(args, reply, gp_cli_render_tokens);
}

int
gp_cli_cmd_token_revoke(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	json_t *reply;
	char path[64];
	int64_t id;
	int i, rc, failed = 0;

	for (i = 0; i < args->noperands; i++)
		if (gp_parse_int(args->operands[i], 1, INT64_MAX / 2, &id) != 0)
			return gp_cli_usage_error(args,
			    "'%s' is not a token id (see gpupool token ls)",
			    args->operands[i]);
	if ((rc = admin_connect(args, &conn)) != 0)
		return rc;
	for (i = 0; i < args->noperands; i++) {
		gp_parse_int(args->operands[i], 1, INT64_MAX / 2, &id);
		snprintf(path, sizeof(path), "/v1/tokens/%lld/revoke",
		    (long long)id);
		if (gp_cli_call(&conn, "POST", path, NULL, 0, &reply, NULL) !=
		    0) {
			failed = 1;
			continue;
		}
		printf("revoked token %lld (%s %s)\n", (long long)id,
		    gp_cli_json_str(reply, "role") ?: "?",
		    gp_cli_json_str(reply, "name") ?: "?");
		json_decref(reply);
	}
	gp_cli_disconnect(&conn);
	return failed ? GP_CLI_EXIT_FAIL : 0;
}

int
gp_cli_cmd_token_create(const struct gp_cli_args *args)
{
	const char *role = gp_cli_value(args, "role");
	const char *name = gp_cli_value(args, "name");
	const char *group = gp_cli_value(args, "group");
	struct gp_cli_conn conn;
	enum gp_role parsed;
	json_t *body, *reply;
	int rc;

	if (role == NULL || name == NULL)
		return gp_cli_usage_error(args,
		    "token create: --role and --name are required");
	if (gp_role_parse(role, &parsed) != 0)
		return gp_cli_usage_error(args,
		    "token create: --role must be user, provider, admin or "
		    "metrics, not '%s'",
		    role);
	if (!gp_name_valid(name))
		return gp_cli_usage_error(args,
		    "token create: --name must be 1 to %d characters of "
		    "A-Z a-z 0-9 . _ -",
		    GP_NAME_MAX);
	if (group != NULL && !gp_name_valid(group))
		return gp_cli_usage_error(args,
		    "token create: --group must be 1 to %d characters of "
		    "A-Z a-z 0-9 . _ -",
		    GP_NAME_MAX);
	if ((rc = gp_cli_connect_token_file(&conn,
		 gp_cli_value(args, "token-file"), 1)) != 0)
		return rc;
	body = json_pack("{s:s, s:s}", "role", role, "name", name);
	if (group != NULL)
		json_object_set_new(body, "group", json_string(group));
	rc = gp_cli_call(&conn, "POST", "/v1/tokens", body, 0, &reply, NULL);
	json_decref(body);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	if (gp_cli_json_str(reply, "token") == NULL) {
		gp_cli_error("the coordinator's answer has no token");
		json_decref(reply);
		return GP_CLI_EXIT_FAIL;
	}
	printf("%s\n", gp_cli_json_str(reply, "token"));
	json_decref(reply);
	return 0;
}
