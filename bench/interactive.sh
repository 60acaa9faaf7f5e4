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
#    jobs on a second node.
# Usage: BUILD=build bench/interactive.sh
set -u
cd "$(dirname "$0")/.."
export GPUPOOL_BIN="$PWD/${BUILD:-build}/gpupool"
export E2E_TMPDIR=/var/tmp
. tests/e2e/lib.sh

start_coordinator --streams-per-job 512 --streams-per-user 1024
start_agent alpha 2
start_agent beta 1
wait_node_up alpha
wait_node_up beta
mk_token user bench
export GPUPOOL_TOKEN=$TOKEN

# 1. shell to prompt, and the keystroke round trip
$PY - "$GP" <<'PY'
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

# 3. 200 sessions: the coordinator's memory, and dispatch latency
submit --gpus 1 -- sleep 600
sj=$JOB
wait_state "$sj" running
dispatch() { # prints submit-to-running ms of 20 jobs on beta, p50
	local i t0 j ms=()
	for i in $(seq 20); do
		t0=$(date +%s%N)
		submit --gpus 1 -- true
		j=$JOB
		while :; do
			case $(job_state "$j") in running | succeeded) break ;; esac
			sleep 0.005
		done
		ms+=($(( ($(date +%s%N) - t0) / 1000000 )))
		wait_final "$j"
	done
	printf '%s\n' "${ms[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
d_idle=$(dispatch)
rss0=$(awk '/^VmRSS:/ {print $2}' /proc/$COORD_PID/status)
for i in $(seq 200); do
	"$GP" exec "$sj" -- sleep 300 </dev/null >/dev/null 2>&1 &
	STARTED_PIDS+=("$!")
done
deadline=$((SECONDS + 120))
until [ "$(job_get "$sj" 'd.get("sessions", 0)')" = 200 ]; do
	[ $SECONDS -ge $deadline ] && { echo "only $(job_get "$sj" 'd.get("sessions", 0)') sessions" >&2; break; }
	sleep 0.5
done
rss1=$(awk '/^VmRSS:/ {print $2}' /proc/$COORD_PID/status)
echo "sessions_open $(job_get "$sj" 'd.get("sessions", 0)') sessions"
echo "sessions_rss_kib_per_session $(( (rss1 - rss0) / 200 )) KiB"
d_busy=$(dispatch)
echo "dispatch_ms_p50_idle $d_idle ms"
echo "dispatch_ms_p50_200_sessions $d_busy ms"
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
