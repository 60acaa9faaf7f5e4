#!/usr/bin/env python3
"""pg_check.py: the run and exit-code checks after the failover tests
(test_failover_pg, test_db_faults_ha_pg; beside pg_lib.sh).

The submitters wrote one line per submission into the ids files:
"ID NAME CODE" when `gpupool submit` printed ID for a job that runs
`echo "ran NAME"; exit CODE`, "FAILED NAME" when it failed. Through the
leader's API (bounded by --wait-s) this checks:

  - no submission failed, and no id was printed twice;
  - every job ends (succeeded or failed) with its own name, its own exit
    code, and its own log line once;
  - the agents started each job once, and that start was its last
    attempt (an attempt a dead leader assigned and committed but whose
    answer never reached the agent is requeued: one more attempt, never
    a second run). The agents' logs say "job started job=ID attempt=N";
  - the pool has no job that no submitter printed (a repeated submission
    that made a second job, or an id the submitter lost), but the ids
    given with --also.

Prints each problem (40 at most) and a count on stderr; exits 1 when
there is any, 0 otherwise.
"""
import argparse
import json
import sys
import time
import urllib.request


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="the leader's URL")
    ap.add_argument("--token", required=True, help="an admin token")
    ap.add_argument("--wait-s", type=int, required=True,
                    help="how long jobs may take to end (plus 0.5 s each)")
    ap.add_argument("--also", type=int, action="append", default=[],
                    help="a job of the test's own, not a submitter's")
    ap.add_argument("ids", help="the submitters' lines, one file")
    ap.add_argument("agent_logs", nargs="+", help="the agents' logs")
    args = ap.parse_args()

    def get(path):
        req = urllib.request.Request(
            args.url + path,
            headers={"Authorization": "Bearer " + args.token})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    bad = []
    want = {}
    for line in open(args.ids):
        f = line.split()
        if not f:
            continue
        if f[0] == "FAILED":
            bad.append("submission %s failed" % " ".join(f[1:]))
            continue
        jid, name, code = int(f[0]), f[1], int(f[2])
        if jid in want:
            bad.append("job id %d printed twice (%s, %s)"
                       % (jid, want[jid][0], name))
        want[jid] = (name, code)

    final_attempt = {}
    deadline = time.time() + args.wait_s + len(want) * 0.5
    for jid, (name, code) in sorted(want.items()):
        while True:
            j = json.loads(get("/v1/jobs/%d" % jid))
            if (j["state"] in ("succeeded", "failed", "cancelled")
                    or time.time() > deadline):
                break
            time.sleep(0.2)
        log = get("/v1/jobs/%d/log" % jid)
        if j["name"] != name:
            bad.append("job %d is %s, not %s" % (jid, j["name"], name))
        if (j["state"] not in ("succeeded", "failed")
                or j.get("exit_code") != code):
            bad.append("job %d (%s): state %s exit %s, want exit %d"
                       % (jid, name, j["state"], j.get("exit_code"), code))
        if log.count("ran " + name) != 1:
            bad.append("job %d (%s): log %r" % (jid, name, log[:200]))
        final_attempt[jid] = j.get("attempts")

    starts = {}
    for path in args.agent_logs:
        for line in open(path, errors="replace"):
            if "job started job=" in line:
                rest = line.split("job started job=")[1].split()
                attempt = int(rest[1].split("=")[1])
                starts.setdefault(int(rest[0]), []).append(attempt)
    for jid in sorted(want):
        if starts.get(jid, []) != [final_attempt[jid]]:
            bad.append("job %d: attempts started by the agents %s, its "
                       "last attempt %s"
                       % (jid, starts.get(jid), final_attempt[jid]))

    alljobs = json.loads(get("/v1/jobs?all=1&limit=100000"))
    jobs = alljobs["jobs"] if isinstance(alljobs, dict) else alljobs
    extra = [j["id"] for j in jobs
             if j["id"] not in want and j["id"] not in args.also]
    if extra:
        bad.append("jobs no submitter printed: %s" % extra[:20])

    for b in bad[:40]:
        print(b, file=sys.stderr)
    print("%d jobs checked, %d problems" % (len(want), len(bad)),
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
