#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""--once on a loop device the test creates: settings really change in
sysfs, originals are recorded, a second run writes nothing, --dry-run
writes nothing."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import LoopDevices, Results, record_path, require_root, scheduler, set_attr, sysfs  # noqa: E402

require_root()
blkpolicyd = sys.argv[1]
loops = LoopDevices(base=300)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-once-")
state = os.path.join(work, "state")
policies = os.path.join(work, "policies")
os.mkdir(policies)

dev = loops.add()
loops.attach(dev)
other = loops.add()   # matched by --device, not by the policy: must stay untouched
with open(os.path.join(policies, "50-test.policy"), "w") as f:
    f.write(f"[Match]\nname = {dev}\n\n[Queue]\nscheduler = none\nread_ahead_kb = 512\nnr_requests = 64\n")

set_attr(dev, "scheduler", "mq-deadline")
set_attr(other, "scheduler", "mq-deadline")
before = {a: sysfs(dev, a) for a in ("read_ahead_kb", "nr_requests")}


def once(*extra, trace=None):
    cmd = [blkpolicyd, "--once", "--config", "/dev/null", "--policy-dir", policies,
           "--state-dir", state, "--device", f"loop{loops.base // 100}[0-9][0-9]", *extra]
    env = dict(os.environ)
    if trace:
        cmd = ["strace", "-f", "-qq", "-e", "trace=openat", "-o", trace] + cmd
        # LeakSanitizer cannot run under ptrace; the untraced runs check leaks
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(r.stderr)
    return r.returncode, json.loads(r.stdout or "{}"), r.stderr


def sysfs_writes(trace):
    with open(trace) as f:
        return [line for line in f if "/sys/" in line and ("O_WRONLY" in line or "O_RDWR" in line)]


def settings(report, name):
    for d in report.get("devices", []):
        if d["name"] == name:
            return d
    return {}


# dry run first: plans, writes nothing
trace = os.path.join(work, "dry.trace")
rc, rep, _ = once("--dry-run", trace=trace)
d = settings(rep, dev)
res.check("dry run exits 0", rc == 0)
res.check("dry run plans the scheduler", d.get("settings", {}).get("scheduler", {}).get("result") == "planned", d)
res.check("dry run leaves sysfs as it was", scheduler(dev) == "mq-deadline")
res.check("dry run opens nothing for writing", sysfs_writes(trace) == [], sysfs_writes(trace))
res.check("dry run records no originals", not os.path.exists(record_path(state, dev)))

# the real run
rc, rep, err = once()
d = settings(rep, dev)
s = d.get("settings", {})
res.check("apply exits 0", rc == 0, err)
res.check("report: scheduler applied", s.get("scheduler", {}).get("result") == "applied", s)
res.check("report: current is the value read back", s.get("scheduler", {}).get("current") == "none", s)
res.check("sysfs: scheduler is none", scheduler(dev) == "none")
res.check("sysfs: read_ahead_kb is 512", sysfs(dev, "read_ahead_kb") == "512")
res.check("sysfs: nr_requests is 64 (set after the scheduler)", sysfs(dev, "nr_requests") == "64")
res.check("report: every setting applied", all(v["result"] == "applied" for v in s.values()), s)
res.check("report: the policy is named", d.get("policy") == "50-test.policy", d)
res.check("device outside the policy untouched", scheduler(other) == "mq-deadline")
o = settings(rep, other)
res.check("device outside the policy reported unmatched", o.get("policy") is None and o.get("settings") == {}, o)
res.check("devices outside --device are not reported", {x["name"] for x in rep["devices"]} == {dev, other},
          [x["name"] for x in rep["devices"]])

orig_path = record_path(state, dev)
orig = open(orig_path).read() if os.path.exists(orig_path) else ""
res.check("originals recorded before the first change",
          "\nscheduler mq-deadline none -\n" in orig and f"\nread_ahead_kb {before['read_ahead_kb']} 512 -\n" in orig, orig)

# a second pass finds everything in place and writes nothing
trace = os.path.join(work, "second.trace")
rc, rep, _ = once(trace=trace)
s = settings(rep, dev).get("settings", {})
res.check("second run: every setting unchanged", s and all(v["result"] == "unchanged" for v in s.values()), s)
res.check("second run: no sysfs file opened for writing", sysfs_writes(trace) == [], sysfs_writes(trace))
orig2 = open(orig_path).read() if os.path.exists(orig_path) else ""
res.check("second run keeps the first originals, not its own values", orig2 == orig, orig2)

loops.remove_all()
subprocess.run(["rm", "-rf", work])
res.finish()
