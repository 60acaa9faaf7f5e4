#!/usr/bin/env bash
# test_contain_init_memory.sh: a job cannot read its provider's token from
# the sandbox's init (issue 15, hostile review). Init, pid 1 of a plain
# job, is a copy of the agent: its /proc/1/cmdline (world-readable) was
# the agent's, "--token gpt_..." included, and, where the agent is not
# root and the job runs as the agent's user, /proc/1/environ and
# /proc/1/mem were the agent's environment and memory. Two agents: one as
# root given --token on its command line, one as nobody given the token
# in $GPUPOOL_TOKEN (skipped where it cannot run as nobody here); a job on
# each reads init's cmdline, environ and every readable region of its
# memory, and must find no provider token. (The first fails on the code
# before the fix, the token read from /proc/1/cmdline; the second passed
# there too on this kernel: init's capabilities in its user namespace
# already refused environ and mem to the job. It guards the fix that
# does not rest on them, PR_SET_DUMPABLE 0.)
. "$(dirname "$0")/lib.sh"

require root

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token provider prov-r1
R1_TOKEN=$TOKEN
spawn "$T/agent-r1.log" "$GP" agent --coordinator "$(coord_url)" \
	--token "$R1_TOKEN" --name r1 --work "$T/agents/r1" --fake-gpus 1 \
	--run-as nobody --runtime none -v
AGENT_PID[r1]=$SPAWNED_PID
wait_node_up r1

# shellcheck disable=SC2016 # expanded by the job's shell and python
PROBE='python3 - <<"EOF"
import re
pat = re.compile(rb"gpt_[A-Za-z0-9_-]{20,}")
found = []
for what in ("cmdline", "environ"):
    try:
        found += [(what, m) for m in pat.findall(open("/proc/1/" + what, "rb").read())]
    except OSError as e:
        print("no", what, e.strerror)
try:
    mem = open("/proc/1/mem", "rb")
    regions = 0
    for line in open("/proc/1/maps"):
        addr, perms = line.split()[:2]
        if perms[0] != "r":
            continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        try:
            mem.seek(lo)
            data = mem.read(min(hi - lo, 1 << 26))
        except OSError:
            continue
        regions += 1
        found += [("mem", m) for m in pat.findall(data)]
    print("mem regions read", regions)
except OSError as e:
    print("no mem", e.strerror)
for what, m in found:
    print("FOUND", what, m.decode())
print("probed")
EOF'
export GPUPOOL_TOKEN=$ALICE
check() { # AGENT TOKEN
	submit --gpus 1 -- sh -c "$PROBE"
	wait_final "$JOB"
	job_log "$JOB"
	log "a job on $1 saw: $LOG"
	assert_eq succeeded "$FINAL_STATE" "the probing job on $1 ($(job_get "$JOB" 'd["message"] or ""'))"
	assert_contains "$LOG" probed "the probe on $1 ran to its end"
	assert_not_contains "$LOG" "$2" "$1's provider token, read by its job"
	assert_not_contains "$LOG" FOUND "a token, read by a job on $1"
}
check r1 "$R1_TOKEN"
kill9_agent r1
wait_node_state r1 down
# The agent as nobody: its directory where nobody reaches it.
U1_TOKEN=
if command -v setpriv >/dev/null; then
	mk_token provider prov-u1
	U1_TOKEN=$TOKEN
	UW=$T/nb
	chmod 711 "$T" && mkdir -m 755 "$UW"
	mkdir "$UW/u1" && chown nobody "$UW/u1"
	spawn "$T/agent-u1.log" env GPUPOOL_TOKEN="$U1_TOKEN" HOME="$UW/u1" \
		setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$GP" agent --coordinator "$(coord_url)" --name u1 \
		--work "$UW/u1/work" --fake-gpus 1 --runtime none -v
	AGENT_PID[u1]=$SPAWNED_PID
fi

if [ -n "$U1_TOKEN" ] && wait_node_state u1 up 30 2>/dev/null; then
	check u1 "$U1_TOKEN"
	echo "ok: no token in init's cmdline, environ or memory (agent as root, agent as nobody)"
else
	echo "ok: no token in init's cmdline, environ or memory (agent as root; as nobody: not here: $(tail -3 "$T/agent-u1.log" 2>/dev/null))"
fi
