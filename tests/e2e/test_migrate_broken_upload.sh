# A checkpoint upload that breaks halfway (the coordinator is killed with -9
# while the chunks of a new 48 MiB version are arriving) leaves the previous
# version intact: it is still the latest, and it downloads and verifies
# whole. After the restart the agent uploads the new version again, sending
# only the chunks the coordinator lacks. Then the job's provider is killed:
# the job resumes on another from its latest version, redoing at most the
# rounds since, and finishes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate_lib.sh"

start_coordinator
start_provider a 1
wait_node_up a
# A resumable job with a big checkpoint: a round writes 48 MiB, its
# counter and the marker; it prints what steps.sh prints, so
# finish_and_check reads its attempts the same way.
new_marker
STEP_MARK=$MARK
cat >"$T/steps-$STEP_MARK.sh" <<'JOB'
d=$GPUPOOL_CHECKPOINT_DIR
echo "attempt=$GPUPOOL_ATTEMPT restart=$GPUPOOL_RESTART_COUNT checkpoint_version=$GPUPOOL_CHECKPOINT_VERSION"
r=0
if [ -f "$d/COMPLETE" ]; then
	read -r r <"$d/state"
	echo "resumed at step $r (restart $GPUPOOL_RESTART_COUNT)"
else
	echo "starting at step 0"
fi
while [ $r -lt 12 ]; do
	r=$((r + 1))
	rm -f "$d/COMPLETE"
	head -c 50331648 /dev/urandom >"$d/.blob.tmp" && mv "$d/.blob.tmp" "$d/blob"
	echo $r >"$d/.state.tmp" && mv "$d/.state.tmp" "$d/state"
	echo "step=$r" >"$d/.c.tmp" && mv "$d/.c.tmp" "$d/COMPLETE"
	echo "saved step=$r"
	printf '%010d\n' $r 1<>progress
	sleep 1.5
done
echo "done steps=$r"
JOB
chmod 644 "$T/steps-$STEP_MARK.sh"
# Inline: a plain job sees none of this machine's files but the system's.
submit --gpus 1 --checkpoint-every 1s -- /bin/sh -c "$(cat "$T/steps-$STEP_MARK.sh")" "steps-$STEP_MARK.sh"
j=$JOB
wait_state "$j" running
wait_ckpt "$j" 1
chunks() { find "$COORD_DATA/checkpoints" -path '*/chunks/*' -type f 2>/dev/null | wc -l; }
broke=0
for try in 1 2 3 4 5; do
	before_v=$(ckpt_version "$j")
	before_c=$(chunks)
	deadline=$((SECONDS + WAIT_S))
	# wait until chunks of the next version arrive, then kill at once
	while [ "$(chunks)" -le "$before_c" ]; do
		[ $SECONDS -ge $deadline ] && fail "no new chunks after ${WAIT_S}s"
		sleep 0.02
	done
	kill9_coordinator
	start_coordinator
	after_v=$(ckpt_version "$j")
	if [ "$after_v" = "$before_v" ]; then
		broke=1
		break
	fi
	log "try $try: the version was committed before the kill ($before_v -> $after_v); again"
done
[ $broke = 1 ] || fail "could not break an upload halfway in 5 tries"
# the previous version is whole: download it and check it
mkdir "$T/restore"
cli checkpoint get "$j" "$T/restore"
assert_eq 0 "$CLI_RC" "checkpoint get of version $before_v: $CLI_ERR"
assert_eq "step=$(cat "$T/restore/state")" "$(head -n1 "$T/restore/COMPLETE")" "restored state and marker agree"
assert_eq 50331648 "$(stat -c %s "$T/restore/blob")" "restored blob size"
# uploads go on, sending only what is missing
wait_ckpt "$j" $((before_v + 1))
grep -q "checkpoint uploaded job=$j .*sent=" "$T/agent-a.log" || fail "no upload logged"
# the job's provider dies: it resumes elsewhere from its latest version
start_provider b 1
wait_node_up b
depart "$j"
kill9_agent a
wait_moved "$j" b 2
finish_and_check "$j" 12
echo ok
