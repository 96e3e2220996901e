# SPDX-License-Identifier: LGPL-2.1-or-later
"""Small bugs a review found, one test each, on a fixture tree (no root):
each test failed before its fix."""
import json
import os
import re
import subprocess

from blkptest.daemon import fixture_roots


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_pause_all_shows_in_metrics(daemons, kvm_fixture, top):
    """"pause" (all devices) shows in blkpolicyd_device_paused, as "pause DEV" does, and in the host's sum."""
    work = daemons.work
    conf = write(os.path.join(work, "pause.conf"), "[Daemon]\ntick_interval_ms = 100\nmetrics_per_device = yes\n")
    daemons.start(["--dry-run", "--config", conf, "--policy-dir", f"{top}/policies", *fixture_roots(kvm_fixture),
                   "--state-dir", os.path.join(work, "state"), "--socket", daemons.sock])
    daemons.call({"command": "pause"})
    text = daemons.call({"command": "metrics"})["result"]["text"]
    assert 'blkpolicyd_device_paused{device="vda"} 1\n' in text, \
        [line for line in text.splitlines() if "paused" in line]
    managed = len(re.findall(r'^blkpolicyd_device_paused\{device="[^"]*"\} 1$', text, re.M))
    assert managed >= 1 and f'\nblkpolicyd_devices_by_state{{state="paused"}} {managed}\n' in text, \
        [line for line in text.splitlines() if "paused" in line]


def test_log_level_given_wins(blkpolicyd, kvm_fixture, top, work):
    """--log-level=info, the default level, named on purpose: the config's log_level=err does not win."""
    conf = write(os.path.join(work, "quiet.conf"), "[Daemon]\nlog_level = err\n")
    p = subprocess.run([blkpolicyd, "--once", "--dry-run", "--log-level=info", "--config", conf,
                        "--policy-dir", f"{top}/policies", *fixture_roots(kvm_fixture),
                        "--state-dir", os.path.join(work, "state")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "vda: [" in p.stderr, \
        f"--log-level=info over log_level=err: the decisions are logged\n{p.stderr}"


def test_once_reads_udev_properties(blkpolicyd, kvm_fixture, work):
    """--once has no udev monitor, yet property= matches from udev's database (<root>/run/udev/data)."""
    root = os.path.join(work, "root")
    write(os.path.join(root, "run/udev/data/b254:0"), "I:1234\nE:ID_PATH=pci-0000:00:02.0\nE:ID_BLKPOLICY_TEST=fast\n")
    policies = os.path.join(work, "property-policies")
    write(os.path.join(policies, "90-property.policy"), "[Match]\nproperty = ID_BLKPOLICY_TEST=fast\n\n"
                                                          "[Queue]\nread_ahead_kb = 512\n")
    p = subprocess.run([blkpolicyd, "--once", "--dry-run", "--config", "/dev/null", "--policy-dir", policies,
                        *fixture_roots(kvm_fixture), "--root", root, "--state-dir", os.path.join(work, "state")],
                       capture_output=True, text=True, timeout=30)
    devs = {d["name"]: d for d in json.loads(p.stdout)["devices"]} if p.returncode == 0 else {}
    assert devs.get("vda", {}).get("policy") == "90-property.policy" \
        and devs.get("loop0", {}).get("policy") is None, \
        f"--once: property= matches the udev database's entry\n{p.stdout}{p.stderr}"


def test_run_modes_are_one_per_run(blkpolicyd):
    # two modes, or --record with a mode that has no ticks, are refused
    # rather than one silently winning or the recording staying empty
    for args, why in ((["--once", "--restore"], "exclude each other"),
                      (["--check-config", "--replay=/dev/null"], "exclude each other"),
                      (["--once", "--record=/nonexistent/x.jsonl"], "--record records the daemon's ticks")):
        p = subprocess.run([blkpolicyd, "--dry-run", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 1 and why in p.stderr, f"{args}: refused, '{why}': {(p.returncode, p.stderr)}"
