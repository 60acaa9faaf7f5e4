#!/usr/bin/env python3
"""tests/e2e/unitexec.py: what a systemd service unit would run, for a
root where systemd does not run (test_deb.sh's Debian root). Reads the
unit (and its drop-ins given after it), its EnvironmentFile= inside ROOT,
and prints, one per line: User=, Group=, UMask=, the StateDirectory=
paths (as /var/lib/... "MODE PATH"), then "--" and ExecStart='s argv, one
argument per line, expanded as systemd does: ${VAR} is one argument, $VAR
alone is split on white space (an empty one vanishes), missing variables
are empty. Refuses (exit 1) a unit it does not understand: several
ExecStart= lines (without an empty one resetting them), a Type= other than
simple, quotes or specifiers (%) in ExecStart.

Usage: unitexec.py ROOT UNIT [DROPIN...]
"""
import re
import shlex
import sys


def parse_unit(paths):
    service = {}
    for path in paths:
        section = None
        with open(path, encoding="utf-8") as f:
            for raw in f:
                line = raw.strip()
                if not line or line[0] in "#;":
                    continue
                m = re.fullmatch(r"\[(\w+)\]", line)
                if m:
                    section = m.group(1)
                    continue
                key, sep, value = line.partition("=")
                if not sep:
                    raise SystemExit("unitexec: %s: bad line %r" % (path, line))
                if section != "Service":
                    continue
                key, value = key.strip(), value.strip()
                if key == "ExecStart":
                    if value == "":
                        service["ExecStart"] = []
                    else:
                        service.setdefault("ExecStart", []).append(value)
                elif key in ("EnvironmentFile", "StateDirectory"):
                    service.setdefault(key, []).append(value)
                else:
                    service[key] = value
    return service


def read_env(root, spec):
    optional = spec.startswith("-")
    path = root + spec.lstrip("-")
    env = {}
    try:
        with open(path, encoding="utf-8") as f:
            for raw in f:
                line = raw.strip()
                if not line or line[0] in "#;":
                    continue
                key, sep, value = line.partition("=")
                if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                    raise SystemExit("unitexec: %s: bad line %r" % (path, line))
                value = value.strip()
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                    value = value[1:-1]
                env[key] = value
    except FileNotFoundError:
        if not optional:
            raise SystemExit("unitexec: %s is missing" % path)
    return env


def expand(cmd, env):
    if "%" in cmd or "'" in cmd or '"' in cmd:
        raise SystemExit("unitexec: quotes or specifiers in %r" % cmd)
    argv = []
    for word in cmd.split():
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m:
            argv.extend(env.get(m.group(1), "").split())
            continue
        argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                           lambda mm: env.get(mm.group(1), ""), word))
    return argv


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1].rstrip("/")
    s = parse_unit(sys.argv[2:])
    if s.get("Type", "simple") != "simple":
        raise SystemExit("unitexec: Type=%s" % s.get("Type"))
    starts = s.get("ExecStart", [])
    if len(starts) != 1:
        raise SystemExit("unitexec: %d ExecStart= lines" % len(starts))
    env = {}
    for spec in s.get("EnvironmentFile", []):
        env.update(read_env(root, spec))
    print(s.get("User", "root"))
    print(s.get("Group", ""))
    print(s.get("UMask", "0022"))
    mode = s.get("StateDirectoryMode", "0755")
    for d in s.get("StateDirectory", []):
        for p in d.split():
            print("state %s /var/lib/%s" % (mode, p))
    print("--")
    argv = expand(starts[0], env)
    for a in argv:
        if "\n" in a:
            raise SystemExit("unitexec: a newline in an argument")
        print(a)
    print("unitexec: " + " ".join(shlex.quote(a) for a in argv),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
