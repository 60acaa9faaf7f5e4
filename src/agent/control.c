/*
 * control.c: the provider's control socket (control.h). A Unix stream
 * socket served by one accept thread and one thread per connection (at
 * most CONN_MAX at once). Each connection: check the peer's uid
 * (SO_PEERCRED), read one request line (at most 64 KiB, within
 * READ_TIMEOUT_MS), decode it strictly, ask ops->handle, answer one line,
 * close. Also the client side used by `gpupool provider`.
 *
 * Stopping: a pipe written once and never drained wakes the accept thread
 * and every connection still waiting for its request; connections whose
 * handler is running are waited for.
 */
#include "agent/control.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

#define CONN_MAX	16
#define READ_TIMEOUT_MS 10000
#define SEND_TIMEOUT_S	10

struct conn_slot {
	pthread_t thread;
	int used;	/* a thread was started and not joined yet */
	int done;	/* that thread has finished */
	int fd;
	struct gp_control *c;
};

struct gp_control {
	int fd;
	int wake[2];	/* written once by stop; never drained */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uid_t owner_uid;
	struct gp_control_ops ops;
	pthread_t accept_thread;
	pthread_mutex_t lock;
	struct conn_slot slots[CONN_MAX];
};

static const struct {
	const char *name;
	enum gp_control_cmd cmd;
} commands[] = {
	{"status", GP_CONTROL_STATUS},
	{"pause", GP_CONTROL_PAUSE},
	{"resume", GP_CONTROL_RESUME},
	{"reclaim", GP_CONTROL_RECLAIM},
	{"leave", GP_CONTROL_LEAVE},
	{"policy-show", GP_CONTROL_POLICY_SHOW},
};

static const char *
cmd_name(enum gp_control_cmd cmd)
{
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(commands); i++)
		if (commands[i].cmd == cmd)
			return commands[i].name;
	return "?";
}

int
gp_control_decode(const char *text, size_t len,
    struct gp_control_request *req, char *err, size_t errlen)
{
	struct gp_control_request r = {0};
	json_t *root, *v, *gpu;
	json_error_t jerr;
	const char *key, *name;
	size_t i;
	int64_t g;

	if (len > GP_CONTROL_REQUEST_MAX) {
		snprintf(err, errlen, "request larger than %d KiB",
		    GP_CONTROL_REQUEST_MAX / 1024);
		return GP_EINVAL;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "invalid JSON: %s", jerr.text);
		return GP_EINVAL;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "request is not a JSON object");
		goto bad;
	}
	v = json_object_get(root, "cmd");
	if (!json_is_string(v)) {
		snprintf(err, errlen, "cmd: missing or not a string");
		goto bad;
	}
	name = json_string_value(v);
	for (i = 0; i < GP_ARRAY_LEN(commands); i++)
		if (strcmp(name, commands[i].name) == 0 &&
		    strlen(name) == json_string_length(v))
			r.cmd = commands[i].cmd;
	if (r.cmd == 0) {
		snprintf(err, errlen, "cmd: unknown command '%.32s' (expected "
		    "status, pause, resume, reclaim, leave or policy-show)",
		    name);
		goto bad;
	}
	json_object_foreach(root, key, v) {
		if (strcmp(key, "cmd") == 0)
			continue;
		if (strcmp(key, "now") == 0 && r.cmd == GP_CONTROL_RECLAIM) {
			if (!json_is_boolean(v)) {
				snprintf(err, errlen, "now: not a boolean");
				goto bad;
			}
			r.now = json_is_true(v);
		} else if (strcmp(key, "gpus") == 0 &&
		    (r.cmd == GP_CONTROL_RECLAIM ||
		    r.cmd == GP_CONTROL_RESUME)) {
			if (!json_is_array(v)) {
				snprintf(err, errlen, "gpus: not an array");
				goto bad;
			}
			json_array_foreach(v, i, gpu) {
				if (!json_is_integer(gpu) ||
				    (g = json_integer_value(gpu)) < 0 ||
				    g > 63) {
					snprintf(err, errlen, "gpus: item %zu "
					    "is not a GPU index (0..63)", i);
					goto bad;
				}
				if (r.gpus & (UINT64_C(1) << g)) {
					snprintf(err, errlen, "gpus: GPU "
					    "%lld listed twice", (long long)g);
					goto bad;
				}
				r.gpus |= UINT64_C(1) << g;
			}
		} else {
			snprintf(err, errlen, "unknown key '%.32s' for %s", key,
			    cmd_name(r.cmd));
			goto bad;
		}
	}
	json_decref(root);
	*req = r;
	return 0;
bad:
	json_decref(root);
	return GP_EINVAL;
}

/* Sends all of text; never raises SIGPIPE. 0 or GP_EIO. */
static int
send_all(int fd, const char *text, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = send(fd, text, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return GP_EIO;
		text += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Sends obj as one line; steals the reference. */
static int
send_json(int fd, json_t *obj)
{
	char *text;
	int rc;

	text = obj != NULL ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (text == NULL)
		return send_all(fd, "{\"ok\":false,\"error\":\"out of memory\"}"
		    "\n", 37);
	rc = send_all(fd, text, strlen(text));
	if (rc == 0)
		rc = send_all(fd, "\n", 1);
	free(text);
	return rc;
}

static void
send_error(int fd, const char *error)
{
	json_t *obj = json_object();

	if (obj != NULL) {
		json_object_set_new(obj, "ok", json_false());
		json_object_set_new(obj, "error", json_string(error));
	}
	send_json(fd, obj);
}

/*
 * Reads one line (without its newline; EOF also ends it) into buf, up to
 * max bytes, within timeout_ms, giving up when stop_fd becomes readable.
 * OUT: *len. Returns 0, GP_ETOOBIG, GP_ETIMEDOUT, GP_ECONFLICT (stopped)
 * or GP_EIO.
 */
static int
read_line(int fd, int stop_fd, char *buf, size_t max, size_t *len,
    long timeout_ms)
{
	struct pollfd pfd[2];
	int64_t deadline = gp_mono_ms() + timeout_ms, left;
	size_t have = 0;
	ssize_t n;
	char *nl;

	for (;;) {
		left = timeout_ms > 0 ? deadline - gp_mono_ms() : -1;
		if (timeout_ms > 0 && left <= 0)
			return GP_ETIMEDOUT;
		pfd[0].fd = fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = stop_fd;
		pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		if (poll(pfd, stop_fd >= 0 ? 2 : 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return GP_EIO;
		}
		if (stop_fd >= 0 && pfd[1].revents != 0)
			return GP_ECONFLICT;
		if (pfd[0].revents == 0)
			continue;
		n = recv(fd, buf + have, max + 1 - have, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return GP_EIO;
		if (n == 0) {
			if (have == 0)
				return GP_EIO;
			break;
		}
		nl = memchr(buf + have, '\n', (size_t)n);
		have += (size_t)n;
		if (nl != NULL) {
			have = (size_t)(nl - buf);
			break;
		}
		if (have > max)
			return GP_ETOOBIG;
	}
	if (have > max)
		return GP_ETOOBIG;
	*len = have;
	return 0;
}

static void
serve(struct gp_control *c, int fd)
{
	struct gp_control_request req;
	struct ucred cred;
	socklen_t credlen = sizeof(cred);
	struct timeval tv = {SEND_TIMEOUT_S, 0};
	char err[512], *buf;
	size_t len;
	json_t *answer;
	int rc;

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) != 0) {
		gp_warn("control peer_credentials=unknown error=\"%s\"",
		    strerror(errno));
		send_error(fd, "permission denied: cannot read the peer's "
		    "credentials");
		return;
	}
	if (cred.uid != 0 && cred.uid != c->owner_uid) {
		gp_warn("control refused uid=%u pid=%d owner_uid=%u",
		    (unsigned)cred.uid, (int)cred.pid, (unsigned)c->owner_uid);
		snprintf(err, sizeof(err), "permission denied: uid %u is not "
		    "the owner", (unsigned)cred.uid);
		send_error(fd, err);
		return;
	}
	if ((buf = malloc(GP_CONTROL_REQUEST_MAX + 1)) == NULL) {
		send_error(fd, "out of memory");
		return;
	}
	rc = read_line(fd, c->wake[0], buf, GP_CONTROL_REQUEST_MAX, &len,
	    READ_TIMEOUT_MS);
	if (rc != 0) {
		if (rc == GP_ETOOBIG)
			send_error(fd, "request larger than 64 KiB");
		else if (rc == GP_ETIMEDOUT)
			send_error(fd, "no request within 10 s");
		else if (rc == GP_ECONFLICT)
			send_error(fd, "the agent is stopping");
		gp_debug("control read uid=%u error=\"%s\"",
		    (unsigned)cred.uid, gp_strerror(rc));
		free(buf);
		return;
	}
	rc = gp_control_decode(buf, len, &req, err, sizeof(err));
	free(buf);
	if (rc != 0) {
		gp_info("control bad_request uid=%u error=\"%s\"",
		    (unsigned)cred.uid, err);
		send_error(fd, err);
		return;
	}
	if (req.cmd == GP_CONTROL_STATUS || req.cmd == GP_CONTROL_POLICY_SHOW)
		gp_debug("control cmd=%s uid=%u", cmd_name(req.cmd),
		    (unsigned)cred.uid);
	else
		gp_info("control cmd=%s uid=%u now=%d gpus=0x%llx",
		    cmd_name(req.cmd), (unsigned)cred.uid, req.now,
		    (unsigned long long)req.gpus);
	err[0] = '\0';
	answer = c->ops.handle(c->ops.arg, &req, err, sizeof(err));
	if (answer == NULL || !json_is_object(answer)) {
		json_decref(answer);
		send_error(fd, err[0] != '\0' ? err : "failed");
		return;
	}
	json_object_set_new(answer, "ok", json_true());
	if (send_json(fd, answer) != 0)
		gp_info("control cmd=%s answer=lost (client gone)",
		    cmd_name(req.cmd));
}

static void *
conn_main(void *arg)
{
	struct conn_slot *s = arg;
	struct gp_control *c = s->c;

	serve(c, s->fd);
	close(s->fd);
	pthread_mutex_lock(&c->lock);
	s->done = 1;
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Joins finished connection threads, freeing their slots. */
static void
reap(struct gp_control *c)
{
	pthread_t done[CONN_MAX];
	int i, n = 0;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < CONN_MAX; i++)
		if (c->slots[i].used && c->slots[i].done) {
			done[n++] = c->slots[i].thread;
			c->slots[i].used = c->slots[i].done = 0;
		}
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < n; i++)
		pthread_join(done[i], NULL);
}

static void *
accept_main(void *arg)
{
	struct gp_control *c = arg;
	struct pollfd pfd[2];
	struct conn_slot *s;
	int fd, i;

	for (;;) {
		pfd[0].fd = c->fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = c->wake[0];
		pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			gp_error("control poll error=\"%s\"", strerror(errno));
			break;
		}
		if (pfd[1].revents != 0)
			break;
		if (pfd[0].revents == 0)
			continue;
		fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EINTR && errno != EAGAIN &&
			    errno != ECONNABORTED)
				gp_warn("control accept error=\"%s\"",
				    strerror(errno));
			if (errno == EMFILE || errno == ENFILE) {
				/* Do not spin: wait for a descriptor. */
				poll(pfd + 1, 1, 100);
			}
			continue;
		}
		reap(c);
		s = NULL;
		pthread_mutex_lock(&c->lock);
		for (i = 0; i < CONN_MAX && s == NULL; i++)
			if (!c->slots[i].used)
				s = &c->slots[i];
		if (s != NULL) {
			s->used = 1;
			s->done = 0;
			s->fd = fd;
			s->c = c;
			if (pthread_create(&s->thread, NULL, conn_main, s) !=
			    0) {
				s->used = 0;
				s = NULL;
			}
		}
		pthread_mutex_unlock(&c->lock);
		if (s == NULL) {
			gp_warn("control busy connections=%d", CONN_MAX);
			fcntl(fd, F_SETFL, O_NONBLOCK);
			send_error(fd, "busy: too many connections, try again");
			close(fd);
		}
	}
	return NULL;
}

/* Is something listening on the socket file at path? */
static int
socket_alive(const char *path)
{
	struct sockaddr_un sa;
	int fd, alive;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	gp_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return alive;
}

struct gp_control *
gp_control_start(const char *path, uid_t owner_uid,
    const struct gp_control_ops *ops, char *err, size_t errlen)
{
	struct gp_control *c;
	struct sockaddr_un sa;
	struct stat st;
	char dir[sizeof(sa.sun_path)], *slash;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "control socket path too long (at most "
		    "%zu bytes): %s", sizeof(sa.sun_path) - 1, path);
		return NULL;
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket; "
			    "not replacing it", path);
			return NULL;
		}
		if (socket_alive(path)) {
			snprintf(err, errlen, "another agent is listening on "
			    "%s", path);
			return NULL;
		}
		if (unlink(path) != 0) {
			snprintf(err, errlen, "cannot remove the stale socket "
			    "%s: %s", path, strerror(errno));
			return NULL;
		}
	}
	gp_strlcpy(dir, path, sizeof(dir));
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (gp_mkdir_p(dir, 0755) != 0) {
			snprintf(err, errlen, "cannot create %s: %s", dir,
			    strerror(errno));
			return NULL;
		}
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->wake[0] = c->wake[1] = -1;
	c->owner_uid = owner_uid;
	c->ops = *ops;
	gp_strlcpy(c->path, path, sizeof(c->path));
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || pipe2(c->wake, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		goto fail;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	gp_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	if (bind(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		snprintf(err, errlen, "bind %s: %s", path, strerror(errno));
		goto fail;
	}
	/* The owner must be able to connect when the agent runs as root. */
	if (chmod(path, 0660) != 0 ||
	    (geteuid() == 0 && owner_uid != 0 &&
	    chown(path, owner_uid, (gid_t)-1) != 0)) {
		snprintf(err, errlen, "chmod/chown %s: %s", path,
		    strerror(errno));
		unlink(path);
		goto fail;
	}
	if (listen(c->fd, 64) != 0) {
		snprintf(err, errlen, "listen %s: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	pthread_mutex_init(&c->lock, NULL);
	if (pthread_create(&c->accept_thread, NULL, accept_main, c) != 0) {
		snprintf(err, errlen, "cannot start the control thread");
		pthread_mutex_destroy(&c->lock);
		unlink(path);
		goto fail;
	}
	gp_info("control listening path=%s owner_uid=%u", path,
	    (unsigned)owner_uid);
	return c;
fail:
	if (c->fd >= 0)
		close(c->fd);
	if (c->wake[0] >= 0) {
		close(c->wake[0]);
		close(c->wake[1]);
	}
	free(c);
	return NULL;
}

void
gp_control_stop(struct gp_control *c)
{
	ssize_t n;
	int i;

	if (c == NULL)
		return;
	do
		n = write(c->wake[1], "x", 1);
	while (n < 0 && errno == EINTR);
	pthread_join(c->accept_thread, NULL);
	close(c->fd);
	unlink(c->path);
	/* Connections waiting for a request see the pipe and give up. */
	for (i = 0; i < CONN_MAX; i++)
		if (c->slots[i].used)
			pthread_join(c->slots[i].thread, NULL);
	close(c->wake[0]);
	close(c->wake[1]);
	pthread_mutex_destroy(&c->lock);
	gp_info("control stopped path=%s", c->path);
	free(c);
}

int
gp_control_call(const char *path, const char *req_line, long timeout_ms,
    json_t **answer, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	json_error_t jerr;
	json_t *obj, *ok;
	char *buf = NULL;
	const char *why;
	size_t len;
	int fd, rc;

	*answer = NULL;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return GP_EINVAL;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return GP_EIO;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	gp_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = errno;
		close(fd);
		if (rc == ENOENT || rc == ECONNREFUSED || rc == ENOTDIR) {
			snprintf(err, errlen, "no agent listening on %s", path);
			return GP_ECONN;
		}
		if (rc == EACCES || rc == EPERM) {
			snprintf(err, errlen, "cannot connect to %s: "
			    "permission denied (only the owner and root may)",
			    path);
			return GP_EPERM;
		}
		snprintf(err, errlen, "cannot connect to %s: %s", path,
		    strerror(rc));
		return GP_ECONN;
	}
	if (send_all(fd, req_line, strlen(req_line)) != 0 ||
	    send_all(fd, "\n", 1) != 0) {
		/* Refused peers may be answered and closed before we send. */
		if (errno != EPIPE && errno != ECONNRESET) {
			snprintf(err, errlen, "cannot send to %s: %s", path,
			    strerror(errno));
			close(fd);
			return GP_EIO;
		}
	}
	/* Answers are small, except status with many GPUs: 1 MiB. */
	if ((buf = malloc((1 << 20) + 1)) == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	rc = read_line(fd, -1, buf, 1 << 20, &len, timeout_ms);
	close(fd);
	if (rc != 0) {
		free(buf);
		if (rc == GP_ETIMEDOUT)
			snprintf(err, errlen, "the agent on %s did not answer "
			    "within %ld ms", path, timeout_ms);
		else
			snprintf(err, errlen, "the agent on %s closed the "
			    "connection without an answer", path);
		return rc == GP_ETIMEDOUT ? GP_ETIMEDOUT : GP_EIO;
	}
	obj = json_loadb(buf, len, 0, &jerr);
	free(buf);
	if (!json_is_object(obj)) {
		json_decref(obj);
		snprintf(err, errlen, "the agent on %s answered invalid JSON",
		    path);
		return GP_EPROTO;
	}
	ok = json_object_get(obj, "ok");
	if (!json_is_true(ok)) {
		why = json_string_value(json_object_get(obj, "error"));
		snprintf(err, errlen, "%s", why != NULL ? why : "failed");
		rc = why != NULL && strncmp(why, "permission denied", 17) ==
		    0 ? GP_EPERM : GP_EINVAL;
		json_decref(obj);
		return rc;
	}
	*answer = obj;
	return 0;
}
