#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The applier on real loop devices (root): writes run off the event loop,
in parallel, one pass per device at a time.
  - a storm of 300 new disks, SIGTERM in the middle of it: the stop waits
    for the writes in flight, then every disk is back at exactly what it
    had (the ones already changed and the ones never reached alike), and
    no record is left;
  - a disk removed while its pass waits in the queue (one writer, the
    first disk's scheduler write held 2 s by fault injection): the queued
    pass is dropped, the daemon stays consistent, nothing is left of it;
  - the start-up pass's only disk removed while its write is held:
    READY=1 comes all the same (it waited for the next event)."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import (require_fault_injection, Daemon, LoopDevices, Results, control_call, record_path, require_root,  # noqa: E402
                     scheduler, set_attr, sysfs, wait_for)

require_root()
blkpolicyd = sys.argv[1]
require_fault_injection(blkpolicyd)
loops = LoopDevices(base=2800)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-storm-")
state = os.path.join(work, "state")
policies = os.path.join(work, "policies")
sock = os.path.join(work, "control.sock")
os.mkdir(policies)
GLOB = "loop2[89][0-9][0-9]"
with open(os.path.join(policies, "50-storm.policy"), "w") as f:
    f.write(f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 1024\n")


def start(config="", faults=""):
    conf = os.path.join(work, "blkpolicyd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\ndrift_checks_per_tick = 0\n" + config)
    d = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies, "--state-dir", state,
                                  "--device", GLOB, "--socket", sock], env={"BLKPOLICYD_FAULTS": faults},
               append_log=True)
    d.wait_for("READY=1", timeout=60)
    return d


def snapshot(dev):
    return scheduler(dev), sysfs(dev, "read_ahead_kb")


daemon = None
try:
    ref = loops.add()
    default = snapshot(ref)
    loops.remove(ref)

    # 1. SIGTERM in the middle of a storm
    daemon = start()
    storm = [loops.add() for _ in range(300)]
    wait_for(lambda: sum(scheduler(d) == "mq-deadline" for d in storm) >= 30, 60, "the storm to be under way")
    daemon.proc.send_signal(signal.SIGTERM)
    rc = daemon.proc.wait(timeout=120)
    left = [d for d in storm if snapshot(d) != default]
    records = os.listdir(os.path.join(state, "devices"))
    res.check(f"SIGTERM mid-storm: exit 0, all 300 disks back at {default}, no record left",
              rc == 0 and not left and not records, (rc, left[:5], records[:5]))
    for d in storm:
        loops.remove(d)

    # 2. a disk removed while its pass waits behind a held write
    daemon = start("apply_parallelism = 1\n", faults="write:*/loop2[89]*/queue/scheduler:DELAY=2000:1")
    held = loops.add()          # the first scheduler write: held 2 s in the one writer
    victim = loops.add()        # its pass waits in the queue behind it
    victim_record = record_path(state, victim)
    loops.remove(victim)
    wait_for(lambda: scheduler(held) == "mq-deadline", 10, f"{held}'s held write to land")
    wait_for(lambda: "dropped its queued pass" in daemon.text(), 10, "the queued pass to be dropped")
    known = {d["name"] for d in control_call(sock, {"command": "devices"})["result"]}
    res.check("a disk removed while its pass is queued: the pass is dropped, the disk forgotten, no record",
              victim not in known and held in known and not os.path.exists(victim_record)
              and daemon.proc.poll() is None, (known, os.path.exists(victim_record)))
    rc = daemon.stop()
    res.check("... and the stop puts back the other, exit 0", rc == 0 and snapshot(held) == default,
              (rc, snapshot(held)))

    # 3. the first pass's last disk removed while its write is held: READY=1 still comes
    loops.remove(held)          # the lone disk is the whole first pass
    lone = loops.add()
    conf = os.path.join(work, "blkpolicyd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\ndrift_checks_per_tick = 0\napply_parallelism = 1\n")
    daemon = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies, "--state-dir", state,
                                       "--device", GLOB, "--socket", sock],
                    env={"BLKPOLICYD_FAULTS": "write:*/loop2[89]*/queue/scheduler:DELAY=2000:1"}, append_log=True)

    def threads():
        with open(f"/proc/{daemon.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("Threads:")).split()[1]) >= 2
    wait_for(threads, 10, "the writer to take the first pass")
    loops.remove(lone)
    try:
        daemon.wait_for("READY=1", timeout=10)
        ready = True
    except Exception:
        ready = False
    res.check("the first pass's only disk removed while its write is held: READY=1 all the same", ready,
              daemon.text()[-2000:])
    daemon.stop()

    # 4. a disk removed and added again under the same name while its pass
    # holds (its record save held 2 s): the pass must not write to the new
    # disk, whose original then stays what goes back at stop
    twin = loops.add()
    daemon = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies, "--state-dir", state,
                                       "--device", GLOB, "--socket", sock],
                    env={"BLKPOLICYD_FAULTS": "save:*:DELAY=2000:1"}, append_log=True)
    wait_for(threads, 10, "the writer to take the first pass")
    loops.remove(twin)
    again = loops.add()         # the first free index: the same name, another queue
    set_attr(again, "read_ahead_kb", "256")    # its admin's original, before blkpolicyd sees it
    daemon.wait_for("READY=1", timeout=30)
    wait_for(lambda: scheduler(again) == "mq-deadline", 10, f"{again} to be set as a new disk")
    rc = daemon.stop()
    res.check("a disk replaced under its name while its pass held: the new one gets back exactly its own "
              "originals at stop", again == twin and rc == 0 and snapshot(again) == (default[0], "256"),
              (again, twin, rc, snapshot(again), daemon.text()[-2000:]))
finally:
    if daemon:
        daemon.cleanup()
    loops.remove_all()
    shutil.rmtree(work, ignore_errors=True)
res.finish()
