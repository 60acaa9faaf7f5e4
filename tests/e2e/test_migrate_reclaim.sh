# The owner takes a GPU back while a job runs on it, gracefully and then with
# --now: the job is requeued and resumes on the other provider from its
# latest uploaded checkpoint. Graceful: the job got the checkpoint signal,
# saved and stopped, and the next attempt resumed at exactly that step (no
# work lost). --now: the GPU was freed at once and the job resumed from the
# last version uploaded before, redoing at most the steps since (work lost:
# see migrate_lib.sh). The reclaimed GPU takes no new job until the
# owner resumes it, and `provider status` says so. No two live attempts, ever.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator
start_provider a 1
wait_node_up a
submit_steps 150 5 0.1
j=$JOB
wait_state "$j" running
assert_eq a "$(job_get "$j" 'd["node"]')" "first node"
start_provider b 1
wait_node_up b
wait_ckpt "$j" 2

# graceful: SIGUSR1, the job saves and exits within the grace period
depart "$j"
provider a reclaim
assert_eq 0 "$CLI_RC" "provider a reclaim: $CLI_ERR"
assert_contains "$CLI_OUT" "GPU 0" "reclaim output"
assert_contains "$CLI_OUT" "free after" "reclaim output"
wait_moved "$j" b 2
assert_eq reclaimed "$(history_reason "$j" 1)" "why attempt 1 ended"
provider a status --json
assert_eq 0 "$CLI_RC" "provider a status: $CLI_ERR"
assert_eq reclaimed "$(printf '%s' "$CLI_OUT" | json 'd["gpus"][0]["state"]')" "a's GPU 0 after reclaim"
api "$ADMIN_TOKEN" GET /v1/nodes
assert_eq false "$(printf '%s' "$API_BODY" | json '[n for n in d["nodes"] if n["name"] == "a"][0]["gpus"][0]["lent"]')" "a's GPU 0 as the coordinator sees it"
# nothing lands on a reclaimed GPU
submit --gpus 1 -- true
other=$JOB
sleep 1
assert_eq queued "$(job_state "$other")" "a job while every free GPU is reclaimed"

provider a resume
assert_eq 0 "$CLI_RC" "provider a resume: $CLI_ERR"
cli wait "$other"
assert_eq 0 "$CLI_RC" "the queued job once a resumed"

# --now: the job is killed at once and resumes from its last upload
v=$(ckpt_version "$j")
wait_ckpt "$j" $((v + 1))
depart "$j"
provider b reclaim --now
assert_eq 0 "$CLI_RC" "provider b reclaim --now: $CLI_ERR"
assert_contains "$CLI_OUT" "free after" "reclaim --now output"
wait_moved "$j" a 3
assert_eq reclaimed "$(history_reason "$j" 2)" "why attempt 2 ended"
finish_and_check "$j" 150 1
echo ok
