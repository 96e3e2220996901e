# SPDX-License-Identifier: LGPL-2.1-or-later
"""A held write holds only the client that waits for it, on the fake kernel:
the second read_ahead_kb write to loop0 is held HOLD_MS by the fault seam
(BLKPOLICYD_FAULTS DELAY, after one that goes through: the first pass).
While a reload, a `resume DEV` or a `restore DEV` waits for that write:
  - another client's `status` answers within STATUS_BOUND (the goal is
    100 ms; the bound is generous for a loaded 2-core CI), and the worst
    latency is printed;
  - the watchdog (WATCHDOG_USEC, as systemd sets it) is fed throughout;
  - the waiting client's reply comes only once the held write has landed
    (the value is in the file when the reply is read), and a reload's
    READY=1 comes before its reply; the idle timeout (1 s here) does not
    close a client that waits;
  - a second reload asked while the first waits is run after it, reading
    the files as they are after it was asked;
  - a SIGHUP reload's READY=1 comes once its write has landed;
  - a request sent behind a waiting one is answered after it, and a
    client that hangs up while it waits only loses its reply;
  - a SIGTERM while a reload waits stops as ever (the write lands, all is
    put back), closes the waiting client without a reply, no READY=1.
Also `resume DEV` after `restore` of all devices: that device is managed
again, the others stay paused.

The requests that change something are root's: as another user the file
skips (fails under CI=true)."""
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import time

import pytest

from blkptest import faketree
from blkptest.daemon import Listener, control_call, control_connect, recv_line, wait_for
from blkptest.require import skip_or_fail

HOLD_MS = 4000
STATUS_BOUND = 1.0
WATCHDOG_USEC = 200000
FAULTS = f"write:*/loop0/queue/read_ahead_kb:DELAY={HOLD_MS}:1:1"
ORIGINAL_RA = "128"


class Held(faketree.Workspace):
    """Two loop disks on the fake kernel, a policy that sets read_ahead_kb,
    and a daemon whose second write of loop0's read_ahead_kb is held."""

    def __init__(self, blkpolicyd, fixture, work, faults=FAULTS):
        super().__init__(blkpolicyd, fixture, work)
        self.faults = faults
        self.notify_path = os.path.join(work, "notify")
        self.proc = self.notify = self.listener = None

    def policy(self, ra):
        with open(os.path.join(self.policies, "50-ra.policy"), "w") as f:
            f.write(f"[Match]\nname = loop*\n[Queue]\nread_ahead_kb = {ra}\n")

    def ra(self, dev="loop0"):
        return self.live(dev, "read_ahead_kb")

    def start(self, wait_ready=True):
        shutil.rmtree(self.state, ignore_errors=True)
        faketree.make(self.fixture, self.root)
        os.makedirs(self.policies, exist_ok=True)
        self.policy(1024)
        os.mkdir(self.state, 0o700)
        conf = os.path.join(self.work, "blkpolicyd.conf")
        with open(conf, "w") as f:
            # idle clients closed after 1 s: one waiting 4 s for its reply is not idle
            f.write("[Daemon]\ntick_interval_ms = 50\nclient_timeout_ms = 1000\n")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        self.listener = Listener(self.notify)
        env = dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1", NOTIFY_SOCKET=self.notify_path,
                   WATCHDOG_USEC=str(WATCHDOG_USEC), BLKPOLICYD_FAULTS=self.faults)
        with open(os.path.join(self.work, "daemon.log"), "w") as log:
            self.proc = subprocess.Popen([self.blkpolicyd, *self.daemon_args(conf)], stdout=log,
                                         stderr=subprocess.STDOUT, env=env)
        if not wait_ready:
            return
        wait_for(lambda: self.listener.times("READY=1"), 10, "READY=1 after the first pass")
        assert self.ra() == "1024" and self.ra("loop1") == "1024", "the first pass is not held"

    def log(self):
        with open(os.path.join(self.work, "daemon.log")) as f:
            return f.read()

    def call(self, req):
        return control_call(self.sock_path, req)

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.notify:
            self.notify.close()


def held_daemon(blkpolicyd, kvm_fixture, work, faults=FAULTS, wait_ready=True):
    if os.geteuid() != 0:
        skip_or_fail("reload, resume and restore are root's requests")
    h = Held(blkpolicyd, kvm_fixture, work, faults)
    h.start(wait_ready)
    yield h
    h.cleanup()
    with open(os.path.join(work, "daemon.log")) as f:
        print(f"--- daemon log\n{f.read()[-4000:]}")


@pytest.fixture
def held(blkpolicyd, kvm_fixture, work, fault_injection):
    yield from held_daemon(blkpolicyd, kvm_fixture, work)


# loop1's second write held 2 s, loop0's 4 s
TWO_HELD = "write:*/loop1/queue/read_ahead_kb:DELAY=2000:1:1;write:*/loop0/queue/read_ahead_kb:DELAY=4000:1:1"


@pytest.fixture
def two_held(blkpolicyd, kvm_fixture, work, fault_injection):
    yield from held_daemon(blkpolicyd, kvm_fixture, work, TWO_HELD)


# the first pass's own write to loop0 held: READY=1 and status's
# first_pass_done wait for it
FIRST_HELD = f"write:*/loop0/queue/read_ahead_kb:DELAY={HOLD_MS}:1:0"


@pytest.fixture
def first_held(blkpolicyd, kvm_fixture, work, fault_injection):
    yield from held_daemon(blkpolicyd, kvm_fixture, work, FIRST_HELD, wait_ready=False)


def send(h, req):
    """A client that asked and has not read its reply yet."""
    s = control_connect(h.sock_path, timeout=HOLD_MS / 1000 + 10)
    s.sendall(json.dumps(req).encode() + b"\n")
    return s


def replied(s):
    """Whether a reply (or a close) is there to read, without waiting."""
    return bool(select.select([s], [], [], 0)[0])


def serve_others_while_held(h, waiting, landed):
    """status from another client, again and again, until landed() (the
    held write is in the file); the waiting client must not have its reply
    before that. Returns (answers while held, worst latency)."""
    worst, answered = 0.0, 0
    deadline = time.monotonic() + HOLD_MS / 1000 + 10
    while not landed():
        assert time.monotonic() < deadline, "the held write never landed"
        early = waiting is not None and replied(waiting) and not landed()
        assert not early, "the waiting client got its reply, or was closed, before the held write landed"
        a = time.monotonic()
        ok = h.call({"command": "status"})["ok"]
        worst = max(worst, time.monotonic() - a)
        answered += ok and not landed()
        time.sleep(0.02)    # the pace of the requests, not a wait for anything
    return answered, worst


def assert_served(what, answered, worst, h, since):
    print(f"{what}: status answered {answered} times while the write was held, worst {worst * 1000:.1f} ms")
    assert answered >= 10 and worst < STATUS_BOUND, \
        f"{what}: another client is served while a write is held: {answered} answers, " \
        f"worst {worst * 1000:.1f} ms (bound {STATUS_BOUND * 1000:.0f}, goal 100)"
    pings = [t for t in h.listener.times("WATCHDOG=1") if t >= since]
    gaps = [b - a for a, b in zip([since] + pings, pings)]
    assert len(pings) >= 5 and max(gaps) < STATUS_BOUND, \
        f"{what}: the watchdog is fed through the held write ({len(pings)} pings, " \
        f"longest gap {max(gaps or [0]) * 1000:.0f} ms)"


def reply_of(s, landed, what):
    line = recv_line(s)
    assert landed(), f"{what}: the reply comes once the held write has landed"
    s.close()
    return json.loads(line)


def test_reload_replies_once_applied(held):
    h = held
    h.policy(2048)
    t0 = time.monotonic()
    a = send(h, {"command": "reload"})
    # the fault seam logs the held write: the first reload has read the files
    wait_for(lambda: "held for" in h.log(), 5, "the reload's write to be held")
    # asked while the first waits: run after it, from the files as they are now
    h.policy(4096)
    b = send(h, {"command": "reload"})
    answered, worst = serve_others_while_held(h, a, lambda: h.ra() in ("2048", "4096"))
    first = reply_of(a, lambda: h.ra() in ("2048", "4096"), "reload")
    landed_at = time.monotonic()
    assert first["ok"] and landed_at - t0 >= HOLD_MS / 1000 - 0.5, f"the reload's reply: {first}"
    # the listener's clock is its thread's: READY=1 is seen, and not before the write
    wait_for(lambda: [t for t in h.listener.times("READY=1") if t > t0], 5, "READY=1 of the reload")
    ready = [t for t in h.listener.times("READY=1") if t > t0]
    assert ready[0] - t0 >= HOLD_MS / 1000 - 0.5, f"READY=1 once the reload is applied: {ready[0] - t0:.2f} s"
    assert_served("reload", answered, worst, h, t0)
    second = reply_of(b, lambda: h.ra() == "4096", "the queued reload")
    assert second["ok"] and h.ra("loop1") == "4096", \
        f"the reload asked meanwhile ran after the first, with the files of after it asked: {second}"
    assert h.log().count("Reloaded:") == 2, "two reloads, one after the other"


def test_sighup_reload(held):
    h = held
    h.policy(2048)
    t0 = time.monotonic()
    h.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "held for" in h.log(), 5, "the reload's write to be held")
    answered, worst = serve_others_while_held(h, None, lambda: h.ra() == "2048")
    wait_for(lambda: [t for t in h.listener.times("READY=1") if t > t0], 5, "READY=1 of the reload")
    ready = [t for t in h.listener.times("READY=1") if t > t0]
    assert ready[0] - t0 >= HOLD_MS / 1000 - 0.5, f"READY=1 once the reload is applied: {ready[0] - t0:.2f} s"
    assert_served("SIGHUP", answered, worst, h, t0)


def test_sigterm_while_a_reload_waits(held):
    h = held
    h.policy(2048)
    a = send(h, {"command": "reload"})
    wait_for(lambda: "held for" in h.log(), 5, "the reload's write to be held")
    h.proc.send_signal(signal.SIGTERM)
    rc = h.proc.wait(timeout=HOLD_MS / 1000 + 20)
    stopping = h.listener.times("STOPPING=1")
    late = [t for t in h.listener.times("READY=1") if stopping and t > stopping[0]]
    assert rc == 0 and recv_line(a) == b"" and stopping and not late and h.ra() == ORIGINAL_RA, \
        "SIGTERM while a reload waits: the write lands, everything is put back, the waiting client is " \
        f"closed without a reply and no READY=1 follows STOPPING=1: {(rc, stopping, late, h.ra())}"
    a.close()


def test_pipelined_and_gone_clients(held):
    h = held
    h.policy(2048)
    a = control_connect(h.sock_path, timeout=HOLD_MS / 1000 + 10)
    a.sendall(b'{"command": "reload"}\n{"command": "status"}\n')     # the second behind the waiting one
    wait_for(lambda: "held for" in h.log(), 5, "the reload's write to be held")
    gone = send(h, {"command": "reload"})
    gone.close()        # its reply, when the queued reload is done, goes nowhere
    lines = a.makefile("rb")
    first = json.loads(lines.readline())
    assert first["ok"] and "loaded" in first["result"] and h.ra() == "2048", f"the reload's reply first: {first}"
    second = json.loads(lines.readline())
    assert second["ok"] and "uptime_s" in second["result"], f"then the request sent behind it: {second}"
    lines.close()
    a.close()
    wait_for(lambda: h.log().count("Reloaded:") == 2, 10, "the queued reload of the client that hung up")
    h.proc.terminate()
    assert h.proc.wait(timeout=20) == 0, "a clean stop (and, in a sanitizer build, no leak)"


def test_resume_replies_once_applied(held):
    h = held
    assert h.call({"command": "pause", "device": "loop0"})["ok"]
    with open(h.qfile("loop0", "read_ahead_kb"), "w") as f:
        f.write("512\n")        # the admin's, while paused: resume writes over it
    t0 = time.monotonic()
    a = send(h, {"command": "resume", "device": "loop0"})
    answered, worst = serve_others_while_held(h, a, lambda: h.ra() == "1024")
    r = reply_of(a, lambda: h.ra() == "1024", "resume")
    assert r["ok"] and time.monotonic() - t0 >= HOLD_MS / 1000 - 0.5, r
    assert_served("resume loop0", answered, worst, h, t0)


def test_restore_replies_once_applied(held):
    h = held
    t0 = time.monotonic()
    a = send(h, {"command": "restore", "device": "loop0"})
    answered, worst = serve_others_while_held(h, a, lambda: h.ra() == ORIGINAL_RA)
    r = reply_of(a, lambda: h.ra() == ORIGINAL_RA, "restore")
    assert r["ok"] and r["result"]["not_restored"] == [] and time.monotonic() - t0 >= HOLD_MS / 1000 - 0.5, r
    assert h.ra("loop1") == "1024", "only loop0 is put back"
    assert_served("restore loop0", answered, worst, h, t0)


def test_resume_one_after_restore_of_all(held):
    h = held
    # the restore of all holds loop0's write: it is the one that has landed
    # once the reply comes
    a = send(h, {"command": "restore"})
    r = reply_of(a, lambda: h.ra() == ORIGINAL_RA, "restore of all")
    assert r["ok"] and r["result"]["not_restored"] == [] and h.ra("loop1") == ORIGINAL_RA, r
    assert h.call({"command": "status"})["result"]["paused_all"] is True
    assert h.call({"command": "resume", "device": "loop1"})["ok"]
    st = h.call({"command": "status"})["result"]
    d0 = h.call({"command": "device", "device": "loop0"})["result"]
    d1 = h.call({"command": "device", "device": "loop1"})["result"]
    assert d1["paused"] is False and h.ra("loop1") == "1024", \
        f"resume DEV after restore of all: that device is managed again: {d1['paused'], h.ra('loop1')}"
    assert d0["paused"] is True and h.ra("loop0") == ORIGINAL_RA and st["paused_all"] is False \
        and st["paused"] == 1, f"the others stay paused, each on its own: {st}"
    assert h.call({"command": "resume"})["ok"] and h.ra("loop0") == "1024", "resume all ends those too"


def test_restore_waits_for_a_pass_started_while_it_waited(two_held):
    """restore loop0 waits for the passes in flight (loop1's, held); a
    resume and a pause of loop0 meanwhile start a pass of loop0 (held
    longer) that is still running when the wait is over. The put-back
    follows that pass, from the record it brings back: one pass per device
    at a time, and the original is what comes back."""
    h = two_held
    assert h.call({"command": "pause", "device": "loop1"})["ok"]
    with open(h.qfile("loop1", "read_ahead_kb"), "w") as f:
        f.write("512\n")
    r1 = send(h, {"command": "resume", "device": "loop1"})     # loop1's pass: held 2 s
    wait_for(lambda: "loop1/queue/read_ahead_kb held" in h.log(), 10, "loop1's write held")
    restore = send(h, {"command": "restore", "device": "loop0"})
    wait_for(lambda: h.call({"command": "device", "device": "loop0"})["result"]["paused"], 10,
             "loop0 paused by the restore")
    with open(h.qfile("loop0", "read_ahead_kb"), "w") as f:
        f.write("512\n")        # the admin's while paused: the resume writes 1024 over it
    r0 = send(h, {"command": "resume", "device": "loop0"})     # loop0's pass: held 4 s
    wait_for(lambda: "loop0/queue/read_ahead_kb held" in h.log(), 10, "loop0's write held")
    assert h.call({"command": "pause", "device": "loop0"})["ok"]
    r = json.loads(recv_line(restore))
    assert h.proc.poll() is None, f"the daemon runs on: {h.log()[-2000:]}"
    assert r["ok"] and r["result"]["not_restored"] == [], r
    assert h.ra("loop0") == ORIGINAL_RA, \
        f"the put-back came after the resumed pass, from its record: {h.ra('loop0')}"
    for s in (restore, r0, r1):
        s.close()


def test_status_says_when_the_first_pass_is_done(first_held):
    """A container's readiness probe hears no READY=1: status says it, as
    first_pass_done, false while the first pass is held, true with READY=1."""
    h = first_held
    wait_for(lambda: "held for" in h.log(), 10, "the first pass's write to be held")
    during = h.call({"command": "status"})
    assert during["ok"] and during["result"]["first_pass_done"] is False and not h.listener.times("READY=1"), \
        f"while the first pass is held: {during}"
    wait_for(lambda: h.listener.times("READY=1"), HOLD_MS / 1000 + 10, "READY=1 after the held first pass")
    after = h.call({"command": "status"})
    assert after["ok"] and after["result"]["first_pass_done"] is True and h.ra() == "1024", \
        f"once READY=1 is sent: {after}, read_ahead_kb {h.ra()}"
