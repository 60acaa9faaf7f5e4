#!/usr/bin/env bash
# bench/net_gang_throughput.sh: TCP throughput (iperf3, 5 s) between the two
# parts of a gang on two agents, each part in its own job network (routes
# over --advertise-addr, per-part nftables chains), against the same
# transfer between the two provider hosts themselves. The topology of
# tests/e2e/test_gang_network.sh: two test namespaces on a bridged "LAN";
# nothing leaves the machine. Needs root.
# Usage: BUILD=build bench/net_gang_throughput.sh
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN=${GPUPOOL_BIN:-$PWD/${BUILD:-build}/gpupool}
if [ -z "${GBENCH_INSIDE:-}" ]; then
	p1=gpgb-$$-1 p2=gpgb-$$-2 lan=gpgb-$$-l
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
	nsenter --net="/run/netns/$p2" iperf3 -s -1 >/dev/null 2>&1 &
	for _ in $(seq 50); do
		nsenter --net="/run/netns/$p1" nc -z 192.168.77.3 5201 2>/dev/null && break
		sleep 0.1
	done
	echo "host to host (no isolation): $(nsenter --net="/run/netns/$p1" \
	    iperf3 -c 192.168.77.3 -t 5 -f g | awk '/receiver/ {print $7, $8}')"
	nsenter --net="/run/netns/$p1" env GBENCH_INSIDE=1 GBENCH_P2="$p2" \
	    bash "$0"
	exit $?
fi
TEST_NAME=net_gang_bench
. tests/e2e/lib.sh
start_coordinator
spawn "$T/relay.log" "$PY" -c "$NETNS_RELAY_PY" 192.168.77.2 \
    "$COORD_PORT" "$COORD_PORT"
until grep -q '^relay listening' "$T/relay.log" 2>/dev/null; do sleep 0.1; done
start_agent a1 1 --advertise-addr 192.168.77.2
mk_token provider prov-a2
(umask 077 && printf '%s\n' "$TOKEN" >"$T/a2.token")
spawn "$T/agent-a2.log" nsenter --net="/run/netns/$GBENCH_P2" "$GP" agent \
    --coordinator "http://192.168.77.2:$COORD_PORT" --token-file "$T/a2.token" \
    --name a2 --work "$T/agents/a2" --fake-gpus 1 --run-as nobody \
    --advertise-addr 192.168.77.3 -v
wait_node_up a1
wait_node_up a2
# shellcheck disable=SC2016 # run by the parts' shell
submit --nodes 2 --gpus-per-node 1 --time 2m -- sh -c '
if [ "$RANK" = 0 ]; then exec iperf3 -s -1 -p "$MASTER_PORT"; fi
for i in $(seq 100); do
	iperf3 -c "$MASTER_ADDR" -p "$MASTER_PORT" -t 5 -f g && exit 0
	sleep 0.1
done
exit 1'
wait_final "$JOB" 90
cli logs --part 1 "$JOB"
echo "gang part to part (job networks): $(printf '%s\n' "$CLI_OUT" |
    awk '/receiver/ {print $7, $8}')"
