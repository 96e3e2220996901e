# SPDX-License-Identifier: LGPL-2.1-or-later
"""A canary per policy on the fake kernel (no root): a policy file with
[Policy] mode = observe is decided and shown, never written, while the rest
of the host enforces. Promoted to enforce it is written like any policy;
taken back to observe, what it wrote goes back to the value found before
the first write, and the enforcing files' values hold again."""
import glob
import os
import shutil

import pytest

from blkptest import faketree
from blkptest.faketree import write
from blkptest.daemon import Daemon, control_call, ctl, wait_for

BASE = "[Match]\nname = loop*\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n"
CANARY = "[Policy]\nmode = {mode}\n[Match]\nname = loop*\n[Queue]\nread_ahead_kb = 1024\nnr_requests = 64\n"
NEW_DISK = "[Policy]\nmode = observe\n[Match]\nname = loop2\n[Queue]\nscheduler = kyber\n"



class Host(faketree.Workspace):
    """Three loop disks on the fake kernel: loop0 and loop1 under BASE and the
    canary, loop2 under only a canary of its own."""

    FOUND = {"scheduler": "none", "read_ahead_kb": "128", "nr_requests": "128"}

    def __init__(self, blkpolicyd, fixture, work):
        super().__init__(blkpolicyd, fixture, work)
        self.disks = faketree.disks(3)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        faketree.make(fixture, self.root, 3)
        for dev in self.disks:
            shutil.rmtree(self.qfile(dev, "iosched"), ignore_errors=True)
            write(self.qfile(dev, "scheduler"), "[none] mq-deadline kyber bfq")
            write(self.qfile(dev, "read_ahead_kb"), self.FOUND["read_ahead_kb"])
            write(self.qfile(dev, "nr_requests"), self.FOUND["nr_requests"])
        os.mkdir(self.state, 0o700)
        os.mkdir(self.policies)
        self.policy("50-loop.policy", BASE.replace("loop*", "loop[01]"))
        self.policy("90-canary.policy", CANARY.format(mode="observe").replace("loop*", "loop[01]"))
        self.policy("91-loop2.policy", NEW_DISK)
        write(self.conf, "[Daemon]\ntick_interval_ms = 50\ndrift_sweep_seconds = 1\n")

    def policy(self, name, text):
        write(os.path.join(self.policies, name), text)

    def start(self, *extra):
        d = Daemon(self.blkpolicyd, self.work, self.daemon_args(self.conf, *extra),
                   env={"BLKPOLICYD_FAKE_KERNEL": "1"})
        self.running.append(d)
        d.wait_for("READY=1", timeout=60)
        return d

    def call(self, command, **kw):
        reply = control_call(self.sock_path, dict(command=command, **kw))
        assert reply["ok"], reply
        return reply["result"]

    def values(self):
        return {dev: {a: self.live(dev, a) for a in self.FOUND} for dev in self.disks}

    def records(self):
        """The state records' text, every file of them."""
        text = ""
        for path in glob.glob(os.path.join(self.state, "**"), recursive=True):
            if os.path.isfile(path):
                with open(path, errors="replace") as f:
                    text += f.read()
        return text


@pytest.fixture
def host(blkpolicyd, kvm_fixture, work, fault_injection):
    h = Host(blkpolicyd, kvm_fixture, work)
    yield h
    h.cleanup()


def enforced(h):
    wait_for(lambda: all(h.live(d, "read_ahead_kb") == "256" and h.live(d, "scheduler") == "mq-deadline"
                         for d in ("loop0", "loop1")), 30, "the enforcing policy applied")


def test_a_canary_is_shown_and_never_written(host, blkpolicyctl):
    h = host
    h.start()
    enforced(h)
    assert h.values()["loop2"] == h.FOUND, "a disk only a canary matches is left as the kernel set it"
    # (a scheduler switch resets nr_requests: the kernel's doing, not the canary's)
    assert all(h.live(d, "nr_requests") != "64" for d in h.disks), "the canary's nr_requests is never written"
    assert "1024" not in h.records() and "kyber" not in h.records(), \
        f"nothing of a canary's in the records of what blkpolicyd wrote: {h.records()}"

    dev = h.call("device", device="loop0")
    assert dev["canary"]["policy"] == "90-canary.policy", dev
    c = dev["canary"]["settings"]
    assert set(c) == {"read_ahead_kb", "nr_requests"}, c
    assert (c["read_ahead_kb"]["current"], c["read_ahead_kb"]["target"], c["read_ahead_kb"]["result"]) == \
        ("256", "1024", "planned"), c
    assert c["nr_requests"]["source"] == "90-canary.policy", c
    assert dev["settings"]["read_ahead_kb"]["result"] in ("applied", "unchanged"), dev["settings"]
    assert dev["matched"] == ["50-loop.policy"], "a canary is no policy in force"
    only = h.call("device", device="loop2")
    assert only["policy"] is None and only["reason"].startswith("only a canary"), only
    assert only["canary"]["settings"]["scheduler"]["target"] == "kyber", only

    v = h.call("verify")
    assert (v["pending"], v["drifted"], v["not_kept"], v["canary"]) == (0, 0, 0, 3), v
    r = ctl(blkpolicyctl, h.sock_path, "verify")
    assert r.returncode == 0, f"a canary's changes are no drift, no attention: {r.returncode} {r.stdout}"
    assert "loop0: read_ahead_kb is 256, canary 90-canary.policy would set 1024 (mode=observe: not written)" \
        in r.stdout, r.stdout
    assert "3 devices with changes a canary would make" in r.stdout, r.stdout
    st = h.call("status")
    assert st["canaries"] == 2 and st["mode"] == "enforce", st
    text = h.call("metrics")["text"]
    assert 'blkpolicyd_settings{result="canary"} 5\n' in text, text
    assert 'blkpolicyd_settings{result="pending"} 0\n' in text, text

    # the admin sets by hand what the canary wants: no change left to show
    write(h.qfile("loop1", "nr_requests"), "64")
    c = h.call("device", device="loop1")["canary"]["settings"]
    assert c["nr_requests"]["result"] == "unchanged", c
    assert h.call("verify")["canary"] == 3, "loop1 still has read_ahead_kb to change"


def test_promote_then_back_to_observe_loses_nothing(host):
    h = host
    d = h.start()
    enforced(h)
    before = h.values()
    # nr_requests goes back to the value found before blkpolicyd's first
    # write, not to the one the scheduler switch left: the record keeps
    # what was there before anything of blkpolicyd's (a switch resets it)
    for x in ("loop0", "loop1"):
        before[x]["nr_requests"] = h.FOUND["nr_requests"]

    h.policy("90-canary.policy", CANARY.format(mode="enforce").replace("loop*", "loop[01]"))
    d.reload()
    wait_for(lambda: all(h.live(x, "read_ahead_kb") == "1024" and h.live(x, "nr_requests") == "64"
                         for x in ("loop0", "loop1")), 30, "the promoted policy written")
    dev = h.call("device", device="loop0")
    assert dev["canary"] is None and "90-canary.policy" in dev["matched"], dev
    assert h.call("status")["canaries"] == 1, "loop2's is still a canary"

    h.policy("90-canary.policy", CANARY.format(mode="observe").replace("loop*", "loop[01]"))
    d.reload()
    wait_for(lambda: h.values() == before, 30, f"back to the values before the promotion: {before}, now {h.values()}")
    assert h.values()["loop2"] == h.FOUND
    dev = h.call("device", device="loop0")
    assert dev["canary"]["settings"]["nr_requests"]["result"] == "planned", dev
    assert h.call("verify")["pending"] == 0


def test_enforced_file_turned_canary_puts_back_what_it_wrote(host):
    """The base policy itself made a canary: blkpolicyd no longer wants its
    values, so what it wrote goes back to what was found, and the canary
    shows them as changes it would make."""
    h = host
    d = h.start()
    enforced(h)
    h.policy("50-loop.policy", "[Policy]\nmode = observe\n" + BASE.replace("loop*", "loop[01]"))
    d.reload()
    wait_for(lambda: h.values() == {x: h.FOUND for x in h.disks}, 30, "every value found put back")
    c = h.call("device", device="loop0")["canary"]["settings"]
    assert (c["scheduler"]["target"], c["read_ahead_kb"]["target"]) == ("mq-deadline", "1024"), c


def test_observe_host_with_a_canary(host):
    """mode=observe for the host: the enforcing files are pending, the
    canary apart; nothing written at all."""
    h = host
    write(h.conf, "[Daemon]\nmode = observe\ntick_interval_ms = 50\n")
    h.start()
    wait_for(lambda: h.call("verify")["pending"] == 2, 30, "both enforcing disks pending")
    v = h.call("verify")
    assert v["mode"] == "observe" and v["canary"] == 3, v
    assert h.values() == {x: h.FOUND for x in h.disks}, "observe writes nothing"


def test_canary_errors_at_file_line(host, blkpolicyd):
    h = host
    h.policy("92-bad.policy", "[Policy]\nmode = canary\n")
    d = h.start()
    st = h.call("status")
    assert any(e["line"] == 2 and "expected enforce or observe" in e["message"] for e in st["policy_errors"]), st
    assert d.proc.poll() is None
