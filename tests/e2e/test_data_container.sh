#!/usr/bin/env bash
# test_data_container.sh: data sets and outputs of container jobs
# (submit --image), and what such a job cannot reach, through the real
# coordinator, agent and OCI runtime. alice's container job mounts her
# data set at a path its image lacks (/data/in): it reads every file with
# the right checksums, cannot write there, remount it read-write or
# unmount it; what it writes to $GPUPOOL_OUTPUT_DIR comes back with
# `gpupool fetch`. A second container job mounting the same version starts
# without a transfer (the agent's cache). While a plain job and a container
# job keep a secret in their work directories, /tmp and their command
# lines, a probing container job finds neither in any file it can see nor
# among its processes; it does not see the agent's token file, work
# directory or data cache, the host's /home or /root; it runs with
# NoNewPrivs and no capabilities, as a user mapped away from root; and a
# set-user-ID-root binary in its image runs as the job (the setuid bit
# was dropped when the layer was unpacked).
# Skips (SKIP, needs oci-runtime) where the agent has no working OCI runtime.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require root
start_coordinator
mk_token user alice
ALICE=$TOKEN
printf 'images = any\n' >"$T/any.policy"
start_agent c1 2 --policy "$T/any.policy" --cpus 4 # the keepers and the probe at once
wait_node_up c1
if grep -q "container jobs disabled" "$T/agent-c1.log"; then
	skip oci-runtime "this agent runs no container jobs"
fi
export GPUPOOL_TOKEN=$ALICE

image_layer l --marker data-image --setuid
image_oci box box:1 "$IMG/l.tgz"
cli image import "$IMG/box.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"

# The data set: a file over one chunk, a small one in a subdirectory.
DS="$T/ds"
mkdir -p "$DS/sub"
head -c $((5 << 20 | 333)) /dev/urandom >"$DS/big.bin"
printf 'hello container data\n' >"$DS/sub/small.txt"
chmod 644 "$DS/big.bin" "$DS/sub/small.txt"
cli data put ds "$DS"
assert_eq 0 "$CLI_RC" "data put: $CLI_ERR"
WANT=$(cd "$DS" && sha256sum big.bin sub/small.txt)

ready_line() { # JOB: the agent's "data set ready" line for it
	local deadline=$((SECONDS + WAIT_S))
	until READY=$(grep "data set ready job=$1 " "$T/agent-c1.log"); do
		[ $SECONDS -ge $deadline ] && fail "no 'data set ready' line for job $1"
		sleep 0.2
	done
}

# ---- the mount and the output ----
# shellcheck disable=SC2016 # expanded by the job's shell
USE='B=/bin/busybox; cd /data/in && $B sha256sum big.bin sub/small.txt &&
echo "uid=$(id -u)" &&
echo "mountopts=$($B awk '\''$5 == "/data/in" { o = $6 } END { print o }'\'' /proc/self/mountinfo)" &&
if (echo x >/data/in/new) 2>/dev/null; then echo WROTE; else echo no-write; fi &&
if (echo x >>/data/in/big.bin) 2>/dev/null; then echo APPENDED; else echo no-append; fi &&
if $B mount -o remount,rw /data/in 2>/dev/null; then echo REMOUNTED; else echo no-remount; fi &&
if $B umount /data/in 2>/dev/null; then echo UNMOUNTED; else echo no-umount; fi &&
$B mkdir -p "$GPUPOOL_OUTPUT_DIR/res" &&
$B sha256sum big.bin >"$GPUPOOL_OUTPUT_DIR/res/sum.txt" &&
$B cp sub/small.txt "$GPUPOOL_OUTPUT_DIR/copy.txt" && echo used'
submit --gpus 1 --name use --image box:1 --data ds:/data/in -- "$USE"
J1=$JOB
expect_image_ran "$J1" c1
[ "$FINAL_STATE" = succeeded ] ||
	skip oci-runtime "the container job could not run here ($FINAL_STATE)"
job_log "$J1"
assert_contains "$LOG" "$WANT" "checksums seen in the container"
assert_contains "$LOG" "uid=1000" "the image's user"
assert_contains "$LOG" "mountopts=ro," "the data mount is read-only"
for bad in WROTE APPENDED REMOUNTED UNMOUNTED; do
	assert_not_contains "$LOG" "$bad" "the data mount ($bad)"
done
assert_contains "$LOG" used "the job ran to its end"
ready_line "$J1"
assert_contains "$READY" "cached=0" "first container job: built"
cli fetch "$J1" "$T/out1"
assert_eq 0 "$CLI_RC" "fetch: $CLI_ERR"
assert_eq "copy.txt res" "$(cd "$T/out1" && echo *)" "the output's files"
assert_eq "hello container data" "$(cat "$T/out1/copy.txt")" "copy.txt"
assert_eq "$(cd "$DS" && sha256sum big.bin)" "$(cat "$T/out1/res/sum.txt")" \
    "res/sum.txt"
[ ! -e "$DS/new" ] || fail "the job wrote into the uploaded tree"

# ---- what a container job cannot reach ----
new_marker
m=$MARK
# The secret and the keepers' mark are only ever joined by the jobs'
# shells: no command line holds them whole but the keepers' own.
# shellcheck disable=SC2016 # expanded by the job's shell
KEEP='s=TOP; s="${s}SECRET-'"$m"'"; echo "$s" >/tmp/mine;
echo "$s" >"$GPUPOOL_OUTPUT_DIR/mine"; echo "$s" >"$GPUPOOL_CHECKPOINT_DIR/mine";
echo kept; : KEEPER'"$m"'; while :; do sleep 1; done'
submit --gpus 0 --name plainkeeper -- sh -c "$KEEP"
PK=$JOB
submit --gpus 0 --name boxkeeper --image box:1 -- "$KEEP"
CK=$JOB
for k in "$PK" "$CK"; do
	wait_state "$k" running
	deadline=$((SECONDS + WAIT_S))
	until job_log "$k" && [[ $LOG == *kept* ]]; do
		[ $SECONDS -ge $deadline ] && fail "keeper $k did not start: $LOG"
		sleep 0.2
	done
done
WORK="$T/agents/c1"
# (-xdev: not into the host trees bound read-only under the agent's
# plain-job root template, <work>/roots: a grep of the host's /usr took
# most of this test; the keepers' output files are on $WORK's own.)
[ -n "$(find "$WORK" -xdev -type f -exec grep -l "TOPSECRET-$m" {} + 2>/dev/null)" ] ||
    fail "the keepers' secret is not on the host: the probe proves nothing"
# shellcheck disable=SC2016 # expanded by the job's shell
PROBE='B=/bin/busybox; s=TOP; s="${s}SECRET-'"$m"'"; k=KEEP; k="${k}ER'"$m"'";
for d in /*; do case $d in /proc|/sys|/dev) continue;; esac;
  $B grep -rl "$s" "$d" 2>/dev/null | $B sed "s/^/SECRET-IN /"; done;
for p in /proc/[0-9]*; do c=$($B tr "\0" " " <$p/cmdline 2>/dev/null);
  case $c in *"$k"*) echo "KEEPER-SEEN $p";; esac; done;
echo "procs=$(ls -d /proc/[0-9]* | $B wc -l)";
for f in '"$T/c1.token $T/agent-c1.log $WORK/data $WORK/images $WORK/restore /home/* /root/*"'; do test -e "$f" && echo "VISIBLE $f"; done;
echo "workdirs=$(ls -A '"$WORK"'/jobs 2>/dev/null)";
$B grep -E "^(NoNewPrivs|CapEff)" /proc/self/status;
echo "map=$($B head -1 /proc/self/uid_map | $B tr -s " ")";
echo "suidmode=$(stat -c %a /bin/busybox-suid) suidrun=$(/bin/busybox-suid id -u)";
echo probed'
submit --gpus 1 --name probe --image box:1 --data ds:/data/in -- "$PROBE"
J2=$JOB
wait_final "$J2"
job_log "$J2"
assert_eq succeeded "$FINAL_STATE" "the probe: $LOG"
assert_contains "$LOG" probed "the probe ran to its end"
assert_not_contains "$LOG" "SECRET-IN" "another job's files"
assert_not_contains "$LOG" "KEEPER-SEEN" "another job's processes"
assert_not_contains "$LOG" "VISIBLE" "the agent's and the host's files"
assert_contains "$LOG" "workdirs=$J2-1
" "the work directories it sees (its own only)"
assert_contains "$LOG" "NoNewPrivs:	1" "no new privileges"
assert_contains "$LOG" "CapEff:	0000000000000000" "no capabilities"
map=$(printf '%s\n' "$LOG" | sed -n 's/^map=//p')
read -r inside outside _ <<<"$map"
[ -n "$outside" ] && [ "$outside" != 0 ] ||
    fail "uid $inside inside maps to host uid '$outside': $map"
assert_contains "$LOG" "suidmode=755 suidrun=1000" \
    "a set-user-ID-root binary of the image"
ready_line "$J2"
assert_contains "$READY" "fetched=0" "second container job: no transfer"
assert_contains "$READY" "cached=1" "second container job: from the cache"
for k in "$PK" "$CK"; do
	cli cancel "$k"
	wait_final "$k"
done
log "container jobs: data mounted read-only, output fetched, nothing reached"
