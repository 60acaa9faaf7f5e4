#!/usr/bin/env bash
# Issue 14: a gang's parts on two agents reach each other from their own
# job networks, and nothing else reaches them. Two test namespaces play two
# provider machines (192.168.77.2 and .3, each agent with --advertise-addr)
# on a "LAN" that a third test namespace bridges; nothing of this test can
# reach the machine's own network. A gang of two parts does a rendezvous
# both ways, as torch.distributed with Gloo does: part 1 connects to
# MASTER_ADDR:MASTER_PORT (part 0's own address) and tells part 0 the port
# of a listener of its own, to which part 0 connects back. Meanwhile a
# plain job on part 0's machine tries part 0's port: it must not get in.
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/gang_lib.sh"
gang_machines test_gang_network "$here/$(basename "$0")"

. "$here/lib.sh"

start_coordinator
gang_coordinator_relay
start_agent a1 2 --advertise-addr 192.168.77.2
gang_start_a2
wait_node_up a1
wait_node_up a2

# What both gangs of this test share: part 0 listens on MASTER_PORT, the
# other part connects to it (retrying until part 0 listens, 60 s at most).
# shellcheck disable=SC2016 # python, not shell
rendezvous='
import os, socket, sys, time
rank = int(os.environ["RANK"])
master = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
def listen_master(backlog):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", master[1]))
    srv.listen(backlog)
    srv.settimeout(90)
    return srv
def connect_master():
    end = time.monotonic() + 60
    while True:
        try:
            return socket.create_connection(master, timeout=2)
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)
'
# shellcheck disable=SC2016 # python, not shell
gang=$rendezvous'
print("rank=%d master=%s:%d gloo_if=%s" % (rank, master[0], master[1],
      os.environ.get("GLOO_SOCKET_IFNAME")), flush=True)
if rank == 0:
    srv = listen_master(16)
    c, peer = srv.accept()
    addr, port = c.recv(200).decode().split()
    print("rank 1 says it listens on %s:%s (from %s)" % (addr, port, peer[0]), flush=True)
    back = socket.create_connection((addr, int(port)), timeout=10)
    back.sendall(b"hello from rank 0\n")
    print("rank0 ok:", back.recv(100).decode().strip(), flush=True)
    # Keep the port open for the intruder test (the test cancels us).
    srv.settimeout(1)
    end = time.monotonic() + 80
    while time.monotonic() < end:
        try:
            c, peer = srv.accept()
            print("CONNECTION from %s" % peer[0], flush=True)
            c.sendall(b"welcome\n")
        except socket.timeout:
            pass
else:
    lst = socket.socket()
    lst.bind(("0.0.0.0", 0))
    lst.listen(4)
    lst.settimeout(60)
    s = connect_master()
    mine = s.getsockname()[0]
    s.sendall(("%s %d" % (mine, lst.getsockname()[1])).encode())
    c, peer = lst.accept()
    print("rank1 got:", c.recv(100).decode().strip(), "from", peer[0], flush=True)
    c.sendall(b"hello from rank 1\n")
    print("rank1 ok", flush=True)
    time.sleep(80)	# a part that ends ends the gang; the test cancels it
'
submit --nodes 2 --gpus-per-node 1 --time 3m -- "$PY" -c "$gang"
gjob=$JOB
wait_state "$gjob" running
part_log() { # PART -> LOG
	cli logs --part "$1" "$gjob"
	LOG=$CLI_OUT
}
deadline=$((SECONDS + 90))
while :; do
	part_log 0
	case $LOG in *"rank0 ok"*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "no rendezvous: part 0: $LOG; part 1: $(part_log 1; echo "$LOG")"
	sleep 0.3
done
log "part 0: $(printf '%s' "$LOG" | tr '\n' ' ')"
assert_contains "$LOG" "rank0 ok: hello from rank 1" "part 0 reached part 1"
assert_contains "$LOG" "gloo_if=eth0" "GLOO_SOCKET_IFNAME"
# Part 1's log reaches the coordinator on its own agent's schedule, maybe
# after part 0's: wait for it too.
deadline=$((SECONDS + WAIT_S))
while :; do
	part_log 1
	case $LOG in *"rank1 ok"*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "part 1's log never said rank1 ok: $LOG"
	sleep 0.3
done
log "part 1: $(printf '%s' "$LOG" | tr '\n' ' ')"
assert_contains "$LOG" "rank1 got: hello from rank 0" "part 1 reached by part 0"
master=$(printf '%s' "$LOG" | sed -n 's/.*master=\([0-9.]*\):\([0-9]*\).*/\1 \2/p' | head -1)
read -r maddr mport <<<"$master"
[ -n "$maddr" ] || fail "no master address in part 1's log"

# A plain job on part 0's machine (a1) tries part 0's port.
submit --gpus 1 --time 1m -- "$PY" -c '
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print("intruder=" + s.recv(64).decode().strip())
except Exception as e:
    print("intruder=" + type(e).__name__)
' "$maddr" "$mport"
wait_final "$JOB" 60
job_log "$JOB"
log "intruder: $LOG"
assert_contains "$LOG" "intruder=" "the intruder ran"
assert_not_contains "$LOG" "intruder=welcome" "a job outside the gang"
part_log 0
assert_not_contains "$LOG" "CONNECTION" "part 0's port, from outside the gang"
# kill -9 of this machine's agent leaves its route to the other part; the
# next agent to start sweeps it (and the table, chains included).
assert_contains "$(ip route)" "via 192.168.77.3" "the route to the other part"
kill9_agent a1
cli cancel "$gjob"
assert_contains "$(ip route)" "via 192.168.77.3" "the route after kill -9"
start_agent a1 2 --advertise-addr 192.168.77.2
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "job networks ready" "$T/agent-a1.log")" -ge 2 ]; do
	alive "${AGENT_PID[a1]}" || fail "the restarted agent a1 exited"
	[ $SECONDS -ge $deadline ] && fail "the restarted agent a1 is not ready"
	sleep 0.1
done
grep -q "swept stale gang routes" "$T/agent-a1.log" ||
    fail "the restarted agent did not sweep the gang route"
assert_not_contains "$(ip route)" "via 192.168.77.3" "the route after the sweep"
wait_final "$gjob"
# The gang's rules and routes are gone with it.
deadline=$((SECONDS + WAIT_S))
while nft list ruleset | grep -q "g${gjob}_"; do
	[ $SECONDS -ge $deadline ] && fail "the gang's chains are still there"
	sleep 0.2
done
# (the route to the part's own address goes with its namespace, which
# the kernel removes a moment after the part's last process)
while ip route | grep -q "^10\.204\."; do
	[ $SECONDS -ge $deadline ] && fail "a gang route is still there: $(ip route | grep '^10\.204\.')"
	sleep 0.2
done

# A part that sends its last bytes and exits at once: they still arrive.
# Part 1 reads only a second after it connected, so part 0 has exited
# with most of them still in its socket's buffer; its links are kept a
# moment after it ends (netns.c, NET_GANG_LINGER_MS), where tearing them
# down at once lost those bytes and left part 1 waiting.
# shellcheck disable=SC2016 # python, not shell
last=$rendezvous'
n = 400 * 1024
if rank == 0:
    c, _ = listen_master(1).accept()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    c.sendall(b"x" * n)
    print("rank0 sent %d, exiting" % n, flush=True)
    os._exit(0)
else:
    s = connect_master()
    time.sleep(1)
    s.settimeout(20)
    got = 0
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except OSError as e:
        print("rank1 error %s" % type(e).__name__, flush=True)
    print("rank1 received %d of %d" % (got, n), flush=True)
'
submit --nodes 2 --gpus-per-node 1 --time 3m -- "$PY" -c "$last"
ljob=$JOB
wait_final "$ljob" 120
cli logs --part 1 "$ljob"
log "part 1: $(printf '%s' "$CLI_OUT" | tr '\n' ' ')"
assert_contains "$CLI_OUT" "rank1 received 409600 of 409600" \
    "the last bytes of a part that exited"
echo ok
