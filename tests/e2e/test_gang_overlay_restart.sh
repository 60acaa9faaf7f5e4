#!/usr/bin/env bash
# Issue 14: a gang's WireGuard overlay survives a coordinator restart.
# Two agents behind two NATs (tests/e2e/nat_lib.sh, as
# test_gang_overlay.sh: no way between them but the overlay) run a gang
# whose part 1 talks to part 0 through it (plain TCP to MASTER_ADDR:
# MASTER_PORT, no torch, to keep the test short), then waits for the
# test's gate. The coordinator is killed (-9) and started again on the
# same store while the gang runs. Checked:
#   - the coordinator answers the same overlay after the restart (each
#     running part's public key and endpoint in show --json), and it is
#     what the agents' devices hold (wg show: public key, port);
#   - a second gang started after the restart, while the first still
#     holds its ports, gets other ports on each machine (the old
#     coordinator, which kept the slots in memory only, gave it the first
#     gang's, which its wireguard-go cannot bind) and completes in one
#     attempt through the overlay;
#   - the first gang, let go, talks through its tunnels again after the
#     restart and ends succeeded with the right result;
#   - no part's private key is in the store, the coordinator's log or
#     show --json, and the gang's overlay leaves the store when it ends.
# GP_TEST_DB=postgresql runs it on PostgreSQL; with GPOVR_FAILOVER=1 too
# (test_gang_overlay_restart_pg) a standby on the same database takes
# over from the killed coordinator instead of a restart.
# GPOV_NAT=symmetric puts the machines behind NATs that change ports per
# destination (nat_lib.sh): the gang goes through the coordinator's gang
# relay, whose flows must come back by themselves after the restart.
# Needs root, network namespaces, nft and wireguard-go (SKIP without).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nat_lib.sh"

# The test itself runs on "the internet" (the coordinator's side).
nat_test_inside GPOVR "gpor$$" "root netns nft wireguard" ${GPOV_NAT:-}

. "$here/lib.sh"

# The coordinator listens on the internet's addresses too (a test
# namespace: plain HTTP is fine here). A long lease: the agents must
# find it again, whatever the load, before it gives up on their jobs.
COORD_PORT=$(free_port)
advertise=() failover=${GPOVR_FAILOVER:-}
if [ "${GP_TEST_DB:-sqlite}" = postgresql ]; then
	advertise=(--advertise-url "http://198.51.100.1:$COORD_PORT")
elif [ -n "$failover" ]; then
	fail "GPOVR_FAILOVER needs GP_TEST_DB=postgresql"
fi
start_coordinator --listen "0.0.0.0:$COORD_PORT" --insecure --lease-ms 20000 \
    "${advertise[@]+"${advertise[@]}"}"
# GPOVR_FAILOVER: a standby on the same database and data directory,
# which takes over when the leader is killed.
if [ -n "$failover" ]; then
	port2=$(free_port)
	while [ "$port2" = "$COORD_PORT" ]; do port2=$(free_port); done
	spawn "$T/coord2.log" "$GP" coordinator --listen "0.0.0.0:$port2" \
	    --data "$COORD_DATA" --lease-ms 20000 --heartbeat-ms 300 \
	    --db "$(pg_url)" --insecure \
	    --advertise-url "http://198.51.100.1:$port2" -v
	standby_pid=$SPAWNED_PID
	deadline=$((SECONDS + WAIT_S))
	until grep -q "standby: waiting for the leader" "$T/coord2.log"; do
		alive "$standby_pid" || fail "the standby exited: $(tail -n 3 "$T/coord2.log")"
		[ $SECONDS -ge $deadline ] && fail "the standby did not start"
		sleep 0.1
	done
	coord2=(--coordinator "http://198.51.100.1:$port2")
fi
printf 'network = lan\n' >"$T/lan.policy"
# (nat_lib.sh; with a standby, the agent knows it too: a --coordinator
# after the first keeps its place in the agent's list.)
start_machine_agent() { # NAME NETNS COORDINATOR-ADDRESS
	nat_start_agent "$@" --policy "$T/lan.policy" ${failover:+"${coord2[@]}"}
}
start_machine_agent a "$GPOVR_HA" 198.51.100.1
start_machine_agent b "$GPOVR_HB" 203.0.113.1
wait_node_up a
wait_node_up b
ns_of() { [ "$1" = a ] && echo "$GPOVR_HA" || echo "$GPOVR_HB"; }

# The gang. Part 0 adds what part 1 sends ("add N", then "end N") and
# answers the sum; part 1 sends "add 20", and in gated mode waits for the
# test's `go` (its work directory) before "end 22": the right result is
# 42 (in once mode, "end 7" at once: 7). Part 0 ends only once part 1
# has its last answer (it closes the connection).
# shellcheck disable=SC2016 # python, not shell
gang='
import os, socket, sys, time
rank, port = int(os.environ["RANK"]), int(os.environ["MASTER_PORT"])
addr, gated = os.environ["MASTER_ADDR"], sys.argv[1] == "gated"
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(4)
    srv.settimeout(150)
    total = 0
    while True:
        c, peer = srv.accept()
        word, n = c.makefile().readline().split()
        total += int(n)
        c.sendall(b"total %d\n" % total)
        # Part 1 closes once it read the answer: wait for that (bounded)
        # before going on, and so before this part ends. Its device and
        # network go the moment it exits (the agent stops them), with an
        # answer still in flight: part 1 then waits for nothing (seen
        # through the relay under load: "the second gang is running 1").
        c.settimeout(30)
        try:
            c.recv(1)
        except OSError:
            pass
        c.close()
        print("rank0 %s %s from %s" % (word, n, peer[0]), flush=True)
        if word == "end":
            break
    print("rank0 result=%d" % total, flush=True)
    sys.exit(0)
def send(word, n):
    end = time.monotonic() + 120
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=3)
            s.sendall(b"%s %d\n" % (word.encode(), n))
            r = s.makefile().readline().strip()
            s.close()
            if r:
                return r
        except OSError:
            pass
        if time.monotonic() > end:
            sys.exit("rank1: no answer from %s:%d" % (addr, port))
        time.sleep(0.2)
if not gated:
    print("rank1 once: " + send("end", 7), flush=True)
    sys.exit(0)
print("rank1 before: " + send("add", 20), flush=True)
end = time.monotonic() + 120
while not os.path.exists("go"):
    if time.monotonic() > end:
        sys.exit("rank1: no go")
    time.sleep(0.1)
print("rank1 after: " + send("end", 22), flush=True)
'

# part_log JOB PART: its log so far (LOG).
part_log() { cli logs --part "$2" "$1"; LOG=$CLI_OUT; }
# wait_part_log JOB PART TEXT
wait_part_log() {
	local deadline=$((SECONDS + 60)) s
	while :; do
		part_log "$1" "$2"
		case $LOG in *"$3"*) return 0 ;; esac
		s=$(job_state "$1")
		case $s in
		succeeded | failed | cancelled | timeout)
			fail "job $1 ended $s before '$3': part $2: $LOG" ;;
		esac
		[ $SECONDS -ge $deadline ] && fail "job $1 part $2: no '$3': $LOG"
		sleep 0.3
	done
}
# overlay_of JOB: "PART NODE KEY ENDPOINT" per running part, from show
# --json (the coordinator's answer); fails unless every part has one.
overlay_of() {
	cli show --json "$1"
	OVERLAY=$(printf '%s' "$CLI_OUT" | json '"\n".join("%d %s %s %s" % (p["part"], p["node"], p["overlay"]["key"], p["overlay"]["endpoint"]) for p in d["parts"] if p.get("overlay")) or "none"')
	[ "$(printf '%s\n' "$OVERLAY" | grep -c .)" = 2 ] && [ "$OVERLAY" != none ] ||
	    fail "job $1: not an overlay of two parts in show --json: $OVERLAY ($CLI_OUT)"
}
# dev_of NAME JOB: the overlay device agent NAME made for its part of JOB
# and the port it listens on (DEV, DEV_PORT), from its log.
dev_of() {
	local line
	line=$(grep "gang part job=$2 part=[0-9]*: .* through the overlay dev=" "$T/agent-$1.log" | tail -n1)
	DEV=$(printf '%s' "$line" | sed -n 's/.* dev=\(gpw[0-9a-f]*\) .*/\1/p')
	DEV_PORT=$(printf '%s' "$line" | sed -n 's/.* port=\([0-9]*\) .*/\1/p')
	[ -n "$DEV" ] && [ -n "$DEV_PORT" ] ||
	    fail "agent $1 linked no part of job $2 through the overlay: $(grep -i overlay "$T/agent-$1.log")"
}
# stored_history JOB: the job's history column as the store holds it.
stored_history() {
	if [ "${GP_TEST_DB:-sqlite}" = postgresql ]; then
		pg_psql "SELECT history FROM gp_jobs WHERE id = $1"
	else
		"$PY" -c 'import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(db.execute("SELECT history FROM jobs WHERE id = ?", (int(sys.argv[2]),)).fetchone()[0])' \
		    "$COORD_DATA/state.db" "$1"
	fi
}

submit --nodes 2 --gpus-per-node 1 --time 5m -- "$PY" -c "$gang" gated
g1=$JOB
wait_part_log "$g1" 1 "rank1 before: total 20"
overlay_of "$g1"
before=$OVERLAY
log "the overlay before the restart: $(printf '%s' "$before" | tr '\n' ';')"
# Behind NATs that change ports: through the relay (else the wrapper
# test_gang_overlay_relay_restart would not test it).
if [ "${GPOV_NAT:-}" = symmetric ]; then
	for m in a b; do
		grep -q "through the relay job=$g1 " "$T/agent-$m.log" ||
		    fail "agent $m did not go through the relay: $(grep -i 'relay\|handshake' "$T/agent-$m.log")"
	done
fi
# What the agents' devices hold is what the coordinator answers.
privs=''
declare -A g1_port=()
for m in a b; do
	dev_of "$m" "$g1"
	ns=$(ns_of "$m")
	pub=$(nsenter --net="/run/netns/$ns" wg show "$DEV" public-key)
	port=$(nsenter --net="/run/netns/$ns" wg show "$DEV" listen-port)
	assert_eq "$DEV_PORT" "$port" "machine $m's device's port"
	# (its NAT's address; a here-string: with pipefail, grep -q ending
	# before printf would fail the pipe)
	wan=198.51.100.2
	[ $m = b ] && wan=203.0.113.2
	grep -qF " $m $pub $wan:$port" <<<"$before" ||
	    fail "machine $m's device ($pub, port $port) is not in the coordinator's overlay: $before"
	privs="$privs $(nsenter --net="/run/netns/$ns" wg show "$DEV" private-key)"
	g1_port[$m]=$port
done
stored_history "$g1" >"$T/history-running"

# kill -9 and start again, on the same store.
kill9_coordinator
if [ -n "$failover" ]; then
	deadline=$((SECONDS + WAIT_S))
	until grep -q "leading epoch=" "$T/coord2.log"; do
		alive "$standby_pid" || fail "the standby exited: $(tail -n 3 "$T/coord2.log")"
		[ $SECONDS -ge $deadline ] && fail "the standby did not take over"
		sleep 0.1
	done
	log "the standby leads: $(grep -m1 "leading epoch=" "$T/coord2.log")"
	COORD_PORT=$port2 COORD_PID=$standby_pid COORD_LOG=$T/coord2.log
	export GPUPOOL_URL
	GPUPOOL_URL=$(coord_url)
else
	start_coordinator
fi
wait_node_up a
wait_node_up b
overlay_of "$g1"
assert_eq "$before" "$OVERLAY" "the gang's overlay after the restart"
grep -q "gang overlay kept job=$g1 " "$COORD_LOG" ||
    fail "the coordinator did not log the gang's overlay it kept"
assert_eq running "$(job_state "$g1")" "the gang after the restart"

# A second gang while the first holds its ports: other ports, one attempt.
submit --nodes 2 --gpus-per-node 1 --time 2m -- "$PY" -c "$gang" once
g2=$JOB
deadline=$((SECONDS + 60))
while :; do
	s=$(job_get "$g2" 'str(d["state"]) + " " + str(d["attempts"])')
	case $s in
	"succeeded 1") break ;;
	*" "[2-9]* | failed* | cancelled* | timeout*)
		fail "the second gang did not run at once through the overlay ($s): $(grep "job=$g2 " "$T"/agent-*.log | tail -n 6)" ;;
	esac
	if [ $SECONDS -ge $deadline ]; then
		part_log "$g2" 1
		fail "the second gang is $s after 60 s: part 1: $LOG"
	fi
	sleep 0.3
done
part_log "$g2" 0
assert_contains "$LOG" "rank0 result=7" "the second gang's part 0"
for m in a b; do
	dev_of "$m" "$g2"
	[ "$DEV_PORT" != "${g1_port[$m]}" ] ||
	    fail "machine $m: the second gang got the running gang's port ${g1_port[$m]}"
done

# The first gang goes on through its tunnels and ends with its result.
for m in a b; do release_job "$m" "$g1"; done
wait_final "$g1" 60
assert_eq succeeded "$FINAL_STATE" "the first gang"
part_log "$g1" 0
assert_contains "$LOG" "rank0 result=42" "the first gang's part 0"
part_log "$g1" 1
assert_contains "$LOG" "rank1 after: total 42" "the first gang's part 1"

# The store kept the running gang's public keys, and no private key
# anywhere here; the ended gang's overlay left the store.
for k in $(printf '%s\n' "$before" | awk '{print $3}'); do
	grep -qF "$k" "$T/history-running" ||
	    fail "the store did not keep the running gang's key $k: $(cat "$T/history-running")"
done
stored_history "$g1" >"$T/history-ended"
for k in $(printf '%s\n' "$before" | awk '{print $3}'); do
	assert_not_contains "$(cat "$T/history-ended")" "$k" "the ended gang's row"
done
for p in $privs; do
	assert_not_contains "$(cat "$T/history-running")" "$p" "the running gang's row"
	assert_not_contains "$(cat "$COORD_LOG")" "$p" "the coordinator's log"
	if [ "${GP_TEST_DB:-sqlite}" = sqlite ]; then
		assert_not_contains "$(cat "$COORD_DATA"/* 2>/dev/null | tr -d '\0')" "$p" "the coordinator's store"
	fi
	cli show --json "$g1"
	assert_not_contains "$CLI_OUT" "$p" "show --json"
done
echo ok
