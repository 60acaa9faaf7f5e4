#!/usr/bin/env python3
"""tests/e2e/grafcheck.py: checks the Grafana dashboard in contrib/grafana
against live scrapes: the JSON is well formed (unique panel ids, panels on
the 24-column grid without overlapping, every query with a refId and the
dashboard's datasource variable), every gpupool_* name its queries use is a
sample name the coordinator or an agent exposes, and every label a query
selects on, groups by or matches on exists on the metrics it names.

Usage: grafcheck.py DASHBOARD.json SCRAPE.prom [SCRAPE.prom ...]
Prints each problem and exits 1, or prints a summary and exits 0.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promcheck  # noqa: E402

METRIC = re.compile(r"\bgpupool_[a-zA-Z0-9_:]*")
SELECTOR = re.compile(r"(gpupool_[a-zA-Z0-9_:]*)\{([^}]*)\}")
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)"
                      r"\s*\(([^)]*)\)")


def load_scrapes(paths):
    labels = {}  # sample name -> set of label names
    for path in paths:
        with open(path, encoding="utf-8") as f:
            problems, families, order = promcheck.check(f.read(), "")
        if problems:
            raise SystemExit("grafcheck: %s is not well formed: %s" %
                             (path, problems[0]))
        for name in order:
            for (_, sample, lab, _) in families[name]["samples"]:
                labels.setdefault(sample, set()).update(lab)
    return labels


def queries(dash):
    """(where, expr) for every query: panel targets and variables."""
    for p in dash.get("panels", []):
        for t in p.get("targets", []):
            yield "panel %r" % p.get("title"), t
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            expr = q.get("query") if isinstance(q, dict) else q
            yield "variable %r" % v.get("name"), {"expr": expr,
                                                  "refId": "var",
                                                  "datasource":
                                                  v.get("datasource")}


def check_layout(dash, problems):
    ids = set()
    cells = {}
    for p in dash["panels"]:
        pid = p.get("id")
        title = p.get("title")
        if not isinstance(pid, int) or pid in ids:
            problems.append("panel %r: id %r missing or repeated" %
                            (title, pid))
        ids.add(pid)
        if not p.get("type") or not isinstance(title, str) or not title:
            problems.append("panel %r: needs a type and a title" % pid)
        g = p.get("gridPos", {})
        try:
            x, y, w, h = g["x"], g["y"], g["w"], g["h"]
        except KeyError:
            problems.append("panel %r: gridPos needs x, y, w, h" % title)
            continue
        if x < 0 or w < 1 or h < 1 or x + w > 24:
            problems.append("panel %r: gridPos %r off the 24-column grid" %
                            (title, g))
        for cx in range(x, x + w):
            for cy in range(y, y + h):
                if (cx, cy) in cells:
                    problems.append("panel %r overlaps panel %r" %
                                    (title, cells[(cx, cy)]))
                    break
                cells[(cx, cy)] = title
            else:
                continue
            break
        if p["type"] == "row":
            continue
        targets = p.get("targets")
        if not targets:
            problems.append("panel %r: no query" % title)
            continue
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or None in refs:
            problems.append("panel %r: refIds %r" % (title, refs))


def check_expr(where, t, labels, problems, used):
    expr = t.get("expr")
    if not isinstance(expr, str) or not expr.strip():
        problems.append("%s: a query without expr" % where)
        return
    ds = t.get("datasource") or {}
    if ds.get("uid") != "${datasource}":
        problems.append("%s: datasource is not ${datasource}: %r" %
                        (where, ds))
    names = METRIC.findall(expr)
    if not names:
        problems.append("%s: %r uses no gpupool metric" % (where, expr))
    for n in names:
        used.add(n)
        if n not in labels:
            problems.append("%s: %s is not exposed (query %r)" %
                            (where, n, expr))
    for metric, sel in SELECTOR.findall(expr):
        for m in re.finditer(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)",
                             sel):
            if m.group(1) not in labels.get(metric, set()):
                problems.append("%s: %s has no label %s" %
                                (where, metric, m.group(1)))
    known = set()
    for n in names:
        known |= labels.get(n, set())
    for _, group in GROUPING.findall(expr):
        for lab in [s.strip() for s in group.split(",") if s.strip()]:
            if lab not in known:
                problems.append("%s: label %s is on none of %s" %
                                (where, lab, sorted(set(names))))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        dash = json.load(f)
    labels = load_scrapes(sys.argv[2:])
    problems = []
    for key in ("title", "uid", "panels", "schemaVersion", "templating"):
        if key not in dash:
            problems.append("dashboard: no %r" % key)
    if not problems:
        check_layout(dash, problems)
    used = set()
    n = 0
    for where, t in queries(dash):
        n += 1
        check_expr(where, t, labels, problems, used)
    for p in problems:
        print("grafcheck: %s" % p)
    if problems:
        return 1
    print("grafcheck: %d panels, %d queries over %d metrics, all exposed" %
          (len(dash["panels"]), n, len(used)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
