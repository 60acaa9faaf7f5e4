#!/usr/bin/env bash
# The compute share steered by the job's own utilisation measured on the
# host: an agent on the fake NVML (no --fake-gpus: its NVML backend finds
# the fake libnvidia-ml.so.1) reads per-process utilisation, gives each
# sample to the job whose cgroup holds the pid, and writes it into the
# job's region, where libgpupool-cuda.so (inside the job's pid namespace,
# where NVML's pids mean nothing) steers by it; `show` reports it back.
# Also: owner-presence = throttle:10% slows a job instead of reclaiming,
# and gpu-share = strict keeps a job alone on its GPU to its share.
. "$(dirname "$0")/gpushare_lib.sh"

start_coordinator
printf 'name Fake NVML GPU\ntotal_bytes 1073741824\nutil 50\n' >"$FAKECUDA_STATE"
printf 'owner-presence = throttle:10%%\ngpu-share = strict\n%s\n' \
    "$GPUSHARE_EXPOSE" >"$T/policy"
mk_token provider prov-n
(umask 077 && printf '%s\n' "$TOKEN" >"$T/n.token")
spawn "$T/agent-n.log" env LD_LIBRARY_PATH="$FAKE" "$GP" agent \
    --coordinator "$(coord_url)" --token-file "$T/n.token" --name n \
    --work "$T/agents/n" --run-as nobody --policy "$T/policy" -v
wait_node_up n
api_expect 200 "$ADMIN_TOKEN" GET /v1/nodes
assert_contains "$API_BODY" "Fake NVML GPU" "the GPU found through NVML"

new_marker
m=$MARK
env=(--env "LD_LIBRARY_PATH=$FAKE")
# shellcheck disable=SC2016 # expanded by the job's shell
run='exec -a "$0" "$1" procaddr launchfor:120000'
submit --gpu-share 0.5 --gpu-mem 256 "${env[@]}" -- bash -c "$run" "$m-1" \
    "$FAKE/cudaprog"
j1=$JOB
submit --gpu-share 0.5 --gpu-mem 256 "${env[@]}" -- bash -c "$run" "$m-2" \
    "$FAKE/cudaprog"
j2=$JOB
wait_state "$j1" running
wait_state "$j2" running
wait_count argv0 "$m-1" 1
pid=$(pgrep -f -- "^$m-1 " | head -1)
[ -n "$pid" ] || fail "no process for job $j1"

wait_show() { # JOB TEXT
	local deadline=$((SECONDS + WAIT_S))
	while :; do
		cli show "$1"
		grep -qF -- "$2" <<<"$CLI_OUT" && return 0
		[ $SECONDS -ge $deadline ] && fail "show $1 never had '$2': $CLI_OUT"
		sleep 0.2
	done
}
# NVML says job 1's process uses 87 % of the GPU: the library steers by it.
printf 'name Fake NVML GPU\ntotal_bytes 1073741824\nutil 50\nproc_util %s 87\n' \
    "$pid" >"$FAKECUDA_STATE.new"
mv "$FAKECUDA_STATE.new" "$FAKECUDA_STATE"
wait_show "$j1" "share_now=0.500 util=87%"
# The owner starts using the GPU: both jobs slowed to 10 %, not reclaimed.
sleep 600 &
owner=$!
STARTED_PIDS+=("$owner")
printf 'name Fake NVML GPU\ntotal_bytes 1073741824\nutil 50\nproc_util %s 87\nproc %s\n' \
    "$pid" "$owner" >"$FAKECUDA_STATE.new"
mv "$FAKECUDA_STATE.new" "$FAKECUDA_STATE"
wait_show "$j1" "share_now=0.100"
wait_show "$j2" "share_now=0.100"
assert_eq running "$(job_state "$j1")" "job 1 under the owner's throttle"
grep -q "throttling pool jobs gpu=0" "$T/agent-n.log" ||
    fail "the agent did not log the throttle"
kill "$owner"
wait "$owner" 2>/dev/null
printf 'name Fake NVML GPU\ntotal_bytes 1073741824\nutil 50\n' \
    >"$FAKECUDA_STATE.new"
mv "$FAKECUDA_STATE.new" "$FAKECUDA_STATE"
wait_show "$j1" "share_now=0.500"
# gpu-share = strict: alone on the GPU, job 1 keeps to its half. (Once
# show has the new reading, the agent has steered since job 2 ended.)
cli cancel "$j2"
wait_final "$j2"
printf 'name Fake NVML GPU\ntotal_bytes 1073741824\nutil 50\nproc_util %s 55\n' \
    "$pid" >"$FAKECUDA_STATE.new"
mv "$FAKECUDA_STATE.new" "$FAKECUDA_STATE"
wait_show "$j1" "util=55%"
assert_contains "$CLI_OUT" "share_now=0.500" "a strict job alone on its GPU"

# A job whose cgroup does not name it (a warm sandbox on cgroup v2, which
# cannot rename a cgroup: how the first real-GPU run lost every reading):
# job 1's process is moved to cgroups named otherwise, in every hierarchy
# that named its job; the agent finds it by the job's pid namespace.
moved=()
while IFS=: read -r _ ctrl path; do
	case $path in */gpupool-*) ;; *) continue ;; esac
	for base in "/sys/fs/cgroup/$ctrl" /sys/fs/cgroup/unified /sys/fs/cgroup; do
		[ -n "$ctrl" ] || [ "$base" != "/sys/fs/cgroup/" ] || continue
		[ -e "$base$path/cgroup.procs" ] && break
		base=
	done
	[ -n "$base" ] || continue
	other="$base/gpupool-e2e-$$/warm"
	mkdir -p "$other" && echo "$pid" >"$other/cgroup.procs" ||
	    fail "cannot move job 1's process to $other"
	moved+=("$base/gpupool-e2e-$$")
done <"/proc/$pid/cgroup"
[ ${#moved[@]} -gt 0 ] || fail "no cgroup of job 1 found: $(cat "/proc/$pid/cgroup")"
grep -q '/gpupool-[^/]*/[0-9]*-[0-9]*' "/proc/$pid/cgroup" &&
    fail "job 1's process still in a cgroup named after it: $(cat "/proc/$pid/cgroup")"
printf 'name Fake NVML GPU\ntotal_bytes 1073741824\nutil 50\nproc_util %s 66\n' \
    "$pid" >"$FAKECUDA_STATE.new"
mv "$FAKECUDA_STATE.new" "$FAKECUDA_STATE"
wait_show "$j1" "util=66%"
cli cancel "$j1"
wait_final "$j1"
for d in "${moved[@]}"; do rmdir "$d/warm" "$d" 2>/dev/null; done
echo ok
