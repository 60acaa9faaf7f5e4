#!/usr/bin/env bash
# bench/net_gang_overlay_agent.sh: what the agent's gang overlay costs
# (issue 14). Two agents on two test namespaces bridged on a "LAN" (the
# topology of tests/e2e/test_gang_network.sh; nothing leaves the machine),
# each with --advertise-addr, run once with --gang-overlay off (the parts
# linked directly) and once with --gang-overlay always (the same parts
# through the agents' wireguard-go), so that only the overlay differs:
#   - gang start latency: from `submit` to part 1's first TCP connection
#     to part 0 (MASTER_ADDR:MASTER_PORT), N gangs one after the other
#     (each overlay gang part gets a wireguard-go of its own: started
#     with it before per-gang keys, taken from the spare the agent's
#     helper started ahead since), and the agents' own figures for
#     linking a part;
#   - part-to-part TCP throughput (iperf3, 5 s).
# With BEFORE_BIN=path/to/an/older/gpupool, the whole run is made with
# that binary first and then with this tree's, one after the other in one
# invocation (before/after side by side on the same machine and load),
# each line prefixed with its label.
# Usage: BUILD=build [BEFORE_BIN=...] bench/net_gang_overlay_agent.sh [N]
# (root)
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN=${GPUPOOL_BIN:-$PWD/${BUILD:-build}/gpupool}
n=${1:-8}
if [ -z "${OBENCH_INSIDE:-}" ] && [ -n "${BEFORE_BIN:-}" ]; then
	rc=0
	for run in "before:$BEFORE_BIN" "after:$GPUPOOL_BIN"; do
		GPUPOOL_BIN=${run#*:} BEFORE_BIN='' bash "$0" "$n" |
		    sed "s/^/${run%%:*} /" || rc=1
	done
	exit $rc
fi
if [ -z "${OBENCH_INSIDE:-}" ]; then
	for c in wireguard-go wg iperf3; do
		command -v "$c" >/dev/null || { echo "SKIP: no $c"; exit 77; }
	done
	p1=gpob-$$-1 p2=gpob-$$-2 lan=gpob-$$-l
	trap 'for ns in $p1 $p2 $lan; do for p in $(ip netns pids $ns 2>/dev/null); do kill -KILL $p; done; ip netns del $ns 2>/dev/null; done' EXIT
	ip netns add "$p1" && ip netns add "$p2" && ip netns add "$lan" &&
	    ip -n "$lan" link add br0 type bridge &&
	    ip -n "$lan" link set br0 up || exit 1
	for i in 1 2; do
		ns=$p1
		[ "$i" = 2 ] && ns=$p2
		ip -n "$ns" link add up0 type veth peer name down$i netns "$lan" &&
		    ip -n "$lan" link set down$i master br0 &&
		    ip -n "$lan" link set down$i up && ip -n "$ns" link set lo up &&
		    ip -n "$ns" addr add 192.168.77.$((i + 1))/24 dev up0 &&
		    ip -n "$ns" link set up0 up || exit 1
	done
	echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	nsenter --net="/run/netns/$p1" env OBENCH_INSIDE=1 OBENCH_P2="$p2" \
	    bash "$0" "$n"
	exit $?
fi
TEST_NAME=net_gang_overlay_bench
. tests/e2e/lib.sh
start_coordinator
spawn "$T/relay.log" "$PY" -c "$NETNS_RELAY_PY" 192.168.77.2 \
    "$COORD_PORT" "$COORD_PORT"
until grep -q '^relay listening' "$T/relay.log" 2>/dev/null; do sleep 0.1; done
mk_token provider prov-a2
(umask 077 && printf '%s\n' "$TOKEN" >"$T/a2.token")

# shellcheck disable=SC2016 # python, not shell
rendezvous='
import os, socket, time
port = int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(1)
    s.settimeout(60)
    c, _ = s.accept()
    c.recv(10)
else:
    end = time.monotonic() + 60
    while True:
        try:
            c = socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=1)
            break
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.005)
    print("connected_at=%.6f" % time.time(), flush=True)
    c.sendall(b"x")
'
# shellcheck disable=SC2016 # run by the parts' shell
iperf='
if [ "$RANK" = 0 ]; then exec iperf3 -s -1 -p "$MASTER_PORT"; fi
for i in $(seq 200); do
	iperf3 -c "$MASTER_ADDR" -p "$MASTER_PORT" -t 5 -f m && exit 0
	sleep 0.05
done
exit 1'

for mode in off always; do
	start_agent a1 1 --advertise-addr 192.168.77.2 --gang-overlay "$mode"
	spawn "$T/agent-a2.log" nsenter --net="/run/netns/$OBENCH_P2" "$GP" \
	    agent --coordinator "http://192.168.77.2:$COORD_PORT" \
	    --token-file "$T/a2.token" --name a2 --work "$T/agents/a2" \
	    --fake-gpus 1 --run-as nobody --advertise-addr 192.168.77.3 \
	    --gang-overlay "$mode" -v
	AGENT_PID[a2]=$SPAWNED_PID
	for a in a1 a2; do
		until grep -q "registered node=$a" "$T/agent-$a.log" 2>/dev/null; do
			alive "${AGENT_PID[$a]}" || { echo "agent $a exited"; exit 1; }
			sleep 0.1
		done
	done
	wait_node_up a1
	wait_node_up a2
	lat=()
	for i in $(seq "$n"); do
		t0=$(date +%s.%N)
		submit --nodes 2 --gpus-per-node 1 --time 2m -- "$PY" -c "$rendezvous"
		wait_final "$JOB" 90
		[ "$FINAL_STATE" = succeeded ] || { echo "gang $JOB $FINAL_STATE"; exit 1; }
		cli logs --part 1 "$JOB"
		t1=$(printf '%s\n' "$CLI_OUT" | sed -n 's/^connected_at=//p')
		lat+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", (b - a) * 1000}')")
	done
	sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
	echo "mode=$mode submit to part 1 connected (ms, $n gangs): p50 $(printf '%s\n' "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') min $(printf '%s\n' "$sorted" | head -n1) max $(printf '%s\n' "$sorted" | tail -n1) all: ${lat[*]}"
	if [ "$mode" = always ]; then
		echo "mode=always the agents' linking of a part (ms, the executor thread's time; before: with wireguard-go's start): $(grep -h 'through the overlay' "$T"/agent-a1.log "$T"/agent-a2.log | sed -n 's/.* ms=\([0-9]*\).*/\1/p' | sort -n | tr '\n' ' ')"
		echo "mode=always waited for the spare wireguard-go (ms; after only): $(grep -h 'through the overlay' "$T"/agent-a1.log "$T"/agent-a2.log | sed -n 's/.* waited_ms=\([0-9]*\).*/\1/p' | sort -n | tr '\n' ' ')"
		echo "mode=always wireguard-go up (ms): $(grep -h 'gang overlay started' "$T"/agent-a1.log "$T"/agent-a2.log | sed -n 's/.* ms=\([0-9]*\).*/\1/p' | sort -n | tr '\n' ' ')"
	fi
	submit --nodes 2 --gpus-per-node 1 --time 2m -- sh -c "$iperf"
	wait_final "$JOB" 90
	cli logs --part 1 "$JOB"
	echo "mode=$mode part to part iperf3 (5 s): $(printf '%s\n' "$CLI_OUT" | awk '/receiver/ {print $7, $8}')"
	kill -TERM "${AGENT_PID[a1]}" "${AGENT_PID[a2]}"
	wait_exit "${AGENT_PID[a1]}"
	wait_exit "${AGENT_PID[a2]}"
	mv "$T/agent-a1.log" "$T/agent-a1-$mode.log"
	mv "$T/agent-a2.log" "$T/agent-a2-$mode.log"
done
