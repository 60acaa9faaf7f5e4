#!/usr/bin/env bash
# test_data_sets.sh: data sets through the CLI and the HTTP API. Versions
# and dedup; a put killed mid-upload resumes and sends only what is still
# missing; names, manifests and chunks that lie are refused (400/413) and
# store nothing; --data specs with bad paths are refused; sharing: bob
# sees nothing of alice's until she shares (404, as for an absent data
# set), then reads and mounts it, and cannot remove or reshare it; after
# unshare his queued job fails to start with a clear message; a provider
# not running a job cannot read its data sets; the GC (run every 300 ms
# here) never removes a chunk a data set or an upload in progress uses,
# and removes them once the data set is gone.
. "$(dirname "$0")/lib.sh"

command -v b2sum >/dev/null || fail "b2sum (coreutils) is needed"
[ -d /mnt ] || fail "this test mounts data sets at /mnt, which is missing"
export GPUPOOL_TEST_CKPT_GC_MS=300
start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
start_agent a1 1
start_agent a2 1
wait_node_up a1
wait_node_up a2
export GPUPOOL_TOKEN=$ALICE
chunks_of() { find "$COORD_DATA/checkpoints/$1/chunks" -type f 2>/dev/null | wc -l; }

# ---- versions and dedup
DS="$T/ds"
mkdir -p "$DS/sub"
head -c $((6 << 20)) /dev/urandom >"$DS/a.bin"
printf 'one\n' >"$DS/sub/b.txt"
ln -s /etc/passwd "$DS/link"
cli data put ds "$DS" --json
assert_eq 0 "$CLI_RC" "put: $CLI_ERR"
assert_eq 1 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "version"
assert_eq 2 "$(printf '%s' "$CLI_OUT" | json 'd["files"]')" "files (the link skipped)"
assert_eq 1 "$(printf '%s' "$CLI_OUT" | json 'd["skipped"]')" "skipped"
assert_eq 3 "$(printf '%s' "$CLI_OUT" | json 'd["chunks_sent"]')" "chunks sent"
assert_contains "$CLI_ERR" "skipped" "put warns about the link"
cli data put ds "$DS" --json
assert_eq 2 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "an unchanged put is a new version"
assert_eq 0 "$(printf '%s' "$CLI_OUT" | json 'd["bytes_sent"]')" "and sends nothing"
printf 'two\n' >"$DS/sub/b.txt"
cli data put ds "$DS" --json
assert_eq 3 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "third version"
assert_eq 4 "$(printf '%s' "$CLI_OUT" | json 'd["bytes_sent"]')" "only the changed file is sent"
# A single file.
cli data put one "$DS/a.bin" --json
assert_eq 0 "$CLI_RC" "put of a file: $CLI_ERR"
assert_eq 0 "$(printf '%s' "$CLI_OUT" | json 'd["bytes_sent"]')" "a file already stored (dedup across data sets)"
cli data ls --json
assert_eq "ds:3:3 one:1:1" "$(printf '%s' "$CLI_OUT" | json '" ".join("%s:%d:%d" % (s["name"], s["version"], s["versions"]) for s in d["data_sets"])')" "data ls"
cli data ls ds
assert_eq 0 "$CLI_RC" "data ls ds: $CLI_ERR"
assert_contains "$CLI_OUT" "alice/ds" "data ls ds"
cli data rm ds@2
assert_eq 0 "$CLI_RC" "rm ds@2: $CLI_ERR"
api "$ALICE" GET /v1/data/alice/ds
assert_eq "[1, 3]" "$(printf '%s' "$API_BODY" | json '[v["version"] for v in d["versions"]]')" "versions after rm ds@2"
cli data put ds "$DS" --json
assert_eq 4 "$(printf '%s' "$CLI_OUT" | json 'd["version"]')" "version numbers are never reused"

# ---- the GC keeps what data sets use (it ran many times meanwhile)
sleep 1
STORED=$(chunks_of alice)
assert_eq 4 "$STORED" "chunks of alice's data sets (3 of a.bin, 2 of b.txt)"

# ---- a put killed mid-upload resumes: only the missing chunks are sent
head -c $((160 << 20)) /dev/urandom >"$T/big.bin"
"$GP" data put big "$T/big.bin" --parallel 1 >"$T/put1.out" 2>&1 &
PUT=$!
deadline=$((SECONDS + WAIT_S))
while [ "$(chunks_of alice)" -lt $((STORED + 3)) ]; do
	alive "$PUT" || fail "the first put ended before it could be killed: $(cat "$T/put1.out")"
	[ $SECONDS -ge $deadline ] && fail "the first put stored nothing"
	sleep 0.05
done
kill -STOP "$PUT"
kill -KILL "$PUT"
wait "$PUT" 2>/dev/null
sleep 1 # the coordinator finishes or drops the PUT in flight; GC runs
SENT=$(($(chunks_of alice) - STORED))
[ "$SENT" -ge 3 ] && [ "$SENT" -lt 40 ] || fail "chunks stored by the killed put: $SENT"
cli data put big "$T/big.bin" --json
assert_eq 0 "$CLI_RC" "the resumed put: $CLI_ERR"
assert_eq $((40 - SENT)) "$(printf '%s' "$CLI_OUT" | json 'd["chunks_sent"]')" "the resumed put sends only what was missing"
api "$ALICE" GET /v1/data/alice/big/latest
assert_eq 200 "$API_STATUS" "the resumed version"
assert_eq $((160 << 20)) "$(printf '%s' "$API_BODY" | json 'd["bytes"]')" "its size"

# ---- bad input
api "$ALICE" POST /v1/uploads '{"data_set":"../x","manifest":{"files":[]}}'
assert_eq 400 "$API_STATUS" "a name with a slash and dots"
api "$ALICE" POST /v1/uploads '{"data_set":".hidden","manifest":{"files":[]}}'
assert_eq 400 "$API_STATUS" "a name starting with a dot"
api "$ALICE" POST /v1/uploads '{"data_set":"x","manifest":{"files":[]},"extra":1}'
assert_eq 400 "$API_STATUS" "an unknown field"
H=$(printf 'hello' | b2sum -l 256 | cut -d' ' -f1)
man() { printf '{"data_set":"bad","manifest":{"files":[%s]}}' "$1"; }
api "$ALICE" POST /v1/uploads "$(man "{\"path\":\"../x\",\"size\":5,\"mode\":420,\"chunks\":[\"$H\"]}")"
assert_eq 400 "$API_STATUS" "a path with '..'"
api "$ALICE" POST /v1/uploads "$(man "{\"path\":\"/etc/x\",\"size\":5,\"mode\":420,\"chunks\":[\"$H\"]}")"
assert_eq 400 "$API_STATUS" "an absolute path"
api "$ALICE" POST /v1/uploads "$(man "{\"path\":\"x\",\"size\":5,\"mode\":420,\"chunks\":[\"$H\",\"$H\"]}")"
assert_eq 400 "$API_STATUS" "two chunk names for 5 bytes"
api "$ALICE" POST /v1/uploads "$(man "{\"path\":\"x\",\"size\":5,\"mode\":420,\"chunks\":[\"$H\"]},{\"path\":\"y\",\"size\":6,\"mode\":420,\"chunks\":[\"$H\"]}")"
assert_eq 400 "$API_STATUS" "one chunk with two sizes"
assert_contains "$API_BODY" "two sizes" "the refusal"
# A manifest that lies about a size: stored 5 bytes, listed as 10.
api "$ALICE" POST /v1/uploads "$(man "{\"path\":\"x\",\"size\":10,\"mode\":420,\"chunks\":[\"$H\"]}")"
assert_eq 201 "$API_STATUS" "begin: $API_BODY"
UP=$(printf '%s' "$API_BODY" | json 'd["upload"]')
printf 'hello' >"$T/hello"
printf 'HELLO' >"$T/bad"
api "$ALICE" PUT "/v1/uploads/$UP/chunks/$H" @"$T/bad"
assert_eq 400 "$API_STATUS" "a chunk whose bytes do not match its name"
api "$ALICE" POST "/v1/uploads/$UP/commit"
assert_eq 400 "$API_STATUS" "a commit before the chunks"
api "$ALICE" PUT "/v1/uploads/$UP/chunks/$(printf 'other' | b2sum -l 256 | cut -d' ' -f1)" @"$T/hello"
assert_eq 400 "$API_STATUS" "a chunk the manifest does not list"
api "$ALICE" PUT "/v1/uploads/$UP/chunks/$H" @"$T/hello"
assert_eq 201 "$API_STATUS" "the chunk: $API_BODY"
api "$ALICE" POST "/v1/uploads/$UP/commit"
assert_eq 400 "$API_STATUS" "a commit whose chunk is shorter than the manifest says"
api "$BOB" POST "/v1/uploads/$UP/commit"
assert_eq 404 "$API_STATUS" "bob commits alice's upload"
api "$BOB" PUT "/v1/uploads/$UP/chunks/$H" @"$T/hello"
assert_eq 404 "$API_STATUS" "bob sends a chunk to alice's upload"
api "$ALICE" GET /v1/data/alice/bad
assert_eq 404 "$API_STATUS" "nothing was made of the lying manifest"
for spec in ds:data ds:/ ds:/proc/x ds:/sys ds:/tmp ds:/etc ds:/mnt/../x ds:/mnt/ .x:/mnt "ds@0:/mnt" "a/b/c:/mnt"; do
	cli submit --data "$spec" -- true
	assert_eq 2 "$CLI_RC" "submit --data $spec: $CLI_ERR"
done
cli submit --data ds:/mnt --data one:/mnt -- true
assert_eq 2 "$CLI_RC" "two data sets at one path"
cli submit --data ds:/mnt --data one:/mnt/x -- true
assert_eq 2 "$CLI_RC" "nested mount paths"
api "$ALICE" POST /v1/jobs '{"command":["true"],"data":[{"name":"ds","path":"/dev/shm"}]}'
assert_eq 400 "$API_STATUS" "API: a reserved path"
api "$ALICE" POST /v1/jobs '{"command":["true"],"data":[{"name":"ds","path":"/mnt","bad":1}]}'
assert_eq 400 "$API_STATUS" "API: an unknown field"
cli submit --data nosuch:/mnt -- true
assert_eq 1 "$CLI_RC" "a data set that does not exist"
assert_contains "$CLI_ERR" "no data set alice/nosuch" "the refusal"

# ---- sharing
api "$BOB" GET /v1/data/alice/ds
assert_eq 404 "$API_STATUS" "bob reads alice's data set"
NOSUCH=$(printf '%s' "$API_BODY" | sed 's/ds/nosuch/')
api "$BOB" GET /v1/data/alice/nosuch
assert_eq "404 $NOSUCH" "$API_STATUS $API_BODY" "an absent data set answers the same"
api "$ALICE" GET /v1/data/alice/ds/latest
CH=$(printf '%s' "$API_BODY" | json 'd["files"][0]["chunks"][0]')
api "$BOB" GET "/v1/data/alice/ds/latest/chunks/$CH"
assert_eq 404 "$API_STATUS" "bob probes a chunk of it"
GPUPOOL_TOKEN=$BOB cli data ls --json
assert_eq 0 "$(printf '%s' "$CLI_OUT" | json 'len(d["data_sets"])')" "bob lists nothing"
GPUPOOL_TOKEN=$BOB cli submit --data alice/ds:/mnt -- true
assert_eq 1 "$CLI_RC" "bob mounts alice's data set"
assert_contains "$CLI_ERR" "no data set alice/ds" "the refusal"
cli data share ds bob
assert_eq 0 "$CLI_RC" "share: $CLI_ERR"
assert_contains "$CLI_OUT" "bob" "share prints who"
GPUPOOL_TOKEN=$BOB cli data ls --json
assert_eq "alice/ds" "$(printf '%s' "$CLI_OUT" | json '" ".join(s["owner"] + "/" + s["name"] for s in d["data_sets"])')" "bob lists what is shared with him"
GPUPOOL_TOKEN=$BOB cli data rm alice/ds
assert_eq 1 "$CLI_RC" "bob removes alice's data set"
GPUPOOL_TOKEN=$BOB cli data share alice/ds bob2
assert_eq 1 "$CLI_RC" "bob reshares alice's data set"
GPUPOOL_TOKEN=$BOB submit --gpus 1 --data alice/ds:/mnt -- cat /mnt/sub/b.txt
wait_final "$JOB"
job_log "$JOB"
assert_eq succeeded "$FINAL_STATE" "bob's job on alice's data set: $LOG"
assert_contains "$LOG" two "bob's job reads it"
# ... a provider not running the job cannot read it, nor a user.
A1=$(cat "$T/a1.token")
A2=$(cat "$T/a2.token")
new_marker
GPUPOOL_TOKEN=$BOB submit --gpus 1 --data alice/ds:/mnt -- bash -c "exec -a $MARK sleep 600"
RUN=$JOB
wait_state "$RUN" running
NODE=$(job_get "$RUN" 'd["node"]')
if [ "$NODE" = a1 ]; then MINE=$A1 OTHER=$A2; else MINE=$A2 OTHER=$A1; fi
api "$MINE" GET "/v1/agent/jobs/$RUN/1/data/1"
assert_eq 200 "$API_STATUS" "the running job's provider reads its data set"
api "$OTHER" GET "/v1/agent/jobs/$RUN/1/data/1"
assert_eq 403 "$API_STATUS" "a provider not running the job"
api "$OTHER" GET "/v1/agent/jobs/$RUN/1/data/1/chunks/$CH"
assert_eq 403 "$API_STATUS" "a provider not running the job reads a chunk"
api "$MINE" GET "/v1/agent/jobs/$RUN/2/data/1"
assert_eq 409 "$API_STATUS" "another attempt"
api "$MINE" GET "/v1/agent/jobs/$RUN/1/data/2"
assert_eq 404 "$API_STATUS" "a data set the job does not mount"
api "$BOB" GET "/v1/agent/jobs/$RUN/1/data/1"
assert_eq 403 "$API_STATUS" "a user token on the agent's route"
OTHERCH=$(printf '%s' "$(api "$ALICE" GET /v1/data/alice/big/latest; printf '%s' "$API_BODY")" | json 'd["files"][0]["chunks"][0]')
api "$MINE" GET "/v1/agent/jobs/$RUN/1/data/1/chunks/$OTHERCH"
assert_eq 404 "$API_STATUS" "a chunk of another data set through the job's route"
GPUPOOL_TOKEN=$BOB cli cancel "$RUN"
wait_final "$RUN"
# ... unshared while bob's job waits: it fails to start, saying why.
new_marker
submit --gpus 1 -- bash -c "exec -a $MARK sleep 600"
B1=$JOB
submit --gpus 1 -- bash -c "exec -a $MARK sleep 600"
B2=$JOB
wait_state "$B1" running
wait_state "$B2" running
GPUPOOL_TOKEN=$BOB submit --gpus 1 --data alice/ds:/mnt -- true
LATE=$JOB
assert_eq queued "$(job_state "$LATE")" "bob's job waits"
cli data unshare ds bob
assert_eq 0 "$CLI_RC" "unshare: $CLI_ERR"
api "$BOB" GET /v1/data/alice/ds
assert_eq 404 "$API_STATUS" "bob after unshare"
cli cancel "$B1"
wait_final "$LATE"
assert_eq failed "$FINAL_STATE" "bob's job after the unshare"
assert_eq start_failed "$(job_get "$LATE" 'd["reason"]')" "its reason"
assert_contains "$(job_get "$LATE" 'd["message"]')" "no longer shared with bob" "why it could not start"
cli cancel "$B2"
GPUPOOL_TOKEN=$ADMIN_TOKEN cli data ls --all --json
assert_contains "$CLI_OUT" '"alice"' "the admin lists everyone's data sets"

# ---- a coordinator restart keeps data sets, versions and shares
cli data share ds bob
kill9_coordinator
start_coordinator
export GPUPOOL_TOKEN=$ALICE # start_coordinator made it the admin's
GPUPOOL_TOKEN=$BOB cli data ls --json
assert_eq "alice/ds@4" "$(printf '%s' "$CLI_OUT" | json '" ".join("%s/%s@%d" % (s["owner"], s["name"], s["version"]) for s in d["data_sets"])')" "bob's list after a coordinator restart"
cli data ls --json
assert_eq "big:1 ds:4 one:1" "$(printf '%s' "$CLI_OUT" | json '" ".join("%s:%d" % (s["name"], s["version"]) for s in d["data_sets"])')" "alice's list after a coordinator restart"

# ---- removal: the GC collects the chunks of removed data sets (but
# not the one of the upload still open from the bad-input section)
cli data rm ds
assert_eq 0 "$CLI_RC" "rm ds: $CLI_ERR"
cli data rm one
cli data rm big
deadline=$((SECONDS + WAIT_S))
until [ "$(chunks_of alice)" = 1 ]; do
	[ $SECONDS -ge $deadline ] && fail "chunks left after removing every data set: $(chunks_of alice)"
	sleep 0.3
done
assert_eq "$H" "$(basename "$(find "$COORD_DATA/checkpoints/alice/chunks" -type f)")" "the chunk left is the open upload's"
log "ok"
