/*
 * relay.c: the interactive stream broker (relay.h, docs/interactive.md).
 *
 * A stream is born when its owner asks (GET /v1/jobs/{id}/stream with
 * Upgrade, or relay_open): it is checked (the caller owns the job, whose
 * attempt runs; the caps), given a random secret, and put on the list
 * of its job's node, whose long poll is woken: the agent's poll answer
 * lists it, and the agent dials GET /v1/agent/stream with the secret in
 * a header. Each leg is handed over by libmicrohttpd after its 101
 * answer (MHD_UPGRADE: the API's own port); on an HTTPS coordinator the
 * relay takes the leg's TLS session itself instead (relay_tls.h: the
 * Upgrade's forwarding in libmicrohttpd 0.9.75 crawls). When both legs
 * are there, the relay thread the stream was given to splices them.
 *
 * Threads: the HTTP workers create streams and attach legs; a small
 * fixed pool of relay workers (relay_config.threads, by default one per
 * core, at most RELAY_THREADS_MAX) moves bytes: each stream is given at
 * its birth to the worker with the fewest streams, and both of its legs
 * live in that worker's epoll set, so a TLS stream's record work (the
 * bulk of an HTTPS coordinator's relay cost) runs beside the others'.
 * Worker 0 also runs the tick (expiry, attempts, idle ends). A worker
 * alone frees its streams (its epoll events point into them).
 *
 * Locks: relay_lock guards the lists (all streams, the pending list),
 * the per-job counts, the idle clocks and each stream's counted,
 * announced and idle fields; a worker's lock guards its streams' legs,
 * buffers, frame scan and epoll interest. dead and closing are atomic
 * (set under the worker's lock, read by anyone). A worker moving bytes
 * holds only its own lock; what a stream's end needs of relay_lock (its
 * job's count, unlinking, freeing) it does at the end of its round
 * (reap). A stream's traffic reaches its idle clock through the atomic
 * traffic_mono, folded in by the tick. Lock order: state.lock, then
 * notify_lock, then relay_lock, then a worker's lock.
 *
 * Open sessions cost nothing per request: an agent's poll looks only at
 * the streams not yet announced (the pending list), a job's view finds
 * its session count in a sorted table, and relay thread 0 walks the
 * whole list only on its tick (every TICK_MS) and when a stream ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_int.h"
#include "gp.h"
#include "joblog.h"
#include "log.h"
#include "notify.h"
#include "prom.h"
#include "relay.h"
#include "relay_tls.h"
#include "route.h"
#include "state.h"
#include "stream.h"
#include "util.h"

#define TICK_MS 250
#define SECRET_HEX 33
#define CLOSE_FLUSH_MS 2000 /* a closing stream's last bytes, at most */
#define RELAY_THREADS_MAX 16

enum { LEG_CLIENT, LEG_AGENT };

struct relay_stream;
struct deferred;

/* A relay thread and the streams it moves (see the top). */
struct relay_worker {
	int index;
	pthread_t thread;
	int started;
	int epfd, wakefd;
	pthread_mutex_t lock;		/* its streams' legs and buffers */
	struct relay_stream *streams;	/* its own (next_in_worker); lock */
	struct deferred *to_close;	/* lock */
	atomic_int nstreams;		/* its load: streams not yet freed */
	atomic_int reap_wanted;		/* a stream of its is closing or dead */
};

struct leg {
	struct relay_stream *s;
	int which;	/* LEG_CLIENT, LEG_AGENT */
	int fd;		/* -1 until attached */
	struct MHD_UpgradeResponseHandle *urh; /* NULL: ours to close() */
	struct relay_tls *tls;	/* non-NULL: the relay holds its TLS */
	int in_epoll;
	unsigned events;
};

/*
 * The idle clock of a job with an idle limit (shared by its streams).
 * Kept in the attempt's record too (state_note_idle), at idle_grain_ms,
 * so that a restarted coordinator goes on with it (idle_rebuild).
 */
struct idle_job {
	int64_t job_id;
	int attempt;
	int64_t idle_ms;
	int64_t last_mono;
	int warned;
	int64_t saved_mono;	/* the last_mono the store has */
	int64_t saved_limit;	/* the idle_ms it has (0: none yet) */
	struct idle_job *next;
};

struct relay_stream {
	int64_t id;
	char secret[SECRET_HEX];
	int64_t job_id;
	int attempt;
	int part;	/* a gang's part (0: rank 0, or the only one) */
	int64_t node_id; /* the part's node */
	char user[GP_NAME_MAX + 1];
	int kind;
	int64_t created_mono;
	int announced;	/* the node's poll took it (relay_lock) */
	int counted;	/* in its job's count (relay_lock) */
	int spliced;
	atomic_int closing;	/* flush to_client, then close */
	int64_t closing_mono;
	atomic_int dead;	/* close now */
	atomic_llong traffic_mono; /* its last byte either way (idle clock) */
	struct relay_worker *w;	/* the thread that moves its bytes */
	struct leg client, agent;
	/* to the agent: what the client sent; to the client: the agent's. */
	uint8_t to_agent[RELAY_BUFFER], to_client[RELAY_BUFFER];
	size_t ta_start, ta_end, tc_start, tc_end;
	struct gp_frame_scan scan; /* the agent's frames going by */
	struct idle_job *idle;	/* relay_lock */
	struct relay_stream *next;
	struct relay_stream *next_in_worker; /* on w->streams */
	struct relay_stream *next_pending; /* while on the pending list */
};

/* Open streams of a job (relay_job_sessions), sorted by job_id. */
struct job_count {
	int64_t job_id;
	int n;
};

static struct relay_config cfg;
static pthread_mutex_t relay_lock = PTHREAD_MUTEX_INITIALIZER;
static struct relay_stream *streams;	/* under relay_lock */
/* Not yet announced to their node's poll (a subset of streams). */
static struct relay_stream *pending;	/* under relay_lock */
static struct job_count *job_counts;	/* under relay_lock */
static size_t njob_counts, job_counts_cap;
static struct idle_job *idle_jobs;	/* under relay_lock */
static int64_t next_id = 1;
static struct relay_worker workers[RELAY_THREADS_MAX];
static int nworkers;
static unsigned next_worker;	/* the tie-break's turn (relay_lock) */
static atomic_int running;

static atomic_llong leg_reads[2], tls_legs_total;
static atomic_int tls_legs; /* open legs with relay-held TLS */
static atomic_llong opened_total, refused_total, idle_ends_total,
    agent_lost_total, bytes_to_job, bytes_from_job;
static atomic_int active_count;

void
relay_config_default(struct relay_config *c)
{
	c->per_job_max = 64;
	c->per_user_max = 256;
	c->total_max = 4096;
	c->idle_max_ms = 4 * 3600 * 1000LL;
	c->connect_ms = 10000;
	c->threads = 0;
}

static void
wake(struct relay_worker *w)
{
	uint64_t one = 1;

	if (write(w->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gp_debug("relay wake: %s", strerror(errno));
}

/* ---- frames of our own ---- */

/* Appends a frame to buf (at *end, RELAY_BUFFER) if it fits; 1 if so. */
static int
append_frame(uint8_t *buf, size_t *start, size_t *end, int type,
    const char *text)
{
	size_t len = strlen(text);

	if (*start > 0 && *start == *end)
		*start = *end = 0;
	if (len > 1024)
		len = 1024;
	if (RELAY_BUFFER - *end < GP_FRAME_HEADER + len && *start > 0) {
		memmove(buf, buf + *start, *end - *start);
		*end -= *start;
		*start = 0;
	}
	if (RELAY_BUFFER - *end < GP_FRAME_HEADER + len)
		return 0;
	gp_frame_header(buf + *end, type, len);
	memcpy(buf + *end + GP_FRAME_HEADER, text, len);
	*end += GP_FRAME_HEADER + len;
	return 1;
}

/* A frame for a leg that is not spliced: written at once, best effort. */
static void
write_frame_now(int fd, struct relay_tls *tls, int type, const char *text)
{
	uint8_t buf[GP_FRAME_HEADER + 512];
	size_t len = strlen(text);

	if (fd < 0)
		return;
	if (len > 512)
		len = 512;
	gp_frame_header(buf, type, len);
	memcpy(buf + GP_FRAME_HEADER, text, len);
	if ((tls != NULL ? relay_tls_send(tls, buf, GP_FRAME_HEADER + len) :
	    write(fd, buf, GP_FRAME_HEADER + len)) < 0)
		gp_debug("relay: frame not written: %s", strerror(errno));
}

/* ---- per-job counts (relay_lock held) ---- */

/* The index of job_id in job_counts, or where it would go. */
static size_t
job_count_find(int64_t job_id)
{
	size_t lo = 0, hi = njob_counts, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (job_counts[mid].job_id < job_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Adds delta to job_id's count; 0, or GP_ENOMEM (delta > 0 only). */
static int
job_count_add(int64_t job_id, int delta)
{
	size_t i = job_count_find(job_id);
	struct job_count *grown;

	if (i < njob_counts && job_counts[i].job_id == job_id) {
		job_counts[i].n += delta;
		if (job_counts[i].n <= 0) {
			memmove(job_counts + i, job_counts + i + 1,
			    (njob_counts - i - 1) * sizeof(*job_counts));
			njob_counts--;
		}
		return 0;
	}
	if (delta <= 0)
		return 0;
	if (njob_counts == job_counts_cap) {
		size_t cap = job_counts_cap ? job_counts_cap * 2 : 16;
		if ((grown = realloc(job_counts, cap * sizeof(*grown))) ==
		    NULL)
			return GP_ENOMEM;
		job_counts = grown;
		job_counts_cap = cap;
	}
	memmove(job_counts + i + 1, job_counts + i,
	    (njob_counts - i) * sizeof(*job_counts));
	job_counts[i].job_id = job_id;
	job_counts[i].n = delta;
	njob_counts++;
	return 0;
}

/*
 * The stream is no longer open: its worker reaps it (out of its job's
 * count, freed). Call with its worker's lock.
 */
static void
stream_leaves(struct relay_stream *s)
{
	atomic_store(&s->w->reap_wanted, 1);
}

/* Out of its job's count, once closing or dead. Call with relay_lock. */
static void
uncount(struct relay_stream *s)
{
	if (s->counted && (s->dead || s->closing)) {
		job_count_add(s->job_id, -1);
		s->counted = 0;
	}
}

static void
mark_dead(struct relay_stream *s)
{
	s->dead = 1;
	stream_leaves(s);
}

/*
 * Tells the client why its stream ends (between two of the agent's
 * frames, else not at all: the agent's half frame cannot be cut) and
 * closes after the client has its bytes. Call with its worker's lock.
 */
static void
end_stream(struct relay_stream *s, const char *why)
{
	if (s->closing || s->dead)
		return;
	if (!s->spliced) {
		if (why != NULL)
			write_frame_now(s->client.fd, s->client.tls,
			    GP_FRAME_ERROR, why);
		mark_dead(s);
		return;
	}
	if (why != NULL && gp_frame_scan_at_boundary(&s->scan))
		append_frame(s->to_client, &s->tc_start, &s->tc_end,
		    GP_FRAME_ERROR, why);
	s->closing = 1;
	s->closing_mono = gp_mono_ms();
	stream_leaves(s);
}

/* ---- the list ---- */

static int
count_streams(int64_t job_id, const char *user, int *per_job, int *per_user)
{
	struct relay_stream *s;
	int total = 0;

	*per_job = *per_user = 0;
	for (s = streams; s != NULL; s = s->next) {
		if (s->dead)
			continue;
		total++;
		if (s->job_id == job_id)
			(*per_job)++;
		if (strcmp(s->user, user) == 0)
			(*per_user)++;
	}
	return total;
}

static struct relay_stream *
find_stream(int64_t id)
{
	struct relay_stream *s;

	for (s = streams; s != NULL; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

/*
 * How stale the stored clock may get: an eighth of the limit, 1 s to
 * 5 min (a 1 h limit: one write per 5 min of typing). A rebuilt clock
 * assumes traffic up to a grain after the stored time, so that a
 * restart never ends an active session early; an idle one ends at most
 * a grain late.
 */
static int64_t
idle_grain_ms(int64_t idle_ms)
{
	int64_t g = idle_ms / 8;

	return g < 1000 ? 1000 : g > 300000 ? 300000 : g;
}

static struct idle_job *
idle_job_find(int64_t job_id, int attempt)
{
	struct idle_job *j;

	for (j = idle_jobs; j != NULL; j = j->next)
		if (j->job_id == job_id && j->attempt == attempt)
			return j;
	return NULL;
}

static struct idle_job *
idle_job_get(int64_t job_id, int attempt, int64_t idle_ms)
{
	struct idle_job *j = idle_job_find(job_id, attempt);

	if (j == NULL) {
		if ((j = calloc(1, sizeof(*j))) == NULL)
			return NULL;
		j->job_id = job_id;
		j->attempt = attempt;
		j->next = idle_jobs;
		idle_jobs = j;
	}
	/* The latest session's limit holds. */
	j->idle_ms = idle_ms;
	j->last_mono = gp_mono_ms();
	j->warned = 0;
	return j;
}

/*
 * The node that runs part of job's current attempt, or 0 (not running
 * there, or not at all). Call with the state's read lock.
 */
static int64_t
part_node(const struct job *job, int part)
{
	if (job->state != JOB_RUNNING)
		return 0;
	if (part == 0 && job->nparts <= 1)
		return job->node_id;
	if (part >= job->nparts || job->parts == NULL ||
	    job->parts[part].ended)
		return 0;
	return job->parts[part].node_id;
}

/*
 * The worker with the fewest streams, the turn breaking ties (so that
 * one stream after another on an idle pool goes round). Call with
 * relay_lock.
 */
static struct relay_worker *
pick_worker(void)
{
	struct relay_worker *best = NULL;
	int i, n, best_n = 0;

	for (i = 0; i < nworkers; i++) {
		struct relay_worker *w = &workers[(next_worker + (unsigned)i) %
		    (unsigned)nworkers];

		n = atomic_load(&w->nstreams);
		if (best == NULL || n < best_n) {
			best = w;
			best_n = n;
		}
	}
	next_worker = (unsigned)(best->index + 1) % (unsigned)nworkers;
	return best;
}

/*
 * Checks a new stream into part of job and lists it for that part's
 * node; wakes the node's poll. Call with the state's read lock held (not
 * notify_lock, not relay_lock). OUT: *out, the stream's id (the stream
 * is the list's: find it again under relay_lock), err. Returns 0, or an
 * HTTP status with err.
 */
static int
stream_create(int64_t job_id, int part, const char *user, int kind,
    int64_t idle_ms, int64_t *out, char *err, size_t errlen)
{
	struct relay_stream *s;
	struct job *job = state_job(job_id);
	struct node *node = NULL;
	unsigned char raw[16];
	int per_job, per_user, total, nparts;
	int64_t node_id;

	if (job == NULL || strcmp(job->user, user) != 0) {
		/* Admins too: they may cancel a job, not enter it. */
		snprintf(err, errlen, "no job %lld of yours (only its owner "
		    "may open a stream into a job)", (long long)job_id);
		return 404;
	}
	nparts = job->spec.nodes > 1 ? job->spec.nodes : 1;
	if (part < 0 || part >= nparts) {
		if (nparts == 1)
			snprintf(err, errlen, "job %lld is not a gang: it has "
			    "only part 0", (long long)job_id);
		else
			snprintf(err, errlen, "job %lld has %d parts: part 0 "
			    "to %d", (long long)job_id, nparts, nparts - 1);
		return 400;
	}
	node_id = part_node(job, part);
	if (node_id == 0 || (node = state_node(node_id)) == NULL) {
		if (nparts > 1 && job->state == JOB_RUNNING)
			snprintf(err, errlen, "job %lld's part %d is not "
			    "running", (long long)job_id, part);
		else
			snprintf(err, errlen, "job %lld is not running",
			    (long long)job_id);
		return 409;
	}
	if (idle_ms > cfg.idle_max_ms)
		idle_ms = cfg.idle_max_ms;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return 503;
	}
	s->client.s = s->agent.s = s;
	s->client.which = LEG_CLIENT;
	s->agent.which = LEG_AGENT;
	s->client.fd = s->agent.fd = -1;
	s->job_id = job_id;
	s->attempt = job->attempts;
	s->part = part;
	s->node_id = node_id;
	gp_strlcpy(s->user, user, sizeof(s->user));
	s->kind = kind;
	s->created_mono = gp_mono_ms();
	atomic_store(&s->traffic_mono, s->created_mono);
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(s->secret, sizeof(s->secret), raw, sizeof(raw));
	pthread_mutex_lock(&notify_lock);
	pthread_mutex_lock(&relay_lock);
	if (!atomic_load(&running)) {
		pthread_mutex_unlock(&relay_lock);
		pthread_mutex_unlock(&notify_lock);
		free(s);
		snprintf(err, errlen, "the coordinator is stopping");
		return 503;
	}
	total = count_streams(job_id, user, &per_job, &per_user);
	if (per_job >= cfg.per_job_max || per_user >= cfg.per_user_max ||
	    total >= cfg.total_max) {
		pthread_mutex_unlock(&relay_lock);
		pthread_mutex_unlock(&notify_lock);
		free(s);
		atomic_fetch_add(&refused_total, 1);
		snprintf(err, errlen, "too many streams (%s: %d)",
		    per_job >= cfg.per_job_max ? "into this job" :
		    per_user >= cfg.per_user_max ? "of yours" : "in all",
		    per_job >= cfg.per_job_max ? cfg.per_job_max :
		    per_user >= cfg.per_user_max ? cfg.per_user_max :
		    cfg.total_max);
		return 429;
	}
	if (job_count_add(job_id, 1) != 0) {
		pthread_mutex_unlock(&relay_lock);
		pthread_mutex_unlock(&notify_lock);
		free(s);
		snprintf(err, errlen, "out of memory");
		return 503;
	}
	s->counted = 1;
	if (idle_ms > 0)
		s->idle = idle_job_get(job_id, s->attempt, idle_ms);
	else if ((s->idle = idle_job_find(job_id, s->attempt)) != NULL) {
		/* Any session's traffic keeps a job with a clock alive. */
		s->idle->last_mono = gp_mono_ms();
		s->idle->warned = 0;
	}
	s->id = next_id++;
	*out = s->id;
	s->next = streams;
	streams = s;
	s->next_pending = pending;
	pending = s;
	s->w = pick_worker();
	pthread_mutex_lock(&s->w->lock);
	s->next_in_worker = s->w->streams;
	s->w->streams = s;
	atomic_fetch_add(&s->w->nstreams, 1);
	pthread_mutex_unlock(&s->w->lock);
	atomic_fetch_add(&active_count, 1);
	atomic_fetch_add(&opened_total, 1);
	pthread_mutex_unlock(&relay_lock);
	notify_wake_node(node);
	pthread_mutex_unlock(&notify_lock);
	gp_info("stream opened id=%lld job=%lld attempt=%d part=%d node=%lld "
	    "kind=%s user=%s idle_ms=%lld", (long long)*out, (long long)job_id,
	    job->attempts, part, (long long)node_id,
	    gp_stream_kind_name(kind), user, (long long)idle_ms);
	return 0;
}

/* ---- legs ---- */

/*
 * Upgraded connections to hand back to libmicrohttpd, closed only once
 * the relay's locks are let go (close_deferred): MHD_upgrade_action takes
 * the daemon's locks, which an HTTP worker may hold while it waits for
 * relay_lock in on_upgrade. A worker's list, under its lock.
 */
struct deferred {
	struct MHD_UpgradeResponseHandle *urh;
	struct relay_tls *tls;	/* or this: resumed, then MHD closes it */
	struct deferred *next;
};

/* Call without any lock. */
static void
close_deferred(struct relay_worker *w)
{
	struct deferred *d, *next;

	pthread_mutex_lock(&w->lock);
	d = w->to_close;
	w->to_close = NULL;
	pthread_mutex_unlock(&w->lock);
	for (; d != NULL; d = next) {
		next = d->next;
		if (d->tls != NULL)
			relay_tls_release(d->tls);
		else
			MHD_upgrade_action(d->urh, MHD_UPGRADE_ACTION_CLOSE);
		free(d);
	}
}

/* Call with its worker's lock. */
static void
leg_close(struct leg *l)
{
	struct relay_worker *w = l->s->w;
	struct deferred *d;

	if (l->fd < 0)
		return;
	if (l->in_epoll)
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, l->fd, NULL);
	if (l->urh != NULL || l->tls != NULL) {
		/* The socket stays MHD's: shut it now, hand it back later. */
		if (l->tls != NULL) {
			relay_tls_shut(l->tls);
			atomic_fetch_sub(&tls_legs, 1);
		} else
			shutdown(l->fd, SHUT_RDWR);
		if ((d = malloc(sizeof(*d))) != NULL) {
			d->urh = l->urh;
			d->tls = l->tls;
			d->next = w->to_close;
			w->to_close = d;
		} else
			gp_error("relay: out of memory: a connection leaks");
	} else
		close(l->fd);
	l->fd = -1;
	l->urh = NULL;
	l->tls = NULL;
	l->in_epoll = 0;
}

/* Interest of a spliced stream's legs, from its buffers (worker's lock). */
static void
leg_interest(struct relay_stream *s)
{
	int epfd = s->w->epfd;
	unsigned ce = 0, ae = 0;
	struct epoll_event ev;

	/* Room counts what was sent too: a read compacts the buffer. */
	if (!s->closing && s->ta_end - s->ta_start < RELAY_BUFFER)
		ce |= EPOLLIN;
	if (s->tc_end > s->tc_start)
		ce |= EPOLLOUT;
	if (!s->closing && s->tc_end - s->tc_start < RELAY_BUFFER)
		ae |= EPOLLIN;
	if (s->ta_end > s->ta_start)
		ae |= EPOLLOUT;
	if (s->client.fd >= 0 && (ce != s->client.events ||
	    !s->client.in_epoll)) {
		ev.events = ce;
		ev.data.ptr = &s->client;
		epoll_ctl(epfd, s->client.in_epoll ? EPOLL_CTL_MOD :
		    EPOLL_CTL_ADD, s->client.fd, &ev);
		s->client.in_epoll = 1;
		s->client.events = ce;
	}
	if (s->agent.fd >= 0 && (ae != s->agent.events ||
	    !s->agent.in_epoll)) {
		ev.events = ae;
		ev.data.ptr = &s->agent;
		epoll_ctl(epfd, s->agent.in_epoll ? EPOLL_CTL_MOD :
		    EPOLL_CTL_ADD, s->agent.fd, &ev);
		s->agent.in_epoll = 1;
		s->agent.events = ae;
	}
}

/*
 * Attaches a leg's socket (and the bytes that came with its request
 * head). Call with relay_lock and the stream's worker's lock. Splices
 * when both legs are there; the caller wakes the worker.
 */
static void
leg_attach(struct relay_stream *s, int which, int fd,
    struct MHD_UpgradeResponseHandle *urh, struct relay_tls *tls,
    const char *extra, size_t n)
{
	struct leg *l = which == LEG_CLIENT ? &s->client : &s->agent;
	int flags = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	l->fd = fd;
	l->urh = urh;
	l->tls = tls;
	if (tls != NULL) {
		atomic_fetch_add(&tls_legs, 1);
		atomic_fetch_add(&tls_legs_total, 1);
	}
	if (n > 0) {
		if (n > RELAY_BUFFER) {
			end_stream(s, "too many bytes before the stream");
			return;
		}
		if (which == LEG_CLIENT) {
			memcpy(s->to_agent, extra, n);
			s->ta_end = n;
		} else {
			if (gp_frame_scan(&s->scan, (const uint8_t *)extra,
			    n) != 0) {
				end_stream(s, "the job's agent sent a bad "
					      "frame");
				return;
			}
			memcpy(s->to_client, extra, n);
			s->tc_end = n;
		}
	}
	if (s->client.fd >= 0 && s->agent.fd >= 0 && !s->spliced) {
		s->spliced = 1;
		leg_interest(s);
		gp_debug("stream spliced id=%lld after_ms=%lld",
		    (long long)s->id,
		    (long long)(gp_mono_ms() - s->created_mono));
	}
}

/* ---- moving bytes (a worker, its lock held) ---- */

/* The tick folds it into the stream's idle clock (fold_traffic). */
static void
touch_idle(struct relay_stream *s)
{
	atomic_store(&s->traffic_mono, gp_mono_ms());
}

/* read(2) on a leg, through the relay's TLS when it holds it. */
static ssize_t
leg_recv(struct leg *l, void *buf, size_t cap)
{
	ssize_t n = l->tls != NULL ? relay_tls_recv(l->tls, buf, cap) :
	    read(l->fd, buf, cap);

	if (n > 0)
		atomic_fetch_add(&leg_reads[l->which], 1);
	return n;
}

/* Reads from the client into to_agent. */
static void
read_client(struct relay_stream *s)
{
	ssize_t n;

	if (s->ta_start > 0 && s->ta_start == s->ta_end)
		s->ta_start = s->ta_end = 0;
	if (s->ta_end == RELAY_BUFFER && s->ta_start > 0) {
		memmove(s->to_agent, s->to_agent + s->ta_start,
		    s->ta_end - s->ta_start);
		s->ta_end -= s->ta_start;
		s->ta_start = 0;
	}
	if (s->ta_end == RELAY_BUFFER)
		return;
	n = leg_recv(&s->client, s->to_agent + s->ta_end,
	    RELAY_BUFFER - s->ta_end);
	if (n > 0) {
		s->ta_end += (size_t)n;
		atomic_fetch_add(&bytes_to_job, n);
		touch_idle(s);
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		/* The client left: the agent sees its leg close. */
		gp_info("stream closed id=%lld job=%lld by=client",
		    (long long)s->id, (long long)s->job_id);
		mark_dead(s);
	}
}

/* Reads the agent's frames into to_client. */
static void
read_agent(struct relay_stream *s)
{
	ssize_t n;

	if (s->tc_start > 0 && s->tc_start == s->tc_end)
		s->tc_start = s->tc_end = 0;
	if (s->tc_end == RELAY_BUFFER && s->tc_start > 0) {
		memmove(s->to_client, s->to_client + s->tc_start,
		    s->tc_end - s->tc_start);
		s->tc_end -= s->tc_start;
		s->tc_start = 0;
	}
	if (s->tc_end == RELAY_BUFFER)
		return;
	n = leg_recv(&s->agent, s->to_client + s->tc_end,
	    RELAY_BUFFER - s->tc_end);
	if (n > 0) {
		if (gp_frame_scan(&s->scan, s->to_client + s->tc_end,
		    (size_t)n) != 0) {
			gp_warn("stream id=%lld: bad frame from the agent",
			    (long long)s->id);
			mark_dead(s);
			return;
		}
		s->tc_end += (size_t)n;
		atomic_fetch_add(&bytes_from_job, n);
		touch_idle(s);
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		int normal = s->scan.last_type == GP_FRAME_EXIT ||
		    s->scan.last_type == GP_FRAME_ERROR;

		leg_close(&s->agent);
		if (!normal)
			atomic_fetch_add(&agent_lost_total, 1);
		gp_info("stream closed id=%lld job=%lld by=agent normal=%d",
		    (long long)s->id, (long long)s->job_id, normal);
		end_stream(s, normal ? NULL :
		    "the connection to the job's agent was lost (the agent "
		    "or its machine went away)");
	}
}

static void
write_leg(struct relay_stream *s, int which)
{
	struct leg *l = which == LEG_CLIENT ? &s->client : &s->agent;
	int fd = l->fd;
	uint8_t *buf = which == LEG_CLIENT ? s->to_client : s->to_agent;
	size_t *start = which == LEG_CLIENT ? &s->tc_start : &s->ta_start;
	size_t end = which == LEG_CLIENT ? s->tc_end : s->ta_end;
	ssize_t n;

	if (fd < 0 || end == *start)
		return;
	n = l->tls != NULL ? relay_tls_send(l->tls, buf + *start,
	    end - *start) : send(fd, buf + *start, end - *start, MSG_NOSIGNAL);
	if (n > 0) {
		*start += (size_t)n;
		if (*start == end) {
			*start = 0;
			if (which == LEG_CLIENT)
				s->tc_end = 0;
			else
				s->ta_end = 0;
		}
	}
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		mark_dead(s);
}

/*
 * A TLS leg's decrypted bytes wait in GnuTLS, where epoll cannot see
 * them: read them while there is room. Call with w's lock. Returns 1
 * when some are still waiting with room to take them (its rounds are
 * bounded): the worker must not sleep on epoll then, which would never
 * tell it (a worker other than 0 has no tick: the stream stalled).
 */
/* 1 when a TLS leg of s holds decrypted bytes and its buffer has room. */
static int
tls_waiting(const struct relay_stream *s, int which)
{
	if (s->dead || s->closing)
		return 0;
	if (which == LEG_CLIENT)
		return s->client.tls != NULL &&
		    relay_tls_pending(s->client.tls) > 0 &&
		    s->ta_end - s->ta_start < RELAY_BUFFER;
	return s->agent.tls != NULL && relay_tls_pending(s->agent.tls) > 0 &&
	    s->tc_end - s->tc_start < RELAY_BUFFER;
}

static int
tls_drain(struct relay_worker *w)
{
	struct relay_stream *s;
	int more = 0;

	for (s = w->streams; s != NULL; s = s->next_in_worker) {
		int moved = 0, round;

		if (!s->spliced)
			continue;
		/* Bounded: a read with room takes what GnuTLS holds. */
		for (round = 0; round < 8 && tls_waiting(s, LEG_CLIENT);
		    round++) {
			read_client(s);
			write_leg(s, LEG_AGENT);
			moved = 1;
		}
		for (round = 0; round < 8 && tls_waiting(s, LEG_AGENT);
		    round++) {
			read_agent(s);
			write_leg(s, LEG_CLIENT);
			moved = 1;
		}
		if (moved && !s->dead)
			leg_interest(s);
		if (tls_waiting(s, LEG_CLIENT) || tls_waiting(s, LEG_AGENT))
			more = 1;
	}
	return more;
}

/* Off the lists first (relay_lock and its worker's lock). */
static void
free_stream(struct relay_stream *s)
{
	leg_close(&s->client);
	leg_close(&s->agent);
	atomic_fetch_sub(&active_count, 1);
	atomic_fetch_sub(&s->w->nstreams, 1);
	free(s);
}

/*
 * Frees w's dead streams and its closing ones that are flushed or
 * overdue, and takes its ending ones out of their jobs' counts. Walks
 * the lists only when one of w's streams left (reap_wanted), and keeps
 * wanting to while one still closes. Call with relay_lock and w's lock,
 * in w's own thread (or once the workers are stopped).
 */
static void
reap(struct relay_worker *w, int64_t now)
{
	struct relay_stream **p, *s;
	int closing = 0;

	if (!atomic_exchange(&w->reap_wanted, 0))
		return;
	for (s = w->streams; s != NULL; s = s->next_in_worker) {
		if (s->closing && (s->tc_end == s->tc_start ||
		    s->client.fd < 0 || now - s->closing_mono > CLOSE_FLUSH_MS))
			s->dead = 1;
		uncount(s);
		closing |= s->closing && !s->dead;
	}
	/* Off the pending list: its agent will never dial it. */
	for (p = &pending; (s = *p) != NULL;)
		if (s->w == w && (s->dead || s->closing))
			*p = s->next_pending;
		else
			p = &s->next_pending;
	for (p = &streams; (s = *p) != NULL;)
		if (s->w == w && s->dead)
			*p = s->next;
		else
			p = &s->next;
	for (p = &w->streams; (s = *p) != NULL;)
		if (s->dead) {
			*p = s->next_in_worker;
			free_stream(s);
		} else
			p = &s->next_in_worker;
	if (closing)
		atomic_store(&w->reap_wanted, 1);
}

/* ---- the tick: expiry, attempts, idle ends ---- */

static void
cancel_for_idle(int64_t job_id)
{
	struct token_entry caller;
	struct op *op;

	memset(&caller, 0, sizeof(caller));
	caller.role = GP_ROLE_ADMIN;
	gp_strlcpy(caller.name, "idle-limit", sizeof(caller.name));
	if ((op = op_new(OP_CANCEL, &caller)) == NULL)
		return;
	op->job_id = job_id;
	state_submit_op(op);
}

/*
 * Ends s for why from the tick: relay_lock held; takes s's worker's lock.
 */
static void
tick_end(struct relay_stream *s, const char *why)
{
	pthread_mutex_lock(&s->w->lock);
	end_stream(s, why);
	if (s->spliced && !s->dead)
		leg_interest(s);
	pthread_mutex_unlock(&s->w->lock);
	uncount(s);
}

/* The streams' last traffic into their jobs' idle clocks (relay_lock). */
static void
fold_traffic(void)
{
	struct relay_stream *s;
	int64_t t;

	for (s = streams; s != NULL; s = s->next) {
		if (s->idle == NULL)
			continue;
		t = atomic_load(&s->traffic_mono);
		if (t > s->idle->last_mono) {
			s->idle->last_mono = t;
			s->idle->warned = 0;
		}
	}
}

static void
tick(int64_t now)
{
	struct relay_stream *s;
	struct idle_job **pj, *j;
	char text[256];
	int64_t cancel[64];
	struct idle_job save[64];
	int ncancel = 0, nsave = 0, i, spliced;

	pthread_rwlock_rdlock(&state.lock);
	pthread_mutex_lock(&relay_lock);
	for (s = streams; s != NULL; s = s->next) {
		struct job *job = state_job(s->job_id);

		if (s->dead || s->closing)
			continue;
		pthread_mutex_lock(&s->w->lock);
		spliced = s->spliced;
		pthread_mutex_unlock(&s->w->lock);
		if (job == NULL || job->state != JOB_RUNNING ||
		    job->attempts != s->attempt ||
		    part_node(job, s->part) != s->node_id) {
			snprintf(text, sizeof(text), "job %lld's attempt %d "
			    "ended", (long long)s->job_id, s->attempt);
			tick_end(s, text);
		} else if (!spliced && now - s->created_mono >
		    cfg.connect_ms) {
			snprintf(text, sizeof(text), "the job's agent did not "
			    "connect within %lld s", (long long)(
			    cfg.connect_ms / 1000));
			tick_end(s, text);
		}
	}
	fold_traffic();
	pj = &idle_jobs;
	while ((j = *pj) != NULL) {
		struct job *job = state_job(j->job_id);
		int64_t idle = now - j->last_mono;
		int64_t warn = j->idle_ms / 4 < 60000 ? j->idle_ms / 4 : 60000;

		if (job == NULL || job->state != JOB_RUNNING ||
		    job->attempts != j->attempt) {
			*pj = j->next;
			for (s = streams; s != NULL; s = s->next)
				if (s->idle == j)
					s->idle = NULL;
			free(j);
			continue;
		}
		if (!j->warned && idle >= j->idle_ms - warn) {
			j->warned = 1;
			snprintf(text, sizeof(text), "\r\ngpupool: no input "
			    "for %llds; job %lld ends in %llds unless you "
			    "type something\r\n",
			    (long long)(idle / 1000), (long long)j->job_id,
			    (long long)((j->idle_ms - idle + 999) / 1000));
			for (s = streams; s != NULL; s = s->next) {
				if (s->idle != j)
					continue;
				pthread_mutex_lock(&s->w->lock);
				if (s->spliced && !s->closing && !s->dead &&
				    gp_frame_scan_at_boundary(&s->scan) &&
				    append_frame(s->to_client, &s->tc_start,
				    &s->tc_end, GP_FRAME_NOTICE, text))
					leg_interest(s);
				pthread_mutex_unlock(&s->w->lock);
			}
		}
		if (idle >= j->idle_ms && ncancel < (int)GP_ARRAY_LEN(cancel)) {
			snprintf(text, sizeof(text), "idle for %llds (the "
			    "limit): job %lld ended",
			    (long long)(idle / 1000), (long long)j->job_id);
			for (s = streams; s != NULL; s = s->next)
				if (s->idle == j) {
					tick_end(s, text);
					s->idle = NULL;
				}
			cancel[ncancel++] = j->job_id;
			gp_info("idle end job=%lld idle_ms=%lld",
			    (long long)j->job_id, (long long)idle);
			atomic_fetch_add(&idle_ends_total, 1);
			*pj = j->next;
			free(j);
			continue;
		}
		if ((j->idle_ms != j->saved_limit || j->last_mono -
		    j->saved_mono >= idle_grain_ms(j->idle_ms)) &&
		    nsave < (int)GP_ARRAY_LEN(save)) {
			j->saved_mono = j->last_mono;
			j->saved_limit = j->idle_ms;
			save[nsave++] = *j;
		}
		pj = &j->next;
	}
	pthread_mutex_unlock(&relay_lock);
	pthread_rwlock_unlock(&state.lock);
	/* The workers whose streams ended reap them now. */
	for (i = 0; i < nworkers; i++)
		if (atomic_load(&workers[i].reap_wanted))
			wake(&workers[i]);
	for (i = 0; i < ncancel; i++)
		cancel_for_idle(cancel[i]);
	for (i = 0; i < nsave; i++) {
		state_note_idle(save[i].job_id, save[i].attempt,
		    save[i].idle_ms, gp_now_ms() - (now - save[i].last_mono));
		gp_debug("idle clock saved job=%lld attempt=%d limit_ms=%lld",
		    (long long)save[i].job_id, save[i].attempt,
		    (long long)save[i].idle_ms);
	}
}

/*
 * The idle clocks the store kept (state_note_idle), after a restart:
 * each running attempt with a limit gets its clock back, its last
 * traffic taken a grain after the stored time (the store may be up to
 * a grain behind) and never later than now. Call before the thread.
 */
static void
idle_rebuild(void)
{
	int64_t cursor = 0, now_wall = gp_now_ms(), now = gp_mono_ms(), seen;
	struct attempt_record *a;
	struct idle_job *j;
	struct job *job;
	int n = 0;

	pthread_rwlock_rdlock(&state.lock);
	pthread_mutex_lock(&relay_lock);
	while ((job = state_job_next(&cursor)) != NULL) {
		if (job->state != JOB_RUNNING || job->nhistory == 0)
			continue;
		a = &job->history[job->nhistory - 1];
		if (a->attempt != job->attempts || a->idle_limit_ms <= 0 ||
		    (j = calloc(1, sizeof(*j))) == NULL)
			continue;
		j->job_id = job->id;
		j->attempt = a->attempt;
		j->idle_ms = a->idle_limit_ms < cfg.idle_max_ms ?
		    a->idle_limit_ms : cfg.idle_max_ms;
		seen = a->idle_seen_ms + idle_grain_ms(a->idle_limit_ms);
		if (seen > now_wall)
			seen = now_wall;
		j->last_mono = now - (now_wall - seen);
		/* What the store has: nothing to write until traffic. */
		j->saved_mono = j->last_mono;
		j->saved_limit = j->idle_ms;
		j->next = idle_jobs;
		idle_jobs = j;
		n++;
		gp_info("idle clock kept job=%lld attempt=%d limit_ms=%lld "
		    "idle_ms=%lld", (long long)j->job_id, j->attempt,
		    (long long)j->idle_ms, (long long)(now - j->last_mono));
	}
	pthread_mutex_unlock(&relay_lock);
	pthread_rwlock_unlock(&state.lock);
	if (n > 0)
		gp_info("relay: %d idle clocks kept across the restart", n);
}

static void *
relay_main(void *arg)
{
	struct relay_worker *w = arg;
	struct epoll_event evs[64];
	int64_t last_tick = 0, now;
	int n, i, timeout, more = 0;
	char name[16];

	/* top -H, /proc/PID/task/TID/comm: the load per worker. */
	snprintf(name, sizeof(name), "gp-relay-%d", w->index);
	pthread_setname_np(pthread_self(), name);
	while (atomic_load(&running)) {
		/*
		 * Worker 0 ticks; the others sleep until an event, or while
		 * one of their streams closes, reap on the tick's beat; none
		 * sleeps while GnuTLS holds bytes it has room to take.
		 */
		timeout = more ? 0 : w->index == 0 ||
		    atomic_load(&w->reap_wanted) ? TICK_MS : -1;
		n = epoll_wait(w->epfd, evs, GP_ARRAY_LEN(evs), timeout);
		pthread_mutex_lock(&w->lock);
		for (i = 0; i < n; i++) {
			struct leg *l = evs[i].data.ptr;
			struct relay_stream *s;
			uint64_t v;

			if (l == NULL) {
				if (read(w->wakefd, &v, sizeof(v)) < 0)
					(void)0;
				continue;
			}
			s = l->s;
			if (s->dead)
				continue;
			if (evs[i].events & EPOLLOUT)
				write_leg(s, l->which);
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				/*
				 * A few rounds of read and pass on while both
				 * sides keep up: fewer epoll rounds for a bulk
				 * transfer, still bounded for fairness.
				 */
				int round;
				for (round = 0; round < 4 && !s->dead &&
				    !s->closing; round++) {
					size_t before = l->which == LEG_CLIENT ?
					    s->ta_end - s->ta_start :
					    s->tc_end - s->tc_start;
					if (l->which == LEG_CLIENT)
						read_client(s);
					else
						read_agent(s);
					if (s->dead)
						break;
					write_leg(s, LEG_CLIENT);
					write_leg(s, LEG_AGENT);
					if ((l->which == LEG_CLIENT ?
					    s->ta_end - s->ta_start :
					    s->tc_end - s->tc_start) >= before &&
					    round > 0)
						break;
				}
			}
			/* Move what came in at once, without a round. */
			if (!s->dead) {
				write_leg(s, LEG_CLIENT);
				write_leg(s, LEG_AGENT);
			}
		}
		for (i = 0; i < n; i++) {
			struct leg *l = evs[i].data.ptr;

			if (l != NULL && !l->s->dead)
				leg_interest(l->s);
		}
		more = atomic_load(&tls_legs) > 0 && tls_drain(w);
		pthread_mutex_unlock(&w->lock);
		now = gp_mono_ms();
		if (atomic_load(&w->reap_wanted)) {
			pthread_mutex_lock(&relay_lock);
			pthread_mutex_lock(&w->lock);
			reap(w, now);
			pthread_mutex_unlock(&w->lock);
			pthread_mutex_unlock(&relay_lock);
		}
		if (w->index == 0 && now - last_tick >= TICK_MS) {
			last_tick = now;
			tick(now);
			if (atomic_load(&w->reap_wanted)) {
				pthread_mutex_lock(&relay_lock);
				pthread_mutex_lock(&w->lock);
				reap(w, now);
				pthread_mutex_unlock(&w->lock);
				pthread_mutex_unlock(&relay_lock);
			}
		}
		close_deferred(w);
	}
	return NULL;
}

/* The pool's size: the configuration's, else one per core (at most 16). */
static int
pool_size(int asked)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (asked <= 0)
		asked = cores < 1 ? 1 : (int)(cores < RELAY_THREADS_MAX ?
		    cores : RELAY_THREADS_MAX);
	return asked < RELAY_THREADS_MAX ? asked : RELAY_THREADS_MAX;
}

/* Stops and joins the started workers and closes their descriptors. */
static void
workers_stop(void)
{
	int i;

	atomic_store(&running, 0);
	for (i = 0; i < nworkers; i++)
		if (workers[i].started)
			wake(&workers[i]);
	for (i = 0; i < nworkers; i++)
		if (workers[i].started) {
			pthread_join(workers[i].thread, NULL);
			workers[i].started = 0;
		}
}

static void
workers_close(void)
{
	int i;

	for (i = 0; i < nworkers; i++) {
		if (workers[i].epfd >= 0)
			close(workers[i].epfd);
		if (workers[i].wakefd >= 0)
			close(workers[i].wakefd);
		workers[i].epfd = workers[i].wakefd = -1;
		pthread_mutex_destroy(&workers[i].lock);
	}
	nworkers = 0;
}

int
relay_start(const struct relay_config *c)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int i, n;

	cfg = *c;
	idle_rebuild();
	n = pool_size(cfg.threads);
	for (i = 0; i < n; i++) {
		struct relay_worker *w = &workers[i];

		memset(w, 0, sizeof(*w));
		w->index = i;
		pthread_mutex_init(&w->lock, NULL);
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		w->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		nworkers = i + 1;
		if (w->epfd < 0 || w->wakefd < 0 ||
		    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &ev) != 0) {
			workers_close();
			return GP_EIO;
		}
	}
	atomic_store(&running, 1);
	for (i = 0; i < nworkers; i++) {
		if (pthread_create(&workers[i].thread, NULL, relay_main,
		    &workers[i]) != 0) {
			workers_stop();
			workers_close();
			return GP_EIO;
		}
		workers[i].started = 1;
	}
	gp_info("relay: %d threads", nworkers);
	return 0;
}

void
relay_stop(void)
{
	struct relay_stream *s;
	int i;

	if (!atomic_load(&running))
		return;
	workers_stop();
	/* The workers are gone: this thread alone touches the streams. */
	pthread_mutex_lock(&relay_lock);
	while ((s = streams) != NULL) {
		streams = s->next;
		if (s->spliced && gp_frame_scan_at_boundary(&s->scan))
			write_frame_now(s->client.fd, s->client.tls,
			    GP_FRAME_ERROR,
			    "the coordinator is stopping");
		free_stream(s);
	}
	for (i = 0; i < nworkers; i++)
		workers[i].streams = NULL;
	while (idle_jobs != NULL) {
		struct idle_job *j = idle_jobs;
		idle_jobs = j->next;
		free(j);
	}
	pending = NULL;
	free(job_counts);
	job_counts = NULL;
	njob_counts = job_counts_cap = 0;
	pthread_mutex_unlock(&relay_lock);
	for (i = 0; i < nworkers; i++)
		close_deferred(&workers[i]);
	workers_close();
}

/* ---- what others ask ---- */

int
relay_open(int64_t job_id, const char *user, int kind, int64_t idle_ms,
    int *fd, int64_t *stream_id)
{
	return relay_open_part(job_id, 0, user, kind, idle_ms, fd, stream_id);
}

int
relay_open_part(int64_t job_id, int part, const char *user, int kind,
    int64_t idle_ms, int *fd, int64_t *stream_id)
{
	struct relay_stream *s;
	struct relay_worker *w;
	char err[256];
	int sv[2], size = RELAY_BUFFER, status;
	int64_t id;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) != 0)
		return GP_EIO;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	pthread_rwlock_rdlock(&state.lock);
	status = stream_create(job_id, part, user, kind, idle_ms, &id, err,
	    sizeof(err));
	pthread_rwlock_unlock(&state.lock);
	if (status != 0) {
		close(sv[0]);
		close(sv[1]);
		return status == 404 ? GP_ENOENT : status == 400 ?
		    GP_EINVAL : status == 409 ?
		    GP_ECONFLICT : status == 429 ? GP_ETOOBIG : GP_ENOMEM;
	}
	pthread_mutex_lock(&relay_lock);
	s = find_stream(id);
	if (s == NULL || s->dead || s->closing) {
		pthread_mutex_unlock(&relay_lock);
		close(sv[0]);
		close(sv[1]);
		return GP_ECONFLICT;
	}
	w = s->w;
	pthread_mutex_lock(&w->lock);
	leg_attach(s, LEG_CLIENT, sv[0], NULL, NULL, NULL, 0);
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_unlock(&relay_lock);
	wake(w);
	*stream_id = id;
	*fd = sv[1];
	return 0;
}

int
relay_job_sessions(int64_t job_id)
{
	size_t i;
	int n = 0;

	pthread_mutex_lock(&relay_lock);
	i = job_count_find(job_id);
	if (i < njob_counts && job_counts[i].job_id == job_id)
		n = job_counts[i].n;
	pthread_mutex_unlock(&relay_lock);
	return n;
}

/* Only the pending list: the node's open streams cost its poll nothing. */
int
relay_node_has_streams(int64_t node_id)
{
	struct relay_stream *s;
	int has = 0;

	pthread_mutex_lock(&relay_lock);
	for (s = pending; s != NULL && !has; s = s->next_pending)
		has = s->node_id == node_id && !s->dead && !s->closing;
	pthread_mutex_unlock(&relay_lock);
	return has;
}

json_t *
relay_node_take_streams(int64_t node_id)
{
	struct relay_stream **p, *s;
	json_t *list = json_array();

	pthread_mutex_lock(&relay_lock);
	for (p = &pending; (s = *p) != NULL && list != NULL;) {
		if (s->node_id != node_id || s->dead || s->closing) {
			p = &s->next_pending;
			continue;
		}
		s->announced = 1;
		*p = s->next_pending;
		json_array_append_new(list, json_pack("{s:I,s:s,s:I,s:i,s:s}",
		    "id", (json_int_t)s->id, "secret", s->secret, "job_id",
		    (json_int_t)s->job_id, "attempt", s->attempt, "kind",
		    gp_stream_kind_name(s->kind)));
	}
	pthread_mutex_unlock(&relay_lock);
	return list;
}

int
relay_metrics_render(struct gp_buf *out)
{
	const char *to[] = {"direction", "to_job", NULL};
	const char *from[] = {"direction", "from_job", NULL};
	const char *cl[] = {"leg", "client", NULL};
	const char *ag[] = {"leg", "agent", NULL};
	int rc = 0, i;

	rc |= gp_prom_family(out, "gpupool_streams_active", "gauge",
	    "Interactive streams open (shells, exec, port forwards)");
	rc |= gp_prom_sample(out, "gpupool_streams_active", NULL,
	    (double)atomic_load(&active_count));
	rc |= gp_prom_family(out, "gpupool_streams_opened_total", "counter",
	    "Interactive streams opened");
	rc |= gp_prom_sample(out, "gpupool_streams_opened_total", NULL,
	    (double)atomic_load(&opened_total));
	rc |= gp_prom_family(out, "gpupool_streams_refused_total", "counter",
	    "Interactive streams refused by a cap");
	rc |= gp_prom_sample(out, "gpupool_streams_refused_total", NULL,
	    (double)atomic_load(&refused_total));
	rc |= gp_prom_family(out, "gpupool_stream_bytes_total", "counter",
	    "Bytes relayed by interactive streams");
	rc |= gp_prom_sample(out, "gpupool_stream_bytes_total", to,
	    (double)atomic_load(&bytes_to_job));
	rc |= gp_prom_sample(out, "gpupool_stream_bytes_total", from,
	    (double)atomic_load(&bytes_from_job));
	rc |= gp_prom_family(out, "gpupool_stream_leg_reads_total", "counter",
	    "Reads from stream legs that returned bytes (bytes / reads: "
	    "the relay's read size)");
	rc |= gp_prom_sample(out, "gpupool_stream_leg_reads_total", cl,
	    (double)atomic_load(&leg_reads[LEG_CLIENT]));
	rc |= gp_prom_sample(out, "gpupool_stream_leg_reads_total", ag,
	    (double)atomic_load(&leg_reads[LEG_AGENT]));
	rc |= gp_prom_family(out, "gpupool_stream_tls_legs_total", "counter",
	    "Stream legs whose TLS the relay held (HTTPS coordinator)");
	rc |= gp_prom_sample(out, "gpupool_stream_tls_legs_total", NULL,
	    (double)atomic_load(&tls_legs_total));
	rc |= gp_prom_family(out, "gpupool_relay_thread_streams", "gauge",
	    "Streams given to each relay thread and not yet freed");
	for (i = 0; i < nworkers; i++) {
		char index[12];
		const char *th[] = {"thread", index, NULL};

		snprintf(index, sizeof(index), "%d", i);
		rc |= gp_prom_sample(out, "gpupool_relay_thread_streams", th,
		    (double)atomic_load(&workers[i].nstreams));
	}
	rc |= gp_prom_family(out, "gpupool_stream_idle_ends_total", "counter",
	    "Interactive jobs ended by their idle limit");
	rc |= gp_prom_sample(out, "gpupool_stream_idle_ends_total", NULL,
	    (double)atomic_load(&idle_ends_total));
	rc |= gp_prom_family(out, "gpupool_stream_agent_lost_total",
	    "counter", "Streams whose agent leg broke before an exit status");
	rc |= gp_prom_sample(out, "gpupool_stream_agent_lost_total", NULL,
	    (double)atomic_load(&agent_lost_total));
	return rc;
}

/* ---- the routes ---- */

struct upgrade_ref {
	int64_t id;
	int which;
};

/* 1 when s takes leg which (relay_lock and s's worker's lock). */
static int
leg_free(struct relay_stream *s, int which)
{
	const struct leg *l = which == LEG_CLIENT ? &s->client : &s->agent;

	return !s->dead && !s->closing && l->fd < 0;
}

static void
on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls,
    const char *extra_in, size_t extra_in_size, MHD_socket sock,
    struct MHD_UpgradeResponseHandle *urh)
{
	struct upgrade_ref *ref = cls;
	struct relay_stream *s;
	struct relay_worker *w;

	(void)conn;
	(void)con_cls;
	pthread_mutex_lock(&relay_lock);
	s = find_stream(ref->id);
	w = s == NULL ? NULL : s->w;
	if (w != NULL)
		pthread_mutex_lock(&w->lock);
	if (s == NULL || !leg_free(s, ref->which)) {
		if (w != NULL)
			pthread_mutex_unlock(&w->lock);
		pthread_mutex_unlock(&relay_lock);
		write_frame_now(sock, NULL, GP_FRAME_ERROR,
		    "the stream has ended");
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		free(ref);
		return;
	}
	leg_attach(s, ref->which, sock, urh, NULL, extra_in, extra_in_size);
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_unlock(&relay_lock);
	wake(w);
	free(ref);
}

/* Answers 101 and hands the socket to on_upgrade for stream id. */
static enum MHD_Result
reply_upgrade(struct MHD_Connection *conn, int64_t id, int which)
{
	struct MHD_Response *resp;
	struct upgrade_ref *ref = malloc(sizeof(*ref));
	enum MHD_Result rc;

	if (ref == NULL)
		return reply_error(conn, 503, "out of memory");
	ref->id = id;
	ref->which = which;
	/*
	 * ref is freed by on_upgrade; a connection that dies between this
	 * answer and the upgrade leaks these 16 bytes, and its stream is
	 * expired by the tick (connect_ms).
	 */
	resp = MHD_create_response_for_upgrade(on_upgrade, ref);
	if (resp == NULL) {
		free(ref);
		return reply_error(conn, 503, "out of memory");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE,
	    GP_STREAM_PROTOCOL);
	rc = MHD_queue_response(conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	return rc;
}

static int
wants_upgrade(struct MHD_Connection *conn)
{
	const char *up = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_UPGRADE);

	return up != NULL && strcmp(up, GP_STREAM_PROTOCOL) == 0;
}

/*
 * Hands the leg to the relay: through the Upgrade on plain HTTP; on TLS
 * with the relay holding the connection's TLS session (relay_tls.h).
 */
static enum MHD_Result
reply_stream(struct MHD_Connection *conn, struct request *req, int64_t id,
    int which)
{
	struct relay_tls *tls;
	struct relay_stream *s;
	struct relay_worker *w;
	char head[160];
	int fd, n;

	n = snprintf(head, sizeof(head), "HTTP/1.1 101 Switching Protocols\r\n"
	    "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n",
	    GP_STREAM_PROTOCOL);
	tls = relay_tls_take(conn, head, (size_t)n, &fd);
	if (tls == NULL)
		return fd == -1 ? reply_upgrade(conn, id, which) : MHD_NO;
	req->relay_taken = 1;
	pthread_mutex_lock(&relay_lock);
	s = find_stream(id);
	w = s == NULL ? NULL : s->w;
	if (w != NULL)
		pthread_mutex_lock(&w->lock);
	if (s == NULL || !leg_free(s, which)) {
		if (w != NULL)
			pthread_mutex_unlock(&w->lock);
		write_frame_now(fd, tls, GP_FRAME_ERROR, "the stream has ended");
		relay_tls_shut(tls);
		pthread_mutex_unlock(&relay_lock);
		relay_tls_release(tls);
		return MHD_YES;
	}
	leg_attach(s, which, fd, NULL, tls, NULL, 0);
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_unlock(&relay_lock);
	wake(w);
	return MHD_YES;
}

/* GET /v1/jobs/{id}/stream?kind=pty&idle=SECONDS&part=K, Upgrade. */
static enum MHD_Result
route_client(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	API_PATH_PARTS(url, p, n);
	int64_t job_id, idle_s, id, part;
	const char *kind_name;
	char err[256];
	int kind, status;

	(void)method;
	if (req->relay_taken) {
		/* Resumed at the stream's end (relay_tls.h): close. */
		relay_tls_set_quiet_close();
		return MHD_NO;
	}
	if (n != 4 || !api_path_id(p[2], &job_id))
		return api_no_route(conn, url, method, 0);
	if (!wants_upgrade(conn))
		return reply_error(conn, 400, "a stream needs 'Upgrade: %s'",
		    GP_STREAM_PROTOCOL);
	kind_name = api_query(conn, "kind");
	if ((kind = gp_stream_kind_parse(kind_name)) == 0)
		return reply_error(conn, 400, "kind: exec, pty or tcp");
	if (api_query_int(conn, "idle", 0, 0, 366 * 86400, &idle_s) != 0)
		return reply_error(conn, 400, "idle: seconds, 0 to 31622400");
	if (api_query_int(conn, "part", 0, 0, GP_NODES_MAX - 1, &part) != 0)
		return reply_error(conn, 400, "part: a gang's part, 0 to %d",
		    GP_NODES_MAX - 1);
	pthread_rwlock_rdlock(&state.lock);
	status = stream_create(job_id, (int)part, req->auth->name, kind,
	    idle_s * 1000, &id, err, sizeof(err));
	pthread_rwlock_unlock(&state.lock);
	if (status != 0)
		return reply_error(conn, status, "%s", err);
	return reply_stream(conn, req, id, LEG_CLIENT);
}

/* GET /v1/agent/stream?id=N, X-Gpupool-Stream-Secret, Upgrade. */
static enum MHD_Result
route_agent(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method)
{
	const char *secret = MHD_lookup_connection_value(conn,
	    MHD_HEADER_KIND, "X-Gpupool-Stream-Secret");
	struct relay_stream *s;
	struct node *node;
	int64_t id, node_id = 0;
	int ok = 0;

	(void)url;
	(void)method;
	if (req->relay_taken) {
		relay_tls_set_quiet_close();
		return MHD_NO;
	}
	if (!wants_upgrade(conn))
		return reply_error(conn, 400, "a stream needs 'Upgrade: %s'",
		    GP_STREAM_PROTOCOL);
	if (api_query_int(conn, "id", -1, 1, INT64_MAX, &id) != 0 || id < 0)
		return reply_error(conn, 400, "id: a stream id");
	if (secret == NULL || strlen(secret) != SECRET_HEX - 1)
		return reply_error(conn, 403, "no such stream");
	pthread_rwlock_rdlock(&state.lock);
	pthread_mutex_lock(&relay_lock);
	s = find_stream(id);
	if (s != NULL) {
		pthread_mutex_lock(&s->w->lock);
		if (leg_free(s, LEG_AGENT) && sodium_memcmp(s->secret, secret,
		    SECRET_HEX - 1) == 0) {
			node_id = s->node_id;
			ok = 1;
		}
		pthread_mutex_unlock(&s->w->lock);
	}
	pthread_mutex_unlock(&relay_lock);
	node = ok ? state_node(node_id) : NULL;
	ok = node != NULL && node->owner_token == req->auth->id;
	pthread_rwlock_unlock(&state.lock);
	if (!ok)
		return reply_error(conn, 403, "no such stream");
	return reply_stream(conn, req, id, LEG_AGENT);
}

#define STREAM_USERS (API_ROLE(GP_ROLE_USER) | API_ROLE(GP_ROLE_ADMIN))

const struct api_route relay_routes[] = {
    {"/v1/jobs/{id}/stream", API_GET, STREAM_USERS,
        "only the job's owner may open a stream into it", 0, 0,
        route_client, NULL},
    {"/v1/agent/stream", API_GET, API_PROVIDERS,
        "only agents dial streams", 0, 0, route_agent, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
