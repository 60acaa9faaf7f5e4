# A wait reason names the resource that is short (issue 20): a CPU-only job
# (--gpus 0) that waits because the node's CPUs are all held says so (in
# the job's wait, `queue`, `ps` and `show`), and never "no fitting GPU".
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent p 1 --cpus 2
wait_node_up p

# a CPU-only job holds both CPUs; the GPU stays free
new_marker
mk=$MARK
submit --gpus 0 --cpus 2 --time 2m --name hog -- bash -c 'exec -a "$0" sleep 300' "$mk"
hog=$JOB
wait_state "$hog" running
wait_count argv0 "$mk" 1
submit --gpus 0 --cpus 1 --time 1m --name small -- true
small=$JOB

deadline=$((SECONDS + WAIT_S))
while :; do
	why=$(job_get "$small" '(d.get("wait") or {}).get("why", "")')
	case $why in *CPU*) break ;; esac
	[ $SECONDS -ge $deadline ] && fail "small's wait: '$why' (want CPUs named)"
	sleep 0.1
done
assert_eq resources "$(job_get "$small" 'd["wait"]["reason"]')" "small's reason"
assert_contains "$why" "1 CPU free now" "why names the CPUs"
case $why in *GPU*) fail "a CPU-only job's wait names GPUs: $why" ;; esac

cli queue
assert_eq 0 "$CLI_RC" "queue ($CLI_ERR)"
assert_contains "$CLI_OUT" "no node has 1 CPU free now" "queue's why"
case $CLI_OUT in *"no fitting GPU"*) fail "queue: $CLI_OUT" ;; esac
cli ps
[[ $CLI_OUT =~ (^|$'\n')\ *$small\ +small\ .*queued\ .*resources:\ 1\ CPU ]] || fail "ps's WAIT column: $CLI_OUT"
cli show "$small"
assert_contains "$CLI_OUT" "wait: resources (no node has 1 CPU free now" "show's wait line"

cli cancel "$hog"
assert_eq 0 "$CLI_RC" "cancel ($CLI_ERR)"
wait_state "$small" succeeded
echo ok
