#!/usr/bin/env bash
# Issue 14: every job in a network of its own. The whole pool (coordinator,
# three agents, the CLI) runs inside a test namespace "provider" (made by
# netns_lib.sh, as for test_job_network_ipv6 and _pasta) whose only
# way out is a veth pair into a second test namespace "world", which plays
# the LAN (192.168.77.1, a private address) and the internet (198.51.100.1,
# a documentation address); nothing of this test can reach the machine's
# own network whatever a job's rules do. The provider host serves on its
# 127.0.0.1, on its LAN address and on an abstract Unix socket; one job
# serves on its own 127.0.0.1 and an abstract socket. Then a probe job on
# each agent (network internet, lan, none) tries every one of them:
#   internet: only the public server;
#   lan:      the public and the LAN server, never the host itself;
#   none:     nothing.
# A job never reaches the host's loopback, its abstract sockets or another
# job's. The agent's nftables table is gone after it stops, and a table
# left by an agent killed with SIGKILL is swept by the next one.
set -u
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${GPNET_INSIDE:-}" ]; then
	. "$here/netns_lib.sh"
	netns_pair_need test_job_network
	netns_pair_make "gpnet-$$"
	# The world's servers: public and LAN (each answers its name), 10 MiB
	# down and up for net-rate.
	netns_pair_world_serve public@198.51.100.1 lan@192.168.77.1 \
	    source@198.51.100.1 sink@198.51.100.1
	netns_pair_in_provider bash "$here/$(basename "$0")"
	exit $?
fi

. "$here/lib.sh"
. "$here/netns_lib.sh"
. "$here/image_lib.sh"

# The provider host's own services: loopback, its LAN address, abstract.
host_port=$(free_port)
hostaddr_port=$(free_port)
host_abs="gpnet-host-$$"
netns_pair_host_serve "hostlo@127.0.0.1@$host_port" \
    "hostaddr@0.0.0.0@$hostaddr_port" "hostabs@abstract:$host_abs"

printf 'images = any\n' >"$T/inet.policy"
printf 'network = lan\nimages = any\n' >"$T/lan.policy"
printf 'network = none\nimages = any\n' >"$T/none.policy"
# A bad value: a line-numbered error from `provider policy check`, and an
# agent that will not start on it.
printf 'images = any\nnetwork = wan\n' >"$T/bad.policy"
cli provider policy check "$T/bad.policy"
[ "$CLI_RC" != 0 ] || fail "policy check accepted network = wan"
assert_contains "$CLI_ERR$CLI_OUT" "bad.policy:2: network: 'wan' is not none, internet or lan" \
    "policy check of network = wan"
printf 'net-rate = fast\n' >"$T/bad2.policy"
cli provider policy check "$T/bad2.policy"
[ "$CLI_RC" != 0 ] || fail "policy check accepted net-rate = fast"
assert_contains "$CLI_ERR$CLI_OUT" "bad2.policy:1: net-rate: 'fast' is not a rate" \
    "policy check of net-rate = fast"

start_coordinator
start_agent bad 1:T4:16384 --policy "$T/bad.policy"
wait_exit "${AGENT_PID[bad]}" || fail "an agent started on network = wan"
assert_contains "$(cat "$T/agent-bad.log")" "bad.policy:2: line 2: network: 'wan' is not none, internet or lan" \
    "the agent's refusal of network = wan"
mport=$(free_port)
start_agent inet 2:T4:16384 --policy "$T/inet.policy" \
    --metrics-listen "127.0.0.1:$mport"
start_agent lan 1:L4:16384 --policy "$T/lan.policy"
start_agent none 1:A10:16384 --policy "$T/none.policy"
printf 'net-rate = 40M\n' >"$T/rate.policy"
start_agent rate 1:P100:16384 --policy "$T/rate.policy"
wait_node_up rate
wait_node_up inet
wait_node_up lan
wait_node_up none
for a in inet lan none; do
	grep -q "job networks" "$T/agent-$a.log" ||
	    [ "$a" = none ] || fail "agent $a: no job networks in its log"
done
for a in inet lan none; do
	GPUPOOL_AGENT_SOCKET="$T/agents/$a/agent.sock" cli provider status
	[ "$CLI_RC" = 0 ] || fail "provider status of $a: $CLI_ERR"
	case $a in
	inet) want=internet ;;
	*) want=$a ;;
	esac
	assert_contains "$CLI_OUT" "network:  jobs get $want" \
	    "provider status of $a"
	assert_contains "$CLI_OUT" "  network:          $want" \
	    "provider status of $a: the policy"
done
tables=$(nft list tables)
assert_contains "$tables" "table inet gpupool_" "the agents' nftables tables"

# A job asking for more network than some nodes allow is placed only
# where it is allowed (the scheduler's acceptance, not only submit's),
# never capped on another node: with the lan node's GPU held, a
# --network lan job waits (saying why) while a later --network internet
# job runs elsewhere, never on the none node; once the GPU is free, the
# lan job runs on the lan node.
submit --gpus 1 --gpu-model L4 -- sh -c "$(gated_job_cmd)"
hold=$JOB
wait_state "$hold" running
submit --gpus 1 --network lan -- true
wantlan=$JOB
submit --gpus 1 --network internet -- true
wait_final "$JOB"
assert_eq succeeded "$FINAL_STATE" "the --network internet job"
assert_not_contains "$(job_get "$JOB" 'd["node"]')" none \
    "the --network internet job's node"
assert_eq queued "$(job_get "$wantlan" 'd["state"]')" \
    "the --network lan job while the lan node is busy"
assert_contains "$(job_get "$wantlan" '(d.get("wait") or {}).get("why", "")')" \
    "0 GPUs free on a node that could hold it" \
    "why the --network lan job waits"
release_job lan "$hold"
wait_final "$wantlan"
assert_eq succeeded "$FINAL_STATE" "the --network lan job"
assert_eq lan "$(job_get "$wantlan" 'd["node"]')" "the --network lan job's node"

# A job serving on its own loopback and an abstract socket.
peer_port=$(free_port)
peer_abs="gpnet-peer-$$"
# shellcheck disable=SC2016 # python, not shell
submit --gpus 1 --gpu-model T4 --time 2m -- "$PY" -c '
import socket, sys, threading
def serve(s, word):
    s.listen(64)
    while True:
        c, _ = s.accept()
        c.sendall(word + b"\n")
        c.close()
a = socket.socket(); a.bind(("127.0.0.1", int(sys.argv[1])))
u = socket.socket(socket.AF_UNIX); u.bind("\0" + sys.argv[2])
for s, w in ((a, b"peerlo"), (u, b"peerabs")):
    threading.Thread(target=serve, args=(s, w), daemon=True).start()
print("peer serving", flush=True)
threading.Event().wait(110)
' "$peer_port" "$peer_abs"
peer=$JOB
wait_state "$peer" running
deadline=$((SECONDS + WAIT_S))
while :; do
	job_log "$peer"
	case $LOG in *"peer serving"*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "peer job not serving: $LOG"
	sleep 0.2
done

# What a probe job reaches: one "name=answer" line per target.
probe='
import socket, sys
hp, hap, habs, pp, pabs = sys.argv[1:6]
def tcp(h, p):
    try:
        s = socket.create_connection((h, int(p)), timeout=2)
        return s.recv(64).decode().strip() or "empty"
    except Exception as e:
        return type(e).__name__
def unix(name):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect("\0" + name)
        return s.recv(64).decode().strip() or "empty"
    except Exception as e:
        return type(e).__name__
for k, v in (("public", tcp("198.51.100.1", 8080)),
             ("lan", tcp("192.168.77.1", 8080)),
             ("hostlo", tcp("127.0.0.1", hp)),
             ("hostaddr", tcp("192.168.77.2", hap)),
             ("hostabs", unix(habs)),
             ("peerlo", tcp("127.0.0.1", pp)),
             ("peerabs", unix(pabs)),
             ("metadata", tcp("169.254.169.254", 80))):
    print("%s=%s" % (k, v), flush=True)
'
run_probe() { # MODEL [submit flags] -> LOG
	local model=$1
	shift
	submit --gpus 1 --gpu-model "$model" --time 2m "$@" -- "$PY" -c "$probe" \
	    "$host_port" "$hostaddr_port" "$host_abs" "$peer_port" "$peer_abs"
	wait_final "$JOB" 90
	[ "$FINAL_STATE" = succeeded ] ||
	    fail "probe on $model ended $FINAL_STATE: $(job_get "$JOB" d)"
	job_log "$JOB"
	log "probe on $model $*: $(printf '%s' "$LOG" | tr '\n' ' ')"
}
never_reached() { # WHAT
	local k
	for k in hostlo=hostlo hostaddr=hostaddr hostabs=hostabs \
	    peerlo=peerlo peerabs=peerabs; do
		assert_not_contains "$LOG" "$k" "$1: ${k%%=*}"
	done
	assert_not_contains "$LOG" "metadata=empty" "$1: metadata"
}

run_probe T4
# The agent's /metrics: the running peer job's network, with its labels.
metrics=$(curl -sS --max-time 20 "http://127.0.0.1:$mport/metrics")
assert_contains "$metrics" \
    "gpupool_agent_job_network_sent_bytes_total{node=\"inet\",job_id=\"$peer\",attempt=\"1\",user=\"admin\"}" \
    "the peer job's sent bytes in /metrics"
assert_contains "$metrics" \
    "gpupool_agent_job_network_received_bytes_total{node=\"inet\",job_id=\"$peer\"" \
    "the peer job's received bytes in /metrics"
assert_contains "$LOG" "public=public" "internet job: the public server"
assert_not_contains "$LOG" "lan=lan" "internet job: the LAN server"
never_reached "internet job"

run_probe L4
assert_contains "$LOG" "public=public" "lan job: the public server"
assert_contains "$LOG" "lan=lan" "lan job: the LAN server"
never_reached "lan job"

run_probe A10
assert_not_contains "$LOG" "public=public" "none job: the public server"
assert_not_contains "$LOG" "lan=lan" "none job: the LAN server"
never_reached "none job"

# A job may ask for less than its node allows (submit --network none on
# an internet node), and `show` says what it asked for.
run_probe T4 --network none
assert_not_contains "$LOG" "public=public" "--network none job on T4"
never_reached "--network none job"
cli show "$JOB"
assert_contains "$CLI_OUT" "network=none" "show: the job's network"
assert_not_contains "$LOG" "public=public" "none job: the public server"
assert_not_contains "$LOG" "lan=lan" "none job: the LAN server"
never_reached "none job"

# The same from a container job (busybox: nc; no abstract sockets).
if grep -q "container jobs disabled" "$T/agent-inet.log"; then
	# Lost coverage where the machine could run them (CI=true).
	if [ "${CI:-}" = true ] && requirement_present oci-runtime; then
		fail "this agent runs no container jobs, though the machine could"
	fi
	log "SKIP container part: this agent runs no container jobs"
else
	image_layer l --marker net-image
	image_oci box box:1 "$IMG/l.tgz"
	cli image import "$IMG/box.tar"
	assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"
	cprobe="for t in public:198.51.100.1:8080 lan:192.168.77.1:8080 \
hostlo:127.0.0.1:$host_port hostaddr:192.168.77.2:$hostaddr_port \
peerlo:127.0.0.1:$peer_port; do
	set -- \$(echo \$t | /bin/busybox tr : ' ')
	echo c_\$1=\$(/bin/busybox nc -w 2 \$2 \$3 </dev/null 2>&1)
done"
	for model in T4 L4 A10; do
		submit --gpus 1 --gpu-model "$model" --time 2m --image box:1 \
		    -- "$cprobe"
		wait_final "$JOB" 90
		[ "$FINAL_STATE" = succeeded ] ||
		    fail "container probe on $model ended $FINAL_STATE: $(job_get "$JOB" d)"
		job_log "$JOB"
		log "container probe on $model: $(printf '%s' "$LOG" | tr '\n' ' ')"
		case $model in
		T4 | L4) assert_contains "$LOG" "c_public=public" \
		    "container on $model: the public server" ;;
		A10) assert_not_contains "$LOG" "c_public=public" \
		    "container on $model (none): the public server" ;;
		esac
		case $model in
		L4) assert_contains "$LOG" "c_lan=lan" "container on L4: LAN" ;;
		*) assert_not_contains "$LOG" "c_lan=lan" \
		    "container on $model: the LAN server" ;;
		esac
		for k in hostlo hostaddr peerlo; do
			assert_not_contains "$LOG" "c_$k=$k" "container on $model: $k"
		done
	done
fi

# net-rate = 40M: 10 MiB each way take at least 2.1 s (a cap can only be
# slowed down by load, never sped up: no upper bound is checked here; the
# precision is measured in bench/RESULTS.md).
submit --gpus 1 --gpu-model P100 --time 2m -- "$PY" -c '
import socket, time
t = time.monotonic()
s = socket.create_connection(("198.51.100.1", 8081), timeout=30)
n = 0
while True:
    d = s.recv(1 << 16)
    if not d:
        break
    n += len(d)
down = time.monotonic() - t
t = time.monotonic()
s = socket.create_connection(("198.51.100.1", 8082), timeout=30)
s.sendall(b"y" * (10 << 20))
s.shutdown(socket.SHUT_WR)
got = s.recv(64).decode().strip()
up = time.monotonic() - t
print("down_bytes=%d down_s=%.3f down_mbit=%.1f" % (n, down, n * 8 / down / 1e6))
print("up_bytes=%s up_s=%.3f up_mbit=%.1f" % (got, up, (10 << 20) * 8 / up / 1e6), flush=True)
time.sleep(110)
'
rate=$JOB
# net_sent_bytes, net_received_bytes of `show --json` as "SENT RECEIVED"
net_bytes() { # JOB
	cli show "$1" --json
	[ "$CLI_RC" = 0 ] || fail "show --json $1: $CLI_ERR"
	printf '%s' "$CLI_OUT" |
	    json '"%s %s" % (d["net_sent_bytes"], d["net_received_bytes"])'
}
deadline=$((SECONDS + 90))
while :; do
	job_log "$rate"
	case $LOG in *up_bytes=*) break ;; esac
	[ "$(job_state "$rate")" = running ] ||
	    fail "rate job ended $(job_state "$rate"): $(job_get "$rate" d)"
	[ $SECONDS -ge $deadline ] && fail "rate job did not transfer: $LOG"
	sleep 0.2
done
# While it runs: what the agent's heartbeats carry (at least the 10 MiB
# each way), in `show --json` and the coordinator's /metrics.
deadline=$((SECONDS + WAIT_S))
while :; do
	read -r sent received <<<"$(net_bytes "$rate")"
	[ "${sent:-0}" -ge 10485760 ] && [ "${received:-0}" -ge 10485760 ] &&
	    break
	[ $SECONDS -ge $deadline ] &&
	    fail "running rate job's bytes in show --json: sent ${sent:-?} received ${received:-?}"
	sleep 0.2
done
log "running rate job in show --json: sent=$sent received=$received"
api "$ADMIN_TOKEN" GET /metrics
assert_contains "$API_BODY" \
    "gpupool_job_network_received_bytes_total{node=\"rate\",job_id=\"$rate\",attempt=\"1\",user=\"admin\"" \
    "the rate job's received bytes in the coordinator's /metrics"
assert_contains "$API_BODY" \
    "gpupool_job_network_sent_bytes_total{node=\"rate\",job_id=\"$rate\"" \
    "the rate job's sent bytes in the coordinator's /metrics"
cli cancel "$rate"
wait_final "$rate" 90
[ "$FINAL_STATE" = cancelled ] || fail "rate job ended $FINAL_STATE: $(job_get "$rate" d)"
JOB=$rate
log "rate job: $(printf '%s' "$LOG" | tr '\n' ' ')"
assert_contains "$LOG" "down_bytes=10485760 " "rate job: the whole download"
assert_contains "$LOG" "up_bytes=10485760 " "rate job: the whole upload"
# Its bytes, counted on its veth pair (at least the 10 MiB each way).
acct=$(sed -n "s/.*job finished job=$JOB attempt=1 .* net_sent=\([0-9]*\) net_received=\([0-9]*\).*/\1 \2/p" \
    "$T/agent-rate.log")
read -r sent received <<<"$acct"
[ "${sent:-0}" -ge 10485760 ] && [ "${received:-0}" -ge 10485760 ] ||
    fail "rate job's bytes: sent ${sent:-?} received ${received:-?}"
log "rate job: net_sent=$sent net_received=$received"
# The final totals (the finished report's), kept with the attempt: in
# `show --json`, its history and `show`.
read -r jsent jreceived <<<"$(net_bytes "$rate")"
[ "${jsent:-0}" -ge 10485760 ] && [ "${jreceived:-0}" -ge 10485760 ] ||
    fail "ended rate job's bytes in show --json: sent ${jsent:-?} received ${jreceived:-?}"
assert_eq "$sent $received" "$jsent $jreceived" \
    "show --json: the totals the agent logged"
cli show "$rate" --json
assert_eq "$received" \
    "$(printf '%s' "$CLI_OUT" | json 'd["history"][0]["net_received_bytes"]')" \
    "show --json: the attempt's received bytes"
cli show "$rate"
assert_contains "$CLI_OUT" "network: " "show: the job's network bytes"
for d in down up; do
	secs=$(printf '%s' "$LOG" | sed -n "s/.*${d}_s=\([0-9.]*\).*/\1/p")
	awk -v s="$secs" 'BEGIN { exit !(s >= 1.9) }' ||
	    fail "rate job: 10 MiB ${d} in ${secs}s, faster than 40 Mbit/s"
done

# A job that holds the coordinator's port on its own loopback while the
# coordinator restarts: it binds (its 127.0.0.1 is its own), the agents
# reconnect to the real coordinator, and nothing connects to the job.
submit --gpus 1 --gpu-model T4 --time 2m -- "$PY" -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
s.settimeout(1)
print("holding the port", flush=True)
end = time.monotonic() + 100
while time.monotonic() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    print("CONNECTION", c.recv(200), flush=True)
' "$COORD_PORT"
squat=$JOB
deadline=$((SECONDS + WAIT_S))
while :; do
	job_log "$squat"
	case $LOG in *"holding the port"*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "squatter not holding the port: $LOG"
	sleep 0.2
done
kill9_coordinator
# --min-job-age 1: the ended jobs (the rate job ended seconds ago) stay
# on disk; `show` reads them from state.db.
start_coordinator --min-job-age 1
assert_contains "$(grep 'state loaded' "$COORD_LOG" | tail -1)" \
    "in_memory=2 " "the restart left the ended jobs on disk"
# Every node starts down after a restart: up again means its agent,
# which retried while the coordinator was gone, reached the real one.
for a in inet lan none rate; do
	wait_node_up "$a"
done
# The ended rate job's bytes came back from the database.
assert_eq "$sent $received" "$(net_bytes "$rate")" \
    "show --json after a coordinator restart: the rate job's bytes"
job_log "$squat"
assert_not_contains "$LOG" "CONNECTION" "the job squatting the coordinator's port"
cli cancel "$squat"
wait_final "$squat"

cli cancel "$peer"
wait_final "$peer"

# A stopped agent removes its table; one killed leaves it for the next.
inet_table=$(sed -n 's/.*job networks ready.* table=\(gpupool_[0-9a-f]*\).*/\1/p' \
    "$T/agent-inet.log" | head -1)
[ -n "$inet_table" ] || fail "no table name in the inet agent's log"
kill9_agent inet
assert_contains "$(nft list tables)" "$inet_table" "table after kill -9"
start_agent inet 2:T4:16384
# (The node may still look up: its lease has not run out yet.)
deadline=$((SECONDS + WAIT_S))
until grep -q "job networks ready" "$T/agent-inet.log" &&
    [ "$(grep -c "job networks ready" "$T/agent-inet.log")" -ge 2 ]; do
	alive "${AGENT_PID[inet]}" || fail "the restarted inet agent exited"
	[ $SECONDS -ge $deadline ] && fail "the restarted inet agent is not ready"
	sleep 0.1
done
grep -q "swept a stale table table=$inet_table" "$T/agent-inet.log" ||
    fail "the restarted agent did not sweep $inet_table"
kill -TERM "${AGENT_PID[lan]}"
wait_exit "${AGENT_PID[lan]}" || fail "agent lan did not stop"
lan_table=$(sed -n 's/.*job networks ready.* table=\(gpupool_[0-9a-f]*\).*/\1/p' \
    "$T/agent-lan.log" | head -1)
[ -n "$lan_table" ] || fail "no table name in the lan agent's log"
assert_not_contains "$(nft list tables)" "$lan_table" \
    "the stopped lan agent's table"

# The lan node comes back allowing internet only: no node allows lan any
# more, and such a job is refused at submit, with each node's reason.
start_agent lan 1:L4:16384 --policy "$T/inet.policy"
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "job networks ready policy=internet" "$T/agent-lan.log")" -ge 1 ] &&
    grep -q "registered node=lan" <(sed -n '/job networks ready policy=internet/,$p' "$T/agent-lan.log"); do
	alive "${AGENT_PID[lan]}" || fail "the restarted lan agent exited"
	[ $SECONDS -ge $deadline ] && fail "the restarted lan agent did not register"
	sleep 0.1
done
cli submit --network lan --gpus 1 -- true
[ "$CLI_RC" != 0 ] || fail "submit --network lan with no lan node: accepted"
assert_contains "$CLI_ERR$CLI_OUT" "lets jobs reach only network internet (the job asks for lan)" \
    "submit --network lan: the inet node's reason"
assert_contains "$CLI_ERR$CLI_OUT" "lets jobs reach only network none" \
    "submit --network lan: the none node's reason"
echo ok
