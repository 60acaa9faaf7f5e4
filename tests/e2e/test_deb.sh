# Proves the Debian packages (issue 7, `make deb`): built from this tree
# and installed with dpkg into a fresh Debian bookworm root made by
# debootstrap (cached as a tarball under $GPUPOOL_TEST_CACHE, default
# /var/cache/gpupool-tests; the first run downloads it), they install
# cleanly, create the gpupool and gpupool-job system users, ship the man
# pages, completions, Grafana dashboard and sample policy (which the
# installed binary accepts), and their systemd units pass
# `systemd-analyze verify`. There is no systemd here, so the test runs what
# each unit's ExecStart= says, with its EnvironmentFile=, as its User= and
# Group= (tests/e2e/unitexec.py reads the unit), inside the root: the
# coordinator starts as gpupool and serves the API, the dashboard and
# /metrics; the agent starts as root, registers, and runs a job as
# gpupool-job; with the shipped rootless drop-in it runs as gpupool and
# still runs jobs (user namespaces). Each runs in a private mount namespace
# pivot_root'ed into the Debian root, not a chroot (the kernel refuses user
# namespaces in a chroot). Then the packages purge cleanly, leaving the
# pool's data. Under a sanitizer build it is skipped: the packages hold
# the normal build, which the normal run tests.
. "$(dirname "$0")/lib.sh"

ROOTSRC=$(cd "$(dirname "$0")/../.." && pwd)
requirement_present plain-build ||
	skip plain-build "a sanitizer build (the packages hold the normal build)"
for t in debootstrap dpkg-deb dpkg-shlibdeps unshare systemd-analyze flock; do
	command -v "$t" >/dev/null || fail "$t is missing (scripts/install-deps.sh)"
done
START=$SECONDS

# ---- the packages
"$ROOTSRC/scripts/make-deb.sh" "$GPUPOOL_BUILD" "$T/deb" >"$T/make-deb.log" 2>&1 ||
    fail "make-deb failed: $(cat "$T/make-deb.log")"
ls "$T"/deb/*.deb >&2

# ---- a Debian root, from the cache when it can
SUITE=bookworm
# What the packages depend on (there is no apt in the test: dpkg -i needs
# them there), and systemd and procps, as on a real host (the units are
# verified against them).
deps=$(for f in "$T"/deb/*.deb; do dpkg-deb -f "$f" Depends; done |
    tr ',' '\n' | sed 's/([^)]*)//g; s/|.*//; s/[[:space:]]//g' |
    grep -v '^gpupool' | grep -v '^$')
INCLUDE=$(printf '%s\n' $deps systemd procps | sort -u | paste -sd,)
log "packages the root needs: $INCLUDE"
MIRROR=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
CACHE=${GPUPOOL_TEST_CACHE:-/var/cache/gpupool-tests}
mkdir -p "$CACHE" || fail "cannot create $CACHE"
TARBALL="$CACHE/debian-$SUITE-$(printf '%s %s minbase 1' "$SUITE" "$INCLUDE" | md5sum | cut -c1-12).tar.gz"
exec {lockfd}>>"$CACHE/.lock"
flock -w 900 "$lockfd" || fail "the cache lock is busy"
if [ ! -s "$TARBALL" ]; then
	log "debootstrap $SUITE from $MIRROR (cached afterwards in $TARBALL)"
	tmp="$CACHE/tmp-$$"
	rm -rf "$tmp"
	debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$tmp" \
	    "$MIRROR" >"$T/debootstrap.log" 2>&1 ||
	    { rm -rf "$tmp"; fail "debootstrap failed: $(tail -5 "$T/debootstrap.log")"; }
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
	tar -C "$tmp" -czf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL" ||
	    { rm -rf "$tmp" "$TARBALL.tmp"; fail "cannot write $TARBALL"; }
	rm -rf "$tmp"
fi
exec {lockfd}>&-
R="$T/root"
mkdir "$R"
tar -C "$R" -xzf "$TARBALL" || fail "cannot unpack $TARBALL"
log "Debian root ready in $((SECONDS - START))s"

# in_root USER GROUP UMASK CMD...: CMD inside the root, as USER:GROUP, in
# a private mount namespace (the root bound on itself, /proc, /dev and
# /sys from the host) that it pivot_root's into, as a container would;
# the mounts vanish with the namespace, and are never seen outside it.
IN_ROOT_SH='
r=$1 u=$2 g=$3 m=$4
shift 4
mount --bind "$r" "$r"
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
mount --rbind /sys "$r/sys"
mkdir -p "$r/.oldroot"
cd "$r"
pivot_root . .oldroot
cd /
umount -l /.oldroot
rmdir /.oldroot 2>/dev/null || true
umask "$m"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
if [ "$u" = root ]; then exec "$@"; fi
exec setpriv --reuid="$u" --regid="$g" --init-groups -- "$@"
'
in_root() {
	unshare --mount --propagation private -- /bin/sh -ec "$IN_ROOT_SH" \
	    in-root "$R" "$@"
}
in_root_spawn() { # LOGFILE USER GROUP UMASK CMD...
	local logf=$1
	shift
	spawn "$logf" unshare --mount --propagation private -- /bin/sh -ec \
	    "$IN_ROOT_SH" in-root "$R" "$@"
}

# ---- install the packages
mkdir -p "$R/var/tmp/debs"
cp "$T"/deb/*.deb "$R/var/tmp/debs/"
debs=()
for p in gpupool gpupool-coordinator gpupool-agent; do
	f=$(cd "$T/deb" && ls ${p}_*.deb) || fail "make-deb made no $p package"
	debs+=("/var/tmp/debs/$f")
done
in_root root root 022 dpkg -i "${debs[@]}" >"$T/dpkg.log" 2>&1 ||
    fail "dpkg -i failed: $(cat "$T/dpkg.log")"
for p in gpupool gpupool-coordinator gpupool-agent; do
	st=$(in_root root root 022 dpkg-query -W -f='${Status}' "$p")
	assert_eq "install ok installed" "$st" "dpkg status of $p"
done
grep -qiE 'warning|error' "$T/dpkg.log" && fail "dpkg -i said: $(cat "$T/dpkg.log")"

# ---- users, files
for u in gpupool gpupool-job; do
	ent=$(in_root root root 022 getent passwd "$u") || fail "no user $u"
	IFS=: read -r _ _ uid _ _ home shell <<<"$ent"
	[ "$uid" -lt 1000 ] || fail "$u is not a system user (uid $uid)"
	assert_eq /usr/sbin/nologin "$shell" "$u's shell"
done
in_root root root 022 getent group gpupool >/dev/null || fail "no group gpupool"
GP_UID=$(in_root root root 022 id -u gpupool)
[ "$(stat -c '%u %a' "$R/var/lib/gpupool/coordinator")" = "$GP_UID 700" ] ||
    fail "/var/lib/gpupool/coordinator: $(stat -c '%U(%u) %a' "$R/var/lib/gpupool/coordinator")"
for f in usr/bin/gpupool usr/lib/gpupool/libgpupool.so usr/lib/gpupool/libgpupool-cuda.so usr/bin/gpupool-init etc/gpupool/policy etc/default/gpupool-coordinator \
    etc/default/gpupool-agent lib/systemd/system/gpupool-coordinator.service \
    lib/systemd/system/gpupool-agent.service usr/share/gpupool/grafana/gpupool.json \
    usr/share/bash-completion/completions/gpupool usr/share/zsh/vendor-completions/_gpupool \
    usr/share/doc/gpupool-agent/examples/rootless.conf usr/share/doc/gpupool/operations.md; do
	[ -s "$R/$f" ] || fail "the packages do not install /$f"
done
for m in man1/gpupool.1 man1/gpupool-provider.1 man1/gpupool-token.1 \
    man1/gpupool-checkpoint.1 man1/gpupool-top.1 man8/gpupool-coordinator.8 \
    man8/gpupool-agent.8; do
	[ -s "$R/usr/share/man/$m.gz" ] || fail "no man page $m"
	zcat "$R/usr/share/man/$m.gz" | groff -man -ww -z 2>"$T/groff.err"
	[ -s "$T/groff.err" ] && fail "man page $m: $(cat "$T/groff.err")"
done
bash -n "$R/usr/share/bash-completion/completions/gpupool" || fail "bash completion"
in_root root root 022 gpupool provider policy check /etc/gpupool/policy \
    >"$T/policy.out" 2>&1 || fail "the sample policy: $(cat "$T/policy.out")"
in_root root root 022 dpkg-query -W -f='${Conffiles}\n' gpupool-agent |
    grep -q /etc/gpupool/policy || fail "/etc/gpupool/policy is not a conffile"

# ---- the units
systemd-analyze verify --man=no --root="$R" /lib/systemd/system/gpupool-coordinator.service \
    /lib/systemd/system/gpupool-agent.service >"$T/verify.log" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$T/verify.log")"
[ -s "$T/verify.log" ] && fail "systemd-analyze verify warns: $(cat "$T/verify.log")"

# unit_argv UNIT [DROPIN]: sets U_USER U_GROUP U_UMASK U_ARGV from the unit.
unit_argv() {
	local out
	out=$("$PY" "$ROOTSRC/tests/e2e/unitexec.py" "$R" "$R/lib/systemd/system/$1" \
	    "${@:2}" 2>>"$T/unitexec.log") || fail "unitexec $1: $(cat "$T/unitexec.log")"
	mapfile -t lines <<<"$out"
	U_USER=${lines[0]}
	U_GROUP=${lines[1]:-${lines[0]}}
	U_UMASK=${lines[2]}
	U_ARGV=()
	local i seen=0
	for ((i = 3; i < ${#lines[@]}; i++)); do
		if [ $seen = 1 ]; then
			U_ARGV+=("${lines[i]}")
		elif [ "${lines[i]}" = -- ]; then
			seen=1
		else
			# "state MODE PATH": systemd would make it, owned by User=
			read -r _ mode path <<<"${lines[i]}"
			in_root root root 022 install -d -o "$U_USER" -g "$U_GROUP" -m "$mode" "$path"
		fi
	done
}

# ---- the coordinator, as its unit says
COORD_PORT=$(free_port)
sed -i "s/^GPUPOOL_LISTEN=.*/GPUPOOL_LISTEN=127.0.0.1:$COORD_PORT/" "$R/etc/default/gpupool-coordinator"
unit_argv gpupool-coordinator.service
assert_eq gpupool "$U_USER" "the coordinator's User="
in_root_spawn "$T/coord.log" "$U_USER" "$U_GROUP" "$U_UMASK" "${U_ARGV[@]}"
COORD_PID=$SPAWNED_PID
COORD_DATA="$R/var/lib/gpupool/coordinator"
wait_ready
[ "$(stat -c '%u %a' "$COORD_DATA/admin.token")" = "$GP_UID 600" ] ||
    fail "admin.token: $(stat -c '%u %a' "$COORD_DATA/admin.token") (not the gpupool user's, 0600)"
[ "$(stat -c '%u' "$COORD_DATA/state.db")" = "$GP_UID" ] || fail "state.db is not the gpupool user's"
api_expect 200 "$ADMIN_TOKEN" GET /metrics
page=$(curl -sS "$(coord_url)/")
assert_contains "$page" '<title>gpupool</title>' "the dashboard at /"

# ---- the agent, as its unit says (a token, the coordinator's URL)
mk_token provider prov-debnode
(umask 077 && printf '%s\n' "$TOKEN" >"$R/etc/gpupool/agent.token")
MPORT=$(free_port)
sed -i -e "s|^GPUPOOL_COORDINATOR=.*|GPUPOOL_COORDINATOR=$(coord_url)|" \
    -e "s|^GPUPOOL_AGENT_OPTS=.*|GPUPOOL_AGENT_OPTS=--name debnode --fake-gpus 1 --metrics-listen 127.0.0.1:$MPORT|" \
    "$R/etc/default/gpupool-agent"
unit_argv gpupool-agent.service
assert_eq root "$U_USER" "the agent's User="
in_root_spawn "$T/agent.log" "$U_USER" "$U_GROUP" "$U_UMASK" "${U_ARGV[@]}"
AGENT_PID[debnode]=$SPAWNED_PID
wait_node_up debnode
am=$(curl -sS "http://127.0.0.1:$MPORT/metrics")
assert_contains "$am" 'gpupool_agent_connected{node="debnode"} 1' "the agent's metrics"
submit --gpus 1 -- sh -c 'echo "as $(id -un) uid $(id -u)"'
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "a job on the packaged agent ($(job_get "$JOB" 'd["message"]'))"
job_log "$JOB"
JOB_UID=$(in_root root root 022 id -u gpupool-job)
assert_contains "$LOG" "uid $JOB_UID" "the job runs as gpupool-job"

# ---- the agent without root: the rootless drop-in, as its header says
kill -TERM "${AGENT_PID[debnode]}"
wait_exit "${AGENT_PID[debnode]}" || fail "the agent did not stop on SIGTERM"
mkdir -p "$R/etc/systemd/system/gpupool-agent.service.d"
cp "$R/usr/share/doc/gpupool-agent/examples/rootless.conf" \
    "$R/etc/systemd/system/gpupool-agent.service.d/"
in_root root root 022 chown -R gpupool: /var/lib/gpupool/agent /etc/gpupool/agent.token
systemd-analyze verify --man=no --root="$R" /lib/systemd/system/gpupool-agent.service \
    >"$T/verify2.log" 2>&1 || fail "systemd-analyze verify (rootless): $(cat "$T/verify2.log")"
unit_argv gpupool-agent.service "$R/etc/systemd/system/gpupool-agent.service.d/rootless.conf"
assert_eq gpupool "$U_USER" "the rootless agent's User="
in_root_spawn "$T/agent-rootless.log" "$U_USER" "$U_GROUP" "$U_UMASK" "${U_ARGV[@]}"
AGENT_PID[debnode]=$SPAWNED_PID
wait_node_up debnode
submit --gpus 1 -- sh -c 'echo "rootless as uid $(id -u)"; touch /etc/x 2>/dev/null || echo root-readonly'
cli wait "$JOB"
assert_eq 0 "$CLI_RC" "a job on the rootless agent ($(job_get "$JOB" 'd["message"]'))"
job_log "$JOB"
assert_contains "$LOG" "rootless as uid" "the rootless agent's job ran"
assert_contains "$LOG" "root-readonly" "the rootless job's root is read-only"

# ---- stop, remove, purge: the data stays
kill -TERM "${AGENT_PID[debnode]}" "$COORD_PID"
wait_exit "${AGENT_PID[debnode]}" || fail "the agent did not stop on SIGTERM"
wait_exit "$COORD_PID" || fail "the coordinator did not stop on SIGTERM"
in_root root root 022 dpkg --purge gpupool-agent gpupool-coordinator gpupool \
    >"$T/purge.log" 2>&1 || fail "dpkg --purge: $(cat "$T/purge.log")"
[ ! -e "$R/usr/bin/gpupool" ] || fail "/usr/bin/gpupool is left after purge"
[ ! -e "$R/etc/gpupool/policy" ] || fail "/etc/gpupool/policy is left after purge"
[ -s "$COORD_DATA/state.db" ] || fail "purge removed the pool's state"
log "test_deb took $((SECONDS - START))s"
echo "ok"
