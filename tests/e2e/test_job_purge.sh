#!/usr/bin/env bash
# test_job_purge.sh: finished jobs leave the coordinator's memory after
# --min-job-age (as Slurm's MinJobAge) and are still answered for, from
# state.db. Jobs that succeed (with a stored output), fail, are cancelled
# while queued, and an array's tasks are recorded under --min-job-age 0
# (kept for ever: nothing leaves memory); after a restart with
# --min-job-age 1 the metrics say they left memory (a restart does not
# load them back) while show, wait, logs, ps --all, the output, the
# ledger, a cancel and an agent's report for them answer exactly as
# before. A running and a queued job never leave, however old; a running
# job with a `logs -f` follower attached ends and its follower still gets
# the whole log; once ended, both leave memory too. A third start does not
# bring anything back, no array task comes back queued, the newest N
# jobs (?all=1&limit=N, the dashboard's list) come from disk too, and a
# new job gets a new id (ids of jobs on disk are never given again).
. "$(dirname "$0")/lib.sh"

# metric NAME: the value of an unlabelled sample of GET /metrics.
metric() {
	api_expect 200 "$ADMIN_TOKEN" GET /metrics
	printf '%s\n' "$API_BODY" | awk -v n="$1" '$1 == n { print $2 }'
}

# wait_metric NAME VALUE: bounded poll until the metric says VALUE.
wait_metric() {
	local deadline=$((SECONDS + WAIT_S)) v
	while :; do
		v=$(metric "$1")
		[ "$v" = "$2" ] && return 0
		[ $SECONDS -ge $deadline ] && fail "$1 is $v, not $2, after ${WAIT_S}s"
		sleep 0.2
	done
}

# answers J: everything a user can ask about job J, one line each.
answers() {
	local j=$1
	api "$ALICE" GET "/v1/jobs/$j"
	echo "show $API_STATUS $API_BODY"
	api "$ALICE" GET "/v1/jobs/$j/wait?wait_ms=20000"
	echo "wait $API_STATUS $API_BODY"
	api "$ALICE" GET "/v1/jobs/$j/log?offset=0"
	echo "log $API_STATUS $API_BODY $(grep -i '^X-Gpupool' "$API_HEADERS" | tr -d '\r' | sort | tr '\n' ' ')"
	api "$ALICE" GET "/v1/jobs/$j/output"
	echo "output $API_STATUS $API_BODY"
	api "$ADMIN_TOKEN" GET "/v1/ledger?job=$j"
	echo "ledger $API_STATUS $API_BODY"
	api "$ALICE" GET "/v1/jobs/$j/checkpoints"
	echo "checkpoints $API_STATUS $API_BODY"
	api "$ALICE" POST "/v1/jobs/$j/cancel"
	echo "cancel $API_STATUS $API_BODY"
	api "$BOB" GET "/v1/jobs/$j"
	echo "bob $API_STATUS $API_BODY"
	api "$PROV" POST "/v1/agent/jobs/$j/1/finished" \
	    "{\"node_id\":$NODE,\"exit_code\":0}"
	echo "report $API_STATUS $API_BODY"
	GPUPOOL_TOKEN=$ALICE cli wait "$j"
	echo "cli-wait $CLI_RC $CLI_OUT"
	GPUPOOL_TOKEN=$ALICE cli logs "$j"
	echo "cli-logs $CLI_RC $CLI_OUT"
	GPUPOOL_TOKEN=$ALICE cli show "$j"
	echo "cli-show $CLI_RC $CLI_OUT"
}

# every_answer: the answers about every job of FINISHED, and their
# entries and lines in ps --all (a running job's age moves on).
every_answer() {
	local j
	for j in $FINISHED; do
		answers "$j"
	done
	GPUPOOL_TOKEN=$ALICE cli ps --all --json
	echo "ps $CLI_RC $(printf '%s' "$CLI_OUT" | E2E_IDS=$FINISHED json \
	    '[j for j in d["jobs"] if str(j["id"]) in __import__("os").environ["E2E_IDS"].split()]')"
	GPUPOOL_TOKEN=$ALICE cli ps --all
	echo "ps-text $CLI_RC $(printf '%s\n' "$CLI_OUT" |
	    awk -v ids=" $FINISHED " 'NR == 1 || index(ids, " " $1 " ")')"
}

start_coordinator --min-job-age 0
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
start_agent a1 2
wait_node_up a1
PROV=$(cat "$T/a1.token")
NODE=$(api "$ADMIN_TOKEN" GET /v1/nodes && printf '%s' "$API_BODY" | json 'd["nodes"][0]["id"]')
is_uint "$NODE" || fail "no node id: $NODE"
export GPUPOOL_TOKEN=$ALICE

# --- jobs that end every way, while nothing may leave memory
# shellcheck disable=SC2016 # expanded by the job's shell
submit --gpus 1 -- sh -c 'echo ok-out; echo result >"$GPUPOOL_OUTPUT_DIR/a.txt"'
J_OK=$JOB
submit --gpus 0 -- sh -c 'echo fail-out; exit 3'
J_FAIL=$JOB
cli submit --array 0-2 --gpus 0 -- sh -c 'echo "task=$GPUPOOL_ARRAY_TASK_ID"'
assert_eq 0 "$CLI_RC" "submit --array ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "submit --array printed '$CLI_OUT'"
A_FIRST=${BASH_REMATCH[1]} A_LAST=${BASH_REMATCH[2]}
for j in $J_OK $J_FAIL $(seq "$A_FIRST" "$A_LAST"); do
	wait_final "$j"
done
assert_eq succeeded "$(job_state "$J_OK")" "the job that succeeds"
assert_eq failed "$(job_state "$J_FAIL")" "the job that exits 3"
api_expect 200 "$ALICE" GET "/v1/jobs/$J_OK/output"

# a running job (one GPU) and a queued one (two GPUs) behind it
new_marker
M_RUN=$MARK
submit --gpus 1 -- bash -c 'echo run-out; exec -a "$0" sleep 300' "$M_RUN"
J_RUN=$JOB
wait_state "$J_RUN" running
submit --gpus 2 -- sh -c 'echo queued-out'
J_Q=$JOB
assert_eq queued "$(job_state "$J_Q")" "a two-GPU job behind a running one"
submit --gpus 2 -- true
J_QC=$JOB
cli cancel "$J_QC"
assert_eq 0 "$CLI_RC" "cancel of a queued job ($CLI_ERR)"
wait_state "$J_QC" cancelled

FINISHED="$J_OK $J_FAIL $(seq -s ' ' "$A_FIRST" "$A_LAST") $J_QC"
every_answer >"$T/before"
grep -q '^show 200 ' "$T/before" || fail "no answer recorded: $(head -3 "$T/before")"
assert_eq 0 "$(metric gpupool_jobs_purged_total)" "jobs purged under --min-job-age 0"
assert_eq 8 "$(metric gpupool_jobs_in_memory)" "jobs in memory under --min-job-age 0"

# --- a restart with --min-job-age 1: the finished jobs stay on disk
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "coordinator did not stop"
sleep 1.1 # every finished job is now more than a second old
start_coordinator --min-job-age 1
# (start-up itself left them on disk, not the state thread a moment later)
assert_contains "$(grep 'state loaded' "$COORD_LOG" | tail -1)" \
	"jobs=8 in_memory=2 " "what the second start loaded"
wait_node_up a1
wait_metric gpupool_jobs_in_memory 2
every_answer >"$T/after"
diff "$T/before" "$T/after" >"$T/diff" ||
	fail "answers changed once the jobs left memory: $(head -c 3000 "$T/diff")"
api_expect 200 "$ADMIN_TOKEN" GET /metrics
assert_contains "$API_BODY" 'gpupool_jobs{state="succeeded"} 4' "succeeded jobs still counted"
assert_contains "$API_BODY" 'gpupool_jobs{state="cancelled"} 1' "cancelled jobs still counted"

# --- running and queued jobs never leave, however old
sleep 1.5
assert_eq running "$(job_state "$J_RUN")" "the running job after its min-job-age"
assert_eq queued "$(job_state "$J_Q")" "the queued job after its min-job-age"
assert_eq 2 "$(metric gpupool_jobs_in_memory)" "running and queued jobs in memory"

# --- a follower of the running job sees it end, then both leave memory
"$GP" logs -f "$J_RUN" >"$T/follow.out" 2>"$T/follow.err" </dev/null &
FOLLOW=$!
deadline=$((SECONDS + WAIT_S))
until grep -q run-out "$T/follow.out"; do
	[ $SECONDS -ge $deadline ] && fail "logs -f printed nothing: $(cat "$T/follow.err")"
	sleep 0.1
done
cli cancel "$J_RUN"
assert_eq 0 "$CLI_RC" "cancel of the running job ($CLI_ERR)"
wait_exit "$FOLLOW" || fail "logs -f still runs after the job ended"
wait "$FOLLOW"
assert_eq 0 "$?" "logs -f exit status ($(cat "$T/follow.err"))"
assert_contains "$(cat "$T/follow.out")" run-out "the follower's output"
wait_count cmdline "$M_RUN" 0 10
wait_final "$J_Q"
assert_eq succeeded "$FINAL_STATE" "the queued job, once it ran"
wait_metric gpupool_jobs_in_memory 0
assert_eq cancelled "$(job_state "$J_RUN")" "the cancelled job, from disk"
job_log "$J_Q"
assert_contains "$LOG" queued-out "the queued job's log, from disk"
cli wait "$J_Q"
assert_eq 0 "$CLI_RC" "wait on a job that left memory"

# --- a third start brings nothing back; ids are never given twice
kill -KILL "$COORD_PID"
wait_exit "$COORD_PID" || fail "coordinator survived SIGKILL"
start_coordinator --min-job-age 1
assert_contains "$(grep 'state loaded' "$COORD_LOG" | tail -1)" \
	"jobs=8 in_memory=0 " "what the third start loaded"
assert_eq 0 "$(metric gpupool_jobs_in_memory)" "jobs in memory after a restart"
api_expect 200 "$ADMIN_TOKEN" GET /metrics
assert_contains "$API_BODY" 'gpupool_jobs{state="queued"} 0' "no job came back queued"
for j in $(seq "$A_FIRST" "$A_LAST"); do
	assert_eq succeeded "$(job_state "$j")" "array task $j after restarts"
done
every_answer >"$T/again"
diff "$T/before" "$T/again" >"$T/diff" ||
	fail "answers changed after a restart: $(head -c 3000 "$T/diff")"
# the dashboard's list: only the newest N (in id order), from disk too
api_expect 200 "$ALICE" GET "/v1/jobs?all=1&limit=2"
assert_eq "[$J_Q, $J_QC]" "$(printf '%s' "$API_BODY" | json '[j["id"] for j in d["jobs"]]')" \
	"the two newest jobs"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs?all=1&limit=100"
assert_eq "$(seq -s ', ' 1 "$J_QC")" \
	"$(printf '%s' "$API_BODY" | json '", ".join(str(j["id"]) for j in d["jobs"])')" \
	"a limit above the count: every job"
api_expect 400 "$ALICE" GET "/v1/jobs?all=1&limit=-1"
# the CLI's way to it
GPUPOOL_TOKEN=$ALICE cli ps --all --last 2 --json
assert_eq "0 [$J_Q, $J_QC]" "$CLI_RC $(printf '%s' "$CLI_OUT" | json '[j["id"] for j in d["jobs"]]')" \
	"ps --all --last 2"
GPUPOOL_TOKEN=$ALICE cli ps --last 2
[ "$CLI_RC" = 2 ] || fail "ps --last without --all: exit $CLI_RC"
assert_contains "$CLI_ERR" "--last needs --all" "ps --last without --all"
GPUPOOL_TOKEN=$ALICE cli ps --all --last 0
[ "$CLI_RC" = 2 ] || fail "ps --all --last 0: exit $CLI_RC"
assert_contains "$CLI_ERR" "not a positive number of jobs" "ps --all --last 0"
wait_node_up a1
submit --gpus 0 -- true
assert_eq $((J_QC + 1)) "$JOB" "the next job's id"
echo ok
