# Proves `gpupool top` (issue 7): --once prints one plain frame with the
# nodes, every GPU with the job and user on it, the running jobs and the
# queue with why each job waits; lines keep to $COLUMNS; without a terminal it prints a frame per
# --interval until interrupted; on a real terminal (tmux) it draws on its
# own screen, redraws, and q or Ctrl-C quit with status 0 and give the
# terminal back (the frame is gone, the shell's screen is back).
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || fail "tmux is missing (scripts/install-deps.sh)"
start_coordinator
start_agent big 2
start_agent small 1
wait_node_up big
wait_node_up small
mk_token user alice
ALICE=$TOKEN
mk_token user bob
BOB=$TOKEN
GPUPOOL_TOKEN=$ALICE submit --gpus 2 --name train -- sleep 600
J1=$JOB
GPUPOOL_TOKEN=$BOB submit --gpus 1 --name eval -- sleep 600
J2=$JOB
wait_state "$J1" running
wait_state "$J2" running
GPUPOOL_TOKEN=$ALICE submit --gpus 2 --name later -- sleep 1
J3=$JOB

# --- one plain frame
cli top --once
[ "$CLI_RC" = 0 ] || fail "top --once exited $CLI_RC: $CLI_ERR"
printf '%s\n' "$CLI_OUT" >&2
assert_not_contains "$CLI_OUT" $'\033' "top --once writes escape sequences"
assert_contains "$CLI_OUT" "nodes 2 up" "summary: nodes"
assert_contains "$CLI_OUT" "GPUs 3 busy, 0 idle" "summary: GPUs"
assert_contains "$CLI_OUT" "jobs 2 running, 1 queued" "summary: jobs"
# each busy GPU row names its job and user
rows=$(printf '%s\n' "$CLI_OUT" | awk '$NF == "alice" || $NF == "bob"' | wc -l)
assert_eq 3 "$rows" "GPU rows with a user"
printf '%s\n' "$CLI_OUT" | grep -qE "^big +up +0 .* $J1 +alice\$" ||
    fail "top: GPU 0 of big is not shown with job $J1 and alice"
printf '%s\n' "$CLI_OUT" | grep -qE "^ +1 .* $J1 +alice\$" ||
    fail "top: GPU 1 of big is not shown with job $J1"
printf '%s\n' "$CLI_OUT" | grep -qE "^small +up +0 .* $J2 +bob\$" ||
    fail "top: small's GPU is not shown with job $J2 and bob"
running=$(printf '%s\n' "$CLI_OUT" | sed -n '/^RUNNING/,/^$/p')
assert_contains "$running" "train" "running: job $J1"
assert_contains "$running" "eval" "running: job $J2"
queue=$(printf '%s\n' "$CLI_OUT" | sed -n '/^QUEUE/,$p')
assert_contains "$queue" "QUEUE (1)" "queue header"
printf '%s\n' "$queue" | grep -qE "^ +$J3 +alice +later " || fail "queue does not list job $J3"
# why it waits: the scheduler's reason when the API gives one ("wait"),
# else its state; then the time waited
reason=$(job_get "$J3" '(d.get("wait") or {}).get("reason") or ("held" if d.get("hold_reason") else d["state"])')
printf '%s\n' "$queue" | grep -qE "^ +$J3 +alice +later +$reason +2 +[0-9]" ||
    fail "queue does not show why job $J3 waits ($reason)"

# --- a user sees the pool, and only their own jobs in the lists
GPUPOOL_TOKEN=$BOB cli top --once
[ "$CLI_RC" = 0 ] || fail "top --once as bob exited $CLI_RC: $CLI_ERR"
assert_contains "$CLI_OUT" "GPUs 3 busy" "bob sees every GPU"
assert_contains "$CLI_OUT" "RUNNING (1)" "bob's running jobs"
assert_contains "$CLI_OUT" "QUEUE (0)" "bob's queue"

# --- the width is kept
COLUMNS=60 cli top --once
long=$(printf '%s\n' "$CLI_OUT" | awk 'length($0) > 60' | wc -l)
assert_eq 0 "$long" "lines longer than COLUMNS=60"

# --- no terminal, no --once: a frame per interval until SIGINT
"$GP" top --interval 1 >"$T/batch.out" 2>&1 </dev/null &
batch=$!
deadline=$((SECONDS + WAIT_S))
until [ "$(grep -c '^gpupool top' "$T/batch.out")" -ge 2 ]; do
	[ $SECONDS -ge $deadline ] && fail "top without a tty: fewer than 2 frames: $(cat "$T/batch.out")"
	sleep 0.2
done
kill -INT "$batch"
wait "$batch"
assert_eq 0 "$?" "top's exit status after SIGINT"

# --- on a terminal: its own screen, q and Ctrl-C quit cleanly
tm() { tmux -S "$T/tmux.sock" "$@"; }
screen() { tm capture-pane -p -t top; }
wait_screen() { # TEXT [absent]
	local deadline=$((SECONDS + WAIT_S))
	while :; do
		if [ "${2:-}" = absent ]; then
			screen | grep -qF -- "$1" || return 0
		else
			screen | grep -qF -- "$1" && return 0
		fi
		[ $SECONDS -ge $deadline ] && fail "screen: '$1' ${2:-not shown} after ${WAIT_S}s: $(screen) [sessions: $(tm list-sessions 2>&1)]"
		sleep 0.2
	done
}
# (The shell ignores the Ctrl-C meant for top, to print top's status.)
printf '#!/bin/sh\ntrap "" INT\nclear\necho BEFORE-TOP\n"%s" top --interval 1\necho "TOP-EXITED $?"\nexec sleep 600\n' \
    "$GP" >"$T/run-top.sh"
for key in q C-c; do
	tm new-session -d -s top -x 120 -y 30 \
	    "env GPUPOOL_URL=$GPUPOOL_URL GPUPOOL_TOKEN=$GPUPOOL_TOKEN sh $T/run-top.sh"
	wait_screen "jobs 2 running, 1 queued"
	wait_screen "BEFORE-TOP" absent   # drawn on its own screen
	screen | grep -qE " $J2 +bob" || fail "tmux: job $J2 not on screen: $(screen)"
	tm send-keys -t top "$key"
	wait_screen "TOP-EXITED 0"
	screen | grep -qF "BEFORE-TOP" || fail "after $key: the shell's screen is not back: $(screen)"
	screen | grep -qF "gpupool top" && fail "after $key: the frame is still shown: $(screen)"
	tm kill-session -t top
done
tm kill-server 2>/dev/null
echo "ok"
