#!/usr/bin/env bash
# Issue 14: a gang across two NATs that change ports per destination
# ("symmetric": tests/e2e/nat_lib.sh's `symmetric`, masquerade random,
# fully-random), through the coordinator's gang relay. Two agents, each on
# a "machine" behind a router of its own that maps every new flow to a
# new random port and drops unsolicited inbound; a coordinator on "the
# internet" both reach. WireGuard's hole punching cannot work there: each
# agent sees no handshake, opens its part's flow to the relay (UDP, the
# coordinator's --listen port) and points the peer at it. Checked:
#   - a gang of two parts exchanges data (a TCP echo of 1 MiB, part 1 to
#     part 0 at MASTER_ADDR:MASTER_PORT, repeated) through the overlay,
#     whose WireGuard peers point at the relay's local sockets, and the
#     relay's /metrics count what it carried;
#   - a job outside the gang (a plain job on one of the machines) that sends the
#     relay forged datagrams for the gang (a hello for part 1 that would
#     take its flow, data for part 0) is refused: each one dropped as
#     not authentic, the gang's flows kept (one "opened" each), its echo
#     still going afterwards;
#   - malformed datagrams are dropped and counted, the relay goes on;
#   - the parts' relay keys are in no log, show --json or /metrics;
#   - the gang's end: the relay forgets it, the agents close their flows.
# GPRL_RELAY=off runs the coordinator with --gang-relay off: the test
# must then fail (no echo: hole punching is defeated by these NATs).
# Needs root, network namespaces, nft, wireguard-go and python3 (SKIP
# without).
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/nat_lib.sh"

# The test itself runs on "the internet" (the coordinator's side).
nat_test_inside GPRL "gpor$$" "root netns nft wireguard python3" symmetric

. "$here/lib.sh"

COORD_PORT=$(free_port)
relay_flag=()
[ "${GPRL_RELAY:-on}" = off ] && relay_flag=(--gang-relay off)
start_coordinator --listen "0.0.0.0:$COORD_PORT" --insecure \
    "${relay_flag[@]+"${relay_flag[@]}"}"
if [ "${GPRL_RELAY:-on}" != off ]; then
	grep -q "gang relay listening udp=0.0.0.0:$COORD_PORT" "$COORD_LOG" ||
	    fail "the coordinator runs no gang relay: $(grep -i relay "$COORD_LOG")"
fi
printf 'network = lan\nimages = any\n' >"$T/lan.policy"
start_machine_agent() { # NAME NETNS COORDINATOR-ADDRESS (nat_lib.sh)
	nat_start_agent "$@" --policy "$T/lan.policy" --gang-overlay auto
}
start_machine_agent a "$GPRL_HA" 198.51.100.1
start_machine_agent b "$GPRL_HB" 203.0.113.1
wait_node_up a
wait_node_up b
grep -q "gang overlay ready" "$T/agent-a.log" ||
    fail "agent a readied no overlay: $(grep -i overlay "$T/agent-a.log")"

metric() { # NAME [LABELS] -> its value (0 when absent)
	api_expect 200 "$ADMIN_TOKEN" GET /metrics
	printf '%s\n' "$API_BODY" | awk -v n="$1${2:-}" \
	    '$1 == n { v = $2 } END { printf "%d\n", v + 0 }'
}

# The gang: part 0 echoes on MASTER_PORT; part 1 sends it 1 MiB every
# second and checks the echo, 150 s at most.
# shellcheck disable=SC2016 # python, not shell
gang='
import os, socket, time
rank, port = int(os.environ["RANK"]), int(os.environ["MASTER_PORT"])
addr = os.environ["MASTER_ADDR"]
print("rank=%d master=%s:%d" % (rank, addr, port), flush=True)
end = time.monotonic() + 150
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(4)
    srv.settimeout(1)
    while time.monotonic() < end:
        try:
            c, peer = srv.accept()
        except socket.timeout:
            continue
        c.settimeout(30)
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)
        except OSError:
            pass
        c.close()
else:
    data = os.urandom(1 << 20)
    n = 0
    while time.monotonic() < end:
        try:
            s = socket.create_connection((addr, port), timeout=5)
            s.settimeout(30)
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
            s.close()
            n += 1
            print("echo %d %s" % (n, "ok" if got == data else "BAD"), flush=True)
        except OSError as e:
            print("no echo yet: %s" % type(e).__name__, flush=True)
        time.sleep(1)
'
submit --nodes 2 --gpus-per-node 1 --time 5m -- "$PY" -c "$gang"
gjob=$JOB
echoes() { # -> ECHOES (the "echo N ok" lines of part 1), LOG
	cli logs --part 1 "$gjob"
	LOG=$CLI_OUT
	ECHOES=$(printf '%s\n' "$LOG" | grep -c '^echo [0-9]* ok$')
}
wait_echoes() { # N SECONDS
	local deadline=$((SECONDS + $2)) s
	while :; do
		echoes
		[ "$ECHOES" -ge "$1" ] && break
		assert_not_contains "$LOG" "BAD" "the echo through the relay"
		s=$(job_state "$gjob")
		case $s in
		succeeded | failed | cancelled | timeout)
			fail "the gang ended $s: part 1: $LOG" ;;
		esac
		[ $SECONDS -ge $deadline ] && fail "no echo through the overlay after $2 s ($ECHOES of $1): part 1: $(printf '%s' "$LOG" | tail -n 3 | tr '\n' ' '); agent a: $(grep -i 'relay\|handshake' "$T/agent-a.log" | tail -n 5)"
		sleep 0.5
	done
}
wait_echoes 2 120
log "part 1: $(printf '%s' "$LOG" | head -n 3 | tr '\n' ' ')"
assert_not_contains "$LOG" "BAD" "the echo through the relay"

# Through the relay: both agents moved the peer to it, the relay carried
# the echo (2 MiB a round trip, in WireGuard's ciphertext).
for m in a b; do
	grep -q "gang overlay: no handshake with peer .* through the relay job=$gjob " \
	    "$T/agent-$m.log" ||
	    fail "agent $m did not send the peer through the relay: $(grep -i 'relay\|handshake' "$T/agent-$m.log")"
	grep -q "gang relay: job=$gjob part=[01]: the relay answers" "$T/agent-$m.log" ||
	    fail "agent $m saw no answer from the relay: $(grep -i 'relay' "$T/agent-$m.log")"
done
dev=$(sed -n "s/.*gang part job=$gjob part=[0-9]*: .* through the overlay dev=\(gpw[0-9a-f]*\) .*/\1/p" \
    "$T/agent-a.log" | tail -n1)
[ -n "$dev" ] || fail "agent a linked no part through the overlay"
# (its MTU leaves room for the relay's header in a 1500-byte path: no
# IP fragments, which many NATs and firewalls drop)
nsenter --net="/run/netns/$GPRL_HA" ip link show "$dev" | grep -q " mtu 1372 " ||
    fail "machine a's relaying device's MTU: $(nsenter --net="/run/netns/$GPRL_HA" ip link show "$dev")"
ep=$(nsenter --net="/run/netns/$GPRL_HA" wg show "$dev" endpoints)
case $ep in
*127.0.0.1:*) ;;
*) fail "machine a's peer is not at the relay's local socket: $ep" ;;
esac
packets=$(metric gpupool_gang_relay_packets_total)
bytes=$(metric gpupool_gang_relay_bytes_total)
log "relay: packets=$packets bytes=$bytes"
[ "$bytes" -gt 4000000 ] ||
    fail "the relay carried $bytes bytes, wanted two echoes of 1 MiB each way"
for k in 0 1; do
	grep -q "gang relay: flow of job=$gjob attempt=1 part=$k opened" "$COORD_LOG" ||
	    fail "the relay did not log part $k's flow: $(grep 'gang relay' "$COORD_LOG")"
done

# The parts' relay keys (derived as docs/api.md says, from the
# coordinator's secret, DATA/gang-relay.key, 0600) are in no log, job
# view or /metrics.
assert_eq 600 "$(stat -c %a "$COORD_DATA/gang-relay.key")" "the relay secret's mode"
# shellcheck disable=SC2016 # python, not shell
keys=$("$PY" -c '
import base64, hashlib, struct, sys
secret = open(sys.argv[1], "rb").read()
for part in (0, 1):
    h = hashlib.blake2b(key=secret, digest_size=32)
    h.update(b"gpupool gang relay part key v1" + struct.pack(">qIH", int(sys.argv[2]), 1, part))
    print(base64.b64encode(h.digest()).decode())
' "$COORD_DATA/gang-relay.key" "$gjob")
[ "$(printf '%s\n' "$keys" | wc -l)" = 2 ] || fail "cannot derive the relay keys: $keys"
cli show --json "$gjob"
shown=$CLI_OUT
api_expect 200 "$ADMIN_TOKEN" GET /metrics
for k in $keys; do
	for f in "$T"/agent-*.log "$COORD_LOG"; do
		assert_not_contains "$(cat "$f")" "$k" "$(basename "$f")"
	done
	assert_not_contains "$shown" "$k" "show --json"
	assert_not_contains "$API_BODY" "$k" "/metrics"
done

# A job outside the gang: forged datagrams (what it can guess: the job,
# attempt, parts; not the keys) and malformed ones, at the relay.
# shellcheck disable=SC2016 # python, not shell
intruder='
import os, socket, struct, sys, time
job, port = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def dg(kind, frm, to, payload):
    h = b"GPR1" + bytes([kind, 0, 0, 0]) + struct.pack(">qIHHQ", job, 1, frm, to, int(time.time() * 1e9))
    return h + os.urandom(16) + payload
for i in range(10):
    s.sendto(dg(1, 1, 1, b""), ("198.51.100.1", port))   # take part 1 flow
    s.sendto(dg(2, 1, 0, os.urandom(148)), ("198.51.100.1", port))
for i in range(5):
    s.sendto(os.urandom(60), ("198.51.100.1", port))      # malformed
    s.sendto(b"GPR1", ("198.51.100.1", port))
print("intruder sent 30", flush=True)
'
auth0=$(metric gpupool_gang_relay_dropped_total '{reason="auth"}')
bad0=$(metric gpupool_gang_relay_dropped_total '{reason="malformed"}')
echoes
before=$ECHOES
submit --time 2m -- "$PY" -c "$intruder" "$gjob" "$COORD_PORT"
ijob=$JOB
wait_final "$ijob" 120
cli logs "$ijob"
assert_contains "$CLI_OUT" "intruder sent 30" "the intruder job ran"
deadline=$((SECONDS + WAIT_S))
while auth=$(metric gpupool_gang_relay_dropped_total '{reason="auth"}') &&
    [ $((auth - auth0)) -lt 20 ]; do
	[ $SECONDS -ge $deadline ] && fail "the relay dropped $((auth - auth0)) of the intruder's 20 forged datagrams as not authentic"
	sleep 0.2
done
bad=$(metric gpupool_gang_relay_dropped_total '{reason="malformed"}')
[ $((bad - bad0)) -ge 10 ] ||
    fail "the relay counted $((bad - bad0)) of 10 malformed datagrams"
for k in 0 1; do
	assert_eq 1 "$(grep -c "gang relay: flow of job=$gjob attempt=1 part=$k opened" "$COORD_LOG")" \
	    "part $k's relay flows (a forged hello must not take it)"
done
alive "$COORD_PID" || fail "the coordinator died of the intruder's datagrams"
# The gang still talks through the relay afterwards.
wait_echoes $((before + 2)) 60

# The gang's end: the agents close their flows, the relay forgets it.
cli cancel "$gjob"
wait_final "$gjob" 60
deadline=$((SECONDS + WAIT_S))
until grep -q "gang relay: forgot job=$gjob attempt=1" "$COORD_LOG"; do
	[ $SECONDS -ge $deadline ] && fail "the relay still knows the ended gang"
	sleep 0.2
done
for m in a b; do
	deadline=$((SECONDS + WAIT_S))
	until grep -q "gang relay: job=$gjob part=[01]: flow closed" "$T/agent-$m.log"; do
		[ $SECONDS -ge $deadline ] && fail "agent $m kept its relay flow after the gang"
		sleep 0.2
	done
done
assert_eq 0 "$(metric gpupool_gang_relay_gangs)" "gangs the relay knows after the end"
echo ok
