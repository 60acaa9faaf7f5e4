#!/usr/bin/env bash
# bench/net_pasta.sh: issue 14, a job's network when the agent is not root
# (pasta, netns_pasta.c) against a root agent's (veth pair + nftables,
# netns.c): the start cost of each (bench_pasta and bench_netns: the
# agent's own code) and TCP throughput from a job's namespace to an
# iperf3 server in a test namespace "world" (198.51.100.1, a
# documentation address), all inside a test namespace "provider" whose
# only way out is a veth pair to "world": nothing leaves the machine.
#
# /dev/net/tun is 0600 here: the pasta part runs as nobody in a private
# mount namespace with a 0666 tun node of its own bound over it (the
# host's node is left alone). Needs root, iperf3 and pasta.
# Usage: bench/net_pasta.sh [STARTS] [SECONDS]
set -eu
n=${1:-50}
secs=${2:-3}
BUILD=${BUILD:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
tag=gpbp$$
prov=${tag}p
world=${tag}w

if [ -z "${NET_PASTA_INSIDE:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "net_pasta.sh: needs root" >&2; exit 2; }
	for c in iperf3 pasta setpriv nft; do
		command -v $c >/dev/null || { echo "net_pasta.sh: no $c" >&2; exit 2; }
	done
	cleanup() {
		set +e
		for ns in "$prov" "$world"; do
			for p in $(ip netns pids "$ns" 2>/dev/null); do
				kill -KILL "$p" 2>/dev/null
			done
			ip netns del "$ns" 2>/dev/null
		done
	}
	trap cleanup EXIT
	ip netns add "$prov"
	ip netns add "$world"
	ip -n "$prov" link add up0 type veth peer name down0 netns "$world"
	ip -n "$prov" link set lo up
	ip -n "$world" link set lo up
	ip -n "$prov" addr add 192.168.77.2/24 dev up0
	ip -n "$prov" link set up0 up
	ip -n "$world" addr add 192.168.77.1/24 dev down0
	ip -n "$world" addr add 198.51.100.1/32 dev lo
	ip -n "$world" link set down0 up
	ip -n "$prov" route add default via 192.168.77.1
	ip netns exec "$world" iperf3 -s >/dev/null 2>&1 &
	for _ in $(seq 100); do
		ip netns exec "$world" ss -ltn | grep -q ':5201 ' && break
		sleep 0.05
	done
	nsenter --net="/run/netns/$prov" env NET_PASTA_INSIDE=1 BUILD="$BUILD" \
	    bash "$0" "$n" "$secs"
	exit $?
fi

cd "$here"
thr() { awk '/receiver/ {print "throughput", $7, $8}'; }
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== no isolation (the provider's namespace to world)"
iperf3 -c 198.51.100.1 -t "$secs" -f g | thr

echo "== veth pair + nftables (a root agent): start, the agent's code"
"$BUILD/bench/bench_netns" "$n" internet
echo "== veth pair + nftables: throughput (the same path: forward + masquerade)"
nft -f - <<NFT
table inet $tag {
	chain job_forward { type filter hook forward priority 0; policy accept;
		iifname "${tag}v" ip daddr { 10.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16 } drop
	}
	chain job_nat { type nat hook postrouting priority 100;
		ip saddr 10.254.0.0/16 oifname != "${tag}v" masquerade
	}
}
NFT
sysctl -qw net.ipv4.ip_forward=1
ip netns add ${tag}j
ip link add ${tag}v type veth peer name eth0 netns ${tag}j
ip addr add 10.254.1.0/31 dev ${tag}v
ip link set ${tag}v up
ip -n ${tag}j link set lo up
ip -n ${tag}j addr add 10.254.1.1/31 dev eth0
ip -n ${tag}j link set eth0 up
ip -n ${tag}j route add default via 10.254.1.0
ip netns exec ${tag}j iperf3 -c 198.51.100.1 -t "$secs" -f g | thr
ip netns del ${tag}j
nft delete table inet $tag

echo "== pasta (an agent that is not root): start, the agent's code"
work=$(mktemp -d /tmp/$tag.XXXXXX)
chown nobody:nogroup "$work"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private bash -c '
set -eu
# Under the work directory: removed with it once this namespace is gone.
d=$(mktemp -d "$2/tun.XXXXXX")
mount -t tmpfs -o mode=0755,size=64k gpbp-tun "$d"
mknod -m 0666 "$d/tun" c 10 200
mount --bind "$d/tun" /dev/net/tun
as() { setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; }
as "$BUILD/bench/bench_pasta" "$1" internet "$2"
echo "== pasta: throughput (the agent'"'"'s flags)"
as unshare -Urn sleep 600 &
holder=$!
# $! is the subshell running the function: the sleep is its child.
for i in $(seq 100); do
	p=$(pgrep -P "$holder" -x sleep) && break
	sleep 0.05
done
as pasta --foreground --quiet --config-net --no-map-gw -t none -u none \
    -T none -U none --ns-ifname eth0 --dns-forward 169.254.53.53 \
    --pid "$2/pasta.pid" "$p" &
pasta=$!
for i in $(seq 200); do [ -s "$2/pasta.pid" ] && break; sleep 0.05; done
as nsenter -U -n -t "$p" --preserve-credentials \
    iperf3 -c 198.51.100.1 -t "$3" -f g | awk "/receiver/ {print \"throughput\", \$7, \$8}"
kill "$pasta" 2>/dev/null || true
kill "$p" "$holder" 2>/dev/null || true
wait 2>/dev/null || true
umount /dev/net/tun || true
umount "$d" && rmdir "$d" || true
' net_pasta "$n" "$work" "$secs"
rm -rf "$work"
