# SPDX-License-Identifier: LGPL-2.1-or-later
"""The drift sweep on the fake kernel (no root): every managed setting of
every device read back within drift_sweep_seconds, a share of the devices
a tick (ceil(devices * tick / sweep)), round robin.

Ticks are counted from status' tick count, never slept for: a tick that
has begun means the one before it ended, its drift check too (a tick does
not start while the last one still runs)."""
import math
import os
import shutil

import pytest

from blkptest import faketree
from blkptest.faketree import write
from blkptest.daemon import Daemon, control_call, wait_for

POLICY = "[Match]\nname = loop*\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n"



class Host(faketree.Workspace):
    """n loop disks on the fake kernel under POLICY, the daemon in enforce."""

    def __init__(self, blkpolicyd, fixture, work, n):
        super().__init__(blkpolicyd, fixture, work)
        self.disks = faketree.disks(n)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        faketree.make(fixture, self.root, n)
        for dev in self.disks:
            shutil.rmtree(self.qfile(dev, "iosched"), ignore_errors=True)
            write(self.qfile(dev, "scheduler"), "[none] mq-deadline kyber bfq")
            write(self.qfile(dev, "read_ahead_kb"), "128")
        os.mkdir(self.state, 0o700)
        os.mkdir(self.policies)
        write(os.path.join(self.policies, "50-loop.policy"), POLICY)

    def start(self, conf):
        write(self.conf, "[Daemon]\n" + conf)
        d = Daemon(self.blkpolicyd, self.work, self.daemon_args(self.conf), env={"BLKPOLICYD_FAKE_KERNEL": "1"})
        self.running.append(d)
        d.wait_for("READY=1", timeout=60)
        wait_for(lambda: all(self.live(dev, "read_ahead_kb") == "256" for dev in self.disks), 30, "the policy applied")
        return d

    def call(self, command, **kw):
        reply = control_call(self.sock_path, dict(command=command, **kw))
        assert reply["ok"], reply
        return reply["result"]

    def ticks_after(self, count):
        """Waits for `count` more ticks to begin; the status then."""
        t0 = self.call("status")["tick"]["count"]
        wait_for(lambda: self.call("status")["tick"]["count"] >= t0 + count, 60, f"{count} ticks")
        return self.call("status")


@pytest.fixture
def host_of(blkpolicyd, kvm_fixture, work, fault_injection):
    hosts = []

    def make(n):
        hosts.append(Host(blkpolicyd, kvm_fixture, work, n))
        return hosts[-1]
    yield make
    for h in hosts:
        h.cleanup()


@pytest.mark.parametrize("tick_ms,sweep_s", [(200, 2), (150, 1)])
def test_a_change_on_every_device_is_seen_within_the_sweep(host_of, tick_ms, sweep_s):
    n = 50
    h = host_of(n)
    h.start(f"tick_interval_ms = {tick_ms}\ndrift_sweep_seconds = {sweep_s}\n")
    per = math.ceil(n * tick_ms / (sweep_s * 1000))
    k = math.ceil(n / per)          # ticks a sweep takes
    st = h.ticks_after(2)
    assert st["tick"]["drift"] == {"sweep_s": sweep_s, "per_tick": per, "checked": st["tick"]["drift"]["checked"]}, \
        f"{n} devices, {tick_ms} ms ticks, a {sweep_s} s sweep: ceil({n} * {tick_ms} / {sweep_s * 1000}) a tick: {st}"

    first = h.call("status")["tick"]["count"]     # a tick from here on may see a change
    for dev in h.disks:
        write(h.qfile(dev, "read_ahead_kb"), "512")
    t0 = h.call("status")["tick"]["count"]        # the ticks after this one begin after every change
    replies = []

    def seen_all():
        st = h.call("status")
        replies.append((st["tick"]["count"], st["overridden"], st["tick"]["drift"]["checked"]))
        return st["overridden"] == n
    wait_for(seen_all, 60, f"all {n} devices overridden")
    for count, seen, _ in replies:
        # a tick reads back `per` devices, no more: the sweep is spread
        assert seen <= per * (count - first + 1), \
            f"tick {count}: {seen} seen, at most {per} a tick since tick {first}: {replies}"
        # and every device is read once the sweep's ticks are over
        assert count < t0 + k + 1 or seen == n, \
            f"tick {count}: {seen} of {n} seen after {k} whole ticks of {per} from tick {t0}: {replies}"
    assert any(per * (count - first + 1) < n for count, _, _ in replies), \
        f"the replies came too late to see the sweep spread: {replies}"
    # what the sweep read in between: `per` a tick (give or take the ticks
    # in flight at either reply)
    (c1, _, r1), (c2, _, r2) = replies[0], replies[-1]
    assert per * (c2 - c1 - 1) <= r2 - r1 <= per * (c2 - c1 + 1), \
        f"{r2 - r1} read back from tick {c1} to {c2}, {per} a tick: {replies}"
    assert h.live(f"loop{n - 1}", "read_ahead_kb") == "512", "on_drift = leave: the admin's value stays"


def test_the_sweep_reads_what_verify_shows(host_of):
    """The sweep's cheaper read (device_first_drift(), only the managed
    settings, up to the first drifted) puts it down to the setting verify's
    full view (device_view()) lists first, with the same live value."""
    h = host_of(3)
    h.start("tick_interval_ms = 50\ndrift_sweep_seconds = 1\n")
    write(h.qfile("loop1", "read_ahead_kb"), "1024")
    write(h.qfile("loop1", "scheduler"), "none mq-deadline kyber [bfq]")
    wait_for(lambda: h.call("status")["overridden"] == 1, 30, "loop1 overridden")
    dev = h.call("device", device="loop1")
    drift = [e for e in h.call("verify")["devices"] if e["name"] == "loop1"][0]["drift"]
    assert [x["attr"] for x in drift] == ["scheduler", "read_ahead_kb"], drift
    assert dev["override"].startswith(f"{drift[0]['attr']} changed to {drift[0]['live']} (blkpolicyd wanted "
                                      f"{drift[0]['intended']})"), (dev["override"], drift)
    assert not h.call("device", device="loop0")["overridden"], "an unchanged disk is no drift"


def test_old_fixed_count_and_off(host_of):
    h = host_of(4)
    d = h.start("tick_interval_ms = 50\ndrift_checks_per_tick = 3\n")
    st = h.ticks_after(2)
    assert st["tick"]["drift"]["sweep_s"] is None and st["tick"]["drift"]["per_tick"] == 3, st["tick"]
    assert f"{h.conf}:3: drift_checks_per_tick= is deprecated, use drift_sweep_seconds=" in d.text(), d.text()
    d.stop()

    d = h.start("tick_interval_ms = 50\ndrift_sweep_seconds = 0\n")
    write(h.qfile("loop0", "read_ahead_kb"), "512")
    before = h.call("status")["tick"]["drift"]
    st = h.ticks_after(10)
    assert st["tick"]["drift"] == {"sweep_s": 0, "per_tick": 0, "checked": 0} and before["checked"] == 0, st
    assert st["overridden"] == 0, "drift_sweep_seconds = 0: nothing read back, nothing seen"
    assert "deprecated" not in d.text(), d.text()
