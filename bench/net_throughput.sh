#!/usr/bin/env bash
# bench/net_throughput.sh: TCP throughput (iperf3, 5 s) from a job to a
# server outside its namespace, through a real agent's job network
# (veth pair, nftables table, masquerade), against the same transfer from
# the provider host itself (no isolation). Two test namespaces, as in
# tests/e2e/test_job_network.sh: "provider" (coordinator, agent, jobs) and
# "world" (the iperf3 server on 198.51.100.1, a documentation address);
# nothing leaves the machine. Needs root. Usage: bench/net_throughput.sh
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
secs=${SECS:-5}
if [ -z "${NETBENCH_INSIDE:-}" ]; then
	prov=gpnb-$$-p
	world=gpnb-$$-w
	trap 'for ns in $prov $world; do for p in $(ip netns pids $ns 2>/dev/null); do kill -KILL $p; done; ip netns del $ns 2>/dev/null; done' EXIT
	ip netns add "$prov" && ip netns add "$world" &&
	    ip -n "$prov" link add up0 type veth peer name down0 netns "$world" &&
	    ip -n "$prov" link set lo up && ip -n "$world" link set lo up &&
	    ip -n "$prov" addr add 192.168.77.2/24 dev up0 &&
	    ip -n "$prov" link set up0 up &&
	    ip -n "$world" addr add 192.168.77.1/24 dev down0 &&
	    ip -n "$world" addr add 198.51.100.1/32 dev lo &&
	    ip -n "$world" link set down0 up &&
	    ip -n "$prov" route add default via 192.168.77.1 || exit 1
	nsenter --net="/run/netns/$world" iperf3 -s >/dev/null 2>&1 &
	echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	nsenter --net="/run/netns/$prov" env NETBENCH_INSIDE=1 BUILD="$BUILD" \
	    SECS="$secs" bash "$0"
	exit $?
fi
BIN="$PWD/$BUILD/gpupool"
DATA=$(mktemp -d /tmp/gpupool-netbench.XXXXXX)
WORK="$PWD/$BUILD/netbench-work.$$"
PORT=$((20000 + $$ % 20000))
URL="http://127.0.0.1:$PORT"
PIDS=()
. bench/lib.sh
trap 'stop_pids "${PIDS[@]}"; rm -rf "$DATA" "$WORK"' EXIT
COORD_URL=$URL
start_coordinator "$DATA/coord" "$DATA/coord.log"
for _ in $(seq 100); do
	nc -z 198.51.100.1 5201 2>/dev/null && break
	sleep 0.05
done
echo "host (no isolation): $(iperf3 -c 198.51.100.1 -t "$secs" -f g |
    awk '/receiver/ {print $7, $8}')"
PROVIDER=$(token provider netbench)
"$BIN" agent --coordinator "$URL" --token "$PROVIDER" --name netbench \
	--fake-gpus 1 --work "$WORK" --run-as nobody >"$DATA/agent.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do
	api GET /v1/nodes 2>/dev/null | grep -q '"state": *"up"' && break
	sleep 0.1
done
id=$(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN "$BIN" submit --gpus 1 -- \
    iperf3 -c 198.51.100.1 -t "$secs" -f g)
GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN "$BIN" wait "$id" >/dev/null
echo "job (veth + nftables): $(GPUPOOL_URL=$URL GPUPOOL_TOKEN=$ADMIN \
    "$BIN" logs "$id" | awk '/receiver/ {print $7, $8}')"
