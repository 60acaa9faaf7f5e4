# The live scheduler's queue (issue 5): fair share between groups orders the
# queue (a group that holds GPUs and has used them waits behind one that
# has not, whatever the submission order); every queued job carries the
# scheduler's reason, shown by GET /v1/queue, `gpupool queue` (position,
# reason, why, and the expected start of the job holding the backfill
# reservation), `ps` and `show`; a job no node could ever run is refused at
# submission with why.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/acct_lib.sh"

start_coordinator --accrual-interval 1s
cli group create lab-a
assert_eq 0 "$CLI_RC" "group create lab-a ($CLI_ERR)"
cli group create lab-b
assert_eq 0 "$CLI_RC" "group create lab-b ($CLI_ERR)"
acct_token user alice lab-a
alice=$TOKEN
acct_token user bob lab-b
bob=$TOKEN
start_agent p 1
wait_node_up p

# alice (lab-a) holds the pool's one GPU, with a time limit
new_marker
mk=$MARK
GPUPOOL_TOKEN=$alice submit --gpus 1 --time 2m --name busy -- bash -c 'exec -a "$0" sleep 300' "$mk"
busy=$JOB
wait_state "$busy" running
wait_count argv0 "$mk" 1
# then alice queues another, and only after that bob
GPUPOOL_TOKEN=$alice submit --gpus 1 --name a2 -- true
a2=$JOB
GPUPOOL_TOKEN=$bob submit --gpus 1 --name b1 -- true
b1=$JOB

# both wait, bob's first: lab-b has used nothing, lab-a holds the GPU
deadline=$((SECONDS + WAIT_S))
while :; do
	api_expect 200 "$ADMIN_TOKEN" GET /v1/queue
	order=$(printf '%s' "$API_BODY" | json '" ".join("%d:%d:%s" % (j["id"], j["position"], j["reason"]) for j in d["jobs"])')
	case $order in "$b1:1:"*" $a2:2:"*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "queue order: $order (want $b1 then $a2): $API_BODY"
	sleep 0.1
done
assert_eq 2 "$(printf '%s' "$API_BODY" | json 'd["queued"]')" "queued count"
assert_eq "$b1" "$(printf '%s' "$API_BODY" | json 'd["head"]')" "the head (reservation)"
head_start=$(printf '%s' "$API_BODY" | json '[j["expected_start"] for j in d["jobs"] if j["id"] == d["head"]][0]')
busy_start=$(job_get "$busy" 'd["started_at"]')
# the reservation: when busy's time limit runs out
E2E_A=$busy_start E2E_B=$head_start "$PY" -c '
import os, datetime as t
f = lambda s: t.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
d = (f(os.environ["E2E_B"]) - f(os.environ["E2E_A"])).total_seconds()
assert 119 <= d <= 121, d' || fail "head's expected start $head_start is not busy's start $busy_start + 2m"
assert_eq resources "$(job_get "$b1" 'd["wait"]["reason"]')" "b1's reason"
assert_eq 1 "$(job_get "$b1" 'd["wait"]["position"]')" "b1's position"
assert_eq "$head_start" "$(job_get "$b1" 'd["wait"]["expected_start"]')" "b1's expected start"
assert_eq True "$(job_get "$busy" '"%s" % (d["wait"] is None)')" "a running job has no wait"

cli queue
assert_eq 0 "$CLI_RC" "queue ($CLI_ERR)"
[[ $CLI_OUT =~ (^|$'\n')\ *1\ +$b1\ +b1\ +bob\ +lab-b\ +1\ +resources\ + ]] || fail "queue's first row: $CLI_OUT"
[[ $CLI_OUT =~ (^|$'\n')\ *2\ +$a2\ +a2\ +alice\ +lab-a\ +1\ +[a-z]+\ + ]] || fail "queue's second row: $CLI_OUT"
assert_contains "$CLI_OUT" "job $b1 holds the reservation: expected start $head_start" "queue's head line"
cli queue --json
assert_eq "$b1" "$(printf '%s' "$CLI_OUT" | json 'd["jobs"][0]["id"]')" "queue --json"
# a user sees only their own jobs, in the same order
GPUPOOL_TOKEN=$alice cli queue --json
assert_eq "$a2" "$(printf '%s' "$CLI_OUT" | json '",".join(str(j["id"]) for j in d["jobs"])')" "alice's queue"
assert_eq 2 "$(printf '%s' "$CLI_OUT" | json 'd["jobs"][0]["position"]')" "alice's job keeps its place"
cli ps
[[ $CLI_OUT =~ (^|$'\n')\ *$b1\ +b1\ +bob\ +lab-b\ +queued\ +-\ +1\ +-\ +resources ]] || fail "ps's WAIT column: $CLI_OUT"
cli show "$b1"
assert_contains "$CLI_OUT" "wait: resources (" "show's wait line"
assert_contains "$CLI_OUT" "position 1; expected start $head_start" "show's wait line"

# never: refused at submission, with why
cli submit --gpus 2 -- true
assert_eq 1 "$CLI_RC" "a job no node could ever run"
assert_contains "$CLI_ERR" "no node in the pool can ever run this job" "why"

# the GPU frees: bob's job runs first, then alice's
cli cancel "$busy"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait_state "$b1" succeeded
wait_state "$a2" succeeded
s1=$(job_get "$b1" 'd["started_at"]')
s2=$(job_get "$a2" 'd["started_at"]')
[[ "$s1" < "$s2" ]] || fail "b1 started at $s1, not before a2 at $s2"
api_expect 200 "$ADMIN_TOKEN" GET /v1/queue
assert_eq '0 None 0' "$(printf '%s' "$API_BODY" | json '"%d %s %d" % (d["queued"], d["head"], len(d["jobs"]))')" "the empty queue"
echo ok
