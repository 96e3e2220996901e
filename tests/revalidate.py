# SPDX-License-Identifier: LGPL-2.1-or-later
"""Settings survive revalidation (issue #31) on the fake kernel (no root).

A revalidation (a SCSI rescan, an NVMe rescan, a dm table load, a
virtio-blk resize) ends in a queue-limits update, which puts read_ahead_kb
back to the kernel's default (faketree.revalidate(), as 6.18's
blk_apply_bdi_limits()). That is the kernel's doing: blkpolicyd sets its
value again, says so, marks nothing overridden, and a stop still puts back
the value it found. An admin's write (anything but the kernel's default)
stays an override, kept at stop.

The interleavings: seeded random steps (admin writes, revalidations with
or without a change event and with new limits, reloads that change the
policy's value, SIGKILL and restart, stop and start) on two disks; after
each step the disks hold the policy's value or the admin's, and at every
stop exactly what was found (or the admin's value). A failing seed prints
its steps; BLKPOLICYD_REVALIDATE_SEEDS, _STEPS and _SEED (one seed) choose
the runs."""
import os
import random
import signal

import pytest

from blkptest import faketree
from blkptest.daemon import Daemon, control_call, wait_for
from blkptest.faketree import write

DISKS = faketree.disks(2)
CONF = "[Daemon]\ntick_interval_ms = 50\ndrift_sweep_seconds = 1\n"
DISKSEQ = "2"       # the fixture's loop0: the same medium, no new media

SEEDS = int(os.environ.get("BLKPOLICYD_REVALIDATE_SEEDS", "8"))
STEPS = int(os.environ.get("BLKPOLICYD_REVALIDATE_STEPS", "24"))
ONE_SEED = os.environ.get("BLKPOLICYD_REVALIDATE_SEED")


class Host(faketree.Workspace):
    """Two loop disks on the fake kernel with the limits given, a policy
    on read_ahead_kb, the fake uevent socket."""

    def __init__(self, blkpolicyd, fixture, work, rotational="0", max_sectors_kb="1280"):
        super().__init__(blkpolicyd, fixture, work)
        faketree.make(fixture, self.root, len(DISKS))
        for dev in DISKS:
            write(self.qfile(dev, "optimal_io_size"), "0")
            write(self.qfile(dev, "rotational"), rotational)
            write(self.qfile(dev, "max_sectors_kb"), max_sectors_kb)
            # what the kernel gave the disk when it came: its default
            write(self.qfile(dev, "read_ahead_kb"), str(faketree.read_ahead_default(self.root, dev)))
        os.mkdir(self.state, 0o700)
        os.mkdir(self.policies)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        write(self.conf, CONF)
        self.uevents = faketree.Uevents(work)
        self.daemon = None

    def policy(self, read_ahead_kb):
        write(os.path.join(self.policies, "50-ra.policy"),
              f"[Match]\nname = loop*\n[Queue]\nread_ahead_kb = {read_ahead_kb}\n")

    def start(self):
        self.uevents.restarted()
        d = Daemon(self.blkpolicyd, self.work, self.daemon_args(self.conf), append_log=bool(self.running),
                   env={"BLKPOLICYD_FAKE_KERNEL": "1", **self.uevents.env()})
        self.running.append(d)
        d.wait_for("READY=1", timeout=60)
        self.uevents.settle()
        self.daemon = d
        return d

    def stop(self):
        rc = self.daemon.stop(timeout=30)
        self.daemon = None
        return rc

    def kill(self):
        self.daemon.proc.kill()
        self.daemon.proc.wait(timeout=30)
        self.daemon = None

    def call(self, command, **kw):
        reply = control_call(self.sock_path, dict(command=command, **kw))
        assert reply["ok"], reply
        return reply["result"]

    def overridden(self, dev):
        return self.call("device", device=dev)["overridden"]

    def ra(self, dev):
        return self.live(dev, "read_ahead_kb")

    def revalidate(self, dev, event, **limits):
        """The kernel's revalidation of dev, with its change event or
        without (a rescan at the same size sends none)."""
        ra = faketree.revalidate(self.root, dev, **limits)
        if event:
            self.uevents.change(dev, 7, DISKS.index(dev), DISKSEQ)
        return ra

    def text(self):
        return self.running[-1].text() if self.running else ""

    def cleanup(self):
        super().cleanup()
        self.uevents.close()


@pytest.fixture
def host_of(blkpolicyd, kvm_fixture, work, fault_injection):
    hosts = []

    def make(**kw):
        hosts.append(Host(blkpolicyd, kvm_fixture, work, **kw))
        return hosts[-1]
    yield make
    for h in hosts:
        h.cleanup()


@pytest.mark.parametrize("event", [True, False], ids=["change-event", "no-event"])
def test_read_ahead_comes_back_after_a_revalidation(host_of, event):
    """64 KiB under a default of 128: a revalidation raises it to 128 (never
    lowered since 6.15, raised to the default). Set again, with the change
    event at once, without one by the drift sweep; no override; the found
    128 back at stop."""
    h = host_of()
    h.policy(64)
    h.start()
    assert [h.ra(dev) for dev in DISKS] == ["64", "64"]
    assert h.revalidate("loop0", event) == 128
    wait_for(lambda: h.ra("loop0") == "64", 30, "loop0's read_ahead_kb set again")
    said = "read_ahead_kb is back at the kernel's default 128 (a queue-limits update: a revalidation), " \
           "setting it again to 64"
    assert said in h.text(), h.text()[-3000:]
    if not event:
        assert "loop0: read_ahead_kb is at the kernel's default 128" in h.text(), "the sweep saw it"
    assert not h.overridden("loop0") and h.call("status")["overridden"] == 0
    assert "behind blkpolicyd's back" not in h.text() and "changed to 128" not in h.text()
    # counted when the pass is back on the loop, a moment after its write
    wait_for(lambda: "\nblkpolicyd_kernel_resets_total 1\n" in h.call("metrics")["text"], 30,
             "blkpolicyd_kernel_resets_total 1")
    assert h.stop() == 0
    assert [h.ra(dev) for dev in DISKS] == ["128", "128"], "the found value back at stop"
    assert not os.listdir(os.path.join(h.state, "devices"))


def test_virtio_on_a_kernel_that_gives_rotational_disks_8192(host_of):
    """Issue #31's 7.x case: a virtio disk (rotational=1, max_sectors_kb
    4096) has 8192 KiB; a policy pins 128. A revalidation puts 8192 back,
    which is also the found value: the kernel's, not the admin putting the
    found value back by hand. 128 again; 8192 at stop."""
    h = host_of(rotational="1", max_sectors_kb="4096")
    assert h.ra("loop0") == "8192"
    h.policy(128)
    h.start()
    assert h.ra("loop0") == "128"
    assert h.revalidate("loop0", True) == 8192
    assert h.ra("loop0") == "128" and not h.overridden("loop0"), h.text()[-3000:]
    assert h.stop() == 0
    assert [h.ra(dev) for dev in DISKS] == ["8192", "8192"]


def test_new_limits_keep_the_found_value(host_of):
    """A dm table load with a new io_opt (1 MiB): the default is 2048 now.
    Set again; what goes back at stop is what was found (128), not the new
    default: nothing lost first (docs/reliability.md, "Revalidation")."""
    h = host_of()
    h.policy(64)
    h.start()
    assert h.revalidate("loop1", True, io_opt=1048576) == 2048
    assert h.ra("loop1") == "64" and not h.overridden("loop1"), h.text()[-3000:]
    with open(os.path.join(h.state, "devices", "7:1")) as f:
        assert "\nread_ahead_kb 128 64 -\n" in f.read(), "the found value as found"
    assert h.stop() == 0
    assert h.ra("loop1") == "128"


def test_an_admins_write_is_still_an_override(host_of):
    """512 is not the kernel's default: the admin's. Overridden, left; a
    revalidation keeps it (above the default) and changes nothing of the
    override; kept at stop."""
    h = host_of()
    h.policy(64)
    h.start()
    write(h.qfile("loop0", "read_ahead_kb"), "512")
    wait_for(lambda: h.overridden("loop0"), 30, "loop0 overridden")
    assert h.revalidate("loop0", True) == 512
    assert h.ra("loop0") == "512" and h.overridden("loop0")
    h.revalidate("loop0", False)
    assert h.stop() == 0
    assert (h.ra("loop0"), h.ra("loop1")) == ("512", "128"), "the admin's value kept, blkpolicyd's put back"


def test_the_default_written_by_hand_is_taken_for_the_kernels(host_of):
    """The limit of the rule, as documented: an admin who writes exactly the
    kernel's default cannot be told from a revalidation, and gets the
    policy's value again (pause or exclude= the disk to keep it)."""
    h = host_of()
    h.policy(64)
    h.start()
    write(h.qfile("loop0", "read_ahead_kb"), "128")
    wait_for(lambda: h.ra("loop0") == "64", 30, "the sweep's pass")
    assert not h.overridden("loop0")
    assert h.stop() == 0


def set_kernel(h, release):
    """The tree's kernel release, which the daemon reads at start."""
    write(os.path.join(h.root, "proc", "sys", "kernel", "osrelease"), release)


def test_before_6_15_a_value_above_the_default_is_reset_too(host_of):
    """6.12.0 - 6.12.25 (and 6.9 - 6.14): blk_apply_bdi_limits() sets the
    default whatever the value (no max3 yet): a policy's 4096 goes back to
    128 at a revalidation, and is set again."""
    h = host_of()
    set_kernel(h, "6.12.10")
    h.policy(4096)
    h.start()
    assert h.revalidate("loop0", True) == 4096, "6.18's fake kernel keeps it ..."
    write(h.qfile("loop0", "read_ahead_kb"), str(faketree.read_ahead_default(h.root, "loop0", (6, 12))))
    h.uevents.change("loop0", 7, 0, DISKSEQ)      # ... 6.12.10's put the default back
    assert h.ra("loop0") == "4096" and not h.overridden("loop0"), h.text()[-3000:]
    assert h.stop() == 0 and h.ra("loop0") == "128"


def test_the_rotational_rule_is_the_kernels_of_6_17_on(host_of):
    """A rotational disk with max_sectors_kb 4096: its default is 128 before
    6.17 and 8192 from it on (459779d04ae8). On 6.12 an 8192 written over
    the policy's value is an admin's, not the kernel's."""
    h = host_of(rotational="1", max_sectors_kb="4096")
    set_kernel(h, "6.12.117")
    write(h.qfile("loop0", "read_ahead_kb"), "128")
    write(h.qfile("loop1", "read_ahead_kb"), "128")
    h.policy(64)
    h.start()
    write(h.qfile("loop0", "read_ahead_kb"), "8192")
    wait_for(lambda: h.overridden("loop0"), 30, "loop0 overridden: 8192 is not 6.12's default")
    write(h.qfile("loop1", "read_ahead_kb"), "128")     # 6.12's revalidation of loop1
    wait_for(lambda: h.ra("loop1") == "64", 30, "loop1 set again: 128 is 6.12's default")
    assert not h.overridden("loop1")
    assert h.stop() == 0 and (h.ra("loop0"), h.ra("loop1")) == ("8192", "128")


# The interleavings ------------------------------------------------------

ADMIN_VALUES = ("512", "1024")          # above every default drawn: a revalidation keeps them
POLICY_VALUES = ("32", "64")            # below every default: a revalidation resets them
IO_OPTS = (None, 0, 65536)              # None: the limits stay; 64 KiB: a default of 256


class Model:
    """What each disk must hold: the policy's value, or the admin's once
    they wrote; at stop, the value found when the claim began (or the
    admin's)."""

    def __init__(self, h):
        self.h = h
        self.policy = POLICY_VALUES[0]
        self.found = {}
        self.admin = {}

    def begin(self):
        """A start with no record: what is live now is what is found."""
        self.found = {dev: self.h.ra(dev) for dev in DISKS}
        self.admin = {}

    def expected(self, dev):
        return self.admin.get(dev, self.policy)

    def final(self, dev):
        return self.admin.get(dev, self.found[dev])


def draw(rng):
    kind = rng.choice(["admin", "revalidate", "revalidate", "revalidate", "reload", "kill", "restart"])
    dev = rng.choice(DISKS)
    if kind == "admin":
        return (kind, dev, rng.choice(ADMIN_VALUES))
    if kind == "revalidate":
        return (kind, dev, rng.random() < 0.5, rng.choice(IO_OPTS))
    if kind == "reload":
        return (kind, rng.choice(POLICY_VALUES))
    return (kind,)


def run_step(h, m, step):
    kind = step[0]
    if kind == "admin":
        _, dev, value = step
        write(h.qfile(dev, "read_ahead_kb"), value)
        m.admin[dev] = value
        wait_for(lambda: h.overridden(dev), 30, f"{dev} overridden")
    elif kind == "revalidate":
        _, dev, event, io_opt = step
        h.revalidate(dev, event, io_opt=io_opt)
    elif kind == "reload":
        m.policy = step[1]
        h.policy(m.policy)
        h.daemon.reload(timeout=30)
        h.uevents.settle()
    elif kind == "kill":
        h.kill()
        h.start()
    elif kind == "restart":
        rc = h.stop()
        assert rc == 0, f"stop exit {rc}"
        check_final(h, m)
        m.begin()
        h.start()


def check_final(h, m):
    got = {dev: h.ra(dev) for dev in DISKS}
    want = {dev: m.final(dev) for dev in DISKS}
    assert got == want, f"after stop: {got}, expected (found or the admin's) {want}"
    left = os.listdir(os.path.join(h.state, "devices"))
    assert not left, f"records left after a stop: {left}"


def seeds():
    return [int(ONE_SEED)] if ONE_SEED else list(range(1, SEEDS + 1))


@pytest.mark.parametrize("seed", seeds())
def test_interleavings(host_of, seed):
    rng = random.Random(seed)
    steps = [draw(rng) for _ in range(STEPS)]
    h = host_of()
    m = Model(h)
    h.policy(m.policy)
    m.begin()
    h.start()
    done = []
    try:
        for step in steps:
            run_step(h, m, step)
            done.append(step)
            # every disk at the policy's value, or the admin's: the sweep
            # (no event) has a second to see a revalidation
            wait_for(lambda: all(h.ra(dev) == m.expected(dev) for dev in DISKS), 30,
                     f"the disks at {[m.expected(dev) for dev in DISKS]}, now "
                     f"{[h.ra(dev) for dev in DISKS]}")
            # and the pass that wrote it back on the loop: a revalidation
            # between its write and its read-back would be read as the
            # kernel not keeping the value (a race no real rescan runs)
            h.uevents.settle()
            for dev in DISKS:
                assert h.overridden(dev) == (dev in m.admin), f"{dev}: overridden only after an admin's write"
        assert h.stop() == 0
        check_final(h, m)
    except BaseException:
        print(f"seed {seed}, {len(done)} of {len(steps)} steps done; the steps:")
        for i, step in enumerate(steps):
            print(f"  {i}{' <- failed here' if i == len(done) else ''}: {step}")
        print(f"replay: BLKPOLICYD_REVALIDATE_SEED={seed} BLKPOLICYD_REVALIDATE_STEPS={STEPS} "
              "meson test -C build revalidate")
        raise
