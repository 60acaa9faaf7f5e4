#!/usr/bin/env bash
# A job's cap is summed over its processes: a forked child and a second
# process share the parent's 1000 bytes (GPUPOOL_SHIM_REGION), and the
# bytes of a process killed with kill -9 come back to the job.
. "$(dirname "$0")/gpushare_lib.sh"

export GPUPOOL_SHIM_LIMIT_BYTES=1000 GPUPOOL_SHIM_REGION="$T/region"
prog dlsym alloc:600 child:alloc:400,alloc:1,info info alloc:1 free
[ "$PROG_RC" -eq 0 ] || fail "fork run failed"
# The child ends with _exit (no destructor): its 400 bytes come back when
# the parent next looks.
expect_lines "alloc 600 ok
alloc 400 ok
alloc 1 oom
info free=0 total=1000
child exit 0
info free=400 total=1000
alloc 1 ok"

# A process that holds 700 bytes, then another that wants 400.
LD_PRELOAD=$PRELOAD LD_LIBRARY_PATH="$FAKE" "$FAKE/cudaprog" procaddr \
    alloc:700 touch:"$T/holding" sleep:60000 >"$T/holder.out" 2>&1 &
holder=$!
STARTED_PIDS+=("$holder")
for _ in $(seq 1 3000); do [ -e "$T/holding" ] && break; sleep 0.01; done
[ -e "$T/holding" ] || fail "the holder did not allocate"
prog procaddr alloc:400 alloc:300 free
expect_lines "alloc 400 oom
alloc 300 ok"
kill -9 "$holder"
wait "$holder" 2>/dev/null
prog procaddr alloc:400 alloc:600 alloc:1 info
expect_lines "alloc 400 ok
alloc 600 ok
alloc 1 oom
info free=0 total=1000"
echo ok
