#!/usr/bin/env bash
# bench/net_candidates.sh: the three ways issue 14 considered to give a job a
# network of its own, measured here: a veth pair + nftables (kernel), pasta
# (Debian's passt) and slirp4netns (user-mode stacks). For each: the time to
# make a namespace ready to send (per job start), and TCP throughput from the
# namespace to an iperf3 server in a "world" namespace this script makes
# (198.51.100.1, a documentation address: nothing leaves the machine).
# Needs root. Usage: bench/net_candidates.sh [STARTS] [SECONDS]
set -eu
n=${1:-30}
secs=${2:-3}
tag=gpbench$$
world=${tag}w
cleanup() {
	set +e
	[ -n "${srv:-}" ] && kill "$srv" 2>/dev/null
	ip netns del "$world" 2>/dev/null || true
	ip link del ${tag}h 2>/dev/null || true
	for i in $(seq 0 "$n"); do ip netns del ${tag}j$i 2>/dev/null || true; done
	nft delete table inet $tag 2>/dev/null || true
}
trap cleanup EXIT
ms() { date +%s%N; }
pct() { sort -n | awk '{a[NR]=$1} END {printf "p50 %.2f ms p99 %.2f ms", a[int((NR+1)/2)], a[int(NR*0.99+0.999)]}'; }

ip netns add "$world"
ip link add ${tag}h type veth peer name w0 netns "$world"
ip addr add 198.51.100.2/24 dev ${tag}h
ip link set ${tag}h up
ip -n "$world" addr add 198.51.100.1/24 dev w0
ip -n "$world" link set w0 up
ip -n "$world" link set lo up
ip netns exec "$world" iperf3 -s >/dev/null 2>&1 &
srv=$!
for i in $(seq 100); do
	ip netns exec "$world" ss -ltn | grep -q ':5201 ' && break
	sleep 0.05
done
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== no isolation (host namespace to world)"
iperf3 -c 198.51.100.1 -t "$secs" -f g | awk '/receiver/ {print "throughput", $7, $8}'

echo "== veth + nftables (ip commands, one netns per start)"
sysctl -qw net.ipv4.ip_forward=1
nft -f - <<NFT
table inet $tag {
	chain job_forward { type filter hook forward priority 0; policy accept;
		iifname "${tag}v*" ip daddr { 10.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16 } drop
	}
	chain job_nat { type nat hook postrouting priority 100;
		ip saddr 10.254.0.0/16 oifname != "${tag}v*" masquerade
	}
}
NFT
times=()
for i in $(seq 1 "$n"); do
	t0=$(ms)
	ip netns add ${tag}j$i
	ip link add ${tag}v$i type veth peer name eth0 netns ${tag}j$i
	ip addr add 10.254.$i.0/31 dev ${tag}v$i
	ip link set ${tag}v$i up
	ip -n ${tag}j$i -b - <<B
link set lo up
addr add 10.254.$i.1/31 dev eth0
link set eth0 up
route add default via 10.254.$i.0
B
	t1=$(ms)
	times+=($(( (t1 - t0) / 1000 )))
done
printf '%s\n' "${times[@]}" | awk '{print $1/1000}' | pct; echo " (start, ip commands)"
ip netns exec ${tag}j1 iperf3 -c 198.51.100.1 -t "$secs" -f g | awk '/receiver/ {print "throughput", $7, $8}'
for i in $(seq 1 "$n"); do ip netns del ${tag}j$i; done

echo "== pasta (user-mode, one helper per job)"
times=()
for i in $(seq 1 "$n"); do
	unshare -n sleep 60 & p=$!
	t0=$(ms)
	if ! pasta --config-net -q -t none -u none -T none -U none \
	    --no-map-gw --runas 0:0 --netns /proc/$p/ns/net \
	    --pid /tmp/$tag.pasta.pid 2>/tmp/$tag.pasta.err; then
		echo "pasta fails here: $(tail -1 /tmp/$tag.pasta.err)"
		kill $p; wait $p 2>/dev/null || true
		break
	fi
	t1=$(ms)
	times+=($(( (t1 - t0) / 1000 )))
	if [ "$i" = 1 ]; then
		nsenter -t $p -n iperf3 -c 198.51.100.1 -t "$secs" -f g | awk '/receiver/ {print "throughput", $7, $8}'
	fi
	kill $p; wait $p 2>/dev/null || true
	kill "$(cat /tmp/$tag.pasta.pid)" 2>/dev/null || true
done
[ ${#times[@]} -gt 0 ] && { printf '%s\n' "${times[@]}" | awk '{print $1/1000}' | pct; echo " (start: pasta forked, namespace configured)"; }
rm -f /tmp/$tag.pasta.pid /tmp/$tag.pasta.err

echo "== slirp4netns (user-mode, one helper per job)"
times=()
for i in $(seq 1 "$n"); do
	unshare -n sleep 60 & p=$!
	rm -f /tmp/$tag.ready; mkfifo /tmp/$tag.ready
	t0=$(ms)
	slirp4netns --configure --disable-host-loopback --ready-fd 3 $p tap0 \
	    3>/tmp/$tag.ready >/dev/null 2>&1 & s=$!
	head -c1 /tmp/$tag.ready >/dev/null
	t1=$(ms)
	times+=($(( (t1 - t0) / 1000 )))
	if [ "$i" = 1 ]; then
		nsenter -t $p -n iperf3 -c 198.51.100.1 -t "$secs" -f g | awk '/receiver/ {print "throughput", $7, $8}'
	fi
	kill $s $p 2>/dev/null; wait $s $p 2>/dev/null || true
done
rm -f /tmp/$tag.ready
printf '%s\n' "${times[@]}" | awk '{print $1/1000}' | pct; echo " (start: slirp4netns ready)"
