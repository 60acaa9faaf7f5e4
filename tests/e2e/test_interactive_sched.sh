# Interactive jobs in the scheduler and the owner's policy (issue 17 B,
# docs/scheduling.md): the pool's default and maximum time limits of an
# interactive job; an owner who refuses interactive jobs; GPUs an owner keeps
# for interactive work (interactive-gpus), which a batch job does not take
# (its wait reason says so) and an interactive job does, ahead of batch work
# queued before it; and the owner's reclaim of an interactive job: no
# checkpoint signal, ended after the grace, not moved to another node.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator --interactive-time 30m --interactive-time-max 1h

# Only a node whose owner refuses interactive jobs: refused at submission.
policy_file b "interactive = refuse"
start_provider b 1
wait_node_up b
cli submit --interactive -- true
assert_eq 1 "$CLI_RC" "an interactive job where every owner refuses them"
assert_contains "$CLI_ERR" "takes no interactive jobs (interactive = refuse)" "the refusal"
# ...while a batch job is welcome there
submit -- true
assert_eq 0 "$CLI_RC" "a batch job on b ($CLI_ERR)"
wait_final "$JOB"
assert_eq succeeded "$FINAL_STATE" "the batch job on b"

# Node a keeps one of its two GPUs for interactive work.
policy_file a "checkpoint-grace = 3s
interactive-gpus = 1"
start_provider a 2
wait_node_up a
provider b pause
assert_eq 0 "$CLI_RC" "pausing b ($CLI_ERR)"
wait_node_state b paused

# The pool's time limits.
cli submit --interactive --time 2h -- true
assert_eq 1 "$CLI_RC" "an interactive job over the pool's maximum"
assert_contains "$CLI_ERR" "runs at most 1h" "the maximum's refusal"

# A batch job takes a's first GPU; the next batch job waits, naming the
# GPU kept for interactive jobs.
submit --gpus 1 --name batch1 -- bash -c "$(gated_job_cmd)"
b1=$JOB
wait_state "$b1" running
submit --gpus 1 --name batch2 -- true
b2=$JOB
deadline=$((SECONDS + WAIT_S))
until job_get "$b2" 'd["wait"]["why"]' | grep -q "kept for interactive jobs"; do
	[ $SECONDS -ge $deadline ] && fail "batch2's wait reason: $(job_get "$b2" 'd["wait"]')"
	sleep 0.1
done
assert_eq queued "$(job_state "$b2")" "batch2 while only the kept GPU is free"

# An interactive job, submitted after batch2, takes the kept GPU at once;
# it records the pool's default limit and shows as interactive.
submit --interactive --expose 8888 --gpus 1 --name shell -- bash -c \
    "trap 'touch got-usr1' USR1; $(gated_job_cmd)"
i1=$JOB
wait_state "$i1" running
assert_eq 1800 "$(job_get "$i1" 'd["request"]["time_limit_s"]')" "the default interactive limit"
assert_eq "[1]" "$(job_get "$i1" 'd["gpus"]')" "the kept GPU"
assert_eq "[true, [8888]]" "$(job_get "$i1" 'd["interactive"], d["expose"]')" "interactive and expose in the view"
cli show "$i1"
assert_contains "$CLI_OUT" "interactive: yes" "show"
assert_contains "$CLI_OUT" "expose: 8888" "show"
cli ps
assert_contains "$CLI_OUT" "running (i)" "ps"
assert_eq queued "$(job_state "$b2")" "batch2 still waits"

# The owner reclaims the kept GPU: the interactive job gets no checkpoint
# signal, is ended after the grace and is not requeued.
provider a reclaim 1
assert_eq 0 "$CLI_RC" "provider a reclaim 1: $CLI_ERR"
wait_final "$i1"
assert_eq failed "$(job_state "$i1")" "the reclaimed interactive job"
assert_eq reclaimed "$(job_get "$i1" 'd["reason"]')" "why it ended"
assert_eq 1 "$(job_get "$i1" 'd["attempts"]')" "attempts: not moved"
[ -e "$T/agents/a/jobs/$i1-1/got-usr1" ] && fail "the interactive job got the checkpoint signal"
grep -q "interactive job ends on the owner's behalf job=$i1 .*grace_s=3" "$T/agent-a.log" ||
	fail "the agent's log does not tell the interactive end: $(grep "job=$i1" "$T/agent-a.log" | tail -5)"
assert_eq running "$(job_state "$b1")" "the batch job on the other GPU"
# GPU 1 back: it is the one kept again, and batch2 takes GPU 0 after batch1
# (while GPU 1 was reclaimed, GPU 0 was the one lent GPU, kept).
provider a resume
assert_eq 0 "$CLI_RC" "provider a resume: $CLI_ERR"
release_job a "$b1"
wait_final "$b1"
assert_eq succeeded "$FINAL_STATE" "batch1"
wait_final "$b2"
assert_eq succeeded "$FINAL_STATE" "batch2 once batch1 ended"
echo ok
