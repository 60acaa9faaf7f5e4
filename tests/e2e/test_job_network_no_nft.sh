#!/usr/bin/env bash
# A root agent on a host whose nftables cannot work (no nft, or a kernel
# without nf_tables: the first GPU machine this project ran on, a minimal
# VM image) still starts and lends its GPUs, but its jobs get loopback
# only: never the host's network. Its log and `provider status` say why,
# its jobs see only lo, and a job that asks for internet is refused at
# submit with that reason. Here nft is a stub on the agent's PATH that
# fails as such a kernel's does.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip root "a root agent's job networks"
mkdir -p "$T/nonft"
printf '#!/bin/sh\necho "Error: Could not process rule: Operation not supported" >&2\nexit 1\n' \
    >"$T/nonft/nft"
chmod 755 "$T/nonft/nft"

start_coordinator
PATH="$T/nonft:$PATH" start_agent n 1:T4:16384
wait_node_up n
grep -q "job networks: network=internet: this host's nftables cannot work (nft list tables failed: Error: Could not process rule: Operation not supported (is nftables installed?)): jobs get loopback only" \
    "$T/agent-n.log" || fail "the agent did not say why its jobs get loopback only: $(grep -m2 'job network' "$T/agent-n.log")"
grep -q "job networks ready" "$T/agent-n.log" &&
    fail "the agent set job networks up with a failing nft"

# A job runs, with its loopback alone.
submit --gpus 1 -- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
wait_final "$JOB"
assert_eq succeeded "$FINAL_STATE" "a job on the node"
job_log "$JOB"
assert_eq lo "$LOG" "the job's interfaces"

# Asking for more than loopback: refused, with the node's reason.
cli submit --network internet --gpus 1 -- true
[ "$CLI_RC" != 0 ] || fail "submit --network internet: accepted"
assert_contains "$CLI_ERR$CLI_OUT" "lets jobs reach only network none" \
    "submit --network internet: the node's reason"
echo ok
