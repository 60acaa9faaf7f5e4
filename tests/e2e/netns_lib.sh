# tests/e2e/netns_lib.sh: the two test namespaces of the job network tests
# (test_job_network.sh, test_job_network_ipv6.sh, test_job_network_pasta.sh):
#
#   provider: where the whole pool runs; up0 192.168.77.2/24, default
#             route via 192.168.77.1;
#   world:    its only way out, at the other end of the veth pair:
#             down0 192.168.77.1/24 (the LAN), 198.51.100.1 on lo (a
#             documentation address standing for the internet).
#
# Nothing of a test can reach the machine's own network whatever a job's
# rules do. A test adds its own addresses after netns_pair_make (IPv6,
# more addresses of the provider's) with `ip -n "$NETNS_PROV" ...`. The
# servers its jobs try to reach are netns_servers.py's.
#
# The outer run of such a test (as root, before lib.sh):
# netns_pair_need NAME [CMD...]: exits 77 (SKIP NAME: needs netns) unless
#   this is root and ip, nsenter, nft and every CMD are on PATH.
# netns_pair_make PREFIX: makes PREFIX-p and PREFIX-w (NETNS_PROV,
#   NETNS_WORLD) and traps EXIT to delete them; exits 1 (FAIL) when it
#   cannot.
# netns_pair_world_serve SERVER...: netns_servers.py's SERVERs in the
#   world, in the background; killed by netns_pair_delete.
# netns_pair_in_provider CMD...: runs CMD in the provider with
#   GPNET_INSIDE=1 (the test's inner run, which sources lib.sh); its exit
#   status.
# netns_pair_delete: kills every process in them and deletes them.
#
# The inner run (after lib.sh):
# netns_pair_host_serve SERVER...: netns_servers.py's SERVERs on the
#   provider host, listening when it returns (log $T/host-servers.log).

NETNS_PAIR_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

netns_pair_need() {
	local name=$1 c
	shift
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP $name: needs netns: network namespaces need root"
		exit 77
	fi
	for c in ip nsenter nft "$@"; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "SKIP $name: needs netns: no $c"
			exit 77
		fi
	done
}

netns_pair_make() {
	NETNS_PROV=$1-p
	NETNS_WORLD=$1-w
	NETNS_WORLD_PIDS=
	trap netns_pair_delete EXIT
	ip netns add "$NETNS_PROV" && ip netns add "$NETNS_WORLD" &&
	    ip -n "$NETNS_PROV" link add up0 type veth peer name down0 \
	        netns "$NETNS_WORLD" &&
	    ip -n "$NETNS_PROV" link set lo up &&
	    ip -n "$NETNS_WORLD" link set lo up &&
	    ip -n "$NETNS_PROV" addr add 192.168.77.2/24 dev up0 &&
	    ip -n "$NETNS_PROV" link set up0 up &&
	    ip -n "$NETNS_WORLD" addr add 192.168.77.1/24 dev down0 &&
	    ip -n "$NETNS_WORLD" addr add 198.51.100.1/32 dev lo &&
	    ip -n "$NETNS_WORLD" link set down0 up &&
	    ip -n "$NETNS_PROV" route add default via 192.168.77.1 ||
	    { echo "FAIL: cannot make the test namespaces"; exit 1; }
}

netns_pair_world_serve() {
	nsenter --net="/run/netns/$NETNS_WORLD" \
	    python3 "$NETNS_PAIR_DIR/netns_servers.py" "$@" \
	    </dev/null >/dev/null 2>&1 &
	NETNS_WORLD_PIDS="$NETNS_WORLD_PIDS $!"
}

netns_pair_in_provider() {
	nsenter --net="/run/netns/$NETNS_PROV" env GPNET_INSIDE=1 "$@"
}

netns_pair_delete() {
	local ns p
	for p in ${NETNS_WORLD_PIDS:-}; do
		kill "$p" 2>/dev/null
	done
	for ns in ${NETNS_PROV:-} ${NETNS_WORLD:-}; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
}

netns_pair_host_serve() {
	local log="$T/host-servers.log" deadline=$((SECONDS + WAIT_S))
	spawn "$log" "$PY" "$NETNS_PAIR_DIR/netns_servers.py" "$@"
	until grep -q serving "$log"; do
		alive "$SPAWNED_PID" || fail "host servers exited: $(cat "$log")"
		[ $SECONDS -ge $deadline ] && fail "host servers not up"
		sleep 0.1
	done
}
