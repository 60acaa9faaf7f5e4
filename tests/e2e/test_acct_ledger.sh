# Proves the pay-as-you-go books end to end: two labs (groups), each lending
# a node through its own provider token and each with a user; prices from a
# --prices file; each user's job runs on the other lab's GPUs. The ledger
# then credits the provider whose node ran the job and debits the user who
# ran it, tagged with the right groups; every posting balances and so do
# the books (`usage`: balance 0); the amounts are exactly price x time.
# Postings accrue while a job runs (--accrual-interval), not only at its
# end (here a cancel). Groups show in nodes, ps, show, whoami and `group
# ls`; a user sees only their own usage, a provider only what it was paid;
# `submit --group` needs membership (`group add`), and `group move
# --provider` moves a lab's node.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/acct_lib.sh"

# 3.6 credits an hour is one micro-credit a millisecond.
printf '# test prices\nA100 3.6\nT4 0.36\ndefault 1\n' >"$T/prices"
start_coordinator --accrual-interval 1s --prices "$T/prices"

cli price ls
assert_eq 0 "$CLI_RC" "price ls ($CLI_ERR)"
assert_contains "$CLI_OUT" "A100                  3.6" "price ls"
assert_contains "$CLI_OUT" "T4                   0.36" "price ls"

cli group create lab-a --weight 2
assert_eq 0 "$CLI_RC" "group create lab-a ($CLI_ERR)"
cli group create lab-b
assert_eq 0 "$CLI_RC" "group create lab-b ($CLI_ERR)"
cli group create lab-a
assert_eq 1 "$CLI_RC" "creating lab-a twice"
assert_contains "$CLI_ERR" "exists" "creating lab-a twice"
cli token create --role user --name nobody-here --group lab-z
assert_eq 1 "$CLI_RC" "a token for a group that does not exist"
assert_contains "$CLI_ERR" "no group 'lab-z'" "token for lab-z"

acct_provider a prov-a lab-a
acct_provider b prov-b lab-b
acct_token user alice lab-a
alice=$TOKEN
acct_token user bob lab-b
bob=$TOKEN
start_agent a 2:A100:40960
start_agent b 2:T4:16384
wait_node_up a
wait_node_up b

cli nodes
assert_eq 0 "$CLI_RC" "nodes ($CLI_ERR)"
assert_contains "$CLI_OUT" "GROUP" "nodes header"
[[ $CLI_OUT =~ (^|$'\n')a\ +lab-a\ +up ]] || fail "nodes: a is not lab-a's: $CLI_OUT"
[[ $CLI_OUT =~ (^|$'\n')b\ +lab-b\ +up ]] || fail "nodes: b is not lab-b's: $CLI_OUT"
GPUPOOL_TOKEN=$alice cli whoami
assert_contains "$CLI_OUT" "groups lab-a" "alice's whoami"

# alice (lab-a) borrows lab-b's T4; bob (lab-b) borrows lab-a's two A100s
new_marker
ma=$MARK
GPUPOOL_TOKEN=$alice submit --gpu-model T4 -- bash -c 'exec -a "$0" sleep 300' "$ma"
ja=$JOB
GPUPOOL_TOKEN=$bob submit --gpu-model A100 --gpus 2 -- sleep 2
jb=$JOB
wait_state "$ja" running
# the books are current while it runs: accruals before the end
deadline=$((SECONDS + WAIT_S))
while :; do
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?job=$ja"
	n=$(printf '%s' "$API_BODY" | json 'len([p for p in d["postings"] if p["kind"] == "accrual"])')
	[ "$n" -ge 2 ] && break
	[ $SECONDS -ge $deadline ] && fail "no accruals for running job $ja: $API_BODY"
	sleep 0.2
done
assert_eq running "$(job_state "$ja")" "job $ja while accruing"
assert_eq 1 "$(count_argv0 "$ma")" "job $ja's process while accruing"
GPUPOOL_TOKEN=$alice cli ps
assert_contains "$CLI_OUT" "GROUP" "ps header"
[[ $CLI_OUT =~ alice\ +lab-a\ +running ]] || fail "ps: alice's job not lab-a's: $CLI_OUT"
# its end (a cancel) posts the remainder
cli cancel "$ja"
assert_eq 0 "$CLI_RC" "cancel $ja ($CLI_ERR)"
wait_final "$ja"
assert_eq cancelled "$FINAL_STATE" "job $ja"
wait_final "$jb"
assert_eq succeeded "$FINAL_STATE" "job $jb"

# every posting whole, on the right accounts, exactly price x time
EXPECT="alice lab-a prov-b lab-b" ledger_check "$ja" $((360000 * 1000))
[ "$BILLED_MS" -ge 2000 ] || fail "job $ja billed only $BILLED_MS ms for 2 accruals"
[ "$POSTINGS" -ge 3 ] || fail "job $ja: $POSTINGS postings"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?job=$ja"
assert_eq final "$(printf '%s' "$API_BODY" | json 'd["postings"][-1]["kind"]')" "job $ja's last posting"
cost_a=$COST
assert_eq $((BILLED_MS / 10)) "$cost_a" "job $ja's cost (T4 at 0.36/h: 0.1 micro-credit a ms)"
EXPECT="bob lab-b prov-a lab-a" ledger_check "$jb" $((2 * 3600000 * 1000))
cost_b=$COST
assert_eq $((BILLED_MS * 2)) "$cost_b" "job $jb's cost (2 A100 at 3.6/h)"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$ja"
assert_eq "lab-a $cost_a" "$(printf '%s' "$API_BODY" | json '"%s %d" % (d["group"], d["cost_micro"])')" "job $ja's group and cost"
cli show "$ja"
assert_contains "$CLI_OUT" "group: lab-a" "show $ja"
assert_contains "$CLI_OUT" "cost: " "show $ja"

# the whole books: who paid whom, by group, balanced
api_expect 200 "$ADMIN_TOKEN" GET /v1/usage
usage() { printf '%s' "$API_BODY" | json "$1"; }
assert_eq 0 "$(usage 'd["totals"]["balance_micro"]')" "the books' balance"
assert_eq $((cost_a + cost_b)) "$(usage 'd["totals"]["credits_micro"]')" "credits in all"
assert_eq "alice/lab-a=$cost_a bob/lab-b=$cost_b" "$(usage '" ".join("%s/%s=%d" % (u["user"], u["group"], u["spent_micro"]) for u in sorted(d["users"], key=lambda u: u["user"]))')" "what users paid"
assert_eq "prov-a/lab-a=$cost_b prov-b/lab-b=$cost_a" "$(usage '" ".join("%s/%s=%d" % (p["provider"], p["group"], p["earned_micro"]) for p in sorted(d["providers"], key=lambda p: p["provider"]))')" "what providers were paid"
nets=$(printf '%s' "$API_BODY" | json '" ".join("%s=%d" % (g["group"], g["net_micro"]) for g in sorted(d["groups"], key=lambda g: g["group"]))')
assert_eq "lab-a=$((cost_b - cost_a)) lab-b=$((cost_a - cost_b))" "$nets" "groups' net (earned - spent)"
cli usage
assert_eq 0 "$CLI_RC" "usage ($CLI_ERR)"
assert_contains "$CLI_OUT" "balance 0" "usage's totals line"
cli ledger --job "$ja"
assert_eq 0 "$CLI_RC" "ledger ($CLI_ERR)"
assert_contains "$CLI_OUT" "user:alice" "ledger's debit"
assert_contains "$CLI_OUT" "provider:prov-b" "ledger's credit"

# who may see what
GPUPOOL_TOKEN=$alice cli usage --json
assert_eq 0 "$CLI_RC" "alice's usage ($CLI_ERR)"
assert_eq "alice" "$(printf '%s' "$CLI_OUT" | json '",".join(u["user"] for u in d["users"])')" "alice sees only herself"
GPUPOOL_TOKEN=$alice cli usage --user bob
assert_eq 1 "$CLI_RC" "alice asking for bob's usage"
GPUPOOL_TOKEN=$alice cli usage --group lab-b
assert_eq 1 "$CLI_RC" "alice asking for lab-b's usage"
GPUPOOL_TOKEN=$(cat "$T/b.token") cli usage --json
assert_eq "prov-b" "$(printf '%s' "$CLI_OUT" | json '",".join(p["provider"] for p in d["providers"])')" "prov-b sees what it was paid"
api_expect 403 "$alice" POST /v1/groups '{"name":"mine"}'
api_expect 403 "$alice" POST /v1/prices '{"class":"T4","price_micro":0}'

# --group needs membership; then the posting is tagged with that group
GPUPOOL_TOKEN=$alice cli submit --group lab-b -- true
assert_eq 1 "$CLI_RC" "alice submitting for lab-b"
assert_contains "$CLI_ERR" "not a member" "alice submitting for lab-b"
cli group add lab-b alice
assert_eq 0 "$CLI_RC" "group add ($CLI_ERR)"
GPUPOOL_TOKEN=$alice submit --group lab-b --gpu-model A100 -- sleep 1
jc=$JOB
wait_final "$jc"
EXPECT="alice lab-b prov-a lab-a" ledger_check "$jc" $((3600000 * 1000))
GPUPOOL_TOKEN=$alice cli whoami
assert_contains "$CLI_OUT" "groups lab-a,lab-b" "alice's groups, her first first"

cli group ls --json
assert_eq 0 "$CLI_RC" "group ls ($CLI_ERR)"
assert_eq "lab-a:2:alice:prov-a:a" "$(printf '%s' "$CLI_OUT" | json '[":".join([g["name"], str(g["weight"]), ",".join(g["members"]), ",".join(g["providers"]), ",".join(g["nodes"])]) for g in d["groups"] if g["name"] == "lab-a"][0]')" "lab-a in group ls"
used=$(printf '%s' "$CLI_OUT" | json '[g["decayed_usage"]["gpu_s"] for g in d["groups"] if g["name"] == "lab-a"][0] > 0')
assert_eq true "$used" "lab-a's decayed usage"

# a lab's provider moves: its node follows
cli group move lab-a --provider prov-b
assert_eq 0 "$CLI_RC" "group move ($CLI_ERR)"
cli nodes
[[ $CLI_OUT =~ (^|$'\n')b\ +lab-a\ +up ]] || fail "nodes: b did not move to lab-a: $CLI_OUT"
cli group set lab-b --weight 5
assert_eq 0 "$CLI_RC" "group set ($CLI_ERR)"

# the same books after a restart
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" || fail "coordinator did not stop"
start_coordinator --accrual-interval 1s --prices "$T/prices"
EXPECT="alice lab-a prov-b lab-b" ledger_check "$ja" $((360000 * 1000))
assert_eq "$cost_a" "$COST" "job $ja's cost after a restart"
api_expect 200 "$ADMIN_TOKEN" GET /v1/usage
assert_eq 0 "$(printf '%s' "$API_BODY" | json 'd["totals"]["balance_micro"]')" "balance after a restart"
echo ok
