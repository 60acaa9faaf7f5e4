#!/usr/bin/env bash
# test_contain_submit_retry.sh: submissions are idempotent (issue 15,
# finding 6). Four submitters of an ordinary user submit 15 jobs each, and
# two more 15 job arrays of three tasks each (submit --array), while the
# coordinator is killed (kill -9) and restarted three times: every
# submission succeeds (the CLI sends a key with each and, when the answer
# is lost, sends it again, unchanged, until the coordinator is back), every
# printed id exists once with its own command (an array's range holds its
# three tasks), and no job exists that its submitter was not told about
# (none of a submission reported failed). A POST repeated with its key,
# also across a kill -9, answers the first id (an array's first and last)
# and makes no job; a key of the other kind's is refused (409), and so is
# a key of the wrong form.
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
for w in 1 2; do
	(
		for i in $(seq 1 $N); do
			if out=$(GPUPOOL_TOKEN=$ALICE "$GP" submit --gpus 0 --array 0-2 --name "a$w-$i" -- echo "arr-$w-$i" 2>>"$T/array-$w.err"); then
				echo "ok $out a$w-$i"
			else
				echo "failed - a$w-$i"
			fi
		done >"$T/arrays-$w"
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
cat "$T"/arrays-? >"$T/arrays"
assert_eq $((2 * N)) "$(wc -l <"$T/arrays")" "array submissions made"
failed=$(grep -c '^failed' "$T/arrays")
assert_eq 0 "$failed" "array submissions the CLI reported failed ($(cat "$T"/array-?.err))"

# Every job the coordinator holds, by name: exactly the printed ones.
api_expect 200 "$ADMIN_TOKEN" GET '/v1/jobs?all=1'
printf '%s' "$API_BODY" | json '"\n".join("%s %s %s" % (j["id"], j["name"], " ".join(j["command"])) for j in d["jobs"])' | sort >"$T/held"
dups=$(grep ' r[0-9]*-[0-9]* ' "$T/held" | cut -d' ' -f2 | sort | uniq -d)
[ -z "$dups" ] || fail "submissions made twice: $dups"
while read -r status id name; do
	got=$(grep " $name " "$T/held")
	assert_eq "$id $name echo job-${name#r}" "$got" "the job of $name"
done <"$T/ids"
# An array's three tasks are the ids it printed, and no other job.
while read -r status range name; do
	first=${range%-*} last=${range#*-}
	assert_eq 2 $((last - first)) "the range $range of $name"
	want=$(for ((k = first; k <= last; k++)); do echo "$k $name echo arr-${name#a}"; done)
	got=$(grep " $name " "$T/held" | sort -n)
	assert_eq "$want" "$got" "the tasks of $name"
done <"$T/arrays"
assert_eq $((4 * N + 2 * N * 3)) "$(wc -l <"$T/held")" "jobs held (none but the printed ones)"

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
# An array's key: a repeat, across a kill -9, answers its first and last.
AKEY=contain-array-key-$$-abc
ABODY="{\"job\":{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$AKEY\"},\"array\":\"0-1\"}"
api_expect 201 "$ALICE" POST /v1/jobs/array "$ABODY"
afirst=$(printf '%s' "$API_BODY" | json 'd["first_id"]')
api_expect 200 "$ALICE" POST /v1/jobs/array "$ABODY"
assert_eq "$afirst $((afirst + 1)) 2" "$(printf '%s' "$API_BODY" | json '"%s %s %s" % (d["first_id"], d["last_id"], d["count"])')" "an array's repeat"
kill9_coordinator
start_coordinator
GPUPOOL_TOKEN=$ALICE cli submit --gpus 0 --array 0-1 --key "$AKEY" -- true
assert_eq "$afirst-$((afirst + 1))" "$CLI_OUT" "submit --array --key after a kill -9"
api "$ADMIN_TOKEN" GET "/v1/jobs/$((afirst + 2))"
assert_eq 404 "$API_STATUS" "job $((afirst + 2)) after the array's repeats"
# One key, one kind: a single job's key is not an array's, nor the reverse.
api_expect 409 "$ALICE" POST /v1/jobs/array "{\"job\":{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$KEY\"},\"array\":\"0-1\"}"
assert_contains "$API_BODY" "already used for the job $first" "an array with a single job's key"
api_expect 409 "$ALICE" POST /v1/jobs "{\"command\":[\"true\"],\"gpus\":0,\"idempotency_key\":\"$AKEY\"}"
assert_contains "$API_BODY" "already used for the job array $afirst" "a job with an array's key"
GPUPOOL_TOKEN=$ALICE cli submit --gpus 0 --key 'bad key!' -- true
assert_eq 2 "$CLI_RC" "submit --key with a space"
echo "ok: $((4 * N)) submissions and $((2 * N)) arrays through three kill -9s, each made once"
