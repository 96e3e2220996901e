# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bio-based devices (dm, md, NVMe multipath heads) on the fake kernel (no
root): a policy that names class = bio-based sets what such a queue has
(read-ahead, where the page cache reads), with records, drift and the
put-back as on any disk; what only a request queue has is shown
unsupported and never written; a policy written for disks never reaches
them."""
import os

import pytest

from blkptest import faketree
from blkptest.faketree import write
from blkptest.daemon import Daemon, control_call, fixture_roots, wait_for

DM = ("[Match]\nclass = bio-based\ndriver = device-mapper\n"
      "[Queue]\nread_ahead_kb = 1024\nnr_requests = 64\nscheduler = none\n")
DISKS = "[Match]\n[Queue]\nread_ahead_kb = 4096\n"



class Host(faketree.Workspace):
    def __init__(self, blkpolicyd, fixture, work, policies):
        super().__init__(blkpolicyd, fixture, work)
        faketree.make(fixture, self.root, 1)
        os.mkdir(self.state, 0o700)
        os.mkdir(self.policies)
        for name, text in policies.items():
            write(os.path.join(self.policies, name), text)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        write(self.conf, "[Daemon]\ntick_interval_ms = 50\ndrift_sweep_seconds = 1\n")
        self.found = {a: self.live("dm-0", a) for a in ("read_ahead_kb", "nr_requests")}

    def start(self):
        args = ["--config", self.conf, "--policy-dir", self.policies, *fixture_roots(self.root),
                "--state-dir", self.state, "--socket", self.sock_path, "--device", "dm-0"]
        d = Daemon(self.blkpolicyd, self.work, args, env={"BLKPOLICYD_FAKE_KERNEL": "1"})
        self.running.append(d)
        d.wait_for("READY=1", timeout=60)
        return d

    def call(self, command, **kw):
        reply = control_call(self.sock_path, dict(command=command, **kw))
        assert reply["ok"], reply
        return reply["result"]


@pytest.fixture
def host_of(blkpolicyd, kvm_fixture, work, fault_injection):
    hosts = []

    def make(policies):
        hosts.append(Host(blkpolicyd, kvm_fixture, work, policies))
        return hosts[-1]
    yield make
    for h in hosts:
        h.cleanup()


def test_read_ahead_on_dm_with_records_drift_and_put_back(host_of):
    h = host_of({"80-dm.policy": DM, "99-disks.policy": DISKS})
    assert h.found["read_ahead_kb"] != "1024", h.found
    d = h.start()
    wait_for(lambda: h.live("dm-0", "read_ahead_kb") == "1024", 30, "dm-0's read-ahead set")
    dev = h.call("device", device="dm-0")
    s = dev["settings"]
    assert dev["managed"] and dev["policy"] == "80-dm.policy" and dev["matched"] == ["80-dm.policy"], \
        f"only the policy that names the class: {dev}"
    assert "bio-based" in dev["reason"], dev["reason"]
    assert s["read_ahead_kb"]["result"] == "applied", s
    assert (s["nr_requests"]["result"], s["nr_requests"]["error"]) == \
        ("unsupported", "a bio-based queue has no nr_requests"), s
    assert s["scheduler"]["result"] == "unsupported", s
    assert h.live("dm-0", "nr_requests") == h.found["nr_requests"], "nothing a bio-based queue lacks is written"
    ex = h.call("explain", device="dm-0")
    disks = [p for p in ex["policies"] if p["name"] == "99-disks.policy"][0]
    assert not disks["matched"] and "bio-based" in disks["failed"], disks

    # someone else's change is drift, as on any disk
    write(h.qfile("dm-0", "read_ahead_kb"), "256")
    wait_for(lambda: h.call("status")["overridden"] == 1, 30, "dm-0 overridden")
    h.call("resume", device="dm-0")
    wait_for(lambda: h.live("dm-0", "read_ahead_kb") == "1024", 30, "resumed: set again")
    assert d.stop() == 0
    assert {a: h.live("dm-0", a) for a in h.found} == h.found, "the stop puts back the value found"


def test_policies_for_disks_leave_dm_alone(host_of):
    h = host_of({"99-disks.policy": DISKS})
    h.start()
    dev = h.call("device", device="dm-0")
    assert not dev["managed"] and dev["reason"] == "bio-based: the device has no I/O scheduler", dev
    assert h.live("dm-0", "read_ahead_kb") == h.found["read_ahead_kb"]
