#!/usr/bin/env bash
# bench/interactive_proxy.sh: the job port proxy's throughput (issue 17
# B), on one machine: a coordinator with --proxy-listen and one agent on
# 127.0.0.1, the job in its own network namespace (needs root). A job
# answers any HTTP request with 1 GiB; curl reads it (1) through the
# coordinator's proxy (signed in as the dashboard does: grant, code,
# cookie) and (2) through `gpupool port-forward`, each RUNS times.
# Prints "metric value unit": proxy_mb_s and forward_mb_s (median).
# Usage: BUILD=build [RUNS=3] bench/interactive_proxy.sh
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN="$PWD/${BUILD:-build}/gpupool"
export E2E_TMPDIR=/var/tmp
. tests/e2e/lib.sh
RUNS=${RUNS:-3}

PPORT=$(free_port)
start_coordinator --proxy-listen "127.0.0.1:$PPORT"
start_agent alpha 1
wait_node_up alpha
mk_token user bench
export GPUPOOL_TOKEN=$TOKEN

submit --gpus 0 --expose 9001 -- python3 -c '
import socket, os, threading
blob = os.urandom(1 << 20)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9001)); s.listen(16)
open("ready", "w").close()
def serve(c):
    c.recv(65536)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (1024 << 20))
    for i in range(1024):
        c.sendall(blob)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()'
job=$JOB
wait_state "$job" running
until [ -e "$T/agents/alpha/jobs/$job-1/ready" ]; do sleep 0.1; done
host="j$job-p9001.localhost"
api "$TOKEN" POST "/v1/jobs/$job/proxy" '{"port":9001}'
code=$(printf '%s' "$API_BODY" | json 'd["url"]')
code=${code#*#}
curl -s --resolve "$host:$PPORT:127.0.0.1" -c "$T/jar" -o /dev/null \
    --data-binary "$code" "http://$host:$PPORT/_gpupool/login"
lp=$(free_port)
spawn "$T/fwd.log" "$GP" port-forward "$job" "$lp:9001"
until grep -q Forwarding "$T/fwd.log"; do sleep 0.1; done

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for i in $(seq "$RUNS"); do
	curl -s --resolve "$host:$PPORT:127.0.0.1" -b "$T/jar" -o /dev/null \
	    -w '%{speed_download}\n' "http://$host:$PPORT/"
done | awk '{printf "%.1f\n", $1 / 1e6}' | median | sed 's/^/proxy_mb_s /; s/$/ MB\/s/'
for i in $(seq "$RUNS"); do
	curl -s -o /dev/null -w '%{speed_download}\n' "http://127.0.0.1:$lp/"
done | awk '{printf "%.1f\n", $1 / 1e6}' | median | sed 's/^/forward_mb_s /; s/$/ MB\/s/'
cli cancel "$job"
