/*
 * token.c: `gpupool token create`: asks the coordinator for a new token
 * (an admin call) and prints just the token, so that scripts can capture
 * it.
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
gp_cli_cmd_token_create(const struct gp_cli_args *args)
{
	const char *role = gp_cli_value(args, "role");
	const char *name = gp_cli_value(args, "name");
	const char *file = gp_cli_value(args, "token-file");
	const char *env_token = getenv("GPUPOOL_TOKEN");
	struct gp_cli_config cfg;
	struct gp_cli_conn conn;
	enum gp_role parsed;
	char token[256], err[1024];
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
	/*
	 * Which token to authenticate with: --token-file, GPUPOOL_TOKEN,
	 * the config's admin_token_file, the config's token.
	 */
	token[0] = '\0';
	if (file == NULL && (env_token == NULL || env_token[0] == '\0') &&
	    gp_cli_config_load(&cfg, err, sizeof(err)) != GP_EINVAL &&
	    cfg.admin_token_file[0] != '\0')
		file = cfg.admin_token_file;
	if (file != NULL && read_token_file(file, token, sizeof(token)) != 0) {
		gp_cli_error("cannot read a token from %s", file);
		return GP_CLI_EXIT_FAIL;
	}
	if ((rc = gp_cli_connect(&conn, token[0] ? token : NULL)) != 0)
		return rc;
	memset(token, 0, sizeof(token));
	body = json_pack("{s:s, s:s}", "role", role, "name", name);
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
