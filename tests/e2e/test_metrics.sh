# Proves the Prometheus metrics (issue 7): /metrics on the coordinator
# answers only admin and metrics tokens (401 without a token, 403 for users
# and providers), a metrics token reads nothing else; both expositions are
# well formed (the strict checker promcheck.py, then Debian's
# python3-prometheus-client parser) and say what happens: the running job
# on its GPU with its owner and group as labels on the GPU's readings, the
# jobs by state, the dispatch and queue-wait histograms, a requeue when
# the agent dies, the node down; the ledger's totals (per user and
# provider with their groups, per group) grow while the job accrues and,
# once it stopped, equal what GET /v1/usage reports, both sides balanced,
# and are the same after the coordinator is killed and started again. The agent's --metrics-listen endpoint needs its
# token when given one and shows the same job on the same GPU. Last, the
# Grafana dashboard (contrib/grafana/gpupool.json) only uses metrics and
# labels that these scrapes contain.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/acct_lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
"$PY" -c 'import prometheus_client.parser' 2>/dev/null ||
    fail "python3-prometheus-client is missing (scripts/install-deps.sh)"

# scrape URL TOKEN FILE: GET URL with a bearer TOKEN ("-": none); sets
# SCRAPE_STATUS, writes the body to FILE.
scrape() {
	local auth=()
	[ "$2" != - ] && auth=(-H "Authorization: Bearer $2")
	SCRAPE_STATUS=$(curl -sS -o "$3" -w '%{http_code}' --max-time 20 \
	    "${auth[@]+"${auth[@]}"}" "$1")
}

# check_exposition FILE: strict checker, then prometheus_client.
check_exposition() {
	"$PY" "$ROOT/tests/e2e/promcheck.py" "$1" >"$T/promcheck.out" 2>&1 ||
	    fail "promcheck: $(cat "$T/promcheck.out")"
	"$PY" -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
n = sum(len(f.samples) for f in text_string_to_metric_families(open(sys.argv[1]).read()))
assert n > 0, "no samples"
' "$1" || fail "prometheus_client cannot parse $1"
}

# value FILE SAMPLE LABELS: the value of the one sample SAMPLE whose labels
# include LABELS (a Python dict literal); "none" when there is none.
value() {
	"$PY" - "$1" "$2" "$3" <<'EOF'
import ast, sys
from prometheus_client.parser import text_string_to_metric_families
path, name, want = sys.argv[1], sys.argv[2], ast.literal_eval(sys.argv[3])
hits = [s.value for f in text_string_to_metric_families(open(path).read())
        for s in f.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in want.items())]
print(repr(hits[0]) if len(hits) == 1 else ("none" if not hits else "many"))
EOF
}

# groups: alice's jobs are lab-a's, the node is lab-b's (prov-b's)
start_coordinator --accrual-interval 1s
cli group create lab-a
[ "$CLI_RC" = 0 ] || fail "group create lab-a: $CLI_ERR"
cli group create lab-b
[ "$CLI_RC" = 0 ] || fail "group create lab-b: $CLI_ERR"
acct_provider m1 prov-b lab-b
MPORT=$(free_port)
(umask 077 && printf 'gpt_agent_metrics_secret_%s\n' "$RANDOM$RANDOM" >"$T/agent-metrics.token")
start_agent m1 2:T4:16384 --metrics-listen "127.0.0.1:$MPORT" \
    --metrics-token-file "$T/agent-metrics.token"
wait_node_up m1
CM="$(coord_url)/metrics"
AM="http://127.0.0.1:$MPORT/metrics"

# --- who may read /metrics
cli token create --role metrics --name prometheus
[ "$CLI_RC" = 0 ] || fail "token create --role metrics: $CLI_ERR"
METRICS_TOKEN=$CLI_OUT
acct_token user alice lab-a
ALICE=$TOKEN
PROV=$(tr -d '\n' <"$T/m1.token")
scrape "$CM" - "$T/x"
assert_eq 401 "$SCRAPE_STATUS" "/metrics without a token"
scrape "$CM" "$ALICE" "$T/x"
assert_eq 403 "$SCRAPE_STATUS" "/metrics with a user token"
scrape "$CM" "$PROV" "$T/x"
assert_eq 403 "$SCRAPE_STATUS" "/metrics with a provider token"
scrape "$CM" "$METRICS_TOKEN" "$T/x"
assert_eq 200 "$SCRAPE_STATUS" "/metrics with a metrics token"
grep -qi '^content-type: text/plain; version=0.0.4' < <(curl -sS -D - -o /dev/null \
    -H "Authorization: Bearer $METRICS_TOKEN" "$CM") ||
    fail "/metrics Content-Type is not the text format 0.0.4"
api_expect 405 "$METRICS_TOKEN" POST /metrics '{}'
grep -qi '^Allow: GET' "$API_HEADERS" || fail "POST /metrics: no 'Allow: GET'"
# a metrics token reads nothing else
api_expect 200 "$METRICS_TOKEN" GET /v1/whoami
assert_eq metrics "$(printf '%s' "$API_BODY" | json 'd["role"]')" "whoami role"
api_expect 403 "$METRICS_TOKEN" GET /v1/jobs
api_expect 403 "$METRICS_TOKEN" GET /v1/nodes
api_expect 403 "$METRICS_TOKEN" POST /v1/jobs '{"command":["true"]}'
api_expect 403 "$METRICS_TOKEN" POST /v1/tokens '{"role":"admin","name":"x"}'
api_expect 403 "$METRICS_TOKEN" GET /v1/jobs/1/checkpoints
api_expect 403 "$METRICS_TOKEN" POST /v1/agent/heartbeat '{"node_id":1}'

# --- a running job, seen on its GPU with its owner
GPUPOOL_TOKEN=$ALICE submit --gpus 1 --name metered -- sleep 300
J=$JOB
wait_state "$J" running
node=$(job_get "$J" 'd["node"]')
gpu=$(job_get "$J" 'd["gpus"][0]')
# the agent's next heartbeat carries the busy GPU's readings
deadline=$((SECONDS + WAIT_S))
while :; do
	scrape "$CM" "$METRICS_TOKEN" "$T/coord.prom"
	assert_eq 200 "$SCRAPE_STATUS" "/metrics"
	u=$(value "$T/coord.prom" gpupool_gpu_utilization_ratio \
	    "{'node': '$node', 'gpu': '$gpu', 'job_id': '$J', 'user': 'alice', 'group': 'lab-a'}")
	[ "$u" != none ] && [ "$u" != 0.0 ] && break
	[ $SECONDS -ge $deadline ] && fail "no utilization for job $J on $node/$gpu: $(grep utilization "$T/coord.prom")"
	sleep 0.3
done
check_exposition "$T/coord.prom"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_gpu_job_info \
    "{'node': '$node', 'gpu': '$gpu', 'job_id': '$J', 'user': 'alice', 'group': 'lab-a', 'job_name': 'metered'}")" \
    "gpu_job_info of the running job"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_jobs "{'state': 'running'}")" "jobs running"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_gpu_state "{'node': '$node', 'gpu': '$gpu', 'state': 'busy'}")" "GPU state busy"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_gpus "{'state': 'busy'}")" "gpus busy"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_gpus "{'state': 'idle'}")" "gpus idle"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_nodes "{'state': 'up'}")" "nodes up"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_job_dispatch_latency_seconds_count "{}")" "dispatch latency count"
assert_eq 1.0 "$(value "$T/coord.prom" gpupool_job_queue_wait_seconds_count "{}")" "queue wait count"
t=$(value "$T/coord.prom" gpupool_gpu_temperature_celsius "{'node': '$node', 'gpu': '$gpu'}")
"$PY" -c "import sys; sys.exit(not (20 < float('$t') < 110))" 2>/dev/null ||
    fail "temperature of the busy fake GPU is '$t'"
w=$(value "$T/coord.prom" gpupool_gpu_power_watts "{'node': '$node', 'gpu': '$gpu'}")
"$PY" -c "import sys; sys.exit(not (25 < float('$w') < 400))" 2>/dev/null ||
    fail "power of the busy fake GPU is '$w'"

# --- the ledger's totals grow while the job accrues (every second)
# ledger_value FILE SAMPLE LABELS: the sample's value, "0" when absent.
ledger_value() {
	local v
	v=$(value "$@")
	[ "$v" = none ] && v=0
	printf '%s' "$v"
}
first=$(ledger_value "$T/coord.prom" gpupool_ledger_user_debited_credits_total \
    "{'user': 'alice', 'group': 'lab-a'}")
deadline=$((SECONDS + WAIT_S))
while :; do
	scrape "$CM" "$METRICS_TOKEN" "$T/ledger.prom"
	now=$(ledger_value "$T/ledger.prom" gpupool_ledger_user_debited_credits_total \
	    "{'user': 'alice', 'group': 'lab-a'}")
	"$PY" -c "import sys; sys.exit(not float('$now') > float('$first'))" && break
	[ $SECONDS -ge $deadline ] && fail "alice's debits did not grow from $first: $(grep ledger "$T/ledger.prom")"
	sleep 0.3
done
check_exposition "$T/ledger.prom"
for s in gpupool_ledger_postings_total gpupool_ledger_provider_credited_credits_total \
    gpupool_ledger_group_credited_credits_total gpupool_ledger_user_gpu_seconds_total; do
	grep -q "^# TYPE $s counter" "$T/ledger.prom" || fail "$s is not a counter"
done
v=$(value "$T/ledger.prom" gpupool_ledger_provider_gpu_seconds_total "{'provider': 'prov-b', 'group': 'lab-b'}")
"$PY" -c "import sys; sys.exit(not float('$v') > 0)" 2>/dev/null || fail "prov-b lent no GPU time: $v"
assert_eq 0.0 "$(value "$T/ledger.prom" gpupool_ledger_group_debited_credits_total "{'group': 'default'}")" \
    "a group without jobs is shown, at 0"

# --- the agent's endpoint: its token, the same job on the same GPU
scrape "$AM" - "$T/x"
assert_eq 401 "$SCRAPE_STATUS" "agent /metrics without its token"
scrape "$AM" "$ADMIN_TOKEN" "$T/x"
assert_eq 401 "$SCRAPE_STATUS" "agent /metrics with another token"
scrape "${AM%/metrics}/v1/whoami" "$(cat "$T/agent-metrics.token")" "$T/x"
assert_eq 404 "$SCRAPE_STATUS" "agent: a path other than /metrics"
scrape "$AM" "$(cat "$T/agent-metrics.token")" "$T/agent.prom"
assert_eq 200 "$SCRAPE_STATUS" "agent /metrics with its token"
# The scheme is case-insensitive (RFC 9110 11.1).
assert_eq 200 "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 20 \
    -H "Authorization: bearer $(cat "$T/agent-metrics.token")" "$AM")" \
    "agent /metrics with 'bearer' in lower case"
check_exposition "$T/agent.prom"
assert_eq 1.0 "$(value "$T/agent.prom" gpupool_agent_gpu_state "{'node': 'm1', 'gpu': '$gpu', 'state': 'running'}")" "agent: GPU running"
u=$(value "$T/agent.prom" gpupool_agent_gpu_utilization_ratio "{'gpu': '$gpu', 'job_id': '$J', 'user': 'alice'}")
[ "$u" != none ] && [ "$u" != 0.0 ] || fail "agent: no utilization for job $J on GPU $gpu ($u)"
assert_eq 1.0 "$(value "$T/agent.prom" gpupool_agent_gpu_info "{'gpu': '$gpu', 'backend': 'fake', 'model': 'T4'}")" "agent: gpu_info says fake"
assert_eq 1.0 "$(value "$T/agent.prom" gpupool_agent_connected "{'node': 'm1'}")" "agent connected"
assert_eq 1.0 "$(value "$T/agent.prom" gpupool_agent_jobs "{}")" "agent jobs"

# --- the agent dies: the node goes down, the job is requeued (node_lost)
kill9_agent m1
wait_node_state m1 down
wait_state "$J" queued
scrape "$CM" "$METRICS_TOKEN" "$T/coord2.prom"
check_exposition "$T/coord2.prom"
assert_eq 1.0 "$(value "$T/coord2.prom" gpupool_job_requeues_total "{'reason': 'node_lost'}")" "requeues node_lost"
assert_eq 1.0 "$(value "$T/coord2.prom" gpupool_nodes "{'state': 'down'}")" "nodes down"
assert_eq 2.0 "$(value "$T/coord2.prom" gpupool_gpus "{'state': 'down'}")" "gpus down"
assert_eq 1.0 "$(value "$T/coord2.prom" gpupool_jobs "{'state': 'queued'}")" "jobs queued"
assert_eq none "$(value "$T/coord2.prom" gpupool_gpu_utilization_ratio "{'node': 'm1', 'gpu': '$gpu'}")" \
    "readings of a down node are not shown"
age=$(value "$T/coord2.prom" gpupool_queue_oldest_job_age_seconds "{}")
"$PY" -c "import sys; sys.exit(not float('$age') > 0)" || fail "oldest queued job age is $age"

# --- the attempt ended (its final posting made, nothing accrues now): the
# totals equal the ledger's own report, balance, and grew since the first
api_expect 200 "$ADMIN_TOKEN" GET /v1/usage
printf '%s' "$API_BODY" >"$T/usage.json"
"$PY" - "$T/coord2.prom" "$T/usage.json" "$T/ledger.prom" <<'EOF' >&2 || fail "ledger totals in /metrics (above)"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
def samples(path):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(open(path).read()) for s in f.samples}
m, u, before = samples(sys.argv[1]), json.load(open(sys.argv[2])), samples(sys.argv[3])
def get(name, **labels):
    return m.get((name, tuple(sorted(labels.items()))), 0.0)
def close(a, b, what):
    assert abs(a - b) < 1e-6, "%s: /metrics %r, usage %r" % (what, a, b)
t = u["totals"]
assert t["postings"] > 0 and t["balance_micro"] == 0, t
close(get("gpupool_ledger_postings_total"), t["postings"], "postings")
for x in u["users"]:
    close(get("gpupool_ledger_user_debited_credits_total", user=x["user"], group=x["group"]),
          x["spent_micro"] / 1e6, "debited " + x["user"])
    close(get("gpupool_ledger_user_gpu_seconds_total", user=x["user"], group=x["group"]),
          x["gpu_ms"] / 1e3, "gpu seconds " + x["user"])
for x in u["providers"]:
    close(get("gpupool_ledger_provider_credited_credits_total", provider=x["provider"], group=x["group"]),
          x["earned_micro"] / 1e6, "credited " + x["provider"])
for x in u["groups"]:
    close(get("gpupool_ledger_group_debited_credits_total", group=x["group"]), x["spent_micro"] / 1e6, "spent " + x["group"])
    close(get("gpupool_ledger_group_credited_credits_total", group=x["group"]), x["earned_micro"] / 1e6, "earned " + x["group"])
    close(get("gpupool_ledger_group_lent_gpu_seconds_total", group=x["group"]), x["lent_gpu_ms"] / 1e3, "lent " + x["group"])
    close(get("gpupool_ledger_group_used_gpu_seconds_total", group=x["group"]), x["used_gpu_ms"] / 1e3, "used " + x["group"])
debits = sum(v for (n, _), v in m.items() if n == "gpupool_ledger_user_debited_credits_total")
credits = sum(v for (n, _), v in m.items() if n == "gpupool_ledger_provider_credited_credits_total")
close(debits, credits, "debits and credits balance")
close(get("gpupool_ledger_group_debited_credits_total", group="lab-a"), debits, "lab-a spent it all")
close(get("gpupool_ledger_group_credited_credits_total", group="lab-b"), credits, "lab-b earned it all")
key = ("gpupool_ledger_user_debited_credits_total", (("group", "lab-a"), ("user", "alice")))
assert m[key] > before[key] > 0, "debits grew: %r then %r" % (before[key], m[key])
print("ledger totals: %d postings, %.6f credits" % (t["postings"], credits))
EOF

# --- the totals survive a kill -9 of the coordinator (account_totals)
kill9_coordinator
start_coordinator --accrual-interval 1s
scrape "$CM" "$METRICS_TOKEN" "$T/coord3.prom"
for k in "gpupool_ledger_postings_total {}" \
    "gpupool_ledger_user_debited_credits_total {'user': 'alice', 'group': 'lab-a'}" \
    "gpupool_ledger_provider_gpu_seconds_total {'provider': 'prov-b', 'group': 'lab-b'}" \
    "gpupool_ledger_group_credited_credits_total {'group': 'lab-b'}"; do
	v=$(value "$T/coord3.prom" ${k%% *} "${k#* }")
	"$PY" -c "import sys; sys.exit(not float('$v') > 0)" 2>/dev/null ||
	    fail "${k%% *} after a restart: $v"
	assert_eq "$(value "$T/coord2.prom" ${k%% *} "${k#* }")" "$v" "${k%% *} after a restart"
done

# --- the Grafana dashboard uses only what these scrapes expose
"$PY" "$ROOT/tests/e2e/grafcheck.py" "$ROOT/contrib/grafana/gpupool.json" \
    "$T/coord.prom" "$T/ledger.prom" "$T/coord2.prom" "$T/agent.prom" \
    >"$T/grafcheck.out" 2>&1 ||
    fail "grafana dashboard: $(cat "$T/grafcheck.out")"
cat "$T/grafcheck.out" >&2
echo "ok"
