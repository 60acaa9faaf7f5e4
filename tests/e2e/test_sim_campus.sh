# `gpupool sim --protocol campus` on a small slice of the real traces
# (../shared/data/traces): labs whose owners come and go, pooled against
# each lab alone; the JSON has every figure docs/scheduling.md reports, the
# seed makes the run the same again, and bad options are refused. No pool:
# the simulator runs the scheduler's engine in the process.
. "$(dirname "$0")/lib.sh"

TR=$PWD/../shared/data/traces
if ! [ -r "$TR/openb_pod_list_default.csv" ] || ! [ -r "$TR/philly_runtime.csv" ]; then
	echo "SKIP test_sim_campus: needs traces: no traces in $TR"
	exit 77
fi

campus() {
	"$GP" sim --protocol campus --nodes "$TR/openb_node_list_gpu_node.csv" \
	    --jobs "$TR/openb_pod_list_default.csv" --labs 3 --lab-nodes 1 \
	    --days 3 "$@"
}

out=$(campus --pattern deadline --seed 7 --json) || fail "campus run: $out"
again=$(campus --pattern deadline --seed 7 --json) || fail "campus run again"
printf '%s' "$out" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
assert d["protocol"] == "campus" and d["pattern"] == "deadline", d
assert d["labs"] == 3 and d["nodes"] == 3 and d["gpus"] > 0, d
for side in ("pooled", "alone"):
    r = d[side]
    for k in ("util_pct", "owner_pct", "pool_pct", "jobs", "jobs_done",
              "gpu_h_done", "wait_mean_s", "wait_p90_s", "sessions",
              "sessions_1min", "lost_gpu_h", "jain"):
        assert k in r, (side, k)
    assert len(r["lab_wait_mean_s"]) == 3 and len(r["lab_done_ratio"]) == 3
    m = r["migrations"]
    assert m["count"] == m["saved"] + m["partial"] + m["restarted"], m
    assert m["count"] == m["by_owner"] + m["by_lab"], m
    assert 0 < r["jain"] <= 1 + 1e-9, r
    assert r["util_pct"] <= 100 + 1e-9, r
assert d["pooled"]["jobs"] == d["alone"]["jobs"] > 0, d
assert abs(d["pooled"]["owner_pct"] - d["alone"]["owner_pct"]) < 1e-6, d
' || fail "campus JSON: $out"
strip='import json,sys; d=json.load(sys.stdin); d.pop("seconds"); print(json.dumps(d, sort_keys=True))'
[ "$(printf '%s' "$out" | "$PY" -c "$strip")" = "$(printf '%s' "$again" | "$PY" -c "$strip")" ] ||
	fail "the same seed gave another campus"

text=$(campus --pattern office --seed 7) || fail "campus text: $text"
assert_contains "$text" "campus, pattern office, seed 7: 3 labs" "text header"
assert_contains "$text" "each lab alone: utilization" "text baseline"
assert_contains "$text" "served within a minute" "text sessions"

if err=$(campus --pattern lunar 2>&1); then fail "--pattern lunar accepted"; fi
assert_contains "$err" "--pattern: office, deadline, semester or mixed" "pattern error"
if err=$(campus --labs 0 2>&1); then fail "--labs 0 accepted"; fi
if err=$(campus --runtimes /nonexistent.csv 2>&1); then fail "missing runtimes accepted"; fi
assert_contains "$err" "/nonexistent.csv" "runtimes error"
echo ok
