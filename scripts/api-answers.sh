#!/usr/bin/env bash
# scripts/api-answers.sh: asks a fresh coordinator the same 1,530 questions
# (5 callers: admin, user, provider, metrics token, none; 5 methods; 61
# paths, known and not) and prints each answer: status, Allow, body. Run it
# against two builds and diff the outputs to see that a change to routing
# keeps the API's answers (the route table, issue 16, was checked so):
#   GPUPOOL_BIN=old/build/gpupool GPUPOOL_BUILD=old/build \
#       scripts/api-answers.sh > old.txt
#   GPUPOOL_BIN=build/gpupool GPUPOOL_BUILD=build scripts/api-answers.sh > new.txt
#   diff <(sed 's/created_at":"[^"]*"/T/g' old.txt) \
#       <(sed 's/created_at":"[^"]*"/T/g' new.txt)
# Uses tests/e2e/lib.sh: 127.0.0.1 only, its own temporary directory.
. "$(dirname "$0")/../tests/e2e/lib.sh"
start_coordinator
mk_token user alice; U=$TOKEN
mk_token provider prov; P=$TOKEN
mk_token metrics mon; M=$TOKEN
paths="/ /ui/ /ui/app.js /ui/nope /metrics /v1 /v1/ /v1/whoami /v1/tokens /v1/tokens/1/revoke /v1/tokens/x/revoke /v1/nodes /v1/queue /v1/jobs /v1/jobs/ /v1/jobs/array /v1/jobs/999 /v1/jobs/x /v1/jobs/999/cancel /v1/jobs/999/log /v1/jobs/999/wait?wait_ms=0 /v1/jobs/999/checkpoint /v1/jobs/999/foo /v1/jobs/999/checkpoints /v1/jobs/x/checkpoints /v1/jobs/999/checkpoints/latest /v1/jobs/999/output /v1/agent /v1/agent/ /v1/agent/poll?wait_ms=0 /v1/agent/register /v1/agent/heartbeat /v1/agent/nope /v1/agent/jobs/1/1/log /v1/agent/jobs/x/1/log /v1/agent/jobs/1/1/nope /v1/agent/jobs/1/1/started /v1/agent/jobs/1/1/checkpoint /v1/agent/jobs/1/1/checkpoint/commit /v1/agent/jobs/1/1/checkpoint/chunks/ab /v1/agent/jobs/x/1/checkpoint /v1/agent/jobs/1/1/image /v1/agent/jobs/1/1/output /v1/agent/jobs/1/1/data/1 /v1/images /v1/images/blobs/missing /v1/images/blobs/sha256:00 /v1/images/signatures /v1/groups /v1/groups/ /v1/prices /v1/budgets /v1/usage /v1/ledger /v1/data /v1/data/x /v1/uploads /v1/uploads/1/chunks/ab /v1/quotas /v1/nothing /v2/jobs"
for who in admin user provider metrics none; do
	case $who in admin) tok=$ADMIN_TOKEN ;; user) tok=$U ;; provider) tok=$P ;; metrics) tok=$M ;; none) tok=- ;; esac
	for m in GET POST PUT DELETE PATCH; do
		for p in $paths; do
			if [ "$m" = POST ] || [ "$m" = PUT ]; then api "$tok" "$m" "$p" '{}'; else api "$tok" "$m" "$p"; fi
			allow=$(grep -i '^allow:' "$API_HEADERS" | tr -d '\r')
			echo "$who $m $p -> $API_STATUS [$allow] $API_BODY"
		done
	done
done
