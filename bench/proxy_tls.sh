#!/usr/bin/env bash
# bench/proxy_tls.sh: the job port proxy over TLS against plain HTTP, in
# one run (issue 17: "TLS when the coordinator has it, on both legs"). Two
# pools on this machine, each a coordinator with --proxy-listen and one
# agent on 127.0.0.1 (jobs in their own network namespaces: needs root):
# one plain, one with TLS (the API's certificate and the proxy's for
# *.jobs.localhost, P-256, from a CA made here). In each, a job answers
# /big with SIZE_MIB MiB and /small with 2 bytes, closing each connection;
# curl (trusting the CA) signs in as the dashboard does and reads, the two
# pools taking turns, RUNS times:
#  - proxy_{plain,tls}_mb_s: /big, one connection (median of RUNS);
#  - proxy_{plain,tls}_request_ms_p50/p90: /small, 50 requests, each on a
#    new connection (TCP, the TLS handshake, the cookie's check, a relay
#    stream to the job) from one curl process.
# Prints "metric value unit".
# Usage: BUILD=build [RUNS=5] [SIZE_MIB=1024] [MODES="plain proxytls tls"]
#        [COORD_ARGS="--conn-memory 64K"] bench/proxy_tls.sh
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN="$PWD/${BUILD:-build}/gpupool"
. bench/relay_lib.sh
RUNS=${RUNS:-5}
SIZE_MIB=${SIZE_MIB:-1024}
DOMAIN=jobs.localhost

pki="$T/pki"
relay_pki "$pki" "*.$DOMAIN"

SERVER='
import socket, os, threading, sys
size = int(sys.argv[1]) << 20
blob = os.urandom(1 << 20)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9001)); s.listen(64)
open("ready", "w").close()
def serve(c):
    head = c.recv(65536)
    if head.startswith(b"GET /big"):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
        for i in range(size >> 20):
            c.sendall(blob)
    else:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()'

# pool NAME: a coordinator, an agent, a signed-in job; NAME plain (no
# TLS), proxytls (the API plain, the proxy HTTPS: --proxy-tls-cert) or
# tls (both HTTPS, the agent's leg too); sets HOST_<NAME>, ORIGIN_<NAME>.
pool() {
	local name=$1 pport scheme=http job host code extra=()
	pport=$(free_port)
	COORD_PORT= COORD_DATA="$T/coord-$name" COORD_LOG="$T/coord-$name.log"
	if [ "$name" = proxytls ]; then
		scheme=https
		extra=(--proxy-tls-cert "$pki/server.crt" --proxy-tls-key "$pki/server.key")
	fi
	if [ "$name" = tls ]; then
		scheme=https
		relay_use_tls "$pki"
	fi
	# shellcheck disable=SC2086 # COORD_ARGS: more coordinator flags
	start_coordinator --proxy-listen "127.0.0.1:$pport" --proxy-domain "$DOMAIN" \
	    "${extra[@]+"${extra[@]}"}" ${COORD_ARGS:-}
	start_agent "a$name" 1
	wait_node_up "a$name"
	mk_token user "bench$name"
	GPUPOOL_TOKEN=$TOKEN submit --gpus 0 --expose 9001 -- python3 -c "$SERVER" "$SIZE_MIB"
	job=$JOB
	wait_state "$job" running
	until [ -e "$T/agents/a$name/jobs/$job-1/ready" ]; do sleep 0.1; done
	host="j$job-p9001.$DOMAIN"
	api "$TOKEN" POST "/v1/jobs/$job/proxy" '{"port":9001}'
	code=$(printf '%s' "$API_BODY" | json 'd["url"]')
	code=${code#*#}
	curl -s --cacert "$pki/ca.crt" --resolve "$host:$pport:127.0.0.1" -c "$T/jar-$name" \
	    -o /dev/null --data-binary "$code" "$scheme://$host:$pport/_gpupool/login"
	grep -q gpupool_proxy "$T/jar-$name" || fail "$name: no sign-in"
	printf -v "HOST_$name" '%s' "$host:$pport"
	printf -v "ORIGIN_$name" '%s' "$scheme://$host:$pport"
	save_pool "$name"
}
MODES=${MODES:-plain proxytls tls}
for name in $MODES; do
	pool "$name"
done

pcurl() { # NAME ARGS...
	local name=$1 hp=HOST_$1
	shift
	curl -s --cacert "$pki/ca.crt" --resolve "${!hp}:127.0.0.1" -b "$T/jar-$name" "$@"
}
for i in $(seq "$RUNS"); do
	for name in $MODES; do
		o=ORIGIN_$name
		printf '%s ' "$name"
		pcurl "$name" -o /dev/null -w '%{speed_download}\n' "${!o}/big"
	done
done >"$T/big"
for name in $MODES; do
	grep "^$name " "$T/big" | awk '{printf "%.1f\n", $2 / 1e6}' | median |
	    sed "s/^/proxy_${name}_mb_s /; s/\$/ MB\/s/"
done
for name in $MODES; do
	o=ORIGIN_$name
	urls=()
	for i in $(seq 50); do urls+=(-o /dev/null "${!o}/small"); done
	pcurl "$name" -w '%{time_total}\n' "${urls[@]}" |
	    awk '{printf "%.2f\n", $1 * 1000}' | sort -n >"$T/small-$name"
	printf 'proxy_%s_request_ms_p50 %s ms\n' "$name" "$(awk 'NR==25' "$T/small-$name")"
	printf 'proxy_%s_request_ms_p90 %s ms\n' "$name" "$(awk 'NR==45' "$T/small-$name")"
done
