# Interactive streams over TLS on both legs: with a coordinator that
# serves only HTTPS, `gpupool exec` (the client's leg) and the agent's
# dialled leg are both TLS (the relay holds each leg's TLS session:
# relay_tls.h); stdin, output and the exit code pass, a 4 MiB transfer
# through `connect` comes back whole, and a client that does not trust
# the coordinator's CA gets no stream.
# Bulk data over TLS legs moves in large reads: /metrics' bytes relayed
# per read of a leg (gpupool_stream_leg_reads_total) is at least 1 KiB
# each way; libmicrohttpd 0.9.75's own forwarding of an upgraded TLS
# connection handed the relay a few bytes per read (4-byte buffers), so
# this fails on it, and needs no timing.
# The relay spreads streams over its threads (--relay-threads 3 here,
# whatever the cores): three streams open at once are one per thread
# (/metrics' gpupool_relay_thread_streams), each echoes 4 MB whole, and
# every thread is back to none once they end.
. "$(dirname "$0")/lib.sh"
require netns openssl

pki="$T/pki"
mkdir -p "$pki"
(
	cd "$pki" &&
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=gpupool e2e CA' \
	    -keyout ca.key -out ca.crt &&
	openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' -keyout server.key -out server.csr &&
	printf 'subjectAltName=IP:127.0.0.1\n' >san.ext &&
	openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
	    -days 2 -extfile san.ext -out server.crt &&
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=unrelated CA' \
	    -keyout other.key -out other.crt
) >"$T/openssl.out" 2>&1 || { cat "$T/openssl.out"; fail "openssl could not make the test PKI"; }
CA_CERT=$pki/ca.crt
COORD_SCHEME=https
COORD_TLS_ARGS=(--tls-cert "$pki/server.crt" --tls-key "$pki/server.key")
CURL_TLS=(--cacert "$CA_CERT")
export GPUPOOL_CA=$CA_CERT

COORD_EXTRA_ARGS=(--relay-threads 3)
start_coordinator
start_agent alpha 1
wait_node_up alpha
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

submit --gpus 1 -- python3 -c '
import socket, os, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9000)); s.listen(8)
open("ready", "w").close()
def echo(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()'
j=$JOB
wait_state "$j" running
out=$(printf 'over tls\n' | "$GP" exec "$j" -- sh -c 'cat; echo err >&2; exit 4' 2>"$T/e.err")
assert_eq 4 "$?" "exec's exit code over TLS ($(cat "$T/e.err"))"
assert_eq "over tls" "$out" "stdin and stdout over TLS"
assert_eq err "$(cat "$T/e.err")" "stderr over TLS"

dir="$T/agents/alpha/jobs/$j-1"
deadline=$((SECONDS + WAIT_S))
until [ -e "$dir/ready" ]; do
	[ $SECONDS -ge $deadline ] && fail "the job's echo server never started"
	sleep 0.1
done
# metric NAME_AND_LABELS: its value in API_BODY (a /metrics text).
metric() {
	printf '%s\n' "$API_BODY" | awk -v m="$1" '$1 == m { print int($2) }'
}
api_expect 200 "$ADMIN_TOKEN" GET /metrics
to0=$(metric 'gpupool_stream_bytes_total{direction="to_job"}')
from0=$(metric 'gpupool_stream_bytes_total{direction="from_job"}')
rc0=$(metric 'gpupool_stream_leg_reads_total{leg="client"}')
ra0=$(metric 'gpupool_stream_leg_reads_total{leg="agent"}')
is_uint "$rc0" && is_uint "$ra0" || fail "no gpupool_stream_leg_reads_total in /metrics"
head -c 4000000 /dev/urandom >"$T/in.bin"
"$GP" connect "$j" 9000 <"$T/in.bin" >"$T/out.bin" 2>"$T/c.err" ||
    fail "connect over TLS exited $?: $(cat "$T/c.err")"
cmp -s "$T/in.bin" "$T/out.bin" || fail "connect over TLS: the echo differs"
api_expect 200 "$ADMIN_TOKEN" GET /metrics
to=$(( $(metric 'gpupool_stream_bytes_total{direction="to_job"}') - to0 ))
from=$(( $(metric 'gpupool_stream_bytes_total{direction="from_job"}') - from0 ))
rc=$(( $(metric 'gpupool_stream_leg_reads_total{leg="client"}') - rc0 ))
ra=$(( $(metric 'gpupool_stream_leg_reads_total{leg="agent"}') - ra0 ))
log "over TLS: to the job $to bytes in $rc reads, from it $from in $ra"
[ "$to" -ge 4000000 ] && [ "$from" -ge 4000000 ] ||
    fail "the 4 MB echo was not counted: to_job $to, from_job $from"
[ $((to / rc)) -ge 1024 ] ||
    fail "the client's TLS leg was read $((to / rc)) bytes at a time ($to in $rc reads)"
[ $((from / ra)) -ge 1024 ] ||
    fail "the agent's TLS leg was read $((from / ra)) bytes at a time ($from in $ra reads)"
[ "$(metric gpupool_stream_tls_legs_total)" -ge 4 ] ||
    fail "the relay held no TLS legs: $(metric gpupool_stream_tls_legs_total)"

# Three streams at once, one per relay thread.
# thread_streams: "N0 N1 N2", the streams each relay thread holds.
thread_streams() {
	api_expect 200 "$ADMIN_TOKEN" GET /metrics
	echo "$(metric 'gpupool_relay_thread_streams{thread="0"}')" \
	    "$(metric 'gpupool_relay_thread_streams{thread="1"}')" \
	    "$(metric 'gpupool_relay_thread_streams{thread="2"}')"
}
# until_threads WANT WHAT
until_threads() {
	local deadline=$((SECONDS + WAIT_S)) got
	until got=$(thread_streams) && [ "$got" = "$1" ]; do
		[ $SECONDS -ge $deadline ] && fail "$2: relay threads hold '$got', not '$1'"
		sleep 0.2
	done
}
until_threads "0 0 0" "the streams before"
pids=() fds=()
for i in 0 1 2; do
	mkfifo "$T/f$i"
	"$GP" connect "$j" 9000 <"$T/f$i" >"$T/o$i" 2>"$T/c$i.err" &
	pids+=($!)
	exec {fd}>"$T/f$i"
	fds+=("$fd")
done
for i in 0 1 2; do
	cat "$T/in.bin" >&"${fds[$i]}"
done
for i in 0 1 2; do
	deadline=$((SECONDS + WAIT_S))
	until [ "$(stat -c %s "$T/o$i")" -ge 4000000 ]; do
		[ $SECONDS -ge $deadline ] && fail "stream $i echoed $(stat -c %s "$T/o$i") bytes: $(cat "$T/c$i.err")"
		sleep 0.1
	done
done
assert_eq "1 1 1" "$(thread_streams)" "three open streams over three relay threads"
# All the writers first: each later connect inherited the earlier FIFOs.
for i in 0 1 2; do
	fd=${fds[$i]}
	exec {fd}>&-
done
for i in 0 1 2; do
	wait "${pids[$i]}" || fail "connect $i exited $?: $(cat "$T/c$i.err")"
	cmp -s "$T/in.bin" "$T/o$i" || fail "stream $i: the echo differs"
done
until_threads "0 0 0" "the streams after they ended"

# a CA that is not the coordinator's: no stream
GPUPOOL_CA=$pki/other.crt cli exec "$j" -- true
[ "$CLI_RC" != 0 ] || fail "a stream over TLS with an untrusted coordinator"
echo "ok $TEST_NAME"
