# A gang's overlay keys (issue 14, docs/agent.md "Gangs behind NATs"): two
# nodes register their overlay UDP port ranges, one of them asking for the
# overlay always; the coordinator makes a WireGuard key pair per part of
# each gang on them and hands each part every part's public key and
# endpoint (the node's address and a port of its range that no other
# overlay part there holds) in gang.overlay, and its own private key alone
# in gang.overlay_private_key. Checked: two gangs get different keys and
# ports; show --json's parts carry the public keys and endpoints handed
# out; a part's private key matches its public key (wg pubkey) and
# appears in no other part's assignment, nor in show, show --json, the
# queue, /metrics or the coordinator's log. A node without an overlay, and
# so the gang, gets none; nor does a gang whose nodes all gave an address
# and none asks for the overlay always (they are linked directly); a bad
# overlay is refused. The agents are curl so that the test sees exactly
# what is sent.
. "$(dirname "$0")/lib.sh"

KA=9eepCSsn2Gk9Yk8ZexzFLYWW7Blv3meT4KQsLxO2AAw=
reg() { # NAME ADDR OVERLAY-JSON-OR-EMPTY [GPUS]
	local ov= gpus= i
	[ -n "$3" ] && ov=",\"overlay\":$3"
	for i in $(seq 0 $((${4:-1} - 1))); do
		gpus="$gpus${gpus:+,}{\"index\":$i,\"uuid\":\"GPU-$1-$i\",\"model\":\"Fake\",\"mem_mib\":1000}"
	done
	printf '{"protocol":1,"name":"%s","addr":"%s","cpus":4,"mem_mib":4000,"gpus":[%s],"running":[]%s}' \
	    "$1" "$2" "$gpus" "$ov"
}
poll_gang() { # NODE_ID: prints the gang object of the first assignment
	local deadline=$((SECONDS + WAIT_S)) got=
	while [ -z "$got" ]; do
		[ $SECONDS -ge $deadline ] && fail "no assignment: $API_BODY"
		api_expect 200 "$prov" GET "/v1/agent/poll?node_id=$1&wait_ms=1000"
		got=$(printf '%s' "$API_BODY" | json 'json.dumps(d["assignments"][0]["gang"], sort_keys=True) if d["assignments"] else ""')
	done
	printf '%s' "$got"
}

start_coordinator --lease-ms 600000
mk_token provider prov-a
prov=$TOKEN

# bad overlays: refused with the reason
for bad in '{"key":"nope","port":51820}' '{"port":0}' "{\"key\":\"$KA\"}" \
    '{"port":1,"x":1}' '7' '{"port":1,"always":"yes"}' '{"port":1,"ports":0}' \
    '{"port":65530,"ports":7}' '{"port":1,"ports":"2"}'; do
	api_expect 400 "$prov" POST /v1/agent/register "$(reg badnode 198.51.100.9 "$bad")"
	assert_contains "$API_BODY" "overlay" "the refusal of $bad"
done

# (an agent older than per-gang keys sent its own key: still accepted)
api_expect 200 "$prov" POST /v1/agent/register \
    "$(reg nodea 198.51.100.2 "{\"key\":\"$KA\",\"port\":51820,\"ports\":4,\"always\":true}" 3)"
na=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
api_expect 200 "$prov" POST /v1/agent/register \
    "$(reg nodeb 203.0.113.2 '{"port":51830,"ports":4}' 2)"
nb=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
is_uint "$na" && is_uint "$nb" || fail "register answers lack node_id"

# Each part's overlay: "KEY@ENDPOINT ..." for every part, its own private
# key, and checks that the private key is its own entry's.
ov_of() { printf '%s' "$1" | json '" ".join(p["key"] + "@" + p["endpoint"] for p in d["overlay"])'; }
priv_of() { printf '%s' "$1" | json 'd.get("overlay_private_key") or ""'; }
check_part() { # GANG-JSON
	local priv pub own
	priv=$(priv_of "$1")
	[ -n "$priv" ] || fail "no gang.overlay_private_key: $1"
	own=$(printf '%s' "$1" | json 'd["overlay"][d["part"]]["key"]')
	if command -v wg >/dev/null 2>&1; then
		pub=$(printf '%s\n' "$priv" | wg pubkey)
		assert_eq "$own" "$pub" "the part's private key is its own entry's"
	fi
}

submit --nodes 2 --gpus 1 -- sleep 600
job=$JOB
ga=$(poll_gang "$na")
gb=$(poll_gang "$nb")
ov=$(ov_of "$ga")
assert_eq "$ov" "$(ov_of "$gb")" "both parts get the same overlay"
case "$ov" in
*@198.51.100.2:51820\ *@203.0.113.2:51830 | *@203.0.113.2:51830\ *@198.51.100.2:51820) ;;
*) fail "gang.overlay endpoints: $ov" ;;
esac
assert_not_contains "$ov" "$KA" "a node's own key is not a gang's"
check_part "$ga"
check_part "$gb"
pa=$(priv_of "$ga")
pb=$(priv_of "$gb")
# show --json: each running part's public key and endpoint, as handed out
cli show --json "$job"
assert_eq "$ov" "$(printf '%s' "$CLI_OUT" | json '" ".join(p["overlay"]["key"] + "@" + p["overlay"]["endpoint"] for p in d["parts"])')" \
    "show --json's parts' overlay"
[ "$pa" != "$pb" ] || fail "the two parts got one private key"
assert_not_contains "$gb" "$pa" "part a's private key in part b's assignment"
assert_not_contains "$ga" "$pb" "part b's private key in part a's assignment"

# A second gang on the same nodes: keys of its own, the next ports.
submit --nodes 2 --gpus 1 -- sleep 600
job2=$JOB
g2a=$(poll_gang "$na")
g2b=$(poll_gang "$nb")
ov2=$(ov_of "$g2a")
case "$ov2" in
*@198.51.100.2:51821\ *@203.0.113.2:51831 | *@203.0.113.2:51831\ *@198.51.100.2:51821) ;;
*) fail "the second gang's endpoints: $ov2" ;;
esac
for k in $ov; do
	assert_not_contains "$ov2" "${k%@*}" "the second gang's keys (the first's $k)"
done
check_part "$g2a"
for p in "$(priv_of "$g2a")" "$(priv_of "$g2b")"; do
	[ "$p" != "$pa" ] && [ "$p" != "$pb" ] || fail "a private key of the first gang again"
done

# No private key anywhere but in its part's assignment.
for p in "$pa" "$pb" "$(priv_of "$g2a")" "$(priv_of "$g2b")"; do
	for j in "$job" "$job2"; do
		cli show "$j"
		assert_not_contains "$CLI_OUT" "$p" "show $j"
		cli show --json "$j"
		assert_not_contains "$CLI_OUT" "$p" "show --json $j"
	done
	cli queue
	assert_not_contains "$CLI_OUT" "$p" "queue"
	api_expect 200 "$ADMIN_TOKEN" GET /metrics
	assert_not_contains "$API_BODY" "$p" "/metrics"
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/jobs/$job"
	assert_not_contains "$API_BODY" "$p" "GET /v1/jobs/$job (admin)"
	assert_not_contains "$(cat "$COORD_LOG")" "$p" "the coordinator's log"
	assert_not_contains "$(cat "$COORD_DATA"/* 2>/dev/null | tr -d '\0')" "$p" "the coordinator's store"
done

# node c, outside the overlay, joins; the next gang (on a, the GPU it
# has left, and c) gets none
api_expect 200 "$prov" POST /v1/agent/register "$(reg nodec 192.0.2.3 '')"
submit --nodes 2 --gpus 1 -- true
g=$(poll_gang "$na")
assert_contains "$g" '"192.0.2.3"' "the second gang's addresses (node c)"
assert_eq "null" "$(printf '%s' "$g" | json 'd.get("overlay")')" \
    "gang.overlay with a node outside the overlay"

# nodes d and e join with keys and addresses, neither asking for the
# overlay always: their gang is linked directly, no overlay
api_expect 200 "$prov" POST /v1/agent/register \
    "$(reg noded 192.0.2.4 '{"port":51822}')"
nd=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
api_expect 200 "$prov" POST /v1/agent/register \
    "$(reg nodee 192.0.2.5 '{"port":51823,"always":false}')"
submit --nodes 2 --gpus 1 -- true
g=$(poll_gang "$nd")
assert_contains "$g" '"192.0.2.5"' "the third gang's addresses (node e)"
assert_eq "null" "$(printf '%s' "$g" | json 'd.get("overlay")')" \
    "gang.overlay when every node gave an address"
echo ok
