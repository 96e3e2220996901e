# SPDX-License-Identifier: LGPL-2.1-or-later
"""--replay over the checked-in recordings gives the checked-in timelines,
byte for byte.

loop-phases is a real recording (loop devices, fio phases: idle, light qd1
at 400 IOPS, heavy qd16, idle, a short heavy burst) and ends in a torn
line, as a recording cut short by a crash would.

mix-phases is written by hand, in the same format: 4 KiB random reads,
4 KiB random writes, 512 KiB sequential writes, idle, and reads with 10%
writes, all busy ones at the same queue depth and utilisation. Its policy
flips on the mix (wpct, wkb); the idle ticks, whose mix is unknown, must
not make it leave.

loop-trial is a real recording of trials on the fake kernel (tests/trial.py,
BLKPOLICYD_RECORD_TRIAL): a policy's trial that mq-deadline wins, a trial by
hand that is aborted and one stopped by hand. Its timeline is the trials'.

trial-notes is written by hand: a trial not stepped at two ticks and stopped
at a third by the tick's notes, then one by hand from its start line; on a
second disk a policy trial the daemon set up again after a reload.

BLKPOLICYD_UPDATE_GOLDEN=1 rewrites the timelines instead."""
import os
import subprocess

import pytest


@pytest.fixture
def replay(blkpolicyd, top):
    here = os.path.join(top, "tests", "replay")

    def replay(name):
        timeline = os.path.join(here, name + ".timeline")
        r = subprocess.run([blkpolicyd, "--replay", os.path.join(here, name + ".jsonl"), "--config", "/dev/null",
                            "--policy-dir", os.path.join(here, "policies")], capture_output=True)
        print(r.stderr.decode(), end="")
        if os.environ.get("BLKPOLICYD_UPDATE_GOLDEN") == "1" and r.returncode == 0:
            with open(timeline, "wb") as f:
                f.write(r.stdout)
        want = open(timeline, "rb").read()
        assert r.returncode == 0 and r.stdout == want, \
            f"{name}: exit {r.returncode}, timeline differs:\n--- want\n{want.decode()}--- got\n{r.stdout.decode()}"
        return r
    return replay


def test_loop_phases(replay):
    r = replay("loop-phases")
    assert b"loop-phases.jsonl:55: not a recording line, skipping" in r.stderr, "the torn last line is reported"


def test_mix_phases(replay):
    r = replay("mix-phases")
    assert not r.stderr, "mix-phases: every line should be a recording line"


def test_loop_trial(replay):
    r = replay("loop-trial")
    assert not r.stderr, "loop-trial: every line should be a recording line"


def test_trial_notes(replay):
    r = replay("trial-notes")
    assert not r.stderr, "trial-notes: every line should be a recording line"
