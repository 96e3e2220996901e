#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd --check-config: the shipped files pass; a broken policy or
config file fails with file:line on stderr; good files beside it still load."""
import os
import subprocess
import sys
import tempfile

blkpolicyd, top = sys.argv[1:3]
failures = 0
passed = 0


def check(name, cond, detail=""):
    global failures, passed
    if cond:
        passed += 1
        print(f"ok - {name}")
    else:
        failures += 1
        print(f"not ok - {name}\n{detail}")


def run(*args):
    return subprocess.run([blkpolicyd, *args], capture_output=True, text=True)


r = run("--check-config", "--config", os.path.join(top, "conf/blkpolicyd.conf"),
        "--policy-dir", os.path.join(top, "policies"))
shipped = sorted(f for f in os.listdir(os.path.join(top, "policies")) if f.endswith(".policy"))
check("shipped configuration and policies are valid", r.returncode == 0, r.stderr)
check("every shipped policy is listed", all(p in r.stdout for p in shipped), r.stdout)

with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "10-good.policy"), "w") as f:
        f.write("[Match]\nclass = loop\n[Queue]\nscheduler = none\n")
    with open(os.path.join(d, "20-bad.policy"), "w") as f:
        f.write("[Match]\nclass = loop\n[Queue]\nscheduler = none\nnr_requests = many\n")
    r = run("--check-config", "--config", "/dev/null", "--policy-dir", d)
    check("a broken policy fails the check", r.returncode != 0, r.stdout + r.stderr)
    check("the error names file:line", f"{d}/20-bad.policy:5:" in r.stderr, r.stderr)
    check("the good file still loads; files are counted, not errors",
          "1 policy loaded, 1 file rejected, 1 error" in r.stdout, r.stdout)

    conf = os.path.join(d, "bad.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nrestore_on_exit = perhaps\n")
    r = run("--check-config", "--config", conf, "--policy-dir", d)
    check("a broken config fails", r.returncode != 0 and f"{conf}:2:" in r.stderr, r.stderr)

    r = run("--check-config", "--config", os.path.join(d, "missing.conf"))
    check("an explicit --config that does not exist fails", r.returncode != 0, r.stderr)

check("--help exits 0", run("--help").returncode == 0)
check("an unknown option fails", run("--frobnicate").returncode != 0)
check("a stray argument fails", run("sda").returncode != 0)

print(f"{passed} passed, {failures} failed")
sys.exit(1 if failures else 0)
