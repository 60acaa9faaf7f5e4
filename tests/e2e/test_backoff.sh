#!/usr/bin/env bash
# A job whose attempts fail to start backs off and tries other nodes
# (docs/scheduling.md, "Back-off after failed starts"). Agent bad refuses
# every assignment (GPUPOOL_AGENT_REFUSE_JOBS=1, a test knob: what an
# agent that cannot start a job answers). (1) A job refused by bad, the
# only node then, runs on good once good is there, though bad (the lower
# id, which wins a tie between two empty nodes) is free too: before, it
# was placed on bad at once, over and over, and failed "gave up after too
# many attempts" within a second. (2) While that job holds good, a
# second job has only bad: it waits between its attempts there, `queue`,
# `show` and `show --json` say why, its log notes the back-off, and its
# attempts stay few however long the machine takes (each waits twice as
# long as the one before: 1 s, 2 s, 4 s ...).
. "$(dirname "$0")/lib.sh"

# brief JOB: its state, node, attempts and wait, for a failure's message.
brief() {
	job_get "$1" '[d["state"], d["node"], d["attempts"], d["wait"]]'
}

start_coordinator
GPUPOOL_AGENT_REFUSE_JOBS=1 start_agent bad 1
wait_node_up bad

# (1) refused by bad, it runs on good (and holds it until released)
submit --time 2m --name other -- bash -c "$(gated_job_cmd)"
held=$JOB
deadline=$((SECONDS + WAIT_S))
first='(d["history"] or [{}])[0].get("reason")'
until [ "$(job_get "$held" "$first")" = refused ]; do
	[ $SECONDS -ge $deadline ] &&
	    fail "job $held not refused by bad: $(brief "$held")"
	sleep 0.1
done
start_agent good 1
wait_node_up good
wait_state "$held" running
deadline=$((SECONDS + WAIT_S))
until [ "$(job_get "$held" 'd["node"]')" = good ]; do
	case $(job_state "$held") in running | queued) ;; *)
		fail "job $held ended: $(brief "$held")" ;;
	esac
	[ $SECONDS -ge $deadline ] &&
	    fail "job $held not on good: $(brief "$held")"
	sleep 0.1
done
# Every attempt before was bad's, refused; once good was up, none went
# to bad again.
hist=$(job_get "$held" \
    '" ".join("%s:%s" % (h["node"], h["reason"]) for h in d["history"])')
log "attempts of job $held: $hist"
[[ $hist =~ ^(bad:refused )+good:(None)?$ ]] ||
    fail "job $held's attempts: $hist"
job_log "$held"
assert_contains "$LOG" "ended: refused; job requeued, next try in 1 s" \
    "the log's note"

# (2) only bad has room: it backs off
start=$SECONDS
submit --time 1m --name nowhere -- true
job=$JOB
deadline=$((SECONDS + WAIT_S))
while :; do
	reason=$(job_get "$job" '(d.get("wait") or {}).get("reason", "")')
	att=$(job_get "$job" 'd["attempts"]')
	[ "$reason" = backoff ] && [ "$att" -ge 2 ] && break
	[ $SECONDS -ge $deadline ] &&
	    fail "job $job: wait '$reason' after $att attempts: $(brief "$job")"
	sleep 0.1
done
why=$(job_get "$job" 'd["wait"]["why"]')
assert_contains "$why" "retrying after refused on node bad" "show --json's why"
assert_contains "$why" ": next try in" "show --json's why"
[ "$(job_get "$job" 'd["wait"]["next_try"]')" != null ] ||
    fail "no next_try: $(brief "$job")"
cli show "$job"
assert_eq 0 "$CLI_RC" "show ($CLI_ERR)"
assert_contains "$CLI_OUT" "wait: backoff (retrying after refused on node bad" \
    "show's wait line"
cli queue
assert_eq 0 "$CLI_RC" "queue ($CLI_ERR)"
assert_contains "$CLI_OUT" "retrying after refused on node bad" "queue's why"
job_log "$job"
assert_contains "$LOG" "job requeued, next try in" "the log's note"

# Attempts over the time it has been queued: with back-off, at most one
# per 1, 2, 4 ... s (log2 of the seconds, and two more for rounding and
# the one under way); without, hundreds in a second.
sleep_until=$((SECONDS + 4))
while [ $SECONDS -lt $sleep_until ]; do
	s=$(job_state "$job")
	[ "$s" = queued ] || [ "$s" = running ] ||
	    fail "job $job ended $s: $(brief "$job")"
	sleep 0.5
done
att=$(job_get "$job" 'd["attempts"]')
elapsed=$((SECONDS - start + 1))
bound=2
while [ $((1 << (bound - 2))) -le "$elapsed" ]; do bound=$((bound + 1)); done
log "attempts $att in ${elapsed}s (at most $bound)"
[ "$att" -le "$bound" ] || fail "$att attempts in ${elapsed}s: no back-off"
cli cancel "$job"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait_final "$job"
assert_eq cancelled "$FINAL_STATE" "the job that backed off"
release_job good "$held" "$(job_get "$held" 'd["attempts"]')"
wait_final "$held"
assert_eq succeeded "$FINAL_STATE" "the job refused by bad"
echo ok
