#!/usr/bin/env bash
# test_contain_submit_retry.sh: submissions are idempotent (issue 15,
# finding 6). Four submitters of an ordinary user submit 15 jobs each while
# the coordinator is killed (kill -9) and restarted three times: every
# submission succeeds (the CLI sends a key with each and, when the answer
# is lost, sends it again, unchanged, until the coordinator is back), every
# printed id exists once with its own command, and no job exists that its
# submitter was not told about (none of a submission reported failed). A
# POST repeated with its key, also across a kill -9, answers the first id
# and makes no job; a key of the wrong form is refused.
. "$(dirname "$0")/lib.sh"

start_coordinator
mk_token user alice
ALICE=$TOKEN
start_agent a1 1
wait_node_up a1
N=15

submitters=()
for w in 1 2 3 4; do
	(
		for i in $(seq 1 $N); do
			if out=$(GPUPOOL_TOKEN=$ALICE "$GP" submit --gpus 0 --name "r$w-$i" -- echo "job-$w-$i" 2>>"$T/submit-$w.err"); then
				echo "ok $out r$w-$i"
			else
				echo "failed - r$w-$i"
			fi
		done >"$T/ids-$w"
	) &
	submitters+=($!)
done
# Three kills while they submit, each after some submissions went through.
for k in 1 2 3; do
	deadline=$((SECONDS + WAIT_S))
	until [ "$(cat "$T"/ids-? 2>/dev/null | wc -l)" -ge $((k * 12)) ]; do
		[ $SECONDS -ge $deadline ] && fail "the submitters stalled before kill $k: $(cat "$T"/submit-?.err)"
		sleep 0.05
	done
	kill9_coordinator
	log "coordinator killed ($k), $(cat "$T"/ids-? | wc -l) submissions done"
	start_coordinator
done
wait "${submitters[@]}"
cat "$T"/ids-? >"$T/ids"
assert_eq $((4 * N)) "$(wc -l <"$T/ids")" "submissions made"
failed=$(grep -c '^failed' "$T/ids")
assert_eq 0 "$failed" "submissions the CLI reported failed ($(cat "$T"/submit-?.err))"

# Every job the coordinator holds, by name: exactly the printed ones.
api_expect 200 "$ADMIN_TOKEN" GET '/v1/jobs?all=1'
printf '%s' "$API_BODY" | json '"\n".join("%s %s %s" % (j["id"], j["name"], " ".join(j["command"])) for j in d["jobs"])' | sort >"$T/held"
dups=$(cut -d' ' -f2 "$T/held" | sort | uniq -d)
[ -z "$dups" ] || fail "submissions made twice: $dups"
while read -r status id name; do
	got=$(grep " $name " "$T/held")
	assert_eq "$id $name echo job-${name#r}" "$got" "the job of $name"
done <"$T/ids"
assert_eq $((4 * N)) "$(wc -l <"$T/held")" "jobs held (none but the printed ones)"

# The key by hand: a repeat, across a kill -9, answers the first id.
KEY=contain-key-$$-abcdef
api_expect 201 "$ALICE" POST /v1/jobs "{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$KEY\"}"
first=$(printf '%s' "$API_BODY" | json 'd["id"]')
api_expect 200 "$ALICE" POST /v1/jobs "{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$KEY\"}"
assert_eq "$first" "$(printf '%s' "$API_BODY" | json 'd["id"]')" "a repeat's id"
kill9_coordinator
start_coordinator
GPUPOOL_TOKEN=$ALICE cli submit --gpus 0 --key "$KEY" -- true
assert_eq "$first" "$CLI_OUT" "submit --key after a kill -9"
# Keys are the user's: bob's same key is his own submission.
mk_token user bob
api_expect 201 "$TOKEN" POST /v1/jobs "{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$KEY\"}"
[ "$(printf '%s' "$API_BODY" | json 'd["id"]')" != "$first" ] || fail "bob's key answered alice's job"
api_expect 400 "$ALICE" POST /v1/jobs '{"command":["true"],"gpus":0,"idempotency_key":"short"}'
assert_error_body "a key of 5 characters"
api_expect 400 "$ALICE" POST /v1/jobs/array "{\"job\":{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$KEY\"},\"array\":\"0-1\"}"
assert_contains "$API_BODY" "not for job arrays yet" "an array with a key"
GPUPOOL_TOKEN=$ALICE cli submit --gpus 0 --key 'bad key!' -- true
assert_eq 2 "$CLI_RC" "submit --key with a space"
echo "ok: $((4 * N)) submissions through three kill -9s, each made once"
