/*
 * test_gang_relay.c: the gang relay's decisions (coord/gang_relay_table.c)
 * with a model of one running gang: only authentic datagrams of a running
 * gang's parts are taken; a part's flow is where its newest datagram came
 * from (a hello opens it and is answered; a replay cannot take it; data
 * reordered passes only from the flow); data goes to the flow of the part
 * it names, only once it has one; a part's rate is bounded; a gang that
 * no longer runs, or whose flows go quiet, is forgotten.
 */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sodium.h>
#include <string.h>

#include "coord/gang_relay_table.h"
#include "gp.h"

static const uint8_t secret[GP_RELAY_KEY] = {9, 8, 7};
static int running = 1;

/* The model: job 5, attempt 2, three parts, while running. */
static int
alive(int64_t job, uint32_t attempt, int *parts)
{
	if (job != 5 || attempt != 2 || !running)
		return 0;
	*parts = 3;
	return 1;
}

static struct sockaddr_storage
addr(uint16_t port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(0xc6336402);	/* 198.51.100.2 */
	sin->sin_port = htons(port);
	return ss;
}

static uint8_t buf[GP_RELAY_DATAGRAM_MAX];
static size_t len;

/* A datagram of part `from` (signed with `signer`'s key) into buf. */
static void
make(int type, int64_t job, int from, int to, uint64_t counter, int signer,
    size_t payload)
{
	struct gp_relay_header h = {type, job, 2, from, to, counter};
	uint8_t key[GP_RELAY_KEY], data[GP_RELAY_PAYLOAD_MAX];

	memset(data, 0x5a, sizeof(data));
	gp_relay_part_key(secret, job, 2, signer, key);
	len = gp_relay_encode(buf, &h, data, payload, key);
}

static enum relay_verdict
send_from(struct relay_table *t, uint16_t port, int64_t now,
    struct relay_out *out)
{
	struct sockaddr_storage src = addr(port);

	return relay_table_handle(t, buf, &len, &src, sizeof(struct sockaddr_in),
	    now, out);
}

static int
port_of(const struct relay_out *out)
{
	return ntohs(((const struct sockaddr_in *)out->to)->sin_port);
}

TEST(only_a_running_gangs_parts)
{
	struct relay_table *t = relay_table_new(secret, alive);
	struct relay_out out;

	running = 1;
	memcpy(buf, "GPR1", 4);
	len = 10;
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_MALFORMED);
	/* another part's key (or any guess): not authentic, no entry */
	make(GP_RELAY_HELLO, 5, 0, 0, 10, 1, 0);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_AUTH);
	CHECK_EQ(relay_table_gangs(t), 0);
	/* authentic, but of a gang that does not run */
	make(GP_RELAY_HELLO, 6, 0, 0, 10, 0, 0);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_NO_GANG);
	/* a part the gang does not have */
	make(GP_RELAY_HELLO, 5, 3, 3, 10, 3, 0);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_NO_GANG);
	CHECK_EQ(relay_table_gangs(t), 0);
	relay_table_free(t);
}

TEST(flows_and_forwarding)
{
	struct relay_table *t = relay_table_new(secret, alive);
	struct relay_out out;
	struct gp_relay_header h;
	const uint8_t *p;
	uint8_t key0[GP_RELAY_KEY], replay[GP_RELAY_DATAGRAM_MAX];
	size_t plen, rlen;

	running = 1;
	gp_relay_part_key(secret, 5, 2, 0, key0);
	/* part 0's hello opens its flow (port 1000) and is answered */
	make(GP_RELAY_HELLO, 5, 0, 0, 100, 0, 0);
	memcpy(replay, buf, len);
	rlen = len;
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_ANSWER);
	CHECK_EQ(relay_table_gangs(t), 1);
	CHECK_EQ(gp_relay_decode(buf, len, &h, &p, &plen), 0);
	CHECK_EQ(h.type, GP_RELAY_HELLO_ACK);
	CHECK_EQ(h.counter, 100);
	CHECK(gp_relay_verify(buf, len, key0));
	/* data for part 1, which has no flow yet */
	make(GP_RELAY_DATA, 5, 0, 1, 101, 0, 148);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_NO_PEER);
	make(GP_RELAY_HELLO, 5, 1, 1, 50, 1, 0);
	CHECK_EQ(send_from(t, 2000, 0, &out), RELAY_ANSWER);
	/* now it goes to part 1's flow, unchanged */
	make(GP_RELAY_DATA, 5, 0, 1, 102, 0, 148);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_FORWARD);
	CHECK_EQ(port_of(&out), 2000);
	CHECK_EQ(out.payload, 148);
	CHECK_EQ(len, GP_RELAY_HEADER + 148);
	/* signed with part 1's key but claiming to be part 0 */
	make(GP_RELAY_DATA, 5, 0, 1, 103, 1, 148);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_AUTH);
	/* part 0's old hello replayed from elsewhere: refused */
	memcpy(buf, replay, rlen);
	len = rlen;
	CHECK_EQ(send_from(t, 6666, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_REPLAY);
	/* an old data datagram: from elsewhere refused, from the flow taken */
	make(GP_RELAY_DATA, 5, 0, 1, 101, 0, 148);
	CHECK_EQ(send_from(t, 6666, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_UNREGISTERED);
	make(GP_RELAY_DATA, 5, 0, 1, 101, 0, 148);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_FORWARD);
	/* a newer authentic one from a new port moves the flow (a NAT's
	 * new mapping): part 1's answers go there, the old port's are old */
	make(GP_RELAY_DATA, 5, 0, 1, 200, 0, 148);
	CHECK_EQ(send_from(t, 1001, 0, &out), RELAY_FORWARD);
	make(GP_RELAY_DATA, 5, 1, 0, 51, 1, 148);
	CHECK_EQ(send_from(t, 2000, 0, &out), RELAY_FORWARD);
	CHECK_EQ(port_of(&out), 1001);
	make(GP_RELAY_DATA, 5, 0, 1, 150, 0, 148);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_UNREGISTERED);
	/* the relay's own answer is not taken from anyone */
	make(GP_RELAY_HELLO_ACK, 5, 0, 0, 300, 0, 0);
	CHECK_EQ(send_from(t, 1001, 0, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_MALFORMED);
	relay_table_free(t);
}

TEST(rate_bounded)
{
	struct relay_table *t = relay_table_new(secret, alive);
	struct relay_out out;
	uint64_t c = 10;
	int64_t sent = 0;
	int i, dropped = 0;

	running = 1;
	make(GP_RELAY_HELLO, 5, 0, 0, c++, 0, 0);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_ANSWER);
	make(GP_RELAY_HELLO, 5, 2, 2, c++, 2, 0);
	CHECK_EQ(send_from(t, 3000, 0, &out), RELAY_ANSWER);
	/* within one millisecond, a burst of one second's worth at most */
	for (i = 0; i < 200000 && !dropped; i++) {
		make(GP_RELAY_DATA, 5, 0, 2, c++, 0, GP_RELAY_PAYLOAD_MAX);
		if (send_from(t, 1000, 1, &out) == RELAY_FORWARD)
			sent += (int64_t)len;
		else {
			CHECK_EQ(out.reason, RELAY_DROP_RATE);
			dropped = 1;
		}
	}
	CHECK(dropped);
	CHECK(sent <= RELAY_PART_RATE);
	CHECK(sent > RELAY_PART_RATE - 2 * GP_RELAY_DATAGRAM_MAX);
	/* another part's rate is its own; a second later, again */
	make(GP_RELAY_DATA, 5, 2, 0, c++, 2, 148);
	CHECK_EQ(send_from(t, 3000, 1, &out), RELAY_FORWARD);
	make(GP_RELAY_DATA, 5, 0, 2, c++, 0, 148);
	CHECK_EQ(send_from(t, 1000, 1001, &out), RELAY_FORWARD);
	relay_table_free(t);
}

TEST(forgets_ended_and_quiet_gangs)
{
	struct relay_table *t = relay_table_new(secret, alive);
	struct relay_out out;

	running = 1;
	make(GP_RELAY_HELLO, 5, 0, 0, 1, 0, 0);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_ANSWER);
	relay_table_tick(t, RELAY_CHECK_MS);
	CHECK_EQ(relay_table_gangs(t), 1);
	running = 0;		/* the gang ended (or was requeued) */
	relay_table_tick(t, RELAY_CHECK_MS + 1);	/* not due yet */
	CHECK_EQ(relay_table_gangs(t), 1);
	relay_table_tick(t, 2 * RELAY_CHECK_MS);
	CHECK_EQ(relay_table_gangs(t), 0);
	make(GP_RELAY_DATA, 5, 0, 1, 2, 0, 148);
	CHECK_EQ(send_from(t, 1000, 2 * RELAY_CHECK_MS, &out), RELAY_DROP);
	CHECK_EQ(out.reason, RELAY_DROP_NO_GANG);
	/* quiet flows */
	running = 1;
	make(GP_RELAY_HELLO, 5, 0, 0, 3, 0, 0);
	CHECK_EQ(send_from(t, 1000, 0, &out), RELAY_ANSWER);
	relay_table_tick(t, RELAY_IDLE_MS + 1);
	CHECK_EQ(relay_table_gangs(t), 0);
	relay_table_free(t);
}

int
main(void)
{
	if (sodium_init() < 0)
		return 1;
	RUN(only_a_running_gangs_parts);
	RUN(flows_and_forwarding);
	RUN(rate_bounded);
	RUN(forgets_ended_and_quiet_gangs);
	return unit_report();
}
