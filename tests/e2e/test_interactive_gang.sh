# Streams into any part of a gang (issue 17, docs/interactive.md): a gang
# of two parts on two agents; `exec --part 1` runs in part 1 (its RANK,
# the marker file its own command wrote in its work directory, the
# stream started by part 1's agent, not rank 0's); no --part is part 0;
# `connect --part 1` reaches a port only part 1 listens on; ssh-config
# names the part; a part the gang does not have, --part into a job that
# is not a gang, and a bad --part are refused with the reason.
. "$(dirname "$0")/lib.sh"
require netns python3

start_coordinator
start_agent alpha 1
start_agent beta 1
wait_node_up alpha
wait_node_up beta
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

# Each part writes its rank where only it can see it (its own work
# directory, on its own agent); part 1 also serves its rank on a port of
# its own loopback.
# shellcheck disable=SC2016 # the job's shell expands these
submit --nodes 2 --gpus 1 -- sh -c 'echo "rank-$RANK" >rank.txt
if [ "$RANK" = 1 ]; then
	python3 -c "
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"127.0.0.1\", 7801))
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(b\"served-by-rank-1\\n\")
    c.close()
" &
fi
'"$(gated_job_cmd)"
j=$JOB
wait_state "$j" running
node1=$(job_get "$j" '[p["node"] for p in d["parts"] if p["part"] == 1][0]')
node0=$(job_get "$j" '[p["node"] for p in d["parts"] if p["part"] == 0][0]')
[ "$node0" != "$node1" ] && [ -n "$node1" ] ||
    fail "the gang's parts on nodes '$node0' and '$node1'"

# exec_until PART WANT: the part's command may still be starting.
exec_until() {
	local deadline=$((SECONDS + WAIT_S))
	while :; do
		cli exec --part "$1" "$j" -- sh -c 'echo "env-$RANK"; cat rank.txt'
		[ "$CLI_RC" = 0 ] && [[ $CLI_OUT == *"$2"* ]] && return 0
		[ $SECONDS -ge $deadline ] && fail "exec --part $1: rc $CLI_RC out '$CLI_OUT' err '$CLI_ERR'"
		sleep 0.2
	done
}
exec_until 1 rank-1
assert_contains "$CLI_OUT" "env-1" "part 1's environment"
assert_not_contains "$CLI_OUT" "rank-0" "part 0's file seen from part 1"
grep -q "stream started .*job=$j " "$T/agent-$node1.log" ||
    fail "part 1's agent ($node1) started no stream: $(grep stream "$T/agent-$node1.log")"
grep -q "stream started .*job=$j " "$T/agent-$node0.log" &&
    fail "rank 0's agent ($node0) served the stream into part 1"
exec_until 0 rank-0
assert_contains "$CLI_OUT" "env-0" "part 0's environment"
cli exec "$j" -- cat rank.txt
assert_eq rank-0 "$CLI_OUT" "exec without --part: part 0 ($CLI_ERR)"

# a port that only part 1 listens on
deadline=$((SECONDS + WAIT_S))
until out=$("$GP" connect --part 1 "$j" 7801 </dev/null 2>"$T/c.err") &&
    [ "$out" = served-by-rank-1 ]; do
	[ $SECONDS -ge $deadline ] && fail "connect --part 1: '$out' $(cat "$T/c.err")"
	sleep 0.2
done
cli connect "$j" 7801
[ "$CLI_RC" != 0 ] || fail "part 0 answered on part 1's port: $CLI_OUT"

cli ssh-config --part 1 "$j"
assert_contains "$CLI_OUT" "Host gpupool-$j-part1" "ssh-config's host for part 1"
assert_contains "$CLI_OUT" "connect --part 1 $j 22" "ssh-config's ProxyCommand"

# parts that are not there
cli exec --part 2 "$j" -- true
[ "$CLI_RC" != 0 ] || fail "exec into part 2 of a gang of 2"
assert_contains "$CLI_ERR" "has 2 parts: part 0 to 1" "part 2's refusal"
st=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    -H "Upgrade: gpupool-stream/1" "$(coord_url)/v1/jobs/$j/stream?kind=exec&part=99")
assert_eq 400 "$st" "the route asked for part 99"
cli exec --part x "$j" -- true
assert_eq 2 "$CLI_RC" "a bad --part ($CLI_ERR)"
assert_contains "$CLI_ERR" "not a part number" "a bad --part"
cli shell --part 1
assert_eq 2 "$CLI_RC" "shell --part without JOB ($CLI_ERR)"
submit --gpus 0 -- sh -c "$(gated_job_cmd)"
single=$JOB
wait_state "$single" running
cli exec --part 1 "$single" -- true
[ "$CLI_RC" != 0 ] || fail "exec --part 1 into a job that is not a gang"
assert_contains "$CLI_ERR" "not a gang" "--part into a plain job"

release_job "$node0" "$j"
release_job "$node1" "$j"
wait_final "$j"
cli exec --part 1 "$j" -- true
assert_contains "$CLI_ERR" "not running" "a finished gang"
echo "ok $TEST_NAME"
