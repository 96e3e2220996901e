#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon in the foreground on loop devices the test creates: devices
added (LOOP_CTL_ADD: 'add') and attached (losetup: 'change') while it runs
are set within 1 s; a removed device is forgotten; SIGTERM puts back every
original setting. Readiness comes from sd_notify on a socket the test binds."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import Daemon, LoopDevices, Results, record_path, require_root, scheduler, set_attr, sysfs, wait_for  # noqa: E402

require_root()
blkpolicyd = sys.argv[1]
loops = LoopDevices(base=400)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-daemon-")
state = os.path.join(work, "state")
policies = os.path.join(work, "policies")
os.mkdir(policies)
glob = "loop4[0-9][0-9]"
with open(os.path.join(policies, "50-test.policy"), "w") as f:
    f.write(f"[Match]\nname = {glob}\n\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n")

# one device present before the daemon starts
first = loops.add()
loops.attach(first)
defaults = {"scheduler": scheduler(first), "read_ahead_kb": sysfs(first, "read_ahead_kb")}

daemon = Daemon(blkpolicyd, work, ["--config", "/dev/null", "--policy-dir", policies,
                                   "--state-dir", state, "--device", glob, "--log-level", "debug"])
daemon_log = daemon.text

try:
    ready = daemon.wait_for("READY=1")
    res.check("READY=1 after the first pass", "STATUS=Managing 1 block devices" in ready, ready)
    res.check("device present at start is set", scheduler(first) == "mq-deadline"
              and sysfs(first, "read_ahead_kb") == "256")

    # add event: LOOP_CTL_ADD
    t0 = time.monotonic()
    added = loops.add()
    try:
        t1 = wait_for(lambda: scheduler(added) == "mq-deadline", 1.0, f"{added} to get mq-deadline")
        res.check(f"added device set within 1 s ({(t1 - t0) * 1000:.0f} ms)", True)
    except AssertionError as e:
        res.check("added device set within 1 s", False, str(e))

    # change event: losetup attach re-classifies and re-applies
    set_attr(added, "scheduler", "none")
    t0 = time.monotonic()
    loops.attach(added)
    try:
        t1 = wait_for(lambda: scheduler(added) == "mq-deadline" and sysfs(added, "read_ahead_kb") == "256",
                      1.0, f"{added} to be set again after attach")
        res.check(f"attached device set within 1 s ({(t1 - t0) * 1000:.0f} ms)", True)
    except AssertionError as e:
        res.check("attached device set within 1 s", False, str(e))

    # remove event: the device and its recorded originals are forgotten
    gone = loops.add()
    gone_record = record_path(state, gone)
    wait_for(lambda: os.path.exists(gone_record), 1.0, f"originals of {gone}")
    loops.remove(gone)
    try:
        wait_for(lambda: not os.path.exists(gone_record), 1.0,
                 f"originals of {gone} to be dropped")
        res.check("removed device forgotten", True)
    except AssertionError as e:
        res.check("removed device forgotten", False, str(e))

    res.check("the daemon is still running", daemon.proc.poll() is None, daemon_log())

    # SIGTERM: everything back as the kernel had it
    rc = daemon.stop()
    res.check("exits 0 on SIGTERM", rc == 0, daemon_log())
    for name in (first, added):
        res.check(f"{name}: scheduler restored", scheduler(name) == defaults["scheduler"], scheduler(name))
        res.check(f"{name}: read_ahead_kb restored", sysfs(name, "read_ahead_kb") == defaults["read_ahead_kb"])
    left = os.listdir(os.path.join(state, "devices")) if os.path.isdir(os.path.join(state, "devices")) else []
    res.check("no originals left after restoring", left == [], left)
    res.check("every change is one log line", daemon_log().count(f"{first}: scheduler none -> mq-deadline") == 1,
              daemon_log())
finally:
    daemon.cleanup()
    loops.remove_all()
    subprocess.run(["rm", "-rf", work])

res.finish()
