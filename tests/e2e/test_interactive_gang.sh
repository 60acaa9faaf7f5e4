# Streams into any part of a gang (issue 17, docs/interactive.md): a gang
# of two parts on two agents; `exec --part 1` runs in part 1 (its RANK,
# the marker file its own command wrote in its work directory, the
# stream started by part 1's agent, not rank 0's); no --part is part 0;
# `connect --part 1` reaches a port only part 1 listens on; ssh-config
# names the part; the dashboard's terminal opens in part 1 with a ticket
# bound to it; a part the gang does not have, --part into a job that
# is not a gang, and a bad --part are refused with the reason.
. "$(dirname "$0")/lib.sh"
require netns python3

start_coordinator
start_agent alpha 1
start_agent beta 1
wait_node_up alpha
wait_node_up beta
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

# Each part writes its rank where only it can see it (its own work
# directory, on its own agent); part 1 also serves its rank on a port of
# its own loopback.
# shellcheck disable=SC2016 # the job's shell expands these
submit --nodes 2 --gpus 1 -- sh -c 'echo "rank-$RANK" >rank.txt
if [ "$RANK" = 1 ]; then
	python3 -c "
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"127.0.0.1\", 7801))
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(b\"served-by-rank-1\\n\")
    c.close()
" &
fi
'"$(gated_job_cmd)"
j=$JOB
wait_state "$j" running
node1=$(job_get "$j" '[p["node"] for p in d["parts"] if p["part"] == 1][0]')
node0=$(job_get "$j" '[p["node"] for p in d["parts"] if p["part"] == 0][0]')
[ "$node0" != "$node1" ] && [ -n "$node1" ] ||
    fail "the gang's parts on nodes '$node0' and '$node1'"

# exec_until PART WANT: the part's command may still be starting.
exec_until() {
	local deadline=$((SECONDS + WAIT_S))
	while :; do
		cli exec --part "$1" "$j" -- sh -c 'echo "env-$RANK"; cat rank.txt'
		[ "$CLI_RC" = 0 ] && [[ $CLI_OUT == *"$2"* ]] && return 0
		[ $SECONDS -ge $deadline ] && fail "exec --part $1: rc $CLI_RC out '$CLI_OUT' err '$CLI_ERR'"
		sleep 0.2
	done
}
exec_until 1 rank-1
assert_contains "$CLI_OUT" "env-1" "part 1's environment"
assert_not_contains "$CLI_OUT" "rank-0" "part 0's file seen from part 1"
grep -q "stream started .*job=$j " "$T/agent-$node1.log" ||
    fail "part 1's agent ($node1) started no stream: $(grep stream "$T/agent-$node1.log")"
grep -q "stream started .*job=$j " "$T/agent-$node0.log" &&
    fail "rank 0's agent ($node0) served the stream into part 1"
exec_until 0 rank-0
assert_contains "$CLI_OUT" "env-0" "part 0's environment"
cli exec "$j" -- cat rank.txt
assert_eq rank-0 "$CLI_OUT" "exec without --part: part 0 ($CLI_ERR)"

# a port that only part 1 listens on
deadline=$((SECONDS + WAIT_S))
until out=$("$GP" connect --part 1 "$j" 7801 </dev/null 2>"$T/c.err") &&
    [ "$out" = served-by-rank-1 ]; do
	[ $SECONDS -ge $deadline ] && fail "connect --part 1: '$out' $(cat "$T/c.err")"
	sleep 0.2
done
cli connect "$j" 7801
[ "$CLI_RC" != 0 ] || fail "part 0 answered on part 1's port: $CLI_OUT"

cli ssh-config --part 1 "$j"
assert_contains "$CLI_OUT" "Host gpupool-$j-part1" "ssh-config's host for part 1"
assert_contains "$CLI_OUT" "connect --part 1 $j 22" "ssh-config's ProxyCommand"

# The dashboard's terminal into part 1: a ticket asked for part 1
# (POST .../terminal?part=1) opens a shell there, over the WebSocket the
# page uses (a minimal client: the handshake, masked frames); the ticket
# is bound to its part (a part-0 ticket sent for part 1 is refused).
# term_ws PART TICKET: what the terminal shows after `cat rank.txt`.
term_ws() {
	E2E_URL=$(coord_url) E2E_JOB=$j E2E_PART=$1 E2E_TICKET=$2 $PY - <<'PY'
import base64, json, os, socket, struct, time, urllib.parse
u = urllib.parse.urlparse(os.environ["E2E_URL"])
s = socket.create_connection((u.hostname, u.port), timeout=10)
host = "%s:%d" % (u.hostname, u.port)
s.sendall(("GET /v1/jobs/%s/terminal HTTP/1.1\r\nHost: %s\r\n"
    "Origin: http://%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n" %
    (os.environ["E2E_JOB"], host, host,
     base64.b64encode(os.urandom(16)).decode())).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
assert b" 101 " in head.split(b"\r\n")[0], head
def send(op, data):
    m = os.urandom(4)
    n = len(data)
    hdr = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else
        bytes([0xFE]) + struct.pack(">H", n))
    s.sendall(hdr + m + bytes(b ^ m[i % 4] for i, b in enumerate(data)))
send(1, json.dumps({"ticket": os.environ["E2E_TICKET"], "rows": 24,
    "cols": 80, "part": int(os.environ["E2E_PART"])}).encode())
send(2, b"cat rank.txt; exit\n")
out, end = b"", time.time() + 20
while time.time() < end:
    while len(buf) >= 2:
        n = buf[1] & 0x7F
        off = 2
        if n == 126:
            n, off = struct.unpack(">H", buf[2:4])[0], 4
        elif n == 127:
            n, off = struct.unpack(">Q", buf[2:10])[0], 10
        if len(buf) < off + n:
            break
        out += buf[off:off + n]
        op, buf = buf[0] & 0x0F, buf[off + n:]
        if op == 8:
            end = 0
    if end == 0:
        break
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    if not d:
        break
    buf += d
print(out.decode("utf-8", "replace"))
PY
}
api_expect 201 "$TOKEN" POST "/v1/jobs/$j/terminal?part=1" ""
t1=$(printf '%s' "$API_BODY" | json 'd["ticket"]')
out=$(term_ws 1 "$t1")
assert_contains "$out" "rank-1" "the dashboard's terminal in part 1"
assert_not_contains "$out" "rank-0" "the dashboard's terminal in part 1"
api_expect 201 "$TOKEN" POST "/v1/jobs/$j/terminal" ""
t0=$(printf '%s' "$API_BODY" | json 'd["ticket"]')
out=$(term_ws 1 "$t0")
assert_contains "$out" "ticket is used or expired" "a part-0 ticket used for part 1"
assert_not_contains "$out" "rank-" "a part-0 ticket used for part 1"
api_expect 400 "$TOKEN" POST "/v1/jobs/$j/terminal?part=2" ""
assert_contains "$API_BODY" "has 2 parts" "a ticket for part 2 of 2"

# parts that are not there
cli exec --part 2 "$j" -- true
[ "$CLI_RC" != 0 ] || fail "exec into part 2 of a gang of 2"
assert_contains "$CLI_ERR" "has 2 parts: part 0 to 1" "part 2's refusal"
st=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    -H "Upgrade: gpupool-stream/1" "$(coord_url)/v1/jobs/$j/stream?kind=exec&part=99")
assert_eq 400 "$st" "the route asked for part 99"
cli exec --part x "$j" -- true
assert_eq 2 "$CLI_RC" "a bad --part ($CLI_ERR)"
assert_contains "$CLI_ERR" "not a part number" "a bad --part"
cli shell --part 1
assert_eq 2 "$CLI_RC" "shell --part without JOB ($CLI_ERR)"
submit --gpus 0 -- sh -c "$(gated_job_cmd)"
single=$JOB
wait_state "$single" running
cli exec --part 1 "$single" -- true
[ "$CLI_RC" != 0 ] || fail "exec --part 1 into a job that is not a gang"
assert_contains "$CLI_ERR" "not a gang" "--part into a plain job"

release_job "$node0" "$j"
release_job "$node1" "$j"
wait_final "$j"
cli exec --part 1 "$j" -- true
assert_contains "$CLI_ERR" "not running" "a finished gang"
echo "ok $TEST_NAME"
