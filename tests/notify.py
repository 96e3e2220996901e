#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sd_notify as systemd would see it, through a NOTIFY_SOCKET the test
binds: READY=1 after the first pass over all devices, with a STATUS= line;
WATCHDOG=1 at the rate WATCHDOG_USEC asks; RELOADING=1 then READY=1 on
SIGHUP; STOPPING=1 on SIGTERM. The daemon runs on a fixture tree, dry-run."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

blkpolicyd, fixture, top = sys.argv[1:4]
WATCHDOG_USEC = 400000
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import Results  # noqa: E402

res = Results()
check = res.check


work = tempfile.mkdtemp(prefix="blkpolicyd-notify-")
notify_path = os.path.join(work, "notify")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(notify_path)
sock.settimeout(10)
log_path = os.path.join(work, "log")
log = open(log_path, "w")
env = dict(os.environ, NOTIFY_SOCKET=notify_path, WATCHDOG_USEC=str(WATCHDOG_USEC))
env.pop("WATCHDOG_PID", None)
daemon = subprocess.Popen([blkpolicyd, "--dry-run", "--config", "/dev/null", "--policy-dir", os.path.join(top, "policies"),
                           "--sysfs-root", f"{fixture}/sys", "--proc-root", f"{fixture}/proc",
                           "--debugfs-root", f"{fixture}/debug", "--state-dir", os.path.join(work, "state"),
                           "--socket", os.path.join(work, "control.sock")], stderr=log, env=env)


def receive_until(word, timeout=10):
    """Returns every message (with its arrival time) up to the one with word."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            break
        got.append((time.monotonic(), msg))
        if word in msg.split("\n"):
            return got
    return got


try:
    msgs = receive_until("READY=1")
    ready = msgs[-1][1] if msgs else ""
    first_pass = open(log_path).read()
    check("READY=1 arrives", "READY=1" in ready, msgs)
    check("READY=1 comes after the first pass over every device",
          all(f"{d}: [" in first_pass for d in ("dm-0", "loop0", "vda", "zram0")), first_pass)
    check("STATUS= with a summary", "STATUS=Managing 4 block devices" in ready, ready)

    start = time.monotonic()
    pings = []
    while time.monotonic() - start < 2.0:
        sock.settimeout(0.5)
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            continue
        if "WATCHDOG=1" in msg.split("\n"):
            pings.append(time.monotonic())
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    check(f"WATCHDOG=1 at least every {WATCHDOG_USEC // 1000} ms ({len(pings)} pings in 2 s)",
          len(pings) >= 4 and gaps and max(gaps) < WATCHDOG_USEC / 1e6, gaps)

    daemon.send_signal(signal.SIGHUP)
    msgs = receive_until("READY=1")
    words = [w for _, m in msgs for w in m.split("\n")]
    check("SIGHUP: RELOADING=1 then READY=1", "RELOADING=1" in words and "READY=1" in words
          and words.index("RELOADING=1") < words.index("READY=1"), words)

    daemon.send_signal(signal.SIGTERM)
    msgs = receive_until("STOPPING=1")
    check("SIGTERM: STOPPING=1", any("STOPPING=1" in m.split("\n") for _, m in msgs), msgs)
    check("exits 0", daemon.wait(timeout=10) == 0)
finally:
    if daemon.poll() is None:
        daemon.kill()
        daemon.wait()
    subprocess.run(["rm", "-rf", work])

res.finish()
