#!/usr/bin/env bash
# scripts/gpu-check.sh: the whole GPU path on a machine with a real NVIDIA
# GPU, one verdict per line (PASS/FAIL/SKIP). Uses a build brought along
# (BUILD, default build/: make first, elsewhere); reaches no registry.
# Exits 0 with "SKIP" when no GPU or driver is present. Reruns cleanly (a
# fresh temp dir each time). Checks: `gpupool up` discovers the GPU through
# NVML (name, memory, UUID); a job runs nvidia-smi and a PTX kernel
# (cudaprog ptx); two --gpu-mem halves, one allocating past its cap (OOM),
# the other unaffected; two jobs at 0.25 and 0.75 and their kernel
# throughput ratio.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
GP="$PWD/$BUILD/gpupool"
PROG="$PWD/$BUILD/fakecuda/cudaprog"
verdict() { printf '%-5s %s\n' "$1" "$2"; }
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1 ||
    ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
	verdict SKIP "no NVIDIA GPU or driver here (nvidia-smi -L fails or libcuda.so.1 is missing)"
	exit 0
fi
[ -x "$GP" ] && [ -x "$PROG" ] && [ -f "$BUILD/libgpupool-cuda.so" ] || {
	verdict FAIL "no build in $BUILD (make, then bring $BUILD along)"; exit 1; }
T=$(mktemp -d /var/tmp/gpu-check.XXXXXX); chmod 755 "$T"
export HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config"; mkdir -p "$HOME"
trap '"$GP" down >/dev/null 2>&1; rm -rf "$T"' EXIT
nvidia-smi --query-gpu=name,memory.total,uuid,driver_version --format=csv,noheader | head -1 >"$T/smi"
IFS=, read -r name mem uuid driver <"$T/smi"
verdict INFO "GPU:$name,$mem,$uuid driver$driver"
timeout 60 "$GP" up --detach >"$T/up.log" 2>&1 || { verdict FAIL "gpupool up"; exit 1; }
export PATH="$PWD/$BUILD:$PATH"
nodes=$(timeout 20 "$GP" nodes --json 2>/dev/null)
grep -q "${uuid# }" <<<"$nodes" && verdict PASS "NVML discovery: uuid${uuid}" || verdict FAIL "NVML discovery: $nodes"
run() { # OUT ARGS...: submit --wait, log into OUT
	local out=$1; shift
	id=$(timeout 120 "$GP" submit "$@") ; timeout 120 "$GP" wait "$id" >/dev/null 2>&1
	timeout 20 "$GP" logs "$id" >"$out" 2>&1
}
run "$T/smi.out" --gpus 1 -- nvidia-smi
grep -q "${name# }" "$T/smi.out" && verdict PASS "job runs nvidia-smi" || verdict FAIL "nvidia-smi in a job"
run "$T/ptx.out" --gpus 1 -- "$PROG" procaddr ptx
grep -q "^ptx ok" "$T/ptx.out" && verdict PASS "PTX kernel via cuModuleLoadData" || verdict FAIL "PTX: $(tail -1 "$T/ptx.out")"
mib=$(( ${mem//[^0-9]/} / 2 ))
b1=$("$GP" submit --gpu-share 0.5 --gpu-mem $mib -- "$PROG" procaddr alloc:$((mib * 1048576)) alloc:1048576 info)
b2=$("$GP" submit --gpu-share 0.5 --gpu-mem $mib -- "$PROG" dlsym alloc:$((mib * 1048576 - 268435456)) info)
"$GP" wait "$b1" >/dev/null; "$GP" wait "$b2" >/dev/null
"$GP" logs "$b1" | grep -q "^alloc 1048576 oom" && verdict PASS "half past its cap gets OOM" || verdict FAIL "cap: $("$GP" logs "$b1")"
"$GP" logs "$b2" | grep -q " ok$" && verdict PASS "the other half unaffected" || verdict FAIL "neighbour: $("$GP" logs "$b2")"
q=$("$GP" submit --gpu-share 0.25 -- "$PROG" procaddr spin:30:200000)
h=$("$GP" submit --gpu-share 0.75 -- "$PROG" procaddr spin:30:200000)
"$GP" wait "$q" >/dev/null; "$GP" wait "$h" >/dev/null
rq=$("$GP" logs "$q" | sed -n 's/.*rate=//p'); rh=$("$GP" logs "$h" | sed -n 's/.*rate=//p')
verdict INFO "throughput 0.25 job $rq/s, 0.75 job $rh/s (ratio $(awk "BEGIN{if ($rh>0) print $rq/$rh}"), asked 0.333)"
verdict TODO "container job sees exactly its GPU: not prepared yet"
