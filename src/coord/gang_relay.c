/*
 * gang_relay.c: the coordinator's UDP relay for gang overlays (gang_relay.h,
 * docs/agent.md "The relay", docs/api.md "Gang relay datagrams").
 *
 * One thread, one UDP socket. Each datagram is decoded (common/
 * relay_wire.c), its MAC checked with its sending part's key, and then:
 * a hello (a newer counter than the part's last) records the address the
 * part's flow comes from; a data datagram from that address goes on, as
 * it is, to the flow of the part it names. Nothing is queued: a datagram
 * the socket cannot send at once is dropped (counted).
 *
 * The gangs it knows: a small table (RELAY_GANGS_MAX), an entry made when
 * a running gang's part first sends an authentic datagram, checked
 * against the model (state.lock, for reading) every GANG_CHECK_MS and
 * forgotten when its attempt no longer runs or its flows go quiet
 * (GANG_IDLE_MS without a hello). Lock order: state.lock alone, never
 * held while sending.
 */
#include "gang_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "prom.h"
#include "state.h"
#include "util.h"

/* Gangs relayed at once; a datagram of one more is dropped ("full"). */
#define RELAY_GANGS_MAX 1024
/* A gang's attempt is looked up in the model this often. */
#define GANG_CHECK_MS 2000
/* A gang none of whose parts sent anything new this long is forgotten. */
#define GANG_IDLE_MS 90000
/* Each part may send this many bytes a second (and a burst of one s). */
#define PART_RATE_BYTES (64LL << 20)
/* The socket's kernel buffers, each way (net.core.[rw]mem_max caps it). */
#define RELAY_SOCKBUF (4 << 20)
/* Datagrams read in one round before the tick gets a turn. */
#define ROUND_MAX 512

enum drop_reason {
	DROP_MALFORMED, DROP_AUTH, DROP_NO_GANG, DROP_FULL, DROP_REPLAY,
	DROP_UNREGISTERED, DROP_NO_PEER, DROP_RATE, DROP_SEND, NDROPS
};
static const char *const drop_names[NDROPS] = {"malformed", "auth",
    "no_gang", "full", "replay", "unregistered", "no_peer", "rate", "send"};

struct rpart {
	int known;		/* its key derived */
	uint8_t key[GP_RELAY_KEY];
	struct sockaddr_storage addr;	/* its flow (hello's source) */
	socklen_t addrlen;	/* 0: no hello yet */
	uint64_t counter;	/* the largest it sent */
	int64_t tokens, refill_ms; /* its rate */
};

struct rgang {
	int64_t job;
	uint32_t attempt;
	int parts;
	int64_t checked_ms, hello_ms;
	struct rpart part[GP_RELAY_PARTS_MAX];
};

static struct {
	int fd, port;
	uint8_t secret[GP_RELAY_KEY];
	pthread_t thread;
	atomic_int quit;
	atomic_int started;	/* read by the HTTP threads (assignments) */
	struct rgang *gangs[RELAY_GANGS_MAX];
	int ngangs;
} r = {.fd = -1};

static _Atomic uint64_t relayed_packets, relayed_bytes, hellos;
static _Atomic uint64_t drops[NDROPS];
static atomic_int gangs_now;

int
gang_relay_port(void)
{
	return atomic_load(&r.started) ? r.port : 0;
}

int
gang_relay_part_key(int64_t job, uint32_t attempt, int part,
    uint8_t out[GP_RELAY_KEY])
{
	if (!atomic_load(&r.started))
		return -1;
	gp_relay_part_key(r.secret, job, attempt, part, out);
	return 0;
}

/* Reads the secret at path: 0, 1 when absent, GP_E* (err) when bad. */
static int
secret_read(const char *path, char *err, size_t errlen)
{
	char *text = NULL;
	size_t n = 0;

	if (gp_read_file(path, 64, &text, &n) != 0)
		return 1;
	if (n != GP_RELAY_KEY) {
		sodium_memzero(text, n);
		free(text);
		snprintf(err, errlen, "%s: not %d bytes", path, GP_RELAY_KEY);
		return GP_EINVAL;
	}
	memcpy(r.secret, text, GP_RELAY_KEY);
	sodium_memzero(text, n);
	free(text);
	return 0;
}

/*
 * The relay's secret, kept in dir (the blob directory, which every
 * coordinator of the pool mounts) so that a coordinator restarted, or a
 * standby taking over, answers the running gangs' flows: read, or made
 * (0600). Two coordinators making it at once: each writes a file of its
 * own and links it into place; the one that finds it there reads it.
 */
static int
secret_load(const char *dir, char *err, size_t errlen)
{
	char path[1100], tmp[1200];
	int fd, ret;

	snprintf(path, sizeof(path), "%s/gang-relay.key", dir);
	if ((ret = secret_read(path, err, errlen)) <= 0)
		return ret;
	randombytes_buf(r.secret, sizeof(r.secret));
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || gp_write_all(fd, r.secret, sizeof(r.secret)) != 0 ||
	    fsync(fd) != 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto fail;
	}
	close(fd);
	fd = -1;
	if (link(tmp, path) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	unlink(tmp);
	/* ours, or the one another coordinator put there first */
	if ((ret = secret_read(path, err, errlen)) == 1) {
		snprintf(err, errlen, "%s: cannot read it back", path);
		return GP_EIO;
	}
	return ret;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	sodium_memzero(r.secret, sizeof(r.secret));
	return GP_EIO;
}

/*
 * 1 when job's attempt runs here as a gang of parts with an overlay
 * (*parts set). With state.lock for reading.
 */
static int
gang_alive(int64_t job, uint32_t attempt, int *parts)
{
	const struct job *j;
	int ok = 0, k;

	pthread_rwlock_rdlock(&state.lock);
	j = state_job(job);
	if (j != NULL && j->state == JOB_RUNNING &&
	    (uint32_t)j->attempts == attempt && j->nparts > 1 &&
	    j->nparts <= GP_RELAY_PARTS_MAX) {
		ok = 1;
		for (k = 0; k < j->nparts; k++)
			if (j->parts[k].ov_slot <= 0)
				ok = 0;
		*parts = j->nparts;
	}
	pthread_rwlock_unlock(&state.lock);
	return ok;
}

static struct rgang *
gang_find(int64_t job, uint32_t attempt)
{
	int i;

	for (i = 0; i < r.ngangs; i++)
		if (r.gangs[i]->job == job && r.gangs[i]->attempt == attempt)
			return r.gangs[i];
	return NULL;
}

static void
gang_forget(int i, const char *why)
{
	struct rgang *g = r.gangs[i];

	gp_info("gang relay: forgot job=%lld attempt=%u: %s",
	    (long long)g->job, g->attempt, why);
	sodium_memzero(g, sizeof(*g));
	free(g);
	r.gangs[i] = r.gangs[--r.ngangs];
	atomic_store(&gangs_now, r.ngangs);
}

static struct rpart *
part_of(struct rgang *g, int part)
{
	struct rpart *p = &g->part[part];

	if (!p->known) {
		gp_relay_part_key(r.secret, g->job, g->attempt, part, p->key);
		p->known = 1;
		p->tokens = PART_RATE_BYTES;
	}
	return p;
}

/* A part's rate: 1 when len more bytes may go now. */
static int
rate_take(struct rpart *p, size_t len, int64_t now)
{
	if (now > p->refill_ms) {
		int64_t add = (now - p->refill_ms) * (PART_RATE_BYTES / 1000);

		p->tokens = p->tokens + add > PART_RATE_BYTES ?
		    PART_RATE_BYTES : p->tokens + add;
		p->refill_ms = now;
	}
	if (p->tokens < (int64_t)len)
		return 0;
	p->tokens -= (int64_t)len;
	return 1;
}

static int
same_addr(const struct sockaddr_storage *a, socklen_t alen,
    const struct sockaddr_storage *b, socklen_t blen)
{
	return alen == blen && alen > 0 && memcmp(a, b, alen) == 0;
}

static void
drop(enum drop_reason why)
{
	atomic_fetch_add_explicit(&drops[why], 1, memory_order_relaxed);
}

/* One datagram from src. */
static void
handle(uint8_t *buf, size_t len, struct sockaddr_storage *src,
    socklen_t srclen, int64_t now)
{
	struct gp_relay_header h;
	const uint8_t *payload;
	size_t plen;
	struct rgang *g;
	struct rpart *from, *to;
	uint8_t key[GP_RELAY_KEY];
	int parts = 0;

	if (gp_relay_decode(buf, len, &h, &payload, &plen) != 0) {
		drop(DROP_MALFORMED);
		return;
	}
	if ((g = gang_find(h.job, h.attempt)) == NULL) {
		/* Authentic first (cheap), then the model (a lock). */
		gp_relay_part_key(r.secret, h.job, h.attempt, h.from, key);
		if (!gp_relay_verify(buf, len, key)) {
			sodium_memzero(key, sizeof(key));
			drop(DROP_AUTH);
			return;
		}
		sodium_memzero(key, sizeof(key));
		if (!gang_alive(h.job, h.attempt, &parts) || h.from >= parts ||
		    h.to >= parts) {
			drop(DROP_NO_GANG);
			return;
		}
		if (r.ngangs == RELAY_GANGS_MAX ||
		    (g = calloc(1, sizeof(*g))) == NULL) {
			drop(DROP_FULL);
			return;
		}
		g->job = h.job;
		g->attempt = h.attempt;
		g->parts = parts;
		g->checked_ms = g->hello_ms = now;
		r.gangs[r.ngangs++] = g;
		atomic_store(&gangs_now, r.ngangs);
		gp_info("gang relay: relaying job=%lld attempt=%u parts=%d",
		    (long long)g->job, g->attempt, parts);
	}
	if (h.from >= g->parts || h.to >= g->parts) {
		drop(DROP_NO_GANG);
		return;
	}
	from = part_of(g, h.from);
	if (!gp_relay_verify(buf, len, from->key)) {
		drop(DROP_AUTH);
		return;
	}
	/*
	 * A part's counter grows with each datagram it sends: one newer
	 * than any seen sets its flow (a hello opens it; data moves it, as
	 * after a NAT's new mapping or this coordinator's restart, without
	 * waiting for the next hello). An older one is a replay unless it
	 * comes from the flow itself (data reordered on the way).
	 */
	if (from->addrlen == 0 || h.counter > from->counter) {
		if (!same_addr(&from->addr, from->addrlen, src, srclen)) {
			gp_info("gang relay: flow of job=%lld attempt=%u "
			    "part=%d %s", (long long)g->job, g->attempt,
			    h.from, from->addrlen == 0 ? "opened" : "moved");
			from->addr = *src;
			from->addrlen = srclen;
		}
		from->counter = h.counter;
		g->hello_ms = now;
	} else if (h.type == GP_RELAY_HELLO ||
	    !same_addr(&from->addr, from->addrlen, src, srclen)) {
		drop(h.type == GP_RELAY_HELLO ? DROP_REPLAY :
		    DROP_UNREGISTERED);
		return;
	}
	if (h.type == GP_RELAY_HELLO) {
		/* Answered, so that the agent knows its flow gets through. */
		h.type = GP_RELAY_HELLO_ACK;
		len = gp_relay_encode(buf, &h, NULL, 0, from->key);
		(void)sendto(r.fd, buf, len, MSG_DONTWAIT,
		    (struct sockaddr *)src, srclen);
		atomic_fetch_add_explicit(&hellos, 1, memory_order_relaxed);
		return;
	}
	if (h.type != GP_RELAY_DATA) {
		drop(DROP_MALFORMED);	/* an answer: the relay's own */
		return;
	}
	to = part_of(g, h.to);
	if (to->addrlen == 0) {
		drop(DROP_NO_PEER);
		return;
	}
	if (!rate_take(from, len, now)) {
		drop(DROP_RATE);
		return;
	}
	if (sendto(r.fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&to->addr,
	    to->addrlen) != (ssize_t)len) {
		drop(DROP_SEND);
		return;
	}
	atomic_fetch_add_explicit(&relayed_packets, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&relayed_bytes, plen, memory_order_relaxed);
}

/* Forgets the gangs whose attempt ended, or whose flows went quiet. */
static void
tick(int64_t now)
{
	int i, parts;

	for (i = 0; i < r.ngangs; i++) {
		struct rgang *g = r.gangs[i];

		if (now - g->hello_ms > GANG_IDLE_MS) {
			gang_forget(i--, "its flows went quiet");
			continue;
		}
		if (now - g->checked_ms < GANG_CHECK_MS)
			continue;
		g->checked_ms = now;
		if (!gang_alive(g->job, g->attempt, &parts))
			gang_forget(i--, "its attempt no longer runs");
	}
}

static void *
relay_main(void *arg)
{
	uint8_t buf[GP_RELAY_DATAGRAM_MAX + 1];
	int64_t last_tick = gp_mono_ms();

	(void)arg;
	while (!atomic_load(&r.quit)) {
		struct pollfd pfd = {r.fd, POLLIN, 0};
		int64_t now;
		int n;

		(void)poll(&pfd, 1, 500);
		now = gp_mono_ms();
		for (n = 0; n < ROUND_MAX; n++) {
			struct sockaddr_storage src;
			socklen_t srclen = sizeof(src);
			ssize_t len = recvfrom(r.fd, buf, sizeof(buf),
			    MSG_DONTWAIT, (struct sockaddr *)&src, &srclen);

			if (len < 0)
				break;
			/* one byte more than the largest: too long */
			handle(buf, (size_t)len, &src, srclen, now);
		}
		if (now - last_tick >= 500) {
			tick(now);
			last_tick = now;
		}
	}
	return NULL;
}

int
gang_relay_start(const char *addr, int port, const char *dir,
    char *err, size_t errlen)
{
	struct sockaddr_in sin;
	int ret, one = 1;

	if (port <= 0)
		return 0;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
		snprintf(err, errlen, "'%s' is not an IPv4 address", addr);
		return GP_EINVAL;
	}
	if ((ret = secret_load(dir, err, errlen)) != 0)
		return ret;
	if ((r.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(r.fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)) != 0 ||
	    bind(r.fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		snprintf(err, errlen, "UDP %s:%d: %s", addr, port,
		    strerror(errno));
		goto fail;
	}
	/*
	 * Room for a burst while the thread is off the CPU (fixed: the
	 * kernel drops what does not fit, nothing grows).
	 */
	(void)setsockopt(r.fd, SOL_SOCKET, SO_RCVBUF, &(int){RELAY_SOCKBUF},
	    sizeof(int));
	(void)setsockopt(r.fd, SOL_SOCKET, SO_SNDBUF, &(int){RELAY_SOCKBUF},
	    sizeof(int));
	r.port = port;
	if ((ret = pthread_create(&r.thread, NULL, relay_main, NULL)) != 0) {
		snprintf(err, errlen, "thread: %s", strerror(ret));
		goto fail;
	}
	atomic_store(&r.started, 1);
	gp_info("gang relay listening udp=%s:%d", addr, port);
	return 0;
fail:
	if (r.fd >= 0)
		close(r.fd);
	r.fd = -1;
	sodium_memzero(r.secret, sizeof(r.secret));
	return GP_EIO;
}

void
gang_relay_stop(void)
{
	if (!atomic_load(&r.started))
		return;
	/*
	 * The secret stays: an HTTP thread may still be writing an
	 * assignment with a key (the process ends soon after).
	 */
	atomic_store(&r.started, 0);
	atomic_store(&r.quit, 1);
	pthread_join(r.thread, NULL);
	while (r.ngangs > 0)
		gang_forget(r.ngangs - 1, "the coordinator stops");
	close(r.fd);
	r.fd = -1;
}

int
gang_relay_metrics_render(struct gp_buf *out)
{
	const char *lab[] = {"reason", NULL, NULL};
	int rc = 0, i;

	rc |= gp_prom_family(out, "gpupool_gang_relay_packets_total",
	    "counter", "WireGuard datagrams the gang relay forwarded");
	rc |= gp_prom_sample(out, "gpupool_gang_relay_packets_total", NULL,
	    (double)atomic_load(&relayed_packets));
	rc |= gp_prom_family(out, "gpupool_gang_relay_bytes_total", "counter",
	    "Bytes of WireGuard datagrams the gang relay forwarded "
	    "(payload, without the relay's header)");
	rc |= gp_prom_sample(out, "gpupool_gang_relay_bytes_total", NULL,
	    (double)atomic_load(&relayed_bytes));
	rc |= gp_prom_family(out, "gpupool_gang_relay_hellos_total",
	    "counter", "Authentic hellos (flows opened and kept)");
	rc |= gp_prom_sample(out, "gpupool_gang_relay_hellos_total", NULL,
	    (double)atomic_load(&hellos));
	rc |= gp_prom_family(out, "gpupool_gang_relay_dropped_total",
	    "counter", "Datagrams the gang relay dropped, by reason");
	for (i = 0; i < NDROPS; i++) {
		lab[1] = drop_names[i];
		rc |= gp_prom_sample(out, "gpupool_gang_relay_dropped_total",
		    lab, (double)atomic_load(&drops[i]));
	}
	rc |= gp_prom_family(out, "gpupool_gang_relay_gangs", "gauge",
	    "Gangs the relay knows now");
	rc |= gp_prom_sample(out, "gpupool_gang_relay_gangs", NULL,
	    (double)atomic_load(&gangs_now));
	return rc;
}
