#!/usr/bin/env bash
# test_advertise_pg: every coordinator on PostgreSQL has an advertised URL
# and takes part in the election (src/coord/main.c, leader.c), so that a
# second coordinator on one database stands by instead of fencing the
# first off (each used to take the lead when it started, and they fenced
# each other in turn):
#   - two coordinators with --db postgresql://... and no --advertise-url:
#     the URL is derived from --listen; the first leads, the second answers
#     503 naming the first, and writes through the leader fence nobody;
#   - a third advertising the leader's URL exits with status 78, saying
#     so, and the leader leads on (same epoch);
#   - --listen 0.0.0.0 without --advertise-url: refused before it listens;
#   - kill -9 of the leader and its restart at once with the same URL: not
#     refused (the dead session's URL lock goes), the standby leads.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

LEASE_MS=1500
declare -A PORT=() PID=()
for n in a b c; do
	PORT[$n]=$(free_port)
done
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
while [ "${PORT[c]}" = "${PORT[a]}" ] || [ "${PORT[c]}" = "${PORT[b]}" ]; do
	PORT[c]=$(free_port)
done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }

# start_coord NAME [ARGS...]: a coordinator on the shared database, data
# in $T/NAME, no --advertise-url unless ARGS gives one.
start_coord() {
	local n=$1
	shift
	mkdir -p "$T/$n"
	spawn "$T/coord-$n.log" "$GP" coordinator \
	    --listen "127.0.0.1:${PORT[$n]}" --data "$T/$n" \
	    --lease-ms 2000 --heartbeat-ms 300 --db "$(pg_url)" \
	    --leader-lease-ms "$LEASE_MS" -v "$@"
	PID[$n]=$SPAWNED_PID
}
at() { COORD_PORT=${PORT[$1]}; }
epoch_row() { pg_psql "SELECT epoch || ' ' || addr FROM gp_leader WHERE id = 1"; }

# standby_of NAME LEADER: NAME answers 503 naming LEADER's URL (bounded:
# until a new standby has read gp_leader once, it names no leader).
standby_of() {
	local deadline=$((SECONDS + WAIT_S)) named
	at "$1"
	while :; do
		alive "${PID[$1]}" || fail "coordinator $1 exited; expected a standby"
		if api - GET /v1/whoami && [ "$API_STATUS" = 503 ]; then
			named=$(printf '%s' "$API_BODY" | json 'd.get("leader") or ""')
			[ "$named" = "$(url_of "$2")" ] && break
		fi
		[ $SECONDS -ge $deadline ] && fail "$1 does not stand by naming $2 (HTTP $API_STATUS: $API_BODY)"
		sleep 0.1
	done
	grep -qi "^X-Gpupool-Leader: $(url_of "$2")" "$API_HEADERS" ||
	    fail "$1's answer has no X-Gpupool-Leader: $(url_of "$2")"
}

log "two coordinators on one database, neither given --advertise-url"
start_coord a
COORD_DATA=$T/a COORD_PID=${PID[a]} COORD_PORT=${PORT[a]}
wait_ready
grep -q "advertise url=$(url_of a) " "$T/coord-a.log" ||
    fail "a logged no derived URL: $(grep -m1 advertise "$T/coord-a.log")"
start_coord b
standby_of b a
[ -e "$T/b/admin.token" ] && fail "the standby b loaded the state"
e=$(epoch_row)
assert_eq "1 $(url_of a)" "$e" "gp_leader while a leads"
# Writes through the leader (tokens made), while b runs: none fenced.
at a
for i in 1 2 3 4 5; do
	mk_token user "u$i"
done
export GPUPOOL_URL="$(url_of b),$(url_of a)" GPUPOOL_TOKEN=$ADMIN_TOKEN
cli token ls
assert_eq 0 "$CLI_RC" "token ls through the standby's URL first: $CLI_ERR"
assert_contains "$CLI_OUT" u5 "token ls"
alive "${PID[a]}" || fail "the leader a exited with b on the database"
alive "${PID[b]}" || fail "the standby b exited"
assert_eq "$e" "$(epoch_row)" "gp_leader after the submissions"
grep -h 'fenced\|stepping down' "$T"/coord-?.log && fail "a coordinator was fenced"

log "a third coordinator advertising the leader's URL"
start_coord c --advertise-url "$(url_of a)/"
wait_exit "${PID[c]}" $((WAIT_S + 2 * LEASE_MS / 1000)) ||
    fail "c, advertising a's URL, still runs: $(tail -3 "$T/coord-c.log")"
wait "${PID[c]}"
assert_eq 78 "$?" "c's exit status"
grep -q "refusing to run: another live coordinator on this database advertises the same url=$(url_of a)/" "$T/coord-c.log" ||
    fail "c did not say why: $(tail -3 "$T/coord-c.log")"
assert_eq "$e" "$(epoch_row)" "gp_leader after c"
cli ps
assert_eq 0 "$CLI_RC" "ps after c: $CLI_ERR"

log "--listen 0.0.0.0 without --advertise-url"
# (a's port: were it not refused first, it could not listen there either)
mkdir -p "$T/d"
timeout 30 "$GP" coordinator --listen "0.0.0.0:${PORT[a]}" --data "$T/d" \
    --db "$(pg_url)" --insecure >"$T/coord-d.log" 2>&1
rc=$?
assert_eq 1 "$rc" "a coordinator on --listen 0.0.0.0 without --advertise-url"
grep -q "needs --advertise-url URL" "$T/coord-d.log" ||
    fail "no clear refusal: $(cat "$T/coord-d.log")"

log "kill -9 of the leader, restarted at once with the same URL"
kill -9 "${PID[a]}"
wait_exit "${PID[a]}" || fail "a survived kill -9"
start_coord a
# (b, polling, and the new a, once the old session's URL lock is gone,
# may either win: whichever leads, the other stands by naming it)
deadline=$((SECONDS + WAIT_S))
until [[ $(epoch_row) == "2 "* ]]; do
	[ $SECONDS -ge $deadline ] && fail "no coordinator took over: $(epoch_row)"
	sleep 0.1
done
if [ "$(epoch_row)" = "2 $(url_of b)" ]; then
	standby_of a b
else
	assert_eq "2 $(url_of a)" "$(epoch_row)" "gp_leader after the kill"
	standby_of b a
fi
grep -q "refusing to run" "$T/coord-a.log" && fail "a was refused after its own kill -9"
log "ok: derived URLs, one leader, a duplicate URL refused"
