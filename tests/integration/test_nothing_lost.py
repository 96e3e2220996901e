#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Nothing lost, on real loop devices the test creates (root): the kernel's
own elevator switch resets nr_requests and replaces iosched/, so this is
the proof behind tests/nothing-lost.py's fake kernel. Each case asserts the
exact sysfs values after the daemon is gone:

  a switch away from mq-deadline with nr_requests and fifo_batch set, and
  a switch from none with nr_requests set; SIGKILL at the scheduler write
  and at the next write, then restart + SIGTERM, and --restore; a disk
  removed and added again at the same number while the daemon is stopped
  (SIGSTOP) and after a SIGKILL; a reload that drops a policy; the admin's
  change after blkpolicyd's, kept at stop."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import (require_fault_injection, Daemon, LoopDevices, Results, record_path, require_root, scheduler, set_attr,  # noqa: E402
                     sysfs, wait_for)

require_root()
blkpolicyd = sys.argv[1]
require_fault_injection(blkpolicyd)
loops = LoopDevices(base=2500)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-nothing-lost-")
state = os.path.join(work, "state")
policies = os.path.join(work, "policies")
GLOB = "loop25[0-9][0-9]"
a, b = loops.add(), loops.add()
for d in (a, b):
    loops.attach(d)


def policy(name, text):
    os.makedirs(policies, exist_ok=True)
    with open(os.path.join(policies, name), "w") as f:
        f.write(text)


def setup():
    """An admin's disks: a on mq-deadline with its own tunables, b on none."""
    set_attr(a, "scheduler", "mq-deadline")
    set_attr(a, "nr_requests", "50")
    set_attr(a, "iosched/fifo_batch", "7")
    set_attr(a, "read_ahead_kb", "128")
    set_attr(b, "scheduler", "none")
    set_attr(b, "nr_requests", "100")
    set_attr(b, "read_ahead_kb", "256")
    shutil.rmtree(policies, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    policy("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = none\nread_ahead_kb = 4096\n")
    policy("60-b.policy", f"[Match]\nname = {b}\n[Queue]\nscheduler = bfq\n")
    return snapshot()


def snapshot():
    s = {}
    for d in (a, b):
        s[d] = {"scheduler": scheduler(d), "nr_requests": sysfs(d, "nr_requests"),
                "read_ahead_kb": sysfs(d, "read_ahead_kb")}
    s[a]["fifo_batch"] = sysfs(a, "iosched/fifo_batch") if scheduler(a) == "mq-deadline" else None
    return s


def args(*extra):
    return ["--config", "/dev/null", "--policy-dir", policies, "--state-dir", state, "--device", GLOB,
            "--socket", os.path.join(work, "control.sock"), *extra]


def start(faults=""):
    d = Daemon(blkpolicyd, work, args(), env={"BLKPOLICYD_FAULTS": faults}, append_log=True)
    if not faults.endswith("KILL"):
        d.wait_for("READY=1", timeout=30)
    return d


def applied():
    return scheduler(a) == "none" and sysfs(a, "read_ahead_kb") == "4096" and scheduler(b) == "bfq"


daemon = None
try:
    # 1. switches: everything the kernel resets is back at stop
    original = setup()
    daemon = start()
    res.check("applied", applied(), snapshot())
    res.check("the kernel's switch reset nr_requests", sysfs(a, "nr_requests") != "50", sysfs(a, "nr_requests"))
    rc = daemon.stop()
    res.check("SIGTERM: the scheduler, nr_requests=50 and fifo_batch=7 are back; b's nr_requests=100 too",
              rc == 0 and snapshot() == original, (snapshot(), original))

    # 2. SIGKILL at exact steps; restart + SIGTERM, or --restore
    for what, fault in (("at the scheduler write", f"write:*/{a}/queue/scheduler:KILL"),
                        ("after the switch, at the next write", f"write:*/{a}/queue/read_ahead_kb:KILL")):
        for how in ("restart + SIGTERM", "--restore"):
            original = setup()
            daemon = start(fault)
            rc = daemon.proc.wait(timeout=30)
            if how == "--restore":
                r = subprocess.run([blkpolicyd, "--restore", *args()], capture_output=True, text=True, timeout=60)
                rc2 = r.returncode
            else:
                daemon = start()
                rc2 = daemon.stop()
            res.check(f"SIGKILL {what}; {how}: every original back",
                      rc == -signal.SIGKILL and rc2 == 0 and snapshot() == original, (rc, rc2, snapshot(), original))

    # 3. removed and added again at the same number while the daemon is stopped
    original = setup()
    daemon = start()
    record = record_path(state, a)
    daemon.proc.send_signal(signal.SIGSTOP)
    loops.remove(a)
    assert loops.add() == a, "the index came back"     # fresh queue, the kernel's defaults
    loops.attach(a)
    new_defaults = {"scheduler": scheduler(a), "read_ahead_kb": sysfs(a, "read_ahead_kb")}
    daemon.proc.send_signal(signal.SIGCONT)
    try:
        wait_for(lambda: sysfs(a, "read_ahead_kb") == "4096", 5, f"the new {a} to be set")
        res.check("the new disk at the same number is managed", True)
    except AssertionError as e:
        res.check("the new disk at the same number is managed", False, str(e))
    rc = daemon.stop()
    res.check("at stop the new disk gets its own defaults back, not the old disk's originals",
              rc == 0 and scheduler(a) == new_defaults["scheduler"] and
              sysfs(a, "read_ahead_kb") == new_defaults["read_ahead_kb"], (snapshot(), new_defaults))
    res.check("no record left", not os.path.exists(record))

    # ... and after a SIGKILL: the record on disk is the old queue's
    original = setup()
    daemon = start()
    daemon.cleanup()        # SIGKILL
    loops.remove(a)
    assert loops.add() == a
    loops.attach(a)
    new_defaults = {"scheduler": scheduler(a), "read_ahead_kb": sysfs(a, "read_ahead_kb")}
    daemon = start()
    rc = daemon.stop()
    res.check("after SIGKILL, a re-created disk never gets the old disk's values",
              rc == 0 and scheduler(a) == new_defaults["scheduler"]
              and sysfs(a, "read_ahead_kb") == new_defaults["read_ahead_kb"]
              and "was an earlier disk's" in daemon.text(), (snapshot(), new_defaults))

    # 4. a reload that drops a policy puts its settings back while running
    original = setup()
    daemon = start()
    os.unlink(os.path.join(policies, "60-b.policy"))
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_for("READY=1")
    res.check("a dropped policy's disk is put back on reload", snapshot()[b] == original[b], snapshot()[b])

    # 5. the admin changes the scheduler after blkpolicyd: kept at stop
    set_attr(a, "scheduler", "kyber")
    rc = daemon.stop()
    res.check("the admin's kyber stays; blkpolicyd's read_ahead_kb goes back",
              rc == 0 and scheduler(a) == "kyber" and sysfs(a, "read_ahead_kb") == "128", snapshot())
finally:
    if daemon:
        daemon.cleanup()
    loops.remove_all()
    shutil.rmtree(work, ignore_errors=True)
res.finish()
