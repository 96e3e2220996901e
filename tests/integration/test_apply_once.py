# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd --once on loop devices the test creates: a dry run plans and
writes nothing; the real run applies and records the originals first; a
second run finds everything in place and opens no sysfs file for writing.
A device matched by --device but not by the policy stays untouched.

The tests run in file order on the same devices and state."""
import json
import os
import subprocess

import pytest

from blkptest.loop import record_path, scheduler, set_attr, sysfs

LOOP_BASE = 300


@pytest.fixture(scope="module")
def env(loops, module_work, blkpolicyd):
    state = os.path.join(module_work, "state")
    policies = os.path.join(module_work, "policies")
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
               "--state-dir", state, "--device", f"loop{LOOP_BASE // 100}[0-9][0-9]", *extra]
        env = dict(os.environ)
        if trace:
            cmd = ["strace", "-f", "-qq", "-e", "trace=openat", "-o", trace] + cmd
            # LeakSanitizer cannot run under ptrace; the untraced runs check leaks
            env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        print(r.stderr)
        return r.returncode, json.loads(r.stdout or "{}"), r.stderr

    return {"work": module_work, "state": state, "dev": dev, "other": other, "before": before, "once": once}


def sysfs_writes(trace):
    with open(trace) as f:
        return [line for line in f if "/sys/" in line and ("O_WRONLY" in line or "O_RDWR" in line)]


def settings(report, name):
    for d in report.get("devices", []):
        if d["name"] == name:
            return d
    return {}


def test_dry_run_plans_and_writes_nothing(env):
    dev = env["dev"]
    trace = os.path.join(env["work"], "dry.trace")
    rc, rep, _ = env["once"]("--dry-run", trace=trace)
    d = settings(rep, dev)
    assert rc == 0
    assert d.get("settings", {}).get("scheduler", {}).get("result") == "planned", d
    assert scheduler(dev) == "mq-deadline", "the dry run leaves sysfs as it was"
    assert sysfs_writes(trace) == [], "the dry run opens nothing for writing"
    assert not os.path.exists(record_path(env["state"], dev)), "the dry run records no originals"


def test_apply(env):
    dev, other = env["dev"], env["other"]
    rc, rep, err = env["once"]()
    d = settings(rep, dev)
    s = d.get("settings", {})
    assert rc == 0, err
    assert s.get("scheduler", {}).get("result") == "applied", s
    assert s.get("scheduler", {}).get("current") == "none", f"current is the value read back: {s}"
    assert scheduler(dev) == "none"
    assert sysfs(dev, "read_ahead_kb") == "512"
    assert sysfs(dev, "nr_requests") == "64", "nr_requests is set after the scheduler"
    assert all(v["result"] == "applied" for v in s.values()), s
    assert d.get("policy") == "50-test.policy", d
    assert scheduler(other) == "mq-deadline", "a device outside the policy is untouched"
    o = settings(rep, other)
    assert o.get("policy") is None and o.get("settings") == {}, f"reported unmatched: {o}"
    assert {x["name"] for x in rep["devices"]} == {dev, other}, "devices outside --device are not reported"
    orig_path = record_path(env["state"], dev)
    orig = open(orig_path).read() if os.path.exists(orig_path) else ""
    assert "\nscheduler mq-deadline none -\n" in orig \
        and f"\nread_ahead_kb {env['before']['read_ahead_kb']} 512 -\n" in orig, \
        f"originals recorded before the first change: {orig}"
    env["orig"] = orig


def test_second_run_writes_nothing(env):
    dev = env["dev"]
    trace = os.path.join(env["work"], "second.trace")
    rc, rep, _ = env["once"](trace=trace)
    s = settings(rep, dev).get("settings", {})
    assert s and all(v["result"] == "unchanged" for v in s.values()), s
    assert sysfs_writes(trace) == [], "no sysfs file opened for writing"
    orig_path = record_path(env["state"], dev)
    orig2 = open(orig_path).read() if os.path.exists(orig_path) else ""
    assert orig2 == env.get("orig"), "the second run keeps the first originals, not its own values"
