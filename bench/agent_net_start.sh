#!/usr/bin/env bash
# bench/agent_net_start.sh: what a root agent's start costs with job
# networks (issue 14, "netstart"): an agent with `network = lan` and
# --gang-overlay auto, as tests/e2e/test_gang_overlay*.sh start theirs,
# in a test namespace of its own (nothing leaves the machine), started N
# times and stopped (SIGTERM) each time, and for each start:
#   - net_ms: from the exec to the agent's "job networks ready" line
#     (the sweep of what killed agents left, the table, sysctls);
#   - up_ms:  from the exec to its "registered node=" line (the node is up);
#   - wait_ms: from the exec to `wait_node_up` returning (what a test
#     waits; includes its 0.1 s poll).
# With BEFORE_BIN=path/to/an/older/gpupool, each round starts that
# binary, then this tree's, on one coordinator, one work directory (so
# one address block) and one load: lines are prefixed before/after.
# Usage: BUILD=build [BEFORE_BIN=...] bench/agent_net_start.sh [N] (root)
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN=${GPUPOOL_BIN:-$PWD/${BUILD:-build}/gpupool}
n=${1:-5}
if [ -z "${NSBENCH_INSIDE:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }
	command -v nft >/dev/null || { echo "SKIP: no nft"; exit 77; }
	ns=gpnsb-$$
	trap 'for p in $(ip netns pids $ns 2>/dev/null); do kill -KILL $p; done; ip netns del $ns 2>/dev/null' EXIT
	ip netns add "$ns" && ip -n "$ns" link set lo up || exit 1
	echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	nsenter --net="/run/netns/$ns" env NSBENCH_INSIDE=1 bash "$0" "$n"
	rc=$?
	echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	exit $rc
fi
TEST_NAME=agent_net_start_bench
. tests/e2e/lib.sh
start_coordinator
printf 'network = lan\nimages = any\n' >"$T/lan.policy"
log_ms() { # LOGFILE PATTERN: the first matching line's time, epoch ms
	local line
	line=$(grep -m1 -- "$2" "$1") || { echo -1; return; }
	echo $(($(date -d "${line%% *}" +%s%3N)))
}
bins=("after:$GP")
[ -n "${BEFORE_BIN:-}" ] && bins=("before:$BEFORE_BIN" "after:$GP")
new_gp=$GP
declare -A sum_net sum_up sum_wait
for r in $(seq "$n"); do
	for b in "${bins[@]}"; do
		label=${b%%:*}
		GP=${b#*:}
		logf="$T/agent-a.log"
		: >"$logf"
		t0=$(date +%s%3N)
		start_agent a 2 --policy "$T/lan.policy" --gang-overlay auto
		wait_node_up a 60
		t_wait=$(date +%s%3N)
		until grep -q "registered node=a" "$logf"; do sleep 0.05; done
		net=$(($(log_ms "$logf" "job networks ready") - t0))
		up=$(($(log_ms "$logf" "registered node=a") - t0))
		wait=$((t_wait - t0))
		echo "$label run=$r net_ms=$net up_ms=$up wait_ms=$wait"
		sum_net[$label]=$((${sum_net[$label]:-0} + net))
		sum_up[$label]=$((${sum_up[$label]:-0} + up))
		sum_wait[$label]=$((${sum_wait[$label]:-0} + wait))
		kill -TERM "${AGENT_PID[a]}"
		wait_exit "${AGENT_PID[a]}" 60 || { echo "agent survived"; exit 1; }
		wait_node_state a down 60
		cp "$logf" "$T/agent-a.$label.$r.log"
	done
done
GP=$new_gp
for b in "${bins[@]}"; do
	label=${b%%:*}
	echo "$label mean over $n: net_ms=$((${sum_net[$label]} / n))" \
	    "up_ms=$((${sum_up[$label]} / n)) wait_ms=$((${sum_wait[$label]} / n))"
done
