#!/usr/bin/env bash
# bench/forward_tls.sh: one `gpupool port-forward` stream over an HTTPS
# coordinator against a plain one, in one run (issue 17: "TLS when the
# coordinator has it, on both legs"; inter7: the relay holds the legs'
# TLS, relay_tls.h). Two pools on this machine, each a coordinator and
# one agent on 127.0.0.1 (jobs in their own network namespaces: needs
# root): "plain" (HTTP) and "tls" (HTTPS only, P-256 from a CA made here:
# the CLI's leg and the agent's dialled leg are both TLS). In each, a job
# sends SIZE_MIB MiB on every connection to its port 9001; a port-forward
# runs per pool, and a reader takes one connection's bytes through it,
# the two pools taking turns, RUNS rounds. Prints "metric value unit":
#  - forward_{plain,tls}_mb_s_round_N, and forward_{plain,tls}_mb_s (the
#    median);
#  - forward_{plain,tls}_bytes_per_read_{client,agent}: the relay's bytes
#    relayed per read of each leg over the whole run (/metrics).
# Usage: BUILD=build [RUNS=5] [SIZE_MIB=1024] bench/forward_tls.sh
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN="$PWD/${BUILD:-build}/gpupool"
. bench/relay_lib.sh
require netns openssl
RUNS=${RUNS:-5}
SIZE_MIB=${SIZE_MIB:-1024}

pki="$T/pki"
relay_pki "$pki"

SERVER='
import socket, os, threading, sys
size = int(sys.argv[1])
blob = os.urandom(1 << 20)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9001)); s.listen(16)
open("ready", "w").close()
def serve(c):
    for i in range(size):
        c.sendall(blob)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()'

# pool NAME (plain or tls): a coordinator, an agent, the job, its
# port-forward (bench/relay_lib.sh); sets LPORT_<NAME>, URL_<NAME>,
# ADMIN_<NAME>.
pool() {
	local name=$1
	if [ "$name" = tls ]; then
		relay_use_tls "$pki"
	fi
	relay_forward_pool "$name" "$SERVER" "$SIZE_MIB"
	printf -v "URL_$name" '%s' "$(coord_url)"
	printf -v "ADMIN_$name" '%s' "$ADMIN_TOKEN"
}
MODES="plain tls"
for name in $MODES; do
	pool "$name"
done

READ='
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
n, t0 = 0, time.monotonic()
while True:
    d = s.recv(1 << 20)
    if not d:
        break
    n += len(d)
dt = time.monotonic() - t0
if n != int(sys.argv[2]) << 20:
    raise SystemExit("short read: %d bytes" % n)
print("%.1f" % (n / dt / 1e6))'
for i in $(seq "$RUNS"); do
	for name in $MODES; do
		lp=LPORT_$name
		v=$($PY -c "$READ" "${!lp}" "$SIZE_MIB") || fail "$name: $v"
		echo "forward_${name}_mb_s_round_$i $v MB/s"
		echo "$name $v" >>"$T/rounds"
	done
done
for name in $MODES; do
	grep "^$name " "$T/rounds" | awk '{print $2}' | median |
	    sed "s/^/forward_${name}_mb_s /; s/\$/ MB\/s/"
done
for name in $MODES; do
	u=URL_$name a=ADMIN_$name
	curl -sS --cacert "$pki/ca.crt" -H "Authorization: Bearer ${!a}" "${!u}/metrics" |
	    awk -v n="$name" '
		$1 == "gpupool_stream_bytes_total{direction=\"to_job\"}" { to = $2 }
		$1 == "gpupool_stream_bytes_total{direction=\"from_job\"}" { from = $2 }
		$1 == "gpupool_stream_leg_reads_total{leg=\"client\"}" { rc = $2 }
		$1 == "gpupool_stream_leg_reads_total{leg=\"agent\"}" { ra = $2 }
		END {
			if (rc > 0) printf "forward_%s_bytes_per_read_client %.0f bytes\n", n, to / rc
			if (ra > 0) printf "forward_%s_bytes_per_read_agent %.0f bytes\n", n, from / ra
		}'
done
