/*
 * gang_relay.c: the coordinator's UDP relay for gang overlays (gang_relay.h,
 * docs/agent.md "The relay", docs/api.md "Gang relay datagrams").
 *
 * One thread, one UDP socket. What to do with each datagram is the
 * table's (gang_relay_table.c: decoded, its MAC checked with its sending
 * part's key, its part's flow set by the newest, forwarded to the flow
 * of the part it names, a hello answered); this file does the I/O, keeps
 * the secret and counts for /metrics. Nothing is queued: a datagram the
 * socket cannot send at once is dropped (counted).
 *
 * The table asks the model whether a gang's attempt runs (gang_alive:
 * state.lock for reading) when it first sees the gang and every
 * RELAY_CHECK_MS after. Lock order: state.lock alone, never held while
 * sending.
 */
#include "gang_relay.h"
#include "gang_relay_table.h"

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

/* The socket's kernel buffers, each way (net.core.[rw]mem_max caps it). */
#define RELAY_SOCKBUF (4 << 20)
/* Datagrams read in one round before the tick gets a turn. */
#define ROUND_MAX 512

static struct {
	int fd, port;
	uint8_t secret[GP_RELAY_KEY];
	pthread_t thread;
	atomic_int quit;
	atomic_int started;	/* read by the HTTP threads (assignments) */
	struct relay_table *table;	/* the relay thread's */
} r = {.fd = -1};

static _Atomic uint64_t relayed_packets, relayed_bytes, hellos;
static _Atomic uint64_t drops[RELAY_NDROPS];
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

static void
count_drop(enum relay_drop why)
{
	atomic_fetch_add_explicit(&drops[why], 1, memory_order_relaxed);
}

/* One datagram from src. */
static void
handle(uint8_t *buf, size_t len, struct sockaddr_storage *src,
    socklen_t srclen, int64_t now)
{
	struct relay_out out;

	switch (relay_table_handle(r.table, buf, &len, src, srclen, now,
	    &out)) {
	case RELAY_DROP:
		count_drop(out.reason);
		break;
	case RELAY_ANSWER:
		(void)sendto(r.fd, buf, len, MSG_DONTWAIT,
		    (struct sockaddr *)src, srclen);
		atomic_fetch_add_explicit(&hellos, 1, memory_order_relaxed);
		break;
	case RELAY_FORWARD:
		/* nothing queued: what the socket cannot take is dropped */
		if (sendto(r.fd, buf, len, MSG_DONTWAIT,
		    (const struct sockaddr *)out.to, out.tolen) !=
		    (ssize_t)len) {
			count_drop(RELAY_DROP_SEND);
			break;
		}
		atomic_fetch_add_explicit(&relayed_packets, 1,
		    memory_order_relaxed);
		atomic_fetch_add_explicit(&relayed_bytes, out.payload,
		    memory_order_relaxed);
		break;
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
			relay_table_tick(r.table, now);
			atomic_store(&gangs_now, relay_table_gangs(r.table));
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
	int ret;

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
	if ((r.table = relay_table_new(r.secret, gang_alive)) == NULL) {
		snprintf(err, errlen, "out of memory");
		sodium_memzero(r.secret, sizeof(r.secret));
		return GP_ENOMEM;
	}
	/*
	 * No SO_REUSEADDR: UDP has no TIME_WAIT to wait out, and with it
	 * another process setting it too could bind the same port beside
	 * the relay and take its datagrams.
	 */
	if ((r.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
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
	relay_table_free(r.table);
	r.table = NULL;
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
	relay_table_free(r.table);
	r.table = NULL;
	atomic_store(&gangs_now, 0);
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
	for (i = 0; i < RELAY_NDROPS; i++) {
		lab[1] = relay_drop_name(i);
		rc |= gp_prom_sample(out, "gpupool_gang_relay_dropped_total",
		    lab, (double)atomic_load(&drops[i]));
	}
	rc |= gp_prom_family(out, "gpupool_gang_relay_gangs", "gauge",
	    "Gangs the relay knows now");
	rc |= gp_prom_sample(out, "gpupool_gang_relay_gangs", NULL,
	    (double)atomic_load(&gangs_now));
	return rc;
}
