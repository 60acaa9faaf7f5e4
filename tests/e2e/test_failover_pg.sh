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
n=$(wc -l <"$T/ids")
[ "$n" -ge 4 ] || fail "only $n submissions"
# One process checks them all through the API (bounded): pg_check.py.
$PY "$(dirname "$0")/pg_check.py" --url "$(url_of "$leader")" \
    --token "$ADMIN" --wait-s "$WAIT_S" --also "$follow" "$T/ids" \
    "$T"/agent-n*.log || fail "the jobs after $FAILOVERS failovers (above); submit errors: $(tail -n 3 "$T"/submit-?.err)"
[ -n "${FAILOVER_TIMES:-}" ] && echo "# jobs $n" >>"$FAILOVER_TIMES"
log "ok: $n jobs through $FAILOVERS failovers"
