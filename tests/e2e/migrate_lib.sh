# tests/e2e/migrate_lib.sh: what the migration scenarios share (sourced after
# lib.sh). Each scenario runs the step-counting job of
# examples/checkpoint/steps.sh, which saves its counter every SAVE_EVERY steps
# and on the checkpoint signal; the agent uploads each new version (at most
# every second here); something makes the job leave its provider; the test
# then checks that the job finished with the right result and lost at most
# the steps since its last uploaded checkpoint:
#
#   - every attempt after the first resumed at exactly the step of the latest
#     version uploaded before it started (its COMPLETE label, "step=N"), as
#     the coordinator lists it: never an older version, never from scratch;
#   - graceful departures lost nothing: the next attempt resumed at the step
#     where the signalled attempt saved and stopped;
#   - every departure the test announced with `depart` lost at most the steps
#     since the last uploaded checkpoint: steps redone (how far the old
#     attempt got, minus the step the next attempt resumed from) <= the bound
#     (how far the old attempt got, minus the step of the latest version
#     uploaded when it was made to leave). How far an attempt got is read
#     from the job's progress file (steps.sh STEPS_PROGRESS), through a hard
#     link made at the departure: it survives the attempt's kill and its work
#     directory's removal;
#   - the job succeeded with "done steps=TOTAL" and never had two live
#     attempts (counted by a marker in its script's file name).

STEPS_SRC="$(dirname "$0")/../../examples/checkpoint/steps.sh"
[ -r "$STEPS_SRC" ] || fail "no $STEPS_SRC"
# Its text without comments (under the 4096 bytes of one argument): a plain
# job sees none of this machine's files but the system's, so the script
# goes with the job (sh -c TEXT NAME ARGS...).
STEPS_TEXT=$(grep -v '^[[:space:]]*#' "$STEPS_SRC")
# Every version is kept, so that finish_and_check knows which one was the
# latest at each departure (start_coordinator without arguments uses these).
COORD_EXTRA_ARGS=(--checkpoint-keep 1000)

# policy_file NAME TEXT: writes $T/NAME.policy.
policy_file() {
	printf '%s\n' "$2" >"$T/$1.policy.tmp" && mv "$T/$1.policy.tmp" "$T/$1.policy"
}

# start_provider NAME NGPUS [agent flags]: an agent with a control socket and
# a policy file (a short checkpoint grace unless the test wrote one).
start_provider() {
	local name=$1 gpus=$2
	shift 2
	[ -f "$T/$name.policy" ] || policy_file "$name" "checkpoint-grace = 5s"
	start_agent "$name" "$gpus" --policy "$T/$name.policy" \
	    --control "$T/$name.sock" "$@"
}

# provider NAME ARGS...: `gpupool provider ARGS` on NAME's socket (CLI_*).
provider() {
	local name=$1
	shift
	GPUPOOL_AGENT_SOCKET="$T/$name.sock" cli provider "$@"
}

# submit_steps TOTAL SAVE_EVERY [STEP_S [NAME=VALUE...]]: the step job, with
# a marker in its script's name so its processes can be counted, writing its
# progress (STEPS_PROGRESS) and with the extra environment given (e.g.
# STEPS_SAVE_DELAY=2); sets JOB and STEP_MARK.
submit_steps() {
	local total=$1 save=$2 step_s=${3:-0.1} envs=() e
	shift 2
	[ $# -gt 0 ] && shift
	for e in "$@"; do envs+=(--env "$e"); done
	new_marker
	STEP_MARK=$MARK
	# The script goes with the job (a plain job sees none of this
	# machine's files but the system's); $0 carries the marker.
	submit --gpus 1 --checkpoint-every 1s --name steps \
	    --env STEPS_PROGRESS=progress "${envs[@]+"${envs[@]}"}" -- /bin/sh \
	    -c "$STEPS_TEXT" "steps-$STEP_MARK.sh" "$total" "$save" \
	    "$step_s"
}

# depart JOB [soft]: call right before making the job's running attempt
# leave (reclaim, kill, cut ...). Records the moment (the bound counts the
# versions the coordinator committed before it) and a hard link to the
# attempt's progress file ($T/depart-JOB-ATTEMPT.progress: how far it got,
# read once it has stopped), for finish_and_check's work-lost check. Sets
# DEPART_ATTEMPT and DEPART_NODE. Fails the test when the job is not
# running or has no progress file yet; with "soft", returns 1 instead.
declare -A DEPARTS=()
depart() {
	local job=$1 s f why=
	s=$(job_get "$job" '"%s %s %s" % (d["state"], d["node"], d["attempts"])')
	case $s in
	"running "*)
		s=${s#running }
		DEPART_NODE=${s% *}
		DEPART_ATTEMPT=${s#* }
		f="$T/agents/$DEPART_NODE/jobs/$job-$DEPART_ATTEMPT/progress"
		if [ ! -f "$f" ]; then
			why="job $job attempt $DEPART_ATTEMPT has no progress file $f yet"
		elif ! ln -f "$f" "$T/depart-$job-$DEPART_ATTEMPT.progress"; then
			why="cannot link $f"
		fi ;;
	*) why="job $job is not running ($s)" ;;
	esac
	if [ -n "$why" ]; then
		[ "${2:-}" = soft ] && { log "depart: $why"; return 1; }
		fail "depart: $why"
	fi
	DEPARTS[$job]+=" $DEPART_ATTEMPT:$(date +%s%3N)"
}

# live_copies: live copies of the step job now: processes running its
# script whose parent does not (a shell's forked child, about to exec its
# `sleep`, shows the same command line for a moment and is not a copy).
live_copies() {
	E2E_MARK="steps-${STEP_MARK:-none}.sh" "$PY" - <<'PYEOF'
import os
mark = os.environ["E2E_MARK"]
match, parent = set(), {}
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        with open("/proc/%s/cmdline" % p, "rb") as f:
            cmd = f.read()
        with open("/proc/%s/stat" % p, "rb") as f:
            st = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        continue
    if st[0] in (b"Z", b"X"):
        continue
    parent[p] = st[1].decode()
    if mark.encode() in cmd:
        match.add(p)
print(sum(1 for p in match if parent.get(p) not in match))
PYEOF
}

check_single() { # WHEN
	local n
	n=$(live_copies)
	[ "$n" -le 1 ] || fail "$n live copies of job $JOB ($1)"
}

# ckpt_version JOB: the newest version the coordinator holds (0: none).
ckpt_version() {
	api "$ADMIN_TOKEN" GET "/v1/jobs/$1/checkpoints"
	[ "$API_STATUS" = 200 ] || { echo 0; return; }
	printf '%s' "$API_BODY" | json 'max([v["version"] for v in d["checkpoints"]] + [0])'
}

# wait_ckpt JOB MIN_VERSION: until a version >= MIN is committed, checking
# that the job never runs twice meanwhile.
wait_ckpt() {
	local deadline=$((SECONDS + WAIT_S)) v
	while :; do
		v=$(ckpt_version "$1")
		[ "$v" -ge "$2" ] 2>/dev/null && return 0
		check_single "waiting for checkpoint $2"
		[ $SECONDS -ge $deadline ] && fail "job $1: no checkpoint version $2 after ${WAIT_S}s (have $v): $(job_get "$1" d)"
		sleep 0.1
	done
}

# wait_moved JOB NODE [ATTEMPT]: until the job runs on NODE (as attempt
# ATTEMPT or later), never twice at once meanwhile.
wait_moved() {
	local job=$1 node=$2 min=${3:-2} deadline=$((SECONDS + WAIT_S)) s
	while :; do
		check_single "waiting for job $job to run on $node"
		s=$(job_get "$job" '"%s %s %s" % (d["state"], d["node"], d["attempts"])')
		case $s in
		"running $node "*)
			[ "${s##* }" -ge "$min" ] && return 0 ;;
		succeeded* | failed* | cancelled* | timeout*)
			fail "job $job ended ($s) instead of moving to $node" ;;
		esac
		[ $SECONDS -ge $deadline ] && fail "job $job not running on $node after ${WAIT_S}s ($s)"
		sleep 0.1
	done
}

# finish_and_check JOB TOTAL [GRACEFUL_ATTEMPTS...]: waits for the job, then
# checks the result and the resume chain. Each GRACEFUL attempt number must
# have lost nothing; each attempt announced with `depart` at most the steps
# since its last uploaded checkpoint. Writes $T/lost-JOB.json: per departed
# attempt, {"attempt", "got" (how far it got), "resumed" (where the next
# one started), "redone", "bound"}.
finish_and_check() {
	local job=$1 total=$2 deadline=$((SECONDS + WAIT_S * 2)) s
	shift 2
	while :; do
		check_single "until the job finishes"
		s=$(job_state "$job")
		[ "$s" = succeeded ] && break
		case $s in failed | cancelled | timeout)
			fail "job $job ended $s: $(job_get "$job" d)" ;; esac
		[ $SECONDS -ge $deadline ] && fail "job $job not done after $((WAIT_S * 2))s (state $s)"
		sleep 0.2
	done
	job_log "$job"
	assert_contains "$LOG" "done steps=$total" "log of job $job"
	api "$ADMIN_TOKEN" GET "/v1/jobs/$job/checkpoints"
	printf '%s' "$API_BODY" >"$T/versions.json"
	job_get "$job" d >"$T/job.json"
	printf '%s' "$LOG" >"$T/job.log"
	E2E_GRACEFUL="$*" E2E_DEPARTS="${DEPARTS[$job]:-}" E2E_T="$T" E2E_JOB=$job \
	    "$PY" - "$T/job.json" "$T/versions.json" "$T/job.log" <<'EOF' || fail "resume chain or work lost of job $job (see above)"
import json, os, re, sys
job = json.load(open(sys.argv[1]))
versions = {v["version"]: v for v in json.load(open(sys.argv[2]))["checkpoints"]}
log = open(sys.argv[3]).read()
graceful = [int(a) for a in os.environ["E2E_GRACEFUL"].split()]
hist = job["history"]
# The log holds the attempts one after another; split at "attempt=".
parts = re.split(r"(?m)^attempt=(\d+) ", log)
starts, stops = {}, {}
for i in range(1, len(parts), 2):
    a, text = int(parts[i]), parts[i + 1]
    m = re.search(r"(?m)^resumed at step (\d+)", text)
    starts[a] = int(m.group(1)) if m else 0
    m = re.search(r"(?m)^checkpoint signal at step (\d+)", text)
    if m:
        stops[a] = int(m.group(1))
errors = []
best = (0, 0)  # (version, step) uploaded so far
for h in hist:
    a = h["attempt"]
    if a not in starts:
        errors.append("attempt %d never printed its start" % a)
        continue
    if a > 1:
        if h.get("restored_version", 0) != best[0]:
            errors.append("attempt %d restored version %s, the latest was %d" % (a, h.get("restored_version"), best[0]))
        if starts[a] != best[1]:
            errors.append("attempt %d resumed at step %d, the latest upload was step %d" % (a, starts[a], best[1]))
    ck = h.get("checkpoint")
    if ck:
        m = re.match(r"step=(\d+)", ck["label"])
        if not m:
            errors.append("attempt %d: label %r" % (a, ck["label"]))
        elif ck["version"] > best[0]:
            best = (ck["version"], int(m.group(1)))
    if a in graceful:
        if a not in stops:
            errors.append("attempt %d was to stop gracefully, its log shows no checkpoint signal" % a)
        elif best[1] != stops[a]:
            errors.append("attempt %d saved step %d on the signal, but the next resumes at %d" % (a, stops[a], best[1]))
for e in errors:
    print("resume chain:", e, file=sys.stderr)
# Work lost by each announced departure (see depart).
import datetime
def ms(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000
t, jid = os.environ["E2E_T"], os.environ["E2E_JOB"]
lost, lost_errors = [], []
for rec in os.environ["E2E_DEPARTS"].split():
    a, when = int(rec.split(":")[0]), int(rec.split(":")[1])
    got = int(open("%s/depart-%s-%d.progress" % (t, jid, a)).read().strip() or "-1")
    # the step of the latest version committed before the departure
    ups = [0] + [int(re.match(r"step=(\d+)", v["label"]).group(1))
                 for v in versions.values()
                 if ms(v["created_at"]) <= when and re.match(r"step=\d+", v["label"])]
    if got < 0 or a + 1 not in starts:
        lost_errors.append("attempt %d: progress %d, next attempt started: %s" % (a, got, a + 1 in starts))
        continue
    rec = {"attempt": a, "got": got, "resumed": starts[a + 1],
           "redone": got - starts[a + 1], "bound": got - max(ups)}
    lost.append(rec)
    if rec["redone"] > rec["bound"]:
        lost_errors.append("attempt %d redid %d steps, more than the %d since its last uploaded checkpoint (got to %d, resumed at %d)" % (a, rec["redone"], rec["bound"], got, starts[a + 1]))
    if a in graceful and rec["redone"] != 0:
        lost_errors.append("attempt %d left gracefully but %d steps were redone" % (a, rec["redone"]))
    print("work lost: attempt %d got to step %d, the next resumed at %d: %d redone, bound %d" % (a, got, starts[a + 1], rec["redone"], rec["bound"]), file=sys.stderr)
for e in lost_errors:
    print("work lost:", e, file=sys.stderr)
json.dump(lost, open("%s/lost-%s.json" % (t, jid), "w"))
print(json.dumps({"attempts": len(hist), "starts": starts, "stops": stops,
    "reasons": [h.get("reason") for h in hist]}), file=sys.stderr)
sys.exit(1 if errors or lost_errors else 0)
EOF
}

# history_reason JOB ATTEMPT: why that attempt ended.
history_reason() {
	job_get "$1" "[h.get('reason') for h in d['history'] if h['attempt'] == $2][0]"
}
