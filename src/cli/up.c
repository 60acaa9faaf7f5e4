/*
 * up.c: `gpupool up`, a whole local pool in one command, and `gpupool
 * down`. up starts the coordinator and one agent as children of this
 * binary (/proc/self/exe), waits until both are ready, creates the
 * tokens, writes the user's config file and then either stays in the
 * foreground (stopping both children on SIGINT/SIGTERM or when one dies)
 * or, with --detach, leaves them running and records their pids in
 * DATA/up.pid for `gpupool down`.
 *
 * Layout of DATA: coord/ (the coordinator's state, admin.token),
 * agent/ (the agent's work directory), coordinator.log, agent.log,
 * provider.token, user.token, up.pid.
 */
#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/gpu.h"
#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

#define DEFAULT_LISTEN    "127.0.0.1:7070"
#define READY_TIMEOUT_MS  30000
#define STOP_GRACE_MS     8000
#define FAKE_GPUS_DEFAULT "2"

struct child {
	const char *what; /* "coordinator", "agent" */
	pid_t pid;        /* 0 when not running */
	char log[PATH_MAX];
	off_t log_start; /* the log's size when we started it */
};

struct pool {
	char data[PATH_MAX];
	char listen[256];
	char url[300];
	char node[GP_NAME_MAX + 1];
	char user[GP_NAME_MAX + 1];
	char fake_gpus[128]; /* "" for the real GPUs */
	int detach;
	struct child coord, agent;
	sigset_t signals; /* blocked; waited for with sigtimedwait */
};

/* "DATA/name" into out. Returns 0 or GP_EINVAL when too long. */
static int
data_path(const struct pool *p, const char *name, char *out, size_t len)
{
	return (size_t)snprintf(out, len, "%s/%s", p->data, name) < len
	    ? 0
	    : GP_EINVAL;
}

int
gp_cli_default_data_dir(char *out, size_t len)
{
	const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
	struct passwd *pw;
	size_t n;

	if (xdg != NULL && xdg[0] == '/')
		n = (size_t)snprintf(out, len, "%s/gpupool", xdg);
	else if (geteuid() == 0)
		/* Jobs run as nobody, who cannot reach into /root. */
		n = (size_t)snprintf(out, len, "/var/lib/gpupool");
	else {
		if (home == NULL || home[0] == '\0') {
			pw = getpwuid(getuid());
			home = pw != NULL ? pw->pw_dir : "/";
		}
		n = (size_t)snprintf(out, len, "%s/.local/share/gpupool", home);
	}
	return n < len ? 0 : GP_EINVAL;
}

/* Keeps [A-Za-z0-9._-] of text, the rest becomes '-'; "" gives fallback. */
static void
clean_name(const char *text, const char *fallback, char *out, size_t len)
{
	size_t i, n = 0;
	char c;

	for (i = 0; text[i] != '\0' && n + 1 < len && n < GP_NAME_MAX; i++) {
		c = text[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		        c == '-'))
			c = '-';
		out[n++] = c;
	}
	out[n] = '\0';
	if (n == 0)
		gp_strlcpy(out, fallback, len);
}

static void
current_user(char *out, size_t len)
{
	const char *user = getenv("USER");
	struct passwd *pw;

	if (user == NULL || user[0] == '\0') {
		pw = getpwuid(getuid());
		user = pw != NULL ? pw->pw_name : "";
	}
	clean_name(user, "user", out, len);
}

/*
 * Splits "HOST:PORT" ("[::1]:7070" too). OUT: host, port. Returns 0 or
 * GP_EINVAL.
 */
static int
split_listen(const char *listen, char *host, size_t hostlen, char *port,
    size_t portlen)
{
	const char *colon = strrchr(listen, ':');
	int64_t n;
	size_t hl;

	if (colon == NULL || colon == listen)
		return GP_EINVAL;
	if (gp_parse_int(colon + 1, 1, 65535, &n) != 0)
		return GP_EINVAL;
	hl = (size_t)(colon - listen);
	if (listen[0] == '[' && colon[-1] == ']') {
		listen++;
		hl -= 2;
	}
	if (hl + 1 > hostlen)
		return GP_EINVAL;
	memcpy(host, listen, hl);
	host[hl] = '\0';
	snprintf(port, portlen, "%lld", (long long)n);
	return 0;
}

/* 1 when something accepts connections at host:port. */
static int
port_in_use(const char *host, const char *port)
{
	struct addrinfo hints, *res, *ai;
	int fd, used = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (strcmp(host, "0.0.0.0") == 0)
		host = "127.0.0.1";
	else if (strcmp(host, "::") == 0)
		host = "::1";
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return 0;
	for (ai = res; ai != NULL && !used; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			used = 1;
		close(fd);
	}
	freeaddrinfo(res);
	return used;
}

/*
 * Whether jobs can run under the agent's work directory: not under /tmp
 * or /dev/shm (each job gets a private one) and, when jobs run as nobody,
 * reachable by others. OUT: why, when not. Returns 1 when fine.
 */
static int
work_dir_usable(const char *dir, char *why, size_t len)
{
	char path[PATH_MAX], *slash;
	struct stat st;

	if (strncmp(dir, "/tmp/", 5) == 0 ||
	    strncmp(dir, "/dev/shm/", 9) == 0) {
		snprintf(why, len,
		    "jobs cannot run under /tmp or /dev/shm "
		    "(each job gets a private one)");
		return 0;
	}
	if (geteuid() != 0)
		return 1;
	gp_strlcpy(path, dir, sizeof(path));
	while ((slash = strrchr(path, '/')) != NULL && slash != path) {
		*slash = '\0';
		if (stat(path, &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
			snprintf(why, len,
			    "jobs run as nobody, who cannot "
			    "enter %.200s (mode %03o)",
			    path, (unsigned)(st.st_mode & 0777));
			return 0;
		}
	}
	return 1;
}

/* Prints the lines of a child's log written since we started it. */
static void
print_log_tail(const struct child *c)
{
	char *text, *p;
	size_t len, start;
	int lines = 0;

	if (gp_read_file(c->log, 64 << 20, &text, &len) != 0)
		return;
	start = (size_t)c->log_start <= len ? (size_t)c->log_start : 0;
	p = text + len;
	while (p > text + start && lines <= 12) {
		p--;
		if (*p == '\n' && p != text + len - 1)
			lines++;
	}
	if (*p == '\n')
		p++;
	if (p < text + len) {
		fprintf(stderr, "last lines of %s:\n", c->log);
		for (; *p != '\0'; p++) {
			if (p == text + start || p[-1] == '\n')
				fputs("  | ", stderr);
			fputc(*p, stderr);
		}
		if (text[len - 1] != '\n')
			fputc('\n', stderr);
	}
	free(text);
}

/*
 * Forks and execs this binary with argv. The child's output goes to
 * c->log. Returns 0 or GP_EIO.
 */
static int
start_child(struct pool *p, struct child *c, char *const argv[])
{
	struct stat st;
	int fd, devnull;
	pid_t pid;

	fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		gp_cli_error("cannot open %s: %s", c->log, strerror(errno));
		return GP_EIO;
	}
	c->log_start = fstat(fd, &st) == 0 ? st.st_size : 0;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		gp_cli_error("fork: %s", strerror(errno));
		close(fd);
		return GP_EIO;
	}
	if (pid == 0) {
		if (p->detach)
			setsid();
		else {
			/* Ctrl-C reaches up only; up stops us in order. */
			setpgid(0, 0);
			prctl(PR_SET_PDEATHSIG, SIGTERM);
		}
		devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		sigprocmask(SIG_UNBLOCK, &p->signals, NULL);
		signal(SIGPIPE, SIG_DFL);
		execv("/proc/self/exe", argv);
		dprintf(STDERR_FILENO, "gpupool: exec /proc/self/exe: %s\n",
		    strerror(errno));
		_exit(127);
	}
	close(fd);
	c->pid = pid;
	return 0;
}

static void
describe_status(int status, char *out, size_t len)
{
	if (WIFEXITED(status))
		snprintf(out, len, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status),
		    strsignal(WTERMSIG(status)));
	else
		snprintf(out, len, "status %d", status);
}

/*
 * 1 when c has exited (and reaps it, saying so on stderr unless quiet).
 */
static int
child_exited(struct child *c, int quiet)
{
	char how[96];
	int status;

	if (c->pid <= 0)
		return 1;
	if (waitpid(c->pid, &status, WNOHANG) != c->pid)
		return 0;
	c->pid = 0;
	if (!quiet) {
		describe_status(status, how, sizeof(how));
		gp_cli_error("the %s exited (%s)", c->what, how);
		print_log_tail(c);
	}
	return 1;
}

/* Waits up to ms for a signal in p->signals. Returns it, or 0. */
static int
pause_ms(struct pool *p, long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	int sig;

	sig = sigtimedwait(&p->signals, NULL, &ts);
	return sig == SIGINT || sig == SIGTERM ? sig : 0;
}

/* Stops a child: SIGTERM, then SIGKILL after the grace period. */
static void
stop_child(struct child *c)
{
	int64_t deadline;
	int status;

	if (c->pid <= 0)
		return;
	kill(c->pid, SIGTERM);
	deadline = gp_mono_ms() + STOP_GRACE_MS;
	while (gp_mono_ms() < deadline) {
		if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
			c->pid = 0;
			return;
		}
		usleep(50000);
	}
	fprintf(stderr, "gpupool: the %s did not stop in %d s; killing it\n",
	    c->what, STOP_GRACE_MS / 1000);
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &status, 0);
	c->pid = 0;
}

static void
stop_pool(struct pool *p)
{
	char pidfile[PATH_MAX];

	/* The agent first, so that it can stop its jobs and report. */
	stop_child(&p->agent);
	stop_child(&p->coord);
	if (data_path(p, "up.pid", pidfile, sizeof(pidfile)) == 0)
		unlink(pidfile);
}

/* GET path with token; returns the HTTP status (0: no answer). */
static long
probe(const char *url, const char *token, const char *path, json_t **reply)
{
	struct gp_http_client *http;
	struct gp_http_response resp;
	long status = 0;

	if (reply != NULL)
		*reply = NULL;
	http = gp_http_client_new(url, token, NULL);
	if (http == NULL)
		return 0;
	if (gp_http_request(http, "GET", path, NULL, 0, NULL, 2000, &resp) ==
	    0) {
		status = resp.status;
		if (reply != NULL && status == 200)
			*reply = json_loadb(resp.body, resp.body_len, 0, NULL);
	}
	gp_http_response_fini(&resp);
	gp_http_client_free(http);
	return status;
}

/* Reads a token file's first word into out. Returns 0 or GP_E*. */
static int
read_token(const char *path, char *out, size_t len)
{
	char *text;
	size_t n;
	int rc;

	if ((rc = gp_read_file(path, 4096, &text, NULL)) != 0)
		return rc;
	n = strcspn(text, " \t\r\n");
	text[n] = '\0';
	rc = n > 0 && n < len ? 0 : GP_EINVAL;
	if (rc == 0)
		gp_strlcpy(out, text, len);
	memset(text, 0, n);
	free(text);
	return rc;
}

/*
 * Waits for the coordinator: DATA/coord/admin.token exists and whoami
 * answers 200 with it. OUT: admin (the admin token). Returns 0, a signal
 * number, or -1 (the error is printed).
 */
static int
wait_coordinator(struct pool *p, char *admin, size_t len)
{
	int64_t deadline = gp_mono_ms() + READY_TIMEOUT_MS;
	char path[PATH_MAX];
	int sig;

	if (data_path(p, "coord/admin.token", path, sizeof(path)) != 0)
		return -1;
	while (gp_mono_ms() < deadline) {
		if (child_exited(&p->coord, 0))
			return -1;
		if (read_token(path, admin, len) == 0 &&
		    probe(p->url, admin, "/v1/whoami", NULL) == 200)
			return 0;
		if ((sig = pause_ms(p, 200)) != 0)
			return sig;
	}
	gp_cli_error("the coordinator did not become ready at %s within %d s",
	    p->url, READY_TIMEOUT_MS / 1000);
	print_log_tail(&p->coord);
	return -1;
}

/*
 * A token of role for name, kept in DATA/file: reused when the file holds
 * one the coordinator still accepts with that role, else created (and the
 * file written, mode 0600). OUT: token. Returns 0 or -1 (error printed).
 */
static int
ensure_token(struct pool *p, const char *admin, const char *file,
    const char *role, const char *name, char *token, size_t len)
{
	struct gp_http_response resp;
	struct gp_http_client *http;
	char path[PATH_MAX], text[512];
	json_t *reply = NULL, *body;
	char *dumped;
	int rc;

	if (data_path(p, file, path, sizeof(path)) != 0)
		return -1;
	if (read_token(path, token, len) == 0 &&
	    probe(p->url, token, "/v1/whoami", &reply) == 200 &&
	    gp_cli_json_str(reply, "role") != NULL &&
	    strcmp(gp_cli_json_str(reply, "role"), role) == 0 &&
	    gp_cli_json_str(reply, "name") != NULL &&
	    strcmp(gp_cli_json_str(reply, "name"), name) == 0) {
		json_decref(reply);
		return 0;
	}
	json_decref(reply);
	http = gp_http_client_new(p->url, admin, NULL);
	body = json_pack("{s:s, s:s}", "role", role, "name", name);
	dumped = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (http == NULL || dumped == NULL) {
		gp_http_client_free(http);
		free(dumped);
		gp_cli_error("out of memory");
		return -1;
	}
	rc = gp_http_request(http, "POST", "/v1/tokens", dumped, strlen(dumped),
	    NULL, 5000, &resp);
	free(dumped);
	gp_http_client_free(http);
	if (rc != 0 || resp.status != 201) {
		gp_http_error_text(&resp, text, sizeof(text));
		gp_cli_error("cannot create a %s token: %s", role, text);
		gp_http_response_fini(&resp);
		return -1;
	}
	reply = json_loadb(resp.body, resp.body_len, 0, NULL);
	gp_http_response_fini(&resp);
	if (gp_cli_json_str(reply, "token") == NULL) {
		json_decref(reply);
		gp_cli_error("the coordinator's answer has no token");
		return -1;
	}
	gp_strlcpy(token, gp_cli_json_str(reply, "token"), len);
	json_decref(reply);
	snprintf(text, sizeof(text), "%s\n", token);
	if (gp_write_file(path, text, strlen(text), 0600) != 0) {
		gp_cli_error("cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* 1 when /v1/nodes lists our node as up. */
static int
node_up(struct pool *p, const char *admin)
{
	json_t *reply, *node;
	size_t i;
	int up = 0;

	if (probe(p->url, admin, "/v1/nodes", &reply) != 200)
		return 0;
	json_array_foreach(json_object_get(reply, "nodes"), i, node)
	{
		if (gp_cli_json_str(node, "name") != NULL &&
		    strcmp(gp_cli_json_str(node, "name"), p->node) == 0 &&
		    gp_cli_json_str(node, "state") != NULL &&
		    strcmp(gp_cli_json_str(node, "state"), "up") == 0)
			up = 1;
	}
	json_decref(reply);
	return up;
}

/* Waits for the agent's node. Returns 0, a signal, or -1. */
static int
wait_agent(struct pool *p, const char *admin)
{
	int64_t deadline = gp_mono_ms() + READY_TIMEOUT_MS;
	int sig;

	while (gp_mono_ms() < deadline) {
		if (child_exited(&p->agent, 0) || child_exited(&p->coord, 0))
			return -1;
		if (node_up(p, admin))
			return 0;
		if ((sig = pause_ms(p, 200)) != 0)
			return sig;
	}
	gp_cli_error("the agent's node '%s' did not come up within %d s",
	    p->node, READY_TIMEOUT_MS / 1000);
	print_log_tail(&p->agent);
	return -1;
}

/* Reads DATA/up.pid. OUT: the pids (0 when absent). Returns 0 or GP_E*. */
static int
read_pidfile(const char *path, pid_t *coord, pid_t *agent)
{
	char *text, *line, *save = NULL;
	long pid;
	int rc;

	*coord = *agent = 0;
	if ((rc = gp_read_file(path, 4096, &text, NULL)) != 0)
		return rc;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "coordinator %ld", &pid) == 1 && pid > 0)
			*coord = (pid_t)pid;
		else if (sscanf(line, "agent %ld", &pid) == 1 && pid > 0)
			*agent = (pid_t)pid;
	}
	free(text);
	return 0;
}

/* 1 when pid is alive and is `gpupool <role>` (not a recycled pid). */
static int
is_our_process(pid_t pid, const char *role)
{
	char path[64], *text, *p;
	size_t len;
	int ours = 0;

	if (pid <= 0 || kill(pid, 0) != 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	if (gp_read_file(path, 65536, &text, &len) != 0)
		return 0;
	/* argv is NUL-separated: look for the role as argv[1]. */
	p = memchr(text, '\0', len);
	if (p != NULL && (size_t)(p - text) + 1 < len &&
	    strcmp(p + 1, role) == 0)
		ours = 1;
	free(text);
	return ours;
}

static void
print_welcome(const struct pool *p, const char *config, int ngpus,
    int simulated)
{
	printf("\ngpupool is up: a coordinator and one agent on this machine.\n"
	       "\n"
	       "  coordinator  %s   (log: %s)\n"
	       "  node         %s with %d %sGPU%s   (log: %s)\n"
	       "  config       %s   (you are \"%s\", role user)\n"
	       "  data         %s\n"
	       "\n"
	       "Try:\n"
	       "  gpupool nodes\n",
	    p->url, p->coord.log, p->node, ngpus, simulated ? "simulated " : "",
	    ngpus == 1 ? "" : "s", p->agent.log, config, p->user, p->data);
	if (simulated)
		printf(
		    "  id=$(gpupool submit --gpus 1 -- sh -c 'for i in 1 2 3 "
		    "4 5; do\n"
		    "      echo step $i on GPU $CUDA_VISIBLE_DEVICES; sleep 1; "
		    "done')\n");
	else
		printf("  id=$(gpupool submit --gpus 1 -- nvidia-smi)\n");
	printf("  gpupool ps\n"
	       "  gpupool logs -f $id\n"
	       "\n");
	if (p->detach)
		printf("The pool runs in the background; stop it with: "
		       "gpupool down --data %s\n",
		    p->data);
	else
		printf("Press Ctrl-C to stop the pool.\n");
	fflush(stdout);
}

/* Foreground: waits for a signal or a child's death, then stops all. */
static int
supervise(struct pool *p)
{
	int sig;

	for (;;) {
		sig = pause_ms(p, 500);
		if (sig != 0) {
			printf("\ngpupool: got %s, stopping the pool\n",
			    sig == SIGINT ? "SIGINT" : "SIGTERM");
			fflush(stdout);
			stop_pool(p);
			return 0;
		}
		if (child_exited(&p->coord, 0) || child_exited(&p->agent, 0)) {
			fprintf(stderr, "gpupool: stopping the pool\n");
			stop_pool(p);
			return GP_CLI_EXIT_FAIL;
		}
	}
}

int
gp_cli_cmd_up(const struct gp_cli_args *args)
{
	const char *listen = gp_cli_value(args, "listen");
	const char *data = gp_cli_value(args, "data");
	const char *fake = gp_cli_value(args, "fake-gpus");
	const char *name = gp_cli_value(args, "name");
	char host[256], port[16], why[320], path[PATH_MAX], config[PATH_MAX];
	char admin[256], provider[256], user_token[256], hostname[256];
	char coord_data[PATH_MAX], agent_work[PATH_MAX], token_file[PATH_MAX];
	char agent_sock[PATH_MAX];
	char admin_file[PATH_MAX], pidtext[128];
	char *coord_argv[8], *agent_argv[16];
	struct gp_cli_config old;
	pid_t old_coord, old_agent;
	struct pool p;
	struct gp_gpu_info *gpus = NULL;
	int ngpus = 0, simulated = 0, rc, n, data_mode;

	memset(&p, 0, sizeof(p));
	p.detach = gp_cli_flag(args, "detach");
	p.coord.what = "coordinator";
	p.agent.what = "agent";
	gp_strlcpy(p.listen, listen != NULL ? listen : DEFAULT_LISTEN,
	    sizeof(p.listen));
	if (split_listen(p.listen, host, sizeof(host), port, sizeof(port)) != 0)
		return gp_cli_usage_error(args,
		    "up: --listen must be ADDR:PORT, like 127.0.0.1:7070");
	/*
	 * The coordinator takes IPv4; 0.0.0.0 is reached on loopback. Beyond
	 * loopback it serves HTTPS with a CA of its own, whose hash the
	 * tokens carry (the admin token it writes too): they verify it.
	 */
	snprintf(p.url, sizeof(p.url), "%s://%s:%s",
	    strncmp(host, "127.", 4) == 0 ? "http" : "https",
	    strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host, port);
	if (name != NULL && !gp_name_valid(name))
		return gp_cli_usage_error(args,
		    "up: --name must be 1 to %d characters of "
		    "A-Z a-z 0-9 . _ -",
		    GP_NAME_MAX);
	if (fake != NULL && fake[0] == '\0')
		return gp_cli_usage_error(args,
		    "up: --fake-gpus needs N[:MODEL[:MEM_MIB]]");
	if (gethostname(hostname, sizeof(hostname)) != 0)
		hostname[0] = '\0';
	hostname[sizeof(hostname) - 1] = '\0';
	clean_name(name != NULL ? name : hostname, "node", p.node,
	    sizeof(p.node));
	current_user(p.user, sizeof(p.user));

	/* The data directory, absolute: the children get these paths. */
	if (data != NULL)
		gp_strlcpy(path, data, sizeof(path));
	else if (gp_cli_default_data_dir(path, sizeof(path)) != 0) {
		gp_cli_error("data directory path too long");
		return GP_CLI_EXIT_FAIL;
	}
	/* As root, jobs run as nobody: they must pass through DATA. */
	data_mode = geteuid() == 0 ? 0711 : 0700;
	if (gp_mkdir_p(path, data_mode) != 0 ||
	    realpath(path, p.data) == NULL) {
		gp_cli_error("cannot create %s: %s", path, strerror(errno));
		return GP_CLI_EXIT_FAIL;
	}
	if (data_path(&p, "coord", coord_data, sizeof(coord_data)) != 0 ||
	    data_path(&p, "agent", agent_work, sizeof(agent_work)) != 0 ||
	    data_path(&p, "agent/agent.sock", agent_sock, sizeof(agent_sock)) !=
	        0 ||
	    data_path(&p, "provider.token", token_file, sizeof(token_file)) !=
	        0 ||
	    data_path(&p, "coord/admin.token", admin_file,
	        sizeof(admin_file)) != 0 ||
	    data_path(&p, "coordinator.log", p.coord.log,
	        sizeof(p.coord.log)) != 0 ||
	    data_path(&p, "agent.log", p.agent.log, sizeof(p.agent.log)) != 0 ||
	    data_path(&p, "up.pid", path, sizeof(path)) != 0) {
		gp_cli_error("data directory path too long: %s", p.data);
		return GP_CLI_EXIT_FAIL;
	}
	if (read_pidfile(path, &old_coord, &old_agent) == 0 &&
	    (is_our_process(old_coord, "coordinator") ||
	        is_our_process(old_agent, "agent"))) {
		gp_cli_error("a pool from %s is already running (coordinator "
		             "pid %ld); stop it with: gpupool down --data %s",
		    p.data, (long)old_coord, p.data);
		return GP_CLI_EXIT_FAIL;
	}
	if (port_in_use(host, port)) {
		gp_cli_error("something is already listening on %s (another "
		             "gpupool up?); stop it, or pick another port "
		             "with --listen 127.0.0.1:7071",
		    p.listen);
		return GP_CLI_EXIT_FAIL;
	}
	if (!work_dir_usable(agent_work, why, sizeof(why))) {
		gp_cli_error("cannot use %s for jobs: %s; pick another --data "
		             "(like /var/lib/gpupool)",
		    agent_work, why);
		return GP_CLI_EXIT_FAIL;
	}
	chmod(p.data, (mode_t)data_mode);
	if (gp_mkdir_p(coord_data, 0700) != 0 ||
	    gp_mkdir_p(agent_work, data_mode) != 0) {
		gp_cli_error("cannot create %s: %s", agent_work,
		    strerror(errno));
		return GP_CLI_EXIT_FAIL;
	}

	/* Which GPUs to lend: found the way the agent will find them. */
	why[0] = '\0';
	if (fake != NULL) {
		rc = gp_gpu_discover(fake, &gpus, &ngpus, why, sizeof(why));
		free(gpus);
		if (rc != 0)
			return gp_cli_usage_error(args, "up: %s", why);
		gp_strlcpy(p.fake_gpus, fake, sizeof(p.fake_gpus));
		simulated = 1;
		printf("gpupool: lending %d simulated GPU%s (--fake-gpus %s)\n",
		    ngpus, ngpus == 1 ? "" : "s", fake);
	} else {
		rc = gp_gpu_discover(NULL, &gpus, &ngpus, why, sizeof(why));
		if (rc == 0 && ngpus > 0)
			printf("gpupool: found %d NVIDIA GPU%s (%s): lending "
			       "%s\n",
			    ngpus, ngpus == 1 ? "" : "s", gpus[0].model,
			    ngpus == 1 ? "it" : "them");
		free(gpus);
	}
	if (fake == NULL && (rc != 0 || ngpus == 0)) {
		if (rc == GP_ENOENT)
			gp_strlcpy(why, "NVML not available", sizeof(why));
		else if (rc == 0)
			gp_strlcpy(why, "NVML sees no GPU", sizeof(why));
		gp_strlcpy(p.fake_gpus, FAKE_GPUS_DEFAULT, sizeof(p.fake_gpus));
		simulated = 1;
		ngpus = atoi(FAKE_GPUS_DEFAULT);
		printf("gpupool: no NVIDIA GPU found (%s): lending %d "
		       "simulated GPUs\n",
		    why, ngpus);
	}

	/* Signals: waited for with sigtimedwait; children unblock them. */
	sigemptyset(&p.signals);
	sigaddset(&p.signals, SIGINT);
	sigaddset(&p.signals, SIGTERM);
	sigaddset(&p.signals, SIGCHLD);
	sigprocmask(SIG_BLOCK, &p.signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	printf("gpupool: starting the coordinator on %s (data %s)\n", p.listen,
	    coord_data);
	fflush(stdout);
	n = 0;
	coord_argv[n++] = "gpupool";
	coord_argv[n++] = "coordinator";
	coord_argv[n++] = "--listen";
	coord_argv[n++] = p.listen;
	coord_argv[n++] = "--data";
	coord_argv[n++] = coord_data;
	coord_argv[n] = NULL;
	if (start_child(&p, &p.coord, coord_argv) != 0)
		return GP_CLI_EXIT_FAIL;
	rc = wait_coordinator(&p, admin, sizeof(admin));
	if (rc != 0)
		goto fail;
	if (ensure_token(&p, admin, "provider.token", "provider", p.node,
	        provider, sizeof(provider)) != 0 ||
	    ensure_token(&p, admin, "user.token", "user", p.user, user_token,
	        sizeof(user_token)) != 0) {
		rc = -1;
		goto fail;
	}
	memset(provider, 0, sizeof(provider));

	printf("gpupool: starting the agent for node %s\n", p.node);
	fflush(stdout);
	n = 0;
	agent_argv[n++] = "gpupool";
	agent_argv[n++] = "agent";
	agent_argv[n++] = "--coordinator";
	agent_argv[n++] = p.url;
	agent_argv[n++] = "--token-file";
	agent_argv[n++] = token_file;
	agent_argv[n++] = "--name";
	agent_argv[n++] = p.node;
	agent_argv[n++] = "--work";
	agent_argv[n++] = agent_work;
	if (p.fake_gpus[0] != '\0') {
		agent_argv[n++] = "--fake-gpus";
		agent_argv[n++] = p.fake_gpus;
	}
	if (geteuid() == 0) {
		/* Jobs never run as root. */
		agent_argv[n++] = "--run-as";
		agent_argv[n++] = "nobody";
	}
	agent_argv[n] = NULL;
	if (start_child(&p, &p.agent, agent_argv) != 0) {
		rc = -1;
		goto fail;
	}
	snprintf(pidtext, sizeof(pidtext), "coordinator %ld\nagent %ld\n",
	    (long)p.coord.pid, (long)p.agent.pid);
	if (gp_write_file(path, pidtext, strlen(pidtext), 0600) != 0) {
		gp_cli_error("cannot write %s: %s", path, strerror(errno));
		rc = -1;
		goto fail;
	}
	rc = wait_agent(&p, admin);
	if (rc != 0)
		goto fail;

	/* The config file, so that the next commands just work. */
	if (gp_cli_config_path(config, sizeof(config)) != 0) {
		gp_cli_error("config file path too long");
		rc = -1;
		goto fail;
	}
	memset(&old, 0, sizeof(old));
	{
		char *text;
		char err[256];
		if (gp_read_file(config, 1 << 20, &text, NULL) == 0) {
			if (gp_cli_config_parse(text, &old, err, sizeof(err)) ==
			        0 &&
			    old.url[0] != '\0' && strcmp(old.url, p.url) != 0) {
				char bak[PATH_MAX + 8];
				snprintf(bak, sizeof(bak), "%s.bak", config);
				if (rename(config, bak) == 0)
					printf("gpupool: your previous config "
					       "(for %s) is saved as %s\n",
					    old.url, bak);
			}
			free(text);
		}
	}
	/* `gpupool provider pause` and the rest reach this pool's agent. */
	if (gp_cli_config_write(config, p.url, user_token, admin_file,
	        agent_sock) != 0) {
		gp_cli_error("cannot write %s: %s", config, strerror(errno));
		rc = -1;
		goto fail;
	}
	memset(user_token, 0, sizeof(user_token));
	memset(admin, 0, sizeof(admin));
	print_welcome(&p, config, ngpus, simulated);
	if (p.detach)
		return 0;
	return supervise(&p);
fail:
	if (rc > 0)
		printf("\ngpupool: got %s, stopping the pool\n",
		    rc == SIGINT ? "SIGINT" : "SIGTERM");
	else
		fprintf(stderr, "gpupool: stopping the pool\n");
	stop_pool(&p);
	return rc > 0 ? 128 + rc : GP_CLI_EXIT_FAIL;
}

int
gp_cli_cmd_down(const struct gp_cli_args *args)
{
	const char *data = gp_cli_value(args, "data");
	char dir[PATH_MAX], path[PATH_MAX + 16];
	pid_t pids[2];
	const char *roles[2] = {"agent", "coordinator"};
	int64_t deadline;
	int i, any = 0;

	if (data != NULL)
		gp_strlcpy(dir, data, sizeof(dir));
	else if (gp_cli_default_data_dir(dir, sizeof(dir)) != 0) {
		gp_cli_error("data directory path too long");
		return GP_CLI_EXIT_FAIL;
	}
	snprintf(path, sizeof(path), "%s/up.pid", dir);
	if (read_pidfile(path, &pids[1], &pids[0]) != 0) {
		gp_cli_error("no pool started by gpupool up in %s (no %s)", dir,
		    path);
		return GP_CLI_EXIT_FAIL;
	}
	/* The agent first, so that it can stop its jobs and report. */
	for (i = 0; i < 2; i++) {
		if (!is_our_process(pids[i], roles[i]))
			continue;
		any = 1;
		kill(pids[i], SIGTERM);
		deadline = gp_mono_ms() + STOP_GRACE_MS;
		while (gp_mono_ms() < deadline && kill(pids[i], 0) == 0 &&
		    is_our_process(pids[i], roles[i]))
			usleep(50000);
		if (is_our_process(pids[i], roles[i])) {
			fprintf(stderr,
			    "gpupool: the %s did not stop in %d s; "
			    "killing it\n",
			    roles[i], STOP_GRACE_MS / 1000);
			kill(pids[i], SIGKILL);
		}
	}
	unlink(path);
	if (any)
		printf("stopped the pool in %s\n", dir);
	else
		printf("the pool in %s was not running\n", dir);
	return 0;
}
