#!/usr/bin/env bash
# A CUDA context takes device memory that no allocation call shows (about
# 520 MiB on an H100 with driver 580): the agent measures it on each GPU
# when it starts (src/agent/ctxprobe.c, a child that makes a context and
# asks NVML what it holds) and each process of a fractional job is charged
# it, so that a job with its contexts stays within its cap and two halves
# fit on the GPU together. What the driver keeps for itself (NVML's
# reserved memory) is not lent. On the fake driver here: 1 GiB, of which
# 128 MiB reserved, and a context of 64 MiB.
. "$(dirname "$0")/gpushare_lib.sh"

mib=1048576
printf 'total_bytes %d\nreserved_bytes %d\nctx_bytes %d\n' $((1024 * mib)) \
    $((128 * mib)) $((64 * mib)) >"$FAKECUDA_STATE"

# The library on its own: the process's context counts against the cap.
GPUPOOL_SHIM_LIMIT_BYTES=$((512 * mib)) GPUPOOL_SHIM_CTX_BYTES=$((64 * mib)) \
    prog procaddr info alloc:$((480 * mib)) alloc:$((448 * mib)) info
[ "$PROG_RC" -eq 0 ] || fail "cudaprog failed"
expect_lines "info free=$((448 * mib)) total=$((512 * mib))
alloc $((480 * mib)) oom
alloc $((448 * mib)) ok
info free=0 total=$((512 * mib))"

# The pool: an agent on the (fake) NVML driver, not --fake-gpus.
start_coordinator
mk_token provider prov-n
(umask 077 && printf '%s\n' "$TOKEN" >"$T/n.token")
LD_LIBRARY_PATH="$FAKE" spawn "$T/agent-n.log" "$GP" agent \
    --coordinator "$(coord_url)" --token-file "$T/n.token" --name n \
    --work "$T/agents/n" --run-as nobody --policy "$GPUSHARE_POLICY" -v
wait_node_up n
# Measured before the agent registers.
grep -q "gpu context index=0 ctx_mib=64 " "$T/agent-n.log" ||
    fail "the agent did not measure the context: $(grep 'gpu context' "$T/agent-n.log")"
cli nodes --json
assert_contains "$(tr -d ' \n' <<<"$CLI_OUT")" '"mem_mib":896' \
    "the GPU's memory less what the driver reserves"

env=(--env "LD_LIBRARY_PATH=$FAKE" --env "FAKECUDA_STATE=$FAKECUDA_STATE")
# Two halves of what is lent: each has its cap less its context.
half=448 usable=$((384 * mib))
submit --gpu-share 0.5 --gpu-mem $half "${env[@]}" -- "$FAKE/cudaprog" procaddr info \
    alloc:$usable alloc:1 info
a=$JOB
submit --gpu-share 0.5 --gpu-mem $half "${env[@]}" -- "$FAKE/cudaprog" dlsym \
    alloc:$usable info
b=$JOB
for j in "$a" "$b"; do
	wait_final "$j" 60
	job_log "$j"
	log "job $j: $FINAL_STATE"
	printf '%s\n' "$LOG" | sed 's/^/    | /' >&2
	[ "$FINAL_STATE" = succeeded ] || fail "job $j $FINAL_STATE"
done
job_log "$a"
PROG_OUT=$LOG
expect_lines "info free=$usable total=$((half * mib))
alloc $usable ok
alloc 1 oom
info free=0 total=$((half * mib))"
job_log "$b"
PROG_OUT=$LOG
expect_lines "alloc $usable ok
info free=0 total=$((half * mib))"
echo ok
