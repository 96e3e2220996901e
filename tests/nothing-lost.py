#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Nothing lost, on the fake kernel (no root): a copy of a fixture tree whose
writes behave as the block layer's (BLKPOLICYD_FAKE_KERNEL, test builds).
Every situation of the "nothing lost" issue that needs no uevent, each
asserting the exact values the disks hold after the daemon is gone:

  a scheduler switch with tunables; SIGKILL at every step of apply (fault
  points, not timing) then --restore, and then restart + SIGTERM; a reload
  that removes a policy, drops a setting, excludes the disk, empties the
  policy dir; drift then stop; a restore that fails keeps its record; an
  unreadable record writes nothing; a hostile state dir; --once undone by
  --restore; a record left by an earlier disk at the same number; a
  [Dynamic] flip to busy settings and back, on load faked in diskstats; a
  record of the first format (an upgrade after a crash) taken over.

tests/integration/test_nothing_lost.py runs the same on real loop devices."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

blkpolicyd, fixture = sys.argv[1:3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blkptest import faketree  # noqa: E402
from blkptest.faketree import DISKS  # noqa: E402
from blkptest.diskstats import Feeder  # noqa: E402
from loopdev import Daemon, Results, require_fault_injection  # noqa: E402

require_fault_injection(blkpolicyd)

res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-nothing-lost-")
root = os.path.join(work, "root")
state = os.path.join(work, "state")
policies = os.path.join(work, "policies")
conf = os.path.join(work, "blkpolicyd.conf")
RUNNING = []        # every daemon started, killed at the end whatever happened

# The original state every case starts from: what an admin had set.
ORIGINAL = {
    "loop0": {"scheduler": "mq-deadline", "nr_requests": "50", "read_ahead_kb": "128",
              "iosched/fifo_batch": "7", "iosched/read_expire": "400"},
    "loop1": {"scheduler": "none", "nr_requests": "100", "read_ahead_kb": "256"},
}


def qfile(dev, attr):
    return faketree.qfile(root, dev, attr)


def make_tree():
    faketree.make(fixture, root)
    set_original()


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(value + "\n")


def set_original():
    for dev, attrs in ORIGINAL.items():
        shutil.rmtree(qfile(dev, "iosched"), ignore_errors=True)
        write(qfile(dev, "scheduler"), " ".join(f"[{s}]" if s == attrs["scheduler"] else s
                                                for s in ("none", "mq-deadline", "kyber", "bfq")))
        for attr, value in attrs.items():
            if attr != "scheduler":
                write(qfile(dev, attr), value)


def live(dev, attr):
    return faketree.live(root, dev, attr)


def snapshot(dev):
    return {attr: live(dev, attr) for attr in ORIGINAL[dev]}


def all_original():
    """(ok, detail): every disk holds exactly its original values."""
    now = {dev: snapshot(dev) for dev in DISKS}
    return now == ORIGINAL, now


def policy(name, text):
    os.makedirs(policies, exist_ok=True)
    write(os.path.join(policies, name), text)


def reset(config=""):
    make_tree()
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(policies, ignore_errors=True)
    os.mkdir(state, 0o700)
    write(conf, "[Daemon]\ntick_interval_ms = 50\n" + config)
    # loop0: a switch away from mq-deadline, with its own queue settings
    policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nscheduler = none\nread_ahead_kb = 4096\n")
    # loop1: a switch to bfq and one of bfq's tunables
    policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\n[bfq]\nlow_latency = 0\n")


def args(*extra):
    return [blkpolicyd, "--config", conf, "--policy-dir", policies, *faketree.roots(root),
            "--state-dir", state, "--socket", os.path.join(work, "control.sock"), "--device", "loop*", *extra]


def run(*extra, faults=""):
    env = dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1", BLKPOLICYD_FAULTS=faults)
    return subprocess.run(args(*extra), capture_output=True, text=True, env=env, timeout=60)


def daemon(*extra, faults=""):
    d = Daemon(blkpolicyd, work, args(*extra)[1:],
               env={"BLKPOLICYD_FAKE_KERNEL": "1", "BLKPOLICYD_FAULTS": faults})
    RUNNING.append(d)
    d.wait_for("READY=1", timeout=30)
    return d


def applied():
    return (live("loop0", "scheduler") == "none" and live("loop0", "read_ahead_kb") == "4096"
            and live("loop1", "scheduler") == "bfq" and live("loop1", "iosched/low_latency") == "0")


try:
    # 1. The switch resets nr_requests and replaces iosched/: all read before.
    reset()
    r = run("--once")
    res.check("--once applies on the fake kernel", r.returncode == 0 and applied(), r.stderr[-1500:])
    res.check("the switch reset what followed the old scheduler",
              live("loop0", "nr_requests") == "128" and live("loop0", "iosched/fifo_batch") is None,
              snapshot("loop0"))
    with open(os.path.join(state, "devices", "7:0")) as f:
        rec = f.read()
    res.check("the record holds what the switch reset, as found before it",
              "\nscheduler mq-deadline none -\n" in rec and "\nnr_requests 50 * -\n" in rec
              and "\niosched/fifo_batch 7 * -\n" in rec and "\niosched/read_expire 400 * -\n" in rec, rec)
    r = run("--restore")
    ok, now = all_original()
    res.check("--restore puts back the scheduler, then nr_requests and the old scheduler's tunables", ok and
              r.returncode == 0, (now, r.stderr[-800:]))
    res.check("--restore leaves no record", os.listdir(os.path.join(state, "devices")) == [])

    # the same through the daemon: start, SIGTERM
    reset()
    d = daemon()
    res.check("the daemon applies", applied(), d.text()[-1500:])
    rc = d.stop()
    ok, now = all_original()
    res.check("SIGTERM puts back exactly what was found, exit 0", ok and rc == 0, (now, rc))

    # 2. SIGKILL at every step of apply, then --restore; then restart + SIGTERM
    points = [
        ("before the first record is saved", "save:*/7?0:KILL"),
        ("record saved, scheduler not written", "write:*/loop0/queue/scheduler:KILL"),
        ("scheduler written, before it is read back", "read:*/loop0/queue/scheduler:KILL:1:2"),
        ("switched, before the second record", "save:*/7?0:KILL:1:1"),
        ("second record saved, read_ahead_kb not written", "write:*/loop0/queue/read_ahead_kb:KILL"),
        ("loop0 done, loop1's record saved, its scheduler not written", "write:*/loop1/queue/scheduler:KILL"),
        ("loop1: bfq written, its tunable not yet", "write:*/loop1/queue/iosched/low_latency:KILL"),
    ]
    for what, fault in points:
        for how in ("--restore", "restart + SIGTERM"):
            # one pass at a time: a kill point names a step of one disk's pass,
            # and the fake kernel's switch (three file operations) is not
            # atomic under SIGKILL as the kernel's one write() is
            reset("apply_parallelism = 1\n")
            r = run("--once", faults=fault)
            killed = r.returncode == -signal.SIGKILL
            if how == "--restore":
                r2 = run("--restore")
                rc = r2.returncode
            else:
                d = daemon()
                rc = d.stop()
            ok, now = all_original()
            res.check(f"SIGKILL {what}; {how}: every original back", killed and ok and rc == 0,
                      (r.returncode, rc, now))

    # 3. reloads that no longer want what was set: put back while running
    reset()
    policy("70-ra.policy", "[Match]\nname = loop1\n[Queue]\nread_ahead_kb = 8192\n")
    d = daemon()
    res.check("reload setup applied", applied() and live("loop1", "read_ahead_kb") == "8192")
    os.unlink(os.path.join(policies, "70-ra.policy"))
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    res.check("a removed policy's setting is put back on reload", live("loop1", "read_ahead_kb") == "256"
              and live("loop1", "scheduler") == "bfq", snapshot("loop1"))
    policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    res.check("a setting a policy dropped is put back (bfq's low_latency back to its default)",
              live("loop1", "scheduler") == "bfq" and live("loop1", "iosched/low_latency") == "1",
              snapshot("loop1"))
    with open(conf, "a") as f:
        f.write("exclude = loop0\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    res.check("a disk the config excludes now gets its originals back", snapshot("loop0") == ORIGINAL["loop0"],
              snapshot("loop0"))
    shutil.rmtree(policies)
    os.mkdir(policies)
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    ok, now = all_original()
    res.check("an emptied policy dir puts everything back", ok, now)
    rc = d.stop()
    res.check("... and the stop after it has nothing left to do", rc == 0 and all_original()[0]
              and os.listdir(os.path.join(state, "devices")) == [], (rc, os.listdir(os.path.join(state, "devices"))))

    # 4. drift, then stop: the admin's change stays, blkpolicyd's own goes back
    reset("drift_checks_per_tick = 8\n")
    d = daemon()
    write(qfile("loop0", "scheduler"), "none mq-deadline [kyber] bfq")     # the admin, behind its back
    deadline = time.monotonic() + 10
    while "leaving it alone" not in d.text() and time.monotonic() < deadline:
        time.sleep(0.02)
    res.check("the admin's change is noticed", "leaving it alone" in d.text(), d.text()[-1000:])
    rc = d.stop()
    res.check("at stop the admin's scheduler stays, and blkpolicyd's read_ahead_kb goes back",
              rc == 0 and live("loop0", "scheduler") == "kyber" and live("loop0", "read_ahead_kb") == "128"
              and snapshot("loop1") == ORIGINAL["loop1"], (rc, snapshot("loop0"), snapshot("loop1")))

    # 5. a restore that fails keeps its record; --restore later finishes it
    reset()
    d = daemon(faults="write:*/loop0/queue/scheduler:EIO:1:1")
    rc = d.stop()
    res.check("a failed restore: exit non-zero, the record kept",
              rc != 0 and live("loop0", "scheduler") == "none"
              and os.path.exists(os.path.join(state, "devices", "7:0")), (rc, snapshot("loop0")))
    r = run("--restore")
    ok, now = all_original()
    res.check("... and --restore finishes it", r.returncode == 0 and ok, (now, r.stderr[-800:]))

    # 6. an unreadable record: the disk is not written at all
    reset()
    run("--once")
    write(qfile("loop0", "read_ahead_kb"), "128")      # as if the admin undid part of it
    r = run("--once", faults="load:*/7?0:EIO")
    res.check("an unreadable record: nothing written to that disk, the other still managed",
              live("loop0", "read_ahead_kb") == "128" and "cannot read its state record" in r.stderr
              and live("loop1", "scheduler") == "bfq", (snapshot("loop0"), r.stderr[-600:]))
    r = run("--restore")
    res.check("... and its record still restores", r.returncode == 0 and all_original()[0], all_original()[1])

    # 7. a hostile state dir: refused, nothing written
    reset()
    os.chmod(state, 0o777)
    r = run("--once")
    ok, now = all_original()
    res.check("a world-writable state dir is refused and nothing is written",
              r.returncode != 0 and "writable by nobody else" in r.stderr and ok, (r.stderr[-400:], now))
    os.chmod(state, 0o700)
    os.makedirs(os.path.join(state, "devices"), mode=0o700)
    write(os.path.join(work, "victim"), "precious")
    os.symlink(os.path.join(work, "victim"), os.path.join(state, "devices", ".7:0.tmp"))
    r = run("--once")
    with open(os.path.join(work, "victim")) as f:
        res.check("a planted temporary symlink is not followed", f.read() == "precious\n" and r.returncode == 0)

    # 8. a record an earlier disk left at the same number is not applied
    reset()
    run("--once")
    queue = qfile("loop0", "").rstrip("/")
    os.rename(queue, queue + ".old")                    # the disk goes ...
    shutil.copytree(queue + ".old", queue)              # ... a new one comes: a new queue
    shutil.rmtree(queue + ".old")
    write(qfile("loop0", "scheduler"), "none [mq-deadline] kyber bfq")
    write(qfile("loop0", "read_ahead_kb"), "512")
    r = run("--once", "--dry-run")
    res.check("the old disk's record is recognised as another queue's",
              "was an earlier disk's" in r.stderr, r.stderr[-800:])
    r = run("--restore")
    res.check("--restore writes nothing of the old disk's onto the new one",
              live("loop0", "scheduler") == "mq-deadline" and live("loop0", "read_ahead_kb") == "512"
              and live("loop0", "nr_requests") == "128", snapshot("loop0"))

    # 10. a crash in the middle of a stop's restore: still blkpolicyd's value
    reset()
    d = daemon(faults="write:*/loop0/queue/read_ahead_kb:KILL:1:1")    # the first write applies, the restore dies
    d.proc.send_signal(signal.SIGTERM)
    rc = d.proc.wait(timeout=30)
    r = run("--restore")
    ok, now = all_original()
    res.check("SIGKILL in the middle of a stop's restore; --restore: every original back",
              rc == -signal.SIGKILL and r.returncode == 0 and ok, (rc, now, r.stderr[-600:]))

    # 11. a switch that fails: what it would have reset stays the admin's
    reset()
    d = daemon(faults="write:*/loop0/queue/scheduler:EIO:1")
    write(qfile("loop0", "nr_requests"), "64")                  # the admin tunes after the failed switch
    write(qfile("loop0", "iosched/fifo_batch"), "32")
    rc = d.stop()
    res.check("a failed switch, then the admin's tuning: kept at stop, blkpolicyd's read_ahead_kb back",
              live("loop0", "scheduler") == "mq-deadline" and live("loop0", "nr_requests") == "64"
              and live("loop0", "iosched/fifo_batch") == "32" and live("loop0", "read_ahead_kb") == "128",
              (rc, snapshot("loop0")))

    # 12. a reload wants the found scheduler back: what its switch reset comes back at once
    reset()
    d = daemon()
    policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 4096\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    res.check("a reload back to the found scheduler puts back nr_requests and the old tunables while running",
              snapshot("loop0") == dict(ORIGINAL["loop0"], read_ahead_kb="4096"), snapshot("loop0"))
    rc = d.stop()
    res.check("... and the stop after it leaves every original", rc == 0 and all_original()[0], all_original()[1])

    # 13. the admin puts the found value back by hand: theirs, not overwritten on reload
    reset("drift_checks_per_tick = 0\n")
    d = daemon()
    write(qfile("loop0", "scheduler"), "none [mq-deadline] kyber bfq")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    res.check("the found scheduler put back by hand is the admin's: a reload does not switch it again",
              live("loop0", "scheduler") == "mq-deadline", snapshot("loop0"))
    d.stop()

    # 14. a policy drops nr_requests while its switch stays: back now, and after the switch back
    reset()
    policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\nnr_requests = 64\n")
    d = daemon()
    policy("60-bfq.policy", "[Match]\nname = loop1\n[Queue]\nscheduler = bfq\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    res.check("nr_requests dropped under a switch that stays: back to 100 now",
              live("loop1", "scheduler") == "bfq" and live("loop1", "nr_requests") == "100", snapshot("loop1"))
    rc = d.stop()
    res.check("... and after the switch back at stop", rc == 0 and snapshot("loop1") == ORIGINAL["loop1"],
              snapshot("loop1"))

    # 15. one writer of records: --restore while a daemon runs is refused
    reset()
    d = daemon()
    r = run("--restore")
    res.check("--restore while a daemon runs is refused, and changes nothing",
              r.returncode != 0 and "Another blkpolicyd" in r.stderr and applied(), r.stderr[-400:])
    d.stop()

    # 16. an overridden device whose policy goes: blkpolicyd's values back, the admin's kept
    reset("drift_checks_per_tick = 8\n")
    d = daemon()
    write(qfile("loop0", "scheduler"), "none mq-deadline [kyber] bfq")      # the admin
    deadline = time.monotonic() + 10
    while "leaving it alone" not in d.text() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.unlink(os.path.join(policies, "50-switch.policy"))
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")
    res.check("an overridden disk whose policy is removed: blkpolicyd's read_ahead_kb back, the admin's kyber kept",
              live("loop0", "read_ahead_kb") == "128" and live("loop0", "scheduler") == "kyber", snapshot("loop0"))
    d.stop()

    # 17. nr_requests written under mq-deadline resets its async_depth (6.18): it comes back too
    reset()
    write(qfile("loop0", "iosched/async_depth"), "20")
    policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nnr_requests = 64\n")
    d = daemon()
    res.check("nr_requests=64 on mq-deadline: the kernel reset async_depth (the fake kernel models 6.18)",
              live("loop0", "nr_requests") == "64" and live("loop0", "iosched/async_depth") == "48",
              snapshot("loop0"))
    rc = d.stop()
    res.check("... at stop nr_requests=50, then async_depth=20 are back",
              rc == 0 and live("loop0", "nr_requests") == "50" and live("loop0", "iosched/async_depth") == "20",
              (rc, live("loop0", "nr_requests"), live("loop0", "iosched/async_depth")))

    # 9. a flip to busy settings and back: the base wants nothing of them,
    # so flipping back puts back what was found, while the daemon runs
    reset()
    policy("60-bfq.policy", "[Match]\nname = loop1\n[Dynamic]\nenter = iops > 100\nenter_ticks = 1\n"
           "leave = iops < 1\nleave_ticks = 1\nmin_dwell_ticks = 0\n[Busy]\nscheduler = kyber\n"
           "[Busy kyber]\nread_lat_nsec = 1000000\n")
    # loop1's read counter grows while load is on
    with Feeder(os.path.join(root, "proc", "diskstats"), "loop1", 7, 1, on=True) as load:
        d = daemon()
        # a flip is a pass: the switch, then the tunable in the round after it
        busy = lambda: live("loop1", "scheduler") == "kyber" and live("loop1", "iosched/read_lat_nsec") == "1000000"
        deadline = time.monotonic() + 20
        while not busy() and time.monotonic() < deadline:
            time.sleep(0.01)
        res.check("load flips loop1 to its busy settings", live("loop1", "scheduler") == "kyber"
                  and live("loop1", "iosched/read_lat_nsec") == "1000000", snapshot("loop1"))
        load.on = False
        deadline = time.monotonic() + 20
        while snapshot("loop1") != ORIGINAL["loop1"] and time.monotonic() < deadline:
            time.sleep(0.01)
        res.check("the flip back puts back exactly what was found, nr_requests=100 too",
                  snapshot("loop1") == ORIGINAL["loop1"], snapshot("loop1"))
        rc = d.stop()
        ok, now = all_original()
        res.check("... and the stop after the flip leaves every original", rc == 0 and ok, now)

    # mode=observe writes no policy value and puts back what an earlier run
    # in enforce mode changed: at start, and at the reload that turns it on
    reset()
    r = run("--once")
    res.check("observe: an enforce run changed the disks first", r.returncode == 0 and applied(), r.stderr[-1500:])
    write(conf, "[Daemon]\ntick_interval_ms = 50\nmode = observe\n")
    d = daemon()
    ok, now = all_original()
    res.check("observe at start: READY=1 comes with every original back", ok, now)
    d.stop()
    reset()
    d = daemon()
    res.check("observe by reload: enforced first", applied(), snapshot("loop0"))
    write(conf, "[Daemon]\ntick_interval_ms = 50\nmode = observe\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    while not all_original()[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    ok, now = all_original()
    res.check("... the reload to mode=observe puts every original back, the daemon still running",
              ok and d.proc.poll() is None, now)
    d.stop()

    # A record of the first format (blkpolicyd up to f21ed78: originals
    # only, named by device) left by a daemon killed under that version: an
    # upgrade takes it over, and the stop puts the originals back.
    reset()
    r = run("--once")
    res.check("first format: the disks are changed as that daemon left them", r.returncode == 0 and applied(),
              r.stderr[-2000:])
    shutil.rmtree(os.path.join(state, "devices"))
    os.mkdir(os.path.join(state, "devices"), 0o700)
    for dev, attrs in ORIGINAL.items():
        write(os.path.join(state, "devices", dev),
              "# blkpolicyd originals v1\n" + "".join(f"{a}={v}\n" for a, v in sorted(attrs.items())).rstrip("\n"))
    write(os.path.join(state, "devices", "loop9"), "# blkpolicyd originals v1\nscheduler=bfq")   # a disk gone
    d = daemon()
    rc = d.stop()
    ok, now = all_original()
    res.check("first format taken over at start: the stop puts back every original, iosched/ after the "
              "switch back", rc == 0 and ok, (now, d.text()[-3000:]))
    res.check("... and no record of either format is left", os.listdir(os.path.join(state, "devices")) == [],
              os.listdir(os.path.join(state, "devices")))
    reset()
    run("--once")
    shutil.rmtree(os.path.join(state, "devices"))
    os.mkdir(os.path.join(state, "devices"), 0o700)
    write(os.path.join(state, "devices", "loop0"), "# blkpolicyd originals v1\n" +
          "".join(f"{a}={v}\n" for a, v in sorted(ORIGINAL["loop0"].items())))
    r = run("--restore")
    res.check("first format: blkpolicyd --restore puts loop0 back too",
              r.returncode == 0 and snapshot("loop0") == ORIGINAL["loop0"], (snapshot("loop0"), r.stderr[-2000:]))

    def v1_case(left, text, *extra, faults=""):
        """loop0 as a first-format daemon left it, its file holding text."""
        reset()
        shutil.rmtree(policies)
        os.mkdir(policies)
        for attr, value in left.items():
            if attr == "scheduler":
                write(qfile("loop0", "scheduler"), " ".join(f"[{x}]" if x == value else x
                                                            for x in ("none", "mq-deadline", "kyber", "bfq")))
                shutil.rmtree(qfile("loop0", "iosched"), ignore_errors=True)
            else:
                write(qfile("loop0", attr), value)
        os.makedirs(os.path.join(state, "devices"), 0o700, exist_ok=True)
        with open(os.path.join(state, "devices", "loop0"), "w") as f:
            f.write("# blkpolicyd originals v1\n" + text)
        return run(*extra, faults=faults) if extra else None

    left = {"scheduler": "none", "read_ahead_kb": "4096", "nr_requests": "256"}
    r = v1_case(left, "read_ahead_kb=128 \nnr_requests=64\r\n", "--restore")
    res.check("first format: blanks and CRLF as its loader took them", r.returncode == 0 and
              (live("loop0", "read_ahead_kb"), live("loop0", "nr_requests")) == ("128", "64"), r.stderr[-1500:])
    r = v1_case(left, "iosched/fifo_batch=7\nread_ahead_kb=128\n", "--restore")
    res.check("first format: an attribute the disk does not have now does not block the rest",
              r.returncode == 0 and live("loop0", "read_ahead_kb") == "128", r.stderr[-1500:])
    r = v1_case(left, "scheduler=none\nread_ahead_kb=128\n", "--restore", faults="read:*/loop0/queue/scheduler:ENOENT:1")
    res.check("first format: ENOENT from a disk being added keeps the file, and --restore says so",
              r.returncode != 0 and os.path.exists(os.path.join(state, "devices", "loop0")), r.stderr[-1500:])
    r = run("--restore")
    res.check("... and the next --restore puts it back", r.returncode == 0 and live("loop0", "read_ahead_kb") == "128",
              r.stderr[-1500:])
    v1_case(left, "read_ahead_kb=128\n")
    write(os.path.join(root, "proc", "stat"), f"cpu  1 2 3 4\nbtime {int(time.time()) + 3600}")
    r = run("--restore")
    res.check("first format from before this boot (every setting reset since): dropped, nothing written",
              r.returncode == 0 and live("loop0", "read_ahead_kb") == "4096"
              and not os.path.exists(os.path.join(state, "devices", "loop0")), r.stderr[-1500:])
    v1_case(left, "read_ahead_kb=128\nbogus_attr=1\n")
    policy("50-switch.policy", "[Match]\nname = loop0\n[Queue]\nread_ahead_kb = 8192\n")
    r = run("--once")
    res.check("first format not taken over (a line it cannot read): nothing written to that disk, the file kept",
              live("loop0", "read_ahead_kb") == "4096" and os.path.exists(os.path.join(state, "devices", "loop0")),
              (live("loop0", "read_ahead_kb"), r.stderr[-1500:]))
finally:
    for d in RUNNING:
        d.cleanup()
    shutil.rmtree(work, ignore_errors=True)
res.finish()
