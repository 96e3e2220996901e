# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs blkpolicyd --once --dry-run on a fixture machine with the shipped
policies and compares the JSON report with the checked-in golden file.
BLKPOLICYD_UPDATE_GOLDEN=1 rewrites the golden file instead.

meson runs one machine per test (-k MACHINE), as one test per golden file."""
import difflib
import json
import os
import subprocess

import pytest

MACHINES = ["kvm-6.18", "nvme-6.12", "ublk-nullb-6.12", "hdd-6.1", "dispatch-direct-7.2", "majors-6.12",
            "stacks-6.18", "cloud-7.3"]


@pytest.mark.parametrize("machine", MACHINES)
def test_golden(blkpolicyd, fixtures_dir, top, work, machine):
    tree = os.path.join(fixtures_dir, machine)
    golden = os.path.join(top, "tests", "golden", machine + ".json")
    state = os.path.join(work, "state")
    os.mkdir(state)
    # a machine with udevd's database has it under root/ (property= reads it)
    root = ["--root", os.path.join(tree, "root")] if os.path.isdir(os.path.join(tree, "root")) else []
    run = subprocess.run([blkpolicyd, "--once", "--dry-run", "--config", "/dev/null", *root,
                          "--policy-dir", os.path.join(top, "policies"),
                          "--sysfs-root", os.path.join(tree, "sys"),
                          "--proc-root", os.path.join(tree, "proc"),
                          "--debugfs-root", os.path.join(tree, "debug"),
                          "--state-dir", state], capture_output=True, text=True)
    assert run.returncode == 0, f"blkpolicyd failed ({run.returncode}):\n{run.stderr}"
    got = json.loads(run.stdout)
    assert os.listdir(state) == [], "--dry-run wrote to the state directory"

    text = json.dumps(got, indent=2, sort_keys=True) + "\n"
    if os.environ.get("BLKPOLICYD_UPDATE_GOLDEN"):
        with open(golden, "w") as f:
            f.write(text)
        print(f"updated {golden}")
        return
    with open(golden) as f:
        want = json.load(f)
    if got != want:
        diff = difflib.unified_diff(json.dumps(want, indent=2, sort_keys=True).splitlines(),
                                    text.splitlines(), "golden", "got", lineterm="")
        pytest.fail("\n".join(diff), pytrace=False)
    print(f"{len(got['devices'])} devices match {os.path.basename(golden)}")
