# SPDX-License-Identifier: LGPL-2.1-or-later
"""The applier on real loop devices (root): writes run off the event loop,
in parallel, one pass per device at a time.
  - a storm of 300 new disks, SIGTERM in the middle of it: the stop waits
    for the writes in flight, then every disk is back at exactly what it
    had (the ones already changed and the ones never reached alike), and
    no record is left;
  - a disk removed while its pass waits in the queue (one writer, the
    first disk's scheduler write held 2 s by fault injection): the queued
    pass is dropped, the daemon stays consistent, nothing is left of it;
  - the start-up pass's only disk removed while its write is held:
    READY=1 comes all the same (it waited for the next event);
  - a disk removed and added again under its name while its pass holds
    (its record save, or its scheduler write itself): nothing of the pass
    reaches the new disk, whose own originals come back at stop.

The tests run in file order; each leaves no disk of its own behind, so the
next one's first disk takes the lowest free index."""
import os

import pytest

from blkptest.daemon import control_call, wait_for
from blkptest.loop import record_path, scheduler, set_attr, sysfs

LOOP_BASE = 2800
GLOB = "loop2[89][0-9][0-9]"
HELD_SCHEDULER = "write:*/loop2[89]*/queue/scheduler:DELAY=2000:1"


@pytest.fixture(scope="module")
def policies(module_work, loops, fault_injection):
    path = os.path.join(module_work, "policies")
    os.mkdir(path)
    with open(os.path.join(path, "50-storm.policy"), "w") as f:
        f.write(f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 1024\n")
    return path


def snapshot(dev):
    return scheduler(dev), sysfs(dev, "read_ahead_kb")


@pytest.fixture(scope="module")
def default(loops):
    """What the kernel gives a new loop disk here."""
    ref = loops.add()
    value = snapshot(ref)
    loops.remove(ref)
    return value


@pytest.fixture
def start(daemons, policies):
    state = os.path.join(daemons.work, "state")

    def start(config="", faults="", ready=True):
        conf = os.path.join(daemons.work, "blkpolicyd.conf")
        with open(conf, "w") as f:
            f.write("[Daemon]\ndrift_checks_per_tick = 0\n" + config)
        return daemons.start(["--config", conf, "--policy-dir", policies, "--state-dir", state,
                              "--device", GLOB, "--socket", daemons.sock], env={"BLKPOLICYD_FAULTS": faults},
                             append_log=True, ready=ready, timeout=60)
    start.state = state
    return start


def writer_started(daemon):
    """The writer thread exists: it has taken the first pass."""
    with open(f"/proc/{daemon.proc.pid}/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1]) >= 2


def test_sigterm_in_the_middle_of_a_storm(start, loops, default):
    daemon = start()
    storm = [loops.add() for _ in range(300)]
    try:
        wait_for(lambda: sum(scheduler(d) == "mq-deadline" for d in storm) >= 30, 60, "the storm to be under way")
        rc = daemon.stop(timeout=120)
        left = [d for d in storm if snapshot(d) != default]
        records = os.listdir(os.path.join(start.state, "devices"))
        assert rc == 0 and not left and not records, \
            f"SIGTERM mid-storm: exit 0, all 300 disks back at {default}, no record left: {(rc, left[:5], records[:5])}"
    finally:
        loops.remove_many(storm)


def test_a_disk_removed_while_its_pass_is_queued(start, daemons, loops, default):
    daemon = start("apply_parallelism = 1\n", faults=HELD_SCHEDULER)
    held = loops.add()          # the first scheduler write: held 2 s in the one writer
    try:
        victim = loops.add()        # its pass waits in the queue behind it
        victim_record = record_path(start.state, victim)

        def victim_known():
            return any(d["name"] == victim for d in control_call(daemons.sock, {"command": "devices"})["result"])
        # known means decided and its pass queued (the same dispatch as its
        # add event); removed before that, it would be classified half gone
        wait_for(victim_known, 10, f"{victim} to be decided")
        loops.remove(victim)
        wait_for(lambda: scheduler(held) == "mq-deadline", 10, f"{held}'s held write to land")
        wait_for(lambda: "dropped its queued pass" in daemon.text(), 10, "the queued pass to be dropped")
        known = {d["name"] for d in control_call(daemons.sock, {"command": "devices"})["result"]}
        assert victim not in known and held in known and not os.path.exists(victim_record) \
            and daemon.proc.poll() is None, \
            "a disk removed while its pass is queued: the pass is dropped, the disk forgotten, no record: " \
            f"{(known, os.path.exists(victim_record))}"
        rc = daemon.stop()
        assert rc == 0 and snapshot(held) == default, \
            f"... and the stop puts back the other, exit 0: {(rc, snapshot(held))}"
    finally:
        # the next test's first pass must be its own disk alone
        daemon.cleanup()
        loops.remove(held)


def test_the_first_pass_only_disk_removed_while_held(start, loops):
    # the lone disk is the whole first pass
    lone = loops.add()
    daemon = start("apply_parallelism = 1\n", faults=HELD_SCHEDULER, ready=False)
    wait_for(lambda: writer_started(daemon), 10, "the writer to take the first pass")
    loops.remove(lone)
    try:
        daemon.wait_for("READY=1", timeout=10)
        ready = True
    except Exception:
        ready = False
    assert ready, \
        f"the first pass's only disk removed while its write is held: READY=1 all the same: {daemon.text()[-2000:]}"
    daemon.stop()


# What a pass holds while its disk is replaced: the fault, and what tells
# that it is held now.
HOLDS = {
    # its record save, before the first write: the writer has taken the pass
    "save": ("save:*:DELAY=2000:1", lambda daemon, twin: writer_started(daemon)),
    # the scheduler write itself, before it opens the file: the pass writes
    # below the queue directory it opened, the old disk's, which the kernel
    # fails (openat ENOENT), and takes the old disk as gone
    "write": ("write:*/{twin}/queue/scheduler:DELAY=2000:1",
              lambda daemon, twin: f"fault injection: write /sys/block/{twin}/queue/scheduler held" in daemon.text()),
}


@pytest.mark.parametrize("hold", HOLDS)
def test_a_disk_replaced_under_its_name_while_its_pass_holds(start, loops, default, hold):
    # a disk removed and added again under the same name while its pass
    # holds: the pass must not write to the new disk, whose original then
    # stays what goes back at stop
    faults, held = HOLDS[hold]
    twin = loops.add()
    daemon = start("apply_parallelism = 1\n", faults=faults.format(twin=twin), ready=False)
    again = None
    try:
        wait_for(lambda: held(daemon, twin), 10, f"{twin}'s pass to hold ({hold})")
        loops.remove(twin)
        again = loops.add()         # the first free index: the same name, another queue
        set_attr(again, "read_ahead_kb", "256")    # its admin's original, before blkpolicyd sees it
        daemon.wait_for("READY=1", timeout=30)
        wait_for(lambda: scheduler(again) == "mq-deadline", 10, f"{again} to be set as a new disk")
        rc = daemon.stop()
        assert again == twin and rc == 0 and snapshot(again) == (default[0], "256"), \
            f"a disk replaced under its name while its pass held ({hold}): nothing of the pass reaches the new " \
            f"one, which gets back exactly its own originals at stop: " \
            f"{(again, twin, rc, snapshot(again), daemon.text()[-2000:])}"
    finally:
        daemon.cleanup()
        if again:
            loops.remove(again)
