#!/usr/bin/env bash
# scripts/install-deps.sh: installs what gpupool needs from Debian's
# packages (build tools, libraries, the sandbox's helpers), only what is
# missing. Needs root (or sudo). Safe to run again.
# Optional sets, named as arguments, add to the normal list:
#   slurm   Slurm 22.05, munge and Slurm's HTML docs (the tuning guide the
#           bench cites), for bench/slurm_vs_gpupool.sh
set -eu
pkgs=(build-essential pkg-config clang libclang-rt-dev
      libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libsodium-dev
      libsqlite3-dev sqlite3 curl openssl iproute2 python3 procps
      crun runc libyaml-dev busybox-static libcsv-dev gnuplot-nox
      libarchive-dev docker-registry
      # the relay holds a stream leg's TLS session itself (GnuTLS, the
      # one libmicrohttpd's TLS uses: src/coord/relay_tls.c)
      libgnutls28-dev
      # the CLI's own HTTP/1.1 client parses answers with http-parser
      libhttp-parser-dev
      # libcrypto/libssl (already under libcurl4-openssl-dev): a token's
      # CA hash checked against the coordinator's own CA (issue 15)
      libssl-dev
      # tests of issue 7: the metrics parser, the dashboard's browser,
      # shell completion, the packages' Debian root and unit checks
      python3-prometheus-client chromium zsh tmux debootstrap systemd
      # issue 17: certutil puts a pool's CA into the NSS database that
      # Chromium trusts, for the job port proxy's HTTPS in a browser test
      libnss3-tools
      # issue 14: each job in a network namespace of its own (pasta, nftables
      # rules, WireGuard overlays for gangs behind NAT) and a real
      # distributed client (PyTorch on CPU, Gloo)
      passt nftables wireguard-tools python3-torch
      # issue 14: the agent builds each job's veth pair and addresses over
      # rtnetlink with libmnl; bench/net_candidates.sh compares slirp4netns
      # and measures throughput with iperf3
      libmnl-dev slirp4netns iperf3
      # issue 14: the gang overlay between agents behind different NATs
      # (no WireGuard kernel module on every provider: the userspace one)
      wireguard-go
      # issue 14: the agent relays jobs' DNS to a resolver on the host's
      # loopback (systemd-resolved's 127.0.0.53) with dnsmasq
      dnsmasq-base
      # issue 17: interactive sessions tested with real clients (OpenSSH's
      # ssh into an sshd a job runs, Debian's Jupyter server in a job)
      openssh-client openssh-server python3-notebook
      # issue 17 B: the dashboard terminal's WebSocket framing
      # (src/coord/terminal.c)
      libwslay-dev
      # issue 17: the sshd a test job runs as `nobody` (whose shell is
      # nologin) sees a passwd entry with a shell through nss_wrapper
      libnss-wrapper
      # issue 19: the coordinator's state in PostgreSQL (libpq), and a real
      # PostgreSQL 15 that the tests start as an unprivileged user
      libpq-dev postgresql-15)
for set in "$@"; do
	case "$set" in
	slurm) pkgs+=(slurmctld slurmd slurm-client munge slurm-wlm-doc) ;;
	*) echo "install-deps: unknown package set '$set' (known: slurm)" >&2
	   exit 2 ;;
	esac
done
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: everything is installed"
	exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
# Other builds on this machine may be running apt too: wait for its lock.
apt=(apt-get -o DPkg::Lock::Timeout=600)
$sudo "${apt[@]}" update -qq
$sudo "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
