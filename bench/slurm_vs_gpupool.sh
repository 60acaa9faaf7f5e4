#!/usr/bin/env bash
# bench/slurm_vs_gpupool.sh: gpupool and Slurm side by side on this machine
# (issue 6). Starts, on 127.0.0.1 and under a scratch directory, a munged,
# a slurmctld and a slurmd with one node of 8 fake GPUs (GRES backed by
# device nodes made with mknod), tuned as SchedMD's High Throughput
# Computing Administration Guide advises; and a gpupool coordinator with
# one agent of 8 fake GPUs running real sandboxed jobs. Then runs three
# workloads through each system's own command-line tools, alternating
# Slurm and gpupool (A B A B ...), and prints "metric value unit" lines:
# each figure for both systems, per round and the median, and the ratio.
#
#   1. throughput: N jobs of `true`, one GPU each, submitted at
#      concurrency C (sbatch / gpupool submit), from the first submission
#      to the last completion; and the same N jobs through C synchronous
#      submitters (srun / gpupool submit --wait), Slurm's faster path;
#   2. synchronous latency: one job of `true` on one GPU, submitted and
#      waited for (srun --gres=gpu:1 / gpupool submit --wait), S times in a
#      row: p50 and p99;
#   3. submission rate alone: N submissions at concurrency C while the
#      node takes no work (Slurm: drained; gpupool: the provider paused),
#      so that nothing runs during the measurement; then the queue is
#      cancelled and the node given back. Also its batch form, what a user
#      would do: the same N jobs as one job array (sbatch --array=0-N-1 /
#      gpupool submit --array 0-N-1), timed from the command's start to
#      its exit. And the floor of that harness on this machine: the same
#      N runs through the same xargs -P C of an empty program (a static
#      `int main(void) { return 0; }` built in the scratch directory;
#      dynamic, with a note, where static libc is missing). No tool that
#      runs one process per submission can go faster here than that
#      floor, whatever its own work costs: w3_floor_ratio_to_slurm says
#      how many times sbatch's rate that floor is, so the highest ratio
#      w3_ratio could reach on this machine.
#
# Every daemon it started is stopped at exit, also on failure or Ctrl-C.
# Needs root (the daemons, mknod) and the optional package set:
#   scripts/install-deps.sh slurm
#
# Usage: BUILD=build bench/slurm_vs_gpupool.sh [--jobs N] [--sync S]
#            [--submit N] [--concurrency C] [--rounds R] [--workloads 1,2,3]
# Defaults: --jobs 1000 --sync 100 --submit 1000 --concurrency 8 --rounds 2.
# SLURM_SCHED_PARAMS replaces the SchedulerParameters chosen below (for
# example the guide's own example set, see docs/performance.md).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
JOBS=1000 SYNC=100 SUBMIT=1000 CONC=8 ROUNDS=2 WORKLOADS=1,2,3
while [ $# -gt 0 ]; do
	case "$1" in
	--workloads) WORKLOADS=$2 ;;
	--jobs) JOBS=$2 ;;
	--sync) SYNC=$2 ;;
	--submit) SUBMIT=$2 ;;
	--concurrency) CONC=$2 ;;
	--rounds) ROUNDS=$2 ;;
	*) echo "usage: $0 [--jobs N] [--sync S] [--submit N]" \
		"[--concurrency C] [--rounds R] [--workloads 1,2,3]" >&2
	   exit 2 ;;
	esac
	shift 2 || { echo "$0: $1 needs a value" >&2; exit 2; }
done

. bench/lib.sh
die() { echo "slurm_vs_gpupool: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (slurmd, munged, mknod)"
for c in munged slurmctld slurmd sbatch srun squeue scancel scontrol sinfo; do
	command -v "$c" >/dev/null ||
		die "$c is missing: run scripts/install-deps.sh slurm"
done
[ -x "$BIN" ] || die "$BIN is missing: run make"

SCRATCH=$(mktemp -d /tmp/gpupool-vs-slurm.XXXXXX)
# munged insists that every directory above its socket be searchable.
chmod 755 "$SCRATCH"
# The agent refuses a work directory under /tmp.
# Not under the checkout either, which may be under /tmp.
WORK=$(mktemp -d /var/tmp/gpupool-vs-slurm-work.XXXXXX)
PIDS=()
SLURM_PIDS=()
CTLD_PID=

cleanup() {
	# Slurm first: its jobs, then its daemons (slurmd before slurmctld).
	if [ -n "${CTLD_PID:-}" ] && kill -0 "$CTLD_PID" 2>/dev/null; then
		timeout 15 scancel --quiet --user root >/dev/null 2>&1
	fi
	stop_pids "${SLURM_PIDS[@]}" "${PIDS[@]}"
	rm -rf "$SCRATCH" "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Ports of our own, below the ephemeral range (so no outgoing connection
# holds them) and unused: a second run or another Slurm is left alone.
port_free() { # FIRST LAST: no socket uses a port in the range
	[ -z "$(ss -Htan "( sport >= :$1 and sport <= :$2 )" 2>/dev/null)" ]
}
BASE=$((10000 + ($$ % 2000) * 8))
for _ in $(seq 50); do
	port_free "$BASE" "$((BASE + 5))" && break
	BASE=$((BASE + 8 > 26000 ? 10000 : BASE + 8))
done
port_free "$BASE" "$((BASE + 5))" || die "no free ports found"
HOST=$(hostname -s)

# ---- Slurm ----

mkdir -p "$SCRATCH"/{munge,run,state,spool,log,dev}
chmod 700 "$SCRATCH/munge"
head -c 1024 /dev/urandom >"$SCRATCH/munge/munge.key"
chmod 400 "$SCRATCH/munge/munge.key"
for i in 0 1 2 3 4 5 6 7; do
	mknod "$SCRATCH/dev/nvidia$i" c 195 "$i" || die "mknod failed"
done
export SLURM_CONF="$SCRATCH/slurm.conf"
# The guide's example SchedulerParameters (batch_sched_delay=20,
# sched_min_interval=2000000, ...) serve a large cluster flooded with
# submissions; on one node of 8 GPUs they hold each freed GPU idle for up
# to 20 s. What is measured best here: batch jobs are scheduled as soon
# as slurmctld's background loop (once a second) sees pending work.
SCHED=${SLURM_SCHED_PARAMS:-batch_sched_delay=0,sched_min_interval=0,default_queue_depth=100}
cat >"$SLURM_CONF" <<EOF
# Written by bench/slurm_vs_gpupool.sh. Settings tuned for throughput cite
# SchedMD's "High Throughput Computing Administration Guide" (22.05:
# /usr/share/doc/slurm-wlm/html/high_throughput.html) as [HTC].
ClusterName=gpbench
SlurmctldHost=$HOST(127.0.0.1)
# [HTC] SlurmctldPort: listen on 2 to 10 ports so bursts are not dropped.
SlurmctldPort=$BASE-$((BASE + 3))
SlurmdPort=$((BASE + 4))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SCRATCH/run/munge.sock
CredType=cred/munge
MpiDefault=none
StateSaveLocation=$SCRATCH/state
SlurmdSpoolDir=$SCRATCH/spool
SlurmctldPidFile=$SCRATCH/run/slurmctld.pid
SlurmdPidFile=$SCRATCH/run/slurmd.pid
SlurmctldLogFile=$SCRATCH/log/slurmctld.log
# [HTC] SlurmdLogFile: on local storage.
SlurmdLogFile=$SCRATCH/log/slurmd.log
# [HTC] SlurmctldDebug/SlurmdDebug: more logging costs throughput; error.
SlurmctldDebug=error
SlurmdDebug=error
# [HTC] SchedulerType: sched/builtin (FIFO) when most jobs are short.
SchedulerType=sched/builtin
# [HTC] PriorityType: the basic (FIFO) plugin is considerably faster.
PriorityType=priority/basic
# [HTC] SchedulerParameters: how often and how deep the scheduler runs.
SchedulerParameters=$SCHED
# Per-job GPUs (GRES) need the consumable trackable resources selector.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# [HTC] AccountingStorageType, JobAcctGatherType, JobCompType: off.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# [HTC] MaxJobCount: room for many records (default 10,000).
MaxJobCount=100000
# Job arrays as large as gpupool's (workload 3's batch form).
MaxArraySize=10001
# [HTC] MinJobAge: purge finished jobs after a few seconds (default 300).
MinJobAge=2
# [HTC] MessageTimeout: slurmctld's answers slow down under load.
MessageTimeout=30
# [HTC] PrologSlurmctld/EpilogSlurmctld and task/cgroup: none here.
# [HTC] TaskPlugin: task/affinity is advised, but it would bind jobs to
# the 16 CPUs declared below, of which this machine has 2: task/none.
TaskPlugin=task/none
ProctrackType=proctrack/linuxproc
# 16 CPUs declared whatever the machine has (jobs are \`true\`), so that
# the 8 GPUs, not the 2 cores, bound how many jobs run at once.
SlurmdParameters=config_overrides
ReturnToService=2
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:8 State=UNKNOWN
PartitionName=bench Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$SCRATCH/gres.conf" <<EOF
NodeName=$HOST Name=gpu File=$SCRATCH/dev/nvidia[0-7]
EOF

# [HTC] Munge: ten threads instead of two.
munged --foreground --num-threads=10 --socket="$SCRATCH/run/munge.sock" \
	--key-file="$SCRATCH/munge/munge.key" \
	--pid-file="$SCRATCH/run/munged.pid" \
	--seed-file="$SCRATCH/munge/munged.seed" \
	--log-file="$SCRATCH/log/munged.log" 2>>"$SCRATCH/log/munged.log" &
SLURM_PIDS+=("$!")
for _ in $(seq 50); do
	[ -S "$SCRATCH/run/munge.sock" ] && break
	sleep 0.1
done
[ -S "$SCRATCH/run/munge.sock" ] || die "munged did not start"
# [HTC] User limits: open files as high as allowed.
ulimit -n "$(ulimit -Hn)"
slurmctld -D -f "$SLURM_CONF" 2>>"$SCRATCH/log/slurmctld.log" &
CTLD_PID=$!
SLURM_PIDS+=("$CTLD_PID")
sleep 0.5
slurmd -D -f "$SLURM_CONF" 2>>"$SCRATCH/log/slurmd.log" &
SLURMD_PID=$!
SLURM_PIDS+=("$SLURMD_PID")
node_idle() {
	kill -0 "$CTLD_PID" 2>/dev/null && kill -0 "$SLURMD_PID" 2>/dev/null &&
		[ "$(timeout 10 sinfo -h -n "$HOST" -o %T 2>/dev/null)" = idle ]
}
for _ in $(seq 100); do
	node_idle && break
	kill -0 "$CTLD_PID" 2>/dev/null && kill -0 "$SLURMD_PID" 2>/dev/null ||
		break
	sleep 0.1
done
if ! node_idle; then
	tail -n 20 "$SCRATCH/log/slurmctld.log" "$SCRATCH/log/slurmd.log" >&2
	die "the Slurm node did not come up"
fi
srun --gres=gpu:1 true || die "a first srun failed"

# ---- gpupool ----

GPORT=$((BASE + 5))
GURL="http://127.0.0.1:$GPORT"
COORD_URL=$GURL
start_coordinator "$SCRATCH/coord" "$SCRATCH/log/coord.log" -q
PROVIDER=$(token provider vs-slurm)
USER_TOKEN=$(token user bench)
[ -n "$PROVIDER" ] && [ -n "$USER_TOKEN" ] || die "cannot create tokens"
# 64 CPUs offered: the jobs are `true`; the 8 GPUs bound the concurrency.
"$BIN" agent --coordinator "$GURL" --token "$PROVIDER" --name vs-slurm \
	--fake-gpus 8 --cpus 64 --work "$WORK" >"$SCRATCH/log/agent.log" 2>&1 &
PIDS+=("$!")
export GPUPOOL_URL="$GURL" GPUPOOL_TOKEN="$USER_TOKEN"
for _ in $(seq 100); do
	"$BIN" nodes 2>/dev/null | grep -q ' up ' && break
	sleep 0.1
done
"$BIN" nodes 2>/dev/null | grep -q ' up ' || {
	tail -n 20 "$SCRATCH/log/agent.log" >&2
	die "the agent did not come up"
}
"$BIN" submit --wait --gpus 1 true >/dev/null || die "a first job failed"
AGENT_SOCKET="$WORK/agent.sock"

# ---- helpers ----

now() { echo "$EPOCHREALTIME"; }
elapsed() { echo "$2 - $1" | bc -l; }
median() { sort -g | awk '{v[NR] = $1} END {
	if (NR == 0) { print "nan"; exit }
	if (NR % 2) print v[(NR + 1) / 2];
	else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Nearest-rank percentile P of the numbers on stdin.
pct() { sort -g | awk -v p="$1" '{v[NR] = $1} END {
	k = int(p / 100 * NR + 0.999999); if (k < 1) k = 1; print v[k] }'; }
ratio() { echo "scale=6; $1 / $2" | bc -l | xargs printf '%.3f'; }
# Jobs queued or running; fails when the system does not answer.
slurm_active() {
	local out
	kill -0 "$CTLD_PID" 2>/dev/null || return 1
	out=$(timeout 60 squeue -h -o %i 2>/dev/null) || return 1
	grep -c . <<<"$out" || true
}
gpupool_active() {
	local out
	out=$(timeout 60 "$BIN" ps --json 2>/dev/null) || return 1
	grep -c '"state"' <<<"$out" || true
}
wait_idle() { # SYSTEM: until nothing is queued or running (10 minutes)
	local i n
	for i in $(seq 6000); do
		n=$("$1"_active) || die "$1 does not answer"
		[ "$n" -eq 0 ] && return 0
		sleep 0.1
	done
	die "$1 still has work after 10 minutes"
}
load() { cut -d' ' -f1 /proc/loadavg; }

# One submission of a 1-GPU `true` job; each prints the job id.
SUBMIT_slurm=(sbatch --parsable --gres=gpu:1 -o /dev/null --wrap true)
SUBMIT_gpupool=("$BIN" submit --gpus 1 true)
# One 1-GPU `true` job, submitted and waited for.
SYNC_slurm=(srun --quiet --gres=gpu:1 true)
SYNC_gpupool=("$BIN" submit --wait --gpus 1 true)

# N runs of the command array named KIND_SYSTEM at concurrency C, their
# output to stdout; fails if any did.
submit_many() { # KIND SYSTEM N
	local -n cmd=$1_$2
	seq "$3" | xargs -P "$CONC" -I{} "${cmd[@]}"
}

# Workload 1 for SYSTEM (KIND SUBMIT: batch submissions; SYNC: each
# submitter waits for its job): prints the jobs/s.
throughput() { # SYSTEM [KIND]
	local sys=$1 kind=${2:-SUBMIT} t0 t1 n
	wait_idle "$sys"
	t0=$(now)
	submit_many "$kind" "$sys" "$JOBS" >/dev/null ||
		die "$sys: a submission failed"
	while n=$("$sys"_active) && [ "$n" -gt 0 ]; do
		sleep 0.1
	done
	[ -n "$n" ] || die "$sys does not answer"
	t1=$(now)
	echo "$JOBS / $(elapsed "$t0" "$t1")" | bc -l | xargs printf '%.1f\n'
}

# Workload 2 for SYSTEM: prints one latency (ms) per line.
sync_latency() {
	local sys=$1 i t0 t1
	wait_idle "$sys"
	for i in $(seq "$SYNC"); do
		t0=$(now)
		if [ "$sys" = slurm ]; then
			srun --quiet --gres=gpu:1 true || die "srun failed"
		else
			"$BIN" submit --wait --gpus 1 true >/dev/null ||
				die "gpupool submit --wait failed"
		fi
		t1=$(now)
		echo "1000 * ($t1 - $t0)" | bc -l
	done
}

# Workload 3 for SYSTEM: prints the submissions/s.
submit_rate() {
	local sys=$1 t0 t1 ids
	wait_idle "$sys"
	if [ "$sys" = slurm ]; then
		scontrol update NodeName="$HOST" State=DRAIN Reason=bench ||
			die "cannot drain the Slurm node"
	else
		"$BIN" provider pause --socket "$AGENT_SOCKET" >/dev/null ||
			die "cannot pause the provider"
		for _ in $(seq 50); do
			"$BIN" nodes | grep -q ' paused ' && break
			sleep 0.1
		done
	fi
	ids="$SCRATCH/ids.$sys"
	t0=$(now)
	submit_many SUBMIT "$sys" "$SUBMIT" >"$ids" ||
		die "$sys: a submission failed"
	t1=$(now)
	[ "$(grep -c '^[0-9][0-9]*$' "$ids")" -eq "$SUBMIT" ] ||
		die "$sys: fewer job ids than submissions"
	echo "$SUBMIT / $(elapsed "$t0" "$t1")" | bc -l | xargs printf '%.1f\n'
	# Give the node back with an empty queue.
	if [ "$sys" = slurm ]; then
		scancel --quiet --user root --state=PENDING
		scontrol update NodeName="$HOST" State=RESUME
	else
		# One curl, one connection: the cancels are not measured.
		awk -v u="$GURL" '/^[0-9]+$/ {
			printf "url = \"%s/v1/jobs/%s/cancel\"\n", u, $1
			print "output = \"/dev/null\"" }' "$ids" |
			curl -sS -X POST \
			-H "Authorization: Bearer $USER_TOKEN" \
			-H 'Content-Type: application/json' --data '{}' -K - ||
			die "cannot cancel the queued jobs"
		"$BIN" provider resume --socket "$AGENT_SOCKET" >/dev/null
	fi
	wait_idle "$sys" >&2
}

# Workload 3, batch form, for SYSTEM: SUBMIT jobs as one array; prints
# the jobs/s.
submit_rate_array() {
	local sys=$1 t0 t1 out first last
	wait_idle "$sys"
	if [ "$sys" = slurm ]; then
		scontrol update NodeName="$HOST" State=DRAIN Reason=bench ||
			die "cannot drain the Slurm node"
		t0=$(now)
		out=$(sbatch --parsable --array=0-$((SUBMIT - 1)) --gres=gpu:1 \
		    -o /dev/null --wrap true) || die "sbatch --array failed"
		t1=$(now)
		[[ $out =~ ^[0-9]+ ]] || die "sbatch --array printed '$out'"
		scancel --quiet --user root --state=PENDING
		scontrol update NodeName="$HOST" State=RESUME
	else
		"$BIN" provider pause --socket "$AGENT_SOCKET" >/dev/null ||
			die "cannot pause the provider"
		for _ in $(seq 50); do
			"$BIN" nodes | grep -q ' paused ' && break
			sleep 0.1
		done
		t0=$(now)
		out=$("$BIN" submit --array 0-$((SUBMIT - 1)) --gpus 1 true) ||
			die "gpupool submit --array failed"
		t1=$(now)
		[[ $out =~ ^([0-9]+)-([0-9]+)$ ]] ||
			die "gpupool submit --array printed '$out'"
		first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
		[ $((last - first + 1)) -eq "$SUBMIT" ] ||
			die "gpupool submit --array made $((last - first + 1)) jobs"
		seq "$first" "$last" | awk -v u="$GURL" '{
			printf "url = \"%s/v1/jobs/%s/cancel\"\n", u, $1
			print "output = \"/dev/null\"" }' |
			curl -sS -X POST \
			-H "Authorization: Bearer $USER_TOKEN" \
			-H 'Content-Type: application/json' --data '{}' -K - ||
			die "cannot cancel the queued jobs"
		"$BIN" provider resume --socket "$AGENT_SOCKET" >/dev/null
	fi
	echo "$SUBMIT / $(elapsed "$t0" "$t1")" | bc -l | xargs printf '%.1f\n'
	wait_idle "$sys" >&2
}

# The floor of workload 3's harness: an empty program, built once.
EMPTY="$SCRATCH/empty"
printf 'int main(void) { return 0; }\n' >"$SCRATCH/empty.c"
EMPTY_KIND=static
if ! cc -O2 -static -o "$EMPTY" "$SCRATCH/empty.c" 2>/dev/null; then
	EMPTY_KIND=dynamic
	echo "note: static libc missing, the floor's empty program is" \
		"dynamic (slower to start)" >&2
	cc -O2 -o "$EMPTY" "$SCRATCH/empty.c" || die "cannot build $EMPTY"
fi
SUBMIT_floor=("$EMPTY")
# Workload 3's floor: SUBMIT runs of the empty program through the same
# xargs; prints the runs/s.
floor_rate() {
	local t0 t1
	t0=$(now)
	submit_many SUBMIT floor "$SUBMIT" || die "the empty program failed"
	t1=$(now)
	echo "$SUBMIT / $(elapsed "$t0" "$t1")" | bc -l | xargs printf '%.1f\n'
}

# ---- the run ----

echo "machine_cpus $(nproc) cpus"
echo "machine_cpu_model $(awk -F': ' '/^model name/ {print $2; exit}' \
	/proc/cpuinfo | tr ' ' '_') name"
echo "machine_kernel $(uname -r) version"
echo "slurm_version $(slurmctld -V | awk '{print $2}') version"
echo "gpupool_version $("$BIN" --version | awk '{print $2}')+$(git rev-parse \
	--short HEAD 2>/dev/null || echo unknown) version"
echo "load_start $(load) loadavg"
# What starting each system's command-line tool costs, doing nothing.
t0=$(now); for _ in $(seq 100); do sbatch --version >/dev/null; done; t1=$(now)
echo "cli_start_sbatch $(echo "10 * ($t1 - $t0)" | bc -l |
	xargs printf '%.2f') ms"
t0=$(now); for _ in $(seq 100); do "$BIN" --version >/dev/null; done; t1=$(now)
echo "cli_start_gpupool $(echo "10 * ($t1 - $t0)" | bc -l |
	xargs printf '%.2f') ms"

declare -A W1 W1S W2P50 W2P99 W3 W3A W3F
want() { [[ ",$WORKLOADS," == *",$1,"* ]]; }
for r in $(seq "$ROUNDS"); do
	want 1 || break
	for sys in slurm gpupool; do
		v=$(throughput "$sys") || exit 1
		echo "w1_${sys}_round$r $v jobs/s (load $(load))"
		W1[$sys]+="$v "
	done
done
# The same jobs through synchronous submitters (srun / submit --wait), C at
# a time: Slurm allocates an srun at once when a GPU is free, without
# waiting for its once-a-second pass over queued batch jobs.
for r in $(seq "$ROUNDS"); do
	want 1 || break
	for sys in slurm gpupool; do
		v=$(throughput "$sys" SYNC) || exit 1
		echo "w1sync_${sys}_round$r $v jobs/s (load $(load))"
		W1S[$sys]+="$v "
	done
done
for r in $(seq "$ROUNDS"); do
	want 2 || break
	for sys in slurm gpupool; do
		sync_latency "$sys" >"$SCRATCH/lat.$sys.$r" || exit 1
		p50=$(pct 50 <"$SCRATCH/lat.$sys.$r" | xargs printf '%.1f')
		p99=$(pct 99 <"$SCRATCH/lat.$sys.$r" | xargs printf '%.1f')
		echo "w2_${sys}_round${r}_p50 $p50 ms (load $(load))"
		echo "w2_${sys}_round${r}_p99 $p99 ms"
		W2P50[$sys]+="$p50 "
		W2P99[$sys]+="$p99 "
	done
done
for r in $(seq "$ROUNDS"); do
	want 3 || break
	for sys in slurm gpupool; do
		v=$(submit_rate "$sys") || exit 1
		echo "w3_${sys}_round$r $v submissions/s (load $(load))"
		W3[$sys]+="$v "
	done
	v=$(floor_rate) || exit 1
	echo "w3_floor_round$r $v submissions/s (load $(load);" \
		"$EMPTY_KIND empty program)"
	W3F[floor]+="$v "
done
for r in $(seq "$ROUNDS"); do
	want 3 || break
	for sys in slurm gpupool; do
		v=$(submit_rate_array "$sys") || exit 1
		echo "w3array_${sys}_round$r $v jobs/s (load $(load))"
		W3A[$sys]+="$v "
	done
done

m() { tr ' ' '\n' <<<"$1" | grep . | median; }
if want 1; then
	s1=$(m "${W1[slurm]}") g1=$(m "${W1[gpupool]}")
	echo "w1_throughput_slurm $s1 jobs/s"
	echo "w1_throughput_gpupool $g1 jobs/s"
	echo "w1_ratio $(ratio "$g1" "$s1") x (target >= 10)"
	s1s=$(m "${W1S[slurm]}") g1s=$(m "${W1S[gpupool]}")
	echo "w1sync_throughput_slurm $s1s jobs/s"
	echo "w1sync_throughput_gpupool $g1s jobs/s"
	echo "w1sync_ratio $(ratio "$g1s" "$s1s") x"
fi
if want 2; then
	s2=$(m "${W2P50[slurm]}") g2=$(m "${W2P50[gpupool]}")
	s2b=$(m "${W2P99[slurm]}") g2b=$(m "${W2P99[gpupool]}")
	echo "w2_latency_p50_slurm $s2 ms"
	echo "w2_latency_p50_gpupool $g2 ms"
	echo "w2_latency_p99_slurm $s2b ms"
	echo "w2_latency_p99_gpupool $g2b ms"
	echo "w2_ratio_p50 $(ratio "$g2" "$s2") x (target <= 0.333)"
	echo "w2_ratio_p99 $(ratio "$g2b" "$s2b") x"
fi
if want 3; then
	s3=$(m "${W3[slurm]}") g3=$(m "${W3[gpupool]}")
	echo "w3_submit_rate_slurm $s3 submissions/s"
	echo "w3_submit_rate_gpupool $g3 submissions/s"
	echo "w3_ratio $(ratio "$g3" "$s3") x (target >= 10)"
	f3=$(m "${W3F[floor]}")
	echo "w3_floor_empty_process $f3 submissions/s"
	echo "w3_floor_ratio_to_slurm $(ratio "$f3" "$s3") x"
	echo "w3_ratio_to_floor $(ratio "$g3" "$f3") x"
	s3a=$(m "${W3A[slurm]}") g3a=$(m "${W3A[gpupool]}")
	echo "w3array_submit_rate_slurm $s3a jobs/s"
	echo "w3array_submit_rate_gpupool $g3a jobs/s"
	echo "w3array_ratio $(ratio "$g3a" "$s3a") x"
fi
echo "load_end $(load) loadavg"
