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
# b had none of what a acknowledged. (Logs are named with the epoch of
# the leader that wrote them: test_fencing_logs_pg.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

BLOBS="$T/blobs"
if [ -d /dev/shm ] && [ -w /dev/shm ] &&
    [ "$(stat -c %d /dev/shm)" != "$(stat -c %d "$T")" ] &&
    SHM=$(mktemp -d /dev/shm/gpe2e-logs.XXXXXX); then
	PG_COORD_DATA[a]="$SHM/coord-a"
	# pg_lib.sh's exit trap, after removing it (with the test's status).
	trap 'rc=$?; rm -rf "$SHM"; (exit $rc); pg_on_exit' EXIT
	log "a's data directory on /dev/shm, another file system than $T"
fi
pg_coords a b
# log_of JOB: the job's whole log as the serving coordinator has it.
log_of() {
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$1/log?offset=0"
	printf '%s' "$API_BODY"
}

log "old layout: a without --blob-dir, its logs in its data directory"
pg_coord_start a
pg_coord_use a
wait_ready
export GPUPOOL_URL="$(pg_coord_url a),$(pg_coord_url b)" GPUPOOL_TOKEN=$ADMIN_TOKEN
start_agent n1 1 --coordinator "$(pg_coord_url a)" --coordinator "$(pg_coord_url b)"
wait_node_up n1
submit --gpus 0 -- sh -c 'echo "written in the old layout"'
j0=$JOB
cli wait "$j0"
assert_eq 0 "$CLI_RC" "job $j0"
f=$(compgen -G "${PG_COORD_DATA[a]}/logs/$j0.e[0-9]*.log") ||
	fail "job $j0's log is not in a's data directory"
[ -s "$f" ] || fail "job $j0's log $f is empty"
old_log=$(log_of "$j0")
assert_contains "$old_log" "written in the old layout" "job $j0's log"
kill -TERM "${PG_COORD_PID[a]}"
wait_exit "${PG_COORD_PID[a]}" || fail "a did not stop"
# Named with a's epoch; renamed as a coordinator before per-epoch logs
# named it, which every later one still reads (as epoch 0's).
mv "$f" "${PG_COORD_DATA[a]}/logs/$j0.log"

log "a again, with --blob-dir: the old log moves there"
pg_coord_start a --blob-dir "$BLOBS"
pg_coord_use a
wait_ready
export GPUPOOL_URL="$(pg_coord_url a),$(pg_coord_url b)"
[ -e "${PG_COORD_DATA[a]}/logs/$j0.log" ] && fail "job $j0's log stayed in a's data directory"
[ -s "$BLOBS/logs/$j0.log" ] || fail "job $j0's log is not in the blob directory"
assert_eq "$old_log" "$(log_of "$j0")" "job $j0's log after the move"
assert_contains "$(cat "$T/coord-a.log")" "moved job logs to the blob directory count=1" "a's log"
pg_coord_start b --blob-dir "$BLOBS"
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
pg_failover a b
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
compgen -G "$T/coord-b/logs/$j.*log" >/dev/null && fail "b wrote job $j's log into its own data directory"
echo "ok"
