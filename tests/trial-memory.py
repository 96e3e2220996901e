# SPDX-License-Identifier: LGPL-2.1-or-later
"""Trials' verdicts remembered, and taken again (issue #28), on the fake
kernel (no root): a verdict is kept per disk identity, model, kernel
release and trial in the --trial-memory file, so a restart takes the
remembered setting before the first write and runs no trial; another
kernel, another disk or an older verdict than max_age runs it again; a
workload of another shape (reads to writes) runs it again, and coming back
to a shape seen before takes that shape's verdict without one.

The fake disk's load (blkptest.diskstats.ServiceFeeder) is reads or writes
of 4 KiB; its busy time per byte follows the scheduler the daemon set.
Nothing sleeps for synchronisation: the tests wait on the device's trial
state, on status' tick count and on the fake sysfs."""
import json
import os
import random
import signal
import time

from blkptest.daemon import control_call, ctl, wait_for
from blkptest.faketree import write
# the fake disk and its daemon, trial.py's fixture
from trial import FOUND, POLICY, done, host  # noqa: F401

FAST_MQ = {"none": 6, "mq-deadline": 3, FOUND: 6}      # mq-deadline 2x faster
FAST_NONE = {"none": 3, "mq-deadline": 9, FOUND: 3}    # mq-deadline 3x slower: its trial aborts


def memory(host):
    with open(host.trial_memory) as f:
        return json.load(f)


def stop(host, d):
    d.stop()
    host.running.remove(d)


def test_a_restart_takes_the_remembered_verdict_before_any_write(host):
    with host.feeder(FAST_MQ) as load:
        d = host.start()
        host.wait_trial(done, "the trial's verdict")
        m = memory(host)
        (v,) = [v for v in m["verdicts"] if v["identity"] == "path:virtual/block/loop0"]
        assert (v["kernel"], v["trial"], v["kept"], v["verdict"]) == \
            ("6.18.44-fc-v657", "none > mq-deadline", "mq-deadline", "candidate-wins"), m
        assert v["shape"] == {"read_share": 1, "request_bytes": 4096} and abs(v["at"] - time.time()) < 600, v
        stop(host, d)
        assert host.live("loop0", "scheduler") == FOUND, "the stop puts back what the kernel had"
        steps_before = dict(load.steps)
        d = host.start(append_log=True)
        t = host.wait_trial(done, "the remembered verdict")
        assert t["recalled"]["verdict"] == "candidate-wins" and t["outcomes"] == [] and \
            t["in_force"] == "mq-deadline", t
        wait_for(lambda: host.live("loop0", "scheduler") == "mq-deadline", 30, "the remembered setting written")
        host.ticks_after(20)
        log = d.text()
        after = log[log.index("a verdict is remembered for this disk"):]
        writes = [line for line in after.splitlines() if line.startswith("loop0: scheduler ")]
        assert writes == ["loop0: scheduler bfq -> mq-deadline (trial)"], f"one write, never none first: {writes}"
        assert load.steps.get("none", 0) == steps_before.get("none", 0), (steps_before, load.steps)
        out = ctl(host.ctl, host.sock_path, "explain", "loop0")
        assert "remembered for this disk, kernel and trial: candidate-wins" in out.stdout, out.stdout


def test_another_kernel_or_disk_or_an_old_verdict_runs_the_trial_again(host):
    with host.feeder(FAST_MQ):
        d = host.start()
        host.wait_trial(done, "the trial's verdict")
        stop(host, d)
        good = memory(host)
        for name, edit in (("kernel", lambda v: v.update(kernel="6.18.43")),
                           ("age", lambda v: v.update(at=time.time() - 31 * 24 * 3600)),
                           ("trial", lambda v: v.update(trial="none > kyber"))):
            m = json.loads(json.dumps(good))
            for v in m["verdicts"]:
                edit(v)
            write(host.trial_memory, json.dumps(m))
            d = host.start(append_log=True)
            t = host.wait_trial(lambda t: t and t["outcomes"], f"a trial runs again ({name})")
            assert t["recalled"] is None, (name, t)
            stop(host, d)
        # another disk in the same place: a serial now
        write(host.trial_memory, json.dumps(good))
        write(os.path.join(host.root, "sys", "block", "loop0", "serial"), "BLKP-0001\n")
        d = host.start(append_log=True)
        t = host.wait_trial(done, "the new disk's own verdict")
        assert t["recalled"] is None and t["outcomes"][0]["verdict"] == "candidate-wins", t
        ids = {v["identity"] for v in memory(host)["verdicts"]}
        assert {"serial:BLKP-0001", "path:virtual/block/loop0"} <= ids, ids


def test_a_workload_of_another_shape_runs_it_again_and_each_shape_is_remembered(host):
    with host.feeder(FAST_MQ) as load:
        host.start()
        t = host.wait_trial(done, "the verdict on reads")
        assert t["outcomes"][0]["kept"] == "mq-deadline" and t["shape"]["read_share"] == 1, t
        # writes now, where mq-deadline is the slower: taken again
        load.service, load.mode = dict(FAST_NONE), "write"
        t = host.wait_trial(lambda t: t and t["retrials"] == 1 and t["phase"] == "done", "the verdict on writes")
        assert t["recalled"] is None and t["outcomes"][0]["kept"] == "none" and t["shape"]["read_share"] == 0, t
        wait_for(lambda: host.live("loop0", "scheduler") == "none", 30, "none back on writes")
        assert len(memory(host)["verdicts"]) == 2, memory(host)
        # reads again: the reads' verdict, remembered, no trial
        load.service, load.mode = dict(FAST_MQ), "read"
        t = host.wait_trial(lambda t: t and t["retrials"] == 2, "the reads' verdict again")
        assert t["phase"] == "done" and t["recalled"]["verdict"] == "candidate-wins" and t["outcomes"] == [], t
        wait_for(lambda: host.live("loop0", "scheduler") == "mq-deadline", 30, "mq-deadline back on reads")


def test_a_burst_of_another_kind_is_not_a_new_workload(host):
    with host.feeder(FAST_MQ) as load:
        host.start()
        host.wait_trial(done, "the verdict on reads")
        st = host.ticks_after(2)
        t0 = st["tick"]["count"]
        # writes for one window (0.5 s): it touches two spans at most, and a
        # change takes three in a row
        load.mode = "write"
        host.ticks_after(int(500 / 50))
        load.mode = "read"
        host.ticks_after(int(4 * 3 * 500 / 50))
        t = host.trial()
        assert t["retrials"] == 0 and t["phase"] == "done", (t, t0)


def test_a_workload_that_keeps_changing_spends_no_more_than_the_hours_switches(host):
    """A hostile load: reads and writes in turn every few windows, each
    shape's verdict remembered, so every change would be a switch. The
    budget is the device's across its trials and re-trials: after
    max_switches_per_hour scheduler writes (one more at most: a run's
    last switch, back to its incumbent, is never held) the verdict in
    force stays. The two trials take about 12 of the 20; without the
    device's budget the flips made 56 writes."""
    budget = 20
    host.set_policy(POLICY + f"max_switches_per_hour = {budget}\n")
    with host.feeder(FAST_MQ) as load:
        d = host.start()
        host.wait_trial(done, "the verdict on reads")
        load.service, load.mode = dict(FAST_NONE), "write"
        host.wait_trial(lambda t: t and t["retrials"] == 1 and t["phase"] == "done", "the verdict on writes")
        for i in range(24):     # 6 windows of each, 3 of them to confirm the change
            reads = i % 2 == 0
            load.service, load.mode = (dict(FAST_MQ), "read") if reads else (dict(FAST_NONE), "write")
            host.ticks_after(int(6 * 500 / 50))
        log = d.text()
        writes = [line for line in log.splitlines() if line.startswith("loop0: scheduler ")]
        # the first pass's write of the policy's none is not a trial's
        assert writes[0].startswith("loop0: scheduler bfq -> none "), writes
        assert 0 < len(writes) - 1 <= budget + 1, (len(writes), writes)
        assert "switches of the hour are spent: the verdict stays" in log, log[-2000:]
        t = host.trial()
        assert t["retrials"] >= 3 and t["phase"] == "done", t


def test_max_age_runs_it_again(host):
    host.set_policy(POLICY + "max_age = 3\n")
    with host.feeder(FAST_MQ):
        host.start()
        first = host.wait_trial(done, "the first verdict")
        at = memory(host)["verdicts"][0]["at"]
        t = host.wait_trial(lambda t: t and t["retrials"] >= 1 and t["phase"] == "done", "the verdict again", timeout=120)
        assert t["outcomes"][0]["kept"] == "mq-deadline" and first["retrials"] == 0, t
        assert memory(host)["verdicts"][0]["at"] >= at and len(memory(host)["verdicts"]) == 1, memory(host)


def test_a_bad_file_a_trial_by_hand_and_no_memory(host):
    write(host.trial_memory, "{not json")
    with host.feeder(dict(FAST_MQ, kyber=6)):
        d = host.start()
        host.wait_trial(done, "the verdict")
        assert "Cannot read the trials' verdicts" in d.text(), d.text()[-2000:]
        assert len(memory(host)["verdicts"]) == 1, "the bad file replaced"
        os.unlink(host.trial_memory)
        # by hand: not remembered (the admin's own question)
        host.call("trial", device="loop0", candidates=["kyber"])
        host.wait_trial(lambda t: t and t["started_by"] == "blkpolicyctl" and t["phase"] == "done", "by hand")
        assert not os.path.exists(host.trial_memory), "a trial by hand is not remembered"
        stop(host, d)
        # trial_memory = no (here --trial-memory no, over the harness' path): nothing kept
        host.start(extra=("--trial-memory", "no"), append_log=True)
        host.wait_trial(done, "the verdict, not remembered")
        host.ticks_after(5)
        assert not os.path.exists(host.trial_memory)


IDLE = {"none": 0, "mq-deadline": 0, "kyber": 0, FOUND: 0}
LOADS = {"read": (FAST_MQ, "read", 1000), "write": (FAST_NONE, "write", 1000), "idle": (IDLE, "read", 0)}
KEPT_BY_A_PAUSE = ("phase", "kept", "in_force", "retrials", "outcomes", "recalled")
WINDOW_TICKS = 10       # POLICY's window (0.5 s) at 50 ms ticks


def scheduler_writes(text):
    """The log's writes of loop0's scheduler (not what a paused device
    would change)."""
    return [line for line in text.splitlines()
            if line.startswith("loop0: scheduler ") and not line.startswith("loop0: scheduler would change")]


def test_a_hostile_random_schedule_keeps_the_budget_and_loses_nothing(host):
    """A seeded random schedule (BLKPOLICYD_ATTACK_SEED replays one) of
    loads, reads (mq-deadline 2x faster), writes (mq-deadline 3x slower)
    and idle, each from a third of a window to six windows, with operator
    actions between them: pause and resume, `trial --stop`, a trial of
    mq-deadline by hand, a reload of the same policy, and a reload that
    changes the [Trial] (another max_switches_per_hour; it also starts a
    policy trial again after a stop, so a schedule does not go quiet). The
    budget is small, 8 to 20.

    The allowance, from the code: every switch a trial makes is spent in
    the device's SwitchBudget (a run's switches, its last one, a stop's way
    back, a re-trial's or a recall's switch in device_trial_follow). Only a
    run's last switch (finish()) and a stop's way back are never held; all
    the others (go_to(), trial_again_allowed()) need the hour to have fewer
    than max_switches_per_hour spent. After the last held-checked switch of
    the hour, at most one unheld one can follow: a finish or a stop ends
    the run, and whatever starts next (a re-trial, a by-hand trial's
    candidate) is checked. So the scheduler writes of an hour are at most
    max_switches_per_hour + 1. Not spent, by design: the first pass (bfq ->
    none), the resume that writes a paused stop's way back (spent at the
    stop), and a reload that changes the [Trial]: the verdict it drops goes
    back at once (one write, not held) and the new [Trial] starts a new
    hour. So, with B1..Bn the budgets of the [Trial]s in turn: the writes
    under the first <= B1 + 1, under the k-th <= Bk + 1 + 1 + 1 (its
    put-back, and a write the hour before may have had in flight at the
    reload), and all of them <= (B1 + 1) + ... + (Bn + 1) + n - 1. The
    whole schedule takes well under an hour: one rolling hour.

    Also: the daemon answers status after every step; while loop0 is
    paused no scheduler is written (its log, and the fake sysfs); SIGTERM
    puts back bfq and exits 0; after a SIGKILL, a restart in observe mode
    puts back bfq too."""
    seed = int(os.environ.get("BLKPOLICYD_ATTACK_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"BLKPOLICYD_ATTACK_SEED={seed}")
    rng = random.Random(seed)
    budgets = [rng.randint(8, 20)]
    host.set_policy(POLICY + f"max_switches_per_hour = {budgets[0]}\n")
    actions = []
    with host.feeder(FAST_MQ) as load:
        d = host.start()
        marks = []     # the writes logged before each reload that changed the [Trial]

        def alive(step):
            assert d.proc.poll() is None, f"seed {seed}: the daemon died at {step}: {d.text()[-3000:]}"
            st = host.call("status")
            assert st["first_pass_done"] and st["reload_errors"] is None, (st, actions)

        def run_load(ticks=None):
            kind = rng.choice(sorted(LOADS))
            service, mode, ios = LOADS[kind]
            load.service, load.mode, load.ios = dict(service), mode, ios
            ticks = ticks or rng.randint(WINDOW_TICKS // 3, 6 * WINDOW_TICKS)
            actions.append(f"{kind} {ticks}")
            host.ticks_after(ticks)

        ticks_run = host.call("status")["tick"]["count"]
        while host.call("status")["tick"]["count"] - ticks_run < 700:
            roll = rng.random()
            if roll < 0.78:
                run_load()
            elif roll < 0.83:
                actions.append("pause")
                host.call("pause", device="loop0")
                host.ticks_after(2)     # a write in flight at the pause lands, a running trial stops
                was = host.trial()
                before, live = len(scheduler_writes(d.text())), host.live("loop0", "scheduler")
                for _ in range(rng.randint(1, 3)):
                    run_load()
                    assert host.live("loop0", "scheduler") == live, f"seed {seed}: a write while paused"
                assert len(scheduler_writes(d.text())) == before, \
                    f"seed {seed}: written while paused: {scheduler_writes(d.text())[before:]}"
                t = host.trial()        # left as it is: no re-trial, the verdict kept
                assert t == was or (t and was and all(t[k] == was[k] for k in KEPT_BY_A_PAUSE)), \
                    f"seed {seed}: paused, the trial went from {was} to {t}"
                actions.append("resume")
                host.call("resume", device="loop0")
            elif roll < 0.86:
                actions.append("stop")
                out = ctl(host.ctl, host.sock_path, "trial", "loop0", "--stop")
                assert out.returncode in (0, 1), out.stdout + out.stderr
            elif roll < 0.91:
                actions.append("by hand")
                out = ctl(host.ctl, host.sock_path, "trial", "loop0", "mq-deadline")
                assert out.returncode == 0, out.stdout + out.stderr
            elif roll < 0.95:
                actions.append("reload")
                d.reload()
            else:       # another [Trial]: what it kept is dropped, a new hour
                marks.append(len(scheduler_writes(d.text())))
                budgets.append(rng.choice([b for b in range(8, 21) if b != budgets[-1]]))
                actions.append(f"reload max_switches_per_hour = {budgets[-1]}")
                host.set_policy(POLICY + f"max_switches_per_hour = {budgets[-1]}\n")
                d.reload()
            alive(actions[-1])
        host.ticks_after(3 * WINDOW_TICKS)
        alive("the end")
        writes = scheduler_writes(d.text())
        what = f"seed {seed}, budgets {budgets}, actions {actions}, writes {writes}"
        print(f"{len(writes) - 1} switches, allowance {sum(b + 1 for b in budgets) + len(budgets) - 1}: {what}")
        assert writes[0].startswith("loop0: scheduler bfq -> none "), what
        # each [Trial]'s hour: its budget and its one unheld switch; after a
        # change, its put-back and one write the hour before had in flight
        bounds = [0, *marks, len(writes)]
        for k, b in enumerate(budgets):
            n = bounds[k + 1] - bounds[k] - (k == 0)
            allowed = b + 1 + (2 if k else 0)
            assert n <= allowed, f"{n} switches > {allowed} in the hour of [Trial] {k + 1}: {what}"
        allowed = sum(b + 1 for b in budgets) + len(budgets) - 1
        assert len(writes) - 1 <= allowed, f"{len(writes) - 1} switches > {allowed}: {what}"
        assert d.stop() == 0, f"SIGTERM: exit 0: {what}"
        host.running.remove(d)
        assert host.live("loop0", "scheduler") == FOUND, f"SIGTERM puts back the found value: {what}"
        # again, then a SIGKILL with the daemon's setting in force: observe puts back
        d = host.start(append_log=True)
        wait_for(lambda: host.live("loop0", "scheduler") != FOUND, 30, "a setting of the daemon's in force")
        d.signal(signal.SIGKILL)
        d.proc.wait(timeout=10)
        host.running.remove(d)
        d = host.start("tick_interval_ms = 50\nmode = observe\n", append_log=True)
        wait_for(lambda: host.live("loop0", "scheduler") == FOUND, 30, "the found value back in observe mode")
        assert d.stop() == 0
        host.running.remove(d)
    assert host.live("loop0", "scheduler") == FOUND and host.live("loop1", "scheduler") == FOUND


def test_a_paused_device_keeps_its_verdict_through_a_change_of_workload(host):
    """Paused, a device is left as it is: a workload that changes its
    shape meanwhile does not take the verdict again (a re-trial there would
    be stopped at once by the pause, and the verdict lost for good). The
    watch sees the change after the resume."""
    with host.feeder(FAST_MQ) as load:
        host.start()
        host.wait_trial(done, "the verdict on reads")
        wait_for(lambda: host.live("loop0", "scheduler") == "mq-deadline", 30, "the winner written")
        host.call("pause", device="loop0")
        load.service, load.mode = dict(FAST_NONE), "write"
        host.ticks_after(6 * WINDOW_TICKS)
        t = host.trial()
        assert t["phase"] == "done" and t["retrials"] == 0 and t["kept"] == "mq-deadline", t
        assert host.live("loop0", "scheduler") == "mq-deadline"
        host.call("resume", device="loop0")
        t = host.wait_trial(lambda t: t["retrials"] == 1 and t["phase"] == "done", "the verdict on writes")
        assert t["outcomes"][0]["kept"] == "none", t
        wait_for(lambda: host.live("loop0", "scheduler") == "none", 30, "none on writes")
