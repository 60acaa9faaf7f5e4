#!/usr/bin/env bash
# test_meta_faults_pg: the blob users' records (checkpoints, images, data
# sets: store_meta.h on PostgreSQL, store_pg_meta.c) when the database is
# restarted under them (issue 19). One coordinator on PostgreSQL, one
# agent. A job checkpoints every second; the database is stopped; then
# alice imports an image and puts a data set while it is down, and the
# job's agent uploads a checkpoint. The database stays down PG_DOWN_S
# (default 12 s: longer than the 10 s the old code waited for a
# connection before it answered 5xx), then starts again. Every one of
# the three must be held, not refused: the coordinator logs a retry on
# each connection (checkpoints, images, data), no commit is refused with
# a 5xx (the old code refused them: the clients tried again, but the
# answer was an error), the CLIs exit 0 and the agent logs no failed
# upload. Afterwards the image, the data set and the new checkpoint
# version are listed, the checkpoint restores (every chunk checked), a
# job mounts the data set and reads every file intact, and a job runs
# the image. The coordinator has one HTTP worker (--threads 1): a held
# request must not hold it (held.c), so it answers throughout the outage
# and each of the three reaches the database (the old code answered
# nothing more on a worker that a held request waited on: a full run
# once saw the image import stuck behind the data put's, its retry never
# logged).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
. "$(dirname "$0")/migrate_lib.sh"
. "$(dirname "$0")/image_lib.sh"
[ -d /mnt ] || fail "this test mounts a data set at /mnt, which is missing"
GP_TEST_DB=postgresql
DOWN_S=${PG_DOWN_S:-12}

pg_start
start_coordinator --threads 1
mk_token user alice
ALICE=$TOKEN
# (any image: the last job runs alice's unsigned one)
policy_file n1 "$(printf 'checkpoint-grace = 5s\nimages = any')"
start_provider n1 2
wait_node_up n1
images_build
DS="$T/ds"
mkdir -p "$DS/sub"
head -c $((5 << 20 | 777)) /dev/urandom >"$DS/big.bin"
printf 'held through a restart\n' >"$DS/sub/small.txt"
chmod 644 "$DS/big.bin" "$DS/sub/small.txt"
WANT=$(cd "$DS" && find . -type f | LC_ALL=C sort | xargs sha256sum)
GPUPOOL_TOKEN=$ALICE submit_steps 400 5 0.1
j=$JOB
wait_state "$j" running
wait_ckpt "$j" 1

log "the database goes down; an image import, a data put and a checkpoint meet it"
uploaded_before=$(grep -c "checkpoint uploaded job=$j " "$T/agent-n1.log")
pg_stop
GPUPOOL_TOKEN=$ALICE "$GP" image import "$IMG/oci.tar" >"$T/import.out" 2>"$T/import.err" </dev/null &
IMPORT_PID=$!
GPUPOOL_TOKEN=$ALICE "$GP" data put ds "$DS" >"$T/put.out" 2>"$T/put.err" </dev/null &
PUT_PID=$!
# Held: the image's connection and the chunk store's (checkpoints or
# data: the first request that meets the fault holds the chunk store's
# lock while it waits, and the other waits behind it, blob.h) log their
# retry, nothing is refused, the CLIs wait.
refusals() { grep -E 'refused .*status=5[0-9][0-9]' "$COORD_LOG"; }
retried() { grep -q "postgresql $1 failed .*retrying" "$COORD_LOG"; }
hold_until=$((SECONDS + DOWN_S))
deadline=$((SECONDS + WAIT_S))
while :; do
	r=$(refusals) && fail "a commit was refused while the database was down: $r"
	alive "$COORD_PID" || fail "the coordinator exited while the database was down"
	# the one worker is free: the dashboard's page (no lock, no database)
	api - GET /
	[ "$API_STATUS" = 200 ] || fail "the HTTP worker did not answer while requests were held (HTTP $API_STATUS): $(grep -E 'postgresql (checkpoints|images|data) ' "$COORD_LOG" | tail -n 5)"
	{ retried checkpoints || retried data; } && retried images &&
	    [ $SECONDS -ge $hold_until ] && break
	[ $SECONDS -ge $deadline ] && fail "no retry of the chunk store's or the image's records within ${WAIT_S}s: $(grep -E 'postgresql (checkpoints|images|data) |status=' "$COORD_LOG" | tail -n 20)"
	sleep 0.2
done
alive "$IMPORT_PID" || fail "image import ended while the database was down: $(cat "$T/import.err")"
alive "$PUT_PID" || fail "data put ended while the database was down: $(cat "$T/put.err")"
pg_start

log "the database is back: all three go through"
wait_exit "$IMPORT_PID" || fail "image import still running ${WAIT_S}s after the database came back"
wait "$IMPORT_PID" || fail "image import failed: $(cat "$T/import.err")"
wait_exit "$PUT_PID" || fail "data put still running ${WAIT_S}s after the database came back"
wait "$PUT_PID" || fail "data put failed: $(cat "$T/put.err")"
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c "checkpoint uploaded job=$j " "$T/agent-n1.log")" -gt "$uploaded_before" ]; do
	[ $SECONDS -ge $deadline ] && fail "no checkpoint uploaded after the database came back"
	sleep 0.2
done
grep -q "checkpoint upload failed" "$T/agent-n1.log" &&
    fail "the agent's upload failed: $(grep "checkpoint upload failed" "$T/agent-n1.log" | head -3)"
r=$(refusals) && fail "a commit was refused: $r"
for area in checkpoints images data; do
	retried $area || fail "the $area connection met no fault: the test did not test it"
	grep -q "postgresql $area recovered" "$COORD_LOG" || fail "no recovery of the $area records logged"
done

log "listed and usable"
api_expect 200 "$ALICE" GET /v1/images
assert_contains "$API_BODY" "$OCI_DIGEST" "the imported image's digest in the list"
api_expect 200 "$ALICE" GET /v1/data
assert_contains "$API_BODY" '"name":"ds"' "the data set in the list"
v=$(grep "checkpoint uploaded job=$j " "$T/agent-n1.log" | sed -n "$((uploaded_before + 1))p" | sed 's/.* version=\([0-9]*\) .*/\1/')
is_uint "$v" || fail "no version in the agent's line"
api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$j/checkpoints"
printf '%s' "$API_BODY" | json "$v in [c['version'] for c in d['checkpoints']]" | grep -qx true ||
    fail "version $v, uploaded through the outage, is not listed: $API_BODY"
cli cancel "$j"
mkdir "$T/restored"
as_user "$ALICE" cli checkpoint get "$j" "$T/restored"
assert_eq 0 "$CLI_RC" "checkpoint get: $CLI_ERR"
[ -s "$T/restored/COMPLETE" ] || fail "the restored checkpoint has no COMPLETE: $(ls -la "$T/restored")"
GPUPOOL_TOKEN=$ALICE submit --gpus 1 --data ds:/mnt -- sh -c \
    'cd /mnt && find . -type f | LC_ALL=C sort | xargs sha256sum'
wait_final "$JOB"
job_log "$JOB"
assert_eq succeeded "$FINAL_STATE" "the data set's job: $LOG"
assert_contains "$LOG" "$WANT" "the data set's files as the job read them"
GPUPOOL_TOKEN=$ALICE submit --gpus 1 --image busybox:oci
expect_image_ran "$JOB" n1
echo ok
