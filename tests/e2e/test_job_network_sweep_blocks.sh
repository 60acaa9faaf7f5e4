#!/usr/bin/env bash
# test_job_network_sweep_blocks.sh: a root agent's start sweeps what
# killed agents of OTHER address blocks left (issue 14), and only theirs.
# The agent looks once at each kind of leftover for all 256 blocks and
# sweeps only the blocks where it found one (agent/netns.c stale_blocks:
# the old block-by-block look took ~1 s per start); this plants one of
# each kind for free blocks (their locks free: their agents are gone),
# one kind per block, and for a block H whose lock this test holds (a
# live agent), in a network namespace of the test's own, and checks that
# after the start the free blocks have none left and H has all of its:
# tables (the block's and an overlay's), a veth pair, an overlay device,
# a gang route (metric 7000 + block), a DNS relay's address on lo and its
# pid file, an overlay's pid file and control socket.
set -u
here=$(cd "$(dirname "$0")" && pwd)
name=$(basename "$0" .sh)
run_dir=/run/gpupool-net

if [ -z "${GPSWB_INSIDE:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP $name: needs netns: network namespaces need root"; exit 77; }
	for c in ip nsenter nft flock; do
		command -v "$c" >/dev/null 2>&1 || { echo "SKIP $name: needs netns: no $c"; exit 77; }
	done
	ns=gpswb-$$
	trap 'for p in $(ip netns pids $ns 2>/dev/null); do kill -KILL $p 2>/dev/null; done; ip netns del $ns 2>/dev/null' EXIT
	ip netns add "$ns" && ip -n "$ns" link set lo up ||
		{ echo "FAIL: cannot make the test namespace"; exit 1; }
	nsenter --net="/run/netns/$ns" env GPSWB_INSIDE=1 bash "$here/$name.sh"
	exit $?
fi

. "$here/lib.sh"

kinds="veth overlay-device table overlay-table route relay-address relay-pid overlay-pid overlay-socket"
# A block whose lock this test holds (H), and two free blocks per kind of
# leftover (so that a kind the agent overlooks stays behind), from the
# top down. Agents' blocks come from a hash of their work directory, and
# other tests' agents start meanwhile: a block one of them takes is not
# the start's to sweep, and is left out of the checks (said); each kind
# must be checked on at least one of its two blocks.
mkdir -p "$run_dir" /var/run/wireguard
H= free=()
for b in $(seq 255 -1 1); do
	exec {probe}>>"$run_dir/$(printf %02x "$b").lock"
	if flock -n "$probe"; then
		if [ -z "$H" ]; then
			H=$b HOLD_FD=$probe	# held until the test ends
			continue
		fi
		free+=("$b")
	fi
	exec {probe}>&-
	[ ${#free[@]} -ge 18 ] && break
done
[ ${#free[@]} -ge 18 ] || fail "not 19 free address blocks (agents hold them all?)"
files=()
sweep_files() {
	local rc=$?
	rm -f "${files[@]+"${files[@]}"}"
	return $rc	# cleanup reads the test's status in $?
}
trap 'sweep_files; cleanup' EXIT

# The gang routes go through a veth of the test's own.
ip link add gpswb0 type veth peer name gpswb1 &&
	ip addr add 192.0.2.1/24 dev gpswb0 && ip link set gpswb0 up &&
	ip link set gpswb1 up || fail "cannot make the route's veth"
plant() { # KIND BLOCK: one leftover of that kind, as agent/netns.c and
	# agent/overlay.c name them
	local x
	x=$(printf %02x "$2")
	case $1 in
	veth) ip link add "gp$x.7" type veth peer name "gp$x.8" ;;
	overlay-device) ip link add "gpw${x}04" type veth peer name "gpswp$x" ;;
	table) nft add table inet "gpupool_$x" ;;
	overlay-table) nft add table inet "gpupool_ov_${x}_03" ;;
	route) ip route add "10.204.$2.9/32" via 192.0.2.2 metric $((7000 + $2)) ;;
	relay-address) ip addr add "169.254.53.$2/32" dev lo ;;
	# Pid 1 is no relay nor wireguard-go: the sweep deletes the files.
	relay-pid) files+=("$run_dir/$x.dns.pid") && echo 1 >"${files[-1]}" ;;
	overlay-pid) files+=("$run_dir/$x.05.wg.pid") && echo 1 >"${files[-1]}" ;;
	overlay-socket) files+=("/var/run/wireguard/gpw${x}06.sock") && : >"${files[-1]}" ;;
	esac || fail "cannot plant block $2's $1"
}
left() { # BLOCK: what of the leftovers planted there is still here
	local out="" x
	x=$(printf %02x "$1")
	ip link show "gp$x.7" >/dev/null 2>&1 && out+=" veth"
	ip link show "gpw${x}04" >/dev/null 2>&1 && out+=" overlay-device"
	nft list table inet "gpupool_$x" >/dev/null 2>&1 && out+=" table"
	nft list table inet "gpupool_ov_${x}_03" >/dev/null 2>&1 && out+=" overlay-table"
	ip route show "10.204.$1.9/32" | grep -q . && out+=" route"
	ip -4 addr show dev lo | grep -q "169.254.53.$1/32" && out+=" relay-address"
	[ -e "$run_dir/$x.dns.pid" ] && out+=" relay-pid"
	[ -e "$run_dir/$x.05.wg.pid" ] && out+=" overlay-pid"
	[ -e "/var/run/wireguard/gpw${x}06.sock" ] && out+=" overlay-socket"
	echo "${out# }"
}
i=0
for k in $kinds; do
	plant "$k" "${free[$i]}"
	plant "$k" "${free[$((i + 1))]}"
	plant "$k" "$H"
	i=$((i + 2))
done

start_coordinator
printf 'network = lan\nimages = any\n' >"$T/lan.policy"
start_agent s 1 --policy "$T/lan.policy" --gang-overlay off
deadline=$((SECONDS + WAIT_S))
until grep -q "job networks ready" "$T/agent-s.log" 2>/dev/null; do
	alive "${AGENT_PID[s]}" || fail "the agent exited: $(tail -5 "$T/agent-s.log")"
	[ $SECONDS -ge $deadline ] && fail "no 'job networks ready' after ${WAIT_S}s"
	sleep 0.1
done
i=0
for k in $kinds; do
	checked=0
	for b in "${free[$i]}" "${free[$((i + 1))]}"; do
		exec {probe}>>"$run_dir/$(printf %02x "$b").lock"
		if ! flock -n "$probe"; then
			exec {probe}>&-
			log "block $b ($k) was taken by another agent meanwhile: not checked"
			continue
		fi
		exec {probe}>&-
		f_left=$(left "$b")
		[ -z "$f_left" ] || fail "free block $b: its $f_left left after the start ($(grep swept "$T/agent-s.log" | tr '\n' ' '))"
		checked=$((checked + 1))
		[ "$k" = table ] && table_block=$b
	done
	[ $checked -gt 0 ] || fail "both blocks of kind $k were taken by other agents meanwhile: inconclusive"
	i=$((i + 2))
done
assert_eq "$kinds" "$(left "$H")" "held block $H: what the start must leave alone"
grep -q "swept a stale table table=gpupool_$(printf %02x "$table_block")" "$T/agent-s.log" ||
	fail "the agent did not log the sweep of block $table_block's table"
echo "ok $name"
