# Proves the agent's container set-up and the plain sandbox's hiding
# through the real coordinator and agent: the agent detects a working OCI
# runtime at start with a probe container and says which (crun first;
# runc when asked), refuses a --runtime it was asked for that does not
# work, runs plain jobs only (saying why) when its user namespace range
# is unusable; and a plain job sees neither the agent's token file nor
# another job's directory, /home or /root. (Container jobs through the
# coordinator need `submit --image`, engineer "images"; the executor's
# container jobs are tested in tests/unit/test_agent_container.c.)
. "$(dirname "$0")/lib.sh"

require root oci-runtime

start_coordinator

# auto: a probe container ran; the log says which runtime.
start_agent alpha 2
wait_node_up alpha
log_a=$(cat "$T/agent-alpha.log")
assert_contains "$log_a" "containers runtime=" "agent alpha's runtime line"
if command -v crun >/dev/null; then
	assert_contains "$log_a" "containers runtime=crun" "auto picks crun"
fi
assert_contains "$log_a" "userns=2147418112+65536" "default user namespace range"
assert_not_contains "$log_a" "container jobs disabled" "auto with a runtime"

# Plain jobs: the token file, other jobs' directories, homes: not there.
new_marker
m=$MARK
submit --name keeper -- sh -c "echo TOPSECRET > mine; chmod 644 mine; echo \$PWD; sleep 300 # $m"
keeper=$JOB
wait_state "$keeper" running
for _ in $(seq 100); do
	job_log "$keeper"
	dir=$(printf '%s' "$LOG" | head -1)
	[ -n "$dir" ] && break
	sleep 0.1
done
[ -n "$dir" ] || fail "the keeper job printed no directory"
submit -- sh -c "test -s $T/alpha.token && echo TOKEN-VISIBLE; cat $T/alpha.token | head -c 4; cat $dir/mine; ls -A /home /root | wc -l; echo checked"
prober=$JOB
wait_final "$prober"
job_log "$prober"
out=$LOG
assert_contains "$out" "checked" "the probing job ran"
assert_not_contains "$out" "TOKEN-VISIBLE" "the agent's token file"
assert_not_contains "$out" "TOPSECRET" "another job's file"
cli cancel "$keeper"
wait_state "$keeper" cancelled

# The other agents come after: each hides its own directory and token only.
# runc by name.
if [ -x /usr/sbin/runc ] || command -v runc >/dev/null; then
	start_agent beta 1 --runtime runc
	wait_node_up beta
	assert_contains "$(cat "$T/agent-beta.log")" "containers runtime=runc" \
		"--runtime runc"
fi

# A runtime asked for by name that does not exist: the agent refuses to start.
mk_token provider prov-gamma
(umask 077 && printf '%s\n' "$TOKEN" >"$T/gamma.token")
"$GP" agent --coordinator "$(coord_url)" --token-file "$T/gamma.token" \
	--name gamma --work "$T/agents/gamma" --fake-gpus 1 --run-as nobody \
	--runtime /nonexistent/crun >"$T/gamma.out" 2>&1 </dev/null
rc=$?
[ "$rc" != 0 ] || fail "agent with --runtime /nonexistent/crun exited 0"
assert_contains "$(cat "$T/gamma.out")" "--runtime /nonexistent/crun" \
	"the refusal names the flag"

# A user namespace range with host users in it: plain jobs only, and why.
start_agent delta 1 --userns-base 1
wait_node_up delta
assert_contains "$(cat "$T/agent-delta.log")" "container jobs disabled" \
	"--userns-base 1"
assert_contains "$(cat "$T/agent-delta.log")" "includes user" \
	"the reason names the clash"
