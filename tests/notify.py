# SPDX-License-Identifier: LGPL-2.1-or-later
"""sd_notify as systemd would see it, through a NOTIFY_SOCKET the test
binds: READY=1 after the first pass over all devices, with a STATUS= line;
WATCHDOG=1 at the rate WATCHDOG_USEC asks; RELOADING=1 then READY=1 on
SIGHUP; STOPPING=1 on SIGTERM. The daemon runs on a fixture tree, dry-run.

The tests run in file order against one daemon: reload, then stop."""
import os
import signal
import socket
import time

import pytest

from blkptest.daemon import fixture_roots

WATCHDOG_USEC = 400000


@pytest.fixture(scope="module")
def daemon(module_daemons, kvm_fixture, top):
    work = module_daemons.work
    return module_daemons.start(
        ["--dry-run", "--config", "/dev/null", "--policy-dir", os.path.join(top, "policies"), *fixture_roots(kvm_fixture),
         "--state-dir", os.path.join(work, "state"), "--socket", module_daemons.sock],
        env={"WATCHDOG_USEC": str(WATCHDOG_USEC), "WATCHDOG_PID": None}, ready=False)


def test_ready_after_first_pass(daemon):
    msgs = daemon.receive_until("READY=1")
    ready = msgs[-1][1] if msgs else ""
    first_pass = daemon.text()
    assert "READY=1" in ready, msgs
    missing = [d for d in ("dm-0", "loop0", "vda", "zram0") if f"{d}: [" not in first_pass]
    assert not missing, f"READY=1 came before the first pass over {missing}\n{first_pass}"
    assert "STATUS=Managing 4 block devices" in ready, ready


def test_watchdog(daemon):
    start = time.monotonic()
    pings = []
    while time.monotonic() - start < 2.0:
        daemon.notify.settimeout(0.5)
        try:
            msg = daemon.notify.recv(4096).decode()
        except socket.timeout:
            continue
        if "WATCHDOG=1" in msg.split("\n"):
            pings.append(time.monotonic())
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    # WATCHDOG=1 at least every WATCHDOG_USEC
    assert len(pings) >= 4 and gaps and max(gaps) < WATCHDOG_USEC / 1e6, (len(pings), gaps)


def test_sighup_reloading_then_ready(daemon):
    daemon.signal(signal.SIGHUP)
    msgs = daemon.receive_until("READY=1")
    words = [w for _, m in msgs for w in m.split("\n")]
    assert "RELOADING=1" in words and "READY=1" in words, words
    assert words.index("RELOADING=1") < words.index("READY=1"), words


def test_sigterm_stopping(daemon):
    daemon.signal(signal.SIGTERM)
    msgs = daemon.receive_until("STOPPING=1")
    assert any("STOPPING=1" in m.split("\n") for _, m in msgs), msgs
    assert daemon.proc.wait(timeout=10) == 0
