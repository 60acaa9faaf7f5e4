# shellcheck shell=bash
# bench/relay_lib.sh: what the benches of the coordinator's relay share
# (forward_tls.sh, relay_threads.sh, proxy_tls.sh): pools side by side on
# this machine, some of them HTTPS with a CA made here. Sourced from the
# repository's root once GPUPOOL_BIN is set: it sources tests/e2e/lib.sh,
# whose coordinator, agent and CLI helpers they use, with its scratch
# under /var/tmp (bench/lib.sh is for benches that start their processes
# themselves: its start_coordinator and api are not these).

export E2E_TMPDIR=/var/tmp
. tests/e2e/lib.sh

# relay_pki DIR [DNS_NAME]: a CA made here (DIR/ca.crt, ca.key, "bench
# CA") and the coordinator's certificate for 127.0.0.1 that it signs
# (DIR/server.crt, server.key; subjectAltName IP:127.0.0.1, and
# DNS:DNS_NAME too when given), P-256, valid two days. openssl's output
# goes to $T/openssl.out, shown when it fails (and the bench fails).
relay_pki() {
	local dir=$1 san=IP:127.0.0.1
	[ -n "${2:-}" ] && san="$san,DNS:$2"
	mkdir -p "$dir"
	(
		cd "$dir" &&
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		    -subj '/CN=bench CA' -keyout ca.key -out ca.crt &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		    -subj '/CN=127.0.0.1' -keyout server.key -out server.csr &&
		printf 'subjectAltName=%s\n' "$san" >san.ext &&
		openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
		    -days 2 -extfile san.ext -out server.crt
	) >"$T/openssl.out" 2>&1 || { cat "$T/openssl.out"; fail "openssl"; }
}

# relay_use_tls DIR: the pools started from now on are HTTPS only, with
# relay_pki's certificate in DIR (start_coordinator), and the CLI, the
# agents and api's curl trust its CA (CA_CERT).
# shellcheck disable=SC2034 # tests/e2e/lib.sh reads them
relay_use_tls() {
	COORD_SCHEME=https CA_CERT=$1/ca.crt
	COORD_TLS_ARGS=(--tls-cert "$1/server.crt" --tls-key "$1/server.key")
	CURL_TLS=(--cacert "$CA_CERT")
	export GPUPOOL_CA=$CA_CERT
}

# relay_forward_pool NAME SERVER [ARG...]: a pool of $GP (the TLS or not
# that is set now): a coordinator ($T/coord-NAME), one agent (aNAME, one
# GPU), a user's job that runs `python3 -c SERVER ARG...` (it listens on
# 127.0.0.1:9001, then makes the file "ready" in its work directory), and
# a `gpupool port-forward` to its port 9001 ($T/fwd-NAME.log). Sets
# LPORT_<NAME> (the forward's local port); the pool's token is left in
# TOKEN.
# shellcheck disable=SC2034 # tests/e2e/lib.sh reads the COORD_*
relay_forward_pool() {
	local name=$1 job lp
	shift
	COORD_PORT='' COORD_DATA="$T/coord-$name" COORD_LOG="$T/coord-$name.log"
	start_coordinator
	start_agent "a$name" 1
	wait_node_up "a$name"
	mk_token user "bench$name"
	GPUPOOL_TOKEN=$TOKEN submit --gpus 0 -- python3 -c "$@"
	job=$JOB
	wait_state "$job" running
	until [ -e "$T/agents/a$name/jobs/$job-1/ready" ]; do sleep 0.1; done
	lp=$(free_port)
	GPUPOOL_TOKEN=$TOKEN spawn "$T/fwd-$name.log" "$GP" port-forward "$job" "$lp:9001"
	until grep -q Forwarding "$T/fwd-$name.log"; do sleep 0.1; done
	printf -v "LPORT_$name" '%s' "$lp"
}

# The median of the numbers on stdin, one a line (the lower middle one of
# an even count).
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
