#!/usr/bin/env bash
# Issue 14: a real client. A gang of two parts on two agents (two test
# namespaces on a bridged "LAN", each part in its own job network, linked
# over --advertise-addr) runs a real torch.distributed training on CPU with
# the Gloo backend (examples/torch_ddp/train.py: DDP all-reduces the
# gradients each step, rank 0 checkpoints each step) through the
# environment the agent gives. Once uninterrupted; once with one agent
# killed (kill -9) in the middle, the gang requeued and resumed whole from
# the checkpoint, once that agent is back. Both must end on the same final
# weights. Needs Debian's python3-torch (SKIP without it).
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/gang_lib.sh"
gang_machines test_gang_torch "$here/$(basename "$0")"

. "$here/lib.sh"

if ! "$PY" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
	echo "SKIP test_gang_torch: needs torch: no torch with Gloo for $PY (Debian's python3-torch)"
	exit 77
fi
# The script goes with the job (a plain job need not see this machine's
# files).
train=$(cat "$here/../../examples/torch_ddp/train.py")

start_coordinator
gang_coordinator_relay
start_agent a1 1 --advertise-addr 192.168.77.2
gang_start_a2
wait_node_up a1
wait_node_up a2

steps=30
weights() { # JOB -> W (rank 0's final weights)
	cli logs --part 0 "$1"
	W=$(printf '%s\n' "$CLI_OUT" | sed -n 's/^final weights: //p' | tail -n1)
	[ -n "$W" ] || fail "job $1: no final weights: $CLI_OUT"
}

# 1. Uninterrupted.
submit --nodes 2 --gpus-per-node 1 --checkpoint-every 1s --time 5m -- \
    "$PY" -c "$train" "$steps" 0.2
run1=$JOB
wait_final "$run1" 240
[ "$FINAL_STATE" = succeeded ] || fail "run 1 ended $FINAL_STATE: $(job_get "$run1" d)"
weights "$run1"
w1=$W
log "run 1: final weights $w1"

# 2. One agent killed in the middle; the gang resumes whole.
submit --nodes 2 --gpus-per-node 1 --checkpoint-every 1s --time 5m -- \
    "$PY" -c "$train" "$steps" 0.2
run2=$JOB
deadline=$((SECONDS + 180))
while :; do
	cli logs --part 0 "$run2"
	case $CLI_OUT in *"step 10 loss"*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "run 2 did not reach step 10: $CLI_OUT"
	sleep 0.3
done
kill9_agent a2
deadline=$((SECONDS + WAIT_S))
while :; do
	s=$(job_get "$run2" '"%s %d" % (d["state"], d["attempts"])')
	[ "$s" = "queued 1" ] && break
	[ $SECONDS -ge $deadline ] && fail "run 2 not requeued: $(job_get "$run2" d)"
	sleep 0.2
done
# The requeue says why in the job's log (it said "ended: ; job requeued"
# when job_requeue cleared the gang's reason before writing it).
cli logs --part 0 "$run2"
assert_contains "$CLI_OUT" "ended: node_lost; job requeued" "the requeue's note in part 0's log"
gang_start_a2
wait_final "$run2" 240
[ "$FINAL_STATE" = succeeded ] || fail "run 2 ended $FINAL_STATE: $(job_get "$run2" d)"
# At least the one interruption; not exactly: in one full-suite run the
# attempt after it lost its part on the restarted agent (never delivered
# there; the gang was requeued again about 30 s later, its reason then
# lost to the bug above) and the run ended on attempt 3 with the same
# weights.
attempts=$(job_get "$run2" 'd["attempts"]')
[ "$attempts" -ge 2 ] || fail "run 2 ran $attempts attempt(s), wanted at least 2"
for k in 0 1; do
	cli logs --part "$k" "$run2"
	resumed=$(printf '%s\n' "$CLI_OUT" | sed -n 's/^rank [01] starting at step \([0-9]*\)$/\1/p' | tail -n1)
	[ "${resumed:-0}" -gt 0 ] || fail "part $k of run 2 did not resume from a checkpoint: $CLI_OUT"
done
log "run 2: resumed at step $resumed"
weights "$run2"
log "run 2: final weights $W"
assert_eq "$w1" "$W" "the final weights, interrupted or not"
echo ok
