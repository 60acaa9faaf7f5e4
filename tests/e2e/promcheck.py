#!/usr/bin/env python3
"""tests/e2e/promcheck.py: a strict checker of the Prometheus text
exposition format (0.0.4) and of Prometheus' naming conventions, for the
coordinator's and the agent's /metrics. Debian bookworm has promtool only
in the `prometheus` package, whose installation starts a Prometheus server,
so the tests use this checker, then parse the text again with Debian's
python3-prometheus-client as a second, independent reader.

Usage: promcheck.py FILE [--prefix gpupool_] [--names]
Exits 0 and prints a summary (or, with --names, every family name and every
sample name, one a line) when FILE is well formed; else prints each problem
as "promcheck: line N: ..." and exits 1.
"""
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
# Units that are not base units (Prometheus: seconds, bytes, ratios...).
BAD_UNITS = re.compile(
    r"_(ms|msec|milliseconds|us|microseconds|ns|nanoseconds|minutes|hours|"
    r"days|kb|mb|gb|kib|mib|gib|kilobytes|megabytes|percent|celcius|"
    r"fahrenheit|milliwatts|kilowatts)(_|\Z)")


def parse_value(text):
    if text in ("NaN", "+Inf", "-Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ValueError("bad value %r" % text)
    return float(text)


def parse_labels(text, pos):
    """Parses {a="b",...} from text[pos] == '{'; returns (dict, end)."""
    labels = {}
    i = pos + 1
    if i < len(text) and text[i] == "}":
        return labels, i + 1
    while True:
        m = re.match(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", text[i:])
        if not m:
            raise ValueError("bad label name at column %d" % (i + 1))
        name = m.group(1)
        if name.startswith("__"):
            raise ValueError("label %s: names starting with __ are "
                             "reserved" % name)
        if name in labels:
            raise ValueError("label %s twice" % name)
        i += m.end()
        value = []
        while True:
            if i >= len(text):
                raise ValueError("unterminated label value")
            c = text[i]
            if c == "\\":
                if i + 1 >= len(text) or text[i + 1] not in '\\"n':
                    raise ValueError("bad escape in label %s" % name)
                value.append({"\\": "\\", '"': '"', "n": "\n"}[text[i + 1]])
                i += 2
                continue
            if c == '"':
                i += 1
                break
            if c == "\n":
                raise ValueError("raw newline in label %s" % name)
            value.append(c)
            i += 1
        labels[name] = "".join(value)
        if i < len(text) and text[i] == ",":
            i += 1
            if i < len(text) and text[i] == "}":
                return labels, i + 1
            continue
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        raise ValueError("expected , or } after label %s" % name)


def check(text, prefix):
    problems = []
    families = {}      # name -> {"type", "help", "samples": [...]}
    order = []         # family names in order of appearance
    closed = set()     # families whose samples have ended
    current = None
    series = set()

    def err(n, msg):
        problems.append("line %d: %s" % (n, msg))

    def family_of(sample):
        for suffix in ("_bucket", "_sum", "_count"):
            base = sample[: -len(suffix)]
            if sample.endswith(suffix) and families.get(base, {}).get(
                    "type") in ("histogram", "summary"):
                return base
        return sample

    if not text.endswith("\n"):
        problems.append("the exposition does not end with a newline")
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line == "":
            err(n, "empty line")
            continue
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (\S+) (.*)", line)
            if not m:
                err(n, "a comment that is neither HELP nor TYPE: %r" % line)
                continue
            kind, name, rest = m.groups()
            if not NAME.match(name):
                err(n, "bad metric name %r" % name)
                continue
            fam = families.setdefault(name, {"type": None, "help": None,
                                             "samples": []})
            if name not in order:
                order.append(name)
            if name in closed or (fam["samples"] and current != name):
                err(n, "%s of %s after its samples" % (kind, name))
            if kind == "HELP":
                if fam["help"] is not None:
                    err(n, "second HELP for %s" % name)
                if rest.strip() == "":
                    err(n, "empty HELP for %s" % name)
                fam["help"] = rest
            else:
                if fam["type"] is not None:
                    err(n, "second TYPE for %s" % name)
                if rest not in TYPES:
                    err(n, "unknown type %r" % rest)
                fam["type"] = rest
            if current is not None and current != name:
                closed.add(current)
            current = name
            continue
        m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if not m:
            err(n, "bad sample line %r" % line)
            continue
        sample = m.group(0)
        i = m.end()
        labels = {}
        try:
            if i < len(line) and line[i] == "{":
                labels, i = parse_labels(line, i)
            if i >= len(line) or line[i] != " ":
                raise ValueError("expected a space before the value")
            parts = line[i + 1:].split(" ")
            if len(parts) not in (1, 2):
                raise ValueError("expected VALUE [TIMESTAMP]")
            value = parse_value(parts[0])
            if len(parts) == 2 and not re.fullmatch(r"-?\d+", parts[1]):
                raise ValueError("bad timestamp %r" % parts[1])
        except ValueError as e:
            err(n, "%s: %s" % (sample, e))
            continue
        name = family_of(sample)
        fam = families.get(name)
        if fam is None or fam["type"] is None:
            err(n, "sample %s before its TYPE line" % sample)
            continue
        if name in closed:
            err(n, "sample %s: its family %s ended earlier" % (sample, name))
        if current != name:
            if current is not None:
                closed.add(current)
            current = name
        key = (sample, tuple(sorted(labels.items())))
        if key in series:
            err(n, "duplicate series %s%s" % (sample, labels))
        series.add(key)
        fam["samples"].append((n, sample, labels, value))

    for name in order:
        fam = families[name]
        t = fam["type"]
        if prefix and not name.startswith(prefix):
            problems.append("%s: does not start with %s" % (name, prefix))
        if fam["help"] is None or t is None:
            problems.append("%s: needs both HELP and TYPE" % name)
        if BAD_UNITS.search(name):
            problems.append("%s: not a base unit (use seconds, bytes, "
                            "celsius, watts, ratio)" % name)
        if t == "counter" and not name.endswith("_total"):
            problems.append("%s: a counter's name ends in _total" % name)
        if t != "counter" and name.endswith("_total"):
            problems.append("%s: only counters end in _total" % name)
        if t in ("gauge", "untyped") and re.search(
                r"_(count|sum|bucket)\Z", name):
            problems.append("%s: _count, _sum, _bucket are for "
                            "histograms" % name)
        for (n, sample, labels, value) in fam["samples"]:
            if t == "counter" and (value < 0 or math.isnan(value)):
                problems.append("line %d: counter %s is %r" % (n, sample,
                                                             value))
            if t == "histogram" and sample == name:
                problems.append("line %d: histogram sample %s has no "
                                "suffix" % (n, sample))
            if t == "histogram" and sample.endswith("_bucket") and \
                    "le" not in labels:
                problems.append("line %d: bucket without le" % n)
        if t == "histogram":
            problems.extend(check_histogram(name, fam["samples"]))
    return problems, families, order


def check_histogram(name, samples):
    """Buckets increase with le, end with +Inf, and +Inf equals _count."""
    problems = []
    groups = {}
    for (n, sample, labels, value) in samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        g = groups.setdefault(rest, {"buckets": [], "count": None,
                                     "sum": None})
        if sample.endswith("_bucket"):
            try:
                le = parse_value(labels["le"])
            except (KeyError, ValueError):
                problems.append("line %d: bad le" % n)
                continue
            g["buckets"].append((le, value))
        elif sample.endswith("_count"):
            g["count"] = value
        elif sample.endswith("_sum"):
            g["sum"] = value
    for rest, g in groups.items():
        b = g["buckets"]
        if not b or b[-1][0] != math.inf:
            problems.append("%s%s: the last bucket must be le=+Inf" %
                            (name, dict(rest)))
            continue
        for (le1, c1), (le2, c2) in zip(b, b[1:]):
            if not le2 > le1:
                problems.append("%s: le %r after %r" % (name, le2, le1))
            if c2 < c1:
                problems.append("%s: bucket counts decrease at le=%r" %
                                (name, le2))
        if g["count"] is None or g["sum"] is None:
            problems.append("%s%s: needs _sum and _count" % (name, dict(rest)))
        elif g["count"] != b[-1][1]:
            problems.append("%s: _count %r != +Inf bucket %r" %
                            (name, g["count"], b[-1][1]))
    return problems


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    path = args[0]
    prefix = "gpupool_"
    if "--prefix" in args:
        prefix = args[args.index("--prefix") + 1]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    problems, families, order = check(text, prefix)
    for p in problems:
        print("promcheck: %s: %s" % (path, p))
    if problems:
        return 1
    if "--names" in args:
        for name in order:
            print(name)
            for s in sorted({s for (_, s, _, _) in families[name]["samples"]}):
                if s != name:
                    print(s)
    else:
        print("promcheck: %s: %d families, %d samples, well formed" % (
            path, len(order),
            sum(len(families[n]["samples"]) for n in order)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
