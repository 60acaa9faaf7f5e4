# Proves budgets and --max-price: a job that may cost more than its user's
# (or group's) budget has left is held, not refused, with the reason in ps
# and show, while cheaper jobs behind it run; raising the budget (or
# removing it) releases it. A job without a time limit is estimated at
# --budget-untimed. `submit --max-price` keeps a job off dearer GPUs, and a
# price no GPU in the pool meets is refused at submission.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/acct_lib.sh"

start_coordinator --accrual-interval 1s --budget-untimed 30m
cli price set A100 3.6
assert_eq 0 "$CLI_RC" "price set A100 ($CLI_ERR)"
cli price set T4 0.36
assert_eq 0 "$CLI_RC" "price set T4 ($CLI_ERR)"
cli price set T4 bad
assert_eq 2 "$CLI_RC" "price set with a bad price"
cli group create lab-a
acct_provider a prov-a lab-a
acct_provider b prov-b default
acct_token user alice lab-a
alice=$TOKEN
acct_token user bob lab-a
bob=$TOKEN
start_agent a 1:A100:40960
start_agent b 1:T4:16384
wait_node_up a
wait_node_up b

# 0.01 credits a month for alice: an hour of A100 (3.6) is far beyond it
cli budget set 0.01 --user alice
assert_eq 0 "$CLI_RC" "budget set ($CLI_ERR)"
GPUPOOL_TOKEN=$alice submit --gpu-model A100 --time 1h -- echo big
big=$JOB
deadline=$((SECONDS + WAIT_S))
until [ "$(job_get "$big" 'd["hold_reason"] or ""')" != "" ]; do
	[ $SECONDS -ge $deadline ] && fail "job $big not held: $(job_get "$big" d)"
	sleep 0.2
done
reason=$(job_get "$big" 'd["hold_reason"]')
assert_contains "$reason" "budget: user alice has 0.01 of 0.01 credits left this month; the job may cost 3.6" "hold reason"
assert_eq queued "$(job_state "$big")" "a held job is queued, not refused"
GPUPOOL_TOKEN=$alice cli ps
[[ $CLI_OUT =~ $big\ +echo\ +alice\ +lab-a\ +held ]] || fail "ps does not show job $big held: $CLI_OUT"
GPUPOOL_TOKEN=$alice cli show "$big"
assert_contains "$CLI_OUT" "held: budget: user alice" "show $big"

# what fits runs meanwhile: ten seconds of T4 may cost 0.001
GPUPOOL_TOKEN=$alice submit --gpu-model T4 --time 10s -- echo small
small=$JOB
wait_final "$small"
assert_eq succeeded "$FINAL_STATE" "a job within the budget"
# without a time limit: 30 minutes (--budget-untimed) of T4, 0.18: held
GPUPOOL_TOKEN=$alice submit --gpu-model T4 -- echo untimed
untimed=$JOB
deadline=$((SECONDS + WAIT_S))
until [ "$(job_get "$untimed" 'd["hold_reason"] or ""')" != "" ]; do
	[ $SECONDS -ge $deadline ] && fail "untimed job $untimed not held: $(job_get "$untimed" d)"
	sleep 0.2
done
assert_contains "$(job_get "$untimed" 'd["hold_reason"]')" "the job may cost 0.18" "untimed job's estimate"
# bob, in the same group but without a budget of his own, is not held
GPUPOOL_TOKEN=$bob submit --gpu-model T4 --time 1h -- echo bob
wait_final "$JOB"
assert_eq succeeded "$FINAL_STATE" "bob's job"

cli budget ls --json
assert_eq 0 "$CLI_RC" "budget ls ($CLI_ERR)"
spent=$(printf '%s' "$CLI_OUT" | json '[b["spent_micro"] for b in d["budgets"] if b["name"] == "alice"][0]')
ledger_check "$small" $((360000 * 1000))
assert_eq "$COST" "$spent" "alice's spending is her small job's cost"
cli budget ls
assert_contains "$CLI_OUT" "user  alice" "budget ls"

# a raise releases both
cli budget set 10 --user alice
assert_eq 0 "$CLI_RC" "budget raise ($CLI_ERR)"
wait_final "$big"
assert_eq succeeded "$FINAL_STATE" "job $big after the raise"
wait_final "$untimed"
assert_eq succeeded "$FINAL_STATE" "untimed job after the raise"

# a group budget holds every member's jobs; removing it releases them
cli budget set 0 --group lab-a --period day
assert_eq 0 "$CLI_RC" "group budget ($CLI_ERR)"
GPUPOOL_TOKEN=$bob submit --gpu-model T4 --time 1m -- echo held-by-group
g=$JOB
deadline=$((SECONDS + WAIT_S))
until [ "$(job_get "$g" 'd["hold_reason"] or ""')" != "" ]; do
	[ $SECONDS -ge $deadline ] && fail "job $g not held by the group budget"
	sleep 0.2
done
assert_contains "$(job_get "$g" 'd["hold_reason"]')" "budget: group lab-a has 0 of 0 credits left today" "group hold"
cli budget rm --group lab-a
assert_eq 0 "$CLI_RC" "budget rm ($CLI_ERR)"
wait_final "$g"
assert_eq succeeded "$FINAL_STATE" "job $g after the group budget went"
cli budget rm --group lab-a
assert_eq 1 "$CLI_RC" "removing a budget twice"

# --max-price: the A100 (3.6) is dearer than 1 credit an hour: the T4 it is
GPUPOOL_TOKEN=$bob submit --max-price 1 -- echo cheap
cheap=$JOB
wait_final "$cheap"
assert_eq "succeeded b" "$(job_get "$cheap" '"%s %s" % (d["state"], d["node"])')" "max-price job's node"
assert_eq 1000000 "$(job_get "$cheap" 'd["request"]["max_price_micro"]')" "max_price in the request"
# ... even when the T4 is busy and the A100 idle: it waits for the T4
new_marker
m=$MARK
GPUPOOL_TOKEN=$bob submit --gpu-model T4 -- bash -c 'exec -a "$0" sleep 300' "$m"
hog=$JOB
wait_state "$hog" running
GPUPOOL_TOKEN=$bob submit --max-price 1 -- echo waits
waits=$JOB
sleep 1
assert_eq queued "$(job_state "$waits")" "a max-price job while the cheap GPU is busy"
cli cancel "$hog"
wait_final "$waits"
assert_eq "succeeded b" "$(job_get "$waits" '"%s %s" % (d["state"], d["node"])')" "max-price job once the T4 is free"
# nothing in the pool is that cheap: refused at once
GPUPOOL_TOKEN=$bob cli submit --max-price 0.1 -- echo never
assert_eq 1 "$CLI_RC" "a max price no GPU meets"
assert_contains "$CLI_ERR" "can ever run" "a max price no GPU meets"
GPUPOOL_TOKEN=$bob cli submit --max-price 0 -- echo zero
assert_eq 2 "$CLI_RC" "--max-price 0"
echo ok
