#!/usr/bin/env bash
# bench/interactive.sh: issue 17's figures for the interactive relay, on
# one machine (a coordinator and one real agent on 127.0.0.1, jobs in
# their own network namespaces: needs root). Prints "metric value unit":
#  - shell_to_prompt_p50/p90: `gpupool shell --gpus 1` on an idle pool,
#    from the command's start to the job's shell prompt (a pty);
#  - keystroke_rtt_*: one byte typed into `gpupool shell JOB` until its
#    echo comes back, against the same on a local pty (bash), p50/p99;
#    the difference is what the relay path (CLI, coordinator, agent) adds;
#  - forward_mb_s: one port-forward connection reading 1 GiB from a job;
#  - sessions_rss_kib_per_session: the coordinator's RSS growth per open
#    session with 200 `exec` sessions open into one job;
#  - dispatch_ms_p50 idle / with 200 sessions: submit to running of 20
#    jobs on a second node, by two clocks (see dispatch below), and the
#    CPU time and context switches of the coordinator and the agents
#    over 5 idle seconds with and without the sessions.
# Usage: BUILD=build bench/interactive.sh
# SECTIONS=3 (any of 1, 2, 3; default all): only those parts.
# SESSIONS=N (200): how many sessions; NJOBS=N (20): jobs dispatched.
# SAME_NODE=1: one agent, the dispatched jobs beside the sessions.
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN="${GPUPOOL_BIN:-$PWD/${BUILD:-build}/gpupool}"
export E2E_TMPDIR=/var/tmp
. tests/e2e/lib.sh

start_coordinator --streams-per-job 512 --streams-per-user 1024
start_agent alpha 2
wait_node_up alpha
if [ "${SAME_NODE:-0}" != 1 ]; then
	start_agent beta 1
	wait_node_up beta
fi
mk_token user bench
export GPUPOOL_TOKEN=$TOKEN

# 1. shell to prompt, and the keystroke round trip
case ${SECTIONS:-123} in *1*) ;; *) false ;; esac && $PY - "$GP" <<'PY'
import os, pty, select, sys, time, statistics, subprocess
gp = sys.argv[1]
def read_until(fd, needle, timeout=30):
    buf = b""
    end = time.monotonic() + timeout
    while needle not in buf:
        left = end - time.monotonic()
        if left <= 0:
            raise SystemExit("timeout waiting for %r in %r" % (needle, buf[-200:]))
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                d = os.read(fd, 65536)
            except OSError:
                raise SystemExit("eof: %r" % buf[-200:])
            if not d:
                raise SystemExit("eof: %r" % buf[-200:])
            buf += d
    return buf
def spawn(argv, env=None):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, env or os.environ)
    return pid, fd
env = dict(os.environ, PS1="$ ", TERM="dumb")
times = []
for i in range(15):
    t0 = time.monotonic()
    pid, fd = spawn([gp, "shell", "--gpus", "1"], env)
    read_until(fd, b"$ ")
    times.append((time.monotonic() - t0) * 1000)
    os.write(fd, b"exit\n")
    os.waitpid(pid, 0)
    os.close(fd)
times.sort()
print("shell_to_prompt_p50 %.1f ms" % statistics.median(times))
print("shell_to_prompt_p90 %.1f ms" % times[int(0.9 * len(times)) - 1])
print("shell_to_prompt_n %d runs" % len(times))

def rtt(argv, n=500):
    pid, fd = spawn(argv, env)
    read_until(fd, b"$ ")
    os.write(fd, b"cat\n")
    time.sleep(0.5)
    os.read(fd, 65536) if select.select([fd], [], [], 0.2)[0] else None
    out = []
    for i in range(n):
        c = bytes([97 + i % 26])
        t0 = time.perf_counter()
        os.write(fd, c)
        read_until(fd, c, 10)
        out.append((time.perf_counter() - t0) * 1000)
    os.write(fd, b"\x04")
    os.write(fd, b"exit\n")
    os.close(fd)
    try:
        os.kill(pid, 9)
    except OSError:
        pass
    os.waitpid(pid, 0)
    out.sort()
    return out
job = subprocess.run([gp, "submit", "--gpus", "1", "--", "sleep", "600"],
                     capture_output=True, text=True, check=True).stdout.strip()
while True:
    st = subprocess.run([gp, "show", job, "--json"], capture_output=True, text=True).stdout
    if '"running"' in st:
        break
    time.sleep(0.1)
local = rtt(["bash", "--norc", "-i"])
relay = rtt([gp, "shell", job])
p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))]
print("keystroke_rtt_local_p50 %.3f ms" % p(local, 0.5))
print("keystroke_rtt_local_p99 %.3f ms" % p(local, 0.99))
print("keystroke_rtt_relay_p50 %.3f ms" % p(relay, 0.5))
print("keystroke_rtt_relay_p99 %.3f ms" % p(relay, 0.99))
print("keystroke_rtt_added_p50 %.3f ms" % (p(relay, 0.5) - p(local, 0.5)))
print("keystroke_rtt_added_p99 %.3f ms" % (p(relay, 0.99) - p(local, 0.99)))
subprocess.run([gp, "cancel", job], capture_output=True)
PY

# 2. one forwarded stream's throughput
case ${SECTIONS:-123} in *2*) ;; *) false ;; esac && {
submit --gpus 1 -- python3 -c '
import socket, os
blob = os.urandom(1 << 20)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9001)); s.listen(4)
open("ready", "w").close()
while True:
    c, _ = s.accept()
    for i in range(1024):
        c.sendall(blob)
    c.close()'
fj=$JOB
wait_state "$fj" running
until [ -e "$T/agents/alpha/jobs/$fj-1/ready" ] || [ -e "$T/agents/beta/jobs/$fj-1/ready" ]; do sleep 0.1; done
lp=$(free_port)
spawn "$T/fwd.log" "$GP" port-forward "$fj" "$lp:9001"
until grep -q Forwarding "$T/fwd.log"; do sleep 0.1; done
$PY - "$lp" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
n, t0 = 0, time.monotonic()
while True:
    d = s.recv(1 << 20)
    if not d:
        break
    n += len(d)
dt = time.monotonic() - t0
print("forward_bytes %d bytes" % n)
print("forward_mb_s %.1f MB/s" % (n / dt / 1e6))
PY
cli cancel "$fj"
}

case ${SECTIONS:-123} in *3*) ;; *) exit 0 ;; esac
# 3. 200 sessions: the coordinator's memory, and dispatch latency
if [ "${SAME_NODE:-0}" = 1 ]; then
	submit --gpus 1 -- sleep 600
else
	submit --gpus 2 -- sleep 600
fi
sj=$JOB
wait_state "$sj" running
sj_node=$(job_get "$sj" 'd.get("node")')
# CPU seconds (user+system, all threads) and context switches of a process.
cpu_of() { # PID: "ticks switches"
	local t=0 c=0 f
	[ -n "$1" ] && [ -d "/proc/$1" ] || { echo "0 0"; return; }
	t=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0)
	for f in /proc/"$1"/task/*/status; do
		c=$((c + $(awk '/ctxt_switches/ {s += $2} END {print s + 0}' "$f" 2>/dev/null || echo 0)))
	done
	echo "$t $c"
}
quiet_window() { # LABEL: what the coordinator and the agents do, 5 s idle
	local a0 b0 c0 a1 b1 c1
	a0=$(cpu_of "${AGENT_PID[alpha]}") b0=$(cpu_of "${AGENT_PID[beta]:-}")
	c0=$(cpu_of "$COORD_PID")
	sleep 5
	a1=$(cpu_of "${AGENT_PID[alpha]}") b1=$(cpu_of "${AGENT_PID[beta]:-}")
	c1=$(cpu_of "$COORD_PID")
	set -- $a0 $a1 $b0 $b1 $c0 $c1
	echo "idle_5s_$LABEL agent_alpha_cpu_ms $((($3 - $1) * 10)) switches $(($4 - $2)) agent_beta_cpu_ms $((($7 - $5) * 10)) switches $(($8 - $6)) coordinator_cpu_ms $(((${11} - $9) * 10)) switches $((${12} - ${10}))"
}
# Dispatch of NJOBS (20) jobs, one at a time, on the node that is not the
# sessions' (beta: the sessions' job takes both of alpha's GPUs;
# SAME_NODE=1: no beta, the jobs run beside the sessions). Two clocks:
#  - harness: from `gpupool submit`'s start until a `GET /v1/jobs/J`
#    (curl and a python3 JSON parse, every 5 ms) says running: the
#    figure's first definition, mostly process start-up of the tools;
#  - started: the coordinator's own records, submitted_at (the
#    submission committed) to started_at (the agent's report that the
#    job's process runs): scheduling, the poll's wake, the agent
#    starting the job (its sandbox, its network) and its report.
# Prints "harness_p50 started_p50 started_p90 nodes".
dispatch() {
	local i t0 j ms=() st=() where=""
	for i in $(seq "${NJOBS:-20}"); do
		t0=$(date +%s%N)
		submit --gpus 1 -- true
		j=$JOB
		while :; do
			case $(job_state "$j") in running | succeeded) break ;; esac
			sleep 0.005
		done
		ms+=($((($(date +%s%N) - t0) / 1000000)))
		wait_final "$j"
		api "$ADMIN_TOKEN" GET "/v1/jobs/$j"
		st+=($(printf '%s' "$API_BODY" | $PY -c '
import json, sys, datetime
d = json.load(sys.stdin)
f = lambda s: datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
print(round((f(d["started_at"]) - f(d["submitted_at"])).total_seconds() * 1000))'))
		where="$where$(job_get "$j" 'd.get("node")' | cut -c1)"
	done
	echo "$(printf '%s\n' "${ms[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') $(printf '%s\n' "${st[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[int(NR*0.9)]}') $where"
	echo "raw harness ${ms[*]} started ${st[*]}" >&2
}
# What one look of the harness costs by itself (curl and python3 start).
look=()
for i in $(seq 10); do
	t0=$(date +%s%N)
	job_state "$sj" >/dev/null
	look+=($((($(date +%s%N) - t0) / 1000000)))
done
echo "harness_one_state_look_ms_p50 $(printf '%s\n' "${look[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ms"
LABEL=0_sessions quiet_window
d_idle=$(dispatch)
rss0=$(awk '/^VmRSS:/ {print $2}' /proc/$COORD_PID/status)
arss0=$(awk '/^VmRSS:/ {print $2}' /proc/${AGENT_PID[alpha]}/status)
for i in $(seq "${SESSIONS:-200}"); do
	"$GP" exec "$sj" -- sleep 300 </dev/null >/dev/null 2>&1 &
	STARTED_PIDS+=("$!")
done
deadline=$((SECONDS + 300))
until [ "$(job_get "$sj" 'd.get("sessions", 0)')" = "${SESSIONS:-200}" ]; do
	[ $SECONDS -ge $deadline ] && { echo "only $(job_get "$sj" 'd.get("sessions", 0)') sessions" >&2; break; }
	sleep 0.2
done
t_coord=$(date +%s%N)
# The agent has the streams when its log says each one started: until
# then it is still forking nsenter for the last ones (the first version
# of this bench dispatched from the coordinator's count on).
until [ "$(grep -c 'stream started' "$T/agent-alpha.log")" -ge "${SESSIONS:-200}" ]; do
	[ $SECONDS -ge $deadline ] && break
	sleep 0.05
done
echo "sessions_agent_lag_ms $((($(date +%s%N) - t_coord) / 1000000)) ms (the coordinator counts them all, then the agent has started them all)"
rss1=$(awk '/^VmRSS:/ {print $2}' /proc/$COORD_PID/status)
arss1=$(awk '/^VmRSS:/ {print $2}' /proc/${AGENT_PID[alpha]}/status)
nopen=$(job_get "$sj" 'd.get("sessions", 0)')
echo "sessions_open $nopen sessions (on $sj_node)"
echo "sessions_rss_kib_per_session $(( (rss1 - rss0) / (nopen > 0 ? nopen : 1) )) KiB"
echo "agent_rss_kib_per_session $(( (arss1 - arss0) / (nopen > 0 ? nopen : 1) )) KiB"
echo "agent_threads $(ls /proc/${AGENT_PID[alpha]}/task | wc -l)"
LABEL=${SESSIONS:-200}_sessions quiet_window
d_busy=$(dispatch)
# Then without them again: the order (idle first) is not the cause.
kill "${STARTED_PIDS[@]: -${SESSIONS:-200}}" 2>/dev/null
deadline=$((SECONDS + 60))
until [ "$(job_get "$sj" 'd.get("sessions", 0)')" = 0 ]; do
	[ $SECONDS -ge $deadline ] && break
	sleep 0.2
done
d_after=$(dispatch)
echo "dispatch_ms_p50_idle $d_idle (harness p50, started p50 p90, nodes)"
echo "dispatch_ms_p50_200_sessions $d_busy (harness p50, started p50 p90, nodes)"
echo "dispatch_ms_p50_idle_after $d_after (harness p50, started p50 p90, nodes)"
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
