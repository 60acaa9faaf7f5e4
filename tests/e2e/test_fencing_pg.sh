#!/usr/bin/env bash
# test_fencing_pg: a leader paused past its lease can never commit. Two
# coordinators over one PostgreSQL (the state in it), one data directory.
# a leads; SIGSTOP a; b takes over once the server has ended a's session
# (its lease) and accepts work; a submission is sent to a while it is
# stopped (the kernel queues it); SIGCONT a: it commits nothing (the
# submission is nowhere in the database, b's jobs are untouched), answers
# the submission 503 "not the leader" (naming b when it knows it) rather
# than cutting it, and steps down (exits 75); restarted, it stands by and
# names b.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

DATA="$T/coord"
declare -A PORT=() PID=()
PORT[a]=$(free_port)
PORT[b]=$(free_port)
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }
start_coord() {
	mkdir -p "$DATA"
	spawn "$T/coord-$1.log" "$GP" coordinator \
	    --listen "127.0.0.1:${PORT[$1]}" --data "$DATA" \
	    --lease-ms 4000 --heartbeat-ms 300 --db "$(pg_url)" \
	    --advertise-url "$(url_of "$1")" --leader-lease-ms 1500 -v
	PID[$1]=$SPAWNED_PID
}
epoch_now() { pg_psql "SELECT epoch FROM gp_leader WHERE id = 1"; }
jobs_named() { pg_psql "SELECT count(*) FROM gp_jobs WHERE spec LIKE '%$1%'"; }

start_coord a
COORD_DATA=$DATA COORD_PID=${PID[a]} COORD_PORT=${PORT[a]}
wait_ready
start_coord b
export GPUPOOL_URL="$(url_of a),$(url_of b)"
start_agent n1 2 --coordinator "$(url_of a)" --coordinator "$(url_of b)"
wait_node_up n1
submit --gpus 1 --name before -- echo before
wait_final "$JOB"
before=$JOB
epoch=$(epoch_now)

log "SIGSTOP a; b takes over"
kill -STOP "${PID[a]}"
deadline=$((SECONDS + WAIT_S))
until [ "$(epoch_now)" -gt "$epoch" ] 2>/dev/null; do
	[ $SECONDS -ge $deadline ] && fail "b did not take over from the stopped a within ${WAIT_S}s"
	sleep 0.1
done
assert_eq "$(url_of b)" "$(pg_psql "SELECT addr FROM gp_leader WHERE id = 1")" "gp_leader's addr"
# A submission to the stopped a alone, held by the kernel meanwhile.
curl -s -o "$T/fenced.body" -D "$T/fenced.headers" -w '%{http_code}' --max-time 60 \
    -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
    --data-binary '{"command":["echo","fenced-probe"],"name":"fenced-probe","gpus":1}' \
    "$(url_of a)/v1/jobs" >"$T/fenced.status" 2>/dev/null &
probe=$!
# b accepts work and runs it.
export GPUPOOL_URL="$(url_of b)"
COORD_PORT=${PORT[b]}
submit --gpus 1 --name after -- echo after-takeover
wait_final "$JOB"
after=$JOB
assert_eq succeeded "$(job_state "$after")" "the job submitted to b"
rows_before=$(pg_psql "SELECT count(*) || ' ' || coalesce(max(id), 0) FROM gp_jobs")

log "SIGCONT a: it commits nothing and steps down"
kill -CONT "${PID[a]}"
wait_exit "${PID[a]}" || fail "a resumed and did not step down"
wait "${PID[a]}"
rc=$?
assert_eq 75 "$rc" "a's exit status"
wait "$probe"
status=$(cat "$T/fenced.status")
[ "$status" = 201 ] || [ "$status" = 200 ] &&
    fail "the stopped a acknowledged a submission after losing the lead: $(cat "$T/fenced.body")"
# Held by a when it found the lead lost: answered before the exit, as a
# standby answers (clients follow the leader it names), not cut.
log "the submission held by a: HTTP $status $(cat "$T/fenced.body")"
assert_eq 503 "$status" "the answer to the submission a held"
assert_contains "$(cat "$T/fenced.body")" "not the leader" "the answer to the submission a held"
grep -qi '^retry-after:' "$T/fenced.headers" || fail "no Retry-After in a's answer"
named=$(sed -n 's/^[Xx]-[Gg]pupool-[Ll]eader: *//p' "$T/fenced.headers" | tr -d '\r')
if [ -n "$named" ]; then
	assert_eq "$(url_of b)" "$named" "the leader a's answer names"
else
	log "a's answer names no leader (it found the lead lost before it knew who leads)"
fi
assert_eq 0 "$(jobs_named fenced-probe)" "jobs of the fenced submission in the database"
assert_eq "$rows_before" "$(pg_psql "SELECT count(*) || ' ' || coalesce(max(id), 0) FROM gp_jobs")" "gp_jobs after a resumed"
assert_eq succeeded "$(job_state "$after")" "b's job after a resumed"
assert_eq succeeded "$(job_state "$before")" "a's job after a resumed"
if grep -q 'fenced: the leader epoch' "$T/pg.log" "$T/coord-a.log"; then
	log "a's write was refused by the epoch check"
else
	log "a noticed the lost lock first (its write never reached the epoch check)"
fi

log "a restarted stands by and names b"
start_coord a
deadline=$((SECONDS + WAIT_S))
# (a standby that has not read gp_leader yet answers 503 naming no leader)
until COORD_PORT=${PORT[a]} && api - GET /v1/whoami && [ "$API_STATUS" = 503 ] &&
    [ "$(printf '%s' "$API_BODY" | json 'd.get("leader") or ""')" != "" ]; do
	alive "${PID[a]}" || fail "a exited as a standby"
	[ $SECONDS -ge $deadline ] && fail "a does not stand by (HTTP $API_STATUS)"
	sleep 0.1
done
assert_eq "$(url_of b)" "$(printf '%s' "$API_BODY" | json 'd["leader"]')" "the leader a names"
log ok
