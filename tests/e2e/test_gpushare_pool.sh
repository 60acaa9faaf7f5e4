#!/usr/bin/env bash
# Two real jobs on one (fake) GPU through the whole pool: the agent
# preloads libgpupool-cuda.so into jobs that hold a fraction, so each of
# two --gpu-mem 512 jobs on a 1 GiB GPU gets its 512 MiB and no byte
# more, and sees 512 MiB as the device's memory; `show`, `top` and
# /metrics report each one's use from the library; a half left alone on
# the GPU may use all of it (elastic policy); a whole-GPU job runs
# without the library and sees the whole device.
. "$(dirname "$0")/gpushare_lib.sh"

start_coordinator
start_agent g 1:FakeGPU:1024 --policy "$GPUSHARE_POLICY"
wait_node_up g
half=536870912
env=(--env "LD_LIBRARY_PATH=$FAKE")
submit --gpu-share 0.5 --gpu-mem 512 "${env[@]}" -- "$FAKE/cudaprog" procaddr \
    alloc:$half alloc:1 info nvml waitfile:"$T/release-a"
a=$JOB
submit --gpu-share 0.5 --gpu-mem 512 "${env[@]}" -- "$FAKE/cudaprog" dlsym \
    alloc:$half info waitfile:"$T/release-b"
b=$JOB
wait_state "$a" running
wait_state "$b" running

# wait_use JOB TEXT: until `gpupool show JOB` has TEXT (the use the
# enforcement layer measured, through the agent's heartbeat).
wait_use() {
	local deadline=$((SECONDS + WAIT_S))
	while :; do
		cli show "$1"
		grep -qF -- "$2" <<<"$CLI_OUT" && return 0
		[ $SECONDS -ge $deadline ] && fail "show $1 never had '$2': $CLI_OUT"
		sleep 0.2
	done
}
# Both halves share the GPU: each may use its half, and holds its cap.
wait_use "$a" "gpu_mem=512/512M share_now=0.500"
wait_use "$b" "gpu_mem=512/512M share_now=0.500"
cli top --once
assert_contains "$CLI_OUT" "gpu 512/512M share 0.50" "top's running jobs"
api "$ADMIN_TOKEN" GET /metrics
assert_contains "$API_BODY" "gpupool_job_gpu_memory_used_bytes{node=\"g\",gpu=\"0\",job_id=\"$a\"" "the job's GPU memory in /metrics"
assert_contains "$API_BODY" "gpupool_job_gpu_share_ratio{node=\"g\",gpu=\"0\",job_id=\"$b\"" "the job's share in /metrics"
# Alone on the GPU (the policy is elastic), a job may use all of it.
touch "$T/release-b"
wait_final "$b" 60
wait_use "$a" "share_now=1.000"
touch "$T/release-a"
submit --gpus 1 "${env[@]}" -- "$FAKE/cudaprog" procaddr \
    alloc:$((half * 3)) info
w=$JOB
for j in "$a" "$b" "$w"; do
	wait_final "$j" 60
	job_log "$j"
	log "job $j: $FINAL_STATE"
	printf '%s\n' "$LOG" | sed 's/^/    | /' >&2
	[ "$FINAL_STATE" = succeeded ] || fail "job $j $FINAL_STATE"
	# shellcheck disable=SC2034 # read by expect_lines
	PROG_OUT=$LOG
	case $j in
	"$a") expect_lines "alloc $half ok
alloc 1 oom
info free=0 total=$half
nvml total=$half free=0 used=$half" ;;
	"$b") expect_lines "alloc $half ok
info free=0 total=$half" ;;
	"$w") expect_lines "alloc $((half * 3)) ok
info free=$((17179869184 - half * 3)) total=17179869184" ;;
	esac
done
# The two halves ran on the one GPU at the same time.
assert_eq "0 0" "$(job_get "$a" 'd["gpus"][0]') $(job_get "$b" 'd["gpus"][0]')" \
    "the halves' GPU"
grep -q "gpu sharing enforced" "$T/agent-g.log" ||
    fail "the agent did not say it enforces sharing"
echo ok
