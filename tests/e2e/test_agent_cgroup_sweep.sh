# Proves that an agent starting up removes the empty cgroups that agents
# killed without their exit path left behind (parents named
# gpupool-<node>-<pid> whose pid is gone, with their empty job cgroups),
# and leaves alone a parent whose pid is alive and a dead agent's parent
# that still holds a running process (a job the next agent must fence).
. "$(dirname "$0")/lib.sh"

root=$(writable_cgroup_root)
[ -n "$root" ] || skip cgroup-writable "no writable cgroup hierarchy here"

# A pid that is surely gone: a finished child's.
sh -c 'exit 0' &
dead=$!
wait "$dead"
sh -c 'exit 0' &
dead2=$!
wait "$dead2"
stale="$root/gpupool-sweeptest$$-$dead"
busy="$root/gpupool-sweepbusy$$-$dead2"
live="$root/gpupool-sweeplive$$-$$"
mkdir -p "$stale/1-1" "$stale/2-1" "$live/3-1"
# The test's status passes through (cleanup reads it from $?): what
# rmdir says is not the test's (another test's agent starting meanwhile
# may have swept some of these already).
on_exit_rm() {
	local rc=$?
	rmdir "$live/3-1" "$live" "$busy/4-1" "$busy" 2>/dev/null
	return $rc
}
trap 'on_exit_rm; cleanup' EXIT
# the busy parent's pid is gone too, but a process still runs in it
sleep 300 &
sleeper=$!
mkdir -p "$busy/4-1"
echo "$sleeper" >"$busy/4-1/cgroup.procs"

start_coordinator
start_agent alpha 1
wait_node_up alpha

[ -d "$stale" ] && fail "the dead agent's empty cgroups were not swept: $stale"
[ -d "$live/3-1" ] || fail "a live pid's cgroup was removed: $live"
[ -d "$busy/4-1" ] || fail "a cgroup with a running process was removed"
echo "$sleeper" >"$root/cgroup.procs"
kill "$sleeper" 2>/dev/null
wait "$sleeper" 2>/dev/null
echo ok
