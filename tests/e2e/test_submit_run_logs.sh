# Proves the basic path: a job submitted with the CLI runs on one of two
# agents, `wait` returns the job's exit code, `show` reports state, exit code,
# node and attempts, and the log holds both stdout and stderr. The job sees
# its --env variables and CUDA_VISIBLE_DEVICES with as many entries as GPUs it
# asked for, runs as a non-root user, cannot write outside its work dir but
# can write its cwd.
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 2
start_agent beta 2
wait_node_up alpha
wait_node_up beta

# --- exit code, show, logs
submit --name basic -- sh -c 'echo hello; echo err >&2; exit 3'
j=$JOB
cli wait "$j"
assert_eq 3 "$CLI_RC" "gpupool wait exit code (= the job's)"

cli show "$j" --json
[ "$CLI_RC" = 0 ] || fail "show --json exited $CLI_RC: $CLI_ERR"
assert_eq "$j" "$(printf '%s' "$CLI_OUT" | json 'd["id"]')" "show: id"
assert_eq basic "$(printf '%s' "$CLI_OUT" | json 'd["name"]')" "show: name"
assert_eq failed "$(printf '%s' "$CLI_OUT" | json 'd["state"]')" "show: state"
assert_eq 3 "$(printf '%s' "$CLI_OUT" | json 'd["exit_code"]')" "show: exit_code"
assert_eq 1 "$(printf '%s' "$CLI_OUT" | json 'd["attempts"]')" "show: attempts"
node=$(printf '%s' "$CLI_OUT" | json 'd["node"]')
case $node in alpha | beta) ;; *) fail "show: node is '$node'" ;; esac
for f in submitted_at started_at finished_at; do
	v=$(printf '%s' "$CLI_OUT" | json "d[\"$f\"]")
	[[ $v =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T ]] || fail "show: $f is '$v'"
done

# plain `show` is for people, but must name the state
cli show "$j"
[ "$CLI_RC" = 0 ] || fail "show exited $CLI_RC: $CLI_ERR"
assert_contains "$CLI_OUT" failed "plain show"

cli logs "$j"
[ "$CLI_RC" = 0 ] || fail "logs exited $CLI_RC: $CLI_ERR"
assert_contains "$CLI_OUT" hello "logs (stdout)"
assert_contains "$CLI_OUT" err "logs (stderr)"

# --- a successful job: wait exits 0, state succeeded
submit -- true
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "wait on a job that exits 0"
assert_eq succeeded "$(job_state "$JOB")" "state of a job that exits 0"

# --- environment
submit --env FOO=bar --env TWO=x=y -- sh -c 'echo "FOO=[$FOO] TWO=[$TWO]"'
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "env job exit"
cli logs "$JOB"
assert_contains "$CLI_OUT" "FOO=[bar] TWO=[x=y]" "job environment"

# --- CUDA_VISIBLE_DEVICES: as many entries as GPUs asked for
submit --gpus 2 -- sh -c 'echo "CVD=[$CUDA_VISIBLE_DEVICES]"'
j2=$JOB
cli wait "$j2"
assert_eq 0 "$CLI_RC" "gpus-2 job exit"
cli logs "$j2"
cvd=$(printf '%s\n' "$CLI_OUT" | sed -n 's/^CVD=\[\(.*\)\]$/\1/p')
IFS=, read -r -a parts <<<"$cvd"
assert_eq 2 "${#parts[@]}" "CUDA_VISIBLE_DEVICES entries for --gpus 2 ('$cvd')"
[ -n "${parts[0]}" ] && [ -n "${parts[1]}" ] && [ "${parts[0]}" != "${parts[1]}" ] ||
    fail "CUDA_VISIBLE_DEVICES '$cvd' is not two distinct devices"
assert_eq 2 "$(job_get "$j2" 'len(d["gpus"])')" "job object: gpus for --gpus 2"

submit --gpus 1 -- sh -c 'echo "CVD=[$CUDA_VISIBLE_DEVICES]"'
cli wait "$JOB"
cli logs "$JOB"
cvd=$(printf '%s\n' "$CLI_OUT" | sed -n 's/^CVD=\[\(.*\)\]$/\1/p')
[ -n "$cvd" ] && [[ $cvd != *,* ]] || fail "CUDA_VISIBLE_DEVICES for --gpus 1 is '$cvd'"

# --- isolation: non-root, / is not writable, cwd is
rm -f /etc/gpupool-probe
submit -- sh -c 'echo "uid=$(id -u)"
if touch /etc/gpupool-probe 2>/dev/null; then echo ROOT-WRITABLE; else echo root-readonly; fi
if echo x >./cwd-probe && [ -s ./cwd-probe ]; then echo cwd-writable; else echo CWD-NOT-WRITABLE; fi'
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "isolation job exit"
cli logs "$JOB"
uid=$(printf '%s\n' "$CLI_OUT" | sed -n 's/^uid=//p')
is_uint "$uid" || fail "job did not print its uid: $CLI_OUT"
[ "$uid" != 0 ] || fail "job runs as root"
assert_contains "$CLI_OUT" root-readonly "job writing /etc"
assert_contains "$CLI_OUT" cwd-writable "job writing its cwd"
[ ! -e /etc/gpupool-probe ] || { rm -f /etc/gpupool-probe; fail "a job created /etc/gpupool-probe"; }

# --- ps lists the jobs with --all, and not finished ones without
cli ps --all --json
[ "$CLI_RC" = 0 ] || fail "ps --all --json exited $CLI_RC: $CLI_ERR"
ids=$(printf '%s' "$CLI_OUT" | json '" ".join(str(x["id"]) for x in (d["jobs"] if isinstance(d, dict) else d))')
for id in "$j" "$j2"; do
	[[ " $ids " == *" $id "* ]] || fail "ps --all does not list job $id ($ids)"
done
cli ps --json
ids=$(printf '%s' "$CLI_OUT" | json '" ".join(str(x["id"]) for x in (d["jobs"] if isinstance(d, dict) else d))')
[[ " $ids " != *" $j "* ]] || fail "ps without --all lists finished job $j"
echo "ok"
