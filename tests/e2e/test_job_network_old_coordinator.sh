#!/usr/bin/env bash
# Version skew (issue 14, accounting): an agent that counts its jobs'
# network bytes with a coordinator that says it takes them but refuses
# them (400), as one older than them would if it ever said so. Through a
# proxy that plays it: the agent sends the heartbeat's "network" once,
# hears the refusal and sends neither it nor the finished report's bytes
# from then on. Through a second proxy that refuses only the finished
# report's bytes: it goes again without them. Both jobs end as they should.
# The first proxy also refuses the registration's gang overlay (a
# coordinator older than overlays): the agent registers again without it.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip root "job networks need it"
command -v nft >/dev/null 2>&1 || skip nft "job networks need it"
start_coordinator
proxy() { # NAME REFUSED-FIELD...: its port in PORT
	local name=$1 a=()
	shift
	PORT=$(free_port)
	for f in "$@"; do
		a+=(--refuse-field "$f")
	done
	spawn "$T/$name.log" "$PY" "$(dirname "$0")/old_coordinator.py" \
	    --listen "$PORT" --upstream "127.0.0.1:$COORD_PORT" "${a[@]}"
	deadline=$((SECONDS + WAIT_S))
	until curl -s -o /dev/null "http://127.0.0.1:$PORT/v1/whoami"; do
		[ $SECONDS -ge $deadline ] && fail "the proxy does not answer: $(tail -n 5 "$T/$name.log")"
		sleep 0.1
	done
}
fin='/v1/agent/jobs/*:net_sent_bytes'
batch=/v1/agent/reports:net_sent_bytes
proxy proxy /v1/agent/heartbeat:network "$fin" "$batch" \
    /v1/agent/register:overlay
start_agent n 1:T4:16384 --coordinator "http://127.0.0.1:$PORT"
proxy proxy2 "$fin" "$batch"
start_agent m 1:L4:16384 --coordinator "http://127.0.0.1:$PORT"
wait_node_up n
wait_node_up m
grep -q "job networks ready" "$T/agent-n.log" ||
    skip netns "$(grep -m1 "job network" "$T/agent-n.log")"
submit --gpus 1 --gpu-model L4 --time 2m -- sh -c "$(gated_job_cmd)"
job2=$JOB
submit --gpus 1 --gpu-model T4 --time 2m -- sh -c "$(gated_job_cmd)"
job=$JOB
wait_state "$job" running
one_refused_heartbeat "$T/proxy.log" "$T/agent-n.log" \
    "coordinator refused the job network report" "network report"
release_job n "$job"
wait_final "$job"
assert_eq succeeded "$FINAL_STATE" "the job on n"
assert_eq 1 "$(grep -v "/v1/agent/register" "$T/proxy.log" | grep -c " 400$")" \
    "requests refused by the first proxy (one heartbeat, no finished report)"
# An agent that readied an overlay (root, wireguard-go) offered it once,
# then registered without it.
if grep -q "gang overlay ready" "$T/agent-n.log"; then
	grep -q "coordinator refused the gang overlay" "$T/agent-n.log" ||
	    fail "agent n did not hear the overlay's refusal: $(grep register "$T/proxy.log")"
	assert_eq 1 "$(grep "/v1/agent/register" "$T/proxy.log" | grep -c " 400$")" \
	    "registrations refused (the one with the overlay)"
fi
wait_state "$job2" running
release_job m "$job2"
wait_final "$job2"
assert_eq succeeded "$FINAL_STATE" "the job on m, its finished report refused once"
grep -q "coordinator refused a finished report with network bytes" "$T/agent-m.log" ||
    fail "the finished report was not refused with its network bytes: $(grep "/v1/agent/" "$T/proxy2.log" | tail -n 5)"
echo ok
