# Proves the backup procedure of docs/operations.md: while the coordinator
# runs and takes work, `sqlite3 DB ".backup FILE"` of state.db and
# checkpoints.db, then a copy of the chunk store, the logs and admin.token,
# make a data directory that a coordinator starts from: it holds the jobs
# (state, log), tokens and checkpoints as they were at the backup (a
# checkpoint restores byte for byte), and nothing that came after.
. "$(dirname "$0")/lib.sh"
# The SQLite data directory's procedure, whatever the suite's store: a
# pool on PostgreSQL has no state.db to back up (its state is backed up
# with pg_dump, docs/operations.md "PostgreSQL"; gpupool has no backup
# command that could refuse it), and on a PostgreSQL pass this test used
# to fail at its first `sqlite3 state.db .backup`.
GP_TEST_DB=sqlite

CK="$GPUPOOL_BUILD/bench/bench_ckpt"
[ -x "$CK" ] || fail "no $CK (make builds it)"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing (scripts/install-deps.sh)"

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
start_agent b1 1
wait_node_up b1
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --name before -- sh -c 'echo "made before the backup"'
J1=$JOB
cli wait "$J1"
assert_eq 0 "$CLI_RC" "job $J1"

# A checkpoint of a job on a test node (bench_ckpt's minimal agent).
mk_token provider prov-ck
(umask 077 && printf '%s\n' "$TOKEN" >"$T/prov.token")
spawn "$T/node.log" "$CK" node --url "$(coord_url)" --token-file "$T/prov.token" \
    --name ck1 --out "$T/assign.txt"
wait_node_up ck1
kill -STOP "${AGENT_PID[b1]}"   # so that the next job goes to ck1
wait_node_state b1 down
GPUPOOL_TOKEN=$ALICE submit --gpus 1 -- sleep 3600
J2=$JOB
deadline=$((SECONDS + WAIT_S))
until grep -qx "$J2 1" "$T/assign.txt" 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "job $J2 never assigned to the test node"
	sleep 0.1
done
mkdir -p "$T/src/sub"
head -c $((9 << 20)) /dev/urandom >"$T/src/model.bin"
printf 'weights\n' >"$T/src/sub/notes"
printf 'step=7\n' >"$T/src/COMPLETE"
"$CK" upload --url "$(coord_url)" --token-file "$T/prov.token" --job "$J2" \
    --attempt 1 --dir "$T/src" >"$T/up.out" 2>&1 || fail "upload: $(cat "$T/up.out")"

# ---- the backup, while it runs (and a submitter keeps it busy)
(for i in $(seq 1 40); do
	"$GP" submit --gpus 0 -- true >/dev/null 2>&1
done) &
busy=$!
B="$T/backup"
mkdir -p "$B"
sqlite3 "$COORD_DATA/state.db" ".backup '$B/state.db'" || fail "backup of state.db"
sqlite3 "$COORD_DATA/checkpoints.db" ".backup '$B/checkpoints.db'" || fail "backup of checkpoints.db"
cp -a "$COORD_DATA/checkpoints" "$COORD_DATA/logs" "$COORD_DATA/admin.token" "$B/" ||
    fail "copying the chunks and logs"
wait "$busy"
sqlite3 "$B/state.db" 'PRAGMA integrity_check;' | grep -qx ok || fail "state.db backup is not intact"
sqlite3 "$B/checkpoints.db" 'PRAGMA integrity_check;' | grep -qx ok || fail "checkpoints.db backup is not intact"
n_backup=$(sqlite3 "$B/state.db" 'SELECT count(*) FROM jobs;')

# ---- after the backup: changes the backup must not have
bob_id=$(api "$ADMIN_TOKEN" GET /v1/tokens; printf '%s' "$API_BODY" | json '[t["id"] for t in d["tokens"] if t["name"] == "bob"][0]')
api_expect 200 "$ADMIN_TOKEN" POST "/v1/tokens/$bob_id/revoke"
GPUPOOL_TOKEN=$ALICE submit --gpus 0 --name after -- true
J_AFTER=$JOB
kill9_coordinator
kill -CONT "${AGENT_PID[b1]}"

# ---- restore: a coordinator on the backup
chmod 700 "$B"
COORD_DATA=$B
COORD_LOG="$T/restored.log"
COORD_PORT=$(free_port)
start_coordinator
api_expect 200 "$ALICE" GET "/v1/jobs/$J1"
assert_eq succeeded "$(printf '%s' "$API_BODY" | json 'd["state"]')" "job $J1 after the restore"
api_expect 200 "$ALICE" GET "/v1/jobs/$J1/log?offset=0"
assert_contains "$API_BODY" "made before the backup" "job $J1's log after the restore"
api_expect 200 "$BOB" GET /v1/whoami   # revoked after the backup
api "$ALICE" GET "/v1/jobs/$J_AFTER"
if [ "$API_STATUS" = 200 ] && [ "$(printf '%s' "$API_BODY" | json 'd["name"]')" = after ]; then
	fail "the job submitted after the backup is in it"
fi
n_restored=$(api "$ADMIN_TOKEN" GET '/v1/jobs?all=1'; printf '%s' "$API_BODY" | json 'len(d["jobs"])')
assert_eq "$n_backup" "$n_restored" "jobs in the restored pool"
api_expect 200 "$ALICE" GET "/v1/jobs/$J2/checkpoints"
assert_eq '["step=7"]' "$(printf '%s' "$API_BODY" | json '[c["label"] for c in d["checkpoints"]]')" "checkpoints after the restore"
mkdir "$T/got"
GPUPOOL_TOKEN=$ALICE cli checkpoint get "$J2" "$T/got"
assert_eq 0 "$CLI_RC" "checkpoint get from the restored pool: $CLI_ERR"
cmp -s "$T/src/model.bin" "$T/got/model.bin" || fail "the restored checkpoint differs"
cmp -s "$T/src/sub/notes" "$T/got/sub/notes" || fail "the restored checkpoint differs (notes)"
echo "ok"
