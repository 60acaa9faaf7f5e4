#!/usr/bin/env bash
# test_failover_pg: failover under load. Two coordinators over one
# PostgreSQL (the pool's state in it: --db), one data directory for both
# (the job logs and blobs every coordinator mounts), two agents and four
# CLI submitters, all given both URLs. The leader is killed (-9) FAILOVERS
# times in a row (default 3 here; bench/failover.sh runs 20), each time
# once the new leader has started a job, and the killed one is started
# again as a standby (the supervisor's part). Then: every id a submitter
# printed exists exactly once and no submission failed; every job ends
# with its own exit code and its own log line, once; the agents started
# each job once, its last attempt (an attempt assigned by a leader that
# died before its answer reached the agent is requeued: never started,
# not run twice); a job running through all
# the failovers keeps its one attempt, and `logs -f` and `wait` started
# before the first kill resume and end with its whole log and exit code.
#
# FAILOVER_TIMES (a file): one line per failover, "ELECTED_MS STARTED_MS":
# from the kill to the new leader's lock, and to the first job an agent
# started after it (bench/failover.sh reads it).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

FAILOVERS=${FAILOVERS:-3}
DATA="$T/coord"
declare -A PORT=() PID=()
PORT[a]=$(free_port)
PORT[b]=$(free_port)
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }
other() { [ "$1" = a ] && echo b || echo a; }

start_coord() {
	mkdir -p "$DATA"
	spawn "$T/coord-$1.log" "$GP" coordinator \
	    --listen "127.0.0.1:${PORT[$1]}" --data "$DATA" \
	    --lease-ms 4000 --heartbeat-ms 300 --db "$(pg_url)" \
	    --advertise-url "$(url_of "$1")" --leader-lease-ms 3000 -v
	PID[$1]=$SPAWNED_PID
}

# leader_now: the name whose URL gp_leader holds (a or b).
leader_now() {
	case "$(pg_psql "SELECT addr FROM gp_leader WHERE id = 1")" in
	"$(url_of a)") echo a ;;
	"$(url_of b)") echo b ;;
	*) echo none ;;
	esac
}
epoch_now() { pg_psql "SELECT epoch FROM gp_leader WHERE id = 1"; }

# serves NAME TOKEN: NAME answers whoami 200.
serves() {
	COORD_PORT=${PORT[$1]}
	api "$2" GET /v1/whoami
	[ "$API_STATUS" = 200 ]
}

# ms_of "2026-...T..:..:..mmmZ": epoch milliseconds of a log's timestamp.
ms_of() {
	$PY -c 'import sys, datetime as d
t = d.datetime.strptime(sys.argv[1], "%Y-%m-%dT%H:%M:%S.%fZ")
print(int(t.replace(tzinfo=d.timezone.utc).timestamp() * 1000))' "$1"
}
now_ms() { date +%s%3N; }

# started_after MS: the first "job started" any agent logged at or after
# MS (epoch ms), as epoch ms; empty when none yet.
started_after() {
	$PY - "$1" "$T"/agent-n*.log <<'EOF'
import sys, datetime as d
after = int(sys.argv[1])
best = None
for f in sys.argv[2:]:
    for line in open(f, errors="replace"):
        if "job started job=" not in line:
            continue
        try:
            t = d.datetime.strptime(line.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%S.%fZ")
        except ValueError:
            continue
        ms = int(t.replace(tzinfo=d.timezone.utc).timestamp() * 1000)
        if ms >= after and (best is None or ms < best):
            best = ms
print(best if best is not None else "")
EOF
}

log "a leads, b stands by"
start_coord a
COORD_DATA=$DATA COORD_PID=${PID[a]} COORD_PORT=${PORT[a]}
wait_ready
start_coord b
ADMIN=$ADMIN_TOKEN
export GPUPOOL_URL="$(url_of a),$(url_of b)" GPUPOOL_TOKEN=$ADMIN
for n in n1 n2; do
	mk_token provider "prov-$n"
	(umask 077 && printf '%s\n' "$TOKEN" >"$T/$n.token")
	spawn "$T/agent-$n.log" "$GP" agent --coordinator "$(url_of a)" \
	    --coordinator "$(url_of b)" --token-file "$T/$n.token" --name "$n" \
	    --work "$T/agents/$n" --fake-gpus 4 --run-as nobody -v
	AGENT_PID[$n]=$SPAWNED_PID
done
wait_node_up n1
wait_node_up n2

log "four submitters: a job every ~0.3 s each, exit codes 0..3"
# In sessions of their own (spawn): the test's cleanup ends them.
cat >"$T/submitter.sh" <<'EOS'
w=$1 i=0
while [ ! -e "$T/stop-submitting" ] && [ $i -lt 2000 ]; do
	i=$((i + 1))
	code=$(( (w + i) % 4 ))
	if out=$("$GP" submit --gpus 1 --name "s$w-$i" -- sh -c \
	    'echo "ran $0"; sleep 0.$1; exit $2' "s$w-$i" \
	    $((RANDOM % 8)) "$code" 2>>"$T/submit-$w.err"); then
		echo "$out s$w-$i $code"
	else
		echo "FAILED s$w-$i"
	fi
	sleep 0.3
done >"$T/ids-$w"
EOS
submitters=()
for w in 1 2 3 4; do
	spawn "$T/submitter-$w.log" env T="$T" GP="$GP" bash "$T/submitter.sh" "$w"
	submitters+=("$SPAWNED_PID")
done

log "a job that lives through the failovers, followed by logs -f and wait"
submit --gpus 1 --name follow -- sh -c "echo first; $(gated_job_cmd); echo last; exit 5"
follow=$JOB
COORD_PORT=${PORT[a]}
wait_state "$follow" running
spawn "$T/logs-f.err" sh -c '"$0" logs -f "$1" >"$2"' "$GP" "$follow" "$T/logs-f.out"
logs_pid=$SPAWNED_PID
spawn "$T/wait.log" "$GP" wait "$follow"
wait_pid=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q first "$T/logs-f.out" 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "logs -f showed nothing of job $follow"
	sleep 0.1
done

: >"$T/failover-times"
leader=a
for k in $(seq 1 "$FAILOVERS"); do
	# The leader dispatches (a job started since it led), the other
	# one stands by (its 503).
	since=$(now_ms)
	deadline=$((SECONDS + WAIT_S))
	until [ -n "$(started_after "$since")" ]; do
		[ $SECONDS -ge $deadline ] && fail "failover $k: no job started under $leader in ${WAIT_S}s"
		sleep 0.1
	done
	standby=$(other "$leader")
	deadline=$((SECONDS + WAIT_S))
	until COORD_PORT=${PORT[$standby]} && api - GET /v1/whoami && [ "$API_STATUS" = 503 ]; do
		[ $SECONDS -ge $deadline ] && fail "failover $k: $standby does not stand by (HTTP $API_STATUS)"
		sleep 0.1
	done
	epoch=$(epoch_now)
	t0=$(now_ms)
	kill -KILL "${PID[$leader]}"
	wait_exit "${PID[$leader]}" || fail "$leader survived SIGKILL"
	deadline=$((SECONDS + WAIT_S))
	until [ "$(epoch_now)" -gt "$epoch" ] 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && fail "failover $k: no new leader within ${WAIT_S}s"
		sleep 0.05
	done
	t_elected=$(now_ms)
	# The supervisor starts the dead one again (systemd: RestartSec=2s,
	# so after the standby took over): back as a standby.
	start_coord "$leader"
	leader=$(leader_now)
	[ "$leader" = "$standby" ] || fail "failover $k: $leader leads, not the standby $standby"
	until [ -n "$(started_after "$t_elected")" ]; do
		[ $SECONDS -ge $deadline ] && fail "failover $k: the new leader $leader started no job within ${WAIT_S}s"
		sleep 0.05
	done
	t_started=$(started_after "$t_elected")
	echo "$((t_elected - t0)) $((t_started - t0))" >>"$T/failover-times"
	log "failover $k: $standby leads after $((t_elected - t0)) ms, a job started after $((t_started - t0)) ms"
done
[ -n "${FAILOVER_TIMES:-}" ] && cp "$T/failover-times" "$FAILOVER_TIMES"

log "logs -f and wait resumed through the failovers"
release_job "$(job_get "$follow" 'd["node"]')" "$follow"
wait_exit "$wait_pid" || fail "gpupool wait $follow did not end"
wait "$wait_pid"
assert_eq 5 "$?" "gpupool wait's exit status (the job's)"
wait_exit "$logs_pid" || fail "gpupool logs -f $follow did not end"
assert_eq "$(printf 'first\nlast')" "$(cat "$T/logs-f.out")" "what logs -f printed through $FAILOVERS failovers ($(cat "$T/logs-f.err"))"
assert_eq 1 "$(job_get "$follow" 'd["attempts"]')" "attempts of the job that lived through the failovers"

log "stop the submitters; every job ends"
touch "$T/stop-submitting"
wait "${submitters[@]}"
cat "$T"/ids-? >"$T/ids"
grep FAILED "$T/ids" && fail "submissions failed: $(grep -c FAILED "$T/ids"); $(tail -n 5 "$T"/submit-?.err)"
n=$(wc -l <"$T/ids")
[ "$n" -ge 4 ] || fail "only $n submissions"
dups=$(cut -d' ' -f1 "$T/ids" | sort | uniq -d)
[ -z "$dups" ] || fail "a job id printed twice: $dups"

# One process checks them all through the API (bounded).
GPUPOOL_URL="$(url_of "$leader")" $PY - "$T/ids" "$ADMIN" "$WAIT_S" "$follow" "$T"/agent-n*.log <<'EOF' || fail "the jobs after $FAILOVERS failovers (above)"
import json, os, sys, time, urllib.request
ids_file, token, wait_s, follow = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
base = os.environ["GPUPOOL_URL"]
def get(path):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read().decode()
want = {}
for line in open(ids_file):
    jid, name, code = line.split()
    want[int(jid)] = (name, int(code))
bad = []
final_attempt = {}
deadline = time.time() + wait_s + len(want) * 0.5
for jid, (name, code) in sorted(want.items()):
    while True:
        j = json.loads(get("/v1/jobs/%d" % jid))
        if j["state"] in ("succeeded", "failed", "cancelled") or time.time() > deadline:
            break
        time.sleep(0.2)
    log = get("/v1/jobs/%d/log" % jid)
    if j["name"] != name:
        bad.append("job %d is %s, not %s" % (jid, j["name"], name))
    if j["state"] not in ("succeeded", "failed") or j.get("exit_code") != code:
        bad.append("job %d (%s): state %s exit %s, want exit %d" % (jid, name, j["state"], j.get("exit_code"), code))
    if log.count("ran " + name) != 1:
        bad.append("job %d (%s): log %r" % (jid, name, log[:200]))
    final_attempt[jid] = j.get("attempts")
# Started by the agents once each, its last attempt: an attempt the dead
# leader assigned and committed but whose poll answer died with it never
# reached the agent; the new leader requeues it (the agent's heartbeat
# does not list it), which is one more attempt but no second run.
starts = {}
for f in sys.argv[5:]:
    for line in open(f, errors="replace"):
        if "job started job=" in line:
            rest = line.split("job started job=")[1].split()
            starts.setdefault(int(rest[0]), []).append(int(rest[1].split("=")[1]))
for jid in want:
    if starts.get(jid, []) != [final_attempt[jid]]:
        bad.append("job %d: attempts started by the agents %s, its last attempt %s" % (jid, starts.get(jid), final_attempt[jid]))
# no job the submitters did not print (a repeat made a second one)
alljobs = json.loads(get("/v1/jobs?all=1&limit=100000"))
jobs = alljobs["jobs"] if isinstance(alljobs, dict) else alljobs
extra = [j["id"] for j in jobs if j["id"] not in want and j["id"] != follow]
if extra:
    bad.append("jobs no submitter printed: %s" % extra[:20])
for b in bad[:40]:
    print(b, file=sys.stderr)
print("%d jobs checked, %d problems" % (len(want), len(bad)), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
[ -n "${FAILOVER_TIMES:-}" ] && echo "# jobs $n" >>"$FAILOVER_TIMES"
log "ok: $n jobs through $FAILOVERS failovers"
