#!/usr/bin/env bash
# test_data_output.sh: job outputs and storage quotas, end to end. A job
# writes files to $GPUPOOL_OUTPUT_DIR and exits 3: it ends failed with
# exit code 3, and `gpupool fetch` downloads exactly what it wrote (a
# symlink left out); bob cannot fetch it or probe its chunks (404), a
# provider token cannot read it, the admin can. With a quota smaller than
# its output, a job still ends with its own exit status and a message
# saying the output was not stored; `data put` over the quota is refused
# with the figures and stores nothing. `output rm` frees the space. An
# attempt that is reclaimed (the job requeued) leaves no output: the job's
# output is its last attempt's.
. "$(dirname "$0")/lib.sh"

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
start_agent a1 1
wait_node_up a1
PROV=$(cat "$T/a1.token")
export GPUPOOL_TOKEN=$ALICE

# shellcheck disable=SC2016 # expanded by the job's shell
WRITE='mkdir -p "$GPUPOOL_OUTPUT_DIR/sub" && head -c 6000000 /dev/urandom >"$GPUPOOL_OUTPUT_DIR/sub/r.bin" && echo result >"$GPUPOOL_OUTPUT_DIR/a.txt" && chmod 755 "$GPUPOOL_OUTPUT_DIR/a.txt" && ln -s /etc/passwd "$GPUPOOL_OUTPUT_DIR/link" && cd "$GPUPOOL_OUTPUT_DIR" && sha256sum sub/r.bin a.txt'
submit --gpus 1 -- sh -c "$WRITE; exit 3"
J1=$JOB
wait_final "$J1"
assert_eq failed "$FINAL_STATE" "a job exiting 3"
assert_eq 3 "$(job_get "$J1" 'd["exit_code"]')" "its exit code"
job_log "$J1"
SUMS=$(printf '%s\n' "$LOG" | grep -E '^[0-9a-f]{64}  ')
[ -n "$SUMS" ] || fail "the job printed no checksums: $LOG"

cli fetch "$J1" "$T/out1"
assert_eq 0 "$CLI_RC" "fetch: $CLI_ERR"
assert_eq "$SUMS" "$(cd "$T/out1" && sha256sum sub/r.bin a.txt)" "fetched files"
[ -x "$T/out1/a.txt" ] || fail "fetch lost the execute bit"
[ -e "$T/out1/link" ] || [ -L "$T/out1/link" ] && fail "the symlink was collected"
assert_eq "a.txt sub" "$(cd "$T/out1" && echo *)" "nothing else fetched"
# Into a non-empty directory: refused, nothing written.
cli fetch "$J1" "$T/out1"
[ "$CLI_RC" != 0 ] || fail "fetch into a non-empty directory succeeded"
# The default destination.
(cd "$T" && "$GP" fetch "$J1") 2>"$T/fetch.err" || fail "fetch to the default place: $(cat "$T/fetch.err")"
cmp -s "$T/out1/sub/r.bin" "$T/job-$J1-output/sub/r.bin" || fail "default destination differs"

# Who may read it.
api "$ALICE" GET "/v1/jobs/$J1/output"
assert_eq 200 "$API_STATUS" "alice reads her output's manifest"
CHUNK=$(printf '%s' "$API_BODY" | json '[f for f in d["files"] if f["path"] == "a.txt"][0]["chunks"][0]')
api "$BOB" GET "/v1/jobs/$J1/output"
assert_eq 404 "$API_STATUS" "bob reads alice's output"
api "$BOB" GET "/v1/jobs/$J1/output/chunks/$CHUNK"
assert_eq 404 "$API_STATUS" "bob probes a chunk of it"
api "$BOB" GET "/v1/jobs/999/output"
assert_eq 404 "$API_STATUS" "an absent job answers the same"
GPUPOOL_TOKEN=$BOB cli fetch "$J1" "$T/out-bob"
[ "$CLI_RC" != 0 ] || fail "bob fetched alice's output"
api "$PROV" GET "/v1/jobs/$J1/output"
[ "$API_STATUS" = 403 ] || [ "$API_STATUS" = 404 ] || fail "a provider reads a job's output: HTTP $API_STATUS"
api "$ALICE" GET "/v1/jobs/$J1/output/chunks/$CHUNK"
assert_eq 200 "$API_STATUS" "alice reads a chunk"
assert_eq result "$API_BODY" "the chunk's bytes"
GPUPOOL_TOKEN=$ADMIN_TOKEN cli fetch "$J1" "$T/out-admin"
assert_eq 0 "$CLI_RC" "the admin fetches: $CLI_ERR"

# An attempt taken away (reclaim --now: the job is requeued) is not the
# job's end: its output is not collected; the job's output is what its
# last attempt left.
start_agent a2 1
wait_node_up a2
new_marker
submit --gpus 1 -- bash -c "echo \"attempt \$GPUPOOL_ATTEMPT\" >\"\$GPUPOOL_OUTPUT_DIR/who.txt\"; if [ \"\$GPUPOOL_ATTEMPT\" = 1 ]; then exec -a $MARK sleep 600; fi"
J0=$JOB
wait_state "$J0" running
NODE=$(job_get "$J0" 'd["node"]')
GPUPOOL_AGENT_SOCKET="$T/agents/$NODE/agent.sock" cli provider reclaim --now
assert_eq 0 "$CLI_RC" "provider reclaim: $CLI_ERR"
wait_final "$J0"
assert_eq succeeded "$FINAL_STATE" "the moved job"
assert_eq 2 "$(job_get "$J0" 'd["attempts"]')" "attempts of the moved job"
cli fetch "$J0" "$T/out0"
assert_eq 0 "$CLI_RC" "fetch of the moved job: $CLI_ERR"
assert_eq "attempt 2" "$(cat "$T/out0/who.txt")" "the output is the last attempt's"
if grep -q "job output stored job=$J0 attempt=1" "$T/agent-$NODE.log"; then
	fail "the reclaimed attempt's output was collected"
fi

# Quota: 4 MiB, less than alice already stores (the first output).
cli quota show --json
USED=$(printf '%s' "$CLI_OUT" | json 'd["used"]')
[ "$USED" -ge 6000000 ] || fail "quota show: used $USED, the output holds 6000007 bytes"
assert_eq null "$(printf '%s' "$CLI_OUT" | json 'd["limit"]')" "no limit yet"
GPUPOOL_TOKEN=$BOB cli quota set alice 4M
[ "$CLI_RC" != 0 ] || fail "bob set a quota"
GPUPOOL_TOKEN=$ADMIN_TOKEN cli quota set alice 8M
assert_eq 0 "$CLI_RC" "quota set: $CLI_ERR"
GPUPOOL_TOKEN=$BOB cli quota show alice
[ "$CLI_RC" != 0 ] || fail "bob read alice's quota"

# An output that does not fit: the job keeps its exit status.
submit --gpus 1 -- sh -c "$WRITE; exit 0"
J2=$JOB
wait_final "$J2"
assert_eq succeeded "$FINAL_STATE" "a job whose output does not fit"
MSG=$(job_get "$J2" 'd["message"]')
assert_contains "$MSG" "output not stored" "the job's message"
assert_contains "$MSG" "quota" "the message names the quota"
api "$ALICE" GET "/v1/jobs/$J2/output"
assert_eq 404 "$API_STATUS" "the refused output is not stored"
cli quota show --json
assert_eq "$USED" "$(printf '%s' "$CLI_OUT" | json 'd["used"]')" "usage after the refusal"

# A data set over the quota: refused with the figures, nothing stored.
head -c $((3 << 20)) /dev/urandom >"$T/big.bin"
count_chunks() { find "$COORD_DATA/checkpoints/alice/chunks" -type f | wc -l; }
BEFORE=$(count_chunks)
cli data put big "$T/big.bin"
[ "$CLI_RC" != 0 ] || fail "a data set over the quota was stored"
assert_contains "$CLI_ERR" "quota" "the refusal"
assert_contains "$CLI_ERR" "8.0MiB" "the refusal gives the limit"
assert_eq "$BEFORE" "$(count_chunks)" "chunks stored by the refused put"
cli data ls --json
assert_eq 0 "$(printf '%s' "$CLI_OUT" | json 'len(d["data_sets"])')" "data sets after the refusal"

# output rm frees the space; the put then fits.
cli output rm "$J1"
assert_eq 0 "$CLI_RC" "output rm: $CLI_ERR"
cli output rm "$J0"
assert_eq 0 "$CLI_RC" "output rm: $CLI_ERR"
api "$ALICE" GET "/v1/jobs/$J1/output"
assert_eq 404 "$API_STATUS" "a removed output"
cli quota show --json
assert_eq 0 "$(printf '%s' "$CLI_OUT" | json 'd["used"]')" "usage after output rm"
cli data put big "$T/big.bin"
assert_eq 0 "$CLI_RC" "data put within the quota: $CLI_ERR"
# A job with nothing in its output directory has no output.
submit --gpus 0 -- true
wait_final "$JOB"
api "$ALICE" GET "/v1/jobs/$JOB/output"
assert_eq 404 "$API_STATUS" "a job that wrote no output"
log "ok"
