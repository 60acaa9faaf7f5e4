# Proves the coordinator's durability: every job id the CLI printed survives a
# kill -9 of the coordinator (50 submissions, partly concurrent) and all of
# them run to completion after a restart on the same data dir; and a job that
# was running when the coordinator died keeps running, finishes while the
# coordinator is down, and ends with the right exit code and its full log
# once the coordinator is back (the agent keeps its report until delivered).
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 4
wait_node_up alpha

# R: prints, sleeps (tagged with a marker), prints again and exits 7.
new_marker
mr=$MARK
submit --gpus 1 --name survivor -- sh -c 'echo start-R; bash -c "exec -a $0 sleep 8"; echo end-R; exit 7' "$mr"
jr=$JOB
# B: holds the other three GPUs, so that 2-GPU jobs cannot run yet.
new_marker
mb=$MARK
submit --gpus 3 --name blocker -- bash -c 'exec -a "$0" sleep 300' "$mb"
jb=$JOB
wait_state "$jr" running
wait_state "$jb" running
wait_count argv0 "$mr" 1

# 50 jobs, five submitters in parallel; keep exactly the ids the CLI printed.
submitters=()
for w in 1 2 3 4 5; do
	(
		for i in $(seq 1 10); do
			out=$("$GP" submit --gpus 2 --name "k$w-$i" -- echo "job-$w-$i" 2>>"$T/submit-$w.err") &&
			    echo "$out $w-$i"
		done >"$T/ids-$w"
	) &
	submitters+=($!)
done
# (only these: a bare `wait` would wait for the daemons too)
wait "${submitters[@]}"
cat "$T"/ids-? >"$T/ids"
acked=$(wc -l <"$T/ids")
assert_eq 50 "$acked" "acknowledged submissions ($(cat "$T"/submit-?.err))"
while read -r id tag; do
	is_uint "$id" || fail "submit printed '$id'"
done <"$T/ids"
[ "$(cut -d' ' -f1 "$T/ids" | sort -u | wc -l)" = 50 ] || fail "duplicate job ids: $(cut -d' ' -f1 "$T/ids" | sort | uniq -d)"

r_alive_at_kill=$(count_argv0 "$mr")
kill9_coordinator
log "coordinator killed; R alive at kill: $r_alive_at_kill"

# Let R finish while the coordinator is down (bounded), then restart.
wait_count argv0 "$mr" 0
start_coordinator

# every acknowledged id is there, with its command, queued (B still holds
# three of the four GPUs)
while read -r id tag; do
	s=$(job_get "$id" 'd["state"] + " " + " ".join(d["command"])')
	assert_eq "queued echo job-$tag" "$s" "job $id after the restart"
done <"$T/ids"
cli show "$(head -n1 "$T/ids" | cut -d' ' -f1)" --json
assert_eq 0 "$CLI_RC" "CLI show after the restart ($CLI_ERR)"

# R: the result the agent held while the coordinator was down
wait_final "$jr"
assert_eq failed "$FINAL_STATE" "R's state"
assert_eq 7 "$(job_get "$jr" 'd["exit_code"]')" "R's exit code"
assert_eq 1 "$(job_get "$jr" 'd["attempts"]')" "R's attempts"
cli wait "$jr"
assert_eq 7 "$CLI_RC" "gpupool wait R"
job_log "$jr"
assert_eq "$(printf 'start-R\nend-R')" "$LOG" "R's log"
assert_eq running "$(job_state "$jb")" "B after the restart"
assert_eq 1 "$(count_argv0 "$mb")" "B's processes after the restart"

# free the GPUs: all fifty run and succeed, each printing its own line
cli cancel "$jb"
assert_eq 0 "$CLI_RC" "cancel B ($CLI_ERR)"
wait_state "$jb" cancelled
while read -r id tag; do
	wait_state "$id" succeeded 60
	job_log "$id"
	assert_eq "job-$tag" "$LOG" "log of job $id"
	assert_eq 1 "$(job_get "$id" 'd["attempts"]')" "attempts of job $id"
done <"$T/ids"

# and a second kill -9 later loses nothing finished either
kill9_coordinator
start_coordinator
while read -r id tag; do
	assert_eq succeeded "$(job_state "$id")" "job $id after the second restart"
done <"$T/ids"
assert_eq failed "$(job_state "$jr")" "R after the second restart"
echo ok
