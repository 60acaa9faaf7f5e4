#!/usr/bin/env bash
# bench/net_gang_overlay_relay.sh: what the gang relay costs (issue 14).
# Two agents, each on a "machine" behind a NAT of its own, a coordinator
# on "the internet" (tests/e2e/nat_lib.sh; nothing leaves the machine),
# run twice: behind NATs that keep a flow's port (masquerade: WireGuard's
# hole punching works, the overlay is direct) and behind NATs that map
# each new flow to a random port (masquerade random,fully-random: no
# handshake gets through, the agents go through the coordinator's gang
# relay after 3.5 s). Only the NATs differ:
#   - gang start latency: from `submit` to part 1's first TCP connection
#     to part 0 (MASTER_ADDR:MASTER_PORT) through the overlay, N gangs one
#     after the other;
#   - part-to-part TCP throughput through the overlay (iperf3, 5 s).
# Usage: BUILD=build bench/net_gang_overlay_relay.sh [N]   (root)
set -u
cd "$(dirname "$0")/.." || exit 1
export GPUPOOL_BIN=${GPUPOOL_BIN:-$PWD/${BUILD:-build}/gpupool}
n=${1:-6}
if [ -z "${RBENCH_INSIDE:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
	for c in wireguard-go wg iperf3 nft; do
		command -v "$c" >/dev/null || { echo "SKIP: no $c"; exit 77; }
	done
	. tests/e2e/nat_lib.sh
	trap nat_delete EXIT
	echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	rc=0
	for nat in masquerade symmetric; do
		arg=
		[ $nat = symmetric ] && arg=symmetric
		nat_make "gprb$$" $arg || exit 1
		nsenter --net="/run/netns/$NAT_I" env RBENCH_INSIDE=1 \
		    RBENCH_NAT=$nat RBENCH_HA="$NAT_HA" RBENCH_HB="$NAT_HB" \
		    bash "$0" "$n" || rc=1
		nat_delete
	done
	exit $rc
fi
TEST_NAME=net_gang_overlay_relay_bench
. tests/e2e/lib.sh
COORD_PORT=$(free_port)
start_coordinator --listen "0.0.0.0:$COORD_PORT" --insecure
printf 'network = lan\nimages = any\n' >"$T/lan.policy"
for m in a b; do
	ns=$RBENCH_HA addr=198.51.100.1
	[ $m = b ] && ns=$RBENCH_HB addr=203.0.113.1
	mk_token provider "prov-$m"
	(umask 077 && printf '%s\n' "$TOKEN" >"$T/$m.token")
	spawn "$T/agent-$m.log" nsenter --net="/run/netns/$ns" "$GP" agent \
	    --coordinator "http://$addr:$COORD_PORT" --token-file "$T/$m.token" \
	    --name "$m" --work "$T/agents/$m" --fake-gpus 1 --run-as nobody \
	    --policy "$T/lan.policy" -v
	AGENT_PID[$m]=$SPAWNED_PID
done
wait_node_up a
wait_node_up b

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
for i in $(seq 400); do
	iperf3 -c "$MASTER_ADDR" -p "$MASTER_PORT" -t 5 -f m && exit 0
	sleep 0.05
done
exit 1'
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
relayed=$(grep -c "through the relay" "$T/agent-a.log")
echo "nat=$RBENCH_NAT submit to part 1 connected (ms, $n gangs, $relayed relayed by agent a): p50 $(printf '%s\n' "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') min $(printf '%s\n' "$sorted" | head -n1) max $(printf '%s\n' "$sorted" | tail -n1) all: ${lat[*]}"
submit --nodes 2 --gpus-per-node 1 --time 2m -- sh -c "$iperf"
wait_final "$JOB" 120
cli logs --part 1 "$JOB"
echo "nat=$RBENCH_NAT part to part iperf3 through the overlay (5 s): $(printf '%s\n' "$CLI_OUT" | awk '/receiver/ {print $7, $8}') (load $(cut -d' ' -f1-3 /proc/loadavg))"
api_expect 200 "$ADMIN_TOKEN" GET /metrics
echo "nat=$RBENCH_NAT relay: $(printf '%s\n' "$API_BODY" | grep -E '^gpupool_gang_relay_(packets|bytes)_total|dropped_total.*(rate|send)' | tr '\n' ' ')"
