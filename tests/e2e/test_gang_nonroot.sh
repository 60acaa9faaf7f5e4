#!/usr/bin/env bash
# Issue 14, "Gangs still work across providers", for agents that are not
# root (docs/agent.md, "Gangs"). Such an agent gives its jobs networks
# through pasta, which links no gang: a part there could never reach
# the others, and each would wait for them until its time limit. So the
# agent says so in its offer ("gangs": false) and the coordinator never
# places a gang of several nodes there.
#
# As in test_job_network_pasta, the pool runs in a test namespace
# "provider" (netns_lib.sh; its only way out a veth pair into "world"),
# in a private mount namespace whose /dev/net/tun is a 0666 node of the
# test's own, so that pasta works for an agent running as nobody.
#
#   two agents as nobody (pasta): a gang of two is refused at submit,
#     each node's reason given; a job of one node runs there;
#   and one root agent: still refused (no two nodes can take it);
#   and a second root agent: the gang runs on the two root agents, its
#     parts meet at MASTER_ADDR:MASTER_PORT;
#   the root agents gone: a gang submitted then stays queued, and
#     `show` says why the agents that are up do not take it.
set -u
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${GPNET_INSIDE:-}" ]; then
	. "$here/netns_lib.sh"
	netns_pair_need test_gang_nonroot unshare setpriv mknod
	if [ ! -x /usr/bin/pasta ]; then
		echo "SKIP test_gang_nonroot: needs pasta: /usr/bin/pasta is not installed (Debian's passt)"
		exit 77
	fi
	netns_pair_make "gpgnr-$$"
	# (made out here, so that it is removed: the tmpfs is the inner's)
	tun_dir=$(mktemp -d /tmp/gpgnr-tun.XXXXXX) ||
	    { echo "FAIL: mktemp"; exit 1; }
	netns_pair_in_provider unshare -m --propagation private bash -c '
d=$2
mount -t tmpfs -o mode=0755,size=64k gpgnr-tun "$d" || exit 90
mknod -m 0666 "$d/tun" c 10 200 || exit 90
mount --bind "$d/tun" /dev/net/tun || exit 90
bash "$1"
' gpgnr "$here/$(basename "$0")" "$tun_dir"
	rc=$?
	rmdir "$tun_dir"
	if [ $rc = 90 ]; then
		echo "SKIP test_gang_nonroot: needs netns: cannot bind a 0666 tun node over /dev/net/tun in a private mount namespace"
		exit 77
	fi
	exit $rc
fi

. "$here/lib.sh"

start_coordinator

# Two agents as nobody (their tokens and work directories their own).
chmod 0711 "$T"
mkdir -p "$T/nobody"
for n in nr1 nr2; do
	mk_token provider "prov-$n"
	(umask 077 && printf '%s\n' "$TOKEN" >"$T/nobody/$n.token")
	mkdir -p "$T/nobody/$n"
done
chown -R nobody:nogroup "$T/nobody"
chmod 0700 "$T/nobody"
for n in nr1 nr2; do
	spawn "$T/agent-$n.log" setpriv --reuid=nobody --regid=nogroup \
	    --clear-groups -- "$GP" agent --coordinator "$(coord_url)" \
	    --token-file "$T/nobody/$n.token" --name "$n" \
	    --work "$T/nobody/$n" --fake-gpus 1 --advertise-addr 192.168.77.2 -v
	AGENT_PID[$n]=$SPAWNED_PID
done
wait_node_up nr1
wait_node_up nr2
if grep -q "pasta cannot work here" "$T/agent-nr1.log"; then
	why=$(grep -o "pasta cannot work here.*" "$T/agent-nr1.log" | head -1)
	echo "SKIP test_gang_nonroot: needs pasta: $why"
	exit 77
fi
grep -q "job networks ready policy=internet stack=pasta" "$T/agent-nr1.log" ||
    fail "the agent did not set pasta up: $(grep 'job networks' "$T/agent-nr1.log")"

grep -q "no gang parts here: this agent cannot link" "$T/agent-nr1.log" ||
    fail "the agent did not say it takes no gang parts"
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

# Each part: what it was given, then the rendezvous torchrun would do
# (rank 0 listens on MASTER_PORT, the others connect to it), bounded.
read -r -d '' MEET <<'PY'
import os, socket, time
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
rank = int(os.environ["RANK"])
print("env rank=%d master=%s:%d" % (rank, addr, port), flush=True)
how = "timed out"
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(4)
    s.settimeout(8)
    try:
        c, _ = s.accept()
        c.sendall(b"hi")
        how = "ok"
    except OSError as e:
        how = str(e)
else:
    end = time.monotonic() + 8
    while time.monotonic() < end:
        try:
            c = socket.create_connection((addr, port), timeout=1)
            how = "ok" if c.recv(2) == b"hi" else "no greeting"
            break
        except OSError as e:
            how = str(e)
            time.sleep(0.2)
print("rendezvous rank=%d: %s" % (rank, how), flush=True)
raise SystemExit(0 if how == "ok" else 1)
PY

# the parts' logs of gang JOB, one line each
gang_logs() {
	local k out=
	for k in 0 1; do
		cli logs --part "$k" "$1"
		out="$out part $k: $(printf '%s' "$CLI_OUT" | tr '\n' ' ')"
	done
	printf '%s' "$out"
}

# Two agents as nobody: no gang of two.
cli submit --nodes 2 --gpus-per-node 1 --time 1m -- python3 -c "$MEET"
if [ "$CLI_RC" = 0 ]; then
	j=$(printf '%s' "$CLI_OUT" | tr -d '[:space:]')
	wait_final "$j" 60
	fail "a gang was placed on two agents that cannot link it: it ended $FINAL_STATE;$(gang_logs "$j")"
fi
assert_contains "$CLI_ERR" "node nr1 cannot link a gang's parts across nodes" \
    "submit's refusal gives nr1's reason"
assert_contains "$CLI_ERR" "node nr2 cannot link" "and nr2's"
log "refused: $CLI_ERR"
api "$ADMIN_TOKEN" GET /v1/nodes
assert_eq "nr1=False nr2=False" "$(printf '%s' "$API_BODY" | json '" ".join("%s=%s" % (n["name"], n["gangs"]) for n in sorted(d["nodes"], key=lambda n: n["name"]))')" "GET /v1/nodes says they take no gang"
# A job of one node runs there.
submit --nodes 1 --gpus 1 --time 1m -- true
wait_final "$JOB"
assert_eq succeeded "$FINAL_STATE" "a job of one node on a non-root agent"

# One root agent too: still no two nodes that link it.
start_agent r1 1
wait_node_up r1
cli submit --nodes 2 --gpus-per-node 1 --time 1m -- python3 -c "$MEET"
[ "$CLI_RC" != 0 ] ||
    fail "a gang of two accepted with one root agent: $CLI_OUT"
assert_contains "$CLI_ERR" "node nr1 cannot link" "the refusal with one root agent names nr1"
log "refused: $CLI_ERR"

# Two root agents: the gang runs there, its parts meet.
start_agent r2 1
wait_node_up r2
submit --nodes 2 --gpus-per-node 1 --time 1m -- python3 -c "$MEET"
j=$JOB
wait_final "$j" 60
for n in r1 r2; do
	grep -q "assignment job=$j attempt=1 .* parts=2" "$T/agent-$n.log" ||
	    fail "no part of gang $j on $n"
done
[ "$FINAL_STATE" = succeeded ] ||
    fail "the gang on two root agents ended $FINAL_STATE:$(gang_logs "$j")"
assert_contains "$(gang_logs "$j")" "rendezvous rank=1: ok" "part 1 met part 0"

# The root agents gone: a gang waits, and says why nr1 and nr2 do not
# take it.
kill9_agent r1
kill9_agent r2
wait_node_state r1 down
wait_node_state r2 down
submit --nodes 2 --gpus-per-node 1 --time 1m -- true
j=$JOB
deadline=$((SECONDS + WAIT_S))
while :; do
	cli show "$j"
	case $CLI_OUT in *"cannot link a gang's parts"*) break ;; esac
	[ "$(job_state "$j")" = queued ] || fail "the waiting gang left the queue: $(job_get "$j" d)"
	[ $SECONDS -ge $deadline ] && fail "show does not say why the gang waits: $CLI_OUT"
	sleep 0.2
done
log "show: $(printf '%s' "$CLI_OUT" | grep -i "cannot link")"
assert_contains "$CLI_OUT" "waiting: only 0 of the nodes up would take a part of this gang of 2: node nr" "show's reason"
assert_contains "$CLI_OUT" "node nr1 cannot link a gang's parts across nodes" "show names nr1"
assert_contains "$CLI_OUT" "node nr2 cannot link a gang's parts across nodes" "show names nr2"
cli queue
log "queue: $CLI_OUT"
assert_contains "$CLI_OUT" "only 0 of the nodes up would take a part" "queue's reason"
cli cancel "$j"
echo "ok $TEST_NAME"
