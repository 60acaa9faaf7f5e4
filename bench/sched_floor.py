#!/usr/bin/env python3
"""bench/sched_floor.py: an offline reference for the FGD protocol table
(docs/scheduling.md): what the GPUs alone allow at 100% arrived.

For each trace and seed, the pods that have arrived when the GPU request
reaches 100% of the cluster's GPUs (the trace shuffled by the seed, then
draws with replacement; Python's generator, not the simulator's, so the
pods differ but not their mix) are packed *offline*, knowing all of them,
largest first, each into the fullest GPU it fits (best fit decreasing),
k-GPU pods as k whole GPUs. CPUs, memory, nodes and GPU models are
ignored, so it places at least as much as any placement that must respect
them and sees one pod at a time could in practice (it is a heuristic, not
a proof of the optimum). Prints "metric value unit" lines: the GPU share it
leaves unallocated, the share in 190-thousandth gaps (beside 810 shares)
and the published FGD figure x 0.95 (the issue 20 target).

Usage: [TRACES=dir] [SEEDS="42 43"] bench/sched_floor.py [trace...]
"""
import bisect
import csv
import os
import random
import sys

here = os.path.dirname(os.path.abspath(__file__))
TRACES = os.environ.get("TRACES", os.path.join(here, "..", "..", "shared",
                                               "data", "traces"))
if not os.path.isdir(TRACES):
    TRACES = "/work/shared/data/traces"
SEEDS = [int(s) for s in os.environ.get("SEEDS", " ".join(
    str(s) for s in range(42, 52))).split()]
PUBLISHED_FGD = {"default": 4.77, "gpushare40": 6.04, "gpuspec10": 5.34,
                 "multigpu20": 4.47, "gpuspec20": 5.34, "gpuspec25": 6.09,
                 "gpushare60": 8.75, "multigpu30": 3.64, "cpu100": 4.79,
                 "cpu250": 6.80}
MILLI = 1000


def gpus_total():
    with open(os.path.join(TRACES, "openb_node_list_gpu_node.csv")) as f:
        return sum(int(r["gpu"]) for r in csv.DictReader(f))


def pack(pods, gpus, seed):
    """Unallocated % and % in 190 gaps, best fit decreasing."""
    rng = random.Random(seed)
    seq = pods[:]
    rng.shuffle(seq)
    items, volume, i = [], 0, 0
    while volume < gpus * MILLI:
        n, m = seq[i] if i < len(seq) else rng.choice(pods)
        i += 1
        if n == 1:
            items.append(m)
            volume += m
        elif n > 1:
            items += [MILLI] * n
            volume += MILLI * n
    items.sort(reverse=True)
    free, opened, placed = [], 0, 0
    for it in items:
        j = bisect.bisect_left(free, it)
        if j < len(free):
            left = free.pop(j) - it
        elif opened < gpus:
            opened += 1
            left = MILLI - it
        else:
            continue
        placed += it
        if left > 0:
            bisect.insort(free, left)
    gaps190 = sum(f for f in free if f == 190)
    return (100.0 * (1 - placed / (gpus * MILLI)),
            100.0 * gaps190 / (gpus * MILLI))


def main():
    gpus = gpus_total()
    for w in sys.argv[1:] or list(PUBLISHED_FGD):
        with open(os.path.join(TRACES, "openb_pod_list_%s.csv" % w)) as f:
            pods = [(int(r["num_gpu"]), int(r["gpu_milli"]))
                    for r in csv.DictReader(f)]
        runs = [pack(pods, gpus, s) for s in SEEDS]
        print("floor_%s_unalloc100 %.2f %%" %
              (w, sum(r[0] for r in runs) / len(runs)))
        print("floor_%s_gap190 %.2f %%" %
              (w, sum(r[1] for r in runs) / len(runs)))
        if w in PUBLISHED_FGD:
            print("floor_%s_target %.2f %%" % (w, 0.95 * PUBLISHED_FGD[w]))


if __name__ == "__main__":
    main()
