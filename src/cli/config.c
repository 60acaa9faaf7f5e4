/*
 * config.c: finding the pool. The config file ($GPUPOOL_CONFIG, else
 * $XDG_CONFIG_HOME/gpupool/config, else ~/.config/gpupool/config) holds
 * `key = value` lines; GPUPOOL_URL, GPUPOOL_TOKEN and GPUPOOL_CA override
 * it. Also the connection helpers every networked command uses.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

static const char *
home_dir(void)
{
	const char *home = getenv("HOME");
	struct passwd *pw;

	if (home != NULL && home[0] != '\0')
		return home;
	pw = getpwuid(getuid());
	return pw != NULL ? pw->pw_dir : "/";
}

int
gp_cli_config_path(char *out, size_t len)
{
	const char *v;
	size_t n;

	v = getenv("GPUPOOL_CONFIG");
	if (v != NULL && v[0] != '\0')
		n = (size_t)snprintf(out, len, "%s", v);
	else if ((v = getenv("XDG_CONFIG_HOME")) != NULL && v[0] == '/')
		n = (size_t)snprintf(out, len, "%s/gpupool/config", v);
	else
		n = (size_t)snprintf(out, len, "%s/.config/gpupool/config",
		    home_dir());
	return n < len ? 0 : GP_EINVAL;
}

static char *
trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (
	    end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		*--end = '\0';
	return s;
}

int
gp_cli_config_parse(const char *text, struct gp_cli_config *cfg, char *err,
    size_t errlen)
{
	char line[2048], *key, *value, *eq, *p;
	const char *next;
	size_t n, vlen;
	int lineno = 0;

	while (*text != '\0') {
		lineno++;
		next = strchr(text, '\n');
		n = next != NULL ? (size_t)(next - text) : strlen(text);
		if (n >= sizeof(line)) {
			snprintf(err, errlen, "line %d: too long", lineno);
			return GP_EINVAL;
		}
		memcpy(line, text, n);
		line[n] = '\0';
		text = next != NULL ? next + 1 : text + n;
		/* '#' at the start or after a blank begins a comment. */
		for (p = line; *p != '\0'; p++)
			if (*p == '#' &&
			    (p == line || p[-1] == ' ' || p[-1] == '\t')) {
				*p = '\0';
				break;
			}
		key = trim(line);
		if (*key == '\0')
			continue;
		eq = strchr(key, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "line %d: expected key = value",
			    lineno);
			return GP_EINVAL;
		}
		*eq = '\0';
		key = trim(key);
		value = trim(eq + 1);
		vlen = strlen(value);
		if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
			value[vlen - 1] = '\0';
			value++;
		}
		if (strcmp(key, "url") == 0)
			n = gp_strlcpy(cfg->url, value, sizeof(cfg->url));
		else if (strcmp(key, "token") == 0)
			n = gp_strlcpy(cfg->token, value, sizeof(cfg->token));
		else if (strcmp(key, "ca") == 0)
			n = gp_strlcpy(cfg->ca, value, sizeof(cfg->ca));
		else if (strcmp(key, "admin_token_file") == 0)
			n = gp_strlcpy(cfg->admin_token_file, value,
			    sizeof(cfg->admin_token_file));
		else if (strcmp(key, "agent_socket") == 0)
			n = gp_strlcpy(cfg->agent_socket, value,
			    sizeof(cfg->agent_socket));
		else {
			snprintf(err, errlen,
			    "line %d: unknown key '%.64s' (expected url, "
			    "token, ca, admin_token_file or agent_socket)",
			    lineno, key);
			return GP_EINVAL;
		}
		if (n >= sizeof(cfg->url) ||
		    (strcmp(key, "token") == 0 && n >= sizeof(cfg->token))) {
			snprintf(err, errlen, "line %d: value too long",
			    lineno);
			return GP_EINVAL;
		}
	}
	return 0;
}

static void
env_override(const char *name, char *field, size_t len)
{
	const char *v = getenv(name);

	if (v != NULL && v[0] != '\0')
		gp_strlcpy(field, v, len);
}

int
gp_cli_config_load(struct gp_cli_config *cfg, char *err, size_t errlen)
{
	char perr[256], *text = NULL;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	if (gp_cli_config_path(cfg->path, sizeof(cfg->path)) != 0) {
		snprintf(err, errlen, "config file path too long");
		return GP_EINVAL;
	}
	rc = gp_read_file(cfg->path, 1 << 20, &text, NULL);
	if (rc == 0) {
		rc = gp_cli_config_parse(text, cfg, perr, sizeof(perr));
		free(text);
		if (rc != 0) {
			snprintf(err, errlen, "%s: %s", cfg->path, perr);
			return GP_EINVAL;
		}
	} else if (rc != GP_ENOENT) {
		snprintf(err, errlen, "cannot read %s: %s", cfg->path,
		    strerror(errno));
		return GP_EINVAL;
	}
	env_override("GPUPOOL_URL", cfg->url, sizeof(cfg->url));
	env_override("GPUPOOL_TOKEN", cfg->token, sizeof(cfg->token));
	env_override("GPUPOOL_CA", cfg->ca, sizeof(cfg->ca));
	if (cfg->url[0] == '\0' || cfg->token[0] == '\0') {
		snprintf(err, errlen,
		    "no %s%s%s configured: set GPUPOOL_URL and GPUPOOL_TOKEN, "
		    "or put `url = ...` and `token = ...` in %s "
		    "(`gpupool up` writes it for a local pool)",
		    cfg->url[0] == '\0' ? "coordinator URL" : "",
		    cfg->url[0] == '\0' && cfg->token[0] == '\0' ? " or " : "",
		    cfg->token[0] == '\0' ? "token" : "", cfg->path);
		return GP_ENOENT;
	}
	return 0;
}

int
gp_cli_config_write(const char *path, const char *url, const char *token,
    const char *admin_token_file, const char *agent_socket)
{
	struct gp_buf buf = {0};
	char dir[1024], *slash;
	int rc;

	if (gp_strlcpy(dir, path, sizeof(dir)) >= sizeof(dir))
		return GP_EINVAL;
	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if ((rc = gp_mkdir_p(dir, 0700)) != 0)
			return rc;
	}
	if (gp_buf_printf(&buf,
	        "# gpupool client configuration (written by gpupool up)\n"
	        "url = %s\ntoken = %s\n",
	        url, token) != 0)
		return GP_ENOMEM;
	if (admin_token_file != NULL &&
	    gp_buf_printf(&buf, "admin_token_file = %s\n", admin_token_file) !=
	        0) {
		gp_buf_free(&buf);
		return GP_ENOMEM;
	}
	if (agent_socket != NULL &&
	    gp_buf_printf(&buf, "agent_socket = %s\n", agent_socket) != 0) {
		gp_buf_free(&buf);
		return GP_ENOMEM;
	}
	rc = gp_write_file(path, buf.data, buf.len, 0600);
	gp_buf_free(&buf);
	return rc;
}

int
gp_cli_connect(struct gp_cli_conn *conn, const char *token)
{
	char err[1024];

	memset(conn, 0, sizeof(*conn));
	if (gp_cli_config_load(&conn->cfg, err, sizeof(err)) != 0) {
		gp_cli_error("%s", err);
		return GP_CLI_EXIT_FAIL;
	}
	if (token != NULL)
		gp_strlcpy(conn->cfg.token, token, sizeof(conn->cfg.token));
	conn->http = gp_http_client_new(conn->cfg.url, conn->cfg.token,
	    conn->cfg.ca[0] != '\0' ? conn->cfg.ca : NULL);
	if (conn->http == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	return 0;
}

void
gp_cli_disconnect(struct gp_cli_conn *conn)
{
	gp_http_client_free(conn->http);
	conn->http = NULL;
	/* The token is a secret: do not leave it lying in memory. */
	memset(conn->cfg.token, 0, sizeof(conn->cfg.token));
}

void
gp_cli_report_http(const struct gp_cli_conn *conn, int rc,
    const struct gp_http_response *resp)
{
	char text[512];
	const char *why;

	if (rc == GP_ETIMEDOUT) {
		gp_cli_error("the coordinator at %s did not answer in time",
		    conn->cfg.url);
		return;
	}
	if (rc != 0) {
		/* resp->error is "URL: reason"; show the reason. */
		why = strrchr(resp->error, ':');
		why = why != NULL ? why + 1 : resp->error;
		while (*why == ' ')
			why++;
		gp_cli_error("cannot reach the coordinator at %s: %s%s",
		    conn->cfg.url, why[0] ? why : gp_strerror(rc),
		    strstr(why, "SSL") != NULL ||
		            strstr(why, "certificate") != NULL
		        ? " (is GPUPOOL_CA, or `ca =` in the config, the "
		          "coordinator's CA file?)"
		        : "");
		return;
	}
	gp_http_error_text(resp, text, sizeof(text));
	if (resp->status == 401)
		gp_cli_error("%s (the coordinator does not know this token; "
		             "check GPUPOOL_TOKEN or %s)",
		    text, conn->cfg.path);
	else
		gp_cli_error("%s", text);
}

int
gp_cli_call(struct gp_cli_conn *conn, const char *method, const char *path,
    json_t *body, long timeout_ms, json_t **reply, long *status)
{
	struct gp_http_response resp;
	json_error_t jerr;
	char *text = NULL;
	int rc;

	*reply = NULL;
	if (status != NULL)
		*status = 0;
	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT);
		if (text == NULL) {
			gp_cli_error("out of memory");
			return GP_CLI_EXIT_FAIL;
		}
	}
	rc = gp_http_request(conn->http, method, path, text,
	    text != NULL ? strlen(text) : 0, NULL, timeout_ms, &resp);
	free(text);
	if (status != NULL)
		*status = resp.status;
	if (rc != 0 || resp.status < 200 || resp.status > 299) {
		gp_cli_report_http(conn, rc, &resp);
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
