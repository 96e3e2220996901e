#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon flips a loop device (its own) to the busy settings when fio
loads it, back when the load stops, and not at all under a steady light
load. Ticks are 200 ms; the policy wants 2 ticks above/below threshold."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import Daemon, LoopDevices, Results, control_call, require_root, scheduler, wait_for  # noqa: E402

require_root()
blkpolicyd = sys.argv[1]
TICK = 0.2
loops = LoopDevices(base=600)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-dynamic-")
policies = os.path.join(work, "policies")
os.mkdir(policies)
dev = loops.add()
loops.attach(dev, size_mb=128)
with open(os.path.join(policies, "50-dynamic.policy"), "w") as f:
    f.write(f"""[Match]
name = {dev}
[Queue]
scheduler = none
[Dynamic]
enter = iops > 5000
enter_ticks = 2
leave = iops < 1000
leave_ticks = 2
min_dwell_ticks = 0
[Busy]
scheduler = mq-deadline
""")
conf = os.path.join(work, "blkpolicyd.conf")
with open(conf, "w") as f:
    f.write(f"[Daemon]\ntick_interval_ms = {int(TICK * 1000)}\n")

sock = os.path.join(work, "control.sock")
daemon = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies, "--state-dir",
                                     os.path.join(work, "state"), "--device", dev, "--socket", sock])
daemon_log = daemon.text


def fio(*args, runtime):
    return subprocess.Popen(["fio", "--name=load", f"--filename=/dev/{dev}", "--bs=4k", "--direct=1",
                             "--ioengine=io_uring", "--time_based", f"--runtime={runtime}",
                             "--output-format=terse", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


try:
    daemon.wait_for("READY=1")
    res.check("base scheduler at start", scheduler(dev) == "none")

    # steady light load: 200 IOPS at qd1 for 3 s, watched all the way
    light = fio("--rw=randread", "--iodepth=1", "--rate_iops=200", runtime=3)
    seen = set()
    while light.poll() is None:
        seen.add(scheduler(dev))
        time.sleep(0.01)
    res.check("no flip under a steady light load", seen == {"none"} and "-> busy" not in daemon_log(),
              f"schedulers seen: {seen}\n{daemon_log()}")

    # heavy load: the flip must come within the policy's 2 ticks (+1 tick of
    # sampling phase, +fio start-up)
    heavy = fio("--rw=randread", "--iodepth=16", runtime=3)
    t0 = time.monotonic()
    try:
        t1 = wait_for(lambda: scheduler(dev) == "mq-deadline", 2 * TICK + TICK + 0.6, "the flip to busy")
        res.check(f"flips to busy under load ({(t1 - t0) * 1000:.0f} ms)", True)
    except AssertionError as e:
        res.check("flips to busy under load", False, f"{e}\n{daemon_log()}")
    heavy.wait()
    t0 = time.monotonic()
    try:
        t1 = wait_for(lambda: scheduler(dev) == "none", 2 * TICK + TICK + 0.3, "the flip back to base")
        res.check(f"flips back when the load stops ({(t1 - t0) * 1000:.0f} ms)", True)
    except AssertionError as e:
        res.check("flips back when the load stops", False, f"{e}\n{daemon_log()}")
    text = daemon_log()
    res.check("the flip is logged with the condition that fired",
              f"{dev}: base -> busy: iops > 5000" in text and f"{dev}: busy -> base: iops < 1000" in text, text)
    res.check("exactly two flips", text.count(f"{dev}: base -> busy") == 1 and text.count(f"{dev}: busy -> base") == 1,
              text)
    # the flip is in history once its write is back on the loop (it has a cost then):
    # the scheduler seen in sysfs may be a moment ahead of that
    def history():
        return control_call(sock, {"command": "explain", "device": dev})["result"]["dynamic"]["history"]
    try:
        wait_for(lambda: len(history()) >= 2, 3.0, "the second flip in explain's history")
    except AssertionError:
        pass    # checked just below, with what explain says
    hist = history()
    res.check("explain lists both flips, oldest first, with their conditions",
              [h["to"] for h in hist] == ["busy", "base"] and hist[0]["condition"].startswith("iops > 5000")
              and hist[1]["condition"].startswith("iops < 1000") and all(h["cost_ms"] > 0 for h in hist), hist)
    res.check("exits 0", daemon.stop() == 0, daemon_log())
    res.check("base scheduler after exit", scheduler(dev) == "none")
finally:
    daemon.cleanup()
    loops.remove_all()
    subprocess.run(["rm", "-rf", work])
res.finish()
