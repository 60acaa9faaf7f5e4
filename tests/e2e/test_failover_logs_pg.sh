#!/usr/bin/env bash
# test_failover_logs_pg: job logs across a failover (issue 19). Two
# coordinators over one PostgreSQL, each with a data directory of its own,
# sharing only the blob directory (--blob-dir: what NFS would be), where
# job logs live. First the old layout: a, started without --blob-dir, runs
# a job whose log lands in a's data directory; a is started again with
# --blob-dir: the log moved (once) and `logs` still shows it (a's data
# directory is on /dev/shm when that is another file system than the
# test's: the move is then a copy, as onto NFS). Then a job
# writes lines under a, `logs -f` following it; a is killed (-9), b leads,
# the job writes more lines; `logs JOB` on b shows every line in order and
# `logs -f` ends with all of them. Before logs moved to the blob directory,
# b had none of what a acknowledged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

BLOBS="$T/blobs"
declare -A PORT=() PID=() DATA=([a]="$T/coord-a" [b]="$T/coord-b")
if [ -d /dev/shm ] && [ -w /dev/shm ] &&
    [ "$(stat -c %d /dev/shm)" != "$(stat -c %d "$T")" ] &&
    SHM=$(mktemp -d /dev/shm/gpe2e-logs.XXXXXX); then
	DATA[a]="$SHM/coord-a"
	# pg_lib.sh's exit trap, after removing it (with the test's status).
	trap 'rc=$?; rm -rf "$SHM"; (exit $rc); pg_on_exit' EXIT
	log "a's data directory on /dev/shm, another file system than $T"
fi
PORT[a]=$(free_port)
PORT[b]=$(free_port)
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }

# start_coord NAME [ARG...]: NAME's own data directory, the pool's database.
start_coord() {
	local name=$1
	shift
	spawn "$T/coord-$name.log" "$GP" coordinator \
	    --listen "127.0.0.1:${PORT[$name]}" --data "${DATA[$name]}" \
	    --db "$(pg_url)" --advertise-url "$(url_of "$name")" \
	    --leader-lease-ms 3000 --lease-ms 4000 --heartbeat-ms 300 -v "$@"
	PID[$name]=$SPAWNED_PID
}
epoch_now() { pg_psql "SELECT epoch FROM gp_leader WHERE id = 1"; }
# log_of JOB: the job's whole log as the serving coordinator has it.
log_of() {
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$1/log?offset=0"
	printf '%s' "$API_BODY"
}

log "old layout: a without --blob-dir, its logs in its data directory"
start_coord a
COORD_DATA="${DATA[a]}" COORD_PID=${PID[a]} COORD_PORT=${PORT[a]}
wait_ready
export GPUPOOL_URL="$(url_of a),$(url_of b)" GPUPOOL_TOKEN=$ADMIN_TOKEN
start_agent n1 1 --coordinator "$(url_of a)" --coordinator "$(url_of b)"
wait_node_up n1
submit --gpus 0 -- sh -c 'echo "written in the old layout"'
j0=$JOB
cli wait "$j0"
assert_eq 0 "$CLI_RC" "job $j0"
[ -s "${DATA[a]}/logs/$j0.log" ] || fail "job $j0's log is not in a's data directory"
old_log=$(log_of "$j0")
assert_contains "$old_log" "written in the old layout" "job $j0's log"
kill -TERM "${PID[a]}"
wait_exit "${PID[a]}" || fail "a did not stop"

log "a again, with --blob-dir: the old log moves there"
start_coord a --blob-dir "$BLOBS"
COORD_PID=${PID[a]}
wait_ready
export GPUPOOL_URL="$(url_of a),$(url_of b)"
[ -e "${DATA[a]}/logs/$j0.log" ] && fail "job $j0's log stayed in a's data directory"
[ -s "$BLOBS/logs/$j0.log" ] || fail "job $j0's log is not in the blob directory"
assert_eq "$old_log" "$(log_of "$j0")" "job $j0's log after the move"
assert_contains "$(cat "$T/coord-a.log")" "moved job logs to the blob directory count=1" "a's log"
start_coord b --blob-dir "$BLOBS"
wait_node_up n1

log "a job writes lines under a, logs -f follows"
submit --gpus 0 -- sh -c "for i in 1 2 3; do echo \"before \$i\"; done; $(gated_job_cmd); for i in 1 2 3; do echo \"after \$i\"; done"
j=$JOB
wait_state "$j" running
spawn "$T/logs-f.err" sh -c '"$0" logs -f "$1" >"$2"' "$GP" "$j" "$T/logs-f.out"
logs_pid=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q "before 3" "$T/logs-f.out" 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "logs -f showed nothing of job $j under a"
	sleep 0.1
done
grep -q "loading the state to lead" "$T/coord-b.log" && fail "b led before a was killed"

log "kill -9 a; b leads; the job writes more"
epoch=$(epoch_now)
kill -KILL "${PID[a]}"
wait_exit "${PID[a]}" || fail "a survived SIGKILL"
deadline=$((SECONDS + WAIT_S))
until [ "$(epoch_now)" -gt "$epoch" ] 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "no new leader within ${WAIT_S}s"
	sleep 0.05
done
COORD_DATA="$T/coord-b" COORD_PID=${PID[b]} COORD_PORT=${PORT[b]}
deadline=$((SECONDS + WAIT_S))
until api "$ADMIN_TOKEN" GET /v1/whoami && [ "$API_STATUS" = 200 ]; do
	[ $SECONDS -ge $deadline ] && fail "b does not serve after taking the lead (HTTP $API_STATUS)"
	sleep 0.1
done
release_job n1 "$j"
cli wait "$j"
assert_eq 0 "$CLI_RC" "job $j on b: $CLI_ERR"

log "b has the whole log, in order; logs -f resumed to the end"
want=$(printf 'before 1\nbefore 2\nbefore 3\nafter 1\nafter 2\nafter 3')
assert_eq "$want" "$(log_of "$j")" "job $j's log on b"
cli logs "$j"
assert_eq 0 "$CLI_RC" "logs $j on b: $CLI_ERR"
assert_eq "$want" "$CLI_OUT" "gpupool logs $j on b"
wait_exit "$logs_pid" || fail "gpupool logs -f $j did not end"
assert_eq "$want" "$(cat "$T/logs-f.out")" "what logs -f printed through the failover ($(cat "$T/logs-f.err"))"
assert_eq "$old_log" "$(log_of "$j0")" "job $j0's (moved) log on b"
[ -e "$T/coord-b/logs/$j.log" ] && fail "b wrote job $j's log into its own data directory"
echo "ok"
