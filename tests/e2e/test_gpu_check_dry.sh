# scripts/gpu-check.sh is the one script a GPU machine runs (CI never has
# one): its dry run on the fake driver keeps it from rotting unseen. The
# checks a fake can pass must PASS (discovery through NVML, the memory cap
# and the neighbour unaffected); those it cannot (nvidia-smi, the PTX
# kernel, throughput ratios, a container's device node) may FAIL, but the
# script must reach its end and say so. The kernels of checks 4 and 6
# run 1 s each, not 30 and 10: the fake driver's rates are printed, not
# judged here, and spinning burnt 50 s of a CI core.
. "$(dirname "$0")/lib.sh"

build=$(cd "$(dirname "$GP")" && pwd)
[ -x "$build/fakecuda/cudaprog" ] || fail "no $build/fakecuda/cudaprog: build the fake driver (make)"
root=$(cd "$(dirname "$0")/../.." && pwd)
rel=${build#"$root"/}
out=$T/gpu-check.out
(cd "$root" && GPU_CHECK_DRY_RUN=1 BUILD=$rel SPIN_SECONDS=1 LAUNCH_SECONDS=1 \
    timeout 600 scripts/gpu-check.sh) >"$out" 2>&1
log "$(cat "$out")"
for want in "PASS gpupool up found the GPU through NVML" \
    "PASS the half past its cap got CUDA_ERROR_OUT_OF_MEMORY" \
    "PASS the other half was unaffected" \
    "kernels/s: share 0.25 job" \
    "launch-bound kernels/s: unwrapped" \
    "INFO done:"; do
	assert_contains "$(cat "$out")" "$want" "gpu-check's dry run"
done
assert_not_contains "$(cat "$out")" "missing " "gpu-check's dry run"
echo ok
