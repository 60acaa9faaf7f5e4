# Gangs across three agents (issue 5): `submit --nodes 3 --gpus-per-node 1`
# places three parts on three nodes, all started together; each part sees
# torchrun's environment (MASTER_ADDR and MASTER_PORT the same for all,
# WORLD_SIZE 3, RANK = NODE_RANK = its part, LOCAL_RANK 0); each part has its
# own log (`logs --part K`). When one agent is killed, the other parts get
# the checkpoint signal and save (rank 0's checkpoint is the gang's), the
# whole gang goes back to the queue (reason node_lost) and, once three
# nodes are up again, resumes as a whole from that checkpoint, losing
# nothing of what rank 0 saved, and succeeds.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator --checkpoint-keep 1000
for n in a b c; do
	start_provider "$n" 1
done
for n in a b c; do
	wait_node_up "$n"
done

# each part: its environment, then the step job (rank 0's saves count)
new_marker
gm=$MARK
# The script goes with the job (a plain job sees none of this machine's
# files but the system's): the environment line, then steps.sh's text.
{
	cat <<'EOF'
echo "env rank=$RANK node_rank=$NODE_RANK local_rank=$LOCAL_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT nnodes=$GPUPOOL_NNODES gpn=$GPUPOOL_GPUS_PER_NODE cvd=$CUDA_VISIBLE_DEVICES"
set -- 120 5 0.1
EOF
	printf '%s\n' "$STEPS_TEXT"
} >"$T/gang-$gm.sh"
submit --nodes 3 --gpus-per-node 1 --checkpoint-every 1s --name gang -- /bin/sh -c "$(cat "$T/gang-$gm.sh")" "gang-$gm.sh"
j=$JOB
wait_state "$j" running
# running means every part has started
assert_eq "3 True" "$(job_get "$j" '"%d %s" % (len(d["parts"]), all(p["started"] for p in d["parts"]))')" "all three parts started"
assert_eq "a b c" "$(job_get "$j" '" ".join(sorted(p["node"] for p in d["parts"]))')" "one part per node"
cli ps
[[ $CLI_OUT =~ $j\ +gang\ +admin\ +default\ +running\ +[abc]\ +3x1 ]] || fail "ps shows the gang: $CLI_OUT"
cli show "$j"
assert_contains "$CLI_OUT" "part 2: node=" "show lists the parts"

# every part's environment, from its own log
port=
for k in 0 1 2; do
	deadline=$((SECONDS + WAIT_S))
	while :; do
		cli logs --part "$k" "$j"
		line=$(printf '%s\n' "$CLI_OUT" | grep '^env ' | head -n1)
		[ -n "$line" ] && break
		[ $SECONDS -ge $deadline ] && fail "part $k printed no environment: $CLI_OUT $CLI_ERR"
		sleep 0.1
	done
	# MASTER_ADDR: rank 0's own address in its job network (issue 14).
	[[ $line =~ ^env\ rank=$k\ node_rank=$k\ local_rank=0\ world=3\ master=(10\.204\.[0-9]+\.[0-9]+):(29[5-9][0-9][0-9])\ nnodes=3\ gpn=1\ cvd=0$ ]] ||
	    fail "part $k's environment: $line"
	[ -z "$port" ] && port=${BASH_REMATCH[2]}
	assert_eq "$port" "${BASH_REMATCH[2]}" "part $k's MASTER_PORT"
done
api_expect 404 "$ADMIN_TOKEN" GET "/v1/jobs/$j/log?offset=0&part=3"
api_expect 400 "$ADMIN_TOKEN" GET "/v1/jobs/$j/log?offset=0&part=64"

# kill the agent of a part other than rank 0: the gang saves and requeues
wait_ckpt "$j" 2
victim=$(job_get "$j" '[p["node"] for p in d["parts"] if p["part"] == 1][0]')
rank0=$(job_get "$j" '[p["node"] for p in d["parts"] if p["part"] == 0][0]')
kill9_agent "$victim"
deadline=$((SECONDS + WAIT_S))
while :; do
	s=$(job_get "$j" '"%s %d" % (d["state"], d["attempts"])')
	[ "$s" = "queued 1" ] && break
	[ $SECONDS -ge $deadline ] && fail "gang not requeued after its node was lost: $(job_get "$j" d)"
	sleep 0.1
done
assert_eq node_lost "$(history_reason "$j" 1)" "why attempt 1 ended"
# two nodes up for three parts: none that is up could hold it now
deadline=$((SECONDS + WAIT_S))
while :; do
	r=$(job_get "$j" '(d["wait"] or {}).get("reason")')
	[ "$r" = never ] && break
	[ $SECONDS -ge $deadline ] && fail "the gang waits for '$r', not never: $(job_get "$j" d)"
	sleep 0.1
done
# rank 0 saved on the checkpoint signal: its last save is the version kept
job_log "$j"
saved=$(printf '%s\n' "$LOG" | sed -n 's/^checkpoint signal at step \([0-9]*\): saved, exiting$/\1/p' | tail -n1)
[ -n "$saved" ] || fail "rank 0 did not save on the checkpoint signal: $LOG"

# a third node again: the gang resumes as a whole where rank 0 saved
start_provider d 1
wait_node_up d
wait_state "$j" running
assert_eq 2 "$(job_get "$j" 'd["attempts"]')" "attempts"
assert_eq "$(printf '%s\n' a b c d | grep -vx "$victim" | tr '\n' ' ' | sed 's/ $//')" "$(job_get "$j" '" ".join(sorted(p["node"] for p in d["parts"]))')" "the second attempt's nodes"
cli wait "$j"
assert_eq 0 "$CLI_RC" "the gang succeeds ($(job_get "$j" d))"
job_log "$j"
assert_contains "$LOG" "resumed at step $saved (restart 1)" "rank 0 resumed where it saved"
assert_contains "$LOG" "done steps=120" "rank 0 finished"
for k in 1 2; do
	cli logs --part "$k" "$j"
	assert_contains "$CLI_OUT" "resumed at step $saved (restart 1)" "part $k resumed from rank 0's checkpoint"
	assert_contains "$CLI_OUT" "done steps=120" "part $k finished"
done
[ "$rank0" != "$victim" ] || fail "rank 0 was the victim"
echo ok
