#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The README's run command: blkpolicyd live on this machine in dry-run mode.

It decides for every block device and says what it would change, writing
nothing. As root it then makes a scratch loop device of its own (a fresh
index, removed at the end) so the daemon's reaction to devices coming,
changing and going shows up in its log. Each step waits for the daemon's
log line about it."""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

# a script, not a test: tests/ holds the loop-device helper the tests use
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from blkptest.loop import LoopDevices, exit_on_signals, set_attr  # noqa: E402

blkpolicyd, policies = sys.argv[1], sys.argv[2]
cmd = [blkpolicyd, "--dry-run", "--policy-dir", policies, "--policy-dir", "/etc/blkpolicyd/policies.d"]
print("$ " + " ".join(cmd), flush=True)
daemon = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, bufsize=1)
lines = queue.Queue()


def pump():
    for line in daemon.stderr:
        print("  blkpolicyd: " + line.rstrip(), flush=True)
        lines.put(line)


threading.Thread(target=pump, daemon=True).start()


def wait_line(needle, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if needle in line:
            return
    print(f"(no log line with '{needle}' within {timeout}s)", flush=True)


def step(text):
    print(f"\n>>> {text}", flush=True)


try:
    wait_line("Managing")
    if os.geteuid() != 0:
        step("not root: skipping the scratch loop device (run with sudo to see hotplug decisions)")
    else:
        loops = LoopDevices(base=900)
        exit_on_signals()
        step("LOOP_CTL_ADD: a new, empty loop device appears ('add' uevent)")
        dev = loops.add()
        wait_line(f"{dev}: [")
        step(f"the scratch device {dev} is set to mq-deadline, then a file is attached ('change' uevent)")
        set_attr(dev, "scheduler", "mq-deadline")
        loops.attach(dev)
        wait_line(f"{dev}: scheduler")
        step(f"{dev} is detached ('change') and removed ('remove')")
        loops.detach(dev)
        wait_line(f"{dev}: [")
        loops.remove(dev)
        wait_line(f"{dev}: removed")
        loops.remove_all()
    step("SIGTERM: the daemon stops (in dry-run it had nothing to restore)")
finally:
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=10)

# the same command as above (the built-in policy dirs are not there in a
# source tree), and the client built beside the daemon to watch it with
blkpolicyctl = os.path.join(os.path.dirname(os.path.dirname(blkpolicyd)), "ctl", "blkpolicyctl")
print(f"""
Nothing was written. To keep it running:
  sudo {blkpolicyd} --dry-run --policy-dir {policies}
and watch it from another terminal:
  sudo {blkpolicyctl} top
To apply for real, drop --dry-run (see README.md, "Applying for real").""")
