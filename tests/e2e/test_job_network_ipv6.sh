#!/usr/bin/env bash
# Issue 14: IPv6 for jobs (a root agent's veth pairs, netns6.c). The pool
# runs in a test namespace "provider" whose only way out is a veth pair
# into "world" (netns_lib.sh), with IPv4 as in test_job_network and IPv6:
# the provider host is 2001:db8:77::2, its default route 2001:db8:77::1;
# the world serves a "public" server on 2001:db8:1::1 (a documentation
# address) and a "LAN" server on the ULA fd00:77::1, and the IPv4 LAN
# server on 192.168.77.1. The provider host serves on every address of
# its own (2001:db8:77::2 and ::1).
#
# One agent, policy lan; probe jobs ask for lan, internet and none:
#   lan:      the public and the ULA server;
#   internet: the public server only (not the ULA one, not the IPv4 LAN
#             server through a v4-mapped address);
#   none:     nothing.
# Never the host itself, nor the job's ::1 reaching the host's.
set -u
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${GPNET_INSIDE:-}" ]; then
	. "$here/netns_lib.sh"
	netns_pair_need test_job_network_ipv6
	netns_pair_make "gpnet6-$$"
	ip -n "$NETNS_PROV" addr add 2001:db8:77::2/64 dev up0 nodad &&
	    ip -n "$NETNS_WORLD" addr add 2001:db8:77::1/64 dev down0 nodad &&
	    ip -n "$NETNS_WORLD" addr add 2001:db8:1::1/128 dev lo &&
	    ip -n "$NETNS_WORLD" addr add fd00:77::1/128 dev lo &&
	    ip -n "$NETNS_PROV" -6 route add default via 2001:db8:77::1 ||
	    { echo "FAIL: cannot give the test namespaces IPv6"; exit 1; }
	netns_pair_world_serve public6@2001:db8:1::1 lan6@fd00:77::1 \
	    lan4@192.168.77.1
	netns_pair_in_provider bash "$here/$(basename "$0")"
	exit $?
fi

. "$here/lib.sh"
. "$here/netns_lib.sh"

# The provider host's own services: on every address, IPv6 and IPv4.
host_port=$(free_port)
netns_pair_host_serve "host@::@$host_port"

printf 'network = lan\nimages = any\n' >"$T/lan.policy"
start_coordinator
start_agent lan 2:T4:16384 --policy "$T/lan.policy"
wait_node_up lan
grep -q "job networks ready policy=lan .* ipv6=yes" "$T/agent-lan.log" ||
    fail "no IPv6 for jobs: $(grep 'job networks' "$T/agent-lan.log")"
assert_contains "$(cat /proc/sys/net/ipv6/conf/all/forwarding)" 1 \
    "IPv6 forwarding (in the provider namespace)"

probe='
import socket, sys
hp = sys.argv[1]
def tcp(h, p, fam=socket.AF_INET6):
    try:
        s = socket.socket(fam)
        s.settimeout(2)
        s.connect((h, int(p)))
        return s.recv(64).decode().strip() or "empty"
    except Exception as e:
        return type(e).__name__
for k, v in (("public6", tcp("2001:db8:1::1", 8080)),
             ("lan6", tcp("fd00:77::1", 8080)),
             ("mapped", tcp("::ffff:192.168.77.1", 8080)),
             ("hostaddr6", tcp("2001:db8:77::2", hp)),
             ("hostlo6", tcp("::1", hp))):
    print("%s=%s" % (k, v), flush=True)
'
run_probe() { # [submit flags] -> LOG
	submit --gpus 1 --time 2m "$@" -- "$PY" -c "$probe" "$host_port"
	wait_final "$JOB" 90
	[ "$FINAL_STATE" = succeeded ] ||
	    fail "probe $* ended $FINAL_STATE: $(job_get "$JOB" d)"
	job_log "$JOB"
	log "probe $*: $(printf '%s' "$LOG" | tr '\n' ' ')"
}
run_probe
assert_contains "$LOG" "public6=public6" "lan job: the public IPv6 server"
assert_contains "$LOG" "lan6=lan6" "lan job: the ULA server"
assert_contains "$LOG" "mapped=lan4" "lan job: the IPv4 LAN through v4-mapped"
assert_not_contains "$LOG" "hostaddr6=host" "lan job: the host's own address"
assert_not_contains "$LOG" "hostlo6=host" "lan job: the host's ::1"

run_probe --network internet
assert_contains "$LOG" "public6=public6" "internet job: the public IPv6 server"
assert_not_contains "$LOG" "lan6=lan6" "internet job: the ULA server"
assert_not_contains "$LOG" "mapped=lan4" "internet job: v4-mapped LAN"
assert_not_contains "$LOG" "hostaddr6=host" "internet job: the host's own address"
assert_not_contains "$LOG" "hostlo6=host" "internet job: the host's ::1"

run_probe --network none
assert_not_contains "$LOG" "public6=public6" "none job: the public IPv6 server"
assert_not_contains "$LOG" "lan6=lan6" "none job: the ULA server"
assert_not_contains "$LOG" "hostaddr6=host" "none job: the host's own address"

# The agent's table after it stops: gone (IPv6 rules with it).
table=$(sed -n 's/.*job networks ready.* table=\(gpupool_[0-9a-f]*\).*/\1/p' \
    "$T/agent-lan.log" | head -1)
[ -n "$table" ] || fail "no table name in the agent's log"
assert_contains "$(nft list table inet "$table")" "chain from_job6" \
    "the agent's table: its IPv6 chain"
kill -TERM "${AGENT_PID[lan]}"
wait_exit "${AGENT_PID[lan]}" || fail "agent did not stop"
assert_not_contains "$(nft list tables)" "$table" "the stopped agent's table"
echo ok
