#!/usr/bin/env bash
# The compute share: with a share of 0.5 and the fake GPU reporting 100 %
# utilisation, libgpupool-cuda.so slows the job's kernel launches; when
# the utilisation falls to 10 % (under the share) it lets them go again.
# A job at share 1 (alone, or whole) is never slowed. This fake GPU gives
# no per-process readings (no_proc_util), so the device's utilisation is
# the job's; with per-process readings, a job that has none used nothing
# (test_gpushare_host_util).
. "$(dirname "$0")/gpushare_lib.sh"

rate_of() { # NTH: the rate of the NTH launchfor line of PROG_OUT
	sed -n 's/^launchfor n=\([0-9]*\) .*/\1/p' <<<"$PROG_OUT" |
	    sed -n "${1}p"
}
export GPUPOOL_SHIM_PERIOD_MS=20
printf "util 100\nno_proc_util 1\n" >"$FAKECUDA_STATE"
(
	for _ in $(seq 1 3000); do [ -e "$T/busy-done" ] && break; sleep 0.01; done
	printf "util 10\nno_proc_util 1\n" >"$FAKECUDA_STATE.new"
	mv "$FAKECUDA_STATE.new" "$FAKECUDA_STATE"
	touch "$T/idle"
) &
GPUPOOL_SHIM_SHARE=500 prog procaddr launchfor:400 launchfor:800 \
    touch:"$T/busy-done" waitfile:"$T/idle" launchfor:400 launchfor:800
wait
[ "$PROG_RC" -eq 0 ] || fail "cudaprog failed"
busy=$(rate_of 2) idle=$(rate_of 4)
log "launches in 800 ms: at 100 % utilisation $busy, at 10 % $idle"
[ -n "$busy" ] && [ -n "$idle" ] || fail "no rates"
[ "$idle" -gt $((busy * 10 + 100)) ] ||
    fail "launches did not follow the utilisation (busy $busy, idle $idle)"

printf "util 100\nno_proc_util 1\n" >"$FAKECUDA_STATE"
GPUPOOL_SHIM_SHARE=1000 prog procaddr launchfor:400 launchfor:800
full=$(rate_of 2)
[ "$full" -gt $((busy * 10 + 100)) ] ||
    fail "a share of 1 was throttled ($full launches against $busy)"
echo ok
