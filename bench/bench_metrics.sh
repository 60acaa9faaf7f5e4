#!/usr/bin/env bash
# bench/bench_metrics.sh: what /metrics costs. Starts a coordinator on
# loopback, runs bench_dispatch (simulated agents, 1-GPU jobs at a fixed
# rate) twice, first alone, then while a scraper fetches /metrics every
# SCRAPE_MS (default 100 ms: 150 times Prometheus' usual 15 s), and prints
# the dispatch latency of both runs (so the scrapes' effect on the hot
# path shows), then the scrape's duration (p50, p99, max) and size with
# that many nodes and GPUs up and jobs held. Prints "metric value unit"
# lines. Usage: BUILD=build bench/bench_metrics.sh
# Knobs: AGENTS (100), GPUS (8 per node), RATE (100 jobs/s), SECONDS_RUN
# (15), SCRAPE_MS (100).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
AGENTS=${AGENTS:-100}
GPUS=${GPUS:-8}
RATE=${RATE:-100}
SECONDS_RUN=${SECONDS_RUN:-15}
SCRAPE_MS=${SCRAPE_MS:-100}
PORT=${PORT:-$((20000 + $$ % 20000))}
URL="http://127.0.0.1:$PORT"
DATA=$(mktemp -d /tmp/gpupool-bench-metrics.XXXXXX)
COORD_PID=
SCRAPER_PID=

cleanup() {
	[ -n "$SCRAPER_PID" ] && kill "$SCRAPER_PID" 2>/dev/null
	if [ -n "$COORD_PID" ]; then
		kill "$COORD_PID" 2>/dev/null
		wait "$COORD_PID" 2>/dev/null
	fi
	rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "machine_loadavg_1m $(cut -d' ' -f1 /proc/loadavg) load"

# A fresh coordinator for each run (a second bench_dispatch against the
# same one would meet the first one's nodes, still leased).
start_coordinator() {
	rm -rf "$DATA/coord"
	"$BIN" coordinator --listen "127.0.0.1:$PORT" --data "$DATA/coord" -q \
		>"$DATA/coord.log" 2>&1 &
	COORD_PID=$!
	for _ in $(seq 100); do
		[ -s "$DATA/coord/admin.token" ] && break
		sleep 0.1
	done
	TOKEN=$(tr -d '\n' <"$DATA/coord/admin.token" 2>/dev/null)
	[ -n "$TOKEN" ] || { echo "bench_metrics: the coordinator did not start" >&2; exit 1; }
}
stop_coordinator() {
	kill "$COORD_PID" 2>/dev/null
	wait "$COORD_PID" 2>/dev/null
	COORD_PID=
}

dispatch() { # PREFIX
	timeout 300 "$BUILD/bench/bench_dispatch" --url "$URL" --token "$TOKEN" \
		--agents "$AGENTS" --gpus-per-node "$GPUS" --rate "$RATE" \
		--seconds "$SECONDS_RUN" --drain-s 30 |
		grep -E '^dispatch_latency_(p50|p99|max)' | sed "s/^/$1_/"
}

# Scrapes every SCRAPE_MS, one "SECONDS BYTES" line per scrape.
scraper() {
	while :; do
		curl -sS -o /dev/null -w '%{time_total} %{size_download}\n' \
			-H "Authorization: Bearer $TOKEN" "$URL/metrics"
		sleep "$(awk "BEGIN {print $SCRAPE_MS / 1000}")"
	done >"$DATA/scrapes.txt" 2>/dev/null
}

start_coordinator
dispatch alone
stop_coordinator
start_coordinator
scraper &
SCRAPER_PID=$!
dispatch scraped
kill "$SCRAPER_PID" 2>/dev/null
wait "$SCRAPER_PID" 2>/dev/null
SCRAPER_PID=
sort -n "$DATA/scrapes.txt" | awk '
	{ t[NR] = $1 * 1000; b = $2 }
	END {
		if (NR == 0) { print "scrapes 0 count"; exit 1 }
		printf "scrapes %d count\n", NR
		printf "scrape_p50 %.2f ms\n", t[int((NR + 1) / 2)]
		i = int(NR * 0.99); if (i < 1) i = 1
		printf "scrape_p99 %.2f ms\n", t[i]
		printf "scrape_max %.2f ms\n", t[NR]
		printf "scrape_size %d bytes\n", b
	}'
curl -sS -H "Authorization: Bearer $TOKEN" "$URL/metrics" |
	grep -cv '^#' | sed 's/^/scrape_samples /; s/$/ samples/'
echo "machine_loadavg_1m_end $(cut -d' ' -f1 /proc/loadavg) load"
