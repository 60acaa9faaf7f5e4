# Proves cancel: a running job with a background child is cancelled with the
# CLI, ends in state cancelled, and none of its processes (both the
# foreground and the background sleep, tagged with a unique marker) is left
# on the machine. Cancelling a finished job fails, and a queued job can be
# cancelled before it ever runs.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 1
wait_node_up alpha

new_marker
m=$MARK
# sh itself carries the marker as $0; both sleeps carry it as argv[0].
submit -- sh -c 'bash -c "exec -a $0 sleep 300" & bash -c "exec -a $0 sleep 300"; wait' "$m"
j=$JOB
wait_state "$j" running
wait_count argv0 "$m" 2

# a second job queues behind it (the node has one GPU)
new_marker
mq=$MARK
submit -- bash -c 'exec -a "$0" sleep 300' "$mq"
jq=$JOB
assert_eq queued "$(job_state "$jq")" "second 1-GPU job on a 1-GPU node"

cli cancel "$j"
assert_eq 0 "$CLI_RC" "cancel of a running job ($CLI_ERR)"
wait_state "$j" cancelled
# The agent confirms the kill before the job is cancelled; allow the kernel a
# moment to tear the processes down.
wait_count cmdline "$m" 0 10

cli show "$j" --json
assert_eq cancelled "$(printf '%s' "$CLI_OUT" | json 'd["state"]')" "show after cancel"
[ "$(printf '%s' "$CLI_OUT" | json 'd["finished_at"]')" != null ] || fail "cancelled job has no finished_at"

# cancelling it again is a conflict: the CLI says so and exits non-zero
cli cancel "$j"
[ "$CLI_RC" != 0 ] || fail "cancel of a cancelled job exited 0"
[ -n "$CLI_ERR$CLI_OUT" ] || fail "cancel of a cancelled job printed nothing"
api_expect 409 "$ADMIN_TOKEN" POST "/v1/jobs/$j/cancel"
assert_error_body "cancel of a finished job"

# the queued job got the GPU; cancel it while running too, then a queued one
wait_state "$jq" running
wait_count argv0 "$mq" 1
new_marker
mq2=$MARK
submit -- bash -c 'exec -a "$0" sleep 300' "$mq2"
jq2=$JOB
assert_eq queued "$(job_state "$jq2")" "third job while the GPU is busy"
cli cancel "$jq2"
assert_eq 0 "$CLI_RC" "cancel of a queued job ($CLI_ERR)"
wait_state "$jq2" cancelled
assert_eq null "$(job_get "$jq2" 'd["started_at"]')" "cancelled queued job started_at"

cli cancel "$jq"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait_state "$jq" cancelled
wait_count cmdline "$mq" 0 10
assert_eq 0 "$(count_cmdline "$mq2")" "processes of a job cancelled while queued"
echo ok
