# SPDX-License-Identifier: LGPL-2.1-or-later
"""Nothing lost, on real loop devices the test creates (root): the kernel's
own elevator switch resets nr_requests and replaces iosched/, so this is
the proof behind tests/nothing-lost.py's fake kernel. Each case asserts the
exact sysfs values after the daemon is gone:

  a switch away from mq-deadline with nr_requests and fifo_batch set, and
  a switch from none with nr_requests set; SIGKILL at the scheduler write
  and at the next write, then restart + SIGTERM, and --restore; a disk
  removed and added again at the same number while the daemon is stopped
  (SIGSTOP) and after a SIGKILL, and while the disk's first save is held
  (then SIGKILL and --restore); a reload that drops a policy; the admin's
  change after blkpolicyd's, kept at stop.

Two devices for the file; each test starts from the admin's values
(setup()), and every daemon it started is killed by the fixture."""
import os
import shutil
import signal
import subprocess
import time

import pytest

from blkptest.daemon import control_call, wait_for
from blkptest.loop import record_path, scheduler, set_attr, sysfs

LOOP_BASE = 2500
GLOB = "loop25[0-9][0-9]"


@pytest.fixture(scope="module")
def ab(loops, fault_injection):
    a, b = loops.add(), loops.add()
    for d in (a, b):
        loops.attach(d)
    return a, b


def switch_target(dev):
    """The scheduler b is switched to: bfq where the kernel lists it, else
    kyber. Kernels are built without BFQ (this project's CI VM: 6.18, no
    modules); where kyber is a module not loaded yet, the write loads it."""
    with open(f"/sys/block/{dev}/queue/scheduler") as f:
        listed = f.read().replace("[", "").replace("]", "").split()
    return "bfq" if "bfq" in listed else "kyber"


class Case:
    def __init__(self, blkpolicyd, daemons, a, b):
        self.blkpolicyd = blkpolicyd
        self.daemons = daemons
        self.a, self.b = a, b
        self.other = switch_target(b)
        self.work = daemons.work
        self.state = os.path.join(self.work, "state")
        self.policies = os.path.join(self.work, "policies")

    def policy(self, name, text):
        os.makedirs(self.policies, exist_ok=True)
        with open(os.path.join(self.policies, name), "w") as f:
            f.write(text)

    def setup(self):
        """An admin's disks: a on mq-deadline with its own tunables, b on none."""
        a, b = self.a, self.b
        set_attr(a, "scheduler", "mq-deadline")
        set_attr(a, "nr_requests", "50")
        set_attr(a, "iosched/fifo_batch", "7")
        set_attr(a, "read_ahead_kb", "128")
        set_attr(b, "scheduler", "none")
        set_attr(b, "nr_requests", "100")
        set_attr(b, "read_ahead_kb", "256")
        shutil.rmtree(self.policies, ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)
        self.policy("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = none\nread_ahead_kb = 4096\n")
        self.policy("60-b.policy", f"[Match]\nname = {b}\n[Queue]\nscheduler = {self.other}\n")
        return self.snapshot()

    def snapshot(self):
        a, b = self.a, self.b
        s = {}
        for d in (a, b):
            s[d] = {"scheduler": scheduler(d), "nr_requests": sysfs(d, "nr_requests"),
                    "read_ahead_kb": sysfs(d, "read_ahead_kb")}
        s[a]["fifo_batch"] = sysfs(a, "iosched/fifo_batch") if scheduler(a) == "mq-deadline" else None
        return s

    def args(self, *extra):
        return ["--config", "/dev/null", "--policy-dir", self.policies, "--state-dir", self.state, "--device", GLOB,
                "--socket", self.daemons.sock, *extra]

    def start(self, faults=""):
        # a daemon killed by a fault point never says READY=1
        return self.daemons.start(self.args(), env={"BLKPOLICYD_FAULTS": faults}, append_log=True,
                                  ready=not faults.endswith("KILL"))

    def applied(self):
        a, b = self.a, self.b
        return scheduler(a) == "none" and sysfs(a, "read_ahead_kb") == "4096" and scheduler(b) == self.other


@pytest.fixture
def case(blkpolicyd, daemons, ab):
    return Case(blkpolicyd, daemons, *ab)


def test_switches_are_undone_at_stop(case):
    # everything the kernel resets is back at stop
    a = case.a
    original = case.setup()
    daemon = case.start()
    assert case.applied(), f"applied: {case.snapshot()}"
    assert sysfs(a, "nr_requests") != "50", f"the kernel's switch reset nr_requests: {sysfs(a, 'nr_requests')}"
    rc = daemon.stop()
    assert rc == 0 and case.snapshot() == original, \
        "SIGTERM: the scheduler, nr_requests=50 and fifo_batch=7 are back; b's nr_requests=100 too: " \
        f"{(case.snapshot(), original)}"


# SIGKILL at exact steps; restart + SIGTERM, or --restore
@pytest.mark.parametrize("how", ["restart + SIGTERM", "--restore"])
@pytest.mark.parametrize("what, attr", [("at the scheduler write", "scheduler"),
                                        ("after the switch, at the next write", "read_ahead_kb")],
                         ids=["scheduler", "read_ahead_kb"])
def test_sigkill_at_a_step(case, what, attr, how):
    original = case.setup()
    daemon = case.start(f"write:*/{case.a}/queue/{attr}:KILL")
    rc = daemon.proc.wait(timeout=30)
    if how == "--restore":
        r = subprocess.run([case.blkpolicyd, "--restore", *case.args()], capture_output=True, text=True, timeout=60)
        rc2 = r.returncode
    else:
        daemon = case.start()
        rc2 = daemon.stop()
    assert rc == -signal.SIGKILL and rc2 == 0 and case.snapshot() == original, \
        f"SIGKILL {what}; {how}: every original back: {(rc, rc2, case.snapshot(), original)}"


def test_same_number_again_while_stopped(case, loops):
    # removed and added again at the same number while the daemon is stopped
    a = case.a
    case.setup()
    daemon = case.start()
    record = record_path(case.state, a)
    daemon.signal(signal.SIGSTOP)
    try:
        loops.remove(a)
        assert loops.add() == a, "the index came back"     # fresh queue, the kernel's defaults
        loops.attach(a)
        new_defaults = {"scheduler": scheduler(a), "read_ahead_kb": sysfs(a, "read_ahead_kb")}
    finally:
        daemon.signal(signal.SIGCONT)
    wait_for(lambda: sysfs(a, "read_ahead_kb") == "4096", 5, f"the new {a} to be set")  # the new disk is managed
    rc = daemon.stop()
    assert rc == 0 and scheduler(a) == new_defaults["scheduler"] \
        and sysfs(a, "read_ahead_kb") == new_defaults["read_ahead_kb"], \
        f"at stop the new disk gets its own defaults back, not the old disk's originals: {(case.snapshot(), new_defaults)}"
    assert not os.path.exists(record), "no record left"


def test_same_number_again_after_sigkill(case, loops):
    # after a SIGKILL: the record on disk is the old queue's
    a = case.a
    case.setup()
    daemon = case.start()
    daemon.cleanup()        # SIGKILL
    loops.remove(a)
    assert loops.add() == a, "the index came back"
    loops.attach(a)
    new_defaults = {"scheduler": scheduler(a), "read_ahead_kb": sysfs(a, "read_ahead_kb")}
    daemon = case.start()
    rc = daemon.stop()
    assert rc == 0 and scheduler(a) == new_defaults["scheduler"] \
        and sysfs(a, "read_ahead_kb") == new_defaults["read_ahead_kb"] \
        and "was an earlier disk's" in daemon.text(), \
        f"after SIGKILL, a re-created disk never gets the old disk's values: {(case.snapshot(), new_defaults)}"


def test_reload_drops_a_policy_then_the_admin_changes_the_scheduler(case):
    a, b = case.a, case.b
    # a reload that drops a policy puts its settings back while running
    original = case.setup()
    daemon = case.start()
    os.unlink(os.path.join(case.policies, "60-b.policy"))
    daemon.reload()
    assert case.snapshot()[b] == original[b], f"a dropped policy's disk is put back on reload: {case.snapshot()[b]}"

    # the admin changes the scheduler after blkpolicyd: kept at stop
    set_attr(a, "scheduler", "kyber")
    rc = daemon.stop()
    assert rc == 0 and scheduler(a) == "kyber" and sysfs(a, "read_ahead_kb") == "128", \
        f"the admin's kyber stays; blkpolicyd's read_ahead_kb goes back: {case.snapshot()}"


def test_new_medium_with_a_switch_adopts_the_admins_values(case, loops):
    # a new medium (detach, the admin's settings, attach) whose pass switches
    # the scheduler: the switch is its own round, and what the admin set
    # before the attach is the new medium's original in the rounds after it
    # too, not an override that leaves the disk unmanaged
    a = case.a
    case.setup()
    daemon = case.start()
    assert case.applied(), f"applied: {case.snapshot()}"
    loops.detach(a)
    set_attr(a, "scheduler", "mq-deadline")
    set_attr(a, "read_ahead_kb", "512")
    loops.attach(a)
    wait_for(lambda: scheduler(a) == "none" and sysfs(a, "read_ahead_kb") == "4096", 10,
             "the new medium to get the policy's values")
    dev = control_call(case.daemons.sock, {"command": "device", "device": a})["result"]
    assert not dev["overridden"], f"the admin's values before the attach are no override: {dev}"
    rc = daemon.stop()
    assert rc == 0 and scheduler(a) == "mq-deadline" and sysfs(a, "read_ahead_kb") == "512", \
        f"at stop the new medium's originals are back: {(rc, scheduler(a), sysfs(a, 'read_ahead_kb'))}"


def test_record_saved_over_another_disks(case, loops):
    # #32 item 4 on the kernel: a removed and added again at its number
    # while its first pass is held inside the save of its record (a slow
    # fsync of the state dir). The old pass must not rename its record over
    # the new disk's: after a SIGKILL, --restore puts the new disk's own
    # originals back. Last in the file: a is a new, attached disk after it.
    a = case.a
    case.setup()
    number = os.path.basename(record_path(case.state, a))
    glob = number.replace(":", "?")     # ':' separates the fault's fields
    daemon = case.daemons.start(case.args(), env={"BLKPOLICYD_FAULTS": f"save:*/devices/{glob}:DELAY=4000:1"},
                                append_log=True, ready=False)
    again = None
    try:
        held = f"fault injection: save {case.state}/devices/{number} held"
        seen = wait_for(lambda: held in daemon.text(), 20, f"{a}'s first save to be held")
        loops.remove(a)
        again = loops.add()         # the first free index: the same number, a new queue
        set_attr(again, "scheduler", "mq-deadline")     # its admin's, before blkpolicyd's pass
        set_attr(again, "read_ahead_kb", "512")
        added = time.monotonic()
        # READY=1 when the applier is idle: both passes done, whichever order
        daemon.wait_for("READY=1", timeout=30)
        assert again == a and added - seen < 2, \
            f"the disk came back at its number while the old pass was held: {(again, added - seen)}"
        with open(record_path(case.state, again)) as f:
            rec = f.read()
        queue = os.stat(f"/sys/block/{again}/queue").st_ino
        assert (f" queue={queue} " in rec and "\nscheduler mq-deadline none -\n" in rec
                and "\nread_ahead_kb 512 4096 -\n" in rec), \
            f"the record at the number is the new disk's, with its originals: {rec}"
        daemon.cleanup()            # SIGKILL
        r = subprocess.run([case.blkpolicyd, "--restore", *case.args()], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and scheduler(again) == "mq-deadline" and sysfs(again, "read_ahead_kb") == "512", \
            f"SIGKILL, then --restore: the new disk's originals back: {(r.returncode, scheduler(again), r.stderr[-1500:])}"
    finally:
        daemon.cleanup()
        if again:
            loops.attach(again)     # as the module's disks are


def max_sectors_setup(case):
    """a with read_ahead_kb 64 and a policy of max_sectors_kb 256 alone:
    blkpolicyd's own write is a limits update that moves read-ahead
    (6.18, a loop device is rotational: 2 x max_sectors_kb). b untouched."""
    a = case.a
    set_attr(a, "scheduler", "none")
    set_attr(a, "read_ahead_kb", "64")
    shutil.rmtree(case.policies, ignore_errors=True)
    shutil.rmtree(case.state, ignore_errors=True)
    case.policy("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nmax_sectors_kb = 256\n")
    return sysfs(a, "max_sectors_kb"), sysfs(a, "read_ahead_kb")


def test_max_sectors_write_then_sigterm(case):
    # the found read_ahead_kb is recorded before blkpolicyd's max_sectors_kb
    # write, and put back after max_sectors_kb at stop
    a = case.a
    original = max_sectors_setup(case)
    daemon = case.start()
    assert sysfs(a, "max_sectors_kb") == "256" and sysfs(a, "read_ahead_kb") != "64", \
        f"max_sectors_kb=256 written, and the kernel moved read_ahead_kb: {sysfs(a, 'read_ahead_kb')}"
    rc = daemon.stop()
    now = sysfs(a, "max_sectors_kb"), sysfs(a, "read_ahead_kb")
    assert rc == 0 and now == original, \
        f"SIGTERM: max_sectors_kb, then read_ahead_kb=64 are back: {(rc, now, original)}"


def test_max_sectors_write_then_sigkill_and_restore(case):
    # killed after the max_sectors_kb write landed (at its third read: the
    # pass's, the read-back, the next round's), then --restore
    a = case.a
    original = max_sectors_setup(case)
    env = dict(os.environ, BLKPOLICYD_FAULTS=f"read:*/{a}/queue/max_sectors_kb:KILL:1:2")
    r = subprocess.run([case.blkpolicyd, "--once", *case.args()], capture_output=True, text=True, timeout=60, env=env)
    moved = sysfs(a, "max_sectors_kb"), sysfs(a, "read_ahead_kb")
    r2 = subprocess.run([case.blkpolicyd, "--restore", *case.args()], capture_output=True, text=True, timeout=60)
    now = sysfs(a, "max_sectors_kb"), sysfs(a, "read_ahead_kb")
    assert r.returncode == -signal.SIGKILL and moved[0] == "256" and moved[1] != "64", \
        f"killed after max_sectors_kb=256 landed and moved read_ahead_kb: {(r.returncode, moved, r.stderr[-800:])}"
    assert r2.returncode == 0 and now == original, \
        f"--restore: max_sectors_kb, then read_ahead_kb=64 are back: {(r2.returncode, now, original, r2.stderr[-800:])}"
