#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The README's run command: blkpolicyd live on this machine in dry-run mode.

It decides for every block device and says what it would change, writing
nothing. As root it then makes a scratch loop device of its own (a fresh
index, removed at the end) so the daemon's reaction to devices coming,
changing and going shows up in its log, and puts a load on it: a demo
policy (in a directory of its own, for the scratch devices only) follows
the load with [Dynamic], and the daemon says which scheduler it would
switch to, and back when the load stops. Each step waits for the
daemon's log line about it."""
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

# a script, not a test: tests/ holds the loop-device helper the tests use
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from blkptest.loop import LoopDevices, exit_on_signals, set_attr  # noqa: E402

blkpolicyd, policies = sys.argv[1], sys.argv[2]
SCRATCH_BASE = 900
# for the scratch devices only (loop900 on): the shipped policies have no
# [Dynamic] (docs/benchmarks.md says why), so the demo brings its own
DEMO_POLICY = """[Match]
name = loop9[0-9][0-9]
[Queue]
scheduler = none
[Dynamic]
enter = iops > 1000
enter_ticks = 2
leave = iops < 100
leave_ticks = 2
min_dwell_ticks = 0
[Busy]
scheduler = mq-deadline
"""
demo_dir = tempfile.mkdtemp(prefix="blkpolicyd-demo-")
with open(os.path.join(demo_dir, "99-demo-scratch-dynamic.policy"), "w") as f:
    f.write(DEMO_POLICY)
cmd = [blkpolicyd, "--dry-run", "--policy-dir", policies, "--policy-dir", "/etc/blkpolicyd/policies.d",
       "--policy-dir", demo_dir]
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


def load(dev, seconds):
    """4 KiB direct reads, as fast as they go: tens of thousands a second."""
    script = f"end=$((SECONDS+{seconds})); while [ $SECONDS -lt $end ]; do " \
             f"dd if=/dev/{dev} of=/dev/null bs=4k iflag=direct status=none; done"
    return subprocess.Popen(["bash", "-c", script])


try:
    wait_line("Managing")
    if os.geteuid() != 0:
        step("not root: skipping the scratch loop device (run with sudo to see hotplug decisions)")
    else:
        loops = LoopDevices(base=SCRATCH_BASE)
        exit_on_signals()
        step("LOOP_CTL_ADD: a new, empty loop device appears ('add' uevent)")
        dev = loops.add()
        wait_line(f"{dev}: [")
        step(f"the scratch device {dev} is set to mq-deadline, then a file is attached ('change' uevent)")
        set_attr(dev, "scheduler", "mq-deadline")
        loops.attach(dev)
        wait_line(f"{dev}: scheduler")
        step(f"{dev} set to none (what the demo policy's base wants), then loaded: 4 KiB direct reads for 6 s; "
             "the policy enters 'busy' after 2 ticks over 1000 IOPS, which wants mq-deadline")
        set_attr(dev, "scheduler", "none")
        reader = load(dev, 6)
        wait_line(f"{dev}: scheduler would change none -> mq-deadline", timeout=10)
        step("the load stops: back to 'base' after 2 ticks under 100 IOPS")
        reader.wait()
        wait_line(f"{dev}: busy -> base", timeout=10)
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
    subprocess.run(["rm", "-rf", demo_dir])

# the same command as above (the built-in policy dirs are not there in a
# source tree), and the client built beside the daemon to watch it with
blkpolicyctl = os.path.join(os.path.dirname(os.path.dirname(blkpolicyd)), "ctl", "blkpolicyctl")
print(f"""
Nothing was written. To keep it running:
  sudo {blkpolicyd} --dry-run --policy-dir {policies}
and watch it from another terminal:
  sudo {blkpolicyctl} top
To apply for real, drop --dry-run (see README.md, "Applying for real").""")
