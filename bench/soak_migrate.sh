#!/usr/bin/env bash
# bench/soak_migrate.sh: a bounded soak run of job migration (issue 3).
#
# A coordinator and 6 providers (1 fake GPU each, checkpoint-grace = 5s,
# owner presence simulated with --fake-gpu-procs) run step jobs
# (examples/checkpoint/steps.sh): SOAK_JOBS ordinary ones, one that takes
# SOAK_SAVE_DELAY seconds to save on the checkpoint signal (a big model) and
# one that ignores the signal (killed at the grace's end). The soak makes
# SOAK_D departures, each time from a provider that runs a job, with the
# kind taken in rotation:
#   reclaim of the slow-saving job | reclaim of the signal-ignoring job |
#   reclaim (graceful) | reclaim --now | owner presence | kill -9 agent |
#   SIGTERM agent (agent_stopped) | provider leave
# (the first two on those jobs, the others on ordinary ones; those two
# first, while their one job each is young: later in the round it is
# often too near its end to be picked, and the soak waits until it has
# ended and its replacement has run a while) and waits
# (bounded) until the moved job runs again, then brings the provider back.
# A job that finishes is checked (finish_and_check: result, resume chain,
# graceful attempts lost nothing, every departure redid at most the steps
# since its last uploaded checkpoint) and replaced while departures remain.
# At the end every job is let run to completion and checked.
#
# Work lost, per departure: the steps redone (how far the old attempt got,
# read from its progress file, minus the step the next attempt resumed
# from) and the bound (how far it got minus the step of the latest version
# committed before the departure). A departure is a successful migration
# when its job ran again and its job checked (which includes redone <=
# bound for each of its departures).
#
# Prints: departures by kind, migration success %, reclaim -> GPU free
# p50/p99 (reclaims; from the CLI's "free after X s": the job's exit), requeue
# -> running p50/p99 (history: attempt k finished_at -> attempt k+1
# started_at), steps redone p50/max and the bound p50/max, departures over
# the bound, lost_s p50/max (the coordinator's history figure), and the whole
# run's wall time.
#
# Usage: [SOAK_D=100] [SOAK_TOTAL=1000] [SOAK_STEP_S=0.05] bench/soak_migrate.sh
# (builds nothing: needs build/gpupool; BUILD=dir to use another build).
# Every wait is bounded (E2E_WAIT_S, default 60 here).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export GPUPOOL_BIN=${GPUPOOL_BIN:-$PWD/$BUILD/gpupool} GPUPOOL_BUILD=${GPUPOOL_BUILD:-$PWD/$BUILD}
export E2E_WAIT_S=${E2E_WAIT_S:-60}
SOAK_D=${SOAK_D:-100}
SOAK_TOTAL=${SOAK_TOTAL:-1000}
SOAK_STEP_S=${SOAK_STEP_S:-0.05}
SOAK_SAVE=${SOAK_SAVE:-5}
SOAK_JOBS=${SOAK_JOBS:-3}
SOAK_SAVE_DELAY=${SOAK_SAVE_DELAY:-2}
# steps a job needs left to be picked: the grace period (5 s) and 3 s more
SOAK_MARGIN=$(awk -v s="$SOAK_STEP_S" 'BEGIN { print int(8 / s) + 1 }')
# lib.sh names the temp dir after $0; keep the soak's own name
. "$PWD/tests/e2e/lib.sh"
# migrate_lib.sh finds steps.sh relative to $0's directory: point it here
. <(sed 's|^STEPS_SRC=.*|STEPS_SRC="$PWD/examples/checkpoint/steps.sh"|' "$PWD/tests/e2e/migrate_lib.sh")

T0=$SECONDS
NODES=(p1 p2 p3 p4 p5 p6)
KINDS=(reclaim_slow reclaim_ignore reclaim reclaim_now presence kill9 sigterm leave)
declare -A JOB_MARK=() JOB_GRACEFUL=() JOB_DEPS=() JOB_OK=() JOB_TYPE=()
ACTIVE=()	# job ids not yet checked
ALLJOBS=()
DEPS=()		# "kind job attempt node moved(0/1) free_s"

boot() { # NAME
	start_provider "$1" 1 --fake-gpu-procs "$T/$1.procs"
}

# new_job [TYPE]: ordinary (default), slow (saves in SOAK_SAVE_DELAY s) or
# ignore (ignores the checkpoint signal).
new_job() {
	local type=${1:-ordinary} env=()
	case $type in
	slow) env=("STEPS_SAVE_DELAY=$SOAK_SAVE_DELAY") ;;
	ignore) env=(STEPS_IGNORE_SIGNAL=1) ;;
	esac
	env+=(STEPS_HOLD=hold) # see hold_attempt
	submit_steps "$SOAK_TOTAL" "$SOAK_SAVE" "$SOAK_STEP_S" "${env[@]+"${env[@]}"}"
	JOB_TYPE[$JOB]=$type
	JOB_MARK[$JOB]=$STEP_MARK
	JOB_GRACEFUL[$JOB]=
	JOB_DEPS[$JOB]=
	ACTIVE+=("$JOB")
	ALLJOBS+=("$JOB")
	log "submitted job $JOB ($type)"
}

# check_job JOB: in a subshell, so that a failed check is counted, not fatal.
check_job() {
	local j=$1
	STEP_MARK=${JOB_MARK[$j]}
	if (finish_and_check "$j" "$SOAK_TOTAL" ${JOB_GRACEFUL[$j]}) 2>"$T/check-$j.err"; then
		JOB_OK[$j]=1
	else
		JOB_OK[$j]=0
		log "job $j: check failed: $(tail -n 3 "$T/check-$j.err")"
	fi
	local a=() x
	for x in "${ACTIVE[@]}"; do [ "$x" = "$j" ] || a+=("$x"); done
	ACTIVE=("${a[@]+"${a[@]}"}")
}

# reap: checks jobs that ended; replaces them while departures remain.
reap() {
	local j s
	for j in "${ACTIVE[@]+"${ACTIVE[@]}"}"; do
		s=$(job_state "$j")
		case $s in succeeded | failed | cancelled | timeout)
			check_job "$j"
			[ ${#DEPS[@]} -lt "$SOAK_D" ] && new_job "${JOB_TYPE[$j]}" ;;
		esac
	done
}

# far_from_end JOB NODE ATTEMPT: true when that attempt has made a step and
# has more than SOAK_MARGIN steps left (the grace period and 3 s more), so
# it cannot end by itself while a departure takes it off. An attempt with
# no progress file yet is not far: a resumed one may start near the end.
far_from_end() {
	local got
	got=$(cat "$T/agents/$2/jobs/$1-$3/progress" 2>/dev/null)
	is_uint "$got" && [ $((10#$got + SOAK_MARGIN)) -lt "$SOAK_TOTAL" ]
}

# pick TYPE: a running job of that type, far from its end, and its node and
# attempt ("JOB NODE ATTEMPT"), bounded.
pick() {
	local deadline=$((SECONDS + WAIT_S)) j s i n node att
	while :; do
		n=${#ACTIVE[@]}
		for ((i = 0; i < n; i++)); do
			# start from a different job each time, so all of them move
			j=${ACTIVE[$(((i + ${#DEPS[@]}) % n))]}
			[ "${JOB_TYPE[$j]}" = "$1" ] || continue
			s=$(job_get "$j" '"%s %s %s" % (d["state"], d["node"], d["attempts"])')
			case $s in running\ p*)
				# not one about to finish: it would end during the
				# grace period instead of moving
				read -r node att <<<"${s#running }"
				far_from_end "$j" "$node" "$att" || continue
				PICK="$j ${s#running }"
				return 0 ;;
			esac
		done
		reap
		[ ${#ACTIVE[@]} -eq 0 ] && return 1
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.2
	done
}

# wait_again JOB ATTEMPT: until the job runs as a later attempt (bounded).
wait_again() {
	local deadline=$((SECONDS + WAIT_S)) s
	while :; do
		s=$(job_get "$1" '"%s %s" % (d["state"], d["attempts"])')
		case $s in "running "*)
			[ "${s#running }" -gt "$2" ] && return 0 ;;
		succeeded* | failed* | cancelled* | timeout*)
			return 1 ;;
		esac
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.1
	done
}

# hold_attempt JOB NODE ATTEMPT: the attempt must not end by itself while a
# departure takes it off (steps.sh's STEPS_HOLD: it waits before its last
# step while `hold` is in its work directory), however slow the machine:
# far_from_end only picks attempts with time to spare, this makes sure.
# release_hold lets it go again (the next departure, or the end).
HOLD_FILE=
hold_attempt() {
	release_hold
	HOLD_FILE="$T/agents/$2/jobs/$1-$3/hold"
	touch "$HOLD_FILE" 2>/dev/null || HOLD_FILE=
}
release_hold() {
	[ -n "$HOLD_FILE" ] && rm -f "$HOLD_FILE"
	HOLD_FILE=
}

wait_exit_or_kill() { # NAME
	wait_exit "${AGENT_PID[$1]}" 30 || { kill -KILL "${AGENT_PID[$1]}"; wait_exit "${AGENT_PID[$1]}"; }
}

start_coordinator
for n in "${NODES[@]}"; do
	: >"$T/$n.procs"
	boot "$n"
done
for n in "${NODES[@]}"; do wait_node_up "$n"; done
for ((i = 0; i < SOAK_JOBS; i++)); do new_job; done
new_job slow
new_job ignore

d=0
while [ $d -lt "$SOAK_D" ]; do
	release_hold
	reap
	kind=${KINDS[$((d % ${#KINDS[@]}))]}
	case $kind in
	reclaim_slow) type=slow ;;
	reclaim_ignore) type=ignore ;;
	*) type=ordinary ;;
	esac
	pick $type || { log "no running $type job to move"; break; }
	read -r j node att <<<"$PICK"
	hold_attempt "$j" "$node" "$att"
	# let the attempt upload a checkpoint first (bounded; a lost one is fine)
	v=$(ckpt_version "$j")
	deadline=$((SECONDS + 10))
	while [ "$(ckpt_version "$j")" -le "$v" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
	[ "$(job_get "$j" '"%s %s %s" % (d["state"], d["node"], d["attempts"])')" = "running $node $att" ] || continue
	# still far from its end after that wait (a job that ends by itself
	# as the departure comes moves nothing; CI saw one)
	far_from_end "$j" "$node" "$att" || continue
	depart "$j" soft || continue
	if [ "$DEPART_ATTEMPT" != "$att" ]; then
		DEPARTS[$j]=${DEPARTS[$j]% *} # it moved meanwhile: not this one
		continue
	fi
	free_s=-
	graceful=0
	case $kind in
	reclaim | reclaim_now | reclaim_slow | reclaim_ignore)
		if [ $kind = reclaim_now ]; then provider "$node" reclaim --now
		else provider "$node" reclaim; fi
		# the ignoring job is killed: it did not stop by itself
		[ $kind = reclaim_now ] || [ $kind = reclaim_ignore ] || graceful=1
		free_s=$(printf '%s' "$CLI_OUT" | sed -n 's/.*free after \([0-9.]*\) s.*/\1/p' | head -n 1)
		[ -n "$free_s" ] || free_s=-
		wait_again "$j" "$att"; moved=$((1 - $?))
		provider "$node" resume ;;
	presence)
		graceful=1
		spawn "$T/owner-$node.log" sleep 600
		owner=$SPAWNED_PID
		printf '0 %s\n' "$owner" >"$T/$node.procs"
		wait_again "$j" "$att"; moved=$((1 - $?))
		: >"$T/$node.procs"
		kill -KILL "$owner" 2>/dev/null ;;
	kill9)
		kill9_agent "$node"
		wait_again "$j" "$att"; moved=$((1 - $?))
		boot "$node" ;;
	sigterm)
		graceful=1
		kill -TERM "${AGENT_PID[$node]}"
		wait_again "$j" "$att"; moved=$((1 - $?))
		wait_exit_or_kill "$node"
		boot "$node" ;;
	leave)
		graceful=1
		provider "$node" leave
		wait_again "$j" "$att"; moved=$((1 - $?))
		wait_exit_or_kill "$node"
		boot "$node" ;;
	esac
	if [ $moved = 0 ] && [ "$(history_reason "$j" "$att")" = exited ]; then
		# It had SOAK_MARGIN steps left: the departure did not take it
		# off in that time. A failed migration, said plainly.
		log "departure $d: $kind job $j attempt $att on $node: the job ran to its end instead of leaving"
		graceful=0
	fi
	[ $graceful = 1 ] && JOB_GRACEFUL[$j]+=" $att"
	[ $moved = 1 ] || DEPARTS[$j]=${DEPARTS[$j]% *} # no next attempt to measure
	JOB_DEPS[$j]+=" $d"
	DEPS+=("$kind $j $att $node $moved $free_s")
	log "departure $d: $kind job $j attempt $att on $node moved=$moved free=$free_s"
	d=$((d + 1))
	wait_node_up "$node"
	# the owner's GPU must be lent again before the next departure
	deadline=$((SECONDS + WAIT_S))
	while :; do
		api "$ADMIN_TOKEN" GET /v1/nodes
		[ "$(printf '%s' "$API_BODY" | E2E_NODE=$node json '[n for n in d["nodes"] if n["name"] == __import__("os").environ["E2E_NODE"]][0]["gpus"][0]["lent"]')" = true ] && break
		[ $SECONDS -ge $deadline ] && { log "$node not lent again after ${WAIT_S}s"; break; }
		sleep 0.1
	done
done
release_hold
SOAK_WALL=$((SECONDS - T0))
log "departures done after ${SOAK_WALL}s; letting ${#ACTIVE[@]} job(s) finish"
for j in "${ACTIVE[@]+"${ACTIVE[@]}"}"; do check_job "$j"; done

# per-job histories for the figures
for j in "${ALLJOBS[@]}"; do
	job_get "$j" d >"$T/hist-$j.json"
done
printf '%s\n' "${DEPS[@]}" >"$T/deps.txt"
for j in "${ALLJOBS[@]}"; do echo "$j ${JOB_OK[$j]:-0}"; done >"$T/jobok.txt"

"$PY" - "$T" "$SOAK_WALL" "$SOAK_D" "$SOAK_TOTAL" "$SOAK_STEP_S" <<'EOF'
import json, sys, os, datetime, collections
t, wall, want, total, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ok = dict(l.split() for l in open(t + "/jobok.txt"))
deps = [l.split() for l in open(t + "/deps.txt") if l.strip()]
def ts(s):
    s = s.replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(s).timestamp()
def pct(v, p):
    v = sorted(v)
    if not v: return float("nan")
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]
hist, lostrec = {}, {}
for j in ok:
    hist[j] = {h["attempt"]: h for h in json.load(open("%s/hist-%s.json" % (t, j)))["history"]}
    try:
        for r in json.load(open("%s/lost-%s.json" % (t, j))):
            lostrec[(j, r["attempt"])] = r
    except (OSError, ValueError):
        pass
bykind = collections.Counter()
good = collections.Counter()
free = collections.defaultdict(list)
requeue = collections.defaultdict(list)
lost = collections.defaultdict(list)
redone = collections.defaultdict(list)
bound = collections.defaultdict(list)
over = collections.Counter()
unmeasured = collections.Counter()
reasons = collections.Counter()
for kind, j, att, node, moved, fs in deps:
    att = int(att)
    bykind[kind] += 1
    if moved == "1" and ok.get(j) == "1":
        good[kind] += 1
    if fs != "-":
        free[kind].append(float(fs))
    r = lostrec.get((j, att))
    if r is None:
        unmeasured[kind] += 1; unmeasured["all"] += 1
    else:
        for k in (kind, "all"):
            redone[k].append(r["redone"]); bound[k].append(r["bound"])
            if r["redone"] > r["bound"]:
                over[k] += 1
    h = hist[j].get(att); n = hist[j].get(att + 1)
    if h:
        reasons[(kind, h.get("reason"))] += 1
        if h.get("lost_s") is not None:
            lost[kind].append(float(h["lost_s"])); lost["all"].append(float(h["lost_s"]))
    if h and n and h.get("finished_at") and n.get("started_at"):
        r = ts(n["started_at"]) - ts(h["finished_at"])
        requeue[kind].append(r); requeue["all"].append(r)
n = len(deps)
print("== migration soak: %d departures (asked %d), %d jobs (TOTAL=%s steps, %s s/step), wall %d s" % (n, want, len(ok), total, step, wall))
print("jobs checked ok (result + resume chain): %d/%d" % (sum(v == "1" for v in ok.values()), len(ok)))
print("success: %d/%d = %.1f %%" % (sum(good.values()), n, 100.0 * sum(good.values()) / max(n, 1)))
print("steps redone: how far the old attempt got minus where the next resumed; bound: how far it got minus the latest uploaded version's step at the departure")
print("%-14s %4s %4s  %-14s %-18s %-14s %-14s %5s  %-14s %s" % ("kind", "n", "ok", "free s p50/p99", "requeue->run p50/p99", "redone p50/max", "bound p50/max", "over", "lost_s p50/max", "reasons"))
for k in ["reclaim", "reclaim_now", "presence", "kill9", "sigterm", "leave", "reclaim_slow", "reclaim_ignore", "all"]:
    c = bykind[k] if k != "all" else n
    g = good[k] if k != "all" else sum(good.values())
    f = "%.2f / %.2f" % (pct(free[k], 50), pct(free[k], 99)) if free[k] else "-"
    rq = "%.3f / %.3f" % (pct(requeue[k], 50), pct(requeue[k], 99)) if requeue[k] else "-"
    rd = "%d / %d" % (pct(redone[k], 50), max(redone[k])) if redone[k] else "-"
    bd = "%d / %d" % (pct(bound[k], 50), max(bound[k])) if bound[k] else "-"
    lo = "%.2f / %.2f" % (pct(lost[k], 50), max(lost[k])) if lost[k] else "-"
    rs = ",".join("%s:%d" % (r, m) for (kk, r), m in sorted(reasons.items(), key=str) if kk == k)
    print("%-14s %4d %4d  %-14s %-18s %-14s %-14s %5d  %-14s %s" % (k, c, g, f, rq, rd, bd, over[k], lo, rs))
print("departures over the bound: %d; not measured: %d" % (over["all"], unmeasured["all"]))
sys.exit(0 if n == want and sum(good.values()) == n and all(v == "1" for v in ok.values())
         and over["all"] == 0 and unmeasured["all"] == 0 else 1)
EOF
