# Proves job arrays (`gpupool submit --array`, POST /v1/jobs/array): one
# request makes one job per task index with consecutive ids, printed as
# FIRST-LAST; every task runs with GPUPOOL_ARRAY_JOB_ID (the first id) and
# GPUPOOL_ARRAY_TASK_ID (its index); ranges with a step and lists work; a
# bad spec, too many tasks, a repeated index, a bad %LIMIT or a job no
# node can run create no job at all; %LIMIT: at most LIMIT tasks run at
# once, the others wait held (with room to spare), and start as others end; a provider token may not submit an array; the
# array fields cannot be forged through POST /v1/jobs; queued tasks come
# back from a kill -9 of the coordinator as they were submitted.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

# next_id: the id the next job will get (the newest job's + 1).
next_id() {
	api "$ADMIN_TOKEN" GET "/v1/jobs?all=1"
	printf '%s' "$API_BODY" | json 'max([j["id"] for j in d["jobs"]] + [0]) + 1'
}

# --- a range with a step: ids consecutive, the environment per task
cli submit --array 0-6:3 --gpus 0 --name arr -- \
	sh -c 'echo "task=$GPUPOOL_ARRAY_TASK_ID array=$GPUPOOL_ARRAY_JOB_ID job=$GPUPOOL_JOB_ID"'
assert_eq 0 "$CLI_RC" "submit --array ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "submit --array printed '$CLI_OUT', not FIRST-LAST"
first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
assert_eq $((first + 2)) "$last" "three tasks (0, 3, 6): three consecutive ids"
k=0
for task in 0 3 6; do
	j=$((first + k))
	wait_final "$j"
	assert_eq succeeded "$FINAL_STATE" "task $task (job $j)"
	job_log "$j"
	assert_contains "$LOG" "task=$task array=$first job=$j" "task $task's environment"
	assert_eq "$task $first" "$(job_get "$j" 'str(d["array_task_id"]) + " " + str(d["array_job_id"])')" \
		"job $j shows its task and array"
	k=$((k + 1))
done

# --- a list, and one task: one id
cli submit --array 7 --gpus 0 -- true
assert_eq 0 "$CLI_RC" "submit --array of one task ($CLI_ERR)"
is_uint "$CLI_OUT" || fail "one task: printed '$CLI_OUT', not one id"
cli submit --array 1,5,2 --gpus 0 -- sh -c 'echo t=$GPUPOOL_ARRAY_TASK_ID'
assert_eq 0 "$CLI_RC" "submit --array of a list ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "a list: printed '$CLI_OUT'"
lf=${BASH_REMATCH[1]}
wait_final $((lf + 2))
job_log $((lf + 2))
assert_contains "$LOG" "t=5" "the list's tasks are made in ascending order"

# --- all or nothing: nothing is made for a refused array
before=$(next_id)
for bad in "0-10001" "1,1" "5-2" "0-9%0" "0-9%2,11" "0-9%10001" "x" "1-" "1000000"; do
	cli submit --array "$bad" --gpus 0 -- true
	assert_eq 2 "$CLI_RC" "--array $bad is a usage error ($CLI_ERR)"
	assert_contains "$CLI_ERR" "array" "--array $bad: the error names the option"
done
cli submit --array 0-9 --gpus 4 -- true
assert_eq 1 "$CLI_RC" "an array no node can run is refused"
assert_contains "$CLI_ERR" "can ever run" "why the array was refused"
assert_eq "" "$CLI_OUT" "no ids printed for a refused array"
cli submit --array 0-3 --wait -- true
assert_eq 2 "$CLI_RC" "--array with --wait is a usage error"
# the API checks too (a client other than the CLI)
api_expect 400 "$ADMIN_TOKEN" POST /v1/jobs/array '{"job":{"command":["true"],"gpus":0},"array":"0-20000"}'
assert_contains "$API_BODY" "more than 10000" "the API's limit"
api_expect 400 "$ADMIN_TOKEN" POST /v1/jobs/array '{"job":{"command":["true"],"gpus":0},"array":3}'
assert_error_body "array not a string"
api_expect 400 "$ADMIN_TOKEN" POST /v1/jobs/array '{"job":{"command":["true"],"gpus":0},"array":"0-1","x":1}'
assert_contains "$API_BODY" "unknown field" "an unknown field"
api_expect 400 "$ADMIN_TOKEN" POST /v1/jobs/array '{"job":{"command":["true"],"gpus":0,"bogus":1},"array":"0-1"}'
assert_error_body "a bad job spec"
api_expect 400 "$ADMIN_TOKEN" POST /v1/jobs '{"command":["true"],"gpus":0,"array_job_id":1,"array_task_id":0}'
assert_contains "$API_BODY" "set by the coordinator" "array fields cannot be forged"
api_expect 401 - POST /v1/jobs/array '{"job":{"command":["true"],"gpus":0},"array":"0-1"}'
mk_token provider alpha-owner
api_expect 403 "$TOKEN" POST /v1/jobs/array '{"job":{"command":["true"],"gpus":0},"array":"0-1"}'
assert_eq "$before" "$(next_id)" "no job was made by the refused arrays"

# --- an array is stored as one row, its tasks get rows of their own when
# they change: across a kill -9 of the coordinator, the queued tasks come
# back as submitted (index, array, name, command, environment, in queue
# order), a cancelled one stays cancelled, a job submitted after the array
# keeps its id, new ids follow; then the tasks run with their environment
cli submit --gpus 1 -- sleep 300
assert_eq 0 "$CLI_RC" "submit the blocker ($CLI_ERR)"
blocker=$CLI_OUT
wait_state "$blocker" running
cli submit --array 4,70,999999%3 --gpus 1 --name kept --env K=v -- \
	sh -c 'echo "t=$GPUPOOL_ARRAY_TASK_ID a=$GPUPOOL_ARRAY_JOB_ID k=$K"'
assert_eq 0 "$CLI_RC" "submit --array 4,70,999999 ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "4,70,999999: printed '$CLI_OUT'"
kf=${BASH_REMATCH[1]}
assert_eq queued "$(job_state "$kf")" "the tasks wait for the blocker"
cli cancel $((kf + 1))
assert_eq 0 "$CLI_RC" "cancel task 70 ($CLI_ERR)"
cli submit --gpus 1 --name after -- true
assert_eq 0 "$CLI_RC" "submit after the array ($CLI_ERR)"
assert_eq $((kf + 3)) "$CLI_OUT" "the next id after the array's"
kill9_coordinator
start_coordinator
for k in 0 2; do
	task=$([ $k = 0 ] && echo 4 || echo 999999)
	j=$((kf + k))
	assert_eq "queued $task $kf kept sh v" "$(job_get "$j" \
	    'd["state"] + " " + str(d["array_task_id"]) + " " + str(d["array_job_id"]) + " " + d["name"] + " " + d["command"][0] + " " + d["env"]["K"]')" \
	    "task $task (job $j) after the restart"
done
assert_eq 3 "$(job_get "$kf" 'd["array_limit"]')" "the array's limit after the restart"
assert_eq "cancelled 70" "$(job_get $((kf + 1)) 'd["state"] + " " + str(d["array_task_id"])')" \
	"the cancelled task after the restart"
assert_eq "queued after" "$(job_get $((kf + 3)) 'd["state"] + " " + d["name"]')" \
	"the job after the array, after the restart"
out=$("$GP" ps 2>/dev/null | awk -v a=$kf -v b=$((kf + 2)) -v c=$((kf + 3)) \
	'$1 == a || $1 == b || $1 == c {printf "%s ", $1}')
assert_eq "$kf $((kf + 2)) $((kf + 3)) " "$out" "the queue's order after the restart"
cli submit --gpus 0 -- true
assert_eq 0 "$CLI_RC" "submit after the restart ($CLI_ERR)"
assert_eq $((kf + 4)) "$CLI_OUT" "the next id after the restart"
cli cancel "$blocker"
assert_eq 0 "$CLI_RC" "cancel the blocker ($CLI_ERR)"
for k in 0 2; do
	task=$([ $k = 0 ] && echo 4 || echo 999999)
	j=$((kf + k))
	wait_final "$j"
	assert_eq succeeded "$FINAL_STATE" "task $task (job $j) after the restart"
	job_log "$j"
	assert_eq "t=$task a=$kf k=v" "$LOG" "task $task's environment after the restart"
done

# --- %LIMIT: at most LIMIT of the array's tasks run at once, with room for
# more (a node of 16 CPUs); the others wait, held, and start as others end
start_agent wide 1 --cpus 16
wait_node_up wide
# count_of STATE FIRST COUNT: how many of the jobs FIRST.. are in STATE, from
# one snapshot of the pool (one request: several requests, one a job, see
# different moments on a slow machine, and a task ending as another starts
# between two of them would be counted twice or not at all).
count_of() {
	api "$ADMIN_TOKEN" GET '/v1/jobs?all=1'
	printf '%s' "$API_BODY" | E2E_S=$1 E2E_A=$2 E2E_N=$3 json \
	    'sum(1 for j in d["jobs"] if int(__import__("os").environ["E2E_A"]) <= j["id"] < int(__import__("os").environ["E2E_A"]) + int(__import__("os").environ["E2E_N"]) and j["state"] == __import__("os").environ["E2E_S"])'
}
running_of() { count_of running "$@"; } # FIRST COUNT
# registrations NAME: how many times NAME registered (the coordinator's log).
registrations() { grep -c "node registered node=$1 " "$COORD_LOG"; }
cli submit --array 0-4%2 --gpus 0 --name lim -- sleep 300
assert_eq 0 "$CLI_RC" "submit --array 0-4%2 ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "0-4%2: printed '$CLI_OUT'"
lf=${BASH_REMATCH[1]}
assert_eq 2 "$(job_get "$lf" 'd["array_limit"]')" "the task shows its array's limit"
deadline=$((SECONDS + WAIT_S))
until [ "$(running_of "$lf" 5)" = 2 ]; do
	[ $SECONDS -ge $deadline ] && fail "two tasks of 0-4%2 not running after ${WAIT_S}s"
	sleep 0.1
done
# a job submitted after the array runs: there was room, passes ran
cli submit --gpus 0 -- true
assert_eq 0 "$CLI_RC" "submit beside the limited array ($CLI_ERR)"
wait_final "$CLI_OUT"
assert_eq succeeded "$FINAL_STATE" "the job beside the limited array"
assert_eq 2 "$(running_of "$lf" 5)" "at most 2 of 0-4%2 running"
held=$(job_get $((lf + 4)) 'd["state"] + ": " + (d["wait"] or {}).get("reason", "") + ": " + (d["wait"] or {}).get("why", "")')
assert_contains "$held" "queued: held: held: its array runs at most 2 tasks at once" \
	"a waiting task's reason"
# one ends: another starts, still two at once
for k in 0 1 2 3 4; do
	[ "$(job_state $((lf + k)))" = running ] && { first_running=$((lf + k)); break; }
done
cli cancel "$first_running"
assert_eq 0 "$CLI_RC" "cancel a running task ($CLI_ERR)"
wait_final "$first_running"
deadline=$((SECONDS + WAIT_S))
until [ "$(running_of "$lf" 5)" = 2 ]; do
	[ $SECONDS -ge $deadline ] && fail "no task of 0-4%2 took the ended one's place after ${WAIT_S}s"
	sleep 0.1
done
assert_eq 2 "$(count_of queued "$lf" 5)" "two tasks of 0-4%2 still wait"
# the limit holds across a coordinator restart: the running tasks count.
# The restarted coordinator knows the nodes from its database at once;
# wait until both agents have registered with it again (their running
# tasks reconciled), however long the machine takes, before judging.
reg_alpha=$(registrations alpha) reg_wide=$(registrations wide)
kill9_coordinator
start_coordinator
deadline=$((SECONDS + WAIT_S))
until [ "$(registrations alpha)" -gt "$reg_alpha" ] && [ "$(registrations wide)" -gt "$reg_wide" ]; do
	[ $SECONDS -ge $deadline ] && fail "the agents did not register again after the restart"
	sleep 0.1
done
wait_node_up alpha
wait_node_up wide
cli submit --gpus 0 -- true
assert_eq 0 "$CLI_RC" "submit after the restart ($CLI_ERR)"
wait_final "$CLI_OUT"
assert_eq 2 "$(running_of "$lf" 5)" "at most 2 of 0-4%2 running after a restart"
for k in 0 1 2 3 4; do
	"$GP" cancel $((lf + k)) >/dev/null 2>&1
done

# --- a big array in one request
cli submit --array 0-999 --gpus 0 --name big -- true
assert_eq 0 "$CLI_RC" "submit --array 0-999 ($CLI_ERR)"
[[ $CLI_OUT =~ ^([0-9]+)-([0-9]+)$ ]] || fail "0-999: printed '$CLI_OUT'"
assert_eq $((BASH_REMATCH[1] + 999)) "${BASH_REMATCH[2]}" "1000 consecutive ids"
assert_eq 999 "$(job_get "${BASH_REMATCH[2]}" 'd["array_task_id"]')" "the last task's index"

log "job arrays ok"
