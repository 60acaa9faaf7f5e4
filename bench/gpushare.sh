#!/usr/bin/env bash
# bench/gpushare.sh: the cost of calls through libgpupool-cuda.so on the
# fake driver (tests/fakecuda), against the same calls without it, through
# cuGetProcAddress (the CUDA 12 runtime's path):
#   launch: cuLaunchKernel of a job whose share is 1 (a job alone on its
#           GPU, or not throttled now: the launch passes straight through)
#   alloc:  cuMemAlloc_v2 + cuMemFree_v2 of 4 KiB under a 1 GB cap (the
#           region's compare-and-swap, the pointer table), per pair
# Prints ns per call, three runs each. Usage: BUILD=build bench/gpushare.sh
set -u
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
F=$B/fakecuda
n=${N:-10000000}
m=${M:-2000000}
shim=(env "LD_PRELOAD=$B/libgpupool-cuda.so" GPUPOOL_SHIM_LIMIT_BYTES=1000000000)
ms() { LD_LIBRARY_PATH=$F "$@" | sed -n 's/.*ms=//p'; }
ns() { awk "BEGIN{printf \"%.1f\", $1*1e6/$2}"; }
for _ in 1 2 3; do
	d=$(ms "$F/cudaprog" procaddr launch:$n)
	s=$(ms "${shim[@]}" "$F/cudaprog" procaddr launch:$n)
	echo "launch: direct $(ns "$d" $n) ns, intercepted $(ns "$s" $n) ns," \
	    "over $(ns "$(awk "BEGIN{print $s-$d}")" $n) ns"
done
# A paced job (share 0.5) whose GPU is idle (the fake says 0 %): the
# token bucket's path (a lock, a clock read), not its waits.
echo "util 0" >"$B/gpushare-bench.state"
for _ in 1 2 3; do
	d=$(ms "$F/cudaprog" procaddr launch:$n)
	s=$(ms "${shim[@]}" GPUPOOL_SHIM_SHARE=500 \
	    FAKECUDA_STATE="$B/gpushare-bench.state" \
	    "$F/cudaprog" procaddr launch:$n)
	echo "launch paced: direct $(ns "$d" $n) ns, intercepted $(ns "$s" $n)" \
	    "ns, over $(ns "$(awk "BEGIN{print $s-$d}")" $n) ns"
done
for _ in 1 2 3; do
	d=$(ms "$F/cudaprog" procaddr allocfree:$m:4096)
	s=$(ms "${shim[@]}" "$F/cudaprog" procaddr allocfree:$m:4096)
	echo "alloc+free: direct $(ns "$d" $m) ns, intercepted $(ns "$s" $m)" \
	    "ns, over $(ns "$(awk "BEGIN{print $s-$d}")" $m) ns (a pair: two calls)"
done
