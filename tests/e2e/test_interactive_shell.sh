# `gpupool shell` in a real terminal (tmux): it submits an interactive
# job, says where it waits in the queue while a job holds the only GPU,
# then opens a shell in the job: a pty in the job's namespaces, resized
# with the terminal, Ctrl-C and Ctrl-Z reaching the job's foreground
# command, the shell's exit code the CLI's, and leaving ends the job.
. "$(dirname "$0")/lib.sh"
require netns tmux

start_coordinator
start_agent alpha 1
wait_node_up alpha
mk_token user alice
ALICE=$TOKEN

SOCK="$T/tmux.sock"
tm() { tmux -S "$SOCK" "$@"; }
pane() { tm capture-pane -p -J -S -500 -t shell; }
# wait_pane REGEX WHAT: until a line of the pane matches (extended regex).
wait_pane() {
	local deadline=$((SECONDS + WAIT_S))
	until pane | grep -qE "$1"; do
		[ $SECONDS -ge $deadline ] && fail "$2: no line /$1/ in the terminal: $(pane | tail -n 15)"
		sleep 0.1
	done
}

# A batch job holds the only GPU: the shell must wait, and say so.
GPUPOOL_TOKEN=$ALICE submit --gpus 1 -- sh -c "$(gated_job_cmd)"
blocker=$JOB
wait_state "$blocker" running

tm new-session -d -s shell -x 80 -y 24 \
    "env GPUPOOL_URL=$(coord_url) GPUPOOL_TOKEN=$ALICE TERM=xterm $GP shell --gpus 1 --time 10m; echo CLI-EXIT=\$?; sleep 600"
wait_pane 'queued: position 1, waiting' "the shell's place in the queue"
shell_job=$(pane | sed -nE 's/.*gpupool: job ([0-9]+) submitted.*/\1/p' | head -n 1)
is_uint "$shell_job" || fail "no job id in: $(pane)"
release_job alpha "$blocker"
wait_state "$shell_job" running

tm send-keys -t shell 'echo R-$((6*7))' Enter
wait_pane '^R-42' "a command typed into the shell"
# the job's environment and user
tm send-keys -t shell 'echo U-$(id -un)-$CUDA_VISIBLE_DEVICES-' Enter
wait_pane '^U-nobody-0-' "the job's user and GPU"

# window size, and its changes
tm send-keys -t shell 'echo SZ-$(stty size | tr " " x)' Enter
wait_pane '^SZ-24x80' "the terminal's size at start"
tm resize-window -t shell -x 100 -y 30
deadline=$((SECONDS + WAIT_S))
while :; do
	tm send-keys -t shell 'echo SZ-$(stty size | tr " " x)' Enter
	sleep 0.3
	pane | grep -qE '^SZ-30x100' && break
	[ $SECONDS -ge $deadline ] && fail "the resize did not reach the job: $(pane | tail -n 5)"
done

# Ctrl-C reaches the job's foreground command
tm send-keys -t shell 'echo C-1; sleep 300' Enter
wait_pane '^C-1' "before Ctrl-C"
tm send-keys -t shell C-c
tm send-keys -t shell 'echo RC-$?' Enter
wait_pane '^RC-130' "Ctrl-C ended the job's sleep (130)"

# Ctrl-Z stops it, as in a local shell
tm send-keys -t shell 'echo Z-1; sleep 300' Enter
wait_pane '^Z-1' "before Ctrl-Z"
tm send-keys -t shell C-z
wait_pane 'Stopped' "Ctrl-Z stopped the job's sleep"
# (bash refuses the first exit while it still lists a stopped job, and
# on a loaded machine it may not have seen the kill yet: `wait` returns
# at once for a job it thinks stopped, as a full run's ASan pass showed.
# So until `jobs` no longer lists it, 10 s at most.)
tm send-keys -t shell 'kill -9 %1; for i in $(seq 100); do jobs %1 >/dev/null 2>&1 || break; sleep 0.1; done; echo KILLED-1' Enter
wait_pane '^KILLED-1' "the stopped sleep killed and reaped"

# the shell's exit code is the CLI's; leaving ends the job
tm send-keys -t shell 'exit 3' Enter
wait_pane '^CLI-EXIT=3' "the CLI's exit code"
wait_final "$shell_job"
assert_eq cancelled "$FINAL_STATE" "the shell's job after leaving"
echo "ok $TEST_NAME"
