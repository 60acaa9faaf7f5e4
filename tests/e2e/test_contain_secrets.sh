#!/usr/bin/env bash
# test_contain_secrets.sh: the coordinator's and the agent's secrets are
# theirs alone (issue 15, findings 3 and 4). The coordinator's data
# directory exists, 0755, before its first start: after a job with a secret
# in its environment, the directory is 0700 and every file in it (state.db,
# its -wal and -shm, admin.token ...) open to no one else. A coordinator
# given a --tls-key that others may read, and an agent given such a
# --metrics-token-file, refuse to start and print the chmod that fixes it.
# An agent whose owner exposes the directory that holds its token files
# (expose = DIR ro) shows a plain job neither: each is an empty node there.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP $(basename "$0" .sh): needs root: jobs change uid"; exit 77; }

open_to_others() { # PATH...: prints those with any group or other bit
	local f m
	for f in "$@"; do
		m=$(stat -c '%a' "$f")
		(( 8#$m & 8#077 )) && printf '%s(%s) ' "$f" "$m"
	done
	return 0
}

mkdir -p "$COORD_DATA"
chmod 755 "$COORD_DATA"
start_coordinator
mk_token user alice
ALICE=$TOKEN
MPORT=$(free_port)
SECRETS="$T/secrets"
mkdir -p "$SECRETS"
chmod 755 "$SECRETS"
mk_token provider prov-a1
(umask 077 && printf '%s\n' "$TOKEN" >"$SECRETS/a1.token")
(umask 077 && printf 'metrics-secret-%s\n' "$$" >"$SECRETS/metrics.token")
printf 'expose = %s ro\n' "$SECRETS" >"$T/a1.policy"

# ---- an agent refuses a metrics token file others may read
chmod 644 "$SECRETS/metrics.token"
"$GP" agent --coordinator "$(coord_url)" --token-file "$SECRETS/a1.token" \
	--name a1 --work "$T/agents/a1" --fake-gpus 1 --run-as nobody \
	--metrics-listen "127.0.0.1:$MPORT" --metrics-token-file "$SECRETS/metrics.token" \
	>"$T/refused-agent.out" 2>&1 </dev/null &
pid=$!
wait_exit "$pid" || { kill -KILL "$pid"; fail "the agent started with a 0644 --metrics-token-file"; }
assert_contains "$(cat "$T/refused-agent.out")" "chmod 600 $SECRETS/metrics.token" \
	"the agent's refusal"
chmod 600 "$SECRETS/metrics.token"

# ---- a coordinator refuses a TLS key others may read
printf 'not a certificate\n' >"$T/cert.pem"
printf 'not a key\n' >"$T/key.pem"
chmod 644 "$T/key.pem"
"$GP" coordinator --data "$T/coord2" --listen "127.0.0.1:$(free_port)" \
	--tls-cert "$T/cert.pem" --tls-key "$T/key.pem" >"$T/refused-coord.out" 2>&1 </dev/null &
pid=$!
wait_exit "$pid" || { kill -KILL "$pid"; fail "the coordinator started with a 0644 --tls-key"; }
assert_contains "$(cat "$T/refused-coord.out")" "chmod 600 $T/key.pem" \
	"the coordinator's refusal"

# ---- the agent, its token files exposed by (a careless) owner
spawn "$T/agent-a1.log" "$GP" agent --coordinator "$(coord_url)" \
	--token-file "$SECRETS/a1.token" --name a1 --work "$T/agents/a1" \
	--fake-gpus 1 --run-as nobody --policy "$T/a1.policy" \
	--metrics-listen "127.0.0.1:$MPORT" --metrics-token-file "$SECRETS/metrics.token" -v
AGENT_PID[a1]=$SPAWNED_PID
wait_node_up a1
export GPUPOOL_TOKEN=$ALICE
submit --env MYKEY=alice-secret-$$ -- sh -c "for f in $SECRETS/a1.token $SECRETS/metrics.token; do echo \"\$f: \$(stat -c '%F %s' \$f)\"; done; ls $SECRETS"
j=$JOB
wait_final "$j"
job_log "$j"
log "the job saw: $LOG"
assert_eq succeeded "$FINAL_STATE" "the probing job"
for f in a1.token metrics.token; do
	assert_contains "$LOG" "$SECRETS/$f: character special file 0" \
		"$f hidden (an empty node)"
done

# ---- the coordinator's files, after that job's secret went through them
[ -e "$COORD_DATA/state.db-wal" ] || fail "no state.db-wal (is the store still WAL?)"
open=$(open_to_others "$COORD_DATA" "$COORD_DATA"/*)
[ -z "$open" ] || fail "the coordinator's files open to others: $open"
echo "ok: secrets are their owners' alone (refusals print the chmod), token files hidden from jobs"
