#!/usr/bin/env bash
# test_contain_root_template.sh: plain jobs' minimal root comes from a
# template the agent binds once (<work>/roots/0 or 1, sandbox.h)
# instead of path by path in each job (issue 14, the throughput target).
# The agent runs in a mount namespace of this test's (held by a sleeping
# process, so that what a killed agent leaves there stays to be swept)
# where /etc/hosts is a file of this test's. Checked: a job's root is the
# template (its /dev a mount of its own), read-only, with /usr, /etc and
# the exposure; the template itself is read-only (a removal walking the
# agent's directory cannot change the host through it); a host file
# replaced under the template reaches jobs again (the template is built
# anew when older than 2 s); after kill -9 the next agent sweeps the old
# template, leaving one.
. "$(dirname "$0")/lib.sh"

require root unshare
command -v nsenter >/dev/null || skip unshare "no nsenter here"

W=$T/agents/r1
mkdir -p "$W" "$T/opt-conda"
echo "exposed-marker" >"$T/opt-conda/marker"
printf '127.0.0.1 localhost\n# hosts-first\n' >"$T/hosts-first"
printf '127.0.0.1 localhost\n# hosts-second\n' >"$T/hosts-second"
chmod 644 "$T/hosts-first" "$T/hosts-second" "$T/opt-conda/marker"
printf 'expose = %s ro\n' "$T/opt-conda" >"$T/r1.policy"

# The namespace's holder: the agent (and the one after it) joins it.
spawn "$T/holder.log" unshare -m --propagation private sh -c \
	'mount --bind "$1" /etc/hosts && exec sleep 600' sh "$T/hosts-first"
HOLDER=$SPAWNED_PID
for _ in $(seq 100); do
	[ "$(readlink "/proc/$HOLDER/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] &&
		nsenter -m -t "$HOLDER" grep -q hosts-first /etc/hosts 2>/dev/null && break
	sleep 0.1
done
nsenter -m -t "$HOLDER" grep -q hosts-first /etc/hosts ||
	fail "the test's mount namespace did not come up"
in_ns() { nsenter -m -t "$HOLDER" "$@"; }
# The tmpfs mounted at <work>/roots/<n> in the agent's namespace.
templates() {
	in_ns awk -v r="$W/roots/" 'index($5, r) == 1 &&
		substr($5, length(r) + 1) ~ /^[0-9]+$/ && $0 ~ / - tmpfs / {print $5}' \
		/proc/self/mountinfo
}

start_coordinator
mk_token user alice
ALICE=$TOKEN
mk_token provider prov-r1
(umask 077 && printf '%s\n' "$TOKEN" >"$T/r1.token")
start_r1() {
	spawn "$T/agent-r1.log" nsenter -m -t "$HOLDER" \
		"$GP" agent --coordinator "$(coord_url)" --token-file "$T/r1.token" \
		--name r1 --work "$W" --fake-gpus 1 --run-as nobody \
		--policy "$T/r1.policy" -v
	AGENT_PID[r1]=$SPAWNED_PID
	wait_node_up r1
}
start_r1
export GPUPOOL_TOKEN=$ALICE

# shellcheck disable=SC2016 # expanded by the job's shell
PROBE='awk '"'"'$5 == "/dev" {print "dev-own"}'"'"' /proc/self/mountinfo
test -x /usr/bin/env && echo usr-ok
grep -q "^root:" /etc/passwd && echo etc-ok
grep -o "hosts-[a-z]*" /etc/hosts
grep -q exposed-marker '"$T/opt-conda/marker"' && echo expose-ok
touch /made-by-job 2>/dev/null || echo root-ro
echo x >/dev/null && echo null-ok
echo w >mine && echo w >/tmp/t && echo write-ok
echo probed'
probe() { # prints what a probing job saw
	submit -- sh -c "$PROBE"
	wait_final "$JOB"
	job_log "$JOB"
	assert_eq succeeded "$FINAL_STATE" "a probing job ($(job_get "$JOB" 'd["message"] or ""'))"
	printf '%s\n' "$LOG"
}

# The first job's warm init was cloned before any template: a root of
# its own (the next one's has the template built for the first).
out=$(probe)
assert_contains "$out" probed "the first job"
out=$(probe)
log "the second job saw: $out"
for want in dev-own usr-ok etc-ok hosts-first expose-ok root-ro null-ok write-ok probed; do
	assert_contains "$out" "$want" "the job's root from the template"
done
tpl=$(templates)
[ "$(printf '%s\n' "$tpl" | grep -c .)" = 1 ] ||
	fail "one template in the agent's namespace, found: '$tpl'"
log "template: $tpl"
# Read-only, binds included: nothing of the host changes through it.
# (The probe is a new file of this test's name, removed at once if made.)
probe_file=/usr/.gpupool-template-probe-$$
[ -e "$probe_file" ] && fail "$probe_file exists before the test"
if in_ns touch "$tpl/${probe_file#/}" 2>/dev/null; then
	rm -f "$probe_file"
	fail "the template's /usr is writable (the write reached the host's /usr): $tpl/usr"
fi
in_ns touch "$tpl/made-by-host" 2>/dev/null &&
	fail "the template's tmpfs is writable: $tpl"

# The host's /etc/hosts replaced: jobs see the new one once the template
# is older than its maximum age (each try is a job; bounded by count).
in_ns mount --bind "$T/hosts-second" /etc/hosts
seen=
for _ in $(seq 20); do
	out=$(probe)
	case $out in *hosts-second*) seen=1; break ;; esac
	sleep 0.5
done
[ -n "$seen" ] || fail "jobs never saw the replaced /etc/hosts: $out"
assert_contains "$out" dev-own "a job after the template was built again"
[ "$(templates | grep -c .)" = 1 ] ||
	fail "the template built again replaced the old one: $(templates)"

# kill -9: the template stays in the namespace until the next start.
kill9_agent r1
[ "$(templates | grep -c .)" -ge 1 ] || fail "no template left after kill -9 (nothing to sweep?)"
start_r1
out=$(probe)	# the first, as above
assert_contains "$out" probed "the first job after the restart"
out=$(probe)
for want in dev-own hosts-second probed; do
	assert_contains "$out" "$want" "a job after the restart"
done
left=$(templates)
[ "$(printf '%s\n' "$left" | grep -c .)" = 1 ] ||
	fail "the killed agent's template was not swept: $left"
# Stopped cleanly: nothing left at all.
kill -TERM "${AGENT_PID[r1]}"
wait_exit "${AGENT_PID[r1]}" || fail "agent r1 did not stop"
left=$(templates)
[ -z "$left" ] || fail "templates left after a clean stop: $left"
in_ns awk -v r="$W/roots" '$5 == r' /proc/self/mountinfo | grep -q . &&
	fail "the roots mount left after a clean stop"
echo "ok $(basename "$0" .sh)"
