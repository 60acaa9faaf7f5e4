# tests/e2e/lib.sh: what every end-to-end test sources. It gives each test a
# private temp dir and port, starts the real coordinator and agents on
# 127.0.0.1, drives the real CLI and the HTTP API, and on exit kills every
# process the test started (by pid and process group, and any stray process
# whose command line or working directory points into the test's temp dir or
# carries one of its markers), then removes the temp dir.
#
# Knobs: GP_TEST_DB (sqlite, the default, or postgresql: see coord_db_args),
# E2E_WAIT_S (the bound of every wait, default 30), E2E_TMPDIR (where
# the per-test dirs go, default /var/tmp: not /tmp, see below), E2E_KEEP=1
# (keep the test's dir, with every daemon's log, for a post-mortem). Under a
# SANITIZE=1 build, any sanitizer report in a daemon's log fails the test.
#
# A test that cannot run here calls `skip WORD WHY` or `require WORD...`
# (WORD from tests/requirements.sh): it prints "SKIP <test>: needs WORD:
# WHY" and exits 77, which tests/run.sh shows as SKIP (and fails under CI
# when the machine has WORD after all). Never `exit 0` for a skip.
#
# Conventions: a helper that must report a value sets a global (JOB, API_STATUS,
# API_BODY, CLI_RC, CLI_OUT, CLI_ERR) instead of printing it, so that `fail`
# always runs in the test's own shell and really ends the test. Every wait is a
# bounded poll (default 30 s): tests never assert on how fast something is.

set -u
set -o pipefail

GP=${GPUPOOL_BIN:?GPUPOOL_BIN must be the gpupool binary (run via tests/run.sh)}
[ -x "$GP" ] || { echo "FAIL: $GP is not executable" >&2; exit 1; }
if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=python3; fi
WAIT_S=${E2E_WAIT_S:-30}
TEST_NAME=$(basename "$0" .sh)

# Not /tmp: the agent refuses work dirs there (jobs get a private /tmp).
T=$(mktemp -d "${E2E_TMPDIR:-/var/tmp}/gpe2e-$TEST_NAME.XXXXXX") || exit 1
# Jobs run as `nobody` in work dirs below $T: it must be traversable.
chmod 755 "$T"
mkdir -p "$T/home/.config" "$T/agents"
chmod 755 "$T/agents"
# Never read or write the real user's CLI configuration.
export HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config"
unset GPUPOOL_URL GPUPOOL_TOKEN GPUPOOL_CA GPUPOOL_CONFIG

STARTED_PIDS=()	# every process we started in its own session
MARKERS=()	# strings that tag job processes (see new_marker)
declare -A AGENT_PID=()
declare -A PID_WHAT=()	# pid -> what it is, for messages
declare -A PID_LOG=()	# pid -> its log file (spawn), shown when it crashes
declare -A PID_START=()	# pid -> its start time (/proc/PID/stat), see ours
COORD_PID=
COORD_PORT=
COORD_SCHEME=http
COORD_TLS_ARGS=()
COORD_EXTRA_ARGS=()
COORD_DATA="$T/coord"
COORD_LOG="$T/coord.log"
ADMIN_TOKEN=

log() { echo "[$(date +%H:%M:%S.%N | cut -c1-12)] $*" >&2; }

# fail MSG: show the tails of the daemons' logs, then the reason (last, so
# that tests/run.sh's tail shows it), and end the test.
fail() {
	local f
	for f in "$T"/*.log; do
		[ -f "$f" ] || continue
		echo "----- tail of $(basename "$f")" >&2
		tail -n 15 "$f" >&2
	done
	echo "FAIL [$TEST_NAME]: $*" >&2
	exit 1
}

. "$(dirname "${BASH_SOURCE[0]}")/../requirements.sh"

# The status of a test that skipped itself (automake's; tests/run.sh).
E2E_EXIT_SKIP=77

# skip WORD WHY: this test cannot run here for want of WORD (one of
# tests/requirements.sh's words); ends it with the SKIP status.
skip() {
	echo "SKIP $TEST_NAME: needs $1: $2"
	exit "$E2E_EXIT_SKIP"
}

# require WORD...: skips unless this machine has every WORD.
require() {
	local w
	for w in "$@"; do
		requirement_present "$w" || skip "$w" "not on this machine"
	done
}

# soft_fail MSG: record a failure but go on, so that one test can report
# several independent defects; the test fails at exit.
SOFT_FAILS=()
soft_fail() {
	echo "FAIL (continuing) [$TEST_NAME]: $*" >&2
	SOFT_FAILS+=("$*")
}

assert_eq() { # EXPECTED ACTUAL WHAT
	[ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"
}

assert_contains() { # HAYSTACK NEEDLE WHAT
	case $1 in
	*"$2"*) ;;
	*) fail "$3: '$2' not found in: $(printf '%s' "$1" | head -c 2000)" ;;
	esac
}

assert_not_contains() { # HAYSTACK NEEDLE WHAT
	case $1 in
	*"$2"*) fail "$3: '$2' unexpectedly found in: $(printf '%s' "$1" | head -c 2000)" ;;
	esac
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# ---------------------------------------------------------------- cleanup

# Pids of processes (other than us) whose command line or cwd mentions the
# temp dir, whose command line carries one of our markers, or that descend
# from a process we started.
stray_pids() {
	E2E_T="$T" E2E_MARKERS="$(printf '%s\n' "${MARKERS[@]+"${MARKERS[@]}"}")" \
	    E2E_SELF="$$ ${BASHPID:-}" E2E_SHELL="$$" \
	    E2E_ROOTS="$(for r in "${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}"; do
		printf '%s:%s ' "$r" "${PID_START[$r]:-}"; done)" "$PY" - <<'EOF'
import os
t = os.environ["E2E_T"]
marks = [m for m in os.environ["E2E_MARKERS"].split("\n") if m]
skip = set(os.environ["E2E_SELF"].split()) | {str(os.getpid()), str(os.getppid())}
parent = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            with open("/proc/%s/stat" % p, "rb") as f:
                parent[p] = f.read().rsplit(b")", 1)[1].split()[1].decode()
        except (OSError, IndexError):
            pass
# A root counts only while its pid is still the process this test started
# (same start time): once it is gone, its number may be another test's.
def start_of(p):
    try:
        with open("/proc/%s/stat" % p, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None
roots = set()
for r in os.environ["E2E_ROOTS"].split():
    pid, _, start = r.partition(":")
    if start and start_of(pid) == start:
        roots.add(pid)
    elif not start and parent.get(pid) == os.environ["E2E_SHELL"]:
        roots.add(pid)  # a child of the test's shell, started with &
def descends(p):
    seen = set()
    while p in parent and p not in seen and p not in ("0", "1"):
        if p in roots:
            return True
        seen.add(p)
        p = parent[p]
    return False
for p in os.listdir("/proc"):
    if not p.isdigit() or p in skip:
        continue
    if descends(p):
        print(p)
        continue
    try:
        with open("/proc/%s/cmdline" % p, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        continue
    try:
        cwd = os.readlink("/proc/%s/cwd" % p)
    except OSError:
        cwd = ""
    if t in cmd or cwd == t or cwd.startswith(t + "/") or any(m in cmd for m in marks):
        print(p)
EOF
}

alive() { kill -0 "$1" 2>/dev/null; }

# pid_start PID: the process's start time in clock ticks since boot (field
# 22 of /proc/PID/stat), empty when there is no such process.
pid_start() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	echo "${20:-}"
}

# ours PID: PID is still the process this test started (not a later one
# that reuses its number: tests run side by side, and a signal to a reused
# pid, or to its process group, would reach another test). A pid spawn
# recorded must have the same start time; one a test added itself must
# still be this shell's child.
ours() {
	local now
	now=$(pid_start "$1")
	[ -n "$now" ] || return 1
	if [ -n "${PID_START[$1]:-}" ]; then
		[ "$now" = "${PID_START[$1]}" ]
	else
		[ "$(awk '{ print $4 }' "/proc/$1/stat" 2>/dev/null)" = "$$" ]
	fi
}

cleanup() {
	local rc=$? pid i left
	trap - EXIT INT TERM
	set +e
	if [ ${#SOFT_FAILS[@]} -gt 0 ]; then
		printf 'FAIL [%s]: %s\n' "$TEST_NAME" "${SOFT_FAILS[@]}" >&2
		case $rc in 0 | "$E2E_EXIT_SKIP") rc=1 ;; esac
	fi
	local before mine=() all=("${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}")
	# Only the processes still ours (see ours): the others are gone, and
	# their numbers may belong to another test's processes now.
	for pid in "${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}"; do
		ours "$pid" && mine+=("$pid")
	done
	STARTED_PIDS=("${mine[@]+"${mine[@]}"}")
	before=$(stray_pids)
	for pid in "${mine[@]+"${mine[@]}"}"; do
		kill -TERM -- "-$pid" 2>/dev/null
		kill -TERM "$pid" 2>/dev/null
	done
	for ((i = 0; i < 50; i++)); do
		left=0
		for pid in "${mine[@]+"${mine[@]}"}"; do
			ours "$pid" && left=1
		done
		[ $left = 0 ] && break
		sleep 0.1
	done
	for pid in "${mine[@]+"${mine[@]}"}"; do
		ours "$pid" || continue
		kill -KILL -- "-$pid" 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
	done
	for pid in $before; do
		kill -KILL "$pid" 2>/dev/null
	done
	# What is still there (a child forked meanwhile): at most 3 rounds,
	# until a look finds nothing of the test's (a process only appears by
	# a fork of one that a look would have found).
	for ((i = 0; i < 3; i++)); do
		left=$(stray_pids)
		[ -n "$left" ] || break
		for pid in $left; do
			kill -KILL "$pid" 2>/dev/null
		done
		sleep 0.2
	done
	# A daemon that crashed (now or at any time during the test) fails it:
	# SIGTERM must end them cleanly, and nothing may abort or fault. (wait
	# knows this shell's children only, so a reused pid is no risk here.)
	STARTED_PIDS=("${all[@]+"${all[@]}"}")
	local st
	for pid in "${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}"; do
		wait "$pid" 2>/dev/null
		st=$?
		case $st in
		132 | 134 | 135 | 136 | 139)
			echo "FAIL [$TEST_NAME]: process $pid (${PID_WHAT[$pid]:-?}) crashed: signal $((st - 128))" >&2
			# Its last words (a library's panic, glibc's "double
			# free") are in its log, which goes with $T.
			if [ -f "${PID_LOG[$pid]:-}" ]; then
				echo "----- the last 25 lines of $(basename "${PID_LOG[$pid]}")" >&2
				tail -n 25 "${PID_LOG[$pid]}" >&2
			fi
			case $rc in 0 | "$E2E_EXIT_SKIP") rc=1 ;; esac ;;
		esac
	done
	wait 2>/dev/null
	# Under SANITIZE=1 builds: any sanitizer report in a daemon's log fails.
	local f
	for f in $(find "$T" -name '*.log' -type f 2>/dev/null); do
		if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' "$f"; then
			echo "FAIL [$TEST_NAME]: sanitizer report in $(basename "$f"):" >&2
			grep -m 3 -A 12 -E 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' "$f" >&2
			case $rc in 0 | "$E2E_EXIT_SKIP") rc=1 ;; esac
		fi
	done
	# What an agent killed by a signal left mounted under $T (its root
	# templates, read-only binds of the host): unmounted, deepest first,
	# before anything is removed.
	local m
	for m in $(awk -v t="$T/" 'index($5, t) == 1 {print $5}' \
	    /proc/self/mountinfo 2>/dev/null | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	if [ -n "${E2E_KEEP:-}" ]; then
		echo "kept $T" >&2
	else
		rm -rf "$T"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# spawn LOGFILE CMD...: start CMD in its own session (so its whole process
# group can be killed), output appended to LOGFILE; sets SPAWNED_PID.
spawn() {
	local logf=$1
	shift
	setsid "$@" >>"$logf" 2>&1 </dev/null &
	SPAWNED_PID=$!
	PID_START[$SPAWNED_PID]=$(pid_start "$SPAWNED_PID")
	PID_WHAT[$SPAWNED_PID]="$(basename "$1") $2 (log $(basename "$logf"))"
	PID_LOG[$SPAWNED_PID]=$logf
	STARTED_PIDS+=("$SPAWNED_PID")
}

# wait_exit PID [SECONDS]: bounded wait for a process to be gone.
wait_exit() {
	local pid=$1 deadline=$((SECONDS + ${2:-$WAIT_S}))
	while alive "$pid"; do
		# a zombie (exited, not yet reaped) still answers kill -0
		grep -q '^State:.*[RSDTtI]' "/proc/$pid/status" 2>/dev/null ||
		    return 0
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.1
	done
	return 0
}

# ---------------------------------------------------------------- ports, markers

free_port() {
	"$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# new_marker: a unique string to tag a job's processes with; sets MARK.
# Jobs tag processes with `bash -c "exec -a $MARK sleep N"` (argv[0] = MARK).
MARK_SEQ=0
new_marker() {
	MARK_SEQ=$((MARK_SEQ + 1))
	MARK="gpmark-$$-$RANDOM-$MARK_SEQ"
	MARKERS+=("$MARK")
}

# count_cmdline MARK: processes whose command line contains MARK.
# count_argv0 MARK: processes whose argv[0] is exactly MARK.
# (The string is passed through the environment so the counter itself is not
# counted.)
count_procs() { # MODE MARK
	E2E_MODE=$1 E2E_MARK=$2 "$PY" - <<'EOF'
import os
mode, mark = os.environ["E2E_MODE"], os.environ["E2E_MARK"]
n = 0
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        with open("/proc/%s/cmdline" % p, "rb") as f:
            argv = f.read().split(b"\0")
        with open("/proc/%s/stat" % p, "rb") as f:
            st = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        continue
    if st in (b"Z", b"X"):
        continue
    argv = [a.decode("utf-8", "replace") for a in argv]
    if mode == "argv0":
        n += bool(argv) and argv[0] == mark
    else:
        n += any(mark in a for a in argv)
print(n)
EOF
}
count_cmdline() { count_procs cmdline "$1"; }
count_argv0() { count_procs argv0 "$1"; }

# wait_count argv0|cmdline MARK N [SECONDS]: until exactly N such processes.
wait_count() {
	local mode=$1 mark=$2 want=$3 deadline=$((SECONDS + ${4:-$WAIT_S})) n
	while :; do
		n=$(count_procs "$mode" "$mark")
		[ "$n" = "$want" ] && return 0
		[ $SECONDS -ge $deadline ] && fail "wanted $want process(es) with $mode '$mark', still $n after ${4:-$WAIT_S}s"
		sleep 0.2
	done
}

# ---------------------------------------------------------------- JSON, HTTP

# json EXPR: reads JSON on stdin, prints the Python expression EXPR evaluated
# with the document bound to `d` (null/true/false spelled as in JSON, strings
# bare, other values as JSON). Prints JSON-ERROR and fails (status 3) when
# stdin is not JSON.
json() {
	"$PY" -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print("JSON-ERROR"); sys.exit(3)
v = eval(sys.argv[1])
if v is None: print("null")
elif v is True: print("true")
elif v is False: print("false")
elif isinstance(v, str): print(v)
else: print(json.dumps(v))' "$1"
}

coord_url() { echo "$COORD_SCHEME://127.0.0.1:$COORD_PORT"; }

CURL_TLS=()
# api TOKEN METHOD PATH [BODY|@FILE] [extra curl args...]: one HTTP call;
# sets API_STATUS (000 when no answer), API_BODY, API_HEADERS (file).
# TOKEN "-" sends no Authorization header.
api() {
	local tok=$1 method=$2 path=$3
	shift 3
	local args=(-sS -o "$T/api.body" -D "$T/api.headers" -w '%{http_code}'
	    -X "$method" --max-time 40 "${CURL_TLS[@]+"${CURL_TLS[@]}"}")
	[ "$tok" != "-" ] && args+=(-H "Authorization: Bearer $tok")
	if [ $# -gt 0 ]; then
		args+=(-H 'Content-Type: application/json' --data-binary "$1")
		shift
	fi
	: >"$T/api.body"
	API_STATUS=$(curl "${args[@]}" "$@" "$(coord_url)$path" 2>"$T/api.err")
	API_BODY=$(cat "$T/api.body")
	API_HEADERS="$T/api.headers"
}

# api_expect STATUS TOKEN METHOD PATH [BODY] ...: the call must answer STATUS.
api_expect() {
	local want=$1
	shift
	api "$@"
	[ "$API_STATUS" = "$want" ] ||
	    fail "$2 $3: expected HTTP $want, got $API_STATUS: $API_BODY"
}

# error_body_ok: API_BODY must be a JSON object with a non-empty "error" string.
assert_error_body() { # WHAT
	local e
	e=$(printf '%s' "$API_BODY" | json 'd["error"] if isinstance(d, dict) and isinstance(d.get("error"), str) else "NO-ERROR-FIELD"')
	[ -n "$e" ] && [ "$e" != "NO-ERROR-FIELD" ] && [ "$e" != "JSON-ERROR" ] ||
	    fail "$1: error body is not {\"error\": \"...\"}: $API_BODY"
}

# ---------------------------------------------------------------- coordinator

# coord_db_args: the store the coordinator is started on, by GP_TEST_DB:
# unset or "sqlite", the default (DATA/state.db); "postgresql", a
# PostgreSQL of the test's own (tests/e2e/pg_lib.sh), started with the
# first coordinator and stopped by the test's cleanup, or the database
# GP_TEST_PG_URL names. Sets COORD_DB_ARGS.
COORD_DB_ARGS=()
coord_db_args() {
	case ${GP_TEST_DB:-sqlite} in
	sqlite)
		COORD_DB_ARGS=() ;;
	postgresql)
		# GP_TEST_PG_URL: a database made for this test on a server
		# that outlives it (test_pg_suite.sh: one server for many).
		if [ -n "${GP_TEST_PG_URL:-}" ]; then
			COORD_DB_ARGS=(--db "$GP_TEST_PG_URL")
			return
		fi
		[ -n "${PG_LIB_LOADED:-}" ] ||
		    . "$(dirname "${BASH_SOURCE[0]}")/pg_lib.sh"
		pg_running || pg_start
		COORD_DB_ARGS=(--db "$(pg_url)") ;;
	*)
		fail "GP_TEST_DB=$GP_TEST_DB: not sqlite or postgresql" ;;
	esac
}

# start_coordinator [extra flags]: starts (or restarts, on the same port and
# data dir) the coordinator and waits until it serves. Sets ADMIN_TOKEN and
# exports GPUPOOL_URL / GPUPOOL_TOKEN (admin) for the CLI.
start_coordinator() {
	[ $# -gt 0 ] && COORD_EXTRA_ARGS=("$@")
	[ -n "$COORD_PORT" ] || COORD_PORT=$(free_port)
	mkdir -p "$COORD_DATA"
	coord_db_args
	spawn "$COORD_LOG" "$GP" coordinator --listen "127.0.0.1:$COORD_PORT" \
	    --data "$COORD_DATA" --lease-ms 2000 --heartbeat-ms 300 \
	    "${COORD_DB_ARGS[@]+"${COORD_DB_ARGS[@]}"}" \
	    "${COORD_TLS_ARGS[@]+"${COORD_TLS_ARGS[@]}"}" \
	    "${COORD_EXTRA_ARGS[@]+"${COORD_EXTRA_ARGS[@]}"}" -v
	COORD_PID=$SPAWNED_PID
	wait_ready
}

wait_ready() {
	local deadline=$((SECONDS + WAIT_S))
	while [ ! -s "$COORD_DATA/admin.token" ]; do
		alive "$COORD_PID" || fail "coordinator exited before writing admin.token"
		[ $SECONDS -ge $deadline ] && fail "no $COORD_DATA/admin.token after ${WAIT_S}s"
		sleep 0.1
	done
	ADMIN_TOKEN=$(tr -d ' \r\n' <"$COORD_DATA/admin.token")
	while :; do
		api "$ADMIN_TOKEN" GET /v1/whoami
		[ "$API_STATUS" = 200 ] && break
		alive "$COORD_PID" || fail "coordinator exited while starting"
		[ $SECONDS -ge $deadline ] && fail "coordinator not ready after ${WAIT_S}s (last HTTP $API_STATUS)"
		sleep 0.1
	done
	export GPUPOOL_URL GPUPOOL_TOKEN
	GPUPOOL_URL=$(coord_url)
	GPUPOOL_TOKEN=$ADMIN_TOKEN
}

# kill9_coordinator: SIGKILL, and wait until it is gone.
kill9_coordinator() {
	kill -KILL "$COORD_PID" 2>/dev/null
	wait_exit "$COORD_PID" || fail "coordinator $COORD_PID survived SIGKILL"
}

# mk_token ROLE NAME: creates a token through the API; sets TOKEN.
mk_token() {
	api_expect 201 "$ADMIN_TOKEN" POST /v1/tokens "{\"role\":\"$1\",\"name\":\"$2\"}"
	TOKEN=$(printf '%s' "$API_BODY" | json 'd["token"]')
	[ -n "$TOKEN" ] && [ "$TOKEN" != "JSON-ERROR" ] || fail "mk_token: no token in $API_BODY"
}

# ---------------------------------------------------------------- agents

# start_agent NAME NGPUS [extra agent flags]: starts an agent with NGPUS fake
# GPUs (NGPUS may be "N:MODEL:MEM") that runs jobs as nobody. Uses the
# provider token file $T/NAME.token, created (role provider, name prov-NAME)
# the first time, so a restart of the same agent reuses its token.
start_agent() {
	local name=$1 gpus=$2
	shift 2
	if [ ! -s "$T/$name.token" ]; then
		mk_token provider "prov-$name"
		(umask 077 && printf '%s\n' "$TOKEN" >"$T/$name.token")
	fi
	local ca=() coord=(--coordinator "$(coord_url)") a
	[ "$COORD_SCHEME" = https ] && ca=(--ca "$CA_CERT")
	# A --coordinator of the caller's replaces this pool's (a repeated
	# --coordinator adds a URL to follow: it would be tried first).
	for a in "$@"; do
		[ "$a" = --coordinator ] && coord=()
	done
	spawn "$T/agent-$name.log" "$GP" agent "${coord[@]+"${coord[@]}"}" \
	    --token-file "$T/$name.token" --name "$name" \
	    --work "$T/agents/$name" --fake-gpus "$gpus" --run-as nobody \
	    "${ca[@]+"${ca[@]}"}" -v "$@"
	AGENT_PID[$name]=$SPAWNED_PID
}

kill9_agent() { # NAME
	kill -KILL "${AGENT_PID[$1]}" 2>/dev/null
	wait_exit "${AGENT_PID[$1]}" || fail "agent $1 survived SIGKILL"
}

# gated_job_cmd: a job command that runs until the test lets it end (a file
# `go` appears in its work directory, see release_job), at most 120 s: a
# job that must still be running at some point waits for a condition, not
# for a time the machine may take longer than.
# one_refused_heartbeat PROXY_LOG AGENT_LOG MESSAGE WHAT: an agent behind
# tests/e2e/old_coordinator.py, whose refusal of a new heartbeat field the
# agent logged as MESSAGE, had exactly one heartbeat refused (400) and
# then goes on with accepted ones (200).
one_refused_heartbeat() {
	local plog=$1 alog=$2 message=$3 what=$4 refused ok_before deadline
	deadline=$((SECONDS + WAIT_S))
	until grep -q "$message" "$alog"; do
		[ $SECONDS -ge $deadline ] && fail "the agent never sent (or never heard the refusal of) its $what"
		sleep 0.2
	done
	refused=$(grep -c "POST /v1/agent/heartbeat 400" "$plog")
	ok_before=$(grep -c "POST /v1/agent/heartbeat 200" "$plog")
	deadline=$((SECONDS + WAIT_S))
	until [ "$(grep -c "POST /v1/agent/heartbeat 200" "$plog")" -ge $((ok_before + 3)) ]; do
		[ $SECONDS -ge $deadline ] && fail "no accepted heartbeats after the refusal"
		sleep 0.2
	done
	assert_eq "$refused" "$(grep -c "POST /v1/agent/heartbeat 400" "$plog")" \
	    "heartbeats refused (only the first with the $what)"
	assert_eq 1 "$refused" "heartbeats refused"
}

gated_job_cmd() {
	echo 'i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done; [ -e go ]'
}

# release_job AGENT JOB [ATTEMPT]: lets a gated_job_cmd job on AGENT end
# (exit 0).
release_job() {
	local dir="$T/agents/$1/jobs/$2-${3:-1}"
	[ -d "$dir" ] || fail "no work directory $dir for job $2"
	touch "$dir/go"
}

# end_jobs_while_coordinator_stopped AGENT N: N one-GPU jobs run on AGENT
# and end while the coordinator is stopped (SIGSTOP), so that their
# reports are all due at once when it runs again; then every job must end
# succeeded. The jobs are gated (gated_job_cmd): they are all running
# before the stop however slow the machine, and end only after it. Needs a
# lease longer than the pause (--lease-ms 60000).
end_jobs_while_coordinator_stopped() {
	local agent=$1 n=$2 i j deadline jobs=()
	for ((i = 0; i < n; i++)); do
		submit --gpus 1 -- sh -c "$(gated_job_cmd)"
		jobs+=("$JOB")
	done
	for j in "${jobs[@]}"; do wait_state "$j" running; done
	kill -STOP "$COORD_PID"
	for j in "${jobs[@]}"; do release_job "$agent" "$j"; done
	deadline=$((SECONDS + WAIT_S))
	until [ "$(grep -c 'job finished job=' "$T/agent-$agent.log")" -ge "$n" ]; do
		if [ $SECONDS -ge $deadline ]; then
			kill -CONT "$COORD_PID"
			fail "the jobs did not end: $(tail -n 5 "$T/agent-$agent.log")"
		fi
		sleep 0.2
	done
	kill -CONT "$COORD_PID"
	for j in "${jobs[@]}"; do
		wait_final "$j"
		assert_eq succeeded "$FINAL_STATE" "job $j"
	done
	ENDED_JOBS=("${jobs[@]}")
}

# node_state NAME: prints the node's state ("missing" when not listed).
node_state() {
	api "$ADMIN_TOKEN" GET /v1/nodes
	[ "$API_STATUS" = 200 ] || { echo "http-$API_STATUS"; return; }
	printf '%s' "$API_BODY" | E2E_NODE=$1 json \
	    '([n["state"] for n in d["nodes"] if n["name"] == __import__("os").environ["E2E_NODE"]] + ["missing"])[0]'
}

wait_node_state() { # NAME STATE [SECONDS]
	local deadline=$((SECONDS + ${3:-$WAIT_S})) s
	while :; do
		s=$(node_state "$1")
		[ "$s" = "$2" ] && return 0
		if [ "$2" = up ] && [ -n "${AGENT_PID[$1]:-}" ] && ! alive "${AGENT_PID[$1]}"; then
			fail "agent $1 exited while waiting for its node to be up"
		fi
		[ $SECONDS -ge $deadline ] && fail "node $1 not $2 after ${3:-$WAIT_S}s (state $s)"
		sleep 0.1
	done
}
wait_node_up() { wait_node_state "$1" up "${2:-$WAIT_S}"; }

# ---------------------------------------------------------------- jobs

# cli ARGS...: runs the CLI; sets CLI_RC, CLI_OUT, CLI_ERR.
cli() {
	"$GP" "$@" >"$T/cli.out" 2>"$T/cli.err" </dev/null
	CLI_RC=$?
	CLI_OUT=$(cat "$T/cli.out")
	CLI_ERR=$(cat "$T/cli.err")
}

# submit ARGS...: `gpupool submit ARGS`, which must succeed and print only
# the job id; sets JOB.
submit() {
	cli submit "$@"
	[ "$CLI_RC" = 0 ] || fail "submit $* exited $CLI_RC: $CLI_ERR $CLI_OUT"
	JOB=$(printf '%s' "$CLI_OUT" | tr -d '[:space:]')
	is_uint "$JOB" && [ "$JOB" -gt 0 ] ||
	    fail "submit printed '$CLI_OUT', not just a job id"
}

# job_get JOB EXPR: GET /v1/jobs/JOB as admin and evaluate EXPR (see json).
job_get() {
	api "$ADMIN_TOKEN" GET "/v1/jobs/$1"
	if [ "$API_STATUS" != 200 ]; then
		echo "http-$API_STATUS"
		return
	fi
	printf '%s' "$API_BODY" | json "$2"
}
job_state() { job_get "$1" 'd["state"]'; }

# wait_state JOB STATE [SECONDS]: bounded poll until the job is in STATE;
# fails at once when it reaches a different final state.
wait_state() {
	local job=$1 want=$2 deadline=$((SECONDS + ${3:-$WAIT_S})) s
	while :; do
		s=$(job_state "$job")
		[ "$s" = "$want" ] && return 0
		case $s in
		succeeded | failed | cancelled | timeout)
			fail "job $job ended $s, wanted $want: $(job_get "$job" d)" ;;
		esac
		[ $SECONDS -ge $deadline ] && fail "job $job not $want after ${3:-$WAIT_S}s (state $s)"
		sleep 0.1
	done
}

# wait_final JOB [SECONDS]: until the job has finished; sets FINAL_STATE.
wait_final() {
	local job=$1 deadline=$((SECONDS + ${2:-$WAIT_S}))
	while :; do
		FINAL_STATE=$(job_state "$job")
		case $FINAL_STATE in
		succeeded | failed | cancelled | timeout) return 0 ;;
		esac
		[ $SECONDS -ge $deadline ] && fail "job $job not finished after ${2:-$WAIT_S}s (state $FINAL_STATE)"
		sleep 0.2
	done
}

# job_log JOB: the whole log through the API (as admin); sets LOG.
job_log() {
	api "$ADMIN_TOKEN" GET "/v1/jobs/$1/log?offset=0"
	[ "$API_STATUS" = 200 ] || fail "log of job $1: HTTP $API_STATUS $API_BODY"
	LOG=$API_BODY
}

# ---------------------------------------------------------------- several pools

# save_pool NAME / use_pool NAME: remember and switch between independent
# pools (each its own coordinator, port and data dir) in one test. After
# save_pool, set COORD_PORT= and COORD_DATA=DIR and call start_coordinator
# to make another.
declare -A POOLS=()
save_pool() {
	POOLS[$1]="$COORD_PORT|$COORD_DATA|$COORD_PID|$ADMIN_TOKEN|$COORD_LOG"
}
use_pool() {
	IFS='|' read -r COORD_PORT COORD_DATA COORD_PID ADMIN_TOKEN COORD_LOG <<<"${POOLS[$1]}"
	GPUPOOL_URL=$(coord_url)
	GPUPOOL_TOKEN=$ADMIN_TOKEN
}

# ---------------------------------------------------------------- network namespaces
#
# For partition tests: a network namespace joined to the host by a veth pair
# on 10.213.X.0/30, the host end 10.213.X.1, the namespace end 10.213.X.2
# (plus `lo`, up). X is picked per pair, under a lock, among the /24s no
# host interface uses yet (starting from $$ % 256), so tests running side by
# side never share one. Names carry the test's pid: namespace
# gpe2e-<pid>-<n>, host interface gpe<pid>n<n>; the namespace end is `veth0`.
# The namespace has no other route: from inside, only 10.213.X.1 (and its own
# loopback) can be reached, and the host does not forward.
#
#   netns_available            0 when namespaces can be made here (root,
#                              `ip`, `nsenter`, `flock`), else 1 with
#                              NETNS_WHY set: a test may skip on it
#   netns_create NAME          makes one; sets NETNS (the `ip netns` name),
#                              NETNS_VETH (host interface), NETNS_HOST_IP,
#                              NETNS_PEER_IP
#   netns_use NAME             sets those four again for NAME
#   netns_exec NAME CMD...     runs CMD inside, in the foreground; its status
#   netns_spawn NAME LOG CMD...  starts CMD inside in the background, in its
#                              own session, output appended to LOG, killed by
#                              cleanup like any spawned process; sets
#                              SPAWNED_PID (CMD's own pid)
#   netns_start_agent NAME AGENT NGPUS [flags]  start_agent, but inside NAME
#                              and dialing $COORD_SCHEME://HOST_IP:$COORD_PORT
#                              (sets AGENT_PID[AGENT]; kill9_agent and
#                              wait_node_up work on it)
#   netns_forward NAME         when the coordinator listens on 127.0.0.1 (as
#                              start_coordinator makes it): a TCP relay on
#                              HOST_IP:$COORD_PORT to 127.0.0.1:$COORD_PORT,
#                              so that netns_start_agent can reach it. Not
#                              needed when the coordinator itself listens on
#                              HOST_IP. (With TLS, the certificate must name
#                              HOST_IP.)
#   netns_cut NAME             partition: every packet over the pair is
#                              dropped, both ways, silently (no RST, no ICMP:
#                              TCP peers see silence, connect() hangs)
#   netns_heal NAME            undoes netns_cut
#   netns_delete NAME          removes the pair and the namespace now
#
# Processes inside are started with `nsenter --net`, not `ip netns exec`:
# the latter also remounts /sys, which hides /sys/fs/cgroup from an agent.
#
# How the link is cut: iptables and nft are not installed on the test
# machines, nor tc's netem, gact or police modules; what the kernel has is
# plain qdiscs. netns_cut makes each end's egress queue a pfifo of limit 0,
# which drops every packet it is handed (host end: host -> namespace,
# namespace end: namespace -> host; ARP included); netns_heal deletes those
# qdiscs (the veth default, noqueue, comes back). Routes and addresses are
# untouched, so sockets see a silent network, not an unreachable one.
#
# Cleanup: at exit the links are healed before `cleanup` stops the daemons
# (so that an agent's last reports fail fast instead of stalling its
# shutdown); the pairs and namespaces are removed by a small detached reaper
# that waits for the test's shell to be gone (so after cleanup, and also
# when the test is killed with SIGKILL); netns_create also removes what a
# dead test left behind.
#
# Verified by hand (not a suite test): as root, netns_create a, then
# `"$PY" -m http.server --bind "$NETNS_HOST_IP" PORT` spawned on the host;
# `netns_exec a curl -m 3 http://$NETNS_HOST_IP:PORT/` answered 200;
# after netns_cut a, the same curl timed out (exit 28) while the server
# stayed up, and `tc -s qdisc show` counted the drops on both ends; after
# netns_heal a, 200 again. netns_forward + curl through the relay to a
# server on 127.0.0.1: 200, cut: timeout, heal: 200. A real coordinator
# (start_coordinator) + netns_forward + netns_start_agent: the node came up
# (cgroups v1 seen inside), a job ran on it; netns_cut: the node went down
# after the lease and the job was requeued (node_lost); netns_heal: the node
# came back up. After the script exited (normally, on `fail`, and killed
# with SIGKILL), `ip netns list` and `ip link` showed nothing left of it.
# (The lock file ${E2E_TMPDIR:-/var/tmp}/gpe2e-netns.lock stays, empty.)

declare -A NETNS_OF=() NETNS_VETH_OF=() NETNS_HOST_IP_OF=() NETNS_PEER_IP_OF=()
NETNS='' NETNS_VETH='' NETNS_HOST_IP='' NETNS_PEER_IP='' NETNS_WHY=''
NETNS_SEQ=0
NETNS_HOOKED=

# The reaper's body (also used for leftovers of dead tests): removes the
# namespaces named $2* (killing what still runs in them) and the host
# interfaces named $3*, once the process $1 is gone ("" : at once).
# shellcheck disable=SC2016 # expanded by the bash that runs it
NETNS_PURGE_SH='
if [ -n "$1" ]; then
	while kill -0 "$1" 2>/dev/null; do sleep 0.2; done
fi
for l in $(ip -o link show | sed -n "s/^[0-9]*: \([^:@]*\).*/\1/p"); do
	case $l in "$3"*) ip link del "$l" 2>/dev/null ;; esac
done
for ns in $(ip netns list | cut -d" " -f1); do
	case $ns in
	"$2"*)
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null ;;
	esac
done'

netns_available() {
	NETNS_WHY=
	local c
	[ "$(id -u)" = 0 ] || NETNS_WHY="network namespaces need root"
	for c in ip nsenter flock tc; do
		command -v "$c" >/dev/null 2>&1 || NETNS_WHY="no $c"
	done
	[ -z "$NETNS_WHY" ]
}

# At exit: heal every link, then the usual cleanup (with the test's exit
# status: `cleanup` reads $?, which netns_on_exit returns unchanged).
netns_on_exit() {
	local rc=$? n
	for n in "${!NETNS_OF[@]}"; do
		netns_heal "$n" 2>/dev/null
	done
	return "$rc"
}

netns_hook() {
	[ -n "$NETNS_HOOKED" ] && return 0
	NETNS_HOOKED=1
	# `a || cleanup; cleanup`: cleanup runs once, with $? the test's status
	# either way (and no errexit surprise from a non-zero hook).
	trap 'netns_on_exit || cleanup; cleanup' EXIT
	setsid -f bash -c "$NETNS_PURGE_SH" gpe2e-netns-reaper "$$" \
	    "gpe2e-$$-" "gpe$$n" </dev/null >/dev/null 2>&1
}

# Leftovers of tests that died without their reaper (e.g. a reboot of the
# container): namespaces gpe2e-<pid>-* whose pid is gone.
netns_sweep() {
	local ns pid
	for ns in $(ip netns list | cut -d' ' -f1); do
		[[ $ns =~ ^gpe2e-([0-9]+)-[0-9]+$ ]] || continue
		pid=${BASH_REMATCH[1]}
		if [ "$pid" = "$$" ] || alive "$pid"; then
			continue
		fi
		bash -c "$NETNS_PURGE_SH" gpe2e-netns-sweep "" \
		    "gpe2e-$pid-" "gpe${pid}n"
	done
}

# shellcheck disable=SC2034 # globals for the test
netns_use() { # NAME
	[ -n "${NETNS_OF[$1]:-}" ] || fail "netns_use: no namespace '$1'"
	NETNS=${NETNS_OF[$1]}
	NETNS_VETH=${NETNS_VETH_OF[$1]}
	NETNS_HOST_IP=${NETNS_HOST_IP_OF[$1]}
	NETNS_PEER_IP=${NETNS_PEER_IP_OF[$1]}
}

netns_create() { # NAME
	local name=$1 ns veth x='' i fd
	[ -z "${NETNS_OF[$name]:-}" ] || fail "netns_create: '$name' exists"
	netns_available || fail "netns_create: $NETNS_WHY"
	netns_hook
	netns_sweep
	NETNS_SEQ=$((NETNS_SEQ + 1))
	ns="gpe2e-$$-$NETNS_SEQ"
	veth="gpe$$n$NETNS_SEQ"
	# Pick the /24 and put the host address on it under one lock, so that
	# two tests never pick the same.
	exec {fd}>>"${E2E_TMPDIR:-/var/tmp}/gpe2e-netns.lock"
	flock -w "$WAIT_S" "$fd" || fail "netns_create: lock busy"
	for ((i = 0; i < 256; i++)); do
		x=$((($$ + i) % 256))
		[ -z "$(ip -4 -o addr show to "10.213.$x.0/24")" ] && break
		x=
	done
	if [ -z "$x" ]; then
		exec {fd}>&-
		fail "netns_create: every 10.213.X.0/24 is in use"
	fi
	if ! { ip netns add "$ns" &&
	    ip link add "$veth" type veth peer name veth0 netns "$ns" &&
	    ip addr add "10.213.$x.1/30" dev "$veth" &&
	    ip link set "$veth" up; }; then
		exec {fd}>&-
		fail "netns_create: cannot make $ns / $veth"
	fi
	exec {fd}>&-
	if ! { ip -n "$ns" addr add "10.213.$x.2/30" dev veth0 &&
	    ip -n "$ns" link set veth0 up && ip -n "$ns" link set lo up; }; then
		fail "netns_create: cannot set up veth0 in $ns"
	fi
	NETNS_OF[$name]=$ns
	NETNS_VETH_OF[$name]=$veth
	NETNS_HOST_IP_OF[$name]="10.213.$x.1"
	NETNS_PEER_IP_OF[$name]="10.213.$x.2"
	netns_use "$name"
	log "netns $name: $ns, host $veth 10.213.$x.1 <-> veth0 10.213.$x.2"
}

netns_exec() { # NAME CMD...
	local ns=${NETNS_OF[$1]:?netns_exec: no namespace $1}
	shift
	nsenter --net="/run/netns/$ns" "$@"
}

netns_spawn() { # NAME LOGFILE CMD...
	local name=$1 ns=${NETNS_OF[$1]:?netns_spawn: no namespace $1} logf=$2
	shift 2
	spawn "$logf" nsenter --net="/run/netns/$ns" "$@"
	PID_WHAT[$SPAWNED_PID]="$(basename "$1") ${2:-} in netns $name (log $(basename "$logf"))"
}

netns_cut() { # NAME
	local ns=${NETNS_OF[$1]:?netns_cut: no namespace $1}
	if ! { tc qdisc replace dev "${NETNS_VETH_OF[$1]}" root pfifo limit 0 &&
	    nsenter --net="/run/netns/$ns" tc qdisc replace dev veth0 root \
	        pfifo limit 0; }; then
		fail "netns_cut $1: tc failed"
	fi
	log "netns $1: link cut"
}

netns_heal() { # NAME
	local ns=${NETNS_OF[$1]:?netns_heal: no namespace $1}
	tc qdisc del dev "${NETNS_VETH_OF[$1]}" root 2>/dev/null
	nsenter --net="/run/netns/$ns" tc qdisc del dev veth0 root 2>/dev/null
	# Either way (cut or not), neither end may drop now.
	if tc qdisc show dev "${NETNS_VETH_OF[$1]}" | grep -q pfifo ||
	    nsenter --net="/run/netns/$ns" tc qdisc show dev veth0 |
	    grep -q pfifo; then
		echo "netns_heal $1: a drop qdisc is still there" >&2
		return 1
	fi
	log "netns $1: link healed"
	return 0
}

netns_delete() { # NAME
	local ns=${NETNS_OF[$1]:?netns_delete: no namespace $1}
	bash -c "$NETNS_PURGE_SH" gpe2e-netns-delete "" "$ns" \
	    "${NETNS_VETH_OF[$1]}"
	unset "NETNS_OF[$1]" "NETNS_VETH_OF[$1]" "NETNS_HOST_IP_OF[$1]" \
	    "NETNS_PEER_IP_OF[$1]"
}

# The relay of netns_forward: accepts on argv[1]:argv[2], connects each
# client to 127.0.0.1:argv[3], copies both ways (half-closes passed on).
NETNS_RELAY_PY='
import socket, sys, threading
host, port, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
to = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((host, port))
srv.listen(128)
print("relay listening %s:%d -> %s:%d" % (host, port, to, target), flush=True)
def copy(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    try:
        u = socket.create_connection((to, target), timeout=10)
        u.settimeout(None)
    except OSError:
        c.close()
        return
    t = threading.Thread(target=copy, args=(u, c), daemon=True)
    t.start()
    copy(c, u)
    t.join()
    c.close()
    u.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'

netns_forward() { # NAME
	local name=$1 deadline=$((SECONDS + WAIT_S)) logf="$T/relay-$1.log"
	netns_use "$name"
	[ -n "$COORD_PORT" ] || fail "netns_forward: start the coordinator first"
	spawn "$logf" "$PY" -c "$NETNS_RELAY_PY" "$NETNS_HOST_IP" \
	    "$COORD_PORT" "$COORD_PORT"
	PID_WHAT[$SPAWNED_PID]="relay $NETNS_HOST_IP:$COORD_PORT (log $(basename "$logf"))"
	until grep -q '^relay listening' "$logf" 2>/dev/null; do
		alive "$SPAWNED_PID" || fail "netns_forward: relay exited: $(cat "$logf")"
		[ $SECONDS -ge $deadline ] && fail "netns_forward: relay not listening after ${WAIT_S}s"
		sleep 0.1
	done
}

# browser_netns PORT...: a network namespace for a browser test. Chromium
# aborts every navigation in flight (net::ERR_NETWORK_CHANGED) when this
# host's interfaces or addresses change, and the suite's other tests (the
# agents' job networks, namespaces, overlays) change them all the time:
# test_interactive_proxy_tls failed 2 runs in 4 of the interactive tests
# side by side, three navigations in a row aborted. In the namespace
# nothing changes (its lo, and a veth to this host made once). Each PORT
# of its 127.0.0.1 reaches this host's 127.0.0.1:PORT through two relays
# (one in the namespace, one on the host's end of the veth), so that the
# browser's URLs, and the certificates' names and cookies with them, stay
# as they are. Sets BROWSER_NS, a command prefix that runs in it; where
# namespaces cannot be made it stays empty and the browser runs here, as
# before (said).
browser_netns() {
	local p logf deadline where
	BROWSER_NS=()
	if ! netns_available; then
		log "the browser runs on this host's network: $NETNS_WHY"
		return 0
	fi
	netns_create browser
	# No IPv6 on its link: its address's duplicate detection ends a
	# second or two after the link is up, and Chromium takes that event
	# for a network change and aborts what it is loading
	# (net::ERR_NETWORK_CHANGED: test_interactive_proxy_tls under ASan).
	ip netns exec "${NETNS_OF[browser]}" sysctl -qw \
	    net.ipv6.conf.default.disable_ipv6=1 \
	    net.ipv6.conf.veth0.disable_ipv6=1 >/dev/null 2>&1 ||
	    log "browser_netns: IPv6 stays on its link (sysctl failed)"
	for p in "$@"; do
		for where in host inside; do
			logf="$T/relay-browser-$where-$p.log"
			if [ $where = host ]; then
				spawn "$logf" "$PY" -c "$NETNS_RELAY_PY" \
				    "$NETNS_HOST_IP" "$p" "$p"
			else
				netns_spawn browser "$logf" "$PY" -c \
				    "$NETNS_RELAY_PY" 127.0.0.1 "$p" "$p" \
				    "$NETNS_HOST_IP"
			fi
			PID_WHAT[$SPAWNED_PID]="relay $where $p (log $(basename "$logf"))"
			deadline=$((SECONDS + WAIT_S))
			until grep -q '^relay listening' "$logf" 2>/dev/null; do
				alive "$SPAWNED_PID" || fail "browser_netns: relay exited: $(cat "$logf")"
				[ $SECONDS -ge $deadline ] && fail "browser_netns: relay not listening after ${WAIT_S}s"
				sleep 0.1
			done
		done
	done
	BROWSER_NS=(nsenter --net="/run/netns/${NETNS_OF[browser]}")
}

netns_start_agent() { # NAME AGENT NGPUS [extra agent flags]
	local name=$1 agent=$2 gpus=$3
	shift 3
	netns_use "$name"
	if [ ! -s "$T/$agent.token" ]; then
		mk_token provider "prov-$agent"
		(umask 077 && printf '%s\n' "$TOKEN" >"$T/$agent.token")
	fi
	local ca=()
	[ "$COORD_SCHEME" = https ] && ca=(--ca "$CA_CERT")
	netns_spawn "$name" "$T/agent-$agent.log" "$GP" agent \
	    --coordinator "$COORD_SCHEME://$NETNS_HOST_IP:$COORD_PORT" \
	    --token-file "$T/$agent.token" --name "$agent" \
	    --work "$T/agents/$agent" --fake-gpus "$gpus" --run-as nobody \
	    "${ca[@]+"${ca[@]}"}" -v "$@"
	AGENT_PID[$agent]=$SPAWNED_PID
}
