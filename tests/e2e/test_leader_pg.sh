#!/usr/bin/env bash
# test_leader_pg: several coordinators, one leader, over a real PostgreSQL
# (pg_lib.sh): leadership by the advisory lock and the fencing epoch in
# gp_leader (src/coord/leader.c), standbys that load nothing and answer
# 503 naming the leader, the CLI (both clients: the executable's http_lite
# and libcurl's) and an agent following the leader through a list of URLs;
# the leader SIGSTOPped past its lease loses to the standby and, resumed,
# steps down (exits 75); kill -9 of the leader, the standby leads.
#
# The state stays in each coordinator's own SQLite here (each has its own
# --data and its own tokens): this checks the election and the following,
# not a failover of the pool's state (test_failover_pg does, on the
# PostgreSQL store).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
pg_start

LEASE_MS=1500
declare -A PORT=() PID=()
PORT[a]=$(free_port)
PORT[b]=$(free_port)
while [ "${PORT[b]}" = "${PORT[a]}" ]; do PORT[b]=$(free_port); done
url_of() { echo "http://127.0.0.1:${PORT[$1]}"; }

# start_coord NAME: a coordinator of the election, data in $T/NAME.
start_coord() {
	mkdir -p "$T/$1"
	spawn "$T/coord-$1.log" "$GP" coordinator \
	    --listen "127.0.0.1:${PORT[$1]}" --data "$T/$1" \
	    --lease-ms 2000 --heartbeat-ms 300 \
	    --leader-db "$(pg_url)" --advertise-url "$(url_of "$1")" \
	    --leader-lease-ms "$LEASE_MS" -v
	PID[$1]=$SPAWNED_PID
}

# at NAME: api() (lib.sh) talks to coordinator NAME.
at() { COORD_PORT=${PORT[$1]}; }

# wait_leads NAME: NAME wrote its admin token and serves it.
wait_leads() {
	local deadline=$((SECONDS + WAIT_S)) tok
	while :; do
		alive "${PID[$1]}" || fail "coordinator $1 exited while waiting to lead"
		if [ -s "$T/$1/admin.token" ]; then
			tok=$(tr -d ' \r\n' <"$T/$1/admin.token")
			at "$1"
			api "$tok" GET /v1/whoami
			[ "$API_STATUS" = 200 ] && break
		fi
		[ $SECONDS -ge $deadline ] && fail "coordinator $1 did not lead within ${WAIT_S}s (last HTTP ${API_STATUS:-none})"
		sleep 0.1
	done
	TOKEN_OF[$1]=$tok
}
declare -A TOKEN_OF=()

# expect_standby NAME LEADER: NAME answers 503 naming LEADER's URL.
expect_standby() {
	local want
	want=$(url_of "$2")
	at "$1"
	# (until a new standby has read gp_leader once, it names no leader)
	local deadline=$((SECONDS + WAIT_S))
	while api - GET /v1/whoami && [ "$API_STATUS" = 503 ] &&
	    [ "$(printf '%s' "$API_BODY" | json 'd.get("leader") or ""')" = "" ] &&
	    [ $SECONDS -lt $deadline ]; do
		sleep 0.1
	done
	assert_eq 503 "$API_STATUS" "$1 (a standby) answering /v1/whoami"
	assert_error_body "$1's not-the-leader answer"
	assert_eq "$want" "$(printf '%s' "$API_BODY" | json 'd["leader"]')" \
	    "the leader named in $1's body"
	grep -qi "^X-Gpupool-Leader: $want" "$API_HEADERS" ||
	    fail "$1's answer has no X-Gpupool-Leader: $want: $(cat "$API_HEADERS")"
	grep -qi '^X-Gpupool-Role: standby' "$API_HEADERS" ||
	    fail "$1's answer has no X-Gpupool-Role: standby"
	# A change is refused alike, before any token check or body read.
	api "${TOKEN_OF[$2]:-x}" POST /v1/jobs '{"command":["true"]}'
	assert_eq 503 "$API_STATUS" "$1 (a standby) answering a submission"
	# An upload larger than any JSON body: 503 too, never 413.
	head -c 300000 /dev/zero >"$T/big.bin"
	api - PUT /v1/data/x/chunks/y "@$T/big.bin"
	assert_eq 503 "$API_STATUS" "$1 (a standby) answering a 300 KB upload"
}

epoch_row() { pg_psql "SELECT epoch || ' ' || addr FROM gp_leader WHERE id = 1"; }

log "a leads, b stands by"
start_coord a
wait_leads a
start_coord b
# b must be serving (as a standby) before it is asked anything.
deadline=$((SECONDS + WAIT_S))
until at b && api - GET /v1/whoami && [ "$API_STATUS" = 503 ]; do
	alive "${PID[b]}" || fail "coordinator b exited as a standby"
	[ $SECONDS -ge $deadline ] && fail "b does not answer as a standby (HTTP $API_STATUS)"
	sleep 0.1
done
expect_standby b a
[ -e "$T/b/admin.token" ] && fail "the standby b loaded state (wrote admin.token)"
at b
api - GET /
assert_eq 200 "$API_STATUS" "a standby serves the dashboard's files"
assert_eq "1 $(url_of a)" "$(epoch_row)" "gp_leader after a won"

log "clients follow the leader: b's URL first"
export GPUPOOL_URL="$(url_of b),$(url_of a)" GPUPOOL_TOKEN=${TOKEN_OF[a]}
cli ps
assert_eq 0 "$CLI_RC" "ps (the executable's client) through the standby: $CLI_ERR"
cli image ls
assert_eq 0 "$CLI_RC" "image ls (libcurl's client) through the standby: $CLI_ERR"
export GPUPOOL_URL="http://127.0.0.1:1,$(url_of b),$(url_of a)"
cli ps
assert_eq 0 "$CLI_RC" "ps with a dead URL, then the standby: $CLI_ERR"
# One URL, a standby: its answer, said plainly.
export GPUPOOL_URL="$(url_of b)"
cli ps
[ "$CLI_RC" = 0 ] && fail "ps reached a leader that was not in GPUPOOL_URL"
assert_contains "$CLI_ERR$CLI_OUT" "not the leader" "what ps says at a lone standby"

log "an agent given both coordinators registers with the leader"
COORD_PORT=${PORT[a]}
ADMIN_TOKEN=${TOKEN_OF[a]}
mk_token provider prov-n1
(umask 077 && printf '%s\n' "$TOKEN" >"$T/n1.token")
spawn "$T/agent-n1.log" "$GP" agent --coordinator "$(url_of b)" \
    --coordinator "$(url_of a)" --token-file "$T/n1.token" --name n1 \
    --work "$T/agents/n1" --fake-gpus 1 --run-as nobody -v
AGENT_PID[n1]=$SPAWNED_PID
wait_node_up n1
kill9_agent n1

log "a SIGSTOPped past its lease: b takes over; a, resumed, steps down"
kill -STOP "${PID[a]}"
wait_leads b
assert_eq "2 $(url_of b)" "$(epoch_row)" "gp_leader after b won"
kill -CONT "${PID[a]}"
wait_exit "${PID[a]}" || fail "a resumed and did not step down"
wait "${PID[a]}"
assert_eq 75 "$?" "a's exit status on stepping down"
grep -q 'stepping down' "$T/coord-a.log" || fail "a did not log why it stepped down"

log "a restarted is a standby; kill -9 of b: a leads again"
start_coord a
deadline=$((SECONDS + WAIT_S))
until at a && api - GET /v1/whoami && [ "$API_STATUS" = 503 ]; do
	alive "${PID[a]}" || fail "coordinator a exited as a standby"
	[ $SECONDS -ge $deadline ] && fail "a does not answer as a standby"
	sleep 0.1
done
expect_standby a b
kill -KILL "${PID[b]}"
wait_exit "${PID[b]}" || fail "b survived SIGKILL"
wait_leads a
assert_eq "3 $(url_of a)" "$(epoch_row)" "gp_leader after a won again"
export GPUPOOL_URL="$(url_of b),$(url_of a)" GPUPOOL_TOKEN=${TOKEN_OF[a]}
cli ps
assert_eq 0 "$CLI_RC" "ps with the dead b first: $CLI_ERR"
log "ok"
