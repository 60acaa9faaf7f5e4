#!/usr/bin/env bash
# test_contain_limits.sh: a job without --mem gets its share of the memory
# the owner lends (issue 15, finding 5). The owner lends 512 MiB and two
# GPUs, so a one-GPU job's default limit is 256 MiB: a job of an ordinary
# user that allocates 400 MiB is stopped, and `show` says it passed its
# memory limit; one that writes 400 MiB to its private /tmp (a tmpfs, which
# the kernel charges to its cgroup) cannot keep it: it is stopped or its
# write fails, never a 400 MiB file. A job asking --mem 500M within the
# lent memory has room for the same 400 MiB.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP $(basename "$0" .sh): needs root: jobs change uid, cgroups"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP $(basename "$0" .sh): needs python3: the jobs allocate with python3"; exit 77; }

start_coordinator
mk_token user alice
ALICE=$TOKEN
printf 'memory = 512M\nscratch-max = 64M\n' >"$T/a1.policy"
start_agent a1 2 --policy "$T/a1.policy"
wait_node_up a1
if ! grep -q "cgroups mode=" "$T/agent-a1.log" || grep -q "cgroups mode=none" "$T/agent-a1.log"; then
	echo "SKIP test_contain_limits: needs cgroup-writable: the agent has no memory cgroup here"
	exit 77
fi
export GPUPOOL_TOKEN=$ALICE

# ---- memory past the default limit
submit --gpus 1 -- python3 -c 'a = b"\x01" * (400 << 20); print("allocated", len(a))'
j=$JOB
wait_final "$j"
job_log "$j"
msg=$(job_get "$j" 'd["message"] or ""')
log "400 MiB without --mem: $FINAL_STATE ($msg) $LOG"
assert_not_contains "$LOG" "allocated" "a job allocating 400 MiB past its 256 MiB default"
assert_eq failed "$FINAL_STATE" "the job that passed its memory limit"
assert_contains "$msg" "memory limit of 256 MiB" "show's reason"
cli show "$j"
assert_contains "$CLI_OUT" "memory limit of 256 MiB" "gpupool show"

# ---- its /tmp counts against it
submit --gpus 1 -- sh -c 'head -c 400M /dev/zero >/tmp/big; echo "rc=$?"; echo "size=$(stat -c %s /tmp/big)"'
j=$JOB
wait_final "$j"
job_log "$j"
log "400 MiB into /tmp: $FINAL_STATE $LOG"
assert_not_contains "$LOG" "size=419430400" "a 400 MiB file in a job's /tmp"

# ---- asked for, it has the room
submit --gpus 1 --mem 500M -- python3 -c 'a = b"\x01" * (400 << 20); print("allocated", len(a))'
j=$JOB
wait_final "$j"
job_log "$j"
assert_eq succeeded "$FINAL_STATE" "a job with --mem 500M"
assert_contains "$LOG" "allocated 419430400" "the job with --mem 500M"

# ---- its work directory is capped
for want in 64 32; do
	disk=()
	[ "$want" = 32 ] && disk=(--disk 32M)
	submit --gpus 1 "${disk[@]}" -- sh -c 'head -c 100M /dev/zero >big; echo "wrote $(stat -c %s big)"; sleep 60'
	j=$JOB
	wait_final "$j"
	msg=$(job_get "$j" 'd["message"] or ""')
	log "100 MiB into a work directory capped at $want MiB: $FINAL_STATE ($msg)"
	assert_eq failed "$FINAL_STATE" "a job filling its work directory (cap $want MiB)"
	assert_contains "$msg" "disk limit of $want MiB" "show's reason (cap $want MiB)"
done
echo "ok: the default memory limit holds, /tmp counts, --mem lifts it, the work directory is capped"
