# tests/e2e/gang_lib.sh: two provider machines on a LAN of their own, for
# the gang tests (test_gang_network, test_gang_torch, test_gang_image).
# Sourced first thing by a test: outside, it makes three test namespaces
# (two "machines", 192.168.77.2 and .3, and a bridge at 192.168.77.1
# playing the LAN), runs the same test again inside the first machine's
# namespace and exits with its status; inside (GPGANG_INSIDE set), it
# returns at once and GPGANG_P2 names the second machine's namespace.
# Nothing of the test can reach the machine's own network.

gang_machines() { # TEST_NAME SCRIPT
	local name=$1 script=$2 p1 p2 lan c i ns
	[ -n "${GPGANG_INSIDE:-}" ] && return 0
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP $name: needs netns: network namespaces need root"
		exit 77
	fi
	for c in ip nsenter nft; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "SKIP $name: needs netns: no $c"
			exit 77
		fi
	done
	p1=gpgang-$$-1
	p2=gpgang-$$-2
	lan=gpgang-$$-l
	GANG_NAMESPACES="$p1 $p2 $lan"
	gang_cleanup() {
		local n p
		for n in $GANG_NAMESPACES; do
			for p in $(ip netns pids "$n" 2>/dev/null); do
				kill -KILL "$p" 2>/dev/null
			done
			ip netns del "$n" 2>/dev/null
		done
	}
	trap gang_cleanup EXIT
	ip netns add "$p1" && ip netns add "$p2" && ip netns add "$lan" &&
	    ip -n "$lan" link add br0 type bridge &&
	    ip -n "$lan" addr add 192.168.77.1/24 dev br0 &&
	    ip -n "$lan" link set br0 up && ip -n "$lan" link set lo up ||
	    { echo "FAIL: cannot make the test namespaces"; exit 1; }
	for i in 1 2; do
		ns=$p1
		[ "$i" = 2 ] && ns=$p2
		ip -n "$ns" link add up0 type veth peer name down$i \
		    netns "$lan" &&
		    ip -n "$lan" link set down$i master br0 &&
		    ip -n "$lan" link set down$i up &&
		    ip -n "$ns" link set lo up &&
		    ip -n "$ns" addr add 192.168.77.$((i + 1))/24 dev up0 &&
		    ip -n "$ns" link set up0 up &&
		    ip -n "$ns" route add default via 192.168.77.1 ||
		    { echo "FAIL: cannot make provider $i"; exit 1; }
	done
	nsenter --net="/run/netns/$p1" env GPGANG_INSIDE=1 GPGANG_P2="$p2" \
	    bash "$script"
	exit $?
}

# After lib.sh's start_coordinator, inside: the second machine's agent
# dials the coordinator (listening on 127.0.0.1) through a relay on the
# first machine's LAN address, 192.168.77.2, same port.
gang_coordinator_relay() {
	local relay deadline
	spawn "$T/relay.log" "$PY" -c "$NETNS_RELAY_PY" 192.168.77.2 \
	    "$COORD_PORT" "$COORD_PORT"
	relay=$SPAWNED_PID
	deadline=$((SECONDS + WAIT_S))
	until grep -q '^relay listening' "$T/relay.log" 2>/dev/null; do
		alive "$relay" || fail "relay exited: $(cat "$T/relay.log")"
		[ $SECONDS -ge $deadline ] && fail "relay not listening"
		sleep 0.1
	done
}

# gang_start_a2 [ARG...]: agent a2 (one fake GPU) on the second machine,
# advertising 192.168.77.3, through gang_coordinator_relay; its token is
# made on first use. Sets AGENT_PID[a2].
gang_start_a2() {
	if [ ! -s "$T/a2.token" ]; then
		mk_token provider prov-a2
		(umask 077 && printf '%s\n' "$TOKEN" >"$T/a2.token")
	fi
	spawn "$T/agent-a2.log" nsenter --net="/run/netns/$GPGANG_P2" "$GP" \
	    agent --coordinator "http://192.168.77.2:$COORD_PORT" \
	    --token-file "$T/a2.token" --name a2 --work "$T/agents/a2" \
	    --fake-gpus 1 --run-as nobody --advertise-addr 192.168.77.3 "$@" -v
	# shellcheck disable=SC2034 # tests/e2e/lib.sh's
	AGENT_PID[a2]=$SPAWNED_PID
}
