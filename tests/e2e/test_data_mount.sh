#!/usr/bin/env bash
# test_data_mount.sh: a data set mounted in jobs, end to end. alice puts a
# directory; a job that mounts it (read-only, at /mnt) checksums every
# file and matches the originals, and cannot write there; the agent
# fetched the version once: a second job on the same provider starts
# without a transfer (the agent's "data set ready" line says fetched=0
# cached=1), and a job that does not mount it cannot read the cache
# behind the mounts. A mount path the provider lacks is made for the job
# (not on the host). A new version that changes one file fetches only that
# file's chunks (the rest comes from the cache). A queued job stays
# pinned to the version current at its submission.
. "$(dirname "$0")/lib.sh"

[ -d /mnt ] || fail "this test mounts data sets at /mnt, which is missing"
start_coordinator
mk_token user alice
ALICE=$TOKEN
start_agent a1 1
wait_node_up a1
export GPUPOOL_TOKEN=$ALICE

# The data set: two 4 MiB+ files, a subdirectory, an empty file.
DS="$T/ds"
mkdir -p "$DS/sub/deeper"
head -c $((9 << 20)) /dev/urandom >"$DS/big.bin"
head -c $((5 << 20 | 777)) /dev/urandom >"$DS/sub/mid.bin"
printf 'hello data\n' >"$DS/sub/deeper/small.txt"
: >"$DS/empty"
chmod 644 "$DS"/big.bin "$DS"/sub/mid.bin
cli data put ds "$DS" --json
assert_eq 0 "$CLI_RC" "data put: $CLI_ERR"
assert_eq 1 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "first version"
sums() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum); }
WANT=$(sums "$DS")

# The job reads it at /mnt (as nobody), checksums it, tries to write.
CHECK='cd /mnt && find . -type f | LC_ALL=C sort | xargs sha256sum && echo "uid=$(id -u)" && echo "mountopts=$(awk '\''$5 == "/mnt" { o = $6 } END { print o }'\'' /proc/self/mountinfo)" && if (echo x >/mnt/new) 2>/dev/null; then echo WROTE; else echo read-only; fi && if (echo x >>/mnt/big.bin) 2>/dev/null; then echo APPENDED; else echo read-only; fi'
run_check() { # expected sums
	submit --gpus 1 --data ds:/mnt -- sh -c "$CHECK"
	wait_final "$JOB"
	job_log "$JOB"
	assert_eq succeeded "$FINAL_STATE" "the checking job: $LOG $(job_get "$JOB" 'd.get("message")')"
	assert_contains "$LOG" "$1" "checksums seen by the job"
	assert_not_contains "$LOG" WROTE "a write into the data set"
	assert_not_contains "$LOG" APPENDED "an append to a data set file"
	assert_not_contains "$LOG" "uid=0" "the job runs as root"
	assert_contains "$LOG" "mountopts=ro," "the mount at /mnt is read-only"
}
ready_line() { # JOB: the agent's "data set ready" line for it
	local deadline=$((SECONDS + WAIT_S))
	until READY=$(grep "data set ready job=$1 " "$T/agent-a1.log"); do
		[ $SECONDS -ge $deadline ] && fail "no 'data set ready' line for job $1"
		sleep 0.2
	done
}
run_check "$WANT"
J1=$JOB
ready_line "$J1"
assert_contains "$READY" "cached=0" "first job: built"
assert_contains "$READY" "fetched=$(((9 << 20) + (5 << 20 | 777) + 11))" "first job: every byte fetched"

# Second job, same provider: no transfer.
run_check "$WANT"
J2=$JOB
ready_line "$J2"
assert_contains "$READY" "fetched=0 " "second job: nothing fetched"
assert_contains "$READY" "cached=1" "second job: from the cache"

# Version 2: one chunk of big.bin changes. Only that chunk is uploaded,
# and the agent fetches only it (the rest is copied or linked locally).
dd if=/dev/urandom of="$DS/big.bin" bs=1M count=1 seek=4 conv=notrunc status=none
cli data put ds "$DS" --json
assert_eq 0 "$CLI_RC" "data put v2: $CLI_ERR"
assert_eq 2 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "second version"
assert_eq 1 "$(printf '%s' "$CLI_OUT" | json 'd["chunks_sent"]')" "chunks uploaded for v2"
assert_eq $((4 << 20)) "$(printf '%s' "$CLI_OUT" | json 'd["bytes_sent"]')" "bytes uploaded for v2"
WANT2=$(sums "$DS")
run_check "$WANT2"
J3=$JOB
ready_line "$J3"
assert_contains "$READY" "fetched=$((4 << 20)) " "v2 on the agent: only the changed chunk fetched"
assert_contains "$READY" "linked=$(((5 << 20 | 777) + 11))" "v2 on the agent: unchanged files linked"

# A queued job is pinned at submit: v3 put while it waits, it sees v2.
new_marker
submit --gpus 1 -- bash -c "exec -a $MARK sleep 600"
BLOCKER=$JOB
wait_state "$BLOCKER" running
submit --gpus 1 --data ds:/mnt -- sh -c "$CHECK"
PINNED=$JOB
assert_eq 2 "$(job_get "$PINNED" 'd["data"][0]["version"]')" "pinned version"
cli show "$PINNED"
assert_contains "$CLI_OUT" "alice/ds@2:/mnt" "gpupool show lists the pinned data set"
printf 'v3\n' >"$DS/sub/deeper/small.txt"
cli data put ds "$DS"
assert_eq 0 "$CLI_RC" "data put v3: $CLI_ERR"
# ... and the pinned version cannot be removed while the job waits.
cli data rm ds@2
[ "$CLI_RC" != 0 ] || fail "removing a version a queued job pins succeeded"
assert_contains "$CLI_ERR" "$PINNED" "the refusal names the job"
cli cancel "$BLOCKER"
wait_final "$PINNED"
job_log "$PINNED"
assert_eq succeeded "$FINAL_STATE" "the pinned job"
assert_contains "$LOG" "$WANT2" "the pinned job sees version 2"

# @VERSION picks an older one.
submit --gpus 1 --data ds@1:/mnt -- sh -c "$CHECK"
wait_final "$JOB"
job_log "$JOB"
assert_contains "$LOG" "$WANT" "ds@1 mounts version 1"

# A mount path the provider lacks is made for the job, not on the host.
MISSING="/srv/gpe2e-$$/ds"
submit --gpus 1 --data "ds@1:$MISSING" -- cat "$MISSING/sub/deeper/small.txt"
wait_final "$JOB"
job_log "$JOB"
assert_eq succeeded "$FINAL_STATE" "a mount at a path the host lacks: $LOG"
assert_contains "$LOG" "hello data" "the data set at $MISSING"
[ -e "/srv/gpe2e-$$" ] && fail "the mount point was made on the host"

# A job that does not mount it cannot read the cache behind the mounts.
CACHED="$T/agents/a1/data/sets/alice+ds@1/tree/sub/deeper/small.txt"
[ -f "$CACHED" ] || fail "no cached copy at $CACHED"
submit --gpus 1 -- sh -c "cat '$CACHED' && echo LEAKED"
wait_final "$JOB"
job_log "$JOB"
assert_not_contains "$LOG" LEAKED "a job read the data cache directly"
log "ok"
