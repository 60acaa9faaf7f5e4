# A gang's overlay keys (issue 14, docs/agent.md "Gangs behind NATs"): two
# nodes register with their WireGuard public keys and UDP ports, one of
# them asking for the overlay always; the coordinator hands each part of a
# gang on them every part's key and endpoint (the node's address and port)
# in gang.overlay. A node without one, and so the gang, gets no overlay;
# nor does a gang whose nodes all gave an address and none asks for the
# overlay always (they are linked directly); a bad key is refused. The
# agents are curl so that the test sees exactly what is sent.
. "$(dirname "$0")/lib.sh"

KA=9eepCSsn2Gk9Yk8ZexzFLYWW7Blv3meT4KQsLxO2AAw=
KB=uFkjxn3mdIyhaH7LqJB6QkSZ+OxeO8qKijgBTj5G5Wc=
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
for bad in '{"key":"nope","port":51820}' "{\"key\":\"$KA\",\"port\":0}" \
    "{\"key\":\"$KA\"}" "{\"key\":\"$KA\",\"port\":1,\"x\":1}" '7' \
    "{\"key\":\"$KA\",\"port\":1,\"always\":\"yes\"}"; do
	api_expect 400 "$prov" POST /v1/agent/register "$(reg badnode 198.51.100.9 "$bad")"
	assert_contains "$API_BODY" "overlay" "the refusal of $bad"
done

api_expect 200 "$prov" POST /v1/agent/register \
    "$(reg nodea 198.51.100.2 "{\"key\":\"$KA\",\"port\":51820,\"always\":true}" 2)"
na=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
api_expect 200 "$prov" POST /v1/agent/register \
    "$(reg nodeb 203.0.113.2 "{\"key\":\"$KB\",\"port\":51821}")"
nb=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
is_uint "$na" && is_uint "$nb" || fail "register answers lack node_id"

submit --nodes 2 --gpus 1 -- true
job=$JOB
ga=$(poll_gang "$na")
gb=$(poll_gang "$nb")
for g in "$ga" "$gb"; do
	ov=$(printf '%s' "$g" | json '" ".join(p["key"] + "@" + p["endpoint"] for p in d["overlay"])')
	# the parts' order is the gang's: node a's part first or second
	case "$ov" in
	"$KA@198.51.100.2:51820 $KB@203.0.113.2:51821" | \
	    "$KB@203.0.113.2:51821 $KA@198.51.100.2:51820") ;;
	*) fail "gang.overlay: $g" ;;
	esac
	assert_eq "$ov" "$(printf '%s' "$ga" | json '" ".join(p["key"] + "@" + p["endpoint"] for p in d["overlay"])')" \
	    "both parts get the same overlay"
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
    "$(reg noded 192.0.2.4 "{\"key\":\"$KA\",\"port\":51822}")"
nd=$(printf '%s' "$API_BODY" | json 'd["node_id"]')
api_expect 200 "$prov" POST /v1/agent/register \
    "$(reg nodee 192.0.2.5 "{\"key\":\"$KB\",\"port\":51823,\"always\":false}")"
submit --nodes 2 --gpus 1 -- true
g=$(poll_gang "$nd")
assert_contains "$g" '"192.0.2.5"' "the third gang's addresses (node e)"
assert_eq "null" "$(printf '%s' "$g" | json 'd.get("overlay")')" \
    "gang.overlay when every node gave an address"
echo ok
