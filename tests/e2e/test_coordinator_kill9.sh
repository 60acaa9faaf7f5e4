# Proves the coordinator's durability: every job id the CLI printed survives a
# kill -9 of the coordinator (50 submissions, partly concurrent) and all of
# them run to completion after a restart on the same data dir; and jobs that
# were running when the coordinator died keep running, finish while the
# coordinator is down, and end with the right exit code, their full log and
# a single attempt once the coordinator is back (the agent keeps its reports
# until delivered; they are never run a second time).
. "$(dirname "$0")/lib.sh"

start_coordinator
start_agent alpha 6 --cpus 8
wait_node_up alpha

# R1..R3: print, sleep (tagged with a marker), print again, exit 7, 8, 9.
new_marker
mr=$MARK
rs=()
for code in 7 8 9; do
	submit --gpus 1 --name "survivor$code" -- sh -c 'echo start-R; bash -c "exec -a $0 sleep 8"; echo end-R; exit $1' "$mr" "$code"
	rs+=("$JOB")
done
# B: holds the other three GPUs, so that 4-GPU jobs cannot run yet.
new_marker
mb=$MARK
submit --gpus 3 --name blocker -- bash -c 'exec -a "$0" sleep 300' "$mb"
jb=$JOB
for r in "${rs[@]}"; do
	wait_state "$r" running
done
wait_state "$jb" running
wait_count argv0 "$mr" 3

# 50 jobs, five submitters in parallel; keep exactly the ids the CLI printed.
submitters=()
for w in 1 2 3 4 5; do
	(
		for i in $(seq 1 10); do
			out=$("$GP" submit --gpus 4 --name "k$w-$i" -- echo "job-$w-$i" 2>>"$T/submit-$w.err") &&
			    echo "$out $w-$i"
		done >"$T/ids-$w"
	) &
	submitters+=($!)
done
# (only these: a bare `wait` would wait for the daemons too)
wait "${submitters[@]}"
cat "$T"/ids-? >"$T/ids"
acked=$(wc -l <"$T/ids")
assert_eq 50 "$acked" "acknowledged submissions ($(cat "$T"/submit-?.err))"
while read -r id tag; do
	is_uint "$id" || fail "submit printed '$id'"
done <"$T/ids"
[ "$(cut -d' ' -f1 "$T/ids" | sort -u | wc -l)" = 50 ] || fail "duplicate job ids: $(cut -d' ' -f1 "$T/ids" | sort | uniq -d)"

# check_ids MODE: every job of $T/ids through the API, in one process (a
# curl and a python per call made the 50-job loops most of the test):
#   queued     each is queued with its own command ("echo job-TAG")
#   succeeded  each reaches succeeded (bounded, 60 s a job; another final
#              state fails at once), its log is its own line, 1 attempt
#   still      each is succeeded (no wait)
check_ids() {
	"$PY" - "$1" "$(coord_url)" "$ADMIN_TOKEN" "$T/ids" <<'PYEOF' ||
import json, sys, time, urllib.request
mode, base, token, ids = sys.argv[1:5]
def get(path):
    req = urllib.request.Request(base + path,
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=40) as r:
        return r.read().decode()
def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)
for line in open(ids):
    jid, tag = line.split()
    j = json.loads(get("/v1/jobs/" + jid))
    if mode == "queued":
        got = j["state"] + " " + " ".join(j["command"])
        if got != "queued echo job-" + tag:
            fail("job %s after the restart: expected 'queued echo job-%s', "
                 "got '%s'" % (jid, tag, got))
    elif mode == "still":
        if j["state"] != "succeeded":
            fail("job %s after the second restart: expected 'succeeded', "
                 "got '%s'" % (jid, j["state"]))
    else:
        deadline = time.monotonic() + 60
        while j["state"] != "succeeded":
            if j["state"] in ("failed", "cancelled", "timeout"):
                fail("job %s ended %s, wanted succeeded: %s"
                     % (jid, j["state"], json.dumps(j)))
            if time.monotonic() >= deadline:
                fail("job %s not succeeded after 60s (state %s)"
                     % (jid, j["state"]))
            time.sleep(0.1)
            j = json.loads(get("/v1/jobs/" + jid))
        log = get("/v1/jobs/%s/log?offset=0" % jid).rstrip("\n")
        if log != "job-" + tag:
            fail("log of job %s: expected 'job-%s', got '%s'" % (jid, tag, log))
        if j["attempts"] != 1:
            fail("attempts of job %s: expected '1', got '%s'"
                 % (jid, j["attempts"]))
PYEOF
	    fail "the fifty jobs ($1): see above"
}

r_alive_at_kill=$(count_argv0 "$mr")
kill9_coordinator
log "coordinator killed; Rs alive at kill: $r_alive_at_kill"

# Let the Rs finish while the coordinator is down (bounded), then restart.
wait_count argv0 "$mr" 0
start_coordinator

# every acknowledged id is there, with its command, queued (B holds three of
# the six GPUs)
check_ids queued
cli show "$(head -n1 "$T/ids" | cut -d' ' -f1)" --json
assert_eq 0 "$CLI_RC" "CLI show after the restart ($CLI_ERR)"

# the Rs: the results the agent held while the coordinator was down
code=7
for r in "${rs[@]}"; do
	# (soft: the rest of the test does not depend on these)
	wait_final "$r"
	got=$(job_get "$r" '"%s %s %s" % (d["state"], d["exit_code"], d["attempts"])')
	[ "$got" = "failed $code 1" ] ||
	    soft_fail "R$code (job $r) after the restart: (state, exit code, attempts) is '$got', not 'failed $code 1'; history: $(job_get "$r" 'd["history"]')"
	cli wait "$r"
	[ "$CLI_RC" = "$code" ] || soft_fail "gpupool wait R$code exited $CLI_RC, not $code"
	job_log "$r"
	[ "$LOG" = "$(printf 'start-R\nend-R')" ] || soft_fail "R$code's log is '$LOG'"
	code=$((code + 1))
done
assert_eq running "$(job_state "$jb")" "B after the restart"
assert_eq 1 "$(count_argv0 "$mb")" "B's processes after the restart"

# free the GPUs: all fifty run and succeed, each printing its own line
cli cancel "$jb"
assert_eq 0 "$CLI_RC" "cancel B ($CLI_ERR)"
wait_state "$jb" cancelled
check_ids succeeded

# and a second kill -9 later loses nothing finished either
kill9_coordinator
start_coordinator
check_ids still
for r in "${rs[@]}"; do
	assert_eq failed "$(job_state "$r")" "job $r after the second restart"
done
echo ok
