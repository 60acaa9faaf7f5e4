#!/usr/bin/env bash
# Issue 14: a gang across two NATs. Two agents, each on a "machine" behind
# a home router of its own that masquerades and drops unsolicited inbound
# (tests/e2e/nat_lib.sh: the two cannot reach each other at all), and one
# coordinator on "the internet" both reach. The agents give no
# --advertise-addr, so the coordinator sends their gang its WireGuard
# overlay (a key pair per part made for this gang, each part's public key
# and the address it saw the agent at with a port of the agent's range,
# and to each part alone its private key); each agent runs a wireguard-go
# for its part, routes the other part's gang address through it and lets
# only the gang's pairs cross it. Checked:
#   - a gang of two parts does a real torch.distributed rendezvous (Gloo,
#     all-reduce of a few steps) through the environment the agent gives
#     (MASTER_ADDR part 0's overlay address), and its traffic crossed the
#     WireGuard device;
#   - another job (a second gang, one part on each machine, network lan)
#     reaches neither part's port, through the overlay or beside it; its
#     parts have devices and keys of their own, not the first gang's;
#   - a part's private key (read from its device) is in no agent's or
#     coordinator's log, nor in show, show --json or /metrics;
#   - when the gang ends, its devices, their wireguard-go (and with it
#     the keys) and their tables are gone; after `kill -9` of an agent in
#     the middle of a gang, the next start sweeps what was left.
# GPOV_OVERLAY=off runs the agents with --gang-overlay off: the test must
# then fail (no rendezvous), which shows that it needs the overlay.
# GPOV_BREAK=rules opens both machines' forward hooks (the overlay's
# table and the agent's own) before the intruder tries: the test must then
# fail (the intruder gets in), which shows that the rules are what stops it.
# GPOV_NAT=symmetric puts the machines behind NATs that map each new
# flow to a new random port (nat_lib.sh): hole punching cannot work
# there, the gang goes through the coordinator's relay; with
# GPOV_RELAY=off too (the coordinator's --gang-relay off) the test must
# fail (test_gang_overlay_relay.sh is the relay's own test).
# Needs root, network namespaces, wireguard-go and torch (SKIP without).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nat_lib.sh"

# The test itself runs on "the internet" (the coordinator's side).
nat_test_inside GPOV "gpov$$" "root netns nft wireguard torch" ${GPOV_NAT:-}

. "$here/lib.sh"

# The coordinator listens on the internet's addresses too (a test
# namespace: plain HTTP is fine here).
COORD_PORT=$(free_port)
relay_flag=()
[ "${GPOV_RELAY:-on}" = off ] && relay_flag=(--gang-relay off)
start_coordinator --listen "0.0.0.0:$COORD_PORT" --insecure \
    "${relay_flag[@]+"${relay_flag[@]}"}"
printf 'network = lan\nimages = any\n' >"$T/lan.policy"
ov_flag=(--gang-overlay "${GPOV_OVERLAY:-auto}")
start_machine_agent() { # NAME NETNS COORDINATOR-ADDRESS (nat_lib.sh)
	nat_start_agent "$@" --policy "$T/lan.policy" "${ov_flag[@]}"
}
start_machine_agent a "$GPOV_HA" 198.51.100.1
start_machine_agent b "$GPOV_HB" 203.0.113.1
wait_node_up a
wait_node_up b
# Each local part's overlay device and table (agent/overlay.c):
# gpw<block><seq>, gpupool_ov_<block>_<seq>, from the agent's log.
dev_of() { # NAME JOB -> DEV TABLE
	DEV=$(sed -n "s/.*gang part job=$2 part=[0-9]*: .* through the overlay dev=\(gpw[0-9a-f]*\) .*/\1/p" \
	    "$T/agent-$1.log" | tail -n1)
	TABLE=gpupool_ov_${DEV:3:2}_${DEV:5:2}
}
wait_dev() { # NAME JOB -> DEV TABLE
	local deadline=$((SECONDS + WAIT_S))
	dev_of "$1" "$2"
	while [ -z "$DEV" ]; do
		[ $SECONDS -ge $deadline ] && fail "agent $1 linked no part of job $2 through the overlay: $(grep -i overlay "$T/agent-$1.log")"
		sleep 0.2
		dev_of "$1" "$2"
	done
}
if [ "${GPOV_OVERLAY:-auto}" != off ]; then
	grep -q "gang overlay ready" "$T/agent-a.log" ||
	    fail "agent a readied no overlay: $(grep -i overlay "$T/agent-a.log")"
fi

# The direct way is closed: machine a cannot reach machine b at all.
if nsenter --net="/run/netns/$GPOV_HA" timeout 3 bash -c \
    'exec 3<>/dev/tcp/192.168.2.2/22' 2>/dev/null; then
	fail "machine a reached machine b's private address"
fi

# The gang: rendezvous and all-reduce with Gloo, then each part listens
# on MASTER_PORT+1 for intruders until the test cancels it.
# shellcheck disable=SC2016 # python, not shell
gang='
import datetime, os, socket, time
import torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
port = int(os.environ["MASTER_PORT"])
print("rank=%d master=%s:%d" % (rank, os.environ["MASTER_ADDR"], port), flush=True)
dist.init_process_group("gloo", init_method="env://", rank=rank,
    world_size=world, timeout=datetime.timedelta(seconds=120))
total = 0.0
for step in range(5):
    x = torch.full((100000,), float(rank + 1 + step))
    dist.all_reduce(x)
    total += float(x[0])
print("rank%d allreduce ok total=%g" % (rank, total), flush=True)
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", port + 1))
srv.listen(16)
srv.settimeout(1)
print("rank%d listening %d" % (rank, port + 1), flush=True)
end = time.monotonic() + 150
while time.monotonic() < end:
    try:
        c, peer = srv.accept()
        print("CONNECTION from %s" % peer[0], flush=True)
        c.sendall(b"welcome\n")
    except socket.timeout:
        pass
'
submit --nodes 2 --gpus-per-node 1 --time 5m -- "$PY" -c "$gang"
gjob=$JOB
part_log() { # PART -> LOG
	cli logs --part "$1" "$gjob"
	LOG=$CLI_OUT
}
# sum over ranks r=0,1 and steps s=0..4 of (r + 1 + s): 3+5+7+9+11
for k in 0 1; do
	deadline=$((SECONDS + 180))
	while :; do
		part_log "$k"
		case $LOG in *"rank$k listening"*) break ;; esac
		s=$(job_state "$gjob")
		case $s in
		succeeded | failed | cancelled | timeout)
			fail "the gang ended $s before its rendezvous: part $k: $LOG" ;;
		esac
		[ $SECONDS -ge $deadline ] && fail "no rendezvous through the overlay: part $k: $LOG"
		sleep 0.5
	done
	log "part $k: $(printf '%s' "$LOG" | tr '\n' ' ')"
	assert_contains "$LOG" "rank$k allreduce ok total=35" "part $k's all-reduce"
done
wait_dev a "$gjob"
dev_a=$DEV table_a=$TABLE
wait_dev b "$gjob"
dev_b=$DEV table_b=$TABLE
# Behind NATs that change ports: through the relay (else the wrapper
# test_gang_overlay_relay_torch would not test it).
if [ "${GPOV_NAT:-}" = symmetric ]; then
	for m in a b; do
		grep -q "through the relay job=$gjob " "$T/agent-$m.log" ||
		    fail "agent $m did not go through the relay: $(grep -i 'relay\|handshake' "$T/agent-$m.log")"
	done
fi
maddr=$(printf '%s' "$LOG" | sed -n 's/^rank=1 master=\([0-9.]*\):\([0-9]*\)$/\1/p')
mport=$(printf '%s' "$LOG" | sed -n 's/^rank=1 master=\([0-9.]*\):\([0-9]*\)$/\2/p')
case $maddr in
10.204.*) ;;
*) fail "MASTER_ADDR '$maddr' is not part 0's gang (overlay) address" ;;
esac
# part 1's address: part 0's + 1 (agent/netns.c, gang_addr)
p1addr=${maddr%.*}.$((${maddr##*.} + 1))
# Through the WireGuard device, which carried the rendezvous: on each
# machine, the other machine's part (whichever the scheduler put where)
# is routed through it, its own through its veth pair.
for m in a b; do
	ns=$GPOV_HA dev=$dev_a
	[ $m = b ] && ns=$GPOV_HB dev=$dev_b
	routes=$(for a in "$maddr" "$p1addr"; do
		nsenter --net="/run/netns/$ns" ip route get "$a"; done)
	assert_eq 1 "$(printf '%s\n' "$routes" | grep -c "dev $dev ")" \
	    "machine $m's routes to the parts through $dev: $routes"
done
rx=$(nsenter --net="/run/netns/$GPOV_HA" wg show "$dev_a" transfer | awk '{print $2}' | head -n1)
[ "${rx:-0}" -gt 100000 ] || fail "the overlay carried ${rx:-0} bytes in, wanted the all-reduce's"

# A third party: another gang (one part on each machine, network lan,
# in the overlay itself) tries both parts' ports.
# shellcheck disable=SC2016 # python, not shell
intruder='
import socket, sys
for a in sys.argv[1:3]:
    try:
        s = socket.create_connection((a, int(sys.argv[3])), timeout=4)
        print("intruder %s=%s" % (a, s.recv(64).decode().strip()), flush=True)
    except Exception as e:
        print("intruder %s=%s" % (a, type(e).__name__), flush=True)
'
if [ "${GPOV_BREAK:-}" = rules ]; then
	for ns in "$GPOV_HA" "$GPOV_HB"; do
		for t in $(nsenter --net="/run/netns/$ns" nft list tables |
		    awk '/gpupool_/ {print $3}'); do
			nsenter --net="/run/netns/$ns" nft insert rule inet "$t" \
			    forward accept
		done
	done
fi
submit --nodes 2 --gpus-per-node 1 --time 2m -- "$PY" -c "$intruder" \
    "$maddr" "$p1addr" "$((mport + 1))"
ijob=$JOB
wait_final "$ijob" 120
for k in 0 1; do
	cli logs --part "$k" "$ijob"
	log "intruder part $k: $(printf '%s' "$CLI_OUT" | tr '\n' ' ')"
	assert_contains "$CLI_OUT" "intruder $maddr=" "intruder part $k ran"
	assert_contains "$CLI_OUT" "intruder $p1addr=" "intruder part $k ran"
	assert_not_contains "$CLI_OUT" "=welcome" "a job outside the gang"
done
for k in 0 1; do
	part_log "$k"
	assert_not_contains "$LOG" "CONNECTION" "part $k's port, from outside the gang"
done

# Devices per gang: the intruder gang's part had one of its own. No
# private key in the logs, show, show --json or /metrics.
dev_of a "$ijob"
[ -n "$DEV" ] || fail "the intruder gang's part on machine a had no overlay device"
[ "$DEV" != "$dev_a" ] || fail "two gangs on one device: $DEV"
privs='' pubs=''
for m in a b; do
	ns=$GPOV_HA dev=$dev_a
	[ $m = b ] && ns=$GPOV_HB dev=$dev_b
	priv=$(nsenter --net="/run/netns/$ns" wg show "$dev" private-key)
	pub=$(nsenter --net="/run/netns/$ns" wg show "$dev" public-key)
	[ -n "$priv" ] || fail "machine $m: no private key on $dev"
	privs="$privs $priv" pubs="$pubs $pub"
	for f in "$T"/agent-*.log "$COORD_LOG"; do
		assert_not_contains "$(cat "$f")" "$priv" "$(basename "$f")"
	done
	for j in "$gjob" "$ijob"; do
		cli show "$j"
		assert_not_contains "$CLI_OUT" "$priv" "show $j"
		cli show --json "$j"
		assert_not_contains "$CLI_OUT" "$priv" "show --json $j"
	done
	api_expect 200 "$ADMIN_TOKEN" GET /metrics
	assert_not_contains "$API_BODY" "$priv" "/metrics"
done

# The gang's end takes its devices down, and their keys with their
# wireguard-go (the other agents' spares stay).
cli cancel "$gjob"
wait_final "$gjob" 60
for m in a b; do
	ns=$GPOV_HA dev=$dev_a table=$table_a
	[ $m = b ] && ns=$GPOV_HB dev=$dev_b table=$table_b
	deadline=$((SECONDS + WAIT_S))
	while nsenter --net="/run/netns/$ns" ip link show "$dev" >/dev/null 2>&1 ||
	    nsenter --net="/run/netns/$ns" nft list tables | grep -q "$table\$"; do
		[ $SECONDS -ge $deadline ] && fail "machine $m: the overlay outlived the gang: $(nsenter --net="/run/netns/$ns" ip link show "$dev" 2>&1)"
		sleep 0.2
	done
	grep -q "gang overlay stopped dev=$dev" "$T/agent-$m.log" ||
	    fail "agent $m did not stop its wireguard-go"
	pgrep -f "wireguard-go -f $dev\$" >/dev/null &&
	    fail "machine $m: the gang's wireguard-go (and its key) outlived it"
	for priv in $privs; do
		assert_not_contains "$(nsenter --net="/run/netns/$ns" wg show all private-key 2>&1)" \
		    "$priv" "machine $m's devices after the gang"
	done
	[ -e "/var/run/wireguard/$dev.sock" ] && fail "wireguard-go's socket is left"
done

# kill -9 of agent a while a gang holds the overlay: its wireguard-go
# goes with it, and the next start sweeps the table it left.
submit --nodes 2 --gpus-per-node 1 --time 2m -- sleep 100
g2=$JOB
wait_state "$g2" running
deadline=$((SECONDS + WAIT_S))
until nsenter --net="/run/netns/$GPOV_HA" nft list tables | grep -q "gpupool_ov_"; do
	[ $SECONDS -ge $deadline ] && fail "no overlay table for the second gang"
	sleep 0.2
done
wait_dev a "$g2"
dev_a=$DEV
# a gang of its own, keys of its own
pub=$(nsenter --net="/run/netns/$GPOV_HA" wg show "$dev_a" public-key)
[ -n "$pub" ] || fail "the second gang's device has no key"
assert_not_contains "$pubs" "$pub" "the first gang's public keys"
kill9_agent a
cli cancel "$g2"
start_machine_agent a "$GPOV_HA" 198.51.100.1
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "job networks ready" "$T/agent-a.log")" -ge 2 ]; do
	alive "${AGENT_PID[a]}" || fail "the restarted agent a exited"
	[ $SECONDS -ge $deadline ] && fail "the restarted agent a is not ready"
	sleep 0.1
done
assert_not_contains "$(nsenter --net="/run/netns/$GPOV_HA" nft list tables)" \
    "gpupool_ov_" "machine a's tables after the restart"
nsenter --net="/run/netns/$GPOV_HA" ip link show "$dev_a" >/dev/null 2>&1 &&
    fail "the overlay device survived kill -9 and the restart"
pgrep -f "wireguard-go -f $dev_a\$" >/dev/null &&
    fail "a wireguard-go of agent a survived kill -9 and the restart"
echo ok
