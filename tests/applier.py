#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes off the event loop, on the fake kernel (no root): a scheduler
write the kernel holds for 3 s (fault injection: DELAY) must not stop the
loop. While it is held:
  - the control socket answers every request in under 100 ms;
  - the watchdog (WATCHDOG_USEC, as systemd sets it) is never late;
  - the other disk is set meanwhile;
  - READY=1 comes only once the first pass is done.
A SIGTERM during the held write waits for it, then puts back every
original."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

blkpolicyd, fixture = sys.argv[1:3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blkptest import faketree  # noqa: E402
from loopdev import Results, control_call, require_fault_injection  # noqa: E402

require_fault_injection(blkpolicyd)

res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-applier-")
root = os.path.join(work, "root")
state = os.path.join(work, "state")
policies = os.path.join(work, "policies")
sock_path = os.path.join(work, "control.sock")
notify_path = os.path.join(work, "notify")
HOLD_MS = 3000
WATCHDOG_USEC = 200000


def qfile(dev, attr):
    return faketree.qfile(root, dev, attr)


def scheduler(dev):
    return faketree.live(root, dev, "scheduler")


def setup():
    shutil.rmtree(state, ignore_errors=True)
    faketree.make(fixture, root)
    os.makedirs(policies, exist_ok=True)
    with open(os.path.join(policies, "50-bfq.policy"), "w") as f:
        f.write("[Match]\nname = loop*\n[Queue]\nscheduler = bfq\nread_ahead_kb = 1024\n")
    os.mkdir(state, 0o700)


def start():
    conf = os.path.join(work, "blkpolicyd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\ntick_interval_ms = 50\n")
    if os.path.exists(notify_path):
        os.unlink(notify_path)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    listener = Listener(notify)
    env = dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1", NOTIFY_SOCKET=notify_path, WATCHDOG_USEC=str(WATCHDOG_USEC),
               BLKPOLICYD_FAULTS=f"write:*/loop0/queue/scheduler:DELAY={HOLD_MS}:1")
    log = open(os.path.join(work, "daemon.log"), "w")
    proc = subprocess.Popen([blkpolicyd, "--config", conf, "--policy-dir", policies, *faketree.roots(root),
                             "--state-dir", state, "--socket", sock_path, "--device", "loop*"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, listener


class Listener(threading.Thread):
    """Reads every sd_notify datagram as it comes, with its time: a reader
    that lags would fill the socket's queue (max_dgram_qlen) and block the
    daemon's sendmsg, which is not what is measured here."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock = sock
        self.got = []
        self.start()

    def run(self):
        self.sock.settimeout(0.2)
        while True:
            try:
                self.got.append((time.monotonic(), self.sock.recv(4096).decode()))
            except socket.timeout:
                continue
            except OSError:
                return


proc = None
try:
    setup()
    t0 = time.monotonic()
    proc, notify = start()
    while not os.path.exists(sock_path) and time.monotonic() - t0 < 10:
        time.sleep(0.005)
    worst = 0.0
    answered = 0
    other_set_while_held = False
    while time.monotonic() - t0 < HOLD_MS / 1000 - 0.5:
        a = time.monotonic()
        ok = control_call(sock_path, {"command": "status"})["ok"]
        worst = max(worst, time.monotonic() - a)
        answered += ok
        other_set_while_held |= scheduler("loop1") == "bfq" and scheduler("loop0") != "bfq"
        time.sleep(0.02)
    res.check(f"the socket answers while a write is held: {answered} requests, worst {worst * 1000:.1f} ms (< 100)",
              answered > 20 and worst < 0.1, (answered, worst))
    res.check("the other disk is set while loop0's write is held", other_set_while_held)
    deadline = t0 + HOLD_MS / 1000 + 5
    while not any("READY=1" in m for _, m in notify.got) and time.monotonic() < deadline:
        time.sleep(0.01)
    msgs = list(notify.got)
    pings = [t for t, m in msgs if "WATCHDOG=1" in m.split("\n")]
    ready = [t for t, m in msgs if "READY=1" in m.split("\n")]
    gaps = [b - a for a, b in zip([t0] + pings, pings)]
    res.check(f"the watchdog is fed on time through the held write ({len(pings)} pings, "
              f"longest gap {max(gaps or [0]) * 1000:.0f} ms of {WATCHDOG_USEC // 1000})",
              len(pings) >= 5 and max(gaps) < WATCHDOG_USEC / 1e6, gaps)
    res.check("READY=1 once the first pass is done, not before",
              ready and ready[0] - t0 > HOLD_MS / 1000 - 0.2 and scheduler("loop0") == "bfq", (ready, t0))

    # a SIGTERM while a write is held: it waits for the write, then restores
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    proc, notify = start()
    while not os.path.exists(sock_path):
        time.sleep(0.005)
    while scheduler("loop1") != "bfq":
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)       # loop0's write is still held
    rc = proc.wait(timeout=30)
    with open(qfile("loop0", "read_ahead_kb")) as f:
        ra = f.read().strip()
    res.check("SIGTERM during a held write: it lands, then every original is back, exit 0",
              rc == 0 and scheduler("loop0") == "none" and scheduler("loop1") == "none" and ra == "128"
              and os.listdir(os.path.join(state, "devices")) == [], (rc, scheduler("loop0"), scheduler("loop1"), ra))
finally:
    if proc and proc.poll() is None:
        proc.kill()
        proc.wait()
    shutil.rmtree(work, ignore_errors=True)
res.finish()
