#!/usr/bin/env bash
# test_contain_view.sh: what a plain job sees of its provider's machine
# (issue 15, finding 2). The agent runs in a mount namespace of its own
# where /srv and /opt are tmpfs of this test's, with world-readable marker
# files in them; more markers sit under /var (this test's directory is in
# /var/tmp), in the agent's and the coordinator's directories (made 0755
# before they started) and in the owner's policy file. A plain job of an
# ordinary user tries to read each: it must find none, yet run programs
# from /usr, read /etc/passwd, write its directory, /tmp and /dev/shm, and
# see what the policy exposes (expose = /opt/conda ro), read-only.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP $(basename "$0" .sh): needs root: jobs change uid, mounts"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP $(basename "$0" .sh): needs unshare: the agent runs in a private mount namespace"; exit 77; }
[ -d /srv ] && [ -d /opt ] || { echo "SKIP $(basename "$0" .sh): needs root: no /srv or /opt here"; exit 77; }

SECRET=contain-secret-$$-$RANDOM
put() { # FILE: a world-readable marker
	mkdir -p "$(dirname "$1")"
	printf '%s %s\n' "$SECRET" "$1" >"$1"
	chmod 644 "$1"
}
# The coordinator's and the agent's directories exist (0755) before them.
mkdir -p "$COORD_DATA" "$T/agents/a1"
chmod 755 "$COORD_DATA" "$T/agents/a1"
put "$COORD_DATA/marker"
put "$T/agents/a1/marker"
put "$T/var-marker"
printf '# %s\nexpose = /opt/conda ro\n' "$SECRET" >"$T/a1.policy"
chmod 644 "$T/a1.policy"

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token provider prov-a1
(umask 077 && printf '%s\n' "$TOKEN" >"$T/a1.token")
# In the agent's namespace: /srv and /opt are ours, with markers.
# shellcheck disable=SC2016 # expanded by the inner shell
spawn "$T/agent-a1.log" unshare -m --propagation private sh -c '
	S=$1; shift
	mount -t tmpfs -o mode=755 none /srv && mount -t tmpfs -o mode=755 none /opt &&
	mkdir -p /srv/data /opt/conda/bin /opt/other &&
	for f in /srv/data/marker /opt/other/marker /opt/conda/marker; do
		echo "$S $f" >"$f" && chmod 644 "$f" || exit 1
	done && exec "$@"' sh "$SECRET" \
	"$GP" agent --coordinator "$(coord_url)" --token-file "$T/a1.token" \
	--name a1 --work "$T/agents/a1" --fake-gpus 1 --run-as nobody \
	--policy "$T/a1.policy" -v
AGENT_PID[a1]=$SPAWNED_PID
wait_node_up a1
export GPUPOOL_TOKEN=$ALICE

# shellcheck disable=SC2016 # expanded by the job's shell
PROBE='for f in /srv/data/marker /opt/other/marker '"$T/var-marker $COORD_DATA/marker $COORD_DATA/state.db $COORD_DATA/admin.token $T/agents/a1/marker $T/a1.policy $T/a1.token"'; do
	cat "$f" 2>/dev/null | head -c 200
done
for d in /srv /opt/other /var /mnt /home /root '"$T $COORD_DATA"'; do
	ls -A "$d" 2>/dev/null | sed "s|^|ls $d: |"
done
echo "root: $(ls -A / | tr "\n" " ")"
test -x /usr/bin/env && echo usr-ok
grep -q "^root:" /etc/passwd && echo etc-ok
echo w >mine && echo w >/tmp/t && echo w >/dev/shm/t && echo write-ok
echo x >/dev/null && echo null-ok
cat /opt/conda/marker | grep -q contain-secret && echo expose-ok
touch /opt/conda/x 2>/dev/null || echo expose-ro
echo probed'
submit -- sh -c "$PROBE"
j=$JOB
wait_final "$j"
job_log "$j"
out=$LOG
log "the job saw: $out"
assert_eq succeeded "$FINAL_STATE" "the probing job ($(job_get "$j" 'd["message"] or ""'))"
assert_contains "$out" probed "the probing job ran to its end"
for want in usr-ok etc-ok write-ok null-ok expose-ok expose-ro; do
	assert_contains "$out" "$want" "the job's minimal root"
done
# The one marker it may read is the exposed one.
leaks=$(printf '%s\n' "$out" | grep "$SECRET" | grep -v "^$SECRET /opt/conda/marker$")
[ -z "$leaks" ] || fail "a plain job read the provider's files: $leaks"
for name in marker state.db admin.token; do
	assert_not_contains "$out" ": $name" "a listing showing $name"
done
echo "ok: a plain job sees the system's programs, its own directories and the exposed /opt/conda only"
