/*
 * gang_relay_table.c: the gang relay's decisions (gang_relay_table.h):
 * a small table of the gangs it relays for (an entry made when a running
 * gang's part first sends an authentic datagram, looked up with alive
 * every RELAY_CHECK_MS, forgotten when its attempt no longer runs or its
 * flows go quiet), each part's key (derived from the secret when first
 * needed), flow, counter and rate. No I/O but the log; one thread.
 */
#include "gang_relay_table.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "log.h"

static const char *const drop_names[RELAY_NDROPS] = {"malformed", "auth",
    "no_gang", "full", "replay", "unregistered", "no_peer", "rate", "send"};

struct rpart {
	int known;		/* its key derived */
	uint8_t key[GP_RELAY_KEY];
	struct sockaddr_storage addr;	/* its flow */
	socklen_t addrlen;	/* 0: none yet */
	uint64_t counter;	/* the largest it sent */
	int64_t tokens, refill_ms; /* its rate */
};

struct rgang {
	int64_t job;
	uint32_t attempt;
	int parts;
	int64_t checked_ms, seen_ms;
	struct rpart part[GP_RELAY_PARTS_MAX];
};

struct relay_table {
	uint8_t secret[GP_RELAY_KEY];
	relay_alive_fn alive;
	struct rgang *gangs[RELAY_GANGS_MAX];
	int ngangs;
};

const char *
relay_drop_name(int reason)
{
	return reason >= 0 && reason < RELAY_NDROPS ? drop_names[reason] : "?";
}

struct relay_table *
relay_table_new(const uint8_t secret[GP_RELAY_KEY], relay_alive_fn alive)
{
	struct relay_table *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	memcpy(t->secret, secret, GP_RELAY_KEY);
	t->alive = alive;
	return t;
}

static struct rgang *
gang_find(struct relay_table *t, int64_t job, uint32_t attempt)
{
	int i;

	for (i = 0; i < t->ngangs; i++)
		if (t->gangs[i]->job == job && t->gangs[i]->attempt == attempt)
			return t->gangs[i];
	return NULL;
}

static void
gang_forget(struct relay_table *t, int i, const char *why)
{
	struct rgang *g = t->gangs[i];

	gp_info("gang relay: forgot job=%lld attempt=%u: %s",
	    (long long)g->job, g->attempt, why);
	sodium_memzero(g, sizeof(*g));
	free(g);
	t->gangs[i] = t->gangs[--t->ngangs];
}

void
relay_table_free(struct relay_table *t)
{
	if (t == NULL)
		return;
	while (t->ngangs > 0)
		gang_forget(t, t->ngangs - 1, "the relay stops");
	sodium_memzero(t, sizeof(*t));
	free(t);
}

int
relay_table_gangs(const struct relay_table *t)
{
	return t->ngangs;
}

static struct rpart *
part_of(struct relay_table *t, struct rgang *g, int part)
{
	struct rpart *p = &g->part[part];

	if (!p->known) {
		gp_relay_part_key(t->secret, g->job, g->attempt, part, p->key);
		p->known = 1;
		p->tokens = RELAY_PART_RATE;
	}
	return p;
}

/* A part's rate: 1 when len more bytes may go now. */
static int
rate_take(struct rpart *p, size_t len, int64_t now)
{
	if (now > p->refill_ms) {
		int64_t add = (now - p->refill_ms) * (RELAY_PART_RATE / 1000);

		p->tokens = p->tokens + add > RELAY_PART_RATE ?
		    RELAY_PART_RATE : p->tokens + add;
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

static enum relay_verdict
drop(struct relay_out *out, enum relay_drop why)
{
	out->reason = why;
	return RELAY_DROP;
}

enum relay_verdict
relay_table_handle(struct relay_table *t, uint8_t *buf, size_t *len,
    const struct sockaddr_storage *src, socklen_t srclen, int64_t now,
    struct relay_out *out)
{
	struct gp_relay_header h;
	const uint8_t *payload;
	size_t plen;
	struct rgang *g;
	struct rpart *from, *to;
	uint8_t key[GP_RELAY_KEY];
	int parts = 0;

	memset(out, 0, sizeof(*out));
	if (gp_relay_decode(buf, *len, &h, &payload, &plen) != 0)
		return drop(out, RELAY_DROP_MALFORMED);
	if ((g = gang_find(t, h.job, h.attempt)) == NULL) {
		/* Authentic first (cheap), then the model (a lock). */
		gp_relay_part_key(t->secret, h.job, h.attempt, h.from, key);
		if (!gp_relay_verify(buf, *len, key)) {
			sodium_memzero(key, sizeof(key));
			return drop(out, RELAY_DROP_AUTH);
		}
		sodium_memzero(key, sizeof(key));
		if (!t->alive(h.job, h.attempt, &parts) || parts < 2 ||
		    parts > GP_RELAY_PARTS_MAX || h.from >= parts ||
		    h.to >= parts)
			return drop(out, RELAY_DROP_NO_GANG);
		if (t->ngangs == RELAY_GANGS_MAX ||
		    (g = calloc(1, sizeof(*g))) == NULL)
			return drop(out, RELAY_DROP_FULL);
		g->job = h.job;
		g->attempt = h.attempt;
		g->parts = parts;
		g->checked_ms = g->seen_ms = now;
		t->gangs[t->ngangs++] = g;
		gp_info("gang relay: relaying job=%lld attempt=%u parts=%d",
		    (long long)g->job, g->attempt, parts);
	}
	if (h.from >= g->parts || h.to >= g->parts)
		return drop(out, RELAY_DROP_NO_GANG);
	from = part_of(t, g, h.from);
	if (!gp_relay_verify(buf, *len, from->key))
		return drop(out, RELAY_DROP_AUTH);
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
			memcpy(&from->addr, src, srclen);
			from->addrlen = srclen;
		}
		from->counter = h.counter;
		g->seen_ms = now;
	} else if (h.type == GP_RELAY_HELLO ||
	    !same_addr(&from->addr, from->addrlen, src, srclen))
		return drop(out, h.type == GP_RELAY_HELLO ?
		    RELAY_DROP_REPLAY : RELAY_DROP_UNREGISTERED);
	if (h.type == GP_RELAY_HELLO) {
		/* Answered, so that the agent knows its flow gets through. */
		h.type = GP_RELAY_HELLO_ACK;
		*len = gp_relay_encode(buf, &h, NULL, 0, from->key);
		return RELAY_ANSWER;
	}
	if (h.type != GP_RELAY_DATA)	/* an answer: the relay's own */
		return drop(out, RELAY_DROP_MALFORMED);
	to = part_of(t, g, h.to);
	if (to->addrlen == 0)
		return drop(out, RELAY_DROP_NO_PEER);
	if (!rate_take(from, *len, now))
		return drop(out, RELAY_DROP_RATE);
	out->to = &to->addr;
	out->tolen = to->addrlen;
	out->payload = plen;
	return RELAY_FORWARD;
}

void
relay_table_tick(struct relay_table *t, int64_t now)
{
	int i, parts;

	for (i = 0; i < t->ngangs; i++) {
		struct rgang *g = t->gangs[i];

		if (now - g->seen_ms > RELAY_IDLE_MS) {
			gang_forget(t, i--, "its flows went quiet");
			continue;
		}
		if (now - g->checked_ms < RELAY_CHECK_MS)
			continue;
		g->checked_ms = now;
		if (!t->alive(g->job, g->attempt, &parts))
			gang_forget(t, i--, "its attempt no longer runs");
	}
}
