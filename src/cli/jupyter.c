/*
 * jupyter.c: `gpupool jupyter [SUBMIT OPTIONS]` (docs/interactive.md):
 * Jupyter in an interactive job, on the job's own loopback, with a token
 * of its own, forwarded to this machine (`gpupool port-forward`) with the
 * local URL printed. The job runs the image's Jupyter in a container job
 * and the provider's (Debian's python3-notebook) in a plain one; it
 * declares its port (--expose), so the dashboard's Open link reaches it
 * too. Leaving (Ctrl-C) ends the job; a job that ends elsewhere (a
 * cancel, its exit, the idle limit) ends the forward, which says why, and
 * the command exits non-zero.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

#define JUPYTER_PORT 8888

/*
 * What the job runs: the first Jupyter it finds, on 127.0.0.1 only, its
 * token from JUPYTER_TOKEN (never on the command line), its files in the
 * job's work directory. allow_remote_access: the coordinator's proxy
 * reaches it under a host name of its own (jJOB-pPORT.DOMAIN).
 *
 * The job's output is its log, which the pool's admins may read; Jupyter
 * logs the URIs of redirects and failed requests, "?token=" included (the
 * local URL's first load is a redirect). A config file of ours, in a
 * directory of JUPYTER_CONFIG_PATH that the notebook and the server both
 * read, makes every log record that would carry the token's value carry
 * "[hidden]" instead.
 */
static const char jupyter_script[] =
    "export HOME=\"$PWD\" JUPYTER_RUNTIME_DIR=\"$PWD/.jupyter-run\"\n"
    "cfg=\"$PWD/.jupyter-gpupool\"\n"
    "mkdir -p \"$cfg\" && cat >\"$cfg/jupyter_notebook_config.py\" <<'EOF'\n"
    "import logging, os\n"
    "_gp_secret = os.environ.get('JUPYTER_TOKEN', '')\n"
    "_gp_factory = logging.getLogRecordFactory()\n"
    "def _gp_record(*args, **kwargs):\n"
    "    record = _gp_factory(*args, **kwargs)\n"
    "    try:\n"
    "        text = record.getMessage()\n"
    "    except Exception:\n"
    "        return record\n"
    "    if _gp_secret and _gp_secret in text:\n"
    "        record.msg = text.replace(_gp_secret, '[hidden]')\n"
    "        record.args = None\n"
    "    return record\n"
    "logging.setLogRecordFactory(_gp_record)\n"
    "EOF\n"
    "cp \"$cfg/jupyter_notebook_config.py\" \"$cfg/jupyter_server_config.py\"\n"
    "export JUPYTER_CONFIG_PATH=\"$cfg${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}\"\n"
    "set -- --no-browser --ip=127.0.0.1 --port=\"$JUPYTER_PORT\" "
    "--notebook-dir=\"$PWD\" --NotebookApp.allow_remote_access=True "
    "--ServerApp.allow_remote_access=True\n"
    "if command -v jupyter-lab >/dev/null 2>&1; then exec jupyter-lab "
    "\"$@\"; fi\n"
    "if command -v jupyter-notebook >/dev/null 2>&1; then exec "
    "jupyter-notebook \"$@\"; fi\n"
    "for py in python3 /usr/bin/python3; do\n"
    "  \"$py\" -c 'import notebook' 2>/dev/null && exec \"$py\" -m "
    "notebook \"$@\"\n"
    "done\n"
    "echo 'gpupool jupyter: no Jupyter here (python3-notebook, or an "
    "image with jupyter)' >&2; exit 127\n";

static volatile sig_atomic_t got_signal;

static void
on_signal(int sig)
{
	got_signal = sig;
}

/* A free local port for the forward (0 when none). */
static int
free_local_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/*
 * Until the job runs (0), ends (GP_CLI_EXIT_FAIL) or we are stopped.
 * proxy_url: where the coordinator's proxy serves the port ("" : none).
 */
static int
wait_running(struct gp_cli_conn *conn, int64_t job, char *proxy_url,
    size_t len)
{
	char path[64], last[256] = "";
	json_t *reply;
	int rc;

	snprintf(path, sizeof(path), "/v1/jobs/%lld", (long long)job);
	while (!got_signal) {
		const char *state, *why;
		if ((rc = gp_cli_call(conn, "GET", path, NULL, 0, &reply,
		    NULL)) != 0)
			return rc;
		state = gp_cli_json_str(reply, "state");
		why = gp_cli_json_str(json_object_get(reply, "wait"), "why");
		if (state != NULL && strcmp(state, "running") == 0) {
			json_t *u = json_array_get(json_object_get(reply,
			    "proxy_urls"), 0);
			gp_strlcpy(proxy_url, json_is_string(u) ?
			    json_string_value(u) : "", len);
			json_decref(reply);
			return 0;
		}
		if (state != NULL && strcmp(state, "queued") != 0) {
			gp_cli_error("job %lld ended %s before it ran",
			    (long long)job, state);
			json_decref(reply);
			return GP_CLI_EXIT_FAIL;
		}
		if (why != NULL && strcmp(why, last) != 0) {
			fprintf(stderr, "gpupool: job %lld queued: %s\n",
			    (long long)job, why);
			gp_strlcpy(last, why, sizeof(last));
		}
		json_decref(reply);
		usleep(300 * 1000);
	}
	return 130;
}

/* `gpupool port-forward JOB LOCAL:PORT` in a child; its exit status. */
static int
forward(int64_t job, int local, int port)
{
	char jobtext[32], map[32];
	char *argv[] = {"port-forward", jobtext, map, NULL};
	struct gp_cli_args fa;
	char err[256];
	pid_t pid;
	int status;

	snprintf(jobtext, sizeof(jobtext), "%lld", (long long)job);
	snprintf(map, sizeof(map), "%d:%d", local, port);
	if (gp_cli_parse(gp_cli_command_find("port-forward"), 3, argv, &fa,
	    err, sizeof(err)) != 0) {
		gp_cli_error("%s", err);
		return GP_CLI_EXIT_FAIL;
	}
	fflush(NULL);
	if ((pid = fork()) < 0) {
		gp_cli_error("fork: %s", strerror(errno));
		return GP_CLI_EXIT_FAIL;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		_exit(gp_cli_cmd_port_forward(&fa));
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno == EINTR && got_signal)
			kill(pid, SIGTERM);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

int
gp_cli_cmd_jupyter(const struct gp_cli_args *args)
{
	static char *command[] = {"sh", "-c", (char *)jupyter_script, NULL};
	struct gp_cli_args a = *args;
	struct gp_cli_conn conn;
	struct sigaction sa, old_int, old_term, old_hup;
	const char *pv = gp_cli_value(args, "port");
	const char *lv = gp_cli_value(args, "local-port");
	struct gp_jobspec spec;
	unsigned char raw[24];
	char token[2 * sizeof(raw) + 1], port_text[16], err[512], path[64];
	char proxy_url[512];
	int64_t port = JUPYTER_PORT, local = 0, job;
	json_t *body, *reply;
	int rc, ended = 0;

	if (pv != NULL && gp_parse_int(pv, 1, 65535, &port) != 0)
		return gp_cli_usage_error(args, "--port: 1 to 65535");
	if (lv != NULL && gp_parse_int(lv, 1, 65535, &local) != 0)
		return gp_cli_usage_error(args, "--local-port: 1 to 65535");
	if (local == 0 && (local = free_local_port()) == 0) {
		gp_cli_error("no free local port");
		return GP_CLI_EXIT_FAIL;
	}
	a.operands = command;
	a.noperands = 3;
	if (gp_cli_build_jobspec(&a, &spec, err, sizeof(err)) != 0) {
		gp_jobspec_fini(&spec);
		return gp_cli_usage_error(NULL, "%s", err);
	}
	if (gp_cli_value(args, "name") == NULL)
		gp_strlcpy(spec.name, "jupyter", sizeof(spec.name));
	spec.interactive = 1;
	spec.n_expose = 1;
	spec.expose[0] = (uint16_t)port;
	/* Jupyter's own token: neither the user's nor the pool's. */
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(token, sizeof(token), raw, sizeof(raw));
	snprintf(port_text, sizeof(port_text), "%lld", (long long)port);
	json_object_set_new(spec.env, "JUPYTER_TOKEN", json_string(token));
	json_object_set_new(spec.env, "JUPYTER_PORT",
	    json_string(port_text));
	randombytes_buf(raw, 16);
	sodium_bin2hex(spec.idempotency_key, sizeof(spec.idempotency_key),
	    raw, 16);
	body = gp_jobspec_encode(&spec);
	gp_jobspec_fini(&spec);
	if (body == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	if ((rc = gp_cli_connect(&conn, NULL)) != 0) {
		json_decref(body);
		return rc;
	}
	rc = gp_cli_call(&conn, "POST", "/v1/jobs", body, 0, &reply, NULL);
	json_decref(body);
	if (rc != 0) {
		gp_cli_disconnect(&conn);
		return rc;
	}
	job = json_integer_value(json_object_get(reply, "id"));
	json_decref(reply);
	fprintf(stderr, "gpupool: job %lld submitted\n", (long long)job);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	rc = wait_running(&conn, job, proxy_url, sizeof(proxy_url));
	if (rc == 0) {
		/*
		 * The local URL is this machine's loopback end of the forward
		 * (plain HTTP here; the leg to the coordinator is the API's,
		 * HTTPS when it has TLS).
		 */
		printf("Jupyter in job %lld: http://127.0.0.1:%lld/?token=%s\n",
		    (long long)job, (long long)local, token);
		/* The proxy's origin (https:// when the coordinator has TLS). */
		if (proxy_url[0] != '\0')
			printf("In a browser elsewhere: %s (sign in with the "
			    "dashboard's Open port %lld on job %lld; Jupyter's "
			    "token as above)\n", proxy_url, (long long)port,
			    (long long)job);
		printf("(it may take a few seconds to start; Ctrl-C ends the "
		    "job)\n");
		fflush(stdout);
		rc = forward(job, (int)local, (int)port);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	/*
	 * Leaving ends the job, as `gpupool shell` does; a job that ended
	 * by itself (the forward said why and stopped) needs no cancel.
	 */
	snprintf(path, sizeof(path), "/v1/jobs/%lld", (long long)job);
	if (gp_cli_call(&conn, "GET", path, NULL, 0, &reply, NULL) == 0) {
		const char *state = gp_cli_json_str(reply, "state");

		ended = state != NULL && (strcmp(state, "succeeded") == 0 ||
		    strcmp(state, "failed") == 0 || strcmp(state,
		    "cancelled") == 0 || strcmp(state, "timeout") == 0);
		json_decref(reply);
	}
	snprintf(path, sizeof(path), "/v1/jobs/%lld/cancel", (long long)job);
	if (!ended && gp_cli_call(&conn, "POST", path, NULL, 0, &reply,
	    NULL) == 0)
		json_decref(reply);
	fprintf(stderr, "gpupool: job %lld ended\n", (long long)job);
	gp_cli_disconnect(&conn);
	sodium_memzero(token, sizeof(token));
	/* Ended elsewhere (a cancel, its exit, the idle limit): not 0. */
	if (got_signal == 0 && rc == 0)
		rc = GP_CLI_EXIT_FAIL;
	return got_signal != 0 ? 0 : rc;
}
