# Defence in depth for an agent that is not root (docs/interactive.md
# "Where the process runs"): its jobs run under the agent's own uid, in a
# user namespace of their own, so the kernel's same-uid rule alone would
# let a job ptrace its agent (and read its memory and environment: the
# agent's token). From inside a job, a probe tries every process it can
# see: ptrace(PTRACE_ATTACH), process_vm_readv, /proc/PID/environ and
# /proc/PID/mem. It must reach only its own job's processes: never the
# agent (whose environment holds GPUPOOL_TOKEN) nor another job's (their
# environment carries another marker). Then the agent must still attach
# (exec into the job), which needs the agent to enter the job. A process
# of the agent's uid outside the namespaces (the host's) does not reach
# the agent either: the agent is not dumpable.
. "$(dirname "$0")/lib.sh"
require root python3 unshare
command -v setpriv >/dev/null || fail "util-linux's setpriv is missing"
if ! setpriv --reuid=nobody --regid=nogroup --clear-groups \
    unshare --user --map-current-user --net true 2>/dev/null; then
	skip unshare "an unprivileged user may not make a user namespace here"
fi

start_coordinator
mk_token provider prov-u1
U1_TOKEN=$TOKEN
UW=$T/nb
chmod 711 "$T" && mkdir -m 755 "$UW"
mkdir "$UW/u1" && chown nobody "$UW/u1"
spawn "$T/agent-u1.log" env GPUPOOL_TOKEN="$U1_TOKEN" HOME="$UW/u1" \
    AGENT_SECRET_MARK=agent-secret-e2e \
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
    "$GP" agent --coordinator "$(coord_url)" --name u1 \
    --work "$UW/u1/work" --fake-gpus 2 --runtime none -v
AGENT=$SPAWNED_PID
wait_node_up u1
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

# Another job (of the same user, on the same agent): its marker.
submit --gpus 1 -e MARK=other-job -- sh -c "$(gated_job_cmd)"
other=$JOB
wait_state "$other" running

read -r -d '' PROBE <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc.process_vm_readv.restype = ctypes.c_ssize_t
libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(iovec),
    ctypes.c_ulong, ctypes.POINTER(iovec), ctypes.c_ulong, ctypes.c_ulong]
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p,
    ctypes.c_void_p]
me = os.getpid()
seen = 0
pids = os.environ.get("PROBE_PIDS", "")
for name in pids.split() if pids else os.listdir("/proc"):
    if not name.isdigit() or int(name) == me:
        continue
    pid = int(name)
    seen += 1
    got = []
    env = b""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read()
        got.append("environ")
    except OSError:
        pass
    if b"MARK=this-job" in env:
        continue  # this job's own process: nothing to prove
    try:
        with open("/proc/%d/mem" % pid, "rb") as f:
            f.read(1)
        got.append("mem")
    except OSError as e:
        if e.errno == 5:  # EIO: opened (address 0 unmapped)
            got.append("mem-open")
    addr = 0
    try:
        with open("/proc/%d/maps" % pid) as f:
            addr = int(f.readline().split("-")[0], 16)
        got.append("maps")
    except (OSError, ValueError, IndexError):
        pass
    if addr:
        buf = ctypes.create_string_buffer(8)
        local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
        remote = iovec(ctypes.c_void_p(addr), 8)
        if libc.process_vm_readv(pid, ctypes.byref(local), 1,
                ctypes.byref(remote), 1, 0) > 0:
            got.append("process_vm_readv")
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
        got.append("ptrace")
        os.waitpid(pid, 0)
        libc.ptrace(PTRACE_DETACH, pid, None, None)
    what = "agent" if b"AGENT_SECRET_MARK" in env else \
        "other-job" if b"MARK=other-job" in env else "unknown"
    if got:
        print("REACHED pid=%d (%s): %s" % (pid, what, ",".join(got)))
print("probed %d processes" % seen)
PY
# The probe runs as the job's command, and again through exec (an
# attach: the process the agent put into the job).
submit --gpus 1 -e MARK=this-job -- sh -c 'python3 -c "$0" >probe.out 2>&1; '"$(gated_job_cmd)" "$PROBE"
j=$JOB
wait_state "$j" running
probe_out="$UW/u1/work/jobs/$j-1/probe.out"
deadline=$((SECONDS + WAIT_S))
until grep -q '^probed ' "$probe_out" 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "the probe never finished: $(cat "$probe_out" 2>&1)"
	sleep 0.1
done
cat "$probe_out" >&2
grep -q '^REACHED' "$probe_out" &&
    fail "a job reached processes outside it: $(grep '^REACHED' "$probe_out")"

# exec (the agent attaches into the job) still works; the probe from
# there too
deadline=$((SECONDS + WAIT_S))
while :; do
	cli exec "$j" -- python3 -c "$PROBE"
	[ "$CLI_RC" = 0 ] && break
	[ $SECONDS -ge $deadline ] && fail "exec into the job: rc $CLI_RC out '$CLI_OUT' err '$CLI_ERR'"
	sleep 0.2
done
printf '%s\n' "$CLI_OUT" >&2
assert_contains "$CLI_OUT" "probed" "the probe through exec"
assert_not_contains "$CLI_OUT" "REACHED" "a process exec put into the job"

# Outside any namespace, a process of the agent's uid (nobody) does not
# reach the agent either: it is not dumpable (PR_SET_DUMPABLE 0).
assert_eq gpupool "$(cat "/proc/$AGENT/comm")" "the agent's pid"
out=$(PROBE_PIDS=$AGENT setpriv --reuid=nobody --regid=nogroup --clear-groups \
    $PY -c "$PROBE" 2>&1)
printf '%s\n' "$out" >&2
assert_contains "$out" "probed 1 processes" "the probe of the agent"
assert_not_contains "$out" "REACHED" "the agent from its own uid"

touch "$UW/u1/work/jobs/$j-1/go" "$UW/u1/work/jobs/$other-1/go" 2>/dev/null
wait_final "$j"
wait_final "$other"
echo "ok $TEST_NAME"
