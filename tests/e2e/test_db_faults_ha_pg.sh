#!/usr/bin/env bash
# test_db_faults_ha_pg: the database faulting under two coordinators (one
# leader, one standby, each under a supervisor loop that starts it again
# when it exits, as systemd's Restart= does), two agents and two CLI
# submitters. First PostgreSQL is restarted under load; then it is made
# unreachable for 30 s (every server process SIGSTOPped: connections stay
# open and nothing answers, as in a network partition). Each time the
# leader steps down (exits 75: it cannot keep its lock), a coordinator
# leads again once the database is back, and after both: no submission a
# submitter saw acknowledged is lost or doubled, every job ends with its
# own exit code and log line, once, started once by the agents.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

DATA="$T/coord"
declare -A PORT=() SUP=()
PORT[a]=$(free_port)
PORT[b]=$(free_port)
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }

# supervise NAME: a loop that runs coordinator NAME again whenever it
# exits, until $T/stop-supervisors exists (bounded: 200 starts).
supervise() {
	mkdir -p "$DATA"
	spawn "$T/coord-$1.log" bash -c '
		n=0
		while [ ! -e "$0/stop-supervisors" ] && [ $n -lt 200 ]; do
			n=$((n + 1))
			"$1" coordinator --listen "127.0.0.1:$2" --data "$3" \
			    --lease-ms 6000 --heartbeat-ms 300 --db "$4" \
			    --advertise-url "http://127.0.0.1:$2" \
			    --leader-lease-ms 3000 -v
			echo "supervisor: coordinator exited status=$?"
			sleep 0.5
		done' "$T" "$GP" "${PORT[$1]}" "$DATA" "$(pg_url)"
	SUP[$1]=$SPAWNED_PID
}
epoch_now() { pg_psql "SELECT epoch FROM gp_leader WHERE id = 1" 2>/dev/null; }

# wait_new_leader EPOCH: a coordinator leads with an epoch above EPOCH and
# serves (whoami 200 through both URLs).
wait_new_leader() {
	local deadline=$((SECONDS + WAIT_S + 30)) e
	while :; do
		e=$(epoch_now)
		if [ -n "$e" ] && [ "$e" -gt "$1" ]; then
			GPUPOOL_TOKEN=$ADMIN_TOKEN "$GP" ps >/dev/null 2>&1 && break
		fi
		[ $SECONDS -ge $deadline ] && fail "no coordinator leads after the fault (epoch ${e:-?})"
		sleep 0.2
	done
}

supervise a
deadline=$((SECONDS + WAIT_S))
until [ -s "$DATA/admin.token" ]; do
	[ $SECONDS -ge $deadline ] && fail "a never led"
	sleep 0.1
done
ADMIN_TOKEN=$(tr -d ' \r\n' <"$DATA/admin.token")
COORD_PORT=${PORT[a]}
supervise b
export GPUPOOL_URL="$(url_of a),$(url_of b)" GPUPOOL_TOKEN=$ADMIN_TOKEN
wait_new_leader 0
for n in n1 n2; do
	mk_token provider "prov-$n"
	(umask 077 && printf '%s\n' "$TOKEN" >"$T/$n.token")
	spawn "$T/agent-$n.log" "$GP" agent --coordinator "$(url_of a)" \
	    --coordinator "$(url_of b)" --token-file "$T/$n.token" --name "$n" \
	    --work "$T/agents/$n" --fake-gpus 2 --run-as nobody -v
	AGENT_PID[$n]=$SPAWNED_PID
done
wait_node_up n1
wait_node_up n2

# In sessions of their own (spawn): the test's cleanup ends them.
cat >"$T/submitter.sh" <<'EOS'
w=$1 i=0
while [ ! -e "$T/stop-submitting" ] && [ $i -lt 1000 ]; do
	i=$((i + 1))
	code=$(( (w + i) % 3 ))
	if out=$("$GP" submit --gpus 1 --name "d$w-$i" -- sh -c \
	    'echo "ran $0"; exit $1' "d$w-$i" "$code" \
	    2>>"$T/submit-$w.err"); then
		echo "$out d$w-$i $code"
	else
		echo "FAILED d$w-$i"
	fi
	sleep 0.3
done >"$T/ids-$w"
EOS
submitters=()
for w in 1 2; do
	spawn "$T/submitter-$w.log" env T="$T" GP="$GP" bash "$T/submitter.sh" "$w"
	submitters+=("$SPAWNED_PID")
done
# more_jobs N: N more acknowledged submissions than now (bounded).
more_jobs() {
	local want deadline=$((SECONDS + WAIT_S))
	want=$(($(cat "$T"/ids-? 2>/dev/null | wc -l) + $1))
	until [ "$(cat "$T"/ids-? 2>/dev/null | wc -l)" -ge "$want" ]; do
		[ $SECONDS -ge $deadline ] && fail "the submitters made no more jobs"
		sleep 0.1
	done
}
more_jobs 10

log "PostgreSQL restarted under load"
e=$(epoch_now)
pg_restart
wait_new_leader "$e"
# (the other coordinator may win the lock before the old leader's next
# ping finds its session gone and it says so)
deadline=$((SECONDS + WAIT_S))
until grep -q 'stepping down' "$T"/coord-?.log; do
	[ $SECONDS -ge $deadline ] && fail "no coordinator stepped down when the database restarted"
	sleep 0.1
done

more_jobs 10
log "PostgreSQL unreachable for 30 s (SIGSTOP)"
e=$(epoch_now)
# The postmaster and its children (each backend is in a session of its
# own: the postmaster's process group is the postmaster alone).
pids="$PG_PID $(pgrep -P "$PG_PID" | tr '\n' ' ')"
[ -n "$pids" ] || fail "no PostgreSQL processes to stop"
kill -STOP $pids
sleep 30 # the fault's length, not a wait for a condition
kill -CONT $pids
wait_new_leader "$e"
more_jobs 10

touch "$T/stop-submitting"
wait "${submitters[@]}"
cat "$T"/ids-? >"$T/ids"
grep FAILED "$T/ids" && fail "submissions failed: $(tail -n 5 "$T"/submit-?.err)"
n=$(wc -l <"$T/ids")
dups=$(cut -d' ' -f1 "$T/ids" | sort | uniq -d)
[ -z "$dups" ] || fail "a job id printed twice: $dups"
COORD_PORT=${PORT[a]}
leader=$(pg_psql "SELECT addr FROM gp_leader WHERE id = 1")
$PY - "$T/ids" "$ADMIN_TOKEN" "$WAIT_S" "$leader" "$T"/agent-n*.log <<'EOF' || fail "the jobs after the database's faults (above)"
import json, sys, time, urllib.request
ids_file, token, wait_s, base = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def get(path):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read().decode()
bad = []
final_attempt = {}
want = {}
for line in open(ids_file):
    jid, name, code = line.split()
    want[int(jid)] = (name, int(code))
deadline = time.time() + wait_s + len(want) * 0.5
for jid, (name, code) in sorted(want.items()):
    while True:
        j = json.loads(get("/v1/jobs/%d" % jid))
        if j["state"] in ("succeeded", "failed", "cancelled") or time.time() > deadline:
            break
        time.sleep(0.2)
    log = get("/v1/jobs/%d/log" % jid)
    if j["name"] != name or j.get("exit_code") != code or j["state"] not in ("succeeded", "failed"):
        bad.append("job %d (%s): %s exit %s, want exit %d" % (jid, name, j["state"], j.get("exit_code"), code))
    if log.count("ran " + name) != 1:
        bad.append("job %d (%s): log %r" % (jid, name, log[:200]))
    final_attempt[jid] = j.get("attempts")
# Started by the agents once each, its last attempt (test_failover_pg).
starts = {}
for f in sys.argv[5:]:
    for line in open(f, errors="replace"):
        if "job started job=" in line:
            rest = line.split("job started job=")[1].split()
            starts.setdefault(int(rest[0]), []).append(int(rest[1].split("=")[1]))
for jid in want:
    if starts.get(jid, []) != [final_attempt[jid]]:
        bad.append("job %d: attempts started by the agents %s, its last attempt %s" % (jid, starts.get(jid), final_attempt[jid]))
jobs = json.loads(get("/v1/jobs?all=1&limit=100000"))["jobs"]
extra = [j["id"] for j in jobs if j["id"] not in want]
if extra:
    bad.append("jobs no submitter printed: %s" % extra[:20])
for b in bad[:40]:
    print(b, file=sys.stderr)
print("%d jobs checked, %d problems" % (len(want), len(bad)), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
touch "$T/stop-supervisors"
log "ok: $n jobs through a database restart and 30 s unreachable"
