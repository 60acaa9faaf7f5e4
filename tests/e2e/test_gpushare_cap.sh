#!/usr/bin/env bash
# libgpupool-cuda.so caps a job's GPU memory at the exact byte on every
# allocation path of the driver API, whichever way the program found the
# driver's functions (linked, dlsym, cuGetProcAddress and its _v2, with
# the per-thread default stream), and cuMemGetInfo and NVML show the cap.
. "$(dirname "$0")/gpushare_lib.sh"

export GPUPOOL_SHIM_LIMIT_BYTES=1000000
for mode in direct dlsym procaddr procaddr-legacy procaddr-ptsz; do
	log "mode $mode"
	prog "$mode" alloc:999999 alloc:1 alloc:1 info nvml free free \
	    alloc:1000000 free alloc:1000001 \
	    managed:1000000 managed:1 free managed:1 free \
	    async:1000000 async:1 free async:1 free \
	    pool:1000000 pool:1 free pool:1 free \
	    vmm:1000000 vmm:1 free vmm:1 free \
	    pitch:1000:1000 pitch:512:1953 pitch:512:1 free \
	    array:250000:1 array:1:1 free \
	    array3d:100:100:25 array3d:1:1:1 free info
	[ "$PROG_RC" -eq 0 ] || fail "cudaprog $mode failed"
	expect_lines "alloc 999999 ok
alloc 1 ok
alloc 1 oom
info free=0 total=1000000
nvml total=1000000 free=0 used=1000000
alloc 1000000 ok
alloc 1000001 oom
managed 1000000 ok
managed 1 oom
async 1000000 ok
async 1 oom
pool 1000000 ok
pool 1 oom
vmm 1000000 ok
vmm 1 oom
pitch 1024000 oom
pitch 999936 ok
pitch 512 oom
array 1000000 ok
array 4 oom
array3d 1000000 ok
array3d 4 oom
info free=1000000 total=1000000"
	for k in managed async pool vmm; do
		[ "$(grep -cx "$k 1 ok" <<<"$PROG_OUT")" = 1 ] ||
		    fail "$mode: $k:1 after a free should succeed once"
	done
done
# Without a cap the library passes everything through.
unset GPUPOOL_SHIM_LIMIT_BYTES
prog procaddr alloc:1000001 info
expect_lines "alloc 1000001 ok"
grep -q "total=17179869184" <<<"$PROG_OUT" || fail "uncapped total changed"
echo ok
