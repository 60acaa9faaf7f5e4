#!/usr/bin/env bash
# Issue 14: the job networks of an agent that is not root (pasta, with
# nftables inside each job's namespace). As in test_job_network, the pool
# runs in a test namespace "provider" (netns_lib.sh) whose only way out is
# a veth pair into "world" (the LAN 192.168.77.1, the internet
# 198.51.100.1); the provider host also owns 172.31.5.1 (private) and
# 203.0.113.7 (a documentation address standing for a public one) on its
# lo.
#
# /dev/net/tun is 0600 on this machine: the test never changes it; it runs
# in a private mount namespace where a 0666 node of its own (on a tmpfs)
# is bound over /dev/net/tun, and the agent runs as nobody in there.
#
# One agent, policy lan; jobs ask for lan, internet and none:
#   lan:      public and LAN servers, never the host (any address of it);
#   internet: the public server only;
#   none:     nothing.
# Never: the host's loopback (also not through the gateway's address:
# --no-map-gw), the host's other addresses, another job's loopback.
# Then: bytes in show --json, net-rate on what a job sends, and pasta
# gone with the agent after kill -9.
set -u
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${GPNET_INSIDE:-}" ]; then
	. "$here/netns_lib.sh"
	netns_pair_need test_job_network_pasta unshare setpriv mknod
	if [ ! -x /usr/bin/pasta ]; then
		echo "SKIP test_job_network_pasta: needs pasta: /usr/bin/pasta is not installed (Debian's passt)"
		exit 77
	fi
	netns_pair_make "gpnetp-$$"
	ip -n "$NETNS_PROV" addr add 172.31.5.1/32 dev lo &&
	    ip -n "$NETNS_PROV" addr add 203.0.113.7/32 dev lo ||
	    { echo "FAIL: cannot give the provider its own addresses"; exit 1; }
	netns_pair_world_serve public@198.51.100.1 lan@192.168.77.1 \
	    sink@198.51.100.1
	# The private mount namespace: a tun node of the test's own.
	netns_pair_in_provider unshare -m --propagation private bash -c '
d=$(mktemp -d /tmp/gpnetp-tun.XXXXXX) || exit 90
mount -t tmpfs -o mode=0755,size=64k gpnetp-tun "$d" || exit 90
mknod -m 0666 "$d/tun" c 10 200 || exit 90
mount --bind "$d/tun" /dev/net/tun || exit 90
# The provider'"'"'s resolver on its loopback (the test'"'"'s, below).
printf "nameserver 127.0.0.1\noptions timeout:2 attempts:2\n" >"$d/resolv.conf"
mount --bind "$d/resolv.conf" /etc/resolv.conf || exit 90
bash "$1"
' gpnetp "$here/$(basename "$0")"
	rc=$?
	if [ $rc = 90 ]; then
		echo "SKIP test_job_network_pasta: needs netns: cannot bind a 0666 tun node over /dev/net/tun in a private mount namespace"
		exit 77
	fi
	exit $rc
fi

. "$here/lib.sh"
. "$here/netns_lib.sh"

# The provider host's own services: loopback, every address, abstract.
host_port=$(free_port)
hostaddr_port=$(free_port)
netns_pair_host_serve "hostlo@127.0.0.1@$host_port" \
    "hostaddr@0.0.0.0@$hostaddr_port"

# The provider's resolver, on its loopback only (pasta forwards jobs'
# queries to it from the host).
spawn "$T/resolver.log" "$PY" "$here/dns_resolver.py" \
    svc.gpupool.test=198.51.100.7
deadline=$((SECONDS + WAIT_S))
until grep -q serving "$T/resolver.log"; do
	[ $SECONDS -ge $deadline ] && fail "the test's resolver did not start: $(cat "$T/resolver.log")"
	sleep 0.1
done

start_coordinator

# The agent, as nobody (its token and work directory its own).
chmod 0711 "$T"
mk_token provider prov-pasta
mkdir -p "$T/nobody"
(umask 077 && printf '%s\n' "$TOKEN" >"$T/nobody/pasta.token")
printf 'network = lan\nnet-rate = 40M\nimages = any\n' >"$T/nobody/lan.policy"
mkdir -p "$T/nobody/work"
chown -R nobody:nogroup "$T/nobody"
chmod 0700 "$T/nobody"
start_pasta_agent() {
	spawn "$T/agent-pasta.log" setpriv --reuid=nobody --regid=nogroup \
	    --clear-groups -- "$GP" agent --coordinator "$(coord_url)" \
	    --token-file "$T/nobody/pasta.token" --name pasta \
	    --work "$T/nobody/work" --fake-gpus 2:T4:16384 \
	    --policy "$T/nobody/lan.policy" -v
	AGENT_PID["pasta"]=$SPAWNED_PID
}
start_pasta_agent
wait_node_up pasta
if grep -q "pasta cannot work here" "$T/agent-pasta.log"; then
	why=$(grep -o "pasta cannot work here.*" "$T/agent-pasta.log" | head -1)
	echo "SKIP test_job_network_pasta: needs pasta: $why"
	exit 77
fi
grep -q "job networks ready policy=lan stack=pasta" "$T/agent-pasta.log" ||
    fail "the agent did not set pasta up: $(grep 'job networks' "$T/agent-pasta.log")"
GPUPOOL_AGENT_SOCKET="$T/nobody/work/agent.sock" cli provider status
log "provider status: $(printf '%s' "$CLI_OUT" | grep network)"

# A job serving on its own loopback.
peer_port=$(free_port)
# shellcheck disable=SC2016 # python, not shell
submit --gpus 1 --time 2m -- "$PY" -c '
import socket, sys
a = socket.socket(); a.bind(("127.0.0.1", int(sys.argv[1]))); a.listen(64)
print("peer serving", flush=True)
a.settimeout(110)
while True:
    c, _ = a.accept()
    c.sendall(b"peerlo\n")
    c.close()
' "$peer_port"
peer=$JOB
wait_state "$peer" running
deadline=$((SECONDS + WAIT_S))
while :; do
	job_log "$peer"
	case $LOG in *"peer serving"*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "peer job not serving: $LOG"
	sleep 0.2
done
# Its pasta: a child of the agent (gone with it, below).
pastas=$(pgrep -P "${AGENT_PID[pasta]}" -x passt.avx2; pgrep -P "${AGENT_PID[pasta]}" -x passt; pgrep -P "${AGENT_PID[pasta]}" -x pasta)
[ -n "$pastas" ] || fail "no pasta under the agent while a job runs: $(ps -o pid,comm --ppid "${AGENT_PID[pasta]}")"

probe='
import socket, sys
hp, hap, pp = sys.argv[1:4]
def tcp(h, p):
    try:
        s = socket.create_connection((h, int(p)), timeout=2)
        return s.recv(64).decode().strip() or "empty"
    except Exception as e:
        return type(e).__name__
for k, v in (("public", tcp("198.51.100.1", 8080)),
             ("lan", tcp("192.168.77.1", 8080)),
             ("hostlo", tcp("127.0.0.1", hp)),
             ("gwhostlo", tcp("192.168.77.1", hp)),
             ("hostpriv", tcp("172.31.5.1", hap)),
             ("hostpub", tcp("203.0.113.7", hap)),
             ("peerlo", tcp("127.0.0.1", pp)),
             ("metadata", tcp("169.254.169.254", 80))):
    print("%s=%s" % (k, v), flush=True)
'
run_probe() { # [submit flags] -> LOG
	submit --gpus 1 --time 2m "$@" -- "$PY" -c "$probe" \
	    "$host_port" "$hostaddr_port" "$peer_port"
	wait_final "$JOB" 90
	[ "$FINAL_STATE" = succeeded ] ||
	    fail "probe $* ended $FINAL_STATE: $(job_get "$JOB" d)"
	job_log "$JOB"
	log "probe $*: $(printf '%s' "$LOG" | tr '\n' ' ')"
}
never_reached() { # WHAT
	local k
	for k in hostlo gwhostlo=hostlo hostpriv=hostaddr hostpub=hostaddr \
	    peerlo=peerlo; do
		case $k in *=*) ;; *) k=$k=$k ;; esac
		assert_not_contains "$LOG" "$k" "$1: ${k%%=*}"
	done
	assert_not_contains "$LOG" "metadata=empty" "$1: metadata"
}

run_probe
assert_contains "$LOG" "public=public" "lan job: the public server"
assert_contains "$LOG" "lan=lan" "lan job: the LAN server"
never_reached "lan job"
# Its bytes (pasta's tap, in the job's namespace).
cli show "$JOB" --json
[ "$CLI_RC" = 0 ] || fail "show --json: $CLI_ERR"
read -r sent received <<<"$(printf '%s' "$CLI_OUT" |
    json '"%s %s" % (d["net_sent_bytes"], d["net_received_bytes"])')"
[ "${sent:-0}" -gt 0 ] && [ "${received:-0}" -gt 0 ] ||
    fail "lan probe's bytes: sent ${sent:-?} received ${received:-?}"
log "lan probe: net_sent=$sent net_received=$received"

# DNS: through pasta's forwarder to the provider's loopback resolver.
submit --gpus 1 --time 2m --network internet -- sh -c \
    'cat /etc/resolv.conf; getent ahostsv4 svc.gpupool.test | head -n 1; echo probed'
wait_final "$JOB" 90
job_log "$JOB"
log "dns probe: $(printf '%s' "$LOG" | tr '\n' ' ')"
assert_contains "$LOG" "nameserver 169.254.53.53" "the job's resolv.conf"
assert_contains "$LOG" "198.51.100.7" "a job resolves through pasta"

run_probe --network internet
assert_contains "$LOG" "public=public" "internet job: the public server"
assert_not_contains "$LOG" "lan=lan" "internet job: the LAN server"
never_reached "internet job"

run_probe --network none
assert_not_contains "$LOG" "public=public" "none job: the public server"
assert_not_contains "$LOG" "lan=lan" "none job: the LAN server"
never_reached "none job"

# net-rate = 40M caps what a job sends: 10 MiB take at least 2.1 s (a
# cap can only be slowed by load: no upper bound here).
submit --gpus 1 --time 2m -- "$PY" -c '
import socket, time
t = time.monotonic()
s = socket.create_connection(("198.51.100.1", 8082), timeout=30)
s.sendall(b"y" * (10 << 20))
got = s.makefile().readline().strip()
up = time.monotonic() - t
print("up_bytes=%s up_s=%.3f up_mbit=%.1f" % (got, up, (10 << 20) * 8 / up / 1e6), flush=True)
'
wait_final "$JOB" 90
job_log "$JOB"
[ "$FINAL_STATE" = succeeded ] || fail "upload job ended $FINAL_STATE: $LOG"

log "upload: $LOG"
assert_contains "$LOG" "up_bytes=10485760 " "upload job: the whole upload"
secs=$(printf '%s' "$LOG" | sed -n 's/.*up_s=\([0-9.]*\).*/\1/p')
awk -v s="$secs" 'BEGIN { exit !(s >= 1.9) }' ||
    fail "upload job: 10 MiB in ${secs}s, faster than 40 Mbit/s"

# kill -9 of the agent: its pasta goes with it (PR_SET_PDEATHSIG).
kill9_agent pasta
deadline=$((SECONDS + WAIT_S))
for p in $pastas; do
	while [ -e "/proc/$p" ] && grep -q '^State:.*[RSDTtI]' "/proc/$p/status" 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && fail "pasta $p outlived its agent (kill -9)"
		sleep 0.1
	done
done

# Where pasta cannot work (the machine's own /dev/net/tun, 0600 here,
# seen again in a mount namespace of its own without the test's node),
# the agent offers none and says why, never more than it can enforce.
# shellcheck disable=SC2016 # expanded by the inner shell
host_tun() { unshare -m --propagation private sh -c 'umount /dev/net/tun && exec "$@"' sh "$@"; }
if [ "$(host_tun stat -c %a /dev/net/tun)" = 600 ]; then
	mk_token provider prov-notun
	(umask 077 && printf '%s\n' "$TOKEN" >"$T/nobody/notun.token")
	mkdir -p "$T/nobody/notun"
	chown -R nobody:nogroup "$T/nobody"
	# shellcheck disable=SC2016 # expanded by the inner shell
	spawn "$T/agent-notun.log" unshare -m --propagation private \
	    sh -c 'umount /dev/net/tun && exec "$@"' sh \
	    setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
	    "$GP" agent --coordinator "$(coord_url)" \
	    --token-file "$T/nobody/notun.token" --name notun \
	    --work "$T/nobody/notun" --fake-gpus 1:T4:16384 \
	    --policy "$T/nobody/lan.policy" -v
	AGENT_PID["notun"]=$SPAWNED_PID
	wait_node_up notun
	assert_contains "$(cat "$T/agent-notun.log")" \
	    "pasta cannot work here (pasta needs /dev/net/tun" \
	    "the agent without a usable /dev/net/tun: why"
	GPUPOOL_AGENT_SOCKET="$T/nobody/notun/agent.sock" cli provider status
	assert_contains "$CLI_OUT" "network:  jobs get none" \
	    "provider status without a usable /dev/net/tun"
else
	log "SKIP part: /dev/net/tun is open to users here (no refusal to see)"
fi
echo ok
