/*
 * overlay.c: the agent's wireguard-go devices for gangs across NATs
 * (overlay.h, docs/agent.md "Gangs behind NATs").
 *
 * One device per local gang part, with that part's own key pair (the
 * coordinator's, made for the gang) and port: a wireguard-go, a TUN
 * device gpw<block><seq>, a peer per remote part (allowed IPs its /32), a
 * route per remote part and a table gpupool_ov_<block>_<seq> of its own.
 * The part's end stops its wireguard-go, which takes the device, the key
 * and the routes with it, and deletes the table.
 *
 * wireguard-go takes tens of ms to start (seconds on a loaded machine),
 * so a helper thread keeps one started ahead, keyless and down (the
 * spare): a part takes it, and the helper starts the next one.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <dirent.h>
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
#include "coord_urls.h"
#include "gp.h"
#include "log.h"
#include "util.h"

#define OV_RUN_DIR "/run/gpupool-net"
#define OV_PID_FMT OV_RUN_DIR "/%02x.%02x.wg.pid"
#define OV_SOCK_FMT "/var/run/wireguard/%s.sock"
#define OV_DEV_FMT "gpw%02x%02x"
#define OV_TABLE_FMT "gpupool_ov_%02x_%02x"
#define OV_PORT_BASE 51820
/* Ports per agent: one per overlay gang part it runs at once. */
#define OV_PORTS 16
/* Keeps the NAT mappings open (their UDP timeouts are 30 s and more). */
#define OV_KEEPALIVE "25"
/* wireguard-go's socket, at most (it took 2.5 s at a load of 23 here) */
#define OV_START_MS 15000
#define OV_PARTS 64		/* netns.c's gangs: parts <= 64 */
#define OV_SEQS 256		/* devices of one agent: gpw<block>00..ff */
/* A first handshake not seen after this long is nudged (gp_overlay_tick). */
#define OV_NUDGE_MS 1500
#define OV_NUDGES 3
/*
 * A peer with no handshake this long after it was configured goes
 * through the coordinator's relay (overlay_relay.h): hole punching has
 * had two tries (the first initiation and a nudge) by then, and a NAT
 * that changes ports per destination defeats any number of them.
 */
#define OV_RELAY_MS 3500
/* A relaying device's MTU: wireguard-go's 1420 less the relay's header. */
#define OV_RELAY_MTU "1372"

/*
 * A remote part: its peer on the device, and whether its first handshake
 * is still to be seen (a nudge may be due: gp_overlay_tick).
 */
struct ov_peer {
	uint32_t addr;		/* its gang address */
	char key[GP_WG_KEY_LEN];
	char endpoint[264];
	int64_t added;		/* gp_mono_ms() when configured */
	int nudges;		/* re-made so far; -1: handshake seen */
	int part;		/* its part in the gang */
	int relayed;		/* its endpoint is the relay's socket */
};

/* A wireguard-go and its device: a local part's, or the spare. */
struct ov_dev {
	int seq;		/* names the device, table, pid file */
	char dev[16], table[40];
	pid_t pid;		/* 0: not running */
};

/* A local gang part's device. */
struct ov_part {
	int64_t job;
	int part;
	struct ov_dev d;
	int port;
	char pub[GP_WG_KEY_LEN];	/* its own (nudges: one side only) */
	int n;
	struct ov_peer peers[OV_PARTS];
	struct gp_overlay_relay relay;	/* port 0: none */
	struct gp_ovrelay *via;		/* its relay flow, once needed */
};

enum spare_state { SPARE_WANTED, SPARE_STARTING, SPARE_READY, SPARE_FAILED };

struct gp_overlay {
	enum gp_overlay_mode mode;
	int block, port, ports;
	char daemon[64];		/* wireguard-go's path */
	/* The local parts' devices: executor thread only. */
	struct ov_part **parts;
	int nparts, cap;
	/* The spare and its helper thread: under lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t helper;
	int helper_started, quit;
	enum spare_state spare_state;
	struct ov_dev spare;
	char spare_err[256];
	int next_seq;
	/* The coordinator (its relay's host): the agent's URLs. */
	const char *urls;
	const atomic_int *coord_at;
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
	int fd, k;

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
	o->ports = OV_PORTS;
	o->port = port > 0 ? port : OV_PORT_BASE + OV_PORTS * block;
	if (o->port + o->ports - 1 > 65535) {
		snprintf(err, errlen, "UDP ports %d to %d: past 65535",
		    o->port, o->port + o->ports - 1);
		goto fail;
	}
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
	/* The ports must be free now (each is bound while a part runs). */
	for (k = 0; k < o->ports; k++) {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t)(o->port + k));
		if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
		    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
			snprintf(err, errlen, "UDP port %d: %s", o->port + k,
			    strerror(errno));
			if (fd >= 0)
				close(fd);
			goto fail;
		}
		close(fd);
	}
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	gp_info("gang overlay ready mode=%s ports=%d-%d",
	    gp_overlay_mode_name(mode), o->port, o->port + o->ports - 1);
	*out = o;
	return 0;
fail:
	free(o);
	return GP_EIO;
}

void
gp_overlay_set_coordinator(struct gp_overlay *o, const char *urls,
    const atomic_int *at)
{
	o->urls = urls;
	o->coord_at = at;
}

/*
 * The host of the coordinator URL the agent reaches now (the relay's):
 * "http://HOST:PORT/..." or "https://[V6]:PORT". 0, or -1.
 */
static int
coordinator_host(const struct gp_overlay *o, char *out, size_t len)
{
	struct gp_coord_urls u;
	const char *s, *e;
	char why[256];
	int at;

	if (o->urls == NULL || gp_coord_urls_parse(o->urls, &u, why,
	    sizeof(why)) != 0)
		return -1;
	at = o->coord_at != NULL ? atomic_load(o->coord_at) : 0;
	if (at < 0 || at >= u.n)
		at = 0;
	s = strstr(u.url[at], "://");
	s = s != NULL ? s + 3 : u.url[at];
	if (*s == '[') {
		s++;
		e = strchr(s, ']');
	} else
		e = s + strcspn(s, ":/");
	if (e == NULL || e == s || (size_t)(e - s) >= len)
		return -1;
	memcpy(out, s, (size_t)(e - s));
	out[e - s] = '\0';
	return 0;
}

int
gp_overlay_port(const struct gp_overlay *o)
{
	return o->port;
}

int
gp_overlay_ports(const struct gp_overlay *o)
{
	return o->ports;
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

/* Stops d's wireguard-go (its device, key and routes go with it). */
static void
daemon_stop(struct gp_overlay *o, struct ov_dev *d)
{
	char path[96], *argv[] = {"nft", "delete", "table", "inet", d->table,
	    NULL};
	int i, status;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		for (i = 0; i < 200; i++) {
			pid_t r = waitpid(d->pid, &status, WNOHANG);

			if (r == d->pid || (r < 0 && errno != EINTR))
				break;
			if (i == 199) {
				kill(d->pid, SIGKILL);
				while (waitpid(d->pid, &status, 0) < 0 &&
				    errno == EINTR)
					;
				break;
			}
			sleep_ms(10);
		}
		gp_info("gang overlay stopped dev=%s pid=%d", d->dev,
		    (int)d->pid);
		d->pid = 0;
	}
	if (d->table[0] != '\0')
		(void)gp_net_run(argv, NULL, -1, NULL, 0);
	snprintf(path, sizeof(path), OV_SOCK_FMT, d->dev);
	unlink(path);
	snprintf(path, sizeof(path), OV_PID_FMT, o->block, d->seq);
	unlink(path);
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
 * Starts a wireguard-go in the foreground for device seq (a child of the
 * calling thread, dying with it: PR_SET_PDEATHSIG) and waits for its
 * control socket. Keyless and down: gp_overlay_link configures it. The
 * helper thread's (or the executor's when there is no helper).
 */
static int
daemon_start(struct gp_overlay *o, struct ov_dev *d, char *err,
    size_t errlen)
{
	char sock[96], pidfile[64];
	char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	    "LOG_LEVEL=error", "WG_PROCESS_FOREGROUND=1", NULL};
	char *argv[] = {o->daemon, "-f", d->dev, NULL};
	pid_t parent = getpid();
	int64_t t0 = gp_mono_ms();
	int fd, i;

	snprintf(sock, sizeof(sock), OV_SOCK_FMT, d->dev);
	unlink(sock);		/* a stale one (our block is ours) */
	if ((d->pid = fork()) < 0) {
		d->pid = 0;
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return GP_EIO;
	}
	if (d->pid == 0) {
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
	snprintf(pidfile, sizeof(pidfile), OV_PID_FMT, o->block, d->seq);
	if ((fd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) >= 0) {
		char line[24];
		int len = snprintf(line, sizeof(line), "%d\n", (int)d->pid);

		(void)gp_write_all(fd, line, (size_t)len);
		close(fd);
	}
	for (i = 0; ; i++) {
		int status;

		if (sock_ready(sock) && if_nametoindex(d->dev) > 0)
			break;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = 0;
			snprintf(err, errlen, "wireguard-go %s exited at "
			    "start (status %d)", d->dev, status);
			goto fail;
		}
		if (gp_mono_ms() - t0 > OV_START_MS) {
			snprintf(err, errlen, "wireguard-go %s: no control "
			    "socket in %d ms", d->dev, OV_START_MS);
			goto fail;
		}
		sleep_ms(i < 50 ? 1 : 10);
	}
	gp_info("gang overlay started dev=%s pid=%d ms=%lld", d->dev,
	    (int)d->pid, (long long)(gp_mono_ms() - t0));
	return 0;
fail:
	daemon_stop(o, d);
	return GP_EIO;
}

/* The next free device name (under lock): one no device has now. */
static void
dev_name(struct gp_overlay *o, struct ov_dev *d)
{
	int i;

	for (i = 0; i < OV_SEQS; i++) {
		d->seq = o->next_seq;
		o->next_seq = (o->next_seq + 1) % OV_SEQS;
		snprintf(d->dev, sizeof(d->dev), OV_DEV_FMT, o->block, d->seq);
		if (if_nametoindex(d->dev) == 0)
			break;
	}
	d->table[0] = '\0';
	d->pid = 0;
}

/*
 * The helper thread: keeps a spare wireguard-go started (SPARE_READY)
 * whenever one is wanted, so that no part's start waits for one.
 */
static void *
helper_main(void *arg)
{
	struct gp_overlay *o = arg;
	struct ov_dev d;
	char err[256];
	int ret;

	pthread_mutex_lock(&o->lock);
	while (!o->quit) {
		if (o->spare_state != SPARE_WANTED) {
			pthread_cond_wait(&o->cond, &o->lock);
			continue;
		}
		dev_name(o, &d);
		o->spare_state = SPARE_STARTING;
		pthread_mutex_unlock(&o->lock);
		ret = daemon_start(o, &d, err, sizeof(err));
		pthread_mutex_lock(&o->lock);
		if (ret == 0) {
			o->spare = d;
			o->spare_state = SPARE_READY;
		} else {
			gp_warn("gang overlay: no spare wireguard-go: %s", err);
			gp_strlcpy(o->spare_err, err, sizeof(o->spare_err));
			o->spare_state = SPARE_FAILED;
		}
		pthread_cond_broadcast(&o->cond);
	}
	/* The spare dies with this thread (PR_SET_PDEATHSIG): stop it. */
	if (o->spare_state == SPARE_READY) {
		d = o->spare;
		o->spare_state = SPARE_FAILED;
		pthread_mutex_unlock(&o->lock);
		daemon_stop(o, &d);
		return NULL;
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int
gp_overlay_start(struct gp_overlay *o, char *err, size_t errlen)
{
	int ret;

	o->spare_state = SPARE_WANTED;
	if ((ret = pthread_create(&o->helper, NULL, helper_main, o)) != 0) {
		snprintf(err, errlen, "helper thread: %s", strerror(ret));
		return GP_EIO;
	}
	o->helper_started = 1;
	return 0;
}

/*
 * Takes the spare wireguard-go into d and asks the helper for the next.
 * It is there unless parts came faster than wireguard-go starts: then
 * this waits for it (up to OV_START_MS). 0, or GP_EIO with err set.
 */
static int
spare_take(struct gp_overlay *o, struct ov_dev *d, int64_t *waited,
    char *err, size_t errlen)
{
	int64_t t0 = gp_mono_ms();
	int ret = 0;

	pthread_mutex_lock(&o->lock);
	if (o->spare_state == SPARE_FAILED)
		o->spare_state = SPARE_WANTED;	/* try again */
	pthread_cond_broadcast(&o->cond);
	while (o->spare_state != SPARE_READY &&
	    o->spare_state != SPARE_FAILED &&
	    gp_mono_ms() - t0 < OV_START_MS + 1000) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&o->cond, &o->lock, &ts);
	}
	if (o->spare_state == SPARE_READY) {
		*d = o->spare;
		o->spare_state = SPARE_WANTED;
		pthread_cond_broadcast(&o->cond);
	} else {
		snprintf(err, errlen, "no wireguard-go ready: %s",
		    o->spare_err[0] != '\0' ? o->spare_err : "timed out");
		ret = GP_EIO;
	}
	pthread_mutex_unlock(&o->lock);
	*waited = gp_mono_ms() - t0;
	return ret;
}

/* ---- a part's device ---- */

/* One peer's `wg set` words: peer KEY endpoint E keepalive allowed-ips. */
static int
peer_words(char **argv, int argc, struct ov_peer *p, char *ips)
{
	ip_text(p->addr, ips, 20);
	strcat(ips, "/32");
	argv[argc++] = "peer";
	argv[argc++] = p->key;
	argv[argc++] = "endpoint";
	argv[argc++] = p->endpoint;
	argv[argc++] = "persistent-keepalive";
	argv[argc++] = OV_KEEPALIVE;
	argv[argc++] = "allowed-ips";
	argv[argc++] = ips;
	return argc;
}

/*
 * Configures device pt: its key (on a pipe to `wg`, never a file), port
 * and peers with one `wg set`, up, its table (only pairs of this part and
 * its remote parts cross it, and nothing of the host) and its routes.
 */
static int
part_configure(struct gp_overlay *o, struct ov_part *pt, uint32_t local,
    const char *priv, char *err, size_t errlen)
{
	char *argv[7 + OV_PARTS * 8 + 1];
	char (*ips)[24];
	char *up[] = {"ip", "link", "set", "dev", pt->d.dev, "up", NULL};
	char *ip[] = {"ip", "-force", "-batch", "-", NULL};
	char port[16], key[GP_WG_KEY_LEN + 2], why[512], a[20], me[20];
	struct gp_buf t, routes;
	int argc = 0, k, ret = GP_EIO;

	memset(&t, 0, sizeof(t));
	memset(&routes, 0, sizeof(routes));
	if ((ips = calloc(OV_PARTS, sizeof(*ips))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	snprintf(port, sizeof(port), "%d", pt->port);
	argv[argc++] = "wg";
	argv[argc++] = "set";
	argv[argc++] = pt->d.dev;
	argv[argc++] = "listen-port";
	argv[argc++] = port;
	argv[argc++] = "private-key";
	argv[argc++] = "/dev/stdin";
	for (k = 0; k < pt->n; k++) {
		argc = peer_words(argv, argc, &pt->peers[k], ips[k]);
		pt->peers[k].added = gp_mono_ms();
	}
	argv[argc] = NULL;
	snprintf(key, sizeof(key), "%s\n", priv);
	ret = gp_net_run(argv, key, -1, why, sizeof(why));
	sodium_memzero(key, sizeof(key));
	if (ret != 0) {
		snprintf(err, errlen, "wg set %s: %.300s", pt->d.dev, why);
		ret = GP_EIO;
		goto out;
	}
	ret = GP_EIO;
	if (gp_net_run(up, NULL, -1, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "ip link set %s up: %.300s", pt->d.dev,
		    why);
		goto out;
	}
	snprintf(pt->d.table, sizeof(pt->d.table), OV_TABLE_FMT, o->block,
	    pt->d.seq);
	ip_text(local, me, sizeof(me));
	/*
	 * Only pairs of this part and its gang's remote parts cross the
	 * device, and nothing of the host. The main table (netns.c) still
	 * applies its own chains (gang_in, gang_out) after these. TCP's
	 * segments fit the device's MTU (1420) whatever the parts'.
	 */
	gp_buf_printf(&t, "table inet %s {\n"
	    "  set links { type ipv4_addr . ipv4_addr; elements = { ",
	    pt->d.table);
	for (k = 0; k < pt->n; k++) {
		ip_text(pt->peers[k].addr, a, sizeof(a));
		gp_buf_printf(&t, "%s%s . %s", k ? ", " : "", a, me);
		gp_buf_printf(&routes, "route replace %s/32 dev %s\n", a,
		    pt->d.dev);
	}
	gp_buf_printf(&t, " }; }\n"
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
	    "}\n", pt->d.dev, pt->d.dev, pt->d.dev, pt->d.dev, pt->d.dev,
	    pt->d.dev, pt->d.dev);
	if (t.data == NULL || routes.data == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (nft_text(t.data, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "overlay table: nft: %.300s", why);
		goto out;
	}
	if (gp_net_run(ip, routes.data, -1, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "overlay routes: %.300s", why);
		goto out;
	}
	ret = 0;
out:
	gp_buf_free(&t);
	gp_buf_free(&routes);
	free(ips);
	return ret;
}

int
gp_overlay_link(struct gp_overlay *o, int64_t job, int part, int parts,
    const struct gp_overlay_peer *peers, const char *priv,
    const uint32_t *addrs, uint32_t local_addr,
    const struct gp_overlay_relay *relay, char *err, size_t errlen)
{
	struct ov_part *pt;
	const char *colon;
	int64_t t0 = gp_mono_ms(), waited = 0;
	long port;
	int k, ret;

	if (parts > OV_PARTS) {
		snprintf(err, errlen, "more than %d parts", OV_PARTS);
		return GP_EINVAL;
	}
	if (priv == NULL || !gp_wg_key_valid(priv)) {
		snprintf(err, errlen, "no private key for this part");
		return GP_EINVAL;
	}
	/* Its port: its own endpoint's, one of this agent's. */
	colon = strrchr(peers[part].endpoint, ':');
	port = colon != NULL ? strtol(colon + 1, NULL, 10) : 0;
	if (port < o->port || port >= o->port + o->ports) {
		snprintf(err, errlen, "port %ld is not one of this agent's "
		    "(%d to %d)", port, o->port, o->port + o->ports - 1);
		return GP_EINVAL;
	}
	if ((pt = calloc(1, sizeof(*pt))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	pt->job = job;
	pt->part = part;
	pt->port = (int)port;
	if (relay != NULL)
		pt->relay = *relay;
	gp_strlcpy(pt->pub, peers[part].key, sizeof(pt->pub));
	for (k = 0; k < parts; k++) {
		struct ov_peer *p = &pt->peers[pt->n];

		/* Ours, on this machine, or outside the overlay. */
		if (k == part || peers[k].key[0] == '\0')
			continue;
		p->addr = addrs[k];
		p->part = k;
		gp_strlcpy(p->key, peers[k].key, sizeof(p->key));
		gp_strlcpy(p->endpoint, peers[k].endpoint, sizeof(p->endpoint));
		pt->n++;
	}
	if (pt->n == 0) {
		sodium_memzero(pt, sizeof(*pt));
		free(pt);
		return 0;
	}
	if (o->nparts == o->cap) {
		int cap = o->cap ? o->cap * 2 : 8;
		void *p = realloc(o->parts, (size_t)cap * sizeof(*o->parts));

		if (p == NULL) {
			sodium_memzero(pt, sizeof(*pt));
			free(pt);
			snprintf(err, errlen, "out of memory");
			return GP_ENOMEM;
		}
		o->parts = p;
		o->cap = cap;
	}
	if (o->helper_started)
		ret = spare_take(o, &pt->d, &waited, err, errlen);
	else {
		pthread_mutex_lock(&o->lock);
		dev_name(o, &pt->d);
		pthread_mutex_unlock(&o->lock);
		ret = daemon_start(o, &pt->d, err, errlen);
	}
	if (ret != 0) {
		sodium_memzero(pt, sizeof(*pt));
		free(pt);
		return ret;
	}
	if ((ret = part_configure(o, pt, local_addr, priv, err, errlen)) !=
	    0) {
		daemon_stop(o, &pt->d);
		sodium_memzero(pt, sizeof(*pt));
		free(pt);
		return ret;
	}
	o->parts[o->nparts++] = pt;
	gp_info("gang part job=%lld part=%d: %d part(s) through the overlay "
	    "dev=%s port=%d ms=%lld waited_ms=%lld", (long long)job, part,
	    pt->n, pt->d.dev, pt->port, (long long)(gp_mono_ms() - t0),
	    (long long)waited);
	return 0;
}

/* Frees pt: its relay flow (said), its relay key. */
static void
part_free(struct ov_part *pt)
{
	if (pt->via != NULL) {
		uint64_t out, in;

		gp_ovrelay_counts(pt->via, &out, &in);
		gp_info("gang relay: job=%lld part=%d: flow closed "
		    "datagrams_out=%llu datagrams_in=%llu", (long long)pt->job,
		    pt->part, (unsigned long long)out, (unsigned long long)in);
		gp_ovrelay_free(pt->via);
	}
	sodium_memzero(pt, sizeof(*pt));
	free(pt);
}

void
gp_overlay_unlink(struct gp_overlay *o, int64_t job, int part)
{
	int i;

	if (o == NULL)
		return;
	for (i = 0; i < o->nparts; i++) {
		struct ov_part *pt = o->parts[i];

		if (pt->job != job || pt->part != part)
			continue;
		o->parts[i] = o->parts[--o->nparts];
		/* Its key lives in wireguard-go alone: gone with it. */
		daemon_stop(o, &pt->d);
		part_free(pt);
		break;
	}
}

/*
 * Each peer's latest handshake (`wg show DEV latest-handshakes`: "KEY\tT"
 * lines, T 0 for none) into the peers' nudges: -1 once seen.
 */
static void
handshakes_read(struct ov_part *pt)
{
	char *argv[] = {"wg", "show", pt->d.dev, "latest-handshakes", NULL};
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
		for (i = 0; i < pt->n; i++)
			if (strcmp(pt->peers[i].key, key) == 0)
				pt->peers[i].nudges = -1;
	}
}

/* Removes and adds p again (a new peer sends an initiation at once). */
static int
peer_remake(struct ov_part *pt, struct ov_peer *p)
{
	char ips[24], why[256];
	char *rm[] = {"wg", "set", pt->d.dev, "peer", p->key, "remove", NULL};
	char *add[12];

	add[0] = "wg";
	add[1] = "set";
	add[2] = pt->d.dev;
	add[peer_words(add, 3, p, ips)] = NULL;
	if (gp_net_run(rm, NULL, -1, why, sizeof(why)) != 0 ||
	    gp_net_run(add, NULL, -1, why, sizeof(why)) != 0) {
		gp_warn("gang overlay: cannot re-make peer key=%.8s: %s",
		    p->key, why);
		return -1;
	}
	return 0;
}

/*
 * Points p at the relay: opens pt's flow (the first time), then p's
 * endpoint is the flow's local socket for p's part. 0, or -1 (said; the
 * part then goes on without the relay).
 */
static int
peer_relay(struct gp_overlay *o, struct ov_part *pt, struct ov_peer *p,
    int64_t now)
{
	char host[256], err[256];
	int remote[OV_PARTS], k;

	if (pt->via == NULL) {
		for (k = 0; k < pt->n; k++)
			remote[k] = pt->peers[k].part;
		if (coordinator_host(o, host, sizeof(host)) != 0)
			snprintf(err, sizeof(err), "no coordinator host");
		else if (gp_ovrelay_new(&pt->via, host, &pt->relay, pt->job,
		    pt->part, remote, pt->n, pt->port, err,
		    sizeof(err)) == 0)
			err[0] = '\0';
		if (pt->via == NULL) {
			gp_warn("gang relay: job=%lld part=%d: %s: no relay",
			    (long long)pt->job, pt->part, err);
			sodium_memzero(&pt->relay, sizeof(pt->relay));
			return -1;
		}
		/*
		 * The relay's header must fit beside WireGuard's datagram in
		 * a 1500-byte path, or every full one is cut in two IP
		 * fragments (twice: to the relay and from it). No TCP
		 * connection crosses the device yet (no handshake).
		 */
		{
			char *mtu[] = {"ip", "link", "set", "dev", pt->d.dev,
			    "mtu", OV_RELAY_MTU, NULL};
			char why[256];

			if (gp_net_run(mtu, NULL, -1, why, sizeof(why)) != 0)
				gp_warn("gang relay: %s mtu %s: %s", pt->d.dev,
				    OV_RELAY_MTU, why);
		}
	}
	snprintf(p->endpoint, sizeof(p->endpoint), "127.0.0.1:%d",
	    gp_ovrelay_port(pt->via, p->part));
	p->relayed = 1;
	p->added = now;
	p->nudges = 0;
	if (peer_remake(pt, p) != 0)
		return -1;
	gp_info("gang overlay: no handshake with peer key=%.8s part=%d after "
	    "%d ms: through the relay job=%lld part=%d endpoint=%s", p->key,
	    p->part, OV_RELAY_MS, (long long)pt->job, pt->part, p->endpoint);
	return 0;
}

static void
next_min(int64_t *next, int64_t in)
{
	if (in < 0)
		in = 0;
	if (*next < 0 || in < *next)
		*next = in;
}

/*
 * The first handshake can stall for WireGuard's 5 s: when both agents
 * configure each other within a round trip, both initiations cross, each
 * side answers the other's and waits, as the responder, for data the
 * other (a responder too) never sends until its retry 5 s later. So the
 * side of the larger public key (one side only: two nudging sides could
 * cross again) re-makes a peer whose first handshake it has not seen
 * OV_NUDGE_MS after configuring it (a new peer sends a new initiation at
 * once), up to OV_NUDGES times.
 *
 * A peer still without a handshake OV_RELAY_MS after it was configured
 * goes through the relay (both sides: each sees none), and the nudges
 * start again there (both sides switch within a moment, so their
 * initiations may cross again).
 */
static int64_t
part_tick(struct gp_overlay *o, struct ov_part *pt, int64_t now)
{
	int64_t next = -1, due;
	int i, read = 0;

	for (i = 0; i < pt->n; i++) {
		struct ov_peer *p = &pt->peers[i];

		if (p->nudges < 0)
			continue;
		if (!p->relayed && pt->relay.port > 0) {
			due = p->added + OV_RELAY_MS;
			if (due <= now) {
				if (!read++)
					handshakes_read(pt);
				if (p->nudges < 0)
					continue;
				if (peer_relay(o, pt, p, now) == 0) {
					next_min(&next, OV_NUDGE_MS);
					continue;
				}
			} else
				next_min(&next, due - now);
		}
		if (p->nudges >= OV_NUDGES || strcmp(pt->pub, p->key) < 0)
			continue;
		due = p->added + (int64_t)OV_NUDGE_MS * (p->nudges + 1);
		if (due > now) {
			next_min(&next, due - now);
			continue;
		}
		if (!read++)
			handshakes_read(pt);
		if (p->nudges < 0)
			continue;
		p->nudges++;
		if (peer_remake(pt, p) != 0)
			continue;
		gp_info("gang overlay: no handshake with peer key=%.8s after "
		    "%lld ms: peer re-made (nudge %d)", p->key,
		    (long long)(now - p->added), p->nudges);
		if (p->nudges < OV_NUDGES)
			next_min(&next, p->added + (int64_t)OV_NUDGE_MS *
			    (p->nudges + 1) - now);
	}
	return next;
}

int64_t
gp_overlay_tick(struct gp_overlay *o, int64_t now)
{
	int64_t next = -1, t;
	int i;

	if (o == NULL)
		return -1;
	for (i = 0; i < o->nparts; i++)
		if ((t = part_tick(o, o->parts[i], now)) >= 0 &&
		    (next < 0 || t < next))
			next = t;
	return next;
}

void
gp_overlay_free(struct gp_overlay *o)
{
	if (o == NULL)
		return;
	if (o->helper_started) {
		pthread_mutex_lock(&o->lock);
		o->quit = 1;
		pthread_cond_broadcast(&o->cond);
		pthread_mutex_unlock(&o->lock);
		pthread_join(o->helper, NULL);
	}
	while (o->nparts > 0) {
		struct ov_part *pt = o->parts[--o->nparts];

		daemon_stop(o, &pt->d);
		part_free(pt);
	}
	free(o->parts);
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->cond);
	free(o);
}

/* What a killed agent of block b left of device seq. */
static void
sweep_one(int b, int seq, const char *tables)
{
	char path[96], dev[16], table[40], needle[64], *text = NULL;
	size_t n;
	long pid;

	snprintf(dev, sizeof(dev), OV_DEV_FMT, b, seq);
	snprintf(table, sizeof(table), OV_TABLE_FMT, b, seq);
	snprintf(path, sizeof(path), OV_PID_FMT, b, seq);
	if (gp_read_file(path, 64, &text, &n) == 0 &&
	    (pid = strtol(text, NULL, 10)) > 1) {
		char proc[64], *cmd = NULL;
		size_t len;

		/* Its command line ("wireguard-go\0-f\0gpwXXYY\0"), not a
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

void
gp_overlay_sweep(int b, const char *tables)
{
	int seq;

	for (seq = 0; seq < OV_SEQS; seq++)
		sweep_one(b, seq, tables);
}

static void
mark(unsigned char *stale, int nblocks, int b)
{
	if (b >= 0 && b < nblocks)
		stale[b] = 1;
}

/* "gpwXXYY" (OV_DEV_FMT) at s, then end: XX, or -1. */
static int
dev_block(const char *s, const char *end)
{
	if (strlen(s) < 7 || strncmp(s, "gpw", 3) != 0 ||
	    gp_net_hex_byte(s + 5) < 0 || strcmp(s + 7, end) != 0)
		return -1;
	return gp_net_hex_byte(s + 3);
}

void
gp_overlay_stale_blocks(const char *tables, unsigned char *stale,
    int nblocks)
{
	static const char table[] = "table inet gpupool_ov_";
	struct if_nameindex *ifs, *i;
	struct dirent *e;
	const char *t;
	DIR *d;

	/* Pid files, XX.YY.wg.pid (OV_PID_FMT). */
	if ((d = opendir(OV_RUN_DIR)) != NULL) {
		while ((e = readdir(d)) != NULL)
			if (strlen(e->d_name) == 12 && e->d_name[2] == '.' &&
			    gp_net_hex_byte(e->d_name + 3) >= 0 &&
			    strcmp(e->d_name + 5, ".wg.pid") == 0)
				mark(stale, nblocks, gp_net_hex_byte(e->d_name));
		closedir(d);
	} else
		memset(stale, 1, (size_t)nblocks);
	/* Control sockets, gpwXXYY.sock (OV_SOCK_FMT). */
	if ((d = opendir("/var/run/wireguard")) != NULL) {
		while ((e = readdir(d)) != NULL)
			mark(stale, nblocks, dev_block(e->d_name, ".sock"));
		closedir(d);
	} else if (errno != ENOENT)
		memset(stale, 1, (size_t)nblocks);
	/* Devices (one dump of this namespace's links). */
	if ((ifs = if_nameindex()) != NULL) {
		for (i = ifs; i->if_index != 0; i++)
			mark(stale, nblocks, dev_block(i->if_name, ""));
		if_freenameindex(ifs);
	} else
		memset(stale, 1, (size_t)nblocks);
	for (t = tables; t != NULL && (t = strstr(t, table)) != NULL;
	    t += sizeof(table) - 1)
		mark(stale, nblocks, gp_net_hex_byte(t + sizeof(table) - 1));
}
