#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Real-kernel races on loop devices the test creates, asserted from sysfs:
- the daemon stopped (SIGSTOP) for 4 s during a burst of 1000 LOOP_CTL_ADD
  and 300 removals, with a small uevent buffer so that events are lost:
  after SIGCONT every surviving device is set and every removed one
  forgotten (ENOBUFS -> rescan);
- 200 devices added and half removed in a burst while it runs;
- devices removed while the daemon is still writing to them;
- crash safety: SIGKILL after it changed settings, a torn state file, a new
  daemon that still restores the recorded originals on SIGTERM."""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import Daemon, LoopDevices, Results, control_call, record_path, require_root, scheduler, wait_for  # noqa: E402

require_root()
blkpolicyd = sys.argv[1]
GLOB = "loop1[0-9][0-9][0-9]"
loops = LoopDevices(base=1000)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-races-")
policies = os.path.join(work, "policies")
os.mkdir(policies)
state = os.path.join(work, "state")
sock_path = os.path.join(work, "sock")
with open(os.path.join(policies, "50-races.policy"), "w") as f:
    f.write(f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline\n")
conf = os.path.join(work, "blkpolicyd.conf")
with open(conf, "w") as f:
    f.write("[Daemon]\nuevent_buffer_bytes = 65536\ndrift_checks_per_tick = 0\n")


def start():
    d = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies, "--state-dir", state,
                                  "--device", GLOB, "--socket", sock_path], append_log=True)
    d.wait_for("READY=1", timeout=120)
    return d


def known_devices():
    return {d["name"] for d in control_call(sock_path, {"command": "devices"}, timeout=30)["result"]}


def alive():
    return {f"loop{i}" for i in loops.indexes}


def consistent(timeout, what):
    """Every surviving device set, the daemon knows exactly the survivors."""
    try:
        wait_for(lambda: all(scheduler(d) == "mq-deadline" for d in alive()) and known_devices() == alive(),
                 timeout, what)
        return True, ""
    except AssertionError as e:
        missing = [d for d in alive() if scheduler(d) != "mq-deadline"][:5]
        known = known_devices()
        return False, f"{e}; unset: {missing}; unknown: {sorted(alive() - known)[:5]}; stale: {sorted(known - alive())[:5]}"


def log_text():
    return daemon.text()


daemon = None
try:
    daemon = start()
    # 1: stopped for 4 s through a burst that overflows a 64 KiB buffer
    daemon.proc.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    burst = [loops.add() for _ in range(1000)]
    for name in burst[::3][:300]:
        loops.remove(name)
    time.sleep(max(0.0, 4 - (time.monotonic() - t0)))     # the stall itself is what is tested
    daemon.proc.send_signal(signal.SIGCONT)
    ok, why = consistent(120, "every survivor set after the stall")
    res.check(f"SIGSTOP through 1000 adds and 300 removals: {len(alive())} survivors set, removed ones forgotten",
              ok, why)
    res.check("the lost events were noticed and answered with a rescan", "were lost" in log_text(), log_text()[-2000:])
    res.check("still running", daemon.proc.poll() is None)

    # 2: add 200 and remove half of them in a burst, while it runs
    quick = [loops.add() for _ in range(200)]
    for name in quick[::2]:
        loops.remove(name)
    ok, why = consistent(60, "the add/remove burst to settle")
    res.check("200 added, 100 removed in a burst: consistent", ok, why)

    # 3: remove devices while the daemon is still writing their schedulers
    batch = [loops.add() for _ in range(60)]
    for name in batch[-30:]:
        loops.remove(name)
    ok, why = consistent(60, "removals during apply to settle")
    res.check("devices removed while being applied: no crash, consistent", ok and daemon.proc.poll() is None, why)

    # 4: crash safety
    victims = sorted(alive())[:3]
    res.check("originals recorded for the survivors",
              all(os.path.exists(record_path(state, v)) for v in victims))
    daemon.cleanup()    # SIGKILL: a crash
    with open(record_path(state, victims[0]), "a") as f:
        f.write("scheduler mq-dead")   # a torn last line, as a crash mid-write could leave
    with open(record_path(state, victims[1]), "w") as f:
        f.write("\x00\x01garbage\n")   # a corrupt file
    daemon = start()
    text = log_text()
    res.check("a torn or corrupt state file is reported, not fatal",
              "unreadable line" in text and daemon.proc.poll() is None, text[-2000:])
    res.check("exits 0", daemon.stop(timeout=120) == 0)
    res.check("after SIGKILL and restart, SIGTERM restores what the first daemon recorded",
              scheduler(victims[0]) == "none" and scheduler(victims[2]) == "none",
              [scheduler(v) for v in victims])
finally:
    if daemon:
        daemon.cleanup()
    loops.remove_all()
    subprocess.run(["rm", "-rf", work])
res.finish()
