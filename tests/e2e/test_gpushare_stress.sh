#!/usr/bin/env bash
# 10,000 random allocations and frees of every kind against a 100 MB cap:
# each must fail with CUDA_ERROR_OUT_OF_MEMORY exactly when it would pass
# the cap (cudaprog's stress checks each step: no false OOM, no missed
# one), through the linked and the cuGetProcAddress paths.
. "$(dirname "$0")/gpushare_lib.sh"

export GPUPOOL_SHIM_LIMIT_BYTES=100000000
seed=1
for mode in direct procaddr procaddr-ptsz dlsym; do
	seed=$((seed + 1))
	prog "$mode" stress:10000:$seed:100000000 info
	[ "$PROG_RC" -eq 0 ] || fail "stress through $mode failed"
	grep -q "^stress ok steps=10000 " <<<"$PROG_OUT" ||
	    fail "no stress result through $mode"
	oom=$(sed -n 's/^stress ok .* oom=\([0-9]*\) .*/\1/p' <<<"$PROG_OUT")
	[ "${oom:-0}" -gt 0 ] || fail "the stress never met the cap ($mode)"
done
echo ok
