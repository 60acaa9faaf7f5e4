/*
 * test_control.c: the provider's control socket (src/agent/control.c):
 * the strict request decoder, and a real socket in a temporary directory
 * under /var/tmp answered by a stub handler: the owner and root get
 * through, another uid is refused on its credentials, a silent client
 * blocks nobody, stop returns while a client is connected, stale and
 * foreign files at the socket path.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/control.h"
#include "gp.h"
#include "unit.h"
#include "util.h"

#define OWNER_UID 4242
#define NOBODY	  65534

static int
decode(const char *text, struct gp_control_request *req, char *err)
{
	return gp_control_decode(text, strlen(text), req, err, 256);
}

TEST(decode_valid)
{
	struct gp_control_request r;
	char err[256];

	CHECK_EQ(decode("{\"cmd\":\"status\"}", &r, err), 0);
	CHECK_EQ(r.cmd, GP_CONTROL_STATUS);
	CHECK_EQ(r.now, 0);
	CHECK_EQ(r.gpus, 0);
	CHECK_EQ(decode("{\"cmd\":\"pause\"}", &r, err), 0);
	CHECK_EQ(r.cmd, GP_CONTROL_PAUSE);
	CHECK_EQ(decode("{\"cmd\":\"resume\",\"gpus\":[0]}", &r, err), 0);
	CHECK_EQ(r.cmd, GP_CONTROL_RESUME);
	CHECK_EQ(r.gpus, 1);
	CHECK_EQ(decode(" {\"gpus\":[0,1,63],\"now\":true,\"cmd\":\"reclaim\"} ",
	    &r, err), 0);
	CHECK_EQ(r.cmd, GP_CONTROL_RECLAIM);
	CHECK_EQ(r.now, 1);
	CHECK(r.gpus == (UINT64_C(3) | UINT64_C(1) << 63));
	CHECK_EQ(decode("{\"cmd\":\"reclaim\",\"now\":false,\"gpus\":[]}", &r,
	    err), 0);
	CHECK_EQ(r.now, 0);
	CHECK_EQ(r.gpus, 0);
	CHECK_EQ(decode("{\"cmd\":\"leave\"}", &r, err), 0);
	CHECK_EQ(r.cmd, GP_CONTROL_LEAVE);
	CHECK_EQ(decode("{\"cmd\":\"policy-show\"}", &r, err), 0);
	CHECK_EQ(r.cmd, GP_CONTROL_POLICY_SHOW);
}

static void
bad(const char *text, const char *want)
{
	struct gp_control_request r = {GP_CONTROL_LEAVE, 7, 7};
	char err[256] = "";

	CHECK_EQ(gp_control_decode(text, strlen(text), &r, err, sizeof(err)),
	    GP_EINVAL);
	if (strstr(err, want) == NULL)
		fprintf(stderr, "%s: got \"%s\", want \"%s\"\n", text, err,
		    want);
	CHECK(strstr(err, want) != NULL);
	/* Written only on success. */
	CHECK_EQ(r.cmd, GP_CONTROL_LEAVE);
	CHECK_EQ(r.now, 7);
}

TEST(decode_strict)
{
	char *big;

	bad("", "invalid JSON");
	bad("{", "invalid JSON");
	bad("[\"status\"]", "not a JSON object");
	bad("{}", "cmd: missing");
	bad("{\"cmd\":3}", "cmd: missing or not a string");
	bad("{\"cmd\":\"reboot\"}", "unknown command 'reboot'");
	bad("{\"cmd\":\"STATUS\"}", "unknown command");
	bad("{\"cmd\":\"status\\u0000x\"}", "invalid JSON");
	bad("{\"cmd\":\"status\",\"cmd\":\"pause\"}", "invalid JSON");
	bad("{\"cmd\":\"status\",\"verbose\":true}",
	    "unknown key 'verbose' for status");
	bad("{\"cmd\":\"status\",\"now\":true}", "unknown key 'now'");
	bad("{\"cmd\":\"pause\",\"gpus\":[1]}", "unknown key 'gpus' for pause");
	bad("{\"cmd\":\"resume\",\"now\":true}", "unknown key 'now'");
	bad("{\"cmd\":\"reclaim\",\"now\":1}", "now: not a boolean");
	bad("{\"cmd\":\"reclaim\",\"gpus\":1}", "gpus: not an array");
	bad("{\"cmd\":\"reclaim\",\"gpus\":[64]}", "gpus: item 0");
	bad("{\"cmd\":\"reclaim\",\"gpus\":[0,-1]}", "gpus: item 1");
	bad("{\"cmd\":\"reclaim\",\"gpus\":[\"0\"]}", "gpus: item 0");
	bad("{\"cmd\":\"reclaim\",\"gpus\":[1.0]}", "gpus: item 0");
	bad("{\"cmd\":\"reclaim\",\"gpus\":[2,2]}", "GPU 2 listed twice");
	big = malloc(GP_CONTROL_REQUEST_MAX + 2);
	memset(big, ' ', GP_CONTROL_REQUEST_MAX + 1);
	big[GP_CONTROL_REQUEST_MAX + 1] = '\0';
	bad(big, "larger than 64 KiB");
	free(big);
}

/* The stub agent: echoes the request, fails for GPU 9. */
static json_t *
stub_handle(void *arg, const struct gp_control_request *req, char *err,
    size_t errlen)
{
	int *calls = arg;

	__atomic_add_fetch(calls, 1, __ATOMIC_SEQ_CST);
	if (req->gpus & (UINT64_C(1) << 9)) {
		snprintf(err, errlen, "no GPU 9 on this machine");
		return NULL;
	}
	return json_pack("{s:i,s:b,s:I}", "cmd", req->cmd, "now", req->now,
	    "gpus", (json_int_t)req->gpus);
}

struct fixture {
	char dir[64];
	char path[128];
	int calls;
	struct gp_control_ops ops;
	struct gp_control *c;
};

static int
setup(struct fixture *f)
{
	char err[256];

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/var/tmp/gpupool-ctl.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/agent.sock", f->dir);
	f->ops.arg = &f->calls;
	f->ops.handle = stub_handle;
	f->c = gp_control_start(f->path, OWNER_UID, &f->ops, err,
	    sizeof(err));
	if (f->c == NULL)
		fprintf(stderr, "gp_control_start: %s\n", err);
	return f->c != NULL ? 0 : -1;
}

static void
teardown(struct fixture *f)
{
	gp_control_stop(f->c);
	f->c = NULL;
	rmdir(f->dir);
}

/* A raw client: connected socket or -1. */
static int
raw_connect(const char *path)
{
	struct sockaddr_un sa;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads what the server sends until it closes. */
static void
read_all(int fd, char *buf, size_t len)
{
	size_t have = 0;
	ssize_t n;

	while (have + 1 < len &&
	    (n = read(fd, buf + have, len - 1 - have)) > 0)
		have += (size_t)n;
	buf[have] = '\0';
}

TEST(socket_answers)
{
	struct fixture f;
	struct stat st;
	json_t *answer;
	char err[256];

	if (setup(&f) != 0) {
		CHECK(0);
		return;
	}
	CHECK_EQ(stat(f.path, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ(st.st_mode & 0777, 0660);
	CHECK_EQ(gp_control_call(f.path, "{\"cmd\":\"reclaim\",\"now\":true,"
	    "\"gpus\":[0,1]}", 5000, &answer, err, sizeof(err)), 0);
	CHECK(json_is_true(json_object_get(answer, "ok")));
	CHECK_EQ(json_integer_value(json_object_get(answer, "cmd")),
	    GP_CONTROL_RECLAIM);
	CHECK(json_is_true(json_object_get(answer, "now")));
	CHECK_EQ(json_integer_value(json_object_get(answer, "gpus")), 3);
	json_decref(answer);
	/* The handler's error comes back as {"ok": false}. */
	answer = (json_t *)1;
	CHECK_EQ(gp_control_call(f.path, "{\"cmd\":\"resume\",\"gpus\":[9]}",
	    5000, &answer, err, sizeof(err)), GP_EINVAL);
	CHECK(answer == NULL);
	CHECK_STR(err, "no GPU 9 on this machine");
	/* So does a bad request, without calling the handler. */
	CHECK_EQ(gp_control_call(f.path, "{\"cmd\":\"dance\"}", 5000, &answer,
	    err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "unknown command 'dance'") != NULL);
	CHECK_EQ(f.calls, 2);
	teardown(&f);
	/* Stopped: the file is gone and nobody listens. */
	CHECK(access(f.path, F_OK) != 0);
	CHECK_EQ(gp_control_call(f.path, "{\"cmd\":\"status\"}", 5000, &answer,
	    err, sizeof(err)), GP_ECONN);
	CHECK(strstr(err, "no agent listening on ") != NULL);
}

TEST(raw_clients)
{
	struct fixture f;
	char buf[512], *big;
	size_t n = 70000;
	int fd;

	if (setup(&f) != 0) {
		CHECK(0);
		return;
	}
	/* No newline: EOF ends the request. */
	fd = raw_connect(f.path);
	CHECK(fd >= 0);
	CHECK(write(fd, "{\"cmd\":\"pause\"}", 15) == 15);
	shutdown(fd, SHUT_WR);
	read_all(fd, buf, sizeof(buf));
	close(fd);
	CHECK(strstr(buf, "\"ok\":true") != NULL);
	CHECK(buf[strlen(buf) - 1] == '\n');
	/* Too long. */
	fd = raw_connect(f.path);
	big = malloc(n);
	memset(big, 'x', n);
	CHECK(send(fd, big, n, MSG_NOSIGNAL) > 0);
	free(big);
	read_all(fd, buf, sizeof(buf));
	close(fd);
	CHECK(strstr(buf, "request larger than 64 KiB") != NULL);
	/* A client that leaves before the answer does not hurt the agent. */
	fd = raw_connect(f.path);
	CHECK(write(fd, "{\"cmd\":\"status\"}\n", 17) == 17);
	close(fd);
	fd = raw_connect(f.path);
	CHECK(write(fd, "{\"cmd\":\"leave\"}\n", 16) == 16);
	read_all(fd, buf, sizeof(buf));
	close(fd);
	CHECK(strstr(buf, "\"ok\":true") != NULL);
	teardown(&f);
}

TEST(silent_client_blocks_nobody)
{
	struct fixture f;
	json_t *answer;
	char err[256];
	int silent[20], i;

	if (setup(&f) != 0) {
		CHECK(0);
		return;
	}
	silent[0] = raw_connect(f.path);
	CHECK(silent[0] >= 0);
	CHECK_EQ(gp_control_call(f.path, "{\"cmd\":\"status\"}", 0, &answer,
	    err, sizeof(err)), 0);
	json_decref(answer);
	/* More silent clients than connection slots: refused as busy, and
	 * the agent still stops. */
	for (i = 1; i < 20; i++)
		silent[i] = raw_connect(f.path);
	teardown(&f);
	for (i = 0; i < 20; i++)
		if (silent[i] >= 0)
			close(silent[i]);
}

TEST(stop_with_a_client_connected)
{
	struct fixture f;
	char buf[512];
	int fd;

	if (setup(&f) != 0) {
		CHECK(0);
		return;
	}
	fd = raw_connect(f.path);
	CHECK(fd >= 0);
	CHECK(write(fd, "{\"cmd\":", 7) == 7); /* half a request */
	teardown(&f);
	read_all(fd, buf, sizeof(buf));
	close(fd);
	CHECK(buf[0] == '\0' || strstr(buf, "stopping") != NULL);
	CHECK_EQ(f.calls, 0);
}

/* In a child: become uid, ask for status, exit 0 when want_rc came back
 * (with want_text in the error when given). */
static int
child_call(const char *path, uid_t uid, int want_rc, const char *want_text)
{
	json_t *answer;
	char err[256] = "";
	pid_t pid;
	int status, rc;

	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
		    setresuid(uid, uid, uid) != 0)
			_exit(3);
		rc = gp_control_call(path, "{\"cmd\":\"status\"}", 10000,
		    &answer, err, sizeof(err));
		if (rc != want_rc) {
			fprintf(stderr, "uid %u: rc %d, err \"%s\"\n",
			    (unsigned)uid, rc, err);
			_exit(1);
		}
		if (want_text != NULL && strcmp(err, want_text) != 0) {
			fprintf(stderr, "uid %u: \"%s\"\n", (unsigned)uid, err);
			_exit(2);
		}
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(credentials_not_file_mode)
{
	struct fixture f;
	json_t *answer;
	char err[256];

	if (geteuid() != 0) {
		UNIT_SKIP("root", "changes uid");
		return;
	}
	if (setup(&f) != 0) {
		CHECK(0);
		return;
	}
	/* Anyone may open the file: only the credential check stands. */
	CHECK_EQ(chmod(f.dir, 0755), 0);
	CHECK_EQ(chmod(f.path, 0666), 0);
	CHECK_EQ(child_call(f.path, NOBODY, GP_EPERM,
	    "permission denied: uid 65534 is not the owner"), 0);
	CHECK_EQ(child_call(f.path, OWNER_UID, 0, NULL), 0);
	CHECK_EQ(gp_control_call(f.path, "{\"cmd\":\"status\"}", 10000,
	    &answer, err, sizeof(err)), 0);
	json_decref(answer);
	/* The refused peer never reached the handler. */
	CHECK_EQ(f.calls, 2);
	teardown(&f);
}

TEST(socket_owner_when_root)
{
	struct fixture f;
	struct stat st;

	if (geteuid() != 0)
		return;
	if (setup(&f) != 0) {
		CHECK(0);
		return;
	}
	CHECK_EQ(stat(f.path, &st), 0);
	CHECK_EQ(st.st_uid, OWNER_UID);
	teardown(&f);
}

TEST(path_checks)
{
	struct gp_control_ops ops = {NULL, stub_handle};
	struct gp_control *c, *c2;
	struct sockaddr_un sa;
	char dir[] = "/var/tmp/gpupool-ctl.XXXXXX", path[128], err[256];
	int fd, calls = 0;

	ops.arg = &calls;
	CHECK(mkdtemp(dir) != NULL);
	/* A regular file is never replaced. */
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	CHECK(gp_control_start(path, OWNER_UID, &ops, err, sizeof(err)) ==
	    NULL);
	CHECK(strstr(err, "is not a socket") != NULL);
	CHECK_EQ(access(path, F_OK), 0);
	unlink(path);
	/* A stale socket (nobody listening) is replaced. */
	snprintf(path, sizeof(path), "%s/sub/dir/agent.sock", dir);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	gp_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	snprintf(err, sizeof(err), "%s/sub/dir", dir);
	CHECK_EQ(gp_mkdir_p(err, 0700), 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	c = gp_control_start(path, OWNER_UID, &ops, err, sizeof(err));
	CHECK(c != NULL);
	/* A live one is not. */
	c2 = gp_control_start(path, OWNER_UID, &ops, err, sizeof(err));
	CHECK(c2 == NULL);
	CHECK(strstr(err, "another agent is listening") != NULL);
	gp_control_stop(c);
	/* Missing directories are made. */
	snprintf(path, sizeof(path), "%s/new/agent.sock", dir);
	c = gp_control_start(path, OWNER_UID, &ops, err, sizeof(err));
	CHECK(c != NULL);
	gp_control_stop(c);
	snprintf(path, sizeof(path), "%s/new", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/sub/dir", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	CHECK_EQ(rmdir(dir), 0);
	/* Too long for sun_path. */
	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	CHECK(gp_control_start(path, OWNER_UID, &ops, err, sizeof(err)) ==
	    NULL);
	CHECK(strstr(err, "too long") != NULL);
}

int
main(void)
{
	signal(SIGPIPE, SIG_DFL); /* the server must not raise it */
	RUN(decode_valid);
	RUN(decode_strict);
	RUN(socket_answers);
	RUN(raw_clients);
	RUN(silent_client_blocks_nobody);
	RUN(stop_with_a_client_connected);
	RUN(credentials_not_file_mode);
	RUN(socket_owner_when_root);
	RUN(path_checks);
	return unit_report();
}
