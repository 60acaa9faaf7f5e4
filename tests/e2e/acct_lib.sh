# tests/e2e/acct_lib.sh: helpers of the accounting tests (sourced after
# lib.sh): tokens with groups, and a checker of a job's postings.

# acct_token ROLE NAME GROUP: `gpupool token create` with --group (as
# admin); sets TOKEN.
acct_token() {
	cli token create --role "$1" --name "$2" --group "$3"
	[ "$CLI_RC" = 0 ] || fail "token create $2 in $3: $CLI_ERR"
	TOKEN=$CLI_OUT
}

# acct_provider AGENT PROVIDER GROUP: the provider token file that
# start_agent AGENT uses, made for GROUP.
acct_provider() {
	acct_token provider "$2" "$3"
	(umask 077 && printf '%s\n' "$TOKEN" >"$T/$1.token")
}

# ledger_check JOB RATE: checks the job's postings (GET /v1/ledger?job=)
# and sets BILLED_MS, COST (micro-credits) and POSTINGS. RATE is the sum
# over its GPUs of price_micro * 1000 (a whole GPU's share). Per attempt:
# seqs 0..n-1, each period starting where the previous ended (nothing
# counted twice or lost), every posting two entries summing to zero (the
# user's debit, the provider's credit), at most one final posting and it
# is the last, and the amounts add up to rate * billed_ms / 3.6e9, rounded
# down, exactly. EXPECT (optional env): "USER GROUP PROVIDER GROUP" that
# every posting's entries must name.
ledger_check() {
	local out
	api_expect 200 "$ADMIN_TOKEN" GET "/v1/ledger?job=$1&limit=10000"
	out=$(printf '%s' "$API_BODY" | E2E_RATE=$2 E2E_EXPECT="${EXPECT:-}" "$PY" -c '
import calendar, json, os, sys
def ms(t):
    if t is None:
        return None
    day, rest = t.rstrip("Z").split("T")
    hms, frac = rest.split(".")
    sec = calendar.timegm(tuple(map(int, day.split("-"))) + tuple(map(int, hms.split(":"))))
    return sec * 1000 + int(frac)
rate = int(os.environ["E2E_RATE"])
expect = os.environ["E2E_EXPECT"].split()
d = json.load(sys.stdin)
errors, billed, cost, n = [], 0, 0, 0
by = {}
for p in d["postings"]:
    by.setdefault(p["attempt"], []).append(p)
for att, ps in sorted(by.items()):
    ps.sort(key=lambda p: p["seq"])
    first = ms(ps[0]["from"])
    prev = first
    total = 0
    for i, p in enumerate(ps):
        n += 1
        if p["seq"] != i:
            errors.append("attempt %d: seq %d at position %d" % (att, p["seq"], i))
        if ms(p["from"]) != prev:
            errors.append("attempt %d seq %d: from %s is not the previous to" % (att, p["seq"], p["from"]))
        prev = ms(p["to"])
        e = p["entries"]
        if len(e) != 2 or sum(x["amount_micro"] for x in e) != 0:
            errors.append("posting %d: entries %r" % (p["id"], e))
        u = [x for x in e if x["account"] == "user"]
        v = [x for x in e if x["account"] == "provider"]
        if not u or not v or u[0]["amount_micro"] != -p["amount_micro"]:
            errors.append("posting %d: not a user debit and a provider credit" % p["id"])
        elif expect and [u[0]["name"], u[0]["group"], v[0]["name"], v[0]["group"]] != expect:
            errors.append("posting %d: accounts %s/%s -> %s/%s, expected %s" % (p["id"], u[0]["name"], u[0]["group"], v[0]["name"], v[0]["group"], expect))
        if p["kind"] == "final" and i != len(ps) - 1:
            errors.append("attempt %d: a final posting before the last" % att)
        total += p["amount_micro"]
    want = rate * (prev - first) // 3600000000
    if total != want:
        errors.append("attempt %d: postings add up to %d, billed %d ms at rate %d is %d" % (att, total, prev - first, rate, want))
    billed += prev - first
    cost += total
if errors:
    print("ERROR " + "; ".join(errors[:5]))
else:
    print("%d %d %d" % (billed, cost, n))')
	case $out in
	ERROR*) fail "ledger of job $1: $out" ;;
	esac
	read -r BILLED_MS COST POSTINGS <<<"$out"
}
