#!/usr/bin/env bash
# scripts/gpu-check.sh: the whole GPU path on a machine with a real NVIDIA
# GPU, one verdict a line (PASS, FAIL, INFO, SKIP). CI never runs it.
#
# It uses a build brought along (BUILD, default build/, made elsewhere
# with `make`: it needs build/gpupool, build/libgpupool-cuda.so and
# build/fakecuda/cudaprog, which is built where the CUDA headers are) and
# reaches no registry. It starts its own pool in a fresh temporary
# directory (a private HOME, so it never touches the user's config) and
# stops it at the end, so it reruns cleanly. Where there is no GPU or no
# driver it prints SKIP and exits 0. Bounded: every wait has a timeout and
# the whole run takes under five minutes (the throughput check is 30 s).
#
# What it checks:
#   1. `gpupool up` discovers the GPU through NVML: its real name, memory
#      and UUID, as nvidia-smi gives them;
#   2. a job runs nvidia-smi, and a driver-API program (cudaprog ptx: a
#      kernel from hand-written PTX through cuModuleLoadData) whose result
#      it checks;
#   3. two jobs at --gpu-mem halves: one allocating past its cap gets
#      CUDA_ERROR_OUT_OF_MEMORY while the device had room, the other is
#      unaffected; nvidia-smi and cuMemGetInfo in a half show the cap;
#   4. two jobs at 0.25 and 0.75 at once: each one's share of their summed
#      kernel throughput against what it asked (within 10 % of the share);
#   5. a container job sees exactly its GPU's device node (needs crun or
#      runc, python3 and /bin/busybox from busybox-static; else SKIP);
#   6. (run before 5) a launch-bound kernel alone on the GPU, unwrapped and
#      through the library: the rate lost (target: within 3 %).
# The jobs run on a second agent of the script's own (its policy lends the
# script's directory to plain jobs and runs unsigned images); the pool's
# own agent is paused.
# Usage: scripts/gpu-check.sh [--keep]  (--keep: leave the temp dir)
# SPIN_SECONDS (default 30) and LAUNCH_SECONDS (default 10) are how long
# checks 4 and 6 run their kernels; SPIN_ITERS (default 20000) is check
# 4's kernel length. The dry run in the suite shortens the first two: on
# the fake driver the rates are not measured, only printed.
#
# GPU_CHECK_DRY_RUN=1 runs it on the fake driver of the build
# ($BUILD/fakecuda: a fake NVML and libcuda, no nvidia-smi), to check the
# script itself where there is no GPU: the PTX, nvidia-smi and throughput
# verdicts then FAIL, as they should on a fake.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
GP="$PWD/$BUILD/gpupool"
PROG="$PWD/$BUILD/fakecuda/cudaprog"
keep=0
[ "${1:-}" = --keep ] && keep=1
fails=0
verdict() { # PASS|FAIL|INFO|SKIP TEXT
	printf '%-4s %s\n' "$1" "$2"
	[ "$1" = FAIL ] && fails=$((fails + 1))
	return 0
}

dry=${GPU_CHECK_DRY_RUN:-0}
job_env=()
if [ "$dry" = 1 ]; then
	export LD_LIBRARY_PATH="$PWD/$BUILD/fakecuda"
	job_env=(--env "LD_LIBRARY_PATH=$LD_LIBRARY_PATH")
elif ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	verdict SKIP "no NVIDIA GPU or driver here (nvidia-smi is missing or nvidia-smi -L fails)"
	exit 0
fi
if [ "$dry" != 1 ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
	verdict SKIP "no CUDA driver library here (libcuda.so.1 is not in the ld cache)"
	exit 0
fi
for f in "$GP" "$PWD/$BUILD/libgpupool.so" "$PWD/$BUILD/libgpupool-cuda.so" "$PROG"; do
	[ -e "$f" ] || { verdict FAIL "missing $f: build first (make), then bring $BUILD along"; exit 1; }
done

T=$(mktemp -d /var/tmp/gpu-check.XXXXXX) || exit 1
chmod 755 "$T"
export HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config" XDG_DATA_HOME="$T/data"
unset GPUPOOL_URL GPUPOOL_TOKEN GPUPOOL_CA GPUPOOL_CONFIG
mkdir -p "$HOME" "$XDG_DATA_HOME"
AGENT2=
cleanup() {
	[ -n "$AGENT2" ] && kill "$AGENT2" 2>/dev/null && wait "$AGENT2" 2>/dev/null
	timeout 30 "$GP" down --data "$T/pool" >/dev/null 2>&1
	[ "$keep" = 1 ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT
# Stopped by a signal (a timeout, Ctrl-C): the pool goes down too.
trap 'exit 130' INT
trap 'exit 143' TERM
# Jobs run as nobody when the pool runs as root: they must reach cudaprog.
cp "$PROG" "$T/cudaprog" && chmod 755 "$T/cudaprog"
PROG="$T/cudaprog"

if [ "$dry" = 1 ]; then	# the fake driver's defaults (tests/fakecuda/state.h)
	name="Fake CUDA GPU" mem=16384 uuid=GPU-fakecuda-0 driver=fake ngpus=1
	card=$mem reserved=0
else
	IFS=, read -r name mem uuid driver < <(nvidia-smi \
	    --query-gpu=name,memory.total,uuid,driver_version \
	    --format=csv,noheader,nounits | head -1)
	name=$(echo "$name" | xargs) mem=$(echo "$mem" | xargs)
	uuid=$(echo "$uuid" | xargs) driver=$(echo "$driver" | xargs)
	# What the driver keeps for itself is not lent (older drivers
	# have no memory.reserved: then none).
	reserved=$(nvidia-smi --query-gpu=memory.reserved \
	    --format=csv,noheader,nounits 2>/dev/null | head -1 | xargs)
	case $reserved in '' | *[!0-9]*) reserved=0 ;; esac
	card=$mem mem=$((mem - reserved))
	ngpus=$(nvidia-smi -L | wc -l)
fi
verdict INFO "GPU 0: $name, $card MiB ($reserved MiB reserved by the driver), $uuid, driver $driver ($ngpus GPUs)"

# 1. discovery through NVML; a free port of our own
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000)))
if ! timeout 90 "$GP" up --detach --listen "127.0.0.1:$port" \
    --data "$T/pool" >"$T/up.log" 2>&1; then
	verdict FAIL "gpupool up: $(tail -3 "$T/up.log" | tr '\n' ' ')"
	exit 1
fi
nodes=$(timeout 20 "$GP" nodes --json 2>&1)
if grep -qF "$uuid" <<<"$nodes" && grep -qF "$name" <<<"$nodes" &&
    grep -q "\"mem_mib\": *$mem\b" <<<"$nodes"; then
	verdict PASS "gpupool up found the GPU through NVML: $name, $mem MiB lent of $card, $uuid"
else
	verdict FAIL "gpupool up did not report $name/$mem/$uuid: $nodes"
fi

# The jobs run on a second agent on the same GPU, with a policy of this
# script's: plain jobs see only a minimal root (/usr, /bin, /lib...), so
# the check's directory (cudaprog; the fake driver in a dry run) is lent
# to them read-only, and the pool's own agent trusts signed images only,
# while the container check imports an unsigned one.
{
	printf 'images = any\nexpose = %s ro\n' "$T"
	[ "$dry" = 1 ] && printf 'expose = %s ro\n' "$PWD/$BUILD/fakecuda"
} >"$T/policy"
(umask 077 && timeout 30 "$GP" token create --role provider --name gpu-check >"$T/prov.token" 2>"$T/token.err")
# The pool's own agent takes no more jobs (up's config names its socket).
if ! timeout 30 "$GP" provider pause >"$T/pause.out" 2>&1; then
	verdict FAIL "provider pause of the pool's own agent: $(cat "$T/pause.out")"
	exit 1
fi
url=$(sed -n 's/^url *= *//p' "$XDG_CONFIG_HOME/gpupool/config")
mkdir -p "$T/agent2" && chmod 755 "$T/agent2"
"$GP" agent --coordinator "$url" --token-file "$T/prov.token" --name gpu-check \
    --work "$T/agent2" --policy "$T/policy" -v >"$T/agent2.log" 2>&1 &
AGENT2=$!
ready() {	# the check's agent up, the pool's own one paused
	timeout 10 "$GP" nodes >"$T/nodes.out" 2>&1 &&
	    grep -q '^gpu-check .* up ' "$T/nodes.out" &&
	    ! grep -v '^gpu-check ' "$T/nodes.out" | grep -q ' up '
}
for _ in $(seq 1 150); do	# at most 30 s or so
	ready && break
	sleep 0.2
done
if ! ready; then
	verdict FAIL "the check's agent did not come up: $(tail -3 "$T/agent2.log" | tr '\n' ' ') $(cat "$T/token.err")"
	exit 1
fi

# run OUT ARGS...: submits, waits (bounded), leaves the job's log in OUT.
run() {
	local out=$1 id
	shift
	id=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" "$@" 2>"$out.err") ||
	    { echo "submit failed: $(cat "$out.err")" >"$out"; return 1; }
	timeout 120 "$GP" wait "$id" >/dev/null 2>&1
	timeout 30 "$GP" logs "$id" >"$out" 2>&1
}

# 2. nvidia-smi and a PTX kernel in a job
run "$T/smi.out" --gpus 1 -- nvidia-smi -L
if grep -qF "$uuid" "$T/smi.out"; then
	verdict PASS "a job ran nvidia-smi: $(grep -c '^GPU ' "$T/smi.out") GPU(s) listed, its own among them"
else
	verdict FAIL "nvidia-smi in a job: $(head -3 "$T/smi.out" | tr '\n' ' ')"
fi
run "$T/ptx.out" --gpus 1 -- "$PROG" procaddr ptx
if grep -q '^ptx ok' "$T/ptx.out"; then
	verdict PASS "a job ran a hand-written PTX kernel (cuModuleLoadData): $(grep '^ptx' "$T/ptx.out")"
else
	verdict FAIL "PTX kernel: $(tail -2 "$T/ptx.out" | tr '\n' ' ')"
fi

# 3. two halves: one past its cap, the other unaffected. Each process's
# context counts against its cap (the agent measured it at start): each
# half allocates what its cap leaves after its context, less 64 MiB.
ctx=$(sed -n 's/.*gpu context index=0 ctx_mib=\([0-9]*\) .*/\1/p' "$T/agent2.log" | head -1)
[ -n "$ctx" ] && verdict INFO "a CUDA context takes $ctx MiB of this GPU (the agent's probe), charged to each process of a fractional job" ||
    { ctx=0; verdict INFO "the agent did not measure a context: $(grep -m1 'gpu context' "$T/agent2.log")"; }
half=$((mem / 2))
under=$(((half - ctx - 64) * 1048576)) over=$((600 * 1048576))
id1=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" --gpu-share 0.5 --gpu-mem "$half" -- "$PROG" procaddr \
    alloc:$under alloc:$over info sleep:3000)
id2=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" --gpu-share 0.5 --gpu-mem "$half" -- "$PROG" dlsym \
    alloc:$under info sleep:3000)
id3=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" --gpu-share 0.5 --gpu-mem "$half" -- nvidia-smi \
    --query-gpu=memory.total --format=csv,noheader,nounits)
for id in $id1 $id2 $id3; do timeout 120 "$GP" wait "$id" >/dev/null 2>&1; done
timeout 30 "$GP" logs "$id1" >"$T/h1.out" 2>&1
timeout 30 "$GP" logs "$id2" >"$T/h2.out" 2>&1
timeout 30 "$GP" logs "$id3" >"$T/h3.out" 2>&1
if grep -q "^alloc $under ok" "$T/h1.out" && grep -q "^alloc $over oom" "$T/h1.out"; then
	verdict PASS "the half past its cap got CUDA_ERROR_OUT_OF_MEMORY ($((over >> 20)) MiB over $((under >> 20)) MiB, cap $half MiB): $(grep '^info' "$T/h1.out")"
else
	verdict FAIL "memory cap: $(tr '\n' ' ' <"$T/h1.out")"
fi
if grep -q "^alloc $under ok" "$T/h2.out"; then
	verdict PASS "the other half was unaffected: $(grep '^info' "$T/h2.out")"
else
	verdict FAIL "the other half: $(tr '\n' ' ' <"$T/h2.out")"
fi
if [ "$(tr -d ' \n' <"$T/h3.out")" = "$half" ]; then
	verdict PASS "nvidia-smi in a half shows its cap: $half MiB"
else
	verdict FAIL "nvidia-smi in a half: $(tr '\n' ' ' <"$T/h3.out") (cap $half MiB)"
fi

# 4. compute shares 0.25 and 0.75, at once, 30 s (SPIN_SECONDS)
iters=${SPIN_ITERS:-20000} spin_s=${SPIN_SECONDS:-30}
# (GPUPOOL_SHIM_TRACE=1, set in the job: the library's steps in its log.)
q=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" --gpu-share 0.25 -- env GPUPOOL_SHIM_TRACE=1 "$PROG" procaddr "spin:$spin_s:$iters")
h=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" --gpu-share 0.75 -- env GPUPOOL_SHIM_TRACE=1 "$PROG" procaddr "spin:$spin_s:$iters")
for id in $q $h; do timeout 120 "$GP" wait "$id" >/dev/null 2>&1; done
timeout 30 "$GP" logs "$q" >"$T/q.out" 2>&1
timeout 30 "$GP" logs "$h" >"$T/h.out" 2>&1
rq=$(sed -n 's/^spin .*rate=//p' "$T/q.out")
rh=$(sed -n 's/^spin .*rate=//p' "$T/h.out")
if [ -n "$rq" ] && [ -n "$rh" ]; then
	sq=$(awk "BEGIN{printf \"%.3f\", $rq/($rq+$rh)}")
	ok=$(awk "BEGIN{d=$sq-0.25; if (d<0) d=-d; print (d <= 0.025) ? 1 : 0}")
	msg="kernels/s: share 0.25 job $rq, share 0.75 job $rh; the 0.25 job had $sq of the throughput"
	[ "$ok" = 1 ] && verdict PASS "$msg (within 10 % of 0.25)" || verdict FAIL "$msg (asked 0.25 +- 0.025)"
	verdict INFO "the 0.25 job's last steps: $(grep 'steer' "$T/q.out" | tail -3 | sed 's/libgpupool-cuda: steer //' | tr '\n' ';')"
	verdict INFO "the agent's last readings of it: $(grep "gpu share reading job=$q " "$T/agent2.log" | tail -2 | sed 's/.*gpu share reading //' | tr '\n' ';')"
else
	verdict FAIL "throughput jobs printed no rate: $(timeout 30 "$GP" logs "$q" | tail -2 | tr '\n' ' ')"
fi

# 6. launch-bound: a one-iteration kernel launched for 10 s
# (LAUNCH_SECONDS), alone on the GPU, without the library (a whole GPU)
# and with it (a half, which may use the idle rest under the default
# elastic policy): the library's cost per launch, as a share of the rate
# (target: within 3 %)
launch_s=${LAUNCH_SECONDS:-10}
w=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" --gpus 1 -- "$PROG" procaddr "spin:$launch_s:1")
timeout 120 "$GP" wait "$w" >/dev/null 2>&1
f=$(timeout 30 "$GP" submit "${job_env[@]+"${job_env[@]}"}" --gpu-share 0.5 -- "$PROG" procaddr "spin:$launch_s:1")
timeout 120 "$GP" wait "$f" >/dev/null 2>&1
rw=$(timeout 30 "$GP" logs "$w" | sed -n 's/^spin .*rate=//p')
rf=$(timeout 30 "$GP" logs "$f" | sed -n 's/^spin .*rate=//p')
if [ -n "$rw" ] && [ -n "$rf" ]; then
	loss=$(awk "BEGIN{printf \"%.2f\", 100 * (1 - $rf / $rw)}")
	msg="launch-bound kernels/s: unwrapped $rw, through the library $rf ($loss % slower)"
	if awk "BEGIN{exit !($loss <= 3)}"; then
		verdict PASS "$msg (within 3 %)"
	else
		verdict FAIL "$msg (target: within 3 %)"
	fi
else
	verdict FAIL "launch-bound jobs printed no rate: $(timeout 30 "$GP" logs "$w" | tail -2 | tr '\n' ' ') / $(timeout 30 "$GP" logs "$f" | tail -2 | tr '\n' ' ')"
fi

# 5. a container job sees exactly its GPU
rt=$(command -v crun || command -v runc)
if [ -z "$rt" ] || [ ! -x /bin/busybox ] || ! command -v python3 >/dev/null; then
	verdict SKIP "container job: needs crun or runc, /bin/busybox (busybox-static) and python3"
else
	python3 tests/e2e/images.py layer "$T/l1.tgz" --marker gpu-check >/dev/null &&
	    python3 tests/e2e/images.py oci "$T/bb.tar" --name busybox:gpu-check "$T/l1.tgz" >/dev/null &&
	    timeout 60 "$GP" image import "$T/bb.tar" --name busybox:gpu-check >/dev/null 2>&1
	run "$T/ctr.out" --gpus 1 --image busybox:gpu-check -- 'ls /dev | grep "^nvidia"'
	gpu_nodes=$(grep -c '^nvidia[0-9][0-9]*$' "$T/ctr.out")
	if [ "$gpu_nodes" = 1 ]; then
		verdict PASS "a container job saw exactly one GPU node: $(tr '\n' ' ' <"$T/ctr.out")"
	else
		verdict FAIL "container job's /dev: $(tr '\n' ' ' <"$T/ctr.out") (agent: $(grep -m1 containers "$T/agent2.log"))"
	fi
fi
verdict INFO "done: $fails failed"
[ "$fails" = 0 ]
