# shellcheck shell=bash
# bench/lib.sh: what the shell benchmarks share (sourced): stopping the
# processes they started, and a coordinator on loopback with an admin's
# helpers. Each bench keeps its own PIDS array and cleanup.

# Stops PIDs: a signal to each, then waits for each.
stop_pids() { # PID...
	local p
	for p in "$@"; do
		kill "$p" 2>/dev/null
	done
	for p in "$@"; do
		wait "$p" 2>/dev/null
	done
}

# Starts `$BIN coordinator` on COORD_URL (http://127.0.0.1:PORT) with its
# data in DIR and its output in LOG, more coordinator options after; adds
# it to PIDS, sets COORD_PID and ADMIN (the admin token), and returns once
# it answers. Exits 1 with the log's tail when it does not.
start_coordinator() { # DIR LOG [OPTION...]
	local dir=$1 log=$2
	shift 2
	"$BIN" coordinator --listen "${COORD_URL#http://}" --data "$dir" \
		"$@" >"$log" 2>&1 &
	COORD_PID=$!
	PIDS+=("$COORD_PID")
	for _ in $(seq 100); do
		[ -s "$dir/admin.token" ] && break
		sleep 0.1
	done
	ADMIN=$(cat "$dir/admin.token" 2>/dev/null)
	for _ in $(seq 100); do
		[ -n "$ADMIN" ] && api GET /v1/whoami >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "${0##*/}: the coordinator does not answer on $COORD_URL:" >&2
	tail -n 20 "$log" >&2
	exit 1
}

api() { # METHOD PATH [BODY], as the admin
	curl -fsS -X "$1" -H "Authorization: Bearer $ADMIN" \
		-H 'Content-Type: application/json' ${3:+--data "$3"} \
		"$COORD_URL$2"
}

token() { # ROLE NAME: a new token's secret
	api POST /v1/tokens "{\"role\":\"$1\",\"name\":\"$2\"}" |
		sed -n 's/.*"token": *"\([^"]*\)".*/\1/p'
}

# A new directory for an agent's --work, printed. The agent refuses one
# under /tmp or /dev/shm (its jobs get a private /tmp), so it is made in
# $BENCH_WORK_DIR, else /var/tmp, never beside the checkout: a checkout
# under /tmp (a CI runner's, a reviewer's mktemp) put it under /tmp too,
# and the agent would not start (bench_data.sh; bench_e2e.sh and
# slurm_vs_gpupool.sh use /var/tmp directly). NAME prefixes the
# directory's name; the caller removes it.
agent_work_dir() { # NAME
	local base=${BENCH_WORK_DIR:-/var/tmp} real
	mkdir -p "$base" || return 1
	real=$(realpath "$base") || return 1
	case $real/ in
	/tmp/* | /dev/shm/*)
		echo "${0##*/}: BENCH_WORK_DIR=$base is under /tmp or" \
			"/dev/shm, which the agent refuses" >&2
		return 1
		;;
	esac
	local dir
	dir=$(mktemp -d "$real/$1.XXXXXX") || return 1
	# As the agent makes one itself: others may pass, not list.
	chmod 711 "$dir" && echo "$dir"
}
