#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Small bugs a review found, one check each, on a fixture tree (no root):
each check failed before its fix.

    regressions.py BLKPOLICYD FIXTURE SOURCE_ROOT
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

blkpolicyd, fixture, top = sys.argv[1:4]
failed = 0
work = tempfile.mkdtemp(prefix="blkpolicyd-regressions-")
roots = ["--sysfs-root", f"{fixture}/sys", "--proc-root", f"{fixture}/proc", "--debugfs-root", f"{fixture}/debug"]


def check(name, ok, detail=""):
    global failed
    print(f"{'ok' if ok else 'not ok'} - {name}")
    if not ok:
        failed += 1
        print(f"  {detail}"[:4000])


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def call(sock_path, req):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sock_path)
        s.sendall(json.dumps(req).encode() + b"\n")
        return json.loads(s.makefile("rb").readline())


def pause_all_in_metrics():
    """"pause" (all devices) shows in blkpolicyd_device_paused, as "pause DEV" does."""
    sock_path = os.path.join(work, "control.sock")
    conf = write(os.path.join(work, "pause.conf"), "[Daemon]\ntick_interval_ms = 100\n")
    with open(os.path.join(work, "pause.log"), "w+") as log:
        daemon = subprocess.Popen([blkpolicyd, "--dry-run", "--config", conf, "--policy-dir", f"{top}/policies",
                                   *roots, "--state-dir", os.path.join(work, "state"), "--socket", sock_path],
                                  stderr=log)
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(sock_path) and daemon.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            call(sock_path, {"command": "pause"})
            text = call(sock_path, {"command": "metrics"})["result"]["text"]
            check("pause all: blkpolicyd_device_paused is 1", 'blkpolicyd_device_paused{device="vda"} 1\n' in text,
                  [line for line in text.splitlines() if "paused" in line])
        finally:
            daemon.terminate()
            daemon.wait(10)


def log_level_given_wins():
    """--log-level=info, the default level, named on purpose: the config's log_level=err does not win."""
    conf = write(os.path.join(work, "quiet.conf"), "[Daemon]\nlog_level = err\n")
    p = subprocess.run([blkpolicyd, "--once", "--dry-run", "--log-level=info", "--config", conf,
                        "--policy-dir", f"{top}/policies", *roots, "--state-dir", os.path.join(work, "state")],
                       capture_output=True, text=True, timeout=30)
    check("--log-level=info over log_level=err: the decisions are logged",
          p.returncode == 0 and "vda: [" in p.stderr, p.stderr)


def once_reads_udev_properties():
    """--once has no udev monitor, yet property= matches from udev's database (<root>/run/udev/data)."""
    root = os.path.join(work, "root")
    write(os.path.join(root, "run/udev/data/b254:0"), "I:1234\nE:ID_PATH=pci-0000:00:02.0\nE:ID_BLKPOLICY_TEST=fast\n")
    policies = os.path.join(work, "property-policies")
    write(os.path.join(policies, "90-property.policy"), "[Match]\nproperty = ID_BLKPOLICY_TEST=fast\n\n"
                                                          "[Queue]\nread_ahead_kb = 512\n")
    p = subprocess.run([blkpolicyd, "--once", "--dry-run", "--config", "/dev/null", "--policy-dir", policies, *roots,
                        "--root", root, "--state-dir", os.path.join(work, "state")],
                       capture_output=True, text=True, timeout=30)
    devs = {d["name"]: d for d in json.loads(p.stdout)["devices"]} if p.returncode == 0 else {}
    check("--once: property= matches the udev database's entry",
          devs.get("vda", {}).get("policy") == "90-property.policy"
          and devs.get("loop0", {}).get("policy") is None, p.stdout + p.stderr)


try:
    pause_all_in_metrics()
    log_level_given_wins()
    once_reads_udev_properties()
finally:
    shutil.rmtree(work, ignore_errors=True)
print(f"{failed} failed")
sys.exit(1 if failed else 0)
