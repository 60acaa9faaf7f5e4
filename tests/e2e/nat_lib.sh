# tests/e2e/nat_lib.sh: two "provider machines", each behind a home
# router of its own that masquerades onto one "internet", all in test
# namespaces (nothing leaves this machine). Used by
# tests/e2e/test_gang_overlay*.sh (their set-up too: nat_test_inside and
# nat_start_agent, at the end) and bench/net_gang_overlay.sh.
#
#   hA 192.168.1.2 -- rA (masq) 198.51.100.2 -- inet -- 203.0.113.2 (masq) rB -- hB 192.168.2.2
#                                      198.51.100.1  203.0.113.1
#
# Each router drops unsolicited inbound on its WAN, as a home router does:
# hA and hB cannot reach each other's addresses at all; both reach the
# internet namespace's 198.51.100.1 and 203.0.113.1.
#
# nat_make PREFIX [symmetric]: makes PREFIX{i,ra,rb,ha,hb}; sets NAT_NS
# (their names) and NAT_I, NAT_HA, NAT_HB. 0, or 1 with a message on
# stderr. "symmetric": both routers map each new flow (each new
# destination) to a new random source port (masquerade random,
# fully-random), as carrier-grade and many corporate NATs do: UDP hole
# punching cannot work through them (tests/e2e/test_gang_overlay_relay.sh
# checks it), only flows a machine opens itself get answers.
# nat_delete: kills every process in them and deletes them.

nat_make() {
	local p=$1 s r h wan gw lan n masq=masquerade
	[ "${2:-}" = symmetric ] && masq="masquerade random,fully-random"
	NAT_I=${p}i NAT_HA=${p}ha NAT_HB=${p}hb
	NAT_NS="${p}i ${p}ra ${p}rb ${p}ha ${p}hb"
	for n in $NAT_NS; do
		ip netns add "$n" && ip -n "$n" link set lo up ||
		    { echo "nat_make: netns $n" >&2; return 1; }
	done
	ip -n "${p}i" link add wa type veth peer name wan netns "${p}ra" &&
	    ip -n "${p}i" link add wb type veth peer name wan netns "${p}rb" &&
	    ip -n "${p}i" addr add 198.51.100.1/24 dev wa &&
	    ip -n "${p}i" addr add 203.0.113.1/24 dev wb &&
	    ip -n "${p}i" link set wa up && ip -n "${p}i" link set wb up &&
	    ip netns exec "${p}i" sysctl -qw net.ipv4.ip_forward=1 ||
	    { echo "nat_make: the internet" >&2; return 1; }
	for s in a b; do
		r=${p}r$s
		h=${p}h$s
		if [ $s = a ]; then
			wan=198.51.100.2 gw=198.51.100.1 lan=192.168.1
		else
			wan=203.0.113.2 gw=203.0.113.1 lan=192.168.2
		fi
		ip -n "$r" addr add $wan/24 dev wan &&
		    ip -n "$r" link set wan up &&
		    ip -n "$r" route add default via $gw &&
		    ip -n "$r" link add lan type veth peer name eth0 netns "$h" &&
		    ip -n "$r" addr add $lan.1/24 dev lan &&
		    ip -n "$r" link set lan up &&
		    ip -n "$h" addr add $lan.2/24 dev eth0 &&
		    ip -n "$h" link set eth0 up &&
		    ip -n "$h" route add default via $lan.1 &&
		    ip netns exec "$r" sysctl -qw net.ipv4.ip_forward=1 ||
		    { echo "nat_make: router $s" >&2; return 1; }
		ip netns exec "$r" nft -f - <<-NFT || { echo "nat_make: nft on router $s" >&2; return 1; }
		table ip nat {
			chain post { type nat hook postrouting priority 100;
				oifname "wan" $masq; }
		}
		table ip filter {
			chain c_in { type filter hook input priority 0; policy accept;
				iifname "wan" ct state established,related accept;
				iifname "wan" drop; }
			chain c_fwd { type filter hook forward priority 0; policy accept;
				iifname "wan" ct state established,related accept;
				iifname "wan" drop; }
		}
		NFT
	done
}

nat_delete() {
	local n q
	for n in ${NAT_NS:-}; do
		for q in $(ip netns pids "$n" 2>/dev/null); do
			kill -KILL "$q" 2>/dev/null
		done
		ip netns del "$n" 2>/dev/null
	done
}

# nat_test_inside VAR PREFIX WORDS [NAT_MAKE_ARG...]: the first part of a
# test whose machines stand behind the two NATs, before tests/e2e/lib.sh;
# in the test's run inside (VAR_INSIDE set), it returns at once. Skips
# (exit 77, "SKIP <test>: needs WORD") unless this machine has every WORD
# of WORDS (tests/requirements.sh); makes the namespaces (nat_make PREFIX
# NAT_MAKE_ARG...; FAIL and exit 1 when it cannot); runs the test ($0)
# again on "the internet" (NAT_I: the coordinator's side) with
# VAR_INSIDE=1 and VAR_HA, VAR_HB (the two machines' namespaces) in its
# environment; deletes the namespaces and exits with the test's status.
nat_test_inside() {
	local var=$1 prefix=$2 words=$3 inside=${1}_INSIDE test w
	[ -n "${!inside:-}" ] && return 0
	shift 3
	test="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
	. "$(dirname "${BASH_SOURCE[0]}")/../requirements.sh"
	for w in $words; do
		if ! requirement_present "$w"; then
			echo "SKIP $(basename "$0" .sh): needs $w: not on this machine"
			exit 77
		fi
	done
	trap nat_delete EXIT
	nat_make "$prefix" "$@" || { echo "FAIL: cannot make the test namespaces"; exit 1; }
	nsenter --net="/run/netns/$NAT_I" env "${var}_INSIDE=1" \
	    "${var}_HA=$NAT_HA" "${var}_HB=$NAT_HB" bash "$test"
	exit $?
}

# nat_start_agent NAME NETNS COORDINATOR-ADDRESS [AGENT_FLAG...] (the
# test's part inside, after tests/e2e/lib.sh): agent NAME on the machine
# whose namespace is NETNS, dialling http://ADDRESS:$COORD_PORT with a
# provider token of its own ($T/NAME.token, made once: a restart keeps
# it), two fake GPUs, its jobs run as nobody, -v and the AGENT_FLAGs. Its
# log is $T/agent-NAME.log, its pid AGENT_PID[NAME].
nat_start_agent() {
	local name=$1 ns=$2 addr=$3
	shift 3
	if [ ! -s "$T/$name.token" ]; then
		mk_token provider "prov-$name"
		(umask 077 && printf '%s\n' "$TOKEN" >"$T/$name.token")
	fi
	spawn "$T/agent-$name.log" nsenter --net="/run/netns/$ns" "$GP" agent \
	    --coordinator "http://$addr:$COORD_PORT" --token-file "$T/$name.token" \
	    --name "$name" --work "$T/agents/$name" --fake-gpus 2 --run-as nobody \
	    "$@" -v
	# shellcheck disable=SC2034 # tests/e2e/lib.sh's
	AGENT_PID[$name]=$SPAWNED_PID
}
