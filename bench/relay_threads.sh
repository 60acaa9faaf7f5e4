#!/usr/bin/env bash
# bench/relay_threads.sh: TLS stream throughput of two builds side by side
# (issue 17, inter9: the relay's streams spread over a pool of threads).
# Two pools on this machine, each an HTTPS-only coordinator (P-256 from a
# CA made here: the CLI's leg and the agent's dialled leg both TLS) and
# one agent on 127.0.0.1 (jobs in their own network namespaces: needs
# root), one running OLD's gpupool, the other NEW's. In each a job serves
# its port 9001: a connection says how many MiB it wants, and gets them.
# One `gpupool port-forward` per pool; per round and per pool a reader
# opens P connections at once (P in STREAMS) through it and reads them
# all, the pools taking turns (old first in odd rounds, new first in even
# ones). Prints "metric value unit":
#  - relay_{old,new}_p{P}_mb_s_round_N: bytes of all P connections over
#    the time from the first connect to the last byte;
#  - relay_{old,new}_p{P}_mb_s: the median over the rounds;
#  - relay_{old,new}_thread_cpu_s NAME SECONDS: each coordinator's three
#    busiest threads over the run (the new build's are gp-relay-N);
#  - load: the load average at the start and at the end.
# Usage: bench/relay_threads.sh OLD_GPUPOOL NEW_GPUPOOL
#   [RUNS=5] [TOTAL_MIB=1024] [STREAMS="1 8"]
# (TOTAL_MIB is shared by the P connections of one reading.)
set -u
cd "$(dirname "$0")/.."
OLD_BIN=$(readlink -f "$1") NEW_BIN=$(readlink -f "$2")
export GPUPOOL_BIN=$NEW_BIN
. bench/relay_lib.sh
require netns openssl
RUNS=${RUNS:-5}
TOTAL_MIB=${TOTAL_MIB:-1024}
STREAMS=${STREAMS:-1 8}
echo "load_start $(cut -d' ' -f1-3 /proc/loadavg)"

pki="$T/pki"
relay_pki "$pki"

SERVER='
import socket, os, threading
blob = os.urandom(1 << 20)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9001)); s.listen(64)
open("ready", "w").close()
def serve(c):
    f = c.makefile("rb")
    mib = int(f.readline())
    for i in range(mib):
        c.sendall(blob)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()'

relay_use_tls "$pki"

# Each pool (bench/relay_lib.sh) all of its build; sets LPORT_<NAME>.
GP=$OLD_BIN
relay_forward_pool old "$SERVER"
GP=$NEW_BIN
relay_forward_pool new "$SERVER"

READ='
import socket, sys, threading, time
port, p, total = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
each = total // p
got = [0] * p
def one(i):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"%d\n" % each)
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        got[i] += len(d)
t0 = time.monotonic()
ts = [threading.Thread(target=one, args=(i,)) for i in range(p)]
for t in ts: t.start()
for t in ts: t.join()
dt = time.monotonic() - t0
if sum(got) != p * (each << 20):
    raise SystemExit("short read: %r" % got)
print("%.1f" % (sum(got) / dt / 1e6))'
for i in $(seq "$RUNS"); do
	order="old new"
	[ $((i % 2)) = 0 ] && order="new old"
	for p in $STREAMS; do
		for name in $order; do
			lp=LPORT_$name
			v=$($PY -c "$READ" "${!lp}" "$p" "$TOTAL_MIB") || fail "$name p$p: $v"
			echo "relay_${name}_p${p}_mb_s_round_$i $v MB/s"
			echo "$name $p $v" >>"$T/rounds"
		done
	done
done
for p in $STREAMS; do
	for name in old new; do
		awk -v n="$name" -v p="$p" '$1 == n && $2 == p {print $3}' "$T/rounds" |
		    median | sed "s/^/relay_${name}_p${p}_mb_s /; s/\$/ MB\/s/"
	done
done
# Where the coordinators' CPU went: their three busiest threads over the
# whole run (name, CPU seconds; the old build's relay thread is unnamed).
for name in old new; do
	pid=$(pgrep -f -- "coordinator .*$T/coord-$name( |\$)" | head -1)
	[ -n "$pid" ] || continue
	for t in /proc/"$pid"/task/*; do
		# comm may hold spaces: the fields after its closing ')'
		printf '%s %s\n' "$(cat "$t/comm")" \
		    "$(sed 's/.*) //' "$t/stat" | awk '{print ($12 + $13) / 100}')"
	done | sort -k2 -n -r | head -3 |
	    awk -v n="$name" '{printf "relay_%s_thread_cpu_s %s %s s\n", n, $1, $2}'
done
echo "load_end $(cut -d' ' -f1-3 /proc/loadavg)"
