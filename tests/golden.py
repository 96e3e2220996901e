#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs blkpolicyd --once --dry-run on a fixture machine with the shipped
policies and compares the JSON report with the checked-in golden file.
BLKPOLICYD_UPDATE_GOLDEN=1 rewrites the golden file instead."""
import difflib
import json
import os
import subprocess
import sys
import tempfile

blkpolicyd, machine, golden, policies = sys.argv[1:5]

with tempfile.TemporaryDirectory(prefix="blkpolicyd-golden-") as state:
    cmd = [blkpolicyd, "--once", "--dry-run", "--config", "/dev/null",
           "--policy-dir", policies,
           "--sysfs-root", os.path.join(machine, "sys"),
           "--proc-root", os.path.join(machine, "proc"),
           "--debugfs-root", os.path.join(machine, "debug"),
           "--state-dir", state]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"blkpolicyd failed ({run.returncode}):\n{run.stderr}")
    got = json.loads(run.stdout)
    if os.listdir(state):
        sys.exit("--dry-run wrote to the state directory")

text = json.dumps(got, indent=2, sort_keys=True) + "\n"
if os.environ.get("BLKPOLICYD_UPDATE_GOLDEN"):
    with open(golden, "w") as f:
        f.write(text)
    print(f"updated {golden}")
    sys.exit(0)

with open(golden) as f:
    want = json.load(f)
if got != want:
    diff = difflib.unified_diff(json.dumps(want, indent=2, sort_keys=True).splitlines(),
                                text.splitlines(), "golden", "got", lineterm="")
    print("\n".join(diff))
    sys.exit(1)
print(f"{len(got['devices'])} devices match {os.path.basename(golden)}")
