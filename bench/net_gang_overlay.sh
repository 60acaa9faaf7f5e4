#!/bin/bash
# bench/net_gang_overlay.sh: two "provider machines" each behind its own
# NAT (a home router namespace masquerading onto "the internet"), joined
# by a wireguard-go overlay made by hand (what the agent automates:
# src/agent/overlay.c, bench/net_gang_overlay_agent.sh); iperf3 across
# the overlay (issue 14, gangs across NATs). All in test namespaces
# (tests/e2e/nat_lib.sh): nothing leaves this machine.
#
#   hA 192.168.1.2 -- rA (masq) 198.51.100.2 -- inet -- 203.0.113.2 (masq) rB -- hB 192.168.2.2
#
# Each router drops unsolicited inbound on its WAN (as a home router
# does); UDP hole punching works because both ends send to the other's
# router at once (persistent keepalive) and masquerade keeps the source
# port. The overlay addresses are 10.209.0.1 and .2.
#
# Usage: bench/net_gang_overlay.sh [SECONDS]   (root; prints figures)
set -u
secs=${1:-5}
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root (network namespaces)"
	exit 77
fi
for c in ip nft wireguard-go wg iperf3; do
	command -v "$c" >/dev/null 2>&1 || { echo "SKIP: no $c"; exit 77; }
done
[ -c /dev/net/tun ] || { echo "SKIP: no /dev/net/tun"; exit 77; }

. "$(dirname "$0")/../tests/e2e/nat_lib.sh"
p=gpov$$
# wireguard-go's control socket is /var/run/wireguard/NAME.sock, shared
# by every namespace: the interface names must be unique on the machine.
wa=${p}a
wb=${p}b
tmp=$(mktemp -d)
cleanup() {
	nat_delete
	rm -f "/var/run/wireguard/$wa.sock" "/var/run/wireguard/$wb.sock"
	rm -rf "$tmp"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; exit 1; }

# the topology (tests/e2e/nat_lib.sh): hA and hB behind two NATs
nat_make "$p" || die "the test namespaces"

# the direct route cannot work: hB's address is private behind rB
if ip netns exec ${p}ha timeout 3 bash -c \
    'exec 3<>/dev/tcp/192.168.2.2/5201' 2>/dev/null; then
	die "hA reached hB's private address directly"
fi
echo "direct: hA cannot reach hB (192.168.2.2) across the two NATs"

# keys made on each side; only public keys cross
ka=$(wg genkey) && kb=$(wg genkey) || die "wg genkey"
pa=$(printf '%s\n' "$ka" | wg pubkey)
pb=$(printf '%s\n' "$kb" | wg pubkey)
umask 077
printf '%s\n' "$ka" >"$tmp/ka"
printf '%s\n' "$kb" >"$tmp/kb"
t0=$(date +%s%N)
ip netns exec ${p}ha wireguard-go "$wa" >/dev/null 2>&1 || die "wireguard-go a"
ip netns exec ${p}hb wireguard-go "$wb" >/dev/null 2>&1 || die "wireguard-go b"
wg set "$wa" listen-port 51820 private-key "$tmp/ka" peer "$pb" \
    endpoint 203.0.113.2:51821 allowed-ips 10.209.0.2/32 \
    persistent-keepalive 1 || die "wg set a"
wg set "$wb" listen-port 51821 private-key "$tmp/kb" peer "$pa" \
    endpoint 198.51.100.2:51820 allowed-ips 10.209.0.1/32 \
    persistent-keepalive 1 || die "wg set b"
ip -n ${p}ha addr add 10.209.0.1/24 dev "$wa"
ip -n ${p}ha link set "$wa" up
ip -n ${p}hb addr add 10.209.0.2/24 dev "$wb"
ip -n ${p}hb link set "$wb" up
ip netns exec ${p}hb iperf3 -s -D -I "$tmp/iperf.pid" >/dev/null ||
    die "iperf3 server"
ok=
for _ in $(seq 1 100); do
	if ip netns exec ${p}ha timeout 1 bash -c \
	    'exec 3<>/dev/tcp/10.209.0.2/5201' 2>/dev/null; then
		ok=1
		break
	fi
	sleep 0.1
done
t1=$(date +%s%N)
[ -n "$ok" ] || { wg show "$wa"; die "no overlay connection in 10 s"; }
echo "overlay: up and connected in $(( (t1 - t0) / 1000000 )) ms" \
    "(both daemons started, keys set, handshake through both NATs)"
wg show "$wa" endpoints
ip netns exec ${p}ha iperf3 -c 10.209.0.2 -t "$secs" -f m |
    grep -E 'sender|receiver'
ip netns exec ${p}ha iperf3 -c 10.209.0.2 -t "$secs" -f m -R |
    grep -E 'sender|receiver' | sed 's/$/ (reverse)/'
# the same transfer without the overlay: hA to rB's WAN address
ip netns exec ${p}rb iperf3 -s -D -p 5202 >/dev/null
sleep 0.3
ip netns exec ${p}rb nft insert rule ip filter c_in iifname wan tcp dport 5202 accept
echo "without the overlay (hA through its NAT to rB's public address):"
ip netns exec ${p}ha iperf3 -c 203.0.113.2 -p 5202 -t "$secs" -f m |
    grep -E 'sender|receiver'
