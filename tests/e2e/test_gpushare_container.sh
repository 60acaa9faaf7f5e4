#!/usr/bin/env bash
# A container job holding a fraction of a GPU gets libgpupool-cuda.so the
# way a plain job does: a copy in its work directory (which the container
# sees at the same path), LD_PRELOAD naming it and GPUPOOL_SHIM_REGION
# naming a region it may write; a whole-GPU container job gets neither.
# (The image is busybox-static, which a preload cannot enter: the test
# checks what the container sees, test_gpushare_pool what the library
# does.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

requirement_present oci-runtime ||
    skip oci-runtime "container jobs need root and crun or runc"
[ -x /bin/busybox ] || skip busybox "the test image is made from /bin/busybox"
[ -f "$GPUPOOL_BUILD/libgpupool-cuda.so" ] ||
    fail "no $GPUPOOL_BUILD/libgpupool-cuda.so: the build makes it"
start_coordinator
printf 'images = any\n' >"$T/any.policy"
start_agent c 1:FakeGPU:1024 --policy "$T/any.policy"
wait_node_up c
grep -q "container jobs disabled" "$T/agent-c.log" &&
    skip oci-runtime "this agent runs no container jobs: $(grep -m1 'container jobs disabled' "$T/agent-c.log")"
image_layer l --marker gpushare
image_oci box box:1 "$IMG/l.tgz"
cli image import "$IMG/box.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"
# One string: the test image's Entrypoint is /bin/sh -c (images.py).
# shellcheck disable=SC2016 # expanded by the job's shell
probe='echo "preload=$LD_PRELOAD"; test -r "$LD_PRELOAD" && echo lib-readable;
test -w "$GPUPOOL_SHIM_REGION" && echo region-writable;
echo "region=$GPUPOOL_SHIM_REGION"'
submit --image box:1 --gpu-share 0.5 --gpu-mem 256 -- "$probe"
half=$JOB
submit --image box:1 --gpus 1 -- "$probe"
whole=$JOB
wait_final "$half"
job_log "$half"
log "fraction: $LOG"
assert_eq succeeded "$FINAL_STATE" "the fraction's container job"
assert_contains "$LOG" "lib-readable" "the library in the container"
assert_contains "$LOG" "region-writable" "the region in the container"
assert_contains "$LOG" "/.gpupool-cuda.so" "LD_PRELOAD in the container"
wait_final "$whole"
job_log "$whole"
log "whole: $LOG"
assert_contains "$LOG" "preload=" "the whole job's output"
assert_not_contains "$LOG" "gpupool-cuda" "a whole-GPU job's LD_PRELOAD"
echo ok
