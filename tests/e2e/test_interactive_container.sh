# Interactive streams into a container job (issue 17: "a new process
# inside a running job (its namespaces or container, its user, its
# GPUs)"): `gpupool exec` runs in the container (the image's root, not the
# host's; the container's user, hostname, pid namespace, environment), its
# exit code passes through; `exec --tty` gets a terminal there; and
# `port-forward` reaches a port a process in the container listens on.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

requirement_present oci-runtime ||
    skip oci-runtime "container jobs need root and crun or runc"
require netns
[ -x /bin/busybox ] || skip busybox "the test image is made from /bin/busybox"

start_coordinator
printf 'images = any\n' >"$T/any.policy"
start_agent c 1 --policy "$T/any.policy"
wait_node_up c
grep -q "container jobs disabled" "$T/agent-c.log" &&
    skip oci-runtime "this agent runs no container jobs: $(grep -m1 'container jobs disabled' "$T/agent-c.log")"
image_layer l --marker in-the-image
image_oci box box:1 "$IMG/l.tgz"
cli image import "$IMG/box.tar"
assert_eq 0 "$CLI_RC" "image import: $CLI_ERR"
new_marker
m=$MARK

# The job: a listener on the container's loopback (busybox nc, one
# connection at a time), then a gated wait. The image's Entrypoint is
# /bin/sh -c (images.py): one string. Its work directory is $HOME (the
# image's root is read-only).
# shellcheck disable=SC2016 # expanded by the job's shell
job='cd "$HOME" || exit 9; id -u > uid;
(while [ ! -e go ]; do echo hello-from-container | nc -l -p 7070 127.0.0.1 >/dev/null 2>&1 || sleep 0.2; done) &
i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done; [ -e go ]'
submit --image box:1 -e MARK=container-env -- "$job # $m"
j=$JOB
wait_state "$j" running
# Its uid, as the container sees it (the image's user)
dir="$T/agents/c/jobs/$j-1"
deadline=$((SECONDS + WAIT_S))
until [ -s "$dir/uid" ]; do
	[ $SECONDS -ge $deadline ] && fail "the container job never wrote its uid: $(job_log "$j"; echo "$LOG")"
	sleep 0.1
done
juid=$(cat "$dir/uid")

# exec: inside the container, its exit code passes through
# shellcheck disable=SC2016 # expanded in the container
cli exec "$j" -- sh -c 'id -u; cat /gpupool-marker; hostname; echo env:$MARK;
test -e /usr/bin/python3 && echo HOST-ROOT; ls /proc | grep -c "^[0-9]"; exit 3'
log "exec: rc=$CLI_RC out=$CLI_OUT err=$CLI_ERR"
assert_eq 3 "$CLI_RC" "exec's exit code ($CLI_ERR)"
assert_contains "$CLI_OUT" "in-the-image" "the image's marker file"
assert_not_contains "$CLI_OUT" "HOST-ROOT" "the host's root"
assert_contains "$CLI_OUT" "gpupool-job" "the container's hostname"
assert_contains "$CLI_OUT" "env:container-env" "the job's environment"
assert_eq "$juid" "$(printf '%s\n' "$CLI_OUT" | head -1)" "the container's user"
# the container's pid namespace: a handful of processes, not the host's
nproc_in=$(printf '%s\n' "$CLI_OUT" | tail -1)
[ "$nproc_in" -lt 20 ] || fail "exec sees $nproc_in processes: the host's pid namespace"

# stdin passes through
out=$(printf 'a\nb\nc\n' | "$GP" exec "$j" -- sh -c 'cat /gpupool-marker >/dev/null && grep -c .')
assert_eq 3 "$out" "stdin into the container"

# exec --tty: a terminal in the container (script(1) gives the CLI one)
script -qec "$GP exec --tty $j -- sh -c 'tty; cat /gpupool-marker; exit 5'" \
    "$T/tty.typescript" </dev/null >"$T/tty.out" 2>&1
rc=$?
log "exec --tty: rc=$rc $(cat "$T/tty.out")"
assert_eq 5 "$rc" "exec --tty's exit code"
assert_contains "$(cat "$T/tty.out")" "/dev/pts/" "a terminal in the container"
assert_contains "$(cat "$T/tty.out")" "in-the-image" "the terminal's command in the image"

# port-forward: the container's own loopback port 7070
l0=$(free_port)
spawn "$T/forward.log" "$GP" port-forward "$j" "$l0:7070"
FWD=$SPAWNED_PID
deadline=$((SECONDS + WAIT_S))
until grep -q Forwarding "$T/forward.log"; do
	alive "$FWD" || fail "port-forward exited: $(cat "$T/forward.log")"
	[ $SECONDS -ge $deadline ] && fail "port-forward never listened: $(cat "$T/forward.log")"
	sleep 0.1
done
got=
deadline=$((SECONDS + WAIT_S))
until [ "$got" = hello-from-container ]; do
	[ $SECONDS -ge $deadline ] && fail "port-forward never reached the container's listener: got '$got'; $(cat "$T/forward.log")"
	got=$(E2E_PORT=$l0 $PY - <<'PY'
import os, socket
s = socket.create_connection(("127.0.0.1", int(os.environ["E2E_PORT"])), timeout=5)
data = b""
try:
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
except OSError:
    pass
print(data.decode(errors="replace").strip())
PY
)
	[ "$got" = hello-from-container ] || sleep 0.2
done
kill "$FWD"

release_job c "$j"
wait_final "$j"
assert_eq succeeded "$FINAL_STATE" "the container job"
echo "ok $TEST_NAME"
