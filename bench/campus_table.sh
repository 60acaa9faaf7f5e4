#!/usr/bin/env bash
# bench/campus_table.sh: the campus protocol's table (docs/scheduling.md):
# `gpupool sim --protocol campus` for every owner-presence pattern, seeds
# SEEDS (default 42 43 44), load LOAD (0.5), and a sweep of the load on the
# mixed pattern; each pooled against each lab alone on its own GPUs.
# Prints "metric value unit" lines, then the Markdown tables. With
# PLOTS=DIR it also draws the gnuplot figures into DIR.
# Usage: BUILD=build [JOBS=2] [SEEDS="42 43"] [LOAD=0.5] [PLOTS=docs/img]
#        bench/campus_table.sh
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN="$PWD/$BUILD/gpupool"
TRACES=${TRACES:-$PWD/../shared/data/traces}
[ -d "$TRACES" ] || TRACES=/work/shared/data/traces
SEEDS=${SEEDS:-"42 43 44"}
LOAD=${LOAD:-0.5}
LOADS=${LOADS:-"0.25 0.5 0.75"}
JOBS=${JOBS:-2}
PATTERNS="office deadline semester mixed"
OUT=$(mktemp -d /tmp/gpupool-campus.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

echo "machine_cpus $(nproc) cpus"
echo "machine_load $(cut -d' ' -f1 /proc/loadavg) load1"
{
	for p in $PATTERNS; do
		for s in $SEEDS; do echo "$p $s $LOAD"; done
	done
	for l in $LOADS; do echo "mixed 42 $l"; done
} | sort -u | xargs -P "$JOBS" -L 1 sh -c '
	"$0" sim --protocol campus --nodes "$1/openb_node_list_gpu_node.csv" \
	    --jobs "$1/openb_pod_list_default.csv" --pattern "$3" --seed "$4" \
	    --load "$5" --json > "$2/$3.$4.$5.json"' "$BIN" "$TRACES" "$OUT"

python3 - "$OUT" "$PATTERNS" "$SEEDS" "$LOAD" "$LOADS" <<'PY'
import json, os, sys
out, patterns, seeds, load, loads = sys.argv[1], sys.argv[2].split(), \
    sys.argv[3].split(), sys.argv[4], sys.argv[5].split()
def get(p, s, l):
    return json.load(open(os.path.join(out, "%s.%s.%s.json" % (p, s, l))))
def row(runs, side, f):
    return sum(f(r[side]) for r in runs) / len(runs)
cols = [
    ("GPU util %", lambda r: r["util_pct"], "%.1f"),
    ("pool jobs' GPU %", lambda r: r["pool_pct"], "%.1f"),
    ("batch wait mean h", lambda r: r["wait_mean_s"] / 3600, "%.2f"),
    ("batch wait p90 h", lambda r: r["wait_p90_s"] / 3600, "%.2f"),
    ("jobs done", lambda r: r["jobs_done"], "%.0f"),
    ("GPU-h done", lambda r: r["gpu_h_done"], "%.0f"),
    ("sessions within 1 min %", lambda r: 100.0 * r["sessions_1min"] / max(1, r["sessions"]), "%.1f"),
    ("migrations", lambda r: r["migrations"]["count"], "%.0f"),
    ("saved %", lambda r: 100.0 * r["migrations"]["saved"] / max(1, r["migrations"]["count"]), "%.1f"),
    ("work lost GPU-h", lambda r: r["lost_gpu_h"], "%.1f"),
    ("Jain", lambda r: r["jain"], "%.3f"),
]
print("| pattern | side | " + " | ".join(c[0] for c in cols) + " |")
print("|---|---|" + "---|" * len(cols))
dat = open(os.path.join(out, "patterns.dat"), "w")
for p in patterns:
    runs = [get(p, s, load) for s in seeds]
    for side, name in (("pooled", "pooled"), ("alone", "each lab alone")):
        cells = [c[2] % row(runs, side, c[1]) for c in cols]
        print("| %s | %s | %s |" % (p, name, " | ".join(cells)))
        for c in cols:
            key = c[0].replace(" ", "_").replace("%", "pct").replace("'", "")
            print("campus_%s_%s_%s %s" % (p, side, key, c[2] % row(runs, side, c[1])), file=sys.stderr)
    dat.write("%s %.2f %.2f %.2f %.2f\n" % (p, row(runs, "pooled", cols[0][1]),
              row(runs, "alone", cols[0][1]),
              row(runs, "pooled", cols[6][1]), row(runs, "alone", cols[6][1])))
dat.close()
print()
print("Per lab, mixed pattern, seed %s: batch wait mean (h) and GPU-h done / asked" % seeds[0])
r = get("mixed", seeds[0], load)
print("| lab | " + " | ".join(str(i + 1) for i in range(r["labs"])) + " |")
print("|---|" + "---|" * r["labs"])
for side in ("pooled", "alone"):
    print("| %s wait h | %s |" % (side, " | ".join("%.2f" % (x / 3600) for x in r[side]["lab_wait_mean_s"])))
    print("| %s done | %s |" % (side, " | ".join("%.2f" % x for x in r[side]["lab_done_ratio"])))
with open(os.path.join(out, "labs.dat"), "w") as f:
    for i in range(r["labs"]):
        f.write("%d %.3f %.3f\n" % (i + 1, r["pooled"]["lab_wait_mean_s"][i] / 3600,
                                    r["alone"]["lab_wait_mean_s"][i] / 3600))
print()
print("Load sweep, mixed pattern, seed 42")
print("| load | side | " + " | ".join(c[0] for c in cols) + " |")
print("|---|---|" + "---|" * len(cols))
with open(os.path.join(out, "loads.dat"), "w") as f:
    for l in loads:
        x = get("mixed", "42", l)
        for side in ("pooled", "alone"):
            print("| %s | %s | %s |" % (l, side, " | ".join(c[2] % c[1](x[side]) for c in cols)))
        f.write("%s %.2f %.2f %.3f %.3f\n" % (l, x["pooled"]["util_pct"], x["alone"]["util_pct"],
                x["pooled"]["wait_mean_s"] / 3600, x["alone"]["wait_mean_s"] / 3600))
PY

if [ -n "${PLOTS:-}" ]; then
	mkdir -p "$PLOTS"
	"$BIN" sim --protocol campus --nodes "$TRACES/openb_node_list_gpu_node.csv" \
	    --jobs "$TRACES/openb_pod_list_default.csv" --pattern deadline \
	    --seed 42 --load "$LOAD" --series "$OUT/series.csv" >/dev/null
	gnuplot <<GP
set terminal pngcairo size 900,480 font ",11"
set output "$PLOTS/campus-patterns.png"
set title "Campus: GPU utilization, pooled against each lab alone (load $LOAD, mean of seeds)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "GPU utilization, owners' and pool jobs' (%)"
set yrange [0:100]
set key left top
set grid ytics
plot "$OUT/patterns.dat" using 2:xtic(1) title "pooled", "" using 3 title "each lab alone"
GP
	gnuplot <<GP
set terminal pngcairo size 900,480 font ",11"
set output "$PLOTS/campus-deadline.png"
set title "Campus, deadline pattern, seed 42: GPUs the owners and pool jobs hold, by hour"
set xlabel "hours from Monday 00:00"
set ylabel "GPUs"
set datafile separator ","
set key left top
set grid
plot "$OUT/series.csv" using 1:2 with lines lw 2 title "owners", \
     "" using 1:(\$2+\$3) with lines lw 1 title "owners + pool jobs (pooled)"
GP
	gnuplot <<GP
set terminal pngcairo size 900,480 font ",11"
set output "$PLOTS/campus-load.png"
set title "Campus, mixed pattern, seed 42: pooled against each lab alone as demand grows"
set xlabel "pool demand (GPU-time over the GPUs')"
set ylabel "GPU utilization (%)"
set y2label "batch wait, mean (hours)"
set y2tics
set logscale y2
set key left top
set grid
plot "$OUT/loads.dat" using 1:2 with linespoints lw 2 title "utilization, pooled", \
     "" using 1:3 with linespoints lw 2 title "utilization, alone", \
     "" using 1:4 axes x1y2 with linespoints dt 2 title "wait, pooled", \
     "" using 1:5 axes x1y2 with linespoints dt 2 title "wait, alone"
GP
	echo "plots $PLOTS/campus-patterns.png,$PLOTS/campus-deadline.png,$PLOTS/campus-load.png files"
fi
