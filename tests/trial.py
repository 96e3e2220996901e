# SPDX-License-Identifier: LGPL-2.1-or-later
"""A trial in the daemon on the fake kernel (no root, issue #28): a
policy's [Trial] tries mq-deadline against its own none on a disk whose
fake /proc/diskstats a thread drives so that its service time depends on
the scheduler the daemon set in the fake sysfs (blkptest.diskstats.
ServiceFeeder). The kernel had bfq before blkpolicyd: that is the found
value every put-back must bring back.

Nothing sleeps for synchronisation: the tests wait on the device's trial
state (device JSON), on status' tick count and on the fake sysfs."""
import os
import shutil
import signal
import subprocess

import pytest

from blkptest import faketree
from blkptest.daemon import Daemon, control_call, ctl, wait_for
from blkptest.diskstats import ServiceFeeder
from blkptest.faketree import write

TRIAL = "[Trial]\ncandidates = mq-deadline\nwindow = 0.5\nsettle = 0.1\nmax_duration = 300\n"
POLICY = "[Match]\nname = loop*\n[Queue]\nscheduler = none\n" + TRIAL
FOUND = "bfq"


class Host(faketree.Workspace):
    """Two loop disks on the fake kernel under POLICY (loop0 loaded, loop1
    idle), the kernel's scheduler bfq on both."""

    def __init__(self, blkpolicyd, fixture, work):
        super().__init__(blkpolicyd, fixture, work)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        faketree.make(fixture, self.root, 2)
        for dev in faketree.disks(2):
            shutil.rmtree(self.qfile(dev, "iosched"), ignore_errors=True)
            write(self.qfile(dev, "scheduler"), "none mq-deadline kyber [bfq]")
        os.mkdir(self.state, 0o700)
        os.mkdir(self.policies)
        self.set_policy(POLICY)
        self.diskstats = os.path.join(self.root, "proc", "diskstats")
        with open(self.diskstats, "a") as f:       # loop1: listed, idle
            f.write("   7       1 loop1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")

    def set_policy(self, text):
        write(os.path.join(self.policies, "50-loop.policy"), text)

    def args(self, conf, *extra):
        write(self.conf, "[Daemon]\n" + conf)
        return self.daemon_args(self.conf, *extra)

    def start(self, conf="tick_interval_ms = 50\n", append_log=False, extra=()):
        d = Daemon(self.blkpolicyd, self.work, self.args(conf, *extra), env={"BLKPOLICYD_FAKE_KERNEL": "1"},
                   append_log=append_log)
        self.running.append(d)
        d.wait_for("READY=1", timeout=60)
        return d

    def feeder(self, service):
        return ServiceFeeder(self.diskstats, lambda dev: self.live(dev, "scheduler"), {"loop0": (7, 0)}, service)

    def call(self, command, **kw):
        reply = control_call(self.sock_path, dict(command=command, **kw))
        assert reply["ok"], reply
        return reply["result"]

    def trial(self, dev="loop0"):
        return self.call("device", device=dev)["trial"]

    def wait_trial(self, pred, what, dev="loop0", timeout=90):
        seen = []

        def check():
            t = self.trial(dev)
            seen.append(t)
            return pred(t)
        try:
            wait_for(check, timeout, what)
        except AssertionError:
            raise AssertionError(f"{what}: last trial state {seen[-1] if seen else None}")
        return seen[-1]

    def ticks_after(self, count):
        t0 = self.call("status")["tick"]["count"]
        wait_for(lambda: self.call("status")["tick"]["count"] >= t0 + count, 60, f"{count} ticks")
        return self.call("status")


@pytest.fixture
def host(blkpolicyd, blkpolicyctl, kvm_fixture, work, fault_injection):
    h = Host(blkpolicyd, kvm_fixture, work)
    h.ctl = blkpolicyctl
    yield h
    h.cleanup()


def done(t):
    return t is not None and t["phase"] == "done"


def test_ends_on_the_faster_scheduler(host):
    with host.feeder({"none": 6, "mq-deadline": 3, FOUND: 6}) as load:
        host.start()
        assert host.call("status")["trials"] == 2, "both disks' trials run or wait"
        t = host.wait_trial(done, "the trial's verdict")
        assert load.steps.get("mq-deadline", 0) > 0 and load.steps.get("none", 0) > 0, load.steps
    o = t["outcomes"][0]
    assert (o["candidate"], o["incumbent"], o["verdict"], o["kept"]) == \
        ("mq-deadline", "none", "candidate-wins", "mq-deadline"), t
    assert o["pairs"] >= 4 and 1.9 < o["estimate"] < 2.1 and o["interval"][0] > 1.05, o
    assert t["kept"] == t["in_force"] == "mq-deadline" and t["started_by"] == "policy", t
    wait_for(lambda: host.live("loop0", "scheduler") == "mq-deadline", 30, "the winner written")
    # the winner's pass back: the setting names the trial as its source
    wait_for(lambda: host.call("device", device="loop0")["settings"]["scheduler"]["source"] == "trial", 30,
             "the winner's pass back")
    dev = host.call("device", device="loop0")
    # the idle disk never decides: no window of it counts
    t1 = host.trial("loop1")
    assert t1["phase"] == "running" and t1["outcomes"][0]["pairs"] == 0 and t1["outcomes"][0]["windows"] > 0, t1
    # a fleet's tabulation: the verdicts by model, the trials that run (loop1's)
    model = dev["facts"].get("model") or ""       # a loop disk has none
    text = host.call("metrics")["text"]
    assert f'blkpolicyd_trial_verdicts{{model="{model}",candidate="mq-deadline",incumbent="none",' \
           f'verdict="candidate-wins"}} 1\n' in text and "blkpolicyd_trials 1\n" in text, text
    out = ctl(host.ctl, host.sock_path, "explain", "loop0")
    assert "trial (policy): done" in out.stdout and "mq-deadline against none: candidate-wins" in out.stdout, \
        out.stdout + out.stderr


def test_equal_speeds_keep_the_incumbent_without_flapping(host):
    with host.feeder({"none": 5, "mq-deadline": 5, FOUND: 5}):
        host.start()
        t = host.wait_trial(done, "the trial's verdict")
        o = t["outcomes"][0]
        assert (o["verdict"], o["kept"]) == ("equal", "none"), t
        assert t["kept"] is None and t["in_force"] is None, t
        wait_for(lambda: host.live("loop0", "scheduler") == "none", 30, "the incumbent written")
        # the last switch's pass back (its write counted), then nothing more
        wait_for(lambda: host.call("device", device="loop0")["settings"]["scheduler"]["source"] == "50-loop.policy",
                 30, "the last switch's pass back")
        writes = host.ticks_after(5)["writes"]["scheduler"]
        seen = set()
        t0 = host.call("status")["tick"]["count"]

        def thirty_ticks():
            seen.add(host.live("loop0", "scheduler"))
            return host.call("status")["tick"]["count"] >= t0 + 30
        wait_for(thirty_ticks, 60, "30 ticks")
        st = host.call("status")
        assert st["writes"]["scheduler"] == writes and seen == {"none"}, \
            f"done is done: no switch after the verdict ({writes} -> {st['writes']}, {seen})"
        assert host.trial()["outcomes"] == t["outcomes"]


def test_a_regression_ends_it_at_once(host):
    with host.feeder({"none": 3, "mq-deadline": 9, FOUND: 3}):
        host.start()
        t = host.wait_trial(done, "the trial's end")
    o = t["outcomes"][0]
    assert (o["verdict"], o["kept"]) == ("aborted", "none"), t
    assert o["pairs"] <= 1 and "beyond the bound of 1.50x" in o["reason"], o
    wait_for(lambda: host.live("loop0", "scheduler") == "none", 30, "the incumbent back")


def candidate_in_force(t):
    return t is not None and t["phase"] == "running" and t["arm"] == "candidate"


def kill_with_the_candidate_in_force(host, d):
    host.wait_trial(candidate_in_force, "the candidate in force")
    wait_for(lambda: host.live("loop0", "scheduler") == "mq-deadline", 30, "the candidate written")
    d.signal(signal.SIGKILL)
    d.proc.wait(timeout=10)


def test_sigkill_mid_trial_loses_nothing(host):
    with host.feeder({"none": 5, "mq-deadline": 5, FOUND: 5}):
        d = host.start()
        kill_with_the_candidate_in_force(host, d)
    r = subprocess.run([host.blkpolicyd, *host.args("", "--restore")], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.live("loop0", "scheduler") == FOUND, "--restore puts back what the kernel had, not the incumbent"
    assert host.live("loop1", "scheduler") == FOUND


def test_restart_in_observe_after_sigkill_puts_back(host):
    with host.feeder({"none": 5, "mq-deadline": 5, FOUND: 5}):
        d = host.start()
        kill_with_the_candidate_in_force(host, d)
        host.start("tick_interval_ms = 50\nmode = observe\n", append_log=True)
        wait_for(lambda: host.live("loop0", "scheduler") == FOUND, 30, "the found value back")
        host.ticks_after(20)
        assert host.trial() is None, "observe mode runs no trial"
        assert host.live("loop0", "scheduler") == FOUND


def test_sigterm_mid_trial_puts_back_the_found_value(host):
    with host.feeder({"none": 5, "mq-deadline": 5, FOUND: 5}):
        d = host.start()
        host.wait_trial(candidate_in_force, "the candidate in force")
        wait_for(lambda: host.live("loop0", "scheduler") == "mq-deadline", 30, "the candidate written")
        assert d.stop() == 0
    assert host.live("loop0", "scheduler") == FOUND and host.live("loop1", "scheduler") == FOUND


def test_observe_mode_and_once_run_no_trial(host):
    with host.feeder({"none": 6, "mq-deadline": 3, FOUND: 6}) as load:
        d = host.start("tick_interval_ms = 50\nmode = observe\n")
        st = host.ticks_after(60)       # 3 s: time for a whole trial's first look
        assert st["trials"] == 0 and host.trial() is None and host.trial("loop1") is None, st
        assert host.live("loop0", "scheduler") == FOUND and "mq-deadline" not in load.steps
        r = control_call(host.sock_path, dict(command="trial", device="loop0", candidates=["mq-deadline"]))
        assert not r["ok"] and r["error"]["code"] == "trial-refused" and "observe" in r["error"]["message"], r
        d.stop()
        r = subprocess.run([host.blkpolicyd, *host.args("", "--once")], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1"))
        assert r.returncode == 0, r.stderr
        assert host.live("loop0", "scheduler") == "none", "--once applies the policy's own choice"
        assert "mq-deadline" not in load.steps and "trial" not in r.stderr, r.stderr


def test_pause_stops_it_and_resume_writes_the_incumbent(host):
    with host.feeder({"none": 5, "mq-deadline": 5, FOUND: 5}):
        host.start()
        host.wait_trial(candidate_in_force, "the candidate in force")
        host.call("pause", device="loop0")
        t = host.wait_trial(lambda t: t["phase"] == "stopped", "the trial stopped by the pause")
        assert t["outcomes"][0]["verdict"] == "stopped" and "paused" in t["outcomes"][0]["reason"], t
        host.call("resume", device="loop0")
        wait_for(lambda: host.live("loop0", "scheduler") == "none", 30, "the incumbent back")
        host.ticks_after(20)
        assert host.trial()["phase"] == "stopped" and host.live("loop0", "scheduler") == "none"


def test_reload_that_removes_it_puts_the_winner_back(host):
    with host.feeder({"none": 6, "mq-deadline": 3, FOUND: 6}):
        d = host.start()
        host.wait_trial(done, "the trial's verdict")
        wait_for(lambda: host.live("loop0", "scheduler") == "mq-deadline", 30, "the winner written")
        d.reload()      # the same [Trial]: what it kept stays
        host.ticks_after(5)
        assert host.trial()["kept"] == "mq-deadline" and host.live("loop0", "scheduler") == "mq-deadline"
        host.set_policy("[Match]\nname = loop*\n[Queue]\nscheduler = none\n")
        d.reload()
        wait_for(lambda: host.live("loop0", "scheduler") == "none", 30, "the policy's own choice back")
        assert host.trial() is None


def test_by_hand_start_and_stop(host):
    host.set_policy("[Match]\nname = loop*\n[Queue]\nscheduler = none\n")
    with host.feeder({"none": 5, "mq-deadline": 5, "kyber": 5, FOUND: 5}):
        host.start()
        r = control_call(host.sock_path, dict(command="trial", device="loop0"))
        assert not r["ok"] and "no candidate" in r["error"]["message"], r
        r = control_call(host.sock_path, dict(command="trial", device="loop0", candidates=["mq-deadline+fast"]))
        assert not r["ok"] and r["error"]["code"] == "invalid-argument", r
        out = ctl(host.ctl, host.sock_path, "trial", "loop0", "kyber", "mq-deadline")
        assert out.returncode == 0 and "begins at the next tick" in out.stdout, out.stdout + out.stderr
        t = host.wait_trial(candidate_in_force, "the candidate in force")
        assert t["started_by"] == "blkpolicyctl" and t["candidates"] == ["kyber", "mq-deadline"], t
        wait_for(lambda: host.live("loop0", "scheduler") == "kyber", 30, "the candidate written")
        out = ctl(host.ctl, host.sock_path, "trial", "loop0", "--stop")
        assert out.returncode == 0 and "stopped" in out.stdout, out.stdout + out.stderr
        wait_for(lambda: host.live("loop0", "scheduler") == "none", 30, "the incumbent back")
        t = host.trial()
        assert t["phase"] == "stopped" and t["outcomes"][0]["verdict"] == "stopped", t
        out = ctl(host.ctl, host.sock_path, "trial", "loop0", "--stop")
        assert out.returncode == 1 and "no-trial" in out.stderr, out.stdout + out.stderr


def test_a_candidate_the_device_lacks_is_skipped(host):
    """One the queue does not list (nor a module could load) is not run:
    skipped, with why, and nothing written; the next candidate still runs."""
    with host.feeder({"none": 6, "mq-deadline": 3, FOUND: 6}):
        host.start()
        host.call("trial", device="loop0", candidates=["deadline-x", "none"])
        t = host.wait_trial(done, "both candidates tried")
        assert [o["verdict"] for o in t["outcomes"]] == ["skipped", "skipped"], t
        assert "does not have it" in t["outcomes"][0]["reason"] and \
            "in force already" in t["outcomes"][1]["reason"], t
        assert host.live("loop0", "scheduler") == "none" and t["in_force"] is None, t
