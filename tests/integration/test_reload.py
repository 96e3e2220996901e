#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""SIGHUP on loop devices the test creates: a broken policy file is skipped
as at start (it counts as absent: its device gets back what it had, the
other device is not written to); a fixed one applies the new decision to
exactly the device whose decision changed, and writes nothing to the other."""
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import Daemon, LoopDevices, Results, require_root, scheduler  # noqa: E402

require_root()
blkpolicyd = sys.argv[1]
loops = LoopDevices(base=850)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-reload-")
policies = os.path.join(work, "policies")
os.mkdir(policies)
a, b = loops.add(), loops.add()
glob = "loop8[5-9][0-9]"


def write_policy(name, text):
    with open(os.path.join(policies, name), "w") as f:
        f.write(text)


write_policy("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = mq-deadline\n")
write_policy("50-b.policy", f"[Match]\nname = {b}\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n")
daemon = Daemon(blkpolicyd, work, ["--config", "/dev/null", "--policy-dir", policies, "--state-dir",
                                     os.path.join(work, "state"), "--device", glob, "--socket",
                                     os.path.join(work, "sock")])


def wait_ready():
    daemon.wait_for("READY=1")


def log_since(pos):
    return daemon.text()[pos:]


try:
    wait_ready()
    res.check("both devices set", scheduler(a) == "mq-deadline" and scheduler(b) == "mq-deadline")

    pos = len(daemon.text())
    write_policy("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = kyber\nnr_requests = banana\n")
    daemon.proc.send_signal(signal.SIGHUP)
    wait_ready()
    text = log_since(pos)
    res.check("broken file: the error is logged as file:line", "50-a.policy:5:" in text, text)
    res.check("broken file: skipped as at start, so its device gets back what it had",
              scheduler(a) == "none", text)
    res.check("broken file: the other device keeps its decision and is not written to",
              scheduler(b) == "mq-deadline" and f"{b}: scheduler" not in text and f"{b}: read_ahead_kb" not in text,
              text)

    pos = len(daemon.text())
    write_policy("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = kyber\n")
    daemon.proc.send_signal(signal.SIGHUP)
    wait_ready()
    text = log_since(pos)
    res.check("fixed set: the changed device gets the new decision", scheduler(a) == "kyber")
    res.check("fixed set: the change is one log line", text.count(f"{a}: scheduler none -> kyber") == 1, text)
    res.check("fixed set: the other device is not written to",
              scheduler(b) == "mq-deadline" and f"{b}: scheduler" not in text and f"{b}: read_ahead_kb" not in text,
              text)
    res.check("exits 0", daemon.stop() == 0)
    res.check("restores both", scheduler(a) == "none" and scheduler(b) == "none")
finally:
    daemon.cleanup()
    loops.remove_all()
    subprocess.run(["rm", "-rf", work])
res.finish()
