#!/usr/bin/env bash
# test_db_faults_ha_pg: the database faulting under two coordinators (one
# leader, one standby, each under a supervisor loop that starts it again
# when it exits, as systemd's Restart= does), two agents and two CLI
# submitters. First PostgreSQL is restarted under load; then it is made
# unreachable (every server process SIGSTOPped: connections stay open and
# nothing answers, as in a network partition) until the leader has lost
# its lock's connection and each coordinator has had a connection attempt
# time out (connect_timeout: 5 s). Each time the
# leader loses its lock's connection: once the database is back it
# either regains the lock with its epoch unchanged and leads on, or
# (the standby won the lock first) steps down (exits 75) and the other
# leads with a higher epoch; and after both: no submission a submitter
# saw acknowledged is lost or doubled, every job ends with its own exit
# code and log line, once, started once by the agents (pg_check.py).
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

# wait_leader EPOCH: a coordinator leads with an epoch of at least EPOCH
# and serves (ps through both URLs).
wait_leader() {
	local deadline=$((SECONDS + WAIT_S + 30)) e
	while :; do
		e=$(epoch_now)
		if [ -n "$e" ] && [ "$e" -ge "$1" ]; then
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
wait_leader 1
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

# lost_lock_handled: the leader said how it came through the loss of
# its lock's connection once more than before (bounded).
handled() { cat "$T"/coord-?.log | grep -c 'stepping down\|lock regained'; }
lost_lock_handled() {
	local deadline=$((SECONDS + WAIT_S + 30))
	until [ "$(handled)" -gt "$1" ]; do
		[ $SECONDS -ge $deadline ] && fail "the leader neither regained its lock nor stepped down after the fault"
		sleep 0.1
	done
}

log "PostgreSQL restarted under load"
e=$(epoch_now) h=$(handled)
pg_restart
lost_lock_handled "$h"
wait_leader "$e"

more_jobs 10
log "PostgreSQL unreachable (SIGSTOP) until both coordinators gave up a connection attempt"
e=$(epoch_now) h=$(handled)
# lost: how often a leader saw its lock's connection lost (stepping down
# or regaining); timeouts NAME: NAME's connection attempts that timed out
# (connect_timeout) against a server that accepts and never answers.
lost() { cat "$T"/coord-?.log | grep -c "the lock's database connection was lost"; }
timeouts() { grep -c 'failed: timeout expired' "$T/coord-$1.log"; }
l=$(lost) ta=$(timeouts a) tb=$(timeouts b)
# The postmaster and its children (each backend is in a session of its
# own: the postmaster's process group is the postmaster alone).
pids="$PG_PID $(pgrep -P "$PG_PID" | tr '\n' ' ')"
[ -n "$pids" ] || fail "no PostgreSQL processes to stop"
kill -STOP $pids
# The fault lasts until each of its paths was taken: the leader lost its
# lock's connection (its ping unanswered), and each coordinator (the old
# leader started again by its supervisor, the standby) had a connection
# attempt time out (bounded).
deadline=$((SECONDS + WAIT_S + 30))
until [ "$(lost)" -gt "$l" ] && [ "$(timeouts a)" -gt "$ta" ] &&
    [ "$(timeouts b)" -gt "$tb" ]; do
	if [ $SECONDS -ge $deadline ]; then
		kill -CONT $pids
		fail "with PostgreSQL stopped, lost lock connections $l -> $(lost), timed-out connection attempts a $ta -> $(timeouts a), b $tb -> $(timeouts b)"
	fi
	sleep 0.2
done
log "PostgreSQL resumed: the leader lost its lock, both coordinators' connection attempts timed out"
kill -CONT $pids
lost_lock_handled "$h"
wait_leader "$e"
more_jobs 10

touch "$T/stop-submitting"
wait "${submitters[@]}"
cat "$T"/ids-? >"$T/ids"
n=$(wc -l <"$T/ids")
leader=$(pg_psql "SELECT addr FROM gp_leader WHERE id = 1")
$PY "$(dirname "$0")/pg_check.py" --url "$leader" --token "$ADMIN_TOKEN" \
    --wait-s "$WAIT_S" "$T/ids" "$T"/agent-n*.log ||
    fail "the jobs after the database's faults (above); submit errors: $(tail -n 3 "$T"/submit-?.err)"
touch "$T/stop-supervisors"
log "ok: $n jobs through a database restart and a time unreachable"
