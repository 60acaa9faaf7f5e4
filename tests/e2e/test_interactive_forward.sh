# `gpupool port-forward` and `gpupool connect`: many concurrent TCP
# connections to a job's own loopback ports, through the coordinator,
# each echoed back whole (half-closes passed on), and one large transfer
# (64 MiB) compared byte for byte (SHA-256 against the job's own).
. "$(dirname "$0")/lib.sh"
require netns python3

# The transfers keep both cores busy; on a loaded two-core machine the
# suite's 2 s lease then let a heartbeat's delay kill the job mid-transfer.
# Leases are not what this test is about.
start_coordinator --lease-ms 20000
start_agent alpha 1
wait_node_up alpha
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

read -r -d '' SERVER <<'PY'
import hashlib, os, socket, threading
big = os.urandom(64 << 20)
with open("big.sha", "w") as f:
    f.write(hashlib.sha256(big).hexdigest())
def echo(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
def blob(c):
    c.sendall(big)
    c.close()
def serve(port, fn):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(128)
    while True:
        c, _ = s.accept()
        threading.Thread(target=fn, args=(c,), daemon=True).start()
threading.Thread(target=serve, args=(9001, blob), daemon=True).start()
threading.Thread(target=serve, args=(9000, echo), daemon=True).start()
open("ready", "w").close()
while not os.path.exists("go"):
    threading.Event().wait(0.1)
PY
submit --gpus 1 -- python3 -c "$SERVER"
j=$JOB
wait_state "$j" running
dir="$T/agents/alpha/jobs/$j-1"
deadline=$((SECONDS + WAIT_S))
until [ -e "$dir/ready" ]; do
	[ $SECONDS -ge $deadline ] && fail "the job's servers never started: $(job_get "$j" 'd["state"]') $(cat "$T/agent-alpha.log" | grep -v debug | tail -n 5)"
	sleep 0.1
done

# connect: stdin to the echo port and back, its end passed on (EOF)
head -c 300000 /dev/urandom >"$T/in.bin"
"$GP" connect "$j" 9000 <"$T/in.bin" >"$T/out.bin" 2>"$T/connect.err" ||
    fail "connect exited $?: $(cat "$T/connect.err")"
cmp -s "$T/in.bin" "$T/out.bin" || fail "connect: the echo differs ($(stat -c %s "$T/out.bin") bytes back)"
# nothing listens on the port: said, non-zero
"$GP" connect "$j" 9009 </dev/null >/dev/null 2>"$T/connect.err" &&
    fail "connect to a closed port exited 0"
assert_contains "$(cat "$T/connect.err")" "nothing answers" "closed port"

l0=$(free_port)
l1=$(free_port)
spawn "$T/forward.log" "$GP" port-forward "$j" "$l0:9000" "$l1:9001"
FWD=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c Forwarding "$T/forward.log")" = 2 ]; do
	alive "$FWD" || fail "port-forward exited: $(cat "$T/forward.log")"
	[ $SECONDS -ge $deadline ] && fail "port-forward never listened: $(cat "$T/forward.log")"
	sleep 0.1
done

E2E_L0=$l0 E2E_L1=$l1 E2E_SHA="$dir/big.sha" $PY - <<'PY' || fail "port-forward transfers"
import hashlib, os, socket, sys, threading
l0, l1 = int(os.environ["E2E_L0"]), int(os.environ["E2E_L1"])
errors = []
def echo(i):
    try:
        data = os.urandom(1 << 20)
        s = socket.create_connection(("127.0.0.1", l0), timeout=60)
        def send():
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        t = threading.Thread(target=send)
        t.start()
        got = bytearray()
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
        t.join()
        if bytes(got) != data:
            errors.append("echo %d: %d bytes back, differ" % (i, len(got)))
    except Exception as e:
        errors.append("echo %d: %r" % (i, e))
def blob():
    try:
        s = socket.create_connection(("127.0.0.1", l1), timeout=60)
        h, n = hashlib.sha256(), 0
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            h.update(d)
            n += len(d)
        want = open(os.environ["E2E_SHA"]).read().strip()
        if n != 64 << 20 or h.hexdigest() != want:
            errors.append("blob: %d bytes, sha %s != %s" % (n, h.hexdigest(), want))
    except Exception as e:
        errors.append("blob: %r" % (e,))
ts = [threading.Thread(target=echo, args=(i,)) for i in range(40)]
ts.append(threading.Thread(target=blob))
for t in ts:
    t.start()
for t in ts:
    t.join()
if errors:
    print("\n".join(errors[:10]), file=sys.stderr)
    sys.exit(1)
PY

api_expect 200 "$ADMIN_TOKEN" GET /metrics
from=$(printf '%s\n' "$API_BODY" | awk '$1 == "gpupool_stream_bytes_total{direction=\"from_job\"}" {print $2}')
[ "${from%.*}" -ge $((64 << 20)) ] 2>/dev/null || fail "bytes relayed from the job: '$from'"
echo "ok $TEST_NAME"
