# Interactive streams into the jobs of an agent that is not root (issue
# 17, docs/interactive.md "Where the process runs"): the agent runs as
# nobody (setpriv), so its jobs have a user namespace of their own (the
# agent's uid mapped to itself) and the agent has no capabilities outside
# it. `exec` (pipes and a terminal) runs in the job: its namespaces, its
# user, its working directory, its environment; `port-forward` and
# `connect` reach the job's own loopback port (the agent enters the job's
# user namespace to reach its network); the host's loopback stays out of
# reach from the stream.
. "$(dirname "$0")/lib.sh"
require root python3 unshare
command -v setpriv >/dev/null || fail "util-linux's setpriv is missing"
# The agent as nobody makes its jobs' user namespaces: the kernel must let
# it (a hardened kernel may not; then a non-root agent runs no jobs).
if ! setpriv --reuid=nobody --regid=nogroup --clear-groups \
    unshare --user --map-current-user --net true 2>/dev/null; then
	skip unshare "an unprivileged user may not make a user namespace here"
fi

start_coordinator
mk_token provider prov-u1
U1_TOKEN=$TOKEN
# The agent as nobody: its directory where nobody reaches it.
UW=$T/nb
chmod 711 "$T" && mkdir -m 755 "$UW"
mkdir "$UW/u1" && chown nobody "$UW/u1"
spawn "$T/agent-u1.log" env GPUPOOL_TOKEN="$U1_TOKEN" HOME="$UW/u1" \
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
    "$GP" agent --coordinator "$(coord_url)" --name u1 \
    --work "$UW/u1/work" --fake-gpus 1 --runtime none -v
AGENT_PID[u1]=$SPAWNED_PID
wait_node_up u1
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

read -r -d '' SERVER <<'PY'
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7802))
s.listen(8)
while True:
    c, _ = s.accept()
    d = c.recv(100)
    c.sendall(b"job-port:" + d)
    c.close()
PY
# shellcheck disable=SC2016 # the job's shell expands these
submit --gpus 1 -e MARK=job-env -- sh -c 'echo here >marker; python3 -c "$0" & '"$(gated_job_cmd)" "$SERVER"
j=$JOB
wait_state "$j" running

# exec, on pipes: the job's environment, user, working directory, exit code
deadline=$((SECONDS + WAIT_S))
while :; do
	cli exec "$j" -- sh -c 'echo "out:$MARK"; id -u; cat marker; grep CapEff /proc/self/status; echo err >&2; exit 5'
	[ "$CLI_RC" = 5 ] && break
	[ $SECONDS -ge $deadline ] && fail "exec into the non-root agent's job: rc $CLI_RC out '$CLI_OUT' err '$CLI_ERR' agent: $(grep -i stream "$T/agent-u1.log" | tail -5)"
	sleep 0.2
done
assert_contains "$CLI_OUT" "out:job-env" "the job's environment"
assert_contains "$CLI_OUT" "$(id -u nobody)" "the job's user (the agent's)"
assert_contains "$CLI_OUT" "here" "the job's working directory"
assert_contains "$CLI_OUT" "CapEff:	0000000000000000" "no capabilities (the job's user namespace gave nsenter some)"
assert_eq err "$CLI_ERR" "stderr apart"

# a terminal (a plain job's /dev has no pts: no name, but a terminal)
command -v script >/dev/null || fail "util-linux's script is missing"
script -qec "$GP exec -t $j -- sh -c '[ -t 0 ] && [ -t 1 ] && echo term-yes; stty size; exit 3'" /dev/null </dev/null >"$T/tty.out" 2>&1
assert_eq 3 "$?" "exec -t's exit code ($(cat "$T/tty.out"))"
assert_contains "$(cat "$T/tty.out")" "term-yes" "exec -t has a terminal"

# the host's loopback is not the job's
host_port=$(free_port)
$PY -m http.server --bind 127.0.0.1 "$host_port" >/dev/null 2>&1 &
HTTPD=$!
STARTED_PIDS+=("$HTTPD")
cli exec "$j" -- python3 -c "
import socket
try:
    socket.create_connection(('127.0.0.1', $host_port), timeout=2)
    print('reached')
except OSError:
    print('isolated')"
assert_eq isolated "$CLI_OUT" "the host's loopback from the job ($CLI_ERR)"

# connect and port-forward to the job's own loopback port
deadline=$((SECONDS + WAIT_S))
until out=$(printf 'hi' | "$GP" connect "$j" 7802 2>"$T/c.err") &&
    [ "$out" = job-port:hi ]; do
	[ $SECONDS -ge $deadline ] && fail "connect: '$out' $(cat "$T/c.err") agent: $(grep -i stream "$T/agent-u1.log" | tail -5)"
	sleep 0.2
done
lp=$(free_port)
"$GP" port-forward "$j" "$lp:7802" >"$T/pf.out" 2>&1 &
pf=$!
STARTED_PIDS+=("$pf")
deadline=$((SECONDS + WAIT_S))
until grep -q Forwarding "$T/pf.out"; do
	alive "$pf" || fail "port-forward exited: $(cat "$T/pf.out")"
	[ $SECONDS -ge $deadline ] && fail "port-forward not listening"
	sleep 0.1
done
out=$($PY -c "
import socket
c = socket.create_connection(('127.0.0.1', $lp), timeout=10)
c.sendall(b'fw')
c.shutdown(socket.SHUT_WR)
print(c.recv(100).decode())")
assert_eq job-port:fw "$out" "port-forward into the job"
kill "$pf"

touch "$UW/u1/work/jobs/$j-1/go" 2>/dev/null ||
    cli cancel "$j"
wait_final "$j"
echo "ok $TEST_NAME"
