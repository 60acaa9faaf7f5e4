# tests/requirements.sh: what a test may need from the machine, and how to
# tell whether this machine has it. One word per requirement; a test that
# skips names one of them ("SKIP <test>: needs <word>: <why>"), and
# tests/run.sh asks `requirement_present <word>` whether the machine has
# it after all. A skip whose requirement is present here is lost coverage:
# under CI=true, or when the word is in GPUPOOL_TEST_EXPECT (what a CI
# machine promises to have, e.g. "root oci-runtime busybox"), run.sh
# counts it as a failure. A skip naming no word, or a word not listed
# here, is always a failure, so no skip can hide behind a vague reason. Sourced by tests/run.sh
# and tests/e2e/lib.sh; no side effects.

# The words (requirement_present says what each one means).
REQUIREMENTS="root busybox oci-runtime crun runc cgroup-v1 cgroup-writable netns plain-build cuda-headers unshare python3 openssl nft wireguard torch traces dnsmasq pasta sshd tmux postgresql"

# requirement_present WORD: 0 when this machine has it, 1 when not, 2 for
# a word that is not one of REQUIREMENTS.
requirement_present() {
	local c
	case $1 in
	root) # jobs change uid, mount, make namespaces
		[ "$(id -u)" = 0 ] ;;
	busybox) # the static busybox the container tests build images from
		[ -x /bin/busybox ] ;;
	oci-runtime) # root and crun or runc: the agent can run container jobs
		[ "$(id -u)" = 0 ] && { command -v crun >/dev/null 2>&1 ||
			command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ]; } ;;
	crun) # the runtimes, where the container tests look for them
		[ -x /usr/bin/crun ] ;;
	runc)
		[ -x /usr/sbin/runc ] ;;
	cgroup-v1) # the v1 memory and pids controllers (not a v2-only host)
		[ -e /sys/fs/cgroup/memory/cgroup.procs ] &&
			[ -e /sys/fs/cgroup/pids/cgroup.procs ] &&
			[ ! -e /sys/fs/cgroup/cgroup.controllers ] ;;
	cgroup-writable) # a cgroup hierarchy this user may make groups in
		[ -n "$(writable_cgroup_root)" ] ;;
	netns) # network namespaces and veth pairs (tests/e2e/lib.sh)
		[ "$(id -u)" = 0 ] || return 1
		for c in ip nsenter flock tc; do
			command -v "$c" >/dev/null 2>&1 || return 1
		done ;;
	plain-build) # a build without sanitizers (packages hold that one)
		! ldd "${GPUPOOL_BIN:-build/gpupool}" 2>/dev/null |
			grep -qE 'libasan|libubsan' ;;
	cuda-headers) # the fake CUDA driver (tests/fakecuda) is built with them
		[ -f "${CUDA_INC:-/usr/local/cuda/include}/cuda.h" ] ;;
	dnsmasq) # Debian's dnsmasq-base: the agent's DNS relay for jobs
		[ -x /usr/sbin/dnsmasq ] ;;
	pasta) # Debian's passt: a non-root agent's job networks
		[ -x /usr/bin/pasta ] ;;
	unshare | python3 | openssl | nft) # commands the tests run themselves
		command -v "$1" >/dev/null 2>&1 ;;
	sshd) # OpenSSH's server and client, and nss_wrapper (a job's sshd
		# runs as `nobody`, whose shell is nologin)
		[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null 2>&1 &&
			command -v ssh-keygen >/dev/null 2>&1 &&
			[ -e /usr/lib/x86_64-linux-gnu/libnss_wrapper.so ] ;;
	tmux) # a terminal the tests drive (the interactive shell's)
		command -v tmux >/dev/null 2>&1 ;;
	wireguard) # the gang overlay: Debian's wireguard-go, wg
		# (wireguard-tools) and a TUN device root can open
		[ "$(id -u)" = 0 ] && command -v wireguard-go >/dev/null 2>&1 &&
			command -v wg >/dev/null 2>&1 && [ -c /dev/net/tun ] ;;
	torch) # Debian's python3-torch with Gloo, for the Python the e2e tests
		# run (tests/e2e/lib.sh: Debian's /usr/bin/python3 first)
		"$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)" \
			-c 'import torch.distributed as d
assert d.is_gloo_available()' >/dev/null 2>&1 ;;
	postgresql) # Debian's PostgreSQL 15 server (tests/e2e/pg_lib.sh runs it as
		# nobody through setpriv when the tests run as root)
		[ -x "${GP_PG_BIN:-/usr/lib/postgresql/15/bin}/postgres" ] &&
			[ -x "${GP_PG_BIN:-/usr/lib/postgresql/15/bin}/initdb" ] &&
			{ [ "$(id -u)" != 0 ] || command -v setpriv >/dev/null 2>&1; } ;;
	traces) # the public cluster traces in ../shared/data/traces
		[ -r "${GPUPOOL_TRACES:-../shared/data/traces}/openb_pod_list_default.csv" ] &&
			[ -r "${GPUPOOL_TRACES:-../shared/data/traces}/philly_runtime.csv" ] ;;
	*)
		return 2 ;;
	esac
}

# writable_cgroup_root: prints the first cgroup hierarchy where this user
# can make (and remove) a group, or nothing.
writable_cgroup_root() {
	local r
	for r in /sys/fs/cgroup/memory /sys/fs/cgroup/unified /sys/fs/cgroup; do
		if [ -w "$r/cgroup.procs" ] &&
			mkdir "$r/gpupool-probe-$$" 2>/dev/null; then
			rmdir "$r/gpupool-probe-$$"
			echo "$r"
			return
		fi
	done
}
