#!/usr/bin/env bash
# test_contain_gpu_nodes.sh: a plain job's /dev holds its own GPUs' nodes
# and no other GPU's (issue 15, gaps after finding 2). The agent runs in a
# mount namespace of its own whose /dev is a tmpfs of this test's: the
# host's null, zero, full, random, urandom and tty bound in, and regular
# files as stand-ins for nvidiactl, nvidia-uvm and nvidia0..3 (the fake
# GPUs' minors are their indices), each holding its name. With a gated job
# holding one GPU, a second one-GPU job lists /dev and reads every
# nvidia* node it has: it must find its own GPU's (GPUPOOL_GPUS) and the
# control nodes, and none of the other three.
. "$(dirname "$0")/lib.sh"

require root

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token provider prov-g1
(umask 077 && printf '%s\n' "$TOKEN" >"$T/g1.token")
mkdir -p "$T/dev"
# shellcheck disable=SC2016 # expanded by the inner shell
spawn "$T/agent-g1.log" unshare -m --propagation private sh -c '
	D=$1; shift
	mount -t tmpfs -o mode=755 gpdev "$D" || exit 1
	for n in null zero full random urandom tty; do
		[ -e "/dev/$n" ] || continue
		: >"$D/$n" && mount --bind "/dev/$n" "$D/$n" || exit 1
	done
	mkdir "$D/shm" && ln -s /proc/self/fd "$D/fd" || exit 1
	for n in nvidiactl nvidia-uvm nvidia0 nvidia1 nvidia2 nvidia3; do
		echo "node-$n" >"$D/$n" && chmod 666 "$D/$n" || exit 1
	done
	mount --rbind "$D" /dev && exec "$@"' sh "$T/dev" \
	"$GP" agent --coordinator "$(coord_url)" --token-file "$T/g1.token" \
	--name g1 --work "$T/agents/g1" --fake-gpus 4 --run-as nobody \
	--runtime none -v
AGENT_PID[g1]=$SPAWNED_PID
wait_node_up g1
export GPUPOOL_TOKEN=$ALICE

submit --gpus 1 -- sh -c "$(gated_job_cmd)"
held=$JOB
wait_state "$held" running
# shellcheck disable=SC2016 # expanded by the job's shell
PROBE='echo "mine=$GPUPOOL_GPUS"
for f in /dev/nvidia*; do cat "$f" 2>/dev/null || echo "unreadable $f"; done
echo "dev: $(ls /dev | tr "\n" " ")"; echo probed'
submit --gpus 1 -- sh -c "$PROBE"
j=$JOB
wait_final "$j"
job_log "$j"
out=$LOG
log "the job saw: $out"
release_job g1 "$held"
wait_final "$held"
assert_eq succeeded "$FINAL_STATE" "the job holding a GPU"
api "$ADMIN_TOKEN" GET "/v1/jobs/$j"
assert_contains "$out" probed "the probing job ran to its end"
mine=$(printf '%s\n' "$out" | sed -n 's/^mine=//p')
[[ $mine =~ ^[0-3]$ ]] || fail "the probing job's GPU: '$mine'"
assert_contains "$out" "node-nvidia$mine" "the job's own GPU's node"
assert_contains "$out" node-nvidiactl "the control node nvidiactl"
assert_contains "$out" node-nvidia-uvm "the control node nvidia-uvm"
for g in 0 1 2 3; do
	[ "$g" = "$mine" ] && continue
	assert_not_contains "$out" "node-nvidia$g" "another GPU's node"
	assert_not_contains "$out" "nvidia$g " "another GPU's node in /dev"
done
echo "ok: a one-GPU job (GPU $mine) sees /dev/nvidia$mine and the control nodes, no other GPU's"
