# SPDX-License-Identifier: LGPL-2.1-or-later
"""Nothing lost, on the fake kernel (no root): a copy of a fixture tree whose
writes behave as the block layer's (BLKPOLICYD_FAKE_KERNEL, test builds).
Every situation of the "nothing lost" issue that needs no kernel, each
asserting the exact values the disks hold after the daemon is gone:

  a scheduler switch with tunables; SIGKILL at every step of apply (fault
  points, not timing) then --restore, and then restart + SIGTERM; a reload
  that removes a policy, drops a setting, excludes the disk, empties the
  policy dir; drift then stop; a restore that fails keeps its record; an
  unreadable record writes nothing; a hostile state dir; --once undone by
  --restore; a switch's read-back cut short; a queue with no current
  scheduler; a record left by an earlier disk at the same number; a disk
  replaced under its name while a write of its pass is held; a disk
  removed and added again at its number while its first save is held
  (the fake uevent socket brings the events), then SIGKILL; a
  [Dynamic] flip to busy settings and back, on load faked in diskstats; a
  record of the first format (an upgrade after a crash) taken over.

Each test starts from a fresh tree (reset()); the daemons it started are
killed by the fixture, pass or fail.

tests/integration/test_nothing_lost.py runs the same on real loop devices."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from blkptest import faketree
from blkptest.daemon import Daemon, wait_for
from blkptest.diskstats import Feeder
from blkptest.faketree import DISKS

# The original state every case starts from: what an admin had set.
ORIGINAL = {
    "loop0": {"scheduler": "mq-deadline", "nr_requests": "50", "read_ahead_kb": "128",
              "iosched/fifo_batch": "7", "iosched/read_expire": "400"},
    "loop1": {"scheduler": "none", "nr_requests": "100", "read_ahead_kb": "256"},
}


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(value + "\n")


class Tree(faketree.Workspace):
    """The fake kernel's tree, the daemon's state and policies, in one test's work directory."""

    def __init__(self, blkpolicyd, fixture, work):
        super().__init__(blkpolicyd, fixture, work)
        self.conf = os.path.join(work, "blkpolicyd.conf")

    def make_tree(self):
        faketree.make(self.fixture, self.root)
        self.set_original()

    def set_original(self):
        for dev, attrs in ORIGINAL.items():
            self.set_queue(dev, attrs)

    def set_queue(self, dev, values):
        """dev's queue as the kernel would show values: the scheduler
        selected, no iosched/ (what a switch brings is the fake kernel's)."""
        shutil.rmtree(self.qfile(dev, "iosched"), ignore_errors=True)
        write(self.qfile(dev, "scheduler"), " ".join(f"[{s}]" if s == values["scheduler"] else s
                                                     for s in ("none", "mq-deadline", "kyber", "bfq")))
        for attr, value in values.items():
            if attr != "scheduler":
                write(self.qfile(dev, attr), value)

    def snapshot(self, dev):
        return {attr: self.live(dev, attr) for attr in ORIGINAL[dev]}

    def all_original(self):
        """(ok, detail): every disk holds exactly its original values."""
        now = {dev: self.snapshot(dev) for dev in DISKS}
        return now == ORIGINAL, now

    def policy(self, name, text):
        os.makedirs(self.policies, exist_ok=True)
        write(os.path.join(self.policies, name), text)

    def reset(self, config=""):
        self.make_tree()
        shutil.rmtree(self.state, ignore_errors=True)
        shutil.rmtree(self.policies, ignore_errors=True)
        os.mkdir(self.state, 0o700)
        write(self.conf, "[Daemon]\ntick_interval_ms = 50\n" + config)
        # loop0: a switch away from mq-deadline, with its own queue settings
        self.policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nscheduler = none\nread_ahead_kb = 4096\n")
        # loop1: a switch to bfq and one of bfq's tunables
        self.policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\n[bfq]\nlow_latency = 0\n")

    def args(self, *extra):
        return self.daemon_args(self.conf, *extra)

    def run(self, *extra, faults=""):
        env = dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1", BLKPOLICYD_FAULTS=faults)
        return subprocess.run([self.blkpolicyd, *self.args(*extra)], capture_output=True, text=True, env=env,
                              timeout=60)

    def daemon(self, *extra, faults="", ready=True, env=None):
        d = Daemon(self.blkpolicyd, self.work, self.args(*extra),
                   env={"BLKPOLICYD_FAKE_KERNEL": "1", "BLKPOLICYD_FAULTS": faults, **(env or {})})
        self.running.append(d)
        if ready:
            d.wait_for("READY=1", timeout=30)
        return d

    def once_applied(self, what, tail=1500):
        """A fresh tree (reset()), then --once: asserts that it applied."""
        self.reset()
        r = self.run("--once")
        assert r.returncode == 0 and self.applied(), \
            f"{what}: {r.stderr[-tail:]}"

    def applied(self):
        return (self.live("loop0", "scheduler") == "none" and self.live("loop0", "read_ahead_kb") == "4096"
                and self.live("loop1", "scheduler") == "bfq" and self.live("loop1", "iosched/low_latency") == "0")


@pytest.fixture
def tree(blkpolicyd, kvm_fixture, work, fault_injection):
    t = Tree(blkpolicyd, kvm_fixture, work)
    yield t
    t.cleanup()


def test_switch_once_then_restore(tree):
    # 1. The switch resets nr_requests and replaces iosched/: all read before.
    tree.once_applied("--once applies on the fake kernel")
    assert tree.live("loop0", "nr_requests") == "128" and tree.live("loop0", "iosched/fifo_batch") is None, \
        f'the switch reset what followed the old scheduler: {tree.snapshot("loop0")}'
    with open(os.path.join(tree.state, "devices", "7:0")) as f:
        rec = f.read()
    assert ("\nscheduler mq-deadline none -\n" in rec and "\nnr_requests 50 * -\n" in rec
            and "\niosched/fifo_batch 7 * -\n" in rec and "\niosched/read_expire 400 * -\n" in rec), \
        f"the record holds what the switch reset, as found before it: {rec}"
    r = tree.run("--restore")
    ok, now = tree.all_original()
    assert (ok and
            r.returncode == 0), \
        f"--restore puts back the scheduler, then nr_requests and the old scheduler's tunables: {(now, r.stderr[-800:])}"
    assert os.listdir(os.path.join(tree.state, "devices")) == [], \
        "--restore leaves no record"


def max_sectors_case(tree):
    """loop0 rotational, read_ahead_kb 64 and a policy of max_sectors_kb
    256 alone: the fake kernel (6.18) raises read-ahead to 2 x 256."""
    tree.reset()
    write(tree.qfile("loop0", "rotational"), "1")
    write(tree.qfile("loop0", "read_ahead_kb"), "64")
    tree.policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nmax_sectors_kb = 256\n")


def test_max_sectors_write_resets_read_ahead(tree):
    # 18. blkpolicyd's own max_sectors_kb write is a limits update that
    # raises read_ahead_kb: recorded before it, back after max_sectors_kb
    max_sectors_case(tree)
    d = tree.daemon()
    assert tree.live("loop0", "max_sectors_kb") == "256" and tree.live("loop0", "read_ahead_kb") == "512", \
        f'max_sectors_kb=256 on a rotational disk: the kernel raised read_ahead_kb to 512 (6.18): {d.text()[-1500:]}'
    rc = d.stop()
    now = (tree.live("loop0", "max_sectors_kb"), tree.live("loop0", "read_ahead_kb"))
    assert rc == 0 and now == ("1280", "64"), \
        f'... at stop max_sectors_kb=1280, then read_ahead_kb=64 are back (not 2560): {(rc, now)}'


@pytest.mark.parametrize("fault", ["write:*/loop0/queue/max_sectors_kb:KILL",
                                   "read:*/loop0/queue/max_sectors_kb:KILL:1:2"])
def test_max_sectors_sigkill_then_restore(tree, fault):
    # the same killed before or after the max_sectors_kb write, then --restore
    max_sectors_case(tree)
    r = tree.run("--once", faults=fault)
    r2 = tree.run("--restore")
    now = (tree.live("loop0", "max_sectors_kb"), tree.live("loop0", "read_ahead_kb"))
    assert r.returncode == -signal.SIGKILL and r2.returncode == 0 and now == ("1280", "64"), \
        f'SIGKILL ({fault}), --restore: max_sectors_kb=1280 and read_ahead_kb=64 back: {(r.returncode, r2.returncode, now, r2.stderr[-800:])}'


def test_max_sectors_and_read_ahead_both_wanted(tree):
    # a policy of both: read_ahead_kb written after max_sectors_kb, so its value holds
    max_sectors_case(tree)
    tree.policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nmax_sectors_kb = 256\nread_ahead_kb = 32\n")
    r = tree.run("--once")
    now = (tree.live("loop0", "max_sectors_kb"), tree.live("loop0", "read_ahead_kb"))
    assert r.returncode == 0 and now == ("256", "32"), \
        f'--once: max_sectors_kb=256, then read_ahead_kb=32 over the kernel 512: {(now, r.stderr[-800:])}'
    r = tree.run("--restore")
    now = (tree.live("loop0", "max_sectors_kb"), tree.live("loop0", "read_ahead_kb"))
    assert r.returncode == 0 and now == ("1280", "64"), \
        f'--restore: max_sectors_kb=1280, then read_ahead_kb=64: {(now, r.stderr[-800:])}'


def test_switch_daemon_then_sigterm(tree):
    # the same through the daemon: start, SIGTERM
    tree.reset()
    d = tree.daemon()
    assert tree.applied(), \
        f"the daemon applies: {d.text()[-1500:]}"
    rc = d.stop()
    ok, now = tree.all_original()
    assert ok and rc == 0, \
        f"SIGTERM puts back exactly what was found, exit 0: {(now, rc)}"


# 2. SIGKILL at every step of apply, then --restore; then restart + SIGTERM
KILL_POINTS = [
    ("before the first record is saved", "save:*/7?0:KILL"),
    ("record saved, scheduler not written", "write:*/loop0/queue/scheduler:KILL"),
    # the fake kernel's switch reads the list itself (the 3rd read), then
    # the pass reads back what landed (the 4th)
    ("scheduler being written", "read:*/loop0/queue/scheduler:KILL:1:2"),
    ("scheduler written, before it is read back", "read:*/loop0/queue/scheduler:KILL:1:3"),
    ("switched, before the second record", "save:*/7?0:KILL:1:1"),
    ("second record saved, read_ahead_kb not written", "write:*/loop0/queue/read_ahead_kb:KILL"),
    ("loop0 done, loop1's record saved, its scheduler not written", "write:*/loop1/queue/scheduler:KILL"),
    ("loop1: bfq written, its tunable not yet", "write:*/loop1/queue/iosched/low_latency:KILL"),
]


@pytest.mark.parametrize("how", ["--restore", "restart + SIGTERM"])
@pytest.mark.parametrize("what, fault", KILL_POINTS, ids=[f for _, f in KILL_POINTS])
def test_sigkill_at_every_step(tree, what, fault, how):
    # one pass at a time: a kill point names a step of one disk's pass,
    # and the fake kernel's switch (three file operations) is not
    # atomic under SIGKILL as the kernel's one write() is
    tree.reset("apply_parallelism = 1\n")
    r = tree.run("--once", faults=fault)
    killed = r.returncode == -signal.SIGKILL
    if how == "--restore":
        r2 = tree.run("--restore")
        rc = r2.returncode
    else:
        d = tree.daemon()
        rc = d.stop()
    ok, now = tree.all_original()
    assert killed and ok and rc == 0, \
        f"SIGKILL {what}; {how}: every original back: {(r.returncode, rc, now)}"


def test_reloads_put_back_what_is_no_longer_wanted(tree):
    # 3. reloads that no longer want what was set: put back while running
    tree.reset()
    tree.policy("70-ra.policy", "[Match]\nname = loop1\n[Queue]\nread_ahead_kb = 8192\n")
    d = tree.daemon()
    assert tree.applied() and tree.live("loop1", "read_ahead_kb") == "8192", \
        "reload setup applied"
    os.unlink(os.path.join(tree.policies, "70-ra.policy"))
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    assert (tree.live("loop1", "read_ahead_kb") == "256"
            and tree.live("loop1", "scheduler") == "bfq"), \
        ("a removed policy's setting is put back on reload", tree.snapshot("loop1"))
    tree.policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    assert tree.live("loop1", "scheduler") == "bfq" and tree.live("loop1", "iosched/low_latency") == "1", \
        ("a setting a policy dropped is put back (bfq's low_latency back to its default)", tree.snapshot("loop1"))
    with open(tree.conf, "a") as f:
        f.write("exclude = loop0\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    assert tree.snapshot("loop0") == ORIGINAL["loop0"], \
        f'a disk the config excludes now gets its originals back: {tree.snapshot("loop0")}'
    shutil.rmtree(tree.policies)
    os.mkdir(tree.policies)
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    ok, now = tree.all_original()
    assert ok, \
        f"an emptied policy dir puts everything back: {now}"
    rc = d.stop()
    assert (rc == 0 and tree.all_original()[0]
            and os.listdir(os.path.join(tree.state, "devices")) == []), \
        f'... and the stop after it has nothing left to do: {(rc, os.listdir(os.path.join(tree.state, "devices")))}'


def test_drift_then_stop(tree):
    # 4. drift, then stop: the admin's change stays, blkpolicyd's own goes back
    tree.reset("drift_checks_per_tick = 8\n")
    d = tree.daemon()
    write(tree.qfile("loop0", "scheduler"), "none mq-deadline [kyber] bfq")     # the admin, behind its back
    deadline = time.monotonic() + 10
    while "leaving it alone" not in d.text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "leaving it alone" in d.text(), \
        f"the admin's change is noticed: {d.text()[-1000:]}"
    rc = d.stop()
    assert (rc == 0 and tree.live("loop0", "scheduler") == "kyber" and tree.live("loop0", "read_ahead_kb") == "128"
            and tree.snapshot("loop1") == ORIGINAL["loop1"]), \
        ("at stop the admin's scheduler stays, and blkpolicyd's read_ahead_kb goes back", (rc, tree.snapshot("loop0"), tree.snapshot("loop1")))


def test_failed_restore_keeps_its_record(tree):
    # 5. a restore that fails keeps its record; --restore later finishes it
    tree.reset()
    d = tree.daemon(faults="write:*/loop0/queue/scheduler:EIO:1:1")
    rc = d.stop()
    assert (rc != 0 and tree.live("loop0", "scheduler") == "none"
            and os.path.exists(os.path.join(tree.state, "devices", "7:0"))), \
        f'a failed restore: exit non-zero, the record kept: {(rc, tree.snapshot("loop0"))}'
    r = tree.run("--restore")
    ok, now = tree.all_original()
    assert r.returncode == 0 and ok, \
        f"... and --restore finishes it: {(now, r.stderr[-800:])}"


def test_busy_put_back_is_written_again(tree):
    # 5b. EBUSY at a put-back is another disk of the same tag set switching
    # (7.3's trylock in elv_iosched_store): at SIGTERM in the VM bed
    # (tests/vm/stacktest.py), one of a multipath map's two paths, on one
    # SCSI host, stayed on none. The put-back waits it out, bounded.
    tree.reset()
    d = tree.daemon(faults="write:*/loop0/queue/scheduler:EBUSY:3:1")     # the first write applies
    rc = d.stop()
    ok, now = tree.all_original()
    assert ok and rc == 0 and not os.path.exists(os.path.join(tree.state, "devices", "7:0")), \
        f"a put-back the kernel refused three times with EBUSY is written again: {(rc, now, d.text()[-800:])}"


def test_read_back_cut_short_is_not_recorded(tree):
    # 5b. the read back after loop1's switch cut short ("none mq-deadli":
    # no current scheduler in it): what was written is not recorded as an
    # empty value, which would make the record unreadable and lose
    # loop1's found scheduler; the next round reads afresh
    tree.reset("apply_parallelism = 1\n")
    r = tree.run("--once", faults="read:*/loop1/queue/scheduler:short:1:3")
    assert r.returncode in (0, 1) and tree.live("loop1", "scheduler") == "bfq", \
        f"the switch landed: {(r.returncode, r.stderr[-800:])}"
    with open(os.path.join(tree.state, "devices", "7:1")) as f:
        rec = f.read()
    assert "\nscheduler none bfq -\n" in rec, f"the record holds bfq as written, none as found: {rec}"
    r = tree.run("--restore")
    ok, now = tree.all_original()
    assert r.returncode == 0 and ok, f"--restore puts back every original: {(now, r.stderr[-800:])}"


def test_no_current_scheduler_keeps_the_rest(tree):
    # 5c. a queue whose scheduler list has no current entry (without
    # elevator support, as null_blk's no_sched=1 before 6.14, it reads a
    # bare "none"): a policy's scheduler is not for it,
    # and its other settings are still applied, recorded and put back
    tree.reset()
    write(tree.qfile("loop1", "scheduler"), "none")
    tree.policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = none\nread_ahead_kb = 4096\n")
    r = tree.run("--once")
    assert r.returncode == 0 and tree.live("loop1", "read_ahead_kb") == "4096", \
        f"read_ahead_kb applied beside a scheduler it cannot have: {(r.returncode, r.stderr[-800:])}"
    with open(tree.qfile("loop1", "scheduler")) as f:
        assert f.read().strip() == "none", "the bare list was not written"
    with open(os.path.join(tree.state, "devices", "7:1")) as f:
        rec = f.read()
    assert "\nread_ahead_kb 256 4096 -\n" in rec and "scheduler" not in rec, f"the record: {rec}"
    r = tree.run("--restore")
    assert r.returncode == 0 and tree.live("loop1", "read_ahead_kb") == "256", \
        f"--restore puts read_ahead_kb back: {r.stderr[-800:]}"


def test_unreadable_record_writes_nothing(tree):
    # 6. an unreadable record: the disk is not written at all
    tree.reset()
    tree.run("--once")
    write(tree.qfile("loop0", "read_ahead_kb"), "128")      # as if the admin undid part of it
    r = tree.run("--once", faults="load:*/7?0:EIO")
    assert (tree.live("loop0", "read_ahead_kb") == "128" and "cannot read its state record" in r.stderr
            and tree.live("loop1", "scheduler") == "bfq"), \
        f'an unreadable record: nothing written to that disk, the other still managed: {(tree.snapshot("loop0"), r.stderr[-600:])}'
    r = tree.run("--restore")
    assert r.returncode == 0 and tree.all_original()[0], \
        f"... and its record still restores: {tree.all_original()[1]}"


def test_torn_record_survives_a_second_crash(tree):
    # 6b. a record with an unreadable line, set aside as .torn by the next
    # daemon, which then crashes before any pass saves again: the readable
    # part must still be under the disk's number for --restore
    tree.reset()
    d = tree.daemon()
    d.proc.kill()
    d.proc.wait(timeout=30)
    record = os.path.join(tree.state, "devices", "7:0")
    with open(record, "a") as f:
        f.write("garbage-line\n")
    d = tree.daemon()
    assert "unreadable line(s)" in d.text(), f"the torn line is reported: {d.text()[-800:]}"
    d.proc.kill()
    d.proc.wait(timeout=30)
    assert os.path.exists(record) and os.path.exists(record + ".torn"), \
        f"the readable part stays the record, the torn one beside it: {os.listdir(os.path.dirname(record))}"
    r = tree.run("--restore")
    ok, now = tree.all_original()
    assert r.returncode == 0 and ok, f"two crashes around a torn record; --restore: every original back: " \
                                     f"{(now, r.stderr[-600:])}"


def test_hostile_state_dir(tree):
    # 7. a hostile state dir: refused, nothing written
    tree.reset()
    os.chmod(tree.state, 0o777)
    r = tree.run("--once")
    ok, now = tree.all_original()
    assert r.returncode != 0 and "writable by nobody else" in r.stderr and ok, \
        f"a world-writable state dir is refused and nothing is written: {(r.stderr[-400:], now)}"
    os.chmod(tree.state, 0o700)
    os.makedirs(os.path.join(tree.state, "devices"), mode=0o700)
    write(os.path.join(tree.work, "victim"), "precious")
    os.symlink(os.path.join(tree.work, "victim"), os.path.join(tree.state, "devices", ".7:0.tmp"))
    r = tree.run("--once")
    with open(os.path.join(tree.work, "victim")) as f:
        assert f.read() == "precious\n" and r.returncode == 0, \
            "a planted temporary symlink is not followed"
    assert not os.path.lexists(os.path.join(tree.state, "devices", ".7:0.tmp")), \
        "a temporary left in the records' dir is removed at start (it can only be a crashed writer's)"


def test_earlier_disks_record_is_not_applied(tree):
    # 8. a record an earlier disk left at the same number is not applied
    tree.reset()
    tree.run("--once")
    queue = tree.qfile("loop0", "").rstrip("/")
    os.rename(queue, queue + ".old")                    # the disk goes ...
    shutil.copytree(queue + ".old", queue)              # ... a new one comes: a new queue
    shutil.rmtree(queue + ".old")
    write(tree.qfile("loop0", "scheduler"), "none [mq-deadline] kyber bfq")
    write(tree.qfile("loop0", "read_ahead_kb"), "512")
    r = tree.run("--once", "--dry-run")
    assert "was an earlier disk's" in r.stderr, \
        f"the old disk's record is recognised as another queue's: {r.stderr[-800:]}"
    r = tree.run("--restore")
    assert (tree.live("loop0", "scheduler") == "mq-deadline" and tree.live("loop0", "read_ahead_kb") == "512"
            and tree.live("loop0", "nr_requests") == "128"), \
        ("--restore writes nothing of the old disk's onto the new one", tree.snapshot("loop0"))


# loop0 as another disk has it when it takes loop0's name
REPLACEMENT = {"scheduler": "kyber", "nr_requests": "64", "read_ahead_kb": "512",
               "iosched/read_lat_nsec": "3000000"}


def test_disk_replaced_while_a_write_is_held(tree):
    # 8b. the disk is removed and another added under its name while a
    # write of its pass is held (before the write opens anything): the pass
    # works on the queue it opened, the old one, and nothing of it reaches
    # the new disk, whose originals stay its own
    tree.reset()
    d = tree.daemon(faults="write:*/loop0/queue/scheduler:DELAY=3000:1", ready=False)
    held = f"fault injection: write {tree.qfile('loop0', 'scheduler')} held"
    wait_for(lambda: held in d.text(), 20, "loop0's scheduler write to be held")
    queue = os.path.realpath(tree.qfile("loop0", "").rstrip("/"))
    os.rename(queue, queue + ".old")                    # the disk goes ...
    shutil.copytree(queue + ".old", queue)              # ... a new one comes: a new queue
    shutil.rmtree(tree.qfile("loop0", "iosched"))
    write(tree.qfile("loop0", "scheduler"), "none mq-deadline [kyber] bfq")
    for attr, value in REPLACEMENT.items():
        if attr != "scheduler":
            write(tree.qfile("loop0", attr), value)
    new = lambda: {attr: tree.live("loop0", attr) for attr in REPLACEMENT}
    assert new() == REPLACEMENT, f"the new disk is set up as planned: {new()}"
    d.wait_for("READY=1", timeout=30)
    with open(os.path.join(queue + ".old", "scheduler")) as f:
        old_scheduler = f.read().strip()
    assert new() == REPLACEMENT and old_scheduler == "[none] mq-deadline kyber bfq", \
        "the held write lands on the queue its pass opened, the old disk's, nothing on the new one: " \
        f"{(new(), old_scheduler)}"
    assert "loop0: gone while being set up" in d.text() and not os.path.exists(os.path.join(tree.state, "devices", "7:0")), \
        f"the old disk is gone, and its record with it: {d.text()[-1500:]}"
    rc = d.stop()
    assert rc == 0 and new() == REPLACEMENT and tree.snapshot("loop1") == ORIGINAL["loop1"], \
        f"the stop writes nothing of the old disk's onto the new one: {(rc, new(), tree.snapshot('loop1'))}"
    # the next daemon sees loop0 as the disk it is now: its originals are the new disk's
    d = tree.daemon()
    with open(os.path.join(tree.state, "devices", "7:0")) as f:
        rec = f.read()
    assert (tree.live("loop0", "scheduler") == "none" and "\nscheduler kyber none -\n" in rec
            and "\nread_ahead_kb 512 4096 -\n" in rec), \
        f"a new disk, its own originals in its record: {rec}"
    rc = d.stop()
    assert rc == 0 and new() == REPLACEMENT, \
        f"... and they are what goes back at stop: {(rc, new())}"


def replace_queue(tree, dev, values):
    """Removes dev's queue and adds a fresh one under its name: a new
    directory (made before the old one goes, so a new inode: a new queue
    identity) holding values."""
    queue = os.path.realpath(tree.qfile(dev, "").rstrip("/"))
    os.rename(queue, queue + ".old")
    shutil.copytree(queue + ".old", queue)
    shutil.rmtree(queue + ".old")
    tree.set_queue(dev, values)
    return os.stat(queue).st_ino


HOLD_MS = 4000


def test_record_saved_over_another_disks(tree):
    # 8c (#32 item 4). The disk is removed and another added at its number
    # while its first pass is held inside the save of its record (a slow
    # fsync of the state dir): the old pass must not rename its record over
    # the new disk's, nor share its temporary. After SIGKILL, --restore
    # finds the new disk's originals and puts them back.
    tree.reset()
    ue = faketree.Uevents(tree.work)
    try:
        d = tree.daemon(faults=f"save:*/7?0:DELAY={HOLD_MS}:1", ready=False, env=ue.env())
        held = f"fault injection: save {tree.state}/devices/7:0 held"
        seen = wait_for(lambda: held in d.text(), 20, "loop0's first save to be held")
        new_queue = replace_queue(tree, "loop0", REPLACEMENT)
        ue.send("remove", "loop0", 7, 0, 1, wait=False)
        ue.send("add", "loop0", 7, 0, 2, wait=False)
        sent = time.monotonic()
        ue.settled()
        assert sent - seen < HOLD_MS / 2000, \
            f"the new disk came while the old pass was held ({sent - seen:.1f} s after the hold began)"
        with open(os.path.join(tree.state, "devices", "7:0")) as f:
            rec = f.read()
        assert (f" queue={new_queue} " in rec and "\nscheduler kyber none -\n" in rec
                and "\nread_ahead_kb 512 4096 -\n" in rec and tree.live("loop0", "scheduler") == "none"), \
            f"the record under 7:0 is the new disk's, with its originals: {rec}"
        assert not [n for n in os.listdir(os.path.join(tree.state, "devices")) if n.endswith(".tmp")], \
            "no temporary left"
        d.proc.kill()
        d.proc.wait(timeout=30)
    finally:
        ue.close()
    r = tree.run("--restore")
    new = {attr: tree.live("loop0", attr) for attr in REPLACEMENT}
    assert r.returncode == 0 and new == REPLACEMENT and tree.snapshot("loop1") == ORIGINAL["loop1"], \
        f"SIGKILL, then --restore: the new disk's originals back: {(r.returncode, new, r.stderr[-1500:])}"


def test_sigkill_in_the_stops_restore(tree):
    # 10. a crash in the middle of a stop's restore: still blkpolicyd's value
    tree.reset()
    d = tree.daemon(faults="write:*/loop0/queue/read_ahead_kb:KILL:1:1")    # the first write applies, the restore dies
    d.proc.send_signal(signal.SIGTERM)
    rc = d.proc.wait(timeout=30)
    r = tree.run("--restore")
    ok, now = tree.all_original()
    assert rc == -signal.SIGKILL and r.returncode == 0 and ok, \
        f"SIGKILL in the middle of a stop's restore; --restore: every original back: {(rc, now, r.stderr[-600:])}"


def test_failed_switch_leaves_the_admins_tuning(tree):
    # 11. a switch that fails: what it would have reset stays the admin's
    tree.reset()
    d = tree.daemon(faults="write:*/loop0/queue/scheduler:EIO:1")
    write(tree.qfile("loop0", "nr_requests"), "64")                  # the admin tunes after the failed switch
    write(tree.qfile("loop0", "iosched/fifo_batch"), "32")
    rc = d.stop()
    assert (tree.live("loop0", "scheduler") == "mq-deadline" and tree.live("loop0", "nr_requests") == "64"
            and tree.live("loop0", "iosched/fifo_batch") == "32" and tree.live("loop0", "read_ahead_kb") == "128"), \
        ("a failed switch, then the admin's tuning: kept at stop, blkpolicyd's read_ahead_kb back", (rc, tree.snapshot("loop0")))


def test_queue_that_cannot_be_opened(tree):
    # 11b. a pass that cannot open the disk's queue directory reads and
    # writes nothing: an error that may pass (ENOENT while the disk is
    # there: its queue not registered yet) is tried again, one that will
    # not (EACCES) leaves the disk as it was, with no record
    tree.reset()
    d = tree.daemon(faults="read:*/loop0/queue:ENOENT:1")
    wait_for(lambda: tree.applied(), 20, "loop0 set on its retry")
    assert "loop0: cannot open its queue directory" in d.text(), d.text()[-1500:]
    rc = d.stop()
    assert rc == 0 and tree.all_original()[0], \
        f"the retried pass recorded what it found, and the stop puts it back: {(rc, tree.all_original()[1])}"
    tree.reset()
    r = tree.run("--once", faults="read:*/loop0/queue:EACCES")
    assert (tree.snapshot("loop0") == ORIGINAL["loop0"] and tree.live("loop1", "scheduler") == "bfq"
            and not os.path.exists(os.path.join(tree.state, "devices", "7:0"))), \
        f"loop0 untouched and unrecorded, loop1 set: {(tree.snapshot('loop0'), r.stderr[-1500:])}"


def test_reload_back_to_the_found_scheduler(tree):
    # 12. a reload wants the found scheduler back: what its switch reset comes back at once
    tree.reset()
    d = tree.daemon()
    tree.policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 4096\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    assert tree.snapshot("loop0") == dict(ORIGINAL["loop0"], read_ahead_kb="4096"), \
        f'a reload back to the found scheduler puts back nr_requests and the old tunables while running: {tree.snapshot("loop0")}'
    rc = d.stop()
    assert rc == 0 and tree.all_original()[0], \
        f"... and the stop after it leaves every original: {tree.all_original()[1]}"


def test_found_value_put_back_by_hand(tree):
    # 13. the admin puts the found value back by hand: theirs, not overwritten on reload
    tree.reset("drift_checks_per_tick = 0\n")
    d = tree.daemon()
    write(tree.qfile("loop0", "scheduler"), "none [mq-deadline] kyber bfq")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    assert tree.live("loop0", "scheduler") == "mq-deadline", \
        ("the found scheduler put back by hand is the admin's: a reload does not switch it again", tree.snapshot("loop0"))
    d.stop()


def test_nr_requests_dropped_under_a_switch(tree):
    # 14. a policy drops nr_requests while its switch stays: back now, and after the switch back
    tree.reset()
    tree.policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\nnr_requests = 64\n")
    d = tree.daemon()
    tree.policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    assert tree.live("loop1", "scheduler") == "bfq" and tree.live("loop1", "nr_requests") == "100", \
        f'nr_requests dropped under a switch that stays: back to 100 now: {tree.snapshot("loop1")}'
    rc = d.stop()
    assert rc == 0 and tree.snapshot("loop1") == ORIGINAL["loop1"], \
        f'... and after the switch back at stop: {tree.snapshot("loop1")}'


def test_restore_refused_while_a_daemon_runs(tree):
    # 15. one writer of records: --restore while a daemon runs is refused
    tree.reset()
    d = tree.daemon()
    r = tree.run("--restore")
    assert r.returncode != 0 and "Another blkpolicyd" in r.stderr and tree.applied(), \
        f"--restore while a daemon runs is refused, and changes nothing: {r.stderr[-400:]}"
    d.stop()


def test_overridden_disk_whose_policy_goes(tree):
    # 16. an overridden device whose policy goes: blkpolicyd's values back, the admin's kept
    tree.reset("drift_checks_per_tick = 8\n")
    d = tree.daemon()
    write(tree.qfile("loop0", "scheduler"), "none mq-deadline [kyber] bfq")      # the admin
    wait_for(lambda: "leaving it alone" in d.text(), 10, "the admin's change to be noticed")
    os.unlink(os.path.join(tree.policies, "50-switch.policy"))
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    assert tree.live("loop0", "read_ahead_kb") == "128" and tree.live("loop0", "scheduler") == "kyber", \
        ("an overridden disk whose policy is removed: blkpolicyd's read_ahead_kb back, the admin's kyber kept", tree.snapshot("loop0"))
    d.stop()


def test_async_depth_comes_back(tree):
    # 17. nr_requests written under mq-deadline resets its async_depth (6.18): it comes back too
    tree.reset()
    write(tree.qfile("loop0", "iosched/async_depth"), "20")
    tree.policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nnr_requests = 64\n")
    d = tree.daemon()
    assert tree.live("loop0", "nr_requests") == "64" and tree.live("loop0", "iosched/async_depth") == "48", \
        f'nr_requests=64 on mq-deadline: the kernel reset async_depth (the fake kernel models 6.18): {tree.snapshot("loop0")}'
    rc = d.stop()
    assert rc == 0 and tree.live("loop0", "nr_requests") == "50" and tree.live("loop0", "iosched/async_depth") == "20", \
        f'... at stop nr_requests=50, then async_depth=20 are back: {(rc, tree.live("loop0", "nr_requests"), tree.live("loop0", "iosched/async_depth"))}'


def test_flip_to_busy_and_back(tree):
    # 9. a flip to busy settings and back: the base wants nothing of them,
    # so flipping back puts back what was found, while the daemon runs
    tree.reset()
    tree.policy("60-bfq.policy", "[Match]\nname = loop1\n[Dynamic]\nenter = iops > 100\nenter_ticks = 1\n"
                "leave = iops < 1\nleave_ticks = 1\nmin_dwell_ticks = 0\n[Busy]\nscheduler = kyber\n"
                "[Busy kyber]\nread_lat_nsec = 1000000\n")
    # loop1's read counter grows while load is on
    with Feeder(os.path.join(tree.root, "proc", "diskstats"), "loop1", 7, 1, on=True) as load:
        d = tree.daemon()
        # a flip is a pass: the switch, then the tunable in the round after it
        busy = lambda: tree.live("loop1", "scheduler") == "kyber" and tree.live("loop1", "iosched/read_lat_nsec") == "1000000"
        deadline = time.monotonic() + 20
        while not busy() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (tree.live("loop1", "scheduler") == "kyber"
                and tree.live("loop1", "iosched/read_lat_nsec") == "1000000"), \
            f'load flips loop1 to its busy settings: {tree.snapshot("loop1")}'
        load.on = False
        deadline = time.monotonic() + 20
        while tree.snapshot("loop1") != ORIGINAL["loop1"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tree.snapshot("loop1") == ORIGINAL["loop1"], \
            f'the flip back puts back exactly what was found, nr_requests=100 too: {tree.snapshot("loop1")}'
        rc = d.stop()
        ok, now = tree.all_original()
        assert rc == 0 and ok, \
            f"... and the stop after the flip leaves every original: {now}"


def test_observe_at_start(tree):
    # mode=observe writes no policy value and puts back what an earlier run
    # in enforce mode changed: at start, and at the reload that turns it on
    tree.once_applied("observe: an enforce run changed the disks first")
    write(tree.conf, "[Daemon]\ntick_interval_ms = 50\nmode = observe\n")
    d = tree.daemon()
    ok, now = tree.all_original()
    assert ok, \
        f"observe at start: READY=1 comes with every original back: {now}"
    d.stop()


def test_observe_by_reload(tree):
    tree.reset()
    d = tree.daemon()
    assert tree.applied(), \
        f'observe by reload: enforced first: {tree.snapshot("loop0")}'
    write(tree.conf, "[Daemon]\ntick_interval_ms = 50\nmode = observe\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    while not tree.all_original()[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    ok, now = tree.all_original()
    assert ok and d.proc.poll() is None, \
        f"... the reload to mode=observe puts every original back, the daemon still running: {now}"
    d.stop()


def test_first_format_taken_over_at_start(tree):
    # A record of the first format (blkpolicyd up to f21ed78: originals
    # only, named by device) left by a daemon killed under that version: an
    # upgrade takes it over, and the stop puts the originals back.
    tree.once_applied("first format: the disks are changed as that daemon left them", tail=2000)
    shutil.rmtree(os.path.join(tree.state, "devices"))
    os.mkdir(os.path.join(tree.state, "devices"), 0o700)
    for dev, attrs in ORIGINAL.items():
        write(os.path.join(tree.state, "devices", dev),
              "# blkpolicyd originals v1\n" + "".join(f"{a}={v}\n" for a, v in sorted(attrs.items())).rstrip("\n"))
    write(os.path.join(tree.state, "devices", "loop9"), "# blkpolicyd originals v1\nscheduler=bfq")   # a disk gone
    d = tree.daemon()
    rc = d.stop()
    ok, now = tree.all_original()
    assert rc == 0 and ok, \
        f"first format taken over at start: the stop puts back every original, iosched/ after the switch back: {(now, d.text()[-3000:])}"
    assert os.listdir(os.path.join(tree.state, "devices")) == [], \
        f'... and no record of either format is left: {os.listdir(os.path.join(tree.state, "devices"))}'


def test_first_format_restore(tree):
    tree.reset()
    tree.run("--once")
    shutil.rmtree(os.path.join(tree.state, "devices"))
    os.mkdir(os.path.join(tree.state, "devices"), 0o700)
    write(os.path.join(tree.state, "devices", "loop0"), "# blkpolicyd originals v1\n" +
          "".join(f"{a}={v}\n" for a, v in sorted(ORIGINAL["loop0"].items())))
    r = tree.run("--restore")
    assert r.returncode == 0 and tree.snapshot("loop0") == ORIGINAL["loop0"], \
        f'first format: blkpolicyd --restore puts loop0 back too: {(tree.snapshot("loop0"), r.stderr[-2000:])}'


def v1_case(tree, left, text, *extra, faults=""):
    """loop0 as a first-format daemon left it, its file holding text."""
    tree.reset()
    shutil.rmtree(tree.policies)
    os.mkdir(tree.policies)
    for attr, value in left.items():
        if attr == "scheduler":
            write(tree.qfile("loop0", "scheduler"), " ".join(f"[{x}]" if x == value else x
                                                             for x in ("none", "mq-deadline", "kyber", "bfq")))
            shutil.rmtree(tree.qfile("loop0", "iosched"), ignore_errors=True)
        else:
            write(tree.qfile("loop0", attr), value)
    os.makedirs(os.path.join(tree.state, "devices"), 0o700, exist_ok=True)
    with open(os.path.join(tree.state, "devices", "loop0"), "w") as f:
        f.write("# blkpolicyd originals v1\n" + text)
    return tree.run(*extra, faults=faults) if extra else None


def test_first_format_cases(tree):
    left = {"scheduler": "none", "read_ahead_kb": "4096", "nr_requests": "256"}
    r = v1_case(tree, left, "read_ahead_kb=128 \nnr_requests=64\r\n", "--restore")
    assert (r.returncode == 0 and
            (tree.live("loop0", "read_ahead_kb"), tree.live("loop0", "nr_requests")) == ("128", "64")), \
        f"first format: blanks and CRLF as its loader took them: {r.stderr[-1500:]}"
    r = v1_case(tree, left, "iosched/fifo_batch=7\nread_ahead_kb=128\n", "--restore")
    assert r.returncode == 0 and tree.live("loop0", "read_ahead_kb") == "128", \
        f"first format: an attribute the disk does not have now does not block the rest: {r.stderr[-1500:]}"
    r = v1_case(tree, left, "scheduler=none\nread_ahead_kb=128\n", "--restore", faults="read:*/loop0/queue/scheduler:ENOENT:1")
    assert r.returncode != 0 and os.path.exists(os.path.join(tree.state, "devices", "loop0")), \
        f"first format: ENOENT from a disk being added keeps the file, and --restore says so: {r.stderr[-1500:]}"
    r = tree.run("--restore")
    assert r.returncode == 0 and tree.live("loop0", "read_ahead_kb") == "128", \
        f"... and the next --restore puts it back: {r.stderr[-1500:]}"
    v1_case(tree, left, "read_ahead_kb=128\n")
    write(os.path.join(tree.root, "proc", "stat"), f"cpu  1 2 3 4\nbtime {int(time.time()) + 3600}")
    r = tree.run("--restore")
    assert (r.returncode == 0 and tree.live("loop0", "read_ahead_kb") == "4096"
            and not os.path.exists(os.path.join(tree.state, "devices", "loop0"))), \
        f"first format from before this boot (every setting reset since): dropped, nothing written: {r.stderr[-1500:]}"
    v1_case(tree, left, "read_ahead_kb=128\nbogus_attr=1\n")
    tree.policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nread_ahead_kb = 8192\n")
    r = tree.run("--once")
    assert tree.live("loop0", "read_ahead_kb") == "4096" and os.path.exists(os.path.join(tree.state, "devices", "loop0")), \
        f'first format not taken over (a line it cannot read): nothing written to that disk, the file kept: {(tree.live("loop0", "read_ahead_kb"), r.stderr[-1500:])}'


def test_first_format_beside_an_earlier_disks_record(tree):
    # a record of today at the number that belonged to an earlier disk (its
    # queue is another): dropped, as the daemon drops it, and the file of
    # the first format taken over; it blocked the disk for good before
    tree.once_applied("first format beside a stale record: the disks changed first")
    record = os.path.join(tree.state, "devices", "7:0")
    with open(record) as f:
        text = f.read()
    write(record, re.sub(r"queue=\d+", "queue=1", text))
    for dev in DISKS:
        if dev != "loop0":
            os.unlink(os.path.join(tree.state, "devices", f"7:{dev[-1]}"))
    write(os.path.join(tree.state, "devices", "loop0"), "# blkpolicyd originals v1\n" +
          "".join(f"{a}={v}\n" for a, v in sorted(ORIGINAL["loop0"].items())))
    r = tree.run("--restore")
    assert r.returncode == 0 and tree.snapshot("loop0") == ORIGINAL["loop0"] \
        and os.listdir(os.path.join(tree.state, "devices")) == [], \
        f"the earlier disk's record dropped, the first format's originals back: " \
        f"{(tree.snapshot('loop0'), os.listdir(os.path.join(tree.state, 'devices')), r.stderr[-1500:])}"
