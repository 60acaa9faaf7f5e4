#!/bin/sh
# steps.sh: a step-counting job that follows gpupool's checkpoint protocol
# (docs/checkpoints.md), in plain POSIX sh (dash, busybox sh, bash).
#
# Usage: steps.sh TOTAL_STEPS SAVE_EVERY [STEP_SECONDS]
#
#   TOTAL_STEPS   steps to count to (the job's whole work)
#   SAVE_EVERY    save a checkpoint every that many steps (0: only when
#                 asked to by the checkpoint signal, and at the end)
#   STEP_SECONDS  how long one step takes (default 0.1; fractions are fine)
#
# Submit it like this (a plain job sees only the provider's system files,
# not yours: the script goes with the job, its comments left out to stay
# under the 4096 bytes of one argument):
#
#   gpupool submit --checkpoint-every 1s -- /bin/sh \
#       -c "$(grep -v '^[[:space:]]*#' steps.sh)" steps.sh 200 10
#
# What it prints, so that a test (or you) can follow every attempt from the
# job's log alone:
#
#   attempt=A restart=R checkpoint_version=V   once per attempt, first
#   starting at step 0                         no checkpoint to resume from
#   resumed at step N (restart R)              resumed from a checkpoint
#   saved step=N                               after each checkpoint save
#   checkpoint signal at step N: saved, exiting   after the checkpoint signal
#   ran K steps in this attempt                on every exit but a kill
#   done steps=TOTAL                           when the work is finished
#
# Work lost to a reclaim or a node failure is then (sum of K over every
# attempt) - TOTAL, counting K for a killed attempt as the steps between its
# start step and the next attempt's start step.
#
# Environment (set by the gpupool agent; every one is optional here, so the
# script also runs by hand):
#
#   GPUPOOL_CHECKPOINT_DIR      where checkpoints live (default ./checkpoint)
#   GPUPOOL_CHECKPOINT_SIGNAL   the "save now and exit" signal (default USR1)
#   GPUPOOL_RESTART_COUNT       0 on the first attempt
#   GPUPOOL_CHECKPOINT_VERSION  the version restored, 0 if none
#   GPUPOOL_ATTEMPT             the attempt number (1, 2, ...)
#
# Test aids (`gpupool submit --env NAME=VALUE`; the tests and the migration
# soak use them to measure the work a departure costs):
#
#   STEPS_PROGRESS=FILE         after every step, write the step number
#                               into FILE (relative: in the job's working
#                               directory; never in the checkpoint
#                               directory), in place and at a fixed width,
#                               so that a hard link to it tells how far an
#                               attempt got even after it was killed
#   STEPS_SAVE_DELAY=SECONDS    on the checkpoint signal, take this long
#                               before saving (a job with a slow save)
#   STEPS_IGNORE_SIGNAL=1       ignore the checkpoint signal (a job that does
#                               not follow the protocol: killed at the end
#                               of the grace period)
#   STEPS_RESUMED_STEP_S=SECONDS  the step time of an attempt that
#                               resumed from a checkpoint (default
#                               STEP_SECONDS): a test whose checks end
#                               where the job resumes need not wait for
#                               the rest of its work at the first pace
#   STEPS_HOLD=FILE             while FILE exists (relative: in the job's
#                               working directory), do not take the last
#                               step (at most 2400 step times): a test
#                               about to take the attempt off makes sure
#                               it cannot end by itself meanwhile, however
#                               slow the machine
#
# The checkpoint is two files: `state` (the step counter) and the marker
# `COMPLETE` (first line `step=N`, the label `gpupool checkpoints` shows).
# Each is written to a temporary name and renamed into place, and COMPLETE
# always last: the agent uploads a version only when COMPLETE is there and
# no file is newer than it, so it never takes a `state` without its marker.
#
# Exit status: 0 when done, and 0 too after saving on the checkpoint
# signal: the agent records that attempt as reclaimed (and requeues the job)
# because it sent the signal, whatever the status. Anything else is an
# error (2: bad usage, 3: unreadable checkpoint).

usage() {
	echo "usage: steps.sh TOTAL_STEPS SAVE_EVERY [STEP_SECONDS]" >&2
	exit 2
}

is_uint() {
	case $1 in
	'' | *[!0-9]*) return 1 ;;
	esac
	return 0
}

if [ $# -lt 2 ] || [ $# -gt 3 ] || ! is_uint "$1" || ! is_uint "$2"; then
	usage
fi
total=$1
save_every=$2
step_s=${3:-0.1}
case $step_s in
'' | *[!0-9.]* | *.*.*) usage ;;
esac

dir=${GPUPOOL_CHECKPOINT_DIR:-./checkpoint}
sig=${GPUPOOL_CHECKPOINT_SIGNAL:-USR1}
sig=${sig#SIG}
restart=${GPUPOOL_RESTART_COUNT:-0}
progress=${STEPS_PROGRESS:-}
save_delay=${STEPS_SAVE_DELAY:-0}
case $save_delay in
'' | *[!0-9.]* | *.*.*) usage ;;
esac

# The handler first, before anything slow: a checkpoint signal that arrives
# before it is installed kills the job (SIGUSR1's default action).
want_checkpoint=0
handler='want_checkpoint=1'
[ "${STEPS_IGNORE_SIGNAL:-0}" = 1 ] && handler=''
if ! trap "$handler" "$sig" 2>/dev/null; then
	echo "steps.sh: unknown checkpoint signal '$sig'" >&2
	exit 2
fi
sleep_pid=
trap '[ -n "$sleep_pid" ] && kill "$sleep_pid" 2>/dev/null' EXIT

mkdir -p "$dir" || exit 3

echo "attempt=${GPUPOOL_ATTEMPT:-?} restart=$restart" \
    "checkpoint_version=${GPUPOOL_CHECKPOINT_VERSION:-0}"

# Restore. A checkpoint is used only when its marker is there; state and
# marker must agree (they always do for a version the agent uploaded).
step=0
saved=	# the step of the checkpoint in $dir, if any
if [ -f "$dir/COMPLETE" ]; then
	step=
	[ -f "$dir/state" ] && read -r step <"$dir/state"
	label=
	read -r label <"$dir/COMPLETE"
	if ! is_uint "$step" || [ "$label" != "step=$step" ]; then
		echo "steps.sh: inconsistent checkpoint in $dir:" \
		    "state '$step', COMPLETE '$label'" >&2
		exit 3
	fi
	saved=$step
	echo "resumed at step $step (restart $restart)"
	step_s=${STEPS_RESUMED_STEP_S:-$step_s}
	case $step_s in
	'' | *[!0-9.]* | *.*.*) usage ;;
	esac
else
	echo "starting at step 0"
fi

# save: drop the old marker, write state, then the new marker; each file
# via a temporary file and an atomic rename, so that nobody (the agent
# included) ever sees a half written file. Removing COMPLETE first means the
# directory never shows a marker beside files it does not vouch for, even
# when a new state is written within the same clock tick as the old marker
# (equal mtimes would pass the agent's "nothing newer than COMPLETE" test). (A shell cannot fsync; it does not need to here: the agent
# uploads from the page cache, and the next attempt restores from what was
# uploaded, usually on another machine. The C and Python examples fsync.)
save() {
	[ "$saved" = "$step" ] && return 0
	if ! { rm -f "$dir/COMPLETE" &&
	    printf '%s\n' "$step" >"$dir/.state.tmp" &&
	    mv -f "$dir/.state.tmp" "$dir/state" &&
	    printf 'step=%s\n' "$step" >"$dir/.COMPLETE.tmp" &&
	    mv -f "$dir/.COMPLETE.tmp" "$dir/COMPLETE"; }; then
		echo "steps.sh: cannot save a checkpoint in $dir" >&2
		exit 3
	fi
	saved=$step
	echo "saved step=$step"
}

hold=${STEPS_HOLD:-}
held=0
ran=0
while [ "$step" -lt "$total" ]; do
	[ "$want_checkpoint" = 1 ] && break
	if [ -n "$hold" ] && [ $((step + 1)) -eq "$total" ] &&
	    [ -e "$hold" ] && [ "$held" -lt 2400 ]; then
		# held before the last step: a step's time, interruptible
		held=$((held + 1))
		sleep "$step_s" &
		sleep_pid=$!
		wait "$sleep_pid"
		kill "$sleep_pid" 2>/dev/null
		sleep_pid=
		continue
	fi
	# sleep in the background and `wait`: a trapped signal interrupts
	# `wait` at once, while a foreground sleep would delay the trap until
	# it ends.
	sleep "$step_s" &
	sleep_pid=$!
	wait "$sleep_pid"
	if [ "$want_checkpoint" = 1 ]; then
		# interrupted: this step does not count
		kill "$sleep_pid" 2>/dev/null
		sleep_pid=
		break
	fi
	sleep_pid=
	step=$((step + 1))
	ran=$((ran + 1))
	# 1<> opens without truncating: a reader never sees an empty file
	[ -n "$progress" ] && printf '%010d\n' "$step" 1<>"$progress"
	if [ "$save_every" -gt 0 ] && [ $((step % save_every)) -eq 0 ]; then
		save
	fi
done

if [ "$step" -lt "$total" ] && [ "$save_delay" != 0 ]; then
	# a slow save (a big model): the owner's grace period must cover it
	sleep "$save_delay"
fi
save
if [ "$step" -lt "$total" ]; then
	echo "checkpoint signal at step $step: saved, exiting"
	echo "ran $ran steps in this attempt"
	exit 0
fi
echo "ran $ran steps in this attempt"
echo "done steps=$total"
exit 0
