#!/usr/bin/env bash
# test_job_network_dns.sh: DNS for jobs when the provider's resolver is on
# its own loopback (issue 14: systemd-resolved's 127.0.0.53, a local
# dnsmasq's 127.0.0.1), where a job's network namespace cannot reach it.
# Everything runs in a network namespace and a mount namespace of this
# test's: there /etc/resolv.conf names 127.0.0.1 only, and a small
# resolver of this test's answers on 127.0.0.1:53 (svc.gpupool.test is
# 198.51.100.7). A plain job must resolve that name (through the agent's
# relay: dnsmasq on 169.254.53.<block>, named by the job's resolv.conf);
# the relay and its address are gone after the agent stops; after kill -9
# the next agent stops the stale relay and relays again.
set -u
here=$(cd "$(dirname "$0")" && pwd)
name=$(basename "$0" .sh)

if [ -z "${GPDNS_INSIDE:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP $name: needs netns: network namespaces need root"; exit 77; }
	for c in ip nsenter unshare nft; do
		command -v "$c" >/dev/null 2>&1 || { echo "SKIP $name: needs netns: no $c"; exit 77; }
	done
	[ -x /usr/sbin/dnsmasq ] || { echo "SKIP $name: needs dnsmasq: the agent's DNS relay"; exit 77; }
	ns=gpdns-$$
	resolv=$(mktemp /var/tmp/gpdns-resolv.XXXXXX)
	printf 'nameserver 127.0.0.1\noptions timeout:2 attempts:2\n' >"$resolv"
	chmod 644 "$resolv"
	outer_cleanup() {
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
		rm -f "$resolv"
	}
	trap outer_cleanup EXIT
	# An address besides loopback (getaddrinfo's AI_ADDRCONFIG asks for
	# one), on a veth pair of the namespace's own: no way out.
	ip netns add "$ns" && ip -n "$ns" link set lo up &&
		ip -n "$ns" link add gpdns0 type veth peer name gpdns1 &&
		ip -n "$ns" addr add 192.0.2.1/24 dev gpdns0 &&
		ip -n "$ns" link set gpdns0 up && ip -n "$ns" link set gpdns1 up ||
		{ echo "FAIL: cannot make the test namespace"; exit 1; }
	# shellcheck disable=SC2016 # expanded by the inner shell
	nsenter --net="/run/netns/$ns" unshare -m --propagation private \
		bash -c 'mount --bind "$1" /etc/resolv.conf && shift &&
		GPDNS_INSIDE=1 exec bash "$@"' sh "$resolv" "$here/$name.sh"
	exit $?
fi

. "$here/lib.sh"

# The provider's own resolver, on its loopback: A records for one name.
spawn "$T/resolver.log" "$PY" "$here/dns_resolver.py" \
    svc.gpupool.test=198.51.100.7
deadline=$((SECONDS + WAIT_S))
until grep -q serving "$T/resolver.log"; do
	[ $SECONDS -ge $deadline ] && fail "the test's resolver did not start: $(cat "$T/resolver.log")"
	sleep 0.1
done
# The test's resolver answers on the provider's loopback (sanity).
getent ahostsv4 svc.gpupool.test | grep -q 198.51.100.7 ||
	fail "the provider itself cannot resolve through its loopback resolver"

start_coordinator
mk_token user alice
ALICE=$TOKEN
start_agent d1 1
wait_node_up d1
export GPUPOOL_TOKEN=$ALICE

# shellcheck disable=SC2016 # expanded by the job's shell
PROBE='cat /etc/resolv.conf; getent ahostsv4 svc.gpupool.test | head -n 1; echo probed'
probe() {
	submit -- sh -c "$PROBE"
	wait_final "$JOB"
	job_log "$JOB"
	assert_eq succeeded "$FINAL_STATE" "the resolving job"
}
probe
log "the job saw: $LOG"
assert_contains "$LOG" "nameserver 169.254.53." "the job's resolv.conf names the relay"
assert_contains "$LOG" "198.51.100.7" "a plain job resolves through the provider's loopback resolver"
assert_not_contains "$LOG" "127.0.0.1" "the job's resolv.conf (the host's loopback is not the job's)"
grep -q 'jobs. DNS relayed by dnsmasq' "$T/agent-d1.log" ||
	fail "the agent did not say it relays DNS: $(grep -i dns "$T/agent-d1.log")"

relay_addrs() { ip -o -4 addr show dev lo | grep -o '169\.254\.53\.[0-9]*' || true; }
[ -n "$(relay_addrs)" ] || fail "no relay address on lo"

# kill -9: the relay outlives the agent; the next one stops it and
# relays again.
kill9_agent d1
stale=$(pgrep -x dnsmasq | while read -r p; do
	[ "$(readlink "/proc/$p/ns/net")" = "$(readlink /proc/self/ns/net)" ] && echo "$p"; done)
[ -n "$stale" ] || fail "no relay left after kill -9 (nothing to sweep?)"
start_agent d1 1
wait_node_up d1
deadline=$((SECONDS + WAIT_S))
for p in $stale; do
	while alive "$p" && grep -q '^State:.*[RSDI]' "/proc/$p/status" 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && fail "the killed agent's relay (pid $p) still runs"
		sleep 0.1
	done
done
probe
assert_contains "$LOG" "198.51.100.7" "a job resolves after the restart"

# A clean stop: no relay, no address, no file.
kill -TERM "${AGENT_PID[d1]}"
wait_exit "${AGENT_PID[d1]}" || fail "the agent did not stop"
[ -z "$(relay_addrs)" ] || fail "the relay's address stays on lo: $(relay_addrs)"
left=$(pgrep -x dnsmasq | while read -r p; do
	[ "$(readlink "/proc/$p/ns/net")" = "$(readlink /proc/self/ns/net)" ] && echo "$p"; done)
[ -z "$left" ] || fail "a relay still runs after the agent stopped: $left"
echo "ok $name"
