# Proves `gpupool up`: one command starts a local pool (coordinator and an
# agent with 2 simulated GPUs) in the background and writes a CLI config so
# that plain `gpupool nodes`, `submit` and `wait` work with no environment;
# `gpupool down` stops it and leaves no process behind.
. "$(dirname "$0")/lib.sh"

data=$T/pool
port=$(free_port)
cli up --detach --data "$data" --listen "127.0.0.1:$port"
assert_eq 0 "$CLI_RC" "gpupool up --detach ($CLI_ERR $CLI_OUT)"
# every process of the pool mentions $data (its --data) or runs under $T
[ "$(stray_pids | wc -l)" -ge 1 ] || fail "no pool process running after up --detach"

# the CLI finds the pool through the config file up wrote
deadline=$((SECONDS + WAIT_S))
while :; do
	cli nodes --json
	if [ "$CLI_RC" = 0 ]; then
		n=$(printf '%s' "$CLI_OUT" | json '" ".join("%s:%d" % (x["state"], len(x["gpus"])) for x in (d["nodes"] if isinstance(d, dict) else d))')
		[ "$n" = "up:2" ] && break
	fi
	[ $SECONDS -ge $deadline ] && fail "nodes never showed one up node with 2 GPUs ($CLI_RC: $CLI_OUT $CLI_ERR)"
	sleep 0.2
done
cli nodes
assert_eq 0 "$CLI_RC" "plain nodes"
cli whoami
assert_eq 0 "$CLI_RC" "whoami through the config ($CLI_ERR)"
# The owner's commands reach up's agent through the config too.
node_states() {
	cli nodes --json
	printf '%s' "$CLI_OUT" | json '" ".join(x["state"] for x in (d["nodes"] if isinstance(d, dict) else d))'
}
cli provider pause
assert_eq 0 "$CLI_RC" "provider pause through the config ($CLI_ERR)"
deadline=$((SECONDS + WAIT_S))
until [ "$(node_states)" = paused ]; do
	[ $SECONDS -ge $deadline ] && fail "the node never showed paused: $(node_states)"
	sleep 0.2
done
cli provider resume
assert_eq 0 "$CLI_RC" "provider resume through the config ($CLI_ERR)"
deadline=$((SECONDS + WAIT_S))
until [ "$(node_states)" = up ]; do
	[ $SECONDS -ge $deadline ] && fail "the node never showed up again: $(node_states)"
	sleep 0.2
done

submit --gpus 2 -- sh -c 'echo "from-up $CUDA_VISIBLE_DEVICES"; exit 4'
cli wait "$JOB"
if [ "$CLI_RC" != 4 ]; then
	# go on: what down leaves behind is checked either way
	soft_fail "job in the pool made by up: wait exited $CLI_RC, not 4 ($CLI_ERR)"
else
	cli logs "$JOB"
	assert_contains "$CLI_OUT" from-up "logs through the config"
fi

cli down --data "$data"
assert_eq 0 "$CLI_RC" "gpupool down ($CLI_ERR)"
deadline=$((SECONDS + WAIT_S))
while [ -n "$(stray_pids)" ]; do
	[ $SECONDS -ge $deadline ] &&
	    fail "still running after down: $(for p in $(stray_pids); do tr '\0' ' ' </proc/$p/cmdline; echo; done)"
	sleep 0.2
done
curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$port/v1/whoami" &&
    fail "something still answers on port $port after down"

# down when nothing runs is not an error worth a crash; up again works
cli up --detach --data "$data" --listen "127.0.0.1:$port"
assert_eq 0 "$CLI_RC" "second up on the same data ($CLI_ERR)"
deadline=$((SECONDS + WAIT_S))
until cli whoami && [ "$CLI_RC" = 0 ]; do
	[ $SECONDS -ge $deadline ] && fail "second up never served ($CLI_ERR)"
	sleep 0.2
done
cli down --data "$data"
assert_eq 0 "$CLI_RC" "second down ($CLI_ERR)"
deadline=$((SECONDS + WAIT_S))
while [ -n "$(stray_pids)" ]; do
	[ $SECONDS -ge $deadline ] && fail "still running after the second down"
	sleep 0.2
done
echo ok
