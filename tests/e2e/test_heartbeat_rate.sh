# Proves that the coordinator bounds the pool's heartbeat rate
# (--heartbeat-rate): agents are told a longer period as nodes join, and
# each node's lease follows what it was told (a node silent longer than
# the base lease but within its own stays up; beyond its own, it is lost).
# Base: --heartbeat-ms 300 --lease-ms 2000 (lib.sh), rate 2 a second:
# one node beats every 500 ms (lease 3333), two every 1000 ms (lease 6666).
. "$(dirname "$0")/lib.sh"

start_coordinator --heartbeat-rate 2
start_agent alpha 1
wait_node_up alpha
wait_log() { # FILE TEXT
	local deadline=$((SECONDS + WAIT_S))
	until grep -q -- "$2" "$1"; do
		[ $SECONDS -ge $deadline ] && fail "no '$2' in $1: $(tail -n 5 "$1")"
		sleep 0.1
	done
}
wait_log "$T/agent-alpha.log" "heartbeat_ms=500 lease_ms=3333"

start_agent beta 1
wait_node_up beta
wait_log "$T/agent-beta.log" "heartbeat_ms=1000 lease_ms=6666"
# alpha hears of the longer period in a heartbeat's answer
wait_log "$T/agent-alpha.log" "heartbeat period changed heartbeat_ms=1000 was=500"

# Silent for 3 s: past the base lease (2 s) but within alpha's own.
sleep 1.5
kill -STOP "${AGENT_PID[alpha]}"
sleep 3
assert_eq up "$(node_state alpha)" "alpha within its told lease"
kill -CONT "${AGENT_PID[alpha]}"
grep -q 'lease expired node=alpha' "$COORD_LOG" &&
	fail "alpha's lease expired within the lease it was told"

# Silent past its own lease: lost.
sleep 1.5
kill -STOP "${AGENT_PID[alpha]}"
wait_node_state alpha down 20
kill -CONT "${AGENT_PID[alpha]}"
wait_node_up alpha
log "ok: the heartbeat period and leases follow the pool's size"
