/*
 * overlay_relay.c: a gang part's flow through the coordinator's relay
 * (overlay_relay.h, docs/agent.md "The relay").
 */
#include "agent/overlay_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

/* Hellos: at once, then soon (a lost one), then to keep the NAT open. */
#define HELLO_FIRST_MS 1000
#define HELLO_MS 10000
/* A relay that has answered no hello this long is said to be out of reach. */
#define NO_ANSWER_MS 5000
/* Kernel buffers of the sockets (net.core.[rw]mem_max caps them). */
#define SOCKBUF (1 << 20)
/* Datagrams moved in one round per socket before the others' turn. */
#define ROUND_MAX 64

struct proxy {
	int part;		/* the remote part */
	int fd;			/* on 127.0.0.1, its peer's endpoint */
	int port;
};

struct gp_ovrelay {
	char host[256];
	struct gp_overlay_relay cfg;
	int64_t job;
	int part, wg_port;
	int fd;			/* to the relay, connected */
	int wake;		/* eventfd: stop */
	atomic_int quit;
	pthread_t thread;
	int nproxies;
	struct proxy proxies[GP_RELAY_PARTS_MAX];
	_Atomic uint64_t out, in;
	uint64_t counter;	/* the last datagram's (thread only) */
	/* Thread only: the relay answered a hello; said why not, once. */
	int answered, warned;
	int64_t first_hello;
};

/*
 * The next datagram's counter: the wall clock in ns, or one more than
 * the last (it only grows: the relay takes a larger one as this part's
 * flow, even from a new address, and refuses an older hello).
 */
static uint64_t
next_counter(struct gp_ovrelay *r)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	r->counter = now > r->counter ? now : r->counter + 1;
	return r->counter;
}

static int
proxy_open(struct proxy *p, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((p->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) < 0 ||
	    setsockopt(p->fd, SOL_SOCKET, SO_RCVBUF, &(int){SOCKBUF},
	    sizeof(int)) != 0 ||
	    bind(p->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    getsockname(p->fd, (struct sockaddr *)&sin, &len) != 0) {
		snprintf(err, errlen, "a local UDP socket: %s",
		    strerror(errno));
		return GP_EIO;
	}
	p->port = ntohs(sin.sin_port);
	return 0;
}

/* Resolves the coordinator's host and connects the relay socket. */
static int
relay_connect(struct gp_ovrelay *r)
{
	struct addrinfo hints, *ai = NULL, *a;
	char port[16];
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_DGRAM;
	snprintf(port, sizeof(port), "%d", r->cfg.port);
	if ((ret = getaddrinfo(r->host, port, &hints, &ai)) != 0) {
		if (!r->warned++)
			gp_warn("gang relay: job=%lld part=%d: %s: %s (trying "
			    "again)", (long long)r->job, r->part, r->host,
			    gai_strerror(ret));
		return -1;
	}
	for (a = ai; a != NULL; a = a->ai_next) {
		int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0);

		if (fd < 0)
			continue;
		/* room for a burst while the thread is off the CPU */
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){SOCKBUF},
		    sizeof(int));
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){SOCKBUF},
		    sizeof(int));
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			r->fd = fd;
			break;
		}
		close(fd);
	}
	freeaddrinfo(ai);
	if (r->fd < 0) {
		if (!r->warned++)
			gp_warn("gang relay: job=%lld part=%d: cannot reach "
			    "%s:%d (trying again)", (long long)r->job, r->part,
			    r->host, r->cfg.port);
		return -1;
	}
	r->warned = 0;
	gp_info("gang relay: job=%lld part=%d: flow to %s:%d",
	    (long long)r->job, r->part, r->host, r->cfg.port);
	return 0;
}

static void
hello(struct gp_ovrelay *r)
{
	uint8_t buf[GP_RELAY_HEADER];
	struct gp_relay_header h;
	size_t len;

	h.type = GP_RELAY_HELLO;
	h.job = r->job;
	h.attempt = r->cfg.attempt;
	h.from = h.to = r->part;
	h.counter = next_counter(r);
	len = gp_relay_encode(buf, &h, NULL, 0, r->cfg.key);
	(void)send(r->fd, buf, len, MSG_DONTWAIT);
}

/* From wireguard-go (at 127.0.0.1:wg_port) to the relay, for p. */
static void
from_wireguard(struct gp_ovrelay *r, struct proxy *p, uint8_t *buf)
{
	struct gp_relay_header h = {GP_RELAY_DATA, r->job, r->cfg.attempt,
	    r->part, p->part, 0};
	int n;

	for (n = 0; n < ROUND_MAX; n++) {
		struct sockaddr_in src;
		socklen_t slen = sizeof(src);
		ssize_t len = recvfrom(p->fd, buf + GP_RELAY_HEADER,
		    GP_RELAY_PAYLOAD_MAX + 1, 0, (struct sockaddr *)&src,
		    &slen);

		if (len < 0)
			return;
		/* wireguard-go's port only; what does not fit is dropped */
		if (len == 0 || len > GP_RELAY_PAYLOAD_MAX ||
		    src.sin_family != AF_INET ||
		    src.sin_addr.s_addr != htonl(INADDR_LOOPBACK) ||
		    ntohs(src.sin_port) != r->wg_port)
			continue;
		h.counter = next_counter(r);
		len = (ssize_t)gp_relay_encode(buf, &h, buf + GP_RELAY_HEADER,
		    (size_t)len, r->cfg.key);
		if (send(r->fd, buf, (size_t)len, MSG_DONTWAIT) == len)
			atomic_fetch_add_explicit(&r->out, 1,
			    memory_order_relaxed);
	}
}

/* From the relay to wireguard-go, from the sending part's socket. */
static void
from_relay(struct gp_ovrelay *r, uint8_t *buf)
{
	struct sockaddr_in wg;
	int n, i;

	memset(&wg, 0, sizeof(wg));
	wg.sin_family = AF_INET;
	wg.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	wg.sin_port = htons((uint16_t)r->wg_port);
	for (n = 0; n < ROUND_MAX; n++) {
		struct gp_relay_header h;
		const uint8_t *payload;
		size_t plen;
		ssize_t len = recv(r->fd, buf, GP_RELAY_DATAGRAM_MAX + 1, 0);

		if (len < 0)
			return;
		/*
		 * The relay forwards the sender's datagram as it is (its MAC
		 * is the sender's, checked by the relay); WireGuard
		 * authenticates the payload itself.
		 */
		if (gp_relay_decode(buf, (size_t)len, &h, &payload,
		    &plen) != 0 || h.job != r->job ||
		    h.attempt != r->cfg.attempt || h.to != r->part)
			continue;
		/* The relay's answer to a hello: MAC'd with our key. */
		if (h.type == GP_RELAY_HELLO_ACK) {
			if (!r->answered && gp_relay_verify(buf, (size_t)len,
			    r->cfg.key)) {
				r->answered = 1;
				gp_info("gang relay: job=%lld part=%d: the relay "
				    "answers", (long long)r->job, r->part);
			}
			continue;
		}
		if (h.type != GP_RELAY_DATA)
			continue;
		for (i = 0; i < r->nproxies; i++)
			if (r->proxies[i].part == h.from)
				break;
		if (i == r->nproxies)
			continue;
		if (sendto(r->proxies[i].fd, payload, plen, MSG_DONTWAIT,
		    (struct sockaddr *)&wg, sizeof(wg)) == (ssize_t)plen)
			atomic_fetch_add_explicit(&r->in, 1,
			    memory_order_relaxed);
	}
}

static void *
relay_main(void *arg)
{
	struct gp_ovrelay *r = arg;
	struct pollfd pfd[2 + GP_RELAY_PARTS_MAX];
	uint8_t *buf = malloc(GP_RELAY_DATAGRAM_MAX + 1);
	int64_t next_hello = 0, started = gp_mono_ms();
	int i, connected = 0;

	if (buf == NULL)
		return NULL;
	while (!atomic_load(&r->quit)) {
		int64_t now = gp_mono_ms();
		int timeout = 1000, n = 0;

		if (!connected && (connected = relay_connect(r) == 0) == 0) {
			/* the name may resolve later: try again in a while */
			next_hello = now + 2000;
		}
		if (connected && !r->answered && !r->warned &&
		    r->first_hello > 0 && now - r->first_hello > NO_ANSWER_MS) {
			r->warned = 1;
			gp_warn("gang relay: job=%lld part=%d: no answer from "
			    "the relay at %s:%d in %d ms (is UDP port %d of the "
			    "coordinator open to this machine?)",
			    (long long)r->job, r->part, r->host, r->cfg.port,
			    NO_ANSWER_MS, r->cfg.port);
		}
		if (connected && now >= next_hello) {
			if (r->first_hello == 0)
				r->first_hello = now;
			hello(r);
			next_hello = now + (now - started < 3 * HELLO_FIRST_MS ?
			    HELLO_FIRST_MS : HELLO_MS);
		}
		if (next_hello > now && next_hello - now < timeout)
			timeout = (int)(next_hello - now);
		pfd[n++] = (struct pollfd){r->wake, POLLIN, 0};
		if (connected) {
			pfd[n++] = (struct pollfd){r->fd, POLLIN, 0};
			for (i = 0; i < r->nproxies; i++)
				pfd[n++] = (struct pollfd){r->proxies[i].fd,
				    POLLIN, 0};
		}
		if (poll(pfd, (nfds_t)n, timeout) <= 0 || !connected)
			continue;
		if (pfd[1].revents & POLLIN)
			from_relay(r, buf);
		for (i = 0; i < r->nproxies; i++)
			if (pfd[2 + i].revents & POLLIN)
				from_wireguard(r, &r->proxies[i], buf);
	}
	free(buf);
	return NULL;
}

int
gp_ovrelay_new(struct gp_ovrelay **out, const char *host,
    const struct gp_overlay_relay *cfg, int64_t job, int part,
    const int *remote, int nremote, int wg_port, char *err, size_t errlen)
{
	struct gp_ovrelay *r;
	int i, ret;

	if (nremote > GP_RELAY_PARTS_MAX || cfg->port <= 0) {
		snprintf(err, errlen, "no relay");
		return GP_EINVAL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return GP_ENOMEM;
	}
	gp_strlcpy(r->host, host, sizeof(r->host));
	r->cfg = *cfg;
	r->job = job;
	r->part = part;
	r->wg_port = wg_port;
	r->fd = -1;
	for (i = 0; i < GP_RELAY_PARTS_MAX; i++)
		r->proxies[i].fd = -1;
	if ((r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	for (i = 0; i < nremote; i++) {
		r->proxies[i].part = remote[i];
		r->nproxies++;
		if (proxy_open(&r->proxies[i], err, errlen) != 0)
			goto fail;
	}
	if ((ret = pthread_create(&r->thread, NULL, relay_main, r)) != 0) {
		snprintf(err, errlen, "thread: %s", strerror(ret));
		goto fail;
	}
	*out = r;
	return 0;
fail:
	for (i = 0; i < r->nproxies; i++)
		if (r->proxies[i].fd >= 0)
			close(r->proxies[i].fd);
	if (r->wake >= 0)
		close(r->wake);
	sodium_memzero(r, sizeof(*r));
	free(r);
	return GP_EIO;
}

int
gp_ovrelay_port(const struct gp_ovrelay *r, int remote)
{
	int i;

	for (i = 0; r != NULL && i < r->nproxies; i++)
		if (r->proxies[i].part == remote)
			return r->proxies[i].port;
	return 0;
}

void
gp_ovrelay_counts(const struct gp_ovrelay *r, uint64_t *out, uint64_t *in)
{
	*out = atomic_load(&r->out);
	*in = atomic_load(&r->in);
}

void
gp_ovrelay_free(struct gp_ovrelay *r)
{
	uint64_t one = 1;
	int i;

	if (r == NULL)
		return;
	atomic_store(&r->quit, 1);
	if (write(r->wake, &one, sizeof(one)) < 0)
		gp_warn("gang relay: eventfd: %s", strerror(errno));
	pthread_join(r->thread, NULL);
	for (i = 0; i < r->nproxies; i++)
		close(r->proxies[i].fd);
	if (r->fd >= 0)
		close(r->fd);
	close(r->wake);
	sodium_memzero(r, sizeof(*r));
	free(r);
}
