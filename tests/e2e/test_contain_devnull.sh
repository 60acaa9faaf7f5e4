#!/usr/bin/env bash
# test_contain_devnull.sh: a container job cannot change a host object
# (issue 15, finding 1). The agent runs in a mount namespace of its own
# where /dev/null is a node of this test's (so that a failure cannot break
# the machine's real /dev/null); container jobs, as an ordinary user, try
# to chown and chmod /dev/null and their standard input; the test's node
# keeps its owner (root) and mode (0666). (A GPU's device nodes are bound
# read-only: tests/unit/test_agent_oci.c; fake GPUs have no nodes.)
# Skips where the agent has no working OCI runtime.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP $(basename "$0" .sh): needs root: the agent changes uid and mounts"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP $(basename "$0" .sh): needs unshare: the agent runs in a private mount namespace"; exit 77; }

NULLDEV="$T/null"
mknod "$NULLDEV" c 1 3 || { echo "SKIP $(basename "$0" .sh): needs root: cannot mknod here"; exit 77; }
chown 0:0 "$NULLDEV"
chmod 0666 "$NULLDEV"
node_stat() { stat -c '%u:%g %a' "$NULLDEV"; }
BEFORE=$(node_stat)

start_coordinator
mk_token user alice
ALICE=$TOKEN
printf 'images = any\n' >"$T/any.policy"
mk_token provider prov-c1
(umask 077 && printf '%s\n' "$TOKEN" >"$T/c1.token")
# The agent, its runtime and its jobs see $NULLDEV as /dev/null.
spawn "$T/agent-c1.log" unshare -m --propagation private sh -c \
	'mount --bind "$0" /dev/null && exec "$@"' "$NULLDEV" \
	"$GP" agent --coordinator "$(coord_url)" --token-file "$T/c1.token" \
	--name c1 --work "$T/agents/c1" --fake-gpus 1 --run-as nobody \
	--policy "$T/any.policy" -v
AGENT_PID[c1]=$SPAWNED_PID
wait_node_up c1
if grep -q "container jobs disabled" "$T/agent-c1.log"; then
	echo "SKIP test_contain_devnull: needs oci-runtime: this agent runs no container jobs"
	exit 77
fi
export GPUPOOL_TOKEN=$ALICE
image_layer l --marker devnull
image_oci box box:1 "$IMG/l.tgz"
cli image import "$IMG/box.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"

# 0667: harmless if it ever got through (others keep read and write).
# shellcheck disable=SC2016 # expanded by the job's shell
TRY='B=/bin/busybox; u=$($B id -u)
$B chown "$u" /dev/null /proc/self/fd/0 2>&1
$B chmod 0667 /dev/null /proc/self/fd/0 2>&1
$B ls -lL /dev/null /proc/self/fd/0 2>&1; echo tried'
submit --image box:1 -- "$TRY"
j1=$JOB
expect_image_ran "$j1" c1 tried
assert_eq "$BEFORE" "$(node_stat)" "the host's /dev/null after a container job"

echo "ok: the host's /dev/null is $BEFORE after container jobs that tried to change it"
