/*
 * overlay.c: the agent's wireguard-go for gangs across NATs (overlay.h,
 * docs/agent.md "Gangs behind NATs").
 *
 * State: the links, one per local gang part in the overlay, each with
 * its remote parts (gang address, peer key, endpoint). Everything the
 * device carries follows from them: a peer per key that some link names
 * (its allowed IPs the union of its parts' /32s), a route per remote
 * address, and the table's set of (remote, local) pairs. A change
 * rewrites the peers it touches with one `wg set`, the routes with one
 * `ip -batch`, the pairs with one `nft -f`.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "agent/netns.h"
#include "agent/overlay.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#define OV_RUN_DIR "/run/gpupool-net"
#define OV_PID_FMT OV_RUN_DIR "/%02x.wg.pid"
#define OV_SOCK_FMT "/var/run/wireguard/%s.sock"
#define OV_DEV_FMT "gpw%02x"
#define OV_TABLE_FMT "gpupool_ov_%02x"
#define OV_PORT_BASE 51820
/* Keeps the NAT mappings open (their UDP timeouts are 30 s and more). */
#define OV_KEEPALIVE "25"
/* wireguard-go's socket, at most (it took 2.5 s at a load of 23 here) */
#define OV_START_MS 15000
#define OV_PARTS 64		/* netns.c's gangs: parts <= 64 */
/* A first handshake not seen after this long is nudged (gp_overlay_tick). */
#define OV_NUDGE_MS 1500
#define OV_NUDGES 3

struct ov_link {
	int64_t job;
	int part;
	uint32_t local;
	int n;				/* remote parts */
	uint32_t remote[OV_PARTS];
	char key[OV_PARTS][GP_WG_KEY_LEN];
	char endpoint[OV_PARTS][264];
};

/*
 * A peer the device has, and whether its first handshake is still to be
 * seen (a nudge may be due: gp_overlay_tick).
 */
struct ov_peer {
	char key[GP_WG_KEY_LEN];
	char endpoint[264];
	int64_t added;		/* gp_mono_ms() when configured */
	int nudges;		/* re-made so far; -1: handshake seen */
};

struct gp_overlay {
	enum gp_overlay_mode mode;
	int block, port;
	char priv[GP_WG_KEY_LEN];	/* wiped by gp_overlay_free */
	char pub[GP_WG_KEY_LEN];
	char daemon[64];		/* wireguard-go's path */
	char dev[16], table[32];
	pid_t pid;			/* 0: not running */
	struct ov_link **links;
	int nlinks, cap;
	/* The peers the device has now. */
	struct ov_peer *peers;
	int npeers;
};

int
gp_overlay_mode_parse(const char *s, enum gp_overlay_mode *out)
{
	if (strcmp(s, "off") == 0)
		*out = GP_OVERLAY_OFF;
	else if (strcmp(s, "auto") == 0)
		*out = GP_OVERLAY_AUTO;
	else if (strcmp(s, "always") == 0)
		*out = GP_OVERLAY_ALWAYS;
	else
		return GP_EINVAL;
	return 0;
}

const char *
gp_overlay_mode_name(enum gp_overlay_mode m)
{
	switch (m) {
	case GP_OVERLAY_OFF:
		return "off";
	case GP_OVERLAY_AUTO:
		return "auto";
	case GP_OVERLAY_ALWAYS:
		return "always";
	}
	return "?";
}

static void
ip_text(uint32_t a, char *out, size_t len)
{
	snprintf(out, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255,
	    (a >> 8) & 255, a & 255);
}

/* The first of the usual directories that has an executable name. */
static int
find_program(const char *name, char *out, size_t len)
{
	static const char *const dirs[] = {"/usr/bin", "/usr/sbin",
	    "/usr/local/bin", "/usr/local/sbin", "/bin", "/sbin"};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(dirs); i++) {
		snprintf(out, len, "%s/%s", dirs[i], name);
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

int
gp_overlay_new(struct gp_overlay **out, enum gp_overlay_mode mode,
    int block, int port, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	struct gp_overlay *o;
	char path[64];
	int fd;

	if (mode == GP_OVERLAY_OFF || block < 0) {
		snprintf(err, errlen, "off");
		return GP_EINVAL;
	}
	if (geteuid() != 0) {
		snprintf(err, errlen, "the agent is not root");
		return GP_EPERM;
	}
	if ((o = calloc(1, sizeof(*o))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	o->mode = mode;
	o->block = block;
	o->port = port > 0 ? port : OV_PORT_BASE + block;
	snprintf(o->dev, sizeof(o->dev), OV_DEV_FMT, block);
	snprintf(o->table, sizeof(o->table), OV_TABLE_FMT, block);
	if (find_program("wireguard-go", o->daemon, sizeof(o->daemon)) != 0) {
		snprintf(err, errlen, "no wireguard-go (Debian's "
		    "wireguard-go)");
		goto fail;
	}
	if (find_program("wg", path, sizeof(path)) != 0) {
		snprintf(err, errlen, "no wg (Debian's wireguard-tools)");
		goto fail;
	}
	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "/dev/net/tun: %s", strerror(errno));
		goto fail;
	}
	close(fd);
	/* The port must be free now (it is bound only while gangs run). */
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)o->port);
	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		snprintf(err, errlen, "UDP port %d: %s", o->port,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	close(fd);
	if (gp_wg_keypair(o->priv, o->pub) != 0) {
		snprintf(err, errlen, "cannot make a key pair");
		goto fail;
	}
	gp_info("gang overlay ready mode=%s dev=%s port=%d key=%.8s",
	    gp_overlay_mode_name(mode), o->dev, o->port, o->pub);
	*out = o;
	return 0;
fail:
	free(o);
	return GP_EIO;
}

const char *
gp_overlay_public_key(const struct gp_overlay *o)
{
	return o->pub;
}

int
gp_overlay_port(const struct gp_overlay *o)
{
	return o->port;
}

enum gp_overlay_mode
gp_overlay_mode(const struct gp_overlay *o)
{
	return o->mode;
}

/* ---- wireguard-go ---- */

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int
nft_text(const char *text, char *why, size_t whylen)
{
	char *argv[] = {"nft", "-f", "-", NULL};

	return gp_net_run(argv, text, -1, why, whylen);
}

static void
daemon_stop(struct gp_overlay *o)
{
	char path[96], *argv[] = {"nft", "delete", "table", "inet", o->table,
	    NULL};
	int i, status;

	if (o->pid > 0) {
		kill(o->pid, SIGTERM);
		for (i = 0; i < 200; i++) {
			pid_t r = waitpid(o->pid, &status, WNOHANG);

			if (r == o->pid || (r < 0 && errno != EINTR))
				break;
			if (i == 199) {
				kill(o->pid, SIGKILL);
				while (waitpid(o->pid, &status, 0) < 0 &&
				    errno == EINTR)
					;
				break;
			}
			sleep_ms(10);
		}
		gp_info("gang overlay stopped dev=%s pid=%d", o->dev,
		    (int)o->pid);
		o->pid = 0;
	}
	(void)gp_net_run(argv, NULL, -1, NULL, 0);
	snprintf(path, sizeof(path), OV_SOCK_FMT, o->dev);
	unlink(path);
	snprintf(path, sizeof(path), OV_PID_FMT, o->block);
	unlink(path);
	o->npeers = 0;
}

/*
 * 1 when wireguard-go answers on its control socket: the file appears
 * (bind) before it listens, and `wg` that cannot connect takes the device
 * for a kernel one ("Protocol not supported").
 */
static int
sock_ready(const char *path)
{
	struct sockaddr_un sun;
	int fd, ok;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	gp_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 0;
	ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	close(fd);
	return ok;
}

/*
 * Starts wireguard-go in the foreground (a child of the agent's executor
 * thread, dying with it: PR_SET_PDEATHSIG), waits for its control socket,
 * gives it the key and port, brings the device up and writes the table.
 */
static int
daemon_start(struct gp_overlay *o, char *err, size_t errlen)
{
	char sock[96], pidfile[64], port[16], key[GP_WG_KEY_LEN + 2];
	char why[512], text[2048];
	char *wg[] = {"wg", "set", o->dev, "listen-port", port, "private-key",
	    "/dev/stdin", NULL};
	char *up[] = {"ip", "link", "set", "dev", o->dev, "up", NULL};
	char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	    "LOG_LEVEL=error", "WG_PROCESS_FOREGROUND=1", NULL};
	char *argv[] = {o->daemon, "-f", o->dev, NULL};
	pid_t parent = getpid();
	int64_t t0 = gp_mono_ms();
	int fd, i, ret;

	snprintf(sock, sizeof(sock), OV_SOCK_FMT, o->dev);
	unlink(sock);		/* a stale one (our block is ours) */
	if ((o->pid = fork()) < 0) {
		o->pid = 0;
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return GP_EIO;
	}
	if (o->pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 ||
		    getppid() != parent)
			_exit(126);
		if ((fd = open("/dev/null", O_RDONLY)) >= 0)
			(void)dup2(fd, 0);
		/* stdout and stderr: the agent's log */
		execve(o->daemon, argv, env);
		_exit(127);
	}
	snprintf(pidfile, sizeof(pidfile), OV_PID_FMT, o->block);
	if ((fd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) >= 0) {
		char line[24];
		int len = snprintf(line, sizeof(line), "%d\n", (int)o->pid);

		(void)gp_write_all(fd, line, (size_t)len);
		close(fd);
	}
	for (i = 0; ; i++) {
		int status;

		if (sock_ready(sock) && if_nametoindex(o->dev) > 0)
			break;
		if (waitpid(o->pid, &status, WNOHANG) == o->pid) {
			o->pid = 0;
			snprintf(err, errlen, "wireguard-go %s exited at "
			    "start (status %d)", o->dev, status);
			goto fail;
		}
		if (gp_mono_ms() - t0 > OV_START_MS) {
			snprintf(err, errlen, "wireguard-go %s: no control "
			    "socket in %d ms", o->dev, OV_START_MS);
			goto fail;
		}
		sleep_ms(i < 50 ? 1 : 10);
	}
	snprintf(port, sizeof(port), "%d", o->port);
	snprintf(key, sizeof(key), "%s\n", o->priv);
	ret = gp_net_run(wg, key, -1, why, sizeof(why));
	sodium_memzero(key, sizeof(key));
	if (ret != 0) {
		snprintf(err, errlen, "wg set %s: %.300s", o->dev, why);
		goto fail;
	}
	if (gp_net_run(up, NULL, -1, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "ip link set %s up: %.300s", o->dev,
		    why);
		goto fail;
	}
	/*
	 * Only pairs of one gang's parts cross the device, and nothing of
	 * the host: (remote, local) in links. The main table (netns.c)
	 * still applies its own chains (gang_in, gang_out) after these.
	 * TCP's segments fit the device's MTU (1420) whatever the parts'.
	 */
	snprintf(text, sizeof(text),
	    "table inet %s {\n"
	    "  set links { type ipv4_addr . ipv4_addr; }\n"
	    "  chain forward { type filter hook forward priority -2;\n"
	    "    iifname \"%s\" ip saddr . ip daddr @links accept\n"
	    "    iifname \"%s\" drop\n"
	    "    oifname \"%s\" ip daddr . ip saddr @links tcp flags syn"
	    " tcp option maxseg size set rt mtu\n"
	    "    oifname \"%s\" ip daddr . ip saddr @links accept\n"
	    "    oifname \"%s\" drop\n  }\n"
	    "  chain input { type filter hook input priority -2;\n"
	    "    iifname \"%s\" drop\n  }\n"
	    "  chain output { type filter hook output priority -2;\n"
	    "    oifname \"%s\" drop\n  }\n"
	    "}\n", o->table, o->dev, o->dev, o->dev, o->dev, o->dev, o->dev,
	    o->dev);
	if (nft_text(text, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "overlay table: nft: %.300s", why);
		goto fail;
	}
	gp_info("gang overlay started dev=%s pid=%d port=%d ms=%lld", o->dev,
	    (int)o->pid, o->port, (long long)(gp_mono_ms() - t0));
	return 0;
fail:
	daemon_stop(o);
	return GP_EIO;
}

/* ---- links ---- */

static int
peer_known(const struct gp_overlay *o, const char *key)
{
	int i;

	for (i = 0; i < o->npeers; i++)
		if (strcmp(o->peers[i].key, key) == 0)
			return i;
	return -1;
}

/* 1 when some link other than skip names remote address a. */
static int
remote_used(const struct gp_overlay *o, uint32_t a,
    const struct ov_link *skip)
{
	int i, k;

	for (i = 0; i < o->nlinks; i++)
		for (k = 0; o->links[i] != skip && k < o->links[i]->n; k++)
			if (o->links[i]->remote[k] == a)
				return 1;
	return 0;
}

/* 1 when list ("a/32,b/32") holds address a. */
static int
list_has(const char *list, const char *a)
{
	size_t len = strlen(a);
	const char *p;

	for (p = list; (p = strstr(p, a)) != NULL; p += len)
		if ((p == list || p[-1] == ',') && strncmp(p + len, "/32", 3) ==
		    0)
			return 1;
	return 0;
}

/* 1 when some link names key. */
static int
key_used(const struct gp_overlay *o, const char *key)
{
	int i, k;

	for (i = 0; i < o->nlinks; i++)
		for (k = 0; k < o->links[i]->n; k++)
			if (strcmp(o->links[i]->key[k], key) == 0)
				return 1;
	return 0;
}

/*
 * The allowed IPs of the peer of key: the remote parts' /32s that the
 * links held name with it ("a/32,b/32"). Returns the length (0: none).
 */
static size_t
peer_allowed(const struct gp_overlay *o, const char *key, char *out,
    size_t len)
{
	size_t used = 0;
	int i, m;

	out[0] = '\0';
	for (i = 0; i < o->nlinks; i++)
		for (m = 0; m < o->links[i]->n; m++) {
			char a[20];

			if (strcmp(o->links[i]->key[m], key) != 0)
				continue;
			ip_text(o->links[i]->remote[m], a, sizeof(a));
			if (list_has(out, a) || used + strlen(a) + 5 >= len)
				continue;
			used += (size_t)snprintf(out + used, len - used,
			    "%s%s/32", used ? "," : "", a);
		}
	return used;
}

/*
 * Rewrites the device's peers whose keys link l names: each one's
 * allowed IPs become what every link held now says of it (a peer no
 * link names any more is removed). One `wg set`.
 */
static int
peers_update(struct gp_overlay *o, const struct ov_link *l, char *err,
    size_t errlen)
{
	char *argv[3 + OV_PARTS * 8 + 1];
	char (*ips)[OV_PARTS * 20];
	char (*done)[GP_WG_KEY_LEN];
	int argc = 0, ndone = 0, k, d, ret = 0;
	char why[512];

	ips = calloc(OV_PARTS, sizeof(*ips));
	done = calloc(OV_PARTS, sizeof(*done));
	if (ips == NULL || done == NULL) {
		free(ips);
		free(done);
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	argv[argc++] = "wg";
	argv[argc++] = "set";
	argv[argc++] = o->dev;
	for (k = 0; k < l->n; k++) {
		const char *key = l->key[k];
		size_t used = 0;

		for (d = 0; d < ndone && strcmp(done[d], key) != 0; d++)
			;
		if (d < ndone)
			continue;
		gp_strlcpy(done[ndone], key, sizeof(done[0]));
		used = peer_allowed(o, key, ips[ndone], sizeof(ips[0]));
		argv[argc++] = "peer";
		argv[argc++] = done[ndone];
		if (used == 0)
			argv[argc++] = "remove";
		else {
			if (peer_known(o, key) < 0) {
				/* New: where to find it (then it roams). */
				argv[argc++] = "endpoint";
				argv[argc++] = (char *)l->endpoint[k];
			}
			argv[argc++] = "persistent-keepalive";
			argv[argc++] = OV_KEEPALIVE;
			argv[argc++] = "allowed-ips";
			argv[argc++] = ips[ndone];
		}
		ndone++;
	}
	argv[argc] = NULL;
	if (ndone > 0 && gp_net_run(argv, NULL, -1, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "wg set %s peers: %.300s", o->dev, why);
		ret = GP_EIO;
		goto out;
	}
	/* What the device has now. */
	for (d = 0; d < ndone; d++) {
		int at = peer_known(o, done[d]), used = key_used(o, done[d]);

		if (used && at < 0) {
			void *p = realloc(o->peers, (size_t)(o->npeers + 1) *
			    sizeof(*o->peers));

			if (p == NULL)
				continue;
			o->peers = p;
			at = o->npeers++;
			memset(&o->peers[at], 0, sizeof(o->peers[at]));
			gp_strlcpy(o->peers[at].key, done[d],
			    sizeof(o->peers[at].key));
			for (k = 0; k < l->n; k++)
				if (strcmp(l->key[k], done[d]) == 0)
					gp_strlcpy(o->peers[at].endpoint,
					    l->endpoint[k],
					    sizeof(o->peers[at].endpoint));
			o->peers[at].added = gp_mono_ms();
		} else if (!used && at >= 0) {
			memmove(&o->peers[at], &o->peers[at + 1],
			    (size_t)(o->npeers - at - 1) * sizeof(*o->peers));
			o->npeers--;
		}
	}
out:
	free(ips);
	free(done);
	return ret;
}

/*
 * The routes and pairs of link l: added (add) or removed. A route stays
 * while another link names its address.
 */
static int
paths_update(struct gp_overlay *o, const struct ov_link *l, int add,
    char *err, size_t errlen)
{
	char *ip[] = {"ip", "-force", "-batch", "-", NULL};
	struct gp_buf routes, pairs;
	char a[20], me[20], why[512];
	int k, ret = 0;

	memset(&routes, 0, sizeof(routes));
	memset(&pairs, 0, sizeof(pairs));
	ip_text(l->local, me, sizeof(me));
	for (k = 0; k < l->n; k++) {
		ip_text(l->remote[k], a, sizeof(a));
		if (add || !remote_used(o, l->remote[k], l))
			gp_buf_printf(&routes, "route %s %s/32 dev %s\n",
			    add ? "replace" : "del", a, o->dev);
		gp_buf_printf(&pairs, "%s%s . %s", pairs.data ? ", " : "", a,
		    me);
	}
	if (pairs.data == NULL) {
		gp_buf_free(&routes);
		return 0;
	}
	{
		char *text = NULL;
		struct gp_buf t;

		memset(&t, 0, sizeof(t));
		gp_buf_printf(&t, "%s element inet %s links { %s }\n",
		    add ? "add" : "delete", o->table, pairs.data);
		text = t.data;
		if (text == NULL || nft_text(text, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "overlay pairs: nft: %.300s",
			    text ? why : "out of memory");
			ret = GP_EIO;
		}
		gp_buf_free(&t);
	}
	if (routes.data != NULL && (ret == 0 || !add) &&
	    gp_net_run(ip, routes.data, -1, why, sizeof(why)) != 0 && add) {
		snprintf(err, errlen, "overlay routes: %.300s", why);
		ret = GP_EIO;
	}
	gp_buf_free(&routes);
	gp_buf_free(&pairs);
	return ret;
}

int
gp_overlay_link(struct gp_overlay *o, int64_t job, int part, int parts,
    const struct gp_overlay_peer *peers, const uint32_t *addrs,
    uint32_t local_addr, char *err, size_t errlen)
{
	struct ov_link *l;
	int k, ret, started = 0;
	int64_t t0 = gp_mono_ms();

	if (parts > OV_PARTS) {
		snprintf(err, errlen, "more than %d parts", OV_PARTS);
		return GP_EINVAL;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	l->job = job;
	l->part = part;
	l->local = local_addr;
	for (k = 0; k < parts; k++) {
		/* Ours (this agent's key) or outside the overlay. */
		if (k == part || peers[k].key[0] == '\0' ||
		    strcmp(peers[k].key, o->pub) == 0)
			continue;
		l->remote[l->n] = addrs[k];
		gp_strlcpy(l->key[l->n], peers[k].key, sizeof(l->key[0]));
		gp_strlcpy(l->endpoint[l->n], peers[k].endpoint,
		    sizeof(l->endpoint[0]));
		l->n++;
	}
	if (l->n == 0) {
		free(l);
		return 0;
	}
	if (o->nlinks == o->cap) {
		int cap = o->cap ? o->cap * 2 : 8;
		void *p = realloc(o->links, (size_t)cap * sizeof(*o->links));

		if (p == NULL) {
			free(l);
			snprintf(err, errlen, "out of memory");
			return GP_ENOMEM;
		}
		o->links = p;
		o->cap = cap;
	}
	if (o->pid == 0) {
		if ((ret = daemon_start(o, err, errlen)) != 0) {
			free(l);
			return ret;
		}
		started = 1;
	}
	o->links[o->nlinks++] = l;
	if ((ret = paths_update(o, l, 1, err, errlen)) != 0 ||
	    (ret = peers_update(o, l, err, errlen)) != 0) {
		char again[256];

		/* Out of the list, then undone as far as it went. */
		o->nlinks--;
		(void)paths_update(o, l, 0, again, sizeof(again));
		(void)peers_update(o, l, again, sizeof(again));
		free(l);
		if (o->nlinks == 0)
			daemon_stop(o);
		return ret;
	}
	gp_info("gang part job=%lld part=%d: %d part(s) through the overlay "
	    "dev=%s ms=%lld%s", (long long)job, part, l->n, o->dev,
	    (long long)(gp_mono_ms() - t0), started ? " (started)" : "");
	return 0;
}

void
gp_overlay_unlink(struct gp_overlay *o, int64_t job, int part)
{
	char err[512];
	int i;

	if (o == NULL)
		return;
	for (i = 0; i < o->nlinks; i++) {
		struct ov_link *l = o->links[i];

		if (l->job != job || l->part != part)
			continue;
		/* Out of the list first: what it alone named goes. */
		o->links[i] = o->links[--o->nlinks];
		if (o->pid > 0 &&
		    (paths_update(o, l, 0, err, sizeof(err)) != 0 ||
		    peers_update(o, l, err, sizeof(err)) != 0))
			gp_warn("gang part job=%lld part=%d: overlay: %s",
			    (long long)job, part, err);
		free(l);
		break;
	}
	if (o->nlinks == 0 && o->pid > 0)
		daemon_stop(o);
}

/*
 * Each peer's latest handshake (`wg show DEV latest-handshakes`: "KEY\tT"
 * lines, T 0 for none) into the peers' nudges: -1 once seen.
 */
static void
handshakes_read(struct gp_overlay *o)
{
	char *argv[] = {"wg", "show", o->dev, "latest-handshakes", NULL};
	char out[8192], *line, *save = NULL;
	int i;

	if (gp_net_run(argv, NULL, -1, out, sizeof(out)) != 0)
		return;
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char key[GP_WG_KEY_LEN];
		long long t;

		if (sscanf(line, "%44s %lld", key, &t) != 2 || t <= 0)
			continue;
		if ((i = peer_known(o, key)) >= 0)
			o->peers[i].nudges = -1;
	}
}

/*
 * The first handshake can stall for WireGuard's 5 s: when both agents
 * configure each other within a round trip, both initiations cross, each
 * side answers the other's and waits, as the responder, for data the
 * other (a responder too) never sends until its retry 5 s later. So the
 * agent of the larger public key (one side only: two nudging sides could
 * cross again) re-makes a peer whose first handshake it has not seen
 * OV_NUDGE_MS after configuring it (a new peer sends a new initiation at
 * once), up to OV_NUDGES times.
 */
int64_t
gp_overlay_tick(struct gp_overlay *o, int64_t now)
{
	int64_t next = -1, due;
	int i, read = 0;

	if (o == NULL || o->pid == 0)
		return -1;
	for (i = 0; i < o->npeers; i++) {
		struct ov_peer *p = &o->peers[i];
		char ips[OV_PARTS * 20], why[256];
		char *rm[] = {"wg", "set", o->dev, "peer", p->key, "remove",
		    NULL};
		char *add[] = {"wg", "set", o->dev, "peer", p->key, "endpoint",
		    p->endpoint, "persistent-keepalive", OV_KEEPALIVE,
		    "allowed-ips", ips, NULL};

		if (p->nudges < 0 || p->nudges >= OV_NUDGES ||
		    strcmp(o->pub, p->key) < 0)
			continue;
		due = p->added + (int64_t)OV_NUDGE_MS * (p->nudges + 1);
		if (due > now) {
			if (next < 0 || due - now < next)
				next = due - now;
			continue;
		}
		if (!read++)
			handshakes_read(o);
		if (p->nudges < 0)
			continue;
		p->nudges++;
		if (peer_allowed(o, p->key, ips, sizeof(ips)) == 0 ||
		    gp_net_run(rm, NULL, -1, why, sizeof(why)) != 0 ||
		    gp_net_run(add, NULL, -1, why, sizeof(why)) != 0) {
			gp_warn("gang overlay: cannot re-make peer key=%.8s: "
			    "%s", p->key, why);
			continue;
		}
		gp_info("gang overlay: no handshake with peer key=%.8s after "
		    "%lld ms: peer re-made (nudge %d)", p->key,
		    (long long)(now - p->added), p->nudges);
		if (p->nudges < OV_NUDGES) {
			due = p->added + (int64_t)OV_NUDGE_MS * (p->nudges + 1);
			if (next < 0 || due - now < next)
				next = due > now ? due - now : 0;
		}
	}
	return next;
}

void
gp_overlay_free(struct gp_overlay *o)
{
	if (o == NULL)
		return;
	while (o->nlinks > 0)
		free(o->links[--o->nlinks]);
	if (o->pid > 0)
		daemon_stop(o);
	free(o->links);
	free(o->peers);
	sodium_memzero(o->priv, sizeof(o->priv));
	free(o);
}

void
gp_overlay_sweep(int b, const char *tables)
{
	char path[96], dev[16], table[32], needle[64], *text = NULL;
	size_t n;
	long pid;

	snprintf(dev, sizeof(dev), OV_DEV_FMT, b);
	snprintf(table, sizeof(table), OV_TABLE_FMT, b);
	snprintf(path, sizeof(path), OV_PID_FMT, b);
	if (gp_read_file(path, 64, &text, &n) == 0 &&
	    (pid = strtol(text, NULL, 10)) > 1) {
		char proc[64], *cmd = NULL;
		size_t len;

		/* Its command line ("wireguard-go\0-f\0gpwXX\0"), not a
		 * process that took its pid since. */
		snprintf(proc, sizeof(proc), "/proc/%ld/cmdline", pid);
		if (gp_read_file(proc, 4096, &cmd, &len) == 0 && len > 0 &&
		    strstr(cmd, "wireguard-go") != NULL &&
		    memmem(cmd, len, dev, strlen(dev) + 1) != NULL &&
		    kill((pid_t)pid, SIGKILL) == 0)
			gp_info("job networks: stopped a stale wireguard-go "
			    "block=%d pid=%ld", b, pid);
		free(cmd);
	}
	free(text);
	unlink(path);
	snprintf(path, sizeof(path), OV_SOCK_FMT, dev);
	unlink(path);
	if (if_nametoindex(dev) > 0) {
		char *argv[] = {"ip", "link", "del", dev, NULL};

		if (gp_net_run(argv, NULL, -1, NULL, 0) == 0)
			gp_info("job networks: swept a stale overlay device "
			    "dev=%s", dev);
	}
	snprintf(needle, sizeof(needle), "table inet %s\n", table);
	if (tables != NULL && strstr(tables, needle) != NULL) {
		char *argv[] = {"nft", "delete", "table", "inet", table, NULL};

		if (gp_net_run(argv, NULL, -1, NULL, 0) == 0)
			gp_info("job networks: swept a stale overlay table "
			    "table=%s", table);
	}
}
