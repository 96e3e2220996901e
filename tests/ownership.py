# SPDX-License-Identifier: LGPL-2.1-or-later
"""Ownership on the fake kernel (no root): every mode change, every view the
live truth. Each case is a bug of the ownership issue, reproduced first:

  1. backing out to observe by reload puts blkpolicyd's values back and
     marks nothing overridden (its own put-back is no override); an
     overridden disk gives back what blkpolicyd left on it and keeps the
     admin's value; a reload back to enforce applies again, no resume;
  2. the views (device, devices, verify, the metrics) say what sysfs holds
     now: an admin's scheduler shows as current, overridden, pending;
  3. a value the kernel did not keep (read_expire = 1 at HZ=250 reads back
     4) is a state of its own: verify exits 4, the metrics count it.

And what a hostile review of those fixes found: a put-back in observe
that cannot be done is tried once, not forever; a SIGKILL after a value
not kept loses no original; blkpolicyd's own write in flight is no
override in any view.

tests/integration/test_ownership.py runs 1-3 on real loop devices."""
import os
import re
import shutil

import pytest

from blkptest import faketree
from blkptest.daemon import Daemon, control_call, ctl, wait_for

ORIGINAL = {"scheduler": "none", "read_ahead_kb": "128"}
ENFORCE = "[Daemon]\ntick_interval_ms = 50\ndrift_checks_per_tick = 8\nmetrics_per_device = yes\n"
OBSERVE = ENFORCE + "mode = observe\n"


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(value + "\n")


class Host(faketree.Workspace):
    """loop0 on the fake kernel under one policy: mq-deadline, a read-ahead
    and one of mq-deadline's times; loop1 unmanaged."""

    def __init__(self, blkpolicyd, fixture, work, policy):
        super().__init__(blkpolicyd, fixture, work)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        faketree.make(fixture, self.root)
        shutil.rmtree(self.qfile("loop0", "iosched"), ignore_errors=True)
        write(self.qfile("loop0", "scheduler"), "[none] mq-deadline kyber bfq")
        write(self.qfile("loop0", "read_ahead_kb"), "128")
        os.mkdir(self.state, 0o700)
        os.mkdir(self.policies)
        write(os.path.join(self.policies, "50-loop0.policy"), "[Match]\nname = loop0\n" + policy)
        self.configure(ENFORCE)
        self.running = []

    def configure(self, text):
        write(self.conf, text)

    def start(self, faults="", ready=True, append_log=False):
        d = Daemon(self.blkpolicyd, self.work, self.daemon_args(self.conf), append_log=append_log,
                   env={"BLKPOLICYD_FAKE_KERNEL": "1", "BLKPOLICYD_FAULTS": faults})
        self.running.append(d)
        if ready:
            d.wait_for("READY=1", timeout=30)
        return d

    def records(self):
        return sorted(os.listdir(os.path.join(self.state, "devices")))

    def call(self, command, **kw):
        reply = control_call(self.sock_path, dict(command=command, **kw))
        assert reply["ok"], reply
        return reply["result"]

    def metrics(self):
        text = self.call("metrics")["text"]
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines() if line and not line.startswith("#")}

    def snapshot(self):
        return {attr: self.live("loop0", attr) for attr in ORIGINAL}


POLICY = "[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n"


@pytest.fixture
def host(blkpolicyd, kvm_fixture, work, fault_injection):
    h = Host(blkpolicyd, kvm_fixture, work, POLICY)
    yield h
    h.cleanup()


def nothing_overridden(h):
    st = h.call("status")
    dev = h.call("device", device="loop0")
    m = h.metrics()
    return (st["overridden"] == 0 and not dev["overridden"]
            and m.get('blkpolicyd_device_overridden{device="loop0"}') == 0), (st, dev, m)


def test_back_out_to_observe_and_enforce_again(host, blkpolicyctl):
    d = host.start()
    assert host.snapshot() == {"scheduler": "mq-deadline", "read_ahead_kb": "256"}, host.snapshot()
    host.configure(OBSERVE)
    d.reload()
    assert host.snapshot() == ORIGINAL, \
        f"enforce -> observe puts back what blkpolicyd changed: {host.snapshot()}"
    # ticks pass: the drift check must not take the put-back for someone else's change
    ticks = host.metrics()["blkpolicyd_ticks_total"]
    wait_for(lambda: host.metrics()["blkpolicyd_ticks_total"] >= ticks + 20, 20, "20 ticks")
    ok, seen = nothing_overridden(host)
    assert ok and "leaving it alone" not in d.text(), \
        f"blkpolicyd's own put-back is no override: {seen}"
    dev = host.call("device", device="loop0")
    assert (dev["settings"]["scheduler"]["result"] == "planned" and dev["settings"]["scheduler"]["current"] == "none"
            and dev["settings"]["read_ahead_kb"]["current"] == "128"), \
        f"observe shows what a write would change, from sysfs now: {dev['settings']}"
    r = ctl(blkpolicyctl, host.sock_path, "verify")
    assert r.returncode == 4 and "pending" in r.stdout, \
        f"verify in observe mode: pending changes, exit 4: {(r.returncode, r.stdout)}"
    host.configure(ENFORCE)
    d.reload()
    assert host.snapshot() == {"scheduler": "mq-deadline", "read_ahead_kb": "256"}, \
        f"observe -> enforce by reload applies again, no resume needed: {host.snapshot()}"
    ok, seen = nothing_overridden(host)
    assert ok, f"... and nothing is overridden: {seen}"
    assert d.stop() == 0 and host.snapshot() == ORIGINAL, host.snapshot()


def test_back_out_gives_back_what_an_overridden_disk_kept(host):
    d = host.start()
    write(host.qfile("loop0", "scheduler"), "none mq-deadline [kyber] bfq")        # the admin
    wait_for(lambda: host.call("status")["overridden"] == 1, 10, "the admin's change to be noticed")
    host.configure(OBSERVE)
    d.reload()
    assert host.snapshot() == {"scheduler": "kyber", "read_ahead_kb": "128"}, \
        f"back-out: the admin's kyber stays, blkpolicyd's read_ahead_kb goes back: {host.snapshot()}"
    ok, seen = nothing_overridden(host)
    assert ok, f"observing, blkpolicyd claims nothing the admin could override: {seen}"
    assert os.listdir(os.path.join(host.state, "devices")) == [], "no record left: blkpolicyd owns nothing"
    host.configure(ENFORCE)
    d.reload()
    assert host.snapshot() == {"scheduler": "mq-deadline", "read_ahead_kb": "256"}, host.snapshot()
    assert d.stop() == 0 and host.snapshot() == {"scheduler": "kyber", "read_ahead_kb": "128"}, \
        f"enforced again from what it found then (the admin's kyber), and that is put back: {host.snapshot()}"


def test_views_say_what_sysfs_holds(host):
    d = host.start()
    write(host.qfile("loop0", "scheduler"), "[none] mq-deadline kyber bfq")        # the admin
    wait_for(lambda: host.call("status")["overridden"] == 1, 10, "the admin's change to be noticed")
    dev = host.call("device", device="loop0")
    s = dev["settings"]["scheduler"]
    assert (s["current"] == "none" and s["result"] == "overridden" and dev["facts"]["scheduler"] == "none"
            and dev["settings"]["read_ahead_kb"]["result"] == "applied"), \
        f"device: the admin's scheduler, not the one blkpolicyd wrote: {dev['settings'], dev['facts']['scheduler']}"
    listed = {x["name"]: x for x in host.call("devices")}
    assert listed["loop0"]["settings"]["scheduler"]["current"] == "none", listed["loop0"]["settings"]
    m = host.metrics()
    assert (m.get('blkpolicyd_device_scheduler{device="loop0",scheduler="none"}') == 1
            and 'blkpolicyd_device_scheduler{device="loop0",scheduler="mq-deadline"}' not in m
            and m.get('blkpolicyd_device_pending_changes{device="loop0"}') == 1
            and m.get('blkpolicyd_device_overridden{device="loop0"}') == 1), \
        f"metrics: the live scheduler, and the overridden setting pending: " \
        f"{ {k: v for k, v in m.items() if 'loop0' in k} }"
    v = host.call("verify")["devices"][0]
    assert [x["attr"] for x in v["drift"]] == ["scheduler"] and v["pending"] == [], v
    # the admin puts read_ahead_kb back by hand too: seen at once, no pass needed
    write(host.qfile("loop0", "read_ahead_kb"), "512")
    dev = host.call("device", device="loop0")
    assert dev["settings"]["read_ahead_kb"] == dict(dev["settings"]["read_ahead_kb"], current="512",
                                                    result="overridden"), dev["settings"]
    d.stop()


@pytest.fixture
def jiffies_host(blkpolicyd, kvm_fixture, work, fault_injection):
    h = Host(blkpolicyd, kvm_fixture, work, POLICY + "[mq-deadline]\nread_expire = 1\n")
    yield h
    h.cleanup()


def test_a_value_the_kernel_did_not_keep(jiffies_host, blkpolicyctl):
    h = jiffies_host
    d = h.start()
    assert h.live("loop0", "iosched/read_expire") == "4", "the fake kernel rounds to jiffies at HZ=250"
    r = ctl(blkpolicyctl, h.sock_path, "verify")
    assert r.returncode == 4 and re.search(r"loop0: iosched/read_expire is 4: .*wrote 1.*not kept", r.stdout), \
        f"verify: a value the kernel did not keep is no 'No drift', exit 4: {(r.returncode, r.stdout)}"
    dev = h.call("device", device="loop0")
    assert dev["settings"]["iosched/read_expire"]["result"] == "not-kept", dev["settings"]
    m = h.metrics()
    assert (m.get('blkpolicyd_settings{result="not_kept"}') == 1
            and m.get('blkpolicyd_device_settings_not_kept{device="loop0"}') == 1
            and m.get('blkpolicyd_device_overridden{device="loop0"}') == 0), \
        f"metrics count it, and it is nobody's override: { {k: v for k, v in m.items() if 'kept' in k} }"
    wait_for(lambda: h.metrics()["blkpolicyd_ticks_total"] >= m["blkpolicyd_ticks_total"] + 20, 20, "20 ticks")
    assert h.call("status")["overridden"] == 0, "the drift check does not take the kernel's rounding for an admin"
    assert d.stop() == 0 and h.live("loop0", "iosched/read_expire") is None and h.snapshot() == ORIGINAL, \
        "stop: everything back"


def test_a_put_back_that_cannot_be_done_is_tried_once(host):
    # every write of read_ahead_kb after blkpolicyd's own fails: the
    # back-out cannot put it back, and must not try again and again (it
    # did: the look after the put-back ended in another put-back, and the
    # reload's drain never returned)
    d = host.start(faults="write:*/loop0/queue/read_ahead_kb:EIO::1")
    host.configure(OBSERVE)
    d.reload()
    ticks = host.metrics()["blkpolicyd_ticks_total"]
    wait_for(lambda: host.metrics()["blkpolicyd_ticks_total"] >= ticks + 20, 20, "20 ticks")
    assert d.text().count("value(s) not put back") == 1 and host.live("loop0", "read_ahead_kb") == "256", \
        f"one put-back per reload, its record kept: {d.text()[-1500:]}"
    assert host.records() == ["7:0"], host.records()
    assert d.stop() != 0, "the stop says a value stays changed"


def test_sigkill_after_a_value_not_kept_loses_nothing(blkpolicyd, kvm_fixture, work, fault_injection):
    # loop0 runs mq-deadline already; the kernel keeps 4 for read_expire = 1,
    # and the daemon is killed at the next write of the same round: the
    # record on disk must say that 4 is blkpolicyd's, or the next daemon
    # takes it for the admin's and the found 500 is lost
    h = Host(blkpolicyd, kvm_fixture, work, POLICY + "[mq-deadline]\nread_expire = 1\nwrite_expire = 4000\n")
    try:
        write(h.qfile("loop0", "scheduler"), "none [mq-deadline] kyber bfq")
        for attr, value in (("read_expire", "500"), ("write_expire", "5000")):
            write(h.qfile("loop0", "iosched/" + attr), value)
        d = h.start(faults="write:*/loop0/queue/iosched/write_expire:KILL:1", ready=False)
        assert d.proc.wait(timeout=30) < 0 and h.live("loop0", "iosched/read_expire") == "4", "killed after the write"
        d = h.start(append_log=True)
        assert h.call("status")["overridden"] == 0, "blkpolicyd's own value not kept is no override"
        assert d.stop() == 0 and h.live("loop0", "iosched/read_expire") == "500" and h.records() == [], \
            f"the found 500 is put back: {h.live('loop0', 'iosched/read_expire')}, {h.records()}"
    finally:
        h.cleanup()


DYNAMIC = POLICY + "[Dynamic]\nenter = iops > 100\nleave = iops < 1\n[Busy]\nread_ahead_kb = 1024\n"


@pytest.fixture
def dynamic_host(blkpolicyd, kvm_fixture, work, fault_injection):
    h = Host(blkpolicyd, kvm_fixture, work, DYNAMIC)
    yield h
    h.cleanup()


def test_own_write_in_flight_is_no_override(dynamic_host):
    # a flip to the busy settings whose pass is held after its first write:
    # the views show what blkpolicyd is doing, not someone else's change
    h = dynamic_host
    diskstats = os.path.join(h.root, "proc", "diskstats")
    with open(diskstats) as f:
        base = f.read()
    d = h.start(faults="write:*/loop0/queue/read_ahead_kb:DELAY=4000:2")
    fields = lambda n: f"   7       0 loop0 {n} 0 {n * 8} {n} 0 0 0 0 0 {n} {n} 0 0 0 0 0 0\n"
    n = 0

    def busy_load():
        nonlocal n
        n += 100000
        with open(diskstats + ".tmp", "w") as f:
            f.write("".join(line for line in base.splitlines(True) if " loop0 " not in line) + fields(n))
        os.replace(diskstats + ".tmp", diskstats)
        return "held" in d.text()
    wait_for(busy_load, 20, "the flip's read_ahead_kb write to be held")
    dev = h.call("device", device="loop0")
    m = h.metrics()
    assert (all(s["result"] != "overridden" for s in dev["settings"].values())
            and m.get('blkpolicyd_device_overridden{device="loop0"}') == 0
            and h.call("verify")["drifted"] == 0), \
        f"blkpolicyd's own write in flight: {dev['settings']}"
    d.stop()
